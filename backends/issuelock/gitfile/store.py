"""``GitFileLockStore``: one lock file per remote/org/repo/issue beside real git repositories.

Layout under the store root::

    config.json                                  lease TTL and the identities the server resolves
    repos/<remote>/<org>/<repo>/                 a git repository (branch ``main`` = the base)
        branches/<name>/                         registered worktrees (``git worktree add``)
    locks/<remote>/<org>/<repo>/issue-<n>.json   THE lock file of that issue (canonical JSON)
    locks/<remote>/<org>/<repo>/.serial          the repository's serialization lock (flock)
    prs/<remote>/<org>/<repo>/issue-<n>.json     pull requests

Serialization. A write transaction holds ``LOCK_EX`` on the repository's
``.serial`` (a read transaction ``LOCK_SH``), waited for at most
``lock_wait_s`` (then ``StoreUnavailable("repository-locked")``). The unit is
the repository, not the issue, because git's own state (refs, worktree
registry, config) is shared by every issue of a repository. The kernel drops
a dead holder's flock, and on taking ``LOCK_EX`` the store removes git's stale
``*.lock`` files (every git write happens under ``LOCK_EX``, so any found then
were left by a git process killed with its worker).

Durability. A lock file is written to a temp file, fsynced, renamed over the
old one and the directory fsynced: a reader sees the old or the new lock,
never a torn one. A failure before the rename changed nothing in the lock
(``StoreUnavailable`` if nothing else was touched yet); a failure after any
mutation of the transaction is ``CommitOutcomeUnknown`` (git refs, worktrees or
the renamed file may or may not have persisted).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import time

from backends.api import CommitOutcomeUnknown, StoreUnavailable
from backends.gitjournal import fsio
from backends.contract.jsonstrict import canonical_json, loads_strict
from backends.issuelock.contract import reader as R
from backends.issuelock.contract.fields import IssueKey
from backends.issuelock.gitfile import git as G

LOCK_WAIT_S = 5.0


def write_atomic(path: str, data: bytes) -> None:
    """tmp + fsync + rename + fsync(dir) (``backends.gitjournal.fsio``, the one
    home of that discipline). Raises ``OSError``; before the rename the old
    file is untouched (the temp file is removed)."""
    d = os.path.dirname(path)
    fsio.makedirs_durable(d)
    tmp = fsio.write_tmp(d, os.path.basename(path), data)
    os.replace(tmp, path)
    fsio.fsync_dir(d)


class GitFileTxn:
    """Reads and writes of one serialized decision on one repository."""

    def __init__(self, store: "GitFileLockStore", write: bool):
        self.store = store
        self.write = write
        self.mutated = False
        self._state: dict = {}
        self._held: dict = {}   # repo_key -> fd

    # ------------------------------------------------------------------ locking

    def hold(self, repo_key: tuple) -> None:
        """Take the repository's flock (once per transaction)."""
        if repo_key in self._held:
            return
        serial = os.path.join(self.store.root, "locks", *repo_key, ".serial")
        os.makedirs(os.path.dirname(serial), exist_ok=True)
        fd = os.open(serial, os.O_RDWR | os.O_CREAT, 0o644)
        mode = fcntl.LOCK_EX if self.write else fcntl.LOCK_SH
        deadline = time.monotonic() + self.store.lock_wait_s
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() >= deadline:
                    os.close(fd)
                    raise StoreUnavailable("repository-locked", f"{'/'.join(repo_key)} busy for "
                                                                f"{self.store.lock_wait_s} s") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.02)
        self._held[repo_key] = fd
        if self.write:
            repo = self.store.repo_dir(repo_key)
            if os.path.isdir(os.path.join(repo, ".git")):
                G.sweep_stale_locks(repo)

    def release(self) -> None:
        for fd in self._held.values():
            with contextlib.suppress(OSError):
                os.close(fd)   # closing drops the flock
        self._held.clear()

    def _git_state(self, repo_key: tuple) -> G.RepoState:
        self.hold(repo_key)
        if repo_key not in self._state:
            self._state[repo_key] = G.read_state(self.store.repo_dir(repo_key))
        return self._state[repo_key]

    def _mutating(self, repo_key: tuple) -> None:
        if not self.write:
            raise RuntimeError("write inside a read transaction")
        self.hold(repo_key)
        self.mutated = True
        self._state.pop(repo_key, None)

    # ------------------------------------------------------------------ reads

    def ttl_ms(self) -> int:
        return int(self.store.config().get("lease_ttl_ms", 2000))

    def identity(self, token: str) -> dict | None:
        return (self.store.config().get("identities") or {}).get(token)

    def repository(self, repo_key: tuple) -> dict | None:
        if not os.path.isdir(os.path.join(self.store.repo_dir(repo_key), ".git")):
            return None
        head = self._git_state(repo_key).heads.get(G.MAIN)
        return {"base_head": head} if head else None

    def get_lock(self, key: IssueKey) -> dict | None:
        self.hold(key.repository)
        try:
            with open(self.store.lock_path(key), "rb") as f:
                return R.parse_lock(f.read())
        except FileNotFoundError:
            return None

    def branch(self, repo_key: tuple, name: str) -> dict | None:
        st = self._git_state(repo_key)
        return {"head": st.heads[name], "issue": st.issues.get(name)} if name in st.heads else None

    def worktree(self, repo_key: tuple, path: str) -> dict:
        st = self._git_state(repo_key)
        full = os.path.realpath(os.path.join(self.store.repo_dir(repo_key), path))
        registered = full in st.worktrees
        return {"exists": os.path.isdir(full), "registered": registered,
                "branch": st.worktrees[full] if registered else None}

    def get_pr(self, key: IssueKey) -> dict | None:
        self.hold(key.repository)
        try:
            with open(self.store.pr_path(key), "rb") as f:
                return loads_strict(f.read())
        except FileNotFoundError:
            return None

    # ------------------------------------------------------------------ writes

    def put_lock(self, key: IssueKey, lock: dict) -> None:
        self._mutating(key.repository)
        self._write_file(self.store.lock_path(key), canonical_json(lock))

    def put_pr(self, key: IssueKey, pr: dict) -> None:
        self._mutating(key.repository)
        self._write_file(self.store.pr_path(key), canonical_json(pr))

    def _write_file(self, path: str, data: bytes) -> None:
        try:
            write_atomic(path, data)
        except OSError as e:
            raise CommitOutcomeUnknown(f"writing {os.path.basename(path)}: {e}") from e

    def create_binding(self, key: IssueKey, branch: str, worktree: str, at_head: str) -> None:
        self._mutating(key.repository)
        repo = self.store.repo_dir(key.repository)
        G.add_worktree(repo, branch, os.path.join(repo, worktree), at_head, key.path)

    def commit(self, repo_key: tuple, branch: str, worktree: str, message: str, content: str, author: dict) -> dict:
        wt = os.path.join(self.store.repo_dir(repo_key), worktree)
        self._mutating(repo_key)
        parent, head = G.commit_in(wt, message, content, author)
        return {"parent": parent, "head": head}


class GitFileLockStore:
    """See the module docstring."""

    def __init__(self, root: str, lock_wait_s: float = LOCK_WAIT_S):
        self.root = os.path.abspath(root)
        self.lock_wait_s = lock_wait_s
        self._config: dict | None = None

    def repo_dir(self, repo_key: tuple) -> str:
        return os.path.join(self.root, "repos", *repo_key)

    def lock_path(self, key: IssueKey) -> str:
        return os.path.join(self.root, "locks", *key.repository, f"issue-{key.issue_number}.json")

    def pr_path(self, key: IssueKey) -> str:
        return os.path.join(self.root, "prs", *key.repository, f"issue-{key.issue_number}.json")

    def config(self) -> dict:
        if self._config is None:
            try:
                with open(os.path.join(self.root, "config.json"), "rb") as f:
                    self._config = loads_strict(f.read())
            except FileNotFoundError:
                raise StoreUnavailable("store-not-seeded", f"no config.json under {self.root}") from None
            except (OSError, ValueError) as e:
                raise StoreUnavailable("store-unreadable", str(e)) from None
        return self._config

    def _within(self, message: str) -> str:
        """A failure's words (git's, the OS's) with the store's paths relative to its root: where the
        store lives is not the failure, and would make two runs of one seed say different things."""
        return message.replace(self.root + os.sep, "")

    @contextlib.contextmanager
    def transaction(self, write: bool):
        txn = GitFileTxn(self, write)
        try:
            yield txn
        except (StoreUnavailable, CommitOutcomeUnknown):
            raise
        except G.GitFailed as e:
            if txn.mutated:
                raise CommitOutcomeUnknown(self._within(str(e))) from e
            raise StoreUnavailable("git-failed", self._within(str(e))) from e
        except OSError as e:
            if txn.mutated:
                raise CommitOutcomeUnknown(self._within(f"{type(e).__name__}: {e}")) from e
            raise StoreUnavailable("io-failed", self._within(f"{type(e).__name__}: {e}")) from e
        finally:
            txn.release()

    def reopen(self) -> None:
        self._config = None

    def close(self) -> None:
        return None

    # ------------------------------------------------------------------ privileged scaffolding

    def seed(self, durable: dict) -> None:
        from backends.issuelock.seed import apply_seed

        os.makedirs(self.root, exist_ok=True)
        apply_seed(GitFileSeeder(self), durable)
        self._config = None

    def export_durable(self) -> dict:
        cfg = self.config()
        out = {"config": {"lease_ttl_ms": int(cfg.get("lease_ttl_ms", 2000))},
               "identities": [{"token": t, "username": v.get("username"), "profile": v.get("profile")}
                              for t, v in sorted((cfg.get("identities") or {}).items())],
               "repositories": [], "branches": [], "worktrees": [], "locks": [], "pull_requests": []}
        for repo_key in self.repositories():
            st = G.read_state(self.repo_dir(repo_key))
            rk = dict(zip(("remote", "org", "repo"), repo_key))
            out["repositories"].append({**rk, "base_head": st.heads.get(G.MAIN)})
            out["branches"] += [{**rk, "name": n, "head": h, "issue": st.issues.get(n)}
                                for n, h in sorted(st.heads.items()) if n != G.MAIN]
            repo = self.repo_dir(repo_key)
            base = os.path.join(repo, "branches")
            seen = {os.path.relpath(p, repo): b for p, b in st.worktrees.items() if p.startswith(base + os.sep)}
            present = {f"branches/{d}" for d in (os.listdir(base) if os.path.isdir(base) else [])}
            for rel in sorted(set(seen) | present):
                out["worktrees"].append({**rk, "path": rel, "branch": seen.get(rel), "registered": rel in seen,
                                         "exists": rel in present})
            for kind, member in (("locks", "lock"), ("prs", "pull_request")):
                d = os.path.join(self.root, kind, *repo_key)
                names = sorted(os.listdir(d)) if os.path.isdir(d) else []
                for name in names:
                    if name.startswith("issue-") and name.endswith(".json"):
                        with open(os.path.join(d, name), "rb") as f:
                            doc = R.parse_lock(f.read()) if member == "lock" else loads_strict(f.read())
                        out["locks" if member == "lock" else "pull_requests"].append(
                            {**rk, "issue_number": int(name[6:-5]), member: doc})
        for k in ("locks", "pull_requests"):
            out[k].sort(key=lambda e: (e["remote"], e["org"], e["repo"], e["issue_number"]))
        return out

    def repositories(self) -> list[tuple]:
        base = os.path.join(self.root, "repos")
        out = []
        for remote in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            for org in sorted(os.listdir(os.path.join(base, remote))):
                for repo in sorted(os.listdir(os.path.join(base, remote, org))):
                    out.append((remote, org, repo))
        return out


class GitFileSeeder:
    """What ``apply_seed`` needs, as real git operations and files."""

    def __init__(self, store: GitFileLockStore):
        self.store = store
        self.cfg = {"lease_ttl_ms": 2000, "identities": {}}

    def _save(self) -> None:
        write_atomic(os.path.join(self.store.root, "config.json"), canonical_json(self.cfg))

    def config(self, ttl_ms: int) -> None:
        self.cfg["lease_ttl_ms"] = int(ttl_ms)
        self._save()

    def identity(self, token: str, username, profile) -> None:
        self.cfg["identities"][token] = {"username": username, "profile": profile}
        self._save()

    def repository(self, repo_key: tuple, files: dict) -> str:
        return G.init_repository(self.store.repo_dir(repo_key), files)

    def binding(self, key: IssueKey, branch: str, worktree: str, base_head: str) -> None:
        repo = self.store.repo_dir(key.repository)
        G.add_worktree(repo, branch, os.path.join(repo, worktree), base_head, key.path)

    def commit(self, key: IssueKey, branch: str, worktree: str, message: str, content: str, author: dict) -> str:
        return G.commit_in(os.path.join(self.store.repo_dir(key.repository), worktree), message, content, author)[1]

    def damage_worktree(self, key: IssueKey, worktree: str, how: str, other_branch: str, base_head: str) -> None:
        repo = self.store.repo_dir(key.repository)
        full = os.path.join(repo, worktree)
        if how == "missing":        # still registered, directory gone
            shutil.rmtree(full)
        elif how == "unregistered":  # a directory that git does not know as a worktree
            G.git(repo, "worktree", "remove", "--force", full)
            os.makedirs(full)
            with open(os.path.join(full, "WORK.md"), "w") as f:
                f.write("left behind\n")
        elif how == "other-branch":  # registered, but checked out on another branch
            G.git(repo, "branch", other_branch, base_head)
            G.git(full, "checkout", "-q", other_branch)

    def lock(self, key: IssueKey, lock: dict) -> None:
        write_atomic(self.store.lock_path(key), canonical_json(lock))


def open_backend(spec: dict, clock, hooks):
    from backends.issuelock.engine import LockEngine

    store = GitFileLockStore(spec["root"], float(spec.get("lock_wait_s", LOCK_WAIT_S)))
    return LockEngine(store, clock, hooks, name="issuelock-gitfile")
