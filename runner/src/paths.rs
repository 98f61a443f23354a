//! Where heddle keeps its caches: the assembled toolchain, modules compiled on
//! the fly from C/C++ sources, and compiled (serialized) wasmtime modules.
//!
//! The root is `$HEDDLE_CACHE_DIR`, else `$XDG_CACHE_HOME/heddle`, else
//! `$HOME/.cache/heddle`. Everything below it is content-addressed or stamped,
//! so it can be deleted at any time.

use anyhow::{Context, Result};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The cache root (not created).
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("HEDDLE_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("heddle");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
    PathBuf::from(home).join(".cache").join("heddle")
}

/// A subdirectory of the cache root, created if needed.
pub fn cache_dir(sub: &str) -> Result<PathBuf> {
    let dir = cache_root().join(sub);
    fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create cache directory {}", dir.display()))?;
    Ok(dir)
}

/// Writes `bytes` to `path` atomically: a reader sees the old file or the new
/// one, never a partial write (write to a sibling temp file, fsync, rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    // Unique per process and per call: threads of one process may write the
    // same cache entry at the same time.
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{}.tmp.{}.{n}", name, std::process::id()));
    {
        let mut f =
            File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// An exclusive advisory lock on a file in the cache, held until dropped.
/// Used so that concurrent heddle processes (parallel tests, CI shards on one
/// machine) assemble the toolchain or compile a source only once.
pub struct CacheLock(#[allow(dead_code)] File);

impl CacheLock {
    /// Takes the lock at `path`, waiting for another process that holds it.
    pub fn acquire(path: &Path) -> Result<CacheLock> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        let f = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open lock file {}", path.display()))?;
        f.lock()
            .with_context(|| format!("cannot lock {}", path.display()))?;
        Ok(CacheLock(f))
    }
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// SHA-256 of a file as lowercase hex, read in blocks (for large files).
pub fn sha256_file(path: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut f = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}
