#!/usr/bin/env bash
# One shard of a heddle campaign, as a pod of a Kubernetes Indexed Job
# (fuzz-job.yaml). The container image installs this file as
# /usr/local/bin/heddle-shard; the Job runs it.
#
# Settings, from the environment (fuzz-job.yaml sets them):
#   JOB_COMPLETION_INDEX  this pod's index, 0 … SHARDS-1 (set by Kubernetes)
#   SHARDS       the Job's `completions`: how many shards the campaign has
#   TARGET       a .wasm module or a C/C++ source      [targets/race_bank.c]
#   RUNS         seeds of the whole campaign (all shards together) [1000000]
#   STRATEGY     `--strategy` (a portfolio S,S…; empty: heddle's default)
#   TIME_BUDGET  `--time-budget` of each attempt (empty: none)
#   JOBS         parallel runs (the Job passes its CPU limit)  [nproc]
#   OUT          the shared volume; this shard writes OUT/shard-INDEX [/results]
#   HEDDLE       the heddle binary                                  [heddle]
#   HEDDLE_FUZZ_ARGS  more `heddle fuzz` flags, split on blanks (--fixed, --cflag -DX)
#
# A retried pod continues its shard: when OUT/shard-INDEX exists and is not
# empty, an earlier attempt started the campaign there, and `--resume` is
# added. (A directory the campaign never wrote to, empty, starts afresh.)
#
# Kubernetes sends SIGTERM to the container's first process only, this
# script: it passes SIGTERM (and SIGINT) on to heddle, which stops taking
# seeds, finishes the runs in flight, saves the campaign and exits 143
# (130); the script waits for that, within the pod's
# terminationGracePeriodSeconds.
#
# Exit code: 0 when the shard is done, whether or not it found failures
# (heddle's 1: the replay files stay on the volume, and the merge Job fails
# on them); 143 (130) when it was stopped by SIGTERM (SIGINT) with its work
# saved, also when heddle said 1 then (a failure found wins over the stop in
# heddle's exit code, but the shard has seeds left): the pod fails and its
# retry resumes the shard; otherwise heddle's own code (2 usage or input
# error, 4 internal error).
set -euo pipefail

: "${JOB_COMPLETION_INDEX:?is not set (set by an Indexed Job)}"
: "${SHARDS:?is not set (the number of shards: the completions of the Job)}"
TARGET=${TARGET:-targets/race_bank.c}
RUNS=${RUNS:-1000000}
STRATEGY=${STRATEGY:-}
TIME_BUDGET=${TIME_BUDGET:-}
JOBS=${JOBS:-$(nproc)}
OUT=${OUT:-/results}
HEDDLE=${HEDDLE:-heddle}

dir="$OUT/shard-$JOB_COMPLETION_INDEX"
args=(fuzz "$TARGET" --runs "$RUNS" --keep-going --shard "auto/$SHARDS"
      --jobs "$JOBS" --out "$dir")
[ -z "$STRATEGY" ] || args+=(--strategy "$STRATEGY")
[ -z "$TIME_BUDGET" ] || args+=(--time-budget "$TIME_BUDGET")
# shellcheck disable=SC2206 # split on blanks on purpose
[ -z "${HEDDLE_FUZZ_ARGS:-}" ] || args+=($HEDDLE_FUZZ_ARGS)
if [ -d "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
    args+=(--resume)
    echo "heddle-shard: $dir holds an earlier attempt: resuming it" >&2
fi
mkdir -p "$OUT"

pid=
stop=
stopped=
# shellcheck disable=SC2329 # called by the traps below
forward() {
    stop=$1
    stopped=$1
    [ -z "$pid" ] || kill -s "$1" "$pid" 2>/dev/null || true
}
trap 'forward TERM' TERM
trap 'forward INT' INT
echo "heddle-shard: $HEDDLE ${args[*]}" >&2
"$HEDDLE" "${args[@]}" &
pid=$!
[ -z "$stop" ] || kill -s "$stop" "$pid" 2>/dev/null || true
status=0
wait "$pid" || status=$?
# A signal interrupts `wait`: wait again, for heddle's own exit code.
while [ -n "$stop" ]; do
    stop=
    status=0
    wait "$pid" || status=$?
done

shard="shard $((JOB_COMPLETION_INDEX + 1))/$SHARDS"
if [ -n "$stopped" ] && { [ "$status" = 1 ] || [ "$status" = 130 ] || [ "$status" = 143 ]; }; then
    # heddle says 1 when it found failures, even when stopped with seeds
    # left: the shard is not done either way.
    echo "heddle-shard: $shard stopped by SIG$stopped; its work is saved in $dir and a retried pod resumes it" >&2
    exit $((128 + $(kill -l "$stopped")))
elif [ "$status" = 1 ]; then
    echo "heddle-shard: $shard found failures; their replay files are in $dir (the merge reports them)" >&2
    exit 0
fi
exit "$status"
