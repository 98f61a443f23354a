//! `heddle fuzz` (many seeds in parallel) and `heddle replay`.

use super::run::{print_output, RunOpts, TargetOpts};
use super::{EXIT_BUG, EXIT_OK};
use crate::runtime::{Program, RunConfig, RunResult};
use crate::sched;
use crate::trace::replay::{ModuleRef, ReplayFile, RunSpec, ScheduleRecord, VerdictRecord, FORMAT};
use crate::verdict::RaceReport;
use crate::{paths, target};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct FuzzArgs {
    #[command(flatten)]
    pub target: TargetOpts,
    #[command(flatten)]
    pub run: RunOpts,
    /// Number of seeds to run.
    #[arg(long, default_value_t = 1000)]
    pub runs: u64,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    pub seed_start: u64,
    /// Keep going after the first failure.
    #[arg(long)]
    pub keep_going: bool,
    /// Directory for replay files.
    #[arg(long, default_value = "heddle-out")]
    pub out: PathBuf,
    /// Print every failing seed with its verdict signature.
    #[arg(long)]
    pub list_failures: bool,
    /// `json`: print one JSON document (docs/report-schema.json) on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::report::json::Format,
    /// Write (or merge into) a JUnit XML file: one test case for the target.
    #[arg(long, value_name = "OUT.xml")]
    pub junit: Option<PathBuf>,
}

/// One failing seed.
struct Failure {
    seed: u64,
    result: RunResult,
}

pub fn fuzz_cmd(a: FuzzArgs) -> Result<i32> {
    let json = a.format == crate::report::json::Format::Json;
    let guard = crate::report::json::TextToStderr::start(json);
    let (t, program) = a.target.load()?;
    let base = a.run.config(&a.target.args, 0)?;
    let base = program.calibrate(base)?;
    let jobs = a
        .jobs
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
        .max(1);
    let end = a.seed_start.saturating_add(a.runs);
    let next = AtomicU64::new(a.seed_start);
    let done = AtomicU64::new(0);
    // Smallest failing seed so far: workers skip seeds above it (unless
    // --keep-going), so the reported failure does not depend on --jobs.
    let first_fail = AtomicU64::new(u64::MAX);
    let failures: Mutex<Vec<Failure>> = Mutex::new(Vec::new());
    // Distinct data races (by pair of source lines) with the smallest seed
    // that showed each.
    let races: Mutex<BTreeMap<(String, String), (u64, RaceReport)>> = Mutex::new(BTreeMap::new());
    let error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let started = Instant::now();
    let tty = std::io::stderr().is_terminal();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= end || (!a.keep_going && seed > first_fail.load(Ordering::Relaxed)) {
                    break;
                }
                if error.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
                    break;
                }
                let cfg = RunConfig {
                    seed,
                    ..base.clone()
                };
                match program.run(&cfg) {
                    Ok(r) => {
                        if !r.races.is_empty() {
                            let mut m = races.lock().unwrap_or_else(|e| e.into_inner());
                            for race in &r.races {
                                let e = m.entry(race.key()).or_insert((seed, race.clone()));
                                if seed < e.0 {
                                    *e = (seed, race.clone());
                                }
                            }
                        }
                        if !r.verdict.is_pass() {
                            first_fail.fetch_min(seed, Ordering::Relaxed);
                            failures
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(Failure { seed, result: r });
                        }
                    }
                    Err(e) => {
                        *error.lock().unwrap_or_else(|e| e.into_inner()) =
                            Some(e.context(format!("seed {seed}")));
                        break;
                    }
                }
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if tty && (n.is_multiple_of(64) || n == a.runs) {
                    let rate = n as f64 / started.elapsed().as_secs_f64().max(1e-9);
                    let nfail = failures.lock().map(|f| f.len()).unwrap_or(0);
                    eprint!(
                        "\r{n}/{} runs  {rate:.0} runs/s  {nfail} failing   ",
                        a.runs
                    );
                } else if !tty && n.is_multiple_of(10_000) {
                    eprintln!("heddle: {n}/{} runs", a.runs);
                }
            });
        }
    });
    if tty {
        eprintln!();
    }
    if let Some(e) = error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let ran = done.load(Ordering::Relaxed);
    let mut failures = failures.into_inner().unwrap_or_else(|e| e.into_inner());
    failures.sort_by_key(|f| f.seed);
    println!(
        "{ran} runs in {elapsed:.2}s ({:.0} runs/s, {jobs} jobs), strategy {}: {} failing",
        ran as f64 / elapsed.max(1e-9),
        base.strategy,
        failures.len()
    );
    let races = races.into_inner().unwrap_or_else(|e| e.into_inner());
    if !races.is_empty() {
        println!("{} distinct data race(s):", races.len());
        for (seed, race) in races.values() {
            println!("  seed {seed}: {}", race.summary());
        }
    }
    if a.list_failures {
        for f in &failures {
            println!("failing seed {}: {}", f.seed, f.result.verdict.signature());
        }
    }
    let mut docs: Vec<crate::report::json::FailureDoc> = Vec::new();
    let finish = |docs: Vec<crate::report::json::FailureDoc>| -> Result<i32> {
        let nfail = failures.len() as u64;
        if let Some(path) = &a.junit {
            let name = t
                .given
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "target".into());
            let failure = docs.first().map(|d| {
                let mut text = format!(
                    "{} of {ran} runs failed (strategy {}); seed {}: {}",
                    nfail, base.strategy, d.seed, d.verdict.summary
                );
                if let Some(c) = &d.replay_command {
                    text.push_str(&format!("\nreplay: {c}"));
                }
                if let Some(r) = &d.report {
                    text.push_str(&format!("\nreport: {r}"));
                }
                (d.verdict.summary.clone(), text)
            });
            crate::report::junit::write(
                path,
                &crate::report::junit::Case {
                    name,
                    classname: "heddle.fuzz".into(),
                    time: elapsed,
                    failure,
                },
            )?;
        }
        if json {
            use crate::report::json::{Document, RaceDoc, Statistics};
            let mut doc = Document::new("fuzz", &t.given.display().to_string(), &base.strategy);
            doc.result = if nfail == 0 { "pass" } else { "fail" };
            if let Some(d) = docs.first() {
                doc.verdict = Some(d.verdict.clone());
                doc.seed = Some(d.seed);
                doc.replay = d.replay.clone();
            }
            doc.failures = docs;
            doc.races = races.values().map(|(s, r)| RaceDoc::of(*s, r)).collect();
            doc.statistics = Statistics {
                runs: ran,
                failing: nfail,
                elapsed_seconds: elapsed,
                runs_per_second: ran as f64 / elapsed.max(1e-9),
                ..Statistics::default()
            };
            crate::report::json::emit(guard, &doc);
        }
        Ok(if nfail == 0 { EXIT_OK } else { EXIT_BUG })
    };
    if failures.is_empty() {
        return finish(docs);
    }
    // One replay file per distinct signature (the smallest seed for each).
    let mut seen = std::collections::BTreeSet::new();
    for f in &failures {
        let sig = f.result.verdict.signature();
        if !seen.insert(sig.clone()) {
            continue;
        }
        // Run the seed again with stacks captured where threads block: the
        // schedule is the same (diagnostics never change decisions).
        let detailed = program.run(&RunConfig {
            seed: f.seed,
            diagnostics: true,
            ..base.clone()
        })?;
        if detailed.decisions != f.result.decisions {
            bail!(
                "internal error: seed {} did not repeat its schedule with diagnostics on",
                f.seed
            );
        }
        let f = &Failure {
            seed: f.seed,
            result: detailed,
        };
        let file = replay_file(&t, &program, &base, f.seed, &f.result);
        let name = format!(
            "{}-{}-seed{}.toml",
            t.given
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "target".into()),
            f.result.verdict.kind(),
            f.seed
        );
        let path = a.out.join(name);
        paths::write_atomic(&path, file.to_toml()?.as_bytes())?;
        // The HTML report records every event with its stack: skipped for
        // runs too long to draw (a hang at the step budget, typically).
        let html = (f.result.steps <= crate::report::MAX_REPORT_STEPS)
            .then(|| path.with_extension("html"));
        if let Some(html) = &html {
            crate::report::write_html(
                &program,
                &RunConfig {
                    seed: f.seed,
                    ..base.clone()
                },
                &f.result.decisions,
                &t.given.display().to_string(),
                format!("heddle replay {}", path.display()),
                html,
            )?;
        }
        println!("seed {}: {}", f.seed, f.result.verdict.summary());
        println!("  replay: heddle replay {}", path.display());
        match &html {
            Some(h) => println!("  report: {}", h.display()),
            None => println!(
                "  report: none (a run of {} steps is too long for the HTML report)",
                f.result.steps
            ),
        }
        docs.push(crate::report::json::FailureDoc {
            seed: f.seed,
            verdict: crate::report::json::VerdictDoc::of(&f.result.verdict),
            replay: Some(path.display().to_string()),
            report: html.as_ref().map(|h| h.display().to_string()),
            replay_command: Some(format!("heddle replay {}", path.display())),
        });
        if !a.keep_going {
            print_output(&f.result);
            break;
        }
    }
    finish(docs)
}

/// The replay file of a run.
pub fn replay_file(
    t: &target::Target,
    program: &Program,
    cfg: &RunConfig,
    seed: u64,
    r: &RunResult,
) -> ReplayFile {
    let mut f = ReplayFile {
        format: FORMAT,
        heddle: env!("CARGO_PKG_VERSION").into(),
        module: ModuleRef {
            sha256: program.module_sha256.clone(),
            source: t.given.display().to_string(),
            cflags: t.cflags.clone(),
        },
        run: RunSpec {
            instrumentation: program.instrumentation.describe(),
            strategy: r.strategy.clone(),
            seed,
            args: cfg.args.clone(),
            env: cfg.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            max_steps: cfg.max_steps,
            max_time_ms: cfg.max_time_ns / 1_000_000,
            budget: [cfg.budget.0, cfg.budget.1],
            expected_exit: cfg.expected_exit,
            races: cfg.races,
        },
        verdict: VerdictRecord {
            kind: r.verdict.kind().into(),
            signature: r.verdict.signature(),
            summary: r.verdict.summary(),
            output_sha256: r.output_hash(),
        },
        schedule: ScheduleRecord {
            count: 0,
            decisions: String::new(),
        },
    };
    f.set_decisions(&r.decisions);
    f
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The replay file.
    pub file: PathBuf,
    /// The module or source to replay on (default: the one the file names).
    #[arg(long)]
    pub target: Option<PathBuf>,
    /// Print the program's output.
    #[arg(long)]
    pub show_output: bool,
    /// `json`: print one JSON document (docs/report-schema.json) on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::report::json::Format,
}

/// The run a replay file describes, ready to execute.
pub struct Replay {
    pub file: ReplayFile,
    pub target: target::Target,
    pub program: Program,
    pub config: RunConfig,
}

/// Loads a replay file and its target, checking that the module is the one
/// the file was recorded on.
pub fn load_replay(path: &Path, target_override: Option<&Path>) -> Result<Replay> {
    let file = ReplayFile::load(path)?;
    let target_path = match target_override {
        Some(p) => p.to_path_buf(),
        None => {
            let p = PathBuf::from(&file.module.source);
            if file.module.source.is_empty() || !p.exists() {
                bail!(
                    "the replay's target `{}` is not here: pass it with --target",
                    file.module.source
                );
            }
            p
        }
    };
    let t = target::load(&target_path, &file.module.cflags)?;
    let sha = paths::sha256_hex(&t.bytes);
    if sha != file.module.sha256 {
        bail!(
            "module mismatch: {} has SHA-256 {}, but the replay was recorded on {} (rebuild the same source with the same toolchain, or pass the recorded module with --target)",
            target_path.display(),
            &sha[..16],
            &file.module.sha256[..16]
        );
    }
    let icfg = parse_instrumentation(&file.run.instrumentation)?;
    let program = Program::new(&t.bytes, &icfg)?;
    let config = RunConfig {
        args: file.run.args.clone(),
        env: file.env_pairs()?,
        seed: file.run.seed,
        strategy: file.run.strategy.clone(),
        max_steps: file.run.max_steps,
        max_time_ns: file.run.max_time_ms.saturating_mul(1_000_000),
        budget: (file.run.budget[0], file.run.budget[1]),
        expected_exit: file.run.expected_exit,
        races: file.run.races,
        forced: file.decisions()?,
        strict: true,
        diagnostics: true,
        ..RunConfig::default()
    };
    sched::parse(&config.strategy, 1).context("replay file names an unknown strategy")?;
    Ok(Replay {
        file,
        target: t,
        program,
        config,
    })
}

/// Parses [`crate::instrument::Config::describe`] output.
pub fn parse_instrumentation(text: &str) -> Result<crate::instrument::Config> {
    let mut cfg = crate::instrument::Config::default();
    for part in text.split_whitespace() {
        let (k, v) = part
            .split_once('=')
            .with_context(|| format!("bad instrumentation setting `{part}`"))?;
        let list = || v.split(',').map(String::from).collect::<Vec<_>>();
        match k {
            "granularity" => cfg.granularity = v.parse()?,
            "include-funcs" => cfg.include_funcs = list(),
            "exclude-funcs" => cfg.exclude_funcs = list(),
            "include-files" => cfg.include_files = list(),
            "exclude-files" => cfg.exclude_files = list(),
            "memcheck" => {
                cfg.memcheck = Some(match v {
                    "on" => true,
                    "off" => false,
                    _ => bail!("bad instrumentation setting `{part}`"),
                })
            }
            _ => bail!("unknown instrumentation setting `{k}`"),
        }
    }
    Ok(cfg)
}

pub fn replay_cmd(a: ReplayArgs) -> Result<i32> {
    let json = a.format == crate::report::json::Format::Json;
    let guard = crate::report::json::TextToStderr::start(json);
    let rp = load_replay(&a.file, a.target.as_deref())?;
    let r = rp.program.run(&rp.config)?;
    if let Some(d) = &r.divergence {
        let site = |s: u32| {
            rp.program
                .sites
                .site(s)
                .map(|x| format!("site {s} ({})", x.where_()))
                .unwrap_or_else(|| format!("site {s}"))
        };
        bail!(
            "replay diverged at decision {}: expected thread {} at {}, but {}",
            d.index,
            d.expected.tid(),
            site(d.expected.site()),
            d.actual
        );
    }
    let same_verdict = r.verdict.signature() == rp.file.verdict.signature;
    let same_output = r.output_hash() == rp.file.verdict.output_sha256;
    println!("verdict: {}", r.verdict.summary());
    if a.show_output || !r.verdict.is_pass() {
        print_output(&r);
    }
    if !same_verdict {
        bail!(
            "replay did not reproduce the recorded verdict: recorded `{}`, got `{}`",
            rp.file.verdict.signature,
            r.verdict.signature()
        );
    }
    if !same_output {
        bail!("replay reproduced the verdict but not the recorded output");
    }
    println!(
        "replay reproduced the recorded run ({} decisions, same verdict and output)",
        r.decisions.len()
    );
    if json {
        use crate::report::json::{Document, RaceDoc, Statistics, VerdictDoc};
        let mut doc = Document::new("replay", &rp.file.module.source, &rp.file.run.strategy);
        doc.result = if r.verdict.is_pass() { "pass" } else { "fail" };
        doc.verdict = Some(VerdictDoc::of(&r.verdict));
        doc.seed = Some(rp.file.run.seed);
        doc.replay = Some(a.file.display().to_string());
        doc.races = r
            .races
            .iter()
            .map(|x| RaceDoc::of(rp.file.run.seed, x))
            .collect();
        doc.statistics = Statistics {
            runs: 1,
            failing: u64::from(!r.verdict.is_pass()),
            steps: Some(r.steps),
            decisions: Some(r.decisions.len() as u64),
            preemptions: Some(r.preemptions),
            ..Statistics::default()
        };
        crate::report::json::emit(guard, &doc);
    }
    Ok(if r.verdict.is_pass() {
        EXIT_OK
    } else {
        EXIT_BUG
    })
}
