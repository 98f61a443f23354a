//! Benchmarks of the instrumenter.
//!
//! * `instrument/*`: instrumentation throughput (MB/s of original module) on
//!   the bundled race_bank and codeblock modules at granularity `all`.
//! * `kernel/*`: the run-time cost of instrumentation on an access-heavy
//!   single-threaded kernel (`tests/programs/inst_kernel.c`, ~1.2 million
//!   plain loads/stores), all three under plain wasmtime with real threads
//!   (`runtime::plain`): the original module, and the instrumented module at
//!   `sync` and at `all` with no-op hooks. The ratios instrumented/original
//!   are printed at the end.
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

/// Median wall time of `n` runs of `rounds` rounds.
fn median(p: &PlainProgram, rounds: &str, n: usize) -> Duration {
    let mut t: Vec<Duration> = (0..n)
        .map(|_| {
            let s = Instant::now();
            run_rounds(p, rounds);
            s.elapsed()
        })
        .collect();
    t.sort();
    t[n / 2]
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

    // Side-by-side ratios from interleaved medians (criterion reports each
    // variant on its own).
    // A run also instantiates the module, starts an OS thread and WASI:
    // the same runs with 0 rounds measure that fixed cost, which is
    // subtracted for the kernel-only ratios.
    let mut times = [Duration::ZERO; 3];
    let mut fixed = [Duration::ZERO; 3];
    for (i, v) in variants.iter().enumerate() {
        times[i] = median(&v.program, ROUNDS, 15);
        fixed[i] = median(&v.program, "0", 15);
    }
    let ratio = |i: usize| times[i].as_secs_f64() / times[0].as_secs_f64();
    let kernel = |i: usize| times[i].saturating_sub(fixed[i]).as_secs_f64();
    let kratio = |i: usize| kernel(i) / kernel(0);
    println!(
        "kernel medians: original {:?}, sync {:?}, all {:?} (fixed cost per run {:?} / {:?} / {:?})",
        times[0], times[1], times[2], fixed[0], fixed[1], fixed[2]
    );
    println!(
        "ratios per run: sync/original {:.2}, all/original {:.2}; kernel only: sync/original {:.2}, all/original {:.2}",
        ratio(1),
        ratio(2),
        kratio(1),
        kratio(2)
    );
}

criterion_group!(benches, instrumentation_throughput, kernel_overhead);
criterion_main!(benches);
