/* failsync: make fsync/fdatasync/syncfs fail with EIO on demand (LD_PRELOAD shim).
 *
 * While the file named by $FAILSYNC_FILE exists, every call fails with EIO;
 * remove the file and calls go to the real libc again. The switch is checked
 * on every call, so it works on a running process tree (forked postgres
 * backends included). $FAILSYNC_MATCH, when set, limits the failures to file
 * descriptors whose path (/proc/self/fd/N) contains that substring.
 * Build: gcc -shared -fPIC -O2 -o failsync.so failsync.c -ldl (failsync.py does this). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static int should_fail(int fd) {          /* fail while $FAILSYNC_FILE exists; optional $FAILSYNC_MATCH path filter */
    const char *ctl = getenv("FAILSYNC_FILE"), *m = getenv("FAILSYNC_MATCH");
    if (!ctl || access(ctl, F_OK) != 0) return 0;
    if (m && *m) { char l[64], p[4096]; snprintf(l, sizeof l, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(l, p, sizeof p - 1); if (n < 0) return 0; p[n] = 0; if (!strstr(p, m)) return 0; }
    return 1;
}
/* Each wrapper resolves the real function once (RTLD_NEXT), then fails or forwards. */
#define WRAP(name) int name(int fd) { static int (*real)(int); if (!real) real = dlsym(RTLD_NEXT, #name); \
    if (should_fail(fd)) { errno = EIO; return -1; } return real(fd); }
WRAP(fsync) WRAP(fdatasync) WRAP(syncfs)
