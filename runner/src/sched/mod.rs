//! Scheduling strategies.
//!
//! A [`Strategy`] is a pure oracle: at a yield point where more than one
//! thread is enabled it sees the candidates — each enabled thread with the
//! event it is about to perform — and answers which one runs next; it also
//! answers value choices (which waiter a `notify` wakes, `heddle_choose`). It
//! never touches wasmtime, the guest's memory or the clock. Everything a
//! strategy knows comes from its seed and the choices it is shown, so a run
//! is a pure function of (module, config, seed).
//!
//! One strategy per file: [`random`], [`pct`], [`rr`], [`replay`]. Adding a
//! strategy touches its file and [`parse`].

pub mod pct;
pub mod plan;
pub mod random;
pub mod replay;
pub mod rng;
pub mod rr;

use crate::model::{Pending, Tid};
use anyhow::{bail, Result};

pub use rng::Rng;

/// An enabled thread at a decision point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub tid: Tid,
    /// What it will do when chosen.
    pub pending: Pending,
    /// It re-read a location nobody wrote since its previous read, or it ran
    /// out of preemption budget: probably spinning, waiting for another thread.
    pub spinning: bool,
}

/// A thread decision to make.
#[derive(Debug)]
pub struct Choice<'a> {
    /// The thread that reached the yield point (None when it blocked or ended).
    pub current: Option<Tid>,
    /// Enabled threads, in ascending tid order (at least two).
    pub candidates: &'a [Candidate],
    /// Number of thread decisions made so far in this run.
    pub decision: u64,
}

/// A scheduling strategy. See the module documentation.
pub trait Strategy: Send {
    /// The canonical spec, e.g. `pct:3:k=800`: parsing it gives the same strategy.
    fn spec(&self) -> String;
    /// Starts a run with `seed`. Called before any other method of the run.
    fn reset(&mut self, seed: u64);
    /// Picks one of `choice.candidates` (returns its index).
    fn pick_thread(&mut self, choice: &Choice) -> usize;
    /// Picks a value in `[0, n)` (n ≥ 2) for the thread `tid`.
    fn pick_value(&mut self, tid: Tid, n: u32) -> u32;
    /// A thread was created (strategies with per-thread state use this).
    fn on_spawn(&mut self, _tid: Tid) {}
    /// Whether the strategy decides on the run's state: then the runtime
    /// calls [`Strategy::pick_thread_in`] instead of `pick_thread` and
    /// [`Strategy::on_event`] at every step. Read once, when a run starts.
    fn observes_run(&self) -> bool {
        false
    }
    /// [`Strategy::pick_thread`] with a read-only view of the run (guest
    /// memory, thread names, labels). Only called when `observes_run`.
    fn pick_thread_in(&mut self, choice: &Choice, _view: &dyn RunView) -> usize {
        self.pick_thread(choice)
    }
    /// `tid` executes `event` now — at every step, also where no decision was
    /// needed; memory is as it was just before the event. Only called when
    /// `observes_run`.
    fn on_event(&mut self, _tid: Tid, _event: &Pending, _view: &dyn RunView) {}
}

/// What a strategy that [observes the run](Strategy::observes_run) may read:
/// guest memory and the names threads and events were given. Read-only, so
/// a strategy still cannot change the run except through its choices.
pub trait RunView {
    /// `len` ≤ 8 bytes of guest memory at `addr`, little-endian (None when
    /// out of bounds).
    fn read(&self, addr: u32, len: u32) -> Option<u64>;
    /// The name `tid` gave itself with `heddle_thread_name`.
    fn thread_name(&self, tid: Tid) -> Option<&str>;
    /// The latest `heddle_event` label of `tid`.
    fn last_label(&self, tid: Tid) -> Option<&str>;
}

/// Parses a strategy spec: `random`, `pct[:d[:k=N]]`, `rr[:p]`, `replay`.
/// `pct` without `k=` uses `steps_estimate` (the caller measures it).
pub fn parse(spec: &str, steps_estimate: u64) -> Result<Box<dyn Strategy>> {
    let mut parts = spec.split(':');
    let name = parts.next().unwrap_or_default();
    let args: Vec<&str> = parts.collect();
    Ok(match name {
        "random" if args.is_empty() => Box::new(random::Random::new()),
        "pct" => {
            let depth = match args.first() {
                None => 3,
                Some(d) => d.parse::<u32>().ok().filter(|d| *d >= 1).ok_or_else(|| {
                    anyhow::anyhow!("bad PCT depth `{d}` in `{spec}` (expected an integer >= 1)")
                })?,
            };
            let mut k = steps_estimate.max(1);
            for a in args.iter().skip(1) {
                match a.strip_prefix("k=").and_then(|v| v.parse::<u64>().ok()) {
                    Some(v) if v >= 1 => k = v,
                    _ => bail!("bad PCT parameter `{a}` in `{spec}` (expected k=N)"),
                }
            }
            Box::new(pct::Pct::new(depth, k))
        }
        "rr" => {
            let p = match args.first() {
                None => 0.2,
                Some(p) => p
                    .parse::<f64>()
                    .ok()
                    .filter(|p| (0.0..=1.0).contains(p))
                    .ok_or_else(|| {
                        anyhow::anyhow!("bad rr probability `{p}` in `{spec}` (expected 0..1)")
                    })?,
            };
            if args.len() > 1 {
                bail!("bad strategy `{spec}`: rr takes one parameter");
            }
            Box::new(rr::RoundRobin::new(p))
        }
        "replay" if args.is_empty() => Box::new(replay::Continue),
        _ => bail!("unknown strategy `{spec}` (expected random, pct:D, rr:P or replay)"),
    })
}

/// Whether `spec` names a strategy whose parameters depend on a step estimate.
pub fn needs_estimate(spec: &str) -> bool {
    spec.starts_with("pct") && !spec.contains("k=")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        assert_eq!(parse("random", 10).unwrap().spec(), "random");
        assert_eq!(parse("pct:3", 500).unwrap().spec(), "pct:3:k=500");
        assert_eq!(parse("pct:2:k=7", 500).unwrap().spec(), "pct:2:k=7");
        assert_eq!(parse("rr", 1).unwrap().spec(), "rr:0.2");
        assert_eq!(parse("rr:0.5", 1).unwrap().spec(), "rr:0.5");
        for bad in ["nope", "pct:0", "pct:x", "rr:2", "random:1", "pct:3:q=1"] {
            assert!(parse(bad, 1).is_err(), "{bad}");
        }
    }
}
