#!/usr/bin/env bash
# What a guest thread switch costs in wasmtime, heddle's way (an async host
# call that suspends the thread's fiber) against a stack-switching
# continuation inside one instance, side by side in one process; and what
# starting and finishing a thread costs each way. See
# benches/switch-cost/src/main.rs. Builds its own crate (its wasmtime
# features stay out of heddle's build; the first build takes minutes).
# Usage: benches/switch-cost.sh [switches per round] [rounds]
set -euo pipefail
cd "$(dirname "$0")/switch-cost"
cargo build --locked --release --quiet
exec ./target/release/heddle-switch-cost "$@"
