"""Derived series of one history, for the report's plots and tables.

Pure functions over history records (docs/architecture.md, "History"): they
never raise on a partial history (a crashed run leaves open invokes, a torn
tail, no final-state record) and return empty series when there is nothing to
show. Times are converted from the runner's ns to seconds since the start.

Worker threads: a retired process ``p`` is replaced by ``p + workers`` on the
same client thread (``workloads.interpreter``), so ``p % workers`` is the
thread (the row of the timeline) and the nemesis's slot number.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone

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
    invoke: dict = field(default_factory=dict, repr=False)
    completion: dict | None = field(default=None, repr=False)

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


def end_time(history: list[dict]) -> float:
    return max((seconds(op) for op in history), default=0.0)


def infer_workers(history: list[dict], declared=None) -> int:
    """The number of client threads: declared in the test, else the distinct processes."""
    if isinstance(declared, int) and declared > 0:
        return declared
    procs = {op.get("process") for op in history if isinstance(op.get("process"), int)}
    return max(1, len(procs))


def op_spans(history: list[dict], workers: int) -> list[OpSpan]:
    """Pair each client invoke with its completion (same process, next completion)."""
    open_by_process: dict = {}
    spans: list[OpSpan] = []
    for op in history:
        p = op.get("process")
        if p == "nemesis" or p is None:
            continue
        if op.get("type") == "invoke":
            thread = p % workers if isinstance(p, int) else 0
            span = OpSpan(p, thread, str(op.get("f")), seconds(op), None, "open", op.get("index", -1), invoke=op)
            open_by_process[p] = span
            spans.append(span)
        elif op.get("type") in ("ok", "fail", "info"):
            span = open_by_process.pop(p, None)
            if span is not None:
                span.end, span.type = seconds(op), op["type"]
                span.completion_index, span.completion = op.get("index"), op
    return spans


def nemesis_windows(history: list[dict]) -> list[Window]:
    """Fault windows: lasting faults run until their heal (or the end of the
    history); instantaneous ones span their own invoke..completion."""
    horizon = end_time(history)
    windows: list[Window] = []
    open_fault: dict[str, Window] = {}
    last_invoke: dict[str, Window] = {}
    for op in history:
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
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` -> Unix ms (None if absent or malformed)."""
    if not isinstance(text, str) or not text.endswith("Z"):
        return None
    try:
        dt = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    return int(dt.timestamp() * 1000)


def observed_at(envelope) -> int | None:
    """The backend's decision time carried by a reply envelope, in Unix ms."""
    if not isinstance(envelope, dict):
        return None
    result = envelope.get("result") if isinstance(envelope.get("result"), dict) else {}
    for key in ("read_back", "claim_read_back"):
        rb = result.get(key)
        if isinstance(rb, dict) and parse_instant(rb.get("observed_at")) is not None:
            return parse_instant(rb["observed_at"])
    error = envelope.get("error") if isinstance(envelope.get("error"), dict) else {}
    details = error.get("details") if isinstance(error.get("details"), dict) else {}
    if details.get("observed_at") is None and envelope.get("decided_at") is not None:
        return parse_instant(envelope.get("decided_at"))   # an issue-lock reply: the store's decision time
    return parse_instant(details.get("observed_at"))


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


def clock_series(history: list[dict], spans: list[OpSpan]) -> ClockSeries:
    raw = []
    for s in spans:
        wall = (s.completion or {}).get("wall_ms")
        if isinstance(wall, (int, float)):
            raw.append((s, wall - s.end * 1000.0))
    decisions_raw = []
    for s in spans:
        comp = s.completion or {}
        value = comp.get("value") if isinstance(comp.get("value"), dict) else {}
        at = observed_at(value.get("envelope"))
        if at is not None:
            req = s.invoke.get("value") if isinstance(s.invoke.get("value"), dict) else {}
            mid = (s.start + s.end) / 2   # the decision happened somewhere inside invoke..completion
            scope = req.get("ledger_namespace") or "/".join(str(req.get(k, "?")) for k in ("remote", "org", "repo")) \
                if "ledger_namespace" in req or "repo" in req else "?"
            decisions_raw.append((str(scope), mid, at - mid * 1000.0))
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


def measured_offsets(history: list[dict]) -> dict:
    """Offsets the clock nemesis measured on the target worker itself (its own
    ``time.time()`` through the host's ``now``): ``clocks[].worker_offsets_ms``
    of clock faults, and ``clocks_before_reset`` of resets and the final heal."""
    out: dict[int, list] = {}
    for op in history:
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


def commanded_offsets(history: list[dict]) -> dict:
    """The offsets the clock nemesis set, per worker slot, as step points (ms)."""
    steps: dict[int, list] = {}
    for op in history:
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
