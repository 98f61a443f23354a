//! `heddle compare`.

use anyhow::{bail, Result};
use clap::Args;

#[derive(Args, Debug)]
pub struct CompareArgs {}

pub fn compare_cmd(_a: CompareArgs) -> Result<i32> {
    bail!("compare is not available yet")
}
