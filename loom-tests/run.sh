#!/usr/bin/env bash
# Model-check the pool's wakeup, preemption, cancel, replace, shutdown,
# hand-off, periodic and exclusive-key protocol with loom (docs/loom.md).
#
#   loom-tests/run.sh                         # CI: preemption bound 3
#   LOOM_MAX_PREEMPTIONS=4 loom-tests/run.sh  # deeper, slower
#   loom-tests/run.sh --test loom_cancel      # one model file
#
# Arguments before `--` go to cargo, the rest to the test harness; e.g.
# `loom-tests/run.sh -- --nocapture` prints each model's execution count.
set -euo pipefail

cd "$(dirname "$0")/.."

export RUSTFLAGS="--cfg loom -C debug-assertions"
export CARGO_TARGET_DIR=target/loom
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
# LOOM_MAX_DURATION and LOOM_MAX_PERMUTATIONS end a run early and report a
# pass: never let them leak in from the environment.
unset LOOM_MAX_DURATION LOOM_MAX_PERMUTATIONS

cargo_args=()
test_args=()
while [ $# -gt 0 ]; do
    if [ "$1" = "--" ]; then
        shift
        test_args=("$@")
        break
    fi
    cargo_args+=("$1")
    shift
done

echo "loom: LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS"
start=$(date +%s)
cargo test -p loom-tests --release "${cargo_args[@]}" -- --test-threads=1 "${test_args[@]}"
echo "loom: finished in $(($(date +%s) - start)) s"
