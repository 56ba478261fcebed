"""Derived series of one history, for the report's plots and tables.

Pure functions over the one history type, ``checkers.history.History`` (a
list of records is read into one first): they never raise on a partial
history (a crashed run leaves open invokes, a torn tail, no final-state
record) and return empty series when there is nothing to show. Times are
converted from the runner's ns to seconds since the start.

Worker threads: a retired process ``p`` is replaced by ``p + workers`` on the
same client thread (``workloads.interpreter``), so ``p % workers`` is the
thread (the row of the timeline) and the nemesis's slot number.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from checkers.history import History, instant_ms

NS = 1_000_000_000

#: heal op -> the fault it ends; faults absent here are instantaneous
HEAL_OF = {"resume": "pause", "clock-reset": "clock", "fsync-heal": "fsync"}
LASTING = frozenset(HEAL_OF.values())


@dataclass
class OpSpan:
    """One client operation from invoke to completion (``end`` None: never completed)."""

    process: object
    thread: int
    f: str
    start: float
    end: float | None
    type: str                 # ok | fail | info | open
    invoke_index: int
    completion_index: int | None = None
    wall_ms: float | None = None      # the worker's own wall clock at completion
    observed_ms: int | None = None    # the backend's decision time the reply states
    namespace: str | None = None

    @property
    def latency_ms(self) -> float | None:
        return None if self.end is None else (self.end - self.start) * 1000.0


@dataclass
class Window:
    """A fault as it was in force: from its invoke to its heal (or the run's end)."""

    f: str
    start: float
    end: float
    value: dict
    took_effect: object = None
    indices: list = field(default_factory=list)


def seconds(op: dict) -> float:
    t = op.get("time")
    return float(t) / NS if isinstance(t, (int, float)) else 0.0


def _ns_s(t) -> float | None:
    return float(t) / NS if isinstance(t, (int, float)) else None


def end_time(history) -> float:
    h = History.of(history)
    ends = [seconds(op) for op in h.nemesis]
    ends += [t / NS for col in (h.t_invoke, h.t_done) for t in col if t == t]
    return max(ends, default=0.0)


def infer_workers(history, declared=None) -> int:
    """The number of client threads: declared in the test, else the distinct processes."""
    if isinstance(declared, int) and declared > 0:
        return declared
    procs = {op.process for op in History.of(history).ops if isinstance(op.process, int)}
    return max(1, len(procs))


def op_spans(history, workers: int) -> list[OpSpan]:
    """Each client operation as a span (``History`` paired it: same process, next completion)."""
    spans: list[OpSpan] = []
    h = History.of(history)
    for n, op in enumerate(h.ops):
        p = op.process
        if p is None:
            continue
        t0, t1, wall = h.times(n)
        thread = p % workers if isinstance(p, int) else 0
        spans.append(OpSpan(p, thread, str(op.f), _ns_s(t0) or 0.0,
                            None if op.cp is None else (_ns_s(t1) or 0.0),
                            "open" if op.cp is None else op.type, op.i, op.c, wall,
                            op.t, op.key[0] if op.key else None))
    return spans


def nemesis_windows(history) -> list[Window]:
    """Fault windows: lasting faults run until their heal (or the end of the
    history); instantaneous ones span their own invoke..completion."""
    h = History.of(history)
    horizon = end_time(h)
    windows: list[Window] = []
    open_fault: dict[str, Window] = {}
    last_invoke: dict[str, Window] = {}
    for op in h.nemesis:
        if op.get("process") != "nemesis":
            continue
        f, typ = str(op.get("f")), op.get("type")
        if typ == "invoke":
            if f in HEAL_OF:
                w = open_fault.pop(HEAL_OF[f], None)
                if w is not None:
                    w.end = seconds(op)
                    w.indices.append(op.get("index"))
                continue
            if f in ("heal", "final-state"):
                for w in open_fault.values():
                    w.end = seconds(op)
                open_fault.clear()
                continue
            value = op.get("value") if isinstance(op.get("value"), dict) else {}
            w = Window(f, seconds(op), seconds(op), value, indices=[op.get("index")])
            windows.append(w)
            last_invoke[f] = w
            if f in LASTING:
                w.end = horizon
                open_fault[f] = w
        elif f in last_invoke and f not in HEAL_OF:
            w = last_invoke.pop(f)
            if f not in LASTING:
                w.end = max(w.end, seconds(op))
            value = op.get("value")
            if isinstance(value, dict):
                w.took_effect = value.get("took_effect")
            w.indices.append(op.get("index"))
    return windows


def latency_points(spans: list[OpSpan]) -> list[tuple[float, float, str]]:
    """(invoke time s, latency ms, outcome) of every completed op."""
    return [(s.start, s.latency_ms, s.type) for s in spans if s.end is not None]


def quantile_series(points, bins: int = 30, qs=(0.5, 0.95, 0.99)) -> dict:
    """Per time bin, the latency quantiles: ``{q: ([t...], [ms...])}``."""
    if not points:
        return {q: ([], []) for q in qs}
    horizon = max(p[0] for p in points) or 1.0
    width = horizon / bins if horizon > 0 else 1.0
    buckets: dict[int, list[float]] = {}
    for t, ms, _ in points:
        buckets.setdefault(min(int(t / width), bins - 1), []).append(ms)
    out = {q: ([], []) for q in qs}
    for b in sorted(buckets):
        vals = sorted(buckets[b])
        for q in qs:
            xs, ys = out[q]
            xs.append((b + 0.5) * width)
            ys.append(_quantile(vals, q))
    return out


def _quantile(sorted_vals: list[float], q: float) -> float:
    if len(sorted_vals) == 1:
        return sorted_vals[0]
    pos = q * (len(sorted_vals) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def throughput(spans: list[OpSpan], horizon: float, bin_s: float | None = None) -> tuple[list, dict]:
    """Completions per second per outcome, in bins: ``(bin centres, {type: [rate...]})``."""
    if horizon <= 0:
        return [], {}
    bin_s = bin_s or max(0.25, horizon / 40)
    n = int(horizon / bin_s) + 1
    rates = {t: [0.0] * n for t in ("ok", "fail", "info")}
    for s in spans:
        if s.end is not None and s.type in rates:
            rates[s.type][min(int(s.end / bin_s), n - 1)] += 1.0 / bin_s
    return [(i + 0.5) * bin_s for i in range(n)], rates


def parse_instant(text) -> int | None:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` -> Unix ms (None if absent or malformed): the one parser."""
    return instant_ms(text)


@dataclass
class ClockSeries:
    """Wall-clock offsets (ms) relative to the runner's clock, over run time (s).

    ``baseline_ms`` is the median of ``wall_ms - runner ms`` over all
    completions: the unfaulted relation between the two clocks, so an offset
    of 0 means "agrees with the runner".
    """

    baseline_ms: float | None
    workers: dict = field(default_factory=dict)      # thread -> [(t, offset_ms)]
    commanded: dict = field(default_factory=dict)    # slot -> [(t, offset_ms)] step points
    decisions: dict = field(default_factory=dict)    # namespace -> [(t, offset_ms)]
    measured: dict = field(default_factory=dict)     # slot -> [(t, offset_ms)] shown by the worker itself

    @property
    def empty(self) -> bool:
        return not (self.workers or self.commanded or self.decisions or self.measured)


def clock_series(history, spans: list[OpSpan]) -> ClockSeries:
    raw = []
    for s in spans:
        if s.wall_ms is not None and s.end is not None:
            raw.append((s, s.wall_ms - s.end * 1000.0))
    decisions_raw = []
    for s in spans:
        if s.observed_ms is not None and s.end is not None:
            mid = (s.start + s.end) / 2   # the decision happened somewhere inside invoke..completion
            decisions_raw.append((str(s.namespace or "?"), mid, s.observed_ms - mid * 1000.0))
    base_pool = [d for _, d in raw] or [d for _, _, d in decisions_raw]
    baseline = statistics.median(base_pool) if base_pool else None
    out = ClockSeries(baseline)
    out.commanded = commanded_offsets(history)
    out.measured = measured_offsets(history)
    if baseline is None:
        return out
    for s, d in raw:
        out.workers.setdefault(s.thread, []).append((s.end, d - baseline))
    for ns, t, d in decisions_raw:
        out.decisions.setdefault(ns, []).append((t, d - baseline))
    for pts in out.decisions.values():
        pts.sort()
    return out


def measured_offsets(history) -> dict:
    """Offsets the clock nemesis measured on the target worker itself (its own
    ``time.time()`` through the host's ``now``): ``clocks[].worker_offsets_ms``
    of clock faults, and ``clocks_before_reset`` of resets and the final heal."""
    out: dict[int, list] = {}
    for op in History.of(history).nemesis:
        if op.get("process") != "nemesis" or op.get("type") != "ok" or op.get("f") not in (
                "clock", "clock-reset", "heal"):
            continue
        value = op.get("value") if isinstance(op.get("value"), dict) else {}
        for c in (value.get("clocks") or []) + (value.get("clocks_before_reset") or []):
            if not isinstance(c, dict) or "slot" not in c:
                continue
            samples = c.get("worker_offsets_ms")
            if not isinstance(samples, list):
                samples = [c["offset_ms"]] if isinstance(c.get("offset_ms"), (int, float)) else []
            for ms in samples:
                if isinstance(ms, (int, float)):
                    out.setdefault(c["slot"], []).append((seconds(op), float(ms)))
    return out


def commanded_offsets(history) -> dict:
    """The offsets the clock nemesis set, per worker slot, as step points (ms)."""
    steps: dict[int, list] = {}
    for op in History.of(history).nemesis:
        if op.get("process") != "nemesis" or op.get("type") != "invoke":
            continue
        value = op.get("value") if isinstance(op.get("value"), dict) else {}
        if op.get("f") == "clock":
            for t in value.get("targets") or []:
                steps.setdefault(t, [(0.0, 0.0)]).append((seconds(op), float(value.get("offset_s", 0)) * 1000))
        elif op.get("f") in ("clock-reset", "heal"):
            targets = value.get("targets") or list(steps)
            for t in targets:
                if t in steps:
                    steps[t].append((seconds(op), 0.0))
    return steps
