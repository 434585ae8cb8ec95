#!/usr/bin/env bash
# Runs the README's test command N times in a row (default 20) while busy
# loops keep every core of the machine busy, and prints how many runs
# passed. A test that only passes on an idle machine — one that depends on
# a race happening, or on a timing a loaded machine can miss — shows here.
#
#   scripts/stress-suite.sh            # 20 runs, one busy loop per core
#   scripts/stress-suite.sh 5          # 5 runs
#   BURNERS=4 scripts/stress-suite.sh  # 4 busy loops
#
# Logs of failed runs are kept in target/stress/run-N.log.
set -uo pipefail
cd "$(dirname "$0")/.."

runs=${1:-20}
# A target directory of its own: a build started meanwhile in target/
# (by you, or an editor) would swap the library under the running tests.
export CARGO_TARGET_DIR=${STRESS_TARGET_DIR:-target/stress/build}
burners=${BURNERS:-$(nproc)}
test_command=(cargo test --workspace --release --all-features)

# Build first, so the runs measure the tests, not the compiler.
"${test_command[@]}" --no-run || exit 1

pids=()
stop_burners() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
}
trap stop_burners EXIT
for _ in $(seq "$burners"); do
  (while :; do :; done) &
  pids+=("$!")
done

mkdir -p target/stress
passed=0
for run in $(seq "$runs"); do
  log="target/stress/run-$run.log"
  if "${test_command[@]}" >"$log" 2>&1; then
    passed=$((passed + 1))
    rm -f "$log"
    echo "run $run/$runs: passed"
  else
    echo "run $run/$runs: FAILED (log: $log)"
    grep -E "^test .* FAILED|panicked at" "$log" | head -5
  fi
done
echo "stress: $passed/$runs runs passed with $burners busy loop(s) on $(nproc) core(s)"
[ "$passed" -eq "$runs" ]
