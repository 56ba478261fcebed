"""``PostgresStore``: the durable coordinator of the strict fenced PostgreSQL backend.

It is storage only; ``backends.engine`` makes every decision. One decision is
one PostgreSQL transaction (READ COMMITTED, explicit ``BEGIN``/``COMMIT`` on
an autocommit connection, so we know exactly when ``COMMIT`` was sent).

Serialization: the first time a write transaction touches a namespace it
takes ``SELECT ... FOR UPDATE`` on that namespace's row in ``namespaces``.
The clock floor is per namespace and every decision persists it, so every
decision in a namespace must serialize on it anyway; this makes that explicit
and lets ``publish`` re-read claim and ledger under the lock (vectors.md §11.3).

Whose clock is authoritative: the *service's*, i.e. the physical clock of the
process running this store (``backends.api.Clock``, which the engine reads:
``SystemClock``, or ``FileClock``/``FixedClock`` set by the harness; a clock
nemesis skews exactly that process with libfaketime). The database's
``now()`` is never used. The floor lives in the database, so effective time
is ``max(service clock, durable floor)`` and survives restarts of either side.

Failure mapping (see ``errors.py``): a failed floor write or a COMMIT the
server definitely refused -> ``FloorPersistFailed`` (rolled back); a lost
connection, I/O error (PANIC) or deadline once COMMIT may have been sent ->
``CommitOutcomeUnknown``; anything before COMMIT that loses the session, and
every failed connect -> ``StoreUnavailable(reason)``. Every transaction has a
deadline (``deadline_s``) enforced by cutting the socket (``deadline.py``).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import psycopg
from psycopg import sql

from backends.api import CommitOutcomeUnknown, FloorPersistFailed, StoredOutcome, StoreUnavailable
from backends.contract.records import Active, ClaimRecord
from backends.postgres import errors, schema
from backends.postgres.deadline import Watchdog, cut_socket
from backends.postgres.export import export_durable, revision_of, seed_durable

DEFAULT_DEADLINE_S = 5.0


class PostgresStore:
    """Store over one PostgreSQL schema. Thread-safe: transactions of one
    store are serialized on its single connection.

    ``dsn``: libpq DSN. ``schema``: the schema to use; None creates a fresh
    ``claimchaos_<hex>`` (``self.schema`` tells which). An existing schema is
    reused only if it carries our marker, so a user schema is never touched.
    ``commit_cut_file``: when that file exists at the COMMIT of a transaction
    that stores a publication outcome, the store removes it and cuts its own
    connection instead of committing (one-shot; vectors.md §11.6).
    """

    def __init__(self, dsn: str, schema_name: str | None = None, *, namespaces: list[str] = (),
                 deadline_s: float = DEFAULT_DEADLINE_S, commit_cut_file: str | None = None,
                 provision: bool = True):
        self.dsn = dsn
        self.schema = schema_name or schema.random_schema_name()
        if not schema.valid_schema_name(self.schema):
            raise ValueError(f"invalid schema name {self.schema!r} (want [a-z_][a-z0-9_]*)")
        self.deadline_s = float(deadline_s)
        self.commit_cut_file = commit_cut_file
        self._conn: psycopg.Connection | None = None
        self._reopen_pending = False   # a restart came while a transaction held the connection
        self._lock = threading.RLock()
        self._watchdog = Watchdog()
        self.created_schema = False
        if provision:  # else the schema exists (a run's worker host): opening never waits on the server
            self._provision(list(namespaces))

    # ------------------------------------------------------------------ connection

    def _connect(self) -> psycopg.Connection:
        timeout = max(2, int(self.deadline_s + 0.999))  # libpq's minimum is 2 s
        try:
            conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=timeout)
        except psycopg.Error as e:
            raise StoreUnavailable(errors.connect_failure_reason(e), str(e).strip()) from e
        try:
            self._watchdog.arm(conn, self.deadline_s)
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        except psycopg.Error as e:
            conn.close()
            raise StoreUnavailable(errors.statement_failure_reason(e, self._watchdog.fired), str(e)) from e
        finally:
            self._watchdog.disarm()
        return conn

    def connection(self) -> psycopg.Connection:
        if self._reopen_pending:  # a restart while a call held the lock: this is its first transaction after
            self._reopen_pending = False
            self._drop()
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop()
            self._conn = self._connect()
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None

    def _provision(self, namespaces: list[str]) -> None:
        """Create (or adopt) our schema and tables; provision namespaces."""
        with self._lock:
            conn = self._admin_connect()
            try:
                with conn.transaction():
                    # Concurrent workers opening one spec: DDL under one lock.
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("claimchaos:" + self.schema,))
                    exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)).fetchone()
                    ident = sql.Identifier(self.schema)
                    if exists:
                        marked = conn.execute(
                            "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'provisioning'", (self.schema,)).fetchone()
                        if not marked:
                            raise ValueError(f"schema {self.schema!r} exists and is not a claim-chaos store; refusing to use it")
                    else:
                        conn.execute(sql.SQL("CREATE SCHEMA {}").format(ident))
                        self.created_schema = True
                    conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(ident))
                    for ddl in schema.TABLES:
                        conn.execute(ddl)
                    conn.execute("INSERT INTO provisioning VALUES ('marker', %s) ON CONFLICT DO NOTHING", (schema.MARKER,))
                    for ns in namespaces:
                        conn.execute("INSERT INTO namespaces VALUES (%s) ON CONFLICT DO NOTHING", (ns,))
            finally:
                conn.close()

    def _admin_connect(self) -> psycopg.Connection:
        try:
            return psycopg.connect(self.dsn, autocommit=True, connect_timeout=max(2, int(self.deadline_s + 0.999)))
        except psycopg.Error as e:
            raise StoreUnavailable(errors.connect_failure_reason(e), str(e).strip()) from e

    # ------------------------------------------------------------------ Store protocol

    def transaction(self, write: bool) -> "_Transaction":
        return _Transaction(self, write)

    def close(self) -> None:
        with self._lock:
            self._drop()
        self._watchdog.close()

    def reopen(self) -> None:
        """Drop the connection (and all session state); the next transaction
        reconnects. Never waits: a call in flight (blocked on a paused server,
        say) keeps its connection to its end, and the next transaction drops it."""
        if self._lock.acquire(blocking=False):
            try:
                self._drop()
            finally:
                self._lock.release()
        else:
            self._reopen_pending = True

    def seed(self, durable: dict) -> None:
        """Privileged setup writer (test scaffolding, not an advertised write path)."""
        with self._lock, self.transaction(write=True) as txn:
            seed_durable(txn, durable)

    def export_durable(self) -> dict:
        with self._lock, self.transaction(write=False) as txn:
            return export_durable(txn)

    def drop_created(self) -> bool:
        """Drop our schema if claim-chaos created it (its ``provisioning`` marker says
        so). Never touches another schema. Returns True when dropped."""
        from backends.postgres.admin import drop_created_schema

        self.close()
        return drop_created_schema(self.dsn, self.schema, connect_timeout=max(2, int(self.deadline_s + 0.999)))


class _Transaction:
    """Context manager for one decision transaction; yields a ``PgTxn``."""

    def __init__(self, store: PostgresStore, write: bool):
        self.store = store
        self.write = write
        self.txn: PgTxn | None = None

    def __enter__(self) -> "PgTxn":
        store = self.store
        store._lock.acquire()
        try:
            self._begin()
        except BaseException:
            store._watchdog.disarm()
            store._lock.release()
            raise
        return self.txn

    def _begin(self) -> None:
        store = self.store
        begin = "BEGIN ISOLATION LEVEL READ COMMITTED" if self.write else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        for attempt in (1, 2):
            fresh = store._reopen_pending or store._conn is None or store._conn.closed or store._conn.broken
            conn = store.connection()
            store._watchdog.arm(conn, store.deadline_s)
            try:
                conn.execute(begin)
                self.txn = PgTxn(store, conn, self.write)
                return
            except psycopg.Error as e:
                fired = store._watchdog.disarm()
                store._drop()
                # A reused connection may have died with a server restart; only
                # BEGIN was sent on it, so one reconnect is safe.
                if attempt == 1 and not fresh and not fired and errors.is_connection_error(e):
                    continue
                raise StoreUnavailable(errors.statement_failure_reason(e, fired), str(e).strip()) from e

    def __exit__(self, exc_type, exc, tb) -> bool:
        store = self.store
        try:
            if exc_type is not None:
                self._rollback()
                return False
            if not self.write:
                self._rollback()  # read-only: nothing to commit
                return False
            self._commit()
            return False
        finally:
            store._watchdog.disarm()
            store._lock.release()

    def _rollback(self) -> None:
        conn = self.store._conn
        if conn is None or conn.closed or conn.broken:
            self.store._drop()
            return
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            self.store._drop()

    def _commit(self) -> None:
        store, txn = self.store, self.txn
        conn = txn.conn
        cut = store.commit_cut_file
        if cut and txn.wrote_outcome and os.path.exists(cut):
            # Fault: the session is cut as COMMIT is sent; the server aborts it.
            try:
                os.unlink(cut)
            except FileNotFoundError:
                pass
            cut_socket(conn)
        try:
            conn.execute("COMMIT")
        except psycopg.Error as e:
            fired = store._watchdog.fired
            if fired or errors.is_connection_error(e):
                store._drop()
                raise CommitOutcomeUnknown(
                    f"commit outcome unknown ({errors.statement_failure_reason(e, fired)}): {str(e).strip()}") from e
            # The server answered COMMIT with an error (e.g. a deferred trigger
            # on the floor table): the transaction is definitely rolled back.
            self._rollback()
            if txn.wrote_floor:
                raise FloorPersistFailed(f"commit refused: {str(e).strip()}") from e
            raise StoreUnavailable(errors.statement_failure_reason(e, False), str(e).strip()) from e
        except OSError as e:  # defensive: socket-level failure outside psycopg
            store._drop()
            raise CommitOutcomeUnknown(f"commit outcome unknown: {e}") from e


class PgTxn:
    """The ``Txn`` protocol on one open PostgreSQL transaction."""

    def __init__(self, store: PostgresStore, conn: psycopg.Connection, write: bool):
        self.store = store
        self.conn = conn
        self.write = write
        self.locked: set[str] = set()
        self.wrote_floor = False
        self.wrote_outcome = False

    def _exec(self, query: str, params: tuple = (), *, floor: bool = False):
        try:
            return self.conn.execute(query, params)
        except psycopg.Error as e:
            fired = self.store._watchdog.fired
            if floor and not fired and not errors.is_connection_error(e):
                raise FloorPersistFailed(f"floor write failed: {str(e).strip()}") from e
            raise StoreUnavailable(errors.statement_failure_reason(e, fired), str(e).strip()) from e

    def _lock_ns(self, ns: str) -> None:
        """Take the namespace's decision lock (write transactions only)."""
        if not self.write or ns in self.locked:
            return
        row = self._exec("SELECT ns FROM namespaces WHERE ns = %s FOR UPDATE", (ns,)).fetchone()
        if row is None:  # not provisioned at open: provision now, then lock
            self._exec("INSERT INTO namespaces VALUES (%s) ON CONFLICT DO NOTHING", (ns,))
            self._exec("SELECT ns FROM namespaces WHERE ns = %s FOR UPDATE", (ns,))
        self.locked.add(ns)

    # floors
    def get_floor(self, ns: str) -> int | None:
        self._lock_ns(ns)
        row = self._exec("SELECT ms FROM floors WHERE ns = %s", (ns,)).fetchone()
        return None if row is None else int(row[0])

    def set_floor(self, ns: str, ms: int) -> None:
        self._lock_ns(ns)
        self.wrote_floor = True
        self._exec("INSERT INTO floors (ns, ms) VALUES (%s, %s) ON CONFLICT (ns) DO UPDATE SET ms = EXCLUDED.ms",
                   (ns, int(ms)), floor=True)

    # claims
    def get_claim(self, ns: str, item_id: str) -> ClaimRecord | None:
        self._lock_ns(ns)
        row = self._exec("SELECT last_epoch, owner_id, epoch, issued_at, expires_at FROM claims "
                         "WHERE ns = %s AND item_id = %s", (ns, item_id)).fetchone()
        if row is None:
            return None
        last_epoch, owner, epoch, issued, expires = row
        active = None if owner is None else Active(owner, int(epoch), int(issued), int(expires))
        return ClaimRecord(ns, item_id, int(last_epoch), active)

    def put_claim(self, rec: ClaimRecord) -> None:
        self._lock_ns(rec.ledger_namespace)
        a = rec.active
        self._exec(
            "INSERT INTO claims (ns, item_id, last_epoch, owner_id, epoch, issued_at, expires_at) "
            "VALUES (%s, %s, %s::numeric, %s, %s::numeric, %s, %s) ON CONFLICT (ns, item_id) DO UPDATE SET "
            "last_epoch = EXCLUDED.last_epoch, owner_id = EXCLUDED.owner_id, epoch = EXCLUDED.epoch, "
            "issued_at = EXCLUDED.issued_at, expires_at = EXCLUDED.expires_at",
            (rec.ledger_namespace, rec.item_id, str(rec.last_epoch),
             a.owner_id if a else None, str(a.epoch) if a else None,
             a.issued_at if a else None, a.expires_at if a else None))

    # ledgers
    def get_ledger(self, ns: str, item_id: str) -> bytes | None:
        self._lock_ns(ns)
        row = self._exec("SELECT data FROM ledgers WHERE ns = %s AND item_id = %s", (ns, item_id)).fetchone()
        return None if row is None else bytes(row[0])

    def put_ledger(self, ns: str, item_id: str, data: bytes) -> None:
        self._lock_ns(ns)
        self._exec("INSERT INTO ledgers (ns, item_id, data, revision) VALUES (%s, %s, %s, %s) "
                   "ON CONFLICT (ns, item_id) DO UPDATE SET data = EXCLUDED.data, revision = EXCLUDED.revision",
                   (ns, item_id, bytes(data), revision_of(bytes(data))))

    # publication outcomes
    def get_outcome(self, operation_id: str, ns: str, item_id: str) -> StoredOutcome | None:
        self._lock_ns(ns)
        row = self._exec("SELECT digest, exit, envelope, request FROM outcomes "
                         "WHERE operation_id = %s AND ns = %s AND item_id = %s", (operation_id, ns, item_id)).fetchone()
        if row is None:
            return None
        digest, exit_code, envelope, request = row
        return StoredOutcome(operation_id, ns, item_id, digest, int(exit_code), json.loads(envelope),
                             json.loads(request) if request is not None else None)

    def put_outcome(self, outcome: StoredOutcome) -> None:
        self._lock_ns(outcome.ledger_namespace)
        self.wrote_outcome = True
        self._exec("INSERT INTO outcomes (operation_id, ns, item_id, digest, exit, envelope, request) "
                   "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                   (outcome.operation_id, outcome.ledger_namespace, outcome.item_id, outcome.operation_digest,
                    int(outcome.exit), _json_text(outcome.envelope),
                    None if outcome.request is None else _json_text(outcome.request)))

    # used by export only
    def rows(self, query: str) -> list[tuple[Any, ...]]:
        return self._exec(query).fetchall()


def _json_text(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
