//! The deterministic execution core: verdicts of the bundled targets,
//! determinism, replay files and bad input.

use crate::common::*;
use heddle::instrument::Granularity;
use heddle::runtime::{Program, RunConfig};
use heddle::trace::replay::ReplayFile;
use heddle::verdict::Verdict;

/// Strategies every fixed variant must pass under.
const STRATEGIES: &[&str] = &["random", "pct:3", "rr"];

/// The verdict kind a buggy build is expected to show here (the memory
/// checker is on by default at granularity `all`).
fn expected_buggy(e: &heddle::manifest::Entry) -> String {
    e.buggy.clone()
}

/// PCT needs its step estimate; use the CLI's calibration.
fn calibrated(p: &heddle::runtime::Program, cfg: RunConfig) -> RunConfig {
    p.calibrate(cfg).expect("calibrate")
}

#[test]
fn buggy_variants_show_their_verdict_within_the_stated_seeds() {
    let m = manifest();
    let mut report = Vec::new();
    for e in &m.targets {
        let want = expected_buggy(e);
        let p = program(&e.source, false, Granularity::All);
        if want == "pass" {
            continue; // covered by `pass_only_targets_pass_everywhere`
        }
        let strategy = e.hunt_strategy.clone().unwrap_or_else(|| "random".into());
        let seeds = e.hunt_seeds.unwrap_or(1000);
        let base = calibrated(&p, config(e, &strategy, 0));
        let found = (0..seeds).find(|&seed| {
            let r = run(
                &p,
                &RunConfig {
                    seed,
                    ..base.clone()
                },
            );
            assert!(
                r.verdict.is_pass() || r.verdict.kind() == want,
                "{}: seed {seed} gave an unexpected verdict: {}",
                e.name,
                r.verdict.summary()
            );
            r.verdict.kind() == want
        });
        let seed = found.unwrap_or_else(|| {
            panic!("{}: no `{want}` within {seeds} seeds of {strategy}", e.name)
        });
        report.push(format!("{}: {want} at seed {seed} ({strategy})", e.name));
    }
    eprintln!("{}", report.join("\n"));
}

#[test]
fn fixed_variants_pass_2000_seeds_under_every_strategy() {
    let m = manifest();
    let mut jobs = Vec::new();
    for e in &m.targets {
        for s in STRATEGIES {
            jobs.push((e.clone(), s.to_string()));
        }
    }
    par_map(&jobs, |(e, strategy)| {
        let p = program(&e.source, true, Granularity::All);
        let seeds = if e.large { 500 } else { 2000 };
        let base = calibrated(&p, config(e, strategy, 0));
        for seed in 0..seeds {
            let r = run(
                &p,
                &RunConfig {
                    seed,
                    ..base.clone()
                },
            );
            assert!(
                r.verdict.is_pass(),
                "{} fixed, {strategy}, seed {seed}: {}",
                e.name,
                r.verdict.summary()
            );
        }
    });
}

#[test]
fn pass_only_targets_pass_everywhere() {
    // spin_barrier must end under every schedule (no hang), and timed_wait
    // must pass in virtual time (no deadlock), buggy build included.
    for name in ["spin_barrier", "timed_wait"] {
        let e = entry(name);
        let jobs: Vec<String> = STRATEGIES
            .iter()
            .chain(&["pct:10"])
            .map(|s| s.to_string())
            .collect();
        par_map(&jobs, |strategy| {
            for granularity in [Granularity::All, Granularity::Sync] {
                let p = program(&e.source, false, granularity);
                let base = calibrated(&p, config(&e, strategy, 0));
                assert_passes(
                    &p,
                    &base,
                    0..1000,
                    &format!("{name} {strategy} {granularity}"),
                );
            }
        });
    }
}

#[test]
fn timed_wait_uses_virtual_time() {
    let e = entry("timed_wait");
    let p = program(&e.source, false, Granularity::All);
    let r = run(&p, &config(&e, "random", 1));
    assert!(r.verdict.is_pass(), "{}", r.verdict.summary());
    let out = text(&r.stdout);
    assert!(
        out.contains("AB"),
        "sleepers woke in the wrong order: {out}"
    );
}

/// The guest's random bytes are a function of the seed alone, the same
/// from a run on a reused instance, and the same as every earlier version
/// gave (a replay recorded then must see them again): seeds 0 and 7 are
/// pinned.
#[test]
fn guest_random_bytes_follow_the_seed() {
    let bytes = std::fs::read(build("tests/programs/entropy.c", &[])).unwrap();
    let p = Program::new(&bytes, &heddle::instrument::Config::default()).expect("program");
    let out = |seed| {
        let r = run(
            &p,
            &RunConfig {
                seed,
                ..RunConfig::default()
            },
        );
        assert!(r.verdict.is_pass(), "{:?}", r.verdict);
        text(&r.stdout)
    };
    let zero = "3ac441279a6baf5e6a3fd4f1\ne84e89711d1f09ad96d3867a\n";
    assert_eq!(out(0), zero);
    assert!(out(7).starts_with("29091a7c4a52542787fb6dc5\n"));
    // Again on the instances the runs above left.
    assert_eq!(out(0), zero);
}

/// A join that returned is not what a later wait waits for: the report
/// names the semaphore and its line, in fast and diagnostic runs alike.
#[test]
fn a_wait_after_a_join_is_reported_as_itself() {
    let bytes = std::fs::read(build("tests/programs/join_then_wait.c", &[])).unwrap();
    let p = Program::new(&bytes, &heddle::instrument::Config::default()).expect("program");
    let src = std::fs::read_to_string(repo().join("tests/programs/join_then_wait.c")).unwrap();
    let line = src
        .lines()
        .position(|l| l.contains("sem_wait(&never)"))
        .unwrap()
        + 1;
    for diagnostics in [false, true] {
        let cfg = RunConfig {
            diagnostics,
            ..RunConfig::default()
        };
        let Verdict::Deadlock { threads } = run(&p, &cfg).verdict else {
            panic!("diagnostics {diagnostics}: not a deadlock");
        };
        assert_eq!(threads.len(), 1, "{threads:?}");
        let t = &threads[0];
        assert_eq!(t.object.as_deref(), Some("never"), "{t:?}");
        assert_eq!(t.owner, None, "{t:?}");
        assert_eq!(t.waits_at, format!("join_then_wait.c:{line}"), "{t:?}");
    }
}

#[test]
fn deadlock_abba_reports_both_threads_mutexes_and_owners() {
    let e = entry("deadlock_abba");
    let p = program(&e.source, false, Granularity::All);
    let base = RunConfig {
        diagnostics: true,
        ..calibrated(&p, config(&e, "pct:3", 0))
    };
    let (seed, threads) = (0..2000)
        .find_map(|seed| {
            match run(
                &p,
                &RunConfig {
                    seed,
                    ..base.clone()
                },
            )
            .verdict
            {
                Verdict::Deadlock { threads } => Some((seed, threads)),
                _ => None,
            }
        })
        .expect("a deadlock within 2000 seeds");
    let t1 = threads
        .iter()
        .find(|t| t.name.as_deref() == Some("t1"))
        .expect("t1 blocked");
    let t2 = threads
        .iter()
        .find(|t| t.name.as_deref() == Some("t2"))
        .expect("t2 blocked");
    assert_eq!(t1.object.as_deref(), Some("lock_b"), "seed {seed}: {t1:?}");
    assert_eq!(t2.object.as_deref(), Some("lock_a"), "seed {seed}: {t2:?}");
    assert_eq!(t1.owner, Some(t2.tid));
    assert_eq!(t2.owner, Some(t1.tid));
    assert_eq!(t1.holds.len(), 1);
    assert_eq!(t1.holds[0].object.as_deref(), Some("lock_a"));
    assert_eq!(t2.holds[0].object.as_deref(), Some("lock_b"));
    let src = std::fs::read_to_string(repo().join("targets/deadlock_abba.c")).unwrap();
    let line_of = |needle: &str, nth: usize| {
        src.lines()
            .enumerate()
            .filter(|(_, l)| l.contains(needle))
            .nth(nth)
            .map(|(i, _)| i + 1)
            .unwrap()
    };
    // t1 took lock_a at its first lock call and waits in its second.
    assert_eq!(
        t1.holds[0].site,
        format!(
            "deadlock_abba.c:{}",
            line_of("pthread_mutex_lock(&lock_a)", 0)
        )
    );
    let wait_line = line_of("pthread_mutex_lock(&lock_b)", 0);
    assert!(
        t1.stack.iter().any(|f| f
            .loc
            .as_ref()
            .is_some_and(|l| l.short() == format!("deadlock_abba.c:{wait_line}"))),
        "t1's stack should show deadlock_abba.c:{wait_line}: {:?}",
        t1.stack
    );
    let summary = Verdict::Deadlock {
        threads: threads.clone(),
    }
    .summary();
    assert!(
        summary.contains("lock_a") && summary.contains("lock_b") && summary.contains("held by"),
        "{summary}"
    );
}

/// Two runs of the same (module, config, seed) are identical in every byte
/// of their trace and output.
#[test]
fn runs_are_deterministic() {
    let m = manifest();
    let mut jobs = Vec::new();
    for e in &m.targets {
        if e.large {
            continue;
        }
        for fixed in [false, true] {
            for s in STRATEGIES {
                jobs.push((e.clone(), fixed, s.to_string()));
            }
        }
    }
    par_map(&jobs, |(e, fixed, strategy)| {
        let p = program(&e.source, *fixed, Granularity::All);
        let base = RunConfig {
            record_events: true,
            ..calibrated(&p, config(e, strategy, 0))
        };
        for seed in 0..200 {
            let cfg = RunConfig {
                seed,
                ..base.clone()
            };
            let a = run(&p, &cfg);
            let b = run(&p, &cfg);
            assert_eq!(
                a.decisions, b.decisions,
                "{} {strategy} seed {seed}: decisions differ",
                e.name
            );
            assert_eq!(
                a.events, b.events,
                "{} {strategy} seed {seed}: events differ",
                e.name
            );
            assert_eq!(a.stdout, b.stdout, "{} seed {seed}", e.name);
            assert_eq!(a.stderr, b.stderr, "{} seed {seed}", e.name);
            assert_eq!(a.verdict, b.verdict, "{} seed {seed}", e.name);
            // Recording events and capturing stacks never change the schedule.
            let c = run(
                &p,
                &RunConfig {
                    record_events: false,
                    diagnostics: true,
                    ..cfg.clone()
                },
            );
            assert_eq!(
                a.decisions, c.decisions,
                "{} seed {seed}: diagnostics changed the schedule",
                e.name
            );
        }
    });
}

/// A fresh process gets the same runs: the same failing seeds, whatever the
/// number of worker threads.
#[test]
fn fuzz_results_do_not_depend_on_jobs() {
    let out_dir = tempdir();
    let listing = |jobs: &str| {
        let out = heddle_out(&[
            "fuzz",
            "targets/race_bank.c",
            "--runs",
            "300",
            "--keep-going",
            "--list-failures",
            "--jobs",
            jobs,
            "--out",
            out_dir.path().to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        let t = text(&out.stdout);
        t.lines()
            .filter(|l| l.starts_with("failing seed"))
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let one = listing("1");
    let two = listing("2");
    assert!(!one.is_empty());
    assert_eq!(one, two);
}

fn fuzz_to_replay(dir: &std::path::Path, target: &str, extra: &[&str]) -> std::path::PathBuf {
    let mut args = vec![
        "fuzz",
        target,
        "--runs",
        "2000",
        "--out",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = heddle_out(&args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "fuzz should find the bug: {}",
        text(&out.stdout)
    );
    let stdout = text(&out.stdout);
    let path = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: heddle replay "))
        .expect("replay command printed");
    repo().join(path)
}

#[test]
fn replay_files_reproduce_in_a_fresh_process() {
    let dir = tempdir();
    for (target, extra) in [
        ("targets/race_bank.c", vec![]),
        ("targets/deadlock_abba.c", vec!["--strategy", "pct:3"]),
        ("targets/codeblock.cpp", vec![]),
        ("targets/lost_wakeup.c", vec!["--strategy", "pct:3"]),
    ] {
        let path = fuzz_to_replay(dir.path(), target, &extra);
        let file = ReplayFile::load(&path).expect("valid replay file");
        assert_eq!(file.heddle, heddle::trace::replay::writer());
        assert_eq!(
            file.instrumenter_version(),
            Some(heddle::instrument::INSTRUMENTER_VERSION)
        );
        let out = heddle_out(&["replay", path.to_str().unwrap()]);
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{target}: {stdout}{}",
            text(&out.stderr)
        );
        assert!(
            stdout.contains("replay reproduced the recorded run"),
            "{target}: {stdout}"
        );
        assert!(stdout.contains(&file.verdict.summary), "{target}: {stdout}");
    }
}

#[test]
fn an_edited_decision_makes_replay_report_divergence_at_that_step() {
    let dir = tempdir();
    let path = fuzz_to_replay(dir.path(), "targets/race_bank.c", &[]);
    let mut file = ReplayFile::load(&path).unwrap();
    let mut ds = file.decisions().unwrap();
    // Pick a thread decision with two options and choose a thread the run
    // does not have (the other thread may be at the same site, which would
    // make the edit a choice the run allows).
    let other = 9;
    let k = ds
        .iter()
        .enumerate()
        .position(|(i, d)| matches!(d, heddle::trace::Decision::Thread { options: 2, .. }) && i > 5)
        .expect("a two-way decision");
    if let heddle::trace::Decision::Thread { ref mut tid, .. } = ds[k] {
        *tid = other;
    }
    file.set_decisions(&ds);
    let edited = dir.path().join("edited.toml");
    std::fs::write(&edited, file.to_toml().unwrap()).unwrap();
    let out = heddle_out(&["replay", edited.to_str().unwrap()]);
    let err = text(&out.stderr);
    // A replay that does not reproduce has its own exit code.
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!("replay diverged at decision {k}:")),
        "{err}"
    );
    assert!(err.contains(&format!("expected thread {other}")), "{err}");
    assert!(!err.contains("instrumenter"), "{err}");
    // Recorded with another instrumenter, or by a heddle that did not say
    // which: the message names the likely cause.
    for (heddle, says) in [
        (
            "0.1.0+instrumenter.1",
            "with instrumenter version 1, and this heddle",
        ),
        ("0.1.0", "which did not write its instrumenter version"),
    ] {
        file.heddle = heddle.into();
        std::fs::write(&edited, file.to_toml().unwrap()).unwrap();
        let out = heddle_out(&["replay", edited.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(
            err.contains(&format!("replay diverged at decision {k}:")) && err.contains(says),
            "{heddle}: {err}"
        );
    }
}

#[test]
fn race_bank_loses_updates_under_every_strategy() {
    let e = entry("race_bank");
    let p = program(&e.source, false, Granularity::All);
    let mut lines = Vec::new();
    for s in STRATEGIES {
        let base = calibrated(&p, config(&e, s, 0));
        let lost = (0..1000)
            .filter(|&seed| {
                !run(
                    &p,
                    &RunConfig {
                        seed,
                        ..base.clone()
                    },
                )
                .verdict
                .is_pass()
            })
            .count();
        assert!(lost > 0, "{s} never lost an update in 1000 seeds");
        lines.push(format!(
            "race_bank 2x2 {}: {lost}/1000 seeds lose an update",
            base.strategy
        ));
    }
    let big = entry("race_bank_4x25");
    let base = config(&big, "random", 0);
    let lost = (0..100)
        .filter(|&seed| {
            !run(
                &p,
                &RunConfig {
                    seed,
                    ..base.clone()
                },
            )
            .verdict
            .is_pass()
        })
        .count();
    assert!(
        lost > 50,
        "4x25 should lose updates on most seeds, lost on {lost}/100"
    );
    lines.push(format!(
        "race_bank 4x25 random: {lost}/100 seeds lose an update"
    ));
    eprintln!("{}", lines.join("\n"));
}

#[test]
fn traps_and_hangs_never_stop_a_campaign() {
    let dir = tempdir();
    let out = heddle_out(&[
        "fuzz",
        "tests/programs/core_trap_or_hang.c",
        "--runs",
        "200",
        "--keep-going",
        "--list-failures",
        "--max-steps",
        "20000",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.starts_with("200 runs"), "every seed ran: {stdout}");
    for kind in [
        "trap:out-of-bounds@worker",
        "hang:no progress",
        "assertion@worker",
    ] {
        assert!(stdout.contains(kind), "missing {kind}: {stdout}");
    }
    // (each replay file has its HTML report next to it; the summary and
    // journal are there too)
    let files = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.contains("-seed") && name.ends_with(".toml")
        })
        .count();
    assert_eq!(files, 3, "one replay file per distinct failure");
}

/// A minimal module with the given import/memory/export sections.
fn module_bytes(imported_memory: Option<u8>, defined_memory: bool, export_start: bool) -> Vec<u8> {
    let mut m = b"\0asm\x01\0\0\0".to_vec();
    m.extend_from_slice(&[0x01, 0x04, 0x01, 0x60, 0x00, 0x00]); // type () -> ()
    if let Some(flags) = imported_memory {
        // import "env" "memory" (memory flags min=1 max=1)
        let mut body = vec![0x01, 0x03, b'e', b'n', b'v', 0x06];
        body.extend_from_slice(b"memory");
        body.extend_from_slice(&[0x02, flags, 0x01]);
        if flags & 1 != 0 {
            body.push(0x01);
        }
        m.push(0x02);
        m.push(body.len() as u8);
        m.extend_from_slice(&body);
    }
    m.extend_from_slice(&[0x03, 0x02, 0x01, 0x00]); // one function of type 0
    if defined_memory {
        m.extend_from_slice(&[0x05, 0x03, 0x01, 0x00, 0x01]);
    }
    if export_start {
        m.extend_from_slice(&[0x07, 0x0a, 0x01, 0x06]);
        m.extend_from_slice(b"_start");
        m.extend_from_slice(&[0x00, 0x00]);
    }
    m.extend_from_slice(&[0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b]); // empty body
    m
}

#[test]
fn bad_input_gets_a_one_line_error_and_exit_2() {
    let dir = tempdir();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_string()
    };
    let notwasm = write("notes.wasm", b"this is not a module");
    assert_usage_error(&heddle_out(&["run", &notwasm]), "not a WebAssembly module");
    let unshared = write("unshared.wasm", &module_bytes(Some(0x01), false, true));
    assert_usage_error(&heddle_out(&["run", &unshared]), "not shared");
    let own_memory = write("own.wasm", &module_bytes(None, true, true));
    assert_usage_error(&heddle_out(&["run", &own_memory]), "defines its own memory");
    let no_start = write("nostart.wasm", &module_bytes(Some(0x03), false, false));
    assert_usage_error(&heddle_out(&["run", &no_start]), "does not export `_start`");
    let truncated = {
        let full = target_module("race_bank.c", false);
        write("truncated.wasm", &full[..full.len() / 3])
    };
    assert_usage_error(&heddle_out(&["run", &truncated]), "malformed");
    assert_usage_error(
        &heddle_out(&["run", "targets/race_bank.c", "--strategy", "fifo"]),
        "unknown strategy `fifo`",
    );
    assert_usage_error(
        &heddle_out(&["run", "targets/race_bank.c", "--strategy", "pct:0"]),
        "bad PCT depth",
    );
    assert_usage_error(&heddle_out(&["run", "nothere.wasm"]), "no such file");
    let corrupt = write("corrupt.toml", b"format = 1\n[module]\nsha256 = 12\n");
    assert_usage_error(
        &heddle_out(&["replay", &corrupt]),
        "not a valid heddle replay file",
    );
    let garbage = write("garbage.toml", &[0xff, 0xfe, 0x00, 0x01]);
    assert_usage_error(&heddle_out(&["replay", &garbage]), "garbage.toml");
    // A replay given another module.
    let path = fuzz_to_replay(dir.path(), "targets/race_bank.c", &[]);
    let p = path.to_str().unwrap();
    assert_usage_error(
        &heddle_out(&["replay", p, "--target", "targets/counter_spy.c"]),
        "module mismatch",
    );
    // A shipped module that is not the recorded one.
    let file = ReplayFile::load(&path).unwrap();
    let shipped = path.with_file_name(file.module.file.as_ref().unwrap());
    let good = std::fs::read(&shipped).unwrap();
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 1] ^= 1;
    std::fs::write(&shipped, &bad).unwrap();
    let out = heddle_out(&["replay", p]);
    std::fs::write(&shipped, &good).unwrap();
    assert_usage_error(&out, "is damaged");
}

#[test]
fn a_thousand_guest_threads_run_in_one_run() {
    let module = std::fs::read(build("benches/programs/many_threads.c", &[])).unwrap();
    let p = Program::new(&module, &heddle::instrument::Config::default()).unwrap();
    let cfg = RunConfig {
        args: vec!["1000".into()],
        seed: 7,
        ..RunConfig::default()
    };
    let a = run(&p, &cfg);
    assert!(a.verdict.is_pass(), "{}", a.verdict.summary());
    assert_eq!(a.threads, 1001);
    assert_eq!(text(&a.stdout), "1000 threads done\n");
    // And it is as deterministic with a thousand threads as with two.
    let b = run(&p, &cfg);
    assert_eq!(a.decisions, b.decisions);
}

/// The fast path (the guest skips yield points the host has nothing to do
/// at) changes nothing a run reports: with the memory checker and race
/// detection off, a run that records its events (every yield point seen by
/// the host) and one that does not (yield points skipped while one thread
/// runs alone) agree on verdict, decisions, steps, switches, output and
/// labels, on every bundled target, for traps, hangs and timers too.
#[test]
fn the_fast_path_changes_nothing() {
    use heddle::instrument::Config;
    use heddle::runtime::RaceMode;
    // With a trap, a hang and a failure chosen per seed, with a small step
    // budget (the window must end exactly where the budget does).
    let mut jobs = every_target_and_trap_or_hang(STRATEGIES, 40, 5);
    // Skipped yield points right up to a trap.
    jobs.push((
        "../tests/programs/solo_trap.c".into(),
        Vec::new(),
        false,
        "random",
        3,
    ));
    jobs.push((
        "../benches/programs/yield_loop.c".into(),
        vec!["8000".into()],
        false,
        "random",
        1,
    ));
    let results = par_map(&jobs, |(source, args, fixed, strategy, seeds)| {
        let bytes = match source.strip_prefix("../") {
            Some(path) => std::fs::read(build(path, &[])).unwrap(),
            None => target_module(source, *fixed),
        };
        let p = Program::new(
            &bytes,
            &Config {
                memcheck: Some(false),
                ..Config::default()
            },
        )
        .expect("program");
        let base = calibrated(
            &p,
            RunConfig {
                args: args.clone(),
                strategy: strategy.to_string(),
                races: RaceMode::Off,
                max_steps: 20_000,
                ..RunConfig::default()
            },
        );
        let mut skipped = 0;
        for seed in 0..*seeds {
            let fast = RunConfig {
                seed,
                ..base.clone()
            };
            let a = run(&p, &fast);
            let b = run(
                &p,
                &RunConfig {
                    record_events: true,
                    ..fast.clone()
                },
            );
            let what = format!("{source} {args:?} fixed={fixed} {strategy} seed {seed}");
            assert_eq!(b.skipped, 0, "{what}: a recording run skipped yield points");
            assert_eq!(a.verdict, b.verdict, "{what}: verdict");
            assert_eq!(a.decisions, b.decisions, "{what}: decisions");
            assert_eq!(a.steps, b.steps, "{what}: steps");
            assert_eq!(a.switches, b.switches, "{what}: switches");
            assert_eq!(a.preemptions, b.preemptions, "{what}: preemptions");
            assert_eq!(a.stdout, b.stdout, "{what}: stdout");
            assert_eq!(a.stderr, b.stderr, "{what}: stderr");
            assert_eq!(a.labels, b.labels, "{what}: labels");
            skipped += a.skipped;
        }
        (source.clone(), skipped)
    });
    let trap_skipped = results
        .iter()
        .find(|(s, _)| s.ends_with("solo_trap.c"))
        .map(|r| r.1);
    assert!(
        trap_skipped > Some(10),
        "solo_trap.c did not take the fast path up to its trap ({trap_skipped:?} skipped)"
    );
    let (_, loop_skipped) = results.last().unwrap();
    // (Every other hang window is watched step by step: the fast path
    // skips in the others.)
    assert!(
        *loop_skipped > 5_000,
        "the single-threaded loop did not take the fast path ({loop_skipped} skipped)"
    );
    let engaged = results.iter().filter(|(_, s)| *s > 0).count();
    eprintln!("fast path engaged in {engaged} of {} jobs", results.len());
}

/// The preemption budget kept in a function-local copy (the default) counts
/// exactly as the budget kept in its global at every budget point: same
/// events, step for step, on the bundled targets and on a program that
/// leaves its functions every way C can (`budget_exits.c`), with a small
/// budget so that budget events are frequent.
#[test]
fn the_budget_local_counts_like_the_global() {
    use heddle::instrument::Config;
    use heddle::model::EventKind;
    use heddle::runtime::RaceMode;
    let m = manifest();
    let mut jobs: Vec<(String, Vec<String>, bool, Granularity, u64)> = Vec::new();
    for e in &m.targets {
        let seeds = if e.large { 2 } else { 8 };
        for fixed in [false, true] {
            jobs.push((
                e.source.clone(),
                e.args.clone(),
                fixed,
                Granularity::Sync,
                seeds,
            ));
        }
    }
    for granularity in [Granularity::Sync, Granularity::All] {
        jobs.push((
            "../tests/programs/budget_exits.c".into(),
            Vec::new(),
            false,
            granularity,
            30,
        ));
    }
    let budget_events = par_map(&jobs, |(source, args, fixed, granularity, seeds)| {
        let bytes = match source.strip_prefix("../") {
            Some(path) => std::fs::read(build(path, &[])).unwrap(),
            None => target_module(source, *fixed),
        };
        let program = |budget_in_global| {
            Program::new(
                &bytes,
                &Config {
                    granularity: *granularity,
                    memcheck: Some(false),
                    budget_in_global,
                    ..Config::default()
                },
            )
            .expect("program")
        };
        let (local, global) = (program(false), program(true));
        let mut budgets = 0;
        for seed in 0..*seeds {
            let cfg = RunConfig {
                args: args.clone(),
                seed,
                strategy: ["random", "pct:3", "rr"][seed as usize % 3].to_string(),
                races: RaceMode::Off,
                budget: (1, 12),
                max_steps: 200_000,
                record_events: true,
                ..RunConfig::default()
            };
            let a = run(&local, &cfg);
            let b = run(&global, &cfg);
            let what = format!("{source} {args:?} fixed={fixed} {granularity:?} seed {seed}");
            assert_eq!(a.verdict, b.verdict, "{what}: verdict");
            if let Some(i) = (0..a.events.len().max(b.events.len()))
                .find(|&i| a.events.get(i) != b.events.get(i))
            {
                panic!(
                    "{what}: event {i} differs: local {:?}, global {:?}",
                    a.events.get(i),
                    b.events.get(i)
                );
            }
            assert_eq!(a.decisions, b.decisions, "{what}: decisions");
            assert_eq!(a.steps, b.steps, "{what}: steps");
            assert_eq!(a.stdout, b.stdout, "{what}: stdout");
            budgets += a
                .events
                .iter()
                .filter(|e| e.kind == EventKind::Budget)
                .count();
        }
        budgets
    });
    let exits = &budget_events[budget_events.len() - 2..];
    assert!(
        exits.iter().all(|&n| n > 1_000),
        "budget_exits.c had too few budget events to compare: {exits:?}"
    );
}

/// A mistyped command or flag: the error on the first line, then clap's
/// suggestion and the usage line, exit 2.
#[test]
fn mistyped_commands_and_flags_get_a_tip_and_the_usage() {
    let o = heddle_out(&["fuz"]);
    assert_usage_error(&o, "unrecognized subcommand 'fuz'");
    let err = text(&o.stderr);
    assert!(err.contains("a similar subcommand exists: 'fuzz'"), "{err}");
    assert!(err.contains("Usage: heddle [OPTIONS] <COMMAND>"), "{err}");
    let o = heddle_out(&["fuzz", "targets/race_bank.c", "--job", "2"]);
    assert_usage_error(&o, "unexpected argument '--job'");
    let err = text(&o.stderr);
    assert!(err.contains("a similar argument exists: '--jobs'"), "{err}");
    assert!(err.contains("Usage: heddle fuzz"), "{err}");
}

/// `heddle --version` names the package version and the commit it was
/// built from (the one checked out, when built from a git checkout).
#[test]
fn version_names_the_commit() {
    let o = heddle_out(&["--version"]);
    assert_eq!(o.status.code(), Some(0));
    let line = text(&o.stdout);
    let commit = line
        .trim()
        .strip_prefix(concat!("heddle ", env!("CARGO_PKG_VERSION"), " (commit "))
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("version line: {line}"));
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(repo())
        .output()
        .unwrap();
    if head.status.success() {
        assert_eq!(commit, text(&head.stdout).trim());
    } else {
        assert_eq!(commit, "unknown");
    }
}

/// Completion scripts for every shell clap_complete knows (the bash one is
/// valid bash and completes the commands and fuzz's flags), and a man page
/// per command.
#[test]
fn completions_and_man_pages_cover_every_command() {
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let o = heddle_out(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}: {}", text(&o.stderr));
        let script = text(&o.stdout);
        for word in ["fuzz", "replay", "explore", "strategy"] {
            assert!(script.contains(word), "{shell} lacks {word}");
        }
    }
    let dir = tempdir();
    let bash = dir.path().join("heddle.bash");
    std::fs::write(&bash, heddle_out(&["completions", "bash"]).stdout).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&bash)
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", text(&check.stderr));
    assert_usage_error(&heddle_out(&["completions", "tcsh"]), "tcsh");

    let out = dir.path().join("man");
    let o = heddle_out(&["man", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for page in [
        "heddle.1",
        "heddle-fuzz.1",
        "heddle-replay.1",
        "heddle-toolchain-install.1",
    ] {
        let roff = std::fs::read_to_string(out.join(page)).expect(page);
        assert!(roff.contains(".TH"), "{page}");
    }
    let fuzz = std::fs::read_to_string(out.join("heddle-fuzz.1")).unwrap();
    assert!(fuzz.contains("strategy"), "{fuzz}");
}

/// The README's command table and exit-code table match the command-line
/// definition; every command has examples in its help and takes the global
/// flags.
#[test]
fn readme_tables_match_the_help() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let cmd = heddle::cli::command();
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let table: std::collections::BTreeSet<String> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("| `heddle "))
        .filter_map(|l| l.split([' ', '`']).next())
        .map(str::to_string)
        .collect();
    let mut expected: std::collections::BTreeSet<String> = names.iter().cloned().collect();
    expected.insert("help".into());
    assert_eq!(table, expected, "README command table vs heddle --help");
    for sub in cmd.get_subcommands() {
        let name = sub.get_name();
        let after = sub
            .get_after_help()
            .map(|h| h.to_string())
            .unwrap_or_default();
        assert!(
            after.starts_with("Examples:") && after.contains(&format!("heddle {name}")),
            "{name}: {after}"
        );
        let o = heddle_out(&["help", name]);
        let help = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{name}");
        for flag in [
            "--color <WHEN>",
            "-q, --quiet",
            "-v, --verbose",
            "Examples:",
        ] {
            assert!(
                help.contains(flag),
                "heddle help {name} lacks {flag}:\n{help}"
            );
        }
    }
    // The exit-code table.
    let section = readme
        .split("## Exit codes")
        .nth(1)
        .expect("exit-code table");
    let codes: Vec<String> = section
        .lines()
        .skip_while(|l| !l.starts_with("| code"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split('|').nth(1).unwrap().trim().to_string())
        .collect();
    let defined: Vec<String> = heddle::cli::EXIT_CODES
        .iter()
        .map(|(c, _)| c.to_string())
        .collect();
    assert_eq!(codes, defined, "README exit codes vs heddle --help");
    let help = text(&heddle_out(&["--help"]).stdout);
    for (code, what) in heddle::cli::EXIT_CODES {
        assert!(
            help.contains(&format!("{code}  ")) && help.contains(what),
            "{help}"
        );
    }
    assert_eq!(heddle::cli::EXIT_INTERNAL, 4);
    assert_eq!(heddle::cli::EXIT_NOT_REPRODUCED, 3);
}

/// One name per idea, the older spellings still accepted; global flags go
/// before or after the command.
#[test]
fn one_name_per_idea_and_old_spellings_still_work() {
    let dir = tempdir();
    let out = dir.path().to_str().unwrap();
    for runs in ["--runs", "--max-schedules"] {
        let o = heddle_out(&[
            "explore",
            "targets/counter_spy.c",
            runs,
            "5",
            "--out",
            out,
            "--",
            "1",
            "1",
        ]);
        assert!(
            text(&o.stdout).contains("5 schedules"),
            "{runs}: {}",
            text(&o.stdout)
        );
        // Messages name today's flag, whichever spelling was given.
        assert!(
            text(&o.stdout)
                .contains("stopped at --runs 5: not exhaustive (a larger --runs explores further)"),
            "{runs}: {}",
            text(&o.stdout)
        );
    }
    let mut seen = Vec::new();
    for args in [
        vec!["fuzz", "--seed", "7"],
        vec!["fuzz", "--seed-start", "7"],
        vec!["-q", "fuzz", "--seed=7"],
    ] {
        let mut a = args.clone();
        a.extend([
            "targets/race_bank.c",
            "--fixed",
            "--runs",
            "3",
            "-j",
            "1",
            "-v",
            "--out",
            out,
        ]);
        let o = heddle_out(&a);
        let stdout = text(&o.stdout);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{a:?}: {stdout}{}",
            text(&o.stderr)
        );
        assert!(
            stdout.contains("decisions/run"),
            "-v shows statistics: {stdout}"
        );
        let s = std::fs::read_to_string(dir.path().join("campaign.toml")).unwrap();
        assert!(s.contains("seed_start = 7"), "{s}");
        seen.push(heddle::campaign::summary::deterministic_part(&s).to_string());
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]));
    for (canonical, old) in [("--out", "--output")] {
        for flag in [canonical, old] {
            let o = heddle_out(&[
                "instrument",
                "targets/race_bank.c",
                flag,
                dir.path().join("i.wasm").to_str().unwrap(),
            ]);
            assert_eq!(o.status.code(), Some(0), "{flag}: {}", text(&o.stderr));
        }
    }
    let a = heddle_out(&["sites", "targets/race_bank.c", "--format", "json"]);
    let b = heddle_out(&["sites", "targets/race_bank.c", "--json"]);
    assert_eq!(a.stdout, b.stdout);
    assert!(text(&a.stdout).trim_start().starts_with(['[', '{']));
}

/// `heddle run` prints the program's output, passing or not, unless
/// `--quiet-output`; `--show-output` (once needed) is still accepted; with
/// `--format json` the output goes to stderr with the rest of the text and
/// stdout holds the JSON document alone.
#[test]
fn run_prints_the_program_output() {
    let run = |extra: &[&str]| {
        let mut a = vec!["run", "targets/race_bank.c", "--fixed"];
        a.extend_from_slice(extra);
        let o = heddle_out(&a);
        assert_eq!(o.status.code(), Some(0), "{extra:?}: {}", text(&o.stderr));
        o
    };
    for extra in [&[][..], &["--show-output"]] {
        let stdout = text(&run(extra).stdout);
        assert!(
            stdout.contains("--- stdout ---\nbalance = 4"),
            "{extra:?}: {stdout}"
        );
    }
    let quiet = text(&run(&["--quiet-output"]).stdout);
    assert!(quiet.contains("verdict: pass"), "{quiet}");
    assert!(!quiet.contains("balance"), "{quiet}");
    // A failing run's output is printed even with --quiet-output.
    let o = heddle_out(&[
        "run",
        "targets/race_bank.c",
        "--seed",
        "3",
        "--quiet-output",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("--- stdout ---"),
        "{}",
        text(&o.stdout)
    );
    let json = run(&["--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&json.stdout)));
    assert_eq!(doc["result"], "pass", "{doc}");
    assert!(
        text(&json.stderr).contains("balance = 4"),
        "{}",
        text(&json.stderr)
    );
    // A run cut off by --max-steps is inconclusive: exit 0, and the JSON
    // result agrees; its verdict says why.
    let json = heddle_out(&[
        "run",
        "targets/race_bank.c",
        "--max-steps",
        "20",
        "--format",
        "json",
    ]);
    assert_eq!(json.status.code(), Some(0), "{}", text(&json.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&json.stdout)));
    assert_eq!(doc["result"], "pass", "{doc}");
    assert_eq!(doc["verdict"]["kind"], "too-long", "{doc}");
    assert_eq!(doc["statistics"]["failing"], 0, "{doc}");
}

/// `--color` and the `NO_COLOR` / `CLICOLOR_FORCE` conventions, on a
/// command that colours (`show`) and on errors.
#[test]
fn color_follows_the_flag_and_the_environment() {
    let dir = tempdir();
    let out = dir.path().to_str().unwrap();
    let f = heddle_out(&[
        "fuzz",
        "targets/race_bank.c",
        "--runs",
        "50",
        "-q",
        "--out",
        out,
    ]);
    assert_eq!(f.status.code(), Some(1));
    let replay = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".toml") && p.to_string_lossy().contains("-seed"))
        .unwrap();
    let replay = replay.to_str().unwrap();
    let show = |args: &[&str], env: &[(&str, &str)]| {
        let mut c = heddle();
        c.arg("show").arg(replay).args(args);
        c.env_remove("NO_COLOR").env_remove("CLICOLOR_FORCE");
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        text(&o.stdout).contains("\x1b[")
    };
    assert!(!show(&[], &[]), "not a terminal: no colour");
    assert!(show(&["--color", "always"], &[]));
    assert!(
        show(&["--color=always"], &[("NO_COLOR", "1")]),
        "the flag wins"
    );
    assert!(show(&[], &[("CLICOLOR_FORCE", "1")]));
    assert!(!show(&[], &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]));
    assert!(!show(&["--color", "never"], &[("CLICOLOR_FORCE", "1")]));
    let e = heddle_out(&["--color", "always", "replay", "/nonexistent.toml"]);
    assert_eq!(e.status.code(), Some(2));
    assert!(
        text(&e.stderr).starts_with("\x1b[1;31mheddle: error"),
        "{}",
        text(&e.stderr)
    );
    let e = heddle_out(&["replay", "/nonexistent.toml", "--color", "sometimes"]);
    assert_usage_error(&e, "sometimes");
}

/// A run on reused instances (reset globals, memory restored from the
/// post-start image, instances of finished threads taken by later threads)
/// is the same run, byte for byte, as one where every guest thread gets a
/// fresh instance: every field of the result, events recorded or not, for
/// every bundled target (buggy and fixed), with traps, hangs and runs that
/// end with threads suspended.
#[test]
fn reused_instances_change_nothing() {
    let jobs = every_target_and_trap_or_hang(&["random", "sites:3+stall", "pos"], 25, 4);
    par_map(&jobs, |(source, args, fixed, strategy, seeds)| {
        let bytes = match source.strip_prefix("../") {
            Some(path) => std::fs::read(build(path, &[])).unwrap(),
            None => target_module(source, *fixed),
        };
        let cfg = heddle::instrument::Config::default();
        let reused = Program::new(&bytes, &cfg).expect("program");
        let mut fresh = Program::new(&bytes, &cfg).expect("program");
        fresh.set_instance_reuse(false);
        assert!(reused.reuses_instances(), "{source}: instances not reused");
        assert!(!fresh.reuses_instances());
        let base = calibrated(
            &reused,
            RunConfig {
                args: args.clone(),
                strategy: strategy.to_string(),
                max_steps: 50_000,
                ..RunConfig::default()
            },
        );
        for seed in 0..*seeds {
            for record_events in [false, true] {
                let cfg = RunConfig {
                    seed,
                    record_events,
                    ..base.clone()
                };
                let a = format!("{:?}", run(&reused, &cfg));
                let b = format!("{:?}", run(&fresh, &cfg));
                assert!(
                    a == b,
                    "{source} {args:?} fixed={fixed} {strategy} seed {seed} events={record_events}: \
                     reused and fresh instances differ\nreused: {a}\nfresh:  {b}"
                );
            }
        }
    });
}

/// What one run leaves to the next on the same memory (the spin detector's
/// write stamps, the race detector's maps and clock buffers, the candidate
/// list: capacity, never contents) changes nothing: each run of a program
/// that has run many others is, byte for byte, the first run of a program
/// made anew, under strategies that look at spinning hints (`pos`, `surw`)
/// and one that does not.
#[test]
fn a_run_after_others_is_a_first_run() {
    let jobs: [(&str, &[&str], &str); 3] = [
        ("spin_barrier.c", &[], "pos+stall"),
        ("race_bank.c", &["2", "2"], "surw"),
        ("lost_wakeup.c", &[], "random"),
    ];
    par_map(&jobs, |&(source, args, strategy)| {
        let bytes = target_module(source, false);
        let instrument = heddle::instrument::Config::default();
        let busy = Program::new(&bytes, &instrument).expect("program");
        let base = calibrated(
            &busy,
            RunConfig {
                args: args.iter().map(|a| a.to_string()).collect(),
                strategy: strategy.to_string(),
                max_steps: 50_000,
                ..RunConfig::default()
            },
        );
        for seed in 0..12 {
            let cfg = RunConfig {
                seed,
                ..base.clone()
            };
            let after = format!("{:?}", run(&busy, &cfg));
            let new = Program::new(&bytes, &instrument).expect("program");
            let first = format!("{:?}", run(&new, &cfg));
            assert!(
                after == first,
                "{source} {strategy} seed {seed}: a run after others differs from a first run\nafter: {after}\nfirst: {first}"
            );
        }
    });
}

/// (source, args, fixed, strategy, seeds) for every bundled target, buggy
/// and fixed, under each strategy (`seeds` runs each, `large_seeds` on
/// the large entries), then `tests/programs/core_trap_or_hang.c` (a trap,
/// a hang or a failure chosen per seed) under `random` for 60 seeds.
fn every_target_and_trap_or_hang<'a>(
    strategies: &[&'a str],
    seeds: u64,
    large_seeds: u64,
) -> Vec<(String, Vec<String>, bool, &'a str, u64)> {
    let mut jobs = Vec::new();
    for e in &manifest().targets {
        for fixed in [false, true] {
            for &s in strategies {
                let n = if e.large { large_seeds } else { seeds };
                jobs.push((e.source.clone(), e.args.clone(), fixed, s, n));
            }
        }
    }
    jobs.push((
        "../tests/programs/core_trap_or_hang.c".into(),
        Vec::new(),
        false,
        "random",
        60,
    ));
    jobs
}

/// A thread about to lock a default mutex that another thread holds waits
/// for it instead of running into musl's slow path, and the announcement of
/// a lock call and the lock word's compare-exchange run as one step: on
/// race_bank 4×25 under random walk no event is ever inside
/// `pthread_mutex_timedlock` or `pthread_mutex_trylock`, and the event
/// after each `lock` announcement is its own thread's.
#[test]
fn a_held_mutex_is_waited_for_and_a_lock_call_is_one_decision() {
    let e = entry("race_bank_4x25");
    let p = program(&e.source, true, Granularity::All);
    let base = RunConfig {
        record_events: true,
        ..calibrated(&p, config(&e, "random", 0))
    };
    let mut switches_at_locks = 0;
    for (seed, r) in passing_runs(&p, &base, 0..50, "race_bank 4x25") {
        for (i, ev) in r.events.iter().enumerate() {
            let func = p.sites.site(ev.site).map(|s| s.func_name.as_str());
            assert!(
                !matches!(
                    func,
                    Some("__pthread_mutex_timedlock" | "__pthread_mutex_trylock")
                ),
                "seed {seed}: thread {} entered the slow path of a contended lock at step {}",
                ev.tid,
                ev.step
            );
            if ev.kind == heddle::model::EventKind::Lock {
                let next = r.events.get(i + 1).expect("an event after a lock call");
                assert_eq!(next.tid, ev.tid, "seed {seed}: a switch inside a lock call");
            }
            switches_at_locks += (ev.kind == heddle::model::EventKind::Lock && ev.preempted) as u32;
        }
    }
    // Decisions are still made at lock calls: random switches there.
    assert!(switches_at_locks > 0);
}

/// A default mutex is taken and released by code the rewriter inlines at
/// the call: one step, the call's announcement, followed at the same step by
/// the lock word's access the C library's fast path would have made (a
/// library site at the call's line). The other kinds go through the C
/// library. `tests/programs/mutex_kinds.c` checks what each kind returns
/// (trylock on a held mutex, errorcheck errors, a condition variable whose
/// waiters re-take the mutex), and a freed or null mutex is still caught.
#[test]
fn default_mutexes_are_taken_inline_and_the_other_kinds_by_the_library() {
    use heddle::model::EventKind;
    let bytes = std::fs::read(build("tests/programs/mutex_kinds.c", &[])).unwrap();
    let p = Program::new(&bytes, &heddle::instrument::Config::default()).expect("program");
    let (mut inline, mut library) = (0, 0);
    for strategy in ["random", "pct:3", "pos"] {
        let base = RunConfig {
            strategy: strategy.into(),
            record_events: true,
            ..RunConfig::default()
        };
        for (seed, r) in passing_runs(&p, &base, 0..25, "mutex_kinds") {
            for (i, ev) in r.events.iter().enumerate() {
                if !matches!(ev.kind, EventKind::Lock | EventKind::Unlock) {
                    continue;
                }
                let mutex = p.sites.symbol_at(ev.addr).map(|s| s.name.as_str());
                let word = r.events[i + 1..]
                    .iter()
                    .find(|n| n.tid == ev.tid)
                    .filter(|n| n.step == ev.step && n.site == ev.site + 1);
                let at = format!(
                    "{strategy} seed {seed} step {}: {:?} {mutex:?}",
                    ev.step, ev.kind
                );
                match mutex {
                    Some("recursive" | "checked") => {
                        assert!(word.is_none(), "{at}: inlined");
                        library += 1;
                    }
                    Some("plain") => {
                        let Some(w) = word else { continue };
                        let s = p.sites.site(w.site).expect("word site");
                        assert!(!s.user && s.atomic, "{at}: {s:?}");
                        assert_eq!(w.addr, ev.addr + 4, "{at}");
                        let (kind, value) = if ev.kind == EventKind::Lock {
                            (EventKind::Cmpxchg, 10)
                        } else {
                            (EventKind::Rmw, 0)
                        };
                        assert_eq!((w.kind, w.value), (kind, Some(value)), "{at}");
                        inline += 1;
                    }
                    other => panic!("{at}: a lock call on {other:?}"),
                }
            }
        }
    }
    assert!(
        inline > 0 && library > 0,
        "inline {inline}, library {library}"
    );
    for (mode, want) in [
        (
            "freed",
            "use-after-free in thread 0 at main (mutex_kinds.c:",
        ),
        ("null", "null-deref in thread 0 at main (mutex_kinds.c:"),
    ] {
        let o = heddle_out(&["run", "tests/programs/mutex_kinds.c", "--", mode]);
        assert_eq!(o.status.code(), Some(1), "{mode}: {}", text(&o.stderr));
        assert!(
            text(&o.stdout).contains(want),
            "{mode}: {}",
            text(&o.stdout)
        );
    }
}

/// The C library's atomics on its own bookkeeping (the allocator, thread
/// creation, start and exit, musl's `__lock`, a condition variable's waiter
/// list), its synchronisation code's notifies and futex waits, and the
/// calls that create a thread up to the spawn's return, are yield points
/// without a decision (or, for most of those atomics, no yield points at
/// all): no thread is ever switched to or from there. The
/// atomics of the other synchronisation objects a program passes in
/// (mutexes, spin locks, semaphores, barriers, rwlocks, once controls) keep
/// theirs.
#[test]
fn the_c_librarys_bookkeeping_makes_no_decision() {
    let bytes = std::fs::read(build("tests/programs/sync_zoo.c", &[])).unwrap();
    let p = Program::new(&bytes, &heddle::instrument::Config::default()).expect("program");
    let private = |site: u32| p.sites.site(site).is_some_and(|s| s.private);
    let mut funcs = std::collections::BTreeSet::new();
    for s in &p.sites.sites {
        if s.private {
            use heddle::instrument::SiteKind as K;
            match s.kind {
                K::ThreadCreate => {}
                K::Call => assert_eq!(s.callee.as_deref(), Some("wasi.thread-spawn")),
                K::Notify | K::Wait => {
                    assert!(!s.user, "{s:?}");
                    assert!(heddle::instrument::sites::is_c_library_sync_function(
                        &s.func_name
                    ));
                }
                _ => {
                    assert!(!s.user && s.atomic, "{s:?}");
                    assert!(heddle::instrument::sites::is_private_library_function(
                        &s.func_name
                    ));
                }
            }
            funcs.insert(s.func_name.as_str());
        }
        let program_object = ["mutex", "spin", "sem_", "barrier", "rwlock", "once"];
        if !matches!(
            s.kind,
            heddle::instrument::SiteKind::Notify | heddle::instrument::SiteKind::Wait
        ) && program_object.iter().any(|o| s.func_name.contains(o))
        {
            assert!(!s.private, "{s:?}");
        }
    }
    // The allocator's atomics are no yield points at all while the memory
    // checker's allocation hooks are in (`sites::unseen_library_atomic`);
    // without them they are private ones.
    let in_dlmalloc = |p: &Program| {
        p.sites
            .sites
            .iter()
            .filter(|s| s.func_name == "dlmalloc" && s.atomic)
            .map(|s| s.private)
            .collect::<Vec<_>>()
    };
    assert_eq!(in_dlmalloc(&p), Vec::<bool>::new());
    let unchecked = heddle::instrument::Config {
        memcheck: Some(false),
        ..heddle::instrument::Config::default()
    };
    let without = in_dlmalloc(&Program::new(&bytes, &unchecked).expect("program"));
    assert!(
        !without.is_empty() && without.iter().all(|&p| p),
        "{without:?}"
    );
    for f in [
        "__pthread_create",
        "__wasi_thread_start_C",
        "wasi_thread_start",
        "__pthread_cond_timedwait",
        "__pthread_mutex_unlock",
        "sem_post",
        "main",
    ] {
        assert!(funcs.contains(f), "no private site in {f}: {funcs:?}");
    }
    let (mut switches, mut at_private) = (0, 0);
    for prim in ["mutex", "signal", "broadcast", "spin", "sem", "barrier"] {
        let base = RunConfig {
            args: vec![prim.into()],
            strategy: "random".into(),
            record_events: true,
            ..RunConfig::default()
        };
        for (seed, r) in passing_runs(&p, &base, 0..20, "sync_zoo") {
            let ev = &r.events;
            for i in 1..ev.len() {
                at_private += private(ev[i].site) as u32;
                let left = ev[i - 1].tid;
                if !ev[i].preempted || ev[i].tid == left {
                    continue;
                }
                // The preempted thread was stopped before its next event:
                // that yield point made the decision, so it is not private.
                switches += 1;
                if let Some(stopped) = ev[i..].iter().find(|e| e.tid == left) {
                    assert!(
                        !private(stopped.site),
                        "{prim} seed {seed}: thread {left} preempted before a private site \
                         (step {})",
                        stopped.step
                    );
                }
            }
        }
    }
    assert!(
        switches > 0 && at_private > 0,
        "{switches} switches, {at_private} private events"
    );
}

/// wasi-libc's thread-list lock (`__tl_lock`, taken by `pthread_create`
/// and by an exiting thread) is waited for like a mutex: its
/// compare-exchange is found by its DWARF frame, and no thread ever runs it
/// while the lock is held (a failed one is followed by the thread's spin in
/// `__wait`). The many-threads benchmark creates threads while earlier ones
/// exit.
#[test]
fn the_thread_list_lock_is_waited_for() {
    let bytes = std::fs::read(build("benches/programs/many_threads.c", &[])).unwrap();
    let p = Program::new(&bytes, &heddle::instrument::Config::default()).expect("program");
    let takes_tl_lock = |site: u32| {
        p.sites
            .site(site)
            .is_some_and(|s| s.takes_lock && s.func_name != "__pthread_mutex_lock")
    };
    assert!(
        (0..p.sites.sites.len() as u32).any(takes_tl_lock),
        "the thread-list lock's compare-exchange was not found"
    );
    let base = RunConfig {
        args: vec!["20".into()],
        strategy: "random".into(),
        record_events: true,
        ..RunConfig::default()
    };
    let mut taken = 0;
    for (seed, r) in passing_runs(&p, &base, 0..20, "many_threads 20") {
        for (i, ev) in r.events.iter().enumerate() {
            if !takes_tl_lock(ev.site) {
                continue;
            }
            taken += 1;
            let next = r.events[i + 1..].iter().find(|n| n.tid == ev.tid);
            let func = next
                .and_then(|n| p.sites.site(n.site))
                .map(|s| s.func_name.as_str());
            assert_ne!(
                func,
                Some("__wait"),
                "seed {seed}: thread {} tried the held thread-list lock at step {}",
                ev.tid,
                ev.step
            );
        }
    }
    assert!(taken > 0);
}

/// A thread started on a reused instance finds every global as a fresh
/// instance has it: here each thread traps unless a global is still 0,
/// then sets it, and `_start` starts the second thread once the first has
/// said it is done (so that on many schedules the first has returned and
/// its instance is the one the second gets).
#[test]
fn a_reused_instance_starts_threads_with_fresh_globals() {
    let bytes = wat::parse_str(
        r#"(module
          (import "wasi" "thread-spawn" (func $spawn (param i32) (result i32)))
          (import "env" "memory" (memory 1 1 shared))
          (global $g (mut i32) (i32.const 0))
          (global $h (mut i64) (i64.const 7))
          (func (export "wasi_thread_start") (param $tid i32) (param $arg i32)
            (if (global.get $g) (then unreachable))
            (if (i64.ne (global.get $h) (i64.const 7)) (then unreachable))
            (global.set $g (i32.const 1))
            (global.set $h (i64.const 8))
            (i32.atomic.store (local.get $arg) (i32.const 1))
            (drop (memory.atomic.notify (local.get $arg) (i32.const 1))))
          (func $run (param $flag i32)
            (drop (call $spawn (local.get $flag)))
            (block $done
              (loop $wait
                (br_if $done (i32.atomic.load (local.get $flag)))
                (drop (memory.atomic.wait32 (local.get $flag) (i32.const 0) (i64.const -1)))
                (br $wait))))
          (func (export "_start")
            (call $run (i32.const 4096))
            (call $run (i32.const 4160))
            (call $run (i32.const 4224))))"#,
    )
    .expect("valid wat");
    let p = Program::new(&bytes, &heddle::instrument::Config::default()).expect("program");
    assert!(p.reuses_instances());
    let base = RunConfig {
        strategy: "random".into(),
        ..RunConfig::default()
    };
    assert_passes(&p, &base, 0..40, "globals of a reused instance");
}

/// A run's WASI context is kept for the next run on the same memory only
/// while the guest leaves it as built: here every run writes its arguments
/// and "out" to stdout and "err" to stderr, and a run with two arguments
/// then moves stderr over stdout (`fd_renumber(2, 1)`); the next run still
/// finds both where they were. A run with other arguments gets them.
#[test]
fn a_run_finds_its_wasi_descriptors_and_arguments_as_built() {
    let bytes = wat::parse_str(
        r#"(module
          (import "wasi_snapshot_preview1" "args_sizes_get" (func $sizes (param i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "args_get" (func $args (param i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "fd_renumber" (func $renumber (param i32 i32) (result i32)))
          (import "env" "memory" (memory 1 1 shared))
          (export "memory" (memory 0))
          (data (i32.const 9216) "out\n")
          (data (i32.const 9224) "err\n")
          (func $print (param $fd i32) (param $ptr i32) (param $len i32)
            (i32.store (i32.const 8192) (local.get $ptr))
            (i32.store (i32.const 8196) (local.get $len))
            (drop (call $write (local.get $fd) (i32.const 8192) (i32.const 1) (i32.const 8200))))
          (func (export "_start")
            (drop (call $sizes (i32.const 8208) (i32.const 8212)))
            (drop (call $args (i32.const 8256) (i32.const 8448)))
            (call $print (i32.const 1) (i32.const 8448) (i32.load (i32.const 8212)))
            (call $print (i32.const 1) (i32.const 9216) (i32.const 4))
            (call $print (i32.const 2) (i32.const 9224) (i32.const 4))
            (if (i32.gt_u (i32.load (i32.const 8208)) (i32.const 2))
              (then (drop (call $renumber (i32.const 2) (i32.const 1)))))))"#,
    )
    .expect("valid wat");
    let p = Program::new(&bytes, &heddle::instrument::Config::default()).expect("program");
    assert!(p.reuses_instances());
    let runs: [&[&str]; 6] = [
        &["a", "b"],
        &["a", "b"],
        &["c"],
        &["c"],
        &["d"],
        &["a", "b"],
    ];
    for (seed, args) in runs.into_iter().enumerate() {
        let cfg = RunConfig {
            seed: seed as u64,
            args: args.iter().map(|a| a.to_string()).collect(),
            ..RunConfig::default()
        };
        let r = p.run(&cfg).expect("run");
        let want = format!("target\0{}\0out\n", args.join("\0"));
        assert_eq!(text(&r.stdout), want, "seed {seed}: {:?}", r.verdict);
        assert_eq!(text(&r.stderr), "err\n", "seed {seed}");
    }
}

/// Writes to stdout and stderr follow the descriptors within a run: once
/// stderr is moved over stdout (`fd_renumber(2, 1)`), descriptor 1 writes
/// to stderr, and 2 and a closed 1 are bad descriptors (errno 8). The
/// module traps when a call returns other than expected.
#[test]
fn writes_follow_descriptors_moved_within_a_run() {
    let bytes = wat::parse_str(
        r#"(module
          (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "fd_fdstat_get" (func $fdstat (param i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "fd_renumber" (func $renumber (param i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "fd_close" (func $close (param i32) (result i32)))
          (import "env" "memory" (memory 1 1 shared))
          (export "memory" (memory 0))
          (data (i32.const 9216) "one\n")
          (data (i32.const 9224) "two\n")
          (data (i32.const 9232) "three\n")
          (func $print (param $fd i32) (param $ptr i32) (param $len i32) (param $errno i32)
            (i32.store (i32.const 8192) (local.get $ptr))
            (i32.store (i32.const 8196) (local.get $len))
            (if (i32.ne (call $write (local.get $fd) (i32.const 8192) (i32.const 1) (i32.const 8200))
                        (local.get $errno))
              (then unreachable)))
          (func (export "_start")
            (call $print (i32.const 1) (i32.const 9216) (i32.const 4) (i32.const 0))
            (if (i32.ne (call $fdstat (i32.const 1) (i32.const 8208)) (i32.const 0)) (then unreachable))
            (if (i32.ne (call $renumber (i32.const 2) (i32.const 1)) (i32.const 0)) (then unreachable))
            (call $print (i32.const 1) (i32.const 9224) (i32.const 4) (i32.const 0))
            (call $print (i32.const 2) (i32.const 9232) (i32.const 6) (i32.const 8))
            (if (i32.ne (call $fdstat (i32.const 2) (i32.const 8208)) (i32.const 8)) (then unreachable))
            (if (i32.ne (call $close (i32.const 1)) (i32.const 0)) (then unreachable))
            (call $print (i32.const 1) (i32.const 9232) (i32.const 6) (i32.const 8))))"#,
    )
    .expect("valid wat");
    let p = Program::new(&bytes, &heddle::instrument::Config::default()).expect("program");
    for seed in 0..3 {
        let r = p
            .run(&RunConfig {
                seed,
                ..RunConfig::default()
            })
            .expect("run");
        assert!(r.verdict.is_pass(), "seed {seed}: {:?}", r.verdict);
        assert_eq!(text(&r.stdout), "one\n", "seed {seed}");
        assert_eq!(text(&r.stderr), "two\n", "seed {seed}");
    }
}

/// A module that exports another memory than its imported one as
/// `memory` gets wasi-common's answers, in that memory, as wasi-common's
/// glue gives them: here `argc`, and a write to stdout of bytes the iovec
/// in that memory points to. Memory 0 is left alone.
#[test]
fn wasi_calls_use_the_memory_exported_as_memory() {
    let bytes = wat::parse_str(
        r#"(module
          (import "wasi_snapshot_preview1" "args_sizes_get" (func $sizes (param i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
          (import "env" "memory" (memory $shared 1 1 shared))
          (memory $own 1)
          (export "memory" (memory $own))
          (data (memory $own) (i32.const 64) "own\n")
          (data (memory $shared) (i32.const 64) "zero")
          (func (export "_start")
            (if (i32.ne (call $sizes (i32.const 8) (i32.const 12)) (i32.const 0)) (then unreachable))
            (if (i32.ne (i32.load $own (i32.const 8)) (i32.const 3)) (then unreachable))
            (if (i32.ne (i32.load $shared (i32.const 8)) (i32.const 0)) (then unreachable))
            (i32.store $own (i32.const 16) (i32.const 64))
            (i32.store $own (i32.const 20) (i32.const 4))
            (if (i32.ne (call $write (i32.const 1) (i32.const 16) (i32.const 1) (i32.const 24)) (i32.const 0))
              (then unreachable))
            (if (i32.ne (i32.load $own (i32.const 24)) (i32.const 4)) (then unreachable))))"#,
    )
    .expect("valid wat");
    let p = Program::new(&bytes, &heddle::instrument::Config::default()).expect("program");
    let r = p
        .run(&RunConfig {
            args: vec!["a".into(), "b".into()],
            ..RunConfig::default()
        })
        .expect("run");
    assert!(r.verdict.is_pass(), "{:?}", r.verdict);
    assert_eq!(text(&r.stdout), "own\n");
}

/// An error a host function returns is named in the run's verdict by what
/// it says, not by the backtrace wasmtime wraps it in: a module that calls
/// WASI without exporting its memory.
#[test]
fn a_host_error_is_named_in_the_verdict() {
    let bytes = wat::parse_str(
        r#"(module
          (import "wasi_snapshot_preview1" "args_sizes_get" (func $sizes (param i32 i32) (result i32)))
          (import "env" "memory" (memory 1 1 shared))
          (func (export "_start")
            (drop (call $sizes (i32.const 8192) (i32.const 8196)))))"#,
    )
    .expect("valid wat");
    let p = Program::new(&bytes, &heddle::instrument::Config::default()).expect("program");
    let r = p.run(&RunConfig::default()).expect("run");
    match &r.verdict {
        Verdict::Trap { message, .. } => {
            assert_eq!(message, "missing required memory export", "{:?}", r.verdict)
        }
        v => panic!("expected a trap, got {v:?}"),
    }
}
