//! The memory checker: null page, use-after-free, double and invalid free,
//! heap overflow — in the run that explores the schedule.

use crate::common::*;
use heddle::instrument::{Config, Granularity};
use heddle::runtime::{Program, RunConfig};
use heddle::verdict::Verdict;

fn program_of(source: &str, cfg: Config) -> Program {
    let bytes = std::fs::read(build(source, &[])).unwrap();
    Program::new(&bytes, &cfg).expect("program")
}

fn line_of(source: &str, needle: &str) -> usize {
    let text = std::fs::read_to_string(repo().join(source)).unwrap();
    text.lines()
        .position(|l| l.contains(needle))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("`{needle}` not in {source}"))
}

fn memory_verdict(r: &heddle::runtime::RunResult) -> heddle::verdict::MemoryVerdict {
    match &r.verdict {
        Verdict::Memory(m) => m.clone(),
        v => panic!("expected a memory error, got {}", v.summary()),
    }
}

#[test]
fn each_kind_of_memory_error_is_reported_at_its_line() {
    let src = "tests/programs/mem_errors.c";
    let p = program_of(src, Config::default());
    let malloc_line = line_of(src, "int *p = malloc(4 * sizeof(int));");
    let cases = [
        ("null", "null-deref", "sink = np[3];", None),
        ("uaf", "use-after-free", "sink = p[1];", Some(malloc_line)),
        ("double", "double-free", "", Some(malloc_line)),
        ("invalid", "invalid-free", "free(p + 1);", None),
        ("overflow", "heap-overflow", "p[4] = 42;", Some(malloc_line)),
        (
            "underflow",
            "heap-overflow",
            "p[-1] = 42;",
            Some(malloc_line),
        ),
        ("smash", "heap-overflow", "strcpy(s,", None),
        ("libsmash", "heap-overflow", "", None),
    ];
    for (mode, kind, at, alloc_line) in cases {
        let cfg = RunConfig {
            args: vec![mode.into()],
            diagnostics: true,
            ..RunConfig::default()
        };
        let r = p.run(&cfg).unwrap();
        let m = memory_verdict(&r);
        assert_eq!(m.error, kind, "{mode}: {}", r.verdict.summary());
        assert_eq!(r.verdict.kind(), kind);
        if !at.is_empty() {
            let want = format!("mem_errors.c:{}", line_of(src, at));
            assert!(
                r.verdict.summary().contains(&want),
                "{mode}: expected {want} in {}",
                r.verdict.summary()
            );
        }
        if let Some(line) = alloc_line {
            let want = format!("mem_errors.c:{line}");
            assert_eq!(
                m.alloc_where().map(|w| w.contains(&want)),
                Some(true),
                "{mode}: allocation site {:?}",
                m.block
            );
        }
    }
    // The double free names where the block was first freed.
    let r = p
        .run(&RunConfig {
            args: vec!["double".into()],
            diagnostics: true,
            ..RunConfig::default()
        })
        .unwrap();
    let m = memory_verdict(&r);
    let first_free = text_line_after(src, "\"double\"", "free(p);");
    assert!(
        m.free_where()
            .unwrap()
            .contains(&format!("mem_errors.c:{first_free}")),
        "{:?}",
        m.block
    );
    // The overflow by library code (sprintf) is caught when the block is freed.
    let r = p
        .run(&RunConfig {
            args: vec!["libsmash".into()],
            ..RunConfig::default()
        })
        .unwrap();
    let libsmash_free = text_line_after(src, "sprintf(s,", "free(s);");
    assert!(
        r.verdict
            .summary()
            .contains(&format!("mem_errors.c:{libsmash_free}")),
        "{}",
        r.verdict.summary()
    );
    // A correct run reports nothing.
    let r = p
        .run(&RunConfig {
            args: vec!["ok".into()],
            ..RunConfig::default()
        })
        .unwrap();
    assert!(r.verdict.is_pass(), "{}", r.verdict.summary());
}

/// The line number of the first `needle` after the line containing `after`.
fn text_line_after(source: &str, after: &str, needle: &str) -> usize {
    let text = std::fs::read_to_string(repo().join(source)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().position(|l| l.contains(after)).unwrap();
    start
        + lines[start..]
            .iter()
            .position(|l| l.contains(needle))
            .unwrap()
        + 1
}

#[test]
fn a_correct_allocation_heavy_program_reports_nothing() {
    let p = program_of("tests/programs/mem_heavy.c", Config::default());
    for strategy in ["random", "pct:3"] {
        let base = p
            .calibrate(RunConfig {
                strategy: strategy.into(),
                ..RunConfig::default()
            })
            .unwrap();
        for seed in 0..60 {
            let r = p
                .run(&RunConfig {
                    seed,
                    ..base.clone()
                })
                .unwrap();
            assert!(
                r.verdict.is_pass(),
                "{strategy} seed {seed}: {}",
                r.verdict.summary()
            );
            assert_eq!(text(&r.stdout), "done\n");
        }
    }
}

#[test]
fn cxx_new_and_delete_are_tracked() {
    let src = "tests/programs/mem_cxx.cpp";
    let p = program_of(src, Config::default());
    let ok = p.run(&RunConfig::default()).unwrap();
    assert!(ok.verdict.is_pass(), "{}", ok.verdict.summary());
    let r = p
        .run(&RunConfig {
            args: vec!["uaf".into()],
            diagnostics: true,
            ..RunConfig::default()
        })
        .unwrap();
    let m = memory_verdict(&r);
    assert_eq!(m.error, "use-after-free");
    let use_line = line_of(src, "sink = victim->value;");
    let delete_line = line_of(src, "delete victim;");
    assert!(
        r.verdict
            .summary()
            .contains(&format!("mem_cxx.cpp:{use_line}")),
        "{}",
        r.verdict.summary()
    );
    assert!(
        m.free_where()
            .unwrap()
            .contains(&format!("mem_cxx.cpp:{delete_line}")),
        "freed at {:?}",
        m.free_where()
    );
}

#[test]
fn uaf_publish_names_the_freeing_and_the_using_line() {
    let e = entry("uaf_publish");
    let p = program(&e.source, false, Granularity::All);
    let src = "targets/uaf_publish.c";
    let free_line = line_of(src, "free(buf); /* buggy");
    let r = (0..50)
        .map(|seed| {
            run(
                &p,
                &RunConfig {
                    seed,
                    diagnostics: true,
                    ..config(&e, "random", seed)
                },
            )
        })
        .find(|r| !r.verdict.is_pass())
        .expect("a failing seed");
    let m = memory_verdict(&r);
    assert_eq!(m.error, "use-after-free", "{}", r.verdict.summary());
    assert!(
        m.free_where()
            .unwrap()
            .contains(&format!("uaf_publish.c:{free_line}")),
        "{}",
        r.verdict.summary()
    );
    let used = m.stack.iter().find_map(|f| {
        f.loc
            .as_ref()
            .filter(|l| l.file.ends_with("uaf_publish.c"))
            .map(|l| l.line)
    });
    let consumer_loop = line_of(src, "if (buf[i] != pattern(i))");
    assert_eq!(used, Some(consumer_loop as u32), "{}", r.verdict.summary());
    // The signature names both places, without addresses or thread ids.
    let sig = r.verdict.signature();
    assert!(
        sig.starts_with("use-after-free@consumer (uaf_publish.c:"),
        "{sig}"
    );
    assert!(
        sig.contains(&format!("freed@uaf_publish.c:{free_line}")),
        "{sig}"
    );
    assert!(!sig.contains("0x"), "{sig}");
}

#[test]
fn memcheck_off_turns_the_checker_off() {
    let e = entry("uaf_publish");
    let bytes = target_module(&e.source, false);
    let off = Program::new(
        &bytes,
        &Config {
            memcheck: Some(false),
            ..Config::default()
        },
    )
    .unwrap();
    let r = off.run(&config(&e, "random", 0)).unwrap();
    assert_eq!(
        Some(r.verdict.kind().to_string()),
        e.buggy_without_memcheck,
        "{}",
        r.verdict.summary()
    );
    // At granularity sync it is off by default.
    let sync = Program::new(
        &bytes,
        &Config {
            granularity: Granularity::Sync,
            ..Config::default()
        },
    )
    .unwrap();
    assert!(!sync.sites.memcheck);
    // And the CLI flag reaches the replay file.
    let dir = tempdir();
    let out = heddle_out(&[
        "fuzz",
        "targets/uaf_publish.c",
        "--memcheck",
        "off",
        "--runs",
        "50",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let replay = std::fs::read_dir(dir.path()).unwrap().find_map(|e| {
        let p = e.unwrap().path();
        (p.extension().is_some_and(|x| x == "toml")).then_some(p)
    });
    let text = std::fs::read_to_string(replay.expect("replay file")).unwrap();
    assert!(text.contains("memcheck=off"), "{text}");
}
