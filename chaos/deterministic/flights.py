"""Flights: a program's start, run beside the schedule (docs/deterministic.md, "Flights").

One controlled thread runs at a time, so a run's wall time is the sum of every slice. Most of a Node
program's slices come before its first store point: its start (V8, its modules, its threads), about 70 %
of a Wowbagger run, and that start depends on nothing but the program, its arguments, its environment
and its stdin. So an exec'd program with ``CHAOS_SCHED_VPIDS=1`` (its hello says "fly") starts as a
*flight*: its own threads are granted one at a time, in their priority order, beside the one thread the
schedule is running, on a virtual clock of its own that starts at the schedule's and costs
``FLIGHT_STEP_NS`` a grant. Its grants are recorded in its own trace.

A flight *lands* at its first stop that is not one of its own threads' waits on each other (``FLIGHT_WAITS``):
a store point, a child started, a write to its stdout or stderr ("out"), its exit ("exit"), a sleep, a
liveness query; or when none of its threads can go on; or when a thread's connection closes. What it did
is then known only to itself, and it *joins* the schedule once the schedule's clock reaches the flight's:
its trace is appended, its threads become the schedule's, and the stop it landed at is taken as if it had
just happened. Before the schedule decides anything at virtual time V (a grant, or moving its clock on
to the next wake or op) it waits until no flight whose clock is at or before V can still land there (a
flight's clock only moves on), then joins those landed by V, by time, then name. So where a flight joins
depends on its own grants, never on how fast it ran: the same seed gives the same schedule, and the wall
time of one program's start overlaps the rest of the run, other starts included.

What another process could see of a flight before it joins is a point that lands it (the shim's "out" and
"exit"); what it could see of others is fixed before it starts (its stdin is filled before its exec: the
hosting worker, ``host.py``). A kill of its tree before it joins drops it, trace and all: it had no
effect anyone saw. Not covered: a flight that stats a store path before its first store point (no point:
it would see the store as it is when it gets there), and one that dies of a signal before it lands.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

#: waits a flight's threads may be granted in flight: on each other (a mutex, semaphore, condition, rwlock,
#: private futex, join, an event loop's "spin": sched.c) and their event loop's epoll (its fds are the
#: process's own, its stdin filled before it started)
FLIGHT_WAITS = frozenset({"mutex", "sem", "cond", "join", "rwlock", "futex", "epoll", "spin"})
#: what a grant in flight costs its virtual clock (a grant of the schedule costs ``step_ns``, 10 us): about
#: what a slice of a Node program's start takes for real (some 50 grants in 100-150 ms), so the schedule's
#: clock moves on to the next op while a start flies, as a real one would (1 ms: 6.0 ops per wall s, 2 ms:
#: 6.4, 4 ms: 6.4, with 4 Wowbagger workers; docs/deterministic-speed.md)
FLIGHT_STEP_NS = 2_000_000


@dataclass
class Flight:
    proc: object                  # its Proc
    vt: int                       # its own virtual clock: once landed, the time it joins at
    offset: int                   # the wall-clock offset (a clock fault) when it began, for all its grants
    threads: list = field(default_factory=list)
    grants: int = 0
    running: tuple | None = None  # (pid, tid) of its thread granted and not yet stopped
    subject: object = None        # that thread
    epoch: int = 0                # its slices that got somewhere (a waiting thread's retry)
    _moved: bool = False
    _woken: dict = field(default_factory=dict)
    trace: list = field(default_factory=list)
    landed: bool = False
    landing: tuple | None = None  # (thread, line): the stop it landed at, taken when it joins
    closed: list = field(default_factory=list)   # threads whose connection closed in flight
    hellos: list = field(default_factory=list)   # (conn, line): hellos of its children (or a new image)


class Flights:
    """The flight half of ``Scheduler`` (its mixin; its state: ``flights``, ``flights_begun``, ``flight_points``)."""

    def _take_off(self, proc, t) -> None:
        """``proc``'s new image said hello with "fly": its start runs as a flight from now."""
        self._number(proc)   # here, in the schedule's order (a flight's first grant is its own)
        f = Flight(proc, self.vt, self.clock_offset(proc.name), threads=[t])
        proc.flight = f
        self.flights.append(f)
        self.flights_begun += 1
        self._flight_turn(f)

    def _flight_hello(self, f: Flight, t) -> None:
        f.threads.append(t)
        f._moved = True
        if f.landed:
            self._park(t.conn)
        self._flight_turn(f)

    def _flight_data(self, t, conn) -> None:
        """A message (or the close) of a flying thread's connection."""
        f = t.proc.flight
        data = self._recv(conn, 65536)
        if not data:
            f.closed.append(t)
            self._park(conn)
            if f.running == (t.pid, t.tid):
                f.running = None
            self._land(f)
            return
        t.buf += data
        if b"\n" not in t.buf:
            return
        raw, _, t.buf = t.buf.partition(b"\n")
        line = raw.decode("utf-8", "replace")
        if f.running == (t.pid, t.tid):
            f.running = None
        if f.landed or not self._stays_in_flight(t, line):
            f.landing = (t, line)
            self._land(f)
            return
        self._message(t, line)
        self._flight_turn(f)

    @staticmethod
    def _stays_in_flight(t, line: str) -> bool:
        parts = line.split(" ", 6)
        if parts[0] != "W" or len(parts) < 6:
            return False
        forks = int(parts[3].split(".")[0])
        what = parts[5].partition(":")[0].partition("@")[0]
        return what in FLIGHT_WAITS and forks <= t.proc.spawned

    def _flight_turn(self, f: Flight) -> None:
        """Once its slice is over (its thread stopped, every thread it made said hello), grant the next."""
        if f.landed or f.running is not None or f.proc.threads_made > f.proc.made_hellos:
            return
        self._end_slice(f.subject, f)
        f.subject = None
        ready = self._enabled_of(f.threads, f.vt, f.epoch)
        if not ready:
            self._land(f)
            return
        t = max(ready, key=lambda x: x.priority)
        due = t.wake_at if t.state == "waiting" and 0 <= t.wake_at <= f.vt else 0
        f.vt = max(f.vt, t.local_vt, due) + FLIGHT_STEP_NS
        f.grants += 1
        f.trace.append(f"{f.vt} {t.name} {t.call} {t.seq} {t.arg} {t.path}")
        t.state, t.released = "running", False
        f.running, f.subject = (t.pid, t.tid), t
        try:
            t.conn.sendall(f"G {f.vt} 0 {f.offset} {self._answer(t)}\n".encode())
        except OSError:   # it died while stopped: its connection's close lands the flight
            pass

    def _land(self, f: Flight) -> None:
        """It stopped where others could see it (or cannot go on): nothing more of it runs until it joins."""
        if f.landed:
            return
        f.landed, f.running = True, None
        for t in f.threads:
            if t.state != "gone":
                self._park(t.conn)
        if f.proc.pidfd >= 0:
            self._park(f.proc.pidfd)

    def _park(self, fileobj) -> None:
        try:
            self._sel.unregister(fileobj)
        except (KeyError, ValueError):
            pass

    def _sync_flights(self) -> None:
        """Before the schedule decides anything at ``vt``: wait until no flight can still land at or before
        it (a flight's clock only moves on), then join those landed by then (by time, then name)."""
        while True:
            behind = [f for f in self.flights if not f.landed and f.vt <= self.vt]
            if not behind:
                break
            self._pump_flights(behind)
        due = sorted((f for f in self.flights if f.landed and f.vt <= self.vt), key=lambda f: (f.vt, f.proc.name))
        for f in due:
            self._join(f)

    def _flights_first(self, until: int | None) -> bool:
        """Nothing in the schedule can run before ``until`` (the next wake, the caller's deadline; None:
        none): if a flight lands by then, the clock moves to the first landing and that flight joins. False
        when none does (the clock may jump). Where a flight in the air is now says nothing: it is how far it
        got in real time (moving the clock there gave one Wowbagger run in three another trace). So this
        waits until the first landing by ``until`` is known: a flight landed there, and every other flight
        still in the air is past it (a tie may land at the same time and join first, by name)."""
        while self.flights:
            landed = [f.vt for f in self.flights if f.landed and (until is None or f.vt <= until)]
            first = min(landed, default=None)
            bound = until if first is None else first
            in_air = [f for f in self.flights if not f.landed and (bound is None or f.vt <= bound)]
            if not in_air:
                if first is None:
                    return False
                self.vt = max(self.vt, first)
                self._sync_flights()
                return True
            self._pump_flights(in_air)
        return False

    def _pump_flights(self, waiting_for: list) -> None:
        """Handle what arrives (the schedule's thread is not running) until one of ``waiting_for`` moved;
        ``SchedulerStuck`` when none did for ``stuck_s`` (a thread that never reaches a point, a hello that
        never comes)."""
        marks = [(f, f.grants, f.landed) for f in waiting_for]
        deadline = time.monotonic() + self.stuck_s
        while all(f.grants == g and f.landed == landed for f, g, landed in marks):
            if time.monotonic() > deadline:
                late = ", ".join(f"{f.subject.name} (granted {f.subject.call} #{f.subject.seq})" if f.subject
                                 else f"{f.proc.name} (its threads' hellos)" for f in waiting_for)
                raise self.Stuck(f"in flight, {self.stuck_s:g} s without a point: {late}; the others: {self.states()}")
            self._dispatch(1.0)

    def _join(self, f: Flight) -> None:
        """A landed flight joins the schedule: its trace, its threads, then the stop it landed at."""
        proc = f.proc
        self.flights.remove(f)
        proc.flight = None
        self.trace.extend(f.trace)
        self.flight_points += f.grants
        for t in f.threads:
            if t.state == "gone" or t in f.closed:
                continue
            t.since, t.probe_epoch = -1, -1   # counted in the flight's slices: it may look again at once
            self.threads.append(t)
            self._sel.register(t.conn, ("thread", t))
        if proc.pidfd >= 0:
            self._sel.register(proc.pidfd, ("exit", proc))
        self._moved = True
        for t in f.closed:
            self._thread_closed(t)
        if not proc.gone and all(t.state == "gone" for t in proc.threads):
            self.running = (proc.pid, None)   # exiting, or a new image to say hello: wait for it here
        self._replay_hellos(f)
        if f.landing is not None:
            t, line = f.landing
            if t.state != "gone":
                self._message(t, line)
        self._settle(None)

    def _drop_flight(self, f: Flight) -> None:
        """Its process is killed before it joined: it had no effect anyone saw, so it leaves no trace; the
        children it started (their hellos kept for the join) are killed and reaped with it."""
        self.flights.remove(f)
        f.proc.flight = None
        self._replay_hellos(f)
        for child in [p for p in self.procs.values() if self._parent(p.name) is f.proc and not p.gone]:
            self._await_exit(child)

    def _replay_hellos(self, f: Flight) -> None:
        """The hellos kept while ``f`` flew (its children's, a new image's), taken now that it no longer does."""
        for conn, line in f.hellos:
            self._sel.register(conn, ("hello", conn))
            self._hello(conn, line)
