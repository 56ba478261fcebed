# F5: a claim decision whose journal fsync fails (after its line is written) answers "unchanged"
# (exit 6 clock-floor-persistence-failed), yet the decision is in effect for every later command.
source docs/wowbagger-repro/common.sh
# eiosync.so fails the journal's fsync once its last line is the claim entry just appended
gcc -shared -fPIC -O2 -o "$T/eiosync.so" docs/wowbagger-repro/eiosync.c -ldl
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
