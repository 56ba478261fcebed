"""``chaos run --deterministic`` (chaos.deterministic.run): three runs of one seed give one
history, byte for byte, with the faults at the same named points; a backend the scheduler does
not control is refused up front (exit 254, one line). Real SQLite, real worker processes."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos import sut
from chaos.deterministic import NOT_CONTROLLED


#: the deterministic mode's default nemesis before pause, clock and lost-reply joined it: these short runs are
#: about replay and control, not about every fault landing in a second of virtual time
KILL_FSYNC = ("--nemesis", "kill,fsync")


def _run(store: Path, *args: str) -> subprocess.CompletedProcess:
    args = args if "--nemesis" in args or "--config" in args else (*args, *KILL_FSYNC)
    return subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--store", str(store), "--no-report", *args],
                          capture_output=True, text=True, timeout=300)


def _results(store: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(store.glob("*/2*/results.json"))]


def test_a_config_replay_without_store_runs_in_the_store_its_run_was_made_in(tmp_path):
    """A Node program's history moves with the store path's length, so a replay without --store runs in
    its run's own store, wherever it is started from, while that store is there; else in ./store."""
    made = tmp_path / "made-here"
    res = _run(made, "--deterministic", "--seed", "4", "--workers", "2", "--time-limit", "1")
    assert res.returncode == 0, res.stderr[-2000:]
    config = next(made.glob("*/2*/test.yaml"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def replay(path: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--no-report", "--config", str(path)],
                              cwd=elsewhere, capture_output=True, text=True, timeout=300)

    res = replay(config)
    assert res.returncode == 0 and "reproduced the history" in res.stderr, res.stderr[-2000:]
    assert len(_results(made)) == 2 and not (elsewhere / "store").exists()
    assert f"--store {made}" in res.stderr   # the command it prints (and records) says where
    gone = tmp_path / "moved.yaml"
    gone.write_text(config.read_text().replace(f"store: {made}\n", f"store: {tmp_path / 'no-longer-here'}\n"))
    res = replay(gone)
    assert res.returncode == 0, res.stderr[-2000:]
    assert len(_results(elsewhere / "store")) == 1 and len(_results(made)) == 2


def test_three_runs_of_one_seed_give_one_history(tmp_path):
    """Two runs by flags and a third from the first one's stored test.yaml."""
    for _ in range(2):
        res = _run(tmp_path, "--deterministic", "--seed", "4", "--workers", "2", "--time-limit", "1")
        assert res.returncode == 0, res.stderr[-2000:]
        assert "PCT depth 3" in res.stderr and "scheduling points" in res.stderr
    runs = _results(tmp_path)
    assert len(runs) == 2
    digests = {r["history_sha256"] for r in runs}
    assert len(digests) == 1
    histories = {p.read_bytes() for p in tmp_path.glob("*/2*/history.jsonl")}
    assert len(histories) == 1
    assert len({p.read_bytes() for p in tmp_path.glob("*/2*/results.json")}) == 1   # times are virtual
    first = runs[0]
    assert first["stats"]["ops"] > 20 and first["deterministic"]["points"] > 500
    # every requested fault took effect, at a named point, the same in every run
    assert all(v["took_effect"] >= 1 for v in first["fault_coverage"].values())
    faults = [r["deterministic"]["faults"] for r in runs]
    assert faults[0] == faults[1]
    assert {f["action"] for f in faults[0]} == {"kill", "EIO"}
    assert all({"process", "call", "index", "path"} <= set(f) for f in faults[0])
    # the stored test.yaml re-runs the run and says it reproduced
    config = next(tmp_path.glob("*/2*/test.yaml"))
    res = _run(tmp_path / "again", "--config", str(config))
    assert res.returncode == 0 and "reproduced the history" in res.stderr, res.stderr[-2000:]
    third = _results(tmp_path / "again")[0]
    assert third["reproduced"] == {"of": first["history_sha256"], "same_history": True}
    assert third["deterministic"]["faults"] == faults[0]
    # the schedule is kept: one file for one schedule, its content's digest the trace's
    traces = {p.read_bytes() for p in tmp_path.glob("*/2*/schedule.trace.gz")} | {
        (tmp_path / "again").glob("*/2*/schedule.trace.gz").__next__().read_bytes()}
    assert len(traces) == 1
    assert hashlib.sha256(gzip.decompress(traces.pop())).hexdigest() == first["deterministic"]["trace_sha256"]
    # another seed, another history
    res = _run(tmp_path / "other", "--deterministic", "--seed", "5", "--workers", "2", "--time-limit", "1")
    assert res.returncode in (0, 2), res.stderr[-2000:]
    assert _results(tmp_path / "other")[0]["history_sha256"] not in digests
    # a config that no longer gives its run's history says so, and where the two schedules part
    edited = tmp_path / "edited"
    shutil.copytree(config.parent, edited)
    text = (edited / "test.yaml").read_text()
    assert "seed: 4\n" in text
    (edited / "test.yaml").write_text(text.replace("seed: 4\n", "seed: 5\n"))
    res = _run(tmp_path / "edited-run", "--config", str(edited / "test.yaml"))
    assert res.returncode in (0, 2), res.stderr[-2000:]
    assert "NOT reproduced" in res.stderr and "the schedules part at line " in res.stderr, res.stderr[-2000:]
    assert _results(tmp_path / "edited-run")[0]["reproduced"]["same_history"] is False


#: a progress line of the deterministic mode (``chaos.deterministic.driver.VirtualProgress``)
PROGRESS = re.compile(r"^chaos: +\d+\.\d virtual s(?: / 1 s|  final phase: [^:]+|  past the time limit: [^:]+)"
                      r"  ops \d+  faults \d of 4$")


def _on_a_terminal(args: list[str]) -> str:
    """What ``chaos run`` writes to its stderr when that is a terminal (a pty here)."""
    master, slave = pty.openpty()
    child = subprocess.Popen([sys.executable, "-m", "chaos.cli", "run", *args], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    out, deadline = b"", time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            ended = child.poll() is not None
            if select.select([master], [], [], 0.2)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:   # EIO: every writer closed its side
                    break
                out += chunk
                if chunk:
                    continue
            if ended:
                break
    finally:
        child.kill()
        child.wait()
        os.close(master)
    return out.decode("utf-8", "replace")


def test_a_run_on_a_terminal_shows_its_virtual_progress_and_its_history_is_the_one_without(tmp_path):
    """On a terminal the run redraws a line of virtual seconds, ops and how many of its exact fault points
    came, and keeps the last one; piped (a line every few seconds), its history is the same: the line only
    reads the schedule."""
    args = ["--deterministic", "--seed", "4", "--workers", "2", "--time-limit", "1", *KILL_FSYNC, "--no-report"]
    text = _on_a_terminal(["--store", str(tmp_path / "tty"), *args])
    shown = [ln for ln in re.split(r"[\r\n]+", text) if PROGRESS.match(ln)]
    assert shown, text[-2000:]
    assert "final phase" in shown[-1] and shown[-1].endswith("faults 4 of 4"), shown
    assert "chaos: deterministic: seed 4" in text
    piped = _run(tmp_path / "piped", *args)
    assert piped.returncode == 0, piped.stderr[-2000:]
    (tty,), (pipe,) = _results(tmp_path / "tty"), _results(tmp_path / "piped")
    assert tty["history_sha256"] == pipe["history_sha256"]


def test_pcts_change_points_are_instants_spread_over_the_run_whatever_its_pace(tmp_path):
    """A change point is a virtual instant drawn over the time limit, taken by the first step from then
    on: all of them within a run that reaches its time limit, wherever in its steps they fall. (Drawn over
    a count of 400 points per worker-second, every change point of these runs, which made some 3,000 before
    the racers' freezes held their calls and some 1,000 since, fell in their first part; with --pct-points
    the count still decides.)"""
    latest = []
    for seed in (1, 2, 3):
        store = tmp_path / str(seed)
        res = _run(store, "--deterministic", "--seed", str(seed), "--workers", "4", "--time-limit", "2",
                   "--nemesis", "none")
        assert res.returncode == 0, res.stderr[-2000:]
        det = _results(store)[0]["deterministic"]
        assert det["horizon_ns"] == 2 * 10**9 and len(det["change_ns"]) == 2
        assert all(1 <= t <= det["horizon_ns"] for t in det["change_ns"]) and det["change_ns"] == sorted(det["change_ns"])
        steps = det["points"] - det["flight_points"]
        assert len(det["change_points"]) == 2 and 1 <= det["change_points"][0] <= det["change_points"][1] <= steps
        assert steps > 2 * 400 * 4 * 2      # some 1,000-3,000 per worker-second: more than the old count assumed
        latest.append(det["change_points"][1] / steps)
    assert max(latest) > 0.5, latest
    res = _run(tmp_path / "count", "--deterministic", "--seed", "1", "--workers", "4", "--time-limit", "2",
               "--nemesis", "none", "--pct-points", "300")
    det = _results(tmp_path / "count")[0]["deterministic"]
    assert det["horizon_ns"] is None and det["change_ns"] == [] and det["expected_points"] == 300
    assert all(1 <= c <= 300 for c in det["change_points"]) and len(det["change_points"]) == 2


def test_a_python_class_over_sqlite_gives_one_history(tmp_path):
    args = ("--deterministic", "--backend", "python", "--factory", "backends.sqlite:open_backend", "--seed", "3",
            "--workers", "2", "--time-limit", "1")
    for _ in range(2):
        res = _run(tmp_path, *args)
        assert res.returncode in (0, 2), res.stderr[-2000:]
    runs = _results(tmp_path)
    assert len(runs) == 2 and runs[0]["history_sha256"] == runs[1]["history_sha256"]
    assert runs[0]["stats"]["ops"] > 10
    # a fault that never came is missed (unknown), never counted as fired
    for fault, row in runs[0]["fault_coverage"].items():
        assert row["fired"] == row["took_effect"] == sum(1 for f in runs[0]["deterministic"]["faults"]
                                                          if not f.get("missed") and
                                                          (f["action"] == "kill") == (fault == "kill"))


@pytest.mark.slow
def test_an_unlocked_store_is_found_by_a_seed_and_again_by_that_seed(tmp_path):
    """The planted concurrency bug (chaos.testing.filestore:open_unlocked: no lock around load ->
    decide -> save) needs two workers interleaved between one's load and its save. Some seed of a
    short run finds it; that seed finds it again with the same history; the locked store under the
    same seed is not invalid."""
    def run(factory: str, seed: int, store: Path) -> tuple[int, dict]:
        res = _run(store, "--deterministic", "--pct-depth", "10", "--pct-points", "200", "--backend", "python",
                   "--factory", f"chaos.testing.filestore:{factory}", "--seed", str(seed), "--workers", "3",
                   "--time-limit", "1", "--nemesis", "none")
        assert res.returncode in (0, 1, 2), res.stderr[-2000:]
        return res.returncode, _results(store)[-1]
    found = next((seed for seed in range(1, 9) if run("open_unlocked", seed, tmp_path / f"u{seed}")[0] == 1), None)
    assert found is not None
    first = _results(tmp_path / f"u{found}")[0]
    code, again = run("open_unlocked", found, tmp_path / "again")
    assert code == 1 and again["history_sha256"] == first["history_sha256"]
    assert run("open_backend", found, tmp_path / "locked")[0] != 1


@pytest.mark.parametrize("backend", sorted(NOT_CONTROLLED))
def test_uncontrolled_backends_say_why(backend):
    if backend not in sut.names():
        pytest.skip(f"{backend} is not a backend here")
    ability = sut.get(backend).abilities({})["deterministic"]
    assert not ability.ok and ability.how == NOT_CONTROLLED[backend]


def test_deterministic_is_refused_up_front(tmp_path):
    res = _run(tmp_path, "--deterministic", "--backend", "postgres")
    assert res.returncode == 254
    assert res.stderr.strip().splitlines()[-1].startswith("chaos: error: --deterministic: --backend postgres:")
    assert not list(tmp_path.glob("*/2*"))   # refused before any run directory


def test_a_deterministic_run_is_shrunk_as_an_exact_one_not_a_timed_one(tmp_path):
    """Its faults are points drawn per nemesis, not a timed list: the nemeses are its units, one replay
    decides a candidate (tests/test_shrink.py drives the search); a run with nothing failed is one line."""
    from chaos.shrink import Shrinker

    (tmp_path / "test.yaml").write_text("name: x\nbackend: sqlite\ndeterministic: true\nseed: 1\nworkers: 3\n"
                                        "time_limit: 2\nnemesis: [kill, fsync]\n")
    (tmp_path / "results.json").write_text('{"verdict": "invalid", "checkers": {"floors": {"valid": false}}}')
    sh = Shrinker(str(tmp_path), log=lambda _: None)
    assert sh.exact and sh.replays == 1 and [u[0]["f"] for u in sh.units] == ["kill", "fsync"]
    (tmp_path / "results.json").write_text('{"verdict": "valid", "checkers": {}}')
    res = subprocess.run([sys.executable, "-m", "chaos.cli", "shrink", str(tmp_path)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 254 and "nothing to shrink" in res.stderr and "Traceback" not in res.stderr


STUCK_BACKEND = '''
import os
from backends.sqlite import open_backend as _open

calls = [0]


def open_backend(spec, clock, hooks):
    """SQLite whose first call in a worker (a process under the scheduler) waits on a pipe nobody will
    ever write: before any fault's point."""
    backend = _open(spec, clock, hooks)
    real = backend.call

    def call(op, request):
        calls[0] += 1
        if calls[0] == 1 and os.environ.get("CHAOS_SCHED_SOCK"):
            os.read(os.pipe()[0], 1)
        return real(op, request)
    backend.call = call
    return backend
'''


def test_a_run_the_scheduler_cannot_finish_ends_unknown_with_its_evidence(tmp_path):
    """A backend call that blocks forever leaves an op nobody can answer: the run ends ``unknown``
    (exit 2) saying where it stopped and why, its history unchecked and its schedule kept, where it
    was a traceback and exit 255 (a default Wowbagger run ended so)."""
    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "stuck_backend.py").write_text(STUCK_BACKEND)
    res = subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--store", str(tmp_path / "store"), "--no-report",
                          "--deterministic", "--backend", "python", "--factory", "stuck_backend:open_backend",
                          "--workers", "1", "--time-limit", "0.5", "--seed", "1"],
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(tmp_path / "mod")))
    assert res.returncode == 2, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    assert "UNKNOWN" in res.stdout
    (results,) = _results(tmp_path / "store")
    assert results["verdict"] == "unknown" and results["checkers"] == {}
    assert results["deterministic"]["stuck"].startswith("deadlock: 1 op(s) in flight")
    assert "waiting at read-pipe" in results["deterministic"]["stuck"]
    assert any("the scheduler could not go on: deadlock" in n for n in results["notes"])
    faults = results["deterministic"]["faults"]
    assert faults and all(f.get("cut_off") and not f.get("missed") for f in faults), faults   # cut off, not missed
    assert next((tmp_path / "store").glob("*/2*/schedule.trace.gz")).stat().st_size > 0
