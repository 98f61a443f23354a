//! `heddle test`: a project file's checks as values.
//!
//! For each `[[target]]`: the plain build is fuzzed with its `hunt_strategy`
//! (a portfolio is allowed) over `hunt_seeds` seeds and must give its
//! `buggy` verdict kind (`pass`: every seed passes); the `-DFIXED` build, when
//! the entry has a `fixed` verdict, over `fixed_seeds` seeds must give that
//! one; each of its `replays` must reproduce its recorded verdict; and each
//! of its `plans` must trigger the bug on the plain build and must not on the
//! fixed one. [`Suite::run`] runs the checks in process and returns them as a
//! [`TestReport`]; `heddle test` prints a line per check, a summary, and
//! writes JUnit XML, JSON and SARIF from it.

use crate::campaign::{exec, SeedPlan, Shard};
use crate::fuzz::calibrated_portfolio;
use crate::instrument::Config as InstrumentConfig;
use crate::manifest::{Entry, Manifest};
use crate::plan_run;
use crate::reproduce;
use crate::runtime::{Program, RunConfig};
use crate::target;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Which checks of a project to run, and how.
#[derive(Debug, Clone)]
pub struct Suite {
    /// The project file.
    pub project: PathBuf,
    /// Only these targets (all when empty).
    pub only: Vec<String>,
    /// Runs (seeds) per check, instead of each target's own budget.
    pub seeds: Option<u64>,
    /// Runs per check of a fixed build (overrides `seeds` for those).
    pub fixed_seeds: Option<u64>,
    /// Worker threads per campaign.
    pub jobs: usize,
    /// Directory for the campaigns (one subdirectory per check).
    pub out: PathBuf,
}

/// What `heddle test` found: every check, in the order they ran.
#[derive(Debug, Clone)]
pub struct TestReport {
    /// The project file.
    pub project: PathBuf,
    /// Targets whose checks ran (or were skipped).
    pub targets: usize,
    /// The checks.
    pub checks: Vec<Check>,
    /// Seconds taken.
    pub seconds: f64,
    /// The signal that stopped the suite early, if one did.
    pub interrupted: Option<i32>,
}

impl TestReport {
    /// Checks with status `s`.
    pub fn count(&self, s: Status) -> usize {
        self.checks.iter().filter(|c| c.status == s).count()
    }
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
    /// One-line remarks about the check's inputs (a replay whose local
    /// rebuild differs, …); not part of the JSON report.
    #[serde(skip)]
    pub notes: Vec<String>,
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
        notes: Vec::new(),
    }
}

/// Why the checks of `e` do not run, if they don't.
fn skip_reason(e: &Entry) -> Option<String> {
    if let Some(sig) = crate::interrupt::requested() {
        return Some(format!("stopped by {}", crate::interrupt::name(sig)));
    }
    e.skip.as_ref().map(|r| format!("skipped: {r}"))
}

impl Suite {
    /// Runs the project's checks in process, calling `on_check` with each
    /// as it is done. A check whose target cannot be built or run is an
    /// error of the whole suite; a check's unexpected verdict is not.
    pub fn run(&self, on_check: &mut dyn FnMut(&Check)) -> Result<TestReport> {
        if !self.project.exists() {
            bail!("{}: no such project file", self.project.display());
        }
        let m = Manifest::load(&self.project)?;
        for n in &self.only {
            if m.get(n).is_none() {
                bail!("{}: no target named `{n}`", self.project.display());
            }
        }
        if self.seeds == Some(0) || self.fixed_seeds == Some(0) {
            bail!("--runs and --fixed-runs must be at least 1");
        }
        let started = Instant::now();
        let mut checks = Vec::new();
        let mut done = |c: Check| {
            on_check(&c);
            checks.push(c);
        };
        let entries: Vec<&Entry> = m
            .targets
            .iter()
            .filter(|e| self.only.is_empty() || self.only.contains(&e.name))
            .collect();
        for e in &entries {
            let strategy = e.hunt_strategy.clone().unwrap_or_else(|| "default".into());
            crate::campaign::Portfolio::parse(&strategy)
                .with_context(|| format!("target `{}`", e.name))?;
            let mut variants = vec![("buggy", e.buggy.clone(), self.seeds.or(e.hunt_seeds))];
            if !e.fixed.is_empty() {
                let seeds = self
                    .fixed_seeds
                    .or(self.seeds)
                    .or(e.fixed_seeds)
                    .or(e.hunt_seeds);
                variants.push(("fixed", e.fixed.clone(), seeds));
            }
            for (variant, expected, seeds) in variants {
                let seeds = seeds.unwrap_or(100);
                let c = match skip_reason(e) {
                    Some(why) => skipped(e, variant.into(), &expected, why),
                    None => run_check(
                        &m, e, variant, &expected, &strategy, seeds, self.jobs, &self.out,
                    )
                    .with_context(|| format!("target `{}` ({variant})", e.name))?,
                };
                done(c);
            }
            for r in &e.replays {
                let c = match skip_reason(e) {
                    Some(why) => skipped(e, format!("replay:{r}"), "", why),
                    None => replay_check(&m, e, r),
                };
                done(c);
            }
            for plan in &e.plans {
                let mut variants = vec![false];
                if !e.fixed.is_empty() {
                    variants.push(true);
                }
                for fixed in variants {
                    let c = match skip_reason(e) {
                        Some(why) => skipped(e, plan_check_name(plan, fixed), "", why),
                        None => plan_check(&m, e, plan, fixed, &self.out)?,
                    };
                    done(c);
                }
            }
        }
        Ok(TestReport {
            project: self.project.clone(),
            targets: entries.len(),
            checks,
            seconds: started.elapsed().as_secs_f64(),
            interrupted: crate::interrupt::requested(),
        })
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
    let plan = SeedPlan {
        seed_start: 0,
        runs: Some(seeds),
        shard: Shard::WHOLE,
    };
    let c = exec::Campaign::single(&t, &program, base, portfolio, plan, false);
    let o = c.run(&exec::Options {
        jobs,
        time_budget: None,
        started: None,
        out: dir.clone(),
        resume: false,
        journal: false,
        all_failing_seeds: false,
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
        notes: Vec::new(),
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
        notes: Vec::new(),
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
        notes: Vec::new(),
    };
    let result = (|| -> Result<(String, String, String, Option<String>)> {
        let report = reproduce::replay(
            &path,
            &reproduce::Options {
                target: Some(m.source(e)),
                dirs: Vec::new(),
            },
        )?;
        let (rp, r) = (&report.replay, &report.result);
        c.notes = rp.notes.clone();
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
