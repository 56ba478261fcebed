"""The black-box findings: reply-protocol violations, Git finalization with the
final claim-verify, known deviations (acknowledged, shown, never hiding
anything else), and the latency scaling of slow programs."""

from __future__ import annotations

import pytest

import checkers
from checkers import known
from checkers.invariants import git_finalization, reply_protocol
from chaos import timing
from workloads.claims import ClaimsConfig

NS = "wbns_" + "a" * 32
ITEM = "wb_01Q474AK00K6XASESHCWPQXND0"
REV = "sha256:" + "1" * 64


def _h(*ops):
    out = []
    for i, op in enumerate(ops):
        out.append({"index": i, "time": i, **op})
    return out


def _pair(process, f, value, completion):
    return [{"process": process, "type": "invoke", "f": f, "value": value}, {"process": process, "f": f, **completion}]


EIO = {"op": "acquire", "argv": ["node", "x"], "exit": 1, "stdout": "", "stderr": "EIO: i/o error, fsync\n",
       "problem": "stdout is not one line ending in LF"}


def test_a_process_that_exits_on_its_own_without_a_reply_is_a_finding():
    h = _h(*_pair(0, "acquire", {"ledger_namespace": NS, "item_id": ITEM},
                  {"type": "info", "error": "reply protocol violated", "protocol": EIO}))
    r = reply_protocol.check(h, {})
    assert r["valid"] is False and r["anomalies"][0]["type"] == "reply-protocol"
    assert r["anomalies"][0]["data"]["exit"] == 1 and "EIO" in r["anomalies"][0]["data"]["stderr"]


def test_a_process_the_suite_killed_stays_plain_info():
    h = _h(*_pair(0, "acquire", {"ledger_namespace": NS, "item_id": ITEM},
                  {"type": "info", "error": "no reply: host process 5 exited with status -9"}))
    assert reply_protocol.check(h, {})["valid"] is True


def _publish_ok(process, op_id, rev=REV):
    return _pair(process, "publish", {"operation_id": op_id, "ledger_namespace": NS, "item_id": ITEM},
                 {"type": "ok", "value": {"exit": 0, "envelope": {"ok": True, "result": {"committed_revision": rev}}}})


def _commit(process, op_id, committed=True):
    return _pair(process, "commit", {"ledger_namespace": NS, "item_id": ITEM, "operation_id": op_id,
                                     "committed_revision": REV},
                 {"type": "ok", "value": {"exit": 0, "envelope": {"ok": True, "result": {
                     "committed": committed, "git_commit": "c1"}}}})


def _verify(process, publications, findings=()):
    return _pair(process, "verify", {"ledger_namespace": NS},
                 {"type": "ok", "value": {"exit": 0, "envelope": {"ok": True, "result": {
                     "findings": list(findings), "publications": publications}}}})


def test_a_committed_publication_must_be_finalized_with_its_bytes():
    good = [{"operation_id": "p1", "item_id": ITEM, "committed_revision": REV, "git_finalized": True,
             "git_commit": "c1"}]
    final = {"process": "nemesis", "type": "info", "f": "final-state",
             "value": {"durable": {"observed": ["ledgers"], "git": {"items": [
                 {"ledger_namespace": NS, "item_id": ITEM, "commit": "c1", "revision": REV}]}}}}
    h = _h(*_publish_ok(0, "p1"), *_commit(0, "p1"), *_verify(1, good), final)
    assert git_finalization.check(h, {})["valid"] is True
    unfinalized = [dict(good[0], git_finalized=False, git_commit=None)]
    r = git_finalization.check(_h(*_publish_ok(0, "p1"), *_commit(0, "p1"), *_verify(1, unfinalized)), {})
    assert [a["type"] for a in r["anomalies"]] == ["publication-not-finalized"]
    wrong_bytes = dict(final, value={"durable": {"git": {"items": [
        {"ledger_namespace": NS, "item_id": ITEM, "commit": "c1", "revision": "sha256:" + "2" * 64}]}}})
    r = git_finalization.check(_h(*_publish_ok(0, "p1"), *_commit(0, "p1"), *_verify(1, good), wrong_bytes), {})
    assert [a["type"] for a in r["anomalies"]] == ["finalized-bytes-differ"]
    r = git_finalization.check(_h(*_publish_ok(0, "p1"), *_verify(1, [])), {})
    assert [a["type"] for a in r["anomalies"]] == ["acknowledged-publication-unlisted"]
    r = git_finalization.check(_h(*_verify(1, [], findings=[{"code": "stale-write-detected", "item_id": ITEM}])), {})
    assert r["anomalies"][0]["type"] == "claim-verify-finding"
    # superseded: its agent never committed its bytes; not finalized is then no finding
    r = git_finalization.check(_h(*_publish_ok(0, "p1"), *_commit(0, "p1", committed=False), *_verify(1, unfinalized)), {})
    assert r["valid"] is True


def test_a_commit_that_holds_a_later_publications_bytes_owes_no_finalization_to_this_one():
    """The program wrote a later publication over the item file between the agent's check of its bytes
    and its ``git add`` (it does not take the agents' lock): that commit holds the later bytes. Its reply
    says so (``committed: false`` with the commit made; before, ``committed: true`` with the other
    ``head_revision``); either way p1 was never in HEAD and is owed no finalization, and the commit
    still moved HEAD for the item (a mover, so a verify racing it is not held to p2 either)."""
    rev2 = "sha256:" + "2" * 64
    p1 = {"operation_id": "p1", "item_id": ITEM, "committed_revision": REV, "git_finalized": False, "git_commit": None}

    def commit_holding(result):
        return _pair(0, "commit", {"ledger_namespace": NS, "item_id": ITEM, "operation_id": "p1",
                                   "committed_revision": REV},
                     {"type": "ok", "value": {"exit": 0, "envelope": {"ok": True, "result": result}}})
    for result in ({"committed": True, "git_commit": "c1", "head_revision": rev2},
                   {"committed": False, "reason": "superseded", "git_commit": "c1", "head_revision": rev2}):
        r = git_finalization.check(_h(*_publish_ok(0, "p1"), *commit_holding(result), *_verify(1, [p1])), {})
        assert r["valid"] is True, (result, r["anomalies"])
    # its own bytes: owed, as before
    own = {"committed": True, "git_commit": "c1", "head_revision": REV}
    r = git_finalization.check(_h(*_publish_ok(0, "p1"), *commit_holding(own), *_verify(1, [p1])), {})
    assert [a["type"] for a in r["anomalies"]] == ["publication-not-finalized"]


def test_a_program_that_finalizes_only_at_claim_verify_is_no_false_alarm():
    """Contract §6: claim-verify finalizes a publication "When HEAD contains
    the committed revision"; finalizing on the next publish too is the shipped
    Wowbagger release's choice, not the contract's. Two agents publish and
    commit the same item before either runs its claim-verify: HEAD holds p2's
    bytes when the verifies run, so a program that finalizes only in
    claim-verify never finalizes p1 - correctly."""
    def pub(op_id, rev):
        return {"operation_id": op_id, "item_id": ITEM, "committed_revision": rev}
    rev2 = "sha256:" + "2" * 64
    p1 = dict(pub("p1", REV), git_finalized=False, git_commit=None)
    p2 = dict(pub("p2", rev2), git_finalized=True, git_commit="c2")
    raced = _h(*_publish_ok(0, "p1"), *_commit(0, "p1"), *_publish_ok(1, "p2", rev2), *_commit(1, "p2"),
               *_verify(0, [p1, p2]), *_verify(1, [p1, p2]), *_verify(2, [p1, p2]))
    r = git_finalization.check(raced, {})
    assert r["valid"] is True, r["anomalies"]
    assert r["stats"]["head_moved_before_verify"] == 1
    # a verify that ran while HEAD still held p1's bytes owed its finalization
    seen = _h(*_publish_ok(0, "p1"), *_commit(0, "p1"), *_verify(0, [p1]), *_publish_ok(1, "p2", rev2),
              *_commit(1, "p2"), *_verify(2, [p1, p2]))
    r = git_finalization.check(seen, {})
    assert [a["type"] for a in r["anomalies"]] == ["publication-not-finalized"]
    # a commit of the item still running while the verify read HEAD: it may have moved first
    overlapping = _h(*_publish_ok(0, "p1"), *_publish_ok(1, "p2", rev2), *_commit(0, "p1"), _commit(1, "p2")[0],
                     *_verify(0, [p1]), _commit(1, "p2")[1], *_verify(2, [p1, p2]))
    assert git_finalization.check(overlapping, {})["valid"] is True


def test_the_final_verify_may_resolve_the_intent_of_a_publish_left_in_doubt():
    resolved = {"code": "pending-intent-resolved", "item_id": ITEM, "operation_id": "p1", "outcome": "unchanged"}
    unknown = {"type": "info", "value": {"exit": 6, "envelope": {"ok": False, "state": "unknown",
                                                                 "error": {"code": "publication-outcome-unknown"}}}}
    in_doubt = _pair(0, "publish", {"operation_id": "p1", "ledger_namespace": NS, "item_id": ITEM}, unknown)
    r = git_finalization.check(_h(*in_doubt, *_verify(1, [], findings=[resolved])), {})
    assert r["valid"] is True and r["stats"]["in_doubt_intents_reconciled"] == 1
    # answered for sure (here ok), the intent had no business staying pending
    r = git_finalization.check(_h(*in_doubt, *_publish_ok(0, "p1"), *_verify(1, [], findings=[resolved])), {})
    assert [a["type"] for a in r["anomalies"]] == ["claim-verify-finding", "acknowledged-publication-unlisted"]
    # another operation's intent is no excuse
    r = git_finalization.check(_h(*in_doubt, *_verify(1, [], findings=[dict(resolved, operation_id="p2")])), {})
    assert [a["type"] for a in r["anomalies"]] == ["claim-verify-finding"]


def test_a_final_verify_that_could_not_run_is_unknown():
    h = _h(*_pair(1, "verify", {"ledger_namespace": NS}, {"type": "info", "error": "timed out"}))
    assert git_finalization.check(h, {})["valid"] == "unknown"


DEV = {"id": "eio-exit-1", "anomaly": "reply-protocol", "match": {"exit": 1, "stderr": {"contains": "EIO"}},
       "reason": "EIO escapes as exit 1", "reference": "docs/wowbagger-findings.md"}


def test_a_known_deviation_is_shown_as_known_and_does_not_make_the_run_invalid():
    h = _h(*_pair(0, "acquire", {"ledger_namespace": NS, "item_id": ITEM},
                  {"type": "info", "error": "reply protocol violated", "protocol": EIO}))
    plain = checkers.run_checkers(h, {})
    assert plain["valid"] is False
    merged = checkers.run_checkers(h, {"known_deviations": [DEV]})
    rp = merged["checkers"]["reply_protocol"]
    others = {r["valid"] for name, r in merged["checkers"].items() if name != "reply_protocol"}
    assert rp["valid"] is True and rp["anomalies"] == [] and merged["valid"] is not False
    assert merged["valid"] == (True if others <= {True} else "unknown")
    assert rp["known"][0]["known"]["id"] == "eio-exit-1"
    assert merged["known_deviations"][0]["matched"] == 1


def test_an_acknowledgement_matching_nothing_is_reported_and_others_still_count():
    other = dict(EIO, exit=3, stderr="boom")
    h = _h(*_pair(0, "acquire", {"ledger_namespace": NS, "item_id": ITEM},
                  {"type": "info", "error": "x", "protocol": other}))
    merged = checkers.run_checkers(h, {"known_deviations": [DEV]})
    assert merged["valid"] is False    # not acknowledged: still a finding
    assert merged["known_deviations"][0]["unmatched"] is True


def _merged(**checker_anomalies):
    return {"valid": False, "checkers": {
        name: {"valid": False if anomalies else True, "anomalies": anomalies,
               "stats": {"anomalies_total": len(anomalies)}}
        for name, anomalies in checker_anomalies.items()}}


F4 = {"id": "F4", "anomaly": "false-revision-conflict", "reason": "known"}
F4_LIN = {"id": "F4-lin", "anomaly": "nonlinearizable", "within": "F4", "reason": "what F4 causes"}


def test_a_consequence_is_known_only_on_the_ops_of_its_findings():
    f4 = {"type": "false-revision-conflict", "ops": [554, 555, 594, 601], "data": {}}
    caused = {"type": "nonlinearizable", "ops": [594, 601], "data": {}}
    merged = known.apply(_merged(decisions=[f4], linearizable=[caused]), [F4, F4_LIN])
    assert merged["valid"] is True and merged["checkers"]["linearizable"]["known"][0]["known"]["id"] == "F4-lin"
    assert {d["id"]: d["matched"] for d in merged["known_deviations"]} == {"F4": 1, "F4-lin": 1}
    assert merged["known_deviations"][1]["within"] == "F4"
    # the same type on one op more, or with no F4 finding in the run, is still a finding
    other = {"type": "nonlinearizable", "ops": [594, 602], "data": {}}
    merged = known.apply(_merged(decisions=[f4], linearizable=[caused, other]), [F4, F4_LIN])
    lin = merged["checkers"]["linearizable"]
    assert merged["valid"] is False and lin["anomalies"] == [other] and len(lin["known"]) == 1
    alone = known.apply(_merged(linearizable=[caused]), [F4, F4_LIN])
    assert alone["valid"] is False and alone["known_deviations"][1]["unmatched"] is True
    nothing = known.apply(_merged(decisions=[f4], linearizable=[{"type": "nonlinearizable", "ops": []}]), [F4, F4_LIN])
    assert nothing["checkers"]["linearizable"]["valid"] is False   # no ops: no evidence it is F4's


def test_a_capped_checker_stays_invalid_when_a_consequence_clears_its_list():
    f4 = {"type": "false-revision-conflict", "ops": [1, 2], "data": {}}
    merged = _merged(decisions=[f4], linearizable=[{"type": "nonlinearizable", "ops": [1, 2], "data": {}}])
    merged["checkers"]["linearizable"]["stats"]["anomalies_total"] = 2   # one more than it listed
    assert known.apply(merged, [F4, F4_LIN])["checkers"]["linearizable"]["valid"] is False


def test_matching_is_exact_on_type():
    a = {"type": "reply-protocol", "data": {"exit": True}}
    assert not known.matches({"anomaly": "reply-protocol", "match": {"exit": 1}}, a)   # True is not 1
    assert known.matches({"anomaly": "reply-protocol", "match": {"exit": True}}, a)


def test_a_fast_backend_is_never_scaled_and_a_slow_one_is():
    fast = timing.choose({"read_ms": 3.0, "decision_ms": 80.0}, None, lease_ms=1500, workers_default=10,
                         time_limit_default=30.0)
    assert (fast["scale"], fast["workers"], fast["time_limit"]) == (1.0, 10, 30.0)
    slow = timing.choose({"read_ms": 300.0, "decision_ms": 600.0}, None, lease_ms=1500, workers_default=10,
                         time_limit_default=30.0)
    assert slow["scale"] == round((1500 + timing.LEASE_MARGIN * 600) / 1500, 2)
    assert 6 <= slow["workers"] <= 10 and slow["time_limit"] == timing.MAX_TIME_LIMIT_S
    claims = timing.scaled_claims({}, slow["scale"], ClaimsConfig())
    margin = claims["lease_ms"] - 1500
    assert margin == timing.LEASE_MARGIN * 600 and claims["work_ms"] == (100, 2000 + margin - 600)   # less the renew
    assert timing.scaled_claims({"lease_ms": 900}, 2.0, ClaimsConfig())["lease_ms"] == 900   # the user's value stays
    given = timing.choose(None, 2.5, lease_ms=1500, workers_default=10, time_limit_default=30.0)
    assert given["scale"] == 2.5


def test_known_findings_are_shown_in_report_html_and_junit(tmp_path):
    import json as _json

    from chaos import reports

    h = _h(*_pair(0, "acquire", {"ledger_namespace": NS, "item_id": ITEM},
                  {"type": "info", "error": "reply protocol violated", "protocol": EIO}))
    merged = checkers.run_checkers(h, {"known_deviations": [DEV, dict(DEV, id="stale-ack", anomaly="nothing-like-it"),
                                                            dict(F4_LIN, within="eio-exit-1")]})
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.jsonl").write_text("".join(_json.dumps(o) + "\n" for o in h))
    results = {"schema_version": 1, "test": {"name": "t", "backend": "external", "workload": "claims", "nemesis": [],
                                            "workers": 1, "time_limit": 1.0, "seed": 1, "command": "chaos run"},
               "capabilities": None, "verdict": "valid", "exit_code": 0, "checkers": merged["checkers"],
               "fault_coverage": {}, "stats": {"ops": 1, "ok": 0, "fail": 0, "info": 1, "duration_s": 0.0},
               "notes": [], "known_deviations": merged["known_deviations"]}
    (run / "results.json").write_text(_json.dumps(results))
    reports.write_all(str(run))
    html = (run / "report.html").read_text()
    assert 'id="known-deviations"' in html and "eio-exit-1" in html and "0 (unused acknowledgement)" in html
    assert "nonlinearizable (within eio-exit-1)" in html
    junit = (run / "junit.xml").read_text()
    assert 'name="known:eio-exit-1"' in junit and "known (eio-exit-1): reply-protocol" in junit
    assert "<failure" not in junit


def test_a_run_whose_final_durable_check_could_not_run_is_unknown_never_valid():
    from types import SimpleNamespace

    from chaos.nemesis import Coverage
    from chaos.runner import Run, RunConfig
    from chaos.workload_kinds.base import WorkloadKind

    class AllValid(WorkloadKind):  # every checker passed: only the final phase can make the run unknown
        name = "claims"

        def ctx(self, cfg, world, capabilities):
            return {}

        def check(self, ops, ctx):
            return {"valid": True, "checkers": {"x": {"valid": True, "anomalies": [], "stats": {}}}}

    cfg = RunConfig(seed=1, workers=1)
    r = Run(cfg)
    ops = [{"process": 0, "type": "invoke", "f": "read", "time": 1},   # a run with no op at all is unknown anyway
           {"process": 0, "type": "ok", "f": "read", "time": 2}]
    clean = r._results(cfg, SimpleNamespace(path="/x"), ops, Coverage([]), None, "t", [], None, AllValid())
    assert clean["verdict"] == "valid"
    r.final_incomplete.append("final durable export failed: RuntimeError: boom")
    out = r._results(cfg, SimpleNamespace(path="/x"), ops, Coverage([]), None, "t", [], None, AllValid())
    assert out["verdict"] == "unknown" and out["exit_code"] == 2
    assert any("could not run" in n and "boom" in n for n in out["notes"])
