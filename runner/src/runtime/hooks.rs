//! Host functions: the `heddle_rt` imports added by instrumentation, the
//! guest SDK (`heddle.*`) and `wasi.thread-spawn`.
//!
//! A sync hook (`access`, `notify`) that does not switch threads costs one
//! host call; when the scheduler picks another thread it says so (1, or -1
//! for `notify`) and the guest calls an async hook (`switch`,
//! `notify_switched`), whose future stays pending until this thread is
//! picked again — that suspends the guest thread's fiber and returns control
//! to the executor, which resumes the chosen thread's fiber.

use super::state::{Outcome, RunCell, RunEnd, RunState};
use super::ThreadCtx;
use crate::instrument::{RtImport, SdkImport, SiteId};
use crate::model::{Block, EventKind, Pending, RawFrame, Tid, NO_SITE};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use wasmtime::{Caller, Linker, Trap, Val, WasmBacktrace};

pub type HostResult<T> = wasmtime::Result<T>;

pub fn end_err() -> wasmtime::Error {
    wasmtime::Error::new(RunEnd)
}

/// `pthread_exit(value)`: unwinds the calling thread to its start routine.
#[derive(Debug)]
pub struct ThreadExit(pub i32);

impl std::fmt::Display for ThreadExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "thread exited with pthread_exit")
    }
}
impl std::error::Error for ThreadExit {}

/// A signal whose default action ends the process was delivered: the run
/// ends with a `signal` trap naming it.
#[derive(Debug)]
pub struct Killed(pub u32);

impl std::fmt::Display for Killed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "killed by {} (its default action; no handler)",
            crate::model::signals::name(self.0)
        )
    }
}
impl std::error::Error for Killed {}

/// Resolves when `tid` is the current thread again (or the run ended).
struct Turn {
    run: Arc<RunCell>,
    tid: Tid,
}

impl Future for Turn {
    type Output = Result<(), RunEnd>;
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        let st = self.run.get();
        if st.ended() || st.closed {
            Poll::Ready(Err(RunEnd))
        } else if st.current == self.tid {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }
}

/// Waits until this thread runs again, then gives it a fresh slice budget.
pub async fn wait_turn(caller: &mut Caller<'_, ThreadCtx>) -> HostResult<()> {
    let budget = turn(caller).await?;
    if let Some(g) = caller.data().budget {
        g.set(&mut *caller, Val::I32(budget))?;
    }
    Ok(())
}

/// Waits until this thread runs again; returns the budget of the slice
/// that starts then, for a hook that returns it to the guest (which sets
/// the global itself, cheaper than the host's `Global::set`).
async fn turn(caller: &mut Caller<'_, ThreadCtx>) -> HostResult<i32> {
    let turn = Turn {
        run: caller.data().run.clone(),
        tid: caller.data().tid,
    };
    turn.await.map_err(|_| end_err())?;
    Ok(caller.data().run.get().next_budget())
}

/// Accounts for the guarded yield points the calling thread skipped since
/// its last host call and takes its unused skips back, so that the host's
/// step count and clock are exact from here on (see
/// [`RunState::reconcile`](super::state::RunState::reconcile)).
#[inline]
pub fn reconcile(caller: &mut Caller<'_, ThreadCtx>) -> HostResult<()> {
    if caller.data().run.get().granted == 0 {
        return Ok(());
    }
    super::settle_skips(caller)
}

/// Grants the calling thread `n` skips (none when `n` is 0).
fn grant_skips(caller: &mut Caller<'_, ThreadCtx>, n: u32) -> HostResult<()> {
    let Some(g) = caller.data().skip.filter(|_| n > 0) else {
        return Ok(());
    };
    g.set(&mut *caller, Val::I32(n as i32))?;
    caller.data().run.get().granted = n;
    Ok(())
}

/// A yield point reached from an async hook: switch if the scheduler says so.
pub async fn yield_async(caller: &mut Caller<'_, ThreadCtx>, p: Pending) -> HostResult<()> {
    note_stack(caller);
    let (run, tid) = (caller.data().run.clone(), caller.data().tid);
    let switch = run.get().yield_point(tid, p).map_err(|_| end_err())?;
    if switch {
        wait_turn(caller).await?;
    }
    Ok(())
}

/// With `event_stacks`, remembers the calling thread's stack for its
/// pending event.
#[inline]
fn note_stack(caller: &Caller<'_, ThreadCtx>) {
    let ctx = caller.data();
    if ctx.run.get().limits.event_stacks {
        let stack = raw_stack(caller);
        ctx.run.get().threads[ctx.tid as usize].pending_stack = stack;
    }
}

/// The pending event of an access at `site` with dynamic address `addr`.
/// An access that would fall outside the memory (as the guest sizes it: a
/// recycled memory may be physically larger) traps here, as it would in wasm.
#[inline]
fn access_event(st: &RunState, site: u32, addr: u32, len: Option<u32>) -> HostResult<Pending> {
    let p = pending_access(st, site, addr, len);
    if out_of_bounds(st, &p) {
        return Err(Trap::MemoryOutOfBounds.into());
    }
    Ok(p)
}

/// The pending event of an access, unchecked. An effective address past
/// 4 GiB is kept as `u32::MAX` (out of bounds whatever the length).
#[inline]
fn pending_access(st: &RunState, site: u32, addr: u32, len: Option<u32>) -> Pending {
    let Some(s) = st.info.get(site as usize) else {
        return Pending {
            site: NO_SITE,
            kind: EventKind::Call,
            addr,
            len: 0,
        };
    };
    let kind = EventKind::from_site(s.kind);
    let len = len.unwrap_or(s.size);
    let ea = addr as u64 + s.mem_offset;
    Pending {
        site,
        kind,
        addr: ea.min(u32::MAX as u64) as u32,
        len,
    }
}

/// Whether the access `p` falls outside the memory as the guest sizes it.
#[inline]
fn out_of_bounds(st: &RunState, p: &Pending) -> bool {
    p.kind.is_access() && p.addr as u64 + p.len as u64 > (st.memory.pages as u64) << 16
}

/// The stack of the calling guest thread.
pub fn raw_stack(caller: &Caller<'_, ThreadCtx>) -> Vec<RawFrame> {
    WasmBacktrace::force_capture(caller)
        .frames()
        .iter()
        .map(|f| RawFrame {
            func: f.func_index(),
            offset: f.module_offset().map(|o| o as u32),
        })
        .collect()
}

/// Reads a NUL-terminated string (at most 4 KiB) from guest memory.
pub fn read_cstr(st: &RunState, addr: u32) -> String {
    st.guest().cstr(addr, 4096)
}

/// Reads `len` bytes of guest memory, or a bounds trap.
pub fn read_bytes(st: &RunState, addr: u32, len: u32) -> HostResult<Vec<u8>> {
    Ok(st.guest().read(addr, len).ok_or(Trap::MemoryOutOfBounds)?)
}

/// Writes guest memory, or a bounds trap.
pub fn write_bytes(st: &RunState, addr: u32, bytes: &[u8]) -> HostResult<()> {
    if st.guest().write(addr, bytes) {
        Ok(())
    } else {
        Err(Trap::MemoryOutOfBounds.into())
    }
}

fn check_atomic(st: &RunState, ea: u32, size: u32) -> HostResult<()> {
    if !ea.is_multiple_of(size) {
        return Err(Trap::HeapMisaligned.into());
    }
    if ea as u64 + size as u64 > (st.memory.pages as u64) << 16 {
        return Err(Trap::MemoryOutOfBounds.into());
    }
    Ok(())
}

/// The effective address of a futex op at `site`.
/// An effective address past 4 GiB is out of bounds (wasm computes it
/// without wrapping).
fn futex_addr(st: &RunState, site: u32, addr: u32) -> HostResult<u32> {
    let off = st
        .info
        .get(site as usize)
        .map(|s| s.mem_offset)
        .unwrap_or(0);
    u32::try_from(addr as u64 + off).map_err(|_| Trap::MemoryOutOfBounds.into())
}

/// Blocks in a futex wait; returns 0 (woken) or 2 (timed out).
async fn futex_wait(
    caller: &mut Caller<'_, ThreadCtx>,
    site: u32,
    ea: u32,
    equal: bool,
    timeout: i64,
) -> HostResult<i32> {
    if !equal {
        return Ok(1);
    }
    if caller.data().run.get().signal_ready(caller.data().tid) {
        // A signal came before the wait: taken instead of waiting (the
        // wait returns as a wake, and the C library waits again).
        deliver_signals(caller).await?;
        return Ok(0);
    }
    let (run, tid, started) = (
        caller.data().run.clone(),
        caller.data().tid,
        caller.data().started,
    );
    if !started {
        return Err(wasmtime::Error::msg(
            "memory.atomic.wait would block before the thread started",
        ));
    }
    // A wait in library code that no user-code lock call led to (Rust's
    // futex-based `Mutex`, `Condvar`, `park`) is placed at the user frame
    // that called it, in every run: deadlock signatures must agree between
    // fast and diagnostic runs.
    let capture = {
        let st = run.get();
        st.limits.diagnostics
            || (st.threads[tid as usize].wants.is_none()
                && !st.sites.site(site).is_some_and(|s| s.user))
    };
    let stack = if capture {
        raw_stack(caller)
    } else {
        Vec::new()
    };
    {
        let mut st = run.get();
        let deadline = (timeout >= 0).then(|| st.clock.now().saturating_add(timeout as u64));
        st.threads[tid as usize].block_stack = stack;
        st.block(tid, Block::Futex { addr: ea, deadline }, site)
            .map_err(|_| end_err())?;
    }
    wait_turn(caller).await?;
    let (r, interrupted) = {
        let st = run.get();
        let th = &st.threads[tid as usize];
        (th.wake_result, th.interrupted)
    };
    if interrupted {
        // Woken for a signal: its handler runs, then the wait returns as a
        // wake (the C library re-checks its word and waits again; the
        // SDK's `sem_wait` asks `sig_interrupted` and fails with EINTR).
        deliver_signals(caller).await?;
        run.get().threads[tid as usize].wait_cut = true;
    }
    Ok(r)
}

fn assertion(caller: &Caller<'_, ThreadCtx>, message: String) -> wasmtime::Error {
    let stack = raw_stack(caller);
    let tid = caller.data().tid;
    caller.data().run.get().end(Outcome::Assertion {
        message,
        tid,
        stack,
    });
    end_err()
}

/// The memory checker's look at the access the calling thread is about to
/// execute (its pending event).
#[inline]
fn check_pending(caller: &Caller<'_, ThreadCtx>) -> HostResult<()> {
    let ctx = caller.data();
    let st = ctx.run.get();
    let p = st.pending(ctx.tid);
    if !p.kind.is_access() && !matches!(p.kind, EventKind::Lock | EventKind::Unlock) {
        return Ok(());
    }
    if out_of_bounds(&st, &p) {
        return Err(Trap::MemoryOutOfBounds.into());
    }
    match st.check_access(&p) {
        None => Ok(()),
        Some((kind, block)) => {
            drop(st);
            Err(memory_error(caller, kind, p.addr, p.site, block))
        }
    }
}

/// Ends the run with a memory error at the calling thread.
fn memory_error(
    caller: &Caller<'_, ThreadCtx>,
    kind: &'static str,
    addr: u32,
    site: u32,
    block: Option<crate::model::heap::Block>,
) -> wasmtime::Error {
    let stack = raw_stack(caller);
    let ctx = caller.data();
    let mut st = ctx.run.get();
    let error = st.memory_error(kind, (ctx.tid, addr, site), stack, block);
    st.end(Outcome::Memory(error));
    end_err()
}

/// The notify at `site` on the futex word at `ea`, made now by the
/// calling thread: returns the number of threads woken.
fn notify_now(caller: &Caller<'_, ThreadCtx>, site: u32, ea: u32, count: u32) -> HostResult<i32> {
    let ctx = caller.data();
    let mut st = ctx.run.get();
    check_atomic(&st, ea, 4)?;
    let woken = st.notify(ctx.tid, site, ea, count).map_err(|_| end_err())?;
    Ok(woken as i32)
}

/// Delivers every pending signal the calling thread does not block, lowest
/// number first: a handler runs on this thread (through the guest's
/// delivery function, which the host calls re-entrantly by its table index),
/// a default action ends the run or does nothing (`runtime::signals`).
pub async fn deliver_signals(caller: &mut Caller<'_, ThreadCtx>) -> HostResult<()> {
    use crate::model::signals::{bit, discarded};
    let tid = caller.data().tid;
    loop {
        let (sig, func) = {
            let run = caller.data().run.clone();
            let mut st = run.get();
            let process = st.signals.process;
            let th = &mut st.threads[tid as usize];
            let ready = (th.sig_pending | process) & !th.sig_mask;
            if ready == 0 {
                return Ok(());
            }
            let sig = ready.trailing_zeros() + 1;
            let b = bit(sig);
            th.sig_pending &= !b;
            st.signals.process &= !b;
            let signals = st.signals;
            if signals.handled & b != 0 {
                (sig, signals.deliver)
            } else if discarded(signals.handled, signals.ignored, b) {
                continue;
            } else {
                return Err(wasmtime::Error::new(Killed(sig)));
            }
        };
        let func = func.ok_or_else(|| wasmtime::Error::msg("no signal delivery function"))?;
        let table = caller
            .data()
            .funcs
            .ok_or_else(|| wasmtime::Error::msg("module exports no function table"))?;
        let f = table
            .get(&mut *caller, func as u64)
            .and_then(|r| r.as_func().flatten().copied())
            .ok_or(Trap::IndirectCallToNull)?;
        let f = f.typed::<i32, i32>(&*caller)?;
        f.call_async(&mut *caller, sig as i32).await?;
    }
}

/// Whether the calling thread, before a yield point at `site`, takes its
/// ready signals now (a decision of the strategy).
fn signal_here(caller: &Caller<'_, ThreadCtx>, site: u32) -> HostResult<bool> {
    let ctx = caller.data();
    let mut st = ctx.run.get();
    if !st.signals.sent || !st.signal_ready(ctx.tid) {
        return Ok(false);
    }
    st.decide_signal(ctx.tid, site).map_err(|_| end_err())
}

/// Adds every heddle host function to `linker`.
pub fn add_to_linker(linker: &mut Linker<ThreadCtx>) -> anyhow::Result<()> {
    let m = RtImport::MODULE;

    linker.func_wrap(
        m,
        RtImport::Access.name(),
        |mut caller: Caller<'_, ThreadCtx>, site: u32, addr: u32| -> HostResult<i32> {
            // The hot path: one borrow of the run state, no allocation.
            if !caller.data().started {
                return Ok(0);
            }
            reconcile(&mut caller)?;
            let ctx = caller.data();
            let mut st = ctx.run.get();
            if st.limits.event_stacks {
                drop(st);
                note_stack(&caller);
                st = ctx.run.get();
            }
            // The yield point comes first, then the access, which may trap
            // (as it does when the guest skips the yield point).
            let p = pending_access(&st, site, addr, None);
            if st.signals.sent && st.signal_ready(ctx.tid) && !out_of_bounds(&st, &p) {
                // A signal may be delivered here, before the access's yield
                // point (so that the access is seen where it runs, after
                // the handler). When the strategy says now, the guest's
                // `switch` (which finds this thread current) delivers.
                if st.decide_signal(ctx.tid, site).map_err(|_| end_err())? {
                    st.threads[ctx.tid as usize].sig_resume = Some(p);
                    return Ok(1);
                }
            }
            if st.locks.words.is_some() && matches!(p.kind, EventKind::Rmw | EventKind::Cmpxchg) {
                // Where a futex word may be taken (for deadlock reports).
                drop(st);
                let stack = raw_stack(&caller);
                st = ctx.run.get();
                st.threads[ctx.tid as usize].word_stack = stack;
            }
            match st.yield_point(ctx.tid, p) {
                Ok(false) if out_of_bounds(&st, &p) => Err(Trap::MemoryOutOfBounds.into()),
                Ok(false) => match st.check_access(&p) {
                    // No skips while a signal waits for a yield point.
                    None if st.signals.sent && st.signal_ready(ctx.tid) => Ok(0),
                    None => {
                        // The fast path: skips for the guarded yield points
                        // that follow (never across an import call, whose own
                        // yield point is not guarded).
                        let n = if p.kind.is_skippable() {
                            st.solo_window()
                        } else {
                            0
                        };
                        drop(st);
                        grant_skips(&mut caller, n)?;
                        Ok(0)
                    }
                    Some((kind, block)) => {
                        drop(st);
                        Err(memory_error(&caller, kind, p.addr, p.site, block))
                    }
                },
                Ok(true) => Ok(1),
                Err(_) => Err(end_err()),
            }
        },
    )?;

    linker.func_wrap(
        m,
        RtImport::Range.name(),
        |mut caller: Caller<'_, ThreadCtx>, site: u32, addr: u32, len: u32| -> HostResult<i32> {
            if !caller.data().started {
                return Ok(0);
            }
            reconcile(&mut caller)?;
            let ctx = caller.data();
            note_stack(&caller);
            let mut st = ctx.run.get();
            let p = access_event(&st, site, addr, Some(len))?;
            let switch = st.yield_point(ctx.tid, p).map_err(|_| end_err())?;
            drop(st);
            if !switch {
                check_pending(&caller)?;
            }
            Ok(switch as i32)
        },
    )?;

    linker.func_wrap(
        m,
        RtImport::Copy.name(),
        |mut caller: Caller<'_, ThreadCtx>,
         site: u32,
         dst: u32,
         src: u32,
         len: u32|
         -> HostResult<i32> {
            if !caller.data().started {
                return Ok(0);
            }
            reconcile(&mut caller)?;
            let ctx = caller.data();
            note_stack(&caller);
            let mut st = ctx.run.get();
            let p = access_event(&st, site, dst, Some(len))?;
            let src_event = access_event(&st, site, src, Some(len))?;
            let bad_src = st.check_access(&src_event);
            let switch = st.yield_point(ctx.tid, p).map_err(|_| end_err())?;
            drop(st);
            if let Some((kind, block)) = bad_src {
                return Err(memory_error(&caller, kind, src_event.addr, site, block));
            }
            if !switch {
                check_pending(&caller)?;
            }
            Ok(switch as i32)
        },
    )?;

    linker.func_wrap_async(
        m,
        RtImport::Switch.name(),
        |mut caller: Caller<'_, ThreadCtx>, (): ()| {
            Box::new(async move {
                let budget = turn(&mut caller).await?;
                let tid = caller.data().tid;
                let resume = caller.data().run.get().threads[tid as usize]
                    .sig_resume
                    .take();
                if let Some(p) = resume {
                    // A signal delivered before the yield point of `p`.
                    deliver_signals(&mut caller).await?;
                    yield_async(&mut caller, p).await?;
                }
                // The access this thread stopped before runs now.
                check_pending(&caller)?;
                Ok(budget)
            })
        },
    )?;

    linker.func_wrap_async(
        m,
        RtImport::Budget.name(),
        |mut caller: Caller<'_, ThreadCtx>, (site,): (u32,)| {
            Box::new(async move {
                if !caller.data().started {
                    // The start function: no slice, no draw from the run's
                    // budget stream (a reused instance does not run it).
                    return Ok(i32::MAX);
                }
                reconcile(&mut caller)?;
                let p = Pending {
                    site,
                    kind: EventKind::Budget,
                    addr: 0,
                    len: 0,
                };
                if signal_here(&caller, site)? {
                    deliver_signals(&mut caller).await?;
                }
                yield_async(&mut caller, p).await?;
                Ok(caller.data().run.get().next_budget())
            })
        },
    )?;

    linker.func_wrap_async(
        m,
        RtImport::Wait32.name(),
        |mut caller: Caller<'_, ThreadCtx>,
         (site, addr, expected, timeout): (u32, u32, i32, i64)| {
            Box::new(async move {
                let ea = futex_addr(&caller.data().run.get(), site, addr)?;
                if caller.data().started {
                    reconcile(&mut caller)?;
                    yield_async(
                        &mut caller,
                        Pending {
                            site,
                            kind: EventKind::Wait,
                            addr: ea,
                            len: 4,
                        },
                    )
                    .await?;
                }
                let run = caller.data().run.clone();
                let equal = {
                    let st = run.get();
                    check_atomic(&st, ea, 4)?;
                    st.read_le(ea, 4) == Some(expected as u32 as u64)
                };
                futex_wait(&mut caller, site, ea, equal, timeout).await
            })
        },
    )?;

    linker.func_wrap_async(
        m,
        RtImport::Wait64.name(),
        |mut caller: Caller<'_, ThreadCtx>,
         (site, addr, expected, timeout): (u32, u32, i64, i64)| {
            Box::new(async move {
                let ea = futex_addr(&caller.data().run.get(), site, addr)?;
                if caller.data().started {
                    reconcile(&mut caller)?;
                    yield_async(
                        &mut caller,
                        Pending {
                            site,
                            kind: EventKind::Wait,
                            addr: ea,
                            len: 8,
                        },
                    )
                    .await?;
                }
                let run = caller.data().run.clone();
                let equal = {
                    let st = run.get();
                    check_atomic(&st, ea, 8)?;
                    st.read_le(ea, 8) == Some(expected as u64)
                };
                futex_wait(&mut caller, site, ea, equal, timeout).await
            })
        },
    )?;

    linker.func_wrap(
        m,
        RtImport::Notify.name(),
        |mut caller: Caller<'_, ThreadCtx>, site: u32, addr: u32, count: u32| -> HostResult<i32> {
            let ea = futex_addr(&caller.data().run.get(), site, addr)?;
            if caller.data().started {
                reconcile(&mut caller)?;
                note_stack(&caller);
                let ctx = caller.data();
                let p = Pending {
                    site,
                    kind: EventKind::Notify,
                    addr: ea,
                    len: 4,
                };
                if ctx
                    .run
                    .get()
                    .yield_point(ctx.tid, p)
                    .map_err(|_| end_err())?
                {
                    // The guest calls `notify_switched`.
                    return Ok(-1);
                }
            }
            notify_now(&caller, site, ea, count)
        },
    )?;

    linker.func_wrap_async(
        m,
        RtImport::NotifySwitched.name(),
        |mut caller: Caller<'_, ThreadCtx>, (site, addr, count): (u32, u32, u32)| {
            Box::new(async move {
                wait_turn(&mut caller).await?;
                let ea = futex_addr(&caller.data().run.get(), site, addr)?;
                notify_now(&caller, site, ea, count)
            })
        },
    )?;

    linker.func_wrap_async(
        m,
        RtImport::CallCatching.name(),
        |mut caller: Caller<'_, ThreadCtx>, (arg, func): (i32, u32)| {
            Box::new(async move {
                reconcile(&mut caller)?;
                let table = caller
                    .data()
                    .table
                    .ok_or_else(|| wasmtime::Error::msg("module exports no table"))?;
                let f = table
                    .get(&mut caller, func as u64)
                    .and_then(|r| r.as_func().flatten().copied())
                    .ok_or(Trap::IndirectCallToNull)?;
                let f = f.typed::<i32, i32>(&caller)?;
                let sp = caller.data().sp;
                let saved = sp.map(|g| g.get(&mut caller));
                match f.call_async(&mut caller, arg).await {
                    Ok(r) => Ok(r),
                    Err(e) => match e.downcast_ref::<ThreadExit>() {
                        Some(ThreadExit(v)) => {
                            let v = *v;
                            if let (Some(g), Some(val)) = (sp, saved) {
                                g.set(&mut caller, val)?;
                            }
                            Ok(v)
                        }
                        None => Err(e),
                    },
                }
            })
        },
    )?;

    linker.func_wrap(
        m,
        RtImport::Locked.name(),
        |mut caller: Caller<'_, ThreadCtx>, site: u32, addr: u32, ret: i32| -> HostResult<()> {
            if caller.data().started {
                reconcile(&mut caller)?;
                let ctx = caller.data();
                ctx.run.get().locked(ctx.tid, site, addr, ret);
            }
            Ok(())
        },
    )?;

    linker.func_wrap(
        m,
        RtImport::Grow.name(),
        |mut caller: Caller<'_, ThreadCtx>, delta: i32| -> HostResult<i32> {
            reconcile(&mut caller)?;
            Ok(caller.data().run.get().grow(delta as u32))
        },
    )?;
    linker.func_wrap(
        m,
        RtImport::Size.name(),
        |caller: Caller<'_, ThreadCtx>| -> i32 { caller.data().run.get().memory.pages as i32 },
    )?;
    linker.func_wrap(m, RtImport::Unreachable.name(), || -> HostResult<()> {
        Err(wasmtime::Trap::UnreachableCodeReached.into())
    })?;

    linker.func_wrap(
        m,
        RtImport::AllocArgs.name(),
        |caller: Caller<'_, ThreadCtx>, site: u32, a0: u32, a1: u32, a2: u32| -> HostResult<()> {
            let ctx = caller.data();
            let mut st = ctx.run.get();
            if st.checkers.mem.is_none() {
                return Ok(());
            }
            let is_free = st
                .sites
                .site(site)
                .is_some_and(|s| s.kind == crate::instrument::SiteKind::Free);
            match st.alloc_args(ctx.tid, site, [a0, a1, a2]) {
                Ok(()) => {
                    if is_free && a0 != 0 && st.limits.diagnostics {
                        drop(st);
                        let stack = raw_stack(&caller);
                        if let Some(mem) = &mut ctx.run.get().checkers.mem {
                            mem.freed_at(a0, stack);
                        }
                    }
                    Ok(())
                }
                Err((kind, addr, block)) => {
                    drop(st);
                    Err(memory_error(&caller, kind, addr, site, block))
                }
            }
        },
    )?;
    linker.func_wrap(
        m,
        RtImport::AllocArg.name(),
        |caller: Caller<'_, ThreadCtx>, i: u32| -> u32 {
            let ctx = caller.data();
            let st = ctx.run.get();
            if st.checkers.mem.is_none() {
                return 0;
            }
            st.alloc_arg(ctx.tid, i)
        },
    )?;
    linker.func_wrap(
        m,
        RtImport::AllocPost.name(),
        |caller: Caller<'_, ThreadCtx>, site: u32, result: u32| -> u32 {
            let ctx = caller.data();
            let mut st = ctx.run.get();
            if st.checkers.mem.is_none() {
                return result;
            }
            let ret = st.alloc_post(ctx.tid, site, result);
            if st.limits.diagnostics && ret != 0 {
                drop(st);
                let stack = raw_stack(&caller);
                if let Some(mem) = &mut ctx.run.get().checkers.mem {
                    mem.allocated_at(stack);
                }
            }
            ret
        },
    )?;

    // wasi.thread-spawn
    linker.func_wrap_async(
        "wasi",
        "thread-spawn",
        |mut caller: Caller<'_, ThreadCtx>, (start_arg,): (u32,)| {
            Box::new(async move {
                let run = caller.data().run.clone();
                let child = {
                    let mut st = run.get();
                    if st.threads.len() >= super::MAX_THREADS {
                        return Ok(-6); // EAGAIN
                    }
                    st.spawn(caller.data().tid, start_arg)
                };
                yield_async(
                    &mut caller,
                    Pending {
                        site: NO_SITE,
                        kind: EventKind::Spawn,
                        addr: 0,
                        len: 0,
                    },
                )
                .await?;
                Ok(child as i32)
            })
        },
    )?;

    add_sdk(linker)
}

/// The site of the call the thread is making (its last yield point).
pub(crate) fn current_site(st: &RunState, tid: Tid) -> SiteId {
    st.pending(tid).site
}

fn add_sdk(linker: &mut Linker<ThreadCtx>) -> anyhow::Result<()> {
    let m = SdkImport::MODULE;
    linker.func_wrap(
        m,
        SdkImport::Assert.name(),
        |caller: Caller<'_, ThreadCtx>, cond: i32, msg: u32| -> HostResult<()> {
            if cond != 0 {
                return Ok(());
            }
            let message = read_cstr(&caller.data().run.get(), msg);
            Err(assertion(&caller, message))
        },
    )?;
    linker.func_wrap(
        m,
        SdkImport::Fail.name(),
        |caller: Caller<'_, ThreadCtx>, msg: u32| -> HostResult<()> {
            let message = read_cstr(&caller.data().run.get(), msg);
            Err(assertion(&caller, message))
        },
    )?;
    linker.func_wrap_async(
        m,
        SdkImport::Yield.name(),
        |mut caller: Caller<'_, ThreadCtx>, (): ()| {
            Box::new(async move {
                let site = current_site(&caller.data().run.get(), caller.data().tid);
                yield_async(
                    &mut caller,
                    Pending {
                        site,
                        kind: EventKind::Yield,
                        addr: 0,
                        len: 0,
                    },
                )
                .await
            })
        },
    )?;
    linker.func_wrap_async(
        m,
        SdkImport::Event.name(),
        |mut caller: Caller<'_, ThreadCtx>, (name,): (u32,)| {
            Box::new(async move {
                let run = caller.data().run.clone();
                let tid = caller.data().tid;
                let site = {
                    let mut st = run.get();
                    let label = read_cstr(&st, name);
                    let step = st.steps;
                    st.record.labels.push((step, tid, label));
                    current_site(&st, tid)
                };
                yield_async(
                    &mut caller,
                    Pending {
                        site,
                        kind: EventKind::Label,
                        addr: 0,
                        len: 0,
                    },
                )
                .await
            })
        },
    )?;
    linker.func_wrap(
        m,
        SdkImport::ThreadName.name(),
        |caller: Caller<'_, ThreadCtx>, name: u32| -> HostResult<()> {
            let tid = caller.data().tid;
            let mut st = caller.data().run.get();
            let n = read_cstr(&st, name);
            st.threads[tid as usize].name = Some(n);
            Ok(())
        },
    )?;
    linker.func_wrap(
        m,
        SdkImport::Choose.name(),
        |caller: Caller<'_, ThreadCtx>, n: u32| -> HostResult<u32> {
            let tid = caller.data().tid;
            let mut st = caller.data().run.get();
            let site = current_site(&st, tid);
            st.choose(tid, site, n).map_err(|_| end_err())
        },
    )?;
    linker.func_wrap(
        m,
        SdkImport::ThreadExit.name(),
        |_caller: Caller<'_, ThreadCtx>, value: i32| -> HostResult<()> {
            Err(wasmtime::Error::new(ThreadExit(value)))
        },
    )?;
    Ok(())
}
