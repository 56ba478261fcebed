"""Strict loader of the conformance manifests (vectors.md §2, §3, §10).

``load_cases(root, names)`` returns one ``Case`` per ``<case>/manifest.json``.
Any defect (bad UTF-8, a duplicate member at any depth, ``NaN``, a missing
trailing LF, a wrong member set, non-canonical base64, a digest that does not
bind, a symlink, a missing directory) raises ``chaos.errors.UsageError`` with
one line naming the file and the problem. A manifest that loads is one the
runner can replay without tripping over its shape.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from backends.contract.digests import operation_digest, sha256_ref
from backends.contract.jsonstrict import StrictJSONError, loads_strict
from backends.contract.values import decode_canonical_base64, is_instant
from chaos.conform.diff import strict_equal
from chaos.conform.safefiles import check_dir_under, check_root, read_regular
from chaos.errors import UsageError

TOP_LEVEL = ("case", "fixture_version", "status", "description", "coverage", "clock",
             "source_files", "initial", "actions", "expected")
SOURCE_PATHS = ("ledger/before.md", "ledger/after.md")
CLOCK = {"authority": "backend-effective-utc", "client_timestamps_trusted": False,
         "durable_floor_scope": "ledger-namespace"}
FAULT_NAMES = ("clock_floor_persist", "claim-response-loss", "publication-response-loss",
               "publication-outcome-unknown")
DURABLE_ARRAYS = ("clock_floors", "claims", "ledgers", "publication_outcomes")

#: action operation -> the member set it must carry exactly
ACTION_MEMBERS: dict[str, frozenset] = {
    "work-claim.capabilities": frozenset({"operation", "request"}),
    "work-claim.read": frozenset({"operation", "request", "physical_now"}),
    "work-claim.acquire": frozenset({"operation", "request", "physical_now"}),
    "work-claim.renew": frozenset({"operation", "request", "physical_now"}),
    "work-claim.release": frozenset({"operation", "request", "physical_now"}),
    "legacy-transition-v1.commit": frozenset({"operation", "request", "physical_now"}),
    "legacy-create-v1.commit": frozenset({"operation", "request", "physical_now"}),
    "ledger-publication.preflight": frozenset({"operation", "request"}),
    "ledger-publication.commit": frozenset({"operation", "operation_id", "request", "physical_now"}),
    "ledger-publication.read": frozenset({"operation", "request"}),
    "control.inject-fault": frozenset({"operation", "target"}),
    "control.restart": frozenset({"operation"}),
    "work-claim.claim-adopt": frozenset({"operation", "request", "physical_now"}),   # api_version 2
}
PUBLISH_OPS = ("ledger-publication.preflight", "ledger-publication.commit")


@dataclass(frozen=True)
class Case:
    """One loaded, checked manifest."""

    name: str
    path: Path
    manifest: dict
    sources: dict[str, bytes] = field(repr=False)

    @property
    def api_version(self) -> int:
        """The work-claim api_version the case was written for: version 2
        manifests (the program's own ``spec/fixtures/work-claims``) declare the
        backend's ``write_serialization`` or use a version 2 member (revision
        adoption); version 1 manifests have neither."""
        m = self.manifest
        v2 = "write_serialization" in m["initial"]["backend"] or any(
            a["operation"] == "work-claim.claim-adopt" for a in m["actions"]) or any(
            "committed_revision" in led for led in m["initial"]["durable"]["ledgers"])
        return 2 if v2 else 1

    @property
    def initial(self) -> dict:
        return self.manifest["initial"]

    @property
    def actions(self) -> list[dict]:
        return self.manifest["actions"]

    @property
    def expected(self) -> dict:
        return self.manifest["expected"]


class _Checker:
    """Raises ``UsageError("<file>: <where>: <problem>")``."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, problem: str) -> None:
        where = f"{where}: " if where else ""
        raise UsageError(f"{self.path}: {where}{problem}".replace("\n", " "))

    def obj(self, value, where: str, members: tuple | frozenset | None = None) -> dict:
        if not isinstance(value, dict):
            self.fail(where, "must be a JSON object")
        if members is not None and set(value) != set(members):
            missing = sorted(set(members) - set(value))
            extra = sorted(set(value) - set(members))
            self.fail(where, f"wrong members (missing {missing}, unexpected {extra})")
        return value

    def arr(self, value, where: str) -> list:
        if not isinstance(value, list):
            self.fail(where, "must be a JSON array")
        return value

    def string(self, value, where: str) -> str:
        if not isinstance(value, str):
            self.fail(where, "must be a string")
        return value


def discover(root: Path) -> list[str]:
    """Case directory names under ``root`` (every directory except ``ledger``)."""
    check_root(root)
    names = []
    for entry in sorted(os.listdir(root)):
        st = os.lstat(root / entry)
        if stat.S_ISLNK(st.st_mode):
            raise UsageError(f"{root / entry}: symlinks are not allowed in fixture paths")
        if stat.S_ISDIR(st.st_mode) and entry != "ledger":
            names.append(entry)
    if not names:
        raise UsageError(f"{root}: no case directories found")
    return names


def load_cases(root: Path, names: list[str] | None = None) -> list[Case]:
    """Load ``names`` (default: every case directory) strictly."""
    root = Path(root)
    all_names = discover(root)
    if names:
        unknown = [n for n in names if n not in all_names]
        if unknown:
            raise UsageError(f"{root}: no such case {unknown[0]!r} (known: {', '.join(all_names)})")
        all_names = [n for n in all_names if n in names]
    sources = {rel: read_regular(root, rel) for rel in SOURCE_PATHS}
    return [load_case(root, name, sources) for name in all_names]


def load_case(root: Path, name: str, sources: dict[str, bytes] | None = None) -> Case:
    root = Path(root)
    check_dir_under(root, name)
    rel = f"{name}/manifest.json"
    raw = read_regular(root, rel)
    path = root / rel
    c = _Checker(path)
    try:
        doc = loads_strict(raw)
    except StrictJSONError as e:
        at = f" at {e.pointer}" if e.pointer else ""
        c.fail("", f"invalid JSON{at}: {e.message}")
    if not raw.endswith(b"\n") or raw.endswith(b"\n\n") or raw.endswith(b"\r\n"):
        c.fail("", "must end with exactly one LF")
    if sources is None:
        sources = {r: read_regular(root, r) for r in SOURCE_PATHS}
    _check_manifest(c, doc, name, sources)
    return Case(name=name, path=path, manifest=doc, sources=sources)


# --------------------------------------------------------------------------- structure


def _check_manifest(c: _Checker, doc, name: str, sources: dict[str, bytes]) -> None:
    c.obj(doc, "top level", TOP_LEVEL)
    if doc["case"] != name:
        c.fail("case", f"{doc['case']!r} does not equal the directory name {name!r}")
    if type(doc["fixture_version"]) is not int or doc["fixture_version"] != 2:
        c.fail("fixture_version", "must be the integer 2")
    if doc["status"] != "normative-reference-model":
        c.fail("status", "must be 'normative-reference-model'")
    c.string(doc["description"], "description")
    cov = c.arr(doc["coverage"], "coverage")
    if not all(isinstance(x, str) for x in cov) or cov != sorted(cov):
        c.fail("coverage", "must be a sorted array of strings")
    if doc["clock"] != CLOCK or type(doc["clock"].get("client_timestamps_trusted")) is not bool:
        c.fail("clock", f"must be {CLOCK}")
    digests = _check_sources(c, doc["source_files"], sources)
    _check_state(c, doc["initial"], "initial", digests)
    actions = c.arr(doc["actions"], "actions")
    for i, action in enumerate(actions):
        _check_action(c, action, f"actions[{i}]", digests)
    expected = c.obj(doc["expected"], "expected", ("transcript", "final"))
    transcript = c.arr(expected["transcript"], "expected.transcript")
    if len(transcript) != len(actions):
        c.fail("expected.transcript", f"has {len(transcript)} entries for {len(actions)} actions")
    for i, entry in enumerate(transcript):
        _check_entry(c, entry, f"expected.transcript[{i}]")
    _check_state(c, expected["final"], "expected.final", digests)
    _check_publication_reads(c, doc)


def _check_sources(c: _Checker, files, sources: dict[str, bytes]) -> dict[str, str]:
    """source_files bind to the on-disk ledger files; returns digest -> base64."""
    c.arr(files, "source_files")
    if len(files) != 2:
        c.fail("source_files", "must have exactly 2 entries")
    out: dict[str, str] = {}
    for i, (entry, rel) in enumerate(zip(files, SOURCE_PATHS)):
        where = f"source_files[{i}]"
        c.obj(entry, where, ("path", "sha256", "source_base64"))
        if entry["path"] != rel:
            c.fail(f"{where}.path", f"must be {rel!r}")
        data = decode_canonical_base64(entry["source_base64"])
        if data is None:
            c.fail(f"{where}.source_base64", "is not canonical base64")
        if data != sources[rel]:
            c.fail(f"{where}.source_base64", f"does not decode to the bytes of {rel}")
        if entry["sha256"] != sha256_ref(sources[rel]):
            c.fail(f"{where}.sha256", f"digest mismatch with {rel} ({sha256_ref(sources[rel])})")
        out[entry["sha256"]] = entry["source_base64"]
    return out


def _check_state(c: _Checker, state, where: str, digests: dict[str, str]) -> None:
    c.obj(state, where, ("backend", "faults", "durable", "process"))
    members = ("name", "coordination_scope", "durability", "ledger_binding", "write_paths")
    if "write_serialization" in (state["backend"] if isinstance(state.get("backend"), dict) else {}):
        members += ("write_serialization",)   # api_version 2 manifests
    backend = c.obj(state["backend"], f"{where}.backend", members)
    if "write_serialization" in backend:
        ws = c.obj(backend["write_serialization"], f"{where}.backend.write_serialization", ("scope", "blocks_until"))
        for k, v in ws.items():
            c.string(v, f"{where}.backend.write_serialization.{k}")
    for key in ("name", "coordination_scope", "durability"):
        c.string(backend[key], f"{where}.backend.{key}")
    binding = c.obj(backend["ledger_binding"], f"{where}.backend.ledger_binding", ("mode", "namespaces"))
    if not all(isinstance(n, str) for n in c.arr(binding["namespaces"], f"{where}.backend.ledger_binding.namespaces")):
        c.fail(f"{where}.backend.ledger_binding.namespaces", "must be strings")
    wp = c.obj(backend["write_paths"], f"{where}.backend.write_paths")
    if not all(isinstance(v, str) for v in wp.values()):
        c.fail(f"{where}.backend.write_paths", "values must be strings")
    faults = c.obj(state["faults"], f"{where}.faults")
    for k, v in faults.items():
        if k not in FAULT_NAMES or type(v) is not bool:
            c.fail(f"{where}.faults.{k}", f"must be one of {list(FAULT_NAMES)} with a boolean")
    durable = c.obj(state["durable"], f"{where}.durable", DURABLE_ARRAYS)
    for i, f in enumerate(c.arr(durable["clock_floors"], f"{where}.durable.clock_floors")):
        c.obj(f, f"{where}.durable.clock_floors[{i}]", ("ledger_namespace", "observed_at"))
        if not is_instant(f["observed_at"]):
            c.fail(f"{where}.durable.clock_floors[{i}].observed_at", "is not an instant")
    for i, rec in enumerate(c.arr(durable["claims"], f"{where}.durable.claims")):
        c.obj(rec, f"{where}.durable.claims[{i}]", ("ledger_namespace", "item_id", "last_epoch", "active"))
    for i, led in enumerate(c.arr(durable["ledgers"], f"{where}.durable.ledgers")):
        w = f"{where}.durable.ledgers[{i}]"
        v2 = tuple(k for k in ("committed_revision", "authorized_revision", "adoptions") if k in led)
        c.obj(led, w, ("ledger_namespace", "item_id", "revision", "source_base64") + v2)
        for k in ("committed_revision", "authorized_revision"):
            if k in led and led[k] not in digests:
                c.fail(f"{w}.{k}", "is not a source file digest")
        for j, ad in enumerate(c.arr(led.get("adoptions", []), f"{w}.adoptions")):
            c.obj(ad, f"{w}.adoptions[{j}]", ("adopted_at", "adopted_by", "from_revision", "to_revision"))
        data = decode_canonical_base64(led["source_base64"])
        if data is None:
            c.fail(f"{w}.source_base64", "is not canonical base64")
        if led["revision"] != sha256_ref(data):
            c.fail(f"{w}.revision", "digest mismatch with its source_base64")
        if digests.get(led["revision"]) != led["source_base64"]:
            c.fail(f"{w}.source_base64", "does not equal one of the source files")
    for i, out in enumerate(c.arr(durable["publication_outcomes"], f"{where}.durable.publication_outcomes")):
        w = f"{where}.durable.publication_outcomes[{i}]"
        c.obj(out, w, ("operation_id", "ledger_namespace", "item_id", "request", "operation_digest", "envelope"))
        _check_digest(c, out, w)
        c.obj(out["envelope"], f"{w}.envelope", ("exit", "stdout"))
    process = c.obj(state["process"], f"{where}.process", ("preflights",))
    for i, pre in enumerate(c.arr(process["preflights"], f"{where}.process.preflights")):
        w = f"{where}.process.preflights[{i}]"
        c.obj(pre, w, ("operation_id", "ledger_namespace", "item_id", "request", "operation_digest"))
        _check_digest(c, pre, w)


def _check_digest(c: _Checker, rec: dict, where: str) -> None:
    req = c.obj(rec["request"], f"{where}.request")
    if rec["operation_digest"] != operation_digest(req):
        c.fail(f"{where}.operation_digest", "digest mismatch with the canonical digest of its request")
    for key in ("operation_id", "ledger_namespace", "item_id"):
        if req.get(key) != rec[key]:
            c.fail(f"{where}.{key}", "differs from the same member of its request")


def _check_action(c: _Checker, action, where: str, digests: dict[str, str]) -> None:
    c.obj(action, where)
    op = action.get("operation")
    if op not in ACTION_MEMBERS:
        c.fail(f"{where}.operation", f"unknown operation {op!r}")
    c.obj(action, where, ACTION_MEMBERS[op])
    if "physical_now" in action and not is_instant(action["physical_now"]):
        c.fail(f"{where}.physical_now", "is not an instant YYYY-MM-DDTHH:MM:SS.mmmZ")
    if op == "control.inject-fault" and action["target"] not in FAULT_NAMES:
        c.fail(f"{where}.target", f"unknown fault {action['target']!r}")
    if "request" in action:
        c.obj(action["request"], f"{where}.request")
    if op == "work-claim.capabilities" and action["request"] != {}:
        c.fail(f"{where}.request", "must be {}")
    if op in PUBLISH_OPS:
        req = action["request"]
        if op == "ledger-publication.commit" and action["operation_id"] != req.get("operation_id"):
            c.fail(f"{where}.operation_id", "differs from request.operation_id")
        if digests.get(req.get("candidate_sha256")) != req.get("candidate_source_base64"):
            c.fail(f"{where}.request.candidate_source_base64", "does not match a source file and its digest")
        if req.get("expected_revision") not in digests:
            c.fail(f"{where}.request.expected_revision", "is not a source file digest")


def _check_entry(c: _Checker, entry, where: str) -> None:
    c.obj(entry, where)
    if "event" in entry:
        c.string(entry["event"], f"{where}.event")
        return
    c.obj(entry, where, ("exit", "stdout"))
    if type(entry["exit"]) is not int:
        c.fail(f"{where}.exit", "must be an integer")
    c.obj(entry["stdout"], f"{where}.stdout")


def _check_publication_reads(c: _Checker, doc: dict) -> None:
    """Each successful publication read reports an outcome that is stored in
    ``expected.final`` with the same digest and envelope (§10)."""
    stored = {(o["operation_id"], o["ledger_namespace"], o["item_id"]): o
              for o in doc["expected"]["final"]["durable"]["publication_outcomes"]}
    for i, (action, entry) in enumerate(zip(doc["actions"], doc["expected"]["transcript"])):
        if action["operation"] != "ledger-publication.read" or entry.get("exit") != 0:
            continue
        result = entry["stdout"].get("result")
        if not isinstance(result, dict):
            c.fail(f"expected.transcript[{i}].stdout.result", "must be an object")
        key = (result.get("operation_id"), result.get("ledger_namespace"), result.get("item_id"))
        out = stored.get(key)
        if out is None or not strict_equal(out["operation_digest"], result.get("operation_digest")) \
                or not strict_equal(out["envelope"], result.get("outcome")):
            c.fail(f"expected.transcript[{i}].stdout.result", "does not equal a stored outcome of expected.final")
