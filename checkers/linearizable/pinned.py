"""The register's state at a quiet point, where the replies leave it no choice.

At a quiet point (every op called before it returned before it), every
linearization does the ops before it first; in general they can leave
different states, so a window searched from one witness's state proves
``valid`` but not ``illegal``. Here the replies pin one state that every
linearization of the ops before the point leaves, component by component
(``le, active, revision, floor, outcomes``):

* ``floor``: decisions are linearized in the order of their decision times
  (each needs ``t >= floor`` and sets the floor to ``t``), so it is the
  largest decision time, in any order;
* ``last_epoch``: at least the largest one a reply showed (``L``); more only
  if an acquire took effect after that reply's point, which needs
  ``last_epoch = L`` there: a definite one would show more than ``L``, so
  pinned when no ``info`` acquire has a witness epoch ``>= L``;
* ``active``: what the latest-called reply showing epoch ``L`` shows, when
  every op that can change the claim of epoch ``L`` (its acquire, a renew
  or release of it, ok or ``info``) returned before that reply was called;
* ``revision``: what the latest-called fresh publish decision showed (see
  ``witness._Evidence``), when every publish that could commit (an ``ok``
  or an ``info`` one) returned before it was called; or, with no such
  publish at all, the starting revision;
* ``outcomes``: empty when no operation id is named on both sides of the
  point (an entry goes once every op naming it is linearized).

Where any component is not pinned the point is not either (``None``).
"""

from __future__ import annotations

import heapq

from backends.api import EPOCH_MAX

from .model import INF, UNKNOWN, Operation

_CLAIM = ("acquire", "renew", "release")


def pinned_states(ops: list[Operation], start: tuple, cuts: list[float]) -> list[tuple | None]:
    """The state pinned at each quiet point ``cuts[i]`` (ascending call times), or None.

    ``ops`` are the partition's (info windows bounded); ``start`` its
    starting concrete state.
    """
    order = sorted(range(len(ops)), key=lambda i: ops[i].call)
    le0, act0, rev0, floor0, _ = start
    spans: dict = {}  # operation id -> (first call, last call)
    for op in ops:
        if op.input[0] in ("publish", "pread"):
            first, last = spans.get(op.input[1], (INF, -INF))
            spans[op.input[1]] = (min(first, op.call), max(last, op.call))
    straddled = _straddled(sorted(spans.values()), cuts)
    floor, top = floor0, le0
    top_shown: tuple | None = None  # (call, active, return) of the latest-called reply showing epoch ``top``
    info_acquire_witness = -1  # the largest witness epoch of an info acquire
    changers: dict[int, _Latest] = {}  # epoch -> the ops that can change its claim
    rev_shown: tuple | None = None  # (call, revision, return) of the latest-called fresh publish decision
    committers = _Latest()  # the publishes that could commit
    naming: dict = {}
    for op in ops:
        if op.input[0] in ("publish", "pread"):
            naming.setdefault(op.input[1], []).append(op)
    out: list[tuple | None] = []
    k = 0
    for cut, named_across in zip(cuts, straddled):
        while k < len(order) and ops[order[k]].call < cut:
            op = ops[order[k]]
            k += 1
            inp, res, ret = op.input, op.output, op.return_time
            kind = inp[0]
            if res is UNKNOWN:
                if kind == "acquire" and inp[3] < EPOCH_MAX:  # past the high-water mark it never takes effect
                    info_acquire_witness = max(info_acquire_witness, inp[3])
                    changers.setdefault(inp[3] + 1, _Latest()).add(op)
                elif kind in ("renew", "release"):
                    changers.setdefault(inp[2], _Latest()).add(op)
                elif kind == "publish":
                    committers.add(op)
                continue
            code = res[0]
            if kind in _CLAIM or (kind == "publish" and code in ("ok", "claim-fence-rejected")):
                floor = max(floor, res[1])
            rec = res[2] if kind != "pread" else None
            if rec is not None:
                if rec[0] > top:
                    top, top_shown = rec[0], (op.call, rec[1], ret)
                elif rec[0] == top and (top_shown is None or op.call > top_shown[0]):
                    top_shown = (op.call, rec[1], ret)
                if code == "ok" and kind in _CLAIM:
                    changers.setdefault(rec[0] if kind == "acquire" else inp[2], _Latest()).add(op)
            if kind == "publish":
                if code == "ok":
                    committers.add(op)
                fresh = all(o.call > ret for o in naming[inp[1]] if o is not op)
                if fresh and code in ("ok", "ledger-revision-conflict") and (
                        rev_shown is None or op.call > rev_shown[0]):
                    rev_shown = (op.call, res[3][0], ret)
        out.append(None if named_across else _pin(floor, top, top_shown, info_acquire_witness, changers, rev_shown, committers,
                        le0, act0, rev0))
    return out


class _Latest:
    """The latest-returning ops of a kind, so that "every other one returned before ``O`` was
    called" is asked without ``O`` itself (the reply showing the state may be one of them) and
    without the ``info`` ops whose window ``O`` closed (returned at ``O``'s return: before ``O``'s
    point, or after it with no effect)."""

    __slots__ = ("top",)
    KEEP = 4

    def __init__(self):
        self.top: list[float] = []  # the largest returns, descending

    def add(self, op: Operation) -> None:
        self.top.append(op.return_time)
        self.top.sort(reverse=True)
        del self.top[self.KEEP:]

    def any(self) -> bool:
        return bool(self.top)

    def after(self, call: float, ret: float) -> bool:
        """Did an op return at or after ``call``, other than the one returning at ``ret`` and
        those it closed (all return at ``ret``)?"""
        others = [r for r in self.top if r != ret]
        if not others:
            return len(self.top) == self.KEEP  # more may return at ``ret``-or-later: unknown
        return others[0] >= call


def _straddled(spans: list[tuple], cuts: list[float]) -> list[bool]:
    """Per cut: is an operation id named both before it and at or after it?"""
    lasts: list[float] = []
    out, i = [], 0
    for cut in cuts:
        while i < len(spans) and spans[i][0] < cut:
            heapq.heappush(lasts, spans[i][1])
            i += 1
        while lasts and lasts[0] < cut:
            heapq.heappop(lasts)
        out.append(bool(lasts))
    return out


def _pin(floor, top, top_shown, info_acquire_witness, changers, rev_shown, committers,
         le0, act0, rev0) -> tuple | None:
    if info_acquire_witness >= top:
        return None
    if top_shown is None:
        if top != le0 or top in changers:
            return None
        active = act0
    else:
        if top in changers and changers[top].after(top_shown[0], top_shown[2]):
            return None
        active = top_shown[1]
    if rev_shown is None:
        if committers.any():
            return None
        rev = rev0
    else:
        if committers.after(rev_shown[0], rev_shown[2]):
            return None
        rev = rev_shown[1]
    return (top, active, rev, floor, ())
