//! The replay file: everything needed to reproduce a run on another machine.
//! This module owns the format; [`crate::reproduce`] writes and replays it.
//!
//! ```toml
//! format = 2
//! heddle = "0.1.0+instrumenter.39" # the version, and its instrumenter's
//!
//! [module]
//! sha256 = "…"                   # of the original (uninstrumented) module
//! source = "targets/race_bank.c" # what was run (rebuilt when no module is shipped)
//! cflags = []
//! file = "race_bank-28ea61c3d1e2.wasm" # the module itself, beside this file
//!
//! [run]
//! instrumentation = "granularity=all memcheck=on"
//! strategy = "pct:3:k=812"
//! seed = 17
//! args = ["2", "2"]
//! env = []
//! max_steps = 100000000
//! hang_steps = 1048576
//! fair_steps = 65536
//! max_time_ms = 3600000
//! budget = [1, 2000]
//! expected_exit = 0
//! races = "report"
//!
//! [[run.dirs]]                   # a directory granted with --dir HOST[:GUEST]
//! host = "data"
//! guest = "/data"
//! files = { "input.txt" = "…" }  # relative path → SHA-256, when the run started
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
//! differing step and says where. Standard input is always empty and the
//! clocks and random bytes are functions of the seed, so with the module,
//! the arguments, the environment and the granted files every input of the
//! run is in the file.
//!
//! Format 1 (no `module.file`, no `run.dirs`) is still read.
//!
//! The `heddle` field names the instrumenter's version as build metadata
//! ([`writer`]): the rewrite decides which sites and decision points a
//! schedule names, so a replay made with another instrumenter may diverge,
//! and `heddle replay` then says so. Heddles that wrote the field without it
//! (or read it as an opaque string) read these files unchanged.

use super::{decode_decisions, encode_decisions, Decision};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Version of the file format this heddle writes.
pub const FORMAT: u32 = 2;

/// The oldest format this heddle still reads.
pub const OLDEST_FORMAT: u32 = 1;

/// The `heddle` field this heddle writes: its version with its
/// instrumenter's version as build metadata, `0.1.0+instrumenter.39`.
pub fn writer() -> String {
    format!(
        "{}+instrumenter.{}",
        env!("CARGO_PKG_VERSION"),
        crate::instrument::INSTRUMENTER_VERSION
    )
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
/// The module a replay was recorded on.
pub struct ModuleRef {
    /// Its SHA-256, hex.
    pub sha256: String,
    /// What the user ran (a source or a module path), for humans and for
    /// `heddle replay` when no target is given.
    #[serde(default)]
    pub source: String,
    /// Extra compiler flags for a source (e.g. `-DFIXED`).
    #[serde(default)]
    pub cflags: Vec<String>,
    /// The module's file name, in the replay file's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// A directory the run was granted (`--dir HOST[:GUEST]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirRecord {
    /// The host directory as the user named it.
    pub host: String,
    /// Where the guest sees it.
    pub guest: String,
    /// SHA-256 of each regular file below it (relative `/`-separated path),
    /// taken when the replay file was written.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
/// How the run was configured.
pub struct RunSpec {
    /// The instrumentation configuration, as `Config::describe` writes it.
    pub instrumentation: String,
    /// The strategy, as `--strategy` takes it.
    pub strategy: String,
    /// The run's seed.
    pub seed: u64,
    #[serde(default)]
    /// The program's arguments.
    pub args: Vec<String>,
    #[serde(default)]
    /// The program's environment, `KEY=VALUE`.
    pub env: Vec<String>,
    /// The step budget.
    pub max_steps: u64,
    /// Steps without progress that make a hang (files written before the
    /// field: none, the step budget alone).
    #[serde(default = "no_hang_window")]
    pub hang_steps: u64,
    /// Steps a ready thread may wait before it is run regardless of the
    /// strategy (files written before the field: 0, never).
    #[serde(default)]
    pub fair_steps: u64,
    /// The virtual-time budget in milliseconds.
    pub max_time_ms: u64,
    /// The preemption budget range, in guest steps.
    pub budget: [u32; 2],
    #[serde(default)]
    /// The exit code that counts as a pass.
    pub expected_exit: i32,
    /// Data-race detection (`report`, `fail`, `off`).
    #[serde(default)]
    pub races: crate::model::RaceMode,
    /// Directories granted to the guest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dirs: Vec<DirRecord>,
}

fn no_hang_window() -> u64 {
    u64::MAX
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
/// How the recorded run ended.
pub struct VerdictRecord {
    /// The verdict kind.
    pub kind: String,
    /// The verdict's signature.
    pub signature: String,
    /// One line for people.
    pub summary: String,
    /// SHA-256 of the program's output.
    pub output_sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
/// The recorded decisions.
pub struct ScheduleRecord {
    /// How many there are.
    pub count: usize,
    /// The decisions, encoded one per token.
    pub decisions: String,
}

/// Why a replay file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The file cannot be read.
    #[error("{}: cannot read", .path.display())]
    Unreadable {
        /// The replay file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a replay this heddle reads (the cause says why).
    #[error("{}", .path.display())]
    Invalid {
        /// The replay file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        #[source]
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// A replay file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayFile {
    /// The file format version.
    pub format: u32,
    /// The heddle version that wrote it.
    pub heddle: String,
    /// The module.
    pub module: ModuleRef,
    /// The run's configuration.
    pub run: RunSpec,
    /// The recorded verdict.
    pub verdict: VerdictRecord,
    /// The recorded schedule.
    pub schedule: ScheduleRecord,
}

impl ReplayFile {
    /// The recorded decisions, checked against `schedule.count`.
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

    /// The instrumenter version the `heddle` field names (see [`writer`]),
    /// if it names one (files from heddles that did not write it do not).
    pub fn instrumenter_version(&self) -> Option<u32> {
        let (_, meta) = self.heddle.split_once('+')?;
        let mut ids = meta.split('.');
        while let Some(id) = ids.next() {
            if id == "instrumenter" {
                return ids.next()?.parse().ok();
            }
        }
        None
    }

    /// Records `ds` as the schedule.
    pub fn set_decisions(&mut self, ds: &[Decision]) {
        self.schedule.count = ds.len();
        self.schedule.decisions = format!("{}\n", encode_decisions(ds));
    }

    /// The file's text.
    pub fn to_toml(&self) -> Result<String> {
        Ok(toml::to_string(self)?)
    }

    /// Parses a replay file, with a one-line error for anything that is not one.
    pub fn parse(text: &str) -> Result<ReplayFile> {
        let f: ReplayFile = toml::from_str(text).map_err(|e| {
            let msg = e.message().to_string();
            anyhow::anyhow!("not a valid heddle replay file: {msg}")
        })?;
        if !(OLDEST_FORMAT..=FORMAT).contains(&f.format) {
            bail!(
                "replay file format {} is not supported (this heddle reads formats {OLDEST_FORMAT} to {FORMAT})",
                f.format
            );
        }
        if !is_sha256(&f.module.sha256) {
            bail!("replay file has a malformed module.sha256");
        }
        f.decisions()
            .context("replay file has a corrupt schedule")?;
        f.instrumentation()?;
        f.env_pairs()?;
        if let Some(file) = &f.module.file {
            if file.is_empty() || file.contains(['/', '\\']) || file.starts_with('.') {
                bail!("replay file names its module `{file}`: expected a file name beside it");
            }
        }
        for d in &f.run.dirs {
            for (name, sha) in &d.files {
                if !is_sha256(sha) {
                    bail!("replay file has a malformed digest for {}/{name}", d.host);
                }
            }
        }
        Ok(f)
    }

    /// Reads and parses the replay file at `path`.
    pub fn load(path: &Path) -> Result<ReplayFile, ReplayError> {
        let text = std::fs::read_to_string(path).map_err(|source| ReplayError::Unreadable {
            path: path.into(),
            source,
        })?;
        Self::parse(&text).map_err(|e| ReplayError::Invalid {
            path: path.into(),
            cause: e.into(),
        })
    }

    /// The instrumentation configuration the run used.
    pub fn instrumentation(&self) -> Result<crate::instrument::Config> {
        crate::instrument::Config::parse_description(&self.run.instrumentation)
            .context("replay file has a bad run.instrumentation")
    }

    /// The file name under which the module is stored beside replay files:
    /// the target's stem and the start of the module's hash.
    pub fn module_file_name(&self) -> String {
        let stem = Path::new(&self.module.source)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .filter(|s| !s.is_empty() && !s.starts_with('.'))
            .unwrap_or_else(|| "module".into());
        let stem: String = stem
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{stem}-{}.wasm", &self.module.sha256[..12])
    }

    /// The environment as pairs.
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

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit())
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
                file: None,
            },
            run: RunSpec {
                instrumentation: "granularity=all".into(),
                strategy: "random".into(),
                seed: 3,
                args: vec!["2".into()],
                env: vec![],
                max_steps: 10,
                hang_steps: 4,
                fair_steps: 0,
                max_time_ms: 10,
                budget: [1, 2],
                expected_exit: 0,
                races: Default::default(),
                dirs: vec![],
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
    fn the_heddle_field_names_the_instrumenter_version() {
        let mut f = sample();
        assert_eq!(f.instrumenter_version(), None);
        f.heddle = writer();
        assert_eq!(
            f.instrumenter_version(),
            Some(crate::instrument::INSTRUMENTER_VERSION)
        );
        for (heddle, v) in [
            ("0.2.0+instrumenter.7", Some(7)),
            ("0.2.0+git.abc.instrumenter.8.x", Some(8)),
            ("0.2.0+instrumenter", None),
            ("0.2.0+instrumenter.x", None),
            ("0.2.0+other.9", None),
        ] {
            f.heddle = heddle.into();
            assert_eq!(f.instrumenter_version(), v, "{heddle}");
        }
        // An old reader's view: the field is a plain string.
        f.heddle = writer();
        assert_eq!(ReplayFile::parse(&f.to_toml().unwrap()).unwrap(), f);
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

    /// Every field the writer can set comes back equal, whatever its text.
    #[test]
    fn round_trip_property() {
        use crate::model::RaceMode;
        use crate::sched::rng::Rng;
        let mut rng = Rng::new(20, 1);
        let texts = [
            "", "2", "a b", "x=y", "\"q\"", "'", "\\", "é€", "\n", "#", "[t]", "-DX=1", "%",
        ];
        let pick = |rng: &mut Rng| texts[rng.below(texts.len() as u64) as usize].to_string();
        for i in 0..500 {
            let mut f = sample();
            let n = |rng: &mut Rng| rng.below(4) as usize;
            f.module.source = format!("dir {i}/{}.c", pick(&mut rng));
            f.module.cflags = (0..n(&mut rng)).map(|_| pick(&mut rng)).collect();
            f.module.sha256 = format!("{:064x}", rng.next_u64());
            f.module.file = rng.chance(0.5).then(|| f.module_file_name());
            f.run.args = (0..n(&mut rng)).map(|_| pick(&mut rng)).collect();
            f.run.env = (0..n(&mut rng))
                .map(|_| format!("K{}={}", rng.below(9), pick(&mut rng)))
                .collect();
            f.run.seed = rng.next_u64();
            f.run.max_steps = rng.next_u64();
            f.run.hang_steps = rng.next_u64();
            f.run.fair_steps = rng.next_u64();
            f.run.max_time_ms = rng.next_u64();
            f.run.budget = [rng.below(9) as u32, rng.next_u64() as u32];
            f.run.expected_exit = rng.next_u64() as i32;
            f.run.races = [RaceMode::Report, RaceMode::Fail, RaceMode::Off][rng.below(3) as usize];
            f.run.instrumentation = crate::instrument::Config {
                budget_in_global: rng.chance(0.5),
                granularity: if rng.chance(0.5) {
                    crate::instrument::Granularity::All
                } else {
                    crate::instrument::Granularity::Sync
                },
                exclude_funcs: (0..n(&mut rng)).map(|k| format!("f{k}*")).collect(),
                ..Default::default()
            }
            .describe();
            f.run.dirs = (0..n(&mut rng))
                .map(|k| DirRecord {
                    host: format!("{}/{k}", pick(&mut rng)),
                    guest: format!("/g{k}"),
                    files: (0..n(&mut rng))
                        .map(|j| (format!("{}{j}", pick(&mut rng)), format!("{:064x}", j)))
                        .collect(),
                })
                .collect();
            f.verdict.summary = pick(&mut rng);
            let ds: Vec<Decision> = (0..n(&mut rng) * 7)
                .map(|_| {
                    let tid = rng.below(5) as u32;
                    let site = rng.below(1000) as u32;
                    if rng.chance(0.2) {
                        Decision::Value {
                            tid,
                            site,
                            value: 1,
                            options: 3,
                        }
                    } else {
                        Decision::Thread {
                            tid,
                            site,
                            options: 2,
                        }
                    }
                })
                .collect();
            f.set_decisions(&ds);
            let text = f.to_toml().unwrap();
            let back = ReplayFile::parse(&text).unwrap_or_else(|e| panic!("{e:#}\n{text}"));
            assert_eq!(back, f, "{text}");
            assert_eq!(back.decisions().unwrap(), ds);
        }
    }

    #[test]
    fn reads_format_1() {
        let text = sample()
            .to_toml()
            .unwrap()
            .replace("format = 2", "format = 1");
        let f = ReplayFile::parse(&text).unwrap();
        assert_eq!(f.format, 1);
        assert_eq!(f.module.file, None);
        assert!(f.run.dirs.is_empty());
    }

    #[test]
    fn rejects_a_module_path_outside_its_directory() {
        for bad in ["../x.wasm", "a/b.wasm", ""] {
            let mut f = sample();
            f.module.file = Some(bad.into());
            assert!(ReplayFile::parse(&f.to_toml().unwrap()).is_err(), "{bad}");
        }
    }
}
