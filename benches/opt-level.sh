#!/usr/bin/env bash
# The default optimisation level, measured: every bundled target at -O0 and
# -O1, the same strategy and seeds, side by side in one invocation. Prints
# a Markdown table: failing runs (the bug found per run), runs/s and steps
# per run (scheduling points the same logic makes).
# Usage: benches/opt-level.sh [runs]   (default 2000; --jobs 1)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-2000}
heddle=${HEDDLE:-target/release/heddle}
[ -x "$heddle" ] || cargo build --release --quiet
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# name source strategy args...
targets=(
    "race_bank race_bank.c random 2 2"
    "race_bank_4x25 race_bank.c random 4 25"
    "deadlock_abba deadlock_abba.c random"
    "lost_wakeup lost_wakeup.c pct:3"
    "counter_spy counter_spy.c random 2 3"
    "codeblock codeblock.cpp random"
    "aba_stack aba_stack.c pct:3 3 2"
    "uaf_publish uaf_publish.c random"
    "racy_counter racy_counter.c random 3"
    "spin_barrier spin_barrier.c random"
    "timed_wait timed_wait.c random"
)
one() { # level name source strategy args...
    local level=$1 name=$2 src=$3 strat=$4
    shift 4
    local line
    line=$("$heddle" fuzz "targets/$src" --cflag "$level" --strategy "$strat" --runs "$runs" \
        --jobs 1 --keep-going --quiet --stats --out "$out/$name$level" -- "$@" 2>&1 || true)
    local failing rate steps
    failing=$(echo "$line" | head -1 | sed -nE 's/.*: ([0-9]+) failing.*/\1/p')
    rate=$(echo "$line" | head -1 | sed -nE 's/.*\(([0-9]+) runs\/s.*/\1/p')
    steps=$(echo "$line" | sed -nE 's/.*steps\/run ([0-9.]+).*/\1/p' | head -1)
    echo "${failing:-0} ${rate:-?} ${steps:-?}"
}
echo "| target | strategy | -O0 failing/$runs | -O1 failing/$runs | -O0 runs/s | -O1 runs/s | -O0 steps/run | -O1 steps/run |"
echo "|---|---|---|---|---|---|---|---|"
for t in "${targets[@]}"; do
    read -r name src strat args <<<"$t"
    read -r f0 r0 s0 <<<"$(one -O0 "$name" "$src" "$strat" $args)"
    read -r f1 r1 s1 <<<"$(one -O1 "$name" "$src" "$strat" $args)"
    echo "| $name | $strat | $f0 | $f1 | $r0 | $r1 | $s0 | $s1 |"
done
