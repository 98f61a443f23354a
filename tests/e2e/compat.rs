//! Native-compatible C: function-pointer casts and calls with another
//! signature behave as on native targets, files are read from `--dir`
//! grants, and POSIX calls the sandbox cannot serve build, fail with ENOSYS
//! and name themselves.

use crate::common::*;
use heddle::cc::compile::CcRequest;
use heddle::instrument::{self, Config};
use std::path::{Path, PathBuf};

/// Links `args` into `out` as `heddle cc` does: with signature-mismatch
/// stubs kept for their adapters (linking again to keep a definition that
/// wasm-ld dropped), and checks that every stub can be adapted.
fn link(args: &[&str], out: &Path) -> Vec<u8> {
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.extend(["-o".to_string(), path_str(out).to_string()]);
    let req = CcRequest {
        args: all,
        root: Some(repo()),
        ..CcRequest::default()
    };
    heddle::cc::compile(toolchain(), &req).expect("link");
    let bytes = std::fs::read(out).expect("linked module");
    assert!(
        instrument::stub_keep_flags(&bytes).unwrap().is_empty(),
        "every stub's definition is kept"
    );
    instrument::adaptable_stubs(&bytes).expect("adaptable stubs");
    bytes
}

fn kr_module(dir: &Path, fixed: bool) -> (PathBuf, Vec<u8>) {
    let out = dir.join(if fixed { "kr_fixed.wasm" } else { "kr.wasm" });
    let main = prog("tc_kr_main.c");
    let util = prog("tc_kr_util.c");
    let mut args = vec![main.as_str(), util.as_str()];
    if fixed {
        args.push("-DFIXED");
    }
    let bytes = link(&args, &out);
    (out, bytes)
}

#[test]
fn kr_casts_and_argument_count_mismatches_run_as_natively() {
    let dir = tempdir();
    let (fixed, bytes) = kr_module(dir.path(), true);
    let names = heddle::modinfo::ModuleInfo::parse(&bytes)
        .unwrap()
        .trap_stubs();
    for stub in ["tally", "scaled", "report"] {
        assert!(
            names
                .iter()
                .any(|n| *n == format!("signature_mismatch:{stub}")),
            "the calls of {stub} link to a stub: {names:?}"
        );
    }
    instrument::adaptable_stubs(&bytes).expect("the stubs adapt");

    let out = heddle_out(&["run", path_str(&fixed), "--show-output"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    assert!(stdout.starts_with("verdict: pass"), "{stdout}");
    assert!(
        stdout.contains("slot 4 three 4 scaled 5 report 0 hits 2") && stdout.contains("report 7"),
        "start routine without parameters, missing argument zero, extra one dropped, missing result zero:\n{stdout}"
    );
    let camp = tempdir();
    let out = heddle_out(&[
        "fuzz",
        path_str(&fixed),
        "--runs",
        "30",
        "--out",
        path_str(camp.path()),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
}

#[test]
fn kr_planted_race_is_found_and_replays() {
    let dir = tempdir();
    let (buggy, _) = kr_module(dir.path(), false);
    let camp = tempdir();
    let out = heddle_out(&[
        "fuzz",
        path_str(&buggy),
        "--runs",
        "200",
        "--out",
        path_str(camp.path()),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}", all_output(&out));
    assert!(
        !stdout.contains("indirect call type mismatch") && !stdout.contains("unreachable"),
        "{stdout}"
    );
    let path = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: heddle replay "))
        .unwrap_or_else(|| panic!("no replay file:\n{stdout}"));
    let replayed = heddle_out(&["replay", path]);
    assert!(
        text(&replayed.stdout).contains("replay reproduced"),
        "{}",
        all_output(&replayed)
    );
    // And once more: the same bytes, the same verdict.
    let again = heddle_out(&["replay", path]);
    assert_eq!(text(&again.stdout), text(&replayed.stdout));
}

#[test]
fn signature_mismatch_stub_calls_the_definition() {
    let dir = tempdir();
    let out_path = dir.path().join("mismatch.wasm");
    let def = prog("tc_sigmismatch_def.c");
    let user = prog("tc_sigmismatch_use.c");
    let bytes = link(&[&def, &user], &out_path);
    instrument::adaptable_stubs(&bytes).expect("int tc_scale(void) adapts to tc_scale(int)");
    let out = heddle_out(&["run", path_str(&out_path), "--show-output"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "tc_scale() reaches tc_scale(int) with x = 0:\n{}",
        all_output(&out)
    );
}

#[test]
fn instrumenting_with_adapters_is_deterministic() {
    let dir = tempdir();
    let (_, bytes) = kr_module(dir.path(), false);
    let cfg = Config::default();
    let a = instrument::instrument(&bytes, &cfg).unwrap();
    let b = instrument::instrument(&bytes, &cfg).unwrap();
    assert!(a.module == b.module, "two instrumentations differ");
    assert_eq!(
        serde_json::to_string(&a.sites).unwrap(),
        serde_json::to_string(&b.sites).unwrap()
    );
    // The adapters exist, are named, and added no site.
    let adapters: Vec<_> = a
        .sites
        .funcs
        .iter()
        .filter(|f| f.name.starts_with("heddle_cast_adapter:"))
        .collect();
    assert!(
        adapters
            .iter()
            .any(|f| f.name == "heddle_cast_adapter:worker as (i32) -> i32"),
        "{:?}",
        adapters.iter().map(|f| &f.name).collect::<Vec<_>>()
    );
    let adapter_indices: Vec<u32> = adapters.iter().map(|f| f.index).collect();
    assert!(a
        .sites
        .sites
        .iter()
        .all(|s| !adapter_indices.contains(&s.func)));
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&a.module)
        .expect("instrumented module validates");
}

#[test]
fn fopen_reads_parameters_from_a_dir_grant() {
    let src = prog("tc_params.c");
    let dir = tempdir();
    let wasm = dir.path().join("params.wasm");
    let out = heddle_out(&["cc", &src, "-o", path_str(&wasm)]);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    let data = tempdir();
    std::fs::write(data.path().join("params.txt"), "threads 3 rounds 4\n").unwrap();
    let grant = format!("{}:/data", path_str(data.path()));
    let out = heddle_out(&[
        "run",
        path_str(&wasm),
        "--dir",
        &grant,
        "--show-output",
        "--",
        "/data/params.txt",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    assert!(
        stdout.contains("threads 3 rounds 4 total 12 size 19"),
        "{stdout}"
    );
    // A host directory granted under its own name.
    let own = format!("{}/params.txt", path_str(data.path()));
    let out = heddle_out(&[
        "run",
        path_str(&wasm),
        "--dir",
        path_str(data.path()),
        "--show-output",
        "--",
        &own,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    // Without the grant the file is not there, and the program says so.
    let out = heddle_out(&[
        "run",
        path_str(&wasm),
        "--show-output",
        "--",
        "/data/params.txt",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", all_output(&out));
    assert!(text(&out.stdout).contains("stat: "), "{}", all_output(&out));
    // Every fuzzed run gets the grant.
    let camp = tempdir();
    let out = heddle_out(&[
        "fuzz",
        path_str(&wasm),
        "--dir",
        &grant,
        "--runs",
        "20",
        "--out",
        path_str(camp.path()),
        "--",
        "/data/params.txt",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
}

#[test]
fn posix_calls_the_sandbox_lacks_build_and_fail_with_enosys_by_name() {
    let src = prog("tc_posix_stubs.c");
    let out = heddle_out(&["run", &src, "--show-output"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    for line in [
        "sigmask ok",
        // A handler is installed (signals are delivered: tests/e2e/signals.rs).
        "sigaction ign 0 handler 0 ",
        "getaddrinfo EAI_SYSTEM errno Function not implemented",
        "socket -1 Function not implemented",
        "dlopen null: libplugin.so: cannot load a shared object: a heddle program is one static wasm module",
    ] {
        assert!(stdout.contains(line), "missing `{line}`:\n{stdout}");
    }
    assert!(!stdout.contains("heddle: sigaction"), "{stdout}");
    for call in ["getaddrinfo", "socket", "dlopen"] {
        let line = format!("heddle: {call} is not supported in the sandbox (ENOSYS)");
        assert_eq!(
            stdout.matches(&line).count(),
            1,
            "the run's stderr names `{call}` once:\n{stdout}"
        );
    }
    // The C++ spelling of the same headers compiles too.
    let dir = tempdir();
    let cpp = dir.path().join("posix.cpp");
    std::fs::write(
        &cpp,
        "#include <csignal>\n#include <netdb.h>\n#include <sys/socket.h>\n#include <dlfcn.h>\n\
         int main() { sigset_t s; sigfillset(&s); pthread_sigmask(SIG_BLOCK, &s, nullptr);\n\
         addrinfo *r = nullptr; return getaddrinfo(\"h\", nullptr, nullptr, &r) == EAI_SYSTEM && !dlopen(\"x\", RTLD_NOW) && socket(AF_INET, SOCK_STREAM, 0) == -1 ? 0 : 1; }\n",
    )
    .unwrap();
    let wasm = dir.path().join("posix.wasm");
    let out = heddle_out(&["cc", path_str(&cpp), "-o", path_str(&wasm)]);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    let out = heddle_out(&["run", path_str(&wasm)]);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
}

#[test]
fn a_mismatched_call_to_an_aliased_libc_function_adapts() {
    // autoconf's link probe: `char pthread_create(); … pthread_create();`.
    // wasi-libc defines it as an alias of `__pthread_create`, so the
    // adapter finds the definition through the export the link keeps.
    let dir = tempdir();
    let src = dir.path().join("probe.c");
    std::fs::write(
        &src,
        "char pthread_create();\nint main(void) { return pthread_create() == 99; }\n",
    )
    .unwrap();
    let out = dir.path().join("probe.wasm");
    let bytes = link(&[path_str(&src)], &out);
    let program = heddle::runtime::Program::new(&bytes, &Default::default());
    assert!(program.is_ok(), "{:?}", program.err());
}

#[test]
fn a_granted_directory_is_the_same_for_every_run_and_every_replay() {
    // Worker threads write a journal into the granted directory; the
    // program expects the directory as granted, so a run that saw another
    // run's files would fail.
    let src = prog("log_workers.c");
    let dir = tempdir();
    let wasm = dir.path().join("log.wasm");
    let out = heddle_out(&["cc", &src, "-o", path_str(&wasm)]);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    let data = tempdir();
    std::fs::write(data.path().join("input.txt"), "4\n").unwrap();
    let grant = format!("{}:/data", path_str(data.path()));
    let listing = |p: &std::path::Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    fuzz_expecting(
        &[path_str(&wasm), "--dir", &grant, "--runs", "200", "-j", "2"],
        0,
    );
    // The host directory is as it was.
    assert_eq!(listing(data.path()), ["input.txt"]);
    assert_eq!(
        std::fs::read(data.path().join("input.txt")).unwrap(),
        b"4\n"
    );
    // The racy variant fails, leaving its files in its own run only; its
    // replay reproduces every time and the host directory stays as granted.
    let args = [
        path_str(&wasm),
        "--dir",
        &grant,
        "--runs",
        "300",
        "-j",
        "2",
        "--",
        "racy",
    ];
    let (_camp, stdout) = fuzz_expecting(&args, 1);
    replays_the_same_twice(&printed_replay(&stdout), "records_written == lines");
    assert_eq!(listing(data.path()), ["input.txt"]);
}

#[test]
fn posix_corners_answer_fixed_values() {
    // dlopen(NULL)/dlsym, the user and group, resource limits, waitpid,
    // System V semaphores, sendfile, mmap and the socket constants, linked
    // with the libraries GNU builds and wasi-libc's headers name.
    let src = prog("posix_corners.c");
    let dir = tempdir();
    let wasm = dir.path().join("corners.wasm");
    let out = heddle_out(&[
        "cc",
        &src,
        "-o",
        path_str(&wasm),
        "-ldl",
        "-lrt",
        "-lm",
        "-lwasi-emulated-mman",
        "-lwasi-emulated-signal",
        "-lwasi-emulated-process-clocks",
        "-lwasi-emulated-getpid",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    let data = tempdir();
    let grant = format!("{}:/data", path_str(data.path()));
    let out = heddle_out(&["run", path_str(&wasm), "--dir", &grant, "--show-output"]);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    assert!(
        text(&out.stdout).contains("posix corners: ok"),
        "{}",
        all_output(&out)
    );
    // The semaphores synchronise under every schedule.
    let camp = tempdir();
    let out = heddle_out(&[
        "fuzz",
        path_str(&wasm),
        "--dir",
        &grant,
        "--runs",
        "30",
        "--out",
        path_str(camp.path()),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    // The same headers in C++.
    let cpp = dir.path().join("corners.cpp");
    std::fs::write(
        &cpp,
        "#include <dlfcn.h>\n#include <grp.h>\n#include <pwd.h>\n#include <sys/mman.h>\n\
         #include <sys/resource.h>\n#include <sys/sem.h>\n#include <sys/sendfile.h>\n\
         #include <sys/wait.h>\n#include <unistd.h>\n#include <locale>\n\
         extern \"C\" int entry(int x) { return x; }\n\
         int main() { rlimit r; getrlimit(RLIMIT_NOFILE, &r); struct passwd *p = getpwuid(getuid());\n\
         void *self = dlopen(nullptr, RTLD_NOW); int (*e)(int) = (int (*)(int))dlsym(self, \"entry\");\n\
         return r.rlim_cur == 1024 && p && getgrgid(getgid()) && waitpid(-1, nullptr, 0) == -1 && e && e(3) == 3 ? 0 : 1; }\n",
    )
    .unwrap();
    let cwasm = dir.path().join("corners_cpp.wasm");
    let out = heddle_out(&["c++", path_str(&cpp), "-o", path_str(&cwasm)]);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    let out = heddle_out(&["run", path_str(&cwasm)]);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
}
