"""Exact faults of the deterministic mode beyond kill and EIO: a freeze holds a thread at a named
point for a virtual duration while the others run (it keeps its locks); a lost reply lets the call
through and drops its reply; a power cut at a named point kills every worker and undoes what no
fsync covers. Each names its point, and the same seed gives the same history. Real processes,
real files, real SQLite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from chaos.deterministic.rules import FaultRule
from chaos.deterministic.scheduler import Scheduler

# a read-modify-write of a counter file under an exclusive flock
LOCKED_COUNTER = """
import fcntl, os, sys
path, n = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_RDWR)
for _ in range(n):
    fcntl.flock(fd, fcntl.LOCK_EX)
    v = int(os.pread(fd, 32, 0) or b"0")
    os.pwrite(fd, b"%08d" % (v + 1), 0)
    fcntl.flock(fd, fcntl.LOCK_UN)
os.close(fd)
"""

HOLD_NS = 5_000_000_000


def test_a_freeze_holds_the_thread_at_its_point_while_the_others_run(tmp_path):
    """a is frozen at its 2nd pwrite, holding the flock: b runs meanwhile but cannot take the lock
    (it reports blocked, never blocks for real); a goes on only once the virtual clock passed the
    hold, and no update is lost."""
    store = tmp_path / "store"
    store.mkdir()
    (store / "counter").write_bytes(b"0")
    client = tmp_path / "c.py"
    client.write_text(LOCKED_COUNTER)
    freeze = FaultRule("freeze", frozenset({"pwrite"}), process="a", nth=2, hold_ns=HOLD_NS)
    traces = []
    for _ in range(2):
        freeze.seen, freeze.evidence = 0, None
        (store / "counter").write_bytes(b"0")
        with Scheduler(3, prefixes=[str(store)], expected_points=200, faults=[freeze]) as s:
            for who in ("a", "b"):
                s.spawn(who, [sys.executable, str(client), str(store / "counter"), "5"])
            s.run_all()
            traces.append(list(s.trace))
        assert int((store / "counter").read_bytes()) == 10
    assert traces[0] == traces[1]
    ev = freeze.evidence
    assert {"process": "a", "call": "pwrite", "path": "counter"}.items() <= ev.items()
    assert ev["hold_ns"] == HOLD_NS and ev["resume_vt_ns"] == ev["vt_ns"] + HOLD_NS
    trace = traces[0]
    at = trace.index(f"{ev['vt_ns']} a/t0 FAULT freeze")
    resumed = next(i for i in range(at + 1, len(trace)) if trace[i].split()[1] == "a/t0")
    between = trace[at + 1:resumed]
    assert between and all(line.split()[1] == "b/t0" for line in between)   # b ran while a was held
    assert int(trace[resumed].split()[0]) >= ev["resume_vt_ns"]
    assert not any(" pwrite " in line for line in between)     # a kept its lock: b never got to write


def _run(store: Path, seed: int) -> dict:
    res = subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--store", str(store), "--no-report",
                          "--deterministic", "--seed", str(seed), "--workers", "3", "--time-limit", "2",
                          "--nemesis", "kill,fsync,pause,lost-reply,power-loss"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:] + res.stdout[-2000:]
    (run,) = sorted(store.glob("*/2*/"))
    results = json.loads((run / "results.json").read_text())
    results["history"] = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    return results


def test_every_exact_fault_takes_effect_at_its_point_and_replays(tmp_path):
    # stores at paths of different lengths: no evidence may carry a path's length (a power cut's
    # undo-log size did, and the two histories differed)
    first, second = _run(tmp_path / "a", 7), _run(tmp_path / "a-store-at-a-longer-path", 7)
    assert first["history_sha256"] == second["history_sha256"]
    assert first["verdict"] == "valid"
    assert {k: v["took_effect"] for k, v in first["fault_coverage"].items()} == {
        "kill": 2, "fsync": 2, "pause": 2, "lost-reply": 2, "power-loss": 2}
    faults = first["deterministic"]["faults"]
    assert faults == second["deterministic"]["faults"]
    assert all({"process", "thread", "call", "index", "path", "vt_ns"} <= set(f) for f in faults)
    cuts = [f for f in faults if f["action"] == "power-loss"]
    assert all(f["undone"] > 0 and f["killed"] for f in cuts)
    assert all(f["reply_dropped"] for f in faults if f["action"] == "lost-reply")
    done = [op for op in first["history"] if op.get("fault")]
    kinds = {op["fault"]["kind"] for op in done}
    assert {"pause", "lost-reply", "power-loss"} <= kinds
    lost = [op for op in done if op["fault"]["kind"] == "lost-reply"]
    assert lost and all(op["type"] == "info" and "reply lost" in op["error"] for op in lost)
    cut_short = [op for op in done if op["fault"]["kind"] == "power-loss"]
    assert all(op["type"] == "info" for op in cut_short)
    held = [op for op in done if op["fault"]["kind"] == "pause"]
    assert held    # a held op answered only after its hold (unless a later fault killed its worker meanwhile)
    assert all(op["time"] >= op["fault"]["point"]["resume_vt_ns"] for op in held if op["type"] != "info")


def test_a_restart_ends_a_workers_process_between_two_ops_and_replays(tmp_path):
    """``restart`` at its exact point: the n-th op handed to a worker with a process, from its instant
    on. That process ends between two of its ops (no call cut short) and a fresh one serves the op,
    recorded as the timed nemesis records it, with the point; the same seed, the same history."""
    runs = []
    for store in (tmp_path / "a", tmp_path / "b"):
        res = subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--store", str(store), "--no-report",
                              "--seed", "3", "--workers", "3", "--time-limit", "3", "--nemesis", "restart"],
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0 and "timed mode" not in res.stderr, res.stderr[-2000:] + res.stdout[-2000:]
        (run,) = sorted(store.glob("*/2*/"))
        results = json.loads((run / "results.json").read_text())
        results["history"] = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
        runs.append(results)
    first, second = runs
    assert first["history_sha256"] == second["history_sha256"]
    assert first["fault_coverage"] == {"restart": {"requested": True, "fired": 2, "took_effect": 2}}
    faults = first["deterministic"]["faults"]
    assert [f["action"] for f in faults] == ["restart", "restart"] and all(f["between_ops"] for f in faults)
    history = first["history"]
    infos = [op for op in history if op["process"] == "nemesis" and op["f"] == "restart" and op["type"] == "info"]
    assert sorted((v["value"]["point"] for v in infos), key=str) == sorted(faults, key=str)
    assert all(op["value"]["took_effect"] and op["value"]["restarted"][0]["restarted"] for op in infos)
    assert not [op for op in history if op.get("fault") or op["type"] == "info" and op["process"] != "nemesis"]
    for op in infos:   # at the hand-out of an op (invoked just before), which the fresh process completes
        served = history[op["index"] - 2]
        assert served["type"] == "invoke" and history[op["index"] - 1]["f"] == "restart", served
        done = next(o for o in history[op["index"]:] if o["process"] == served["process"])
        assert done["f"] == served["f"] and done["type"] in ("ok", "fail"), done
