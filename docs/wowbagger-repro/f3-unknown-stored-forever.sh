# F3: a publication whose item write failed (nothing written) is stored as a terminal
# publication-outcome-unknown: the read returns it and the identical retry can never complete.
source docs/wowbagger-repro/common.sh; source docs/wowbagger-repro/item.sh
touch "$T/failsync.on"
echo "--- publish while the item's temp-file fsync fails (EIO):"
LD_PRELOAD=$SHIM FAILSYNC_FILE=$T/failsync.on FAILSYNC_MATCH=.wowbagger-tmp- $WB publish-claimed --ledger "$T/R/ledger" --input - --json < "$T/publish.json"; echo "exit=$?"
rm "$T/failsync.on"
echo "--- item bytes unchanged: $( [ "$(rev "$T/R/ledger/$ITEM.md")" = "$EXPECTED" ] && echo yes || echo no)"
echo "--- publication read:"; $WB claim verify --ledger "$T/R/ledger" --input - --json < "$T/read.json"; echo "exit=$?"
echo "--- identical retry (fsync healthy again):"; $WB publish-claimed --ledger "$T/R/ledger" --input - --json < "$T/publish.json"; echo "exit=$?"
