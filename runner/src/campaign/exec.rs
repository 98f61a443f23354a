//! The campaign driver: runs the seeds of a [`SeedPlan`] on worker threads,
//! folds every finished run into the shard's [`ShardState`] in seed order
//! (and into the per-run journal when asked), checkpoints the state, writes
//! a replay file per distinct failure and the summary. Memory and disk stay
//! flat however many runs a campaign makes.
//!
//! A run that traps, hangs or makes the runtime fail is one record of the
//! campaign (verdict `trap`/`hang`, or kind `error`), never the end of it.

use super::feedback::Hub;
use super::journal::{Header, Identity, Journal, RaceRec, Record, SiteName, SiteSet, Writer};
use super::state::{Coverage, ShardState};
use super::summary::{self, FailureStats, Source, Summary, Timing};
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

/// One build of a campaign's target: the module its seeds run, and the
/// portfolio calibrated on it.
pub struct Build<'a> {
    /// How summaries name the build (`O0`); empty when the campaign has
    /// only one.
    pub label: String,
    /// The target (for replay files).
    pub target: &'a Target,
    /// The compiled program.
    pub program: &'a Program,
    /// The portfolio, calibrated on this build.
    pub portfolio: Portfolio,
}

/// One campaign, ready to run.
///
/// A campaign runs one or several builds of a target (`heddle fuzz --opt
/// 0,1`), every build with the same portfolio spec. Seed `s` runs *member*
/// `s mod (builds × strategies)` of the campaign: build `member /
/// strategies`, strategy `member mod strategies` — so the builds alternate
/// in blocks of one seed per strategy, and a campaign of one build assigns
/// seeds exactly as a portfolio does.
pub struct Campaign<'a> {
    /// The builds, at least one; all portfolios have the same length.
    pub builds: Vec<Build<'a>>,
    /// Run configuration; `seed` and `strategy` are set per run.
    pub base: RunConfig,
    /// Which seeds to run.
    pub plan: SeedPlan,
    /// Whether to collect every failure (else stop at the first).
    pub keep_going: bool,
}

/// A campaign member's name split into its strategy and, in a campaign of
/// several builds, the build's label (`pos+stall@O0`).
pub fn split_member(name: &str) -> (&str, Option<&str>) {
    match name.rsplit_once('@') {
        Some((strategy, label)) => (strategy, Some(label)),
        None => (name, None),
    }
}

/// What runs one seed of a campaign.
pub struct Assigned<'c, 'a> {
    /// The campaign member: the index of the strategy across builds.
    pub member: usize,
    /// The build the seed runs.
    pub build: &'c Build<'a>,
    /// The strategy it runs under (calibrated).
    pub strategy: String,
}

/// How to run a campaign.
#[derive(Debug, Clone)]
pub struct Options {
    /// Worker threads.
    pub jobs: usize,
    /// Stop after this long (this session): no run starts after it, and
    /// runs in flight then are given up (not counted).
    pub time_budget: Option<Duration>,
    /// When the command started, if before the campaign: the time budget
    /// counts from there (building and calibrating spend it too).
    pub started: Option<Instant>,
    /// The campaign directory: state, summary, replay files.
    pub out: PathBuf,
    /// Continue the campaign whose state is in `out`.
    pub resume: bool,
    /// Keep the per-run journal (`journal.jsonl.gz`).
    pub journal: bool,
    /// Keep every failing seed in the state (else the first
    /// [`super::state::SEEDS_KEPT`] of each failure).
    pub all_failing_seeds: bool,
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
    /// The shard's state after the session (every counted run so far).
    pub state: ShardState,
    /// Runs made by this session.
    pub session_runs: u64,
    /// Wall-clock seconds of this session.
    pub session_secs: f64,
    /// The time budget ended the session before the plan was done.
    pub timed_out: bool,
    /// The signal (SIGINT, SIGTERM) that stopped the session before the
    /// plan was done; the campaign resumes with `--resume`.
    pub interrupted: Option<i32>,
    /// Runs that finished after a seed the session stopped before running:
    /// not counted, and run again by `--resume`.
    pub abandoned: u64,
    /// The summary's deterministic part.
    pub summary: Summary,
    /// The summary's timing part.
    pub timing: Timing,
    /// Each distinct failure with its diagnostic run (absent for `error`s).
    pub failures: Vec<(FailureStats, Option<RunResult>)>,
}

/// How often the state is written while a campaign runs: a process killed
/// with SIGKILL loses at most the runs of the last interval (and those in
/// flight), which `--resume` runs again.
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Finished runs parked above the frontier before a worker that finishes
/// another one waits (a seed that takes long holds the frontier back; this
/// bounds the memory it costs).
const MAX_PENDING: usize = 1 << 16;

/// Finished runs folded into the shard's state in seed order.
struct Fold {
    state: ShardState,
    /// Finished runs above the frontier, waiting for the runs below them.
    pending: BTreeMap<u64, (Record, Vec<u64>)>,
    journal: Option<Writer>,
    last_checkpoint: Instant,
}

impl Fold {
    /// Adds a finished run; counts every run it makes contiguous.
    fn add(&mut self, record: Record, hit: Vec<u64>) -> Result<()> {
        if self.state.closed() || record.seed < self.state.frontier {
            return Ok(());
        }
        self.pending.insert(record.seed, (record, hit));
        while let Some(e) = self.pending.first_entry() {
            if *e.key() != self.state.frontier {
                break;
            }
            let (r, hit) = e.remove();
            self.state.stats.add(&r, &hit);
            if let Some(j) = &mut self.journal {
                j.append(&r, &hit)?;
            }
            if self.state.closed() {
                // Nothing after the first failure counts.
                self.state.frontier = r.seed + 1;
                self.pending.clear();
                break;
            }
            self.state.frontier = self.state.next_seed(r.seed + 1);
        }
        Ok(())
    }

    /// Writes the state (and what the journal holds).
    fn checkpoint(&mut self, dir: &Path, elapsed_ms: u64, jobs: u64) -> Result<()> {
        if let Some(j) = &mut self.journal {
            self.state.journal_bytes = Some(j.flush()?);
        }
        self.state.elapsed_ms = elapsed_ms;
        self.state.jobs = jobs;
        self.state.write(dir)?;
        self.last_checkpoint = Instant::now();
        Ok(())
    }
}

impl<'a> Campaign<'a> {
    /// A campaign of one build.
    pub fn single(
        target: &'a Target,
        program: &'a Program,
        base: RunConfig,
        portfolio: Portfolio,
        plan: SeedPlan,
        keep_going: bool,
    ) -> Campaign<'a> {
        Campaign {
            builds: vec![Build {
                label: String::new(),
                target,
                program,
                portfolio,
            }],
            base,
            plan,
            keep_going,
        }
    }

    /// The first build: what the campaign is named after.
    pub fn first(&self) -> &Build<'a> {
        &self.builds[0]
    }

    /// Strategies per build.
    fn strategies(&self) -> usize {
        self.first().portfolio.members.len().max(1)
    }

    /// The build and strategy that run `seed`.
    pub fn assign(&self, seed: u64) -> Assigned<'_, 'a> {
        let per = self.strategies();
        let member = (seed % (per * self.builds.len()) as u64) as usize;
        let build = &self.builds[member / per];
        Assigned {
            member,
            build,
            strategy: build.portfolio.members[member % per].clone(),
        }
    }

    /// Where each build's sites start in the campaign's site list.
    fn site_bases(&self) -> Vec<usize> {
        let mut bases = Vec::new();
        let mut n = 0;
        for b in &self.builds {
            bases.push(n);
            n += b.program.sites.sites.len();
        }
        bases
    }

    /// The campaign's sites: each build's, in build order, named with the
    /// build's label when there are several.
    fn site_names(&self) -> Vec<SiteName> {
        let several = self.builds.len() > 1;
        self.builds
            .iter()
            .flat_map(|b| {
                site_names(b.program).into_iter().map(move |mut s| {
                    if several {
                        s.name = format!("[{}] {}", b.label, s.name);
                    }
                    s
                })
            })
            .collect()
    }

    /// The campaign's identity.
    pub fn identity(&self) -> Identity {
        let several = self.builds.len() > 1;
        let join = |f: &dyn Fn(&Build) -> String| -> String {
            let v: Vec<String> = self.builds.iter().map(f).collect();
            v.join(",")
        };
        Identity {
            target: self.first().target.given.display().to_string(),
            module_sha256: join(&|b| b.program.module_sha256.clone()),
            instrumentation: self.first().program.instrumentation.describe(),
            config: describe_config(&self.base),
            strategies: self
                .builds
                .iter()
                .flat_map(|b| {
                    b.portfolio.members.iter().map(move |m| {
                        if several {
                            format!("{m}@{}", b.label)
                        } else {
                            m.clone()
                        }
                    })
                })
                .collect(),
            seed_start: self.plan.seed_start,
            runs: self.plan.runs,
            keep_going: self.keep_going,
        }
    }

    /// The state to start from: a new one, or the one in `opts.out` with
    /// `opts.resume` (whose planned runs may be changed by the command).
    fn start_state(&self, opts: &Options) -> Result<ShardState> {
        let identity = self.identity();
        let shard = self.plan.shard;
        let path = ShardState::path(&opts.out, shard);
        if !opts.resume {
            // A new campaign replaces whatever campaign the directory held.
            for p in ShardState::list(&opts.out)? {
                std::fs::remove_file(&p)
                    .with_context(|| format!("cannot remove {}", p.display()))?;
            }
            let _ = std::fs::remove_file(Journal::path(&opts.out));
            return Ok(ShardState::new(identity, shard, self.site_names()));
        }
        if !path.exists() {
            let others = if opts.out.is_dir() {
                ShardState::list(&opts.out)?
            } else {
                Vec::new()
            };
            if !others.is_empty() {
                let names: Vec<String> = others
                    .iter()
                    .filter_map(|p| ShardState::read(p).ok().map(|s| s.shard.to_string()))
                    .collect();
                bail!(
                    "--resume: {} holds shard(s) {}, not {shard}: give the same --shard, or another --out for this one",
                    opts.out.display(),
                    names.join(",")
                );
            }
            if opts.out.join("journal.jsonl").exists() {
                bail!(
                    "--resume: {} was written by an older heddle (journal.jsonl, no campaign state); run the campaign again without --resume",
                    opts.out.display()
                );
            }
            bail!(
                "--resume: {} has no campaign state ({}): run without --resume to start the campaign there",
                opts.out.display(),
                path.file_name().unwrap_or_default().to_string_lossy()
            );
        }
        let mut s = ShardState::read(&path)?;
        let mut was = s.identity.clone();
        // A resumed campaign may be given more (or fewer) runs.
        was.runs = identity.runs;
        if was != identity {
            bail!(
                "--resume: {} holds a different campaign ({}): give the same target and options, or another --out",
                opts.out.display(),
                identity_difference(&s.identity, &identity)
            );
        }
        s.identity = identity;
        s.frontier = s.next_seed(s.frontier);
        Ok(s)
    }

    /// Runs the campaign (or continues it with `opts.resume`).
    pub fn run(&self, opts: &Options) -> Result<Outcome> {
        let inject = injected_errors()?;
        std::fs::create_dir_all(&opts.out)
            .with_context(|| format!("cannot create {}", opts.out.display()))?;
        let mut state = self.start_state(opts)?;
        if opts.all_failing_seeds {
            state.stats.keep_seeds = u64::MAX;
        }
        let journal_path = Journal::path(&opts.out);
        let journal = match (opts.journal, state.journal_bytes) {
            (true, Some(len)) if journal_path.exists() => Some(Writer::open(&journal_path, len)?),
            (true, _) => Some(Writer::create(
                &journal_path,
                &Header {
                    format: super::journal::FORMAT,
                    identity: state.identity.clone(),
                    shards: vec![state.shard.to_string()],
                    sites: state.sites.clone(),
                },
            )?),
            (false, _) => None,
        };
        if journal.is_none() {
            state.journal_bytes = None;
        }
        let offset_ms = state.elapsed_ms;
        let runs_before = state.stats.runs;
        let first_fail = AtomicU64::new(if state.closed() {
            state.frontier.saturating_sub(1)
        } else {
            u64::MAX
        });
        let nfail = AtomicU64::new(state.stats.failing_runs);
        // Signatures whose first replay file is already written.
        let replays_written: Mutex<BTreeSet<String>> =
            Mutex::new(state.stats.failures.keys().cloned().collect());
        let start_seed = state.frontier;
        let fold = Mutex::new(Fold {
            state,
            pending: BTreeMap::new(),
            journal,
            last_checkpoint: Instant::now(),
        });
        let planned = self
            .plan
            .runs
            .map(|r| (r / self.plan.shard.count as u64).max(1));
        let timed_out = AtomicBool::new(false);
        let stopped_by = std::sync::atomic::AtomicI32::new(0);
        let session_runs = AtomicU64::new(0);
        let error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
        let last_print = Mutex::new(Instant::now());
        let started = Instant::now();
        let deadline = opts
            .time_budget
            .map(|d| opts.started.unwrap_or(started) + d);
        let jobs = opts.jobs.max(1);
        let id = fold
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .state
            .identity
            .clone();
        // Learning strategies share a corpus, in generations of seeds; every
        // seed from the first is taken (those already counted are skipped)
        // so that the generations line up.
        // One corpus per build: feedback names a module's sites.
        let hubs: Vec<Option<Hub>> = self
            .builds
            .iter()
            .map(|b| {
                b.portfolio
                    .members
                    .iter()
                    .any(|m| crate::sched::learns(m))
                    .then(|| Hub::new(self.plan.seed_start))
            })
            .collect();
        let site_bases = self.site_bases();
        let first_taken = if hubs.iter().any(Option::is_some) {
            self.plan.seed_start
        } else {
            start_seed
        };
        // The corpus the first failing run of each signature saw (learning
        // strategies), to rerun it for its replay file.
        // The diagnostic run of each replay file written on the way, by
        // signature, with its seed: the end of the campaign need not run
        // it again.
        let written: Mutex<BTreeMap<String, (u64, RunResult)>> = Mutex::new(BTreeMap::new());
        let failing_corpora: Mutex<BTreeMap<String, (u64, Arc<Corpus>)>> =
            Mutex::new(BTreeMap::new());
        let fail_with = |e: anyhow::Error| {
            let mut slot = error.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = Some(e);
            }
            Next::Stop
        };
        crate::pool::drain(jobs, first_taken..self.plan.end(), |seed| {
            // Every seed taken is closed, on every path, so that runs of
            // later generations waiting for it go on.
            let mut closer = Closer {
                hubs: &hubs,
                build: 0,
                seed,
                feedback: None,
            };
            if seed < start_seed || !self.plan.shard.contains(seed) {
                return Next::Go;
            }
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
            let Assigned {
                member,
                build,
                strategy,
            } = self.assign(seed);
            let b = member / self.strategies();
            closer.build = b;
            let corpus = hubs[b]
                .as_ref()
                .filter(|_| crate::sched::learns(&strategy))
                .map(|h| h.corpus_for(seed));
            let cfg = RunConfig {
                seed,
                strategy,
                corpus,
                deadline,
                keep_decisions: self
                    .base
                    .keep_decisions
                    .min(crate::runtime::CAMPAIGN_KEPT_DECISIONS),
                ..self.base.clone()
            };
            let mut result = run_guarded(build.program, &cfg, inject.contains(&seed));
            if let Err(e) = &result {
                if crate::runtime::cancelled(e) {
                    // Given up unfinished: not counted, the seed stays
                    // for a resumed campaign.
                    match crate::interrupt::requested() {
                        Some(sig) => stopped_by.store(sig, Ordering::Relaxed),
                        None => timed_out.store(true, Ordering::Relaxed),
                    }
                    return Next::Stop;
                }
            }
            let cfg = RunConfig {
                deadline: None,
                ..cfg
            };
            if cfg.corpus.is_some() {
                if let Ok(r) = &mut result {
                    closer.feedback = Some(std::mem::take(&mut r.feedback));
                }
            }
            if let Err(e) = &result {
                if e.downcast_ref::<crate::sched::StrategyFailed>().is_some() {
                    // The strategy, not the program, failed: every
                    // further run would too.
                    return fail_with(anyhow::anyhow!("{e}"));
                }
            }
            let ms = offset_ms + started.elapsed().as_millis() as u64;
            let (record, hit) = make_record(seed, member as u32, site_bases[b], ms, &mut result);
            let failed = record.failed();
            // A program that needs what the target lacks stops its
            // campaign as a failure does: later seeds would mostly tell the
            // same.
            if record.kind == "unsupported" {
                first_fail.fetch_min(seed, Ordering::Relaxed);
            }
            if failed {
                first_fail.fetch_min(seed, Ordering::Relaxed);
                nfail.fetch_add(1, Ordering::Relaxed);
                if let Some(c) = &cfg.corpus {
                    let mut m = failing_corpora.lock().unwrap_or_else(|e| e.into_inner());
                    let e = m
                        .entry(record.signature.clone())
                        .or_insert_with(|| (seed, c.clone()));
                    if seed < e.0 {
                        *e = (seed, c.clone());
                    }
                }
                // The first replay file of a signature is written at
                // once, so a campaign killed later still has it.
                let new_sig = replays_written
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(record.signature.clone());
                if new_sig {
                    if let Ok(r) = &result {
                        if let Ok(d) = self.write_replay(build, &opts.out, &id, &cfg, r, deadline) {
                            written
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .insert(record.signature.clone(), (seed, d));
                        }
                    }
                }
            }
            let backlog = {
                let mut f = fold.lock().unwrap_or_else(|e| e.into_inner());
                if let Err(e) = f.add(record, hit) {
                    return fail_with(e);
                }
                if f.last_checkpoint.elapsed() >= CHECKPOINT_EVERY {
                    let ms = offset_ms + started.elapsed().as_millis() as u64;
                    if let Err(e) = f.checkpoint(&opts.out, ms, jobs as u64) {
                        return fail_with(e);
                    }
                }
                f.pending.len()
            };
            if backlog >= MAX_PENDING {
                // A slow seed holds the frontier back: wait for it rather
                // than park runs without bound. The seed is closed first,
                // so that no run waiting for its generation waits for us.
                drop(closer);
                while fold.lock().unwrap_or_else(|e| e.into_inner()).pending.len() >= MAX_PENDING
                    && crate::interrupt::requested().is_none()
                    && deadline.is_none_or(|d| Instant::now() < d)
                    && error.lock().unwrap_or_else(|e| e.into_inner()).is_none()
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            let n = session_runs.fetch_add(1, Ordering::Relaxed) + 1;
            if opts.progress != Progress::Off {
                self.progress(
                    opts,
                    &last_print,
                    started,
                    deadline,
                    runs_before + n,
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
        let mut fold = fold.into_inner().unwrap_or_else(|e| e.into_inner());
        let session_secs = started.elapsed().as_secs_f64();
        // Whatever happened, what is counted is saved.
        let saved = fold.checkpoint(
            &opts.out,
            offset_ms + (session_secs * 1e3) as u64,
            jobs as u64,
        );
        if let Some(e) = error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
        saved?;
        drop(fold.journal.take());
        let abandoned = fold.pending.len() as u64;
        let state = fold.state;
        let mut coverage = Coverage::new(state.identity.seed_start, state.shard.count);
        coverage.add(state.shard.index, state.frontier);
        let summary = Summary::of(&Source {
            identity: &state.identity,
            sites: &state.sites,
            stats: &state.stats,
            coverage: &coverage,
        });
        let corpora = failing_corpora
            .into_inner()
            .unwrap_or_else(|e| e.into_inner());
        let written = written.into_inner().unwrap_or_else(|e| e.into_inner());
        let failures =
            self.finish_replays(&opts.out, &state, &summary, &corpora, written, deadline)?;
        let timing = Summary::timing(
            &state.stats,
            vec![state.shard.to_string()],
            state.shard.count == 1 && state.finished(),
            jobs as u64,
            state.elapsed_ms,
        );
        paths::write_atomic(
            &opts.out.join(summary::FILE),
            summary.file_text(&timing)?.as_bytes(),
        )?;
        Ok(Outcome {
            state,
            session_runs: session_runs.into_inner(),
            session_secs,
            timed_out: timed_out.into_inner(),
            interrupted: Some(stopped_by.into_inner()).filter(|s| *s != 0),
            abandoned,
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

    /// Writes the replay file of run `r`, then again from the same run
    /// with diagnostics on (which never changes the schedule, and gives the
    /// richer summary) unless `deadline` passes first: a replay reproduces
    /// a run's signature and output, which both runs share. Returns the
    /// diagnostic run, or `r` when it was given up.
    fn write_replay(
        &self,
        build: &Build,
        out: &Path,
        id: &Identity,
        cfg: &RunConfig,
        r: &RunResult,
        deadline: Option<Instant>,
    ) -> Result<RunResult> {
        self.write_replay_as(build, out, id, cfg, r, None, deadline)
    }

    /// [`Campaign::write_replay`], named after `kind` rather than the
    /// verdict's kind when given.
    #[allow(clippy::too_many_arguments)]
    fn write_replay_as(
        &self,
        build: &Build,
        out: &Path,
        id: &Identity,
        cfg: &RunConfig,
        r: &RunResult,
        kind: Option<&str>,
        deadline: Option<Instant>,
    ) -> Result<RunResult> {
        let kind = kind.unwrap_or(r.verdict.kind());
        let path = out.join(summary::replay_name(&id.target, kind, cfg.seed));
        // A run that kept its schedule has its replay file at once (a
        // cancelled rerun leaves it); one too long to keep it, from the
        // rerun only.
        if r.decisions_complete() {
            let mut file = reproduce::record(build.target, build.program, cfg, cfg.seed, r)?;
            reproduce::save(&path, &mut file, &build.target.bytes)?;
        }
        let detailed = match build.program.run(&RunConfig {
            diagnostics: true,
            deadline,
            keep_decisions: u64::MAX,
            ..cfg.clone()
        }) {
            Err(e) if crate::runtime::cancelled(&e) => return Ok(r.clone()),
            d => d?,
        };
        if (detailed.decision_count, detailed.schedule) != (r.decision_count, r.schedule) {
            return Err(crate::internal!(
                "seed {} did not repeat its schedule with diagnostics on",
                cfg.seed
            ));
        }
        let mut file = reproduce::record(build.target, build.program, cfg, cfg.seed, &detailed)?;
        reproduce::save(&path, &mut file, &build.target.bytes)?;
        Ok(detailed)
    }

    /// Makes sure each distinct failure has the replay file of its first
    /// seed, and removes the other replay files written on the way (but
    /// while the campaign is not finished, a replay file of a seed past the
    /// frontier stays: `--resume` counts its run).
    fn finish_replays(
        &self,
        out: &Path,
        state: &ShardState,
        s: &Summary,
        corpora: &BTreeMap<String, (u64, Arc<Corpus>)>,
        mut written: BTreeMap<String, (u64, RunResult)>,
        deadline: Option<Instant>,
    ) -> Result<Vec<(FailureStats, Option<RunResult>)>> {
        let id = &state.identity;
        let keep: BTreeSet<&str> = s
            .failure
            .iter()
            .map(|f| f.replay.as_str())
            .chain(s.race.iter().map(|r| r.replay.as_str()))
            .collect();
        for (name, seed) in replay_files(out, &id.target)? {
            if (seed < state.frontier || state.finished()) && !keep.contains(name.as_str()) {
                let _ = std::fs::remove_file(out.join(&name));
            }
        }
        let mut failures = Vec::new();
        for f in &s.failure {
            if let Some((_, d)) = written
                .remove(&f.signature)
                .filter(|(seed, _)| *seed == f.first_seed)
            {
                failures.push((f.clone(), Some(d)));
                continue;
            }
            let Assigned {
                build, strategy, ..
            } = self.assign(f.first_seed);
            let corpus = corpora
                .get(&f.signature)
                .filter(|(seed, _)| *seed == f.first_seed)
                .map(|(_, c)| c.clone());
            if crate::sched::learns(&strategy) && corpus.is_none() {
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
                corpus,
                ..self.base.clone()
            };
            let r = build
                .program
                .run(&cfg)
                .with_context(|| format!("seed {}", f.first_seed))?;
            let detailed = self.write_replay(build, out, id, &cfg, &r, deadline)?;
            failures.push((f.clone(), Some(detailed)));
        }
        // Each distinct race: the replay file of the first run that showed
        // it (unless a session before wrote it), whatever its verdict.
        for race in &s.race {
            let Assigned {
                build, strategy, ..
            } = self.assign(race.first_seed);
            if crate::sched::learns(&strategy)
                || out.join(&race.replay).exists()
                || deadline.is_some_and(|d| Instant::now() >= d)
            {
                // A learning run needs the corpus it saw, which is not kept
                // for runs that did not fail.
                continue;
            }
            // Past the time budget, the race is listed without its file.
            let cfg = RunConfig {
                seed: race.first_seed,
                strategy,
                deadline,
                ..self.base.clone()
            };
            let r = match build.program.run(&cfg) {
                Err(e) if crate::runtime::cancelled(&e) => continue,
                r => r.with_context(|| format!("seed {}", race.first_seed))?,
            };
            let cfg = RunConfig {
                deadline: None,
                ..cfg
            };
            self.write_replay_as(
                build,
                out,
                id,
                &cfg,
                &r,
                Some(summary::RACE_REPLAY_KIND),
                deadline,
            )?;
        }
        Ok(failures)
    }
}

/// The failing-run replay files of `target` in `dir`, with their seeds
/// (named as [`summary::replay_name`] names them).
pub fn replay_files(dir: &Path, target: &str) -> Result<Vec<(String, u64)>> {
    let stem = format!("{}-", summary::replay_stem(target));
    let mut v = Vec::new();
    let rd = std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name
            .strip_prefix(&stem)
            .and_then(|r| r.strip_suffix(".toml"))
        else {
            continue;
        };
        let Some((_, seed)) = rest.rsplit_once("-seed") else {
            continue;
        };
        if let Ok(seed) = seed.parse::<u64>() {
            v.push((name, seed));
        }
    }
    v.sort();
    Ok(v)
}

/// Closes its seed in every feedback hub of the campaign when dropped, with
/// the run's feedback in the hub of the build it ran.
struct Closer<'h> {
    hubs: &'h [Option<Hub>],
    build: usize,
    seed: u64,
    feedback: Option<Feedback>,
}

impl Drop for Closer<'_> {
    fn drop(&mut self) {
        for (i, h) in self.hubs.iter().enumerate() {
            if let Some(h) = h {
                let feedback = if i == self.build {
                    self.feedback.take()
                } else {
                    None
                };
                h.close(self.seed, feedback);
            }
        }
    }
}

/// The bitset `bits` moved up by `by` bits: a build's sites in the
/// campaign's site list.
fn shift_bits(bits: Vec<u64>, by: usize) -> Vec<u64> {
    if by == 0 || bits.is_empty() {
        return bits;
    }
    let (words, rem) = (by / 64, by % 64);
    let mut out = vec![0u64; words + bits.len() + 1];
    for (i, w) in bits.iter().enumerate() {
        out[words + i] |= w << rem;
        if rem != 0 {
            out[words + i + 1] |= w >> (64 - rem);
        }
    }
    while out.last() == Some(&0) {
        out.pop();
    }
    out
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

/// The record of a run, and the bitset of the sites it reached (its
/// build's sites start at `site_base` in the campaign's list).
fn make_record(
    seed: u64,
    strategy: u32,
    site_base: usize,
    ms: u64,
    result: &mut Result<RunResult>,
) -> (Record, Vec<u64>) {
    match result {
        Ok(r) => {
            let hit = shift_bits(std::mem::take(&mut r.sites_hit), site_base);
            let pass = r.verdict.is_pass();
            let failure = r.verdict.is_failure();
            (
                Record {
                    seed,
                    strategy,
                    kind: r.verdict.kind().into(),
                    signature: if failure {
                        r.verdict.signature()
                    } else {
                        String::new()
                    },
                    summary: if pass {
                        String::new()
                    } else {
                        r.verdict.summary()
                    },
                    decisions: r.decision_count,
                    preemptions: r.preemptions,
                    switches: r.switches,
                    steps: r.steps,
                    schedule: r.schedule,
                    sites: SiteSet::id_of(&hit),
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
                hit,
            )
        }
        Err(e) => {
            let msg = one_line(e);
            (
                Record {
                    seed,
                    strategy,
                    kind: super::journal::ERROR_KIND.into(),
                    signature: format!("error: {msg}"),
                    summary: format!("the run failed: {msg}"),
                    decisions: 0,
                    preemptions: 0,
                    switches: 0,
                    steps: 0,
                    schedule: trace::schedule_hash(&[]),
                    sites: SiteSet::id_of(&[]),
                    ms,
                    races: Vec::new(),
                },
                Vec::new(),
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
        "args={:?} max_steps={} hang_steps={} fair_steps={} max_time_ms={} budget={}..{} expect_exit={} races={}",
        c.args,
        c.max_steps,
        c.hang_steps,
        c.fair_steps,
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
