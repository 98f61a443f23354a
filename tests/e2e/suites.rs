//! Programs shaped like the unit tests of real thread libraries
//! (`tests/programs/suites/`): long, wide and full of spin loops. A correct
//! one passes under every strategy with the default settings, however long
//! it is; each `-DBUG` variant is found; a run stopped by its step budget
//! while it still makes progress is inconclusive, not a hang; and no
//! strategy starves the thread a spinner waits for.

use crate::common::*;
use std::time::{Duration, Instant};

/// Every strategy, with and without time choices: seed `s` runs member
/// `s mod 13`.
const EVERY_STRATEGY: &str = "random,pct:3,sites:3,pos,surw,delay:2,ipct,rr,rff,\
                              random+stall,pos+stall,sites+stall,surw+stall";

/// The programs at a size the debug suite runs in seconds, with their
/// arguments (the defaults, in the sources, are the full size).
const SMALL: &[(&str, &[&str])] = &[
    ("pool.c", &["64", "512"]),
    ("mutex_stress.c", &["32", "500"]),
    ("spsc_ring.c", &["50000"]),
    ("ticket_mpmc.c", &["4", "5000"]),
    ("ticket_lock.c", &["8", "300"]),
    ("handoff.c", &["3000"]),
];

fn fuzz(source: &str, extra: &[&str], args: &[&str]) -> (Option<i32>, String) {
    let dir = tempdir();
    let path = format!("tests/programs/suites/{source}");
    let mut argv = vec!["fuzz", path.as_str(), "--quiet", "--out"];
    argv.push(dir.path().to_str().unwrap());
    argv.extend(extra);
    argv.push("--");
    argv.extend(args);
    let o = heddle_out(&argv);
    (
        o.status.code(),
        format!("{}{}", text(&o.stdout), text(&o.stderr)),
    )
}

/// Each correct program passes every run under every strategy, with the
/// default budgets; and again with a hang window of 12,000 steps and a
/// fairness bound of 2,048, which any strategy that kept the thread a
/// spinner waits for off the processor for longer would turn into a false
/// livelock.
#[test]
fn correct_unit_test_shaped_programs_pass_under_every_strategy() {
    let mut problems = Vec::new();
    let runs = par_map(SMALL, |&(source, args)| {
        let mut out = Vec::new();
        for extra in [
            &["--strategy", EVERY_STRATEGY, "--runs", "13", "--keep-going"][..],
            &[
                "--strategy",
                EVERY_STRATEGY,
                "--runs",
                "26",
                "--keep-going",
                "--hang-steps",
                "12000",
                "--fair-steps",
                "2048",
            ][..],
        ] {
            let (code, stdout) = fuzz(source, extra, args);
            if code != Some(0) || !stdout.contains(": 0 failing") || stdout.contains("inconclusive")
            {
                out.push(format!("{source} {extra:?}: exit {code:?}\n{stdout}"));
            }
        }
        out
    });
    for r in runs {
        problems.extend(r);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Without the fairness bound the same tight window shows why it is
/// there: the thread whose turn came stays marked as a spinner, and some
/// strategies keep running the others, which only spin.
#[test]
fn without_the_fairness_bound_spinners_starve_the_thread_they_wait_for() {
    let (code, stdout) = fuzz(
        "ticket_lock.c",
        &[
            "--strategy",
            EVERY_STRATEGY,
            "--runs",
            "26",
            "--keep-going",
            "--hang-steps",
            "12000",
            "--fair-steps",
            "0",
        ],
        &["8", "300"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("hang (livelock: every running thread spins"),
        "{stdout}"
    );
}

/// Every `-DBUG` variant is found by the default portfolio.
#[test]
fn every_bug_variant_is_found() {
    let found = par_map(&SMALL[..4], |&(source, args)| {
        let (code, stdout) = fuzz(source, &["--cflag", "-DBUG", "--runs", "200"], args);
        (source, code, stdout)
    });
    for (source, code, stdout) in found {
        assert_eq!(code, Some(1), "{source} -DBUG not found:\n{stdout}");
        assert!(
            stdout.contains("assertion failed") || stdout.contains("data race on"),
            "{source}: {stdout}"
        );
    }
}

/// A correct run longer than its step budget is `too-long`: counted as
/// inconclusive, with the flag to raise, no replay file, exit 0. A run
/// where nothing makes progress within the same budget is still a hang.
#[test]
fn a_run_past_its_budget_that_makes_progress_is_inconclusive() {
    let dir = tempdir();
    let out = dir.path().to_str().unwrap();
    let o = heddle_out(&[
        "fuzz",
        "tests/programs/suites/mutex_stress.c",
        "--strategy",
        "random,pos",
        "--runs",
        "4",
        "--max-steps",
        "20000",
        "--quiet",
        "--out",
        out,
        "--",
        "32",
        "500",
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}{}", text(&o.stderr));
    assert!(stdout.contains(": 0 failing"), "{stdout}");
    assert!(stdout.contains("4 run(s) inconclusive"), "{stdout}");
    assert!(
        stdout.contains("run too long: 20000 steps") && stdout.contains("--max-steps"),
        "{stdout}"
    );
    let replays = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with("-seed0.toml")
        })
        .count();
    assert_eq!(replays, 0, "an inconclusive run is no finding");
    let campaign = std::fs::read_to_string(dir.path().join("campaign.toml")).unwrap();
    assert!(campaign.contains("inconclusive_runs = 4"), "{campaign}");

    // One run: the verdict says so, and the exit code is 0.
    let o = heddle_out(&[
        "run",
        "tests/programs/suites/mutex_stress.c",
        "--max-steps",
        "20000",
        "--",
        "32",
        "500",
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("verdict: run too long"), "{stdout}");

    // The same budget on a livelock: a hang, found well before it.
    let o = heddle_out(&[
        "run",
        "tests/programs/livelock.c",
        "--max-steps",
        "20000",
        "--",
        "stuck",
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "hang (livelock: every running thread spins, none made progress in 5000 steps)"
        ),
        "{stdout}"
    );
}

/// `--time-budget` bounds the command, not only the start of runs: a run
/// in flight when it passes is given up (not counted, its seed left for
/// `--resume`), and calibration that would run past it stops with a
/// one-line error. The full-size mutex test takes about a minute per run
/// in this build; the bounds below are ten times the budget, not a speed
/// measurement.
#[test]
fn the_time_budget_bounds_runs_in_flight_and_calibration() {
    let started = Instant::now();
    let (code, stdout) = fuzz(
        "mutex_stress.c",
        &["--strategy", "random", "--time-budget", "2s", "-j", "1"],
        &[],
    );
    let took = started.elapsed();
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.starts_with("0 runs") && stdout.contains("time budget reached"),
        "{stdout}"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}: {stdout}");

    let started = Instant::now();
    let (code, stdout) = fuzz("mutex_stress.c", &["--time-budget", "2s"], &[]);
    let took = started.elapsed();
    assert_eq!(code, Some(2), "{stdout}");
    assert!(
        stdout.contains("the time budget ran out while calibrating"),
        "{stdout}"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}: {stdout}");
}

/// The programs at full size (10^6–10^7 steps: 256 workers × 8,192 tasks,
/// 128 threads × 20,000 lock operations, 10^6 ring items, 8 threads ×
/// 10^5 queue items) pass one run under each strategy of the default
/// portfolio and under PCT, with the default settings.
#[test]
#[ignore = "slow tier: scripts/test.sh --slow"]
fn full_size_unit_test_shaped_programs_pass() {
    let sources = [
        "pool.c",
        "mutex_stress.c",
        "spsc_ring.c",
        "ticket_mpmc.c",
        "ticket_lock.c",
        "handoff.c",
    ];
    let problems: Vec<String> = par_map(&sources, |source| {
        let (code, stdout) = fuzz(
            source,
            &[
                "--strategy",
                "sites+stall,pos+stall,surw+stall,random+stall,pct:3",
                "--runs",
                "5",
                "--keep-going",
                "-j",
                "1",
            ],
            &[],
        );
        (code != Some(0) || !stdout.contains(": 0 failing") || stdout.contains("inconclusive"))
            .then(|| format!("{source}: exit {code:?}\n{stdout}"))
    })
    .into_iter()
    .flatten()
    .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
