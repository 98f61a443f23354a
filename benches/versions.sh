#!/usr/bin/env bash
# Two heddle binaries side by side in one invocation, alternating, so that
# a change can be checked for what it costs or saves per run: `fuzz` runs/s
# (one job, `random`, the defaults: granularity `all`, memory checker and
# race detector on) on programs from an empty `main` to 100 threads, and the
# wall time of a DPOR proof (`explore uaf_publish --fixed`). Each round runs
# every measure once with each binary, alternating which goes first; the
# table gives each round's new/base ratio (runs/s: > 1 is faster; wall
# time: < 1 is faster) and the medians. `STRATEGY=pos` measures `fuzz` under
# another strategy; `STRATEGY=` (empty) under the default portfolio.
# Usage: benches/versions.sh BASE_BINARY [NEW_BINARY] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: benches/versions.sh BASE_BINARY [NEW_BINARY] [rounds]}
new=${2:-target/release/heddle}
rounds=${3:-3}
strategy=()
[ -n "${STRATEGY-random}" ] && strategy=(--strategy "${STRATEGY-random}")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf 'int main(void) { return 0; }\n' > "$out/empty.c"
cat > "$out/one_thread.c" <<'EOF'
#include <pthread.h>
static void *worker(void *arg) { return arg; }
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, worker, 0);
    pthread_join(t, 0);
    return 0;
}
EOF

# name|runs|fuzz arguments
measures=(
    "empty main|40000|$out/empty.c"
    "one thread|20000|$out/one_thread.c"
    "race_bank 2x0|20000|targets/race_bank.c --fixed -- 2 0"
    "race_bank 2x2|20000|targets/race_bank.c --fixed -- 2 2"
    "race_bank 4x25|2000|targets/race_bank.c --fixed -- 4 25"
    "condvar_ring 16x2|500|benches/programs/condvar_ring.c -- 16 2"
    "many_threads 100|500|benches/programs/many_threads.c -- 100"
)

rate() { # binary runs args...
    local bin=$1 runs=$2
    shift 2
    rm -rf "$out/f"
    local text
    # shellcheck disable=SC2068
    text=$("$bin" fuzz ${strategy[@]+"${strategy[@]}"} --jobs 1 --runs "$runs" --quiet --out "$out/f" $@ 2>&1)
    sed -nE '1s/.*\(([0-9]+) runs\/s.*/\1/p' <<< "$text"
}
wall() { # binary
    local t0 t1
    t0=$(date +%s.%N)
    "$1" explore targets/uaf_publish.c --fixed --out "$out/e" > /dev/null 2>&1 || true
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
}
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

"$base" --version
"$new" --version
# Warm the compile and instrumentation caches of both binaries.
for m in "${measures[@]}"; do
    IFS='|' read -r _ _ args <<< "$m"
    rate "$base" 10 "$args" > /dev/null
    rate "$new" 10 "$args" > /dev/null
done

declare -A ratios bases news
for i in $(seq "$rounds"); do
    for m in "${measures[@]}"; do
        IFS='|' read -r name runs args <<< "$m"
        if [ $((i % 2)) = 1 ]; then
            b=$(rate "$base" "$runs" "$args"); n=$(rate "$new" "$runs" "$args")
        else
            n=$(rate "$new" "$runs" "$args"); b=$(rate "$base" "$runs" "$args")
        fi
        bases[$name]+="$b "
        news[$name]+="$n "
        ratios[$name]+="$(awk -v a="$n" -v b="$b" 'BEGIN { printf "%.2f", a / b }') "
    done
    wb=$(wall "$base"); wn=$(wall "$new")
    bases[explore]+="$wb "
    news[explore]+="$wn "
    ratios[explore]+="$(awk -v a="$wn" -v b="$wb" 'BEGIN { printf "%.2f", a / b }') "
done

echo "| measure | base (median) | new (median) | new/base per round | median |"
echo "|---|---:|---:|---|---:|"
for m in "${measures[@]}" "explore"; do
    name=${m%%|*}
    b=$(tr ' ' '\n' <<< "${bases[$name]}" | grep . | median)
    n=$(tr ' ' '\n' <<< "${news[$name]}" | grep . | median)
    r=$(tr ' ' '\n' <<< "${ratios[$name]}" | grep . | median)
    if [ "$name" = explore ]; then
        label='`explore uaf_publish.c --fixed` (DPOR proof), wall s'
    else
        label="\`fuzz\` $name, runs/s"
    fi
    echo "| $label | $b | $n | $(echo "${ratios[$name]}" | sed 's/ $//; s/ /, /g') | $r |"
done
