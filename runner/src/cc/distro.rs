//! Which system this is, and how the apt flavour of the toolchain is
//! installed on it.
//!
//! [`detect`] reads `/etc/os-release` (`$HEDDLE_OS_RELEASE` names another
//! file, for tests) and [`plan_for`] — a pure function — maps it to a
//! [`Plan`]: the apt packages, where LLVM lives, and where the wasi-libc
//! headers and the LLVM sources for libc++ come from. Anything else is
//! [`Unsupported`]; there a wasi-sdk named by `WASI_SDK_PATH` still works.
//!
//! | system | LLVM 19 packages from | wasi-libc headers | LLVM 19 sources (libc++) |
//! |---|---|---|---|
//! | Debian 12 bookworm | bookworm `main` | trixie's `wasi-libc`, private apt list on the machine's mirror | `apt-get source llvm-toolchain-19` from bookworm (`deb-src`, private list) |
//! | Debian 13 trixie | trixie `main` | the system's `wasi-libc` package | the pinned `llvm-toolchain-19_19.1.7.orig.tar.xz` from the machine's mirror |
//! | Ubuntu 24.04 noble | `noble-updates/universe` | trixie's `wasi-libc` `.deb`, pinned, from `deb.debian.org` | the pinned orig tarball from `deb.debian.org` |
//! | Ubuntu 22.04 jammy | apt.llvm.org (`llvm-toolchain-jammy-19`) | as Ubuntu 24.04 | as Ubuntu 24.04 |
//!
//! Every plan also installs `cmake`, `ninja-build` (the libc++ build) and
//! `xz-utils` (its sources are a `.tar.xz`).
//!
//! How the names were checked:
//!
//! * Debian 12 and 13, on a Debian 12 machine, with a private apt
//!   configuration (`Dir::Etc::SourceList` naming `deb` and `deb-src` lines
//!   for bookworm, bookworm-updates, bookworm-backports, trixie and
//!   trixie-updates on deb.debian.org; the system's sources untouched):
//!   `apt-cache madison` finds `clang-19 llvm-19 lld-19
//!   libclang-rt-19-dev-wasm32` at 1:19.1.7-3~deb12u1 (bookworm) and
//!   1:19.1.7-3 (trixie), `cmake`, `ninja-build`, and `wasi-libc`
//!   0.0~git20241209.574b88d-2 in trixie (bookworm has 0.0~git20220510, with
//!   no `pthread.h`); `dpkg -c` of trixie's `.deb`s shows the same
//!   `/usr/lib/llvm-19/{bin/clang,bin/wasm-ld,bin/llvm-ar,
//!   lib/clang/19/lib/wasi/libclang_rt.builtins-wasm32.a}` as bookworm's.
//!   The pinned files' SHA-256 are those of the signed `Sources` (bookworm
//!   and trixie list the same orig tarball) and `Packages` indices, and both
//!   were downloaded from the pool and checked.
//! * Ubuntu: not checked here (Ubuntu's archive and apt.llvm.org are not
//!   reachable from this machine). The names are those of the Debian
//!   packaging both build from: `llvm-toolchain-19`'s `debian/control`
//!   (bookworm's source) has `libclang-rt-19-dev-wasm32` (Architecture: all)
//!   and its `debian/rules` builds the wasm32 compiler-rt on every
//!   distribution; `clang-19` is in noble-updates/universe
//!   (1:19.1.1-1ubuntu1~24.04.2, as `rmadison` reports it) and Ubuntu 22.04's
//!   archive stops at clang-15, hence apt.llvm.org there. Ubuntu's own
//!   `wasi-libc` is not used: noble's predates trixie's, and heddle uses the
//!   one header set whose layouts its tests check against rustup's libc.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The LLVM major version of every plan (libc++ is built from LLVM 19
/// sources, with the same clang).
pub const LLVM_MAJOR: u32 = 19;

/// What the error and doctor messages say is supported.
pub const SUPPORTED: &str = "Debian 12 and 13, Ubuntu 22.04 and 24.04";

/// Where the system's `wasi-libc` package puts its headers (Debian 13).
pub const SYSTEM_WASI_INCLUDE: &str = "/usr/include/wasm32-wasi";

/// A file of Debian's pool, fetched from a mirror and checked against its
/// SHA-256.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedFile {
    /// What it is, for messages (the file name says which version).
    pub what: &'static str,
    /// Path below the mirror's root, e.g. `pool/main/w/wasi-libc/…`.
    pub pool_path: &'static str,
    /// Lowercase hex SHA-256.
    pub sha256: &'static str,
}

impl PinnedFile {
    /// The file name.
    pub fn name(&self) -> &'static str {
        self.pool_path.rsplit('/').next().unwrap_or(self.pool_path)
    }
}

/// Debian trixie's `wasi-libc` (architecture `all`), as the trixie
/// `Packages` index lists it.
pub const WASI_LIBC_DEB: PinnedFile = PinnedFile {
    what: "Debian trixie wasi-libc",
    pool_path: "pool/main/w/wasi-libc/wasi-libc_0.0~git20241209.574b88d-2_all.deb",
    sha256: "b7716260051d289248b7667f81fa2792c125d888ff51da3fa09c6272cc0bd11d",
};

/// The LLVM 19.1.7 sources of `llvm-toolchain-19` (bookworm's
/// 1:19.1.7-3~deb12u1 and trixie's 1:19.1.7-3 share it), as their
/// `Sources` indices list it.
pub const LLVM_ORIG: PinnedFile = PinnedFile {
    what: "Debian llvm-toolchain-19 sources",
    pool_path: "pool/main/l/llvm-toolchain-19/llvm-toolchain-19_19.1.7.orig.tar.xz",
    sha256: "ae498f3bc58ae2d9f64ef5f0c035c4240152bf015a5b7738b15c22e93bdc97ce",
};

/// Where the wasi-libc headers come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Headers {
    /// The newest `wasi-libc` of a Debian suite, fetched with a private apt
    /// configuration from the machine's Debian mirror into the cache.
    DebianSuite(&'static str),
    /// An apt package of the system (installed with the others).
    SystemPackage(&'static str),
    /// A pinned `.deb`, extracted into the cache.
    Pinned(PinnedFile),
}

/// Where the LLVM sources that libc++ is built from come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LlvmSources {
    /// `apt-get source --download-only llvm-toolchain-19` from a Debian
    /// suite's `deb-src` index (private apt configuration).
    DebianSuite(&'static str),
    /// The pinned orig tarball.
    Pinned(PinnedFile),
}

/// Which Debian mirror the Debian files come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mirror {
    /// The one the machine's apt sources already use (Debian).
    System,
    /// `http://deb.debian.org/debian` (Ubuntu).
    DebOrg,
}

/// An apt package and a file that shows it is installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AptPackage {
    /// The package name.
    pub name: String,
    /// A file it installs.
    pub probe: PathBuf,
    /// It comes from [`Plan::llvm_repo`] when the plan has one.
    pub llvm: bool,
}

/// An apt repository heddle adds to the system when the LLVM packages have
/// no installation candidate (Ubuntu 22.04: apt.llvm.org).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AptRepo {
    /// Who publishes it, for messages.
    pub name: &'static str,
    /// `deb URI SUITE COMPONENT`, as people write it.
    pub line: String,
    /// The sources file heddle writes (`deb [signed-by=KEYRING] …`).
    pub list_file: PathBuf,
    /// Where its signing key is fetched from (HTTPS).
    pub key_url: &'static str,
    /// Where the key is stored.
    pub keyring: PathBuf,
    /// The key's fingerprint, checked when `gpg` is there to read it.
    pub fingerprint: &'static str,
}

impl AptRepo {
    /// The line written into [`AptRepo::list_file`].
    pub fn sources_line(&self) -> String {
        let rest = self.line.strip_prefix("deb ").unwrap_or(&self.line);
        format!("deb [signed-by={}] {rest}\n", self.keyring.display())
    }
}

/// The supported releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Debian 12 bookworm.
    Debian12,
    /// Debian 13 trixie.
    Debian13,
    /// Ubuntu 22.04 jammy.
    Ubuntu2204,
    /// Ubuntu 24.04 noble.
    Ubuntu2404,
}

impl Release {
    /// Its name, e.g. `Debian 12 (bookworm)`.
    pub fn name(self) -> &'static str {
        match self {
            Release::Debian12 => "Debian 12 (bookworm)",
            Release::Debian13 => "Debian 13 (trixie)",
            Release::Ubuntu2204 => "Ubuntu 22.04 (jammy)",
            Release::Ubuntu2404 => "Ubuntu 24.04 (noble)",
        }
    }
}

/// How the apt flavour of the toolchain is installed on one system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The release whose packages are used.
    pub release: Release,
    /// The system as messages name it (a derivative says which release it
    /// is taken for).
    pub system: String,
    /// The LLVM major version.
    pub llvm_major: u32,
    /// Where LLVM is installed, `/usr/lib/llvm-19`.
    pub llvm_prefix: PathBuf,
    /// Every apt package, in install order.
    pub packages: Vec<AptPackage>,
    /// Where the LLVM packages come from when the system's archive lacks them.
    pub llvm_repo: Option<AptRepo>,
    /// The wasi-libc headers.
    pub headers: Headers,
    /// The LLVM sources of libc++.
    pub llvm_sources: LlvmSources,
    /// The Debian mirror for Debian files.
    pub mirror: Mirror,
    /// Said after a failed `apt-get install`.
    pub apt_hint: Option<&'static str>,
}

impl Plan {
    /// The plan of `release`, named `system` in messages.
    pub fn new(release: Release, system: String) -> Plan {
        let n = LLVM_MAJOR;
        let prefix = PathBuf::from(format!("/usr/lib/llvm-{n}"));
        let llvm = |name: String, rel: String| AptPackage {
            probe: prefix.join(rel),
            name,
            llvm: true,
        };
        let tool = |name: &str, probe: &str| AptPackage {
            name: name.to_string(),
            probe: PathBuf::from(probe),
            llvm: false,
        };
        let mut packages = vec![
            llvm(format!("clang-{n}"), "bin/clang".into()),
            llvm(format!("llvm-{n}"), "bin/llvm-ar".into()),
            llvm(format!("lld-{n}"), "bin/wasm-ld".into()),
            llvm(
                format!("libclang-rt-{n}-dev-wasm32"),
                format!("lib/clang/{n}/lib/wasi/libclang_rt.builtins-wasm32.a"),
            ),
            // To build libc++ with threads (super::libcxx).
            tool("cmake", "/usr/bin/cmake"),
            tool("ninja-build", "/usr/bin/ninja"),
            tool("xz-utils", "/usr/bin/xz"),
        ];
        let (headers, llvm_sources, mirror) = match release {
            Release::Debian12 => (
                Headers::DebianSuite("trixie"),
                LlvmSources::DebianSuite("bookworm"),
                Mirror::System,
            ),
            Release::Debian13 => {
                packages.push(AptPackage {
                    name: "wasi-libc".into(),
                    probe: Path::new(SYSTEM_WASI_INCLUDE).join("pthread.h"),
                    llvm: false,
                });
                (
                    Headers::SystemPackage("wasi-libc"),
                    LlvmSources::Pinned(LLVM_ORIG),
                    Mirror::System,
                )
            }
            Release::Ubuntu2204 | Release::Ubuntu2404 => (
                Headers::Pinned(WASI_LIBC_DEB),
                LlvmSources::Pinned(LLVM_ORIG),
                Mirror::DebOrg,
            ),
        };
        let llvm_repo = (release == Release::Ubuntu2204).then(|| AptRepo {
            name: "apt.llvm.org",
            line: format!("deb http://apt.llvm.org/jammy/ llvm-toolchain-jammy-{n} main"),
            list_file: PathBuf::from("/etc/apt/sources.list.d/heddle-apt-llvm-org.list"),
            key_url: "https://apt.llvm.org/llvm-snapshot.gpg.key",
            keyring: PathBuf::from("/etc/apt/keyrings/heddle-apt-llvm-org.asc"),
            fingerprint: "6084F3CF814B57C1CF12EFD515CF4D18AF4F7421",
        });
        let apt_hint = match release {
            Release::Ubuntu2404 => Some(
                "clang-19, llvm-19, lld-19 and libclang-rt-19-dev-wasm32 are in noble-updates/universe: enable the universe component and noble-updates",
            ),
            Release::Ubuntu2204 => Some(
                "the LLVM 19 packages come from apt.llvm.org's llvm-toolchain-jammy-19 repository",
            ),
            _ => None,
        };
        Plan {
            release,
            system,
            llvm_major: n,
            llvm_prefix: prefix,
            packages,
            llvm_repo,
            headers,
            llvm_sources,
            mirror,
            apt_hint,
        }
    }

    /// A file under the LLVM installation.
    pub fn llvm(&self, rel: &str) -> PathBuf {
        self.llvm_prefix.join(rel)
    }

    /// compiler-rt's wasm32 builtins archive.
    pub fn builtins_archive(&self) -> PathBuf {
        self.llvm(&format!(
            "lib/clang/{}/lib/wasi/libclang_rt.builtins-wasm32.a",
            self.llvm_major
        ))
    }

    /// clang's own headers.
    pub fn clang_include(&self) -> PathBuf {
        self.llvm(&format!("lib/clang/{}/include", self.llvm_major))
    }

    /// The package names, space-separated.
    pub fn package_names(&self) -> String {
        self.packages
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The fields of an os-release file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OsRelease {
    fields: BTreeMap<String, String>,
}

impl OsRelease {
    /// A field, when present and non-empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

/// Parses os-release text (`KEY=value` lines, values unquoted or in single
/// or double quotes, `\` escapes in double quotes, `#` comments). Lines that
/// are not assignments are ignored.
pub fn parse_os_release(text: &str) -> OsRelease {
    let mut fields = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, raw)) = line.split_once('=') else {
            continue;
        };
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let raw = raw.trim();
        let value = if let Some(inner) = raw.strip_prefix('"') {
            let mut out = String::new();
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => {
                        if let Some(n) = chars.next() {
                            out.push(n);
                        }
                    }
                    c => out.push(c),
                }
            }
            out
        } else if let Some(inner) = raw.strip_prefix('\'') {
            inner.split('\'').next().unwrap_or("").to_string()
        } else {
            raw.to_string()
        };
        fields.insert(key.to_string(), value);
    }
    OsRelease { fields }
}

/// A system `heddle toolchain install` does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsupported {
    /// A known system that is not supported, e.g. `Fedora Linux 40`.
    System(String),
    /// The os-release file cannot be read or names no system.
    Unknown {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
}

impl Unsupported {
    /// One sentence for `heddle toolchain doctor`: what the system is and
    /// that it is not supported.
    pub fn problem(&self) -> String {
        match self {
            Unsupported::System(s) => format!(
                "{s} is not supported by `heddle toolchain install` (it supports {SUPPORTED})"
            ),
            Unsupported::Unknown { path, why } => format!(
                "cannot tell which system this is ({}: {why}; HEDDLE_OS_RELEASE names another file): `heddle toolchain install` supports {SUPPORTED}",
                path.display()
            ),
        }
    }
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}; set WASI_SDK_PATH=/path/to/wasi-sdk to use a wasi-sdk >= 22 instead",
            self.problem()
        )
    }
}

impl std::error::Error for Unsupported {}

/// How an unsupported system is named: `PRETTY_NAME`, else `NAME
/// VERSION_ID`, else `ID`.
fn display_name(os: &OsRelease) -> String {
    if let Some(p) = os.get("PRETTY_NAME") {
        return p.to_string();
    }
    match (os.get("NAME").or(os.get("ID")), os.get("VERSION_ID")) {
        (Some(n), Some(v)) => format!("{n} {v}"),
        (Some(n), None) => n.to_string(),
        (None, _) => "this system".to_string(),
    }
}

fn debian_release(version: Option<&str>, codename: Option<&str>) -> Option<Release> {
    match (version, codename) {
        (Some("12"), _) | (None, Some("bookworm")) => Some(Release::Debian12),
        (Some("13"), _) | (None, Some("trixie")) => Some(Release::Debian13),
        _ => None,
    }
}

fn ubuntu_release(version: Option<&str>, codename: Option<&str>) -> Option<Release> {
    match (version, codename) {
        (Some("22.04"), _) | (None, Some("jammy")) => Some(Release::Ubuntu2204),
        (Some("24.04"), _) | (None, Some("noble")) => Some(Release::Ubuntu2404),
        _ => None,
    }
}

/// The plan for the system `os` describes (`path` is where it was read,
/// for messages). Derivatives are taken for the release they are built on:
/// `ID_LIKE` naming `ubuntu` with `UBUNTU_CODENAME` jammy or noble (Linux
/// Mint, Pop!_OS), or naming `debian` with `VERSION_CODENAME` bookworm or
/// trixie.
pub fn plan_for(os: &OsRelease, path: &Path) -> Result<Plan, Unsupported> {
    let Some(id) = os.get("ID").map(str::to_ascii_lowercase) else {
        return Err(Unsupported::Unknown {
            path: path.to_path_buf(),
            why: "no ID= line".into(),
        });
    };
    let version = os.get("VERSION_ID");
    let codename = os.get("VERSION_CODENAME");
    let found = match id.as_str() {
        "debian" => debian_release(version, codename).map(|r| (r, r.name().to_string())),
        "ubuntu" => ubuntu_release(version, codename.or(os.get("UBUNTU_CODENAME")))
            .map(|r| (r, r.name().to_string())),
        _ => {
            let like: Vec<String> = os
                .get("ID_LIKE")
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_ascii_lowercase)
                .collect();
            let like = |d: &str| like.iter().any(|l| l == d);
            let release = if like("ubuntu") {
                ubuntu_release(None, os.get("UBUNTU_CODENAME"))
            } else if like("debian") {
                debian_release(None, codename)
            } else {
                None
            };
            release.map(|r| (r, format!("{} (as {})", display_name(os), r.name())))
        }
    };
    match found {
        Some((release, system)) => Ok(Plan::new(release, system)),
        None => Err(Unsupported::System(display_name(os))),
    }
}

/// The os-release file: `$HEDDLE_OS_RELEASE`, else `/etc/os-release`, else
/// `/usr/lib/os-release` (where `/etc/os-release` usually links to).
pub fn os_release_path() -> PathBuf {
    if let Some(p) = std::env::var_os("HEDDLE_OS_RELEASE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let etc = PathBuf::from("/etc/os-release");
    let usr = PathBuf::from("/usr/lib/os-release");
    if !etc.exists() && usr.exists() {
        return usr;
    }
    etc
}

/// The plan for this machine.
pub fn detect() -> Result<Plan, Unsupported> {
    plan_from_file(&os_release_path())
}

/// The plan for the system the os-release file at `path` describes.
pub fn plan_from_file(path: &Path) -> Result<Plan, Unsupported> {
    match std::fs::read(path) {
        Ok(bytes) => plan_for(&parse_os_release(&String::from_utf8_lossy(&bytes)), path),
        Err(_) if cfg!(target_os = "macos") => Err(Unsupported::System("macOS".into())),
        Err(e) => Err(Unsupported::Unknown {
            path: path.to_path_buf(),
            why: match e.kind() {
                std::io::ErrorKind::NotFound => "no such file".to_string(),
                _ => e.to_string(),
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/data/os-release")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn plan(name: &str) -> Result<Plan, Unsupported> {
        plan_for(&parse_os_release(&fixture(name)), Path::new(name))
    }

    fn names(p: &Plan) -> Vec<&str> {
        p.packages.iter().map(|p| p.name.as_str()).collect()
    }

    const LLVM_PACKAGES: [&str; 4] = ["clang-19", "llvm-19", "lld-19", "libclang-rt-19-dev-wasm32"];
    const TOOLS: [&str; 3] = ["cmake", "ninja-build", "xz-utils"];

    #[test]
    fn os_release_values_are_unquoted() {
        let os = parse_os_release(
            "# comment\nID=debian\nNAME=\"Debian \\\"GNU\\\"/Linux\"\nVERSION='12 (x)'\nEMPTY=\"\"\nnot a line\n=x\nBAD KEY=1\n",
        );
        assert_eq!(os.get("ID"), Some("debian"));
        assert_eq!(os.get("NAME"), Some("Debian \"GNU\"/Linux"));
        assert_eq!(os.get("VERSION"), Some("12 (x)"));
        assert_eq!(os.get("EMPTY"), None);
        assert_eq!(os.get("BAD KEY"), None);
    }

    #[test]
    fn debian_12_is_the_plan_the_toolchain_was_built_with() {
        let p = plan("debian-12").unwrap();
        assert_eq!(p.release, Release::Debian12);
        assert_eq!(p.system, "Debian 12 (bookworm)");
        assert_eq!(p.llvm_major, 19);
        assert_eq!(p.llvm_prefix, Path::new("/usr/lib/llvm-19"));
        assert_eq!(names(&p), [&LLVM_PACKAGES[..], &TOOLS[..]].concat());
        assert_eq!(p.llvm_repo, None);
        assert_eq!(p.headers, Headers::DebianSuite("trixie"));
        assert_eq!(p.llvm_sources, LlvmSources::DebianSuite("bookworm"));
        assert_eq!(p.mirror, Mirror::System);
        assert_eq!(
            p.builtins_archive(),
            Path::new("/usr/lib/llvm-19/lib/clang/19/lib/wasi/libclang_rt.builtins-wasm32.a")
        );
        assert_eq!(
            p.clang_include(),
            Path::new("/usr/lib/llvm-19/lib/clang/19/include")
        );
        let probe = |n: &str| {
            p.packages
                .iter()
                .find(|x| x.name == n)
                .unwrap()
                .probe
                .clone()
        };
        assert_eq!(probe("clang-19"), Path::new("/usr/lib/llvm-19/bin/clang"));
        assert_eq!(probe("lld-19"), Path::new("/usr/lib/llvm-19/bin/wasm-ld"));
        assert_eq!(probe("llvm-19"), Path::new("/usr/lib/llvm-19/bin/llvm-ar"));
        assert_eq!(probe("libclang-rt-19-dev-wasm32"), p.builtins_archive());
    }

    #[test]
    fn debian_13_takes_the_headers_from_its_own_wasi_libc() {
        let p = plan("debian-13").unwrap();
        assert_eq!(p.release, Release::Debian13);
        assert_eq!(p.system, "Debian 13 (trixie)");
        assert_eq!(p.llvm_prefix, Path::new("/usr/lib/llvm-19"));
        assert_eq!(
            names(&p),
            [&LLVM_PACKAGES[..], &TOOLS[..], &["wasi-libc"]].concat()
        );
        assert_eq!(p.headers, Headers::SystemPackage("wasi-libc"));
        let wasi = p.packages.iter().find(|x| x.name == "wasi-libc").unwrap();
        assert_eq!(wasi.probe, Path::new("/usr/include/wasm32-wasi/pthread.h"));
        assert_eq!(p.llvm_sources, LlvmSources::Pinned(LLVM_ORIG));
        assert_eq!(p.llvm_repo, None);
        assert_eq!(p.mirror, Mirror::System);
    }

    #[test]
    fn ubuntu_24_04_uses_its_archive_and_debians_files() {
        let p = plan("ubuntu-24.04").unwrap();
        assert_eq!(p.release, Release::Ubuntu2404);
        assert_eq!(p.system, "Ubuntu 24.04 (noble)");
        assert_eq!(names(&p), [&LLVM_PACKAGES[..], &TOOLS[..]].concat());
        assert_eq!(p.llvm_repo, None);
        assert_eq!(p.headers, Headers::Pinned(WASI_LIBC_DEB));
        assert_eq!(p.llvm_sources, LlvmSources::Pinned(LLVM_ORIG));
        assert_eq!(p.mirror, Mirror::DebOrg);
        assert!(p.apt_hint.unwrap().contains("universe"));
    }

    #[test]
    fn ubuntu_22_04_takes_llvm_from_apt_llvm_org() {
        let p = plan("ubuntu-22.04").unwrap();
        assert_eq!(p.release, Release::Ubuntu2204);
        assert_eq!(names(&p), [&LLVM_PACKAGES[..], &TOOLS[..]].concat());
        let repo = p.llvm_repo.clone().expect("apt.llvm.org");
        assert_eq!(
            repo.line,
            "deb http://apt.llvm.org/jammy/ llvm-toolchain-jammy-19 main"
        );
        assert_eq!(
            repo.sources_line(),
            "deb [signed-by=/etc/apt/keyrings/heddle-apt-llvm-org.asc] http://apt.llvm.org/jammy/ llvm-toolchain-jammy-19 main\n"
        );
        let from_repo: Vec<&str> = p
            .packages
            .iter()
            .filter(|x| x.llvm)
            .map(|x| x.name.as_str())
            .collect();
        assert_eq!(from_repo, LLVM_PACKAGES);
        assert_eq!(p.headers, Headers::Pinned(WASI_LIBC_DEB));
        assert_eq!(p.llvm_sources, LlvmSources::Pinned(LLVM_ORIG));
        assert_eq!(p.mirror, Mirror::DebOrg);
    }

    #[test]
    fn a_derivative_is_taken_for_the_release_it_is_built_on() {
        let p = plan("linuxmint-21.3").unwrap();
        assert_eq!(p.release, Release::Ubuntu2204);
        assert_eq!(p.system, "Linux Mint 21.3 (as Ubuntu 22.04 (jammy))");
        let os = parse_os_release("ID=raspbian\nID_LIKE=debian\nVERSION_CODENAME=bookworm\n");
        assert_eq!(
            plan_for(&os, Path::new("x")).unwrap().release,
            Release::Debian12
        );
    }

    #[test]
    fn other_systems_are_named_and_unsupported() {
        for (file, system) in [
            ("fedora-40", "Fedora Linux 40 (Container Image)"),
            ("alpine-3.20", "Alpine Linux v3.20"),
            ("debian-11", "Debian GNU/Linux 11 (bullseye)"),
        ] {
            let e = plan(file).unwrap_err();
            assert_eq!(e, Unsupported::System(system.into()), "{file}");
            let msg = e.to_string();
            assert_eq!(
                msg,
                format!(
                    "{system} is not supported by `heddle toolchain install` (it supports Debian 12 and 13, Ubuntu 22.04 and 24.04); set WASI_SDK_PATH=/path/to/wasi-sdk to use a wasi-sdk >= 22 instead"
                )
            );
            assert!(!msg.contains('\n'));
        }
        let os = parse_os_release("ID=ubuntu\nVERSION_ID=20.04\nNAME=Ubuntu\n");
        assert_eq!(
            plan_for(&os, Path::new("x")).unwrap_err(),
            Unsupported::System("Ubuntu 20.04".into())
        );
    }

    #[test]
    fn garbage_and_missing_files_are_unknown() {
        let e = plan("garbage").unwrap_err();
        assert_eq!(
            e,
            Unsupported::Unknown {
                path: "garbage".into(),
                why: "no ID= line".into()
            }
        );
        assert!(e.problem().starts_with("cannot tell which system this is (garbage: no ID= line; HEDDLE_OS_RELEASE names another file)"), "{}", e.problem());
        let missing = Path::new(env!("CARGO_MANIFEST_DIR")).join("no-such-os-release");
        let e = plan_from_file(&missing).unwrap_err();
        assert_eq!(
            e,
            Unsupported::Unknown {
                path: missing.clone(),
                why: "no such file".into()
            }
        );
        assert_eq!(
            e.to_string(),
            format!(
                "cannot tell which system this is ({}: no such file; HEDDLE_OS_RELEASE names another file): `heddle toolchain install` supports Debian 12 and 13, Ubuntu 22.04 and 24.04; set WASI_SDK_PATH=/path/to/wasi-sdk to use a wasi-sdk >= 22 instead",
                missing.display()
            )
        );
        assert_eq!(
            plan_for(&parse_os_release(""), Path::new("/e")).unwrap_err(),
            Unsupported::Unknown {
                path: "/e".into(),
                why: "no ID= line".into()
            }
        );
    }

    #[test]
    fn pinned_files_are_named() {
        assert_eq!(
            WASI_LIBC_DEB.name(),
            "wasi-libc_0.0~git20241209.574b88d-2_all.deb"
        );
        assert_eq!(LLVM_ORIG.name(), "llvm-toolchain-19_19.1.7.orig.tar.xz");
        for f in [WASI_LIBC_DEB, LLVM_ORIG] {
            assert_eq!(f.sha256.len(), 64);
            assert!(f.sha256.bytes().all(|b| b.is_ascii_hexdigit()));
        }
    }
}
