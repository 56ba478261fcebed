"""Privileged administration of a SQLite coordinator file.

None of this is a client write path of the backend; it is what an operator
(or the conformance runner) does to a file:

* ``provision``: create the tables and record the allowlisted namespaces, the
  backend's display name and its write-path inventory.
* ``install_floor_failure_trigger`` / ``remove_floor_failure_trigger``: the
  spec-sanctioned CFP mechanism (vectors.md 11.5): a trigger that makes every
  insert/update of the floor table fail, so a decision's floor write fails and
  its transaction definitely rolls back.
* ``enable_bypass_writer`` + ``direct_write``: a genuinely uncoordinated
  writer for the CFG vectors (``alternate: "bypass"``). It writes ledger bytes
  without the claim fence and without the floor. Enabling it records the
  bypass in provisioning first, so every process that opens the file reports
  the advisory capability the file really has; ``direct_write`` refuses to
  run on a file whose provisioning does not declare it.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Sequence

from backends.contract.digests import revision
from backends.sqlite import schema
from backends.sqlite.store import connect

FLOOR_TRIGGERS = ("chaos_fail_floor_insert", "chaos_fail_floor_update")
FLOOR_FAILURE_MESSAGE = "injected clock floor persistence failure"


class BypassNotDeclared(RuntimeError):
    """``direct_write`` on a file whose provisioning has no bypass writer."""


def _write_txn(path: str, create: bool = False) -> sqlite3.Connection:
    conn = connect(path, create=create)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def _finish(conn: sqlite3.Connection, ok: bool) -> None:
    try:
        conn.execute("COMMIT" if ok else "ROLLBACK")
    finally:
        conn.close()


def provision(
    path: str,
    namespaces: Sequence[str],
    name: str = schema.DEFAULT_NAME,
    write_paths: dict[str, str] | None = None,
) -> None:
    """Create (or re-provision) the coordinator file at ``path``.

    ``write_paths`` is the inventory of entry points this file has; omitting a
    key (e.g. ``legacy_transition_v1``) reproduces the missing-write-path case:
    the entry point still exists in the engine but is not enumerated.
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    conn = connect(path, create=True)
    try:
        schema.create_tables(conn)
    finally:
        conn.close()
    conn = _write_txn(path)
    ok = False
    try:
        schema.write_provisioning(
            conn,
            {
                "schema_version": schema.SCHEMA_VERSION,
                "name": name,
                "namespaces": list(namespaces),
                "coordination_scope": "shared-transactional-coordinator",
                "durability": "durable-coordinator",
                "write_paths": dict(schema.FENCED_WRITE_PATHS if write_paths is None else write_paths),
            },
        )
        ok = True
    finally:
        _finish(conn, ok)


def is_provisioned(path: str) -> bool:
    if not os.path.exists(path):
        return False
    conn = connect(path)
    try:
        return "namespaces" in schema.read_provisioning(conn)
    finally:
        conn.close()


def read_config(path: str):
    """The ``BackendConfig`` recorded in the file."""
    conn = connect(path)
    try:
        return schema.config_from_provisioning(schema.read_provisioning(conn))
    finally:
        conn.close()


# --------------------------------------------------------------------------- CFP fault


def install_floor_failure_trigger(path: str) -> None:
    """Make every floor insert/update fail with ``RAISE(ABORT, ...)``."""
    conn = _write_txn(path)
    ok = False
    try:
        for trigger, event in zip(FLOOR_TRIGGERS, ("INSERT", "UPDATE")):
            conn.execute(
                f"CREATE TRIGGER IF NOT EXISTS {trigger} BEFORE {event} ON {schema.FLOOR_TABLE} "
                f"BEGIN SELECT RAISE(ABORT, '{FLOOR_FAILURE_MESSAGE}'); END"
            )
        ok = True
    finally:
        _finish(conn, ok)


def remove_floor_failure_trigger(path: str) -> None:
    conn = _write_txn(path)
    ok = False
    try:
        for trigger in FLOOR_TRIGGERS:
            conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        ok = True
    finally:
        _finish(conn, ok)


def floor_failure_armed(path: str) -> bool:
    conn = connect(path)
    try:
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name IN (?, ?)", FLOOR_TRIGGERS
        ).fetchall()
        return len(rows) == len(FLOOR_TRIGGERS)
    finally:
        conn.close()


# --------------------------------------------------------------------------- CFG bypass


def enable_bypass_writer(path: str) -> None:
    """Declare the uncoordinated direct writer in the file's inventory."""
    conn = _write_txn(path)
    ok = False
    try:
        prov = schema.read_provisioning(conn)
        paths = dict(prov.get("write_paths", schema.FENCED_WRITE_PATHS))
        paths["alternate"] = "bypass"
        schema.write_provisioning(conn, {"write_paths": paths})
        ok = True
    finally:
        _finish(conn, ok)


def direct_write(path: str, ns: str, item_id: str, data: bytes) -> None:
    """Overwrite a ledger item's bytes with no fence, no floor, no outcome.

    This is the bypass the advisory capability warns about; it exists so the
    advisory configuration is real, not a relabelled fenced one.
    """
    conn = _write_txn(path)
    ok = False
    try:
        paths = schema.read_provisioning(conn).get("write_paths", {})
        if paths.get("alternate") != "bypass":
            raise BypassNotDeclared(f"{path} does not declare a bypass writer; call enable_bypass_writer first")
        conn.execute(
            "INSERT INTO ledgers(ledger_namespace, item_id, data, revision) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(ledger_namespace, item_id) DO UPDATE SET data = excluded.data, revision = excluded.revision",
            (ns, item_id, sqlite3.Binary(bytes(data)), revision(bytes(data))),
        )
        ok = True
    finally:
        _finish(conn, ok)
