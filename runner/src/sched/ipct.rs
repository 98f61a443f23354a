//! `ipct:D:B` — PCT with iteratively growing depth.
//!
//! PCT (Burckhardt, Kothari, Musuvathi, Nagarakatte, "A Randomized Scheduler
//! with Probabilistic Guarantees of Finding Bugs", ASPLOS 2010) needs the bug
//! depth `d` up front, and a wrong guess costs dearly: too small and the bug
//! is out of reach, too large and the guarantee 1/(n·k^(d−1)) shrinks by a
//! factor `k` per extra level. The iterative variant does for PCT what
//! iterative context bounding (Musuvathi, Qadeer, "Iterative Context Bounding
//! for Systematic Testing of Multithreaded Programs", PLDI 2007) does for
//! preemption bounds: it tries the shallow depths first, where bugs are
//! cheapest to hit, and moves deeper as runs go by.
//!
//! Seeds are grouped in blocks of `B` consecutive seeds; block `i` runs PCT
//! with depth `1 + (i mod D)`. A campaign over consecutive seeds therefore
//! runs `B` schedules at depth 1, then `B` at depth 2, … up to `D`, and then
//! starts over with fresh seeds. The depth is a function of the seed alone,
//! so every run stays reproducible on its own. `k` (the estimated number of
//! decisions per run) is measured like PCT's.

use super::pct::Pct;
use super::{Choice, Strategy};
use crate::model::Tid;

/// The `ipct` strategy.
pub struct Ipct {
    max_depth: u32,
    block: u64,
    k: u64,
    inner: Pct,
}

impl Ipct {
    /// Depths `1..=max_depth`, each for `block` consecutive seeds, PCT's `k`.
    pub fn new(max_depth: u32, block: u64, k: u64) -> Ipct {
        Ipct {
            max_depth: max_depth.max(1),
            block: block.max(1),
            k: k.max(1),
            inner: Pct::new(1, k),
        }
    }

    /// The PCT depth used for `seed`.
    pub fn depth_for(&self, seed: u64) -> u32 {
        1 + ((seed / self.block) % self.max_depth as u64) as u32
    }
}

impl Strategy for Ipct {
    fn spec(&self) -> String {
        format!("ipct:{}:{}:k={}", self.max_depth, self.block, self.k)
    }

    fn reset(&mut self, seed: u64) {
        self.inner = Pct::new(self.depth_for(seed), self.k);
        self.inner.reset(seed);
    }

    fn pick_thread(&mut self, choice: &Choice) -> usize {
        self.inner.pick_thread(choice)
    }

    fn pick_value(&mut self, tid: Tid, n: u32) -> u32 {
        self.inner.pick_value(tid, n)
    }

    fn on_spawn(&mut self, tid: Tid) {
        self.inner.on_spawn(tid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_cycles_through_blocks() {
        let s = Ipct::new(3, 10, 100);
        let depths: Vec<u32> = [0, 9, 10, 19, 20, 29, 30, 45]
            .map(|x| s.depth_for(x))
            .to_vec();
        assert_eq!(depths, vec![1, 1, 2, 2, 3, 3, 1, 2]);
    }
}
