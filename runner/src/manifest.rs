//! Target manifests and project files: `targets/targets.toml` (the bundled
//! targets) and a project's `heddle.toml` share this format. Each
//! `[[target]]` is a target configuration with its args and the verdict
//! kinds its buggy and fixed builds are expected to give; the optional
//! fields (`cflags`, `fixed_seeds`, `max_steps`, `replays`) are what
//! `heddle test` needs beyond that, and default to nothing.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// One target configuration.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Unique name of the configuration.
    pub name: String,
    /// Source file (or `.wasm` module), relative to the manifest's directory.
    pub source: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Expected verdict kind of the plain (buggy) build.
    pub buggy: String,
    /// Expected verdict kind of the `-DFIXED` build (empty: the target has
    /// no fixed variant).
    #[serde(default)]
    pub fixed: String,
    /// Expected buggy verdict when the memory checker is off.
    #[serde(default)]
    pub buggy_without_memcheck: Option<String>,
    #[serde(default)]
    pub description: String,
    /// A strategy and a seed count within which the buggy build shows its verdict.
    #[serde(default)]
    pub hunt_strategy: Option<String>,
    #[serde(default)]
    pub hunt_seeds: Option<u64>,
    /// Extra compiler flags for both builds.
    #[serde(default)]
    pub cflags: Vec<String>,
    /// Seeds `heddle test` runs on the fixed build (default: `hunt_seeds`, else 100).
    #[serde(default)]
    pub fixed_seeds: Option<u64>,
    /// Step budget per run (default: the `heddle run` default).
    #[serde(default)]
    pub max_steps: Option<u64>,
    /// Replay files (relative to the manifest's directory) that must still
    /// reproduce their recorded verdict: regression tests.
    #[serde(default)]
    pub replays: Vec<String>,
    /// Schedule plans (relative to the manifest's directory) to run as
    /// regression tests: each must trigger the bug on the buggy build and
    /// trigger nothing on the fixed build.
    #[serde(default)]
    pub plans: Vec<String>,
    /// `heddle test` skips this target's checks, giving this reason (they
    /// are reported as skipped, as `#[ignore]` tests are).
    #[serde(default)]
    pub skip: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    target: Vec<Entry>,
}

/// A loaded manifest.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The directory sources are relative to.
    pub dir: PathBuf,
    /// The target configurations, in file order.
    pub targets: Vec<Entry>,
}

impl Manifest {
    /// Reads and checks a manifest.
    pub fn load(path: &Path) -> Result<Manifest> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        let f: File = toml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.message()))?;
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let mut names = std::collections::BTreeSet::new();
        for t in &f.target {
            if !names.insert(&t.name) {
                bail!("{}: target name `{}` appears twice", path.display(), t.name);
            }
            if !dir.join(&t.source).exists() {
                bail!(
                    "{}: target `{}` names a missing source {}",
                    path.display(),
                    t.name,
                    t.source
                );
            }
            for r in &t.replays {
                if !dir.join(r).exists() {
                    bail!(
                        "{}: target `{}` names a missing replay file {r}",
                        path.display(),
                        t.name
                    );
                }
            }
            for r in &t.plans {
                if !dir.join(r).exists() {
                    bail!(
                        "{}: target `{}` names a missing plan file {r}",
                        path.display(),
                        t.name
                    );
                }
            }
        }
        Ok(Manifest {
            dir,
            targets: f.target,
        })
    }

    /// The path of an entry's source.
    pub fn source(&self, e: &Entry) -> PathBuf {
        self.dir.join(&e.source)
    }

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.targets.iter().find(|t| t.name == name)
    }
}
