"""The end of ``chaos run`` prints a short summary a person reads: verdict,
one line per checker, fault and workload coverage, known findings, notes,
the report path and the reproduce command (issue 13)."""

from __future__ import annotations

import os

from chaos.reports.console import summary

RESULTS = {
    "test": {"name": "t", "backend": "sqlite", "workload": "claims", "seed": 7,
             "command": "chaos run --backend sqlite --seed 7 --name t --store store"},
    "verdict": "invalid",
    "stats": {"ops": 12, "ok": 8, "fail": 3, "info": 1, "duration_s": 4.26},
    "checkers": {
        "linearizable": {"valid": True, "stats": {"seconds": 0.1}},
        "dual_ownership": {"valid": False, "anomalies": [{"type": "dual-ownership", "ops": [3, 9],
                                                          "explanation": "x" * 500}],
                           "stats": {"anomalies_total": 2}},
        "stale_write": {"valid": False, "anomalies": [{"type": "revision-chain-broken", "ops": [4]}],
                        "stats": {"anomalies_total": 679, "anomalies_by_type": {"revision-chain-broken": 298,
                                                                                 "unaccepted-revision": 381}}},
        "epochs": {"valid": False, "anomalies": [{"type": "epoch-regression", "ops": list(range(200))}]},
        "floors": {"valid": "unknown", "unknown_reasons": ["no decision carried observed_at"]},
        "envelopes": {"valid": "unknown", "error": "KeyError: 'x'"},
    },
    "fault_coverage": {"kill": {"requested": True, "fired": 2, "took_effect": 2},
                       "clock": {"requested": True, "fired": 1, "took_effect": 0},
                       "pause": {"requested": True, "fired": 0, "took_effect": 0}},
    "workload_coverage": {"acquire": {"requested": True, "attempted": 5, "completed": 4},
                          "renew-expired": {"requested": True, "attempted": 2, "completed": 0},
                          "bonus": {"requested": False, "attempted": 0, "completed": 0}},
    "known_deviations": [{"id": "F1", "anomaly": "stale-read", "matched": 2, "reason": "acknowledged upstream"},
                         {"id": "F9", "anomaly": "x", "matched": 0}],
    "notes": ["requested faults never took effect: clock"],
    "evidence": {"replies": 10, "store_unavailable": 8, "store_unavailable_share": 0.8, "stalls_s": [],
                 "paths_exercised": 1, "paths_known": 2,
                 "thin": ["80% of 10 replies were claim-store-unavailable (the store decided nothing for them)"]},
}


def test_the_summary_says_everything_once_in_order(tmp_path):
    (tmp_path / "report.html").write_text("<html>")
    text = summary(RESULTS, str(tmp_path))
    lines = text.splitlines()
    # the verdict last (issue #30: a 48-row coverage table used to push it out of sight)
    assert lines[-1] == ("chaos: INVALID -- claims on sqlite, seed 7: 12 ops (ok 8, fail 3, info 1) in 4.3 s")
    order = [next(i for i, ln in enumerate(lines) if ln.strip().startswith(word))
             for word in ("checkers", "faults", "workload", "evidence", "known", "notes", "report", "reproduce")]
    assert order == sorted(order)
    body = "\n".join(lines)
    assert "dual_ownership         INVALID  dual-ownership at ops [3, 9] (+1 more)" in body
    assert "stale_write            INVALID  revision-chain-broken at ops [4] (+678 more)\n" in body
    assert "\n" + " " * 45 + "by type: 298 revision-chain-broken, 381 unaccepted-revision\n" in body
    assert "floors                 unknown  no decision carried observed_at" in body
    assert "checker crashed: KeyError" in body
    assert "clock NEVER took effect (fired 1)" in body and "pause NEVER fired" in body and "kill 2 took effect of 2 fired" in body
    assert "1 of 2 requested paths completed; never: renew-expired" in body
    assert "F1 (stale-read) x2" in body and "F9 matched nothing" in body
    assert str(tmp_path / "report.html") in body or os.path.relpath(tmp_path / "report.html") in body
    assert lines[-2].endswith(RESULTS["test"]["command"])
    assert "THIN: 80% of 10 replies were claim-store-unavailable" in body
    assert "next" not in body   # not interrupted
    assert max(len(ln) for ln in lines[:-2]) <= 210   # no explanation dumped on the console


def test_a_valid_run_without_workload_paths_stays_short(tmp_path):
    results = dict(RESULTS, verdict="valid", checkers={"linearizable": {"valid": True}}, notes=[], evidence=None,
                   known_deviations=[], workload_coverage={},
                   fault_coverage={"kill": {"requested": True, "fired": 1, "took_effect": 1}})
    text = summary(results, str(tmp_path))
    assert "workload" not in text and "known" not in text and "notes" not in text
    assert "(not written)" in text   # no report.html there
    assert len(text.splitlines()) == 5


def test_an_interrupted_run_points_to_chaos_check(tmp_path):
    results = dict(RESULTS, verdict="unknown", notes=["the run was interrupted before the final phase; not checked"])
    lines = summary(results, str(tmp_path)).splitlines()
    words = lines[-2].split()
    assert words[:3] == ["next", "chaos", "check"] and os.path.realpath(words[3]) == os.path.realpath(tmp_path)
    assert lines[-1].startswith("chaos: UNKNOWN -- ")


def test_evidence_flags_unavailable_replies_stalls_and_unexercised_paths():
    from chaos.reports.evidence import evidence, summary_line

    def done(t_s, code=None):
        env = {"ok": False, "error": {"code": code}} if code else {"ok": True}
        return {"process": 0, "type": "fail" if code else "ok", "f": "read", "time": int(t_s * 1e9),
                "value": {"exit": 6 if code else 0, "envelope": env}}
    ops = [done(t) for t in (0.5, 1.0, 1.5)] + [done(2.0 + t / 10, "claim-store-unavailable") for t in range(9)]
    ops.append(done(14.0))   # 2.8 s to 14.0 s: nothing completed
    ops.append({"process": "nemesis", "type": "ok", "f": "kill", "time": int(8e9)})   # not a client op
    paths = {f"p{i}": {"requested": i < 2, "attempted": 1, "completed": int(i == 0)} for i in range(5)}
    ev = evidence(ops, 20, paths)
    assert ev["replies"] == 13 and ev["store_unavailable"] == 9 and ev["stalls_s"] == [[2.8, 14.0], [14.0, 20.0]]
    assert ev["paths_exercised"] == 1 and ev["paths_known"] == 5
    assert [t.split()[1] for t in ev["thin"]] == ["of", "op", "1", "paths"]
    line = summary_line(ev)
    assert line.startswith("THIN: 69% of 13 replies") and "no op completed for 11.2 s" in line and "p1" in line
    fine = evidence([done(t / 2) for t in range(40)], 20, {"p": {"requested": True, "attempted": 1, "completed": 1}})
    assert fine["thin"] == [] and summary_line(fine) == ("0% store-unavailable of 40 replies, no stall of 5 s or "
                                                          "more, 1 of 1 paths exercised")


def test_past_its_time_limit_the_progress_line_names_the_phase():
    """Not "50.0s / 20s" counting on: what the run is doing once its limit has passed."""
    from chaos.driver import Progress
    from chaos.nemesis import Coverage

    class Driver:
        ops, phase, t = 12, None, 5.0

        def now(self):
            return int(self.t * 1e9)

    d = Driver()
    p = Progress(d, Coverage([]), 20)
    try:
        assert p.line() == "chaos:    5.0s / 20s  ops 12  faults 0"
        d.t = 50.0
        assert "/ 20s" not in p.line() and "past the time limit: finishing" in p.line()
        d.phase = "final phase: reading everything back"
        assert p.line() == "chaos:   50.0s  final phase: reading everything back  ops 12  faults 0"
    finally:
        p._done.set()
