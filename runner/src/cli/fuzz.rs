//! `heddle fuzz` (a campaign over many seeds) and `heddle merge`.

use super::run::{print_output, RunOpts, TargetOpts};
use crate::campaign::state::Aggregate;
use crate::campaign::summary::{self, Summary, Timing};
use crate::campaign::{self, exec, SeedPlan, Shard};
use crate::fuzz::{Fuzz, FuzzReport};
use anyhow::{bail, Result};
use clap::Args;
use std::io::IsTerminal;
use std::io::Write;
use std::path::PathBuf;

/// `heddle fuzz`: a campaign over many seeds.
#[derive(Args, Debug)]
pub struct FuzzArgs {
    #[command(flatten)]
    pub target: TargetOpts,
    #[command(flatten)]
    pub run: RunOpts,
    #[command(flatten)]
    pub campaign: CampaignOpts,
    /// Build the C/C++ source at each of these optimisation levels and
    /// alternate the builds in one campaign (levels 0, 1, 2, 3, s, z, g).
    /// Default for a source with no -O flag: `1,0`; `--opt 1` is one build.
    /// Each replay file ships its own build; the summary names the build
    /// with the strategy (`pos+stall@O0`).
    #[arg(long, value_name = "LEVELS")]
    pub opt: Option<String>,
    /// Print every failing seed with its verdict signature.
    #[arg(long)]
    pub list_failures: bool,
    /// `json`: print one JSON document (docs/report-schema.json) on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::report::json::Format,
    /// Write (or merge into) a JUnit XML file: one test case for the target.
    #[arg(long, value_name = "OUT.xml")]
    pub junit: Option<PathBuf>,
    /// Write the failures as SARIF 2.1.0 (for code-scanning annotations).
    #[arg(long, value_name = "OUT.sarif")]
    pub sarif: Option<PathBuf>,
}

/// Options of a campaign (`heddle fuzz`).
#[derive(Args, Debug, Clone)]
pub struct CampaignOpts {
    /// Seeds in the campaign (default 1000, or unbounded with --time-budget).
    #[arg(long)]
    pub runs: Option<u64>,
    /// Stop starting runs after this long: 90s, 10m, 2h.
    #[arg(long, value_name = "DURATION")]
    pub time_budget: Option<String>,
    /// Worker threads (default: all cores).
    #[arg(short, long)]
    pub jobs: Option<usize>,
    /// First seed.
    #[arg(
        long = "seed",
        alias = "seed-start",
        value_name = "N",
        default_value_t = 0
    )]
    pub seed_start: u64,
    /// Keep going after the first failure: collect every distinct failure.
    #[arg(long)]
    pub keep_going: bool,
    /// Run shard K of N (1-based) of the seed space; `auto` takes it from a
    /// Slurm array job, `auto/N` from a Kubernetes Indexed Job of N.
    #[arg(long, value_name = "K/N|auto|auto/N")]
    pub shard: Option<String>,
    /// Continue the campaign in --out (skips the seeds it finished).
    #[arg(long)]
    pub resume: bool,
    /// Print campaign statistics (also with -v).
    #[arg(long)]
    pub stats: bool,
    /// Campaign directory: replay files, campaign.toml, the state.
    #[arg(long, default_value = "heddle-out")]
    pub out: PathBuf,
    /// `all`: also keep a per-run journal (journal.jsonl.gz); `none`
    /// (default): only the state, whose size does not grow with the runs.
    #[arg(long, value_enum, default_value = "none", value_name = "KEEP")]
    pub journal: JournalKeep,
}

/// Which runs the campaign journals.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalKeep {
    /// No per-run journal.
    None,
    /// Every counted run.
    All,
}

impl CampaignOpts {
    /// The worker count: --jobs, else every core.
    pub fn jobs(&self) -> usize {
        super::jobs(self.jobs)
    }

    /// Driver options.
    pub fn options(&self) -> Result<exec::Options> {
        let time_budget = self
            .time_budget
            .as_deref()
            .map(campaign::parse_duration)
            .transpose()?;
        let progress = if super::global().quiet {
            exec::Progress::Off
        } else if std::io::stderr().is_terminal() {
            exec::Progress::Tty
        } else {
            exec::Progress::Lines
        };
        Ok(exec::Options {
            jobs: self.jobs(),
            time_budget,
            started: None,
            out: self.out.clone(),
            resume: self.resume,
            journal: self.journal == JournalKeep::All,
            all_failing_seeds: false,
            progress,
        })
    }

    /// The seed plan.
    pub fn plan(&self) -> Result<SeedPlan> {
        let shard: Shard = match &self.shard {
            Some(s) => Shard::resolve(s, |k| std::env::var(k).ok())?,
            None => Shard::WHOLE,
        };
        let runs = match (self.runs, &self.time_budget) {
            (Some(0), _) => bail!("--runs must be at least 1"),
            (Some(r), _) => Some(r),
            (None, Some(_)) => None,
            (None, None) => Some(1000),
        };
        Ok(SeedPlan {
            seed_start: self.seed_start,
            runs,
            shard,
        })
    }
}

/// Runs `heddle fuzz`.
pub fn fuzz_cmd(a: FuzzArgs) -> Result<i32> {
    // The time budget counts from here: building the target and
    // calibrating the strategies spend it too.
    let started = std::time::Instant::now();
    let json = a.format == crate::report::json::Format::Json;
    let mut text = super::text_out(json);
    let out = &mut *text;
    let plan = a.campaign.plan()?;
    let mut opts = a.campaign.options()?;
    opts.started = Some(started);
    opts.all_failing_seeds = a.list_failures;
    // Strategy specs are checked before the target is built.
    let spec = a.run.strategy.as_deref().unwrap_or("default");
    let members = campaign::Portfolio::parse(spec)?;
    let all_cflags = a.target.all_cflags();
    // A source given without a level is fuzzed over the default builds.
    let opt = a.opt.as_deref().or_else(|| {
        (crate::cc::is_source(&a.target.target) && !crate::cc::compile::has_opt_level(&all_cflags))
            .then_some(crate::target::DEFAULT_FUZZ_LEVELS)
    });
    let levels = opt.map(crate::target::parse_opt_levels).transpose()?;
    let builds = match &levels {
        None => {
            let (t, program) = a.target.load()?;
            vec![(String::new(), t, program)]
        }
        Some(levels) => {
            // One level is one build: no label to tell it from others.
            let single = levels.len() == 1;
            let mut v = Vec::new();
            for (label, t) in crate::target::load_builds(&a.target.target, &all_cflags, levels)? {
                let p = crate::runtime::Program::new(&t.bytes, &a.target.instrument.config())?;
                v.push((if single { String::new() } else { label }, t, p));
            }
            v
        }
    };
    let one = RunOpts {
        strategy: Some(members.members[0].clone()),
        ..a.run.clone()
    };
    let base = crate::runtime::RunConfig {
        deadline: opts.time_budget.map(|d| started + d),
        ..one.config(&a.target.args, 0)?
    };
    let fuzz = Fuzz::of_builds(builds, base, spec, plan, a.campaign.keep_going)?;
    crate::interrupt::install();
    let r = fuzz.run(&opts)?;
    print_outcome(
        out,
        &r,
        a.list_failures,
        a.campaign.stats || super::global().verbose > 0,
        !a.campaign.keep_going,
    )?;
    let o = &r.outcome;
    if let Some(path) = &a.junit {
        crate::report::junit::write(
            path,
            &crate::report::junit::Case {
                name: r.target_name(),
                classname: "heddle.fuzz".into(),
                time: o.session_secs,
                outcome: r.junit_outcome(),
            },
        )?;
    }
    if json {
        use crate::report::json::{Document, Statistics};
        let s = &o.summary;
        let mut doc = Document::new(
            "fuzz",
            &r.fuzz.target().given.display().to_string(),
            &s.campaign.strategies.join(","),
        );
        doc.result = if r.failing() == 0 { "pass" } else { "fail" };
        if let Some(d) = r.failures.first() {
            doc.verdict = Some(d.verdict.clone());
            doc.seed = Some(d.seed);
            doc.replay = d.replay.clone();
        }
        doc.failures = r.failures.clone();
        doc.races = r.race_docs()?;
        doc.statistics = Statistics {
            runs: s.stats.runs,
            failing: r.failing(),
            elapsed_seconds: o.session_secs,
            runs_per_second: o.session_runs as f64 / o.session_secs.max(1e-9),
            ..Statistics::default()
        };
        crate::report::json::emit(&doc);
    }
    let replays: Vec<super::show::Failure> = r
        .replays()
        .into_iter()
        .map(|w| super::show::Failure {
            replay: w.path,
            seed: Some(w.seed),
            reason: None,
        })
        .collect();
    super::show::report_failures(out, &replays, a.sarif.as_deref())?;
    Ok(super::campaign_exit(
        r.failing(),
        r.error_runs(),
        r.interrupted(),
    ))
}

/// The campaign's portfolio, short, and its builds when it has several:
/// `sites:3+stall,pos+stall over builds O1,O0`.
fn strategies_and_builds(members: &[String]) -> String {
    let mut strategies: Vec<String> = Vec::new();
    let mut builds: Vec<&str> = Vec::new();
    for m in members {
        let (strategy, build) = exec::split_member(m);
        let short = crate::sched::short_spec(strategy);
        if !strategies.contains(&short) {
            strategies.push(short);
        }
        if let Some(b) = build.filter(|b| !builds.contains(b)) {
            builds.push(b);
        }
    }
    let mut s = strategies.join(",");
    if !builds.is_empty() {
        s += &format!(" over builds {}", builds.join(","));
    }
    s
}

/// Prints what a campaign session found.
fn print_outcome(
    out: &mut dyn Write,
    r: &FuzzReport,
    list: bool,
    stats: bool,
    show_output: bool,
) -> std::io::Result<()> {
    let (o, dir, reports) = (&r.outcome, r.out.as_path(), &r.reports);
    let s = &o.summary;
    let total = s.stats.runs;
    // More runs counted than this session made: earlier sessions ran some
    // (a session may also make runs past its first failure that are not
    // counted).
    let resumed = o.state.stats.runs > o.session_runs;
    writeln!(
        out,
        "{} runs in {:.2}s ({:.0} runs/s, {} jobs), strategy {}: {} failing{}{}{}",
        o.session_runs,
        o.session_secs,
        o.session_runs as f64 / o.session_secs.max(1e-9),
        o.timing.jobs,
        strategies_and_builds(&s.campaign.strategies),
        s.stats.failing_runs,
        if resumed {
            format!(" ({total} runs in the campaign)")
        } else {
            String::new()
        },
        if o.timed_out {
            " (time budget reached)"
        } else {
            ""
        },
        match o.interrupted {
            Some(sig) => format!(
                " (stopped by {}; continue with --resume)",
                crate::interrupt::name(sig)
            ),
            None => String::new(),
        }
    )?;
    if o.abandoned > 0 {
        writeln!(
            out,
            "{} finished run(s) after seed {} are not counted; --resume runs them again",
            o.abandoned, o.state.frontier
        )?;
    }
    print_findings(out, s, &o.state.stats, list, stats, dir)?;
    for ((f, detailed), html) in o.failures.iter().zip(reports) {
        let text = detailed
            .as_ref()
            .map(|r| r.verdict.summary())
            .unwrap_or_else(|| f.summary.clone());
        match exec::split_member(&f.first_strategy).1 {
            Some(build) => writeln!(out, "seed {} ({build} build): {text}", f.first_seed)?,
            None => writeln!(out, "seed {}: {text}", f.first_seed)?,
        }
        if !f.replay.is_empty() {
            writeln!(
                out,
                "  replay: heddle replay {}",
                dir.join(&f.replay).display()
            )?;
            match (html, detailed) {
                (Some(h), _) => writeln!(out, "  report: {}", h.display()),
                (None, Some(r)) => writeln!(
                    out,
                    "  report: none (a run of {} steps is too long for the HTML report)",
                    r.steps
                ),
                (None, None) => Ok(()),
            }?;
        }
        if show_output {
            if let Some(r) = detailed {
                print_output(out, r)?;
            }
        }
    }
    if stats {
        print_timing(out, &o.timing)?;
    }
    writeln!(out, "summary: {}", dir.join(summary::FILE).display())?;
    Ok(())
}

/// Prints races, the failing seeds (with `list`) and statistics (with `stats`).
fn print_findings(
    out: &mut dyn Write,
    s: &Summary,
    a: &Aggregate,
    list: bool,
    stats: bool,
    dir: &std::path::Path,
) -> std::io::Result<()> {
    if !s.race.is_empty() {
        writeln!(out, "{} distinct data race(s):", s.race.len())?;
        for r in &s.race {
            writeln!(out, "  seed {}: {}", r.first_seed, r.summary)?;
            let replay = dir.join(&r.replay);
            if replay.exists() {
                writeln!(out, "    replay: heddle replay {}", replay.display())?;
                let html = replay.with_extension("html");
                if html.exists() {
                    writeln!(out, "    report: {}", html.display())?;
                }
            }
        }
    }
    if a.inconclusive_runs > 0 {
        writeln!(
            out,
            "{} run(s) inconclusive (neither passes nor failures):",
            a.inconclusive_runs
        )?;
        for r in a.inconclusive.values() {
            writeln!(
                out,
                "  seed {} ({} runs): {}",
                r.first_seed, r.runs, r.summary
            )?;
        }
    }
    if !s.error.is_empty() {
        writeln!(
            out,
            "{} run(s) failed inside heddle (an internal error, not a verdict on the target):",
            s.stats.error_runs
        )?;
        for e in &s.error {
            writeln!(
                out,
                "  seed {} ({} runs): {}",
                e.first_seed, e.runs, e.message
            )?;
        }
    }
    if list {
        // The smallest failing seeds of each signature, in seed order.
        let mut seeds: Vec<(u64, &str)> = Vec::new();
        for (sig, f) in &a.failures {
            seeds.extend(f.seeds.iter().map(|x| (*x, sig.as_str())));
            if f.runs > f.seeds.len() as u64 {
                writeln!(
                    out,
                    "{sig}: {} failing runs, the first {} listed (a session without --list-failures kept only those)",
                    f.runs,
                    f.seeds.len()
                )?;
            }
        }
        seeds.sort();
        for (seed, sig) in seeds {
            writeln!(out, "failing seed {seed}: {sig}")?;
        }
    }
    if stats {
        print_stats(out, s)?;
    }
    Ok(())
}

/// Prints the deterministic statistics of a summary.
pub fn print_stats(out: &mut dyn Write, s: &Summary) -> std::io::Result<()> {
    let st = &s.stats;
    writeln!(out, "statistics:")?;
    writeln!(
        out,
        "  runs {}  failing {}  distinct failures {}",
        st.runs, st.failing_runs, st.distinct_failures
    )?;
    writeln!(
        out,
        "  decisions/run {}  preemptions/run {}  switches/run {}  steps/run {}",
        st.decisions_per_run, st.preemptions_per_run, st.switches_per_run, st.steps_per_run
    )?;
    writeln!(out, "  distinct schedules {}", st.distinct_schedules)?;
    writeln!(
        out,
        "  sites hit {}/{} ({}/{} in user code)",
        st.sites_hit, st.sites, st.user_sites_hit, st.user_sites
    )?;
    if !st.never_hit.is_empty() {
        writeln!(out, "  user-code sites never hit:")?;
        for n in &st.never_hit {
            writeln!(out, "    {n}")?;
        }
    }
    for m in &s.strategy {
        writeln!(
            out,
            "  strategy {}: {} runs, {} failing, {} distinct schedules, found {}",
            m.spec,
            m.runs,
            m.failing_runs,
            m.distinct_schedules,
            if m.found.is_empty() {
                "nothing".to_string()
            } else {
                m.found.join(", ")
            }
        )?;
    }
    for f in &s.failure {
        let by: Vec<String> = f
            .by_strategy
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        writeln!(
            out,
            "  failure {}: {} runs, first seed {} ({}) after {} runs; by strategy {}",
            f.signature,
            f.runs,
            f.first_seed,
            f.first_strategy,
            f.runs_to_first,
            by.join(", ")
        )?;
    }
    Ok(())
}

/// Prints the timing part of a summary.
pub fn print_timing(out: &mut dyn Write, t: &Timing) -> std::io::Result<()> {
    writeln!(
        out,
        "  elapsed {:.2}s, {} runs/s, shards {}{}",
        t.elapsed_s,
        t.runs_per_s,
        t.shards.join(","),
        if t.complete { "" } else { " (incomplete)" }
    )?;
    for f in &t.first_failure {
        writeln!(out, "  time to first {}: {:.3}s", f.signature, f.seconds)?;
    }
    Ok(())
}

/// `heddle merge`.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Campaign directories (shards, or earlier merges).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Directory for the merged campaign.
    #[arg(long)]
    pub out: PathBuf,
    /// Print every failing seed with its verdict signature.
    #[arg(long)]
    pub list_failures: bool,
    /// Print campaign statistics.
    #[arg(long)]
    pub stats: bool,
}

/// Runs `heddle merge`.
pub fn merge_cmd(a: MergeArgs) -> Result<i32> {
    let mut stdout = std::io::stdout();
    let out: &mut dyn Write = &mut stdout;
    let m = campaign::merge::merge(&a.dirs, &a.out)?;
    let s = &m.summary;
    writeln!(
        out,
        "merged {} director{} (shards {}{}): {} runs, strategy {}: {} failing",
        a.dirs.len(),
        if a.dirs.len() == 1 { "y" } else { "ies" },
        m.timing.shards.join(","),
        if m.timing.complete {
            ""
        } else {
            ", incomplete"
        },
        s.stats.runs,
        s.campaign.strategies.join(","),
        s.stats.failing_runs
    )?;
    let c = &m.coverage;
    writeln!(
        out,
        "coverage: {} shard state(s) of {}, {} runs{}{}",
        c.states,
        c.count,
        c.runs,
        match c.seeds_not_run {
            Some(n) if n > 0 => format!(", {n} planned seeds not run"),
            _ => String::new(),
        },
        if c.duplicate_runs > 0 {
            format!(
                ", {} duplicate runs counted once (a shard given more than once)",
                c.duplicate_runs
            )
        } else {
            String::new()
        }
    )?;
    for h in &c.holes {
        writeln!(out, "  hole: {h}")?;
    }
    let stats = a.stats || super::global().verbose > 0;
    print_findings(out, s, &m.stats, a.list_failures, stats, &a.out)?;
    for f in &s.failure {
        writeln!(out, "seed {}: {}", f.first_seed, f.summary)?;
        if !f.replay.is_empty() {
            if m.missing_replays.contains(&f.replay) {
                writeln!(
                    out,
                    "  replay file {} is in none of the directories",
                    f.replay
                )?;
            } else {
                writeln!(
                    out,
                    "  replay: heddle replay {}",
                    a.out.join(&f.replay).display()
                )?;
            }
        }
    }
    if stats {
        print_timing(out, &m.timing)?;
    }
    writeln!(out, "summary: {}", a.out.join(summary::FILE).display())?;
    Ok(super::campaign_exit(
        s.stats.failing_runs,
        s.stats.error_runs,
        None,
    ))
}
