//! Rust crates under `heddle cargo test` (`tests/rust/`, plain `std`
//! tests): each of the three bugs is found with the verdict a Rust user
//! expects (a panic for the lost update, a deadlock for the lock cycle and
//! the lost wakeup), every replay file reproduces its run, the `fixed`
//! feature passes, JUnit has one test case per test, and a failing build
//! is one line with exit code 2; what cannot run on the target
//! (unwinding, processes) is `unsupported`, not a failure.

use crate::common::*;
use std::path::{Path, PathBuf};

/// `heddle cargo test --manifest-path tests/rust/Cargo.toml CARGO… -- HEDDLE…`.
fn cargo_test(cargo: &[&str], heddle_args: &[&str]) -> std::process::Output {
    heddle()
        .args(["cargo", "test", "--manifest-path", "tests/rust/Cargo.toml"])
        .args(cargo)
        .arg("--")
        .args(heddle_args)
        .output()
        .expect("run heddle")
}

/// The replay files under `dir`, by test directory name.
fn replays(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for test in std::fs::read_dir(dir).unwrap() {
        let test = test.unwrap().path();
        for f in std::fs::read_dir(&test).unwrap() {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".toml") && name != "campaign.toml" {
                let t = test.file_name().unwrap().to_string_lossy().into_owned();
                out.push((t, f));
            }
        }
    }
    out.sort();
    out
}

/// The line `heddle cargo test` printed for `test`.
fn line_of<'a>(stdout: &'a str, test: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.contains(&format!(" tests::{test} ")))
        .unwrap_or_else(|| panic!("no line for {test}: {stdout}"))
}

#[test]
fn cargo_test_finds_each_bug_and_its_replay_reproduces_it() {
    let dir = tempdir();
    let out = dir.path().join("out");
    let xml = dir.path().join("junit.xml");
    let o = cargo_test(
        &[],
        // The defaults (1000 runs per test, the default strategy), on one
        // core.
        &[
            "--seed",
            "0",
            "-j",
            "1",
            "-q",
            "--out",
            out.to_str().unwrap(),
            "--junit",
            xml.to_str().unwrap(),
        ],
    );
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}{}", text(&o.stderr));
    let lost = line_of(&stdout, "lost_update");
    assert!(lost.starts_with("FAIL"), "{stdout}");
    // The assert_eq! in the test, as a panic at its line.
    assert!(
        lost.contains("panic in thread 0 (main) at src/lib.rs:28:9: assertion `left == right` failed: lost update"),
        "{lost}"
    );
    // Each blocked thread at the line of its own code that waits (the
    // lock or wait call), under its demangled name, not inside std.
    for (t, at) in [
        (
            "abba_deadlock",
            &[
                "heddle_rust_bugs::tests::abba_deadlock (lib.rs:55)",
                "heddle_rust_bugs::tests::abba_deadlock::{{closure}} (lib.rs:50)",
            ][..],
        ),
        (
            "condvar_missed_wakeup",
            &["heddle_rust_bugs::tests::condvar_missed_wakeup (lib.rs:85)"][..],
        ),
    ] {
        let l = line_of(&stdout, t);
        assert!(
            l.starts_with("FAIL") && l.contains(": deadlock: "),
            "{stdout}"
        );
        for a in at {
            assert!(l.contains(a), "no `{a}` in {l}");
        }
    }
    assert!(line_of(&stdout, "ignored").starts_with("skip"), "{stdout}");
    assert!(
        stdout.contains("4 tests: 0 passed, 3 failed, 1 skipped"),
        "{stdout}"
    );

    let harness = out.join("lib-heddle_rust_bugs");
    let found = replays(&harness);
    let kinds: Vec<(&str, String)> = found
        .iter()
        .map(|(t, f)| {
            let toml = std::fs::read_to_string(f).unwrap();
            let kind = toml
                .lines()
                .find_map(|l| l.strip_prefix("kind = "))
                .unwrap()
                .trim_matches('"')
                .to_string();
            // The test's name is part of the run, so a replay runs it alone.
            assert!(toml.contains("\"--exact\""), "{toml}");
            (t.as_str(), kind)
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("tests__abba_deadlock", "deadlock".to_string()),
            ("tests__condvar_missed_wakeup", "deadlock".to_string()),
            ("tests__lost_update", "panic".to_string()),
        ]
    );
    for (_, f) in &found {
        let r = heddle_out(&["replay", f.to_str().unwrap()]);
        let rs = text(&r.stdout);
        assert_eq!(r.status.code(), Some(1), "{rs}{}", text(&r.stderr));
        assert!(rs.contains("replay reproduced the recorded run"), "{rs}");
        assert!(rs.contains("shipped beside the replay"), "{rs}");
    }

    let junit = std::fs::read_to_string(&xml).unwrap();
    assert_eq!(junit.matches("<testcase ").count(), 4, "{junit}");
    assert_eq!(junit.matches("<failure ").count(), 3, "{junit}");
    assert_eq!(junit.matches("<skipped").count(), 1, "{junit}");
    assert!(
        junit.contains(
            "name=\"tests::lost_update\" classname=\"heddle.cargo.lib-heddle_rust_bugs\""
        ),
        "{junit}"
    );
}

#[test]
fn cargo_test_passes_the_fixed_feature_and_filters_by_name() {
    let dir = tempdir();
    let out = dir.path().join("out");
    let xml = dir.path().join("junit.xml");
    let args = [
        "--runs",
        "300",
        "-j",
        "2",
        "-q",
        "--out",
        out.to_str().unwrap(),
        "--junit",
        xml.to_str().unwrap(),
    ];
    let o = cargo_test(&["--features", "fixed"], &args);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}{}", text(&o.stderr));
    for t in ["lost_update", "abba_deadlock", "condvar_missed_wakeup"] {
        let l = line_of(&stdout, t);
        assert!(l.starts_with("ok") && l.contains("300 runs"), "{stdout}");
    }
    assert!(
        stdout.contains("4 tests: 3 passed, 0 failed, 1 skipped"),
        "{stdout}"
    );
    let junit = std::fs::read_to_string(&xml).unwrap();
    assert_eq!(junit.matches("<testcase ").count(), 4, "{junit}");
    assert!(!junit.contains("<failure"), "{junit}");

    // A positional filter selects tests by name, as `cargo test NAME`.
    let o = cargo_test(&["--features", "fixed", "lost"], &args);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}{}", text(&o.stderr));
    assert!(
        stdout.contains("1 tests: 1 passed, 0 failed, 0 skipped, 3 filtered out"),
        "{stdout}"
    );
}

#[test]
fn cargo_errors_are_one_line_with_exit_code_2() {
    // cargo refuses the arguments.
    let o = cargo_test(&["--features", "no_such_feature"], &[]);
    assert_usage_error(&o, "cargo test --no-run failed");
    assert_usage_error(&o, "no_such_feature");
    // heddle's options are checked first.
    let o = cargo_test(&[], &["--runs", "many"]);
    assert_usage_error(&o, "--runs");
    let o = cargo_test(&["--target", "x86_64-unknown-linux-gnu"], &[]);
    assert_usage_error(&o, "heddle sets --target itself");

    // A crate that does not compile: the compiler's first error and where.
    let dir = tempdir();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[package]\nname = \"broken\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("src/lib.rs"),
        "pub fn f() -> u32 {\n    \"no\"\n}\n",
    )
    .unwrap();
    for sub in ["test", "run"] {
        let o = heddle()
            .current_dir(dir.path())
            .args(["cargo", sub])
            .output()
            .unwrap();
        assert_usage_error(
            &o,
            "failed (exit status: 101): error[E0308]: mismatched types at src/lib.rs:2:5",
        );
    }
}

#[test]
fn cargo_run_fuzzes_the_binary() {
    // A binary crate whose main assumes the thread it spawned has run.
    let dir = tempdir();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[package]\nname = \"early\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("src/main.rs"),
        "use std::sync::atomic::{AtomicBool, Ordering::SeqCst};\n\
         static READY: AtomicBool = AtomicBool::new(false);\n\
         fn main() {\n\
         \x20   let t = std::thread::spawn(|| READY.store(true, SeqCst));\n\
         \x20   assert!(READY.load(SeqCst), \"the thread has not run yet\");\n\
         \x20   t.join().unwrap();\n\
         }\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = heddle()
        .current_dir(dir.path())
        .args(["-q", "cargo", "run", "--", "--runs", "100", "-j", "2"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}{}", text(&o.stderr));
    assert!(
        stdout.contains("panic in thread 0 (main) at src/main.rs:5:5: the thread has not run yet"),
        "{stdout}"
    );
    let replay = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: heddle replay "))
        .expect("a replay file");
    assert!(replay.contains("early-panic-seed"), "{stdout}");
    let r = heddle_out(&["replay", replay]);
    let rs = text(&r.stdout);
    assert_eq!(r.status.code(), Some(1), "{rs}{}", text(&r.stderr));
    assert!(rs.contains("replay reproduced the recorded run"), "{rs}");
}

/// `tests/rust-suite/`: a thousand threads alive at once pass; a test that
/// catches a panic, one that expects one (`#[should_panic]`) and one that
/// spawns a process cannot run on wasm32-wasip1-threads and are reported
/// `unsupported` (JUnit `<skipped>`), not as failures: exit code 0.
#[test]
fn cargo_test_reports_what_cannot_run_as_unsupported() {
    let dir = tempdir();
    let out = dir.path().join("out");
    let xml = dir.path().join("junit.xml");
    let o = heddle()
        .args([
            "cargo",
            "test",
            "--manifest-path",
            "tests/rust-suite/Cargo.toml",
            "--",
            "--runs",
            "5",
            "-j",
            "2",
            "-q",
            "--out",
            out.to_str().unwrap(),
            "--junit",
            xml.to_str().unwrap(),
        ])
        .output()
        .expect("run heddle");
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}{}", text(&o.stderr));
    let threads = line_of(&stdout, "thousand_threads");
    assert!(
        threads.starts_with("ok") && threads.contains("5 runs"),
        "{stdout}"
    );
    for (t, why) in [
        (
            "catches_a_panic",
            "unsupported: unwinding: the panic was to be caught (std::panic::catch_unwind in \
             heddle_rust_limits::tests::catches_a_panic (lib.rs:",
        ),
        (
            "expects_a_panic",
            "unsupported: unwinding: libtest skips a #[should_panic] test",
        ),
        (
            "spawns_a_process",
            "unsupported: spawning processes: std::process is not available",
        ),
    ] {
        let l = line_of(&stdout, t);
        assert!(l.starts_with("n/a") && l.contains(why), "{stdout}");
    }
    // The panic that showed it is kept.
    assert!(
        line_of(&stdout, "spawns_a_process").contains("operation not supported on this platform"),
        "{stdout}"
    );
    assert!(
        stdout.contains("4 tests: 1 passed, 0 failed, 0 skipped, 3 unsupported"),
        "{stdout}"
    );
    // A campaign stops at its first unsupported run (the runs already in
    // flight on the other job finish).
    let l = line_of(&stdout, "catches_a_panic");
    assert!(l.contains("1 runs") || l.contains("2 runs"), "{stdout}");
    let junit = std::fs::read_to_string(&xml).unwrap();
    assert_eq!(junit.matches("<testcase ").count(), 4, "{junit}");
    assert!(!junit.contains("<failure"), "{junit}");
    assert_eq!(
        junit.matches("<skipped message=\"unsupported: ").count(),
        3,
        "{junit}"
    );
}
