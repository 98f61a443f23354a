//! Resolving what the user names on the command line into module bytes: a
//! `.wasm` file is read; a C/C++ source is compiled on the fly (through the
//! content-addressed cache, installing the toolchain first if needed).

use crate::cc;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// A target module, loaded.
#[derive(Debug, Clone)]
pub struct Target {
    /// What the user named.
    pub given: PathBuf,
    /// The module file (the cache entry for a source).
    pub module_path: PathBuf,
    /// Compiler flags it was built with (sources only).
    pub cflags: Vec<String>,
    pub bytes: Vec<u8>,
}

/// Loads `path`; `cflags` are extra clang flags for a source (e.g. `-DFIXED`).
pub fn load(path: &Path, cflags: &[String]) -> Result<Target> {
    if !path.exists() {
        bail!("{}: no such file", path.display());
    }
    if path.is_dir() {
        bail!(
            "{}: is a directory, not a module or source file",
            path.display()
        );
    }
    let module_path = if cc::is_source(path) {
        let tc = cc::ensure()?;
        cc::compile_cached(&tc, &[path.to_path_buf()], cflags)
            .with_context(|| format!("compiling {}", path.display()))?
    } else {
        if !cflags.is_empty() {
            bail!(
                "compiler flags given but {} is not a C/C++ source",
                path.display()
            );
        }
        path.to_path_buf()
    };
    let bytes = std::fs::read(&module_path)
        .with_context(|| format!("cannot read {}", module_path.display()))?;
    crate::modinfo::ModuleInfo::parse(&bytes).with_context(|| format!("{}", path.display()))?;
    Ok(Target {
        given: path.to_path_buf(),
        module_path,
        cflags: cflags.to_vec(),
        bytes,
    })
}
