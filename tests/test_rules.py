"""One hand-written valid history and one invalid history per contract rule
(checkers.rules.RULES): the valid one passes every checker, the invalid one is
named by the rule's own invariant, citing the section, with exactly the
minimal ops. Histories are real reference-backend replies (``Scenario``),
then one reply is changed the way a broken backend would answer.

Also here: the regression tests of issue 11's findings (the misses and the
wrong rules), each named after what it pins."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from test_invariants_support import T0, Scenario, claim_of

from backends.contract import Code, format_instant, publication_error, surface_error
from checkers import default_checkers, run_checkers
from checkers.history import classify
from checkers.rules import RULES, markdown_table

ROOT = Path(__file__).resolve().parents[1]


def at(ms: int) -> str:
    return format_instant(T0 + ms)


def env(rec: dict) -> dict:
    return rec["value"]["envelope"]


def invoke_of(s: Scenario, rec: dict) -> dict:
    return s.history[rec["index"] - 1]


def reply(rec: dict, r) -> None:
    """Replace a completion with the reply ``r`` (classified by the contract's words)."""
    rec["value"] = {"exit": r.exit, "envelope": r.envelope}
    rec["type"] = classify(r.exit, r.envelope)


def all_valid(s: Scenario) -> None:
    result = run_checkers(s.history, s.ctx(), default_checkers())
    bad = {n: [a["explanation"] for a in r["anomalies"][:2]] or r.get("error")
           for n, r in result["checkers"].items() if r["valid"] is not True}
    assert result["valid"] is True, bad


def named(s: Scenario, checker: str, anomaly: str, ops: list[int]) -> dict:
    """The checker flags exactly ``anomaly`` on exactly ``ops``, citing the contract."""
    r = default_checkers()[checker](s.history, s.ctx())
    assert r["valid"] is False, r
    found = [a for a in r["anomalies"] if a["type"] == anomaly]
    assert found, [(a["type"], a["explanation"]) for a in r["anomalies"]]
    a = found[0]
    assert "contract §" in a["explanation"]
    assert a["ops"] == sorted(ops), (a["ops"], sorted(ops), a["explanation"])
    return a


def idx(*recs: dict) -> list[int]:
    """History indices of these completions and their invokes."""
    return [i for r in recs for i in (r["index"] - 1, r["index"])]


FREE = {"last_epoch": "0", "active": None}


# --------------------------------------------------------------------------- the table


def test_docs_print_the_rules_table():
    assert markdown_table() in (ROOT / "docs" / "rules.md").read_text()


def test_table_and_checkers_name_the_same_anomaly_types():
    emitted: dict[str, set] = {}
    sources = {"linearizable": ROOT / "checkers" / "linearizable" / "claims.py"}
    for path in (ROOT / "checkers" / "invariants").glob("*.py"):
        sources.setdefault(path.stem, path)
    for name, path in sources.items():
        emitted[name] = set(re.findall(r'(?:out\.add|"type":)\(?\s*\n?\s*"([a-z][a-z-]+)"', path.read_text()))
    emitted["durability"] |= emitted.pop("unchanged")
    tabled: dict[str, set] = {}
    for rule in RULES:
        for checker, types in rule.checks.items():
            assert checker in default_checkers(), (rule.id, checker)
            tabled.setdefault(checker, set()).update(types)
    for checker, types in tabled.items():
        assert types <= emitted[checker], (checker, types - emitted[checker])
    for checker, types in emitted.items():
        if checker in tabled:
            assert types <= tabled[checker], (checker, types - tabled[checker])


# --------------------------------------------------------------------------- §5 acquire


def acquired(s: Scenario, owner: str = "agent-a", at_ms: int = 1_000, lease: int = 60_000) -> tuple[dict, dict]:
    rec = s.call(1, "acquire", s.acquire(owner, FREE, lease), at_ms)
    return rec, claim_of(rec)


def published(s: Scenario) -> tuple[dict, dict]:
    """agent-a holds the item and publishes over the seed at +2 s: (request, completion)."""
    acquired(s)
    req = s.publish("pub_a_1", "agent-a", "1", s.seed_rev(), "a one")
    return req, s.call(1, "publish", req, 2_000)


def test_false_claim_held():
    s = Scenario()
    a, claim = acquired(s)
    rel = s.call(1, "release", s.release("agent-a", claim), 5_000)
    b = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": None}), 6_000)
    all_valid(s)
    # the backend refuses b with claim-held although the record it shows is released
    reply(b, surface_error("acquire", Code.CLAIM_HELD, env(rel)["result"]["read_back"] | {"observed_at": at(6_000)}))
    named(s, "decisions", "false-claim-held", idx(b))


def test_false_claim_conflict():
    s = Scenario()
    a, claim = acquired(s, lease=2_000)
    b = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": claim}), 9_000)  # takeover
    all_valid(s)
    shown = {**s.key(), "observed_at": at(9_000), "last_epoch": "1", "active": claim}  # = the witness
    reply(b, surface_error("acquire", Code.CLAIM_CONFLICT, shown))
    named(s, "decisions", "false-claim-conflict", idx(b))


def test_early_takeover():
    s = Scenario()
    a, claim = acquired(s)
    held = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": claim}), 30_000)
    assert env(held)["error"]["code"] == "claim-held"
    all_valid(s)
    b2 = {"owner_id": "agent-b", "epoch": "2", "issued_at": at(30_000), "expires_at": at(90_000)}
    rb = {**s.key(), "observed_at": at(30_000), "last_epoch": "2", "active": b2}
    held["type"], held["value"] = "ok", {"exit": 0, "envelope": {
        "ok": True, "namespace": "work-claim", "command": "acquire", "contract_version": 1, "state": "committed",
        "result": {"claim": b2, "read_back": rb}}}
    named(s, "dual_ownership", "early-takeover", idx(held))


def test_wrong_rule_dual_ownership_names_the_cas_witness_when_the_holder_had_released():
    """Issue 11: the acquire over a released holder broke §5 step 1 (its witness
    was stale), not step 2; the explanation must not say "must return claim-held"."""
    s = Scenario()
    a, claim = acquired(s)
    rel = s.call(1, "release", s.release("agent-a", claim), 5_000)
    stale = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": claim}), 6_000)
    assert env(stale)["error"]["code"] == "claim-conflict"
    all_valid(s)
    b2 = {"owner_id": "agent-b", "epoch": "2", "issued_at": at(6_000), "expires_at": at(66_000)}
    stale["type"], stale["value"] = "ok", {"exit": 0, "envelope": {
        "ok": True, "namespace": "work-claim", "command": "acquire", "contract_version": 1, "state": "committed",
        "result": {"claim": b2, "read_back": {**s.key(), "observed_at": at(6_000), "last_epoch": "2",
                                               "active": b2}}}}
    r = default_checkers()["dual_ownership"](s.history, s.ctx())
    assert "early-takeover" not in {x["type"] for x in r["anomalies"]}
    a = named(s, "dual_ownership", "witness-mismatch-accepted", idx(rel, stale))
    assert "step 1" in a["explanation"] and "claim-held" not in a["explanation"]


def test_false_epoch_exhausted():
    s = Scenario()
    a, _ = acquired(s, lease=2_000)
    b = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": claim_of(a)}), 9_000)
    all_valid(s)
    reply(b, surface_error("acquire", Code.EPOCH_EXHAUSTED, env(b)["result"]["read_back"] | {
        "last_epoch": "1", "active": claim_of(a)}))
    named(s, "decisions", "false-epoch-exhausted", idx(b))


# --------------------------------------------------------------------------- §5 renew / release


def test_false_claim_expired_and_renew_after_expiry():
    s = Scenario()
    a, claim = acquired(s, lease=10_000)
    r = s.call(1, "renew", s.renew("agent-a", claim, 10_000), 5_000)
    late = s.call(1, "renew", s.renew("agent-a", claim_of(r), 10_000), 20_000)
    assert env(late)["error"]["code"] == "claim-expired"
    all_valid(s)
    early = copy.deepcopy(s.history)
    # a renew refused as expired while the matching claim was live
    reply(r, surface_error("renew", Code.CLAIM_EXPIRED, {**s.key(), "observed_at": at(5_000), "last_epoch": "1",
                                                        "active": claim}))
    named(s, "decisions", "false-claim-expired", idx(r))
    # a renew accepted after the expiry it names (equality is expired)
    s.rec.history = early
    late, r = s.history[late["index"]], s.history[r["index"]]
    renewed = dict(claim_of(r), expires_at=at(30_000))
    late["type"], late["value"] = "ok", {"exit": 0, "envelope": {
        "ok": True, "namespace": "work-claim", "command": "renew", "contract_version": 1, "state": "committed",
        "result": {"claim": renewed, "read_back": {**s.key(), "observed_at": at(20_000), "last_epoch": "1",
                                                    "active": renewed}}}}
    named(s, "decisions", "renew-after-expiry", idx(late))


def test_false_claim_conflict_on_renew():
    s = Scenario()
    a, claim = acquired(s)
    r = s.call(1, "renew", s.renew("agent-a", claim), 5_000)
    all_valid(s)
    reply(r, surface_error("renew", Code.CLAIM_CONFLICT, {**s.key(), "observed_at": at(5_000), "last_epoch": "1",
                                                         "active": claim}))
    named(s, "decisions", "false-claim-conflict", idx(r))


# --------------------------------------------------------------------------- §4, §8 unchanged means unchanged


def test_unchanged_lie_on_acquire_exit_6():
    """Issue 11 (classification): exit 6 clock-floor-persistence-failed with
    state unchanged is a definite fail; answered after a commit that
    survived, it is caught by the rule it broke."""
    s = Scenario()
    a, _ = acquired(s)
    read = s.call(2, "read", s.key(), 2_000)
    all_valid(s)
    reply(a, surface_error("acquire", Code.CLOCK_FLOOR_PERSISTENCE_FAILED, s.key()))
    assert a["type"] == "fail"
    named(s, "durability", "failed-acquire-took-effect", idx(a, read))
    assert default_checkers()["linearizable"](s.history, s.ctx())["valid"] is False


def test_unchanged_lie_on_release():
    s = Scenario()
    a, claim = acquired(s)
    rel = s.call(1, "release", s.release("agent-a", claim), 5_000)
    read = s.call(2, "read", s.key(), 6_000)
    all_valid(s)
    reply(rel, surface_error("release", Code.CLAIM_STORE_UNAVAILABLE, {"reason": "coordinator-unreachable"}))
    named(s, "durability", "unchanged-reply-took-effect", idx(rel, read))


def test_unchanged_lie_on_publish():
    s = Scenario()
    req, p = published(s)
    pread = s.call(2, "publication-read", {"operation_id": "pub_a_1", **s.key()}, 3_000)
    all_valid(s)
    reply(p, publication_error(Code.CLOCK_FLOOR_PERSISTENCE_FAILED, s.key(), operation_id="pub_a_1"))
    named(s, "durability", "unchanged-reply-took-effect", idx(p, pread))


# --------------------------------------------------------------------------- §6 publication


def test_false_fence_rejection():
    s = Scenario()
    req, p = published(s)
    all_valid(s)
    reply(p, publication_error(Code.CLAIM_FENCE_REJECTED, {
        **s.key(), "observed_at": at(2_000), "reason": "owner-mismatch", "supplied_owner_id": "agent-a",
        "supplied_epoch": "1", "active_owner_id": "agent-a", "active_epoch": "1"}, operation_id="pub_a_1"))
    named(s, "decisions", "false-fence-rejection", idx(p))


def _swapped_conflict(req: dict):
    """Issue 11's real-program finding: the conflict names the candidate as
    expected and the request's own expected revision as actual."""
    return publication_error(Code.LEDGER_REVISION_CONFLICT, {
        "ledger_namespace": req["ledger_namespace"], "item_id": req["item_id"],
        "expected_revision": req["candidate_sha256"], "actual_revision": req["expected_revision"]},
        operation_id=req["operation_id"])


def test_false_revision_conflict_returned():
    s = Scenario()
    req, p = published(s)
    all_valid(s)
    reply(p, _swapped_conflict(req))
    named(s, "decisions", "false-revision-conflict", idx(p))


def test_false_revision_conflict_against_the_known_revision():
    """The details look fine, but the item provably had the expected revision."""
    s = Scenario()
    req, p = published(s)
    all_valid(s)
    other = "sha256:" + "e" * 64
    reply(p, publication_error(Code.LEDGER_REVISION_CONFLICT, {
        **s.key(), "expected_revision": s.seed_rev(), "actual_revision": other}, operation_id="pub_a_1"))
    named(s, "decisions", "false-revision-conflict", idx(p))


def test_regression_stored_swapped_conflict_of_a_killed_publish_is_illegal():
    """Issue 11: a publish killed between intent and item write was later
    stored as a swapped ledger-revision-conflict while the item was unchanged
    (a later publish with the same expected revision succeeded). The run was
    valid: the claim model let an info publish store any failure."""
    s = Scenario()
    a, claim = acquired(s)
    req = s.publish("pub_a_1", "agent-a", "1", s.seed_rev(), "a one")
    s.rec.invoke(1, "publish", req)
    s.rec.lost(1, "publish", "worker killed between publish intent and item write")
    pread = s.call(2, "publication-read", {"operation_id": "pub_a_1", **s.key()}, 3_000)
    assert env(pread)["error"]["code"] == "operation-not-found"
    retry = s.publish("pub_a_2", "agent-a", "1", s.seed_rev(), "a two")
    s.call(1, "publish", retry, 4_000)
    all_valid(s)
    stored = _swapped_conflict(req)
    pread["type"], pread["value"] = "ok", {"exit": 0, "envelope": {
        "ok": True, "namespace": "ledger-publication", "command": "read", "contract_version": 1,
        "state": "committed", "operation_id": "pub_a_1", "result": {
            "operation_id": "pub_a_1", **s.key(), "operation_digest": _digest(req),
            "outcome": {"exit": stored.exit, "stdout": stored.envelope}}}}
    lin = default_checkers()["linearizable"](s.history, s.ctx())
    assert lin["valid"] is False, lin
    a = named(s, "decisions", "false-revision-conflict", [*idx(pread), pread["index"] - 3, pread["index"] - 2])
    assert "request's own expected revision" in a["explanation"]


def _digest(req: dict) -> str:
    from backends.contract.digests import operation_digest

    return operation_digest(req)


def test_wrong_rule_lost_update_through_a_later_read():
    """Issue 11: revision-chain-broken missed a lost update because the
    overwritten publish ended with a lost reply, although a later read proved
    it committed."""
    s = Scenario()
    a, claim = acquired(s)
    first = s.publish("pub_a_1", "agent-a", "1", s.seed_rev(), "a one")
    lost = s.call(1, "publish", first, 2_000, lost=True)
    pread = s.call(2, "publication-read", {"operation_id": "pub_a_1", **s.key()}, 3_000)
    assert pread["type"] == "ok"
    second = s.publish("pub_a_2", "agent-a", "1", first["candidate_sha256"], "a two")
    p2 = s.call(1, "publish", second, 4_000)
    all_valid(s)
    # the backend accepts the second publish against the seed: the first write is lost
    invoke_of(s, p2)["value"]["expected_revision"] = s.seed_rev()
    a = named(s, "stale_write", "revision-chain-broken", [lost["index"] - 1, lost["index"], *idx(pread, p2)])
    assert "later read" in a["explanation"]


# --------------------------------------------------------------------------- §4 floors, §2 epochs


def test_wrong_rule_epochs_leaves_a_clock_regression_to_floors():
    """Issue 11: epochs said epoch-decreased when a clock regression was the
    cause. Two acquires in epoch order whose decision times go back: the floor
    broke, the epochs did not."""
    s = Scenario()
    a, claim = acquired(s, at_ms=10_000, lease=1_000)
    b = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": claim}), 20_000)
    all_valid(s)
    for o in (env(b)["result"]["claim"], env(b)["result"]["read_back"]["active"]):
        o["issued_at"], o["expires_at"] = at(5_000), at(65_000)
    env(b)["result"]["read_back"]["observed_at"] = at(5_000)
    r = default_checkers()["epochs"](s.history, s.ctx())
    assert r["valid"] is True, r["anomalies"]
    named(s, "floors", "decision-time-regressed", idx(a, b))


def test_epoch_decreased_in_real_time():
    s = Scenario()
    a, claim = acquired(s, lease=1_000)
    b = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": claim}), 20_000)
    c = s.call(3, "acquire", s.acquire("agent-c", {"last_epoch": "2", "active": claim_of(b)}), 90_000)
    all_valid(s)
    for o in (env(c)["result"]["claim"], env(c)["result"]["read_back"]["active"]):
        o["epoch"] = "1"
    env(c)["result"]["read_back"]["last_epoch"] = "1"
    named(s, "epochs", "epoch-decreased", idx(b, c))


# --------------------------------------------------------------------------- §2 tuple identity, §7 legacy


def test_reply_for_another_tuple():
    s = Scenario(n_items=2)
    read = s.call(1, "read", s.key(0), 1_000)
    all_valid(s)
    env(read)["result"]["read_back"]["item_id"] = s.keys[1][1]
    named(s, "envelopes", "reply-for-another-tuple", idx(read))


def test_legacy_transition_over_an_active_claim():
    s = Scenario()
    a, claim = acquired(s)
    refused = s.call(2, "legacy-transition", s.key(), 2_000)
    assert env(refused)["error"]["code"] == "active-claim-write-refused"
    all_valid(s)
    permitted = copy.deepcopy(env(refused))
    permitted.update(ok=True, state="committed", result={"read_back": permitted.pop("error")["details"]})
    refused["type"], refused["value"] = "ok", {"exit": 0, "envelope": permitted}
    named(s, "decisions", "legacy-write-over-active-claim", idx(refused))


def test_false_legacy_refusal():
    s = Scenario()
    t = s.call(2, "legacy-transition", s.key(), 2_000)
    assert t["type"] == "ok"
    all_valid(s)
    reply(t, surface_error("legacy-transition", Code.ACTIVE_CLAIM_WRITE_REFUSED, env(t)["result"]["read_back"]))
    named(s, "decisions", "false-legacy-refusal", idx(t))


@pytest.mark.parametrize("rule", [r.id for r in RULES])
def test_every_rule_names_a_checker_that_runs_by_default(rule):
    (r,) = [x for x in RULES if x.id == rule]
    assert set(r.checks) <= set(default_checkers()) and r.section.startswith("§")
