//! Schedule minimisation (`heddle minimize`): a schedule with the fewest
//! preemptions, then the fewest steps, that gives the same verdict signature.
//!
//! A schedule is described as a [`Plan`]: where it departs from "keep the
//! current thread running". Each preemption is keyed by a *count-augmented*
//! identifier of the point where it happens — the preempted thread, the site
//! it was about to execute and how many times before it had been at that
//! site at a decision point — rather than by its position in the decision
//! sequence, so removing one preemption leaves the others where they were
//! (the positions of later decisions shift; their identifiers do not). The
//! choices made when the running thread blocked or ended ("free" choices)
//! and value choices are kept by occurrence.
//!
//! The search is delta debugging (Zeller's ddmin) over the set of
//! preemptions: drop chunks of them, re-run with [`PlanStrategy`], keep a
//! candidate when the verdict signature stays the same. Every run is judged
//! by the preemptions it really made, and the best run (fewest preemptions,
//! then fewest steps) wins. Its decisions become the new replay file.

use crate::model::Tid;
use crate::runtime::{Program, RunConfig, RunResult};
use crate::sched::{Choice, Strategy};
use crate::trace::Decision;
use anyhow::Result;
use std::collections::BTreeMap;

/// Identifies a decision point at which a thread could go on: (the running
/// thread, the site it is about to execute, the number of earlier decision
/// points at which it was about to execute that site).
pub type PointId = (Tid, u32, u32);

/// The identifier of decision point `cp`, at which `cur` could go on;
/// `counts` holds the points seen so far per (thread, site).
fn point_id(
    counts: &mut BTreeMap<(Tid, u32), u32>,
    cp: &crate::runtime::state::ChoicePoint,
    cur: Tid,
) -> PointId {
    let site = cp
        .candidates
        .iter()
        .find(|c| c.tid == cur)
        .map(|c| c.pending.site)
        .unwrap_or(u32::MAX);
    let n = counts.entry((cur, site)).or_insert(0);
    let id = (cur, site, *n);
    *n += 1;
    id
}

/// A schedule relative to "keep the current thread running".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Preemptions: at this point, switch to that thread.
    pub preempt: BTreeMap<PointId, Tid>,
    /// The k-th free choice (the running thread blocked or ended) picks this thread.
    pub free: BTreeMap<u32, Tid>,
    /// The k-th value choice of a thread picks this value.
    pub values: BTreeMap<(Tid, u32), u32>,
}

impl Plan {
    /// The plan of a recorded run (run with `record_choices`): following it
    /// reproduces the run's decisions.
    pub fn of_run(r: &RunResult) -> Result<Plan> {
        if r.choice_points.len() != r.decisions.len() {
            return Err(crate::internal!(
                "{} choice points for {} decisions (run without record_choices?)",
                r.choice_points.len(),
                r.decisions.len()
            ));
        }
        let mut plan = Plan::default();
        let mut counts: BTreeMap<(Tid, u32), u32> = BTreeMap::new();
        let mut free = 0u32;
        let mut values: BTreeMap<Tid, u32> = BTreeMap::new();
        for (d, cp) in r.decisions.iter().zip(&r.choice_points) {
            match *d {
                Decision::Thread { tid, .. } => match cp.current {
                    Some(cur) => {
                        let id = point_id(&mut counts, cp, cur);
                        if tid != cur {
                            plan.preempt.insert(id, tid);
                        }
                    }
                    None => {
                        plan.free.insert(free, tid);
                        free += 1;
                    }
                },
                Decision::Value { tid, value, .. } => {
                    let n = values.entry(tid).or_insert(0);
                    plan.values.insert((tid, *n), value);
                    *n += 1;
                }
            }
        }
        Ok(plan)
    }
}

/// Follows a [`Plan`]; everywhere else it keeps the current thread running
/// (or, when that thread spins, hands over to the next thread by tid), and
/// a free choice picks the lowest enabled tid. No randomness.
pub struct PlanStrategy {
    plan: Plan,
    counts: BTreeMap<(Tid, u32), u32>,
    free: u32,
    values: BTreeMap<Tid, u32>,
}

impl PlanStrategy {
    /// A strategy that follows `plan`.
    pub fn new(plan: Plan) -> PlanStrategy {
        PlanStrategy {
            plan,
            counts: BTreeMap::new(),
            free: 0,
            values: BTreeMap::new(),
        }
    }
}

impl Strategy for PlanStrategy {
    fn spec(&self) -> String {
        "replay".into()
    }
    fn reset(&mut self, _seed: u64) {
        self.counts.clear();
        self.free = 0;
        self.values.clear();
    }
    fn pick_thread(&mut self, choice: &Choice) -> usize {
        let cands = choice.candidates;
        let index_of = |t: Tid| cands.iter().position(|c| c.tid == t);
        match choice.current.and_then(index_of) {
            Some(i) => {
                let c = cands[i];
                let n = self.counts.entry((c.tid, c.pending.site)).or_insert(0);
                let id = (c.tid, c.pending.site, *n);
                *n += 1;
                if let Some(j) = self.plan.preempt.get(&id).copied().and_then(index_of) {
                    return j;
                }
                if c.spinning {
                    // A spinner waits for another thread: let the next one run.
                    return (i + 1) % cands.len();
                }
                i
            }
            None => {
                let k = self.free;
                self.free += 1;
                self.plan
                    .free
                    .get(&k)
                    .copied()
                    .and_then(index_of)
                    .unwrap_or(0)
            }
        }
    }
    fn pick_value(&mut self, tid: Tid, n: u32) -> u32 {
        let k = self.values.entry(tid).or_insert(0);
        let v = self.plan.values.get(&(tid, *k)).copied().unwrap_or(0);
        *k += 1;
        v.min(n.saturating_sub(1))
    }
}

/// Limits of a minimisation.
#[derive(Debug, Clone)]
pub struct Options {
    /// Most candidate runs.
    pub max_runs: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options { max_runs: 2000 }
    }
}

/// The outcome of [`minimize`].
#[derive(Debug, Clone)]
pub struct Minimized {
    /// The best run, re-run from its decisions with the original limits
    /// (record its decisions to replay it).
    pub result: RunResult,
    /// Preemptions of the original run.
    pub before_preemptions: u64,
    /// Steps of the original run.
    pub before_steps: u64,
    /// Candidate runs tried.
    pub runs: usize,
}

/// Searches for a schedule with the fewest preemptions (then steps) whose
/// verdict signature is that of `original`, a run of `program` under `base`
/// (its config: seed, args, limits) recorded with `record_choices`.
pub fn minimize(
    program: &Program,
    base: &RunConfig,
    original: &RunResult,
    opts: &Options,
) -> Result<Minimized> {
    let signature = original.verdict.signature();
    let plan0 = Plan::of_run(original)?;
    // Candidates that do not reproduce rarely need more steps than the
    // original: a tighter step budget keeps a spinning candidate cheap.
    let max_steps = if original.verdict.kind() == "hang" {
        base.max_steps
    } else {
        base.max_steps
            .min(original.steps.saturating_mul(8).max(100_000))
    };
    let cfg = RunConfig {
        forced: Vec::new(),
        strict: false,
        record_events: false,
        event_stacks: false,
        diagnostics: true,
        record_choices: true,
        max_steps,
        ..base.clone()
    };
    let mut search = Search {
        program,
        cfg,
        signature,
        plan: plan0.clone(),
        runs: 0,
        max_runs: opts.max_runs,
        best: None,
    };
    // Rounds: a 1-minimal set of the preemptions of the best run so far,
    // then again from the run that gave, whose points are keyed afresh
    // (a round can leave a local minimum the next one gets out of).
    let mut plan0 = plan0;
    for _round in 0..4 {
        let before = search.best.as_ref().map(|b| (b.preemptions, b.steps));
        minimize_round(&mut search, &plan0)?;
        let after = search.best.as_ref().map(|b| (b.preemptions, b.steps));
        match &search.best {
            Some(b) if after < before || before.is_none() => {
                if search.runs >= search.max_runs || b.preemptions == 0 {
                    break;
                }
                plan0 = Plan::of_run(b)?;
                search.plan = plan0.clone();
            }
            _ => break,
        }
    }
    // A local minimum above one preemption: try each single preemption of
    // the schedule that keeps every thread running (bounded by the runs).
    if search.best.as_ref().is_some_and(|b| b.preemptions > 1) {
        one_preemption(&mut search)?;
    }
    let best = match search.best.take() {
        Some(b) if (b.preemptions, b.steps) < (original.preemptions, original.steps) => b,
        _ => original.clone(),
    };
    // Re-run the winner from its decisions with the original limits: this
    // is exactly what the replay file will do.
    let check = program.run(&RunConfig {
        forced: best.decisions.clone(),
        strict: true,
        record_choices: false,
        strategy: "replay".into(),
        ..base.clone()
    })?;
    if check.divergence.is_some() || check.verdict.signature() != original.verdict.signature() {
        return Err(crate::internal!(
            "the minimised schedule does not replay to the same verdict"
        ));
    }
    Ok(Minimized {
        result: check,
        before_preemptions: original.preemptions,
        before_steps: original.steps,
        runs: search.runs,
    })
}

/// One round of the search from `plan0`: drop its free choices if the
/// failure does not need them (they are keyed by their order, which removing
/// a preemption shifts), a 1-minimal set of its preemptions, then the free
/// choices that do not matter (a more canonical schedule, often shorter).
fn minimize_round(search: &mut Search, plan0: &Plan) -> Result<()> {
    let unfree = Plan {
        free: BTreeMap::new(),
        ..plan0.clone()
    };
    if !plan0.free.is_empty() && search.try_plan(&unfree)?.is_some() {
        search.plan = unfree;
    }
    let keys: Vec<PointId> = plan0.preempt.keys().copied().collect();
    let kept = search.ddmin(keys)?;
    search.plan.preempt = kept.iter().map(|k| (*k, plan0.preempt[k])).collect();
    let frees: Vec<u32> = search.plan.free.keys().copied().collect();
    for k in frees {
        if search.runs >= search.max_runs {
            break;
        }
        let mut p = search.plan.clone();
        p.free.remove(&k);
        let bound = search
            .best
            .as_ref()
            .map(|b| b.preemptions)
            .unwrap_or(u64::MAX);
        if let Some(r) = search.try_plan(&p)? {
            if r.preemptions <= bound {
                search.plan = p;
            }
        }
    }
    Ok(())
}

/// Tries, one by one, the plans that preempt the no-preemption schedule
/// once (at one of its points, for one of the other threads ready there);
/// stops at the first that keeps the signature.
fn one_preemption(search: &mut Search) -> Result<()> {
    let base = Plan {
        preempt: BTreeMap::new(),
        ..search.plan.clone()
    };
    search.runs += 1;
    let r = search
        .program
        .run_with_strategy(&search.cfg, Box::new(PlanStrategy::new(base.clone())))?;
    if r.choice_points.len() != r.decisions.len() {
        return Ok(());
    }
    let mut counts: BTreeMap<(Tid, u32), u32> = BTreeMap::new();
    let mut points: Vec<(PointId, Tid)> = Vec::new();
    for cp in &r.choice_points {
        let Some(cur) = cp.current else { continue };
        let id = point_id(&mut counts, cp, cur);
        points.extend(
            cp.candidates
                .iter()
                .filter(|c| c.tid != cur)
                .map(|c| (id, c.tid)),
        );
    }
    for (id, t) in points {
        if search.runs >= search.max_runs {
            break;
        }
        let mut p = base.clone();
        p.preempt.insert(id, t);
        if search.try_plan(&p)?.is_some_and(|r| r.preemptions <= 1) {
            break;
        }
    }
    Ok(())
}

struct Search<'a> {
    program: &'a Program,
    cfg: RunConfig,
    signature: String,
    /// The plan candidates start from (free choices and values).
    plan: Plan,
    runs: usize,
    max_runs: usize,
    best: Option<RunResult>,
}

impl Search<'_> {
    /// Runs `plan`; returns the run when it keeps the signature.
    fn try_plan(&mut self, plan: &Plan) -> Result<Option<RunResult>> {
        if self.runs >= self.max_runs {
            return Ok(None);
        }
        self.runs += 1;
        let r = self
            .program
            .run_with_strategy(&self.cfg, Box::new(PlanStrategy::new(plan.clone())))?;
        if r.divergence.is_some() || r.verdict.signature() != self.signature {
            return Ok(None);
        }
        let better = self
            .best
            .as_ref()
            .is_none_or(|b| (r.preemptions, r.steps) < (b.preemptions, b.steps));
        if better {
            self.best = Some(r.clone());
        }
        Ok(Some(r))
    }

    /// Whether keeping only the preemptions `keys` keeps the signature.
    fn test(&mut self, keys: &[PointId], all: &BTreeMap<PointId, Tid>) -> Result<bool> {
        let mut p = self.plan.clone();
        p.preempt = keys.iter().map(|k| (*k, all[k])).collect();
        Ok(self.try_plan(&p)?.is_some())
    }

    /// ddmin over the preemptions: a 1-minimal subset that keeps the signature.
    fn ddmin(&mut self, keys: Vec<PointId>) -> Result<Vec<PointId>> {
        let all = self.plan.preempt.clone();
        if self.test(&[], &all)? {
            return Ok(Vec::new());
        }
        let mut c = keys;
        let mut n = 2usize;
        while c.len() >= 2 && self.runs < self.max_runs {
            let chunk = c.len().div_ceil(n);
            let parts: Vec<Vec<PointId>> = c.chunks(chunk).map(|s| s.to_vec()).collect();
            let mut reduced = false;
            // Complements first: we want to remove preemptions.
            for i in 0..parts.len() {
                let comp: Vec<PointId> = parts
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .flat_map(|(_, p)| p.iter().copied())
                    .collect();
                if self.test(&comp, &all)? {
                    c = comp;
                    n = (n - 1).max(2);
                    reduced = true;
                    break;
                }
            }
            if !reduced && parts.len() > 2 {
                for p in &parts {
                    if self.test(p, &all)? {
                        c = p.clone();
                        n = 2;
                        reduced = true;
                        break;
                    }
                }
            }
            if !reduced {
                if n >= c.len() {
                    break;
                }
                n = (n * 2).min(c.len());
            }
        }
        if c.len() == 1 && self.runs < self.max_runs && self.test(&[], &all)? {
            c.clear();
        }
        Ok(c)
    }
}
