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


def cli_children(host_pid: int) -> list[int]:
    """The host's child processes now (a black-box program's per-call CLI)."""
    try:
        return [c.pid for c in psutil.Process(host_pid).children(recursive=False)]
    except psutil.NoSuchProcess:
        return []


class InCallFault:
    """One freeze or kill of the process serving one call (see the module docstring)."""

    def __init__(self, kind: str, after_ms: float, hold_ms: int = 0):
        if kind not in ("freeze", "kill"):
            raise ValueError(f"in-call fault kind {kind!r}")
        self.kind, self.after_ms, self.hold_ms = kind, float(after_ms), int(hold_ms)
        self._evidence: dict = {"kind": kind, "planned_after_ms": round(self.after_ms, 3), "inside": False}
        self._thread: threading.Thread | None = None

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
            rest = self.hold_ms / 1000 - (time.monotonic() - stopped_at)
            if rest > 0:
                time.sleep(rest)
            tree.resume()
            ev["held_ms"] = round((time.monotonic() - stopped_at) * 1000, 3)
        except Exception as e:  # the process died meanwhile: say so, never pretend
            ev["error"] = f"{type(e).__name__}: {e}"
