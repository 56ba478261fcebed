"""The merge-coordinated Git-journal backend (``backends.gitjournal``):
``repo/`` (``git init``) in the run dir with one provisioned ledger per
namespace (a Git ledger binds one namespace), behind one endpoint group."""

from __future__ import annotations

import os
import subprocess

from chaos.errors import SetupFailed, UsageError
from chaos.sut.abilities import can, cannot
from chaos.sut.base import SimpleSession, Sut, Target, open_spec
from chaos.sut.sqlite import WORKER_FAULTS

class GitJournalTarget(Target):
    name = "gitjournal"

    def setup(self, namespaces, durable: dict) -> None:
        from backends.gitjournal import provision
        from backends.gitjournal.store import GitJournalStore

        repo = self.run.file("repo")
        res = subprocess.run(["git", "init", "-q", repo], capture_output=True, text=True)
        if res.returncode != 0:
            raise SetupFailed(f"git init failed: {res.stderr.strip()}")
        ledgers = []
        for i, ns in enumerate(namespaces):
            ledger = provision(os.path.join(repo, f"ledger-{i + 1}"), ns)
            GitJournalStore(ledger).seed(durable)
            ledgers.append(ledger.path)
        self.spec = {"backend": "gitjournal", "ledgers": ledgers, "lock_wait_ms": 5000}
        backend = open_spec(self.spec)
        try:
            self.capabilities = backend.call("capabilities", {}).envelope
        finally:
            backend.close()


class GitJournalSut(Sut):
    name = "gitjournal"
    order = 30
    summary = "merge-coordinated: journal in the git common dir, owner-checked lock, intent -> item -> final"
    cli = True

    def declare(self, opts: dict) -> dict:
        return {
            **WORKER_FAULTS,
            "kill": can("worker processes: SIGKILL + reap (a held journal lock is recovered from its dead owner)",
                        "workers"),
            "pause": can("worker processes: SIGSTOP/SIGCONT (a held lock makes others wait, then busy)", "workers"),
            "power-loss": can("the repository (journals, item files, locks, git objects and refs): un-fsynced "
                              "changes undone (preload shim, inherited by git)", "powerloss-shim"),
            "fsync": can("worker fsyncs (journal appends, item files): EIO shim", "workers"),
            "restart": can("worker processes: drop state, re-read the ledgers", "workers"),
            "seed": can("GitJournalStore.seed writes the journal before any worker serves", "store"),
            "export": can("GitJournalStore.export_durable replays the journal", "store"),
            "floor-fault": can("the fsync EIO shim on the journal append (journal.jsonl)", "fsync"),
            "outcome-unknown-fault": can("the fsync EIO shim on the item's temp file", "fsync"),
            "advisory-setup": can("a git ledger without a provisioned namespace", "unprovisioned"),
            "write-paths": cannot("the merge-coordinated profile always enumerates its four write paths"),
            "legacy-writes": can("the engine's legacy refusals"),
            "claim-verify": can("GitJournalStore's claim-verify over the journal and HEAD"),
            "commit": cannot("chaos run does not commit this backend's items (claim-verify reads the journal)"),
            "deterministic": can("one single-threaded worker process per client under the scheduling shim, and every "
                                 "git it runs as a child of its own name (waits for it never block): the repository's "
                                 "files are the points, clocks, sleeps and /dev/urandom virtual", "sched-shim"),
        }

    def target(self, cfg, run, note_pid, note_dir) -> Target:
        return GitJournalTarget(cfg, run, note_pid, note_dir)

    def conform_session(self, options: dict):
        from chaos.conform.adapters.gitjournal import make_adapter

        return SimpleSession(make_adapter, options)

    def cli_spec(self, ledger: str, args) -> dict:
        spec = {"backend": "gitjournal", "ledger": ledger}
        if args.lock_wait_ms is not None:
            spec["lock_wait_ms"] = args.lock_wait_ms
        return spec

    def cli_provision(self, ledger: str, namespaces: list[str], write_paths: dict | None, args) -> None:
        from backends.gitjournal import ledger as gl

        if len(namespaces) != 1:
            raise UsageError("chaos backend gitjournal: a Git ledger binds exactly one namespace")
        try:
            gl.provision(ledger, namespaces[0])
        except (gl.AlreadyProvisioned, gl.NotAGitLedger) as e:
            raise UsageError(f"chaos backend gitjournal provision: {e}") from None


SUT = GitJournalSut()
