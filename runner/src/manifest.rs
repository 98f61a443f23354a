//! The bundled targets' manifest, `targets/targets.toml`: each target
//! configuration with its args and the verdict kinds its buggy and fixed
//! builds are expected to give.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// One target configuration.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub name: String,
    /// Source file, relative to the manifest's directory.
    pub source: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Expected verdict kind of the plain (buggy) build.
    pub buggy: String,
    /// Expected verdict kind of the `-DFIXED` build.
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
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    target: Vec<Entry>,
}

/// A loaded manifest.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub dir: PathBuf,
    pub targets: Vec<Entry>,
}

impl Manifest {
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
        }
        Ok(Manifest {
            dir,
            targets: f.target,
        })
    }

    pub fn source(&self, e: &Entry) -> PathBuf {
        self.dir.join(&e.source)
    }

    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.targets.iter().find(|t| t.name == name)
    }
}
