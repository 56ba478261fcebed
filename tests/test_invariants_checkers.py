"""Each invariant: a valid hand-scripted history passes, and each hand-made
violation (a mutation of one reply, as a broken backend would produce it) is
caught by the checker that owns it, with an explanation and the ops involved."""

from __future__ import annotations

import copy

import pytest
from test_invariants_support import T0, Scenario, claim_of, standard_scenario

from backends.contract.values import format_instant
from checkers.invariants import INVARIANTS


def run(name: str, history: list[dict], ctx: dict) -> dict:
    return INVARIANTS[name](history, ctx)


def at(ms: int) -> str:
    return format_instant(T0 + ms)


@pytest.fixture()
def base():
    s, labels = standard_scenario()
    return s, labels


def envelope(rec: dict) -> dict:
    return rec["value"]["envelope"]


def assert_caught(result: dict, anomaly_type: str, with_ops: bool = True) -> dict:
    assert result["valid"] is False, result
    types = [a["type"] for a in result["anomalies"]]
    assert anomaly_type in types, types
    a = result["anomalies"][types.index(anomaly_type)]
    assert "contract §" in a["explanation"]
    assert bool(a["ops"]) is with_ops
    return a


@pytest.mark.parametrize("name", sorted(INVARIANTS))
def test_standard_history_is_valid(base, name):
    s, _ = base
    assert run(name, s.history, s.ctx())["valid"] is True


# --------------------------------------------------------------------------- dual ownership


def test_acquire_over_live_claim_is_caught(base):
    s, L = base
    # B's refused acquire "succeeds" instead: epoch 2 while epoch 1 is live until 09:01:10
    env = envelope(L["b_held"])
    rb = dict(env["error"]["details"])
    claim = {"owner_id": "agent-b", "epoch": "2", "issued_at": at(30_000), "expires_at": at(90_000)}
    L["b_held"]["value"] = {"exit": 0, "envelope": {
        "ok": True, "namespace": "work-claim", "command": "acquire", "contract_version": 1, "state": "committed",
        "result": {"claim": claim, "read_back": {**rb, "last_epoch": "2", "active": claim}}}}
    L["b_held"]["type"] = "ok"
    r = run("dual_ownership", s.history, s.ctx())
    assert_caught(r, "early-takeover")
    a = assert_caught(r, "overlapping-leases")
    assert a["data"]["epochs"] == ["1", "2"]


def test_two_owners_one_epoch_is_caught(base):
    s, L = base
    for part in ("claim",):
        envelope(L["b_acq"])["result"][part]["epoch"] = "1"
    envelope(L["b_acq"])["result"]["read_back"]["active"]["epoch"] = "1"
    assert_caught(run("dual_ownership", s.history, s.ctx()), "two-owners-one-epoch")


def test_lost_release_reply_is_not_dual_ownership():
    """A's release reply is lost (info); B then acquires. The lease may have
    ended at the release, so no overlap can be proven: valid."""
    s = Scenario()
    a = claim_of(s.call(1, "acquire", s.acquire("agent-a", {"last_epoch": "0", "active": None}), 0))
    s.call(1, "release", s.release("agent-a", a), 5_000, lost=True)
    s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": None}), 6_000)
    for name in ("dual_ownership", "epochs", "durability", "floors"):
        assert run(name, s.history, s.ctx())["valid"] is True


# --------------------------------------------------------------------------- epochs


def test_epoch_not_next_and_reallocated(base):
    s, L = base
    env = envelope(L["b_acq"])
    env["result"]["claim"]["epoch"] = "3"
    env["result"]["read_back"]["last_epoch"] = "3"
    env["result"]["read_back"]["active"]["epoch"] = "3"
    assert_caught(run("epochs", s.history, s.ctx()), "epoch-not-next")


def test_epoch_aba_after_restart_is_caught():
    s = Scenario()
    a = claim_of(s.call(1, "acquire", s.acquire("agent-a", {"last_epoch": "0", "active": None}, 1_000), 0))
    s.call(1, "release", s.release("agent-a", a), 500)
    s.rec.add("nemesis", "info", "restart", {"target": "backend"})
    b = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": None}), 2_000)
    # a backend that lost its high-water mark hands out epoch 1 again
    env = envelope(b)
    for obj_ in (env["result"]["claim"], env["result"]["read_back"]["active"]):
        obj_["epoch"] = "1"
    env["result"]["read_back"]["last_epoch"] = "1"
    r = run("epochs", s.history, s.ctx())
    assert_caught(r, "epoch-reallocated")
    assert_caught(r, "epoch-reused")


def test_swapped_epochs_are_caught(base):
    """Mutation: swap the epochs of the two acquires."""
    s, L = base
    for label, e in (("a_acq", "2"), ("b_acq", "1")):
        env = envelope(L[label])
        env["result"]["claim"]["epoch"] = e
        env["result"]["read_back"]["last_epoch"] = e
        env["result"]["read_back"]["active"]["epoch"] = e
    assert run("epochs", s.history, s.ctx())["valid"] is False


# --------------------------------------------------------------------------- floors


def test_decision_time_going_backwards_is_caught(base):
    s, L = base
    # B's acquire (after A's release at +40s) claims it decided at +35s: a lost floor
    env = envelope(L["b_acq"])
    for o in (env["result"]["claim"], env["result"]["read_back"]["active"]):
        o["issued_at"], o["expires_at"] = at(35_000), at(95_000)
    env["result"]["read_back"]["observed_at"] = at(35_000)
    a = assert_caught(run("floors", s.history, s.ctx()), "decision-time-regressed")
    assert a["data"]["floor"] == at(40_000)


def test_read_may_report_more_than_floor_but_not_less():
    s = Scenario()
    s.call(1, "acquire", s.acquire("agent-a", {"last_epoch": "0", "active": None}), 10_000)
    s.call(2, "read", s.key(), 20_000)      # physical 20s, not persisted
    s.call(1, "read", s.key(), 15_000)      # clock stepped back: 15s is still >= floor 10s
    assert run("floors", s.history, s.ctx())["valid"] is True
    rb = envelope(s.history[-1])["result"]["read_back"]
    rb["observed_at"] = at(5_000)           # below the persisted floor
    assert_caught(run("floors", s.history, s.ctx()), "decision-time-regressed")


def test_expiry_from_client_clock_is_caught(base):
    s, L = base
    envelope(L["a_renew"])["result"]["claim"]["expires_at"] = at(99_999)
    assert_caught(run("floors", s.history, s.ctx()), "expiry-not-from-decision-time")


def test_forward_jump_is_reported_not_flagged():
    s = Scenario()
    s.call(1, "acquire", s.acquire("agent-a", {"last_epoch": "0", "active": None}, 60_000), 0)
    s.call(2, "read", {**s.key()}, 3_600_000)  # a read does not persist
    s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "0", "active": None}, 60_000, k=0), 3_600_000)
    r = run("floors", s.history, s.ctx())
    assert r["valid"] is True
    assert r["stats"]["max_jump_ms"] == 3_600_000 and r["stats"]["leases_expired_early"] == 1


# --------------------------------------------------------------------------- idempotence


def test_replay_that_reexecuted_is_caught(base):
    s, L = base
    envelope(L["p2_retry"])["result"]["claim_read_back"]["observed_at"] = at(61_000)
    assert_caught(run("idempotence", s.history, s.ctx()), "replay-differs")


def test_different_request_under_same_id_accepted_is_caught(base):
    s, L = base
    # a later publish under pub_b_1 with different bytes that the backend accepted
    req = s.publish("pub_b_1", "agent-b", "2", L["p2_req"]["candidate_sha256"], "b other")
    rec = s.call(2, "publish", req, 70_000)
    assert envelope(rec)["error"]["code"] == "idempotency-conflict"
    assert run("idempotence", s.history, s.ctx())["valid"] is True
    ok = copy.deepcopy(L["p2"]["value"])
    ok["envelope"]["result"]["committed_revision"] = req["candidate_sha256"]
    rec["value"], rec["type"] = ok, "ok"
    r = run("idempotence", s.history, s.ctx())
    assert_caught(r, "operation-id-bound-twice")
    assert_caught(r, "idempotency-conflict-missing")


def test_publication_read_with_other_outcome_is_caught(base):
    s, L = base
    envelope(L["r2"])["result"]["outcome"]["exit"] = 4
    assert_caught(run("idempotence", s.history, s.ctx()), "publication-read-differs")


def test_duplicate_write_in_final_state_is_caught(base):
    """Mutation: the same operation stored (written) twice."""
    s, L = base
    outs = L["final"]["value"]["durable"]["publication_outcomes"]
    outs.append(copy.deepcopy(outs[-1]))
    assert_caught(run("idempotence", s.history, s.ctx()), "duplicate-stored-outcome")


# --------------------------------------------------------------------------- stale writes


def test_stale_fence_accepted_is_caught(base):
    s, L = base
    # A's epoch-1 publish after B's takeover is accepted instead of rejected
    req = s.history[L["stale"]["index"] - 1]["value"]
    good = copy.deepcopy(L["p2"]["value"])
    res = good["envelope"]["result"]
    good["envelope"]["operation_id"] = req["operation_id"]
    res["committed_revision"], res["claim_fence"] = req["candidate_sha256"], req["claim_fence"]
    res["claim_read_back"]["observed_at"] = at(62_000)
    L["stale"]["value"], L["stale"]["type"] = good, "ok"
    a = assert_caught(run("stale_write", s.history, s.ctx()), "stale-fence-accepted")
    assert any("epoch 2 was issued" in r for r in a["data"]["reasons"])
    assert run("capability_honesty", s.history, s.ctx())["valid"] is False


def test_rejected_candidate_in_final_ledger_is_caught(base):
    s, L = base
    stale_req = s.history[L["stale"]["index"] - 1]["value"]
    led = L["final"]["value"]["durable"]["ledgers"][0]
    led["revision"], led["source_base64"] = stale_req["candidate_sha256"], stale_req["candidate_source_base64"]
    r = run("stale_write", s.history, s.ctx())
    assert_caught(r, "unaccepted-revision")
    assert_caught(run("durability", s.history, s.ctx()), "final-revision-lost")


def test_lost_update_is_caught(base):
    """Mutation: B's publish is accepted against the seed revision (A's write lost)."""
    s, L = base
    for label in ("p2", "p2_retry"):
        s.history[L[label]["index"] - 1]["value"]["expected_revision"] = s.seed_rev()
    assert_caught(run("stale_write", s.history, s.ctx()), "revision-chain-broken")


# --------------------------------------------------------------------------- durability


def test_final_state_losses_are_caught(base):
    s, L = base
    d = L["final"]["value"]["durable"]
    d["claims"][0]["last_epoch"] = "1"
    d["claims"][0]["active"] = None
    d["clock_floors"][0]["observed_at"] = at(1)
    d["publication_outcomes"] = d["publication_outcomes"][:1]
    r = run("durability", s.history, s.ctx())
    for t in ("final-epoch-lost", "final-floor-lost", "final-outcome-missing"):
        assert_caught(r, t)


def test_lost_outcome_on_publication_read_is_caught(base):
    s, L = base
    L["r1"]["value"] = {"exit": 2, "envelope": {
        "ok": False, "namespace": "ledger-publication", "command": "read", "contract_version": 1,
        "state": "unchanged", "operation_id": "pub_a_1",
        "error": {"code": "operation-not-found", "message": "The publication operation outcome was not found.",
                  "details": {"operation_id": "pub_a_1", **s.key()}}}}
    L["r1"]["type"] = "fail"
    assert_caught(run("durability", s.history, s.ctx()), "publication-outcome-lost")


def test_high_water_mark_regression_is_caught(base):
    s, L = base
    rb = envelope(L["final_read"])["result"]["read_back"]
    rb["last_epoch"], rb["active"] = "1", None
    assert_caught(run("durability", s.history, s.ctx()), "epoch-high-water-lost")


def test_failed_acquire_that_took_effect_is_caught():
    s = Scenario()
    a = claim_of(s.call(1, "acquire", s.acquire("agent-a", {"last_epoch": "0", "active": None}), 0))
    held = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": a}), 1_000)
    assert held["type"] == "fail"
    read = s.call(3, "read", s.key(), 2_000)
    assert run("durability", s.history, s.ctx())["valid"] is True
    # the store shows B installed at its refused decision time, epoch 2
    rb = envelope(read)["result"]["read_back"]
    rb["last_epoch"] = "2"
    rb["active"] = {"owner_id": "agent-b", "epoch": "2", "issued_at": at(1_000), "expires_at": at(61_000)}
    r = run("durability", s.history, s.ctx())
    assert_caught(r, "failed-acquire-took-effect")


def test_lost_acquire_reply_may_consume_an_epoch():
    s = Scenario()
    s.call(1, "acquire", s.acquire("agent-a", {"last_epoch": "0", "active": None}, 1_000), 0, lost=True)
    s.call(2, "read", s.key(), 5_000)
    s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": None}), 6_000)
    for name in INVARIANTS:
        assert run(name, s.history, s.ctx())["valid"] is True, name


def test_silently_consumed_epoch_is_caught(base):
    s, L = base
    # the final read claims a third epoch nobody acquired
    rb = envelope(L["final_read"])["result"]["read_back"]
    rb["last_epoch"] = "3"
    rb["active"] = None
    assert_caught(run("durability", s.history, s.ctx()), "epoch-consumed-silently")


# --------------------------------------------------------------------------- envelopes


@pytest.mark.parametrize("mutate, fragment", [
    (lambda L: envelope(L["b_held"])["error"].__setitem__("message", "Held."), "message for claim-held"),
    (lambda L: envelope(L["b_held"]).__setitem__("state", "committed"), "requires state"),
    (lambda L: L["b_held"]["value"].__setitem__("exit", 2), "requires exit 4"),
    (lambda L: envelope(L["a_acq"]).__setitem__("extra", 1), "envelope members differ"),
    (lambda L: envelope(L["p1"]).pop("operation_id"), "envelope members differ"),
    (lambda L: envelope(L["a_acq"])["result"]["read_back"].__setitem__("observed_at", "2030-01-11T09:00:01Z"),
     "not an instant"),
    (lambda L: envelope(L["a_rel"])["result"]["read_back"].__setitem__("last_epoch", "01"), "canonical epoch"),
    (lambda L: envelope(L["stale"])["error"]["details"].__setitem__("reason", "stale"), "fence rejection reason"),
])
def test_malformed_envelopes_are_caught(base, mutate, fragment):
    s, L = base
    mutate(L)
    r = run("envelopes", s.history, s.ctx())
    a = assert_caught(r, "malformed-envelope")
    assert any(fragment in x["data"]["problem"] for x in r["anomalies"]), [x["data"]["problem"] for x in r["anomalies"]]
    assert a["data"]["f"]


def test_capabilities_envelope_has_no_state():
    s = Scenario()
    s.rec.invoke(0, "capabilities", {})
    s.rec.complete(0, "capabilities", 0, {**s.caps, "state": "committed"})
    assert_caught(run("envelopes", s.history, s.ctx()), "malformed-envelope")


# --------------------------------------------------------------------------- capability honesty


def test_advisory_backend_must_refuse_publish():
    alt = {"write_paths": {"alternate": "bypass", "claimed_publication_v1": "atomic-fence",
                           "legacy_create_v1": "reject-claimed-id", "legacy_transition_v1": "reject-active-claim"}}
    s = Scenario(spec=alt)
    assert s.caps["result"]["operations"]["work_claim"]["mode"] == "advisory"
    a = claim_of(s.call(1, "acquire", s.acquire("agent-a", {"last_epoch": "0", "active": None}), 0))
    rec = s.call(1, "publish", s.publish("pub_x", "agent-a", a["epoch"], s.seed_rev(), "x"), 1_000)
    assert envelope(rec)["error"]["code"] == "capability-unavailable"
    assert run("capability_honesty", s.history, s.ctx())["valid"] is True
    rec["type"] = "ok"
    rec["value"] = {"exit": 0, "envelope": {"ok": True, "namespace": "ledger-publication",
                                            "command": "publish-claimed", "contract_version": 1,
                                            "state": "committed", "operation_id": "pub_x", "result": {}}}
    assert_caught(run("capability_honesty", s.history, s.ctx()), "advisory-published")


def test_merge_coordinated_must_not_claim_exclusive_dispatch():
    s = Scenario()
    caps = copy.deepcopy(s.caps)
    wc = caps["result"]["operations"]["work_claim"]
    wc.update(mode="merge-coordinated", fencing_enforced_at="git-history-reconciliation")
    # the capabilities came from ctx, not from a history op: no op to cite
    assert_caught(run("capability_honesty", s.history, {"capabilities": caps}), "merge-coordinated-claims-exclusive",
                  with_ops=False)
    wc["safe_exclusive_dispatch"] = False
    assert run("capability_honesty", s.history, {"capabilities": caps})["valid"] is True


def test_a_strict_fenced_program_with_one_namespace_per_ledger_is_no_false_alarm():
    """Contract §3: the capabilities envelope reports ONE ledger's profile. A
    program that mints one namespace per ledger (two strict fenced reference
    ledgers here, each bound to its own namespace) is consistent; the
    allowlist of the ledger the harness asked covers its own namespace, not
    the other ledger's (a new author's fenced CLI was INVALID for that)."""
    from backends.api import FixedClock
    from backends.reference import open_backend
    from test_invariants_support import NS, Recorder, item_id, seed_durable

    rec, clock = Recorder(), FixedClock(T0)
    ledgers = {}
    for ns in NS:
        durable, _ = seed_durable([(ns, item_id(0))])
        ledgers[ns] = open_backend({"namespaces": [ns], "durable": durable}, clock)
    caps = ledgers[NS[0]].call("capabilities", {}).envelope
    assert caps["result"]["backend"]["ledger_binding"]["namespaces"] == [NS[0]]
    for pid, ns in enumerate(NS):
        req = {"ledger_namespace": ns, "item_id": item_id(0)}
        rec.invoke(pid, "read", req)
        r = ledgers[ns].call("read", req)
        rec.complete(pid, "read", r.exit, r.envelope)
    per_ledger = {NS[0]: "/run/ledger-1", NS[1]: "/run/ledger-2"}
    r = run("capability_honesty", rec.history, {"capabilities": caps, "ledger_of": per_ledger})
    assert r["valid"] is True, r["anomalies"]
    # one ledger serving a namespace its allowlist leaves out is still caught
    one_ledger = {NS[0]: "/run/ledger-1", NS[1]: "/run/ledger-1"}
    a = assert_caught(run("capability_honesty", rec.history, {"capabilities": caps, "ledger_of": one_ledger}),
                      "fenced-profile-inconsistent", with_ops=False)
    assert NS[1] in a["explanation"]
    assert_caught(run("capability_honesty", rec.history, {"capabilities": caps}), "fenced-profile-inconsistent",
                  with_ops=False)


def test_capabilities_unknown_without_envelope(base):
    s, _ = base
    r = run("capability_honesty", s.history, {})
    assert r["valid"] == "unknown" and r["unknown_reasons"]


def test_a_failed_acquire_that_took_effect_is_laid_to_the_refusal_that_may_have_written():
    """Two refusals with the witness the generation needs: an early ``claim-held`` (decided before any
    write) and a later exit-6 ``clock-floor-persistence-failed`` (the store may have written before it
    failed). The finding names the second, whose code a profile's acknowledgement matches (a default
    Wowbagger run named the first, a second before the generation)."""
    s = Scenario()
    a = claim_of(s.call(1, "acquire", s.acquire("agent-a", {"last_epoch": "0", "active": None}), 0))
    held = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": a}), 1_000)
    late = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": a}), 2_000)
    assert held["type"] == late["type"] == "fail"
    late["value"] = {"exit": 6, "envelope": {
        "ok": False, "namespace": "work-claim", "command": "acquire", "contract_version": 1, "state": "unchanged",
        "error": {"code": "clock-floor-persistence-failed",
                  "message": "The authoritative clock floor could not be persisted.", "details": {}}}}
    read = s.call(3, "read", s.key(), 3_000)
    rb = envelope(read)["result"]["read_back"]
    rb["last_epoch"] = "2"
    rb["active"] = {"owner_id": "agent-b", "epoch": "2", "issued_at": at(2_000), "expires_at": at(62_000)}
    found = assert_caught(run("durability", s.history, s.ctx()), "failed-acquire-took-effect")
    assert "clock-floor-persistence-failed" in found["explanation"] and late["index"] in found["ops"], found
    assert held["index"] not in found["ops"]
