"""The strict-fenced SQLite backend: ``claims.db`` in the run dir, opened by
every worker host (``backends.sqlite``)."""

from __future__ import annotations

import os

from chaos.sut.abilities import can, cannot
from chaos.sut.base import SimpleSession, Sut, Target

#: the in-process abilities every backend served inside a worker host shares
WORKER_FAULTS = {
    "barrier": can("the engine's before_commit hook in the worker host", "hook"),
    "clock-hook": can("the host's file clock (FileClock), set per action", "hook"),
    "restart": can("worker processes: drop state, reopen the store", "workers"),
    "kill": can("worker processes: SIGKILL + reap", "workers"),
    "pause": can("worker processes: SIGSTOP/SIGCONT", "workers"),
    "freeze-call": can("the worker host serving the call (the decision runs in it): SIGSTOP mid-call", "host"),
    "kill-call": can("the worker host serving the call: SIGKILL mid-call", "host"),
    "clock": can("worker wall clocks: libfaketime (backward, forward, strobe)", "workers"),
    "fsync": can("worker fsyncs: EIO shim", "workers"),
    "lost-reply": can("workers: exit(137) right after a commit, before the reply", "exit-after-commit"),
    "power-loss": can("the store's files: every change no completed fsync covers is undone (preload shim)",
                      "powerloss-shim"),
    "partition": cannot("no network between the workers and their store (they share a file)"),
}


class SqliteTarget(Target):
    name = "sqlite"

    def setup(self, namespaces, durable: dict) -> None:
        self.spec = {"backend": "sqlite", "path": self.run.file("claims.db"), "namespaces": list(namespaces)}
        super().setup(namespaces, durable)


class SqliteSut(Sut):
    name = "sqlite"
    order = 10
    summary = "strict fenced: one SQLite file, BEGIN IMMEDIATE, synchronous=EXTRA"
    cli = True

    protocols = ("work-claim", "issue-lock")

    def issue_lock_target(self, cfg, run, note_pid=None, note_dir=None):
        from chaos.issuelock.targets import SqliteLockTarget

        return SqliteLockTarget(cfg, run, note_pid, note_dir)

    def declare(self, opts: dict) -> dict:
        if opts.get("protocol") == "issue-lock":
            from chaos.issuelock.targets import lock_abilities

            return lock_abilities(self.name, opts)
        return {
            **WORKER_FAULTS,
            "seed": can("SqliteStore.seed into claims.db before any worker serves", "store"),
            "export": can("a fresh SqliteStore reads claims.db", "store"),
            "floor-fault": can("a trigger raising on the floor table (admin.install_floor_failure_trigger)", "trigger"),
            "outcome-unknown-fault": can("the fsync EIO shim on claims.db, armed for the COMMIT", "fsync"),
            "advisory-setup": can("the real bypass writer (admin.enable_bypass_writer)", "bypass"),
            "write-paths": can("provisioned with the case's inventory (a missing entry stays missing)"),
            "legacy-writes": can("the engine's legacy refusals"),
            "claim-verify": cannot("a strict fenced store has nothing to reconcile with git"),
            "commit": cannot("items live in claims.db, not in a git work tree"),
            "deterministic": can("one single-threaded worker process per client under the scheduling shim: "
                                 "claims.db and its journal are the points, clocks and sleeps virtual", "sched-shim"),
        }

    def target(self, cfg, run, note_pid, note_dir) -> Target:
        return SqliteTarget(cfg, run, note_pid, note_dir)

    def conform_session(self, options: dict):
        from chaos.conform.adapters.sqlite import make_adapter

        return SimpleSession(make_adapter, options)

    def cli_spec(self, ledger: str, args) -> dict:
        return {"backend": "sqlite", "path": os.path.join(ledger, "claims.db")}

    def cli_provision(self, ledger: str, namespaces: list[str], write_paths: dict | None, args) -> None:
        from backends.sqlite import admin

        admin.provision(self.cli_spec(ledger, args)["path"], namespaces, write_paths=write_paths)


SUT = SqliteSut()
