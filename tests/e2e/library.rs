//! Commands as library calls: the report values `heddle fuzz`, `heddle
//! replay` and `heddle test` render, consumed directly.

use crate::common::*;
use heddle::campaign::exec;
use heddle::campaign::{SeedPlan, Shard};
use heddle::fuzz::{Fuzz, FuzzReport};
use heddle::instrument::Config;
use heddle::reproduce;
use heddle::runtime::{Program, RunConfig};
use heddle::suite::{Status, Suite};

/// A `random` campaign of 50 seeds of the bundled bank race from `base`,
/// into `out`, stopping at its first failure.
fn race_bank_campaign(base: RunConfig, out: &std::path::Path, jobs: usize) -> FuzzReport {
    let t = heddle::target::load(&repo().join("targets/race_bank.c"), &[]).expect("target");
    let program = Program::new(&t.bytes, &Config::default()).expect("program");
    let plan = SeedPlan {
        seed_start: 0,
        runs: Some(50),
        shard: Shard::WHOLE,
    };
    Fuzz::new(t, program, base, "random", plan, false)
        .unwrap()
        .run(&exec::Options {
            jobs,
            time_budget: None,
            started: None,
            out: out.to_path_buf(),
            resume: false,
            journal: false,
            all_failing_seeds: false,
            progress: exec::Progress::Off,
        })
        .expect("campaign")
}

/// A campaign of the bundled bank race through [`Fuzz::run`]: the report
/// counts the failing run, names the replay file it wrote (which replays
/// to the same verdict), and a project file that names that replay gives
/// a [`heddle::suite::TestReport`] whose checks all pass.
#[test]
fn fuzz_and_test_reports_are_library_values() {
    let dir = tempdir();
    let source = repo().join("targets/race_bank.c");
    let out = dir.path().join("fuzz");
    let r = race_bank_campaign(RunConfig::default(), &out, 2);
    // Without keep_going the campaign stops at its first failure.
    assert_eq!(r.failing(), 1, "{:?}", r.outcome.summary.stats);
    assert_eq!(r.error_runs(), 0);
    assert_eq!(r.interrupted(), None);
    let replays = r.replays();
    assert_eq!(replays.len(), 1);
    let w = &replays[0];
    assert!(w.path.starts_with(&out) && w.path.is_file(), "{w:?}");
    assert_eq!(r.failures.len(), 1);
    assert_eq!(r.failures[0].seed, w.seed);
    assert_eq!(
        r.failures[0].replay.as_deref(),
        Some(w.path.display().to_string().as_str())
    );
    assert_eq!(r.failures[0].verdict.kind, "assertion");
    assert_eq!(r.target_name(), "race_bank");

    let rep = reproduce::replay(&w.path, &reproduce::Options::default()).expect("replay");
    assert!(rep.reproduced.is_ok(), "{:?}", rep.reproduced);
    assert_eq!(rep.replay.file.run.seed, w.seed);
    assert_eq!(rep.result.verdict.kind(), "assertion");

    let project = dir.path().join("heddle.toml");
    std::fs::write(
        &project,
        format!(
            r#"
[[target]]
name = "bank"
source = "{source}"
buggy = "assertion"
fixed = "pass"
hunt_seeds = 50
fixed_seeds = 10
replays = ["{replay}"]
"#,
            source = source.display(),
            replay = w.path.display()
        ),
    )
    .unwrap();
    let mut seen = Vec::new();
    let report = Suite {
        project: project.clone(),
        only: Vec::new(),
        seeds: None,
        fixed_seeds: None,
        jobs: 2,
        out: dir.path().join("test"),
    }
    .run(&mut |c| seen.push(c.check.clone()))
    .expect("suite");
    let names: Vec<&str> = report.checks.iter().map(|c| c.check.as_str()).collect();
    assert_eq!(seen, names, "each check is reported as it is done");
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(&names[..2], ["buggy", "fixed"]);
    assert!(names[2].starts_with("replay:"), "{names:?}");
    assert_eq!(report.count(Status::Ok), 3, "{:#?}", report.checks);
    assert_eq!(report.targets, 1);
    let buggy = &report.checks[0];
    assert_eq!(buggy.got, "assertion");
    // The suite hunts with the default portfolio, the campaign above with
    // `random`: each names its own first failing seed.
    assert!(buggy.seed.is_some(), "{buggy:?}");
    assert_eq!(report.checks[1].runs, 10);

    // Bad input is an error of the call, not a check.
    let err = Suite {
        only: vec!["nope".into()],
        ..Suite {
            project,
            only: Vec::new(),
            seeds: None,
            fixed_seeds: None,
            jobs: 1,
            out: dir.path().join("test2"),
        }
    }
    .run(&mut |_| {})
    .unwrap_err();
    assert!(err.to_string().contains("no target named `nope`"), "{err}");
}

/// A campaign's run that makes more decisions than it may keep
/// ([`RunConfig::keep_decisions`], what keeps a long run's memory flat)
/// still gets its replay file, from the rerun with diagnostics: the same
/// bytes as when every run keeps its schedule, and it replays.
#[test]
fn a_run_that_kept_no_decisions_gets_the_same_replay_file() {
    let dir = tempdir();
    let replay_with = |keep: u64, name: &str| {
        let base = RunConfig {
            keep_decisions: keep,
            ..RunConfig::default()
        };
        let r = race_bank_campaign(base, &dir.path().join(name), 1);
        let replays = r.replays();
        assert_eq!(replays.len(), 1, "{name}");
        replays[0].path.clone()
    };
    let kept = replay_with(u64::MAX, "kept");
    let dropped = replay_with(3, "dropped");
    assert_eq!(
        kept.file_name(),
        dropped.file_name(),
        "the same seed fails first"
    );
    assert_eq!(
        std::fs::read(&kept).unwrap(),
        std::fs::read(&dropped).unwrap(),
        "the same replay file"
    );
    let rep = reproduce::replay(&dropped, &reproduce::Options::default()).expect("replay");
    assert!(rep.reproduced.is_ok(), "{:?}", rep.reproduced);
    assert!(rep.result.decision_count > 3);
    assert!(rep.result.decisions_complete());
}
