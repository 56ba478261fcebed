"""A racer's fault inside one call (an op's ``fault``, ``workloads.races``), at an exact point.

The timed mode turns ``{"kind", "at", "hold_ms", "after", "tag"}`` into a timer and a signal
(``chaos.faults.incall``: a point ``at`` of the call's measured latency, a stopped process
found by polling, a rendezvous of threads), which misses when the machine is slow. Here it is
a one-shot ``FaultRule`` on the worker serving that call (and its children: git, a black
box's program), armed when the call is sent and disarmed with its completion:

* ``kill``: the n-th store change or lock step of the call, n = 1 + floor(at x ``SPREAD``);
* ``freeze`` with ``after: write-release``: the first point after the call released the
  POSIX record locks of a write transaction, the gap of a check-then-act fence (what
  ``chaos.faults.lockfreeze`` stops at in the timed mode): the next transaction's first lock
  step, or the worker's point just before it writes its reply (``worker.py``); in half the
  calls (the racer's seeded ``at``) also the first lock step after any transaction ended, so a
  check in a read-only transaction and its act in the next are split; in a call that takes
  no record lock (git's lock files, a program's renames), its n-th step, as a kill.

A freeze holds its thread's whole process (keeping what it holds; a Node program's libuv pool waits
too, as under the timed mode's SIGSTOP). One with a ``tag`` holds it until its rival, the op
carrying ``after_freeze``/``ends_freeze`` with that tag, has its reply (at least ``hold_ms``,
at most the op timeout); the rival is sent only once the freeze landed, or once the frozen
call ended without reaching its point. Either way in every run of the seed. A fault whose
point the call never reached did not happen: the completion carries none (the coverage gate
counts only faults that came) and ``summary()`` counts it as not reached.
"""

from __future__ import annotations

from chaos.deterministic.rules import FaultRule

#: a kill's (or a lock-free freeze's) point is among the first this many store changes and lock
#: steps of its call, drawn by the racer's ``at``
SPREAD = 8
#: the calls that change the store or take a lock step (also the kill nemesis's, ``plan.KILL_CALLS``)
STEP_CALLS = frozenset({"creat", "write", "pwrite", "writev", "ftruncate", "fsync", "fdatasync", "lock", "unlock",
                        "flock", "rename", "link", "unlink", "mkdir"})
WRITES = frozenset({"write", "pwrite", "writev", "ftruncate"})
RECORD_LOCKS = frozenset({"lock", "unlock"})
MS = 1_000_000


class CallFaults:
    """The racer faults of one run's calls: armed per call, landed or not, their rivals held back."""

    def __init__(self, sched, op_timeout_ns: int):
        self.sched, self.op_timeout_ns = sched, op_timeout_ns
        self.armed: dict[int, tuple[FaultRule, dict, dict]] = {}   # worker pid -> (rule, op, spec)
        self.frozen: dict[str, FaultRule] = {}     # tag -> the freeze whose rival waits for it
        self.deferred: dict[str, tuple] = {}       # tag -> (thread, rival op) not sent yet
        self.released: list[tuple] = []            # (thread, rival op) to send now
        self.counts = {"kill": [0, 0], "freeze": [0, 0]}   # kind -> [asked, landed]

    def defer(self, thread, op: dict) -> bool:
        """Hold ``op`` back when it is the rival of a freeze that has not landed yet."""
        tag = op.get("after_freeze")
        rule = self.frozen.get(tag) if tag else None
        if rule is None or rule.evidence is not None:
            return False
        self.deferred[tag] = (thread, op)
        return True

    def arm(self, proc, op: dict) -> None:
        """The call ``op`` was just handed to ``proc``: its fault, if it asks for one, waits for its point."""
        spec = op.get("fault")
        if not isinstance(spec, dict) or spec.get("kind") not in self.counts:
            return
        at = float(spec.get("at", 0.5))
        nth = 1 + int(at * SPREAD)
        in_call = lambda t: (self.armed.get(proc.pid, (None, None))[1] is op
                             and (t.proc is proc or t.proc.name.startswith(proc.name + "/")))
        if spec["kind"] == "kill":
            rule = FaultRule("kill", STEP_CALLS, process=proc.name, nth=nth, when=in_call)
        else:
            tag = spec.get("tag")
            hold_ns = int(spec.get("hold_ms", 0)) * MS
            rule = FaultRule("freeze", None, process=proc.name, sleeps=True,
                             when=self._gap(in_call, nth, check_gap=int(at * 16) % 2 == 1)
                             if spec.get("after") == "write-release" else self._nth_step(in_call, nth),
                             hold_ns=max(hold_ns, self.op_timeout_ns) if tag else hold_ns,
                             then=(lambda: self._landed(tag)) if tag else None)
            if tag:
                self.frozen[tag] = rule
        self.counts[spec["kind"]][0] += 1
        self.armed[proc.pid] = (rule, op, spec)
        self.sched.call_faults.append(rule)

    @staticmethod
    def _gap(in_call, nth: int, check_gap: bool):
        """The first point after the record locks of a write transaction were released (the
        next transaction's first lock step, or the worker's point before its reply), as the timed
        mode's ``lockfreeze``; with ``check_gap`` (half the calls, by the racer's seeded ``at``),
        also the first lock step after any transaction ended (a whole-file unlock), so a check
        made in a read-only transaction and acted on in the next is split there. In a call that
        takes no record lock (git's lock files, a program's renames), its n-th step."""
        seen = {"wrote": False, "last": None, "locks": False, "ended": False}
        nth_step = CallFaults._step_counter(nth)

        def when(t) -> bool:
            if not in_call(t):
                return False
            call, last = t.call, seen["last"]
            seen["last"] = call
            seen["locks"] |= call in RECORD_LOCKS
            after_write = seen["wrote"] and last == "unlock" and call != "unlock"
            after_check = check_gap and seen["ended"] and call == "lock"
            seen["ended"] |= call == "unlock" and t.arg == 0
            seen["wrote"] |= call in WRITES
            return nth_step(t) and not seen["locks"] or after_write or after_check
        return when

    @staticmethod
    def _nth_step(in_call, nth: int):
        nth_step = CallFaults._step_counter(nth)
        return lambda t: in_call(t) and nth_step(t)

    @staticmethod
    def _step_counter(nth: int):
        """True at the n-th store change or lock step among the points it is shown (one call's)."""
        seen = [0]

        def count(t) -> bool:
            if t.call not in STEP_CALLS:
                return False
            seen[0] += 1
            return seen[0] == nth
        return count

    def _landed(self, tag: str) -> None:
        """A tagged freeze landed: its rival goes now, and the scheduler hands control back for it."""
        waiting = self.deferred.pop(tag, None)
        if waiting is not None:
            self.released.append(waiting)
        self.sched.hand_back()

    def finish(self, proc, op: dict | None) -> dict | None:
        """``proc``'s call ended (replied, or the worker died): its fault disarmed; its evidence if it
        came. A tagged freeze that never landed lets its rival go now."""
        armed = self.armed.pop(proc.pid, None)
        if armed is None or armed[1] is not op:
            return None
        rule, _, spec = armed
        self.sched.call_faults = [r for r in self.sched.call_faults if r is not rule]
        tag = spec.get("tag")
        if tag:
            self.frozen.pop(tag, None)
            waiting = self.deferred.pop(tag, None)
            if waiting is not None:
                self.released.append(waiting)
        if rule.evidence is None:
            return None
        self.counts[spec["kind"]][1] += 1
        ev = {"kind": spec["kind"], "inside": True, "exact": True,
              "point": {k: v for k, v in rule.evidence.items() if k not in ("hold_ns", "resume_vt_ns")}}
        if spec["kind"] == "freeze":
            ev.update(at=spec.get("after", spec.get("at")), held_ms=rule.evidence["hold_ns"] / MS)
        return ev | ({"tag": tag} if tag else {}) | ({"by": spec["by"]} if spec.get("by") else {})

    def rival_done(self, op: dict | None) -> None:
        """The rival of a freeze has its reply: the frozen call goes on (after its ``hold_ms``)."""
        tag = (op or {}).get("ends_freeze")
        rule = self.frozen.get(tag) if tag else None
        if rule is not None and rule.evidence is not None:
            spec = next((s for r, _, s in self.armed.values() if r is rule), {})
            self.sched.release_hold(rule, rule.evidence["vt_ns"] + int(spec.get("hold_ms", 0)) * MS)

    def take_released(self) -> list[tuple]:
        out, self.released = self.released, []
        return out

    def summary(self) -> dict:
        """Per kind, how many calls asked for a fault inside them and how many had it."""
        return {kind: {"asked": asked, "landed": landed} for kind, (asked, landed) in self.counts.items() if asked}
