//! Strategies side by side on a set of targets: the comparison behind
//! `heddle compare`, as a [`CompareReport`] of rows.
//!
//! For every target of a manifest (the bundled `targets/targets.toml`, or a
//! project file in the same format) and every strategy, `--trials` trials of
//! `--runs` runs each; trial `i` runs the seeds
//! `seed_start + i·runs .. seed_start + (i+1)·runs`, so trials are
//! independent samples and every number can be reproduced with
//! `heddle fuzz --seed`. A run *finds the bug* when its verdict is not
//! `pass` (as in `heddle fuzz`). Per target and strategy it reports the
//! detection rate (failing runs / all runs), in how many trials the bug
//! showed, the runs to the first bug (median and 90th percentile over trials,
//! nearest rank; a trial that never saw the bug counts as infinitely many
//! runs, shown as `>N`), the number of distinct schedules over all runs
//! ([`crate::trace::schedule_hash`]), and the verdict kinds seen; and, as
//! the only figure that depends on the machine, the seconds to the first
//! bug (median over trials, each trial timed on the worker thread that runs
//! it, so on one core). A strategy of the list may be `default`, the
//! portfolio `heddle fuzz` runs by default
//! ([`crate::campaign::DEFAULT_PORTFOLIO`]): seed `s` of its trials runs
//! member `s mod members`, as in a campaign. The table
//! is rendered as Markdown ([`CompareReport::markdown`]) and CSV
//! ([`CompareReport::csv`]). Trials run in parallel.

use crate::manifest::{Entry, Manifest};
use crate::runtime::{Program, RunConfig};
use crate::{sched, target, trace};
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// What to compare: strategies, targets, and the runs of each trial.
#[derive(Debug, Clone)]
pub struct Compare {
    /// Strategies, comma-separated (e.g. `random,pct:3,pos,surw`).
    pub strategies: String,
    /// The targets: a manifest in the format of `targets/targets.toml`.
    pub manifest: PathBuf,
    /// Only these targets (comma-separated names); by default every
    /// target whose buggy build is expected to fail.
    pub only: Option<String>,
    /// Runs per trial.
    pub runs: u64,
    /// Trials per target and strategy, each on its own seed range.
    pub trials: u64,
    /// First seed of the first trial.
    pub seed_start: u64,
    /// Worker threads.
    pub jobs: usize,
}

/// The comparison: one row per target and strategy.
#[derive(Debug, Clone)]
pub struct CompareReport {
    /// The rows, in target, then strategy order.
    pub rows: Vec<Row>,
}

impl CompareReport {
    /// Runs over every row and trial.
    pub fn runs(&self) -> u64 {
        self.rows.iter().map(|r| r.runs * r.trials).sum()
    }

    /// `TARGET under STRATEGY` for each row whose expected bug no run found.
    pub fn missed(&self) -> Vec<String> {
        self.rows
            .iter()
            .filter(|r| r.expected != "pass" && r.failing == 0)
            .map(|r| format!("{} under {}", r.target, r.strategy))
            .collect()
    }

    /// The Markdown table.
    pub fn markdown(&self) -> String {
        markdown(&self.rows)
    }

    /// The CSV table.
    pub fn csv(&self) -> String {
        csv(&self.rows)
    }
}

/// Splits a comma-separated strategy list; a part made only of digits
/// continues the previous spec (`surw:n=3,40,40`).
pub fn split_strategies(list: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in list.split(',').map(str::trim) {
        let continues = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
        match out.last_mut() {
            Some(last) if continues && last.contains("n=") => {
                last.push(',');
                last.push_str(part);
            }
            _ => out.push(part.to_string()),
        }
    }
    out
}

/// What one trial saw.
#[derive(Debug, Clone, Default)]
struct Trial {
    failing: u64,
    /// 1-based index of the first failing run.
    first: Option<u64>,
    /// Seconds from the trial's start to the end of its first failing run.
    first_secs: Option<f64>,
    /// Seconds of the whole trial.
    secs: f64,
    hashes: Vec<u64>,
    kinds: BTreeMap<String, u64>,
}

/// One row of the table: a target under a strategy, over all trials.
#[derive(Debug, Clone)]
pub struct Row {
    /// Target name.
    pub target: String,
    /// Expected verdict kind of the buggy build.
    pub expected: String,
    /// The strategy as given.
    pub strategy: String,
    /// The strategy's canonical spec after calibration.
    pub spec: String,
    /// Runs per trial.
    pub runs: u64,
    /// Trials.
    pub trials: u64,
    /// Failing runs over all trials.
    pub failing: u64,
    /// Trials that saw a failure.
    pub trials_found: u64,
    /// Runs to the first failure, per trial (None: never).
    pub first: Vec<Option<u64>>,
    /// Seconds to the first failure, per trial (None: never); measured,
    /// so it varies with the machine and its load.
    pub first_secs: Vec<Option<f64>>,
    /// Seconds of the longest trial.
    pub max_trial_secs: f64,
    /// Distinct schedules over all runs.
    pub distinct: u64,
    /// Verdict kinds seen, with counts.
    pub kinds: BTreeMap<String, u64>,
}

/// Nearest-rank percentile of runs-to-first-bug, None = never.
fn percentile(values: &[Option<u64>], p: f64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let mut v: Vec<u64> = values.iter().map(|x| x.unwrap_or(u64::MAX)).collect();
    v.sort_unstable();
    let rank = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1]).filter(|x| *x != u64::MAX)
}

impl Row {
    /// Failing runs / all runs.
    pub fn detection_rate(&self) -> f64 {
        self.failing as f64 / (self.runs * self.trials).max(1) as f64
    }
    /// Median runs to the first bug (None: more than half the trials never saw it).
    pub fn median(&self) -> Option<u64> {
        percentile(&self.first, 0.5)
    }
    /// 90th percentile of runs to the first bug.
    pub fn p90(&self) -> Option<u64> {
        percentile(&self.first, 0.9)
    }
    /// Median seconds to the first bug (None: more than half the trials
    /// never saw it).
    pub fn median_secs(&self) -> Option<f64> {
        let micros: Vec<Option<u64>> = self
            .first_secs
            .iter()
            .map(|s| s.map(|s| (s * 1e6) as u64))
            .collect();
        percentile(&micros, 0.5).map(|us| us as f64 / 1e6)
    }
    fn show_secs(&self) -> String {
        match self.median_secs() {
            Some(s) => format!("{s:.3}"),
            None => format!(">{:.3}", self.max_trial_secs),
        }
    }
    fn show(&self, v: Option<u64>) -> String {
        v.map(|x| x.to_string())
            .unwrap_or_else(|| format!(">{}", self.runs))
    }
    fn kinds_text(&self) -> String {
        let v: Vec<String> = self.kinds.iter().map(|(k, n)| format!("{k}×{n}")).collect();
        v.join(" ")
    }
}

/// The Markdown table.
pub fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| target | expected | strategy | detection | trials found | first bug median | first bug p90 | first bug median (s) | distinct schedules | verdicts |\n\
         |---|---|---|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {:.1}% ({}/{}) | {}/{} | {} | {} | {} | {} | {} |\n",
            r.target,
            r.expected,
            r.strategy,
            100.0 * r.detection_rate(),
            r.failing,
            r.runs * r.trials,
            r.trials_found,
            r.trials,
            r.show(r.median()),
            r.show(r.p90()),
            r.show_secs(),
            r.distinct,
            r.kinds_text()
        ));
    }
    s
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The CSV table (one row per target and strategy). Runs to the first bug
/// are empty when never found; `first_bug_per_trial` lists them by trial,
/// separated by `;`.
pub fn csv(rows: &[Row]) -> String {
    let mut s = String::from(
        "target,expected,strategy,spec,runs,trials,failing_runs,detection_rate,trials_found,first_bug_median,first_bug_p90,first_bug_per_trial,distinct_schedules,verdicts,first_bug_median_secs\n",
    );
    for r in rows {
        let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
        let per: Vec<String> = r.first.iter().map(|v| opt(*v)).collect();
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{:.6},{},{},{},{},{},{},{}\n",
            csv_field(&r.target),
            csv_field(&r.expected),
            csv_field(&r.strategy),
            csv_field(&r.spec),
            r.runs,
            r.trials,
            r.failing,
            r.detection_rate(),
            r.trials_found,
            opt(r.median()),
            opt(r.p90()),
            per.join(";"),
            r.distinct,
            csv_field(&r.kinds_text()),
            r.median_secs()
                .map(|s| format!("{s:.6}"))
                .unwrap_or_default()
        ));
    }
    s
}

/// The targets to compare on.
fn select(m: &Manifest, only: Option<&str>) -> Result<Vec<Entry>> {
    match only {
        Some(list) => list
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|n| {
                m.get(n).cloned().with_context(|| {
                    let names: Vec<&str> = m.targets.iter().map(|t| t.name.as_str()).collect();
                    format!(
                        "no target `{n}` in the manifest (it has {})",
                        names.join(", ")
                    )
                })
            })
            .collect(),
        None => Ok(m
            .targets
            .iter()
            .filter(|t| t.buggy != "pass")
            .cloned()
            .collect()),
    }
}

impl Compare {
    /// Runs the comparison.
    pub fn run(&self) -> Result<CompareReport> {
        Ok(CompareReport {
            rows: compare(self)?,
        })
    }
}

/// Runs the comparison and returns the rows (in target, then strategy order).
fn compare(a: &Compare) -> Result<Vec<Row>> {
    let strategies = split_strategies(&a.strategies);
    if strategies.iter().any(|s| s.is_empty()) {
        bail!(
            "empty strategy in --strategy `{}`: give strategies separated by single commas, e.g. random,pct:3",
            a.strategies
        );
    }
    // Each strategy of the list is a portfolio of one, or `default`.
    let portfolios: Vec<Vec<String>> = strategies
        .iter()
        .map(|s| {
            if s == "default" {
                Ok(crate::campaign::Portfolio::parse(s)?.members)
            } else {
                sched::parse(s, 1).map(|_| vec![s.clone()])
            }
        })
        .collect::<Result<_>>()?;
    if a.runs == 0 || a.trials == 0 {
        bail!("--runs and --trials must be at least 1");
    }
    let m = Manifest::load(&a.manifest)?;
    let entries = select(&m, a.only.as_deref())?;
    if entries.is_empty() {
        bail!("{}: no targets to compare", a.manifest.display());
    }
    let jobs = a.jobs;
    // Build every target (the compiler cache makes repeats cheap).
    let programs: Vec<Program> = entries
        .iter()
        .map(|e| {
            let t = target::load_entry(&m, e, false)?;
            Program::new(&t.bytes, &Default::default())
                .with_context(|| format!("target `{}`", e.name))
        })
        .collect::<Result<_>>()?;
    // Calibrate each (target, strategy) cell.
    let cells: Vec<(usize, usize)> = (0..entries.len())
        .flat_map(|t| (0..strategies.len()).map(move |s| (t, s)))
        .collect();
    let configs: Vec<Vec<RunConfig>> = crate::pool::par_map(cells.len(), jobs, |i| {
        let (t, s) = cells[i];
        portfolios[s]
            .iter()
            .map(|member| {
                let base = RunConfig {
                    args: entries[t].args.clone(),
                    strategy: member.clone(),
                    ..RunConfig::default()
                };
                programs[t]
                    .calibrate(base)
                    .with_context(|| format!("target `{}`, strategy `{member}`", entries[t].name))
            })
            .collect::<Result<Vec<_>>>()
    })?;
    // Every trial of every cell is one job.
    let trials = a.trials as usize;
    let results: Vec<Trial> = crate::pool::par_map(cells.len() * trials, jobs, |j| {
        let (cell, trial) = (j / trials, (j % trials) as u64);
        let (t, _) = cells[cell];
        let first_seed = a.seed_start.saturating_add(trial.saturating_mul(a.runs));
        let mut out = Trial::default();
        let members = &configs[cell];
        // A trial is one campaign: learning strategies share a corpus
        // across its runs (in order, so never waiting).
        let hub = crate::campaign::feedback::Hub::new(first_seed);
        let start = std::time::Instant::now();
        for i in 0..a.runs {
            let seed = first_seed.saturating_add(i);
            let member = &members[(seed % members.len() as u64) as usize];
            let learns = sched::learns(&member.strategy);
            let cfg = RunConfig {
                seed,
                corpus: learns.then(|| hub.corpus_for(seed)),
                ..member.clone()
            };
            let mut r = programs[t].run(&cfg).with_context(|| {
                format!(
                    "target `{}`, strategy `{}`, seed {seed}",
                    entries[t].name, cfg.strategy
                )
            })?;
            hub.close(seed, learns.then(|| std::mem::take(&mut r.feedback)));
            out.hashes.push(trace::schedule_hash(&r.decisions));
            if r.verdict.is_failure() {
                out.failing += 1;
                if out.first.is_none() {
                    out.first = Some(i + 1);
                    out.first_secs = Some(start.elapsed().as_secs_f64());
                }
                *out.kinds.entry(r.verdict.kind().to_string()).or_insert(0) += 1;
            }
        }
        out.secs = start.elapsed().as_secs_f64();
        Ok(out)
    })?;
    let mut rows = Vec::new();
    for (cell, &(t, s)) in cells.iter().enumerate() {
        let ts = &results[cell * trials..(cell + 1) * trials];
        let mut distinct = BTreeSet::new();
        let mut kinds = BTreeMap::new();
        for tr in ts {
            distinct.extend(tr.hashes.iter().copied());
            for (k, n) in &tr.kinds {
                *kinds.entry(k.clone()).or_insert(0) += n;
            }
        }
        rows.push(Row {
            target: entries[t].name.clone(),
            expected: entries[t].buggy.clone(),
            strategy: strategies[s].clone(),
            spec: configs[cell]
                .iter()
                .map(|c| c.strategy.as_str())
                .collect::<Vec<_>>()
                .join(","),
            runs: a.runs,
            trials: a.trials,
            failing: ts.iter().map(|x| x.failing).sum(),
            trials_found: ts.iter().filter(|x| x.first.is_some()).count() as u64,
            first: ts.iter().map(|x| x.first).collect(),
            first_secs: ts.iter().map(|x| x.first_secs).collect(),
            max_trial_secs: ts.iter().map(|x| x.secs).fold(0.0, f64::max),
            distinct: distinct.len() as u64,
            kinds,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_strategy_lists() {
        assert_eq!(
            split_strategies("random,pct:3,surw:n=3,40,40,pos"),
            vec!["random", "pct:3", "surw:n=3,40,40", "pos"]
        );
        assert_eq!(split_strategies("random,,pos"), vec!["random", "", "pos"]);
    }

    #[test]
    fn percentiles_count_misses_as_infinite() {
        let v = [Some(3), None, Some(1), Some(7), None];
        assert_eq!(percentile(&v, 0.5), Some(7));
        assert_eq!(percentile(&v, 0.9), None);
        assert_eq!(percentile(&[Some(4)], 0.9), Some(4));
        assert_eq!(percentile(&[Some(1), Some(2)], 0.5), Some(1));
    }
}
