//! Running a schedule plan against a target: the driver behind `heddle
//! plan` and the plan checks of `heddle test`. [`Session::prepare`] probes
//! the target and checks the plan against what the probes saw;
//! [`Prepared::run`] runs the plan once per seed (writing a replay file for
//! each run that triggers the bug) and returns every run with its progress
//! (ε, κS, κΦ) as a [`PlanReport`] whose aggregates, text and expectation
//! verdict the callers print or use.

use crate::plan::{self, Known, Plan};
use crate::runtime::{Program, RunConfig, RunResult};
use crate::sched::plan::{PlanProgress, PlanStrategy};
use crate::target;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Seeds of the plain random runs that learn a target's thread names and
/// labels before a plan is validated.
const PROBE_RUNS: u64 = 3;

/// What a plan run is expected to end with (`--expect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// At least one run triggers the bug.
    Triggered,
    /// Every run ends normally, and at least one follows the whole plan.
    Normal,
}

/// How a plan run ended (ε).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ending {
    /// The run passed.
    Normal,
    /// The run failed with the plan's bug (any failure but a hang, when the plan names none).
    Triggered,
    /// The run hit its step or virtual-time budget.
    Timeout,
    /// The run failed some other way.
    Other,
}

impl Ending {
    /// `normal`, `triggered`, `timeout`, `other`.
    pub fn label(self) -> &'static str {
        match self {
            Ending::Normal => "normal",
            Ending::Triggered => "triggered",
            Ending::Timeout => "timeout",
            Ending::Other => "other",
        }
    }
}

/// ε of a run's verdict under a plan whose bug is `bug`.
pub fn ending(plan: &Plan, r: &RunResult) -> Ending {
    let kind = r.verdict.kind();
    match kind {
        "pass" => Ending::Normal,
        "hang" => Ending::Timeout,
        k => match &plan.bug {
            Some(b) if b != k => Ending::Other,
            _ => Ending::Triggered,
        },
    }
}

/// Loads, probes and validates a plan for `program`. Errors name the file.
pub fn prepare(
    plan_path: &Path,
    file: &plan::PlanFile,
    t: &target::Target,
    program: &Program,
    base: &RunConfig,
) -> Result<(Plan, Vec<u64>)> {
    let mut known = Known {
        module: &t.bytes,
        ..Known::default()
    };
    let mut coverage: Vec<u64> = Vec::new();
    for seed in 0..PROBE_RUNS {
        let r = program.run(&RunConfig {
            seed,
            strategy: "random".into(),
            ..base.clone()
        })?;
        learn(&mut known, &r);
        merge(&mut coverage, &r.sites_hit);
    }
    settle(&mut known);
    let name = plan_path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "plan".into());
    let p = plan::validate(&name, file, &program.sites, &known)
        .map_err(|e| anyhow::anyhow!("{}: {}", plan_path.display(), crate::text::one_line(&e)))?;
    Ok((p, coverage))
}

/// Adds what run `r` showed (threads, their names, labels) to `known`.
pub fn learn(known: &mut Known, r: &RunResult) {
    known.threads = known.threads.max(r.threads);
    known
        .thread_names
        .extend(r.thread_names.iter().flatten().cloned());
    known
        .labels
        .extend(r.labels.iter().map(|(_, _, l)| l.clone()));
}

/// Sorts and deduplicates what [`learn`] gathered.
pub fn settle(known: &mut Known) {
    known.thread_names.sort();
    known.thread_names.dedup();
    known.labels.sort();
    known.labels.dedup();
}

fn merge(into: &mut Vec<u64>, bits: &[u64]) -> usize {
    if into.len() < bits.len() {
        into.resize(bits.len(), 0);
    }
    let mut new = 0;
    for (a, b) in into.iter_mut().zip(bits) {
        new += (b & !*a).count_ones() as usize;
        *a |= b;
    }
    new
}

/// One plan run: its result and how far the plan got.
pub struct PlanRun {
    /// The run's seed.
    pub seed: u64,
    /// What the run produced.
    pub result: RunResult,
    /// κS, κΦ and stalls.
    pub progress: PlanProgress,
    /// ε.
    pub ending: Ending,
    /// Sites this run reached that no earlier run (nor the probes) had.
    pub new_sites: usize,
    /// θ: the replay file written for a triggering run.
    pub replay: Option<PathBuf>,
}

/// Runs `plan` once with `seed`.
pub fn run_plan(
    program: &Program,
    plan: &Arc<Plan>,
    cfg: &RunConfig,
) -> Result<(RunResult, PlanProgress)> {
    let out = Arc::new(Mutex::new(PlanProgress::default()));
    let strategy = PlanStrategy::new(plan.clone(), out.clone());
    let r = program.run_with_strategy(cfg, Box::new(strategy))?;
    let progress = out.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Ok((r, progress))
}

/// An event's name and text, for messages.
pub fn event_name(plan: &Plan, i: usize) -> String {
    match plan.events.get(i) {
        Some(e) => format!("{} ({})", e.name, e.text),
        None => format!("e{}", i + 1),
    }
}

/// κΦ as text.
pub fn kappa_phi(plan: &Plan, p: &PlanProgress) -> String {
    let never = p.phi_never_held();
    if never.is_empty() {
        return "∅".into();
    }
    let names: Vec<String> = never
        .iter()
        .map(|&i| {
            let e = &plan.events[i];
            let texts: Vec<&str> = e.when.iter().map(|w| w.text.as_str()).collect();
            let unseen = if p.seen[i] {
                ""
            } else {
                ", event never occurred"
            };
            format!("{}: {}{unseen}", e.name, texts.join(" && "))
        })
        .collect();
    format!("{{{}}}", names.join("; "))
}

/// How a forced event bent the run's order, if one did.
pub fn bent_text(plan: &Plan, p: &PlanProgress) -> Option<String> {
    let (j, s) = p.bent?;
    let forced = match p.forced {
        0 => String::new(),
        1 => "; 1 decision forced a held thread".into(),
        k => format!("; {k} decisions forced a held thread"),
    };
    Some(format!(
        "order bent: {} ran before {}: no thread that could run was free to go instead{forced}",
        event_name(plan, j),
        event_name(plan, s),
    ))
}

/// Which constraint a run stopped at, and why (None when κS = n).
pub fn stall_text(plan: &Plan, p: &PlanProgress) -> Option<String> {
    if let Some((i, why)) = &p.abandoned {
        return Some(format!("stalled at {}: {why}", event_name(plan, *i)));
    }
    (p.satisfied < plan.events.len()).then(|| {
        format!(
            "stalled at {}: it did not happen before the run ended",
            event_name(plan, p.satisfied)
        )
    })
}

/// Writes the replay file of a triggering run (re-run with diagnostics on,
/// which never changes decisions) into `r.replay`, and gives the run the
/// re-run's verdict: the one the replay records, told with whole stacks.
pub fn write_replay(
    out: &Path,
    t: &target::Target,
    program: &Program,
    plan: &Arc<Plan>,
    base: &RunConfig,
    r: &mut PlanRun,
) -> Result<()> {
    let cfg = RunConfig {
        seed: r.seed,
        diagnostics: true,
        ..base.clone()
    };
    let (detailed, _) = run_plan(program, plan, &cfg)?;
    if detailed.decisions != r.result.decisions {
        return Err(crate::internal!(
            "plan run seed {} did not repeat its schedule with diagnostics on",
            r.seed
        ));
    }
    let mut file = crate::reproduce::record(t, program, &cfg, r.seed, &detailed)?;
    // The decisions are complete: the replay follows them, whatever decided them.
    file.run.strategy = "replay".into();
    let name = format!(
        "{}-plan-{}-{}-seed{}.toml",
        t.given
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "target".into()),
        plan.name,
        detailed.verdict.kind(),
        r.seed
    );
    let path = out.join(name);
    crate::reproduce::save(&path, &mut file, &t.bytes)?;
    r.replay = Some(path);
    r.result.verdict = detailed.verdict;
    Ok(())
}

/// What to run: a validated-on-load plan file against a loaded target.
pub struct Session<'a> {
    /// The plan file's path (its stem names the plan).
    pub plan_path: &'a Path,
    /// The parsed plan file.
    pub file: &'a plan::PlanFile,
    /// The target.
    pub target: &'a target::Target,
    /// The target's program.
    pub program: &'a Program,
    /// The run configuration (its seed is replaced per run).
    pub base: RunConfig,
    /// First seed.
    pub seed_start: u64,
    /// Runs (seeds).
    pub runs: u64,
    /// Where replay files of triggering runs go.
    pub out: PathBuf,
}

/// Every run of a session, and what they add up to.
pub struct PlanReport {
    /// The validated plan.
    pub plan: Arc<Plan>,
    /// The runs, in seed order.
    pub runs: Vec<PlanRun>,
}

/// Whether the runs met `--expect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectationVerdict {
    /// The runs are as expected (with no expectation: nothing triggered).
    pub met: bool,
    /// The line to print (`expectation met: …`), when an expectation was given.
    pub line: Option<String>,
    /// Why it is not met, in one line (for JUnit).
    pub why: Option<String>,
}

/// A session whose plan was probed and validated, ready to run.
pub struct Prepared<'a> {
    session: &'a Session<'a>,
    /// The validated plan.
    pub plan: Arc<Plan>,
    /// Sites reached so far (by the probes, then by the runs).
    coverage: Vec<u64>,
}

impl<'a> Session<'a> {
    /// Probes the target and validates the plan against what it saw.
    pub fn prepare(&'a self) -> Result<Prepared<'a>> {
        let (plan, coverage) = prepare(
            self.plan_path,
            self.file,
            self.target,
            self.program,
            &self.base,
        )?;
        Ok(Prepared {
            session: self,
            plan: Arc::new(plan),
            coverage,
        })
    }
}

impl Prepared<'_> {
    /// Runs the plan once per seed, calling `on_run` after each run.
    pub fn run(mut self, on_run: &mut dyn FnMut(&PlanRun)) -> Result<PlanReport> {
        let (s, plan) = (self.session, self.plan);
        let mut runs = Vec::new();
        for seed in s.seed_start..s.seed_start.saturating_add(s.runs) {
            let cfg = RunConfig {
                seed,
                ..s.base.clone()
            };
            let (result, progress) = run_plan(s.program, &plan, &cfg)?;
            let new_sites = merge(&mut self.coverage, &result.sites_hit);
            let ending = ending(&plan, &result);
            let mut run = PlanRun {
                seed,
                result,
                progress,
                ending,
                new_sites,
                replay: None,
            };
            if ending == Ending::Triggered {
                write_replay(&s.out, s.target, s.program, &plan, &s.base, &mut run)?;
            }
            on_run(&run);
            runs.push(run);
        }
        Ok(PlanReport { plan, runs })
    }
}

/// The lines that introduce a session: the plan, its constraints and events.
pub fn header_lines(plan_path: &Path, target_path: &Path, plan: &Plan) -> Vec<String> {
    let mut v = vec![format!(
        "plan {} on {}: {} ordering constraint(s), {} state constraint(s), stall budget {}",
        plan_path.display(),
        target_path.display(),
        plan.events.len(),
        plan.state_constraints(),
        plan.stall_budget
    )];
    if let Some(h) = &plan.hypothesis {
        v.push(format!("hypothesis: {h}"));
    }
    for e in &plan.events {
        v.push(format!("  {}: {}", e.name, e.text));
    }
    v
}

/// One run as text: ε, the verdict, κS, κΦ, new coverage, then where it
/// stalled or bent and its replay file.
pub fn run_line(plan: &Plan, run: &PlanRun) -> String {
    let n = plan.events.len();
    let (result, progress) = (&run.result, &run.progress);
    let mut line = format!(
        "seed {}: {} ({})  κS {}/{n}{}  κΦ {}  new coverage {} site(s)",
        run.seed,
        run.ending.label(),
        result.verdict.summary(),
        progress.satisfied,
        if progress.bent.is_some() {
            " (bent)"
        } else {
            ""
        },
        kappa_phi(plan, progress),
        run.new_sites
    );
    if let Some(s) = stall_text(plan, progress) {
        line.push_str(&format!("\n    {s}"));
    }
    if let Some(s) = bent_text(plan, progress) {
        line.push_str(&format!("\n    {s}"));
    }
    if let Some(p) = &run.replay {
        line.push_str(&format!("\n    θ: {}", p.display()));
    }
    line
}

impl PlanReport {
    /// Runs that ended with `e`.
    pub fn count(&self, e: Ending) -> usize {
        self.runs.iter().filter(|r| r.ending == e).count()
    }

    /// The first run that triggered the bug.
    pub fn triggered(&self) -> Option<&PlanRun> {
        self.runs.iter().find(|r| r.ending == Ending::Triggered)
    }

    /// Runs that followed the whole order with every state constraint held.
    pub fn engaged(&self) -> usize {
        let n = self.plan.events.len();
        self.runs
            .iter()
            .filter(|r| r.progress.followed(n) && r.progress.phi_never_held().is_empty())
            .count()
    }

    /// The aggregate lines: endings, κS distribution, where runs stalled
    /// most, the state constraints that never held.
    pub fn summary_lines(&self) -> Vec<String> {
        let (plan, runs) = (&self.plan, &self.runs);
        let n = plan.events.len();
        let mut v = vec![format!(
            "{} runs: {} triggered, {} normal, {} timeout, {} other",
            runs.len(),
            self.count(Ending::Triggered),
            self.count(Ending::Normal),
            self.count(Ending::Timeout),
            self.count(Ending::Other)
        )];
        let mut dist = vec![0usize; n + 1];
        for r in runs {
            dist[r.progress.satisfied.min(n)] += 1;
        }
        let dist_text: Vec<String> = dist
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, c)| **c > 0)
            .map(|(k, c)| format!("{k}/{n}: {c}"))
            .collect();
        v.push(format!("κS distribution: {}", dist_text.join(", ")));
        let mut stalls = vec![0usize; n];
        for r in runs {
            if r.progress.satisfied < n {
                let i = r
                    .progress
                    .abandoned
                    .as_ref()
                    .map(|(i, _)| *i)
                    .unwrap_or(r.progress.satisfied);
                stalls[i.min(n - 1)] += 1;
            }
        }
        match stalls
            .iter()
            .enumerate()
            .max_by_key(|(i, c)| (**c, usize::MAX - i))
        {
            Some((i, c)) if *c > 0 => v.push(format!(
                "stalls most: {} in {c} of {} runs",
                event_name(plan, i),
                runs.len()
            )),
            _ => {
                let bent = runs.iter().filter(|r| r.progress.bent.is_some()).count();
                if bent == 0 {
                    v.push("stalls most: none (every run satisfied the whole order)".into());
                } else {
                    v.push(format!(
                        "stalls most: none, but forced events bent the order in {bent} of {} runs",
                        runs.len()
                    ));
                }
            }
        }
        for i in 0..n {
            let never = runs.iter().filter(|r| !r.progress.phi_held[i]).count();
            if never > 0 {
                v.push(format!(
                    "κΦ: the state constraint of {} never held in {never} of {} runs",
                    event_name(plan, i),
                    runs.len()
                ));
            }
        }
        v
    }

    /// Whether the runs meet `expect` (with none: no run may trigger).
    pub fn expectation(&self, expect: Option<Expect>) -> ExpectationVerdict {
        let n = self.plan.events.len();
        let verdict = |met: bool, line: Option<&str>, why: Option<&str>| ExpectationVerdict {
            met,
            line: line.map(str::to_string),
            why: why.map(str::to_string),
        };
        let triggered = self.triggered().is_some();
        match expect {
            None if triggered => verdict(false, None, Some("the plan triggered a failure")),
            None => verdict(true, None, None),
            Some(Expect::Triggered) if triggered => verdict(
                true,
                Some("expectation met: the plan triggered the bug"),
                None,
            ),
            Some(Expect::Triggered) => verdict(
                false,
                Some("expectation failed: no run triggered the bug"),
                Some("expectation failed: no run triggered the bug"),
            ),
            Some(Expect::Normal) if self.count(Ending::Normal) != self.runs.len() => verdict(
                false,
                Some("expectation failed: not every run ended normally"),
                Some("expectation failed: not every run ended normally"),
            ),
            Some(Expect::Normal) if self.runs.iter().all(|r| !r.progress.followed(n)) => verdict(
                false,
                Some("expectation failed: every run ended normally, but none followed the whole plan (the test would be vacuous)"),
                Some("expectation failed: no run followed the whole plan"),
            ),
            Some(Expect::Normal) => verdict(
                true,
                Some("expectation met: every run ended normally"),
                None,
            ),
        }
    }
}
