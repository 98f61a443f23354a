//! `heddle merge`: the campaign directories of shards (or of earlier
//! merges) combined into one campaign directory, whose summary is the one
//! the unsharded campaign would have written.

use super::exec::identity_difference;
use super::journal::{Journal, Line, Writer};
use super::summary::{self, Summary, Timing};
use super::Shard;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a merge produced.
pub struct Merged {
    /// The merged journal.
    pub journal: Journal,
    /// Its summary.
    pub summary: Summary,
    /// Its timing part.
    pub timing: Timing,
    /// Replay files the summary names that no input directory had.
    pub missing_replays: Vec<String>,
}

/// Merges the campaign directories `dirs` into `out` (which may be one of
/// them): journal, summary and the replay file of each distinct failure.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Merged> {
    if dirs.is_empty() {
        bail!("merge: no campaign directories given");
    }
    let mut journals = Vec::new();
    for d in dirs {
        let path = Journal::path(d);
        if !path.exists() {
            bail!(
                "{}: not a campaign directory (no {})",
                d.display(),
                super::journal::FILE
            );
        }
        journals.push((d.clone(), Journal::read(&path)?));
    }
    let (first_dir, first) = &journals[0];
    let mut header = first.header.clone();
    let mut shards: BTreeMap<Shard, PathBuf> = BTreeMap::new();
    let mut records = BTreeMap::new();
    let mut site_sets = BTreeMap::new();
    for (dir, j) in &journals {
        if j.header.identity != first.header.identity {
            bail!(
                "{} and {} hold different campaigns ({})",
                first_dir.display(),
                dir.display(),
                identity_difference(&first.header.identity, &j.header.identity)
            );
        }
        for s in &j.header.shards {
            let shard: Shard = s
                .parse()
                .with_context(|| format!("corrupt journal in {}", dir.display()))?;
            if let Some(n) = shards.keys().next().map(|k| k.count) {
                if n != shard.count {
                    bail!(
                        "{} is shard {shard} but others are shards of {n}",
                        dir.display()
                    );
                }
            }
            if let Some(other) = shards.insert(shard, dir.clone()) {
                bail!(
                    "shard {shard} appears in both {} and {}",
                    other.display(),
                    dir.display()
                );
            }
        }
        for r in &j.records {
            if records.insert(r.seed, r.clone()).is_some() {
                bail!(
                    "seed {} appears in more than one directory ({})",
                    r.seed,
                    dir.display()
                );
            }
        }
        for (id, set) in &j.site_sets {
            site_sets.insert(*id, set.clone());
        }
    }
    header.shards = shards.keys().map(|s| s.to_string()).collect();
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    // The replay files to carry over, read before anything in `out` changes.
    let merged_view = Journal {
        header: header.clone(),
        records: records.values().cloned().collect(),
        site_sets: site_sets.clone(),
        valid_len: 0,
    };
    let summary = Summary::of(&merged_view);
    let mut replays = Vec::new();
    let mut missing_replays = Vec::new();
    for f in summary.failure.iter().filter(|f| !f.replay.is_empty()) {
        match dirs.iter().map(|d| d.join(&f.replay)).find(|p| p.exists()) {
            Some(p) => {
                let bytes =
                    std::fs::read(&p).with_context(|| format!("cannot read {}", p.display()))?;
                // The module shipped beside the replay travels with it.
                let module = crate::trace::replay::ReplayFile::load(&p)?.module.file;
                if let Some(name) = module {
                    let m = p.with_file_name(&name);
                    if let Ok(b) = std::fs::read(&m) {
                        replays.push((name, b));
                    }
                }
                replays.push((f.replay.clone(), bytes));
            }
            None => missing_replays.push(f.replay.clone()),
        }
    }
    let path = Journal::path(out);
    let w = Writer::create(&path, &header)?;
    let mut lines: Vec<Line> = site_sets
        .into_iter()
        .map(|(id, hit)| Line::Sites(super::journal::SiteSet { id, hit }))
        .collect();
    lines.extend(records.into_values().map(Line::Run));
    for chunk in lines.chunks(4096) {
        w.append(chunk)?;
    }
    w.sync()?;
    drop(w);
    for (name, bytes) in &replays {
        crate::paths::write_atomic(&out.join(name), bytes)?;
    }
    let journal = Journal::read(&path)?;
    let timing = Summary::timing(&journal, 0, None);
    crate::paths::write_atomic(
        &out.join(summary::FILE),
        summary.file_text(&timing)?.as_bytes(),
    )?;
    Ok(Merged {
        journal,
        summary,
        timing,
        missing_replays,
    })
}
