//! Schedule plans (`heddle plan`), shared-access observation (`heddle observe`)
//! and plans generated from observations (`heddle hunt`).

use crate::common::*;
use heddle::trace::replay::ReplayFile;
use std::path::{Path, PathBuf};

/// The replay path `heddle plan` printed.
fn replay_path(stdout: &str) -> Option<PathBuf> {
    stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: heddle replay "))
        .map(PathBuf::from)
}

/// Writes a plan file into `dir`.
fn plan_file(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn plan_codeblock_triggers_engaged_and_replays() {
    let out = tempdir();
    let o = heddle_out(&[
        "plan",
        "plans/codeblock.toml",
        "targets/codeblock.cpp",
        "--runs",
        "5",
        "--expect",
        "triggered",
        "--out",
        &out.path().display().to_string(),
    ]);
    let s = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{s}\n{}", text(&o.stderr));
    // The first run already triggers, fully engaged.
    let first = s.lines().find(|l| l.starts_with("seed 0:")).expect(&s);
    assert!(first.contains("triggered (trap"), "{s}");
    assert!(first.contains("κS 2/2") && first.contains("κΦ ∅"), "{s}");
    assert!(s.contains("engaged (κS = 2, κΦ = ∅) in 5 of 5 runs"), "{s}");
    let path = replay_path(&s).expect(&s);
    assert!(path.exists());
    let r = heddle_out(&["replay", &path.display().to_string()]);
    let rs = text(&r.stdout);
    assert_eq!(r.status.code(), Some(1), "{rs}\n{}", text(&r.stderr));
    assert!(
        rs.contains("verdict: trap") && rs.contains("replay reproduced"),
        "{rs}"
    );
}

#[test]
fn plan_codeblock_fixed_is_engaged_and_normal() {
    let o = heddle_out(&[
        "plan",
        "targets/codeblock.cpp",
        "plans/codeblock.toml",
        "--fixed",
        "--runs",
        "5",
        "--expect",
        "normal",
    ]);
    let s = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{s}\n{}", text(&o.stderr));
    assert!(s.contains("5 runs: 0 triggered, 5 normal"), "{s}");
    assert!(s.contains("engaged (κS = 2, κΦ = ∅) in 5 of 5 runs"), "{s}");
    assert!(s.contains("expectation met"), "{s}");
    // The buggy build fails the same regression test.
    let o = heddle_out(&[
        "plan",
        "targets/codeblock.cpp",
        "plans/codeblock.toml",
        "--runs",
        "2",
        "--expect",
        "normal",
        "--out",
        &tempdir().path().display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
}

#[test]
fn bundled_plans_trigger_their_bugs() {
    let cases = [
        (
            "plans/race_bank.toml",
            "targets/race_bank.c",
            "assertion",
            4,
        ),
        (
            "plans/deadlock_abba.toml",
            "targets/deadlock_abba.c",
            "deadlock",
            2,
        ),
        (
            "plans/uaf_publish.toml",
            "targets/uaf_publish.c",
            "use-after-free",
            3,
        ),
    ];
    let results = par_map(&cases, |(plan, target, kind, n)| {
        let out = tempdir();
        let o = heddle_out(&[
            "plan",
            plan,
            target,
            "--runs",
            "3",
            "--expect",
            "triggered",
            "--out",
            &out.path().display().to_string(),
        ]);
        let replay = std::fs::read_dir(out.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with("-seed0.toml"))
            .map(|p| ReplayFile::load(&p).expect("valid replay file"));
        (o, replay, kind.to_string(), *n)
    });
    for (o, replay, kind, n) in results {
        let s = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{s}\n{}", text(&o.stderr));
        let first = s.lines().find(|l| l.starts_with("seed 0:")).expect(&s);
        assert!(first.contains(&format!("triggered ({kind}")), "{s}");
        assert!(first.contains(&format!("κS {n}/{n}")), "{s}");
        // The verdict printed is the one the replay records, told with
        // user frames, not the C library's.
        let printed = s
            .lines()
            .find_map(|l| l.strip_prefix("first triggering run: seed 0: "))
            .expect(&s);
        let recorded = replay.expect("a replay file of seed 0").verdict.summary;
        assert_eq!(printed, recorded, "{s}");
        assert!(!printed.contains("__wasilibc"), "{s}");
    }
}

#[test]
fn impossible_order_and_state_constraint_are_reported() {
    let dir = tempdir();
    // Thread 1 always reads balance before it writes it.
    let order = plan_file(
        dir.path(),
        "order.toml",
        r#"
[[order]]
thread = 1
kind = "write"
var = "balance"
nth = 1

[[order]]
thread = 1
kind = "read"
var = "balance"
nth = 1
"#,
    );
    let o = heddle_out(&["plan", &order, "targets/race_bank.c", "--runs", "2"]);
    let s = text(&o.stdout);
    assert!(
        o.status.code() == Some(0) || o.status.code() == Some(1),
        "{s}"
    );
    let first = s.lines().find(|l| l.starts_with("seed 0:")).expect(&s);
    assert!(first.contains("κS 1/2"), "{s}");
    assert!(
        s.contains("stalled at e2 (thread 1 read `balance` #1)"),
        "{s}"
    );
    assert!(s.contains("stalls most: e2"), "{s}");

    let state = plan_file(
        dir.path(),
        "state.toml",
        r#"
[[order]]
thread = "invalidator"
kind = "unlock"
var = "cache_lock"

[[order]]
thread = "executor"
kind = "lock"
var = "cache_lock"
when = ["executed == 42"]
"#,
    );
    let o = heddle_out(&[
        "plan",
        &state,
        "targets/codeblock.cpp",
        "--fixed",
        "--runs",
        "2",
    ]);
    let s = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{s}\n{}", text(&o.stderr));
    let first = s.lines().find(|l| l.starts_with("seed 0:")).expect(&s);
    assert!(first.contains("κS 1/2"), "{s}");
    assert!(first.contains("κΦ {e2: executed == 42}"), "{s}");
    assert!(s.contains("κΦ: the state constraint of e2"), "{s}");
}

#[test]
fn invalid_plans_are_rejected_before_running() {
    let dir = tempdir();
    let cases = [
        (
            "[[order]]\nat = \"codeblock.cpp:9999\"\n",
            "unknown site `codeblock.cpp:9999`: no yield point on that line; nearest: codeblock.cpp:",
        ),
        (
            "[[order]]\nvar = \"exsits\"\n",
            "unknown variable `exsits`; nearest: exists",
        ),
        (
            "[[order]]\nthread = \"invalidater\"\n",
            "unknown thread `invalidater`; nearest: invalidator",
        ),
        ("[[order]]\nthread = 7\n", "unknown thread 7"),
        (
            "[[order]]\nat = \"invalidatr\"\n",
            "no function `invalidatr` with yield points; nearest: invalidator",
        ),
        (
            "[[order]]\nkind = \"lok\"\n",
            "unknown kind `lok`; nearest: lock",
        ),
        (
            "[[order]]\nthread = 1\nwhen = [\"exists === 1\"]\n",
            "`= 1` is not an integer",
        ),
        ("[[order]]\nthread = 1\nnth = \"x\"\n", "bad plan (line 3)"),
        ("order = 3\n", "bad plan (line 1)"),
    ];
    for (i, (body, needle)) in cases.iter().enumerate() {
        let p = plan_file(dir.path(), &format!("bad{i}.toml"), body);
        let o = heddle_out(&["plan", &p, "targets/codeblock.cpp", "--runs", "1"]);
        assert_usage_error(&o, needle);
        assert!(
            text(&o.stdout).is_empty(),
            "ran anyway: {}",
            text(&o.stdout)
        );
    }
    for (body, needle) in [
        (
            "[[order]]\nlabel = \"reusd\"\n",
            "unknown label `reusd`; nearest: reused",
        ),
        (
            "bug = \"use-after-fre\"\n[[order]]\nthread = \"producer\"\n",
            "unknown bug kind `use-after-fre`; nearest: use-after-free",
        ),
        (
            "[[order]]\nthread = \"consumer\"\nat = \"uaf_publsh.c:77\"\n",
            "no yield point in a file `uaf_publsh.c`; nearest files: uaf_publish.c",
        ),
    ] {
        let p = plan_file(dir.path(), "bad-uaf.toml", body);
        let o = heddle_out(&[
            "plan",
            &p,
            "targets/uaf_publish.c",
            "--fixed",
            "--runs",
            "1",
        ]);
        assert_usage_error(&o, needle);
    }
    let o = heddle_out(&["plan", "targets/codeblock.cpp", "targets/race_bank.c"]);
    assert_usage_error(&o, "no plan file");
    assert_usage_error(&o, "give a plan file (ending in .toml) and a target");
}

#[test]
fn observe_race_bank_lists_balance_with_pairs_and_locks() {
    let o = heddle_out(&["observe", "targets/race_bank.c", "--runs", "8"]);
    let s = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{s}\n{}", text(&o.stderr));
    assert!(s.contains("balance (global)"), "{s}");
    assert!(s.contains("locks {account_lock}"), "{s}");
    assert!(s.contains("common lock {account_lock}"), "{s}");

    let o = heddle_out(&["observe", "targets/race_bank.c", "--runs", "8", "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let vars = j["variables"].as_array().unwrap();
    let bal = vars
        .iter()
        .find(|v| v["name"] == "balance")
        .expect("balance");
    assert_eq!(bal["threads"], 3, "{bal}");
    let pairs = bal["lock_ordered_pairs"].as_array().unwrap();
    let rw = pairs
        .iter()
        .find(|p| p["first"]["access"] == "R" && p["second"]["access"] == "W")
        .expect("R/W pair");
    assert_eq!(rw["common_locks"][0], "account_lock");
    let both = rw["runs_first_before_second"].as_u64().unwrap()
        + rw["runs_second_before_first"].as_u64().unwrap();
    assert!(both >= 8, "{rw}");
    // Main's accesses are ordered by spawn/join: no pair involves thread 0.
    for p in pairs {
        for t in p["threads"].as_array().unwrap() {
            assert_ne!(t[0], 0, "{p}");
            assert_ne!(t[1], 0, "{p}");
        }
    }
}

#[test]
fn observe_codeblock_finds_the_unprotected_flag() {
    let o = heddle_out(&["observe", "targets/codeblock.cpp", "--runs", "6", "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let vars = j["variables"].as_array().unwrap();
    let exists = vars.iter().find(|v| v["name"] == "exists").expect("exists");
    let pairs = exists["conflicting_pairs"].as_array().unwrap();
    assert!(!pairs.is_empty(), "{exists}");
    for p in pairs {
        assert!(p["common_locks"].as_array().unwrap().is_empty());
        for t in p["threads"].as_array().unwrap() {
            assert_ne!(t[0], 0, "main's write is before the spawns: {p}");
        }
    }
    // Same runs, same report.
    let again = heddle_out(&["observe", "targets/codeblock.cpp", "--runs", "6", "--json"]);
    assert_eq!(o.stdout, again.stdout);
}

#[test]
fn plan_events_by_function_offset_and_thread_index() {
    let dir = tempdir();
    // In the fixed build executor+3 is `if (exists)` (codeblock.cpp:74, three
    // lines below the function's first line); main joins twice.
    let p = plan_file(
        dir.path(),
        "sites.toml",
        r#"
[[order]]
thread = "executor"
at = "executor+3"
kind = "read"

[[order]]
thread = 0
at = "main"
kind = "join"
nth = 2
"#,
    );
    let o = heddle_out(&[
        "plan",
        &p,
        "targets/codeblock.cpp",
        "--fixed",
        "--runs",
        "2",
    ]);
    let s = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{s}\n{}", text(&o.stderr));
    assert!(s.contains("e1: executor read at executor+3"), "{s}");
    assert!(s.contains("engaged (κS = 2, κΦ = ∅) in 2 of 2 runs"), "{s}");
}

#[test]
fn stall_budget_abandons_a_plan_that_waits_on_a_spinner() {
    let dir = tempdir();
    // The producer only reaches "reused" after the consumer's ack, which the
    // plan holds back: the producer spins, every decision is a stall.
    let p = plan_file(
        dir.path(),
        "spin.toml",
        r#"
stall_budget = 50

[[order]]
thread = "producer"
label = "reused"

[[order]]
thread = "consumer"
kind = "write"
var = "ack"
"#,
    );
    let o = heddle_out(&[
        "plan",
        &p,
        "targets/uaf_publish.c",
        "--fixed",
        "--runs",
        "2",
    ]);
    let s = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{s}\n{}", text(&o.stderr));
    let first = s.lines().find(|l| l.starts_with("seed 0:")).expect(&s);
    assert!(first.contains("normal") && first.contains("κS 0/2"), "{s}");
    assert!(
        s.contains(
            "stalled at e1 (producer label \"reused\"): stall budget of 50 decisions exceeded"
        ),
        "{s}"
    );
}

/// A plan whose order a run often keeps only by letting a held event go
/// first: thread 1's write of `balance` runs before thread 2's read of 1
/// (which needs a write first, unless thread 2 wrote the 1 itself). κS
/// may still reach 2/2 afterwards, but such a run is not reported as
/// following the plan: only the runs that kept the order unbent count.
#[test]
fn an_order_bent_by_forced_events_is_not_reported_as_followed() {
    let dir = tempdir();
    let p = plan_file(
        dir.path(),
        "bent.toml",
        r#"
[[order]]
name = "t2-reads-one"
thread = 2
kind = "read"
var = "balance"
when = ["balance == 1"]

[[order]]
name = "t1-writes"
thread = 1
kind = "write"
var = "balance"
"#,
    );
    let o = heddle_out(&[
        "plan",
        &p,
        "targets/race_bank.c",
        "--runs",
        "8",
        "--out",
        &dir.path().display().to_string(),
        "--",
        "2",
        "2",
    ]);
    let s = text(&o.stdout);
    assert!(s.contains("κS 2/2 (bent)"), "{s}");
    assert!(
        s.contains("order bent: t1-writes (thread 1 write `balance`) ran before t2-reads-one"),
        "{s}"
    );
    let runs = |bent: bool| {
        s.lines()
            .filter(|l| l.starts_with("seed "))
            .filter(|l| l.contains("κS 2/2") && l.contains("κΦ ∅"))
            .filter(|l| l.contains("(bent)") == bent)
            .count()
    };
    assert!(runs(true) > 0, "{s}");
    let engaged = format!("engaged (κS = 2, κΦ = ∅) in {} of 8 runs", runs(false));
    assert!(s.contains(&engaged), "want `{engaged}`:\n{s}");
    assert!(!s.contains("every run satisfied the whole order"), "{s}");
}

/// `heddle observe` orders accesses by the race detector's rule: the
/// correctly synchronised hand-offs of the sync zoo have no conflicting
/// plain-access pair, and each racy twin has one on the data it peeks at.
#[test]
fn observe_agrees_with_the_race_detector_on_the_sync_zoo() {
    let plain_pairs = |racy: bool, prim: &str| -> Vec<String> {
        let mut args = vec!["observe", "tests/programs/sync_zoo.c"];
        if racy {
            args.extend(["--cflag", "-DRACY"]);
        }
        args.extend(["--runs", "4", "--json", "--", prim]);
        let o = heddle_out(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let mut names = Vec::new();
        for v in j["variables"].as_array().unwrap() {
            let plain = v["conflicting_pairs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["first"]["access"] != "RMW" && p["second"]["access"] != "RMW");
            if plain {
                names.push(v["name"].as_str().unwrap_or("?").to_string());
            }
        }
        names
    };
    for (prim, racy_var) in [
        ("barrier", "slot"),
        ("release-acquire", "data"),
        ("sem", "data"),
        ("once", "data"),
        ("signal", "data"),
        ("mutex", "data"),
        ("sync-builtins", "data"),
        ("tas", "tas_count"),
    ] {
        let clean = plain_pairs(false, prim);
        assert!(
            clean
                .iter()
                .all(|v| v != racy_var && v != "data" && v != "slot"),
            "{prim}: {clean:?}"
        );
        let racy = plain_pairs(true, prim);
        assert!(
            racy.iter().any(|v| v == racy_var),
            "{prim} -DRACY: {racy:?}"
        );
    }
}

/// The plan driver is a library call that returns values: `heddle plan`,
/// `heddle test` and library users read the same report.
#[test]
fn plan_sessions_return_a_report_value() {
    use heddle::plan_run::{Ending, Expect, Session};
    let dir = tempdir();
    let t = heddle::target::load(&repo().join("targets/race_bank.c"), &[]).unwrap();
    let program =
        heddle::runtime::Program::new(&t.bytes, &heddle::instrument::Config::default()).unwrap();
    let plan_path = repo().join("plans/race_bank.toml");
    let file = heddle::plan::load_file(&plan_path).unwrap();
    let session = Session {
        plan_path: &plan_path,
        file: &file,
        target: &t,
        program: &program,
        base: heddle::runtime::RunConfig {
            args: file.args.clone().unwrap_or_default(),
            ..Default::default()
        },
        seed_start: 0,
        runs: 3,
        out: dir.path().to_path_buf(),
    };
    let mut seen = Vec::new();
    let prepared = session.prepare().unwrap();
    assert_eq!(prepared.plan.events.len(), 4);
    let report = prepared.run(&mut |r| seen.push(r.seed)).unwrap();
    assert_eq!(seen, vec![0, 1, 2]);
    assert_eq!(report.count(Ending::Triggered), 3);
    let first = report.triggered().unwrap();
    assert!(first.replay.as_ref().unwrap().is_file());
    assert!(report.expectation(Some(Expect::Triggered)).met);
    let normal = report.expectation(Some(Expect::Normal));
    assert!(!normal.met);
    assert_eq!(
        normal.why.as_deref(),
        Some("expectation failed: not every run ended normally")
    );
    assert_eq!(
        report.summary_lines()[0],
        "3 runs: 3 triggered, 0 normal, 0 timeout, 0 other"
    );
}

/// `heddle hunt`: plans generated from observed runs, tried cheapest first.
/// A three-lock cycle is closed by the first plan (a lock-order cycle seen
/// across the observation runs); a lost update by a two-event order no
/// observed run had; the plan file written reruns with `heddle plan`, the
/// replay file reproduces; the fixed builds trigger nothing; bad input is a
/// usage error.
#[test]
fn hunt_turns_observations_into_plans_that_trigger_the_bug() {
    let dir = tempdir();
    let out = dir.path().join("hunt");
    let o = heddle_out(&[
        "hunt",
        "targets/ring_deadlock.c",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}{}", text(&o.stderr));
    assert!(stdout.contains("plan 1 of "), "{stdout}");
    assert!(
        stdout.contains("a lock-order cycle among 3 threads"),
        "{stdout}"
    );
    assert!(stdout.contains("deadlock"), "{stdout}");
    // Every thread waits at its user call, in the observations' note and in
    // the triggering run alike.
    assert!(
        stdout.contains("waits at main (ring_deadlock.c:"),
        "{stdout}"
    );
    assert!(!stdout.contains("__wasilibc"), "{stdout}");
    let plan = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("plan: heddle plan "))
        .expect("a plan file")
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let again = heddle_out(&[
        "plan",
        &plan,
        "targets/ring_deadlock.c",
        "--expect",
        "triggered",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stdout));
    let replay = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: heddle replay "))
        .expect("a replay file");
    let r = heddle_out(&["replay", replay]);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r.stderr));
    assert!(text(&r.stdout).contains("replay reproduced the recorded run"));

    let o = heddle_out(&[
        "hunt",
        "targets/counter_spy.c",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}{}", text(&o.stderr));
    assert!(stdout.contains("triggered the bug: t"), "{stdout}");
    assert!(
        stdout.contains("an order seen in 0 observed run(s)"),
        "{stdout}"
    );

    for target in ["targets/ring_deadlock.c", "targets/counter_spy.c"] {
        let o = heddle_out(&["hunt", target, "--fixed", "--out", out.to_str().unwrap()]);
        let stdout = text(&o.stdout);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{target}: {stdout}{}",
            text(&o.stderr)
        );
        assert!(stdout.contains("no plan triggered a failure"), "{stdout}");
    }
    assert_usage_error(
        &heddle_out(&["hunt", "targets/counter_spy.c", "--strategy", "pos"]),
        "--strategy does not apply (drop it)",
    );
    assert_usage_error(
        &heddle_out(&["hunt", "targets/counter_spy.c", "--observe", "0"]),
        "must be at least 1",
    );
}
