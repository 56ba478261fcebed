# Shared set-up of the reproductions (run from the repository root, after `pip install -e .`):
#   bash docs/wowbagger-repro/f1-eio-exit-1.sh
# A fresh git repository with one provisioned ledger, as the program's README sets it up.
set -u
WB=${WB:-"node ../shared/sut/wowbagger-0.1.0-alpha.7/bin/wowbagger.js"}
PY=${PY:-.venv/bin/python}
SHIM=$($PY -c "from chaos.faults.failsync import build; print(build())")   # fsync -> EIO while $FAILSYNC_FILE exists
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT; mkdir -p "$T/R/ledger"; git -C "$T/R" init -q
NS=$($WB provision --ledger "$T/R/ledger" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["ledger_namespace"])')
ITEM=wb_01Q474AK00K6XASESHCWPQXND0
git -C "$T/R" add -A; git -C "$T/R" -c user.name=u -c user.email=u@example.invalid commit -qm provision
rev() { echo "sha256:$(sha256sum "$1" | cut -d' ' -f1)"; }
