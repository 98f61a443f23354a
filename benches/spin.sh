#!/usr/bin/env bash
# Runs/s of every strategy on spin-heavy programs, against `random`, side by
# side in one invocation (one core each); writes the table into
# benches/RESULTS.md between the spin markers. A "hang" column above 0 would
# be a false alarm: every program terminates under every fair schedule.
#   HEDDLE_SPIN_RUNS=3000 benches/spin.sh
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${HEDDLE_SPIN_RUNS:-3000}
cargo build --locked --release -p heddle > /dev/null 2>&1
heddle=target/release/heddle
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
strategies="random pct:3 pos surw delay:2 ipct rr"
programs="tas sync-tas cas sync-builtins spin yield-poll relaxed-poll"
rate() { # program strategy -> "runs/s failing"
    local line
    line=$("$heddle" fuzz tests/programs/sync_zoo.c --strategy "$2" --runs "$runs" --jobs 1 \
        --keep-going --quiet --out "$out" -- "$1" | grep ' runs in ')
    echo "$(sed -E 's/.*\(([0-9]+) runs\/s.*/\1/' <<< "$line") $(sed -E 's/.*: ([0-9]+) failing.*/\1/' <<< "$line")"
}
table=$(mktemp)
{
    echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores — $runs runs per cell, \`--jobs 1\`; runs/s, then the ratio to \`random\` on the same program, then failing runs (hangs)."
    echo
    printf '| sync_zoo member |'
    for s in $strategies; do printf ' %s |' "$s"; done
    echo
    printf '|---|'
    for _ in $strategies; do printf -- '---:|'; done
    echo
    for p in $programs; do
        printf '| %s |' "$p"
        base=""
        for s in $strategies; do
            read -r r f < <(rate "$p" "$s")
            [ -z "$base" ] && base=$r
            ratio=$(awk -v a="$r" -v b="$base" 'BEGIN { printf "%.2f", a / b }')
            printf ' %s (%s×, %s) |' "$r" "$ratio" "$f"
        done
        echo
    done
} > "$table"
cat "$table"
awk -v t="$table" '
    /<!-- spin:begin -->/ { print; while ((getline l < t) > 0) print l; skip = 1; next }
    /<!-- spin:end -->/ { skip = 0 }
    !skip { print }
' benches/RESULTS.md > "$table.md"
mv "$table.md" benches/RESULTS.md
