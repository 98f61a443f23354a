//! `heddle test`: the targets of a project file run like a test suite.
//!
//! For each `[[target]]`: the plain build is fuzzed with its `hunt_strategy`
//! (a portfolio is allowed) over `hunt_seeds` seeds and must give its
//! `buggy` verdict kind (`pass`: every seed passes); the `-DFIXED` build, when
//! the entry has a `fixed` verdict, over `fixed_seeds` seeds must give that
//! one; and each of its `replays` must reproduce its recorded verdict. One
//! line per check, a summary, optional JUnit XML and JSON reports; exit 1 on
//! any unexpected verdict.

use super::fuzz::{calibrated_portfolio, load_replay};
use crate::campaign::{exec, SeedPlan, Shard};
use crate::instrument::Config as InstrumentConfig;
use crate::manifest::{Entry, Manifest};
use crate::plan_run;
use crate::reproduce;
use crate::runtime::{Program, RunConfig};
use crate::target;
use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `heddle test`.
#[derive(Args, Debug)]
pub struct TestArgs {
    /// The project file.
    #[arg(default_value = "heddle.toml")]
    pub project: PathBuf,
    /// Only these targets (repeatable).
    #[arg(long = "only", value_name = "NAME")]
    pub only: Vec<String>,
    /// Runs (seeds) per check, instead of each target's own budget.
    #[arg(long = "runs", alias = "seeds", value_name = "N")]
    pub seeds: Option<u64>,
    /// Runs per check of a fixed build (overrides --runs for those).
    #[arg(long = "fixed-runs", alias = "fixed-seeds", value_name = "N")]
    pub fixed_seeds: Option<u64>,
    /// Worker threads per campaign (default: all cores).
    #[arg(short, long)]
    pub jobs: Option<usize>,
    /// Directory for the campaigns (one subdirectory per check).
    #[arg(long, default_value = "heddle-out/test")]
    pub out: PathBuf,
    /// Write a JUnit XML report.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write a JSON report.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the failures as SARIF 2.1.0 (for code-scanning annotations).
    #[arg(long, value_name = "OUT.sarif")]
    pub sarif: Option<PathBuf>,
}

/// The outcome of one check.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Target name.
    pub target: String,
    /// `buggy`, `fixed` or `replay:<file>`.
    pub check: String,
    /// The verdict kind expected.
    pub expected: String,
    /// The verdict kind found (`pass` when every run passed).
    pub got: String,
    /// Whether `got` is what was expected.
    pub ok: bool,
    /// `ok`, `unexpected` (a bug, or a bug not found), `error` (runs failed
    /// inside heddle, so no verdict can be trusted) or `skipped`.
    pub status: Status,
    /// Runs made.
    pub runs: u64,
    /// The failing seed, if any.
    pub seed: Option<u64>,
    /// One line of detail.
    pub detail: String,
    /// The replay file of the failure, if any.
    pub replay: Option<String>,
    /// Seconds taken.
    pub seconds: f64,
}

/// What became of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The verdict expected.
    Ok,
    /// Another verdict.
    Unexpected,
    /// Runs failed inside heddle and nothing settled the check.
    Error,
    /// Not run: skipped by the project file, or stopped by a signal.
    Skipped,
}

impl Status {
    fn of(ok: bool) -> Status {
        if ok {
            Status::Ok
        } else {
            Status::Unexpected
        }
    }

    fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Unexpected => "FAIL",
            Status::Error => "ERR",
            Status::Skipped => "skip",
        }
    }
}

/// A check that did not run.
fn skipped(e: &Entry, check: String, expected: &str, why: String) -> Check {
    Check {
        target: e.name.clone(),
        check,
        expected: expected.into(),
        got: "skipped".into(),
        ok: false,
        status: Status::Skipped,
        runs: 0,
        seed: None,
        detail: why,
        replay: None,
        seconds: 0.0,
    }
}

/// Why the checks of `e` do not run, if they don't.
fn skip_reason(e: &Entry) -> Option<String> {
    if let Some(sig) = crate::interrupt::requested() {
        return Some(format!("stopped by {}", crate::interrupt::name(sig)));
    }
    e.skip.as_ref().map(|r| format!("skipped: {r}"))
}

/// Runs `heddle test`.
pub fn test_cmd(a: TestArgs) -> Result<i32> {
    if !a.project.exists() {
        bail!("{}: no such project file", a.project.display());
    }
    let m = Manifest::load(&a.project)?;
    for n in &a.only {
        if m.get(n).is_none() {
            bail!("{}: no target named `{n}`", a.project.display());
        }
    }
    if a.seeds == Some(0) || a.fixed_seeds == Some(0) {
        bail!("--runs and --fixed-runs must be at least 1");
    }
    let jobs = super::jobs(a.jobs);
    crate::interrupt::install();
    let started = Instant::now();
    let mut checks = Vec::new();
    let entries: Vec<&Entry> = m
        .targets
        .iter()
        .filter(|e| a.only.is_empty() || a.only.contains(&e.name))
        .collect();
    for e in &entries {
        let strategy = e.hunt_strategy.clone().unwrap_or_else(|| "random".into());
        crate::campaign::Portfolio::parse(&strategy)
            .with_context(|| format!("target `{}`", e.name))?;
        let mut variants = vec![("buggy", e.buggy.clone(), a.seeds.or(e.hunt_seeds))];
        if !e.fixed.is_empty() {
            let seeds = a.fixed_seeds.or(a.seeds).or(e.fixed_seeds).or(e.hunt_seeds);
            variants.push(("fixed", e.fixed.clone(), seeds));
        }
        for (variant, expected, seeds) in variants {
            let seeds = seeds.unwrap_or(100);
            let c = match skip_reason(e) {
                Some(why) => skipped(e, variant.into(), &expected, why),
                None => run_check(&m, e, variant, &expected, &strategy, seeds, jobs, &a.out)
                    .with_context(|| format!("target `{}` ({variant})", e.name))?,
            };
            print_check(&c);
            checks.push(c);
        }
        for r in &e.replays {
            let c = match skip_reason(e) {
                Some(why) => skipped(e, format!("replay:{r}"), "", why),
                None => replay_check(&m, e, r),
            };
            print_check(&c);
            checks.push(c);
        }
        for plan in &e.plans {
            let mut variants = vec![false];
            if !e.fixed.is_empty() {
                variants.push(true);
            }
            for fixed in variants {
                let c = match skip_reason(e) {
                    Some(why) => skipped(e, plan_check_name(plan, fixed), "", why),
                    None => plan_check(&m, e, plan, fixed, &a.out)?,
                };
                print_check(&c);
                checks.push(c);
            }
        }
    }
    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    let bad = count(Status::Unexpected);
    let (errors, skips) = (count(Status::Error), count(Status::Skipped));
    let secs = started.elapsed().as_secs_f64();
    let mut extra = String::new();
    if errors > 0 {
        extra.push_str(&format!(", {errors} error"));
    }
    if skips > 0 {
        extra.push_str(&format!(", {skips} skipped"));
    }
    println!(
        "heddle test: {} targets, {} checks: {} ok, {bad} unexpected{extra} ({secs:.1}s)",
        entries.len(),
        checks.len(),
        count(Status::Ok)
    );
    if let Some(p) = &a.junit {
        crate::report::junit::write_all(p, &junit_cases(&checks))?;
    }
    if let Some(p) = &a.json {
        let doc = serde_json::json!({
            "project": a.project.display().to_string(),
            "checks": checks,
            "ok": count(Status::Ok),
            "unexpected": bad,
            "error": errors,
            "skipped": skips,
            "seconds": secs,
        });
        crate::paths::write_atomic(p, serde_json::to_string_pretty(&doc)?.as_bytes())?;
    }
    let failures: Vec<super::show::Failure> = checks
        .iter()
        .filter(|c| c.status == Status::Unexpected)
        .filter_map(|c| {
            Some(super::show::Failure {
                replay: PathBuf::from(c.replay.as_ref()?),
                seed: c.seed,
                reason: None,
            })
        })
        .filter(|f| f.replay.is_file())
        .collect();
    super::show::report_failures(&mut std::io::stdout(), &failures, a.sarif.as_deref())?;
    Ok(super::campaign_exit(
        bad as u64,
        errors as u64,
        crate::interrupt::requested(),
    ))
}

fn print_check(c: &Check) {
    println!(
        "{:<4} {:<18} {:<7} {}",
        c.status.label(),
        c.target,
        c.check,
        c.detail
    );
    if c.status == Status::Unexpected {
        if let Some(r) = &c.replay {
            println!("     replay: heddle replay {r}");
        }
    }
}

/// The target of `e` (its `-DFIXED` build when `fixed`) and its program.
fn build(m: &Manifest, e: &Entry, fixed: bool) -> Result<(target::Target, Program)> {
    let t = target::load_entry(m, e, fixed)?;
    let program = Program::new(&t.bytes, &InstrumentConfig::default())?;
    Ok((t, program))
}

#[allow(clippy::too_many_arguments)]
fn run_check(
    m: &Manifest,
    e: &Entry,
    variant: &str,
    expected: &str,
    strategy: &str,
    seeds: u64,
    jobs: usize,
    out: &Path,
) -> Result<Check> {
    let started = Instant::now();
    let (t, program) = build(m, e, variant == "fixed")?;
    let mut base = RunConfig {
        args: e.args.clone(),
        ..RunConfig::default()
    };
    if let Some(s) = e.max_steps {
        base.max_steps = s;
    }
    let portfolio = calibrated_portfolio(&program, &base, strategy)?;
    let dir = out.join(format!("{}-{variant}", e.name));
    let c = exec::Campaign {
        target: &t,
        program: &program,
        base,
        portfolio,
        plan: SeedPlan {
            seed_start: 0,
            runs: Some(seeds),
            shard: Shard::WHOLE,
        },
        keep_going: false,
    };
    let o = c.run(&exec::Options {
        jobs,
        time_budget: None,
        out: dir.clone(),
        resume: false,
        progress: exec::Progress::Off,
    })?;
    let runs = o.summary.stats.runs;
    let strategy = o.summary.campaign.strategies.join(",");
    let first = o.failures.first().map(|(f, _)| f);
    let got = first.map_or("pass".to_string(), |f| f.kind.clone());
    let ok = got == expected;
    let errors = o.summary.stats.error_runs;
    let status = match (first, o.summary.error.first(), o.interrupted) {
        // A failure settles the check; a pass does not when runs failed
        // inside heddle or a signal cut the campaign short.
        (Some(_), _, _) => Status::of(ok),
        (None, Some(_), _) => Status::Error,
        (None, None, Some(_)) => Status::Skipped,
        (None, None, None) => Status::of(ok),
    };
    let detail = match (first, o.summary.error.first(), o.interrupted) {
        (None, Some(err), _) => format!(
            "{errors} of {runs} runs failed inside heddle; seed {}: {}",
            err.first_seed, err.message
        ),
        (None, None, Some(sig)) => format!(
            "stopped by {} after {runs} runs",
            crate::interrupt::name(sig)
        ),
        _ => String::new(),
    };
    let detail = if !detail.is_empty() {
        detail
    } else {
        match first {
            None if ok => format!("pass ({runs} runs, {strategy})"),
            None => format!("expected {expected}, but all {runs} runs passed ({strategy})"),
            Some(f) if ok => format!(
                "{} at seed {} ({runs} runs, {})",
                f.kind, f.first_seed, f.first_strategy
            ),
            Some(f) => format!(
                "expected {expected}, got {} at seed {}: {}",
                f.kind, f.first_seed, f.summary
            ),
        }
    };
    Ok(Check {
        target: e.name.clone(),
        check: variant.into(),
        expected: expected.into(),
        got,
        ok: status == Status::Ok,
        status,
        runs,
        seed: first.map(|f| f.first_seed),
        detail,
        replay: first
            .filter(|f| !f.replay.is_empty())
            .map(|f| dir.join(&f.replay).display().to_string()),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Runs of each plan check.
const PLAN_RUNS: u64 = 5;

/// The name of a plan check.
fn plan_check_name(plan: &str, fixed: bool) -> String {
    format!("plan:{plan}{}", if fixed { " (fixed)" } else { "" })
}

/// A plan named by the project, run in process: on the buggy build it
/// must trigger the bug (`--expect triggered`), on the fixed build no run
/// may trigger it (the fix may make the plan's order impossible, so
/// following it is not required there). The plan's report is kept as
/// `plan.log` in the check's directory.
fn plan_check(m: &Manifest, e: &Entry, plan: &str, fixed: bool, out: &Path) -> Result<Check> {
    let started = Instant::now();
    let expect = if fixed { "no failure" } else { "triggered" };
    let stem = Path::new(plan)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "plan".into());
    let dir = out.join(format!(
        "{}-plan-{stem}-{}",
        e.name,
        if fixed { "fixed" } else { "buggy" }
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let log = dir.join("plan.log");
    let plan_path = m.dir.join(plan);
    let source = m.source(e);
    let outcome = (|| -> Result<(plan_run::PlanReport, String)> {
        let file = crate::plan::load_file(&plan_path)?;
        let (t, program) = build(m, e, fixed)?;
        let args = if e.args.is_empty() {
            file.args.clone().unwrap_or_default()
        } else {
            e.args.clone()
        };
        let session = plan_run::Session {
            plan_path: &plan_path,
            file: &file,
            target: &t,
            program: &program,
            base: RunConfig {
                args,
                ..RunConfig::default()
            },
            seed_start: 0,
            runs: PLAN_RUNS,
            out: dir.clone(),
        };
        let prepared = session.prepare()?;
        let plan = prepared.plan.clone();
        let mut text = String::new();
        for l in plan_run::header_lines(&plan_path, &source, &plan) {
            text.push_str(&l);
            text.push('\n');
        }
        let report = prepared.run(&mut |run| {
            text.push_str(&plan_run::run_line(&plan, run));
            text.push('\n');
        })?;
        for l in report.summary_lines() {
            text.push_str(&l);
            text.push('\n');
        }
        Ok((report, text))
    })();
    let (got, status, detail, replay, text) = match outcome {
        Ok((report, mut text)) => {
            let expectation = (!fixed).then_some(plan_run::Expect::Triggered);
            let verdict = report.expectation(expectation);
            let summary = verdict
                .line
                .clone()
                .or_else(|| report.summary_lines().into_iter().next())
                .unwrap_or_default();
            if let Some(l) = &verdict.line {
                text.push_str(l);
                text.push('\n');
            }
            let got = if verdict.met {
                expect.to_string()
            } else {
                format!("not {expect}")
            };
            let replay = report
                .triggered()
                .and_then(|r| r.replay.as_ref())
                .map(|p| p.display().to_string());
            (got, Status::of(verdict.met), summary, replay, text)
        }
        Err(err) => {
            let msg = format!("cannot run the plan: {}", crate::text::one_line(&err));
            (
                "error".to_string(),
                Status::Unexpected,
                msg.clone(),
                None,
                msg,
            )
        }
    };
    crate::paths::write_atomic(&log, text.as_bytes())?;
    Ok(Check {
        target: e.name.clone(),
        check: plan_check_name(plan, fixed),
        expected: expect.into(),
        got,
        ok: status == Status::Ok,
        status,
        runs: PLAN_RUNS,
        seed: None,
        detail: format!("{detail} (log: {})", log.display()),
        replay,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// A replay file named by the project: it must reproduce its verdict.
fn replay_check(m: &Manifest, e: &Entry, file: &str) -> Check {
    let started = Instant::now();
    let path = m.dir.join(file);
    let mut c = Check {
        target: e.name.clone(),
        check: format!("replay:{file}"),
        expected: String::new(),
        got: String::new(),
        ok: false,
        status: Status::Unexpected,
        runs: 1,
        seed: None,
        detail: String::new(),
        replay: Some(path.display().to_string()),
        seconds: 0.0,
    };
    let result = (|| -> Result<(String, String, String, Option<String>)> {
        let rp = load_replay(
            &path,
            &reproduce::Options {
                target: Some(m.source(e)),
                dirs: Vec::new(),
            },
        )?;
        let r = rp.program.run(&rp.config)?;
        let diverged = r.divergence.as_ref().map(|d| {
            format!(
                "diverged at decision {}: expected thread {}, but {}",
                d.index,
                d.expected.tid(),
                d.actual
            )
        });
        Ok((
            rp.file.verdict.signature.clone(),
            r.verdict.signature(),
            r.verdict.kind().to_string(),
            diverged,
        ))
    })();
    match result {
        Ok((want, got, kind, diverged)) => {
            c.expected = want.clone();
            c.got = got.clone();
            c.ok = want == got && diverged.is_none();
            c.status = Status::of(c.ok);
            c.detail = match diverged {
                Some(d) => d,
                None if c.ok => format!("{kind} reproduced"),
                None => format!("recorded `{want}`, got `{got}`"),
            };
        }
        Err(err) => {
            c.detail = format!("cannot replay: {err:#}");
        }
    }
    c.seconds = started.elapsed().as_secs_f64();
    c
}

/// The checks as JUnit test cases: one per check, named by target and check.
fn junit_cases(checks: &[Check]) -> Vec<crate::report::junit::Case> {
    use crate::report::junit::Outcome;
    checks
        .iter()
        .map(|c| crate::report::junit::Case {
            name: format!("{} {}", c.target, c.check),
            classname: format!("heddle.test.{}", c.target),
            time: c.seconds,
            outcome: match c.status {
                Status::Ok => Outcome::Pass,
                Status::Unexpected => {
                    let mut text = format!("expected {}, got {}: {}", c.expected, c.got, c.detail);
                    if let Some(r) = &c.replay {
                        text.push_str(&format!("\nreplay: heddle replay {r}"));
                    }
                    Outcome::Failure {
                        message: c.detail.clone(),
                        text,
                    }
                }
                Status::Error => Outcome::Error {
                    message: c.detail.clone(),
                    text: c.detail.clone(),
                },
                Status::Skipped => Outcome::Skipped {
                    message: c.detail.clone(),
                },
            },
        })
        .collect()
}
