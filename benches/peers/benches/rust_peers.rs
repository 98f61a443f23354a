//! heddle against shuttle on classic bugs in Rust programs, side by side in
//! one invocation: `cargo bench -p heddle-peers --bench rust_peers` (or
//! `benches/rust-peers.sh`, which writes the table into `benches/RESULTS.md`).
//!
//! Each bug of `benches/programs/rust/peer_bugs.rs` (plain `std`, compiled
//! with rustc for `wasm32-wasip1-threads`) is searched from `RP_SEEDS`
//! starting seeds (default 20) by each heddle strategy (`heddle fuzz --jobs 1
//! --seed S`, stopping at its first failing run) and, for the same logic
//! written against shuttle (`rust_bugs.rs`), by shuttle's random and PCT
//! schedulers (`Runner::run` from a seeded scheduler, stopping at its first
//! failing execution). A search gives up after `RP_MAX_RUNS` runs (default
//! 10,000). Reported: the median number of runs to the first bug (a search
//! that gave up counts as its cap) and how many searches found it, and each
//! tool's runs/s over `RP_RATE_RUNS` runs (default 10,000: in 1,000 runs of
//! 30 µs, the first failure's one-time work — reading the module's DWARF for
//! its stack, writing its replay file and report, ~20–40 ms — was half of
//! heddle's figure) that go on past failures (`heddle fuzz --keep-going`;
//! shuttle restarted after each failing execution).
//!
//! Environment: `HEDDLE` (the binary; default `<target dir>/release/heddle`),
//! `RP_SEEDS`, `RP_MAX_RUNS`, `RP_RATE_RUNS`, `RP_ONLY` (one bug), and
//! `RP_WRITE=1` to rewrite the part of `benches/RESULTS.md` between the
//! `rust-peers:begin`/`rust-peers:end` markers.

#[path = "../rust_bugs.rs"]
mod rust_bugs;

#[path = "../../machine.rs"]
mod machine;
use heddle_peers::{heddle_binary, median, parse_fuzz_summary, replace_section, workspace_root};
use machine::{machine, today};
use rust_bugs::{Bug, BUGS};
use shuttle::scheduler::{PctScheduler, RandomScheduler, Scheduler};
use shuttle::{Config, Runner};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// PCT depth for both tools.
const PCT_DEPTH: usize = 3;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The searchers compared: heddle strategies, then shuttle schedulers.
#[derive(Clone, Copy)]
enum Searcher {
    /// `heddle fuzz` with this `--strategy` (None: the default portfolio).
    Heddle(Option<&'static str>),
    ShuttleRandom,
    ShuttlePct,
}

const SEARCHERS: [Searcher; 5] = [
    Searcher::Heddle(None),
    Searcher::Heddle(Some("random")),
    Searcher::Heddle(Some("pct:3")),
    Searcher::ShuttleRandom,
    Searcher::ShuttlePct,
];

impl Searcher {
    fn label(self) -> String {
        match self {
            Searcher::Heddle(None) => "heddle default".into(),
            Searcher::Heddle(Some(s)) => format!("heddle {s}"),
            Searcher::ShuttleRandom => "shuttle random".into(),
            Searcher::ShuttlePct => format!("shuttle pct:{PCT_DEPTH}"),
        }
    }
}

/// Executions started by the shuttle search under way.
static EXECUTIONS: AtomicU64 = AtomicU64::new(0);

struct Bench {
    heddle: PathBuf,
    module: PathBuf,
    out: PathBuf,
}

impl Bench {
    /// `heddle fuzz` of `bug` from `seed`: (runs, found, its own runs/s).
    fn heddle(
        &self,
        bug: &Bug,
        strategy: Option<&str>,
        seed: u64,
        runs: u64,
        keep_going: bool,
    ) -> (u64, bool, f64) {
        let _ = std::fs::remove_dir_all(&self.out);
        let mut cmd = Command::new(&self.heddle);
        cmd.arg("fuzz").arg(&self.module);
        cmd.args(["--quiet", "--jobs", "1", "--runs", &runs.to_string()])
            .args(["--seed", &seed.to_string(), "--out"])
            .arg(&self.out);
        if let Some(s) = strategy {
            cmd.args(["--strategy", s]);
        }
        if keep_going {
            cmd.arg("--keep-going");
        }
        cmd.arg("--").arg(bug.name);
        let o = cmd.output().expect("run heddle");
        let stdout = String::from_utf8_lossy(&o.stdout);
        match stdout.lines().next().and_then(parse_fuzz_summary) {
            Some(s) => (s.runs, s.failing > 0, s.runs_per_sec),
            None => panic!(
                "heddle fuzz on {} failed ({}):\n{stdout}{}",
                bug.name,
                o.status,
                String::from_utf8_lossy(&o.stderr)
            ),
        }
    }

    /// One shuttle search of `bug` from `seed`, at most `runs` executions:
    /// (executions, found).
    fn shuttle(&self, bug: &Bug, pct: bool, seed: u64, runs: u64) -> (u64, bool) {
        fn go<S: Scheduler + 'static>(s: S, f: fn()) -> bool {
            let runner = Runner::new(s, Config::new());
            catch_unwind(AssertUnwindSafe(|| {
                runner.run(move || {
                    EXECUTIONS.fetch_add(1, Ordering::Relaxed);
                    f()
                })
            }))
            .is_err()
        }
        EXECUTIONS.store(0, Ordering::Relaxed);
        let n = runs as usize;
        let found = if pct {
            go(PctScheduler::new_from_seed(seed, PCT_DEPTH, n), bug.shuttle)
        } else {
            go(RandomScheduler::new_from_seed(seed, n), bug.shuttle)
        };
        (EXECUTIONS.load(Ordering::Relaxed), found)
    }

    /// Runs to the first bug from `seed`, whether it was found, wall seconds.
    fn search(&self, bug: &Bug, who: Searcher, seed: u64, max: u64) -> (u64, bool, f64) {
        let start = Instant::now();
        let (runs, found) = match who {
            Searcher::Heddle(s) => {
                let (r, f, _) = self.heddle(bug, s, seed, max, false);
                (r, f)
            }
            Searcher::ShuttleRandom => self.shuttle(bug, false, seed, max),
            Searcher::ShuttlePct => self.shuttle(bug, true, seed, max),
        };
        (runs, found, start.elapsed().as_secs_f64())
    }

    /// shuttle's runs/s over `runs` random executions, restarted after each
    /// failing one.
    fn shuttle_rate(&self, bug: &Bug, runs: u64) -> f64 {
        let start = Instant::now();
        let (mut done, mut seed) = (0, 1);
        while done < runs {
            done += self.shuttle(bug, false, seed, runs - done).0;
            seed += 1;
        }
        done as f64 / start.elapsed().as_secs_f64()
    }
}

/// Compiles `peer_bugs.rs` for wasm32-wasip1-threads into `dir`.
fn build_module(dir: &Path) -> PathBuf {
    let src = workspace_root().join("benches/programs/rust/peer_bugs.rs");
    let out = dir.join("peer_bugs.wasm");
    std::fs::create_dir_all(dir).expect("temp dir");
    let st = Command::new("rustc")
        .args([
            "--edition",
            "2021",
            "--target",
            "wasm32-wasip1-threads",
            "-g",
            "-O",
        ])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status()
        .expect("run rustc");
    assert!(st.success(), "rustc {} failed", src.display());
    out
}

fn main() {
    let seeds: u64 = env_or("RP_SEEDS", 20).max(1);
    let max: u64 = env_or("RP_MAX_RUNS", 10_000).max(1);
    let rate_runs: u64 = env_or("RP_RATE_RUNS", 10_000).max(1);
    let only = std::env::var("RP_ONLY").ok();
    let tmp = std::env::temp_dir().join(format!("heddle-rust-peers-{}", std::process::id()));
    let bench = Bench {
        heddle: heddle_binary(),
        module: build_module(&tmp),
        out: tmp.join("out"),
    };
    // shuttle reports each failing execution through the panic hook.
    std::panic::set_hook(Box::new(|_| {}));
    let started = today();
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(workspace_root())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let mut first = String::from("| bug |");
    let mut sep = String::from("|---|");
    for w in SEARCHERS {
        first.push_str(&format!(" {} |", w.label()));
        sep.push_str("---:|");
    }
    first.push_str(" heddle default ÷ shuttle random (runs) |\n");
    sep.push_str("---:|\n");
    let mut runs_table = first + &sep;
    let mut rate_table = String::from(
        "| bug | heddle default runs/s | shuttle random runs/s | heddle ÷ shuttle (runs/s) \
         | heddle default ÷ shuttle random (time to first bug) |\n|---|---:|---:|---:|---:|\n",
    );
    for bug in BUGS
        .iter()
        .filter(|b| only.as_deref().is_none_or(|o| o == b.name))
    {
        // Warm-up: heddle compiles the module into its cache.
        bench.heddle(bug, None, 0, 1, true);
        let mut medians = Vec::new();
        let mut secs = Vec::new();
        runs_table.push_str(&format!("| {} — {} |", bug.name, bug.what));
        for who in SEARCHERS {
            let (mut runs, mut found, mut wall) = (Vec::new(), 0, Vec::new());
            for k in 0..seeds {
                let (r, f, s) = bench.search(bug, who, 1 + k * 1_000_003, max);
                runs.push(r as f64);
                found += f as u64;
                wall.push(s);
            }
            let m = median(&runs);
            eprintln!(
                "{} {}: median {m} runs to the first bug, found {found}/{seeds}, median {:.3} s",
                bug.name,
                who.label(),
                median(&wall)
            );
            runs_table.push_str(&format!(" {m} ({found}/{seeds}) |"));
            medians.push(m);
            secs.push(median(&wall));
        }
        runs_table.push_str(&format!(" {:.2}× |\n", medians[0] / medians[3]));
        let (_, _, h_rate) = bench.heddle(bug, None, 1, rate_runs, true);
        let s_rate = bench.shuttle_rate(bug, rate_runs);
        eprintln!(
            "{}: heddle {h_rate:.0} runs/s, shuttle {s_rate:.0} runs/s",
            bug.name
        );
        rate_table.push_str(&format!(
            "| {} | {h_rate:.0} | {s_rate:.0} | {:.2}× | {:.2}× |\n",
            bug.name,
            h_rate / s_rate,
            (medians[0] / h_rate) / (medians[3] / s_rate),
        ));
    }
    let _ = std::fs::remove_dir_all(&tmp);

    let text = format!(
        "Measured {started} on {}, heddle at commit {commit} (release build) — {seeds} \
         searches per tool and bug from distinct seeds, each stopping at its first \
         failing run or after {max} runs; both on one core (heddle `fuzz --jobs 1`, \
         with its defaults: granularity `all`, memory checker and race detector on; \
         shuttle 0.9 on this thread). Cells: median runs to the first bug (a search \
         that gave up counts as {max}) and how many searches found it. runs/s: \
         {rate_runs} runs going on past failures (heddle's own figure, without \
         process start and compilation). The machine is shared: other jobs ran \
         beside this one, so runs/s are rough (the runs-to-bug counts are not \
         affected).\n\n{runs_table}\n{rate_table}",
        machine(),
    );
    println!("{text}");
    if std::env::var("RP_WRITE").as_deref() == Ok("1") {
        let path = workspace_root().join("benches/RESULTS.md");
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        let new = replace_section(
            &old,
            "<!-- rust-peers:begin -->",
            "<!-- rust-peers:end -->",
            "## Rust programs vs shuttle (`benches/rust-peers.sh`)",
            &text,
        );
        std::fs::write(&path, new).expect("write benches/RESULTS.md");
        eprintln!("wrote {}", path.display());
    }
}
