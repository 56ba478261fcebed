"""Per-partition budgets (a search over budget ends unknown with the reason, never a hang) and
minimal explanations (the longest linearizable prefix and the ops that cannot follow it)."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.linearizable import INF, UNKNOWN, Model, Operation, check, check_operations
from checkers.linearizable.anchors import READ, WRITE, etcd_model, parse_etcd_log
from checkers.linearizable.checker import DEFAULT_BUDGET, Budget

from test_linearizable_engines import DATA, _register, _etcd_files, needs_anchors, timed_ops

ENGINES = ["python", "compiled"]


def pathological(tag: int = 0) -> list[Operation]:
    """40 concurrent blind writes of 4 values and a read of a value nobody wrote: every subset of the
    writes in every state is a new configuration (2**40 x 4) before the search can say illegal."""
    ops = [Operation(i, (WRITE, i % 4), 0, None, 100, tag) for i in range(40)]
    return ops + [Operation(99, (READ,), 0, 9, 100, tag)]


def _by_key(ops: list[Operation]) -> list[list[Operation]]:
    groups: dict = {}
    for op in ops:
        groups.setdefault(op.metadata, []).append(op)
    return list(groups.values())


partitioned_register = Model(init=lambda: None, step=etcd_model.step, partition=_by_key)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_time_budget_ends_the_partition_unknown_with_the_reason(engine: str) -> None:
    t0 = time.monotonic()
    res = check_operations(etcd_model, pathological(), timeout=30, budget=Budget(0.3, None, None), symmetry=False,
                           engine=engine)  # the timeout only catches a broken budget
    assert time.monotonic() - t0 < 20  # bounded by the budget, not by the search (generous for a loaded machine)
    assert res.result == "unknown"
    (reason,) = res.reasons
    assert "search budget of 0.3 s used up (41 ops, " in reason and " configurations)" in reason
    assert res.partitions[0].seconds >= 0.3
    if engine == "compiled":   # what it met before time ran out (it said 0 configurations)
        assert res.partitions[0].configurations > 0 and f"{res.partitions[0].configurations:,} configurations" in reason


@pytest.mark.parametrize("engine", ENGINES)
def test_a_configuration_budget_is_exact(engine: str) -> None:
    res = check_operations(etcd_model, pathological(), budget=Budget(None, 5000, None), symmetry=False, engine=engine)
    assert res.result == "unknown" and res.partitions[0].configurations == 5000
    assert "5,000 configurations" in res.reasons[0]


def test_a_memo_budget_counts_bytes_the_same_for_both_engines() -> None:
    """Each configuration costs ``entry_bytes`` (44 bytes for a prefix of the calls, 4 more for each 32
    ranks past it); a search stops at the first new one that would take the sum over the budget."""
    stops = set()
    for engine in ENGINES:
        res = check_operations(etcd_model, pathological(), budget=Budget(None, None, 100_000), symmetry=False,
                               engine=engine)
        part = res.partitions[0]
        assert res.result == "unknown" and "search budget of 100,000 bytes of memo used up" in part.reason
        stops.add((part.configurations, part.memo_bytes))
    ((n, used),) = stops  # both engines stop at the same configuration, with the same bytes
    assert 100_000 // 52 < n < 100_000 // 44 and used <= 100_000
    for engine in ENGINES:  # the byte rule: the first n configurations fit, and the next one does not
        first = check_operations(etcd_model, pathological(), budget=Budget(None, n, None), symmetry=False,
                                 engine=engine).partitions[0]
        more = check_operations(etcd_model, pathological(), budget=Budget(None, n + 1, None), symmetry=False,
                                engine=engine).partitions[0]
        assert (first.configurations, first.memo_bytes) == (n, used)
        assert more.configurations == n + 1 and more.memo_bytes > 100_000


@pytest.mark.parametrize("engine", ENGINES)
def test_one_partition_over_budget_leaves_the_others_decided(engine: str) -> None:
    ok = [Operation(5, (WRITE, 1), 0, None, 1, 1), Operation(6, (READ,), 2, 1, 3, 1)]
    res = check_operations(partitioned_register, pathological(0) + ok, budget=Budget(0.2, None, None), engine=engine)
    assert res.result == "unknown" and [p.result for p in res.partitions] == ["unknown", "ok"]
    bad = [Operation(5, (WRITE, 1), 0, None, 1, 1), Operation(6, (READ,), 2, 2, 3, 1)]
    res = check_operations(partitioned_register, pathological(0) + bad, budget=Budget(0.2, None, None), engine=engine)
    assert res.result == "illegal" and res.partitions[1].result == "illegal"
    assert res.partitions[0].reason == "not searched to the end: another partition is not linearizable"


@pytest.mark.slow
def test_the_default_budget_never_hangs() -> None:
    t0 = time.monotonic()
    res = check_operations(etcd_model, pathological(), symmetry=False)
    assert res.result == "unknown" and res.reasons and time.monotonic() - t0 < 4 * DEFAULT_BUDGET.seconds


def test_the_claim_checker_reports_each_tuple_over_budget() -> None:
    from test_linearizable_claims import A1, TUPLE, H, acquire_req, claim_ok, rb

    h = H()
    h.invoke(1, "acquire", acquire_req("a", 0, None))
    h.done(1, "acquire", claim_ok("acquire", {"claim": A1, "read_back": rb(1, A1, 100)}))
    h.invoke(2, "read", TUPLE).done(2, "read", claim_ok("read", {"read_back": rb(1, A1, 150)}))
    assert check(h.ops, {})["valid"] is True
    res = check(h.ops, {"linearizable_budget": {"configurations": 1}})
    assert res["valid"] == "unknown"
    assert "search budget" in res["unknown_reasons"][0] and res["partitions"][0]["reason"]
    with pytest.raises(ValueError, match="linearizable_budget"):
        check(h.ops, {"linearizable_budget": {"minutes": 1}})


# --------------------------------------------------------------------------- minimal explanations


def _check_explanation(model: Model, ops: list[Operation], ex) -> None:
    """The prefix is legal and real-time ordered; every stuck op could come next and is illegal there."""
    state = model.init()
    done = set()
    for i in ex.prefix:
        pending_return = min((ops[j].return_time for j in range(len(ops)) if j not in done), default=INF)
        assert ops[i].call <= pending_return, "a prefix op was called after an unlinearized op returned"
        legal, state = model.step(state, ops[i].input, ops[i].output)
        assert legal
        done.add(i)
    assert state == ex.state and ex.first_return not in done and ex.stuck
    deadline = ops[ex.first_return].return_time
    assert min(ops[j].return_time for j in range(len(ops)) if j not in done) == deadline
    could_come_next = {j for j in range(len(ops)) if j not in done and ops[j].call <= deadline}
    assert set(ex.stuck) == could_come_next  # all of them, and each one is illegal
    for i in ex.stuck:
        assert not model.step(state, ops[i].input, ops[i].output)[0]


@needs_anchors
def test_every_illegal_etcd_anchor_is_explained_by_its_minimal_ops() -> None:
    explained = 0
    for name in _etcd_files():
        ops = parse_etcd_log(os.path.join(DATA, "jepsen", name))
        res = check_operations(etcd_model, ops, symmetry=False)
        if res.result != "illegal":
            assert res.partitions[0].explanation is None
            continue
        ex = res.partitions[0].explanation
        _check_explanation(etcd_model, ops, ex)
        assert len(ex.stuck) <= 5 < len(ops)  # a handful of ops, not the partition's 80
        explained += 1
    assert explained == 79


def test_the_explanation_names_the_op_and_the_state() -> None:
    ops = [Operation(1, (WRITE, 1), 0, None, 1), Operation(2, (READ,), 2, 1, 3), Operation(3, (READ,), 4, 2, 5)]
    ex = check_operations(etcd_model, ops).partitions[0].explanation
    assert (ex.prefix, ex.stuck, ex.first_return, ex.state) == ([0, 1], [2], 2, 1)
    assert ex.text() == ("the longest linearizable prefix has 2 ops and leaves the model at [1]; the next op can "
                         "only be op 2 (client 3) read() -> 2 (every other pending op was called after it "
                         "returned), and the model rejects it there")
    two = ops + [Operation(4, (READ,), 4, 3, 6)]
    assert "one of these 2 ops is next" in check_operations(etcd_model, two).partitions[0].explanation.text()


def _longest_prefix(model: Model, ops: list[Operation]) -> int:
    """Brute force: the most ops any legal, real-time-respecting sequence can linearize."""
    best = 0

    def go(state, done: frozenset) -> None:
        nonlocal best
        best = max(best, len(done))
        deadline = min((ops[j].return_time for j in range(len(ops)) if j not in done), default=INF)
        for j in range(len(ops)):
            if j not in done and ops[j].call <= deadline:
                legal, nxt = model.step(state, ops[j].input, ops[j].output)
                if legal:
                    go(nxt, done | {j})

    go(model.init(), frozenset())
    return best


@settings(max_examples=300, deadline=None)
@given(timed_ops(_register), st.booleans())
def test_the_prefix_is_the_longest_there_is(ops, symmetry) -> None:
    for engine in ENGINES:
        res = check_operations(etcd_model, ops, symmetry=symmetry, engine=engine)
        if res.result == "illegal":
            ex = res.partitions[0].explanation
            _check_explanation(etcd_model, ops, ex)
            assert len(ex.prefix) == _longest_prefix(etcd_model, ops)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_time_budget_is_cpu_time_so_load_never_decides(engine: str, monkeypatch) -> None:
    """A search the budget lets finish finishes however long the machine keeps it waiting:
    the wall clock here jumps an hour between any two looks (a loaded machine), the search's
    own CPU time stays within its budget, and the verdict is the search's."""
    import types

    import checkers.linearizable.checker as checker_mod

    hours = iter(range(0, 10**9, 3600))
    monkeypatch.setattr(checker_mod, "time", types.SimpleNamespace(monotonic=lambda: next(hours),
                                                                  thread_time=time.thread_time))
    ops = [Operation(i, (WRITE, i % 4), 0, None, 100, 0) for i in range(14)] + [Operation(99, (READ,), 0, 9, 100, 0)]
    res = check_operations(etcd_model, ops, budget=Budget(60, None, None), symmetry=False, engine=engine)
    assert res.result == "illegal", res.reasons  # 2**14 x 4 configurations: many slices, decided
    assert res.partitions[0].configurations > 4 * 1024 and res.partitions[0].seconds < 60
