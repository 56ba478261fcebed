"""A racer's fault inside one call, in the deterministic mode (``chaos.deterministic.callfaults``):
the episode's freeze lands at an exact point of its call (after the commit, before the reply, on
SQLite) and its rival runs to its reply while the frozen call is held; the episode's kill lands
at a store step of its call. Every one asked lands where its call has such a point, and the same
seed gives the same history. Real worker processes, real SQLite files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from chaos.deterministic.callfaults import STEP_CALLS
import claims_sim_support

ARGS = ("--seed", "1", "--workers", "4", "--time-limit", "4", "--nemesis", "none")


def _run(store: Path) -> tuple[dict, list[dict]]:
    res = subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--backend", "sqlite", "--store", str(store),
                          "--no-report", "--deterministic", *ARGS], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:] + res.stdout[-2000:]
    (run,) = sorted(store.glob("*/2*/"))
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    return json.loads((run / "results.json").read_text()), history


def test_a_racers_freeze_and_kill_land_inside_their_calls_and_the_rival_runs_in_the_freeze(tmp_path):
    results, history = _run(tmp_path / "a")
    asked = results["deterministic"]["call_faults"]
    assert asked["kill"]["asked"] >= 1 and asked["kill"]["landed"] == asked["kill"]["asked"], asked
    assert asked["freeze"]["landed"] >= 5, asked
    pairs = [(i, c) for i, c in claims_sim_support.pairs(history) if c["type"] in ("ok", "fail", "info")]
    rivals = {inv["after_freeze"]: done for inv, done in pairs if inv.get("after_freeze")}
    frozen = [(inv, done) for inv, done in pairs if (done.get("fault") or {}).get("kind") == "freeze"]
    assert len(frozen) == asked["freeze"]["landed"]
    for inv, done in frozen:
        ev = done["fault"]
        assert ev["exact"] and ev["inside"] and ev["tag"] == inv["fault"]["tag"]
        assert ev["point"]["process"].startswith(f"w{inv['process'] % 4}.")
        assert inv["time"] <= ev["point"]["vt_ns"] <= done["time"]
        rival = rivals[ev["tag"]]
        # the rival was sent once the freeze landed and had its reply while the frozen call was held
        assert ev["point"]["vt_ns"] <= rival["time"] <= done["time"], (inv, done, rival)
    killed = [(inv, done) for inv, done in pairs if (done.get("fault") or {}).get("kind") == "kill"
              and done["fault"].get("exact")]
    assert len(killed) == asked["kill"]["landed"]
    for inv, done in killed:
        assert inv["fault"]["kind"] == "kill" and done["type"] == "info"
        assert done["fault"]["point"]["call"] in STEP_CALLS and inv["time"] <= done["fault"]["point"]["vt_ns"]
    paths = results["workload_coverage"]
    assert paths["call killed inside its work"]["completed"] == len(killed)
    assert paths["publish frozen inside its call while a rival takes over"]["completed"] >= 1
    again, _ = _run(tmp_path / "b")
    assert again["history_sha256"] == results["history_sha256"]
