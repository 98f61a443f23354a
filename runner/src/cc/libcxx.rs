//! libc++ and libc++abi with threads, built once from Debian's LLVM 19
//! sources (apt flavour: Debian and Ubuntu).
//!
//! Debian's `libc++-19-dev-wasm32` is built without threads: it has no
//! `std::thread`/`std::mutex`, and its objects lack the `atomics` and
//! `bulk-memory` features, so even `std::cout` or an out-of-line
//! `std::string` member cannot be linked into a shared-memory module. heddle
//! therefore builds its own:
//!
//! 1. the sources ([`LlvmSources`], chosen by the system's plan): on Debian
//!    12, `apt-get source --download-only llvm-toolchain-19` with a private
//!    apt configuration (a `deb-src` line for bookworm on the mirror the
//!    machine already uses; the system's sources are never touched);
//!    elsewhere the same orig tarball from Debian's pool, checked against
//!    its SHA-256 ([`super::distro::LLVM_ORIG`]);
//! 2. only `cmake/ runtimes/ libcxx/ libcxxabi/ libunwind/ llvm/cmake/` are
//!    extracted from the orig tarball (without the test suites);
//! 3. CMake (`runtimes`, `LLVM_ENABLE_RUNTIMES=libunwind;libcxx;libcxxabi`)
//!    and ninja with clang-19 for `wasm32-wasip1-threads` against a private
//!    sysroot of the threads wasi-libc: static only, threads on (pthread
//!    API), exceptions on with `-fwasm-exceptions` (wasm exception handling,
//!    which heddle's instrumenter translates from clang's legacy encoding to
//!    the final one), libunwind's wasm part (`Unwind-wasm.c`: the personality
//!    call and `_Unwind_RaiseException` over the engine's `throw`) linked
//!    into `libc++abi.a` (and so into `libc++.a`, which carries libc++abi),
//!    and libc++abi's terminate handler printing the uncaught exception's
//!    type;
//! 4. headers and `libc++.a`, `libc++abi.a` are installed into
//!    `<cache>/toolchain/libcxx-19-<key>` (`include/c++/v1`, `lib/`), where
//!    `<key>` hashes [`FORMAT`], where the sources come from and the
//!    configuration, with a `STAMP` naming the sources' version. The
//!    sources and the build tree are deleted.
//!
//! The sysroot ([`super::bootstrap`]) links these in. The whole step takes
//! half a minute to two minutes on two cores.

use super::distro::LlvmSources;
use crate::paths;
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Bumped whenever the build below changes in a way the flags do not show.
pub const FORMAT: &str = "heddle-libcxx-3";
/// The Debian source package the sources come from.
pub const SOURCE_PACKAGE: &str = "llvm-toolchain-19";
const TRIPLE: &str = "wasm32-wasip1-threads";

/// What the build needs from the rest of the toolchain.
pub struct Inputs<'a> {
    /// The LLVM 19 installation (`/usr/lib/llvm-19`).
    pub llvm: &'a Path,
    /// The clang resource directory heddle assembled.
    pub resource_dir: &'a Path,
    /// The wasi-libc headers (`include/wasm32-wasi` of trixie's wasi-libc).
    pub libc_include: &'a Path,
    /// rustup's `self-contained` directory (threads `libc.a`, `crt1-*.o`).
    pub libc_lib: &'a Path,
    /// Where the sources come from.
    pub sources: &'a LlvmSources,
    /// The Debian mirror they are fetched from.
    pub mirror: &'a str,
}

/// Compiler flags for every libc++/libc++abi source, besides the sysroot.
const TARGET_FLAGS: &[&str] = &[
    "--target=wasm32-wasip1-threads",
    "-pthread",
    "-matomics",
    "-mbulk-memory",
    "-fwasm-exceptions",
];

/// The CMake cache definitions that decide what is built (paths aside).
const CONFIG: &[(&str, &str)] = &[
    ("CMAKE_BUILD_TYPE", "Release"),
    ("CMAKE_C_FLAGS_RELEASE", "-O2 -DNDEBUG"),
    ("CMAKE_CXX_FLAGS_RELEASE", "-O2 -DNDEBUG"),
    ("CMAKE_SYSTEM_NAME", "WASI"),
    ("CMAKE_SYSTEM_VERSION", "1"),
    ("CMAKE_SYSTEM_PROCESSOR", "wasm32"),
    ("CMAKE_C_COMPILER_WORKS", "ON"),
    ("CMAKE_CXX_COMPILER_WORKS", "ON"),
    ("CMAKE_POSITION_INDEPENDENT_CODE", "OFF"),
    ("CMAKE_INSTALL_INCLUDEDIR", "include"),
    ("LLVM_ENABLE_RUNTIMES", "libunwind;libcxx;libcxxabi"),
    ("LLVM_COMPILER_CHECKED", "ON"),
    ("LLVM_INCLUDE_TESTS", "OFF"),
    ("LLVM_INCLUDE_DOCS", "OFF"),
    ("UNIX", "ON"),
    ("LIBCXX_ENABLE_SHARED", "OFF"),
    ("LIBCXX_ENABLE_STATIC", "ON"),
    ("LIBCXX_ENABLE_THREADS", "ON"),
    ("LIBCXX_HAS_PTHREAD_API", "ON"),
    ("LIBCXX_HAS_EXTERNAL_THREAD_API", "OFF"),
    ("LIBCXX_HAS_WIN32_THREAD_API", "OFF"),
    ("LIBCXX_ENABLE_EXCEPTIONS", "ON"),
    ("LIBCXX_ENABLE_FILESYSTEM", "ON"),
    ("LIBCXX_ENABLE_ABI_LINKER_SCRIPT", "OFF"),
    ("LIBCXX_CXX_ABI", "libcxxabi"),
    ("LIBCXX_HAS_MUSL_LIBC", "ON"),
    ("LIBCXX_INCLUDE_TESTS", "OFF"),
    ("LIBCXX_INCLUDE_BENCHMARKS", "OFF"),
    ("LIBCXX_INCLUDE_DOCS", "OFF"),
    ("LIBCXXABI_ENABLE_SHARED", "OFF"),
    ("LIBCXXABI_ENABLE_STATIC", "ON"),
    ("LIBCXXABI_ENABLE_THREADS", "ON"),
    ("LIBCXXABI_HAS_PTHREAD_API", "ON"),
    ("LIBCXXABI_HAS_EXTERNAL_THREAD_API", "OFF"),
    ("LIBCXXABI_HAS_WIN32_THREAD_API", "OFF"),
    ("LIBCXXABI_ENABLE_EXCEPTIONS", "ON"),
    ("LIBCXXABI_SILENT_TERMINATE", "OFF"),
    ("LIBCXXABI_USE_LLVM_UNWINDER", "ON"),
    ("LIBCXXABI_ENABLE_STATIC_UNWINDER", "ON"),
    ("LIBCXXABI_STATICALLY_LINK_UNWINDER_IN_STATIC_LIBRARY", "ON"),
    ("LIBCXXABI_INCLUDE_TESTS", "OFF"),
    ("LIBUNWIND_ENABLE_SHARED", "OFF"),
    ("LIBUNWIND_ENABLE_STATIC", "ON"),
    ("LIBUNWIND_ENABLE_THREADS", "ON"),
    ("LIBUNWIND_HIDE_SYMBOLS", "ON"),
    ("LIBUNWIND_INCLUDE_TESTS", "OFF"),
    ("LIBUNWIND_INCLUDE_DOCS", "OFF"),
];

/// The archive members of libunwind's assembly, empty of wasm code.
const UNWIND_ASM_OBJECTS: &[&str] = &["UnwindRegistersRestore.S.o", "UnwindRegistersSave.S.o"];

/// Top-level directories of the LLVM source tree the runtimes build reads.
const SOURCE_DIRS: &[&str] = &[
    "cmake",
    "runtimes",
    "libcxx",
    "libcxxabi",
    "libunwind",
    "llvm/cmake",
];
/// Parts of those not needed for the libraries (most of the tarball's files).
const SOURCE_EXCLUDES: &[&str] = &[
    "libcxx/test",
    "libcxxabi/test",
    "libunwind/test",
    "libcxx/benchmarks",
];

/// What the key says of the sources (as it always has for bookworm's
/// `deb-src`, so that an existing build keeps its directory).
fn sources_key(sources: &LlvmSources) -> String {
    match sources {
        LlvmSources::DebianSuite(suite) => format!("{SOURCE_PACKAGE} {suite}"),
        LlvmSources::Pinned(f) => format!("{} sha256:{}", f.name(), f.sha256),
    }
}

/// The directory name for this configuration: `libcxx-19-<key>`.
pub fn dir_name(sources: &LlvmSources) -> String {
    let mut key = format!("{FORMAT}\n{}\n", sources_key(sources));
    for f in TARGET_FLAGS {
        key.push_str(f);
        key.push('\n');
    }
    for (k, v) in CONFIG {
        key.push_str(&format!("{k}={v}\n"));
    }
    format!("libcxx-19-{}", &paths::sha256_hex(key.as_bytes())[..12])
}

/// The install directory under `toolchain_dir`.
pub fn dir(toolchain_dir: &Path, sources: &LlvmSources) -> PathBuf {
    toolchain_dir.join(dir_name(sources))
}

/// Headers (`c++/v1`) of an install.
pub fn headers(dir: &Path) -> PathBuf {
    dir.join("include/c++/v1")
}

/// An archive (`libc++.a`, `libc++abi.a`) of an install.
pub fn lib(dir: &Path, name: &str) -> PathBuf {
    dir.join("lib").join(name)
}

/// The install at `dir`, when complete.
pub fn installed(dir: &Path) -> Option<PathBuf> {
    let complete = dir.join("STAMP").is_file()
        && lib(dir, "libc++.a").is_file()
        && lib(dir, "libc++abi.a").is_file()
        && headers(dir).join("atomic").is_file()
        && headers(dir).join("__config_site").is_file();
    complete.then(|| dir.to_path_buf())
}

/// Whether the libc++ whose headers are at `v1` has thread support.
pub fn has_threads(v1: &Path) -> bool {
    fs::read_to_string(v1.join("__config_site"))
        .map(|s| {
            s.contains("#define _LIBCPP_HAS_THREAD_API_PTHREAD")
                && !s.contains("#define _LIBCPP_HAS_NO_THREADS")
        })
        .unwrap_or(false)
}

/// One failing step: a one-line message with the last meaningful output line.
fn step_error(step: &str, output: &[u8], log: Option<&Path>) -> anyhow::Error {
    let text = String::from_utf8_lossy(output);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let line = lines
        .iter()
        .rev()
        .find(|l| l.contains("error") || l.contains("Error") || l.starts_with("FAILED"))
        .or(lines.last())
        .copied()
        .unwrap_or("(no output)");
    let log = log
        .map(|p| format!(" (full log: {})", p.display()))
        .unwrap_or_default();
    anyhow::anyhow!("building libc++ failed at {step}: {line}{log}")
}

/// Runs `cmd`; on failure, writes its output to `log` and returns the error.
/// On success, returns its stderr.
fn run_step(step: &str, cmd: &mut Command, log: &Path) -> Result<Vec<u8>> {
    let out = cmd
        .output()
        .map_err(|e| anyhow::anyhow!("building libc++ failed at {step}: cannot run it: {e}"))?;
    if out.status.success() {
        return Ok(out.stderr);
    }
    let mut all = out.stdout.clone();
    all.extend_from_slice(&out.stderr);
    let _ = fs::write(log, &all);
    // Compilers and ninja report on stdout, apt and cmake on stderr: prefer
    // stderr when it says something.
    let main = if String::from_utf8_lossy(&out.stderr).trim().is_empty() {
        &out.stdout
    } else {
        &out.stderr
    };
    Err(step_error(step, main, Some(log)))
}

/// `apt-get source --download-only` of [`SOURCE_PACKAGE`] from `suite` into
/// `download`, with a private apt configuration under `scratch`. Returns the
/// orig tarball(s) and what the stamp says of them.
fn fetch_from_suite(
    suite: &str,
    mirror: &str,
    scratch: &Path,
    download: &Path,
    log: &Path,
) -> Result<(Vec<PathBuf>, String)> {
    eprintln!(
        "heddle: fetching LLVM 19 sources (Debian {suite} source package {SOURCE_PACKAGE}, ~165 MB)"
    );
    let apt = scratch.join("apt");
    let lists = apt.join("lists");
    fs::create_dir_all(lists.join("partial"))?;
    fs::create_dir_all(apt.join("cache/archives/partial"))?;
    let sources = apt.join("sources.list");
    fs::write(&sources, format!("deb-src {mirror} {suite} main\n"))?;
    let opts = super::apt::private_apt_options(&sources, &lists, &apt.join("cache"));
    let step = "`apt-get update` (deb-src index)";
    let warnings = run_step(
        step,
        Command::new("apt-get")
            .args(&opts)
            .args(["-q", "update"])
            .current_dir(download),
        log,
    )?;
    // apt-get update exits 0 when the mirror cannot be reached, with a warning.
    if let Some(line) = String::from_utf8_lossy(&warnings)
        .lines()
        .find(|l| l.contains("Failed to fetch") || l.starts_with("E:"))
    {
        bail!(
            "building libc++ failed at {step}: {} (mirror {mirror}; set HEDDLE_DEBIAN_MIRROR to use another)",
            line.trim(),
        );
    }
    run_step(
        &format!("`apt-get source --download-only {SOURCE_PACKAGE}`"),
        Command::new("apt-get")
            .args(&opts)
            .args(["-q", "source", "--download-only", SOURCE_PACKAGE])
            .current_dir(download),
        log,
    )?;
    let mut origs: Vec<PathBuf> = fs::read_dir(download)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains(".orig") && n.contains(".tar."))
        })
        .collect();
    origs.sort();
    if origs.is_empty() {
        bail!(
            "building libc++ failed at the download: `apt-get source` left no .orig tarball in {}",
            download.display()
        );
    }
    let version = fs::read_dir(download)?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .find_map(|n| {
            n.strip_suffix(".dsc")
                .and_then(|s| s.strip_prefix(&format!("{SOURCE_PACKAGE}_")))
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".to_string());
    Ok((origs, format!("{SOURCE_PACKAGE} {version} ({suite})")))
}

/// Downloads the sources, builds and installs libc++/libc++abi into
/// [`dir`]`(toolchain_dir, inputs.sources)`. The caller holds the toolchain
/// lock.
pub fn build(toolchain_dir: &Path, inputs: &Inputs) -> Result<PathBuf> {
    let target = dir(toolchain_dir, inputs.sources);
    let name = dir_name(inputs.sources);
    let scratch = toolchain_dir.join("libcxx-build");
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch).with_context(|| format!("cannot create {}", scratch.display()))?;
    let log = scratch.join("failed-step.log");

    // 1. The sources.
    let t0 = Instant::now();
    let download = scratch.join("download");
    fs::create_dir_all(&download)?;
    let (origs, described) = match inputs.sources {
        LlvmSources::DebianSuite(suite) => {
            fetch_from_suite(suite, inputs.mirror, &scratch, &download, &log)?
        }
        LlvmSources::Pinned(f) => {
            eprintln!(
                "heddle: fetching LLVM 19 sources ({} from {}, ~165 MB)",
                f.name(),
                inputs.mirror
            );
            let orig = super::apt::fetch_pinned(inputs.mirror, f, &download)
                .context("building libc++ failed at the download")?;
            (vec![orig], f.name().to_string())
        }
    };
    let fetched = t0.elapsed();

    // 2. Only the directories the runtimes build reads.
    let t1 = Instant::now();
    eprintln!(
        "heddle: building libc++ with threads from LLVM 19 sources ({described}; one-time, ~2 min)"
    );
    let src = scratch.join("src");
    fs::create_dir_all(&src)?;
    for orig in &origs {
        let mut tar = Command::new("tar");
        tar.arg("-xf").arg(orig).arg("-C").arg(&src);
        tar.arg("--strip-components=1");
        for ex in SOURCE_EXCLUDES {
            tar.arg(format!("--exclude=*/{ex}"));
        }
        tar.args(["--wildcards", "--no-wildcards-match-slash"]);
        for d in SOURCE_DIRS {
            tar.arg(format!("*/{d}"));
        }
        // A component tarball may hold none of them: ignore "not found".
        let out = tar.output().map_err(|e| {
            anyhow::anyhow!("building libc++ failed at extracting the sources: cannot run tar: {e}")
        })?;
        if !out.status.success() && !String::from_utf8_lossy(&out.stderr).contains("Not found") {
            return Err(step_error(
                &format!("extracting {}", orig.display()),
                &out.stderr,
                None,
            ));
        }
    }
    for d in SOURCE_DIRS {
        if !src.join(d).is_dir() {
            bail!(
                "building libc++ failed at extracting the sources: `{d}` is not in the {SOURCE_PACKAGE} tarball(s)"
            );
        }
    }
    let _ = fs::remove_dir_all(&download);

    // 3. A private sysroot of the threads wasi-libc to compile against.
    let sysroot = scratch.join("sysroot");
    let inc = sysroot.join("include");
    let libdir = sysroot.join("lib").join(TRIPLE);
    fs::create_dir_all(&inc)?;
    fs::create_dir_all(&libdir)?;
    std::os::unix::fs::symlink(inputs.libc_include, inc.join(TRIPLE))?;
    for f in ["libc.a", "crt1-command.o", "crt1-reactor.o"] {
        std::os::unix::fs::symlink(inputs.libc_lib.join(f), libdir.join(f))?;
    }
    super::write_empty_libs(&libdir)?;
    // CMake 3.25 does not know the WASI platform.
    let modules = scratch.join("cmake-modules");
    fs::create_dir_all(modules.join("Platform"))?;
    fs::write(
        modules.join("Platform/WASI.cmake"),
        "set(WASI 1)\nset(CMAKE_EXECUTABLE_SUFFIX \".wasm\")\n",
    )?;

    // 4. Configure, build, install.
    let prefix = toolchain_dir.join(format!("{name}.tmp"));
    let _ = fs::remove_dir_all(&prefix);
    let build = scratch.join("build");
    fs::create_dir_all(&build)?;
    let mut flags: Vec<String> = TARGET_FLAGS.iter().map(|s| s.to_string()).collect();
    flags.push(format!("--sysroot={}", sysroot.display()));
    flags.push(format!("-resource-dir={}", inputs.resource_dir.display()));
    // The archives name no directory of this machine (`__FILE__` in
    // libc++abi's assertions): the same build anywhere gives the same bytes,
    // and so do the C++ modules linked with it.
    flags.push(format!(
        "-ffile-prefix-map={}=/heddle/libcxx-build",
        scratch.display()
    ));
    let flags = flags.join(" ");
    let tool = |name: &str| inputs.llvm.join("bin").join(name);
    let mut cmake = Command::new("cmake");
    cmake
        .current_dir(&build)
        .env_remove("CFLAGS")
        .env_remove("CXXFLAGS")
        .env_remove("LDFLAGS")
        .env_remove("CPPFLAGS")
        .arg("-G")
        .arg("Ninja")
        .arg(src.join("runtimes"))
        .arg(format!("-DCMAKE_MODULE_PATH={}", modules.display()))
        .arg(format!("-DCMAKE_C_COMPILER={}", tool("clang").display()))
        .arg(format!(
            "-DCMAKE_CXX_COMPILER={}",
            tool("clang++").display()
        ))
        .arg(format!("-DCMAKE_AR={}", tool("llvm-ar").display()))
        .arg(format!("-DCMAKE_RANLIB={}", tool("llvm-ranlib").display()))
        .arg(format!("-DCMAKE_C_FLAGS={flags}"))
        .arg(format!("-DCMAKE_CXX_FLAGS={flags}"))
        .arg(format!("-DCMAKE_INSTALL_PREFIX={}", prefix.display()));
    for (k, v) in CONFIG {
        cmake.arg(format!("-D{k}={v}"));
    }
    run_step("the CMake configure step", &mut cmake, &log)?;
    let jobs = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    run_step(
        "the ninja build",
        Command::new("ninja")
            .current_dir(&build)
            .arg(format!("-j{jobs}"))
            .args(["install-cxx", "install-cxxabi", "install-unwind"]),
        &log,
    )?;
    if installed_files_missing(&prefix) {
        bail!(
            "building libc++ failed at the install step: {} lacks lib/libc++.a, lib/libc++abi.a or include/c++/v1",
            prefix.display()
        );
    }
    if !has_threads(&headers(&prefix)) {
        bail!(
            "building libc++ failed: the installed __config_site does not enable the pthread API"
        );
    }
    // libunwind's register save/restore assembly has nothing for wasm (its
    // unwinding is the engine's): the objects are not wasm, and wasm-ld
    // would warn about them at every link.
    for archive in ["libc++.a", "libc++abi.a"] {
        run_step(
            &format!("removing libunwind's assembly objects from {archive}"),
            Command::new(tool("llvm-ar"))
                .arg("d")
                .arg(lib(&prefix, archive))
                .args(UNWIND_ASM_OBJECTS),
            &log,
        )?;
    }
    // Nothing else in the install is used.
    for extra in [
        "share",
        "lib/libc++experimental.a",
        "lib/libc++.modules.json",
    ] {
        let p = prefix.join(extra);
        let _ = fs::remove_dir_all(&p);
        let _ = fs::remove_file(&p);
    }
    // The stamp is part of the toolchain's identity: what was built, not
    // how long it took.
    fs::write(
        prefix.join("STAMP"),
        format!("{FORMAT}\nsource {described}\n"),
    )?;
    eprintln!(
        "heddle: libc++ fetched in {:.0} s, built in {:.0} s",
        fetched.as_secs_f64(),
        t1.elapsed().as_secs_f64()
    );
    let _ = fs::remove_dir_all(&target);
    fs::rename(&prefix, &target)
        .with_context(|| format!("cannot move the libc++ install to {}", target.display()))?;
    let _ = fs::remove_dir_all(&scratch);
    Ok(target)
}

fn installed_files_missing(prefix: &Path) -> bool {
    !(lib(prefix, "libc++.a").is_file()
        && lib(prefix, "libc++abi.a").is_file()
        && headers(prefix).join("atomic").is_file()
        && headers(prefix).join("__config_site").is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_name_is_stable_and_keyed() {
        let bookworm = LlvmSources::DebianSuite("bookworm");
        let a = dir_name(&bookworm);
        assert!(a.starts_with("libcxx-19-") && a.len() == "libcxx-19-".len() + 12);
        assert_eq!(a, dir_name(&bookworm));
        // Pinned: a change of the key rebuilds every install (the last one
        // turned exceptions and libunwind on).
        assert_eq!(a, "libcxx-19-17ac800ad630");
        let pinned = dir_name(&LlvmSources::Pinned(super::super::distro::LLVM_ORIG));
        assert!(pinned.starts_with("libcxx-19-") && pinned != a);
    }

    #[test]
    fn step_error_prefers_an_error_line() {
        let out = b"[1/2] CXX foo.o\nFAILED: foo.o\nfoo.cpp:1: error: bad\nninja: build stopped\n";
        let e = step_error("the ninja build", out, None).to_string();
        assert_eq!(
            e,
            "building libc++ failed at the ninja build: foo.cpp:1: error: bad"
        );
        let e = step_error("x", b"", None).to_string();
        assert!(e.ends_with("(no output)"), "{e}");
    }

    #[test]
    fn threads_are_read_from_config_site() {
        let d = tempfile::tempdir().unwrap();
        assert!(!has_threads(d.path()));
        fs::write(
            d.path().join("__config_site"),
            "#define _LIBCPP_HAS_NO_THREADS\n",
        )
        .unwrap();
        assert!(!has_threads(d.path()));
        fs::write(
            d.path().join("__config_site"),
            "/* #undef _LIBCPP_HAS_NO_THREADS */\n#define _LIBCPP_HAS_THREAD_API_PTHREAD\n",
        )
        .unwrap();
        assert!(has_threads(d.path()));
    }
}
