//! The campaign driver: runs the seeds of a [`SeedPlan`] on worker threads,
//! journals every finished run, writes a replay file per distinct failure and
//! the summary.
//!
//! A run that traps, hangs or makes the runtime fail is one record of the
//! campaign (verdict `trap`/`hang`, or kind `error`), never the end of it.

use super::feedback::Hub;
use super::journal::{Header, Identity, Journal, Line, RaceRec, Record, SiteName, SiteSet, Writer};
use super::summary::{self, FailureStats, Summary, Timing};
use super::{Portfolio, SeedPlan};
use crate::pool::Next;
use crate::reproduce;
use crate::runtime::{Program, RunConfig, RunResult};
use crate::sched::rff::{Corpus, Feedback};
use crate::target::Target;
use crate::{paths, trace};
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One campaign, ready to run.
pub struct Campaign<'a> {
    /// The target (for replay files).
    pub target: &'a Target,
    /// The compiled program.
    pub program: &'a Program,
    /// Run configuration; `seed` and `strategy` are set per run.
    pub base: RunConfig,
    /// The portfolio, calibrated.
    pub portfolio: Portfolio,
    /// Which seeds to run.
    pub plan: SeedPlan,
    /// Whether to collect every failure (else stop at the first).
    pub keep_going: bool,
}

/// How to run a campaign.
#[derive(Debug, Clone)]
pub struct Options {
    /// Worker threads.
    pub jobs: usize,
    /// Stop starting runs after this long (this session).
    pub time_budget: Option<Duration>,
    /// The campaign directory: journal, summary, replay files.
    pub out: PathBuf,
    /// Continue the campaign whose journal is in `out`.
    pub resume: bool,
    /// Progress on stderr: a redrawn line (`Tty`), a line every 10 s
    /// (`Lines`) or nothing.
    pub progress: Progress,
}

/// Progress reporting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// No progress output.
    Off,
    /// A line redrawn in place (interactive terminals).
    Tty,
    /// A plain line every 10 seconds (CI logs).
    Lines,
}

/// What a campaign session did.
pub struct Outcome {
    /// The journal after the session (every run of the campaign so far).
    pub journal: Journal,
    /// Runs made by this session.
    pub session_runs: u64,
    /// Wall-clock seconds of this session.
    pub session_secs: f64,
    /// The time budget ended the session before the plan was done.
    pub timed_out: bool,
    /// The signal (SIGINT, SIGTERM) that stopped the session before the
    /// plan was done; the campaign resumes with `--resume`.
    pub interrupted: Option<i32>,
    /// The summary's deterministic part.
    pub summary: Summary,
    /// The summary's timing part.
    pub timing: Timing,
    /// Each distinct failure with its diagnostic run (absent for `error`s).
    pub failures: Vec<(FailureStats, Option<RunResult>)>,
}

impl Campaign<'_> {
    /// The campaign's identity.
    pub fn identity(&self) -> Identity {
        Identity {
            target: self.target.given.display().to_string(),
            module_sha256: self.program.module_sha256.clone(),
            instrumentation: self.program.instrumentation.describe(),
            config: describe_config(&self.base),
            strategies: self.portfolio.members.clone(),
            seed_start: self.plan.seed_start,
            runs: self.plan.runs,
            keep_going: self.keep_going,
        }
    }

    fn header(&self) -> Header {
        Header {
            format: super::journal::FORMAT,
            identity: self.identity(),
            shards: vec![self.plan.shard.to_string()],
            sites: site_names(self.program),
        }
    }

    /// Runs the campaign (or continues it with `opts.resume`).
    pub fn run(&self, opts: &Options) -> Result<Outcome> {
        let inject = injected_errors()?;
        let path = Journal::path(&opts.out);
        let header = self.header();
        let (writer, previous) = if opts.resume {
            if !path.exists() {
                bail!(
                    "--resume: {} has no campaign journal ({})",
                    opts.out.display(),
                    super::journal::FILE
                );
            }
            let j = Journal::read(&path)?;
            if j.header.identity != header.identity {
                bail!(
                    "--resume: {} holds a different campaign ({})",
                    opts.out.display(),
                    identity_difference(&j.header.identity, &header.identity)
                );
            }
            if j.header.shards != header.shards {
                bail!(
                    "--resume: {} holds shard(s) {}, not {}",
                    opts.out.display(),
                    j.header.shards.join(","),
                    header.shards.join(",")
                );
            }
            (Writer::open(&path, j.valid_len)?, Some(j))
        } else {
            (Writer::create(&path, &header)?, None)
        };
        let prev_records = previous
            .as_ref()
            .map(|j| j.records.clone())
            .unwrap_or_default();
        let done: BTreeSet<u64> = prev_records.iter().map(|r| r.seed).collect();
        let seen_sets: Mutex<BTreeSet<u64>> = Mutex::new(
            previous
                .as_ref()
                .map(|j| j.site_sets.keys().copied().collect())
                .unwrap_or_default(),
        );
        // The campaign clock continues across sessions.
        let offset_ms = prev_records.iter().map(|r| r.ms).max().unwrap_or(0);
        let first_fail = AtomicU64::new(
            prev_records
                .iter()
                .filter(|r| r.failed())
                .map(|r| r.seed)
                .min()
                .unwrap_or(u64::MAX),
        );
        let planned = self
            .plan
            .runs
            .map(|r| (r / self.plan.shard.count as u64).max(1));
        let timed_out = AtomicBool::new(false);
        let stopped_by = std::sync::atomic::AtomicI32::new(0);
        let session_runs = AtomicU64::new(0);
        let nfail = AtomicU64::new(prev_records.iter().filter(|r| r.failed()).count() as u64);
        let records: Mutex<Vec<Record>> = Mutex::new(prev_records);
        let replays_written: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
        let error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
        let last_print = Mutex::new(Instant::now());
        let started = Instant::now();
        let deadline = opts.time_budget.map(|d| started + d);
        let jobs = opts.jobs.max(1);
        let id = &header.identity;
        // Learning strategies share a corpus, in generations of seeds.
        let hub = self
            .portfolio
            .members
            .iter()
            .any(|m| crate::sched::learns(m))
            .then(|| Hub::new(self.plan.seed_start));
        // The corpus each failing run of a learning strategy saw, to rerun
        // it for its replay file.
        let failing_corpora: Mutex<BTreeMap<u64, Arc<Corpus>>> = Mutex::new(BTreeMap::new());
        crate::pool::drain(jobs, self.plan.seed_start..self.plan.end(), |seed| {
            // Every seed taken is closed, on every path, so that runs of
            // later generations waiting for it go on.
            let mut closer = Closer {
                hub: hub.as_ref(),
                seed,
                feedback: None,
            };
            if let Some(sig) = crate::interrupt::requested() {
                stopped_by.store(sig, Ordering::Relaxed);
                return Next::Stop;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                timed_out.store(true, Ordering::Relaxed);
                return Next::Stop;
            }
            if !self.keep_going && seed > first_fail.load(Ordering::Relaxed) {
                return Next::Stop;
            }
            if !self.plan.shard.contains(seed) || done.contains(&seed) {
                return Next::Go;
            }
            let member = self.portfolio.member(seed);
            let strategy = self.portfolio.members[member].clone();
            let corpus = hub
                .as_ref()
                .filter(|_| crate::sched::learns(&strategy))
                .map(|h| h.corpus_for(seed));
            let cfg = RunConfig {
                seed,
                strategy,
                corpus,
                ..self.base.clone()
            };
            let mut result = run_guarded(self.program, &cfg, inject.contains(&seed));
            if cfg.corpus.is_some() {
                if let Ok(r) = &mut result {
                    closer.feedback = Some(std::mem::take(&mut r.feedback));
                }
            }
            if let Err(e) = &result {
                if e.downcast_ref::<crate::sched::StrategyFailed>().is_some() {
                    // The strategy, not the program, failed: every
                    // further run would too.
                    let mut slot = error.lock().unwrap_or_else(|e| e.into_inner());
                    if slot.is_none() {
                        *slot = Some(anyhow::anyhow!("{e}"));
                    }
                    return Next::Stop;
                }
            }
            let ms = offset_ms + started.elapsed().as_millis() as u64;
            let (record, set) = make_record(seed, member as u32, ms, &result);
            let failed = record.failed();
            let new_sig = failed
                && replays_written
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(record.signature.clone());
            // A run's site set is written before the first run that
            // names it: the check and the write happen under one lock.
            let appended = {
                let mut seen = seen_sets.lock().unwrap_or_else(|e| e.into_inner());
                let mut lines = Vec::with_capacity(2);
                if let Some(set) = set {
                    if !seen.contains(&set.id) {
                        lines.push(Line::Sites(set));
                    }
                }
                lines.push(Line::Run(record.clone()));
                let r = writer.append(&lines);
                if r.is_ok() {
                    for l in &lines {
                        if let Line::Sites(set) = l {
                            seen.insert(set.id);
                        }
                    }
                }
                r
            };
            if let Err(e) = appended {
                *error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                return Next::Stop;
            }
            records
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(record.clone());
            let n = session_runs.fetch_add(1, Ordering::Relaxed) + 1;
            if failed {
                first_fail.fetch_min(seed, Ordering::Relaxed);
                nfail.fetch_add(1, Ordering::Relaxed);
                if let Some(c) = &cfg.corpus {
                    failing_corpora
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(seed, c.clone());
                }
                // The first replay file of a signature is written at
                // once, so a campaign killed later still has it.
                if new_sig {
                    if let Ok(r) = &result {
                        let _ = self.write_replay(&opts.out, id, &cfg, r);
                    }
                }
            }
            if opts.progress != Progress::Off {
                self.progress(
                    opts,
                    &last_print,
                    started,
                    deadline,
                    done.len() as u64 + n,
                    planned,
                    nfail.load(Ordering::Relaxed),
                    n,
                );
            }
            Next::Go
        });
        if opts.progress == Progress::Tty {
            eprintln!();
        }
        if let Some(e) = error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
        writer.sync()?;
        drop(writer);
        let session_secs = started.elapsed().as_secs_f64();
        let journal = Journal::read(&path)?;
        let summary = Summary::of(&journal);
        let corpora = failing_corpora
            .into_inner()
            .unwrap_or_else(|e| e.into_inner());
        let failures = self.finish_replays(&opts.out, &journal, &summary, &corpora)?;
        let timing = Summary::timing(
            &journal,
            jobs as u64,
            Some(offset_ms as f64 / 1e3 + session_secs),
        );
        paths::write_atomic(
            &opts.out.join(summary::FILE),
            summary.file_text(&timing)?.as_bytes(),
        )?;
        Ok(Outcome {
            journal,
            session_runs: session_runs.into_inner(),
            session_secs,
            timed_out: timed_out.into_inner(),
            interrupted: Some(stopped_by.into_inner()).filter(|s| *s != 0),
            summary,
            timing,
            failures,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn progress(
        &self,
        opts: &Options,
        last: &Mutex<Instant>,
        started: Instant,
        deadline: Option<Instant>,
        total: u64,
        planned: Option<u64>,
        failing: u64,
        session: u64,
    ) {
        let every = match opts.progress {
            Progress::Tty => Duration::from_millis(200),
            _ => Duration::from_secs(10),
        };
        let Ok(mut last) = last.try_lock() else {
            return;
        };
        if last.elapsed() < every {
            return;
        }
        *last = Instant::now();
        let secs = started.elapsed().as_secs_f64().max(1e-3);
        let rate = session as f64 / secs;
        let mut eta: Option<f64> = planned.map(|p| p.saturating_sub(total) as f64 / rate.max(1e-9));
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now()).as_secs_f64();
            eta = Some(eta.map_or(left, |e| e.min(left)));
        }
        let of = planned.map(|p| format!("/{p}")).unwrap_or_default();
        let eta = eta
            .map(|e| format!(", ETA {}", human_secs(e)))
            .unwrap_or_default();
        let line = format!("{total}{of} runs, {rate:.0} runs/s, {failing} failing{eta}");
        let mut err = std::io::stderr().lock();
        let _ = match opts.progress {
            Progress::Tty => write!(err, "\r{line}    "),
            _ => writeln!(err, "heddle: {line}"),
        };
    }

    /// Writes the replay file of run `r` (re-running it with diagnostics on,
    /// which never changes the schedule). Returns the diagnostic run.
    fn write_replay(
        &self,
        out: &Path,
        id: &Identity,
        cfg: &RunConfig,
        r: &RunResult,
    ) -> Result<RunResult> {
        let detailed = self.program.run(&RunConfig {
            diagnostics: true,
            ..cfg.clone()
        })?;
        if detailed.decisions != r.decisions {
            return Err(crate::internal!(
                "seed {} did not repeat its schedule with diagnostics on",
                cfg.seed
            ));
        }
        let mut file = reproduce::record(self.target, self.program, cfg, cfg.seed, &detailed)?;
        let name = summary::replay_name(&id.target, detailed.verdict.kind(), cfg.seed);
        reproduce::save(&out.join(name), &mut file, &self.target.bytes)?;
        Ok(detailed)
    }

    /// Makes sure each distinct failure has the replay file of its first
    /// seed, and removes replay files of later seeds written on the way.
    fn finish_replays(
        &self,
        out: &Path,
        j: &Journal,
        s: &Summary,
        corpora: &BTreeMap<u64, Arc<Corpus>>,
    ) -> Result<Vec<(FailureStats, Option<RunResult>)>> {
        let id = &j.header.identity;
        let keep: BTreeSet<&str> = s.failure.iter().map(|f| f.replay.as_str()).collect();
        for r in j.records.iter().filter(|r| r.failed()) {
            let name = summary::replay_name(&id.target, &r.kind, r.seed);
            if !keep.contains(name.as_str()) {
                let _ = std::fs::remove_file(out.join(&name));
            }
        }
        let mut failures = Vec::new();
        for f in &s.failure {
            if f.replay.is_empty() {
                failures.push((f.clone(), None));
                continue;
            }
            let member = self.portfolio.member(f.first_seed);
            let strategy = self.portfolio.members[member].clone();
            if crate::sched::learns(&strategy) && !corpora.contains_key(&f.first_seed) {
                // A learning run of an earlier session: its corpus is gone,
                // but its replay file, written when it failed, stands.
                let path = out.join(&f.replay);
                let r = reproduce::replay(&path, &reproduce::Options::default())
                    .with_context(|| format!("seed {}: {}", f.first_seed, path.display()))?;
                if let Err(e) = &r.reproduced {
                    return Err(crate::internal!("seed {}: {e}", f.first_seed));
                }
                failures.push((f.clone(), Some(r.result)));
                continue;
            }
            let cfg = RunConfig {
                seed: f.first_seed,
                strategy,
                corpus: corpora.get(&f.first_seed).cloned(),
                ..self.base.clone()
            };
            let r = self
                .program
                .run(&cfg)
                .with_context(|| format!("seed {}", f.first_seed))?;
            let detailed = self.write_replay(out, id, &cfg, &r)?;
            failures.push((f.clone(), Some(detailed)));
        }
        Ok(failures)
    }
}

/// Closes its seed in the campaign's feedback hub when dropped.
struct Closer<'h> {
    hub: Option<&'h Hub>,
    seed: u64,
    feedback: Option<Feedback>,
}

impl Drop for Closer<'_> {
    fn drop(&mut self) {
        if let Some(h) = self.hub {
            h.close(self.seed, self.feedback.take());
        }
    }
}

/// The environment variable that names seeds whose runs fail inside heddle
/// on purpose (`HEDDLE_INJECT_ERROR=3,17`): how a CI pipeline, and heddle's
/// own tests, check the handling of internal errors.
pub const INJECT_ERROR_ENV: &str = "HEDDLE_INJECT_ERROR";

/// The seeds of [`INJECT_ERROR_ENV`].
fn injected_errors() -> Result<BTreeSet<u64>> {
    let Some(v) = std::env::var_os(INJECT_ERROR_ENV) else {
        return Ok(BTreeSet::new());
    };
    let v = v.to_string_lossy();
    v.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            s.trim()
                .parse::<u64>()
                .map_err(|_| anyhow::anyhow!("{INJECT_ERROR_ENV}: `{s}` is not a seed"))
        })
        .collect()
}

/// Runs once; a panic inside the run becomes an error, not the end of the
/// campaign. `inject` makes the run panic, as a fault in heddle would.
fn run_guarded(p: &Program, cfg: &RunConfig, inject: bool) -> Result<RunResult> {
    let run = || {
        if inject {
            std::panic::panic_any(format!("error injected by {INJECT_ERROR_ENV}"));
        }
        p.run(cfg)
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(r) => r,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            bail!("heddle panicked: {msg}")
        }
    }
}

/// The journal record of a run (and its site set).
fn make_record(
    seed: u64,
    strategy: u32,
    ms: u64,
    result: &Result<RunResult>,
) -> (Record, Option<SiteSet>) {
    match result {
        Ok(r) => {
            let set = SiteSet::from_bitset(&r.sites_hit);
            let pass = r.verdict.is_pass();
            (
                Record {
                    seed,
                    strategy,
                    kind: r.verdict.kind().into(),
                    signature: if pass {
                        String::new()
                    } else {
                        r.verdict.signature()
                    },
                    summary: if pass {
                        String::new()
                    } else {
                        r.verdict.summary()
                    },
                    decisions: r.decisions.len() as u64,
                    preemptions: r.preemptions,
                    steps: r.steps,
                    schedule: trace::schedule_hash(&r.decisions),
                    sites: set.id,
                    ms,
                    races: r
                        .races
                        .iter()
                        .map(|x| {
                            let (a, b) = x.key();
                            RaceRec {
                                key: format!("{a}|{b}"),
                                summary: x.summary(),
                            }
                        })
                        .collect(),
                },
                Some(set),
            )
        }
        Err(e) => {
            let msg = one_line(e);
            let set = SiteSet::from_bitset(&[]);
            (
                Record {
                    seed,
                    strategy,
                    kind: super::journal::ERROR_KIND.into(),
                    signature: format!("error: {msg}"),
                    summary: format!("the run failed: {msg}"),
                    decisions: 0,
                    preemptions: 0,
                    steps: 0,
                    schedule: trace::schedule_hash(&[]),
                    sites: set.id,
                    ms,
                    races: Vec::new(),
                },
                Some(set),
            )
        }
    }
}

fn one_line(e: &anyhow::Error) -> String {
    let parts: Vec<String> = e.chain().map(|c| c.to_string()).collect();
    parts.join(": ").replace('\n', " ")
}

/// `1h02m`, `3m05s`, `12s`.
fn human_secs(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// The sites of a program, as summaries name them.
pub fn site_names(p: &Program) -> Vec<SiteName> {
    p.sites
        .sites
        .iter()
        .map(|s| SiteName {
            name: format!(
                "{} {}",
                s.where_(),
                crate::instrument::dwarf::display_name(&s.func_name)
            ),
            user: s.user,
        })
        .collect()
}

/// The parts of a run configuration that are the same for every run of a
/// campaign, as one line.
pub fn describe_config(c: &RunConfig) -> String {
    let mut s = format!(
        "args={:?} max_steps={} max_time_ms={} budget={}..{} expect_exit={} races={}",
        c.args,
        c.max_steps,
        c.max_time_ns / 1_000_000,
        c.budget.0,
        c.budget.1,
        c.expected_exit,
        format!("{:?}", c.races).to_lowercase()
    );
    if !c.env.is_empty() {
        let env: Vec<String> = c.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        s.push_str(&format!(" env={env:?}"));
    }
    if !c.grants.is_empty() {
        let g: Vec<String> = c
            .grants
            .iter()
            .map(|g| format!("{}:{}", g.host.display(), g.guest))
            .collect();
        s.push_str(&format!(" dirs={g:?}"));
    }
    s
}

/// Says how two identities differ (for `--resume` and `merge` errors).
pub fn identity_difference(a: &Identity, b: &Identity) -> String {
    let mut d = Vec::new();
    if a.target != b.target {
        d.push(format!("target {} vs {}", a.target, b.target));
    }
    if a.module_sha256 != b.module_sha256 {
        d.push("a different module".to_string());
    }
    if a.instrumentation != b.instrumentation {
        d.push(format!(
            "instrumentation `{}` vs `{}`",
            a.instrumentation, b.instrumentation
        ));
    }
    if a.config != b.config {
        d.push(format!("configuration `{}` vs `{}`", a.config, b.config));
    }
    if a.strategies != b.strategies {
        d.push(format!(
            "strategies {} vs {}",
            a.strategies.join(","),
            b.strategies.join(",")
        ));
    }
    if a.seed_start != b.seed_start || a.runs != b.runs {
        d.push("a different seed range".to_string());
    }
    if a.keep_going != b.keep_going {
        d.push("--keep-going differs".to_string());
    }
    d.join("; ")
}
