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
    return SimpleNamespace(proc=SimpleNamespace(name=proc_name, call=call, item=None), path="claims.db")


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
        assert len(row["runs"]) == 2 and all(r["killed_at"] for r in row["runs"]), json.dumps(row["runs"])  # whole
        assert [r["crash"]["point"] for r in row["runs"]] == sorted(r["crash"]["point"] for r in row["runs"])
    assert all(r["killed_at"]["call"] in ("fsync", "fdatasync") for r in rows["acquire/eio"]["runs"])
    assert len({r["run_dir"] for row in rows.values() for r in row["runs"]}) == 4
    assert "acquire/eio " in res.stdout and "4 crash points" in res.stdout


def test_a_check_then_act_finding_is_scripted_with_one_call_stopped_inside_and_not_shown_on_the_fix(tmp_path):
    """A split acquire (checked in one transaction, written in a second) needs its rival between the two:
    the script stops the first acquire right after its check's commit (faultshim.c, a pipe, no timer),
    runs the rival whole, then lets it go on; the correct class, given the same script, refuses the rival."""
    found = explore_one(dict(DEFAULT_CONFIG, backend="python", factory="chaos.testing.mutants:open_split_acquire_sleep",
                             store=str(tmp_path), name="t", seed=1, depth=1, points=None))
    assert "epochs:epoch-reallocated" in found["anomalies"], found
    res = subprocess.run([sys.executable, "-m", "chaos.cli", "repro", found["run_dir"], "--finding",
                          "epochs-epoch-reallocated"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = os.path.join(found["run_dir"], "repro", "epochs-epoch-reallocated")
    data = json.load(open(os.path.join(out, "data.json")))
    gated = [c for c in data["calls"] if c.get("gate")]
    assert len(data["calls"]) <= 10 and len(gated) == 1 and any(c.get("in_gap") for c in data["calls"]), data["calls"]
    assert "stopped inside" in open(os.path.join(out, "README.md")).read()
    shown = subprocess.run(["sh", os.path.join(out, "repro.sh")], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "SHOWN" in shown.stdout and "stopped after its" in shown.stdout, shown.stdout
    fixed = os.path.join(out, "fixed.json")
    with open(fixed, "w") as f:
        json.dump(dict(data, factory="backends.sqlite:open_backend"), f)
    sh = open(os.path.join(out, "repro.sh")).read().replace("< data.json", "< fixed.json")
    with open(os.path.join(out, "fixed.sh"), "w") as f:
        f.write(sh)
    not_shown = subprocess.run(["sh", os.path.join(out, "fixed.sh")], capture_output=True, text=True, timeout=120)
    assert not_shown.returncode == 1 and "NOT SHOWN" in not_shown.stdout, not_shown.stdout


def test_a_bug_in_process_memory_is_explored_and_scripted_with_an_instance_per_client_process(tmp_path):
    """``outcome-in-memory`` keeps publication outcomes in the serving process's memory: the deterministic
    mode hosts it (its SQLite file's calls are the points), a 4-worker seed finds the lost outcome, and
    the script shows it with one instance per client process of the run (the read comes from another
    one), starting from the state the class itself reached; the correct class keeps the outcome."""
    from chaos.explore import repro

    found = explore_one(dict(DEFAULT_CONFIG, backend="python", factory="chaos.testing.mutants:open_outcome_in_memory",
                             store=str(tmp_path), name="t", seed=1, depth=1, points=None, workers=4))
    assert "durability:publication-outcome-lost" in found["anomalies"], found
    made = repro.write(found["run_dir"], "durability-publication-outcome-lost")
    data = json.load(open(os.path.join(made["dir"], "data.json")))
    assert made["shown"] == 3 and len(data["calls"]) <= 10, data["calls"]
    assert len({c["process"] for c in data["calls"]}) >= 2
    assert data["explanation"].startswith("Operation ") and "operation-not-found" in data["explanation"]
    # through repro.sh, as a user runs it: it builds faultshim.c, which an instance that stops a call needs
    with open(os.path.join(made["dir"], "fixed.json"), "w") as f:
        json.dump(dict(data, factory="backends.sqlite:open_backend"), f)
    with open(os.path.join(made["dir"], "fixed.sh"), "w") as f:
        f.write(open(os.path.join(made["dir"], "repro.sh")).read().replace("< data.json", "< fixed.json"))
    fixed = subprocess.run(["sh", os.path.join(made["dir"], "fixed.sh")], capture_output=True, text=True, timeout=120)
    assert fixed.returncode == 1 and "NOT SHOWN" in fixed.stdout, fixed.stdout


def test_a_finding_whose_evidence_is_the_final_durable_state_is_scripted_with_that_state(tmp_path):
    """``floor-not-persisted-on-reject`` loses the floor of a refused decision: the finding cites the final
    durable state, so the script exports it after its calls (a fresh instance) and compares it too; the
    correct class persists the floor, and the same script says NOT SHOWN."""
    from chaos.explore import repro

    found = explore_one(dict(DEFAULT_CONFIG, backend="python", store=str(tmp_path), name="t", seed=2, depth=1,
                             points=None, factory="chaos.testing.mutants:open_floor_not_persisted_on_reject"))
    assert "durability:final-floor-lost" in found["anomalies"], found
    made = repro.write(found["run_dir"], "durability-final-floor-lost")
    data = json.load(open(os.path.join(made["dir"], "data.json")))
    assert made["shown"] == 3 and 1 <= len(data["calls"]) <= 10 and data["final"] is not None, data
    shown = subprocess.run(["sh", os.path.join(made["dir"], "repro.sh")], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "final durable state" in shown.stdout and "SHOWN" in shown.stdout
    fixed = subprocess.run([sys.executable, os.path.join(made["dir"], "repro.py")], capture_output=True, text=True,
                           input=json.dumps(dict(data, factory="backends.sqlite:open_backend")), timeout=120)
    assert fixed.returncode == 1 and "NOT as expected (data.json's final)" in fixed.stdout, fixed.stdout


def test_crash_points_cut_the_power_at_a_calls_changes_and_undo_what_no_fsync_covered(tmp_path):
    """``--fault power-loss``: at each chosen change of the explored acquire every process is killed and the
    store's journal undoes what no fsync covered; a cut with nothing uncovered is a kill, and that run says
    the fault did not take effect (unknown), never valid. The correct store recovers from every cut."""
    config = dict(DEFAULT_CONFIG, backend="sqlite", store=str(tmp_path), name="pl", nemesis=["power-loss"])
    result = crashpoints.explore(config, 1, max_points=4, kinds=("acquire",), actions=("power-loss",), log=lambda _: None)
    (row,) = result["rows"]
    assert row["kind"] == "acquire/power" and len(row["runs"]) == 4
    for r in row["runs"]:
        cut = r["killed_at"]
        assert cut["action"] == "power-loss" and cut["call"] in crashpoints.CHANGES | crashpoints.SYNCS, cut
        assert r["verdict"] == ("valid" if cut["undone"] > 0 else "unknown"), (r["verdict"], cut)
    assert any(r["killed_at"]["undone"] > 0 for r in row["runs"])
    assert "acquire/power" in "\n".join(crashpoints.table(result))


def test_a_second_crash_lands_inside_the_first_crashs_recovery(tmp_path):
    """``--second-crash``: each first crash's run is recorded; its recovery (the next call that changes the
    crashed call's item: a retried publish, a takeover acquire) is killed at each chosen point too, on the
    first crash's schedule. The correct store survives both."""
    from chaos.commands.explore import CRASH_TIME_S
    config = dict(DEFAULT_CONFIG, backend="sqlite", store=str(tmp_path), name="sc", time_limit=CRASH_TIME_S)
    result = crashpoints.explore(config, 1, max_points=2, kinds=("publish",), log=lambda _: None, second=True)
    rows = {row["kind"]: row for row in result["rows"]}
    assert set(rows) == {"publish", "publish>recovery"}
    seconds = rows["publish>recovery"]["runs"]
    assert len(seconds) == 4 and all(r["verdict"] == "valid" for r in seconds), [r["verdict"] for r in seconds]
    for r in seconds:
        first, then = r["crash"], r["crash"]["then"]
        assert then["serial"] > first["serial"] and then["kind"] in crashpoints.KINDS
        assert r["killed_at"]["action"] == "kill" and r["killed_again_at"]["action"] == "kill"
    assert len({(r["crash"]["point"], r["crash"]["then"]["point"]) for r in seconds}) == 4
    table = "\n".join(crashpoints.table(result))
    assert "publish>recovery" in table and table.splitlines()[-1].split()[3] == "4"


def test_a_call_is_replayed_at_its_clock_not_at_a_floor_ahead_of_it(tmp_path):
    """``fence-outside-commit`` persists the floor of a refused publish run at a pinned instant a day ahead;
    the read after it answers that floor as its observed_at. Replayed at that observed_at, the read would
    show the same instant on the correct class too (a false alarm); replayed at its worker's clock (and the
    publish at its pinned clock, which the checker is told), only the planted bug shows it."""
    from chaos.explore import repro

    found = explore_one(dict(DEFAULT_CONFIG, backend="python", factory="chaos.testing.mutants:open_fence_outside_commit",
                             store=str(tmp_path), name="t", seed=2, depth=1, points=None, workers=4))
    assert "floors:floor-moved-by-refusal" in found["anomalies"], found
    made = repro.write(found["run_dir"], "floors-floor-moved-by-refusal")
    data = json.load(open(os.path.join(made["dir"], "data.json")))
    assert made["shown"] == 3 and len(data["calls"]) <= 10 and any("clock_ms" in c for c in data["calls"])
    fixed = subprocess.run([sys.executable, os.path.join(made["dir"], "repro.py")], capture_output=True, text=True,
                           input=json.dumps(dict(data, factory="backends.sqlite:open_backend")), timeout=120)
    assert fixed.returncode == 1 and "NOT SHOWN" in fixed.stdout, fixed.stdout


def test_a_discarded_run_leaves_a_run_of_its_name_made_meanwhile_and_a_latest_that_is_not_a_link(tmp_path,
                                                                                                  monkeypatch):
    """A valid run is discarded, and its name's directory with it once only ``latest`` is left. Another run
    of that name may make its directory between that look and the removal (as if the look came just before):
    it stays; and a ``latest`` that is a directory of the user's is never removed."""
    from chaos.explore import seeds

    base = tmp_path / "explore-d3-s1"
    mine, theirs = base / "20270101T000000.000Z", base / "20270101T000000.001Z"
    for d in (mine, theirs):
        (d / "logs").mkdir(parents=True)
    (base / "latest").symlink_to(mine.name)
    real_listdir = os.listdir
    monkeypatch.setattr(seeds.os, "listdir", lambda p: ["latest"] if p == str(base) else real_listdir(p))
    seeds._discard(str(mine))
    assert not mine.exists() and (theirs / "logs").is_dir()
    monkeypatch.setattr(seeds.os, "listdir", real_listdir)
    seeds._discard(str(theirs))   # the last run of the name: the link and the directory go
    assert not base.exists()
    users = tmp_path / "explore-d3-s2"
    (users / "latest" / "notes").mkdir(parents=True)
    (users / "20270101T000000.000Z").mkdir()
    seeds._discard(str(users / "20270101T000000.000Z"))
    assert (users / "latest" / "notes").is_dir()
