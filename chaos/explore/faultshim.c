/* faultshim.so: one fault at one point of one program call, as the deterministic run placed it.
   The FAULT_NTH-th call (counted in this process, from 1) of FAULT_CALL on a file whose path contains
   FAULT_MATCH gets FAULT_ACTION: EIO (the call fails with EIO; for fsync the bytes are written, not
   made durable, as a failing disk after the write), KILL (SIGKILL to the process before the call, as
   the scheduler kills a worker waiting at that point) or PAUSE (the process stops there until its
   caller lets it go on, so that other calls run in that gap: the interleaving a deterministic run
   found). FAULT_CALL txn-end is the end of a write transaction: an F_WRLCK record lock taken on the
   file, then the whole file unlocked (how SQLite ends a commit); its PAUSE comes after the unlock, so
   the stopped process holds no lock. PAUSE's gate is FAULT_GATE="W,R", two inherited pipe fds: one
   byte is written to W once stopped, then it waits for a byte (or end of file) on R. No timer decides
   anything. Without FAULT_CALL it changes nothing.
   Build: gcc -shared -fPIC -O2 -o faultshim.so faultshim.c -ldl; use: LD_PRELOAD=./faultshim.so */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static int seen;

static int path_of(int fd, char *out, size_t size) {
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, out, size - 1);
  if (n < 0) return 0;
  out[n] = 0;
  return 1;
}

/* PAUSE: say so on the gate's W, then wait on its R (raw syscalls: this file wraps write) */
static void gate(void) {
  const char *g = getenv("FAULT_GATE");
  int w = -1, r = -1;
  char b = 'p';
  if (!g || sscanf(g, "%d,%d", &w, &r) != 2) return;
  syscall(SYS_write, w, &b, 1);
  while (syscall(SYS_read, r, &b, 1) < 0 && errno == EINTR) {}
}

/* 1: fail this call with EIO; 0: go on (a KILL never returns; a PAUSE returns when let go) */
static int fault(const char *call, const char *path) {
  const char *want = getenv("FAULT_CALL"), *match = getenv("FAULT_MATCH"), *nth = getenv("FAULT_NTH");
  const char *action = getenv("FAULT_ACTION");
  if (!want || !match || !path || strcmp(want, call) || !strstr(path, match)) return 0;
  if (__atomic_add_fetch(&seen, 1, __ATOMIC_SEQ_CST) != (nth ? atoi(nth) : 1)) return 0;
  if (action && !strcmp(action, "KILL")) {
    kill(getpid(), SIGKILL);
    for (;;) pause();
  }
  if (action && !strcmp(action, "PAUSE")) { gate(); return 0; }
  return 1;
}

static int fd_fault(const char *call, int fd) {
  char p[4096];
  const char *want = getenv("FAULT_CALL");
  return want && !strcmp(want, call) && path_of(fd, p, sizeof p) && fault(call, p);
}

#define REAL(name) static __typeof__(name) *real; if (!real) real = dlsym(RTLD_NEXT, #name)

/* a directory's sync is its own point ("dirsync"), as the scheduler names it */
static const char *sync_call(int fd, const char *fn) { struct stat st; return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) ? "dirsync" : fn; }
int fsync(int fd) { REAL(fsync); if (fd_fault(sync_call(fd, "fsync"), fd)) { errno = EIO; return -1; } return real(fd); }
int fdatasync(int fd) { REAL(fdatasync); if (fd_fault(sync_call(fd, "fdatasync"), fd)) { errno = EIO; return -1; } return real(fd); }
ssize_t write(int fd, const void *b, size_t n) { REAL(write); if (fd_fault("write", fd)) { errno = EIO; return -1; } return real(fd, b, n); }
ssize_t pwrite(int fd, const void *b, size_t n, off_t o) { REAL(pwrite); if (fd_fault("pwrite", fd)) { errno = EIO; return -1; } return real(fd, b, n, o); }
ssize_t pwrite64(int fd, const void *b, size_t n, off_t o) { REAL(pwrite64); if (fd_fault("pwrite", fd)) { errno = EIO; return -1; } return real(fd, b, n, o); }
ssize_t writev(int fd, const struct iovec *v, int c) { REAL(writev); if (fd_fault("writev", fd)) { errno = EIO; return -1; } return real(fd, v, c); }
ssize_t pwritev(int fd, const struct iovec *v, int c, off_t o) { REAL(pwritev); if (fd_fault("writev", fd)) { errno = EIO; return -1; } return real(fd, v, c, o); }
int ftruncate(int fd, off_t n) { REAL(ftruncate); if (fd_fault("ftruncate", fd)) { errno = EIO; return -1; } return real(fd, n); }
int rename(const char *a, const char *b) { REAL(rename); if (fault("rename", b)) { errno = EIO; return -1; } return real(a, b); }
int unlink(const char *p) { REAL(unlink); if (fault("unlink", p)) { errno = EIO; return -1; } return real(p); }
int mkdir(const char *p, mode_t m) { REAL(mkdir); if (fault("mkdir", p)) { errno = EIO; return -1; } return real(p, m); }
int link(const char *a, const char *b) { REAL(link); if (fault("link", b)) { errno = EIO; return -1; } return real(a, b); }
/* the *at forms: the match is a file name, so a path relative to the directory fd matches as well */
int renameat(int od, const char *a, int nd, const char *b) { REAL(renameat); if (fault("rename", b)) { errno = EIO; return -1; } return real(od, a, nd, b); }
int renameat2(int od, const char *a, int nd, const char *b, unsigned f) { REAL(renameat2); if (fault("rename", b)) { errno = EIO; return -1; } return real(od, a, nd, b, f); }
int linkat(int od, const char *a, int nd, const char *b, int f) { REAL(linkat); if (fault("link", b)) { errno = EIO; return -1; } return real(od, a, nd, b, f); }
int unlinkat(int d, const char *p, int f) { REAL(unlinkat); if (fault("unlink", p)) { errno = EIO; return -1; } return real(d, p, f); }
int mkdirat(int d, const char *p, mode_t m) { REAL(mkdirat); if (fault("mkdir", p)) { errno = EIO; return -1; } return real(d, p, m); }

/* a file created (O_CREAT) is the scheduler's "creat" point */
static int open_fault(const char *p, int flags) { return (flags & O_CREAT) && fault("creat", p); }
int open(const char *p, int flags, ...) { REAL(open); mode_t m = 0; if (flags & O_CREAT) { va_list a; va_start(a, flags); m = va_arg(a, mode_t); va_end(a); }
  if (open_fault(p, flags)) { errno = EIO; return -1; } return real(p, flags, m); }
int open64(const char *p, int flags, ...) { REAL(open64); mode_t m = 0; if (flags & O_CREAT) { va_list a; va_start(a, flags); m = va_arg(a, mode_t); va_end(a); }
  if (open_fault(p, flags)) { errno = EIO; return -1; } return real(p, flags, m); }
int openat(int d, const char *p, int flags, ...) { REAL(openat); mode_t m = 0; if (flags & O_CREAT) { va_list a; va_start(a, flags); m = va_arg(a, mode_t); va_end(a); }
  if (open_fault(p, flags)) { errno = EIO; return -1; } return real(d, p, flags, m); }
int creat(const char *p, mode_t m) { REAL(creat); if (fault("creat", p)) { errno = EIO; return -1; } return real(p, m); }
int creat64(const char *p, mode_t m) { REAL(creat64); if (fault("creat", p)) { errno = EIO; return -1; } return real(p, m); }
int openat64(int d, const char *p, int flags, ...) { REAL(openat64); mode_t m = 0; if (flags & O_CREAT) { va_list a; va_start(a, flags); m = va_arg(a, mode_t); va_end(a); }
  if (open_fault(p, flags)) { errno = EIO; return -1; } return real(d, p, flags, m); }

/* txn-end: per descriptor, an F_WRLCK since its last whole-file unlock; the point is after the unlock */
static unsigned char wrote[4096];
static int setlk(int cmd) { return cmd == F_SETLK || cmd == F_SETLKW || cmd == F_OFD_SETLK || cmd == F_OFD_SETLKW; }
static void locked(int fd, const struct flock *l) {
  if (fd < 0 || fd >= (int)sizeof wrote || !l) return;
  if (l->l_type == F_WRLCK) { wrote[fd] = 1; return; }
  if (l->l_type != F_UNLCK || l->l_start != 0 || l->l_len != 0 || !wrote[fd]) return;
  wrote[fd] = 0;
  fd_fault("txn-end", fd);
}
/* the third argument passed on as a pointer, as glibc's own wrapper does */
#define FCNTL(name) int name(int fd, int cmd, ...) { static int (*real)(int, int, ...); \
  if (!real) { real = dlsym(RTLD_NEXT, #name); if (!real) real = dlsym(RTLD_NEXT, "fcntl"); } \
  va_list ap; va_start(ap, cmd); void *arg = va_arg(ap, void *); va_end(ap); \
  int rc = real(fd, cmd, arg); \
  if (rc == 0 && setlk(cmd) && getenv("FAULT_CALL")) { int e = errno; locked(fd, arg); errno = e; } return rc; }
FCNTL(fcntl) FCNTL(fcntl64)
