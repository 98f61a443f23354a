//! heddle against shuttle on the same programs, side by side in one
//! invocation: `cargo bench -p heddle-peers --bench peers` (or
//! `benches/peers.sh`, which writes the table into `benches/RESULTS.md`).
//!
//! heddle runs each C source as `heddle fuzz --strategy random --jobs 1` (its
//! own runs/s figure, which leaves out process start and compilation);
//! shuttle runs the Rust port under `RandomScheduler` on this thread. Both use
//! one core. Each program gets `PEERS_ROUNDS` rounds (default 5); a round
//! measures both tools for about `PEERS_SECS` seconds each (default 1),
//! heddle first in even rounds and shuttle first in odd ones, so drifting
//! machine load hits both alike. The table shows the median runs/s of each
//! and the median of the per-round ratios. A second table counts what each
//! tool schedules per run: heddle's steps and decisions (from its campaign
//! summary), shuttle's scheduler calls (through a counting wrapper around
//! `RandomScheduler`, in executions apart from the timed ones).
//!
//! Environment: `HEDDLE` (the binary; default `<target dir>/release/heddle`,
//! built with `cargo build --release -p heddle` if missing), `PEERS_ROUNDS`,
//! `PEERS_SECS`, `PEERS_HEDDLE_ARGS` (more `fuzz` flags for heddle, split at
//! whitespace, e.g. `--races off --memcheck off`: what each checker costs
//! against the same shuttle figures; a `--strategy` there replaces
//! `random`), and `PEERS_WRITE=1` to rewrite the part
//! of `benches/RESULTS.md` between the `peers:begin`/`peers:end` markers
//! (with heddle's defaults only).

#[path = "../shuttle_programs.rs"]
mod shuttle_programs;

#[path = "../../machine.rs"]
mod machine;
use heddle_peers::{
    campaign_stat, heddle_binary, markdown_table, median, parse_fuzz_summary, points_table,
    replace_section, runs_for, workspace_root as root, Case, Points, Row,
};
use machine::{machine, today};
use shuttle::scheduler::{RandomScheduler, Schedule, Scheduler, Task, TaskId};
use shuttle::{Config, MaxSteps, Runner};
use shuttle_programs::CASES;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

/// A calibration run shorter than this fraction of the target time is too
/// noisy to size the measurement from; it is repeated with more runs.
const CALIBRATION_FRACTION: f64 = 0.25;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Runs heddle and shuttle on one case.
struct Peers {
    heddle: PathBuf,
    out: PathBuf,
    /// `PEERS_HEDDLE_ARGS`: flags added to every `heddle fuzz`.
    extra: Vec<String>,
}

impl Peers {
    /// `heddle fuzz` of `runs` seeds; heddle's runs/s. Panics unless every
    /// run passed.
    fn heddle(&self, case: &Case, runs: u64) -> f64 {
        // A fresh campaign directory each time, so no state carries over.
        let _ = std::fs::remove_dir_all(&self.out);
        let mut cmd = Command::new(&self.heddle);
        cmd.arg("fuzz").arg(root().join(case.source));
        if case.fixed {
            cmd.arg("--fixed");
        }
        cmd.args(["--quiet", "--runs", &runs.to_string(), "--jobs", "1"]);
        // `random` unless the extra flags name another strategy.
        if !self.extra.iter().any(|a| a.starts_with("--strategy")) {
            cmd.args(["--strategy", "random"]);
        }
        cmd.arg("--out")
            .arg(&self.out)
            .args(&self.extra)
            .arg("--")
            .args(case.args);
        let o = cmd.output().expect("run heddle");
        let stdout = String::from_utf8_lossy(&o.stdout);
        let summary = stdout.lines().next().and_then(parse_fuzz_summary);
        match summary {
            Some(s) if o.status.success() && s.failing == 0 && s.runs == runs => s.runs_per_sec,
            _ => panic!(
                "heddle fuzz on {} failed ({}):\n{stdout}{}",
                case.name,
                o.status,
                String::from_utf8_lossy(&o.stderr)
            ),
        }
    }

    /// `iterations` shuttle executions under the random scheduler; runs/s.
    fn shuttle(&self, case: &Case, iterations: u64) -> f64 {
        let runner = Runner::new(RandomScheduler::new(iterations as usize), shuttle_config());
        let start = Instant::now();
        let done = runner.run(case.shuttle);
        let secs = start.elapsed().as_secs_f64();
        assert_eq!(done as u64, iterations, "{}", case.name);
        done as f64 / secs
    }
}

/// Executions of `case` under shuttle counted, not timed: (scheduling points,
/// decisions, switches) per execution.
fn shuttle_points(case: &Case, executions: usize) -> (f64, f64, f64) {
    /// `RandomScheduler` with its calls counted.
    struct Counting {
        inner: RandomScheduler,
        points: Arc<AtomicU64>,
        decisions: Arc<AtomicU64>,
        switches: Arc<AtomicU64>,
    }
    impl Scheduler for Counting {
        fn new_execution(&mut self) -> Option<Schedule> {
            self.inner.new_execution()
        }
        fn next_task(
            &mut self,
            runnable: &[&Task],
            current: Option<TaskId>,
            is_yielding: bool,
        ) -> Option<TaskId> {
            self.points.fetch_add(1, Relaxed);
            if runnable.len() > 1 {
                self.decisions.fetch_add(1, Relaxed);
            }
            let next = self.inner.next_task(runnable, current, is_yielding);
            if current.is_some() && next.is_some() && next != current {
                self.switches.fetch_add(1, Relaxed);
            }
            next
        }
        fn next_u64(&mut self) -> u64 {
            self.inner.next_u64()
        }
    }
    let counter = || Arc::new(AtomicU64::new(0));
    let (points, decisions, switches) = (counter(), counter(), counter());
    let scheduler = Counting {
        inner: RandomScheduler::new(executions),
        points: points.clone(),
        decisions: decisions.clone(),
        switches: switches.clone(),
    };
    let done = Runner::new(scheduler, shuttle_config()).run(case.shuttle);
    assert_eq!(done, executions, "{}", case.name);
    let per = |c: &AtomicU64| c.load(Relaxed) as f64 / executions as f64;
    (per(&points), per(&decisions), per(&switches))
}

/// shuttle's configuration: its defaults, but the step bound of heddle's
/// (10^8) rather than 10^6, which the long programs pass.
fn shuttle_config() -> Config {
    let mut c = Config::new();
    c.max_steps = MaxSteps::FailAfter(100_000_000);
    c
}

/// Runs needed for about `secs` with `measure` (runs → runs/s), starting
/// small and growing until a run lasts long enough to trust its rate.
fn calibrate(secs: f64, mut measure: impl FnMut(u64) -> f64) -> u64 {
    let mut runs = 1;
    loop {
        let rate = measure(runs);
        if runs as f64 / rate >= secs * CALIBRATION_FRACTION {
            return runs_for(rate, secs);
        }
        runs = runs_for(rate, secs * CALIBRATION_FRACTION * 1.5).max(runs * 2);
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    let rounds: usize = env_or("PEERS_ROUNDS", 5).max(1);
    let secs: f64 = env_or("PEERS_SECS", 1.0);
    let extra: Vec<String> = std::env::var("PEERS_HEDDLE_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let write = std::env::var("PEERS_WRITE").as_deref() == Ok("1");
    if write && !extra.is_empty() {
        eprintln!("peers: PEERS_WRITE=1 records heddle's defaults only; unset PEERS_HEDDLE_ARGS");
        std::process::exit(2);
    }
    let peers = Peers {
        heddle: heddle_binary(),
        out: std::env::temp_dir().join(format!("heddle-peers-{}", std::process::id())),
        extra,
    };
    let flags = if peers.extra.is_empty() {
        "with `--strategy random` and its defaults (granularity `all`, memory checker and race detector on; \
         its own runs/s, without process start and compilation)"
            .to_string()
    } else {
        let strategy = if peers.extra.iter().any(|a| a.starts_with("--strategy")) {
            ""
        } else {
            "--strategy random "
        };
        format!(
            "with `{strategy}{}` (its own runs/s, without process start and compilation)",
            peers.extra.join(" ")
        )
    };
    let started = today();
    let mut rows = Vec::new();
    let mut points = Vec::new();
    for case in &CASES {
        // Warm-up: heddle compiles the source into its cache, shuttle
        // allocates its continuation stacks.
        let warm = if case.long { 1 } else { 10 };
        peers.heddle(case, warm);
        peers.shuttle(case, warm);
        let heddle_runs = calibrate(secs, |n| peers.heddle(case, n));
        let shuttle_runs = calibrate(secs, |n| peers.shuttle(case, n));
        eprintln!(
            "{}: {heddle_runs} heddle runs, {shuttle_runs} shuttle runs per measurement",
            case.name
        );
        let mut row = Row {
            program: case.name.to_string(),
            heddle: Vec::new(),
            shuttle: Vec::new(),
        };
        for round in 0..rounds {
            let (h, s) = if round % 2 == 0 {
                let h = peers.heddle(case, heddle_runs);
                (h, peers.shuttle(case, shuttle_runs))
            } else {
                let s = peers.shuttle(case, shuttle_runs);
                (peers.heddle(case, heddle_runs), s)
            };
            eprintln!(
                "  round {}: heddle {h:.0} runs/s, shuttle {s:.0} runs/s, ratio {:.2}",
                round + 1,
                h / s
            );
            row.heddle.push(h);
            row.shuttle.push(s);
        }
        // Scheduling points per run: from heddle's last campaign (all its
        // runs), and from shuttle's counted executions.
        let campaign = std::fs::read_to_string(peers.out.join("campaign.toml"))
            .expect("heddle's campaign.toml");
        let stat = |key| campaign_stat(&campaign, key).expect(key);
        let counted = if case.long { 2 } else { 1000 };
        let (shuttle_points, shuttle_decisions, shuttle_switches) = shuttle_points(case, counted);
        points.push(Points {
            program: case.name.to_string(),
            heddle_steps: stat("steps_per_run"),
            heddle_decisions: stat("decisions_per_run"),
            heddle_switches: stat("switches_per_run"),
            heddle_runs_per_sec: median(&row.heddle),
            shuttle_points,
            shuttle_decisions,
            shuttle_switches,
            shuttle_runs_per_sec: median(&row.shuttle),
        });
        rows.push(row);
    }
    let _ = std::fs::remove_dir_all(&peers.out);

    let text = format!(
        "Measured {started} on {} — {rounds} rounds of about {secs} s per tool per \
         program, alternating which goes first; both on one core: heddle \
         `fuzz --jobs 1` {flags}, shuttle 0.9 `RandomScheduler` on one thread \
         (release build; it switches only at its sync and thread calls).\n\n{}\n\
         Scheduling points per run (heddle: every yield point its host saw, \
         the decisions among them with more than one thread to choose from, \
         and its thread switches, over the last measurement's runs; shuttle: \
         calls to its scheduler, those with more than one runnable task, and \
         those that chose another task than the current one, over 1,000 \
         counted executions, 2 for the long runs), and a run's median time over its switches:\n\n{}",
        machine(),
        markdown_table(&rows),
        points_table(&points)
    );
    println!("{text}");

    if write {
        let path = root().join("benches/RESULTS.md");
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        let new = replace_section(
            &old,
            "<!-- peers:begin -->",
            "<!-- peers:end -->",
            "## heddle vs shuttle (cargo bench -p heddle-peers)",
            &text,
        );
        std::fs::write(&path, new).expect("write benches/RESULTS.md");
        eprintln!("wrote {}", path.display());
    }
}
