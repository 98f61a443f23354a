#!/usr/bin/env bash
# The whole test suite, with its own setup (idempotent: on a machine that
# already has everything, the setup steps only check).
#
#   1. build heddle, debug and release (a replay recorded by one must
#      replay in the other: tests/e2e/portable.rs);
#   2. install the C/C++ toolchain (apt packages, the rustup target, the
#      trixie wasi-libc headers, libc++ with threads built from LLVM 19
#      sources, the sysroot) — `heddle toolchain install`;
#   3. build every bundled target, buggy and fixed;
#   4. install make, autoconf and cmake (the projects in tests/projects)
#      and headless Chromium (Debian's `chromium`) for the HTML report
#      test, when it is missing;
#   5. install the schema validators and linters the deployment files are
#      checked with (scripts/manifest-tools.sh: a Python venv under
#      heddle's cache, ~10-25 s the first time);
#   6. run the unit and end-to-end tests.
#
# `--slow` adds the slow tier: the tests marked
# `#[ignore = "slow tier: scripts/test.sh --slow"]` (longer runs of tests
# the normal tier runs shorter). Other arguments go to the test binaries.
set -euo pipefail
cd "$(dirname "$0")/.."

test_args=()
for arg in "$@"; do
    if [ "$arg" = --slow ]; then
        test_args+=(--include-ignored)
    else
        test_args+=("$arg")
    fi
done

# Every locked crate, for every platform: `cargo metadata --offline` (a
# test) needs them all, not only those this platform builds.
cargo fetch --locked --quiet
# --workspace: the example strategy and the peer benchmarks too (the
# workspace's default members are heddle and its instrumenter only).
cargo build --locked --workspace
cargo build --locked --release -p heddle
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps -p heddle -p heddle-instrument --quiet
export HEDDLE_REQUIRE_OTHER_PROFILE=1
./target/debug/heddle toolchain install
./target/debug/heddle toolchain doctor
./target/debug/heddle targets --build > /dev/null
# Build tools the projects under tests/projects are built with.
missing=()
for tool in make autoconf cmake; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get install -y -qq "${missing[@]}" ||
        { "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq "${missing[@]}"; }
fi
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get install -y -qq chromium || { apt-get update -qq && apt-get install -y -qq chromium; } || true
    elif command -v sudo >/dev/null 2>&1; then
        sudo apt-get install -y -qq chromium || true
    fi
    command -v chromium >/dev/null 2>&1 ||
        echo "warning: chromium could not be installed; the HTML report test will skip its browser check" >&2
fi
./scripts/manifest-tools.sh > /dev/null
export HEDDLE_REQUIRE_MANIFEST_TOOLS=1
cargo test --locked --workspace -- ${test_args[@]+"${test_args[@]}"}
