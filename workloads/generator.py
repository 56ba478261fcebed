"""Pure, seeded generators of operations (in the spirit of jepsen-io/generator).

A generator is a value with two functions:

* ``op(ctx)`` returns ``None`` (exhausted), ``PENDING`` (nothing to emit now;
  ask again after the next event) or ``(op, next_gen)``;
* ``update(ctx, event)`` returns the generator after an invoke or completion.

Both are pure: asking ``op`` twice of the same generator and context gives the
same answer, so an interpreter may ask, decide not to dispatch yet (the op is
in the future), and ask again later. Nothing here sleeps: time is the logical
``ctx.time`` in nanoseconds; an op whose ``time`` is ahead of ``ctx.time`` is
dispatched when the interpreter's clock reaches it.

Randomness comes only from ``workloads.random.Stream`` keyed by the test seed
and the generator's *position* (``ctx.path``, extended by each combinator for
its children) plus a draw counter held in the generator value. Each worker
thread therefore draws from its own stream, and the schedule is a pure function
of ``(seed, config)`` however the real completions interleave.

Plain values are generators too (``lift``): a dict emits itself once, a list
or tuple runs its elements in order, a callable ``fn(ctx) -> dict | None`` is
called again for every op (infinite until it returns ``None``).

Combinators (one small class + one lowercase constructor each): ``limit``,
``time_limit``, ``stagger``, ``mix``, ``phases``, ``each_worker``,
``on_threads`` / ``clients`` / ``nemesis`` / ``clients_and_nemesis``,
``any_of``, ``repeat``, ``once``, ``sleep``. ``workloads.interpreter.simulate``
runs any of them with no backend and returns the exact op list.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

from workloads.random import Stream

NEMESIS = "nemesis"
SEC = 1_000_000_000
MS = 1_000_000


class _Pending:
    def __repr__(self) -> str:
        return "PENDING"


#: ``op`` result meaning "nothing now; ask again after the next event".
PENDING = _Pending()


def secs(s: float) -> int:
    return int(s * SEC)


def ms(m: float) -> int:
    return int(m * MS)


# --------------------------------------------------------------------------- context


@dataclass(frozen=True)
class Context:
    """What a generator sees: logical time, threads in scope, their processes.

    ``threads`` is the scope (restricted by ``on_threads`` / ``each_worker``);
    ``free`` is the set of idle threads overall; ``process_of`` maps a thread to
    its current logical process. ``path`` names the generator's position and,
    with ``seed``, keys its random stream.
    """

    time: int
    threads: tuple
    free: frozenset
    process_of: dict
    seed: int = 0
    path: tuple = ()

    def free_threads(self) -> list:
        return [t for t in self.threads if t in self.free]

    def thread_of(self, process) -> Any:
        for t, p in self.process_of.items():
            if p == process:
                return t
        return None

    def restrict(self, threads: Iterable) -> "Context":
        keep = set(threads)
        return replace(self, threads=tuple(t for t in self.threads if t in keep))

    def child(self, *labels) -> "Context":
        return replace(self, path=self.path + tuple(labels))

    def stream(self, n: int = 0) -> Stream:
        return Stream(self.seed, self.path, n)


def fill_op(op: dict, ctx: Context) -> dict | _Pending:
    """Complete an op: ``type: invoke``, a ``time`` not before now, and the
    process of a free thread in scope (``PENDING`` when none is free)."""
    out = dict(op)
    out.setdefault("type", "invoke")
    out["time"] = max(int(out.get("time", ctx.time)), ctx.time)
    if "process" not in out:
        free = ctx.free_threads()
        if not free:
            return PENDING
        out["process"] = ctx.process_of[free[0]]
    elif ctx.thread_of(out["process"]) not in ctx.free:
        return PENDING
    return out


def soonest(candidates: list[tuple[Any, Any]]) -> Any:
    """Of several ``op`` results (with a tiebreak key), the op that is due first."""
    best = None
    for key, res in candidates:
        if res is None or res is PENDING:
            continue
        if best is None or (res[0]["time"], key) < (best[1][0]["time"], best[0]):
            best = (key, res)
    if best is not None:
        return best
    return PENDING if any(r is PENDING for _, r in candidates) else None


class Gen:
    """Base class: a generator that emits nothing and ignores events."""

    def op(self, ctx: Context):
        return None

    def update(self, ctx: Context, event: dict) -> "Gen | None":
        return self


def lift(x) -> Gen | None:
    """Turn a plain value into a generator (see the module docstring)."""
    if x is None or isinstance(x, Gen):
        return x
    if isinstance(x, dict):
        return Once(OpValue(x))
    if isinstance(x, (list, tuple)):
        return Seq(tuple(x))
    if callable(x):
        return Fn(x)
    raise TypeError(f"not a generator: {x!r}")


def op_of(gen, ctx: Context):
    gen = lift(gen)
    return None if gen is None else gen.op(ctx)


def update_of(gen, ctx: Context, event: dict):
    gen = lift(gen)
    return None if gen is None else gen.update(ctx, event)


# --------------------------------------------------------------------------- leaves


@dataclass(frozen=True)
class OpValue(Gen):
    """Emits the same op forever (``once`` / ``limit`` bound it)."""

    value: dict

    def op(self, ctx):
        filled = fill_op(self.value, ctx)
        return filled if filled is PENDING else (filled, self)


@dataclass(frozen=True)
class Fn(Gen):
    """``fn(ctx) -> op | None`` called for each op; its ``n``-th call sees path ``+(n,)``."""

    fn: Callable
    n: int = 0

    def op(self, ctx):
        value = self.fn(ctx.child(self.n))
        if value is None:
            return None
        filled = fill_op(value, ctx)
        return filled if filled is PENDING else (filled, replace(self, n=self.n + 1))


@dataclass(frozen=True)
class Sleep(Gen):
    """Occupies one free thread for ``dt`` ns of logical time, then is exhausted.
    The interpreter completes the ``sleep`` op itself; it is not history."""

    dt: int

    def op(self, ctx):
        filled = fill_op({"type": "sleep", "f": "sleep", "value": self.dt}, ctx)
        return filled if filled is PENDING else (filled, None)


def sleep(dt_ns: int) -> Gen:
    return Sleep(int(dt_ns))


# --------------------------------------------------------------------------- combinators


@dataclass(frozen=True)
class Seq(Gen):
    """Each element in turn; moves on when one is exhausted (no waiting)."""

    gens: tuple
    i: int = 0

    def op(self, ctx):
        i = self.i
        while i < len(self.gens):
            res = op_of(self.gens[i], ctx.child(i))
            if res is None:
                i += 1
                continue
            if res is PENDING:
                return PENDING
            op, nxt = res
            gens = self.gens[:i] + (nxt,) + self.gens[i + 1 :]
            return op, Seq(gens, i)
        return None

    def update(self, ctx, event):
        if self.i >= len(self.gens):
            return self
        g = update_of(self.gens[self.i], ctx.child(self.i), event)
        return Seq(self.gens[: self.i] + (g,) + self.gens[self.i + 1 :], self.i)


@dataclass(frozen=True)
class Phases(Gen):
    """Like ``Seq``, but a phase starts only when every thread in scope is idle
    (all ops of the previous phase have completed)."""

    gens: tuple
    i: int = 0

    def op(self, ctx):
        i = self.i
        while i < len(self.gens):
            if i != self.i and len(ctx.free_threads()) < len(ctx.threads):
                return PENDING  # wait for the previous phase to drain
            res = op_of(self.gens[i], ctx.child(i))
            if res is None:
                i += 1
                if len(ctx.free_threads()) < len(ctx.threads):
                    return PENDING if i < len(self.gens) else None
                continue
            if res is PENDING:
                return PENDING
            op, nxt = res
            return op, Phases(self.gens[:i] + (nxt,) + self.gens[i + 1 :], i)
        return None

    def update(self, ctx, event):
        if self.i >= len(self.gens):
            return self
        g = update_of(self.gens[self.i], ctx.child(self.i), event)
        return Phases(self.gens[: self.i] + (g,) + self.gens[self.i + 1 :], self.i)


@dataclass(frozen=True)
class Limit(Gen):
    n: int
    gen: Any

    def op(self, ctx):
        if self.n <= 0:
            return None
        res = op_of(self.gen, ctx)
        if res is None or res is PENDING:
            return res
        return res[0], Limit(self.n - 1, res[1])

    def update(self, ctx, event):
        return Limit(self.n, update_of(self.gen, ctx, event))


@dataclass(frozen=True)
class TimeLimit(Gen):
    """Emits ops whose time is before ``cutoff``. ``time_limit(dt)`` anchors the
    cutoff at the *time of its first op* plus ``dt`` (a value the generator
    itself decides, so re-asking never moves it); ``deadline(t)`` is absolute.
    Past the cutoff, ops ``keep(op)`` accepts still pass, up to the first it
    does not (a fault's heal: what fired before the cutoff is healed after it)."""

    dt: int
    gen: Any
    cutoff: int | None = None
    keep: Callable | None = None

    def op(self, ctx):
        if self.cutoff is not None and ctx.time >= self.cutoff and self.keep is None:
            return None
        res = op_of(self.gen, ctx)
        if res is None or res is PENDING:
            return res
        cutoff = res[0]["time"] + self.dt if self.cutoff is None else self.cutoff
        if res[0]["time"] >= cutoff and not (self.keep is not None and self.keep(res[0])):
            return None
        return res[0], replace(self, gen=res[1], cutoff=cutoff)

    def update(self, ctx, event):
        return replace(self, gen=update_of(self.gen, ctx, event))


def deadline(t_ns: int, gen, keep: Callable | None = None) -> Gen:
    """Ops strictly before logical time ``t_ns`` (absolute, from the run's
    start), and past it those ``keep`` accepts, until the first it does not."""
    return TimeLimit(0, lift(gen), int(t_ns), keep)


@dataclass(frozen=True)
class Stagger(Gen):
    """Spaces ops by a uniform random delay in ``[0, 2*dt]`` (mean ``dt``)."""

    dt: int
    gen: Any
    next_time: int | None = None
    n: int = 0

    def op(self, ctx):
        res = op_of(self.gen, ctx)
        if res is None or res is PENDING:
            return res
        op, nxt = res
        at = max(op["time"], ctx.time if self.next_time is None else self.next_time)
        delay, _ = ctx.stream(self.n).randint(0, 2 * self.dt)
        return dict(op, time=at), Stagger(self.dt, nxt, at + delay, self.n + 1)

    def update(self, ctx, event):
        return replace(self, gen=update_of(self.gen, ctx, event))


@dataclass(frozen=True)
class Mix(Gen):
    """Each op from a child chosen at random (by ``weights``); exhausted
    children drop out (kept as ``None`` so every child keeps its path label)."""

    gens: tuple
    weights: tuple | None = None
    n: int = 0

    def op(self, ctx):
        gens = list(self.gens)
        weights = list(self.weights or (1.0,) * len(gens))
        n = self.n
        while True:
            live = [j for j, g in enumerate(gens) if g is not None]
            if not live:
                return None
            k, _ = ctx.stream(n).weighted([weights[j] for j in live])
            j = live[k]
            res = op_of(gens[j], ctx.child(j))
            if res is None:
                gens[j] = None
                n += 1
                continue
            if res is PENDING:
                return PENDING
            op, gens[j] = res
            return op, Mix(tuple(gens), tuple(weights), n + 1)

    def update(self, ctx, event):
        gens = tuple(None if g is None else update_of(g, ctx.child(j), event) for j, g in enumerate(self.gens))
        return replace(self, gens=gens)


def mix(gens, weights=None) -> Gen:
    return Mix(tuple(lift(g) for g in gens), None if weights is None else tuple(weights))


@dataclass(frozen=True)
class AnyOf(Gen):
    """Ops from every child, soonest first; updates go to all of them."""

    gens: tuple

    def op(self, ctx):
        res = soonest([(j, op_of(g, ctx.child(j))) for j, g in enumerate(self.gens) if g is not None])
        if res is None or res is PENDING:
            return res
        j, (op, nxt) = res
        return op, AnyOf(self.gens[:j] + (nxt,) + self.gens[j + 1 :])

    def update(self, ctx, event):
        return AnyOf(tuple(None if g is None else update_of(g, ctx.child(j), event) for j, g in enumerate(self.gens)))


def any_of(*gens) -> Gen:
    return AnyOf(tuple(lift(g) for g in gens))


@dataclass(frozen=True)
class OnThreads(Gen):
    """The child sees only the threads for which ``pred(thread)`` holds, and only
    their events."""

    pred: Callable
    gen: Any

    def op(self, ctx):
        res = op_of(self.gen, ctx.restrict(t for t in ctx.threads if self.pred(t)))
        if res is None or res is PENDING:
            return res
        return res[0], OnThreads(self.pred, res[1])

    def update(self, ctx, event):
        thread = ctx.thread_of(event.get("process"))
        if thread is None or not self.pred(thread):
            return self
        return OnThreads(self.pred, update_of(self.gen, ctx.restrict(t for t in ctx.threads if self.pred(t)), event))


def _is_nemesis(t) -> bool:
    return t == NEMESIS


def _is_client(t) -> bool:
    return t != NEMESIS


def on_threads(pred: Callable, gen) -> Gen:
    return OnThreads(pred, lift(gen))


def clients(gen) -> Gen:
    """Only client threads run ``gen``."""
    return OnThreads(_is_client, lift(gen))


def nemesis(gen) -> Gen:
    """Only the nemesis thread runs ``gen``."""
    return OnThreads(_is_nemesis, lift(gen))


def clients_and_nemesis(client_gen, nemesis_gen) -> Gen:
    return AnyOf((clients(client_gen), nemesis(nemesis_gen)))


@dataclass(frozen=True)
class EachWorker(Gen):
    """An independent copy of a generator per thread in scope: ``make(thread)``
    builds it (or a fixed generator is copied). Each copy sees only its own
    thread, draws from the path ``("w", thread)`` and gets only its events."""

    make: Callable
    gens: tuple = ()  # ((thread, gen), ...) built lazily

    def _table(self, ctx) -> dict:
        table = dict(self.gens)
        for t in ctx.threads:
            if t not in table:
                table[t] = lift(self.make(t))
        return table

    def op(self, ctx):
        table = self._table(ctx)
        cands = [(i, op_of(table[t], ctx.restrict([t]).child("w", t))) for i, t in enumerate(ctx.threads)]
        res = soonest(cands)
        if res is None or res is PENDING:
            return res
        i, (op, nxt) = res
        table[ctx.threads[i]] = nxt
        return op, EachWorker(self.make, tuple(table.items()))

    def update(self, ctx, event):
        thread = ctx.thread_of(event.get("process"))
        table = self._table(ctx)
        if thread not in table:
            return self
        table[thread] = update_of(table[thread], ctx.restrict([thread]).child("w", thread), event)
        return EachWorker(self.make, tuple(table.items()))


def each_worker(gen_or_make) -> Gen:
    make = gen_or_make if (callable(gen_or_make) and not isinstance(gen_or_make, Gen)) else (lambda _t: gen_or_make)
    return EachWorker(make)


@dataclass(frozen=True)
class Repeat(Gen):
    """Emits the first op of ``gen`` again and again (``n`` times, or forever);
    the ``k``-th repetition sees path ``+(k,)`` so its random draws differ."""

    gen: Any
    n: int | None = None
    k: int = 0

    def op(self, ctx):
        if self.n is not None and self.k >= self.n:
            return None
        res = op_of(self.gen, ctx.child(self.k))
        if res is None or res is PENDING:
            return res
        return res[0], Repeat(self.gen, self.n, self.k + 1)


def repeat(gen, n: int | None = None) -> Gen:
    return Repeat(lift(gen), n)


def once(gen) -> Gen:
    return Limit(1, lift(gen))


Once = once  # dicts lift to ``once(OpValue(d))``


def limit(n: int, gen) -> Gen:
    return Limit(n, lift(gen))


def time_limit(dt_ns: int, gen) -> Gen:
    return TimeLimit(int(dt_ns), lift(gen))


def stagger(dt_ns: int, gen) -> Gen:
    return Stagger(int(dt_ns), lift(gen))


def phases(*gens) -> Gen:
    return Phases(tuple(lift(g) for g in gens))


def seq(*gens) -> Gen:
    return Seq(tuple(lift(g) for g in gens))
