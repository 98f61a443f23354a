//! `heddle show` (draw a recorded run) and `heddle minimize` (the same
//! failure with the fewest preemptions).

use super::replay::{print_notes, ReplayInputs};
use super::EXIT_OK;
use crate::report::{self, diagram, minimize, source::SourceCache, RunInfo};
use crate::reproduce::{self, Replay};
use crate::runtime::{RunConfig, RunResult};
use crate::{paths, verdict::Verdict};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// `heddle show`: what to draw and how.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The replay file.
    pub file: PathBuf,
    #[command(flatten)]
    pub inputs: ReplayInputs,
    /// Show only the rows within N rows of a marked step (on a long run,
    /// also keep about N rows around each step that explains the verdict).
    #[arg(long, value_name = "N")]
    pub context: Option<usize>,
    /// Show every step, library code included, without folding (on a long
    /// run: every step of it, which is long and slow).
    #[arg(long)]
    pub all: bool,
    /// Width of the diagram in columns (default: the terminal's, else 160).
    #[arg(long, value_name = "W")]
    pub width: Option<usize>,
    /// Write the HTML report to this file instead of printing the diagram.
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
    /// Write the timeline as a Chrome/Perfetto trace (open it in
    /// ui.perfetto.dev) instead of printing the diagram.
    #[arg(long, value_name = "OUT.json")]
    pub perfetto: Option<PathBuf>,
}

/// The terminal width of stdout, when it is a terminal.
fn terminal_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    // SAFETY: TIOCGWINSZ fills a `winsize` we own; nothing else is touched.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_col > 0 {
            return Some(ws.ws_col as usize);
        }
    }
    None
}

/// Colour on stdout, as `--color`, `NO_COLOR` and `CLICOLOR_FORCE` say.
pub fn use_color() -> bool {
    super::global().color(false)
}

/// The command that replays `file` (with `--target` when one was given).
pub fn replay_command(file: &Path, target: Option<&Path>) -> String {
    let mut c = format!("heddle replay {}", file.display());
    if let Some(t) = target {
        c.push_str(&format!(" --target {}", t.display()));
    }
    c
}

/// Replays `rp` recording events and stacks (a warning on stderr when it
/// ends with another verdict than recorded).
pub fn replay_recorded(rp: &Replay) -> Result<RunResult> {
    let r = report::replay_recorded(rp)?;
    if let Some(w) = &r.other_verdict {
        eprintln!("heddle: warning: {w}");
    }
    Ok(r.result)
}

/// A failure to report in SARIF and as a CI annotation: its replay file
/// and seed.
pub struct Failure {
    /// The replay file.
    pub replay: PathBuf,
    /// The seed of the run (none for an explored schedule).
    pub seed: Option<u64>,
    /// Why it fails when its verdict is a pass (a broken `--expect`).
    pub reason: Option<String>,
}

/// Writes `--sarif FILE` for `failures` and, in GitHub Actions, prints an
/// `::error` annotation for each: both from the replayed run's timeline.
pub fn report_failures(
    out: &mut dyn std::io::Write,
    failures: &[Failure],
    sarif: Option<&Path>,
) -> Result<()> {
    let gh = crate::report::sarif::in_github_actions();
    if sarif.is_none() && !gh {
        return Ok(());
    }
    let mut runs = Vec::new();
    for f in failures {
        let rp = reproduce::load(&f.replay, &reproduce::Options::default())?;
        print_notes(&rp);
        let r = replay_recorded(&rp)?;
        let tl = report::timeline_of(&rp, &r, false);
        let dirs = report::source_dirs(&rp.file.module.source);
        runs.push((tl, rp.file.module.source.clone(), dirs, f));
    }
    let findings: Vec<crate::report::sarif::Finding> = runs
        .iter()
        .map(|(tl, target, dirs, f)| crate::report::sarif::Finding {
            timeline: tl,
            target: target.clone(),
            seed: f.seed,
            reason: f.reason.clone(),
            replay_command: Some(replay_command(&f.replay, None)),
            source_dirs: dirs.clone(),
        })
        .collect();
    if let Some(p) = sarif {
        crate::report::sarif::write(p, &findings)?;
    }
    if gh {
        for f in &findings {
            writeln!(out, "{}", crate::report::sarif::annotation(f))?;
        }
    }
    Ok(())
}

/// Replays the file with events and stacks recorded and prints its
/// interleaving diagram (or writes the HTML report with `--html`).
pub fn show_cmd(a: ShowArgs) -> Result<i32> {
    let rp = reproduce::load(&a.file, &a.inputs.options())?;
    print_notes(&rp);
    let r = replay_recorded(&rp)?;
    let dirs = report::source_dirs(&rp.file.module.source);
    let mut info = RunInfo::new(&rp.file.module.source, &rp.config, &r);
    info.replay_command = Some(replay_command(&a.file, a.inputs.target.as_deref()));
    info.config.insert(
        0,
        (
            "instrumentation".into(),
            rp.file.run.instrumentation.clone(),
        ),
    );
    if let Some(out) = &a.perfetto {
        let tl = report::timeline_of(&rp, &r, true);
        crate::report::perfetto::write(out, &tl, &info.title())?;
        println!("wrote {}", out.display());
        return Ok(EXIT_OK);
    }
    if let Some(out) = &a.html {
        let tl = report::timeline_of(&rp, &r, false);
        let mut src = SourceCache::new(dirs);
        let page = report::html::page(&tl, &info, &mut src);
        paths::write_atomic(out, page.as_bytes())
            .with_context(|| format!("{}: cannot write", out.display()))?;
        println!("wrote {}", out.display());
        return Ok(EXIT_OK);
    }
    // A long run keeps the steps around the marks that explain its
    // verdict; `--context N` widens that to about N rows each side.
    let defaults = report::timeline::Scope::default();
    let scope = report::timeline::Scope {
        around: a.context.map_or(defaults.around, |n| {
            n.saturating_mul(4).max(defaults.around)
        }),
        ..defaults
    };
    let tl = report::timeline_in(&rp, &r, a.all, &scope);
    let opts = diagram::Options {
        all: a.all,
        context: a.context,
        width: a.width.or_else(terminal_width).unwrap_or(160).max(40),
        color: use_color(),
        // `--context` and `--all` say how much to show.
        max_rows: (!a.all && a.context.is_none()).then_some(diagram::MAX_ROWS),
    };
    let mut src = SourceCache::new(dirs);
    print!("{}", report::show_text(&tl, &info, &opts, &mut src));
    if r.preemptions > 3 && !r.verdict.is_pass() {
        println!(
            "hint: {} preemptions; `heddle minimize {}` finds the same failure with fewer",
            r.preemptions,
            a.file.display()
        );
    }
    Ok(EXIT_OK)
}

/// `heddle minimize`: which replay file and where the result goes.
#[derive(Args, Debug)]
pub struct MinimizeArgs {
    /// The replay file.
    pub file: PathBuf,
    #[command(flatten)]
    pub inputs: ReplayInputs,
    /// Where to write the minimised replay file (default: `<file>.min.toml`).
    #[arg(short = 'o', long = "out", value_name = "OUT.toml")]
    pub out: Option<PathBuf>,
    /// Most candidate runs to try.
    #[arg(
        long = "runs",
        alias = "max-runs",
        value_name = "N",
        default_value_t = 2000
    )]
    pub max_runs: usize,
}

/// `x.toml` → `x.min.toml`.
pub fn minimized_path(file: &Path) -> PathBuf {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "replay".into());
    let stem = stem.strip_suffix(".min").unwrap_or(&stem).to_string();
    file.with_file_name(format!("{stem}.min.toml"))
}

/// Minimises the schedule of a replay file and writes the result as a new
/// replay file (`<file>.min.toml` unless `--out`).
pub fn minimize_cmd(a: MinimizeArgs) -> Result<i32> {
    let rp = reproduce::load(&a.file, &a.inputs.options())?;
    print_notes(&rp);
    let original = rp.program.run(&RunConfig {
        record_choices: true,
        ..rp.config.clone()
    })?;
    reproduce::check(&rp, &original)?;
    if matches!(original.verdict, Verdict::Pass { .. }) {
        bail!("the recorded run passes: there is no failure to minimise (give the replay file of a failing run, e.g. one `heddle fuzz` wrote)");
    }
    let m = minimize::minimize(
        &rp.program,
        &rp.config,
        &original,
        &minimize::Options {
            max_runs: a.max_runs,
        },
    )?;
    let mut file = reproduce::record(
        &rp.target,
        &rp.program,
        &rp.config,
        rp.config.seed,
        &m.result,
    )?;
    // The source as the original file named it, whatever module was used.
    file.module.source = rp.file.module.source.clone();
    let out = a.out.clone().unwrap_or_else(|| minimized_path(&a.file));
    reproduce::save(&out, &mut file, &rp.target.bytes)?;
    println!(
        "minimised in {} runs: {} → {} preemptions, {} → {} steps, same verdict ({})",
        m.runs,
        m.before_preemptions,
        m.result.preemptions,
        m.before_steps,
        m.result.steps,
        m.result.verdict.signature()
    );
    println!(
        "  replay: {}",
        replay_command(&out, a.inputs.target.as_deref())
    );
    println!(
        "  show:   heddle show {}{}",
        out.display(),
        a.inputs
            .target
            .as_ref()
            .map(|t| format!(" --target {}", t.display()))
            .unwrap_or_default()
    );
    Ok(EXIT_OK)
}
