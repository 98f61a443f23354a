//! Commands as library calls: the report values `heddle fuzz`, `heddle
//! replay` and `heddle test` render, consumed directly.

use crate::common::*;
use heddle::campaign::exec;
use heddle::campaign::{SeedPlan, Shard};
use heddle::fuzz::Fuzz;
use heddle::instrument::Config;
use heddle::reproduce;
use heddle::runtime::{Program, RunConfig};
use heddle::suite::{Status, Suite};

/// A campaign of the bundled bank race through [`Fuzz::run`]: the report
/// counts the failing run, names the replay file it wrote (which replays
/// to the same verdict), and a project file that names that replay gives
/// a [`heddle::suite::TestReport`] whose checks all pass.
#[test]
fn fuzz_and_test_reports_are_library_values() {
    let dir = tempdir();
    let source = repo().join("targets/race_bank.c");
    let t = heddle::target::load(&source, &[]).expect("target");
    let program = Program::new(&t.bytes, &Config::default()).expect("program");
    let plan = SeedPlan {
        seed_start: 0,
        runs: Some(50),
        shard: Shard::WHOLE,
    };
    let fuzz = Fuzz::new(t, program, RunConfig::default(), "random", plan, false).unwrap();
    let out = dir.path().join("fuzz");
    let r = fuzz
        .run(&exec::Options {
            jobs: 2,
            time_budget: None,
            started: None,
            out: out.clone(),
            resume: false,
            journal: false,
            all_failing_seeds: false,
            progress: exec::Progress::Off,
        })
        .expect("campaign");
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
