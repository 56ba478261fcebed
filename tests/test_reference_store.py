"""MemoryStore: atomic transactions, seed/export in the manifest shape,
fault semantics (sticky floor fault, one-shot outcome-unknown)."""

from __future__ import annotations

import pytest

from backends.api import CommitOutcomeUnknown, FloorPersistFailed, StoredOutcome
from backends.contract.records import Active, ClaimRecord
from backends.reference import MemoryStore, open_backend
from backends.reference.replay import strict_equal

NS = "wbns_" + "1" * 32
NS2 = "wbns_" + "2" * 32
ITEM = "wb_01Q4837BM01W70T30B184GG1R6"

DURABLE = {
    "clock_floors": [{"ledger_namespace": NS, "observed_at": "2030-01-11T09:00:00.000Z"},
                     {"ledger_namespace": NS2, "observed_at": "2030-01-11T09:00:05.000Z"}],
    "claims": [{"ledger_namespace": NS, "item_id": ITEM, "last_epoch": "18446744073709551615",
                "active": {"owner_id": "a", "epoch": "18446744073709551615",
                           "issued_at": "2030-01-11T09:00:00.000Z", "expires_at": "2030-01-11T09:01:00.000Z"}},
               {"ledger_namespace": NS2, "item_id": ITEM, "last_epoch": "0", "active": None}],
    "ledgers": [{"ledger_namespace": NS, "item_id": ITEM,
                 "revision": "sha256:7b9a72466d3960eb2aacccfc848939453490db0678bd4725def3f789b891c919",
                 "source_base64": "YWZ0ZXIK"}],
    "publication_outcomes": [{"operation_id": "p", "ledger_namespace": NS, "item_id": ITEM,
                              "request": {"operation_id": "p"}, "operation_digest": "sha256:" + "0" * 64,
                              "envelope": {"exit": 4, "stdout": {"ok": False}}}],
}


def test_seed_export_round_trip():
    store = MemoryStore()
    store.seed(DURABLE)
    assert strict_equal(store.export_durable(), DURABLE)


def test_export_sorts_floors_by_namespace():
    store = MemoryStore()
    with store.transaction(write=True) as txn:
        txn.set_floor(NS2, 5)
        txn.set_floor(NS, 7)
    assert [f["ledger_namespace"] for f in store.export_durable()["clock_floors"]] == [NS, NS2]


def test_exception_inside_transaction_applies_nothing():
    store = MemoryStore()
    with pytest.raises(RuntimeError):
        with store.transaction(write=True) as txn:
            txn.set_floor(NS, 1)
            txn.put_claim(ClaimRecord(NS, ITEM, 1, Active("a", 1, 0, 10)))
            assert txn.get_floor(NS) == 1  # reads see own writes
            raise RuntimeError("boom")
    assert store.floors == {} and store.claims == {}


def test_read_transaction_refuses_writes():
    store = MemoryStore()
    with pytest.raises(RuntimeError):
        with store.transaction(write=False) as txn:
            txn.set_floor(NS, 1)


def test_floor_fault_is_sticky():
    store = MemoryStore(faults={"clock_floor_persist": True})
    for _ in range(2):
        with pytest.raises(FloorPersistFailed):
            with store.transaction(write=True) as txn:
                txn.set_floor(NS, 1)
    assert store.faults == {"clock_floor_persist": True} and store.floors == {}


def test_outcome_unknown_fires_once_on_an_outcome_commit():
    store = MemoryStore(faults={"publication-outcome-unknown": True})
    with store.transaction(write=True) as txn:  # no outcome: not consumed
        txn.set_floor(NS, 1)
    assert store.floors == {NS: 1}
    outcome = StoredOutcome("p", NS, ITEM, "sha256:" + "0" * 64, 0, {"ok": True})
    with pytest.raises(CommitOutcomeUnknown):
        with store.transaction(write=True) as txn:
            txn.set_floor(NS, 2)
            txn.put_outcome(outcome)
    assert store.floors == {NS: 1} and store.outcomes == {}
    assert store.faults["publication-outcome-unknown"] is False
    with store.transaction(write=True) as txn:
        txn.put_outcome(outcome)
    assert list(store.outcomes) == [("p", NS, ITEM)]


def test_restart_keeps_durable_state_and_faults():
    b = open_backend({"namespaces": [NS, NS2], "durable": DURABLE, "faults": {"clock_floor_persist": True}})
    b.restart()
    assert strict_equal(b.store.export_durable(), DURABLE)
    assert b.faults == {"clock_floor_persist": True}


def test_open_backend_spec_keys():
    b = open_backend({"namespaces": [NS], "name": "x", "write_paths": {"alternate": "bypass"},
                      "coordination_scope": "local-filesystem", "durability": "durable-coordinator"})
    caps = b.call("capabilities", {}).envelope["result"]
    assert caps["backend"]["name"] == "x" and caps["backend"]["coordination_scope"] == "local-filesystem"
    assert caps["operations"]["work_claim"]["mode"] == "advisory"
    assert open_backend({"namespaces": [NS]}).config.name == "reference-backend"


def test_registry_opens_the_reference_backend():
    from backends.registry import open_backend as registry_open
    b = registry_open({"backend": "reference", "namespaces": [NS]})
    assert b.call("read", {"ledger_namespace": NS, "item_id": ITEM}).exit == 0
