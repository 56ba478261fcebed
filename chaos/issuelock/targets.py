"""The issue-lock stores as systems under test: one object per store, with declared abilities.

Each object is used alike by ``chaos run --workload issue-lock`` (the runner
and the nemeses), by ``chaos conform --protocol issue-lock`` and by ``chaos
doctor``::

    store = sut.get(name).issue_lock_target(cfg, run_or_dir, note_pid, note_dir)
    store.setup(None, durable)           # provision + seed (privileged path)
    store.spec                           # what every worker host opens
    store.export()                       # final durable state
    store.close()

* ``sqlite``: ``locks.db`` in the directory; every worker process opens it.
* ``gitfile``: ``locks/`` beside real git repositories in ``store/``.
* ``external``: any issue-lock CLI (``--command``) driven per its profile
  (``--profile``, default ``profiles/issuelock-chaos-sqlite.yaml``), seeded and
  exported through its privileged ``admin`` commands, one process per op.

The backends themselves are the ``chaos.sut`` objects (sqlite, gitfile,
external, python): each lists ``issue-lock`` in its ``protocols`` and returns
these targets from ``issue_lock_target``; ``lock_abilities`` are the ability
rows they declare for this protocol. The decisions run inside the worker host
processes (or the CLI children they start), so every worker nemesis applies:
kill, pause, clock (libfaketime moves the deciding process's clock), fsync (the
EIO shim in the deciding process and its git children), restart.
``lost-reply`` is not offered in the timed mode: the host's after-commit faults
are defined for work-claim operation classes only. The deterministic mode
(``deterministic`` row: sqlite, gitfile and a program the shim can control) drops a reply itself, at an exact
point inside the call, so there it is.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from chaos.errors import SetupFailed, UsageError
from chaos.sut.base import Target, open_spec

STORES = ("sqlite", "gitfile", "external")
DEFAULT_PROFILE = str(Path(__file__).resolve().parents[2] / "profiles" / "issuelock-chaos-sqlite.yaml")

#: the stores whose every deciding process the scheduler runs (docs/deterministic.md): the worker host
#: decides in its one thread, over files under the run dir
DETERMINISTIC_HOW = {
    "sqlite": "one single-threaded worker process per client under the scheduling shim: locks.db and its "
              "journal are the points, clocks and sleeps virtual",
    "gitfile": "one single-threaded worker process per client under the scheduling shim, and every git it "
               "runs: lock files, refs, objects and worktrees are the points",
}
#: and why not, for the others
NOT_DETERMINISTIC = {
    "python": "an outside store class: that its state lives only in files under the run dir, in the "
              "worker's one thread, is not known",
}


#: the sqlite store's own factory, as a Python class
SQLITE_FACTORY = "backends.issuelock.sqlite:open_backend"


def _over_sqlite(factory: str | None) -> bool:
    """The SQLite issue-lock store's factory, or one of ``chaos.testing.issuelock_bugs`` (that store under
    the one engine with one rule broken): no state beside locks.db, decided in the calling thread."""
    from chaos.testing import issuelock_bugs

    return factory == SQLITE_FACTORY or factory in {issuelock_bugs.factory_ref(name) for name in issuelock_bugs.BUGS}


def _deterministic(store: str, opts: dict):
    from chaos.sut.abilities import can, cannot

    if store in DETERMINISTIC_HOW:
        return can(DETERMINISTIC_HOW[store], "sched-shim")
    if store == "external":
        return _program_deterministic(opts)
    if store == "python" and _over_sqlite(opts.get("factory")):
        return can(f"{opts['factory']}: the SQLite lock store (or a planted bug over it): locks.db and its "
                   "journal are the points, the rest is the worker's one thread", "sched-shim")
    return cannot(NOT_DETERMINISTIC[store])


def _program_deterministic(opts: dict):
    """An issue-lock program is hosted as a claims program is (``chaos.deterministic.host``): any program
    the shim can control, decided from its file (``chaos.deterministic.programs``)."""
    from chaos.deterministic import programs
    from chaos.sut.abilities import can, cannot

    ok, what = programs.control_command(opts.get("command"))
    if not ok:
        return cannot(f"the scheduling shim cannot control this program: {what}")
    return can("each call's process runs under the scheduling shim as the worker's child of its own name, hosted "
               "in the worker's one thread, every thread of it controlled: the store's files are the points, "
               f"clocks, sleeps and randomness virtual; its admin seed on the virtual epoch; {what}", "sched-shim")


def lock_abilities(store: str, opts: dict | None = None) -> dict:
    """The ``chaos.sut`` ability rows of an issue-lock store (its Sut answers
    these when ``opts["protocol"] == "issue-lock"``)."""
    from chaos.sut.abilities import can, cannot

    deciding = "the CLI child of the worker host" if store == "external" else "worker processes"
    media = {"sqlite": "SQLite commits of locks.db", "gitfile": "lock files and git's own writes",
             "external": "the CLI's fsyncs (inherited preload)", "python": "the factory's SQLite commits"}[store]
    return {
        "seed": can("the store's privileged seed (identities, repositories, legacy locks with committed work)",
                    "admin" if store == "external" else "store"),
        "export": can("the store's privileged export (locks, branches, worktrees, pull requests)",
                      "admin" if store == "external" else "store"),
        "restart": can(f"{deciding}: drop state, reopen the store", "workers"),
        "kill": can(f"{deciding}: SIGKILL + reap (a held store lock dies with its holder)", "workers"),
        "pause": can(f"{deciding}: SIGSTOP/SIGCONT (a paused holder of the store's lock makes others wait)",
                     "workers"),
        "clock": can(f"{deciding}: libfaketime (the store decides by the deciding process's clock)", "workers"),
        "fsync": can(f"{media}: EIO shim", "workers"),
        "lost-reply": cannot("the timed mode's after-commit faults are defined for work-claim operation classes "
                             "only (the deterministic mode drops a reply itself)"),
        "clock-hook": can("the host's file clock, set per vector action", "hook") if store != "external"
        else cannot("the program's clock is its process clock (CHAOS_CLOCK_FILE when pinned)"),
        "deterministic": _deterministic(store, opts or {}),
    }


class LockTarget(Target):
    """``chaos.sut.base.Target`` for an issue-lock store: the same surface
    (spec, export, close, describe); seeded without a capabilities call (the
    protocol has none). ``run`` is a ``RunDir`` or a plain directory."""

    def __init__(self, cfg, run, note_pid: Callable[[int], None] | None = None,
                 note_dir: Callable[[str], None] | None = None):
        super().__init__(cfg, run, note_pid or (lambda _pid: None), note_dir or (lambda _d: None))
        self.base_dir = getattr(run, "path", run)

    def make_spec(self) -> dict:
        raise NotImplementedError

    def setup(self, _namespaces, durable: dict) -> None:
        self.spec = self.make_spec()
        backend = open_spec(self.spec)
        try:
            backend.store.seed(durable)
        except Exception as e:
            raise SetupFailed(f"{self.name} issue-lock store setup failed: {type(e).__name__}: {e}") from None
        finally:
            backend.close()

    def describe(self) -> dict:
        return dict(super().describe(), protocol="issue-lock")


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
        from backends.external import confine
        from backends.issuelock.external import LockProfileError, load_lock_profile
        from chaos.sut.base import resolve_command

        command = getattr(self.cfg, "backend_command", None)
        if not command:
            raise UsageError("--workload issue-lock --backend external needs --command '...'")
        profile = os.path.abspath(getattr(self.cfg, "profile", None) or DEFAULT_PROFILE)
        try:
            load_lock_profile(profile)
        except LockProfileError as e:
            raise UsageError(str(e)) from None
        confined, how = confine.status()
        if not confined:   # said up front, not a refusal, as for the claims protocol's programs
            self.setup_notes.append(f"writes not confined: {how}")
        return {"protocol": "issue-lock", "backend": "external", "command": resolve_command(command),
                "profile": profile, "store": os.path.join(self.base_dir, "store"), "write_root": self.base_dir}


class PythonLockTarget(LockTarget):
    """An outside issue-lock store written as a Python class (``--factory``),
    given the SQLite path like the sqlite store (the suite's planted bugs)."""

    name = "python"

    def make_spec(self) -> dict:
        return {"protocol": "issue-lock", "backend": "python", "factory": self.cfg.factory,
                "path": os.path.join(self.base_dir, "locks.db")}
