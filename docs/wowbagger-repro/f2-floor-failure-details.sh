# F2: clock-floor-persistence-failed from a claim command carries details {} (the vectors require the tuple).
source docs/wowbagger-repro/common.sh
touch "$T/failsync.on"
echo "{\"ledger_namespace\":\"$NS\",\"item_id\":\"$ITEM\",\"owner_id\":\"agent-1\",\"lease_duration_ms\":60000,\"expected\":{\"last_epoch\":\"0\",\"active\":null}}" \
  | LD_PRELOAD=$SHIM FAILSYNC_FILE=$T/failsync.on FAILSYNC_MATCH=journal.ndjson $WB claim acquire --ledger "$T/R/ledger" --input - --json
echo "exit=$?"
