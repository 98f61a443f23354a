//! `heddle explore`.

use anyhow::{bail, Result};
use clap::Args;

#[derive(Args, Debug)]
pub struct ExploreArgs {
    #[command(flatten)]
    pub target: super::run::TargetOpts,
}

pub fn explore_cmd(_a: ExploreArgs) -> Result<i32> {
    bail!("explore is not available yet")
}
