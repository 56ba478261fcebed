# F7: a publish whose publish-final append fails its fsync answers publication-outcome-unknown; the
# publication read says operation-not-found; the identical retry, sent after the lease has expired, is
# answered ok: the journal reconciliation completes the pending intent as a success stamped after expiry.
source docs/wowbagger-repro/common.sh; LEASE_MS=${LEASE_MS:-4000} source docs/wowbagger-repro/item.sh
gcc -shared -fPIC -O2 -o "$T/eiosync.so" docs/wowbagger-repro/eiosync.c -ldl
EXPIRES=$(python3 -c "import json; print(json.load(open('$T/acq.json'))['result']['claim']['expires_at'])")
echo "--- agent-1 holds epoch $EPOCH until $EXPIRES; publish: every fsync fails once the item's new bytes are renamed in place:"
LD_PRELOAD=$T/eiosync.so EIO_AFTER_RENAME_TO="/$ITEM.md" \
  $WB publish-claimed --ledger "$T/R/ledger" --input - --json < "$T/publish.json"; echo "exit=$?"
echo "--- read the outcome, as the contract prescribes after an unknown one:"
$WB claim verify --ledger "$T/R/ledger" --input - --json < "$T/read.json"; echo "exit=$?"
echo "--- wait until the lease is over by the wall clock ($EXPIRES), then the identical retry:"
python3 - "$EXPIRES" <<'PY'
import datetime, sys, time
end = datetime.datetime.fromisoformat(sys.argv[1].replace("Z", "+00:00")).timestamp()
time.sleep(max(0.0, end - time.time()) + 0.5)
PY
J="$T/R/.git/wowbagger/$NS/journal.ndjson"
echo "journal: publish-intent $(grep -c publish-intent "$J"), publish-final $(grep -c publish-final "$J"); item holds the candidate: $( [ "$(rev "$T/R/ledger/$ITEM.md")" = "$CANDIDATE" ] && echo yes || echo no)"
$WB publish-claimed --ledger "$T/R/ledger" --input - --json < "$T/publish.json" > "$T/retry.json"; echo "exit=$?"
python3 - "$T/retry.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
back = (r.get("result") or {}).get("claim_read_back") or {}
print(json.dumps({"ok": r["ok"], "state": r.get("state"), "error": (r.get("error") or {}).get("code"),
                  "claim_read_back.observed_at": back.get("observed_at"),
                  "claim_read_back.active": back.get("active")}))
PY
