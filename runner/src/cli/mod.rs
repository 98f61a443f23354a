//! Command-line interface. Exit codes (the README's table): 0 no bug, 1 bug
//! found (or an expectation failed), 2 usage or input error, 3 a replay that
//! did not reproduce its recorded run, 4 an internal error, 128 + N stopped
//! by signal N.

use anyhow::Result;
use clap::{Parser, Subcommand};

pub mod compare;
mod completions;
pub mod explore;
pub mod fuzz;
mod instrument;
pub mod plan;
pub mod run;
pub mod show;
mod targets;
pub mod test;
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

#[derive(Parser)]
#[command(
    name = "heddle",
    version = env!("HEDDLE_LONG_VERSION"),
    about = "Deterministic-simulation test runner for concurrent C/C++",
    disable_help_subcommand = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Compile pthread C/C++ to a module heddle can run (clang flags pass through; --legacy accepts old C).
    Cc {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        args: Vec<String>,
    },
    /// Run a target once and print its verdict.
    Run(run::RunArgs),
    /// Run many seeds in parallel; write a replay file for each distinct failure.
    Fuzz(fuzz::FuzzArgs),
    /// Merge the campaign directories of shards into one campaign.
    Merge(fuzz::MergeArgs),
    /// Run the targets of a project file (heddle.toml) as a test suite.
    Test(test::TestArgs),
    /// Reproduce a run from its replay file and check it.
    Replay(fuzz::ReplayArgs),
    /// Enumerate schedules systematically (bounded or exhaustive).
    Explore(explore::ExploreArgs),
    /// Compare scheduling strategies on a set of targets.
    Compare(compare::CompareArgs),
    /// Run a schedule plan (ordering and state constraints) against a target.
    Plan(plan::PlanArgs),
    /// Observe shared accesses, lock sets and conflicting pairs over random runs.
    Observe(plan::ObserveArgs),
    /// Replay a run and draw its interleaving.
    Show(show::ShowArgs),
    /// Find a schedule with the fewest preemptions that gives the same verdict.
    Minimize(show::MinimizeArgs),
    /// Rewrite a module so every inter-thread instruction is a yield point.
    Instrument(instrument::InstrumentArgs),
    /// List the yield-point sites of a module with their source lines.
    Sites(instrument::SitesArgs),
    /// List the bundled targets (and build them with --build).
    Targets(targets::TargetsArgs),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish).
    Completions(completions::CompletionsArgs),
    /// Write man pages (heddle.1 and one per command) into a directory.
    Man(completions::ManArgs),
    /// Install or check the C/C++ toolchain.
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
    let cli = match Cli::try_parse() {
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
            eprintln!("heddle: error: {}", first.trim_start_matches("error: "));
            for l in lines {
                eprintln!("{l}");
            }
            return EXIT_USAGE;
        }
    };
    match dispatch(cli.cmd) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("heddle: error: {}", one_line(&e));
            if e.downcast_ref::<crate::reproduce::NotReproduced>()
                .is_some()
            {
                EXIT_NOT_REPRODUCED
            } else {
                EXIT_USAGE
            }
        }
    }
}

/// An error chain as one line (multi-line tool output such as clang's
/// diagnostics is kept below it).
fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    parts.join(": ")
}

fn dispatch(cmd: Cmd) -> Result<i32> {
    match cmd {
        Cmd::Cc { args } => toolchain::cc(args),
        Cmd::Toolchain { cmd } => toolchain::run(cmd),
        Cmd::Targets(a) => targets::targets_cmd(a),
        Cmd::Completions(a) => completions::completions_cmd(a),
        Cmd::Man(a) => completions::man_cmd(a),
        Cmd::Run(a) => run::run_cmd(a),
        Cmd::Fuzz(a) => fuzz::fuzz_cmd(a),
        Cmd::Replay(a) => fuzz::replay_cmd(a),
        Cmd::Merge(a) => fuzz::merge_cmd(a),
        Cmd::Test(a) => test::test_cmd(a),
        Cmd::Explore(a) => explore::explore_cmd(a),
        Cmd::Show(a) => show::show_cmd(a),
        Cmd::Compare(a) => compare::compare_cmd(a),
        Cmd::Plan(a) => plan::plan_cmd(a),
        Cmd::Observe(a) => plan::observe_cmd(a),
        Cmd::Minimize(a) => show::minimize_cmd(a),
        Cmd::Instrument(a) => instrument::instrument_cmd(a),
        Cmd::Sites(a) => instrument::sites_cmd(a),
    }
}
