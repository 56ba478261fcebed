/* powerloss: journal every change that a power loss could still undo (LD_PRELOAD shim).
 *
 * The target writes to the real file system as usual; before each change to a
 * path under $POWERLOSS_PREFIX it appends an UNDO record to the shared log
 * $POWERLOSS_LOG (one write(2) per record on an O_APPEND fd, so records of
 * concurrent processes never interleave). After every fsync/fdatasync that
 * returned 0 it appends a SYNC marker for that inode. At a "power-off" the
 * harness SIGKILLs every process and replays the log (powerloss.py): whatever
 * is not covered by a later SYNC of the right inode is undone, so the files
 * are what a disk that kept only fsynced data would hold.
 *
 * Covered (each record is written BEFORE the change it describes):
 *   W  data: write, pwrite(64), writev, pwritev(64): old bytes of the range, old size
 *   T  truncate: ftruncate(64), truncate(64), open(O_TRUNC): old size and the cut bytes
 *   C  new name: open/openat/creat(O_CREAT) of a missing file, link, mkdir, symlink
 *   U  removed name: unlink, unlinkat (the inode is kept alive by a hard link in $POWERLOSS_STASH)
 *   R  rename, renameat, renameat2 (a replaced target is stashed the same way)
 *   S  sync marker: fsync/fdatasync of a file covers its data and size; of a directory, its entries
 *   A  syncfs / sync: everything on the file system
 *   X  cancel: the call a record announced failed (body: that record's sequence number)
 *   H  halt: this process stops itself now (below; no body), and again if continued while that halt is armed
 * Halt: while the file $POWERLOSS_HALT exists and holds a number k, a process writes an H record and
 * SIGSTOPs itself (the signal aimed at the thread that made the change) right after its k-th journaled
 * change since it first saw that file: the harness then cuts the power at a moment when something is
 * surely uncovered (a power-off between two transactions would lose nothing).
 * Data is durable after fsync of the file; a name after fsync of its directory (POSIX, not ext4's
 * stronger ordering). Not covered: mmap writes (msync), sendfile, copy_file_range, fallocate, O_DIRECT
 * semantics, processes started without the preload, and writers that race on the same byte range
 * without a lock (the old bytes recorded may then be the other writer's).
 * Build: gcc -shared -fPIC -O2 -o powerloss.so powerloss.c (powerloss.py does this). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <signal.h>
#include <unistd.h>

#define MAXREC (1 << 20)          /* old bytes are kept in chunks of at most this size */

static int log_fd = -1;
static dev_t log_dev;
static ino_t log_ino;
static unsigned long stash_seq;

/* raw system calls only: the shim never re-enters its own wrappers */
static ssize_t sys_write(int fd, const void *b, size_t n) { return syscall(SYS_write, fd, b, n); }
static ssize_t sys_pread(int fd, void *b, size_t n, off_t o) { return syscall(SYS_pread64, fd, b, n, o); }
static int sys_fstat(int fd, struct stat *st) { return syscall(SYS_fstat, fd, st); }
static int sys_stat(const char *p, struct stat *st) { return syscall(SYS_newfstatat, AT_FDCWD, p, st, 0); }
static int sys_lstat(const char *p, struct stat *st) { return syscall(SYS_newfstatat, AT_FDCWD, p, st, AT_SYMLINK_NOFOLLOW); }
static int sys_open(const char *p, int fl, int mode) { return syscall(SYS_openat, AT_FDCWD, p, fl, mode); }

static const char *prefix(void) { const char *p = getenv("POWERLOSS_PREFIX"); return p && *p ? p : NULL; }

static int logfd(void) {
    struct stat st;
    if (log_fd >= 0 && sys_fstat(log_fd, &st) == 0 && st.st_dev == log_dev && st.st_ino == log_ino) return log_fd;
    const char *path = getenv("POWERLOSS_LOG");
    if (!path) return -1;
    int fd = sys_open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    if (fd < 100) {   /* keep it out of the way of the program's low descriptors */
        int hi = syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 100);
        if (hi >= 0) { syscall(SYS_close, fd); fd = hi; }
    }
    sys_fstat(fd, &st);
    log_fd = fd; log_dev = st.st_dev; log_ino = st.st_ino;
    return fd;
}

/* one record: u32 length (of everything after it), u8 type, u32 pid, u64 seq, then the body */
struct rec { char *buf; size_t len, cap; };
static int put(struct rec *r, const void *p, size_t n) {
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        while (cap < r->len + n) cap *= 2;
        char *b = realloc(r->buf, cap);
        if (!b) return -1;
        r->buf = b; r->cap = cap;
    }
    memcpy(r->buf + r->len, p, n); r->len += n;
    return 0;
}
static void put64(struct rec *r, uint64_t v) { put(r, &v, 8); }
static void putstr(struct rec *r, const char *s) { uint32_t n = s ? strlen(s) : 0; put(r, &n, 4); if (n) put(r, s, n); }
static unsigned long long rec_seq;
static uint64_t begin(struct rec *r, char type) {
    uint32_t zero = 0, pid = getpid(); uint64_t seq = __sync_add_and_fetch(&rec_seq, 1);
    r->buf = NULL; r->len = r->cap = 0;
    put(r, &zero, 4); put(r, &type, 1); put(r, &pid, 4); put64(r, seq);
    return seq;
}
static void emit(struct rec *r) {
    int fd = logfd();
    if (fd >= 0 && r->buf) {
        uint32_t n = r->len - 4; memcpy(r->buf, &n, 4);
        size_t off = 0;
        while (off < r->len) { ssize_t w = sys_write(fd, r->buf + off, r->len - off); if (w <= 0) break; off += w; }
    }
    free(r->buf); r->buf = NULL;
}

/* absolute path of (dirfd, path) without resolving symlinks; 0 on success */
static int absolute(int dirfd, const char *path, char *out) {
    char base[PATH_MAX];
    if (!path) return -1;
    if (path[0] == '/') { if (strlen(path) >= PATH_MAX) return -1; strcpy(out, path); return 0; }
    if (dirfd == AT_FDCWD) { if (!getcwd(base, sizeof base)) return -1; }
    else { char l[64]; snprintf(l, sizeof l, "/proc/self/fd/%d", dirfd);
           ssize_t n = readlink(l, base, sizeof base - 1); if (n < 0) return -1; base[n] = 0; }
    if (strlen(base) + strlen(path) + 2 > PATH_MAX) return -1;
    snprintf(out, PATH_MAX, "%s/%s", base, path);
    return 0;
}
static int under(const char *abs) { const char *p = prefix(); return p && strncmp(abs, p, strlen(p)) == 0; }
static int fd_under(int fd, char *abs) {
    char l[64]; snprintf(l, sizeof l, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(l, abs, PATH_MAX - 1); if (n < 0) return 0; abs[n] = 0;
    return under(abs);
}
static void parent_of(const char *abs, char *dir, const char **name) {
    strcpy(dir, abs);
    char *s = strrchr(dir, '/');
    while (s && s > dir && s[1] == 0) { *s = 0; s = strrchr(dir, '/'); }   /* trailing slashes */
    *name = abs + (s ? (s - dir) + 1 : 0);
    if (s == dir) dir[1] = 0; else if (s) *s = 0;
}
static void put_dir(struct rec *r, const char *dir) {
    struct stat st; if (sys_stat(dir, &st) != 0) memset(&st, 0, sizeof st);
    put64(r, st.st_dev); put64(r, st.st_ino); putstr(r, dir);
}

/* read old bytes even through a write-only descriptor (reopen it read-only through /proc) */
static ssize_t read_old(int fd, void *buf, size_t n, off_t off) {
    ssize_t got = sys_pread(fd, buf, n, off);
    if (got >= 0 || errno != EBADF) return got;
    char l[64]; snprintf(l, sizeof l, "/proc/self/fd/%d", fd);
    int rfd = sys_open(l, O_RDONLY | O_CLOEXEC, 0);
    if (rfd < 0) return -1;
    got = sys_pread(rfd, buf, n, off);
    syscall(SYS_close, rfd);
    return got;
}

/* W: the old bytes of [off, off+len) that exist, and the old size */
static uint64_t note_write(int fd, off_t off, size_t len, int append) {
    char abs[PATH_MAX]; struct stat st;
    if (!prefix() || !fd_under(fd, abs) || sys_fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    if (append) off = st.st_size;
    else if (off < 0) off = syscall(SYS_lseek, fd, 0, SEEK_CUR);
    if (off < 0) return 0;
    uint64_t have = off < st.st_size ? (uint64_t)(st.st_size - off) : 0;
    if (have > len) have = len;
    struct rec r; uint64_t seq = begin(&r, 'W');
    put64(&r, st.st_dev); put64(&r, st.st_ino); put64(&r, off); put64(&r, len); put64(&r, st.st_size);
    put64(&r, have);
    if (have) {
        char *tmp = malloc(have);
        ssize_t got = tmp ? read_old(fd, tmp, have, off) : -1;
        if (got != (ssize_t)have) { free(tmp); free(r.buf); return 0; }   /* cannot undo it: say nothing false */
        put(&r, tmp, have); free(tmp);
    }
    putstr(&r, abs);
    emit(&r);
    return seq;
}

/* T: size going from st_size to new_size; the bytes cut off */
static uint64_t note_truncate_fd(int fd, off_t new_size) {
    char abs[PATH_MAX]; struct stat st;
    if (!prefix() || !fd_under(fd, abs) || sys_fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    uint64_t cut = st.st_size > new_size ? (uint64_t)(st.st_size - new_size) : 0;
    struct rec r; uint64_t seq = begin(&r, 'T');
    put64(&r, st.st_dev); put64(&r, st.st_ino); put64(&r, new_size); put64(&r, st.st_size); put64(&r, cut);
    if (cut) {
        char *tmp = malloc(cut);
        ssize_t got = tmp ? read_old(fd, tmp, cut, new_size) : -1;
        if (got != (ssize_t)cut) { free(tmp); free(r.buf); return 0; }
        put(&r, tmp, cut); free(tmp);
    }
    putstr(&r, abs);
    emit(&r);
    return seq;
}
static void note_truncate_path(const char *abs, off_t new_size) {
    int fd = sys_open(abs, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return;
    note_truncate_fd(fd, new_size);
    syscall(SYS_close, fd);
}

/* C: a new name (dir, name) */
static uint64_t note_create(const char *abs) {
    char dir[PATH_MAX]; const char *name;
    parent_of(abs, dir, &name);
    struct rec r; uint64_t seq = begin(&r, 'C'); put_dir(&r, dir); putstr(&r, name); emit(&r);
    return seq;
}
/* X: the call announced by record `seq` failed, so it changed nothing */
static void cancel(uint64_t seq) {
    if (!seq) return;
    struct rec r; begin(&r, 'X'); put64(&r, seq); emit(&r);
}
static void maybe_halt(void);
static int done(uint64_t seq, long rc) {
    if (rc < 0) { int e = errno; cancel(seq); errno = e; } else if (seq) maybe_halt();
    return rc;
}

/* keep the inode behind `abs` alive: a hard link in the stash; the stash name, or "" */
static void stash(const char *abs, char *out) {
    const char *sd = getenv("POWERLOSS_STASH"); struct stat st;
    out[0] = 0;
    if (!sd || sys_lstat(abs, &st) != 0 || S_ISDIR(st.st_mode)) return;
    snprintf(out, PATH_MAX, "%s/%d.%lu.%lx", sd, getpid(), __sync_add_and_fetch(&stash_seq, 1), (unsigned long)st.st_ino);
    if (syscall(SYS_linkat, AT_FDCWD, abs, AT_FDCWD, out, 0) != 0) out[0] = 0;
}

/* U: a name removed (dir, name, stash) */
static uint64_t note_unlink(const char *abs) {
    char dir[PATH_MAX], st[PATH_MAX]; const char *name; struct stat s;
    if (sys_lstat(abs, &s) != 0) return 0;
    parent_of(abs, dir, &name); stash(abs, st);
    struct rec r; uint64_t seq = begin(&r, 'U');
    put_dir(&r, dir); putstr(&r, name); putstr(&r, st); put64(&r, S_ISDIR(s.st_mode));
    emit(&r);
    return seq;
}

/* R: from -> to (and the stashed old target, if any) */
static uint64_t note_rename(const char *from, const char *to, int exchange) {
    char fd_[PATH_MAX], td[PATH_MAX], st[PATH_MAX]; const char *fn, *tn; struct stat s;
    parent_of(from, fd_, &fn); parent_of(to, td, &tn);
    st[0] = 0;
    if (!exchange && sys_lstat(to, &s) == 0) stash(to, st);
    struct rec r; uint64_t seq = begin(&r, 'R');
    put_dir(&r, fd_); putstr(&r, fn); put_dir(&r, td); putstr(&r, tn); putstr(&r, st); put64(&r, exchange);
    emit(&r);
    return seq;
}

static void note_sync(int fd, char type) {
    struct stat st;
    if (!prefix() || sys_fstat(fd, &st) != 0) return;
    struct rec r; begin(&r, type); put64(&r, st.st_dev); put64(&r, st.st_ino); emit(&r);
}

/* ---------------------------------------------------------------- halt */

static void maybe_halt(void) {
    static ino_t seen_ino; static long seen_ns, count, want;
    const char *h = getenv("POWERLOSS_HALT"); struct stat st;
    if (!h || sys_stat(h, &st) != 0) return;
    if (st.st_ino != seen_ino || st.st_mtim.tv_nsec != seen_ns) {
        char b[32] = {0}; int fd = sys_open(h, O_RDONLY | O_CLOEXEC, 0);
        if (fd >= 0) { syscall(SYS_read, fd, b, sizeof b - 1); syscall(SYS_close, fd); }
        seen_ino = st.st_ino; seen_ns = st.st_mtim.tv_nsec; count = 0; want = atol(b);
    }
    /* to this thread (tgkill), not the process: a process-directed SIGSTOP is taken by its main
     * thread, which stops the others only when it is scheduled, and meanwhile this one ran on and
     * could sync and finish the very transaction the cut was to fall inside */
    if (++count < want) return;
    /* the H record: the harness knows this stop is the cut, not another fault's. A SIGCONT before the
     * power-off took the cut (another fault's heal: a pause that found this process stopped) does not end
     * it: while the same halt is armed the thread stops again, with another H */
    do {
        struct rec r; begin(&r, 'H'); emit(&r);
        syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGSTOP);
    } while (sys_stat(h, &st) == 0 && st.st_ino == seen_ino && st.st_mtim.tv_nsec == seen_ns);
}
static long after(uint64_t seq, long rc) { if (seq && rc >= 0) maybe_halt(); return rc; }

/* ---------------------------------------------------------------- wrappers */

static int open_common(int dirfd, const char *path, int flags, int mode) {
    char abs[PATH_MAX]; struct stat st;
    int watched = prefix() && absolute(dirfd, path, abs) == 0 && under(abs);
    int existed = watched && sys_stat(abs, &st) == 0;
    uint64_t seq = watched && (flags & O_CREAT) && !existed ? note_create(abs) : 0;
    if (watched && existed && (flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY && S_ISREG(st.st_mode) && st.st_size)
        note_truncate_path(abs, 0);
    return done(seq, syscall(SYS_openat, dirfd, path, flags, mode));
}
#define MODE_ARG(flags) int mode = 0; if ((flags) & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, int); va_end(ap); }
int open(const char *p, int flags, ...) { MODE_ARG(flags); return open_common(AT_FDCWD, p, flags, mode); }
int open64(const char *p, int flags, ...) { MODE_ARG(flags); return open_common(AT_FDCWD, p, flags, mode); }
int openat(int d, const char *p, int flags, ...) { MODE_ARG(flags); return open_common(d, p, flags, mode); }
int openat64(int d, const char *p, int flags, ...) { MODE_ARG(flags); return open_common(d, p, flags, mode); }
int creat(const char *p, mode_t m) { return open_common(AT_FDCWD, p, O_CREAT | O_WRONLY | O_TRUNC, m); }
int creat64(const char *p, mode_t m) { return open_common(AT_FDCWD, p, O_CREAT | O_WRONLY | O_TRUNC, m); }

static int appending(int fd) { int fl = syscall(SYS_fcntl, fd, F_GETFL); return fl >= 0 && (fl & O_APPEND); }
ssize_t write(int fd, const void *b, size_t n) { uint64_t s = n ? note_write(fd, -1, n, appending(fd)) : 0;
    return after(s, syscall(SYS_write, fd, b, n)); }
ssize_t pwrite(int fd, const void *b, size_t n, off_t o) { uint64_t s = n ? note_write(fd, o, n, 0) : 0;
    return after(s, syscall(SYS_pwrite64, fd, b, n, o)); }
ssize_t pwrite64(int fd, const void *b, size_t n, off_t o) { return pwrite(fd, b, n, o); }
static size_t iov_len(const struct iovec *v, int c) { size_t n = 0; for (int i = 0; i < c; i++) n += v[i].iov_len; return n; }
ssize_t writev(int fd, const struct iovec *v, int c) { size_t n = iov_len(v, c); uint64_t s = n ? note_write(fd, -1, n, appending(fd)) : 0;
    return after(s, syscall(SYS_writev, fd, v, c)); }
ssize_t pwritev(int fd, const struct iovec *v, int c, off_t o) { size_t n = iov_len(v, c); uint64_t s = n ? note_write(fd, o, n, 0) : 0;
    return after(s, syscall(SYS_pwritev, fd, v, c, (long)o, (long)0)); }
ssize_t pwritev64(int fd, const struct iovec *v, int c, off_t o) { return pwritev(fd, v, c, o); }

int ftruncate(int fd, off_t n) { uint64_t s = note_truncate_fd(fd, n); return after(s, syscall(SYS_ftruncate, fd, n)); }
int ftruncate64(int fd, off_t n) { return ftruncate(fd, n); }
int truncate(const char *p, off_t n) { char abs[PATH_MAX];
    if (prefix() && absolute(AT_FDCWD, p, abs) == 0 && under(abs)) note_truncate_path(abs, n);
    return syscall(SYS_truncate, p, n); }
int truncate64(const char *p, off_t n) { return truncate(p, n); }

static int unlink_common(int d, const char *p, int flags) { char abs[PATH_MAX]; uint64_t seq = 0;
    if (prefix() && absolute(d, p, abs) == 0 && under(abs)) seq = note_unlink(abs);
    return done(seq, syscall(SYS_unlinkat, d, p, flags)); }
int unlink(const char *p) { return unlink_common(AT_FDCWD, p, 0); }
int unlinkat(int d, const char *p, int f) { return unlink_common(d, p, f); }
int rmdir(const char *p) { return unlink_common(AT_FDCWD, p, AT_REMOVEDIR); }

static int rename_common(int od, const char *o, int nd, const char *n, unsigned flags) {
    char a[PATH_MAX], b[PATH_MAX]; uint64_t seq = 0;
    if (prefix() && absolute(od, o, a) == 0 && absolute(nd, n, b) == 0 && (under(a) || under(b)))
        seq = note_rename(a, b, (flags & 2 /* RENAME_EXCHANGE */) != 0);
    return done(seq, syscall(SYS_renameat2, od, o, nd, n, flags));
}
int rename(const char *o, const char *n) { return rename_common(AT_FDCWD, o, AT_FDCWD, n, 0); }
int renameat(int od, const char *o, int nd, const char *n) { return rename_common(od, o, nd, n, 0); }
int renameat2(int od, const char *o, int nd, const char *n, unsigned f) { return rename_common(od, o, nd, n, f); }

static uint64_t new_name(int d, const char *p) { char abs[PATH_MAX]; struct stat st;
    return prefix() && absolute(d, p, abs) == 0 && under(abs) && sys_lstat(abs, &st) != 0 ? note_create(abs) : 0; }
int link(const char *o, const char *n) { uint64_t s = new_name(AT_FDCWD, n); return done(s, syscall(SYS_linkat, AT_FDCWD, o, AT_FDCWD, n, 0)); }
int linkat(int od, const char *o, int nd, const char *n, int f) { uint64_t s = new_name(nd, n); return done(s, syscall(SYS_linkat, od, o, nd, n, f)); }
int symlink(const char *t, const char *n) { uint64_t s = new_name(AT_FDCWD, n); return done(s, syscall(SYS_symlinkat, t, AT_FDCWD, n)); }
int symlinkat(const char *t, int d, const char *n) { uint64_t s = new_name(d, n); return done(s, syscall(SYS_symlinkat, t, d, n)); }
int mkdir(const char *p, mode_t m) { uint64_t s = new_name(AT_FDCWD, p); return done(s, syscall(SYS_mkdirat, AT_FDCWD, p, m)); }
int mkdirat(int d, const char *p, mode_t m) { uint64_t s = new_name(d, p); return done(s, syscall(SYS_mkdirat, d, p, m)); }

int fsync(int fd) { int rc = syscall(SYS_fsync, fd); if (rc == 0) note_sync(fd, 'S'); return rc; }
int fdatasync(int fd) { int rc = syscall(SYS_fdatasync, fd); if (rc == 0) note_sync(fd, 'S'); return rc; }
int syncfs(int fd) { int rc = syscall(SYS_syncfs, fd); if (rc == 0) note_sync(fd, 'A'); return rc; }
void sync(void) { syscall(SYS_sync); struct rec r; if (prefix()) { begin(&r, 'A'); put64(&r, 0); put64(&r, 0); emit(&r); } }
