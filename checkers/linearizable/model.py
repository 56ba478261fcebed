"""The model and history types of the linearizability checker (Porcupine's model.go).

A ``Model`` is a small record of functions, not a class hierarchy: the checker
only ever calls ``init()`` once and ``step(state, input, output)`` many times,
so a model is cheap to write and cheap to call. States must be hashable
values (ints, strings, tuples, frozensets): the checker interns them and keys
its memo on ``(linearized-set, state)``. A model whose states are not hashable,
or whose equality is not ``==``, supplies ``equal`` and ``hash``.

Histories come in Porcupine's two forms: timed ``Operation``s (closed
``[call, return_time]`` intervals) and ordered ``Event``s (the index is the
time). An operation whose outcome is unknown (Jepsen's ``:info``) has
``return_time = INF``: it overlaps everything after its call, and the model
must accept any output for it (the parser gives it an output the model reads
as "unknown", e.g. ``UNKNOWN``), while still applying its effect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Hashable, Iterable, Sequence

INF = math.inf


class _Unknown:
    """The output of an op whose reply was never seen. Compares only to itself."""

    _instance: "_Unknown | None" = None

    def __new__(cls) -> "_Unknown":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __reduce__(self) -> tuple:
        return (_Unknown, ())


#: Sentinel output for ops whose result was not observed; models accept any result.
UNKNOWN = _Unknown()

CALL, RETURN = 0, 1

#: the fixed shapes a ``Model.effect`` may name (see ``Model``)
READS, WRITES, KEEPS = "reads", "writes", "keeps"


@dataclass(slots=True)
class Operation:
    """One op of a timed history: ``[call, return_time]`` is a closed interval."""

    client_id: int
    input: Any
    call: float
    output: Any
    return_time: float
    metadata: Any = None


@dataclass(slots=True)
class Event:
    """One call or return of an ordered history; ``id`` pairs a call with its return."""

    client_id: int
    kind: int  # CALL or RETURN
    value: Any  # input on a call, output on a return
    id: int
    metadata: Any = None


def _default_equal(a: Any, b: Any) -> bool:
    return a == b


@dataclass
class Model:
    """Porcupine's ``Model``: a record of functions.

    ``step`` must be pure: the checker memoizes its result per (op, state).
    ``partition(ops) -> list[list[Operation]]`` splits a history into
    independent sub-histories (P-compositionality); ``partition_events`` does
    the same for ``Event`` lists. ``hash`` must agree with ``equal``; both
    default to Python's own ``hash``/``==``.

    ``effect(input, output)`` is an optional shortcut for ops whose step is
    one of three fixed shapes, so the compiled core steps them without
    calling Python: ``(READS, s)`` = legal iff the state equals ``s``, which
    it keeps; ``(WRITES, s)`` = always legal, the state becomes ``s``;
    ``(KEEPS,)`` = always legal, the state stays; ``None`` = ask ``step``.
    It must agree with ``step`` (the reference engine ignores it and always
    calls ``step``; the engine tests diff the two).
    """

    init: Callable[[], Hashable]
    step: Callable[[Any, Any, Any], tuple[bool, Any]]
    equal: Callable[[Any, Any], bool] | None = None
    hash: Callable[[Any], int] | None = None
    partition: Callable[[list[Operation]], list[list[Operation]]] | None = None
    partition_events: Callable[[list[Event]], list[list[Event]]] | None = None
    describe_operation: Callable[[Any, Any], str] | None = None
    describe_state: Callable[[Any], str] | None = None
    name: str = "model"
    extra: dict = field(default_factory=dict)
    effect: Callable[[Any, Any], tuple | None] | None = None


def fill_defaults(model: Model) -> Model:
    """A copy of ``model`` with every optional function filled in (Porcupine's fillDefault)."""
    return replace(
        model,
        equal=model.equal or _default_equal,
        describe_operation=model.describe_operation or (lambda i, o: f"{i!r} -> {o!r}"),
        describe_state=model.describe_state or repr,
    )


@dataclass
class NondeterministicModel:
    """A model whose ``step(state, input, output)`` returns every possible next state.

    ``to_model()`` turns it into a ``Model`` by the power-set construction:
    the state is a frozenset of possible states and a step is legal while that
    set is non-empty. Use it when the effect of an op depends on something the
    history does not say (for example, the decision time of an ``info`` op).
    """

    init: Callable[[], Iterable[Hashable]]
    step: Callable[[Any, Any, Any], Iterable[Hashable]]
    partition: Callable[[list[Operation]], list[list[Operation]]] | None = None
    partition_events: Callable[[list[Event]], list[list[Event]]] | None = None
    describe_operation: Callable[[Any, Any], str] | None = None
    describe_state: Callable[[Any], str] | None = None
    name: str = "nondeterministic-model"

    def to_model(self) -> Model:
        inner = self.step

        def step(states: frozenset, inp: Any, out: Any) -> tuple[bool, frozenset]:
            nxt = frozenset(s2 for s in states for s2 in inner(s, inp, out))
            return bool(nxt), nxt

        describe = self.describe_state
        return Model(
            init=lambda: frozenset(self.init()),
            step=step,
            partition=self.partition,
            partition_events=self.partition_events,
            describe_operation=self.describe_operation,
            describe_state=(lambda ss: " | ".join(sorted(describe(s) for s in ss))) if describe else None,
            name=self.name,
        )


def events_to_operations(events: Sequence[Event]) -> list[Operation]:
    """Ordered events -> timed operations; the event index is the time.

    A call without a return gets ``return_time = INF`` and output ``UNKNOWN``,
    as Porcupine's recipe for ops whose outcome was never seen.
    """
    open_calls: dict[int, Operation] = {}
    ops: list[Operation] = []
    for i, ev in enumerate(events):
        if ev.kind == CALL:
            op = Operation(ev.client_id, ev.value, i, UNKNOWN, INF, ev.metadata)
            open_calls[ev.id] = op
            ops.append(op)
        else:
            op = open_calls.pop(ev.id)
            op.output = ev.value
            op.return_time = i
    return ops
