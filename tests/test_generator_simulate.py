"""Generators run with no backend: seed in, exact op list out."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from workloads.generator import (
    PENDING, Context, clients, clients_and_nemesis, each_worker, limit, mix, ms, nemesis,
    once, phases, repeat, sleep, stagger, time_limit,
)
from workloads.interpreter import simulate
from workloads.random import Stream


def short(history):
    return [(o["time"], o["process"], o["type"], o["f"]) + ((o["value"],) if "value" in o else ()) for o in history]


def test_dict_is_emitted_once_and_limit_bounds_repeat():
    assert short(simulate(clients({"f": "read"}), workers=2)) == [(0, 0, "invoke", "read"), (0, 0, "ok", "read")]
    assert short(simulate(clients(limit(3, repeat({"f": "r"}))), workers=2, latency=5)) == [
        (0, 0, "invoke", "r"), (0, 1, "invoke", "r"), (5, 0, "ok", "r"), (5, 1, "ok", "r"),
        (5, 0, "invoke", "r"), (10, 0, "ok", "r"),
    ]


def test_stagger_spaces_ops_by_seeded_logical_delays():
    h = simulate(clients(limit(4, stagger(ms(10), repeat({"f": "read"})))), seed=1, workers=2, latency=ms(1))
    assert short(h) == [
        (0, 0, "invoke", "read"), (1000000, 0, "ok", "read"),
        (1117555, 0, "invoke", "read"), (2117555, 0, "ok", "read"),
        (6202389, 0, "invoke", "read"), (7202389, 0, "ok", "read"),
        (21980200, 0, "invoke", "read"), (22980200, 0, "ok", "read"),
    ]


def test_phases_wait_for_every_thread_and_nemesis_split():
    h = simulate(phases(clients(limit(2, repeat({"f": "a"}))), nemesis({"f": "kill"}), clients({"f": "b"})),
                 workers=2, latency=5)
    assert short(h) == [
        (0, 0, "invoke", "a"), (0, 1, "invoke", "a"), (5, 0, "ok", "a"), (5, 1, "ok", "a"),
        (5, "nemesis", "invoke", "kill"), (10, "nemesis", "ok", "kill"),
        (10, 0, "invoke", "b"), (15, 0, "ok", "b"),
    ]


def test_mix_is_seeded_and_time_limit_cuts():
    h = simulate(clients(mix([repeat({"f": "r"}), repeat({"f": "w"})])), seed=3, workers=2, time_limit=20, latency=5)
    assert [o["f"] for o in h if o["type"] == "invoke"] == ["r", "r", "r", "r", "r", "r", "r", "w"]
    assert max(o["time"] for o in h) == 20


def test_each_worker_and_logical_sleep():
    h = simulate(each_worker(lambda t: [{"f": "x", "value": t}, sleep(100), {"f": "y", "value": t}]),
                 workers=2, latency=10, nemesis_thread=False)
    assert short(h) == [
        (0, 0, "invoke", "x", 0), (0, 1, "invoke", "x", 1), (10, 0, "ok", "x"), (10, 1, "ok", "x"),
        (110, 0, "invoke", "y", 0), (110, 1, "invoke", "y", 1), (120, 0, "ok", "y"), (120, 1, "ok", "y"),
    ]


def test_info_retires_the_process():
    h = simulate(clients(repeat({"f": "r"}, 3)), complete=lambda op: {"type": "info"}, workers=1, latency=1)
    assert short(h) == [
        (0, 0, "invoke", "r"), (1, 0, "info", "r"), (1, 1, "invoke", "r"), (2, 1, "info", "r"),
        (2, 2, "invoke", "r"), (3, 2, "info", "r"),
    ]


def test_clients_and_nemesis_interleave_in_logical_time():
    h = simulate(clients_and_nemesis(repeat({"f": "r"}), stagger(20, repeat({"f": "kill"}))),
                 workers=1, latency=3, time_limit=50, seed=7)
    assert [(o["time"], o["type"]) for o in h if o["process"] == "nemesis"] == [
        (0, "invoke"), (3, "ok"), (31, "invoke"), (34, "ok"), (34, "invoke"), (37, "ok"),
    ]


def test_op_is_pure_asking_twice_gives_the_same_answer():
    g = stagger(ms(5), mix([repeat({"f": "a"}), repeat({"f": "b"})]))
    ctx = Context(0, (0, 1), frozenset({0, 1}), {0: 0, 1: 1}, seed=9)
    assert g.op(ctx) == g.op(ctx)
    busy = Context(0, (0,), frozenset(), {0: 0}, seed=9)
    assert once({"f": "a"}).op(busy) is PENDING


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), workers=st.integers(1, 5))
def test_same_seed_same_schedule(seed, workers):
    def gen():
        return clients_and_nemesis(stagger(ms(3), mix([repeat({"f": "r"}), repeat({"f": "w"})])),
                                   stagger(ms(20), repeat({"f": "kill"})))
    a = simulate(gen(), seed=seed, workers=workers, time_limit=ms(100), latency=ms(1))
    b = simulate(gen(), seed=seed, workers=workers, time_limit=ms(100), latency=ms(1))
    assert a == b
    assert all(o["time"] <= ms(101) for o in a)


def test_streams_are_independent_and_reproducible():
    s = Stream(1, ("w", 0))
    x, s2 = s.random()
    assert s.random()[0] == x and s2.random()[0] != x
    assert Stream(1, ("w", 1)).random()[0] != x
    assert time_limit(10, repeat({"f": "a"})).op(Context(0, (0,), frozenset({0}), {0: 0}))[0]["f"] == "a"


def test_a_deadline_lets_kept_ops_pass_until_the_first_it_does_not_keep():
    from workloads.generator import deadline, lift, nemesis

    ops = [{"f": f, "value": None, "time": t} for f, t in (("a", 1), ("heal", 7), ("b", 8), ("heal", 9))]
    h = simulate(nemesis(deadline(5, lift(ops), keep=lambda op: op["f"] == "heal")), workers=1, latency=1)
    assert [(o["f"], o["time"]) for o in h if o["type"] == "invoke"] == [("a", 1), ("heal", 7)]
    assert [o["f"] for o in simulate(nemesis(deadline(5, lift(ops))), workers=1) if o["type"] == "invoke"] == ["a"]
