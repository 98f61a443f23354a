//! Tests: strategies and the comparison harness.

use crate::common::*;
use heddle::instrument::Granularity;
use heddle::runtime::RunConfig;
use heddle::trace::replay::ReplayFile;
use std::collections::BTreeSet;

/// The strategies added for comparisons.
const NEW_STRATEGIES: &[&str] = &["pos", "surw", "delay:2", "ipct"];

/// Every new strategy finds the bugs of a subset of the bundled targets
/// within a budget of seeds, never giving a verdict other than the expected
/// one or a pass; and schedules vary across seeds. (`heddle compare` covers
/// the whole set; see benches/RESULTS.md for the figures.)
#[test]
fn new_strategies_find_bundled_bugs_within_budget() {
    let cases: Vec<(&str, &str)> = ["race_bank", "deadlock_abba", "counter_spy", "uaf_publish"]
        .iter()
        .flat_map(|t| NEW_STRATEGIES.iter().map(move |s| (*t, *s)))
        .collect();
    let budget = 300;
    let results = par_map(&cases, |&(target, strategy)| {
        let e = entry(target);
        let p = program(&e.source, false, Granularity::All);
        let base = p.calibrate(config(&e, strategy, 0)).expect("calibrate");
        let mut schedules = BTreeSet::new();
        let mut found = None;
        for seed in 0..budget {
            let r = run(
                &p,
                &RunConfig {
                    seed,
                    ..base.clone()
                },
            );
            schedules.insert(heddle::trace::schedule_hash(&r.decisions));
            if !r.verdict.is_pass() {
                assert_eq!(
                    r.verdict.kind(),
                    e.buggy,
                    "{target} under {}: seed {seed}: {}",
                    base.strategy,
                    r.verdict.summary()
                );
                found = Some(seed);
                break;
            }
        }
        (target, base.strategy.clone(), found, schedules.len())
    });
    let mut report = Vec::new();
    for (target, spec, found, distinct) in results {
        let seed =
            found.unwrap_or_else(|| panic!("{target}: {spec} found nothing in {budget} seeds"));
        assert!(
            distinct >= (seed as usize + 1).min(3),
            "{target} under {spec}: only {distinct} distinct schedules in {} runs",
            seed + 1
        );
        report.push(format!("{target}: {spec} at seed {seed}"));
    }
    eprintln!("{}", report.join("\n"));
}

/// Each new strategy is a function of the seed: the same seed gives the
/// same decisions, and a recorded run replays.
#[test]
fn new_strategies_are_deterministic_and_replay() {
    let e = entry("race_bank");
    let p = program(&e.source, false, Granularity::All);
    for s in NEW_STRATEGIES {
        let base = p.calibrate(config(&e, s, 0)).expect("calibrate");
        assert!(heddle::sched::parse(&base.strategy, 1).unwrap().spec() == base.strategy);
        for seed in [1, 17] {
            let cfg = RunConfig {
                seed,
                ..base.clone()
            };
            let a = run(&p, &cfg);
            let b = run(&p, &cfg);
            assert_eq!(a.decisions, b.decisions, "{s} seed {seed}");
            let again = run(
                &p,
                &RunConfig {
                    forced: a.decisions.clone(),
                    strict: true,
                    strategy: "replay".into(),
                    ..cfg.clone()
                },
            );
            assert!(again.divergence.is_none(), "{s} seed {seed}");
            assert_eq!(again.verdict.signature(), a.verdict.signature());
        }
    }
}

/// Splits a CSV line (fields may be quoted).
fn csv_fields(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().unwrap().push('"');
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    out
}

fn csv_rows(path: &std::path::Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).expect("compare.csv");
    let mut lines = text.lines();
    let header = csv_fields(lines.next().expect("header"));
    assert_eq!(header.len(), 15, "{header:?}");
    lines
        .map(|l| {
            let f = csv_fields(l);
            assert_eq!(f.len(), header.len(), "{l}");
            f
        })
        .collect()
}

/// The harness's numbers for `random` are `heddle fuzz`'s over the same
/// seeds: the failing runs of each trial's seed range, and the first of
/// them; and every compared strategy finds the bugs of the chosen targets.
#[test]
fn compare_random_matches_fuzz_with_the_same_seeds() {
    let dir = tempdir();
    let out_dir = dir.path().to_str().unwrap();
    let (runs, trials) = (25u64, 3u64);
    let out = heddle_out(&[
        "compare",
        "--strategies",
        "random,pct:3,pos,surw,delay:2,ipct",
        "--targets",
        "targets/targets.toml",
        "--only",
        "race_bank,counter_spy",
        "--runs",
        &runs.to_string(),
        "--trials",
        &trials.to_string(),
        "--jobs",
        "2",
        "--out",
        out_dir,
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.starts_with("| target | expected | strategy | detection"),
        "{stdout}"
    );
    let md = std::fs::read_to_string(dir.path().join("compare.md")).expect("compare.md");
    assert!(stdout.contains(&md));
    let rows = csv_rows(&dir.path().join("compare.csv"));
    assert_eq!(rows.len(), 12, "{rows:?}");
    for (target, args) in [("race_bank", ["2", "2"]), ("counter_spy", ["2", "3"])] {
        let row = rows
            .iter()
            .find(|r| r[0] == target && r[2] == "random")
            .expect("random row");
        let fuzz = heddle_out(&[
            "fuzz",
            &format!("targets/{target}.c"),
            "--strategy",
            "random",
            // `compare` runs each target's -O1 build.
            "--opt",
            "1",
            "--runs",
            &(runs * trials).to_string(),
            "--keep-going",
            "--list-failures",
            "--jobs",
            "2",
            "--out",
            out_dir,
            "--",
            args[0],
            args[1],
        ]);
        let fuzz_out = text(&fuzz.stdout);
        let failing: Vec<u64> = fuzz_out
            .lines()
            .filter_map(|l| l.strip_prefix("failing seed "))
            .map(|l| l.split(':').next().unwrap().parse().unwrap())
            .collect();
        assert!(!failing.is_empty(), "{fuzz_out}");
        // Column 6: failing runs; 8: trials found; 11: first bug per trial.
        assert_eq!(
            row[6],
            failing.len().to_string(),
            "{target}: {row:?} vs {failing:?}"
        );
        let firsts: Vec<String> = (0..trials)
            .map(|t| {
                failing
                    .iter()
                    .find(|&&s| s >= t * runs && s < (t + 1) * runs)
                    .map(|s| (s - t * runs + 1).to_string())
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(row[11], firsts.join(";"), "{target}: {row:?}");
        let found = firsts.iter().filter(|f| !f.is_empty()).count();
        assert_eq!(row[8], found.to_string());
        assert!(fuzz_out.contains(&format!("{} failing", failing.len())));
    }
    for r in &rows {
        let distinct: u64 = r[12].parse().unwrap();
        assert!(distinct > 1 && distinct <= runs * trials, "{r:?}");
        assert!(
            r[6].parse::<u64>().unwrap() > 0,
            "{} under {} found nothing",
            r[0],
            r[2]
        );
    }
}

#[test]
fn compare_rejects_bad_input() {
    let dir = tempdir();
    let out = dir.path().to_str().unwrap();
    let cmp = |strategies: &str, extra: &[&str]| {
        let mut args = vec![
            "compare",
            "--strategies",
            strategies,
            "--runs",
            "2",
            "--trials",
            "1",
            "--out",
            out,
        ];
        args.extend_from_slice(extra);
        heddle_out(&args)
    };
    assert_usage_error(&cmp("random,fifo", &[]), "unknown strategy `fifo`");
    assert_usage_error(&cmp("delay:x", &[]), "bad delay bound");
    assert_usage_error(
        &cmp("random,,pos", &[]),
        "empty strategy in --strategy `random,,pos`: give strategies separated by single commas",
    );
    assert_usage_error(
        &cmp("random", &["--only", "nonesuch"]),
        "no target `nonesuch`",
    );
    assert_usage_error(
        &cmp("random", &["--targets", "nothere.toml"]),
        "nothere.toml",
    );
    assert_usage_error(
        &heddle_out(&[
            "compare",
            "--strategies",
            "random",
            "--runs",
            "0",
            "--out",
            out,
        ]),
        "at least 1",
    );
    assert_usage_error(
        &heddle_out(&["run", "targets/race_bank.c", "--strategy", "ipct:0"]),
        "bad ipct depth",
    );
}

const PY_STRATEGY: &str = "examples/strategies/random_walk.py";

/// A strategy in Python finds the bank race through `exec:`, its runs are
/// reproducible, and the replay file it leaves replays without it.
#[test]
fn external_strategy_finds_the_bug_and_replays_without_the_process() {
    let dir = tempdir();
    let script = dir.path().join("walk.py");
    std::fs::copy(repo().join(PY_STRATEGY), &script).unwrap();
    let spec = format!("exec:{}", script.display());
    let fuzz = |jobs: &str| {
        let out = heddle_out(&[
            "fuzz",
            "targets/race_bank.c",
            "--strategy",
            &spec,
            "--runs",
            "40",
            "--keep-going",
            "--list-failures",
            "--jobs",
            jobs,
            "--out",
            dir.path().to_str().unwrap(),
        ]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        text(&out.stdout)
    };
    let one = fuzz("1");
    let two = fuzz("2");
    let failing = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("failing seed"))
            .map(String::from)
            .collect()
    };
    assert!(!failing(&one).is_empty());
    assert_eq!(failing(&one), failing(&two));
    let path = one
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: heddle replay "))
        .expect("replay file");
    let file = ReplayFile::load(std::path::Path::new(path)).unwrap();
    assert_eq!(file.run.strategy, spec);
    std::fs::remove_file(&script).unwrap();
    let replay = heddle_out(&["replay", path]);
    let out = text(&replay.stdout);
    assert_eq!(
        replay.status.code(),
        Some(1),
        "{out}{}",
        text(&replay.stderr)
    );
    assert!(out.contains("replay reproduced the recorded run"), "{out}");
}

#[test]
fn external_strategy_failures_are_one_line_errors() {
    let dir = tempdir();
    let run = |spec: &str, misbehave: &str| {
        heddle()
            .args([
                "fuzz",
                "targets/race_bank.c",
                "--strategy",
                spec,
                "--runs",
                "3",
                "--out",
                dir.path().to_str().unwrap(),
            ])
            .env("HEDDLE_TEST_MISBEHAVE", misbehave)
            .output()
            .expect("run heddle")
    };
    let spec = format!("exec:{PY_STRATEGY}");
    assert_usage_error(&run(&spec, "crash"), "crashing on purpose");
    assert_usage_error(&run(&spec, "crash"), "exited");
    assert_usage_error(&run(&spec, "garbage"), "not JSON at thread decision 2");
    assert_usage_error(&run(&spec, "bad-tid"), "bad reply to thread decision 2");
    assert_usage_error(
        &run("exec:./no-such-strategy", ""),
        "cannot start `./no-such-strategy`",
    );
    assert_usage_error(&run("exec:", ""), "exec needs a program");
    assert_usage_error(&run("exec:/bin/true", ""), "exited");
    // A program that never answers: an error after the reply timeout, not a hang.
    let silent = heddle()
        .args(["run", "targets/race_bank.c", "--strategy", "exec:sleep 60"])
        .env("HEDDLE_EXEC_TIMEOUT_MS", "300")
        .output()
        .expect("run heddle");
    assert_usage_error(&silent, "gave no reply within 300 ms");
}

/// Over the whole bundled manifest, compare has a row per target whose
/// buggy build should fail and strategy, and its exit code says whether
/// every one of them found its bug.
#[test]
fn compare_covers_every_bundled_target() {
    let dir = tempdir();
    let out = heddle_out(&[
        "compare",
        "--strategies",
        "random,pct:3",
        "--runs",
        "8",
        "--trials",
        "1",
        "--jobs",
        "2",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    let rows = csv_rows(&dir.path().join("compare.csv"));
    let buggy: Vec<String> = manifest()
        .targets
        .iter()
        .filter(|t| t.buggy != "pass")
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(rows.len(), 2 * buggy.len(), "{stdout}");
    for name in &buggy {
        assert!(stdout.contains(&format!("| {name} |")), "{name}: {stdout}");
    }
    let missed: Vec<&Vec<String>> = rows.iter().filter(|r| r[6] == "0").collect();
    if missed.is_empty() {
        assert_eq!(out.status.code(), Some(0), "{stdout}");
    } else {
        assert_eq!(out.status.code(), Some(1), "{stdout}");
        for r in missed {
            assert!(
                stdout.contains(&format!("{} under {}", r[0], r[2])),
                "{stdout}"
            );
        }
    }
}

/// `heddle fuzz targets/NAME.c --out DIR` with the default portfolio on one
/// job: it fails with `kind` within `runs` runs, and its replay file
/// reproduces the run. Returns the output and the replay file.
fn default_fuzz_finds(
    dir: &std::path::Path,
    name: &str,
    runs: u32,
    kind: &str,
) -> (String, std::path::PathBuf) {
    let out = heddle_out(&[
        "fuzz",
        &format!("targets/{name}.c"),
        "--runs",
        &runs.to_string(),
        "--jobs",
        "1",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains(kind), "{stdout}");
    let replay = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: heddle replay "))
        .expect("a replay file")
        .to_string();
    let again = heddle_out(&["replay", &replay]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again.stderr));
    assert!(text(&again.stdout).contains("replay reproduced the recorded run"));
    (stdout, replay.into())
}

/// Time as a choice: a window guarded by `usleep(500)` is never opened by a
/// strategy that lets time pass only with the program's steps, and is opened
/// by the same strategy with `+stall`; the stall is a recorded value decision,
/// so the replay file reproduces the run; the fixed build passes, and so does
/// a program that orders its threads by sleeps 20 ms apart (`timed_wait`:
/// no stall is longer than 10 ms or jumps past an earlier deadline).
#[test]
fn stalls_open_windows_guarded_by_sleeps_and_replay() {
    let e = entry("sleep_teardown");
    let p = program(&e.source, false, Granularity::All);
    let fixed = program(&e.source, true, Granularity::All);
    for strategy in ["random", "pos", "sites"] {
        let plain = p.calibrate(config(&e, strategy, 0)).unwrap();
        assert_passes(&p, &plain, 0..300, strategy);
        let stalled = p
            .calibrate(config(&e, &format!("{strategy}+stall"), 0))
            .unwrap();
        let seed = (0..50)
            .find(|&seed| {
                !run(
                    &p,
                    &RunConfig {
                        seed,
                        ..stalled.clone()
                    },
                )
                .verdict
                .is_pass()
            })
            .unwrap_or_else(|| panic!("{strategy}+stall: no use-after-free in 50 seeds"));
        let r = run(
            &p,
            &RunConfig {
                seed,
                ..stalled.clone()
            },
        );
        assert_eq!(
            r.verdict.kind(),
            "use-after-free",
            "{}",
            r.verdict.summary()
        );
        assert!(
            r.decisions.iter().any(|d| matches!(
                d,
                heddle::trace::Decision::Value {
                    options: 2,
                    value: 1,
                    ..
                }
            )),
            "the stall is a recorded decision: {:?}",
            r.decisions
        );
        assert_passes(&fixed, &stalled, 0..300, &format!("fixed {strategy}+stall"));
    }
    // The CLI end to end: the default portfolio finds it, the replay file
    // reproduces it.
    let dir = tempdir();
    let (_, replay) = default_fuzz_finds(dir.path(), "sleep_teardown", 200, "use-after-free");
    let file = ReplayFile::load(&replay).unwrap();
    assert!(
        file.run.strategy.ends_with("+stall"),
        "{}",
        file.run.strategy
    );
    // Sleeps 20 ms apart keep their order under every stalling strategy.
    let tw = entry("timed_wait");
    let p = program(&tw.source, false, Granularity::All);
    for strategy in ["random+stall", "pos+stall", "sites+stall", "surw+stall"] {
        let base = p.calibrate(config(&tw, strategy, 0)).unwrap();
        assert_passes(&p, &base, 0..500, &format!("timed_wait {strategy}"));
    }
}

/// Site priorities scale with threads: the torn read and the two-stage
/// update are found with 100 threads in a few hundred runs by `sites`, and
/// more often than by thread priorities (PCT, POS) or random walk in as
/// many.
#[test]
fn site_priorities_find_bugs_among_100_threads() {
    let cases: Vec<(&str, &str)> = ["check_then_read_100", "two_stage_100"]
        .iter()
        .flat_map(|t| ["sites", "random", "pct:3", "pos"].map(move |s| (*t, s)))
        .collect();
    let runs = 400;
    let failing = par_map(&cases, |&(target, strategy)| {
        let e = entry(target);
        let p = program(&e.source, false, Granularity::All);
        let base = p.calibrate(config(&e, strategy, 0)).unwrap();
        (0..runs)
            .filter(|&seed| {
                let r = run(
                    &p,
                    &RunConfig {
                        seed,
                        ..base.clone()
                    },
                );
                if !r.verdict.is_pass() {
                    assert_eq!(
                        r.verdict.kind(),
                        "assertion",
                        "{target} {strategy}: {}",
                        r.verdict.summary()
                    );
                }
                !r.verdict.is_pass()
            })
            .count()
    });
    let table: Vec<String> = cases
        .iter()
        .zip(&failing)
        .map(|((t, s), n)| format!("{t} {s}: {n} of {runs}"))
        .collect();
    eprintln!("{}", table.join("\n"));
    for (i, ((target, strategy), n)) in cases.iter().zip(&failing).enumerate() {
        let sites = failing[i - i % 4];
        assert!(sites > 0, "{target}: sites found nothing in {runs} runs");
        assert!(
            *strategy == "sites" || *n < sites,
            "{target}: {strategy} failed {n} runs, sites {sites}: the comparison is stale\n{}",
            table.join("\n")
        );
    }
}

/// `heddle fuzz` without `--strategy` runs the default portfolio, which
/// catches the three-thread lock cycle (a cycle random walk alone used to
/// miss, when it spent most of its decisions inside the C library).
#[test]
fn the_default_portfolio_catches_a_three_lock_cycle() {
    let dir = tempdir();
    let (stdout, _) = default_fuzz_finds(dir.path(), "ring_deadlock", 300, "deadlock");
    assert!(
        stdout.contains(
            "strategy sites:3+stall,pos+stall,surw+stall,random+stall over builds O1,O0:"
        ),
        "the portfolio is named: {stdout}"
    );
}

/// The (seed, schedule hash) of every run in a campaign directory.
fn schedules(dir: &std::path::Path) -> Vec<(u64, u64)> {
    let j = heddle::campaign::journal::Journal::read(&dir.join(heddle::campaign::journal::FILE))
        .expect("journal");
    let mut v: Vec<(u64, u64)> = j.records.iter().map(|r| (r.seed, r.schedule)).collect();
    v.sort();
    v
}

/// `rff` learns from earlier runs in generations of seeds: the campaign is
/// the same with one or two workers; a run of the first generation has no
/// corpus (the same schedule as in a campaign that starts at its seed) and
/// later runs do (some schedules differ); `compare` cuts its trials into the
/// same generations as `fuzz`; a failing run's replay file reproduces
/// without the corpus.
#[test]
fn rff_learns_in_generations_whatever_the_jobs() {
    use heddle::campaign::feedback::GENERATION as G;
    let dir = tempdir();
    let d = |n: &str| dir.path().join(n);
    let fuzz = |out: &str, extra: &[&str]| {
        let o = d(out);
        let mut args = vec![
            "fuzz",
            "targets/aba_stack.c",
            "--strategy",
            "rff",
            "--opt",
            "1",
            "--keep-going",
            "--quiet",
            "--journal",
            "all",
            "--out",
            o.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        // The manifest's arguments, as `compare` runs the target.
        args.extend_from_slice(&["--", "3", "2"]);
        let r = heddle_out(&args);
        // A one-generation campaign may find nothing (exit 0); none fails
        // in another way.
        assert!(
            matches!(r.status.code(), Some(0 | 1)),
            "{}{}",
            text(&r.stdout),
            text(&r.stderr)
        );
        text(&r.stdout)
    };
    let runs = (5 * G).to_string();
    let one = fuzz("one", &["--runs", &runs, "--jobs", "1"]);
    assert!(!one.contains(": 0 failing"), "rff found nothing: {one}");
    fuzz("two", &["--runs", &runs, "--jobs", "2"]);
    let summary = |n: &str| std::fs::read_to_string(d(n).join("campaign.toml")).unwrap();
    assert_eq!(
        heddle::campaign::summary::deterministic_part(&summary("one")),
        heddle::campaign::summary::deterministic_part(&summary("two"))
    );
    let all = schedules(&d("one"));
    assert_eq!(all, schedules(&d("two")));
    assert_eq!(all.len() as u64, 5 * G);
    // The same seeds as the first generation of another campaign.
    let later = (2 * G).to_string();
    fuzz(
        "later",
        &["--runs", &G.to_string(), "--seed", &later, "--jobs", "2"],
    );
    let fresh = schedules(&d("later"));
    assert_eq!(fresh.len() as u64, G);
    let learned = &all[(2 * G) as usize..(3 * G) as usize];
    let differ = fresh.iter().zip(learned).filter(|(a, b)| a != b).count();
    assert!(differ > 0, "the corpus changed no schedule");
    let first = schedules(&d("one"))[..G as usize].to_vec();
    fuzz("first", &["--runs", &G.to_string(), "--jobs", "2"]);
    assert_eq!(first, schedules(&d("first")));
    // compare: one trial is the same campaign.
    let cmp = heddle_out(&[
        "compare",
        "--strategy",
        "rff",
        "--only",
        "aba_stack",
        "--runs",
        &runs,
        "--trials",
        "1",
        "--quiet",
        "--out",
        d("cmp").to_str().unwrap(),
    ]);
    assert_eq!(cmp.status.code(), Some(0), "{}", text(&cmp.stderr));
    let rows = csv_rows(&d("cmp").join("compare.csv"));
    let count = one
        .lines()
        .find_map(|l| {
            l.strip_suffix(" failing")?
                .rsplit(' ')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .expect("a failing count");
    assert_eq!(rows[0][6], count.to_string(), "{one}\n{rows:?}");
    // The replay files stand alone.
    let replays: Vec<_> = std::fs::read_dir(d("one"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.to_str().unwrap().contains("-seed") && p.extension().is_some_and(|x| x == "toml")
        })
        .collect();
    assert!(!replays.is_empty(), "no replay file");
    for replay in replays {
        let again = heddle_out(&["replay", replay.to_str().unwrap()]);
        assert_eq!(again.status.code(), Some(1), "{}", text(&again.stderr));
        assert!(text(&again.stdout).contains("replay reproduced the recorded run"));
    }
}

/// A PCT-style strategy's `k` covers its own runs: calibration measures a
/// run of the strategy itself besides random walk's and widens the longer
/// by half, so a change point can fall anywhere up to the end of a run.
/// On check_then_read 100 `sites` keeps the 99 setters waiting that random
/// walk runs at once, so its runs are longer than random walk's.
#[test]
fn a_change_point_range_covers_the_strategys_own_runs() {
    let e = entry("check_then_read_100");
    let p = program(&e.source, false, Granularity::All);
    let calibrated = p.calibrate(config(&e, "sites:3", 0)).expect("calibrate");
    let k: u64 = calibrated
        .strategy
        .strip_prefix("sites:3:k=")
        .and_then(|k| k.parse().ok())
        .unwrap_or_else(|| panic!("spec {}", calibrated.strategy));
    let random = run(&p, &config(&e, "random", 0)).decisions.len() as u64;
    assert!(k >= random * 3 / 2, "k = {k}, random walk's run: {random}");
    for seed in 0..5 {
        let own = run(
            &p,
            &RunConfig {
                seed,
                ..calibrated.clone()
            },
        )
        .decisions
        .len() as u64;
        assert!(own < k, "seed {seed}: {own} decisions, k = {k}");
    }
}
