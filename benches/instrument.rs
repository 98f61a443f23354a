//! Benchmarks of the instrumenter.
//!
//! * `instrument/*`: instrumentation throughput (MB/s of original module) on
//!   the bundled race_bank and codeblock modules at granularity `all`.
//! * `kernel/*`: the run-time cost of instrumentation on an access-heavy
//!   single-threaded kernel (`tests/programs/inst_kernel.c` with 1,000
//!   rounds, ~12 million plain loads/stores), all three under plain wasmtime
//!   with real threads (`runtime::plain`): the original module, and the
//!   instrumented module at `sync` and at `all` with no-op hooks. The ratios
//!   instrumented/original are printed at the end, measured side by side:
//!   31 rounds that each run every variant once.
//!
//! `cargo bench --bench instrument` takes about a minute.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use heddle::instrument::{instrument, Config, Granularity};
use heddle::runtime::plain::{PlainOutcome, PlainProgram};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

/// Compiles `source` (relative to the repo) with heddle's toolchain.
fn module(source: &str, flags: &[&str]) -> Vec<u8> {
    let tc = heddle::cc::ensure().expect("toolchain");
    let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    let path = heddle::cc::compile_cached(&tc, &[repo().join(source)], &flags).expect("compile");
    std::fs::read(path).expect("read module")
}

fn cfg(granularity: Granularity) -> Config {
    Config {
        granularity,
        ..Config::default()
    }
}

fn instrumentation_throughput(c: &mut Criterion) {
    let mut g = c.benchmark_group("instrument");
    g.measurement_time(Duration::from_secs(3));
    g.warm_up_time(Duration::from_secs(1));
    g.sample_size(20);
    for source in ["targets/race_bank.c", "targets/codeblock.cpp"] {
        let bytes = module(source, &[]);
        let name = Path::new(source)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or(source)
            .to_string();
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(&name), &bytes, |b, bytes| {
            b.iter(|| instrument(bytes, &cfg(Granularity::All)).expect("instrument"))
        });
    }
    g.finish();
}

const KERNEL: &str = "tests/programs/inst_kernel.c";
const ROUNDS: &str = "1000";

struct Variant {
    name: &'static str,
    program: PlainProgram,
}

fn kernel_variants() -> Vec<Variant> {
    let bytes = module(KERNEL, &["-O1"]);
    let sync = instrument(&bytes, &cfg(Granularity::Sync)).expect("instrument sync");
    let all = instrument(&bytes, &cfg(Granularity::All)).expect("instrument all");
    let plain_accesses = all
        .sites
        .sites
        .iter()
        .filter(|s| s.user && s.kind.is_access() && !s.atomic)
        .count();
    assert!(plain_accesses > 0, "the kernel has no plain-access sites");
    vec![
        Variant {
            name: "original",
            program: PlainProgram::new(&bytes, None).expect("original"),
        },
        Variant {
            name: "sync",
            program: PlainProgram::new(&sync.module, Some(&sync.sites)).expect("sync"),
        },
        Variant {
            name: "all",
            program: PlainProgram::new(&all.module, Some(&all.sites)).expect("all"),
        },
    ]
}

fn run(p: &PlainProgram) -> PlainOutcome {
    run_rounds(p, ROUNDS)
}

fn run_rounds(p: &PlainProgram, rounds: &str) -> PlainOutcome {
    let o = p.run(&[rounds.to_string()]).expect("run");
    assert!(o.trap.is_none() && o.exit_code == 0, "{o:?}");
    o
}

/// Wall time of one run of `rounds` rounds.
fn timed(p: &PlainProgram, rounds: &str) -> Duration {
    let s = Instant::now();
    run_rounds(p, rounds);
    s.elapsed()
}

/// Rounds of the side-by-side measurement.
const SIDE_ROUNDS: usize = 31;

/// The median and the quartiles of `v`.
fn quartiles(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: usize| v[(v.len() - 1) * q / 4];
    (at(2), at(1), at(3))
}

fn kernel_overhead(c: &mut Criterion) {
    let variants = kernel_variants();
    let expected = run(&variants[0].program).stdout;
    for v in &variants {
        assert_eq!(
            run(&v.program).stdout,
            expected,
            "{} computes differently",
            v.name
        );
    }
    let mut g = c.benchmark_group("kernel");
    g.measurement_time(Duration::from_secs(3));
    g.warm_up_time(Duration::from_secs(1));
    g.sample_size(20);
    for v in &variants {
        g.bench_function(v.name, |b| b.iter(|| run(&v.program)));
    }
    g.finish();

    // Side by side: each round runs every variant once, in an order that
    // rotates from round to round, and each instrumented run is divided by
    // the original run of the same round; the figures are the median and
    // quartiles of those ratios. (Timing each variant in a block of its own
    // lets the machine's drift between blocks into the ratio.) A run also
    // instantiates the module, starts an OS thread and WASI: the same runs
    // with 0 rounds measure that fixed cost, and the kernel-only ratios
    // subtract its median.
    let n = variants.len();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut fixed: Vec<Vec<f64>> = vec![Vec::new(); n];
    for r in 0..SIDE_ROUNDS {
        for k in 0..n {
            let i = (r + k) % n;
            times[i].push(timed(&variants[i].program, ROUNDS).as_secs_f64());
            fixed[i].push(timed(&variants[i].program, "0").as_secs_f64());
        }
    }
    let fixed_median: Vec<f64> = fixed.iter_mut().map(|f| quartiles(f).0).collect();
    let mut line =
        format!("side by side over {SIDE_ROUNDS} rounds ({ROUNDS} kernel rounds per run):");
    for i in 1..n {
        let mut whole: Vec<f64> = (0..SIDE_ROUNDS)
            .map(|r| times[i][r] / times[0][r])
            .collect();
        let mut kernel: Vec<f64> = (0..SIDE_ROUNDS)
            .map(|r| (times[i][r] - fixed_median[i]) / (times[0][r] - fixed_median[0]))
            .collect();
        let (m, lo, hi) = quartiles(&mut whole);
        let (km, klo, khi) = quartiles(&mut kernel);
        // Noise only ever adds time: the fastest runs are the least
        // disturbed, and their ratio is the steadiest figure.
        let fastest = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let best = fastest(&times[i]) / fastest(&times[0]);
        line += &format!(
            "\n  {}/original: {m:.3}x per run (quartiles {lo:.3}–{hi:.3}), kernel only {km:.3}x ({klo:.3}–{khi:.3}), fastest/fastest {best:.3}x",
            variants[i].name
        );
    }
    let median_ms = |v: &mut Vec<f64>| quartiles(v).0 * 1e3;
    line += &format!(
        "\n  medians per run: {}; fixed cost per run: {}",
        (0..n)
            .map(|i| format!("{} {:.3} ms", variants[i].name, median_ms(&mut times[i])))
            .collect::<Vec<_>>()
            .join(", "),
        (0..n)
            .map(|i| format!("{:.1} µs", fixed_median[i] * 1e6))
            .collect::<Vec<_>>()
            .join(" / ")
    );
    println!("{line}");
}

criterion_group!(benches, instrumentation_throughput, kernel_overhead);
criterion_main!(benches);
