//! `heddle replay`: reproduce a recorded run and check it; the flags that
//! say what a replay runs on (`replay`, `show`, `minimize`).

use super::run::print_output;
use super::{EXIT_BUG, EXIT_OK};
use crate::reproduce;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// What a replay runs on, when not what the file records (`replay`, `show`,
/// `minimize`).
#[derive(Args, Debug, Clone)]
pub struct ReplayInputs {
    /// The module or source to replay on (default: the module shipped beside
    /// the file, else the cache, else a rebuild of the recorded source).
    #[arg(long)]
    pub target: Option<PathBuf>,
    /// Grant a host directory, HOST or HOST:GUEST, instead of the recorded one with
    /// the same guest path (repeatable).
    #[arg(long = "dir", value_name = "HOST[:GUEST]")]
    pub dirs: Vec<String>,
}

impl ReplayInputs {
    /// The replay options these flags ask for.
    pub fn options(&self) -> reproduce::Options {
        reproduce::Options {
            target: self.target.clone(),
            dirs: self.dirs.clone(),
        }
    }
}

/// `heddle replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The replay file.
    pub file: PathBuf,
    #[command(flatten)]
    pub inputs: ReplayInputs,
    /// Print the program's output.
    #[arg(long)]
    pub show_output: bool,
    /// `json`: print one JSON document (docs/report-schema.json) on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::report::json::Format,
}

/// Prints the notes of a loaded replay (a local rebuild that differs, …)
/// on stderr.
pub fn print_notes(rp: &reproduce::Replay) {
    for n in &rp.notes {
        eprintln!("{n}");
    }
}

/// Runs `heddle replay`.
pub fn replay_cmd(a: ReplayArgs) -> Result<i32> {
    let json = a.format == crate::report::json::Format::Json;
    let mut text = super::text_out(json);
    let out = &mut *text;
    let report = reproduce::replay(&a.file, &a.inputs.options())?;
    let (rp, r) = (&report.replay, &report.result);
    print_notes(rp);
    if r.divergence.is_none() {
        writeln!(out, "verdict: {}", r.verdict.summary())?;
        for race in &r.races {
            writeln!(out, "{}", race.summary())?;
        }
        if a.show_output || !r.verdict.is_pass() {
            print_output(out, r)?;
        }
    }
    report.reproduced.clone()?;
    writeln!(
        out,
        "replay reproduced the recorded run ({} decisions, same verdict and output; module: {})",
        r.decisions.len(),
        rp.origin
    )?;
    if json {
        let seed = rp.file.run.seed;
        let mut doc =
            crate::report::json::Document::of_run("replay", &rp.file.module.source, seed, r);
        // The strategy as recorded (the run itself replays with `replay`).
        doc.strategy = rp.file.run.strategy.clone();
        doc.replay = Some(a.file.display().to_string());
        crate::report::json::emit(&doc);
    }
    Ok(if r.verdict.is_failure() {
        EXIT_BUG
    } else {
        EXIT_OK
    })
}
