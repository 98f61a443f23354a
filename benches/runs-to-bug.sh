#!/usr/bin/env bash
# Runs to the first bug, as a regression bench: every bundled target whose
# plain build has a bug (targets/targets.toml, `buggy` other than `pass`)
# and the test programs with a bug (tests/programs/opt/drain_cas.cpp,
# tests/programs/many/) at -O0, -O1 and -O2 and over both the -O1 and -O0
# builds in one campaign (`--opt 1,0`, build `O1+O0`), and the Rust bugs (each case of
# benches/programs/rust/peer_bugs.rs, and tests/programs/rust/abba.rs)
# built debug (`-C opt-level=0`) and release (`-C opt-level=2`). Each is
# searched by `heddle fuzz` with the default portfolio on one core from 10
# starting seeds (0, 1000, …, 9000), stopping at the first failure or
# after at most 20,000 runs. Runs to the bug = the first failing seed's
# position from the starting seed (so it does not depend on --jobs or on
# the machine's speed: the whole table but the seconds is deterministic
# for a given heddle, toolchain and rustc). A search counts as finding the
# bug only when its failure has the target's expected verdict kind; one
# that gives up (or fails otherwise) counts as the cap in the median.
#
# Prints a Markdown table: program, build, median runs to the bug over the
# 10 searches, how many found it, and the wall seconds of the 10 searches
# (after one warm-up run that compiles the build into heddle's cache).
# The same 10 seeds and the same cap for every target, large ones
# included: 36 s with the release build on a 2-core machine (2026-12-07);
# a search that gives up (20,000 runs of two_stage 100 at -O0) takes about
# 13 s.
#
# Without --check it (re)writes benches/runs-to-bug.baseline (one line
# per program and build: median and found count). With --check it leaves
# the baseline alone and exits 1, listing them, when a (program, build)
# whose bug the baseline found is not found in any search now, or whose
# median grew more than 10x (medians compared as max(median, 3), so that
# noise from 1 to 12 runs does not count).
#
# Usage: benches/runs-to-bug.sh [--check]
#   HEDDLE=path/to/heddle   the binary (default target/release/heddle)
#   RTB_ONLY=REGEX          only the programs whose name matches (the
#                           baseline is then updated, not rewritten)
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
case "${1:-}" in
"") ;;
--check) check=1 ;;
*)
    echo "usage: benches/runs-to-bug.sh [--check]" >&2
    exit 2
    ;;
esac
heddle=${HEDDLE:-target/release/heddle}
[ -x "$heddle" ] || cargo build --release --quiet -p heddle
only=${RTB_ONLY:-}
baseline=benches/runs-to-bug.baseline
seeds=(0 1000 2000 3000 4000 5000 6000 7000 8000 9000)
cap=20000
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# program build expected-kind target args... (tab-separated; args last)
rows=$(python3 - <<'PY'
import tomllib
# O1+O0: one campaign alternating the -O1 and -O0 builds (`--opt 1,0`).
LEVELS = ("-O0", "-O1", "-O2", "O1+O0")
for t in tomllib.load(open("targets/targets.toml", "rb"))["target"]:
    if t["buggy"] == "pass":
        continue
    for level in LEVELS:
        print(t["name"], level, t["buggy"], "targets/" + t["source"], *t.get("args", []), sep="\t")
# Test programs with a bug of their own (held-out shapes: a std::atomic CAS
# tally, benchmark-style many-thread pools).
tests = [("drain_cas", "assertion", "tests/programs/opt/drain_cas.cpp"),
         ("double_fetch", "heap-overflow", "tests/programs/opt/double_fetch.c")]
tests += [(name, "assertion", f"tests/programs/many/{name}.c")
          for name in ("reorder_pool", "twostage_heap", "pair_args", "stage_index",
                       "transfer_pool")]
for name, kind, source in tests:
    for level in LEVELS:
        print(name, level, kind, source, sep="\t")
rust = [("peer_bugs.rs:" + case, kind, "peer_bugs", case)
        for case, kind in [("lost_update", "panic"), ("check_then_act", "panic"),
                           ("double_init", "panic"), ("lost_wakeup", "deadlock"),
                           ("channel_order", "panic"), ("ring3", "deadlock")]]
rust.append(("abba.rs", "deadlock", "abba"))
for name, kind, *target in rust:
    for build in ("debug", "release"):
        print(name, build, kind, *target, sep="\t")
PY
)

# The Rust modules, built once per invocation (rustc is quick).
rust_module() { # stem build
    local src=$1 build=$2 level
    case $1 in
    peer_bugs) src=benches/programs/rust/peer_bugs.rs ;;
    abba) src=tests/programs/rust/abba.rs ;;
    esac
    [ "$build" = debug ] && level=0 || level=2
    local out="$work/$1-$build.wasm"
    if [ ! -f "$out" ]; then
        rustc --edition 2021 --target wasm32-wasip1-threads -g -C opt-level=$level \
            -C link-arg=--max-memory=4294967296 "$src" -o "$out" >&2 </dev/null
    fi
    echo "$out"
}

# One search: the JSON report of `heddle fuzz` of at most $2 runs from
# seed $1, into $3.
search() { # seed runs json target flags... -- args...
    local seed=$1 runs=$2 json=$3
    shift 3
    rm -rf "$work/out"
    local rc=0
    "$heddle" fuzz --seed "$seed" --runs "$runs" --jobs 1 --quiet --format json \
        --out "$work/out" "$@" >"$json" 2>"$work/err" </dev/null || rc=$?
    if [ "$rc" -gt 1 ]; then
        echo "runs-to-bug: heddle fuzz $* (seed $seed) exited $rc:" >&2
        cat "$work/err" >&2
        exit 2
    fi
}

start_all=$EPOCHREALTIME
echo "| program | build | median runs to bug | found | wall s |"
echo "|---|---|---:|---:|---:|"
: >"$work/results"
while IFS=$'\t' read -r -a row; do
    program=${row[0]} build=${row[1]} kind=${row[2]} target=${row[3]}
    args=("${row[@]:4}")
    if [ -n "$only" ] && ! [[ $program =~ $only ]]; then
        continue
    fi
    flags=()
    case $build in
    -O*) flags=(--cflag "$build") ;;
    O1+O0) flags=(--opt 1,0) ;;
    *) target=$(rust_module "$target" "$build") ;;
    esac
    # Warm-up: compiles the build into heddle's cache.
    search 0 1 "$work/warm.json" "$target" "${flags[@]}" -- "${args[@]}"
    files=()
    t0=$EPOCHREALTIME
    for s in "${seeds[@]}"; do
        search "$s" "$cap" "$work/r$s.json" "$target" "${flags[@]}" -- "${args[@]}"
        files+=("$s=$work/r$s.json")
    done
    t1=$EPOCHREALTIME
    python3 - "$program" "$build" "$kind" "$cap" "$t0" "$t1" "${files[@]}" >>"$work/results" <<'PY'
import json, sys
program, build, kind, cap, t0, t1, *files = sys.argv[1:]
cap = int(cap)
runs, found = [], 0
for f in files:
    seed, path = f.split("=", 1)
    d = json.load(open(path))
    if d["result"] == "fail" and d["verdict"]["kind"] == kind:
        runs.append(d["seed"] - int(seed) + 1)
        found += 1
    else:
        if d["result"] == "fail":
            print(f"runs-to-bug: {program} {build} seed {seed}: {d['verdict']['kind']}, "
                  f"not {kind}: {d['verdict']['summary'][:200]}", file=sys.stderr)
        runs.append(cap)
runs.sort()
n = len(runs)
median = runs[n // 2] if n % 2 else (runs[n // 2 - 1] + runs[n // 2]) / 2
print(program, build, f"{median:g}", found, n, f"{float(t1) - float(t0):.1f}")
PY
    read -r _ _ median found n secs < <(tail -1 "$work/results")
    if [ "$found" -eq 0 ]; then
        shown="not found in $cap"
    elif [ "$found" -le $((n / 2)) ]; then
        shown="$median (capped)"
    else
        shown=$median
    fi
    echo "| $program | $build | $shown | $found/$n | $secs |"
done <<<"$rows"
total=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.0f}')" \
    "$start_all" "$EPOCHREALTIME")
echo
echo "Total wall time: ${total} s (${#seeds[@]} seeds, at most $cap runs per search, --jobs 1)."

if [ "$check" = 0 ]; then
    python3 - "$baseline" "$work/results" "$only" "$cap" "${#seeds[@]}" <<'PY'
import sys
path, results, only, cap, seeds = sys.argv[1:]
header = (
    f"# Median runs to the first bug over {seeds} seeds (0, 1000, ...), the default\n"
    f"# portfolio, --jobs 1, at most {cap} runs per search (a search that gives up\n"
    f"# counts as {cap}). Written by benches/runs-to-bug.sh; its --check fails when\n"
    "# a bug found here is no longer found or takes more than 10x the runs.\n"
    "# program build median found\n"
)
rows = {}
if only:
    try:
        for line in open(path):
            if line.strip() and not line.startswith("#"):
                p, b, m, f = line.split()
                rows[(p, b)] = (m, f)
    except FileNotFoundError:
        pass
for line in open(results):
    p, b, m, f, _n, _s = line.split()
    rows[(p, b)] = (m, f)
with open(path, "w") as out:
    out.write(header)
    for (p, b), (m, f) in rows.items():
        out.write(f"{p} {b} {m} {f}\n")
PY
    echo "Wrote $baseline."
    exit 0
fi

python3 - "$baseline" "$work/results" "$only" <<'PY'
import sys
path, results, only = sys.argv[1:]
base = {}
for line in open(path):
    if line.strip() and not line.startswith("#"):
        p, b, m, f = line.split()
        base[(p, b)] = (float(m), int(f))
now = {}
for line in open(results):
    p, b, m, f, _n, _s = line.split()
    now[(p, b)] = (float(m), int(f))
bad, notes = [], []
for key, (bm, bf) in base.items():
    name = " ".join(key)
    if key not in now:
        if not only:
            notes.append(f"{name}: in the baseline but not measured (no longer bundled?)")
        continue
    nm, nf = now[key]
    if bf > 0 and nf == 0:
        bad.append(f"{name}: no longer found (baseline: median {bm:g}, found {bf})")
    elif bf > 0 and max(nm, 3) > 10 * max(bm, 3):
        bad.append(f"{name}: median {nm:g} runs, more than 10x the baseline's {bm:g} "
                   f"(found {nf}, baseline {bf})")
    elif bf == 0 and nf > 0:
        notes.append(f"{name}: found now ({nf}, median {nm:g}), not in the baseline")
for key in now:
    if key not in base:
        notes.append(f"{' '.join(key)}: not in the baseline")
print()
for n in notes:
    print(f"note: {n}")
if bad:
    print(f"{len(bad)} regression(s) against {path}:")
    for b in bad:
        print(f"  {b}")
    sys.exit(1)
print(f"no regression against {path}")
PY
