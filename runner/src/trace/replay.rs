//! The replay file: everything needed to reproduce a run on another machine.
//!
//! ```toml
//! format = 1
//! heddle = "0.1.0"
//!
//! [module]
//! sha256 = "…"                   # of the original (uninstrumented) module
//! source = "targets/race_bank.c" # informational: what was run
//! cflags = []
//!
//! [run]
//! instrumentation = "granularity=all"
//! strategy = "pct:3:k=812"
//! seed = 17
//! args = ["2", "2"]
//! env = []
//! max_steps = 2000000
//! max_time_ms = 3600000
//! budget = [1, 2000]
//! expected_exit = 0
//!
//! [verdict]
//! kind = "assertion"
//! signature = "assertion@main (race_bank.c:76)"
//! summary = "…"
//! output_sha256 = "…"
//!
//! [schedule]
//! count = 123
//! decisions = """
//! 1@24/2 0@22/2 …
//! """
//! ```
//!
//! Each decision carries its expectation (the chosen thread and the site it
//! was about to execute), so a replay that diverges stops at the first
//! differing step and says where.

use super::{decode_decisions, encode_decisions, Decision};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Version of the file format this heddle writes and reads.
pub const FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModuleRef {
    pub sha256: String,
    /// What the user ran (a source or a module path), for humans and for
    /// `heddle replay` when no target is given.
    #[serde(default)]
    pub source: String,
    /// Extra compiler flags for a source (e.g. `-DFIXED`).
    #[serde(default)]
    pub cflags: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    pub instrumentation: String,
    pub strategy: String,
    pub seed: u64,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: Vec<String>,
    pub max_steps: u64,
    pub max_time_ms: u64,
    pub budget: [u32; 2],
    #[serde(default)]
    pub expected_exit: i32,
    /// Data-race detection (`report`, `fail`, `off`).
    #[serde(default)]
    pub races: crate::runtime::RaceMode,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerdictRecord {
    pub kind: String,
    pub signature: String,
    pub summary: String,
    pub output_sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleRecord {
    pub count: usize,
    pub decisions: String,
}

/// A replay file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayFile {
    pub format: u32,
    pub heddle: String,
    pub module: ModuleRef,
    pub run: RunSpec,
    pub verdict: VerdictRecord,
    pub schedule: ScheduleRecord,
}

impl ReplayFile {
    pub fn decisions(&self) -> Result<Vec<Decision>> {
        let ds = decode_decisions(&self.schedule.decisions)?;
        if ds.len() != self.schedule.count {
            bail!(
                "schedule.count says {} decisions but {} are listed",
                self.schedule.count,
                ds.len()
            );
        }
        Ok(ds)
    }

    pub fn set_decisions(&mut self, ds: &[Decision]) {
        self.schedule.count = ds.len();
        self.schedule.decisions = format!("{}\n", encode_decisions(ds));
    }

    pub fn to_toml(&self) -> Result<String> {
        Ok(toml::to_string(self)?)
    }

    /// Parses a replay file, with a one-line error for anything that is not one.
    pub fn parse(text: &str) -> Result<ReplayFile> {
        let f: ReplayFile = toml::from_str(text).map_err(|e| {
            let msg = e.message().to_string();
            anyhow::anyhow!("not a valid heddle replay file: {msg}")
        })?;
        if f.format != FORMAT {
            bail!(
                "replay file format {} is not supported (this heddle reads format {FORMAT})",
                f.format
            );
        }
        if f.module.sha256.len() != 64 || !f.module.sha256.chars().all(|c| c.is_ascii_hexdigit()) {
            bail!("replay file has a malformed module.sha256");
        }
        f.decisions()
            .context("replay file has a corrupt schedule")?;
        Ok(f)
    }

    pub fn load(path: &Path) -> Result<ReplayFile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        Self::parse(&text).with_context(|| format!("{}", path.display()))
    }

    pub fn env_pairs(&self) -> Result<Vec<(String, String)>> {
        self.run
            .env
            .iter()
            .map(|kv| {
                kv.split_once('=')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .with_context(|| format!("bad env entry `{kv}` (expected KEY=VALUE)"))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ReplayFile {
        let mut f = ReplayFile {
            format: FORMAT,
            heddle: "0.1.0".into(),
            module: ModuleRef {
                sha256: "a".repeat(64),
                source: "x.c".into(),
                cflags: vec![],
            },
            run: RunSpec {
                instrumentation: "granularity=all".into(),
                strategy: "random".into(),
                seed: 3,
                args: vec!["2".into()],
                env: vec![],
                max_steps: 10,
                max_time_ms: 10,
                budget: [1, 2],
                expected_exit: 0,
                races: Default::default(),
            },
            verdict: VerdictRecord {
                kind: "pass".into(),
                signature: "pass".into(),
                summary: "pass".into(),
                output_sha256: "b".repeat(64),
            },
            schedule: ScheduleRecord {
                count: 0,
                decisions: String::new(),
            },
        };
        f.set_decisions(&[Decision::Thread {
            tid: 1,
            site: 2,
            options: 2,
        }]);
        f
    }

    #[test]
    fn round_trip() {
        let f = sample();
        let text = f.to_toml().unwrap();
        assert_eq!(ReplayFile::parse(&text).unwrap(), f);
    }

    #[test]
    fn rejects_corrupt_files() {
        assert!(ReplayFile::parse("garbage = [").is_err());
        assert!(ReplayFile::parse("x = 1").is_err());
        let mut f = sample();
        f.format = 99;
        assert!(ReplayFile::parse(&f.to_toml().unwrap())
            .unwrap_err()
            .to_string()
            .contains("format 99"));
        let text = sample().to_toml().unwrap().replace("1@2/2", "1@2");
        assert!(ReplayFile::parse(&text).is_err());
    }
}
