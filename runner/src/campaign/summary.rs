//! The campaign summary, `campaign.toml`: computed from a journal's records
//! alone, so a campaign, the same campaign run with other `--jobs`, and the
//! merge of its shards give the same deterministic part byte for byte. The
//! timing part (after [`TIMING_MARKER`]) is not deterministic.

use super::journal::{Header, Journal, Record};
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
    /// Runs whose verdict was not `pass`.
    pub failing_runs: u64,
    /// Distinct failure signatures.
    pub distinct_failures: u64,
    /// Runs that failed inside heddle (no verdict; not counted as failing).
    #[serde(skip_serializing_if = "is_zero")]
    pub error_runs: u64,
    /// Decisions over all runs.
    pub decisions: u64,
    /// Mean decisions per run.
    pub decisions_per_run: f64,
    /// Preemptions over all runs.
    pub preemptions: u64,
    /// Mean preemptions per run.
    pub preemptions_per_run: f64,
    /// Mean steps per run.
    pub steps_per_run: f64,
    /// Distinct schedules (decision-sequence hashes).
    pub distinct_schedules: u64,
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
    let stem = std::path::Path::new(target)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "target".into());
    format!("{stem}-{kind}-seed{seed}.toml")
}

/// The runs a summary counts, sorted by seed: all of them with
/// `keep_going`, else the seeds up to and including the first failing one.
pub fn counted(header: &Header, records: &[Record]) -> Vec<Record> {
    let mut rs: Vec<Record> = records.to_vec();
    rs.sort_by_key(|r| r.seed);
    if !header.identity.keep_going {
        if let Some(first) = rs.iter().find(|r| r.failed()).map(|r| r.seed) {
            rs.retain(|r| r.seed <= first);
        }
    }
    rs
}

impl Summary {
    /// The summary of a journal.
    pub fn of(j: &Journal) -> Summary {
        let id = &j.header.identity;
        let rs = counted(&j.header, &j.records);
        let spec = |i: u32| {
            id.strategies
                .get(i as usize)
                .cloned()
                .unwrap_or_else(|| format!("#{i}"))
        };
        let mut schedules = BTreeSet::new();
        let mut per_strategy: Vec<(u64, u64, BTreeSet<u64>, Vec<String>)> =
            vec![(0, 0, BTreeSet::new(), Vec::new()); id.strategies.len()];
        let mut failures: BTreeMap<String, FailureStats> = BTreeMap::new();
        let mut races: BTreeMap<String, RaceStats> = BTreeMap::new();
        let mut errors: BTreeMap<String, ErrorStats> = BTreeMap::new();
        let mut hit_sets = BTreeSet::new();
        let (mut decisions, mut preemptions, mut steps, mut failing) = (0u64, 0u64, 0u64, 0u64);
        for (i, r) in rs.iter().enumerate() {
            decisions += r.decisions;
            preemptions += r.preemptions;
            steps += r.steps;
            schedules.insert(r.schedule);
            hit_sets.insert(r.sites);
            if let Some(s) = per_strategy.get_mut(r.strategy as usize) {
                s.0 += 1;
                s.2.insert(r.schedule);
                if r.failed() {
                    s.1 += 1;
                    if !s.3.contains(&r.signature) {
                        s.3.push(r.signature.clone());
                    }
                }
            }
            for race in &r.races {
                races
                    .entry(race.key.clone())
                    .or_insert_with(|| RaceStats {
                        key: race.key.clone(),
                        summary: race.summary.clone(),
                        first_seed: r.seed,
                        runs: 0,
                    })
                    .runs += 1;
            }
            if r.is_error() {
                errors
                    .entry(r.summary.clone())
                    .or_insert_with(|| ErrorStats {
                        message: r.summary.clone(),
                        first_seed: r.seed,
                        runs: 0,
                    })
                    .runs += 1;
                continue;
            }
            if !r.failed() {
                continue;
            }
            failing += 1;
            let f = failures
                .entry(r.signature.clone())
                .or_insert_with(|| FailureStats {
                    signature: r.signature.clone(),
                    kind: r.kind.clone(),
                    summary: r.summary.clone(),
                    first_seed: r.seed,
                    first_strategy: spec(r.strategy),
                    runs_to_first: i as u64,
                    runs: 0,
                    replay: replay_name(&id.target, &r.kind, r.seed),
                    by_strategy: BTreeMap::new(),
                });
            f.runs += 1;
            *f.by_strategy.entry(spec(r.strategy)).or_insert(0) += 1;
        }
        let mut hit = BTreeSet::new();
        for set in &hit_sets {
            if let Some(ids) = j.site_sets.get(set) {
                hit.extend(ids.iter().copied());
            }
        }
        let sites = &j.header.sites;
        let user_sites = sites.iter().filter(|s| s.user).count() as u64;
        let user_sites_hit = hit
            .iter()
            .filter(|i| sites.get(**i as usize).is_some_and(|s| s.user))
            .count() as u64;
        // A location is never hit when none of its sites is.
        let mut hit_names = BTreeSet::new();
        for i in &hit {
            if let Some(s) = sites.get(*i as usize) {
                hit_names.insert(s.name.as_str());
            }
        }
        let mut never_hit: Vec<String> = Vec::new();
        let mut listed = BTreeSet::new();
        for s in sites.iter().filter(|s| s.user) {
            if !hit_names.contains(s.name.as_str()) && listed.insert(s.name.as_str()) {
                never_hit.push(s.name.clone());
            }
        }
        let n = rs.len() as u64;
        let mean = |x: u64| {
            if n == 0 {
                0.0
            } else {
                (x as f64 / n as f64 * 100.0).round() / 100.0
            }
        };
        let mut failure: Vec<FailureStats> = failures.into_values().collect();
        failure.sort_by_key(|f| f.first_seed);
        let mut race: Vec<RaceStats> = races.into_values().collect();
        race.sort_by(|a, b| (a.first_seed, &a.key).cmp(&(b.first_seed, &b.key)));
        let mut error: Vec<ErrorStats> = errors.into_values().collect();
        error.sort_by(|a, b| (a.first_seed, &a.message).cmp(&(b.first_seed, &b.message)));
        let error_runs = error.iter().map(|e| e.runs).sum();
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
                failing_runs: failing,
                distinct_failures: failure.len() as u64,
                error_runs,
                decisions,
                decisions_per_run: mean(decisions),
                preemptions,
                preemptions_per_run: mean(preemptions),
                steps_per_run: mean(steps),
                distinct_schedules: schedules.len() as u64,
                sites: sites.len() as u64,
                sites_hit: hit.len() as u64,
                user_sites,
                user_sites_hit,
                never_hit,
            },
            strategy: id
                .strategies
                .iter()
                .zip(per_strategy)
                .map(|(spec, (runs, failing_runs, sched, found))| StrategyStats {
                    spec: spec.clone(),
                    runs,
                    failing_runs,
                    distinct_schedules: sched.len() as u64,
                    found,
                })
                .collect(),
            failure,
            race,
            error,
        }
    }

    /// The timing part of a journal's summary: wall time from the records'
    /// timestamps unless the caller measured it.
    pub fn timing(j: &Journal, jobs: u64, elapsed_s: Option<f64>) -> Timing {
        let rs = counted(&j.header, &j.records);
        let elapsed_s =
            elapsed_s.unwrap_or_else(|| rs.iter().map(|r| r.ms).max().unwrap_or(0) as f64 / 1e3);
        let mut first: BTreeMap<&str, u64> = BTreeMap::new();
        for r in rs.iter().filter(|r| r.failed()) {
            let e = first.entry(&r.signature).or_insert(r.ms);
            *e = (*e).min(r.ms);
        }
        let mut first_failure: Vec<FirstFailure> = first
            .into_iter()
            .map(|(s, ms)| FirstFailure {
                signature: s.to_string(),
                seconds: ms as f64 / 1e3,
            })
            .collect();
        first_failure.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
        Timing {
            shards: j.header.shards.clone(),
            complete: complete(&j.header.shards),
            jobs,
            elapsed_s: (elapsed_s * 1000.0).round() / 1000.0,
            runs_per_s: (rs.len() as f64 / elapsed_s.max(1e-3)).round(),
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

/// Whether `shards` (as `K/N`) cover every shard of their campaign.
pub fn complete(shards: &[String]) -> bool {
    let parsed: Vec<super::Shard> = shards.iter().filter_map(|s| s.parse().ok()).collect();
    let Some(n) = parsed.first().map(|s| s.count) else {
        return false;
    };
    let have: BTreeSet<u32> = parsed.iter().map(|s| s.index).collect();
    parsed.iter().all(|s| s.count == n) && have.len() as u32 == n
}

/// The deterministic part of a `campaign.toml` text.
pub fn deterministic_part(text: &str) -> &str {
    text.split(TIMING_MARKER).next().unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::journal::{Identity, SiteName, FORMAT};

    fn journal(keep_going: bool, order: &[u64]) -> Journal {
        let header = Header {
            format: FORMAT,
            identity: Identity {
                target: "dir/t.c".into(),
                module_sha256: "ab".into(),
                instrumentation: "granularity=all".into(),
                config: String::new(),
                strategies: vec!["random".into(), "pct:3:k=9".into()],
                seed_start: 0,
                runs: Some(6),
                keep_going,
            },
            shards: vec!["1/1".into()],
            sites: ["a.c:1 f", "a.c:1 f", "a.c:2 g", "lib"]
                .iter()
                .enumerate()
                .map(|(i, n)| SiteName {
                    name: n.to_string(),
                    user: i < 3,
                })
                .collect(),
        };
        let records = order
            .iter()
            .map(|&seed| {
                let fail = seed == 2 || seed == 4;
                Record {
                    seed,
                    strategy: (seed % 2) as u32,
                    kind: if fail { "assertion" } else { "pass" }.into(),
                    signature: if fail { "assertion@f" } else { "" }.into(),
                    summary: if fail { "boom" } else { "" }.into(),
                    decisions: seed,
                    preemptions: 1,
                    steps: 10,
                    schedule: seed % 3,
                    sites: if seed == 5 { 2 } else { 1 },
                    ms: 100 - seed,
                    races: vec![],
                }
            })
            .collect();
        Journal {
            header,
            records,
            site_sets: [(1, vec![1]), (2, vec![0, 3])].into_iter().collect(),
            valid_len: 0,
        }
    }

    #[test]
    fn the_summary_does_not_depend_on_record_order() {
        let a = Summary::of(&journal(true, &[0, 1, 2, 3, 4, 5]))
            .to_toml()
            .unwrap();
        let b = Summary::of(&journal(true, &[5, 3, 4, 0, 2, 1]))
            .to_toml()
            .unwrap();
        assert_eq!(a, b);
        let s = Summary::of(&journal(true, &[5, 3, 4, 0, 2, 1]));
        assert_eq!(s.stats.runs, 6);
        assert_eq!(s.stats.failing_runs, 2);
        assert_eq!(s.stats.distinct_schedules, 3);
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
    }

    #[test]
    fn without_keep_going_runs_after_the_first_failure_do_not_count() {
        let j = journal(false, &[4, 0, 5, 1, 2, 3]);
        let s = Summary::of(&j);
        assert_eq!(s.stats.runs, 3);
        assert_eq!(s.stats.failing_runs, 1);
        // Seed 5 (the only one reaching sites 0 and 3) is not counted.
        assert_eq!(s.stats.sites_hit, 1);
        let t = Summary::timing(&j, 2, None);
        assert_eq!(t.first_failure.len(), 1);
        assert!(t.complete);
        let text = s.file_text(&t).unwrap();
        assert!(deterministic_part(&text).ends_with('\n'));
        assert!(!deterministic_part(&text).contains("[timing]"));
    }

    #[test]
    fn shard_lists_are_complete_when_every_shard_is_there() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(complete(&v(&["1/1"])));
        assert!(complete(&v(&["1/2", "2/2"])));
        assert!(!complete(&v(&["1/2"])));
        assert!(!complete(&v(&["1/2", "2/3", "3/3"])));
    }
}
