#!/usr/bin/env bash
# The whole test suite, with its own setup (idempotent: on a machine that
# already has everything, the setup steps only check).
#
#   1. build heddle;
#   2. install the C/C++ toolchain (apt packages, the rustup target, the
#      trixie wasi-libc headers, the sysroot) — `heddle toolchain install`;
#   3. build every bundled target, buggy and fixed;
#   4. run the unit and end-to-end tests.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --locked
./target/debug/heddle toolchain install
./target/debug/heddle toolchain doctor
./target/debug/heddle targets --build > /dev/null
cargo test --locked --workspace -- "$@"
