"""The git side of the git-file store: real repositories, branches, registered worktrees.

Every call is one ``git`` process (``-C repo``), bounded by a timeout; a failure
raises ``GitFailed`` with git's own words. Repositories are made with
``gc.auto=0`` (a background gc would prune a seeded "missing" worktree, and must
never run outside our serialization) and ``core.fsync=all`` (git's writes are
durable, so the fsync nemesis reaches them too).

``RepoState`` is one consistent read of a repository: every branch head
(``for-each-ref``), every registered worktree (``worktree list --porcelain``)
and every branch's issue binding (``branch.<name>.chaosissue`` in git config).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field

GIT_TIMEOUT_S = 20.0
MAIN = "main"
ISSUE_KEY = "chaosissue"   # git config: branch.<name>.chaosissue = remote/org/repo/issue


class GitFailed(RuntimeError):
    pass


def git(repo: str, *args: str, env: dict | None = None, check: bool = True) -> str:
    full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C",
                "GIT_AUTHOR_NAME": "seed", "GIT_AUTHOR_EMAIL": "seed@chaos", "GIT_COMMITTER_NAME": "seed",
                "GIT_COMMITTER_EMAIL": "seed@chaos", **(env or {})}
    try:
        res = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, env=full_env,
                             timeout=GIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise GitFailed(f"git {' '.join(args[:2])} timed out after {GIT_TIMEOUT_S} s") from None
    except OSError as e:
        raise GitFailed(f"git {' '.join(args[:2])}: {e}") from None
    if check and res.returncode != 0:
        raise GitFailed(f"git {' '.join(args[:3])} failed ({res.returncode}): {res.stderr.strip()[:300]}")
    return res.stdout


def init_repository(path: str, files: dict) -> str:
    """A new repository on ``main`` with one base commit of ``files``; its head."""
    os.makedirs(path, exist_ok=True)
    git(path, "init", "-q", "-b", MAIN)
    for k, v in (("gc.auto", "0"), ("core.fsync", "all"), ("core.fsyncMethod", "fsync"),
                 ("worktree.guessRemote", "false")):
        git(path, "config", k, v)
    for rel, text in files.items():
        full = os.path.join(path, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    with open(os.path.join(path, ".gitignore"), "w") as f:
        f.write("/branches/\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    return git(path, "rev-parse", "HEAD").strip()


@dataclass
class RepoState:
    heads: dict = field(default_factory=dict)       # branch -> sha
    worktrees: dict = field(default_factory=dict)   # abs path -> branch | None (registered only)
    issues: dict = field(default_factory=dict)      # branch -> "remote/org/repo/n"


def read_state(repo: str) -> RepoState:
    st = RepoState()
    for line in git(repo, "for-each-ref", "--format=%(refname:strip=2) %(objectname)", "refs/heads").splitlines():
        name, _, sha = line.rpartition(" ")
        st.heads[name] = sha
    current = None
    for line in git(repo, "worktree", "list", "--porcelain").splitlines():
        if line.startswith("worktree "):
            current = os.path.realpath(line[len("worktree "):])
            st.worktrees[current] = None
        elif line.startswith("branch refs/heads/") and current is not None:
            st.worktrees[current] = line[len("branch refs/heads/"):]
    out = git(repo, "config", "--get-regexp", rf"^branch\..*\.{ISSUE_KEY}$", check=False)
    for line in out.splitlines():
        name, _, value = line.partition(" ")
        st.issues[name[len("branch."):-len(f".{ISSUE_KEY}")]] = value
    return st


def add_worktree(repo: str, branch: str, path: str, at: str, issue: str) -> None:
    git(repo, "worktree", "add", "-q", "-b", branch, path, at)
    git(repo, "config", f"branch.{branch}.{ISSUE_KEY}", issue)


def commit_in(worktree: str, message: str, content: str, author: dict) -> tuple[str, str]:
    """Write the work file, commit it in the worktree; ``(parent, head)``."""
    parent = git(worktree, "rev-parse", "HEAD").strip()
    with open(os.path.join(worktree, "WORK.md"), "a") as f:
        f.write(content + "\n")
        f.flush()
        os.fsync(f.fileno())
    who = {"GIT_AUTHOR_NAME": author["username"], "GIT_AUTHOR_EMAIL": f"{author['username']}@{author['profile']}",
           "GIT_COMMITTER_NAME": author["username"], "GIT_COMMITTER_EMAIL": f"{author['username']}@{author['profile']}"}
    git(worktree, "add", "-A", env=who)
    git(worktree, "commit", "-q", "--allow-empty", "-m", message, env=who)
    return parent, git(worktree, "rev-parse", "HEAD").strip()


def sweep_stale_locks(repo: str) -> list[str]:
    """Remove git's own ``*.lock`` files left by a git process that died with
    its worker (SIGKILL mid-``commit`` leaves ``index.lock``). Called only while
    holding the repository's exclusive lock, under which every git write of the
    store happens: any git lock file then is stale by construction."""
    removed = []
    gitdir = os.path.join(repo, ".git")
    for root, dirs, files in os.walk(gitdir):
        if root == gitdir and "objects" in dirs:
            dirs.remove("objects")
        for name in files:
            if name.endswith(".lock"):
                path = os.path.join(root, name)
                try:
                    os.unlink(path)
                    removed.append(os.path.relpath(path, gitdir))
                except FileNotFoundError:
                    pass
    return removed
