"""The SQLite file's tables, and how provisioning is kept in it.

One file is the whole transactional coordinator: provisioning (allowlisted
namespaces, backend name, write-path inventory), claims, per-namespace clock
floors, ledger bytes, and publication outcomes. Keeping provisioning in the
same file means a second process that opens the file reports exactly the
configuration the first one set up, and the capability it derives from it is
the one the file really delivers (for example an enabled bypass writer).

Representation choices:

* epochs are canonical decimal TEXT: 2**64-1 does not fit SQLite's signed
  64-bit INTEGER (vectors.md 11.1, tag U64). They are compared in Python.
* instants are INTEGER milliseconds since the Unix epoch.
* ledger items are BLOBs of the exact bytes, with their ``sha256:`` revision
  stored next to them so the export can check the two still agree.
* outcomes carry ``seq``, an AUTOINCREMENT commit sequence number, so the
  export lists them in commit order.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from backends.contract.records import BackendConfig
from backends.contract.capabilities import REQUIRED_WRITE_PATHS

SCHEMA_VERSION = "1"
DEFAULT_NAME = "sqlite-strict-fenced"

#: The complete, atomically fenced inventory of this backend's entry points.
FENCED_WRITE_PATHS: dict[str, str] = dict(REQUIRED_WRITE_PATHS)

DDL = """
CREATE TABLE IF NOT EXISTS provisioning (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS clock_floors (
    ledger_namespace TEXT PRIMARY KEY,
    observed_at_ms   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS claims (
    ledger_namespace TEXT NOT NULL,
    item_id          TEXT NOT NULL,
    last_epoch       TEXT NOT NULL,
    owner_id         TEXT,
    active_epoch     TEXT,
    issued_at_ms     INTEGER,
    expires_at_ms    INTEGER,
    PRIMARY KEY (ledger_namespace, item_id)
);
CREATE TABLE IF NOT EXISTS ledgers (
    ledger_namespace TEXT NOT NULL,
    item_id          TEXT NOT NULL,
    data             BLOB NOT NULL,
    revision         TEXT NOT NULL,
    PRIMARY KEY (ledger_namespace, item_id)
);
CREATE TABLE IF NOT EXISTS publication_outcomes (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    operation_id     TEXT NOT NULL,
    ledger_namespace TEXT NOT NULL,
    item_id          TEXT NOT NULL,
    operation_digest TEXT NOT NULL,
    exit             INTEGER NOT NULL,
    envelope         TEXT NOT NULL,
    request          TEXT,
    UNIQUE (operation_id, ledger_namespace, item_id)
);
"""

FLOOR_TABLE = "clock_floors"


def create_tables(conn: sqlite3.Connection) -> None:
    conn.executescript(DDL)


def write_provisioning(conn: sqlite3.Connection, values: dict[str, Any]) -> None:
    """Upsert provisioning keys; every value is stored as JSON text."""
    for key, value in values.items():
        conn.execute(
            "INSERT INTO provisioning(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, json.dumps(value)),
        )


def read_provisioning(conn: sqlite3.Connection) -> dict[str, Any]:
    try:
        rows = conn.execute("SELECT key, value FROM provisioning").fetchall()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return {}
        raise
    return {key: json.loads(value) for key, value in rows}


def config_from_provisioning(prov: dict[str, Any]) -> BackendConfig:
    """The BackendConfig this file was provisioned with.

    The profile is always "fenced" (the file is a transactional coordinator);
    ``backends.contract.capabilities`` derives the reported mode from the
    write-path inventory, so a bypass or a missing entry point is reported as
    advisory.
    """
    write_paths = dict(prov.get("write_paths", FENCED_WRITE_PATHS))
    return BackendConfig(
        name=prov.get("name", DEFAULT_NAME),
        namespaces=list(prov.get("namespaces", [])),
        coordination_scope=prov.get("coordination_scope", "shared-transactional-coordinator"),
        durability=prov.get("durability", "durable-coordinator"),
        write_paths=write_paths,
        profile="fenced",
    )
