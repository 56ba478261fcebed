"""``SqliteStore``: the durable storage of the strict-fenced SQLite backend.

One SQLite file is the transactional coordinator. Every authoritative
decision runs in one ``BEGIN IMMEDIATE`` transaction (the serialized decision
boundary across every process that opens the file); reads use a plain
``BEGIN``. Settings, and why:

* ``journal_mode=DELETE`` (rollback journal): fault-tooling.md 3 measured that
  in WAL mode a commit whose fsync failed can come back after a crash; the
  rollback journal did not resurrect it.
* ``synchronous=EXTRA``: a commit that returned is on disk, also across a
  power loss. FULL is not enough in DELETE mode: the commit point is the
  journal's unlink, and only EXTRA fsyncs the directory after it, so with FULL
  a power loss right after a commit brings the hot journal back and rolls the
  acknowledged transaction back (measured with the power-loss shim,
  ``chaos.faults.powerloss``: 49 of 50 acknowledged commits survived FULL,
  50 of 50 EXTRA). ``synchronous`` is a parameter only for the suite's own
  variant backends that break it on purpose.
* ``busy_timeout`` 30 s: contention waits; only a lock held longer than that
  becomes ``StoreUnavailable("database-locked")``.
* ``isolation_level=None``: the module never opens transactions behind our
  back; we issue BEGIN/COMMIT ourselves.

Error mapping (the engine turns these into contract codes):

* floor statement fails -> rollback, ``FloorPersistFailed`` (in ``SqliteTxn``);
* COMMIT fails with an I/O error (fsync EIO is ``SQLITE_IOERR_FSYNC``, 1034)
  or anything else unexplained -> rollback if still open,
  ``CommitOutcomeUnknown``;
* COMMIT or BEGIN fails with SQLITE_BUSY -> nothing was written,
  ``StoreUnavailable("database-locked")``;
* the file is missing or cannot be opened -> ``StoreUnavailable``.

Connections are pooled (one per concurrent transaction, so a host process can
run calls in threads); ``reopen()`` closes every one of them.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
import urllib.parse
from contextlib import contextmanager
from typing import Iterator

from backends.api import CommitOutcomeUnknown, StoreUnavailable
from backends.sqlite import projection
from backends.sqlite.txn import SqliteTxn

BUSY_TIMEOUT_S = 30.0
_POLL_MIN_S = 0.0002
_POLL_MAX_S = 0.002
SQLITE_BUSY = 5
SQLITE_IOERR = 10


def _primary(e: sqlite3.Error) -> int | None:
    code = getattr(e, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def unavailable(e: sqlite3.Error, what: str) -> StoreUnavailable:
    """The ``StoreUnavailable`` for an error before any decision: another
    connection holds the lock, or the file cannot be opened or read."""
    if _primary(e) == SQLITE_BUSY:
        return StoreUnavailable("database-locked", f"{what}: {e}")
    return StoreUnavailable("database-unopenable", f"{what}: {e}")


SYNCHRONOUS = "EXTRA"


def connect(path: str, create: bool = False, timeout: float = BUSY_TIMEOUT_S,
            synchronous: str = SYNCHRONOUS) -> sqlite3.Connection:
    """Open ``path`` with the coordinator's settings.

    Without ``create`` a missing file is an error (SQLite would otherwise
    silently create an empty, unprovisioned database).
    """
    mode = "rwc" if create else "rw"
    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode={mode}"
    conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        mode_row = conn.execute("PRAGMA journal_mode = DELETE").fetchone()
        if mode_row is None or str(mode_row[0]).lower() != "delete":
            raise sqlite3.OperationalError(f"journal_mode is {mode_row!r}, not delete")
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous={synchronous!r}")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
    except BaseException:
        conn.close()
        raise
    return conn


class SqliteStore:
    """Durable storage in one SQLite file (see the module docstring).
    ``txn_class`` is what a transaction yields (the issue-lock store reuses
    the connection pool and the commit-failure mapping with its own rows)."""

    txn_class = SqliteTxn

    def __init__(self, path: str, busy_timeout_s: float = BUSY_TIMEOUT_S, synchronous: str = SYNCHRONOUS):
        self.path = os.path.abspath(path)
        self.busy_timeout_s = busy_timeout_s
        self.synchronous = synchronous
        self._lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = []
        self._all: set[sqlite3.Connection] = set()
        self._closed = False

    # ------------------------------------------------------------------ connections

    def _take(self) -> sqlite3.Connection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        if not os.path.exists(self.path):
            raise StoreUnavailable("database-not-found", f"no SQLite file at {self.path}")
        try:
            conn = connect(self.path, timeout=self.busy_timeout_s, synchronous=self.synchronous)
        except sqlite3.Error as e:
            raise unavailable(e, f"cannot open {self.path}") from e
        with self._lock:
            self._all.add(conn)
        return conn

    def _give_back(self, conn: sqlite3.Connection, healthy: bool) -> None:
        with self._lock:
            keep = healthy and not self._closed and conn in self._all and not conn.in_transaction
            if keep:
                self._idle.append(conn)
                return
            self._all.discard(conn)
        try:
            conn.close()
        except sqlite3.Error:
            pass

    def close(self) -> None:
        """Close every connection. In-flight transactions close theirs when done."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._all.clear()  # connections in use are closed by _give_back
        for conn in idle:
            conn.close()

    def reopen(self) -> None:
        """Drop every connection (process state) and accept new transactions."""
        self.close()
        with self._lock:
            self._closed = False

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def transaction(self, write: bool) -> Iterator[SqliteTxn]:
        """One transaction: ``BEGIN IMMEDIATE`` for writes, ``BEGIN`` for reads.

        Leaving the block normally commits; an exception inside rolls back and
        propagates. Commit failures are mapped as the module docstring says.
        """
        conn = self._take()
        healthy = True
        try:
            try:
                self._begin(conn, write)
            except sqlite3.Error as e:
                healthy = False
                raise unavailable(e, "BEGIN") from e
            try:
                yield self.txn_class(conn, write)
            except BaseException:
                self._rollback(conn)
                raise
            self._commit(conn)
        except BaseException:
            healthy = healthy and not conn.in_transaction
            raise
        finally:
            self._give_back(conn, healthy)

    def _begin(self, conn: sqlite3.Connection, write: bool) -> None:
        """``BEGIN IMMEDIATE`` for writes; for reads ``BEGIN`` plus one read of
        the schema, so the SHARED lock is taken here, where we can wait for it
        our way, and held until the end of the transaction."""
        if write:
            self._poll_busy(conn, "BEGIN IMMEDIATE")
            return
        conn.execute("BEGIN")
        self._poll_busy(conn, "SELECT count(*) FROM sqlite_master")

    def _poll_busy(self, conn: sqlite3.Connection, sql: str) -> None:
        """Run ``sql``, retrying on SQLITE_BUSY with short jittered sleeps
        until the busy timeout.

        SQLite's built-in busy handler sleeps 1, 2, 5, ... up to 100 ms between
        attempts, which under multi-process contention starves waiters for
        seconds (benchmarks/backend_ops.py measured p99 above 3 s). While we
        poll, the connection's own handler is off; it is restored afterwards
        for the statements inside the transaction.
        """
        deadline = time.monotonic() + self.busy_timeout_s
        delay = _POLL_MIN_S
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            while True:
                try:
                    conn.execute(sql)
                    return
                except sqlite3.OperationalError as e:
                    if _primary(e) != SQLITE_BUSY or time.monotonic() >= deadline:
                        raise
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, _POLL_MAX_S)
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def _commit(self, conn: sqlite3.Connection) -> None:
        if not conn.in_transaction:
            # Already rolled back inside (a mapped statement failure that the
            # caller chose to swallow): nothing to commit, nothing changed.
            return
        try:
            # A COMMIT that gets SQLITE_BUSY (readers still hold SHARED) keeps
            # the transaction open and may be retried (sqlite.org/lang_transaction).
            self._poll_busy(conn, "COMMIT")
        except sqlite3.Error as e:
            busy = _primary(e) == SQLITE_BUSY
            self._rollback(conn)
            if busy:
                # SQLITE_BUSY at COMMIT: the EXCLUSIVE lock was never taken,
                # so no byte of the database file was written.
                raise StoreUnavailable("database-locked", f"COMMIT: {e}") from e
            raise CommitOutcomeUnknown(f"COMMIT failed ({getattr(e, 'sqlite_errorname', '?')}): {e}") from e

    # ------------------------------------------------------------------ privileged scaffolding

    def seed(self, durable: dict) -> None:
        """Load a manifest-shaped ``durable`` object (test scaffolding, not a write path)."""
        with self.transaction(write=True) as txn:
            projection.seed(txn, durable)

    def export_durable(self) -> dict:
        """The durable projection in the manifest's shape (vectors.md 11.11)."""
        conn = self._take()
        try:
            conn.execute("BEGIN")
            try:
                return projection.export(conn)
            finally:
                self._rollback(conn)
        finally:
            self._give_back(conn, True)

