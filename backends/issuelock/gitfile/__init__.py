"""The git-file issue-lock store (see ``store.py``): ``open_backend(spec, clock, hooks)``
with ``spec["root"]`` the store directory (seeded through ``store.seed``)."""

from backends.issuelock.gitfile.store import GitFileLockStore, open_backend

__all__ = ["GitFileLockStore", "open_backend"]
