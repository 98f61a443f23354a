//! `pos` — Partial Order Sampling.
//!
//! Yuan, Yang, Gu, "Partial Order Aware Concurrency Sampling", CAV 2018.
//! Every pending event gets an independent random priority; at each decision
//! the enabled thread whose pending event has the highest priority runs.
//! After an event runs, the thread's next event draws a fresh priority, and
//! so does every other pending event that *races* with the one that ran
//! (same memory, at least one of the two writes; or the same lock or futex
//! word). Redrawing the priorities of racing events is what makes POS sample
//! the partial orders of a program far more evenly than a random walk, which
//! over-samples orders that differ only in independent events.
//!
//! Value choices are uniform.

use super::rng::{Rng, STREAM_STRATEGY};
use super::{Candidate, Choice, Spinners, Strategy};
use crate::model::{EventKind, Pending, Tid};

/// The `pos` strategy.
pub struct Pos {
    rng: Rng,
    priorities: Priorities,
}

impl Pos {
    /// A `pos` strategy (seeded by [`Strategy::reset`]).
    pub fn new() -> Pos {
        Pos {
            rng: Rng::new(0, STREAM_STRATEGY),
            priorities: Priorities::default(),
        }
    }
}

impl Default for Pos {
    fn default() -> Self {
        Pos::new()
    }
}

/// POS's state: a priority per pending event, and the spinners held back.
/// Shared with strategies that sample like POS with a bias of their own
/// ([`super::rff`]).
#[derive(Default)]
pub struct Priorities {
    /// Each thread's pending event as last seen, with its priority (by
    /// tid).
    priority: Vec<Option<(Pending, u64)>>,
    /// Threads seen spinning that have not run since.
    spinners: Spinners,
}

impl Priorities {
    /// Forgets everything (a new run).
    pub fn clear(&mut self) {
        self.priority.clear();
        self.spinners.clear();
    }

    /// The candidate to run: not a spinner if possible, then the highest
    /// `bias`, then the highest priority. Draws priorities from `rng`.
    pub fn pick(
        &mut self,
        rng: &mut Rng,
        candidates: &[Candidate],
        bias: impl Fn(&Pending) -> i8,
    ) -> usize {
        // A thread whose pending event changed since we last saw it (it ran
        // alone, woke up, …) is at a new event: a new priority.
        for c in candidates {
            let fresh = match self.entry(c.tid) {
                Some((p, _)) => *p != c.pending,
                None => true,
            };
            if fresh {
                let pr = rng.next_u64();
                self.set(c.tid, Some((c.pending, pr)));
            }
        }
        self.spinners.observe(candidates);
        let prio = |tid: Tid| self.entry(tid).map(|e| e.1).unwrap_or(0);
        let spins = |tid: Tid| self.spinners.contains(tid);
        let pick = candidates
            .iter()
            .enumerate()
            .max_by_key(|(_, c)| {
                // A spinner waits for someone else: let the others go first.
                (
                    !spins(c.tid),
                    bias(&c.pending),
                    prio(c.tid),
                    std::cmp::Reverse(c.tid),
                )
            })
            .map(|(i, _)| i)
            .unwrap_or(0);
        let ran = candidates[pick];
        self.spinners.ran(ran.tid);
        // The chosen event executes: its thread's next event is new, and
        // every pending event racing with it is reset.
        self.set(ran.tid, None);
        for c in candidates {
            if c.tid != ran.tid && races(&ran.pending, &c.pending) {
                let pr = rng.next_u64();
                self.set(c.tid, Some((c.pending, pr)));
            }
        }
        pick
    }

    fn entry(&self, tid: Tid) -> Option<&(Pending, u64)> {
        self.priority.get(tid as usize)?.as_ref()
    }

    fn set(&mut self, tid: Tid, e: Option<(Pending, u64)>) {
        let t = tid as usize;
        if self.priority.len() <= t {
            self.priority.resize(t + 1, None);
        }
        self.priority[t] = e;
    }
}

/// Whether executing `a` and `b` in either order can give different results.
pub fn races(a: &Pending, b: &Pending) -> bool {
    let overlap = |a: &Pending, b: &Pending| {
        let (alen, blen) = (a.len.max(1) as u64, b.len.max(1) as u64);
        (a.addr as u64) < b.addr as u64 + blen && (b.addr as u64) < a.addr as u64 + alen
    };
    let sync = |k: EventKind| {
        matches!(
            k,
            EventKind::Wait
                | EventKind::Notify
                | EventKind::Lock
                | EventKind::Unlock
                | EventKind::CondWait
        )
    };
    if a.kind.is_access() && b.kind.is_access() {
        (a.kind.writes() || b.kind.writes()) && overlap(a, b)
    } else if sync(a.kind) || sync(b.kind) {
        // A lock, futex or condition-variable operation conflicts with any
        // other operation on the same word (including plain accesses to it).
        a.addr != 0 && b.addr != 0 && overlap(a, b)
    } else {
        false
    }
}

impl Strategy for Pos {
    fn spec(&self) -> String {
        "pos".into()
    }

    fn reset(&mut self, seed: u64) {
        self.rng = Rng::new(seed, STREAM_STRATEGY);
        self.priorities.clear();
    }

    fn pick_thread(&mut self, choice: &Choice) -> usize {
        self.priorities
            .pick(&mut self.rng, choice.candidates, |_| 0)
    }

    fn pick_value(&mut self, _tid: Tid, n: u32) -> u32 {
        self.rng.below(n as u64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::Candidate;

    fn cand(tid: Tid, kind: EventKind, addr: u32) -> Candidate {
        Candidate {
            tid,
            pending: Pending {
                site: tid,
                kind,
                addr,
                len: 4,
            },
            spinning: false,
        }
    }

    #[test]
    fn race_relation() {
        let w = cand(0, EventKind::Write, 100).pending;
        let r = cand(1, EventKind::Read, 102).pending;
        let r2 = cand(1, EventKind::Read, 104).pending;
        let r3 = cand(2, EventKind::Read, 100).pending;
        assert!(races(&w, &r));
        assert!(!races(&w, &r2));
        assert!(!races(&r, &r3));
        let l = cand(0, EventKind::Lock, 200).pending;
        let u = cand(1, EventKind::Unlock, 200).pending;
        assert!(races(&l, &u));
        assert!(!races(&l, &w));
    }

    #[test]
    fn deterministic_per_seed_and_varied_across_seeds() {
        let cands = [
            cand(0, EventKind::Write, 100),
            cand(1, EventKind::Read, 100),
            cand(2, EventKind::Read, 300),
        ];
        let picks = |seed| {
            let mut s = Pos::new();
            s.reset(seed);
            (0..20)
                .map(|d| {
                    s.pick_thread(&Choice {
                        current: Some(0),
                        candidates: &cands,
                        decision: d,
                    })
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(picks(7), picks(7));
        let distinct: std::collections::BTreeSet<_> = (0..20).map(picks).collect();
        assert!(distinct.len() > 5);
    }
}
