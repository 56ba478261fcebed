"""Every state a window can leave, and a linearization that leads to a given one.

The claim model is a power set (``NondeterministicModel.to_model``): a step
maps each concrete state on its own and unions the results. So from a quiet
point on, the ops after it can be linearized iff they can from *some*
concrete state that *some* linearization of the ops before it leaves; the
union of those states (``reached``) is an exact start for what follows,
exactly as a pinned state is (``pinned.py``), however many orders led there.

Both questions are asked of the ordinary search by one extra op, the
*probe*: called after every op of the window returned (so it can only be
linearized last, once all of them are) and answered here, not by the model:

* ``reached``: the probe is never legal but records the state it is asked
  about; the search then backtracks through every configuration of the
  window and ends ``illegal`` having asked it once per distinct final state
  (the engines memoize each (op, state) step);
* ``lead_to``: the probe is legal where the state holds a wanted concrete
  state; the witness found is an order of the window that reaches it.

Cost: the window's configurations, once; the memo holds the window's ops
only (two or three bitset words), where a span widened back to a pinned
start holds thousands of ops per configuration.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from .checker import OK, UNKNOWN_RESULT, Budget, check_operations
from .model import Model, Operation

PROBE = ("<probe>",)  # the probe's input: no model op is named so


def _probe_after(ops: list[Operation]) -> Operation:
    """An op called after every op of ``ops`` returned (a window ending at a quiet point: all returned)."""
    last = max(op.return_time for op in ops)
    return Operation(-1, PROBE, last + 1, PROBE, last + 2, None)


def _probing(model: Model, start: frozenset, answer: Callable[[frozenset], tuple[bool, Any]]) -> Model:
    inner = model.step

    def step(state: frozenset, inp: Any, out: Any) -> tuple[bool, Any]:
        return answer(state) if inp is PROBE else inner(state, inp, out)

    return replace(model, init=lambda: start, step=step, partition=None, effect=None)


def reached(model: Model, ops: list[Operation], start: frozenset, budget: Budget,
            engine: str = "auto") -> tuple[frozenset | None, int]:
    """The union of the states every linearization of ``ops`` from ``start``
    leaves (empty: none exists), or ``None`` if the budget ran out; and the
    configurations searched."""
    finals: list[frozenset] = []

    def record(state: frozenset) -> tuple[bool, Any]:
        finals.append(state)
        return False, state

    res = check_operations(_probing(model, start, record), [*ops, _probe_after(ops)], budget=budget, engine=engine)
    part = res.partitions[0]
    if res.result == UNKNOWN_RESULT:
        return None, part.configurations
    return frozenset().union(*finals), part.configurations


def order_to(model: Model, ops: list[Operation], start: frozenset, wanted: Any, budget: Budget,
             engine: str = "auto") -> tuple[list[int], Any] | None:
    """A linearization of ``ops`` (positions) from some concrete state of
    ``start`` that can end in the concrete state ``wanted``, and that state;
    ``None`` if the budget ran out first."""
    res = check_operations(_probing(model, start, lambda s: (wanted in s, frozenset([wanted]))),
                           [*ops, _probe_after(ops)], budget=budget, engine=engine)
    if res.result != OK:
        if res.result == UNKNOWN_RESULT:
            return None
        raise AssertionError(f"no order of the window reaches a state its reached set holds: {wanted!r}")
    order = [i for i in res.partitions[0].witness if i < len(ops)]
    return order, source(model, ops, order, start, wanted)


def source(model: Model, ops: list[Operation], order: list[int], start: frozenset, wanted: Any) -> Any:
    """The concrete state of ``start`` from which ``order`` can end in ``wanted`` (one exists: the
    model is a power set, so a set reaches ``wanted`` only through one of its members)."""
    for s in start:
        if wanted in replay(model, ops, order, frozenset([s])):
            return s
    raise AssertionError(f"no state of the start leads the order to {wanted!r}")


def replay(model: Model, ops: list[Operation], order: list[int], state: frozenset) -> frozenset:
    """The state after ``order`` from ``state`` (empty once a step is illegal)."""
    for i in order:
        legal, state = model.step(state, ops[i].input, ops[i].output)
        if not legal:
            return frozenset()
    return state
