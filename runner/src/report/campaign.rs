//! What a fuzzing campaign found, as report values: the HTML report beside
//! each failure's replay file, a document per failure and per distinct data
//! race, and the JUnit outcome. `heddle fuzz` renders these; a library user
//! gets the same values.

use super::json::{FailureDoc, RaceDoc, VerdictDoc};
use super::junit::Outcome;
use crate::campaign::exec::{Campaign, Outcome as Session};
use crate::campaign::summary::Summary;
use crate::runtime::RunConfig;
use anyhow::Result;
use std::path::{Path, PathBuf};

/// Writes the HTML report next to each failure's replay file; returns its
/// path per failure (None when there is no replay file, or the run is too
/// long to draw — a hang at the step budget, typically).
pub fn write_reports(c: &Campaign, o: &Session, out: &Path) -> Result<Vec<Option<PathBuf>>> {
    let mut paths = Vec::new();
    for (f, detailed) in &o.failures {
        let html = match detailed {
            Some(r) if !f.replay.is_empty() && r.steps <= super::MAX_REPORT_STEPS => {
                let replay = out.join(&f.replay);
                let html = replay.with_extension("html");
                // The diagnostic run's decisions, forced: a learning
                // strategy's run depends on a corpus the report does not have.
                let a = c.assign(f.first_seed);
                let cfg = RunConfig {
                    seed: f.first_seed,
                    strategy: a.strategy,
                    forced: r.decisions.clone(),
                    strict: true,
                    ..c.base.clone()
                };
                super::write_html(
                    a.build.program,
                    &cfg,
                    &r.decisions,
                    &a.build.target.given.display().to_string(),
                    format!("heddle replay {}", replay.display()),
                    &html,
                )?;
                Some(html)
            }
            _ => None,
        };
        paths.push(html);
    }
    for race in &o.summary.race {
        race_report(c, &out.join(&race.replay), race.first_seed)?;
    }
    Ok(paths)
}

/// The HTML report beside a race's replay file (see
/// [`crate::campaign::summary::RaceStats::replay`]), unless it is there
/// already or the replay file is not.
fn race_report(c: &Campaign, replay: &Path, seed: u64) -> Result<()> {
    let html = replay.with_extension("html");
    if !replay.exists() || html.exists() {
        return Ok(());
    }
    let file = crate::trace::replay::ReplayFile::load(replay)?;
    let decisions = file.decisions()?;
    if decisions.len() as u64 > super::MAX_REPORT_STEPS {
        // Too long to draw, as for failures.
        return Ok(());
    }
    let cfg = RunConfig {
        seed,
        strategy: file.run.strategy.clone(),
        forced: decisions.clone(),
        strict: true,
        ..c.base.clone()
    };
    let build = c.assign(seed).build;
    super::write_html(
        build.program,
        &cfg,
        &decisions,
        &build.target.given.display().to_string(),
        format!("heddle replay {}", replay.display()),
        &html,
    )
}

/// One document per failure of the session, with its replay file (in
/// `out`) and HTML report (`reports`, from [`write_reports`]).
pub fn failure_docs(o: &Session, out: &Path, reports: &[Option<PathBuf>]) -> Vec<FailureDoc> {
    o.failures
        .iter()
        .zip(reports)
        .map(|((f, _), html)| {
            let replay = (!f.replay.is_empty()).then(|| out.join(&f.replay));
            FailureDoc {
                seed: f.first_seed,
                verdict: VerdictDoc {
                    kind: f.kind.clone(),
                    signature: f.signature.clone(),
                    summary: f.summary.clone(),
                },
                replay: replay.as_ref().map(|p| p.display().to_string()),
                report: html.as_ref().map(|h| h.display().to_string()),
                replay_command: replay.map(|p| format!("heddle replay {}", p.display())),
                build: crate::campaign::exec::split_member(&f.first_strategy)
                    .1
                    .map(str::to_string),
            }
        })
        .collect()
}

/// Each distinct data race of the campaign as a document, from a re-run of
/// its first seed (the state keeps only its summary).
pub fn race_docs(c: &Campaign, s: &Summary) -> Result<Vec<RaceDoc>> {
    let mut docs = Vec::new();
    for race in &s.race {
        let a = c.assign(race.first_seed);
        let cfg = RunConfig {
            seed: race.first_seed,
            strategy: a.strategy,
            event_stacks: true,
            ..c.base.clone()
        };
        let r = a.build.program.run(&cfg)?;
        if let Some(x) = r.races.iter().find(|x| x.summary() == race.summary) {
            docs.push(RaceDoc::of(race.first_seed, x));
        }
    }
    Ok(docs)
}

/// The campaign as one JUnit test case's outcome: a failure (the first
/// one found, with how to replay it), else runs that failed inside heddle,
/// else a stop by a signal, else a pass.
pub fn junit_outcome(o: &Session, docs: &[FailureDoc]) -> Outcome {
    let stats = &o.summary.stats;
    let failure = docs.first().map(|d| {
        let mut text = format!(
            "{} of {} runs failed (strategy {}); seed {}: {}",
            stats.failing_runs,
            stats.runs,
            o.summary.campaign.strategies.join(","),
            d.seed,
            d.verdict.summary
        );
        if let Some(c) = &d.replay_command {
            text.push_str(&format!("\nreplay: {c}"));
        }
        if let Some(r) = &d.report {
            text.push_str(&format!("\nreport: {r}"));
        }
        Outcome::Failure {
            message: d.verdict.summary.clone(),
            text,
        }
    });
    failure
        .or_else(|| {
            let e = o.summary.error.first()?;
            Some(Outcome::Error {
                message: format!("{} run(s) failed inside heddle", stats.error_runs),
                text: format!("seed {}: {}", e.first_seed, e.message),
            })
        })
        .or_else(|| {
            let sig = o.interrupted?;
            Some(Outcome::Skipped {
                message: format!(
                    "stopped by {} after {} runs",
                    crate::interrupt::name(sig),
                    stats.runs
                ),
            })
        })
        .or_else(|| {
            // A test that cannot run here is skipped, with why.
            let u = o.state.stats.inconclusive.get("unsupported")?;
            Some(Outcome::Skipped {
                message: u.summary.clone(),
            })
        })
        .unwrap_or(Outcome::Pass)
}
