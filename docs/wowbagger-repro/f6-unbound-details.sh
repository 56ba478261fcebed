# F6: ledger-namespace-unbound from a claim command names requested_namespace / provisioned_namespace
# instead of the tuple {ledger_namespace, item_id} (publish-claimed and the publication read use the right shape).
source docs/wowbagger-repro/common.sh
OTHER=wbns_fe23aa06b521855d75612bfabc9c38e5
echo "--- claim read on a namespace this ledger is not bound to:"
echo "{\"ledger_namespace\":\"$OTHER\",\"item_id\":\"$ITEM\"}" | $WB claim read --ledger "$T/R/ledger" --input - --json
echo "exit=$?"
echo "--- the publication read of the same tuple:"
echo "{\"operation_id\":\"pub_1\",\"ledger_namespace\":\"$OTHER\",\"item_id\":\"$ITEM\"}" | $WB claim verify --ledger "$T/R/ledger" --input - --json
echo "exit=$?"
