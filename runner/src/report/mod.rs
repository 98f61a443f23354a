//! Failure reports people and machines can read (`heddle show`, the HTML
//! report `fuzz` writes next to each replay file, `--format json`,
//! `--junit`), and schedule minimisation (`heddle minimize`).
//!
//! Everything drawn for people starts from a `timeline::Timeline`, built
//! from one run recorded with events and event stacks:
//! - `diagram`: the interleaving diagram (one column per thread);
//! - `deadlock`: the wait-for cycle of a deadlock;
//! - `html`: one self-contained HTML page with a swimlane timeline.
//!
//! For machines: [`json`] (the versioned schema of `docs/report-schema.json`,
//! checked by [`schema`]) and [`junit`].

#![deny(missing_docs)]

pub(crate) mod campaign;
pub(crate) mod deadlock;
pub(crate) mod diagram;
pub(crate) mod html;
pub mod json;
pub mod junit;
pub(crate) mod minimize;
pub(crate) mod perfetto;
pub(crate) mod sarif;
pub mod schema;
pub(crate) mod source;
pub(crate) mod timeline;

use crate::runtime::{Program, RunConfig, RunResult};
use crate::verdict::Verdict;
use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::path::PathBuf;
use timeline::Timeline;

/// Longest run (in steps) `fuzz` writes an HTML report for: recording every
/// event with its stack costs memory in proportion to the steps.
pub const MAX_REPORT_STEPS: u64 = 500_000;

/// What a report says about the run besides its events.
#[derive(Debug, Clone, Default)]
pub struct RunInfo {
    /// The target as the user named it.
    pub target: String,
    /// The seed of the run.
    pub seed: u64,
    /// The strategy spec of the run.
    pub strategy: String,
    /// Steps the run took.
    pub steps: u64,
    /// Decisions the run made.
    pub decisions: usize,
    /// Threads the run had.
    pub threads: u32,
    /// Preemptions the run made.
    pub preemptions: u64,
    /// The command that replays the run (`heddle replay …`).
    pub replay_command: Option<String>,
    /// Settings worth showing (`args`, `instrumentation`, limits, …).
    pub config: Vec<(String, String)>,
}

impl RunInfo {
    /// What `r`, a run of `cfg` on `target`, says about itself.
    pub fn new(target: &str, cfg: &RunConfig, r: &RunResult) -> RunInfo {
        RunInfo {
            target: target.to_string(),
            seed: cfg.seed,
            strategy: r.strategy.clone(),
            steps: r.steps,
            decisions: r.decisions.len(),
            threads: r.threads,
            preemptions: r.preemptions,
            replay_command: None,
            config: vec![
                ("args".into(), format!("{:?}", cfg.args)),
                ("seed".into(), cfg.seed.to_string()),
                ("strategy".into(), r.strategy.clone()),
                ("max_steps".into(), cfg.max_steps.to_string()),
                (
                    "max_time_ms".into(),
                    (cfg.max_time_ns / 1_000_000).to_string(),
                ),
                (
                    "budget".into(),
                    format!("{}..={}", cfg.budget.0, cfg.budget.1),
                ),
                ("expected_exit".into(), cfg.expected_exit.to_string()),
            ],
        }
    }

    /// `race_bank.c, seed 5 (replay): 3 threads, 412 steps, 1 preemption`.
    pub fn title(&self) -> String {
        let name = std::path::Path::new(&self.target)
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.target.clone());
        format!(
            "{name}, seed {} ({}): {} threads, {} steps, {} {}",
            self.seed,
            self.strategy,
            self.threads,
            self.steps,
            self.preemptions,
            if self.preemptions == 1 {
                "preemption"
            } else {
                "preemptions"
            }
        )
    }
}

/// The configuration of a run recorded for a report: events, their stacks,
/// blocking diagnostics and every decision (none of which changes the
/// schedule).
pub fn recording(cfg: &RunConfig) -> RunConfig {
    RunConfig {
        record_events: true,
        event_stacks: true,
        diagnostics: true,
        keep_decisions: u64::MAX,
        ..cfg.clone()
    }
}

/// Runs `cfg` recorded for a report.
pub fn record(program: &Program, cfg: &RunConfig) -> Result<RunResult> {
    program.run(&recording(cfg))
}

/// The data-race section: each race with both accesses and their stacks.
pub fn races_text(tl: &Timeline, all: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "data races ({}):", tl.races.len());
    let shown = if all { tl.races.len() } else { MAX_RACES };
    for r in tl.races.iter().take(shown) {
        let _ = writeln!(out, "  ≠ {}", r.summary());
        for (which, a) in [("first", &r.first), ("second", &r.second)] {
            let rw = if a.write { "write" } else { "read" };
            let stack = if a.stack.is_empty() {
                format!("{} ({})", a.function, a.site)
            } else {
                deadlock::stack_line(&a.stack, all)
            };
            let _ = writeln!(
                out,
                "    {which:<6} {rw:<5} by {}: {stack}",
                tl.label(a.tid)
            );
        }
    }
    if tl.races.len() > shown {
        let _ = writeln!(
            out,
            "  … and {} more (--all lists every one)",
            tl.races.len() - shown
        );
    }
    out
}

/// Lines of notes under the diagram (without `--all`).
const MAX_NOTE_LINES: usize = 60;

/// Data races `heddle show` lists (without `--all`).
const MAX_RACES: usize = 20;

/// Lines of the verdict `heddle show` prints (without `--all`): a hang of
/// hundreds of threads names each.
const MAX_VERDICT_LINES: usize = 8;

/// `text` cut to its first `max` lines, with a last line saying so.
fn first_lines(text: &str, max: usize, what: &str) -> String {
    let n = text.lines().count();
    if n <= max {
        return text.to_string();
    }
    let mut out: Vec<&str> = text.lines().take(max).collect();
    let more = format!("  … {} more lines of {what}", n - max);
    out.push(&more);
    out.join("\n")
}

/// What a report left out, in a few lines: the steps of the gaps, the rows
/// and the threads merged into one column, and how to see more.
pub fn elision_note(tl: &Timeline, elided: &diagram::Elided, width: usize) -> String {
    if tl.gaps.is_empty() && elided.rows == 0 && elided.merged_threads == 0 {
        return String::new();
    }
    let mut parts: Vec<String> = Vec::new();
    if !tl.gaps.is_empty() {
        let steps: u64 = tl.gap_steps();
        parts.push(format!(
            "{} of the run's steps in {} stretch{} (only the steps around the marks that explain the verdict and the last ones are kept)",
            diagram::grouped(steps),
            tl.gaps.len(),
            if tl.gaps.len() == 1 { "" } else { "es" }
        ));
    }
    if elided.rows > 0 {
        parts.push(format!(
            "{} row{} far from the marks",
            diagram::grouped(elided.rows as u64),
            if elided.rows == 1 { "" } else { "s" }
        ));
    }
    if elided.merged_threads > 0 {
        parts.push(format!(
            "the columns of {} threads (drawn in the `+{} others` column, each cell naming its thread)",
            elided.merged_threads, elided.merged_threads
        ));
    }
    let line = format!(
        "left out: {}. To see more: --context N (N rows around each mark), --width W (more columns), --all (every step; long on a long run).",
        parts.join("; ")
    );
    diagram::wrap_line(&line, width, 2)
}

/// Records the run `cfg` of `program` with events and stacks and writes its
/// HTML report to `out`. `source` is the target as the user named it
/// (where sources are looked up), `instrumentation` its setting and
/// `replay_command` the command that replays it. Fails when the recorded run
/// does not make the `expected` decisions (recording must not change the
/// schedule).
pub fn write_html(
    program: &Program,
    cfg: &RunConfig,
    expected: &[crate::trace::Decision],
    source: &str,
    replay_command: String,
    out: &std::path::Path,
) -> Result<()> {
    let r = record(program, cfg)?;
    if r.decisions != expected {
        return Err(crate::internal!(
            "the run did not repeat its schedule when recorded for the report"
        ));
    }
    let dirs = source_dirs(source);
    let input = timeline::Input {
        program,
        result: &r,
        source_dirs: dirs.clone(),
    };
    let tl = Timeline::build_in(&input, false, &timeline::Scope::default());
    let mut info = RunInfo::new(source, cfg, &r);
    info.replay_command = Some(replay_command);
    info.config.insert(
        0,
        ("instrumentation".into(), program.instrumentation.describe()),
    );
    let mut src = source::SourceCache::new(dirs);
    let page = html::page(&tl, &info, &mut src);
    crate::paths::write_atomic(out, page.as_bytes())
        .with_context(|| format!("{}: cannot write", out.display()))
}

/// A replay file's run, replayed with events and stacks recorded.
pub struct Replayed {
    /// The run; it followed its recording.
    pub result: RunResult,
    /// Set when it ended with another verdict than the file recorded
    /// (the replay still followed every recorded decision).
    pub other_verdict: Option<String>,
}

/// Replays `rp` recording events and stacks, and checks that it follows its
/// recording (a divergence is a [`crate::error::NotReproduced`] error).
pub fn replay_recorded(rp: &crate::reproduce::Replay) -> Result<Replayed> {
    let r = record(&rp.program, &rp.config)?;
    if r.divergence.is_some() {
        crate::reproduce::check(rp, &r)?;
    }
    let other_verdict = (r.verdict.signature() != rp.file.verdict.signature).then(|| {
        format!(
            "the replay gave `{}`, but the file recorded `{}`",
            r.verdict.signature(),
            rp.file.verdict.signature
        )
    });
    Ok(Replayed {
        result: r,
        other_verdict,
    })
}

/// The timeline of a replayed run (`all`: library steps too, and every
/// step of a long run; else a long run keeps the steps the default
/// `timeline::Scope` keeps).
pub fn timeline_of(rp: &crate::reproduce::Replay, r: &RunResult, all: bool) -> Timeline {
    timeline_in(rp, r, all, &timeline::Scope::default())
}

/// The timeline of a replayed run, keeping what `scope` keeps of a long
/// run (`all`: every step, library steps too).
pub fn timeline_in(
    rp: &crate::reproduce::Replay,
    r: &RunResult,
    all: bool,
    scope: &timeline::Scope,
) -> Timeline {
    let input = timeline::Input {
        program: &rp.program,
        result: r,
        source_dirs: source_dirs(&rp.file.module.source),
    };
    Timeline::build_in(&input, all, scope)
}

/// Directories where a report looks for sources: the target's own.
pub fn source_dirs(target: &str) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(d) = std::path::Path::new(target).parent() {
        v.push(d.to_path_buf());
    }
    v.push(PathBuf::from("."));
    v
}

/// The whole text of `heddle show`: title, verdict, diagram, legend, notes,
/// the deadlock section and the replay command.
pub fn show_text(
    tl: &Timeline,
    info: &RunInfo,
    opts: &diagram::Options,
    src: &mut source::SourceCache,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", info.title());
    let verdict = diagram::wrap_line(&format!("verdict: {}", tl.verdict.summary()), opts.width, 2);
    let verdict = if opts.all {
        verdict
    } else {
        first_lines(&verdict, MAX_VERDICT_LINES, "the verdict")
    };
    let _ = writeln!(out, "{verdict}");
    out.push('\n');
    let (table, elided) = diagram::render_elided(tl, opts);
    out.push_str(&table);
    let note = elision_note(tl, &elided, opts.width);
    if !note.is_empty() {
        let _ = writeln!(out, "\n{note}");
    }
    let legend = diagram::legend(tl);
    if !legend.is_empty() {
        let _ = writeln!(out, "\n{}", diagram::wrap_line(&legend, opts.width, 2));
    }
    let notes = diagram::render_notes(tl, opts.color, opts.width);
    let notes = if opts.all {
        notes
    } else {
        first_lines(&notes, MAX_NOTE_LINES, "notes (--all shows every one)")
    };
    if !notes.is_empty() {
        out.push('\n');
        out.push_str(notes.trim_end_matches('\n'));
        out.push('\n');
    }
    if let Some(f) = tl.failing {
        let g = &tl.groups[f];
        // Where it failed: the innermost user frame of the verdict's stack
        // (the failing instruction need not be a yield point), else the
        // failing row's line.
        let stack = match &tl.verdict {
            Verdict::Assertion { stack, .. }
            | Verdict::Trap { stack, .. }
            | Verdict::Panic { stack, .. } => stack.as_slice(),
            Verdict::Memory(m) => m.stack.as_slice(),
            _ => &[],
        };
        let loc = stack
            .iter()
            .filter_map(|f| f.loc.as_ref())
            .find(|l| !timeline::is_library_file(&l.file) && l.line > 0)
            .or(g.loc.as_ref());
        let at = loc
            .map(|l| format!(" at step {} ({})", g.first_step, l.short()))
            .unwrap_or_default();
        let what = match &tl.verdict {
            Verdict::Assertion { message, .. } => format!("assertion failed: {message}"),
            Verdict::Trap { trap, message, .. } => format!("trap ({trap}): {message}"),
            Verdict::Memory(m) => format!("{} at address {:#x}", m.error, m.addr),
            Verdict::Race(r) => r.summary(),
            v => v.summary(),
        };
        let line = format!("✗ {}{at}: {what}", tl.label(g.tid));
        let line = if opts.color {
            format!("\x1b[1;31m{line}\x1b[0m")
        } else {
            line
        };
        let _ = writeln!(out, "{}", diagram::wrap_line(&line, opts.width, 2));
    }
    if !tl.races.is_empty() {
        out.push('\n');
        out.push_str(&races_text(tl, opts.all));
    }
    if let Verdict::Deadlock { threads } = &tl.verdict {
        out.push('\n');
        out.push_str(&deadlock::render(tl, threads, src, opts.all));
    }
    if let Some(c) = &info.replay_command {
        let _ = writeln!(out, "\nreplay: {c}");
    }
    out
}
