//! `heddle cc`: compiling pthread C/C++ to a module heddle can run.
//!
//! The driver adds what every target needs: the target triple and sysroot,
//! `-pthread`, `-g` (DWARF is what turns sites into `file:line`), `-O1` unless
//! the user chose an optimisation level, shared imported memory, the guest
//! SDK on the include path and its compatibility library on the link line.
//! C++ additionally gets `-fno-exceptions -fno-strict-return` (falling off the
//! end of a non-void function is `unreachable` at -O1, a trap that has nothing
//! to do with concurrency). After linking, a module that contains one of
//! wasm-ld's trap stubs is rejected with the symbol named.
//!
//! Modules are reproducible: the same sources, flags and toolchain give the
//! same bytes whatever the checkout path, the cache path, the working
//! directory, the user and the time. Debug info and `__FILE__` name files
//! relative to the project root (the nearest directory above the sources
//! holding `.git` or `heddle.toml`, else the sources' own directory), and
//! the sysroot, clang's resource directory and the guest SDK under fixed
//! names (`/heddle/sysroot`, `/heddle/resource`, `/heddle/sdk`).

use super::flags::{path_map_flags, project_root, target_flags, EMULATION_DEFINES};
use super::{is_cxx_source, is_source, Toolchain};
use crate::modinfo::ModuleInfo;
use crate::paths;
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Linear memory limit of every module: 64 MiB.
pub const MAX_MEMORY: u64 = 64 << 20;

/// Flags accepted by old C (implicit declarations, implicit int, K&R
/// definitions) that clang 19 rejects by default.
pub const LEGACY_FLAGS: &[&str] = &[
    "-std=gnu89",
    "-Wno-error=implicit-function-declaration",
    "-Wno-error=implicit-int",
    "-Wno-error=int-conversion",
    "-Wno-error=incompatible-pointer-types",
    "-Wno-error=return-type",
    "-Wno-deprecated-non-prototype",
    "-Wno-implicit-function-declaration",
    "-Wno-implicit-int",
];

/// One compiler invocation.
#[derive(Debug, Clone, Default)]
pub struct CcRequest {
    /// Everything the user passed: clang flags, source files, `-o out`.
    pub args: Vec<String>,
    /// Accept old C (see [`LEGACY_FLAGS`]).
    pub legacy: bool,
    /// The directory file names in the module are relative to (default:
    /// the project root above the working directory, see [`project_root`]).
    pub root: Option<PathBuf>,
}

impl CcRequest {
    /// Source files among the arguments.
    pub fn sources(&self) -> Vec<PathBuf> {
        let mut skip = false;
        let mut out = Vec::new();
        for a in &self.args {
            if std::mem::take(&mut skip) {
                continue;
            }
            if takes_value(a) {
                skip = true;
                continue;
            }
            let p = Path::new(a);
            if !a.starts_with('-') && is_source(p) {
                out.push(p.to_path_buf());
            }
        }
        out
    }

    /// The `-o` output, if given.
    pub fn output(&self) -> Option<PathBuf> {
        let mut it = self.args.iter();
        while let Some(a) = it.next() {
            if a == "-o" {
                return it.next().map(PathBuf::from);
            }
            if let Some(rest) = a.strip_prefix("-o") {
                if !rest.is_empty() {
                    return Some(PathBuf::from(rest));
                }
            }
        }
        None
    }

    fn has(&self, flag: &str) -> bool {
        self.args.iter().any(|a| a == flag)
    }

    /// Whether the invocation links (no `-c`, `-S`, `-E`).
    pub fn links(&self) -> bool {
        !(self.has("-c") || self.has("-S") || self.has("-E") || self.has("-fsyntax-only"))
    }

    fn is_cxx(&self) -> bool {
        self.sources().iter().any(|s| is_cxx_source(s))
    }
}

/// Flags that take the next argument as their value.
fn takes_value(flag: &str) -> bool {
    matches!(
        flag,
        "-o" | "-I"
            | "-L"
            | "-l"
            | "-D"
            | "-U"
            | "-include"
            | "-isystem"
            | "-x"
            | "-MF"
            | "-MT"
            | "-Xlinker"
            | "-idirafter"
            | "-iquote"
    )
}

/// The full clang command line for `req` (without running it).
pub fn command_line(tc: &Toolchain, req: &CcRequest) -> Command {
    let cxx = req.is_cxx();
    let mut cmd = Command::new(if cxx { &tc.clangxx } else { &tc.clang });
    cmd.args(target_flags(tc));
    cmd.arg("-g");
    let root = req
        .root
        .clone()
        .unwrap_or_else(|| project_root(&std::env::current_dir().unwrap_or_default()));
    cmd.args(path_map_flags(tc, &root));
    if !req.args.iter().any(|a| a.starts_with("-O")) {
        cmd.arg("-O1");
    }
    cmd.arg(format!("-I{}", tc.sdk_include.display()));
    cmd.arg("-include")
        .arg(tc.sdk_include.join("heddle_compat.h"));
    cmd.args(EMULATION_DEFINES);
    if cxx {
        cmd.args(["-fno-exceptions", "-fno-strict-return"]);
    }
    if req.legacy {
        cmd.args(LEGACY_FLAGS);
    }
    cmd.args(&req.args);
    if req.links() {
        cmd.arg(format!(
            "-Wl,--import-memory,--export-memory,--max-memory={MAX_MEMORY}"
        ));
        cmd.arg(&tc.compat_lib);
    }
    cmd
}

impl CcRequest {
    /// Checks the arguments without a toolchain: at least one existing C/C++
    /// source and an output. Returns the output path.
    pub fn check(&self) -> Result<PathBuf> {
        let sources = self.sources();
        if sources.is_empty() {
            if let Some(other) = self
                .args
                .iter()
                .find(|a| !a.starts_with('-') && Path::new(a).exists())
            {
                bail!("{other} is not a C or C++ source file (expected .c, .cc, .cpp or .cxx)");
            }
            if let Some(missing) = self
                .args
                .iter()
                .find(|a| !a.starts_with('-') && !Path::new(a).exists())
            {
                bail!("{missing}: no such file");
            }
            bail!("no C or C++ source file given");
        }
        for s in &sources {
            if !s.exists() {
                bail!("{}: no such file", s.display());
            }
        }
        self.output().context("no output given: use -o out.wasm")
    }
}

/// Runs clang for `req`. Compile errors come back with clang's own message;
/// a linked module is checked for trap stubs.
pub fn compile(tc: &Toolchain, req: &CcRequest) -> Result<PathBuf> {
    let out = req.check()?;
    let mut cmd = command_line(tc, req);
    let res = cmd
        .output()
        .with_context(|| format!("cannot run {}", tc.clang.display()))?;
    // Warnings go to the user as they are.
    let stderr = String::from_utf8_lossy(&res.stderr);
    if !res.status.success() {
        let _ = fs::remove_file(&out);
        bail!("compilation failed:\n{}", stderr.trim_end());
    }
    if !stderr.trim().is_empty() {
        eprintln!("{}", stderr.trim_end());
    }
    if req.links() {
        let bytes = fs::read(&out).with_context(|| format!("cannot read {}", out.display()))?;
        if let Err(e) = check_linked(&bytes) {
            let _ = fs::remove_file(&out);
            return Err(e);
        }
    }
    Ok(out)
}

/// Rejects a linked module that contains wasm-ld trap stubs.
pub fn check_linked(bytes: &[u8]) -> Result<()> {
    let info = ModuleInfo::parse(bytes)?;
    if let Some(stub) = info.trap_stubs().first() {
        let why = if stub.starts_with("signature_mismatch:") {
            "a function is called with a signature that differs from its definition"
        } else {
            "a weak symbol is undefined"
        };
        bail!(
            "module rejected: wasm-ld inserted the trap stub `{stub}` ({why}); it would trap at run time for a reason unrelated to concurrency — fix the declaration"
        );
    }
    Ok(())
}

/// Compiles `sources` (with extra clang `flags`) into a content-addressed
/// cache entry and returns its path; a second call with unchanged inputs
/// returns at once. The key covers everything that ends up in the module:
/// the toolchain, the flags, each source's name (relative to the project
/// root, as debug info records it) and contents, and every header beside
/// the sources. Nothing in it depends on where the project or the cache is.
pub fn compile_cached(tc: &Toolchain, sources: &[PathBuf], flags: &[String]) -> Result<PathBuf> {
    let mut canonical = Vec::new();
    for s in sources {
        canonical.push(
            s.canonicalize()
                .with_context(|| format!("{}: cannot read source", s.display()))?,
        );
    }
    let first_dir = canonical[0]
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let root = project_root(&first_dir);
    let relative = |p: &Path| -> String {
        p.strip_prefix(&root)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    let mut key = format!("heddle-cc-2\n{}\n{}\n", tc.identity, flags.join("\x1f"));
    let mut dirs = Vec::new();
    for s in &canonical {
        let text = fs::read(s).with_context(|| format!("{}: cannot read source", s.display()))?;
        key.push_str(&format!("{}={}\n", relative(s), paths::sha256_hex(&text)));
        let dir = s.parent().map(Path::to_path_buf).unwrap_or_default();
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    for d in &dirs {
        let dir = if d.as_os_str().is_empty() {
            Path::new(".")
        } else {
            d.as_path()
        };
        let mut headers: Vec<PathBuf> = fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| {
                        matches!(
                            p.extension().and_then(|e| e.to_str()),
                            Some("h" | "hpp" | "hh" | "hxx" | "inc")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        headers.sort();
        for h in headers {
            if let Ok(text) = fs::read(&h) {
                key.push_str(&format!("{}={}\n", relative(&h), paths::sha256_hex(&text)));
            }
        }
    }
    let hash = paths::sha256_hex(key.as_bytes());
    let dir = paths::cache_dir("cc")?;
    let out = dir.join(format!("{}.wasm", &hash[..32]));
    if out.exists() {
        return Ok(out);
    }
    let _lock = paths::CacheLock::acquire(&dir.join(format!("{}.lock", &hash[..32])))?;
    if out.exists() {
        return Ok(out);
    }
    // Link under the final file name (wasm-ld records it in the name
    // section), in a private directory, then move it into place.
    let tmp_dir = dir.join(format!("tmp-{}-{}", &hash[..16], std::process::id()));
    fs::create_dir_all(&tmp_dir)?;
    let tmp = tmp_dir.join(format!("{}.wasm", &hash[..32]));
    let mut args: Vec<String> = flags.to_vec();
    args.extend(canonical.iter().map(|s| s.display().to_string()));
    args.push("-o".into());
    args.push(tmp.display().to_string());
    let req = CcRequest {
        args,
        legacy: false,
        root: Some(root),
    };
    let res = compile(tc, &req).and_then(|_| Ok(fs::rename(&tmp, &out)?));
    let _ = fs::remove_dir_all(&tmp_dir);
    res.map(|_| out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(args: &[&str]) -> CcRequest {
        CcRequest {
            args: args.iter().map(|s| s.to_string()).collect(),
            legacy: false,
            root: None,
        }
    }

    #[test]
    fn finds_sources_and_output() {
        let r = req(&["-O2", "-I", "inc.c", "a.c", "b.cpp", "-o", "x.wasm", "-DX"]);
        assert_eq!(
            r.sources(),
            vec![PathBuf::from("a.c"), PathBuf::from("b.cpp")]
        );
        assert_eq!(r.output(), Some(PathBuf::from("x.wasm")));
        assert!(r.is_cxx());
        assert!(r.links());
        assert!(!req(&["-c", "a.c"]).links());
        assert_eq!(
            req(&["-ox.wasm", "a.c"]).output(),
            Some(PathBuf::from("x.wasm"))
        );
    }
}
