"""``chaos explore`` and ``chaos repro``: seeds searched on purpose, calls killed at exact points,
a finding written as a script that shows it without the harness (docs/explore.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from chaos.explore import crashpoints
from chaos.explore.seeds import DEFAULT_CONFIG, explore_one, tally

EARLY_TAKEOVER = "chaos.testing.mutants:open_early_takeover"


def _thread(proc_name: str, call):
    return SimpleNamespace(proc=SimpleNamespace(name=proc_name, call=call), path="claims.db")


def test_a_call_point_kill_fires_at_the_kth_syscall_point_of_that_one_call_only():
    rule = crashpoints.CallPointKill(serial=7, kind="acquire", point=2)
    other, mine = _thread("w0.0", (6, "read")), _thread("w1.0", (7, "acquire"))
    assert not rule.matches(other, "write", 1)            # another call
    assert not rule.matches(mine, "start", 1)             # not a syscall of the call
    assert not rule.matches(mine, "lock", 2)              # its first point
    assert not rule.matches(other, "write", 3)
    assert rule.matches(mine, "pwrite", 4)                # its second point
    rule.evidence = {"call": "pwrite"}
    assert not rule.matches(mine, "write", 5)             # fires once


def test_the_recorder_never_fires_and_the_first_changing_call_of_each_kind_is_explored():
    rec = crashpoints.CallRecorder()
    for call, proc in [("lock", (1, "acquire")), ("unlock", (1, "acquire")), ("lock", (2, "acquire")),
                       ("pwrite", (2, "acquire")), ("sleep", (2, "acquire")), ("lock", (3, "renew"))]:
        assert not rec.matches(_thread("w0.0", proc), call, 0)
    calls = list(rec.log.values())
    assert [c["points"] for c in calls] == [["lock claims.db", "unlock claims.db"],
                                            ["lock claims.db", "pwrite claims.db"], ["lock claims.db"]]
    assert {k: e["serial"] for k, e in crashpoints.targets(calls).items()} == {"acquire": 2}
    assert crashpoints.pick_points(43, 3) == [1, 22, 43] and crashpoints.pick_points(2, 5) == [1, 2]


def test_a_black_box_programs_points_are_its_workers_call_and_only_changes_are_explored():
    """A program run per call is the worker's child (``w1.0/f2``): its points are the call the worker
    serves. For such a call only points before a change (kill) or an fsync (EIO) are explored."""
    rule = crashpoints.CallPointKill(serial=7, kind="publish", point=2, action="EIO")
    worker = _thread("w1.0", (7, "publish"))
    child = SimpleNamespace(proc=SimpleNamespace(name="w1.0/f2", call=None), path="journal.ndjson")
    stranger = SimpleNamespace(proc=SimpleNamespace(name="w0.0/f1", call=None), path="journal.ndjson")
    assert not rule.matches(worker, "mkdir", 1)           # the worker's own first point
    assert not rule.matches(stranger, "fsync", 2)         # another worker's child
    assert rule.matches(child, "fsync", 3) and rule.action == "EIO"
    points = ["mkdir tmp", "open a", "read a", "write j", "fsync j", "rename i", "fsync j"]
    assert crashpoints.explored_points(points, None, changes_only=True) == [1, 4, 5, 6, 7]
    assert crashpoints.explored_points(points, None, changes_only=True, action="EIO") == [5, 7]
    assert crashpoints.explored_points(points, 2, changes_only=True) == [1, 7]
    assert crashpoints.explored_points(points, None, changes_only=False) == list(range(1, 8))


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    """One exploration seed of a planted acquire bug (found by seed 1: docs/explore.md)."""
    store = str(tmp_path_factory.mktemp("explore"))
    return explore_one(dict(DEFAULT_CONFIG, backend="python", factory=EARLY_TAKEOVER, store=store, name="t",
                            seed=1, depth=1, points=None))


def test_a_seed_that_breaks_a_rule_is_kept_with_its_exact_replay_line(found):
    assert found["verdict"] == "invalid" and "dual_ownership:early-takeover" in found["anomalies"], found
    assert found["reproduce"] == f"chaos run --config {os.path.join(found['run_dir'], 'test.yaml')}"
    summary = tally([found, dict(found, seed=2, verdict="valid", anomalies=[])])
    assert summary[1]["schedules"] == 2 and summary[1]["anomalies"]["dual_ownership:early-takeover"] == [1]


def test_a_seed_runs_off_the_main_thread_as_a_cluster_worker_runs_it_and_a_valid_one_leaves_no_run(tmp_path):
    import pickle
    from concurrent.futures import ThreadPoolExecutor

    assert pickle.loads(pickle.dumps(explore_one)) is explore_one    # a top-level function: it travels
    task = dict(DEFAULT_CONFIG, store=str(tmp_path), name="ok", seed=1, depth=1, points=None, workers=2,
                time_limit=0.5, nemesis=[])
    with ThreadPoolExecutor(1) as pool:     # a Dask worker runs a task in a thread: no signal handler there
        res = pool.submit(explore_one, pickle.loads(pickle.dumps(task))).result()
    assert res["verdict"] in ("valid", "unknown") and res["run_dir"] is None, res
    assert not os.path.exists(tmp_path / "ok")


def test_repro_writes_a_script_that_shows_the_finding_and_not_on_the_correct_backend(found, tmp_path):
    from chaos.reports import write_all

    write_all(found["run_dir"])      # the run's page, before: written again with a link to the script
    assert 'id="repro"' not in open(os.path.join(found["run_dir"], "report.html")).read()
    res = subprocess.run([sys.executable, "-m", "chaos.cli", "repro", found["run_dir"]], capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = os.path.join(found["run_dir"], "repro", "dual_ownership-overlapping-leases")
    page = open(os.path.join(found["run_dir"], "report.html")).read()
    assert '<a href="repro/dual_ownership-overlapping-leases/repro.sh">' in page
    data = json.load(open(os.path.join(out, "data.json")))
    assert 2 <= len(data["calls"]) <= 10 and os.path.isfile(os.path.join(out, "README.md"))
    script = open(os.path.join(out, "repro.py")).read()
    imports = [line for line in script.splitlines() if line.startswith(("import ", "from "))]
    assert imports and not [line for line in imports if "chaos" in line or "backends" in line], imports
    shown = subprocess.run(["sh", os.path.join(out, "repro.sh")], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "SHOWN" in shown.stdout
    fixed = dict(data, factory="backends.sqlite:open_backend")   # the same calls on the correct class
    not_shown = subprocess.run([sys.executable, os.path.join(out, "repro.py")], input=json.dumps(fixed),
                               capture_output=True, text=True, timeout=120)
    assert not_shown.returncode == 1 and "NOT SHOWN" in not_shown.stdout


def test_repro_that_can_script_no_finding_names_each_with_its_reason(monkeypatch):
    from chaos import shrink
    from chaos.explore import repro

    monkeypatch.setattr(shrink, "load_run", lambda run_dir: (None, {}))
    monkeypatch.setattr(repro, "findings", lambda results: [("a-x", "a", {}), ("b-y", "b", {})])

    def refuse(run_dir, finding):
        raise repro.NotReproducible(f"no script for {finding}")
    monkeypatch.setattr(repro, "script_data", refuse)
    with pytest.raises(repro.NotReproducible) as e:
        repro.write("RUN")
    assert str(e.value) == "a-x: no script for a-x; b-y: no script for b-y"


def test_a_kill_at_a_recorded_point_lands_on_that_call_there(tmp_path_factory):
    # a short store path: the scheduler's socket lives under the run's tmp/ (a unix socket path is short)
    base = dict(DEFAULT_CONFIG, store=str(tmp_path_factory.mktemp("k")), name="c", seed=1, depth=3, points=None, workers=2,
                time_limit=0.5, nemesis=["kill"], keep=False)
    recording = crashpoints.explore_crash_point(base)
    entry = crashpoints.targets(recording["calls"])["acquire"]
    res = crashpoints.explore_crash_point(dict(base, crash={"serial": entry["serial"], "kind": "acquire", "point": 2}))
    at = res["killed_at"]
    assert at and at["process"] == entry["process"] and f"{at['call']} {at['path']}".strip() == entry["points"][1]
    assert res["verdict"] in ("valid", "unknown"), res     # the correct sqlite store recovers


def test_explore_refuses_bad_input_in_one_line(tmp_path):
    for argv in (["explore"], ["explore", "--seeds", "2", "--depth", "x"], ["explore", "--seeds", "1",
                                                                          "--backend", "postgres"],
                 ["explore", "--crash-points", "--fault", "kill,power"], ["explore", "--crash-points", "--kinds", "lunch"]):
        res = subprocess.run([sys.executable, "-m", "chaos.cli", *argv, "--store", str(tmp_path)],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 254 and len(res.stderr.strip().splitlines()) == 1, (argv, res.stderr)


def test_the_docs_show_the_tables_the_commands_print():
    """docs/explore.md's outputs are real runs; their table layouts must stay what the code prints."""
    from chaos.explore.seeds import render

    doc = open(os.path.join(os.path.dirname(__file__), "..", "docs", "explore.md")).read()
    header = crashpoints.table({"rows": []})[0]
    row = {"kind": "acquire", "serial": 4, "points": ["lock claims.db"] * 43,
           "runs": [{"verdict": "valid", "anomalies": [], "killed_at": {"call": "lock"}, "crash": {"point": k}}
                    for k in (1, 43)]}
    assert header in doc and crashpoints.table({"rows": [row]})[-1] in doc
    summary = tally([{"seed": s, "depth": 3, "verdict": "invalid" if s == 3 else "valid",
                      "anomalies": ["stale_write:stale-fence-accepted"] if s == 3 else []} for s in (1, 2, 3, 4)])
    assert all(line in doc for line in render(summary)), render(summary)


def test_explore_on_a_cluster_refuses_conflicting_or_bad_flags_in_one_line(tmp_path):
    for flags, says in ((["--parallel", "2", "--scheduler", "tcp://127.0.0.1:1"], "--parallel sizes a local cluster"),
                        (["--parallel", "0"], "--parallel 0"), (["--shard", "3/2"], "--shard 3/2")):
        res = subprocess.run([sys.executable, "-m", "chaos.cli", "explore", "--seeds", "1", "--depth", "1",
                              "--points", "100", "--store", str(tmp_path / "s"), *flags],
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 254 and says in res.stderr and len(res.stderr.strip().splitlines()) == 1, res


def test_crash_points_of_both_faults_fan_out_over_a_local_cluster(tmp_path_factory):
    """`--fault kill,eio --parallel 2`: one recording, then the kill points and the fsync-EIO points of
    the explored call, each a task on a Dask LocalCluster, back in one table: a row per kind and fault,
    every fault landed where asked, each task a run dir of its own name."""
    store = tmp_path_factory.mktemp("cp")
    res = subprocess.run([sys.executable, "-m", "chaos.cli", "explore", "--crash-points", "--fault", "kill,eio",
                          "--kinds", "acquire", "--max-points", "2", "--parallel", "2", "--backend", "sqlite",
                          "--workers", "2", "--time-limit", "0.5", "--keep-all", "--store", str(store), "--name", "cpx"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode in (0, 2), res.stdout[-2000:] + res.stderr[-2000:]
    data = json.load(open(store / "cpx-crash-points.json"))
    rows = {r["kind"]: r for r in data["rows"]}
    assert set(rows) == {"acquire", "acquire/eio"} and data["actions"] == ["kill", "EIO"]
    for row in rows.values():
        assert len(row["runs"]) == 2 and all(r["killed_at"] for r in row["runs"]), row["runs"]
        assert [r["crash"]["point"] for r in row["runs"]] == sorted(r["crash"]["point"] for r in row["runs"])
    assert all(r["killed_at"]["call"] in ("fsync", "fdatasync") for r in rows["acquire/eio"]["runs"])
    assert len({r["run_dir"] for row in rows.values() for r in row["runs"]}) == 4
    assert "acquire/eio " in res.stdout and "4 crash points" in res.stdout
