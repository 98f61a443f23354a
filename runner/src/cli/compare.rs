//! `heddle compare`: strategies side by side on a set of targets
//! ([`crate::compare`] runs the trials). The table is printed as Markdown
//! and written to `compare.md` and `compare.csv`.
//!
//! Exit code 0 when every strategy saw every expected bug at least once, 1
//! when some strategy missed one.

use super::{EXIT_BUG, EXIT_OK};
use crate::compare::Compare;
use crate::paths;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `heddle compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Strategies to compare, comma-separated (e.g. random,pct:3,pos,surw).
    #[arg(
        long = "strategy",
        alias = "strategies",
        value_name = "S,S…",
        required = true
    )]
    pub strategies: String,
    /// The targets: a manifest in the format of `targets/targets.toml`.
    #[arg(
        long = "manifest",
        alias = "targets",
        value_name = "FILE",
        default_value = "targets/targets.toml"
    )]
    pub targets: PathBuf,
    /// Only these targets (comma-separated names); by default every target
    /// whose buggy build is expected to fail.
    #[arg(long)]
    pub only: Option<String>,
    /// Runs per trial.
    #[arg(long, default_value_t = 100)]
    pub runs: u64,
    /// Trials per target and strategy, each on its own seed range.
    #[arg(long, default_value_t = 5)]
    pub trials: u64,
    /// First seed of the first trial.
    #[arg(
        long = "seed",
        alias = "seed-start",
        value_name = "N",
        default_value_t = 0
    )]
    pub seed_start: u64,
    /// Worker threads (default: all cores).
    #[arg(short, long)]
    pub jobs: Option<usize>,
    /// Directory for compare.md and compare.csv.
    #[arg(long, default_value = "heddle-out")]
    pub out: PathBuf,
}

/// `heddle compare`.
pub fn compare_cmd(a: CompareArgs) -> Result<i32> {
    let started = std::time::Instant::now();
    let report = Compare {
        strategies: a.strategies.clone(),
        manifest: a.targets.clone(),
        only: a.only.clone(),
        runs: a.runs,
        trials: a.trials,
        seed_start: a.seed_start,
        jobs: super::jobs(a.jobs),
    }
    .run()?;
    let md = report.markdown();
    print!("{md}");
    let md_path = a.out.join("compare.md");
    let csv_path = a.out.join("compare.csv");
    paths::write_atomic(&md_path, md.as_bytes())?;
    paths::write_atomic(&csv_path, report.csv().as_bytes())?;
    let missed = report.missed();
    println!(
        "\n{} runs in {:.1}s; wrote {} and {}",
        report.runs(),
        started.elapsed().as_secs_f64(),
        md_path.display(),
        csv_path.display()
    );
    if missed.is_empty() {
        Ok(EXIT_OK)
    } else {
        println!("expected bug never found: {}", missed.join(", "));
        Ok(EXIT_BUG)
    }
}
