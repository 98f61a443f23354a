//! Campaigns: portfolios, shards and merge, resume after SIGKILL,
//! statistics, the project file and `heddle test`.

use crate::common::*;
use heddle::campaign::journal::Journal;
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

fn seeds(dir: &Path) -> Vec<u64> {
    let j = Journal::read(&dir.join("journal.jsonl")).expect("journal");
    let mut v: Vec<u64> = j.records.iter().map(|r| r.seed).collect();
    v.sort();
    v
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
    let strategies = v["strategy"].as_array().unwrap();
    assert_eq!(strategies.len(), 3);
    assert!(strategies[1]["spec"]
        .as_str()
        .unwrap()
        .starts_with("pct:3:k="));
    let per: i64 = strategies
        .iter()
        .map(|s| s["runs"].as_integer().unwrap())
        .sum();
    assert_eq!(per, 240);
    assert_eq!(strategies[0]["runs"].as_integer(), Some(80));
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
        assert!(s.contains("strategy random: 80 runs"), "{s}");
        assert!(s.contains("time to first assertion@"), "{s}");
    }
    let m = text(&merged.stdout);
    assert!(
        m.contains("shards 1/2,2/2") && m.contains("240 runs"),
        "{m}"
    );
}

/// SIGKILL in the middle of a campaign, then --resume: every seed runs
/// exactly once over the two sessions, and no failure is lost.
#[test]
fn a_killed_campaign_resumes_without_redoing_seeds_or_losing_failures() {
    let dir = tempdir();
    let out = dir.path().join("c");
    let args = [
        "fuzz",
        "targets/race_bank.c",
        "--runs",
        "2500",
        "--keep-going",
        "--jobs",
        "2",
        "--quiet",
        "--out",
        p(&out),
    ];
    let mut child = heddle()
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let journal = out.join("journal.jsonl");
    let started = Instant::now();
    // Wait until a few hundred runs (and some failures) are journaled.
    loop {
        let n = std::fs::read_to_string(&journal)
            .map(|t| t.matches("\"t\":\"run\"").count())
            .unwrap_or(0);
        if n >= 300 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "campaign too slow"
        );
        assert!(child.try_wait().unwrap().is_none(), "finished too early");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // A torn last line, as if the process died in the middle of a write.
    let mut bytes = std::fs::read(&journal).unwrap();
    bytes.extend_from_slice(b"{\"t\":\"run\",\"seed\":99");
    std::fs::write(&journal, &bytes).unwrap();
    let before = Journal::read(&journal).unwrap();
    let first: BTreeSet<u64> = before.records.iter().map(|r| r.seed).collect();
    assert!(first.len() >= 300 && first.len() < 2500, "{}", first.len());
    let failed_before: Vec<(u64, String)> = before
        .records
        .iter()
        .filter(|r| r.failed())
        .map(|r| (r.seed, r.signature.clone()))
        .collect();
    assert!(!failed_before.is_empty());

    let mut resume: Vec<&str> = args.to_vec();
    resume.push("--resume");
    let r = heddle_out(&resume);
    let stdout = text(&r.stdout);
    assert_eq!(r.status.code(), Some(1), "{stdout}{}", text(&r.stderr));
    let redo = 2500 - first.len();
    assert!(
        stdout.starts_with(&format!("{redo} runs in")),
        "only the missing seeds run: {stdout}"
    );
    assert!(stdout.contains("(2500 runs in the campaign)"), "{stdout}");
    // Journal::read rejects a seed that appears twice.
    let after = Journal::read(&journal).unwrap();
    let all: Vec<u64> = {
        let mut v: Vec<u64> = after.records.iter().map(|r| r.seed).collect();
        v.sort();
        v
    };
    assert_eq!(all, (0..2500).collect::<Vec<_>>());
    for (seed, sig) in &failed_before {
        assert!(
            after
                .records
                .iter()
                .any(|r| r.seed == *seed && &r.signature == sig),
            "failure of seed {seed} lost"
        );
    }
    // Every signature has its replay file; the summary equals a fresh
    // uninterrupted campaign's.
    let v: toml::Value = toml::from_str(&summary_text(&out)).unwrap();
    for f in v["failure"].as_array().unwrap() {
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
    let elapsed = v["timing"]["elapsed_s"].as_float().unwrap();
    assert!((1.4..10.0).contains(&elapsed), "{elapsed}");
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
        (vec!["--resume"], "has no campaign journal"),
    ] {
        let mut a = args.clone();
        a.extend_from_slice(&["--out", p(&out)]);
        assert_usage_error(&fuzz(&a), needle);
    }
    // A real campaign to damage.
    let c = fuzz(&["--runs", "30", "--fixed", "--out", p(&out)]);
    assert_eq!(c.status.code(), Some(0), "{}", text(&c.stderr));
    // Resuming with other settings.
    assert_usage_error(
        &fuzz(&["--runs", "31", "--fixed", "--resume", "--out", p(&out)]),
        "holds a different campaign",
    );
    assert_usage_error(
        &fuzz(&["--runs", "30", "--resume", "--out", p(&out)]),
        "a different module",
    );
    // Merging a campaign with itself, or with a different one, or a stranger.
    let other = dir.path().join("other");
    assert_eq!(
        fuzz(&["--runs", "20", "--fixed", "--out", p(&other)])
            .status
            .code(),
        Some(0)
    );
    let m = dir.path().join("m");
    assert_usage_error(
        &heddle_out(&["merge", p(&out), p(&out), "--out", p(&m)]),
        "appears in both",
    );
    assert_usage_error(
        &heddle_out(&["merge", p(&out), p(&other), "--out", p(&m)]),
        "hold different campaigns",
    );
    assert_usage_error(
        &heddle_out(&["merge", p(dir.path()), "--out", p(&m)]),
        "not a campaign directory",
    );
    // A corrupt journal.
    let journal = out.join("journal.jsonl");
    let mut t = std::fs::read_to_string(&journal).unwrap();
    t.push_str("not json\n");
    std::fs::write(&journal, t).unwrap();
    assert_usage_error(
        &fuzz(&["--runs", "30", "--fixed", "--resume", "--out", p(&out)]),
        "corrupt journal",
    );
    assert_usage_error(
        &heddle_out(&["merge", p(&out), "--out", p(&m)]),
        "corrupt journal",
    );
    std::fs::write(&journal, "").unwrap();
    assert_usage_error(
        &fuzz(&["--runs", "30", "--fixed", "--resume", "--out", p(&out)]),
        "no campaign header",
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
        .find(|p| p.to_string_lossy().contains("-seed"))
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
            "10000",
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
        let journal = out.join("journal.jsonl");
        let started = Instant::now();
        loop {
            let n = std::fs::read_to_string(&journal)
                .map(|t| t.matches("\"t\":\"run\"").count())
                .unwrap_or(0);
            if n >= 200 {
                break;
            }
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
        assert!((200..10000).contains(&done), "{done}");
        let mut resume = args.to_vec();
        resume.push("--resume");
        let r = heddle_out(&resume);
        let stdout = text(&r.stdout);
        assert_eq!(r.status.code(), Some(0), "{stdout}{}", text(&r.stderr));
        assert!(stdout.contains("(10000 runs in the campaign)"), "{stdout}");
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
