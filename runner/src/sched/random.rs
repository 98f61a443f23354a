//! `random`: at every decision, a thread chosen uniformly from the enabled
//! set; values uniform in their range. The baseline every other strategy is
//! compared against ("random walk" in the literature, e.g. the evaluation of
//! Burckhardt et al., ASPLOS'10).

use super::rng::{Rng, STREAM_STRATEGY};
use super::{Choice, Strategy};
use crate::model::Tid;

/// Uniformly random choice at every decision.
pub struct Random {
    rng: Rng,
}

impl Random {
    /// A random strategy (seeded when the run starts).
    pub fn new() -> Random {
        Random {
            rng: Rng::new(0, STREAM_STRATEGY),
        }
    }
}

impl Default for Random {
    fn default() -> Self {
        Random::new()
    }
}

impl Strategy for Random {
    fn spec(&self) -> String {
        "random".into()
    }
    fn reset(&mut self, seed: u64) {
        self.rng = Rng::new(seed, STREAM_STRATEGY);
    }
    fn pick_thread(&mut self, choice: &Choice) -> usize {
        self.rng.below(choice.candidates.len() as u64) as usize
    }
    fn pick_value(&mut self, _tid: Tid, n: u32) -> u32 {
        self.rng.below(n as u64) as u32
    }
}
