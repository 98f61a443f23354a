//! Pipes and socket pairs as the run's state: byte channels between the
//! descriptors of one run (`runtime::pipes` answers the guest's calls
//! from them).
//!
//! A write appends to a channel's buffer, bounded like Linux's; a read takes
//! from it; a call that would block names the channel to wait on. Closing
//! the last writer is the reader's end of file; writing with no reader left
//! is `EPIPE`.

use super::Tid;
use std::collections::{BTreeMap, VecDeque};

/// Bytes a channel holds before a writer blocks (Linux's default).
pub const CAPACITY: usize = 65_536;

/// A write of at most this many bytes is never interleaved with another
/// (POSIX `PIPE_BUF`).
pub const PIPE_BUF: usize = 4_096;

/// Linux's error numbers as WASI numbers them.
pub mod errno {
    pub const AGAIN: u16 = 6;
    pub const BADF: u16 = 8;
    pub const NOTCONN: u16 = 53;
    pub const PIPE: u16 = 64;
}

/// One direction of bytes.
#[derive(Debug, Default)]
struct Chan {
    buf: VecDeque<u8>,
    /// Open descriptors that read from it.
    readers: u32,
    /// Open descriptors that write to it.
    writers: u32,
}

/// What a descriptor reads from and writes to (channel numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct End {
    read: Option<u32>,
    write: Option<u32>,
    /// `O_NONBLOCK`.
    pub nonblock: bool,
    /// One end of a socket pair (else of a pipe).
    pub socket: bool,
}

/// The outcome of a read or a write that did not block.
#[derive(Debug, PartialEq, Eq)]
pub enum Done {
    /// Bytes moved (0 on a read: end of file).
    Moved(usize),
    /// The call fails with this WASI error number.
    Failed(u16),
}

/// The outcome of a read or write.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    Done(Done),
    /// The call must wait until channel `chan` changes.
    Wait(u32),
}

/// A descriptor's readiness, as `poll` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ready {
    /// Bytes that can be read or written without blocking.
    pub bytes: u64,
    /// The other side is gone (end of file, or no reader).
    pub hangup: bool,
    /// A write would fail (`EPIPE`).
    pub error: bool,
}

/// The run's pipes and socket pairs.
#[derive(Debug, Default)]
pub struct Io {
    chans: Vec<Chan>,
    ends: BTreeMap<u32, End>,
    /// The channels each waiting thread waits on, and whether to write.
    waiting: BTreeMap<Tid, Vec<(u32, bool)>>,
}

impl Io {
    /// A new pipe (`socket`: a socket pair), as two ends to be given
    /// descriptors ([`Io::register`]).
    pub fn open(&mut self, socket: bool, nonblock: bool) -> (End, End) {
        let a = self.chans.len() as u32;
        self.chans.push(Chan::default());
        if !socket {
            let r = End {
                read: Some(a),
                write: None,
                nonblock,
                socket,
            };
            let w = End {
                read: None,
                write: Some(a),
                nonblock,
                socket,
            };
            return (r, w);
        }
        let b = self.chans.len() as u32;
        self.chans.push(Chan::default());
        (
            End {
                read: Some(a),
                write: Some(b),
                nonblock,
                socket,
            },
            End {
                read: Some(b),
                write: Some(a),
                nonblock,
                socket,
            },
        )
    }

    /// Descriptor `fd` is `end`.
    pub fn register(&mut self, fd: u32, end: End) {
        if let Some(c) = end.read {
            self.chans[c as usize].readers += 1;
        }
        if let Some(c) = end.write {
            self.chans[c as usize].writers += 1;
        }
        self.ends.insert(fd, end);
    }

    /// The end that descriptor `fd` is, if it is one.
    pub fn end(&self, fd: u32) -> Option<End> {
        self.ends.get(&fd).copied()
    }

    pub fn set_nonblock(&mut self, fd: u32, on: bool) {
        if let Some(e) = self.ends.get_mut(&fd) {
            e.nonblock = on;
        }
    }

    /// Reads at most `max` bytes from `fd` into `out` (`peek`: leaves
    /// them in the channel).
    pub fn read(&mut self, fd: u32, max: usize, peek: bool, out: &mut Vec<u8>) -> Step {
        let Some(end) = self.end(fd) else {
            return Step::Done(Done::Failed(errno::BADF));
        };
        let Some(c) = end.read else {
            return Step::Done(Done::Failed(errno::BADF));
        };
        let ch = &mut self.chans[c as usize];
        if max == 0 {
            return Step::Done(Done::Moved(0));
        }
        if ch.buf.is_empty() {
            if ch.writers == 0 {
                return Step::Done(Done::Moved(0));
            }
            if end.nonblock {
                return Step::Done(Done::Failed(errno::AGAIN));
            }
            return Step::Wait(c);
        }
        let n = max.min(ch.buf.len());
        if peek {
            out.extend(ch.buf.iter().take(n));
        } else {
            out.extend(ch.buf.drain(..n));
        }
        Step::Done(Done::Moved(n))
    }

    /// Writes what it can of `bytes` (what is left of a write of which
    /// `wrote` bytes went already) to `fd`: the bytes moved now, and what
    /// follows. A blocking write of at most [`PIPE_BUF`] bytes waits for
    /// room for all of it; a longer one moves what fits and waits for room
    /// for the rest; a nonblocking one moves what fits.
    pub fn write(&mut self, fd: u32, bytes: &[u8], wrote: usize) -> (usize, Step) {
        let Some(c) = self.end(fd).and_then(|e| e.write) else {
            return (0, Step::Done(Done::Failed(errno::BADF)));
        };
        let nonblock = self.ends[&fd].nonblock;
        let ch = &mut self.chans[c as usize];
        let so_far = |n: usize| match n {
            0 => Done::Failed(errno::AGAIN),
            n => Done::Moved(n),
        };
        if ch.readers == 0 {
            return (
                0,
                Step::Done(match wrote {
                    0 => Done::Failed(errno::PIPE),
                    n => Done::Moved(n),
                }),
            );
        }
        if bytes.is_empty() {
            return (0, Step::Done(Done::Moved(wrote)));
        }
        let room = CAPACITY - ch.buf.len();
        let whole = wrote + bytes.len() <= PIPE_BUF;
        if room == 0 || (whole && room < bytes.len()) {
            return match nonblock {
                true => (0, Step::Done(so_far(wrote))),
                false => (0, Step::Wait(c)),
            };
        }
        let n = room.min(bytes.len());
        ch.buf.extend(&bytes[..n]);
        if n == bytes.len() || nonblock {
            (n, Step::Done(Done::Moved(wrote + n)))
        } else {
            (n, Step::Wait(c))
        }
    }

    /// `shutdown(fd, how)` (bit 0: no more reads, bit 1: no more writes):
    /// the channels that changed.
    pub fn shutdown(&mut self, fd: u32, how: u8) -> Result<Vec<u32>, u16> {
        let Some(end) = self.ends.get_mut(&fd) else {
            return Err(errno::BADF);
        };
        if !end.socket {
            return Err(errno::NOTCONN);
        }
        let mut changed = Vec::new();
        if how & 1 != 0 {
            if let Some(c) = end.read.take() {
                self.chans[c as usize].readers -= 1;
                changed.push(c);
            }
        }
        if how & 2 != 0 {
            if let Some(c) = end.write.take() {
                self.chans[c as usize].writers -= 1;
                changed.push(c);
            }
        }
        Ok(changed)
    }

    /// Descriptor `fd` is closed: the channels that changed.
    pub fn close(&mut self, fd: u32) -> Vec<u32> {
        let Some(end) = self.ends.remove(&fd) else {
            return Vec::new();
        };
        let mut changed = Vec::new();
        if let Some(c) = end.read {
            let ch = &mut self.chans[c as usize];
            ch.readers -= 1;
            if ch.readers == 0 {
                // Nobody can read what is left.
                ch.buf.clear();
            }
            changed.push(c);
        }
        if let Some(c) = end.write {
            self.chans[c as usize].writers -= 1;
            changed.push(c);
        }
        changed
    }

    /// Descriptor `from` is renumbered `to`.
    pub fn renumber(&mut self, from: u32, to: u32) -> Vec<u32> {
        let changed = self.close(to);
        if let Some(e) = self.ends.remove(&from) {
            self.ends.insert(to, e);
        }
        changed
    }

    /// Whether reading (`write` false) or writing `fd` would not block.
    pub fn ready(&self, fd: u32, write: bool) -> Option<Ready> {
        let end = self.end(fd)?;
        let none = Ready {
            bytes: 0,
            hangup: false,
            error: false,
        };
        if write {
            let Some(c) = end.write else {
                return Some(Ready {
                    error: true,
                    ..none
                });
            };
            let ch = &self.chans[c as usize];
            if ch.readers == 0 {
                return Some(Ready {
                    hangup: true,
                    error: true,
                    ..none
                });
            }
            let room = CAPACITY - ch.buf.len();
            return (room > 0).then_some(Ready {
                bytes: room as u64,
                ..none
            });
        }
        let Some(c) = end.read else {
            return Some(Ready {
                hangup: true,
                ..none
            });
        };
        let ch = &self.chans[c as usize];
        let hangup = ch.writers == 0;
        (!ch.buf.is_empty() || hangup).then_some(Ready {
            bytes: ch.buf.len() as u64,
            hangup,
            error: false,
        })
    }

    /// The channel `fd` reads from (`write`: writes to).
    pub fn chan_of(&self, fd: u32, write: bool) -> Option<u32> {
        let end = self.end(fd)?;
        if write {
            end.write
        } else {
            end.read
        }
    }

    /// Thread `tid` waits until one of `chans` changes (each with whether
    /// it waits to write to it).
    pub fn wait(&mut self, tid: Tid, chans: Vec<(u32, bool)>) {
        self.waiting.insert(tid, chans);
    }

    /// Thread `tid` no longer waits (woken, or its wait timed out).
    pub fn stop_waiting(&mut self, tid: Tid) {
        self.waiting.remove(&tid);
    }

    /// The threads waiting on any of `chans`, no longer waiting.
    pub fn changed(&mut self, chans: &[u32]) -> Vec<Tid> {
        let woken: Vec<Tid> = self
            .waiting
            .iter()
            .filter(|(_, on)| on.iter().any(|(c, _)| chans.contains(c)))
            .map(|(&t, _)| t)
            .collect();
        for t in &woken {
            self.waiting.remove(t);
        }
        woken
    }

    /// What thread `tid` waits for, for a deadlock report: the descriptors
    /// of the channels it waits on.
    pub fn describe(&self, tid: Tid) -> String {
        let Some(chans) = self.waiting.get(&tid) else {
            return "a descriptor".into();
        };
        let mut parts = Vec::new();
        for &(c, write) in chans {
            for (fd, end) in &self.ends {
                let kind = if end.socket { "socket" } else { "pipe" };
                if !write && end.read == Some(c) {
                    parts.push(format!("{kind} fd {fd} to read"));
                }
                if write && end.write == Some(c) {
                    parts.push(format!("{kind} fd {fd} to write"));
                }
            }
        }
        if parts.is_empty() {
            "a descriptor".into()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe(io: &mut Io, nonblock: bool) -> (u32, u32) {
        let (r, w) = io.open(false, nonblock);
        io.register(3, r);
        io.register(4, w);
        (3, 4)
    }

    #[test]
    fn a_read_takes_what_was_written_and_waits_when_there_is_nothing() {
        let mut io = Io::default();
        let (r, w) = pipe(&mut io, false);
        let mut out = Vec::new();
        assert_eq!(io.read(r, 10, false, &mut out), Step::Wait(0));
        assert_eq!(io.write(w, b"hello", 0), (5, Step::Done(Done::Moved(5))));
        assert_eq!(io.read(r, 3, true, &mut out), Step::Done(Done::Moved(3)));
        out.clear();
        assert_eq!(io.read(r, 10, false, &mut out), Step::Done(Done::Moved(5)));
        assert_eq!(out, b"hello");
        assert_eq!(
            io.read(w, 1, false, &mut out),
            Step::Done(Done::Failed(errno::BADF))
        );
        assert_eq!(io.close(w), vec![0]);
        assert_eq!(io.read(r, 10, false, &mut out), Step::Done(Done::Moved(0)));
    }

    #[test]
    fn a_full_pipe_blocks_a_writer_and_a_closed_reader_fails_it() {
        let mut io = Io::default();
        let (r, w) = pipe(&mut io, false);
        let big = vec![7u8; CAPACITY + 10];
        // A long write moves what fits and waits for the rest.
        assert_eq!(io.write(w, &big, 0), (CAPACITY, Step::Wait(0)));
        assert_eq!(io.ready(w, true), None);
        assert_eq!(io.ready(r, false).unwrap().bytes, CAPACITY as u64);
        let mut out = Vec::new();
        io.read(r, 100, false, &mut out);
        // A short write waits for room for all of it.
        assert_eq!(io.write(w, &[1; 200], 0), (0, Step::Wait(0)));
        assert_eq!(io.write(w, &[1; 50], 0), (50, Step::Done(Done::Moved(50))));
        // The rest of the long write goes as room appears.
        out.clear();
        io.read(r, 20, false, &mut out);
        assert_eq!(
            io.write(w, &big[CAPACITY..], CAPACITY),
            (10, Step::Done(Done::Moved(CAPACITY + 10)))
        );
        io.close(r);
        assert_eq!(
            io.write(w, b"x", 0),
            (0, Step::Done(Done::Failed(errno::PIPE)))
        );
        assert_eq!(io.write(w, b"x", 5), (0, Step::Done(Done::Moved(5))));
        let ready = io.ready(w, true).unwrap();
        assert!(ready.error && ready.hangup);
    }

    #[test]
    fn nonblocking_ends_fail_with_eagain_instead_of_waiting() {
        let mut io = Io::default();
        let (r, w) = pipe(&mut io, true);
        let mut out = Vec::new();
        assert_eq!(
            io.read(r, 1, false, &mut out),
            Step::Done(Done::Failed(errno::AGAIN))
        );
        let big = vec![0u8; CAPACITY + 1];
        assert_eq!(
            io.write(w, &big, 0),
            (CAPACITY, Step::Done(Done::Moved(CAPACITY)))
        );
        assert_eq!(
            io.write(w, b"x", 0),
            (0, Step::Done(Done::Failed(errno::AGAIN)))
        );
    }

    #[test]
    fn a_socket_pair_carries_both_ways_and_shuts_down_one_way() {
        let mut io = Io::default();
        let (a, b) = io.open(true, false);
        io.register(5, a);
        io.register(6, b);
        let mut out = Vec::new();
        io.write(5, b"ping", 0);
        io.write(6, b"pong", 0);
        io.read(6, 10, false, &mut out);
        io.read(5, 10, false, &mut out);
        assert_eq!(out, b"pingpong");
        assert_eq!(io.shutdown(5, 2).unwrap(), vec![1]);
        assert_eq!(io.read(6, 10, false, &mut out), Step::Done(Done::Moved(0)));
        assert_eq!(io.write(6, b"still", 0), (5, Step::Done(Done::Moved(5))));
        io.wait(9, vec![(0, false)]);
        assert_eq!(io.describe(9), "socket fd 5 to read");
        assert_eq!(io.changed(&[1]), Vec::<Tid>::new());
        assert_eq!(io.changed(&[0]), vec![9]);
    }
}
