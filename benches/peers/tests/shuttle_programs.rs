//! The shuttle ports of the bench programs check what their C sources
//! check: the buggy race_bank loses a deposit under some schedule, and the
//! programs the bench measures pass under every schedule tried.

#[path = "../shuttle_programs.rs"]
mod shuttle_programs;

use shuttle::scheduler::RandomScheduler;
use shuttle::{Config, Runner};
use shuttle_programs::{bounded_queue, lock_loop, race_bank, thread_pool, CASES};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

/// Runs `f` for `iterations` random schedules from a fixed seed; `Err` with
/// the panic message if one of them failed.
fn random(f: fn(), seed: u64, iterations: usize) -> Result<usize, String> {
    let runner = Runner::new(
        RandomScheduler::new_from_seed(seed, iterations),
        Config::new(),
    );
    catch_unwind(AssertUnwindSafe(|| runner.run(f))).map_err(|e| {
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}

#[test]
fn random_scheduler_finds_the_lost_update() {
    let err = random(|| race_bank(2, 2, false), 1, 1000)
        .expect_err("no schedule in 1000 lost a deposit in buggy race_bank 2×2");
    assert!(err.contains("lost update"), "unexpected failure: {err}");
}

#[test]
fn buggy_race_bank_passes_with_one_thread() {
    // Without a second thread no deposit can be lost: the failure above comes
    // from an interleaving, not from the program's arithmetic.
    assert_eq!(random(|| race_bank(1, 4, false), 2, 200), Ok(200));
}

#[test]
fn bench_programs_pass_200_random_schedules() {
    // The long ones at full size take seconds a run: they are checked
    // smaller below.
    for case in CASES.iter().filter(|c| !c.long) {
        assert_eq!(random(case.shuttle, 3, 200), Ok(200), "{}", case.name);
    }
}

#[test]
fn long_bench_programs_pass_200_random_schedules_when_small() {
    assert_eq!(random(|| lock_loop(4, 50), 4, 200), Ok(200));
    assert_eq!(random(|| bounded_queue(2, 300), 5, 200), Ok(200));
    assert_eq!(random(|| thread_pool(16, 100), 6, 200), Ok(200));
}

#[test]
fn bench_sources_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for case in CASES {
        assert!(root.join(case.source).is_file(), "{}", case.source);
        assert!(!case.args.is_empty(), "{}", case.name);
    }
    // Only race_bank has a FIXED variant.
    assert!(CASES
        .iter()
        .all(|c| c.fixed == c.source.ends_with("race_bank.c")));
}
