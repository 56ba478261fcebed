"""Same seed, same history whatever the machine's load: three deterministic runs of one seed give one
history digest while the test itself keeps the machine busy with 1 and then 8 CPU burners (its own
processes, tracked by pid, killed and reaped afterwards). Real SQLite, real git (gitjournal), the
suite's CLI as a black box (a process per call) and the real Wowbagger program (Node, a process per
call, every thread controlled), real worker processes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.deterministic import trace as schedule

BURN = "while True: pass"
ROOT = Path(__file__).resolve().parents[1]
WOWBAGGER = ROOT / ".." / "shared" / "sut" / "wowbagger-0.1.0-alpha.7" / "bin" / "wowbagger.js"
#: per backend: its flags (seed, workers, virtual seconds: small enough for three runs at load 8)
BACKENDS = {
    "sqlite": ("--seed", "4", "--workers", "2", "--time-limit", "1"),
    "gitjournal": ("--backend", "gitjournal", "--seed", "4", "--workers", "2", "--time-limit", "1"),
    "cli": ("--backend", "external", "--command", "chaos backend sqlite",
            "--profile", str(ROOT / "profiles" / "chaos-sqlite-blackbox.yaml"),
            "--seed", "5", "--workers", "2", "--time-limit", "0.5"),
    "wowbagger": ("--backend", "external", "--command", f"node {WOWBAGGER}",
                  "--profile", str(ROOT / "profiles" / "wowbagger-0.1.0-alpha.7.yaml"),
                  "--seed", "1", "--workers", "2", "--time-limit", "0.5"),
}


#: the deterministic mode's default nemesis before pause, clock and lost-reply joined it: these short runs are
#: about replay and control, not about every fault landing in a second of virtual time
KILL_FSYNC = ("--nemesis", "kill,fsync")


def _run(store: Path, args: tuple) -> dict:
    args = args if "--nemesis" in args else (*args, *KILL_FSYNC)
    res = subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--store", str(store), "--no-report",
                          "--deterministic", *args], capture_output=True, text=True, timeout=900)
    assert res.returncode in (0, 2), res.stderr[-2000:]
    (results,) = store.glob("*/2*/results.json")
    return json.loads(results.read_text())


@pytest.mark.parametrize("burners", [1, 8])
@pytest.mark.parametrize("backend", list(BACKENDS))
def test_three_runs_of_one_seed_under_load_give_one_history(tmp_path, backend, burners):
    if backend == "wowbagger" and (not WOWBAGGER.exists() or shutil.which("node") is None):
        pytest.skip("Wowbagger or node not here")
    procs = [subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(burners)]
    try:
        # one store path for all three (Wowbagger's per-call lock-file names still move with its length)
        runs = []
        for i in range(3):
            runs.append(_run(tmp_path / "run", BACKENDS[backend]))
            shutil.move(str(tmp_path / "run"), str(tmp_path / f"run{i}"))
        assert all(p.poll() is None for p in procs)    # the load was there for every run
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
    dirs = [str(next((tmp_path / f"run{i}").glob("*/2*"))) for i in range(3)]
    parted = "\n".join(schedule.compare_runs(dirs[0], d) for d in dirs[1:])   # where, if they differ
    assert len({r["history_sha256"] for r in runs}) == 1, parted
    assert len({r["deterministic"]["trace_sha256"] for r in runs}) == 1, parted
    assert runs[0]["stats"]["ops"] > 5
    assert backend == "wowbagger" or runs[0]["verdict"] != "invalid", runs[0]["notes"]   # (its findings are real)
    assert all(not f.get("missed") for f in runs[0]["deterministic"]["faults"])
    assert "clock_files" not in runs[0]["deterministic"]   # none read the machine's clock through a file
