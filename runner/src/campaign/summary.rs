//! The campaign summary, `campaign.toml`: computed from the campaign state
//! alone (its identity and the aggregate of its counted runs), so a
//! campaign, the same campaign run with other `--jobs`, and the merge of its
//! shards give the same deterministic part byte for byte. The timing part
//! (after [`TIMING_MARKER`]) is not deterministic.

use super::journal::{Identity, SiteName};
use super::state::{Aggregate, Coverage};
use anyhow::Result;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The file name of the summary inside a campaign directory.
pub const FILE: &str = "campaign.toml";

/// The line that starts the timing part of a summary; everything before it
/// is deterministic.
pub const TIMING_MARKER: &str = "# Timing (differs between runs of the same campaign)";

/// The deterministic part of a summary.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// What the campaign is.
    pub campaign: CampaignPart,
    /// Statistics over all counted runs.
    pub stats: Stats,
    /// Per portfolio member, in portfolio order.
    pub strategy: Vec<StrategyStats>,
    /// Distinct failures by signature, in order of their first seed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failure: Vec<FailureStats>,
    /// Distinct data races, in order of their first seed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub race: Vec<RaceStats>,
    /// Distinct internal errors (runs that failed inside heddle), in order
    /// of their first seed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub error: Vec<ErrorStats>,
}

/// One distinct internal error.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorStats {
    /// The error, as one line.
    pub message: String,
    /// Smallest seed that shows it.
    pub first_seed: u64,
    /// Runs that showed it.
    pub runs: u64,
}

/// The campaign's identity, as the summary shows it.
#[derive(Debug, Clone, Serialize)]
pub struct CampaignPart {
    /// The target as named.
    pub target: String,
    /// SHA-256 of the original module.
    pub module_sha256: String,
    /// Instrumentation settings.
    pub instrumentation: String,
    /// Run configuration besides seed and strategy.
    pub config: String,
    /// The portfolio.
    pub strategies: Vec<String>,
    /// First seed.
    pub seed_start: u64,
    /// Seeds planned (absent: unbounded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs_planned: Option<u64>,
    /// Whether every failure was collected (else the campaign stopped at the first).
    pub keep_going: bool,
}

/// Campaign statistics.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    /// Runs counted (without `keep_going`: the seeds up to the first failure).
    pub runs: u64,
    /// Runs that found a bug (a verdict neither `pass` nor inconclusive).
    pub failing_runs: u64,
    /// Distinct failure signatures.
    pub distinct_failures: u64,
    /// Runs that failed inside heddle (no verdict; not counted as failing).
    #[serde(skip_serializing_if = "is_zero")]
    pub error_runs: u64,
    /// Runs neither passed nor failed (stopped by the step budget while
    /// they still made progress; not counted as failing).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inconclusive_runs: u64,
    /// Decisions over all runs.
    pub decisions: u64,
    /// Mean decisions per run.
    pub decisions_per_run: f64,
    /// Preemptions over all runs.
    pub preemptions: u64,
    /// Mean preemptions per run.
    pub preemptions_per_run: f64,
    /// Mean thread switches per run (preemptions, and switches away from a
    /// thread that blocked or ended).
    #[serde(default)]
    pub switches_per_run: f64,
    /// Mean steps per run.
    pub steps_per_run: f64,
    /// Distinct schedules (decision-sequence hashes).
    pub distinct_schedules: u64,
    /// Whether `distinct_schedules` is an estimate (past 4096 it is counted
    /// by a HyperLogLog sketch, within about 1%).
    #[serde(skip_serializing_if = "is_false")]
    pub distinct_schedules_estimated: bool,
    /// Yield-point sites in the module.
    pub sites: u64,
    /// Sites reached by at least one run.
    pub sites_hit: u64,
    /// User-code sites in the module.
    pub user_sites: u64,
    /// User-code sites reached by at least one run.
    pub user_sites_hit: u64,
    /// User-code locations no run reached.
    pub never_hit: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One portfolio member's share.
#[derive(Debug, Clone, Serialize)]
pub struct StrategyStats {
    /// Its spec.
    pub spec: String,
    /// Runs it made.
    pub runs: u64,
    /// Its failing runs.
    pub failing_runs: u64,
    /// Distinct schedules among its runs.
    pub distinct_schedules: u64,
    /// Signatures it found (in order of first seed).
    pub found: Vec<String>,
}

/// One distinct failure.
#[derive(Debug, Clone, Serialize)]
pub struct FailureStats {
    /// Verdict signature.
    pub signature: String,
    /// Verdict kind.
    pub kind: String,
    /// Summary of its first run.
    pub summary: String,
    /// Smallest seed that shows it.
    pub first_seed: u64,
    /// The strategy of that seed.
    pub first_strategy: String,
    /// Runs counted before that seed (the campaign runs seeds in order).
    pub runs_to_first: u64,
    /// Runs that showed it.
    pub runs: u64,
    /// The replay file of `first_seed`, in the campaign directory.
    pub replay: String,
    /// Runs that showed it, per strategy spec.
    pub by_strategy: BTreeMap<String, u64>,
}

/// One distinct data race.
#[derive(Debug, Clone, Serialize)]
pub struct RaceStats {
    /// The ordered pair of lines.
    pub key: String,
    /// Summary from its first run.
    pub summary: String,
    /// Smallest seed that shows it.
    pub first_seed: u64,
    /// Runs that showed it.
    pub runs: u64,
    /// The replay file of `first_seed` (a run that passed and showed the
    /// race), in the campaign directory.
    pub replay: String,
}

/// The timing part of a summary.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Timing {
    /// The shards the summary covers.
    pub shards: Vec<String>,
    /// Whether every shard of the campaign is covered.
    pub complete: bool,
    /// Worker threads (of the last session; 0 for a merge).
    pub jobs: u64,
    /// Wall-clock seconds of the campaign (for a merge: the longest shard's,
    /// from its runs' timestamps).
    pub elapsed_s: f64,
    /// Runs per second over `elapsed_s` (for a merge of shards that ran at
    /// the same time: their combined throughput).
    pub runs_per_s: f64,
    /// Seconds from the campaign's start to each signature's first run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub first_failure: Vec<FirstFailure>,
}

/// When a signature was first seen.
#[derive(Debug, Clone, Serialize)]
pub struct FirstFailure {
    /// Verdict signature.
    pub signature: String,
    /// Seconds since the campaign started.
    pub seconds: f64,
}

#[derive(Serialize)]
struct TimingDoc<'a> {
    timing: &'a Timing,
}

/// The file name of the replay file of a failing seed.
pub fn replay_name(target: &str, kind: &str, seed: u64) -> String {
    format!("{}-{kind}-seed{seed}.toml", replay_stem(target))
}

/// The kind in the name of a race's replay file (its run's verdict is
/// often `pass`: the race is in what the run reports).
pub const RACE_REPLAY_KIND: &str = "races";

/// What the replay files of `target` are named after: its file stem.
pub fn replay_stem(target: &str) -> String {
    std::path::Path::new(target)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "target".into())
}

/// What a summary is computed from: the campaign's identity and sites, the
/// aggregate of its counted runs, and which seeds those are.
pub struct Source<'a> {
    /// The campaign.
    pub identity: &'a Identity,
    /// The module's sites.
    pub sites: &'a [SiteName],
    /// The counted runs.
    pub stats: &'a Aggregate,
    /// Which seeds ran (for the runs before each first failure).
    pub coverage: &'a Coverage,
}

impl Summary {
    /// The summary of a campaign's counted runs.
    pub fn of(src: &Source) -> Summary {
        let (id, a) = (src.identity, src.stats);
        let spec = |i: u32| {
            id.strategies
                .get(i as usize)
                .cloned()
                .unwrap_or_else(|| format!("#{i}"))
        };
        let firsts: Vec<u64> = a.failures.values().map(|f| f.first_seed).collect();
        let below = src.coverage.runs_below(&firsts);
        let mut failure: Vec<FailureStats> = a
            .failures
            .iter()
            .map(|(sig, f)| FailureStats {
                signature: sig.clone(),
                kind: f.kind.clone(),
                summary: f.summary.clone(),
                first_seed: f.first_seed,
                first_strategy: spec(f.first_strategy),
                runs_to_first: below.get(&f.first_seed).copied().unwrap_or(0),
                runs: f.runs,
                replay: replay_name(&id.target, &f.kind, f.first_seed),
                by_strategy: f.by_strategy.iter().map(|(k, n)| (spec(*k), *n)).collect(),
            })
            .collect();
        failure.sort_by(|x, y| (x.first_seed, &x.signature).cmp(&(y.first_seed, &y.signature)));
        let mut race: Vec<RaceStats> = a
            .races
            .iter()
            .map(|(key, r)| RaceStats {
                key: key.clone(),
                summary: r.summary.clone(),
                first_seed: r.first_seed,
                runs: r.runs,
                // A failure's replay file of the same seed shows the race
                // too: the same run.
                replay: failure
                    .iter()
                    .find(|f| f.first_seed == r.first_seed)
                    .map(|f| f.replay.clone())
                    .unwrap_or_else(|| replay_name(&id.target, RACE_REPLAY_KIND, r.first_seed)),
            })
            .collect();
        race.sort_by(|x, y| (x.first_seed, &x.key).cmp(&(y.first_seed, &y.key)));
        let mut error: Vec<ErrorStats> = a
            .errors
            .iter()
            .map(|(msg, e)| ErrorStats {
                message: msg.clone(),
                first_seed: e.first_seed,
                runs: e.runs,
            })
            .collect();
        error.sort_by(|x, y| (x.first_seed, &x.message).cmp(&(y.first_seed, &y.message)));
        let sites = src.sites;
        let hit: Vec<u32> = (0..sites.len() as u32)
            .filter(|i| {
                a.sites_hit
                    .get(*i as usize / 64)
                    .is_some_and(|w| w >> (i % 64) & 1 == 1)
            })
            .collect();
        let user_sites = sites.iter().filter(|s| s.user).count() as u64;
        let user_sites_hit = hit.iter().filter(|i| sites[**i as usize].user).count() as u64;
        // A location is never hit when none of its sites is.
        let hit_names: BTreeSet<&str> = hit
            .iter()
            .map(|i| sites[*i as usize].name.as_str())
            .collect();
        let mut never_hit: Vec<String> = Vec::new();
        let mut listed = BTreeSet::new();
        for s in sites.iter().filter(|s| s.user) {
            if !hit_names.contains(s.name.as_str()) && listed.insert(s.name.as_str()) {
                never_hit.push(s.name.clone());
            }
        }
        let n = a.runs;
        let mean = |x: u64| {
            if n == 0 {
                0.0
            } else {
                (x as f64 / n as f64 * 100.0).round() / 100.0
            }
        };
        Summary {
            campaign: CampaignPart {
                target: id.target.clone(),
                module_sha256: id.module_sha256.clone(),
                instrumentation: id.instrumentation.clone(),
                config: id.config.clone(),
                strategies: id.strategies.clone(),
                seed_start: id.seed_start,
                runs_planned: id.runs,
                keep_going: id.keep_going,
            },
            stats: Stats {
                runs: n,
                failing_runs: a.failing_runs,
                distinct_failures: failure.len() as u64,
                error_runs: a.error_runs,
                inconclusive_runs: a.inconclusive_runs,
                decisions: a.decisions,
                decisions_per_run: mean(a.decisions),
                preemptions: a.preemptions,
                preemptions_per_run: mean(a.preemptions),
                switches_per_run: mean(a.switches),
                steps_per_run: mean(a.steps),
                distinct_schedules: a.schedules.count(),
                distinct_schedules_estimated: a.schedules.estimated(),
                sites: sites.len() as u64,
                sites_hit: hit.len() as u64,
                user_sites,
                user_sites_hit,
                never_hit,
            },
            strategy: id
                .strategies
                .iter()
                .zip(&a.strategies)
                .map(|(spec, s)| {
                    let mut found: Vec<(&u64, &String)> =
                        s.found.iter().map(|(sig, seed)| (seed, sig)).collect();
                    found.sort();
                    StrategyStats {
                        spec: spec.clone(),
                        runs: s.runs,
                        failing_runs: s.failing_runs,
                        distinct_schedules: s.schedules.count(),
                        found: found.into_iter().map(|(_, sig)| sig.clone()).collect(),
                    }
                })
                .collect(),
            failure,
            race,
            error,
        }
    }

    /// The timing part: `shards` covered (`complete` when they are every
    /// shard and each reached the end of the campaign), the worker count,
    /// the campaign's wall time, and each signature's first run.
    pub fn timing(
        stats: &Aggregate,
        shards: Vec<String>,
        complete: bool,
        jobs: u64,
        elapsed_ms: u64,
    ) -> Timing {
        let elapsed_s = elapsed_ms as f64 / 1e3;
        let mut first_failure: Vec<FirstFailure> = stats
            .failures
            .iter()
            .map(|(sig, f)| FirstFailure {
                signature: sig.clone(),
                seconds: f.first_ms as f64 / 1e3,
            })
            .collect();
        first_failure.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
        Timing {
            shards,
            complete,
            jobs,
            elapsed_s,
            runs_per_s: (stats.runs as f64 / elapsed_s.max(1e-3)).round(),
            first_failure,
        }
    }

    /// The deterministic part as TOML.
    pub fn to_toml(&self) -> Result<String> {
        Ok(format!(
            "# heddle campaign summary. Everything above the timing part is a function\n\
             # of the campaign and of the seeds that ran.\n\n{}",
            toml::to_string(self)?
        ))
    }

    /// The whole `campaign.toml`.
    pub fn file_text(&self, timing: &Timing) -> Result<String> {
        Ok(format!(
            "{}\n{TIMING_MARKER}\n{}",
            self.to_toml()?,
            toml::to_string(&TimingDoc { timing })?
        ))
    }
}

/// The deterministic part of a `campaign.toml` text.
pub fn deterministic_part(text: &str) -> &str {
    text.split(TIMING_MARKER).next().unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::journal::Record;

    fn identity() -> Identity {
        Identity {
            target: "dir/t.c".into(),
            module_sha256: "ab".into(),
            instrumentation: "granularity=all".into(),
            config: String::new(),
            strategies: vec!["random".into(), "pct:3:k=9".into()],
            seed_start: 0,
            runs: Some(6),
            keep_going: true,
        }
    }

    fn sites() -> Vec<SiteName> {
        ["a.c:1 f", "a.c:1 f", "a.c:2 g", "lib"]
            .iter()
            .enumerate()
            .map(|(i, n)| SiteName {
                name: n.to_string(),
                user: i < 3,
            })
            .collect()
    }

    fn aggregate(order: &[u64]) -> Aggregate {
        let mut a = Aggregate::new(2);
        for &seed in order {
            let fail = seed == 2 || seed == 4;
            let r = Record {
                seed,
                strategy: (seed % 2) as u32,
                kind: if fail { "assertion" } else { "pass" }.into(),
                signature: if fail { "assertion@f" } else { "" }.into(),
                summary: if fail { "boom" } else { "" }.into(),
                decisions: seed,
                preemptions: 1,
                switches: 2,
                steps: 10,
                schedule: seed % 3,
                sites: 0,
                ms: 100 - seed,
                races: vec![],
            };
            let sites: &[u64] = if seed == 5 { &[0b1001] } else { &[0b10] };
            a.add(&r, sites);
        }
        a
    }

    fn summary(order: &[u64]) -> Summary {
        let (id, sites) = (identity(), sites());
        let mut coverage = Coverage::new(0, 1);
        coverage.add(1, 6);
        Summary::of(&Source {
            identity: &id,
            sites: &sites,
            stats: &aggregate(order),
            coverage: &coverage,
        })
    }

    #[test]
    fn the_summary_does_not_depend_on_run_order() {
        let a = summary(&[0, 1, 2, 3, 4, 5]).to_toml().unwrap();
        let b = summary(&[5, 3, 4, 0, 2, 1]).to_toml().unwrap();
        assert_eq!(a, b);
        let s = summary(&[5, 3, 4, 0, 2, 1]);
        assert_eq!(s.stats.runs, 6);
        assert_eq!(s.stats.failing_runs, 2);
        assert_eq!(s.stats.distinct_schedules, 3);
        assert!(!a.contains("estimated"));
        assert_eq!(s.stats.sites_hit, 3);
        // a.c:1 is hit through site 1, a.c:2 never.
        assert_eq!(s.stats.never_hit, vec!["a.c:2 g".to_string()]);
        assert_eq!(s.failure.len(), 1);
        let f = &s.failure[0];
        assert_eq!((f.first_seed, f.runs, f.runs_to_first), (2, 2, 2));
        assert_eq!(f.replay, "t-assertion-seed2.toml");
        assert_eq!(f.by_strategy.get("random"), Some(&2));
        assert_eq!(s.strategy[0].runs, 3);
        assert_eq!(s.strategy[1].failing_runs, 0);
        let t = Summary::timing(&aggregate(&[0, 2]), vec!["1/1".into()], true, 2, 1500);
        assert_eq!(t.first_failure.len(), 1);
        assert_eq!(t.first_failure[0].seconds, 0.098);
        let text = s.file_text(&t).unwrap();
        assert!(deterministic_part(&text).ends_with('\n'));
        assert!(!deterministic_part(&text).contains("[timing]"));
    }
}
