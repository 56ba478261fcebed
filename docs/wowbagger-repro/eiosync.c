/* eiosync.so (F5, F7): the fsync of a file whose path contains $EIO_MATCH fails with EIO when the
   file's last line contains $EIO_LAST (the entry just appended), as a failing disk would after the write;
   the first $EIO_SKIP such fsyncs (default 0) succeed. With $EIO_AFTER_RENAME_TO set instead, every fsync
   fails once a rename onto a path containing it succeeded (a disk failing right after that commit) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static int hit(int fd) { const char *m = getenv("EIO_MATCH"), *w = getenv("EIO_LAST"); char l[64], p[4096], b[8192];
  snprintf(l, sizeof l, "/proc/self/fd/%d", fd); ssize_t n = readlink(l, p, sizeof p - 1); struct stat st;
  if (!m || !w || n < 0) return 0; p[n] = 0; if (!strstr(p, m) || fstat(fd, &st) || st.st_size < 2) return 0;
  FILE *f = fopen(p, "r"); if (!f) return 0;   /* the fd is append-only: read the file by its path */
  off_t off = st.st_size > (off_t)sizeof b - 1 ? st.st_size - (off_t)sizeof b + 1 : 0;
  fseeko(f, off, SEEK_SET); size_t k = fread(b, 1, st.st_size - off, f); fclose(f);
  if (k < 2) return 0; b[k - 1] = 0;   /* drop the final LF */
  char *last = strrchr(b, '\n'); return strstr(last ? last + 1 : b, w) != NULL; }
static int broken;
int rename(const char *a, const char *b) { static int (*real)(const char *, const char *); const char *t = getenv("EIO_AFTER_RENAME_TO");
  if (!real) real = dlsym(RTLD_NEXT, "rename"); int r = real(a, b); if (r == 0 && t && strstr(b, t)) broken = 1; return r; }
static int fail(int fd) { static int seen; const char *k = getenv("EIO_SKIP");
  return broken || (hit(fd) && seen++ >= (k ? atoi(k) : 0)); }
int fsync(int fd) { static int (*real)(int); if (!real) real = dlsym(RTLD_NEXT, "fsync"); if (fail(fd)) { errno = EIO; return -1; } return real(fd); }
int fdatasync(int fd) { static int (*real)(int); if (!real) real = dlsym(RTLD_NEXT, "fdatasync"); if (fail(fd)) { errno = EIO; return -1; } return real(fd); }
