"""``SqliteTxn``: the ``Txn`` protocol over one open SQLite transaction.

It only reads and writes rows; every decision is the engine's. The one
storage-level rule it enforces is the mapping of a failed floor write to
``FloorPersistFailed`` (after rolling the transaction back, so the engine can
truthfully say nothing changed), and it refuses a floor that would go down
(a floor never decreases: that would be an engine bug, never a store choice).
"""

from __future__ import annotations

import json
import sqlite3

from backends.api import FloorPersistFailed, StoredOutcome, StoreUnavailable
from backends.contract.records import Active, ClaimRecord
from backends.contract.digests import revision as revision_of


class ReadOnlyTransaction(RuntimeError):
    """A write was attempted through a read transaction (a programming error)."""


class SqliteTxn:
    def __init__(self, conn: sqlite3.Connection, write: bool):
        self._conn = conn
        self._write = write

    # ------------------------------------------------------------------ helpers

    def _query(self, sql: str, args: tuple) -> list[tuple]:
        try:
            return self._conn.execute(sql, args).fetchall()
        except sqlite3.Error as e:
            raise StoreUnavailable("sqlite-read-failed", f"sqlite read failed: {e}") from e

    def _modify(self, sql: str, args: tuple) -> None:
        if not self._write:
            raise ReadOnlyTransaction(sql.split()[0] + " inside a read transaction")
        try:
            self._conn.execute(sql, args)
        except sqlite3.Error as e:
            # Nothing is committed before COMMIT (rollback journal): a failed
            # statement leaves the durable state exactly as it was.
            self._rollback()
            raise StoreUnavailable("sqlite-write-failed", f"sqlite write failed: {e}") from e

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    # ------------------------------------------------------------------ floors

    def get_floor(self, ns: str) -> int | None:
        rows = self._query("SELECT observed_at_ms FROM clock_floors WHERE ledger_namespace = ?", (ns,))
        return rows[0][0] if rows else None

    def set_floor(self, ns: str, ms: int) -> None:
        if not self._write:
            raise ReadOnlyTransaction("set_floor inside a read transaction")
        current = self.get_floor(ns)
        if current is not None and ms < current:
            raise ValueError(f"floor of {ns} would decrease from {current} to {ms}")
        try:
            self._conn.execute(
                "INSERT INTO clock_floors(ledger_namespace, observed_at_ms) VALUES (?, ?) "
                "ON CONFLICT(ledger_namespace) DO UPDATE SET observed_at_ms = excluded.observed_at_ms",
                (ns, int(ms)),
            )
        except sqlite3.Error as e:
            # A trigger's RAISE(ABORT) undoes only the statement; roll the whole
            # transaction back so "nothing changed" is definitely true.
            self._rollback()
            raise FloorPersistFailed(f"floor write failed: {e}") from e

    # ------------------------------------------------------------------ claims

    def get_claim(self, ns: str, item_id: str) -> ClaimRecord | None:
        rows = self._query(
            "SELECT last_epoch, owner_id, active_epoch, issued_at_ms, expires_at_ms "
            "FROM claims WHERE ledger_namespace = ? AND item_id = ?",
            (ns, item_id),
        )
        if not rows:
            return None
        last_epoch, owner_id, active_epoch, issued, expires = rows[0]
        active = None
        if owner_id is not None:
            active = Active(owner_id=owner_id, epoch=int(active_epoch), issued_at=issued, expires_at=expires)
        return ClaimRecord(ledger_namespace=ns, item_id=item_id, last_epoch=int(last_epoch), active=active)

    def put_claim(self, rec: ClaimRecord) -> None:
        a = rec.active
        self._modify(
            "INSERT INTO claims(ledger_namespace, item_id, last_epoch, owner_id, active_epoch, "
            "issued_at_ms, expires_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(ledger_namespace, item_id) DO UPDATE SET last_epoch = excluded.last_epoch, "
            "owner_id = excluded.owner_id, active_epoch = excluded.active_epoch, "
            "issued_at_ms = excluded.issued_at_ms, expires_at_ms = excluded.expires_at_ms",
            (
                rec.ledger_namespace,
                rec.item_id,
                str(int(rec.last_epoch)),
                a.owner_id if a else None,
                str(int(a.epoch)) if a else None,
                a.issued_at if a else None,
                a.expires_at if a else None,
            ),
        )

    # ------------------------------------------------------------------ ledgers

    def get_ledger(self, ns: str, item_id: str) -> bytes | None:
        rows = self._query("SELECT data FROM ledgers WHERE ledger_namespace = ? AND item_id = ?", (ns, item_id))
        return bytes(rows[0][0]) if rows else None

    def put_ledger(self, ns: str, item_id: str, data: bytes) -> None:
        data = bytes(data)
        self._modify(
            "INSERT INTO ledgers(ledger_namespace, item_id, data, revision) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(ledger_namespace, item_id) DO UPDATE SET data = excluded.data, "
            "revision = excluded.revision",
            (ns, item_id, sqlite3.Binary(data), revision_of(data)),
        )

    # ------------------------------------------------------------------ outcomes

    def get_outcome(self, operation_id: str, ns: str, item_id: str) -> StoredOutcome | None:
        rows = self._query(
            "SELECT operation_digest, exit, envelope, request FROM publication_outcomes "
            "WHERE operation_id = ? AND ledger_namespace = ? AND item_id = ?",
            (operation_id, ns, item_id),
        )
        if not rows:
            return None
        digest, exit_code, envelope, request = rows[0]
        return StoredOutcome(
            operation_id=operation_id,
            ledger_namespace=ns,
            item_id=item_id,
            operation_digest=digest,
            exit=exit_code,
            envelope=json.loads(envelope),
            request=json.loads(request) if request is not None else None,
        )

    def put_outcome(self, outcome: StoredOutcome) -> None:
        # Outcomes are terminal: a second put for the same identity is an
        # engine bug and fails (UNIQUE) rather than overwriting history.
        self._modify(
            "INSERT INTO publication_outcomes(operation_id, ledger_namespace, item_id, "
            "operation_digest, exit, envelope, request) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                outcome.operation_id,
                outcome.ledger_namespace,
                outcome.item_id,
                outcome.operation_digest,
                int(outcome.exit),
                json.dumps(outcome.envelope, ensure_ascii=False, separators=(",", ":")),
                None if outcome.request is None
                else json.dumps(outcome.request, ensure_ascii=False, separators=(",", ":")),
            ),
        )
