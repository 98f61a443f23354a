//! `heddle cc` and `heddle toolchain install|doctor`.

use super::{EXIT_BUG, EXIT_OK};
use crate::cc::{self, CcRequest};
use anyhow::Result;
use clap::Subcommand;

#[derive(Subcommand)]
pub enum ToolchainCmd {
    /// Install every missing component (idempotent).
    Install,
    /// Report each component: present (with its path) or missing (with how to get it).
    Doctor,
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
    }
}

pub fn cc(mut args: Vec<String>) -> Result<i32> {
    let legacy = args.iter().any(|a| a == "--legacy");
    args.retain(|a| a != "--legacy");
    let req = CcRequest {
        args,
        legacy,
        root: None,
    };
    // Bad arguments are reported before anything is installed.
    req.check()?;
    let tc = cc::ensure()?;
    let out = cc::compile(&tc, &req)?;
    eprintln!("heddle: wrote {}", out.display());
    Ok(EXIT_OK)
}
