#!/usr/bin/env bash
# Long runs side by side: two heddle binaries, alternating, one `fuzz` run
# each (`--runs 1 -j 1 --strategy random`, the defaults otherwise: memory
# checker and race detector on) of programs that run for millions of
# steps. Per measure: the run's steps (from `heddle run`), steps/s and
# peak resident memory of each binary, and new/base ratios (steps/s: > 1
# is faster; memory: < 1 is smaller), medians over the rounds.
# Usage: benches/long-run.sh BASE_BINARY [NEW_BINARY] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: benches/long-run.sh BASE_BINARY [NEW_BINARY] [rounds]}
new=${2:-target/release/heddle}
rounds=${3:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$new" c++ -O1 benches/programs/atomic_sweep.cpp -o "$out/sweep.wasm"
"$new" cc -O1 benches/programs/condvar_ring.c -o "$out/ring.wasm"

# name|module|arguments
measures=(
    "1M atomics x 8 threads, 2 rounds|$out/sweep.wasm|8 1000000 2"
    "100k atomics x 64 threads, 8 rounds|$out/sweep.wasm|64 100000 8"
    "condvar ring 16 threads x 20000|$out/ring.wasm|16 20000"
)

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# One fuzz run: prints "seconds kilobytes".
measure() {
    local bin=$1 module=$2 args=$3
    /usr/bin/time -f '%M' -o "$out/rss" "$bin" fuzz "$module" --runs 1 -j 1 --strategy random \
        --max-steps 1000000000 --format json --out "$out/campaign" -- $args 2>/dev/null \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["statistics"]["elapsed_seconds"])' \
        | tr '\n' ' '
    cat "$out/rss"
    rm -rf "$out/campaign"
}

printf '| program | steps | base steps/s | new steps/s | new/base steps/s | base peak MB | new peak MB | new/base memory |\n'
printf '|---|---:|---:|---:|---:|---:|---:|---:|\n'
for m in "${measures[@]}"; do
    IFS='|' read -r name module args <<<"$m"
    steps=$("$new" run "$module" --quiet-output --max-steps 1000000000 -- $args \
        | sed -n 's/.*: \([0-9]*\) steps,.*/\1/p')
    : > "$out/b"; : > "$out/n"
    for r in $(seq "$rounds"); do
        if [ $((r % 2)) -eq 1 ]; then
            measure "$base" "$module" "$args" >> "$out/b"; measure "$new" "$module" "$args" >> "$out/n"
        else
            measure "$new" "$module" "$args" >> "$out/n"; measure "$base" "$module" "$args" >> "$out/b"
        fi
    done
    bs=$(awk '{print $1}' "$out/b" | median); ns=$(awk '{print $1}' "$out/n" | median)
    bm=$(awk '{print $2}' "$out/b" | median); nm=$(awk '{print $2}' "$out/n" | median)
    awk -v name="$name" -v steps="$steps" -v bs="$bs" -v ns="$ns" -v bm="$bm" -v nm="$nm" 'BEGIN {
        printf "| %s | %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f |\n",
            name, steps, steps / bs, steps / ns, bs / ns, bm / 1024, nm / 1024, nm / bm }'
done
