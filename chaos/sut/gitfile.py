"""The git-file issue-lock store (``backends.issuelock.gitfile``): one lock file per
remote/org/repo/issue beside real git repositories with registered worktrees,
opened by every worker host. It serves only the issue-lock protocol."""

from __future__ import annotations

from chaos.errors import UsageError
from chaos.sut.base import Sut


class GitFileSut(Sut):
    name = "gitfile"
    order = 35
    summary = "issue-lock only: lock files beside real git repositories, worktrees and branches"
    protocols = ("issue-lock",)

    def declare(self, opts: dict) -> dict:
        from chaos.issuelock.targets import lock_abilities

        return lock_abilities(self.name, opts)

    def target(self, cfg, run, note_pid, note_dir):
        raise UsageError("--backend gitfile serves the issue-lock protocol only: add --workload issue-lock")

    def issue_lock_target(self, cfg, run, note_pid=None, note_dir=None):
        from chaos.issuelock.targets import GitFileLockTarget

        return GitFileLockTarget(cfg, run, note_pid, note_dir)

    def conform_session(self, options: dict):
        raise UsageError("chaos conform --backend gitfile replays the issue-lock vectors: add --protocol issue-lock")


SUT = GitFileSut()
