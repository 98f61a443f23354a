//! The per-run journal, `journal.jsonl.gz` in the campaign directory, kept
//! only on request (`heddle fuzz --journal all`): one JSON object per line,
//! gzip-compressed. The first line is the campaign header (what the campaign
//! is, which shards it covers, its site table); then one line per counted
//! run, in seed order, and, before the first run that reached a given set of
//! sites, that set. Lines are written in batches, each a complete gzip
//! member (a file of several members is one gzip stream to every reader).
//!
//! The journal is a record for analysis, not what a campaign resumes from
//! (that is [`super::state`]): the state says how long the journal was at
//! its checkpoint, and `--resume` cuts the journal back to that length.
//!
//! This module also owns the identity and run record types that the state
//! and the summary are made of.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Journal format version.
pub const FORMAT: u32 = 2;

/// The journal's file name inside a campaign directory.
pub const FILE: &str = "journal.jsonl.gz";

/// What a campaign is: two directories with the same identity hold runs of
/// the same campaign (e.g. two shards of it) and can be merged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The target as named on the command line.
    pub target: String,
    /// SHA-256 of the original module.
    pub module_sha256: String,
    /// Instrumentation settings ([`crate::instrument::Config::describe`]).
    pub instrumentation: String,
    /// The run configuration besides seed and strategy (args, env, budgets).
    pub config: String,
    /// The portfolio, calibrated (canonical specs).
    pub strategies: Vec<String>,
    /// First seed.
    pub seed_start: u64,
    /// Seeds in the whole campaign (`None`: unbounded).
    pub runs: Option<u64>,
    /// Whether the campaign collects every failure (else it stops at the first).
    pub keep_going: bool,
}

/// A yield-point site, as the summary names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteName {
    /// `file:line function` (or `function+offset`).
    pub name: String,
    /// Whether the site is in user code.
    pub user: bool,
}

/// The first line of a journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT`].
    pub format: u32,
    /// What the campaign is.
    pub identity: Identity,
    /// The shards whose runs the journal holds (`["1/1"]` for a whole campaign).
    pub shards: Vec<String>,
    /// The module's yield-point sites, by site id.
    pub sites: Vec<SiteName>,
}

/// A data race seen by a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaceRec {
    /// The ordered pair of `file:line` it is deduplicated by, joined by `|`.
    pub key: String,
    /// One line for humans.
    pub summary: String,
}

/// One finished run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The seed.
    pub seed: u64,
    /// Index of the portfolio member that ran it.
    pub strategy: u32,
    /// Verdict kind (`pass`, `assertion`, …, or `error` when the run itself failed).
    pub kind: String,
    /// Verdict signature (empty for a pass).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature: String,
    /// Verdict summary (empty for a pass).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// Number of decisions.
    pub decisions: u64,
    /// Number of preemptions.
    pub preemptions: u64,
    /// Number of thread switches (preemptions, and switches away from a
    /// thread that blocked or ended).
    #[serde(default)]
    pub switches: u64,
    /// Number of steps.
    pub steps: u64,
    /// [`crate::trace::schedule_hash`] of the decisions.
    pub schedule: u64,
    /// Id of the set of sites the run reached (a [`SiteSet`] line).
    pub sites: u64,
    /// Milliseconds since the campaign started (over all sessions).
    pub ms: u64,
    /// Data races the run reported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub races: Vec<RaceRec>,
}

/// The kind of a run that failed inside heddle (an engine or host error, a
/// panic): neither a pass nor a bug in the target.
pub const ERROR_KIND: &str = "error";

/// The verdict kinds that are neither a pass nor a failure
/// ([`crate::verdict::Verdict::is_inconclusive`]).
pub const INCONCLUSIVE_KINDS: &[&str] = &["too-long", "unsupported"];

impl Record {
    /// Whether the target failed: a verdict other than `pass`, other than
    /// an inconclusive one. A run that failed inside heddle is not a
    /// failure of the target.
    pub fn failed(&self) -> bool {
        self.kind != "pass" && self.kind != ERROR_KIND && !self.is_inconclusive()
    }

    /// Whether the run could not tell (it was stopped too long, or needed
    /// what the target lacks).
    pub fn is_inconclusive(&self) -> bool {
        INCONCLUSIVE_KINDS.contains(&self.kind.as_str())
    }

    /// Whether the run failed inside heddle and gave no verdict.
    pub fn is_error(&self) -> bool {
        self.kind == ERROR_KIND
    }
}

/// A set of sites reached by some run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteSet {
    /// Its id (a hash of the set).
    pub id: u64,
    /// Site ids, ascending.
    pub hit: Vec<u32>,
}

impl SiteSet {
    /// The set of a [`crate::runtime::RunResult::sites_hit`] bitset.
    pub fn from_bitset(words: &[u64]) -> SiteSet {
        let mut hit = Vec::new();
        for (w, word) in words.iter().enumerate() {
            for b in 0..64 {
                if word >> b & 1 == 1 {
                    hit.push((w * 64 + b) as u32);
                }
            }
        }
        SiteSet {
            id: Self::id_of(words),
            hit,
        }
    }

    /// The id of a bitset (trailing zero words do not matter).
    pub fn id_of(words: &[u64]) -> u64 {
        let n = words.iter().rposition(|w| *w != 0).map_or(0, |i| i + 1);
        let mut h = super::splitmix64(n as u64);
        for w in &words[..n] {
            h = super::splitmix64(h ^ w);
        }
        h
    }
}

/// One line of a journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "lowercase")]
pub enum Line {
    /// The header (first line only).
    Campaign(Header),
    /// A set of sites.
    Sites(SiteSet),
    /// A finished run.
    Run(Record),
}

/// A journal read back.
#[derive(Debug, Clone)]
pub struct Journal {
    /// Its header.
    pub header: Header,
    /// Runs, in the order they were written.
    pub records: Vec<Record>,
    /// Site sets by id.
    pub site_sets: BTreeMap<u64, Vec<u32>>,
}

impl Journal {
    /// The journal of the campaign directory `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(FILE)
    }

    /// Reads a journal. A last batch cut short (the process died while
    /// writing it) and a last line without its newline are ignored;
    /// anything else malformed is an error.
    pub fn read(path: &Path) -> Result<Journal> {
        let raw = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let mut bytes = Vec::new();
        let mut dec = flate2::read::MultiGzDecoder::new(&raw[..]);
        if let Err(e) = dec.read_to_end(&mut bytes) {
            if e.kind() != std::io::ErrorKind::UnexpectedEof {
                bail!("corrupt journal {}: {e}", path.display());
            }
        }
        let corrupt = |n: usize, what: String| {
            anyhow::anyhow!("corrupt journal {}: line {n}: {what}", path.display())
        };
        let valid_len = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        if valid_len == 0 {
            bail!("corrupt journal {}: no campaign header", path.display());
        }
        let mut header = None;
        let mut records = Vec::new();
        let mut site_sets = BTreeMap::new();
        let mut seeds = BTreeSet::new();
        for (i, line) in bytes[..valid_len].split(|b| *b == b'\n').enumerate() {
            let n = i + 1;
            if i == 0 && line.is_empty() {
                return Err(corrupt(n, "empty line".into()));
            }
            if line.is_empty() {
                // Only after the final newline.
                continue;
            }
            let parsed: Line =
                serde_json::from_slice(line).map_err(|e| corrupt(n, e.to_string()))?;
            match (parsed, header.is_some()) {
                (Line::Campaign(h), false) => {
                    if h.format != FORMAT {
                        return Err(corrupt(
                            n,
                            format!("format {} (this heddle reads {FORMAT})", h.format),
                        ));
                    }
                    header = Some(h);
                }
                (_, false) => return Err(corrupt(n, "expected the campaign header".into())),
                (Line::Campaign(_), true) => {
                    return Err(corrupt(n, "a second campaign header".into()))
                }
                (Line::Sites(s), true) => {
                    site_sets.insert(s.id, s.hit);
                }
                (Line::Run(r), true) => {
                    if !site_sets.contains_key(&r.sites) {
                        return Err(corrupt(n, format!("seed {} names unknown sites", r.seed)));
                    }
                    if !seeds.insert(r.seed) {
                        return Err(corrupt(n, format!("seed {} appears twice", r.seed)));
                    }
                    records.push(r);
                }
            }
        }
        let Some(header) = header else {
            bail!("corrupt journal {}: no campaign header", path.display());
        };
        Ok(Journal {
            header,
            records,
            site_sets,
        })
    }
}

/// Lines kept in memory before they are written: at most this many bytes…
const FLUSH_BYTES: usize = 256 << 10;
/// …or lines this old.
const FLUSH_AFTER: std::time::Duration = std::time::Duration::from_millis(200);

/// Appends lines to a journal. Lines are buffered and written in batches,
/// one gzip member per batch; [`Writer::flush`] and dropping the writer
/// write what is pending.
pub struct Writer {
    file: File,
    buf: Vec<u8>,
    /// When the oldest buffered line was added.
    since: Option<std::time::Instant>,
    /// Bytes in the file.
    len: u64,
    /// Site sets already in the journal.
    seen: BTreeSet<u64>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

impl Writer {
    /// Starts a new journal at `path` (replacing any) with `header`.
    pub fn create(path: &Path, header: &Header) -> Result<Writer> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        crate::paths::write_atomic(path, &[])?;
        let mut w = Self::open(path, 0)?;
        w.push(&Line::Campaign(header.clone()))?;
        w.flush()?;
        Ok(w)
    }

    /// Continues the journal at `path` after its first `len` bytes (what a
    /// later checkpoint wrote is dropped). Nothing is read back: a site set
    /// the kept part has may be written again (readers keep either copy).
    pub fn open(path: &Path, len: u64) -> Result<Writer> {
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        file.set_len(len)
            .with_context(|| format!("cannot truncate {}", path.display()))?;
        drop(file);
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        Ok(Writer {
            file,
            buf: Vec::new(),
            since: None,
            len,
            seen: BTreeSet::new(),
        })
    }

    fn push(&mut self, l: &Line) -> Result<()> {
        serde_json::to_writer(&mut self.buf, l)?;
        self.buf.push(b'\n');
        Ok(())
    }

    /// Adds the line of a run, after the line of its site set (`hit`, a
    /// bitset) when the journal does not have it yet.
    pub fn append(&mut self, record: &Record, hit: &[u64]) -> Result<()> {
        if self.seen.insert(record.sites) {
            self.push(&Line::Sites(SiteSet::from_bitset(hit)))?;
        }
        self.push(&Line::Run(record.clone()))?;
        let now = std::time::Instant::now();
        let since = *self.since.get_or_insert(now);
        if self.buf.len() >= FLUSH_BYTES || now.duration_since(since) >= FLUSH_AFTER {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the pending lines (one gzip member) and returns the file's
    /// length.
    pub fn flush(&mut self) -> Result<u64> {
        if !self.buf.is_empty() {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(&self.buf)?;
            let member = enc.finish()?;
            self.buf.clear();
            self.since = None;
            self.file
                .write_all(&member)
                .context("cannot write the campaign journal")?;
            self.len += member.len() as u64;
        }
        Ok(self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            format: FORMAT,
            identity: Identity {
                target: "t.c".into(),
                module_sha256: "00".into(),
                instrumentation: "granularity=all".into(),
                config: String::new(),
                strategies: vec!["random".into()],
                seed_start: 0,
                runs: Some(10),
                keep_going: true,
            },
            shards: vec!["1/1".into()],
            sites: vec![],
        }
    }

    fn record(seed: u64) -> Record {
        Record {
            seed,
            strategy: 0,
            kind: "pass".into(),
            signature: String::new(),
            summary: String::new(),
            decisions: 3,
            preemptions: 1,
            switches: 2,
            steps: 9,
            schedule: seed * 7,
            sites: SiteSet::id_of(&[0b110]),
            ms: seed,
            races: vec![],
        }
    }

    #[test]
    fn torn_tails_are_dropped_and_corruption_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let mut w = Writer::create(&path, &header()).unwrap();
        w.append(&record(0), &[0b110]).unwrap();
        let at = w.flush().unwrap();
        w.append(&record(1), &[0b110]).unwrap();
        drop(w);
        let full = std::fs::read(&path).unwrap();
        let j = Journal::read(&path).unwrap();
        assert_eq!(j.records.len(), 2);
        assert_eq!(j.site_sets.len(), 1);
        // Torn: the last batch lost its end.
        let cut = at as usize + (full.len() - at as usize) / 2;
        std::fs::write(&path, &full[..cut]).unwrap();
        assert_eq!(Journal::read(&path).unwrap().records.len(), 1);
        // Cut back to a checkpoint and continued: the same runs (the site
        // set may be written again).
        let mut w = Writer::open(&path, at).unwrap();
        w.append(&record(1), &[0b110]).unwrap();
        drop(w);
        let j = Journal::read(&path).unwrap();
        assert_eq!(j.records, vec![record(0), record(1)]);
        assert_eq!(j.site_sets.len(), 1);
        // Not gzip at all.
        std::fs::write(&path, b"{\"t\":\"run\"}\n").unwrap();
        let e = Journal::read(&path).unwrap_err().to_string();
        assert!(e.contains("corrupt journal"), "{e}");
        // A duplicate seed.
        let mut w = Writer::create(&path, &header()).unwrap();
        w.append(&record(1), &[0b110]).unwrap();
        w.append(&record(1), &[0b110]).unwrap();
        drop(w);
        let e = Journal::read(&path).unwrap_err().to_string();
        assert!(e.contains("appears twice"), "{e}");
    }

    #[test]
    fn site_sets_round_trip() {
        let s = SiteSet::from_bitset(&[0b101, 0, 1 << 63]);
        assert_eq!(s.hit, vec![0, 2, 191]);
        assert_eq!(SiteSet::id_of(&[0b101, 0, 1 << 63, 0]), s.id);
        assert_ne!(SiteSet::id_of(&[0b100]), s.id);
    }
}
