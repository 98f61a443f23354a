//! `heddle cc`, `heddle c++` and `heddle toolchain install|doctor|env|cmake`.

use super::{EXIT_BUG, EXIT_OK};
use crate::cc::{self, CcRequest};
use anyhow::{Context, Result};
use clap::Subcommand;

#[derive(Subcommand)]
pub enum ToolchainCmd {
    /// Install every missing component (idempotent).
    ///
    /// Knows Debian 12 and 13, Ubuntu 22.04 and 24.04 (read from
    /// /etc/os-release, or the file HEDDLE_OS_RELEASE names); elsewhere set
    /// WASI_SDK_PATH to a wasi-sdk >= 22.
    Install,
    /// Report each component: present (with its path) or missing (with how to get it).
    ///
    /// The first line names the system; on one `heddle toolchain install`
    /// does not know, each problem is one line.
    Doctor,
    /// Print `export` lines for CC, CXX, AR, RANLIB, NM, CFLAGS, LDFLAGS: `eval "$(heddle toolchain env)"; make`.
    Env {
        /// Also put heddle's compilers first on PATH under the names
        /// makefiles hard-code (gcc, g++, cc, c++, clang, clang++, ar,
        /// ranlib, nm). Host programs built in that shell afterwards would
        /// get them too (cargo links with `cc`): use it for the build only.
        #[arg(long)]
        gnu_names: bool,
    },
    /// Print the path of a CMake toolchain file: `cmake -DCMAKE_TOOLCHAIN_FILE="$(heddle toolchain cmake)"`.
    Cmake,
}

pub fn run(cmd: ToolchainCmd) -> Result<i32> {
    match cmd {
        ToolchainCmd::Install => {
            cc::install(true)?;
            let tc = cc::locate()?;
            eprintln!("heddle: toolchain ready ({})", tc.clang.display());
            Ok(EXIT_OK)
        }
        ToolchainCmd::Doctor => {
            if let Some(Ok(plan)) = cc::system() {
                println!(
                    "system   {}, per {}",
                    plan.system,
                    cc::distro::os_release_path().display()
                );
            }
            let comps = cc::doctor();
            let mut missing = 0;
            for c in &comps {
                match &c.found {
                    Some(p) => println!("ok       {:<52} {}", c.name, p.display()),
                    None => {
                        missing += 1;
                        println!("MISSING  {:<52} {}", c.name, c.fix)
                    }
                }
            }
            if missing == 0 {
                println!("toolchain complete");
                Ok(EXIT_OK)
            } else {
                println!("{missing} component(s) missing");
                Ok(EXIT_BUG)
            }
        }
        ToolchainCmd::Env { gnu_names } => {
            for line in cc::glue::env_lines(&glue()?, gnu_names) {
                println!("{line}");
            }
            Ok(EXIT_OK)
        }
        ToolchainCmd::Cmake => {
            println!("{}", glue()?.cmake.display());
            Ok(EXIT_OK)
        }
    }
}

/// The wrappers and toolchain file for this heddle binary.
fn glue() -> Result<cc::glue::Glue> {
    let tc = cc::ensure()?;
    let exe = std::env::current_exe().context("cannot find the heddle executable")?;
    cc::glue::install(&tc, &exe)
}

/// The compiler driver: clang's behaviour, heddle's target. Nothing is
/// printed on success (configure scripts take any output on stderr for a
/// warning); a failure exits with 2 after clang's diagnostics.
pub fn cc(args: &[String], cxx: bool) -> Result<i32> {
    let mut req = CcRequest::new(args)?;
    req.cxx = cxx;
    if !req.dropped.is_empty() {
        eprintln!(
            "heddle: note: ignoring linker options that mean nothing for a wasm module: {}",
            req.dropped.join(" ")
        );
    }
    // Bad arguments are reported before anything is installed.
    req.check()?;
    let tc = cc::ensure()?;
    cc::drive(&tc, &req)?;
    Ok(EXIT_OK)
}
