"""The workload goes on past its time limit only while an armed fault still
waits for its evidence, and never past the grace (chaos.runner.UntilProven):
a loaded machine gets the time a fault needs, bounded."""

from __future__ import annotations

from chaos.runner import RunConfig, UntilProven, grace_ns
from workloads.generator import SEC, clients, repeat
from workloads.interpreter import simulate


def _invokes(gen) -> list[int]:
    history = simulate(clients(gen), workers=1, latency=SEC // 10, nemesis_thread=False)
    return [o["time"] for o in history if o["type"] == "invoke"]


def test_stops_at_the_limit_when_nothing_waits():
    times = _invokes(UntilProven(repeat({"f": "read", "value": None}), 2 * SEC, 5 * SEC, lambda: []))
    assert times and max(times) < 2 * SEC


def test_goes_on_while_a_fault_waits_and_stops_once_proven():
    seen = []

    def unproven():
        seen.append(1)
        return ["lost-reply"] if len(seen) < 40 else []   # the evidence arrives after a while
    times = _invokes(UntilProven(repeat({"f": "read", "value": None}), 2 * SEC, 60 * SEC, unproven))
    assert 2 * SEC < max(times) < 60 * SEC


def test_never_past_the_grace():
    times = _invokes(UntilProven(repeat({"f": "read", "value": None}), 2 * SEC, 3 * SEC, lambda: ["lost-reply"]))
    assert 4 * SEC < max(times) < 5 * SEC


def test_grace_is_as_long_again_as_the_run_or_three_op_deadlines_within_bounds():
    assert grace_ns(RunConfig(time_limit=2, op_timeout=1)) == 5 * SEC
    assert grace_ns(RunConfig(time_limit=30, op_timeout=1)) == 30 * SEC
    assert grace_ns(RunConfig(time_limit=6, op_timeout=8)) == 24 * SEC   # a short run gets one claim cycle
    assert grace_ns(RunConfig(time_limit=600)) == 60 * SEC
    assert grace_ns(RunConfig(time_limit=2, op_timeout=100)) == 60 * SEC
