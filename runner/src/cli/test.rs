//! `heddle test`: the targets of a project file run like a test suite
//! ([`crate::suite`] runs the checks). One line per check, a summary,
//! optional JUnit XML, JSON and SARIF reports; exit 1 on any unexpected
//! verdict.

use crate::suite::{Check, Status, Suite, TestReport};
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

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

/// The label of a check's line.
fn label(s: Status) -> &'static str {
    match s {
        Status::Ok => "ok",
        Status::Unexpected => "FAIL",
        Status::Error => "ERR",
        Status::Skipped => "skip",
    }
}

/// Runs `heddle test`.
pub fn test_cmd(a: TestArgs) -> Result<i32> {
    crate::interrupt::install();
    let suite = Suite {
        project: a.project.clone(),
        only: a.only.clone(),
        seeds: a.seeds,
        fixed_seeds: a.fixed_seeds,
        jobs: super::jobs(a.jobs),
        out: a.out.clone(),
    };
    let report = suite.run(&mut print_check)?;
    let checks = &report.checks;
    let bad = report.count(Status::Unexpected);
    let (errors, skips) = (report.count(Status::Error), report.count(Status::Skipped));
    let secs = report.seconds;
    let mut extra = String::new();
    if errors > 0 {
        extra.push_str(&format!(", {errors} error"));
    }
    if skips > 0 {
        extra.push_str(&format!(", {skips} skipped"));
    }
    println!(
        "heddle test: {} targets, {} checks: {} ok, {bad} unexpected{extra} ({secs:.1}s)",
        report.targets,
        checks.len(),
        report.count(Status::Ok)
    );
    if let Some(p) = &a.junit {
        crate::report::junit::write_all(p, &junit_cases(checks))?;
    }
    if let Some(p) = &a.json {
        crate::paths::write_atomic(p, json_doc(&report)?.as_bytes())?;
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
        report.interrupted,
    ))
}

/// The `--json` report.
fn json_doc(report: &TestReport) -> Result<String> {
    let doc = serde_json::json!({
        "project": report.project.display().to_string(),
        "checks": report.checks,
        "ok": report.count(Status::Ok),
        "unexpected": report.count(Status::Unexpected),
        "error": report.count(Status::Error),
        "skipped": report.count(Status::Skipped),
        "seconds": report.seconds,
    });
    Ok(serde_json::to_string_pretty(&doc)?)
}

fn print_check(c: &Check) {
    for n in &c.notes {
        eprintln!("{n}");
    }
    println!(
        "{:<4} {:<18} {:<7} {}",
        label(c.status),
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
