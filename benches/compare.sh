#!/usr/bin/env bash
# Side-by-side comparison (native stress loop, plain wasmtime, heddle) on the
# bundled race_bank target; writes the table into benches/RESULTS.md.
#   HEDDLE_COMPARE_SECS=5 benches/compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v gcc > /dev/null || { echo "benches/compare.sh needs gcc (apt-get install gcc)" >&2; exit 2; }
cargo bench --locked --bench compare
