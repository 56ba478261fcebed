"""The loop that runs a generator against workers: one loop, two clocks.

``interpret(gen, threads, driver, seed)`` is the single interpreter. A
``Driver`` supplies time, dispatch and completions:

* ``simulate`` uses ``SimDriver``: logical time jumps straight to the next
  completion or the next due op; a ``complete(op)`` function invents replies.
  Tests assert on the literal op list it returns.
* ``chaos.runner`` uses a real-time driver: worker threads call the backend,
  completions arrive on a queue, and ``now`` is the run's monotonic clock.

The loop: ask the generator for an op; if it is due, commit it (record the
invoke, update the generator, hand it to the thread's worker); if it is in the
future or the generator is ``PENDING``, wait for a completion or until the op
is due, then ask again (generators are pure, so asking again is safe). A
completion is recorded, fed to ``update``, and frees its thread; an ``info``
completion retires the thread's process (its next op runs under a new logical
process id, ``process + number of client threads``).
"""

from __future__ import annotations

import heapq
import itertools
from typing import Callable, Protocol

from workloads.generator import NEMESIS, PENDING, Context, lift, op_of, deadline as _deadline, update_of


class Driver(Protocol):
    def now(self) -> int: ...
    def dispatch(self, thread, op: dict) -> None: ...
    def wait(self, until: int | None) -> list[dict]: ...
    def record(self, op: dict) -> dict: ...
    def stopped(self) -> bool: ...


def interpret(gen, threads: list, driver: Driver, seed: int = 0, process_of: dict | None = None) -> dict:
    """Run ``gen`` to exhaustion (or until the driver stops). Returns the final
    ``process_of`` map (thread -> last logical process). Pass a previous run's
    map to continue numbering (a retired process id is never reused)."""
    threads = tuple(threads)
    stride = sum(1 for t in threads if t != NEMESIS) or 1
    process_of = dict(process_of) if process_of else {t: t for t in threads}
    free = set(threads)
    sleepers: list[tuple[int, int, object]] = []
    tick = itertools.count()
    gen = lift(gen)

    def ctx_now() -> Context:
        return Context(driver.now(), threads, frozenset(free), dict(process_of), seed)

    def complete(events: list[dict]) -> None:
        nonlocal gen
        for ev in events:
            thread = next((t for t, p in process_of.items() if p == ev["process"]), None)
            recorded = driver.record(ev)
            gen = update_of(gen, ctx_now(), recorded)
            if thread is not None:
                free.add(thread)
                if recorded["type"] == "info" and thread != NEMESIS:
                    process_of[thread] = process_of[thread] + stride

    def wake_due() -> int | None:
        now = driver.now()
        while sleepers and sleepers[0][0] <= now:
            free.add(heapq.heappop(sleepers)[2])
        return sleepers[0][0] if sleepers else None

    while not driver.stopped():
        next_wake = wake_due()
        ctx = ctx_now()
        res = op_of(gen, ctx) if gen is not None else None
        if res is None or res is PENDING:
            if res is None and len(free) == len(threads):
                break
            events = driver.wait(next_wake)
            if not events and next_wake is None and len(free) == len(threads):
                break  # stuck: pending forever with nothing in flight
            complete(events)
            continue
        op, nxt = res
        if op["time"] > ctx.time:
            due = op["time"] if next_wake is None else min(op["time"], next_wake)
            complete(driver.wait(due))
            continue
        gen = nxt
        thread = ctx.thread_of(op["process"])
        free.discard(thread)
        if op.get("type") == "sleep":
            heapq.heappush(sleepers, (ctx.time + int(op["value"]), next(tick), thread))
            continue
        recorded = driver.record(dict(op, time=ctx.time))
        gen = update_of(gen, ctx_now(), recorded)
        driver.dispatch(thread, recorded)
    return process_of


class SimDriver:
    """Logical time and invented completions, for tests and schedule planning.

    ``complete(op) -> dict`` returns the completion's ``type`` and ``value``
    (and optionally ``latency`` in ns, default ``latency``).
    """

    def __init__(self, complete: Callable[[dict], dict] | None = None, latency: int = 0):
        self.complete = complete or (lambda op: {"type": "ok"})
        self.latency = latency
        self.t = 0
        self.history: list[dict] = []
        self._heap: list = []
        self._seq = itertools.count()

    def now(self) -> int:
        return self.t

    def stopped(self) -> bool:
        return False

    def dispatch(self, thread, op: dict) -> None:
        reply = dict(self.complete(op))
        latency = int(reply.pop("latency", self.latency))
        done = {"process": op["process"], "type": reply.pop("type", "ok"), "f": op.get("f")}
        done.update(reply)
        heapq.heappush(self._heap, (self.t + latency, next(self._seq), done))

    def wait(self, until: int | None) -> list[dict]:
        if self._heap and (until is None or self._heap[0][0] <= until):
            t = self._heap[0][0]
            self.t = max(self.t, t)
            out = []
            while self._heap and self._heap[0][0] == t:
                out.append(dict(heapq.heappop(self._heap)[2], time=self.t))
            return out
        if until is not None:
            self.t = max(self.t, until)
        return []

    def record(self, op: dict) -> dict:
        rec = dict(op, index=len(self.history))
        self.history.append(rec)
        return rec


def simulate(gen, seed: int = 0, workers: int = 2, complete: Callable[[dict], dict] | None = None,
             time_limit: int | None = None, latency: int = 0, nemesis_thread: bool = True) -> list[dict]:
    """Run ``gen`` with no backend and return the exact history (invokes and
    completions, ``index`` and logical ``time`` in ns)."""
    threads: list = list(range(workers)) + ([NEMESIS] if nemesis_thread else [])
    if time_limit is not None:
        gen = _deadline(time_limit, gen)
    driver = SimDriver(complete, latency)
    interpret(gen, threads, driver, seed)
    return driver.history

