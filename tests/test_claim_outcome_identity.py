"""Outcome identity in the checkers: an outcome is stored per ``(operation_id,
namespace, item)`` (vectors.md §8.6, and ``ledger-publication.read`` takes
that triple), and a revision conflict may or may not be stored - without the
linearizability search doubling its state set for each such conflict."""

from __future__ import annotations

import time

from backends.api import FixedClock
from backends.registry import open_backend
from checkers import run_checkers
from checkers.history import classify
from checkers.invariants import durability, idempotence
from checkers import linearizable
from workloads.items import publish_request, revision_of

NS = "wbns_" + "d" * 32
ITEM, SIDE = "wb_01Q4837BM01W70T30B184GG1R6", "wb_01Q4837BM01W70T30B184GG1R7"
T0 = 1_894_352_400_000


class Recorder:
    """Drive the reference engine and record a history the checkers read."""

    def __init__(self):
        from workloads.items import candidate

        self.clock = FixedClock(T0)
        self.b = open_backend({"backend": "reference", "namespaces": [NS]}, self.clock)
        self.seed = {ITEM: candidate(ITEM, "seed", "seed"), SIDE: candidate(SIDE, "seed", "seed")}
        self.durable = {"clock_floors": [], "claims": [], "publication_outcomes": [], "ledgers": [
            {"ledger_namespace": NS, "item_id": i, "revision": revision_of(d),
             "source_base64": __import__("base64").b64encode(d).decode()} for i, d in self.seed.items()]}
        self.b.store.seed(self.durable)
        self.h: list = []
        self.t = 0

    def call(self, f, req, process=0):
        self.t += 1
        self.clock.set(T0 + self.t)
        self.h.append({"index": len(self.h), "time": self.t * 1_000_000, "process": process, "type": "invoke",
                       "f": f, "value": req})
        r = self.b.call(f, req)
        self.h.append({"index": len(self.h), "time": self.t * 1_000_000 + 1, "process": process,
                       "type": classify(r.exit, r.envelope), "f": f, "value": r.to_json()})
        return r

    def finish(self):
        final = self.b.store.export_durable()
        self.h.append({"index": len(self.h), "time": (self.t + 1) * 1_000_000, "process": "nemesis", "type": "info",
                       "f": "final-state", "value": {"durable": final}})
        return self.h, {"initial_durable": self.durable, "tuples": [[NS, ITEM], [NS, SIDE]],
                        "capabilities": self.b.call("capabilities", {}).envelope}

    def hold(self, item=ITEM, owner="a"):
        r = self.call("acquire", {"ledger_namespace": NS, "item_id": item, "owner_id": owner,
                                  "lease_duration_ms": 600_000, "expected": {"last_epoch": "0", "active": None}})
        return r.envelope["result"]["claim"]


def test_many_unstored_revision_conflicts_keep_the_search_small():
    rec = Recorder()
    claim = rec.hold()
    fence = {"ledger_namespace": NS, "item_id": ITEM, "owner_id": "a", "epoch": claim["epoch"]}
    current = revision_of(rec.seed[ITEM])
    for n in range(60):
        ok = rec.call("publish", publish_request(f"ok-{n}", NS, ITEM, current, fence, "a"))
        stale = rec.call("publish", publish_request(f"stale-{n}", NS, ITEM, current, fence, "a"))
        assert stale.envelope["error"]["code"] == "ledger-revision-conflict"
        current = ok.envelope["result"]["committed_revision"]
    h, ctx = rec.finish()
    started = time.monotonic()
    result = linearizable.check(h, dict(ctx, timeout=20))
    # forking each conflict into stored / not stored would need 2**60 configurations
    assert result["valid"] is True, result
    assert time.monotonic() - started < 20


def test_a_replay_after_an_unstored_conflict_is_decided_afresh_and_accepted():
    rec = Recorder()
    claim = rec.hold()
    fence = {"ledger_namespace": NS, "item_id": ITEM, "owner_id": "a", "epoch": claim["epoch"]}
    seed_rev = revision_of(rec.seed[ITEM])
    wrong = publish_request("p1", NS, ITEM, revision_of(b"never"), fence, "a")
    assert rec.call("publish", wrong).envelope["error"]["code"] == "ledger-revision-conflict"
    # the same id with another request: no stored outcome, so it is decided afresh and commits
    right = publish_request("p1", NS, ITEM, seed_rev, fence, "a")
    assert rec.call("publish", right).exit == 0
    assert rec.call("publish", right).exit == 0      # and now it replays
    h, ctx = rec.finish()
    verdict = run_checkers(h, ctx)
    assert verdict["valid"] is True, {k: v["anomalies"][:1] for k, v in verdict["checkers"].items() if v["valid"] is not True}


def test_the_same_id_on_another_item_is_another_identity():
    rec = Recorder()
    claim = rec.hold()
    fence = {"ledger_namespace": NS, "item_id": ITEM, "owner_id": "a", "epoch": claim["epoch"]}
    first = publish_request("p2", NS, ITEM, revision_of(rec.seed[ITEM]), fence, "a")
    assert rec.call("publish", first).exit == 0
    other = publish_request("p2", NS, SIDE, revision_of(rec.seed[SIDE]), dict(fence, item_id=SIDE), "a")
    r = rec.call("publish", other)
    assert r.envelope["error"]["details"]["reason"] == "no-active-claim"    # decided, not idempotency-conflict
    rec.call("publication-read", {"operation_id": "p2", "ledger_namespace": NS, "item_id": SIDE})
    rec.call("publication-read", {"operation_id": "p2", "ledger_namespace": NS, "item_id": ITEM})
    h, ctx = rec.finish()
    for check in (idempotence.check, durability.check, linearizable.check):
        result = check(h, ctx)
        assert result["valid"] is True, result.get("anomalies")
    # a backend that forgets the first outcome is still caught on its own triple
    forged = [dict(o) for o in h]
    last_read = max(i for i, o in enumerate(forged) if o["f"] == "publication-read" and o["type"] != "invoke")
    forged[last_read] = dict(forged[last_read], type="fail", value={
        "exit": 2, "envelope": {"ok": False, "namespace": "ledger-publication", "command": "read",
                                "contract_version": 1, "state": "unchanged", "operation_id": "p2",
                                "error": {"code": "operation-not-found", "message": "x", "details": {}}}})
    assert durability.check(forged, ctx)["valid"] is False
