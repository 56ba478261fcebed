"""The SQLite Store against a real file: rows, epochs at 2**64-1, commit
order, rollback, the floor-failure trigger, store-unavailable mapping, and the
manifest-shaped seed/export round trip over every conformance vector."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from backends.api import FixedClock, FloorPersistFailed, Hooks, StoredOutcome, StoreUnavailable
from backends.contract.records import Active, ClaimRecord
from backends.contract.values import EPOCH_MAX
from backends.sqlite import SqliteBackend, admin
from backends.sqlite.projection import ProjectionMismatch
from backends.sqlite.store import SqliteStore
from backends.sqlite.txn import ReadOnlyTransaction
from test_sqlite_support import (  # noqa: F401  (db is a fixture)
    BEFORE, ITEM, NS1, NS2, T0, acquire_req, db, open_sqlite, release_req,
)

VECTORS = Path("/work/shared/vectors/work-claims")


def _sorted(durable: dict) -> dict:
    """Storage order is not significant for claims and ledgers (vectors.md 11.12)."""
    out = dict(durable)
    for key in ("claims", "ledgers"):
        out[key] = sorted(durable[key], key=lambda r: (r["ledger_namespace"], r["item_id"]))
    return out


def test_rows_round_trip_with_uint64_epoch_and_commit_order(db):
    store = SqliteStore(db)
    with store.transaction(write=True) as txn:
        txn.set_floor(NS2, T0 + 5)
        txn.put_claim(ClaimRecord(NS2, ITEM, EPOCH_MAX, Active("agent-z", EPOCH_MAX, T0, T0 + 1000)))
        for op_id in ("op-b", "op-a"):  # commit order, not key order
            txn.put_outcome(StoredOutcome(op_id, NS2, ITEM, "sha256:" + "0" * 64, 4, {"ok": False, "k": [1, "é"]},
                                          {"operation_id": op_id}))
    store.reopen()
    with store.transaction(write=False) as txn:
        assert txn.get_floor(NS2) == T0 + 5
        assert txn.get_floor(NS1) is None
        rec = txn.get_claim(NS2, ITEM)
        assert rec.last_epoch == EPOCH_MAX and rec.active.epoch == EPOCH_MAX
        out = txn.get_outcome("op-a", NS2, ITEM)
        assert out.envelope == {"ok": False, "k": [1, "é"]} and out.exit == 4
        assert txn.get_ledger(NS1, ITEM) == BEFORE
    exported = store.export_durable()
    assert [o["operation_id"] for o in exported["publication_outcomes"]] == ["op-b", "op-a"]
    assert {"ledger_namespace": NS2, "item_id": ITEM, "last_epoch": str(EPOCH_MAX),
            "active": {"owner_id": "agent-z", "epoch": str(EPOCH_MAX), "issued_at": "2030-01-11T09:00:00.000Z",
                       "expires_at": "2030-01-11T09:00:01.000Z"}} in exported["claims"]
    # the epoch really is stored as decimal text (it does not fit INTEGER)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT typeof(last_epoch), last_epoch FROM claims").fetchone() == ("text", str(EPOCH_MAX))
    conn.close()


def test_exception_inside_transaction_rolls_everything_back(db):
    store = SqliteStore(db)
    before = store.export_durable()
    with pytest.raises(RuntimeError, match="boom"):
        with store.transaction(write=True) as txn:
            txn.set_floor(NS1, T0)
            txn.put_ledger(NS1, ITEM, b"changed")
            raise RuntimeError("boom")
    assert store.export_durable() == before


def test_read_transaction_refuses_writes_and_floor_never_decreases(db):
    store = SqliteStore(db)
    with pytest.raises(ReadOnlyTransaction):
        with store.transaction(write=False) as txn:
            txn.set_floor(NS1, T0)
    with store.transaction(write=True) as txn:
        txn.set_floor(NS1, T0)
    with pytest.raises(ValueError, match="decrease"):
        with store.transaction(write=True) as txn:
            txn.set_floor(NS1, T0 - 1)
    with store.transaction(write=False) as txn:
        assert txn.get_floor(NS1) == T0


def test_floor_trigger_raises_floor_persist_failed_and_rolls_back(db):
    store = SqliteStore(db)
    before = store.export_durable()
    admin.install_floor_failure_trigger(db)
    assert admin.floor_failure_armed(db)
    with pytest.raises(FloorPersistFailed):
        with store.transaction(write=True) as txn:
            txn.put_ledger(NS1, ITEM, b"written before the floor")  # must be undone too
            txn.set_floor(NS1, T0)
    assert store.export_durable() == before
    admin.remove_floor_failure_trigger(db)
    with store.transaction(write=True) as txn:
        txn.set_floor(NS1, T0)
    assert store.export_durable()["clock_floors"] == [{"ledger_namespace": NS1, "observed_at": "2030-01-11T09:00:00.000Z"}]


def test_engine_maps_floor_failure_to_exit_6_with_nothing_changed(db):
    backend = open_sqlite(db)
    claim = backend.call("acquire", acquire_req(NS1, ITEM, "agent-a")).envelope["result"]["claim"]
    before = backend.store.export_durable()
    admin.install_floor_failure_trigger(db)
    backend.clock.set(T0 + 1000)
    reply = backend.call("release", release_req(claim, NS1, ITEM))
    assert (reply.exit, reply.envelope["error"]["code"], reply.envelope["state"]) == (
        6, "clock-floor-persistence-failed", "unchanged")
    assert backend.store.export_durable() == before
    assert backend.call("read", {"ledger_namespace": NS1, "item_id": ITEM}).exit == 0  # reads still work


def test_missing_file_and_locked_file_are_store_unavailable(tmp_path, db):
    missing = SqliteStore(str(tmp_path / "nope.db"))
    with pytest.raises(StoreUnavailable) as info:
        with missing.transaction(write=False):
            pass
    assert info.value.reason == "database-not-found"
    assert not (tmp_path / "nope.db").exists()  # never created behind our back

    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        store = SqliteStore(db, busy_timeout_s=0.2)
        with pytest.raises(StoreUnavailable) as info:
            with store.transaction(write=True):
                pass
        assert info.value.reason == "database-locked"
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_engine_reports_claim_store_unavailable_for_a_vanished_file(db):
    backend = open_sqlite(db)
    os.unlink(db)
    reply = backend.call("read", {"ledger_namespace": NS1, "item_id": ITEM})
    assert reply.exit == 6 and reply.envelope["error"]["code"] == "claim-store-unavailable"
    assert reply.envelope["error"]["details"] == {"reason": "database-not-found"}


def test_export_refuses_a_stored_revision_that_is_not_the_bytes_digest(db):
    conn = sqlite3.connect(db)
    conn.execute("UPDATE ledgers SET revision = 'sha256:' || hex(zeroblob(32))")
    conn.commit()
    conn.close()
    with pytest.raises(ProjectionMismatch):
        SqliteStore(db).export_durable()


@pytest.mark.parametrize("case", sorted(p.parent.name for p in VECTORS.glob("*/manifest.json")))
def test_seed_then_export_round_trips_every_vector_state(tmp_path, case):
    manifest = json.loads((VECTORS / case / "manifest.json").read_text())
    for state in (manifest["initial"], manifest["expected"]["final"]):
        path = str(tmp_path / f"{case}-{id(state)}.db")
        admin.provision(path, state["backend"]["ledger_binding"]["namespaces"])
        store = SqliteStore(path)
        store.seed(state["durable"])
        assert _sorted(store.export_durable()) == _sorted(state["durable"])
        store.close()


def test_a_file_that_is_not_a_database_answers_store_unavailable(tmp_path):
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not an SQLite file" * 100)
    backend = SqliteBackend({"path": str(path), "namespaces": [NS1]}, FixedClock(T0), Hooks())
    reply = backend.call("acquire", acquire_req(NS1, ITEM, "agent-a"))
    assert (reply.exit, reply.envelope["error"]["code"], reply.envelope["error"]["details"]) == (
        6, "claim-store-unavailable", {"reason": "database-unopenable"})
    assert path.read_bytes() == b"this is not an SQLite file" * 100


def test_a_provisioning_that_cannot_be_read_answers_store_unavailable_then_is_read_again(tmp_path):
    """The black-box CLI's spec names no allowlist: the file's is the only
    one. When it cannot be read, no namespace may be called unbound (that is a
    definite rejection, and the red team's CLI runs met it under faults): the
    call decides nothing, and the next call reads the provisioning again."""
    path = tmp_path / "claims.db"
    admin.provision(str(path), [NS1])
    provisioned = path.read_bytes()
    path.write_bytes(b"this is not an SQLite file" * 100)
    backend = SqliteBackend({"path": str(path)}, FixedClock(T0), Hooks())
    reply = backend.call("acquire", acquire_req(NS1, ITEM, "agent-a"))
    assert (reply.exit, reply.envelope["error"]["code"], reply.envelope["error"]["details"]) == (
        6, "claim-store-unavailable", {"reason": "database-unopenable"})
    assert backend.call("capabilities", {}).envelope["error"]["code"] == "claim-store-unavailable"
    path.write_bytes(provisioned)
    reply = backend.call("acquire", acquire_req(NS1, ITEM, "agent-a"))
    assert reply.exit == 0 and reply.envelope["result"]["claim"]["owner_id"] == "agent-a"
