#!/usr/bin/env bash
# heddle against shuttle on classic bugs in Rust programs
# (benches/programs/rust/peer_bugs.rs and its shuttle port), side by side in
# one invocation: runs to the first bug per strategy and runs/s; writes the
# table into benches/RESULTS.md.
#   RP_SEEDS=20 RP_MAX_RUNS=10000 benches/rust-peers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked --release -p heddle
RP_WRITE=1 cargo bench --locked -p heddle-peers --bench rust_peers
