//! `heddle merge`: the campaign directories of shards (or of earlier
//! merges) combined into one campaign directory, whose summary is the one
//! the unsharded campaign would have written over the same seeds.
//!
//! Any set of shard outputs merges: shards may be missing, have stopped at
//! different seeds, or appear more than once (a retried job, a resumed
//! copy). Every shard state counts the seeds of its shard below its
//! frontier, so of several states of one shard the one that got furthest
//! holds the others' runs, and is the one kept; the others' runs are
//! reported as duplicates. The merge reads one state at a time, twice
//! (first to choose, then to add up), so its memory does not grow with the
//! number of runs or of inputs, and its result does not depend on the order
//! of its inputs.

use super::exec::{identity_difference, replay_files};
use super::journal::Identity;
use super::state::{Aggregate, Coverage, ShardState};
use super::summary::{self, Source, Summary, Timing};
use super::Shard;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a merge produced.
pub struct Merged {
    /// Its summary.
    pub summary: Summary,
    /// Its timing part.
    pub timing: Timing,
    /// The counted runs.
    pub stats: Aggregate,
    /// Which seeds the inputs covered.
    pub coverage: CoverageReport,
    /// Replay files the summary names that no input directory had.
    pub missing_replays: Vec<String>,
}

/// Which seeds the merged inputs covered.
#[derive(Debug, Clone, Default)]
pub struct CoverageReport {
    /// Shards the campaign was split into.
    pub count: u32,
    /// Shard states read.
    pub states: usize,
    /// Runs counted in the merge.
    pub runs: u64,
    /// Runs of states that another state of the same shard also holds
    /// (counted once).
    pub duplicate_runs: u64,
    /// Seeds of the campaign no input ran (bounded campaigns only).
    pub seeds_not_run: Option<u64>,
    /// One line per shard that is missing or stopped early.
    pub holes: Vec<String>,
}

/// One input state, as the first pass sees it.
struct Candidate {
    path: PathBuf,
    shard: Shard,
    frontier: u64,
    runs: u64,
    finished: bool,
    /// A hash of the file, to choose between equal states whatever the
    /// order of the inputs.
    digest: u64,
}

/// Merges the campaign directories `dirs` into `out` (which may be one of
/// them): shard states, summary and the replay file of each distinct
/// failure.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Merged> {
    if dirs.is_empty() {
        bail!("merge: no campaign directories given");
    }
    // Pass 1: what each state covers.
    let mut identity: Option<(PathBuf, Identity)> = None;
    let mut candidates: Vec<Candidate> = Vec::new();
    for d in dirs {
        if !d.is_dir() {
            bail!("{}: not a campaign directory", d.display());
        }
        let files = ShardState::list(d)?;
        if files.is_empty() {
            let old = d.join("journal.jsonl").exists();
            bail!(
                "{}: not a campaign directory (no state-K-of-N.json{})",
                d.display(),
                if old {
                    "; its journal.jsonl was written by an older heddle"
                } else {
                    ""
                }
            );
        }
        for path in files {
            let bytes =
                std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let s = ShardState::read(&path)?;
            match &mut identity {
                None => identity = Some((path.clone(), s.identity.clone())),
                Some((first, id)) => {
                    let mut theirs = s.identity.clone();
                    theirs.runs = id.runs;
                    if theirs != *id {
                        bail!(
                            "{} and {} hold different campaigns ({})",
                            first.display(),
                            path.display(),
                            identity_difference(id, &s.identity)
                        );
                    }
                    // Shards given different budgets: the largest plan.
                    id.runs = match (id.runs, s.identity.runs) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        _ => None,
                    };
                }
            }
            if let Some(c) = candidates.first() {
                if c.shard.count != s.shard.count {
                    bail!(
                        "{} is shard {} but {} is shard {}: shards of different splits do not merge",
                        path.display(),
                        s.shard,
                        c.path.display(),
                        c.shard
                    );
                }
            }
            candidates.push(Candidate {
                digest: digest(&bytes),
                shard: s.shard,
                frontier: s.frontier,
                runs: s.stats.runs,
                finished: s.finished(),
                path,
            });
        }
    }
    let Some((_, identity)) = identity else {
        bail!("merge: no campaign state in the directories given");
    };
    // Of the states of one shard, the one that got furthest.
    let mut chosen: BTreeMap<u32, Candidate> = BTreeMap::new();
    let mut duplicate_runs = 0;
    for c in candidates {
        let better = |a: &Candidate, b: &Candidate| {
            (a.frontier, a.runs, std::cmp::Reverse(a.digest))
                > (b.frontier, b.runs, std::cmp::Reverse(b.digest))
        };
        match chosen.get(&c.shard.index) {
            Some(have) if !better(&c, have) => duplicate_runs += c.runs,
            _ => {
                if let Some(old) = chosen.insert(c.shard.index, c) {
                    duplicate_runs += old.runs;
                }
            }
        }
    }
    let count = chosen.values().next().map_or(1, |c| c.shard.count);

    // Pass 2: add up the chosen states and copy them into `out`.
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut stats = Aggregate::new(identity.strategies.len());
    let mut coverage = Coverage::new(identity.seed_start, count);
    let mut sites = Vec::new();
    let mut elapsed_ms = 0;
    let mut states = Vec::new();
    for c in chosen.values() {
        let s = ShardState::read(&c.path)?;
        stats.merge(&s.stats);
        coverage.add(s.shard.index, s.frontier);
        elapsed_ms = elapsed_ms.max(s.elapsed_ms);
        if sites.is_empty() {
            sites = s.sites.clone();
        }
        states.push(s.shard);
        if c.path != ShardState::path(out, s.shard) {
            s.write(out)?;
        }
    }
    // States in `out` that are not part of this merge would be read by the
    // next one.
    for p in ShardState::list(out)? {
        let keep = chosen.values().any(|c| ShardState::path(out, c.shard) == p);
        if !keep {
            std::fs::remove_file(&p).with_context(|| format!("cannot remove {}", p.display()))?;
        }
    }
    let summary = Summary::of(&Source {
        identity: &identity,
        sites: &sites,
        stats: &stats,
        coverage: &coverage,
    });
    // The replay files, from the first directory (in name order) that has
    // each; replay files are the same wherever their seed ran.
    let mut sorted_dirs: Vec<&PathBuf> = dirs.iter().collect();
    sorted_dirs.sort();
    sorted_dirs.dedup();
    let mut missing_replays = Vec::new();
    for f in &summary.failure {
        let target = out.join(&f.replay);
        let found = sorted_dirs
            .iter()
            .map(|d| d.join(&f.replay))
            .find(|p| p.exists());
        match found {
            Some(p) if p == target => {}
            Some(p) => {
                let bytes =
                    std::fs::read(&p).with_context(|| format!("cannot read {}", p.display()))?;
                // The module shipped beside the replay travels with it.
                if let Some(name) = crate::trace::replay::ReplayFile::load(&p)?.module.file {
                    if let Ok(b) = std::fs::read(p.with_file_name(&name)) {
                        crate::paths::write_atomic(&out.join(&name), &b)?;
                    }
                }
                crate::paths::write_atomic(&target, &bytes)?;
            }
            None => missing_replays.push(f.replay.clone()),
        }
    }
    // Replay files of seeds that are not first of their signature (copied
    // by an earlier merge, or left by a shard) go.
    let keep: Vec<&str> = summary.failure.iter().map(|f| f.replay.as_str()).collect();
    for (name, _) in replay_files(out, &identity.target)? {
        if !keep.contains(&name.as_str()) {
            let _ = std::fs::remove_file(out.join(&name));
        }
    }
    let mut holes = Vec::new();
    for k in 1..=count {
        match chosen.get(&k) {
            None => holes.push(format!("shard {k}/{count}: no state")),
            Some(c) if !c.finished => holes.push(format!(
                "shard {k}/{count}: stopped before seed {}",
                c.frontier
            )),
            Some(_) => {}
        }
    }
    let all_finished = holes.is_empty();
    let seeds_not_run = match identity.runs {
        Some(r) if identity.keep_going => Some(r.saturating_sub(stats.runs)),
        _ => None,
    };
    let timing = Summary::timing(
        &stats,
        states.iter().map(|s| s.to_string()).collect(),
        all_finished,
        0,
        elapsed_ms,
    );
    crate::paths::write_atomic(
        &out.join(summary::FILE),
        summary.file_text(&timing)?.as_bytes(),
    )?;
    Ok(Merged {
        summary,
        timing,
        coverage: CoverageReport {
            count,
            states: chosen.len(),
            runs: stats.runs,
            duplicate_runs,
            seeds_not_run,
            holes,
        },
        stats,
        missing_replays,
    })
}

/// FNV-1a of a file's bytes.
fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
