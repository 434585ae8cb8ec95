#!/usr/bin/env bash
# Runs the README's test command N times in a row (default 20) while
# neighbours keep every core of the machine busy, and prints how many runs
# passed. A test that only passes on an idle machine — one that depends on
# a race happening, or on a timing a loaded machine can miss — shows here.
#
#   scripts/stress-suite.sh                  # 20 runs, one busy loop per core
#   scripts/stress-suite.sh 5                # 5 runs
#   BURNERS=4 scripts/stress-suite.sh        # 4 neighbours
#   NEIGHBOUR=pipe scripts/stress-suite.sh   # neighbours that switch context
#
# Busy loops take the CPU in long slices; `NEIGHBOUR=pipe` runs
# `perf bench sched pipe` instead (two processes handing a byte back and
# forth, hundreds of thousands of context switches a second), which
# preempts the tests at many more points and shows races a busy loop hides.
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

neighbour=${NEIGHBOUR:-busy}
case "$neighbour" in
  busy) ;;
  pipe)
    if ! command -v perf >/dev/null 2>&1; then
      echo "NEIGHBOUR=pipe needs perf (Debian: apt-get install linux-perf)" >&2
      exit 2
    fi ;;
  *) echo "NEIGHBOUR is busy or pipe, not '$neighbour'" >&2; exit 2 ;;
esac

# Each neighbour leads a process group of its own (setsid), so that
# stopping it stops what it started too (perf forks).
pids=()
stop_burners() {
  for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null; done
  wait 2>/dev/null
}
trap stop_burners EXIT
for _ in $(seq "$burners"); do
  if [ "$neighbour" = pipe ]; then
    setsid bash -c 'while :; do perf bench sched pipe -l 10000000 >/dev/null 2>&1; done' &
  else
    setsid bash -c 'while :; do :; done' &
  fi
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
echo "stress: $passed/$runs runs passed with $burners $neighbour neighbour(s) on $(nproc) core(s)"
[ "$passed" -eq "$runs" ]
