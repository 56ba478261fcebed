# F4: a publish killed after its publish-intent and before the item write: the contract's recovery (read ->
# operation-not-found -> identical retry) is refused as ledger-revision-conflict, with the revisions swapped
# (expected_revision = the candidate, actual_revision = the request's own expected revision).
source docs/wowbagger-repro/common.sh; source docs/wowbagger-repro/item.sh
# hangsync.so: an fsync of a file whose path contains $HANG_MATCH blocks forever (so the process can be killed there)
cat > "$T/hangsync.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static int hit(int fd) { const char *m = getenv("HANG_MATCH"); char l[64], p[4096];
  snprintf(l, sizeof l, "/proc/self/fd/%d", fd); ssize_t n = readlink(l, p, sizeof p - 1);
  if (!m || n < 0) return 0; p[n] = 0; return strstr(p, m) != NULL; }
static void hang(void) { FILE *f = fopen(getenv("HANG_FLAG"), "w"); if (f) fclose(f); for (;;) pause(); }
int fsync(int fd) { static int (*real)(int); if (!real) real = dlsym(RTLD_NEXT, "fsync"); if (hit(fd)) hang(); return real(fd); }
int fdatasync(int fd) { static int (*real)(int); if (!real) real = dlsym(RTLD_NEXT, "fdatasync"); if (hit(fd)) hang(); return real(fd); }
C
gcc -shared -fPIC -O2 -o "$T/hangsync.so" "$T/hangsync.c" -ldl
LD_PRELOAD=$T/hangsync.so HANG_MATCH=.wowbagger-tmp- HANG_FLAG=$T/hung setsid $WB publish-claimed --ledger "$T/R/ledger" --input - --json < "$T/publish.json" > "$T/killed.out" &
PID=$!; while [ ! -e "$T/hung" ]; do sleep 0.05; done; kill -9 -- -$PID 2>/dev/null || kill -9 $PID; wait $PID 2>/dev/null
J="$T/R/.git/wowbagger/$NS/journal.ndjson"
echo "--- killed; journal: publish-intent $(grep -c publish-intent "$J"), publish-final $(grep -c publish-final "$J"); item at expected revision: $( [ "$(rev "$T/R/ledger/$ITEM.md")" = "$EXPECTED" ] && echo yes || echo no)"
echo "--- read, as the contract prescribes after a lost reply:"; $WB claim verify --ledger "$T/R/ledger" --input - --json < "$T/read.json"; echo "exit=$?"
echo "--- identical retry:"; $WB publish-claimed --ledger "$T/R/ledger" --input - --json < "$T/publish.json"; echo "exit=$?"
echo "request expected_revision=$EXPECTED"
echo "request candidate_sha256=$CANDIDATE"
