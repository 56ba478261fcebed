"""The SQLite issue-lock store: one SQLite file holds locks, bindings and pull requests.

It reuses the work-claim SQLite store's connection pool and transaction
discipline (``backends.sqlite.store``: ``BEGIN IMMEDIATE`` for every decision,
rollback journal, ``synchronous=FULL``, a failed COMMIT ->
``CommitOutcomeUnknown``, busy -> ``StoreUnavailable``), with its own rows:

* ``locks``: one row per remote/org/repo/issue, the lock as canonical JSON bytes
  exactly as the contract's builder made it (the reader parses them back);
* ``branches`` / ``worktrees`` / ``commits``: the repository side of the binding
  checks. A commit id is the SHA-1 of (parent, author, message, content), so
  heads are 40-hex ids like git's and a branch head only moves by a commit;
* ``identities`` (token -> username, profile: what the server resolves),
  ``repositories`` (base head), ``config`` (``lease_ttl_ms``), ``pull_requests``.

``open_backend(spec, clock, hooks)``: ``spec["path"]`` is the file (created
with its schema when missing).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3

from backends.api import StoreUnavailable
from backends.contract.jsonstrict import canonical_json, loads_strict
from backends.issuelock.contract import reader as R
from backends.issuelock.contract.fields import IssueKey
from backends.sqlite.store import SqliteStore, connect

#: a decision waits this long for the write lock (a paused holder), then answers store_unavailable
BUSY_TIMEOUT_S = 5.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS config (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS identities (token TEXT PRIMARY KEY, username TEXT, profile TEXT);
CREATE TABLE IF NOT EXISTS repositories (remote TEXT, org TEXT, repo TEXT, base_head TEXT NOT NULL,
    PRIMARY KEY (remote, org, repo));
CREATE TABLE IF NOT EXISTS branches (remote TEXT, org TEXT, repo TEXT, name TEXT, head TEXT NOT NULL, issue TEXT,
    PRIMARY KEY (remote, org, repo, name));
CREATE TABLE IF NOT EXISTS worktrees (remote TEXT, org TEXT, repo TEXT, path TEXT, branch TEXT,
    registered INTEGER NOT NULL, present INTEGER NOT NULL, PRIMARY KEY (remote, org, repo, path));
CREATE TABLE IF NOT EXISTS commits (remote TEXT, org TEXT, repo TEXT, sha TEXT, parent TEXT, author TEXT,
    message TEXT, content TEXT, PRIMARY KEY (remote, org, repo, sha));
CREATE TABLE IF NOT EXISTS locks (remote TEXT, org TEXT, repo TEXT, issue_number INTEGER, body BLOB NOT NULL,
    PRIMARY KEY (remote, org, repo, issue_number));
CREATE TABLE IF NOT EXISTS pull_requests (remote TEXT, org TEXT, repo TEXT, issue_number INTEGER,
    body BLOB NOT NULL, PRIMARY KEY (remote, org, repo, issue_number));
"""


def commit_id(parent: str | None, author: str, message: str, content: str) -> str:
    return hashlib.sha1("\0".join((parent or "", author, message, content)).encode()).hexdigest()


def base_commit_id(files: dict) -> str:
    return commit_id(None, "seed", "base", canonical_json(files).decode())


class LockTxn:
    """The issue-lock rows of one open SQLite transaction (rows only; no decisions)."""

    def __init__(self, conn: sqlite3.Connection, write: bool):
        self._conn = conn
        self._write = write

    def _rows(self, sql: str, args: tuple = ()) -> list:
        try:
            return self._conn.execute(sql, args).fetchall()
        except sqlite3.Error as e:
            raise StoreUnavailable("sqlite-read-failed", str(e)) from e

    def _exec(self, sql: str, args: tuple) -> None:
        if not self._write:
            raise RuntimeError("write inside a read transaction")
        try:
            self._conn.execute(sql, args)
        except sqlite3.Error as e:
            raise StoreUnavailable("sqlite-write-failed", str(e)) from e

    # ------------------------------------------------------------------ reads

    def ttl_ms(self) -> int:
        rows = self._rows("SELECT value FROM config WHERE name = 'lease_ttl_ms'")
        return int(rows[0][0]) if rows else 2000

    def identity(self, token: str) -> dict | None:
        rows = self._rows("SELECT username, profile FROM identities WHERE token = ?", (token,))
        return {"username": rows[0][0], "profile": rows[0][1]} if rows else None

    def repository(self, repo_key: tuple) -> dict | None:
        rows = self._rows("SELECT base_head FROM repositories WHERE remote=? AND org=? AND repo=?", tuple(repo_key))
        return {"base_head": rows[0][0]} if rows else None

    def get_lock(self, key: IssueKey) -> dict | None:
        rows = self._rows("SELECT body FROM locks WHERE remote=? AND org=? AND repo=? AND issue_number=?", tuple(key))
        return R.parse_lock(bytes(rows[0][0])) if rows else None

    def branch(self, repo_key: tuple, name: str) -> dict | None:
        rows = self._rows("SELECT head, issue FROM branches WHERE remote=? AND org=? AND repo=? AND name=?",
                          (*repo_key, name))
        return {"head": rows[0][0], "issue": rows[0][1]} if rows else None

    def worktree(self, repo_key: tuple, path: str) -> dict:
        rows = self._rows("SELECT branch, registered, present FROM worktrees WHERE remote=? AND org=? AND repo=? "
                          "AND path=?", (*repo_key, path))
        if not rows:
            return {"exists": False, "registered": False, "branch": None}
        branch, registered, present = rows[0]
        return {"exists": bool(present), "registered": bool(registered), "branch": branch if registered else None}

    def get_pr(self, key: IssueKey) -> dict | None:
        rows = self._rows("SELECT body FROM pull_requests WHERE remote=? AND org=? AND repo=? AND issue_number=?",
                          tuple(key))
        return loads_strict(bytes(rows[0][0])) if rows else None

    # ------------------------------------------------------------------ writes

    def put_lock(self, key: IssueKey, lock: dict) -> None:
        self._exec("INSERT OR REPLACE INTO locks VALUES (?, ?, ?, ?, ?)", (*key, canonical_json(lock)))

    def create_binding(self, key: IssueKey, branch: str, worktree: str, at_head: str) -> None:
        self._exec("INSERT INTO branches VALUES (?, ?, ?, ?, ?, ?)", (*key.repository, branch, at_head, key.path))
        self._exec("INSERT INTO worktrees VALUES (?, ?, ?, ?, ?, 1, 1)", (*key.repository, worktree, branch))

    def commit(self, repo_key: tuple, branch: str, worktree: str, message: str, content: str, author: dict) -> dict:
        parent = self.branch(repo_key, branch)["head"]
        who = f"{author['username']} ({author['profile']})"
        sha = commit_id(parent, who, message, content)
        self._exec("INSERT OR IGNORE INTO commits VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   (*repo_key, sha, parent, who, message, content))
        self._exec("UPDATE branches SET head = ? WHERE remote=? AND org=? AND repo=? AND name=?",
                   (sha, *repo_key, branch))
        return {"parent": parent, "head": sha}

    def put_pr(self, key: IssueKey, pr: dict) -> None:
        self._exec("INSERT INTO pull_requests VALUES (?, ?, ?, ?, ?)", (*key, canonical_json(pr)))


class SqliteLockStore(SqliteStore):
    """``SqliteStore``'s pool and transactions over the issue-lock rows."""

    txn_class = LockTxn

    def __init__(self, path: str, **kw):
        if not os.path.exists(path):
            conn = connect(path, create=True)
            try:
                conn.executescript(SCHEMA)
            finally:
                conn.close()
        super().__init__(path, **kw)

    def seed(self, durable: dict) -> None:
        """Privileged scaffolding: load a ``durable`` object (``backends.issuelock.seed``)."""
        from backends.issuelock.seed import apply_seed

        with self.transaction(write=True) as txn:
            apply_seed(SqliteSeeder(txn), durable)

    def export_durable(self) -> dict:
        with self.transaction(write=False) as txn:
            c = txn._conn
            q = lambda sql: [tuple(r) for r in c.execute(sql).fetchall()]  # noqa: E731
            return {
                "config": {"lease_ttl_ms": txn.ttl_ms()},
                "identities": [{"token": t, "username": u, "profile": p}
                               for t, u, p in q("SELECT * FROM identities ORDER BY token")],
                "repositories": [{"remote": a, "org": b, "repo": r, "base_head": h}
                                 for a, b, r, h in q("SELECT * FROM repositories ORDER BY 1, 2, 3")],
                "branches": [{"remote": a, "org": b, "repo": r, "name": n, "head": h, "issue": i}
                             for a, b, r, n, h, i in q("SELECT * FROM branches ORDER BY 1, 2, 3, 4")],
                "worktrees": [{"remote": a, "org": b, "repo": r, "path": p, "branch": br if reg else None,
                               "registered": bool(reg), "exists": bool(pr)}
                              for a, b, r, p, br, reg, pr in q("SELECT * FROM worktrees ORDER BY 1, 2, 3, 4")],
                "locks": [{"remote": a, "org": b, "repo": r, "issue_number": n, "lock": R.parse_lock(bytes(body))}
                          for a, b, r, n, body in q("SELECT * FROM locks ORDER BY 1, 2, 3, 4")],
                "pull_requests": [{"remote": a, "org": b, "repo": r, "issue_number": n, "pull_request":
                                   loads_strict(bytes(body))}
                                  for a, b, r, n, body in q("SELECT * FROM pull_requests ORDER BY 1, 2, 3, 4")],
            }


class SqliteSeeder:
    """What ``apply_seed`` needs, over an open SQLite write transaction."""

    def __init__(self, txn: LockTxn):
        self.txn = txn

    def config(self, ttl_ms: int) -> None:
        self.txn._exec("INSERT OR REPLACE INTO config VALUES ('lease_ttl_ms', ?)", (str(int(ttl_ms)),))

    def identity(self, token: str, username, profile) -> None:
        self.txn._exec("INSERT OR REPLACE INTO identities VALUES (?, ?, ?)", (token, username, profile))

    def repository(self, repo_key: tuple, files: dict) -> str:
        head = base_commit_id(files)
        self.txn._exec("INSERT OR REPLACE INTO repositories VALUES (?, ?, ?, ?)", (*repo_key, head))
        return head

    def binding(self, key: IssueKey, branch: str, worktree: str, base_head: str) -> None:
        self.txn.create_binding(key, branch, worktree, base_head)

    def commit(self, key: IssueKey, branch: str, worktree: str, message: str, content: str, author: dict) -> str:
        return self.txn.commit(key.repository, branch, worktree, message, content, author)["head"]

    def damage_worktree(self, key: IssueKey, worktree: str, how: str, other_branch: str, base_head: str) -> None:
        if how == "missing":
            self.txn._exec("UPDATE worktrees SET present = 0 WHERE remote=? AND org=? AND repo=? AND path=?",
                           (*key.repository, worktree))
        elif how == "unregistered":
            self.txn._exec("UPDATE worktrees SET registered = 0 WHERE remote=? AND org=? AND repo=? AND path=?",
                           (*key.repository, worktree))
        elif how == "other-branch":
            self.txn._exec("INSERT INTO branches VALUES (?, ?, ?, ?, ?, NULL)",
                           (*key.repository, other_branch, base_head))
            self.txn._exec("UPDATE worktrees SET branch = ? WHERE remote=? AND org=? AND repo=? AND path=?",
                           (other_branch, *key.repository, worktree))

    def lock(self, key: IssueKey, lock: dict) -> None:
        self.txn.put_lock(key, lock)


def open_backend(spec: dict, clock, hooks):
    from backends.issuelock.engine import LockEngine

    store = SqliteLockStore(spec["path"], busy_timeout_s=float(spec.get("busy_timeout_s", BUSY_TIMEOUT_S)))
    return LockEngine(store, clock, hooks, name="issuelock-sqlite")
