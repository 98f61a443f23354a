//! `heddle plan` (run a schedule plan) and `heddle observe` (shared-access
//! summary to form a plan from).

use super::run::{print_output, RunOpts, TargetOpts};
use super::{InstrumentOpts, EXIT_BUG, EXIT_OK};
use crate::plan::{self, Known, Plan};
use crate::runtime::{Program, RunConfig, RunResult};
use crate::sched::plan::{PlanProgress, PlanStrategy};
use crate::target;
use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Seeds of the plain random runs that learn a target's thread names and
/// labels before a plan is validated.
const PROBE_RUNS: u64 = 3;

/// What a plan run is expected to end with (`--expect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Expect {
    /// At least one run triggers the bug.
    Triggered,
    /// Every run ends normally, and at least one follows the whole plan.
    Normal,
}

/// Arguments of `heddle plan`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// The plan file (.toml) and the target, in either order.
    #[arg(value_name = "PLAN|TARGET")]
    pub first: PathBuf,
    #[arg(value_name = "TARGET|PLAN")]
    pub second: PathBuf,
    /// Number of runs (seeds).
    #[arg(long, default_value_t = 5)]
    pub runs: u64,
    /// First seed.
    #[arg(
        long = "seed",
        alias = "seed-start",
        value_name = "N",
        default_value_t = 0
    )]
    pub seed_start: u64,
    /// Turn the plan into a regression test: exit 1 unless the runs end as expected.
    #[arg(long, value_enum)]
    pub expect: Option<Expect>,
    /// Directory for the replay file of the first triggering run.
    #[arg(long, default_value = "heddle-out")]
    pub out: PathBuf,
    /// `json`: print one JSON document (docs/report-schema.json) on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::report::json::Format,
    /// Write (or merge into) a JUnit XML file: one test case for the plan.
    #[arg(long, value_name = "OUT.xml")]
    pub junit: Option<PathBuf>,
    /// Extra compiler flag for a source target (repeatable).
    #[arg(long = "cflag", value_name = "FLAG", allow_hyphen_values = true)]
    pub cflags: Vec<String>,
    /// Shorthand for `--cflag -DFIXED`.
    #[arg(long)]
    pub fixed: bool,
    #[command(flatten)]
    pub instrument: InstrumentOpts,
    #[command(flatten)]
    pub run: RunOpts,
    /// Arguments passed to the program (after `--`; default: the plan's `args`).
    #[arg(last = true)]
    pub args: Vec<String>,
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
    fn label(self) -> &'static str {
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

/// The plan file and the target among two paths.
fn split_paths(a: &Path, b: &Path) -> Result<(PathBuf, PathBuf)> {
    let is_toml = |p: &Path| p.extension().is_some_and(|e| e == "toml");
    match (is_toml(a), is_toml(b)) {
        (true, false) => Ok((a.to_path_buf(), b.to_path_buf())),
        (false, true) => Ok((b.to_path_buf(), a.to_path_buf())),
        (true, true) => bail!(
            "both `{}` and `{}` look like plan files; give one plan (.toml) and one target",
            a.display(),
            b.display()
        ),
        (false, false) => bail!(
            "no plan file among `{}` and `{}` (a plan file ends in .toml)",
            a.display(),
            b.display()
        ),
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
        known.threads = known.threads.max(r.threads);
        known
            .thread_names
            .extend(r.thread_names.iter().flatten().cloned());
        known
            .labels
            .extend(r.labels.iter().map(|(_, _, l)| l.clone()));
        merge(&mut coverage, &r.sites_hit);
    }
    known.thread_names.sort();
    known.thread_names.dedup();
    known.labels.sort();
    known.labels.dedup();
    let name = plan_path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "plan".into());
    let p = plan::validate(&name, file, &program.sites, &known)
        .map_err(|e| anyhow::anyhow!("{}: {}", plan_path.display(), super::one_line(&e)))?;
    Ok((p, coverage))
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

fn event_name(plan: &Plan, i: usize) -> String {
    match plan.events.get(i) {
        Some(e) => format!("{} ({})", e.name, e.text),
        None => format!("e{}", i + 1),
    }
}

/// κΦ as text.
fn kappa_phi(plan: &Plan, p: &PlanProgress) -> String {
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
fn bent_text(plan: &Plan, p: &PlanProgress) -> Option<String> {
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
fn stall_text(plan: &Plan, p: &PlanProgress) -> Option<String> {
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

/// `heddle plan`: runs a plan `--runs` times and reports per run and in total.
pub fn plan_cmd(a: PlanArgs) -> Result<i32> {
    let started = std::time::Instant::now();
    let json = a.format == crate::report::json::Format::Json;
    let guard = crate::report::json::TextToStderr::start(json);
    let (plan_path, target_path) = split_paths(&a.first, &a.second)?;
    let file = plan::load_file(&plan_path)?;
    if a.run.strategy != "random" {
        bail!("`heddle plan` decides with the plan: --strategy does not apply");
    }
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let topts = TargetOpts {
        target: target_path.clone(),
        cflags: a.cflags.clone(),
        fixed: a.fixed,
        instrument: a.instrument.clone(),
        args: a.args.clone(),
    };
    let (t, program) = topts.load()?;
    let args = if a.args.is_empty() {
        file.args.clone().unwrap_or_default()
    } else {
        a.args.clone()
    };
    let base = a.run.config(&args, 0)?;
    let (plan, mut coverage) = prepare(&plan_path, &file, &t, &program, &base)?;
    let plan = Arc::new(plan);
    let n = plan.events.len();
    println!(
        "plan {} on {}: {} ordering constraint(s), {} state constraint(s), stall budget {}",
        plan_path.display(),
        target_path.display(),
        n,
        plan.state_constraints(),
        plan.stall_budget
    );
    if let Some(h) = &plan.hypothesis {
        println!("hypothesis: {h}");
    }
    for e in &plan.events {
        println!("  {}: {}", e.name, e.text);
    }
    let mut runs: Vec<PlanRun> = Vec::new();
    for seed in a.seed_start..a.seed_start.saturating_add(a.runs) {
        let cfg = RunConfig {
            seed,
            ..base.clone()
        };
        let (result, progress) = run_plan(&program, &plan, &cfg)?;
        let new_sites = merge(&mut coverage, &result.sites_hit);
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
            run.replay = Some(write_replay(&a.out, &t, &program, &plan, &base, &run)?);
        }
        let (result, progress) = (&run.result, &run.progress);
        let mut line = format!(
            "seed {seed}: {} ({})  κS {}/{n}{}  κΦ {}  new coverage {new_sites} site(s)",
            ending.label(),
            result.verdict.summary(),
            progress.satisfied,
            if progress.bent.is_some() {
                " (bent)"
            } else {
                ""
            },
            kappa_phi(&plan, progress)
        );
        if let Some(s) = stall_text(&plan, progress) {
            line.push_str(&format!("\n    {s}"));
        }
        if let Some(s) = bent_text(&plan, progress) {
            line.push_str(&format!("\n    {s}"));
        }
        if let Some(p) = &run.replay {
            line.push_str(&format!("\n    θ: {}", p.display()));
        }
        println!("{line}");
        runs.push(run);
    }
    // Aggregate.
    let count = |e: Ending| runs.iter().filter(|r| r.ending == e).count();
    println!(
        "{} runs: {} triggered, {} normal, {} timeout, {} other",
        runs.len(),
        count(Ending::Triggered),
        count(Ending::Normal),
        count(Ending::Timeout),
        count(Ending::Other)
    );
    let mut dist = vec![0usize; n + 1];
    for r in &runs {
        dist[r.progress.satisfied.min(n)] += 1;
    }
    let dist_text: Vec<String> = dist
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, c)| **c > 0)
        .map(|(k, c)| format!("{k}/{n}: {c}"))
        .collect();
    println!("κS distribution: {}", dist_text.join(", "));
    let mut stalls = vec![0usize; n];
    for r in &runs {
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
        Some((i, c)) if *c > 0 => println!(
            "stalls most: {} in {c} of {} runs",
            event_name(&plan, i),
            runs.len()
        ),
        _ => {
            let bent = runs.iter().filter(|r| r.progress.bent.is_some()).count();
            if bent == 0 {
                println!("stalls most: none (every run satisfied the whole order)");
            } else {
                println!(
                    "stalls most: none, but forced events bent the order in {bent} of {} runs",
                    runs.len()
                );
            }
        }
    }
    for i in 0..n {
        let never = runs.iter().filter(|r| !r.progress.phi_held[i]).count();
        if never > 0 {
            println!(
                "κΦ: the state constraint of {} never held in {never} of {} runs",
                event_name(&plan, i),
                runs.len()
            );
        }
    }
    let triggered = runs.iter().find(|r| r.ending == Ending::Triggered);
    if let Some(r) = triggered {
        let path = r.replay.clone().unwrap_or_default();
        println!(
            "first triggering run: seed {}: {}",
            r.seed,
            r.result.verdict.summary()
        );
        println!("  replay: heddle replay {}", path.display());
        print_output(&r.result);
    }
    let engaged = runs
        .iter()
        .filter(|r| r.progress.followed(n) && r.progress.phi_never_held().is_empty())
        .count();
    println!(
        "engaged (κS = {n}, κΦ = ∅) in {engaged} of {} runs",
        runs.len()
    );
    let (code, failure) = expectation(&a, &runs, n, triggered.is_some(), count(Ending::Normal));
    let secs = started.elapsed().as_secs_f64();
    if let Some(path) = &a.junit {
        let name = format!(
            "{} on {}",
            plan_path.file_stem().unwrap_or_default().to_string_lossy(),
            target_path
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
        );
        let failure = failure.map(|why| {
            let mut text = why.clone();
            if let Some(r) = triggered {
                text.push_str(&format!(
                    "\nseed {}: {}",
                    r.seed,
                    r.result.verdict.summary()
                ));
                if let Some(p) = &r.replay {
                    text.push_str(&format!("\nreplay: heddle replay {}", p.display()));
                }
            }
            crate::report::junit::Outcome::Failure { message: why, text }
        });
        crate::report::junit::write(
            path,
            &crate::report::junit::Case {
                name,
                classname: "heddle.plan".into(),
                time: secs,
                outcome: failure.unwrap_or(crate::report::junit::Outcome::Pass),
            },
        )?;
    }
    if json {
        use crate::report::json::{Document, FailureDoc, Statistics, VerdictDoc};
        let mut doc = Document::new(
            "plan",
            &target_path.display().to_string(),
            &format!("plan:{}", plan_path.display()),
        );
        doc.result = if code == EXIT_OK { "pass" } else { "fail" };
        if let Some(r) = triggered {
            let verdict = VerdictDoc::of(&r.result.verdict);
            let replay = r.replay.as_ref().map(|p| p.display().to_string());
            doc.verdict = Some(verdict.clone());
            doc.seed = Some(r.seed);
            doc.replay = replay.clone();
            doc.failures.push(FailureDoc {
                seed: r.seed,
                verdict,
                replay_command: replay.as_ref().map(|p| format!("heddle replay {p}")),
                replay,
                report: None,
            });
        }
        doc.statistics = Statistics {
            runs: runs.len() as u64,
            failing: runs.iter().filter(|r| !r.result.verdict.is_pass()).count() as u64,
            elapsed_seconds: secs,
            runs_per_second: runs.len() as f64 / secs.max(1e-9),
            ..Statistics::default()
        };
        crate::report::json::emit(guard, &doc);
    }
    Ok(code)
}

/// The exit code of `heddle plan`, and why it is not success (for JUnit);
/// prints whether `--expect` was met.
fn expectation(
    a: &PlanArgs,
    runs: &[PlanRun],
    n: usize,
    triggered: bool,
    normal: usize,
) -> (i32, Option<String>) {
    let bug = |why: &str| (EXIT_BUG, Some(why.to_string()));
    match a.expect {
        None => {
            if triggered {
                bug("the plan triggered a failure")
            } else {
                (EXIT_OK, None)
            }
        }
        Some(Expect::Triggered) => {
            if triggered {
                println!("expectation met: the plan triggered the bug");
                (EXIT_OK, None)
            } else {
                println!("expectation failed: no run triggered the bug");
                bug("expectation failed: no run triggered the bug")
            }
        }
        Some(Expect::Normal) => {
            if normal != runs.len() {
                println!("expectation failed: not every run ended normally");
                bug("expectation failed: not every run ended normally")
            } else if runs.iter().all(|r| !r.progress.followed(n)) {
                println!("expectation failed: every run ended normally, but none followed the whole plan (the test would be vacuous)");
                bug("expectation failed: no run followed the whole plan")
            } else {
                println!("expectation met: every run ended normally");
                (EXIT_OK, None)
            }
        }
    }
}

/// Writes the replay file of a triggering run (re-run with diagnostics on,
/// which never changes decisions).
fn write_replay(
    out: &Path,
    t: &target::Target,
    program: &Program,
    plan: &Arc<Plan>,
    base: &RunConfig,
    r: &PlanRun,
) -> Result<PathBuf> {
    let cfg = RunConfig {
        seed: r.seed,
        diagnostics: true,
        ..base.clone()
    };
    let (detailed, _) = run_plan(program, plan, &cfg)?;
    if detailed.decisions != r.result.decisions {
        bail!(
            "internal error: plan run seed {} did not repeat its schedule with diagnostics on",
            r.seed
        );
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
    Ok(path)
}

/// Arguments of `heddle observe`.
#[derive(Args, Debug)]
pub struct ObserveArgs {
    #[command(flatten)]
    pub target: TargetOpts,
    #[command(flatten)]
    pub run: RunOpts,
    /// Number of random runs to observe.
    #[arg(long, default_value_t = 20)]
    pub runs: u64,
    /// First seed.
    #[arg(
        long = "seed",
        alias = "seed-start",
        value_name = "N",
        default_value_t = 0
    )]
    pub seed_start: u64,
    /// `json`: print the report as JSON.
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::report::json::Format,
    /// Same as `--format json`.
    #[arg(long, hide = true)]
    pub json: bool,
}

/// `heddle observe`: random runs with events recorded, summarised per shared variable.
pub fn observe_cmd(a: ObserveArgs) -> Result<i32> {
    let (_t, program) = a.target.load()?;
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let base = a.run.config(&a.target.args, 0)?;
    let base = program.calibrate(base)?;
    let mut obs = crate::observe::Observer::new(&program.sites);
    for seed in a.seed_start..a.seed_start.saturating_add(a.runs) {
        let r = program.run(&RunConfig {
            seed,
            record_events: true,
            ..base.clone()
        })?;
        obs.add_run(seed, &r);
    }
    let report = obs.report();
    if a.json || a.format == crate::report::json::Format::Json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.text());
    }
    Ok(EXIT_OK)
}
