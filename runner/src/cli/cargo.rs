//! `heddle cargo test` and `heddle cargo run`: the command line of
//! [`crate::cargo`] (which builds, lists and runs).

use super::fuzz::{CampaignOpts, FuzzArgs, JournalKeep};
use super::run::RunOpts;
use super::InstrumentOpts;
use crate::cargo::{self, Status, TestResult};
use anyhow::{bail, Result};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;

/// `heddle cargo test` and `heddle cargo run`.
#[derive(Subcommand, Debug)]
pub enum CargoCmd {
    /// Build the crate's tests for wasm32-wasip1-threads and run each test as its own campaign.
    #[command(
        after_help = "heddle's options go after `--` (`heddle cargo test -- --help` lists them).\n\nExamples:\n  heddle cargo test\n  heddle cargo test --features fixed lost_update -- --runs 200 --junit report.xml\n  heddle cargo test -p mycrate -- --time-budget 2m --strategy pos"
    )]
    Test(CargoArgs),
    /// Build the crate's binary for wasm32-wasip1-threads and fuzz it like `heddle fuzz`.
    #[command(
        after_help = "heddle's options go after `--` (those of `heddle fuzz`), the program's after a second `--`.\n\nExamples:\n  heddle cargo run --bin server -- --runs 500\n  heddle cargo run --release -- --time-budget 5m -- --threads 4"
    )]
    Run(CargoArgs),
}

/// cargo's arguments, then heddle's after `--`.
#[derive(Args, Debug)]
pub struct CargoArgs {
    /// cargo's arguments: `-p PKG`, `--features F`, `--release`, `--manifest-path P`, …; for
    /// `test` also a test-name filter, as `cargo test NAME`.
    #[arg(allow_hyphen_values = true, value_name = "CARGO_ARGS")]
    pub cargo: Vec<String>,
    /// heddle's options, after `--`.
    #[arg(last = true, value_name = "HEDDLE_ARGS")]
    pub heddle: Vec<String>,
}

/// Seeds per test when neither `--runs` nor `--time-budget` is given (as
/// `heddle fuzz`).
pub const DEFAULT_RUNS: u64 = 1000;
/// The time cap of each test's campaign unless `--time-budget` is given.
pub const DEFAULT_TIME_BUDGET: &str = "60s";

/// heddle's options of `heddle cargo test` (after `--`).
#[derive(Parser, Debug)]
#[command(
    name = "heddle cargo test --",
    no_binary_name = true,
    disable_version_flag = true
)]
struct TestOpts {
    #[command(flatten)]
    instrument: InstrumentOpts,
    #[command(flatten)]
    run: RunOpts,
    /// Seeds per test (default 1000; unbounded when only --time-budget is given).
    #[arg(long)]
    runs: Option<u64>,
    /// Stop each test's campaign after this long: 90s, 10m (default 60s).
    #[arg(long, value_name = "DURATION")]
    time_budget: Option<String>,
    /// Worker threads (default: all cores).
    #[arg(short, long)]
    jobs: Option<usize>,
    /// First seed of each test.
    #[arg(long = "seed", value_name = "N", default_value_t = 0)]
    seed_start: u64,
    /// Collect every distinct failure of a test (else stop at its first).
    #[arg(long)]
    keep_going: bool,
    /// Directory of the campaigns: one per test, OUT/<kind>-<target>/<test>.
    #[arg(long, default_value = "heddle-out/cargo")]
    out: PathBuf,
    /// Write a JUnit XML report: one test case per test.
    #[arg(long, value_name = "OUT.xml")]
    junit: Option<PathBuf>,
    /// No progress lines (as the global -q).
    #[arg(short, long)]
    quiet: bool,
}

/// Parses heddle's options of a `cargo` subcommand; `Ok(None)` when they
/// asked for help (printed).
fn parse_opts<T: FromArgMatches>(cmd: clap::Command, args: &[String]) -> Result<Option<T>> {
    match cmd.try_get_matches_from(args) {
        Ok(m) => Ok(Some(T::from_arg_matches(&m)?)),
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            Ok(None)
        }
        Err(e) => {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("bad usage");
            bail!("{}", first.trim_start_matches("error: "))
        }
    }
}

impl CargoArgs {
    /// cargo's and heddle's arguments, split at the first `--`. clap keeps
    /// a `--` that follows a cargo argument among cargo's (they take
    /// hyphen values), and takes one that comes first as its own.
    fn split(mut self) -> CargoArgs {
        if let Some(i) = self.cargo.iter().position(|a| a == "--") {
            let mut heddle: Vec<String> = self.cargo.split_off(i).into_iter().skip(1).collect();
            heddle.append(&mut self.heddle);
            self.heddle = heddle;
        }
        self
    }
}

/// Runs `heddle cargo …`.
pub fn run(cmd: CargoCmd) -> Result<i32> {
    match cmd {
        CargoCmd::Test(a) => test_cmd(a.split()),
        CargoCmd::Run(a) => run_cmd(a.split()),
    }
}

fn test_cmd(a: CargoArgs) -> Result<i32> {
    let Some(o) = parse_opts::<TestOpts>(TestOpts::command(), &a.heddle)? else {
        return Ok(super::EXIT_OK);
    };
    let (cargo_args, filters) = cargo::split_filters(&a.cargo)?;
    let time_budget = Some(
        o.time_budget
            .clone()
            .unwrap_or_else(|| DEFAULT_TIME_BUDGET.to_string()),
    );
    let runs = match (o.runs, &o.time_budget) {
        (Some(r), _) => Some(r),
        (None, Some(_)) => None,
        (None, None) => Some(DEFAULT_RUNS),
    };
    let campaign = CampaignOpts {
        runs,
        time_budget,
        jobs: o.jobs,
        seed_start: o.seed_start,
        keep_going: o.keep_going,
        shard: None,
        resume: false,
        stats: false,
        out: o.out.clone(),
        journal: JournalKeep::None,
    };
    let plan = campaign.plan()?;
    let spec = o.run.strategy.clone().unwrap_or_else(|| "default".into());
    let members = crate::campaign::Portfolio::parse(&spec)?;
    let base = RunOpts {
        strategy: Some(members.members[0].clone()),
        ..o.run.clone()
    }
    .config(&[], 0)?;
    let mut exec = campaign.options()?;
    if o.quiet {
        exec.progress = crate::campaign::exec::Progress::Off;
    }
    let settings = cargo::Settings {
        base,
        strategy: spec,
        plan,
        keep_going: o.keep_going,
        exec,
    };
    crate::interrupt::install();
    let verbose = super::global().verbose > 0;
    let report = cargo::test(
        &cargo_args,
        &filters,
        None,
        verbose,
        &o.instrument.config(),
        &settings,
        &mut print_test,
    )?;
    let (failed, errors) = (report.count(Status::Failed), report.count(Status::Error));
    let mut extra = String::new();
    let unsupported = report.count(Status::Unsupported);
    if unsupported > 0 {
        extra.push_str(&format!(", {unsupported} unsupported"));
    }
    if errors > 0 {
        extra.push_str(&format!(", {errors} error"));
    }
    if report.filtered_out > 0 {
        extra.push_str(&format!(", {} filtered out", report.filtered_out));
    }
    println!(
        "heddle cargo test: {} tests: {} passed, {failed} failed, {} skipped{extra} ({:.1}s)",
        report.tests.len(),
        report.count(Status::Passed),
        report.count(Status::Skipped),
        report.seconds
    );
    if let Some(p) = &o.junit {
        let cases: Vec<crate::report::junit::Case> = report
            .tests
            .iter()
            .map(|t| crate::report::junit::Case {
                name: t.name.clone(),
                classname: format!("heddle.cargo.{}", t.harness),
                time: t.seconds(),
                outcome: t.junit.clone(),
            })
            .collect();
        crate::report::junit::write_all(p, &cases)?;
    }
    Ok(super::campaign_exit(
        failed as u64,
        errors as u64,
        report.interrupted,
    ))
}

/// One line per test (`ok`, `FAIL`, `ERR`, `skip`, `n/a` for unsupported), then for a failure
/// its replay file and report.
fn print_test(t: &TestResult) {
    let label = match t.status {
        Status::Passed => "ok",
        Status::Failed => "FAIL",
        Status::Error => "ERR",
        Status::Skipped => "skip",
        Status::Unsupported => "n/a",
    };
    let detail = match (&t.status, &t.outcome) {
        (Status::Skipped, _) => t.skip_reason.clone().unwrap_or_default(),
        (Status::Unsupported, None) => t.skip_reason.clone().unwrap_or_default(),
        (Status::Unsupported, Some(o)) => format!(
            "{} runs in {:.2}s: {}",
            o.summary.stats.runs,
            o.session_secs,
            t.skip_reason.clone().unwrap_or_default()
        ),
        (_, Some(o)) => {
            let s = &o.summary.stats;
            let mut d = format!("{} runs in {:.2}s", s.runs, o.session_secs);
            if o.timed_out {
                d.push_str(" (time budget reached)");
            }
            if let Some(f) = t.failures.first() {
                d.push_str(&format!(": seed {}: {}", f.seed, f.verdict.summary));
            } else if let Some(e) = o.summary.error.first() {
                d.push_str(&format!(
                    ": {} run(s) failed inside heddle: {}",
                    s.error_runs, e.message
                ));
            }
            d
        }
        _ => String::new(),
    };
    println!("{label:<4} {} {}  {detail}", t.harness, t.name);
    for f in &t.failures {
        if let Some(r) = &f.replay {
            println!("     replay: heddle replay {r}");
        }
        if let Some(r) = &f.report {
            println!("     report: {r}");
        }
    }
}

fn run_cmd(a: CargoArgs) -> Result<i32> {
    // The options are checked before the build (the target is a
    // placeholder until cargo names the module).
    let with_target = |target: &str| -> Vec<String> {
        std::iter::once(target.to_string())
            .chain(a.heddle.iter().cloned())
            .collect()
    };
    let fuzz_cmd = || {
        FuzzArgs::augment_args(
            clap::Command::new("heddle cargo run --")
                .no_binary_name(true)
                .disable_version_flag(true),
        )
    };
    if parse_opts::<FuzzArgs>(fuzz_cmd(), &with_target("module.wasm"))?.is_none() {
        return Ok(super::EXIT_OK);
    }
    let exe = cargo::binary(&a.cargo, None, super::global().verbose > 0)?;
    let args = with_target(&exe.path.to_string_lossy());
    let Some(f) = parse_opts::<FuzzArgs>(fuzz_cmd(), &args)? else {
        return Ok(super::EXIT_OK);
    };
    super::fuzz::fuzz_cmd(f)
}
