//! `heddle targets`: list (and build) the bundled targets.

use super::EXIT_OK;
use crate::manifest::Manifest;
use crate::target;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct TargetsArgs {
    /// The manifest.
    #[arg(long, default_value = "targets/targets.toml")]
    pub manifest: PathBuf,
    /// Compile every target, buggy and fixed, into the module cache.
    #[arg(long)]
    pub build: bool,
}

pub fn targets_cmd(a: TargetsArgs) -> Result<i32> {
    let m = Manifest::load(&a.manifest)?;
    for t in &m.targets {
        println!(
            "{:<16} {:<16} buggy={:<15} fixed={:<5} {}",
            t.name,
            m.source(t)
                .strip_prefix(&m.dir)
                .unwrap_or(&m.source(t))
                .display()
                .to_string(),
            t.buggy,
            t.fixed,
            t.description
        );
        if a.build {
            for (variant, fixed) in [("buggy", false), ("fixed", true)] {
                let out = target::load_entry(&m, t, fixed)?;
                println!("    {variant}: {}", out.module_path.display());
            }
        }
    }
    Ok(EXIT_OK)
}
