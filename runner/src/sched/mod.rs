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
//! One strategy per file: [`random`], [`pct`], [`sites`], [`rr`], [`pos`],
//! [`surw`], [`delay`], [`ipct`], [`rff`] (which learns from earlier runs),
//! [`exec`] (a strategy in another process) and [`replay`]; [`stall`] adds time choices to any of them
//! (`pos+stall`). Adding a strategy touches its file and [`parse_with`].
//!
//! # Writing a strategy
//!
//! The trait is a public API: a strategy can live in its own crate and run
//! through [`crate::runtime::Program::run_with_strategy`]. Here is a complete
//! one — "run the thread with the lowest tid that is not spinning, except
//! at one random decision per run" — and a run with it:
//!
//! ```no_run
//! use heddle::model::Tid;
//! use heddle::runtime::{Program, RunConfig};
//! use heddle::sched::{Choice, Rng, Strategy};
//!
//! struct OneSwitch {
//!     rng: Rng,
//!     at: u64,
//! }
//!
//! impl Strategy for OneSwitch {
//!     fn spec(&self) -> String {
//!         "one-switch".into()
//!     }
//!     fn reset(&mut self, seed: u64) {
//!         // Everything random derives from the seed: runs are reproducible.
//!         self.rng = Rng::new(seed, 1);
//!         self.at = self.rng.below(50);
//!     }
//!     fn pick_thread(&mut self, choice: &Choice) -> usize {
//!         if choice.decision == self.at {
//!             return choice.candidates.len() - 1;
//!         }
//!         choice.candidates.iter().position(|c| !c.spinning).unwrap_or(0)
//!     }
//!     fn pick_value(&mut self, _tid: Tid, n: u32) -> u32 {
//!         self.rng.below(n as u64) as u32
//!     }
//! }
//!
//! # fn main() -> anyhow::Result<()> {
//! let bytes = std::fs::read("target.wasm")?;
//! let program = Program::new(&bytes, &Default::default())?;
//! for seed in 0..100 {
//!     let cfg = RunConfig { seed, ..RunConfig::default() };
//!     let strategy = Box::new(OneSwitch { rng: Rng::new(0, 1), at: 0 });
//!     let r = program.run_with_strategy(&cfg, strategy)?;
//!     if !r.verdict.is_pass() {
//!         println!("seed {seed}: {}", r.verdict.summary());
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The contract:
//! * [`Strategy::reset`] starts each run; the strategy must forget the
//!   previous run. After it, the same seed and the same sequence of choices
//!   must give the same answers (no clocks, no hash-map iteration order, no
//!   state carried over between runs). That makes every run replayable: the
//!   runtime records the answers as the run's decisions θ, and a replay
//!   follows θ without asking the strategy at all.
//! * [`Strategy::pick_thread`] is called only when at least two threads are
//!   enabled; steps with a single enabled thread are not shown. Candidates
//!   are in ascending tid order. An index out of range is clamped.
//! * [`Strategy::spec`] names the strategy in reports and replay files.
//!
//! `examples/strategy-example/` in the repository is the same kind of
//! strategy as a separate crate, with tests that run it on a bundled target.

pub mod delay;
pub mod exec;
pub mod ipct;
pub mod pct;
pub mod plan;
pub mod pos;
pub mod random;
pub mod replay;
pub mod rff;
pub mod rng;
pub mod rr;
pub mod sites;
pub mod stall;
pub mod surw;

use crate::model::{Pending, Tid};
use anyhow::{bail, Result};

pub use rng::Rng;

/// An enabled thread at a decision point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// The thread.
    pub tid: Tid,
    /// What it will do when chosen.
    pub pending: Pending,
    /// It was just seen spinning (it re-read a location nobody wrote since,
    /// repeated a read-modify-write that changed nothing, or ran out of
    /// preemption budget in a loop): probably waiting for another thread.
    /// Reported at one decision only; see [`Spinners`] to remember it.
    pub spinning: bool,
}

/// The threads seen spinning that have not run since: what a strategy keeps
/// when it must hold a spinner back until it runs again (two spinners whose
/// hints alternate would otherwise take turns while the thread they wait
/// for starves).
#[derive(Debug, Clone, Default)]
pub struct Spinners(std::collections::BTreeSet<Tid>);

impl Spinners {
    /// Takes in the hints of a decision's candidates (and forgets threads
    /// that are no longer enabled).
    pub fn observe(&mut self, cands: &[Candidate]) {
        self.0
            .extend(cands.iter().filter(|c| c.spinning).map(|c| c.tid));
        self.0.retain(|t| cands.iter().any(|c| c.tid == *t));
    }

    /// Whether `tid` spins.
    pub fn contains(&self, tid: Tid) -> bool {
        self.0.contains(&tid)
    }

    /// `tid` was chosen to run.
    pub fn ran(&mut self, tid: Tid) {
        self.0.remove(&tid);
    }

    /// Forgets everything (a new run).
    pub fn clear(&mut self) {
        self.0.clear();
    }
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

/// A scheduling strategy. See the module documentation for the contract and
/// a worked example.
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
    /// Why the strategy could not do its job in this run (an external
    /// strategy process died or replied nonsense): the run is then an error,
    /// not a verdict. Checked when the run ends.
    fn failure(&self) -> Option<String> {
        None
    }
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
    /// The longest wait the strategy may let pass at once (0: it makes no
    /// time choices). The runtime calls [`Strategy::pick_stall`] when a
    /// thread starts to wait on time for at most this long and its deadline
    /// is the earliest one pending. Read once, when a run starts.
    fn max_stall_ns(&self) -> u64 {
        0
    }
    /// `tid` starts to wait `wait_ns` of virtual time (a sleep, or a timed
    /// wait's timeout). `true` lets that time pass now: every other thread
    /// was delayed that long, the clock jumps to the deadline and `tid` is
    /// ready again at once. Recorded as a value decision (1 = stall). Only
    /// called for waits within `max_stall_ns`.
    fn pick_stall(&mut self, _tid: Tid, _wait_ns: u64) -> bool {
        false
    }
    /// Gives a strategy that learns ([`learns`]) what earlier runs of its
    /// campaign showed. Called before [`Strategy::reset`].
    fn learn_from(&mut self, _corpus: std::sync::Arc<rff::Corpus>) {}
    /// What this run showed, for the corpus of later runs (the reads-from
    /// pairs of [`rff`]); called once when the run ends.
    fn take_feedback(&mut self) -> rff::Feedback {
        rff::Feedback::default()
    }
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

/// The error a run ends with when its strategy could not do its job
/// ([`Strategy::failure`]): a problem of the setup, not of the program, so a
/// campaign stops on it instead of counting it as a failing run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrategyFailed(pub String);

impl std::fmt::Display for StrategyFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StrategyFailed {}

/// What earlier runs tell a strategy about a program (see
/// [`crate::runtime::Program::calibrate`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Estimate {
    /// Thread decisions per run (PCT's `k`, the delay horizon).
    pub steps: u64,
    /// Mean thread decisions won per thread id (SURW's event counts); empty
    /// when not measured.
    pub per_thread: Vec<u64>,
}

impl Estimate {
    /// The estimate from the decisions of probe runs (the first run gives
    /// `steps`, all of them `per_thread`).
    pub fn from_runs(runs: &[Vec<crate::trace::Decision>]) -> Estimate {
        Estimate {
            steps: runs.first().map(|r| r.len() as u64).unwrap_or(0).max(1),
            per_thread: surw::Surw::estimate(runs),
        }
    }
}

/// Parses a strategy spec; see [`parse_with`]. `steps_estimate` is the
/// number of decisions per run for strategies that need one.
pub fn parse(spec: &str, steps_estimate: u64) -> Result<Box<dyn Strategy>> {
    parse_with(
        spec,
        &Estimate {
            steps: steps_estimate,
            per_thread: Vec::new(),
        },
    )
}

/// The strategy specs [`parse_with`] accepts, for error messages and help.
pub const SPECS: &str =
    "random, pct:D, sites:D, ipct:D:B, pos, surw, delay:K, rr:P, rff, exec:PROGRAM or replay, each optionally +stall";

fn int_param<T: std::str::FromStr + PartialOrd>(
    spec: &str,
    what: &str,
    text: &str,
    min: T,
) -> Result<T> {
    match text.parse::<T>() {
        Ok(v) if v >= min => Ok(v),
        _ => bail!("bad {what} `{text}` in `{spec}`"),
    }
}

/// Parses a strategy spec: `random`, `pct[:d[:k=N]]`, `ipct[:D[:B[:k=N]]]`,
/// `pos`, `surw[:n=E0,E1,…]`, `delay[:k[:n=N]]`, `rr[:p]`, `exec:PROGRAM`,
/// `replay`. Parameters left out that depend on the program (`k=`, `n=`)
/// come from `est`.
pub fn parse_with(spec: &str, est: &Estimate) -> Result<Box<dyn Strategy>> {
    if let Some(inner) = spec.strip_suffix(stall::SUFFIX) {
        if inner.ends_with(stall::SUFFIX) || inner.starts_with("exec:") || inner == "replay" {
            bail!(
                "bad strategy `{spec}`: +stall goes once after a built-in strategy, e.g. pos+stall"
            );
        }
        return Ok(Box::new(stall::Stall::new(parse_with(inner, est)?)));
    }
    if let Some(command) = spec.strip_prefix("exec:") {
        if command.trim().is_empty() {
            bail!("bad strategy `{spec}`: exec needs a program, e.g. exec:./my-strategy");
        }
        return Ok(Box::new(exec::Exec::new(command)));
    }
    let mut parts = spec.split(':');
    let name = parts.next().unwrap_or_default();
    let args: Vec<&str> = parts.collect();
    // `key=value` parameters after the positional ones.
    let keyed = |from: usize, key: &str, default: u64| -> Result<u64> {
        let mut v = default;
        for a in args.iter().skip(from) {
            match a
                .strip_prefix(key)
                .and_then(|r| r.strip_prefix('='))
                .and_then(|x| x.parse::<u64>().ok())
            {
                Some(x) if x >= 1 => v = x,
                _ => bail!("bad parameter `{a}` in `{spec}` (expected {key}=N)"),
            }
        }
        Ok(v)
    };
    let steps = est.steps.max(1);
    Ok(match name {
        "random" if args.is_empty() => Box::new(random::Random::new()),
        "pct" | "sites" => {
            let depth = match args.first() {
                None => 3,
                Some(d) => d.parse::<u32>().ok().filter(|d| *d >= 1).ok_or_else(|| {
                    let what = if name == "pct" { "PCT" } else { name };
                    anyhow::anyhow!("bad {what} depth `{d}` in `{spec}` (expected an integer >= 1)")
                })?,
            };
            let mut k = steps;
            for a in args.iter().skip(1) {
                match a.strip_prefix("k=").and_then(|v| v.parse::<u64>().ok()) {
                    Some(v) if v >= 1 => k = v,
                    _ => bail!("bad {name} parameter `{a}` in `{spec}` (expected k=N)"),
                }
            }
            if name == "sites" {
                Box::new(sites::Sites::new(depth, k))
            } else {
                Box::new(pct::Pct::new(depth, k))
            }
        }
        "ipct" => {
            let positional = args.iter().take_while(|a| !a.contains('=')).count();
            if positional > 2 {
                bail!("bad strategy `{spec}`: ipct takes a maximum depth and a block size");
            }
            let depth = match args.first().filter(|_| positional >= 1) {
                None => 4,
                Some(d) => int_param(spec, "ipct depth", d, 1u32)?,
            };
            let block = match args.get(1).filter(|_| positional >= 2) {
                None => 10,
                Some(b) => int_param(spec, "ipct block size", b, 1u64)?,
            };
            let k = keyed(positional, "k", steps)?;
            Box::new(ipct::Ipct::new(depth, block, k))
        }
        "pos" if args.is_empty() => Box::new(pos::Pos::new()),
        "rff" if args.is_empty() => Box::new(rff::Rff::new(Default::default())),
        "surw" => {
            let estimates = match args.as_slice() {
                [] => est.per_thread.clone(),
                [a] => {
                    let list = a.strip_prefix("n=").ok_or_else(|| {
                        anyhow::anyhow!("bad surw parameter `{a}` in `{spec}` (expected n=E0,E1,…)")
                    })?;
                    list.split(',')
                        .map(|x| int_param(spec, "surw estimate", x, 1u64))
                        .collect::<Result<Vec<_>>>()?
                }
                _ => bail!("bad strategy `{spec}`: surw takes one parameter, n=E0,E1,…"),
            };
            Box::new(surw::Surw::new(estimates))
        }
        "delay" => {
            let positional = args.iter().take_while(|a| !a.contains('=')).count();
            if positional > 1 {
                bail!("bad strategy `{spec}`: delay takes a delay bound and n=N");
            }
            let k = match args.first().filter(|_| positional >= 1) {
                None => 2,
                Some(k) => int_param(spec, "delay bound", k, 0u32)?,
            };
            let n = keyed(positional, "n", steps)?;
            Box::new(delay::Delay::new(k, n))
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
        _ => bail!("unknown strategy `{spec}` (expected {SPECS})"),
    })
}

/// Whether the strategy `spec` learns from earlier runs: a campaign then
/// feeds it a corpus ([`Strategy::learn_from`], `campaign::feedback`).
pub fn learns(spec: &str) -> bool {
    let spec = spec.strip_suffix(stall::SUFFIX).unwrap_or(spec);
    spec == "rff"
}

/// `spec` without the parameters calibration fills in (`k=`, `n=`), for
/// one-line summaries: `surw:n=3,40,40+stall` is shown as `surw+stall`.
pub fn short_spec(spec: &str) -> String {
    let (base, stall) = match spec.strip_suffix(stall::SUFFIX) {
        Some(b) => (b, stall::SUFFIX),
        None => (spec, ""),
    };
    if base.starts_with("exec:") {
        return spec.to_string();
    }
    let kept: Vec<&str> = base
        .split(':')
        .take_while(|p| !p.starts_with("k=") && !p.starts_with("n="))
        .collect();
    format!("{}{stall}", kept.join(":"))
}

/// Whether `spec` names a strategy whose parameters depend on a step
/// estimate (see [`Estimate`]).
pub fn needs_estimate(spec: &str) -> bool {
    let spec = spec.strip_suffix(stall::SUFFIX).unwrap_or(spec);
    match strategy_name(spec) {
        "pct" | "ipct" | "sites" => !spec.contains("k="),
        "delay" => !spec.contains("n="),
        "surw" => !spec.contains("n="),
        _ => false,
    }
}

/// Whether `spec` draws change points from the first `k` decisions of a
/// run (PCT and its variants) and leaves `k` to the estimate: its own runs
/// may be longer than random walk's, so calibration also measures one.
pub fn draws_change_points(spec: &str) -> bool {
    matches!(strategy_name(spec), "pct" | "ipct" | "sites") && needs_estimate(spec)
}

/// The strategy's name: `spec` up to its first parameter or `+stall`.
fn strategy_name(spec: &str) -> &str {
    spec.split([':', '+']).next().unwrap_or_default()
}

/// The `k` of a strategy that draws change points, for runs of about
/// `decisions` decisions: half as much again. Some change points then fall
/// past the end of a run, so a search of depth `d` also runs schedules of
/// smaller depth; the bugs of the bundled targets that need only one
/// change point late in the run (a checker created last) were found two to
/// three times as often as with `k` = the run's length, measured with
/// `sites:3` (benches/HISTORY.md, "The thread-list lock as a wait").
pub fn change_point_range(decisions: u64) -> u64 {
    decisions.saturating_mul(3) / 2
}

/// How many probe runs the estimate for `spec` needs (SURW's per-thread
/// counts are a mean over several runs; a step count needs one).
pub fn probe_runs(spec: &str) -> u64 {
    if spec.starts_with("surw") {
        surw::PROBE_RUNS
    } else {
        1
    }
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
        assert_eq!(parse("pos", 1).unwrap().spec(), "pos");
        assert_eq!(parse("delay", 90).unwrap().spec(), "delay:2:n=90");
        assert_eq!(parse("delay:3:n=7", 90).unwrap().spec(), "delay:3:n=7");
        assert_eq!(parse("ipct", 90).unwrap().spec(), "ipct:4:10:k=90");
        assert_eq!(parse("ipct:3:5:k=9", 90).unwrap().spec(), "ipct:3:5:k=9");
        assert_eq!(parse("surw:n=3,40", 1).unwrap().spec(), "surw:n=3,40");
        let est = Estimate {
            steps: 10,
            per_thread: vec![2, 5],
        };
        assert_eq!(parse_with("surw", &est).unwrap().spec(), "surw:n=2,5");
        assert_eq!(parse("exec:./s.py", 1).unwrap().spec(), "exec:./s.py");
        assert_eq!(parse("sites", 40).unwrap().spec(), "sites:3:k=40");
        assert_eq!(parse("sites:2:k=9", 40).unwrap().spec(), "sites:2:k=9");
        assert_eq!(parse("pos+stall", 1).unwrap().spec(), "pos+stall");
        let stalled = parse("pct:2+stall", 30).unwrap();
        assert_eq!(stalled.spec(), "pct:2:k=30+stall");
        assert_eq!(stalled.max_stall_ns(), stall::MAX_STALL_NS);
        assert_eq!(parse(&stalled.spec(), 1).unwrap().spec(), stalled.spec());
        assert_eq!(parse("pos", 1).unwrap().max_stall_ns(), 0);
        assert!(needs_estimate("sites+stall") && needs_estimate("surw+stall"));
        assert_eq!(probe_runs("surw+stall"), surw::PROBE_RUNS);
        assert_eq!(short_spec("surw:n=3,40,40+stall"), "surw+stall");
        assert_eq!(parse("rff+stall", 1).unwrap().spec(), "rff+stall");
        assert!(learns("rff") && learns("rff+stall") && !learns("pos"));
        assert_eq!(short_spec("sites:3:k=68+stall"), "sites:3+stall");
        assert_eq!(short_spec("delay:2:n=9"), "delay:2");
        assert_eq!(short_spec("exec:./a:k=1"), "exec:./a:k=1");
        for spec in ["pct:3", "ipct", "delay:1", "surw"] {
            assert!(needs_estimate(spec), "{spec}");
        }
        for spec in ["pct:3:k=2", "delay:1:n=4", "surw:n=1", "pos", "random"] {
            assert!(!needs_estimate(spec), "{spec}");
        }
        for spec in ["pct:3", "sites+stall", "ipct"] {
            assert!(draws_change_points(spec), "{spec}");
        }
        for spec in [
            "pct:3:k=2",
            "sites:3:k=9+stall",
            "delay:1",
            "surw",
            "random",
        ] {
            assert!(!draws_change_points(spec), "{spec}");
        }
        for bad in [
            "nope",
            "pct:0",
            "pct:x",
            "rr:2",
            "random:1",
            "pct:3:q=1",
            "pos:1",
            "delay:x",
            "delay:1:2",
            "delay:1:n=0",
            "ipct:0",
            "ipct:2:0",
            "ipct:1:2:3",
            "surw:n=",
            "surw:n=1,x",
            "surw:3",
            "exec:",
            "exec:  ",
            "sites:0",
            "pos+stall+stall",
            "replay+stall",
            "exec:x+stall",
            "rff:1",
            "+stall",
        ] {
            assert!(parse(bad, 1).is_err(), "{bad}");
        }
    }
}
