"""The compiled core (``_search.c``) against the pure-Python reference: same search, same answers.

Both engines run Porcupine's search in the same order, so they must agree on
more than the verdict: the memo size, the longest prefix and its state, the
ops that cannot follow it, Porcupine's per-op partial linearizations, and
where a configuration or memo budget stops them. Checked on the anchors and on
hypothesis-generated histories over three models (a CAS register, an append
log whose states are strings, and a model with its own equal/hash, which the
core reaches through the Python callback).
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sysconfig
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.linearizable import INF, UNKNOWN, Model, Operation, check_operations
from checkers.linearizable.anchors import CAS, READ, WRITE, etcd_model, kv_model, kv_no_partition_model
from checkers.linearizable.anchors import parse_etcd_log, parse_kv_log
from checkers.linearizable import checker
from checkers.linearizable.checker import Budget

ANCHORS = os.environ.get("PORCUPINE_ANCHORS", os.path.join(os.path.dirname(__file__), "..", "..", "shared",
                                                           "anchors", "porcupine"))
DATA = os.path.join(ANCHORS, "test_data")
needs_anchors = pytest.mark.skipif(not os.path.isdir(DATA), reason=f"no Porcupine anchors at {ANCHORS}")


def test_the_compiled_core_is_built() -> None:
    """``pip install -e .`` builds it; a missing core must fail here, not just run slower."""
    from checkers.linearizable import _search

    assert _search.Search.__doc__
    assert check_operations(etcd_model, [Operation(0, (WRITE, 1), 0, None, 1)]).engine == "compiled"


def _summary(res) -> tuple:
    parts = []
    for p in res.partitions:
        ex = p.explanation
        parts.append((p.op_indices, p.result, p.configurations, p.memo_bytes,
                      sorted(map(tuple, p.partial_linearizations)),
                      None if ex is None else (ex.prefix, ex.state, ex.state_text, ex.stuck, ex.first_return,
                                               ex.described),
                      p.reason.split(" (")[0]))
    return res.result, parts


def _same(model, ops, **kw) -> tuple:
    py = check_operations(model, ops, engine="python", **kw)
    c = check_operations(model, ops, engine="compiled", **kw)
    assert (py.engine, c.engine) == ("python", "compiled")
    assert _summary(py) == _summary(c)
    return py.result, c


# --------------------------------------------------------------------------- the anchors


def _etcd_files() -> list[str]:
    if not os.path.isdir(DATA):
        return []
    return sorted(f for f in os.listdir(os.path.join(DATA, "jepsen")) if os.path.getsize(os.path.join(DATA, "jepsen", f)))


@needs_anchors
@pytest.mark.parametrize("symmetry", [False, True], ids=["porcupine-order", "symmetry"])
def test_engines_agree_on_every_etcd_anchor(symmetry: bool) -> None:
    for name in _etcd_files():
        ops = parse_etcd_log(os.path.join(DATA, "jepsen", name))
        _same(etcd_model, ops, symmetry=symmetry)


@needs_anchors
def test_engines_agree_on_partials_in_verbose_mode() -> None:
    for name in ("etcd_000.log", "etcd_040.log", "etcd_098.log", "etcd_085.log"):
        ops = parse_etcd_log(os.path.join(DATA, "jepsen", name))
        _same(etcd_model, ops, verbose=True, symmetry=False)


@needs_anchors
@pytest.mark.parametrize("name", ["c01-ok", "c01-bad", "c10-ok", "c10-bad", "c50-ok", "c50-bad"])
def test_engines_agree_on_kv_anchors(name: str) -> None:
    ops = parse_kv_log(os.path.join(DATA, "kv", f"{name}.txt"))
    _same(kv_model, ops, symmetry=False)
    if name.startswith("c01"):
        _same(kv_no_partition_model(ops), ops, symmetry=False)


@needs_anchors
@pytest.mark.slow
@pytest.mark.parametrize("name", ["c10-ok", "c10-bad"])
def test_engines_agree_on_kv_without_partitions(name: str) -> None:
    ops = parse_kv_log(os.path.join(DATA, "kv", f"{name}.txt"))
    _same(kv_no_partition_model(ops), ops, symmetry=False)


# --------------------------------------------------------------------------- generated histories


def _append_step(state: str, inp: tuple, out) -> tuple[bool, str]:
    if inp[0] == "read":
        return out is UNKNOWN or out == state, state
    return True, state + inp[1]


append_model = Model(init=lambda: "", step=_append_step, name="append-log")
# lists are unhashable: the model brings equal and hash, so the core goes through the Python callback
custom_model = Model(init=lambda: [None], step=lambda s, i, o: (lambda ok, n: (ok, [n]))(*_etcd(s[0], i, o)),
                     equal=lambda a, b: a == b, hash=lambda s: hash(s[0]), name="boxed-register")


def _etcd(state, inp, out):
    return etcd_model.step(state, inp, out)


@st.composite
def timed_ops(draw, kinds):
    n = draw(st.integers(1, 9))
    ops = []
    for i in range(n):
        inp, out = draw(kinds)
        call = draw(st.integers(0, 12))
        info = inp[0] not in (READ, "read") and draw(st.integers(0, 3)) == 0
        ret = INF if info else call + draw(st.integers(0, 6))
        ops.append(Operation(i % 4, inp, call, UNKNOWN if info else out, ret))
    return ops


_register = st.one_of(
    st.tuples(st.just((READ,)), st.sampled_from([None, 0, 1, 2, UNKNOWN])),
    st.tuples(st.tuples(st.just(WRITE), st.integers(0, 2)), st.just(None)),
    st.tuples(st.tuples(st.just(CAS), st.integers(0, 2), st.integers(0, 2)), st.sampled_from([True, False, UNKNOWN])),
)
_append = st.one_of(
    st.tuples(st.just(("read",)), st.sampled_from(["", "a", "b", "ab", "ba", "aa", UNKNOWN])),
    st.tuples(st.tuples(st.just("append"), st.sampled_from(["a", "b"])), st.just(None)),
)


@settings(max_examples=400, deadline=None)
@given(timed_ops(_register), st.booleans(), st.booleans())
def test_engines_agree_on_generated_register_histories(ops, symmetry, verbose) -> None:
    _same(etcd_model, ops, symmetry=symmetry, verbose=verbose)
    _same(custom_model, ops, symmetry=symmetry, verbose=verbose)


@settings(max_examples=300, deadline=None)
@given(timed_ops(_append), st.booleans())
def test_engines_agree_on_generated_append_histories(ops, symmetry) -> None:
    _same(append_model, ops, symmetry=symmetry, verbose=True)


@settings(max_examples=200, deadline=None)
@given(timed_ops(_register), st.integers(1, 12))
def test_engines_stop_at_the_same_configuration_budget(ops, cap) -> None:
    result, compiled = _same(etcd_model, ops, symmetry=False, budget=Budget(None, cap, None))
    for p in compiled.partitions:
        assert p.configurations <= cap
        if p.result == "unknown":
            assert p.configurations == cap and f"{cap:,} configurations" in p.reason


def wide_sets(writes: int = 200, lead: int = 0) -> list[Operation]:
    """``lead`` writes one after another, then a read of a value nobody writes and blind writes
    concurrent with it, every third never returning (twins, for the symmetry reduction): the read is
    never linearized, so every set the search meets leaves its rank (``lead``) out and reaches up to
    rank ``lead + writes``, a memo key of up to seven 32-bit units that starts mid-word if ``lead`` does, and
    the configurations explode until a budget stops them."""
    t = 2 * lead
    return ([Operation(0, (WRITE, 1), 2 * i, None, 2 * i + 1) for i in range(lead)]
            + [Operation(99, (READ,), t, 9, t + 1000)]
            + [Operation(i % 8, (WRITE, i % 4), t + 1 + i, UNKNOWN if i % 3 == 2 else None,
                         INF if i % 3 == 2 else t + 1000) for i in range(writes)])


@settings(max_examples=40, deadline=None)
@given(st.integers(56, 200_000), st.booleans(), st.sampled_from([0, 100]))
def test_engines_stop_at_the_same_memo_byte_budget_on_wide_sets(memo_bytes, symmetry, lead) -> None:
    _, compiled = _same(etcd_model, wide_sets(lead=lead), symmetry=symmetry, budget=Budget(None, None, memo_bytes))
    (p,) = compiled.partitions
    assert p.result == "unknown" and p.memo_bytes <= memo_bytes
    if p.configurations > lead + 32:  # the lead's prefixes take no span units, the next 31 sets one, the rest more
        assert p.memo_bytes > 44 * lead + 48 * (p.configurations - lead)


# --------------------------------------------------------------------------- the memo is exact


@pytest.fixture(scope="module")
def colliding_core(tmp_path_factory):
    """The core built to keep 3 bits of each configuration's hash: nearly every lookup meets entries
    with its hash (and its slot tag), so only the compare of the keys tells configurations apart."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    if not shutil.which(cc[0]):
        pytest.skip(f"no C compiler ({cc[0]})")
    src = os.path.join(os.path.dirname(checker.__file__), "_search.c")
    out = tmp_path_factory.mktemp("colliding") / ("_search" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run([*cc, "-shared", "-fPIC", "-O1", "-DCONFIG_HASH_BITS=3", "-I" + sysconfig.get_paths()["include"],
                    src, "-o", str(out)], check=True, capture_output=True)
    spec = importlib.util.spec_from_file_location("_search", out)
    core = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(core)
    return core


def test_the_memo_is_exact_when_every_hash_collides(colliding_core) -> None:
    """Sets with the same (lo, g) and different bits between, the same bits at other spans, the same set
    in other states: all in one bucket, and the search still meets exactly the reference's configurations."""
    with mock.patch.object(checker, "_compiled", colliding_core):
        for symmetry in (False, True):
            _same(etcd_model, wide_sets(), symmetry=symmetry, budget=Budget(None, 2000, None))
            _same(etcd_model, wide_sets(lead=100), symmetry=symmetry, budget=Budget(None, 2000, None))
            _same(etcd_model, wide_sets(60), symmetry=symmetry, budget=Budget(None, None, 100_000))
        for name in _etcd_files()[:40]:  # capped: every lookup walks one bucket, so it is slow
            _same(etcd_model, parse_etcd_log(os.path.join(DATA, "jepsen", name)), symmetry=False,
                  budget=Budget(None, 3000, None))


@settings(max_examples=150, deadline=None)
@given(timed_ops(_register), st.booleans())
def test_generated_histories_get_the_same_answers_when_every_hash_collides(colliding_core, ops, symmetry) -> None:
    with mock.patch.object(checker, "_compiled", colliding_core):
        _same(etcd_model, ops, symmetry=symmetry, verbose=True)


# --------------------------------------------------------------------------- the model talks back


def test_a_model_error_propagates_from_the_core() -> None:
    def step(state, inp, out):
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        check_operations(Model(init=lambda: 0, step=step), [Operation(0, 1, 0, None, 1)], engine="compiled")
    with pytest.raises(TypeError, match="legal, state"):
        check_operations(Model(init=lambda: 0, step=lambda s, i, o: True), [Operation(0, 1, 0, None, 1)],
                         engine="compiled")


def test_an_op_that_returns_before_its_call_is_refused_by_both() -> None:
    bad = [Operation(0, (WRITE, 1), 5, None, 4)]
    for engine in ("python", "compiled"):
        with pytest.raises(ValueError, match="returns before it is called"):
            check_operations(etcd_model, bad, engine=engine)


def test_big_integer_times_keep_their_order() -> None:
    """Nanosecond timestamps beyond 2**53 differ by 1 ns: a double would merge them."""
    t = 2**60
    ops = [Operation(0, (WRITE, 1), t, None, t + 1), Operation(1, (READ,), t + 2, None, t + 3)]
    for engine in ("python", "compiled"):
        assert check_operations(etcd_model, ops, engine=engine).result == "illegal"  # the read missed the write
        ops[1].call = t + 1  # now concurrent (closed intervals)
        assert check_operations(etcd_model, ops, engine=engine).result == "ok"
        ops[1].call = t + 2


def test_a_model_effect_is_what_the_core_steps_by() -> None:
    """The core trusts ``effect``; the reference calls ``step``: a wrong declaration shows as a difference."""
    from checkers.linearizable import KEEPS, READS, WRITES

    ops = [Operation(0, (WRITE, 1), 0, None, 1), Operation(1, (READ,), 2, 1, 3)]
    honest = Model(init=lambda: None, step=etcd_model.step, effect=etcd_model.effect)
    assert check_operations(honest, ops, engine="compiled").result == "ok"
    lying = Model(init=lambda: None, step=etcd_model.step, effect=lambda i, o: (WRITES, 7) if i[0] == WRITE else None)
    assert check_operations(lying, ops, engine="compiled").result == "illegal"
    assert check_operations(lying, ops, engine="python").result == "ok"
    keeps = Model(init=lambda: None, step=etcd_model.step, effect=lambda i, o: (KEEPS,) if i[0] == READ else None)
    assert check_operations(keeps, [Operation(1, (READ,), 2, 5, 3)], engine="compiled").result == "ok"
    reads = Model(init=lambda: None, step=etcd_model.step, effect=lambda i, o: (READS, o) if i[0] == READ else None)
    assert check_operations(reads, [Operation(1, (READ,), 2, 5, 3)], engine="compiled").result == "illegal"
    for bad in (("reads",), ("sets", 1), "reads", ("keeps", 1)):
        with pytest.raises(ValueError, match="effect"):
            check_operations(Model(init=lambda: None, step=etcd_model.step, effect=lambda i, o, b=bad: b),
                             ops, engine="compiled")
