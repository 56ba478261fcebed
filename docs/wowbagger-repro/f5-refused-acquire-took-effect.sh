# F5: a claim decision whose journal fsync fails (after its line is written) answers "unchanged"
# (exit 6 clock-floor-persistence-failed), yet the decision is in effect for every later command.
source docs/wowbagger-repro/common.sh
# eiosync.so: the fsync of a file whose path contains $EIO_MATCH fails with EIO when the file's last line
# contains $EIO_LAST (here: the claim entry just appended), as a failing disk would after the write
cat > "$T/eiosync.c" <<'C'
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
int fsync(int fd) { static int (*real)(int); if (!real) real = dlsym(RTLD_NEXT, "fsync"); if (hit(fd)) { errno = EIO; return -1; } return real(fd); }
int fdatasync(int fd) { static int (*real)(int); if (!real) real = dlsym(RTLD_NEXT, "fdatasync"); if (hit(fd)) { errno = EIO; return -1; } return real(fd); }
C
gcc -shared -fPIC -O2 -o "$T/eiosync.so" "$T/eiosync.c" -ldl
echo "--- acquire by agent-1; the journal's fsync fails with EIO once its claim line is written:"
echo "{\"ledger_namespace\":\"$NS\",\"item_id\":\"$ITEM\",\"owner_id\":\"agent-1\",\"lease_duration_ms\":600000,\"expected\":{\"last_epoch\":\"0\",\"active\":null}}" \
  | LD_PRELOAD=$T/eiosync.so EIO_MATCH=journal.ndjson EIO_LAST='"type":"claim"' $WB claim acquire --ledger "$T/R/ledger" --input - --json
echo "exit=$?"
echo "--- read (fsync healthy again):"
echo "{\"ledger_namespace\":\"$NS\",\"item_id\":\"$ITEM\"}" | $WB claim read --ledger "$T/R/ledger" --input - --json
echo "exit=$?"
echo "--- agent-2 acquires with the state the refusal promised (last_epoch 0, no active claim):"
echo "{\"ledger_namespace\":\"$NS\",\"item_id\":\"$ITEM\",\"owner_id\":\"agent-2\",\"lease_duration_ms\":600000,\"expected\":{\"last_epoch\":\"0\",\"active\":null}}" \
  | $WB claim acquire --ledger "$T/R/ledger" --input - --json
echo "exit=$?"
