//! Glue for build systems: single-path compiler wrappers, the `export`
//! lines of `heddle toolchain env` and the CMake toolchain file of
//! `heddle toolchain cmake`.
//!
//! Build systems want `CC` to be one executable, so heddle writes two
//! shell wrappers (`heddle-cc`, `heddle-c++`) that call the heddle binary
//! that wrote them, into a directory of the cache named after that binary's
//! path (a debug and a release build each get their own).

use super::Toolchain;
use crate::paths;
use anyhow::{Context, Result};
use std::fs;
use std::path::{Path, PathBuf};

/// The files written for one heddle binary.
#[derive(Debug, Clone)]
pub struct Glue {
    /// The `CC` wrapper.
    pub cc: PathBuf,
    /// The `CXX` wrapper.
    pub cxx: PathBuf,
    /// `llvm-ar`, `llvm-ranlib`, `llvm-nm` of the toolchain.
    pub ar: PathBuf,
    /// `llvm-ranlib`.
    pub ranlib: PathBuf,
    /// `llvm-nm`.
    pub nm: PathBuf,
    /// The program runner: `heddle-run MODULE ARGS…` runs the module once
    /// as `heddle run --as-program` (CMake's
    /// `CMAKE_CROSSCOMPILING_EMULATOR`, for ctest and `try_run`).
    pub run: PathBuf,
    /// The CMake toolchain file.
    pub cmake: PathBuf,
    /// A directory of the names makefiles hard-code (`gcc`, `g++`, `cc`,
    /// `c++`, `clang`, `clang++`, `ar`, `ranlib`, `nm`), each heddle's: put
    /// first on `PATH`.
    pub names: PathBuf,
}

/// The compiler names a makefile may hard-code, and which driver each is.
pub const COMPILER_NAMES: &[(&str, &str)] = &[
    ("cc", "cc"),
    ("gcc", "cc"),
    ("clang", "cc"),
    ("c++", "c++"),
    ("g++", "c++"),
    ("clang++", "c++"),
];

/// A shell word that stands for `s` exactly (single quotes).
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// A CMake string literal for `s`.
fn cmake_quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Writes `text` to `path` unless it already holds exactly that.
fn write_if_changed(path: &Path, text: &str, executable: bool) -> Result<()> {
    if fs::read_to_string(path).ok().as_deref() != Some(text) {
        paths::write_atomic(path, text.as_bytes())?;
    }
    if executable {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o755))
            .with_context(|| format!("cannot make {} executable", path.display()))?;
    }
    Ok(())
}

/// Writes (or refreshes) the wrappers and the CMake toolchain file for the
/// heddle binary `heddle` and the toolchain `tc`.
pub fn install(tc: &Toolchain, heddle: &Path) -> Result<Glue> {
    let exe = heddle.display().to_string();
    let dir = paths::cache_dir("toolchain")?
        .join(format!("bin-{}", &paths::sha256_hex(exe.as_bytes())[..16]));
    fs::create_dir_all(dir.join("Platform"))
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let tool = |name: &str| tc.ar.with_file_name(name);
    let glue = Glue {
        cc: dir.join("heddle-cc"),
        cxx: dir.join("heddle-c++"),
        ar: tc.ar.clone(),
        ranlib: tool("llvm-ranlib"),
        nm: tool("llvm-nm"),
        run: dir.join("heddle-run"),
        cmake: dir.join("heddle.cmake"),
        names: dir.join("names"),
    };
    fs::create_dir_all(&glue.names)
        .with_context(|| format!("cannot create {}", glue.names.display()))?;
    let driver = |cmd: &str| format!("#!/bin/sh\nexec {} {cmd} \"$@\"\n", sh_quote(&exe));
    for (path, cmd) in [(&glue.cc, "cc"), (&glue.cxx, "c++")] {
        write_if_changed(path, &driver(cmd), true)?;
    }
    let runner = format!(
        "#!/bin/sh\n# heddle-run MODULE [ARGS...]: one run of MODULE, as the program would behave.\n\
         module=\"$1\"\nshift\nexec {} run --as-program --quiet \"$module\" -- \"$@\"\n",
        sh_quote(&exe)
    );
    write_if_changed(&glue.run, &runner, true)?;
    for (name, cmd) in COMPILER_NAMES {
        write_if_changed(&glue.names.join(name), &driver(cmd), true)?;
    }
    for (name, tool) in [("ar", &glue.ar), ("ranlib", &glue.ranlib), ("nm", &glue.nm)] {
        let script = format!(
            "#!/bin/sh\nexec {} \"$@\"\n",
            sh_quote(&tool.display().to_string())
        );
        write_if_changed(&glue.names.join(name), &script, true)?;
    }
    let platform = "# The WASI platform for CMake, written by `heddle toolchain cmake`.\n\
         set(WASI 1)\n\
         set(UNIX 1)\n\
         set(CMAKE_EXECUTABLE_SUFFIX \".wasm\")\n\
         set(CMAKE_STATIC_LIBRARY_PREFIX \"lib\")\n\
         set(CMAKE_STATIC_LIBRARY_SUFFIX \".a\")\n\
         set(CMAKE_FIND_LIBRARY_PREFIXES \"lib\")\n\
         set(CMAKE_FIND_LIBRARY_SUFFIXES \".a\")\n";
    write_if_changed(&dir.join("Platform/WASI.cmake"), platform, false)?;
    let q = |p: &Path| cmake_quote(&p.display().to_string());
    let toolchain = format!(
        "# CMake toolchain file for heddle targets, written by `heddle toolchain cmake`.\n\
         # Use: cmake -DCMAKE_TOOLCHAIN_FILE=\"$(heddle toolchain cmake)\" ...\n\
         set(CMAKE_SYSTEM_NAME WASI)\n\
         set(CMAKE_SYSTEM_VERSION 1)\n\
         set(CMAKE_SYSTEM_PROCESSOR wasm32)\n\
         list(APPEND CMAKE_MODULE_PATH \"${{CMAKE_CURRENT_LIST_DIR}}\")\n\
         set(CMAKE_C_COMPILER {cc})\n\
         set(CMAKE_CXX_COMPILER {cxx})\n\
         set(CMAKE_AR {ar} CACHE FILEPATH \"heddle's archiver\")\n\
         set(CMAKE_RANLIB {ranlib} CACHE FILEPATH \"heddle's ranlib\")\n\
         set(CMAKE_NM {nm} CACHE FILEPATH \"heddle's nm\")\n\
         set(CMAKE_FIND_ROOT_PATH {sysroot})\n\
         set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)\n\
         set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)\n\
         set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)\n\
         set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)\n\
         set(THREADS_PREFER_PTHREAD_FLAG ON)\n\
         # ctest and try_run run the modules with heddle (one run, seed 0).\n\
         set(CMAKE_CROSSCOMPILING_EMULATOR {run})\n\
         # add_test(name command ...), the old signature, names a program by its\n\
         # file name and runs it as it is: given as add_test(NAME … COMMAND …),\n\
         # a target's module is found and run through the emulator, as natively.\n\
         # (Once: this file is read again by each enable_language.)\n\
         if(NOT COMMAND __heddle_add_test)\n\
         \x20 function(__heddle_add_test)\n\
         \x20 endfunction()\n\
         \x20 function(add_test)\n\
         \x20   if(ARGC GREATER 1 AND NOT ARGV0 STREQUAL \"NAME\")\n\
         \x20     set(args ${{ARGV}})\n\
         \x20     list(REMOVE_AT args 0)\n\
         \x20     _add_test(NAME ${{ARGV0}} COMMAND ${{args}})\n\
         \x20   else()\n\
         \x20     _add_test(${{ARGV}})\n\
         \x20   endif()\n\
         \x20 endfunction()\n\
         endif()\n",
        cc = q(&glue.cc),
        cxx = q(&glue.cxx),
        ar = q(&glue.ar),
        ranlib = q(&glue.ranlib),
        nm = q(&glue.nm),
        sysroot = q(&tc.sysroot),
        run = q(&glue.run),
    );
    write_if_changed(&glue.cmake, &toolchain, false)?;
    Ok(glue)
}

/// The `export` lines (sh syntax) that point make and configure at heddle;
/// with `gnu_names`, also `PATH` with [`Glue::names`] first.
pub fn env_lines(g: &Glue, gnu_names: bool) -> Vec<String> {
    let var =
        |name: &str, p: &Path| format!("export {name}={}", sh_quote(&p.display().to_string()));
    let mut v = vec![
        "# heddle's compilers add the target, -pthread, -g and the default -O level;".to_string(),
        "# autoconf: ./configure --host=wasm32-wasi (a config.sub from before 2019: --host=i686-pc-linux-gnu)".to_string(),
        var("CC", &g.cc),
        var("CXX", &g.cxx),
        var("AR", &g.ar),
        var("RANLIB", &g.ranlib),
        var("NM", &g.nm),
        "# heddle-run MODULE ARGS...: one run, with the program's output and exit code".to_string(),
        var("HEDDLE_RUN", &g.run),
        "export CFLAGS=''".to_string(),
        "export CXXFLAGS=''".to_string(),
        "export LDFLAGS=''".to_string(),
    ];
    let path = format!(
        "export PATH={}:\"$PATH\"",
        sh_quote(&g.names.display().to_string())
    );
    if gnu_names {
        v.push(path);
    } else {
        // Not by default: a shell that evaluates these lines may build
        // host programs (cargo links with `cc`) afterwards.
        v.push("# a makefile that hard-codes gcc, g++, cc, c++, clang, ar, ranlib or nm: --gnu-names adds".into());
        v.push(format!("#   {path}"));
    }
    v
}

/// `PATH` with `g.names` first, for a build command heddle runs.
pub fn path_with_names(g: &Glue) -> std::ffi::OsString {
    let mut dirs = vec![g.names.clone()];
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(dirs).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(sh_quote("/a b/it's"), "'/a b/it'\\''s'");
        assert_eq!(cmake_quote("C:\\x\"y"), "\"C:\\\\x\\\"y\"");
    }
}
