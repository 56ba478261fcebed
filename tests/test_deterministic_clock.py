"""Clock faults in the deterministic mode (chaos.deterministic): a step of one process's wall clock,
forward or back, at an exact scheduling point, the same point in every run; the backend sees it
(the planted ``expiry-by-worker-clock`` bug is found by a seed, and again by that seed), a correct
backend keeps its durable clock floor. Real SQLite, real processes, the preload shim's clocks."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from chaos.deterministic.rules import FaultRule
from chaos.deterministic.scheduler import Scheduler
from chaos.deterministic.shim import EPOCH_NS

SEC_NS = 10**9
HOUR_NS = 3600 * SEC_NS

# each process logs its wall and monotonic clock at every transaction
CLOCK_CLIENT = """
import sqlite3, sys, time
path, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = sqlite3.connect(path, timeout=30, isolation_level=None)
for i in range(n):
    c.execute("BEGIN IMMEDIATE")
    c.execute("INSERT INTO log VALUES (?, ?, ?, ?)", (who, i, time.time_ns(), time.monotonic_ns()))
    c.execute("COMMIT")
    time.sleep(0.002)
"""


def _clock_run(tmp_path: Path, seed: int, nth: int):
    store = Path(tempfile.mkdtemp(dir=tmp_path, prefix="store-"))
    db = str(store / "x.db")
    c = sqlite3.connect(db)
    c.executescript("CREATE TABLE log(who, i, wall, mono);")
    c.close()
    client = tmp_path / "clock_client.py"
    client.write_text(CLOCK_CLIENT)
    rule = FaultRule("clock", nth=nth, offsets={"b": -HOUR_NS})
    with Scheduler(seed, prefixes=[str(store)], depth=3, expected_points=400, faults=[rule]) as s:
        for who in ("a", "b"):
            s.spawn(who, [sys.executable, str(client), db, who, "6"])
        s.run_all()
        summary = s.summary()
    c = sqlite3.connect(db)
    rows = c.execute("SELECT who, i, wall, mono FROM log ORDER BY rowid").fetchall()
    c.close()
    return summary, rows


def test_a_backward_step_lands_at_its_point_in_every_run(tmp_path):
    runs = [_clock_run(tmp_path, 4, nth=30) for _ in range(3)]
    assert len({r[0]["trace_sha256"] for r in runs}) == 1
    assert len({tuple(r[1]) for r in runs}) == 1          # the clocks each process read, the same every run
    summary, rows = runs[0]
    (point,) = summary["faults"]
    assert point["action"] == "clock" and point["offsets_ns"] == {"b": -HOUR_NS}
    assert {"process", "thread", "call", "index", "vt_ns"} <= set(point)
    for who, _, wall, mono in rows:
        virtual = wall - EPOCH_NS
        if who == "a":                                     # not a target: on the virtual clock
            assert 0 <= virtual < 60 * SEC_NS
        elif virtual < 0:                                  # b, after the step: an hour back
            assert -HOUR_NS <= virtual < -HOUR_NS + 60 * SEC_NS
    b_walls = [wall - EPOCH_NS for who, _, wall, _ in rows if who == "b"]
    assert any(v >= 0 for v in b_walls) and any(v < 0 for v in b_walls)   # b saw its clock go back
    stepped = next(i for i, v in enumerate(b_walls) if v < 0)
    assert all(v < 0 for v in b_walls[stepped:])          # and stays back: nothing healed it here
    monos = [mono for who, _, _, mono in rows if who == "b"]
    assert monos == sorted(monos)                          # the monotonic clock never steps


def _run(store: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--store", str(store), "--no-report", *args],
                          capture_output=True, text=True, timeout=300)


def _only_run(store: Path) -> Path:
    (run,) = sorted(store.glob("*/2*/"))
    return run


def _clock_ops(run: Path) -> list[dict]:
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    return [o for o in ops if o["process"] == "nemesis" and o["f"] in ("clock", "clock-reset")]


MUTANT = ("--deterministic", "--nemesis", "clock", "--backend", "python", "--factory",
          "chaos.testing.mutants:open_expiry_by_worker_clock", "--workers", "3", "--time-limit", "2")


def test_a_clock_bug_is_found_by_a_seed_and_again_by_that_seed(tmp_path):
    """Seed 1 steps a worker's clock two hours back; the mutant decides by it (the floor ignored)."""
    res = _run(tmp_path / "a", *MUTANT, "--seed", "1")
    assert res.returncode == 1, res.stderr[-2000:]
    first = _only_run(tmp_path / "a")
    results = json.loads((first / "results.json").read_text())
    kinds = {a["type"] for a in results["checkers"]["floors"]["anomalies"]}
    assert "decision-time-regressed" in kinds
    assert results["fault_coverage"]["clock"] == {"requested": True, "fired": 2, "took_effect": 2}
    faults = results["deterministic"]["faults"]
    assert [f["action"] for f in faults] == ["clock", "clock"] and not any(f.get("missed") for f in faults)
    ops = _clock_ops(first)
    steps = [o for o in ops if o["f"] == "clock" and o["type"] == "info"]
    assert [o["value"]["point"] for o in steps] == faults   # the history names the same points
    assert any(o["value"]["mode"] == "backward" for o in steps)
    reset = next(o for o in ops if o["f"] == "clock-reset" and o["type"] == "info")
    assert reset["value"]["took_effect"] and any(c["shifted"] for c in reset["value"]["clocks_before_reset"])
    # again by flags, and from the stored test.yaml: the same history, the same points
    res = _run(tmp_path / "b", *MUTANT, "--seed", "1")
    assert res.returncode == 1, res.stderr[-2000:]
    second = _only_run(tmp_path / "b")
    assert (second / "history.jsonl").read_bytes() == (first / "history.jsonl").read_bytes()
    res = _run(tmp_path / "c", "--config", str(first / "test.yaml"))
    assert res.returncode == 1 and "reproduced the history" in res.stderr, res.stderr[-2000:]
    third = json.loads((_only_run(tmp_path / "c") / "results.json").read_text())
    assert third["reproduced"] == {"of": results["history_sha256"], "same_history": True}
    assert third["deterministic"]["faults"] == faults
    # without the clock step the same seed does not find it: the step is what the mutant mis-decides on
    res = _run(tmp_path / "none", *[a if a != "clock" else "none" for a in MUTANT], "--seed", "1")
    assert res.returncode == 0, res.stderr[-2000:]


def test_a_correct_backend_keeps_its_floor_through_the_same_steps(tmp_path):
    res = _run(tmp_path, "--deterministic", "--nemesis", "clock", "--backend", "python", "--factory",
               "backends.sqlite:open_backend", "--workers", "3", "--time-limit", "2", "--seed", "1")
    assert res.returncode == 0, res.stderr[-2000:]
    results = json.loads((_only_run(tmp_path) / "results.json").read_text())
    assert results["verdict"] == "valid" and results["checkers"]["floors"]["valid"] is True
    assert results["fault_coverage"]["clock"]["took_effect"] == 2


def test_a_nemesis_without_exact_points_is_refused(tmp_path):
    # (every nemesis a backend this mode runs offers has exact points: partition is postgres's, whose
    # server the scheduler cannot control, so the CLI refuses it for the backend first)
    from chaos.deterministic.plan import refusal
    from chaos.runner import RunConfig

    assert refusal(RunConfig(nemesis=["clock", "restart"], store=str(tmp_path))) is None
    assert refusal(RunConfig(nemesis=["clock", "partition"], store=str(tmp_path))) == (
        "--deterministic: nemesis partition not built at exact points yet "
        "(only kill, fsync, clock, pause, lost-reply, power-loss, restart; or --nemesis none)")


# a program that waits the way Python programs do: sleeps, a sleep loop to a deadline, timed lock and
# condition waits; it prints how long each took on its own (virtual) clock
WAITS = """
import select, threading, time
def took(wait):
    t = time.monotonic(); wait(); return round(time.monotonic() - t, 2)
def loop():
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        time.sleep(0.01)
def select_loop():
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        select.select([], [], [], 0.05)
held = threading.Lock(); held.acquire()
cond = threading.Condition(); cond.acquire()
print(took(lambda: time.sleep(0.2)), took(loop), took(lambda: held.acquire(timeout=0.2)),
      took(lambda: cond.wait(0.2)), took(select_loop))
"""
# an event loop's timer: libuv waits in epoll_wait until the timer is due by its (virtual) clock
NODE_TIMER = "const t = Date.now(); setTimeout(() => console.log(Date.now() - t), 300)"


def test_a_set_up_program_waits_as_long_as_it_asks_whatever_the_machines_uptime(tmp_path):
    """A run's set-up programs run with the shim alone: virtual clocks, whose monotonic instant (1,000 s
    and on) is no instant of the machine's. A timed wait the kernel keeps (time.sleep, a lock's or a
    condition's timeout) waited until the machine's uptime reached the program's virtual deadline: on a
    machine up for less than 1,000 s, minutes (a fresh CI machine's set-ups, stalled); and a sleep loop
    to a deadline, a select loop, a Node timer never ended, their clock moving 1 us a read. Here the
    virtual clock starts 60 s ahead of this machine's uptime, wherever that is."""
    from chaos.deterministic.shim import alone_env

    uptime_s = float(Path("/proc/uptime").read_text().split()[0])
    env = dict(alone_env("setup", threads=True), CHAOS_SCHED_MONO_NS=str(int((uptime_s + 60) * SEC_NS)),
               PATH=os.environ["PATH"])
    p = subprocess.run([sys.executable, "-c", WAITS], env=env, capture_output=True, text=True, timeout=50)
    assert p.returncode == 0, p.stderr[-2000:]
    sleep, loop, lock, cond, select_loop = map(float, p.stdout.split())
    assert sleep == 0.2 and 1.0 <= loop <= 1.02 and lock == 0.2 and cond == 0.2, p.stdout
    assert 0.5 <= select_loop <= 0.52, p.stdout
    node = subprocess.run(["node", "-e", NODE_TIMER], env=env, capture_output=True, text=True, timeout=50)
    assert node.returncode == 0 and 300 <= int(node.stdout) <= 310, (node.stdout, node.stderr[-2000:])
