"""The clock plot's crosses come from the evidence the clock nemesis records:
the target worker's own clock (``worker_offsets_ms``), at the fault and at a
(possibly deferred) reset."""

from chaos.reports.analysis import measured_offsets


def _nemesis(f, t_s, value):
    return {"process": "nemesis", "type": "ok", "f": f, "time": int(t_s * 1e9), "value": value}


def test_worker_reported_offsets_are_plotted():
    history = [
        _nemesis("clock", 2.0, {"clocks": [{"slot": 1, "worker_offsets_ms": [-3_600_000]},
                                           {"slot": 2, "pid": None, "note": "no live worker"}]}),
        _nemesis("clock-reset", 4.0, {"mode": "reset-deferred", "clocks_before_reset": []}),
        _nemesis("heal", 9.0, {"clocks_before_reset": [{"slot": 2, "worker_offsets_ms": [-119_999]}]}),
    ]
    assert measured_offsets(history) == {1: [(2.0, -3_600_000.0)], 2: [(9.0, -119_999.0)]}
