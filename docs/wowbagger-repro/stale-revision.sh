# Checked, no finding: a publish on a stale expected_revision. With the claim live, the program answers exit 4
# ledger-revision-conflict naming the request's expected revision and the item's actual one (§6 step 8); with the
# lease expired, exit 4 claim-fence-rejected / claim-expired first (step 7 comes before step 8).
source docs/wowbagger-repro/common.sh; source docs/wowbagger-repro/item.sh
echo "--- publish pub_1 (expected_revision = the item's revision):"
$WB publish-claimed --ledger "$T/R/ledger" --input - --json < "$T/publish.json" | cut -c1-140; echo "exit=${PIPESTATUS[0]}"
sed 's/pub_1/pub_2/' "$T/publish.json" > "$T/stale.json"
echo "--- pub_2, the same expected_revision (now stale), claim live:"
$WB publish-claimed --ledger "$T/R/ledger" --input - --json < "$T/stale.json"; echo "exit=$?"
echo "request expected_revision=$EXPECTED"; echo "item now=$(rev "$T/R/ledger/$ITEM.md")"
echo "--- a 1-s lease of agent-2 on a second item, a stale publish sent 1.5 s after its acquire:"
ITEM2=wb_01Q474AK00Q0Y864F4TM4MS8A5; sed "s/$ITEM/$ITEM2/" "$T/R/ledger/$ITEM.md" > "$T/R/ledger/$ITEM2.md"
git -C "$T/R" add -A; git -C "$T/R" -c user.name=u -c user.email=u@example.invalid commit -qm item2
echo "{\"ledger_namespace\":\"$NS\",\"item_id\":\"$ITEM2\",\"owner_id\":\"agent-2\",\"lease_duration_ms\":1000,\"expected\":{\"last_epoch\":\"0\",\"active\":null}}" \
  | $WB claim acquire --ledger "$T/R/ledger" --input - --json > /dev/null; sleep 1.5
sed 's/^Seeded\.$/Published./' "$T/R/ledger/$ITEM2.md" > "$T/candidate2.md"
cat > "$T/expired.json" <<JSON
{"operation_id":"pub_3","ledger_namespace":"$NS","item_id":"$ITEM2","expected_revision":"sha256:$(printf 'never' | sha256sum | cut -d' ' -f1)","candidate_source_base64":"$(base64 -w0 "$T/candidate2.md")","candidate_sha256":"$(rev "$T/candidate2.md")","claim_fence":{"ledger_namespace":"$NS","item_id":"$ITEM2","owner_id":"agent-2","epoch":"1"}}
JSON
$WB publish-claimed --ledger "$T/R/ledger" --input - --json < "$T/expired.json"; echo "exit=$?"
