"""Hand-offs: a thread's stop that lets another thread of its process go on, without a round trip to the
scheduler (sched.c, "Hand-offs"; docs/deterministic.md, "Hand-offs").

Two thirds of a Node program's grants are its own threads passing work back and forth: the event loop
queues a file call and waits in ``epoll``, libuv's pool thread wakes from its ``cond``, makes the call,
signals the loop and waits again. A thread about to stop at such a wait looks at its process's threads
waiting at a ``cond`` or an ``epoll`` (HANDED_WAITS) and, where one's wait is over (the lowest index
first: fixed by the process alone), names it in its stop (``W ... >N@VT``), gives it the virtual time VT a
grant here would have (the last grant's time or that thread's own, whichever is later, plus ``step_ns``;
checked here) and wakes it itself. Here the stop ends the slice of the thread that stopped and begins the slice of the one
it named, as if granted (``_hand``): the same trace line, the same clock. The shim hands the turn only
where the grant allows it (its sixth field, 0 in a flight and while a fault that may aim at any point of
the process is armed: ``_may_hand``), so no fault rule misses a point.

What the running thread of a chain and the threads it handed the turn to send comes on several sockets,
and may be read out of order: a stop (or a close) of a thread that waits where it may be handed the turn,
while another thread of its process runs, waits (``deferred``) until the stop that hands it the turn was taken
(``_take``, ``_drain``). So the order stops are taken in is the chain's, whatever the kernel's.
"""

from __future__ import annotations

#: the waits a thread of the same process may hand the turn to
HANDED_WAITS = frozenset({"cond", "epoll"})


class HandOffs:
    """The hand-off half of ``Scheduler`` (its mixin; its state: ``handoffs``, ``_subject``, a thread's
    ``deferred`` and ``closed``)."""

    def _before_its_turn(self, t) -> bool:
        """Whether what ``t`` sent may come from a turn a hand-off gave it that is not taken here yet: another
        thread of its process runs, and ``t`` waits where it may be handed the turn (``_take``)."""
        r = self.running
        return (t.deferred or (r is not None and r[0] == t.pid and r[1] is not None and r[1] != t.tid
                           and t.state == "waiting" and t.call in HANDED_WAITS))

    def _take(self, t, line: str) -> None:
        """A stop of ``t``. In a chain of hand-offs (``_hand``) the stops (and closes) of one process come on
        several sockets and may be read out of order: those of a thread the chain has not reached yet wait
        (``deferred``) until the stop that hands it the turn was taken (``_drain``)."""
        if self._before_its_turn(t):
            t.buf, t.deferred = line.encode() + b"\n" + t.buf, True
            return
        self._message(t, line)
        self._drain(t.proc)

    def _drain(self, proc) -> None:
        """Take what waited for the chain: the running thread's stops (and close) while it is one of
        ``proc``'s; once none of its threads runs, what is left waiting is taken as it came. A stop among
        those came from a thread no hand-off reached, which ran beside the chain: said in ``notes`` (a
        close is not: a killed process's threads close where they wait)."""
        while True:
            r = self.running
            nxt = next((x for x in proc.threads if (x.pid, x.tid) == r and x.state != "gone"), None) \
                if r is not None and r[0] == proc.pid and r[1] is not None else None
            if nxt is None:
                break
            if not self._take_deferred(nxt):
                return
        for x in [x for x in proc.threads if x.deferred and x.state != "gone"]:
            if b"\n" in x.buf:
                self.notes.append(f"{x.name} stopped at a point though no hand-off of {proc.name}'s reached it "
                                  f"(it waited at {x.call} #{x.seq})")
            while self._take_deferred(x):
                pass

    def _take_deferred(self, t) -> bool:
        """Take the next thing deferred for ``t``: a stop, else its close; False (and no longer deferred) when none."""
        if b"\n" in t.buf:
            raw, _, t.buf = t.buf.partition(b"\n")
            self._message(t, raw.decode("utf-8", "replace"))
        elif t.closed:
            t.deferred = t.closed = False
            self._close_of(t)
        else:
            t.deferred = False
            return False
        return True

    def _hand(self, a, index: int, vt: int) -> None:
        """``a`` stopped handing the turn to thread ``index`` of its process (sched.c, "Hand-offs") at
        virtual time ``vt``: its slice is over and that thread's begins, as if granted here. Where this
        scheduler's clock would say otherwise, the two disagree on the schedule: said in ``notes``."""
        b = next((x for x in a.proc.threads if x.name == f"{a.proc.name}/t{index}" and x.state != "gone"), None)
        if b is None or b.state != "waiting" or b.call not in HANDED_WAITS:
            raise RuntimeError(f"{a.name} handed the turn to t{index}, which the scheduler does not see waiting "
                               f"({b.name + ' ' + b.state + ' at ' + b.call if b else 'no such thread'})")
        self._end_slice(a)
        self.vt = max(self.vt, b.local_vt) + self.step_ns
        if vt != self.vt:
            self.notes.append(f"{a.name} handed {b.name} the turn at {vt} ns, where the scheduler's clock says {self.vt}")
        self._trace_grant(b)
        b.state, b.released = "running", False
        self.running, self._subject = (b.pid, b.tid), b
        self.handoffs += 1

    def _may_hand(self, proc) -> bool:
        """Whether ``proc``'s threads may hand each other the turn: not while a fault that may aim at any
        of its points is armed (a hand-off is a point no rule sees)."""
        return not any(r.calls is None and r.evidence is None and (r.process is None or proc.name.startswith(r.process))
                       for rules in (self.faults, self.call_faults) for r in rules)
