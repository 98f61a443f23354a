//! Campaigns: portfolios, shards and merge, resume after SIGKILL,
//! statistics, the project file and `heddle test`.

use crate::common::*;
use heddle::campaign::journal::{Journal, FILE as JOURNAL};
use heddle::campaign::state::ShardState;
use heddle::campaign::summary::deterministic_part;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn summary_text(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("campaign.toml")).expect("campaign.toml")
}

/// The seeds of a campaign's per-run journal (`--journal all`).
fn seeds(dir: &Path) -> Vec<u64> {
    let j = Journal::read(&dir.join(JOURNAL)).expect("journal");
    let mut v: Vec<u64> = j.records.iter().map(|r| r.seed).collect();
    v.sort();
    v
}

/// Runs counted by the state files in `dir` (0 while there are none).
fn state_runs(dir: &Path) -> u64 {
    ShardState::list(dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| ShardState::read(p).ok())
        .map(|s| s.stats.runs)
        .sum()
}

fn fuzz(args: &[&str]) -> std::process::Output {
    let mut all = vec!["fuzz", "targets/race_bank.c", "--quiet"];
    all.extend_from_slice(args);
    heddle_out(&all)
}

/// One campaign, the same with another --jobs, and its two shards merged:
/// the deterministic part of the summary is byte-identical; the shards run
/// exactly the campaign's seeds between them.
#[test]
fn summary_is_the_same_for_any_jobs_and_for_merged_shards() {
    let dir = tempdir();
    let d = |n: &str| dir.path().join(n);
    let common = [
        "--runs",
        "240",
        "--keep-going",
        "--strategy",
        "random,pct:3,rr:0.2",
        "--stats",
        "--journal",
        "all",
    ];
    let run = |out: &str, extra: &[&str]| {
        let mut a: Vec<&str> = common.to_vec();
        a.extend_from_slice(extra);
        let o = d(out);
        a.extend_from_slice(&["--out", p(&o)]);
        let r = fuzz(&a);
        assert_eq!(r.status.code(), Some(1), "{}", text(&r.stderr));
        text(&r.stdout)
    };
    let one = run("one", &["--jobs", "1"]);
    let two = run("two", &["--jobs", "2"]);
    run("s1", &["--jobs", "2", "--shard", "1/2"]);
    run("s2", &["--jobs", "1", "--shard", "2/2"]);
    let merged = heddle_out(&[
        "merge",
        p(&d("s1")),
        p(&d("s2")),
        "--out",
        p(&d("merged")),
        "--stats",
    ]);
    assert_eq!(merged.status.code(), Some(1), "{}", text(&merged.stderr));
    let (s1, s2) = (seeds(&d("s1")), seeds(&d("s2")));
    let both: BTreeSet<u64> = s1.iter().chain(&s2).copied().collect();
    assert_eq!(both.len(), s1.len() + s2.len(), "shards overlap");
    assert_eq!(both.into_iter().collect::<Vec<_>>(), seeds(&d("one")));
    assert_eq!(seeds(&d("one")), (0..240).collect::<Vec<_>>());
    assert!(s1.len() > 60 && s2.len() > 60, "{} {}", s1.len(), s2.len());

    let reference = summary_text(&d("one"));
    let det = deterministic_part(&reference);
    for other in ["two", "merged"] {
        assert_eq!(
            det,
            deterministic_part(&summary_text(&d(other))),
            "{other} differs"
        );
    }
    // A merged directory is a campaign directory: it merges again.
    let again = heddle_out(&["merge", p(&d("merged")), "--out", p(&d("again"))]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again.stderr));
    assert_eq!(det, deterministic_part(&summary_text(&d("again"))));
    // A shard's own summary is about its own seeds.
    assert_ne!(det, deterministic_part(&summary_text(&d("s1"))));

    // The summary's content.
    let v: toml::Value = toml::from_str(&reference).unwrap();
    let stats = &v["stats"];
    assert_eq!(stats["runs"].as_integer(), Some(240));
    let failing = stats["failing_runs"].as_integer().unwrap();
    assert!(failing > 0);
    let sched = stats["distinct_schedules"].as_integer().unwrap();
    assert!(sched > 10 && sched <= 240, "{sched}");
    let (hit, sites) = (
        stats["sites_hit"].as_integer().unwrap(),
        stats["sites"].as_integer().unwrap(),
    );
    assert!(hit > 0 && hit < sites, "{hit}/{sites}");
    // race_bank's usage-error path never runs with its default args.
    let never: Vec<&str> = stats["never_hit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert!(never.iter().all(|n| n.contains("race_bank.c")), "{never:?}");
    // The source is fuzzed over its -O1 and -O0 builds: 2 x 3 members.
    let strategies = v["strategy"].as_array().unwrap();
    assert_eq!(strategies.len(), 6);
    let spec = |i: usize| strategies[i]["spec"].as_str().unwrap().to_string();
    assert!(
        spec(1).starts_with("pct:3:k=") && spec(1).ends_with("@O1"),
        "{}",
        spec(1)
    );
    assert!(spec(3).starts_with("random@O0"), "{}", spec(3));
    let per: i64 = strategies
        .iter()
        .map(|s| s["runs"].as_integer().unwrap())
        .sum();
    assert_eq!(per, 240);
    assert_eq!(strategies[0]["runs"].as_integer(), Some(40));
    let failures = v["failure"].as_array().unwrap();
    assert!(!failures.is_empty());
    let f0 = &failures[0];
    let by: i64 = f0["by_strategy"]
        .as_table()
        .unwrap()
        .values()
        .map(|x| x.as_integer().unwrap())
        .sum();
    assert_eq!(by, f0["runs"].as_integer().unwrap());
    assert!(reference.contains("[timing]") && reference.contains("first_failure"));
    // The replay file of the first failure is in every directory and replays.
    let replay = f0["replay"].as_str().unwrap();
    for dir in ["one", "two", "merged"] {
        let path = d(dir).join(replay);
        assert!(path.exists(), "{}", path.display());
    }
    let r = heddle_out(&["replay", p(&d("merged").join(replay))]);
    assert!(
        text(&r.stdout).contains("replay reproduced"),
        "{}",
        text(&r.stderr)
    );
    // Only the first seed's replay file per signature is kept.
    let replays = std::fs::read_dir(d("one"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".toml")
                && e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .contains("-seed")
        })
        .count();
    assert_eq!(replays, failures.len());
    // --stats output.
    for s in [&one, &two] {
        assert!(s.starts_with("240 runs in"), "{s}");
        assert!(s.contains("distinct schedules"), "{s}");
        assert!(s.contains("sites hit"), "{s}");
        assert!(s.contains("strategy random@O1: 40 runs"), "{s}");
        assert!(s.contains("time to first assertion@"), "{s}");
    }
    let m = text(&merged.stdout);
    assert!(
        m.contains("shards 1/2,2/2") && m.contains("240 runs"),
        "{m}"
    );
}

/// SIGKILL in the middle of a campaign, then --resume: every seed runs
/// exactly once over the two sessions (the per-run journal, cut back to the
/// last checkpoint, holds each seed once), no failure counted before the
/// kill is lost, and the summary equals an uninterrupted campaign's.
#[test]
fn a_killed_campaign_resumes_without_redoing_seeds_or_losing_failures() {
    let dir = tempdir();
    let out = dir.path().join("c");
    let args = [
        "fuzz",
        "targets/race_bank.c",
        "--runs",
        "120000",
        "--keep-going",
        "--jobs",
        "2",
        "--quiet",
        "--journal",
        "all",
        "--out",
        p(&out),
    ];
    let mut child = heddle()
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // Wait until a checkpoint holds a few hundred runs.
    while state_runs(&out) < 300 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "campaign too slow"
        );
        assert!(child.try_wait().unwrap().is_none(), "finished too early");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let state = ShardState::read(&ShardState::path(&out, "1/1".parse().unwrap())).unwrap();
    let counted = state.stats.runs;
    assert!((300..120000).contains(&counted), "{counted}");
    assert_eq!(state.frontier, counted, "the counted seeds are a prefix");
    let failed_before: Vec<(String, u64)> = state
        .stats
        .failures
        .iter()
        .map(|(sig, f)| (sig.clone(), f.first_seed))
        .collect();
    assert!(!failed_before.is_empty());
    // The journal may hold runs past the checkpoint, and a torn batch.
    let journal = out.join(JOURNAL);
    let mut bytes = std::fs::read(&journal).unwrap();
    assert!(bytes.len() as u64 >= state.journal_bytes.unwrap());
    bytes.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0]);
    std::fs::write(&journal, &bytes).unwrap();

    let mut resume: Vec<&str> = args.to_vec();
    resume.push("--resume");
    let r = heddle_out(&resume);
    let stdout = text(&r.stdout);
    assert_eq!(r.status.code(), Some(1), "{stdout}{}", text(&r.stderr));
    let redo = 120000 - counted;
    assert!(
        stdout.starts_with(&format!("{redo} runs in")),
        "only the seeds not counted run: {stdout}"
    );
    assert!(stdout.contains("(120000 runs in the campaign)"), "{stdout}");
    // Journal::read rejects a seed that appears twice.
    assert_eq!(seeds(&out), (0..120000).collect::<Vec<_>>());
    let v: toml::Value = toml::from_str(&summary_text(&out)).unwrap();
    let failures = v["failure"].as_array().unwrap();
    for (sig, seed) in &failed_before {
        assert!(
            failures.iter().any(|f| f["signature"].as_str() == Some(sig)
                && f["first_seed"].as_integer() == Some(*seed as i64)),
            "failure {sig} of seed {seed} lost"
        );
    }
    // Every signature has its replay file; the summary equals a fresh
    // uninterrupted campaign's.
    for f in failures {
        assert!(out.join(f["replay"].as_str().unwrap()).exists());
    }
    let fresh = dir.path().join("fresh");
    let mut again: Vec<&str> = args.to_vec();
    *again.last_mut().unwrap() = p(&fresh);
    assert_eq!(heddle_out(&again).status.code(), Some(1));
    assert_eq!(
        deterministic_part(&summary_text(&out)),
        deterministic_part(&summary_text(&fresh))
    );
}

/// A time budget ends an unbounded campaign; the fixed build passes.
#[test]
fn a_time_budget_ends_an_unbounded_campaign() {
    let dir = tempdir();
    let r = heddle_out(&[
        "fuzz",
        "targets/race_bank.c",
        "--fixed",
        "--time-budget",
        "1500ms",
        "--jobs",
        "2",
        "--out",
        p(dir.path()),
    ]);
    let stdout = text(&r.stdout);
    assert_eq!(r.status.code(), Some(0), "{stdout}{}", text(&r.stderr));
    assert!(stdout.contains("(time budget reached)"), "{stdout}");
    let s = summary_text(dir.path());
    let v: toml::Value = toml::from_str(&s).unwrap();
    assert!(v["campaign"].get("runs_planned").is_none(), "{s}");
    assert!(v["stats"]["runs"].as_integer().unwrap() > 10);
    // The budget counts from the command's start: building the target and
    // calibrating the portfolio spend some of it before the first run.
    let elapsed = v["timing"]["elapsed_s"].as_float().unwrap();
    assert!((0.5..10.0).contains(&elapsed), "{elapsed}");
}

#[test]
fn bad_campaign_input_is_a_one_line_error() {
    let dir = tempdir();
    let out = dir.path().join("c");
    for (args, needle) in [
        (vec!["--shard", "3/2"], "bad shard `3/2`"),
        (vec!["--shard", "x"], "bad shard `x`"),
        (
            vec!["--strategy", "random,bogus"],
            "unknown strategy `bogus`",
        ),
        (vec!["--strategy", "random,"], "empty member"),
        (vec!["--time-budget", "5d"], "bad duration `5d`"),
        (vec!["--runs", "0"], "--runs must be at least 1"),
        (
            vec!["--resume"],
            "): run without --resume to start the campaign there",
        ),
    ] {
        let mut a = args.clone();
        a.extend_from_slice(&["--out", p(&out)]);
        assert_usage_error(&fuzz(&a), needle);
    }
    // A real campaign to damage.
    let c = fuzz(&["--runs", "30", "--fixed", "--out", p(&out)]);
    assert_eq!(c.status.code(), Some(0), "{}", text(&c.stderr));
    // Resuming with other settings (more runs are fine).
    assert_usage_error(
        &fuzz(&["--seed", "5", "--fixed", "--resume", "--out", p(&out)]),
        "holds a different campaign (a different seed range): give the same target and options, or another --out",
    );
    assert_usage_error(
        &fuzz(&["--runs", "30", "--resume", "--out", p(&out)]),
        "a different module",
    );
    // Merging a campaign with itself, or with a different one, or a stranger.
    let other = dir.path().join("other");
    assert_eq!(
        fuzz(&["--runs", "20", "--seed", "3", "--fixed", "--out", p(&other)])
            .status
            .code(),
        Some(0)
    );
    let m = dir.path().join("m");
    assert_usage_error(
        &heddle_out(&["merge", p(&out), p(&other), "--out", p(&m)]),
        "hold different campaigns",
    );
    assert_usage_error(
        &heddle_out(&["merge", p(dir.path()), "--out", p(&m)]),
        "not a campaign directory",
    );
    // A corrupt state.
    let state = ShardState::path(&out, "1/1".parse().unwrap());
    let mut t = std::fs::read_to_string(&state).unwrap();
    t.truncate(t.len() / 2);
    std::fs::write(&state, t).unwrap();
    assert_usage_error(
        &fuzz(&["--runs", "30", "--fixed", "--resume", "--out", p(&out)]),
        "corrupt campaign state",
    );
    assert_usage_error(
        &heddle_out(&["merge", p(&out), "--out", p(&m)]),
        "corrupt campaign state",
    );
    std::fs::write(&state, "").unwrap();
    assert_usage_error(
        &fuzz(&["--runs", "30", "--fixed", "--resume", "--out", p(&out)]),
        "corrupt campaign state",
    );
    // Shards of different splits.
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for (d, shard) in [(&a, "1/2"), (&b, "1/3")] {
        let o = fuzz(&["--runs", "20", "--fixed", "--shard", shard, "--out", p(d)]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    }
    assert_usage_error(
        &heddle_out(&["merge", p(&a), p(&b), "--out", p(&m)]),
        "shards of different splits do not merge",
    );
}

/// `heddle test` over the bundled targets: every buggy build shows its bug,
/// every fixed build passes. A project with wrong expectations fails.
#[test]
fn heddle_test_runs_the_bundled_targets_like_a_test_suite() {
    let dir = tempdir();
    let junit = dir.path().join("junit.xml");
    let json = dir.path().join("report.json");
    let r = heddle_out(&[
        "test",
        "targets/targets.toml",
        "--fixed-seeds",
        "25",
        "--out",
        p(&dir.path().join("out")),
        "--junit",
        p(&junit),
        "--json",
        p(&json),
    ]);
    let stdout = text(&r.stdout);
    assert_eq!(r.status.code(), Some(0), "{stdout}{}", text(&r.stderr));
    let m = manifest();
    for e in &m.targets {
        let buggy = stdout
            .lines()
            .find(|l| {
                l.starts_with("ok") && l.contains(&format!(" {} ", e.name)) && l.contains("buggy")
            })
            .unwrap_or_else(|| panic!("{}: {stdout}", e.name));
        assert!(buggy.contains(&e.buggy), "{buggy}");
    }
    // Buggy and fixed builds, and each plan on both builds.
    let plans: usize = m.targets.iter().map(|e| 2 * e.plans.len()).sum();
    assert!(plans >= 8, "the bundled plans are regression tests");
    for e in m.targets.iter().filter(|e| !e.plans.is_empty()) {
        assert!(
            stdout.lines().any(|l| l.starts_with("ok")
                && l.contains(" plan:")
                && l.contains("(fixed)")
                && l.contains(&format!(" {} ", e.name))),
            "{}: {stdout}",
            e.name
        );
    }
    let checks = 2 * m.targets.len() + plans;
    assert!(
        stdout.contains(&format!("{checks} checks: {checks} ok, 0 unexpected")),
        "{stdout}"
    );
    let x = std::fs::read_to_string(&junit).unwrap();
    assert!(
        x.contains(&format!("tests=\"{checks}\" failures=\"0\"")),
        "{x}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["unexpected"], 0);

    // A project of its own: wrong expectations and a replay regression test.
    let replay_dir = dir.path().join("r");
    let f = fuzz(&["--runs", "50", "--out", p(&replay_dir)]);
    assert_eq!(f.status.code(), Some(1));
    let replay = std::fs::read_dir(&replay_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.to_string_lossy().contains("-seed") && p.extension().is_some_and(|x| x == "toml")
        })
        .unwrap();
    let bank = repo().join("targets/race_bank.c");
    let project = dir.path().join("heddle.toml");
    std::fs::write(
        &project,
        format!(
            r#"
[[target]]
name = "bank"
source = "{bank}"
args = ["2", "2"]
buggy = "assertion"
fixed = "pass"
hunt_seeds = 50
fixed_seeds = 20
replays = ["{replay}"]

[[target]]
name = "wrong"
source = "{bank}"
args = ["2", "2"]
buggy = "deadlock"
fixed = "assertion"
hunt_strategy = "random,pct:3"
hunt_seeds = 30
fixed_seeds = 20
"#,
            bank = bank.display(),
            replay = replay.display()
        ),
    )
    .unwrap();
    let r = heddle_out(&[
        "test",
        p(&project),
        "--out",
        p(&dir.path().join("out2")),
        "--junit",
        p(&junit),
    ]);
    let stdout = text(&r.stdout);
    assert_eq!(r.status.code(), Some(1), "{stdout}{}", text(&r.stderr));
    assert!(stdout.contains("5 checks: 3 ok, 2 unexpected"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("ok") && l.contains("replay:") && l.contains("reproduced")),
        "{stdout}"
    );
    assert!(
        stdout.contains("expected deadlock, got assertion"),
        "{stdout}"
    );
    assert!(
        stdout.contains("expected assertion, but all 20 runs passed"),
        "{stdout}"
    );
    let x = std::fs::read_to_string(&junit).unwrap();
    assert!(x.contains("failures=\"2\""), "{x}");
    // Bad project input.
    assert_usage_error(
        &heddle_out(&["test", p(&dir.path().join("none.toml"))]),
        "no such project file",
    );
    std::fs::write(&project, "[[target]]\nname = 1\n").unwrap();
    assert_usage_error(&heddle_out(&["test", p(&project)]), "heddle.toml");
}

/// Runs that fail inside heddle (here made to, by `HEDDLE_INJECT_ERROR`)
/// are internal errors, never bugs: the campaign goes on, the summary
/// counts them apart, the exit code is 4 when no bug was found and 1 when
/// one was, and JUnit reports an `<error>`, not a `<failure>`.
#[test]
fn runs_that_fail_inside_heddle_are_errors_not_bugs() {
    let dir = tempdir();
    let out = dir.path().join("fixed");
    let junit = dir.path().join("r.xml");
    let r = heddle()
        .args([
            "fuzz",
            "targets/race_bank.c",
            "--fixed",
            "--runs",
            "40",
            "--jobs",
            "2",
            "--junit",
            p(&junit),
            "--out",
            p(&out),
        ])
        .env("HEDDLE_INJECT_ERROR", "3,17")
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&r.stdout), text(&r.stderr));
    assert_eq!(r.status.code(), Some(4), "{stdout}{stderr}");
    assert!(stdout.contains(": 0 failing"), "{stdout}");
    assert!(
        stdout.contains("2 run(s) failed inside heddle") && stdout.contains("seed 3 (2 runs)"),
        "{stdout}"
    );
    assert!(
        stderr.contains("heddle: internal error: error injected"),
        "{stderr}"
    );
    let v: toml::Value = toml::from_str(&summary_text(&out)).unwrap();
    assert_eq!(v["stats"]["runs"].as_integer(), Some(40), "all seeds ran");
    assert_eq!(v["stats"]["failing_runs"].as_integer(), Some(0));
    assert_eq!(v["stats"]["error_runs"].as_integer(), Some(2));
    assert_eq!(v["error"][0]["first_seed"].as_integer(), Some(3));
    assert!(v.get("failure").is_none());
    let x = std::fs::read_to_string(&junit).unwrap();
    assert!(
        x.contains("failures=\"0\" errors=\"1\" skipped=\"0\""),
        "{x}"
    );
    assert!(
        x.contains("<error message=\"2 run(s) failed inside heddle\""),
        "{x}"
    );

    // A bug found wins over errors: exit 1, and the error runs are still
    // not failures.
    let out = dir.path().join("buggy");
    let r = heddle()
        .args([
            "fuzz",
            "targets/race_bank.c",
            "--runs",
            "60",
            "--keep-going",
            "--quiet",
            "--out",
            p(&out),
        ])
        .env("HEDDLE_INJECT_ERROR", "0")
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(1), "{}", text(&r.stdout));
    let v: toml::Value = toml::from_str(&summary_text(&out)).unwrap();
    assert_eq!(v["stats"]["error_runs"].as_integer(), Some(1));
    assert!(v["failure"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["kind"].as_str() == Some("assertion")));
    let bad = heddle()
        .args([
            "fuzz",
            "targets/race_bank.c",
            "--runs",
            "5",
            "--out",
            p(&out),
        ])
        .env("HEDDLE_INJECT_ERROR", "x")
        .output()
        .unwrap();
    assert_usage_error(&bad, "HEDDLE_INJECT_ERROR: `x` is not a seed");
}

/// SIGTERM (and SIGINT) stop a campaign gracefully: no new seeds, the
/// journal and summary written, a line saying how to continue, exit 128 +
/// the signal. `--resume` completes it, and its summary equals an
/// uninterrupted campaign's.
#[test]
fn a_signal_stops_a_campaign_that_resumes_to_the_same_summary() {
    let dir = tempdir();
    for (sig, code) in [("-TERM", 143), ("-INT", 130)] {
        let out = dir.path().join(&sig[1..]);
        let args = [
            "fuzz",
            "targets/race_bank.c",
            "--fixed",
            "--runs",
            "100000",
            "--jobs",
            "2",
            "--quiet",
            "--out",
            p(&out),
        ];
        let child = heddle()
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while state_runs(&out) < 200 {
            assert!(started.elapsed() < Duration::from_secs(60), "too slow");
            std::thread::sleep(Duration::from_millis(10));
        }
        let kill = std::process::Command::new("kill")
            .args([sig, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let o = child.wait_with_output().unwrap();
        let stdout = text(&o.stdout);
        assert_eq!(o.status.code(), Some(code), "{stdout}{}", text(&o.stderr));
        let name = if sig == "-TERM" { "SIGTERM" } else { "SIGINT" };
        assert!(
            stdout.contains(&format!("(stopped by {name}; continue with --resume)")),
            "{stdout}"
        );
        let v: toml::Value = toml::from_str(&summary_text(&out)).unwrap();
        let done = v["stats"]["runs"].as_integer().unwrap();
        assert!((200..100000).contains(&done), "{done}");
        let mut resume = args.to_vec();
        resume.push("--resume");
        let r = heddle_out(&resume);
        let stdout = text(&r.stdout);
        assert_eq!(r.status.code(), Some(0), "{stdout}{}", text(&r.stderr));
        assert!(stdout.contains("(100000 runs in the campaign)"), "{stdout}");
        if sig == "-TERM" {
            let fresh = dir.path().join("fresh");
            let mut again = args.to_vec();
            *again.last_mut().unwrap() = p(&fresh);
            assert_eq!(heddle_out(&again).status.code(), Some(0));
            assert_eq!(
                deterministic_part(&summary_text(&out)),
                deterministic_part(&summary_text(&fresh))
            );
        }
    }
}

/// `heddle test` reports each check as ok, FAIL, ERR or skip: a target the
/// project marks `skip` is skipped, a check whose runs failed inside heddle
/// and found nothing is an error; JUnit counts both, and the exit code is
/// 4 (internal error) when nothing else went wrong.
#[test]
fn heddle_test_reports_skipped_and_errored_checks() {
    let dir = tempdir();
    let bank = repo().join("targets/race_bank.c");
    let project = dir.path().join("heddle.toml");
    std::fs::write(
        &project,
        format!(
            r#"
[[target]]
name = "fixed_only"
source = "{bank}"
args = ["2", "2"]
buggy = "pass"
cflags = ["-DFIXED"]
hunt_seeds = 10

[[target]]
name = "later"
source = "{bank}"
args = ["2", "2"]
buggy = "assertion"
fixed = "pass"
skip = "flaky on this platform"
"#,
            bank = bank.display(),
        ),
    )
    .unwrap();
    let junit = dir.path().join("t.xml");
    let json = dir.path().join("t.json");
    let r = heddle()
        .args(["test", p(&project), "--out", p(&dir.path().join("o"))])
        .args(["--junit", p(&junit), "--json", p(&json)])
        .env("HEDDLE_INJECT_ERROR", "4")
        .output()
        .unwrap();
    let stdout = text(&r.stdout);
    assert_eq!(r.status.code(), Some(4), "{stdout}{}", text(&r.stderr));
    assert!(
        stdout.contains("3 checks: 0 ok, 0 unexpected, 1 error, 2 skipped"),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(
            |l| l.starts_with("ERR") && l.contains("1 of 10 runs failed inside heddle; seed 4")
        ),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("skip") && l.contains("skipped: flaky on this platform")),
        "{stdout}"
    );
    let x = std::fs::read_to_string(&junit).unwrap();
    assert!(
        x.contains("tests=\"3\" failures=\"0\" errors=\"1\" skipped=\"2\""),
        "{x}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["error"], 1);
    assert_eq!(j["skipped"], 2);
    assert_eq!(j["checks"][0]["status"], "error");
    // Without the injected error the same project passes, skips included.
    let r = heddle_out(&["test", p(&project), "--out", p(&dir.path().join("o2"))]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stdout));
}

/// `--shard auto` takes the shard from the job engine: a Slurm array task
/// and a Kubernetes Indexed Job completion run the same seeds as the
/// explicit `--shard K/N`, and their merge covers the campaign.
#[test]
fn shard_auto_follows_slurm_and_kubernetes_variables() {
    let dir = tempdir();
    let fuzz = |out: &Path, shard: &str, env: &[(&str, &str)]| {
        let mut c = heddle();
        c.args([
            "fuzz",
            "targets/race_bank.c",
            "--fixed",
            "--runs",
            "60",
            "-q",
        ])
        .args(["--shard", shard, "--out", p(out)])
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("SLURM_ARRAY_TASK_COUNT")
        .env_remove("SLURM_ARRAY_TASK_MIN")
        .env_remove("JOB_COMPLETION_INDEX");
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let explicit = dir.path().join("explicit");
    assert_eq!(fuzz(&explicit, "2/2", &[]).status.code(), Some(0));
    let slurm = dir.path().join("slurm");
    let o = fuzz(
        &slurm,
        "auto",
        &[
            ("SLURM_ARRAY_TASK_ID", "1"),
            ("SLURM_ARRAY_TASK_COUNT", "2"),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let k8s = dir.path().join("k8s");
    let o = fuzz(&k8s, "auto/2", &[("JOB_COMPLETION_INDEX", "1")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let want = deterministic_part(&summary_text(&explicit)).to_string();
    assert_eq!(deterministic_part(&summary_text(&slurm)), want);
    assert_eq!(deterministic_part(&summary_text(&k8s)), want);
    let first = dir.path().join("first");
    let o = fuzz(&first, "auto/2", &[("JOB_COMPLETION_INDEX", "0")]);
    assert_eq!(o.status.code(), Some(0));
    let merged = dir.path().join("merged");
    let m = heddle_out(&["merge", p(&first), p(&k8s), "--out", p(&merged)]);
    assert_eq!(m.status.code(), Some(0), "{}", text(&m.stderr));
    assert!(
        text(&m.stdout).contains("shards 1/2,2/2"),
        "{}",
        text(&m.stdout)
    );
    assert_usage_error(
        &fuzz(&dir.path().join("none"), "auto", &[]),
        "no job engine variables",
    );
    assert_usage_error(
        &fuzz(
            &dir.path().join("k"),
            "auto",
            &[("JOB_COMPLETION_INDEX", "0")],
        ),
        "give the number of completions as --shard auto/N",
    );
}

/// `heddle merge` takes any set of shard outputs: a missing shard is a
/// hole, a shard given twice (a retried job) counts once, a shard stopped
/// early (here by its time budget) and resumed elsewhere counts as far as
/// it got. Once every shard is complete the summary equals the unsharded
/// campaign's, whatever the order of the inputs.
#[test]
fn merge_takes_missing_repeated_and_stopped_shards_in_any_order() {
    let dir = tempdir();
    let d = |n: &str| dir.path().join(n);
    let campaign = ["--runs", "24000", "--keep-going", "--fixed", "--jobs", "2"];
    // 4 threads x 25 deposits: a shard takes long enough to be stopped by
    // its time budget on a fast machine too.
    let target_args = ["--", "4", "25"];
    let shard = |out: &str, k: &str, extra: &[&str]| {
        let o = d(out);
        let shard = format!("{k}/3");
        let mut a = campaign.to_vec();
        a.extend_from_slice(&["--shard", &shard, "--out", p(&o)]);
        a.extend_from_slice(extra);
        a.extend_from_slice(&target_args);
        let r = fuzz(&a);
        assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
        text(&r.stdout)
    };
    shard("s1", "1", &[]);
    shard("s2", "2", &[]);
    // Shard 3 stops early, is copied (a retried job), and resumes.
    let early = shard("s3", "3", &["--time-budget", "200ms"]);
    assert!(early.contains("(time budget reached)"), "{early}");
    let stopped = ShardState::read(&ShardState::path(&d("s3"), "3/3".parse().unwrap())).unwrap();
    assert!(stopped.stats.runs > 0 && stopped.stats.runs < 8000);
    copy_dir(&d("s3"), &d("s3-copy"));
    let merge = |inputs: &[&str], out: &str| {
        let mut a = vec!["merge"];
        let paths: Vec<_> = inputs.iter().map(|i| d(i)).collect();
        a.extend(paths.iter().map(|x| p(x)));
        let o = d(out);
        a.extend_from_slice(&["--out", p(&o)]);
        let r = heddle_out(&a);
        assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
        text(&r.stdout)
    };
    let m = merge(&["s1", "s2"], "m12");
    assert!(
        m.contains("incomplete") && m.contains("hole: shard 3/3: no state"),
        "{m}"
    );
    assert!(m.contains("of 3,"), "{m}");
    let m = merge(&["s3-copy", "s1", "s2", "s3"], "m-early");
    assert!(
        m.contains(&format!("{} duplicate runs", stopped.stats.runs)),
        "{m}"
    );
    assert!(m.contains("hole: shard 3/3: stopped before seed"), "{m}");
    shard("s3", "3", &["--resume"]);
    let whole = d("whole");
    let mut a = campaign.to_vec();
    a.extend_from_slice(&["--out", p(&whole)]);
    a.extend_from_slice(&target_args);
    let r = fuzz(&a);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    let reference = deterministic_part(&summary_text(&whole)).to_string();
    for (i, order) in [
        ["s1", "s2", "s3", "s3-copy"],
        ["s3-copy", "s3", "s2", "s1"],
        ["s2", "s3-copy", "s1", "s3"],
    ]
    .iter()
    .enumerate()
    {
        let out = format!("m{i}");
        let m = merge(order, &out);
        assert!(!m.contains("hole") && !m.contains("incomplete"), "{m}");
        assert_eq!(reference, deterministic_part(&summary_text(&d(&out))));
    }
    // The merge of merges (with a shard in both) is the same again.
    merge(&["m0", "m1", "s2"], "again");
    assert_eq!(reference, deterministic_part(&summary_text(&d("again"))));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// `--opt 1,0` alternates two builds of a source in one campaign: a double
/// fetch that only the -O0 build keeps (-O1 reads the length once) is found,
/// named with its build in the text, the JSON document and the summary; its
/// replay file ships the -O0 module; the -O1 build alone does not find it.
#[test]
fn fuzz_over_builds_finds_what_one_build_has() {
    let dir = tempdir();
    let d = |n: &str| dir.path().join(n);
    let src = "tests/programs/opt/double_fetch.c";
    let out = heddle_out(&[
        "fuzz",
        src,
        "--opt",
        "1,0",
        "--runs",
        "400",
        "-j",
        "2",
        "--out",
        p(&d("both")),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("over builds O1,O0"), "{stdout}");
    assert!(stdout.contains("(O0 build): heap-overflow"), "{stdout}");
    let summary = summary_text(&d("both"));
    assert!(summary.contains("@O0"), "{summary}");
    let replays = failure_replays(&d("both"));
    assert_eq!(replays.len(), 1, "{replays:?}");
    let file = std::fs::read_to_string(&replays[0]).unwrap();
    assert!(file.contains("\"-O0\""), "{file}");
    let replayed = heddle_out(&["replay", p(&replays[0])]);
    assert_eq!(
        replayed.status.code(),
        Some(1),
        "{}",
        text(&replayed.stderr)
    );
    assert!(text(&replayed.stdout).contains("heap-overflow"));
    // The JSON document names the build.
    let json = heddle_out(&[
        "fuzz",
        src,
        "--opt",
        "1,0",
        "--runs",
        "400",
        "-j",
        "1",
        "--format",
        "json",
        "--out",
        p(&d("json")),
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(doc["failures"][0]["build"], "O0", "{doc}");
    // The same seeds on the -O1 build alone: the length is read once.
    let one = heddle_out(&[
        "fuzz",
        src,
        "--cflag",
        "-O1",
        "--runs",
        "400",
        "-j",
        "2",
        "--out",
        p(&d("o1")),
    ]);
    assert_eq!(one.status.code(), Some(0), "{}", text(&one.stdout));
    // A resumed campaign over the same builds continues it.
    let more = heddle_out(&[
        "fuzz",
        src,
        "--opt",
        "1,0",
        "--runs",
        "400",
        "-j",
        "2",
        "--keep-going",
        "--out",
        p(&d("resume")),
    ]);
    assert_eq!(more.status.code(), Some(1));
    let again = heddle_out(&[
        "fuzz",
        src,
        "--opt",
        "1,0",
        "--runs",
        "800",
        "-j",
        "2",
        "--keep-going",
        "--resume",
        "--out",
        p(&d("resume")),
    ]);
    assert!(
        text(&again.stdout).contains("(800 runs in the campaign)"),
        "{}",
        text(&again.stdout)
    );
    let other = heddle_out(&[
        "fuzz",
        src,
        "--opt",
        "0,1",
        "--runs",
        "800",
        "--resume",
        "--out",
        p(&d("resume")),
    ]);
    assert_usage_error(&other, "different campaign");
}

/// `--opt` refuses what it cannot build, in one line naming what to do.
#[test]
fn fuzz_over_builds_refuses_bad_levels() {
    let src = "tests/programs/opt/double_fetch.c";
    assert_usage_error(
        &heddle_out(&["fuzz", src, "--opt", "0,4"]),
        "bad optimisation level `4`",
    );
    assert_usage_error(
        &heddle_out(&["fuzz", src, "--opt", "0,-O0"]),
        "listed twice",
    );
    assert_usage_error(
        &heddle_out(&["fuzz", src, "--opt", "0,1", "--cflag", "-O2"]),
        "drop the -O flag",
    );
    let dir = tempdir();
    let module = dir.path().join("m.wasm");
    std::fs::write(&module, target_module("race_bank.c", false)).unwrap();
    assert_usage_error(
        &heddle_out(&["fuzz", p(&module), "--opt", "0,1"]),
        "give its source, or drop --opt",
    );
}

/// `--resume` of another shard than the directory holds is refused in one
/// line naming both shards and what to do.
#[test]
fn resuming_another_shard_says_what_to_do() {
    let dir = tempdir();
    let out = dir.path().join("shard");
    let first = fuzz(&[
        "--runs",
        "20",
        "--keep-going",
        "--shard",
        "1/2",
        "--out",
        p(&out),
    ]);
    assert_eq!(first.status.code(), Some(1), "{}", text(&first.stderr));
    let other = fuzz(&[
        "--runs",
        "20",
        "--resume",
        "--shard",
        "2/2",
        "--out",
        p(&out),
    ]);
    assert_usage_error(&other, "holds shard(s) 1/2, not 2/2: give the same --shard");
}
