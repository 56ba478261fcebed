#!/usr/bin/env bash
# The suite's own tests must hold on a loaded machine. This runs the README's
# test command (taken from README.md, so the two never drift) with a CPU hog
# on every core, and prints one summary line:
#
#   tests_under_load: <pytest's summary> | <N> hogs on <N> cores | load <1-min avg> | <wall> s | exit <rc>
#
# Usage: benchmarks/tests_under_load.sh [LOG]   (default LOG: tests_under_load.log)
# The hogs are the script's own children, killed by PID on any exit.
set -uo pipefail
cd "$(dirname "$0")/.."
log=${1:-tests_under_load.log}

cmd=$(python3 - <<'EOF'
import re
blocks = re.findall(r"```sh\n(.+?)\n```", open("README.md").read())
print(next(b for b in blocks if "pytest" in b))
EOF
) || { echo "tests_under_load: no test command in README.md"; exit 254; }

cores=$(nproc)
hogs=()
cleanup() { for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null; done; wait "${hogs[@]}" 2>/dev/null; }
trap cleanup EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$cores"); do
  sh -c 'while :; do :; done' &
  hogs+=("$!")
done

started=$(date +%s)
bash -c "$cmd" >"$log" 2>&1
rc=$?
wall=$(( $(date +%s) - started ))
load=$(cut -d' ' -f1 /proc/loadavg)
summary=$(grep -E '(passed|failed|error)' "$log" | grep -E '^(=+ )?[0-9]+ ' | tail -n 1 | sed -E 's/^=+ //; s/ =+$//')
echo "tests_under_load: ${summary:-no pytest summary (see $log)} | ${#hogs[@]} hogs on $cores cores | load $load | ${wall} s | exit $rc"
exit "$rc"
