"""``chaos run`` end to end on SQLite (subprocesses, real signals)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from chaos.cli import main

PY = sys.executable


def chaos_run(store, *extra):
    return subprocess.Popen([PY, "-m", "chaos.cli", "run", "--store", str(store), "--workers", "3", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_dir_of(store):
    runs = [os.path.join(r, f) for r, ds, _ in os.walk(store) for f in ds if f[:2] == "20"]
    assert len(runs) == 1, runs
    return runs[0]


def worker_pids(run_dir):
    """Every worker PID the run recorded (pidfile lines copied before tmp/ goes)."""
    return [int(line.split()[0]) for line in open(os.path.join(run_dir, "pids.snapshot")) if line.strip()]


def alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow
def test_short_timed_run_gives_verdict_run_dir_latest_and_same_seed_same_schedule(tmp_path):
    schedules = []
    for k in range(2):
        store = tmp_path / f"s{k}"
        # the second without report.html (chaos shrink's replays): everything else is written as always
        p = chaos_run(store, "--timed", "--time-limit", "4", "--seed", "7", *(["--no-report"] if k else []))
        out, err = p.communicate(timeout=120)
        assert p.returncode in (0, 1, 2), err
        latest = store / "latest"
        assert latest.is_symlink()
        results = json.loads((latest / "results.json").read_text())
        assert results["verdict"] in ("valid", "invalid", "unknown")
        assert results["exit_code"] == p.returncode
        assert results["test"]["seed"] == 7 and "--seed 7" in results["test"]["command"]
        assert set(results["fault_coverage"]) >= {"kill", "pause"}
        assert results["stats"]["ops"] > 0
        history = [json.loads(line) for line in (latest / "history.jsonl").read_text().splitlines()]
        assert [o["index"] for o in history] == list(range(len(history)))
        assert history[-1]["f"] == "final-state"
        assert not (latest / "tmp").exists()
        assert (latest / "report.html").exists() != bool(k) and (latest / "junit.xml").exists()
        _assert_console_summary(out, results, latest, report=not k)
        schedules.append((latest / "schedule.jsonl").read_text())
    assert schedules[0] == schedules[1] and schedules[0].count('"kind":"nemesis"') > 0


def _assert_console_summary(out: str, results: dict, latest, report: bool = True) -> None:
    """The run ends with the summary a person reads (chaos.reports.console), in order, on stdout (progress,
    logs and the coverage table are stderr's) and with the verdict last."""
    tail = out.splitlines()
    assert tail[-1].startswith(f"chaos: {results['verdict'].upper()} -- "), tail
    assert "workload coverage" not in out
    sections = {ln.split()[0]: ln.split(None, 1)[1] for ln in tail[:-1] if ln[:3].strip() and ln.startswith("  ")}
    assert list(sections)[:2] == ["checkers", "faults"] and list(sections)[-2:] == ["report", "reproduce"], tail
    assert sum(1 for ln in tail if ln.strip().split()[0] in results["checkers"] or
               ln.split()[:2][-1] in results["checkers"]) == len(results["checkers"]), tail
    if report:
        assert os.path.realpath(sections["report"]) == os.path.realpath(latest / "report.html")
    else:
        assert sections["report"].startswith("(not written) ")
    assert sections["reproduce"] == results["test"]["command"]


def _wait_for_workers(store, n=3, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            run = run_dir_of(store)
            pids = [l for l in open(os.path.join(run, "tmp", "pids")).read().splitlines() if l.strip()]
            hist = os.path.join(run, "history.jsonl")
            if len(pids) >= n and os.path.getsize(hist) > 0:
                with open(os.path.join(run, "pids.snapshot"), "w") as f:
                    f.write("\n".join(pids) + "\n")
                return run
        except (AssertionError, OSError):
            pass
        time.sleep(0.1)
    raise AssertionError("workers never started")


def _assert_clean(run, timeout=10):
    pids = worker_pids(run)
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if alive(p)]
    assert not os.path.exists(os.path.join(run, "tmp"))  # control files and temp dirs gone
    lines = open(os.path.join(run, "history.jsonl")).read().splitlines()
    assert lines and json.loads(lines[0])["index"] == 0


MODES = pytest.mark.parametrize("mode", [[], ["--timed"]], ids=["default-deterministic", "timed"])


@MODES
def test_sigint_stops_cleanly(tmp_path, mode):
    p = chaos_run(tmp_path, "--time-limit", "60", "--seed", "3", "--nemesis", "pause,clock,fsync", *mode)
    run = _wait_for_workers(tmp_path)
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=60)
    assert p.returncode == 130
    _assert_clean(run)
    # what ran is kept and said, not checked: unknown, in both modes
    results = json.loads(open(os.path.join(run, "results.json")).read())
    assert results["verdict"] == "unknown" and not any(c.get("valid") is True for c in results["checkers"].values())
    assert any("interrupted" in n for n in results["notes"])
    # its evidence is measured up to where it stopped, not to the 60-s time limit it never reached
    assert all(end < 60 for _, end in results["evidence"]["stalls_s"]), results["evidence"]


@MODES
def test_sigkill_of_the_runner_takes_the_workers_with_it(tmp_path, mode):
    p = chaos_run(tmp_path, "--time-limit", "60", "--seed", "4", "--nemesis", "pause,clock,fsync", *mode)
    run = _wait_for_workers(tmp_path)
    time.sleep(1.0)
    p.kill()
    p.communicate(timeout=30)
    _assert_clean(run)


def test_bad_arguments_are_usage_errors(tmp_path, capsys):
    assert main(["run", "--nemesis", "bogus", "--store", str(tmp_path)]) == 254
    assert main(["run", "--workers", "0", "--store", str(tmp_path)]) == 254
    assert main(["run", "--scenario", str(tmp_path / "missing.yaml"), "--store", str(tmp_path)]) == 254
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("chaos: error:") == 3


def test_the_default_mode_is_deterministic_where_it_can_run_else_timed_saying_why(tmp_path):
    quick = ("--workers", "2", "--time-limit", "1", "--seed", "5", "--no-report")

    def run(store, *extra):
        p = chaos_run(tmp_path / store, *quick, *extra)
        out, err = p.communicate(timeout=300)
        return p.returncode, err, (tmp_path / store / "latest" / "results.json")

    code, err, results = run("det", "--nemesis", "none")
    assert code in (0, 2) and "timed mode" not in err, err[-2000:]
    res = json.loads(results.read_text())
    assert res["history_sha256"] and res["test"]["command"].endswith("--deterministic --pct-depth 3")
    code, err, results = run("timed", "--backend", "postgres")   # a server the scheduler cannot control
    assert code in (0, 1, 2), err[-2000:]
    assert err.splitlines()[0].startswith("chaos: timed mode, not deterministic: --backend postgres: the PostgreSQL "
                                          "server is a multi-process server"), err[:2000]
    res = json.loads(results.read_text())
    assert "history_sha256" not in res and "--timed" in res["test"]["command"].split()
    for argv in (("--deterministic", "--backend", "postgres"), ("--timed", "--deterministic"),
                 ("--timed", "--pct-depth", "2"), ("--deterministic", "--op-timeout", "3")):
        code, err, _ = run("refused", *argv)
        assert code == 254 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (argv, err)
