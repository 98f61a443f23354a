//! Tests: C++ exceptions.
//!
//! `heddle c++` compiles with `-fwasm-exceptions` against heddle's libc++
//! build with exceptions; the instrumenter translates clang's legacy
//! exception handling into what wasmtime runs. `cxx_exceptions.cpp` throws
//! across frames, in worker threads, through a `std::lock_guard` and in a
//! `std::exception_ptr` from a worker to main: its fixed build passes and
//! prints, its planted lost update (in a catch handler) is found by a
//! campaign and replayed, an uncaught exception in a thread is a failing
//! verdict naming the exception's type, and `-fno-exceptions` still works.
//! `setjmp`/`longjmp` use the same mechanism.

use crate::common::*;
use std::process::Output;

const PROGRAM: &str = "tests/programs/cxx_exceptions.cpp";

fn stdout_of(out: &Output) -> String {
    text(&out.stdout)
}

fn stderr_of(out: &Output) -> String {
    text(&out.stderr)
}

#[test]
fn fixed_build_throws_and_catches_everywhere_and_passes() {
    let out = heddle_out(&["run", PROGRAM, "--cflag", "-DFIXED", "--show-output"]);
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", stderr_of(&out));
    assert!(stdout.starts_with("verdict: pass"), "{stdout}");
    assert!(stdout.contains("rejected 4 of 4, balance 10"), "{stdout}");

    let dir = tempdir();
    let camp = dir.path().join("campaign");
    let out = heddle_out(&[
        "fuzz",
        PROGRAM,
        "--cflag",
        "-DFIXED",
        "--runs",
        "300",
        "--out",
        camp.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "every schedule of the fixed build passes:\n{}\n{}",
        stdout_of(&out),
        stderr_of(&out)
    );
}

#[test]
fn lost_update_in_a_catch_handler_is_found_and_replayed() {
    let (_dir, stdout) = fuzz_expecting(&[PROGRAM, "--runs", "2000"], 1);
    assert!(
        stdout.contains("lost update on rejected"),
        "the failure must be main's check:\n{stdout}"
    );
    // The race is between the handlers' read and write of `rejected`.
    let write = std::fs::read_to_string(repo().join(PROGRAM))
        .unwrap()
        .lines()
        .position(|l| l.contains("acct.rejected = seen"))
        .unwrap()
        + 1;
    assert!(
        stdout.contains("data race") && stdout.contains(&format!("cxx_exceptions.cpp:{write}")),
        "{stdout}"
    );
    replays_the_same_twice(&printed_replay(&stdout), "lost update on rejected");
}

#[test]
fn an_uncaught_exception_in_a_thread_fails_naming_its_type() {
    let out = heddle_out(&[
        "run",
        PROGRAM,
        "--cflag",
        "-DFIXED",
        "--cflag",
        "-DUNCAUGHT",
    ]);
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", stderr_of(&out));
    let verdict = stdout.lines().next().unwrap_or_default();
    assert!(
        verdict.starts_with("verdict: trap (uncaught-exception) in thread 3")
            && verdict.ends_with("uncaught C++ exception of type Overdraft"),
        "{stdout}"
    );
}

/// Rethrown from an exception_ptr in main, a standard exception's message
/// is in the verdict too.
#[test]
fn an_uncaught_rethrow_in_main_names_the_type_and_message() {
    let out = heddle_out(&[
        "run",
        PROGRAM,
        "--cflag",
        "-DFIXED",
        "--cflag",
        "-DUNCAUGHT_IN_MAIN",
    ]);
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", stderr_of(&out));
    let verdict = stdout.lines().next().unwrap_or_default();
    assert!(
        verdict.starts_with("verdict: trap (uncaught-exception) in thread 0 at main")
            && verdict.ends_with("uncaught C++ exception of type std::runtime_error: empty amount"),
        "{stdout}"
    );
}

#[test]
fn no_exceptions_still_means_none() {
    let dir = tempdir();
    let module = dir.path().join("noexc.wasm");
    let out = heddle_out(&[
        "c++",
        "-fno-exceptions",
        PROGRAM,
        "-o",
        module.to_str().unwrap(),
    ]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr_of(&out).contains("cannot use 'throw' with exceptions disabled"),
        "{}",
        stderr_of(&out)
    );
    // Without a throw, -fno-exceptions builds and runs.
    let out = heddle_out(&[
        "run",
        "tests/programs/tc_cxx_threads.cpp",
        "--cflag",
        "-DFIXED",
        "--cflag",
        "-fno-exceptions",
    ]);
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", stderr_of(&out));
    assert!(stdout.starts_with("verdict: pass"), "{stdout}");
}

/// setjmp/longjmp (LLVM's lowering over wasm exception handling, with the
/// guest SDK's runtime): parsers in two worker threads recover from errors
/// thrown from deep in their recursion, through a nested setjmp, in every
/// schedule.
#[test]
fn longjmp_recovers_from_errors_in_worker_threads() {
    let src = "tests/programs/sjlj_recovery.c";
    let out = heddle_out(&["run", src, "--show-output"]);
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", stderr_of(&out));
    assert!(stdout.starts_with("verdict: pass"), "{stdout}");
    assert!(stdout.contains("ok 3, errors 3 (of 6)"), "{stdout}");
    let dir = tempdir();
    let camp = dir.path().join("campaign");
    let out = heddle_out(&[
        "fuzz",
        src,
        "--runs",
        "500",
        "--out",
        camp.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout_of(&out),
        stderr_of(&out)
    );
}

/// A longjmp whose setjmp is gone fails the run, saying so.
#[test]
fn a_stale_longjmp_is_a_failing_verdict() {
    let out = heddle_out(&[
        "run",
        "tests/programs/sjlj_recovery.c",
        "--cflag",
        "-DSTALE_LONGJMP",
    ]);
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", stderr_of(&out));
    let verdict = stdout.lines().next().unwrap_or_default();
    assert!(
        verdict.starts_with("verdict: trap (uncaught-exception) in thread 0")
            && verdict.contains("longjmp to the jmp_buf at 0x")
            && verdict.ends_with("whose setjmp is no longer active (its function returned, or it is another thread's)"),
        "{stdout}"
    );
}
