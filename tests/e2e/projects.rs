//! Projects built by their own build systems (`tests/projects/`): a
//! Makefile with a static library, an autoconf `configure`, CMake with C++
//! threads, K&R C reading its parameters from a granted directory. Each builds with heddle's compiler as CC/CXX, heddle finds the
//! planted bug, the replay reproduces it, and the `-DFIXED` build passes.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Output;

/// A private copy of `tests/projects/NAME` (builds write into it).
fn copy_project(name: &str) -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let p = entry.unwrap().path();
            let dest = to.join(p.file_name().unwrap());
            if p.is_dir() {
                copy(&p, &dest);
            } else {
                std::fs::copy(&p, &dest).unwrap();
            }
        }
    }
    let dir = tempdir();
    copy(&repo().join("tests/projects").join(name), dir.path());
    // A checkout's root (as a clone has): file names in the modules are
    // relative to it, so every copy builds the same bytes and meets the
    // same schedules, whatever the temporary directory is called.
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    dir
}

/// Runs `script` with sh in `dir`; `$HEDDLE` is the heddle binary.
fn sh(dir: &Path, script: &str) -> Output {
    std::process::Command::new("sh")
        .arg("-ec")
        .arg(script)
        .current_dir(dir)
        .env("HEDDLE", env!("CARGO_BIN_EXE_heddle"))
        .output()
        .expect("run sh")
}

fn assert_ok(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({:?}):\n{}{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// Fuzzes `module` (built in `dir`) until the bug shows, replays the
/// replay file twice (the same output each time) and returns its verdict.
fn hunt(dir: &Path, module: &str, needle: &str) -> String {
    hunt_with(dir, module, &[], needle)
}

/// [`hunt`] with extra `heddle fuzz` options.
fn hunt_with(dir: &Path, module: &str, extra: &[&str], needle: &str) -> String {
    let out = dir.join("hunt");
    let o = heddle()
        .current_dir(dir)
        .args(["fuzz", module, "--runs", "2000", "--quiet", "--out"])
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    let stdout = text(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{module}: {stdout}{}",
        text(&o.stderr)
    );
    assert!(stdout.contains(needle), "{module}: {stdout}");
    // The failure's replay, not that of a run that only raced.
    let replay: PathBuf = failure_replays(&out)
        .into_iter()
        .next()
        .expect("a replay file");
    let replay_once = || {
        let o = heddle()
            .current_dir(dir)
            .arg("replay")
            .arg(&replay)
            .output()
            .unwrap();
        let s = text(&o.stdout);
        assert_eq!(o.status.code(), Some(1), "replay: {s}{}", text(&o.stderr));
        assert!(s.contains("replay reproduced the recorded run"), "{s}");
        s
    };
    assert_eq!(replay_once(), replay_once());
    stdout
}

/// The fixed build passes every run, with no data race reported.
fn passes(dir: &Path, module: &str) {
    passes_with(dir, module, &[])
}

/// [`passes`] with extra `heddle fuzz` options.
fn passes_with(dir: &Path, module: &str, extra: &[&str]) {
    let o = heddle()
        .current_dir(dir)
        .args([
            "fuzz",
            module,
            "--runs",
            "300",
            "--quiet",
            "--out",
            "fixed-out",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{module} (fixed): {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert!(
        !text(&o.stdout).contains("data race"),
        "{module} (fixed): {}",
        text(&o.stdout)
    );
}

#[test]
fn makefile_project_with_a_static_library() {
    toolchain();
    let p = copy_project("make-stats");
    let build = sh(p.path(), "eval \"$(\"$HEDDLE\" toolchain env)\"; make");
    assert_ok("make", &build);
    let log = text(&build.stdout);
    assert!(log.contains(" -c stats.c -o stats.o"), "{log}");
    assert!(log.contains("rcs libstats.a stats.o"), "{log}");
    assert!(p.path().join("libstats.a").exists());
    hunt(
        p.path(),
        "./stats_test",
        "stats_count(&totals) == THREADS * VALUES",
    );
    let fixed = sh(
        p.path(),
        "eval \"$(\"$HEDDLE\" toolchain env)\"; make clean; make CFLAGS=-DFIXED",
    );
    assert_ok("make (fixed)", &fixed);
    passes(p.path(), "./stats_test");
}

#[test]
fn autoconf_project_configures_for_wasm_and_builds() {
    toolchain();
    let p = copy_project("autoconf-pool");
    let build = sh(
        p.path(),
        "eval \"$(\"$HEDDLE\" toolchain env)\"; autoreconf; ./configure --host=wasm32-wasi; make",
    );
    assert_ok("autoreconf, configure, make", &build);
    let config = std::fs::read_to_string(p.path().join("config.h")).unwrap();
    for probe in ["HAVE_PTHREAD_H 1", "HAVE_SCHED_YIELD 1", "SIZEOF_LONG 4"] {
        assert!(config.contains(probe), "config.h lacks {probe}:\n{config}");
    }
    hunt(p.path(), "./pool", "runs[t] == 1");
    let fixed = sh(
        p.path(),
        "eval \"$(\"$HEDDLE\" toolchain env)\"; make clean; ./configure --host=wasm32-wasi CFLAGS=-DFIXED; make",
    );
    assert_ok("configure, make (fixed)", &fixed);
    passes(p.path(), "./pool");
}

#[test]
fn autoconf_213_runtime_with_dlsym_semaphores_and_rlimits() {
    // A configure.in of the autoconf 2.13 era, configured with a host
    // triple an old config.sub knows; the runtime finds its tasks with
    // dlopen(NULL)/dlsym, locks with a System V semaphore and sizes its
    // pool with getrlimit, linked with -ldl -lrt -lm from an archive.
    toolchain();
    let p = copy_project("autoconf213-rt");
    let build = sh(
        p.path(),
        "eval \"$(\"$HEDDLE\" toolchain env)\"; autoconf; ./configure --host=i686-pc-linux-gnu; make",
    );
    assert_ok("autoconf, configure, make", &build);
    let log = text(&build.stdout);
    for probe in [
        "checking for dlopen in -ldl... yes",
        "checking for semget... yes",
        "checking for getrlimit... yes",
    ] {
        assert!(log.contains(probe), "configure lacks `{probe}`:\n{log}");
    }
    hunt(p.path(), "./rttest", "done == 4");
    let fixed = sh(
        p.path(),
        "eval \"$(\"$HEDDLE\" toolchain env)\"; make clean; ./configure --host=i686-pc-linux-gnu CFLAGS=-DFIXED; make",
    );
    assert_ok("configure, make (fixed)", &fixed);
    passes(p.path(), "./rttest");
}

#[test]
fn project_file_targets_from_several_sources_and_from_a_build_command() {
    toolchain();
    let p = copy_project("make-stats");
    std::fs::write(
        p.path().join("heddle.toml"),
        r#"[[target]]
name = "linked"
sources = ["main.c", "stats.c"]
buggy = "assertion"
fixed = "pass"
hunt_seeds = 300

[[target]]
name = "made"
build = "make -B stats_test"
module = "stats_test"
buggy = "assertion"
fixed = "pass"
hunt_seeds = 300
"#,
    )
    .unwrap();
    let o = heddle()
        .current_dir(p.path())
        .args(["test", "heddle.toml", "--out", "test-out"])
        .output()
        .unwrap();
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}{}", text(&o.stderr));
    for check in ["linked", "made"] {
        assert!(
            stdout
                .lines()
                .filter(|l| l.contains(check) && l.contains("ok"))
                .count()
                >= 2,
            "{check}: buggy and fixed checks:\n{stdout}"
        );
    }
    // A build command that fails is one line naming it.
    std::fs::write(
        p.path().join("broken.toml"),
        "[[target]]\nname = \"broken\"\nbuild = \"make no-such-rule\"\nmodule = \"x\"\nbuggy = \"assertion\"\n",
    )
    .unwrap();
    let o = heddle()
        .current_dir(p.path())
        .args(["test", "broken.toml", "--out", "broken-out"])
        .output()
        .unwrap();
    let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert!(
        all.contains("build command `make no-such-rule` failed"),
        "{all}"
    );
    // A target needs exactly one form.
    std::fs::write(
        p.path().join("both.toml"),
        "[[target]]\nname = \"both\"\nsource = \"main.c\"\nsources = [\"stats.c\"]\nbuggy = \"assertion\"\n",
    )
    .unwrap();
    let o = heddle()
        .current_dir(p.path())
        .args(["test", "both.toml"])
        .output()
        .unwrap();
    assert_usage_error(
        &o,
        "target `both` needs exactly one of `source`, `sources`, or `build` with `module`",
    );
}
#[test]
fn cmake_cxx17_project_with_std_thread_mutex_condvar_and_iostream() {
    toolchain();
    let p = copy_project("cmake-ring");
    let build = sh(
        p.path(),
        "cmake -S . -B build -DCMAKE_TOOLCHAIN_FILE=\"$(\"$HEDDLE\" toolchain cmake)\"; cmake --build build",
    );
    assert_ok("cmake", &build);
    assert!(text(&build.stdout).contains("Found Threads: TRUE"));
    let stdout = hunt(
        p.path(),
        "build/ring_test.wasm",
        "ring.passes() == members * rounds",
    );
    assert!(stdout.contains("order "), "std::cout output: {stdout}");
    let fixed = sh(
        p.path(),
        "cmake -S . -B fixed -DCMAKE_TOOLCHAIN_FILE=\"$(\"$HEDDLE\" toolchain cmake)\" -DCMAKE_CXX_FLAGS=-DFIXED; cmake --build fixed",
    );
    assert_ok("cmake (fixed)", &fixed);
    passes(p.path(), "fixed/ring_test.wasm");
}

#[test]
fn kr_program_with_a_cast_worker_reads_its_parameters_from_a_dir_grant() {
    toolchain();
    let p = copy_project("kr-params");
    let build = sh(p.path(), "eval \"$(\"$HEDDLE\" toolchain env)\"; make");
    assert_ok("make", &build);
    // Without the grant the program says why, as natively.
    let o = heddle()
        .current_dir(p.path())
        .args(["run", "./slaves", "--show-output"])
        .output()
        .unwrap();
    assert!(
        text(&o.stdout).contains("/data/params.txt"),
        "{}",
        text(&o.stdout)
    );
    let stdout = hunt_with(
        p.path(),
        "./slaves",
        &["--dir", "params:/data"],
        "sum == (long)nslaves * units",
    );
    assert!(stdout.contains("data race on sum"), "{stdout}");
    let fixed = sh(
        p.path(),
        "eval \"$(\"$HEDDLE\" toolchain env)\"; make clean; make CFLAGS=-DFIXED",
    );
    assert_ok("make (fixed)", &fixed);
    passes_with(p.path(), "./slaves", &["--dir", "params:/data"]);
}

/// A makefile written for a Linux box: `gcc` and `ar` by name, `-rdynamic`,
/// `-Wl,--as-needed,-rpath,…,-z,relro,--hash-style=gnu`, `-ldl -lrt -lm
/// -lpthread`. With `heddle toolchain env --gnu-names` it builds unmodified:
/// the names are heddle's, the GNU linker options are dropped with one
/// note, the system libraries are empty archives. Its reference count
/// races into a use-after-free (or a double free); the fixed build, whose
/// workers write neighbouring bytes of one buffer, has no data race.
#[test]
fn makefile_that_hard_codes_gcc_and_gnu_linker_options() {
    toolchain();
    let p = copy_project("gcc-refbuf");
    let build = sh(
        p.path(),
        "eval \"$(\"$HEDDLE\" toolchain env --gnu-names)\"; make",
    );
    assert_ok("make", &build);
    let err = text(&build.stderr);
    assert_eq!(
        err.matches("heddle: note: ignoring linker options").count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("-Wl,--as-needed -Wl,-rpath,/usr/local/lib"),
        "{err}"
    );
    let verdict = hunt(p.path(), "./refbuf_test", "refbuf.c");
    assert!(
        verdict.contains("use-after-free") || verdict.contains("double-free"),
        "{verdict}"
    );
    let fixed = sh(
        p.path(),
        "eval \"$(\"$HEDDLE\" toolchain env --gnu-names)\"; make clean; make EXTRA=-DFIXED",
    );
    assert_ok("make (fixed)", &fixed);
    passes(p.path(), "./refbuf_test");
}

/// `-shared` is refused in one line that says what to build instead.
#[test]
fn shared_library_is_refused_with_what_to_do() {
    let dir = tempdir();
    let src = dir.path().join("lib.c");
    std::fs::write(&src, "int f(void) { return 1; }\n").unwrap();
    let o = heddle_out(&["cc", "-shared", "-o", "libf.so", src.to_str().unwrap()]);
    assert_usage_error(&o, "build the library as an archive");
}
