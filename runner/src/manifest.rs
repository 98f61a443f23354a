//! Target manifests and project files: `targets/targets.toml` (the bundled
//! targets) and a project's `heddle.toml` share this format. Each
//! `[[target]]` is a target configuration with its args and the verdict
//! kinds its buggy and fixed builds are expected to give. A target is one
//! source, several sources linked together, or a build command and the
//! module it produces (see [`crate::target::load_entry`]). The optional
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
    /// Source file (or module), relative to the manifest's directory. A
    /// target gives exactly one of `source`, `sources`, or `build` with
    /// `module`.
    #[serde(default)]
    pub source: String,
    /// Several C/C++ sources compiled and linked together into one module.
    #[serde(default)]
    pub sources: Vec<String>,
    /// A build command (run with `sh -c` in the manifest's directory, with
    /// heddle's `CC`, `CXX`, `AR`, `RANLIB`, `NM` and the target's `cflags`
    /// — plus `-DFIXED` for the fixed build — as `CFLAGS` and `CXXFLAGS`)
    /// that produces `module`.
    #[serde(default)]
    pub build: Option<String>,
    /// The module `build` produces, relative to the manifest's directory.
    #[serde(default)]
    pub module: Option<String>,
    #[serde(default)]
    /// Arguments passed to the program.
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
    /// One line for people: what the target tests.
    pub description: String,
    /// A strategy (or portfolio) and a seed count within which the buggy
    /// build shows its verdict (default: the `default` portfolio).
    #[serde(default)]
    pub hunt_strategy: Option<String>,
    #[serde(default)]
    /// Seeds within which `hunt_strategy` shows the bug.
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
    /// Runs of this target are long (many threads or steps): exhaustive
    /// checks sample fewer seeds of it.
    #[serde(default)]
    pub large: bool,
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
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut names = std::collections::BTreeSet::new();
        for t in &f.target {
            if !names.insert(&t.name) {
                bail!("{}: target name `{}` appears twice", path.display(), t.name);
            }
            let forms = [
                !t.source.is_empty(),
                !t.sources.is_empty(),
                t.build.is_some() || t.module.is_some(),
            ];
            if forms.iter().filter(|f| **f).count() != 1 {
                bail!(
                    "{}: target `{}` needs exactly one of `source`, `sources`, or `build` with `module`",
                    path.display(),
                    t.name
                );
            }
            if t.build.is_some() != t.module.is_some() {
                bail!(
                    "{}: target `{}`: `build` and `module` go together",
                    path.display(),
                    t.name
                );
            }
            let mut files: Vec<&String> = t.sources.iter().collect();
            if !t.source.is_empty() {
                files.push(&t.source);
            }
            for f in files {
                if !dir.join(f).exists() {
                    bail!(
                        "{}: target `{}` names a missing source {f}",
                        path.display(),
                        t.name
                    );
                }
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

    /// The path of an entry's source: its one source, the first of its
    /// sources, or the module its build produces.
    pub fn source(&self, e: &Entry) -> PathBuf {
        let name = e.sources.first().or(e.module.as_ref()).unwrap_or(&e.source);
        self.dir.join(name)
    }

    /// The paths of all of an entry's sources (empty for a build command).
    pub fn sources(&self, e: &Entry) -> Vec<PathBuf> {
        if !e.sources.is_empty() {
            e.sources.iter().map(|s| self.dir.join(s)).collect()
        } else if e.build.is_none() {
            vec![self.dir.join(&e.source)]
        } else {
            Vec::new()
        }
    }

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.targets.iter().find(|t| t.name == name)
    }
}
