# F9: publish-claimed persists the namespace's clock floor before it validates the candidate: a publish refused
# as ledger-invalid (a validation failure, which stops before the floor step) moves the floor. Decided at an
# instant a day ahead (libfaketime, frozen), it leaves the namespace's time there: the next read says so.
source docs/wowbagger-repro/common.sh; source docs/wowbagger-repro/item.sh
FAKE=$($PY -c "from chaos.faults.faketime import library_path; print(library_path())")
AHEAD_MS=$(( $(date +%s%3N) + 86400000 ))
echo "$($PY -c "from chaos.faults.faketime import format_absolute; print(format_absolute($AHEAD_MS))")" > "$T/clock"
pinned() { LD_PRELOAD=$FAKE FAKETIME_TIMESTAMP_FILE=$T/clock FAKETIME_NO_CACHE=1 TZ=UTC "$@"; }
read_item() { echo "{\"ledger_namespace\":\"$NS\",\"item_id\":\"$ITEM\"}" | $WB claim read --ledger "$T/R/ledger" --input - --json \
  | python3 -c 'import json,sys; print("observed_at", json.load(sys.stdin)["result"]["read_back"]["observed_at"])'; }
echo "--- a read now:"; read_item
echo "--- publish-claimed whose candidate is not a valid item (its status is not one the schema allows), decided a day ahead ($(cat "$T/clock")):"
sed 's/^status: in-progress$/status: finished-ish/' "$T/candidate.md" > "$T/invalid.md"
python3 -c "import json,hashlib,base64; d=json.load(open('$T/publish.json')); b=open('$T/invalid.md','rb').read(); d['operation_id']='pub_9'; d['candidate_source_base64']=base64.b64encode(b).decode(); d['candidate_sha256']='sha256:'+hashlib.sha256(b).hexdigest(); print(json.dumps(d))" > "$T/invalid.json"
pinned $WB publish-claimed --ledger "$T/R/ledger" --input - --json < "$T/invalid.json" | cut -c1-260; echo "exit=${PIPESTATUS[0]}"
echo "--- a read right after, with the real clock (a validation failure changes nothing: it should say now):"; read_item
echo "--- for contrast, a wrong candidate digest decided two days ahead leaves the floor alone:"
AHEAD2=$(( AHEAD_MS + 86400000 )); $PY -c "from chaos.faults.faketime import format_absolute; print(format_absolute($AHEAD2))" > "$T/clock"
python3 -c "import json; d=json.load(open('$T/publish.json')); d['operation_id']='pub_10'; d['candidate_sha256']='sha256:'+'0'*64; print(json.dumps(d))" \
  | pinned $WB publish-claimed --ledger "$T/R/ledger" --input - --json | cut -c1-160; echo "exit=${PIPESTATUS[1]}"; read_item
