"""Faults inside one call: SIGSTOP or SIGKILL the process that serves it, at a
point of its work, not between calls.

The process that serves a call is the worker host for an in-process backend
(sqlite, postgres, gitjournal, a Python class: the decision runs in the host)
and, for a black-box program, the per-call CLI process the host starts (the
host only waits for it). ``InCallFault`` is started right after the call is
sent; at ``after_ms`` it finds that process and

* ``freeze``: SIGSTOPs its tree, holds it ``hold_ms``, SIGCONTs it;
* ``kill``: SIGKILLs its tree (the call then proves nothing: ``info``; it was
  inside the call when no reply ever came).

A freeze with ``release`` (``chaos.faults.lockfreeze``) has no timer: the
process stops itself right after it ends a write transaction, and the fault
waits for that stop (``at: write-release`` in the evidence). A freeze with a
``tag`` is one side of a rendezvous with a rival call (``Rendezvous``, one per
run): ``wait_frozen(tag)`` returns once the freeze landed (or missed), and the
hold lasts until the rival's call ended (``rival_done(tag)``, at most
``rival_wait_s``) if that is
longer than ``hold_ms``: a rival on a slow program needs more than a fixed
hold to take the item over.

Evidence (``evidence()``, recorded with the call's completion in the history):
``kind``, ``after_ms`` (from the send to the signal, measured), ``target``
(``host`` / ``cli``), ``pid``, ``held_ms`` and ``inside``: the signal reached
the call before its reply was written. For a freeze that is decided by
waiting a moment while the process is stopped: a reply that still arrives
was written before the stop (the freeze landed between the work and the
reply, not inside it). A fault that finds the call already answered does
nothing and says so (``inside: false``).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import psutil

from chaos.faults import procs

#: how long a stopped process must stay silent before the freeze counts as inside the call
SETTLE_S = 0.03
#: how long a black-box fault waits for the host to start the call's CLI process
SPAWN_WAIT_S = 2.0
#: how often a write-release freeze looks whether the process stopped itself
POLL_S = 0.0005
#: and every this many polls, whether a descendant did (a shell wrapper's program; listing children is costly)
DEEP_EVERY = 40
#: how often it looks again while another fault holds the process stopped (a pause lasts seconds)
FOREIGN_STOP_POLL_S = 0.01

class Rendezvous:
    """A run's frozen calls and their rivals, by tag. One per run, shared by
    its slots: a tag (the frozen publish's operation id) recurs in another run
    of the same seed in one process, whose events must not be these."""

    def __init__(self):
        self._lock = threading.Lock()
        self._frozen: dict[str, threading.Event] = {}
        self._rival_ended: dict[str, threading.Event] = {}

    def _event(self, table: dict, tag: str) -> threading.Event:
        with self._lock:
            return table.setdefault(tag, threading.Event())

    def landed(self, tag: str) -> None:
        """The freeze tagged ``tag`` landed or missed: its rival goes ahead."""
        self._event(self._frozen, tag).set()

    def wait_frozen(self, tag: str, timeout: float) -> bool:
        """Block until the freeze tagged ``tag`` landed or missed (False: not within ``timeout``)."""
        return self._event(self._frozen, tag).wait(timeout)

    def rival_done(self, tag: str) -> None:
        """The rival of the freeze tagged ``tag`` has its reply: the frozen call may go on."""
        self._event(self._rival_ended, tag).set()

    def wait_rival(self, tag: str, timeout: float) -> bool:
        return self._event(self._rival_ended, tag).wait(timeout)


def cli_children(host_pid: int) -> list[int]:
    """The host's child processes now (a black-box program's per-call CLI)."""
    try:
        return [c.pid for c in psutil.Process(host_pid).children(recursive=False)]
    except psutil.NoSuchProcess:
        return []


class InCallFault:
    """One freeze or kill of the process serving one call (see the module docstring)."""

    def __init__(self, kind: str, after_ms: float, hold_ms: int = 0, release=None, tag: str | None = None,
                 rival_wait_s: float = 0.0, rendezvous: Rendezvous | None = None):
        if kind not in ("freeze", "kill") or (release is not None and kind != "freeze"):
            raise ValueError(f"in-call fault kind {kind!r}")
        self.kind, self.after_ms, self.hold_ms = kind, float(after_ms), int(hold_ms)
        if tag and rendezvous is None:
            raise ValueError("a tagged in-call fault needs its run's rendezvous")
        self.release, self.tag, self.rival_wait_s = release, tag, float(rival_wait_s) if tag else 0.0
        self.rendezvous = rendezvous
        planned = {"at": "write-release"} if release is not None else {"planned_after_ms": round(self.after_ms, 3)}
        self._evidence: dict = {"kind": kind, **planned, "inside": False}
        self._thread: threading.Thread | None = None

    @property
    def longest_hold_s(self) -> float:
        return max(self.hold_ms / 1000, self.rival_wait_s)

    def prepare(self) -> None:
        """Before the call is sent: a write-release freeze is armed (the first
        transaction of an in-process call may end a millisecond after the send)."""
        if self.release is not None:
            self.release.arm()

    def start(self, host_pid: int, black_box: bool, answered: Callable[[], bool]) -> None:
        """Run the fault in the background; ``answered()`` says whether the
        call's reply has reached the worker."""
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, args=(host_pid, black_box, answered), daemon=True,
                                        name=f"in-call-{self.kind}")
        self._thread.start()

    def join(self, timeout: float | None = None) -> dict:
        if self._thread is not None:
            self._thread.join(timeout)
        return dict(self._evidence)

    def evidence(self) -> dict:
        return dict(self._evidence)

    def settle(self, replied: bool) -> dict:
        """The evidence once the call ended: a kill was inside the call when no
        reply came (a reply written just before the signal still arrives)."""
        ev = self.join(5.0)
        if self.kind == "kill" and ev.get("inside") is None:
            ev["inside"] = not replied
        return ev

    def _target(self, host_pid: int, black_box: bool, answered) -> int | None:
        if not black_box:
            return host_pid
        deadline = time.monotonic() + SPAWN_WAIT_S
        while time.monotonic() < deadline and not answered():
            kids = cli_children(host_pid)
            if kids:
                return kids[0]
            time.sleep(0.001)
        return None

    def _run(self, host_pid: int, black_box: bool, answered) -> None:
        try:
            if self.release is not None:
                self._run_release(host_pid, black_box, answered)
            else:
                self._run_timed(host_pid, black_box, answered)
        finally:
            if self.tag:
                self.rendezvous.landed(self.tag)   # landed or missed: the rival goes ahead either way

    def _hold(self, tree, stopped_at: float) -> None:
        try:
            if self.tag:
                self.rendezvous.landed(self.tag)
                self.rendezvous.wait_rival(self.tag, self.rival_wait_s)
            rest = self.hold_ms / 1000 - (time.monotonic() - stopped_at)
            if rest > 0:
                time.sleep(rest)
        finally:   # a hold left behind would keep the process stopped through every other fault's heal
            tree.resume()
        self._evidence["held_ms"] = round((time.monotonic() - stopped_at) * 1000, 3)

    def _run_release(self, host_pid: int, black_box: bool, answered) -> None:
        """Wait for the process serving the call to stop itself at a write release."""
        ev = self._evidence
        try:
            pid = self._target(host_pid, black_box, answered)
            ev.update(target="cli" if black_box else "host")
            stopped, polls = None, 0
            while pid is not None and stopped is None and not answered():
                polls += 1
                stopped = _stopped_in(pid, deep=polls % DEEP_EVERY == 0)
                if stopped is not None and not self.release.claimed():
                    stopped = None   # another fault's stop (a pause, a power cut's halt): not this freeze;
                    time.sleep(FOREIGN_STOP_POLL_S)   # it lasts, and a stop of this freeze's own stays
                elif stopped is None:
                    time.sleep(POLL_S)
            if stopped is None:
                if self.release.disarm():
                    ev.update(note="no write transaction ended while the call ran", unclaimed=True)
                    return
                # claimed: the process stopped itself, after its reply was written (or is about to)
                deadline = time.monotonic() + 1.0
                while stopped is None and time.monotonic() < deadline:
                    stopped = _stopped_in(pid or host_pid, deep=True)
                    time.sleep(POLL_S)
                if stopped is None:
                    ev["note"] = "the arming was claimed but no stopped process was found"
                    return
            stopped_at = time.monotonic()
            ev.update(pid=stopped, after_ms=round((stopped_at - self._t0) * 1000, 3))
            tree = procs.ProcessTree(stopped)
            members = tree.snapshot()
            ev["pids"] = [m.pid for m in members]
            tree.hold(members[:1])   # its own stop, held like a pause's: another pause's resume leaves it
            time.sleep(SETTLE_S)
            ev["inside"] = not answered()
            self._hold(tree, stopped_at)
        except Exception as e:  # the process died meanwhile: say so, never pretend
            ev["error"] = f"{type(e).__name__}: {e}"
        finally:
            self.release.disarm()

    def _run_timed(self, host_pid: int, black_box: bool, answered) -> None:
        ev = self._evidence
        try:
            delay = self.after_ms / 1000 - (time.monotonic() - self._t0)
            if delay > 0:
                time.sleep(delay)
            pid = self._target(host_pid, black_box, answered)
            ev.update(target="cli" if black_box else "host", pid=pid)
            if pid is None or answered():
                ev["note"] = "the call had already answered" if answered() else "no CLI process to signal"
                return
            tree = procs.ProcessTree(pid)
            ev["after_ms"] = round((time.monotonic() - self._t0) * 1000, 3)
            if self.kind == "kill":
                ev["pids"] = tree.kill()
                ev["inside"] = None   # the caller decides: inside if no reply ever came (``settle``)
                return
            ev["pids"] = tree.pause()
            stopped_at = time.monotonic()
            time.sleep(SETTLE_S)
            ev["inside"] = not answered()   # a reply written before the stop arrives anyway
            self._hold(tree, stopped_at)
        except Exception as e:  # the process died meanwhile: say so, never pretend
            ev["error"] = f"{type(e).__name__}: {e}"


def _stopped_in(pid: int, deep: bool) -> int | None:
    """``pid`` (or, ``deep``, a descendant of it: a shell wrapper's program) if stopped, else None."""
    try:
        root = psutil.Process(pid)
        for p in (root, *(root.children(recursive=True) if deep else ())):
            if p.status() == psutil.STATUS_STOPPED:
                return p.pid
    except psutil.NoSuchProcess:
        pass
    return None
