"""Per-worker wall-clock faults through libfaketime's timestamp file.

Each worker is exec'd with the PyPI libfaketime preloaded and its own
timestamp file (``tmp/clock-<slot>``); children it starts (an external
backend's CLI) inherit both. A ``clock`` op has a drawn ``mode``:

* ``backward``: the targets' wall clock jumps back by ``offset_s`` (minutes
  to hours) and ticks on from there;
* ``forward``: the same, forward;
* ``strobe``: while active, the offset alternates between ``+offset_s`` and
  ``-offset_s`` every ``period_ms`` (a thread of the nemesis rewrites the
  files), i.e. the clock jumps back and forth many times a second.

A forward skew moves the durable clock floor ahead of real time by its
offset once a skewed worker decides; until real time catches up, every other
worker's "now" is that floor, frozen, so a lease whose holder died never
expires meanwhile. ``clock_forward_s`` (opts) replaces the forward and strobe
offsets: a slow backend's run (``chaos.timing``) draws offsets it outlives.

The heal op ``clock-reset`` writes ``+0`` (and stops a strobe). Monotonic time
is never faked. Every parameter is drawn from the seed, so the schedule is a
pure function of ``(seed, config)``; only the strobe's flips happen in real time.

Evidence (``took_effect``): the target worker's *own* clock, asked with the
host ``now`` command, differs from the runner's ``time.time()`` by about the
requested offset (either sign for a strobe), while the runner's own wall
clock did not move against its monotonic clock. Only live workers are asked
(a worker is never started just for that: its backend may be down); when no
target answered at the fault, they are asked again at the heal, before the
reset (``clocks_before_reset``).
"""

from __future__ import annotations

import threading
import time

from chaos.nemesis.base import FaultCycle, Package, draw_targets, stopped_reason

BACKWARD_S = (-7200, -3600, -900, -300, -120)
FORWARD_S = (120, 600, 3600)
STROBE_S = (30, 120, 600)
STROBE_PERIOD_MS = (50, 250)
MODES = ("backward", "forward", "strobe")
TOLERANCE_MS = 5000


def drawer(forward_s=FORWARD_S, strobe_s=STROBE_S):
    """The seeded draw of one clock fault; ``forward_s`` / ``strobe_s``: the
    offsets a forward jump and a strobe draw from (``clock_forward_s`` in the
    nemesis opts replaces both: ``chaos.timing.clock_offsets``)."""
    forward_s, strobe_s = tuple(forward_s), tuple(strobe_s)

    def draw(s, workers):
        targets, s = draw_targets(s, workers, most=max(1, workers // 2))
        mode, s = s.choice(MODES)
        if mode == "strobe":
            offset, s = s.choice(strobe_s)
            period, s = s.randint(*STROBE_PERIOD_MS)
            return {"targets": targets, "mode": mode, "offset_s": offset, "period_ms": period}, s
        offset, s = s.choice(BACKWARD_S if mode == "backward" else forward_s)
        return {"targets": targets, "mode": mode, "offset_s": offset}, s

    return draw


_draw = drawer()


class Strobe:
    """Alternate the offset of some clock faults until stopped."""

    def __init__(self, faults: list, offset_s: int, period_ms: int):
        self.faults, self.offset_s, self.period_s = faults, offset_s, period_ms / 1000
        self.flips = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="clock-strobe")
        self._thread.start()

    def _loop(self) -> None:
        sign = 1
        while True:
            for fault in self.faults:
                fault.set_offset(sign * self.offset_s)
            self.flips += 1
            sign = -sign
            if self._stop.wait(self.period_s):
                return

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(2)
        return self.flips


def observe(env, slot, wants_ms: list[int], samples: int = 1, spacing_s: float = 0.0) -> dict:
    """Ask the worker for its own ``now`` and compare with ours."""
    seen = []
    for i in range(samples):
        if i:
            time.sleep(spacing_s)
        before = time.time_ns() // 1_000_000
        now = slot.now(timeout=2.0)
        after = time.time_ns() // 1_000_000
        if now is None:
            continue
        seen.append(now["wall_ms"] - (before + after) // 2)
    shifted = any(abs(o - w) < TOLERANCE_MS for o in seen for w in wants_ms)
    return {"worker_offsets_ms": seen, "shifted": shifted}


def runner_drift_ms(env) -> int | None:
    """How far the runner's wall clock moved against its monotonic clock since
    the run started (about 0 unless someone skewed *our* clock)."""
    wall0 = getattr(env, "wall0_ns", None)
    if wall0 is None:
        return None
    return round(((time.time_ns() - wall0) - (time.monotonic_ns() - env.t0)) / 1e6)


def _wants(value: dict) -> list[int]:
    offset_ms = value["offset_s"] * 1000
    return [offset_ms, -offset_ms] if value.get("mode") == "strobe" else [offset_ms]


def _live_pid(slot, wait_s: float, start: bool):
    """The PID of the slot's worker: started if ``start``, else waited for
    (the slot starts a fresh host at its next op) at most ``wait_s``."""
    if start:
        try:
            slot.ensure_started()
        except Exception:
            return None
    deadline = time.monotonic() + wait_s
    while slot.pid is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return slot.pid


def _observe_all(env, faults, value: dict, wants: list[int], start: bool = False,
                 wait_total_s: float = 3.0) -> list[dict]:
    """Evidence from every target's live worker. A worker is started just to be
    asked only when ``start`` (the final phase, or a backend without a server
    that could be down); otherwise we wait for the slot's next host, at most
    ``wait_total_s`` over all targets (the nemesis step itself is bounded)."""
    from chaos.faults.faketime import preloaded

    out = []
    for t, _ in faults:
        slot = env.slots[t]
        stopped = stopped_reason(env, t)
        if stopped:  # its `now` would only time out: the skew is still set, evidence comes later
            out.append({"slot": t, "pid": slot.pid, "preloaded": False, "shifted": False, "note": stopped})
            continue
        pid = _live_pid(slot, 0.0 if start else wait_total_s / max(1, len(faults)), start)
        if pid is None:
            out.append({"slot": t, "pid": None, "preloaded": False, "shifted": False, "note": "no live worker"})
            continue
        samples = 3 if wants != [0] and value.get("mode") == "strobe" else 1
        seen = observe(env, slot, wants, samples, value.get("period_ms", 0) / 2000)
        out.append({"slot": t, "pid": pid, "preloaded": preloaded(pid, "libfaketime"), **seen})
    return out


def package(opts: dict) -> Package:
    def execute(env, op):
        value = op["value"]
        reset = op["f"] == "clock-reset"
        strobes = env.__dict__.setdefault("clock_strobes", {})
        faults = [(t, env.clock_faults[t]) for t in value["targets"] if t in env.clock_faults]
        drift = runner_drift_ms(env)
        runner_steady = drift is None or abs(drift) < TOLERANCE_MS
        if reset:
            # last chance for evidence: the skew is still in place until the reset below
            serverless = getattr(getattr(env, "target", None), "server", None) is None
            before = [] if env.__dict__.get("clock_effect_seen") else _observe_all(
                env, faults, value, _wants(value), start=bool(op.get("final")) or serverless, wait_total_s=3.0)
            late = runner_steady and any(c["preloaded"] and c["shifted"] for c in before)
            if late:
                env.coverage.took_effect("clock")
            elif not env.__dict__.get("clock_effect_seen") and not op.get("final"):
                # No worker could show the skew yet (all retired, the backend down):
                # keep it in place, so every fresh worker inherits it, and let the
                # final phase start one and take the evidence before resetting.
                return {"mode": "reset-deferred", "clocks_before_reset": before, "runner_drift_ms": drift,
                        "took_effect": False, "note": "no worker has shown the skew yet; reset at the final phase"}
            for t, fault in faults:
                old = strobes.pop(t, None)
                if old is not None:
                    old.stop()
                fault.reset()
            env.clock_active = None
            return {"mode": "reset", "clocks_before_reset": before, "runner_drift_ms": drift, "took_effect": late}
        for t, _ in faults:
            old = strobes.pop(t, None)
            if old is not None:
                old.stop()
        if value.get("mode") == "strobe":
            strobe = Strobe([f for _, f in faults], value["offset_s"], value["period_ms"])
            for t, _ in faults:
                strobes[t] = strobe
        else:
            for _, fault in faults:
                fault.set_offset(value["offset_s"])
        out = _observe_all(env, faults, value, _wants(value))
        took = runner_steady and any(c["preloaded"] and c["shifted"] for c in out)
        env.clock_effect_seen = took
        env.clock_active = value
        return {"mode": value.get("mode", "backward"), "clocks": out, "runner_drift_ms": drift, "took_effect": took}

    def final(env):
        active = env.__dict__.get("clock_active")
        if active is not None:  # not reset yet (past the time limit, or deferred): reset now, with evidence
            value = execute(env, {"f": "clock-reset", "value": active, "final": True})
        else:
            value = {}
        for strobe in set(env.__dict__.get("clock_strobes", {}).values()):
            strobe.stop()
        env.__dict__.get("clock_strobes", {}).clear()
        for fault in env.clock_faults.values():
            fault.reset()
        return {**value, "late_evidence": value.get("took_effect"), "took_effect": True,
                "reset": sorted(env.clock_faults)}

    forward = opts.get("clock_forward_s")
    draw = drawer(forward, forward) if forward else _draw
    gen = FaultCycle("clock", draw, opts.get("workers", 1), gap_ms=opts.get("clock_gap_ms", (1500, 5000)),
                     dur_ms=opts.get("clock_ms", (2000, 6000)), heal="clock-reset")
    return Package("clock", gen, execute, final, "workers", requires=("faketime",), heals=("clock-reset",))
