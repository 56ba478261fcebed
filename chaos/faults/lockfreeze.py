"""Freeze a process right after it ends a write transaction: our LD_PRELOAD
shim (``lockfreeze.c``), built with the system ``gcc`` on first use.

A timed SIGSTOP lands where a call spends its time (a per-call CLI process:
its start-up; an in-process backend: its fsyncs), almost never in the few
microseconds between two transactions of one call, where a check-then-act
backend is exposed (``fence-outside-commit``: the fence decided and committed
in one transaction, the write done in another). The shim stops the process
there itself: after the whole-file F_UNLCK that ends an F_WRLCK, the first
time after the control file appeared (it removes the file as it stops, so one
arming stops one process once). A program that takes no POSIX record lock is
never stopped: the freeze misses and says so (``chaos.faults.incall``).

Usage::

    freeze = WriteReleaseFreeze("/tmp/ccX/lockfreeze-3")
    proc = subprocess.Popen(cmd, env={**os.environ, **freeze.env(), "LD_PRELOAD": freeze.library})
    freeze.arm()            # the next write transaction the tree ends stops its process
    ...                     # wait for psutil's STATUS_STOPPED, hold, SIGCONT
    freeze.disarm()         # True: the arming was never claimed (no write transaction ended)
"""

from __future__ import annotations

import os
from pathlib import Path

from chaos.faults.failsync import build_shim

SOURCE = Path(__file__).with_name("lockfreeze.c")
LIBNAME = "lockfreeze"
CONTROL_ENV = "LOCKFREEZE_FILE"


def build() -> str:
    """Compile ``lockfreeze.c`` once per source version; returns the .so path."""
    return build_shim(SOURCE, LIBNAME)


class WriteReleaseFreeze:
    """The control file of one worker slot's processes (see the module docstring)."""

    def __init__(self, ctl_path: str):
        self.ctl_path = os.path.abspath(ctl_path)
        self.library = build()

    def env(self) -> dict:
        return {CONTROL_ENV: self.ctl_path}

    def arm(self) -> None:
        with open(self.ctl_path, "w"):
            pass

    def claimed(self) -> bool:
        """A process took the arming (it removes the file before it stops): a stopped process while
        the file is still there was stopped by something else (a pause, a power cut)."""
        return not os.path.exists(self.ctl_path)

    def disarm(self) -> bool:
        """Remove the arming; True when it was still there (no process claimed it)."""
        try:
            os.unlink(self.ctl_path)
            return True
        except FileNotFoundError:
            return False
