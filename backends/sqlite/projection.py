"""Seed and export the durable projection in the manifest's shape.

The shape is vectors.md 3.1 (``durable``) / 11.11: four arrays,
``clock_floors`` sorted by namespace, ``claims`` and ``ledgers`` by tuple,
``publication_outcomes`` in commit order (the AUTOINCREMENT ``seq``), each
outcome's envelope as ``{exit, stdout}``. Record shapes and value formats come
from ``backends.contract``; this module only moves rows.

Seeding is privileged test scaffolding (vectors.md 11.1): it writes through
the same ``Txn`` rows the engine uses, but is never a reported write path.
"""

from __future__ import annotations

import base64
import json
import sqlite3

from backends.api import StoredOutcome
from backends.contract.records import Active, ClaimRecord
from backends.contract.digests import revision
from backends.contract.envelopes import claim_record_json
from backends.contract.values import encode_base64, format_instant, parse_epoch, parse_instant
from backends.sqlite.txn import SqliteTxn


class ProjectionMismatch(ValueError):
    """Stored data contradicts itself (e.g. a stored revision that is not the
    digest of the stored bytes). Never silently exported."""


def _claim_from_json(rec: dict) -> ClaimRecord:
    a = rec.get("active")
    active = None
    if a is not None:
        active = Active(
            owner_id=a["owner_id"],
            epoch=parse_epoch(a["epoch"], active=True),
            issued_at=parse_instant(a["issued_at"]),
            expires_at=parse_instant(a["expires_at"]),
        )
    return ClaimRecord(rec["ledger_namespace"], rec["item_id"], parse_epoch(rec["last_epoch"]), active)


def seed(txn: SqliteTxn, durable: dict) -> None:
    """Write ``durable`` (floors, claims, ledgers, outcomes) through ``txn``."""
    for floor in durable.get("clock_floors", []):
        txn.set_floor(floor["ledger_namespace"], parse_instant(floor["observed_at"]))
    for rec in durable.get("claims", []):
        txn.put_claim(_claim_from_json(rec))
    for led in durable.get("ledgers", []):
        data = base64.b64decode(led["source_base64"], validate=True)
        if "revision" in led and led["revision"] != revision(data):
            raise ProjectionMismatch(f"seeded revision of {led['item_id']} is not the digest of its bytes")
        txn.put_ledger(led["ledger_namespace"], led["item_id"], data)
    for out in durable.get("publication_outcomes", []):
        txn.put_outcome(
            StoredOutcome(
                operation_id=out["operation_id"],
                ledger_namespace=out["ledger_namespace"],
                item_id=out["item_id"],
                operation_digest=out["operation_digest"],
                exit=out["envelope"]["exit"],
                envelope=out["envelope"]["stdout"],
                request=out.get("request"),
            )
        )


def export(conn: sqlite3.Connection) -> dict:
    """Read the four durable arrays from ``conn`` (inside one read transaction)."""
    txn = SqliteTxn(conn, write=False)
    floors = [
        {"ledger_namespace": ns, "observed_at": format_instant(ms)}
        for ns, ms in conn.execute(
            "SELECT ledger_namespace, observed_at_ms FROM clock_floors ORDER BY ledger_namespace"
        )
    ]
    claims = []
    for ns, item in conn.execute("SELECT ledger_namespace, item_id FROM claims ORDER BY ledger_namespace, item_id"):
        rec = txn.get_claim(ns, item)
        assert rec is not None
        if rec.active is not None and rec.active.epoch != rec.last_epoch:
            raise ProjectionMismatch(f"active epoch of {ns}/{item} differs from last_epoch")
        claims.append(claim_record_json(rec))
    ledgers = []
    for ns, item, data, stored_rev in conn.execute(
        "SELECT ledger_namespace, item_id, data, revision FROM ledgers ORDER BY ledger_namespace, item_id"
    ):
        data = bytes(data)
        computed = revision(data)
        if computed != stored_rev:
            raise ProjectionMismatch(f"stored revision {stored_rev} of {ns}/{item} is not {computed}")
        ledgers.append(
            {"ledger_namespace": ns, "item_id": item, "revision": computed, "source_base64": encode_base64(data)}
        )
    outcomes = []
    for op_id, ns, item, digest, exit_code, envelope, request in conn.execute(
        "SELECT operation_id, ledger_namespace, item_id, operation_digest, exit, envelope, request "
        "FROM publication_outcomes ORDER BY seq"
    ):
        out = {"operation_id": op_id, "ledger_namespace": ns, "item_id": item}
        if request is not None:
            out["request"] = json.loads(request)
        out["operation_digest"] = digest
        out["envelope"] = {"exit": exit_code, "stdout": json.loads(envelope)}
        outcomes.append(out)
    return {"clock_floors": floors, "claims": claims, "ledgers": ledgers, "publication_outcomes": outcomes}
