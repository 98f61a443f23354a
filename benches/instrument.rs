//! Benchmarks of the instrumenter.
//!
//! * `instrument/*`: instrumentation throughput (MB/s of original module) on
//!   the bundled race_bank and codeblock modules at granularity `all`.
//! * `kernel/*`: the run-time cost of instrumentation on an access-heavy
//!   single-threaded kernel (`tests/programs/inst_kernel.c` with 1,000
//!   rounds, ~12 million plain loads/stores), all under plain wasmtime
//!   with real threads (`runtime::plain`): the original module, and the
//!   instrumented module at `sync` and at `all` with no-op hooks (and, for
//!   comparison, at `sync` and at `all` with the budget and the skip counter
//!   kept in their globals, `Config::budget_in_global`). The ratios
//!   instrumented/original are printed at the end, measured side by side:
//!   101 rounds that each run every variant once (300 kernel rounds each),
//!   timed by the guest around its rounds. They are measured twice:
//!   with epoch interruption off (wasmtime's default, and heddle's own
//!   engine) and on (the plain runner's engine, which needs it to stop the
//!   other threads of a run).
//!
//! `cargo bench --bench instrument` takes about a minute.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use heddle::instrument::{instrument, Config, Granularity};
use heddle::runtime::plain::{engine_with, PlainOutcome, PlainProgram};
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

/// The kernel as compiled, instrumented at `sync` and at `all`, compiled
/// by an engine with epoch interruption on or off.
fn kernel_variants(epochs: bool) -> Vec<Variant> {
    let bytes = module(KERNEL, &["-O1"]);
    let engine = engine_with(epochs).expect("engine");
    let compile = |b: &[u8], sites| {
        let m = wasmtime::Module::new(&engine, b).expect("compile");
        PlainProgram::from_module(&engine, m, sites).expect("program")
    };
    let sync = instrument(&bytes, &cfg(Granularity::Sync)).expect("instrument sync");
    let all = instrument(&bytes, &cfg(Granularity::All)).expect("instrument all");
    let sync_global = instrument(
        &bytes,
        &Config {
            budget_in_global: true,
            ..cfg(Granularity::Sync)
        },
    )
    .expect("instrument sync, budget in the global");
    let all_global = instrument(
        &bytes,
        &Config {
            budget_in_global: true,
            ..cfg(Granularity::All)
        },
    )
    .expect("instrument all, counters in their globals");
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
            program: compile(&bytes, None),
        },
        Variant {
            name: "sync",
            program: compile(&sync.module, Some(&sync.sites)),
        },
        Variant {
            name: "sync-global-budget",
            program: compile(&sync_global.module, Some(&sync_global.sites)),
        },
        Variant {
            name: "all",
            program: compile(&all.module, Some(&all.sites)),
        },
        Variant {
            name: "all-global-counters",
            program: compile(&all_global.module, Some(&all_global.sites)),
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

/// Wall time of one run of `rounds` rounds, and the time the guest itself
/// measured around its rounds (its `kernel_ns` line on stderr).
fn timed(p: &PlainProgram, rounds: &str) -> (f64, f64) {
    let s = Instant::now();
    let o = run_rounds(p, rounds);
    let whole = s.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&o.stderr);
    let ns: f64 = err
        .lines()
        .find_map(|l| l.strip_prefix("kernel_ns "))
        .and_then(|n| n.trim().parse().ok())
        .expect("the kernel prints kernel_ns");
    (whole, ns * 1e-9)
}

/// Rounds of the side-by-side measurement, and kernel rounds per run there
/// (short runs, so that a burst of load on the machine spoils few rounds).
const SIDE_ROUNDS: usize = 101;
const SIDE_KERNEL_ROUNDS: &str = "300";

/// The first decile of `v`: the time a run takes when the machine leaves it
/// alone, less sensitive to one lucky run than the fastest.
fn decile(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) / 10]
}

/// The median and the quartiles of `v`.
fn quartiles(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: usize| v[(v.len() - 1) * q / 4];
    (at(2), at(1), at(3))
}

fn kernel_overhead(c: &mut Criterion) {
    // Epoch interruption off: wasmtime's default and heddle's own engine
    // (which never interrupts a guest), so that what is measured is the
    // rewriter's code. The plain runner's engine has it on, to stop the
    // other threads of a run when one exits: its per-loop check takes a
    // register in every loop and is measured second.
    let variants = kernel_variants(false);
    check_and_bench(c, &variants);
    side_by_side(&variants, "epoch interruption off");
    side_by_side(&kernel_variants(true), "epoch interruption on");
}

/// Checks that every variant computes the same checksum, then times each
/// with criterion.
fn check_and_bench(c: &mut Criterion, variants: &[Variant]) {
    let expected = run(&variants[0].program).stdout;
    for v in variants {
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
    for v in variants {
        g.bench_function(v.name, |b| b.iter(|| run(&v.program)));
    }
    g.finish();
}

fn side_by_side(variants: &[Variant], label: &str) {
    // Side by side: each round runs every variant once, in an order that
    // rotates from round to round, and each instrumented run is divided by
    // the original run of the same round; the figures are the median and
    // quartiles of those ratios. (Timing each variant in a block of its own
    // lets the machine's drift between blocks into the ratio.) "Whole run"
    // includes instantiation, an OS thread and WASI start-up; "kernel" is
    // the time the guest measured around its rounds.
    let n = variants.len();
    let mut whole: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut kernel: Vec<Vec<f64>> = vec![Vec::new(); n];
    for r in 0..SIDE_ROUNDS {
        for k in 0..n {
            let i = (r + k) % n;
            let (w, kt) = timed(&variants[i].program, SIDE_KERNEL_ROUNDS);
            whole[i].push(w);
            kernel[i].push(kt);
        }
    }
    let mut line = format!(
        "{label}, side by side over {SIDE_ROUNDS} rounds ({SIDE_KERNEL_ROUNDS} kernel rounds per run):"
    );
    let per_round = |t: &[Vec<f64>], i: usize| -> Vec<f64> {
        (0..SIDE_ROUNDS).map(|r| t[i][r] / t[0][r]).collect()
    };
    // Noise only ever adds time: the fastest runs are the least disturbed,
    // and their ratio is the steadiest figure.
    let fastest = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    for i in 1..n {
        let (m, _, _) = quartiles(&mut per_round(&whole, i));
        let (km, klo, khi) = quartiles(&mut per_round(&kernel, i));
        let best = fastest(&kernel[i]) / fastest(&kernel[0]);
        let low = decile(&mut kernel[i].clone()) / decile(&mut kernel[0].clone());
        line += &format!(
            "\n  {}/original: kernel {km:.3}x (quartiles {klo:.3}–{khi:.3}), first decile/first decile {low:.3}x, fastest/fastest {best:.3}x; whole run {m:.3}x",
            variants[i].name
        );
    }
    line += &format!(
        "\n  median kernel time per run: {}",
        (0..n)
            .map(|i| format!(
                "{} {:.3} ms",
                variants[i].name,
                quartiles(&mut kernel[i]).0 * 1e3
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("{line}");
}

criterion_group!(benches, instrumentation_throughput, kernel_overhead);
criterion_main!(benches);
