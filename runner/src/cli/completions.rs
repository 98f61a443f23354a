//! `heddle completions` and `heddle man`: shell completion scripts and man
//! pages, both derived from the one command-line definition.

use super::EXIT_OK;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

#[derive(Args)]
pub struct ManArgs {
    /// Directory to write heddle.1 and one heddle-COMMAND.1 per command into.
    #[arg(long, default_value = "man")]
    out: PathBuf,
}

/// Prints the completion script for a shell on stdout.
pub fn completions_cmd(a: CompletionsArgs) -> Result<i32> {
    let mut cmd = super::command();
    clap_complete::generate(a.shell, &mut cmd, "heddle", &mut std::io::stdout());
    Ok(EXIT_OK)
}

/// Writes the man pages into a directory.
pub fn man_cmd(a: ManArgs) -> Result<i32> {
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    clap_mangen::generate_to(super::command(), &a.out)
        .with_context(|| format!("cannot write man pages into {}", a.out.display()))?;
    println!("man pages written to {}", a.out.display());
    Ok(EXIT_OK)
}
