"""Property test: random operation sequences against the reference backend
keep the contract's invariants (epochs and floors never decrease, one live
owner at a time, publications only under the live fence, replays identical)."""

from __future__ import annotations

import base64
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from backends.api import FixedClock
from backends.contract import claim_json, parse_instant, revision, sha256_ref
from backends.reference import open_backend

NS = "wbns_" + "1" * 32
ITEM = "wb_01Q4837BM01W70T30B184GG1R6"
T0 = parse_instant("2030-01-11T09:00:00.000Z")
LEDGER = Path(__file__).resolve().parents[2] / "shared" / "vectors" / "work-claims" / "ledger"
BEFORE = (LEDGER / "before.md").read_bytes()
AFTER = (LEDGER / "after.md").read_bytes()
OWNERS = ("a", "b", "c")

steps = st.lists(st.one_of(
    st.tuples(st.just("clock"), st.integers(-20_000, 90_000)),
    st.tuples(st.just("acquire"), st.sampled_from(OWNERS), st.booleans(), st.integers(1, 60_000)),
    st.tuples(st.just("renew"), st.sampled_from(OWNERS), st.booleans(), st.integers(1, 60_000)),
    st.tuples(st.just("release"), st.sampled_from(OWNERS), st.booleans()),
    st.tuples(st.just("publish"), st.sampled_from(OWNERS), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("retry"), st.integers(0, 50)),
    st.tuples(st.just("legacy"), st.sampled_from(["legacy-create", "legacy-transition"])),
    st.tuples(st.just("restart")),
), max_size=40)


def _state(b):
    rec = b.store.claims.get((NS, ITEM))
    return rec, b.store.floors.get(NS)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_invariants_hold_on_random_sequences(seq):
    clock = FixedClock(T0)
    durable = {"ledgers": [{"ledger_namespace": NS, "item_id": ITEM, "revision": revision(BEFORE),
                            "source_base64": base64.b64encode(BEFORE).decode()}]}
    b = open_backend({"namespaces": [NS], "durable": durable}, clock)
    published: list[tuple[dict, object]] = []
    known: dict[str, dict] = {}  # owner -> last claim object it was granted
    for step in seq:
        before_rec, before_floor = _state(b)
        kind = step[0]
        reply = None
        if kind == "clock":
            clock.set(clock.ms + step[1])
            continue
        if kind == "restart":
            b.restart()
            continue
        if kind == "acquire":
            _, owner, fresh, lease = step
            rb = b.call("read", {"ledger_namespace": NS, "item_id": ITEM}).envelope["result"]["read_back"]
            expected = {"last_epoch": rb["last_epoch"], "active": rb["active"]} if fresh else \
                {"last_epoch": "0", "active": None}
            reply = b.call("acquire", {"ledger_namespace": NS, "item_id": ITEM, "owner_id": owner,
                                       "lease_duration_ms": lease, "expected": expected})
        elif kind in ("renew", "release"):
            owner, use_known = step[1], step[2]
            claim = known.get(owner) if use_known else None
            req = {"ledger_namespace": NS, "item_id": ITEM, "owner_id": owner,
                   "epoch": claim["epoch"] if claim else "1",
                   "expected_expires_at": claim["expires_at"] if claim else "2030-01-11T09:00:00.000Z"}
            if kind == "renew":
                req["lease_duration_ms"] = step[3]
            reply = b.call(kind, req)
        elif kind == "publish":
            _, owner, n, stale_rev = step
            claim = known.get(owner, {"epoch": "1"})
            current = b.store.ledgers[(NS, ITEM)]
            cand = AFTER if n % 2 else BEFORE
            req = {"operation_id": f"pub_{owner}_{n}_{len(published)}", "ledger_namespace": NS, "item_id": ITEM,
                   "expected_revision": revision(BEFORE if stale_rev else current),
                   "candidate_source_base64": base64.b64encode(cand).decode(),
                   "candidate_sha256": sha256_ref(cand),
                   "claim_fence": {"ledger_namespace": NS, "item_id": ITEM, "owner_id": owner,
                                   "epoch": claim["epoch"]}}
            reply = b.call("publish", req)
            published.append((req, reply))
            stored = b.store.outcomes.get((req["operation_id"], NS, ITEM))
            if stored is not None:  # what was stored is exactly what was answered
                assert (stored.exit, stored.envelope) == (reply.exit, reply.envelope)
        elif kind == "retry":
            if not published:
                continue
            req, _first = published[step[1] % len(published)]
            stored = b.store.outcomes.get((req["operation_id"], NS, ITEM))
            reply = b.call("publish", req)
            if stored is not None:  # a replay: verbatim, and no floor movement
                assert (reply.exit, reply.envelope) == (stored.exit, stored.envelope)
                assert b.store.floors.get(NS) == before_floor
        elif kind == "legacy":
            reply = b.call(step[1], {"ledger_namespace": NS, "item_id": ITEM})

        after_rec, after_floor = _state(b)
        # floors never decrease
        if before_floor is not None:
            assert after_floor is not None and after_floor >= before_floor
        # epochs never decrease; the active epoch is the high-water mark
        if before_rec is not None:
            assert after_rec.last_epoch >= before_rec.last_epoch
        if after_rec is not None and after_rec.active is not None:
            assert after_rec.active.epoch == after_rec.last_epoch
        if reply is None:
            continue
        assert reply.exit in (0, 2, 3, 4, 6)
        if kind == "acquire" and reply.exit == 0:
            now = after_floor
            # at most one live owner: the previous lease was gone at decision time
            assert before_rec is None or before_rec.active is None or before_rec.active.expires_at <= now
            assert after_rec.last_epoch == (before_rec.last_epoch if before_rec else 0) + 1
            known[step[1]] = reply.envelope["result"]["claim"]
        if kind == "renew" and reply.exit == 0:
            known[step[1]] = reply.envelope["result"]["claim"]
            assert after_rec.last_epoch == before_rec.last_epoch
        if kind == "publish" and reply.exit == 0:
            fence = reply.envelope["result"]["claim_fence"]
            live = before_rec.active
            assert live is not None and live.owner_id == fence["owner_id"]
            assert claim_json(live)["epoch"] == fence["epoch"] and live.expires_at > after_floor
            assert after_rec == before_rec  # publication neither renews nor releases
        if reply.exit != 0 and kind != "publish":
            assert after_rec == before_rec  # refusals change no claim
