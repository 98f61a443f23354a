//! Helpers shared by the end-to-end tests.

#![allow(dead_code)]

use heddle::cc::{self, Toolchain};
use heddle::instrument::{Config, Granularity};
use heddle::manifest::{Entry, Manifest};
use heddle::runtime::{Program, RunConfig, RunResult};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex, OnceLock};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

/// The toolchain, installed on first use.
pub fn toolchain() -> &'static Toolchain {
    static TC: OnceLock<Toolchain> = OnceLock::new();
    TC.get_or_init(|| cc::ensure().expect("toolchain"))
}

pub fn manifest() -> Manifest {
    Manifest::load(&repo().join("targets/targets.toml")).expect("manifest")
}

pub fn entry(name: &str) -> Entry {
    manifest()
        .get(name)
        .unwrap_or_else(|| panic!("no target {name}"))
        .clone()
}

/// Compiles a source (relative to the repo root) into the cache.
pub fn build(source: &str, flags: &[&str]) -> PathBuf {
    let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    cc::compile_cached(toolchain(), &[repo().join(source)], &flags).expect("compile")
}

/// The module bytes of a bundled target's buggy or fixed build.
pub fn target_module(source: &str, fixed: bool) -> Vec<u8> {
    let path = build(
        &format!("targets/{source}"),
        if fixed { &["-DFIXED"] } else { &[] },
    );
    std::fs::read(path).expect("read module")
}

/// A compiled program, shared between tests of this process.
pub fn program(source: &str, fixed: bool, granularity: Granularity) -> Arc<Program> {
    type Programs = Mutex<BTreeMap<(String, bool, String), Arc<Program>>>;
    static CACHE: OnceLock<Programs> = OnceLock::new();
    let key = (source.to_string(), fixed, granularity.to_string());
    let cache = CACHE.get_or_init(|| Mutex::new(BTreeMap::new()));
    if let Some(p) = cache.lock().unwrap().get(&key) {
        return p.clone();
    }
    let bytes = target_module(source, fixed);
    let cfg = Config {
        granularity,
        ..Config::default()
    };
    let p = Arc::new(Program::new(&bytes, &cfg).expect("program"));
    cache.lock().unwrap().insert(key, p.clone());
    p
}

/// The run configuration of a manifest entry.
pub fn config(e: &Entry, strategy: &str, seed: u64) -> RunConfig {
    RunConfig {
        args: e.args.clone(),
        strategy: strategy.to_string(),
        seed,
        ..RunConfig::default()
    }
}

pub fn run(p: &Program, cfg: &RunConfig) -> RunResult {
    p.run(cfg).expect("run")
}

/// Runs `p` with `base` for every seed of `seeds`; each run must pass
/// (`what` names the case in the failure message).
pub fn assert_passes(p: &Program, base: &RunConfig, seeds: std::ops::Range<u64>, what: &str) {
    passing_runs(p, base, seeds, what).for_each(drop);
}

/// The runs of `p` with `base` for the seeds of `seeds`, with their seeds;
/// each must pass (`what` names the case in the failure message).
pub fn passing_runs<'a>(
    p: &'a Program,
    base: &'a RunConfig,
    seeds: std::ops::Range<u64>,
    what: &'a str,
) -> impl Iterator<Item = (u64, RunResult)> + 'a {
    seeds.map(move |seed| {
        let r = run(
            p,
            &RunConfig {
                seed,
                ..base.clone()
            },
        );
        assert!(
            r.verdict.is_pass(),
            "{what} seed {seed}: {}",
            r.verdict.summary()
        );
        (seed, r)
    })
}

/// Runs `f` over `items` on two worker threads (the machine has two cores).
pub fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out: Mutex<Vec<(usize, R)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= items.len() {
                    break;
                }
                let r = f(&items[i]);
                out.lock().unwrap().push((i, r));
            });
        }
    });
    let mut v = out.into_inner().unwrap();
    v.sort_by_key(|(i, _)| *i);
    v.into_iter().map(|(_, r)| r).collect()
}

/// The `heddle` binary.
pub fn heddle() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_heddle"));
    c.current_dir(repo());
    c
}

/// Runs `heddle args…` and returns its output.
pub fn heddle_out(args: &[&str]) -> Output {
    heddle().args(args).output().expect("run heddle")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts a one-line `heddle: error:` message and exit code 2.
pub fn assert_usage_error(out: &Output, needle: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "expected exit 2, stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        lines
            .first()
            .is_some_and(|l| l.starts_with("heddle: error:")),
        "stderr: {err}"
    );
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
}

/// A fresh temporary directory.
/// The replay files of a campaign directory's failures (not those of its
/// data races, `-races-seed<N>`).
pub fn failure_replays(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "toml")
                && p.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n.contains("-seed") && !n.contains("-races-seed")
                })
        })
        .collect()
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Compiles a Rust program (relative to the repo root) with
/// `rustc --edition 2021 --target wasm32-wasip1-threads -g -O` into a cache
/// under the target directory, keyed by the source and the compiler
/// version; returns the module's path. Adds the target with rustup if the
/// compiler lacks it.
pub fn rust_build(source: &str) -> PathBuf {
    rust_build_at(source, "2")
}

/// [`rust_build`] at `-C opt-level=LEVEL` (`0`: a debug build; `2`: what
/// `-O` and a release build use).
pub fn rust_build_at(source: &str, level: &str) -> PathBuf {
    const TARGET: &str = "wasm32-wasip1-threads";
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let path = repo().join(source);
    let version = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("run rustc -vV");
    let mut key = std::fs::read(&path).unwrap_or_else(|e| panic!("{source}: {e}"));
    key.extend_from_slice(&version.stdout);
    key.extend_from_slice(level.as_bytes());
    let hash = heddle::paths::sha256_hex(&key);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rust-programs");
    std::fs::create_dir_all(&dir).expect("cache dir");
    let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
    let out = dir.join(format!("{stem}-{}.wasm", &hash[..12]));
    let tmp = dir.join(format!("{stem}-O{level}.tmp.wasm"));
    if out.is_file() {
        return out;
    }
    let compile = || {
        Command::new("rustc")
            .args(["--edition", "2021", "--target", TARGET, "-g", "-C"])
            .arg(format!("opt-level={level}"))
            .arg(&path)
            .arg("-o")
            .arg(&tmp)
            .output()
            .expect("run rustc")
    };
    let mut o = compile();
    if !o.status.success() && text(&o.stderr).contains("target may not be installed") {
        let _ = Command::new("rustup")
            .args(["target", "add", TARGET])
            .status();
        o = compile();
    }
    assert!(
        o.status.success(),
        "rustc {source} failed:\n{}",
        text(&o.stderr)
    );
    std::fs::rename(&tmp, &out).expect("rename module");
    out
}

/// The replay command a failing `heddle fuzz` printed for its failure (not
/// for a run that only raced).
pub fn printed_replay(stdout: &str) -> String {
    stdout
        .lines()
        .filter(|l| !l.contains("-races-seed"))
        .find_map(|l| l.trim().strip_prefix("replay: heddle replay "))
        .unwrap_or_else(|| panic!("no replay command printed:\n{stdout}"))
        .to_string()
}

/// Replays `replay` twice: each reproduces the recorded failing run and
/// prints `needle`, and both print the same bytes.
pub fn replays_the_same_twice(replay: &str, needle: &str) {
    let once = || {
        let out = heddle_out(&["replay", replay]);
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(1),
            "replay {replay}:\n{stdout}\n{}",
            text(&out.stderr)
        );
        assert!(
            stdout.contains("replay reproduced the recorded run") && stdout.contains(needle),
            "replay {replay}:\n{stdout}"
        );
        out.stdout
    };
    assert_eq!(
        once(),
        once(),
        "two replays of {replay} print the same bytes"
    );
}

/// `heddle fuzz ARGS… --out DIR` into a fresh directory (kept alive by the
/// returned guard, with the replay files in it; `--out` goes before the
/// program's own arguments, after a `--`): asserts the exit code (0: every
/// run passed, 1: a failure was found) and returns the stdout.
pub fn fuzz_expecting(args: &[&str], code: i32) -> (tempfile::TempDir, String) {
    let dir = tempdir();
    let out_dir = dir.path().join("campaign");
    let split = args.iter().position(|a| *a == "--").unwrap_or(args.len());
    let mut all = vec!["fuzz"];
    all.extend_from_slice(&args[..split]);
    all.extend(["--out", out_dir.to_str().unwrap()]);
    all.extend_from_slice(&args[split..]);
    let out = heddle_out(&all);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(code),
        "heddle {}:\n{stdout}\n{}",
        all.join(" "),
        text(&out.stderr)
    );
    (dir, stdout)
}

/// The absolute path of test program `name` under `tests/programs/`.
pub fn prog(name: &str) -> String {
    repo()
        .join("tests/programs")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

pub fn path_str(p: &std::path::Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A command's stdout, then its stderr.
pub fn all_output(out: &std::process::Output) -> String {
    format!("{}\n{}", text(&out.stdout), text(&out.stderr))
}
