/* sched: the deterministic mode's preload shim (docs/deterministic.md).
 *
 * Every thread of a process started with $CHAOS_SCHED_SOCK stops at each
 * scheduling point, tells the scheduler (a unix socket, one connection per
 * thread, opened at the thread's first point) where it is, and waits until it
 * is granted. Points: open/creat of paths under $CHAOS_SCHED_PREFIX (':'
 * separated), then write/pwrite/writev/ftruncate/fsync/fdatasync/close/flock/
 * fcntl record locks on the fds so opened (read/pread too with
 * $CHAOS_SCHED_READS=1), rename/link/unlink/
 * mkdir/rmdir/truncate of store paths, and sleeps. A lock call that would
 * block is tried without blocking after the grant; if it would block the
 * thread says "blocked" and waits for another grant (never blocks for real).
 * Clocks read the scheduler's virtual clock (the time of the last grant plus
 * 1 us per read); sleeps are virtual (the scheduler grants them when the
 * virtual clock reaches their deadline). getrandom/getentropy are a stream seeded
 * from the process's logical name. Without $CHAOS_SCHED_SOCK every call
 * goes straight to libc.
 *
 * Children: a forked child is its own scheduled
 * process "<parent>/f<N>" and says hello at once; an exec'd program gets that
 * name in the envp it is given (execve and friends, posix_spawn), and the
 * parent's blocking waits for it (waitpid/wait4/waitid, a read or write of a
 * pipe or socket that would block, poll/select) are "W" stops: tried without
 * blocking after each grant, never blocking for real. With $CHAOS_SCHED_THREADS=1 a program's
 * threads are controlled too (pthread_create, mutexes, semaphores, condition variables, rwlocks, joins,
 * epoll, futex(2) through syscall(), an event loop that never waits: "threads" below). A SIGKILL it sends (kill, killpg) is followed by a
 * "kill" point: the scheduler sees the controlled processes it hit die before anything else runs. With $CHAOS_SCHED_VPIDS=1 (a
 * Node program) getpid() is a virtual pid the scheduler numbers in grant order, above every pid the kernel can give;
 * kill() of one asks the scheduler at a "pid" point ("pids" below). A store file's times are virtual
 * ("file times"). With $CHAOS_SCHED_WALL_MS set (a call the harness decides at an exact instant, an
 * op's clock_ms) the wall clocks read that instant, frozen, for the whole process and its children, as
 * libfaketime's absolute pin does in the timed mode; monotonic clocks stay virtual.
 *
 * Wire (text lines): hello "H <name> <pid> <tid> [made] [fly] spawned=<forks>.<threads>" (made: a thread
 * pthread_create made; fly: an exec'd program with $CHAOS_SCHED_VPIDS=1, "flying" below; spawned: what the
 * process started before this hello), point "P <seq> <call> <arg>
 * <local_vt> <spawned> <path or ->", blocked "B <seq> <local_vt> <spawned>", waiting "W <seq>
 * <local_vt> <spawned> <deadline_vt or -1> <what>" (spawned: the children this process started so far,
 * so the scheduler waits for their hellos before it decides anything); reply
 * "G <vt> <errno or 0> [<offset> [<value>]]": go on at virtual time vt, or fail the call with
 * errno without doing it (an exact fault); offset (ns, default 0) is added to
 * the wall clocks (REALTIME, TAI) the thread reads until its next grant: a
 * clock fault, a step forward or back; monotonic clocks never move back; value: a hello's virtual pid,
 * a "pid" point's answer (the real pid, 0 none). A kill is the scheduler's SIGKILL while
 * the thread waits here, before the call.
 * Build: gcc -shared -fPIC -O2 -o sched.so sched.c -ldl -lpthread (chaos.deterministic.shim). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/personality.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/times.h>
#include <signal.h>
#include <sched.h>
#include <semaphore.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define FD_MAX 65536
#define VPID_BASE 4194304            /* PID_MAX_LIMIT: the first virtual pid is one above */
#define US 1000LL
#define SEC 1000000000LL

static int enabled;                 /* $CHAOS_SCHED_SOCK set */
static char sock_path[108], prefixes[4096], name[256];
static long long epoch_ns;          /* CLOCK_REALTIME at virtual time 0 */
static long long pinned_wall_ns = -1;   /* $CHAOS_SCHED_WALL_MS: the wall clocks frozen there (-1: not pinned) */
static long long mono_ns;           /* CLOCK_MONOTONIC at virtual time 0 */
static unsigned char store_fd[FD_MAX];  /* 1: a store file opened to read only; 2: to change it (STORE_FD_WRITES) */
#define STORE_FD_WRITES 2
static int took_lock;               /* this process took a flock or record lock on a store file (see close) */
static unsigned char random_fd[FD_MAX];  /* /dev/urandom, /dev/random: their reads are the seeded stream */
static unsigned char passthrough[FD_MAX]; /* the control channel ($CHAOS_SCHED_CONTROL): its reads block for real */
static char *fd_path[FD_MAX];       /* the store path each store fd was opened with (named in its points) */
static int next_thread;
static volatile int forks;          /* children started: fork, vfork+exec (shared with a vfork child), posix_spawn */
static __thread int forks_told;     /* the count this thread's last stop told the scheduler */
static pid_t my_pid;                /* a vfork child runs with its parent's memory: getpid() differs from this */
/* the pid getpid() gives (see "pids"): the scheduler's, from its first grant; 0 until then */
static volatile pid_t my_vpid;
static int vpids_on;                /* $CHAOS_SCHED_VPIDS=1 (a Node program and its children) */
/* a program exec'd with $CHAOS_SCHED_VPIDS=1: its hello says "fly" (the scheduler may run its start beside
 * the schedule, "flights" in scheduler.py), and what another process could see of it before its first store
 * point is a point too: a write to a pipe or socket on fd 0-2 ("out") and its exit ("exit", from atexit) */
static int flying;
static unsigned uncontrolled_told;  /* the files (``UNCONTROLLED_FILES``) this process reported reading */
static int is_child;                /* a forked child, or a program exec'd by one: it says hello at once */
static int reads_are_points;        /* $CHAOS_SCHED_READS=1: read/pread of store fds are points too */
static pthread_key_t conn_key;
static unsigned long long rng_state; /* getrandom's stream, seeded from the name (see "randomness") */
static int rng_seeded;
static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;

static __thread int conn = -1;
static __thread int my_idx = -1;    /* a thread made by pthread_create: the index its creator gave it */
static __thread volatile int *conn_told;   /* its creator waits until this is 1: the thread has its connection */
static int threads_too;             /* $CHAOS_SCHED_THREADS=1: futex waits and epoll are waits too (below) */
static volatile int threads_made;   /* threads this process made (its points say so, like its children) */
static __thread unsigned long seq;
static __thread long long grant_vt, reads;
static __thread int quick_polls;    /* polls that could not wait (timeout 0) since this thread's last stop */
static __thread long long grant_value;   /* a grant's answer: a hello's virtual pid, a pid query's real pid */
/* the process's wall-clock offset (a clock fault) the last grant carried: REALTIME reads only */
static __thread long long grant_offset;
static __thread int my_thread = -1;  /* the index this thread's hello named it by (t<N>) */

/* Hand-offs. A thread that stops to wait while another thread of its process waits for what it just
 * did (a condition it signalled, an epoll whose fd it made ready: libuv's pool and event loop passing
 * work back and forth, two thirds of a Node program's grants) lets that thread go on itself, instead
 * of a round trip to the scheduler: it names it in its stop (">N"), gives it the virtual time the
 * scheduler would have given it (the scheduler computes the same, from the same two numbers), and wakes
 * it through its eventfd. Which thread goes is fixed by the process alone (the lowest index whose wait
 * is over), so the schedule repeats. Only where the scheduler's grant allows it (its sixth field: the
 * grant's cost in virtual time, 0: not allowed, as in a flight or while a fault may aim at any point). */
#define HAND_MAX 64
struct cond_wait { unsigned slot; unsigned long seen; };
struct hand {
    volatile int kind;                  /* 0: not waiting here, 1: a condition, 2: an epoll */
    const struct cond_wait *cw; int ep; /* what its wait is for */
    long long local_vt;                 /* the virtual time its stop told the scheduler */
    int efd;                            /* its eventfd + 1 (0: none yet), written to hand it the turn */
    volatile long long vt, offset, step; /* the grant it is handed */
};
static struct hand hands[HAND_MAX];
static __thread long long hand_step;    /* what a hand-off costs now (0: none allowed), from the last grant */
/* A hand-off's stop is not sent on its own: it waits here ("h <thread> <stop>|" each) and goes ahead of
 * the chain's next message to the scheduler, on whichever thread's connection ends the chain. So a chain
 * is one message, read in its order whatever order the kernel hands the scheduler its sockets in. Only
 * the thread whose turn it is touches it (a turn passes through an eventfd: a barrier). */
#define CHAIN_MAX 65536
static char chain[CHAIN_MAX];
static int chain_len;

static void remember_env(void);
static void exit_point(void);
static void forget_passthrough(void);
static long long env_ll(const char *k, long long dflt) { const char *v = getenv(k); return v && *v ? atoll(v) : dflt; }

static void send_stop(const char *m, int k);
/* the chain alone: its running thread ends its turn without a stop (it exits, or its process execs) */
static void send_chain(void) {
    if (!chain_len || conn < 0) return;
    chain[chain_len - 1] = '\n';
    send_stop("", 0);
}
static void conn_gone(void *p) {
    (void)p;
    if (conn < 0) return;
    send_chain();
    syscall(SYS_close, conn); conn = -1;
}

static void ensure_conn(void);
static void atfork_prepare(void) { __sync_fetch_and_add(&forks, 1); }
static void atfork_child(void) {
    /* the child is a new scheduled process: its own connections, named after its parent and fork number */
    if (conn >= 0) syscall(SYS_close, conn);
    conn = -1; next_thread = 0; seq = 0;
    char n[256]; snprintf(n, sizeof n, "%s/f%d", name, forks); memcpy(name, n, sizeof name);
    forks = 0; forks_told = 0; threads_made = 0; my_idx = -1; is_child = 1; my_pid = (pid_t)syscall(SYS_getpid);
    memset((void *)hands, 0, sizeof hands); my_thread = -1; hand_step = 0; chain_len = 0;
    flying = 0;        /* a fork before its exec: part of its parent's schedule */
    uncontrolled_told = 0;  /* its reads are its own */
    my_vpid = 0;       /* its own, from its hello's grant */
    rng_seeded = 0; rng_state = 0;
    pthread_mutex_init(&rng_lock, NULL);
    pthread_setspecific(conn_key, (void *)1);
    forget_passthrough();
    ensure_conn();     /* its hello now, before anything else: the parent's next stop waits for it */
}

/* a program whose randomness mixes in addresses (OpenSSL's DRBG nonce: a thread's address; Node) runs
 * with ASLR off: the shim re-executes it once with ADDR_NO_RANDOMIZE, where the kernel lets it */
static void without_aslr(char **argv, char **envp) {
    int p = personality(0xffffffff);
    if (p == -1 || (p & ADDR_NO_RANDOMIZE) || !argv || !argv[0]) return;
    if (personality(p | ADDR_NO_RANDOMIZE) == -1) return;
    syscall(SYS_execve, "/proc/self/exe", argv, envp);   /* on failure: go on with ASLR (not deterministic) */
}

static int alone;
static long long alone_reads;
/* waits the kernel times, on a deadline from our clocks ("virtual time" below) */
static long long left_until(clockid_t *c, const struct timespec *at);
static const struct timespec *kernel_deadline(clockid_t c, const struct timespec *at, struct timespec *out);
static void alone_reach(clockid_t c, const struct timespec *at);
static void alone_advance(long long ns);
static int alone_waited(int result, long long timeout_ns);
__attribute__((constructor)) static void init(int argc, char **argv, char **envp) {
    (void)argc;
    const char *s = getenv("CHAOS_SCHED_SOCK"), *p = getenv("CHAOS_SCHED_PREFIX"), *n = getenv("CHAOS_SCHED_NAME");
    const char *a = getenv("CHAOS_SCHED_ALONE");
    if (a && *a && (!s || !*s)) {
        snprintf(name, sizeof name, "%s", a);
        epoch_ns = env_ll("CHAOS_SCHED_EPOCH_NS", 1767225600LL * SEC);
        mono_ns = env_ll("CHAOS_SCHED_MONO_NS", 1000LL * SEC);
        if (env_ll("CHAOS_SCHED_THREADS", 0) == 1) without_aslr(argv, envp);
        alone = 1;
        return;
    }
    if (!s || !*s || strlen(s) >= sizeof sock_path) return;
    if (env_ll("CHAOS_SCHED_THREADS", 0) == 1) without_aslr(argv, envp);
    snprintf(sock_path, sizeof sock_path, "%s", s);
    snprintf(prefixes, sizeof prefixes, "%s", p ? p : "");
    snprintf(name, sizeof name, "%s", n && *n ? n : "p");
    epoch_ns = env_ll("CHAOS_SCHED_EPOCH_NS", 1767225600LL * SEC);   /* 2026-01-01T00:00:00Z */
    mono_ns = env_ll("CHAOS_SCHED_MONO_NS", 1000LL * SEC);
    reads_are_points = env_ll("CHAOS_SCHED_READS", 0) == 1;
    long long pin_ms = env_ll("CHAOS_SCHED_WALL_MS", -1);
    if (pin_ms >= 0) pinned_wall_ns = pin_ms * 1000000LL;
    pthread_key_create(&conn_key, conn_gone);
    pthread_atfork(atfork_prepare, NULL, atfork_child);
    my_pid = (pid_t)syscall(SYS_getpid);
    is_child = env_ll("CHAOS_SCHED_CHILD", 0) == 1;
    remember_env();
    threads_too = env_ll("CHAOS_SCHED_THREADS", 0) == 1;
    vpids_on = env_ll("CHAOS_SCHED_VPIDS", 0) == 1;
    enabled = 1;
    flying = is_child && vpids_on;
    if (flying) atexit(exit_point);
    if (is_child) ensure_conn();   /* a program exec'd by a scheduled process stops before it runs */
}

static void die(const char *why) {
    char m[512]; int k = snprintf(m, sizeof m, "chaos sched shim (%s): %s\n", name, why);
    syscall(SYS_write, 2, m, k);
    _exit(86);
}

static void send_line(const char *buf, int len) {
    while (len > 0) { long k = syscall(SYS_write, conn, buf, len);
        if (k < 0) { if (errno == EINTR) continue; die("lost the scheduler"); } buf += k; len -= k; }
}

/* a stop of the thread whose turn it is (none: k 0): the chain of hand-offs that led here goes first, in
 * one write */
static void send_stop(const char *m, int k) {
    if (!chain_len) { send_line(m, k); return; }
    if (chain_len + k > CHAIN_MAX) die("a chain of hand-offs outgrew its buffer");
    memcpy(chain + chain_len, m, k);
    int n = chain_len + k;
    chain_len = 0;
    send_line(chain, n);
}

/* wait for "G <vt> <errno> [<offset> [<value>]]\n"; returns the errno to fail the call with (0: go on) */
static int wait_grant(void) {
    char buf[128]; int n = 0;
    /* a signal (SIGCHLD of a child the scheduler reaped) waits until the thread is granted: its handler
     * runs at the start of a slice, not whenever the kernel gets to a stopped thread */
    sigset_t all, old; sigfillset(&all);
    if (threads_too) pthread_sigmask(SIG_BLOCK, &all, &old);
    for (;;) { long k = syscall(SYS_read, conn, buf + n, 1);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) die("the scheduler went away");
        if (buf[n] == '\n') break;
        if (++n >= (int)sizeof buf - 1) die("bad grant");
    }
    buf[n] = 0;
    if (threads_too) pthread_sigmask(SIG_SETMASK, &old, NULL);
    long long vt = 0, offset = 0, value = 0, step = 0; int err = 0;
    if (sscanf(buf, "G %lld %d %lld %lld %lld", &vt, &err, &offset, &value, &step) < 2) die("bad grant");
    grant_vt = vt; grant_offset = offset; grant_value = value; reads = 0; quick_polls = 0; hand_step = step;
    return err;
}

static long long local_vt(void) { return grant_vt + reads * US; }
/* CLOCK_REALTIME now: a pinned call's instant, else virtual time stepped by a clock fault (the wall clock only) */
static long long wall_now(void) { return pinned_wall_ns >= 0 ? pinned_wall_ns : epoch_ns + grant_offset + local_vt(); }

/* a vfork child (before its exec) shares its parent's memory and connection: it must not stop or write state */
static int in_vfork_child(void) { return (pid_t)syscall(SYS_getpid) != my_pid; }

static void ensure_conn(void) {
    if (conn >= 0) return;
    int fd = (int)syscall(SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket failed");
    struct sockaddr_un a; memset(&a, 0, sizeof a); a.sun_family = AF_UNIX;
    memcpy(a.sun_path, sock_path, strlen(sock_path));
    if (syscall(SYS_connect, fd, &a, sizeof a) != 0) die("cannot reach the scheduler");
    conn = fd;
    if (conn_told) { *conn_told = 1; conn_told = NULL; }
    pthread_setspecific(conn_key, (void *)1);
    int idx = my_idx >= 0 ? my_idx : __sync_fetch_and_add(&next_thread, 1);
    my_thread = idx;
    const char *fly = flying && idx == 0 && my_idx < 0 ? " fly" : "";   /* its image's first thread */
    /* spawned=F.M: the children and threads this process started before this hello (a C program may fork
     * before its first point, which is its first thread's hello): the scheduler waits for their hellos too */
    char m[400]; int k = snprintf(m, sizeof m, "H %s/t%d %ld %ld%s%s spawned=%d.%d\n", name, idx,
                                  (long)syscall(SYS_getpid), (long)syscall(SYS_gettid), my_idx >= 0 ? " made" : "",
                                  fly, forks, threads_made);
    send_line(m, k);
    wait_grant();
    if (grant_value > 0) my_vpid = (pid_t)grant_value;
}

/* wakes of local waits: a slot per object address (condition, mutex, semaphore), shared by collisions
 * (a spurious wakeup at worst); slot_waiters[] counts the threads waiting on a slot's objects */
#define COND_SLOTS 1024
static volatile unsigned long cond_signals[COND_SLOTS];
static volatile int slot_waiters[COND_SLOTS];
#define WOKE_MAX 8
static volatile int woke_n;        /* slots with waiters whose object was unlocked, posted or signalled */
static int woke_slots[WOKE_MAX];
static unsigned cond_slot(const void *c) {
    unsigned long long x = (unsigned long long)(unsigned long)c;
    return (unsigned)(((x >> 4) * 0x9E3779B97F4A7C15ULL) >> 54) & (COND_SLOTS - 1);
}
static void bump(const void *obj) {
    unsigned s = cond_slot(obj);
    if (!slot_waiters[s]) return;
    int n = woke_n;
    for (int i = 0; i < n && i < WOKE_MAX; i++) if (woke_slots[i] == (int)s) return;
    n = __sync_fetch_and_add(&woke_n, 1);
    if (n < WOKE_MAX) woke_slots[n] = (int)s;
}
/* the slots woken since this process's last stop message, for the next one: "-" none, "*" too many */
static const char *take_woke(char *out, size_t size) {
    int n = woke_n;
    if (n == 0) return "-";
    if (n > WOKE_MAX) { woke_n = 0; return "*"; }
    size_t k = 0; out[0] = 0;
    for (int i = 0; i < n; i++) k += snprintf(out + k, size - k, i ? ",%d" : "%d", woke_slots[i]);
    woke_n = 0;
    return out;
}
/* hand-offs (above): whether thread i's wait is over, looked at by the thread about to stop */
static int cond_ready(void *p);
static int epoll_ready(void *p);
static int hand_ready(int i) {
    struct hand *h = &hands[i];
    if (h->kind == 1) return cond_ready((void *)h->cw);
    struct pollfd pf = { h->ep, POLLIN, 0 };   /* an epoll fd reads ready while its ready list is not empty */
    return h->kind == 2 && syscall(SYS_poll, &pf, 1, 0) > 0;
}
static int hand_target(void) {
    if (!threads_too || hand_step <= 0 || my_thread < 0) return -1;
    int n = next_thread < HAND_MAX ? next_thread : HAND_MAX;
    for (int i = 0; i < n; i++) if (i != my_thread && hands[i].kind && hand_ready(i)) return i;
    return -1;
}
/* the virtual time thread i is handed the turn at: as the scheduler's grant would give it */
static long long hand_vt(int i) { return (grant_vt > hands[i].local_vt ? grant_vt : hands[i].local_vt) + hand_step; }
static void hand_to(int i, long long vt) {
    struct hand *h = &hands[i];
    h->vt = vt; h->offset = grant_offset; h->step = hand_step;
    h->kind = 0;
    unsigned long long one = 1;
    if (syscall(SYS_write, h->efd - 1, &one, sizeof one) != sizeof one) die("a hand-off failed");
}
/* wait for the scheduler's grant or a hand-off (a thread registered in hands[]) */
static void wait_turn(struct hand *me) {
    if (!me) { wait_grant(); return; }
    sigset_t all, old; sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    struct pollfd pf[2] = { { conn, POLLIN, 0 }, { me->efd - 1, POLLIN, 0 } };
    while (syscall(SYS_poll, pf, 2, -1) < 0) if (errno != EINTR) die("lost the scheduler");
    if (pf[1].revents & POLLIN) {
        unsigned long long v;
        if (syscall(SYS_read, me->efd - 1, &v, sizeof v) != sizeof v) die("a hand-off failed");
        grant_vt = me->vt; grant_offset = me->offset; hand_step = me->step;
        grant_value = 0; reads = 0; quick_polls = 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    wait_grant();
}

struct probe;
static int wait_on(int (*ready)(void *), void *arg, long long timeout_ns, const char *what, const void *obj,
                   const struct probe *p);

/* one scheduling point: returns the errno the scheduler asks the call to fail with, or 0 */
static int point(const char *call, long long arg, const char *path) {
    if (in_vfork_child()) return 0;
    ensure_conn();
    forks_told = forks;
    char w[96], m[4600]; int k = snprintf(m, sizeof m, "P %lu %s %lld %lld %d.%d.%s %s\n", ++seq, call, arg, local_vt(),
                                          forks_told, threads_made, take_woke(w, sizeof w), path && *path ? path : "-");
    if (k >= (int)sizeof m) k = sizeof m - 1, m[k - 1] = '\n';
    for (int i = 0; i < k - 1; i++) if (m[i] == '\n') m[i] = ' ';
    send_stop(m, k);
    return wait_grant();
}

/* the call would block: give up the turn, wait to be granted again, then the caller retries */
static void blocked(void) {
    forks_told = forks;
    char w[96], m[200]; int k = snprintf(m, sizeof m, "B %lu %lld %d.%d.%s\n", seq, local_vt(), forks_told, threads_made,
                                         take_woke(w, sizeof w));
    send_stop(m, k);
    wait_grant();
}

static void fill_random(void *buf, size_t n);

/* ---------------------------------------------------------------- store paths and fds */

static int under_prefix(const char *full) {
    const char *p = prefixes;
    while (*p) {
        const char *e = strchr(p, ':'); size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n && strncmp(full, p, n) == 0 && (full[n] == 0 || full[n] == '/' || p[n - 1] == '/')) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

/* the absolute form of (dirfd, path) in out; 0 when it cannot be formed */
static int absolute(int dirfd, const char *path, char *out, size_t size) {
    if (!path) return 0;
    if (path[0] == '/') { snprintf(out, size, "%s", path); return 1; }
    char dir[PATH_MAX];
    if (dirfd == AT_FDCWD) { if (!getcwd(dir, sizeof dir)) return 0; }
    else { char l[64]; snprintf(l, sizeof l, "/proc/self/fd/%d", dirfd);
        ssize_t n = readlink(l, dir, sizeof dir - 1); if (n < 0) return 0; dir[n] = 0; }
    snprintf(out, size, "%s/%s", dir, path);
    return 1;
}

static int store_path(int dirfd, const char *path, char *full, size_t size) {
    return enabled && *prefixes && absolute(dirfd, path, full, size) && under_prefix(full);
}

static int is_store_fd(int fd) { return enabled && fd >= 0 && fd < FD_MAX && store_fd[fd]; }

/* ---------------------------------------------------------------- file times */

/* A file's times are the kernel's clock, real time, which differs between runs: git compares a
 * worktree file's mtime and ctime with what its index recorded and with the index's own mtime
 * ("racy git") to decide whether to read the file again, so one run's git read a ledger file that the
 * other's did not (two default Wowbagger runs of one seed parted there). So a change through a store
 * fd (a write, a truncation, a file created) sets the file's atime and mtime to the virtual time of
 * the change, and a stat of a store path or fd through libc says atime = ctime = mtime (a ctime cannot
 * be set), through syscall(2) too (libuv's statx) and glibc's old names (__fxstat64: Node 20's fstat).
 * Not virtual: directories' times and changes through a shared mapping (SQLite's -shm). */
static void virtual_times(int fd) {
    long long t = epoch_ns + local_vt();
    struct timespec ts[2] = {{t / SEC, t % SEC}, {t / SEC, t % SEC}};
    syscall(SYS_utimensat, fd, NULL, ts, 0);
}
static void stat_times(struct stat *st) { st->st_atim = st->st_ctim = st->st_mtim; }

static void not_a_virtual_pid_in_proc(const char *path) {
    if (!vpids_on || !path || strncmp(path, "/proc/", 6) != 0) return;
    char *end; long long p = strtoll(path + 6, &end, 10);
    if (p > VPID_BASE && (*end == 0 || *end == '/')) die("looked up a virtual pid in /proc (getpid() is the "
                                                        "scheduler's in a black-box program; /proc has no entry for it)");
}

/* Files outside the shim's control whose contents are the machine's, reported, not hidden: a line
 * "<process> <class> <file>" in "uncontrolled" beside the scheduler's socket, once per process and file
 * (``report_uncontrolled``); the scheduler's summary names them.
 * - "clock": the machine's clock read through a file: /proc/stat's btime (psutil's boot time, so its
 *   create_time), /proc/uptime, the RTC. The shim cannot make these virtual, so what a process reads there
 *   may differ between runs of a seed, and so may a decision made on it (a gitjournal lock once taken from
 *   a live owner when btime turned over). <file> is the path opened.
 * - "machine": what the machine has: its memory, CPUs, load, kernel settings, the cgroup's limits (Node
 *   sizes V8's heap from /proc/meminfo and the cgroup's memory limit). Stable on one machine; another may
 *   size the program, and so its schedule, otherwise. <file> is the entry below (a cgroup's own path names
 *   the session that runs it). */
static const char *const UNCONTROLLED_FILES[][2] = {
    {"clock", "/proc/stat"}, {"clock", "/proc/uptime"}, {"clock", "/proc/driver/rtc"}, {"clock", "/sys/class/rtc/"},
    {"machine", "/proc/meminfo"}, {"machine", "/proc/cpuinfo"}, {"machine", "/proc/loadavg"},
    {"machine", "/proc/self/cgroup"}, {"machine", "/proc/sys/"}, {"machine", "/sys/fs/cgroup/"},
    {"machine", "/sys/devices/system/cpu/"}};
#define UNCONTROLLED_KINDS (int)(sizeof UNCONTROLLED_FILES / sizeof UNCONTROLLED_FILES[0])

/* One line "<process> <class> <what>" in "uncontrolled" beside the scheduler's socket. */
static void report_uncontrolled(const char *cls, const char *what) {
    const char *slash = strrchr(sock_path, '/');
    if (!slash) return;
    char report[sizeof sock_path + 16], line[sizeof name + PATH_MAX + 16];
    snprintf(report, sizeof report, "%.*s/uncontrolled", (int)(slash - sock_path), sock_path);
    int k = snprintf(line, sizeof line, "%s %s %s\n", name, cls, what);
    if (k <= 0 || k >= (int)sizeof line) return;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, report, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    ssize_t w = syscall(SYS_write, fd, line, (size_t)k);   /* one O_APPEND write: lines never interleave */
    (void)w;
    syscall(SYS_close, fd);
}

static void uncontrolled_file_opened(const char *path) {
    if (!enabled || !path || in_vfork_child()) return;
    int i = 0;
    for (; i < UNCONTROLLED_KINDS; i++) {   /* an entry ending in '/' is a tree */
        const char *f = UNCONTROLLED_FILES[i][1]; size_t n = strlen(f);
        if (f[n - 1] == '/' ? strncmp(path, f, n) == 0 : strcmp(path, f) == 0) break;
    }
    if (i == UNCONTROLLED_KINDS || (__sync_fetch_and_or(&uncontrolled_told, 1u << i) & (1u << i))) return;
    const char *cls = UNCONTROLLED_FILES[i][0];
    report_uncontrolled(cls, *cls == 'c' ? path : UNCONTROLLED_FILES[i][1]);
}

/* A clock the shim does not make virtual (a CPU-time clock: how long the process or a thread ran, which
 * differs from run to run): reported like a clock file, class "cputime", once per process and kind. Read
 * through clock_gettime, or through getrusage, times or clock(), which glibc serves without calling
 * clock_gettime through the PLT (times() also returns the real time since boot in ticks). */
enum { CPU_PROCESS, CPU_THREAD, CPU_OTHER, CLOCK_OTHER, CPU_GETRUSAGE, CPU_TIMES, CPU_CLOCK };
_Static_assert(UNCONTROLLED_KINDS + CPU_CLOCK < 32, "uncontrolled_told has a bit per file and per kind");
static void cpu_time_read(int kind) {
    if (!enabled || in_vfork_child()) return;
    static const char *const KINDS[] = {"CLOCK_PROCESS_CPUTIME_ID", "CLOCK_THREAD_CPUTIME_ID",
                                        "another process's or thread's CPU-time clock", "another clock",
                                        "getrusage", "times", "clock()"};
    unsigned bit = 1u << (UNCONTROLLED_KINDS + kind);
    if (!(__sync_fetch_and_or(&uncontrolled_told, bit) & bit)) report_uncontrolled("cputime", KINDS[kind]);
}
static void other_clock_read(clockid_t c) {
    cpu_time_read(c == CLOCK_PROCESS_CPUTIME_ID ? CPU_PROCESS : c == CLOCK_THREAD_CPUTIME_ID ? CPU_THREAD
                  : c < 0 ? CPU_OTHER : CLOCK_OTHER);
}
/* A timer that fires by the machine's clock (a timerfd, a POSIX timer, setitimer, alarm): when it fires is
 * real time, not the schedule's, so what the program does then may differ between runs of a seed. Reported
 * like a clock file, class "timer", once per process and kind; the timer still runs as asked. */
enum { TIMER_FD = CPU_CLOCK + 1, TIMER_POSIX, TIMER_ITIMER, TIMER_ALARM };
_Static_assert(UNCONTROLLED_KINDS + TIMER_ALARM < 32, "uncontrolled_told has a bit per file and per kind");
static void timer_set(int kind) {
    if (!enabled || in_vfork_child()) return;
    static const char *const KINDS[] = {"timerfd_create", "timer_create", "setitimer", "alarm"};
    unsigned bit = 1u << (UNCONTROLLED_KINDS + kind);
    if (!(__sync_fetch_and_or(&uncontrolled_told, bit) & bit)) report_uncontrolled("timer", KINDS[kind - TIMER_FD]);
}

#define REAL(ret, fn, ...) static ret (*real_##fn)(__VA_ARGS__); if (!real_##fn) { real_##fn = dlsym(RTLD_NEXT, #fn); }
#define FAIL_IF(err) do { int e_ = (err); if (e_) { errno = e_; return -1; } } while (0)

/* the timers timer_set (above) reports */
int timerfd_create(int clockid, int flags) {
    REAL(int, timerfd_create, int, int); timer_set(TIMER_FD); return real_timerfd_create(clockid, flags); }
int timer_create(clockid_t c, struct sigevent *ev, timer_t *t) {
    REAL(int, timer_create, clockid_t, struct sigevent *, timer_t *); timer_set(TIMER_POSIX); return real_timer_create(c, ev, t); }
int setitimer(__itimer_which_t which, const struct itimerval *v, struct itimerval *old) {
    REAL(int, setitimer, __itimer_which_t, const struct itimerval *, struct itimerval *);
    if (v && (v->it_value.tv_sec || v->it_value.tv_usec)) timer_set(TIMER_ITIMER);
    return real_setitimer(which, v, old);
}
unsigned int alarm(unsigned int seconds) {
    REAL(unsigned int, alarm, unsigned int); if (seconds) timer_set(TIMER_ALARM); return real_alarm(seconds); }

/* ---------------------------------------------------------------- opens and closes */

/* the devices whose reads are the seeded stream ("randomness") */
static int a_random_device(const char *path) {
    return path && (strcmp(path, "/dev/urandom") == 0 || strcmp(path, "/dev/random") == 0);
}

static int open_common(const char *fn, int dirfd, const char *path, int flags, mode_t mode) {
    char full[PATH_MAX + 256]; int store = store_path(dirfd, path, full, sizeof full);
    if (store) FAIL_IF(point((flags & O_CREAT) ? "creat" : "open", flags, full));
    not_a_virtual_pid_in_proc(path);
    if (!store) uncontrolled_file_opened(path);
    static int (*real)(int, const char *, int, ...);
    if (!real) real = dlsym(RTLD_NEXT, "openat");
    (void)fn;
    int fresh = store && ((flags & O_TRUNC) || ((flags & O_CREAT)
                          && ((flags & O_EXCL) || syscall(SYS_faccessat, dirfd, path, F_OK, 0) != 0)));
    int fd = real(dirfd, path, flags, mode);
    if (fresh && fd >= 0 && !in_vfork_child()) virtual_times(fd);
    if ((enabled || alone) && fd >= 0 && fd < FD_MAX && (alone || !in_vfork_child())) {
        random_fd[fd] = a_random_device(path);
        if (store) {   /* (never alone) */
            store_fd[fd] = (flags & (O_ACCMODE | O_CREAT | O_TRUNC)) != O_RDONLY ? STORE_FD_WRITES : 1;
            free(fd_path[fd]); fd_path[fd] = strdup(full);
        }
        else store_fd[fd] = 0;   /* the number is another file's now */
    }
    return fd;
}

static mode_t mode_arg(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...) { va_list ap; va_start(ap, flags); mode_t m = mode_arg(flags, ap); va_end(ap);
    return open_common("open", AT_FDCWD, path, flags, m); }
int open64(const char *path, int flags, ...) { va_list ap; va_start(ap, flags); mode_t m = mode_arg(flags, ap); va_end(ap);
    return open_common("open64", AT_FDCWD, path, flags, m); }
int openat(int dirfd, const char *path, int flags, ...) { va_list ap; va_start(ap, flags); mode_t m = mode_arg(flags, ap); va_end(ap);
    return open_common("openat", dirfd, path, flags, m); }
int openat64(int dirfd, const char *path, int flags, ...) { va_list ap; va_start(ap, flags); mode_t m = mode_arg(flags, ap); va_end(ap);
    return open_common("openat64", dirfd, path, flags, m); }
int creat(const char *path, mode_t mode) { return open_common("creat", AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode); }
int creat64(const char *path, mode_t mode) { return open_common("creat64", AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode); }

/* A close is a point where others could see it: of a store file opened to change it, or in a process
 * that took a lock on a store file (a close releases the process's record locks on that file, through
 * any fd, and a flock with its last fd). A read-only fd's close in a process that never locked changes
 * nothing another process can see: it runs in its thread's slice, no point (git closes every ref,
 * config and object file it read: about a third of a gitfile run's points were such closes). */
int close(int fd) {
    REAL(int, close, int);
    if (is_store_fd(fd) && !in_vfork_child()) {
        if (store_fd[fd] == STORE_FD_WRITES || took_lock) FAIL_IF(point("close", fd, fd_path[fd]));
        store_fd[fd] = 0;
    }
    if (fd >= 0 && fd < FD_MAX && !in_vfork_child()) passthrough[fd] = random_fd[fd] = 0;
    return real_close(fd);
}

/* ---------------------------------------------------------------- children and blocking waits */


/* Where a thread would block for another process (its child's exit, a pipe or socket with nothing to
 * read or no room to write, poll/select with nothing ready) it never blocks for real: it tells the
 * scheduler "W" (waiting, until <deadline> when the call has a timeout) and tries again, without
 * blocking, after each grant; the scheduler grants it again once another thread got somewhere. */

/* The fds a wait is for ("fd/events,...", at most PROBE_FDS), set by the caller just before it waits: the
 * W message names them, so the scheduler can look at them itself (a duplicate of each, pidfd_getfd) and
 * grant a retry only once one is ready, not after every slice that got somewhere. */
#define PROBE_FDS 16
struct probe { char s[PROBE_FDS * 20]; int n; };   /* a local of the waiting call (a signal handler may wait too) */
static void probe_add(struct probe *p, int fd, short events) {
    if (fd < 0 || p->n < 0) return;
    if (p->n == PROBE_FDS) { p->n = -1; return; }   /* too many: the scheduler retries it the old way */
    size_t k = strlen(p->s);
    snprintf(p->s + k, sizeof p->s - k, k ? ",%d/%d" : "%d/%d", fd, (int)events);
    p->n++;
}

/* wait until ready() says yes; returns 1 when the deadline (virtual, -1: none) passed first */
static int wait_until(int (*ready)(void *), void *arg, long long timeout_ns, const char *what) {
    return wait_on(ready, arg, timeout_ns, what, NULL, NULL);
}
static int wait_fds(int (*ready)(void *), void *arg, long long timeout_ns, const char *what, const struct probe *p) {
    return wait_on(ready, arg, timeout_ns, what, NULL, p);
}

/* the same for a local wait (its object: a mutex, semaphore or condition of this process); while it
 * waits, its slot counts it, so a thread that unlocks, posts or signals that object says so at its next
 * stop ("woke", below) and the scheduler lets the process's local waiters try again then, not after
 * every slice of the process */
static int wait_on(int (*ready)(void *), void *arg, long long timeout_ns, const char *what, const void *obj,
                   const struct probe *p) {
    /* Right after starting a child, readiness is a race: a vfork parent resumes before the kernel has
     * closed the child's close-on-exec fds (subprocess's exec-error pipe reads as not ready, or ready).
     * So the first try then comes after a stop, which the scheduler grants only once the child said
     * hello from its new image (all its close-on-exec fds closed by then). Not with every thread
     * controlled: a stop there may hold a lock of the program's that the thread granted next needs (Node
     * ran 60 s without a point); its waits for a child go through epoll, whose first try stays free. */
    int fresh_child = enabled && !threads_too && !in_vfork_child() && forks != forks_told;
    if (!fresh_child && ready(arg)) return 0;
    if (!enabled || in_vfork_child()) return timeout_ns == 0;   /* (not ready: a fresh child needs enabled) */
    if (timeout_ns == 0) return fresh_child ? !ready(arg) : 1;
    ensure_conn();
    long long deadline = timeout_ns < 0 ? -1 : local_vt() + timeout_ns;
    ++seq;
    unsigned slot = obj ? cond_slot(obj) : 0;
    if (obj) __sync_fetch_and_add(&slot_waiters[slot], 1);
    int late = 0;
    /* a wait another thread of this process may hand the turn to: a condition's, or an epoll's */
    int kind = !threads_too || my_thread < 0 || my_thread >= HAND_MAX ? 0
               : ready == cond_ready ? 1 : ready == epoll_ready && p && p->n == 1 ? 2 : 0;
    struct hand *me = kind ? &hands[my_thread] : NULL;
    if (me && !me->efd) {
        int e = (int)syscall(SYS_eventfd2, 0, EFD_CLOEXEC);
        if (e < 0) me = NULL; else me->efd = e + 1;
    }
    for (;;) {
        forks_told = forks;
        long long lv = local_vt();
        int give = chain_len < CHAIN_MAX - 8192 ? hand_target() : -1;   /* (a chain that long ends: a real stop) */
        long long give_vt = give >= 0 ? hand_vt(give) : 0;
        char h[40] = "";   /* " >N@VT": the scheduler checks it gives the same time */
        if (give >= 0) snprintf(h, sizeof h, " >%d@%lld", give, give_vt);
            char w[96], m[800]; int k = obj
            ? snprintf(m, sizeof m, "W %lu %lld %d.%d.%s %lld %s:%u%s\n", seq, lv, forks_told, threads_made,
                       take_woke(w, sizeof w), deadline, what, slot, h)
            : p && p->n > 0
            ? snprintf(m, sizeof m, "W %lu %lld %d.%d.%s %lld %s@%s%s\n", seq, lv, forks_told, threads_made,
                       take_woke(w, sizeof w), deadline, what, p->s, h)
            : snprintf(m, sizeof m, "W %lu %lld %d.%d.%s %lld %s%s\n", seq, lv, forks_told, threads_made,
                       take_woke(w, sizeof w), deadline, what, h);
        if (me) {
            me->cw = kind == 1 ? arg : NULL;
            me->ep = kind == 2 ? *(int *)arg : -1;
            me->local_vt = lv;
            __sync_synchronize();
            me->kind = kind;
        }
        if (give >= 0) {   /* it goes ahead of the chain's next message (send_stop) */
            chain_len += snprintf(chain + chain_len, CHAIN_MAX - chain_len, "h %d ", my_thread);
            memcpy(chain + chain_len, m, k);
            chain_len += k;
            chain[chain_len - 1] = '|';
            hand_to(give, give_vt);
        } else send_stop(m, k);
        wait_turn(me);
        if (me) me->kind = 0;
        if (ready(arg)) break;
        if (deadline >= 0 && grant_vt >= deadline) { late = 1; break; }
    }
    if (obj) __sync_fetch_and_sub(&slot_waiters[slot], 1);
    return late;
}

struct fd_wait { int fd; short events; };
static int fd_ready(void *p) {
    struct fd_wait *w = p; struct pollfd pf = { w->fd, w->events, 0 };
    static int (*real_poll)(struct pollfd *, nfds_t, int);
    if (!real_poll) real_poll = dlsym(RTLD_NEXT, "poll");
    return real_poll(&pf, 1, 0) != 0;
}

/* a blocking read/write of a pipe or socket that would block: wait (never for the control channel) */
static void wait_for_fd(int fd, short events, const char *what) {
    if (!enabled || fd < 0 || (fd < FD_MAX && passthrough[fd])) return;
    struct stat st;
    if (fstat(fd, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) return;
    static int (*real_fcntl)(int, int, ...);
    if (!real_fcntl) real_fcntl = dlsym(RTLD_NEXT, "fcntl");
    int fl = real_fcntl(fd, F_GETFL);
    if (fl < 0 || (fl & O_NONBLOCK)) return;
    struct fd_wait w = { fd, events };
    struct probe p = { "", 0 }; probe_add(&p, fd, events);
    wait_fds(fd_ready, &w, -1, what, &p);
}

/* stdio reads a pipe with glibc's own read (not interposable): before a stdio read whose buffer is
 * empty, wait as a read of its fd would (git cat-file --batch reads its requests with getdelim) */
static void wait_for_stream(FILE *fp) {
    if (enabled && fp && fp->_IO_read_ptr >= fp->_IO_read_end) wait_for_fd(fileno_unlocked(fp), POLLIN, "read-pipe");
}
ssize_t getdelim(char **line, size_t *n, int delim, FILE *fp) {
    REAL(ssize_t, getdelim, char **, size_t *, int, FILE *);
    wait_for_stream(fp);
    return real_getdelim(line, n, delim, fp);
}
ssize_t getline(char **line, size_t *n, FILE *fp) { return getdelim(line, n, '\n', fp); }
char *fgets(char *buf, int n, FILE *fp) {
    REAL(char *, fgets, char *, int, FILE *);
    wait_for_stream(fp);
    return real_fgets(buf, n, fp);
}
size_t fread(void *buf, size_t size, size_t n, FILE *fp) {
    REAL(size_t, fread, void *, size_t, size_t, FILE *);
    wait_for_stream(fp);
    return real_fread(buf, size, n, fp);
}
int fgetc(FILE *fp) { REAL(int, fgetc, FILE *); wait_for_stream(fp); return real_fgetc(fp); }
int getc(FILE *fp) { REAL(int, getc, FILE *); wait_for_stream(fp); return real_getc(fp); }

/* An event loop that never waits (a timeout of 0: work it posts itself, setImmediate, V8's tasks) while
 * it polls for what another of its threads is to do would keep the turn for ever: that thread runs only
 * once this one stops (Node's main thread spun 60 s). So every SPIN_POLLS such polls in a row without a
 * stop (epoll, poll, ppoll, select: whichever its loop uses), it gives the turn up ("spin": a wait that
 * ends 1 us of virtual time on, after its clock reads: the others run first, or the clock moves on when
 * none can). Counted per thread, so the same every run. */
#define SPIN_POLLS 64
static int never_ready(void *p) { (void)p; return 0; }
static void quick_poll(void) {
    if (!enabled || !threads_too || in_vfork_child() || ++quick_polls < SPIN_POLLS) return;
    ensure_conn();
    wait_until(never_ready, NULL, US, "spin");
}
struct poll_wait { struct pollfd *fds; nfds_t n; int result; };
static int poll_ready(void *p) {
    struct poll_wait *w = p;
    static int (*real_poll)(struct pollfd *, nfds_t, int);
    if (!real_poll) real_poll = dlsym(RTLD_NEXT, "poll");
    w->result = real_poll(w->fds, w->n, 0);
    return w->result != 0;
}
int poll(struct pollfd *fds, nfds_t n, int timeout_ms) {
    REAL(int, poll, struct pollfd *, nfds_t, int);
    if (timeout_ms == 0) quick_poll();
    if (!enabled || timeout_ms == 0 || in_vfork_child())
        return alone_waited(real_poll(fds, n, timeout_ms), timeout_ms * 1000000LL);
    struct poll_wait w = { fds, n, 0 };
    struct probe p = { "", 0 }; for (nfds_t i = 0; i < n; i++) probe_add(&p, fds[i].fd, fds[i].events);
    if (wait_fds(poll_ready, &w, timeout_ms < 0 ? -1 : timeout_ms * 1000000LL, "poll", &p)) return 0;
    return w.result;
}
int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask) {
    REAL(int, ppoll, struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
    int now_only = tmo && !tmo->tv_sec && !tmo->tv_nsec;
    if (now_only) quick_poll();
    if (!enabled || now_only || in_vfork_child())
        return alone_waited(real_ppoll(fds, n, tmo, mask), tmo ? tmo->tv_sec * SEC + tmo->tv_nsec : -1);
    (void)mask;
    struct poll_wait w = { fds, n, 0 };
    struct probe p = { "", 0 }; for (nfds_t i = 0; i < n; i++) probe_add(&p, fds[i].fd, fds[i].events);
    if (wait_fds(poll_ready, &w, tmo ? tmo->tv_sec * SEC + tmo->tv_nsec : -1, "poll", &p)) return 0;
    return w.result;
}

struct select_wait { int n; fd_set *r, *w, *e, r0, w0, e0; int result; };
static int select_ready(void *p) {
    struct select_wait *s = p; struct timeval zero = { 0, 0 };
    static int (*real_select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
    if (!real_select) real_select = dlsym(RTLD_NEXT, "select");
    if (s->r) *s->r = s->r0;
    if (s->w) *s->w = s->w0;
    if (s->e) *s->e = s->e0;
    s->result = real_select(s->n, s->r, s->w, s->e, &zero);
    return s->result != 0;
}
int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv) {
    REAL(int, select, int, fd_set *, fd_set *, fd_set *, struct timeval *);
    int now_only = tv && !tv->tv_sec && !tv->tv_usec;
    if (now_only) quick_poll();
    if (!enabled || now_only || in_vfork_child()) {
        long long timeout_ns = tv ? tv->tv_sec * SEC + tv->tv_usec * US : -1;   /* (select may change *tv) */
        return alone_waited(real_select(n, r, w, e, tv), timeout_ns);
    }
    struct select_wait s = { n, r, w, e, {{0}}, {{0}}, {{0}}, 0 };
    if (r) s.r0 = *r;
    if (w) s.w0 = *w;
    if (e) s.e0 = *e;
    struct probe p = { "", 0 };
    for (int fd = 0; fd < n && fd < FD_SETSIZE; fd++) {
        short ev = (r && FD_ISSET(fd, r) ? POLLIN : 0) | (w && FD_ISSET(fd, w) ? POLLOUT : 0) | (e && FD_ISSET(fd, e) ? POLLPRI : 0);
        if (ev) probe_add(&p, fd, ev);
    }
    if (wait_fds(select_ready, &s, tv ? tv->tv_sec * SEC + tv->tv_usec * US : -1, "select", &p)) {
        if (r) FD_ZERO(r);
        if (w) FD_ZERO(w);
        if (e) FD_ZERO(e);
        return 0;
    }
    return s.result;
}

struct child_wait { idtype_t idtype; id_t id; pid_t pid; int *status; int options; siginfo_t *info;
                    struct rusage *ru; int kind; long result; };
static int child_ready(void *p) {
    struct child_wait *c = p;
    static pid_t (*real_wait4)(pid_t, int *, int, struct rusage *);
    static int (*real_waitid)(idtype_t, id_t, siginfo_t *, int);
    if (!real_wait4) real_wait4 = dlsym(RTLD_NEXT, "wait4");
    if (!real_waitid) real_waitid = dlsym(RTLD_NEXT, "waitid");
    if (c->kind == 0) { c->result = real_wait4(c->pid, c->status, c->options | WNOHANG, c->ru); return c->result != 0; }
    c->info->si_pid = 0;
    c->result = real_waitid(c->idtype, c->id, c->info, c->options | WNOHANG);
    return c->result != 0 || c->info->si_pid != 0;
}
pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru) {
    REAL(pid_t, wait4, pid_t, int *, int, struct rusage *);
    if (!enabled || (options & WNOHANG) || in_vfork_child()) return real_wait4(pid, status, options, ru);
    struct child_wait c = { P_ALL, 0, pid, status, options, NULL, ru, 0, 0 };
    wait_until(child_ready, &c, -1, "waitpid");
    return (pid_t)c.result;
}
pid_t waitpid(pid_t pid, int *status, int options) { return wait4(pid, status, options, NULL); }
pid_t wait(int *status) { return wait4(-1, status, 0, NULL); }
int waitid(idtype_t idtype, id_t id, siginfo_t *info, int options) {
    REAL(int, waitid, idtype_t, id_t, siginfo_t *, int);
    if (!enabled || (options & WNOHANG) || in_vfork_child()) return real_waitid(idtype, id, info, options);
    struct child_wait c = { idtype, id, 0, NULL, options, info, NULL, 1, 0 };
    wait_until(child_ready, &c, -1, "waitid");
    return (int)c.result;
}


/* ---- threads (CHAOS_SCHED_THREADS=1: a program whose threads wait on each other, Node's libuv pool
 * and V8's helpers): a new thread says hello before it runs (its index given by its creator, so names
 * follow creation order), and its creator's next stop waits for that hello; a contended mutex, a
 * semaphore, a condition variable, a join and epoll are waits like the others. A condition wait is
 * ready once a thread signalled that condition since it began (its slot of a small table: a collision
 * is a spurious wakeup, which POSIX allows). Only a thread of the same process can make a mutex, a
 * private semaphore, a condition or a join ready, so those waits are named "local" ("mutex", "sem",
 * "cond", "join") and the scheduler retries them only after their own process got somewhere; a
 * process-shared mutex or semaphore (sem_open, sem_init with pshared) is "mutex-shared"/"sem-shared"
 * and retried after any progress, like a pipe. */

#define SHARED_SEMS 64
static sem_t *volatile shared_sems[SHARED_SEMS];   /* sem_open's and pshared sem_init's: other processes post them */
static void remember_shared(sem_t *s) {
    for (int i = 0; i < SHARED_SEMS; i++)
        if (shared_sems[i] == s || __sync_bool_compare_and_swap(&shared_sems[i], NULL, s)) return;
}
static const char *sem_what(sem_t *s) {
    for (int i = 0; i < SHARED_SEMS && shared_sems[i]; i++) if (shared_sems[i] == s) return "sem-shared";
    return "sem";
}
int sem_init(sem_t *s, int pshared, unsigned v) {
    REAL(int, sem_init, sem_t *, int, unsigned);
    int r = real_sem_init(s, pshared, v);
    if (r == 0 && pshared) remember_shared(s);
    return r;
}
sem_t *sem_open(const char *n, int oflag, ...) {
    REAL(sem_t *, sem_open, const char *, int, ...);
    mode_t m = 0; unsigned v = 0;
    if (oflag & O_CREAT) { va_list ap; va_start(ap, oflag); m = (mode_t)va_arg(ap, int); v = va_arg(ap, unsigned); va_end(ap); }
    sem_t *s = (oflag & O_CREAT) ? real_sem_open(n, oflag, m, v) : real_sem_open(n, oflag);
    if (s != SEM_FAILED) remember_shared(s);
    return s;
}
struct start_arg { void *(*fn)(void *); void *arg; int idx; volatile int *connected; };
static void *thread_start(void *p) {
    struct start_arg a = *(struct start_arg *)p; free(p);
    my_idx = a.idx;
    conn_told = a.connected;
    ensure_conn();
    return a.fn(a.arg);
}
int pthread_create(pthread_t *t, const pthread_attr_t *at, void *(*fn)(void *), void *arg) {
    REAL(int, pthread_create, pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!enabled || !threads_too || in_vfork_child()) return real_pthread_create(t, at, fn, arg);
    struct start_arg *a = malloc(sizeof *a);
    if (!a) return EAGAIN;
    volatile int connected = 0;
    a->fn = fn; a->arg = arg; a->idx = __sync_fetch_and_add(&next_thread, 1); a->connected = &connected;
    int r = real_pthread_create(t, at, thread_start, a);
    if (r != 0) { free(a); return r; }
    __sync_fetch_and_add(&threads_made, 1);
    /* The new thread's connection is an fd: until it has it, the creator runs on, and what the creator opens
     * next (or the threads it starts next) would get fd numbers by which got there first; a store fd's number
     * is in its points. (A Python or Node program waits for its new thread anyway; a C one need not.) */
    while (!connected) sched_yield();
    return 0;
}

static int mutex_try(pthread_mutex_t *m) {
    static int (*real)(pthread_mutex_t *);
    if (!real) real = dlsym(RTLD_NEXT, "pthread_mutex_trylock");
    return real(m);
}
static int mutex_ready(void *m) { return mutex_try(m) == 0; }
/* a controlled thread's wait for a mutex its try found busy: the scheduler's (0, or ETIMEDOUT at the deadline) */
static int mutex_wait(pthread_mutex_t *m, long long timeout_ns) {
    /* glibc marks a process-shared mutex in its kind (PTHREAD_MUTEX_PSHARED_BIT) */
    return wait_on(mutex_ready, m, timeout_ns, (m->__data.__kind & 128) ? "mutex-shared" : "mutex", m, NULL)
           ? ETIMEDOUT : 0;
}
static int controlled_lock(void) { return enabled && threads_too && !in_vfork_child() && conn >= 0; }
/* (a lock free at once is taken before anything else is asked: a Node call takes some 17,000 mutexes and
 * 800,000 rwlocks, nearly all free, and whether this is a vfork child costs a system call) */
int pthread_mutex_lock(pthread_mutex_t *m) {
    REAL(int, pthread_mutex_lock, pthread_mutex_t *);
    int r = threads_too ? mutex_try(m) : EBUSY;
    if (r != EBUSY) return r;   /* (a robust mutex's EOWNERDEAD: taken) */
    if (!controlled_lock()) return real_pthread_mutex_lock(m);
    return mutex_wait(m, -1);
}

int pthread_mutex_unlock(pthread_mutex_t *m) {
    REAL(int, pthread_mutex_unlock, pthread_mutex_t *);
    int r = real_pthread_mutex_unlock(m);
    if (threads_too) bump(m);
    return r;
}
int sem_post(sem_t *s) {
    REAL(int, sem_post, sem_t *);
    int r = real_sem_post(s);
    if (threads_too) bump(s);
    return r;
}

static int sem_ready(void *s) {
    static int (*real)(sem_t *);
    if (!real) real = dlsym(RTLD_NEXT, "sem_trywait");
    return real(s) == 0;
}
static long long abs_timeout(const struct timespec *abstime) {   /* the program took it from our clocks */
    clockid_t c = (clockid_t)-1;   /* (which clock: told by the size of the instant) */
    return left_until(&c, abstime);
}
int sem_wait(sem_t *s) {
    REAL(int, sem_wait, sem_t *);
    if (!enabled || !threads_too || in_vfork_child()) return real_sem_wait(s);
    ensure_conn();
    wait_on(sem_ready, s, -1, sem_what(s), s, NULL);
    return 0;
}
int sem_timedwait(sem_t *s, const struct timespec *abstime) {
    REAL(int, sem_timedwait, sem_t *, const struct timespec *);
    if (!enabled || !threads_too || in_vfork_child()) {
        struct timespec k; int r = real_sem_timedwait(s, kernel_deadline(CLOCK_REALTIME, abstime, &k));
        if (r && errno == ETIMEDOUT) alone_reach(CLOCK_REALTIME, abstime);
        return r;
    }
    ensure_conn();
    if (wait_on(sem_ready, s, abs_timeout(abstime), sem_what(s), s, NULL)) { errno = ETIMEDOUT; return -1; }
    return 0;
}
int sem_clockwait(sem_t *s, clockid_t c, const struct timespec *abstime) {
    REAL(int, sem_clockwait, sem_t *, clockid_t, const struct timespec *);
    if (!enabled || !threads_too || in_vfork_child()) {
        struct timespec k; int r = real_sem_clockwait(s, c, kernel_deadline(c, abstime, &k));
        if (r && errno == ETIMEDOUT) alone_reach(c, abstime);
        return r;
    }
    ensure_conn();
    if (wait_on(sem_ready, s, abs_timeout(abstime), sem_what(s), s, NULL)) { errno = ETIMEDOUT; return -1; }
    return 0;
}

int pthread_cond_signal(pthread_cond_t *c) {
    REAL(int, pthread_cond_signal, pthread_cond_t *);
    __sync_fetch_and_add(&cond_signals[cond_slot(c)], 1);
    bump(c);
    return real_pthread_cond_signal(c);
}
int pthread_cond_broadcast(pthread_cond_t *c) {
    REAL(int, pthread_cond_broadcast, pthread_cond_t *);
    __sync_fetch_and_add(&cond_signals[cond_slot(c)], 1);
    bump(c);
    return real_pthread_cond_broadcast(c);
}
static int cond_ready(void *p) { struct cond_wait *w = p; return cond_signals[w->slot] != w->seen; }
static int cond_common(pthread_cond_t *c, pthread_mutex_t *m, long long timeout_ns) {
    static int (*unlock)(pthread_mutex_t *);
    if (!unlock) unlock = dlsym(RTLD_NEXT, "pthread_mutex_unlock");
    struct cond_wait w = { cond_slot(c), 0 };
    w.seen = cond_signals[w.slot];
    unlock(m);
    bump(m);
    int late = wait_on(cond_ready, &w, timeout_ns, "cond", c, NULL);
    pthread_mutex_lock(m);
    return late ? ETIMEDOUT : 0;
}
int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
    REAL(int, pthread_cond_wait, pthread_cond_t *, pthread_mutex_t *);
    if (!enabled || !threads_too || in_vfork_child()) return real_pthread_cond_wait(c, m);
    ensure_conn();
    return cond_common(c, m, -1);
}
int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime) {
    REAL(int, pthread_cond_timedwait, pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
    if (!enabled || !threads_too || in_vfork_child()) {
        struct timespec k; int r = real_pthread_cond_timedwait(c, m, kernel_deadline(-1, abstime, &k));
        if (r == ETIMEDOUT) alone_reach(-1, abstime);
        return r;
    }
    ensure_conn();
    return cond_common(c, m, abs_timeout(abstime));
}

struct join_wait { pthread_t t; void **ret; int r; };
static int join_ready(void *p) { struct join_wait *j = p; j->r = pthread_tryjoin_np(j->t, j->ret); return j->r != EBUSY; }
int pthread_join(pthread_t t, void **ret) {
    REAL(int, pthread_join, pthread_t, void **);
    if (!enabled || !threads_too || in_vfork_child()) return real_pthread_join(t, ret);
    struct join_wait j = { t, ret, 0 };
    ensure_conn();
    wait_until(join_ready, &j, -1, "join");
    return j.r;
}

/* ---------------------------------------------------------------- more waits: C++ and Rust programs
 *
 * libstdc++'s condition_variable::wait_for and timed mutexes wait with POSIX's clock variants (glibc 2.30),
 * its shared_mutex with a rwlock; Rust's std (every Mutex, Condvar, RwLock, park) and libstdc++'s futures
 * and atomic waits call futex(2) through syscall(). Each is a wait of the scheduler like those above; a
 * thread not controlled or a process alone waits for real, on the kernel's clock ("kernel_deadline"). */

int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk, const struct timespec *abstime) {
    REAL(int, pthread_cond_clockwait, pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);
    if (!enabled || !threads_too || in_vfork_child()) {
        struct timespec k; int r = real_pthread_cond_clockwait(c, m, clk, kernel_deadline(clk, abstime, &k));
        if (r == ETIMEDOUT) alone_reach(clk, abstime);
        return r;
    }
    ensure_conn();
    clockid_t cc = clk;
    return cond_common(c, m, left_until(&cc, abstime));
}
int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clk, const struct timespec *abstime) {
    REAL(int, pthread_mutex_clocklock, pthread_mutex_t *, clockid_t, const struct timespec *);
    if (!controlled_lock()) {
        struct timespec k; int r = real_pthread_mutex_clocklock(m, clk, kernel_deadline(clk, abstime, &k));
        if (r == ETIMEDOUT) alone_reach(clk, abstime);
        return r;
    }
    int r = mutex_try(m);
    if (r != EBUSY) return r;
    clockid_t cc = clk;
    return mutex_wait(m, left_until(&cc, abstime));
}
int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime) {
    return pthread_mutex_clocklock(m, CLOCK_REALTIME, abstime);
}

static int rdlock_ready(void *l) {
    static int (*real)(pthread_rwlock_t *);
    if (!real) real = dlsym(RTLD_NEXT, "pthread_rwlock_tryrdlock");
    return real(l) == 0;
}
static int wrlock_ready(void *l) {
    static int (*real)(pthread_rwlock_t *);
    if (!real) real = dlsym(RTLD_NEXT, "pthread_rwlock_trywrlock");
    return real(l) == 0;
}
/* a rwlock's lock, until ``abstime`` on ``clk`` (NULL: no deadline); the real call when not controlled */
static int rwlock_lock(pthread_rwlock_t *l, int write, clockid_t clk, const struct timespec *abstime) {
    REAL(int, pthread_rwlock_clockrdlock, pthread_rwlock_t *, clockid_t, const struct timespec *);
    REAL(int, pthread_rwlock_clockwrlock, pthread_rwlock_t *, clockid_t, const struct timespec *);
    REAL(int, pthread_rwlock_rdlock, pthread_rwlock_t *);
    REAL(int, pthread_rwlock_wrlock, pthread_rwlock_t *);
    int (*ready)(void *) = write ? wrlock_ready : rdlock_ready;
    if (threads_too && ready(l)) return 0;
    if (!controlled_lock()) {
        if (!abstime) return write ? real_pthread_rwlock_wrlock(l) : real_pthread_rwlock_rdlock(l);
        struct timespec k; const struct timespec *at = kernel_deadline(clk, abstime, &k);
        int r = write ? real_pthread_rwlock_clockwrlock(l, clk, at) : real_pthread_rwlock_clockrdlock(l, clk, at);
        if (r == ETIMEDOUT) alone_reach(clk, abstime);
        return r;
    }
    long long timeout_ns = -1;
    if (abstime) { clockid_t cc = clk; timeout_ns = left_until(&cc, abstime); }
    return wait_on(ready, l, timeout_ns, l->__data.__shared ? "rwlock-shared" : "rwlock", l, NULL) ? ETIMEDOUT : 0;
}
int pthread_rwlock_rdlock(pthread_rwlock_t *l) { return rwlock_lock(l, 0, -1, NULL); }
int pthread_rwlock_wrlock(pthread_rwlock_t *l) { return rwlock_lock(l, 1, -1, NULL); }
int pthread_rwlock_timedrdlock(pthread_rwlock_t *l, const struct timespec *at) { return rwlock_lock(l, 0, CLOCK_REALTIME, at); }
int pthread_rwlock_timedwrlock(pthread_rwlock_t *l, const struct timespec *at) { return rwlock_lock(l, 1, CLOCK_REALTIME, at); }
int pthread_rwlock_clockrdlock(pthread_rwlock_t *l, clockid_t c, const struct timespec *at) { return rwlock_lock(l, 0, c, at); }
int pthread_rwlock_clockwrlock(pthread_rwlock_t *l, clockid_t c, const struct timespec *at) { return rwlock_lock(l, 1, c, at); }
int pthread_rwlock_unlock(pthread_rwlock_t *l) {
    REAL(int, pthread_rwlock_unlock, pthread_rwlock_t *);
    int r = real_pthread_rwlock_unlock(l);
    if (threads_too) bump(l);
    return r;
}

/* futex(2) through syscall(). A controlled thread's FUTEX_WAIT is a wait of the scheduler; this process's
 * wakes mark its waiters here, as the kernel's queue would (so a wake's count is exact: Rust's RwLock
 * decides by it whether to wake the readers too). A process-shared futex (no FUTEX_PRIVATE_FLAG) may be
 * woken from another process, which cannot mark these: its wait also ends once the word changed. Priority
 * inheritance and futex_waitv are not scheduler waits (a thread blocked there ends the run SchedulerStuck). */
#define FUTEX_QUEUE 256
static struct { const void *volatile addr; volatile int woken; } futex_waiters[FUTEX_QUEUE];
struct futex_wait { int i; const unsigned *word; unsigned val; int shared; };
static int futex_ready(void *p) {
    struct futex_wait *w = p;
    return futex_waiters[w->i].woken || (w->shared && __atomic_load_n(w->word, __ATOMIC_SEQ_CST) != w->val);
}
static long futex_wait(const unsigned *word, unsigned val, long long timeout_ns, int shared) {
    int i = 0;
    while (!__sync_bool_compare_and_swap(&futex_waiters[i].addr, NULL, (const void *)-1))
        if (++i == FUTEX_QUEUE) die("more futex waiters at once than the shim keeps");
    futex_waiters[i].woken = 0;
    __sync_synchronize();
    futex_waiters[i].addr = word;   /* in the queue before the word is compared: no wake is lost */
    __sync_synchronize();
    if (__atomic_load_n(word, __ATOMIC_SEQ_CST) != val) { futex_waiters[i].addr = NULL; errno = EAGAIN; return -1; }
    struct futex_wait w = { i, word, val, shared };
    int late = wait_on(futex_ready, &w, timeout_ns, shared ? "futex-shared" : "futex", word, NULL);
    int woken = futex_waiters[i].woken;
    __sync_synchronize();
    futex_waiters[i].addr = NULL;
    if (late && !woken) { errno = ETIMEDOUT; return -1; }
    return 0;
}
/* wake up to ``n`` of this process's waiters on ``word``; ``to``: move up to ``move`` more there instead */
static long futex_wake(const void *word, long n, const void *to, long move) {
    long woke = 0, moved = 0;
    for (int i = 0; i < FUTEX_QUEUE; i++) {
        if (futex_waiters[i].addr != word || futex_waiters[i].woken) continue;
        if (woke < n) { if (__sync_bool_compare_and_swap(&futex_waiters[i].woken, 0, 1)) woke++; }
        else if (to && moved < move && __sync_bool_compare_and_swap(&futex_waiters[i].addr, word, to)) moved++;
    }
    if (woke) bump(word);
    return woke + moved;
}
static long futex_call(long a0, long a1, long a2, long a3, long a4, long a5) {
    REAL(long, syscall, long, ...);
    unsigned *word = (unsigned *)a0;
    int op = (int)a1, cmd = op & FUTEX_CMD_MASK, shared = !(op & FUTEX_PRIVATE_FLAG);
    const struct timespec *ts = (const struct timespec *)a3;   /* FUTEX_WAIT's is relative, WAIT_BITSET's an instant */
    clockid_t clk = (op & FUTEX_CLOCK_REALTIME) ? CLOCK_REALTIME : CLOCK_MONOTONIC;
    if (cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET) {
        long long relative_ns = ts && cmd == FUTEX_WAIT ? ts->tv_sec * SEC + ts->tv_nsec : -1;
        if (controlled_lock()) {
            clockid_t cc = clk;
            return futex_wait(word, (unsigned)a2, ts && cmd == FUTEX_WAIT_BITSET ? left_until(&cc, ts) : relative_ns,
                              shared);
        }
        struct timespec k;
        long r = real_syscall(SYS_futex, a0, a1, a2, (long)(cmd == FUTEX_WAIT_BITSET ? kernel_deadline(clk, ts, &k) : ts),
                              a4, a5);
        if (r < 0 && errno == ETIMEDOUT && ts) {
            if (cmd == FUTEX_WAIT) alone_advance(relative_ns);
            else alone_reach(clk, ts);
        }
        return r;
    }
    if (cmd == FUTEX_CMP_REQUEUE && __atomic_load_n(word, __ATOMIC_SEQ_CST) != (unsigned)a5) { errno = EAGAIN; return -1; }
    long r = real_syscall(SYS_futex, a0, a1, a2, a3, a4, a5);
    if (r < 0) return r;
    switch (cmd) {   /* the kernel woke its own waiters (threads not controlled); now this process's */
    case FUTEX_WAKE: case FUTEX_WAKE_BITSET: {
        long n = a2 - r > 0 ? futex_wake(word, a2 - r, NULL, 0) : 0;
        return r + n;
    }
    case FUTEX_REQUEUE: case FUTEX_CMP_REQUEUE:
        return r + futex_wake(word, a2, (const void *)a4, a3);
    case FUTEX_WAKE_OP:   /* which words it wakes depends on the old value: both, a spurious wakeup at worst */
        return r + futex_wake(word, a2, NULL, 0) + futex_wake((const void *)a4, a3, NULL, 0);
    }
    return r;
}

struct epoll_wait_ { int ep; struct epoll_event *ev; int max; int r; };
static int epoll_ready(void *p) {
    struct epoll_wait_ *w = p;
    static int (*real)(int, struct epoll_event *, int, int);
    if (!real) real = dlsym(RTLD_NEXT, "epoll_wait");
    w->r = real(w->ep, w->ev, w->max, 0);
    return w->r != 0 && !(w->r < 0 && errno == EINTR);
}
int epoll_wait(int ep, struct epoll_event *ev, int max, int timeout_ms) {
    REAL(int, epoll_wait, int, struct epoll_event *, int, int);
    if (timeout_ms == 0) quick_poll();
    if (!enabled || !threads_too || timeout_ms == 0 || in_vfork_child())
        return alone_waited(real_epoll_wait(ep, ev, max, timeout_ms), timeout_ms * 1000000LL);
    struct epoll_wait_ w = { ep, ev, max, 0 };
    ensure_conn();
    struct probe p = { "", 0 }; probe_add(&p, ep, POLLIN);   /* an epoll fd reads ready while its ready list is not empty */
    if (wait_fds(epoll_ready, &w, timeout_ms < 0 ? -1 : timeout_ms * 1000000LL, "epoll", &p)) return 0;
    return w.r;
}
int epoll_pwait(int ep, struct epoll_event *ev, int max, int timeout_ms, const sigset_t *mask) {
    REAL(int, epoll_pwait, int, struct epoll_event *, int, int, const sigset_t *);
    if (timeout_ms == 0) quick_poll();
    if (!enabled || !threads_too || timeout_ms == 0 || in_vfork_child())
        return alone_waited(real_epoll_pwait(ep, ev, max, timeout_ms, mask), timeout_ms * 1000000LL);
    (void)mask;
    return epoll_wait(ep, ev, max, timeout_ms);
}

/* ---- exec'd children: their own name in the envp they get */

#define ENV_MAX 4096
static char *sched_env[16]; static int sched_envs;   /* LD_PRELOAD and CHAOS_SCHED_* as this process got them */

/* the variables a child gets from this process, whatever its caller's envp says (CHAOS_SCHED_THREADS
 * and CHAOS_SCHED_VPIDS are the caller's choice per program: they stay as given) */
static int is_sched_var(const char *kv) {
    return strncmp(kv, "LD_PRELOAD=", 11) == 0
        || (strncmp(kv, "CHAOS_SCHED_", 12) == 0 && strncmp(kv, "CHAOS_SCHED_THREADS=", 20) != 0
            && strncmp(kv, "CHAOS_SCHED_VPIDS=", 18) != 0 && strncmp(kv, "CHAOS_SCHED_WALL_MS=", 20) != 0);
}
static void remember_env(void) {
    extern char **environ;
    for (char **e = environ; e && *e && sched_envs < 13; e++)
        if (is_sched_var(*e) && strncmp(*e, "CHAOS_SCHED_NAME=", 17) && strncmp(*e, "CHAOS_SCHED_CHILD=", 18)
                && strncmp(*e, "CHAOS_SCHED_CONTROL=", 20))
            sched_env[sched_envs++] = strdup(*e);
    if (env_ll("CHAOS_SCHED_CONTROL", 0) == 1) {
        passthrough[0] = passthrough[1] = 1;   /* the harness's line channel: not for its children */
        unsetenv("CHAOS_SCHED_CONTROL");
    }
}
static void forget_passthrough(void) { passthrough[0] = passthrough[1] = 0; }

/* envp for a child: its own, without the scheduler's variables, then ours with the child's name */
static char **child_envp(char *const envp[], char **out, char *name_kv, size_t name_size, int new_child) {
    int n = 0;
    for (char *const *e = envp; e && *e && n < ENV_MAX - 20; e++) if (!is_sched_var(*e)) out[n++] = *e;
    for (int i = 0; i < sched_envs; i++) out[n++] = sched_env[i];
    if (new_child) snprintf(name_kv, name_size, "CHAOS_SCHED_NAME=%s/f%d", name, new_child);
    else snprintf(name_kv, name_size, "CHAOS_SCHED_NAME=%s", name);
    out[n++] = name_kv;
    if (new_child || is_child) out[n++] = "CHAOS_SCHED_CHILD=1";
    out[n] = NULL;
    return out;
}

/* an exec in a vfork child (the parent's memory): count the child, so the parent's next stop waits for
 * its hello; a failed exec takes it back */
/* (a process that forked and execs before any stop, a shell's "cmd & exec prog", tells its children at an
 * "exec" point first: the scheduler waits for their hellos before its new image's, which else came in
 * either order) */
#define EXEC_WITH_ENV(call, envp) do { \
    if (!enabled) return call(envp); \
    int vf_ = in_vfork_child(), nth_ = vf_ ? __sync_add_and_fetch(&forks, 1) : 0; \
    if (!vf_) send_chain(); \
    if (!vf_ && forks != forks_told) point("exec", forks, NULL); \
    char *env_[ENV_MAX]; char kv_[300]; \
    int r_ = call(child_envp(envp, env_, kv_, sizeof kv_, nth_)); \
    if (vf_) __sync_sub_and_fetch(&forks, 1); \
    return r_; } while (0)

extern char **environ;
int execve(const char *path, char *const argv[], char *const envp[]) {
    REAL(int, execve, const char *, char *const[], char *const[]);
#define CALL(e) real_execve(path, argv, e)
    EXEC_WITH_ENV(CALL, envp);
#undef CALL
}
int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }
int execvpe(const char *file, char *const argv[], char *const envp[]) {
    REAL(int, execvpe, const char *, char *const[], char *const[]);
#define CALL(e) real_execvpe(file, argv, e)
    EXEC_WITH_ENV(CALL, envp);
#undef CALL
}
int execvp(const char *file, char *const argv[]) { return execvpe(file, argv, environ); }
/* execl, execlp, execle: glibc's build the argv and call an internal execve, unseen; so here (on the stack:
 * a vfork child may call them) */
#define LIST_ARGS(arg, argv) \
    va_list ap; va_start(ap, arg); size_t n_ = 1; \
    { va_list c_; va_copy(c_, ap); while (va_arg(c_, char *)) n_++; va_end(c_); } \
    char *argv[n_ + 1]; argv[0] = (char *)arg; \
    for (size_t i_ = 1; i_ <= n_; i_++) argv[i_] = va_arg(ap, char *);   /* (the last: the NULL) */
int execl(const char *path, const char *arg, ...) { LIST_ARGS(arg, argv) va_end(ap); return execve(path, argv, environ); }
int execlp(const char *file, const char *arg, ...) { LIST_ARGS(arg, argv) va_end(ap); return execvpe(file, argv, environ); }
int execle(const char *path, const char *arg, ...) {
    LIST_ARGS(arg, argv)
    char *const *env = va_arg(ap, char *const *);   /* (after the NULL that ends the arguments) */
    va_end(ap);
    return execve(path, argv, env);
}
#undef LIST_ARGS
int fexecve(int fd, char *const argv[], char *const envp[]) {
    REAL(int, fexecve, int, char *const[], char *const[]);
#define CALL(e) real_fexecve(fd, argv, e)
    EXEC_WITH_ENV(CALL, envp);
#undef CALL
}

/* posix_spawn clones and execs inside libc (not through execve above): the parent names the child */
#define SPAWN(fn) int fn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa, \
        const posix_spawnattr_t *at, char *const argv[], char *const envp[]) { \
    REAL(int, fn, pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *, \
         char *const[], char *const[]); \
    if (!enabled || in_vfork_child()) return real_##fn(pid, path, fa, at, argv, envp); \
    int nth = forks + 1; char *env[ENV_MAX]; char kv[300]; \
    int r = real_##fn(pid, path, fa, at, argv, child_envp(envp, env, kv, sizeof kv, nth)); \
    if (r == 0) __sync_add_and_fetch(&forks, 1); \
    return r; }
SPAWN(posix_spawn) SPAWN(posix_spawnp)

/* ---------------------------------------------------------------- data */

/* reads are points only with $CHAOS_SCHED_READS=1: a read-modify-write is already preempted before its
 * write, and a store's reads under its own lock cannot be interleaved with anyway */

ssize_t read(int fd, void *buf, size_t n) {
    REAL(ssize_t, read, int, void *, size_t);
    if (reads_are_points && is_store_fd(fd)) FAIL_IF(point("read", (long long)n, fd_path[fd]));
    if ((enabled || alone) && fd >= 0 && fd < FD_MAX && random_fd[fd]) { fill_random(buf, n); return (ssize_t)n; }
    if (!is_store_fd(fd)) wait_for_fd(fd, POLLIN, "read-pipe");
    return real_read(fd, buf, n);
}
#define PREAD(fn) ssize_t fn(int fd, void *buf, size_t n, off_t off) { REAL(ssize_t, fn, int, void *, size_t, off_t); \
    if (reads_are_points && is_store_fd(fd)) { FAIL_IF(point("pread", (long long)off, fd_path[fd])); } return real_##fn(fd, buf, n, off); }
PREAD(pread) PREAD(pread64)

/* a change through a store fd: its result, after the file's times are made virtual ("file times") */
static long long changed(int fd, long long r) {
    if (r >= 0 && is_store_fd(fd) && !in_vfork_child()) { int e = errno; virtual_times(fd); errno = e; }
    return r;
}

/* a flying program's write another process may read at once: its stdout or stderr, a pipe or socket */
static int out_fd(int fd) {
    struct stat st;
    return flying && fd >= 0 && fd <= 2 && !in_vfork_child() && !passthrough[fd] && syscall(SYS_fstat, fd, &st) == 0
           && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}
static void exit_point(void) { if (enabled && conn >= 0 && !in_vfork_child()) point("exit", 0, NULL); }

ssize_t write(int fd, const void *buf, size_t n) {
    REAL(ssize_t, write, int, const void *, size_t);
    if (is_store_fd(fd)) FAIL_IF(point("write", (long long)n, fd_path[fd]));
    else { if (out_fd(fd)) FAIL_IF(point("out", fd, NULL)); wait_for_fd(fd, POLLOUT, "write-pipe"); }
    return changed(fd, real_write(fd, buf, n));
}
#define PWRITE(fn) ssize_t fn(int fd, const void *buf, size_t n, off_t off) { REAL(ssize_t, fn, int, const void *, size_t, off_t); \
    if (is_store_fd(fd)) { FAIL_IF(point("pwrite", (long long)off, fd_path[fd])); } return changed(fd, real_##fn(fd, buf, n, off)); }
PWRITE(pwrite) PWRITE(pwrite64)

ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    REAL(ssize_t, writev, int, const struct iovec *, int);
    if (is_store_fd(fd)) FAIL_IF(point("writev", cnt, fd_path[fd]));
    else if (out_fd(fd)) FAIL_IF(point("out", fd, NULL));
    return changed(fd, real_writev(fd, iov, cnt));
}

#define FTRUNC(fn) int fn(int fd, off_t len) { REAL(int, fn, int, off_t); \
    if (is_store_fd(fd)) { FAIL_IF(point("ftruncate", (long long)len, fd_path[fd])); } return (int)changed(fd, real_##fn(fd, len)); }
FTRUNC(ftruncate) FTRUNC(ftruncate64)

/* stats of store paths and fds: their times as "file times" says (the 64-bit names fill the same
 * struct on this ABI: one macro per shape, the struct its argument) */
_Static_assert(sizeof(struct stat) == sizeof(struct stat64), "struct stat64 is struct stat here");
static int store_at(int dirfd, const char *p, int flags) {
    char full[PATH_MAX + 256];
    return (flags & AT_EMPTY_PATH) && p && !*p ? is_store_fd(dirfd) : store_path(dirfd, p, full, sizeof full);
}
/* a stat's result ``r``, its times made virtual where it was of a store path or fd */
static int path_stat(int r, int dirfd, const char *p, int flags, void *st) {
    if (r == 0 && store_at(dirfd, p, flags)) stat_times(st);
    return r;
}
static int fd_stat(int r, int fd, void *st) {
    if (r == 0 && is_store_fd(fd)) stat_times(st);
    return r;
}
#define STAT_PATH(fn, st_t) int fn(const char *p, st_t *st) { REAL(int, fn, const char *, st_t *); \
    not_a_virtual_pid_in_proc(p); return path_stat(real_##fn(p, st), AT_FDCWD, p, 0, st); }
STAT_PATH(stat, struct stat) STAT_PATH(lstat, struct stat) STAT_PATH(stat64, struct stat64) STAT_PATH(lstat64, struct stat64)
#define FSTAT(fn, st_t) int fn(int fd, st_t *st) { REAL(int, fn, int, st_t *); return fd_stat(real_##fn(fd, st), fd, st); }
FSTAT(fstat, struct stat) FSTAT(fstat64, struct stat64)
#define FSTATAT(fn, st_t) int fn(int dirfd, const char *p, st_t *st, int flags) { \
    REAL(int, fn, int, const char *, st_t *, int); \
    not_a_virtual_pid_in_proc(p); return path_stat(real_##fn(dirfd, p, st, flags), dirfd, p, flags, st); }
FSTATAT(fstatat, struct stat) FSTATAT(fstatat64, struct stat64)
int statx(int dirfd, const char *p, int flags, unsigned mask, struct statx *sx) {
    REAL(int, statx, int, const char *, int, unsigned, struct statx *);
    not_a_virtual_pid_in_proc(p); int r = real_statx(dirfd, p, flags, mask, sx);
    if (r == 0 && store_at(dirfd, p, flags)) sx->stx_atime = sx->stx_ctime = sx->stx_mtime;
    return r; }

/* glibc's old stat names (a program built against glibc < 2.33 calls these: Node 20's fs.fstat) */
#define XSTAT(fn, st_t) int fn(int ver, const char *p, st_t *st) { REAL(int, fn, int, const char *, st_t *); \
    not_a_virtual_pid_in_proc(p); return path_stat(real_##fn(ver, p, st), AT_FDCWD, p, 0, st); }
XSTAT(__xstat, struct stat) XSTAT(__lxstat, struct stat) XSTAT(__xstat64, struct stat64) XSTAT(__lxstat64, struct stat64)
#define FXSTAT(fn, st_t) int fn(int ver, int fd, st_t *st) { REAL(int, fn, int, int, st_t *); \
    return fd_stat(real_##fn(ver, fd, st), fd, st); }
FXSTAT(__fxstat, struct stat) FXSTAT(__fxstat64, struct stat64)
#define FXSTATAT(fn, st_t) int fn(int ver, int dirfd, const char *p, st_t *st, int flags) { \
    REAL(int, fn, int, int, const char *, st_t *, int); \
    not_a_virtual_pid_in_proc(p); return path_stat(real_##fn(ver, dirfd, p, st, flags), dirfd, p, flags, st); }
FXSTATAT(__fxstatat, struct stat) FXSTATAT(__fxstatat64, struct stat64)

/* syscall(2): libuv closes every fd with syscall(SYS_close) and stats with syscall(SYS_statx), so a Node
 * program's close of a store fd went unseen (the number stayed the store file's, and a pipe or file that
 * got it next had its writes taken for that file's) and its stats saw the kernel's times. These calls,
 * and the clocks and randomness a program may read this way, take their libc names' path here (the
 * shim's own syscall() calls too: a close of its own fd is no store fd's); every other goes through. */
long syscall(long nr, ...) {
    va_list ap; va_start(ap, nr);
    long a0 = va_arg(ap, long), a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long),
         a4 = va_arg(ap, long), a5 = va_arg(ap, long);
    va_end(ap);
    switch (nr) {
    case SYS_close: return close((int)a0);
    case SYS_statx: return statx((int)a0, (const char *)a1, (int)a2, (unsigned)a3, (struct statx *)a4);
    case SYS_getrandom: return getrandom((void *)a0, (size_t)a1, (unsigned)a2);
    case SYS_clock_gettime: return clock_gettime((clockid_t)a0, (struct timespec *)a1);
    case SYS_gettimeofday: return gettimeofday((struct timeval *)a0, (void *)a1);
    case SYS_time: return time((time_t *)a0);
    case SYS_futex: return futex_call(a0, a1, a2, a3, a4, a5);
    }
    REAL(long, syscall, long, ...);
    return real_syscall(nr, a0, a1, a2, a3, a4, a5);
}

/* a directory's sync is its own call ("dirsync"): SQLite, like many stores, ignores its errors */
static const char *sync_call(int fd, const char *fn) { struct stat st;
    return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) ? "dirsync" : fn; }
#define SYNC(fn) int fn(int fd) { REAL(int, fn, int); \
    if (is_store_fd(fd)) { FAIL_IF(point(sync_call(fd, #fn), fd, fd_path[fd])); } return real_##fn(fd); }
SYNC(fsync) SYNC(fdatasync)

/* ---------------------------------------------------------------- names */

#define PATH1(fn, call, ...) { char full[PATH_MAX + 256]; \
    if (store_path(AT_FDCWD, path, full, sizeof full)) FAIL_IF(point(call, 0, full)); }

int unlink(const char *path) { REAL(int, unlink, const char *); PATH1(unlink, "unlink"); return real_unlink(path); }
int rmdir(const char *path) { REAL(int, rmdir, const char *); PATH1(rmdir, "rmdir"); return real_rmdir(path); }
int mkdir(const char *path, mode_t m) { REAL(int, mkdir, const char *, mode_t); PATH1(mkdir, "mkdir"); return real_mkdir(path, m); }
int truncate(const char *path, off_t len) { REAL(int, truncate, const char *, off_t); PATH1(truncate, "truncate"); return real_truncate(path, len); }

int unlinkat(int dirfd, const char *path, int flags) {
    REAL(int, unlinkat, int, const char *, int); char full[PATH_MAX + 256];
    if (store_path(dirfd, path, full, sizeof full)) FAIL_IF(point("unlink", flags, full));
    return real_unlinkat(dirfd, path, flags);
}
int mkdirat(int dirfd, const char *path, mode_t m) {
    REAL(int, mkdirat, int, const char *, mode_t); char full[PATH_MAX + 256];
    if (store_path(dirfd, path, full, sizeof full)) FAIL_IF(point("mkdir", 0, full));
    return real_mkdirat(dirfd, path, m);
}

/* a two-path call is a point when either side is a store path; the point names the destination */
static int two_paths(const char *call, int olddir, const char *old, int newdir, const char *new_) {
    char a[PATH_MAX + 256], b[PATH_MAX + 256];
    int sa = store_path(olddir, old, a, sizeof a), sb = store_path(newdir, new_, b, sizeof b);
    return sa || sb ? point(call, 0, sb ? b : a) : 0;
}
int rename(const char *o, const char *n) { REAL(int, rename, const char *, const char *);
    FAIL_IF(two_paths("rename", AT_FDCWD, o, AT_FDCWD, n)); return real_rename(o, n); }
int renameat(int od, const char *o, int nd, const char *n) { REAL(int, renameat, int, const char *, int, const char *);
    FAIL_IF(two_paths("rename", od, o, nd, n)); return real_renameat(od, o, nd, n); }
int renameat2(int od, const char *o, int nd, const char *n, unsigned f) {
    REAL(int, renameat2, int, const char *, int, const char *, unsigned);
    FAIL_IF(two_paths("rename", od, o, nd, n)); return real_renameat2(od, o, nd, n, f); }
int link(const char *o, const char *n) { REAL(int, link, const char *, const char *);
    FAIL_IF(two_paths("link", AT_FDCWD, o, AT_FDCWD, n)); return real_link(o, n); }
int linkat(int od, const char *o, int nd, const char *n, int f) { REAL(int, linkat, int, const char *, int, const char *, int);
    FAIL_IF(two_paths("link", od, o, nd, n)); return real_linkat(od, o, nd, n, f); }

/* ---------------------------------------------------------------- kills */

/* A SIGKILL a controlled process sends (a host's group kill after a call's timeout, a program's own
 * child kill): the kill, then a "kill" point whose arg is the target (kill()'s pid: <0 a group). The
 * scheduler waits there for every controlled process it hit to die, so each death lands in this
 * slice, not whenever the kernel got round to it (the killer's next wait for its child would be ready,
 * or not, by real time; a Wowbagger run ended in a deadlock so). glibc's killpg does not go through
 * kill(): both are here. */
int kill(pid_t pid, int sig) {
    REAL(int, kill, pid_t, int);
    if (enabled && !in_vfork_child() && (pid > VPID_BASE || pid < -VPID_BASE)) {
        /* a virtual pid (one a program read from a lock file): which process it is, and whether it is
         * still there, is the scheduler's answer at this point, in schedule order */
        int e = point("pid", pid < 0 ? -(long long)pid : pid, NULL);
        if (e) { errno = e; return -1; }
        if (grant_value <= 0) { errno = ESRCH; return -1; }
        if (sig == 0) return 0;
        pid = pid < 0 ? -(pid_t)grant_value : (pid_t)grant_value;
    }
    int r = real_kill(pid, sig);
    if (r == 0 && sig == SIGKILL && enabled && !in_vfork_child() && pid != 0 && pid != -1) {
        int e = errno; point("kill", pid, "-"); errno = e;
    }
    return r;
}
int killpg(pid_t pgrp, int sig) { return pgrp < 0 ? (errno = EINVAL, -1) : kill(-pgrp, sig); }

/* ---------------------------------------------------------------- pids */

/* A program names files after its pid and writes it in lock files, and Wowbagger hashes it into its
 * temp names: the kernel's pid differs between runs (and its length with it, so a program's
 * allocations, and when V8 collects garbage), so in a Node program ($CHAOS_SCHED_VPIDS=1, with its
 * children; Python processes keep the kernel's, which psutil looks up in /proc) getpid() is a
 * virtual one, numbered by the scheduler in the order of its processes' first grants and kept across
 * an exec. They start above PID_MAX_LIMIT (2^22), so kill() tells them from the real pids fork and
 * spawn return (a parent still signals its child by those). /proc has no entry for one: a program
 * that looks there for its own pid is told so (it dies, exit 86, with the reason on its stderr).
 * In a vfork child a process has its kernel pid; getppid() stays the kernel's. */
pid_t getpid(void) {
    if (!enabled || !vpids_on || in_vfork_child()) return (pid_t)syscall(SYS_getpid);
    if (!my_vpid) ensure_conn();
    return my_vpid ? my_vpid : (pid_t)syscall(SYS_getpid);
}

/* ---------------------------------------------------------------- locks */

int flock(int fd, int op) {
    REAL(int, flock, int, int);
    if (!is_store_fd(fd)) return real_flock(fd, op);
    took_lock = 1;
    FAIL_IF(point(op & LOCK_UN ? "unlock" : "flock", op, fd_path[fd]));
    if (op & (LOCK_NB | LOCK_UN)) return real_flock(fd, op);
    for (;;) {   /* a blocking flock never blocks for real: try, and on would-block give up the turn */
        int r = real_flock(fd, op | LOCK_NB);
        if (r == 0 || errno != EWOULDBLOCK) return r;
        blocked();
    }
}

static int lock_cmd(int cmd) {
    return cmd == F_SETLK || cmd == F_SETLKW || cmd == F_OFD_SETLK || cmd == F_OFD_SETLKW;
}

static int fcntl_common(int (*real)(int, int, ...), int fd, int cmd, void *arg) {
    if (!is_store_fd(fd) || !lock_cmd(cmd)) return real(fd, cmd, arg);
    took_lock = 1;
    struct flock *fl = arg;
    FAIL_IF(point(fl->l_type == F_UNLCK ? "unlock" : "lock", (long long)fl->l_start, fd_path[fd]));
    if (cmd == F_SETLK || cmd == F_OFD_SETLK) return real(fd, cmd, arg);
    int nb = cmd == F_SETLKW ? F_SETLK : F_OFD_SETLK;
    for (;;) {
        int r = real(fd, nb, arg);
        if (r == 0 || (errno != EAGAIN && errno != EACCES)) return r;
        blocked();
    }
}
int fcntl(int fd, int cmd, ...) { va_list ap; va_start(ap, cmd); void *arg = va_arg(ap, void *); va_end(ap);
    REAL(int, fcntl, int, int, ...); return fcntl_common(real_fcntl, fd, cmd, arg); }
int fcntl64(int fd, int cmd, ...) { va_list ap; va_start(ap, cmd); void *arg = va_arg(ap, void *); va_end(ap);
    REAL(int, fcntl64, int, int, ...); return fcntl_common(real_fcntl64, fd, cmd, arg); }

/* ---------------------------------------------------------------- randomness */

/* getrandom/getentropy give a stream seeded from the process's logical name (splitmix64), so a
 * program's random ids, Python's os.urandom and uuid4 among them, are the same in every run.
 * A read of /dev/urandom or /dev/random opened through open() gives the same stream (git's temp names). */

static unsigned long long splitmix64(void) {
    unsigned long long z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL; z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static void fill_random(void *buf, size_t n) {
    pthread_mutex_lock(&rng_lock);
    if (!rng_seeded) { for (const char *c = name; *c; c++) rng_state = rng_state * 131 + (unsigned char)*c; rng_seeded = 1; }
    unsigned char *b = buf;
    for (size_t i = 0; i < n; i += 8) { unsigned long long r = splitmix64(); size_t k = n - i < 8 ? n - i : 8; memcpy(b + i, &r, k); }
    pthread_mutex_unlock(&rng_lock);
}
ssize_t getrandom(void *buf, size_t n, unsigned int flags) {
    REAL(ssize_t, getrandom, void *, size_t, unsigned int);
    if (!(enabled || alone)) return real_getrandom(buf, n, flags);
    fill_random(buf, n);
    return (ssize_t)n;
}
int getentropy(void *buf, size_t n) {
    REAL(int, getentropy, void *, size_t);
    if (!(enabled || alone)) return real_getentropy(buf, n);
    if (n > 256) { errno = EIO; return -1; }
    fill_random(buf, n);
    return 0;
}

/* glibc's fopen opens its file without a call the shim interposes, and reads through the FILE without
 * read(): so a program's stdio open of /dev/urandom or /dev/random is a FILE of its own (fopencookie)
 * whose reads are the same stream (it has no fd: fileno is -1), and a clock or machine file opened so is
 * reported as through open. A store path is opened with open() (its "open" or "creat" point, its fd
 * the store's) and its FILE made on that fd, and fclose is its "close" point: C++'s ofstream writes the
 * fd with write(), each a point, and an fsync(fileno(f)) is one. What a FILE's own buffer writes reaches
 * the kernel at its flushes with glibc's internal write, no point: inside the slice of the thread that
 * flushes, so serialized, but no fault lands on it (docs/deterministic.md, "Store files through stdio"). */
static ssize_t random_cookie_read(void *cookie, char *buf, size_t n) { (void)cookie; fill_random(buf, n); return (ssize_t)n; }
static int random_cookie_close(void *cookie) { (void)cookie; return 0; }
/* open(2)'s flags for fopen's mode, and the mode fdopen takes ("r", "w", "a", with "+") */
static int stdio_flags(const char *mode, char fd_mode[3]) {
    int plus = strchr(mode, '+') != NULL, f;
    switch (mode[0]) {
    case 'r': f = plus ? O_RDWR : O_RDONLY; break;
    case 'w': f = (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_TRUNC; break;
    case 'a': f = (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_APPEND; break;
    default: return -1;
    }
    fd_mode[0] = mode[0]; fd_mode[1] = plus ? '+' : 0; fd_mode[2] = 0;
    return f | (strchr(mode, 'x') ? O_EXCL : 0) | (strchr(mode, 'e') ? O_CLOEXEC : 0);
}
static FILE *fopen_common(FILE *(*real)(const char *, const char *), const char *path, const char *mode) {
    if ((enabled || alone) && a_random_device(path) && mode && mode[0] == 'r' && !strchr(mode, '+')) {
        cookie_io_functions_t io = {.read = random_cookie_read, .close = random_cookie_close};
        return fopencookie(NULL, mode, io);
    }
    char full[PATH_MAX + 256], fd_mode[3]; int flags;
    if (enabled && !in_vfork_child() && path && mode && (flags = stdio_flags(mode, fd_mode)) >= 0
        && store_path(AT_FDCWD, path, full, sizeof full)) {
        int fd = open_common("fopen", AT_FDCWD, path, flags, 0666);
        if (fd < 0) return NULL;
        FILE *f = fdopen(fd, fd_mode);
        if (!f) { int e = errno; store_fd[fd] = 0; syscall(SYS_close, fd); errno = e; }
        return f;
    }
    not_a_virtual_pid_in_proc(path);
    uncontrolled_file_opened(path);   /* (its list is /proc and /sys: never a store path) */
    return real(path, mode);
}
FILE *fopen(const char *path, const char *mode) {
    REAL(FILE *, fopen, const char *, const char *); return fopen_common(real_fopen, path, mode); }
FILE *fopen64(const char *path, const char *mode) {
    REAL(FILE *, fopen64, const char *, const char *); return fopen_common(real_fopen64, path, mode); }
/* a store FILE's close: the point first (a kill there loses what its buffer held, as a real one would) */
int fclose(FILE *f) {
    REAL(int, fclose, FILE *);
    int fd = f ? fileno(f) : -1;
    if (!is_store_fd(fd) || in_vfork_child()) return real_fclose(f);
    int e = point("close", fd, fd_path[fd]);
    store_fd[fd] = 0;
    int r = real_fclose(f);
    if (e) { errno = e; return EOF; }
    return r;
}

/* ---------------------------------------------------------------- virtual time */

static int virtual_clock(clockid_t c) {
    return c == CLOCK_REALTIME || c == CLOCK_REALTIME_COARSE || c == CLOCK_TAI || c == CLOCK_MONOTONIC
        || c == CLOCK_MONOTONIC_COARSE || c == CLOCK_MONOTONIC_RAW || c == CLOCK_BOOTTIME;
}
static int wall_clock(clockid_t c) { return c == CLOCK_REALTIME || c == CLOCK_REALTIME_COARSE || c == CLOCK_TAI; }
/* a virtual clock now, without counting a read */
static long long virtual_now(clockid_t c) {
    if (alone)
        return (wall_clock(c) ? epoch_ns : mono_ns) + alone_reads * US;
    return wall_clock(c) ? wall_now() : mono_ns + local_vt();
}
static long long now_of(clockid_t c) {
    if (alone) {   /* no scheduler: the virtual epoch, 1 us per read and the length of each sleep */
        long long t = __sync_add_and_fetch(&alone_reads, 1) * US;
        return (wall_clock(c) ? epoch_ns : mono_ns) + t;
    }
    ensure_conn();
    reads++;
    return virtual_now(c);
}

/* A wait the kernel times, on a deadline the program took from our clocks (a thread not controlled, a
 * process alone): the same time left, on the kernel's clock. A virtual instant is no instant of the
 * machine's: the virtual monotonic clock starts at 1,000 s, and on a machine up for less a real wait
 * for it lasted until the machine caught up (a set-up program's first time.sleep, minutes on a fresh
 * CI machine). ``c`` < 0: the clock is not known (a condition's), told by the size of the instant. */
static long long left_until(clockid_t *c, const struct timespec *at) {   /* -1: not on our clocks */
    long long at_ns = at->tv_sec * SEC + at->tv_nsec;
    if ((int)*c < 0) *c = at_ns > epoch_ns / 2 ? CLOCK_REALTIME : CLOCK_MONOTONIC;
    if (!virtual_clock(*c)) return -1;
    long long now = virtual_now(*c);
    return at_ns > now ? at_ns - now : 0;
}
static const struct timespec *kernel_deadline(clockid_t c, const struct timespec *at, struct timespec *out) {
    if (!(enabled || alone) || !at) return at;
    long long left = left_until(&c, at);
    if (left < 0) return at;
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = dlsym(RTLD_NEXT, "clock_gettime");   /* (not syscall(): ours answers virtually) */
    struct timespec k;
    real(c, &k);
    long long t = k.tv_sec * SEC + k.tv_nsec + left;
    out->tv_sec = t / SEC; out->tv_nsec = t % SEC;
    return out;
}
/* a process alone moves its clocks on by what it waited (1 us a read in between) */
static void alone_advance(long long ns) {
    if (alone && ns > 0) __sync_add_and_fetch(&alone_reads, ns / US);
}
/* a timed wait of a process alone that timed out: its clocks are at its deadline (as after a sleep) */
static void alone_reach(clockid_t c, const struct timespec *at) {
    if (alone && at) alone_advance(left_until(&c, at));
}
/* a poll, select or epoll wait of a process alone that timed out (``result`` 0): its clocks move on by its
 * timeout, as after a sleep (an event loop's timer comes due; ``timeout_ns`` < 0: none) */
static int alone_waited(int result, long long timeout_ns) {
    if (result == 0) alone_advance(timeout_ns);
    return result;
}
/* a sleep of a process alone: real, and its clocks move on by its length (a wait loop ends when the
 * program's deadline comes, not after a million reads) */
static int alone_sleep(long long ns, struct timespec *rem) {
    static int (*real)(clockid_t, int, const struct timespec *, struct timespec *);
    if (!real) real = dlsym(RTLD_NEXT, "clock_nanosleep");
    if (ns < 0) ns = 0;
    alone_advance(ns);
    struct timespec d = { ns / SEC, ns % SEC };
    return real(CLOCK_MONOTONIC, 0, &d, rem);
}

int clock_gettime(clockid_t c, struct timespec *ts) {
    REAL(int, clock_gettime, clockid_t, struct timespec *);
    if (!virtual_clock(c)) { other_clock_read(c); return real_clock_gettime(c, ts); }
    if (!(enabled || alone)) return real_clock_gettime(c, ts);
    long long t = now_of(c); ts->tv_sec = t / SEC; ts->tv_nsec = t % SEC; return 0;
}
int getrusage(int who, struct rusage *ru) {
    REAL(int, getrusage, int, struct rusage *);
    cpu_time_read(CPU_GETRUSAGE); return real_getrusage(who, ru);
}
clock_t times(struct tms *buf) {
    REAL(clock_t, times, struct tms *);
    cpu_time_read(CPU_TIMES); return real_times(buf);
}
clock_t clock(void) {
    REAL(clock_t, clock, void);
    cpu_time_read(CPU_CLOCK); return real_clock();
}
int gettimeofday(struct timeval *tv, void *tz) {
    REAL(int, gettimeofday, struct timeval *, void *);
    if (!(enabled || alone)) return real_gettimeofday(tv, tz);
    long long t = now_of(CLOCK_REALTIME); if (tv) { tv->tv_sec = t / SEC; tv->tv_usec = (t % SEC) / US; } return 0;
}
time_t time(time_t *out) {
    REAL(time_t, time, time_t *);
    if (!(enabled || alone)) return real_time(out);
    time_t t = (time_t)(now_of(CLOCK_REALTIME) / SEC); if (out) *out = t; return t;
}

static int virtual_sleep(long long ns) { return point("sleep", ns < 0 ? 0 : ns, NULL); }

int nanosleep(const struct timespec *req, struct timespec *rem) {
    REAL(int, nanosleep, const struct timespec *, struct timespec *);
    if (alone) { int e = alone_sleep(req->tv_sec * SEC + req->tv_nsec, rem); if (e) { errno = e; return -1; } return 0; }
    if (!enabled) return real_nanosleep(req, rem);
    FAIL_IF(virtual_sleep(req->tv_sec * SEC + req->tv_nsec));
    if (rem) rem->tv_sec = rem->tv_nsec = 0;
    return 0;
}
int clock_nanosleep(clockid_t c, int flags, const struct timespec *req, struct timespec *rem) {
    REAL(int, clock_nanosleep, clockid_t, int, const struct timespec *, struct timespec *);
    if (!(enabled || alone) || !virtual_clock(c)) return real_clock_nanosleep(c, flags, req, rem);
    long long ns = req->tv_sec * SEC + req->tv_nsec;
    if (flags & TIMER_ABSTIME) ns -= now_of(c);
    if (alone) return alone_sleep(ns, flags & TIMER_ABSTIME ? NULL : rem);
    int e = virtual_sleep(ns);
    if (rem && !(flags & TIMER_ABSTIME)) rem->tv_sec = rem->tv_nsec = 0;
    return e;   /* clock_nanosleep returns the error number itself */
}
int usleep(useconds_t us) {
    REAL(int, usleep, useconds_t);
    if (alone) { int e = alone_sleep((long long)us * US, NULL); if (e) { errno = e; return -1; } return 0; }
    if (!enabled) return real_usleep(us);
    FAIL_IF(virtual_sleep((long long)us * US));
    return 0;
}
unsigned int sleep(unsigned int s) {
    REAL(unsigned int, sleep, unsigned int);
    if (alone) { alone_sleep((long long)s * SEC, NULL); return 0; }
    if (!enabled) return real_sleep(s);
    virtual_sleep((long long)s * SEC);
    return 0;
}
