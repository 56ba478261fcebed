"""The processes a deterministic run controls: their records (``Proc``, ``Thread``) and their lives
(``Processes``, the scheduler's mixin): started under the shim, handed a line, killed with their whole tree
and reaped before anything else runs (else when the others see one gone would be a matter of real time);
and what the kernel says of one that got stuck (a run's evidence, ``SchedulerStuck``).
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field

from chaos.deterministic import shim

#: SIGCHLD's bit in /proc/PID/status signal masks
SIGCHLD_BIT = 1 << (signal.SIGCHLD - 1)
#: how long (wall) a child's end waits for its SIGCHLD to be pending in a parent that catches it
SIGCHLD_WAIT_S = 0.05


#: x86-64 syscall numbers a stuck thread is usually found in (/proc/<pid>/task/<tid>/syscall)
SYSCALL_NAMES = {"0": "read", "1": "write", "7": "poll", "23": "select", "35": "nanosleep", "61": "wait4",
                 "202": "futex", "230": "clock_nanosleep", "232": "epoll_wait", "247": "waitid", "271": "ppoll", "281": "epoll_pwait"}


def _proc_status(pid: int) -> dict[str, str] | None:
    """/proc/PID/status as {field: value}, None once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    except OSError:
        return None


def _kernel_state(pid: int) -> str:
    """A process's state and each thread's kernel wait channel, from /proc (a deadlock's evidence)."""
    status = _proc_status(pid)
    if status is None:
        return "gone"
    state = status.get("State", "?").strip()
    try:
        chans = []
        for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int)[:8]:
            with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                chan = f.read().strip() or "-"
            with open(f"/proc/{pid}/task/{tid}/syscall") as f:   # "<nr> <args>...", "running" or "-1 ..."
                nr = f.read().split(" ", 1)[0].strip()
            chans.append(f"{chan}/{SYSCALL_NAMES.get(nr, nr)}")
        return f"state {state}, threads in (wait channel/syscall) {', '.join(chans)}"
    except OSError:
        return "gone"



class SchedulerStuck(RuntimeError):
    """The running thread went too long (wall time) without reaching a point:
    it blocks on something the shim does not control."""



@dataclass
class Proc:
    name: str
    pid: int
    popen: subprocess.Popen | None
    pidfd: int
    control: bool = False
    out_buf: bytes = b""
    threads: list = field(default_factory=list)
    gone: bool = False
    vpid: int = 0                 # its virtual pid, numbered at its first grant (``_answer``)
    serving: bool = False      # handed a line (``send``) and not yet replied: inside a request
    call: tuple | None = None     # (serial, f) of the op it serves (``begin_call``): what a fault rule may name
    item: tuple | None = None     # the (namespace, item) that op names, if any
    spawned: int = 0              # children it said it started (its points' count)
    children: set = field(default_factory=set)   # names of its children that said hello
    threads_made: int = 0         # threads it said it made (pthread_create, with CHAOS_SCHED_THREADS=1)
    made_hellos: int = 0          # of those, the ones that said hello
    wakes: dict = field(default_factory=dict)   # slot -> slices that woke a local wait on it (an unlock, post, signal)
    wakes_all: int = 0            # slices that may have woken any of its local waits (a thread's exit, many slots)
    flight: object = None         # its Flight while its start runs beside the schedule (flights.py)
    held_until: int = 0           # a freeze holds every thread of it until this virtual time (``_grant``)


@dataclass
class Thread:
    name: str
    pid: int
    tid: int
    conn: socket.socket
    proc: Proc
    priority: float
    buf: bytes = b""
    state: str = "ready"          # ready | sleeping | blocked | waiting | running | idle (control read) | gone
    call: str = "start"
    seq: int = 0
    arg: int = 0
    path: str = ""
    local_vt: int = 0
    wake_at: int = 0
    held: bool = False            # frozen at its current point by a fault: its next grant is not faulted again
    since: int = 0                # waiting: the epoch of its last failed try
    slot: int = -1                # a local wait: its object's slot (sched.c)
    since_wakes: tuple = (0, 0)   # a local wait: its slot's wakes and the process's wakes_all at its last failed try
    probe: object = None          # a wait for fds: a poll over duplicates of them (``_probe``), None: retried by epoch
    probe_fds: list = field(default_factory=list)
    probe_epoch: int = -1         # the epoch its readiness was last looked at in,
    probe_ready: bool = False     # and what was seen
    released: bool = False        # its last grant was a release (``RELEASES``): it stops right after one


class Processes:
    """The process half of ``Scheduler`` (its mixin; its state: ``procs``, ``by_name``, ``pid_names``,
    ``threads``, ``running``, ``_sel``)."""

    def env(self, name: str) -> dict:
        return shim.env(self.sock_path, name, self.prefixes, self.reads)

    def spawn(self, name: str, argv: list[str], *, control: bool = False, env: dict | None = None,
              cwd: str | None = None) -> Proc:
        """Start ``argv`` under the shim as logical process ``name`` and let it
        run until it first stops. ``control``: its stdin/stdout are a line
        channel (``send`` / ``replies``). A preload in ``env`` (the power-loss journal) comes after
        the scheduling shim's, so every call reaches it only once granted."""
        assert self.running is None
        sched_env = self.env(name)
        if env and env.get("LD_PRELOAD"):
            sched_env["LD_PRELOAD"] += " " + env["LD_PRELOAD"]
        full_env = {**shim.stable_env(), **(env or {}), **sched_env}
        if control:   # its stdin/stdout are the harness's: their reads block for real (not a wait for a child)
            full_env["CHAOS_SCHED_CONTROL"] = "1"
        stderr = (open(os.path.join(self.log_dir, f"{name.replace('/', '_')}.stderr"), "ab")
                  if self.log_dir else subprocess.DEVNULL)
        try:
            popen = subprocess.Popen(argv, env=full_env, cwd=cwd, start_new_session=True,
                                     stdin=subprocess.PIPE if control else subprocess.DEVNULL,
                                     stdout=subprocess.PIPE if control else subprocess.DEVNULL, stderr=stderr)
        finally:
            if stderr is not subprocess.DEVNULL:
                stderr.close()
        proc = self._adopt(name, popen.pid, popen)
        proc.control = control
        if control:
            os.set_blocking(popen.stdout.fileno(), False)
            self._sel.register(popen.stdout, ("control", proc))
        self.running = (proc.pid, proc.pid)
        self._settle()
        return proc

    def _adopt(self, name: str, pid: int, popen) -> Proc:
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            pidfd = -1
        proc = Proc(name, pid, popen, pidfd)
        self.procs[pid] = proc
        self.by_name[name] = proc
        self.pid_names[pid] = name
        if pidfd >= 0:
            self._sel.register(pidfd, ("exit", proc))
        return proc

    def send(self, proc: Proc, line: bytes) -> None:
        """Hand a controlled process one line on its stdin; it runs until it stops again."""
        assert self.running is None and proc.control
        if proc.gone:
            raise BrokenPipeError(f"{proc.name} is gone")
        proc.popen.stdin.write(line)
        proc.popen.stdin.flush()
        proc.serving = True
        for t in proc.threads:     # a new call: its first point is not inside the last one's gap
            t.released = False
        self.vt += self.send_ns
        self.running = (proc.pid, proc.pid)
        self._settle()

    def begin_call(self, proc: Proc, f: str, item: tuple | None = None) -> None:
        """Note that ``proc`` now serves an op of kind ``f`` (numbered in the order ops are handed
        out) on ``item`` (its tuple, when it names one), so a rule can name "call c of kind K" and a
        recorder the item a call touched (``chaos.explore.crashpoints``)."""
        self.calls_begun += 1
        proc.call = (self.calls_begun, f)
        proc.item = item

    def kill(self, proc: Proc) -> None:
        """SIGKILL a process (its whole session) and reap it, and its children, before anything else runs."""
        if proc.gone:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._reap(proc)
        for child in [p for p in self.procs.values() if p.name.startswith(proc.name + "/") and not p.gone]:
            self._await_exit(child)
        self._end_slice(None)

    def _await_exit(self, proc: Proc) -> None:
        """SIGKILL a child of a killed process (it may lead a session of its own: a per-call program) and
        its group, wait (wall time bounds it) until it is gone, then reap it."""
        if proc.pidfd >= 0:
            try:
                if not select.select([proc.pidfd], [], [], 0)[0]:   # still alive: its pid is still its own
                    os.killpg(proc.pid, signal.SIGKILL) if os.getpgid(proc.pid) == proc.pid else None
                signal.pidfd_send_signal(proc.pidfd, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._wait_dead(proc, "its parent's SIGKILL")
        self._wait_reaped(proc)
        self._reap(proc)

    def _await_victims(self, target: int) -> None:
        """A controlled process sent SIGKILL to ``target`` (kill()'s pid: below 0, a process group) and
        stopped right after: wait (wall time bounds it) until every controlled process it hit is dead,
        and take each as gone now, inside the killer's slice (its parent reaps the zombie)."""
        for proc in [p for p in self.procs.values() if not p.gone and p.pidfd >= 0]:
            try:
                hit = proc.pid == target if target > 0 else os.getpgid(proc.pid) == -target
            except ProcessLookupError:
                hit = True     # already reaped by its parent
            if hit:
                self._wait_dead(proc, "a SIGKILL")
                self._reap(proc)

    def _wait_dead(self, proc: Proc, after: str) -> None:
        """Wait (wall time bounds it) until ``proc`` has exited (its pidfd polls readable)."""
        if proc.pidfd >= 0 and not select.select([proc.pidfd], [], [], self.stuck_s)[0]:
            raise SchedulerStuck(f"{proc.name} did not die {self.stuck_s:g} s after {after}")

    def _wait_reaped(self, proc: Proc) -> None:
        """A dead child of a killed process is a zombie until someone reaps it, and a program that asks
        whether a pid lives (``kill(pid, 0)``: a lock owner's liveness) sees it alive until then: reap it
        here (its parent died first, so it was re-parented to this subreaper), or, where another process
        is its reaper, wait until that one did. Either way before anything else runs: when init got round
        to it was real time, and the next lock holder's decision with it."""
        try:
            os.waitpid(proc.pid, 0)
            return
        except ChildProcessError:
            pass
        deadline = time.monotonic() + self.stuck_s
        while proc.pidfd >= 0:
            try:
                signal.pidfd_send_signal(proc.pidfd, 0)
            except ProcessLookupError:
                return
            if time.monotonic() > deadline:
                raise SchedulerStuck(f"{proc.name} died but was not reaped in {self.stuck_s:g} s")
            time.sleep(0.0005)

    def _parent(self, name: str) -> Proc | None:
        """The process that started process ``name`` (``w1.0/f2`` -> ``w1.0``), if it is one of ours."""
        return self.by_name.get(name.rsplit("/", 1)[0]) if "/" in name else None

    def root(self, proc: Proc) -> Proc:
        """The process the harness started that ``proc`` descends from (a kill ends its whole tree)."""
        top = self.by_name.get(proc.name.split("/", 1)[0])
        return top if top is not None and not top.gone else proc

    def _reap(self, proc: Proc) -> None:
        if proc.flight is not None:
            self._drop_flight(proc.flight)
        if proc.popen is not None:
            proc.popen.wait()
        proc.gone = True
        self._moved = True
        parent = self._parent(proc.name)
        if parent is not None and not parent.gone:
            self._await_sigchld(parent)
        for t in parent.threads if parent is not None else ():
            self._drop_probe(t)   # its SIGCHLD is pending: the handler (libuv's signal pipe) runs once granted
        for t in proc.threads:
            self._thread_gone(t)
        if proc.pidfd >= 0:
            self._park(proc.pidfd)
            os.close(proc.pidfd)
            proc.pidfd = -1
        if proc.control:
            self._drain_control(proc)
            self.replies.append((proc, None))   # None: it is gone (killed, crashed, or done)
            self._sel.unregister(proc.popen.stdout)
            proc.popen.stdout.close()
            try:
                proc.popen.stdin.close()
            except BrokenPipeError:
                pass
        if self.running and self.running[0] == proc.pid:
            self.running = None
        self._release_blocked()

    @staticmethod
    def _await_sigchld(parent: Proc) -> None:
        """A child's pidfd turns readable in the kernel's last step of its exit, and its SIGCHLD is sent in
        that step just after: a parent that catches it (libuv's handler, whose pipe wakes Node's loop) must
        have it pending before a thread of it is granted, or that thread's slice sees the child's end or
        not by how fast the kernel got there (the one cause found that fits a Wowbagger trace at load 8
        that once parted by 1 us of an epoll deadline). Its stopped threads block every signal, so once
        sent it stays pending until the next of them is granted. Wall time bounds the wait (a parent
        that does not block it took it)."""
        deadline = time.monotonic() + SIGCHLD_WAIT_S
        while True:
            status = _proc_status(parent.pid)
            if status is None:
                return
            caught, shared, own = (int(status.get(k, "0"), 16) & SIGCHLD_BIT for k in ("SigCgt", "ShdPnd", "SigPnd"))
            if not caught or shared or own:
                return
            if time.monotonic() > deadline:
                return
            time.sleep(0.0001)

    def _thread_gone(self, t: Thread) -> None:
        if t.state == "gone":
            return
        t.state = "gone"
        self._drop_probe(t)
        try:
            self.threads.remove(t)  # (a long run starts many worker incarnations: keep the scans short)
        except ValueError:          # a flight's thread: not the schedule's yet
            pass
        try:
            self._sel.unregister(t.conn)
        except (KeyError, ValueError):
            pass
        t.conn.close()
