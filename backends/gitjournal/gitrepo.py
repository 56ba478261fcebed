"""The few git commands the backend needs (real ``git``, no library)."""

from __future__ import annotations

import hashlib
import os
import subprocess

GIT_TIMEOUT_S = 30.0


class GitError(Exception):
    pass


def git(cwd: str, *args: str, input: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(["git", "-C", cwd, *args], input=input, capture_output=True, timeout=GIT_TIMEOUT_S)
    if check and res.returncode != 0:
        raise GitError(f"git {' '.join(args)}: {res.stderr.decode(errors='replace').strip()}")
    return res


def locate(path: str) -> tuple[str, str] | None:
    """``(worktree top, absolute git common dir)`` of ``path``, or None when
    ``path`` is not inside a git work tree."""
    if not os.path.isdir(path):
        return None
    res = git(path, "rev-parse", "--show-toplevel", "--git-common-dir", check=False)
    if res.returncode != 0:
        return None
    lines = res.stdout.decode().splitlines()
    if len(lines) != 2:
        return None
    top, common = lines
    if not os.path.isabs(common):
        common = os.path.join(path, common)
    return os.path.realpath(top), os.path.realpath(common)


def head(cwd: str) -> str | None:
    res = git(cwd, "rev-parse", "--verify", "-q", "HEAD", check=False)
    return res.stdout.decode().strip() if res.returncode == 0 else None


def _has_identity(cwd: str) -> bool:
    return git(cwd, "config", "user.email", check=False).returncode == 0


def commit_paths(cwd: str, paths: list[str], message: str) -> str:
    """``git add`` + ``git commit`` of exactly ``paths``; returns the commit."""
    git(cwd, "add", "--", *paths)
    ident = [] if _has_identity(cwd) else ["-c", "user.name=claim-chaos", "-c", "user.email=claim-chaos@localhost"]
    res = subprocess.run(["git", "-C", cwd, *ident, "commit", "-q", "-m", message, "--", *paths],
                         capture_output=True, timeout=GIT_TIMEOUT_S)
    if res.returncode != 0:
        raise GitError(f"git commit: {res.stderr.decode(errors='replace').strip()}")
    return head(cwd) or ""


def revisions_in_history(cwd: str, relpath: str, limit: int = 500) -> list[tuple[str, str]]:
    """``[(commit, sha256 ref of the path's bytes at that commit)]`` for the
    commits reachable from HEAD that touch ``relpath``, newest first."""
    if head(cwd) is None:
        return []
    log = git(cwd, "log", f"--max-count={limit}", "--format=%H", "HEAD", "--", relpath, check=False)
    commits = log.stdout.decode().split()
    if not commits:
        return []
    query = "".join(f"{c}:{relpath}\n" for c in commits).encode()
    res = git(cwd, "cat-file", "--batch", input=query)
    out, pos, found = res.stdout, 0, []
    for c in commits:
        nl = out.index(b"\n", pos)
        header = out[pos:nl].split()
        pos = nl + 1
        if len(header) >= 2 and header[1] == b"missing":
            continue
        size = int(header[2])
        blob = out[pos:pos + size]
        pos += size + 1
        found.append((c, "sha256:" + hashlib.sha256(blob).hexdigest()))
    return found
