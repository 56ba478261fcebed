"""The report's figures stay legible: the clock plot with many workers has a
short legend and every point and the floor inside its frame; fault windows
are told apart and labelled on every time-axis plot (issue 13)."""

from __future__ import annotations

from matplotlib.figure import Figure

from chaos.reports import analysis, plots
from chaos.reports.analysis import ClockSeries, Window
from chaos.testing.synthetic import synthetic_history


def _series(workers: int) -> ClockSeries:
    history = synthetic_history(seed=3, workers=workers)
    spans = analysis.op_spans(history, workers)
    return analysis.clock_series(history, spans), analysis.nemesis_windows(history), analysis.end_time(history)


def test_clock_plot_legend_stays_short_with_many_workers():
    series, windows, horizon = _series(35)
    fig = plots.clock_figure(series, windows, horizon)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert len(labels) <= 12, labels
    assert any("without a clock fault" in label for label in labels)
    assert not any(label.startswith("worker 7 ") for label in labels)   # an unfaulted worker has no entry


def test_clock_plot_holds_every_point_and_the_floor_inside_the_frame():
    series, windows, horizon = _series(35)
    ax = plots.clock_figure(series, windows, horizon).axes[0]
    lo, hi = ax.get_ylim()
    drawn = [d / 1000 for pts in series.workers.values() for _, d in pts]
    drawn += [d / 1000 for pts in series.decisions.values() for _, d in pts]
    drawn += [d / 1000 for steps in series.commanded.values() for _, d in steps]
    assert min(drawn) < -3000   # the skewed worker is there ...
    assert lo < min(drawn) and max(drawn) < hi   # ... and strictly inside, as is the floor


def test_fault_lanes_are_labelled_and_distinct():
    fig = Figure(figsize=(8, 3))
    ax = fig.add_subplot()
    ax.set_title("t")
    windows = [Window("pause", 1.0, 3.0, {}), Window("clock", 2.0, 5.0, {}), Window("kill", 4.0, 4.0, {})]
    handles = plots._shade(ax, windows, 6.0)
    names = {t.get_text() for t in ax.texts}
    assert {"pause", "clock", "kill"} <= names
    assert [h.get_label() for h in handles] == ["fault: kill", "fault: pause", "fault: clock"]
    lane_colors = {tuple(p.get_facecolor()[:3]) for p in ax.patches}
    assert len(lane_colors) >= 2   # the lasting faults are bars of different colours


def test_the_figures_render_with_many_workers():
    history = synthetic_history(seed=3, workers=40)
    spans = analysis.op_spans(history, 40)
    windows = analysis.nemesis_windows(history)
    horizon = analysis.end_time(history)
    assert plots.timeline(spans, windows, 40, horizon).startswith(b"\x89PNG")
    assert plots.clocks(analysis.clock_series(history, spans), windows, horizon).startswith(b"\x89PNG")


def _overlaps(fig) -> list:
    """Pairs of the axes' labels whose drawn boxes overlap."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for ax in fig.axes for t in ax.texts if t.get_visible()]
    return [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:] if ba.overlaps(bb)]


def test_a_long_linearization_diagram_has_no_overlapping_labels():
    """60 prefix ops on two workers, each call and return a step: names and point numbers used to pile up."""
    from chaos.reports.analysis import OpSpan

    spans, t = {}, 0.0
    for i in range(62):
        spans[i] = OpSpan(i % 2, i % 2, "acquire" if i % 3 else "publish", t, t + 0.001, "ok", i, None)
        t += 0.0004
    fig = plots.linearization_figure(spans, list(range(60)), [60, 61], 60, "last_epoch=3", context=60)
    assert fig is not None and _overlaps(fig) == []
    assert "left out where they would overlap" in fig.axes[0].get_title()


def test_the_ten_worker_timeline_has_no_overlapping_labels():
    history = synthetic_history(seed=3, workers=10)
    spans = analysis.op_spans(history, 10)
    every_op = {s.invoke_index for s in spans}
    fig = plots.timeline_figure(spans, analysis.nemesis_windows(history), 10, analysis.end_time(history), every_op)
    assert _overlaps(fig) == []
