//! Rust programs on `std::sync` and `std::thread` (futex-based on
//! `wasm32-wasip1-threads`), built with rustc: correct ones stay green
//! under fuzzing and exploration, and a deadlock on `std::sync::Mutex`es
//! names the owner of each lock and where it was taken.

use crate::common::*;

const STD_SYNC: &str = "tests/programs/rust/std_sync.rs";
const CASES: [&str; 8] = [
    "mutex", "rwlock", "condvar", "once", "channels", "park", "scope", "timeouts",
];

/// `heddle ARGS…`; its exit code and stdout.
fn heddle_text(args: &[&str]) -> (Option<i32>, String, String) {
    let o = heddle_out(args);
    (o.status.code(), text(&o.stdout), text(&o.stderr))
}

/// Every case passes a campaign of the default portfolio (memory checker
/// and race detector on; many runs in one process, so instances are
/// reused from run to run) and a bounded exploration.
#[test]
fn std_sync_programs_pass_fuzz_and_explore() {
    let module = rust_build(STD_SYNC);
    let module = module.to_str().unwrap().to_string();
    let dir = tempdir();
    let results = par_map(&CASES, |case| {
        let out = dir.path().join(case);
        let out = out.to_str().unwrap();
        let runs = if *case == "channels" { "40" } else { "100" };
        let fuzz = heddle_text(&[
            "fuzz", &module, "--runs", runs, "--jobs", "1", "--quiet", "--out", out, "--", case,
        ]);
        let explore = heddle_text(&[
            "explore",
            &module,
            "--bound",
            "preemptions=1",
            "--runs",
            "40",
            "--out",
            out,
            "--",
            case,
        ]);
        (*case, fuzz, explore)
    });
    for (case, fuzz, explore) in results {
        assert_eq!(fuzz.0, Some(0), "fuzz {case}:\n{}{}", fuzz.1, fuzz.2);
        assert!(fuzz.1.contains(": 0 failing"), "fuzz {case}:\n{}", fuzz.1);
        assert_eq!(
            explore.0,
            Some(0),
            "explore {case}:\n{}{}",
            explore.1,
            explore.2
        );
        assert!(
            !explore.1.contains("FAILS"),
            "explore {case}:\n{}",
            explore.1
        );
    }
}

/// The ABBA deadlock on two `std::sync::Mutex`es: exploration finds it, and
/// its report names, for each blocked thread, the thread that holds the
/// lock it waits for and the line where it took the lock it holds (the
/// futex-word lock protocol, `model::wordlock`); the replay says the same.
#[test]
fn rust_abba_deadlock_names_owners_and_lines() {
    let module = rust_build("tests/programs/rust/abba.rs");
    let module = module.to_str().unwrap().to_string();
    let dir = tempdir();
    let out = dir.path().to_str().unwrap();
    let (code, stdout, stderr) = heddle_text(&["explore", &module, "--out", out]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("first failing schedule"))
        .unwrap_or_else(|| panic!("no failing schedule:\n{stdout}"));
    // Thread 1 (the spawned one) took `a` at line 11 and waits for `b`;
    // thread 0 took `b` at line 16 and waits for `a`.
    for want in [
        "deadlock: thread 0 waits at",
        "held by thread 1, holding 0x",
        "(taken at abba.rs:16)",
        "; thread 1 waits at",
        "held by thread 0, holding 0x",
        "(taken at abba.rs:11)",
    ] {
        assert!(line.contains(want), "`{want}` not in: {line}");
    }
    let replay = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.extension().is_some_and(|x| x == "toml") && p.to_string_lossy().contains("deadlock")
        })
        .expect("replay file");
    let (code, shown, stderr) = heddle_text(&["show", replay.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{shown}{stderr}");
    assert!(shown.contains("wait for each other"), "{shown}");
    assert!(shown.contains("holds [0x"), "{shown}");
    assert!(shown.contains("taken at abba.rs:11"), "{shown}");
    assert!(shown.contains("taken at abba.rs:16"), "{shown}");
    // Where each waits: its stack reaches the user's lock calls.
    assert!(
        shown.contains("(abba.rs:12)") && shown.contains("(abba.rs:17)"),
        "{shown}"
    );
}

/// The simplest lost update (two threads each load then store one
/// `AtomicUsize`, twice) is found within a few runs by the default
/// portfolio whatever the build: its load and store are decisions at the
/// closure's lines at `opt-level=0` (calls into `core::sync::atomic`) as at
/// `opt-level=2` (inlined, next to `thread::spawn`'s internals, which are
/// not). Runs to the first failure over five searches; median at most 5.
#[test]
fn rust_lost_update_is_found_in_a_few_runs_in_debug_and_release() {
    for level in ["0", "2"] {
        let module = rust_build_at("tests/programs/rust/inlined_atomics.rs", level);
        let mut runs: Vec<u64> = par_map(&[0u64, 1000, 2000, 3000, 4000], |seed| {
            let dir = tempdir();
            let seed = seed.to_string();
            let (code, stdout, stderr) = heddle_text(&[
                "fuzz",
                module.to_str().unwrap(),
                "--runs",
                "200",
                "-j",
                "1",
                "--seed",
                &seed,
                "--out",
                dir.path().to_str().unwrap(),
            ]);
            assert_eq!(
                code,
                Some(1),
                "opt-level={level} seed {seed}: {stdout}{stderr}"
            );
            stdout
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no run count in {stdout}"))
        });
        runs.sort_unstable();
        assert!(
            runs[2] <= 5,
            "opt-level={level}: runs to the first failure {runs:?}"
        );
    }
}
