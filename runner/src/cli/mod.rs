//! Command-line interface. Exit codes (the README's table): 0 no bug, 1 bug
//! found (or an expectation failed), 2 usage or input error, 3 a replay that
//! did not reproduce its recorded run, 4 an internal error, 128 + N stopped
//! by signal N.

use anyhow::Result;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use std::io::IsTerminal;
use std::sync::OnceLock;

mod cargo;
mod compare;
mod completions;
mod explore;
mod fuzz;
mod instrument;
mod plan;
mod replay;
mod run;
mod show;
mod targets;
mod test;
mod toolchain;

pub use instrument::InstrumentOpts;

/// The worker count of a parallel command: `--jobs`, else every core.
pub fn jobs(requested: Option<usize>) -> usize {
    requested
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
        .max(1)
}

/// Exit code: no bug found.
pub const EXIT_OK: i32 = 0;
/// Exit code: a bug was found, or an expectation failed.
pub const EXIT_BUG: i32 = 1;
/// Exit code: bad usage or bad input.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: a replay ran but did not reproduce the recorded run (it
/// diverged, or gave another verdict or output).
pub const EXIT_NOT_REPRODUCED: i32 = 3;
/// Exit code: heddle itself failed (an engine or host error, a panic) and
/// no bug was found; never reported as a bug in the target.
pub const EXIT_INTERNAL: i32 = 4;

/// Where a command's text goes: stdout, or stderr when stdout carries a
/// JSON document (`--format json`), so that stdout holds the document alone.
pub(crate) fn text_out(json: bool) -> Box<dyn std::io::Write> {
    if json {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    }
}

/// The exit code of a campaign: a bug found wins; then a stop by a signal
/// (128 + the signal: the campaign did not finish, so "no bug" would be
/// wrong); then runs that failed inside heddle; else no bug.
pub fn campaign_exit(failing: u64, error_runs: u64, stopped_by: Option<i32>) -> i32 {
    if failing > 0 {
        EXIT_BUG
    } else if let Some(sig) = stopped_by {
        crate::interrupt::exit_code(sig)
    } else if error_runs > 0 {
        EXIT_INTERNAL
    } else {
        EXIT_OK
    }
}

/// The exit codes, as `heddle --help` lists them (the README has the same
/// table).
pub const EXIT_CODES: &[(&str, &str)] = &[
    ("0", "no bug found"),
    ("1", "a bug found, or an expectation failed"),
    ("2", "usage or input error"),
    ("3", "a replay did not reproduce its recorded run"),
    ("4", "internal error (heddle itself failed; no bug found)"),
    (
        "130, 143",
        "stopped by SIGINT or SIGTERM (128 + the signal); finished work is saved",
    ),
];

/// The command-line definition, with the exit codes in its help.
pub fn command() -> clap::Command {
    let width = EXIT_CODES.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    let mut help = String::from("Exit codes:\n");
    for (code, what) in EXIT_CODES {
        help.push_str(&format!("  {code:<width$}  {what}\n"));
    }
    help.push_str("\nRun `heddle help COMMAND` for a command's options and examples.");
    Cli::command().after_help(help)
}

#[derive(Parser)]
#[command(
    name = "heddle",
    version = env!("HEDDLE_LONG_VERSION"),
    about = "Deterministic-simulation test runner for concurrent C/C++"
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    cmd: Cmd,
}

/// When to colour output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ColorWhen {
    /// On a terminal, unless `NO_COLOR` is set (`CLICOLOR_FORCE` forces it).
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// The flags every command takes.
#[derive(Args, Debug, Clone, Default)]
pub struct Global {
    /// Colour: auto (a terminal without NO_COLOR; CLICOLOR_FORCE=1 forces it), always, never.
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "WHEN",
        default_value = "auto"
    )]
    pub color: ColorWhen,
    /// Less output: no progress lines.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// More output: statistics and timing where a command has them.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

static GLOBAL: OnceLock<Global> = OnceLock::new();

/// The global flags of this invocation (defaults when heddle is used as a
/// library).
pub fn global() -> Global {
    GLOBAL.get().cloned().unwrap_or_default()
}

impl Global {
    /// Whether output to stdout (`stderr == false`) or stderr is coloured.
    pub fn color(&self, stderr: bool) -> bool {
        match (self.color, color_env()) {
            (ColorWhen::Always, _) => true,
            (ColorWhen::Never, _) => false,
            (ColorWhen::Auto, Some(on)) => on,
            (ColorWhen::Auto, None) if stderr => std::io::stderr().is_terminal(),
            (ColorWhen::Auto, None) => std::io::stdout().is_terminal(),
        }
    }
}

/// `--color` as given on the command line, before parsing (so that clap's
/// own help and errors follow it too).
fn color_in_argv(args: &[std::ffi::OsString]) -> clap::ColorChoice {
    let mut value = None;
    let mut it = args.iter().map(|a| a.to_string_lossy());
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if let Some(v) = a.strip_prefix("--color=") {
            value = Some(v.to_string());
        } else if a == "--color" {
            value = it.next().map(|v| v.to_string());
        }
    }
    match (value.as_deref(), color_env()) {
        (Some("always"), _) => clap::ColorChoice::Always,
        (Some("never"), _) => clap::ColorChoice::Never,
        (_, Some(true)) => clap::ColorChoice::Always,
        (_, Some(false)) => clap::ColorChoice::Never,
        _ => clap::ColorChoice::Auto,
    }
}

/// What the environment says about colour under `--color auto`:
/// `NO_COLOR` (any non-empty value) turns it off, else `CLICOLOR_FORCE`
/// (non-empty and not `0`) turns it on; None leaves it to the terminal.
fn color_env() -> Option<bool> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if var("NO_COLOR").is_some() {
        Some(false)
    } else if var("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
        Some(true)
    } else {
        None
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Compile pthread C/C++ to a module heddle can run (clang flags pass through; --legacy accepts old C).
    #[command(
        after_help = "Examples:\n  heddle cc -O1 -g prog.c -o prog.wasm\n  heddle cc --legacy old.c -o old.wasm"
    )]
    Cc {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        args: Vec<String>,
    },
    /// Compile and link C++ like clang++ (every flag as for `heddle cc`).
    #[command(
        name = "c++",
        after_help = "Examples:\n  heddle c++ -std=c++17 -c worker.cpp -o worker.o\n  heddle c++ main.o worker.o -o prog"
    )]
    Cxx {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        args: Vec<String>,
    },
    /// Run a target once; print its verdict and the program's output.
    #[command(
        after_help = "Examples:\n  heddle run targets/race_bank.c --seed 7 -- 2 2\n  heddle run targets/race_bank.c --strategy pct:3 --trace"
    )]
    Run(run::RunArgs),
    /// Run many seeds in parallel; write a replay file for each distinct failure.
    #[command(
        after_help = "Examples:\n  heddle fuzz targets/race_bank.c --runs 2000 -j 2\n  heddle fuzz prog.c --time-budget 10m --strategy random,pct:3,pos --keep-going\n  heddle fuzz prog.c --shard 2/8 --out shard2 --resume"
    )]
    Fuzz(fuzz::FuzzArgs),
    /// Merge the campaign directories of shards into one campaign.
    #[command(after_help = "Examples:\n  heddle merge shard1 shard2 --out all")]
    Merge(fuzz::MergeArgs),
    /// Run the targets of a project file (heddle.toml) as a test suite.
    #[command(
        after_help = "Examples:\n  heddle test\n  heddle test targets/targets.toml --only race_bank --junit report.xml"
    )]
    Test(test::TestArgs),
    /// Build a Rust crate for wasm32-wasip1-threads with cargo; run each of its tests (or its binary) as a campaign.
    #[command(
        after_help = "Examples:\n  heddle cargo test\n  heddle cargo test --features fixed -- --runs 200 --junit report.xml\n  heddle cargo run --bin server -- --time-budget 5m"
    )]
    Cargo {
        #[command(subcommand)]
        cmd: cargo::CargoCmd,
    },
    /// Reproduce a run from its replay file and check it.
    #[command(
        after_help = "Examples:\n  heddle replay heddle-out/race_bank-assertion-seed3.toml\n  heddle replay bug.toml --target build/prog.wasm"
    )]
    Replay(replay::ReplayArgs),
    /// Enumerate schedules systematically (bounded or exhaustive).
    #[command(
        after_help = "Examples:\n  heddle explore targets/counter_spy.c --observe x -- 2 3\n  heddle explore prog.c --bound preemptions=2 --runs 100000"
    )]
    Explore(explore::ExploreArgs),
    /// Compare scheduling strategies on a set of targets.
    #[command(
        after_help = "Examples:\n  heddle compare --strategy random,pct:3,pos --runs 100 --trials 5"
    )]
    Compare(compare::CompareArgs),
    /// Run a schedule plan (ordering and state constraints) against a target.
    #[command(
        after_help = "Examples:\n  heddle plan plans/race_bank.toml targets/race_bank.c --expect triggered"
    )]
    Plan(plan::PlanArgs),
    /// Observe shared accesses, lock sets and conflicting pairs over random runs.
    #[command(after_help = "Examples:\n  heddle observe targets/race_bank.c --runs 50 -- 2 2")]
    Observe(plan::ObserveArgs),
    /// Generate ordering plans from observed conflicting accesses and try them, cheapest first.
    #[command(after_help = "Examples:\n  heddle hunt targets/race_bank.c -- 2 2")]
    Hunt(plan::HuntArgs),
    /// Replay a run and draw its interleaving.
    #[command(
        after_help = "Examples:\n  heddle show heddle-out/race_bank-assertion-seed3.toml\n  heddle show bug.toml --html bug.html"
    )]
    Show(show::ShowArgs),
    /// Find a schedule with the fewest preemptions that gives the same verdict.
    #[command(after_help = "Examples:\n  heddle minimize bug.toml -o bug.min.toml")]
    Minimize(show::MinimizeArgs),
    /// Rewrite a module so every inter-thread instruction is a yield point.
    #[command(
        after_help = "Examples:\n  heddle instrument prog.wasm -o prog.inst.wasm --sites sites.json"
    )]
    Instrument(instrument::InstrumentArgs),
    /// List the yield-point sites of a module with their source lines.
    #[command(
        after_help = "Examples:\n  heddle sites targets/race_bank.c\n  heddle sites prog.wasm --all --format json"
    )]
    Sites(instrument::SitesArgs),
    /// List the bundled targets (and build them with --build).
    #[command(after_help = "Examples:\n  heddle targets\n  heddle targets --build")]
    Targets(targets::TargetsArgs),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish).
    #[command(
        after_help = "Examples:\n  heddle completions bash > ~/.local/share/bash-completion/completions/heddle\n  heddle completions zsh > ~/.zfunc/_heddle"
    )]
    Completions(completions::CompletionsArgs),
    /// Write man pages (heddle.1 and one per command) into a directory.
    #[command(after_help = "Examples:\n  heddle man --out /usr/local/share/man/man1")]
    Man(completions::ManArgs),
    /// Install or check the C/C++ toolchain.
    #[command(after_help = "Examples:\n  heddle toolchain install\n  heddle toolchain doctor")]
    Toolchain {
        #[command(subcommand)]
        cmd: toolchain::ToolchainCmd,
    },
}

/// Runs the command line and returns the process exit code. A panic in
/// heddle is an internal error: one line on stderr (where, and what), exit
/// [`EXIT_INTERNAL`]; a panic inside one run of a campaign ends that run
/// only.
pub fn main() -> i32 {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("unknown panic");
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("heddle: internal error: {msg}{at}");
    }));
    match std::panic::catch_unwind(parse_and_dispatch) {
        Ok(code) => code,
        Err(_) => EXIT_INTERNAL,
    }
}

fn parse_and_dispatch() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The compiler driver takes clang's own flags (`-v`, `-o`, `-q`, …), so
    // its arguments bypass heddle's parser; only its help goes through it.
    if let Some(cxx) = driver_call(&args) {
        let rest: Vec<String> = args[2..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return match toolchain::cc(&rest, cxx) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("{}: {}", error_prefix(), crate::text::one_line(&e));
                exit_code_of(crate::error::kind_of(&e))
            }
        };
    }
    let parsed = command()
        .color(color_in_argv(&args))
        .try_get_matches_from(&args)
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            if !e.use_stderr() {
                // --help, --version
                let _ = e.print();
                return EXIT_OK;
            }
            // The error on one line, like every other heddle error, then
            // clap's tip (a similar command or flag) and usage below it.
            let text = e.render().to_string();
            let mut lines = text.lines();
            let first = lines.next().unwrap_or("bad usage");
            eprintln!(
                "{}: {}",
                error_prefix(),
                first.trim_start_matches("error: ")
            );
            for l in lines {
                eprintln!("{l}");
            }
            return EXIT_USAGE;
        }
    };
    let _ = GLOBAL.set(cli.global.clone());
    match dispatch(cli.cmd) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}: {}", error_prefix(), crate::text::one_line(&e));
            exit_code_of(crate::error::kind_of(&e))
        }
    }
}

/// Parses a command line (`args[0]` is the program name) as `heddle` does,
/// without running it: `Err` holds the usage error heddle would print.
/// The compiler drivers (`cc`, `c++`) take clang's flags and always parse.
/// The documentation check runs every example command through it.
pub fn parse_only<S: AsRef<str>>(args: &[S]) -> std::result::Result<(), String> {
    let args: Vec<std::ffi::OsString> = args.iter().map(|a| a.as_ref().into()).collect();
    if driver_call(&args).is_some() {
        return Ok(());
    }
    match command()
        .try_get_matches_from(&args)
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(_) => Ok(()),
        Err(e) if !e.use_stderr() => Ok(()), // --help, --version
        Err(e) => Err(e.render().to_string()),
    }
}

/// The exit code of a command that failed with an error of `kind`.
pub fn exit_code_of(kind: crate::error::ErrorKind) -> i32 {
    use crate::error::ErrorKind;
    match kind {
        ErrorKind::Input => EXIT_USAGE,
        ErrorKind::NotReproduced => EXIT_NOT_REPRODUCED,
        ErrorKind::Internal => EXIT_INTERNAL,
    }
}

/// `Some(is_cxx)` when argv calls the compiler driver (`heddle cc ARGS` or
/// `heddle c++ ARGS`, but not its `--help`).
fn driver_call(args: &[std::ffi::OsString]) -> Option<bool> {
    let cxx = match args.get(1)?.to_str()? {
        "cc" => false,
        "c++" => true,
        _ => return None,
    };
    let help = matches!(args.get(2).and_then(|a| a.to_str()), Some("--help" | "-h"));
    (!help).then_some(cxx)
}

/// `heddle: error`, in bold red when stderr is coloured.
fn error_prefix() -> &'static str {
    if global().color(true) {
        "\x1b[1;31mheddle: error\x1b[0m"
    } else {
        "heddle: error"
    }
}

fn dispatch(cmd: Cmd) -> Result<i32> {
    match cmd {
        Cmd::Cc { args } => toolchain::cc(&args, false),
        Cmd::Cxx { args } => toolchain::cc(&args, true),
        Cmd::Toolchain { cmd } => toolchain::run(cmd),
        Cmd::Targets(a) => targets::targets_cmd(a),
        Cmd::Completions(a) => completions::completions_cmd(a),
        Cmd::Man(a) => completions::man_cmd(a),
        Cmd::Run(a) => run::run_cmd(a),
        Cmd::Fuzz(a) => fuzz::fuzz_cmd(a),
        Cmd::Replay(a) => replay::replay_cmd(a),
        Cmd::Merge(a) => fuzz::merge_cmd(a),
        Cmd::Test(a) => test::test_cmd(a),
        Cmd::Cargo { cmd } => cargo::run(cmd),
        Cmd::Explore(a) => explore::explore_cmd(a),
        Cmd::Show(a) => show::show_cmd(a),
        Cmd::Compare(a) => compare::compare_cmd(a),
        Cmd::Plan(a) => plan::plan_cmd(a),
        Cmd::Observe(a) => plan::observe_cmd(a),
        Cmd::Hunt(a) => plan::hunt_cmd(a),
        Cmd::Minimize(a) => show::minimize_cmd(a),
        Cmd::Instrument(a) => instrument::instrument_cmd(a),
        Cmd::Sites(a) => instrument::sites_cmd(a),
    }
}
