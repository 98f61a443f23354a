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

/// The sh script that configures with heddle's CMake toolchain file into
/// `dir` (with `flags`) and builds.
fn cmake(dir: &str, flags: &str) -> String {
    format!(
        "cmake -S . -B {dir} -DCMAKE_TOOLCHAIN_FILE=\"$(\"$HEDDLE\" toolchain cmake)\" {flags}; cmake --build {dir}"
    )
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

/// A C++ library built with CMake whose tests throw on the pool's worker
/// threads and catch in the caller through `std::exception_ptr`
/// (`std::out_of_range` from `vector::at`, `std::invalid_argument` from
/// `std::stoi`, its own exception type, a lock released as a task
/// unwinds). ctest runs both tests through the toolchain file's emulator
/// (`heddle-run`, one run each); the batch test's failure count is a lost
/// update when two tasks fail at once, found by `heddle fuzz`.
#[test]
fn cmake_cxx_library_whose_tests_throw_across_threads() {
    toolchain();
    let p = copy_project("cmake-jobs");
    let build = sh(p.path(), &cmake("build", ""));
    assert_ok("cmake", &build);
    let ctest = sh(p.path(), "cd build && ctest --output-on-failure");
    assert_ok("ctest", &ctest);
    let log = text(&ctest.stdout);
    assert!(
        log.contains("100% tests passed, 0 tests failed out of 2"),
        "{log}"
    );
    // The emulator passes the program's output and exit code through.
    let o = sh(
        p.path(),
        "\"$(dirname \"$(\"$HEDDLE\" toolchain cmake)\")/heddle-run\" build/errors_test.wasm",
    );
    assert_ok("heddle-run", &o);
    assert_eq!(
        text(&o.stdout).lines().last(),
        Some("errors_test: ok"),
        "{}",
        text(&o.stdout)
    );
    let stdout = hunt(p.path(), "build/batch_test.wasm", "batch_test.cpp");
    assert!(
        stdout.contains("CHECK(failed == 3) failed") || stdout.contains("use-after-free"),
        "{stdout}"
    );
    assert!(stdout.contains("jobs::Batch::record"), "{stdout}");
    let fixed = sh(p.path(), &cmake("fixed", "-DCMAKE_CXX_FLAGS=-DFIXED"));
    assert_ok("cmake (fixed)", &fixed);
    passes(p.path(), "fixed/batch_test.wasm");
    passes(p.path(), "fixed/errors_test.wasm");
}

/// A makefile project whose worker threads recover from parse errors with
/// `longjmp` out of a recursive parser back to their `setjmp`; the error
/// log the recovery path appends to has no lock. `make check` runs the
/// test through `$HEDDLE_RUN`.
#[test]
fn makefile_project_recovering_with_longjmp_in_workers() {
    toolchain();
    let p = copy_project("make-recover");
    assert_ok(
        "make",
        &sh(p.path(), "eval \"$(\"$HEDDLE\" toolchain env)\"; make"),
    );
    // `make check` runs the test once under heddle: one schedule, which
    // either passes or already shows the planted bug (134, an abort).
    let check = sh(
        p.path(),
        "eval \"$(\"$HEDDLE\" toolchain env)\"; make check TEST_RUNNER=\"$HEDDLE_RUN\"",
    );
    let (out, err) = (text(&check.stdout), text(&check.stderr));
    assert!(
        (check.status.success() && out.contains("parsed 9, total 55, 3 errors"))
            || (err.contains("every bad record is logged") && err.contains("Error 134")),
        "make check ({:?}):\n{out}{err}",
        check.status.code()
    );
    let stdout = hunt(p.path(), "./parse_test", "every bad record is logged");
    assert!(stdout.contains("data race on log_"), "{stdout}");
    let fixed = sh(
        p.path(),
        "eval \"$(\"$HEDDLE\" toolchain env)\"; make clean; make EXTRA=-DFIXED",
    );
    assert_ok("make (fixed)", &fixed);
    passes(p.path(), "./parse_test");
}

/// A C thread pool (CMake) that pauses its workers with
/// `pthread_kill(SIGUSR1)` and a handler that holds them until resumed,
/// and promises that no job is half done while paused. The promise breaks
/// only when the signal lands between a transfer's two updates: the
/// fixed library blocks SIGUSR1 while a job runs, and its ctest passes
/// through the emulator.
#[test]
fn cmake_thread_pool_paused_with_pthread_kill() {
    toolchain();
    let p = copy_project("cmake-thpool");
    assert_ok("cmake", &sh(p.path(), &cmake("build", "")));
    let stdout = hunt_with(
        p.path(),
        "build/test_pause.wasm",
        &["--", "2", "16"],
        "money created or lost",
    );
    assert!(stdout.contains("exit code 1 (expected 0)"), "{stdout}");
    assert_ok(
        "cmake (fixed)",
        &sh(p.path(), &cmake("fixed", "-DCMAKE_C_FLAGS=-DFIXED")),
    );
    let ctest = sh(p.path(), "cd fixed && ctest --output-on-failure");
    assert_ok("ctest (fixed)", &ctest);
    passes_with(p.path(), "fixed/test_pause.wasm", &["--", "2", "16"]);
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

/// `heddle run --as-program` (the `heddle-run` emulator of build systems)
/// behaves as the program: its output unframed, its exit code; a trap is
/// 134 with heddle's verdict on stderr, a deadlock 1.
#[test]
fn as_program_passes_output_and_exit_code_through() {
    toolchain();
    let dir = tempdir();
    std::fs::write(
        dir.path().join("p.c"),
        r#"#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
int main(int argc, char **argv) {
    printf("args %d %s\n", argc, argc > 1 ? argv[1] : "-");
    fprintf(stderr, "to stderr\n");
    if (argc > 1 && !strcmp(argv[1], "abort")) abort();
    if (argc > 1 && !strcmp(argv[1], "lock")) { pthread_mutex_lock(&m); pthread_mutex_lock(&m); }
    return argc > 1 ? atoi(argv[1]) : 0;
}
"#,
    )
    .unwrap();
    let cc = heddle()
        .current_dir(dir.path())
        .args(["cc", "p.c", "-o", "p.wasm"])
        .output()
        .unwrap();
    assert_ok("heddle cc", &cc);
    let run = |arg: &str| {
        heddle()
            .current_dir(dir.path())
            .args(["run", "--as-program", "p.wasm", "--", arg])
            .output()
            .unwrap()
    };
    let o = run("3");
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(text(&o.stdout), "args 2 3\n");
    assert_eq!(text(&o.stderr), "to stderr\n");
    let o = run("0");
    assert_eq!(o.status.code(), Some(0));
    let o = run("abort");
    assert_eq!(o.status.code(), Some(134));
    assert!(
        text(&o.stderr).starts_with("to stderr\nheddle: trap (abort)"),
        "{}",
        text(&o.stderr)
    );
    let o = run("lock");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("heddle: deadlock"),
        "{}",
        text(&o.stderr)
    );
    // A build system's emulator cannot also ask for heddle's report.
    let o = heddle()
        .current_dir(dir.path())
        .args(["run", "--as-program", "--trace", "p.wasm"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}

/// CMake's run checks (`check_c_source_runs`, `test_big_endian`) work
/// across the cross compile: the toolchain file names heddle's emulator.
/// ctest runs tests declared with either `add_test` signature through it,
/// with the program's exit code.
#[test]
fn cmake_run_checks_use_the_toolchain_files_emulator() {
    toolchain();
    let dir = tempdir();
    std::fs::write(
        dir.path().join("CMakeLists.txt"),
        r#"cmake_minimum_required(VERSION 3.16)
project(probe C)
include(CheckCSourceRuns)
check_c_source_runs("int main(void) { return sizeof(long) == 4 ? 0 : 1; }" LONG_IS_32_BITS)
check_c_source_runs("int main(void) { return 1; }" ALWAYS_FAILS)
include(TestBigEndian)
test_big_endian(BIG_ENDIAN)
message(STATUS "probes: ${LONG_IS_32_BITS}/${ALWAYS_FAILS}/${BIG_ENDIAN}")
enable_testing()
add_executable(prog prog.c)
add_test(NAME new_style COMMAND prog 0)
# The old signature names the program by its file name.
add_test(old_style prog 0)
add_test(old_style_failing prog 3)
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("prog.c"),
        "#include <stdlib.h>\nint main(int c, char **v) { return c > 1 ? atoi(v[1]) : 9; }\n",
    )
    .unwrap();
    let o = sh(dir.path(), &cmake("b", ""));
    assert_ok("cmake", &o);
    assert!(
        text(&o.stdout).contains("-- probes: 1//0"),
        "{}",
        text(&o.stdout)
    );
    let o = sh(dir.path(), "cd b && ctest --output-on-failure || true");
    let log = text(&o.stdout);
    assert!(
        log.contains("67% tests passed, 1 tests failed out of 3"),
        "{log}"
    );
    assert!(log.contains("old_style_failing (Failed)"), "{log}");
}
