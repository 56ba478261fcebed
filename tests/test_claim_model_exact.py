"""The claim model is exact about indeterminate operations (issue 11, item 2):
an ``info`` op took effect exactly once at an instant between its invoke and
the end of the run, or never, with the effect and stored outcome the contract
prescribes for that instant; and unresolved outcomes never blow the search up."""

from __future__ import annotations

import os
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_linearizable_claims import (ITEM, NS, REV0, REV1, TUPLE, H, acquire_req, active, claim_ok, instant,
                                      publish_err, publish_req, rb, renew_req)

from backends.contract.digests import operation_digest
from checkers import default_checkers, run_checkers
from checkers.linearizable import check
from checkers.linearizable.claims import NOTHING

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

A1 = active("a", 1, 100, 1100)


def lin(h: H) -> bool:
    return check(h.ops, {"timeout": 20, "initial_revisions": {f"{NS}/{ITEM}": REV0}})["valid"]


def test_an_info_acquire_installs_the_claim_its_lease_prescribes():
    def history(shown: dict) -> H:
        h = H()
        h.invoke(1, "acquire", acquire_req("a", 0, None, lease=1000)).info(1, "acquire")
        h.invoke(2, "read", TUPLE).done(2, "read", claim_ok("read", {"read_back": rb(1, shown, 500)}))
        return h

    assert lin(history(active("a", 1, 200, 1200))) is True      # issued at some instant, a lease later
    assert lin(history(active("a", 1, 200, 1700))) is False     # not issued_at + lease_duration_ms
    assert lin(history(active("b", 1, 200, 1200))) is False     # another owner


def test_an_info_renew_sets_an_expiry_from_an_instant_before_the_old_one():
    def history(new_expiry: int) -> H:
        h = H()
        h.invoke(1, "acquire", acquire_req("a", 0, None))
        h.done(1, "acquire", claim_ok("acquire", {"claim": A1, "read_back": rb(1, A1, 100)}))
        h.invoke(1, "renew", renew_req("a", 1, 1100, lease=5000)).info(1, "renew")
        shown = active("a", 1, 100, new_expiry)
        h.invoke(2, "read", TUPLE).done(2, "read", claim_ok("read", {"read_back": rb(1, shown, 2000)}))
        return h

    assert lin(history(900 + 5000)) is True     # renewed at 900, before the old expiry 1100
    assert lin(history(1200 + 5000)) is False   # "renewed" at 1200: the tuple had expired (claim-expired)
    assert lin(history(50 + 5000)) is False     # before the acquire's persisted decision time


def _stored_read(req: dict, reply: tuple) -> tuple[int, dict]:
    exit_code, env = reply
    return 0, {"ok": True, "namespace": "ledger-publication", "command": "read", "contract_version": 1,
               "state": "committed", "operation_id": req["operation_id"], "result": {
                   "operation_id": req["operation_id"], **TUPLE, "operation_digest": operation_digest(req),
                   "outcome": {"exit": exit_code, "stdout": env}}}


def test_an_info_publish_stores_only_the_outcome_of_the_state_it_met():
    def history(stored: tuple) -> H:
        h = H()
        h.invoke(1, "acquire", acquire_req("a", 0, None, lease=100_000))
        a1 = active("a", 1, 100, 100_100)
        h.done(1, "acquire", claim_ok("acquire", {"claim": a1, "read_back": rb(1, a1, 100)}))
        req = publish_req("pub_a_1", "a", 1, REV0, REV1)
        h.invoke(1, "publish", req).info(1, "publish")
        h.invoke(2, "publication-read", {"operation_id": "pub_a_1", **TUPLE})
        h.done(2, "publication-read", _stored_read(req, stored(req)))
        return h

    def fence(reason, owner="a", epoch="1"):
        return lambda req: publish_err(req, "claim-fence-rejected", {
            **TUPLE, "observed_at": instant(200), "reason": reason, "supplied_owner_id": "a", "supplied_epoch": "1",
            "active_owner_id": owner, "active_epoch": epoch})

    def conflict(expected, actual):
        return lambda req: publish_err(req, "ledger-revision-conflict", {
            **TUPLE, "expected_revision": expected, "actual_revision": actual})

    assert lin(history(fence("claim-expired"))) is True           # decided once the lease had run out
    assert lin(history(fence("owner-mismatch"))) is False         # the owner was a's at every instant
    assert lin(history(fence("claim-expired", owner="b"))) is False  # b never held it
    assert lin(history(conflict(REV0, REV0))) is False            # the revision was REV0: no conflict
    assert lin(history(conflict(REV1, REV0))) is False            # the swapped details of issue 11


def test_unresolved_revision_conflicts_do_not_multiply_the_states():
    """Each fresh ledger-revision-conflict may or may not have been stored: 40
    of them used to be 2**40 model states; one entry per id holds both."""
    h = H()
    h.invoke(1, "acquire", acquire_req("a", 0, None, lease=10_000_000))
    a1 = active("a", 1, 100, 10_000_100)
    h.done(1, "acquire", claim_ok("acquire", {"claim": a1, "read_back": rb(1, a1, 100)}))
    stale = "sha256:" + "d" * 64
    for n in range(40):
        req = publish_req(f"pub_a_{n}", "a", 1, stale, REV1)
        h.invoke(1, "publish", req).done(1, "publish", publish_err(req, "ledger-revision-conflict", {
            **TUPLE, "expected_revision": stale, "actual_revision": REV0}))
        h.invoke(2, "publication-read", {"operation_id": f"pub_a_{n}", **TUPLE})
        h.done(2, "publication-read", (2, {"ok": False, "namespace": "ledger-publication", "command": "read",
                                           "contract_version": 1, "state": "unchanged", "operation_id": f"pub_a_{n}",
                                           "error": {"code": "operation-not-found", "message": "...",
                                                     "details": {"operation_id": f"pub_a_{n}", **TUPLE}}}))
    r = check(h.ops, {"timeout": 20})
    assert r["valid"] is True
    assert r["partitions"][0]["configurations"] <= 3 * len(h.ops)
    assert NOTHING  # (the absent-only entry is the default)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), workers=st.integers(2, 12), items=st.integers(1, 4))
def test_generated_realistic_histories_are_valid(seed, workers, items, tmp_path_factory):
    """Never cry wolf: the scale generator's histories (real reference replies,
    info ops, restarts, clock moves both ways, lost replies) pass every checker."""
    from history_gen import GenConfig, generate

    from checkers.history import History

    d = str(tmp_path_factory.mktemp("gen"))
    generate(GenConfig(ops=600, seed=seed, workers=workers, namespaces=1, items=items, p_restart=0.01,
                       p_clock_back=0.01, p_clock_fwd=0.01, p_lost=0.05, p_crash=0.03), d)
    import json

    with open(os.path.join(d, "results.json")) as f:
        ctx = json.load(f)["ctx"]
    result = run_checkers(History.read(os.path.join(d, "history.jsonl")), ctx, default_checkers())
    bad = {n: [a["explanation"] for a in r["anomalies"][:2]] or r.get("error")
           for n, r in result["checkers"].items() if r["valid"] is not True}
    assert result["valid"] is True, bad
