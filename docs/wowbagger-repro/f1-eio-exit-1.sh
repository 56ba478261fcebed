# F1: a claim decision whose fsync fails exits 1 with an empty stdout (no contract reply).
source docs/wowbagger-repro/common.sh
touch "$T/failsync.on"
echo "{\"ledger_namespace\":\"$NS\",\"item_id\":\"$ITEM\",\"owner_id\":\"agent-1\",\"lease_duration_ms\":60000,\"expected\":{\"last_epoch\":\"0\",\"active\":null}}" > "$T/acquire.json"
LD_PRELOAD=$SHIM FAILSYNC_FILE=$T/failsync.on $WB claim acquire --ledger "$T/R/ledger" --input - --json < "$T/acquire.json" > "$T/out" 2> "$T/err"
echo "exit=$? stdout_bytes=$(wc -c < "$T/out") stderr=$(cat "$T/err")"
