//! Deterministic WASI.
//!
//! `wasi-common` provides the bulk of `wasi_snapshot_preview1` (file
//! descriptors, args, environment, directories granted with `--dir`). What
//! would let the outside world or the OS scheduler into a run is shadowed by
//! heddle's own implementations: both clocks read virtual time, `random_get`
//! reads a seeded ChaCha8 stream, `sched_yield` is a yield point,
//! `poll_oneoff` clock subscriptions park the thread in virtual time, and
//! `proc_exit` ends the run. stdout/stderr go to per-run buffers. The
//! arguments and the environment are heddle's too ([`ArgsEnv`]), laid out
//! as wasi-common lays them out, only cheaper to ask for.

use super::hooks::{end_err, read_bytes, write_bytes, HostResult};
use super::state::Outcome;
use super::ThreadCtx;
use crate::model::{Block, Clock, EventKind, Pending};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use wasi_common::pipe::{ReadPipe, WritePipe};
use wasi_common::{Table, WasiCtx};
use wasmtime::{Caller, Linker};

const WASI: &str = "wasi_snapshot_preview1";
const ERRNO_SUCCESS: i32 = 0;
const ERRNO_INVAL: i32 = 28;

/// A directory granted to the guest: host path and the guest path it appears as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The host directory.
    pub host: PathBuf,
    /// Where the guest sees it.
    pub guest: String,
}

impl Grant {
    /// `HOST[:GUEST]` (`--dir`); the guest path defaults to the host path.
    pub fn parse(spec: &str) -> Result<Grant> {
        let (host, guest) = spec.split_once(':').unwrap_or((spec, spec));
        if host.is_empty() || guest.is_empty() {
            anyhow::bail!("bad --dir `{spec}` (expected HOST[:GUEST])");
        }
        Ok(Grant {
            host: PathBuf::from(host),
            guest: guest.to_string(),
        })
    }
}

/// Output buffers of one run.
#[derive(Clone, Default)]
pub struct Output {
    pub stdout: Arc<RwLock<Vec<u8>>>,
    pub stderr: Arc<RwLock<Vec<u8>>>,
}

impl Output {
    pub fn take(&self) -> (Vec<u8>, Vec<u8>) {
        let out = std::mem::take(&mut *self.stdout.write().unwrap_or_else(|e| e.into_inner()));
        let err = std::mem::take(&mut *self.stderr.write().unwrap_or_else(|e| e.into_inner()));
        (out, err)
    }
}

/// A run's WASI context and the output buffers its stdout and stderr write
/// to. Without a granted directory it is kept for the next run on the same
/// memory with the same arguments and environment ([`Session::reuse`]),
/// once [`Session::as_built`] holds.
pub struct Session {
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// Built without a granted directory.
    bare: bool,
    pub ctx: WasiCtx,
    pub output: Output,
    /// `argv` and the environment as the guest receives them.
    pub argv: Arc<ArgsEnv>,
}

impl Session {
    /// A context as [`context`] builds it, with new buffers.
    pub fn new(
        program: &str,
        args: &[String],
        env: &[(String, String)],
        grants: &[Grant],
    ) -> Result<Session> {
        let output = Output::default();
        let ctx = context(program, args, env, grants, &output)?;
        Ok(Session {
            args: args.to_vec(),
            env: env.to_vec(),
            bare: grants.is_empty(),
            ctx,
            output,
            argv: Arc::new(ArgsEnv::new(program, args, env)),
        })
    }

    /// `kept` if a run with these arguments, environment and grants may
    /// use it, else a new session.
    pub fn reuse(
        kept: Option<Session>,
        program: &str,
        args: &[String],
        env: &[(String, String)],
        grants: &[Grant],
    ) -> Result<Session> {
        match kept {
            Some(s) if s.bare && grants.is_empty() && s.args == args && s.env == env => Ok(s),
            _ => Session::new(program, args, env, grants),
        }
    }

    /// Whether the context is as built, so that a later run cannot tell it
    /// from a new one: no directory was granted, so the guest could open no
    /// descriptor (`path_open` needs a directory, `sock_accept` a socket),
    /// and it closed or renumbered none of 0, 1 and 2 (a renumbering
    /// removes its source). The pipes behind them keep no state but the
    /// output buffers, which [`Output::take`] empties.
    pub fn as_built(&self) -> bool {
        self.bare && (0..3).all(|fd| self.ctx.table().contains_key(fd))
    }
}

/// `argv` (the program's name first) and the environment (`KEY=VALUE`),
/// as [`context`] gives them to wasi-common.
#[derive(Debug, Default)]
pub struct ArgsEnv {
    pub args: Strings,
    pub env: Strings,
}

impl ArgsEnv {
    pub fn new(program: &str, args: &[String], env: &[(String, String)]) -> ArgsEnv {
        ArgsEnv {
            args: Strings::new(std::iter::once(program).chain(args.iter().map(String::as_str))),
            env: Strings::new(env.iter().map(|(k, v)| format!("{k}={v}"))),
        }
    }
}

/// The arguments or the environment as `args_get`/`environ_get` hand
/// them to the guest: every string followed by its NUL, one after the
/// other, as wasi-common's `StringArray` lays them out. heddle answers
/// these calls itself: wasi-common's answer looks up the `memory` export
/// by name, opens a tracing span and runs a future per call.
#[derive(Debug, Default)]
pub struct Strings {
    /// The strings with their NULs.
    bytes: Vec<u8>,
    /// Where each string starts in `bytes`.
    starts: Vec<u32>,
}

impl Strings {
    fn new<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> Strings {
        let mut s = Strings::default();
        for item in items {
            s.starts.push(s.bytes.len() as u32);
            s.bytes.extend_from_slice(item.as_ref().as_bytes());
            s.bytes.push(0);
        }
        s
    }

    /// The number of strings and their total size with the NULs (what
    /// `args_sizes_get` and `environ_sizes_get` return).
    pub fn sizes(&self) -> (u32, u32) {
        (self.starts.len() as u32, self.bytes.len() as u32)
    }

    /// Writes the strings at `buf` and a pointer to each at `heads` with
    /// `write(addr, bytes)` (false: out of bounds). A misaligned `heads`
    /// or a write out of bounds traps, as in wasi-common.
    pub fn write(
        &self,
        heads: u32,
        buf: u32,
        mut write: impl FnMut(u32, &[u8]) -> bool,
    ) -> HostResult<()> {
        if self.starts.is_empty() {
            return Ok(());
        }
        if !heads.is_multiple_of(4) {
            return Err(wasmtime::Trap::HeapMisaligned.into());
        }
        let oob = || -> wasmtime::Error { wasmtime::Trap::MemoryOutOfBounds.into() };
        if !write(buf, &self.bytes) {
            return Err(oob());
        }
        let ptrs: Vec<u8> = self
            .starts
            .iter()
            .flat_map(|&s| buf.wrapping_add(s).to_le_bytes())
            .collect();
        if !write(heads, &ptrs) {
            return Err(oob());
        }
        Ok(())
    }
}

/// A fresh WASI context for a run: fixed args/env, empty stdin, captured
/// output, no filesystem unless granted.
pub fn context(
    program: &str,
    args: &[String],
    env: &[(String, String)],
    grants: &[Grant],
    out: &Output,
) -> Result<WasiCtx> {
    // The context's own random source and clocks are never consulted: the
    // functions that would use them are shadowed below.
    let rng = <rand::rngs::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0);
    let mut ctx = WasiCtx::new(
        Box::new(rng),
        wasi_common::clocks::WasiClocks::new(),
        wasi_common::sync::sched::sched_ctx(),
        Table::new(),
    );
    ctx.set_stdin(Box::new(ReadPipe::new(std::io::empty())));
    ctx.set_stdout(Box::new(WritePipe::from_shared(out.stdout.clone())));
    ctx.set_stderr(Box::new(WritePipe::from_shared(out.stderr.clone())));
    ctx.push_arg(program)?;
    for a in args {
        ctx.push_arg(a)?;
    }
    for (k, v) in env {
        ctx.push_env(k, v)?;
    }
    for g in grants {
        let dir = wasi_common::sync::Dir::open_ambient_dir(
            &g.host,
            wasi_common::sync::ambient_authority(),
        )
        .with_context(|| format!("--dir {}: cannot open", g.host.display()))?;
        let dir = wasi_common::sync::dir::Dir::from_cap_std(dir);
        ctx.push_preopened_dir(Box::new(dir), &g.guest)?;
    }
    Ok(ctx)
}

/// wasi-common's preview1 functions, then heddle's deterministic overrides.
pub fn add_to_linker(linker: &mut Linker<ThreadCtx>) -> Result<()> {
    wasi_common::sync::add_to_linker(linker, |t: &mut ThreadCtx| &mut t.wasi)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    linker.allow_shadowing(true);

    linker.func_wrap(
        WASI,
        "clock_time_get",
        |caller: Caller<'_, ThreadCtx>, id: u32, _precision: u64, out: u32| -> HostResult<i32> {
            let st = caller.data().run.get();
            let t = match id {
                0 => st.clock.wall(),
                1..=3 => st.clock.now(),
                _ => return Ok(ERRNO_INVAL),
            };
            write_bytes(&st, out, &t.to_le_bytes())?;
            Ok(ERRNO_SUCCESS)
        },
    )?;

    linker.func_wrap(
        WASI,
        "clock_res_get",
        |caller: Caller<'_, ThreadCtx>, id: u32, out: u32| -> HostResult<i32> {
            if id > 3 {
                return Ok(ERRNO_INVAL);
            }
            let st = caller.data().run.get();
            write_bytes(&st, out, &Clock::RESOLUTION_NS.to_le_bytes())?;
            Ok(ERRNO_SUCCESS)
        },
    )?;

    linker.func_wrap(
        WASI,
        "random_get",
        |caller: Caller<'_, ThreadCtx>, buf: u32, len: u32| -> HostResult<i32> {
            let mut st = caller.data().run.get();
            let mut bytes = vec![0u8; len as usize];
            rand::Rng::fill_bytes(&mut st.random, &mut bytes);
            write_bytes(&st, buf, &bytes)?;
            Ok(ERRNO_SUCCESS)
        },
    )?;

    for (name, env) in [("args_sizes_get", false), ("environ_sizes_get", true)] {
        linker.func_wrap(
            WASI,
            name,
            move |caller: Caller<'_, ThreadCtx>, count: u32, size: u32| -> HostResult<i32> {
                let (n, bytes) = strings(&caller, env)?.sizes();
                if !count.is_multiple_of(4) || !size.is_multiple_of(4) {
                    return Err(wasmtime::Trap::HeapMisaligned.into());
                }
                let st = caller.data().run.get();
                write_bytes(&st, count, &n.to_le_bytes())?;
                write_bytes(&st, size, &bytes.to_le_bytes())?;
                Ok(ERRNO_SUCCESS)
            },
        )?;
    }
    for (name, env) in [("args_get", false), ("environ_get", true)] {
        linker.func_wrap(
            WASI,
            name,
            move |caller: Caller<'_, ThreadCtx>, heads: u32, buf: u32| -> HostResult<i32> {
                let strings = strings(&caller, env)?;
                let st = caller.data().run.get();
                let mem = st.guest();
                strings.write(heads, buf, |addr, bytes| mem.write(addr, bytes))?;
                Ok(ERRNO_SUCCESS)
            },
        )?;
    }

    linker.func_wrap(
        WASI,
        "proc_exit",
        |caller: Caller<'_, ThreadCtx>, code: i32| -> HostResult<()> {
            caller.data().run.get().end(Outcome::Exit(code));
            Err(end_err())
        },
    )?;

    linker.func_wrap_async(
        WASI,
        "sched_yield",
        |mut caller: Caller<'_, ThreadCtx>, (): ()| {
            Box::new(async move {
                let site = super::hooks::current_site(&caller.data().run.get(), caller.data().tid);
                super::hooks::yield_async(
                    &mut caller,
                    Pending {
                        site,
                        kind: EventKind::Yield,
                        addr: 0,
                        len: 0,
                    },
                )
                .await?;
                Ok(ERRNO_SUCCESS)
            })
        },
    )?;

    linker.func_wrap_async(
        WASI,
        "poll_oneoff",
        |mut caller: Caller<'_, ThreadCtx>,
         (subs, events, nsubs, nevents): (u32, u32, u32, u32)| {
            Box::new(async move { poll_oneoff(&mut caller, subs, events, nsubs, nevents).await })
        },
    )?;
    Ok(())
}

/// The environment (`env`) or the arguments, for heddle's answers to
/// `environ_*` and `args_*`. Like wasi-common's calls, they fail when the
/// module exports no `memory`.
fn strings<'c>(caller: &'c Caller<'_, ThreadCtx>, env: bool) -> HostResult<&'c Strings> {
    let ctx = caller.data();
    if !ctx.memory_export {
        return Err(wasmtime::Error::msg("missing required memory export"));
    }
    Ok(if env { &ctx.argv.env } else { &ctx.argv.args })
}

enum Sub {
    Clock { userdata: u64, deadline: u64 },
    Fd { userdata: u64, kind: u8 },
}

async fn poll_oneoff(
    caller: &mut Caller<'_, ThreadCtx>,
    subs: u32,
    events: u32,
    nsubs: u32,
    nevents: u32,
) -> HostResult<i32> {
    if nsubs == 0 {
        return Ok(ERRNO_INVAL);
    }
    let run = caller.data().run.clone();
    let tid = caller.data().tid;
    let parsed: Vec<Sub> = {
        let st = run.get();
        let raw = read_bytes(
            &st,
            subs,
            nsubs
                .checked_mul(48)
                .ok_or(wasmtime::Trap::MemoryOutOfBounds)?,
        )?;
        let now = st.clock.now();
        let mut v = Vec::new();
        for s in raw.chunks_exact(48) {
            let u64_at = |o: usize| u64::from_le_bytes(s[o..o + 8].try_into().expect("8 bytes"));
            let userdata = u64_at(0);
            match s[8] {
                0 => {
                    let id = u32::from_le_bytes(s[16..20].try_into().expect("4 bytes"));
                    let timeout = u64_at(24);
                    let flags = u16::from_le_bytes(s[40..42].try_into().expect("2 bytes"));
                    let deadline = if flags & 1 != 0 {
                        if id == 0 {
                            st.clock.wall_to_mono(timeout)
                        } else {
                            timeout
                        }
                    } else {
                        now.saturating_add(timeout)
                    };
                    v.push(Sub::Clock { userdata, deadline });
                }
                k @ (1 | 2) => v.push(Sub::Fd { userdata, kind: k }),
                _ => return Ok(ERRNO_INVAL),
            }
        }
        v
    };
    let has_fd = parsed.iter().any(|s| matches!(s, Sub::Fd { .. }));
    let earliest = parsed
        .iter()
        .filter_map(|s| match s {
            Sub::Clock { deadline, .. } => Some(*deadline),
            _ => None,
        })
        .min();
    if !has_fd {
        if let Some(deadline) = earliest {
            let site = run.get().pending(tid).site;
            let must_sleep = deadline > run.get().clock.now();
            if must_sleep {
                run.get()
                    .block(tid, Block::Sleep { deadline }, site)
                    .map_err(|_| end_err())?;
                super::hooks::wait_turn(caller).await?;
            }
        }
    }
    let st = run.get();
    let now = st.clock.now();
    let mut out = Vec::new();
    for s in &parsed {
        let mut ev = [0u8; 32];
        match *s {
            Sub::Clock { userdata, deadline } => {
                if has_fd || deadline > now {
                    continue;
                }
                ev[0..8].copy_from_slice(&userdata.to_le_bytes());
                ev[10] = 0;
            }
            Sub::Fd { userdata, kind } => {
                ev[0..8].copy_from_slice(&userdata.to_le_bytes());
                ev[10] = kind;
            }
        }
        out.extend_from_slice(&ev);
    }
    write_bytes(&st, events, &out)?;
    write_bytes(&st, nevents, &((out.len() / 32) as u32).to_le_bytes())?;
    Ok(ERRNO_SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes into `mem` as the guest's memory: false past its end.
    fn into(mem: &mut [u8]) -> impl FnMut(u32, &[u8]) -> bool + '_ {
        move |addr, bytes| {
            let end = addr as usize + bytes.len();
            if end > mem.len() {
                return false;
            }
            mem[addr as usize..end].copy_from_slice(bytes);
            true
        }
    }

    /// heddle's `args_*` and `environ_*` answers are wasi-common's, byte
    /// for byte, and fail where wasi-common's fail.
    #[test]
    fn args_and_environment_are_laid_out_as_wasi_common_lays_them_out() {
        let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let cases = [
            (s(&[]), vec![]),
            (s(&["2", "2"]), vec![("A".to_string(), "1".to_string())]),
            (
                s(&["", "é ü", "a b c", "--flag=x"]),
                vec![
                    ("EMPTY".to_string(), String::new()),
                    ("K".to_string(), "v=w".to_string()),
                ],
            ),
        ];
        for (args, env) in &cases {
            let ours = ArgsEnv::new("target", args, env);
            let ctx = context("target", args, env, &[], &Output::default()).unwrap();
            for (mine, theirs) in [(&ours.args, &ctx.args), (&ours.env, &ctx.env)] {
                assert_eq!(
                    mine.sizes(),
                    (theirs.number_elements(), theirs.cumulative_size())
                );
                for (heads, buf) in [(64, 1024), (1024, 64), (4088, 0), (0, 4090), (2, 64)] {
                    let mut a = vec![0xa5u8; 4096];
                    let mut b = a.clone();
                    let got = mine.write(heads, buf, into(&mut a));
                    let want = theirs.write_to_guest(
                        &mut wiggle::GuestMemory::Unshared(&mut b),
                        wiggle::GuestPtr::new(buf),
                        wiggle::GuestPtr::new(heads),
                    );
                    assert_eq!(
                        got.is_ok(),
                        want.is_ok(),
                        "{args:?} {env:?} at {heads}, {buf}"
                    );
                    if got.is_ok() {
                        assert_eq!(a, b, "{args:?} {env:?} at {heads}, {buf}");
                    }
                }
            }
        }
    }
}
