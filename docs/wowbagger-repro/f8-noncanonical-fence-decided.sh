# F8: publish-claimed checks its claim fence's owner_id only for a non-empty string, and its epoch pattern
# admits 2^64 .. 18446744699999999999: such a request is decided (exit 4 claim-fence-rejected, stored under its
# operation id) instead of exit 2 invalid-request; the claim commands refuse the same owner_id (exit 2).
source docs/wowbagger-repro/common.sh; source docs/wowbagger-repro/item.sh
fence() {  # the publish request with operation id $1 and claim_fence member $2 set to $3
  python3 -c "import json,sys; d=json.load(open('$T/publish.json')); d['operation_id']=sys.argv[1]; d['claim_fence'][sys.argv[2]]=sys.argv[3]; print(json.dumps(d))" "$1" "$2" "$3"
}
echo "--- publish with claim_fence.owner_id \"agent 1!\" (outside [A-Za-z0-9][A-Za-z0-9._:/-]{0,127}):"
fence pub_2 owner_id 'agent 1!' | $WB publish-claimed --ledger "$T/R/ledger" --input - --json; echo "exit=$?"
echo "--- its publication read (a refusal before any decision stores nothing: operation-not-found):"
echo "{\"operation_id\":\"pub_2\",\"ledger_namespace\":\"$NS\",\"item_id\":\"$ITEM\"}" | $WB claim verify --ledger "$T/R/ledger" --input - --json; echo "exit=$?"
echo "--- publish with claim_fence.epoch 18446744073709551616 (2^64, one past the largest epoch):"
fence pub_3 epoch 18446744073709551616 | $WB publish-claimed --ledger "$T/R/ledger" --input - --json; echo "exit=$?"
echo "--- for contrast, claim acquire with owner_id \"agent 1!\":"
echo "{\"ledger_namespace\":\"$NS\",\"item_id\":\"$ITEM\",\"owner_id\":\"agent 1!\",\"lease_duration_ms\":1000,\"expected\":{\"last_epoch\":\"1\",\"active\":null}}" \
  | $WB claim acquire --ledger "$T/R/ledger" --input - --json; echo "exit=$?"
# The impact: the fence owner_id has no length bound either, and the stored refusal copies it into the
# journal, which is never compacted and has an 8 MiB cap (src/claim-journal.js MAX_JOURNAL_BYTES). One request
# whose owner_id fills the journal disables every claim decision of the namespace for good.
J="$T/R/.git/wowbagger/$NS/journal.ndjson"
SIZE=$((8388608 - $(stat -c %s "$J") - 1200))
echo "--- publish with a claim_fence.owner_id of $SIZE bytes (the request bound is 11534336):"
python3 -c "import json,sys; d=json.load(open('$T/publish.json')); d['operation_id']='pub_4'; d['claim_fence']['owner_id']='o'*int(sys.argv[1]); print(json.dumps(d))" $SIZE > "$T/big.json"
$WB publish-claimed --ledger "$T/R/ledger" --input - --json < "$T/big.json" | cut -c1-200; echo "exit=${PIPESTATUS[0]}; journal $(stat -c %s "$J") bytes"
python3 -c "import json; c=json.load(open('$T/acq.json'))['result']['claim']; print(json.dumps({'ledger_namespace':'$NS','item_id':'$ITEM','owner_id':'agent-1','epoch':c['epoch'],'expected_expires_at':c['expires_at'],'lease_duration_ms':600000}))" > "$T/renew.json"
echo "--- the holder renews its claim:"
$WB claim renew --ledger "$T/R/ledger" --input - --json < "$T/renew.json"; echo "exit=$?"
echo "--- another agent acquires another item of the namespace:"
echo "{\"ledger_namespace\":\"$NS\",\"item_id\":\"wb_01Q474AK00AST08PG9XC7DNBSS\",\"owner_id\":\"agent-2\",\"lease_duration_ms\":1000,\"expected\":{\"last_epoch\":\"0\",\"active\":null}}" \
  | $WB claim acquire --ledger "$T/R/ledger" --input - --json; echo "exit=$?"
