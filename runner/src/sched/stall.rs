//! `STRATEGY+stall` — time as a choice.
//!
//! Virtual time moves with the program's steps, so a thread that sleeps
//! 500 µs "to let the others finish" always wakes after they did: in 500 µs
//! of virtual time they take hundreds of steps. On a loaded machine they may
//! not have run at all. `+stall` wraps any strategy and, when a thread starts
//! to wait on time (a sleep, or a timed wait's timeout) and its deadline is
//! the earliest pending one, lets that time pass at once with probability ½:
//! the clock jumps to the deadline, as if every other thread had been
//! descheduled for that long, and the thread is ready again (its sleep over,
//! its timed wait timed out) — the strategy then decides who runs first.
//!
//! The program's tolerance is respected: deadlines keep their order (a stall
//! never jumps past another thread's earlier deadline: timers fire in
//! deadline order), and no thread is delayed longer than [`MAX_STALL_NS`],
//! what a loaded machine's scheduler does to a runnable thread (a few time
//! slices); a program that sleeps longer to order its threads relies on a
//! margin no real machine breaks often, and is not second-guessed. The
//! clock stays monotonic, and the choice is a value decision recorded in
//! the replay like any other.

use super::rng::{Rng, STREAM_TIME};
use super::{Choice, RunView, Strategy};
use crate::model::{Pending, Tid};

/// The longest wait a stall lets pass at once: 10 ms.
pub const MAX_STALL_NS: u64 = 10_000_000;

/// The spec suffix.
pub const SUFFIX: &str = "+stall";

/// Any strategy, with stalls at timed waits.
pub struct Stall {
    inner: Box<dyn Strategy>,
    rng: Rng,
}

impl Stall {
    /// Wraps `inner`.
    pub fn new(inner: Box<dyn Strategy>) -> Stall {
        Stall {
            inner,
            rng: Rng::new(0, STREAM_TIME),
        }
    }
}

impl Strategy for Stall {
    fn spec(&self) -> String {
        format!("{}{SUFFIX}", self.inner.spec())
    }
    fn reset(&mut self, seed: u64) {
        self.rng = Rng::new(seed, STREAM_TIME);
        self.inner.reset(seed);
    }
    fn pick_thread(&mut self, choice: &Choice) -> usize {
        self.inner.pick_thread(choice)
    }
    fn pick_value(&mut self, tid: Tid, n: u32) -> u32 {
        self.inner.pick_value(tid, n)
    }
    fn on_spawn(&mut self, tid: Tid) {
        self.inner.on_spawn(tid)
    }
    fn failure(&self) -> Option<String> {
        self.inner.failure()
    }
    fn observes_run(&self) -> bool {
        self.inner.observes_run()
    }
    fn pick_thread_in(&mut self, choice: &Choice, view: &dyn RunView) -> usize {
        self.inner.pick_thread_in(choice, view)
    }
    fn on_event(&mut self, tid: Tid, event: &Pending, view: &dyn RunView) {
        self.inner.on_event(tid, event, view)
    }
    fn learn_from(&mut self, corpus: std::sync::Arc<super::rff::Corpus>) {
        self.inner.learn_from(corpus)
    }
    fn take_feedback(&mut self) -> super::rff::Feedback {
        self.inner.take_feedback()
    }
    fn max_stall_ns(&self) -> u64 {
        MAX_STALL_NS
    }
    fn pick_stall(&mut self, _tid: Tid, _wait_ns: u64) -> bool {
        self.rng.chance(0.5)
    }
}
