//! POSIX signals as scheduling decisions: the host side of the guest SDK's
//! `signals.c` (`heddle.sig_*` imports).
//!
//! Dispositions live in [`Signals`](super::state::Signals), each thread's
//! mask and pending set in its record. A signal sent to a thread stays
//! pending until one of that thread's yield points where the strategy
//! decides to deliver it (a value decision, recorded in the replay like
//! every other), or at once when a thread signals itself, unblocks it, or
//! waits for it. Delivering runs the default action on the host (ending the
//! run with a verdict naming the signal, or nothing for the signals ignored
//! by default) or calls the guest's delivery function re-entrantly, on the
//! receiving thread's stack, which runs the handler under the mask rules.
//! A thread blocked in a futex wait or a sleep when a signal it does not
//! block arrives is woken for it: its handler runs, then the futex wait
//! returns as if woken (the C library waits again) and the sleep returns
//! early.

use super::hooks::{deliver_signals, end_err, raw_stack, wait_turn, HostResult};
use super::ThreadCtx;
use crate::instrument::SdkImport;
use crate::model::signals::{bit, discarded, UNBLOCKABLE};
use crate::model::{Block, Status};
use wasmtime::{Caller, Linker};

/// Adds the `heddle.sig_*` functions to `linker`.
pub fn add_to_linker(linker: &mut Linker<ThreadCtx>) -> anyhow::Result<()> {
    let m = SdkImport::MODULE;
    linker.func_wrap(
        m,
        SdkImport::SigAction.name(),
        |caller: Caller<'_, ThreadCtx>, sig: u32, kind: u32, func: u32| -> HostResult<()> {
            if !(1..=64).contains(&sig) {
                return Ok(());
            }
            let b = bit(sig);
            let mut st = caller.data().run.get();
            let s = &mut st.signals;
            s.handled &= !b;
            s.ignored &= !b;
            match kind {
                1 => s.ignored |= b,
                2 => {
                    s.handled |= b;
                    s.deliver = Some(func);
                }
                _ => {}
            }
            if discarded(st.signals.handled, st.signals.ignored, b) {
                // POSIX: setting a pending signal to be ignored discards it
                // (a ready thread is filed again: it may wait for a lock).
                st.signals.process &= !b;
                for t in 0..st.threads.len() {
                    let th = &mut st.threads[t];
                    if th.sig_pending & b != 0 {
                        th.sig_pending &= !b;
                        if th.status == Status::Ready {
                            st.refile(t as crate::model::Tid);
                        }
                    }
                }
            }
            Ok(())
        },
    )?;
    linker.func_wrap_async(
        m,
        SdkImport::SigMask.name(),
        |mut caller: Caller<'_, ThreadCtx>, (how, set): (u32, u64)| {
            Box::new(async move {
                let tid = caller.data().tid;
                let (old, deliver) = {
                    let mut st = caller.data().run.get();
                    let th = &mut st.threads[tid as usize];
                    let old = th.sig_mask;
                    th.sig_mask = match how {
                        0 => old | set,
                        1 => old & !set,
                        2 => set,
                        _ => old,
                    } & !UNBLOCKABLE;
                    (old, st.signal_ready(tid))
                };
                if deliver {
                    deliver_signals(&mut caller).await?;
                }
                Ok(old)
            })
        },
    )?;
    linker.func_wrap_async(
        m,
        SdkImport::SigKill.name(),
        |mut caller: Caller<'_, ThreadCtx>, (thread, sig): (u32, u32)| {
            Box::new(async move {
                let tid = caller.data().tid;
                let to_self = {
                    let mut st = caller.data().run.get();
                    if thread == u32::MAX {
                        if (1..=64).contains(&sig) {
                            st.send_to_process(Some(tid), sig);
                        }
                        return Ok(0);
                    }
                    let target = match thread {
                        0 => Some(tid),
                        _ => st.handles.get(thread).copied(),
                    };
                    let Some(target) =
                        target.filter(|&t| !matches!(st.threads[t as usize].status, Status::Done))
                    else {
                        return Ok(-1);
                    };
                    if !(1..=64).contains(&sig) {
                        return Ok(0);
                    }
                    st.send_signal(target, sig);
                    target == tid && st.signal_ready(tid)
                };
                if to_self {
                    // POSIX: a signal a thread sends itself is delivered
                    // before the call returns.
                    deliver_signals(&mut caller).await?;
                }
                Ok(0)
            })
        },
    )?;
    linker.func_wrap(
        m,
        SdkImport::SigPending.name(),
        |caller: Caller<'_, ThreadCtx>| -> u64 {
            let tid = caller.data().tid;
            let st = caller.data().run.get();
            st.threads[tid as usize].sig_pending | st.signals.process
        },
    )?;
    linker.func_wrap_async(
        m,
        SdkImport::SigWait.name(),
        |mut caller: Caller<'_, ThreadCtx>, (set, suspend): (u64, u32)| {
            Box::new(async move {
                let tid = caller.data().tid;
                let run = caller.data().run.clone();
                let old = {
                    let mut st = run.get();
                    let th = &mut st.threads[tid as usize];
                    let old = th.sig_mask;
                    if suspend != 0 {
                        th.sig_mask = set & !UNBLOCKABLE;
                    }
                    old
                };
                loop {
                    let wait_for = {
                        let mut st = run.get();
                        let process = st.signals.process;
                        let th = &mut st.threads[tid as usize];
                        if suspend == 0 {
                            let got = (th.sig_pending | process) & set;
                            if got != 0 {
                                let sig = got.trailing_zeros() + 1;
                                th.sig_pending &= !bit(sig);
                                st.signals.process &= !bit(sig);
                                return Ok(sig as i32);
                            }
                            set
                        } else if st.signal_ready(tid) {
                            break;
                        } else {
                            !st.threads[tid as usize].sig_mask
                        }
                    };
                    let stack = raw_stack(&caller);
                    {
                        let mut st = run.get();
                        st.threads[tid as usize].block_stack = stack;
                        let site = st.pending(tid).site;
                        st.block(tid, Block::Signal { set: wait_for }, site)
                            .map_err(|_| end_err())?;
                    }
                    wait_turn(&mut caller).await?;
                }
                deliver_signals(&mut caller).await?;
                run.get().threads[tid as usize].sig_mask = old;
                Ok(0)
            })
        },
    )?;
    linker.func_wrap(
        m,
        SdkImport::SigInterrupted.name(),
        |caller: Caller<'_, ThreadCtx>| -> i32 {
            let tid = caller.data().tid;
            let mut st = caller.data().run.get();
            i32::from(std::mem::take(&mut st.threads[tid as usize].wait_cut))
        },
    )?;
    linker.func_wrap(
        m,
        SdkImport::SigTimer.name(),
        |caller: Caller<'_, ThreadCtx>, ns: u64, interval: u64| -> u64 {
            let mut st = caller.data().run.get();
            if ns == u64::MAX {
                return st.alarm_left();
            }
            let deadline = (ns > 0).then(|| st.clock.now().saturating_add(ns));
            st.set_alarm(deadline, interval)
        },
    )?;
    Ok(())
}
