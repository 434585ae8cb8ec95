#!/usr/bin/env bash
# Miri over the unit tests of every file of src/ with `unsafe` that runs
# outside loom. Loom's own stand-ins, under `cfg(loom)`, are checked by the
# loom models instead.
#
#   core::counted    the core's own reference counts, the value dropped in
#                    place and the allocation freed once
#   core::task_cell  the task kept in place or boxed, behind a function table
#   core::tests      core/run.rs calling and settling the task through it,
#                    and core/mod.rs's `Sync` for the core
#   clock::          clock_gettime, and tsc/ with a stand-in counter for
#                    `rdtsc`, which Miri cannot execute
#   wheel::tests     the wheel's prefetch hint
#   wheel::level     the slot arithmetic the wheel indexes with
#   shutdown::slots  the registry's fixed tables, a reader beside a writer
#                    that makes new ones, and the weak counts they keep
#   scheduler::timer the strong count a wheel entry keeps with no pointer,
#                    taken back from the registry's slot
#
# scheduler/worker.rs's one `unsafe` is a `prctl` call, which Miri cannot
# execute, on a thread it starts. scheduler/pool/apart.rs's are CPU-set
# calls, which Miri cannot execute either; under Miri it does nothing, and
# its own tests run in the test suite.
#
# Needs a nightly toolchain with the miri and rust-src components. The
# clock tests read the real clock, so isolation is off.
set -euo pipefail
cd "$(dirname "$0")/.."
export MIRIFLAGS="${MIRIFLAGS:-} -Zmiri-disable-isolation"
CARGO_TARGET_DIR=target/miri cargo +nightly miri test --lib -- \
  core::counted core::task_cell core::tests clock:: wheel::tests wheel::level \
  shutdown::slots scheduler::timer
