"""Seed and export the manifest's ``durable`` shape (vectors.md §3.1, §11.11)
from a Git-journal ledger. Seeding is privileged test scaffolding, never a
reported write path."""

from __future__ import annotations

import copy
import os

from backends.contract import (
    claim_record_json, decode_canonical_base64, encode_base64, format_instant, is_item_id, parse_epoch,
    parse_instant, revision,
)
from backends.gitjournal.fsio import read_or_none


def seed_entries(ns: str, durable: dict) -> tuple[list[dict], dict[str, bytes]]:
    """Journal entries and item bytes for namespace ``ns`` of ``durable``."""
    entries: list[dict] = []
    for f in durable.get("clock_floors", []):
        if f["ledger_namespace"] == ns:
            entries.append({"t": "floor", "ms": parse_instant(f["observed_at"])})
    for c in durable.get("claims", []):
        if c["ledger_namespace"] != ns:
            continue
        a = c["active"]
        entries.append({"t": "claim", "item": c["item_id"], "last_epoch": c["last_epoch"],
                        "active": None if a is None else {
                            "owner_id": a["owner_id"], "epoch": a["epoch"],
                            "issued_at": parse_instant(a["issued_at"]),
                            "expires_at": parse_instant(a["expires_at"])}})
        parse_epoch(c["last_epoch"])  # reject a malformed seed early
    items: dict[str, bytes] = {}
    for led in durable.get("ledgers", []):
        if led["ledger_namespace"] != ns:
            continue
        data = decode_canonical_base64(led["source_base64"])
        if data is None:
            raise ValueError("seeded ledger source_base64 is not canonical base64")
        items[led["item_id"]] = data
    for o in durable.get("publication_outcomes", []):
        if o["ledger_namespace"] != ns:
            continue
        entries.append({"t": "publish-final", "op": o["operation_id"], "item": o["item_id"],
                        "digest": o["operation_digest"], "exit": o["envelope"]["exit"],
                        "envelope": copy.deepcopy(o["envelope"]["stdout"]), "request": copy.deepcopy(o.get("request")),
                        "committed_revision": None, "path": None, "relpath": None})
    return entries, items


def export(store) -> dict:
    """The durable projection of one ledger: the journal's replay plus the
    exact item bytes in the ledger directory."""
    ns, state = store.ns, store.replay()
    ledger_dir = store.ledger.path
    ledgers = []
    for name in sorted(os.listdir(ledger_dir)):
        stem = name[:-3] if name.endswith(".md") else None
        if stem is None or not is_item_id(stem):
            continue
        data = read_or_none(os.path.join(ledger_dir, name))
        if data is not None:
            ledgers.append({"ledger_namespace": ns, "item_id": stem, "revision": revision(data),
                            "source_base64": encode_base64(data)})
    return {
        "clock_floors": [] if state.floor is None else [{"ledger_namespace": ns,
                                                         "observed_at": format_instant(state.floor)}],
        "claims": [claim_record_json(rec) for rec in state.claims.values()],
        "ledgers": ledgers,
        "publication_outcomes": [{
            "operation_id": o.operation_id, "ledger_namespace": ns, "item_id": o.item_id,
            "request": copy.deepcopy(o.request), "operation_digest": o.operation_digest,
            "envelope": {"exit": o.exit, "stdout": copy.deepcopy(o.envelope)},
        } for o in state.outcomes.values()],
    }


def merge(exports: list[dict]) -> dict:
    """One projection of several endpoints (floors sorted by namespace)."""
    out = {"clock_floors": [], "claims": [], "ledgers": [], "publication_outcomes": []}
    for e in exports:
        for k in out:
            out[k].extend(e[k])
    out["clock_floors"].sort(key=lambda f: f["ledger_namespace"])
    return out
