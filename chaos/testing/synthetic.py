"""Synthetic run directories, for testing reports without running a backend.

``make_run(root, ...)`` writes ``<root>/<name>/<stamp>/`` shaped exactly like
a ``chaos run`` directory (docs/architecture.md): ``test.yaml``,
``history.jsonl`` and ``results.json`` (schema version 1). The history is
deterministic for a seed: ``workers`` agents doing acquire/renew/publish with
replies carrying ``observed_at`` and completions carrying ``wall_ms``, a
pause/resume, a clock skew of slot 0 (its ``wall_ms`` really moves), a kill
that leaves an ``info`` op and a retired process. ``verdict="invalid"`` adds
a dual-ownership anomaly naming two real ops; ``crashed=True`` leaves a torn
history and no ``results.json``.

This is test data, not a checker's result: the verdict is whatever the
caller asks for.
"""

from __future__ import annotations

import json
import os
import random
from datetime import datetime, timezone

import yaml

NS = 1_000_000_000
MS = 1_000_000
T0_WALL_MS = 1_767_225_600_000   # 2026-01-01T00:00:00Z
NAMESPACE = "wbns_synthetic0001"


def _instant(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def synthetic_history(seed: int = 7, workers: int = 3, seconds: float = 6.0) -> list[dict]:
    rnd = random.Random(seed)
    events: list[tuple[int, dict]] = []
    skew_ms = {"from": int(2.0 * NS), "to": int(4.0 * NS), "offset": -3_600_000}
    for thread in range(workers):
        t, process = int(0.05 * NS * (thread + 1)), thread
        while t < seconds * NS:
            f = rnd.choice(["acquire", "renew", "publish", "read"])
            latency = int(rnd.uniform(2, 40) * MS) if not (1.0 * NS < t < 1.8 * NS and thread == 1) else int(700 * MS)
            done = t + latency
            wall = T0_WALL_MS + done // MS
            if thread == 0 and skew_ms["from"] <= done < skew_ms["to"]:
                wall += skew_ms["offset"]
            floor = T0_WALL_MS + done // MS   # the backend's decision time: its floor never followed the skew
            request = {"ledger_namespace": NAMESPACE, "item_id": f"item-{rnd.randint(1, 3)}",
                       "owner_id": f"agent-{process}"}
            events.append((t, {"process": process, "type": "invoke", "f": f, "value": request}))
            kind = rnd.choices(["ok", "fail", "info"], [8, 2, 1 if thread == 2 else 0])[0]
            if kind == "info":
                events.append((done, {"process": process, "type": "info", "f": f, "error": "worker host killed"}))
                process += workers
            else:
                envelope = ({"ok": True, "result": {"read_back": {"observed_at": _instant(floor)}}} if kind == "ok"
                            else {"ok": False, "state": "unchanged",
                                  "error": {"code": "claim-held", "details": {"observed_at": _instant(floor)}}})
                events.append((done, {"process": process, "type": kind, "f": f, "wall_ms": wall,
                                      "value": {"exit": 0 if kind == "ok" else 3, "envelope": envelope}}))
            t = done + int(rnd.uniform(20, 200) * MS)
    nemesis = [
        (1.0, "invoke", "pause", {"targets": [1]}), (1.01, "ok", "pause", {"took_effect": True}),
        (1.8, "invoke", "resume", {"targets": [1]}), (1.81, "ok", "resume", {"took_effect": True}),
        (2.0, "invoke", "clock", {"targets": [0], "offset_s": -3600}),
        (2.02, "ok", "clock", {"took_effect": True}),
        (4.0, "invoke", "clock-reset", {"targets": [0], "offset_s": -3600}),
        (4.02, "ok", "clock-reset", {"took_effect": True}),
        (5.0, "invoke", "kill", {"targets": [2]}), (5.05, "ok", "kill", {"took_effect": True}),
        (seconds, "invoke", "heal", {}), (seconds + 0.01, "ok", "heal", {"took_effect": True}),
        (seconds + 0.02, "info", "final-state", {"durable": {"clock_floors": []}}),
    ]
    for at, typ, f, value in nemesis:
        events.append((int(at * NS), {"process": "nemesis", "type": typ, "f": f, "value": value}))
    events.sort(key=lambda e: e[0])
    return [dict(op, index=i, time=t) for i, (t, op) in enumerate(events)]


def make_run(root: str, name: str = "synthetic", verdict: str = "invalid", seed: int = 7, workers: int = 3,
             crashed: bool = False, empty: bool = False) -> str:
    """Write a synthetic run directory under ``root``; returns its path."""
    run_dir = os.path.join(root, name, f"20260101T0000{seed % 60:02d}.000Z")
    os.makedirs(os.path.join(run_dir, "logs"), exist_ok=True)
    history = [] if empty else synthetic_history(seed, workers)
    command = ["chaos", "run", "--backend", "sqlite", "--workload", "claims", "--nemesis", "pause,clock,kill",
               "--seed", str(seed), "--time-limit", "6", "--workers", str(workers)]
    test = {"name": name, "backend": "sqlite", "workload": "claims", "nemesis": ["pause", "clock", "kill"],
            "workers": workers, "time_limit": 6, "seed": seed, "command": command}
    with open(os.path.join(run_dir, "test.yaml"), "w") as f:
        yaml.safe_dump(test, f, sort_keys=False)
    lines = [json.dumps(op, separators=(",", ":")) + "\n" for op in history]
    with open(os.path.join(run_dir, "history.jsonl"), "w") as f:
        if crashed and lines:
            f.writelines(lines[: len(lines) // 2])
            f.write(lines[len(lines) // 2][:15])   # torn tail
        else:
            f.writelines(lines)
    if crashed:
        return run_dir
    with open(os.path.join(run_dir, "results.json"), "w") as f:
        json.dump(results_for(history, test, verdict, run_dir), f, indent=2)
    return run_dir


def results_for(history: list[dict], test: dict, verdict: str, run_dir: str) -> dict:
    client = [op for op in history if op["process"] != "nemesis" and op["type"] != "invoke"]
    oks = [op for op in client if op["type"] == "ok"]
    checkers = {
        "linearizable": {"valid": True, "anomalies": [], "stats": {"seconds": 0.01}},
        "dual_ownership": {"valid": True, "anomalies": [], "stats": {"seconds": 0.002}},
    }
    if verdict == "invalid" and len(oks) >= 2:
        a, b = oks[1]["index"], oks[2]["index"]
        checkers["dual_ownership"] = {"valid": False, "stats": {"seconds": 0.002}, "anomalies": [{
            "type": "dual-ownership",
            "explanation": f"ops {a} and {b} both hold item-1 of {NAMESPACE} at the same instant with live leases",
            "ops": [a, b], "data": {"item_id": "item-1"}}]}
    elif verdict == "unknown":
        checkers["linearizable"] = {"valid": "unknown", "anomalies": [], "stats": {"seconds": 5.0},
                                    "unknown_reasons": ["search timed out after 5 s"]}
    return {
        "schema_version": 1, "test": test,
        "capabilities": {"ok": True, "result": {"backend": {"name": "sqlite-strict-fenced",
                                                            "coordination_scope": "shared-transactional-coordinator"},
                                                "operations": {"work_claim": {"mode": "fenced",
                                                                              "safe_exclusive_dispatch": True}}}},
        "verdict": verdict, "exit_code": {"valid": 0, "invalid": 1, "unknown": 2}[verdict],
        "checkers": checkers,
        "fault_coverage": {"pause": {"requested": True, "fired": 1, "took_effect": 1},
                           "clock": {"requested": True, "fired": 1, "took_effect": 1},
                           "kill": {"requested": True, "fired": 1, "took_effect": 1}},
        "stats": {"ops": len(client), "ok": len(oks), "fail": sum(op["type"] == "fail" for op in client),
                  "info": sum(op["type"] == "info" for op in client), "duration_s": 6.0},
        "started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:00:07Z", "run_dir": run_dir,
    }
