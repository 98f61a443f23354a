//! A scheduling strategy in its own crate: the worked example of
//! [`heddle::sched::Strategy`].
//!
//! `Sticky` keeps the running thread on the processor and, at each decision,
//! hands it to a uniformly chosen other enabled thread with probability `p`.
//! Small `p` gives long uninterrupted slices with a few random preemptions,
//! the shape most atomicity violations need; a spinning thread is always
//! switched away from, so it cannot keep the thread it waits for off the
//! processor.
//!
//! Everything random comes from [`heddle::sched::Rng`] seeded in
//! [`Strategy::reset`], so a run is a function of its seed and heddle can
//! record and replay it like any built-in strategy's.

use heddle::model::Tid;
use heddle::runtime::{Program, RunConfig, RunResult};
use heddle::sched::{Choice, Rng, Strategy};

/// Keep the current thread; switch with probability `p`.
pub struct Sticky {
    p: f64,
    rng: Rng,
}

impl Sticky {
    /// A strategy that preempts with probability `p` at each decision.
    pub fn new(p: f64) -> Sticky {
        Sticky {
            p,
            rng: Rng::new(0, 1),
        }
    }
}

impl Strategy for Sticky {
    fn spec(&self) -> String {
        format!("sticky:{}", self.p)
    }

    fn reset(&mut self, seed: u64) {
        self.rng = Rng::new(seed, 1);
    }

    fn pick_thread(&mut self, choice: &Choice) -> usize {
        let n = choice.candidates.len();
        let current = choice
            .current
            .and_then(|t| choice.candidates.iter().position(|c| c.tid == t));
        match current {
            Some(i) if !choice.candidates[i].spinning && !self.rng.chance(self.p) => i,
            Some(i) => {
                // Any other thread, uniformly.
                let j = self.rng.below(n as u64 - 1) as usize;
                if j >= i {
                    j + 1
                } else {
                    j
                }
            }
            None => self.rng.below(n as u64) as usize,
        }
    }

    fn pick_value(&mut self, _tid: Tid, n: u32) -> u32 {
        self.rng.below(n as u64) as u32
    }
}

/// Runs `program` on seeds `seeds` with [`Sticky`] and returns the first
/// failing seed with its result.
pub fn hunt(
    program: &Program,
    base: &RunConfig,
    p: f64,
    seeds: std::ops::Range<u64>,
) -> anyhow::Result<Option<(u64, RunResult)>> {
    for seed in seeds {
        let cfg = RunConfig {
            seed,
            ..base.clone()
        };
        let r = program.run_with_strategy(&cfg, Box::new(Sticky::new(p)))?;
        if !r.verdict.is_pass() {
            return Ok(Some((seed, r)));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use heddle::model::Pending;
    use heddle::sched::Candidate;
    use std::path::Path;

    #[test]
    fn never_preempts_with_p_zero() {
        let cands: Vec<Candidate> = (0..3)
            .map(|tid| Candidate {
                tid,
                pending: Pending::START,
                spinning: false,
            })
            .collect();
        let mut s = Sticky::new(0.0);
        s.reset(9);
        for d in 0..100 {
            let choice = Choice {
                current: Some(2),
                candidates: &cands,
                decision: d,
            };
            assert_eq!(s.pick_thread(&choice), 2);
        }
    }

    /// The strategy finds the lost update in the bundled bank example, and
    /// the failing run replays from its recorded decisions alone.
    #[test]
    fn finds_the_bank_race_and_replays() {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../targets/race_bank.c");
        let t = heddle::target::load(&source, &[]).expect("build race_bank.c");
        let program = Program::new(&t.bytes, &Default::default()).expect("instrument");
        let base = RunConfig {
            args: vec!["2".into(), "2".into()],
            ..RunConfig::default()
        };
        let (seed, r) = hunt(&program, &base, 0.1, 0..200)
            .expect("runs")
            .expect("Sticky finds the lost update within 200 seeds");
        assert_eq!(r.verdict.kind(), "assertion");
        assert_eq!(r.strategy, "sticky:0.1");
        let again = program
            .run(&RunConfig {
                seed,
                strategy: "replay".into(),
                forced: r.decisions.clone(),
                strict: true,
                ..base.clone()
            })
            .expect("replay");
        assert_eq!(again.verdict.signature(), r.verdict.signature());
        assert!(again.divergence.is_none());
    }
}
