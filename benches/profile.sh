#!/usr/bin/env bash
# Where a campaign's time goes, by component: `perf record` (sampling, no
# call graphs) of `heddle fuzz --jobs 1` on one program, each sampled symbol
# sorted into a component by its name, as a markdown table.
#   benches/profile.sh [--bin BINARY] [--runs N] -- SOURCE [FUZZ ARGS...]
#   benches/profile.sh -- targets/race_bank.c --fixed -- 2 2
# Needs `perf` (Debian: linux-perf) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/heddle
runs=60000
while [ $# -gt 0 ]; do
    case $1 in
        --bin) bin=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "usage: benches/profile.sh [--bin BINARY] [--runs N] -- SOURCE [FUZZ ARGS...]" >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || { echo "benches/profile.sh: no program given" >&2; exit 2; }
command -v perf > /dev/null || { echo "benches/profile.sh needs perf (apt-get install linux-perf)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Warm the compile and instrumentation caches outside the profile.
"$bin" fuzz --quiet --runs 10 --jobs 1 --strategy random --out "$out/warm" "$@" > /dev/null
perf record -q -F 4999 -o "$out/perf.data" \
    "$bin" fuzz --quiet --runs "$runs" --jobs 1 --strategy random --out "$out/f" "$@" |
    head -1 >&2
perf report -i "$out/perf.data" --no-children --sort dso,sym -g none 2> /dev/null |
    python3 -c '
import re, sys
# (component, pattern on "dso symbol"), first match wins.
rules = [
    ("guest code (compiled wasm)", r"\.cwasm |wasm\[0\]|signatures\["),
    ("memory reset between runs (scan)", r"is_zero|return_slot|recycle_memory|GuestMemory::reset"),
    ("instances: linking, instantiation, reset, stores", r"Executor::worker|Executor::instantiate|Instance::new|instantiate|InstancePre|Store<|StoreOpaque|allocate_instance|pooling|Linker|string_pool|TryVec|OwnedImports|Module::imports|func_loc|Instance::|type_registry"),
    ("memset and memmove (bulk guest memory, zeroing, copies)", r"memset|memmove|memcpy|memcmp"),
    ("race detector", r"hb::|races::|Races"),
    ("memory checker", r"memcheck|heap::|MemCheck"),
    ("scheduler and strategies", r"heddle::sched|RunState::(yield_point|executed|candidates|block|notify|tick|note_pending|schedule_away|locked|finish|spawn)|Scheduler::|state::"),
    ("host calls and fiber switches (wasmtime)", r"fiber|catch_unwind|trampoline|BlockingContext|wrap_async|HostFunc|traphandlers|tls::|Global::|hooks::|Caller"),
    ("campaign: records, journal, summary", r"campaign::|journal|summary|serde|make_record|schedule_hash|SiteSet|sha2"),
    ("executor loop and thread futures", r"run_with_strategy|Executor::(start|drive|close)"),
    ("run setup and verdict", r"Program::finish|RunState::new|wasi::|WasiCtx|wasi_common|verdict|Executor::"),
    ("allocator", r"malloc|free|_mi_|mi_|realloc|calloc|unlink_chunk|__rust_(alloc|dealloc)"),
    ("kernel", r"\[kernel"),
]
totals = {}
for line in sys.stdin:
    m = re.match(r"\s+([0-9.]+)%\s+(\S+)\s+\[.\]\s+(.*)", line)
    if not m:
        continue
    pct, dso, sym = float(m.group(1)), m.group(2), m.group(3)
    text = dso + " " + sym
    name = next((c for c, p in rules if re.search(p, text)), "other")
    totals[name] = totals.get(name, 0.0) + pct
print("| component | share of samples |")
print("|---|---:|")
for name, pct in sorted(totals.items(), key=lambda kv: -kv[1]):
    print(f"| {name} | {pct:.1f}% |")
'
