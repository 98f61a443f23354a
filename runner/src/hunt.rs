//! `heddle hunt`: ordering plans generated from observations and tried
//! cheapest first — REINS's loop (observe, hypothesise, plan, run) without a
//! language model.
//!
//! [`observe`](crate::observe) reports, per shared variable, the pairs of
//! accesses from different threads that conflict (or are serialised by a
//! common lock, in either order) and in how many runs each order was seen.
//! Every such pair, for every pair of threads seen at it, gives two
//! *orders* (`a ≺ b` and `b ≺ a`); each order is a two-event plan, two
//! orders that share an event chain into a three-event plan, and two
//! disjoint orders make a four-event plan. Plans are tried fewest events
//! first and, among equals, the order seen in fewest observed runs first
//! (what random scheduling rarely does is where bugs hide). A plan counts
//! as having triggered the bug only when a run followed its whole order and
//! failed; a run that failed after its plan was abandoned is kept as a
//! failure found along the way.

use crate::observe::{PairReport, PointReport, Report};
use crate::plan::{self, EventSpec, Known, PlanFile, ThreadSpec};
use crate::plan_run::{self, Ending, PlanRun};
use crate::runtime::{Program, RunConfig, RunResult};
use crate::target::Target;
use anyhow::Result;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One access of an order: a thread at a site.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    /// Spawn index.
    pub thread: u32,
    /// `R`, `W`, `RMW` or `copy`.
    pub access: String,
    /// `file:line`.
    pub site: String,
    /// The global it touches, when it is one.
    pub var: Option<String>,
}

impl Access {
    fn of(p: &PointReport, thread: u32, var: Option<&str>) -> Access {
        Access {
            thread,
            access: p.access.clone(),
            site: p.site.clone(),
            var: var.map(str::to_string),
        }
    }

    fn spec(&self, name: String) -> EventSpec {
        EventSpec {
            name: Some(name),
            thread: Some(ThreadSpec::Index(self.thread)),
            at: Some(self.site.clone()),
            kind: Some(
                match self.access.as_str() {
                    "R" => "read",
                    "W" => "write",
                    "RMW" => "rmw",
                    _ => "access",
                }
                .into(),
            ),
            var: self.var.clone(),
            ..EventSpec::default()
        }
    }

    fn text(&self) -> String {
        format!("t{} {} {}", self.thread, self.access, self.site)
    }
}

/// `before ≺ after`, and in how many observed runs it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Order {
    before: Access,
    after: Access,
    seen: u64,
    variable: String,
}

/// The orders of one pair report.
fn orders_of(pair: &PairReport, variable: &str, global: bool) -> Vec<Order> {
    let var = global.then_some(variable);
    let mut v = Vec::new();
    for &[ta, tb] in &pair.threads {
        if ta == tb {
            continue;
        }
        let a = Access::of(&pair.first, ta, var);
        let b = Access::of(&pair.second, tb, var);
        v.push(Order {
            before: a.clone(),
            after: b.clone(),
            seen: pair.runs_first_before_second,
            variable: variable.to_string(),
        });
        v.push(Order {
            before: b,
            after: a,
            seen: pair.runs_second_before_first,
            variable: variable.to_string(),
        });
    }
    v
}

/// A candidate plan.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The plan, as a plan file would hold it.
    pub file: PlanFile,
    /// The accesses in order (empty for a lock cycle).
    pub events: Vec<Access>,
    /// Each event as text.
    pub text: Vec<String>,
    /// Observed runs in which its orders happened (summed).
    pub seen: u64,
}

impl Candidate {
    fn new(chain: Vec<Access>, seen: u64, variables: &[&str], args: &[String]) -> Candidate {
        let text: Vec<String> = chain.iter().map(Access::text).collect();
        let mut vars: Vec<&str> = variables.to_vec();
        vars.dedup();
        let file = PlanFile {
            hypothesis: Some(format!(
                "the bug needs {} (on {}), an order seen in {seen} observed run(s)",
                text.join(" ≺ "),
                vars.join(", ")
            )),
            bug: None,
            args: Some(args.to_vec()),
            stall_budget: None,
            order: chain
                .iter()
                .enumerate()
                .map(|(i, a)| a.spec(format!("e{}", i + 1)))
                .collect(),
        };
        Candidate {
            file,
            events: chain,
            text,
            seen,
        }
    }

    /// `t1 R f.c:40 ≺ t2 W f.c:44`.
    pub fn text(&self) -> String {
        self.text.join(" ≺ ")
    }
}

/// Lock-order edges of one run: (thread, a lock it held, a lock it then
/// asked for), by address.
pub fn lock_edges(r: &RunResult, into: &mut BTreeSet<(u32, u32, u32)>) {
    use crate::model::EventKind;
    let mut held: std::collections::BTreeMap<u32, BTreeSet<u32>> = Default::default();
    for e in &r.events {
        let h = held.entry(e.tid).or_default();
        match e.kind {
            EventKind::Lock | EventKind::Acquire => {
                for &x in h.iter().filter(|&&x| x != e.addr) {
                    into.insert((e.tid, x, e.addr));
                }
                h.insert(e.addr);
            }
            EventKind::Unlock => {
                h.remove(&e.addr);
            }
            _ => {}
        }
    }
}

/// Plans that close a cycle of the lock-order graph (two or three threads
/// each holding one lock of the cycle and asking for the next): each
/// thread takes its first lock, in turn, then each asks for its second.
fn lock_cycle_plans(
    edges: &BTreeSet<(u32, u32, u32)>,
    sites: &crate::instrument::SiteTable,
    args: &[String],
) -> Vec<Candidate> {
    let name = |addr: u32| match sites.symbol_at(addr) {
        Some(s) if s.addr == addr => format!("{}:4", s.name),
        Some(s) => format!("{}+{}:4", s.name, addr - s.addr),
        None => format!("{addr:#x}:4"),
    };
    let e: Vec<&(u32, u32, u32)> = edges.iter().collect();
    let mut cycles: Vec<Vec<(u32, u32, u32)>> = Vec::new();
    for a in &e {
        for b in &e {
            if a.0 < b.0 && a.2 == b.1 && b.2 == a.1 {
                cycles.push(vec![**a, **b]);
            }
            for c in &e {
                let threads: BTreeSet<u32> = [a.0, b.0, c.0].into();
                let locks: BTreeSet<u32> = [a.1, b.1, c.1].into();
                // One rotation of each cycle: the thread of the least id first.
                if threads.len() == 3
                    && locks.len() == 3
                    && a.0 < b.0.min(c.0)
                    && a.2 == b.1
                    && b.2 == c.1
                    && c.2 == a.1
                {
                    cycles.push(vec![**a, **b, **c]);
                }
            }
        }
    }
    cycles
        .into_iter()
        .map(|cycle| {
            let take = |(t, x, _): &(u32, u32, u32)| (*t, *x);
            let ask = |(t, _, y): &(u32, u32, u32)| (*t, *y);
            let steps: Vec<(u32, u32)> = cycle
                .iter()
                .map(take)
                .chain(cycle.iter().map(ask))
                .collect();
            let text: Vec<String> = steps
                .iter()
                .map(|(t, l)| format!("t{t} lock {}", name(*l).trim_end_matches(":4")))
                .collect();
            let order = steps
                .iter()
                .enumerate()
                .map(|(i, (t, l))| EventSpec {
                    name: Some(format!("e{}", i + 1)),
                    thread: Some(ThreadSpec::Index(*t)),
                    kind: Some("lock".into()),
                    var: Some(name(*l)),
                    ..EventSpec::default()
                })
                .collect();
            Candidate {
                file: PlanFile {
                    hypothesis: Some(format!(
                        "a lock-order cycle among {} threads: {}",
                        cycle.len(),
                        text.join(" ≺ ")
                    )),
                    bug: Some("deadlock".into()),
                    args: Some(args.to_vec()),
                    stall_budget: None,
                    order,
                },
                events: Vec::new(),
                text,
                seen: 0,
            }
        })
        .collect()
}

/// How many orders (the rarest) are combined into pairs of pairs.
const COMBINED: usize = 12;

/// The candidate plans of an observation, cheapest first, at most `max`.
/// `args` are the program arguments the plans are written for.
pub fn candidates(report: &Report, args: &[String], max: usize) -> Vec<Candidate> {
    let mut orders: Vec<Order> = Vec::new();
    for v in &report.variables {
        let global = v.class == "global";
        for pair in v.conflicting_pairs.iter().chain(&v.lock_ordered_pairs) {
            for o in orders_of(pair, &v.name, global) {
                if !orders
                    .iter()
                    .any(|x| x.before == o.before && x.after == o.after)
                {
                    orders.push(o);
                }
            }
        }
    }
    // Rarest first; the observation's order breaks ties.
    orders.sort_by_key(|o| o.seen);
    let mut out: Vec<(usize, u64, usize, Candidate)> = Vec::new();
    let mut push = |chain: Vec<Access>, seen: u64, vars: &[&str]| {
        let n = out.len();
        out.push((
            chain.len(),
            seen,
            n,
            Candidate::new(chain, seen, vars, args),
        ));
    };
    for o in &orders {
        push(
            vec![o.before.clone(), o.after.clone()],
            o.seen,
            &[&o.variable],
        );
    }
    // Pairs of pairs: any two orders between the same two threads (an
    // atomicity violation: one thread's two accesses split by the other's),
    // and any two of the rarest orders.
    let threads = |o: &Order| {
        let (a, b) = (o.before.thread, o.after.thread);
        (a.min(b), a.max(b))
    };
    for (i, x) in orders.iter().enumerate() {
        for (j, y) in orders.iter().enumerate() {
            let rare = i < COMBINED && j < COMBINED;
            if i == j || !(rare || threads(x) == threads(y)) {
                continue;
            }
            let seen = x.seen + y.seen;
            let vars = [x.variable.as_str(), y.variable.as_str()];
            if x.after == y.before && x.before != y.after {
                push(
                    vec![x.before.clone(), x.after.clone(), y.after.clone()],
                    seen,
                    &vars,
                );
            } else {
                let all = [&x.before, &x.after, &y.before, &y.after];
                let distinct: BTreeSet<&Access> = all.iter().copied().collect();
                if distinct.len() == 4 {
                    push(all.iter().map(|a| (*a).clone()).collect(), seen, &vars);
                }
            }
        }
    }
    out.sort_by_key(|(n, seen, i, _)| (*n, *seen, *i));
    out.into_iter().take(max).map(|(.., c)| c).collect()
}

/// What to hunt.
pub struct Hunt<'a> {
    /// The target.
    pub target: &'a Target,
    /// Its program.
    pub program: &'a Program,
    /// The run configuration (seed replaced per run), calibrated.
    pub base: RunConfig,
    /// Observation runs (random, seeds `0..observe`).
    pub observe: u64,
    /// Runs per plan (seeds `0..runs_per_plan`).
    pub runs_per_plan: u64,
    /// Plans to try at most.
    pub max_plans: usize,
    /// Where the triggering plan and its replay file go.
    pub out: PathBuf,
}

/// One plan tried.
pub struct Tried {
    /// Its place among the candidates (1-based).
    pub index: usize,
    /// The candidate.
    pub candidate: Candidate,
    /// Runs that followed the whole order.
    pub followed: u64,
    /// Runs made.
    pub runs: u64,
}

/// The plan that triggered the bug, with its run.
/// Its plan is the last one tried ([`HuntReport::tried`]).
pub struct Found {
    /// The plan file written (`heddle plan` reruns it).
    pub plan_file: PathBuf,
    /// The triggering run.
    pub run: PlanRun,
}

/// What a hunt did.
pub struct HuntReport {
    /// The observation.
    pub observed: Report,
    /// Observation runs that failed by themselves: (seed, verdict summary).
    pub observed_failures: Vec<(u64, String)>,
    /// Candidates generated (before `max_plans`).
    pub candidates: usize,
    /// Each plan tried, in order.
    pub tried: Vec<Tried>,
    /// The first plan whose run followed it and failed.
    pub found: Option<Found>,
    /// The first run that failed without following its plan (the plan
    /// was abandoned or bent): (plan index, run), with its replay file.
    pub incidental: Option<(usize, PlanRun)>,
}

impl Hunt<'_> {
    /// Observes, generates the candidates and tries them until one triggers;
    /// `on_plan` is called after each plan.
    pub fn run(&self, on_plan: &mut dyn FnMut(&Tried, usize)) -> Result<HuntReport> {
        let mut obs = crate::observe::Observer::new(&self.program.sites);
        let mut known = Known {
            module: &self.target.bytes,
            ..Known::default()
        };
        let mut observed_failures = Vec::new();
        let mut edges = BTreeSet::new();
        for seed in 0..self.observe {
            let r = self.program.run(&RunConfig {
                seed,
                strategy: "random".into(),
                record_events: true,
                ..self.base.clone()
            })?;
            plan_run::learn(&mut known, &r);
            lock_edges(&r, &mut edges);
            if r.verdict.is_failure() {
                observed_failures.push((seed, r.verdict.summary()));
            }
            obs.add_run(seed, &r);
        }
        plan_run::settle(&mut known);
        let observed = obs.report();
        // Lock-order cycles first: an inversion observed is a strong hint.
        let mut all = lock_cycle_plans(&edges, &self.program.sites, &self.base.args);
        all.extend(candidates(&observed, &self.base.args, usize::MAX));
        let total = all.len();
        let mut report = HuntReport {
            observed,
            observed_failures,
            candidates: total,
            tried: Vec::new(),
            found: None,
            incidental: None,
        };
        let stem = self
            .target
            .given
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "target".into());
        for (i, c) in all.into_iter().take(self.max_plans).enumerate() {
            let name = format!("hunt-{stem}-{}", i + 1);
            // A candidate the module cannot resolve (a site shared by
            // several functions, say) is skipped, not an error.
            let Ok(plan) = plan::validate(&name, &c.file, &self.program.sites, &known) else {
                continue;
            };
            let plan = Arc::new(plan);
            let n = plan.events.len();
            let mut tried = Tried {
                index: i + 1,
                candidate: c,
                followed: 0,
                runs: 0,
            };
            let mut hit = None;
            for seed in 0..self.runs_per_plan {
                let cfg = RunConfig {
                    seed,
                    ..self.base.clone()
                };
                let (result, progress) = plan_run::run_plan(self.program, &plan, &cfg)?;
                tried.runs += 1;
                let followed = progress.followed(n);
                tried.followed += followed as u64;
                let ending = plan_run::ending(&plan, &result);
                if ending != Ending::Triggered {
                    continue;
                }
                let mut run = PlanRun {
                    seed,
                    result,
                    progress,
                    ending,
                    new_sites: 0,
                    replay: None,
                };
                if !followed && report.incidental.is_some() {
                    continue;
                }
                plan_run::write_replay(
                    &self.out,
                    self.target,
                    self.program,
                    &plan,
                    &self.base,
                    &mut run,
                )?;
                if followed {
                    hit = Some(run);
                    break;
                }
                report.incidental = Some((i + 1, run));
            }
            on_plan(&tried, total);
            if let Some(run) = hit {
                let plan_file = self.out.join(format!("{name}.toml"));
                write_plan(&plan_file, &tried.candidate.file)?;
                report.found = Some(Found { plan_file, run });
            }
            report.tried.push(tried);
            if report.found.is_some() {
                break;
            }
        }
        Ok(report)
    }
}

/// Writes a plan file `heddle plan` reads back.
fn write_plan(path: &Path, file: &PlanFile) -> Result<()> {
    let text = format!(
        "# Generated by `heddle hunt` from observed runs.\n{}",
        toml::to_string(file)?
    );
    crate::paths::write_atomic(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::VarReport;

    fn point(access: &str, line: u32) -> PointReport {
        PointReport {
            access: access.into(),
            site: format!("p.c:{line}"),
            function: "f".into(),
        }
    }

    fn pair(a: PointReport, b: PointReport, ab: u64, ba: u64) -> PairReport {
        PairReport {
            first: a,
            second: b,
            threads: vec![[1, 2]],
            common_locks: Vec::new(),
            runs_first_before_second: ab,
            runs_second_before_first: ba,
        }
    }

    fn var(name: &str, pairs: Vec<PairReport>) -> VarReport {
        VarReport {
            name: name.into(),
            class: "global".into(),
            threads: 2,
            sites: 2,
            runs: 10,
            listed_seed: 0,
            accesses: Vec::new(),
            conflicting_pairs: pairs,
            lock_ordered_pairs: Vec::new(),
        }
    }

    /// Each pair in both orders, the rarer first; then chains and pairs of
    /// pairs, never before a shorter plan.
    #[test]
    fn candidates_are_cheapest_first() {
        let report = Report {
            runs: 10,
            seeds: (0..10).collect(),
            variables: vec![
                var("x", vec![pair(point("R", 1), point("W", 2), 10, 0)]),
                var("y", vec![pair(point("W", 3), point("R", 4), 7, 3)]),
            ],
        };
        let c = candidates(&report, &[], usize::MAX);
        let texts: Vec<String> = c.iter().map(Candidate::text).collect();
        assert_eq!(texts[0], "t2 W p.c:2 ≺ t1 R p.c:1", "{texts:?}");
        assert_eq!(texts[1], "t2 R p.c:4 ≺ t1 W p.c:3");
        assert_eq!(texts[2], "t1 W p.c:3 ≺ t2 R p.c:4");
        assert_eq!(texts[3], "t1 R p.c:1 ≺ t2 W p.c:2");
        let sizes: Vec<usize> = c.iter().map(|c| c.events.len()).collect();
        assert!(sizes.windows(2).all(|w| w[0] <= w[1]), "{sizes:?}");
        assert!(sizes.contains(&4), "{sizes:?}");
        // A plan file: thread, site, access kind and the global.
        let e = &c[0].file.order[0];
        assert_eq!(e.thread, Some(ThreadSpec::Index(2)));
        assert_eq!(e.at.as_deref(), Some("p.c:2"));
        assert_eq!(e.kind.as_deref(), Some("write"));
        assert_eq!(e.var.as_deref(), Some("x"));
        let text = toml::to_string(&c[0].file).unwrap();
        assert!(plan::parse_file(&text).is_ok(), "{text}");
        assert_eq!(candidates(&report, &[], 3).len(), 3);
    }
}
