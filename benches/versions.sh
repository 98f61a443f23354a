#!/usr/bin/env bash
# Two heddle binaries side by side in one invocation, alternating, so that
# a refactoring can be checked to cost nothing: `fuzz race_bank --fixed`
# runs/s (one job) and the wall time of a DPOR proof (`explore uaf_publish
# --fixed`). Prints the ratio new/base per round (runs/s: > 1 is faster;
# wall time: < 1 is faster).
# Usage: benches/versions.sh BASE_BINARY [NEW_BINARY] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: benches/versions.sh BASE_BINARY [NEW_BINARY] [rounds]}
new=${2:-target/release/heddle}
rounds=${3:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
rate() { # binary
    "$1" fuzz targets/race_bank.c --fixed --jobs 1 --runs 3000 --quiet --out "$out/f" -- 4 25 2>&1 |
        head -1 | sed -nE 's/.*\(([0-9]+) runs\/s.*/\1/p'
}
wall() { # binary
    local t0 t1
    t0=$(date +%s.%N)
    "$1" explore targets/uaf_publish.c --fixed --out "$out/e" > /dev/null 2>&1 || true
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
}
"$base" --version
"$new" --version
echo "| round | fuzz race_bank 4x25 runs/s base | new | new/base | explore uaf_publish s base | new | new/base |"
echo "|---|---|---|---|---|---|---|"
for i in $(seq "$rounds"); do
    rb=$(rate "$base"); rn=$(rate "$new")
    wb=$(wall "$base"); wn=$(wall "$new")
    printf "| %d | %s | %s | %.2f | %.2f | %.2f | %.2f |\n" "$i" "$rb" "$rn" \
        "$(awk -v a="$rn" -v b="$rb" 'BEGIN { print a / b }')" "$wb" "$wn" \
        "$(awk -v a="$wn" -v b="$wb" 'BEGIN { print a / b }')"
done
