"""Witness-guided linearization of one claim register: evidence first, search only in small windows.

Two exact reductions, then the Porcupine search (``check_operations``) on
what is left:

1. **Info windows closed by evidence** (``bound_info_windows``). An op whose
   outcome is unknown returns at +inf: it may take effect anywhere after its
   call, so it straddles the rest of the history and the search keeps a
   choice open for it to the end. The replies say when that choice is gone.
   A later-called definite op ``O`` whose reply shows a state in which the
   info op ``I`` can no longer take effect, and never again (the register
   only moves forward), closes ``I``'s window at ``O``'s return:

   * an acquire with witness ``last_epoch = w``: ``O`` shows ``last_epoch >
     w`` (epochs only grow, and the acquire needs exactly ``w``);
   * a renew/release of epoch ``e``: ``O`` shows ``last_epoch >= e`` with no
     active claim of epoch ``e`` (only an acquire sets an active claim, at a
     fresh epoch), or ``O`` is a decision at or after the expected expiry
     (the persisted floor then says every later decision is too late);
   * a publish of operation id ``k``: ``O`` is a definite reply that leaves
     an outcome stored under ``k`` (a fresh or replayed ``ok`` or fence
     rejection, or a ``publication-read`` showing it); a later execution of
     ``I`` is a replay that changes nothing. Or ``O`` is a fresh publish
     decision showing a revision other than ``I``'s expected one, every
     publish whose candidate is that expected revision returned before ``O``
     was called (nothing can make it the revision again: ``I`` can commit
     nothing), and so did every definite op naming ``k`` (nothing reads what
     ``I`` would store);
   * an acquire past the epoch high-water mark takes effect nowhere: it
     returns at its call.

   And the other end: a publish of operation id ``k`` whose outcome a later-
   called ``publication-read`` of ``k`` answered ``operation-not-found``
   took no effect anyone could see before that read (every publish decision
   stores an outcome under ``k``, or changes nothing), so its window opens
   at that read's call (``defer_info_windows``): the final phase reads every
   outcome, and without this a publish killed early stays a choice over the
   whole history (a 177-op Wowbagger partition with 14 of them ran out of
   its budget). Exact as above: a linearization that places it before the
   read either stored an outcome the read did not see (illegal) or left the
   state as it was but for an alternative ``ABSENT`` the read keeps; moving
   it to just after the read, with no effect, is a linearization too.

   Exactness: if some linearization places ``I`` after ``O``, then ``I``
   has no effect there, and moving it to just before ``O`` (with no effect)
   gives a linearization too: every op after that point was linearized
   after ``O``'s point, which is after ``I``'s call, so real-time order
   holds; the states from there on are a superset (the model is a power
   set, and an ``info`` step may always have no effect). Conversely a
   shorter window only removes linearizations. So returning ``I`` at
   ``O``'s return changes no verdict.

2. **Segments at quiet points** (``segments``). Where no op straddles a
   point in time (every op before it returned before any op after it was
   called), every linearization does all ops before it first. The
   partition is cut there into windows of at least ``MIN_SEGMENT`` ops, and
   each window is searched from the state the previous window's witness
   ended in. All windows linearizable = a witness for the whole partition
   (the witnesses concatenate): ``valid``, soundly. The hand-over is one
   linearization's state, not every possible one, so a window that fails
   from it is searched once more together with the window before it, from
   that window's start (``valid`` soundly if that fits), then from an
   *exact* start: the partition's own, a
   window start whose state the replies pin (``pinned.py``: the one state
   every linearization of the ops before it leaves; used only where the
   witness ended in exactly that state), or the union of the states every
   linearization leaves there (``reachable.py``), reached window by window
   from the last exact start before it. The model is a power set, so the
   ops after a quiet point are linearizable after some linearization of the
   ops before it iff they are from that union: a search from an exact start
   decides, ``illegal`` or ``unknown`` (its budget). The explanation is
   the search's, its prefix led by a linearization of the windows before
   (``reachable.order_to``, back to the last pinned start) that ends in a
   state from which that prefix is legal.

Cost: a witness costs a window a few thousand configurations; the union of
the states a window can leave costs every configuration of it (a window of
1,200 busy ops: about 4 million, 232 MB at the memo's compact key, near the
default 256 MiB budget).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from backends.api import EPOCH_MAX

from .checker import (
    ILLEGAL, OK, UNKNOWN_RESULT, UNLIMITED, Budget, LinearizabilityResult, PartitionResult, check_operations,
)
from .model import INF, UNKNOWN, Model, Operation, fill_defaults
from .pinned import pinned_states
from .reachable import order_to, reached, replay, source

MIN_SEGMENT = 128  # ops per window at least (a window is cut only at a quiet point)

_CLAIM_KINDS = ("acquire", "renew", "release")


# --------------------------------------------------------------------------- 1. info windows


class _Evidence:
    """What one definite reply shows about the register from its point on."""

    __slots__ = ("record", "floor", "stored", "revision")

    def __init__(self, op: Operation, fresh: bool):
        inp, out = op.input, op.output
        kind, code = inp[0], out[0]
        self.record = out[2] if kind != "pread" else None  # (last_epoch, active) at its point
        decides = kind in _CLAIM_KINDS or (kind == "publish" and code in ("ok", "claim-fence-rejected"))
        self.floor = out[1] if decides else None  # the decision time it persists (reads persist none)
        stores = (kind == "publish" and code in ("ok", "claim-fence-rejected")) or (kind == "pread" and code == "ok")
        self.stored = inp[1] if stores else None  # an outcome is stored under this id from then on
        # a fresh publish decision shows the revision (a replay shows the stored one's, of its own time)
        reveals = fresh and kind == "publish" and code in ("ok", "ledger-revision-conflict")
        self.revision = out[3][0] if reveals else None

    def says_something(self) -> bool:
        return not (self.record is None and self.floor is None and self.stored is None and self.revision is None)


def _closes(info: tuple, ev: _Evidence, quiet_after: float, call: float, committers: dict) -> bool:
    """Does a reply called at ``call`` (its evidence ``ev``) rule ``info`` out from its point on?

    ``quiet_after``: for a publish, the latest return of the definite ops
    naming its operation id (the only ones that could read what it stores:
    an ``info`` op naming it may always have no effect); ``committers``:
    per revision, the latest return of the publishes whose candidate it is
    (after that no publish can make it the ledger's revision again).
    """
    kind = info[0]
    rec = ev.record
    if kind == "acquire":
        return rec is not None and rec[0] > info[3]
    if kind in ("renew", "release"):
        epoch, expected_expires = info[2], info[3]
        if ev.floor is not None and ev.floor >= expected_expires:
            return True
        return rec is not None and rec[0] >= epoch and (rec[1] is None or rec[1][1] != epoch)
    if kind == "publish":
        if ev.stored == info[1]:
            return True  # a later execution is a replay
        # the revision moved off the expected one and no publish can bring it back: a commit is
        # impossible, and what it stores no op naming the id can read any more
        expected = info[3]
        return (ev.revision is not None and ev.revision != expected and committers.get(expected, -INF) < call
                and quiet_after < call)
    return False


def _never(info: tuple) -> bool:
    """An op that can take effect in no state (an acquire past the epoch high-water mark)."""
    return info[0] == "acquire" and info[3] >= EPOCH_MAX


def defer_info_windows(ops: list[Operation]) -> tuple[list[Operation], int]:
    """``ops`` (copies where changed, same order) with each open publish called at the latest
    ``operation-not-found`` read of its operation id called after it; and how many moved."""
    absent: dict = {}  # operation id -> the latest call of a read that found nothing under it
    for op in ops:
        if op.input[0] == "pread" and op.output is not UNKNOWN and op.output[0] == "operation-not-found":
            absent[op.input[1]] = max(absent.get(op.input[1], -INF), op.call)
    out, moved = list(ops), 0
    for i, op in enumerate(ops):
        if op.input[0] == "publish" and op.return_time == INF and absent.get(op.input[1], -INF) > op.call:
            out[i] = replace(op, call=absent[op.input[1]])
            moved += 1
    return out, moved


def bound_info_windows(ops: list[Operation], passes: int = 3) -> tuple[list[Operation], int]:
    """``_bound_once`` until nothing moves (a window closed in one pass can
    close another's in the next: a publish whose revision it waited for)."""
    moved = 0
    for _ in range(passes):
        ops, n = _bound_once(ops)
        moved += n
        if not n:
            break
    return ops, moved


def _bound_once(ops: list[Operation]) -> tuple[list[Operation], int]:
    """``ops`` (copies where changed, same order) with each open op's return
    moved to the first later-called reply that rules it out; and how many moved.

    One pass in call order keeps the open ops; each definite reply closes
    the ones it rules out (an op is checked against each later reply once
    while open, so the cost is the open ops times the replies they stay
    open for, which the evidence keeps short).
    """
    out = list(ops)
    order = sorted(range(len(ops)), key=lambda i: ops[i].call)
    naming: dict = {}  # operation id -> the ops naming it
    for i, op in enumerate(ops):
        if op.input[0] in ("publish", "pread"):
            naming.setdefault(op.input[1], []).append(i)
    committers: dict = {}
    for op in ops:
        if op.input[0] == "publish":
            committers[op.input[4]] = max(committers.get(op.input[4], -INF), op.return_time)
    open_: list[int] = []
    quiet_after: dict[int, float] = {}
    moved = 0
    for i in order:
        op = ops[i]
        if op.return_time == INF:
            if _never(op.input):
                out[i] = replace(op, return_time=op.call)
                moved += 1
                continue
            open_.append(i)
            if op.input[0] == "publish":
                quiet_after[i] = max((ops[j].return_time for j in naming[op.input[1]]
                                      if ops[j].return_time != INF), default=-INF)
            continue
        if not open_ or op.output is UNKNOWN:
            continue
        fresh = op.input[0] == "publish" and all(
            ops[j].call > op.return_time for j in naming[op.input[1]] if j != i)
        ev = _Evidence(op, fresh)
        if not ev.says_something():
            continue
        still = []
        for j in open_:
            if _closes(ops[j].input, ev, quiet_after.get(j, -INF), op.call, committers):
                out[j] = replace(ops[j], return_time=op.return_time)
                moved += 1
            else:
                still.append(j)
        open_ = still
    return out, moved


# --------------------------------------------------------------------------- 2. segments


def segments(ops: list[Operation], min_ops: int = MIN_SEGMENT) -> list[list[int]]:
    """Indices of ``ops`` in windows cut at quiet points, each at least
    ``min_ops`` long (the last may be shorter), in call order."""
    order = sorted(range(len(ops)), key=lambda i: ops[i].call)
    out: list[list[int]] = []
    current: list[int] = []
    reach = -INF  # the latest return of the current window so far
    for i in order:
        op = ops[i]
        if len(current) >= min_ops and reach < op.call:
            out.append(current)
            current = []
        current.append(i)
        reach = max(reach, op.return_time)
    if current:
        out.append(current)
    return out


# --------------------------------------------------------------------------- the check


@dataclass
class WitnessStats:
    info_closed: int = 0  # info ops whose window the evidence closed
    info_deferred: int = 0  # info publishes whose window opens only at a read that found nothing
    segments: int = 1  # windows
    pinned: int = 0  # window starts whose state the replies pin (see ``pinned``)
    widened: int = 0  # window starts made exact by the states reached from an exact start before them


PIN, REACHED = "pin", "reached"  # an exact window start: one state every linearization leaves, or their union


#: configurations the exact search may spend on the explanation of a partition the deferred
#: windows decided (a count, not seconds: the explanation printed must not depend on the machine)
EXPLAIN_CONFIGURATIONS = 200_000


def check_register(model: Model, start: tuple, ops: list[Operation], timeout: float | None,
                   budget: Budget | None, min_segment: int = MIN_SEGMENT,
                   engine: str = "auto") -> tuple[LinearizabilityResult, WitnessStats]:
    """``_check_windows`` with info publishes deferred (``defer_info_windows``). Deferring keeps
    every verdict but not every prefix: an order that stops before the read may let such a publish
    take effect early. So an ``illegal`` it decided is explained by the search over every order
    when that fits ``EXPLAIN_CONFIGURATIONS``, and otherwise says which orders its prefix is the
    longest among."""
    res, stats = _check_windows(model, start, ops, timeout, budget, min_segment, engine, defer=True)
    if res.result != ILLEGAL or not stats.info_deferred:
        return res, stats
    cap = EXPLAIN_CONFIGURATIONS if budget is None or budget.configurations is None else min(
        EXPLAIN_CONFIGURATIONS, budget.configurations)
    every, _ = _check_windows(model, start, ops, timeout, replace(budget or UNLIMITED, seconds=None, configurations=cap),
                              min_segment, engine, defer=False)
    spent = res.partitions[0].configurations + every.partitions[0].configurations
    if every.result != UNKNOWN_RESULT:   # decided over every order: its verdict and explanation stand
        every.partitions[0].configurations = spent
        return every, stats
    res.partitions[0].configurations = spent
    res.partitions[0].explanation.among = (
        f"among the orders in which each of the {stats.info_deferred} indeterminate publishes a later "
        "publication-read found absent takes effect after that read (the search over every order ran "
        f"past {cap:,} configurations)")
    return res, stats


def _check_windows(model: Model, start: tuple, ops: list[Operation], timeout: float | None,
                   budget: Budget | None, min_segment: int, engine: str,
                   defer: bool) -> tuple[LinearizabilityResult, WitnessStats]:
    """One register's partition from the concrete state ``start``: ``valid``
    from a chain of window witnesses; where a window fails from the state
    its predecessor's witness handed over, it is searched again from an
    exact start, which decides: the union of the states every linearization
    leaves there (``reachable.reached``, window by window from the nearest
    exact start before it: the partition's start, a pinned one, or one made
    exact so before).

    ``model``'s states are power sets (``frozenset``). The result has one
    ``PartitionResult`` whose indices refer to ``ops``; on ``illegal`` its
    explanation is the search's over the deciding window, its prefix led by
    a linearization of the windows before it that ends in a state from which
    that prefix is legal (``_lead_to``), the state the one after it all.
    """
    deferred, late = defer_info_windows(ops) if defer else (ops, 0)
    bounded, closed = bound_info_windows(deferred)
    windows = segments(bounded, min_segment)
    pins = [start] + pinned_states(bounded, start, [bounded[w[0]].call for w in windows[1:]])
    stats = WitnessStats(info_closed=closed, info_deferred=late, segments=len(windows))

    budget = budget or UNLIMITED
    # the budget is CPU time of this thread, as ``check_operations`` counts it (not wall: load never decides)
    deadline = None if budget.seconds is None else time.thread_time() + budget.seconds
    window_ops = [[bounded[i] for i in w] for w in windows]

    def left() -> Budget:
        return budget if deadline is None else replace(budget, seconds=max(1e-3, deadline - time.thread_time()))

    def out_of_time() -> bool:
        return deadline is not None and time.thread_time() >= deadline

    def search(k: int, state: Any, lo: int | None = None) -> LinearizabilityResult:
        """Window ``k``'s search (from window ``lo`` on, if given), within what is left of the
        partition's time budget."""
        m = replace(model, init=lambda: state, partition=None)
        span = window_ops[k] if lo is None else [op for w in window_ops[lo:k + 1] for op in w]
        res = check_operations(m, span, timeout=timeout, budget=left(), engine=engine)
        if res.result != OK and out_of_time():
            part = res.partitions[0]
            res.result, part.result, part.explanation = UNKNOWN_RESULT, UNKNOWN_RESULT, None
        return res

    def unknown(k: int, configurations: int, why: str) -> tuple[LinearizabilityResult, WitnessStats]:
        reason = (f"search budget of {budget.describe()} used up ({len(ops)} ops in "
                  f"{len(windows)} windows, {why} window {k + 1} of {len(windows[k])} ops, {configurations:,} "
                  f"configurations in all); the verdict for this partition is unknown")
        return LinearizabilityResult(UNKNOWN_RESULT, [PartitionResult(list(range(len(ops))), UNKNOWN_RESULT,
                                                                      configurations=configurations,
                                                                      reason=reason)]), stats

    before: list[Any] = [frozenset([start])] + [None] * len(windows)  # the state each window starts from
    exact: list[str | None] = [PIN] + [None] * len(windows)  # ... and whether every linearization fits it
    orders: list[list[int]] = [[] for _ in windows]  # each window's witness from ``before`` (op indices)
    configurations = 0
    k = 0
    while k < len(windows):
        res = search(k, before[k])
        configurations += res.partitions[0].configurations
        lo = k
        if res.result != OK and k and exact[k] is None and exact[k - 1] is None and not out_of_time():
            # most hand-overs that do not fit are one linearization's choice in the window before: one
            # cheap retry of both windows from the state before them (``valid`` soundly if it fits)
            retry = search(k, before[k - 1], k - 1)
            configurations += retry.partitions[0].configurations
            if retry.result == OK:
                res, lo = retry, k - 1
        if res.result != OK and exact[k] is None and not out_of_time():
            # the hand-over did not fit: the states every linearization reaches, from the last exact start on
            j = max(i for i in range(k + 1) if exact[i] is not None)
            for i in range(j, k):
                states, spent = reached(model, window_ops[i], before[i], left(), engine)
                configurations += spent
                if states is None:
                    return unknown(i, configurations, "reaching every state of")
                before[i + 1], exact[i + 1] = states, REACHED
                stats.widened += 1
            res = search(k, before[k])
            configurations += res.partitions[0].configurations
        if res.result == UNKNOWN_RESULT:
            return unknown(k, configurations, "searching")
        if res.result != OK:
            return _explained(model, res, k, windows, bounded, before, exact, orders, configurations, left,
                              engine), stats
        part = res.partitions[0]
        span = [i for w in windows[lo:k + 1] for i in w]
        orders[lo:k + 1] = [[span[i] for i in part.witness]] + [[] for _ in range(lo, k)]
        before[k + 1] = part.final_state
        if k + 1 < len(windows) and pins[k + 1] is not None and part.final_state == frozenset([pins[k + 1]]):
            exact[k + 1] = PIN
            stats.pinned += 1
        k += 1
    result = PartitionResult(list(range(len(ops))), OK, configurations=configurations)
    return LinearizabilityResult(OK, [result], res.engine), stats


def _explained(model: Model, res: LinearizabilityResult, k: int, windows: list[list[int]], bounded: list[Operation],
               before: list[Any], exact: list[str | None], orders: list[list[int]], configurations: int,
               left: Callable[[], Budget], engine: str) -> LinearizabilityResult:
    """Window ``k`` is not linearizable from its exact start: the partition's result, its
    explanation's prefix a linearization of the windows before it and then the window's
    longest prefix, and the model state after that whole prefix."""
    part = res.partitions[0]
    ex = part.explanation
    span = windows[k]
    window = [span[i] for i in ex.prefix]
    # a concrete start the window's prefix is legal from, and an order of the windows before that ends in it
    wanted = next(s for s in before[k] if replay(model, bounded, window, frozenset([s])))
    pieces = [window]
    i = k
    while i > 0:
        if exact[i - 1] is not None:  # an exact start: search the window for an order that ends in ``wanted``
            got = order_to(model, [bounded[j] for j in windows[i - 1]], before[i - 1], wanted, left(), engine)
            if got is None:
                reason = (f"window {k + 1} is not linearizable, but the search budget ran out finding the order "
                          f"of window {i} that leads to it; the verdict for this partition is unknown")
                return LinearizabilityResult(UNKNOWN_RESULT, [PartitionResult(
                    list(range(len(bounded))), UNKNOWN_RESULT, configurations=configurations, reason=reason)])
            order, wanted = got
            pieces.append([windows[i - 1][j] for j in order])
            i -= 1
        else:  # the witnesses since the last exact start chain up to this one
            h = max(j for j in range(i) if exact[j] is not None)
            chain = [j for w in range(h, i) for j in orders[w]]
            wanted = source(model, bounded, chain, before[h], wanted)
            pieces.append(chain)
            i = h
    ex.prefix = [j for piece in reversed(pieces) for j in piece]
    ex.state = replay(model, bounded, ex.prefix, before[0])
    assert ex.state, "the explanation's prefix must be a linearization"
    ex.state_text = fill_defaults(model).describe_state(ex.state)
    ex.stuck = [span[i] for i in ex.stuck]
    ex.described = {span[i]: d for i, d in ex.described.items()}
    ex.first_return = None if ex.first_return is None else span[ex.first_return]
    result = PartitionResult(list(range(len(bounded))), ILLEGAL, [], configurations, part.reason, ex, part.seconds)
    return LinearizabilityResult(ILLEGAL, [result], res.engine)
