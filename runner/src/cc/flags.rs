//! The clang flags every heddle compilation shares (the user's sources in
//! `compile`, the compatibility library in `sdk`): target and sysroot,
//! path maps that keep machine-specific directories out of modules, and
//! the feature macros of what the compatibility library emulates.

use super::{Flavor, Toolchain};
use std::path::{Path, PathBuf};

/// Feature macros that make wasi-libc declare what the compat library
/// emulates, and `__unix__`/`__unix`, which portable code tests before it
/// uses POSIX (clang defines neither for WASI; `unix`, which strict
/// `-std=c99` modes must not have, stays undefined).
pub const EMULATION_DEFINES: &[&str] = &[
    "-D_WASI_EMULATED_PROCESS_CLOCKS",
    "-D_WASI_EMULATED_SIGNAL",
    "-D_WASI_EMULATED_GETPID",
    "-D_WASI_EMULATED_MMAN",
    "-D__unix__=1",
    "-D__unix=1",
];

/// `setjmp`/`longjmp` over wasm exception handling: the target feature
/// (wasi-libc's `setjmp.h` requires it) and LLVM's lowering of the calls,
/// whose runtime is the guest SDK's `setjmp.c`. Functions that call no
/// `setjmp` are compiled as without them.
pub const SJLJ_FLAGS: &[&str] = &["-mexception-handling", "-mllvm", "-wasm-enable-sjlj"];

/// `--target`, `--sysroot`, `-resource-dir` and `-pthread` for `tc`.
pub fn target_flags(tc: &Toolchain) -> Vec<String> {
    let mut v = vec![
        "--target=wasm32-wasip1-threads".to_string(),
        format!("--sysroot={}", tc.sysroot.display()),
        "-pthread".to_string(),
    ];
    if let Some(r) = &tc.resource_dir {
        v.push(format!("-resource-dir={}", r.display()));
    }
    v
}

/// The project root for files in `dir`: the nearest directory at or above
/// it that holds `.git` or `heddle.toml`, else `dir` itself (canonical).
pub fn project_root(dir: &Path) -> PathBuf {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    dir.ancestors()
        .find(|d| d.join(".git").exists() || d.join("heddle.toml").exists())
        .unwrap_or(&dir)
        .to_path_buf()
}

/// The different spellings of `p`: as given, canonical, and (for the
/// working directory) `$PWD`, which clang prefers when it names the same
/// directory.
fn spellings(p: &Path) -> Vec<PathBuf> {
    let mut v = vec![p.to_path_buf()];
    if let Ok(c) = p.canonicalize() {
        v.push(c);
    }
    if let (Some(pwd), Ok(cwd)) = (std::env::var_os("PWD"), std::env::current_dir()) {
        let pwd = PathBuf::from(pwd);
        if let (Ok(a), Ok(b)) = (pwd.canonicalize(), cwd.canonicalize()) {
            if a == b {
                if let Ok(rel) = p.strip_prefix(&cwd) {
                    v.push(pwd.join(rel));
                }
            }
        }
    }
    v.retain(|x| x.is_absolute());
    v.dedup();
    v
}

/// `-ffile-prefix-map` flags that take every machine-specific directory out
/// of the module (debug info and `__FILE__`): `root` becomes `.`, the
/// toolchain's directories fixed names. clang applies the last matching
/// map, so the more specific toolchain maps come after the root's.
pub fn path_map_flags(tc: &Toolchain, root: &Path) -> Vec<String> {
    let mut maps: Vec<(PathBuf, &str)> = Vec::new();
    for r in spellings(root) {
        maps.push((r, "."));
    }
    if let Flavor::WasiSdk { root, .. } = &tc.flavor {
        for r in spellings(root) {
            maps.push((r, "/heddle/wasi-sdk"));
        }
    }
    for r in spellings(&tc.sysroot) {
        maps.push((r, "/heddle/sysroot"));
    }
    if let Some(res) = &tc.resource_dir {
        for r in spellings(res) {
            maps.push((r, "/heddle/resource"));
        }
    }
    if let Some(sdk) = tc.sdk_include.parent() {
        for r in spellings(sdk) {
            maps.push((r, "/heddle/sdk"));
        }
    }
    let mut v = vec!["-fdebug-compilation-dir=.".to_string()];
    v.extend(
        maps.into_iter()
            .map(|(from, to)| format!("-ffile-prefix-map={}={to}", from.display())),
    );
    v
}
