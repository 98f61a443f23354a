#!/usr/bin/env bash
# Memory and disk of a campaign as its runs grow: peak RSS (GNU time's
# "Maximum resident set size") and the bytes of the campaign directory
# after 10^4, 10^5 and 10^6 runs of race_bank's fixed build (every seed
# runs), with the default state only and with the per-run journal
# (--journal all). Flat cost per run means the first two columns barely
# move from one row to the next.
#
# Usage: benches/campaign-scale.sh [max-exponent (default 6)] [jobs (default 2)]
# Set HEDDLE to measure another binary. Writes a Markdown table on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
max=${1:-6}
jobs=${2:-2}
heddle=${HEDDLE:-target/release/heddle}
[ -x "$heddle" ] || cargo build --release --quiet -p heddle
[ -x /usr/bin/time ] || { echo "needs GNU time (apt-get install time)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Build the target once, outside the measurements.
"$heddle" fuzz targets/race_bank.c --fixed --quiet --runs 10 --out "$out/warm" >/dev/null

measure() { # runs journal → "rss_kib bytes seconds"
    local dir="$out/r$1-$2"
    local t0 t1
    t0=$(date +%s.%N)
    /usr/bin/time -f '%M' -o "$out/rss" "$heddle" fuzz targets/race_bank.c --fixed --quiet \
        --keep-going --runs "$1" --jobs "$jobs" --journal "$2" --out "$dir" >/dev/null
    t1=$(date +%s.%N)
    echo "$(cat "$out/rss") $(du -sb "$dir" | cut -f1) $(echo "$t1 - $t0" | bc)"
    rm -rf "$dir"
}

echo '| runs | peak RSS | directory | peak RSS, `--journal all` | directory, `--journal all` | journal bytes/run |'
echo "|---:|---:|---:|---:|---:|---:|"
for e in $(seq 4 "$max"); do
    n=$((10 ** e))
    read -r rss bytes _ < <(measure "$n" none)
    read -r jrss jbytes _ < <(measure "$n" all)
    printf '| 10^%d | %.1f MiB | %.1f KB | %.1f MiB | %.1f MB | %.1f |\n' "$e" \
        "$(echo "$rss / 1024" | bc -l)" "$(echo "$bytes / 1000" | bc -l)" \
        "$(echo "$jrss / 1024" | bc -l)" "$(echo "$jbytes / 1000000" | bc -l)" \
        "$(echo "($jbytes - $bytes) / $n" | bc -l)"
done
