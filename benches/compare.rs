//! Side by side, in one invocation on one machine: a bundled target as a
//! native pthread program (gcc, real threads) in a stress loop of process
//! runs, the same module under plain wasmtime with real threads, and heddle
//! — runs per second of each and runs to the first bug where it shows.
//!
//! `cargo bench --bench compare` (or `benches/compare.sh`). Each column gets
//! the same wall-time budget (`HEDDLE_COMPARE_SECS`, default 5 s) and the
//! three run one after the other, so machine noise hits them alike. The
//! table replaces the part of `benches/RESULTS.md` between the
//! `compare:begin`/`compare:end` markers.

#[path = "machine.rs"]
mod machine;
use heddle::instrument::Config;
use heddle::runtime::plain::PlainProgram;
use heddle::runtime::{Program, RunConfig};
use machine::{machine, today};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What one way of running a target gave within its budget.
struct Column {
    runs: u64,
    failures: u64,
    /// 1-based index of the first failing run.
    first_failure: Option<u64>,
    secs: f64,
}

impl Column {
    fn rate(&self) -> f64 {
        self.runs as f64 / self.secs
    }
    fn first(&self) -> String {
        match self.first_failure {
            Some(n) => n.to_string(),
            None => format!("none in {}", self.runs),
        }
    }
}

/// Runs `one` (true = the run failed) until `budget` is spent.
fn measure(budget: Duration, mut one: impl FnMut(u64) -> bool) -> Column {
    let start = Instant::now();
    let mut c = Column {
        runs: 0,
        failures: 0,
        first_failure: None,
        secs: 0.0,
    };
    while start.elapsed() < budget {
        let failed = one(c.runs);
        c.runs += 1;
        if failed {
            c.failures += 1;
            c.first_failure.get_or_insert(c.runs);
        }
    }
    c.secs = start.elapsed().as_secs_f64();
    c
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn native_binary(source: &Path) -> PathBuf {
    let out = std::env::temp_dir().join(format!(
        "heddle-compare-{}",
        source.file_stem().unwrap().to_string_lossy()
    ));
    let st = Command::new("gcc")
        .args(["-O2", "-pthread", "-I"])
        .arg(root().join("guest-sdk/include"))
        .arg(source)
        .arg("-o")
        .arg(&out)
        .status()
        .expect("gcc (apt-get install gcc)");
    assert!(st.success(), "gcc failed on {}", source.display());
    out
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    let budget = Duration::from_secs_f64(
        std::env::var("HEDDLE_COMPARE_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5.0),
    );
    let tc = heddle::cc::ensure().expect("toolchain");
    let cases: &[(&str, &[&str])] = &[
        ("targets/race_bank.c", &["2", "2"]),
        ("targets/race_bank.c", &["4", "25"]),
    ];
    let mut table = String::new();
    table.push_str(&format!(
        "Measured {} on {} — each column {:.0} s of wall time, one after the other.\n\n",
        today(),
        machine(),
        budget.as_secs_f64()
    ));
    table.push_str("| target | args | how | runs | runs/s | failing runs | runs to first bug |\n");
    table.push_str("|---|---|---|---:|---:|---:|---:|\n");
    for (source, args) in cases {
        let src = root().join(source);
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let wasm =
            heddle::cc::compile_cached(&tc, std::slice::from_ref(&src), &[]).expect("compile");
        let bytes = std::fs::read(&wasm).unwrap();

        let exe = native_binary(&src);
        let native = measure(budget, |_| {
            !Command::new(&exe)
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("native run")
                .success()
        });

        let plain = PlainProgram::new(&bytes, None).expect("plain program");
        let plain_col = measure(budget, |_| {
            let o = plain
                .run_with_timeout(&args, Some(Duration::from_secs(10)))
                .expect("plain run");
            o.exit_code != 0 || o.trap.is_some()
        });

        let program = Program::new(&bytes, &Config::default()).expect("program");
        let base = RunConfig {
            args: args.clone(),
            ..RunConfig::default()
        };
        let heddle_col = measure(budget, |seed| {
            !program
                .run(&RunConfig {
                    seed,
                    ..base.clone()
                })
                .expect("heddle run")
                .verdict
                .is_pass()
        });

        let name = Path::new(source)
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .to_string();
        let shown = args.join(" ");
        for (how, c) in [
            ("native gcc -O2, process stress loop", &native),
            ("plain wasmtime, real threads", &plain_col),
            ("heddle fuzz (random, 1 core)", &heddle_col),
        ] {
            let line = format!(
                "| {name} | {shown} | {how} | {} | {:.0} | {} | {} |\n",
                c.runs,
                c.rate(),
                c.failures,
                c.first()
            );
            eprint!("{line}");
            table.push_str(&line);
        }
        table.push_str(&format!(
            "| {name} | {shown} | **heddle / native runs/s** | | **{:.1}×** | | |\n",
            heddle_col.rate() / native.rate()
        ));
    }
    let path = root().join("benches/RESULTS.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let (begin, end) = ("<!-- compare:begin -->", "<!-- compare:end -->");
    let block = format!("{begin}\n{table}{end}");
    let new = match (old.find(begin), old.find(end)) {
        (Some(b), Some(e)) if b < e => format!("{}{block}{}", &old[..b], &old[e + end.len()..]),
        _ => format!("{old}\n## Side by side (`benches/compare.sh`)\n\n{block}\n"),
    };
    std::fs::write(&path, new).expect("write benches/RESULTS.md");
    eprintln!("wrote {}", path.display());
}
