#!/usr/bin/env bash
# The merge step after the Indexed Job (merge-job.yaml): merges every shard
# directory on the shared volume into one campaign. The container image
# installs this file as /usr/local/bin/heddle-merge.
#
# Settings, from the environment:
#   OUT     the shared volume holding shard-0 … shard-N-1; the merged
#           campaign goes to OUT/merged                        [/results]
#   HEDDLE  the heddle binary                                   [heddle]
#
# Exit code: heddle merge's own: 0 no failure in the campaign, 1 a failure
# found (its replay files are in OUT/merged), 2 the shards do not belong to
# one campaign or none is there, 4 internal error.
set -euo pipefail

OUT=${OUT:-/results}
HEDDLE=${HEDDLE:-heddle}

shopt -s nullglob
shards=("$OUT"/shard-*)
if [ ${#shards[@]} = 0 ]; then
    echo "heddle-merge: no shard directory in $OUT" >&2
    exit 2
fi
exec "$HEDDLE" merge "${shards[@]}" --out "$OUT/merged" --stats
