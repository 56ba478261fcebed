"""The issue-lock stores as systems under test: one object per store, with declared abilities.

Each object is used alike by ``chaos run --workload issue-lock`` (the runner
and the nemeses), by ``chaos conform --protocol issue-lock`` and by ``chaos
doctor``::

    store = make_lock_target(name, cfg, run_dir_or_tmp, note_pid, note_dir)
    store.abilities                      # the nemeses it supports: name -> what they hit
    store.setup(None, durable)           # provision + seed (privileged path)
    store.spec                           # what every worker host opens
    store.export()                       # final durable state
    store.close()

* ``sqlite``: ``locks.db`` in the directory; every worker process opens it.
* ``gitfile``: ``locks/`` beside real git repositories in ``store/``.
* ``external``: any issue-lock CLI (``--command``) driven per its profile
  (``--profile``, default ``profiles/issuelock-chaos-sqlite.yaml``), seeded and
  exported through its privileged ``admin`` commands, one process per op.

The decisions run inside the worker host processes (or the CLI children they
start), so every worker nemesis applies: kill, pause, clock (libfaketime moves
the deciding process's clock), fsync (the EIO shim in the deciding process and
its git children), restart. ``lost-reply`` is not offered: the host's
after-commit faults are defined for work-claim operation classes only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from chaos.errors import SetupFailed, UsageError

STORES = ("sqlite", "gitfile", "external")
DEFAULT_PROFILE = str(Path(__file__).resolve().parents[2] / "profiles" / "issuelock-chaos-sqlite.yaml")

#: what each worker nemesis hits, per store (``chaos doctor``, docs)
WORKER_ABILITIES = {
    "kill": "worker processes (the deciding process): SIGKILL + reap",
    "pause": "worker processes: SIGSTOP/SIGCONT (a paused holder of the store's lock makes others wait)",
    "clock": "worker wall clocks (the store decides by its own clock): libfaketime",
    "fsync": "worker fsyncs (SQLite commits / lock files and git objects): EIO shim",
    "restart": "worker processes: drop state, reopen the store",
}


def _open(spec: dict):
    from backends.registry import open_backend

    return open_backend(spec)


class LockTarget:
    name = ""
    abilities = WORKER_ABILITIES

    def __init__(self, cfg, base_dir: str, note_pid: Callable[[int], None] | None = None,
                 note_dir: Callable[[str], None] | None = None):
        self.cfg = cfg
        self.base_dir = base_dir
        self.note_pid = note_pid or (lambda _pid: None)
        self.note_dir = note_dir or (lambda _d: None)
        self.spec: dict = {}
        self.capabilities = None   # the issue-lock protocol has no capabilities operation
        self.server = None

    def make_spec(self) -> dict:
        raise NotImplementedError

    def setup(self, _namespaces, durable: dict) -> None:
        self.spec = self.make_spec()
        backend = _open(self.spec)
        try:
            backend.store.seed(durable)
        except Exception as e:
            raise SetupFailed(f"{self.name} issue-lock store setup failed: {type(e).__name__}: {e}") from None
        finally:
            backend.close()

    def export(self) -> dict:
        backend = _open(self.spec)
        try:
            return backend.store.export_durable()
        finally:
            backend.close()

    def close(self) -> None:
        return None

    def describe(self) -> dict:
        return {"backend": self.name, "protocol": "issue-lock", "spec": dict(self.spec)}


class SqliteLockTarget(LockTarget):
    name = "sqlite"

    def make_spec(self) -> dict:
        return {"protocol": "issue-lock", "backend": "sqlite", "path": os.path.join(self.base_dir, "locks.db")}


class GitFileLockTarget(LockTarget):
    name = "gitfile"

    def make_spec(self) -> dict:
        return {"protocol": "issue-lock", "backend": "gitfile", "root": os.path.join(self.base_dir, "store")}


class ExternalLockTarget(LockTarget):
    name = "external"

    def make_spec(self) -> dict:
        from backends.issuelock.external import LockProfileError, load_lock_profile
        from chaos.targets import resolve_command

        command = getattr(self.cfg, "backend_command", None)
        if not command:
            raise UsageError("--workload issue-lock --backend external needs --command '...'")
        profile = os.path.abspath(getattr(self.cfg, "profile", None) or DEFAULT_PROFILE)
        try:
            load_lock_profile(profile)
        except LockProfileError as e:
            raise UsageError(str(e)) from None
        return {"protocol": "issue-lock", "backend": "external", "command": resolve_command(command),
                "profile": profile, "store": os.path.join(self.base_dir, "store")}


class PythonLockTarget(LockTarget):
    """An outside issue-lock store written as a Python class (``--factory``),
    given the SQLite path like the sqlite store (the suite's planted bugs)."""

    name = "python"

    def make_spec(self) -> dict:
        return {"protocol": "issue-lock", "backend": "python", "factory": self.cfg.factory,
                "path": os.path.join(self.base_dir, "locks.db")}


TABLE = {"sqlite": SqliteLockTarget, "gitfile": GitFileLockTarget, "external": ExternalLockTarget,
         "python": PythonLockTarget}


def make_lock_target(name: str, cfg, base_dir: str, note_pid=None, note_dir=None) -> LockTarget:
    if name not in TABLE:
        raise UsageError(f"backend {name!r} does not run the issue-lock protocol (known: {', '.join(TABLE)})")
    return TABLE[name](cfg, base_dir, note_pid, note_dir)


def support(backend: str) -> dict[str, tuple[bool, str]]:
    """Per nemesis: (works here, what it hits or why not), for an issue-lock store."""
    from chaos.nemesis import DEFAULT_ORDER, NEMESES, mechanisms

    have = mechanisms()
    out = {}
    for name in DEFAULT_ORDER:
        what = TABLE[backend].abilities.get(name) if backend in TABLE else None
        if what is None:
            out[name] = (False, f"not available for the issue-lock protocol on {backend}")
            continue
        missing = [m for m in NEMESES[name]({"workers": 1, "backend": backend}).requires
                   if not have.get(m, (False, ""))[0]]
        out[name] = (False, f"needs {', '.join(missing)}") if missing else (True, what)
    return out
