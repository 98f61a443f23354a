//! Finding and installing toolchain components.
//!
//! Debian flavour, step by step (each idempotent, each skipped when its result
//! is already present):
//!
//! 1. apt packages `clang-19 llvm-19 lld-19 libclang-rt-19-dev-wasm32 cmake
//!    ninja-build` (as root, or via `sudo -n`);
//! 2. `rustup target add wasm32-wasip1-threads`, whose `self-contained/`
//!    directory holds wasi-libc built with `THREAD_MODEL=posix`;
//! 3. Debian trixie's `wasi-libc` package (architecture `all`) for headers
//!    that declare the pthread API, fetched with a private apt configuration
//!    that never touches the system's sources (the mirror is the one the
//!    machine already uses);
//! 4. a clang resource directory whose
//!    `lib/wasm32-unknown-wasip1-threads/libclang_rt.builtins.a` is the
//!    compiler-rt builtins archive and whose `include` is clang's own;
//! 5. libc++ and libc++abi **with threads** (`std::thread`, `std::mutex`,
//!    `std::condition_variable`, and objects built with `atomics` and
//!    `bulk-memory` so that `std::cout`/`std::string` link into a
//!    shared-memory module), built once from the LLVM 19 sources of Debian's
//!    `llvm-toolchain-19` source package into `<cache>/toolchain/libcxx-19-<key>`
//!    ([`super::libcxx`]; one to two minutes on two cores). Debian's
//!    `libc++-19-dev-wasm32` is built without threads and is not used;
//! 6. a sysroot (`include/wasm32-wasip1-threads` from step 3 with `c++/v1`
//!    from step 5, `lib/wasm32-wasip1-threads` from step 2 and 5, plus empty
//!    `libpthread.a libm.a librt.a`);
//! 7. the guest SDK compatibility library ([`super::sdk`]).

use super::{libcxx, sdk, Component, Flavor, Toolchain};
use crate::paths;
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const LLVM: &str = "/usr/lib/llvm-19";
const APT_PACKAGES: &[&str] = &[
    "clang-19",
    "llvm-19",
    "lld-19",
    "libclang-rt-19-dev-wasm32",
    // To build libc++ with threads (super::libcxx).
    "cmake",
    "ninja-build",
];
/// Bumped whenever the sysroot layout below changes.
const SYSROOT_FORMAT: &str = "heddle-sysroot-4";
const TRIPLE: &str = "wasm32-wasip1-threads";
const RUST_TARGET_FIX: &str =
    "run `rustup target add wasm32-wasip1-threads` (or `heddle toolchain install`)";

fn llvm(rel: &str) -> PathBuf {
    Path::new(LLVM).join(rel)
}

fn builtins_archive() -> PathBuf {
    llvm("lib/clang/19/lib/wasi/libclang_rt.builtins-wasm32.a")
}

fn clang_include() -> PathBuf {
    llvm("lib/clang/19/include")
}

fn toolchain_dir() -> PathBuf {
    paths::cache_root().join("toolchain")
}

fn headers_dir() -> PathBuf {
    toolchain_dir().join("wasi-libc")
}

fn trixie_include() -> PathBuf {
    headers_dir().join("usr/include/wasm32-wasi")
}

fn sysroot_dir() -> PathBuf {
    toolchain_dir().join("sysroot")
}

fn resource_dir() -> PathBuf {
    toolchain_dir().join("resource")
}

/// Where heddle's threads build of libc++ is installed.
fn libcxx_dir() -> PathBuf {
    libcxx::dir(&toolchain_dir())
}

const LIBCXX_FIX: &str = "run `heddle toolchain install` (builds libc++ with threads from Debian's LLVM 19 sources once, ~2 min)";

/// rustup's self-contained directory for the threads target, if rustc is
/// found (whether or not the target is installed). Asked of rustc once per
/// process: every compile checks the toolchain, and a build system runs
/// the compiler driver once per file.
fn rust_self_contained() -> Option<PathBuf> {
    static DIR: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let out = Command::new("rustc")
            .arg("--print")
            .arg("sysroot")
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let root = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Some(Path::new(&root).join("lib/rustlib/wasm32-wasip1-threads/lib/self-contained"))
    })
    .clone()
}

fn present(path: PathBuf) -> Option<PathBuf> {
    path.exists().then_some(path)
}

fn apt_fix(pkg: &str) -> String {
    format!("install it with `apt-get install {pkg}` (or run `heddle toolchain install`)")
}

/// What the current sysroot stamp must say for the inputs found now.
fn expected_stamp() -> Option<String> {
    let libc = rust_self_contained()?.join("libc.a");
    let libc_bytes = fs::read(&libc).ok()?;
    let pthread_h = fs::read(trixie_include().join("pthread.h")).ok()?;
    let libcxx = libcxx::installed(&libcxx_dir())?;
    let libcxx_stamp = fs::read(libcxx.join("STAMP")).ok()?;
    Some(format!(
        "{SYSROOT_FORMAT}\nlibc {}\nheaders {}\nlibc++ {} {}\n",
        paths::sha256_hex(&libc_bytes),
        paths::sha256_hex(&pthread_h),
        libcxx::dir_name(),
        &paths::sha256_hex(&libcxx_stamp)[..16]
    ))
}

/// Every file the sysroot is assembled from is in place.
fn sysroot_complete(dir: &Path) -> bool {
    let lib = dir.join("lib").join(TRIPLE);
    let inc = dir.join("include").join(TRIPLE);
    [
        "libc.a",
        "crt1-command.o",
        "crt1-reactor.o",
        "libpthread.a",
        "libm.a",
        "librt.a",
        "libc++.a",
        "libc++abi.a",
    ]
    .iter()
    .all(|f| lib.join(f).is_file())
        && inc.join("pthread.h").is_file()
        && inc.join("c++/v1/atomic").is_file()
        && libcxx::has_threads(&inc.join("c++/v1"))
}

fn stamp_matches(dir: &Path) -> bool {
    match (fs::read_to_string(dir.join("STAMP")), expected_stamp()) {
        (Ok(have), Some(want)) => have == want,
        _ => false,
    }
}

/// Every component of the Debian flavour, present or not.
pub fn debian_components() -> Vec<Component> {
    let mut out = Vec::new();
    let mut add = |name: &str, found: Option<PathBuf>, fix: String| {
        out.push(Component {
            name: name.to_string(),
            found,
            fix,
        })
    };
    add("clang-19", present(llvm("bin/clang")), apt_fix("clang-19"));
    add(
        "wasm-ld (lld-19)",
        present(llvm("bin/wasm-ld")),
        apt_fix("lld-19"),
    );
    add(
        "llvm-ar (llvm-19)",
        present(llvm("bin/llvm-ar")),
        apt_fix("llvm-19"),
    );
    add(
        "compiler-rt wasm32 builtins",
        present(builtins_archive()),
        apt_fix("libclang-rt-19-dev-wasm32"),
    );
    match rust_self_contained() {
        None => add(
            "rustc (for the wasm32-wasip1-threads libc)",
            None,
            "rustc is not on PATH: install Rust with rustup (https://rustup.rs)".into(),
        ),
        Some(dir) => add(
            "threads wasi-libc (rustup target wasm32-wasip1-threads)",
            present(dir.join("libc.a")).filter(|_| dir.join("crt1-command.o").exists()),
            RUST_TARGET_FIX.into(),
        ),
    }
    add(
        "wasi-libc headers (Debian trixie wasi-libc)",
        present(trixie_include().join("pthread.h")),
        "run `heddle toolchain install` (fetches Debian trixie's wasi-libc package)".into(),
    );
    add(
        "libc++ with threads (built from LLVM 19 sources)",
        libcxx::installed(&libcxx_dir()),
        LIBCXX_FIX.into(),
    );
    add(
        "sysroot",
        present(sysroot_dir()).filter(|d| stamp_matches(d) && sysroot_complete(d)),
        "run `heddle toolchain install` to assemble it".into(),
    );
    add(
        "clang resource dir",
        present(resource_dir().join("lib/wasm32-unknown-wasip1-threads/libclang_rt.builtins.a"))
            .filter(|_| resource_dir().join("include").exists())
            .map(|_| resource_dir()),
        "run `heddle toolchain install` to assemble it".into(),
    );
    let sdk_found = sdk::installed(&toolchain_dir(), &debian_identity_base());
    add(
        "guest SDK library",
        sdk_found,
        "run `heddle toolchain install` to build it".into(),
    );
    out
}

/// The part of the toolchain identity that does not depend on the SDK build.
fn debian_identity_base() -> String {
    // What the sysroot *should* be built from, so that a damaged sysroot
    // does not also make the (intact) SDK build look missing.
    let stamp = expected_stamp()
        .or_else(|| fs::read_to_string(sysroot_dir().join("STAMP")).ok())
        .unwrap_or_default();
    paths::sha256_hex(format!("debian\n{LLVM}\n{stamp}").as_bytes())[..16].to_string()
}

/// The Debian toolchain, assuming every component is present.
pub fn debian_toolchain() -> Result<Toolchain> {
    let base = debian_identity_base();
    let sdk_dir = sdk::dir(&toolchain_dir(), &base);
    Ok(Toolchain {
        flavor: Flavor::Debian,
        clang: llvm("bin/clang"),
        clangxx: llvm("bin/clang++"),
        ar: llvm("bin/llvm-ar"),
        sysroot: sysroot_dir(),
        resource_dir: Some(resource_dir()),
        cxx_threads: libcxx::has_threads(
            &sysroot_dir().join("include").join(TRIPLE).join("c++/v1"),
        ),
        sdk_include: sdk_dir.join("include"),
        compat_lib: sdk_dir.join("libheddle_compat.a"),
        identity: sdk::identity(&base),
    })
}

/// Installs every missing Debian component, in order.
pub fn install_debian(verbose: bool) -> Result<()> {
    let _lock = paths::CacheLock::acquire(&toolchain_dir().join(".lock"))?;
    let report = |what: &str| {
        if verbose {
            eprintln!("heddle: {what}");
        }
    };

    let missing: Vec<&str> = APT_PACKAGES
        .iter()
        .copied()
        .filter(|p| !apt_package_present(p))
        .collect();
    if missing.is_empty() {
        report("apt packages present");
    } else {
        eprintln!("heddle: installing {}", missing.join(" "));
        apt_install(&missing)?;
    }

    match rust_self_contained() {
        None => bail!("rustc is not on PATH: install Rust with rustup (https://rustup.rs)"),
        Some(dir) if dir.join("libc.a").exists() => {
            report("rust target wasm32-wasip1-threads present")
        }
        Some(_) => {
            eprintln!("heddle: rustup target add wasm32-wasip1-threads");
            let ok = Command::new("rustup")
                .args(["target", "add", "wasm32-wasip1-threads"])
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if !ok {
                bail!("`rustup target add wasm32-wasip1-threads` failed: is rustup installed and the registry reachable?");
            }
        }
    }

    if trixie_include().join("pthread.h").exists() {
        report("wasi-libc headers present");
    } else {
        eprintln!("heddle: fetching wasi-libc headers from Debian trixie");
        fetch_trixie_headers()?;
    }

    // libc++'s configure step links test programs: it needs the builtins.
    assemble_resource_dir()?;

    if libcxx::installed(&libcxx_dir()).is_some() {
        report("libc++ with threads present");
    } else {
        let mirror = debian_mirror();
        let inputs = libcxx::Inputs {
            llvm: Path::new(LLVM),
            resource_dir: &resource_dir(),
            libc_include: &trixie_include(),
            libc_lib: &rust_self_contained().context("rustc not found")?,
            mirror: &mirror,
        };
        libcxx::build(&toolchain_dir(), &inputs)?;
    }

    if stamp_matches(&sysroot_dir()) && sysroot_complete(&sysroot_dir()) {
        report("sysroot up to date");
    } else {
        eprintln!("heddle: assembling sysroot in {}", sysroot_dir().display());
        assemble_sysroot()?;
    }

    let base = debian_identity_base();
    if sdk::installed(&toolchain_dir(), &base).is_some() {
        report("guest SDK library present");
    } else {
        let tc = debian_toolchain()?;
        eprintln!("heddle: building the guest SDK library");
        sdk::build(&tc, &sdk::dir(&toolchain_dir(), &base))?;
    }
    Ok(())
}

fn apt_package_present(pkg: &str) -> bool {
    match pkg {
        "clang-19" => llvm("bin/clang").exists(),
        "llvm-19" => llvm("bin/llvm-ar").exists(),
        "lld-19" => llvm("bin/wasm-ld").exists(),
        "libclang-rt-19-dev-wasm32" => builtins_archive().exists(),
        "cmake" => Path::new("/usr/bin/cmake").exists(),
        "ninja-build" => Path::new("/usr/bin/ninja").exists(),
        _ => false,
    }
}

fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// The command prefix that runs apt-get with enough privileges, if any.
fn privileged() -> Option<Vec<String>> {
    if is_root() {
        return Some(vec![]);
    }
    let sudo_ok = Command::new("sudo")
        .args(["-n", "true"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    sudo_ok.then(|| vec!["sudo".to_string(), "-n".to_string()])
}

fn apt_install(pkgs: &[&str]) -> Result<()> {
    if Command::new("apt-get").arg("--version").output().is_err() {
        bail!(
            "{} missing and this is not a Debian system: install LLVM 19 with wasm32 support, or set WASI_SDK_PATH to a wasi-sdk >= 22",
            pkgs.join(", ")
        );
    }
    let Some(prefix) = privileged() else {
        bail!(
            "{} missing: run `sudo apt-get install {}` (heddle needs root to install packages)",
            pkgs.join(", "),
            pkgs.join(" ")
        );
    };
    let run = |args: &[&str]| -> bool {
        let mut cmd = match prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg("apt-get");
                c
            }
            None => Command::new("apt-get"),
        };
        cmd.env("DEBIAN_FRONTEND", "noninteractive")
            .args(args)
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    let mut install = vec!["install", "-y", "-q", "--no-install-recommends"];
    install.extend_from_slice(pkgs);
    if run(&install) {
        return Ok(());
    }
    // The package lists may be stale or absent on a fresh machine.
    if run(&["update", "-q"]) && run(&install) {
        return Ok(());
    }
    bail!(
        "`apt-get install {}` failed (see apt's message above)",
        pkgs.join(" ")
    )
}

/// The Debian mirror this machine's apt sources already use.
pub fn debian_mirror() -> String {
    if let Ok(m) = std::env::var("HEDDLE_DEBIAN_MIRROR") {
        if !m.is_empty() {
            return m;
        }
    }
    let mut texts = Vec::new();
    if let Ok(s) = fs::read_to_string("/etc/apt/sources.list") {
        texts.push(s);
    }
    if let Ok(rd) = fs::read_dir("/etc/apt/sources.list.d") {
        let mut files: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for f in files {
            if let Ok(s) = fs::read_to_string(&f) {
                texts.push(s);
            }
        }
    }
    mirror_from_sources(&texts).unwrap_or_else(|| "http://deb.debian.org/debian".to_string())
}

/// Picks the URI of the first Debian archive entry (not the security archive)
/// from one-line (`deb URI suite …`) or deb822 (`URIs:`/`Suites:`) sources.
pub fn mirror_from_sources(texts: &[String]) -> Option<String> {
    let good = |uri: &str, suite: &str| {
        uri.contains("debian") && !uri.contains("security") && !suite.contains("security")
    };
    for text in texts {
        for line in text.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("deb ") {
                let mut words: Vec<&str> = rest.split_whitespace().collect();
                // Skip an options block `[ ... ]`.
                if words.first().is_some_and(|w| w.starts_with('[')) {
                    let end = words
                        .iter()
                        .position(|w| w.ends_with(']'))
                        .map_or(words.len(), |i| i + 1);
                    words.drain(..end);
                }
                if let [uri, suite, ..] = words[..] {
                    if good(uri, suite) {
                        return Some(uri.trim_end_matches('/').to_string());
                    }
                }
            }
        }
        // deb822 stanzas
        for stanza in text.split("\n\n") {
            let field = |name: &str| {
                stanza.lines().find_map(|l| {
                    l.strip_prefix(name)
                        .and_then(|r| r.strip_prefix(':'))
                        .map(|r| r.trim().to_string())
                })
            };
            if let (Some(uris), Some(suites)) = (field("URIs"), field("Suites")) {
                if let Some(u) = uris.split_whitespace().next() {
                    if good(u, &suites) {
                        return Some(u.trim_end_matches('/').to_string());
                    }
                }
            }
        }
    }
    None
}

/// apt-get options for a private configuration: only `sources`, lists and
/// the package cache in the given directories, nothing of the system's.
pub(super) fn private_apt_options(sources: &Path, lists: &Path, cache: &Path) -> Vec<String> {
    vec![
        format!("-oDir::Etc::SourceList={}", sources.display()),
        "-oDir::Etc::SourceParts=/dev/null".to_string(),
        format!("-oDir::State::Lists={}", lists.display()),
        format!("-oDir::Cache={}", cache.display()),
        "-oAPT::Sandbox::User=root".to_string(),
        "-oAcquire::Languages=none".to_string(),
        "-oAcquire::IndexTargets::deb::DEP-11::DefaultEnabled=false".to_string(),
        "-oAcquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false".to_string(),
        "-oAcquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false".to_string(),
    ]
}

/// Fetches trixie's `wasi-libc` package into `<cache>/toolchain/wasi-libc`.
fn fetch_trixie_headers() -> Result<()> {
    let scratch = toolchain_dir().join("apt");
    let _ = fs::remove_dir_all(&scratch);
    let lists = scratch.join("lists");
    fs::create_dir_all(lists.join("partial"))?;
    fs::create_dir_all(scratch.join("cache/archives/partial"))?;
    let sources = scratch.join("sources.list");
    fs::write(&sources, format!("deb {} trixie main\n", debian_mirror()))?;
    let opts = private_apt_options(&sources, &lists, &scratch.join("cache"));
    let apt = |args: &[&str]| -> Result<()> {
        let out = Command::new("apt-get")
            .args(&opts)
            .args(args)
            .current_dir(&scratch)
            .output()
            .context("apt-get is not available (needed to fetch trixie's wasi-libc headers)")?;
        if !out.status.success() {
            bail!(
                "fetching Debian trixie's wasi-libc package failed (`apt-get {}`): {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            );
        }
        Ok(())
    };
    apt(&["-q", "update"])?;
    apt(&["-q", "download", "wasi-libc"])?;
    let deb = fs::read_dir(&scratch)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("wasi-libc_") && n.ends_with(".deb"))
        })
        .context("apt-get download wasi-libc produced no .deb file")?;
    let tmp = toolchain_dir().join("wasi-libc.tmp");
    let _ = fs::remove_dir_all(&tmp);
    let ok = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(&tmp)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok || !tmp.join("usr/include/wasm32-wasi/pthread.h").exists() {
        bail!("extracting {} failed or it has no pthread.h", deb.display());
    }
    let _ = fs::remove_dir_all(headers_dir());
    fs::rename(&tmp, headers_dir())?;
    let _ = fs::remove_dir_all(&scratch);
    Ok(())
}

fn copy_into(src: &Path, dir: &Path) -> Result<()> {
    let name = src.file_name().context("bad path")?;
    fs::copy(src, dir.join(name))
        .with_context(|| format!("cannot copy {} into {}", src.display(), dir.display()))?;
    Ok(())
}

fn copy_tree(src: &Path, dst: &Path) -> Result<()> {
    fs::create_dir_all(dst)?;
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let ty = entry.file_type()?;
        let to = dst.join(entry.file_name());
        if ty.is_dir() {
            copy_tree(&entry.path(), &to)?;
        } else {
            fs::copy(entry.path(), &to)?;
        }
    }
    Ok(())
}

/// An empty `ar` archive (what `ar rc libx.a` with no members writes).
pub(super) const EMPTY_AR: &[u8] = b"!<arch>\n";

fn assemble_sysroot() -> Result<()> {
    let rust = rust_self_contained().context("rustc not found")?;
    let stamp = expected_stamp().context("sysroot inputs are missing")?;
    let tmp = toolchain_dir().join("sysroot.tmp");
    let _ = fs::remove_dir_all(&tmp);
    let inc = tmp.join("include").join(TRIPLE);
    let lib = tmp.join("lib").join(TRIPLE);
    copy_tree(&trixie_include(), &inc)?;
    fs::create_dir_all(&lib)?;
    for f in ["libc.a", "crt1-command.o", "crt1-reactor.o"] {
        copy_into(&rust.join(f), &lib)?;
    }
    for f in ["libpthread.a", "libm.a", "librt.a"] {
        fs::write(lib.join(f), EMPTY_AR)?;
    }
    // libc++ (heddle's threads build): headers at
    // <sysroot>/include/<triple>/c++/v1, archives beside libc.
    let libcxx = libcxx::installed(&libcxx_dir()).context("libc++ with threads is not built")?;
    fs::create_dir_all(inc.join("c++"))?;
    // Relative (both live in the toolchain directory), so that a copy of the
    // whole directory stays self-contained.
    let name = libcxx.file_name().context("bad libc++ directory")?;
    let rel = Path::new("../../../..").join(name).join("include/c++/v1");
    std::os::unix::fs::symlink(rel, inc.join("c++/v1"))?;
    for f in ["libc++.a", "libc++abi.a"] {
        copy_into(&libcxx::lib(&libcxx, f), &lib)?;
    }
    fs::write(tmp.join("STAMP"), stamp)?;
    let _ = fs::remove_dir_all(sysroot_dir());
    fs::rename(&tmp, sysroot_dir())?;
    Ok(())
}

fn assemble_resource_dir() -> Result<()> {
    let dir = resource_dir();
    let rt = dir.join("lib/wasm32-unknown-wasip1-threads");
    let want = fs::metadata(builtins_archive())?.len();
    let have = fs::metadata(rt.join("libclang_rt.builtins.a"))
        .map(|m| m.len())
        .ok();
    if have == Some(want) && dir.join("include").exists() {
        return Ok(());
    }
    fs::create_dir_all(&rt)?;
    fs::copy(builtins_archive(), rt.join("libclang_rt.builtins.a"))?;
    let inc = dir.join("include");
    let _ = fs::remove_file(&inc);
    std::os::unix::fs::symlink(clang_include(), &inc)?;
    Ok(())
}

// ---------------------------------------------------------------- wasi-sdk

fn wasi_sdk_version(root: &Path) -> Option<String> {
    let text = fs::read_to_string(root.join("VERSION")).ok()?;
    text.lines().next().map(|l| l.trim().to_string())
}

fn wasi_sdk_major(version: &str) -> Option<u32> {
    version.split(['.', '-', '+']).next()?.parse().ok()
}

fn wasi_sdk_base(root: &Path) -> String {
    let v = wasi_sdk_version(root).unwrap_or_default();
    paths::sha256_hex(format!("wasi-sdk\n{}\n{v}", root.display()).as_bytes())[..16].to_string()
}

fn wasi_sdk_sdk_dir(root: &Path) -> PathBuf {
    sdk::dir(&toolchain_dir(), &wasi_sdk_base(root))
}

/// Every component of a wasi-sdk toolchain at `root`.
pub fn wasi_sdk_components(root: &Path) -> Vec<Component> {
    let mut out = Vec::new();
    let shown = root.display().to_string();
    let version = wasi_sdk_version(root);
    let major = version.as_deref().and_then(wasi_sdk_major);
    out.push(Component {
        name: format!("wasi-sdk at WASI_SDK_PATH={shown}"),
        found: match major {
            Some(m) if m >= 22 => Some(root.to_path_buf()),
            _ => None,
        },
        fix: match (&version, major) {
            (None, _) => format!(
                "{shown} has no VERSION file: point WASI_SDK_PATH at a wasi-sdk >= 22, or unset it to use Debian's packages"
            ),
            (Some(v), _) => format!(
                "wasi-sdk {v} is too old (threads need >= 22): point WASI_SDK_PATH at a newer one, or unset it"
            ),
        },
    });
    let sysroot = root.join("share/wasi-sysroot");
    let checks = [
        ("clang", root.join("bin/clang")),
        ("clang++", root.join("bin/clang++")),
        ("llvm-ar", root.join("bin/llvm-ar")),
        (
            "threads wasi-libc",
            sysroot.join("lib/wasm32-wasip1-threads/libc.a"),
        ),
        (
            "threads headers",
            sysroot.join("include/wasm32-wasip1-threads/pthread.h"),
        ),
    ];
    for (name, path) in checks {
        out.push(Component {
            name: format!("wasi-sdk {name}"),
            fix: format!(
                "{} is missing: the wasi-sdk at {shown} is incomplete",
                path.display()
            ),
            found: present(path),
        });
    }
    out.push(Component {
        name: "guest SDK library".into(),
        found: sdk::installed(&toolchain_dir(), &wasi_sdk_base(root)),
        fix: "run `heddle toolchain install` to build it".into(),
    });
    out
}

/// The wasi-sdk toolchain at `root`, assuming every component is present.
pub fn wasi_sdk_toolchain(root: &Path) -> Result<Toolchain> {
    let version = wasi_sdk_version(root).unwrap_or_default();
    let sysroot = root.join("share/wasi-sysroot");
    let sdk_dir = wasi_sdk_sdk_dir(root);
    Ok(Toolchain {
        flavor: Flavor::WasiSdk {
            root: root.to_path_buf(),
            version,
        },
        clang: root.join("bin/clang"),
        clangxx: root.join("bin/clang++"),
        ar: root.join("bin/llvm-ar"),
        cxx_threads: sysroot.join("lib/wasm32-wasip1-threads/libc++.a").exists(),
        sysroot,
        resource_dir: None,
        sdk_include: sdk_dir.join("include"),
        compat_lib: sdk_dir.join("libheddle_compat.a"),
        identity: sdk::identity(&wasi_sdk_base(root)),
    })
}

/// With a wasi-sdk, the only thing heddle builds is the guest SDK library.
pub fn install_wasi_sdk_extras(root: &Path, verbose: bool) -> Result<()> {
    let comps = wasi_sdk_components(root);
    if let Some(bad) = comps
        .iter()
        .find(|c| !c.ok() && c.name != "guest SDK library")
    {
        bail!("{} is missing: {}", bad.name, bad.fix);
    }
    let _lock = paths::CacheLock::acquire(&toolchain_dir().join(".lock"))?;
    if sdk::installed(&toolchain_dir(), &wasi_sdk_base(root)).is_some() {
        if verbose {
            eprintln!("heddle: guest SDK library present");
        }
        return Ok(());
    }
    let tc = wasi_sdk_toolchain(root)?;
    sdk::build(&tc, &wasi_sdk_sdk_dir(root))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_from_one_line_sources() {
        let s = vec!["# c\ndeb http://deb.debian.org/debian-security bookworm-security main\ndeb [arch=amd64] http://mirror.example/debian/ bookworm main\n".to_string()];
        assert_eq!(
            mirror_from_sources(&s).as_deref(),
            Some("http://mirror.example/debian")
        );
    }

    #[test]
    fn mirror_from_deb822_sources() {
        let s = vec!["Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n\nTypes: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\n".to_string()];
        assert_eq!(
            mirror_from_sources(&s).as_deref(),
            Some("http://deb.debian.org/debian")
        );
    }

    #[test]
    fn wasi_sdk_versions() {
        assert_eq!(wasi_sdk_major("22.0"), Some(22));
        assert_eq!(wasi_sdk_major("30.0-rc1"), Some(30));
        assert_eq!(wasi_sdk_major("x"), None);
    }
}
