//! Reproducing a run on another machine: a replay file is written with the
//! module beside it and a digest of every granted file, and read back into a
//! run that is checked against what was recorded.
//!
//! The file format itself belongs to [`crate::trace::replay`]; this module
//! ties it to targets, programs and the file system.
//!
//! Where `heddle replay` finds the module, in order: the module named with
//! `--target`; the module shipped beside the replay file (`module.file`); the
//! local cache of modules by hash; a rebuild of the recorded source. A
//! shipped module is used even when the local source builds to other bytes
//! (another toolchain or edited sources), and a note says so.

use crate::runtime::{Grant, Program, RunConfig, RunResult};
use crate::target::{self, Target};
use crate::trace::replay::{
    DirRecord, ModuleRef, ReplayFile, RunSpec, ScheduleRecord, VerdictRecord, FORMAT,
};
use crate::{paths, sched};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The replay file of run `r` of `program` (built from `t`) under `cfg`.
/// Each granted directory is recorded with the digest of the files its
/// runs start from (a run's writes stay in the run).
pub fn record(
    t: &Target,
    program: &Program,
    cfg: &RunConfig,
    seed: u64,
    r: &RunResult,
) -> Result<ReplayFile> {
    let dirs = cfg
        .grants
        .iter()
        .map(|g| {
            Ok(DirRecord {
                host: g.host.display().to_string(),
                guest: g.guest.clone(),
                files: g.snapshot()?.digest(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut f = ReplayFile {
        format: FORMAT,
        heddle: crate::trace::replay::writer(),
        module: ModuleRef {
            sha256: program.module_sha256.clone(),
            source: t.given.display().to_string(),
            cflags: t.cflags.clone(),
            file: None,
        },
        run: RunSpec {
            instrumentation: program.instrumentation.describe(),
            strategy: r.strategy.clone(),
            seed,
            args: cfg.args.clone(),
            env: cfg.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            max_steps: cfg.max_steps,
            hang_steps: cfg.hang_steps,
            fair_steps: cfg.fair_steps,
            max_time_ms: cfg.max_time_ns / 1_000_000,
            budget: [cfg.budget.0, cfg.budget.1],
            expected_exit: cfg.expected_exit,
            races: cfg.races,
            dirs,
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
    Ok(f)
}

/// Writes `file` to `path` and the module it was recorded on beside it
/// (once per module and directory: replay files of one target share it).
/// Returns the module's path.
pub fn save(path: &Path, file: &mut ReplayFile, module: &[u8]) -> Result<PathBuf> {
    if paths::sha256_hex(module) != file.module.sha256 {
        return Err(crate::internal!(
            "the module to ship is not the one the replay was recorded on"
        ));
    }
    let name = file.module_file_name();
    let dir = path.parent().unwrap_or(Path::new(""));
    let module_path = dir.join(&name);
    let present = std::fs::read(&module_path).is_ok_and(|b| b == module);
    if !present {
        paths::write_atomic(&module_path, module)?;
    }
    file.module.file = Some(name);
    paths::write_atomic(path, file.to_toml()?.as_bytes())
        .with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(module_path)
}

/// How to replay.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The module or source to replay on instead of the recorded one.
    pub target: Option<PathBuf>,
    /// `HOST[:GUEST]` grants that replace the recorded ones with the same
    /// guest path (or are added, for a guest path the file does not name).
    pub dirs: Vec<String>,
}

/// Where the replayed module came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `--target`.
    Given,
    /// The module shipped beside the replay file.
    Shipped,
    /// The local cache of modules by hash.
    Cache,
    /// A rebuild of the recorded source that gave the recorded bytes.
    Rebuilt,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Given => "--target",
            Origin::Shipped => "shipped beside the replay",
            Origin::Cache => "the cache",
            Origin::Rebuilt => "rebuilt from the recorded source",
        })
    }
}

/// The run a replay file describes, ready to execute.
pub struct Replay {
    /// The replay file.
    pub file: ReplayFile,
    /// The target the module was found as.
    pub target: Target,
    /// The module, instrumented as recorded.
    pub program: Program,
    /// The recorded run's configuration, its decisions forced.
    pub config: RunConfig,
    /// Where the module came from.
    pub origin: Origin,
    /// One-line remarks for the user (e.g. a local rebuild that differs).
    pub notes: Vec<String>,
}

pub use crate::error::NotReproduced;

/// Loads a replay file, finds its module and granted directories, and
/// checks that they are the ones the run was recorded on.
pub fn load(path: &Path, opts: &Options) -> Result<Replay> {
    let file = ReplayFile::load(path)?;
    let mut notes = Vec::new();
    let (t, origin) = find_module(path, &file, opts, &mut notes)?;
    let icfg = file.instrumentation()?;
    let program = Program::new(&t.bytes, &icfg)?;
    let config = RunConfig {
        args: file.run.args.clone(),
        env: file.env_pairs()?,
        seed: file.run.seed,
        strategy: file.run.strategy.clone(),
        max_steps: file.run.max_steps,
        hang_steps: file.run.hang_steps,
        fair_steps: file.run.fair_steps,
        max_time_ns: file.run.max_time_ms.saturating_mul(1_000_000),
        budget: (file.run.budget[0], file.run.budget[1]),
        expected_exit: file.run.expected_exit,
        races: file.run.races,
        grants: grants(&file, &opts.dirs)?,
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
        origin,
        notes,
    })
}

fn find_module(
    path: &Path,
    file: &ReplayFile,
    opts: &Options,
    notes: &mut Vec<String>,
) -> Result<(Target, Origin)> {
    let want = &file.module.sha256;
    let short = &want[..16];
    if let Some(p) = &opts.target {
        let t = target::load(p, &file.module.cflags)?;
        let sha = paths::sha256_hex(&t.bytes);
        if &sha != want {
            bail!(
                "module mismatch: {} has SHA-256 {}, but the replay was recorded on {short}",
                p.display(),
                &sha[..16]
            );
        }
        return Ok((t, Origin::Given));
    }
    let source = PathBuf::from(&file.module.source);
    let dir = path.parent().unwrap_or(Path::new(""));
    let shipped = file.module.file.as_ref().map(|n| dir.join(n));
    if let Some(p) = &shipped {
        if let Ok(bytes) = std::fs::read(p) {
            if &paths::sha256_hex(&bytes) != want {
                bail!(
                    "{}: the module shipped with the replay is damaged (its SHA-256 is not {short})",
                    p.display()
                );
            }
            if let Some(note) = compare_with_rebuild(file, &source) {
                notes.push(note);
            }
            let t = target::from_bytes(&source, p, &file.module.cflags, bytes)?;
            target::keep_by_hash(&t.bytes);
            return Ok((t, Origin::Shipped));
        }
    }
    if let Some(p) = target::cached_by_hash(want) {
        let bytes = std::fs::read(&p).with_context(|| format!("cannot read {}", p.display()))?;
        let t = target::from_bytes(&source, &p, &file.module.cflags, bytes)?;
        return Ok((t, Origin::Cache));
    }
    let missing = match &shipped {
        Some(p) => format!("its module {} is missing", p.display()),
        None => "it ships no module (it predates replay format 2)".to_string(),
    };
    if file.module.source.is_empty() || !source.exists() {
        bail!(
            "cannot replay: {missing}, and its target `{}` is not here (pass the module with --target)",
            file.module.source
        );
    }
    let t = target::load(&source, &file.module.cflags)?;
    let sha = paths::sha256_hex(&t.bytes);
    if &sha != want {
        bail!(
            "cannot replay: {missing}, and {} builds to module {} here, not the recorded {short} (another toolchain or changed sources)",
            source.display(),
            &sha[..16]
        );
    }
    Ok((t, Origin::Rebuilt))
}

/// A note when the recorded source is here and builds to other bytes than
/// the shipped module.
fn compare_with_rebuild(file: &ReplayFile, source: &Path) -> Option<String> {
    if !crate::cc::is_source(source) || !source.exists() {
        return None;
    }
    let tc = crate::cc::locate().ok()?;
    let built =
        crate::cc::compile_cached(&tc, &[source.to_path_buf()], &file.module.cflags).ok()?;
    let sha = paths::sha256_hex(&std::fs::read(built).ok()?);
    (sha != file.module.sha256).then(|| {
        format!(
            "note: {} builds to module {} here, not the recorded {} (another toolchain or changed sources); replaying the shipped module",
            source.display(),
            &sha[..16],
            &file.module.sha256[..16]
        )
    })
}

/// The directories to grant: the recorded ones (each checked against its
/// digest), with `overrides` (`HOST[:GUEST]`) in place of a recorded one.
fn grants(file: &ReplayFile, overrides: &[String]) -> Result<Vec<Grant>> {
    let overrides: Vec<Grant> = overrides
        .iter()
        .map(|d| Grant::parse(d))
        .collect::<Result<_>>()?;
    let mut out = Vec::new();
    for rec in &file.run.dirs {
        let host = overrides
            .iter()
            .find(|g| g.guest == rec.guest)
            .map(|g| g.host.clone())
            .unwrap_or_else(|| PathBuf::from(&rec.host));
        if !host.is_dir() {
            bail!(
                "the replay reads the directory `{}` (guest {}), which is not here: pass it with --dir HOST:{}",
                rec.host,
                rec.guest,
                rec.guest
            );
        }
        let grant = Grant::new(host.clone(), rec.guest.clone());
        let now = grant.snapshot()?.digest();
        if let Some(why) = digest_difference(&rec.files, &now) {
            bail!(
                "--dir {} (guest {}) is not the recorded directory: {why}",
                host.display(),
                rec.guest
            );
        }
        out.push(grant);
    }
    for g in overrides {
        if !out.iter().any(|o| o.guest == g.guest) {
            out.push(g);
        }
    }
    Ok(out)
}

/// The first difference between a recorded digest and the present one.
fn digest_difference(
    recorded: &BTreeMap<String, String>,
    now: &BTreeMap<String, String>,
) -> Option<String> {
    for (name, sha) in recorded {
        match now.get(name) {
            None => return Some(format!("{name} is missing")),
            Some(s) if s != sha => {
                return Some(format!(
                    "{name} differs (SHA-256 {}, recorded {})",
                    &s[..16],
                    &sha[..16]
                ))
            }
            _ => {}
        }
    }
    now.keys()
        .find(|name| !recorded.contains_key(*name))
        .map(|name| format!("{name} was not there when the run was recorded"))
}

/// Checks a replayed run against its file: the same decisions (no
/// divergence), verdict and output.
pub fn check(rp: &Replay, r: &RunResult) -> Result<(), NotReproduced> {
    compare(rp, r).map_err(|NotReproduced(why)| match instrumenter_mismatch(&rp.file) {
        Some(versions) => NotReproduced(format!("{why}; {versions}")),
        None => NotReproduced(why),
    })
}

/// When the file was recorded with another instrumenter than this heddle's
/// (or does not say which), the sentence that says so: a likely cause of a
/// replay that does not reproduce.
fn instrumenter_mismatch(file: &ReplayFile) -> Option<String> {
    let ours = crate::instrument::INSTRUMENTER_VERSION;
    let heddle = file.heddle.split('+').next().unwrap_or_default();
    match file.instrumenter_version() {
        Some(v) if v == ours => None,
        Some(v) => Some(format!(
            "the replay was recorded by heddle {heddle} with instrumenter version {v}, and this heddle \
             instruments with version {ours}: replay it with the heddle that recorded it"
        )),
        None => Some(format!(
            "the replay was recorded by heddle {heddle}, which did not write its instrumenter version, \
             and a replay recorded with another instrumenter than this heddle's (version {ours}) \
             may not reproduce: replay it with the heddle that recorded it"
        )),
    }
}

/// [`check`] without the instrumenter version's explanation.
fn compare(rp: &Replay, r: &RunResult) -> Result<(), NotReproduced> {
    if let Some(d) = &r.divergence {
        let site = |s: u32| {
            rp.program
                .sites
                .site(s)
                .map(|x| format!("site {s} ({})", x.where_()))
                .unwrap_or_else(|| format!("site {s}"))
        };
        return Err(NotReproduced(format!(
            "replay diverged at decision {}: expected thread {} at {}, but {}",
            d.index,
            d.expected.tid(),
            site(d.expected.site()),
            d.actual
        )));
    }
    if r.verdict.signature() != rp.file.verdict.signature {
        return Err(NotReproduced(format!(
            "replay did not reproduce the recorded verdict: recorded `{}`, got `{}`",
            rp.file.verdict.signature,
            r.verdict.signature()
        )));
    }
    if r.output_hash() != rp.file.verdict.output_sha256 {
        return Err(NotReproduced(
            "replay reproduced the verdict but not the recorded output".into(),
        ));
    }
    Ok(())
}

/// A replayed run and whether it gave the recorded one: what `heddle
/// replay` reports.
pub struct ReplayReport {
    /// The replay file, loaded, with the module it ran on.
    pub replay: Replay,
    /// The replayed run.
    pub result: RunResult,
    /// Whether the run reproduced the recording ([`check`]).
    pub reproduced: Result<(), NotReproduced>,
}

/// Loads a replay file (see [`load`]), runs it and checks the run against
/// the file.
pub fn replay(path: &Path, opts: &Options) -> Result<ReplayReport> {
    let replay = load(path, opts)?;
    let result = replay.program.run(&replay.config)?;
    let reproduced = check(&replay, &result);
    Ok(ReplayReport {
        replay,
        result,
        reproduced,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_name_the_first_difference() {
        let a: BTreeMap<String, String> = [("x".to_string(), "a".repeat(64))].into();
        let mut b = a.clone();
        assert_eq!(digest_difference(&a, &b), None);
        b.insert("x".into(), "b".repeat(64));
        assert!(digest_difference(&a, &b).unwrap().starts_with("x differs"));
        b.clear();
        assert_eq!(digest_difference(&a, &b).unwrap(), "x is missing");
        b = a.clone();
        b.insert("y".into(), "c".repeat(64));
        assert!(digest_difference(&a, &b)
            .unwrap()
            .starts_with("y was not there"));
    }
}
