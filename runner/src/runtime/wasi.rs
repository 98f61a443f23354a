//! Deterministic WASI.
//!
//! `wasi-common` provides the bulk of `wasi_snapshot_preview1` (file
//! descriptors, args, environment), over heddle's in-memory copies of the
//! directories granted with `--dir` ([`super::files`]). What
//! would let the outside world or the OS scheduler into a run is shadowed by
//! heddle's own implementations: both clocks read virtual time, `random_get`
//! reads a seeded ChaCha8 stream, `sched_yield` is a yield point,
//! `poll_oneoff` clock subscriptions park the thread in virtual time, and
//! `proc_exit` ends the run. stdout/stderr go to per-run buffers. The
//! arguments, the environment and, while they are as built, writes to
//! stdout and stderr are answered by heddle too ([`Answers`]), byte for
//! byte as wasi-common answers them, only cheaper to ask for; what they do
//! not cover goes to wasi-common ([`by_wasi_common`]).

use super::files::Snapshot;
use super::hooks::{end_err, read_bytes, write_bytes, HostResult};
use super::memory::GuestMemory;
use super::pipes;
use super::state::Outcome;
use super::ThreadCtx;
use crate::model::{Block, Clock, EventKind, Pending};
use anyhow::Result;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, OnceLock, RwLock};
use wasi_common::pipe::{ReadPipe, WritePipe};
use wasi_common::snapshots::preview_1::{types, wasi_snapshot_preview1 as preview1};
use wasi_common::{Table, WasiCtx};
use wasmtime::{Caller, Extern, Linker};

const WASI: &str = "wasi_snapshot_preview1";
const ERRNO_SUCCESS: i32 = 0;
const ERRNO_INVAL: i32 = 28;
/// `__WASI_ERRNO_INTR`: a sleep cut short by a signal.
const ERRNO_INTR: i32 = 27;

/// A directory granted to the guest: host path and the guest path it appears as.
///
/// Its files are read once, on the first run that needs them, into a
/// snapshot (`runtime::files`) that every run of the grant (and of its clones) starts from.
#[derive(Debug, Clone)]
pub struct Grant {
    /// The host directory.
    pub host: PathBuf,
    /// Where the guest sees it.
    pub guest: String,
    snapshot: Arc<OnceLock<Result<Arc<Snapshot>, String>>>,
}

impl PartialEq for Grant {
    fn eq(&self, other: &Grant) -> bool {
        self.host == other.host && self.guest == other.guest
    }
}

impl Eq for Grant {}

impl Grant {
    /// The host directory `host`, seen by the guest as `guest`.
    pub fn new(host: PathBuf, guest: String) -> Grant {
        Grant {
            host,
            guest,
            snapshot: Arc::default(),
        }
    }

    /// `HOST[:GUEST]` (`--dir`); the guest path defaults to the host path.
    pub fn parse(spec: &str) -> Result<Grant> {
        let (host, guest) = spec.split_once(':').unwrap_or((spec, spec));
        if host.is_empty() || guest.is_empty() {
            anyhow::bail!("bad --dir `{spec}` (expected HOST[:GUEST])");
        }
        Ok(Grant::new(PathBuf::from(host), guest.to_string()))
    }

    /// The files every run of this grant starts from, read on first use.
    pub fn snapshot(&self) -> Result<Arc<Snapshot>> {
        self.snapshot
            .get_or_init(|| {
                Snapshot::load(&self.host)
                    .map(Arc::new)
                    .map_err(|e| format!("{e:#}"))
            })
            .clone()
            .map_err(anyhow::Error::msg)
    }
}

/// Output buffers of one run.
#[derive(Clone, Debug, Default)]
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
    /// What heddle answers itself.
    pub answers: Arc<Answers>,
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
        let bare = grants.is_empty();
        Ok(Session {
            args: args.to_vec(),
            env: env.to_vec(),
            bare,
            ctx,
            answers: Arc::new(Answers::new(
                program,
                args,
                env,
                bare.then(|| output.clone()),
            )),
            output,
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
        let built = self.bare && self.answers.std_open();
        debug_assert!(!built || std_as_built(&self.ctx));
        built
    }
}

/// Whether descriptors 0, 1 and 2 are all still open in `ctx`. In a
/// context without a granted directory that means each is still the pipe
/// [`context`] put there: the guest can open no descriptor there, and a
/// renumbering both needs its target open and removes its source, so each
/// one drops a pipe for good. Only `fd_close` and `fd_renumber` take a
/// descriptor out of the table, so [`Answers::std_open`] knows it without
/// asking the table; debug builds check that it agrees.
fn std_as_built(ctx: &WasiCtx) -> bool {
    let table = ctx.table();
    (0..3).all(|fd| table.contains_key(fd))
}

/// What heddle answers WASI calls from instead of asking wasi-common:
/// `argv` (the program's name first) and the environment (`KEY=VALUE`),
/// as [`context`] gives them to wasi-common, and the buffers behind stdout
/// and stderr when no directory was granted.
#[derive(Debug, Default)]
pub struct Answers {
    pub args: Strings,
    pub env: Strings,
    /// The run's output, in a context without a granted directory (where
    /// [`std_as_built`] tells whether descriptors 1 and 2 still write to
    /// it).
    pub std: Option<Output>,
    /// Whether no `fd_close` or `fd_renumber` may have taken a descriptor
    /// out of the context's table since it was built ([`Answers::std_open`]).
    std_untouched: AtomicBool,
}

impl Answers {
    pub fn new(
        program: &str,
        args: &[String],
        env: &[(String, String)],
        std: Option<Output>,
    ) -> Answers {
        Answers {
            args: Strings::new(std::iter::once(program).chain(args.iter().map(String::as_str))),
            env: Strings::new(env.iter().map(|(k, v)| format!("{k}={v}"))),
            std,
            std_untouched: AtomicBool::new(true),
        }
    }

    /// The buffer that `fd` writes to, when it is stdout or stderr as
    /// [`context`] built them.
    fn std_buffer(&self, ctx: &WasiCtx, fd: i32) -> Option<&Arc<RwLock<Vec<u8>>>> {
        let out = self.std.as_ref()?;
        let buffer = match fd {
            1 => &out.stdout,
            2 => &out.stderr,
            _ => return None,
        };
        let open = self.std_open();
        debug_assert!(!open || std_as_built(ctx));
        open.then_some(buffer)
    }

    /// Whether descriptors 0, 1 and 2 are all still open, as
    /// [`std_as_built`] would find them in the context these answers were
    /// made with: true until a call to `fd_close` or `fd_renumber` ends in
    /// anything but an error number.
    pub fn std_open(&self) -> bool {
        self.std_untouched.load(Relaxed)
    }

    /// Notes that a descriptor was added to the table (a pipe's).
    pub fn table_changed(&self) {
        self.std_untouched.store(false, Relaxed);
    }

    /// Notes the result of a call to `fd_close` or `fd_renumber`: unless it
    /// failed with an error number (and so changed nothing), a descriptor
    /// may have left the table.
    fn table_call(&self, result: HostResult<i32>) -> HostResult<i32> {
        if !matches!(result, Ok(errno) if errno != ERRNO_SUCCESS) {
            self.std_untouched.store(false, Relaxed);
        }
        result
    }
}

/// Writes wasi-common's `fd_fdstat_get` of stdout and stderr (write-only
/// pipes, which it reports as of unknown type, appending) with
/// `write(offset, bytes)`, field by field as its `Fdstat` is laid out in
/// guest memory. The padding between fields is left as it was.
fn std_fdstat(mut write: impl FnMut(u32, &[u8])) {
    write(0, &[types::Filetype::Unknown as u8]);
    write(2, &types::Fdflags::APPEND.bits().to_le_bytes());
    write(8, &types::Rights::FD_WRITE.bits().to_le_bytes());
    write(16, &types::Rights::empty().bits().to_le_bytes());
}

/// Writes what `fd_write(fd, iovs, count, written)` writes, when `fd` is
/// stdout or stderr as built and every pointer is good: the bytes of the
/// `count` iovecs at `iovs`, appended to `buffer`, and their number at
/// `written`. None (nothing written) when wasi-common's answer would not
/// be that plain success: a pointer misaligned or out of bounds, or more
/// iovecs than a C library passes.
fn std_write(
    mem: GuestMemory<'_>,
    buffer: &RwLock<Vec<u8>>,
    iovs: u32,
    count: u32,
    written: u32,
) -> Option<()> {
    const MAX_IOVECS: u32 = 16;
    if count > MAX_IOVECS || !iovs.is_multiple_of(4) || !written.is_multiple_of(4) {
        return None;
    }
    mem.contains(written, 4).then_some(())?;
    let mut parts = [(0u32, 0u32); MAX_IOVECS as usize];
    let mut total = 0u32;
    for (i, part) in parts.iter_mut().take(count as usize).enumerate() {
        let at = iovs.checked_add(8 * i as u32)?;
        let buf = mem.read_le(at, 4)? as u32;
        let len = mem.read_le(at.checked_add(4)?, 4)? as u32;
        mem.contains(buf, len).then_some(())?;
        total = total.checked_add(len)?;
        *part = (buf, len);
    }
    let mut out = buffer.write().unwrap_or_else(|e| e.into_inner());
    for &(buf, len) in &parts[..count as usize] {
        mem.append(buf, len, &mut out);
    }
    mem.write(written, &total.to_le_bytes());
    Some(())
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
        ctx.push_preopened_dir(g.snapshot()?.preopen(), &g.guest)?;
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
            rand::Rng::fill_bytes(st.guest_random(), &mut bytes);
            write_bytes(&st, buf, &bytes)?;
            Ok(ERRNO_SUCCESS)
        },
    )?;

    for (name, env) in [("args_sizes_get", false), ("environ_sizes_get", true)] {
        linker.func_wrap(
            WASI,
            name,
            move |mut caller: Caller<'_, ThreadCtx>, count: u32, size: u32| -> HostResult<i32> {
                if !caller.data().memory_export {
                    let (count, size) = (count as i32, size as i32);
                    return by_wasi_common(&mut caller, |ctx, mem| match env {
                        false => settle(preview1::args_sizes_get(ctx, mem, count, size)),
                        true => settle(preview1::environ_sizes_get(ctx, mem, count, size)),
                    });
                }
                let (n, bytes) = strings(caller.data(), env).sizes();
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
            move |mut caller: Caller<'_, ThreadCtx>, heads: u32, buf: u32| -> HostResult<i32> {
                if !caller.data().memory_export {
                    let (heads, buf) = (heads as i32, buf as i32);
                    return by_wasi_common(&mut caller, |ctx, mem| match env {
                        false => settle(preview1::args_get(ctx, mem, heads, buf)),
                        true => settle(preview1::environ_get(ctx, mem, heads, buf)),
                    });
                }
                let strings = strings(caller.data(), env);
                let st = caller.data().run.get();
                let mem = st.guest();
                strings.write(heads, buf, |addr, bytes| mem.write(addr, bytes))?;
                Ok(ERRNO_SUCCESS)
            },
        )?;
    }

    linker.func_wrap_async(
        WASI,
        "fd_write",
        |mut caller: Caller<'_, ThreadCtx>, (fd, iovs, count, written): (i32, i32, i32, i32)| {
            Box::new(async move {
                if is_pipe(&caller, fd) {
                    return pipes::write(
                        &mut caller,
                        fd as u32,
                        iovs as u32,
                        count as u32,
                        written as u32,
                    )
                    .await;
                }
                let ctx = caller.data();
                if ctx.memory_export {
                    if let Some(buffer) = ctx.answers.std_buffer(&ctx.wasi, fd) {
                        let st = ctx.run.get();
                        if std_write(
                            st.guest(),
                            buffer,
                            iovs as u32,
                            count as u32,
                            written as u32,
                        )
                        .is_some()
                        {
                            return Ok(ERRNO_SUCCESS);
                        }
                    }
                }
                by_wasi_common(&mut caller, |ctx, mem| {
                    settle(preview1::fd_write(ctx, mem, fd, iovs, count, written))
                })
            })
        },
    )?;

    // Reads, sends and receives: pipes' and socket pairs' are heddle's.
    linker.func_wrap_async(
        WASI,
        "fd_read",
        |mut caller: Caller<'_, ThreadCtx>, (fd, iovs, count, nread): (i32, i32, i32, i32)| {
            Box::new(async move {
                if is_pipe(&caller, fd) {
                    let (fd, iovs, count, nread) =
                        (fd as u32, iovs as u32, count as u32, nread as u32);
                    return pipes::read(&mut caller, fd, iovs, count, nread, false).await;
                }
                by_wasi_common(&mut caller, |ctx, mem| {
                    settle(preview1::fd_read(ctx, mem, fd, iovs, count, nread))
                })
            })
        },
    )?;
    linker.func_wrap_async(
        WASI,
        "sock_recv",
        |mut caller: Caller<'_, ThreadCtx>,
         (fd, iovs, count, flags, nread, oflags): (i32, i32, i32, i32, i32, i32)| {
            Box::new(async move {
                if is_pipe(&caller, fd) {
                    // RECV_PEEK is bit 0; RECV_WAITALL (bit 1) reads what
                    // there is, as a stream socket may.
                    let peek = flags & 1 != 0;
                    let r = pipes::read(
                        &mut caller,
                        fd as u32,
                        iovs as u32,
                        count as u32,
                        nread as u32,
                        peek,
                    )
                    .await?;
                    if r == ERRNO_SUCCESS {
                        write_bytes(&caller.data().run.get(), oflags as u32, &0u16.to_le_bytes())?;
                    }
                    return Ok(r);
                }
                by_wasi_common(&mut caller, |ctx, mem| {
                    settle(preview1::sock_recv(
                        ctx, mem, fd, iovs, count, flags, nread, oflags,
                    ))
                })
            })
        },
    )?;
    linker.func_wrap_async(
        WASI,
        "sock_send",
        |mut caller: Caller<'_, ThreadCtx>,
         (fd, iovs, count, flags, sent): (i32, i32, i32, i32, i32)| {
            Box::new(async move {
                if is_pipe(&caller, fd) {
                    return pipes::write(
                        &mut caller,
                        fd as u32,
                        iovs as u32,
                        count as u32,
                        sent as u32,
                    )
                    .await;
                }
                by_wasi_common(&mut caller, |ctx, mem| {
                    settle(preview1::sock_send(ctx, mem, fd, iovs, count, flags, sent))
                })
            })
        },
    )?;
    linker.func_wrap(
        WASI,
        "sock_shutdown",
        |mut caller: Caller<'_, ThreadCtx>, fd: i32, how: i32| -> HostResult<i32> {
            if is_pipe(&caller, fd) {
                return Ok(pipes::shutdown(&caller, fd as u32, how as u8));
            }
            by_wasi_common(&mut caller, |ctx, mem| {
                settle(preview1::sock_shutdown(ctx, mem, fd, how))
            })
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_fdstat_set_flags",
        |mut caller: Caller<'_, ThreadCtx>, fd: i32, flags: i32| -> HostResult<i32> {
            // wasi-common cannot change a descriptor's flags once threads
            // share its table; a pipe's are heddle's (FDFLAGS_NONBLOCK is
            // bit 2; `fd_fdstat_get` reports them).
            let mut st = caller.data().run.get();
            if st.io.end(fd as u32).is_some() {
                st.io.set_nonblock(fd as u32, flags & 4 != 0);
                return Ok(ERRNO_SUCCESS);
            }
            drop(st);
            by_wasi_common(&mut caller, |ctx, mem| {
                settle(preview1::fd_fdstat_set_flags(ctx, mem, fd, flags))
            })
        },
    )?;

    linker.func_wrap(
        WASI,
        "fd_fdstat_get",
        |mut caller: Caller<'_, ThreadCtx>, fd: i32, out: i32| -> HostResult<i32> {
            let ctx = caller.data();
            if ctx.memory_export && ctx.answers.std_buffer(&ctx.wasi, fd).is_some() {
                let st = ctx.run.get();
                let mem = st.guest();
                let at = out as u32;
                if at.is_multiple_of(8) && mem.contains(at, 24) {
                    std_fdstat(|offset, bytes| {
                        mem.write(at + offset, bytes);
                    });
                    return Ok(ERRNO_SUCCESS);
                }
            }
            let r = by_wasi_common(&mut caller, |ctx, mem| {
                settle(preview1::fd_fdstat_get(ctx, mem, fd, out))
            });
            if matches!(r, Ok(ERRNO_SUCCESS)) {
                let st = caller.data().run.get();
                if let Some(end) = st.io.end(fd as u32) {
                    let flags: u16 = if end.nonblock { 4 } else { 0 };
                    write_bytes(&st, out as u32 + 2, &flags.to_le_bytes())?;
                }
            }
            r
        },
    )?;

    // The only calls that take a descriptor out of the table: wasi-common
    // answers them, and `Answers` notes that the standard descriptors may
    // no longer be as built. (`Program::new` refuses a module that imports
    // them from another module, such as the older `wasi_unstable`.)
    linker.func_wrap(
        WASI,
        "fd_close",
        |mut caller: Caller<'_, ThreadCtx>, fd: i32| -> HostResult<i32> {
            let r = by_wasi_common(&mut caller, |ctx, mem| {
                settle(preview1::fd_close(ctx, mem, fd))
            });
            if matches!(r, Ok(ERRNO_SUCCESS)) {
                pipes::closed(&caller, fd as u32, None);
            }
            caller.data().answers.table_call(r)
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_renumber",
        |mut caller: Caller<'_, ThreadCtx>, from: i32, to: i32| -> HostResult<i32> {
            let r = by_wasi_common(&mut caller, |ctx, mem| {
                settle(preview1::fd_renumber(ctx, mem, from, to))
            });
            if matches!(r, Ok(ERRNO_SUCCESS)) {
                pipes::closed(&caller, to as u32, Some(from as u32));
            }
            caller.data().answers.table_call(r)
        },
    )?;

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
/// `environ_*` and `args_*`.
fn strings(ctx: &ThreadCtx, env: bool) -> &Strings {
    if env {
        &ctx.answers.env
    } else {
        &ctx.answers.args
    }
}

/// Answers a call as wasi-common's own host function would: with the
/// memory the module exports as `memory`, found as wiggle's glue finds it.
/// For the calls heddle answers itself, whenever its answer does not
/// apply.
fn by_wasi_common(
    caller: &mut Caller<'_, ThreadCtx>,
    call: impl FnOnce(&mut WasiCtx, &mut wiggle::GuestMemory<'_>) -> HostResult<i32>,
) -> HostResult<i32> {
    match caller.get_export("memory") {
        Some(Extern::Memory(m)) => {
            let (mem, ctx) = m.data_and_store_mut(&mut *caller);
            call(&mut ctx.wasi, &mut wiggle::GuestMemory::Unshared(mem))
        }
        Some(Extern::SharedMemory(m)) => call(
            &mut caller.data_mut().wasi,
            &mut wiggle::GuestMemory::Shared(m.data()),
        ),
        _ => Err(wasmtime::Error::msg("missing required memory export")),
    }
}

/// Whether `fd` is a pipe's or a socket pair's (answered by `pipes`).
fn is_pipe(caller: &Caller<'_, ThreadCtx>, fd: i32) -> bool {
    caller.data().run.get().io.end(fd as u32).is_some()
}

/// The result of one of wasi-common's calls, whose futures never wait.
fn settle(call: impl std::future::Future<Output = HostResult<i32>>) -> HostResult<i32> {
    wiggle::run_in_dummy_executor(call)?
}

enum Sub {
    Clock { userdata: u64, deadline: u64 },
    Fd { userdata: u64, kind: u8, fd: u32 },
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
                k @ (1 | 2) => v.push(Sub::Fd {
                    userdata,
                    kind: k,
                    fd: u32::from_le_bytes(s[16..20].try_into().expect("4 bytes")),
                }),
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
            if must_sleep && run.get().signal_ready(tid) {
                super::hooks::deliver_signals(caller).await?;
                return Ok(ERRNO_INTR);
            }
            if must_sleep {
                run.get()
                    .block(tid, Block::Sleep { deadline }, site)
                    .map_err(|_| end_err())?;
                super::hooks::wait_turn(caller).await?;
                if run.get().threads[tid as usize].interrupted {
                    // Cut short by a signal: its handler runs, and the
                    // sleep ends early (no clock event is reported).
                    super::hooks::deliver_signals(caller).await?;
                    return Ok(ERRNO_INTR);
                }
            }
        }
    }
    loop {
        let (out, chans) = poll_events(&run.get(), &parsed);
        if !out.is_empty() || !has_fd {
            let st = run.get();
            write_bytes(&st, events, &out)?;
            write_bytes(&st, nevents, &((out.len() / 32) as u32).to_le_bytes())?;
            return Ok(ERRNO_SUCCESS);
        }
        // Only pipes and socket pairs that are not ready: wait for one of
        // them to change, or for the earliest timeout.
        if pipes::wait(caller, chans, earliest).await? {
            return Ok(ERRNO_INTR);
        }
    }
}

/// The events of `subs` that happened (32 bytes each), and the pipe
/// channels of the descriptors that are not ready. A descriptor that is not
/// a pipe's or a socket pair's is always ready; a due timeout is an event
/// only when no descriptor is ready.
fn poll_events(st: &super::state::RunState, subs: &[Sub]) -> (Vec<u8>, Vec<(u32, bool)>) {
    /// `__WASI_ERRNO_PIPE`, and `__WASI_EVENTRWFLAGS_FD_READWRITE_HANGUP`.
    const ERRNO_PIPE: u16 = 64;
    const HANGUP: u16 = 1;
    let now = st.clock.now();
    let mut out = Vec::new();
    let mut chans = Vec::new();
    for s in subs {
        let mut ev = [0u8; 32];
        let Sub::Fd { userdata, kind, fd } = *s else {
            continue;
        };
        let write = kind == 2;
        let ready = match st.io.end(fd) {
            None => Some(pipes::Ready {
                bytes: 0,
                hangup: false,
                error: false,
            }),
            Some(_) => st.io.ready(fd, write),
        };
        let Some(r) = ready else {
            chans.extend(st.io.chan_of(fd, write).map(|c| (c, write)));
            continue;
        };
        ev[0..8].copy_from_slice(&userdata.to_le_bytes());
        if r.error {
            ev[8..10].copy_from_slice(&ERRNO_PIPE.to_le_bytes());
        }
        ev[10] = kind;
        ev[16..24].copy_from_slice(&r.bytes.to_le_bytes());
        if r.hangup {
            ev[24..26].copy_from_slice(&HANGUP.to_le_bytes());
        }
        out.extend_from_slice(&ev);
    }
    if out.is_empty() {
        for s in subs {
            match *s {
                Sub::Clock { userdata, deadline } if deadline <= now => {
                    let mut ev = [0u8; 32];
                    ev[0..8].copy_from_slice(&userdata.to_le_bytes());
                    out.extend_from_slice(&ev);
                }
                _ => {}
            }
        }
    }
    (out, chans)
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
            let ours = Answers::new("target", args, env, None);
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

    /// A memory of `n` bytes, all 0xa5, as both heddle and wiggle see a
    /// shared one.
    fn cells(n: usize) -> Vec<std::cell::UnsafeCell<u8>> {
        (0..n).map(|_| std::cell::UnsafeCell::new(0xa5)).collect()
    }

    fn bytes(mem: &[std::cell::UnsafeCell<u8>]) -> Vec<u8> {
        // SAFETY: the test's memory, used by no one else.
        unsafe { GuestMemory::serialized(mem) }
            .read(0, mem.len() as u32)
            .unwrap()
    }

    /// heddle's answers to `fd_write` and `fd_fdstat_get` on stdout and
    /// stderr leave the memory and the output as wasi-common's leave them,
    /// and apply wherever a C library's call would succeed.
    #[test]
    fn writes_to_stdout_and_stderr_are_answered_as_wasi_common_answers_them() {
        // (iovecs at, their count, the count written at, the iovecs, whether
        // heddle answers)
        type Case = (u32, u32, u32, &'static [(u32, u32)], bool);
        let cases: &[Case] = &[
            (64, 2, 128, &[(1024, 5), (2048, 3)], true),
            (64, 0, 128, &[], true),
            (64, 3, 128, &[(1024, 0), (1030, 7), (4095, 1)], true),
            (4088, 1, 4092, &[(0, 4096)], true),
            (64, 1, 1024, &[(1024, 8)], true),
            (64, 1, 64, &[(1024, 8)], true),
            (64, 1, 130, &[(1024, 5)], false),
            (66, 1, 128, &[(1024, 5)], false),
            (64, 1, 128, &[(4090, 10)], false),
            (64, 1, 4094, &[(1024, 5)], false),
            (4092, 1, 128, &[], false),
            (64, 17, 128, &[], false),
        ];
        for fd in [1, 2] {
            for &(iovs, count, written, parts, ours_applies) in cases {
                let (mine, theirs) = (cells(4096), cells(4096));
                for mem in [&mine, &theirs] {
                    // SAFETY: the test's memory, used by no one else.
                    let m = unsafe { GuestMemory::serialized(mem) };
                    for (i, &(buf, len)) in parts.iter().enumerate() {
                        let at = iovs + 8 * i as u32;
                        m.write(at, &buf.to_le_bytes());
                        m.write(at + 4, &len.to_le_bytes());
                        let text: Vec<u8> = (0..len.min(64)).map(|b| b as u8 + i as u8).collect();
                        m.write(buf, &text);
                    }
                }
                let out = Output::default();
                let buffer = if fd == 1 { &out.stdout } else { &out.stderr };
                // SAFETY: the test's memory, used by no one else.
                let got = std_write(
                    unsafe { GuestMemory::serialized(&mine) },
                    buffer,
                    iovs,
                    count,
                    written,
                );
                let case = format!("fd {fd}, iovecs {parts:?} at {iovs}, count at {written}");
                assert_eq!(got.is_some(), ours_applies, "{case}");
                let their_out = Output::default();
                let mut ctx = context("t", &[], &[], &[], &their_out).unwrap();
                let want = settle(preview1::fd_write(
                    &mut ctx,
                    &mut wiggle::GuestMemory::Shared(&theirs),
                    fd,
                    iovs as i32,
                    count as i32,
                    written as i32,
                ));
                if got.is_some() {
                    assert_eq!(want.ok(), Some(ERRNO_SUCCESS), "{case}");
                    assert_eq!(bytes(&mine), bytes(&theirs), "{case}");
                    assert_eq!(out.take(), their_out.take(), "{case}");
                }
            }
            for at in [0, 64, 4072, 4073, 4076, 4080, 4096] {
                let (mine, theirs) = (cells(4096), cells(4096));
                let ours = at % 8 == 0 && at + 24 <= 4096;
                if ours {
                    // SAFETY: the test's memory, used by no one else.
                    let m = unsafe { GuestMemory::serialized(&mine) };
                    std_fdstat(|offset, bytes| assert!(m.write(at + offset, bytes)));
                }
                let mut ctx = context("t", &[], &[], &[], &Output::default()).unwrap();
                let want = settle(preview1::fd_fdstat_get(
                    &mut ctx,
                    &mut wiggle::GuestMemory::Shared(&theirs),
                    fd,
                    at as i32,
                ));
                assert_eq!(want.is_ok(), ours, "fd {fd}, fdstat at {at}");
                if ours {
                    assert_eq!(want.ok(), Some(ERRNO_SUCCESS));
                    assert_eq!(bytes(&mine), bytes(&theirs), "fd {fd}, fdstat at {at}");
                }
            }
        }
    }

    /// heddle answers for stdout and stderr only while 0, 1 and 2 are all
    /// open, and never without the buffers of a bare context; a renumbering
    /// that failed leaves them open.
    #[test]
    fn stdout_and_stderr_are_answered_only_as_built() {
        let out = Output::default();
        let mut ctx = context("t", &[], &[], &[], &out).unwrap();
        let answers = Answers::new("t", &[], &[], Some(out.clone()));
        assert!(answers.std_buffer(&ctx, 0).is_none());
        assert!(answers.std_buffer(&ctx, 1).is_some());
        assert!(answers.std_buffer(&ctx, 2).is_some());
        assert!(answers.std_buffer(&ctx, 3).is_none());
        assert!(Answers::new("t", &[], &[], None)
            .std_buffer(&ctx, 1)
            .is_none());
        let mut bytes = [0u8; 8];
        let mut mem = wiggle::GuestMemory::Unshared(&mut bytes);
        let r = settle(preview1::fd_renumber(&mut ctx, &mut mem, 7, 1));
        assert!(matches!(answers.table_call(r), Ok(errno) if errno != ERRNO_SUCCESS));
        assert!(answers.std_buffer(&ctx, 1).is_some());
        let r = settle(preview1::fd_renumber(&mut ctx, &mut mem, 2, 1));
        assert_eq!(answers.table_call(r).ok(), Some(ERRNO_SUCCESS));
        assert!(!std_as_built(&ctx));
        assert!(answers.std_buffer(&ctx, 1).is_none());
    }
}
