//! `heddle plan` (run a schedule plan) and `heddle observe` (shared-access
//! summary to form a plan from).

use super::run::{print_output, RunOpts, TargetOpts};
use super::{InstrumentOpts, EXIT_BUG, EXIT_OK};
use crate::plan;
use crate::plan_run;
use crate::runtime::RunConfig;
use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};

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
            "no plan file among `{}` and `{}`: give a plan file (ending in .toml) and a target",
            a.display(),
            b.display()
        ),
    }
}

impl From<Expect> for plan_run::Expect {
    fn from(e: Expect) -> Self {
        match e {
            Expect::Triggered => plan_run::Expect::Triggered,
            Expect::Normal => plan_run::Expect::Normal,
        }
    }
}

/// `heddle plan`: runs a plan `--runs` times and reports per run and in total.
pub fn plan_cmd(a: PlanArgs) -> Result<i32> {
    let started = std::time::Instant::now();
    let json = a.format == crate::report::json::Format::Json;
    let mut text = super::text_out(json);
    let out = &mut *text;
    let (plan_path, target_path) = split_paths(&a.first, &a.second)?;
    let file = plan::load_file(&plan_path)?;
    if a.run.strategy.is_some() {
        bail!("`heddle plan` decides with the plan: --strategy does not apply (drop it)");
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
    let session = plan_run::Session {
        plan_path: &plan_path,
        file: &file,
        target: &t,
        program: &program,
        base: a.run.config(&args, 0)?,
        seed_start: a.seed_start,
        runs: a.runs,
        out: a.out.clone(),
    };
    let prepared = session.prepare()?;
    let plan = prepared.plan.clone();
    for l in plan_run::header_lines(&plan_path, &target_path, &plan) {
        writeln!(out, "{l}")?;
    }
    // A broken pipe ends the process (SIGPIPE); another write error of a
    // run's line is reported once the runs are done.
    let mut written = Ok(());
    let report = prepared.run(&mut |run| {
        if written.is_ok() {
            written = writeln!(out, "{}", plan_run::run_line(&plan, run));
        }
    })?;
    written?;
    for l in report.summary_lines() {
        writeln!(out, "{l}")?;
    }
    let triggered = report.triggered();
    if let Some(r) = triggered {
        let path = r.replay.clone().unwrap_or_default();
        writeln!(
            out,
            "first triggering run: seed {}: {}",
            r.seed,
            r.result.verdict.summary()
        )?;
        writeln!(out, "  replay: heddle replay {}", path.display())?;
        print_output(out, &r.result)?;
    }
    writeln!(
        out,
        "engaged (κS = {}, κΦ = ∅) in {} of {} runs",
        report.plan.events.len(),
        report.engaged(),
        report.runs.len()
    )?;
    let verdict = report.expectation(a.expect.map(Into::into));
    if let Some(l) = &verdict.line {
        writeln!(out, "{l}")?;
    }
    let code = if verdict.met { EXIT_OK } else { EXIT_BUG };
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
        let failure = verdict.why.clone().map(|why| {
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
                build: None,
                replay,
                report: None,
            });
        }
        let runs = &report.runs;
        doc.statistics = Statistics {
            runs: runs.len() as u64,
            failing: runs
                .iter()
                .filter(|r| r.result.verdict.is_failure())
                .count() as u64,
            elapsed_seconds: secs,
            runs_per_second: runs.len() as f64 / secs.max(1e-9),
            ..Statistics::default()
        };
        crate::report::json::emit(&doc);
    }
    Ok(code)
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

/// Arguments of `heddle hunt`.
#[derive(Args, Debug)]
pub struct HuntArgs {
    #[command(flatten)]
    pub target: TargetOpts,
    #[command(flatten)]
    pub run: RunOpts,
    /// Random runs to observe before generating plans.
    #[arg(long, default_value_t = 20)]
    pub observe: u64,
    /// Runs per candidate plan (seeds 0…N−1).
    #[arg(long, default_value_t = 5)]
    pub runs_per_plan: u64,
    /// Candidate plans to try at most.
    #[arg(long, default_value_t = 200)]
    pub max_plans: usize,
    /// Directory for the triggering plan and its replay file.
    #[arg(long, default_value = "heddle-out")]
    pub out: PathBuf,
}

/// `heddle hunt`: plans from observed conflicting accesses, tried cheapest
/// first; reports the plan that triggered the bug.
pub fn hunt_cmd(a: HuntArgs) -> Result<i32> {
    use std::io::Write as _;
    if a.run.strategy.is_some() {
        bail!("`heddle hunt` decides with its plans: --strategy does not apply (drop it)");
    }
    if a.observe == 0 || a.runs_per_plan == 0 || a.max_plans == 0 {
        bail!("--observe, --runs-per-plan and --max-plans must be at least 1");
    }
    let (t, program) = a.target.load()?;
    let base = program.calibrate(a.run.config(&a.target.args, 0)?)?;
    let hunt = crate::hunt::Hunt {
        target: &t,
        program: &program,
        base,
        observe: a.observe,
        runs_per_plan: a.runs_per_plan,
        max_plans: a.max_plans,
        out: a.out.clone(),
    };
    let verbose = super::global().verbose > 0;
    let mut out = std::io::stdout().lock();
    let report = hunt.run(&mut |tried, total| {
        if verbose {
            let _ = writeln!(
                out,
                "plan {}/{total}: {}: followed in {} of {} run(s)",
                tried.index,
                tried.candidate.text(),
                tried.followed,
                tried.runs
            );
        }
    })?;
    let shared = report.observed.variables.len();
    writeln!(
        out,
        "observed {} run(s): {} shared variable(s), {} candidate plan(s); tried {}",
        a.observe,
        shared,
        report.candidates,
        report.tried.len()
    )?;
    for (seed, summary) in report.observed_failures.iter().take(1) {
        writeln!(
            out,
            "note: observation run seed {seed} failed by itself ({} of {} did): {summary}",
            report.observed_failures.len(),
            a.observe
        )?;
    }
    if let (Some(f), Some(tried)) = (&report.found, report.tried.last()) {
        writeln!(
            out,
            "plan {} of {} triggered the bug: {}",
            tried.index,
            report.candidates,
            tried.candidate.text()
        )?;
        if let Some(h) = &tried.candidate.file.hypothesis {
            writeln!(out, "  hypothesis: {h}")?;
        }
        writeln!(
            out,
            "  seed {}: {}",
            f.run.seed,
            f.run.result.verdict.summary()
        )?;
        writeln!(
            out,
            "  plan: heddle plan {} {}",
            f.plan_file.display(),
            a.target.target.display()
        )?;
        if let Some(p) = &f.run.replay {
            writeln!(out, "  replay: heddle replay {}", p.display())?;
        }
        return Ok(EXIT_BUG);
    }
    if let Some((i, run)) = &report.incidental {
        writeln!(
            out,
            "no plan triggered the bug while followed; plan {i}'s run seed {} failed after leaving its plan: {}",
            run.seed,
            run.result.verdict.summary()
        )?;
        if let Some(p) = &run.replay {
            writeln!(out, "  replay: heddle replay {}", p.display())?;
        }
        return Ok(EXIT_BUG);
    }
    writeln!(out, "no plan triggered a failure")?;
    Ok(EXIT_OK)
}
