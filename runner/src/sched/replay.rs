//! `replay`: follow a recorded schedule θ.
//!
//! The recorded decisions themselves are applied by the runtime's scheduler,
//! which checks each one against the run (the chosen thread must be enabled
//! and about to execute the recorded site) and stops at the first divergence.
//! This strategy decides only what the recording does not cover (it should
//! never be asked for a complete recording): it keeps the current thread
//! running when it can, else the lowest enabled tid — no randomness at all.

use super::{Choice, Strategy};
use crate::model::Tid;

/// Decides past a recording: the current thread when it can run, else the lowest enabled tid.
pub struct Continue;

impl Strategy for Continue {
    fn spec(&self) -> String {
        "replay".into()
    }
    fn reset(&mut self, _seed: u64) {}
    fn pick_thread(&mut self, choice: &Choice) -> usize {
        choice
            .current
            .and_then(|cur| choice.candidates.iter().position(|c| c.tid == cur))
            .unwrap_or(0)
    }
    fn pick_value(&mut self, _tid: Tid, _n: u32) -> u32 {
        0
    }
}
