#!/usr/bin/env bash
# make test-stress: `make test` RUNS times (10 unless given) in a fresh clone of this checkout's HEAD, on a machine
# loaded by LOAD CPU-bound processes (2 unless given) running beside it the whole time, as a busy CI host or laptop
# is. Prints each run's result and time, then "N passed, M failed" runs; exits 1 unless every run passed.
set -uo pipefail
RUNS="${RUNS:-10}"
LOAD="${LOAD:-2}"
here="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
logs="${STRESS_LOGS:-$here/build/stress}"
mkdir -p "$logs"
git clone --quiet "$here" "$work/clone"
burners=()
for _ in $(seq "$LOAD"); do
  python3 -c 'while True: pass' &
  burners+=("$!")
done
trap 'kill "${burners[@]}" 2>/dev/null; rm -rf "$work"' EXIT
passed=0
failed=0
for run in $(seq "$RUNS"); do
  started=$(date +%s)
  if make -C "$work/clone" --no-print-directory test >"$logs/run-$run.log" 2>&1; then
    passed=$((passed + 1)); verdict=passed
  else
    failed=$((failed + 1)); verdict=FAILED
  fi
  echo "run $run: $verdict in $(( $(date +%s) - started )) s: $(grep -E '^(=+ )?[0-9]+ (passed|failed)' "$logs/run-$run.log" | tail -1)"
done
echo "stress: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
