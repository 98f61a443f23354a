//! Happens-before data-race detection in the run that explores the schedule.

use crate::common::*;
use heddle::instrument::Granularity;
use heddle::runtime::{RaceMode, RunConfig};
use heddle::verdict::Verdict;
use std::collections::BTreeSet;

fn race_keys(name: &str, fixed: bool, strategy: &str, seeds: u64) -> BTreeSet<(String, String)> {
    let e = entry(name);
    let p = program(&e.source, fixed, Granularity::All);
    let base = p.calibrate(config(&e, strategy, 0)).unwrap();
    let mut keys = BTreeSet::new();
    for seed in 0..seeds {
        let r = run(
            &p,
            &RunConfig {
                seed,
                ..base.clone()
            },
        );
        keys.extend(r.races.iter().map(|x| x.key()));
    }
    keys
}

/// The number of the last line whose trimmed text is `code`.
fn line(source: &str, code: &str) -> usize {
    let text = std::fs::read_to_string(repo().join(source)).unwrap();
    text.lines()
        .collect::<Vec<_>>()
        .iter()
        .rposition(|l| l.trim() == code)
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("`{code}` not in {source}"))
}

#[test]
fn race_bank_has_no_data_race_its_bug_is_atomicity() {
    assert_eq!(
        race_keys("race_bank", false, "random", 300),
        BTreeSet::new()
    );
}

#[test]
fn an_unlocked_counter_reports_exactly_its_racing_pair() {
    let at = format!(
        "racy_counter.c:{}",
        line("targets/racy_counter.c", "counter++;")
    );
    let keys = race_keys("racy_counter", false, "random", 300);
    assert_eq!(keys, BTreeSet::from([(at.clone(), at)]));
}

#[test]
fn spin_barrier_reports_the_plain_flag_race() {
    let e = entry("spin_barrier");
    let p = program(&e.source, false, Granularity::All);
    let r = run(
        &p,
        &RunConfig {
            event_stacks: true,
            ..config(&e, "random", 1)
        },
    );
    let flag = r
        .races
        .iter()
        .find(|x| x.object.as_deref() == Some("flag"))
        .expect("a race on flag");
    let sets = format!(
        "spin_barrier.c:{}",
        line("targets/spin_barrier.c", "flag = 1;")
    );
    let spins = format!(
        "spin_barrier.c:{}",
        line("targets/spin_barrier.c", "while (!flag)")
    );
    let (a, b) = flag.key();
    assert!(
        [a.as_str(), b.as_str()].contains(&sets.as_str())
            && [a.as_str(), b.as_str()].contains(&spins.as_str()),
        "{}",
        flag.summary()
    );
    assert_ne!(flag.first.tid, flag.second.tid);
    assert!(
        flag.first.write != flag.second.write,
        "one side writes, the other reads"
    );
    // Both stacks are there when the run records event stacks.
    assert!(!flag.first.stack.is_empty() && !flag.second.stack.is_empty());
    assert!(flag.second.stack.iter().any(
        |f| f.function.as_deref() == Some("setter") || f.function.as_deref() == Some("spinner")
    ));
}

/// `heddle run` prints both stacks of a race; every frame has a name and a
/// place, and the C library's frames are named by their library, not by
/// the path they were built at.
#[test]
fn race_stacks_print_every_frame_and_name_library_files_by_their_library() {
    let o = heddle_out(&["run", "targets/spin_barrier.c", "--quiet-output"]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}{}", text(&o.stderr));
    let frames: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("    first ") || l.starts_with("    second "))
        .collect();
    assert!(!frames.is_empty(), "{stdout}");
    for f in &frames {
        // `first  NAME PLACE`: a name and a place, neither empty.
        let words: Vec<&str> = f.split_whitespace().collect();
        assert!(
            words.len() >= 3 && !f.ends_with(' ') && !words.contains(&"?"),
            "`{f}` in:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("__wasi_thread_start_C wasi-libc: pthread_create.c:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("wasi_thread_start wasi-libc: wasi_thread_start.s:"),
        "{stdout}"
    );
    assert!(!stdout.contains("wasisdk:"), "{stdout}");
}

#[test]
fn fixed_variants_report_no_race_over_500_seeds() {
    let m = manifest();
    let mut jobs = Vec::new();
    for e in &m.targets {
        if e.large {
            continue;
        }
        for s in ["random", "pct:3"] {
            jobs.push((e.name.clone(), s.to_string()));
        }
    }
    par_map(&jobs, |(name, strategy)| {
        let keys = race_keys(name, true, strategy, 500);
        assert!(
            keys.is_empty(),
            "{name} fixed under {strategy} reports races: {keys:?}"
        );
    });
}

#[test]
fn races_fail_makes_a_race_the_verdict_and_off_turns_detection_off() {
    let e = entry("racy_counter");
    let p = program(&e.source, false, Granularity::All);
    let fail = run(
        &p,
        &RunConfig {
            races: RaceMode::Fail,
            ..config(&e, "random", 1)
        },
    );
    assert_eq!(
        fail.verdict.kind(),
        "data-race",
        "{}",
        fail.verdict.summary()
    );
    let Verdict::Race(r) = &fail.verdict else {
        unreachable!()
    };
    assert_eq!(r.object.as_deref(), Some("counter"));
    assert!(
        fail.verdict
            .signature()
            .starts_with("data-race@racy_counter.c:"),
        "{}",
        fail.verdict.signature()
    );
    let off = run(
        &p,
        &RunConfig {
            races: RaceMode::Off,
            ..config(&e, "random", 1)
        },
    );
    assert!(off.races.is_empty());
    // The CLI: a race verdict is a bug (exit 1) and replays.
    let dir = tempdir();
    let out = heddle_out(&[
        "fuzz",
        "targets/racy_counter.c",
        "--races",
        "fail",
        "--runs",
        "20",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let path = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: heddle replay "))
        .expect("replay");
    let replayed = heddle_out(&["replay", path]);
    assert!(
        text(&replayed.stdout).contains("replay reproduced"),
        "{}",
        text(&replayed.stderr)
    );
    assert_usage_error(
        &heddle_out(&["run", "targets/racy_counter.c", "--races", "sometimes"]),
        "unknown race mode",
    );
}

/// The primitives of `tests/programs/sync_zoo.c`.
const ZOO: &[&str] = &[
    "mutex",
    "rwlock",
    "spin",
    "sem",
    "sem-timed",
    "signal",
    "broadcast",
    "release-acquire",
    "seq-cst",
    "sync-builtins",
    "yield-poll",
    "relaxed-poll",
    "once",
    "barrier",
    "tas",
    "sync-tas",
    "cas",
    "futex",
];

/// Every strategy, as one portfolio: seed `s` runs member `s mod 7`.
const EVERY_STRATEGY: &str = "random,pct:3,pos,surw,delay:2,ipct,rr";

/// Each correctly synchronised hand-off of the zoo runs 100 times under
/// every strategy with no race, no hang and no failure, and 100 schedules
/// of DPOR exploration find none either (spin loops included); each racy
/// twin is reported by the fuzzer and by the explorer.
#[test]
fn sync_zoo_has_no_false_alarms_and_its_racy_twins_are_caught() {
    let dir = tempdir();
    let out = dir.path().to_str().unwrap();
    let mut problems = Vec::new();
    for prim in ZOO {
        for racy in [false, true] {
            let mut args = vec!["fuzz", "tests/programs/sync_zoo.c"];
            if racy {
                args.extend(["--cflag", "-DRACY"]);
            }
            let runs = if racy { "140" } else { "700" };
            args.extend([
                "--strategy",
                EVERY_STRATEGY,
                "--keep-going",
                "--runs",
                runs,
                "--quiet",
                "--out",
                out,
                "--",
                prim,
            ]);
            let o = heddle_out(&args);
            let stdout = text(&o.stdout);
            let raced = stdout.contains("data race on");
            let clean = o.status.code() == Some(0) && stdout.contains(": 0 failing") && !raced;
            if racy && !raced {
                problems.push(format!("{prim} -DRACY: no race reported: {stdout}"));
            }
            if !racy && !clean {
                problems.push(format!("{prim}: {stdout}{}", text(&o.stderr)));
            }
            let mut args = vec!["explore", "tests/programs/sync_zoo.c"];
            if racy {
                args.extend(["--cflag", "-DRACY"]);
            }
            args.extend([
                "--reduction",
                "dpor",
                "--races",
                "fail",
                "--max-schedules",
                "100",
                "--out",
                out,
                "--",
                prim,
            ]);
            let o = heddle_out(&args);
            let stdout = text(&o.stdout);
            match (racy, o.status.code()) {
                (false, Some(0)) | (true, Some(1)) => {}
                _ => problems.push(format!(
                    "explore {prim} (racy {racy}): exit {:?}: {stdout}{}",
                    o.status.code(),
                    text(&o.stderr)
                )),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `tests/programs/livelock.c` terminates under every fair schedule: no
/// strategy, and no explored schedule, ends it in a hang. Its `stuck`
/// variant can never finish: every strategy reports the livelock by name,
/// not as a plain step-budget hang.
#[test]
fn spin_loops_end_and_a_genuine_livelock_is_named() {
    let dir = tempdir();
    let out = dir.path().to_str().unwrap();
    let o = heddle_out(&[
        "fuzz",
        "tests/programs/livelock.c",
        "--strategy",
        EVERY_STRATEGY,
        "--runs",
        "700",
        "--quiet",
        "--out",
        out,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
    assert!(
        text(&o.stdout).contains(": 0 failing"),
        "{}",
        text(&o.stdout)
    );
    let o = heddle_out(&[
        "explore",
        "tests/programs/livelock.c",
        "--reduction",
        "dpor",
        "--out",
        out,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
    let o = heddle_out(&[
        "fuzz",
        "tests/programs/livelock.c",
        "--strategy",
        EVERY_STRATEGY,
        "--runs",
        "14",
        "--max-steps",
        "20000",
        "--keep-going",
        "--quiet",
        "--out",
        out,
        "--",
        "stuck",
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains(": 14 failing"), "{stdout}");
    assert!(
        stdout.contains("hang (livelock: every running thread spins"),
        "{stdout}"
    );
    assert!(!stdout.contains("hang (step budget"), "{stdout}");
}

/// With the default `--races report`, each distinct race gets the replay
/// file and HTML report of the first run that showed it, and `heddle
/// replay` reproduces that run and names the race again.
#[test]
fn every_race_found_has_a_replay_file_and_a_report() {
    let dir = tempdir();
    let out = dir.path().to_str().unwrap();
    let o = heddle_out(&[
        "fuzz",
        "targets/spin_barrier.c",
        "--runs",
        "20",
        "--quiet",
        "--out",
        out,
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}{}", text(&o.stderr));
    assert!(stdout.contains("data race on payload"), "{stdout}");
    let replay = dir.path().join("spin_barrier-races-seed0.toml");
    assert!(
        stdout.contains(&format!("replay: heddle replay {}", replay.display())),
        "{stdout}"
    );
    assert!(replay.with_extension("html").exists(), "{stdout}");
    // The report's stacks name library files by their library.
    let page = std::fs::read_to_string(replay.with_extension("html")).unwrap();
    assert!(page.contains("wasi-libc: pthread_create.c:"), "{page}");
    assert!(!page.contains("wasisdk:"), "{page}");
    let o = heddle_out(&["replay", replay.to_str().unwrap()]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}{}", text(&o.stderr));
    assert!(stdout.contains("data race on payload"), "{stdout}");
    assert!(
        stdout.contains("replay reproduced the recorded run"),
        "{stdout}"
    );
    // A second session of the same campaign keeps the file.
    let o = heddle_out(&[
        "fuzz",
        "targets/spin_barrier.c",
        "--runs",
        "40",
        "--resume",
        "--quiet",
        "--out",
        out,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
    assert!(replay.exists());
}

/// Threads that each write their own bytes of shared words (a `bool` and a
/// `char` per worker, the halves of a struct) do not race: locations are
/// bytes. Two workers sharing one slot do.
#[test]
fn neighbouring_bytes_are_separate_locations() {
    let dir = tempdir();
    let out = dir.path().to_str().unwrap();
    let fuzz = |racy: bool| {
        let mut args = vec!["fuzz", "tests/programs/neighbours.c"];
        if racy {
            args.extend(["--cflag", "-DRACY"]);
        }
        args.extend([
            "--strategy",
            EVERY_STRATEGY,
            "--races",
            "fail",
            "--runs",
            "300",
            "--quiet",
            "--out",
            out,
        ]);
        heddle_out(&args)
    };
    let clean = fuzz(false);
    assert_eq!(clean.status.code(), Some(0), "{}", text(&clean.stdout));
    assert!(
        !text(&clean.stdout).contains("data race"),
        "{}",
        text(&clean.stdout)
    );
    let racy = fuzz(true);
    let stdout = text(&racy.stdout);
    assert_eq!(racy.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("data race on counts")
            || stdout.contains("data race on tags")
            || stdout.contains("data race on done"),
        "{stdout}"
    );
}
