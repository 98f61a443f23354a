//! `surw` — Selectively Uniform Random Walk.
//!
//! Zhao, Wolff, Mathur, Roychoudhury, "Selectively Uniform Concurrency
//! Testing", ASPLOS 2025. A random walk that picks a thread uniformly at
//! every step is far from uniform over interleavings: with one thread of 1
//! event and one of 100, it runs the short thread first half of the time,
//! although only 1 interleaving in 101 does. The *uniform* random walk (URW)
//! picks each enabled thread with probability proportional to the number of
//! events it has left, which samples interleavings uniformly (exactly so for
//! programs without blocking). The *selective* variant applies that
//! weighting only to the interesting events (here: shared-memory accesses
//! and synchronization operations); the others — thread starts, calls into
//! the host, preemption-budget points — are scheduled freely, which keeps
//! every interleaving possible while the weighting concentrates on the
//! events that can race.
//!
//! A thread's remaining events are not known in advance: they are estimated
//! from earlier runs. `heddle` measures them before a campaign (like PCT's
//! `k`): the mean number of decisions each thread took part in over
//! [`PROBE_RUNS`] `random` runs (seeds `0..PROBE_RUNS`), recorded in the spec
//! as `surw:n=E0,E1,…` (one estimate per thread id; threads beyond the list
//! use the last estimate). Remaining = estimate − decisions the thread has
//! won so far in this run, at least 1. A thread that looks like it is
//! spinning, yields or ran out of its preemption budget gets weight 1.

use super::rng::{Rng, STREAM_STRATEGY};
use super::{Choice, Strategy};
use crate::model::{EventKind, Pending, Tid};

/// Number of `random` runs whose decisions give the per-thread estimates.
pub const PROBE_RUNS: u64 = 8;

/// The `surw` strategy.
pub struct Surw {
    estimates: Vec<u64>,
    rng: Rng,
    /// Decisions each thread has won in this run (by tid).
    done: Vec<u64>,
    /// Buffers of `pick_thread`, kept from decision to decision.
    free: Vec<usize>,
    weights: Vec<u64>,
}

/// Whether the weighting applies to an event (see the module documentation).
pub fn interesting(p: &Pending) -> bool {
    p.kind.is_access()
        || matches!(
            p.kind,
            EventKind::Wait
                | EventKind::Notify
                | EventKind::Fence
                | EventKind::Lock
                | EventKind::Unlock
                | EventKind::CondWait
                | EventKind::Join
        )
}

/// A thread that spins, yields or ran out of its preemption budget is
/// probably waiting for another: weight 1, never scheduled freely.
fn waiting(c: &super::Candidate) -> bool {
    c.spinning || matches!(c.pending.kind, EventKind::Yield | EventKind::Budget)
}

impl Surw {
    /// A `surw` strategy with per-thread event estimates (by tid; the last
    /// one applies to higher tids). An empty list means "1 each", a plain
    /// random walk over interesting events.
    pub fn new(estimates: Vec<u64>) -> Surw {
        let estimates = if estimates.is_empty() {
            vec![1]
        } else {
            estimates
        };
        Surw {
            estimates,
            rng: Rng::new(0, STREAM_STRATEGY),
            done: Vec::new(),
            free: Vec::new(),
            weights: Vec::new(),
        }
    }

    /// The per-thread estimates from the decisions of earlier runs: for each
    /// tid, the mean (rounded up) number of thread decisions that chose it.
    pub fn estimate(runs: &[Vec<crate::trace::Decision>]) -> Vec<u64> {
        let mut totals: Vec<u64> = Vec::new();
        for run in runs {
            for d in run {
                if let crate::trace::Decision::Thread { tid, .. } = *d {
                    let t = tid as usize;
                    if totals.len() <= t {
                        totals.resize(t + 1, 0);
                    }
                    totals[t] += 1;
                }
            }
        }
        let n = runs.len().max(1) as u64;
        totals.iter().map(|&t| t.div_ceil(n).max(1)).collect()
    }

    fn estimate_of(&self, tid: Tid) -> u64 {
        let i = (tid as usize).min(self.estimates.len() - 1);
        self.estimates[i]
    }
}

impl Strategy for Surw {
    fn spec(&self) -> String {
        let list: Vec<String> = self.estimates.iter().map(|e| e.to_string()).collect();
        format!("surw:n={}", list.join(","))
    }

    fn reset(&mut self, seed: u64) {
        self.rng = Rng::new(seed, STREAM_STRATEGY);
        self.done.clear();
    }

    fn pick_thread(&mut self, choice: &Choice) -> usize {
        let cands = choice.candidates;
        let mut free = std::mem::take(&mut self.free);
        free.clear();
        free.extend(
            (0..cands.len()).filter(|&i| !interesting(&cands[i].pending) && !waiting(&cands[i])),
        );
        let pick = if !free.is_empty() {
            free[self.rng.below(free.len() as u64) as usize]
        } else {
            let mut weights = std::mem::take(&mut self.weights);
            weights.clear();
            weights.extend(cands.iter().map(|c| {
                if waiting(c) {
                    1
                } else {
                    let done = self.done.get(c.tid as usize).copied().unwrap_or(0);
                    self.estimate_of(c.tid).saturating_sub(done).max(1)
                }
            }));
            let mut r = self.rng.below(weights.iter().sum());
            let mut pick = cands.len() - 1;
            for (i, w) in weights.iter().enumerate() {
                if r < *w {
                    pick = i;
                    break;
                }
                r -= w;
            }
            self.weights = weights;
            pick
        };
        self.free = free;
        let t = cands[pick].tid as usize;
        if self.done.len() <= t {
            self.done.resize(t + 1, 0);
        }
        self.done[t] += 1;
        pick
    }

    fn pick_value(&mut self, _tid: Tid, n: u32) -> u32 {
        self.rng.below(n as u64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::Candidate;
    use crate::trace::Decision;

    #[test]
    fn estimates_are_means_per_thread() {
        let d = |tid| Decision::Thread {
            tid,
            site: 0,
            options: 2,
        };
        let runs = vec![vec![d(0), d(1), d(1), d(2)], vec![d(1), d(1), d(1), d(1)]];
        assert_eq!(Surw::estimate(&runs), vec![1, 3, 1]);
    }

    #[test]
    fn weights_follow_remaining_events() {
        // Thread 0 has 1 event left, thread 1 has 9: thread 0 should win
        // about a tenth of first decisions (a uniform walk: half).
        let access = |tid| Candidate {
            tid,
            pending: Pending {
                site: 1,
                kind: EventKind::Write,
                addr: 64,
                len: 4,
            },
            spinning: false,
        };
        let cands = [access(0), access(1)];
        let mut wins = 0;
        for seed in 0..2000 {
            let mut s = Surw::new(vec![1, 9]);
            s.reset(seed);
            let i = s.pick_thread(&Choice {
                current: None,
                candidates: &cands,
                decision: 0,
            });
            if i == 0 {
                wins += 1;
            }
        }
        assert!((120..290).contains(&wins), "{wins}");
    }
}
