"""What C, C++ and Rust programs call that Python and Node programs do not, under the scheduler.

* Waits: Rust's std locks with futex(2) through ``syscall()`` (its Mutex, Condvar, RwLock, thread
  parking), libstdc++ with POSIX's clock variants (``condition_variable::wait_for``:
  ``pthread_cond_clockwait``; timed mutexes) and rwlocks (``shared_mutex``). Before the shim knew them, a
  controlled thread blocked in the kernel while the thread that would wake it stood stopped (the run ended
  stuck), and a timed wait got the program's virtual deadline as the kernel's: at once on a machine up for
  more than 1,000 s, minutes on a fresh one.
* Store files through stdio (``fopen``, ``fclose``; libstdc++'s ofstream opens with ``fopen``): before, no
  point at all, and no fault could land on them.
* ``execl``, ``execlp``, ``execle``: glibc's call an internal ``execve``, so the new program took its parent's
  name and the run waited for a hello that never came under the child's.

The programs here are C, written the way those libraries call (gcc is the one compiler every machine of
the suite has)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc builds the program")

SEC_NS = 10**9
#: three workers bump a counter under a futex mutex (Rust's: 0 free, 1 locked, 2 locked with waiters),
#: writing a store file inside it, so a thread granted while another holds it must wait; then a rwlock and a
#: mutex taken with a deadline, each around a store write too. The main thread waits on a futex condvar
#: (Rust's: a counter each notify bumps) for the count. Then four waits nothing ends, each of argv[2] ms of
#: the program's clock; the results go to argv[3] (or stdout): a futex, a condition (clockwait), a mutex (clocklock) and a rwlock (clockwrlock).
PROGRAM = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static const char *store;
static long wait_ms;
static atomic_uint word, seq;
static int counter;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

static long futex(atomic_uint *w, int op, unsigned val, const struct timespec *t) {
    return syscall(SYS_futex, w, op | FUTEX_PRIVATE_FLAG, val, t, NULL, FUTEX_BITSET_MATCH_ANY);
}
static long long now_ms(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000LL + t.tv_nsec / 1000000; }
static struct timespec in_ms(long ms) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    long long n = t.tv_sec * 1000000000LL + t.tv_nsec + ms * 1000000LL;
    t.tv_sec = n / 1000000000LL; t.tv_nsec = n % 1000000000LL;
    return t;
}
static void lock(void) {
    unsigned free_ = 0;
    if (atomic_compare_exchange_strong(&word, &free_, 1)) return;
    while (atomic_exchange(&word, 2) != 0) futex(&word, FUTEX_WAIT_BITSET, 2, NULL);
}
static void unlock(void) { if (atomic_exchange(&word, 0) == 2) futex(&word, FUTEX_WAKE, 1, NULL); }
static void put(const char *what, int id, int i) {
    char p[4096]; snprintf(p, sizeof p, "%s/%s%d-%d", store, what, id, i);
    int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "x", 1) != 1 || close(fd) != 0) { perror(p); exit(3); }
}
static void *worker(void *arg) {
    int id = (int)(long)arg;
    for (int i = 0; i < 3; i++) {
        lock();
        int seen = counter;
        put("w", id, i);
        counter = seen + 1;
        atomic_fetch_add(&seq, 1); futex(&seq, FUTEX_WAKE, INT_MAX, NULL);
        unlock();
        pthread_rwlock_wrlock(&rw); put("r", id, i); pthread_rwlock_unlock(&rw);
        struct timespec t = in_ms(60000);
        if (pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &t)) { fputs("clocklock failed\n", stderr); exit(4); }
        put("m", id, i);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}
static long long took;
static void *timed_lock(void *arg) {
    long long t0 = now_ms(); struct timespec t = in_ms(wait_ms);
    int r = arg ? pthread_rwlock_clockwrlock(&rw, CLOCK_MONOTONIC, &t) : pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &t);
    took = r == ETIMEDOUT ? now_ms() - t0 : -1;
    return NULL;
}
static long long lock_held_elsewhere(int rwlock) {
    pthread_t t;
    if (rwlock) pthread_rwlock_rdlock(&rw); else pthread_mutex_lock(&m);
    pthread_create(&t, NULL, timed_lock, rwlock ? (void *)1 : NULL);
    pthread_join(t, NULL);
    if (rwlock) pthread_rwlock_unlock(&rw); else pthread_mutex_unlock(&m);
    return took;
}
int main(int argc, char **argv) {
    store = argv[1]; wait_ms = atol(argv[2]);
    pthread_t t[3];
    for (long i = 0; i < 3; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    lock();
    while (counter < 9) {
        unsigned s = atomic_load(&seq);
        unlock();
        struct timespec d = in_ms(60000);
        if (futex(&seq, FUTEX_WAIT_BITSET, s, &d) < 0 && errno == ETIMEDOUT) { fputs("condvar timed out\n", stderr); return 5; }
        lock();
    }
    int count = counter;
    unlock();
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);

    atomic_uint never = 0;
    long long t0 = now_ms(); struct timespec d = in_ms(wait_ms);
    long r = futex(&never, FUTEX_WAIT_BITSET, 0, &d);
    long long futex_ms = r < 0 && errno == ETIMEDOUT ? now_ms() - t0 : -1;
    pthread_mutex_lock(&m);
    t0 = now_ms(); d = in_ms(wait_ms);
    long long cond_ms = pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &d) == ETIMEDOUT ? now_ms() - t0 : -1;
    pthread_mutex_unlock(&m);
    long long mutex_ms = lock_held_elsewhere(0), rwlock_ms = lock_held_elsewhere(1);
    FILE *out = argc > 3 ? fopen(argv[3], "w") : stdout;
    fprintf(out, "%d %lld %lld %lld %lld\n", count, futex_ms, cond_ms, mutex_ms, rwlock_ms);
    return fclose(out) != 0;
}
"""


#: appends a line to <store>/<name>.log three times through stdio (fopen "a", fprintf, fflush,
#: fsync(fileno), fclose), then writes <name>.last with fputs, left in the FILE's buffer until fclose
STDIO = r"""
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s.log", argv[1], argv[2]);
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(p, "a");
        if (!f) { perror(p); return 3; }
        fprintf(f, "%s %d\n", argv[2], i);
        if (fflush(f) != 0 || fsync(fileno(f)) != 0) { perror("fsync"); return 4; }
        if (fclose(f) != 0) { perror("fclose"); return 5; }
    }
    snprintf(p, sizeof p, "%s/%s.last", argv[1], argv[2]);
    FILE *f = fopen(p, "w");
    if (!f || fputs("buffered until fclose\n", f) < 0) return 6;
    return fclose(f) != 0;
}
"""


#: forks three children that exec this program again with execl, execlp and execle, each writing
#: <store>/<how>; the parent waits for them, then writes <store>/parent
EXECS = r"""
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
static void put(const char *store, const char *name) {
    char p[4096]; snprintf(p, sizeof p, "%s/%s", store, name);
    int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, name, 1) != 1 || close(fd) != 0) _exit(3);
}
int main(int argc, char **argv) {
    if (argc > 3) { put(argv[2], argv[3]); return 0; }
    const char *store = argv[1];
    char *env[] = { "LANG=C", NULL };
    pid_t kids[3];
    for (int i = 0; i < 3; i++) {
        if ((kids[i] = fork()) != 0) continue;
        if (i == 0) execl(argv[0], argv[0], "child", store, "execl", (char *)NULL);
        if (i == 1) execlp(argv[0], argv[0], "child", store, "execlp", (char *)NULL);
        if (i == 2) execle(argv[0], argv[0], "child", store, "execle", (char *)NULL, env);
        _exit(9);
    }
    for (int i = 0; i < 3; i++) { int st; if (waitpid(kids[i], &st, 0) != kids[i] || st != 0) return 4; }
    put(store, "parent");
    return 0;
}
"""


def _build(d: Path, name: str, source: str) -> str:
    (d / f"{name}.c").write_text(source)
    subprocess.run(["gcc", "-O1", "-pthread", "-o", str(d / name), str(d / f"{name}.c")], check=True)
    return str(d / name)


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> str:
    return _build(tmp_path_factory.mktemp("waits"), "waits", PROGRAM)


@pytest.fixture(scope="module")
def exec_program(tmp_path_factory) -> str:
    return _build(tmp_path_factory.mktemp("execs"), "execs", EXECS)


@pytest.fixture(scope="module")
def stdio_program(tmp_path_factory) -> str:
    return _build(tmp_path_factory.mktemp("stdio"), "stdio", STDIO)


def _scheduled(program: str, tmp_path: Path, seed: int, tag: str) -> tuple[list[int], dict, list[str]]:
    from chaos.deterministic.scheduler import Scheduler
    from chaos.deterministic.shim import THREADS_ENV

    store, logs = tmp_path / f"store-{tag}", tmp_path / f"logs-{tag}"
    store.mkdir()
    logs.mkdir()
    out = tmp_path / f"out-{tag}"
    with Scheduler(seed, prefixes=[str(store)], stuck_s=20, log_dir=str(logs)) as s:
        s.spawn("p", [program, str(store), "2000", str(out)], env=THREADS_ENV)
        s.run_all()
        summary = s.summary()
    assert out.exists(), "".join(f.read_text() for f in logs.iterdir())   # (written last, on success)
    return [int(x) for x in out.read_text().split()], summary, sorted(p.name for p in store.iterdir())


def test_futex_clock_and_rwlock_waits_are_the_schedulers_and_end_at_their_virtual_deadlines(program, tmp_path):
    """Each seed twice: the same trace; the counter reaches 9 (no thread entered the futex mutex another
    held, none stuck in the kernel); every timed wait nothing ended took its 2,000 ms of the program's
    clock, however long the machine has been up; and the seeds interleave the threads differently."""
    traces = {}
    for seed in (1, 2, 3, 4):
        for run in (0, 1):
            values, summary, files = _scheduled(program, tmp_path, seed, f"{seed}-{run}")
            count, *waited = values
            assert count == 9 and all(2000 <= ms < 2050 for ms in waited), values
            assert files == sorted(f"{k}{i}-{j}" for k in "mrw" for i in range(3) for j in range(3))
            assert not summary["notes"], summary["notes"]
            traces.setdefault(seed, set()).add(summary["trace_sha256"])
    assert all(len(t) == 1 for t in traces.values()), traces
    assert len({next(iter(t)) for t in traces.values()}) > 1, "every seed gave one interleaving"


def test_a_set_up_programs_futex_and_clock_waits_take_what_they_ask_whatever_the_machines_uptime(program, tmp_path):
    """The same program with the shim alone (a set-up program), its virtual clock 60 s ahead of this
    machine's uptime: each timed wait takes its 300 ms, on its own clock and in real time."""
    from chaos.deterministic.shim import alone_env

    uptime_s = float(Path("/proc/uptime").read_text().split()[0])
    env = dict(alone_env("setup", threads=True), CHAOS_SCHED_MONO_NS=str(int((uptime_s + 60) * SEC_NS)),
               PATH=os.environ["PATH"])
    store = tmp_path / "store"
    store.mkdir()
    p = subprocess.run([program, str(store), "300"], env=env, capture_output=True, text=True, timeout=50)
    assert p.returncode == 0, p.stderr[-2000:]
    count, *waited = map(int, p.stdout.split())
    assert count == 9 and all(300 <= ms < 400 for ms in waited), p.stdout


def _stdio_run(program: str, store: Path, seed: int, faults: list | None = None):
    from chaos.deterministic.scheduler import Scheduler

    store.mkdir()
    with Scheduler(seed, prefixes=[str(store)], stuck_s=20, faults=faults) as s:
        for name in ("a", "b"):
            s.spawn(name, [program, str(store), name])
        s.run_all()
        return s.summary(), list(s.trace)


def test_a_store_file_through_stdio_is_opened_synced_and_closed_at_points(stdio_program, tmp_path):
    """fopen is the store file's open or creat point, fsync(fileno(f)) its fsync point, fclose its close
    point; a seed gives one trace, and the two processes' stdio calls interleave by the seed."""
    orders = set()
    for seed in (1, 2, 3):
        traces = set()
        for run in (0, 1):
            store = tmp_path / f"s{seed}{run}"
            summary, trace = _stdio_run(stdio_program, store, seed)
            assert not summary["notes"], summary["notes"]
            assert (store / "a.log").read_text() == "a 0\na 1\na 2\n"
            assert (store / "b.last").read_text() == "buffered until fclose\n"
            calls = [(line.split()[1], line.split()[2], line.split()[-1]) for line in trace if ".log" in line
                     or ".last" in line]
            for name in "ab":
                mine = [(c, p) for who, c, p in calls if who.startswith(name + "/")]
                assert mine == [("creat", f"{name}.log"), ("fsync", f"{name}.log"), ("close", f"{name}.log")] * 3 \
                    + [("creat", f"{name}.last"), ("close", f"{name}.last")], mine
            traces.add(summary["trace_sha256"])
            orders.add(tuple(who[0] for who, _, _ in calls))
        assert len(traces) == 1, (seed, traces)
    assert len(orders) > 1, "every seed ran the two programs' stdio calls in one order"


def test_faults_land_on_a_stdio_store_files_exact_points(stdio_program, tmp_path):
    """A kill at a's fclose of a.last (its 4th close) loses what the FILE's buffer held: the file is
    there, empty. An fsync EIO at b's 2nd fsync fails that call in the program, which stops with 2 lines
    written and no b.last. Each fault's evidence names its point."""
    from chaos.deterministic.rules import FaultRule

    kill = FaultRule("kill", frozenset({"close"}), process="a", nth=4)
    eio = FaultRule("EIO", frozenset({"fsync"}), process="b", nth=2)
    store = tmp_path / "s"
    _stdio_run(stdio_program, store, 1, faults=[kill, eio])
    assert kill.evidence and kill.evidence["call"] == "close" and kill.evidence["path"].endswith("a.last"), kill.evidence
    assert eio.evidence and eio.evidence["call"] == "fsync" and eio.evidence["path"].endswith("b.log"), eio.evidence
    assert (store / "a.log").read_text() == "a 0\na 1\na 2\n" and (store / "a.last").read_text() == ""
    assert (store / "b.log").read_text() == "b 0\nb 1\n" and not (store / "b.last").exists()


def test_a_program_execd_with_execl_execlp_or_execle_runs_under_its_own_name(exec_program, tmp_path):
    """Each exec'd child writes its file under the forked child's name (``p/f<N>``), the parent's last
    write waits for the three, and a seed gives one trace."""
    from chaos.deterministic.scheduler import Scheduler

    for seed in (1, 2):
        traces = set()
        for run in (0, 1):
            store = tmp_path / f"s{seed}{run}"
            store.mkdir()
            with Scheduler(seed, prefixes=[str(store)], stuck_s=20) as s:
                s.spawn("p", [exec_program, str(store)])
                s.run_all()
                summary = s.summary()
            assert not summary["notes"], summary["notes"]
            assert sorted(p.name for p in store.iterdir()) == ["execl", "execle", "execlp", "parent"]
            writers = {line.split()[-1]: line.split()[1] for line in s.trace if " creat " in line}
            assert all(writers[how].startswith("p/f") for how in ("execl", "execlp", "execle")), writers
            assert len({writers[how].split("/t")[0] for how in ("execl", "execlp", "execle")}) == 3, writers
            assert writers["parent"].startswith("p/t"), writers
            traces.add(summary["trace_sha256"])
        assert len(traces) == 1, (seed, traces)
