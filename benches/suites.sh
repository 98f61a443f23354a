#!/usr/bin/env bash
# The unit-test-shaped programs of tests/programs/suites at full size
# (10^6–10^7 steps, up to 257 threads), with the default settings and the
# checkers on: one run per strategy of each correct program (verdict, steps,
# seconds), then each -DBUG variant under the default portfolio with
# `--time-budget 30s` (what it found, the command's wall time).
# Usage: benches/suites.sh [strategies]   (default: every strategy; -j 1)
set -euo pipefail
cd "$(dirname "$0")/.."
strategies=${1:-random,pct:3,sites:3,pos,surw,delay:2,ipct,rr,rff,random+stall,pos+stall,sites+stall,surw+stall}
heddle=${HEDDLE:-target/release/heddle}
[ -x "$heddle" ] || cargo build --release --quiet -p heddle
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
programs=(pool mutex_stress spsc_ring ticket_mpmc ticket_lock handoff)
echo "| program | strategy | verdict | steps | s |"
echo "|---|---|---|---:|---:|"
for p in "${programs[@]}"; do
    for s in ${strategies//,/ }; do
        start=$(date +%s.%N)
        text=$("$heddle" run "tests/programs/suites/$p.c" --strategy "$s" --seed 1 2>&1 || true)
        end=$(date +%s.%N)
        verdict=$(grep -m1 '^verdict:' <<<"$text" | cut -c10- | cut -c1-60)
        steps=$(grep -oE '[0-9]+ steps' <<<"$text" | head -1 | cut -d' ' -f1)
        printf '| %s | %s | %s | %s | %.1f |\n' "$p" "$s" "$verdict" "$steps" "$(echo "$end - $start" | bc)"
    done
done
echo
echo "| -DBUG program | found (first line) | wall s |"
echo "|---|---|---:|"
for p in pool mutex_stress spsc_ring ticket_mpmc; do
    start=$(date +%s.%N)
    text=$("$heddle" fuzz "tests/programs/suites/$p.c" --cflag -DBUG --time-budget 30s -j 1 --quiet --out "$out/$p" 2>&1 || true)
    end=$(date +%s.%N)
    first=$(grep -m1 -E '^seed [0-9]+:|^  seed [0-9]+: data race|inconclusive|error' <<<"$text" | cut -c1-90)
    printf '| %s | %s | %.1f |\n' "$p" "${first:-nothing}" "$(echo "$end - $start" | bc)"
done
