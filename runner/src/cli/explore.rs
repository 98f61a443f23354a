//! `heddle explore`: enumerate schedules systematically, print the outcome
//! histogram, write the first failing schedule as a replay file.

use super::run::{print_output, RunOpts, TargetOpts};
use super::{EXIT_BUG, EXIT_OK};
use crate::explore::{self, Bound, Expect, Options, Reduction, Report};
use crate::runtime::{Program, RaceMode};
use anyhow::{bail, Result};
use clap::Args;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Arguments of `heddle explore`.
#[derive(Args, Debug)]
pub struct ExploreArgs {
    #[command(flatten)]
    pub target: TargetOpts,
    #[command(flatten)]
    pub run: RunOpts,
    /// Bound: `preemptions=K`, `delays=K` or `none` (every schedule).
    #[arg(long, default_value = "none")]
    pub bound: String,
    /// Partial-order reduction: `none` or `dpor` (source-DPOR). Default:
    /// `dpor` without `--bound`, `none` with one.
    #[arg(long)]
    pub reduction: Option<String>,
    /// Stop after this many schedules (runs).
    #[arg(long = "runs", alias = "max-schedules", value_name = "N")]
    pub max_schedules: Option<u64>,
    /// A global variable whose final value is part of the outcome (repeatable).
    #[arg(long, value_name = "VAR")]
    pub observe: Vec<String>,
    /// The captured stdout is part of the outcome.
    #[arg(long)]
    pub observe_output: bool,
    /// Invariant over final values, e.g. `x == 5` (VAR OP INT joined by &&;
    /// `exit` is the exit code): a schedule that breaks it fails.
    #[arg(long, value_name = "PREDICATE")]
    pub expect: Option<String>,
    /// Where a running thread may be preempted: `user` (at yield points in
    /// user code; library calls run unpreempted unless they block) or `all`
    /// (every yield point, library atomics included).
    #[arg(long, default_value = "user")]
    pub preempt: String,
    /// Directory for the replay file of the first failing schedule.
    #[arg(long, default_value = "heddle-out")]
    pub out: PathBuf,
    /// Write the failures as SARIF 2.1.0 (for code-scanning annotations).
    #[arg(long, value_name = "OUT.sarif")]
    pub sarif: Option<PathBuf>,
    /// `json`: print one JSON document (docs/report-schema.json) on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::report::json::Format,
}

/// The `--format json` document of an exploration.
fn json_doc(
    a: &ExploreArgs,
    reduction: Reduction,
    report: &explore::Report,
    failure: Option<(&crate::runtime::RunResult, &Path)>,
    secs: f64,
) -> crate::report::json::Document {
    use crate::report::json::{Document, FailureDoc, Statistics, VerdictDoc};
    let strategy = format!("explore:bound={},reduction={reduction}", a.bound);
    let mut doc = Document::new("explore", &a.target.target.display().to_string(), &strategy);
    if let Some((r, path)) = failure {
        let verdict = VerdictDoc::of(&r.verdict);
        doc.result = "fail";
        doc.verdict = Some(verdict.clone());
        doc.seed = Some(0);
        doc.replay = Some(path.display().to_string());
        doc.failures.push(FailureDoc {
            seed: 0,
            verdict,
            replay: Some(path.display().to_string()),
            report: None,
            replay_command: Some(format!("heddle replay {}", path.display())),
            build: None,
        });
    }
    doc.statistics = Statistics {
        runs: report.schedules,
        failing: report.failing,
        elapsed_seconds: secs,
        runs_per_second: report.schedules as f64 / secs.max(1e-9),
        ..Statistics::default()
    };
    doc
}

/// The reduction asked for, else the default for `bound`: DPOR when every
/// schedule is wanted (it enumerates each user interleaving once), none
/// under a bound (DPOR does not combine with bounds).
fn reduction_of(a: &ExploreArgs, bound: Bound) -> Result<Reduction> {
    match &a.reduction {
        Some(r) => r.parse(),
        None if bound == Bound::Unbounded => Ok(Reduction::Dpor),
        None => Ok(Reduction::None),
    }
}

/// Runs `heddle explore`.
pub fn explore_cmd(a: ExploreArgs) -> Result<i32> {
    let json = a.format == crate::report::json::Format::Json;
    let mut text = super::text_out(json);
    let out = &mut *text;
    if a.run.strategy.is_some() {
        bail!("explore makes its own decisions: --strategy does not apply (drop it; `heddle fuzz --strategy` samples schedules with a strategy)");
    }
    let bound: Bound = a.bound.parse()?;
    let reduction = reduction_of(&a, bound)?;
    explore::check_reduction(bound, reduction)?;
    if a.max_schedules == Some(0) {
        bail!("--runs must be at least 1");
    }
    let expect = a.expect.as_deref().map(Expect::parse).transpose()?;
    let opts = Options {
        bound,
        reduction,
        max_schedules: a.max_schedules,
        observe: a.observe.clone(),
        observe_output: a.observe_output,
        expect,
        preempt: a.preempt.parse()?,
    };
    let (t, program) = a.target.load()?;
    for v in &opts.observe {
        program.resolve_symbol(v)?;
    }
    let mut base = a.run.config(&a.target.args, 0)?;
    // Race reports are not printed by explore: do not pay for them.
    if base.races == RaceMode::Report {
        base.races = RaceMode::Off;
    }
    crate::interrupt::install();
    // Said once Ctrl-C is handled: from here on it stops the search with
    // partial results instead of killing the process.
    writeln!(
        out,
        "exploring {}: bound {}, reduction {} (Ctrl-C prints partial results)",
        t.given.display(),
        a.bound,
        reduction
    )?;
    let _ = std::io::Write::flush(&mut std::io::stdout());
    let tty = std::io::stderr().is_terminal() && !super::global().quiet;
    let started = Instant::now();
    let mut last_draw = Instant::now();
    let report = explore::explore(&program, &base, &opts, &crate::interrupt::STOP, &mut |p| {
        if tty && last_draw.elapsed().as_millis() >= 100 {
            last_draw = Instant::now();
            eprint!(
                "\r{} / ~{} schedules  {} failing   ",
                p.schedules, p.estimate, p.failing
            );
        }
    })?;
    if tty {
        eprint!("\r{:60}\r", "");
    }
    print_report(
        out,
        &program,
        &opts,
        &report,
        started.elapsed().as_secs_f64(),
    )?;
    let secs = started.elapsed().as_secs_f64();
    let Some(f) = &report.first_failure else {
        if json {
            crate::report::json::emit(&json_doc(&a, opts.reduction, &report, None, secs));
        }
        super::show::report_failures(out, &[], a.sarif.as_deref())?;
        // Stopped by a signal with nothing found: not a verdict of "no bug".
        return Ok(crate::interrupt::requested().map_or(EXIT_OK, crate::interrupt::exit_code));
    };
    let (path, detailed) = f.record(&t, &program, &base, &a.out)?;
    // The run recorded with diagnostics knows more (stacks, the owners of
    // futex-word locks); its verdict is the one the replay file records.
    let reason = if detailed.verdict.is_pass() {
        f.reason.clone()
    } else {
        detailed.verdict.summary()
    };
    writeln!(out, "first failing schedule (#{}): {reason}", f.schedule)?;
    if !f.interleaving.is_empty() {
        writeln!(out, "  user interleaving:")?;
        for (i, e) in f.interleaving.iter().enumerate() {
            let site = program.sites.site(e.site);
            let var = program
                .sites
                .symbol_at(e.addr)
                .map(|s| s.name.clone())
                .unwrap_or_else(|| format!("{:#x}", e.addr));
            let value = e.value.map(|v| format!(" = {v}")).unwrap_or_default();
            writeln!(
                out,
                "  {:>4}. t{} {:<3} {var}{value:<8} {} {}",
                i + 1,
                e.tid,
                e.kind.label(),
                site.map(|s| s.where_()).unwrap_or_default(),
                site.map(|s| s.func_name.as_str()).unwrap_or("")
            )?;
        }
    }
    writeln!(out, "  replay: heddle replay {}", path.display())?;
    if !detailed.verdict.is_pass() {
        print_output(out, &detailed)?;
    }
    let failure = super::show::Failure {
        replay: path.clone(),
        seed: None,
        reason: detailed.verdict.is_pass().then(|| f.reason.clone()),
    };
    super::show::report_failures(out, &[failure], a.sarif.as_deref())?;
    if json {
        let doc = json_doc(&a, opts.reduction, &report, Some((&detailed, &path)), secs);
        crate::report::json::emit(&doc);
    }
    Ok(EXIT_BUG)
}

fn print_report(
    out: &mut dyn Write,
    program: &Program,
    opts: &Options,
    r: &Report,
    secs: f64,
) -> std::io::Result<()> {
    let _ = program;
    let what = match (opts.reduction, opts.bound) {
        (Reduction::Dpor, _) => "reduction dpor".to_string(),
        (Reduction::None, Bound::Unbounded) => "no bound".to_string(),
        (Reduction::None, b) => format!("bound {b}"),
    };
    writeln!(out,
        "{} schedules ({what}) in {secs:.2}s; {}{} user interleavings; longest schedule {} decisions",
        r.schedules,
        if r.user_capped { ">= " } else { "" },
        r.user_interleavings,
        r.max_decisions
    )?;
    if r.pruned > 0 {
        writeln!(
            out,
            "{} alternatives beyond the bound not explored",
            r.pruned
        )?;
    }
    if r.sleep_blocked > 0 {
        writeln!(out, "{} schedules were sleep-set blocked", r.sleep_blocked)?;
    }
    writeln!(out, "outcomes:")?;
    for (k, s) in &r.outcomes {
        writeln!(
            out,
            "  {:>8} interleavings {:>8} schedules  {}{}",
            s.interleavings,
            s.schedules,
            k,
            if k.failing { "  FAILS" } else { "" }
        )?;
    }
    let status = if r.interrupted {
        "interrupted: partial results".to_string()
    } else if !r.complete {
        format!(
            "stopped at --runs {}: not exhaustive (a larger --runs explores further)",
            opts.max_schedules.unwrap_or(0)
        )
    } else if r.exhaustive(opts) {
        if r.failing == 0 {
            format!(
                "exhaustive: no schedule fails — a proof for this input ({} schedules{})",
                r.schedules,
                if opts.reduction == Reduction::Dpor {
                    ", one per Mazurkiewicz trace"
                } else {
                    ""
                }
            )
        } else {
            format!("exhaustive: {} failing schedules", r.failing)
        }
    } else {
        format!(
            "exhaustive within bound {}: {} failing schedules (not a proof beyond the bound)",
            opts.bound, r.failing
        )
    };
    writeln!(out, "{status}")?;
    Ok(())
}
