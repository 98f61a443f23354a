#!/usr/bin/env bash
# heddle against shuttle on the same programs, side by side in one
# invocation; writes the table into benches/RESULTS.md.
#   PEERS_ROUNDS=5 PEERS_SECS=1 benches/peers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked --release -p heddle
PEERS_WRITE=1 cargo bench --locked -p heddle-peers --bench peers
