"""Faults of a slow (process-per-call) run fit what it can do (chaos.timing,
chaos.nemesis): forward clock skews it outlives, fsync windows as long as its
gaps grow, and lost replies only of op classes the run performs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from chaos import timing
from chaos.nemesis import NEMESES
from chaos.nemesis.clock import BACKWARD_S, FORWARD_S, STROBE_S, drawer
from chaos.runner import RunConfig
from workloads.random import Stream
from test_nemesis_faults import make_env, world  # noqa: F401  (fixture)


def _draws(gen, n=80):
    out, ctx_seed = [], 3
    for i in range(n):
        value, _ = gen.draw(Stream(ctx_seed, ("nemesis", gen.f, i)), gen.workers)
        out.append(value)
    return out


def test_clock_offsets_just_outlast_a_lease_and_can_be_told_from_an_unshifted_clock():
    from chaos.nemesis.clock import TOLERANCE_MS

    assert timing.clock_offsets(4020, 140.0) == [10, 11]      # seed 11's lease: not 17-35 s of frozen floors
    assert timing.clock_offsets(9000, 140.0) == [12, 17, 23]
    for lease_ms, limit in ((1500, 30.0), (5340, 140.0), (900, 10.0), (60_000, 30.0), (9000, 140.0)):
        got = timing.clock_offsets(lease_ms, limit)
        assert got == sorted(got) and len(got) <= 3
        assert got[0] * 1000 >= max(2 * TOLERANCE_MS, timing.FORWARD_LEASES[0] * lease_ms)   # > a lease, seen
        assert got[-1] == max(got[0], min(-(-int(timing.FORWARD_LEASES[1] * lease_ms) // 1000),
                                          int(limit * timing.FORWARD_SHARE)))


def test_the_forward_and_strobe_offsets_of_a_slow_run_are_the_given_ones_only():
    default = drawer()
    fitted = drawer([9, 22, 35], [9, 22, 35])
    d = [default(Stream(11, ("clock", n)), 4)[0] for n in range(80)]
    f = [fitted(Stream(11, ("clock", n)), 4)[0] for n in range(80)]
    assert {v["offset_s"] for v in d if v["mode"] != "backward"} <= set(FORWARD_S) | set(STROBE_S)
    assert {v["offset_s"] for v in f if v["mode"] != "backward"} <= {9, 22, 35}
    assert {v["offset_s"] for v in f if v["mode"] == "backward"} <= set(BACKWARD_S)
    assert [v["mode"] for v in d] == [v["mode"] for v in f]   # the same schedule shape, other offsets
    pkg = NEMESES["clock"]({"workers": 4, "clock_forward_s": [9, 22, 35]})
    assert {v["offset_s"] for v in _draws(pkg.generator) if v["mode"] != "backward"} <= {9, 22, 35}


def test_the_fsync_window_of_a_slow_run_grows_like_its_gaps():
    fast = NEMESES["fsync"]({"workers": 2}).generator
    slow = NEMESES["fsync"]({"workers": 2, "scale": 4.0}).generator
    assert slow.dur_ms == (2 * fast.dur_ms[0], 2 * fast.dur_ms[1])


def test_lost_replies_are_drawn_only_from_the_classes_the_run_performs():
    both = {v["op_class"] for v in _draws(NEMESES["lost-reply"]({"workers": 3}).generator)}
    claim = {v["op_class"] for v in _draws(NEMESES["lost-reply"]({"workers": 3,
                                                                   "lost_reply_classes": ["claim"]}).generator)}
    assert both == {"publish", "claim"} and claim == {"claim"}


def test_a_black_box_run_without_item_files_arms_no_publish_lost_reply():
    from chaos.workload_kinds import workload_kind

    cfg = RunConfig(backend="external", workload="claims", nemesis=["lost-reply"])
    kind = workload_kind(cfg)
    _, world = kind.build(cfg)
    target = SimpleNamespace(namespaces=list(world.namespaces), commits=False, publishes=False)
    notes: list = []
    kind.black_box_world(cfg, target, world, notes)
    assert cfg.claims["publish"] is False and cfg.nemesis_opts["lost_reply_classes"] == ["claim"]
    assert any("publications are not exercised" in n for n in notes)
    cfg2 = RunConfig(backend="external", workload="claims", nemesis=["lost-reply"])
    kind.black_box_world(cfg2, SimpleNamespace(namespaces=list(world.namespaces), commits=False, publishes=True),
                         world, [])
    assert "lost_reply_classes" not in cfg2.nemesis_opts


def test_a_kill_aimed_at_a_publish_is_armed_for_the_next_publish_and_lands_with_it(tmp_path, world):  # noqa: F811
    """kill-call: the kill nemesis arms the next publish any worker sends; that
    publish's completion carries the evidence, and kill_landings counts it only
    when the signal was inside the call."""
    from chaos.runner import kill_landings
    from workloads.items import publish_request, revision_of

    spec, w = world
    env, slot = make_env(tmp_path, spec)
    pkg = NEMESES["kill"]({"workers": 1, "backend": "sqlite", "kill_at": "publish", "kill_publish_share": 1.0})
    value, _ = pkg.generator.draw(Stream(5, ("nemesis", "kill", 0)), 1)
    assert value["at"] == "publish" and 0 <= value["at_u"] < 1 and "delay_ms" not in value
    ns, item = w.tuples[0]
    tup = {"ledger_namespace": ns, "item_id": item}
    try:
        got = slot.run_op({"process": 0, "f": "acquire", "value": dict(tup, owner_id="o", lease_duration_ms=60_000,
                                                                         expected={"last_epoch": "0", "active": None})})
        fence = dict(tup, owner_id="o", epoch=got["value"]["envelope"]["result"]["claim"]["epoch"])
        armed = pkg.execute(env, {"f": "kill", "value": dict(value, at_u=0.0)})
        assert armed == {"armed": "next publish", "took_effect": None}
        assert pkg.execute(env, {"f": "kill", "value": value})["armed"] == "a publish kill is still pending"
        rev = revision_of(w.seed_items[(ns, item)])
        first = slot.run_op({"process": 1, "f": "publish", "value": publish_request("pub_1", ns, item, rev, fence, "o")})
        assert first["fault"]["by"] == "kill-nemesis" and first["fault"]["kind"] == "kill"
        assert (first["type"] == "info") == bool(first["fault"]["inside"])
        second = slot.run_op({"process": 2, "f": "publish", "value": publish_request("pub_2", ns, item, rev, fence, "o")})
        assert "fault" not in second   # one arm, one publish
        assert kill_landings([first, second]) == ({"publish": 1} if first["fault"]["inside"] else {})
    finally:
        pkg.final(env)
        slot.stop()


@pytest.mark.parametrize("cores, workers", [(1, 6), (2, 6), (4, 8), (16, 10)])
def test_a_slow_run_has_one_agent_per_core_besides_its_two_racer_pairs(monkeypatch, cores, workers):
    # four agents on two cores made 151 of a CLI run's 215 calls, and the pairs reached 15-23 of 39 kinds
    monkeypatch.setattr(timing.os, "cpu_count", lambda: cores)
    slow = timing.choose({"read_ms": 300.0, "decision_ms": 600.0}, None, lease_ms=1500, workers_default=10,
                         time_limit_default=30.0)
    assert slow["workers"] == workers and timing.RACER_THREADS == 4


def test_a_slow_run_has_two_racer_pairs_and_skips_held_items():
    slow = timing.choose({"read_ms": 300.0, "decision_ms": 600.0}, None, lease_ms=1500, workers_default=10,
                         time_limit_default=30.0)
    from workloads.claims import ClaimsConfig
    from workloads.coverage import plan_for

    claims = timing.scaled_claims({}, slow["scale"], ClaimsConfig())
    assert claims["race_pairs"] == 2 and plan_for(claims, slow["workers"], None)["race_pairs"] == 2
    assert claims["skip_held"] is True and "skip_held" not in timing.scaled_claims({}, 1.0, ClaimsConfig())
    assert timing.scaled_claims({"race_pairs": 1}, 2.0, ClaimsConfig())["race_pairs"] == 1   # the user's value stays


def test_lowering_race_pairs_after_set_up_keeps_the_tuples_set_up():
    from workloads.claims import ClaimsConfig, universe

    two, one = universe(9, ClaimsConfig()), universe(9, ClaimsConfig(race_pairs=1))
    assert one.tuples == two.tuples and one.seed_items == two.seed_items and len(one.race_tuples) == 2
    assert universe(9, ClaimsConfig(race_pairs=0)).race_tuples == ()
