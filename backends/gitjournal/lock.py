"""The namespace journal lock: an exclusive lock file that names its owner.

Acquire: write ``{pid, start_ticks, start_time, token}`` to a private temp
file, then ``link()`` it to ``lock``; ``link`` fails with EEXIST atomically,
so the lock file only ever appears with its full content (a writer killed
half-way cannot leave an empty, forever-malformed lock).

Recovery (contract §6): a later process may remove a lock ONLY when the OS
reports its owner absent: ``/proc`` says the pid does not exist, is a
zombie, or is a different process (its start differs: PID reuse).
Elapsed time never authorizes recovery. A process's start is the kernel's,
in clock ticks since boot (``/proc/PID/stat`` field 22), fixed for its life;
not psutil's ``create_time()``, which adds a boot time derived from the wall
clock (``/proc/stat`` btime, re-read on every call) and so moves when the
clock is stepped or slewed across a second: a live owner then reads as
another process and its lock is taken from it (found by the deterministic
mode: a frozen publisher's lock recovered, two commits on one revision).
``start_time`` stays in the record: for people, the time its process first
took a lock (its own clock; not psutil's, which reads ``/proc/stat``); and in
a lock written before ``start_ticks`` (psutil's ``create_time()`` then), which
is judged by it as before. A live or malformed lock stays busy.
Recovery is mutually exclusive: it runs under ``flock`` of ``recover.lock``
(released by the kernel when its holder dies, so it can never go stale), and
re-reads the lock under it, so two recoverers cannot both remove it, and a
recoverer can never remove a fresh lock taken by someone else meanwhile.

A busy lock is retried with short waits for ``wait_s`` seconds, then the
caller gets ``StoreUnavailable("claim-store-locked")``.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import time

from backends.api import StoreUnavailable
from backends.gitjournal.fsio import fsync_dir, in_pid_free_order

LOCKED = "claim-store-locked"
DEFAULT_WAIT_S = 5.0
POLL_S = 0.005
POLL_MAX_S = 0.05


def process_start_time(pid: int) -> float | None:
    """psutil's creation time (seconds since the epoch: moves with the wall clock; see above)."""
    import psutil   # here, not at the top: importing psutil reads /proc/stat (its CPU-time baselines)

    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def process_stat(pid: int) -> tuple[str, int] | None:
    """``pid``'s state and its start in clock ticks since boot (``/proc/PID/stat`` fields 3 and 22), None
    when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rsplit(b")", 1)[1].split()   # (the name, field 2, may hold spaces)
    return fields[0].decode(), int(fields[19])


def process_start_ticks(pid: int) -> int | None:
    """The kernel's start of ``pid``: clock ticks since boot, ``/proc/PID/stat`` field 22."""
    stat = process_stat(pid)
    return None if stat is None else stat[1]


_START_BY_PID: dict[int, tuple[int | None, float]] = {}


def _my_start() -> tuple[int | None, float]:
    """This process's start in clock ticks, and when it first took a lock, in seconds since the epoch
    (cached per pid: a fork gets its own). The seconds are for people and ``parse_owner``'s shape, and are
    not psutil's ``create_time()``: that reads the boot time from ``/proc/stat``, a read of the machine's
    clock that a deterministic run cannot make virtual (and reports)."""
    pid = os.getpid()
    if pid not in _START_BY_PID:
        _START_BY_PID[pid] = process_start_ticks(pid), time.time()
    return _START_BY_PID[pid]


def owner_absent(owner: dict) -> bool:
    """True only when the OS reports the recorded owner process gone (one read of its ``/proc`` stat)."""
    pid = owner["pid"]
    stat = process_stat(pid) if pid > 0 else None
    if stat is None:
        return True
    state, ticks = stat
    if state == "Z":
        return True  # dead, only not reaped yet: it can never release
    if isinstance(owner.get("start_ticks"), int) and not isinstance(owner["start_ticks"], bool):
        return ticks != owner["start_ticks"]  # the pid was reused
    created = process_start_time(pid)   # a lock from before start_ticks
    return created is not None and created != owner["start_time"]


def parse_owner(raw: bytes) -> dict | None:
    """The owner record, or None when the lock is malformed."""
    try:
        owner = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if (not isinstance(owner, dict) or not isinstance(owner.get("pid"), int) or isinstance(owner.get("pid"), bool)
            or not isinstance(owner.get("start_time"), (int, float)) or not isinstance(owner.get("token"), str)):
        return None
    return owner


class NamespaceLock:
    """One acquisition of the lock in ``directory`` (see the module docstring)."""

    def __init__(self, directory: str, wait_s: float = DEFAULT_WAIT_S):
        self.directory = directory
        self.path = os.path.join(directory, "lock")
        self.wait_s = wait_s
        self.token: str | None = None
        self.recovered = 0  # stale locks this acquisition removed

    def acquire(self) -> None:
        deadline = time.monotonic() + self.wait_s
        pause = POLL_S
        while True:
            if self._try_create():
                return
            owner = self._read_owner()
            if owner is not None and owner is not _GONE and owner_absent(owner):
                self._recover(owner["token"])
                continue
            if owner is _GONE:
                continue  # released between our attempt and the read: retry at once
            if time.monotonic() >= deadline:
                raise StoreUnavailable(LOCKED, "the namespace journal lock is held by a live or unknown owner")
            time.sleep(pause)
            pause = min(pause * 2, POLL_MAX_S)

    def release(self) -> None:
        """Remove the lock if (and only if) it is still ours."""
        if self.token is None:
            return
        owner = self._read_owner()
        if isinstance(owner, dict) and owner.get("token") == self.token:
            os.unlink(self.path)
        self.token = None

    # ------------------------------------------------------------------ internals

    def _try_create(self) -> bool:
        token = secrets.token_hex(16)
        ticks, start = _my_start()
        record = {"pid": os.getpid(), "start_ticks": ticks, "start_time": start, "token": token}
        tmp = os.path.join(self.directory, f"lock.tmp.{os.getpid()}.{token[:8]}")
        with open(tmp, "wb") as f:
            f.write(json.dumps(record).encode())
        try:
            os.link(tmp, self.path)
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        self.token = token
        return True

    def _read_owner(self):
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return _GONE
        return parse_owner(raw)

    def _recover(self, stale_token: str) -> None:
        """Remove the lock whose owner is gone, under ``flock(recover.lock)``."""
        fd = os.open(os.path.join(self.directory, "recover.lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            owner = self._read_owner()
            if not isinstance(owner, dict) or owner["token"] != stale_token or not owner_absent(owner):
                return  # someone else recovered it (and may hold a fresh lock)
            os.rename(self.path, os.path.join(self.directory, f"lock.stale.{stale_token}"))
            os.unlink(os.path.join(self.directory, f"lock.stale.{stale_token}"))
            self._remove_dead_tmp()
            fsync_dir(self.directory)
            self.recovered += 1
        finally:
            os.close(fd)  # closing drops the flock

    def _remove_dead_tmp(self) -> None:
        for name in in_pid_free_order(os.listdir(self.directory)):
            if not name.startswith("lock.tmp."):
                continue
            try:
                pid = int(name.split(".")[2])
            except (IndexError, ValueError):
                continue
            if process_stat(pid) is None:
                try:
                    os.unlink(os.path.join(self.directory, name))
                except FileNotFoundError:
                    pass


_GONE = object()
