//! Owners of futex-word locks, inferred from each word's history.
//!
//! Locks built straight on a futex word (Rust's `std::sync::Mutex` on
//! `wasm32-wasip1-threads`, a C spinlock with a futex wait, musl's internal
//! locks) have no lock call heddle could model, but their word follows one
//! protocol: 0 is unlocked; a thread takes the lock by a read-modify-write
//! (compare-exchange or swap) that finds 0 and leaves the word non-zero; a
//! thread that finds it non-zero either marks it contended (another
//! non-zero value) and waits on it, or tries again; the owner, and only the
//! owner, puts 0 back (a swap or a store). Any step outside that protocol
//! (a non-owner zeroing the word, the owner moving it between non-zero
//! values, a store making it non-zero, a word found non-zero with no known
//! taker) marks the word as *not a lock* for the rest of the run, until a
//! store leaves it 0 with no owner (its memory reused for a new lock).
//!
//! That alone would take a notify counter (a condition variable's futex,
//! taken 0→1 by the first notify and never returned) or a reader count (an
//! `RwLock`'s first reader "takes" it, the second one changes it) for a
//! lock. So a word's owner is only *reported* when the run shows the word
//! used as a lock right now: every thread whose last read-modify-write on it
//! found it non-zero without taking it (a *contender*) is blocked on that
//! very word. A reader that got in beside another reader, a thread whose
//! `try_lock` failed, a notifier, a parker's waker: each is a contender that
//! went on, so the word is not reported. What is reported is then sound
//! under the protocol: the owner took the word from 0, has not put 0 back,
//! and the blocked threads are waiting for it to do so.

use super::Tid;
use crate::instrument::SiteId;
use std::collections::BTreeMap;

/// One tracked word.
#[derive(Debug, Clone, Default)]
struct Word {
    /// The thread that took it and where (the site, and the index of the
    /// stack captured then, if any).
    owner: Option<Taken>,
    /// Threads whose last read-modify-write found it non-zero and left it
    /// non-zero without taking it.
    contenders: Vec<Tid>,
    /// The word stepped outside the protocol.
    broken: bool,
}

/// Where a word lock was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// The thread that took it.
    pub tid: Tid,
    /// The read-modify-write that took it.
    pub site: SiteId,
    /// The index of a stack the runtime captured then, if any.
    pub stack: Option<usize>,
}

/// The futex words of one run that look like locks.
#[derive(Debug, Default)]
pub struct WordLocks {
    words: BTreeMap<u32, Word>,
}

impl WordLocks {
    /// Whether the word at `addr` is tracked (a read-modify-write of 4
    /// bytes has been seen there).
    pub fn tracks(&self, addr: u32) -> bool {
        self.words.contains_key(&addr)
    }

    /// The addresses of the tracked words in `range`, ascending.
    pub fn tracked(&self, range: std::ops::Range<u32>) -> impl Iterator<Item = u32> + '_ {
        self.words.range(range).map(|(&a, _)| a)
    }

    /// `tid`'s 4-byte read-modify-write (or compare-exchange) at `site`
    /// moved the word at `addr` from `before` to `after`. Returns whether it
    /// took the word (so that the caller may keep a stack for it).
    pub fn rmw(&mut self, tid: Tid, addr: u32, site: SiteId, before: u32, after: u32) -> bool {
        let w = self.words.entry(addr).or_default();
        if w.broken {
            return false;
        }
        match (before == 0, after == 0) {
            // Taken (a word found 0 is free, whoever was thought to hold it).
            (true, false) => {
                w.owner = Some(Taken {
                    tid,
                    site,
                    stack: None,
                });
                w.contenders.retain(|&t| t != tid);
                return true;
            }
            // A compare-exchange that expected another value, or an add of 0.
            (true, true) => {}
            // Put back: only by its owner.
            (false, true) => match w.owner {
                Some(o) if o.tid == tid => w.owner = None,
                _ => w.broken = true,
            },
            // Found taken: a contender, if anyone is known to hold it.
            (false, false) => {
                if w.owner.is_none() {
                    w.broken = true;
                } else if !w.contenders.contains(&tid) {
                    w.contenders.push(tid);
                }
            }
        }
        false
    }

    /// Notes the stack the runtime kept under `index` for `tid`'s take of
    /// `addr`.
    pub fn taken_with_stack(&mut self, tid: Tid, addr: u32, index: usize) {
        if let Some(Word {
            owner: Some(o),
            broken: false,
            ..
        }) = self.words.get_mut(&addr)
        {
            if o.tid == tid {
                o.stack = Some(index);
            }
        }
    }

    /// A store by `tid` (plain or atomic, or part of a copy or fill) moved
    /// the tracked word at `addr` from `before` to `after`.
    pub fn store(&mut self, tid: Tid, addr: u32, before: u32, after: u32) {
        let Some(w) = self.words.get_mut(&addr) else {
            return;
        };
        if after == 0 {
            match w.owner {
                // Released by a store (a C spinlock's unlock).
                Some(o) if o.tid == tid && !w.broken => w.owner = None,
                Some(_) if !w.broken => w.broken = true,
                // Zeroed with no owner: a fresh word (its memory reused).
                _ => *w = Word::default(),
            }
        } else if before != after {
            w.broken = true;
        }
    }

    /// Who holds the word at `addr` that `tid` waits on, when the run
    /// shows it used as a lock: `tid` contends for it and every contender
    /// is blocked on it (`blocked_on(t)`: the futex address `t` waits on).
    pub fn owner_for(
        &self,
        tid: Tid,
        addr: u32,
        blocked_on: impl Fn(Tid) -> Option<u32>,
    ) -> Option<Taken> {
        let w = self.words.get(&addr)?;
        if w.broken || !w.contenders.contains(&tid) {
            return None;
        }
        if w.contenders.iter().any(|&t| blocked_on(t) != Some(addr)) {
            return None;
        }
        w.owner
    }

    /// The words `tid` holds that some thread of `waiters` waits for (as
    /// [`Self::owner_for`] decides), by address.
    pub fn held_by(
        &self,
        tid: Tid,
        waiters: &[Tid],
        blocked_on: impl Fn(Tid) -> Option<u32>,
    ) -> Vec<(u32, Taken)> {
        self.words
            .iter()
            .filter(|(_, w)| w.owner.is_some_and(|o| o.tid == tid))
            .filter(|(&a, _)| {
                waiters
                    .iter()
                    .any(|&t| self.owner_for(t, a, &blocked_on).is_some())
            })
            .filter_map(|(&a, w)| w.owner.map(|o| (a, o)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: u32 = 0x100;
    const B: u32 = 0x200;

    /// Rust's futex mutex: CAS 0→1, a contender's CAS fails, it swaps in 2
    /// and waits; the owner's unlock swaps 0 back.
    #[test]
    fn a_futex_mutex_is_owned_until_put_back() {
        let mut w = WordLocks::default();
        assert!(w.rmw(1, A, 10, 0, 1));
        assert!(!w.rmw(2, A, 11, 1, 1));
        assert!(!w.rmw(2, A, 12, 1, 2));
        let on_a = |t: Tid| (t == 2).then_some(A);
        assert_eq!(
            w.owner_for(2, A, on_a).map(|o| (o.tid, o.site)),
            Some((1, 10))
        );
        assert_eq!(w.held_by(1, &[2], on_a).len(), 1);
        assert!(w.held_by(2, &[2], on_a).is_empty());
        // The owner that is not a contender is not waiting for it.
        assert!(w.owner_for(1, A, on_a).is_none());
        // Released, then taken by the waiter.
        w.rmw(1, A, 13, 2, 0);
        assert!(w.owner_for(2, A, on_a).is_none());
        assert!(w.rmw(2, A, 12, 0, 2));
        assert_eq!(w.owner_for(2, A, on_a), None, "no contender left");
    }

    /// ABBA: each holds one and waits for the other.
    #[test]
    fn abba_names_both_owners() {
        let mut w = WordLocks::default();
        w.rmw(1, A, 1, 0, 1);
        w.rmw(2, B, 2, 0, 1);
        w.rmw(1, B, 3, 1, 2);
        w.rmw(2, A, 4, 1, 2);
        let on = |t: Tid| match t {
            1 => Some(B),
            2 => Some(A),
            _ => None,
        };
        assert_eq!(w.owner_for(1, B, on).map(|o| o.tid), Some(2));
        assert_eq!(w.owner_for(2, A, on).map(|o| o.tid), Some(1));
        let h = w.held_by(1, &[1, 2], on);
        assert_eq!(
            h.iter().map(|(a, o)| (*a, o.site)).collect::<Vec<_>>(),
            [(A, 1)]
        );
    }

    /// A contender that went on (a second reader, a failed try_lock) makes
    /// the word unreported.
    #[test]
    fn a_contender_that_went_on_hides_the_owner() {
        let mut w = WordLocks::default();
        w.rmw(1, A, 1, 0, 1); // first reader
        w.rmw(2, A, 2, 1, 2); // second reader, not blocked
        w.rmw(3, A, 3, 2, 2 | 1 << 30); // a reader marks waiting and waits
        let on = |t: Tid| (t == 3).then_some(A);
        assert!(w.owner_for(3, A, on).is_none());
    }

    /// A notify counter is never put back by its first incrementer; the
    /// waiters never contend, so nothing is reported.
    #[test]
    fn a_counter_or_a_foreign_release_is_not_a_lock() {
        let mut w = WordLocks::default();
        w.rmw(1, A, 1, 0, 1);
        w.rmw(2, A, 2, 1, 0); // put back by another thread
        w.rmw(3, A, 3, 0, 1);
        w.rmw(4, A, 4, 1, 2);
        assert!(w.owner_for(4, A, |_| Some(A)).is_none(), "broken for good");
        // A store of 0 with no owner makes a fresh word.
        let mut w = WordLocks::default();
        w.rmw(1, B, 1, 5, 6); // found non-zero with no known taker
        w.store(2, B, 6, 0);
        w.rmw(3, B, 3, 0, 1);
        w.rmw(4, B, 4, 1, 2);
        assert_eq!(w.owner_for(4, B, |_| Some(B)).map(|o| o.tid), Some(3));
        // A spinlock released by a store of its owner.
        w.store(3, B, 2, 0);
        assert!(w.owner_for(4, B, |_| Some(B)).is_none());
        assert!(w.rmw(4, B, 4, 0, 1));
        // A store by another thread, or one making it non-zero, breaks it.
        w.store(5, B, 1, 0);
        w.rmw(6, B, 6, 0, 1);
        w.rmw(7, B, 7, 1, 1);
        assert!(w.owner_for(7, B, |_| Some(B)).is_none());
        w.store(6, B, 1, 3);
        assert!(w.owner_for(7, B, |_| Some(B)).is_none());
    }
}
