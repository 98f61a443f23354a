//! The C/C++ toolchain: finding it, installing it, and compiling targets.
//!
//! heddle compiles ordinary pthread C/C++ to `wasm32-wasip1-threads`. Two
//! toolchain flavours are supported:
//!
//! * **A user's wasi-sdk** (≥ 22) named by `WASI_SDK_PATH`: its clang, its
//!   sysroot and its threads-enabled libc++ are used as they are.
//! * **Debian packages** (the default on Debian 12): clang-19 / lld-19 /
//!   compiler-rt from the archive, the threads build of wasi-libc that ships
//!   with rustup's `wasm32-wasip1-threads` target, the wasi-libc headers from
//!   Debian trixie (bookworm's are too old), and libc++/libc++abi with threads
//!   built once from the LLVM 19 sources of Debian's `llvm-toolchain-19`
//!   source package (`libcxx`; the archive's wasm libc++ has no threads),
//!   assembled into a sysroot and a clang resource directory under the cache
//!   ([`crate::paths::cache_root`]). See `bootstrap` for the steps.
//!
//! [`locate`] finds a complete toolchain without side effects, [`ensure`]
//! installs what is missing first (this is what commands that compile call),
//! and [`doctor`] reports each component.

pub(crate) mod bootstrap;
pub mod compile;
pub mod distro;
pub(crate) mod flags;
pub(crate) mod glue;
pub(crate) mod libcxx;
pub(crate) mod sdk;

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

pub use compile::{compile, compile_cached, drive, CcRequest};

/// Which kind of toolchain is in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flavor {
    /// Debian's LLVM 19 packages plus a sysroot assembled by heddle.
    Debian,
    /// A wasi-sdk installation named by `WASI_SDK_PATH`.
    WasiSdk {
        /// `WASI_SDK_PATH`.
        root: PathBuf,
        /// Its version.
        version: String,
    },
}

/// A complete, usable toolchain.
#[derive(Debug, Clone)]
pub struct Toolchain {
    /// Where it comes from.
    pub flavor: Flavor,
    /// The C compiler driver.
    pub clang: PathBuf,
    /// The C++ compiler driver.
    pub clangxx: PathBuf,
    /// `llvm-ar`, used to archive the guest SDK's compatibility library.
    pub ar: PathBuf,
    /// `--sysroot`.
    pub sysroot: PathBuf,
    /// `-resource-dir`, when heddle assembled one (Debian flavour).
    pub resource_dir: Option<PathBuf>,
    /// Whether libc++ in this toolchain was built with thread support
    /// (`std::thread`, `std::mutex`): heddle's own build (Debian flavour)
    /// and wasi-sdk's are.
    pub cxx_threads: bool,
    /// Directory holding `heddle.h` / `heddle.hpp`.
    pub sdk_include: PathBuf,
    /// The guest SDK compatibility library, linked into every module.
    pub compat_lib: PathBuf,
    /// A short content hash identifying this toolchain (part of cache keys).
    pub identity: String,
}

/// One component reported by [`doctor`].
#[derive(Debug, Clone)]
pub struct Component {
    /// What it is, e.g. `clang-19`.
    pub name: String,
    /// Where it was found, when present.
    pub found: Option<PathBuf>,
    /// When missing: one sentence saying how to get it.
    pub fix: String,
}

impl Component {
    /// Whether it was found.
    pub fn ok(&self) -> bool {
        self.found.is_some()
    }
}

/// Reports every component of the selected toolchain flavour.
pub fn doctor() -> Vec<Component> {
    match wasi_sdk_root() {
        Some(root) => bootstrap::wasi_sdk_components(&root),
        None => bootstrap::debian_components(),
    }
}

/// Finds a complete toolchain, or says (in one sentence) what is missing and
/// how to get it. Never installs anything.
pub fn locate() -> Result<Toolchain> {
    let comps = doctor();
    if let Some(missing) = comps.iter().find(|c| !c.ok()) {
        bail!("{} is missing: {}", missing.name, missing.fix);
    }
    match wasi_sdk_root() {
        Some(root) => bootstrap::wasi_sdk_toolchain(&root),
        None => bootstrap::debian_toolchain(),
    }
}

/// Like [`locate`], but first installs whatever is missing (idempotent: when
/// everything is present this only checks). Prints what it does on stderr.
pub fn ensure() -> Result<Toolchain> {
    if let Ok(tc) = locate() {
        return Ok(tc);
    }
    install(false)?;
    locate()
}

/// Installs every missing component (`heddle toolchain install`). With
/// `verbose`, also reports components that were already present.
pub fn install(verbose: bool) -> Result<()> {
    match wasi_sdk_root() {
        Some(root) => bootstrap::install_wasi_sdk_extras(&root, verbose),
        None => bootstrap::install_debian(verbose),
    }
}

/// `WASI_SDK_PATH`, when set and non-empty.
pub fn wasi_sdk_root() -> Option<PathBuf> {
    std::env::var_os("WASI_SDK_PATH")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// True when `path` names a C or C++ source file heddle can compile.
pub fn is_source(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("c" | "cc" | "cpp" | "cxx" | "C" | "c++")
    )
}

/// True when `path` names a C++ source file.
pub fn is_cxx_source(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("cc" | "cpp" | "cxx" | "C" | "c++")
    )
}
