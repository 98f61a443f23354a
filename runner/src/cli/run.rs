//! `heddle run`: one run, its verdict.

use super::{InstrumentOpts, EXIT_BUG, EXIT_OK};
use crate::runtime::{Grant, Program, RunConfig, RunResult};
use crate::target::{self, Target};
use crate::verdict::Verdict;
use anyhow::{bail, Result};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

/// What to run: the target and how it is built and instrumented.
#[derive(Args, Debug, Clone)]
pub struct TargetOpts {
    /// A module (.wasm) or a C/C++ source (compiled on the fly).
    pub target: PathBuf,
    /// Extra compiler flag for a source target, e.g. `-DFIXED` (repeatable).
    #[arg(long = "cflag", value_name = "FLAG", allow_hyphen_values = true)]
    pub cflags: Vec<String>,
    /// Shorthand for `--cflag -DFIXED`: build a target's fixed variant.
    #[arg(long)]
    pub fixed: bool,
    #[command(flatten)]
    pub instrument: InstrumentOpts,
    /// Arguments passed to the program (after `--`).
    #[arg(last = true)]
    pub args: Vec<String>,
}

impl TargetOpts {
    pub fn all_cflags(&self) -> Vec<String> {
        let mut v = self.cflags.clone();
        if self.fixed {
            v.push("-DFIXED".into());
        }
        v
    }

    pub fn load(&self) -> Result<(Target, Program)> {
        let t = target::load(&self.target, &self.all_cflags())?;
        let p = Program::new(&t.bytes, &self.instrument.config())?;
        Ok((t, p))
    }
}

/// How runs are scheduled and bounded.
#[derive(Args, Debug, Clone)]
pub struct RunOpts {
    /// Scheduling strategy: random, pct:D, sites:D, ipct:D:B, pos, surw,
    /// delay:K, rr:P, exec:PROGRAM, each optionally +stall (time choices).
    /// `heddle fuzz` takes a comma-separated portfolio and defaults to
    /// `default` (sites+stall,pos+stall,surw+stall,random+stall); a single run
    /// defaults to random.
    #[arg(long)]
    pub strategy: Option<String>,
    /// Step budget (yield points): a run still making progress there is
    /// stopped as `too long`, which is inconclusive, not a failure.
    #[arg(long, default_value_t = crate::runtime::DEFAULT_MAX_STEPS)]
    pub max_steps: u64,
    /// Steps in a row without progress (no thread changed memory or read
    /// something new) that make a run a hang or a livelock; at most a
    /// quarter of --max-steps is used.
    #[arg(long, default_value_t = crate::runtime::DEFAULT_HANG_STEPS)]
    pub hang_steps: u64,
    /// Steps a thread that can run may be kept waiting while others run,
    /// whatever the strategy, before it runs (0: no bound; every strategy
    /// is then only as fair as its own rule).
    #[arg(long, default_value_t = crate::runtime::DEFAULT_FAIR_STEPS)]
    pub fair_steps: u64,
    /// Virtual-time budget in milliseconds before a run is a hang.
    #[arg(long, default_value_t = 3_600_000)]
    pub max_time_ms: u64,
    /// Largest preemption budget (back-edges per slice); each slice draws from 1..=N.
    #[arg(long, default_value_t = 2000)]
    pub budget: u32,
    /// The exit code that counts as a pass.
    #[arg(long, default_value_t = 0)]
    pub expect_exit: i32,
    /// Data-race detection: `report` (with the result), `fail` (a race is
    /// the verdict) or `off`.
    #[arg(long, default_value = "report")]
    pub races: crate::runtime::RaceMode,
    /// Environment variable for the program, KEY=VALUE (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Grant the program a host directory, HOST or HOST:GUEST (repeatable).
    #[arg(long = "dir", value_name = "HOST[:GUEST]")]
    pub dirs: Vec<String>,
}

impl RunOpts {
    pub fn config(&self, args: &[String], seed: u64) -> Result<RunConfig> {
        let mut env = Vec::new();
        for kv in &self.env {
            match kv.split_once('=') {
                Some((k, v)) if !k.is_empty() => env.push((k.to_string(), v.to_string())),
                _ => bail!("bad --env `{kv}` (expected KEY=VALUE)"),
            }
        }
        let grants = self
            .dirs
            .iter()
            .map(|d| Grant::parse(d))
            .collect::<Result<Vec<_>>>()?;
        // Validate the strategy spec now, for a clear error.
        let strategy = self.strategy.clone().unwrap_or_else(|| "random".into());
        crate::sched::parse(&strategy, 1)?;
        Ok(RunConfig {
            args: args.to_vec(),
            env,
            seed,
            strategy,
            max_steps: self.max_steps,
            hang_steps: self.hang_steps,
            fair_steps: self.fair_steps,
            max_time_ns: self.max_time_ms.saturating_mul(1_000_000),
            budget: (1, self.budget.max(1)),
            expected_exit: self.expect_exit,
            races: self.races,
            grants,
            ..RunConfig::default()
        })
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetOpts,
    #[command(flatten)]
    pub run: RunOpts,
    /// Seed of the run.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Do not print the program's output when the run passes (a failing
    /// run's output is printed all the same).
    #[arg(long)]
    pub quiet_output: bool,
    /// The program's output is printed by default; accepted so that
    /// scripts written for older versions keep working.
    #[arg(long, hide = true)]
    pub show_output: bool,
    /// Behave as the program would on its own, for a build system that
    /// runs it (ctest, CMake's `try_run`, `make check`): its stdout and
    /// stderr as it wrote them, and its exit code as heddle's. A run that
    /// ends otherwise prints `heddle: VERDICT` on stderr and exits 134 (a
    /// trap, an abort or a failed assertion, as a shell reports SIGABRT),
    /// 101 (a Rust panic), 77 (unsupported here: a test harness's "skip")
    /// or 1 (a deadlock, a hang, a run too long to finish).
    #[arg(long, conflicts_with_all = ["trace", "observe", "format", "quiet_output"])]
    pub as_program: bool,
    /// Print every executed event.
    #[arg(long)]
    pub trace: bool,
    /// Print the final value of a global variable (repeatable).
    #[arg(long, value_name = "VAR")]
    pub observe: Vec<String>,
    /// `json`: print one JSON document (docs/report-schema.json) on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::report::json::Format,
}

/// Prints the data races of a run, with both stacks (the run is repeated
/// with event stacks recorded when it did not record them).
pub fn print_races(
    out: &mut dyn Write,
    program: &Program,
    cfg: &RunConfig,
    r: &RunResult,
) -> Result<()> {
    if r.races.is_empty() {
        return Ok(());
    }
    let detailed;
    let races = if r.races.iter().all(|x| x.first.stack.is_empty()) {
        detailed = program.run(&RunConfig {
            event_stacks: true,
            ..cfg.clone()
        })?;
        &detailed.races
    } else {
        &r.races
    };
    for race in races {
        writeln!(out, "{}", race.summary())?;
        for (label, side) in [("first", &race.first), ("second", &race.second)] {
            for f in side.stack.iter().take(6) {
                writeln!(out, "    {label:<6} {} {}", f.name(), f.place())?;
            }
        }
    }
    Ok(())
}

/// Prints the program's captured stdout and stderr.
pub fn print_output(out: &mut dyn Write, r: &RunResult) -> std::io::Result<()> {
    if !r.stdout.is_empty() {
        writeln!(
            out,
            "--- stdout ---\n{}",
            String::from_utf8_lossy(&r.stdout).trim_end()
        )?;
    }
    if !r.stderr.is_empty() {
        writeln!(
            out,
            "--- stderr ---\n{}",
            String::from_utf8_lossy(&r.stderr).trim_end()
        )?;
    }
    Ok(())
}

pub fn run_cmd(a: RunArgs) -> Result<i32> {
    let (_t, program) = a.target.load()?;
    let cfg = a.run.config(&a.target.args, a.seed)?;
    let mut cfg = program.calibrate(cfg)?;
    cfg.record_events = a.trace;
    cfg.diagnostics = true;
    cfg.observe = a.observe.clone();
    let json = a.format == crate::report::json::Format::Json;
    let mut text = super::text_out(json);
    let out = &mut *text;
    let r = program.run(&cfg)?;
    if a.as_program {
        return as_program(&r);
    }
    if a.trace {
        for e in &r.events {
            let site = program.sites.site(e.site);
            let at = site
                .map(|s| format!("{} {}", s.where_(), s.func_name))
                .unwrap_or_default();
            let value = e.value.map(|v| format!(" = {v}")).unwrap_or_default();
            let mark = if e.preempted { "*" } else { " " };
            writeln!(
                out,
                "{:>6}{mark} t{} {:<7} {:#010x}{value:<12} {at}",
                e.step,
                e.tid,
                e.kind.label(),
                e.addr
            )?;
        }
    }
    writeln!(out, "verdict: {}", r.verdict.summary())?;
    writeln!(
        out,
        "seed {} strategy {}: {} steps, {} decisions, {} threads, {} preemptions",
        a.seed,
        r.strategy,
        r.steps,
        r.decisions.len(),
        r.threads,
        r.preemptions
    )?;
    print_races(out, &program, &cfg, &r)?;
    for o in &r.observed {
        match o.value {
            Some(v) => writeln!(out, "{} = {v}", o.name),
            None => writeln!(out, "{} = ? ({} bytes at {:#x})", o.name, o.size, o.addr),
        }?;
    }
    // With `--format json` this text, the output included, goes to stderr:
    // stdout carries the JSON document alone.
    if !a.quiet_output || !r.verdict.is_pass() {
        print_output(out, &r)?;
    }
    if json {
        let target = a.target.target.display().to_string();
        let doc = crate::report::json::Document::of_run("run", &target, a.seed, &r);
        crate::report::json::emit(&doc);
    }
    Ok(if r.verdict.is_failure() {
        EXIT_BUG
    } else {
        EXIT_OK
    })
}

/// The exit code a native run of the program would give for a verdict
/// (`heddle run --as-program`).
pub fn program_exit_code(v: &Verdict) -> i32 {
    match v {
        Verdict::Pass { exit_code } => *exit_code,
        Verdict::Exit { code, .. } => *code,
        Verdict::Assertion { .. } | Verdict::Trap { .. } => 134,
        Verdict::Panic { .. } => 101,
        Verdict::Unsupported { .. } => 77,
        _ => 1,
    }
}

/// `heddle run --as-program`: the program's output, unframed, and its
/// exit code; heddle's verdict on stderr only when it did not just exit.
fn as_program(r: &RunResult) -> Result<i32> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&r.stdout)?;
    stdout.flush()?;
    let mut stderr = std::io::stderr().lock();
    stderr.write_all(&r.stderr)?;
    if !matches!(r.verdict, Verdict::Pass { .. } | Verdict::Exit { .. }) {
        writeln!(stderr, "heddle: {}", r.verdict.summary())?;
    }
    // Like a sanitizer's reports: on stderr, each race once.
    let mut said = std::collections::BTreeSet::new();
    for race in &r.races {
        let line = race.summary();
        if said.insert(line.clone()) {
            writeln!(stderr, "heddle: {line}")?;
        }
    }
    Ok(program_exit_code(&r.verdict))
}
