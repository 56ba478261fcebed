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


def _nemesis_ops(cfg) -> list[dict]:
    from chaos.runner import nemesis_plan

    gen, _, _ = nemesis_plan(cfg)
    # every step takes 10 s, like the restart that once stuck the nemesis thread past the limit
    history = simulate(gen, workers=1, latency=10 * SEC, time_limit=int(cfg.time_limit * SEC) + 300 * SEC)
    return [o for o in history if o["type"] == "invoke"]


def test_a_fault_that_started_before_the_limit_is_healed_however_late_the_nemesis_comes_to_it():
    # expiry-inclusive, CLI seed 3: a 10-s restart step held the nemesis thread over the time limit, the
    # fsync window armed before it was never healed, and no armed lost reply could commit in the
    # whole 45-s extension (a 106-s cell)
    for seed in range(1, 6):
        cfg = RunConfig(nemesis=["fsync", "pause", "clock", "restart"], time_limit=20, seed=seed)
        ops = _nemesis_ops(cfg)
        limit = int(cfg.time_limit * SEC)
        heals = {"fsync": "fsync-heal", "pause": "resume", "clock": "clock-reset"}
        started = [o for o in ops if o["f"] in ("fsync", "pause", "clock", "restart")]
        assert started and all(o["time"] < limit for o in started)
        assert any(o["time"] >= limit for o in ops if o["f"] in heals.values())   # late, but healed
        for fault, heal in heals.items():
            assert [o["f"] for o in ops if o["f"] in (fault, heal)] == [fault, heal] * sum(o["f"] == fault for o in ops)


def test_explicit_faults_start_before_the_limit_and_heal_at_it_at_the_latest():
    cfg = RunConfig(nemesis=["fsync"], time_limit=5, faults=[
        {"f": "fsync", "value": {"targets": "all"}, "time": 1 * SEC},
        {"f": "fsync-heal", "value": {}, "time": 20 * SEC},
        {"f": "fsync", "value": {"targets": "all"}, "time": 6 * SEC}])
    assert [(o["f"], o["time"]) for o in _nemesis_ops(cfg)] == [("fsync", 1 * SEC), ("fsync-heal", 11 * SEC)]
