//! Resolving what the user names on the command line into module bytes: a
//! `.wasm` file is read; a C/C++ source is compiled on the fly (through the
//! content-addressed cache, installing the toolchain first if needed).
//! Every module loaded is also kept in the cache under its own SHA-256, where
//! a replay finds it without rebuilding (`heddle replay`).

use crate::cc;
use crate::manifest::{Entry, Manifest};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Why a target could not be loaded: each names something the user gave.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The named file does not exist.
    #[error("{}: no such file", .0.display())]
    NotFound(PathBuf),
    /// The named path is a directory.
    #[error("{}: is a directory, not a module or source file", .0.display())]
    Directory(PathBuf),
    /// Compiler flags were given for a module, which is not compiled.
    #[error("compiler flags given but {} is not a C/C++ source", .0.display())]
    FlagsForModule(PathBuf),
    /// The file is not a wasm module heddle can run (the cause says why).
    #[error("{}", .path.display())]
    NotAModule {
        /// The module file.
        path: PathBuf,
        /// What is wrong with its bytes.
        #[source]
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A wasm object file (`-c` output) where a linked module is needed.
    #[error("{} is a wasm object file (compiled with -c), not a linked module: link it with `heddle cc`", .0.display())]
    ObjectFile(PathBuf),
    /// A manifest's source list names something that is not C or C++.
    #[error("{} is not a C or C++ source file", .0.display())]
    NotASource(PathBuf),
    /// A manifest's build command failed.
    #[error("build command `{command}` failed ({status}){last_line}")]
    BuildFailed {
        /// The command, as the manifest gives it.
        command: String,
        /// How it exited.
        status: std::process::ExitStatus,
        /// `: ` and the last line it printed on stderr, or nothing.
        last_line: String,
    },
}

/// The builds `heddle fuzz` alternates when a C/C++ source is given with
/// no optimisation level: -O1 (heddle's default level) and -O0, which keeps
/// the accesses an optimiser merges or removes (a double fetch, a re-read
/// flag). Measured over the runs-to-bug bench (`benches/runs-to-bug.sh`,
/// build `O1+O0`): a median 1.09× the runs of -O1 alone (at most 1.6×) on
/// the bugs both builds have, and the bugs only -O0 keeps found.
pub const DEFAULT_FUZZ_LEVELS: &str = "1,0";

/// Parses a list of optimisation levels (`0,1`, `0,2,s`) into the clang
/// flags that choose them (`-O0`, `-O1`), in the order given.
pub fn parse_opt_levels(spec: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for l in spec.split(',') {
        let l = l.trim().trim_start_matches("-O");
        if !matches!(l, "0" | "1" | "2" | "3" | "s" | "z" | "g") {
            anyhow::bail!(
                "bad optimisation level `{l}` in `{spec}` (expected a list of 0, 1, 2, 3, s, z, g, e.g. 0,1)"
            );
        }
        let flag = format!("-O{l}");
        if out.contains(&flag) {
            anyhow::bail!("optimisation level {l} is listed twice in `{spec}`");
        }
        out.push(flag);
    }
    Ok(out)
}

/// Loads a C/C++ source once per optimisation flag of `levels` (from
/// [`parse_opt_levels`]), each build labelled `O0`, `O1`, ….
pub fn load_builds(
    path: &Path,
    cflags: &[String],
    levels: &[String],
) -> Result<Vec<(String, Target)>> {
    if path.exists() && !path.is_dir() && !cc::is_source(path) {
        anyhow::bail!(
            "--opt builds a C/C++ source at several levels, but {} is a module: give its source, or drop --opt",
            path.display()
        );
    }
    if cc::compile::has_opt_level(cflags) {
        anyhow::bail!("--opt chooses the optimisation levels: drop the -O flag from --cflag");
    }
    let mut out = Vec::new();
    for flag in levels {
        let mut f = cflags.to_vec();
        f.push(flag.clone());
        out.push((flag.trim_start_matches('-').to_string(), load(path, &f)?));
    }
    Ok(out)
}

/// A target module, loaded.
#[derive(Debug, Clone)]
pub struct Target {
    /// What the user named.
    pub given: PathBuf,
    /// The module file (the cache entry for a source).
    pub module_path: PathBuf,
    /// Compiler flags it was built with (sources only).
    pub cflags: Vec<String>,
    /// The module's bytes.
    pub bytes: Vec<u8>,
}

/// Loads `path`; `cflags` are extra clang flags for a source (e.g. `-DFIXED`).
pub fn load(path: &Path, cflags: &[String]) -> Result<Target> {
    if !path.exists() {
        return Err(TargetError::NotFound(path.into()).into());
    }
    if path.is_dir() {
        return Err(TargetError::Directory(path.into()).into());
    }
    if cc::is_source(path) {
        let tc = cc::ensure()?;
        let (module_path, flags) = build_sources(&tc, &[path.to_path_buf()], cflags)
            .with_context(|| format!("compiling {}", path.display()))?;
        return read_module(path, &module_path, &flags);
    }
    if !cflags.is_empty() {
        return Err(TargetError::FlagsForModule(path.into()).into());
    }
    read_module(path, path, &[])
}

/// Compiles `sources` together through the cache. The flags returned name
/// the optimisation level, default or not, so a replay records what the
/// module was built with.
fn build_sources(
    tc: &cc::Toolchain,
    sources: &[PathBuf],
    cflags: &[String],
) -> Result<(PathBuf, Vec<String>)> {
    let flags = cc::compile::with_opt_level(cflags);
    let module_path = cc::compile_cached(tc, sources, &flags)?;
    Ok((module_path, flags))
}

/// Reads the module at `module_path` (built from `given` with `flags`) and
/// keeps it in the cache by hash.
fn read_module(given: &Path, module_path: &Path, flags: &[String]) -> Result<Target> {
    let bytes = std::fs::read(module_path)
        .with_context(|| format!("cannot read {}", module_path.display()))?;
    let t = from_bytes(given, module_path, flags, bytes)?;
    keep_by_hash(&t.bytes);
    Ok(t)
}

/// A target from module bytes already read from `module_path`; `given` is
/// what reports name (the source it was built from).
pub fn from_bytes(
    given: &Path,
    module_path: &Path,
    cflags: &[String],
    bytes: Vec<u8>,
) -> Result<Target> {
    let info = crate::modinfo::ModuleInfo::parse(&bytes).map_err(|e| TargetError::NotAModule {
        path: module_path.into(),
        cause: e.into(),
    })?;
    if info.is_object {
        return Err(TargetError::ObjectFile(module_path.into()).into());
    }
    Ok(Target {
        given: given.to_path_buf(),
        module_path: module_path.to_path_buf(),
        cflags: cflags.to_vec(),
        bytes,
    })
}

/// The cache entry of the module whose SHA-256 is `sha256`, if present.
pub fn cached_by_hash(sha256: &str) -> Option<PathBuf> {
    let p = crate::paths::cache_root()
        .join("by-hash")
        .join(format!("{sha256}.wasm"));
    p.exists().then_some(p)
}

/// Keeps `bytes` in the cache under their SHA-256 (best effort: a cache that
/// cannot be written only costs a rebuild later).
pub fn keep_by_hash(bytes: &[u8]) {
    let sha = crate::paths::sha256_hex(bytes);
    if cached_by_hash(&sha).is_some() {
        return;
    }
    if let Ok(dir) = crate::paths::cache_dir("by-hash") {
        let _ = crate::paths::write_atomic(&dir.join(format!("{sha}.wasm")), bytes);
    }
}

/// Loads the target a manifest entry describes — its `-DFIXED` build when
/// `fixed` — whichever form it has: one source or module (as [`load`]),
/// several sources compiled and linked together through the cache, or a
/// build command run in the manifest's directory with heddle's compilers,
/// followed by the module it produced.
pub fn load_entry(m: &Manifest, e: &Entry, fixed: bool) -> Result<Target> {
    let mut cflags = e.cflags.clone();
    if fixed {
        cflags.push("-DFIXED".into());
    }
    let what = || format!("target `{}`", e.name);
    if let (Some(cmd), Some(module)) = (&e.build, &e.module) {
        run_build(m, cmd, &cflags).with_context(what)?;
        return load(&m.dir.join(module), &[]).with_context(what);
    }
    if e.sources.is_empty() {
        return load(&m.source(e), &cflags).with_context(what);
    }
    let sources = m.sources(e);
    for s in &sources {
        if !cc::is_source(s) {
            return Err(TargetError::NotASource(s.clone())).with_context(what);
        }
    }
    let tc = cc::ensure()?;
    let (module_path, flags) = build_sources(&tc, &sources, &cflags).with_context(what)?;
    read_module(&sources[0], &module_path, &flags)
}

/// Runs a manifest's build command with heddle's compilers and `cflags` in
/// its environment.
fn run_build(m: &Manifest, cmd: &str, cflags: &[String]) -> Result<()> {
    let tc = cc::ensure()?;
    let exe = std::env::current_exe().context("cannot find the heddle executable")?;
    let glue = cc::glue::install(&tc, &exe)?;
    let flags = cflags.join(" ");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(&m.dir)
        .env("CC", &glue.cc)
        .env("CXX", &glue.cxx)
        .env("AR", &glue.ar)
        .env("RANLIB", &glue.ranlib)
        .env("NM", &glue.nm)
        .env("PATH", cc::glue::path_with_names(&glue))
        .env("CFLAGS", &flags)
        .env("CXXFLAGS", &flags)
        .output()
        .context("cannot run sh")?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(TargetError::BuildFailed {
            command: cmd.into(),
            status: out.status,
            last_line: last.map(|l| format!(": {}", l.trim())).unwrap_or_default(),
        }
        .into());
    }
    Ok(())
}
