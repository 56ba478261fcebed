"""Privileged administration of a PostgreSQL store schema.

None of this is a client write path; it is what an operator (or the
conformance runner) does to a store:

* ``provision`` / ``read_config``: the backend's display name, namespace
  allowlist and write-path inventory live in the ``provisioning`` table, so
  every process opening the schema reports the capability it really has.
  Omitting ``legacy_transition_v1`` from ``write_paths`` reproduces the
  missing-write-path case (vectors.md §11.9): the entry point still exists in
  the engine but is not enumerated.
* ``install_floor_failure_trigger`` / ``remove_floor_failure_trigger``: the
  CFP mechanism (vectors.md §11.5): a trigger raising on every insert/update
  of the floor table, so the decision's floor write fails and its transaction
  definitely rolls back. ``deferred=True`` installs a deferred constraint
  trigger instead, which fails at ``COMMIT`` (also a definite rollback).
* ``drop_created_schema``: drop a schema only if it carries claim-chaos's
  marker (what a run's watchdog does for a ``--dsn`` run that was killed);
  it never creates anything on the way.
* ``enable_bypass_writer`` + ``direct_write``: a genuinely uncoordinated
  writer (``alternate: "bypass"``): ledger bytes written without the claim
  fence, the namespace lock or the floor. Enabling it records the bypass in
  provisioning first; ``direct_write`` refuses on a schema that does not
  declare it.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Iterator, Sequence

import psycopg
from psycopg import sql

from backends.contract.records import BackendConfig
from backends.contract.capabilities import REQUIRED_WRITE_PATHS
from backends.contract.digests import revision

DEFAULT_NAME = "postgres-strict-fenced"
FENCED_WRITE_PATHS: dict[str, str] = dict(REQUIRED_WRITE_PATHS)
#: the inventory of capabilities-missing-write-path: transition exists, not enumerated
MISSING_TRANSITION_WRITE_PATHS = {k: v for k, v in FENCED_WRITE_PATHS.items() if k != "legacy_transition_v1"}
FLOOR_FAILURE_MESSAGE = "injected clock floor persistence failure"
_TRIGGER = "chaos_fail_floor"


class BypassNotDeclared(RuntimeError):
    """``direct_write`` on a schema whose provisioning has no bypass writer."""


@contextmanager
def admin_connection(dsn: str, schema: str) -> Iterator[psycopg.Connection]:
    """An autocommit connection whose search_path is the store's schema."""
    conn = psycopg.connect(dsn, autocommit=True, connect_timeout=5)
    try:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        yield conn
    finally:
        conn.close()


def drop_created_schema(dsn: str, name: str, connect_timeout: int = 5, lock_timeout_ms: int = 10_000) -> bool:
    """Drop schema ``name`` if claim-chaos created it (its ``provisioning``
    marker says so); never touches another schema. True when dropped."""
    from backends.postgres.schema import MARKER, valid_schema_name

    if not valid_schema_name(name):
        return False
    with psycopg.connect(dsn, autocommit=True, connect_timeout=connect_timeout) as conn:
        conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(int(lock_timeout_ms))))
        if not conn.execute("SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'provisioning'",
                            (name,)).fetchone():
            return False
        marked = conn.execute(sql.SQL("SELECT value FROM {}.provisioning WHERE key = 'marker'")
                              .format(sql.Identifier(name))).fetchone()
        if not marked or marked[0] != MARKER:
            return False
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
        return True


def provision(dsn: str, schema: str, namespaces: Sequence[str], name: str = DEFAULT_NAME,
              write_paths: dict[str, str] | None = None) -> None:
    """Record the configuration (the schema must exist: open a ``PostgresStore`` first)."""
    config = {
        "name": name,
        "namespaces": list(namespaces),
        "coordination_scope": "shared-transactional-coordinator",
        "durability": "durable-coordinator",
        "write_paths": dict(FENCED_WRITE_PATHS if write_paths is None else write_paths),
    }
    with admin_connection(dsn, schema) as conn, conn.transaction():
        for ns in namespaces:
            conn.execute("INSERT INTO namespaces VALUES (%s) ON CONFLICT DO NOTHING", (ns,))
        conn.execute("INSERT INTO provisioning VALUES ('config', %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                     (json.dumps(config),))


def read_config(dsn: str, schema: str) -> BackendConfig | None:
    """The recorded ``BackendConfig``, or None when not provisioned yet."""
    with admin_connection(dsn, schema) as conn:
        row = conn.execute("SELECT value FROM provisioning WHERE key = 'config'").fetchone()
    if row is None:
        return None
    prov = json.loads(row[0])
    return BackendConfig(
        name=prov["name"],
        namespaces=list(prov["namespaces"]),
        coordination_scope=prov["coordination_scope"],
        durability=prov["durability"],
        write_paths=dict(prov["write_paths"]),
        profile="fenced",
    )


def _update_config(dsn: str, schema: str, **changes) -> None:
    config = read_config(dsn, schema)
    if config is None:
        raise RuntimeError(f"schema {schema!r} is not provisioned")
    provision(dsn, schema, config.namespaces, changes.get("name", config.name),
              changes.get("write_paths", config.write_paths))


# --------------------------------------------------------------------------- CFP: floor persistence failure


def install_floor_failure_trigger(dsn: str, schema: str, deferred: bool = False) -> None:
    """Make every floor insert/update fail (immediately, or at COMMIT)."""
    remove_floor_failure_trigger(dsn, schema)
    with admin_connection(dsn, schema) as conn, conn.transaction():
        ident = sql.Identifier(schema)
        conn.execute(sql.SQL(
            "CREATE FUNCTION {}.chaos_fail_floor() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION '{}'; END $$").format(ident, sql.SQL(FLOOR_FAILURE_MESSAGE)))
        if deferred:
            conn.execute(sql.SQL(
                "CREATE CONSTRAINT TRIGGER {} AFTER INSERT OR UPDATE ON {}.floors "
                "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {}.chaos_fail_floor()"
            ).format(sql.Identifier(_TRIGGER), ident, ident))
        else:
            conn.execute(sql.SQL(
                "CREATE TRIGGER {} BEFORE INSERT OR UPDATE ON {}.floors "
                "FOR EACH ROW EXECUTE FUNCTION {}.chaos_fail_floor()").format(sql.Identifier(_TRIGGER), ident, ident))


def remove_floor_failure_trigger(dsn: str, schema: str) -> None:
    with admin_connection(dsn, schema) as conn, conn.transaction():
        ident = sql.Identifier(schema)
        conn.execute(sql.SQL("DROP TRIGGER IF EXISTS {} ON {}.floors").format(sql.Identifier(_TRIGGER), ident))
        conn.execute(sql.SQL("DROP FUNCTION IF EXISTS {}.chaos_fail_floor()").format(ident))


def floor_failure_armed(dsn: str, schema: str) -> bool:
    with admin_connection(dsn, schema) as conn:
        return conn.execute(
            "SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = 'floors' AND t.tgname = %s", (schema, _TRIGGER)).fetchone() is not None


# --------------------------------------------------------------------------- CFG: bypass writer


def enable_bypass_writer(dsn: str, schema: str) -> None:
    """Declare the uncoordinated writer: from now on the store reports
    ``alternate: "bypass"`` (and so is not strictly fenced)."""
    config = read_config(dsn, schema)
    if config is None:
        raise RuntimeError(f"schema {schema!r} is not provisioned")
    _update_config(dsn, schema, write_paths={**config.write_paths, "alternate": "bypass"})


def direct_write(dsn: str, schema: str, ns: str, item_id: str, data: bytes) -> None:
    """Write ledger bytes with no fence, no namespace lock and no floor."""
    config = read_config(dsn, schema)
    if config is None or config.write_paths.get("alternate") != "bypass":
        raise BypassNotDeclared(f"schema {schema!r} does not declare a bypass writer; call enable_bypass_writer first")
    with admin_connection(dsn, schema) as conn:
        conn.execute("INSERT INTO namespaces VALUES (%s) ON CONFLICT DO NOTHING", (ns,))
        conn.execute("INSERT INTO ledgers (ns, item_id, data, revision) VALUES (%s, %s, %s, %s) "
                     "ON CONFLICT (ns, item_id) DO UPDATE SET data = EXCLUDED.data, revision = EXCLUDED.revision",
                     (ns, item_id, bytes(data), revision(bytes(data))))
