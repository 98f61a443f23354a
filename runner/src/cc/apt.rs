//! apt's downloader and private apt configurations, shared by the steps
//! that fetch the sysroot's headers ([`super::bootstrap`]) and the LLVM
//! sources libc++ is built from ([`super::libcxx`]).

use super::distro::PinnedFile;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `apt-helper download-file URL DEST [SHA256:…]`: apt's own downloader,
/// with the system's proxy configuration.
pub(super) fn apt_helper_download(url: &str, dest: &Path, sha256: Option<&str>) -> Result<()> {
    let mut cmd = Command::new("/usr/lib/apt/apt-helper");
    // Root would hand the download to the `_apt` user, who cannot write
    // into a user's cache.
    cmd.arg("-oAPT::Sandbox::User=root")
        .arg("download-file")
        .arg(url)
        .arg(dest);
    if let Some(h) = sha256 {
        cmd.arg(format!("SHA256:{h}"));
    }
    let out = cmd
        .output()
        .with_context(|| format!("cannot run apt-helper to download {url}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .find(|l| l.starts_with("E:") || l.contains("Hash Sum mismatch"))
            .or_else(|| err.lines().map(str::trim).rfind(|l| !l.is_empty()))
            .unwrap_or("(no message)")
            .to_string();
        bail!("downloading {url} failed: {line}");
    }
    Ok(())
}

/// Downloads a pinned file of Debian's pool from `mirror` into `dir`,
/// checked against its SHA-256. Returns its path.
pub(super) fn fetch_pinned(mirror: &str, file: &PinnedFile, dir: &Path) -> Result<PathBuf> {
    let url = format!("{}/{}", mirror.trim_end_matches('/'), file.pool_path);
    let dest = dir.join(file.name());
    apt_helper_download(&url, &dest, Some(file.sha256)).map_err(|e| {
        anyhow::anyhow!(
            "{e} (set HEDDLE_DEBIAN_MIRROR to a Debian mirror or snapshot that has {})",
            file.pool_path
        )
    })?;
    let have = crate::paths::sha256_file(&dest)?;
    if have != file.sha256 {
        bail!(
            "{} has SHA-256 {have}, not {} (mirror {mirror})",
            file.name(),
            file.sha256
        );
    }
    Ok(dest)
}

/// apt-get options for a private configuration: only `sources`, lists and
/// the package cache in the given directories, nothing of the system's.
pub(super) fn private_apt_options(sources: &Path, lists: &Path, cache: &Path) -> Vec<String> {
    vec![
        format!("-oDir::Etc::SourceList={}", sources.display()),
        "-oDir::Etc::SourceParts=/dev/null".to_string(),
        format!("-oDir::State::Lists={}", lists.display()),
        format!("-oDir::Cache={}", cache.display()),
        "-oAPT::Sandbox::User=root".to_string(),
        "-oAcquire::Languages=none".to_string(),
        "-oAcquire::IndexTargets::deb::DEP-11::DefaultEnabled=false".to_string(),
        "-oAcquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false".to_string(),
        "-oAcquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false".to_string(),
    ]
}
