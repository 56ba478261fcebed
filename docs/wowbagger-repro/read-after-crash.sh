# Checked, not a finding: a publish SIGKILLed after its item's rename and before its publish-final entry (the
# Git journal's read-after-crash defect). The publication read answers operation-not-found (the read does not
# reconcile), and the identical retry, as contract §6 prescribes, reconciles the dead attempt's intent and
# returns the stored success: one publish-intent, one publish-final, no second write.
source docs/wowbagger-repro/common.sh; source docs/wowbagger-repro/item.sh
# hangafterrename.so: after a rename() onto a path ending in $HANG_RENAMED, the next fsync/fdatasync blocks forever
cat > "$T/hangafterrename.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static volatile int renamed;
static int ends(const char *p) { const char *m = getenv("HANG_RENAMED"); size_t a, b;
  if (!m || !p) return 0; a = strlen(p); b = strlen(m); return a >= b && strcmp(p + a - b, m) == 0; }
static void hang(void) { FILE *f = fopen(getenv("HANG_FLAG"), "w"); if (f) fclose(f); for (;;) pause(); }
int rename(const char *o, const char *n) { static int (*real)(const char *, const char *);
  if (!real) real = dlsym(RTLD_NEXT, "rename"); int r = real(o, n); if (r == 0 && ends(n)) renamed = 1; return r; }
int renameat(int od, const char *o, int nd, const char *n) { static int (*real)(int, const char *, int, const char *);
  if (!real) real = dlsym(RTLD_NEXT, "renameat"); int r = real(od, o, nd, n); if (r == 0 && ends(n)) renamed = 1; return r; }
int fsync(int fd) { static int (*real)(int); if (!real) real = dlsym(RTLD_NEXT, "fsync"); if (renamed) hang(); return real(fd); }
int fdatasync(int fd) { static int (*real)(int); if (!real) real = dlsym(RTLD_NEXT, "fdatasync"); if (renamed) hang(); return real(fd); }
C
gcc -shared -fPIC -O2 -o "$T/hangafterrename.so" "$T/hangafterrename.c" -ldl
J="$T/R/.git/wowbagger/$NS/journal.ndjson"
LD_PRELOAD=$T/hangafterrename.so HANG_RENAMED="/$ITEM.md" HANG_FLAG=$T/hung setsid $WB publish-claimed --ledger "$T/R/ledger" --input - --json < "$T/publish.json" > "$T/killed.out" &
PID=$!; for _ in $(seq 600); do [ -e "$T/hung" ] && break; sleep 0.05; done; [ -e "$T/hung" ] || echo "the publish never reached an fsync after its rename"
kill -9 -- -$PID 2>/dev/null || kill -9 $PID; wait $PID 2>/dev/null
echo "--- killed after the item's rename; reply bytes $(wc -c < "$T/killed.out"); journal: publish-intent $(grep -c publish-intent "$J"), publish-final $(grep -c publish-final "$J"); item at the candidate revision: $( [ "$(rev "$T/R/ledger/$ITEM.md")" = "$CANDIDATE" ] && echo yes || echo no)"
echo "--- read, as the contract prescribes after a lost reply:"; $WB claim verify --ledger "$T/R/ledger" --input - --json < "$T/read.json"; echo "exit=$?"
echo "--- identical retry:"; $WB publish-claimed --ledger "$T/R/ledger" --input - --json < "$T/publish.json"; echo "exit=$?"
echo "--- journal: publish-intent $(grep -c publish-intent "$J"), publish-final $(grep -c publish-final "$J"); item at the candidate revision: $( [ "$(rev "$T/R/ledger/$ITEM.md")" = "$CANDIDATE" ] && echo yes || echo no)"
echo "--- read again:"; OUT=$($WB claim verify --ledger "$T/R/ledger" --input - --json < "$T/read.json"); echo "exit=$? ${OUT:0:120}..."
