"""The report's figures, drawn with matplotlib's Agg canvas into PNG bytes.

No pyplot: each figure is a ``matplotlib.figure.Figure`` on its own
``FigureCanvasAgg``, so drawing never touches global GUI state and works in
worker threads and headless CI. Every function takes the derived series of
``chaos.reports.analysis`` and returns PNG bytes, or ``None`` when there is
nothing to draw (the HTML then says so instead of showing an empty frame).

Colours follow Jepsen's timeline: ok blue, fail pink, info orange; an op
still open at the end of the history is grey. Faults are drawn the same way
on every time-axis plot: a labelled lane per fault above the frame (bar =
in force, wedge = instant) and a faint edged shade across it. The clock plot
stays readable with many workers: the clock-faulted slots get a colour
each, every other worker is one grey series, and the y range holds every
point and the floor with a margin.
"""

from __future__ import annotations

import io

from matplotlib import rcParams, transforms
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from chaos.reports.analysis import ClockSeries, OpSpan, Window

OUTCOME_COLORS = {"ok": "#4c9be8", "fail": "#e377c2", "info": "#ff9f1c", "open": "#9e9e9e"}
FAULT_COLORS = {
    "kill": "#d62728", "pause": "#9467bd", "clock": "#2ca02c", "fsync": "#8c564b",
    "lost-reply": "#17becf", "restart": "#bcbd22",
}
DPI = 100


def _png(fig: Figure) -> bytes:
    # The tight box is measured from the text extents alone: ``bbox_inches="tight"``
    # would first draw the whole figure once without output just to find it
    # (the same pixels, a third slower; the report's figures are most of its time).
    canvas = FigureCanvasAgg(fig)
    box = fig.get_tightbbox(canvas.get_renderer()).padded(rcParams["savefig.pad_inches"])
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches=box)
    return buf.getvalue()


def _plain_ticks(axis) -> None:
    """Ticks as plain numbers (0.01, 1, 200): the log scales' default
    labels are mathtext, whose parser cost the report more than a second."""
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


#: height of one fault lane above a time-axis plot, in inches
LANE_IN = 0.17
#: the width of one character of a 7-point label, in inches (a little more than DejaVu Sans' average)
CHAR_IN = 7 * 0.62 / 72


class Labels:
    """Labels that never overlap: each row of a plot has ``lanes`` text lanes;
    a label goes into the first lane of its row where it overlaps no label
    placed before, else it is left out (``omitted`` counts them; the plot says so
    and the report's tables list every op). Widths are estimated from the
    character count and the axes' data units per inch (no draw needed)."""

    def __init__(self, ax, x_range: tuple[float, float], lanes: int = 2):
        width_in = max(ax.get_position().width * ax.figure.get_figwidth(), 0.5)
        self.per_in = (x_range[1] - x_range[0]) / width_in
        self.lanes, self.omitted = lanes, 0
        self.taken: dict = {}   # row -> per lane, the (start, end) of its labels

    def place(self, row, x: float, text: str, pad_chars: float = 1.0) -> int | None:
        """The lane for ``text`` starting at ``x`` on ``row`` (0 = first), or None: left out."""
        lanes = self.taken.setdefault(row, [[] for _ in range(self.lanes)])
        end = x + (len(text) + pad_chars) * CHAR_IN * self.per_in
        for lane, spans in enumerate(lanes):
            if all(end <= a or x >= b for a, b in spans):
                spans.append((x, end))
                return lane
        self.omitted += 1
        return None

    def note(self) -> str:
        return f" ({self.omitted} labels left out where they would overlap)" if self.omitted else ""


def _shade(ax, windows: list[Window], horizon: float) -> list:
    """Fault windows on a time-axis plot: one labelled lane per fault above the
    frame (a solid bar while the fault is in force, a wedge for an instant
    fault), plus a faint full-height shade edged in the fault's colour so
    overlapping windows stay apart. Returns the legend handles."""
    if not windows:
        return []
    names = [f for f in FAULT_COLORS if any(w.f == f for w in windows)]
    names += sorted({w.f for w in windows} - set(names))
    fig = ax.figure
    axes_in = max(ax.get_position().height * fig.get_figheight(), 0.5)
    lane = LANE_IN / axes_in                      # one lane, in axes fractions
    band = transforms.blended_transform_factory(ax.transData, ax.transAxes)
    label = transforms.blended_transform_factory(ax.transAxes, ax.transAxes)
    instant = max(horizon / 400, 1e-3)
    for i, name in enumerate(names):
        color = FAULT_COLORS.get(name, "#7f7f7f")
        y0 = 1.0 + lane * (i + 0.25)
        ax.text(-0.004, y0 + lane * 0.35, name, transform=label, ha="right", va="center", fontsize=7,
                color=color, fontweight="bold", clip_on=False)
        for w in (w for w in windows if w.f == name):
            if w.end - w.start < instant:
                ax.plot([w.start], [y0 + lane * 0.35], marker="v", markersize=5, color=color, transform=band,
                        clip_on=False, zorder=6)
                ax.axvline(w.start, color=color, linewidth=0.9, alpha=0.5, zorder=0)
                continue
            ax.add_patch(Rectangle((w.start, y0), w.end - w.start, lane * 0.7, transform=band, color=color,
                                   clip_on=False, zorder=6, linewidth=0))
            ax.axvspan(w.start, w.end, color=color, alpha=0.07, lw=0, zorder=0)
            for x in (w.start, w.end):
                ax.axvline(x, color=color, linewidth=0.7, alpha=0.45, linestyle="--", zorder=0)
    ax.set_title(ax.get_title(), pad=6 + 72 * LANE_IN * len(names))
    return [Patch(color=FAULT_COLORS.get(f, "#7f7f7f"), label=f"fault: {f}") for f in names]


def timeline(spans: list[OpSpan], windows: list[Window], workers: int, horizon: float,
             highlight: set | None = None) -> bytes | None:
    """One row per worker thread; each op a bar from invoke to completion."""
    fig = timeline_figure(spans, windows, workers, horizon, highlight)
    return None if fig is None else _png(fig)


def timeline_figure(spans: list[OpSpan], windows: list[Window], workers: int, horizon: float,
                    highlight: set | None = None) -> Figure | None:
    if not spans and not windows:
        return None
    highlight = highlight or set()
    fig = Figure(figsize=(11, 1.2 + 0.45 * workers))
    ax = fig.add_subplot()
    ax.set_title("operations per worker (bar = invoke..completion)")
    handles = _shade(ax, windows, horizon)
    for outcome, color in OUTCOME_COLORS.items():
        rows: dict[int, list] = {}
        for s in spans:
            if s.type == outcome:
                end = s.end if s.end is not None else horizon
                rows.setdefault(s.thread, []).append((s.start, max(end - s.start, horizon / 2000 or 1e-4)))
        for thread, bars in rows.items():
            ax.broken_barh(bars, (thread - 0.35, 0.7), facecolors=color, edgecolors="none",
                           hatch="//" if outcome == "open" else None)
        handles.append(Patch(color=color, label=outcome))
    labels = Labels(ax, (0, max(horizon, 1e-3)), lanes=1)
    for s in sorted(spans, key=lambda s: s.start):
        if s.invoke_index in highlight or s.completion_index in highlight:
            end = s.end if s.end is not None else horizon
            ax.broken_barh([(s.start, max(end - s.start, horizon / 500))], (s.thread - 0.45, 0.9),
                           facecolors="none", edgecolors="black", linewidth=1.6, zorder=5)
            if labels.place(s.thread, s.start, f"#{s.invoke_index}") is not None:
                ax.annotate(f"#{s.invoke_index}", (s.start, s.thread + 0.45), fontsize=7, color="black", zorder=6)
    if highlight:
        handles.append(Patch(facecolor="none", edgecolor="black", label="anomaly op" + labels.note()))
    ax.set_yticks(range(workers))
    ax.set_yticklabels([f"worker {t}" for t in range(workers)])
    ax.set_ylim(-0.6, workers - 0.4)
    ax.set_xlim(0, max(horizon, 1e-3))
    ax.invert_yaxis()
    ax.set_xlabel("time since start (s)")
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    return fig


def latency(points, quantiles: dict, windows: list[Window], horizon: float) -> bytes | None:
    """Latency of each op at its invoke time, with p50/p95/p99 over time bins."""
    if not points:
        return None
    fig = Figure(figsize=(11, 3.6))
    ax = fig.add_subplot()
    ax.set_title("latency")
    handles = _shade(ax, windows, horizon)
    for outcome in ("ok", "fail", "info"):
        xs = [t for t, ms, o in points if o == outcome]
        ys = [max(ms, 0.01) for t, ms, o in points if o == outcome]
        if xs:
            ax.scatter(xs, ys, s=6, color=OUTCOME_COLORS[outcome], alpha=0.6, label=outcome, linewidths=0)
    styles = {0.5: ("p50", "-"), 0.95: ("p95", "--"), 0.99: ("p99", ":")}
    for q, (xs, ys) in quantiles.items():
        name, ls = styles.get(q, (f"p{int(q * 100)}", "-"))
        if xs:
            ax.plot(xs, [max(y, 0.01) for y in ys], ls, color="black", linewidth=1.2, label=name)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))  # labelled ticks even within one decade
    _plain_ticks(ax.yaxis)
    ax.set_xlim(0, max(horizon, 1e-3))
    ax.set_xlabel("invoke time (s)")
    ax.set_ylabel("latency (ms, log)")
    h, _ = ax.get_legend_handles_labels()
    ax.legend(handles=h + handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    return _png(fig)


def rate(xs: list, rates: dict, windows: list[Window], horizon: float) -> bytes | None:
    """Completions per second, per outcome, over time."""
    if not xs or not any(any(v) for v in rates.values()):
        return None
    fig = Figure(figsize=(11, 3.0))
    ax = fig.add_subplot()
    ax.set_title("throughput")
    handles = _shade(ax, windows, horizon)
    for outcome, ys in rates.items():
        if any(ys):
            ax.plot(xs, ys, color=OUTCOME_COLORS[outcome], linewidth=1.5, label=outcome)
    ax.set_xlim(0, max(horizon, 1e-3))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("completion time (s)")
    ax.set_ylabel("ops / s")
    h, _ = ax.get_legend_handles_labels()
    ax.legend(handles=h + handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    return _png(fig)


#: clock-faulted slots drawn in a colour of their own; more are grouped
MAX_CLOCK_SLOTS = 8
CLOCK_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
SYMLOG_LINTHRESH = 0.1


def clocks(series: ClockSeries, windows: list[Window], horizon: float) -> bytes | None:
    """The clock plot as PNG bytes (``clock_figure``), or None when there is no clock data."""
    fig = clock_figure(series, windows, horizon)
    return None if fig is None else _png(fig)


def clock_figure(series: ClockSeries, windows: list[Window], horizon: float) -> Figure | None:
    """Each worker's wall-clock offset, the nemesis's commanded offsets, and the
    backend's decision time (which must never go back: the durable floor).

    Legible with any number of workers: the slots the clock nemesis touched
    (commanded or measured) get a colour each (the first ``MAX_CLOCK_SLOTS``;
    the rest share one), every other worker is one grey series, and all the
    namespaces' decision times are one black series. The y range is set from
    every value drawn, with a margin, so nothing sits on the frame."""
    if series.empty:
        return None
    fig = Figure(figsize=(11, 4.2))
    ax = fig.add_subplot()
    ax.set_title("wall-clock offsets and the backend's clock floor")
    handles = _shade(ax, [w for w in windows if w.f == "clock"], horizon)
    faulted = sorted(set(series.commanded) | set(series.measured))
    color_of = {slot: CLOCK_COLORS[i] if i < MAX_CLOCK_SLOTS else "#555555" for i, slot in enumerate(faulted)}
    values: list[float] = [0.0]
    others = [(t, d / 1000) for thread, pts in series.workers.items() if thread not in color_of for t, d in pts]
    if others:
        ax.scatter([t for t, _ in others], [y for _, y in others], s=9, color="#9e9e9e", linewidths=0, alpha=0.55,
                   zorder=3)
        values += [y for _, y in others]
        n = sum(1 for thread in series.workers if thread not in color_of)
        handles.insert(0, Line2D([], [], marker="o", linestyle="", color="#9e9e9e",
                                 label=f"{n} worker{'s' if n != 1 else ''} without a clock fault"))
    for slot in faulted:
        color = color_of[slot]
        pts = [(t, d / 1000) for t, d in series.workers.get(slot, [])]
        if pts:
            ax.scatter([t for t, _ in pts], [y for _, y in pts], s=16, color=color, linewidths=0, alpha=0.85, zorder=4)
        steps = series.commanded.get(slot)
        if steps:
            xs = [t for t, _ in steps] + [horizon]
            ys = [d / 1000 for _, d in steps] + [steps[-1][1] / 1000]
            ax.step(xs, ys, where="post", color=color, linestyle="--", linewidth=1.1, zorder=4)
            pts += list(zip(xs, ys))
        measured = [(t, d / 1000) for t, d in series.measured.get(slot, [])]
        if measured:
            ax.scatter([t for t, _ in measured], [y for _, y in measured], marker="x", s=40, color=color, zorder=5)
        values += [y for _, y in pts + measured]
    for i, slot in enumerate(faulted[:MAX_CLOCK_SLOTS]):
        handles.insert(i, Patch(color=color_of[slot], label=f"worker {slot} (clock-faulted)"))
    if len(faulted) > MAX_CLOCK_SLOTS:
        handles.insert(MAX_CLOCK_SLOTS, Patch(color="#555555",
                                              label=f"{len(faulted) - MAX_CLOCK_SLOTS} more clock-faulted workers"))
    for k, (ns, pts) in enumerate(sorted(series.decisions.items())):
        ax.plot([t for t, _ in pts], [d / 1000 for _, d in pts], color="black", linewidth=1.3, marker=".",
                markersize=3, zorder=6)
        values += [d / 1000 for _, d in pts]
    if series.decisions:
        n = len(series.decisions)
        handles.append(Line2D([], [], color="black", marker=".", label=f"backend decision time (the floor), "
                                                                        f"{n} namespace{'s' if n != 1 else ''}"))
    if faulted:
        handles += [Line2D([], [], color="#555555", marker="o", linestyle="", markersize=4, label="dot: worker's wall clock"),
                    Line2D([], [], color="#555555", linestyle="--", label="dashed: offset the nemesis set"),
                    Line2D([], [], color="#555555", marker="x", linestyle="", label="cross: offset the worker reported")]
    ax.axhline(0, color="grey", linewidth=0.6)
    ax.set_yscale("symlog", linthresh=SYMLOG_LINTHRESH)  # ms jitter and hour-long skews on one axis
    _plain_ticks(ax.yaxis)
    ax.set_ylim(*_symlog_range(values))
    ax.set_xlim(0, max(horizon, 1e-3))
    ax.set_xlabel("run time (s)")
    ax.set_ylabel("offset from runner clock (s, symlog)")
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    return fig


def _symlog_range(values: list[float], margin: float = 0.08) -> tuple[float, float]:
    """Limits that hold every value with ``margin`` of the span to spare, on the symlog axis."""
    import math

    def fwd(y: float) -> float:
        return math.copysign(math.log10(1 + abs(y) / SYMLOG_LINTHRESH), y)

    def back(u: float) -> float:
        return math.copysign(SYMLOG_LINTHRESH * (10 ** abs(u) - 1), u)

    finite = [v for v in values if math.isfinite(v)] or [0.0]
    lo, hi = fwd(min(finite)), fwd(max(finite))
    span = max(hi - lo, 1.0)
    return back(lo - span * margin), back(hi + span * margin)


def linearization(spans: dict, prefix: list, stuck: list, first: int | None, state: str,
                  context: int = 24) -> bytes | None:
    """``linearization_figure`` as PNG bytes."""
    fig = linearization_figure(spans, prefix, stuck, first, state, context)
    return None if fig is None else _png(fig)


def linearization_figure(spans: dict, prefix: list, stuck: list, first: int | None, state: str,
                         context: int = 24) -> Figure | None:
    """Porcupine's partial-linearization view of one non-linearizable partition.

    ``spans`` maps invoke indices to ``OpSpan``s; ``prefix`` is the longest
    linearizable prefix (invoke indices in order), ``stuck`` the ops none of
    which the model accepts after it, ``first`` the op that had to go before
    it returned. As in Porcupine's visualizer, time is compressed to the
    order of the events (each distinct call or return time one step), each
    linearized op gets a linearization point (black tick) no earlier than its
    call and after the previous point, joined in order, and each illegal next
    try is a red dashed line from the last point to a red cross. Only the
    last ``context`` prefix ops are drawn.
    """
    shown_prefix = [i for i in prefix[-context:] if i in spans]
    tries = [i for i in stuck if i in spans]
    if not tries:
        return None
    ops = [spans[i] for i in shown_prefix + tries]
    instants = sorted({s.start for s in ops} | {s.end for s in ops if s.end is not None})
    slot = {t: k for k, t in enumerate(instants)}
    never = len(instants)  # where an op that never completed ends
    eps = 0.2
    rows = {t: r for r, t in enumerate(sorted({s.thread for s in ops}))}
    points: list[tuple[float, int]] = []
    x = -1.0
    for i in shown_prefix:
        span = spans[i]
        x = max(slot[span.start], x + eps)
        if span.end is not None:
            x = min(x, slot[span.end])
        points.append((x, rows[span.thread]))
    fig = Figure(figsize=(11, 1.6 + 1.0 * len(rows)))
    ax = fig.add_subplot()
    names = Labels(ax, (-0.5, never + 0.5))
    # the illegal tries first: their labels are the ones a reader needs
    for s in sorted(ops, key=lambda s: (s.invoke_index not in tries, slot[s.start])):
        lo, hi = slot[s.start], never if s.end is None else slot[s.end]
        bad = s.invoke_index in tries
        ax.broken_barh([(lo, max(hi - lo, 0.3))], (rows[s.thread] - 0.3, 0.6),
                       facecolors=OUTCOME_COLORS.get(s.type, "#9e9e9e"), alpha=0.35 if not bad else 0.6,
                       edgecolors="#c62828" if bad else "#555555", linewidth=2.0 if bad else 0.6,
                       hatch="//" if s.end is None else None)
        text = f"#{s.invoke_index} {s.f}"
        lane = names.place(rows[s.thread], lo, text)
        if lane is not None:   # the y axis is inverted: row - 0.33 is above the bar, lane 1 higher still
            ax.annotate(text, (lo, rows[s.thread] - 0.33 - 0.2 * lane), fontsize=7, va="bottom",
                        color="#c62828" if bad else "#333333")
    if points:
        ax.plot([p[0] for p in points], [p[1] for p in points], color="black", linewidth=0.8, zorder=4)
        ax.scatter([p[0] for p in points], [p[1] for p in points], marker="|", s=260, color="black", zorder=5)
        numbers = Labels(ax, (-0.5, never + 0.5), lanes=1)   # inside the bars, right of their points
        for k, (px, py) in enumerate(points, start=len(prefix) - len(points) + 1):
            if numbers.place(py, px, f" {k}") is not None:
                ax.annotate(f" {k}", (px, py), fontsize=7, ha="left", va="center", color="black", zorder=7)
        names.omitted += numbers.omitted
    last = points[-1] if points else (-1.0, None)
    for i in tries:
        s = spans[i]
        tx, ty = max(slot[s.start], last[0] + eps), rows[s.thread]
        if last[1] is not None:
            ax.plot([last[0], tx], [last[1], ty], color="#c62828", linestyle="--", linewidth=1.0, zorder=4)
        ax.scatter([tx], [ty], marker="x", s=70, color="#c62828", zorder=6)
    handles = [Patch(facecolor="none", edgecolor="black", label="linearization point (in order)"),
               Patch(facecolor="none", edgecolor="#c62828", label="illegal next op")]
    ax.set_yticks(list(rows.values()))
    ax.set_yticklabels([f"worker {t}" for t in rows])
    ax.set_ylim(-0.95, len(rows) - 0.3)
    ax.set_xlim(-0.5, never + 0.5)
    ticks = list(range(0, len(instants), max(1, len(instants) // 8)))
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{instants[k]:.3f}" for k in ticks], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time since start (s), compressed to the order of calls and returns")
    ax.set_title(f"longest linearizable prefix: {len(prefix)} ops (last {len(points)} shown); none of the "
                 f"{len(tries)} op(s) that could come next is legal" + (f"; #{first} returned first" if first is not None else "")
                 + names.note(), fontsize=9)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    fig.text(0.01, -0.04, "model state after the prefix: " + (state if len(state) <= 160 else state[:157] + "..."),
             fontsize=7, family="monospace", va="top")
    return fig
