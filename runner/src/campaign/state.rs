//! The campaign state: what a campaign keeps between runs, sessions and
//! machines, in memory and on disk, whatever its number of runs.
//!
//! Each shard of a campaign has a state file, `state-K-of-N.json` in the
//! campaign directory (a merged directory has one per shard it covers). It
//! says which seeds are done — every seed of the shard below its
//! *frontier*, and no other — and holds the [`Aggregate`] of their runs:
//! counters, distinct-count sketches, the sites reached, and one entry per
//! distinct failure, data race and internal error. Its size depends on the
//! module and on how many distinct things were found, not on the number of
//! runs. The campaign driver folds finished runs into it in seed order and
//! writes it atomically at every checkpoint; `--resume` starts at the
//! frontier; `heddle merge` combines the states of shards.

use super::journal::{Identity, Record, SiteName};
use super::sketch::Distinct;
use super::{splitmix64, Shard};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// State file format version.
pub const FORMAT: u32 = 1;

/// Failing seeds kept per distinct failure (the smallest ones) unless a
/// campaign asks for all of them (`heddle fuzz --list-failures`).
pub const SEEDS_KEPT: u64 = 32;

/// Statistics of a set of runs, mergeable: the aggregate of two disjoint
/// sets of runs is the [`Aggregate::merge`] of theirs, in any order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    /// Failing seeds kept per distinct failure ([`SEEDS_KEPT`], or
    /// `u64::MAX` for all).
    #[serde(default = "seeds_kept")]
    pub keep_seeds: u64,
    /// Runs (every verdict, and internal errors).
    pub runs: u64,
    /// Runs that found a bug (a verdict neither `pass` nor inconclusive).
    pub failing_runs: u64,
    /// Runs that failed inside heddle.
    pub error_runs: u64,
    /// Runs that were neither a pass nor a failure (too long).
    #[serde(default)]
    pub inconclusive_runs: u64,
    /// Those runs by verdict kind: the summary of the first, its seed and
    /// their count.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inconclusive: BTreeMap<String, RaceAgg>,
    /// Decisions over all runs.
    pub decisions: u64,
    /// Preemptions over all runs.
    pub preemptions: u64,
    /// Thread switches over all runs.
    #[serde(default)]
    pub switches: u64,
    /// Steps over all runs.
    pub steps: u64,
    /// Distinct schedule hashes.
    pub schedules: Distinct,
    /// Site ids reached by some run, as a bitset.
    #[serde(with = "site_bits")]
    pub sites_hit: Vec<u64>,
    /// Per portfolio member.
    pub strategies: Vec<StrategyAgg>,
    /// Distinct failures by signature.
    pub failures: BTreeMap<String, FailureAgg>,
    /// Distinct data races by key.
    pub races: BTreeMap<String, RaceAgg>,
    /// Distinct internal errors by message.
    pub errors: BTreeMap<String, ErrorAgg>,
}

/// One portfolio member's share.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StrategyAgg {
    /// Runs it made.
    pub runs: u64,
    /// Its failing runs.
    pub failing_runs: u64,
    /// Its distinct schedules.
    pub schedules: Distinct,
    /// Signatures it found, with the first seed that showed each.
    pub found: BTreeMap<String, u64>,
}

/// One distinct failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureAgg {
    /// Verdict kind.
    pub kind: String,
    /// Summary of the first run.
    pub summary: String,
    /// Smallest seed that shows it.
    pub first_seed: u64,
    /// The portfolio member that ran that seed.
    pub first_strategy: u32,
    /// Runs that showed it.
    pub runs: u64,
    /// Runs per portfolio member.
    pub by_strategy: BTreeMap<u32, u64>,
    /// The smallest seeds that show it ([`Aggregate::keep_seeds`] of them).
    pub seeds: Vec<u64>,
    /// Campaign milliseconds at the earliest run that showed it.
    pub first_ms: u64,
}

/// One distinct data race (and one kind of inconclusive run, by kind).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RaceAgg {
    /// Summary from its first run.
    pub summary: String,
    /// Smallest seed that shows it.
    pub first_seed: u64,
    /// Runs that showed it.
    pub runs: u64,
}

/// One distinct internal error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorAgg {
    /// Smallest seed that shows it.
    pub first_seed: u64,
    /// Runs that showed it.
    pub runs: u64,
}

fn seeds_kept() -> u64 {
    SEEDS_KEPT
}

impl Aggregate {
    /// An empty aggregate for a portfolio of `members`, keeping
    /// [`SEEDS_KEPT`] failing seeds per failure.
    pub fn new(members: usize) -> Aggregate {
        Aggregate {
            keep_seeds: SEEDS_KEPT,
            strategies: vec![StrategyAgg::default(); members],
            ..Aggregate::default()
        }
    }

    /// Counts one run: its record, and the bitset of the sites it reached.
    pub fn add(&mut self, r: &Record, sites: &[u64]) {
        self.runs += 1;
        self.decisions += r.decisions;
        self.preemptions += r.preemptions;
        self.switches += r.switches;
        self.steps += r.steps;
        self.schedules.insert(r.schedule);
        or_into(&mut self.sites_hit, sites);
        if let Some(s) = self.strategies.get_mut(r.strategy as usize) {
            s.runs += 1;
            s.schedules.insert(r.schedule);
            if r.failed() {
                s.failing_runs += 1;
                let e = s.found.entry(r.signature.clone()).or_insert(r.seed);
                *e = (*e).min(r.seed);
            }
        }
        for race in &r.races {
            let one = RaceAgg {
                summary: race.summary.clone(),
                first_seed: r.seed,
                runs: 1,
            };
            merge_race(&mut self.races, &race.key, &one);
        }
        if r.is_inconclusive() {
            self.inconclusive_runs += 1;
            let one = RaceAgg {
                summary: r.summary.clone(),
                first_seed: r.seed,
                runs: 1,
            };
            merge_race(&mut self.inconclusive, &r.kind, &one);
            return;
        }
        if r.is_error() {
            self.error_runs += 1;
            let one = ErrorAgg {
                first_seed: r.seed,
                runs: 1,
            };
            merge_error(&mut self.errors, &r.summary, &one);
            return;
        }
        if !r.failed() {
            return;
        }
        self.failing_runs += 1;
        let one = FailureAgg {
            kind: r.kind.clone(),
            summary: r.summary.clone(),
            first_seed: r.seed,
            first_strategy: r.strategy,
            runs: 1,
            by_strategy: [(r.strategy, 1)].into_iter().collect(),
            seeds: vec![r.seed],
            first_ms: r.ms,
        };
        merge_failure(&mut self.failures, &r.signature, &one, self.keep_seeds);
    }

    /// Adds the runs of `other` (a disjoint set of runs of the same campaign).
    pub fn merge(&mut self, other: &Aggregate) {
        self.keep_seeds = self.keep_seeds.max(other.keep_seeds);
        self.runs += other.runs;
        self.failing_runs += other.failing_runs;
        self.error_runs += other.error_runs;
        self.inconclusive_runs += other.inconclusive_runs;
        self.decisions += other.decisions;
        self.preemptions += other.preemptions;
        self.switches += other.switches;
        self.steps += other.steps;
        self.schedules.merge(&other.schedules);
        or_into(&mut self.sites_hit, &other.sites_hit);
        if self.strategies.len() < other.strategies.len() {
            self.strategies
                .resize(other.strategies.len(), StrategyAgg::default());
        }
        for (mine, theirs) in self.strategies.iter_mut().zip(&other.strategies) {
            mine.runs += theirs.runs;
            mine.failing_runs += theirs.failing_runs;
            mine.schedules.merge(&theirs.schedules);
            for (sig, seed) in &theirs.found {
                let e = mine.found.entry(sig.clone()).or_insert(*seed);
                *e = (*e).min(*seed);
            }
        }
        for (sig, f) in &other.failures {
            merge_failure(&mut self.failures, sig, f, self.keep_seeds);
        }
        for (key, r) in &other.races {
            merge_race(&mut self.races, key, r);
        }
        for (msg, e) in &other.errors {
            merge_error(&mut self.errors, msg, e);
        }
        for (kind, r) in &other.inconclusive {
            merge_race(&mut self.inconclusive, kind, r);
        }
    }
}

fn or_into(into: &mut Vec<u64>, words: &[u64]) {
    if into.len() < words.len() {
        into.resize(words.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(words) {
        *a |= *b;
    }
}

fn merge_failure(map: &mut BTreeMap<String, FailureAgg>, sig: &str, f: &FailureAgg, keep: u64) {
    let Some(mine) = map.get_mut(sig) else {
        map.insert(sig.to_string(), f.clone());
        return;
    };
    mine.runs += f.runs;
    for (k, n) in &f.by_strategy {
        *mine.by_strategy.entry(*k).or_insert(0) += n;
    }
    mine.seeds.extend_from_slice(&f.seeds);
    mine.seeds.sort_unstable();
    mine.seeds.dedup();
    mine.seeds.truncate(keep.min(usize::MAX as u64) as usize);
    mine.first_ms = mine.first_ms.min(f.first_ms);
    if f.first_seed < mine.first_seed {
        mine.kind = f.kind.clone();
        mine.summary = f.summary.clone();
        mine.first_seed = f.first_seed;
        mine.first_strategy = f.first_strategy;
    }
}

fn merge_race(map: &mut BTreeMap<String, RaceAgg>, key: &str, r: &RaceAgg) {
    let Some(mine) = map.get_mut(key) else {
        map.insert(key.to_string(), r.clone());
        return;
    };
    mine.runs += r.runs;
    if r.first_seed < mine.first_seed {
        mine.first_seed = r.first_seed;
        mine.summary = r.summary.clone();
    }
}

fn merge_error(map: &mut BTreeMap<String, ErrorAgg>, msg: &str, e: &ErrorAgg) {
    let Some(mine) = map.get_mut(msg) else {
        map.insert(msg.to_string(), e.clone());
        return;
    };
    mine.runs += e.runs;
    mine.first_seed = mine.first_seed.min(e.first_seed);
}

/// The state of one shard of a campaign (see the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardState {
    /// [`FORMAT`].
    pub format: u32,
    /// What the campaign is.
    pub identity: Identity,
    /// Which shard this is.
    #[serde(with = "shard_text")]
    pub shard: Shard,
    /// Every seed of the shard in `[seed_start, frontier)` has run and is
    /// counted; no other seed is.
    pub frontier: u64,
    /// Milliseconds the campaign has run, over all its sessions.
    pub elapsed_ms: u64,
    /// Worker threads of the last session.
    pub jobs: u64,
    /// Length of the per-run journal at this state, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_bytes: Option<u64>,
    /// The module's yield-point sites, by site id.
    pub sites: Vec<SiteName>,
    /// The counted runs.
    pub stats: Aggregate,
}

impl ShardState {
    /// A shard that has run nothing yet.
    pub fn new(identity: Identity, shard: Shard, sites: Vec<SiteName>) -> ShardState {
        let members = identity.strategies.len();
        let mut s = ShardState {
            format: FORMAT,
            frontier: identity.seed_start,
            identity,
            shard,
            elapsed_ms: 0,
            jobs: 0,
            journal_bytes: None,
            sites,
            stats: Aggregate::new(members),
        };
        s.frontier = s.next_seed(s.frontier);
        s
    }

    /// The state file of `shard` in the campaign directory `dir`.
    pub fn path(dir: &Path, shard: Shard) -> PathBuf {
        dir.join(format!("state-{}-of-{}.json", shard.index, shard.count))
    }

    /// The state files in `dir`, sorted by name.
    pub fn list(dir: &Path) -> Result<Vec<PathBuf>> {
        let rd =
            std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
        let mut v = Vec::new();
        for e in rd {
            let e = e.with_context(|| format!("cannot read {}", dir.display()))?;
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("state-") && name.ends_with(".json") && name.contains("-of-") {
                v.push(e.path());
            }
        }
        v.sort();
        Ok(v)
    }

    /// Reads a state file; anything malformed is a one-line error.
    pub fn read(path: &Path) -> Result<ShardState> {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let s: ShardState = serde_json::from_slice(&bytes)
            .map_err(|e| anyhow::anyhow!("corrupt campaign state {}: {e}", path.display()))?;
        if s.format != FORMAT {
            bail!(
                "corrupt campaign state {}: format {} (this heddle reads {FORMAT})",
                path.display(),
                s.format
            );
        }
        if s.frontier < s.identity.seed_start
            || s.stats.strategies.len() != s.identity.strategies.len()
        {
            bail!(
                "corrupt campaign state {}: inconsistent frontier or portfolio",
                path.display()
            );
        }
        Ok(s)
    }

    /// Writes the state file into `dir`, atomically.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let text = serde_json::to_vec(self)?;
        crate::paths::write_atomic(&Self::path(dir, self.shard), &text)
    }

    /// Seeds of the campaign past the last one this shard should run
    /// (`u64::MAX` for an unbounded campaign).
    pub fn end(&self) -> u64 {
        match self.identity.runs {
            Some(r) => self.identity.seed_start.saturating_add(r),
            None => u64::MAX,
        }
    }

    /// Whether the shard has nothing left to run: it reached the end of the
    /// campaign, or (without `keep_going`) counted a failure.
    pub fn finished(&self) -> bool {
        self.frontier >= self.end() || self.closed()
    }

    /// Whether, without `keep_going`, a failure is counted: no later seed
    /// counts.
    pub fn closed(&self) -> bool {
        !self.identity.keep_going && self.stats.failing_runs > 0
    }

    /// The smallest seed at or after `seed` that this shard runs (or
    /// [`ShardState::end`]).
    pub fn next_seed(&self, mut seed: u64) -> u64 {
        let end = self.end();
        while seed < end && !self.shard.contains(seed) {
            seed += 1;
        }
        seed.min(end)
    }
}

/// Which seeds a set of shard states covers, for counting the runs before
/// a given seed.
#[derive(Debug, Clone)]
pub struct Coverage {
    seed_start: u64,
    count: u32,
    /// Frontier by 1-based shard index.
    frontiers: BTreeMap<u32, u64>,
}

impl Coverage {
    /// The coverage of shards of `count`, starting at `seed_start`.
    pub fn new(seed_start: u64, count: u32) -> Coverage {
        Coverage {
            seed_start,
            count,
            frontiers: BTreeMap::new(),
        }
    }

    /// Adds shard `index` (1-based) with its frontier.
    pub fn add(&mut self, index: u32, frontier: u64) {
        let f = self.frontiers.entry(index).or_insert(frontier);
        *f = (*f).max(frontier);
    }

    fn covers(&self, seed: u64) -> bool {
        let k = if self.count <= 1 {
            1
        } else {
            (splitmix64(seed) % self.count as u64) as u32 + 1
        };
        self.frontiers.get(&k).is_some_and(|f| seed < *f)
    }

    /// For each seed of `targets`, how many covered seeds are smaller:
    /// one pass over the seeds up to the largest target.
    pub fn runs_below(&self, targets: &[u64]) -> BTreeMap<u64, u64> {
        let mut sorted: Vec<u64> = targets.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let mut out = BTreeMap::new();
        if self.count <= 1 {
            let f = self.frontiers.get(&1).copied().unwrap_or(self.seed_start);
            for t in sorted {
                out.insert(t, t.min(f).saturating_sub(self.seed_start));
            }
            return out;
        }
        let (mut seed, mut n) = (self.seed_start, 0u64);
        for t in sorted {
            while seed < t {
                n += self.covers(seed) as u64;
                seed += 1;
            }
            out.insert(t, n);
        }
        out
    }
}

mod shard_text {
    use super::Shard;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(s: &Shard, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(&s.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Shard, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(|e: anyhow::Error| serde::de::Error::custom(e.to_string()))
    }
}

mod site_bits {
    use serde::{Deserialize, Deserializer, Serializer};

    /// As the ascending list of set bits.
    pub fn serialize<S: Serializer>(words: &[u64], s: S) -> Result<S::Ok, S::Error> {
        let mut ids = Vec::new();
        for (w, word) in words.iter().enumerate() {
            for b in 0..64 {
                if word >> b & 1 == 1 {
                    ids.push((w * 64 + b) as u32);
                }
            }
        }
        s.collect_seq(ids)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
        let ids = Vec::<u32>::deserialize(d)?;
        let mut words = Vec::new();
        for id in ids {
            let w = id as usize / 64;
            if words.len() <= w {
                words.resize(w + 1, 0u64);
            }
            words[w] |= 1 << (id % 64);
        }
        Ok(words)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::journal::{RaceRec, Record};

    pub(crate) fn record(seed: u64) -> Record {
        let fail = seed % 5 == 2;
        Record {
            seed,
            strategy: (seed % 2) as u32,
            kind: if fail { "assertion" } else { "pass" }.into(),
            signature: if fail { "assertion@f" } else { "" }.into(),
            summary: if fail {
                format!("boom {seed}")
            } else {
                String::new()
            },
            decisions: seed,
            preemptions: 1,
            switches: 2,
            steps: 10,
            schedule: seed % 7,
            sites: 0,
            ms: 1000 - seed,
            races: if seed.is_multiple_of(3) {
                vec![RaceRec {
                    key: "a|b".into(),
                    summary: format!("race {seed}"),
                }]
            } else {
                vec![]
            },
        }
    }

    #[test]
    fn merged_parts_equal_the_whole_in_any_order() {
        let add = |seeds: &mut dyn Iterator<Item = u64>| {
            let mut a = Aggregate::new(2);
            for s in seeds {
                a.add(&record(s), &[1 << (s % 3)]);
            }
            a
        };
        let whole = add(&mut (0..100));
        let evens = add(&mut (0..100).filter(|s| s % 2 == 0));
        let odds = add(&mut (0..100).rev().filter(|s| s % 2 == 1));
        let mut x = evens.clone();
        x.merge(&odds);
        let mut y = odds.clone();
        y.merge(&evens);
        assert_eq!(x, whole);
        assert_eq!(y, whole);
        let f = &whole.failures["assertion@f"];
        assert_eq!(
            (f.first_seed, f.runs, f.summary.as_str()),
            (2, 20, "boom 2")
        );
        assert_eq!(f.seeds.len(), 20);
        assert_eq!(f.first_ms, 1000 - 97);
        assert_eq!(whole.races["a|b"].first_seed, 0);
        assert_eq!(whole.sites_hit, vec![0b111]);
        // Round trip through the file format.
        let text = serde_json::to_string(&whole).unwrap();
        assert_eq!(serde_json::from_str::<Aggregate>(&text).unwrap(), whole);
    }

    #[test]
    fn coverage_counts_runs_below_a_seed() {
        let mut c = Coverage::new(10, 1);
        c.add(1, 50);
        assert_eq!(c.runs_below(&[5, 30, 90])[&30], 20);
        assert_eq!(c.runs_below(&[90])[&90], 40);
        let mut c = Coverage::new(0, 3);
        c.add(1, 1000);
        c.add(3, 1000);
        let below = c.runs_below(&[1000, 10]);
        let expect = (0..1000u64).filter(|s| splitmix64(*s) % 3 != 1).count() as u64;
        assert_eq!(below[&1000], expect);
        assert_eq!(
            below[&10],
            (0..10u64).filter(|s| splitmix64(*s) % 3 != 1).count() as u64
        );
    }
}
