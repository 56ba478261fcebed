"""The deterministic scheduler: one thread of the harness decides which process thread runs next.

Every process it starts runs under the ``sched.c`` preload shim: each of its
threads stops at every scheduling point (a store-path open, a read/write/
fsync/lock/close of a store fd, a rename/link/unlink/mkdir of a store path, a
sleep) and waits here for a grant. Exactly one thread runs at a time (the
*running* one: granted, or a process just started, or a worker just handed an
op); the loop waits until it stops again (its next point, its reply on the
control pipe, or its death) before it picks the next one. So, for the same
seed and the same program bytes, the order of every point is the same, and so
is everything that depends only on that order.

One exception: an exec'd Node program's start (and its git's) runs as a
*flight* beside the one running thread, its own threads one at a time, until
it first stops where another process could see it; it joins once the
schedule's virtual clock reaches its own (``flights.py``, the mixin below).

Who goes next follows PCT (Burckhardt et al., ASPLOS 2010): each thread gets
a random priority from the seed when it first appears; at ``depth - 1`` change
points, drawn from the seed over ``expected_points`` steps, the thread chosen
at that step drops below every other; the enabled thread of highest priority
runs. A bug needing ``depth`` ordering constraints is then hit with
probability at least 1 / (threads * expected_points ** (depth - 1)) per run
(PCT's bound, for the change points alone: the release yields below reorder
priorities too, and are measured, not proved). The bound needs
``expected_points`` at least the run's own count, which no one number is for
stores whose grants per second differ tenfold; so with ``horizon_ns`` the change
points are virtual instants instead, drawn over ``[1, horizon_ns]``, each
taken by the first step that starts at or after it. Every grant moves ``vt``
by at least ``step_ns``, so a given step takes a given change point with
chance at least ``step_ns / horizon_ns``: the same bound with ``expected_points``
= ``horizon_ns / step_ns``, whatever the run's pace, for the steps within the
horizon.

Those change points are spread over every point, and a check-then-act bug's
gap (between the check's commit and the act's write) is a few points among
tens of thousands: PCT alone did not land in it (docs/deterministic.md). So,
with ``depth`` 2 or more, a thread that let a lock go or closed a store fd
(``RELEASES``: the end of a transaction) and stopped at its next point yields
there with chance ``release_yield`` (drawn from the seed) whenever another
thread is enabled: its priority drops below every other, as at a change point.
Those *release steps* are where a rival's whole call can run in the gap; a
bug that needs one preemption there is hit with chance ``release_yield`` at
each such step.

Virtual time (``vt``, ns from 0) advances by ``step_ns`` per grant, by 1 us
per clock read of the running thread, and jumps to the earliest sleeper's
deadline when no thread can run; a sleeping thread is enabled once ``vt``
reaches its deadline. No wall-clock time decides anything; wall time only
bounds how long a running thread may go without reaching a point
(``SchedulerStuck``).

Exact faults (``FaultRule``, ``rules.py``): at the n-th point matching (process, call,
syscall index), with the point as evidence: kill the process (a SIGKILL while
the thread waits at the point, before its call; reaped before anything else
runs); fail the call with an errno (fsync EIO); freeze the thread there for a
virtual duration while the others run (it keeps its locks); let the call go on
and mark its reply as lost (the caller drops it); cut the power (every process
killed and reaped, then the rule's ``then`` undoes what no fsync covers); or
step a clock.

Children (a controlled process runs ``git``, a per-call program, ...; their
records and lives: ``processes.py``, the mixin below): a
forked or exec'd child is its own process ``<parent>/f<N>`` that says hello
at once; the parent's points say how many children it started, and the
scheduler waits for their hellos before it decides anything, so the set of
threads it chooses from is the same in every run. A wait for another process
(waitpid, a pipe, poll/select) is a ``waiting`` stop: the thread is enabled
again once another thread got somewhere (a point, a hello, an exit, a reply)
or its virtual deadline passed, and then retries without blocking.
"""

from __future__ import annotations

import errno as errno_mod
import hashlib
import os
import random
import re
import select
import shutil
import socket
import subprocess
import tempfile
import time

from chaos.deterministic.flights import Flights
from chaos.deterministic.handoffs import HandOffs
from chaos.deterministic.poller import ReadPoller
from chaos.deterministic.processes import Proc, Processes, SchedulerStuck, Thread, _kernel_state
from chaos.deterministic.rules import FaultRule
from chaos.faults.procs import pidfd_getfd, set_child_subreaper
from chaos.store import private_dir

#: calls whose argument the trace leaves out: a byte count (a lock file's content names its owner's kernel
#: pid, gitjournal's journal the store's path) or a kill's target (a kernel pid)
UNTRACED_ARG = frozenset({"write", "read", "ftruncate", "kill"})
#: getpid() in a Node program: VPID_BASE + n for the n-th process granted (sched.c, "pids"); above
#: PID_MAX_LIMIT, so never a kernel pid
VPID_BASE = 4_194_304
#: a number in a path that may be a pid (a program's temp and lock files carry theirs)
PID_IN_PATH = re.compile(r"(?<![0-9A-Za-z])[1-9][0-9]{1,6}(?![0-9A-Za-z])")
#: a path without one has no pid to name (most store paths)
DIGIT = re.compile(r"[0-9]")
#: a UUID's groups are hyphen-delimited and may be all digits ("...-48a3-8026-..."): never a pid, whatever pids run
UUID_IN_PATH = re.compile(r"([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})")
#: of the processes that read a file outside the shim's control (``uncontrolled_files``), how many the
#: summary names
UNCONTROLLED_NAMES = 5
#: what the shim reports reading outside its control (sched.c, "UNCONTROLLED_FILES", ``other_clock_read``), by
#: class: its key in the summary
UNCONTROLLED_KEYS = {"clock": "clock_files", "machine": "machine_files", "cputime": "cpu_clocks",
                     "timer": "timers"}
#: calls after which a thread that reported "blocked" may succeed: they (or an exit) release locks
RELEASES = frozenset({"unlock", "close"})
#: the chance that a thread stopped right after a release yields to the others there (``release_yield``)
RELEASE_YIELD = 0.125
#: waits only a thread of the waiter's own process can end (its mutex, private semaphore, condition,
#: rwlock, private futex, joined thread): retried after a slice that got somewhere in that process, not in
#: any (sched.c)
LOCAL_WAITS = frozenset({"mutex", "sem", "cond", "join", "rwlock", "futex"})


class Scheduler(Processes, Flights, HandOffs):
    Stuck = SchedulerStuck

    def __init__(self, seed: int, *, prefixes: list[str], depth: int = 3, expected_points: int = 1000,
                 step_ns: int = 10_000, faults: list[FaultRule] | None = None, stuck_s: float = 60.0,
                 log_dir: str | None = None, reads: bool = False, send_ns: int = 0, sock_dir: str | None = None,
                 release_yield: float | None = None, horizon_ns: int | None = None):
        if depth < 1 or expected_points < 1 or (horizon_ns is not None and horizon_ns < 1):
            raise ValueError("depth, expected_points and horizon_ns must be at least 1")
        self.seed, self.depth, self.expected_points, self.step_ns = seed, depth, expected_points, step_ns
        self.rng = random.Random(f"pct:{seed}")
        self.horizon_ns = horizon_ns
        if horizon_ns is None:   # change points at step counts
            self.change_ns: list[int] = []
            self.change_points = sorted(self.rng.sample(range(1, expected_points + 1), min(depth - 1, expected_points)))
        else:                    # at virtual instants; change_points: the steps that took them
            self.change_ns = sorted(self.rng.sample(range(1, horizon_ns + 1), min(depth - 1, horizon_ns)))
            self.change_points = []
            self.expected_points = max(1, horizon_ns // step_ns)   # the k of PCT's bound
        # depth 1 is one priority order, no change at all (chaos explore's baseline)
        self.release_yield = (RELEASE_YIELD if depth > 1 else 0.0) if release_yield is None else release_yield
        self.yield_rng = random.Random(f"pct-release:{seed}")   # its own stream: the threads' ranks stay as drawn
        self.release_yields = 0         # release steps at which the released thread yielded
        self.lowest = 0.0               # the priority the last yield gave: the next goes below it
        self.prefixes = [os.path.abspath(p) for p in prefixes]
        self.faults = list(faults or [])
        #: one call's own faults (a racer's freeze or kill inside it: ``chaos.deterministic.callfaults``),
        #: armed and disarmed by the run per call; not the run's requested faults (``summary``)
        self.call_faults: list[FaultRule] = []
        self.stuck_s = stuck_s
        self.log_dir = log_dir
        self.reads = reads              # read/pread of store fds are points too
        self.send_ns = send_ns          # what handing a controlled process a line costs in virtual time
        self.vt = 0
        self.clock_offsets: dict[str, int] = {}   # process-name prefix -> wall-clock offset (ns): clock faults
        self.steps = 0
        # flights (flights.py): a program's start run beside the schedule, joining it by virtual time
        self.flights: list = []
        self.flights_begun = 0
        self.flight_points = 0
        self.handoffs = 0          # grants a thread's stop gave another thread of its process (``_hand``)
        self._subject = None       # the thread whose slice ``_settle`` closes (the last one handed the turn)
        self.calls_begun = 0            # ops handed to controlled processes (``begin_call``)
        self.trace: list[str] = []
        self.notes: list[str] = []
        self.replies: list[tuple[Proc, bytes]] = []
        self.handed_back = False   # ``hand_back``: the last ``run_until`` returned for its caller's sake
        self.threads: list[Thread] = []
        self.procs: dict[int, Proc] = {}
        self.by_name: dict[str, Proc] = {}
        self.pid_names: dict[int, str] = {}   # every pid a controlled process had -> its logical name
        self.vpids: dict[int, Proc] = {}      # virtual pid -> its process (a gone one stays: it answers ESRCH)
        # a waiting thread may retry once another thread's slice got somewhere: ``epoch`` counts the slices
        # that did (a point, a hello, an exit, a reply), ``_moved`` says the current one did; a local wait
        # (``LOCAL_WAITS``) retries once its process's ``wakes`` moved (``_woken``: in this slice), or, when
        # nothing else can run, by ``epoch`` like the others
        self.epoch = 0
        self._moved = False
        self._woken: dict[int, tuple[Proc, set | None]] = {}   # id(proc) -> (proc, its woken slots; None: all)
        self.running: tuple[int, int | None] | None = None   # (pid, tid) of the one thread that may run
        # (pid, None): that thread's connection closed (an exit or an exec): its process runs until it is
        # gone or says hello again
        self._awaiting: set[str] = set()   # processes whose children's hellos are still to come
        # the socket in sock_dir (a run's tmp/, swept after a killed run) when its path fits a sun_path, else
        # in a directory of the temp dir named by this pid (swept by the next scheduler once this pid is gone)
        usable = sock_dir is not None and len(os.path.abspath(sock_dir)) < 80   # + "/chaos-sched-XXXXXXXX/s" < 108
        self._dir = (tempfile.mkdtemp(prefix="chaos-sched-", dir=sock_dir) if usable
                     else private_dir("chaos-sched-"))
        self.sock_path = os.path.join(self._dir, "s")
        set_child_subreaper()   # a killed worker's children are re-parented here, not to init (``_wait_reaped``)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.sock_path)
        self._listener.listen(256)
        self._sel = ReadPoller()
        self._sel.register(self._listener, ("accept", None))

    # ------------------------------------------------------------------ the loop

    def _settle(self, subject: Thread | None = None) -> None:
        """Wait until the running thread stops (a point, a control reply, its exit), then close the slice:
        if it got somewhere, every waiting thread may retry, but not ``subject`` (the thread granted) if it
        ended the slice waiting: nothing else ran since it looked. Decided per slice, not per message, so
        the order messages arrive in within a slice changes nothing."""
        self._subject = subject
        deadline = time.monotonic() + self.stuck_s
        while self.running is not None or self._unannounced():
            left = deadline - time.monotonic()
            if left <= 0:
                if self.running is None:
                    raise SchedulerStuck(f"{self._unannounced()} started children that never said hello "
                                         f"in {self.stuck_s:g} s (a program the shim does not load into?)")
                t = next((t for t in self.threads if (t.pid, t.tid) == self.running), None)
                who = f"{t.name} (granted {t.call} #{t.seq}{' ' + t.path if t.path else ''})" if t else \
                    f"pid {self.running[0]} tid {self.running[1]}"
                raise SchedulerStuck(f"{who} ran {self.stuck_s:g} s without reaching a scheduling point "
                                     f"({_kernel_state(self.running[0])}); the others: {self.states()}")
            self._dispatch(min(left, 1.0))
        self._end_slice(self._subject)

    def _dispatch(self, timeout: float) -> None:
        """Handle what arrived within ``timeout``: an event of this batch may be for a file an earlier one
        closed (a process that a kill point's wait took as gone had its connections closed): only
        still-registered ones."""
        for key in self._sel.select(timeout):
            if self._sel.current(key):
                self._event(*key.data, key.fileobj)

    def _end_slice(self, subject: Thread | None, lane=None) -> None:
        """``lane``: the schedule (None) or a flight, whose slice this was."""
        lane = lane or self
        if lane._moved:
            lane.epoch += 1
            lane._moved = False
        for proc, slots in lane._woken.values():
            if slots is None:
                proc.wakes_all += 1
            for slot in slots or ():
                proc.wakes[slot] = proc.wakes.get(slot, 0) + 1
        lane._woken.clear()
        if subject is not None and subject.state == "waiting":
            subject.since, subject.since_wakes = lane.epoch, self._wakes_of(subject)

    @staticmethod
    def _wakes_of(t: Thread) -> tuple[int, int]:
        return t.proc.wakes.get(t.slot, 0), t.proc.wakes_all

    def _wake(self, proc: Proc, slots: str = "*") -> None:
        """This slice may have ended local waits in ``proc``: on those slots ("3,17"), or any ("*")."""
        lane = self._lane(proc)
        lane._moved = True
        _, seen = lane._woken.get(id(proc), (proc, set()))
        if slots == "*" or seen is None:
            lane._woken[id(proc)] = (proc, None)
        else:
            lane._woken[id(proc)] = (proc, seen | {int(x) for x in slots.split(",")})

    def _lane(self, proc: Proc):
        """Whose slices ``proc``'s count: its flight's while it flies, else the schedule's."""
        return proc.flight or self

    def _unannounced(self) -> str | None:
        """A live process whose children have not all said hello yet (its name)."""
        if not self._awaiting:
            return None
        for name in self._awaiting:
            proc = self.by_name.get(name)
            if proc is not None and not proc.gone and (proc.spawned > len(proc.children)
                                                       or proc.threads_made > proc.made_hellos):
                return name
        self._awaiting.clear()
        return None

    def _await_thread_exit(self, t: Thread) -> None:
        """A thread closes its connection before it is gone (a joiner's try and the process's thread
        list see it later): wait until the kernel has let it go, so what the next thread sees does not
        depend on how far it got. Wall time only bounds the wait."""
        if t.tid == t.pid or t.proc.gone:
            return
        deadline = time.monotonic() + self.stuck_s
        while os.path.exists(f"/proc/{t.pid}/task/{t.tid}"):
            if time.monotonic() > deadline:
                raise SchedulerStuck(f"{t.name} closed its connection but did not exit in {self.stuck_s:g} s")
            time.sleep(0.0005)

    def _event(self, kind: str, obj, fileobj) -> None:
        if kind == "accept":
            conn, _ = self._listener.accept()
            self._sel.register(conn, ("hello", conn))
        elif kind == "hello":
            line = self._line_of(fileobj, None)
            if line is not None:
                self._hello(fileobj, line)
        elif kind == "thread":
            if obj.proc.flight is not None and obj in obj.proc.flight.threads:
                self._flight_data(obj, fileobj)
                return
            line = self._line_of(fileobj, obj)
            if line is not None:
                self._take(obj, line)
        elif kind == "control":
            self._drain_control(obj)
        elif kind == "exit":
            if obj.flight is not None:   # it died in flight: taken when it joins (or dropped with its tree)
                self._land(obj.flight)
            else:
                self._reap(obj)

    def _line_of(self, conn: socket.socket, thread: Thread | None) -> str | None:
        data = self._recv(conn, 65536)
        if not data:
            if thread is not None:
                self._close_of(thread)
            else:
                self._sel.unregister(conn)
                conn.close()
            return None
        buf = (thread.buf if thread else b"") + data
        if b"\n" not in buf:
            if thread is not None:
                thread.buf = buf
                return None
            buf += self._recv_line(conn)
        line, _, rest = buf.partition(b"\n")
        if thread is not None:
            thread.buf = rest
        return line.decode("utf-8", "replace")

    def _thread_closed(self, t: Thread) -> None:
        """Its connection closed: it is gone once the kernel let it go, and a join on it may end."""
        self._thread_gone(t)
        self._await_thread_exit(t)
        if t.proc.flight is None:   # (else an image the process left by an exec: nothing to join)
            self._wake(t.proc)

    @staticmethod
    def _recv(conn: socket.socket, size: int) -> bytes:
        """What a process sent, b"" once it closed: a process that died with a grant of ours unread in its
        socket resets the connection instead of closing it (seen once in a 10-worker Wowbagger run)."""
        try:
            return conn.recv(size)
        except ConnectionResetError:
            return b""

    @classmethod
    def _recv_line(cls, conn: socket.socket) -> bytes:
        out = b""
        while not out.endswith(b"\n"):
            chunk = cls._recv(conn, 4096)
            if not chunk:
                break
            out += chunk
        return out

    def _hello(self, conn: socket.socket, line: str) -> None:
        _, name, pid, tid, *flags = line.split(" ")
        pid, tid = int(pid), int(tid)
        made, fly = "made" in flags, "fly" in flags
        pname = name.rsplit("/", 1)[0]
        parent = self._parent(pname)
        proc = self.procs.get(pid)
        flight = parent.flight if parent is not None else None
        if flight is None and proc is not None and not proc.gone and not made:
            flight = proc.flight
        if flight is not None:   # a flight's child, or its process's new image: taken when it joins
            self._park(conn)
            flight.hellos.append((conn, line))
            return
        if proc is None or proc.gone:
            # a new process; or the kernel reused a gone one's pid (pid_max is 32768 here, and a default
            # Wowbagger run starts more processes and threads than that): its own Proc, not the dead one's
            # (whose exit was long seen: the new one's exit and an exec's hello would go unwaited for)
            proc = self._adopt(pname, pid, None)
        if self.running == (pid, None):
            self.running = (pid, tid)          # an exec'd image: it stops here, at its start
        if parent is not None:
            parent.children.add(pname)
        if made:
            proc.made_hellos += 1
        # what it started before this hello (a C program forks before its first point): waited for, as
        # after a point's message, so no decision is made while only some of those hellos have come
        spawned = next((f[len("spawned="):] for f in flags if f.startswith("spawned=")), "0.0")
        forks, _, threads = spawned.partition(".")
        if proc.flight is None:   # (a flight's are its own: ``_flight_turn``)
            self._started(proc, int(forks), int(threads or 0))
        # a child's thread, or a second thread: a priority of its own name, whatever order the hellos came in
        first = "/" not in pname and name.endswith("/t0")
        rank = self.rng.random() if first else random.Random(f"{self.seed}:{name}").random()
        t = Thread(name, pid, tid, conn, proc, self.depth + rank, local_vt=proc.flight.vt if proc.flight else self.vt)
        proc.threads.append(t)
        self._sel.modify(conn, ("thread", t))
        if proc.flight is not None:            # a thread its flight made
            self._flight_hello(proc.flight, t)
            return
        self._moved = True
        if fly and not made:
            if self.running is not None and self.running[0] == pid:
                self.running = None            # the schedule's slice (its exec) is over; its start flies
            self._take_off(proc, t)
            return
        self.threads.append(t)
        self._stopped(t)

    def _message(self, t: Thread, line: str) -> None:
        parts = line.split(" ", 6)
        if parts[0] != "W" or int(parts[1]) != t.seq:
            self._drop_probe(t)       # not the wait it had: its fds may be other files now
        if parts[0] == "P":
            _, seq, call, arg, local_vt, spawned, path = parts
            t.seq, t.call, t.arg, t.local_vt = int(seq), call, int(arg), int(local_vt)
            t.path = self._relative(path)
            if call == "kill":
                self._await_victims(t.arg)
            if call == "sleep":
                t.state, t.wake_at = "sleeping", max(self.vt, t.local_vt) + t.arg
            else:
                t.state = "ready"
            self._lane(t.proc)._moved = True
        elif parts[0] == "B":
            t.local_vt, spawned = int(parts[2]), parts[3]
            t.call, t.state = "retry", "blocked"
        elif parts[0] == "W":   # W seq local_vt spawned deadline what [>N: the thread it hands the turn to]
            _, seq, local_vt, spawned, wake, what = parts[:6]
            if int(seq) != t.seq:   # a new wait: the thread ran since its last stop (a retry did nothing)
                self._lane(t.proc)._moved = True
            what, _, slot = what.partition(":")
            what, _, fds = what.partition("@")
            t.seq, t.local_vt, t.call, t.arg, t.path = int(seq), int(local_vt), what, int(wake), ""
            t.slot = int(slot) if slot else -1
            if fds and t.probe is None:
                self._probe(t, fds)
            t.state, t.wake_at = "waiting", int(wake)
        else:
            raise RuntimeError(f"{t.name}: bad message {line!r}")
        forks, made, woke = (spawned.split(".") + ["0", "-"])[:3]
        if woke != "-":
            self._wake(t.proc, woke)
        self._started(t.proc, int(forks), int(made or 0))
        self._stopped(t)
        if parts[0] == "W" and len(parts) > 6 and parts[6].startswith(">"):
            index, _, vt = parts[6][1:].partition("@")
            self._hand(t, int(index), int(vt))

    def _started(self, proc: Proc, forks: int, threads: int) -> None:
        """``proc`` says it has started ``forks`` children and ``threads`` threads so far: those not known yet
        are waited for (their hellos) before anything is decided."""
        if forks > proc.spawned or threads > proc.threads_made:
            proc.spawned, proc.threads_made = max(proc.spawned, forks), max(proc.threads_made, threads)
            if proc.flight is None:   # (a flight waits for its own threads' hellos: ``_flight_turn``)
                self._awaiting.add(proc.name)

    def _close_of(self, thread: Thread) -> None:
        self._thread_closed(thread)
        if any(t is not thread and t.tid == thread.tid and t.state != "gone" for t in thread.proc.threads):
            pass   # an exec'd image's old connection, read after its new image said hello (same pid and tid)
        elif self.running == (thread.pid, thread.tid):
            last = all(x.state == "gone" for x in thread.proc.threads)
            self.running = (thread.pid, None) if last and not thread.proc.gone else None
        self._release_blocked()

    def _stopped(self, t: Thread) -> None:
        if t.proc.flight is not None:
            return
        if self.running == (t.pid, t.tid):
            self.running = None
        elif self.running is not None and t.call != "start":
            # a thread reached a point while another ran: concurrency the shim did not serialize
            self.notes.append(f"{t.name} reached {t.call} #{t.seq} while another thread ran")

    def _drain_control(self, proc: Proc) -> None:
        try:
            data = proc.popen.stdout.read()
        except (BlockingIOError, ValueError):
            data = None
        if data:
            proc.out_buf += data
        while b"\n" in proc.out_buf:
            line, _, proc.out_buf = proc.out_buf.partition(b"\n")
            self.replies.append((proc, line))
            proc.serving = False
            for t in proc.threads:     # back in its control read: not at a point, not runnable
                if t.state == "running":
                    t.state = "idle"
            if self.running == (proc.pid, proc.pid):
                self.running = None

    def _relative(self, path: str) -> str:
        if path == "-":
            return ""
        for p in self.prefixes:
            if path == p or path.startswith(p + "/"):
                path = path[len(p):].lstrip("/") or "."
                break
        if not self.pid_names or not DIGIT.search(path):   # (most store paths: no pid to name)
            return path
        parts = UUID_IN_PATH.split(path)       # odd indexes: the UUIDs, left as they are
        return "".join(p if i % 2 else PID_IN_PATH.sub(self._pid_name, p) for i, p in enumerate(parts))

    def _pid_name(self, m: re.Match) -> str:
        """A controlled process's pid in a path (a lock's temp file) by its logical name: pids differ between runs."""
        name = self.pid_names.get(int(m.group(0)))
        return f"{{pid:{name}}}" if name else m.group(0)

    def _release_blocked(self) -> None:
        for t in self.threads:
            if t.state == "blocked":
                t.state = "ready"

    # ------------------------------------------------------------------ choosing

    def enabled(self, idle: bool = False) -> list[Thread]:
        """The threads that may be granted now. ``idle``: nothing else can run, now or later (no sleeper,
        no deadline): every wait that has not tried since something last ran may try again, since a wake
        the shim did not see (an object changed without an interposed call) must cost time, not a hang."""
        if idle:
            return [t for t in self.threads if t.state == "waiting" and t.since < self.epoch
                    and t.proc.held_until <= self.vt]
        return self._enabled_of(self.threads, self.vt, self.epoch)

    def _enabled_of(self, threads: list, vt: int, epoch: int) -> list[Thread]:
        """Of ``threads``, those that may be granted at virtual time ``vt`` after ``epoch`` slices that got
        somewhere (the schedule's, or a flight's)."""
        return [t for t in threads if t.proc.held_until <= vt and (
                t.state == "ready" or (t.state == "sleeping" and t.wake_at <= vt)
                or (t.state == "waiting" and (0 <= t.wake_at <= vt or (
                    t.since_wakes != self._wakes_of(t) if t.call in LOCAL_WAITS
                    else t.since < epoch and (t.probe is None or self._probe_ready(t, epoch))))))]

    # ------------------------------------------------------------------ waits for fds

    def _probe(self, t: Thread, fds: str) -> None:
        """Duplicate the fds a wait names ("fd/events,...") so its readiness can be seen from here."""
        poll = select.poll()
        for item in fds.split(","):
            fd, _, events = item.partition("/")
            dup = pidfd_getfd(t.proc.pidfd, int(fd)) if t.proc.pidfd >= 0 else -1
            if dup < 0:   # refused (ptrace rules) or gone: this wait retries by epoch
                self._drop_probe(t)
                return
            t.probe_fds.append(dup)
            poll.register(dup, int(events))
        t.probe, t.probe_epoch = poll, -1

    @staticmethod
    def _probe_ready(t: Thread, epoch: int) -> bool:
        """Whether one of the wait's fds is ready: what the thread's own try would see, since nothing runs
        between this look and its grant; looked at again only once something ran (``epoch`` moved)."""
        if t.probe_epoch != epoch:
            t.probe_ready, t.probe_epoch = bool(t.probe.poll(0)), epoch
        return t.probe_ready

    @staticmethod
    def _drop_probe(t: Thread) -> None:
        for fd in t.probe_fds:
            os.close(fd)
        t.probe, t.probe_fds = None, []

    def states(self, limit: int = 12) -> str:
        """The threads that are neither idle nor gone and what each stopped at (a deadlock's description)."""
        rows = [f"{t.name} {t.state} at {t.call}{' ' + t.path if t.path else ''}" for t in self.threads
                if t.state not in ("idle", "gone")]
        rows += [f"{f.proc.name} in flight ({f.grants} grants, at {f.vt} ns{', landed' if f.landed else ''})"
                 for f in self.flights]
        more = f"; and {len(rows) - limit} more" if len(rows) > limit else ""
        # a live process none of whose threads is at a point: what the kernel says it is doing
        silent = [f"{p.name} (pid {p.pid}) has no thread at a point: {_kernel_state(p.pid)}" for p in self.procs.values()
                  if not p.gone and not p.control and all(t.state == "gone" for t in p.threads)]
        return "; ".join(rows[:limit] + silent[:limit]) + more or "no thread but idle ones"

    def next_wake(self) -> int | None:
        wakes = [max(t.wake_at, t.proc.held_until) for t in self.threads
                 if t.state == "sleeping" or (t.state == "waiting" and t.wake_at >= 0)]
        return min(wakes) if wakes else None

    def step(self, idle: bool = False) -> bool:
        """Grant one enabled thread (PCT) and wait until it stops. False when none is enabled."""
        assert self.running is None
        if self.flights:
            self._sync_flights()
        ready = self.enabled(idle)
        if not ready:
            return False
        self.steps += 1
        chosen = max(ready, key=lambda t: t.priority)
        change = self._change_point()
        if change is not None:
            chosen.priority = self.depth - 1 - change
            chosen = max(ready, key=lambda t: t.priority)
        elif chosen.released and len(ready) > 1 and self.yield_rng.random() < self.release_yield:
            self.lowest = min(self.lowest, *(t.priority for t in self.threads)) - 1
            chosen.priority = self.lowest        # below every thread, a change point's drop included
            self.release_yields += 1
            self.trace.append(f"{self.vt} {chosen.name} YIELD")
            chosen = max(ready, key=lambda t: t.priority)
        self._grant(chosen)
        return True

    def _change_point(self) -> int | None:
        """The index of the change point this step takes, or None (of several instants passed at once,
        the last: the lowest priority)."""
        if self.horizon_ns is None:
            return self.change_points.index(self.steps) if self.steps in self.change_points else None
        taken = len(self.change_points)
        due = taken
        while due < len(self.change_ns) and self.change_ns[due] <= self.vt:
            due += 1
        if due == taken:
            return None
        self.change_points += [self.steps] * (due - taken)
        return due - 1

    def _grant(self, t: Thread) -> None:
        due = t.wake_at if t.state == "sleeping" or (t.state == "waiting" and 0 <= t.wake_at <= self.vt) else 0
        self.vt = max(self.vt, t.local_vt, due) + self.step_ns
        err = 0
        rule = None if t.held else self._rule_at(t)
        t.held = False
        self._trace_grant(t)
        if rule is not None:
            rule.evidence = {"process": t.proc.name, "thread": t.name, "call": t.call, "index": t.seq,
                             "path": t.path, "vt_ns": self.vt, "action": rule.action}
            self.trace.append(f"{self.vt} {t.name} FAULT {rule.action}")
            if rule.action == "kill":
                self.kill(self.root(t.proc))
                return
            if rule.action == "power-loss":
                self._power_loss(rule)
                return
            if rule.action == "freeze":
                rule.evidence.update(hold_ns=rule.hold_ns, resume_vt_ns=self.vt + rule.hold_ns)
                t.state, t.wake_at, t.held = "sleeping", self.vt + rule.hold_ns, True
                # the process's other threads wait too: run on around a half-done step, a Node program's
                # main thread spun without a point (a thread-level hold, two soak runs ``unknown``)
                t.proc.held_until = t.wake_at
                rule.held = t
                if rule.then is not None:
                    rule.then()
                return
            if rule.action == "clock":
                self.clock_offsets.update(rule.offsets or {})
                rule.evidence["offsets_ns"] = dict(rule.offsets or {})
            elif rule.action != "lost-reply":
                err = getattr(errno_mod, rule.action)
        call = t.call
        t.state = "running"
        t.released = call in RELEASES
        self.running = (t.pid, t.tid)
        value = self._answer(t) if err == 0 else 0
        try:
            hand = self.step_ns if self._may_hand(t.proc) else 0
            t.conn.sendall(f"G {self.vt} {err} {self.clock_offset(t.proc.name)} {value} {hand}\n".encode())
        except OSError:   # it died while stopped: its exit event says so
            pass
        self._settle(t)
        if call in RELEASES:
            self._release_blocked()

    def _rule_at(self, t: Thread) -> FaultRule | None:
        """The first armed rule whose point this grant is (every rule asked in order until one is: each
        counts its matches)."""
        for rules in (self.faults, self.call_faults):
            for r in rules:
                if r.matches(t, t.call, t.seq, self.vt):
                    return r
        return None

    def _trace_grant(self, t: Thread) -> None:
        """The trace's line of a grant to ``t`` at the schedule's clock (``_grant``'s, and a hand-off's)."""
        arg = "-" if t.call in UNTRACED_ARG else t.arg
        self.trace.append(f"{self.vt} {t.name} {t.call} {t.seq} {arg} {t.path}")

    def _answer(self, t: Thread) -> int:
        """What a grant tells the thread besides go: a hello learns its process's virtual pid (numbered
        here, in grant order, so the same in every run; the shim uses it only in a program run with
        ``CHAOS_SCHED_VPIDS=1``); a ``pid`` point (kill() of a virtual pid) the real pid of that process
        while it is not gone, else 0 (ESRCH: an exit is a point of the schedule, and the kernel may have
        given its pid to another process since)."""
        if t.call == "start":
            self._number(t.proc)
            return t.proc.vpid
        if t.call == "pid":
            target = self.vpids.get(t.arg)
            return target.pid if target is not None and not target.gone else 0
        return 0

    def _number(self, proc: Proc) -> None:
        if not proc.vpid:
            proc.vpid = VPID_BASE + len(self.vpids) + 1
            self.vpids[proc.vpid] = proc

    def _power_loss(self, rule: FaultRule) -> None:
        """The power goes off at this point: every process is killed and reaped (in start order),
        then the rule's ``then`` undoes the changes no fsync covers. By name, never pid order: the
        dead processes' replies (``None``) are queued in kill order."""
        live = sorted((p for p in self.procs.values() if not p.gone), key=lambda p: p.name)
        for proc in live:
            self.kill(proc)
        rule.evidence["killed"] = [p.name for p in live]
        if rule.then is not None:
            rule.evidence.update(rule.then())

    def clock_offset(self, name: str) -> int:
        """The wall-clock offset (ns) of process ``name``: the longest matching prefix's."""
        if not self.clock_offsets:
            return 0
        best = ""
        for prefix in self.clock_offsets:
            if name.startswith(prefix) and len(prefix) > len(best):
                best = prefix
        return self.clock_offsets.get(best, 0) if best else 0

    def heal_clocks(self) -> dict[str, int]:
        """Every clock back to the virtual clock (from each thread's next grant); the offsets that were set."""
        healed, self.clock_offsets = self.clock_offsets, {}
        if healed:
            self.trace.append(f"{self.vt} HEAL clock")
        return healed

    def run_until(self, until: int | None) -> list[tuple[Proc, bytes]]:
        """Run the controlled threads until a control reply arrives (returned;
        a reply ``None`` means the process is gone),
        or the virtual clock reaches ``until``, or nothing can run (the clock
        then jumps to ``until``), or ``hand_back`` was called (``handed_back``
        says so). Sleepers' deadlines advance the clock when nothing else can
        run."""
        self.handed_back = False
        while not self.replies and not self.handed_back:
            if until is not None and self.vt >= until:
                break
            if self.step():
                continue
            wake = self.next_wake()
            if self._flights_first(min((x for x in (wake, until) if x is not None), default=None)):
                continue
            if wake is not None and (until is None or wake <= until):
                self.vt = max(self.vt, wake)
                continue
            if self.step(idle=True):
                continue
            if until is not None:
                self.vt = max(self.vt, until)
            break
        out, self.replies = self.replies, []
        return out

    def hand_back(self) -> None:
        """Return from ``run_until`` before the next grant, replies or not: its caller has something to
        send first (a racer's freeze landed: its rival goes now)."""
        self.handed_back = True

    def release_hold(self, rule: FaultRule, at_ns: int) -> None:
        """A freeze that ``rule`` holds ends at virtual time ``at_ns`` (now, if that is past) instead of
        at its ``hold_ns``: a frozen call held until its rival has its reply."""
        t = rule.held
        if t is None or not t.held or t.state != "sleeping":
            return
        t.wake_at = t.proc.held_until = max(self.vt, at_ns)
        rule.evidence.update(hold_ns=t.wake_at - rule.evidence["vt_ns"], resume_vt_ns=t.wake_at)

    def run_all(self) -> list[tuple[Proc, bytes]]:
        """Run until no thread is left that can ever run (every process done);
        returns the control replies that arrived meanwhile."""
        replies = []
        while True:
            replies += self.run_until(None)
            if not self.enabled() and not self.enabled(idle=True) and self.next_wake() is None and not self.flights:
                break
        for proc in list(self.procs.values()):   # past their last point they only exit: reap them
            if proc.popen is not None and not proc.gone and not proc.control:
                try:
                    proc.popen.wait(timeout=self.stuck_s)
                except subprocess.TimeoutExpired:
                    raise SchedulerStuck(f"{proc.name} did not exit {self.stuck_s:g} s after its last point") from None
                self._reap(proc)
        return replies

    # ------------------------------------------------------------------ results

    def digest(self) -> str:
        return hashlib.sha256("\n".join(self.trace).encode()).hexdigest()

    def uncontrolled_files(self) -> dict[str, dict[str, dict]]:
        """What the shim saw read outside its control (sched.c, "UNCONTROLLED_FILES", ``other_clock_read``),
        by class: ``clock`` (the machine's clock read through ``/proc/stat``, ``/proc/uptime``, the RTC),
        ``machine`` (its memory, CPUs, load, kernel settings, cgroup limits), ``cputime`` (a CPU-time
        clock) and ``timer`` (a timer set that fires by the machine's clock); per file, clock or call, how
        many processes read or set it and the first few of them by name. A class none did is absent."""
        try:
            with open(os.path.join(self._dir, "uncontrolled"), "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
        except FileNotFoundError:
            return {}
        readers: dict[str, dict[str, set]] = {}
        for line in lines:
            name, cls, path = (line.split(" ", 2) + ["", ""])[:3]
            if path and cls in UNCONTROLLED_KEYS:
                readers.setdefault(cls, {}).setdefault(path, set()).add(name)
        return {cls: {path: {"processes": len(names), "first": sorted(names)[:UNCONTROLLED_NAMES]}
                      for path, names in sorted(files.items())}
                for cls, files in sorted(readers.items())}

    def summary(self) -> dict:
        read = self.uncontrolled_files()
        return {"seed": self.seed, "depth": self.depth, "points": self.steps + self.handoffs + self.flight_points,
                "handoffs": self.handoffs, "flights": self.flights_begun, "flight_points": self.flight_points,
                "expected_points": self.expected_points, "change_points": self.change_points,
                "horizon_ns": self.horizon_ns, "change_ns": self.change_ns,
                "release_yield": self.release_yield, "release_yields": self.release_yields,
                "virtual_ns": self.vt, "trace_sha256": self.digest(),
                "faults": [r.evidence or {"action": r.action, "missed": True} for r in self.faults],
                "notes": list(self.notes)} | {UNCONTROLLED_KEYS[cls]: what for cls, what in read.items()}

    def close(self) -> None:
        for proc in list(self.procs.values()):
            if proc.popen is not None and not proc.gone:
                self.kill(proc)
        for t in list(self.threads):
            self._thread_gone(t)
        self._sel.close()
        self._listener.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
