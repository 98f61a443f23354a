//! `heddle show` and `heddle minimize`.

use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The replay file.
    pub file: PathBuf,
}

pub fn show_cmd(_a: ShowArgs) -> Result<i32> {
    bail!("show is not available yet")
}

#[derive(Args, Debug)]
pub struct MinimizeArgs {
    /// The replay file.
    pub file: PathBuf,
}

pub fn minimize_cmd(_a: MinimizeArgs) -> Result<i32> {
    bail!("minimize is not available yet")
}
