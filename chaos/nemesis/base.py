"""What a fault package is made of, shared by every nemesis module: the
``Package`` record, the seeded ``FaultCycle`` generator, target draws, the
stopped-host check, and the backend a package asks for its abilities.

Below ``chaos.nemesis`` (which lists the packages by importing every nemesis
module) and below each nemesis module, so none of them imports the list back.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from workloads.generator import Gen, fill_op, PENDING, MS
from workloads.random import Stream


@dataclass(frozen=True)
class Package:
    name: str
    generator: Gen
    execute: Callable
    final: Callable
    targets: str = "workers"
    requires: tuple = ()   # machine mechanisms (faketime, failsync): ``mechanisms()``
    heals: tuple = ()   # the ``f`` of this package's heal ops
    needs: tuple = ()   # further backend abilities ("barrier", "barrier=hook"): ``Abilities.missing``
    # env -> True while a fault that fired is armed and its evidence has not come yet: the
    # runner lets the workload go on past its time limit (bounded) so it can take effect
    waiting: Callable | None = None


@dataclass(frozen=True)
class FaultCycle(Gen):
    """Fault, (heal after a drawn duration), gap, fault, ... forever.

    ``draw(stream, workers) -> (value, stream)`` draws one fault's parameters.
    ``gap_ms`` / ``dur_ms`` are ``(lo, hi)`` ranges; ``heal`` is the ``f`` of
    the heal op (None for instantaneous faults). Pure: all draws come from
    ``ctx.stream(n)``; the first fault comes one drawn gap after t=0 (the run's start), so
    re-asking later never moves it.
    """

    f: str
    draw: Callable
    workers: int
    gap_ms: tuple
    dur_ms: tuple = (0, 0)
    heal: str | None = None
    n: int = 0
    next_time: int | None = None
    pending_heal: tuple | None = None   # (time, value)

    def op(self, ctx):
        # keyed by the fault's name, not the generator's position, so the
        # planned schedule (schedule.jsonl) and the live run draw the same values
        s = Stream(ctx.seed, ("nemesis", self.f, self.n))
        if self.pending_heal is not None:
            at, value = self.pending_heal
            op = fill_op({"f": self.heal, "value": value, "time": at}, ctx)
            if op is PENDING:
                return PENDING
            gap, _ = s.randint(*self.gap_ms)
            return op, replace(self, n=self.n + 1, pending_heal=None, next_time=op["time"] + gap * MS)
        gap, s = s.randint(*self.gap_ms)
        at = gap * MS if self.next_time is None else self.next_time  # anchored at run start (t=0)
        value, s = self.draw(s, self.workers)
        op = fill_op({"f": self.f, "value": value, "time": at}, ctx)
        if op is PENDING:
            return PENDING
        if self.heal is None:
            gap2, _ = s.randint(*self.gap_ms)
            return op, replace(self, n=self.n + 1, next_time=op["time"] + gap2 * MS)
        dur, _ = s.randint(*self.dur_ms)
        return op, replace(self, n=self.n + 1, pending_heal=(op["time"] + dur * MS, value))


def draw_targets(s, workers: int, most: int = 1):
    """1..``most`` distinct worker slots."""
    k, s = s.randint(1, max(1, min(most, workers)))
    pool = list(range(workers))
    out = []
    for _ in range(k):
        i, s = s.randint(0, len(pool) - 1)
        out.append(pool.pop(i))
    return sorted(out), s


def stopped_reason(env, t: int) -> str | None:
    """Why worker slot ``t``'s live host cannot answer a command now, else None.

    A host the harness has SIGSTOPped (the pause nemesis, or a paused writer
    held at its barrier by the slot) answers nothing until it is resumed, so a
    command sent to it would block the single nemesis thread. Nemeses that talk
    to a host (restart, lost-reply, the clock evidence) skip such a target and
    record why: the planned schedule stays a pure function of the seed, only
    the executed effect differs, and the history says so."""
    slot = env.slots[t]
    pid = slot.pid
    if pid is None:
        return None
    if getattr(env.paused.get(t), "pid", None) == pid:
        return f"worker {pid} is paused by the pause nemesis"
    try:
        import psutil

        if psutil.Process(pid).status() == psutil.STATUS_STOPPED:
            return f"worker {pid} is stopped (a paused writer held at its barrier)"
    except Exception:  # gone meanwhile: not stopped; the command fails fast
        return None
    return None


def backend_of(opts: dict):
    from chaos import sut

    return sut.get(opts.get("backend") or "sqlite")


def sut_options(opts: dict) -> dict:
    """The backend options inside nemesis opts (dsn, command, profile, factory)."""
    from chaos.sut.base import OPTIONS

    # the protocol under test (work-claim by default) decides some abilities (issue-lock has no lost-reply)
    return {**{k: opts.get(k) for k in OPTIONS}, "protocol": opts.get("protocol") or "work-claim"}
