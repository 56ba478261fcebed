"""The search itself: closed intervals, info ops, partitions, timeouts, and a brute-force oracle."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.linearizable import (
    CALL, INF, RETURN, UNKNOWN, Event, Model, NondeterministicModel, Operation, check_events, check_operations,
)
from checkers.linearizable.anchors import CAS, READ, WRITE, etcd_model, etcd_step


def op(inp, call, out, ret, client=0):
    return Operation(client, inp, call, out, ret)


def test_sequential_register() -> None:
    ops = [op((WRITE, 1), 0, None, 1), op((READ,), 2, 1, 3), op((CAS, 1, 2), 4, True, 5), op((READ,), 6, 2, 7)]
    assert check_operations(etcd_model, ops).result == "ok"
    ops[3].output = 1
    assert check_operations(etcd_model, ops).result == "illegal"


def test_closed_intervals_make_shared_endpoints_concurrent() -> None:
    # the read returns at 5 and the write is called at 5: concurrent, so the read may see it
    ops = [op((READ,), 0, 1, 5, client=1), op((WRITE, 1), 5, None, 9, client=2)]
    assert check_operations(etcd_model, ops).result == "ok"
    ops[1].call = 6
    assert check_operations(etcd_model, ops).result == "illegal"


def test_info_op_may_or_may_not_take_effect() -> None:
    write = op((WRITE, 3), 0, UNKNOWN, INF, client=1)
    seen = [write, op((READ,), 1, 3, 2), op((READ,), 3, 3, 4)]
    unseen = [write, op((READ,), 1, None, 2), op((READ,), 3, None, 4)]
    assert check_operations(etcd_model, seen).result == "ok"
    assert check_operations(etcd_model, unseen).result == "ok"
    flip = [write, op((READ,), 1, 3, 2), op((READ,), 3, None, 4)]  # once seen, cannot vanish
    assert check_operations(etcd_model, flip).result == "illegal"


def test_events_adapter_leaves_unreturned_calls_open() -> None:
    events = [Event(1, CALL, (WRITE, 2), 0), Event(2, CALL, (READ,), 1), Event(2, RETURN, 2, 1)]
    assert check_events(etcd_model, events).result == "ok"
    events[2].value = 4
    assert check_events(etcd_model, events).result == "illegal"


def test_events_adapter_honours_partition_events() -> None:
    def by_key(events):
        groups = {}
        key_of = {}
        for ev in events:
            if ev.kind == CALL:
                key_of[ev.id] = ev.value[1]
            groups.setdefault(key_of[ev.id], []).append(ev)
        return list(groups.values())

    model = _kv_partitioned()
    model.partition = None
    model.partition_events = by_key
    events = [Event(1, CALL, ("put", "a", 1), 0), Event(2, CALL, ("get", "b", None), 1),
              Event(1, RETURN, None, 0), Event(2, RETURN, None, 1),
              Event(3, CALL, ("get", "a", None), 2), Event(3, RETURN, 1, 2)]
    res = check_events(model, events)
    assert res.result == "ok" and len(res.partitions) == 2
    events[5].value = 7
    assert check_events(model, events).result == "illegal"


def _kv_partitioned() -> Model:
    def step(state, inp, out):
        if inp[0] == "get":
            return out == state, state
        return True, inp[2]

    def partition(ops):
        groups = {}
        for o in ops:
            groups.setdefault(o.input[1], []).append(o)
        return list(groups.values())

    return Model(init=lambda: None, step=step, partition=partition)


def test_partitions_are_independent_and_first_illegal_is_reported() -> None:
    ops = [op(("put", "a", 1), 0, None, 1), op(("get", "b", None), 2, None, 3), op(("get", "a", None), 4, 2, 5)]
    res = check_operations(_kv_partitioned(), ops, verbose=True)
    assert res.result == "illegal"
    by_first = {p.op_indices[0]: p for p in res.partitions}
    assert by_first[0].result == "illegal" and by_first[1].result == "ok"
    assert by_first[0].partial_linearizations == [[0]]
    assert by_first[1].partial_linearizations == [[1]]


def test_timeout_gives_unknown() -> None:
    # 60 concurrent blind writes plus a read nobody wrote: far too many (set, state) pairs to finish
    ops = [op((WRITE, i % 5), 0, None, 100, client=i) for i in range(60)] + [op((READ,), 0, 9, 100, client=99)]
    res = check_operations(etcd_model, ops, timeout=0.05, symmetry=False)
    assert res.result == "unknown"


def test_nondeterministic_model_power_set() -> None:
    # a coin that lands either way: a read may see 0 or 1 but never both
    coin = NondeterministicModel(
        init=lambda: [None],
        step=lambda s, i, o: ([0, 1] if i == "flip" else ([s] if o == s else [])),
    ).to_model()
    ok = [op("flip", 0, None, 1), op("read", 2, 1, 3), op("read", 4, 1, 5)]
    assert check_operations(coin, ok).result == "ok"
    ok[2].output = 0
    assert check_operations(coin, ok).result == "illegal"


def test_custom_equal_and_hash() -> None:
    # states are lists (unhashable): the model supplies hash and equal
    m = Model(init=lambda: [0], step=lambda s, i, o: (o is None or o == s[0], [i] if o is None else s),
              equal=lambda a, b: a == b, hash=lambda s: hash(tuple(s)))
    assert check_operations(m, [op(5, 0, None, 1), op("r", 2, 5, 3)]).result == "ok"


# --------------------------------------------------------------------------- brute-force oracle


def _brute_force(ops: list[Operation]) -> bool:
    n = len(ops)
    for perm in itertools.permutations(range(n)):
        # real-time order: if a returned before b was called, a precedes b
        pos = {o: k for k, o in enumerate(perm)}
        if any(ops[a].return_time < ops[b].call and pos[a] > pos[b] for a in range(n) for b in range(n)):
            continue
        for cut in range(n + 1):  # ops after `cut` that are info ops may be left out (never happened)
            tail = perm[cut:]
            if any(ops[t].return_time != INF for t in tail):
                continue
            state, legal = None, True
            for o in perm[:cut]:
                legal, state = etcd_step(state, ops[o].input, ops[o].output)
                if not legal:
                    break
            if legal:
                return True
    return False


_inputs = st.one_of(st.just((READ,)), st.tuples(st.just(WRITE), st.integers(0, 2)),
                    st.tuples(st.just(CAS), st.integers(0, 2), st.integers(0, 2)))


@st.composite
def histories(draw):
    n = draw(st.integers(1, 6))
    ops = []
    for i in range(n):
        inp = draw(_inputs)
        call = draw(st.integers(0, 10))
        info = draw(st.booleans()) and inp[0] != READ and draw(st.booleans())
        ret = INF if info else call + draw(st.integers(0, 6))
        if info:
            out = UNKNOWN
        elif inp[0] == READ:
            out = draw(st.sampled_from([None, 0, 1, 2, UNKNOWN]))
        elif inp[0] == WRITE:
            out = None
        else:
            out = draw(st.sampled_from([True, False, UNKNOWN]))
        ops.append(Operation(i, inp, call, out, ret))
    return ops


@settings(max_examples=300, deadline=None)
@given(histories())
def test_matches_brute_force(ops: list[Operation]) -> None:
    expected = _brute_force(ops)
    for symmetry in (True, False):
        assert (check_operations(etcd_model, ops, symmetry=symmetry).result == "ok") == expected
