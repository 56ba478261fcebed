"""Porcupine's linearizability checker (checker.go), read top to bottom.

results -> budget -> entries -> interned states -> the core search (the
pure-Python reference; ``_search.c`` is the same loop compiled) -> minimal
explanations -> partitions, budgets and timeouts -> the Event adapter.

The search is Wing & Gong's with Lowe's memo, "just in time": walk the entry
list in time order; a call whose step is legal and whose resulting
configuration (set of linearized ops, model state) is new gets linearized and
lifted out of the list, and the walk restarts; reaching a return means every
candidate before the earliest pending return failed, so backtrack. An empty
list is a witness. Intervals are closed: at equal times calls sort before
returns, so ops that share an endpoint are concurrent.

Two engines run that one search in the same order, so they agree on verdicts,
memo sizes, prefixes and budgets: ``_search_python`` below (the reference) and
``_CompiledSearch``, the C core of ``_search.c`` (built by ``pip install``).
Both see only integers: model states are interned to small ints (``sid``,
``_States``), and each engine memoizes ``(op, sid) -> sid'`` (``-1`` =
illegal), so the model's own Python ``step`` is asked once per distinct pair
(the core calls it directly, or not at all for an op the model's ``effect``
describes) and a model stays a plain Python ``Model``.

One reduction beyond Porcupine, exact for verdicts: ops that never returned
(``return_time == INF``) with identical input and output are interchangeable,
so among such "twins" only the earliest-called unlinearized one is a candidate
(swapping two twins in any linearization gives another linearization).
``symmetry=False`` turns it off: the search is then Porcupine's, step for step.
"""

from __future__ import annotations

import time
import warnings
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, NamedTuple, Sequence

from .model import INF, Event, Model, Operation, _default_equal, events_to_operations, fill_defaults

try:
    from . import _search as _compiled
except ImportError as err:  # not built: say so (check_operations warns, or fails if the core was asked for)
    _compiled, _COMPILED_MISSING = None, str(err)
else:
    _COMPILED_MISSING = ""

OK, ILLEGAL, UNKNOWN_RESULT = "ok", "illegal", "unknown"
_SLICE = 1024  # backtracks per time slice of one partition (Python engine)
_WORK = 1 << 16  # loop iterations per time slice (compiled engine): about a millisecond


# --------------------------------------------------------------------------- results


@dataclass
class Explanation:
    """Why a partition is not linearizable, in its smallest terms.

    ``prefix``: the longest linearizable prefix the search found (op indices
    in linearization order); ``state``: the model state after it
    (``state_text`` as the model describes it); ``stuck``: the ops that could
    come next (called before ``first_return`` returned), none of which the
    model accepts in ``state``; ``first_return``: the earliest-returning op
    not in the prefix, so one of ``stuck`` had to take effect before it
    returned. Indices refer to the checked operation list; ``described``
    holds the model's words for ``stuck`` and ``first_return``.
    """

    prefix: list[int]
    state: Any
    state_text: str
    stuck: list[int]
    first_return: int | None
    described: dict[int, str]
    among: str = ""  # the orders the prefix is longest among, when not every order was searched

    def text(self, label: Callable[[int], str] = lambda i: f"op {i}") -> str:
        """One paragraph; ``label(index)`` names an op (a caller's own numbering)."""
        def op(i: int) -> str:
            return f"{label(i)} {self.described[i]}"

        if self.first_return is None:
            return (f"the longest linearizable prefix holds all {len(self.prefix)} ops; the search stopped "
                    f"before confirming it")
        head = (f"the longest linearizable prefix{self.among and ' ' + self.among} has {len(self.prefix)} ops and "
                f"leaves the model at [{self.state_text}]; ")
        if self.stuck == [self.first_return]:
            return head + (f"the next op can only be {op(self.first_return)} (every other pending op was "
                           f"called after it returned), and the model rejects it there")
        return head + (f"{op(self.first_return)} must take effect before it returns, so one of these "
                       f"{len(self.stuck)} ops is next, and the model rejects each there: "
                       + "; ".join(op(i) for i in self.stuck))


@dataclass(slots=True)
class PartitionResult:
    """The verdict of one independent sub-history.

    ``op_indices`` maps the partition's ops to indices in the checked list;
    ``partial_linearizations`` are longest linearizable prefixes (lists of
    those indices), one per distinct prefix, gathered in verbose mode;
    ``reason`` says why an ``unknown`` partition is unknown; ``explanation``
    is set on every ``illegal`` one.
    """

    op_indices: list[int]
    result: str
    partial_linearizations: list[list[int]] = field(default_factory=list)
    configurations: int = 0  # memo size: how much search this partition took
    reason: str = ""
    explanation: Explanation | None = None
    seconds: float = 0.0  # CPU time spent in this partition's search
    final_state: Any = None  # on ``ok``: the model state after the witness (a window hands it on)
    witness: list[int] = field(default_factory=list)  # on ``ok``: the linearization (positions in the partition)
    memo_bytes: int = 0  # the memo as the budget counts it (``entry_bytes``; last, as callers build this by position)


@dataclass
class LinearizabilityResult:
    result: str  # "ok" | "illegal" | "unknown"
    partitions: list[PartitionResult]
    engine: str = "compiled"  # "compiled" (the C core) or "python" (the reference)

    @property
    def partial_linearizations(self) -> list[list[list[int]]]:
        return [p.partial_linearizations for p in self.partitions]

    @property
    def ok(self) -> bool:
        return self.result == OK

    @property
    def reasons(self) -> list[str]:
        """Why each unknown partition is unknown."""
        return [p.reason for p in self.partitions if p.result == UNKNOWN_RESULT and p.reason]


# --------------------------------------------------------------------------- budget


@dataclass(frozen=True)
class Budget:
    """What one partition's search may spend before it ends ``unknown`` with the reason.

    ``seconds``: CPU time spent searching this partition (its own slices,
    not the others'; CPU, not wall, so the verdict does not depend on the
    machine's load); ``configurations``: memo entries; ``memo_bytes``: the
    memo's size, the sum of ``entry_bytes`` over its configurations (what
    the compiled core holds for each), counted the same way by both engines,
    so both stop at the same configuration: the first new one that would take
    the sum over ``memo_bytes``. ``None`` = no limit. The defaults let a
    realistic history's partitions finish (most need a few hundred
    configurations) and stop a pathological one within seconds and a few
    hundred MB.
    """

    seconds: float | None = 10.0
    configurations: int | None = 20_000_000
    memo_bytes: int | None = 256 * 2**20

    @classmethod
    def from_mapping(cls, spec: dict | None) -> "Budget":
        """A budget from plain data (a checker context's ``linearizable_budget``); ``None`` = the default.

        Keys: ``seconds``, ``configurations``, ``memo_bytes`` (each a number or
        ``null`` for no limit); a missing key keeps its default.
        """
        if spec is None:
            return DEFAULT_BUDGET
        if not isinstance(spec, dict) or set(spec) - {"seconds", "configurations", "memo_bytes"}:
            raise ValueError(f"linearizable_budget must map seconds/configurations/memo_bytes, not {spec!r}")
        for k, v in spec.items():
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0):
                raise ValueError(f"linearizable_budget.{k} must be a positive number or null, not {v!r}")
        return cls(**{**DEFAULT_BUDGET.__dict__, **spec})

    def describe(self) -> str:
        """The limits in words."""
        bits = [f"{self.seconds:g} s" if self.seconds is not None else "",
                f"{self.configurations:,} configurations" if self.configurations is not None else "",
                _size(self.memo_bytes) + " of memo" if self.memo_bytes is not None else ""]
        return " / ".join(b for b in bits if b) or "unlimited"


def _size(n: float) -> str:
    return f"{n // 2**20:,.0f} MiB" if n % 2**20 == 0 else f"{n:,.0f} bytes"


def entry_bytes(ranks: int) -> int:
    """What a configuration costs the memo budget: the compiled core's entry for the linearized set
    ``ranks`` (an int, bit r = the op r-th in call order) and the table slots it takes at 25-50 % load.

    The entry is 32-bit units: the state id, ``lo`` (the lowest rank not in the set), ``g`` (one
    past its highest) and the set's bits from ``lo`` to ``g``. A prefix of the calls plus ops
    not far past it, as the search's sets nearly always are, costs a few units however long the
    partition is."""
    lo = (~ranks & (ranks + 1)).bit_length() - 1
    return 4 * (3 + (ranks.bit_length() - lo + 31) // 32) + 32


DEFAULT_BUDGET = Budget()
UNLIMITED = Budget(None, None, None)


# --------------------------------------------------------------------------- entries


def _twins(ops: Sequence[Operation]) -> list[int] | None:
    """Each never-returned op's earlier twin (same input and output, called before it), or -1.

    ``None`` when there are none: the plain search.
    """
    pending = sorted((op.call, i) for i, op in enumerate(ops) if op.return_time == INF)
    if len(pending) < 2:
        return None
    twins = [-1] * len(ops)
    last: dict[Any, int] = {}
    for _, i in pending:
        key = _twin_key(ops[i])
        if key is None:
            continue
        if key in last:
            twins[i] = last[key]
        last[key] = i
    return twins if any(t >= 0 for t in twins) else None


def _twin_key(op: Operation) -> Any:
    try:
        key = (op.input, op.output)
        hash(key)
        return key
    except TypeError:
        return None


def _order(ops: Sequence[Operation]) -> list[tuple]:
    """(time, 0 call / 1 return, op id), sorted: at equal times calls before returns (closed intervals)."""
    order = []
    for i, op in enumerate(ops):
        if op.return_time < op.call:
            raise ValueError(f"op {i} returns before it is called")
        order.append((op.call, 0, i))
        order.append((op.return_time, 1, i))
    order.sort()
    return order


@dataclass
class _Entries:
    """One partition as flat arrays over entry positions 1..2n (0 = head, 2n+1 = tail).

    ``match``: call pos -> its return pos, negated if the call has an earlier
    twin; 0 on returns (and the sentinels). ``opid``: call pos -> op id.
    ``rank``: call pos -> the op's rank among the calls in time order (the
    linearized set is kept over ranks: see ``entry_bytes``). ``twin``: call
    pos -> rank of the earlier twin that must be linearized first, or -1.
    (``_search.c`` builds the same arrays itself.)
    """

    n: int
    match: list[int]
    opid: list[int]
    rank: list[int]
    twin: list[int]


def _make_entries(ops: Sequence[Operation], twins: list[int] | None) -> _Entries:
    n = len(ops)
    size = 2 * n + 2
    match = [0] * size
    opid = [0] * size
    rank = [0] * size
    twin = [-1] * size
    call_pos = [0] * n
    calls = 0
    for pos, (_, kind, i) in enumerate(_order(ops), start=1):
        if kind == 0:
            call_pos[i] = pos
            opid[pos] = i
            rank[pos] = calls
            calls += 1
        else:
            match[call_pos[i]] = pos
    for i, t in enumerate(twins or ()):
        if t >= 0:
            twin[call_pos[i]] = rank[call_pos[t]]
            match[call_pos[i]] = -match[call_pos[i]]
    return _Entries(n, match, opid, rank, twin)


# --------------------------------------------------------------------------- interned states (the memo's state half)


class _Keyed:
    """Wraps a state so a model's own ``equal``/``hash`` drive interning."""

    __slots__ = ("state", "_h", "_eq")

    def __init__(self, state: Any, h: Any, eq: Any):
        self.state, self._h, self._eq = state, h(state), eq

    def __hash__(self) -> int:
        return self._h

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Keyed) and self._eq(self.state, other.state)


class _States:
    """The model seen through interned states: ``step(op, sid) -> sid'`` or -1 if illegal.

    ``states``: sid -> state (sid 0 is ``init()``); ``interned``: state (or,
    for a model with its own ``equal``/``hash``, a ``_Keyed`` wrapper) ->
    sid. The reference engine steps through it, and so does the compiled core
    for a model with its own ``equal``/``hash``; for any other model the core
    keeps a plain list and dict of the same shape and interns into them itself.
    """

    def __init__(self, model: Model, ops: Sequence[Operation]):
        self.direct = model.hash is None and model.equal in (None, _default_equal)
        self.model, self.ops = model, ops
        init = model.init()
        self.states: list[Any] = [init]
        self.interned: dict[Any, int] = {init if self.direct else self._key(init): 0}

    def _key(self, state: Any) -> Any:
        return state if self.direct else _Keyed(state, self.model.hash or (lambda _s: 0),
                                                self.model.equal or _default_equal)

    @property
    def step(self):
        states, interned, model_step = self.states, self.interned, self.model.step
        inputs = [op.input for op in self.ops]
        outputs = [op.output for op in self.ops]
        key = None if self.direct else self._key  # a custom equal with no hash: correct, slow

        def step(op: int, sid: int) -> int:
            legal, new_state = model_step(states[sid], inputs[op], outputs[op])
            if not legal:
                return -1
            k = new_state if key is None else key(new_state)
            ns = interned.get(k)
            if ns is None:
                ns = interned[k] = len(states)
                states.append(new_state)
            return ns

        return step


# --------------------------------------------------------------------------- the core search


class _Found(NamedTuple):
    """What a finished engine hands back (op ids are positions in the partition)."""

    verdict: str  # OK | ILLEGAL | UNKNOWN_RESULT (budget)
    prefix: list[int]  # the witness on OK, else the longest linearizable prefix
    sid: int  # the state after ``prefix``
    partials: list[list[int]]
    configurations: int
    memo_bytes: int  # the memo as the budget counts it: ``entry_bytes`` summed over the configurations
    next_ops: list[int] = []  # after ``prefix``, in list order: the ops that could come next
    first_return: int = -1  # ... and the first op to return (-1: none)


Search = Generator[None, None, _Found]  # the reference engine; each yield ends a slice


def _search_python(ops: Sequence[Operation], twins: list[int] | None, states: _States, track: bool,
                   max_configurations: int, max_bytes: int) -> Search:
    """Search one partition; a generator that yields every ``_SLICE`` backtracks.

    Yielding lets one thread interleave the partitions the way Porcupine's
    goroutines do, so a quick Illegal partition stops a slow one, and lets the
    caller enforce time budgets. The list is two int arrays (``nxt``/``prv``)
    over entry positions with sentinels; the set of linearized ops is a Python
    int over ranks; the memo key is one int, ``bits | sid << n``, and the memo
    budget charges ``entry_bytes(bits)`` for it, as the compiled core does.
    """
    en = _make_entries(ops, twins)
    n, match, opid, twin_rank = en.n, en.match, en.opid, en.twin
    size = len(match)
    tail = size - 1
    nxt = list(range(1, size + 1))
    nxt[tail] = tail
    prv = [0] + list(range(0, size - 1))
    bit = [1 << r for r in en.rank]
    twin = [0 if t < 0 else 1 << t for t in twin_rank]
    step = states.step
    trans: list[dict[int, int]] = [{} for _ in range(size)]
    longest: list[tuple | None] = [None] * n
    longest_len = [0] * n
    best: tuple = ()
    best_sid = 0
    cache: set[int] = set()
    add = cache.add
    calls: list[int] = []
    saved: list[int] = []
    push_call, push_state, pop_call, pop_state = calls.append, saved.append, calls.pop, saved.pop
    sid = 0
    bits = 0
    used = 0  # memo bytes
    shift = n
    countdown = _SLICE
    e = nxt[0]
    while True:
        m = match[e]
        if m:  # a call: try to linearize it here
            if m < 0:  # a twin: only after its earlier twin
                if not bits & twin[e]:
                    e = nxt[e]
                    continue
                m = -m
            memo = trans[e]
            ns = memo.get(sid)
            if ns is None:  # memo miss: ask the model
                ns = memo[sid] = step(opid[e], sid)
            if ns >= 0:
                nb = bits | bit[e]
                key = nb | (ns << shift)
                if key not in cache:
                    cost = entry_bytes(nb)
                    if len(cache) >= max_configurations or used + cost > max_bytes:
                        return _Found(UNKNOWN_RESULT, [opid[c] for c in best], best_sid, [], len(cache), used)
                    used += cost
                    add(key)
                    push_call(e)
                    push_state(sid)
                    sid = ns
                    bits = nb
                    p = prv[e]; q = nxt[e]; nxt[p] = q; prv[q] = p  # lift the call
                    p = prv[m]; q = nxt[m]; nxt[p] = q; prv[q] = p  # and its return
                    e = nxt[0]
                    if e == tail:
                        break
                    continue
            e = nxt[e]
        else:  # a return: every candidate before it failed; backtrack
            if not calls:
                return _Found(ILLEGAL, [opid[c] for c in best], best_sid, _partials(longest, opid), len(cache),
                              used, *_next_after(best, match, opid))
            if len(calls) > len(best):
                best, best_sid = tuple(calls), sid
            if track:
                seq = tuple(calls)
                size = len(seq)
                for c in seq:
                    o = opid[c]
                    if size > longest_len[o]:
                        longest_len[o] = size
                        longest[o] = seq
            countdown -= 1
            if not countdown:
                countdown = _SLICE
                yield
            e = pop_call()
            sid = pop_state()
            bits ^= bit[e]
            m = match[e]
            if m < 0:
                m = -m
            nxt[prv[m]] = m; prv[nxt[m]] = m  # unlift the return
            nxt[prv[e]] = e; prv[nxt[e]] = e  # and the call
            e = nxt[e]
    full = [opid[c] for c in calls]
    return _Found(OK, full, sid, [full] if track else [], len(cache), used)


def _next_after(prefix: tuple, match: list[int], opid: list[int]) -> tuple[list[int], int]:
    """After ``prefix`` (call positions): the unlinearized calls before the first unlinearized return."""
    done = {opid[c] for c in prefix}
    ret_op = {abs(m): opid[pos] for pos, m in enumerate(match) if m}
    next_ops = []
    for pos in range(1, len(match) - 1):
        if match[pos]:
            if opid[pos] not in done:
                next_ops.append(opid[pos])
        elif ret_op[pos] not in done:
            return next_ops, ret_op[pos]
    return next_ops, -1


def _partials(longest: list, opid: list[int]) -> list[list[int]]:
    """De-duplicate the longest prefix of each op: at most one per op."""
    seen: dict[int, list[int]] = {}
    for seq in longest:
        if seq is not None and id(seq) not in seen:
            seen[id(seq)] = [opid[c] for c in seq]
    return list(seen.values())


_new = tuple.__new__  # builds a _Found without a Python-level __new__ (the core's hot path is per partition)


class _CompiledSearch:
    """The same search in C (``_search.c``): ``slice()`` runs ``_WORK`` loop iterations.

    A model whose states compare by ``==`` is called by the core directly,
    interning into ``states`` and a dict; any other goes through ``_States.step``.
    """

    __slots__ = ("core", "states", "track", "max_configurations", "max_bytes")

    def __init__(self, model: Model, ops: list[Operation], twins: list[int] | None, track: bool,
                 max_configurations: int, max_bytes: int):
        if model.hash is None and model.equal in (None, _default_equal):
            init = model.init()
            self.states = [init]
            self.core = _compiled.Search(ops, twins, track, None, model.step, self.states, {init: 0}, model.effect)
        else:
            states = _States(model, ops)
            self.states = states.states
            self.core = _compiled.Search(ops, twins, track, states.step)
        self.track, self.max_configurations, self.max_bytes = track, max_configurations, max_bytes

    def slice(self) -> _Found | None:
        """``None`` while the search goes on, then what it found."""
        core = self.core
        status = core.run(_WORK, self.max_configurations, self.max_bytes)
        if not status:
            return None
        prefix, sid = core.longest()
        verdict = (OK, ILLEGAL, UNKNOWN_RESULT)[status - 1]
        partials = core.partials() if self.track and verdict != UNKNOWN_RESULT else []
        next_ops, first = core.next_after_longest() if verdict == ILLEGAL else ([], -1)
        return _new(_Found, (verdict, prefix, sid, partials, core.configurations, core.memo_bytes, next_ops, first))

    @property
    def configurations(self) -> int:
        """The configurations met so far (a search stopped for time reports them)."""
        return self.core.configurations if self.core is not None else 0

    def close(self) -> None:
        self.core = None


class _PythonSearch:
    """The reference engine: the generator ``_search_python`` driven one slice at a time."""

    __slots__ = ("search", "states")

    def __init__(self, model: Model, ops: list[Operation], twins: list[int] | None, track: bool,
                 max_configurations: int, max_bytes: int):
        states = _States(model, ops)
        self.states = states.states
        self.search = _search_python(ops, twins, states, track, max_configurations, max_bytes)

    def slice(self) -> _Found | None:
        try:
            next(self.search)
        except StopIteration as done:
            return done.value
        return None

    def close(self) -> None:
        self.search.close()


ENGINES = {"python": _PythonSearch, "compiled": _CompiledSearch}


def _engine(name: str) -> str:
    if name == "auto":
        if _compiled is not None:
            return "compiled"
        warnings.warn(f"the compiled linearizability core is not built ({_COMPILED_MISSING}); using the "
                      "pure-Python reference, which is slower (run: pip install -e .)", RuntimeWarning, stacklevel=3)
        return "python"
    if name not in ENGINES:
        raise ValueError(f"engine must be auto, compiled or python, not {name!r}")
    if name == "compiled" and _compiled is None:
        raise ImportError(f"the compiled linearizability core is not built: {_COMPILED_MISSING} (run: pip install -e .)")
    return name


# --------------------------------------------------------------------------- minimal explanations


def _explain(model: Model, ops: Sequence[Operation], found: _Found, state: Any, idx: list[int]) -> Explanation:
    """The ops that cannot follow the longest prefix, each rejected by the model in ``state``.

    At the longest prefix every candidate is illegal: a legal one would lead
    to a longer prefix (a new configuration is searched; a seen one was
    searched from a stack one longer). The candidates (``found.next_ops``)
    are the unlinearized ops called before the first unlinearized return, as
    in the search. ``idx`` maps partition positions to the indices reported.
    """
    stuck = [i for i in found.next_ops if not model.step(state, ops[i].input, ops[i].output)[0]]
    first = None if found.first_return < 0 else found.first_return
    described = {idx[i]: f"(client {ops[i].client_id}) {model.describe_operation(ops[i].input, ops[i].output)}"
                 for i in stuck + ([] if first is None else [first])}
    return Explanation([idx[i] for i in found.prefix], state, model.describe_state(state), [idx[i] for i in stuck],
                       None if first is None else idx[first], described)


# --------------------------------------------------------------------------- partitions, budgets and timeouts


class _Running:
    """A partition whose search is under way."""

    __slots__ = ("result", "ops", "search", "spent")

    def __init__(self, result: PartitionResult, ops: list[Operation], search: _CompiledSearch | _PythonSearch,
                 spent: float):
        self.result, self.ops, self.search, self.spent = result, ops, search, spent


def check_operations(model: Model, ops: Sequence[Operation], timeout: float | None = None,
                     verbose: bool = False, symmetry: bool = True, budget: Budget | None = DEFAULT_BUDGET,
                     engine: str = "auto") -> LinearizabilityResult:
    """Is the timed history ``ops`` linearizable under ``model``?

    ``timeout`` (seconds, ``None`` = no limit) bounds the whole check;
    ``budget`` bounds each partition (``None`` = unlimited). A search that
    runs out of either is ``unknown`` with the reason (unless a partition is
    illegal, which decides). Without ``verbose`` the first illegal partition
    stops the rest (Porcupine's cancel); with it every partition is searched
    and its longest partial linearizations are recorded for the timeline.
    ``engine``: ``"compiled"`` (the C core), ``"python"`` (the reference) or
    ``"auto"`` (compiled if built, else Python with a warning).
    """
    search_with = ENGINES[_engine(engine)]
    budget = budget or UNLIMITED
    ops = list(ops)
    if model.partition:
        parts = model.partition(ops)
        if _compiled is not None:
            indices = _compiled.positions(ops, parts if isinstance(parts, list) else list(parts))
        else:
            index_of = dict(zip(map(id, ops), range(len(ops))))
            indices = [[index_of[x] for x in map(id, part)] for part in parts]
    else:
        parts, indices = [ops], [list(range(len(ops)))]
    clock = time.monotonic  # the whole check's timeout: wall time
    # a partition's budget: CPU time of this thread (the search runs in it), so a loaded machine
    # slows a search down without turning its verdict unknown
    spend = time.thread_time
    deadline = clock() + timeout if timeout else INF
    results = [PartitionResult(idx, UNKNOWN_RESULT) for idx in indices]
    seconds = budget.seconds
    max_conf = 2**62 if budget.configurations is None else int(budget.configurations)
    max_bytes = 2**62 if budget.memo_bytes is None else int(budget.memo_bytes)
    running: deque[_Running] = deque()
    illegal = False
    # each partition's first slice runs as it is set up (most finish there); the rest take turns
    for part, res in zip(parts, results):
        if illegal and not verbose:
            break
        if clock() > deadline:
            break
        if not part:
            res.result = OK
            continue
        now = spend()
        part = list(part)
        search = search_with(model, part, _twins(part) if symmetry else None, verbose, max_conf, max_bytes)
        found = search.slice()
        if found is None:
            running.append(_Running(res, part, search, spend() - now))
        else:
            _finish(model, res, part, search.states, found, spend() - now, budget)
            illegal = illegal or found.verdict == ILLEGAL
    while running and not (illegal and not verbose):
        if clock() > deadline:
            break
        run = running.popleft()
        now = spend()
        found = run.search.slice()
        run.spent += spend() - now
        if found is not None:
            _finish(model, run.result, run.ops, run.search.states, found, run.spent, budget)
            illegal = illegal or found.verdict == ILLEGAL
        elif seconds is not None and run.spent > seconds:
            # (the reference engine does not count on the way: 0 there)
            run.result.configurations = getattr(run.search, "configurations", 0)
            run.search.close()
            run.result.reason = (f"search budget of {seconds:g} s used up ({len(run.ops)} ops, "
                                 f"{run.result.configurations:,} configurations); the verdict for this "
                                 "partition is unknown")
            run.result.seconds = run.spent
        else:
            running.append(run)
    for run in running:
        run.search.close()
        run.result.seconds = run.spent
    for r in results:
        if r.result == UNKNOWN_RESULT and not r.reason:
            r.reason = ("not searched to the end: another partition is not linearizable" if illegal
                        else f"the check's timeout of {timeout:g} s ran out")
    if illegal:
        verdict = ILLEGAL
    elif all(r.result == OK for r in results):
        verdict = OK
    else:
        verdict = UNKNOWN_RESULT
    return LinearizabilityResult(verdict, results, "python" if search_with is _PythonSearch else "compiled")


def _finish(model: Model, res: PartitionResult, ops: list[Operation], states: list, found: _Found, spent: float,
            budget: Budget) -> None:
    """A finished search -> its partition's result, in indices of the checked list."""
    idx = res.op_indices
    res.result, res.configurations, res.memo_bytes, res.seconds = (found.verdict, found.configurations,
                                                                   found.memo_bytes, spent)
    if found.verdict == OK:
        res.final_state = states[found.sid]
        res.witness = found.prefix
    if found.partials:
        res.partial_linearizations = [[idx[o] for o in seq] for seq in found.partials]
    if found.verdict == UNKNOWN_RESULT:
        res.reason = (f"search budget of {budget.describe()} used up ({len(ops)} ops, "
                      f"{found.configurations:,} configurations); the verdict for this partition is unknown")
    elif found.verdict == ILLEGAL:
        res.explanation = _explain(fill_defaults(model), ops, found, states[found.sid], idx)


# --------------------------------------------------------------------------- adapters


def check_events(model: Model, events: Sequence[Event], timeout: float | None = None,
                 verbose: bool = False, symmetry: bool = True, budget: Budget | None = DEFAULT_BUDGET,
                 engine: str = "auto") -> LinearizabilityResult:
    """The same check over an ordered call/return event list (the index is the time).

    A model's ``partition_events`` is honoured by partitioning the events first.
    Op indices in the result refer to calls in event order.
    """
    if model.partition_events and not model.partition:
        ops_all: list[Operation] = []
        groups: list[list[Operation]] = []
        # time = index in the full event list, so partitions keep real-time order
        by_id = {id(ev): i for i, ev in enumerate(events)}
        for part in model.partition_events(list(events)):
            renumbered = [Event(ev.client_id, ev.kind, ev.value, ev.id, ev.metadata) for ev in part]
            group = events_to_operations(renumbered)
            times = [by_id[id(ev)] for ev in part]
            call_times = iter([t for t, ev in zip(times, part) if ev.kind == 0])
            ret_time = {ev.id: t for t, ev in zip(times, part) if ev.kind == 1}
            for op, ev_call in zip(group, [ev for ev in part if ev.kind == 0]):
                op.call = next(call_times)
                op.return_time = ret_time.get(ev_call.id, INF)
            groups.append(group)
            ops_all.extend(group)
        keyed = {id(op): g for g, grp in enumerate(groups) for op in grp}
        partitioned = Model(**{**model.__dict__, "partition": lambda ops: _regroup(ops, keyed, len(groups))})
        return check_operations(partitioned, ops_all, timeout, verbose, symmetry, budget, engine)
    return check_operations(model, events_to_operations(events), timeout, verbose, symmetry, budget, engine)


def _regroup(ops: list[Operation], keyed: dict[int, int], n: int) -> list[list[Operation]]:
    groups: list[list[Operation]] = [[] for _ in range(n)]
    for op in ops:
        groups[keyed[id(op)]].append(op)
    return groups
