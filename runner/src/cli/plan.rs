//! `heddle plan` and `heddle observe`.

use anyhow::{bail, Result};
use clap::Args;

#[derive(Args, Debug)]
pub struct PlanArgs {}

pub fn plan_cmd(_a: PlanArgs) -> Result<i32> {
    bail!("plan is not available yet")
}

#[derive(Args, Debug)]
pub struct ObserveArgs {}

pub fn observe_cmd(_a: ObserveArgs) -> Result<i32> {
    bail!("observe is not available yet")
}
