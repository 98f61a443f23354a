//! Execution-core benchmarks: whole runs per second, the cost of a yield
//! point that does not switch, and the cost of a thread switch.
//!
//! `cargo bench --bench runtime`. Figures are per core (one run at a time).

use criterion::{criterion_group, criterion_main, Criterion};
use heddle::instrument::{Config, Granularity};
use heddle::runtime::{Program, RunConfig};
use std::path::Path;
use std::time::{Duration, Instant};

fn program(source: &str, granularity: Granularity) -> Program {
    program_with(
        source,
        Config {
            granularity,
            ..Config::default()
        },
    )
}

fn program_with(source: &str, cfg: Config) -> Program {
    let tc = heddle::cc::ensure().expect("toolchain");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let module = heddle::cc::compile_cached(&tc, &[root.join(source)], &[]).expect("compile");
    let bytes = std::fs::read(module).unwrap();
    Program::new(&bytes, &cfg).expect("program")
}

fn cfg(args: &[&str], strategy: &str) -> RunConfig {
    RunConfig {
        args: args.iter().map(|s| s.to_string()).collect(),
        strategy: strategy.into(),
        ..RunConfig::default()
    }
}

/// Seconds per run, over `iters` runs.
fn per_run(p: &Program, c: &RunConfig, iters: u64) -> f64 {
    let start = Instant::now();
    for seed in 0..iters {
        p.run(&RunConfig { seed, ..c.clone() }).unwrap();
    }
    start.elapsed().as_secs_f64() / iters as f64
}

/// Whole runs over successive seeds: a criterion group, then runs/s/core
/// over `iters` seeds printed as `label`.
fn whole_runs(c: &mut Criterion, source: &str, args: &[&str], name: &str, label: &str, iters: u64) {
    let p = program(source, Granularity::All);
    let base = cfg(args, "random");
    let mut seed = 0u64;
    let mut g = c.benchmark_group("run");
    g.measurement_time(Duration::from_secs(5));
    g.bench_function(name, |b| {
        b.iter(|| {
            seed += 1;
            p.run(&RunConfig {
                seed,
                ..base.clone()
            })
            .unwrap()
        })
    });
    g.finish();
    let t = per_run(&p, &base, iters);
    eprintln!(
        "{label}: {:.0} runs/s/core ({:.1} µs per run)",
        1.0 / t,
        t * 1e6
    );
}

fn runs(c: &mut Criterion) {
    whole_runs(
        c,
        "targets/race_bank.c",
        &["2", "2"],
        "race_bank_2x2_random",
        "race_bank 2x2",
        2000,
    );
}

fn yield_points(c: &mut Criterion) {
    // Cost of a non-switching yield point: the difference between runs with
    // N and 0 iterations, divided by the yield points executed.
    let p = program("benches/programs/yield_loop.c", Granularity::All);
    let n = 200_000u64;
    let big = cfg(&[&n.to_string()], "random");
    let small = cfg(&["0"], "random");
    let mut g = c.benchmark_group("yield");
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("yield_loop_200k", |b| b.iter(|| p.run(&big).unwrap()));
    g.finish();
    let steps = p.run(&big).unwrap().steps - p.run(&small).unwrap().steps;
    let dt = per_run(&p, &big, 20) - per_run(&p, &small, 200);
    eprintln!(
        "yield point without switch: {:.2} ns ({steps} yield points; memcheck and races on)",
        dt / steps as f64 * 1e9
    );
    // The same loop on the fast path: nothing to do per access, so the
    // guest skips the yield points and the host only counts them.
    let p = program_with(
        "benches/programs/yield_loop.c",
        Config {
            memcheck: Some(false),
            ..Config::default()
        },
    );
    let fast = |c: RunConfig| RunConfig {
        races: heddle::runtime::RaceMode::Off,
        ..c
    };
    let (big, small) = (fast(big), fast(small));
    let (rb, rs) = (p.run(&big).unwrap(), p.run(&small).unwrap());
    assert!(rb.skipped > 0, "the fast path was not taken");
    let steps = rb.steps - rs.steps;
    let dt = per_run(&p, &big, 50) - per_run(&p, &small, 200);
    eprintln!(
        "yield point without switch, fast path: {:.2} ns ({steps} yield points, {} skipped; memcheck and races off)",
        dt / steps as f64 * 1e9,
        rb.skipped - rs.skipped
    );
}

fn switches(c: &mut Criterion) {
    let p = program("benches/programs/pingpong.c", Granularity::All);
    let n = 20_000u64;
    let big = cfg(&[&n.to_string()], "rr:0");
    let small = cfg(&["0"], "rr:0");
    let mut g = c.benchmark_group("switch");
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("pingpong_20k_rr0", |b| b.iter(|| p.run(&big).unwrap()));
    g.finish();
    let rb = p.run(&big).unwrap();
    let rs = p.run(&small).unwrap();
    let switches = rb.switches - rs.switches;
    let steps = rb.steps - rs.steps;
    let dt = per_run(&p, &big, 10) - per_run(&p, &small, 200);
    eprintln!(
        "thread switch: {:.0} ns per switch ({switches} switches over {steps} yield points)",
        dt / switches as f64 * 1e9
    );
}

fn memcheck(c: &mut Criterion) {
    let on = program_with("benches/programs/alloc_loop.c", Config::default());
    let off = program_with(
        "benches/programs/alloc_loop.c",
        Config {
            memcheck: Some(false),
            ..Config::default()
        },
    );
    let base = cfg(&["2000"], "random");
    let mut g = c.benchmark_group("memcheck");
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("alloc_loop_on", |b| b.iter(|| on.run(&base).unwrap()));
    g.bench_function("alloc_loop_off", |b| b.iter(|| off.run(&base).unwrap()));
    g.finish();
    let t_on = per_run(&on, &base, 30);
    let t_off = per_run(&off, &base, 30);
    eprintln!(
        "memcheck on an allocation-heavy kernel: {:.2}x ({:.0} µs on, {:.0} µs off per run)",
        t_on / t_off,
        t_on * 1e6,
        t_off * 1e6
    );
}

fn races(c: &mut Criterion) {
    let p = program("targets/race_bank.c", Granularity::All);
    let report = RunConfig {
        races: heddle::runtime::RaceMode::Report,
        ..cfg(&["4", "25"], "random")
    };
    let off = RunConfig {
        races: heddle::runtime::RaceMode::Off,
        ..report.clone()
    };
    let mut g = c.benchmark_group("races");
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("race_bank_4x25_report", |b| {
        b.iter(|| p.run(&report).unwrap())
    });
    g.bench_function("race_bank_4x25_off", |b| b.iter(|| p.run(&off).unwrap()));
    g.finish();
    let t_on = per_run(&p, &report, 200);
    let t_off = per_run(&p, &off, 200);
    eprintln!(
        "--races report vs off on race_bank 4x25: {:.2}x ({:.0} µs vs {:.0} µs per run)",
        t_on / t_off,
        t_on * 1e6,
        t_off * 1e6
    );
}

fn condvar16(c: &mut Criterion) {
    whole_runs(
        c,
        "benches/programs/condvar_ring.c",
        &["16", "2"],
        "condvar_ring_16x2_random",
        "condvar_ring 16 threads",
        200,
    );
}

/// A field of `/proc/self/status` in KiB (`VmHWM`, `VmRSS`).
fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim_start_matches(':')
                .trim()
                .strip_suffix("kB")
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Peak resident memory a closure adds, in KiB (resets the high-water mark
/// first; Linux only).
fn peak_kib(f: impl FnOnce()) -> u64 {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = status_kib("VmRSS");
    f();
    status_kib("VmHWM").saturating_sub(before)
}

fn scaling(c: &mut Criterion) {
    let p = program("benches/programs/many_threads.c", Granularity::All);
    // Memory first, while most pool slots are still untouched: the peak
    // resident memory one 1000-thread run adds (instances, fiber stacks,
    // scheduler state; guest memory is shared and counted once).
    let kib = peak_kib(|| {
        p.run(&cfg(&["1000"], "random")).unwrap();
    });
    eprintln!(
        "1000 guest threads: peak +{kib} KiB resident ({:.1} KiB per guest thread)",
        kib as f64 / 1000.0
    );
    let mut g = c.benchmark_group("threads");
    g.measurement_time(Duration::from_secs(5));
    for n in [1u64, 10, 100, 1000] {
        let run = cfg(&[&n.to_string()], "random");
        g.bench_function(format!("many_threads_{n}"), |b| {
            b.iter(|| p.run(&run).unwrap())
        });
    }
    g.finish();
    let one = per_run(&p, &cfg(&["1"], "random"), 200);
    for n in [10u64, 100, 1000] {
        let run = cfg(&[&n.to_string()], "random");
        let t = per_run(&p, &run, if n == 1000 { 10 } else { 50 });
        eprintln!(
            "{n} guest threads: {:.2} ms per run, {:.1} µs per extra thread \
             (instantiate + spawn + join + one locked increment)",
            t * 1e3,
            (t - one) / (n - 1) as f64 * 1e6,
        );
    }
}

criterion_group!(
    benches,
    runs,
    condvar16,
    scaling,
    yield_points,
    switches,
    memcheck,
    races
);
criterion_main!(benches);
