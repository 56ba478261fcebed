"""``chaos conform --protocol issue-lock``: replay the issue-lock vectors against a real store.

A vector (``vectors/issue-lock/<case>.json``, written from the spec; each names
the section it pins in ``spec_section``) is one strict JSON object::

    {"case": "...", "spec_section": "...", "description": "...",
     "seed": {<backends.issuelock.seed durable object>},
     "actions": [{"op": <operation> | "restart", "at": <instant>, "request": {...},
                  "expect": {"exit": 3, "envelope": {...}}, "save": {"name": "/json/pointer"}}, ...],
     "final": {"locks": {"remote/org/repo/n": {...} | null}, "branches": {"remote/org/repo/name": "$head"}}}

Replay: a fresh store per case, seeded through the privileged seed, then one
real call per action in a fresh ``chaos.host`` process (``restart`` SIGKILLs it
and starts another on the same storage) with the store's clock pinned to the
action's ``at``; an external program runs one process per call with its clock
file. After the last action the store is exported and ``final`` compared.

Matching: an expected object matches when each of its members matches (other
members are free); lists match element-wise and in length; ``"$name"`` is a
value saved earlier by ``save`` (a JSON pointer into that action's reply);
``"$any"`` any present value, ``"$absent"`` a missing member, ``"$nonnull"``
any value but null; ``{"$ne": X}`` anything but X. Heads and sessions differ
between stores, so vectors never write them literally: they save them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from backends.contract.jsonstrict import StrictJSONError, loads_strict
from backends.contract.values import parse_instant
from backends.issuelock.contract.codes import OPERATIONS
from chaos.conform.runner import CaseResult
from chaos.conform.suite import Report
from chaos.errors import UsageError

VECTORS_DIR = Path(__file__).resolve().parents[2] / "vectors" / "issue-lock"
CASE_KEYS = {"case", "spec_section", "description", "seed", "actions", "final"}
ACTION_KEYS = {"op", "at", "request", "expect", "save", "note"}
MISSING = object()


# --------------------------------------------------------------------------- loading


def load_cases(directory: Path, names: list[str] | None = None) -> list[dict]:
    """Every vector of ``directory`` (or the named ones), validated strictly."""
    if not directory.is_dir():
        raise UsageError(f"issue-lock vectors: {directory}: no such directory")
    cases = []
    for path in sorted(directory.glob("*.json")):
        try:
            doc = loads_strict(path.read_bytes())
        except StrictJSONError as e:
            raise UsageError(f"{path}: not strict JSON: {e}") from None
        _validate(path, doc)
        cases.append(doc)
    if names:
        known = {c["case"] for c in cases}
        missing = [n for n in names if n not in known]
        if missing:
            raise UsageError(f"issue-lock vectors: no case named {', '.join(missing)} in {directory}")
        cases = [c for c in cases if c["case"] in names]
    if not cases:
        raise UsageError(f"issue-lock vectors: no *.json case in {directory}")
    return cases


def _validate(path: Path, doc) -> None:
    def bad(why: str):
        raise UsageError(f"{path}: {why}")
    if not isinstance(doc, dict) or set(doc) - CASE_KEYS or not {"case", "spec_section", "seed", "actions"} <= set(doc):
        bad(f"a case is an object with {sorted(CASE_KEYS)} (case, spec_section, seed, actions required)")
    if path.stem != doc["case"]:
        bad(f"file name must be the case name {doc['case']!r}")
    if not isinstance(doc["actions"], list) or not doc["actions"]:
        bad("actions must be a non-empty list")
    for i, a in enumerate(doc["actions"]):
        if not isinstance(a, dict) or set(a) - ACTION_KEYS or "op" not in a:
            bad(f"actions[{i}]: an object with op and some of {sorted(ACTION_KEYS - {'op'})}")
        if a["op"] not in (*OPERATIONS, "restart"):
            bad(f"actions[{i}]: unknown op {a['op']!r}")
        if a["op"] != "restart" and ("request" not in a or "expect" not in a or "at" not in a):
            bad(f"actions[{i}]: an operation needs at, request and expect")
        if "at" in a:
            try:
                parse_instant(a["at"])
            except (TypeError, ValueError):
                bad(f"actions[{i}]: at is not an instant: {a['at']!r}")


# --------------------------------------------------------------------------- matching


def _resolve(value, saved: dict):
    if isinstance(value, str) and value.startswith("$") and value not in ("$any", "$absent", "$nonnull"):
        if value[1:] not in saved:
            raise KeyError(f"{value} was never saved")
        return saved[value[1:]]
    if isinstance(value, dict):
        return {k: _resolve(v, saved) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, saved) for v in value]
    return value


def match(expected, actual, path: str = "") -> list[str]:
    """Mismatch lines of ``actual`` against an already resolved ``expected``."""
    if expected == "$absent":
        return [] if actual is MISSING else [f"{path}: expected absent, got {json.dumps(actual)[:200]}"]
    if actual is MISSING:
        return [f"{path}: missing (expected {json.dumps(expected)[:200]})"]
    if expected == "$any":
        return []
    if expected == "$nonnull":
        return [] if actual is not None else [f"{path}: expected a non-null value"]
    if isinstance(expected, dict) and set(expected) == {"$ne"}:
        return [] if actual != expected["$ne"] else [f"{path}: expected anything but {json.dumps(actual)[:200]}"]
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected an object, got {json.dumps(actual)[:200]}"]
        out = []
        for k, v in expected.items():
            out += match(v, actual.get(k, MISSING), f"{path}/{k}")
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: expected {json.dumps(expected)[:200]}, got {json.dumps(actual)[:200]}"]
        out = []
        for i, (e, a) in enumerate(zip(expected, actual)):
            out += match(e, a, f"{path}/{i}")
        return out
    same = type(expected) is type(actual) and expected == actual
    return [] if same else [f"{path}: expected {json.dumps(expected)[:200]}, got {json.dumps(actual)[:200]}"]


def pointer(doc, ptr: str):
    node = doc
    for part in [p.replace("~1", "/").replace("~0", "~") for p in ptr.lstrip("/").split("/") if p]:
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise KeyError(f"no {ptr} in the reply")
    return node


# --------------------------------------------------------------------------- sessions


class HostedLockSession:
    """A store served by a fresh ``chaos.host`` process (sqlite, gitfile, python)."""

    def __init__(self, backend: str, options: dict):
        self.backend, self.options = backend, options
        self.dir = Path(tempfile.mkdtemp(prefix=f"chaos-conform-il-{backend}-"))
        self.host = None
        self.hosts = 0

    def spec(self) -> dict:
        if self.backend == "gitfile":
            return {"protocol": "issue-lock", "backend": "gitfile", "root": str(self.dir / "store")}
        spec = {"protocol": "issue-lock", "backend": self.backend, "path": str(self.dir / "locks.db")}
        if self.backend == "python":
            spec["factory"] = self.options["factory"]
        return spec

    def seed(self, durable: dict) -> None:
        from backends.registry import open_backend

        backend = open_backend(self.spec())
        try:
            backend.store.seed(durable)
        finally:
            backend.close()

    def _host(self):
        from chaos.host import HostClient

        if self.host is None:
            self.hosts += 1
            self.host = HostClient(self.spec(), log_path=str(self.dir / f"host-{self.hosts}.log"))
        return self.host

    def call(self, op: str, request: dict, at_ms: int):
        host = self._host()
        host.set_clock(at_ms)
        return host.call(op, request, timeout=60.0)

    def restart(self) -> None:
        if self.host is not None:
            self.host.kill()
            self.host = None

    def export(self) -> dict:
        self.restart()
        from backends.registry import open_backend

        backend = open_backend(self.spec())
        try:
            return backend.store.export_durable()
        finally:
            backend.close()

    def close(self) -> None:
        self.restart()
        shutil.rmtree(self.dir, ignore_errors=True)


class ExternalLockSession(HostedLockSession):
    """Any issue-lock CLI per its profile: one process per call, the clock
    pinned through the clock file it reads (``CHAOS_CLOCK_FILE``)."""

    def spec(self) -> dict:
        from chaos.issuelock.targets import DEFAULT_PROFILE
        from chaos.sut.base import resolve_command

        return {"protocol": "issue-lock", "backend": "external", "command": resolve_command(self.options["command"]),
                "profile": os.path.abspath(self.options.get("profile") or DEFAULT_PROFILE),
                "store": str(self.dir / "store"), "write_root": str(self.dir),
                "env": {"CHAOS_CLOCK_FILE": str(self.dir / "clock")}}

    def call(self, op: str, request: dict, at_ms: int):
        from backends.api import FileClock
        from backends.registry import open_backend

        FileClock(str(self.dir / "clock")).set(at_ms)
        return open_backend(self.spec()).call(op, request)

    def restart(self) -> None:
        return None   # every call is a fresh process already


def check_lock_backend(backend: str, options: dict) -> None:
    """``UsageError`` unless ``backend`` serves the issue-lock protocol with these options."""
    from chaos import sut

    s = sut.get(backend, conforms=True)
    if "issue-lock" not in s.protocols:
        stores = ", ".join(n for n in sut.names() if "issue-lock" in sut.get(n).protocols)
        raise UsageError(f"--backend {backend} does not serve the issue-lock protocol (issue-lock stores: {stores})")
    s.check(dict(options, protocol="issue-lock"))  # its own profile kind, not a work-claim profile


def open_lock_session(backend: str, options: dict):
    return ExternalLockSession(backend, options) if backend == "external" else HostedLockSession(backend, options)


# --------------------------------------------------------------------------- replay


def run_case(case: dict, session) -> CaseResult:
    start = time.monotonic()
    saved: dict = {}
    diff: list[str] = []
    transcript: list[dict] = []
    try:
        session.seed(case["seed"])
        for i, action in enumerate(case["actions"]):
            if action["op"] == "restart":
                session.restart()
                transcript.append({"event": "restart"})
                continue
            request = _resolve(action["request"], saved)
            reply = session.call(action["op"], request, parse_instant(action["at"]))
            got = {"exit": reply.exit, "envelope": reply.envelope}
            transcript.append(got)
            diff += match(_resolve(action["expect"], saved), got, f"actions[{i}]({action['op']})")
            for name, ptr in (action.get("save") or {}).items():
                try:
                    saved[name] = pointer(got, ptr)
                except KeyError as e:
                    diff.append(f"actions[{i}]: cannot save ${name}: {e}")
        if "final" in case:
            diff += _final(case["final"], session.export(), saved)
    except Exception as e:  # a harness failure shows in the diff, never as a pass
        diff.append(f"harness: {type(e).__name__}: {e}")
    finally:
        session.close()
    return CaseResult(case["case"], "fail" if diff else "pass", time.monotonic() - start, diff,
                      [f"pins: {case['spec_section']}"], transcript)


def _final(expected: dict, durable: dict, saved: dict) -> list[str]:
    locks = {f"{e['remote']}/{e['org']}/{e['repo']}/{e['issue_number']}": e["lock"] for e in durable["locks"]}
    branches = {f"{b['remote']}/{b['org']}/{b['repo']}/{b['name']}": b["head"] for b in durable["branches"]}
    out = []
    for key, want in (expected.get("locks") or {}).items():
        got = locks.get(key, MISSING)
        out += match("$absent" if want is None else _resolve(want, saved), got, f"final.locks[{key}]")
    for key, want in (expected.get("branches") or {}).items():
        out += match(_resolve(want, saved), branches.get(key, MISSING), f"final.branches[{key}]")
    return out


def run_issue_lock_conformance(backend: str, vectors: Path | None = None, names: list[str] | None = None,
                               options: dict | None = None, on_result=None, on_loaded=None) -> Report:
    directory = Path(vectors) if vectors is not None else VECTORS_DIR
    cases = load_cases(directory, names)
    options = dict(options or {})
    check_lock_backend(backend, options)  # before any case runs
    if on_loaded is not None:
        on_loaded(cases)
    report = Report(backend, str(directory))
    for case in cases:
        result = run_case(case, open_lock_session(backend, options))
        report.results.append(result)
        if on_result is not None:
            on_result(result)
    return report
