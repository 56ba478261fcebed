"""Clock nemesis modes (backward, forward, strobe) on a real worker, judged by
the worker's own ``now``; and the schedule is a pure function of the seed."""

from __future__ import annotations

import time

from chaos.nemesis import NEMESES
from chaos.nemesis.clock import MODES, _draw
from chaos.runner import RunConfig, plan_schedule
from workloads.random import Stream
from test_nemesis_faults import make_env, world  # noqa: F401  (fixture)


def test_forward_then_strobe_then_reset_seen_by_the_worker_itself(tmp_path, world):  # noqa: F811
    spec, _ = world
    env, slot = make_env(tmp_path, spec, clock=True)
    pkg = NEMESES["clock"]({"workers": 1})
    try:
        slot.ensure_started()
        fwd = {"targets": [0], "mode": "forward", "offset_s": 600}
        value = pkg.execute(env, {"f": "clock", "value": fwd})
        assert value["took_effect"] and abs(value["clocks"][0]["worker_offsets_ms"][0] - 600_000) < 5000
        pkg.execute(env, {"f": "clock-reset", "value": fwd})
        strobe = {"targets": [0], "mode": "strobe", "offset_s": 120, "period_ms": 60}
        value = pkg.execute(env, {"f": "clock", "value": strobe})
        assert value["took_effect"]
        signs = set()
        deadline = time.monotonic() + 10
        while len(signs) < 2 and time.monotonic() < deadline:  # the worker's clock jumps back and forth
            off = slot.now()["wall_ms"] - time.time() * 1000
            assert abs(abs(off) - 120_000) < 5000
            signs.add(off > 0)
            time.sleep(0.02)
        assert signs == {True, False}
        pkg.execute(env, {"f": "clock-reset", "value": strobe})
        time.sleep(0.2)  # a stopped strobe never writes again
        assert abs(slot.now()["wall_ms"] - time.time() * 1000) < 5000
    finally:
        pkg.final(env)
        slot.kill()


def test_clock_draws_cover_every_mode_and_are_pure():
    draws = [_draw(Stream(11, ("clock", n)), 4)[0] for n in range(60)]
    assert {d["mode"] for d in draws} == set(MODES)
    assert draws == [_draw(Stream(11, ("clock", n)), 4)[0] for n in range(60)]
    for d in draws:
        assert (d["offset_s"] < 0) == (d["mode"] == "backward")
        assert ("period_ms" in d) == (d["mode"] == "strobe")


def test_schedule_is_a_pure_function_of_seed_and_config():
    cfg = RunConfig(nemesis=["kill", "pause", "clock", "fsync"], seed=7, time_limit=30)
    a, b = plan_schedule(cfg), plan_schedule(cfg)
    assert a == b
    nem = [r for r in a if r["kind"] == "nemesis"]
    assert {r["f"] for r in nem} >= {"kill", "pause", "clock", "fsync"}
    assert plan_schedule(RunConfig(nemesis=cfg.nemesis, seed=8, time_limit=30)) != a
    pg = [r for r in plan_schedule(RunConfig(nemesis=cfg.nemesis, seed=7, time_limit=30, backend="postgres"))
          if r["kind"] == "nemesis" and r["f"] == "kill"]
    assert pg and all(r["value"] == {"target": "server"} for r in pg)
