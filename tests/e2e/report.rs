//! Reports: `heddle show` (golden diagrams), `heddle minimize`, the HTML
//! report in headless Chromium, `--format json` against the published
//! schema, JUnit XML.
//!
//! Golden files live in `tests/e2e/golden/`; `HEDDLE_UPDATE_GOLDEN=1`
//! rewrites them (after a deliberate change of the diagram).

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn golden_dir() -> PathBuf {
    repo().join("tests/e2e/golden")
}

/// `heddle fuzz <source> --strategy random --out <dir> [-- args]` (the
/// golden files are of `random`'s first failures); returns the replay file.
fn fuzz_replay(source: &str, runs: u32, out: &Path, extra: &[&str], args: &[&str]) -> PathBuf {
    let runs = runs.to_string();
    let mut v = vec![
        "fuzz",
        source,
        "--strategy",
        "random",
        "--opt",
        "1",
        "--runs",
        runs.as_str(),
        "--out",
        out.to_str().unwrap(),
    ];
    v.extend_from_slice(extra);
    if !args.is_empty() {
        v.push("--");
        v.extend_from_slice(args);
    }
    let o = heddle_out(&v);
    assert_eq!(
        o.status.code(),
        Some(1),
        "fuzz {source}: {}",
        text(&o.stderr)
    );
    let toml = failure_replays(out);
    assert_eq!(toml.len(), 1, "{toml:?}");
    toml[0].clone()
}

/// `heddle minimize <file>`: the minimised file and its preemption count.
fn minimize(file: &Path) -> (PathBuf, u64) {
    let o = heddle_out(&["minimize", file.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    // `minimised in N runs: A → B preemptions, …`
    let after: u64 = out
        .split(" preemptions")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    let min = file.with_file_name(format!(
        "{}.min.toml",
        file.file_stem().unwrap().to_string_lossy()
    ));
    assert!(min.is_file(), "{out}");
    (min, after)
}

fn show(file: &Path, extra: &[&str]) -> String {
    let mut v = vec!["show", file.to_str().unwrap()];
    v.extend_from_slice(extra);
    let o = heddle_out(&v);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    text(&o.stdout)
}

/// Compares with (or, with `HEDDLE_UPDATE_GOLDEN=1`, writes) a golden file.
fn golden(name: &str, actual: &str) {
    let path = golden_dir().join(name);
    if std::env::var_os("HEDDLE_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "{} missing (HEDDLE_UPDATE_GOLDEN=1 writes it)",
            path.display()
        )
    });
    assert_eq!(
        want, actual,
        "{name} differs from the golden file (HEDDLE_UPDATE_GOLDEN=1 rewrites it)"
    );
}

/// The minimised failing run of a target, shown at 120 columns, with the
/// temporary directory replaced by `<out>`.
fn minimized_show(
    source: &str,
    runs: u32,
    args: &[&str],
) -> (String, u64, PathBuf, tempfile::TempDir) {
    let dir = tempdir();
    let file = fuzz_replay(source, runs, dir.path(), &[], args);
    let (min, preemptions) = minimize(&file);
    let out = show(&min, &["--width", "150"]);
    let out = out.replace(dir.path().to_str().unwrap(), "<out>");
    (out, preemptions, min, dir)
}

#[test]
fn report_race_bank_minimized_show_is_golden_and_fits_a_screen() {
    let (out, preemptions, min, _dir) = minimized_show("targets/race_bank.c", 50, &["2", "2"]);
    assert!(preemptions <= 2, "minimised to {preemptions} preemptions");
    // The minimised file replays to the same verdict.
    let o = heddle_out(&["replay", min.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("replay reproduced the recorded run"));
    // Reads like the hand-drawn diagram: thread columns, the lost update,
    // the failing read and the source lines.
    for want in [
        "T1 depositor",
        "T2 depositor",
        "W balance = ",
        "local = balance;",
        "lost update",
        "✗",
        "◆",
    ] {
        assert!(out.contains(want), "missing `{want}` in:\n{out}");
    }
    assert!(!out.contains('\x1b'), "colour on a pipe");
    assert!(out.lines().count() <= 50, "does not fit one screen:\n{out}");
    assert!(out.lines().all(|l| l.chars().count() <= 150), "{out}");
    golden("race_bank.show.txt", &out);
    // Stable across runs.
    assert_eq!(
        show(&min, &["--width", "150"]).replace(_dir.path().to_str().unwrap(), "<out>"),
        out
    );
}

#[test]
fn report_deadlock_abba_show_draws_the_wait_for_cycle() {
    let (out, _, _, _dir) = minimized_show("targets/deadlock_abba.c", 1000, &[]);
    for want in [
        "deadlock: T1 t1 and T2 t2 wait for each other",
        "T1 t1 ─waits for─▶ lock_b ─held by─▶ T2 t2 ─waits for─▶ lock_a ─held by─▶ T1 t1",
        "holds lock_a, taken at deadlock_abba.c:32",
        "holds lock_b, taken at deadlock_abba.c:48",
        "stack: pthread_mutex_lock (library) ← t1_main (deadlock_abba.c:33)",
        "■",
    ] {
        assert!(out.contains(want), "missing `{want}` in:\n{out}");
    }
    golden("deadlock_abba.show.txt", &out);
    // Its HTML report (written by fuzz) marks the blocked threads and has the cycle.
    let page = std::fs::read_dir(_dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "html"))
        .expect("html report");
    let html = std::fs::read_to_string(page).unwrap();
    assert!(html.contains("\"blocked\""), "no blocked marks");
    assert!(html.contains("─waits for─▶ lock_b ─held by─▶"));
}

#[test]
fn report_codeblock_show_is_golden() {
    let (out, preemptions, _, _dir) = minimized_show("targets/codeblock.cpp", 300, &[]);
    assert!(preemptions <= 2, "{preemptions}");
    for want in [
        "T1 executor",
        "T2 invalidator",
        "unlock cache_lock",
        "lock cache_lock",
        "in std::map::at",
        "trap (uncaught-exception)",
        "uncaught C++ exception of type std::out_of_range",
    ] {
        assert!(out.contains(want), "missing `{want}` in:\n{out}");
    }
    golden("codeblock.show.txt", &out);
}

#[test]
fn report_show_options_context_all_width_and_colour() {
    let dir = tempdir();
    let file = fuzz_replay("targets/race_bank.c", 50, dir.path(), &[], &["2", "2"]);
    let (file, _) = minimize(&file);
    let full = show(&file, &["--width", "200"]);
    let ctx = show(&file, &["--width", "200", "--context", "1"]);
    let all = show(&file, &["--width", "200", "--all"]);
    let narrow = show(&file, &["--width", "80"]);
    assert!(ctx.contains("⋮") && ctx.contains(" rows)"), "{ctx}");
    assert!(ctx.lines().count() < full.lines().count());
    assert!(
        all.lines().count() > full.lines().count() * 2,
        "--all shows every step"
    );
    assert!(narrow.lines().all(|l| l.chars().count() <= 80), "{narrow}");
    // Colour only on a terminal, never with NO_COLOR.
    let bin = env!("CARGO_BIN_EXE_heddle");
    let tty = |no_color: bool| {
        let mut c = Command::new("script");
        c.current_dir(repo())
            .args([
                "-qec",
                &format!("{bin} show {} --width 100", file.display()),
                "/dev/null",
            ])
            .env_remove("NO_COLOR");
        if no_color {
            c.env("NO_COLOR", "1");
        }
        c.output()
    };
    match tty(false) {
        Ok(o) if o.status.success() => {
            assert!(text(&o.stdout).contains("\x1b["), "no colour on a terminal");
            let o = tty(true).unwrap();
            assert!(
                !text(&o.stdout).contains("\x1b["),
                "colour despite NO_COLOR"
            );
        }
        other => println!("skipping the terminal check: `script` unavailable ({other:?})"),
    }
}

#[test]
fn report_memory_error_and_race_are_drawn_in_their_columns() {
    let dir = tempdir();
    let file = fuzz_replay("targets/uaf_publish.c", 300, dir.path(), &[], &[]);
    let out = show(&file, &["--width", "160"]);
    let row = |needle: &str| {
        out.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no `{needle}` row in:\n{out}"))
            .to_string()
    };
    // Allocation and free in the producer's column (the third), the bad
    // access in the consumer's (the second), each marked.
    let col = |l: &str| {
        l.split('│')
            .enumerate()
            .skip(1)
            .find(|(_, c)| !c.trim().is_empty())
            .map(|(i, _)| i)
    };
    let alloc = row("malloc 16 bytes");
    let free = row("free 0x");
    assert!(
        alloc.starts_with('†') && free.starts_with('†'),
        "{alloc}\n{free}"
    );
    assert_eq!(col(&alloc), Some(3), "{alloc}");
    assert_eq!(col(&free), Some(3), "{free}");
    let bad = out
        .lines()
        .find(|l| l.starts_with('✗'))
        .expect("failing row");
    assert_eq!(col(bad), Some(2), "{bad}");
    assert!(out.contains("allocated the block") && out.contains("freed the block"));

    let dir = tempdir();
    let file = fuzz_replay(
        "targets/racy_counter.c",
        50,
        dir.path(),
        &["--races", "fail"],
        &[],
    );
    let out = show(&file, &["--width", "160"]);
    let racing: Vec<&str> = out
        .lines()
        .filter(|l| l.contains('≠') && l.contains('│'))
        .collect();
    assert_eq!(racing.len(), 2, "{out}");
    assert!(racing.iter().all(|l| l.contains("counter")), "{out}");
    assert!(out.contains("≠ data race on counter"), "{out}");
    // The race section, in the text and in the HTML report.
    assert!(out.contains("data races (1):"), "{out}");
    assert!(
        out.contains("first  write by T") || out.contains("first  read  by T"),
        "{out}"
    );
    assert!(out.contains("second write by T"), "{out}");
    let html = std::fs::read_to_string(file.with_extension("html")).unwrap();
    assert_eq!(html.matches("<li class=\"race\">").count(), 1);
}

/// Chromium, installed with apt-get when missing and possible.
fn chromium() -> Option<String> {
    for c in ["chromium", "chromium-browser"] {
        if Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(c.to_string());
        }
    }
    let ok = Command::new("sh")
        .args([
            "-c",
            "command -v apt-get >/dev/null && [ \"$(id -u)\" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1",
        ])
        .status()
        .is_ok_and(|s| s.success());
    ok.then(|| "chromium".to_string())
}

#[test]
fn report_html_renders_in_headless_chromium() {
    let dir = tempdir();
    let file = fuzz_replay("targets/race_bank.c", 50, dir.path(), &[], &["2", "2"]);
    let page = file.with_extension("html");
    assert!(
        page.is_file(),
        "fuzz writes the HTML report next to the replay file"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: nothing fetched from anywhere.
    for bad in ["http://", "https://", "<link", "src="] {
        assert!(!html.contains(bad), "the page refers to `{bad}`");
    }
    // `show --html` writes the same kind of page.
    let shown = dir.path().join("shown.html");
    let o = heddle_out(&[
        "show",
        file.to_str().unwrap(),
        "--html",
        shown.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(std::fs::read_to_string(&shown)
        .unwrap()
        .contains("id=\"heddle-data\""));

    let Some(chrome) = chromium() else {
        println!(
            "skipping the Chromium check: chromium is not installed and cannot be installed here"
        );
        return;
    };
    let profile = dir.path().join("profile");
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--virtual-time-budget=3000",
    ];
    let url = format!("file://{}", page.display());
    let o = Command::new(&chrome)
        .args(common)
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--dump-dom", &url])
        .output()
        .expect("run chromium");
    let dom = text(&o.stdout);
    assert!(
        dom.contains("data-ready=\"yes\""),
        "the script did not run: {}",
        text(&o.stderr)
    );
    for t in 0..3 {
        assert!(
            dom.contains(&format!("id=\"lane-{t}\"")),
            "lane {t} missing"
        );
    }
    assert!(dom.contains("T1 depositor") && dom.contains("T2 depositor"));
    let failing = dom.matches("class=\"ev failing").count();
    assert_eq!(failing, 1, "one failing event");
    assert!(
        dom.contains("heddle_assert(balance == n * k"),
        "the failing event's source line is shown"
    );
    assert!(
        dom.contains("heddle replay "),
        "the replay command is on the page"
    );
    // The screenshot, kept as a test artifact.
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("heddle-report-race_bank.png");
    let _ = std::fs::remove_file(&shot);
    let o = Command::new(&chrome)
        .args(common)
        .arg(format!("--user-data-dir={}", profile.display()))
        .args([
            "--window-size=1400,900",
            &format!("--screenshot={}", shot.display()),
            &url,
        ])
        .output()
        .expect("run chromium");
    let png = std::fs::read(&shot).unwrap_or_else(|_| panic!("no screenshot: {}", text(&o.stderr)));
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    println!("screenshot: {}", shot.display());
}

fn schema() -> serde_json::Value {
    serde_json::from_str(heddle::report::schema::REPORT_SCHEMA).expect("schema")
}

/// Validates with heddle's validator, and with Python's `jsonschema` when
/// it is installed (which also checks that the schema is a valid one).
fn assert_valid(doc: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(doc).unwrap_or_else(|e| panic!("{e}: {doc}"));
    let errs = heddle::report::schema::validate(&schema(), &v);
    assert!(errs.is_empty(), "{errs:?}\n{doc}");
    let dir = tempdir();
    let p = dir.path().join("doc.json");
    std::fs::write(&p, doc).unwrap();
    let py = format!(
        "import json,sys\ntry:\n import jsonschema\nexcept ImportError:\n sys.exit(3)\ns=json.load(open({:?}))\njsonschema.Draft202012Validator.check_schema(s)\njsonschema.validate(json.load(open({:?})),s)\n",
        repo().join("docs/report-schema.json").display().to_string(),
        p.display().to_string()
    );
    match Command::new("python3").args(["-c", &py]).output() {
        Ok(o) if o.status.code() == Some(3) => {
            println!("python3 jsonschema not installed: heddle's validator only")
        }
        Ok(o) => assert!(o.status.success(), "jsonschema: {}", text(&o.stderr)),
        Err(_) => println!("python3 not available: heddle's validator only"),
    }
    v
}

#[test]
fn report_json_output_validates_against_the_schema() {
    let dir = tempdir();
    let out = dir.path().to_str().unwrap();
    let o = heddle_out(&[
        "fuzz",
        "targets/race_bank.c",
        "--runs",
        "50",
        "--out",
        out,
        "--format",
        "json",
        "--",
        "2",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v = assert_valid(&text(&o.stdout));
    assert_eq!(v["result"], "fail");
    assert_eq!(v["verdict"]["kind"], "assertion");
    let replay = v["replay"].as_str().unwrap().to_string();
    assert!(Path::new(&replay).is_file() || repo().join(&replay).is_file());
    assert!(
        text(&o.stderr).contains("replay: heddle replay"),
        "text goes to stderr"
    );

    let o = heddle_out(&["replay", &replay, "--format", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let r = assert_valid(&text(&o.stdout));
    assert_eq!(r["verdict"]["signature"], v["verdict"]["signature"]);

    let o = heddle_out(&[
        "run",
        "targets/race_bank.c",
        "--fixed",
        "--format",
        "json",
        "--",
        "2",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let r = assert_valid(&text(&o.stdout));
    assert_eq!(r["result"], "pass");
    assert_eq!(r["statistics"]["runs"], 1);

    let o = heddle_out(&[
        "fuzz",
        "targets/racy_counter.c",
        "--runs",
        "20",
        "--out",
        out,
        "--format",
        "json",
    ]);
    let r = assert_valid(&text(&o.stdout));
    assert!(!r["races"].as_array().unwrap().is_empty(), "{r}");

    // explore and plan speak the same schema.
    let o = heddle_out(&[
        "explore",
        "targets/race_bank.c",
        "--bound",
        "preemptions=1",
        "--out",
        out,
        "--format",
        "json",
        "--",
        "2",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let r = assert_valid(&text(&o.stdout));
    assert_eq!(r["command"], "explore");
    assert_eq!(r["verdict"]["kind"], "assertion");
    assert!(r["statistics"]["runs"].as_u64().unwrap() > 1, "{r}");
    let replay = r["replay"].as_str().unwrap().to_string();
    let o = heddle_out(&["replay", &replay]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));

    let xml = dir.path().join("plan.xml");
    let o = heddle_out(&[
        "plan",
        "plans/codeblock.toml",
        "targets/codeblock.cpp",
        "--runs",
        "2",
        "--out",
        out,
        "--format",
        "json",
        "--junit",
        xml.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let r = assert_valid(&text(&o.stdout));
    assert_eq!(r["command"], "plan");
    assert_eq!(r["result"], "fail");
    assert_eq!(r["statistics"]["runs"], 2);
    let junit = std::fs::read_to_string(&xml).unwrap();
    assert!(junit.contains("classname=\"heddle.plan\""), "{junit}");
    assert!(junit.contains("<failure "), "{junit}");
}

#[test]
fn report_junit_lists_one_testcase_per_target() {
    let dir = tempdir();
    let out = dir.path().to_str().unwrap();
    let xml = dir.path().join("r.xml");
    let x = xml.to_str().unwrap();
    let o = heddle_out(&[
        "fuzz",
        "targets/race_bank.c",
        "--runs",
        "50",
        "--out",
        out,
        "--junit",
        x,
        "--",
        "2",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let o = heddle_out(&[
        "fuzz",
        "targets/race_bank.c",
        "--fixed",
        "--runs",
        "5",
        "--out",
        out,
        "--junit",
        x,
        "--",
        "2",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let o = heddle_out(&[
        "fuzz",
        "targets/deadlock_abba.c",
        "--fixed",
        "--runs",
        "5",
        "--out",
        out,
        "--junit",
        x,
    ]);
    assert_eq!(o.status.code(), Some(0));
    let doc = std::fs::read_to_string(&xml).unwrap();
    // race_bank was replaced by its later (passing) run; deadlock_abba added.
    assert_eq!(doc.matches("<testcase ").count(), 2, "{doc}");
    assert!(doc.contains("tests=\"2\" failures=\"0\""), "{doc}");
    let o = heddle_out(&[
        "fuzz",
        "targets/race_bank.c",
        "--runs",
        "50",
        "--out",
        out,
        "--junit",
        x,
        "--",
        "2",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let doc = std::fs::read_to_string(&xml).unwrap();
    assert!(doc.contains("tests=\"2\" failures=\"1\""), "{doc}");
    assert!(doc.contains("replay: heddle replay "), "{doc}");
    // Well-formed XML.
    let py = format!(
        "import xml.dom.minidom as m\nd=m.parse({:?})\nprint(len(d.getElementsByTagName('testcase')), len(d.getElementsByTagName('failure')))",
        x
    );
    match Command::new("python3").args(["-c", &py]).output() {
        Ok(o) => assert_eq!(text(&o.stdout).trim(), "2 1", "{}", text(&o.stderr)),
        Err(_) => println!("python3 not available: XML well-formedness not checked"),
    }
}

#[test]
fn report_bad_input_is_a_one_line_error() {
    let dir = tempdir();
    let bad = dir.path().join("in/bad.toml");
    std::fs::create_dir_all(bad.parent().unwrap()).unwrap();
    std::fs::write(&bad, "this is not a replay file [[[").unwrap();
    let b = bad.to_str().unwrap();
    assert_usage_error(&heddle_out(&["show", b]), "bad.toml");
    assert_usage_error(&heddle_out(&["minimize", b]), "bad.toml");
    assert_usage_error(&heddle_out(&["show", "/nonexistent/x.toml"]), "x.toml");
    let file = fuzz_replay("targets/race_bank.c", 50, dir.path(), &[], &["2", "2"]);
    assert_usage_error(
        &heddle_out(&[
            "show",
            file.to_str().unwrap(),
            "--html",
            &format!("{b}/x.html"),
        ]),
        "cannot write",
    );
    let o = heddle_out(&["run", "targets/race_bank.c", "--format", "yaml"]);
    assert_eq!(o.status.code(), Some(2));
}

/// The SARIF 2.1.0 schema (OASIS, `sarif-schema-2.1.0.json`).
fn sarif_validator() -> jsonschema::Validator {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("tests/data/sarif-schema-2.1.0.json")).unwrap(),
    )
    .unwrap();
    jsonschema::validator_for(&schema).expect("the SARIF schema compiles")
}

/// Reads a SARIF file and checks it against the schema.
fn valid_sarif(path: &Path) -> serde_json::Value {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let v = sarif_validator();
    let errors: Vec<String> = v
        .iter_errors(&doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(doc["version"], "2.1.0");
    doc
}

/// `--sarif` on fuzz, explore and test: valid SARIF 2.1.0; the result's
/// rule is the verdict kind, its location the failing line, its code flow
/// the interleaving (one thread flow per thread, execution order global);
/// a clean campaign writes an empty result list. In GitHub Actions each
/// failure is also an `::error` annotation.
#[test]
fn report_sarif_validates_and_carries_the_interleaving() {
    let dir = tempdir();
    let sarif = dir.path().join("f.sarif");
    let o = heddle()
        .args(["fuzz", "targets/deadlock_abba.c", "--runs", "300", "-q"])
        .args(["--out", dir.path().join("f").to_str().unwrap()])
        .args(["--sarif", sarif.to_str().unwrap()])
        .env("GITHUB_ACTIONS", "true")
        .output()
        .unwrap();
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}{}", text(&o.stderr));
    let doc = valid_sarif(&sarif);
    let run = &doc["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "heddle");
    assert_eq!(run["tool"]["driver"]["rules"][0]["id"], "heddle/deadlock");
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    let r = &results[0];
    assert_eq!(r["ruleId"], "heddle/deadlock");
    let loc = &r["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "targets/deadlock_abba.c");
    let line = loc["region"]["startLine"].as_u64().unwrap();
    let src = std::fs::read_to_string(repo().join("targets/deadlock_abba.c")).unwrap();
    let src_line = src.lines().nth(line as usize - 1).unwrap();
    assert!(src_line.contains("lock"), "line {line}: {src_line}");
    assert!(r["properties"]["replayCommand"]
        .as_str()
        .unwrap()
        .starts_with("heddle replay "));
    let flows = r["codeFlows"][0]["threadFlows"].as_array().unwrap();
    let ids: Vec<&str> = flows.iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"T1") && ids.contains(&"T2"), "{ids:?}");
    let mut orders = Vec::new();
    for f in flows {
        let o: Vec<u64> = f["locations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["executionOrder"].as_u64().unwrap())
            .collect();
        assert!(o.windows(2).all(|w| w[0] < w[1]), "{o:?}");
        orders.extend(o);
    }
    orders.sort();
    assert_eq!(orders, (1..=orders.len() as u64).collect::<Vec<_>>());
    let note = stdout
        .lines()
        .find(|l| l.starts_with("::error "))
        .unwrap_or_else(|| panic!("no annotation: {stdout}"));
    assert!(
        note.starts_with(&format!(
            "::error file=targets/deadlock_abba.c,line={line},title=heddle%3A deadlock::deadlock"
        )),
        "{note}"
    );
    // The fixed build: an empty result list.
    let clean = dir.path().join("clean.sarif");
    let o = heddle_out(&[
        "fuzz",
        "targets/deadlock_abba.c",
        "--fixed",
        "--runs",
        "20",
        "-q",
        "--out",
        dir.path().join("c").to_str().unwrap(),
        "--sarif",
        clean.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    let doc = valid_sarif(&clean);
    assert_eq!(doc["runs"][0]["results"].as_array().unwrap().len(), 0);
    // explore with a broken invariant: the rule is `expectation`.
    let ex = dir.path().join("e.sarif");
    let o = heddle_out(&[
        "explore",
        "targets/counter_spy.c",
        "--fixed",
        "--bound",
        "preemptions=1",
        "--expect",
        "x >= 3",
        "--out",
        dir.path().join("e").to_str().unwrap(),
        "--sarif",
        ex.to_str().unwrap(),
        "--",
        "1",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let doc = valid_sarif(&ex);
    let r = &doc["runs"][0]["results"][0];
    assert_eq!(r["ruleId"], "heddle/expectation");
    assert!(
        r["message"]["text"].as_str().unwrap().contains("x >= 3"),
        "{r}"
    );
    // heddle test: the unexpected failure of a fixed build.
    let bank = repo().join("targets/race_bank.c");
    let project = dir.path().join("heddle.toml");
    std::fs::write(
        &project,
        format!(
            "[[target]]\nname = \"bank\"\nsource = \"{}\"\nargs = [\"2\", \"2\"]\nbuggy = \"pass\"\nhunt_seeds = 50\n",
            bank.display()
        ),
    )
    .unwrap();
    let ts = dir.path().join("t.sarif");
    let o = heddle_out(&[
        "test",
        project.to_str().unwrap(),
        "--out",
        dir.path().join("t").to_str().unwrap(),
        "--sarif",
        ts.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    let doc = valid_sarif(&ts);
    assert_eq!(doc["runs"][0]["results"][0]["ruleId"], "heddle/assertion");
}

/// `heddle show FILE --perfetto OUT.json`: the Chrome trace-event format's
/// rules (phases, µs timestamps, pid/tid, slices that never overlap on a
/// track, monotone time per track) and the threads and events of a known
/// deadlock. Only one guest thread runs at a time, so no two slices
/// overlap at all.
#[test]
fn report_perfetto_trace_follows_the_format_and_shows_the_deadlock() {
    let dir = tempdir();
    let file = fuzz_replay("targets/deadlock_abba.c", 1000, dir.path(), &[], &[]);
    let out = dir.path().join("trace.json");
    let o = heddle_out(&[
        "show",
        file.to_str().unwrap(),
        "--perfetto",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let evs = doc["traceEvents"].as_array().unwrap();
    let mut names = std::collections::BTreeMap::new();
    let mut slices: Vec<(u64, u64, u64)> = Vec::new();
    let mut last_ts: std::collections::BTreeMap<u64, u64> = Default::default();
    let mut instants = Vec::new();
    for e in evs {
        let ph = e["ph"].as_str().unwrap();
        assert!(e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
        assert!(e["name"].is_string(), "{e}");
        let tid = e["tid"].as_u64().unwrap();
        match ph {
            "M" => {
                if e["name"] == "thread_name" {
                    names.insert(tid, e["args"]["name"].as_str().unwrap().to_string());
                }
            }
            "X" => {
                let (ts, dur) = (e["ts"].as_u64().unwrap(), e["dur"].as_u64().unwrap());
                assert!(dur > 0, "{e}");
                let prev = last_ts.insert(tid, ts).unwrap_or(0);
                assert!(ts >= prev, "time goes back on track {tid}: {e}");
                slices.push((ts, ts + dur, tid));
            }
            "i" => {
                assert!(["t", "p", "g"].contains(&e["s"].as_str().unwrap()), "{e}");
                assert!(e["ts"].is_u64(), "{e}");
                instants.push(e.clone());
            }
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    slices.sort();
    assert!(slices.len() > 3);
    assert!(
        slices.windows(2).all(|w| w[0].1 <= w[1].0),
        "slices overlap: {slices:?}"
    );
    for (_, _, tid) in &slices {
        assert!(names.contains_key(tid), "track {tid} has no thread_name");
    }
    assert!(
        names.values().any(|n| n.contains("t1")) && names.values().any(|n| n.contains("t2")),
        "{names:?}"
    );
    let locks: Vec<_> = instants.iter().filter(|e| e["cat"] == "lock").collect();
    assert!(!locks.is_empty());
    assert!(locks.iter().all(|e| e["args"]["file:line"]
        .as_str()
        .is_some_and(|l| l.contains("deadlock_abba.c:"))));
    let fail = instants
        .iter()
        .find(|e| e["cat"] == "verdict")
        .expect("the failure is an instant event");
    assert_eq!(fail["name"], "FAIL: deadlock");
    // Deterministic: the same file gives the same bytes.
    let again = dir.path().join("again.json");
    heddle_out(&[
        "show",
        file.to_str().unwrap(),
        "--perfetto",
        again.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&again).unwrap());
}
