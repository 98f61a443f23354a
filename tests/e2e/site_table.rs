//! One site table across builds: a program's synchronisation operations are
//! the same user-code sites, on the same source lines and in the same
//! functions, whether it is built with `-O0`, `-O1`, `-O2` or `-Os`.
//!
//! For each program of `tests/programs/opt/`, each build (`heddle cc`/`heddle
//! c++ -g -O…`) must run to a pass, and the set of its synchronisation sites
//! as `heddle sites --format json` lists them — (kind, file:line, function
//! without its parameter list), user code only — must equal the program's
//! expected list, so a site attributed to a library header line (say
//! `cxx_atomic_impl.h:304`) or to the wrong function fails. Sets, not counts:
//! an unrolled loop or libc++'s switch on the memory order may put several
//! sites on one line. Plain reads and writes, entries, back-edges, calls,
//! allocations and thread creation/join are not compared. The Rust program
//! is compared between `opt-level=0` and `2`, and every bundled target
//! between the four C/C++ levels (without an expected list).

use crate::common::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const LEVELS: [&str; 4] = ["-O0", "-O1", "-O2", "-Os"];

/// The site kinds compared, as `heddle sites` prints them.
const SYNC_KINDS: [&str; 13] = [
    "atomic-R",
    "atomic-W",
    "RMW",
    "CAS",
    "fence",
    "wait",
    "notify",
    "lock",
    "unlock",
    "cond-wait",
    "barrier",
    "once",
    "sync-call",
];

/// A synchronisation site: file (its name), line, kind, function; ordered
/// by position.
type Key = (String, u32, String, String);

/// The `heddle sites` label of a JSON site, if it is a synchronisation site.
fn sync_label(site: &Value) -> Option<&'static str> {
    let atomic = site["atomic"].as_bool().unwrap_or(false);
    let label = match site["kind"].as_str()? {
        "read" if atomic => "atomic-R",
        "write" if atomic => "atomic-W",
        "rmw" => "RMW",
        "cmpxchg" => "CAS",
        "fence" => "fence",
        "wait" => "wait",
        "notify" => "notify",
        "lock" => "lock",
        "unlock" => "unlock",
        "cond-wait" => "cond-wait",
        "barrier" => "barrier",
        "once" => "once",
        "sync-call" => "sync-call",
        _ => return None,
    };
    debug_assert!(SYNC_KINDS.contains(&label));
    Some(label)
}

/// A demangled function name without its parameter list and qualifiers:
/// `Stats<long>::total() const` → `Stats<long>::total`,
/// `main::$_0::operator()() const` → `main::$_0::operator()`.
fn without_params(name: &str) -> &str {
    let Some(close) = name.rfind(')') else {
        return name;
    };
    let mut depth = 0usize;
    for (i, c) in name[..=close].char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return &name[..i];
                }
            }
            _ => {}
        }
    }
    name
}

/// The user-code synchronisation sites of `module`.
fn sync_sites(module: &Path) -> BTreeSet<Key> {
    let out = heddle_out(&["sites", module.to_str().unwrap(), "--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "heddle sites {}: {}",
        module.display(),
        text(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("sites JSON");
    let sites = doc["sites"].as_array().expect("a `sites` array");
    sites
        .iter()
        .filter(|s| s["user"].as_bool() == Some(true))
        .filter_map(|s| {
            let kind = sync_label(s)?;
            let (file, line) = match &s["loc"] {
                Value::Null => ("-".to_string(), 0),
                loc => (
                    Path::new(loc["file"].as_str().unwrap_or("?"))
                        .file_name()
                        .map(|f| f.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    loc["line"].as_u64().unwrap_or(0) as u32,
                ),
            };
            let func = without_params(s["func_name"].as_str().unwrap_or("?"));
            Some((file, line, kind.to_string(), func.to_string()))
        })
        .collect()
}

/// Builds `source` at `level`, checks that it runs to a pass, and returns
/// its synchronisation sites.
fn build_and_list(source: &str, level: &str) -> BTreeSet<Key> {
    let dir = tempdir();
    let module = build_at(source, level, dir.path());
    let run = heddle_out(&["run", module.to_str().unwrap(), "-q"]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{source} {level} does not pass:\n{}{}",
        text(&run.stdout),
        text(&run.stderr)
    );
    sync_sites(&module)
}

/// `heddle cc`/`heddle c++ -g LEVEL source` into `dir`; the module's path.
fn build_at(source: &str, level: &str, dir: &Path) -> std::path::PathBuf {
    let module = dir.join("prog.wasm");
    let driver = if source.ends_with(".c") { "cc" } else { "c++" };
    let cc = heddle_out(&[driver, "-g", level, source, "-o", module.to_str().unwrap()]);
    assert!(
        cc.status.success(),
        "heddle {driver} {level} {source}: {}",
        text(&cc.stderr)
    );
    module
}

fn show(keys: &BTreeSet<&Key>) -> String {
    keys.iter()
        .map(|(file, line, kind, func)| {
            let loc = format!("{file}:{line}");
            format!("\n      {kind:<9} {loc:<24} {func}")
        })
        .collect()
}

/// The Rust builds compared: `-C opt-level=0` (debug) and `2` (release).
const RUST_LEVELS: [&str; 2] = ["0", "2"];

/// Builds the Rust program `name` (under `tests/programs/opt/`) at each of
/// [`RUST_LEVELS`], checks that it passes, and compares its synchronisation
/// sites with `expected` and with each other.
fn check_rust(name: &str, expected: &[(&str, u32, &str)]) {
    let source = format!("tests/programs/opt/{name}");
    let want: BTreeSet<Key> = expected
        .iter()
        .map(|(kind, line, func)| (name.to_string(), *line, kind.to_string(), func.to_string()))
        .collect();
    let got: BTreeMap<&str, BTreeSet<Key>> = RUST_LEVELS
        .iter()
        .map(|&level| {
            let module = rust_build_at(&source, level);
            let run = heddle_out(&["run", module.to_str().unwrap(), "-q"]);
            assert_eq!(
                run.status.code(),
                Some(0),
                "{name} opt-level={level} does not pass:\n{}{}",
                text(&run.stdout),
                text(&run.stderr)
            );
            (level, sync_sites(&module))
        })
        .collect();
    compare(name, &want, &got);
}

/// Builds `name` (under `tests/programs/opt/`) at every level and compares
/// each build's synchronisation sites with `expected` — (kind, line,
/// function) on lines of the program's own file — and with each other.
fn check(name: &str, expected: &[(&str, u32, &str)]) {
    let source = format!("tests/programs/opt/{name}");
    let want: BTreeSet<Key> = expected
        .iter()
        .map(|(kind, line, func)| {
            assert!(SYNC_KINDS.contains(kind), "{kind} is not a compared kind");
            (name.to_string(), *line, kind.to_string(), func.to_string())
        })
        .collect();
    let got: BTreeMap<&str, BTreeSet<Key>> = LEVELS
        .iter()
        .copied()
        .zip(par_map(&LEVELS, |level| build_and_list(&source, level)))
        .collect();
    compare(name, &want, &got);
}

/// Compares each build's synchronisation sites (`got`, by build) with
/// `want` and with each other.
fn compare(name: &str, want: &BTreeSet<Key>, got: &BTreeMap<&str, BTreeSet<Key>>) {
    let mut report = String::new();
    for (level, sites) in got {
        let missing: BTreeSet<&Key> = want.difference(sites).collect();
        let extra: BTreeSet<&Key> = sites.difference(want).collect();
        if missing.is_empty() && extra.is_empty() {
            continue;
        }
        report.push_str(&format!("\n  {name} {level}:"));
        if !missing.is_empty() {
            report.push_str(&format!("\n    missing:{}", show(&missing)));
        }
        if !extra.is_empty() {
            report.push_str(&format!("\n    extra:{}", show(&extra)));
        }
    }
    let distinct: BTreeSet<&BTreeSet<Key>> = got.values().collect();
    if distinct.len() > 1 {
        let levels: Vec<String> = got
            .iter()
            .map(|(level, sites)| format!("{level} {}", sites.len()))
            .collect();
        report.push_str(&format!(
            "\n  the builds' site sets differ (sizes: {})",
            levels.join(", ")
        ));
    }
    assert!(
        report.is_empty(),
        "synchronisation sites of {name} (kind, location, function):{report}"
    );
}

#[test]
fn function_names_lose_their_parameter_lists() {
    assert_eq!(without_params("main"), "main");
    assert_eq!(without_params("record(int)"), "record");
    assert_eq!(
        without_params("Stats<long>::total() const"),
        "Stats<long>::total"
    );
    assert_eq!(
        without_params("Stats<long>::log(char const*, long)"),
        "Stats<long>::log"
    );
    assert_eq!(
        without_params("main::$_0::operator()() const"),
        "main::$_0::operator()"
    );
    assert_eq!(without_params("apply(void (*)(int), int)"), "apply");
}

/// A class template over `std::atomic<long>` and `std::atomic_flag`: at
/// `-O0` libc++'s atomic member functions are out-of-line functions of
/// `cxx_atomic_impl.h`, at `-O1` and up they are inlined.
#[test]
fn std_atomic_sites_are_the_same_at_every_level() {
    let add = "Stats<long>::add";
    let publish = "Stats<long>::publish";
    let log = "Stats<long>::log";
    check(
        "atomics_cxx.cpp",
        &[
            ("RMW", 18, add),
            ("atomic-R", 19, add),
            ("CAS", 20, add),
            ("RMW", 25, "Stats<long>::swap_last"),
            ("fence", 30, publish),
            ("atomic-W", 31, publish),
            ("RMW", 35, log),
            ("atomic-W", 39, log),
            ("atomic-R", 42, "Stats<long>::total"),
            ("atomic-R", 43, "Stats<long>::peak"),
        ],
    );
}

/// C11 `<stdatomic.h>` through a static helper.
#[test]
fn c11_atomic_sites_are_the_same_at_every_level() {
    check(
        "atomics_c11.c",
        &[
            ("atomic-R", 26, "claim_job"),
            ("CAS", 28, "claim_job"),
            ("RMW", 38, "worker"),
            ("CAS", 42, "worker"),
            ("fence", 44, "worker"),
            ("atomic-W", 45, "worker"),
            ("atomic-R", 57, "main"),
            ("atomic-R", 58, "main"),
        ],
    );
}

/// The `__atomic_*` and `__sync_*` builtins.
#[test]
fn builtin_atomic_sites_are_the_same_at_every_level() {
    check(
        "atomics_builtins.c",
        &[
            ("RMW", 28, "get_ref"),
            ("RMW", 32, "put_ref"),
            ("atomic-R", 36, "bump_version"),
            ("CAS", 37, "bump_version"),
            ("RMW", 46, "worker"),
            ("CAS", 47, "worker"),
            ("fence", 49, "worker"),
            ("atomic-W", 50, "worker"),
            ("atomic-R", 62, "main"),
        ],
    );
}

/// `pthread_mutex_t` next to `std::mutex` and `std::condition_variable`.
/// libc++'s `std::mutex::lock` and `condition_variable::wait` are compiled
/// into libc++ and call the C library's lock, unlock and wait; each call the
/// program makes to one (through `std::lock_guard` on line 22, released at
/// the end of its block on line 24, `std::unique_lock` on line 29, released
/// when `take` returns on line 36, `wait` on line 31) is a site at the
/// program's line, like the direct pthread calls. `notify_one` (line 25)
/// wakes through the C library's own futex code: no site, at any level.
#[test]
fn lock_sites_are_the_same_at_every_level() {
    check(
        "locks_mixed.cpp",
        &[
            ("lock", 22, "Mailbox::put"),
            ("unlock", 24, "Mailbox::put"),
            ("lock", 29, "Mailbox::take"),
            ("cond-wait", 31, "Mailbox::take"),
            ("unlock", 36, "Mailbox::take"),
            ("lock", 50, "record"),
            ("unlock", 53, "record"),
        ],
    );
}

/// Rust atomics through a helper type, a `Mutex` and a `Condvar`: each
/// operation at its own line in debug and release builds. A lock's site is
/// its compare-exchange (its contended path, which spins and waits, is the
/// library's); an unlock (a guard dropped by `drop`, or at the end of its
/// scope) its swap and its wake; a `Condvar::wait` reads the condition
/// variable's word, unlocks, waits and locks again.
#[test]
fn rust_sync_sites_are_the_same_in_debug_and_release() {
    let unlock = |line: u32, func: &'static str| [("RMW", line, func), ("notify", line, func)];
    let push = "sync_rust::Queue::push";
    let pop = "sync_rust::Queue::pop";
    let mut expected: Vec<(&str, u32, &str)> = vec![
        ("RMW", 18, "sync_rust::Stats::hit"),
        ("atomic-R", 19, "sync_rust::Stats::hit"),
        ("CAS", 21, "sync_rust::Stats::hit"),
        ("fence", 29, "sync_rust::Stats::finish"),
        ("atomic-W", 30, "sync_rust::Stats::finish"),
        ("CAS", 41, push),
        ("CAS", 48, pop),
        ("CAS", 50, pop),
        ("atomic-R", 50, pop),
        ("wait", 50, pop),
        ("atomic-R", 85, "sync_rust::main"),
        ("atomic-R", 86, "sync_rust::main"),
        // The channel: a decision before each call into it that can block
        // or retry (send, recv, the last sender's and the receiver's drop).
        ("sync-call", 74, "sync_rust::main::{{closure}}"),
        ("sync-call", 75, "sync_rust::main::{{closure}}"),
        ("sync-call", 78, "sync_rust::main"),
        ("sync-call", 87, "sync_rust::main"),
    ];
    expected.extend(unlock(43, push));
    expected.extend(unlock(44, push));
    expected.extend(unlock(50, pop));
    expected.extend(unlock(53, pop));
    check_rust("sync_rust.rs", &expected);
}

/// Every bundled target (buggy build) has the same synchronisation sites at
/// every level. But two_stage.c: from `-O1` on, clang merges the two
/// `pthread_mutex_unlock(&m1)` calls of `reader` (lines 55 and 59) into one
/// call, at the `if`'s line (54): the compiler keeps no line for either.
#[test]
fn bundled_targets_have_the_same_sync_sites_at_every_level() {
    let mut sources: Vec<String> = std::fs::read_dir(repo().join("targets"))
        .expect("targets/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| (n.ends_with(".c") || n.ends_with(".cpp")) && n != "two_stage.c")
        .collect();
    sources.sort();
    assert!(sources.len() >= 10, "{sources:?}");
    let reports = par_map(&sources, |name| {
        let source = format!("targets/{name}");
        let sets: Vec<(&str, BTreeSet<Key>)> = LEVELS
            .iter()
            .map(|&level| {
                let dir = tempdir();
                (level, sync_sites(&build_at(&source, level, dir.path())))
            })
            .collect();
        let (first_level, first) = &sets[0];
        let mut report = String::new();
        for (level, set) in &sets[1..] {
            if set != first {
                let missing: BTreeSet<&Key> = first.difference(set).collect();
                let extra: BTreeSet<&Key> = set.difference(first).collect();
                report.push_str(&format!(
                    "\n  {name} {level} against {first_level}:\n    missing:{}\n    extra:{}",
                    show(&missing),
                    show(&extra)
                ));
            }
        }
        report
    });
    let report: String = reports.concat();
    assert!(
        report.is_empty(),
        "sync sites differ between builds:{report}"
    );
}

/// Rust's standard mutex decides as wasi-libc's at every level: the fast
/// path's compare-exchange at each `lock()` takes the lock word (a thread
/// that would wait for a held one is left out), the futex calls under it
/// decide nothing, and both builds agree site for site.
#[test]
fn rust_mutex_decides_alike_at_every_level() {
    let source = "tests/programs/rust/abba.rs";
    let tables: Vec<BTreeSet<(u32, String, bool, bool)>> = RUST_LEVELS
        .iter()
        .map(|&level| {
            let module = rust_build_at(source, level);
            let out = heddle_out(&["sites", module.to_str().unwrap(), "--format", "json"]);
            assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
            let doc: Value = serde_json::from_slice(&out.stdout).expect("sites JSON");
            let set: BTreeSet<_> = doc["sites"]
                .as_array()
                .expect("a `sites` array")
                .iter()
                .filter(|s| s["user"].as_bool() == Some(true))
                .filter(|s| {
                    s["loc"]["file"]
                        .as_str()
                        .is_some_and(|f| f.ends_with("abba.rs"))
                })
                .filter_map(|s| {
                    let kind = sync_label(s)?;
                    Some((
                        s["loc"]["line"].as_u64().unwrap_or(0) as u32,
                        kind.to_string(),
                        s["takes_lock"].as_bool().unwrap_or(false),
                        s["private"].as_bool().unwrap_or(false),
                    ))
                })
                .collect();
            for line in [11, 12, 16, 17] {
                assert!(
                    set.contains(&(line, "CAS".to_string(), true, false)),
                    "opt-level={level}: no lock-taking CAS at abba.rs:{line}: {set:?}"
                );
            }
            assert!(
                set.iter()
                    .filter(|s| s.1 == "wait" || s.1 == "notify")
                    .all(|s| s.3),
                "opt-level={level}: a futex call of the mutex decides: {set:?}"
            );
            set
        })
        .collect();
    assert_eq!(tables[0], tables[1], "the builds disagree");
}
