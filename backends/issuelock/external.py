"""Drive any program that speaks the issue-lock CLI convention, per its profile.

The convention (what ``chaos lock-backend NAME`` speaks): one invocation per
operation, ``<command> <op> --store DIR --input -`` with the raw request on
stdin, exactly one JSON object + LF on stdout, and the protocol's exit codes
(0 / 2 / 3 / 6, ``backends.issuelock.contract.codes``). Privileged scaffolding
(never a write path): ``admin seed --store DIR --input -`` and ``admin export
--store DIR``.

A profile (``profiles/issuelock-*.yaml``) says how a program differs::

    name: issuelock-chaos-sqlite
    protocol: issue-lock            # required: a work-claim profile is refused
    timeout_s: 60
    argv: {op: [template ...]}      # {store} is the store directory
    admin: {seed: [...], export: [...]}
    busy: {exit: 6, code: store_unavailable, reason: database-locked, retry: {attempts: 20, backoff_ms: 50}}

Spec keys: ``command`` (prefix, ``shlex``-split), ``profile`` (path or dict),
``store`` (directory), ``env`` (extra environment). A crash, timeout or an
unparseable reply raises ``backends.external.Indeterminate`` (the harness
records ``info``). The program's clock is its process clock (libfaketime moves
it; ``CHAOS_CLOCK_FILE`` is passed through ``env`` when a harness pins it).
"""

from __future__ import annotations

import copy
import os
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from backends.contract.records import Reply
from backends.contract.jsonstrict import compact_json
from backends.external.process import Indeterminate, run_cli
from backends.external.profile import Busy
from backends.issuelock.contract.codes import OPERATIONS

__all__ = ["ExternalLockBackend", "LockProfile", "load_lock_profile", "open_backend", "Indeterminate"]

CONVENTION_ARGV = {op: [op, "--store", "{store}", "--input", "-"] for op in OPERATIONS}
CONVENTION_ADMIN = {"seed": ["admin", "seed", "--store", "{store}", "--input", "-"],
                    "export": ["admin", "export", "--store", "{store}"]}


class LockProfileError(ValueError):
    pass


@dataclass
class LockBusy(Busy):
    """The work-claim profile's busy rule, read from an issue-lock reply
    (``reason_code`` + ``details.reason`` instead of ``error``)."""

    code: str = "store_unavailable"
    reason: str = "database-locked"

    def matches(self, code: int, envelope: dict) -> bool:
        return (code == self.exit and isinstance(envelope, dict) and envelope.get("reason_code", envelope.get(
            "refusal_code")) == self.code and (envelope.get("details") or {}).get("reason") == self.reason)


@dataclass
class LockProfile:
    name: str
    protocol: str = "issue-lock"
    timeout_s: float = 30.0
    argv: dict = field(default_factory=lambda: copy.deepcopy(CONVENTION_ARGV))
    admin: dict = field(default_factory=lambda: copy.deepcopy(CONVENTION_ADMIN))
    busy: LockBusy | None = None


def load_lock_profile(source) -> LockProfile:
    if isinstance(source, dict):
        doc = copy.deepcopy(source)
    else:
        try:
            doc = yaml.safe_load(Path(source).read_text())
        except (OSError, yaml.YAMLError) as e:
            raise LockProfileError(f"cannot read profile {source}: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
        raise LockProfileError(f"profile {source}: a mapping with a 'name' is required")
    if doc.get("protocol") != "issue-lock":
        raise LockProfileError(f"profile {source}: not an issue-lock profile (protocol: {doc.get('protocol')!r})")
    unknown = set(doc) - set(LockProfile.__dataclass_fields__)
    if unknown:
        raise LockProfileError(f"profile {source}: unknown members {sorted(unknown)}")
    argv = copy.deepcopy(CONVENTION_ARGV)
    argv.update(doc.pop("argv", None) or {})
    bad = set(argv) - set(OPERATIONS)
    if bad:
        raise LockProfileError(f"profile {source}: argv for unknown operations {sorted(bad)}")
    admin = copy.deepcopy(CONVENTION_ADMIN)
    admin.update(doc.pop("admin", None) or {})
    busy = doc.pop("busy", None)
    if busy is not None:
        retry = busy.pop("retry", {}) or {}
        busy = LockBusy(**busy, **retry)
    return LockProfile(**doc, argv=argv, admin=admin, busy=busy)


class _AdminStore:
    """``store.seed`` / ``store.export_durable`` through the privileged admin commands."""

    def __init__(self, backend: "ExternalLockBackend"):
        self.backend = backend

    def seed(self, durable: dict) -> None:
        code, out = self.backend.admin("seed", compact_json(durable))
        if code != 0:
            raise RuntimeError(f"admin seed failed (exit {code}): {out}")

    def export_durable(self) -> dict:
        code, out = self.backend.admin("export")
        if code != 0:
            raise RuntimeError(f"admin export failed (exit {code}): {out}")
        return out

    def reopen(self) -> None:
        return None

    def close(self) -> None:
        return None


class ExternalLockBackend:
    protocol = "issue-lock"

    def __init__(self, spec: dict):
        if not spec.get("command") or not spec.get("store"):
            raise ValueError('an external issue-lock backend needs "command" and "store"')
        self.prefix = shlex.split(spec["command"])
        self.profile = load_lock_profile(spec["profile"]) if spec.get("profile") else LockProfile("convention")
        self.store_dir = spec["store"]
        self.env = dict(spec.get("env") or {})
        # what the program may write (backends.external.confine): beneath its run's or case's directory
        root = spec.get("write_root")
        self.write_roots = (root,) if root else (self.store_dir,)
        self.tmpdir = os.path.join(root, "tmp", "program") if root else os.path.join(self.store_dir, ".program-tmp")
        self.store = _AdminStore(self)
        self.name = self.profile.name
        self.invocations = 0

    def _argv(self, template: list) -> list:
        return self.prefix + [t.replace("{store}", self.store_dir) for t in template]

    def call(self, op: str, request: bytes | dict) -> Reply:
        template = self.profile.argv.get(op)
        if template is None:
            raise ValueError(f"profile {self.profile.name!r} has no command for {op!r}")
        raw = bytes(request) if not isinstance(request, dict) else compact_json(request)
        busy = self.profile.busy
        for attempt in range(busy.attempts if busy else 1):
            self.invocations += 1
            code, envelope = self._run(self._argv(template), raw)
            if busy is None or not busy.matches(code, envelope) or attempt == busy.attempts - 1:
                return Reply(code, envelope)
            time.sleep(busy.backoff_ms / 1000)
        raise AssertionError("unreachable")

    def admin(self, what: str, stdin: bytes = b"") -> tuple[int, dict]:
        return self._run(self._argv(self.profile.admin[what]), stdin)

    def _run(self, argv: list, stdin: bytes) -> tuple[int, dict]:
        """One confined invocation: it writes only beneath ``write_roots``."""
        os.makedirs(self.tmpdir, exist_ok=True)
        return run_cli(argv, stdin, {"TMPDIR": self.tmpdir, **self.env}, self.profile.timeout_s,
                       write_roots=self.write_roots)

    def restart(self) -> None:
        return None   # every operation is a fresh process already

    def close(self) -> None:
        return None


def open_backend(spec: dict, clock=None, hooks=None) -> ExternalLockBackend:
    return ExternalLockBackend(spec)
