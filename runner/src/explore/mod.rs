//! Systematic exploration of schedules (`heddle explore`).
//!
//! **Stateless DFS over decisions** (after VeriSoft, Godefroid POPL'97): every
//! schedule is a fresh run of the deterministic core that replays a prefix of
//! decisions ([`RunConfig::forced`]) and then continues with a deterministic
//! default scheduler (keep the running thread, else round-robin). Each run
//! records what every decision chose from, so the explorer knows the
//! alternatives at each point; backtracking changes the deepest decision
//! that still has an alternative to explore and runs again.
//!
//! Options:
//! * **Preemption bounding** (Musuvathi & Qadeer, "Iterative context bounding
//!   for systematic testing of multithreaded programs", PLDI'07): schedules
//!   with at most K preemptions — switches away from a thread that could
//!   have gone on (switching away from a thread flagged as spinning is free).
//! * **Delay bounding** (Emmi, Qadeer & Rakamarić, "Delay-bounded
//!   scheduling", POPL'11): the default scheduler is round-robin; choosing the
//!   thread `d` places after the one it would pick costs `d` delays; at most
//!   K delays per schedule.
//! * **Source-DPOR** (Abdulla, Aronis, Jonsson & Sagonas, "Optimal dynamic
//!   partial order reduction", POPL'14, Algorithm 1) with sleep sets
//!   (Godefroid, LNCS 1032, 1996): after each run the races of the run are
//!   computed from a happens-before relation built from conflicts between
//!   events; for each race `e ⋖ e'` an initial of `notdep(e).e'` is added to
//!   the backtrack set of the state before `e`. One schedule is explored per
//!   Mazurkiewicz trace (plus sleep-set-blocked ones), which is enough for
//!   every final state, every deadlock and every assertion. A sleeper is a
//!   thread together with the footprint of the *step* it took from the
//!   state where it was explored, as the run that explored it recorded it:
//!   all its events up to the next decision that may branch. Under
//!   [`Preempt::User`] a step runs through library code and is many events
//!   long; checking only its first event would wake too few sleepers (and
//!   an allocator call's pending event does not show the block it writes).
//!
//! **Spinning.** A running thread flagged as spinning (it re-reads a
//! location nobody wrote since its previous read) is not explored as the
//! one to continue when another thread can run: the re-read would return the
//! same value, so the schedules it leads to only spin longer. Without this a
//! user-code spin loop makes every unbounded search run to the step budget.
//!
//! **Counting as a user counts.** Raw decision sequences include library
//! atomics (malloc's lock, the thread list, futex spins) and thread start-up.
//! The *user interleavings* of a schedule are the orders of its user-code
//! accesses to shared locations (an address some two threads touch in that
//! run) that are consistent with its happens-before order: every such order
//! is the user-visible projection of a schedule equivalent to the one run.
//! The explorer counts distinct projections (sequences of (thread, site)) over
//! all explored schedules, so the count is the same with and without
//! reduction.

use crate::instrument::{SiteId, SiteKind};
use crate::model::hb::VectorClock;
use crate::model::{EventKind, Pending, Tid};
use crate::runtime::{Program, RunConfig, RunResult};
use crate::sched::{Candidate, Choice, Spinners, Strategy};
use crate::text::Cmp;
use crate::trace::{Decision, Event};
use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A bound on the schedules explored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Every schedule.
    Unbounded,
    /// At most K preemptions per schedule (PLDI'07).
    Preemptions(u32),
    /// At most K delays per schedule (POPL'11).
    Delays(u32),
}

impl std::str::FromStr for Bound {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Bound> {
        if s == "none" {
            return Ok(Bound::Unbounded);
        }
        let (k, v) = s.split_once('=').with_context(|| {
            format!("bad bound `{s}` (expected preemptions=K, delays=K or none)")
        })?;
        let n: u32 = v
            .parse()
            .with_context(|| format!("bad bound `{s}`: `{v}` is not a number"))?;
        match k {
            "preemptions" => Ok(Bound::Preemptions(n)),
            "delays" => Ok(Bound::Delays(n)),
            _ => bail!("bad bound `{s}` (expected preemptions=K, delays=K or none)"),
        }
    }
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bound::Unbounded => f.write_str("none"),
            Bound::Preemptions(k) => write!(f, "preemptions={k}"),
            Bound::Delays(k) => write!(f, "delays={k}"),
        }
    }
}

/// Partial-order reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    /// Every decision sequence.
    None,
    /// Source-DPOR with sleep sets (POPL'14).
    Dpor,
}

impl std::fmt::Display for Reduction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reduction::None => "none",
            Reduction::Dpor => "dpor",
        })
    }
}

impl std::str::FromStr for Reduction {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Reduction> {
        match s {
            "none" => Ok(Reduction::None),
            "dpor" => Ok(Reduction::Dpor),
            _ => bail!("unknown reduction `{s}` (expected none or dpor)"),
        }
    }
}

/// An invariant every schedule must satisfy: comparisons of final global
/// values (or `exit`, the exit code) with integers, joined by `&&`,
/// e.g. `x == 5` or `x >= 2 && exit == 0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expect {
    text: String,
    clauses: Vec<(String, Cmp, i64)>,
}

impl Expect {
    /// Parses a predicate (a one-line error for anything else).
    pub fn parse(text: &str) -> Result<Expect> {
        let mut clauses = Vec::new();
        for part in text.split("&&") {
            let part = part.trim();
            let Some((name, op, value)) = crate::text::split_comparison(part) else {
                bail!("bad --expect `{text}`: `{part}` is not VAR OP INTEGER (OP is ==, !=, <, <=, >, >=)");
            };
            let name = name.to_string();
            let ok_name = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':' || c == '.');
            if !ok_name {
                bail!("bad --expect `{text}`: `{name}` is not a variable name");
            }
            let value = crate::text::parse_int(value)
                .with_context(|| format!("bad --expect `{text}`: `{value}` is not an integer"))?;
            clauses.push((name, op, value));
        }
        Ok(Expect {
            text: text.trim().to_string(),
            clauses,
        })
    }

    /// The global variables the predicate names (`exit` is the exit code).
    pub fn variables(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .clauses
            .iter()
            .filter(|(n, _, _)| n != "exit")
            .map(|(n, _, _)| n.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Whether a run satisfies the predicate (an unknown value does not).
    pub fn holds(&self, r: &RunResult) -> bool {
        self.clauses.iter().all(|(name, op, want)| {
            let got = if name == "exit" {
                exit_code(r).map(|c| c as i64)
            } else {
                r.observed
                    .iter()
                    .find(|o| &o.name == name)
                    .and_then(|o| o.value)
            };
            let Some(got) = got else { return false };
            op.holds(got, *want)
        })
    }
}

impl std::fmt::Display for Expect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// The exit code of a run that exited.
fn exit_code(r: &RunResult) -> Option<i32> {
    match r.verdict {
        crate::verdict::Verdict::Pass { exit_code } => Some(exit_code),
        crate::verdict::Verdict::Exit { code, .. } => Some(code),
        _ => None,
    }
}

/// What to explore and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// Which schedules to explore (all, or a preemption/delay budget).
    pub bound: Bound,
    /// Whether to skip schedules equivalent to explored ones.
    pub reduction: Reduction,
    /// Stop after this many schedules.
    pub max_schedules: Option<u64>,
    /// Global variables whose final values are part of the outcome.
    pub observe: Vec<String>,
    /// The captured stdout is part of the outcome.
    pub observe_output: bool,
    /// An invariant over final values: a schedule that breaks it fails.
    pub expect: Option<Expect>,
    /// Where a running thread may be preempted.
    pub preempt: Preempt,
}

/// Where a running thread may be preempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preempt {
    /// Only at yield points in user code: library calls (malloc, the locks
    /// inside `pthread_create`, a mutex's fast path) run without preemption
    /// unless they block, so the other threads run where the program itself
    /// touches shared state, blocks or ends. This is the scheduling model of
    /// a user who reads the source (and of CHESS, which preempts only at
    /// synchronization calls).
    User,
    /// At every yield point, library atomics and thread start-up included
    /// (the raw decision space).
    All,
}

impl std::str::FromStr for Preempt {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Preempt> {
        match s {
            "user" => Ok(Preempt::User),
            "all" => Ok(Preempt::All),
            _ => bail!("unknown preemption points `{s}` (expected user or all)"),
        }
    }
}

/// A distinct outcome: verdict, exit code and the chosen projections.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct OutcomeKey {
    /// Observed globals, in the order given: name and value (`?` when unknown).
    pub observed: Vec<(String, String)>,
    /// The verdict signature (`pass`, `assertion@main (x.c:3)`, …).
    pub verdict: String,
    /// The exit code, when the program exited.
    pub exit_code: Option<i32>,
    /// Captured stdout, when it is observed.
    pub output: Option<String>,
    /// Whether the schedule broke the invariant (a failing verdict or `--expect`).
    pub failing: bool,
}

impl std::fmt::Display for OutcomeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = self
            .observed
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        match (self.verdict.as_str(), self.exit_code) {
            ("pass", Some(c)) => parts.push(format!("pass (exit {c})")),
            (v, _) => parts.push(v.to_string()),
        }
        if let Some(o) = &self.output {
            parts.push(format!("stdout {:?}", o));
        }
        f.write_str(&parts.join("  "))
    }
}

/// How often an outcome occurred.
#[derive(Debug, Clone, Default)]
pub struct OutcomeStats {
    /// Schedules (runs) that ended with it.
    pub schedules: u64,
    /// Distinct user interleavings that end with it.
    pub interleavings: u64,
    seen: BTreeSet<[u8; 16]>,
}

/// One access of a user interleaving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserEvent {
    /// The thread that made the access.
    pub tid: Tid,
    /// The instrumented instruction (its source line through the site table).
    pub site: SiteId,
    /// Read, write or read-modify-write.
    pub kind: EventKind,
    /// The guest address accessed.
    pub addr: u32,
    /// The value in memory right after the access, when known.
    pub value: Option<u64>,
}

/// The first schedule that broke the invariant.
#[derive(Debug, Clone)]
pub struct Failure {
    /// 1-based number of the schedule in exploration order.
    pub schedule: u64,
    /// The run (its decisions are the replay file's schedule).
    pub result: RunResult,
    /// Its user interleaving (as it ran).
    pub interleaving: Vec<UserEvent>,
    /// Why it fails: the verdict, or the `--expect` predicate.
    pub reason: String,
}

impl Failure {
    /// Runs this schedule again with diagnostics on (stacks where threads
    /// block; the decisions are the same, so is the run) and writes its
    /// replay file, with the module beside it, into `out_dir` as
    /// `STEM-explore-VERDICT-N.toml`. Returns the file and the detailed run.
    pub fn record(
        &self,
        target: &crate::target::Target,
        program: &Program,
        base: &RunConfig,
        out_dir: &std::path::Path,
    ) -> Result<(std::path::PathBuf, RunResult)> {
        let cfg = RunConfig {
            forced: self.result.decisions.clone(),
            strict: true,
            diagnostics: true,
            observe: self
                .result
                .observed
                .iter()
                .map(|o| o.name.clone())
                .collect(),
            ..base.clone()
        };
        let detailed = program.run(&cfg)?;
        if detailed.decisions != self.result.decisions || detailed.divergence.is_some() {
            return Err(crate::internal!(
                "the failing schedule did not repeat with diagnostics on"
            ));
        }
        let mut file = crate::reproduce::record(target, program, base, base.seed, &detailed)?;
        let stem = target
            .given
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "target".into());
        let path = out_dir.join(format!(
            "{stem}-explore-{}-{}.toml",
            detailed.verdict.kind(),
            self.schedule
        ));
        crate::reproduce::save(&path, &mut file, &target.bytes)?;
        Ok((path, detailed))
    }
}

/// Progress of an exploration, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Schedules run so far.
    pub schedules: u64,
    /// Estimated total (Knuth's estimator over the paths run so far).
    pub estimate: u64,
    /// Failing schedules so far.
    pub failing: u64,
}

/// The result of an exploration.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Schedules run (distinct raw decision sequences).
    pub schedules: u64,
    /// Distinct user interleavings covered.
    pub user_interleavings: u64,
    /// The user count stopped at [`MAX_USER_INTERLEAVINGS`] (a lower bound).
    pub user_capped: bool,
    /// Outcomes with their counts.
    pub outcomes: BTreeMap<OutcomeKey, OutcomeStats>,
    /// The first schedule (in exploration order) that broke the invariant.
    pub first_failure: Option<Failure>,
    /// Schedules that broke the invariant.
    pub failing: u64,
    /// The search ran out of schedules (not stopped by the cap or an interrupt).
    pub complete: bool,
    /// Alternatives not explored because of the bound (at the decision
    /// points the explored schedules reached).
    pub pruned: u64,
    /// Stopped by the interrupt flag.
    pub interrupted: bool,
    /// Longest schedule, in decisions.
    pub max_decisions: usize,
    /// Schedules whose every continuation was in the sleep set (DPOR).
    pub sleep_blocked: u64,
}

impl Report {
    /// No bound, no cap, no interrupt, and the search finished: the outcomes
    /// are all the outcomes of this input.
    pub fn exhaustive(&self, opts: &Options) -> bool {
        self.complete && opts.bound == Bound::Unbounded
    }
}

/// Largest number of distinct user interleavings tracked.
pub const MAX_USER_INTERLEAVINGS: usize = 1_000_000;

/// Largest number of linear extensions enumerated per schedule (beyond it
/// the user count is a lower bound, flagged as such). Enumerating 20,000 per
/// schedule made spin-heavy targets spend ~20 ms per schedule counting.
const MAX_EXTENSIONS_PER_RUN: usize = 2_000;
/// Runs with more user events than this count one user interleaving (the
/// one that ran) instead of enumerating them.
const MAX_USER_EVENTS_COUNTED: usize = 400;

/// What an event touches, for the dependency relation of DPOR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Foot {
    /// Nothing another thread can observe.
    Local,
    /// Bytes `[addr, addr+len)`.
    Mem { addr: u32, len: u32, write: bool },
    /// Possibly any memory (`memory.copy`, `memory.fill`).
    AllMem,
    /// Host state shared by all threads (WASI calls, thread creation).
    Host,
    /// A heap block `[addr, addr+len)` allocated or freed: a write of the
    /// whole block (tracked as one object, not byte by byte).
    Block { addr: u32, len: u32 },
}

fn foot(kind: EventKind, addr: u32, len: u32) -> Foot {
    use EventKind as K;
    let len = len.max(1);
    match kind {
        K::Read => Foot::Mem {
            addr,
            len,
            write: false,
        },
        K::Write | K::Rmw | K::Cmpxchg => Foot::Mem {
            addr,
            len,
            write: true,
        },
        // A futex wait compares the word; a notify wakes its waiters: both
        // are treated as writes of the word so that their order is explored.
        K::Wait | K::Notify => Foot::Mem {
            addr,
            len: len.max(4),
            write: true,
        },
        K::Copy | K::Fill => Foot::AllMem,
        K::Call | K::Spawn | K::Choose => Foot::Host,
        _ => Foot::Local,
    }
}

/// The footprint of each event of a run. An allocator call (recorded as a
/// `Call` event at an `Alloc` or `Free` site, with the block's size, or 0
/// for a free) writes its whole block: whether another thread's access to
/// the block is a use after free depends on which comes first, so both
/// orders must be explored.
fn event_feet(program: &Program, events: &[Event]) -> Vec<Foot> {
    let mut blocks: BTreeMap<u32, u32> = BTreeMap::new();
    events
        .iter()
        .map(|e| {
            let heap = e.kind == EventKind::Call
                && program
                    .sites
                    .site(e.site)
                    .is_some_and(|s| matches!(s.kind, SiteKind::Alloc | SiteKind::Free));
            if !heap {
                return foot(e.kind, e.addr, e.len);
            }
            let len = if e.len > 0 {
                blocks.insert(e.addr, e.len);
                e.len
            } else {
                blocks.remove(&e.addr).unwrap_or(1)
            };
            Foot::Block {
                addr: e.addr,
                len: len.max(1),
            }
        })
        .collect()
}

/// Whether two events of different threads conflict.
fn conflict(a: Foot, b: Foot) -> bool {
    match (a, b) {
        (Foot::Local, _) | (_, Foot::Local) => false,
        (Foot::Host, Foot::Host) => true,
        (Foot::Host, _) | (_, Foot::Host) => false,
        (Foot::AllMem, _) | (_, Foot::AllMem) => true,
        _ => match (a.bytes(), b.bytes()) {
            (Some((a1, l1, w1)), Some((a2, l2, w2))) => {
                (w1 || w2)
                    && (a1 as u64) < a2 as u64 + l2 as u64
                    && (a2 as u64) < a1 as u64 + l1 as u64
            }
            _ => false,
        },
    }
}

impl Foot {
    /// The bytes touched, and whether they are written (a heap block's
    /// allocation or free writes the whole block).
    fn bytes(self) -> Option<(u32, u32, bool)> {
        match self {
            Foot::Mem { addr, len, write } => Some((addr, len, write)),
            Foot::Block { addr, len } => Some((addr, len, true)),
            _ => None,
        }
    }
}

fn pending_foot(p: &Pending) -> Foot {
    foot(p.kind, p.addr, p.len)
}

/// Candidate indices in the default scheduler's order: the running thread
/// first (unless it is spinning), then round-robin after it (or after the
/// thread of the previous decision when the running thread stopped). The
/// position of a candidate in this order is its delay cost.
fn default_order(current: Option<Tid>, cands: &[Candidate], last: Option<Tid>) -> Vec<usize> {
    let cur = current.and_then(|t| cands.iter().position(|c| c.tid == t));
    let start = match cur {
        Some(i) if !cands[i].spinning => cands[i].tid,
        Some(i) => cands[i].tid.wrapping_add(1),
        None => last.map(|t| t.wrapping_add(1)).unwrap_or(0),
    };
    let mut idx: Vec<usize> = (0..cands.len()).collect();
    idx.sort_by_key(|&i| cands[i].tid.wrapping_sub(start));
    idx
}

/// Cost of each candidate under a bound.
fn costs(bound: Bound, current: Option<Tid>, cands: &[Candidate], last: Option<Tid>) -> Vec<u32> {
    let mut cost = vec![0u32; cands.len()];
    match bound {
        Bound::Unbounded => {}
        Bound::Preemptions(_) => {
            if let Some(i) = current.and_then(|t| cands.iter().position(|c| c.tid == t)) {
                if !cands[i].spinning {
                    for (j, c) in cost.iter_mut().enumerate() {
                        *c = (j != i) as u32;
                    }
                }
            }
        }
        Bound::Delays(_) => {
            for (pos, &i) in default_order(current, cands, last).iter().enumerate() {
                cost[i] = pos as u32;
            }
        }
    }
    cost
}

/// A thread in a sleep set (Godefroid 1996): its next step was explored
/// from an earlier state, and everything run since is independent of it, so
/// running it now would only reach states already explored.
#[derive(Debug, Clone)]
struct Sleeper {
    tid: Tid,
    /// What the thread was about to do when it fell asleep.
    pending: Pending,
    /// The footprint of its whole next step, as recorded in the run that
    /// explored it: every event the thread ran from that decision up to the
    /// next point where another thread could be chosen. Under `--preempt
    /// user` a step runs through library code (malloc, a lock's fast path)
    /// and is many events long.
    feet: Arc<[Foot]>,
}

impl Sleeper {
    /// Whether an event of `tid` with footprint `f` wakes this sleeper.
    fn woken_by(&self, tid: Tid, f: Foot) -> bool {
        self.tid == tid || self.feet.iter().any(|&g| conflict(g, f))
    }

    /// Whether the sleeper is still among `cands`, about to do the same
    /// thing as when it fell asleep.
    fn among(&self, cands: &[Candidate]) -> bool {
        cands
            .iter()
            .any(|c| c.tid == self.tid && c.pending == self.pending)
    }
}

/// Longest step footprint kept exactly; a longer one is summarised as
/// "all memory and host state", which only wakes its sleeper earlier.
const MAX_STEP_FEET: usize = 256;

/// The footprint of a step, deduplicated (or summarised).
fn step_feet(feet: impl Iterator<Item = Foot>) -> Arc<[Foot]> {
    let set: BTreeSet<Foot> = feet.filter(|f| *f != Foot::Local).collect();
    if set.len() > MAX_STEP_FEET {
        return Arc::from(vec![Foot::AllMem, Foot::Host]);
    }
    set.into_iter().collect()
}

/// The sleep set after `chosen` runs, as far as the default scheduler can
/// tell from the candidate's pending event. This only steers its choice;
/// the explorer recomputes each node's sleep set from the events the run
/// recorded.
fn next_sleep(sleep: &[Sleeper], chosen: &Candidate) -> Vec<Sleeper> {
    let f = pending_foot(&chosen.pending);
    sleep
        .iter()
        .filter(|s| !s.woken_by(chosen.tid, f))
        .cloned()
        .collect()
}

/// The default scheduler that runs after the forced prefix: the first
/// candidate of [`default_order`] (with DPOR, the first one not asleep).
struct Guide {
    last: Option<Tid>,
    sleep: Vec<Sleeper>,
    /// Threads seen spinning that have not run since.
    spinners: Spinners,
    /// Consecutive decisions at which every thread awake was spinning.
    spin_run: u32,
}

/// Decisions of spinning by every awake thread after which [`Guide`] wakes
/// a sleeper.
const GUIDE_SPIN_PATIENCE: u32 = 1_000;

impl Strategy for Guide {
    fn spec(&self) -> String {
        // Runs are recorded completely: a replay needs no strategy.
        "replay".into()
    }
    fn reset(&mut self, _seed: u64) {}
    fn pick_thread(&mut self, choice: &Choice) -> usize {
        let cands = choice.candidates;
        self.sleep.retain(|s| s.among(cands));
        let order = default_order(choice.current, cands, self.last);
        self.spinners.observe(cands);
        let asleep = |i: usize| self.sleep.iter().any(|s| s.tid == cands[i].tid);
        let spinning = |i: usize| self.spinners.contains(cands[i].tid);
        // A spinner only waits for another thread. When every thread awake
        // has spun for a long stretch (longer than a library lock's bounded
        // spin before it sleeps), a sleeper is woken: the spin's reads were
        // not seen to conflict with it, but spinning on would only end at
        // the step budget.
        let awake = order.iter().copied().find(|&i| !asleep(i) && !spinning(i));
        self.spin_run = if awake.is_some() {
            0
        } else {
            self.spin_run + 1
        };
        let pick = awake
            .or_else(|| {
                let wake = self.spin_run > GUIDE_SPIN_PATIENCE;
                order
                    .iter()
                    .copied()
                    .find(|&i| !spinning(i) && (wake || !asleep(i)))
            })
            .or_else(|| order.iter().copied().find(|&i| !asleep(i)))
            .unwrap_or(order[0]);
        self.spinners.ran(cands[pick].tid);
        self.sleep = next_sleep(&self.sleep, &cands[pick]);
        self.last = Some(cands[pick].tid);
        pick
    }
    fn pick_value(&mut self, _tid: Tid, _n: u32) -> u32 {
        0
    }
}

/// A decision point on the current path.
#[derive(Debug, Clone)]
struct Node {
    /// Thread candidates (empty for a value decision).
    cands: Vec<Candidate>,
    /// Ready threads left out because they waited for a held mutex, with
    /// the mutex's lock word.
    waiting: Vec<(Tid, u32)>,
    /// A value decision: (tid, site, options).
    value: Option<(Tid, SiteId, u32)>,
    last: Option<Tid>,
    taken: usize,
    done: Vec<bool>,
    todo: Vec<bool>,
    cost: Vec<u32>,
    /// Bound spent before this point.
    used: u32,
    /// Sleep set on arrival (DPOR).
    sleep: Vec<Sleeper>,
    /// Per option: the footprint of the step it led to, once a run took it
    /// (`None` before, and for a step that contains a value decision, whose
    /// footprint depends on the value: such a thread is never put to sleep).
    steps: Vec<Option<Arc<[Foot]>>>,
    /// Index of the event the thread decision chose.
    event: usize,
    /// Alternatives may be explored here (see [`Preempt`]).
    branchable: bool,
    /// Options never explored: the running thread when it is spinning and
    /// another thread can run (its re-read would see the same value).
    banned: Vec<bool>,
}

impl Node {
    fn options(&self) -> usize {
        match self.value {
            Some((_, _, n)) => n as usize,
            None => self.cands.len(),
        }
    }
    fn decision(&self, i: usize) -> Decision {
        match self.value {
            Some((tid, site, n)) => Decision::Value {
                tid,
                site,
                value: i as u32,
                options: n,
            },
            None => Decision::Thread {
                tid: self.cands[i].tid,
                site: self.cands[i].pending.site,
                options: self.cands.len() as u32,
            },
        }
    }
    fn asleep(&self, i: usize) -> bool {
        self.value.is_none() && self.sleep.iter().any(|s| s.tid == self.cands[i].tid)
    }
}

/// Happens-before of one run: a vector clock per event.
struct Hb {
    /// Per event: its thread and its index among that thread's events.
    who: Vec<(Tid, u32)>,
    vc: Vec<VectorClock>,
    /// Races `(i, j)`: `i` before `j`, different threads, conflicting, not
    /// otherwise ordered.
    races: Vec<(usize, usize)>,
}

impl Hb {
    /// Whether event `i` happens before (or is) event `j`.
    fn before(&self, i: usize, j: usize) -> bool {
        let (t, n) = self.who[i];
        self.vc[j].get(t) > n
    }
}

#[derive(Default)]
struct Obj {
    last_write: Option<usize>,
    /// Last read per thread since the last write.
    reads: BTreeMap<Tid, usize>,
}

const OBJ_ALLMEM: u64 = 1 << 32;
const OBJ_HOST: u64 = (1 << 32) + 1;
/// Heap block objects: `OBJ_BLOCK + start`.
const OBJ_BLOCK: u64 = 2 << 32;

/// Computes happens-before (program order, thread creation, wake-ups and
/// conflicts in run order) and the races of a run.
fn happens_before(events: &[Event], feet: &[Foot], threads: usize) -> Hb {
    let n = events.len();
    let nt = threads.max(1);
    let mut who = Vec::with_capacity(n);
    let mut count = vec![0u32; nt];
    for e in events {
        let t = e.tid as usize;
        if t >= count.len() {
            count.resize(t + 1, 0);
        }
        who.push((e.tid, count[t]));
        count[t] += 1;
    }
    let nt = count.len();
    // Thread creation: child k (in creation order) was created right after
    // its parent's event preceding the parent's k-th Spawn event.
    let mut prev_of_thread: Vec<Option<usize>> = vec![None; nt];
    let mut spawns: Vec<(i64, usize)> = Vec::new(); // (creation point, parent event before it)
    for (j, e) in events.iter().enumerate() {
        if e.kind == EventKind::Spawn {
            let before = prev_of_thread[e.tid as usize];
            spawns.push((before.map(|b| b as i64).unwrap_or(-1), j));
        }
        prev_of_thread[e.tid as usize] = Some(j);
    }
    spawns.sort();
    let mut creator: Vec<Option<usize>> = vec![None; nt];
    for (k, (point, _)) in spawns.iter().enumerate() {
        if let Some(c) = creator.get_mut(k + 1) {
            *c = (*point >= 0).then_some(*point as usize);
        }
    }
    let mut thread_vc: Vec<VectorClock> = vec![VectorClock::default(); nt];
    let mut started = vec![false; nt];
    let mut vc: Vec<VectorClock> = Vec::with_capacity(n);
    let mut objs: BTreeMap<u64, Obj> = BTreeMap::new();
    let mut last_notify: BTreeMap<u32, usize> = BTreeMap::new();
    // Heap blocks seen so far (start → size), freed ones included.
    let mut blocks: BTreeMap<u32, u32> = BTreeMap::new();
    let mut races = Vec::new();
    for (j, e) in events.iter().enumerate() {
        let t = e.tid as usize;
        let mut c = thread_vc[t].clone();
        if !started[t] {
            started[t] = true;
            if let Some(p) = creator[t] {
                c.join(&vc[p]);
            }
        }
        if e.kind == EventKind::Wake && e.addr != 0 {
            if let Some(&nidx) = last_notify.get(&e.addr) {
                c.join(&vc[nidx]);
            }
        }
        c.set(e.tid, who[j].1 + 1);
        let pre = c.clone();
        let keys: Vec<(u64, bool)> = match feet[j] {
            Foot::Local => Vec::new(),
            Foot::Host => vec![(OBJ_HOST, true)],
            Foot::AllMem => vec![(OBJ_ALLMEM, true)],
            Foot::Block { addr, len } => {
                blocks.insert(addr, len);
                vec![(OBJ_BLOCK + addr as u64, true), (OBJ_ALLMEM, false)]
            }
            Foot::Mem { addr, len, write } => {
                let mut k: Vec<(u64, bool)> = (addr as u64..addr as u64 + len.min(16) as u64)
                    .map(|a| (a, write))
                    .collect();
                k.push((OBJ_ALLMEM, false));
                // An access inside a heap block reads the block object, so
                // it is ordered against the block's allocation and free.
                if let Some((&b, &bl)) = blocks.range(..=addr).next_back() {
                    if (addr as u64) < b as u64 + bl as u64 {
                        k.push((OBJ_BLOCK + b as u64, false));
                    }
                }
                k
            }
        };
        let mut cands: BTreeSet<usize> = BTreeSet::new();
        for &(key, write) in &keys {
            let o = objs.entry(key).or_default();
            if write {
                let others: Vec<usize> = o.reads.values().copied().collect();
                if others.is_empty() {
                    cands.extend(o.last_write);
                } else {
                    cands.extend(others);
                }
            } else {
                cands.extend(o.last_write);
            }
        }
        for &i in &cands {
            if events[i].tid == e.tid {
                continue;
            }
            let (ti, ni) = who[i];
            if pre.get(ti) <= ni {
                races.push((i, j));
            }
            c.join(&vc[i]);
        }
        for &(key, write) in &keys {
            let o = objs.entry(key).or_default();
            if write {
                o.last_write = Some(j);
                o.reads.clear();
            } else {
                o.reads.insert(e.tid, j);
            }
        }
        if e.kind == EventKind::Notify {
            last_notify.insert(e.addr, j);
        }
        thread_vc[t] = c.clone();
        vc.push(c);
    }
    Hb { who, vc, races }
}

/// Indices of a run's user-code accesses to shared locations.
fn user_events(program: &Program, events: &[Event]) -> Vec<usize> {
    let mut touched: BTreeMap<u32, BTreeSet<Tid>> = BTreeMap::new();
    let plain = |k: EventKind| {
        matches!(
            k,
            EventKind::Read | EventKind::Write | EventKind::Rmw | EventKind::Cmpxchg
        )
    };
    for e in events.iter().filter(|e| plain(e.kind)) {
        for a in e.addr..e.addr.saturating_add(e.len.clamp(1, 16)) {
            touched.entry(a).or_default().insert(e.tid);
        }
    }
    events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            plain(e.kind)
                && program.sites.site(e.site).is_some_and(|s| s.user)
                && (e.addr..e.addr.saturating_add(e.len.clamp(1, 16)))
                    .any(|a| touched.get(&a).is_some_and(|s| s.len() > 1))
        })
        .map(|(i, _)| i)
        .collect()
}

fn projection_hash(seq: &[(Tid, SiteId)]) -> [u8; 16] {
    let mut h = Sha256::new();
    for (t, s) in seq {
        h.update(t.to_le_bytes());
        h.update(s.to_le_bytes());
    }
    let d = h.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

/// Every order of the user events consistent with happens-before (up to
/// `limit`), as projection hashes. Returns whether the limit cut it short.
/// Above `MAX_USER_EVENTS_COUNTED` user events (a long spin, a long loop)
/// only the order that ran is counted: the count is a lower bound anyway,
/// and the enumeration's cost grows with the square of the events.
fn linear_extensions(
    events: &[Event],
    hb: &Hb,
    users: &[usize],
    limit: usize,
    out: &mut Vec<[u8; 16]>,
) -> bool {
    let n = users.len();
    if n > MAX_USER_EVENTS_COUNTED {
        let ran: Vec<(Tid, SiteId)> = users
            .iter()
            .map(|&u| (events[u].tid, events[u].site))
            .collect();
        out.push(projection_hash(&ran));
        return true;
    }
    // `succs[a]`: the user events that `a` must come before; `waiting[b]`:
    // how many of `b`'s predecessors are not placed yet.
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut waiting = vec![0u32; n];
    for b in 0..n {
        for a in 0..b {
            if hb.before(users[a], users[b]) {
                succs[a].push(b);
                waiting[b] += 1;
            }
        }
    }
    // Same-thread events are ordered, so each thread offers only its next
    // event: `queues[t]` lists thread t's user events, `next[t]` its cursor.
    let mut queues: Vec<Vec<usize>> = Vec::new();
    for (b, &u) in users.iter().enumerate() {
        let t = events[u].tid as usize;
        if t >= queues.len() {
            queues.resize(t + 1, Vec::new());
        }
        queues[t].push(b);
    }
    struct Walk<'a> {
        events: &'a [Event],
        users: &'a [usize],
        succs: &'a [Vec<usize>],
        queues: &'a [Vec<usize>],
        limit: usize,
    }
    struct State<'a> {
        waiting: Vec<u32>,
        next: Vec<usize>,
        seq: Vec<(Tid, SiteId)>,
        out: &'a mut Vec<[u8; 16]>,
        cut: bool,
    }
    fn rec(w: &Walk, st: &mut State) {
        if st.cut {
            return;
        }
        if st.seq.len() == w.users.len() {
            if st.out.len() >= w.limit {
                st.cut = true;
                return;
            }
            st.out.push(projection_hash(&st.seq));
            return;
        }
        for t in 0..w.queues.len() {
            let Some(&b) = w.queues[t].get(st.next[t]) else {
                continue;
            };
            if st.waiting[b] != 0 {
                continue;
            }
            st.next[t] += 1;
            for &s in &w.succs[b] {
                st.waiting[s] -= 1;
            }
            let e = &w.events[w.users[b]];
            st.seq.push((e.tid, e.site));
            rec(w, st);
            st.seq.pop();
            for &s in &w.succs[b] {
                st.waiting[s] += 1;
            }
            st.next[t] -= 1;
        }
    }
    let walk = Walk {
        events,
        users,
        succs: &succs,
        queues: &queues,
        limit,
    };
    let mut st = State {
        waiting,
        next: vec![0; queues.len()],
        seq: Vec::with_capacity(n),
        out,
        cut: false,
    };
    rec(&walk, &mut st);
    st.cut
}

/// Refuses a reduction that does not combine with the bound: DPOR under a
/// bound would not explore every bounded schedule.
pub fn check_reduction(bound: Bound, reduction: Reduction) -> Result<()> {
    if reduction == Reduction::Dpor && bound != Bound::Unbounded {
        bail!(
            "--reduction dpor cannot be combined with --bound (bounded DPOR would not explore every bounded schedule): \
             drop --bound to explore every schedule with DPOR, or drop --reduction (none is the default with --bound) \
             to explore within the bound"
        );
    }
    Ok(())
}

/// Explores the schedules of `program` under `base` (args, budgets, env).
/// `on_run` is called after every schedule; `stop` ends the search early
/// (Ctrl-C) with the partial report.
pub fn explore(
    program: &Program,
    base: &RunConfig,
    opts: &Options,
    stop: &AtomicBool,
    on_run: &mut dyn FnMut(&Progress),
) -> Result<Report> {
    check_reduction(opts.bound, opts.reduction)?;
    let mut observe = opts.observe.clone();
    if let Some(x) = &opts.expect {
        for v in x.variables() {
            if !observe.contains(&v) {
                observe.push(v);
            }
        }
    }
    for v in &observe {
        program.resolve_symbol(v)?;
    }
    let k_bound = match opts.bound {
        Bound::Unbounded => u32::MAX,
        Bound::Preemptions(k) | Bound::Delays(k) => k,
    };
    let mut report = Report::default();
    let mut all_user: BTreeSet<[u8; 16]> = BTreeSet::new();
    let mut nodes: Vec<Node> = Vec::new();
    let mut prefix: Vec<Decision> = Vec::new();
    let mut estimate_sum: f64 = 0.0;
    loop {
        if stop.load(Ordering::Relaxed) {
            report.interrupted = true;
            break;
        }
        if opts.max_schedules.is_some_and(|m| report.schedules >= m) {
            break;
        }
        // The default scheduler continues after the prefix.
        let (last, sleep) = match nodes.last() {
            Some(n) => {
                let chosen = n.decision(n.taken);
                let last = match chosen {
                    Decision::Thread { tid, .. } => Some(tid),
                    Decision::Value { .. } => n.last,
                };
                let sleep = match (opts.reduction, n.value) {
                    (Reduction::Dpor, None) => next_sleep(&sleepers_below(n), &n.cands[n.taken]),
                    (Reduction::Dpor, Some(_)) => n.sleep.clone(),
                    (Reduction::None, _) => Vec::new(),
                };
                (last, sleep)
            }
            None => (None, Vec::new()),
        };
        let cfg = RunConfig {
            forced: prefix.clone(),
            strict: false,
            record_choices: true,
            record_events: true,
            observe: observe.clone(),
            ..base.clone()
        };
        let r = program.run_with_strategy(
            &cfg,
            Box::new(Guide {
                last,
                sleep,
                spinners: Spinners::default(),
                spin_run: 0,
            }),
        )?;
        if let Some(d) = &r.divergence {
            return Err(crate::internal!(
                "schedule {} did not replay its prefix (decision {}: {})",
                report.schedules + 1,
                d.index,
                d.actual
            ));
        }
        if r.decisions.len() < prefix.len() || r.decisions[..prefix.len()] != prefix[..] {
            return Err(crate::internal!(
                "schedule {} did not follow its prefix",
                report.schedules + 1
            ));
        }
        if r.choice_points.len() != r.decisions.len() {
            return Err(crate::internal!("choice points and decisions disagree"));
        }
        report.schedules += 1;
        let feet = event_feet(program, &r.events);
        report.max_decisions = report.max_decisions.max(r.decisions.len());
        // Extend the path with the new decision points.
        let k = prefix.len();
        for (i, cp) in r.choice_points.iter().enumerate() {
            if i < k {
                nodes[i].event = cp.event;
                continue;
            }
            let d = r.decisions[i];
            let prev = i.checked_sub(1).map(|p| &nodes[p]);
            let used = prev
                .map(|p| p.used.saturating_add(p.cost[p.taken]))
                .unwrap_or(0);
            let last = prev.map(|p| match p.decision(p.taken) {
                Decision::Thread { tid, .. } => Some(tid),
                Decision::Value { .. } => p.last,
            });
            let last = last.flatten();
            let sleep = match prev {
                Some(p) if opts.reduction == Reduction::Dpor => {
                    let mut s = sleepers_below(p);
                    // The events run between the two decisions (the chosen
                    // thread's own first) wake the sleepers they conflict
                    // with.
                    for (e, &f) in r
                        .events
                        .get(p.event..cp.event)
                        .unwrap_or(&[])
                        .iter()
                        .zip(feet.get(p.event..cp.event).unwrap_or(&[]))
                    {
                        s.retain(|z| !z.woken_by(e.tid, f));
                    }
                    s.retain(|z| z.among(&cp.candidates));
                    s
                }
                _ => Vec::new(),
            };
            let (node_cands, value, taken) = match d {
                Decision::Thread { tid, .. } => {
                    let taken = cp
                        .candidates
                        .iter()
                        .position(|c| c.tid == tid)
                        .ok_or_else(|| crate::internal!("decision not among its candidates"))?;
                    (cp.candidates.clone(), None, taken)
                }
                Decision::Value {
                    tid,
                    site,
                    value,
                    options,
                } => (Vec::new(), Some((tid, site, options)), value as usize),
            };
            let cost = if value.is_some() {
                vec![0; value.map(|v| v.2 as usize).unwrap_or(0)]
            } else {
                costs(opts.bound, cp.current, &node_cands, last)
            };
            let n_opts = cost.len();
            // A running thread in library code is not preempted (Preempt::User).
            let branchable = value.is_some()
                || opts.preempt == Preempt::All
                || match cp
                    .current
                    .and_then(|t| node_cands.iter().find(|c| c.tid == t))
                {
                    None => true,
                    Some(c) => {
                        c.spinning || program.sites.site(c.pending.site).is_some_and(|s| s.user)
                    }
                };
            let mut banned = vec![false; n_opts];
            if value.is_none() && node_cands.len() > 1 {
                if let Some(i) = cp
                    .current
                    .and_then(|t| node_cands.iter().position(|c| c.tid == t))
                {
                    banned[i] = node_cands[i].spinning && i != taken;
                }
            }
            let mut todo = vec![false; n_opts];
            match (opts.reduction, value) {
                _ if !branchable => {}
                (_, Some(_)) => todo.iter_mut().for_each(|t| *t = true),
                (Reduction::None, None) => {
                    for (j, t) in todo.iter_mut().enumerate() {
                        *t = used.saturating_add(cost[j]) <= k_bound;
                        report.pruned += (!*t && j != taken) as u64;
                    }
                }
                (Reduction::Dpor, None) => {}
            }
            todo[taken] = true;
            let mut done = vec![false; n_opts];
            done[taken] = true;
            let node = Node {
                cands: node_cands,
                waiting: cp.waiting.clone(),
                value,
                last,
                taken,
                done,
                todo,
                cost,
                used,
                sleep,
                steps: vec![None; n_opts],
                event: cp.event,
                branchable,
                banned,
            };
            if node.value.is_none() && node.asleep(taken) {
                report.sleep_blocked += 1;
            }
            nodes.push(node);
        }
        nodes.truncate(r.decisions.len());
        if opts.reduction == Reduction::Dpor {
            record_steps(&mut nodes, &r.events, &feet);
        }
        let hb = happens_before(&r.events, &feet, r.threads as usize);
        if opts.reduction == Reduction::Dpor {
            add_backtracks(&mut nodes, &r.events, &hb);
        }
        // Outcome and user interleavings.
        let users = user_events(program, &r.events);
        let mut ext = Vec::new();
        if all_user.len() < MAX_USER_INTERLEAVINGS {
            let cut = linear_extensions(&r.events, &hb, &users, MAX_EXTENSIONS_PER_RUN, &mut ext);
            report.user_capped |= cut;
        } else {
            report.user_capped = true;
        }
        let expect_ok = opts.expect.as_ref().is_none_or(|x| x.holds(&r));
        let failing = r.verdict.is_failure() || !expect_ok;
        let key = OutcomeKey {
            observed: r
                .observed
                .iter()
                .filter(|o| opts.observe.contains(&o.name) || opts.expect.is_some())
                .map(|o| {
                    (
                        o.name.clone(),
                        o.value.map(|v| v.to_string()).unwrap_or_else(|| "?".into()),
                    )
                })
                .collect(),
            verdict: r.verdict.signature(),
            exit_code: exit_code(&r),
            output: opts
                .observe_output
                .then(|| String::from_utf8_lossy(&r.stdout).into_owned()),
            failing,
        };
        let stats = report.outcomes.entry(key).or_default();
        stats.schedules += 1;
        for h in ext {
            if stats.seen.insert(h) {
                stats.interleavings += 1;
            }
            if all_user.len() < MAX_USER_INTERLEAVINGS {
                all_user.insert(h);
            }
        }
        if failing {
            report.failing += 1;
            if report.first_failure.is_none() {
                let reason = if r.verdict.is_failure() {
                    r.verdict.summary()
                } else {
                    format!(
                        "--expect `{}` does not hold: {}",
                        opts.expect
                            .as_ref()
                            .map(|x| x.to_string())
                            .unwrap_or_default(),
                        r.observed
                            .iter()
                            .map(|o| format!(
                                "{} = {}",
                                o.name,
                                o.value.map(|v| v.to_string()).unwrap_or_else(|| "?".into())
                            ))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                report.first_failure = Some(Failure {
                    schedule: report.schedules,
                    interleaving: users
                        .iter()
                        .map(|&i| {
                            let e = &r.events[i];
                            UserEvent {
                                tid: e.tid,
                                site: e.site,
                                kind: e.kind,
                                addr: e.addr,
                                value: e.value,
                            }
                        })
                        .collect(),
                    result: r.clone(),
                    reason,
                });
            }
        }
        // Knuth's estimate of the tree size from this path.
        let mut est = 1.0f64;
        for n in &nodes {
            est *= n.todo.iter().filter(|t| **t).count().max(1) as f64;
        }
        estimate_sum += est;
        on_run(&Progress {
            schedules: report.schedules,
            estimate: ((estimate_sum / report.schedules as f64) as u64).max(report.schedules),
            failing: report.failing,
        });
        // Backtrack to the deepest point with something left to explore.
        let mut next = None;
        while let Some(n) = nodes.last_mut() {
            let pick =
                (0..n.options()).find(|&j| n.todo[j] && !n.done[j] && !n.banned[j] && !n.asleep(j));
            if let Some(j) = pick {
                n.done[j] = true;
                n.taken = j;
                next = Some(());
                break;
            }
            nodes.pop();
        }
        if next.is_none() {
            report.complete = true;
            break;
        }
        prefix = nodes.iter().map(|n| n.decision(n.taken)).collect();
    }
    report.user_interleavings = all_user.len() as u64;
    Ok(report)
}

/// The sleepers below node `n` for its current choice, before the chosen
/// step runs: the node's own sleepers and the options already explored here
/// (whose steps are recorded).
fn sleepers_below(n: &Node) -> Vec<Sleeper> {
    let mut s = n.sleep.clone();
    if n.value.is_some() {
        return s;
    }
    for (j, c) in n.cands.iter().enumerate() {
        if !n.done[j] || j == n.taken || s.iter().any(|z| z.tid == c.tid) {
            continue;
        }
        if let Some(feet) = &n.steps[j] {
            s.push(Sleeper {
                tid: c.tid,
                pending: c.pending,
                feet: feet.clone(),
            });
        }
    }
    s
}

/// Records, for each thread decision of the path that may branch, the
/// footprint of the step its current choice led to in this run: the chosen
/// thread's events from the decision up to the next decision that may
/// branch (or the first event of another thread). A step that contains a
/// value decision is recorded as `None`.
fn record_steps(nodes: &mut [Node], events: &[Event], feet: &[Foot]) {
    let mut end = events.len();
    // A value decision was made between this node and `end` (possibly by
    // another thread: then the step is only treated more cautiously).
    let mut value_inside = false;
    for n in nodes.iter_mut().rev() {
        if n.value.is_some() {
            value_inside = true;
            continue;
        }
        if !n.branchable {
            continue;
        }
        let tid = n.cands[n.taken].tid;
        let from = n.event.min(end);
        let len = events[from..end]
            .iter()
            .take_while(|e| e.tid == tid)
            .count();
        n.steps[n.taken] =
            (!value_inside).then(|| step_feet(feet[from..from + len].iter().copied()));
        end = from;
        value_inside = false;
    }
}

/// Source-DPOR: for each race `i ⋖ j` of the run, makes sure an initial of
/// `notdep(i).j` is in the backtrack set of the decision that ran `i`.
fn add_backtracks(nodes: &mut [Node], events: &[Event], hb: &Hb) {
    // Thread decisions that may branch, by the event they chose. A race
    // whose first event ran inside a step that no decision started (a
    // library call that is not preempted, or a thread that ran alone) is
    // reversed at the decision that started that step.
    let mut node_of: BTreeMap<usize, usize> = BTreeMap::new();
    for (k, n) in nodes.iter().enumerate() {
        if n.value.is_none() && n.branchable {
            node_of.insert(n.event, k);
        }
    }
    // A thread left out of a decision because the mutex it is about to lock
    // is held ([`crate::runtime::state::ChoicePoint::waiting`]) stands for one that
    // tried the lock word and failed: a read racing with the write that took
    // the mutex. That race is reversed like the others, at the step of the
    // taking write.
    let mut reversed: BTreeSet<(Tid, usize)> = BTreeSet::new();
    for n in 0..nodes.len() {
        let at = nodes[n].event.min(events.len());
        for (t, word) in nodes[n].waiting.clone() {
            let taken = events[..at].iter().rposition(|e| {
                e.tid != t
                    && e.kind.writes()
                    && e.addr <= word
                    && (word as u64) < e.addr as u64 + e.len.max(1) as u64
            });
            let Some(x) = taken else { continue };
            if !reversed.insert((t, x)) {
                continue;
            }
            let Some((_, &k)) = node_of.range(..=x).next_back() else {
                continue;
            };
            let node = &mut nodes[k];
            match node.cands.iter().position(|c| c.tid == t) {
                Some(c) => node.todo[c] = true,
                None => node.todo.iter_mut().for_each(|d| *d = true),
            }
        }
    }
    for &(i, j) in &hb.races {
        let Some((_, &k)) = node_of.range(..=i).next_back() else {
            continue;
        };
        // v = the events after i not ordered after it, then j.
        let v: Vec<usize> = (i + 1..j)
            .filter(|&x| !hb.before(i, x))
            .chain(std::iter::once(j))
            .collect();
        let mut seen: BTreeSet<Tid> = BTreeSet::new();
        let mut initials: BTreeSet<Tid> = BTreeSet::new();
        for (pos, &x) in v.iter().enumerate() {
            let t = events[x].tid;
            if !seen.insert(t) {
                continue;
            }
            if !v[..pos].iter().any(|&y| hb.before(y, x)) {
                initials.insert(t);
            }
        }
        let n = &mut nodes[k];
        let has = n
            .cands
            .iter()
            .enumerate()
            .any(|(c, cand)| n.todo[c] && initials.contains(&cand.tid));
        if has {
            continue;
        }
        match n.cands.iter().position(|cand| initials.contains(&cand.tid)) {
            Some(c) => n.todo[c] = true,
            None => n.todo.iter_mut().for_each(|t| *t = true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bounds_and_reductions() {
        assert_eq!("none".parse::<Bound>().unwrap(), Bound::Unbounded);
        assert_eq!(
            "preemptions=2".parse::<Bound>().unwrap(),
            Bound::Preemptions(2)
        );
        assert_eq!("delays=0".parse::<Bound>().unwrap(), Bound::Delays(0));
        for bad in ["preemptions", "delays=x", "foo=1", ""] {
            assert!(bad.parse::<Bound>().is_err(), "{bad}");
        }
        assert_eq!("dpor".parse::<Reduction>().unwrap(), Reduction::Dpor);
        assert!("odpor".parse::<Reduction>().is_err());
    }

    #[test]
    fn parses_expectations() {
        let e = Expect::parse("x == 5 && exit >= 0").unwrap();
        assert_eq!(e.variables(), vec!["x".to_string()]);
        for bad in ["x", "x == y", "== 3", "x = 3"] {
            assert!(Expect::parse(bad).is_err(), "{bad}");
        }
    }

    fn cand(tid: Tid, spinning: bool) -> Candidate {
        Candidate {
            tid,
            pending: Pending::START,
            spinning,
        }
    }

    #[test]
    fn default_order_is_round_robin_from_the_running_thread() {
        let c = [cand(0, false), cand(1, false), cand(2, false)];
        assert_eq!(default_order(Some(1), &c, None), vec![1, 2, 0]);
        assert_eq!(default_order(None, &c, Some(1)), vec![2, 0, 1]);
        let s = [cand(0, false), cand(1, true), cand(2, false)];
        assert_eq!(default_order(Some(1), &s, None), vec![2, 0, 1]);
        assert_eq!(
            costs(Bound::Preemptions(1), Some(1), &c, None),
            vec![1, 0, 1]
        );
        assert_eq!(
            costs(Bound::Preemptions(1), Some(1), &s, None),
            vec![0, 0, 0]
        );
        assert_eq!(costs(Bound::Delays(1), Some(1), &c, None), vec![2, 0, 1]);
    }

    #[test]
    fn conflicts() {
        let r = |a| Foot::Mem {
            addr: a,
            len: 4,
            write: false,
        };
        let w = |a| Foot::Mem {
            addr: a,
            len: 4,
            write: true,
        };
        assert!(!conflict(r(0), r(0)));
        assert!(conflict(r(0), w(2)));
        assert!(!conflict(w(0), w(4)));
        assert!(conflict(Foot::AllMem, r(100)));
        assert!(!conflict(Foot::Host, w(0)));
        assert!(conflict(Foot::Host, Foot::Host));
        assert!(!conflict(Foot::Local, Foot::AllMem));
    }
}
