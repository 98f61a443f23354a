//! The guest SDK: `heddle.h`/`heddle.hpp` (the host imports a target calls)
//! and the compatibility library `libheddle_compat.a` (calls the threads
//! wasi-libc lacks: `pthread_exit`, `memalign`, the `err/warn` family,
//! `getrusage`/`times`/`clock`, `getpid`, `signal`, `raise`, `alarm`,
//! signal sets and masks, the runtime of `setjmp`/`longjmp` over wasm
//! exception handling, and sockets, name resolution, `sigaction` with a
//! handler and `dlopen` of a file, which fail with `ENOSYS` and name
//! themselves on stderr; `dlopen(NULL)`/`dlsym`, one fixed user and group,
//! resource limits, `waitpid`, System V semaphores, `sendfile` and `mmap`
//! with fixed, documented answers), plus headers that declare them
//! (`signal.h`, `sys/socket.h`, `netdb.h`, `unistd.h`, `sys/resource.h`, `sys/time.h`
//! wrap wasi-libc's; `sys/wait.h`, `sys/ipc.h`, `sys/sem.h`,
//! `sys/sendfile.h`, `pwd.h`, `grp.h` stand in for headers it lacks).
//!
//! The sources are embedded in the heddle binary and materialised, per
//! toolchain, in a content-addressed directory of the cache, so a heddle
//! binary needs nothing from the source tree at run time.

use super::Toolchain;
use crate::paths;
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `(file name, contents)` of the public headers.
pub const HEADERS: &[(&str, &str)] = &[
    (
        "heddle.h",
        include_str!("../../../guest-sdk/include/heddle.h"),
    ),
    (
        "heddle.hpp",
        include_str!("../../../guest-sdk/include/heddle.hpp"),
    ),
    (
        "heddle_compat.h",
        include_str!("../../../guest-sdk/include/heddle_compat.h"),
    ),
    // Found before wasi-libc's own (the SDK directory is `-I`): they include
    // it and add what WASI hides or lacks.
    (
        "signal.h",
        include_str!("../../../guest-sdk/include/signal.h"),
    ),
    (
        "sys/socket.h",
        include_str!("../../../guest-sdk/include/sys/socket.h"),
    ),
    (
        "netdb.h",
        include_str!("../../../guest-sdk/include/netdb.h"),
    ),
    (
        "unistd.h",
        include_str!("../../../guest-sdk/include/unistd.h"),
    ),
    (
        "sys/resource.h",
        include_str!("../../../guest-sdk/include/sys/resource.h"),
    ),
    (
        "sys/wait.h",
        include_str!("../../../guest-sdk/include/sys/wait.h"),
    ),
    (
        "sys/time.h",
        include_str!("../../../guest-sdk/include/sys/time.h"),
    ),
    (
        "sys/ipc.h",
        include_str!("../../../guest-sdk/include/sys/ipc.h"),
    ),
    (
        "sys/sem.h",
        include_str!("../../../guest-sdk/include/sys/sem.h"),
    ),
    (
        "sys/sendfile.h",
        include_str!("../../../guest-sdk/include/sys/sendfile.h"),
    ),
    ("pwd.h", include_str!("../../../guest-sdk/include/pwd.h")),
    ("grp.h", include_str!("../../../guest-sdk/include/grp.h")),
];

/// `(file name, contents)` of the compatibility library's sources.
/// Each `.c` file is one archive member.
pub const COMPAT_SOURCES: &[(&str, &str)] = &[
    (
        "compat.c",
        include_str!("../../../guest-sdk/compat/compat.c"),
    ),
    (
        "unsupported.h",
        include_str!("../../../guest-sdk/compat/unsupported.h"),
    ),
    (
        "unsupported.c",
        include_str!("../../../guest-sdk/compat/unsupported.c"),
    ),
    (
        "signals.c",
        include_str!("../../../guest-sdk/compat/signals.c"),
    ),
    ("net.c", include_str!("../../../guest-sdk/compat/net.c")),
    ("dl.c", include_str!("../../../guest-sdk/compat/dl.c")),
    ("posix.c", include_str!("../../../guest-sdk/compat/posix.c")),
    ("sleep.c", include_str!("../../../guest-sdk/compat/sleep.c")),
    (
        "semaphore.c",
        include_str!("../../../guest-sdk/compat/semaphore.c"),
    ),
    (
        "setjmp.c",
        include_str!("../../../guest-sdk/compat/setjmp.c"),
    ),
];

/// Libraries GNU builds link (`-ldl -lrt -lutil`), and wasi-libc's
/// emulation libraries its headers ask for (`-lwasi-emulated-mman` …),
/// whose functions are in wasi-libc or the compatibility library: empty archives in the SDK's
/// `lib`, which every link searches.
pub const EMPTY_LIBS: &[&str] = &[
    "dl",
    "rt",
    "util",
    "xnet",
    "resolv",
    "crypt",
    "wasi-emulated-mman",
    "wasi-emulated-signal",
    "wasi-emulated-process-clocks",
    "wasi-emulated-getpid",
];

/// An archive with no members.
const EMPTY_ARCHIVE: &[u8] = b"!<arch>\n";

fn sources_hash() -> String {
    let mut all = EMPTY_LIBS.join(",");
    for (name, text) in HEADERS.iter().chain(COMPAT_SOURCES) {
        all.push_str(name);
        all.push('\0');
        all.push_str(text);
        all.push('\0');
    }
    paths::sha256_hex(all.as_bytes())
}

/// The toolchain identity: the toolchain's own base identity plus the SDK.
pub fn identity(base: &str) -> String {
    paths::sha256_hex(format!("{base}\n{}", sources_hash()).as_bytes())[..16].to_string()
}

/// The SDK directory for a toolchain whose base identity is `base`.
pub fn dir(toolchain_dir: &Path, base: &str) -> PathBuf {
    toolchain_dir.join(format!("sdk-{}", identity(base)))
}

/// The SDK directory, when it is complete.
pub fn installed(toolchain_dir: &Path, base: &str) -> Option<PathBuf> {
    let d = dir(toolchain_dir, base);
    (d.join("libheddle_compat.a").exists()
        && d.join("include/heddle.h").exists()
        && d.join("lib").is_dir())
    .then_some(d)
}

/// Writes the headers and builds the compatibility library into `out`.
pub fn build(tc: &Toolchain, out: &Path) -> Result<()> {
    let tmp = out.with_extension("tmp");
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(tmp.join("include"))?;
    for (name, text) in HEADERS {
        let path = tmp.join("include").join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(path, text)?;
    }
    for (name, text) in COMPAT_SOURCES {
        fs::write(tmp.join(name), text)?;
    }
    fs::create_dir_all(tmp.join("lib"))?;
    for name in EMPTY_LIBS {
        fs::write(tmp.join("lib").join(format!("lib{name}.a")), EMPTY_ARCHIVE)?;
    }
    let mut objects = Vec::new();
    for (name, _) in COMPAT_SOURCES.iter().filter(|(n, _)| n.ends_with(".c")) {
        let src = tmp.join(name);
        let obj = src.with_extension("o");
        let mut cmd = Command::new(&tc.clang);
        cmd.args(super::flags::target_flags(tc))
            .args(super::flags::path_map_flags(tc, &tmp))
            .args(super::flags::EMULATION_DEFINES)
            .args(super::flags::SJLJ_FLAGS)
            .arg(format!("-I{}", tmp.join("include").display()))
            // No -g: the compatibility library is library code, which runs
            // atomically between its own atomics.
            .args(["-O2", "-c", "-Wall", "-Werror", "-DHEDDLE_COMPAT_LIBRARY"])
            .arg(&src)
            .arg("-o")
            .arg(&obj);
        let res = cmd
            .output()
            .with_context(|| format!("cannot run {}", tc.clang.display()))?;
        if !res.status.success() {
            bail!(
                "building the guest SDK library failed:\n{}",
                String::from_utf8_lossy(&res.stderr)
            );
        }
        objects.push(obj);
    }
    let lib = tmp.join("libheddle_compat.a");
    let res = Command::new(&tc.ar)
        .arg("rcs")
        .arg(&lib)
        .args(&objects)
        .output()
        .with_context(|| format!("cannot run {}", tc.ar.display()))?;
    if !res.status.success() {
        bail!("llvm-ar failed: {}", String::from_utf8_lossy(&res.stderr));
    }
    let _ = fs::remove_dir_all(out);
    fs::rename(&tmp, out)?;
    Ok(())
}
