"""A planted check-then-act bug found in deterministic mode and found again by its seed: ``split-acquire-sleep``
(``chaos.testing.cta_mutants``: the witness compared under the lock, the claim written a few virtual ms
after it is let go) lets a rival's acquire in between; seed 6 of a short 3-worker run finds it, with the
same history on a re-run, and the correct SQLite backend under that seed is not invalid. The plain shape
(``split-acquire``: the write right after the lock is let go, no sleep in the gap) needs the scheduler to
preempt the holder at the point right after its commit's unlock (the release yield of
``chaos.deterministic.scheduler``); PCT's change points alone did not, in seeds 1-8 of a 2-s run. Real
SQLite, real worker processes (benchmarks/deterministic_mutants.py runs the whole class)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ARGS = ("--deterministic", "--seed", "6", "--workers", "3", "--time-limit", "1", "--nemesis", "none",
        "--backend", "python")


def _run(store: Path, factory: str, args: tuple = ARGS) -> tuple[int, dict]:
    res = subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--store", str(store), "--no-report", *args,
                          "--factory", factory], capture_output=True, text=True, timeout=600)
    assert res.returncode in (0, 1, 2), res.stderr[-2000:]
    (results,) = store.glob("*/2*/results.json")
    return res.returncode, json.loads(results.read_text())


def test_split_acquire_is_found_by_seed_6_and_again_by_it(tmp_path):
    # (seed 1 until the racers' freezes landed inside their calls and each worker made a point before its
    # reply: a schedule of other points; seeds 1 and 2 now end unknown, a 1-s run short of a path, 6 finds it)
    code, first = _run(tmp_path / "a", "chaos.testing.mutants:open_split_acquire_sleep")
    assert code == 1 and first["verdict"] == "invalid"
    assert _anomalies(first) & {"two-owners-one-epoch", "witness-mismatch-accepted"}
    code, again = _run(tmp_path / "b", "chaos.testing.mutants:open_split_acquire_sleep")
    assert code == 1 and again["history_sha256"] == first["history_sha256"]
    code, correct = _run(tmp_path / "c", "backends.sqlite:open_backend")   # (a 1-s run may leave a path unexercised)
    assert code != 1 and correct["verdict"] != "invalid"


def _anomalies(results: dict) -> set:
    return {a.get("type") for c in results["checkers"].values() if isinstance(c, dict) for a in c.get("anomalies", [])}


def test_the_plain_split_acquire_is_found_by_a_release_yield_at_seed_3(tmp_path):
    """One racer pair (4 workers), a quarter of a virtual second: seed 3 lets the rival's acquire into
    the gap (seed 1 did, before each worker made a point before its reply; before the release yield,
    with change points over every point, no seed did)."""
    args = ("--deterministic", "--seed", "3", "--workers", "4", "--time-limit", "0.25", "--nemesis", "none",
            "--backend", "python")
    code, found = _run(tmp_path, "chaos.testing.mutants:open_split_acquire", args)
    assert code == 1 and found["verdict"] == "invalid" and found["deterministic"]["release_yields"] > 0
    assert _anomalies(found) & {"two-owners-one-epoch", "witness-mismatch-accepted"}
