//! Finding and installing toolchain components.
//!
//! Apt flavour (Debian 12 and 13, Ubuntu 22.04 and 24.04), step by step,
//! following the system's [`Plan`] (each step idempotent, each skipped when
//! its result is already present):
//!
//! 1. apt packages `clang-19 llvm-19 lld-19 libclang-rt-19-dev-wasm32 cmake
//!    ninja-build xz-utils` (plus `wasi-libc` on Debian 13), as root or via
//!    `sudo -n`; on Ubuntu 22.04, whose archive has no LLVM 19, apt.llvm.org's
//!    `llvm-toolchain-jammy-19` repository is added first when no source
//!    offers `clang-19` yet;
//! 2. `rustup target add wasm32-wasip1-threads`, whose `self-contained/`
//!    directory holds wasi-libc built with `THREAD_MODEL=posix`;
//! 3. headers that declare the pthread API: Debian trixie's `wasi-libc`
//!    package (architecture `all`) — on Debian 12 fetched with a private apt
//!    configuration that never touches the system's sources (the mirror is
//!    the one the machine already uses), on Ubuntu the same `.deb` from
//!    Debian's pool checked against its SHA-256, on Debian 13 the system's
//!    own `wasi-libc` from step 1;
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
//!
//! On any other system only a wasi-sdk named by `WASI_SDK_PATH` is used.

use super::apt::{apt_helper_download, fetch_pinned, private_apt_options};
use super::distro::{AptPackage, AptRepo, Headers, Mirror, PinnedFile, Plan, Unsupported};
use super::{libcxx, sdk, Component, Flavor, Toolchain};
use crate::paths;
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Bumped whenever the sysroot layout below changes.
const SYSROOT_FORMAT: &str = "heddle-sysroot-4";
const TRIPLE: &str = "wasm32-wasip1-threads";
const RUST_TARGET_FIX: &str =
    "run `rustup target add wasm32-wasip1-threads` (or `heddle toolchain install`)";
/// Where a wasi-sdk is found, for messages.
const WASI_SDK_RELEASES: &str = "https://github.com/WebAssembly/wasi-sdk/releases";

fn toolchain_dir() -> PathBuf {
    paths::cache_root().join("toolchain")
}

/// Where fetched wasi-libc headers are extracted.
fn headers_dir() -> PathBuf {
    toolchain_dir().join("wasi-libc")
}

/// The fetched headers' include directory.
fn fetched_include() -> PathBuf {
    headers_dir().join("usr/include/wasm32-wasi")
}

/// The wasi-libc include directory the plan uses.
fn headers_include(plan: &Plan) -> PathBuf {
    match plan.headers {
        Headers::SystemPackage(_) => PathBuf::from(super::distro::SYSTEM_WASI_INCLUDE),
        Headers::DebianSuite(_) | Headers::Pinned(_) => fetched_include(),
    }
}

fn sysroot_dir() -> PathBuf {
    toolchain_dir().join("sysroot")
}

fn resource_dir() -> PathBuf {
    toolchain_dir().join("resource")
}

/// Where heddle's threads build of libc++ is installed.
fn libcxx_dir(plan: &Plan) -> PathBuf {
    libcxx::dir(&toolchain_dir(), &plan.llvm_sources)
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

/// How to get a missing apt package of the plan.
fn apt_fix(plan: &Plan, pkg: &str) -> String {
    let from_repo = plan
        .packages
        .iter()
        .any(|p| p.name == pkg && p.llvm && plan.llvm_repo.is_some());
    match &plan.llvm_repo {
        Some(repo) if from_repo => format!(
            "{}'s archive has no LLVM {}: `heddle toolchain install` adds {}'s repository `{}` and installs {pkg}; or set WASI_SDK_PATH=/path/to/wasi-sdk",
            plan.system, plan.llvm_major, repo.name, repo.line
        ),
        _ => format!("install it with `apt-get install {pkg}` (or run `heddle toolchain install`)"),
    }
}

/// What the current sysroot stamp must say for the inputs found now.
fn expected_stamp(plan: &Plan) -> Option<String> {
    let libc = rust_self_contained()?.join("libc.a");
    let libc_bytes = fs::read(&libc).ok()?;
    let pthread_h = fs::read(headers_include(plan).join("pthread.h")).ok()?;
    let libcxx = libcxx::installed(&libcxx_dir(plan))?;
    let libcxx_stamp = fs::read(libcxx.join("STAMP")).ok()?;
    Some(format!(
        "{SYSROOT_FORMAT}\nlibc {}\nheaders {}\nlibc++ {} {}\n",
        paths::sha256_hex(&libc_bytes),
        paths::sha256_hex(&pthread_h),
        libcxx::dir_name(&plan.llvm_sources),
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

fn stamp_matches(dir: &Path, plan: &Plan) -> bool {
    match (fs::read_to_string(dir.join("STAMP")), expected_stamp(plan)) {
        (Ok(have), Some(want)) => have == want,
        _ => false,
    }
}

/// The doctor's name for the wasi-libc headers.
fn headers_name(plan: &Plan) -> String {
    match plan.headers {
        Headers::DebianSuite(suite) => format!("wasi-libc headers (Debian {suite} wasi-libc)"),
        Headers::SystemPackage(pkg) => format!("wasi-libc headers ({pkg})"),
        Headers::Pinned(f) => format!("wasi-libc headers ({})", f.what),
    }
}

/// Every component of the apt flavour, present or not.
pub fn apt_components(plan: &Plan) -> Vec<Component> {
    let n = plan.llvm_major;
    let mut out = Vec::new();
    let mut add = |name: &str, found: Option<PathBuf>, fix: String| {
        out.push(Component {
            name: name.to_string(),
            found,
            fix,
        })
    };
    add(
        &format!("clang-{n}"),
        present(plan.llvm("bin/clang")),
        apt_fix(plan, &format!("clang-{n}")),
    );
    add(
        &format!("wasm-ld (lld-{n})"),
        present(plan.llvm("bin/wasm-ld")),
        apt_fix(plan, &format!("lld-{n}")),
    );
    add(
        &format!("llvm-ar (llvm-{n})"),
        present(plan.llvm("bin/llvm-ar")),
        apt_fix(plan, &format!("llvm-{n}")),
    );
    add(
        "compiler-rt wasm32 builtins",
        present(plan.builtins_archive()),
        apt_fix(plan, &format!("libclang-rt-{n}-dev-wasm32")),
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
    let headers_fix = match plan.headers {
        Headers::DebianSuite(suite) => format!(
            "run `heddle toolchain install` (fetches Debian {suite}'s wasi-libc package)"
        ),
        Headers::SystemPackage(pkg) => apt_fix(plan, pkg),
        Headers::Pinned(f) => format!(
            "run `heddle toolchain install` (downloads {} from Debian's archive, checked against its SHA-256)",
            f.name()
        ),
    };
    add(
        &headers_name(plan),
        present(headers_include(plan).join("pthread.h")),
        headers_fix,
    );
    add(
        "libc++ with threads (built from LLVM 19 sources)",
        libcxx::installed(&libcxx_dir(plan)),
        LIBCXX_FIX.into(),
    );
    add(
        "sysroot",
        present(sysroot_dir()).filter(|d| stamp_matches(d, plan) && sysroot_complete(d)),
        "run `heddle toolchain install` to assemble it".into(),
    );
    add(
        "clang resource dir",
        present(resource_dir().join("lib/wasm32-unknown-wasip1-threads/libclang_rt.builtins.a"))
            .filter(|_| resource_dir().join("include").exists())
            .map(|_| resource_dir()),
        "run `heddle toolchain install` to assemble it".into(),
    );
    let sdk_found = sdk::installed(&toolchain_dir(), &apt_identity_base(plan));
    add(
        "guest SDK library",
        sdk_found,
        "run `heddle toolchain install` to build it".into(),
    );
    out
}

/// What doctor reports on a system heddle cannot install on: that, and
/// what a wasi-sdk would need.
pub fn unsupported_components(u: &Unsupported) -> Vec<Component> {
    vec![
        Component {
            name: "supported system".into(),
            found: None,
            fix: u.problem(),
        },
        Component {
            name: "wasi-sdk (WASI_SDK_PATH)".into(),
            found: None,
            fix: format!(
                "WASI_SDK_PATH is not set: unpack a wasi-sdk >= 22 ({WASI_SDK_RELEASES}) and set WASI_SDK_PATH=/path/to/wasi-sdk"
            ),
        },
        Component {
            name: "guest SDK library".into(),
            found: None,
            fix: "set WASI_SDK_PATH, then run `heddle toolchain install` to build it".into(),
        },
    ]
}

/// The part of the toolchain identity that does not depend on the SDK build.
fn apt_identity_base(plan: &Plan) -> String {
    // What the sysroot *should* be built from, so that a damaged sysroot
    // does not also make the (intact) SDK build look missing.
    let stamp = expected_stamp(plan)
        .or_else(|| fs::read_to_string(sysroot_dir().join("STAMP")).ok())
        .unwrap_or_default();
    paths::sha256_hex(format!("debian\n{}\n{stamp}", plan.llvm_prefix.display()).as_bytes())[..16]
        .to_string()
}

/// The apt toolchain, assuming every component is present.
pub fn apt_toolchain(plan: &Plan) -> Result<Toolchain> {
    let base = apt_identity_base(plan);
    let sdk_dir = sdk::dir(&toolchain_dir(), &base);
    Ok(Toolchain {
        flavor: Flavor::Apt {
            system: plan.system.clone(),
        },
        clang: plan.llvm("bin/clang"),
        clangxx: plan.llvm("bin/clang++"),
        ar: plan.llvm("bin/llvm-ar"),
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

/// The Debian mirror the plan's Debian files come from.
fn mirror(plan: &Plan) -> String {
    match plan.mirror {
        Mirror::System => debian_mirror(),
        Mirror::DebOrg => std::env::var("HEDDLE_DEBIAN_MIRROR")
            .ok()
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| DEB_ORG.to_string()),
    }
}

const DEB_ORG: &str = "http://deb.debian.org/debian";

/// Installs every missing component of the apt flavour, in order.
pub fn install_apt(plan: &Plan, verbose: bool) -> Result<()> {
    let _lock = paths::CacheLock::acquire(&toolchain_dir().join(".lock"))?;
    let report = |what: &str| {
        if verbose {
            eprintln!("heddle: {what}");
        }
    };

    let missing: Vec<&AptPackage> = plan.packages.iter().filter(|p| !p.probe.exists()).collect();
    if missing.is_empty() {
        report("apt packages present");
    } else {
        let names: Vec<&str> = missing.iter().map(|p| p.name.as_str()).collect();
        eprintln!("heddle: installing {}", names.join(" "));
        apt_install(plan, &missing)?;
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

    let mirror = mirror(plan);
    if headers_include(plan).join("pthread.h").exists() {
        report("wasi-libc headers present");
    } else {
        match plan.headers {
            Headers::DebianSuite(suite) => {
                eprintln!("heddle: fetching wasi-libc headers from Debian {suite}");
                fetch_suite_headers(suite)?;
            }
            Headers::Pinned(f) => {
                eprintln!("heddle: fetching wasi-libc headers ({} from {mirror})", f.name());
                fetch_pinned_headers(&mirror, &f)?;
            }
            Headers::SystemPackage(pkg) => bail!(
                "{} has no pthread.h although `{pkg}` was installed: is it {pkg} 0.0~git20241209 or newer?",
                headers_include(plan).display()
            ),
        }
    }

    // libc++'s configure step links test programs: it needs the builtins.
    assemble_resource_dir(plan)?;

    if libcxx::installed(&libcxx_dir(plan)).is_some() {
        report("libc++ with threads present");
    } else {
        let inputs = libcxx::Inputs {
            llvm: &plan.llvm_prefix,
            resource_dir: &resource_dir(),
            libc_include: &headers_include(plan),
            libc_lib: &rust_self_contained().context("rustc not found")?,
            sources: &plan.llvm_sources,
            mirror: &mirror,
        };
        libcxx::build(&toolchain_dir(), &inputs)?;
    }

    if stamp_matches(&sysroot_dir(), plan) && sysroot_complete(&sysroot_dir()) {
        report("sysroot up to date");
    } else {
        eprintln!("heddle: assembling sysroot in {}", sysroot_dir().display());
        assemble_sysroot(plan)?;
    }

    let base = apt_identity_base(plan);
    if sdk::installed(&toolchain_dir(), &base).is_some() {
        report("guest SDK library present");
    } else {
        let tc = apt_toolchain(plan)?;
        eprintln!("heddle: building the guest SDK library");
        sdk::build(&tc, &sdk::dir(&toolchain_dir(), &base))?;
    }
    Ok(())
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

/// `program` run with the privilege `prefix` (empty, or `sudo -n`).
fn privileged_command(prefix: &[String], program: &str) -> Command {
    match prefix.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// Runs `apt-get args…` with the privilege `prefix`; true when it succeeded.
fn run_apt(prefix: &[String], args: &[&str]) -> bool {
    privileged_command(prefix, "apt-get")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .args(args)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// `apt-get install` of `pkgs`, retried once after `apt-get update` (the
/// package lists may be stale or absent on a fresh machine).
fn apt_get_install(prefix: &[String], pkgs: &[&str]) -> bool {
    let mut install = vec!["install", "-y", "-q", "--no-install-recommends"];
    install.extend_from_slice(pkgs);
    run_apt(prefix, &install) || (run_apt(prefix, &["update", "-q"]) && run_apt(prefix, &install))
}

fn apt_install(plan: &Plan, pkgs: &[&AptPackage]) -> Result<()> {
    let names: Vec<&str> = pkgs.iter().map(|p| p.name.as_str()).collect();
    let repo = plan
        .llvm_repo
        .as_ref()
        .filter(|_| pkgs.iter().any(|p| p.llvm))
        .filter(|r| !repo_configured(plan, r));
    if Command::new("apt-get").arg("--version").output().is_err() {
        bail!(
            "{} missing and apt-get is not available although {} uses apt: set WASI_SDK_PATH to a wasi-sdk >= 22 instead",
            names.join(", "),
            plan.system
        );
    }
    let Some(prefix) = privileged() else {
        match repo {
            Some(r) => bail!(
                "{} missing: add {}'s repository `{}` (key {}) and run `sudo apt-get install {}`, or run `heddle toolchain install` as root, which does both",
                names.join(", "),
                r.name,
                r.line,
                r.key_url,
                names.join(" ")
            ),
            None => bail!(
                "{} missing: run `sudo apt-get install {}` (heddle needs root to install packages)",
                names.join(", "),
                names.join(" ")
            ),
        }
    };
    if let Some(r) = repo {
        add_repo(plan, r, &prefix)?;
    }
    if apt_get_install(&prefix, &names) {
        return Ok(());
    }
    let hint = plan
        .apt_hint
        .map(|h| format!(" ({}: {h})", plan.system))
        .unwrap_or_default();
    bail!(
        "`apt-get install {}` failed (see apt's message above){hint}",
        names.join(" ")
    )
}

/// The text of the system's apt sources (one-line and deb822 files).
fn apt_source_texts() -> Vec<String> {
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
    texts
}

/// Whether the system's apt sources already name `repo` (its URI and
/// suite), or apt already has a candidate for the LLVM packages, so that it
/// is not added twice (apt rejects a source listed twice with different
/// keys).
fn repo_configured(plan: &Plan, repo: &AptRepo) -> bool {
    sources_name_repo(&apt_source_texts(), repo)
        || apt_has_candidate(&format!("clang-{}", plan.llvm_major))
}

/// Whether one of the sources texts names `repo`'s URI and suite outside
/// comments (one-line sources name both on one line, deb822 ones on two).
fn sources_name_repo(texts: &[String], repo: &AptRepo) -> bool {
    let words: Vec<&str> = repo.line.split_whitespace().collect();
    let (Some(uri), Some(suite)) = (words.get(1), words.get(2)) else {
        return false;
    };
    // Either scheme.
    let uri = uri
        .split_once("://")
        .map_or(*uri, |(_, rest)| rest)
        .trim_end_matches('/');
    texts.iter().any(|t| {
        let live: Vec<&str> = t
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect();
        live.iter().any(|l| l.contains(uri)) && live.iter().any(|l| l.contains(suite))
    })
}

/// Whether `apt-cache policy PKG` names an installation candidate.
fn apt_has_candidate(pkg: &str) -> bool {
    Command::new("apt-cache")
        .args(["policy", pkg])
        .output()
        .map(|o| candidate_in_policy(&String::from_utf8_lossy(&o.stdout)))
        .unwrap_or(false)
}

/// Whether `apt-cache policy` output names a candidate.
fn candidate_in_policy(text: &str) -> bool {
    text.lines().any(|l| {
        l.trim()
            .strip_prefix("Candidate:")
            .is_some_and(|c| !c.trim().is_empty() && c.trim() != "(none)")
    })
}

/// Adds `repo` to the system's apt sources (a list file and its key, both
/// named `heddle-…`), then updates the package lists.
fn add_repo(plan: &Plan, repo: &AptRepo, prefix: &[String]) -> Result<()> {
    eprintln!(
        "heddle: adding {}'s repository `{}` ({} has no LLVM {})",
        repo.name, repo.line, plan.system, plan.llvm_major
    );
    // The key comes over HTTPS.
    if !Path::new("/etc/ssl/certs/ca-certificates.crt").exists()
        && !apt_get_install(prefix, &["ca-certificates"])
    {
        bail!(
            "`apt-get install ca-certificates` failed (needed to fetch {})",
            repo.key_url
        );
    }
    let scratch = toolchain_dir().join("apt-repo");
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch)?;
    let key = scratch.join("key.asc");
    apt_helper_download(repo.key_url, &key, None)?;
    check_fingerprint(&key, repo.fingerprint, &scratch)?;
    let list = scratch.join("list");
    fs::write(&list, repo.sources_line())?;
    for (from, to) in [(&key, &repo.keyring), (&list, &repo.list_file)] {
        let ok = privileged_command(prefix, "install")
            .args(["-D", "-m", "0644"])
            .arg(from)
            .arg(to)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            bail!("cannot write {}", to.display());
        }
    }
    let _ = fs::remove_dir_all(&scratch);
    if !run_apt(prefix, &["update", "-q"]) {
        bail!(
            "`apt-get update` failed after adding {} (see apt's message above; remove it to undo)",
            repo.list_file.display()
        );
    }
    Ok(())
}

/// Checks that the key at `key` has `fingerprint`, when `gpg` is there to
/// read it (the key came over HTTPS either way).
fn check_fingerprint(key: &Path, fingerprint: &str, scratch: &Path) -> Result<()> {
    let home = scratch.join("gnupg");
    fs::create_dir_all(&home)?;
    let Ok(out) = Command::new("gpg")
        .env("GNUPGHOME", &home)
        .args(["--batch", "--with-colons", "--show-keys"])
        .arg(key)
        .output()
    else {
        return Ok(());
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let fprs = fingerprints(&text);
    if !out.status.success() || !fprs.iter().any(|f| f.eq_ignore_ascii_case(fingerprint)) {
        bail!(
            "the key fetched for apt.llvm.org is not the expected one (fingerprint {fingerprint}; got {})",
            if fprs.is_empty() { "none".to_string() } else { fprs.join(", ") }
        );
    }
    Ok(())
}

/// The fingerprints in `gpg --with-colons` output.
fn fingerprints(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("fpr:"))
        .filter_map(|rest| rest.split(':').find(|f| !f.is_empty()))
        .map(str::to_string)
        .collect()
}

/// The Debian mirror this machine's apt sources already use.
pub fn debian_mirror() -> String {
    if let Ok(m) = std::env::var("HEDDLE_DEBIAN_MIRROR") {
        if !m.is_empty() {
            return m;
        }
    }
    mirror_from_sources(&apt_source_texts()).unwrap_or_else(|| DEB_ORG.to_string())
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

/// Fetches the newest `wasi-libc` of a Debian suite into
/// `<cache>/toolchain/wasi-libc`.
fn fetch_suite_headers(suite: &str) -> Result<()> {
    let scratch = toolchain_dir().join("apt");
    let _ = fs::remove_dir_all(&scratch);
    let lists = scratch.join("lists");
    fs::create_dir_all(lists.join("partial"))?;
    fs::create_dir_all(scratch.join("cache/archives/partial"))?;
    let sources = scratch.join("sources.list");
    fs::write(&sources, format!("deb {} {suite} main\n", debian_mirror()))?;
    let opts = private_apt_options(&sources, &lists, &scratch.join("cache"));
    let apt = |args: &[&str]| -> Result<()> {
        let out = Command::new("apt-get")
            .args(&opts)
            .args(args)
            .current_dir(&scratch)
            .output()
            .with_context(|| {
                format!("apt-get is not available (needed to fetch {suite}'s wasi-libc headers)")
            })?;
        if !out.status.success() {
            bail!(
                "fetching Debian {suite}'s wasi-libc package failed (`apt-get {}`): {}",
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
    extract_headers(&deb)?;
    let _ = fs::remove_dir_all(&scratch);
    Ok(())
}

/// Downloads the pinned `wasi-libc` `.deb` into `<cache>/toolchain/wasi-libc`.
fn fetch_pinned_headers(mirror: &str, file: &PinnedFile) -> Result<()> {
    let scratch = toolchain_dir().join("apt");
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch)?;
    let deb = fetch_pinned(mirror, file, &scratch)
        .with_context(|| format!("fetching {} failed", file.what))?;
    extract_headers(&deb)?;
    let _ = fs::remove_dir_all(&scratch);
    Ok(())
}

/// Extracts a `wasi-libc` `.deb` into `<cache>/toolchain/wasi-libc`.
fn extract_headers(deb: &Path) -> Result<()> {
    let tmp = toolchain_dir().join("wasi-libc.tmp");
    let _ = fs::remove_dir_all(&tmp);
    let ok = Command::new("dpkg-deb")
        .arg("-x")
        .arg(deb)
        .arg(&tmp)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok || !tmp.join("usr/include/wasm32-wasi/pthread.h").exists() {
        bail!("extracting {} failed or it has no pthread.h", deb.display());
    }
    let _ = fs::remove_dir_all(headers_dir());
    fs::rename(&tmp, headers_dir())?;
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

fn assemble_sysroot(plan: &Plan) -> Result<()> {
    let rust = rust_self_contained().context("rustc not found")?;
    let stamp = expected_stamp(plan).context("sysroot inputs are missing")?;
    let tmp = toolchain_dir().join("sysroot.tmp");
    let _ = fs::remove_dir_all(&tmp);
    let inc = tmp.join("include").join(TRIPLE);
    let lib = tmp.join("lib").join(TRIPLE);
    copy_tree(&headers_include(plan), &inc)?;
    fs::create_dir_all(&lib)?;
    for f in ["libc.a", "crt1-command.o", "crt1-reactor.o"] {
        copy_into(&rust.join(f), &lib)?;
    }
    super::write_empty_libs(&lib)?;
    // libc++ (heddle's threads build): headers at
    // <sysroot>/include/<triple>/c++/v1, archives beside libc.
    let libcxx =
        libcxx::installed(&libcxx_dir(plan)).context("libc++ with threads is not built")?;
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

fn assemble_resource_dir(plan: &Plan) -> Result<()> {
    let dir = resource_dir();
    let rt = dir.join("lib/wasm32-unknown-wasip1-threads");
    let builtins = plan.builtins_archive();
    let want = fs::metadata(&builtins)
        .with_context(|| format!("cannot read {}", builtins.display()))?
        .len();
    let have = fs::metadata(rt.join("libclang_rt.builtins.a"))
        .map(|m| m.len())
        .ok();
    if have == Some(want) && dir.join("include").exists() {
        return Ok(());
    }
    fs::create_dir_all(&rt)?;
    fs::copy(&builtins, rt.join("libclang_rt.builtins.a"))?;
    let inc = dir.join("include");
    let _ = fs::remove_file(&inc);
    std::os::unix::fs::symlink(plan.clang_include(), &inc)?;
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
                "{shown} has no VERSION file: point WASI_SDK_PATH at a wasi-sdk >= 22, or unset it to use the system's packages"
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
    fn apt_policy_candidates() {
        let none = "clang-19:\n  Installed: (none)\n  Candidate: (none)\n  Version table:\n";
        assert!(!candidate_in_policy(none));
        assert!(!candidate_in_policy(""));
        let some = "clang-19:\n  Installed: (none)\n  Candidate: 1:19.1.7~++20250114103332+cd708029e0b2-1~exp1~20250114103446.78\n";
        assert!(candidate_in_policy(some));
    }

    #[test]
    fn an_added_llvm_repository_is_recognised() {
        use super::super::distro::Release;
        let plan = Plan::new(Release::Ubuntu2204, "Ubuntu 22.04 (jammy)".into());
        let repo = plan.llvm_repo.as_ref().unwrap();
        let one_line =
            "deb [signed-by=/x.asc] http://apt.llvm.org/jammy/ llvm-toolchain-jammy-19 main\n";
        let deb822 = "Types: deb\nURIs: https://apt.llvm.org/jammy\nSuites: llvm-toolchain-jammy-19\nComponents: main\n";
        let commented = "# deb http://apt.llvm.org/jammy/ llvm-toolchain-jammy-19 main\n";
        let other = "deb http://apt.llvm.org/jammy/ llvm-toolchain-jammy-18 main\n";
        let named = |t: &str| sources_name_repo(&[t.to_string()], repo);
        assert!(named(one_line));
        assert!(named(deb822));
        assert!(!named(commented));
        assert!(!named(other));
        assert!(!named("deb http://archive.ubuntu.com/ubuntu jammy main\n"));
    }

    #[test]
    fn gpg_colon_fingerprints() {
        let out = "pub:-:4096:1:15CF4D18AF4F7421:1368109287:::-:::scESC::::::23::0:\nfpr:::::::::6084F3CF814B57C1CF12EFD515CF4D18AF4F7421:\nuid:-::::1368109287::A::Sylvestre:::::::::0:\n";
        assert_eq!(
            fingerprints(out),
            ["6084F3CF814B57C1CF12EFD515CF4D18AF4F7421"]
        );
        assert!(fingerprints("").is_empty());
    }

    #[test]
    fn fixes_name_where_a_package_comes_from() {
        let plan = |name: &str, release| Plan::new(release, name.to_string());
        use super::super::distro::Release;
        let jammy = plan("Ubuntu 22.04 (jammy)", Release::Ubuntu2204);
        assert_eq!(
            apt_fix(&jammy, "clang-19"),
            "Ubuntu 22.04 (jammy)'s archive has no LLVM 19: `heddle toolchain install` adds apt.llvm.org's repository `deb http://apt.llvm.org/jammy/ llvm-toolchain-jammy-19 main` and installs clang-19; or set WASI_SDK_PATH=/path/to/wasi-sdk"
        );
        assert_eq!(
            apt_fix(&jammy, "cmake"),
            "install it with `apt-get install cmake` (or run `heddle toolchain install`)"
        );
        let noble = plan("Ubuntu 24.04 (noble)", Release::Ubuntu2404);
        assert_eq!(
            apt_fix(&noble, "clang-19"),
            "install it with `apt-get install clang-19` (or run `heddle toolchain install`)"
        );
        let trixie = plan("Debian 13 (trixie)", Release::Debian13);
        assert_eq!(headers_name(&trixie), "wasi-libc headers (wasi-libc)");
        assert_eq!(
            headers_include(&trixie),
            Path::new("/usr/include/wasm32-wasi")
        );
        for p in [&jammy, &noble] {
            assert_eq!(
                headers_name(p),
                "wasi-libc headers (Debian trixie wasi-libc)"
            );
        }
        let bookworm = plan("Debian 12 (bookworm)", Release::Debian12);
        assert_eq!(
            headers_name(&bookworm),
            "wasi-libc headers (Debian trixie wasi-libc)"
        );
    }

    #[test]
    fn an_unsupported_system_is_three_problems() {
        let u = Unsupported::System("Alpine Linux v3.20".into());
        let c = unsupported_components(&u);
        let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "supported system",
                "wasi-sdk (WASI_SDK_PATH)",
                "guest SDK library"
            ]
        );
        assert!(c.iter().all(|c| !c.ok() && !c.fix.contains('\n')));
        assert!(c[0].fix.starts_with("Alpine Linux v3.20 is not supported"));
    }

    #[test]
    fn wasi_sdk_versions() {
        assert_eq!(wasi_sdk_major("22.0"), Some(22));
        assert_eq!(wasi_sdk_major("30.0-rc1"), Some(30));
        assert_eq!(wasi_sdk_major("x"), None);
    }
}
