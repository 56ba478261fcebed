"""Porcupine's linearizability checker, in Python (checker.go, read top to bottom).

entries -> linked list -> memo -> the core search loop -> partitions and
timeouts -> the Operation/Event adapters.

The search is Wing & Gong's with Lowe's memo, "just in time": walk the entry
list in time order; a call whose step is legal and whose resulting
configuration (set of linearized ops, model state) is new gets linearized and
lifted out of the list, and the walk restarts; reaching a return means every
candidate before the earliest pending return failed, so backtrack. An empty
list is a witness. Intervals are closed: at equal times calls sort before
returns, so ops that share an endpoint are concurrent.

Why it looks the way it does (CPython speed): the list is two int arrays
(``nxt``/``prv``) over entry positions with sentinels, not node objects; the
set of linearized ops is a Python int; model states are interned to small ints
(``sid``) and every call entry memoizes ``sid -> next sid`` (``step`` is pure),
so the hot loop calls the model only on a memo miss; the memo key is one int,
``bits | sid << n``. One reduction beyond Porcupine, exact for verdicts: ops
that never returned (``return_time == INF``) with identical input and output
are interchangeable, so among such "twins" only the earliest-called
unlinearized one is a candidate (swapping two twins in any linearization gives
another linearization). ``symmetry=False`` turns it off.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from collections import deque
from typing import Any, Generator, Sequence

from .model import INF, Event, Model, Operation, _default_equal, events_to_operations, fill_defaults

OK, ILLEGAL, UNKNOWN_RESULT = "ok", "illegal", "unknown"
_SLICE = 1024  # backtracks per time slice of one partition's search


# --------------------------------------------------------------------------- results


@dataclass
class PartitionResult:
    """The verdict of one independent sub-history.

    ``op_indices`` maps the partition's ops to indices in the checked list;
    ``partial_linearizations`` are longest linearizable prefixes (lists of
    those indices), one per distinct prefix, gathered in verbose mode.
    """

    op_indices: list[int]
    result: str
    partial_linearizations: list[list[int]] = field(default_factory=list)
    configurations: int = 0  # memo size: how much search this partition took


@dataclass
class LinearizabilityResult:
    result: str  # "ok" | "illegal" | "unknown"
    partitions: list[PartitionResult]

    @property
    def partial_linearizations(self) -> list[list[list[int]]]:
        return [p.partial_linearizations for p in self.partitions]

    @property
    def ok(self) -> bool:
        return self.result == OK


# --------------------------------------------------------------------------- entries and linked list


@dataclass
class _Entries:
    """One partition as flat arrays over entry positions 1..2n (0 = head, 2n+1 = tail)."""

    nxt: list[int]
    prv: list[int]
    match: list[int]  # call pos -> its return pos (negated if the call has a twin); 0 on returns
    bit: list[int]  # call pos -> 1 << op id
    twin: list[int]  # call pos -> bit of the earlier twin that must be linearized first, or 0
    opid: list[int]  # call pos -> op id
    inputs: list[Any]
    outputs: list[Any]
    tail: int


def _twin_key(op: Operation) -> Any:
    try:
        key = (op.input, op.output)
        hash(key)
        return key
    except TypeError:
        return None


def _make_entries(ops: Sequence[Operation], symmetry: bool) -> _Entries:
    n = len(ops)
    order = []
    for i, op in enumerate(ops):
        order.append((op.call, 0, i))
        order.append((op.return_time, 1, i))
    order.sort()  # time, then call (0) before return (1): closed intervals
    size = 2 * n + 2
    tail = size - 1
    nxt = list(range(1, size + 1))
    nxt[tail] = tail
    prv = [0] + list(range(0, size - 1))
    match = [0] * size
    bit = [0] * size
    twin = [0] * size
    opid = [0] * size
    inputs: list[Any] = [None] * size
    outputs: list[Any] = [None] * size
    call_pos = [0] * n
    for pos, (_, kind, i) in enumerate(order, start=1):
        if kind == 0:
            call_pos[i] = pos
            bit[pos] = 1 << i
            opid[pos] = i
            inputs[pos] = ops[i].input
            outputs[pos] = ops[i].output
        else:
            match[call_pos[i]] = pos
    if symmetry:
        last_twin: dict[Any, int] = {}
        for _, kind, i in order:
            if kind == 1 or ops[i].return_time != INF:
                continue
            key = _twin_key(ops[i])
            if key is None:
                continue
            pos = call_pos[i]
            if key in last_twin:
                twin[pos] = last_twin[key]
                match[pos] = -match[pos]
            last_twin[key] = bit[pos]
    return _Entries(nxt, prv, match, bit, twin, opid, inputs, outputs, tail)


# --------------------------------------------------------------------------- state interning (the memo's state half)


class _Keyed:
    """Wraps a state so a model's own ``equal``/``hash`` drive interning."""

    __slots__ = ("state", "_h", "_eq")

    def __init__(self, state: Any, h: Any, eq: Any):
        self.state, self._h, self._eq = state, h(state), eq

    def __hash__(self) -> int:
        return self._h

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Keyed) and self._eq(self.state, other.state)


# --------------------------------------------------------------------------- the core search


def _search(model: Model, ops: Sequence[Operation], track: bool,
            symmetry: bool) -> Generator[None, None, tuple[str, list[list[int]], int]]:
    """Search one partition; a generator that yields every few thousand backtracks.

    Yielding lets one thread interleave the partitions the way Porcupine's
    goroutines do, so a quick Illegal partition stops a slow one, and lets the
    caller enforce the timeout. Returns (verdict, partial linearizations as
    op ids, memo size) through ``StopIteration``.
    """
    n = len(ops)
    if n == 0:
        return OK, [], 0
    en = _make_entries(ops, symmetry)
    nxt, prv, match, bit, twin = en.nxt, en.prv, en.match, en.bit, en.twin
    inputs, outputs, tail = en.inputs, en.outputs, en.tail
    step = model.step
    custom = model.hash is not None or model.equal is not _default_equal
    state_hash = model.hash or (lambda _s: 0)  # a custom equal with no hash: correct, slow
    equal = model.equal
    states: list[Any] = []
    interned: dict[Any, int] = {}

    def intern(state: Any) -> int:
        key = _Keyed(state, state_hash, equal) if custom else state
        sid = interned.get(key)
        if sid is None:
            sid = interned[key] = len(states)
            states.append(state)
        return sid

    trans: list[dict[int, int]] = [{} for _ in range(len(nxt))]
    longest: list[tuple | None] = [None] * n
    longest_len = [0] * n
    opid = en.opid
    cache: set[int] = set()
    add = cache.add
    calls: list[int] = []
    saved: list[int] = []
    push_call, push_state, pop_call, pop_state = calls.append, saved.append, calls.pop, saved.pop
    sid = intern(model.init())
    bits = 0
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
            if ns is None:  # memo miss: ask the model (inlined: the kv-style hot path)
                legal, new_state = step(states[sid], inputs[e], outputs[e])
                if legal:
                    ns = interned.get(_Keyed(new_state, state_hash, equal) if custom else new_state)
                    if ns is None:
                        ns = intern(new_state)
                else:
                    ns = -1
                memo[sid] = ns
            if ns >= 0:
                nb = bits | bit[e]
                key = nb | (ns << shift)
                if key not in cache:
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
                return ILLEGAL, _partials(longest, opid), len(cache)
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
    full = tuple(calls)
    return OK, _partials([full] * n, opid) if track else [], len(cache)


def _partials(longest: list, opid: list[int]) -> list[list[int]]:
    """De-duplicate the longest prefix of each op: at most one per op."""
    seen: dict[int, list[int]] = {}
    for seq in longest:
        if seq is not None and id(seq) not in seen:
            seen[id(seq)] = [opid[c] for c in seq]
    return list(seen.values())


# --------------------------------------------------------------------------- partitions and timeouts


def check_operations(model: Model, ops: Sequence[Operation], timeout: float | None = None,
                     verbose: bool = False, symmetry: bool = True) -> LinearizabilityResult:
    """Is the timed history ``ops`` linearizable under ``model``?

    ``timeout`` (seconds, ``None`` = no limit) turns a search that runs out of
    time into ``unknown`` (unless a partition was already illegal). Without
    ``verbose`` the first illegal partition stops the rest (Porcupine's
    cancel); with it every partition is searched and its longest partial
    linearizations are recorded for the report's timeline.
    """
    model = fill_defaults(model)
    ops = list(ops)
    index_of = {id(op): i for i, op in enumerate(ops)}
    parts = model.partition(ops) if model.partition else [ops]
    deadline = time.monotonic() + timeout if timeout else INF
    results = [PartitionResult([index_of[id(op)] for op in part], UNKNOWN_RESULT) for part in parts]
    running = deque((i, _search(model, part, verbose, symmetry)) for i, part in enumerate(parts))
    illegal = False
    while running and not (illegal and not verbose):
        if time.monotonic() > deadline:
            break
        i, search = running.popleft()
        try:
            next(search)
        except StopIteration as done:
            res, partials, size = done.value
            indices = results[i].op_indices
            results[i] = PartitionResult(indices, res, [[indices[o] for o in seq] for seq in partials], size)
            illegal = illegal or res == ILLEGAL
            continue
        running.append((i, search))
    for _, search in running:
        search.close()
    if illegal:
        verdict = ILLEGAL
    elif all(r.result == OK for r in results):
        verdict = OK
    else:
        verdict = UNKNOWN_RESULT
    return LinearizabilityResult(verdict, results)


# --------------------------------------------------------------------------- adapters


def check_events(model: Model, events: Sequence[Event], timeout: float | None = None,
                 verbose: bool = False, symmetry: bool = True) -> LinearizabilityResult:
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
        return check_operations(partitioned, ops_all, timeout, verbose, symmetry)
    return check_operations(model, events_to_operations(events), timeout, verbose, symmetry)


def _regroup(ops: list[Operation], keyed: dict[int, int], n: int) -> list[list[Operation]]:
    groups: list[list[Operation]] = [[] for _ in range(n)]
    for op in ops:
        groups[keyed[id(op)]].append(op)
    return groups
