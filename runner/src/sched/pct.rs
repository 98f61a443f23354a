//! `pct:d` — Probabilistic Concurrency Testing.
//!
//! Burckhardt, Kothari, Musuvathi, Nagarakatte, "A Randomized Scheduler with
//! Probabilistic Guarantees of Finding Bugs", ASPLOS 2010. Every thread gets
//! a random initial priority above `d`; `d − 1` change points are drawn
//! uniformly from the first `k` decisions (`k` = estimated decisions per run);
//! at the i-th change point the thread that would run gets priority `d − i`.
//! The enabled thread with the highest priority always runs. A bug of depth
//! `d` is found with probability at least 1 / (n·k^(d−1)).
//!
//! As in Coyote and shuttle, a thread that looks like it is spinning (see
//! [`super::Candidate::spinning`]) has its priority lowered below every other
//! thread, so a high-priority spinner cannot starve the thread it waits for.

use super::rng::{Rng, STREAM_STRATEGY};
use super::{Choice, Strategy};
use crate::model::Tid;

/// PCT's state for one run.
pub struct Pct {
    depth: u32,
    k: u64,
    rng: Rng,
    /// Priority per thread (by tid; 0 for a thread without one); higher
    /// runs first.
    priority: Vec<i64>,
    /// Decision numbers at which a priority change happens, ascending.
    change_points: Vec<u64>,
    changes_done: u32,
    /// Next priority handed to a demoted spinner (decreasing).
    next_low: i64,
}

impl Pct {
    /// PCT for bugs of depth `depth` in runs of about `k` decisions.
    pub fn new(depth: u32, k: u64) -> Pct {
        Pct {
            depth,
            k: k.max(1),
            rng: Rng::new(0, STREAM_STRATEGY),
            priority: Vec::new(),
            change_points: Vec::new(),
            changes_done: 0,
            next_low: -1,
        }
    }

    fn set_priority(&mut self, tid: Tid, p: i64) {
        let t = tid as usize;
        if self.priority.len() <= t {
            self.priority.resize(t + 1, 0);
        }
        self.priority[t] = p;
    }

    fn initial_priority(&mut self) -> i64 {
        // Above every change-point priority (1..d); distinct with
        // overwhelming probability, ties broken by tid.
        self.depth as i64 + 1 + (self.rng.next_u64() >> 2) as i64
    }
}

impl Strategy for Pct {
    fn spec(&self) -> String {
        format!("pct:{}:k={}", self.depth, self.k)
    }

    fn reset(&mut self, seed: u64) {
        self.rng = Rng::new(seed, STREAM_STRATEGY);
        self.priority.clear();
        self.change_points = (1..self.depth).map(|_| self.rng.range(1, self.k)).collect();
        self.change_points.sort_unstable();
        self.changes_done = 0;
        self.next_low = -1;
        let p = self.initial_priority();
        self.set_priority(0, p);
    }

    fn on_spawn(&mut self, tid: Tid) {
        let p = self.initial_priority();
        self.set_priority(tid, p);
    }

    fn pick_thread(&mut self, choice: &Choice) -> usize {
        for c in choice.candidates {
            if c.spinning {
                self.set_priority(c.tid, self.next_low);
                self.next_low -= 1;
            }
        }
        let best = |pr: &[i64]| {
            choice
                .candidates
                .iter()
                .enumerate()
                .max_by_key(|(_, c)| {
                    (
                        pr.get(c.tid as usize).copied().unwrap_or(0),
                        std::cmp::Reverse(c.tid),
                    )
                })
                .map(|(i, _)| i)
                .unwrap_or(0)
        };
        let mut pick = best(&self.priority);
        while (self.changes_done as usize) < self.change_points.len()
            && self.change_points[self.changes_done as usize] <= choice.decision + 1
        {
            self.changes_done += 1;
            let tid = choice.candidates[pick].tid;
            self.set_priority(tid, (self.depth - self.changes_done) as i64);
            pick = best(&self.priority);
        }
        pick
    }

    fn pick_value(&mut self, _tid: Tid, n: u32) -> u32 {
        self.rng.below(n as u64) as u32
    }
}
