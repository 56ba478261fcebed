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

A hand-off's stop is not sent on its own: the shim keeps it (``h <thread> <stop>|``) and sends it ahead
of the next message any thread of the chain sends, on that thread's connection (``_take``). So a chain comes
as one message, in its own order, whatever order the kernel hands its sockets in, and costs one message.
"""

from __future__ import annotations

#: the waits a thread of the same process may hand the turn to
HANDED_WAITS = frozenset({"cond", "epoll"})


class HandOffs:
    """The hand-off half of ``Scheduler`` (its mixin; its state: ``handoffs``, ``_subject``)."""

    def _take(self, t, line: str) -> None:
        """A message of ``t``: first the stops of the chain of hand-offs that led to it, each as its own
        thread's; then its own (none when ``t`` ended the chain by exiting, or by its process's exec)."""
        while line.startswith("h "):
            stop, _, line = line.partition("|")
            _, index, stop = stop.split(" ", 2)
            x = self._thread_at(t.proc, int(index))
            if x is None:
                raise RuntimeError(f"{t.name} sent a hand-off's stop of t{index}, which its process does not have")
            self._message(x, stop)
        if line:
            self._message(t, line)

    @staticmethod
    def _thread_at(proc, index: int):
        """``proc``'s live thread ``t<index>``, or None."""
        return next((x for x in proc.threads if x.name == f"{proc.name}/t{index}" and x.state != "gone"), None)

    def _hand(self, a, index: int, vt: int) -> None:
        """``a`` stopped handing the turn to thread ``index`` of its process (sched.c, "Hand-offs") at
        virtual time ``vt``: its slice is over and that thread's begins, as if granted here. Where this
        scheduler's clock would say otherwise, the two disagree on the schedule: said in ``notes``."""
        b = self._thread_at(a.proc, index)
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
        for rules in (self.faults, self.call_faults):
            for r in rules:
                if r.calls is None and r.evidence is None and (r.process is None or proc.name.startswith(r.process)):
                    return False
        return True
