"""The cooperating agent's Git steps for a Git-backed external ledger.

A merge-coordinated program finalizes a publication through Git: after an
acknowledged ``publish-claimed`` the agent commits the item, and
``claim-verify`` reconciles the journal against ``HEAD`` (Wowbagger README,
"Commit each mutation before the next one"). These are user actions, done
with plain ``git`` on the files the program documents, never with the
program's internals.

``commit_item`` commits ONE publication: only when the item file still holds
exactly the candidate bytes (an agent commits its own publication; if the file
moved on, someone else's publication superseded it and nothing is
committed); when the program replaced the bytes between that check and the
commit, the commit holds the later bytes and the reply says ``committed:
false`` (``superseded``) with the commit it made. ``commit_all`` is the final agent's sweep: every item file whose
bytes differ from ``HEAD``. Agents serialize on one ``flock`` (``lock_path``)
so concurrent commits do not fight over Git's index lock. The replies are the
harness's own records (``{"ok", "result"}``), not contract envelopes.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess

AUTHOR = ["-c", "user.name=claim-chaos agent", "-c", "user.email=agent@claim-chaos.invalid",
          "-c", "commit.gpgsign=false"]
#: a clean environment: no GIT_DIR / GIT_INDEX_FILE of whoever started the suite
_ENV = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


class GitFailed(RuntimeError):
    pass


def revision(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _git(repo: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(["git", "-C", repo, *AUTHOR, *args], capture_output=True, env=_ENV, timeout=60)
    if check and p.returncode != 0:
        raise GitFailed(f"git {' '.join(args[:2])} failed (exit {p.returncode}): "
                        f"{p.stderr.decode(errors='replace').strip()[-300:]}")
    return p


def top_level(path: str) -> str:
    return _git(path, "rev-parse", "--show-toplevel").stdout.decode().strip()


def head_bytes(repo: str, relpath: str, commit: str = "HEAD") -> bytes | None:
    p = _git(repo, "show", f"{commit}:{relpath}", check=False)
    return p.stdout if p.returncode == 0 else None


def head(repo: str) -> str | None:
    p = _git(repo, "rev-parse", "--verify", "-q", "HEAD", check=False)
    return p.stdout.decode().strip() if p.returncode == 0 else None


def item_history(repo: str, relpath: str) -> list[dict]:
    """``[{commit, revision}]`` of every commit that touched ``relpath``, oldest first."""
    p = _git(repo, "log", "--format=%H", "--reverse", "--", relpath, check=False)
    out = []
    for commit in p.stdout.decode().split():
        data = head_bytes(repo, relpath, commit)
        out.append({"commit": commit, "revision": revision(data) if data is not None else None})
    return out


class _Locked:
    def __init__(self, path: str):
        self.path = path

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)


def commit_paths(repo: str, paths: list[str], message: str) -> str:
    """Stage and commit exactly ``paths`` (relative to ``repo``); the new HEAD."""
    _git(repo, "add", "--", *paths)
    _git(repo, "commit", "-q", "--no-verify", "-m", message, "--", *paths)
    return head(repo) or ""


def commit_removal(repo: str, paths: list[str], message: str) -> str:
    """Commit the deletion of ``paths`` (already removed from the work tree)."""
    _git(repo, "rm", "-q", "--cached", "--", *paths)
    _git(repo, "commit", "-q", "--no-verify", "-m", message)
    return head(repo) or ""


def commit_item(repo: str, relpath: str, candidate_revision: str, message: str, lock_path: str) -> dict:
    """Commit one acknowledged publication's item file (see the module docstring)."""
    with _Locked(lock_path):
        try:
            with open(os.path.join(repo, relpath), "rb") as f:
                working = f.read()
        except FileNotFoundError:
            working = None
        working_rev = revision(working) if working is not None else None
        if working_rev != candidate_revision:
            return {"committed": False, "reason": "superseded", "path": relpath, "working_revision": working_rev}
        before = head_bytes(repo, relpath)
        if before is not None and revision(before) == candidate_revision:
            commit = head(repo)
            return {"committed": True, "already": True, "path": relpath, "git_commit": commit,
                    "head_revision": candidate_revision}
        commit = commit_paths(repo, [relpath], message)
        now = head_bytes(repo, relpath, commit)
        now_rev = revision(now) if now is not None else None
        if now_rev != candidate_revision:   # the program wrote a later publication over the file after our
            # check (it does not take our lock): the commit holds those bytes, not this publication's
            return {"committed": False, "reason": "superseded", "path": relpath, "git_commit": commit,
                    "head_revision": now_rev}
        return {"committed": True, "path": relpath, "git_commit": commit, "head_revision": now_rev}


def commit_all(repo: str, relpaths: list[str], message: str, lock_path: str) -> dict:
    """Commit every listed file whose working bytes differ from HEAD."""
    with _Locked(lock_path):
        dirty = []
        for rel in relpaths:
            try:
                with open(os.path.join(repo, rel), "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            before = head_bytes(repo, rel)
            if before is None or before != data:
                dirty.append(rel)
        commit = commit_paths(repo, dirty, message) if dirty else head(repo)
        return {"committed": bool(dirty), "paths": dirty, "git_commit": commit}
