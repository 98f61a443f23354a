//! `rr:p` — round-robin with random perturbation.
//!
//! At each decision, with probability `p` a thread is chosen uniformly at
//! random; otherwise the next enabled thread after the current one in tid
//! order runs (cyclically). With `p = 0` this is the most fine-grained
//! interleaving (a switch at every yield point), the classic stress schedule;
//! the random picks break the lock-step patterns that pure round-robin can
//! never leave.

use super::rng::{Rng, STREAM_STRATEGY};
use super::{Choice, Strategy};
use crate::model::Tid;

/// Round robin in tid order, with a random pick instead at probability `p`.
pub struct RoundRobin {
    p: f64,
    rng: Rng,
}

impl RoundRobin {
    /// Round robin with random picks at probability `p`.
    pub fn new(p: f64) -> RoundRobin {
        RoundRobin {
            p,
            rng: Rng::new(0, STREAM_STRATEGY),
        }
    }
}

impl Strategy for RoundRobin {
    fn spec(&self) -> String {
        format!("rr:{}", self.p)
    }
    fn reset(&mut self, seed: u64) {
        self.rng = Rng::new(seed, STREAM_STRATEGY);
    }
    fn pick_thread(&mut self, choice: &Choice) -> usize {
        let n = choice.candidates.len();
        if self.rng.chance(self.p) {
            return self.rng.below(n as u64) as usize;
        }
        match choice.current {
            Some(cur) => choice
                .candidates
                .iter()
                .position(|c| c.tid > cur)
                .unwrap_or(0),
            None => 0,
        }
    }
    fn pick_value(&mut self, _tid: Tid, n: u32) -> u32 {
        self.rng.below(n as u64) as u32
    }
}
