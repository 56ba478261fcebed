"""Seed and export the durable projection in the manifest's shape
(vectors.md §3.1 ``durable``, §11.1 SEED, §11.11 export).

Wire forms (decimal epochs, ``...mmmZ`` instants, base64, revisions) come from
``backends.contract``; nothing here formats its own.
"""

from __future__ import annotations

import json

from backends.api import StoredOutcome
from backends.contract.records import Active, ClaimRecord
from backends.contract.digests import revision
from backends.contract.values import (decode_canonical_base64, encode_base64, format_epoch,
                                      format_instant, parse_epoch, parse_instant)


def revision_of(data: bytes) -> str:
    return revision(data)


def seed_durable(txn, durable: dict) -> None:
    """Write a manifest ``durable`` object through ``txn`` (one transaction)."""
    for f in durable.get("clock_floors", []):
        txn.set_floor(f["ledger_namespace"], parse_instant(f["observed_at"]))
    for c in durable.get("claims", []):
        a = c.get("active")
        active = None if a is None else Active(
            a["owner_id"], parse_epoch(a["epoch"], active=True),
            parse_instant(a["issued_at"]), parse_instant(a["expires_at"]))
        txn.put_claim(ClaimRecord(c["ledger_namespace"], c["item_id"], parse_epoch(c["last_epoch"]), active))
    for item in durable.get("ledgers", []):
        data = decode_canonical_base64(item["source_base64"])
        if data is None:
            raise ValueError(f"ledger {item['item_id']}: source_base64 is not canonical base64")
        txn.put_ledger(item["ledger_namespace"], item["item_id"], data)
    for o in durable.get("publication_outcomes", []):
        env = o["envelope"]
        txn.put_outcome(StoredOutcome(o["operation_id"], o["ledger_namespace"], o["item_id"],
                                      o["operation_digest"], int(env["exit"]), env["stdout"], o.get("request")))


def export_durable(txn) -> dict:
    """Read the four durable arrays from real storage (floors sorted by
    namespace; claims and ledgers by tuple; outcomes in commit order)."""
    floors = [{"ledger_namespace": ns, "observed_at": format_instant(int(ms))}
              for ns, ms in txn.rows("SELECT ns, ms FROM floors ORDER BY ns")]
    claims = []
    for ns, item, last, owner, epoch, issued, expires in txn.rows(
            "SELECT ns, item_id, last_epoch, owner_id, epoch, issued_at, expires_at FROM claims ORDER BY ns, item_id"):
        active = None if owner is None else {
            "owner_id": owner, "epoch": format_epoch(int(epoch)),
            "issued_at": format_instant(int(issued)), "expires_at": format_instant(int(expires))}
        claims.append({"ledger_namespace": ns, "item_id": item, "last_epoch": format_epoch(int(last)), "active": active})
    ledgers = []
    for ns, item, data, stored_rev in txn.rows("SELECT ns, item_id, data, revision FROM ledgers ORDER BY ns, item_id"):
        data = bytes(data)
        rev = revision_of(data)
        if rev != stored_rev:  # the store's own revision must match its bytes
            raise ValueError(f"ledger {ns}/{item}: stored revision {stored_rev} != {rev} of its bytes")
        ledgers.append({"ledger_namespace": ns, "item_id": item, "revision": rev, "source_base64": encode_base64(data)})
    outcomes = []
    for op, ns, item, digest, exit_code, envelope, request in txn.rows(
            "SELECT operation_id, ns, item_id, digest, exit, envelope, request FROM outcomes ORDER BY seq"):
        out = {"operation_id": op, "ledger_namespace": ns, "item_id": item}
        if request is not None:
            out["request"] = json.loads(request)
        out["operation_digest"] = digest
        out["envelope"] = {"exit": int(exit_code), "stdout": json.loads(envelope)}
        outcomes.append(out)
    return {"clock_floors": floors, "claims": claims, "ledgers": ledgers, "publication_outcomes": outcomes}
