"""The deterministic scheduler over real processes (chaos.deterministic): the preload shim stops
every thread at its scheduling points, one runs at a time, PCT picks who from the seed, clocks and
sleeps are virtual, and faults land at a named point. Real SQLite, real files, real processes."""

from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from chaos.deterministic.driver import DeterministicDriver
from chaos.deterministic.processes import SchedulerStuck
from chaos.deterministic.rules import FaultRule
from chaos.deterministic.scheduler import Scheduler
from chaos.history_store import HistoryWriter

SQLITE_CLIENT = """
import sqlite3, sys, time
path, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = sqlite3.connect(path, timeout=30, isolation_level=None)
for i in range(n):
    c.execute("BEGIN IMMEDIATE")
    v = c.execute("SELECT v FROM t").fetchone()[0]
    c.execute("UPDATE t SET v = ?", (v + 1,))
    c.execute("INSERT INTO log VALUES (?, ?, ?)", (who, i, time.time()))
    c.execute("COMMIT")
    time.sleep(0.002)   # think time (virtual): the other process may take the lock meanwhile
"""

# a read-modify-write of a counter file, with or without an exclusive flock around it
COUNTER_CLIENT = """
import fcntl, os, sys
path, n, locked = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
fd = os.open(path, os.O_RDWR)
for _ in range(n):
    if locked:
        fcntl.flock(fd, fcntl.LOCK_EX)
    v = int(os.pread(fd, 32, 0) or b"0")
    os.pwrite(fd, b"%08d" % (v + 1), 0)
    if locked:
        fcntl.flock(fd, fcntl.LOCK_UN)
os.close(fd)
"""


def _script(tmp_path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def _sqlite_run(tmp_path, seed: int, faults=None, keep_trace: bool = False):
    store = Path(tempfile.mkdtemp(dir=tmp_path, prefix="store-"))
    db = str(store / "x.db")
    c = sqlite3.connect(db)
    c.executescript("CREATE TABLE t(v); INSERT INTO t VALUES (0); CREATE TABLE log(who, i, t);")
    c.close()
    client = _script(tmp_path, "sq.py", SQLITE_CLIENT)
    with Scheduler(seed, prefixes=[str(store)], depth=3, expected_points=400, faults=faults) as s:
        for who in ("a", "b"):
            s.spawn(who, [sys.executable, client, db, who, "4"])
        s.run_all()
        summary, codes = s.summary(), {p.name: p.popen.returncode for p in s.procs.values()}
        if keep_trace:
            summary["trace"] = list(s.trace)
    c = sqlite3.connect(db)
    rows = c.execute("SELECT who, i, t FROM log ORDER BY rowid").fetchall()
    counter = c.execute("SELECT v FROM t").fetchone()[0]
    c.close()
    return summary, rows, counter, codes


def test_same_seed_same_trace_and_history_another_seed_another(tmp_path):
    runs = [_sqlite_run(tmp_path, 5) for _ in range(3)]
    assert len({r[0]["trace_sha256"] for r in runs}) == 1
    assert len({tuple(r[1]) for r in runs}) == 1          # the rows, their virtual times included
    summary, rows, counter, _ = runs[0]
    assert counter == 8 and summary["points"] > 100 and summary["notes"] == []
    assert all(t >= 1767225600 and t < 1767225600 + 60 for _, _, t in rows)  # virtual, from 2026-01-01
    other = _sqlite_run(tmp_path, 6)
    assert other[0]["trace_sha256"] != summary["trace_sha256"]


def _inside_write_transactions(trace: list[str]) -> int:
    """Points of one process between another's journal creation and its unlink (inside its write
    transaction: the rollback journal lives exactly that long)."""
    n = 0
    for who, other in (("a", "b"), ("b", "a")):
        inside = False
        for line in trace:
            _, name, call, _, _, path = (line.split(" ", 5) + [""])[:6]
            if name.startswith(who) and call == "creat" and path.endswith("-journal"):
                inside = True
            elif name.startswith(who) and call == "unlink":
                inside = False
            elif inside and name.startswith(other):
                n += 1
    return n


def test_two_processes_interleave_inside_a_transaction_for_some_seed(tmp_path):
    """PCT's change points preempt a process between two syscalls of its write transaction: for
    some seed the other process runs (and meets the held lock) before the first one commits."""
    assert any(_inside_write_transactions(_sqlite_run(tmp_path, seed, keep_trace=True)[0]["trace"])
               for seed in range(1, 13))


def _counter_run(tmp_path, seed: int, locked: bool):
    store = Path(tempfile.mkdtemp(dir=tmp_path, prefix="counter-"))
    counter = store / "counter"
    counter.write_bytes(b"00000000")
    client = _script(tmp_path, "counter.py", COUNTER_CLIENT)
    with Scheduler(seed, prefixes=[str(store)], depth=3, expected_points=60) as s:
        for who in ("a", "b"):
            s.spawn(who, [sys.executable, client, str(counter), "5", "1" if locked else "0"])
        s.run_all()
        trace = list(s.trace)
    return int(counter.read_bytes()), trace


def test_a_lost_update_is_found_by_a_seed_and_replayed_exactly(tmp_path):
    """Unlocked read-modify-write: some seed loses an update, and that seed loses the same one again."""
    finals = {seed: _counter_run(tmp_path, seed, locked=False) for seed in range(1, 9)}
    lossy = [seed for seed, (v, _) in finals.items() if v < 10]
    assert lossy, {s: v for s, (v, _) in finals.items()}
    again = _counter_run(tmp_path, lossy[0], locked=False)
    assert again == finals[lossy[0]]


def test_a_blocking_flock_is_reported_not_blocked_on(tmp_path):
    """With the lock, no seed loses an update; a contender meeting the held lock says 'blocked'
    and is granted again after the holder's unlock (the run would hang otherwise)."""
    for seed in range(1, 7):
        value, trace = _counter_run(tmp_path, seed, locked=True)
        assert value == 10, (seed, value)
    assert any(" retry " in line for seed in range(1, 7) for line in _counter_run(tmp_path, seed, True)[1])


def test_kill_at_a_named_point(tmp_path):
    rule = FaultRule("kill", calls=frozenset({"fdatasync"}), process="b", nth=2)
    summary, rows, counter, codes = _sqlite_run(tmp_path, 3, faults=[rule])
    point = summary["faults"][0]
    assert point["action"] == "kill" and point["process"] == "b" and point["call"] == "fdatasync"
    assert codes["b"] == -9 and codes["a"] == 0
    assert [w for w, _, _ in rows].count("a") == 4 and [w for w, _, _ in rows].count("b") < 4
    again = _sqlite_run(tmp_path, 3, faults=[FaultRule("kill", calls=frozenset({"fdatasync"}), process="b", nth=2)])
    assert again[0]["faults"][0] == point and again[1] == rows


def test_fsync_eio_at_a_named_point(tmp_path):
    rule = FaultRule("EIO", calls=frozenset({"fdatasync", "fsync"}), process="a", nth=3)
    summary, rows, counter, codes = _sqlite_run(tmp_path, 4, faults=[rule])
    point = summary["faults"][0]
    assert point["action"] == "EIO" and point["process"] == "a" and point["call"] in ("fdatasync", "fsync")
    assert codes["a"] != 0 and codes["b"] == 0     # the client met 'disk I/O error' at its commit


def test_sleeps_are_virtual(tmp_path):
    """A one-hour sleep takes no wall time and advances the virtual clock by an hour."""
    client = _script(tmp_path, "sleeper.py", "import time\nt = time.time()\ntime.sleep(3600)\n"
                     "print(round(time.time() - t))\n")
    with Scheduler(1, prefixes=[str(tmp_path)]) as s:
        s.spawn("s", [sys.executable, client], control=True)
        replies = s.run_all()
        assert s.vt >= 3600 * 10**9
    # its line; then its exit (``None``) if the scheduler saw it before it returned, which is real time: a
    # controlled process that exits by itself right after a reply (a run's workers never do: they are
    # killed, and a kill is reaped before anything else runs)
    assert [line for _, line in replies] in ([b"3600"], [b"3600", None])


def test_a_read_of_the_machines_clock_through_a_file_is_reported(tmp_path):
    """/proc/uptime and /proc/stat are the machine's clock, which the shim cannot make virtual: the
    summary names who read which (one line per process and file, however often; a forked child is its
    own process), and a run whose processes read none says nothing."""
    reader = _script(tmp_path, "reader.py", "import os\nfor _ in range(3):\n    open('/proc/uptime').read()\n"
                     "open('/proc/stat').read()\nif os.fork() == 0:\n    open('/proc/uptime').read()\n"
                     "    os._exit(0)\nos.wait()\n")
    quiet = [sys.executable, "-c", "import time; time.time()"]
    with Scheduler(1, prefixes=[str(tmp_path)]) as s:
        s.spawn("a", [sys.executable, reader])
        s.spawn("b", quiet)
        s.run_all()
        assert s.summary()["clock_files"] == {"/proc/stat": {"processes": 1, "first": ["a"]},
                                              "/proc/uptime": {"processes": 2, "first": ["a", "a/f1"]}}
        assert "machine_files" not in s.summary()
        assert len(Path(s.sock_path).with_name("uncontrolled").read_text().splitlines()) == 3
    with Scheduler(1, prefixes=[str(tmp_path)]) as s:
        s.spawn("b", quiet)
        s.run_all()
        assert "clock_files" not in s.summary() and "machine_files" not in s.summary()


#: how a reader opens and closes the file ``f``: with open(), or with glibc's fopen (a C program's stdio), which
#: opens it without a call to open()
OPENS = {"open": "os.close(os.open(f, os.O_RDONLY))",
         "fopen": "libc.fclose(ctypes.c_void_p(libc.fopen(f.encode(), b'r')))"}


@pytest.mark.parametrize("through", list(OPENS))
def test_a_read_of_what_the_machine_has_is_reported(tmp_path, through):
    """Memory, CPUs, load, kernel settings and the cgroup's limits are the machine's, not the run's (Node
    sizes V8's heap from /proc/meminfo and its cgroup's memory limit): the summary names who read which,
    a cgroup's file by its tree (its own path names the session that runs it), and apart from the clock's."""
    cgroup = next((str(p) for p in Path("/sys/fs/cgroup").rglob("memory.*") if p.is_file()), None)
    reader = _script(tmp_path, "reader.py", "import ctypes, os\nlibc = ctypes.CDLL(None)\n"
                     "libc.fopen.restype = ctypes.c_void_p\n"
                     "for f in ('/proc/meminfo', '/proc/meminfo', '/proc/loadavg', '/proc/sys/kernel/pid_max', "
                     f"{cgroup!r}, '/proc/uptime'):\n"
                     f"    if f: {OPENS[through]}\n")
    with Scheduler(1, prefixes=[str(tmp_path)]) as s:
        s.spawn("a", [sys.executable, reader])
        s.run_all()
        summary = s.summary()
    machine = {"/proc/loadavg", "/proc/meminfo", "/proc/sys/"} | ({"/sys/fs/cgroup/"} if cgroup else set())
    assert summary["machine_files"] == {path: {"processes": 1, "first": ["a"]} for path in sorted(machine)}
    assert summary["clock_files"] == {"/proc/uptime": {"processes": 1, "first": ["a"]}}


#: a reader of how long it ran, and what the shim says it read: through clock_gettime, or through getrusage,
#: times and clock(), which glibc serves without a clock_gettime the shim sees
CPU_TIME_READERS = {
    "clock_gettime": ("import time\nfor _ in range(3):\n    time.process_time()\ntime.thread_time()\ntime.monotonic()\n",
                      ("CLOCK_PROCESS_CPUTIME_ID", "CLOCK_THREAD_CPUTIME_ID")),
    "getrusage-times-clock": ("import ctypes, os, resource\nfor _ in range(3):\n    resource.getrusage(resource.RUSAGE_SELF)\n"
                              "    os.times()\n    ctypes.CDLL(None).clock()\n", ("clock()", "getrusage", "times")),
}


TIMERS = """import ctypes, signal
libc = ctypes.CDLL(None, use_errno=True)
for _ in range(2):
    signal.setitimer(signal.ITIMER_REAL, 100); signal.setitimer(signal.ITIMER_REAL, 0)
    signal.alarm(100); signal.alarm(0)
    fd = libc.timerfd_create(1, 0)
    assert fd >= 0 and libc.close(fd) == 0
    timer = ctypes.c_void_p()
    assert libc.timer_create(1, None, ctypes.byref(timer)) == 0 and libc.timer_delete(timer) == 0
"""


def test_a_timer_that_fires_by_the_machines_clock_is_reported():
    """A timerfd, a POSIX timer, setitimer or alarm fires in real time, not the schedule's: setting one is
    said, once per process and kind (in the summary's ``timers``; ``chaos run`` notes it), and the timer
    still works; a process that sets none (or only clears one) says nothing."""
    with tempfile.TemporaryDirectory() as d, Scheduler(1, prefixes=[d]) as s:
        s.spawn("a", [sys.executable, "-c", TIMERS])
        s.spawn("b", [sys.executable, "-c", "import signal; signal.alarm(0); signal.setitimer(signal.ITIMER_REAL, 0)"])
        s.run_all()
        summary = s.summary()
    kinds = ("alarm", "setitimer", "timer_create", "timerfd_create")
    assert summary["timers"] == {kind: {"processes": 1, "first": ["a"]} for kind in kinds}, summary.get("timers")


@pytest.mark.parametrize("through", list(CPU_TIME_READERS))
def test_a_read_of_how_long_a_process_ran_is_reported(tmp_path, through):
    """How long a process or thread ran is not virtual: a read of it is said, once per process and kind
    (clock or call), like a clock file; a process that reads none says nothing."""
    code, kinds = CPU_TIME_READERS[through]
    reader = _script(tmp_path, "reader.py", code)
    with Scheduler(1, prefixes=[str(tmp_path)]) as s:
        s.spawn("a", [sys.executable, reader])
        s.spawn("b", [sys.executable, "-c", "import time; time.time(); time.monotonic()"])
        s.run_all()
        summary = s.summary()
    assert summary["cpu_clocks"] == {kind: {"processes": 1, "first": ["a"]} for kind in kinds}
    assert "clock_files" not in summary


def test_randomness_is_a_stream_of_the_process_name(tmp_path):
    """getrandom (os.urandom, uuid4, random's seed) is seeded from the logical name: the same
    process gives the same bytes in every run, another name other bytes."""
    code = "import os, uuid, random; print(os.urandom(8).hex(), uuid.uuid4(), random.random())"

    def draw(name: str) -> bytes:
        with Scheduler(1, prefixes=[str(tmp_path)]) as s:
            s.spawn(name, [sys.executable, "-c", code], control=True)
            return b"".join(line for _, line in s.run_all() if line)
    first = draw("r")
    assert first and draw("r") == first and draw("q") != first


#: 16 bytes of /dev/urandom read through glibc's stdio (fopen, fread), which opens and reads its file without
#: open() and read(): a C program's way, beside Python's own
STDIO_URANDOM = ("import ctypes\nlibc = ctypes.CDLL(None)\nlibc.fopen.restype = ctypes.c_void_p\n"
                 "f = libc.fopen(b'/dev/urandom', b'rb')\nbuf = ctypes.create_string_buffer(16)\n"
                 "assert libc.fread(buf, 1, 16, ctypes.c_void_p(f)) == 16\nlibc.fclose(ctypes.c_void_p(f))\n"
                 "print(buf.raw.hex())\n")


def test_urandom_read_through_stdio_is_the_same_stream(tmp_path):
    """/dev/urandom opened with fopen is the process's seeded stream as through open(): the same process gives
    the same bytes in every run, another name other bytes (before, its bytes were the kernel's, unreported)."""
    reader = _script(tmp_path, "stdio_random.py", STDIO_URANDOM)

    def draw(name: str) -> bytes:
        with Scheduler(1, prefixes=[str(tmp_path)]) as s:
            s.spawn(name, [sys.executable, reader], control=True)
            return b"".join(line for _, line in s.run_all() if line)
    plain = {subprocess.run([sys.executable, reader], capture_output=True, check=True).stdout for _ in range(2)}
    first = draw("r")
    assert len(first) == 32 and draw("r") == first and draw("q") != first
    assert len(plain) == 2 and first + b"\n" not in plain         # without the scheduler: the kernel's bytes


def test_a_socket_dir_in_the_temp_dir_left_by_a_killed_harness_is_removed_by_the_next(tmp_path):
    """A run whose path is too long for a socket's name listens in the temp dir instead; a harness
    SIGKILLed there never removes it (its cleanup does not run): the next scheduler does, once that
    harness's pid is gone, and never one of a live harness."""
    long_dir = tmp_path / ("d" * 90)
    long_dir.mkdir()
    harness = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from chaos.deterministic.scheduler import Scheduler; "
         f"s = Scheduler(1, prefixes=['/nonexistent'], sock_dir={str(long_dir)!r}); print(s._dir, flush=True); "
         "time.sleep(600)"], stdout=subprocess.PIPE, text=True)
    left = harness.stdout.readline().strip()
    assert os.path.dirname(left) == tempfile.gettempdir() and os.path.basename(left).startswith(
        f"chaos-sched-{harness.pid}-")
    with Scheduler(2, prefixes=["/nonexistent"], sock_dir=str(long_dir)) as alive_then:
        assert os.path.isdir(left)            # its harness lives: kept
        mine = alive_then._dir
    assert not os.path.exists(mine)           # closed: removed
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    assert os.path.isdir(left)                # nothing of its own removed it
    with Scheduler(3, prefixes=["/nonexistent"], sock_dir=str(long_dir)):
        assert not os.path.exists(left)       # the next one did


def test_a_process_that_died_with_a_grant_unread_is_gone_not_a_crash():
    """A unix socket whose peer closed with data of ours unread resets instead of closing (ECONNRESET
    on the next recv): the scheduler reads that as the close it is (a 10-worker Wowbagger run crashed on
    it with a traceback)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.sendall(b"G\n")      # a grant the thread never read
    theirs.close()
    try:
        assert Scheduler._recv(ours, 4096) == b""
        assert Scheduler._recv_line(ours) == b""
    finally:
        ours.close()


def test_an_op_nobody_can_ever_answer_ends_the_run_as_a_deadlock_not_a_hang(tmp_path):
    """A worker handed an op blocks on a pipe no process will ever write (no deadline, nothing else
    to run): the driver's wait for it raises, naming the thread and where it stopped, where before
    the interpreter asked again forever (a 10-worker Wowbagger run spun 39 minutes)."""
    worker = _script(tmp_path, "worker.py", "import os, sys\nr, w = os.pipe()\nprint('ready', flush=True)\n"
                     "sys.stdin.readline()\nos.read(r, 1)\n")
    with Scheduler(1, prefixes=[str(tmp_path)]) as s:
        proc = s.spawn("w0.0", [sys.executable, worker], control=True)
        assert [line for _, line in s.run_until(None)] == [b"ready"]   # in its control read: idle
        history = HistoryWriter(str(tmp_path / "history.jsonl"))
        driver = DeterministicDriver(s, history, {}, str(tmp_path))
        driver.inflight[proc.pid] = {"f": "read", "process": 0}
        s.send(proc, b"{}\n")
        with pytest.raises(SchedulerStuck, match=r"deadlock: 1 op\(s\) in flight .*w0\.0/t0 waiting at read-pipe"):
            driver.wait(None)
        history.close()


PIDS = """
import os, signal, subprocess, sys
store = sys.argv[1]
child = [sys.executable, "-c", "import os, sys; "
         "open(os.path.join(sys.argv[1], 'owner.%d' % os.getpid()), 'w').close(); "
         "print(os.getpid(), flush=True); sys.stdin.read()", store]
a = subprocess.Popen(child, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
b = subprocess.Popen(child, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
va, vb = int(a.stdout.readline()), int(b.stdout.readline())
os.kill(va, 0)                                     # alive: no error
a.stdin.close()
a.wait()
try:
    os.kill(va, 0)
    after = "alive"
except ProcessLookupError:
    after = "ESRCH"
os.kill(vb, signal.SIGKILL)                        # a virtual pid reaches the real process
print(os.getpid(), va, vb, after, b.wait(), flush=True)
"""


def test_getpid_is_a_virtual_pid_the_same_in_every_run_and_kill_knows_it(tmp_path):
    """A Node program (``CHAOS_SCHED_VPIDS=1``, inherited by its children) names files after its pid
    and writes it in lock files (Wowbagger hashes it into its temp names), so its getpid() is the
    scheduler's, numbered in grant order above every kernel pid: the same in every run, and a path that
    carries it is traced as it is. kill() of one reaches the process while it is there and says ESRCH
    once it has exited, whatever process the kernel has given that pid since."""
    script = _script(tmp_path, "pids.py", PIDS)
    replies, traces = set(), set()
    for i in range(2):
        store = tmp_path / f"store{i}"
        store.mkdir()
        with Scheduler(1, prefixes=[str(store)], stuck_s=10) as s:
            proc = s.spawn("p", [sys.executable, script, str(store)], control=True, env={"CHAOS_SCHED_VPIDS": "1"})
            lines = [line for _, line in s.run_all() if line]
            owners = sorted(f.name for f in store.iterdir())
            traces.add(s.digest())
            proc.popen.wait()
        me, va, vb, after, rc = lines[0].decode().split()
        assert int(me) > 4_194_304 and int(va) > int(me) and int(vb) > int(me) and va != vb, lines
        assert (after, rc) == ("ESRCH", "-9")
        assert owners == sorted([f"owner.{va}", f"owner.{vb}"])
        assert any(f"owner.{va}" in line for line in s.trace) and any(" pid " in line for line in s.trace)
        replies.add(lines[0])
    assert len(replies) == 1 and len(traces) == 1, (replies, traces)


TIMES = """
import os, subprocess, sys
path = os.path.join(sys.argv[1], "f")
with open(path, "w") as f:
    f.write("x")
first = os.stat(path)
os.utime(path, ns=(1, 1))                          # the kernel's ctime moves; a stat still says ctime = mtime
with open(path, "a") as f:
    f.write("y")
second = os.lstat(path)
print(first.st_mtime_ns, first.st_ctime_ns, first.st_atime_ns, second.st_mtime_ns, second.st_ctime_ns, flush=True)
"""


def test_a_store_file_s_times_are_virtual(tmp_path):
    """A store file's times are the kernel's clock, real time, and git decides whether to read a worktree
    file again by comparing them (two default Wowbagger runs of one seed parted where one run's git read a
    ledger file and the other's did not): a change through a store fd sets its mtime to the virtual time
    of the change, and a stat says atime = ctime = mtime. Two runs: the same times, virtual ones."""
    from chaos.deterministic.shim import EPOCH_NS

    script = _script(tmp_path, "times.py", TIMES)
    seen = set()
    for i in range(2):
        store = tmp_path / f"store{i}"
        store.mkdir()
        with Scheduler(1, prefixes=[str(store)], stuck_s=10) as s:
            proc = s.spawn("p", [sys.executable, script, str(store)], control=True)
            lines = [line for _, line in s.run_all() if line]
            proc.popen.wait()
        m1, c1, a1, m2, c2 = map(int, lines[0].split())
        assert EPOCH_NS < m1 == c1 == a1 < m2 == c2 < EPOCH_NS + 10**9, lines
        seen.add(lines[0])
    assert len(seen) == 1, seen


KILLER = """
import os, signal, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import os; r, w = os.pipe(); os.read(r, 1)"])
os.read(os.open(sys.argv[1], os.O_RDONLY), 1)       # a store point: the child has said hello by now
(os.killpg if sys.argv[2] == "group" else os.kill)(child.pid, signal.SIGKILL)
print(child.wait(), flush=True)
"""


@pytest.mark.parametrize("how", ["pid", "group"])
def test_a_child_a_controlled_process_kills_dies_inside_its_slice(tmp_path, how):
    """A controlled process SIGKILLs its controlled child (a host's group kill after a timeout), then
    waits for it: the kill is a point at which the scheduler waits for the child to die, so the
    parent's wait is ready at once in every run. Before, the death came whenever the kernel got to it:
    the parent's wait could find the child alive, and nothing would ever look again (a deadlock)."""
    script = _script(tmp_path, "killer.py", KILLER.replace("subprocess.Popen([", "subprocess.Popen(start_new_session="
                                                             "True, args=[" if how == "group" else "subprocess.Popen(["))
    store = tmp_path / "store"
    store.mkdir()
    (store / "f").write_text("x")
    traces = set()
    for _ in range(3):
        with Scheduler(1, prefixes=[str(store)], stuck_s=10) as s:
            proc = s.spawn("k", [sys.executable, script, str(store / "f"), how], control=True)
            replies = s.run_all()
            assert [line for _, line in replies if line] == [b"-9"]
            assert any(line.split()[2] == "kill" and line.split()[1] == "k/t0" for line in s.trace), s.trace
            traces.add(s.digest())
            proc.popen.wait()
    assert len(traces) == 1


def test_a_stuck_process_is_described_by_what_the_kernel_says_it_waits_in(tmp_path):
    """A stuck run's evidence names the kernel's view of a process no point accounts for: its state and,
    per thread, the wait channel and the syscall it is in (a real sleeping process)."""
    from chaos.deterministic.processes import _kernel_state

    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        deadline = time.monotonic() + 30
        while "nanosleep" not in _kernel_state(sleeper.pid) and time.monotonic() < deadline:
            time.sleep(0.01)   # until it is in its sleep (evidence, not a fixed wait)
        assert re.fullmatch(r"state S \(sleeping\), threads in \(wait channel/syscall\) \S+/(clock_)?nanosleep",
                            _kernel_state(sleeper.pid)), _kernel_state(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert _kernel_state(sleeper.pid) == "gone"


def test_a_pid_the_kernel_reused_is_a_new_process_not_the_dead_one(tmp_path):
    """pid_max is 32768 here and a default Wowbagger run starts more processes and threads than that, so
    a child's hello can come from the pid of a process long gone. It is a new process of its own name,
    whose exit is watched; before, its threads joined the dead one's record, its exec's hello and exit
    went unwaited for, and three of 20 default runs got stuck (a git whose image never said hello)."""
    from chaos.deterministic.processes import Proc

    sleeper = subprocess.Popen(["sleep", "30"])    # a live pid to stand for the reused one
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with Scheduler(1, prefixes=[str(tmp_path)]) as s:
            dead = Proc("w0.0/f1", sleeper.pid, None, -1, gone=True)
            s.procs[sleeper.pid] = s.by_name[dead.name] = dead
            s._sel.register(ours, ("hello", ours))
            s._hello(ours, f"H w3.1/f7/t0 {sleeper.pid} {sleeper.pid}")
            proc = s.procs[sleeper.pid]
            assert proc is not dead and proc.name == "w3.1/f7" and not proc.gone and proc.pidfd >= 0
            assert [t.name for t in proc.threads] == ["w3.1/f7/t0"] and dead.threads == []
            assert s.by_name["w3.1/f7"] is proc
    finally:
        sleeper.kill()
        sleeper.wait()
        theirs.close()


def test_a_childs_end_waits_until_its_sigchld_is_pending_in_a_parent_that_catches_it(monkeypatch):
    """The kernel makes a child's pidfd readable just before it sends the parent SIGCHLD: the scheduler
    grants no thread of a parent that catches it (Node: libuv's handler) until it is pending, so that
    thread's slice sees the child's end in every run; a parent that does not catch it is not waited for."""
    import threading

    import chaos.deterministic.processes as S

    monkeypatch.setattr(S, "SIGCHLD_WAIT_S", 60.0)
    catcher = subprocess.Popen([sys.executable, "-c", "import signal, sys, time\n"
                                "signal.signal(signal.SIGCHLD, lambda *a: None)\n"
                                "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})\n"   # as a stopped thread
                                "print('ready', flush=True); time.sleep(600)\n"], stdout=subprocess.PIPE, text=True)
    plain = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(600)"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert catcher.stdout.readline() == plain.stdout.readline() == "ready\n"
        t0 = time.monotonic()
        S.Processes._await_sigchld(S.Proc("plain", plain.pid, plain, -1))
        assert time.monotonic() - t0 < 30                       # does not catch it: not waited for
        sent = threading.Timer(0.3, os.kill, (catcher.pid, signal.SIGCHLD))
        t0 = time.monotonic()
        sent.start()
        S.Processes._await_sigchld(S.Proc("catcher", catcher.pid, catcher, -1))
        assert 0.3 <= time.monotonic() - t0 < 30                # waited until it was sent, then went on
        t0 = time.monotonic()
        S.Processes._await_sigchld(S.Proc("catcher", catcher.pid, catcher, -1))
        assert time.monotonic() - t0 < 30                       # already pending: at once
    finally:
        for p in (catcher, plain):
            p.kill()
            p.wait()


# reads a file, then changes another, then (with "lock") takes a flock and reads the first again
CLOSES = """
import fcntl, os, sys
store, lock = sys.argv[1], sys.argv[2] == "lock"
fd = os.open(os.path.join(store, "read"), os.O_RDONLY); os.read(fd, 10); os.close(fd)
fd = os.open(os.path.join(store, "changed"), os.O_WRONLY); os.write(fd, b"x"); os.close(fd)
if lock:
    fd = os.open(os.path.join(store, "changed"), os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_SH)
    fcntl.flock(fd, fcntl.LOCK_UN); os.close(fd)
    fd = os.open(os.path.join(store, "read"), os.O_RDONLY); os.read(fd, 10); os.close(fd)
"""


def test_a_close_is_a_point_only_where_another_process_could_see_it(tmp_path):
    """A close of a store file opened to change it is a point, and so is any close in a process that took
    a lock on a store file (a close drops its POSIX locks, a flock with its last fd); a read-only close in
    a process that never locked changes nothing another sees, and runs in its thread's slice (git's
    closes of every file it read were a third of a gitfile run's points)."""
    store = tmp_path / "store"
    store.mkdir()
    (store / "read").write_text("r")
    (store / "changed").write_text("c")
    client = _script(tmp_path, "closes.py", CLOSES)
    calls = {}
    for lock in ("none", "lock"):
        with Scheduler(1, prefixes=[str(store)], expected_points=100) as s:
            s.spawn("p", [sys.executable, client, str(store), lock])
            s.run_all()
            calls[lock] = [(f.split()[2], os.path.basename(f.split()[-1])) for f in s.trace
                           if f.split()[2] in ("open", "close", "write", "flock", "unlock")]
    assert calls["none"] == [("open", "read"), ("open", "changed"), ("write", "changed"), ("close", "changed")]
    assert calls["lock"] == calls["none"] + [("open", "changed"), ("flock", "changed"), ("unlock", "changed"),
                                             ("close", "changed"), ("open", "read"), ("close", "read")]
