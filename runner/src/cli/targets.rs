//! `heddle targets`: list (and build) the bundled targets.

use super::EXIT_OK;
use crate::cc;
use crate::manifest::Manifest;
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
    let tc = if a.build { Some(cc::ensure()?) } else { None };
    for t in &m.targets {
        println!(
            "{:<16} {:<16} buggy={:<15} fixed={:<5} {}",
            t.name, t.source, t.buggy, t.fixed, t.description
        );
        if let Some(tc) = &tc {
            for (variant, flags) in [("buggy", vec![]), ("fixed", vec!["-DFIXED".to_string()])] {
                let out = cc::compile_cached(tc, &[m.source(t)], &flags)?;
                println!("    {variant}: {}", out.display());
            }
        }
    }
    Ok(EXIT_OK)
}
