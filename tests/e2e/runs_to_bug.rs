//! The runs-to-bug regression check: `benches/runs-to-bug.sh --check`
//! searches every bundled bug (each C target at -O0, -O1 and -O2, the Rust
//! bugs debug and release) from 10 seeds with the default portfolio, and
//! fails when a bug that `benches/runs-to-bug.baseline` records as found is
//! no longer found or takes more than 10x the runs. Runs to the bug do not
//! depend on the machine's speed, so the check runs this test's heddle
//! against the baseline the release build wrote.

use crate::common::*;
use std::process::{Command, Stdio};

/// The slow tier: the whole bench, on one core (17 min with the test
/// profile's heddle on a loaded 2-core machine, 7.5 min with the release
/// build); prints the script's table either way.
#[test]
#[ignore = "slow tier: scripts/test.sh --slow"]
fn runs_to_bug_has_not_regressed_against_the_baseline() {
    // The C/C++ toolchain and rustc's wasm32-wasip1-threads target, which
    // the script compiles with, installed if missing.
    toolchain();
    rust_build("tests/programs/rust/abba.rs");
    let o = Command::new("bash")
        .arg(repo().join("benches/runs-to-bug.sh"))
        .arg("--check")
        .env("HEDDLE", env!("CARGO_BIN_EXE_heddle"))
        .env_remove("RTB_ONLY")
        .current_dir(repo())
        .stdin(Stdio::null())
        .output()
        .expect("run benches/runs-to-bug.sh");
    eprintln!("{}", text(&o.stdout));
    assert!(
        o.status.success(),
        "benches/runs-to-bug.sh --check failed ({}):\n{}\n{}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    );
}
