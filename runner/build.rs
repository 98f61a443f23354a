//! Records the git commit heddle is built from, for `heddle --version`.
//! Only the version line carries it: replay files and reports name the
//! package version alone, so they stay byte-identical across checkouts.

use std::path::Path;
use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty());
    let version = format!(
        "{} (commit {})",
        env!("CARGO_PKG_VERSION"),
        commit.as_deref().unwrap_or("unknown")
    );
    println!("cargo:rustc-env=HEDDLE_LONG_VERSION={version}");
    // Rebuild when HEAD moves; without a git checkout, only when this
    // script changes (a missing path would rerun it on every build).
    let mut watched = false;
    if let Ok(top) = Command::new("git")
        .args(["rev-parse", "--git-dir"])
        .output()
    {
        let dir = String::from_utf8_lossy(&top.stdout).trim().to_string();
        let p = Path::new(&dir).join("HEAD");
        if top.status.success() && p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
            watched = true;
        }
        let head = std::fs::read_to_string(Path::new(&dir).join("HEAD")).unwrap_or_default();
        if let Some(r) = head.trim().strip_prefix("ref: ") {
            // In a linked worktree the branch's ref lives in the common
            // directory, not beside HEAD: ask git where.
            let p = Command::new("git")
                .args(["rev-parse", "--git-path", r])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| Path::new(String::from_utf8_lossy(&o.stdout).trim()).to_path_buf())
                .unwrap_or_else(|| Path::new(&dir).join(r));
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
    if !watched {
        println!("cargo:rerun-if-changed=build.rs");
    }
}
