//! `heddle instrument` and `heddle sites`.

use super::EXIT_OK;
use crate::instrument::{self, Config, Granularity};
use crate::{paths, target};
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Options that choose how a module is instrumented.
#[derive(Args, Debug, Clone, Default)]
pub struct InstrumentOpts {
    /// Which instructions are yield points: `sync` or `all`.
    #[arg(long, default_value = "all")]
    pub granularity: Granularity,
    /// Treat functions matching this glob as user code (repeatable).
    #[arg(long = "include-func", value_name = "GLOB")]
    pub include_funcs: Vec<String>,
    /// Treat functions matching this glob as library code (repeatable).
    #[arg(long = "exclude-func", value_name = "GLOB")]
    pub exclude_funcs: Vec<String>,
    /// Treat functions from source files matching this glob as user code.
    #[arg(long = "include-file", value_name = "GLOB")]
    pub include_files: Vec<String>,
    /// Treat functions from source files matching this glob as library code.
    #[arg(long = "exclude-file", value_name = "GLOB")]
    pub exclude_files: Vec<String>,
    /// Source files under this path prefix are user code, even where heddle
    /// counts them as library code (Rust's std, cargo registry crates,
    /// wasi-libc, libc++). An absolute prefix matches from the start, a
    /// relative one at any path component (`vendor/mycrate`). Repeatable;
    /// the longest matching `--user-code`/`--library-code` prefix wins.
    #[arg(long = "user-code", value_name = "PATH_PREFIX")]
    pub user_code: Vec<String>,
    /// Source files under this path prefix are library code: their
    /// instructions are yield points only where they synchronise, and
    /// reports attribute them to the user code that called them.
    #[arg(long = "library-code", value_name = "PATH_PREFIX")]
    pub library_code: Vec<String>,
    /// The memory checker: `on` or `off` (default: on at granularity `all`).
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    pub memcheck: Option<bool>,
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("expected `on` or `off`, not `{s}`")),
    }
}

impl InstrumentOpts {
    /// The instrumentation configuration these options ask for.
    pub fn config(&self) -> Config {
        Config {
            granularity: self.granularity,
            include_funcs: self.include_funcs.clone(),
            exclude_funcs: self.exclude_funcs.clone(),
            include_files: self.include_files.clone(),
            exclude_files: self.exclude_files.clone(),
            user_code: self.user_code.clone(),
            library_code: self.library_code.clone(),
            memcheck: self.memcheck,
            budget_in_global: false,
        }
    }
}

#[derive(Args, Debug)]
pub struct InstrumentArgs {
    /// Module (or C/C++ source) to instrument.
    pub input: PathBuf,
    /// Where to write the instrumented module.
    #[arg(short = 'o', long = "out", alias = "output", value_name = "OUT.wasm")]
    pub output: PathBuf,
    /// Where to write the site table (JSON).
    #[arg(long)]
    pub sites: Option<PathBuf>,
    #[command(flatten)]
    pub opts: InstrumentOpts,
}

pub fn instrument_cmd(a: InstrumentArgs) -> Result<i32> {
    let t = target::load(&a.input, &[])?;
    let inst = instrument::instrument(&t.bytes, &a.opts.config())?;
    paths::write_atomic(&a.output, &inst.module)?;
    if let Some(p) = &a.sites {
        paths::write_atomic(p, &serde_json::to_vec_pretty(&inst.sites)?)?;
    }
    eprintln!(
        "heddle: wrote {} ({} sites)",
        a.output.display(),
        inst.sites.sites.len()
    );
    Ok(EXIT_OK)
}

#[derive(Args, Debug)]
pub struct SitesArgs {
    /// Module (or C/C++ source).
    pub input: PathBuf,
    /// Also list sites in library code.
    #[arg(long)]
    pub all: bool,
    /// Same as `--format json`.
    #[arg(long, hide = true)]
    pub json: bool,
    /// `json`: print the sites as JSON.
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::report::json::Format,
    #[command(flatten)]
    pub opts: InstrumentOpts,
}

pub fn sites_cmd(a: SitesArgs) -> Result<i32> {
    let t = target::load(&a.input, &[])?;
    let inst = instrument::instrument(&t.bytes, &a.opts.config())?;
    let table = &inst.sites;
    if a.json || a.format == crate::report::json::Format::Json {
        println!("{}", serde_json::to_string_pretty(table)?);
        return Ok(EXIT_OK);
    }
    println!(
        "{:>6}  {:<9} {:>4}  {:<28} function",
        "site", "kind", "size", "location"
    );
    for s in &table.sites {
        if !a.all && !s.user {
            continue;
        }
        let kind = if s.atomic
            && matches!(
                s.kind,
                instrument::SiteKind::Read | instrument::SiteKind::Write
            ) {
            format!("atomic-{}", s.kind.label())
        } else {
            s.kind.label().to_string()
        };
        let loc = s
            .loc
            .as_ref()
            .map(|l| l.to_string())
            .unwrap_or_else(|| "-".into());
        let what = match &s.callee {
            Some(c) => format!("{} -> {c}", s.func_name),
            None => s.func_name.clone(),
        };
        println!(
            "{:>6}  {:<9} {:>4}  {:<28} {}",
            s.id, kind, s.size, loc, what
        );
    }
    let shown = if a.all { "all" } else { "user-code" };
    let counts: Vec<String> = table
        .counts_by_kind()
        .iter()
        .map(|(k, n)| format!("{} {n}", k.label()))
        .collect();
    println!(
        "{} sites ({} in user code; {shown} shown); by kind: {}",
        table.sites.len(),
        table.sites.iter().filter(|s| s.user).count(),
        counts.join(", ")
    );
    Ok(EXIT_OK)
}
