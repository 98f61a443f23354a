#!/usr/bin/env bash
# Strategies on every bundled target: `heddle compare` for every strategy,
# old and new, and the default `heddle fuzz` (no --strategy) on one core
# (--jobs 1) with a 60 s budget per target: runs and seconds to the first
# bug, whether its replay file reproduces, and the fixed build over the
# same number of runs. Rewrites the section between the markers in
# benches/RESULTS.md.
#   RUNS=500 TRIALS=5 FIXED_RUNS=2000 benches/strategies.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-500}
TRIALS=${TRIALS:-5}
FIXED_RUNS=${FIXED_RUNS:-2000}
STRATEGIES=${STRATEGIES:-random,pct:3,pct:10,pos,surw,delay:2,sites,sites:2,rff,random+stall,pos+stall,default}
cargo build --locked --release -p heddle -q
heddle=target/release/heddle
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

started=$(date -u +"%Y-%m-%d %H:%M")
"$heddle" compare --strategy "$STRATEGIES" --runs "$RUNS" --trials "$TRIALS" \
    --out "$work/compare" > /dev/null || true

targets=$(python3 - <<'PY'
import tomllib
for t in tomllib.load(open("targets/targets.toml", "rb"))["target"]:
    if t["buggy"] != "pass":
        print(t["name"], t["source"], " ".join(t.get("args", [])), sep="\t")
PY
)
fuzz_table="| target | runs to first bug | seconds to first bug | verdict | replay reproduces | fixed build, $FIXED_RUNS runs |
|---|---:|---:|---|---|---|"
while IFS=$'\t' read -r name source args; do
    out="$work/fuzz-$name"
    # shellcheck disable=SC2086
    "$heddle" fuzz "targets/$source" --jobs 1 --time-budget 60s --out "$out" -- $args > "$out.txt" 2>/dev/null || true
    runs=$(sed -n '1s/^\([0-9]*\) runs in \([0-9.]*\)s.*/\1/p' "$out.txt")
    secs=$(sed -n '1s/^\([0-9]*\) runs in \([0-9.]*\)s.*/\2/p' "$out.txt")
    verdict=$(sed -n 's/^seed [0-9]*: \([a-z-]*\).*/\1/p' "$out.txt" | head -1)
    replay=$(ls "$out"/*-seed*.toml 2>/dev/null | head -1 || true)
    reproduces=no
    if [ -n "$replay" ]; then
        replayed=$("$heddle" replay "$replay" 2>/dev/null || true)
        if grep -q "replay reproduced" <<< "$replayed"; then
            reproduces=yes
        fi
    fi
    # shellcheck disable=SC2086
    fixed=$("$heddle" fuzz "targets/$source" --fixed --jobs 1 --runs "$FIXED_RUNS" --out "$out-fixed" -- $args 2>/dev/null | head -1 | sed -n 's/.*: \([0-9]*\) failing.*/\1 failing/p')
    fuzz_table+=$'\n'"| $name | ${runs:-?} | ${secs:-?} | ${verdict:-none in 60 s} | $reproduces | ${fixed:-?} |"
done <<< "$targets"

section="<!-- strategies:begin -->
Measured $started UTC on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)),
\`RUNS=$RUNS TRIALS=$TRIALS benches/strategies.sh\`.

\`heddle compare --strategy $STRATEGIES --runs $RUNS --trials $TRIALS\`
(\`default\` is the portfolio \`heddle fuzz\` runs without \`--strategy\`; seconds
are per trial on one core):

$(cat "$work/compare/compare.md")

The default \`heddle fuzz\` (no \`--strategy\`), \`--jobs 1\`, stopping at the first
failure or after 60 s; then its replay file, and the fixed build over $FIXED_RUNS runs:

$fuzz_table
<!-- strategies:end -->"
python3 - "$section" <<'PY'
import re, sys
path = "benches/RESULTS.md"
text = open(path).read()
new = sys.argv[1]
pattern = re.compile(r"<!-- strategies:begin -->.*?<!-- strategies:end -->", re.S)
if pattern.search(text):
    text = pattern.sub(lambda _: new, text)
else:
    text += "\n## Strategies on every bundled target (`benches/strategies.sh`)\n\n" + new + "\n"
open(path, "w").write(text)
PY
echo "wrote the strategies section of benches/RESULTS.md"
