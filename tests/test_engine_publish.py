"""publish-claimed through the engine: precedence, fence reasons, stored
outcomes, replays, the re-check inside the commit boundary, faults."""

from __future__ import annotations

import base64
import threading
from pathlib import Path

import pytest

from backends.api import FixedClock, Hooks
from backends.contract import operation_digest, parse_instant, revision, sha256_ref
from backends.reference import open_backend

NS = "wbns_" + "1" * 32
NS2 = "wbns_" + "2" * 32
ITEM = "wb_01Q4837BM01W70T30B184GG1R6"
T0 = parse_instant("2030-01-11T09:00:00.000Z")
LEDGER = Path(__file__).resolve().parents[2] / "shared" / "vectors" / "work-claims" / "ledger"
BEFORE = (LEDGER / "before.md").read_bytes()
AFTER = (LEDGER / "after.md").read_bytes()
ACTIVE = {"owner_id": "agent-a", "epoch": "7", "issued_at": "2030-01-11T09:00:00.000Z",
          "expires_at": "2030-01-11T09:05:00.000Z"}


def durable(active=ACTIVE, ledger=True):
    return {
        "clock_floors": [{"ledger_namespace": NS, "observed_at": "2030-01-11T09:00:00.000Z"}],
        "claims": [{"ledger_namespace": NS, "item_id": ITEM, "last_epoch": "7", "active": active}],
        "ledgers": [{"ledger_namespace": NS, "item_id": ITEM, "revision": revision(BEFORE),
                     "source_base64": base64.b64encode(BEFORE).decode()}] if ledger else [],
    }


def backend(hooks=None, faults=None, now=T0 + 1000, **spec):
    clock = FixedClock(now)
    spec = {"namespaces": [NS, NS2], "durable": spec.pop("seed", durable()), "faults": faults or {}, **spec}
    return open_backend(spec, clock, hooks), clock


def request(op_id="pub_1", candidate=AFTER, expected=None, **fence):
    f = {"ledger_namespace": NS, "item_id": ITEM, "owner_id": "agent-a", "epoch": "7", **fence}
    return {"operation_id": op_id, "ledger_namespace": NS, "item_id": ITEM,
            "expected_revision": expected or revision(BEFORE),
            "candidate_source_base64": base64.b64encode(candidate).decode(),
            "candidate_sha256": sha256_ref(candidate), "claim_fence": f}


def code(reply):
    return reply.envelope["error"]["code"] if reply.exit else "ok"


def test_success_writes_bytes_and_stores_outcome():
    b, _ = backend()
    r = b.call("publish", request())
    assert r.exit == 0 and r.envelope["operation_id"] == "pub_1"
    res = r.envelope["result"]
    assert list(res) == ["ledger_namespace", "item_id", "committed_revision", "claim_fence", "claim_read_back"]
    assert res["committed_revision"] == revision(AFTER)
    assert res["claim_read_back"]["observed_at"] == "2030-01-11T09:00:01.000Z"
    assert res["claim_read_back"]["active"] == ACTIVE  # neither renewed nor released
    assert b.store.ledgers[(NS, ITEM)] == AFTER
    out = b.store.outcomes[("pub_1", NS, ITEM)]
    assert out.exit == 0 and out.envelope == r.envelope and out.request == request()
    assert b.store.floors[NS] == T0 + 1000


def test_identical_retry_replays_verbatim_without_clock_or_floor():
    b, clock = backend()
    first = b.call("publish", request())
    clock.set(T0 - 3_600_000)
    again = b.call("publish", request())
    assert again == first
    assert b.store.floors[NS] == T0 + 1000
    read = b.call("publication-read", {"operation_id": "pub_1", "ledger_namespace": NS, "item_id": ITEM})
    assert read.envelope["result"]["outcome"] == {"exit": 0, "stdout": first.envelope}


def test_identity_reuse_with_different_request_is_idempotency_conflict():
    b, clock = backend()
    b.call("publish", request())
    clock.set(T0 + 50_000)
    other = request(epoch="8")
    r = b.call("publish", other)
    assert r.exit == 4 and code(r) == "idempotency-conflict"
    assert r.envelope["error"]["details"] == {
        "operation_id": "pub_1",
        "expected_operation_digest": operation_digest(request()),
        "actual_operation_digest": operation_digest(other)}
    assert b.store.floors[NS] == T0 + 1000 and len(b.store.outcomes) == 1


def test_stored_outcome_lookup_precedes_digest_check():
    # model precedence (vectors.md 13.1): lookup before the candidate digest
    b, _ = backend()
    b.call("publish", request())
    bad = dict(request(), candidate_sha256="sha256:" + "0" * 64)
    assert code(b.call("publish", bad)) == "idempotency-conflict"


def test_advisory_backend_refuses_with_operation_id():
    b, _ = backend(write_paths={"alternate": "bypass", "claimed_publication_v1": "atomic-fence",
                                "legacy_create_v1": "reject-claimed-id",
                                "legacy_transition_v1": "reject-active-claim"})
    r = b.call("publish", request())
    assert r.exit == 2 and code(r) == "capability-unavailable"
    assert r.envelope["error"]["details"] == {"reason": "advisory-capability"}
    assert r.envelope["operation_id"] == "pub_1" and b.store.outcomes == {}


def test_candidate_validation_shapes():
    b, _ = backend()
    r = b.call("publish", request(candidate=b"Hello, ledger!\n"))
    assert r.exit == 3 and code(r) == "ledger-invalid"
    assert r.envelope["error"]["details"] == {"item_id": ITEM, "reason": "malformed-frontmatter"}
    other_id = AFTER.replace(ITEM.encode(), b"wb_01Q4837BM01W70T30B184GG1R7")
    r = b.call("publish", request(op_id="pub_2", candidate=other_id))
    assert r.envelope["error"]["details"] == {"item_id": ITEM, "reason": "item-id-mismatch"}
    assert b.store.outcomes == {} and b.store.floors[NS] == T0  # not journaled, no floor


def test_item_not_found_when_no_current_bytes():
    b, _ = backend(seed=durable(ledger=False))
    r = b.call("publish", request())
    assert r.exit == 3 and r.envelope["error"]["details"] == {"item_id": ITEM, "reason": "item-not-found"}
    r = b.call("publish", request(candidate=b"nope\n"))
    assert r.envelope["error"]["details"]["reason"] == "malformed-frontmatter"  # parse failure first


def test_stale_revision_at_validation_is_not_stored():
    b, _ = backend()
    r = b.call("publish", request(expected="sha256:" + "0" * 64))
    assert r.exit == 4 and code(r) == "ledger-revision-conflict"
    assert r.envelope["error"]["details"] == {"ledger_namespace": NS, "item_id": ITEM,
                                              "expected_revision": "sha256:" + "0" * 64,
                                              "actual_revision": revision(BEFORE)}
    assert b.store.outcomes == {} and b.store.floors[NS] == T0


@pytest.mark.parametrize("fence, seed_active, now, reason", [
    ({"ledger_namespace": NS2}, ACTIVE, T0 + 1000, "ledger-namespace-mismatch"),
    ({"ledger_namespace": NS2, "item_id": "wb_01Q4837BM01W70T30B184GG1R7"}, ACTIVE, T0 + 1000,
     "ledger-namespace-mismatch"),
    ({"item_id": "wb_01Q4837BM01W70T30B184GG1R7", "owner_id": "x"}, ACTIVE, T0 + 1000, "item-id-mismatch"),
    ({"owner_id": "x"}, None, T0 + 1000, "no-active-claim"),
    ({"owner_id": "x", "epoch": "6"}, ACTIVE, T0 + 1000, "owner-mismatch"),
    ({"epoch": "6"}, ACTIVE, T0 + 1000, "epoch-mismatch"),
    ({}, ACTIVE, T0 + 300_000, "claim-expired"),
])
def test_fence_reasons_in_order_and_stored(fence, seed_active, now, reason):
    b, _ = backend(seed=durable(active=seed_active), now=now)
    r = b.call("publish", request(**fence))
    assert r.exit == 4 and code(r) == "claim-fence-rejected"
    d = r.envelope["error"]["details"]
    assert list(d) == ["ledger_namespace", "item_id", "observed_at", "reason", "supplied_owner_id",
                       "supplied_epoch", "active_owner_id", "active_epoch"]
    assert d["reason"] == reason and d["ledger_namespace"] == NS and d["item_id"] == ITEM
    assert d["active_owner_id"] == (None if seed_active is None else "agent-a")
    assert b.store.outcomes[("pub_1", NS, ITEM)].exit == 4
    assert b.store.ledgers[(NS, ITEM)] == BEFORE and b.store.floors[NS] == now


def test_floor_fault_on_publish():
    b, _ = backend(faults={"clock_floor_persist": True})
    r = b.call("publish", request())
    assert r.exit == 6 and code(r) == "clock-floor-persistence-failed"
    assert r.envelope["error"]["details"] == {"ledger_namespace": NS, "item_id": ITEM}
    assert r.envelope["operation_id"] == "pub_1" and b.store.outcomes == {}


def test_outcome_unknown_is_one_shot_and_changes_nothing():
    b, _ = backend(faults={"publication-outcome-unknown": True})
    r = b.call("publish", request())
    assert r.exit == 6 and r.envelope["state"] == "unknown"
    assert r.envelope["error"]["details"] == {"operation_id": "pub_1", "ledger_namespace": NS, "item_id": ITEM}
    assert b.store.faults["publication-outcome-unknown"] is False
    assert b.store.floors[NS] == T0 and b.store.ledgers[(NS, ITEM)] == BEFORE
    read = b.call("publication-read", {"operation_id": "pub_1", "ledger_namespace": NS, "item_id": ITEM})
    assert read.exit == 2 and code(read) == "operation-not-found"
    assert b.call("publish", request()).exit == 0


class Barrier(Hooks):
    """Parks the first publish of ``operation_id`` in before_commit."""

    def __init__(self, operation_id):
        self.operation_id = operation_id
        self.parked, self.release = threading.Event(), threading.Event()
        self.after = []

    def before_commit(self, request):
        if request["operation_id"] == self.operation_id and not self.parked.is_set():
            self.parked.set()
            assert self.release.wait(10)

    def after_commit(self, op, request, reply):
        self.after.append((op, request.get("operation_id")))


def _in_thread(fn):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", fn()))
    t.start()
    return t, box


def test_concurrent_identical_publish_replays_inside_commit_boundary():
    hooks = Barrier("pub_1")
    b, _ = backend(hooks=hooks)
    t, box = _in_thread(lambda: b.call("publish", request()))
    assert hooks.parked.wait(10)
    second = b.call("publish", request())  # commits while the first is parked
    hooks.release.set()
    t.join(10)
    assert box["r"] == second and second.exit == 0
    assert hooks.after == [("publish", "pub_1")]  # one fresh commit only
    assert len(b.store.outcomes) == 1


def test_revision_changed_while_parked_is_stored_rejection():
    hooks = Barrier("pub_1")
    b, _ = backend(hooks=hooks)
    t, box = _in_thread(lambda: b.call("publish", request()))
    assert hooks.parked.wait(10)
    assert b.call("publish", request(op_id="pub_2")).exit == 0
    hooks.release.set()
    t.join(10)
    r = box["r"]
    assert r.exit == 4 and code(r) == "ledger-revision-conflict"
    assert r.envelope["error"]["details"]["actual_revision"] == revision(AFTER)
    assert b.store.outcomes[("pub_1", NS, ITEM)].exit == 4  # stored inside the boundary


def test_paused_writer_rejected_after_takeover():
    hooks = Barrier("pub_1")
    b, clock = backend(hooks=hooks)
    t, box = _in_thread(lambda: b.call("publish", request()))
    assert hooks.parked.wait(10)
    clock.set(parse_instant(ACTIVE["expires_at"]))
    r = b.call("acquire", {"ledger_namespace": NS, "item_id": ITEM, "owner_id": "agent-b",
                           "lease_duration_ms": 60000, "expected": {"last_epoch": "7", "active": ACTIVE}})
    assert r.exit == 0
    hooks.release.set()
    t.join(10)
    assert box["r"].envelope["error"]["details"]["reason"] == "owner-mismatch"
    assert b.store.ledgers[(NS, ITEM)] == BEFORE


def test_publication_read_unbound_and_missing():
    b, _ = backend()
    r = b.call("publication-read", {"operation_id": "p", "ledger_namespace": "wbns_" + "3" * 32, "item_id": ITEM})
    assert code(r) == "ledger-namespace-unbound" and r.envelope["command"] == "read"
    r = b.call("publication-read", {"operation_id": "p", "ledger_namespace": NS, "item_id": ITEM})
    assert r.envelope["operation_id"] == "p" and r.envelope["state"] == "unchanged"


def test_real_ledger_item_validator_when_present():
    ledger_item = pytest.importorskip("backends.contract.ledger_item")
    assert ledger_item.validate_candidate(AFTER, ITEM, f"ledger/{ITEM}.md") is None
    b, _ = backend()
    assert b.call("publish", request()).exit == 0
