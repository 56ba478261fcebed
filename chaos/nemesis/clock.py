"""Per-worker wall-clock faults through libfaketime's timestamp file.

Each worker is exec'd with the PyPI libfaketime preloaded and its own
timestamp file (``tmp/clock-<slot>``). A ``clock`` op writes an offset
(backward by minutes to hours, or forward) into the target's file; the heal op
``clock-reset`` writes ``+0``. The monotonic clock is never faked.

Evidence (``took_effect``): libfaketime is mapped into the target worker
(``/proc/PID/maps``) *and* a probe process started with the same preload and
the same timestamp file reads a wall clock shifted by the requested offset
(``date +%s%3N``), i.e. the worker's ``time.time()`` moved.
"""

from __future__ import annotations

import os
import subprocess
import time

from chaos.nemesis import FaultCycle, Package, draw_targets

OFFSETS_S = (-7200, -3600, -900, -300, -120, 120, 600)


def probe_offset_ms(env_vars: dict) -> int | None:
    """Wall clock seen by a fresh preloaded process minus ours, in ms."""
    try:
        before = time.time_ns() // 1_000_000
        out = subprocess.run(["date", "+%s%3N"], env={**os.environ, **env_vars}, capture_output=True,
                             text=True, timeout=5)
        after = time.time_ns() // 1_000_000
        return int(out.stdout.strip()) - (before + after) // 2
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def _draw(s, workers):
    targets, s = draw_targets(s, workers, most=max(1, workers // 2))
    offset, s = s.choice(OFFSETS_S)
    return {"targets": targets, "offset_s": offset}, s


def package(opts: dict) -> Package:
    def execute(env, op):
        value, out = op["value"], []
        reset = op["f"] == "clock-reset"
        for t in value["targets"]:
            fault = env.clock_faults.get(t)
            if fault is None:
                continue
            if reset:
                fault.reset()
            else:
                fault.set_offset(value["offset_s"])
            want = 0 if reset else value["offset_s"] * 1000
            seen = probe_offset_ms(fault.env())
            pid = env.slots[t].pid
            from chaos.faults.faketime import preloaded

            loaded = pid is not None and preloaded(pid, "libfaketime")
            out.append({"slot": t, "pid": pid, "preloaded": loaded, "offset_ms": seen,
                        "shifted": seen is not None and abs(seen - want) < 5000})
        return {"clocks": out, "took_effect": any(c["preloaded"] and c["shifted"] for c in out)}

    def final(env):
        for fault in env.clock_faults.values():
            fault.reset()
        return {"took_effect": True, "reset": sorted(env.clock_faults)}

    gen = FaultCycle("clock", _draw, opts.get("workers", 1), gap_ms=opts.get("clock_gap_ms", (1500, 5000)),
                     dur_ms=opts.get("clock_ms", (2000, 6000)), heal="clock-reset")
    return Package("clock", gen, execute, final, "workers", requires=("faketime",), heals=("clock-reset",))
