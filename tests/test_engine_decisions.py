"""Engine decisions over the reference store: claims, time, legacy writes and
the mapping of store failures onto contract codes."""

from __future__ import annotations

import pytest

from backends.api import CommitOutcomeUnknown, FixedClock, Hooks, ReplyLost, StoreUnavailable
from backends.contract import parse_instant
from backends.engine import Engine
from backends.reference import MemoryStore, open_backend

NS = "wbns_" + "1" * 32
NS2 = "wbns_" + "2" * 32
ITEM = "wb_01Q4837BM01W70T30B184GG1R6"
T0 = parse_instant("2030-01-11T09:00:00.000Z")


def iso(ms: int) -> str:
    from backends.contract import format_instant
    return format_instant(ms)


def backend(durable=None, faults=None, hooks=None, now=T0):
    clock = FixedClock(now)
    b = open_backend({"namespaces": [NS, NS2], "durable": durable or {}, "faults": faults or {}}, clock, hooks)
    return b, clock


def acquire(b, owner="a", last="0", active=None, lease=60_000, ns=NS):
    return b.call("acquire", {"ledger_namespace": ns, "item_id": ITEM, "owner_id": owner,
                              "lease_duration_ms": lease, "expected": {"last_epoch": last, "active": active}})


def tuple_op(b, op, owner, epoch, expires, lease=None):
    req = {"ledger_namespace": NS, "item_id": ITEM, "owner_id": owner, "epoch": epoch,
           "expected_expires_at": expires}
    if lease is not None:
        req["lease_duration_ms"] = lease
    return b.call(op, req)


def floor(b, ns=NS):
    return b.store.floors.get(ns)


def test_acquire_renew_release_reacquire():
    b, clock = backend()
    r = acquire(b)
    assert r.exit == 0 and r.envelope["result"]["claim"]["epoch"] == "1"
    claim = r.envelope["result"]["claim"]
    clock.set(T0 + 10_000)
    r = tuple_op(b, "renew", "a", "1", claim["expires_at"], lease=120_000)
    assert r.exit == 0
    renewed = r.envelope["result"]["claim"]
    assert renewed["issued_at"] == claim["issued_at"] and renewed["expires_at"] == iso(T0 + 130_000)
    r = tuple_op(b, "release", "a", "1", renewed["expires_at"])
    assert r.exit == 0 and r.envelope["result"]["released_claim"] == renewed
    assert r.envelope["result"]["read_back"]["active"] is None
    assert r.envelope["result"]["read_back"]["last_epoch"] == "1"
    r = acquire(b, owner="b", last="1")
    assert r.envelope["result"]["claim"]["epoch"] == "2"  # no ABA


def test_acquire_precedence_conflict_then_held():
    b, clock = backend()
    claim = acquire(b).envelope["result"]["claim"]
    r = acquire(b, owner="b", last="0")
    assert r.exit == 4 and r.envelope["error"]["code"] == "claim-conflict"
    assert r.envelope["error"]["message"] == "The observed claim state no longer matches this request."
    r = acquire(b, owner="b", last="1", active=claim)
    assert r.envelope["error"]["code"] == "claim-held"
    assert set(r.envelope["error"]["details"]) == {"ledger_namespace", "item_id", "observed_at", "last_epoch",
                                                   "active"}
    clock.set(parse_instant(claim["expires_at"]))  # equality is expired: takeover
    r = acquire(b, owner="b", last="1", active=claim)
    assert r.exit == 0 and r.envelope["result"]["claim"]["epoch"] == "2"


def test_renew_release_conflict_and_expired():
    b, clock = backend()
    claim = acquire(b).envelope["result"]["claim"]
    for op in ("renew", "release"):
        lease = 1000 if op == "renew" else None
        r = tuple_op(b, op, "other", "1", claim["expires_at"], lease)
        assert r.envelope["error"]["code"] == "claim-conflict"
        assert r.envelope["error"]["message"] == "The active claim tuple no longer matches this request."
        assert tuple_op(b, op, "a", "2", claim["expires_at"], lease).envelope["error"]["code"] == "claim-conflict"
        assert tuple_op(b, op, "a", "1", iso(T0), lease).envelope["error"]["code"] == "claim-conflict"
    clock.set(parse_instant(claim["expires_at"]))
    r = tuple_op(b, "renew", "a", "1", claim["expires_at"], 1000)
    assert r.exit == 4 and r.envelope["error"]["code"] == "claim-expired"
    assert tuple_op(b, "release", "a", "1", claim["expires_at"]).envelope["error"]["code"] == "claim-expired"


def test_renew_on_untouched_tuple_is_conflict():
    b, _ = backend()
    r = tuple_op(b, "renew", "a", "1", iso(T0), 1000)
    assert r.envelope["error"]["code"] == "claim-conflict"
    assert r.envelope["error"]["details"]["last_epoch"] == "0"


def test_rejections_persist_floor_and_read_does_not():
    b, clock = backend()
    claim = acquire(b).envelope["result"]["claim"]
    clock.set(T0 + 5000)
    acquire(b, owner="b", last="1", active=claim)
    assert floor(b) == T0 + 5000
    clock.set(T0 + 9000)
    r = b.call("read", {"ledger_namespace": NS, "item_id": ITEM})
    assert r.envelope["result"]["read_back"]["observed_at"] == iso(T0 + 9000)
    assert floor(b) == T0 + 5000
    clock.set(T0 - 3_600_000)  # backward clock: effective time is the floor
    r = b.call("read", {"ledger_namespace": NS, "item_id": ITEM})
    assert r.envelope["result"]["read_back"]["observed_at"] == iso(T0 + 5000)
    assert floor(b, NS2) is None  # other namespace untouched


def test_read_untouched_tuple():
    b, _ = backend()
    r = b.call("read", {"ledger_namespace": NS2, "item_id": ITEM})
    assert r.exit == 0 and r.envelope["state"] == "committed"
    assert r.envelope["result"]["read_back"]["last_epoch"] == "0"
    assert r.envelope["result"]["read_back"]["active"] is None


def test_epoch_exhaustion_persists_floor_first():
    durable = {"claims": [{"ledger_namespace": NS, "item_id": ITEM, "last_epoch": "18446744073709551615",
                           "active": None}]}
    b, _ = backend(durable)
    r = acquire(b, last="18446744073709551615")
    assert r.exit == 6 and r.envelope["state"] == "unchanged"
    assert r.envelope["error"]["code"] == "epoch-exhausted"
    assert r.envelope["error"]["details"]["last_epoch"] == "18446744073709551615"
    assert floor(b) == T0
    assert b.store.claims[(NS, ITEM)].last_epoch == 2**64 - 1


def test_epoch_just_below_max_allocates_max():
    durable = {"claims": [{"ledger_namespace": NS, "item_id": ITEM, "last_epoch": "18446744073709551614",
                           "active": None}]}
    b, _ = backend(durable)
    r = acquire(b, last="18446744073709551614")
    assert r.envelope["result"]["claim"]["epoch"] == "18446744073709551615"


def test_clock_floor_fault_fails_closed_and_is_sticky():
    b, _ = backend(faults={"clock_floor_persist": True})
    for _ in range(2):
        r = acquire(b)
        assert r.exit == 6 and r.envelope["error"]["code"] == "clock-floor-persistence-failed"
        assert r.envelope["error"]["details"] == {"ledger_namespace": NS, "item_id": ITEM}
    assert b.store.claims == {} and b.store.floors == {}
    r = b.call("legacy-create", {"ledger_namespace": NS, "item_id": ITEM})
    assert r.envelope["namespace"] == "ledger-mutation" and r.envelope["command"] == "create-v1"
    assert r.exit == 6
    assert b.call("read", {"ledger_namespace": NS, "item_id": ITEM}).exit == 0  # reads still work


def test_legacy_refusals_and_permitted_write():
    b, clock = backend()
    r = b.call("legacy-create", {"ledger_namespace": NS, "item_id": ITEM})
    assert r.exit == 0 and r.envelope["namespace"] == "ledger-mutation"
    claim = acquire(b).envelope["result"]["claim"]
    r = b.call("legacy-transition", {"ledger_namespace": NS, "item_id": ITEM})
    assert r.exit == 4 and r.envelope["error"]["code"] == "active-claim-write-refused"
    assert r.envelope["command"] == "transition-v1"
    clock.set(parse_instant(claim["expires_at"]))
    assert b.call("legacy-transition", {"ledger_namespace": NS, "item_id": ITEM}).exit == 0
    r = b.call("legacy-create", {"ledger_namespace": NS, "item_id": ITEM})
    assert r.envelope["error"]["code"] == "claimed-item-write-refused"
    assert floor(b) == parse_instant(claim["expires_at"])


class _FailingStore(MemoryStore):
    """A store whose write commits fail with a chosen error."""

    def __init__(self, error):
        super().__init__()
        self.error = error

    def transaction(self, write):
        if isinstance(self.error, StoreUnavailable):
            raise self.error
        txn = super().transaction(write)
        if write:
            original = txn._commit

            def commit():
                raise self.error
            txn._commit = commit  # type: ignore[method-assign]
            del original
        return txn


def _engine(store):
    from backends.reference import config_from_spec
    return Engine(store, config_from_spec({"namespaces": [NS]}), FixedClock(T0))


def test_store_unavailable_maps_to_claim_store_unavailable():
    e = _engine(_FailingStore(StoreUnavailable("coordinator-unreachable")))
    for op, req in [("read", {"ledger_namespace": NS, "item_id": ITEM}),
                    ("publication-read", {"operation_id": "p", "ledger_namespace": NS, "item_id": ITEM})]:
        r = e.call(op, req)
        assert r.exit == 6 and r.envelope["state"] == "unchanged"
        assert r.envelope["error"]["code"] == "claim-store-unavailable"
        assert r.envelope["error"]["message"] == "The durable claim store is unavailable."
        assert r.envelope["error"]["details"] == {"reason": "coordinator-unreachable"}
    assert acquire(e).envelope["error"]["code"] == "claim-store-unavailable"


def test_commit_outcome_unknown_on_claim_success_gives_no_reply():
    """The acquire's commit may have happened: "unchanged" would be a lie (contract §4, §8)."""
    store = _FailingStore(CommitOutcomeUnknown("lost at COMMIT"))
    with pytest.raises(CommitOutcomeUnknown):
        acquire(_engine(store))


def test_commit_outcome_unknown_on_claim_rejection_is_floor_failure():
    """A rejection wrote only the floor: claim and ledger are certainly unchanged."""
    store = _FailingStore(CommitOutcomeUnknown("lost at COMMIT"))
    r = acquire(_engine(store), last="3")  # witness mismatch: claim-conflict, nothing but the floor written
    assert r.exit == 6 and r.envelope["error"]["code"] == "clock-floor-persistence-failed"
    assert r.envelope["state"] == "unchanged"
    assert store.claims == {} and store.floors == {}


def test_after_commit_hook_sees_fresh_claim_successes_only():
    seen = []

    class Spy(Hooks):
        def after_commit(self, op, request, reply):
            seen.append((op, reply.exit))

    b, _ = backend(hooks=Spy())
    claim = acquire(b).envelope["result"]["claim"]
    acquire(b, owner="b")  # conflict: no hook
    tuple_op(b, "renew", "a", "1", claim["expires_at"], 1000)
    assert seen == [("acquire", 0), ("renew", 0)]


def test_reply_lost_after_commit_leaves_durable_success():
    class Lose(Hooks):
        def after_commit(self, op, request, reply):
            raise ReplyLost(op)

    b, _ = backend(hooks=Lose())
    with pytest.raises(ReplyLost):
        acquire(b)
    assert b.store.claims[(NS, ITEM)].last_epoch == 1


def test_restart_keeps_durable_state():
    b, clock = backend()
    acquire(b)
    b.restart()
    clock.set(T0 - 1000)
    r = b.call("read", {"ledger_namespace": NS, "item_id": ITEM})
    assert r.envelope["result"]["read_back"]["last_epoch"] == "1"
    assert r.envelope["result"]["read_back"]["observed_at"] == iso(T0)


def test_capabilities_and_unknown_op():
    b, _ = backend()
    assert b.call("capabilities", b"{}").envelope["result"]["operations"]["work_claim"]["mode"] == "fenced"
    assert b.call("capabilities", b'{"x":1}').exit == 2
    with pytest.raises(ValueError):
        b.call("verify", {})
