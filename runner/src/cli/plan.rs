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
            "no plan file among `{}` and `{}` (a plan file ends in .toml)",
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
                replay,
                report: None,
            });
        }
        let runs = &report.runs;
        doc.statistics = Statistics {
            runs: runs.len() as u64,
            failing: runs.iter().filter(|r| !r.result.verdict.is_pass()).count() as u64,
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
