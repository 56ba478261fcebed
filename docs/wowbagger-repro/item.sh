# One committed schema-1 item, a successor candidate, an active claim and the publish request for it.
cat > "$T/R/ledger/$ITEM.md" <<'ITEM'
---
schema_version: 1
id: wb_01Q474AK00K6XASESHCWPQXND0
title: "Synthetic work item"
kind: task
status: in-progress
created: 2030-01-11
updated: 2030-01-11
provenance:
  source: generator/claims
  recorded_at: 2030-01-11T09:15:30.250Z
depends_on: []
---

Seeded.
ITEM
sed 's/^Seeded\.$/Published./' "$T/R/ledger/$ITEM.md" > "$T/candidate.md"
git -C "$T/R" add -A; git -C "$T/R" -c user.name=u -c user.email=u@example.invalid commit -qm item
EXPECTED=$(rev "$T/R/ledger/$ITEM.md"); CANDIDATE=$(rev "$T/candidate.md"); B64=$(base64 -w0 "$T/candidate.md")
echo "{\"ledger_namespace\":\"$NS\",\"item_id\":\"$ITEM\",\"owner_id\":\"agent-1\",\"lease_duration_ms\":${LEASE_MS:-600000},\"expected\":{\"last_epoch\":\"0\",\"active\":null}}" \
  | $WB claim acquire --ledger "$T/R/ledger" --input - --json > "$T/acq.json"
EPOCH=$(python3 -c "import json; print(json.load(open('$T/acq.json'))['result']['claim']['epoch'])")
cat > "$T/publish.json" <<JSON
{"operation_id":"pub_1","ledger_namespace":"$NS","item_id":"$ITEM","expected_revision":"$EXPECTED","candidate_source_base64":"$B64","candidate_sha256":"$CANDIDATE","claim_fence":{"ledger_namespace":"$NS","item_id":"$ITEM","owner_id":"agent-1","epoch":"$EPOCH"}}
JSON
echo "{\"operation_id\":\"pub_1\",\"ledger_namespace\":\"$NS\",\"item_id\":\"$ITEM\"}" > "$T/read.json"
