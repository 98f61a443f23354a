//! The C/C++ toolchain: finding it, installing it, and compiling targets.
//!
//! heddle compiles ordinary pthread C/C++ to `wasm32-wasip1-threads`. Two
//! toolchain flavours are supported:
//!
//! * **A user's wasi-sdk** (≥ 22) named by `WASI_SDK_PATH`: its clang, its
//!   sysroot and its threads-enabled libc++ are used as they are.
//! * **apt packages** (the default on Debian 12 and 13, Ubuntu 22.04 and
//!   24.04; [`distro`] reads `/etc/os-release` and says which packages and
//!   files each uses): clang-19 / lld-19 / compiler-rt, the threads build of
//!   wasi-libc that ships with rustup's `wasm32-wasip1-threads` target, the
//!   wasi-libc headers of Debian trixie (bookworm's are too old), and
//!   libc++/libc++abi with threads built once from the LLVM 19 sources of
//!   Debian's `llvm-toolchain-19` source package (`libcxx`; the archive's
//!   wasm libc++ has no threads), assembled into a sysroot and a clang
//!   resource directory under the cache ([`crate::paths::cache_root`]). See
//!   `bootstrap` for the steps.
//!
//! On any other system heddle installs nothing: `WASI_SDK_PATH` is the way.
//!
//! [`locate`] finds a complete toolchain without side effects, [`ensure`]
//! installs what is missing first (this is what commands that compile call),
//! and [`doctor`] reports each component.

mod apt;
pub(crate) mod bootstrap;
pub mod compile;
pub mod distro;
pub mod dltable;
pub(crate) mod flags;
pub(crate) mod glue;
pub mod gnu;
pub(crate) mod libcxx;
pub mod missing;
pub(crate) mod sdk;

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

pub use compile::{compile, compile_cached, drive, CcRequest};

/// Which kind of toolchain is in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flavor {
    /// Debian's or Ubuntu's LLVM 19 packages plus a sysroot assembled by
    /// heddle.
    Apt {
        /// The system, e.g. `Debian 12 (bookworm)`.
        system: String,
    },
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
    /// `-resource-dir`, when heddle assembled one (apt flavour).
    pub resource_dir: Option<PathBuf>,
    /// Whether libc++ in this toolchain was built with thread support
    /// (`std::thread`, `std::mutex`): heddle's own build (apt flavour)
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

/// The toolchain flavour this environment selects.
enum Selected {
    WasiSdk(PathBuf),
    Apt(Box<distro::Plan>),
    Unsupported(distro::Unsupported),
}

fn selected() -> Selected {
    match wasi_sdk_root() {
        Some(root) => Selected::WasiSdk(root),
        None => match distro::detect() {
            Ok(plan) => Selected::Apt(Box::new(plan)),
            Err(u) => Selected::Unsupported(u),
        },
    }
}

/// The system's plan when the apt flavour is selected (`WASI_SDK_PATH`
/// unset), or why there is none.
pub fn system() -> Option<std::result::Result<distro::Plan, distro::Unsupported>> {
    match selected() {
        Selected::WasiSdk(_) => None,
        Selected::Apt(plan) => Some(Ok(*plan)),
        Selected::Unsupported(u) => Some(Err(u)),
    }
}

/// Reports every component of the selected toolchain flavour; on a system
/// heddle cannot install on, that and what is missing instead.
pub fn doctor() -> Vec<Component> {
    match selected() {
        Selected::WasiSdk(root) => bootstrap::wasi_sdk_components(&root),
        Selected::Apt(plan) => bootstrap::apt_components(&plan),
        Selected::Unsupported(u) => bootstrap::unsupported_components(&u),
    }
}

/// Finds a complete toolchain, or says (in one sentence) what is missing and
/// how to get it. Never installs anything.
pub fn locate() -> Result<Toolchain> {
    let sel = selected();
    let comps = match &sel {
        Selected::WasiSdk(root) => bootstrap::wasi_sdk_components(root),
        Selected::Apt(plan) => bootstrap::apt_components(plan),
        Selected::Unsupported(u) => return Err(u.clone().into()),
    };
    if let Some(missing) = comps.iter().find(|c| !c.ok()) {
        bail!("{} is missing: {}", missing.name, missing.fix);
    }
    match &sel {
        Selected::WasiSdk(root) => bootstrap::wasi_sdk_toolchain(root),
        Selected::Apt(plan) => bootstrap::apt_toolchain(plan),
        Selected::Unsupported(u) => Err(u.clone().into()),
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
/// `verbose`, also reports components that were already present. On a
/// system heddle does not know, fails in one sentence naming it and
/// `WASI_SDK_PATH`, before touching anything.
pub fn install(verbose: bool) -> Result<()> {
    match selected() {
        Selected::WasiSdk(root) => bootstrap::install_wasi_sdk_extras(&root, verbose),
        Selected::Apt(plan) => bootstrap::install_apt(&plan, verbose),
        Selected::Unsupported(u) => Err(u.into()),
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

/// Writes `libpthread.a`, `libm.a` and `librt.a` into a sysroot's library
/// directory as empty archives (what `ar rc libx.a` with no members
/// writes): wasi-libc's `libc.a` holds their functions, and `-lpthread`,
/// `-lm` and `-lrt` must still link. Both sysroots have them: the
/// installed one ([`bootstrap`]) and the one libc++ is built against
/// ([`libcxx`]).
fn write_empty_libs(libdir: &Path) -> Result<()> {
    const EMPTY_AR: &[u8] = b"!<arch>\n";
    for f in ["libpthread.a", "libm.a", "librt.a"] {
        std::fs::write(libdir.join(f), EMPTY_AR)?;
    }
    Ok(())
}
