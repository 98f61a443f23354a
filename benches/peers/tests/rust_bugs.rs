//! The shuttle ports of `benches/programs/rust/peer_bugs.rs` are bugs
//! shuttle finds: each fails under some schedule of its random or PCT
//! scheduler.

#[path = "../rust_bugs.rs"]
mod rust_bugs;

use rust_bugs::BUGS;
use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::{Config, Runner};
use std::panic::{catch_unwind, AssertUnwindSafe};

#[test]
fn shuttle_finds_every_bug() {
    for bug in &BUGS {
        let random = catch_unwind(AssertUnwindSafe(|| {
            Runner::new(RandomScheduler::new_from_seed(1, 2000), Config::new()).run(bug.shuttle)
        }));
        let pct = catch_unwind(AssertUnwindSafe(|| {
            Runner::new(PctScheduler::new_from_seed(1, 3, 2000), Config::new()).run(bug.shuttle)
        }));
        assert!(
            random.is_err() || pct.is_err(),
            "{} ({}): no failure in 2000 random and 2000 PCT executions",
            bug.name,
            bug.what
        );
    }
}
