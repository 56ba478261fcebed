"""``chaos run --workload issue-lock`` end to end: real worker processes, a real
nemesis, a report with the same plots and tables as a work-claim run, and the
historical thin-bootstrap bug caught by the shape checker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]


def chaos(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
def test_a_gitfile_run_under_kill_is_checked_reported_and_leaves_nothing_behind(tmp_path):
    proc = chaos("run", "--workload", "issue-lock", "--backend", "gitfile", "--nemesis", "kill", "--time-limit", "8",
                 "--workers", "4", "--seed", "1", "--store", str(tmp_path))
    assert proc.returncode in (0, 2), proc.stderr   # never invalid on the correct store
    run = tmp_path / "latest"
    results = json.loads((run / "results.json").read_text())
    assert results["test"]["workload"] == "issue-lock" and results["ctx"]["protocol"] == "issue-lock"
    assert set(results["checkers"]) == {"shape_agreement", "lock_generation", "session_fencing", "single_owner",
                                        "explicit_expiry", "sanctioned_recovery", "read_only", "next_action"}
    assert results["fault_coverage"]["kill"]["requested"] is True
    cov = results["workload_coverage"]      # the issue-lock paths (workloads.issuelock_coverage)
    assert all(cov[p]["requested"] and cov[p]["completed"] > 0 for p in ("inspect", "bootstrap (lock taken)",
                                                                        "heartbeat")), cov
    assert "recover refused: identity_unresolved" in cov and "chaos: deterministic: seed 1" in proc.stderr   # the default
    html = (run / "report.html").read_text()
    for element in ("verdict", "reproduce", "checker-table", "coverage-table", "workload-coverage-table",
                    "plot-timeline", "plot-latency",
                    "plot-throughput", "plot-clock"):
        assert f'id="{element}"' in html, element
    assert 'id="plot-clock" alt' in html      # the clock plot is drawn (decided_at of the store), not empty
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    assert {"bootstrap", "inspect", "heartbeat", "recover"} <= {o.get("f") for o in history}
    assert history[-1]["f"] == "final-state" and history[-1]["value"]["durable"]["locks"]
    again = chaos("check", str(run))
    assert again.returncode == proc.returncode and "explicit_expiry" in again.stdout
    pids = [int(line.split()[0]) for line in (run / "pids.snapshot").read_text().splitlines() if line.strip()] \
        if (run / "pids.snapshot").exists() else []
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow
def test_the_historical_thin_bootstrap_is_invalid_by_shape_agreement(tmp_path):
    proc = chaos("run", "--workload", "issue-lock", "--backend", "python", "--factory",
                 "chaos.testing.issuelock_bugs:open_thin_bootstrap", "--nemesis", "none", "--time-limit", "5",
                 "--workers", "4", "--seed", "1", "--store", str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    results = json.loads((tmp_path / "latest" / "results.json").read_text())
    shape = results["checkers"]["shape_agreement"]
    assert shape["valid"] is False
    first = shape["anomalies"][0]
    assert first["type"] == "created-lock-not-canonical" and "work_lease" in first["data"]["missing_fields"]


@pytest.mark.parametrize("args,needle", [
    (["--backend", "gitfile"], "does not run the work-claim protocol"),
    (["--workload", "issue-lock", "--backend", "postgres"], "does not run the issue-lock protocol"),
    (["--workload", "issue-lock", "--nemesis", "lost-reply", "--timed"], "after-commit faults are defined for work-claim"),
    (["--workload", "nope"], "unknown workload"),
])
def test_usage_errors_are_one_line_and_exit_254(tmp_path, args, needle):
    proc = chaos("run", *args, "--store", str(tmp_path), timeout=60)
    assert proc.returncode == 254 and needle in proc.stderr and "Traceback" not in proc.stderr
