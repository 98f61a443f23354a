#!/usr/bin/env bash
# Campaign scaling: runs/s of `heddle fuzz` with --jobs 1 and --jobs 2 on
# race_bank (the fixed build, so every seed of the range runs).
# Usage: scripts/bench-campaign.sh [runs] [target args...]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20000}
shift || true
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(4 25)
heddle=${HEDDLE:-target/release/heddle}
[ -x "$heddle" ] || cargo build --release --quiet
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
rate() {
    "$heddle" fuzz targets/race_bank.c --fixed --quiet --runs "$runs" --jobs "$1" \
        --out "$out/j$1" -- "${args[@]}" | head -1 | sed -E 's/.*\(([0-9]+) runs\/s.*/\1/'
}
"$heddle" fuzz targets/race_bank.c --fixed --quiet --runs 10 --out "$out/warm" -- "${args[@]}" >/dev/null
one=$(rate 1)
two=$(rate 2)
echo "race_bank ${args[*]}, $runs runs: --jobs 1 $one runs/s, --jobs 2 $two runs/s, speedup $(echo "scale=2; $two / $one" | bc)"
