"""A process's status for tests, and waits on it bounded by what the kernel says, not by a fixed sleep
(SIGSTOP and SIGCONT are asynchronous)."""

from __future__ import annotations

import time

import psutil


def status(pid: int) -> str:
    """psutil's status of ``pid``; "gone" once it is."""
    try:
        return psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return "gone"


def wait_status(pid: int, want: str, timeout: float = 10.0) -> bool:
    """Whether ``pid`` is in status ``want`` within ``timeout`` seconds."""
    return _wait(lambda: status(pid) == want, timeout)


def wait_running(pid: int, timeout: float = 10.0) -> bool:
    """Whether ``pid`` is alive and no longer stopped within ``timeout`` seconds."""
    return _wait(lambda: status(pid) not in (psutil.STATUS_STOPPED, "gone"), timeout)


def _wait(ok, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return True
        time.sleep(0.002)
    return False
