"""Derived series of chaos.reports.analysis on a synthetic history."""

from __future__ import annotations

from hypothesis import given, strategies as st

from chaos.reports import analysis
from chaos.testing.synthetic import synthetic_history


def test_spans_windows_and_clock_offsets():
    history = synthetic_history(seed=3, workers=3)
    spans = analysis.op_spans(history, 3)
    assert spans and {s.thread for s in spans} == {0, 1, 2}
    assert any(s.type == "info" for s in spans) and all(s.end >= s.start for s in spans if s.end is not None)
    windows = {w.f: w for w in analysis.nemesis_windows(history)}
    assert (windows["pause"].start, windows["pause"].end) == (1.0, 1.8)
    assert (windows["clock"].start, windows["clock"].end) == (2.0, 4.0)
    assert windows["kill"].took_effect is True
    clocks = analysis.clock_series(history, spans)
    skewed = [d for t, d in clocks.workers[0] if 2.1 < t < 3.9]
    normal = [d for t, d in clocks.workers[1]]
    assert skewed and all(abs(d + 3_600_000) < 1000 for d in skewed)
    assert all(abs(d) < 1000 for d in normal)
    assert clocks.commanded[0][1] == (2.0, -3_600_000.0) and (4.0, 0.0) in clocks.commanded[0]
    # the synthetic backend's decision time never goes back (it is the floor)
    ns_points = next(iter(clocks.decisions.values()))
    assert all(abs(d) < 1000 for _, d in ns_points)


def test_open_ops_are_open_and_empty_history_is_empty():
    history = [{"index": 0, "time": 5, "process": 0, "type": "invoke", "f": "read", "value": {}}]
    [span] = analysis.op_spans(history, 1)
    assert span.type == "open" and span.end is None
    assert analysis.op_spans([], 2) == [] and analysis.nemesis_windows([]) == []
    assert analysis.clock_series([], []).empty
    assert analysis.throughput([], 0.0) == ([], {})


def test_parse_instant():
    assert analysis.parse_instant("1970-01-01T00:00:01.250Z") == 1250
    assert analysis.parse_instant("yesterday") is None and analysis.parse_instant(None) is None


@given(st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), min_size=1, max_size=200))
def test_quantiles_are_ordered_and_bounded(latencies):
    points = [(i * 0.01, ms, "ok") for i, ms in enumerate(latencies)]
    qs = analysis.quantile_series(points, bins=5)
    for p50, p95, p99 in zip(qs[0.5][1], qs[0.95][1], qs[0.99][1]):
        assert min(latencies) <= p50 <= p95 <= p99 <= max(latencies)


def test_measured_offsets_come_from_the_clock_nemesis_evidence():
    history = [
        {"index": 0, "time": 1_000_000_000, "process": "nemesis", "type": "invoke", "f": "clock",
         "value": {"targets": [1], "offset_s": -60}},
        {"index": 1, "time": 1_100_000_000, "process": "nemesis", "type": "ok", "f": "clock",
         "value": {"clocks": [{"slot": 1, "pid": 5, "preloaded": True, "offset_ms": -59_998, "shifted": True}],
                   "took_effect": True}},
    ]
    assert analysis.measured_offsets(history) == {1: [(1.1, -59_998.0)]}
    series = analysis.clock_series(history, [])
    assert not series.empty and series.commanded == {1: [(0.0, 0.0), (1.0, -60_000.0)]}
