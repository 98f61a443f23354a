//! Feedback between the runs of a campaign, deterministically.
//!
//! A strategy that learns ([`crate::sched::rff`]) sees a [`Corpus`] built
//! from earlier runs. For the results not to depend on timing or on
//! `--jobs`, the seeds are cut into *generations* of [`GENERATION`]
//! consecutive seeds, and a run of generation `g` sees exactly the feedback
//! of the seeds before generation `g`, merged in seed order: a worker that
//! starts a run of generation `g` waits until every earlier seed is
//! *closed* — run, or skipped (another shard's, resumed, or past the end).
//! Every seed a campaign hands out is closed by the worker that took it, so
//! the wait always ends; with many more seeds per generation than workers
//! it is short.

use crate::sched::rff::{Corpus, Feedback};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};

/// Seeds per generation.
pub const GENERATION: u64 = 64;

/// The corpus of one campaign, with its generations.
pub struct Hub {
    start: u64,
    state: Mutex<State>,
    merged: Condvar,
}

struct State {
    /// The corpus of the seeds before `next`.
    corpus: Arc<Corpus>,
    /// The corpus as it was when `next` last reached a generation's first
    /// seed: what that generation's runs see. (A run of seed `s` starts
    /// with `next <= s`, since `s` is not closed yet, so the generation
    /// `next` is in is always the run's own.)
    boundary: Arc<Corpus>,
    /// The first seed not merged yet.
    next: u64,
    /// Closed seeds at or after `next`: their pairs (None: skipped).
    closed: BTreeMap<u64, Option<Feedback>>,
}

impl Hub {
    /// A hub for a campaign whose seeds start at `start`.
    pub fn new(start: u64) -> Hub {
        Hub {
            start,
            state: Mutex::new(State {
                corpus: Arc::default(),
                boundary: Arc::default(),
                next: start,
                closed: BTreeMap::new(),
            }),
            merged: Condvar::new(),
        }
    }

    /// The first seed of `seed`'s generation.
    fn generation_start(&self, seed: u64) -> u64 {
        self.start + (seed.saturating_sub(self.start) / GENERATION) * GENERATION
    }

    /// The corpus for a run of `seed`: the feedback of every seed before its
    /// generation (waits until they are all closed).
    pub fn corpus_for(&self, seed: u64) -> Arc<Corpus> {
        let want = self.generation_start(seed);
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while st.next < want {
            st = self.merged.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        // Seeds of this generation may be merged already (their runs
        // ended first): the run sees the corpus as of the generation's start.
        st.boundary.clone()
    }

    /// `seed` is done: `feedback` is its run's (None: it did not run).
    pub fn close(&self, seed: u64, feedback: Option<Feedback>) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.closed.insert(seed, feedback);
        let mut advanced = false;
        while let Some(pairs) = {
            let next = st.next;
            st.closed.remove(&next)
        } {
            if let Some(p) = pairs {
                Arc::make_mut(&mut st.corpus).add(&p);
            }
            st.next += 1;
            if (st.next - self.start).is_multiple_of(GENERATION) {
                st.boundary = st.corpus.clone();
            }
            advanced = true;
        }
        if advanced {
            self.merged.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::rff::RfPair;

    fn pairs(p: &[RfPair]) -> Feedback {
        Feedback {
            pairs: p.to_vec(),
            constraints: Vec::new(),
        }
    }

    /// Whatever the order seeds close in, a run sees the feedback of every
    /// seed before its generation and nothing else.
    #[test]
    fn runs_see_exactly_the_earlier_generations() {
        let g = GENERATION;
        for order in [
            (0..3 * g).collect::<Vec<_>>(),
            (0..3 * g).rev().collect::<Vec<_>>(),
        ] {
            let hub = Hub::new(100);
            for &i in &order {
                hub.close(
                    100 + i,
                    if i % 7 == 0 {
                        None
                    } else {
                        Some(pairs(&[(1, i as u32)]))
                    },
                );
            }
            let c = hub.corpus_for(100 + 3 * g);
            assert_eq!(c.runs, (0..3 * g).filter(|i| i % 7 != 0).count() as u64);
        }
        let hub = Hub::new(0);
        assert_eq!(hub.corpus_for(g - 1).runs, 0);
        for s in 0..g + 5 {
            hub.close(s, Some(pairs(&[(2, 3)])));
        }
        // Seeds g..g+5 merged already; a run of generation 1 still sees g runs.
        assert_eq!(hub.corpus_for(g + 10).runs, g);
        assert_eq!(hub.corpus_for(g + 10).pairs[&(2, 3)], g);
    }

    #[test]
    fn a_waiting_run_resumes_when_the_earlier_seeds_close() {
        let hub = Arc::new(Hub::new(0));
        let waiter = {
            let hub = hub.clone();
            std::thread::spawn(move || hub.corpus_for(GENERATION).runs)
        };
        for s in (0..GENERATION).rev() {
            hub.close(s, Some(Feedback::default()));
        }
        assert_eq!(waiter.join().unwrap(), GENERATION);
    }
}
