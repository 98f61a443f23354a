//! Reports of long runs with many threads: `heddle show`, the HTML report
//! and SARIF stay bounded (size, lines, width) and say what they left out.
//!
//! The fast tests use a pool of 64 workers (about 10^5 steps), long enough
//! that only the steps around the failure are drawn; the slow tier checks a
//! run of millions of steps and 256 threads.

use crate::common::*;
use std::path::{Path, PathBuf};

/// `heddle fuzz <source> --cflag -DBUG --strategy random --out <dir>
/// [extra] -- args`, which must find a failure; returns its replay file.
fn failing_replay(source: &str, out: &Path, extra: &[&str], args: &[&str]) -> PathBuf {
    let mut v = vec![
        "fuzz",
        source,
        "--cflag",
        "-DBUG",
        "--strategy",
        "random",
        "--runs",
        "4",
        "--out",
        out.to_str().unwrap(),
    ];
    v.extend_from_slice(extra);
    v.push("--");
    v.extend_from_slice(args);
    let o = heddle_out(&v);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let toml = failure_replays(out);
    assert_eq!(toml.len(), 1, "{toml:?}");
    toml[0].clone()
}

fn show(file: &Path, extra: &[&str]) -> String {
    let mut v = vec!["show", file.to_str().unwrap()];
    v.extend_from_slice(extra);
    let o = heddle_out(&v);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    text(&o.stdout)
}

/// The steps of the run, from the title (`…: 65 threads, 52752 steps, …`).
fn steps_of(out: &str) -> u64 {
    let title = out.lines().next().unwrap_or_default();
    title
        .split(", ")
        .find_map(|p| p.strip_suffix(" steps"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no step count in {title:?}"))
}

/// Checks the bounds of one `heddle show` output at `width` columns.
fn assert_bounded(out: &str, width: usize, max_bytes: usize, max_lines: usize) {
    assert!(
        out.len() <= max_bytes,
        "{} bytes (at most {max_bytes})",
        out.len()
    );
    let lines = out.lines().count();
    assert!(lines <= max_lines, "{lines} lines (at most {max_lines})");
    for l in out.lines() {
        assert!(
            l.chars().count() <= width,
            "a line wider than {width}: {l:?}"
        );
    }
    // What was left out, and how to see more.
    assert!(out.contains("\nleft out: "), "no elision note:\n{out}");
    assert!(
        out.contains("--context N") && out.contains("--all"),
        "{out}"
    );
    assert!(out.contains(" left out …"), "no gap row:\n{out}");
    // The failure is still drawn.
    assert!(out.contains("✗"), "{out}");
}

#[test]
fn long_report_show_html_and_sarif_of_a_64_worker_pool_are_bounded() {
    let dir = tempdir();
    let sarif = dir.path().join("out.sarif");
    let file = failing_replay(
        "tests/programs/suites/pool.c",
        dir.path(),
        &["--sarif", sarif.to_str().unwrap()],
        &["64", "3000"],
    );

    let out = show(&file, &["--width", "120"]);
    let steps = steps_of(&out);
    assert!(steps > 50_000, "a long run: {steps} steps");
    assert_bounded(&out, 120, 150_000, 600);
    // 65 threads do not get a column each at 120 columns.
    let head = out
        .lines()
        .find(|l| l.trim_start().starts_with("step │"))
        .unwrap();
    assert!(head.contains(" others"), "{head}");
    assert!(head.matches('│').count() <= 8, "{head}");

    // The terminal's width when not on one: 160.
    let wide = show(&file, &[]);
    assert_bounded(&wide, 160, 150_000, 600);

    // `--context N` shows more around each mark, still bounded by the
    // steps it keeps; `--all` every step.
    let ctx = show(&file, &["--width", "120", "--context", "30"]);
    assert!(ctx.lines().count() > out.lines().count() / 2, "{ctx}");
    let all = show(&file, &["--width", "120", "--all"]);
    // (Threads still share a column to fit the width.)
    assert!(
        !all.contains(" left out …") && !all.contains("rows far from"),
        "--all leaves no step out"
    );
    assert!(all.lines().count() > 10 * out.lines().count());

    // The HTML report: bounded, and it says what it left out.
    let html = dir.path().join("show.html");
    show(&file, &["--html", html.to_str().unwrap()]);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.len() <= 2_000_000, "{} bytes of HTML", page.len());
    assert!(
        page.contains("id=\"elided\""),
        "no elision note in the HTML"
    );
    assert!(page.contains("--context N"));

    // SARIF: the code flow of the failure, bounded, with the steps it left
    // out.
    let log = std::fs::read_to_string(&sarif).unwrap();
    assert!(log.len() <= 2_000_000, "{} bytes of SARIF", log.len());
    let v: serde_json::Value = serde_json::from_str(&log).unwrap();
    let r = &v["runs"][0]["results"][0];
    assert!(
        r["properties"]["elidedSteps"].as_u64().unwrap_or(0) > 0,
        "{r}"
    );
    assert!(r["codeFlows"][0]["message"]["text"]
        .as_str()
        .unwrap()
        .contains("left out"));
}

/// The slow tier: a mutex stress test of 256 threads (millions of steps).
#[test]
#[ignore = "slow tier: scripts/test.sh --slow"]
fn long_report_show_of_millions_of_steps_and_256_threads_is_bounded() {
    let dir = tempdir();
    let file = failing_replay(
        "tests/programs/suites/mutex_stress.c",
        dir.path(),
        &["--max-steps", "20000000"],
        &["256", "4200"],
    );
    let out = show(&file, &["--width", "160"]);
    assert!(
        steps_of(&out) > 5_000_000,
        "{}",
        out.lines().next().unwrap()
    );
    assert_bounded(&out, 160, 1_000_000, 1000);
    let html = dir.path().join("show.html");
    show(&file, &["--html", html.to_str().unwrap()]);
    let page = std::fs::metadata(&html).unwrap().len();
    assert!(page <= 4_000_000, "{page} bytes of HTML");
}

/// A run of more decisions than a campaign's run keeps (2^20, so that its
/// memory stays flat in its length) still gets its replay file, from the
/// rerun with diagnostics, and the file replays.
#[test]
#[ignore = "slow tier: scripts/test.sh --slow"]
fn a_run_longer_than_the_kept_decisions_gets_a_replay_that_replays() {
    let dir = tempdir();
    let file = failing_replay(
        "tests/programs/suites/pool.c",
        dir.path(),
        &["--jobs", "1"],
        &["16", "120000"],
    );
    let summary = std::fs::read_to_string(dir.path().join("campaign.toml")).unwrap();
    let decisions: f64 = summary
        .lines()
        .find_map(|l| l.strip_prefix("decisions_per_run = "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no decisions_per_run in\n{summary}"));
    assert!(
        decisions > heddle::runtime::CAMPAIGN_KEPT_DECISIONS as f64,
        "{decisions} decisions"
    );
    replays_the_same_twice(file.to_str().unwrap(), "tasks lost an update");
}
