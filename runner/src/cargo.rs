//! Rust crates under heddle: the library behind `heddle cargo test` and
//! `heddle cargo run`.
//!
//! [`build`] runs cargo for `wasm32-wasip1-threads` with JSON messages and
//! returns the executables it made (test harnesses, or binaries), with debug
//! info forced on so reports name `src/lib.rs:LINE`. [`list_tests`] asks a
//! test harness for its tests (libtest's `--list --format terse`, run once
//! under heddle's scheduler); [`run_test`] runs one test as its own campaign:
//! the harness with `--exact NAME --test-threads 1 --nocapture`, so that
//! exactly that test runs, on the main thread (libtest never spawns a thread
//! for a test on wasm), with its panic message on stderr where the verdict
//! sees it. The arguments are part of each replay file, so `heddle replay`
//! runs the same test again.

use crate::campaign::exec::{self, Campaign, Outcome};
use crate::campaign::{Portfolio, SeedPlan};
use crate::report::json::FailureDoc;
use crate::report::junit::Outcome as JunitOutcome;
use crate::runtime::{Program, RunConfig};
use crate::target::{self, Target};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target triple heddle runs.
pub const TRIPLE: &str = "wasm32-wasip1-threads";

/// The guest arguments that run exactly the test `name` of a libtest
/// harness, in-process on the main thread, its output not captured (a
/// captured panic message is lost when the process aborts).
pub fn test_args(name: &str) -> Vec<String> {
    ["--exact", name, "--test-threads", "1", "--nocapture"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// The maximum linear memory heddle's cargo builds link with: 4 GiB, all
/// that wasm32 addresses.
pub const MAX_MEMORY: u64 = 1 << 32;

/// What cargo is asked to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Build {
    /// `cargo test --no-run`: the test harnesses.
    Tests,
    /// `cargo build`: the binaries.
    Binaries,
}

/// An executable cargo built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Executable {
    /// The package it belongs to.
    pub package: String,
    /// The cargo target's name (`heddle_rust_bugs`, an integration test's
    /// file stem, a binary's name).
    pub target: String,
    /// The cargo target's kind: `lib`, `bin`, `test`, `bench`, `example`.
    pub kind: String,
    /// The `.wasm` file.
    pub path: PathBuf,
}

impl Executable {
    /// A name for its directory and its reports: the kind and the target's
    /// name (a library and a binary of one package share their name).
    pub fn label(&self) -> String {
        format!("{}-{}", self.kind, self.target)
    }
}

/// Cargo options that take a value as the next argument (so that the value
/// is not taken for a test-name filter).
const VALUE_OPTIONS: &[&str] = &[
    "-p",
    "--package",
    "--exclude",
    "-F",
    "--features",
    "--bin",
    "--test",
    "--example",
    "--bench",
    "-j",
    "--jobs",
    "--profile",
    "--target-dir",
    "--manifest-path",
    "--lockfile-path",
    "--color",
    "--config",
    "-Z",
    "--timings",
];

/// Options heddle sets itself.
const RESERVED: &[&str] = &["--target", "--message-format", "--no-run"];

/// Splits the arguments of `heddle cargo test` into cargo's own and the
/// test-name filters (positional arguments, as `cargo test NAME` takes).
/// Options heddle sets itself are an error.
pub fn split_filters(args: &[String]) -> Result<(Vec<String>, Vec<String>)> {
    let (mut cargo, mut filters) = (Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let name = a.split('=').next().unwrap_or(a);
        if RESERVED.contains(&name) {
            bail!("`{a}`: heddle sets {name} itself (the target is {TRIPLE})");
        }
        if a.starts_with('-') {
            cargo.push(a.clone());
            if VALUE_OPTIONS.contains(&a.as_str()) {
                if let Some(v) = it.next() {
                    cargo.push(v.clone());
                }
            }
        } else {
            filters.push(a.clone());
        }
    }
    Ok((cargo, filters))
}

/// The cargo program: `$CARGO` (set when heddle itself runs under cargo),
/// else `cargo` on PATH.
fn cargo_program() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// Environment for cargo: debug info in every profile a build may use
/// (unless the user chose), so that sites are `src/lib.rs:LINE`.
fn cargo_env(cmd: &mut Command) {
    for p in ["DEV", "TEST", "RELEASE", "BENCH"] {
        let k = format!("CARGO_PROFILE_{p}_DEBUG");
        if std::env::var_os(&k).is_none() {
            cmd.env(k, "true");
        }
    }
}

/// Builds with cargo in `dir` (None: the current directory) and returns
/// the executables, in cargo's order. `args` are cargo's own arguments (no
/// test-name filter). A failing build is an input error naming cargo's
/// first error; cargo's own output is shown with `verbose`.
pub fn build(
    what: Build,
    args: &[String],
    dir: Option<&Path>,
    verbose: bool,
) -> Result<Vec<Executable>> {
    let mut cmd = Command::new(cargo_program());
    match what {
        Build::Tests => cmd.args(["test", "--no-run"]),
        Build::Binaries => cmd.arg("build"),
    };
    cmd.args([
        "--message-format=json-render-diagnostics",
        "--target",
        TRIPLE,
    ]);
    // rustc links wasm32-wasip1-threads modules with a maximum memory of
    // 1 GiB, and every thread's stack comes from it (2 MiB each by
    // default): a thousand threads alive at once do not fit. heddle's
    // builds may grow to the whole 32-bit address space.
    cmd.args([
        "--config",
        &format!("target.{TRIPLE}.rustflags=[\"-C\", \"link-arg=--max-memory={MAX_MEMORY}\"]"),
    ]);
    cmd.args(args);
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    cargo_env(&mut cmd);
    let shown = format!(
        "cargo {}",
        match what {
            Build::Tests => "test --no-run",
            Build::Binaries => "build",
        }
    );
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("cannot run cargo ({shown})"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if verbose {
        eprint!("{stderr}");
    }
    if !out.status.success() {
        bail!("{shown} failed ({}): {}", out.status, first_error(&stderr));
    }
    let exes = parse_artifacts(what, &String::from_utf8_lossy(&out.stdout));
    if exes.is_empty() {
        bail!(
            "{shown} built no {}",
            match what {
                Build::Tests => "test executable",
                Build::Binaries => "binary",
            }
        );
    }
    Ok(exes)
}

/// Cargo's first error, on one line: the first `error` line of its stderr
/// with the location line after it (`--> src/lib.rs:3:5`) when there is one.
pub fn first_error(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().collect();
    let Some(i) = lines.iter().position(|l| l.starts_with("error")) else {
        return lines
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_string())
            .unwrap_or_else(|| "no message".into());
    };
    let msg = lines[i].trim_start_matches("error: ").to_string();
    match lines
        .get(i + 1)
        .and_then(|l| l.trim_start().strip_prefix("--> "))
    {
        Some(at) => format!("{msg} at {}", at.trim()),
        None => msg,
    }
}

/// The executables of cargo's JSON messages (`compiler-artifact` with an
/// `executable`): test harnesses for [`Build::Tests`], binaries otherwise.
pub fn parse_artifacts(what: Build, stdout: &str) -> Vec<Executable> {
    let mut out: Vec<Executable> = Vec::new();
    for line in stdout.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(exe) = v["executable"].as_str() else {
            continue;
        };
        let test = v["profile"]["test"].as_bool().unwrap_or(false);
        let kind = v["target"]["kind"][0].as_str().unwrap_or("bin").to_string();
        let wanted = match what {
            Build::Tests => test,
            Build::Binaries => !test && kind == "bin",
        };
        if !wanted {
            continue;
        }
        let package = v["package_id"]
            .as_str()
            .and_then(|id| id.rsplit(['#', '/']).next())
            .map(|s| s.split('@').next().unwrap_or(s).to_string())
            .unwrap_or_default();
        let e = Executable {
            package,
            target: v["target"]["name"].as_str().unwrap_or("?").to_string(),
            kind,
            path: PathBuf::from(exe),
        };
        if !out.contains(&e) {
            out.push(e);
        }
    }
    out
}

/// A test of a harness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestCase {
    /// Its full name (`tests::lost_update`).
    pub name: String,
    /// Marked `#[ignore]`.
    pub ignored: bool,
}

/// The `NAME: test` lines of libtest's `--list --format terse` (benchmarks
/// are left out).
pub fn parse_list(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect()
}

/// The tests of a harness, as it lists them when run once under heddle
/// (seed 0): every test, and which of them are `#[ignore]`d.
pub fn list_tests(program: &Program, base: &RunConfig) -> Result<Vec<TestCase>> {
    let list = |extra: &[&str]| -> Result<Vec<String>> {
        let mut args: Vec<String> = ["--list", "--format", "terse"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let r = program.run(&RunConfig {
            args,
            seed: 0,
            strategy: "random".into(),
            ..base.clone()
        })?;
        if !r.verdict.is_pass() {
            bail!(
                "listing its tests failed: {}{}",
                r.verdict.summary(),
                String::from_utf8_lossy(&r.stderr)
                    .lines()
                    .next()
                    .map(|l| format!(" ({l})"))
                    .unwrap_or_default()
            );
        }
        Ok(parse_list(&String::from_utf8_lossy(&r.stdout)))
    };
    let ignored = list(&["--ignored"])?;
    Ok(list(&[])?
        .into_iter()
        .map(|name| TestCase {
            ignored: ignored.contains(&name),
            name,
        })
        .collect())
}

/// Whether `name` is selected by `filters` (none: every test; else a test
/// whose name contains one of them, as libtest filters).
pub fn selected(name: &str, filters: &[String]) -> bool {
    filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))
}

/// A harness, loaded: the executable, the target heddle names in replay
/// files, and the program its tests run on.
pub struct Harness {
    /// What cargo built.
    pub exe: Executable,
    /// The module as a target.
    pub target: Target,
    /// The instrumented, compiled module.
    pub program: Program,
}

impl Harness {
    /// Loads `exe`, instrumented with `icfg`.
    pub fn load(exe: Executable, icfg: &crate::instrument::Config) -> Result<Harness> {
        let target = target::load(&exe.path, &[])?;
        let program =
            Program::new(&target.bytes, icfg).with_context(|| format!("{}", exe.path.display()))?;
        Ok(Harness {
            exe,
            target,
            program,
        })
    }
}

/// How each test's campaign runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The run configuration (its `args` are replaced by the test's).
    pub base: RunConfig,
    /// The strategy or portfolio (`default`, …).
    pub strategy: String,
    /// The seeds of each test.
    pub plan: SeedPlan,
    /// Collect every distinct failure of a test (else stop at the first).
    pub keep_going: bool,
    /// The driver's options; `out` is the directory under which each test
    /// gets its own (`OUT/<kind>-<target>/<test>`).
    pub exec: exec::Options,
}

/// How a test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Every run passed.
    Passed,
    /// A run failed: a bug.
    Failed,
    /// Runs failed inside heddle and none found a bug.
    Error,
    /// Not run: `#[ignore]`d, or a signal stopped the suite first.
    Skipped,
    /// It needs what `wasm32-wasip1-threads` lacks (unwinding, processes,
    /// …): neither a pass nor a failure ([`crate::verdict::Verdict::Unsupported`]).
    Unsupported,
}

/// What one test's campaign found.
pub struct TestResult {
    /// The harness's label (`lib-heddle_rust_bugs`).
    pub harness: String,
    /// The test's name.
    pub name: String,
    /// How it ended.
    pub status: Status,
    /// Why it was skipped, when it was.
    pub skip_reason: Option<String>,
    /// The campaign's outcome (None when skipped).
    pub outcome: Option<Outcome>,
    /// The campaign directory.
    pub out: PathBuf,
    /// One document per distinct failure, with its replay file.
    pub failures: Vec<FailureDoc>,
    /// The JUnit outcome.
    pub junit: JunitOutcome,
}

impl TestResult {
    /// A skipped test.
    pub fn skipped(harness: &str, name: &str, reason: &str) -> TestResult {
        TestResult {
            harness: harness.into(),
            name: name.into(),
            status: Status::Skipped,
            skip_reason: Some(reason.into()),
            outcome: None,
            out: PathBuf::new(),
            failures: Vec::new(),
            junit: JunitOutcome::Skipped {
                message: reason.into(),
            },
        }
    }

    /// A test that cannot run here, found before its campaign.
    pub fn unsupported(harness: &str, name: &str, reason: &str) -> TestResult {
        TestResult {
            status: Status::Unsupported,
            ..TestResult::skipped(harness, name, reason)
        }
    }

    /// Runs counted for the test.
    pub fn runs(&self) -> u64 {
        self.outcome.as_ref().map_or(0, |o| o.summary.stats.runs)
    }

    /// Seconds its campaign took.
    pub fn seconds(&self) -> f64 {
        self.outcome.as_ref().map_or(0.0, |o| o.session_secs)
    }
}

/// Why a `#[should_panic]` test cannot run.
pub const SHOULD_PANIC: &str = "unsupported: unwinding: libtest skips a #[should_panic] test on \
     wasm32-wasip1-threads, whose std aborts on panic";

/// Whether libtest's output of a run of test `name` says it skipped the
/// test as `#[should_panic]` (`test NAME - should panic ... ignored`).
pub fn should_panic_ignored(stdout: &str, name: &str) -> bool {
    let line = format!("test {name} - should panic ... ignored");
    stdout
        .lines()
        .any(|l| l.trim_end() == line || l.starts_with(&format!("{line},")))
}

/// The directory name of a test: its name with `::` as `__` and anything
/// but letters, digits, `_` and `-` as `_`.
pub fn test_dir_name(name: &str) -> String {
    name.replace("::", "__")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Runs test `test` of `h` as a campaign in its own directory.
pub fn run_test(h: &Harness, test: &TestCase, s: &Settings) -> Result<TestResult> {
    let label = h.exe.label();
    let base = RunConfig {
        args: test_args(&test.name),
        ..s.base.clone()
    };
    // libtest itself skips a `#[should_panic]` test on wasm (it cannot
    // catch the panic) and reports it `ignored`: one run tells.
    let probe = h.program.run(&RunConfig {
        seed: s.plan.seed_start,
        strategy: "random".into(),
        ..base.clone()
    });
    if probe.is_ok_and(|p| {
        p.verdict.is_pass() && should_panic_ignored(&String::from_utf8_lossy(&p.stdout), &test.name)
    }) {
        return Ok(TestResult::unsupported(&label, &test.name, SHOULD_PANIC));
    }
    let portfolio: Portfolio = crate::fuzz::calibrated_portfolio(&h.program, &base, &s.strategy)?;
    let c = Campaign::single(&h.target, &h.program, base, portfolio, s.plan, s.keep_going);
    let out = s.exec.out.join(&label).join(test_dir_name(&test.name));
    let opts = exec::Options {
        out: out.clone(),
        ..s.exec.clone()
    };
    let outcome = c.run(&opts)?;
    let reports = crate::report::campaign::write_reports(&c, &outcome, &out)?;
    let failures = crate::report::campaign::failure_docs(&outcome, &out, &reports);
    let junit = crate::report::campaign::junit_outcome(&outcome, &failures);
    let stats = &outcome.summary.stats;
    let unsupported = outcome.state.stats.inconclusive.get("unsupported");
    let status = if stats.failing_runs > 0 {
        Status::Failed
    } else if stats.error_runs > 0 {
        Status::Error
    } else if unsupported.is_some() {
        Status::Unsupported
    } else {
        Status::Passed
    };
    let skip_reason = unsupported
        .filter(|_| status == Status::Unsupported)
        .map(|u| u.summary.clone());
    Ok(TestResult {
        harness: label,
        name: test.name.clone(),
        status,
        skip_reason,
        outcome: Some(outcome),
        out,
        failures,
        junit,
    })
}

/// What `heddle cargo test` found.
pub struct Report {
    /// Every selected test, in order (the skipped ones too).
    pub tests: Vec<TestResult>,
    /// Tests the filters left out.
    pub filtered_out: usize,
    /// The signal that stopped the suite, if one did.
    pub interrupted: Option<i32>,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl Report {
    /// Tests with `status`.
    pub fn count(&self, status: Status) -> usize {
        self.tests.iter().filter(|t| t.status == status).count()
    }
}

/// `heddle cargo test`: builds the test harnesses (`cargo_args`, in `dir`),
/// lists their tests and runs each selected one; `each` sees every test as
/// it ends (skipped ones included). `verbose` shows cargo's output.
#[allow(clippy::too_many_arguments)]
pub fn test(
    cargo_args: &[String],
    filters: &[String],
    dir: Option<&Path>,
    verbose: bool,
    icfg: &crate::instrument::Config,
    s: &Settings,
    each: &mut dyn FnMut(&TestResult),
) -> Result<Report> {
    let start = std::time::Instant::now();
    let exes = build(Build::Tests, cargo_args, dir, verbose)?;
    let mut report = Report {
        tests: Vec::new(),
        filtered_out: 0,
        interrupted: None,
        seconds: 0.0,
    };
    for exe in exes {
        let label = exe.label();
        let h = Harness::load(exe, icfg)?;
        let tests =
            list_tests(&h.program, &s.base).with_context(|| format!("{}", h.exe.path.display()))?;
        for t in tests {
            if !selected(&t.name, filters) {
                report.filtered_out += 1;
                continue;
            }
            let r = if t.ignored {
                TestResult::skipped(&label, &t.name, "ignored")
            } else if let Some(sig) = report.interrupted {
                TestResult::skipped(
                    &label,
                    &t.name,
                    &format!("stopped by {}", crate::interrupt::name(sig)),
                )
            } else {
                let r = run_test(&h, &t, s)?;
                if let Some(sig) = r.outcome.as_ref().and_then(|o| o.interrupted) {
                    report.interrupted = Some(sig);
                }
                r
            };
            each(&r);
            report.tests.push(r);
        }
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}

/// `heddle cargo run`: builds the binaries (`cargo_args`, in `dir`) and
/// returns the one to fuzz (several need `--bin`).
pub fn binary(cargo_args: &[String], dir: Option<&Path>, verbose: bool) -> Result<Executable> {
    let mut exes = build(Build::Binaries, cargo_args, dir, verbose)?;
    if exes.len() > 1 {
        let names: Vec<&str> = exes.iter().map(|e| e.target.as_str()).collect();
        bail!(
            "cargo built {} binaries ({}): choose one with --bin NAME",
            exes.len(),
            names.join(", ")
        );
    }
    Ok(exes.remove(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn filters_are_the_positional_arguments() {
        let (cargo, filters) = split_filters(&strings(&[
            "--features",
            "fixed",
            "lost",
            "-p",
            "x",
            "--release",
            "--manifest-path=a/Cargo.toml",
            "abba",
        ]))
        .unwrap();
        assert_eq!(
            cargo,
            strings(&[
                "--features",
                "fixed",
                "-p",
                "x",
                "--release",
                "--manifest-path=a/Cargo.toml"
            ])
        );
        assert_eq!(filters, strings(&["lost", "abba"]));
        assert!(split_filters(&strings(&["--target", "x86_64-unknown-linux-gnu"])).is_err());
        assert!(split_filters(&strings(&["--message-format=short"])).is_err());
    }

    #[test]
    fn artifacts_and_lists_are_parsed() {
        let json = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/tests/rust#heddle-rust-bugs@0.1.0","target":{"kind":["lib"],"name":"heddle_rust_bugs"},"profile":{"test":false},"executable":null}
{"reason":"compiler-artifact","package_id":"path+file:///w/tests/rust#heddle-rust-bugs@0.1.0","target":{"kind":["lib"],"name":"heddle_rust_bugs"},"profile":{"test":true},"executable":"/w/t/deps/heddle_rust_bugs-fd6a.wasm"}
{"reason":"compiler-artifact","package_id":"registry+https://github.com/rust-lang/crates.io-index#foo@1.0.0","target":{"kind":["bin"],"name":"foo"},"profile":{"test":false},"executable":"/w/t/foo.wasm"}
{"reason":"build-finished","success":true}"#;
        let tests = parse_artifacts(Build::Tests, json);
        assert_eq!(tests.len(), 1);
        assert_eq!(tests[0].package, "heddle-rust-bugs");
        assert_eq!(tests[0].label(), "lib-heddle_rust_bugs");
        assert_eq!(
            tests[0].path,
            Path::new("/w/t/deps/heddle_rust_bugs-fd6a.wasm")
        );
        let bins = parse_artifacts(Build::Binaries, json);
        assert_eq!(bins.len(), 1);
        assert_eq!(
            (bins[0].package.as_str(), bins[0].kind.as_str()),
            ("foo", "bin")
        );
        let list = "tests::a: test\ntests::b: test\nbench_x: bench\n\n";
        assert_eq!(parse_list(list), strings(&["tests::a", "tests::b"]));
        assert!(selected("tests::lost_update", &[]));
        assert!(selected("tests::lost_update", &strings(&["x", "lost"])));
        assert!(!selected("tests::lost_update", &strings(&["abba"])));
        assert_eq!(test_dir_name("tests::a b<c>"), "tests__a_b_c_");
    }

    #[test]
    fn cargo_errors_are_one_line() {
        let err = "   Compiling x v0.1.0\nerror[E0425]: cannot find value `y` in this scope\n --> src/lib.rs:3:5\n  |\n";
        assert_eq!(
            first_error(err),
            "error[E0425]: cannot find value `y` in this scope at src/lib.rs:3:5"
        );
        let err = "error: unexpected argument '--bogus' found\n\nUsage: cargo test\n";
        assert_eq!(first_error(err), "unexpected argument '--bogus' found");
    }
}
