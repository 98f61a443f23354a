//! Verdicts that name their cause: a stack overflow is reported as one (the
//! thread, its stack size and how to raise it), whether it trapped or the
//! memory checker saw it; a trap the compiler made of undefined behaviour
//! is located in the user's function and explained.

use crate::common::*;
use heddle::instrument::Config;
use heddle::runtime::{Program, RunConfig, RunResult};
use heddle::verdict::Verdict;

const OVERFLOW: &str = "tests/programs/diag_stack_overflow.c";

fn program_of(source: &str) -> Program {
    let bytes = std::fs::read(build(source, &[])).unwrap();
    Program::new(&bytes, &Config::default()).expect("program")
}

fn run_mode(p: &Program, mode: &str, diagnostics: bool) -> RunResult {
    let cfg = RunConfig {
        args: vec![mode.into()],
        diagnostics,
        ..RunConfig::default()
    };
    p.run(&cfg).expect("run")
}

fn line_of(source: &str, needle: &str) -> usize {
    let text = std::fs::read_to_string(repo().join(source)).unwrap();
    text.lines()
        .position(|l| l.contains(needle))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("`{needle}` not in {source}"))
}

/// `(trap kind, thread, message)` of a trap verdict.
fn trap(r: &RunResult) -> (String, u32, String) {
    match &r.verdict {
        Verdict::Trap {
            trap, tid, message, ..
        } => (trap.clone(), *tid, message.clone()),
        v => panic!("expected a trap, got {}", v.summary()),
    }
}

#[test]
fn stack_overflows_name_the_thread_its_stack_and_the_fix() {
    let p = program_of(OVERFLOW);
    let link = "-Wl,-z,stack-size=N";
    let attr = "pthread_attr_setstacksize";
    // (mode, thread, where (function and file: the line is the compiler's
    // choice), what the message must say)
    let cases: [(&str, u32, &str, &[&str]); 4] = [
        (
            "main",
            0,
            "big_frame (diag_stack_overflow.c:",
            &[
                "the main thread ran past the bottom of its stack of 64 KiB",
                "below address 0",
                link,
                "out of bounds memory access",
            ],
        ),
        (
            "thread",
            1,
            "recurse (diag_stack_overflow.c:",
            &[
                "thread 1 ran past the bottom of its stack of 65532 bytes (about 64 KiB)",
                "the threads' default",
                link,
                attr,
            ],
        ),
        (
            "attr",
            1,
            "recurse (diag_stack_overflow.c:",
            &["about 128 KiB", "was set with pthread_attr_setstacksize"],
        ),
        (
            "null",
            0,
            "fill (diag_stack_overflow.c:",
            &[
                "the main thread ran past the bottom of its stack of 64 KiB",
                link,
                "the memory checker saw a null-deref",
            ],
        ),
    ];
    for (mode, tid, at, says) in cases {
        for diagnostics in [false, true] {
            let r = run_mode(&p, mode, diagnostics);
            let (kind, t, message) = trap(&r);
            let summary = r.verdict.summary();
            assert_eq!(kind, "stack-overflow", "{mode}: {summary}");
            assert_eq!(t, tid, "{mode}: {summary}");
            assert!(
                summary.contains(&format!("in thread {tid} at {at}")),
                "{mode}: {summary}"
            );
            assert!(message.starts_with("stack overflow: "), "{mode}: {message}");
            for s in says {
                assert!(message.contains(s), "{mode}: no `{s}` in {message}");
            }
            let sig = r.verdict.signature();
            assert!(
                sig.starts_with(&format!("trap:stack-overflow@{at}")),
                "{sig}"
            );
        }
    }
    // An out-of-bounds write that is no overflow stays what it is.
    let r = run_mode(&p, "oob", false);
    assert_eq!(trap(&r).0, "out-of-bounds", "{}", r.verdict.summary());
    assert!(run_mode(&p, "none", false).verdict.is_pass());
}

/// With `-z stack-size` the main thread's stack, and the threads' default,
/// are larger, and the report says so.
#[test]
fn the_reported_stack_size_follows_the_link_flag() {
    let bytes = std::fs::read(build(OVERFLOW, &["-Wl,-z,stack-size=262144"])).unwrap();
    let p = Program::new(&bytes, &Config::default()).expect("program");
    let (kind, _, message) = trap(&run_mode(&p, "thread", false));
    assert_eq!(kind, "stack-overflow");
    assert!(
        message.contains("about 256 KiB") && message.contains("the threads' default"),
        "{message}"
    );
    assert!(run_mode(&p, "main", false).verdict.is_pass());
}

#[test]
fn a_trap_made_of_undefined_behaviour_is_located_and_explained() {
    let src = "tests/programs/diag_ub_trap.c";
    let p = program_of(src);
    let at = format!(
        "worker (diag_ub_trap.c:{})",
        line_of(src, "*slot = counter;")
    );
    for diagnostics in [false, true] {
        let r = run_mode(&p, "", diagnostics);
        let (kind, tid, message) = trap(&r);
        assert_eq!(
            (kind.as_str(), tid),
            ("unreachable", 1),
            "{}",
            r.verdict.summary()
        );
        assert!(
            r.verdict
                .summary()
                .contains(&format!("in thread 1 at {at}: ")),
            "{}",
            r.verdict.summary()
        );
        assert!(
            message.contains("undefined behaviour") && message.contains("-O0"),
            "{message}"
        );
        assert_eq!(r.verdict.signature(), format!("trap:unreachable@{at}"));
    }
    // At -O0 the same line is the null write it is.
    let bytes = std::fs::read(build(src, &["-O0"])).unwrap();
    let p = Program::new(&bytes, &Config::default()).expect("program");
    let r = run_mode(&p, "", false);
    assert_eq!(r.verdict.kind(), "null-deref", "{}", r.verdict.summary());
}
