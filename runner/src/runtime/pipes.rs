//! Pipes and socket pairs: the guest's calls on them.
//!
//! `pipe`, `pipe2` and `socketpair` (the guest SDK's) ask heddle for two
//! descriptors. The channels behind them are part of the run's state
//! (`model::channels::Io`, in `RunState::io`), so they are as deterministic as the rest of
//! it; a call that would block waits in the scheduler (`Block::Io`) until
//! the channel changes, so that deadlock detection sees it. wasi-common
//! holds a placeholder file for each descriptor, for `fstat`, `fcntl` and
//! `close`; heddle answers reads, writes and polls of these descriptors from
//! here (`runtime::wasi`).

use super::hooks::{end_err, raw_stack, read_bytes, wait_turn, write_bytes, HostResult};
use super::state::RunState;
use super::ThreadCtx;
pub use crate::model::channels::{errno, Done, Ready, Step};
use crate::model::Block;
use std::any::Any;
use wasi_common::file::{FdFlags, FileType, WasiFile};
use wasi_common::Error;
use wasmtime::{Caller, Trap};

/// What wasi-common holds for a pipe or socket-pair descriptor: its type
/// and flags, for `fstat` and `fcntl`. Reads and writes never reach it.
pub struct Placeholder {
    pub socket: bool,
    pub flags: FdFlags,
}

#[async_trait::async_trait]
impl WasiFile for Placeholder {
    fn as_any(&self) -> &dyn Any {
        self
    }

    async fn get_filetype(&self) -> Result<FileType, Error> {
        Ok(if self.socket {
            FileType::SocketStream
        } else {
            FileType::Pipe
        })
    }

    async fn get_fdflags(&self) -> Result<FdFlags, Error> {
        Ok(self.flags)
    }

    async fn set_fdflags(&mut self, flags: FdFlags) -> Result<(), Error> {
        self.flags = flags;
        Ok(())
    }
}

// ---- the host calls ------------------------------------------------------

/// `__WASI_ERRNO_INTR`.
const ERRNO_INTR: i32 = 27;
/// `__WASI_ERRNO_MFILE`.
const ERRNO_MFILE: i32 = 33;
/// `SIGPIPE`.
const SIGPIPE: u32 = 13;

/// `heddle.pipe(fds, flags)` and `heddle.socketpair(fds, flags)` (bit 0 of
/// `flags`: `O_NONBLOCK`): two new descriptors, written to `fds`.
pub fn open(caller: &Caller<'_, ThreadCtx>, fds: u32, flags: u32, socket: bool) -> HostResult<i32> {
    use wasi_common::file::FileAccessMode as Mode;
    let nonblock = flags & 1 != 0;
    let ctx = caller.data();
    let modes = if socket {
        [Mode::READ | Mode::WRITE, Mode::READ | Mode::WRITE]
    } else {
        [Mode::READ, Mode::WRITE]
    };
    let mut got = [0u32; 2];
    for (slot, mode) in got.iter_mut().zip(modes) {
        let file = Box::new(Placeholder {
            socket,
            flags: if nonblock {
                FdFlags::NONBLOCK
            } else {
                FdFlags::empty()
            },
        });
        match ctx.wasi.push_file(file, mode) {
            Ok(fd) => *slot = fd,
            Err(_) => return Ok(ERRNO_MFILE),
        }
    }
    // The table grew: the context is no longer as built.
    ctx.answers.table_changed();
    let mut st = ctx.run.get();
    let (a, b) = st.io.open(socket, nonblock);
    st.io.register(got[0], a);
    st.io.register(got[1], b);
    let mut bytes = got[0].to_le_bytes().to_vec();
    bytes.extend(got[1].to_le_bytes());
    write_bytes(&st, fds, &bytes)?;
    Ok(0)
}

/// The guest's `iovec`s at `iovs` (`count` of them): (address, length).
fn iovecs(st: &RunState, iovs: u32, count: u32) -> HostResult<Vec<(u32, u32)>> {
    let len = count.checked_mul(8).ok_or(Trap::MemoryOutOfBounds)?;
    let raw = read_bytes(st, iovs, len)?;
    let word = |c: &[u8]| u32::from_le_bytes(c.try_into().expect("4 bytes"));
    Ok(raw
        .chunks_exact(8)
        .map(|c| (word(&c[0..4]), word(&c[4..8])))
        .collect())
}

/// `fd_read` (and `sock_recv`, which may `peek`) of a pipe or socket-pair
/// descriptor: the bytes go to the `iovs`, their count to `nread`.
pub async fn read(
    caller: &mut Caller<'_, ThreadCtx>,
    fd: u32,
    iovs: u32,
    count: u32,
    nread: u32,
    peek: bool,
) -> HostResult<i32> {
    let run = caller.data().run.clone();
    let tid = caller.data().tid;
    loop {
        let step = {
            let mut st = run.get();
            let bufs = iovecs(&st, iovs, count)?;
            let max = bufs.iter().map(|b| b.1 as usize).sum();
            let mut data = Vec::new();
            let step = st.io.read(fd, max, peek, &mut data);
            if let Step::Done(Done::Moved(n)) = step {
                let mut at = 0;
                for (ptr, len) in bufs {
                    if at == n {
                        break;
                    }
                    let k = (len as usize).min(n - at);
                    write_bytes(&st, ptr, &data[at..at + k])?;
                    at += k;
                }
                write_bytes(&st, nread, &(n as u32).to_le_bytes())?;
                if let Some(c) = st.io.chan_of(fd, false) {
                    // What the writers did before is visible to the reader
                    // (at the end of the file: before they closed).
                    st.io_received(tid, c);
                    if n > 0 && !peek {
                        st.io_changed(&[c]);
                    }
                }
            }
            step
        };
        match step {
            Step::Done(Done::Moved(_)) => return Ok(0),
            Step::Done(Done::Failed(e)) => return Ok(e as i32),
            Step::Wait(c) => {
                if wait(caller, vec![(c, false)], None).await? {
                    return Ok(ERRNO_INTR);
                }
            }
        }
    }
}

/// `fd_write` (and `sock_send`) to a pipe or socket-pair descriptor.
pub async fn write(
    caller: &mut Caller<'_, ThreadCtx>,
    fd: u32,
    iovs: u32,
    count: u32,
    nwritten: u32,
) -> HostResult<i32> {
    let run = caller.data().run.clone();
    let tid = caller.data().tid;
    let bytes = {
        let st = run.get();
        let mut bytes = Vec::new();
        for (ptr, len) in iovecs(&st, iovs, count)? {
            bytes.extend(read_bytes(&st, ptr, len)?);
        }
        bytes
    };
    let mut wrote = 0;
    loop {
        let (moved, step) = {
            let mut st = run.get();
            let (moved, step) = st.io.write(fd, &bytes[wrote..], wrote);
            if moved > 0 {
                let c = st.io.chan_of(fd, true).expect("a descriptor that wrote");
                st.io_sent(tid, c);
                st.io_changed(&[c]);
            }
            (moved, step)
        };
        wrote += moved;
        let done = match step {
            Step::Done(d) => d,
            Step::Wait(c) => {
                if !wait(caller, vec![(c, true)], None).await? {
                    continue;
                }
                // Cut short by a signal: what went is the result.
                match wrote {
                    0 => return Ok(ERRNO_INTR),
                    n => Done::Moved(n),
                }
            }
        };
        return match done {
            Done::Moved(n) => {
                write_bytes(&run.get(), nwritten, &(n as u32).to_le_bytes())?;
                Ok(0)
            }
            Done::Failed(e) => {
                if e == errno::PIPE {
                    run.get().send_signal(tid, SIGPIPE);
                    super::hooks::deliver_signals(caller).await?;
                }
                Ok(e as i32)
            }
        };
    }
}

/// Descriptor `fd` is closed (`to` is renumbered `from`, when given):
/// the threads waiting on its channels wake.
pub fn closed(caller: &Caller<'_, ThreadCtx>, fd: u32, from: Option<u32>) {
    let tid = caller.data().tid;
    let mut st = caller.data().run.get();
    let changed = match from {
        Some(from) => st.io.renumber(from, fd),
        None => st.io.close(fd),
    };
    for &c in &changed {
        st.io_sent(tid, c);
    }
    st.io_changed(&changed);
}

/// `sock_shutdown` of a socket-pair descriptor (`how`: 1 reads, 2 writes).
pub fn shutdown(caller: &Caller<'_, ThreadCtx>, fd: u32, how: u8) -> i32 {
    let tid = caller.data().tid;
    let mut st = caller.data().run.get();
    match st.io.shutdown(fd, how) {
        Ok(changed) => {
            for &c in &changed {
                st.io_sent(tid, c);
            }
            st.io_changed(&changed);
            0
        }
        Err(e) => e as i32,
    }
}

/// Defines `heddle.pipe` and `heddle.socketpair`.
pub fn add_to_linker(linker: &mut wasmtime::Linker<ThreadCtx>) -> anyhow::Result<()> {
    use crate::instrument::SdkImport;
    for (import, socket) in [(SdkImport::Pipe, false), (SdkImport::SocketPair, true)] {
        linker.func_wrap(
            SdkImport::MODULE,
            import.name(),
            move |caller: Caller<'_, ThreadCtx>, fds: u32, flags: u32| -> HostResult<i32> {
                open(&caller, fds, flags, socket)
            },
        )?;
    }
    Ok(())
}

/// Blocks the calling thread until one of `chans` changes, `deadline`
/// passes or a signal comes: true when a signal cut it short (its handler
/// has run).
pub async fn wait(
    caller: &mut Caller<'_, ThreadCtx>,
    chans: Vec<(u32, bool)>,
    deadline: Option<u64>,
) -> HostResult<bool> {
    let run = caller.data().run.clone();
    let tid = caller.data().tid;
    if run.get().signal_ready(tid) {
        super::hooks::deliver_signals(caller).await?;
        return Ok(true);
    }
    // The wait is in library code (wasi-libc's read or poll): the stack
    // names the user's line, in every run alike.
    let stack = raw_stack(caller);
    {
        let mut st = run.get();
        st.io.wait(tid, chans);
        st.threads[tid as usize].block_stack = stack;
        let site = st.pending(tid).site;
        st.block(tid, Block::Io { deadline }, site)
            .map_err(|_| end_err())?;
    }
    wait_turn(caller).await?;
    let interrupted = {
        let mut st = run.get();
        st.io.stop_waiting(tid);
        st.threads[tid as usize].interrupted
    };
    if interrupted {
        super::hooks::deliver_signals(caller).await?;
    }
    Ok(interrupted)
}
