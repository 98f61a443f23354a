//! Tests: many-thread programs written the way benchmark suites write them
//! (`tests/programs/many/`): plain globals, helpers, thread pools created
//! in loops whose bound is a global, per-thread arguments. The default
//! portfolio finds their bugs within a bounded number of runs at `-O1` and
//! at `-O0`, and their fixed variants pass the same runs.
//!
//! The runs of a campaign are a function of the seed, so each bound is a
//! fixed number of seeds: about three times the seeds the first failure
//! took when these were written.

use crate::common::*;
use heddle::fuzz::calibrated_portfolio;
use heddle::instrument::Config;
use heddle::runtime::{Program, RunConfig};

/// (source, extra compiler flags, seeds the default portfolio may take).
/// First failing seeds when written: 116, 124 and 156.
const CASES: &[(&str, &[&str], u64)] = &[
    ("tests/programs/many/reorder_pool.c", &[], 350),
    ("tests/programs/many/twostage_heap.c", &[], 375),
    ("tests/programs/many/twostage_heap.c", &["-O0"], 470),
];

/// Seeds the fixed variants run.
const FIXED_SEEDS: u64 = 64;

/// The first failing seed of `source` built with `flags` under the default
/// portfolio, within `budget` seeds, with the verdict; and the fixed
/// variant's first failure over the same seeds (none expected).
fn hunt(source: &str, flags: &[&str], budget: u64) -> (Option<(u64, String)>, Option<String>) {
    let run_seeds = |fixed: bool, seeds: u64| {
        let mut f: Vec<&str> = flags.to_vec();
        if fixed {
            f.push("-DFIXED");
        }
        let bytes = std::fs::read(build(source, &f)).expect("read module");
        let p = Program::new(&bytes, &Config::default()).expect("program");
        let base = RunConfig::default();
        let portfolio = calibrated_portfolio(&p, &base, "default").expect("calibrate");
        for seed in 0..seeds {
            let cfg = RunConfig {
                seed,
                strategy: portfolio.members[portfolio.member(seed)].clone(),
                ..base.clone()
            };
            let r = run(&p, &cfg);
            if !r.verdict.is_pass() {
                return Some((seed, r.verdict.summary()));
            }
        }
        None
    };
    let found = run_seeds(false, budget);
    let fixed = run_seeds(true, FIXED_SEEDS).map(|(seed, v)| format!("seed {seed}: {v}"));
    (found, fixed)
}

/// A checker or reader created after (or before) a pool of identical
/// threads whose loop re-reads a global bound: the default portfolio finds
/// the interleaving where it runs between one thread's two steps.
#[test]
fn many_thread_benchmarks_are_found_by_the_default_portfolio() {
    let results = par_map(CASES, |&(source, flags, budget)| {
        (source, flags, budget, hunt(source, flags, budget))
    });
    let mut report = Vec::new();
    for (source, flags, budget, (found, fixed)) in results {
        let (seed, verdict) = found.unwrap_or_else(|| {
            panic!("{source} {flags:?}: the default portfolio found nothing in {budget} seeds")
        });
        assert!(
            verdict.starts_with("assertion"),
            "{source} {flags:?}: seed {seed}: {verdict}"
        );
        assert!(
            fixed.is_none(),
            "{source} {flags:?} -DFIXED fails: {}",
            fixed.unwrap_or_default()
        );
        report.push(format!("{source} {flags:?}: seed {seed}"));
    }
    eprintln!("{}", report.join("\n"));
}

/// 3,000 threads alive at once (created before any is joined) run: their
/// stacks fit in a module's linear memory (64 MiB stopped `pthread_create`
/// after 1,021 with EAGAIN).
#[test]
fn three_thousand_threads_alive_at_once() {
    let o = heddle_out(&["run", "tests/programs/many_threads.c", "--", "3000"]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}{}", text(&o.stderr));
    assert!(stdout.contains("3001 threads"), "{stdout}");
    assert!(stdout.contains("\n3000\n"), "{stdout}");
}
