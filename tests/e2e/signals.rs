//! Tests: POSIX signals as scheduling decisions.
//!
//! `sig_pool.c` pauses a thread pool's workers with `pthread_kill(SIGUSR1)`
//! and a handler that holds them until resumed; its planted bug (a worker's
//! event count updated with the signal unblocked) needs the signal
//! delivered between the count's load and its store. A campaign finds it,
//! replays reproduce it byte for byte, the fixed build (the signal blocked
//! around the update) passes every run, and seeds deliver at different
//! points. `sig_misc.c` checks one call at a time: `raise(SIGTERM)` with no
//! handler, `sigwait`, a sleep cut short, `sigsuspend`, `alarm`,
//! `setitimer`.

use crate::common::*;
use std::collections::BTreeSet;
use std::process::Output;

const POOL: &str = "tests/programs/sig_pool.c";
const MISC: &str = "tests/programs/sig_misc.c";

fn stdout_of(out: &Output) -> String {
    text(&out.stdout)
}

fn run_misc(case: &str) -> Output {
    let define = format!("-D{case}");
    heddle_out(&["run", MISC, "--cflag", &define, "--show-output"])
}

#[test]
fn a_pause_between_a_load_and_its_store_is_found_and_replayed() {
    let (_dir, stdout) = fuzz_expecting(&[POOL, "--runs", "2000"], 1);
    assert!(
        stdout.contains("lost update on a worker's events"),
        "{stdout}"
    );
    replays_the_same_twice(&printed_replay(&stdout), "lost update on a worker's events");
}

#[test]
fn blocking_the_signal_around_the_update_passes_every_run() {
    let (_dir, stdout) = fuzz_expecting(&[POOL, "--cflag", "-DFIXED", "--runs", "500"], 0);
    assert!(!stdout.contains("data race"), "{stdout}");
}

/// Delivery is a decision: seeds deliver at different points, so runs of
/// the fixed build differ in their steps.
#[test]
fn seeds_deliver_at_different_points() {
    let mut steps = BTreeSet::new();
    for seed in 0..6 {
        let out = heddle_out(&[
            "run",
            POOL,
            "--cflag",
            "-DFIXED",
            "--seed",
            &seed.to_string(),
        ]);
        let stdout = stdout_of(&out);
        assert_eq!(out.status.code(), Some(0), "{stdout}");
        let line = stdout
            .lines()
            .find(|l| l.contains(" steps, "))
            .unwrap_or_else(|| panic!("no steps line:\n{stdout}"));
        steps.insert(line.split(": ").nth(1).unwrap_or(line).to_string());
    }
    assert!(steps.len() > 1, "{steps:?}");
}

/// A watchdog `alarm` declared by `<unistd.h>` alone (no `<signal.h>`)
/// ends a run that sleeps past it, as natively.
#[test]
fn a_watchdog_alarm_from_unistd_alone_ends_a_long_sleep() {
    let dir = tempdir();
    let src = dir.path().join("watchdog.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <unistd.h>\nint main(void) {\n    alarm(5);\n    \
         puts(\"sleeping\");\n    sleep(60);\n    puts(\"woke\");\n    return 0;\n}\n",
    )
    .unwrap();
    let out = heddle_out(&["run", src.to_str().unwrap()]);
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("killed by SIGALRM"), "{stdout}");
    assert!(
        stdout.contains("sleeping") && !stdout.contains("woke"),
        "{stdout}"
    );
}

#[test]
fn raise_sigterm_without_a_handler_ends_the_run_naming_it() {
    let out = run_misc("RAISE_TERM");
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let verdict = stdout.lines().next().unwrap_or_default();
    assert!(
        verdict.starts_with("verdict: trap (signal) in thread 0 at main")
            && verdict.contains("killed by SIGTERM"),
        "{stdout}"
    );
    assert!(stdout.contains("raising SIGTERM") && !stdout.contains("still here"));
}

#[test]
fn sigwait_in_a_thread_takes_pthread_kill_and_kill() {
    let out = run_misc("SIGWAIT");
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("sigwait: SIGUSR1\nsigwait: SIGUSR2"),
        "{stdout}"
    );
}

#[test]
fn a_handled_signal_cuts_a_sleep_short() {
    let out = run_misc("SLEEP");
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("sleep cut short after 1 s, nanosleep too"),
        "{stdout}"
    );
}

#[test]
fn alarm_on_the_virtual_clock_ends_a_pause_and_a_sleep() {
    let out = run_misc("ALARM");
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("alarm ended pause after 2 s and sleep early"),
        "{stdout}"
    );
}

#[test]
fn a_handler_cuts_a_sem_wait_short() {
    let out = run_misc("SEMINTR");
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("sem_wait cut short by a handler: EINTR"),
        "{stdout}"
    );
}

#[test]
fn setitimer_ticks_on_the_virtual_clock() {
    let out = run_misc("ITIMER");
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("itimer: 4 ticks in 1.10 s"), "{stdout}");
}

#[test]
fn sigsuspend_delivers_a_pending_signal_and_returns() {
    let out = run_misc("SUSPEND");
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("sigsuspend, SA_RESETHAND and signal work"),
        "{stdout}"
    );
}

/// Every signal call of the sequence holds in every schedule.
#[test]
fn the_signal_calls_hold_in_every_schedule() {
    for case in ["SIGWAIT", "SLEEP", "SUSPEND", "ALARM", "ITIMER", "SEMINTR"] {
        let dir = tempdir();
        let camp = dir.path().join("campaign");
        let define = format!("-D{case}");
        let out = heddle_out(&[
            "fuzz",
            MISC,
            "--cflag",
            &define,
            "--runs",
            "300",
            "--out",
            camp.to_str().unwrap(),
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{case}:\n{}\n{}",
            stdout_of(&out),
            text(&out.stderr)
        );
    }
}

/// `<signal.h>` declares what it adds whichever feature macros come first
/// (it once failed with `unknown type name 'sigset_t'`).
#[test]
fn the_header_compiles_under_feature_macros() {
    let dir = tempdir();
    for (i, define) in [
        "#define _POSIX_C_SOURCE 200809L",
        "#define _XOPEN_SOURCE 500",
        "#define _GNU_SOURCE",
        "",
    ]
    .iter()
    .enumerate()
    {
        let src = dir.path().join(format!("h{i}.c"));
        std::fs::write(
            &src,
            format!(
                "{define}\n#include <signal.h>\n#include <pthread.h>\n\
                 static void h(int s) {{ (void)s; }}\n\
                 int main(void) {{\n\
                 struct sigaction a = {{0}}; sigset_t s; a.sa_handler = h;\n\
                 sigemptyset(&s); sigaddset(&s, SIGUSR1); a.sa_mask = s;\n\
                 sigaction(SIGUSR1, &a, 0); pthread_sigmask(SIG_BLOCK, &s, 0);\n\
                 return pthread_kill(pthread_self(), 0);\n}}\n"
            ),
        )
        .unwrap();
        let module = dir.path().join(format!("h{i}.wasm"));
        let out = heddle_out(&["cc", src.to_str().unwrap(), "-o", module.to_str().unwrap()]);
        assert!(out.status.success(), "{define}:\n{}", text(&out.stderr));
    }
}

/// `sigwait` is a wait the scheduler sees: with nobody to send the signal,
/// the run is a deadlock naming what the thread waits for.
#[test]
fn a_sigwait_nobody_answers_is_a_deadlock() {
    let out = run_misc("LONELY");
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let verdict = stdout.lines().next().unwrap_or_default();
    assert!(
        verdict.starts_with("verdict: deadlock: thread 0 waits at main (sig_misc.c:")
            && verdict.contains("for a signal (")
            && verdict.contains("SIGUSR1"),
        "{stdout}"
    );
}
