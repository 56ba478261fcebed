"""The workload-coverage gate: per contract path, attempted and completed; a
run whose requested paths never completed, or in which most operations ended
``info``, is ``unknown`` with the reason (never ``valid``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from chaos.reports.results_schema import validate_results
from chaos.runner import Run
from workloads.coverage import coverage, format_table, missing, plan_for

ROOT = Path(__file__).resolve().parents[1]
NS = "wbns_" + "a" * 32
ITEM = "wb_01Q4837BM01W70T30B184GG1R6"
T = "2030-01-11T09:00:00.000Z"


def rb(observed=T, active=None, last="1"):
    return {"ledger_namespace": NS, "item_id": ITEM, "observed_at": observed, "last_epoch": last, "active": active}


def history(*pairs):
    out = []
    for n, (inv, done) in enumerate(pairs):
        out.append(dict(inv, index=len(out), process=n, type="invoke", time=n))
        out.append(dict(done, index=len(out), process=n, f=inv["f"], time=n))
    return out


def test_a_path_counts_attempts_by_request_and_completions_by_reply():
    claim = {"owner_id": "a", "epoch": "1", "issued_at": T, "expires_at": "2030-01-11T09:00:01.000Z"}
    acquire = {"f": "acquire", "value": {"ledger_namespace": NS, "item_id": ITEM, "owner_id": "b", "lease_duration_ms": 5,
                                         "expected": {"last_epoch": "1", "active": claim}}}
    held = {"type": "fail", "value": {"exit": 4, "envelope": {"ok": False, "state": "unchanged",
                                                              "error": {"code": "claim-held", "details": rb(active=claim)}}}}
    probe = dict(acquire, intent="probe-takeover@-1:probe", clock_ms=1_894_352_400_999)
    late = dict(held, value={"exit": 4, "envelope": {"ok": False, "state": "unchanged", "error": {
        "code": "claim-held", "details": rb("2030-01-11T09:00:00.999Z", claim)}}})
    table = coverage(history((acquire, held), (probe, late), (probe, held)), plan_for({}, 10, None))
    assert table["acquire over a live claim"] == {"requested": True, "attempted": 3, "completed": 3}
    assert table["acquire after expiry (takeover)"]["completed"] == 0
    # the probe landed once: its reply's observed_at is exactly its clock_ms; the other was decided at T
    assert table["probe takeover at expires_at - 1 ms"] == {"requested": True, "attempted": 2, "completed": 1}
    assert "probe takeover at expires_at - 1 ms" not in missing(table)
    # an episode the run never reached is shown, not requested
    assert table["probe renew at exactly expires_at"] == {"requested": False, "attempted": 0, "completed": 0}
    assert "probe takeover at expires_at - 1 ms" in format_table(table)


def test_what_is_requested_follows_the_configuration_and_what_the_run_reached():
    agents = {"read", "acquire fresh", "publish ok"}
    for workers in (3, 10):   # agents' paths: whenever the run has clients; racer paths only once reached
        assert {n for n, r in coverage([], plan_for({}, workers, None)).items() if r["requested"]} == agents
    advisory = {"result": {"operations": {"work_claim": {"mode": "advisory"}}}}
    assert {n for n, r in coverage([], plan_for({}, 3, advisory)).items() if r["requested"]} == \
        {"read", "acquire fresh"}
    stale = {"f": "renew", "intent": "stale-expiry:stale-expiry", "value": {"ledger_namespace": NS, "item_id": ITEM}}
    wrong = {"type": "ok", "value": {"exit": 0, "envelope": {"ok": True, "state": "committed", "result": {}}}}
    info = {"type": "info", "error": "timed out"}
    hold = dict(stale, intent="stale-expiry:hold")
    # reached and answered (here: wrongly) -> requested and never completed
    table = coverage(history((stale, wrong)), plan_for({}, 10, None))
    assert table["renew with a stale expiry"] == {"requested": True, "attempted": 1, "completed": 0}
    assert "renew with a stale expiry" in missing(table)
    # only the prologue, or an answer that proves nothing: the run did not get there
    assert not coverage(history((hold, wrong)), plan_for({}, 10, None))["renew with a stale expiry"]["requested"]
    assert not coverage(history((stale, info)), plan_for({}, 10, None))["renew with a stale expiry"]["requested"]
    # a store that could not decide (found by the default soak, sqlite seed 2: the exhausted acquire
    # met the fsync nemesis) answered nothing about the path either
    for code in ("clock-floor-persistence-failed", "claim-store-unavailable"):
        undecided = {"type": "fail", "value": {"exit": 6, "envelope": {"ok": False, "state": "unchanged",
                                                                       "error": {"code": code, "details": {}}}}}
        row = coverage(history((stale, undecided)), plan_for({}, 10, None))["renew with a stale expiry"]
        assert row == {"requested": False, "attempted": 1, "completed": 0}, code
    # not in the rotation: never requested
    only = plan_for({"episodes": ["stale-witness"]}, 10, None)
    assert not coverage(history((stale, wrong)), only)["renew with a stale expiry"]["requested"]
    sent = {"f": "publish", "intent": "agent:publish", "value": {"operation_id": "p", "ledger_namespace": NS,
                                                                   "item_id": ITEM}}
    assert coverage(history((sent, info)), plan_for({}, 3, None))["publication-read"]["requested"]
    faults_only = {"publish identical replay after info", "floor persistence failure"}
    assert not any(r["requested"] for n, r in coverage([], plan_for({}, 10, None)).items() if n in faults_only)


def test_a_legacy_transition_over_a_claim_its_decider_saw_expired_did_not_reach_the_path():
    # found by the default soak (postgres seed 2): a forward clock skew of the deciding host
    # expired the held lease first, the legacy transition was legal (§7), and the run went unknown
    claim = {"owner_id": "a", "epoch": "10", "issued_at": T, "expires_at": "2030-01-11T09:00:01.000Z"}
    sent = {"f": "legacy-transition", "intent": "legacy-writes:legacy-transition",
            "value": {"ledger_namespace": NS, "item_id": ITEM}}
    ok = lambda at: {"type": "ok", "value": {"exit": 0, "envelope": {"ok": True, "state": "committed",
                                                                      "result": {"read_back": rb(at, claim)}}}}
    name = "legacy transition refused over an active claim"
    late = coverage(history((sent, ok("2030-01-11T09:00:05.000Z"))), plan_for({}, 10, None))[name]
    assert late == {"requested": False, "attempted": 1, "completed": 0}
    live = coverage(history((sent, ok("2030-01-11T09:00:00.500Z"))), plan_for({}, 10, None))[name]
    assert live == {"requested": True, "attempted": 1, "completed": 0}   # a live claim overwritten: the path missed


def test_the_gate_makes_a_valid_verdict_unknown_and_says_why():
    table = coverage([], plan_for({}, 3, None))
    notes: list = []
    assert Run._workload_gate("valid", table, {"ops": 10, "info": 2}, notes) == "unknown"
    assert "never completed: read, acquire fresh, publish ok" in notes[0]
    full = {k: dict(v, completed=1) for k, v in table.items()}
    notes = []
    assert Run._workload_gate("valid", full, {"ops": 10, "info": 6}, notes) == "unknown"
    assert notes == ["most operations ended info (6 of 10): the replies prove too little to judge the backend"]
    assert Run._workload_gate("valid", full, {"ops": 10, "info": 5}, []) == "valid"
    assert Run._workload_gate("invalid", table, {"ops": 10, "info": 10}, []) == "invalid"  # a proof stands


def _run(tmp_path, *extra, scenario=None):
    store = tmp_path / "store"
    args = [sys.executable, "-m", "chaos.cli", "run", "--store", str(store), "--name", "gate", "--seed", "3", *extra]
    if scenario:
        path = tmp_path / "scenario.yaml"
        path.write_text(yaml.safe_dump(dict({"name": "gate", "description": "coverage gate"}, **scenario)))
        args += ["--scenario", str(path)]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    results = json.loads((store / "latest" / "results.json").read_text())
    assert proc.returncode == results["exit_code"], proc.stderr
    assert validate_results(results) == []
    return results, proc.stderr


def test_op_timeout_zero_ends_unknown_with_the_reason(tmp_path):
    results, err = _run(tmp_path, "--op-timeout", "0", "--time-limit", "2", "--nemesis", "none", "--workers", "3")
    assert results["verdict"] == "unknown" and results["exit_code"] == 2
    assert results["stats"]["info"] == results["stats"]["ops"] > 0
    assert any(n.startswith("most operations ended info") for n in results["notes"]), results["notes"]
    assert any("never completed: read" in n for n in results["notes"])
    assert "workload coverage" in err and "<- never completed" in err     # the console shows the table


PROBES = {"claims": {"episodes": ["probe-renew@0", "probe-takeover@-1", "fence-epoch"], "work_ms": [50, 400]}}


def test_probes_that_never_land_make_the_run_unknown_and_the_correct_backend_is_valid(tmp_path):
    # a backend that decides by its own clock, not the one the harness pins: correct in every
    # reply, but no probe is ever decided at its instant, so the run proved nothing about them
    (tmp_path / "a").mkdir()
    results, _ = _run(tmp_path / "a", "--backend", "python", "--factory", "tests.own_clock_backend:open_backend",
                      "--nemesis", "none", "--workers", "4", "--time-limit", "8", scenario=PROBES)
    assert results["verdict"] == "unknown", results["notes"]
    cov = results["workload_coverage"]
    probes = [n for n in cov if n.startswith("probe ")]
    assert any(cov[n]["requested"] and cov[n]["attempted"] > 0 == cov[n]["completed"] for n in probes), cov
    note = next(n for n in results["notes"] if "never completed" in n)
    assert "probe " in note
    assert all(r["valid"] is True for r in results["checkers"].values())   # correct replies: no alarm
    (tmp_path / "b").mkdir()
    # the correct backend in the same (timed) mode as the class above, which the scheduler does not control
    results, _ = _run(tmp_path / "b", "--timed", "--nemesis", "none", "--workers", "4", "--time-limit", "8",
                      scenario=PROBES)
    assert results["verdict"] == "valid", results["notes"]
    assert results["workload_coverage"]["probe renew at exactly expires_at"]["completed"] > 0


def _il(process, f, req, typ, code=None):
    env = {"ok": typ == "ok", "op": f, **({"reason_code": code} if code else {})}
    return [{"process": process, "type": "invoke", "f": f, "value": req},
            {"process": process, "type": typ, "f": f, "value": {"exit": 0 if typ == "ok" else 3, "envelope": env}}]


def test_the_issue_lock_paths_are_counted_and_gated_like_the_claims_paths():
    from workloads.issuelock import GHOST_TOKEN
    from workloads.issuelock_coverage import coverage as issue_lock_coverage

    key = {"agent_token": "tok-agent-0", "issue_number": 100}
    refused = (_il(0, "inspect", key, "ok") + _il(0, "bootstrap", key, "fail", "healthy_foreign_lock")
               + _il(1, "recover", dict(key, agent_token=GHOST_TOKEN), "fail", "identity_unresolved"))
    table = issue_lock_coverage(refused)
    assert table["bootstrap refused: healthy foreign lock"] == {"requested": False, "attempted": 1, "completed": 1}
    assert table["recover refused: identity_unresolved"] == {"requested": False, "attempted": 1, "completed": 1}
    assert table["recover refused: no_durable_lock"]["attempted"] == 0      # aimed by its request only
    notes: list = []
    assert Run._workload_gate("valid", table, {"ops": 3, "info": 0}, notes) == "unknown"
    assert notes == ["requested workload paths never completed: bootstrap (lock taken), heartbeat"]
    took = refused + _il(0, "bootstrap", key, "ok") + _il(0, "heartbeat", key, "ok")
    assert Run._workload_gate("valid", issue_lock_coverage(took), {"ops": 5, "info": 0}, []) == "valid"
    assert not any(r["requested"] for r in issue_lock_coverage([]).values())   # no clients: nothing asked
