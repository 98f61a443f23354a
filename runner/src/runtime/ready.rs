//! The ready threads of a run filed for decisions: as sets of tids, split
//! by whether a thread's pending event may wait for a held lock, and those
//! that may by the lock they ask for. A decision then looks at each lock
//! once, not at each thread queued on it: in a run of a hundred threads
//! contending for one mutex, most ready threads wait for it.
//!
//! [`RunState`](super::state::RunState) files a thread when it becomes
//! ready or its pending event changes, and takes it out before; it checks
//! in debug builds that the candidates found here are those a walk over
//! every ready thread finds.

use crate::model::Tid;

/// A set of tids, one bit each.
#[derive(Debug, Clone, Default)]
pub struct TidSet(Vec<u64>);

impl TidSet {
    pub fn insert(&mut self, t: Tid) {
        let w = t as usize / 64;
        if self.0.len() <= w {
            self.0.resize(w + 1, 0);
        }
        self.0[w] |= 1 << (t % 64);
    }

    pub fn remove(&mut self, t: Tid) {
        if let Some(w) = self.0.get_mut(t as usize / 64) {
            *w &= !(1 << (t % 64));
        }
    }

    /// The tids below 64, one bit each.
    #[inline]
    pub fn low_word(&self) -> u64 {
        self.0.first().copied().unwrap_or(0)
    }

    /// `self := other`.
    fn copy_from(&mut self, other: &TidSet) {
        self.0.clear();
        self.0.extend_from_slice(&other.0);
    }

    /// `self := self ∪ other`.
    fn union_with(&mut self, other: &TidSet) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a |= b;
        }
    }

    /// The tids, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = Tid> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = w.trailing_zeros();
                    w &= w - 1;
                    (i * 64) as Tid + b
                })
            })
        })
    }
}

/// A lock some ready threads are about to take, and those threads.
#[derive(Debug, Clone)]
pub struct LockGroup {
    /// The address the pending events name.
    pub addr: u32,
    /// Whether they are a mutex's fast path (`EventKind::Lock`) rather
    /// than a compare-exchange of the lock word itself.
    pub mutex: bool,
    pub threads: TidSet,
    count: u32,
}

/// The ready threads, filed (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct ReadySets {
    /// Ready threads whose pending event cannot wait for a held lock.
    pub free: TidSet,
    /// Ready threads whose pending event may, by lock (in no order).
    pub locks: Vec<LockGroup>,
    /// Scratch of [`ReadySets::open`].
    open: TidSet,
    /// Emptied sets of groups that went, for new groups (a lock's group
    /// comes and goes with every contended lock operation).
    spare: Vec<TidSet>,
}

impl ReadySets {
    /// A filing with only thread `tid` (ready, its event no lock's).
    #[cfg(test)]
    pub fn new(tid: Tid) -> ReadySets {
        let mut r = ReadySets::default();
        r.reset(tid);
        r
    }

    /// Makes this the filing with only thread `tid` (ready, its event no
    /// lock's), keeping the buffers.
    pub fn reset(&mut self, tid: Tid) {
        self.free.0.fill(0);
        for mut g in self.locks.drain(..) {
            g.threads.0.fill(0);
            self.spare.push(g.threads);
        }
        self.free.insert(tid);
    }

    /// Files `tid`: among the lockers of `lock` (address, mutex fast path)
    /// or among the free threads.
    pub fn file(&mut self, tid: Tid, lock: Option<(u32, bool)>) {
        let Some((addr, mutex)) = lock else {
            self.free.insert(tid);
            return;
        };
        let group = match self
            .locks
            .iter()
            .position(|g| g.addr == addr && g.mutex == mutex)
        {
            Some(i) => &mut self.locks[i],
            None => {
                self.locks.push(LockGroup {
                    addr,
                    mutex,
                    threads: self.spare.pop().unwrap_or_default(),
                    count: 0,
                });
                self.locks.last_mut().expect("just pushed")
            }
        };
        group.threads.insert(tid);
        group.count += 1;
    }

    /// Takes out `tid`, filed under `lock`.
    pub fn unfile(&mut self, tid: Tid, lock: Option<(u32, bool)>) {
        let Some((addr, mutex)) = lock else {
            self.free.remove(tid);
            return;
        };
        if let Some(i) = self
            .locks
            .iter()
            .position(|g| g.addr == addr && g.mutex == mutex)
        {
            let g = &mut self.locks[i];
            g.threads.remove(tid);
            g.count -= 1;
            if g.count == 0 {
                // Every bit is clear again.
                let g = self.locks.swap_remove(i);
                self.spare.push(g.threads);
            }
        }
    }

    /// The free threads and the lockers of the locks `held` says are free
    /// (by index into `locks`), in tid order.
    pub fn open(&mut self, held: impl Fn(usize) -> bool) -> &TidSet {
        self.open.copy_from(&self.free);
        for (i, g) in self.locks.iter().enumerate() {
            if !held(i) {
                self.open.union_with(&g.threads);
            }
        }
        &self.open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_iterate_in_order_and_groups_come_and_go() {
        let mut s = TidSet::default();
        for t in [130, 3, 64, 0, 63] {
            s.insert(t);
        }
        s.remove(64);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 3, 63, 130]);
        let mut r = ReadySets::new(0);
        r.file(5, Some((100, true)));
        r.file(7, Some((100, true)));
        r.file(6, Some((200, false)));
        r.file(2, None);
        assert_eq!(r.locks.len(), 2);
        let held_100 = |i: usize| i == 0;
        assert_eq!(r.open(held_100).iter().collect::<Vec<_>>(), vec![0, 2, 6]);
        r.unfile(5, Some((100, true)));
        r.unfile(7, Some((100, true)));
        assert_eq!(r.locks.len(), 1, "an empty group goes");
        assert_eq!(r.open(|_| false).iter().collect::<Vec<_>>(), vec![0, 2, 6]);
    }
}
