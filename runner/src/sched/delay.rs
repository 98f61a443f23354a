//! `delay:k` — delay-bounded random scheduling.
//!
//! Emmi, Qadeer, Rakamarić, "Delay-Bounded Scheduling", POPL 2011. A
//! deterministic scheduler runs the current thread for as long as it can
//! (no preemption); when it blocks, ends or yields, the next enabled thread
//! in cyclic tid order runs. A *delay* skips the thread the deterministic
//! scheduler would pick in favour of the next one in that order. Bugs that
//! need few delays are common, and a schedule with `k` delays is one of only
//! `O(n^k)` per program, whatever the number of threads.
//!
//! The systematic version enumerates every placement of at most `k` delays;
//! this is its random counterpart (as in the random delay-bounded schedulers
//! of Thomson, Donaldson, Betts, "Concurrency Testing Using Controlled
//! Schedulers", TOPC 2016): each run draws the positions of `k` delays
//! uniformly among the first `n` decisions (`n` = estimated decisions per
//! run, measured like PCT's `k`). A thread that yields (`sched_yield`) or
//! looks like it is spinning counts as having yielded, so the deterministic scheduler moves on from it
//! instead of letting it spin out its step budget.

use super::rng::{Rng, STREAM_STRATEGY};
use super::{Choice, Strategy};
use crate::model::Tid;

/// The `delay:k` strategy.
pub struct Delay {
    delays: u32,
    n: u64,
    rng: Rng,
    /// Decision numbers (1-based) at which a delay happens, ascending; a
    /// number may repeat (two delays at one decision).
    points: Vec<u64>,
    next: usize,
    /// The thread the deterministic scheduler last ran.
    last: Option<Tid>,
}

impl Delay {
    /// At most `delays` delays spread over the first `n` decisions.
    pub fn new(delays: u32, n: u64) -> Delay {
        Delay {
            delays,
            n: n.max(1),
            rng: Rng::new(0, STREAM_STRATEGY),
            points: Vec::new(),
            next: 0,
            last: None,
        }
    }
}

impl Strategy for Delay {
    fn spec(&self) -> String {
        format!("delay:{}:n={}", self.delays, self.n)
    }

    fn reset(&mut self, seed: u64) {
        self.rng = Rng::new(seed, STREAM_STRATEGY);
        self.points = (0..self.delays)
            .map(|_| self.rng.range(1, self.n))
            .collect();
        self.points.sort_unstable();
        self.next = 0;
        self.last = None;
    }

    fn pick_thread(&mut self, choice: &Choice) -> usize {
        let cands = choice.candidates;
        let n = cands.len();
        // The deterministic choice: keep running the current thread unless it
        // spins; otherwise the first enabled thread after it in cyclic order.
        let after = |t: Tid| cands.iter().position(|c| c.tid > t).unwrap_or(0);
        let current = choice
            .current
            .and_then(|cur| cands.iter().position(|c| c.tid == cur));
        let waits =
            |i: usize| cands[i].spinning || cands[i].pending.kind == crate::model::EventKind::Yield;
        let mut pick = match current {
            Some(i) if !waits(i) => i,
            Some(i) => (i + 1) % n,
            None => self.last.map(after).unwrap_or(0),
        };
        // Never hand the processor to a spinner while someone else can run.
        let mut hops = 0;
        while waits(pick) && hops < n {
            pick = (pick + 1) % n;
            hops += 1;
        }
        // Each delay due at this decision skips one thread.
        let here = choice.decision + 1;
        while self.next < self.points.len() && self.points[self.next] <= here {
            self.next += 1;
            pick = (pick + 1) % n;
        }
        self.last = Some(cands[pick].tid);
        pick
    }

    fn pick_value(&mut self, _tid: Tid, n: u32) -> u32 {
        self.rng.below(n as u64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Pending;
    use crate::sched::Candidate;

    fn cands(n: u32) -> Vec<Candidate> {
        (0..n)
            .map(|tid| Candidate {
                tid,
                pending: Pending::START,
                spinning: false,
            })
            .collect()
    }

    #[test]
    fn zero_delays_is_non_preemptive() {
        let mut s = Delay::new(0, 100);
        s.reset(3);
        let c = cands(3);
        for d in 0..50 {
            let i = s.pick_thread(&Choice {
                current: Some(1),
                candidates: &c,
                decision: d,
            });
            assert_eq!(i, 1);
        }
    }

    #[test]
    fn k_delays_switch_at_most_k_times() {
        for seed in 0..50 {
            let mut s = Delay::new(2, 30);
            s.reset(seed);
            let c = cands(3);
            let mut cur = 0;
            let mut switches = 0;
            for d in 0..60 {
                let i = s.pick_thread(&Choice {
                    current: Some(cur),
                    candidates: &c,
                    decision: d,
                });
                if c[i].tid != cur {
                    switches += 1;
                    cur = c[i].tid;
                }
            }
            assert!(switches <= 2, "seed {seed}: {switches}");
        }
    }
}
