"""Same seed, same history whatever the machine's load: three deterministic runs of one seed give one
history digest while the test itself keeps the machine busy with 1 and then 8 CPU burners (its own
processes, tracked by pid, killed and reaped afterwards). Real SQLite, real worker processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BURN = "while True: pass"


def _run(store: Path) -> dict:
    res = subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--store", str(store), "--no-report",
                          "--deterministic", "--seed", "4", "--workers", "2", "--time-limit", "1"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode in (0, 2), res.stderr[-2000:]
    (results,) = store.glob("*/2*/results.json")
    return json.loads(results.read_text())


@pytest.mark.parametrize("burners", [1, 8])
def test_three_runs_of_one_seed_under_load_give_one_history(tmp_path, burners):
    procs = [subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(burners)]
    try:
        runs = [_run(tmp_path / f"run{i}") for i in range(3)]
        assert all(p.poll() is None for p in procs)    # the load was there for every run
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
    assert len({r["history_sha256"] for r in runs}) == 1
    assert len({r["deterministic"]["trace_sha256"] for r in runs}) == 1
    assert runs[0]["stats"]["ops"] > 10
    assert all(not f.get("missed") for f in runs[0]["deterministic"]["faults"])
