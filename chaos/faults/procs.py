"""Process faults: a registry of what we started, kill / pause / resume of a
whole process tree, and the cgroup v1 freezer (fault-tooling notes §4).

Rules this module enforces for the whole suite:

* never kill by name: every PID the suite starts is registered here
  (``register(pid)``), and only snapshots of those trees are signalled;
* a tree is snapshotted *at action time* (``psutil.children(recursive=True)``),
  because servers such as PostgreSQL fork a process per connection and every
  PostgreSQL child calls ``setsid()`` (so ``killpg`` does not reach them);
* killed processes are reaped: ``waitpid`` for PIDs we are the (sub)reaper of,
  else we poll until each is a zombie or gone (PID 1 reaps orphans ~1.5 s later).

Usage::

    set_child_subreaper()            # once, in the harness process
    p = subprocess.Popen([...], start_new_session=True); register(p.pid)
    tree = ProcessTree(p.pid); tree.pause(); ...; tree.resume()
    ProcessTree(p.pid).kill()        # SIGKILL the tree and reap it

Faults overlap (a paused worker whose call a freeze also holds; a writer the power-loss halted while a
pause holds its host), so a stop is *held*: every pause counts itself as a holder of each process it
stopped, or found stopped, and its resume continues only those no other pause of this harness still
holds. A heal then undoes its own fault only, never another's.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import threading
import time
from pathlib import Path

import psutil

_PR_SET_CHILD_SUBREAPER = 36
_registry: set[int] = set()
_registry_lock = threading.Lock()
#: per stopped process, (pid, start time: a reused pid is another process), how many pauses hold it
_holds: dict[tuple[int, float], int] = {}
_holds_lock = threading.Lock()


# --------------------------------------------------------------------------- registry


def register(pid: int) -> int:
    """Record a PID the suite started (so only our own processes are ever signalled)."""
    with _registry_lock:
        _registry.add(pid)
    return pid


def unregister(pid: int) -> None:
    with _registry_lock:
        _registry.discard(pid)


def registered() -> set[int]:
    """The PIDs registered and still present (zombies count as present)."""
    with _registry_lock:
        pids = set(_registry)
    return {p for p in pids if psutil.pid_exists(p)}


def kill_new_descendants(before: set[int], mark: str | None = None) -> None:
    """SIGKILL + reap what a run's programs left behind: every descendant of this process not in
    ``before`` (a daemonized child of an external program's set-up call, re-parented to this subreaper);
    with ``mark``, only those with a variable whose value holds it (the run dir: another run in another
    thread of this process, a cluster worker's, has its own)."""
    for pid in descendants() - before:
        if mark is not None:
            try:
                if not any(mark in v for v in psutil.Process(pid).environ().values()):
                    continue
            except psutil.Error:
                continue
        ProcessTree(pid).kill()


def descendants(pid: int | None = None) -> set[int]:
    """Every live descendant of ``pid`` (default: this process), zombies excluded."""
    try:
        kids = psutil.Process(pid or os.getpid()).children(recursive=True)
    except psutil.NoSuchProcess:
        return set()
    out = set()
    for k in kids:
        try:
            if k.status() != psutil.STATUS_ZOMBIE:
                out.add(k.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def set_child_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants, so killed
    grandchildren can be ``waitpid``-ed at once instead of lingering as
    zombies until PID 1 reaps them. Returns False where prctl is unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


_SYS_PIDFD_GETFD = 438   # x86-64 and aarch64 alike (the unified syscall table, Linux 5.6)


def pidfd_getfd(pidfd: int, fd: int) -> int:
    """A duplicate, in this process, of descriptor ``fd`` of the process ``pidfd`` refers to (the same
    open file: polling it sees what that process would see); -1 where the kernel or its ptrace
    rules refuse."""
    global _libc
    try:
        _libc = _libc or ctypes.CDLL(None, use_errno=True)
        return int(_libc.syscall(_SYS_PIDFD_GETFD, pidfd, fd, 0))
    except (OSError, AttributeError):
        return -1


_libc = None


class Leftovers:
    """What programs started from here leave running: made at the start (this
    process becomes a subreaper, so a child that ``setsid``-ed away from its
    call is re-parented here rather than to PID 1), ``kill()`` at the end
    SIGKILLs every process under us that was not there at the start (a
    daemonized child that ignores SIGTERM included) and reaps it. For a
    harness that runs one thing at a time (a conformance case, a probe)."""

    def __init__(self):
        set_child_subreaper()
        self.before = descendants()

    def kill(self) -> list[int]:
        killed = []
        for pid in descendants() - self.before:
            killed += ProcessTree(pid).kill()
        return killed


# --------------------------------------------------------------------------- reaping


def reap(pids: list[int], timeout: float = 5.0) -> list[int]:
    """Wait until every PID is reaped, a zombie of someone else, or gone.

    Our own children (direct, or orphans re-parented to us as subreaper) are
    ``waitpid``-ed. Never ``waitpid(-1)``: that steals ``Popen`` statuses.
    Returns the PIDs still alive (and not zombie) after ``timeout``.
    """
    me = os.getpid()
    deadline = time.monotonic() + timeout
    pending = list(pids)
    while pending and time.monotonic() < deadline:
        still = []
        for pid in pending:
            try:
                proc = psutil.Process(pid)
                ppid, status = proc.ppid(), proc.status()
            except psutil.NoSuchProcess:
                continue
            if ppid == me:
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done = pid  # reaped elsewhere (e.g. by Popen.wait)
                if done == pid:
                    continue
            elif status == psutil.STATUS_ZOMBIE:
                continue
            still.append(pid)
        pending = still
        if pending:
            time.sleep(0.005)
    return pending


# --------------------------------------------------------------------------- process trees


class ProcessTree:
    """A process and all its descendants, snapshotted when each action runs.

    Pass the ``Popen`` of the root when you hold one, so ``kill`` reaps the
    root through it and ``Popen.returncode`` stays truthful.
    """

    def __init__(self, pid: int, popen=None):
        self.pid = pid
        self.popen = popen
        self._held: list[tuple[tuple[int, float], psutil.Process]] = []   # what its pause holds stopped

    def snapshot(self) -> list[psutil.Process]:
        """Root first, then every descendant alive right now."""
        try:
            root = psutil.Process(self.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def pids(self) -> list[int]:
        return [p.pid for p in self.snapshot()]

    def _signal_all(self, procs: list[psutil.Process], sig: int) -> int:
        sent = 0
        for proc in procs:
            try:
                proc.send_signal(sig)
                sent += 1
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return sent

    def kill(self, timeout: float = 5.0) -> list[int]:
        """SIGKILL the root and every descendant, then reap them. Returns the
        PIDs killed. The tree is stopped first, as ``pause`` stops it: a child
        forked between a look at the tree and the kill of its parent would be
        orphaned out of the tree and live on (seen once in some 45 roots forking
        300 children each)."""
        procs = list(self._stop_all().values())
        self._signal_all(procs, signal.SIGKILL)
        pids = [p.pid for p in procs]
        if self.popen is not None:
            try:
                self.popen.wait(timeout)
            except Exception:
                pass
        reap([p for p in pids if self.popen is None or p != self.popen.pid], timeout)
        return pids

    def _stop_all(self) -> dict[int, psutil.Process]:
        """SIGSTOP every process of the tree, looking again until it has no member not stopped here
        (a stopped process forks nothing); the processes, in the order stopped."""
        stopped: dict[int, psutil.Process] = {}
        while new := [p for p in self.snapshot() if p.pid not in stopped]:
            self._signal_all(new, signal.SIGSTOP)
            stopped |= {p.pid: p for p in new}
            wait_stopped([p.pid for p in new])
        return stopped

    def pause(self) -> list[int]:
        """SIGSTOP every process of the tree and hold it stopped (until ``resume``); returns their PIDs.
        A child its parent forked after a look at the tree and before the parent stopped would run on
        through the pause, so the tree is looked at again until it has no member not stopped here."""
        stopped = self._stop_all()
        self.hold(list(stopped.values()))
        return list(stopped)

    def hold(self, members: list[psutil.Process]) -> None:
        """Count this tree's pause as a holder of ``members`` (stopped already: by ``pause``, or by
        themselves, as a write-release freeze's process is), so another pause's resume leaves them be."""
        held = [(key, p) for p in members if (key := _key(p)) is not None]
        with _holds_lock:
            for key, _ in held:
                _holds[key] = _holds.get(key, 0) + 1
        self._held += held

    def held_pids(self) -> list[int]:
        """The PIDs this tree's pause holds stopped."""
        return [p.pid for _, p in self._held]

    def resume(self) -> list[int]:
        """Let go of what this tree's pause holds; SIGCONT each process no other pause holds.
        Returns the PIDs continued."""
        go = []
        with _holds_lock:
            for key, proc in self._held:
                n = _holds.get(key, 0) - 1
                if n > 0:
                    _holds[key] = n
                else:
                    _holds.pop(key, None)
                    go.append(proc)
        self._held = []
        self._signal_all(go, signal.SIGCONT)
        return [p.pid for p in go]


def _key(proc: psutil.Process) -> tuple[int, float] | None:
    """A process's identity while it lives (its pid and start time), None once it is gone."""
    try:
        return proc.pid, proc.create_time()
    except psutil.NoSuchProcess:
        return None


def wait_stopped(pids: list[int], timeout: float = 5.0) -> bool:
    """Wait until every PID is stopped (SIGSTOP is asynchronous), zombie or gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = False
        for pid in pids:
            try:
                if psutil.Process(pid).status() not in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE):
                    pending = True
                    break
            except psutil.NoSuchProcess:
                pass
        if not pending:
            return True
        time.sleep(0.002)
    return False


def signal_pids(pids: list[int], sig: int) -> None:
    """Send ``sig`` to a fixed list of PIDs (e.g. a snapshot taken at pause time)."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


# --------------------------------------------------------------------------- cgroup v1 freezer

FREEZER_ROOT = Path("/sys/fs/cgroup/freezer")


def freezer_available() -> bool:
    """True when we are root and the cgroup v1 freezer hierarchy is mounted."""
    return os.geteuid() == 0 and (FREEZER_ROOT / "cgroup.procs").exists()


class Freezer:
    """A cgroup v1 freezer group ``/sys/fs/cgroup/freezer/<name>``.

    Processes added are frozen atomically, and children they fork later join
    the group, so a frozen server cannot escape by forking a new backend.
    """

    def __init__(self, name: str):
        if not freezer_available():
            raise RuntimeError("cgroup v1 freezer not available (needs root and /sys/fs/cgroup/freezer)")
        self.path = FREEZER_ROOT / name
        self.path.mkdir(exist_ok=True)

    def add(self, pids) -> None:
        for pid in pids:
            try:
                (self.path / "cgroup.procs").write_text(f"{pid}\n")
            except OSError as e:
                if e.errno != errno.ESRCH:
                    raise

    def pids(self) -> list[int]:
        try:
            text = (self.path / "cgroup.procs").read_text()
        except FileNotFoundError:
            return []
        return [int(x) for x in text.split()]

    def state(self) -> str:
        return (self.path / "freezer.state").read_text().strip()

    def _set(self, state: str, timeout: float = 5.0) -> None:
        (self.path / "freezer.state").write_text(state)
        deadline = time.monotonic() + timeout
        while self.state() != state:  # FREEZING -> FROZEN takes a few ms
            if time.monotonic() > deadline:
                raise TimeoutError(f"freezer {self.path} stuck in {self.state()}")
            time.sleep(0.002)

    def freeze(self) -> None:
        self._set("FROZEN")

    def thaw(self) -> None:
        self._set("THAWED")

    def remove(self, timeout: float = 5.0) -> None:
        """Thaw, move any remaining members back to the root group, rmdir."""
        if not self.path.exists():
            return
        try:
            self.thaw()
        except (OSError, TimeoutError):
            pass
        deadline = time.monotonic() + timeout
        while True:
            # re-list each round: a thawed member may fork a child into the group
            for pid in self.pids():
                try:
                    (FREEZER_ROOT / "cgroup.procs").write_text(f"{pid}\n")
                except OSError:
                    pass
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
