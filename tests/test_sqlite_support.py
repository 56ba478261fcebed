"""Shared fixtures of the SQLite backend tests (no tests of its own beyond a
sanity check of the fixtures): namespaces, items, the vectors' ledger bytes,
request builders, and a provisioned coordinator file."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from backends.api import FixedClock, Hooks
from backends.contract import revision
from backends.sqlite import SqliteBackend, admin

NS1 = "wbns_" + "1" * 32
NS2 = "wbns_" + "2" * 32
ITEM = "wb_01Q4837BM01W70T30B184GG1R6"
ITEM2 = "wb_01Q4837BM01W70T30B184GG1R7"
T0 = 1_894_352_400_000  # 2030-01-11T09:00:00.000Z

_VECTORS = Path("/work/shared/vectors/work-claims")


def _sources() -> tuple[bytes, bytes]:
    manifest = json.loads((_VECTORS / "publication-response-loss" / "manifest.json").read_text())
    before, after = (base64.b64decode(f["source_base64"]) for f in manifest["source_files"])
    return before, after


BEFORE, AFTER = _sources()


def item_bytes(item_id: str, which: bytes) -> bytes:
    """The vectors' before.md / after.md rewritten for another item id."""
    return which.replace(ITEM.encode(), item_id.encode())


def acquire_req(ns: str, item: str, owner: str, last_epoch: int = 0, active: dict | None = None,
                lease_ms: int = 60_000) -> dict:
    return {"ledger_namespace": ns, "item_id": item, "owner_id": owner, "lease_duration_ms": lease_ms,
            "expected": {"last_epoch": str(last_epoch), "active": active}}


def release_req(claim: dict, ns: str, item: str) -> dict:
    return {"ledger_namespace": ns, "item_id": item, "owner_id": claim["owner_id"], "epoch": claim["epoch"],
            "expected_expires_at": claim["expires_at"]}


def publish_req(op_id: str, ns: str, item: str, claim: dict, current: bytes, candidate: bytes) -> dict:
    return {
        "operation_id": op_id, "ledger_namespace": ns, "item_id": item,
        "expected_revision": revision(current),
        "candidate_source_base64": base64.b64encode(candidate).decode(),
        "candidate_sha256": revision(candidate),
        "claim_fence": {"ledger_namespace": ns, "item_id": item, "owner_id": claim["owner_id"],
                        "epoch": claim["epoch"]},
    }


def seeded_durable(items=((NS1, ITEM),)) -> dict:
    return {"clock_floors": [], "claims": [], "publication_outcomes": [],
            "ledgers": [{"ledger_namespace": ns, "item_id": it, "revision": revision(item_bytes(it, BEFORE)),
                         "source_base64": base64.b64encode(item_bytes(it, BEFORE)).decode()}
                        for ns, it in items]}


def new_db(directory: str, seed: bool = True, **provision) -> str:
    path = os.path.join(directory, "claims.db")
    admin.provision(path, [NS1, NS2], **provision)
    if seed:
        backend = open_sqlite(path)
        backend.store.seed(seeded_durable([(NS1, ITEM), (NS1, ITEM2), (NS2, ITEM)]))
        backend.close()
    return path


def open_sqlite(path: str, clock=None, hooks: Hooks | None = None) -> SqliteBackend:
    return SqliteBackend({"path": path}, clock or FixedClock(T0), hooks or Hooks())


@pytest.fixture
def db(tmp_path) -> str:
    return new_db(str(tmp_path))


def test_fixture_sources_are_the_vectors_bytes():
    assert revision(BEFORE) == "sha256:7bd247bb82b1e56f5c0fc30feda8bafd82af72962d78deadd75ee0136d3d1be5"
    assert revision(AFTER) == "sha256:d8ba5e2458478da0c17d96623d609561bfcf67d607a1b6cd842ae77328691fd8"
