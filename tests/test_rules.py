"""One hand-written valid history and one invalid history per contract rule
(checkers.rules.RULES): the valid one passes every checker, the invalid one is
named by the rule's own invariant, citing the section, with exactly the
minimal ops. Histories are real reference-backend replies (``Scenario``),
then one reply is changed the way a broken backend would answer.

Also here: the regression tests of issue 11's findings (the misses and the
wrong rules), each named after what it pins."""

from __future__ import annotations

import base64
import copy
import hashlib
import re
from pathlib import Path

import pytest
from test_invariants_support import T0, Scenario, claim_of, ledger_bytes

from backends.contract import (
    Code, claim_success, format_instant, legacy_success, publication_error, publication_success, surface_error,
)
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

#: rule id -> the tests below that write its valid and invalid history
COVERED: dict[str, list[str]] = {}


def covers(rule_id: str):
    """Registers a test as one rule's valid + invalid history (a test at the end
    keeps every rule of ``RULES`` covered)."""
    assert rule_id in {r.id for r in RULES}, rule_id

    def mark(fn):
        COVERED.setdefault(rule_id, []).append(fn.__name__)
        return fn
    return mark


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


@covers("acquire-held")
def test_false_claim_held():
    s = Scenario()
    a, claim = acquired(s)
    rel = s.call(1, "release", s.release("agent-a", claim), 5_000)
    b = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": None}), 6_000)
    all_valid(s)
    # the backend refuses b with claim-held although the record it shows is released
    reply(b, surface_error("acquire", Code.CLAIM_HELD, env(rel)["result"]["read_back"] | {"observed_at": at(6_000)}))
    named(s, "decisions", "false-claim-held", idx(b))


@covers("acquire-witness")
def test_false_claim_conflict():
    s = Scenario()
    a, claim = acquired(s, lease=2_000)
    b = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": claim}), 9_000)  # takeover
    all_valid(s)
    shown = {**s.key(), "observed_at": at(9_000), "last_epoch": "1", "active": claim}  # = the witness
    reply(b, surface_error("acquire", Code.CLAIM_CONFLICT, shown))
    named(s, "decisions", "false-claim-conflict", idx(b))


@covers("acquire-held")
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


def granted(s: Scenario, rec: dict, owner: str, epoch: int, at_ms: int) -> None:
    """Rewrite the acquire completion ``rec`` as a grant of ``epoch`` at ``at_ms``
    (a 60-s lease), the way a backend that skipped a check would answer."""
    claim = {"owner_id": owner, "epoch": str(epoch), "issued_at": at(at_ms), "expires_at": at(at_ms + 60_000)}
    rec["type"], rec["value"] = "ok", {"exit": 0, "envelope": {
        "ok": True, "namespace": "work-claim", "command": "acquire", "contract_version": 1, "state": "committed",
        "result": {"claim": claim, "read_back": {**s.key(), "observed_at": at(at_ms), "last_epoch": str(epoch),
                                                  "active": claim}}}}


@covers("acquire-witness")
def test_wrong_rule_dual_ownership_names_the_cas_witness_when_the_holder_had_released():
    """Issue 11: the acquire over a released holder broke §5 step 1 (its witness
    was stale), not step 2; the explanation must not say "must return claim-held"."""
    s = Scenario()
    a, claim = acquired(s)
    rel = s.call(1, "release", s.release("agent-a", claim), 5_000)
    stale = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": claim}), 6_000)
    assert env(stale)["error"]["code"] == "claim-conflict"
    all_valid(s)
    granted(s, stale, "agent-b", 2, 6_000)
    r = default_checkers()["dual_ownership"](s.history, s.ctx())
    assert "early-takeover" not in {x["type"] for x in r["anomalies"]}
    a = named(s, "dual_ownership", "witness-mismatch-accepted", idx(rel, stale))
    assert "step 1" in a["explanation"] and "claim-held" not in a["explanation"]


@covers("acquire-witness")
def test_stale_witness_of_an_expired_item_is_named_by_the_witness_rule():
    """Issue 12 (witness-ignored on the CLI path): an acquire whose witness is a
    generation older than the record (a takeover happened since) and whose
    claim had expired anyway; a backend that ignores the witness grants it
    epoch last_epoch + 1 of the record. ``epochs`` sees only an epoch that is
    not the witness's + 1; the witness rule is what it broke (§5 step 1)."""
    s = Scenario()
    a, claim = acquired(s, lease=2_000)
    b = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": claim}, 2_000), 4_000)
    assert env(b)["ok"] is True
    stale = s.call(3, "acquire", s.acquire("agent-c", {"last_epoch": "1", "active": claim}), 9_000)
    assert env(stale)["error"]["code"] == "claim-conflict"
    all_valid(s)
    granted(s, stale, "agent-c", 3, 9_000)
    a = named(s, "dual_ownership", "witness-mismatch-accepted", idx(stale, b))
    assert a["data"]["shown_last_epoch"] == "2" and "step 1" in a["explanation"]


@covers("epoch-exhausted")
def test_false_epoch_exhausted():
    s = Scenario()
    a, _ = acquired(s, lease=2_000)
    b = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": claim_of(a)}), 9_000)
    all_valid(s)
    reply(b, surface_error("acquire", Code.EPOCH_EXHAUSTED, env(b)["result"]["read_back"] | {
        "last_epoch": "1", "active": claim_of(a)}))
    named(s, "decisions", "false-epoch-exhausted", idx(b))


# --------------------------------------------------------------------------- §5 renew / release


@covers("renew-release-cas")
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
    reply(late, claim_success("renew", {"claim": renewed, "read_back": {
        **s.key(), "observed_at": at(20_000), "last_epoch": "1", "active": renewed}}))
    named(s, "decisions", "renew-after-expiry", idx(late))


@covers("renew-release-cas")
def test_false_claim_conflict_on_renew():
    s = Scenario()
    a, claim = acquired(s)
    r = s.call(1, "renew", s.renew("agent-a", claim), 5_000)
    all_valid(s)
    reply(r, surface_error("renew", Code.CLAIM_CONFLICT, {**s.key(), "observed_at": at(5_000), "last_epoch": "1",
                                                         "active": claim}))
    named(s, "decisions", "false-claim-conflict", idx(r))


def _answer_stale_expiry_ok(s: Scenario, rec: dict, f: str, claim: dict, at_ms: int) -> None:
    """Answer ``rec`` (refused claim-conflict by the reference) the way a
    backend that ignores the expected expiry does: ok."""
    renewed = dict(claim, expires_at=at(at_ms + 10_000)) if f == "renew" else None
    result = {"read_back": {**s.key(), "observed_at": at(at_ms), "last_epoch": "1", "active": renewed}}
    if renewed is not None:
        result["claim"] = renewed
    reply(rec, claim_success(f, result))


@covers("renew-release-cas")
@pytest.mark.parametrize("f", ["renew", "release"])
def test_a_stale_expiry_accepted_after_a_renew_replaced_it(f):
    """The stale-expiry race: a renews (its expiry moves), then sends its
    old expiry again. Each reply alone looks fine; only the pair shows that
    the CAS ignored the expected expiry (§5 Renew, Release)."""
    s = Scenario()
    a, claim = acquired(s, lease=10_000)
    r = s.call(1, "renew", s.renew("agent-a", claim, 10_000), 2_000)
    stale = s.call(1, f, s.renew("agent-a", claim, 10_000) if f == "renew" else s.release("agent-a", claim), 3_000)
    assert env(stale)["error"]["code"] == "claim-conflict"
    all_valid(s)
    _answer_stale_expiry_ok(s, stale, f, claim_of(r), 3_000)
    found = named(s, "decisions", "stale-expiry-accepted", idx(r, stale))
    assert found["data"]["expected_expires_at"] == claim["expires_at"]


def test_a_stale_expiry_is_not_judged_when_a_renew_of_unknown_outcome_may_have_set_it_again():
    """A renew that ended info between the two could have set any expiry,
    the stale one included (a lease length chosen to land on it): no proof."""
    s = Scenario()
    a, claim = acquired(s, lease=10_000)
    r = s.call(1, "renew", s.renew("agent-a", claim, 10_000), 2_000)
    s.call(1, "renew", s.renew("agent-a", claim_of(r), 10_000), 2_500, lost=True)
    stale = s.call(1, "renew", s.renew("agent-a", claim, 10_000), 3_000)
    _answer_stale_expiry_ok(s, stale, "renew", claim_of(r), 3_000)
    result = default_checkers()["decisions"](s.history, s.ctx())
    assert "stale-expiry-accepted" not in {a["type"] for a in result["anomalies"]}, result["anomalies"]


# --------------------------------------------------------------------------- §4, §8 unchanged means unchanged


@covers("unchanged-means-unchanged")
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


@covers("unchanged-means-unchanged")
def test_unchanged_lie_on_release():
    s = Scenario()
    a, claim = acquired(s)
    rel = s.call(1, "release", s.release("agent-a", claim), 5_000)
    read = s.call(2, "read", s.key(), 6_000)
    all_valid(s)
    reply(rel, surface_error("release", Code.CLAIM_STORE_UNAVAILABLE, {"reason": "coordinator-unreachable"}))
    named(s, "durability", "unchanged-reply-took-effect", idx(rel, read))


@covers("unchanged-means-unchanged")
def test_unchanged_lie_on_publish():
    s = Scenario()
    req, p = published(s)
    pread = s.call(2, "publication-read", {"operation_id": "pub_a_1", **s.key()}, 3_000)
    all_valid(s)
    reply(p, publication_error(Code.CLOCK_FLOOR_PERSISTENCE_FAILED, s.key(), operation_id="pub_a_1"))
    named(s, "durability", "unchanged-reply-took-effect", idx(p, pread))


# --------------------------------------------------------------------------- §6 publication


@covers("fence")
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


@covers("revision")
def test_false_revision_conflict_returned():
    s = Scenario()
    req, p = published(s)
    all_valid(s)
    reply(p, _swapped_conflict(req))
    named(s, "decisions", "false-revision-conflict", idx(p))


@covers("revision")
def test_false_revision_conflict_against_the_known_revision():
    """The details look fine, but the item provably had the expected revision."""
    s = Scenario()
    req, p = published(s)
    all_valid(s)
    other = "sha256:" + "e" * 64
    reply(p, publication_error(Code.LEDGER_REVISION_CONFLICT, {
        **s.key(), "expected_revision": s.seed_rev(), "actual_revision": other}, operation_id="pub_a_1"))
    named(s, "decisions", "false-revision-conflict", idx(p))


@covers("revision")
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


@covers("revision")
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


@covers("floor-monotonic")
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


@covers("epoch-never-reused")
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


@covers("tuple-identity")
def test_reply_for_another_tuple():
    s = Scenario(n_items=2)
    read = s.call(1, "read", s.key(0), 1_000)
    all_valid(s)
    env(read)["result"]["read_back"]["item_id"] = s.keys[1][1]
    named(s, "envelopes", "reply-for-another-tuple", idx(read))


@covers("legacy-transition")
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


@covers("legacy-transition")
def test_false_legacy_refusal():
    s = Scenario()
    t = s.call(2, "legacy-transition", s.key(), 2_000)
    assert t["type"] == "ok"
    all_valid(s)
    reply(t, surface_error("legacy-transition", Code.ACTIVE_CLAIM_WRITE_REFUSED, env(t)["result"]["read_back"]))
    named(s, "decisions", "false-legacy-refusal", idx(t))


# --------------------------------------------------------------------------- §2 epochs and owners


def _same_epoch_twice(s: Scenario) -> tuple[dict, dict]:
    """agent-a takes epoch 1 (2 s lease); agent-b takes over after expiry with epoch 2."""
    a, claim = acquired(s, lease=2_000)
    b = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": claim}), 9_000)
    assert claim_of(b)["epoch"] == "2"
    return a, b


def _set_epoch(rec: dict, epoch: str, last_epoch: str | None = None) -> None:
    result = env(rec)["result"]
    result["claim"]["epoch"] = result["read_back"]["active"]["epoch"] = epoch
    result["read_back"]["last_epoch"] = last_epoch or epoch


@covers("epoch-one-owner")
def test_two_owners_under_one_epoch():
    s = Scenario()
    a, b = _same_epoch_twice(s)
    all_valid(s)
    _set_epoch(b, "1")  # the takeover hands out agent-a's epoch again, to agent-b
    named(s, "dual_ownership", "two-owners-one-epoch", idx(a, b))
    named(s, "epochs", "epoch-reused", idx(a, b))


@covers("epoch-never-reused")
def test_epoch_reallocated():
    s = Scenario()
    a, b = _same_epoch_twice(s)
    all_valid(s)
    _set_epoch(b, "1")
    named(s, "epochs", "epoch-reallocated", idx(a, b))


@covers("acquire-next-epoch")
def test_epoch_not_next():
    s = Scenario()
    a, b = _same_epoch_twice(s)
    all_valid(s)
    _set_epoch(b, "3")  # witness last_epoch 1: the next epoch is 2
    named(s, "epochs", "epoch-not-next", idx(b))


@covers("active-epoch")
def test_active_epoch_is_last_epoch():
    s = Scenario()
    a, _ = acquired(s)
    all_valid(s)
    env(a)["result"]["read_back"]["last_epoch"] = "2"
    named(s, "epochs", "epoch-readback-mismatch", idx(a))


@covers("read-back-exact")
def test_read_back_shows_an_expiry_nobody_set():
    s = Scenario()
    a, claim = acquired(s)
    read = s.call(2, "read", s.key(), 5_000)
    all_valid(s)
    env(read)["result"]["read_back"]["active"]["expires_at"] = at(90_000)  # the acquire set 61 s
    named(s, "epochs", "read-back-not-durable", idx(a, read))


@covers("unchanged-means-unchanged")
def test_an_expiry_a_refused_renew_set_is_that_refusal_taking_effect():
    """A renew refused with exit 6 (Wowbagger's F5: its journal fsync failed after the line was written),
    then a read shows the expiry that renew would have set: durability names the refusal that took
    effect; epochs does not also call the read-back not durable (it is durable: the refusal was not)."""
    s = Scenario()
    a, claim = acquired(s)
    renew = s.call(1, "renew", s.renew("agent-a", claim, 120_000), 3_000)
    assert renew["type"] == "ok"
    renew["type"], renew["value"] = "fail", {"exit": 6, "envelope": {
        "ok": False, "namespace": "work-claim", "command": "renew", "contract_version": 1, "state": "unchanged",
        "error": {"code": "clock-floor-persistence-failed",
                  "message": "The authoritative clock floor could not be persisted.", "details": {}}}}
    read = s.call(2, "read", s.key(), 5_000)
    assert env(read)["result"]["read_back"]["active"]["expires_at"] == at(123_000)
    found = named(s, "durability", "unchanged-reply-took-effect", idx(renew, read))
    assert found["data"]["f"] == "renew" and found["data"]["code"] == "clock-floor-persistence-failed"
    assert default_checkers()["epochs"](s.history, s.ctx())["valid"] is True


# --------------------------------------------------------------------------- §4 leases and decision times


@covers("lease-active-while")
def test_overlapping_leases():
    s = Scenario()
    a, claim = acquired(s)
    b = s.call(2, "acquire", s.acquire("agent-b", FREE), 30_000)  # stale witness: claim-conflict
    assert env(b)["error"]["code"] == "claim-conflict"
    all_valid(s)
    b2 = {"owner_id": "agent-b", "epoch": "2", "issued_at": at(30_000), "expires_at": at(90_000)}
    b["type"], b["value"] = "ok", {"exit": 0, "envelope": {
        "ok": True, "namespace": "work-claim", "command": "acquire", "contract_version": 1, "state": "committed",
        "result": {"claim": b2, "read_back": {**s.key(), "observed_at": at(30_000), "last_epoch": "2",
                                               "active": b2}}}}
    named(s, "dual_ownership", "overlapping-leases", idx(a, b))


@covers("times-from-decision")
def test_issued_at_and_expiry_come_from_the_decision_time():
    s = Scenario()
    a, claim = acquired(s)
    r = s.call(1, "renew", s.renew("agent-a", claim, 10_000), 5_000)
    all_valid(s)
    for o in (env(a)["result"]["claim"], env(a)["result"]["read_back"]["active"]):
        o["issued_at"] = at(900)  # decided at +1 s
    named(s, "floors", "issued-at-not-decision-time", idx(a))
    for o in (env(r)["result"]["claim"], env(r)["result"]["read_back"]["active"]):
        o["expires_at"] = at(16_000)  # +5 s + 10 s is 15 s
    named(s, "floors", "expiry-not-from-decision-time", idx(r))


# --------------------------------------------------------------------------- §3 capabilities


def _with_capabilities(spec: dict | None = None) -> tuple[Scenario, dict]:
    """A scenario whose capability replies are in the history (not in ctx): findings name them."""
    s = Scenario(spec=spec)
    caps = s.call(1, "capabilities", {}, 0)
    s.caps = None
    return s, caps


def _work_claim(caps: dict) -> dict:
    return env(caps)["result"]["operations"]["work_claim"]


@covers("capabilities-stable")
def test_capabilities_changed():
    s, caps = _with_capabilities()
    acquired(s)
    again = s.call(2, "capabilities", {}, 2_000)
    all_valid(s)
    _work_claim(again)["fencing_enforced_at"] = "none"
    named(s, "capability_honesty", "capabilities-changed", idx(caps, again))


@covers("fenced-profile")
def test_fenced_profile_inconsistent_and_unknown_mode():
    s, caps = _with_capabilities()
    acquired(s)
    all_valid(s)
    _work_claim(caps)["write_paths"] = {**_work_claim(caps)["write_paths"], "alternate": "direct-file-write"}
    named(s, "capability_honesty", "fenced-profile-inconsistent", idx(caps))
    _work_claim(caps).update(mode="exclusive", safe_exclusive_dispatch=False)
    named(s, "capability_honesty", "unknown-capability-mode", idx(caps))


@covers("fenced-promise")
def test_fenced_but_unsafe():
    s, caps = _with_capabilities()
    a, req, p = _stale_publish(s)
    all_valid(s)
    _accept_stale(s, req, p)
    named(s, "capability_honesty", "fenced-but-unsafe", [*idx(caps), *idx(a, p)])


@covers("advisory-refuses")
def test_advisory_publishes_and_claims_safety():
    s, caps = _with_capabilities({"profile": "advisory"})
    assert _work_claim(caps)["mode"] == "advisory"
    acquired(s)
    req = s.publish("pub_a_1", "agent-a", "1", s.seed_rev(), "a one")
    p = s.call(1, "publish", req, 2_000)
    assert env(p)["error"]["code"] == "capability-unavailable"
    all_valid(s)
    early = copy.deepcopy(s.history)
    reply(p, _swapped_conflict(req))  # an advisory endpoint judged the revision: it got past §3
    named(s, "capability_honesty", "advisory-published", idx(caps, p))
    s.rec.history = early
    _work_claim(s.history[caps["index"]])["safe_exclusive_dispatch"] = True
    named(s, "capability_honesty", "advisory-claims-safety", idx(caps))


@covers("merge-not-exclusive")
def test_merge_coordinated_claims_exclusive():
    s, caps = _with_capabilities({"profile": "merge-coordinated"})
    assert _work_claim(caps)["mode"] == "merge-coordinated"
    published(s)
    all_valid(s)
    _work_claim(caps)["safe_exclusive_dispatch"] = True
    named(s, "capability_honesty", "merge-coordinated-claims-exclusive", idx(caps))


# --------------------------------------------------------------------------- §6 fence, bytes, idempotency, outcomes


def _stale_publish(s: Scenario) -> tuple[dict, dict, dict]:
    """agent-a's 2 s lease has expired when it publishes at +5 s: claim-fence-rejected."""
    a, claim = acquired(s, lease=2_000)
    req = s.publish("pub_a_1", "agent-a", "1", s.seed_rev(), "a one")
    p = s.call(1, "publish", req, 5_000)
    assert env(p)["error"]["code"] == "claim-fence-rejected"
    return a, req, p


def _accept_stale(s: Scenario, req: dict, p: dict) -> None:
    """The backend accepts the stale publish, showing the expired claim it decided on."""
    rb = {**s.key(), "observed_at": at(5_000), "last_epoch": "1", "active": {
        "owner_id": "agent-a", "epoch": "1", "issued_at": at(1_000), "expires_at": at(3_000)}}
    reply(p, publication_success(req["operation_id"], {
        **s.key(), "committed_revision": req["candidate_sha256"], "claim_fence": req["claim_fence"],
        "claim_read_back": rb}))


@covers("fence")
def test_stale_fence_accepted():
    s = Scenario()
    a, req, p = _stale_publish(s)
    all_valid(s)
    _accept_stale(s, req, p)
    named(s, "stale_write", "stale-fence-accepted", idx(a, p))


@covers("exact-bytes")
def test_committed_revision_is_the_candidate():
    s = Scenario()
    req, p = published(s)
    all_valid(s)
    env(p)["result"]["committed_revision"] = "sha256:" + "e" * 64
    named(s, "stale_write", "committed-revision-mismatch", idx(p))
    named(s, "stale_write", "unaccepted-revision", idx(p))


@covers("exact-bytes")
def test_final_ledger_bytes_are_the_accepted_candidate():
    s = Scenario()
    req, p = published(s)
    fin = s.final()
    all_valid(s)
    (led,) = fin["value"]["durable"]["ledgers"]
    led["source_base64"] = base64.b64encode(b"bytes nobody published\n").decode()
    named(s, "stale_write", "ledger-bytes-mismatch", [fin["index"]])


@covers("complete-request")
def test_a_publish_without_its_complete_request_is_refused():
    s = Scenario()
    req, p = published(s)
    all_valid(s)
    # a retry that names its operation id but drops the fence, and the backend accepts it
    del invoke_of(s, p)["value"]["claim_fence"]
    named(s, "requests", "incomplete-request-accepted", idx(p))


@covers("canonical-request")
def test_a_request_with_a_noncanonical_value_is_refused_before_any_decision():
    # Wowbagger 0.1.0-alpha.7 checks a fence's owner_id only for a non-empty string, and its fence epoch
    # pattern admits 2^64 .. 18446744699999999999: both are decided (claim-fence-rejected, stored)
    s = Scenario()
    req, p = published(s)
    bad_owner = s.call(1, "publish", dict(req, operation_id="pub_a_2",
                                          claim_fence=dict(req["claim_fence"], owner_id="agent a!")), 3_000)
    wide = s.call(1, "publish", dict(req, operation_id="pub_a_3",
                                     claim_fence=dict(req["claim_fence"], epoch="18446744073709551616")), 3_100)
    assert {env(bad_owner)["error"]["code"], env(wide)["error"]["code"]} == {"invalid-request"}
    all_valid(s)   # the reference refuses both before deciding anything
    reply(wide, publication_error(Code.CLAIM_FENCE_REJECTED, {"reason": "epoch-mismatch"}, operation_id="pub_a_3"))
    a = named(s, "requests", "noncanonical-request-decided", idx(wide))
    assert a["data"]["pointer"] == "/claim_fence/epoch" and "18446744073709551616" in a["explanation"]
    s2 = Scenario()
    rec, _ = acquired(s2)
    invoke_of(s2, rec)["value"]["owner_id"] = "agent a!"   # answered as if it were canonical
    a = named(s2, "requests", "noncanonical-request-decided", idx(rec))
    assert a["data"]["pointer"] == "/owner_id" and a["data"]["op"] == "acquire" and a["data"]["code"] is None


@covers("refusal-keeps-floor")
def test_a_refusal_before_the_floor_step_leaves_the_floor():
    # Wowbagger 0.1.0-alpha.7 persists the floor before it validates the candidate: a ledger-invalid
    # publish decided at a pinned instant a day ahead leaves the namespace's time there
    s = Scenario()
    acquired(s)
    req = s.publish("pub_a_1", "agent-a", "1", s.seed_rev(), "a one")
    day = 86_400_000
    data = ledger_bytes(s.keys[0][1], "a one").replace(b"schema_version: 1", b"schema_version: 7")
    bad = dict(req, candidate_source_base64=base64.b64encode(data).decode(),
               candidate_sha256="sha256:" + hashlib.sha256(data).hexdigest())
    refused = s.call(1, "publish", bad, day)
    invoke_of(s, refused)["clock_ms"] = T0 + day    # what the worker records of a pinned call
    assert env(refused)["error"]["code"] == "ledger-invalid"
    after = s.call(1, "read", s.key(), 3_000)
    all_valid(s)   # the reference refused it before the floor step: the read shows +3 s
    env(after)["result"]["read_back"]["observed_at"] = at(day)
    a = named(s, "floors", "floor-moved-by-refusal", idx(refused, after))
    assert a["data"]["code"] == "ledger-invalid" and a["data"]["pinned"] == at(day)
    # an op that may persist a floor decided at that instant explains it: no finding
    other = s.call(2, "acquire", s.acquire("agent-b", FREE, k=0), 3_100)
    invoke_of(s, other)["clock_ms"] = T0 + day
    r = default_checkers()["floors"](s.history, s.ctx())
    assert not [x for x in r["anomalies"] if x["type"] == "floor-moved-by-refusal"]


@covers("candidate-digest")
def test_a_candidate_whose_bytes_miss_its_digest_is_refused():
    s = Scenario()
    req, p = published(s)
    all_valid(s)
    invoke_of(s, p)["value"]["candidate_sha256"] = "sha256:" + "e" * 64
    named(s, "requests", "candidate-digest-accepted", idx(p))


@covers("candidate-digest")
def test_a_bad_digest_answered_by_a_later_step_was_let_through():
    """Issue 12 (candidate-digest-unchecked behind the CLI, seed 2): the bad
    publish reached the fence after the lease ran out; claim-fence-rejected is
    step 7, and the first failure wins, so the digest (step 2) went unchecked.
    Same for an invalid candidate (step 5) answered by the fence."""
    def fenced_out():  # a publish under epoch 2 while epoch 1 is active: claim-fence-rejected
        s = Scenario()
        acquired(s)
        p = s.call(1, "publish", s.publish("pub_a_1", "agent-a", "2", s.seed_rev(), "a one"), 2_000)
        assert env(p)["error"]["code"] == "claim-fence-rejected"
        all_valid(s)
        return s, p

    s, p = fenced_out()
    invoke_of(s, p)["value"]["candidate_sha256"] = "sha256:" + "e" * 64
    a = named(s, "requests", "candidate-digest-accepted", idx(p))
    assert "claim-fence-rejected" in a["explanation"]
    s, p = fenced_out()
    other = ledger_bytes("other-item", "a one")
    invoke_of(s, p)["value"].update(candidate_source_base64=base64.b64encode(other).decode(),
                                    candidate_sha256="sha256:" + hashlib.sha256(other).hexdigest())
    named(s, "requests", "invalid-candidate-accepted", idx(p))


@covers("candidate-valid")
def test_a_candidate_that_is_not_the_requests_item_is_refused():
    s = Scenario()
    req, p = published(s)
    all_valid(s)
    # the bytes are a valid item, but another one: its id is not the request's item_id
    other = ledger_bytes("other-item", "a one")
    invoke_of(s, p)["value"].update(candidate_source_base64=base64.b64encode(other).decode(),
                                    candidate_sha256="sha256:" + hashlib.sha256(other).hexdigest())
    named(s, "requests", "invalid-candidate-accepted", idx(p))


@covers("idempotency")
def test_identical_retry_is_replayed_verbatim():
    s = Scenario()
    req, p = published(s)
    retry = s.call(2, "publish", req, 3_000)
    assert env(retry) == env(p)
    all_valid(s)
    early = copy.deepcopy(s.history)
    env(retry)["result"]["claim_read_back"]["observed_at"] = at(3_000)  # re-decided, not replayed
    named(s, "idempotence", "replay-differs", idx(p, retry))
    s.rec.history = early
    reply(s.history[retry["index"]], publication_error(Code.LEDGER_REVISION_CONFLICT, {
        **s.key(), "expected_revision": s.seed_rev(), "actual_revision": req["candidate_sha256"]},
        operation_id="pub_a_1"))
    named(s, "idempotence", "retry-not-replayed", idx(p, retry))


def test_a_retry_the_store_could_not_decide_is_not_a_missing_replay():
    # found by the default soak (sqlite seed 5): a replay during the fsync nemesis got exit 6
    # claim-store-unavailable ("no authoritative decision was possible and nothing changed", §8)
    s = Scenario()
    req, p = published(s)
    retry = s.call(2, "publish", req, 3_000)
    other = s.call(2, "publish", s.publish("pub_a_1", "agent-a", "1", s.seed_rev(), "a two"), 4_000)
    unavailable = publication_error(Code.CLAIM_STORE_UNAVAILABLE, {"reason": "database-unopenable"},
                                    operation_id="pub_a_1")
    reply(retry, unavailable)
    reply(other, unavailable)
    assert retry["type"] == other["type"] == "fail"
    all_valid(s)


def test_a_noncanonical_or_incomplete_request_the_store_could_not_decide_is_no_decision():
    # found by the default soak (postgres seed 17, 94b0433): an acquire whose owner_id was "agent p!" met
    # a server restart and got exit 6 claim-store-unavailable, "not a statement about the request" (§8)
    s = Scenario()
    req, p = published(s)
    rec = s.call(2, "acquire", s.acquire("agent-b", FREE), 2_500)
    decided = copy.deepcopy(rec)          # the reference: claim-conflict (its witness is stale)
    invoke_of(s, rec)["value"]["owner_id"] = "agent b!"
    reply(rec, surface_error("acquire", Code.CLAIM_STORE_UNAVAILABLE, {"reason": "coordinator-unreachable"}))
    bare = s.call(2, "publish", {"operation_id": "pub_a_1"}, 3_000)
    reply(bare, publication_error(Code.CLAIM_STORE_UNAVAILABLE, {"reason": "coordinator-unreachable"},
                                  operation_id="pub_a_1"))
    assert rec["type"] == bare["type"] == "fail"
    all_valid(s)
    rec.update(decided)                   # answered as if the owner were canonical: a decision
    assert env(rec)["error"]["code"] == "claim-conflict"
    named(s, "requests", "noncanonical-request-decided", idx(rec))


@covers("idempotency")
def test_different_request_under_a_stored_operation_id():
    s = Scenario()
    req, p = published(s)
    other = s.publish("pub_a_1", "agent-a", "1", req["candidate_sha256"], "a two")  # same id, other bytes
    conflict = s.call(1, "publish", other, 3_000)
    assert env(conflict)["error"]["code"] == "idempotency-conflict"
    all_valid(s)
    early = copy.deepcopy(s.history)
    det = env(conflict)["error"]["details"]
    det["actual_operation_digest"] = det["expected_operation_digest"]
    named(s, "idempotence", "idempotency-conflict-details", idx(conflict))
    s.rec.history = early
    conflict = s.history[conflict["index"]]
    reply(conflict, publication_success("pub_a_1", {
        **s.key(), "committed_revision": other["candidate_sha256"], "claim_fence": other["claim_fence"],
        "claim_read_back": env(p)["result"]["claim_read_back"] | {"observed_at": at(3_000)}}))
    named(s, "idempotence", "idempotency-conflict-missing", idx(p, conflict))
    named(s, "idempotence", "operation-id-bound-twice", idx(p, conflict))


@covers("idempotency")
def test_a_conflict_names_a_request_submitted_under_its_id():
    from backends.contract.digests import operation_digest
    s = Scenario()
    req, _p = published(s)
    fresh = s.publish("pub_a_2", "agent-a", "1", req["candidate_sha256"], "a two")  # an id never used
    rec = s.call(1, "publish", fresh, 3_000)
    all_valid(s)
    reply(rec, publication_error(Code.IDEMPOTENCY_CONFLICT, {
        "operation_id": "pub_a_2", "expected_operation_digest": operation_digest(req),
        "actual_operation_digest": operation_digest(fresh)}, operation_id="pub_a_2"))
    named(s, "idempotence", "idempotency-conflict-unbound", idx(rec))


@covers("outcome-durable")
def test_stored_outcome_stays_readable_and_exact():
    s = Scenario()
    req, p = published(s)
    pread = s.call(2, "publication-read", {"operation_id": "pub_a_1", **s.key()}, 3_000)
    fin = s.final()
    all_valid(s)
    early = copy.deepcopy(s.history)
    reply(pread, surface_error("publication-read", Code.OPERATION_NOT_FOUND,
                               {"operation_id": "pub_a_1", **s.key()}, operation_id="pub_a_1"))
    named(s, "durability", "publication-outcome-lost", idx(p, pread))
    s.rec.history = copy.deepcopy(early)
    stdout = env(s.history[pread["index"]])["result"]["outcome"]["stdout"]
    stdout["result"]["claim_read_back"]["observed_at"] = at(2_500)
    named(s, "idempotence", "publication-read-differs", idx(p, pread))
    s.rec.history = early
    (out,) = s.history[fin["index"]]["value"]["durable"]["publication_outcomes"]
    out["envelope"]["stdout"]["result"]["claim_read_back"]["observed_at"] = at(2_500)
    named(s, "idempotence", "stored-outcome-differs", [*idx(p), fin["index"]])


@covers("outcome-durable")
def test_an_outcome_unknown_is_never_a_stored_outcome():
    """Wowbagger's F3: a publish whose item write failed before its commit answered exit 6
    publication-outcome-unknown and stored that answer as the operation's outcome, so its read
    returns "unknown" for good (in the read and in the final durable state alike)."""
    s = Scenario()
    _req, _p = published(s)
    pread = s.call(2, "publication-read", {"operation_id": "pub_a_1", **s.key()}, 3_000)
    fin = s.final()
    all_valid(s)
    unknown = publication_error(Code.PUBLICATION_OUTCOME_UNKNOWN, {"operation_id": "pub_a_1", **s.key()},
                                operation_id="pub_a_1")
    env(s.history[pread["index"]])["result"]["outcome"] = {"exit": unknown.exit, "stdout": unknown.envelope}
    named(s, "idempotence", "unknown-outcome-stored", idx(pread))
    (out,) = s.history[fin["index"]]["value"]["durable"]["publication_outcomes"]
    out["envelope"] = {"exit": unknown.exit, "stdout": unknown.envelope}
    assert [a["ops"] for a in default_checkers()["idempotence"](s.history, s.ctx())["anomalies"]
            if a["type"] == "unknown-outcome-stored"] == [idx(pread), [fin["index"]]]


# --------------------------------------------------------------------------- §5, §6, §8 indeterminate ops


@covers("indeterminate-exact")
def test_an_indeterminate_release_cannot_be_undone():
    """agent-a's release is lost; a read shows it took effect; a later read shows
    the released claim active again. No instant for the release (or none at
    all) explains both reads: only the claim model can say so."""
    s = Scenario()
    a, claim = acquired(s)
    s.call(1, "release", s.release("agent-a", claim), 5_000, lost=True)
    r1 = s.call(2, "read", s.key(), 6_000)
    r2 = s.call(3, "read", s.key(), 7_000)
    assert env(r1)["result"]["read_back"]["active"] is None
    all_valid(s)
    env(r2)["result"]["read_back"]["active"] = claim
    r = run_checkers(s.history, s.ctx(), default_checkers())
    assert {n for n, c in r["checkers"].items() if c["valid"] is False} == {"linearizable"}, r
    named(s, "linearizable", "nonlinearizable", idx(r2))


# --------------------------------------------------------------------------- §7 legacy create, §8 envelopes


@covers("legacy-create")
def test_legacy_create_over_claim_history():
    s = Scenario()
    a, claim = acquired(s)
    s.call(1, "release", s.release("agent-a", claim), 2_000)
    create = s.call(2, "legacy-create", s.key(), 3_000)
    assert env(create)["error"]["code"] == "claimed-item-write-refused"
    all_valid(s)
    create["type"], create["value"] = "ok", {"exit": 0, "envelope": legacy_success(
        "create-v1", {"read_back": env(create)["error"]["details"]}).envelope}
    named(s, "decisions", "legacy-create-over-claim-history", idx(create))


@covers("envelope-exact")
def test_envelope_message_is_the_stable_one():
    s = Scenario()
    a, claim = acquired(s)
    held = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": claim}), 2_000)
    all_valid(s)
    env(held)["error"]["message"] = "Someone else holds it."
    named(s, "envelopes", "malformed-envelope", idx(held))


# --------------------------------------------------------------------------- durable state (§1, §4, §5, §6, §8)


@covers("epoch-never-reused")
def test_epoch_high_water_mark_is_durable():
    s = Scenario()
    a, claim = acquired(s)
    s.call(1, "release", s.release("agent-a", claim), 2_000)
    read = s.call(2, "read", s.key(), 3_000)
    fin = s.final()
    all_valid(s)
    env(read)["result"]["read_back"]["last_epoch"] = "0"  # the backend forgot epoch 1 (ABA ahead)
    named(s, "durability", "epoch-high-water-lost", idx(a, read))
    fin["value"]["durable"]["claims"][0]["last_epoch"] = "0"
    named(s, "durability", "final-epoch-lost", [*idx(a), fin["index"]])


@covers("unchanged-means-unchanged")
def test_epoch_consumed_silently():
    s = Scenario()
    a, claim = acquired(s)
    held = s.call(2, "acquire", s.acquire("agent-b", {"last_epoch": "1", "active": claim}), 2_000)
    read = s.call(2, "read", s.key(), 3_000)
    all_valid(s)
    for rec in (held, read):  # the refused acquire allocated epoch 2 nobody ever held
        shown = env(rec)["error"]["details"] if rec is held else env(rec)["result"]["read_back"]
        shown["last_epoch"] = "2"
    named(s, "durability", "epoch-consumed-silently", idx(held))


@covers("floor-monotonic")
def test_final_floor_covers_every_decision():
    s = Scenario()
    a, claim = acquired(s)
    rel = s.call(1, "release", s.release("agent-a", claim), 5_000)
    fin = s.final()
    all_valid(s)
    fin["value"]["durable"]["clock_floors"][0]["observed_at"] = at(2_000)
    named(s, "durability", "final-floor-lost", [*idx(rel), fin["index"]])


@covers("outcome-durable")
def test_final_state_holds_each_acknowledged_outcome_once():
    s = Scenario()
    req, p = published(s)
    pread = s.call(2, "publication-read", {"operation_id": "pub_a_1", **s.key()}, 3_000)
    fin = s.final()
    all_valid(s)
    early = copy.deepcopy(s.history)
    durable = fin["value"]["durable"]
    durable["publication_outcomes"] = []
    named(s, "durability", "final-outcome-missing", [*idx(p), fin["index"]])
    durable["publication_outcomes"] = early[fin["index"]]["value"]["durable"]["publication_outcomes"] * 2
    named(s, "idempotence", "duplicate-stored-outcome", [fin["index"]])
    s.rec.history = copy.deepcopy(early)
    (led,) = s.history[fin["index"]]["value"]["durable"]["ledgers"]
    led["revision"] = s.seed_rev()
    led["source_base64"] = base64.b64encode(ledger_bytes(s.keys[0][1], "seed")).decode()
    named(s, "durability", "final-revision-lost", [*idx(p), fin["index"]])
    s.rec.history = early
    env(s.history[pread["index"]])["result"]["operation_digest"] = "sha256:" + "d" * 64
    named(s, "idempotence", "publication-read-digest", idx(pread))



def test_every_rule_has_a_valid_and_an_invalid_history_here():
    assert set(COVERED) == {r.id for r in RULES}, sorted({r.id for r in RULES} - set(COVERED))


def test_every_anomaly_type_of_the_table_is_named_by_a_test_here():
    """Each type a rule lists is asserted, with its exact ops, by a ``named`` call above."""
    asserted = set(re.findall(r'named\(s, "[a-z_]+", "([a-z-]+)"', Path(__file__).read_text()))
    tabled = {t for r in RULES for types in r.checks.values() for t in types}
    assert tabled <= asserted, sorted(tabled - asserted)


@pytest.mark.parametrize("rule", [r.id for r in RULES])
def test_every_rule_names_a_checker_that_runs_by_default(rule):
    (r,) = [x for x in RULES if x.id == rule]
    assert set(r.checks) <= set(default_checkers()) and r.section.startswith("§")
