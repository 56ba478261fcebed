"""A fault at an exact scheduling point: which point it takes (a process, a call, a syscall index, the n-th
match from a virtual instant on) and what happens there.

``Scheduler._grant`` asks every armed rule at every grant, so a rule's count of matching points is a
function of the schedule alone; a run draws its rules from the seed (``chaos.deterministic.plan.fault_rules``),
a racer's from its call (``chaos.deterministic.callfaults``), a crash-point campaign's from a recorded
point (``chaos.explore.crashpoints``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from chaos.deterministic.processes import Thread


@dataclass
class FaultRule:
    """Fault the ``nth`` point matching ``calls`` (None: any call but start and
    sleep), ``process`` (a name prefix), ``index`` (the thread's syscall
    index), reached at or after virtual time ``after_ns``, and ``when`` (a
    predicate asked only at otherwise matching points: a point where the fault
    could not take effect is not counted). ``action``:

    * ``kill``: SIGKILL the process at the point, before its call;
    * an errno name (``EIO``): the call fails with it, undone;
    * ``freeze``: the thread is held at the point for ``hold_ns`` of virtual
      time while the others run (a pause: it keeps its locks), then goes on;
      so are its process's other threads (a Node program's libuv pool), as a
      SIGSTOP stops them all;
    * ``lost-reply``: the call goes on; the caller is to drop the reply of
      the request in flight (the scheduler only names the point);
    * ``power-loss``: every process is killed and reaped, then ``then()``
      (which undoes what no fsync covers) returns what the evidence records;
    * ``clock``: from that point on, the wall clock of every process whose
      name starts with a key of ``offsets`` is stepped by its value (ns,
      forward or back) until ``heal_clocks``; the call itself goes on."""

    action: str
    calls: frozenset | None = None
    process: str | None = None
    index: int | None = None
    nth: int = 1
    after_ns: int = 0
    offsets: dict | None = None
    value: dict | None = None     # what the run records of the fault (a clock step's draw)
    hold_ns: int = 0              # freeze: how long (virtual) the thread is held
    when: Callable[["Thread"], bool] | None = None
    then: Callable[[], dict] | None = None
    seen: int = 0
    evidence: dict | None = None
    held: "Thread | None" = None   # freeze: the thread it holds (``release_hold``)
    sleeps: bool = False           # with ``calls`` None: a sleep is a matching point too

    def matches(self, thread: "Thread", call: str, seq: int, vt: int = 0) -> bool:
        if self.evidence is not None or vt < self.after_ns:
            return False
        if self.calls is None and (call == "start" or (call == "sleep" and not self.sleeps)):
            return False
        if self.calls is not None and call not in self.calls:
            return False
        if self.process is not None and not thread.name.startswith(self.process):
            return False
        if self.index is not None and seq != self.index:
            return False
        if self.when is not None and not self.when(thread):
            return False
        self.seen += 1
        return self.seen == self.nth

