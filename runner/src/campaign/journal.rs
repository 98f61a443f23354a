//! The campaign journal, `journal.jsonl` in the output directory: one JSON
//! object per line. The first line is the campaign header (what the campaign
//! is, which shards it covers, its site table); then one line per finished
//! run, and, before the first run that reached a given set of sites, that
//! set. A run's line is written (in one `write`) as soon as it finishes, so a
//! campaign killed at any point loses at most the runs that were in flight;
//! `--resume` reads the journal, drops a torn last line and carries on.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Journal format version.
pub const FORMAT: u32 = 1;

/// The journal's file name inside a campaign directory.
pub const FILE: &str = "journal.jsonl";

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

impl Record {
    /// Whether the target failed: a verdict other than `pass`. A run that
    /// failed inside heddle is not a failure of the target.
    pub fn failed(&self) -> bool {
        self.kind != "pass" && self.kind != ERROR_KIND
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
    /// Finished runs, in the order they were written.
    pub records: Vec<Record>,
    /// Site sets by id.
    pub site_sets: BTreeMap<u64, Vec<u32>>,
    /// Bytes of complete lines (a torn last line is after this).
    pub valid_len: u64,
}

impl Journal {
    /// The journal of the campaign directory `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(FILE)
    }

    /// Reads a journal. A last line without its newline (the process died
    /// while writing it) is ignored; anything else malformed is an error.
    pub fn read(path: &Path) -> Result<Journal> {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
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
            valid_len: valid_len as u64,
        })
    }
}

/// Lines kept in memory before they are written: at most this many bytes…
const FLUSH_BYTES: usize = 256 << 10;
/// …or lines this old. A process killed with SIGKILL loses at most the
/// runs of the last interval (the journal keeps whole lines; `--resume`
/// reruns the seeds it lacks).
const FLUSH_AFTER: std::time::Duration = std::time::Duration::from_millis(200);

/// Appends lines to a journal; shared by worker threads. Lines are
/// buffered and written in batches (one `write` per batch, not per run);
/// [`Writer::sync`] and dropping the writer write what is pending.
pub struct Writer {
    inner: Mutex<Batch>,
}

struct Batch {
    file: File,
    buf: Vec<u8>,
    /// When the oldest buffered line was added.
    since: Option<std::time::Instant>,
}

impl Batch {
    fn write_out(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            let r = self.file.write_all(&self.buf);
            self.buf.clear();
            self.since = None;
            r.context("cannot write the campaign journal")?;
        }
        Ok(())
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self
            .inner
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .write_out();
    }
}

impl Writer {
    /// Starts a new journal at `path` (replacing any) with `header`.
    pub fn create(path: &Path, header: &Header) -> Result<Writer> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let mut text = serde_json::to_string(&Line::Campaign(header.clone()))?;
        text.push('\n');
        crate::paths::write_atomic(path, text.as_bytes())?;
        Self::open(path, text.len() as u64)
    }

    /// Continues the journal at `path` after its first `valid_len` bytes
    /// (dropping a torn last line).
    pub fn open(path: &Path, valid_len: u64) -> Result<Writer> {
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        file.set_len(valid_len)
            .with_context(|| format!("cannot truncate {}", path.display()))?;
        drop(file);
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        Ok(Writer {
            inner: Mutex::new(Batch {
                file,
                buf: Vec::new(),
                since: None,
            }),
        })
    }

    /// Adds `lines`; they reach the file together, with a batch written
    /// whole by one `write` call, or (if the process dies) not at all,
    /// except for a torn tail.
    pub fn append(&self, lines: &[Line]) -> Result<()> {
        let mut p = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        for l in lines {
            serde_json::to_writer(&mut p.buf, l)?;
            p.buf.push(b'\n');
        }
        let now = std::time::Instant::now();
        let since = *p.since.get_or_insert(now);
        if p.buf.len() >= FLUSH_BYTES || now.duration_since(since) >= FLUSH_AFTER {
            p.write_out()?;
        }
        Ok(())
    }

    /// Writes the pending lines and flushes the journal to stable storage.
    pub fn sync(&self) -> Result<()> {
        let mut p = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        p.write_out()?;
        p.file
            .sync_data()
            .context("cannot sync the campaign journal")?;
        Ok(())
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
            steps: 9,
            schedule: seed * 7,
            sites: 5,
            ms: seed,
            races: vec![],
        }
    }

    #[test]
    fn torn_tail_is_dropped_and_corruption_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let w = Writer::create(&path, &header()).unwrap();
        w.append(&[
            Line::Sites(SiteSet {
                id: 5,
                hit: vec![1, 2],
            }),
            Line::Run(record(0)),
        ])
        .unwrap();
        w.append(&[Line::Run(record(1))]).unwrap();
        drop(w);
        let full = std::fs::read(&path).unwrap();
        // Torn: the last line lost its end.
        std::fs::write(&path, &full[..full.len() - 5]).unwrap();
        let j = Journal::read(&path).unwrap();
        assert_eq!(j.records.len(), 1);
        let w = Writer::open(&path, j.valid_len).unwrap();
        w.append(&[Line::Run(record(1))]).unwrap();
        drop(w);
        assert_eq!(std::fs::read(&path).unwrap(), full);
        // A malformed complete line.
        let mut bad = full.clone();
        bad.extend_from_slice(b"{\"t\":\"run\",\"seed\":\n");
        std::fs::write(&path, &bad).unwrap();
        let e = Journal::read(&path).unwrap_err().to_string();
        assert!(e.contains("corrupt journal") && e.contains("line 5"), "{e}");
        // A duplicate seed.
        let mut dup = full.clone();
        let line = serde_json::to_string(&Line::Run(record(1))).unwrap();
        dup.extend_from_slice(format!("{line}\n").as_bytes());
        std::fs::write(&path, &dup).unwrap();
        let e = Journal::read(&path).unwrap_err().to_string();
        assert!(e.contains("appears twice"), "{e}");
        // No header.
        std::fs::write(&path, format!("{line}\n")).unwrap();
        assert!(Journal::read(&path).is_err());
    }

    #[test]
    fn site_sets_round_trip() {
        let s = SiteSet::from_bitset(&[0b101, 0, 1 << 63]);
        assert_eq!(s.hit, vec![0, 2, 191]);
        assert_eq!(SiteSet::id_of(&[0b101, 0, 1 << 63, 0]), s.id);
        assert_ne!(SiteSet::id_of(&[0b100]), s.id);
    }
}
