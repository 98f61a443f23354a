//! Progress: whether a run's threads still do something new, so that a
//! long run is told apart from a hung one.
//!
//! A step *makes progress* when it changes what some thread can see, or
//! sees something new:
//! - a store, copy or fill that changes memory (checked at the thread's
//!   next step, when the store has executed);
//! - a read-modify-write or compare-exchange that finds its word with
//!   another value than the same thread's last one there (a failing CAS
//!   retried on an unchanged word does not);
//! - a read that is not a re-read: not of one of the thread's last few
//!   words read, unless some store changed that word since;
//! - a thread starting, being created or ending.
//!
//! Announcements (a lock, unlock, join or condition wait about to be
//! called), fences, futex waits and notifies, yields, host calls (a sleep,
//! a clock read) and wake-ups are neutral: they neither make progress nor
//! end it. A polling loop that sleeps, reads the clock or yields between
//! re-reads therefore makes none.
//!
//! This is the spin hint's test ([`super::state`]) with three differences:
//! it also runs while a thread is alone (a lone thread spinning on a word
//! that nobody else is left to write has hung), a store counts only when it
//! changed memory (two threads that keep storing the same value to a flag
//! the other polls do not keep each other alive), and it never touches the
//! hints strategies see, so it changes no decision.
//!
//! A run whose threads make no progress for `hang_steps` steps in a row is
//! a hang (a livelock when two or more threads can run); one that reaches
//! its step budget while making progress is *too long*, which is not a
//! failure (see `Verdict::TooLong`).

use super::memory::GuestMemory;
use crate::model::{EventKind, Pending, Tid};

/// What tells a run whose threads spin or hang from one that progresses:
/// the spin hints' table of recent writes (which strategies see, through
/// [`super::state`]) and the progress record (which decides a hang, and
/// changes no decision).
pub struct Liveness {
    /// Step of the last write to each (hashed) word, for spin detection,
    /// plus `stamp_base`.
    pub write_stamp: Vec<u64>,
    /// Larger than every stamp earlier runs left in `write_stamp`: stamps
    /// are `stamp_base + step`, so a stale one reads as "not written since
    /// any step of this run", as a zeroed table would (without clearing
    /// 32 KiB per run).
    pub stamp_base: u64,
    /// Step of the last yield point a thread reached while it was the only
    /// ready one. Spin detection ignores such solo stretches (they may have
    /// written anything), so that skipping them (the fast path) and seeing
    /// them give the same hints.
    pub solo_epoch: u64,
    /// Whether the threads still make progress.
    pub progress: Progress,
}

/// Words each thread remembers reading.
const RECENT: usize = 4;

/// Slots of the table of changing stores (hashed by word).
const SLOTS: usize = 4096;

/// One thread's recent steps, as far as progress goes.
#[derive(Debug, Clone, Copy)]
struct Track {
    /// Its last few reads: (address, step), most recent first.
    recent: [(u32, u64); RECENT],
    /// Re-reads in a row.
    streak: u32,
    /// (address, value found) of its last read-modify-write.
    rmw: Option<(u32, u64)>,
    /// A store it is about to make: (address, length, value before).
    store: Option<(u32, u32, u64)>,
}

impl Track {
    const NEW: Track = Track {
        recent: [(u32::MAX, 0); RECENT],
        streak: 0,
        rmw: None,
        store: None,
    };
}

/// Progress of one run's threads.
#[derive(Debug, Default)]
pub struct Progress {
    tracks: Vec<Track>,
    /// Per hashed word, `base` + the step of the last store that changed it.
    changed: Vec<u64>,
    /// Larger than every entry of `changed` left by earlier runs.
    base: u64,
    /// The last step that made progress.
    pub last: u64,
    /// No store before this step may be missing from `changed` (stretches
    /// the host did not see end here).
    epoch: u64,
}

impl Progress {
    /// Ready for a new run; keeps the buffers.
    pub fn reset(&mut self) {
        if self.changed.len() != SLOTS {
            self.changed = vec![0; SLOTS];
            self.base = 0;
        }
        self.tracks.clear();
        self.last = 0;
        self.epoch = 0;
    }

    /// The run that used this tracker took `steps` steps: later runs stamp
    /// above them.
    pub fn retire(&mut self, steps: u64) {
        self.base += steps + 1;
    }

    fn slot(addr: u32) -> usize {
        ((addr >> 2).wrapping_mul(0x9e37_79b1) >> 20) as usize % SLOTS
    }

    /// Steps since the last one that made progress.
    pub fn stalled(&self, steps: u64) -> u64 {
        steps.saturating_sub(self.last)
    }

    /// The current thread ran a stretch the host did not see, up to
    /// `steps`: it counts as progress (whatever it did is not known).
    pub fn unseen(&mut self, steps: u64) {
        self.last = steps;
        self.epoch = steps;
    }

    /// Progress made outside any thread's pending event (a lock word
    /// changed by an inlined mutex operation, a thread ending).
    pub fn made(&mut self, steps: u64, changed_addr: Option<u32>) {
        self.last = steps;
        if let Some(a) = changed_addr {
            self.changed[Self::slot(a)] = self.base + steps;
        }
    }

    /// Thread `tid` reached step `steps` and will perform `p` next.
    pub fn observe(&mut self, tid: Tid, p: &Pending, steps: u64, mem: GuestMemory<'_>) {
        let t = tid as usize;
        if self.tracks.len() <= t {
            self.tracks.resize(t + 1, Track::NEW);
        }
        let (base, epoch) = (self.base, self.epoch);
        let tr = &mut self.tracks[t];
        // Its previous step's store has executed: did it change memory?
        if let Some((addr, len, before)) = tr.store.take() {
            if mem.read_le(addr, len) != Some(before) {
                self.last = steps;
                self.changed[Self::slot(addr)] = base + steps;
            }
        }
        let progress = match p.kind {
            EventKind::Read => {
                let changed = &self.changed;
                let unchanged_since =
                    |step: u64| changed[Self::slot(p.addr)] <= base + step && epoch <= step;
                let seen = tr.recent.iter().position(|&(a, _)| a == p.addr);
                let reread = seen.is_some_and(|i| unchanged_since(tr.recent[i].1));
                let again = seen == Some(0) && reread;
                tr.streak = if reread { tr.streak + 1 } else { 0 };
                let i = seen.unwrap_or(RECENT - 1);
                tr.recent.copy_within(0..i, 1);
                tr.recent[0] = (p.addr, steps);
                !(again || tr.streak >= 2)
            }
            EventKind::Write => {
                let len = p.len.clamp(1, 8);
                match mem.read_le(p.addr, len) {
                    Some(before) => {
                        tr.store = Some((p.addr, len, before));
                        false
                    }
                    // Out of bounds: it traps, which ends the run anyway.
                    None => false,
                }
            }
            EventKind::Rmw | EventKind::Cmpxchg => {
                let found = mem.read_le(p.addr, p.len.clamp(1, 8)).map(|v| (p.addr, v));
                let same = found.is_some() && tr.rmw == found;
                tr.rmw = found;
                if !same {
                    // It may store: a changed word is new to readers.
                    tr.store = found.map(|(a, v)| (a, p.len.clamp(1, 8), v));
                }
                !same
            }
            EventKind::Copy | EventKind::Fill => {
                self.changed[Self::slot(p.addr)] = base + steps;
                true
            }
            EventKind::Start | EventKind::Spawn | EventKind::Exit => true,
            _ => false,
        };
        if progress {
            self.last = steps;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NO_SITE;

    fn ev(kind: EventKind, addr: u32) -> Pending {
        Pending {
            site: NO_SITE,
            kind,
            addr,
            len: 4,
        }
    }

    #[test]
    fn re_reads_of_unchanged_words_and_same_value_stores_make_none() {
        use std::cell::UnsafeCell;
        let mem: Vec<UnsafeCell<u8>> = (0..64).map(|_| UnsafeCell::new(0)).collect();
        // SAFETY: nothing else uses `mem`.
        let view = unsafe { GuestMemory::serialized(&mem) };
        let mut p = Progress::default();
        p.reset();
        let mut step = 0;
        let mut at = |p: &mut Progress, tid: Tid, e: Pending| {
            step += 1;
            p.observe(tid, &e, step, view);
            step
        };
        // Two threads poll their flags and store 0 to a third word.
        at(&mut p, 1, ev(EventKind::Read, 8));
        at(&mut p, 2, ev(EventKind::Read, 12));
        let last = p.last;
        for _ in 0..10 {
            at(&mut p, 1, ev(EventKind::Read, 8));
            at(&mut p, 2, ev(EventKind::Write, 16));
            at(&mut p, 2, ev(EventKind::Read, 12));
        }
        assert_eq!(p.last, last, "no progress while nothing changes");
        // Thread 2's store now changes word 8: thread 1's next read of it is
        // new, and the store itself counted.
        at(&mut p, 2, ev(EventKind::Write, 8));
        // SAFETY: as above.
        unsafe { *mem[8].get() = 1 };
        let s = at(&mut p, 2, ev(EventKind::Read, 12));
        assert_eq!(p.last, s, "a changing store is progress");
        let s = at(&mut p, 1, ev(EventKind::Read, 8));
        assert_eq!(p.last, s, "reading the changed word is progress");
        // A failing CAS on an unchanged word, again and again: none.
        at(&mut p, 1, ev(EventKind::Cmpxchg, 20));
        let last = p.last;
        for _ in 0..5 {
            at(&mut p, 1, ev(EventKind::Cmpxchg, 20));
        }
        assert_eq!(p.last, last);
        // Fresh reads of new words (a scan) are progress.
        for a in 0..8 {
            let s = at(&mut p, 1, ev(EventKind::Read, 24 + 4 * a));
            assert_eq!(p.last, s);
        }
    }
}
