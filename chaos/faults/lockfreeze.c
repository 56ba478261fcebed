/* lockfreeze: stop a process right after it ends a write transaction (LD_PRELOAD shim).
 *
 * To this shim a write transaction is a POSIX record lock: an F_WRLCK taken on a descriptor,
 * ended by an F_UNLCK of the whole file (start 0, length 0), which is how SQLite drops to no
 * lock after a commit. While the file named by $LOCKFREEZE_FILE exists, the first such end
 * whose process wins the unlink() of that file raises SIGSTOP after the real unlock returned:
 * the process is frozen holding no lock on that file, between one transaction and whatever it
 * does next (a timed signal lands in that gap of a few microseconds almost never). One stop per
 * arming: the unlink is the claim, so two processes never both stop for one arming.
 * Build: gcc -shared -fPIC -O2 -o lockfreeze.so lockfreeze.c -ldl (lockfreeze.py does this). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>
static unsigned char wrote[4096];   /* per descriptor: an F_WRLCK since its last whole-file unlock */
static int setlk(int cmd) { return cmd == F_SETLK || cmd == F_SETLKW || cmd == F_OFD_SETLK || cmd == F_OFD_SETLKW; }
static void after(int fd, const struct flock *l) {
    if (fd < 0 || fd >= (int)sizeof wrote || !l) return;
    if (l->l_type == F_WRLCK) { wrote[fd] = 1; return; }
    if (l->l_type != F_UNLCK || l->l_start != 0 || l->l_len != 0 || !wrote[fd]) return;
    wrote[fd] = 0;
    const char *ctl = getenv("LOCKFREEZE_FILE");
    if (ctl && *ctl && unlink(ctl) == 0) raise(SIGSTOP);
}
/* fcntl and fcntl64 (what a library built with 64-bit file offsets calls); the third argument is
 * passed on as a pointer, as glibc's own wrapper does. */
#define WRAP(name) int name(int fd, int cmd, ...) { static int (*real)(int, int, ...); \
    if (!real) { real = dlsym(RTLD_NEXT, #name); if (!real) real = dlsym(RTLD_NEXT, "fcntl"); } \
    va_list ap; va_start(ap, cmd); void *arg = va_arg(ap, void *); va_end(ap); \
    int rc = real(fd, cmd, arg); \
    if (rc == 0 && setlk(cmd)) { int e = errno; after(fd, arg); errno = e; } return rc; }
WRAP(fcntl) WRAP(fcntl64)
