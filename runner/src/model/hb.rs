//! Happens-before data-race detection, in the run that explores the schedule.
//!
//! Controlled schedulers serialize threads, so detectors that look for
//! simultaneous accesses (TSan) cannot fire under them. This one computes
//! happens-before itself with vector clocks, in the style of FastTrack
//! (Flanagan & Freund, PLDI'09): each plain location remembers the last write
//! as an *epoch* (thread, clock) and the reads since as one epoch per
//! reading thread; an access races with a recorded one it is not ordered
//! after. Edges:
//!
//! * thread spawn: the child starts with its parent's clock;
//! * atomics (all sequentially consistent in wasm): an atomic store, RMW or
//!   compare-exchange *releases* the thread's clock into the location; an
//!   atomic load (and the read half of an RMW, and a futex wait's compare)
//!   *acquires* the location's clock — join, mutexes and condition variables
//!   of wasi-libc are built from these, so they need no special cases;
//! * a `notify` that wakes a waiter: the waiter acquires the notifier's clock;
//! * `pthread_join` in user code: the joiner acquires the joined thread's
//!   final clock (wasi-libc's join reads the thread's state with plain loads
//!   and a fence when the thread has already ended, so the atomics alone do
//!   not order it).
//!
//! The scheduler's own hand-offs between threads are *not* edges: that the
//! run happened to execute two accesses in some order says nothing about
//! the program.
//!
//! Locations are bytes, as in C11 (two threads writing neighbouring `char`s
//! of one array do not race), kept per 4-byte word: each remembered access
//! carries the mask of the word's bytes it touched, and two accesses
//! conflict only when their masks meet. A fresh heap block (the memory
//! checker sees every allocation) starts with no history, so reuse of freed
//! memory is not mistaken for a race.

use super::Tid;
use crate::instrument::SiteId;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// A vector clock: one logical time per thread (missing entries are 0).
/// The one clock type of heddle: the race detector, the explorer's
/// happens-before and `heddle observe` all use it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VectorClock(Vec<u32>);

impl VectorClock {
    /// Thread `t`'s entry.
    pub fn get(&self, t: Tid) -> u32 {
        self.0.get(t as usize).copied().unwrap_or(0)
    }

    /// Advances thread `t`'s entry by one.
    pub fn tick(&mut self, t: Tid) {
        let v = self.get(t) + 1;
        self.set(t, v);
    }

    /// Sets thread `t`'s entry.
    pub fn set(&mut self, t: Tid, v: u32) {
        if self.0.len() <= t as usize {
            self.0.resize(t as usize + 1, 0);
        }
        self.0[t as usize] = v;
    }

    /// `self := self ⊔ other`.
    pub fn join(&mut self, other: &VectorClock) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        join_max(&mut self.0[..other.0.len()], &other.0);
    }
}

/// `a[i] := max(a[i], b[i])` for equally long slices: AVX2 when the CPU
/// has it (eight entries per instruction; a run of a hundred threads joins
/// clocks of a hundred entries at every synchronising access).
#[inline]
fn join_max(a: &mut [u32], b: &[u32]) {
    #[cfg(target_arch = "x86_64")]
    if a.len() >= 8 && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked above).
        return unsafe { join_max_avx2(a, b) };
    }
    join_max_portable(a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn join_max_avx2(a: &mut [u32], b: &[u32]) {
    join_max_portable(a, b)
}

#[inline(always)]
fn join_max_portable(a: &mut [u32], b: &[u32]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = (*x).max(*y);
    }
}

/// One access, as remembered for race reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// The thread that accessed.
    pub tid: Tid,
    /// The thread's own clock entry at the access.
    clock: u32,
    /// The instruction.
    pub site: SiteId,
    /// Global step of the access.
    pub step: u64,
    /// Whether it wrote.
    pub write: bool,
    /// The bytes of the word it touched (bit `i`: byte `i`).
    mask: u8,
}

/// All four bytes of a word.
const WHOLE: u8 = 0xF;

/// The bytes of word `w` that `[addr, addr + len)` touches, as a mask.
fn bytes_of(w: u32, addr: u32, len: u32) -> u8 {
    let start = u64::from(w) << 2;
    let lo = u64::from(addr).max(start) - start;
    let hi = (u64::from(addr) + u64::from(len)).min(start + 4) - start;
    ((1u16 << hi) - (1u16 << lo)) as u8
}

/// Two accesses to the same location, at least one a write, not ordered by
/// happens-before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Race {
    /// The racing location.
    pub addr: u32,
    /// The earlier access (in this run's order).
    pub first: Access,
    /// The access that completed the race.
    pub second: Access,
}

/// What the detector remembers of one word. Most words are written by
/// one thread and read by at most one since: those fit in the state
/// itself, and only the others take a heap allocation ([`Extra`]), so a
/// run that touches a large array costs about 80 bytes a word.
#[derive(Debug, Clone, Default)]
struct VarState {
    /// The last write of the word.
    write: Option<Access>,
    /// The first of the reads since the last write of their bytes (the
    /// others are in `extra.reads`, in the order made): per thread, one
    /// per mask. `None` only when there is no read.
    read: Option<Access>,
    /// Earlier writes and further reads, when there are any.
    extra: Option<Box<Extra>>,
}

/// A word's rarer history.
#[derive(Debug, Clone, Default)]
struct Extra {
    /// Earlier writes still last for some bytes `write` did not touch (their
    /// masks disjoint from each other and from `write`'s).
    older: Vec<Access>,
    /// Reads after `VarState::read`.
    reads: Vec<Access>,
}

impl VarState {
    fn extra(&mut self, spare: &mut Vec<Extra>) -> &mut Extra {
        self.extra
            .get_or_insert_with(|| Box::new(spare.pop().unwrap_or_default()))
    }

    fn older(&self) -> &[Access] {
        self.extra.as_deref().map_or(&[], |e| &e.older)
    }

    fn reads(&self) -> impl Iterator<Item = &Access> {
        let more: &[Access] = self.extra.as_deref().map_or(&[], |e| &e.reads);
        self.read.iter().chain(more)
    }

    fn no_reads(&self) -> bool {
        self.read.is_none()
    }

    fn push_read(&mut self, a: Access, spare: &mut Vec<Extra>) {
        if self.read.is_none() {
            self.read = Some(a);
        } else {
            self.extra(spare).reads.push(a);
        }
    }

    /// Drops the bytes of `mask` from every earlier write and every read,
    /// and the accesses left with none.
    fn forget_bytes(&mut self, mask: u8) {
        let keep = |a: &mut Access| {
            a.mask &= !mask;
            a.mask != 0
        };
        if let Some(e) = &mut self.extra {
            e.older.retain_mut(keep);
            e.reads.retain_mut(keep);
        }
        if let Some(r) = &mut self.read {
            if !keep(r) {
                // The next read moves up, keeping the order made.
                self.read = match &mut self.extra {
                    Some(e) if !e.reads.is_empty() => Some(e.reads.remove(0)),
                    _ => None,
                };
            }
        }
    }

    /// Hands the state's allocation, emptied, to `spare`.
    fn recycle(self, spare: &mut Vec<Extra>) {
        if let Some(mut e) = self.extra {
            if spare.len() < MAX_SPARE_CLOCKS {
                e.older.clear();
                e.reads.clear();
                spare.push(*e);
            }
        }
    }
}

/// Fx hash (rustc's): fast for integer keys, and deterministic. The maps
/// are iterated only to hand their clocks' buffers and word histories to
/// [`Detector::spare`] and [`Detector::spare_extra`] (emptied, so only
/// capacity moves), so their order cannot leak into a run.
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(*b as u64);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type Fx = BuildHasherDefault<FxHasher>;

/// Synchronisation objects that are not memory are keyed from here: a
/// word's key is its address over 4, below 2^30.
const OBJECT_KEYS: u32 = 1 << 30;

/// The happens-before state of one run.
#[derive(Debug, Default, Clone)]
pub struct Detector {
    threads: Vec<VectorClock>,
    /// Per thread, how many joins into its clock there have been: between
    /// two joins a thread's clock changes only in its own entry.
    joins: Vec<u32>,
    /// Release clocks of atomic locations (by word).
    sync: HashMap<u32, SyncClock, Fx>,
    /// Per thread, its clock as it was after its latest join (the join
    /// number, the clock), shared by the release clocks that copy it.
    snaps: Vec<Option<(u32, Arc<VectorClock>)>>,
    vars: HashMap<u32, VarState, Fx>,
    /// Final clocks of finished threads (for join edges).
    finished: Vec<Option<VectorClock>>,
    /// Buffers of clocks an earlier run dropped, reused for new clocks (a
    /// run of a hundred threads would otherwise allocate and grow a
    /// hundred-entry clock per thread and per synchronising word). Only
    /// their capacity carries over: a reused buffer starts empty.
    spare: Vec<Vec<u32>>,
    /// The [`Extra`] histories of words an earlier run or a reset dropped,
    /// emptied, for the words accessed next (as [`Detector::spare`] for
    /// clocks).
    spare_extra: Vec<Extra>,
}

/// The release clock of an atomic location.
///
/// Most release clocks are copies of one thread's clock (a release by a
/// thread that held the location's clock already, every read-modify-write):
/// those share the thread's snapshot ([`Detector::snapshot`]) and keep only
/// the thread's own entry, so a program's array of a million atomics costs a
/// few words per atomic, not a clock each. A release into a clock the
/// thread did not hold makes a clock of the location's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum SyncClock {
    /// Nothing released here yet.
    #[default]
    Empty,
    /// Thread `t`'s clock as it was when its epoch `own` ended: a release
    /// copied it and the thread ticked right after. It is `snap`, the
    /// thread's clock after its latest join then, with entry `t` set to
    /// `own`.
    ///
    /// Then a thread whose clock's entry for `t` is past `own` (or `t`
    /// itself) already holds all of the clock: every entry a clock has for
    /// a thread came, through joins, from that thread's own clock at a time
    /// it had that entry, and a thread's clock only grows. The join an
    /// acquire would make changes nothing and is skipped.
    Copy {
        snap: Arc<VectorClock>,
        t: Tid,
        own: u32,
    },
    /// Several threads' releases joined: the location's own clock.
    Own(Box<VectorClock>),
}

impl SyncClock {
    /// Whether `c`, thread `t`'s clock, holds all of this clock (known
    /// without looking at every entry).
    #[inline]
    fn covered_by(&self, t: Tid, c: &VectorClock) -> bool {
        match self {
            SyncClock::Empty => true,
            SyncClock::Copy { t: u, own, .. } => *u == t || c.get(*u) > *own,
            SyncClock::Own(_) => false,
        }
    }

    /// `c := c ⊔ self`.
    #[inline]
    fn join_into(&self, c: &mut VectorClock) {
        match self {
            SyncClock::Empty => {}
            SyncClock::Copy { snap, t, own } => {
                c.join(snap);
                if c.get(*t) < *own {
                    c.set(*t, *own);
                }
            }
            SyncClock::Own(own) => c.join(own),
        }
    }

    /// The clock, whole (a copy when it is shared).
    #[cfg(test)]
    fn whole(&self) -> VectorClock {
        let mut c = VectorClock::default();
        self.join_into(&mut c);
        c
    }

    /// Becomes a copy of thread `t`'s clock: `snap` with `t`'s entry
    /// `own`, just before `t` ticks.
    fn copy_of(&mut self, t: Tid, own: u32, snap: &Arc<VectorClock>, spare: &mut Vec<Vec<u32>>) {
        if let SyncClock::Copy {
            snap: s,
            t: u,
            own: o,
        } = self
        {
            if Arc::ptr_eq(s, snap) {
                (*u, *o) = (t, own);
                return;
            }
        }
        let old = std::mem::replace(
            self,
            SyncClock::Copy {
                snap: Arc::clone(snap),
                t,
                own,
            },
        );
        keep_clock(spare, old);
    }

    /// `self := self ⊔ c` for a clock this one is not covered by: it
    /// becomes the location's own.
    fn join_from(&mut self, c: &VectorClock, spare: &mut Vec<Vec<u32>>) {
        if let SyncClock::Own(own) = self {
            own.join(c);
            return;
        }
        let mut own = fresh(spare);
        self.join_into(&mut own);
        own.join(c);
        *self = SyncClock::Own(Box::new(own));
    }
}

/// Thread `t`'s clock `c`, after its join number `joins`, as a snapshot
/// shared by the release clocks that copy it: taken once per join, since
/// between two joins only `t`'s own entry changes (which the copies keep
/// apart), so the snapshot's may lag.
fn snapshot<'a>(
    snaps: &'a mut Vec<Option<(u32, Arc<VectorClock>)>>,
    t: Tid,
    c: &VectorClock,
    joins: u32,
) -> &'a Arc<VectorClock> {
    let i = t as usize;
    if snaps.len() <= i {
        snaps.resize(i + 1, None);
    }
    let slot = &mut snaps[i];
    if !matches!(slot, Some((j, _)) if *j == joins) {
        *slot = Some((joins, Arc::new(c.clone())));
    }
    &slot.as_ref().expect("just set").1
}

/// Most buffers [`Detector::spare`] keeps, and most [`Extra`]s [`Detector::spare_extra`] keeps.
const MAX_SPARE_CLOCKS: usize = 1 << 16;

/// Keeps the buffer of a dropped release clock of a location's own,
/// within the same bound.
fn keep_clock(spare: &mut Vec<Vec<u32>>, c: SyncClock) {
    if let SyncClock::Own(own) = c {
        let VectorClock(mut v) = *own;
        if v.capacity() > 0 && spare.len() < MAX_SPARE_CLOCKS {
            v.clear();
            spare.push(v);
        }
    }
}

/// Removes the entries of words `first..=last` from `map`, handing each
/// removed value to `keep` (for its buffers): by look-up when the range is
/// smaller than the map, else by one pass over the map.
fn forget_words<V>(map: &mut HashMap<u32, V, Fx>, first: u32, last: u32, mut keep: impl FnMut(V)) {
    if map.is_empty() {
        return;
    }
    if (last - first) as usize > map.len() {
        for (_, v) in map.extract_if(|w, _| (first..=last).contains(w)) {
            keep(v);
        }
    } else {
        for w in first..=last {
            if let Some(v) = map.remove(&w) {
                keep(v);
            }
        }
    }
}

/// A new, empty clock, in a spare buffer when there is one.
fn fresh(spare: &mut Vec<Vec<u32>>) -> VectorClock {
    VectorClock(spare.pop().unwrap_or_default())
}

/// Most words of one access checked (long copies are sampled at their ends).
const MAX_WORDS: u32 = 64;

impl Detector {
    /// A detector with no history.
    pub fn new() -> Detector {
        let mut d = Detector::default();
        d.thread(0);
        d
    }

    /// Forgets all history, as [`Detector::new`] starts, keeping the
    /// maps' capacity and the clocks' buffers, emptied (what they held
    /// before cannot show).
    pub fn clear(&mut self) {
        let old = self
            .threads
            .drain(..)
            .chain(self.sync.drain().filter_map(|(_, c)| match c {
                SyncClock::Own(own) => Some(*own),
                _ => None,
            }))
            .chain(self.finished.drain(..).flatten());
        for VectorClock(mut v) in old {
            if v.capacity() > 0 && self.spare.len() < MAX_SPARE_CLOCKS {
                v.clear();
                self.spare.push(v);
            }
        }
        for (_, v) in self.vars.drain() {
            v.recycle(&mut self.spare_extra);
        }
        self.joins.clear();
        self.snaps.clear();
        self.thread(0);
    }

    #[inline]
    fn thread(&mut self, t: Tid) -> &mut VectorClock {
        if self.threads.len() <= t as usize {
            self.add_threads(t);
        }
        &mut self.threads[t as usize]
    }

    /// Creates the clocks of threads up to `t`.
    #[cold]
    fn add_threads(&mut self, t: Tid) {
        while self.threads.len() <= t as usize {
            let n = self.threads.len() as Tid;
            let mut c = fresh(&mut self.spare);
            c.set(n, 1);
            self.threads.push(c);
            self.joins.push(0);
        }
    }

    /// Joins thread `from`'s clock into thread `into`'s (both exist).
    fn join_threads(&mut self, into: Tid, from: Tid) {
        let (i, f) = (into as usize, from as usize);
        if i == f {
            return;
        }
        self.joins[i] += 1;
        let (lo, hi) = self.threads.split_at_mut(i.max(f));
        let (c, target) = if f < i {
            (&lo[f], &mut hi[0])
        } else {
            (&hi[0], &mut lo[i])
        };
        target.join(c);
    }

    fn tick(&mut self, t: Tid) {
        let c = self.thread(t);
        let v = c.get(t) + 1;
        c.set(t, v);
    }

    /// `parent` created `child`.
    pub fn spawn(&mut self, parent: Tid, child: Tid) {
        self.thread(parent.max(child));
        self.join_threads(child, parent);
        self.tick(parent);
    }

    /// An atomic read of the word at `addr`.
    pub fn acquire(&mut self, t: Tid, addr: u32) {
        self.acquire_key(t, addr >> 2);
    }

    /// An acquire of synchronisation object `id` that is not memory (a
    /// pipe's channel): its key is past every word's.
    pub fn acquire_object(&mut self, t: Tid, id: u32) {
        self.acquire_key(t, OBJECT_KEYS | id);
    }

    /// A release of object `id` ([`Detector::acquire_object`]).
    pub fn release_object(&mut self, t: Tid, id: u32) {
        self.release_key(t, OBJECT_KEYS | id);
    }

    fn acquire_key(&mut self, t: Tid, key: u32) {
        self.thread(t);
        if let Some(l) = self.sync.get(&key) {
            let c = &mut self.threads[t as usize];
            if !l.covered_by(t, c) {
                l.join_into(c);
                self.joins[t as usize] += 1;
            }
        }
    }

    /// An atomic write of the word at `addr`.
    pub fn release(&mut self, t: Tid, addr: u32) {
        self.release_key(t, addr >> 2);
    }

    fn release_key(&mut self, t: Tid, key: u32) {
        self.thread(t);
        let c = &self.threads[t as usize];
        let l = self.sync.entry(key).or_default();
        if l.covered_by(t, c) {
            // The join would give `t`'s clock itself.
            let snap = snapshot(&mut self.snaps, t, c, self.joins[t as usize]);
            l.copy_of(t, c.get(t), snap, &mut self.spare);
        } else {
            l.join_from(c, &mut self.spare);
        }
        self.tick(t);
    }

    /// An atomic read-modify-write (or compare-exchange) of the word at
    /// `addr`: [`Detector::acquire`] then [`Detector::release`] in one
    /// look-up. After the acquire the thread's clock is at least the
    /// word's, so the release's join is a copy.
    pub fn rmw(&mut self, t: Tid, addr: u32) {
        self.thread(t);
        let c = &mut self.threads[t as usize];
        let l = self.sync.entry(addr >> 2).or_default();
        let joins = &mut self.joins[t as usize];
        if !l.covered_by(t, c) {
            l.join_into(c);
            *joins += 1;
        }
        let snap = snapshot(&mut self.snaps, t, c, *joins);
        l.copy_of(t, c.get(t), snap, &mut self.spare);
        self.tick(t);
    }

    /// `t` ended: its clock is what joining it orders after.
    pub fn finish(&mut self, t: Tid) {
        self.thread(t);
        let mut c = fresh(&mut self.spare);
        c.0.extend_from_slice(&self.threads[t as usize].0);
        if self.finished.len() <= t as usize {
            self.finished.resize(t as usize + 1, None);
        }
        self.finished[t as usize] = Some(c);
    }

    /// `joiner` joined `joined`: `pthread_join` returned, so `joined` has
    /// signalled its exit (it may still be running wasi-libc's epilogue,
    /// which is why its current clock is used when it has not finished).
    pub fn join_thread(&mut self, joiner: Tid, joined: Tid) {
        self.thread(joiner.max(joined));
        match self.finished.get(joined as usize) {
            Some(Some(c)) => {
                self.threads[joiner as usize].join(c);
                self.joins[joiner as usize] += 1;
            }
            _ => self.join_threads(joiner, joined),
        }
    }

    /// `notifier` woke `woken`.
    pub fn wake(&mut self, notifier: Tid, woken: Tid) {
        self.thread(notifier.max(woken));
        self.join_threads(woken, notifier);
        self.tick(notifier);
    }

    /// Forgets the history of `[addr, addr + len)` (fresh heap memory):
    /// its plain accesses and the release clocks of its atomic words, so
    /// that neither a new object's races nor its synchronisation inherit
    /// from the freed object that had its address, and the maps stay the
    /// size of the live heap however long the run.
    pub fn reset(&mut self, addr: u32, len: u32) {
        if len == 0 {
            return;
        }
        let (first, last) = (addr >> 2, addr.saturating_add(len - 1) >> 2);
        let extras = &mut self.spare_extra;
        forget_words(&mut self.vars, first, last, |v| v.recycle(extras));
        let clocks = &mut self.spare;
        forget_words(&mut self.sync, first, last, |c| keep_clock(clocks, c));
    }

    /// A plain access; returns the first race it completes, if any.
    #[inline]
    pub fn access(
        &mut self,
        t: Tid,
        addr: u32,
        len: u32,
        write: bool,
        site: SiteId,
        step: u64,
    ) -> Option<Race> {
        if len == 0 {
            return None;
        }
        self.thread(t);
        let (first, last) = (addr >> 2, addr.saturating_add(len - 1) >> 2);
        // Long copies are checked at their ends only.
        let stride = if last - first < MAX_WORDS {
            1
        } else {
            (last - first).max(1)
        };
        let mut race = None;
        let mut w = first;
        loop {
            let mask = bytes_of(w, addr, len);
            if let Some(r) = self.access_word(t, w, mask, write, site, step) {
                race.get_or_insert(r);
            }
            match w.checked_add(stride) {
                Some(n) if n <= last => w = n,
                _ => break,
            }
        }
        race
    }

    fn access_word(
        &mut self,
        t: Tid,
        w: u32,
        mask: u8,
        write: bool,
        site: SiteId,
        step: u64,
    ) -> Option<Race> {
        let tc = &self.threads[t as usize];
        let clock = tc.get(t);
        let me = Access {
            tid: t,
            clock,
            site,
            step,
            write,
            mask,
        };
        let ordered = |a: &Access| a.tid == t || a.clock <= tc.get(a.tid);
        let spare = &mut self.spare_extra;
        let state = self.vars.entry(w).or_default();
        // Fast path: this thread already wrote the whole word in this epoch.
        if let Some(prev) = &state.write {
            if prev.tid == t
                && prev.clock == clock
                && prev.mask == WHOLE
                && mask == WHOLE
                && state.no_reads()
            {
                if write {
                    state.write = Some(me);
                } else {
                    state.read = Some(me);
                }
                return None;
            }
        }
        // The first unordered access to a byte this one touches.
        let conflict = |a: &Access| a.mask & mask != 0 && !ordered(a);
        let other = state
            .write
            .iter()
            .chain(state.older())
            .find(|a| conflict(a))
            .or_else(|| write.then(|| state.reads().find(|r| conflict(r))).flatten())
            .copied();
        let race = other.map(|prev| Race {
            addr: (w << 2) + (prev.mask & mask).trailing_zeros(),
            first: prev,
            second: me,
        });
        if write {
            // The bytes written now are no earlier access's any more.
            state.forget_bytes(mask);
            if let Some(mut prev) = state.write.take() {
                prev.mask &= !mask;
                if prev.mask != 0 {
                    state.extra(spare).older.push(prev);
                }
            }
            state.write = Some(me);
        } else {
            // A later read of the same bytes by the same thread stands for
            // the earlier one.
            let same = |r: &Access| r.tid == t && r.mask & !mask == 0;
            match &mut state.read {
                Some(r) if same(r) => *r = me,
                _ => {
                    let later = state
                        .extra
                        .as_deref_mut()
                        .and_then(|e| e.reads.iter_mut().find(|r| same(r)));
                    match later {
                        Some(r) => *r = me,
                        None => state.push_read(me, spare),
                    }
                }
            }
        }
        race
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A detector cleared after a run, whose new clocks reuse the old
    /// buffers, sees the next run exactly as a new detector does.
    #[test]
    fn a_cleared_detector_is_a_new_one() {
        let ops = |d: &mut Detector| {
            let mut races = Vec::new();
            for t in 1..9 {
                d.spawn(0, t);
            }
            for i in 0..300u32 {
                let (t, w) = ((i * 5 % 9) as Tid, 4 * (i % 7));
                match i % 4 {
                    0 => d.rmw(t, w),
                    1 => d.release(t, w + 64),
                    2 => d.acquire(t, w + 64),
                    _ => {
                        races.extend(d.access(t, w + 128, 4, i % 8 == 3, 0, i as u64));
                        if i % 8 == 7 {
                            // A second reader: the word's history grows.
                            let u = (t + 1) % 9;
                            races.extend(d.access(u, w + 128, 4, false, 0, i as u64));
                        }
                    }
                }
                if i == 150 {
                    // Fresh memory: its words' extra histories become spares.
                    d.reset(128, 16);
                }
            }
            for t in 1..9 {
                d.finish(t);
                d.join_thread(0, t);
            }
            races.extend(d.access(0, 128, 4, true, 0, 1_000));
            (races, d.threads.clone())
        };
        let mut reused = Detector::new();
        let first = ops(&mut reused);
        assert!(!first.0.is_empty(), "the sequence has races");
        for _ in 0..3 {
            reused.clear();
            assert!(!reused.spare.is_empty());
            assert!(!reused.spare_extra.is_empty());
            assert_eq!(ops(&mut reused), ops(&mut Detector::new()));
        }
        assert_eq!(ops(&mut Detector::new()), first);
    }

    /// Bytes are locations: neighbouring `char`s do not race, overlapping
    /// accesses of any sizes do, and a byte's last write is remembered when
    /// other bytes of its word are written after it.
    #[test]
    fn locations_are_bytes() {
        let mut d = Detector::new();
        for t in 1..4 {
            d.spawn(0, t);
        }
        let race = |d: &mut Detector, t: Tid, addr: u32, len: u32, write: bool| {
            d.access(t, addr, len, write, 0, 0)
                .map(|r| (r.addr, r.first.tid, r.second.tid))
        };
        // Threads 1, 2 and 3 each write their own byte of one word.
        assert_eq!(race(&mut d, 1, 0x100, 1, true), None);
        assert_eq!(race(&mut d, 2, 0x101, 1, true), None);
        assert_eq!(race(&mut d, 3, 0x102, 1, true), None);
        // Each reads its own byte back: still no race.
        assert_eq!(race(&mut d, 1, 0x100, 1, false), None);
        assert_eq!(race(&mut d, 2, 0x101, 1, false), None);
        // Thread 3 reads thread 1's byte: thread 1's write, remembered
        // though two later writes touched the word.
        assert_eq!(race(&mut d, 3, 0x100, 1, false), Some((0x100, 1, 3)));
        // A halfword write over bytes 2 and 3 meets thread 3's byte 2.
        assert_eq!(race(&mut d, 1, 0x102, 2, true), Some((0x102, 3, 1)));
        // A whole-word read meets the last writes of every byte.
        assert!(race(&mut d, 2, 0x100, 4, false).is_some());
        // Two halves of a fresh word, then a read of one half by the other
        // thread races only with that half's writer.
        assert_eq!(race(&mut d, 1, 0x200, 2, true), None);
        assert_eq!(race(&mut d, 2, 0x202, 2, true), None);
        assert_eq!(race(&mut d, 2, 0x200, 2, false), Some((0x200, 1, 2)));
        assert_eq!(race(&mut d, 1, 0x202, 1, false), Some((0x202, 2, 1)));
        // Unaligned accesses cover the bytes of two words.
        assert_eq!(race(&mut d, 3, 0x303, 2, true), None);
        assert_eq!(race(&mut d, 1, 0x304, 1, false), Some((0x304, 3, 1)));
        assert_eq!(race(&mut d, 2, 0x302, 1, true), None);
    }

    #[test]
    fn bytes_of_a_word() {
        assert_eq!(bytes_of(0x40, 0x100, 4), WHOLE);
        assert_eq!(bytes_of(0x40, 0x101, 1), 0b0010);
        assert_eq!(bytes_of(0x40, 0x102, 8), 0b1100);
        assert_eq!(bytes_of(0x41, 0x102, 8), WHOLE);
        assert_eq!(bytes_of(0x42, 0x102, 8), 0b0011);
        assert_eq!(bytes_of(0x3fff_ffff, 0xffff_fffe, 2), 0b1100);
    }

    #[test]
    fn a_read_modify_write_is_an_acquire_then_a_release() {
        let ops = |d: &mut Detector, rmw: bool| {
            for t in 1..12 {
                d.spawn(0, t);
            }
            for i in 0..200u32 {
                let (t, w) = ((i * 7 % 12) as Tid, 4 * (i % 5));
                if i % 3 == 0 {
                    d.release(t, w);
                } else if rmw {
                    d.rmw(t, w);
                } else {
                    d.acquire(t, w);
                    d.release(t, w);
                }
            }
        };
        let (mut a, mut b) = (Detector::new(), Detector::new());
        ops(&mut a, true);
        ops(&mut b, false);
        assert_eq!(a.threads, b.threads);
        for w in 0..5 {
            assert_eq!(
                a.sync.get(&w).map(SyncClock::whole),
                b.sync.get(&w).map(SyncClock::whole)
            );
        }
    }

    /// The joins skipped for an owned release clock change nothing: every
    /// clock is what full joins at every edge give.
    #[test]
    fn skipped_joins_are_the_ones_that_change_nothing() {
        // The plain model: full joins everywhere.
        #[derive(Default)]
        struct Plain {
            threads: Vec<VectorClock>,
            sync: HashMap<u32, VectorClock>,
            finished: HashMap<Tid, VectorClock>,
        }
        impl Plain {
            fn thread(&mut self, t: Tid) -> &mut VectorClock {
                while self.threads.len() <= t as usize {
                    let mut c = VectorClock::default();
                    c.set(self.threads.len() as Tid, 1);
                    self.threads.push(c);
                }
                &mut self.threads[t as usize]
            }
            fn join_from(&mut self, into: Tid, from: &VectorClock) {
                self.thread(into).join(from);
            }
        }
        let mut d = Detector::new();
        let mut p = Plain::default();
        p.thread(0);
        let mut rng = crate::sched::rng::Rng::new(7, 0);
        let mut live: Vec<Tid> = vec![0];
        let mut next: Tid = 1;
        for _ in 0..20_000 {
            let t = live[rng.range(0, live.len() as u64 - 1) as usize];
            let w = 4 * rng.range(0, 5) as u32;
            match rng.range(0, 10) {
                0 if next < 40 => {
                    d.spawn(t, next);
                    let parent = p.thread(t).clone();
                    p.join_from(next, &parent);
                    p.thread(t).tick(t);
                    live.push(next);
                    next += 1;
                }
                1 if live.len() > 2 && t != 0 => {
                    d.finish(t);
                    let c = p.thread(t).clone();
                    p.finished.insert(t, c.clone());
                    live.retain(|&x| x != t);
                    d.join_thread(0, t);
                    p.join_from(0, &c);
                }
                2 | 3 => {
                    d.rmw(t, w);
                    let l = p.sync.entry(w >> 2).or_default().clone();
                    p.join_from(t, &l);
                    let c = p.thread(t).clone();
                    p.sync.insert(w >> 2, c);
                    p.thread(t).tick(t);
                }
                4 | 5 => {
                    d.release(t, w);
                    let c = p.thread(t).clone();
                    p.sync.entry(w >> 2).or_default().join(&c);
                    p.thread(t).tick(t);
                }
                7 => {
                    // Joining a thread that has not finished: its clock
                    // now, in the middle of an epoch.
                    let u = live[rng.range(0, live.len() as u64 - 1) as usize];
                    d.join_thread(t, u);
                    let c = p.thread(u).clone();
                    p.join_from(t, &c);
                }
                8 if rng.range(0, 9) == 0 => {
                    // Fresh heap memory: the word has no release history.
                    d.reset(w, 4);
                    p.sync.remove(&(w >> 2));
                }
                6 => {
                    let u = live[rng.range(0, live.len() as u64 - 1) as usize];
                    d.wake(t, u);
                    let c = p.thread(t).clone();
                    p.join_from(u, &c);
                    p.thread(t).tick(t);
                }
                _ => {
                    d.acquire(t, w);
                    if let Some(l) = p.sync.get(&(w >> 2)).cloned() {
                        p.join_from(t, &l);
                    }
                }
            }
            for (i, c) in p.threads.iter().enumerate() {
                let mine = d.threads.get(i).cloned().unwrap_or_default();
                for k in 0..c.0.len().max(mine.0.len()) {
                    assert_eq!(mine.get(k as Tid), c.get(k as Tid), "thread {i} entry {k}");
                }
            }
            for (w, c) in &p.sync {
                let mine = &d.sync[w].whole();
                for k in 0..c.0.len().max(mine.0.len()) {
                    assert_eq!(mine.get(k as Tid), c.get(k as Tid), "word {w} entry {k}");
                }
            }
        }
    }

    #[test]
    fn unordered_writes_race_and_ordered_ones_do_not() {
        let mut d = Detector::new();
        d.spawn(0, 1);
        d.spawn(0, 2);
        // Thread 1 writes, thread 2 reads with no synchronisation: a race.
        assert!(d.access(1, 100, 4, true, 7, 1).is_none());
        let r = d.access(2, 100, 4, false, 8, 2).expect("race");
        assert_eq!(
            (r.first.tid, r.first.site, r.second.tid, r.second.site),
            (1, 7, 2, 8)
        );
        // Through an atomic flag: release by 1, acquire by 2, then ordered.
        assert!(d.access(1, 200, 4, true, 9, 3).is_none());
        d.release(1, 300);
        d.acquire(2, 300);
        assert!(d.access(2, 200, 4, true, 10, 4).is_none());
        // Before spawning, the parent's writes are ordered before the child.
        let mut d = Detector::new();
        assert!(d.access(0, 40, 4, true, 1, 1).is_none());
        d.spawn(0, 1);
        assert!(d.access(1, 40, 4, false, 2, 2).is_none());
        // But the parent's writes after the spawn are not.
        assert!(d.access(0, 44, 4, true, 3, 3).is_none());
        assert!(d.access(1, 44, 4, false, 4, 4).is_some());
    }

    #[test]
    fn a_join_takes_the_larger_entry_of_every_thread() {
        // Longer than one vector of eight, shorter and longer than each other.
        let mut a = VectorClock::default();
        let mut b = VectorClock::default();
        for t in 0..21 {
            a.set(t, if t % 3 == 0 { 100 + t } else { t });
        }
        for t in 0..37 {
            b.set(t, 50 + t);
        }
        let mut ab = a.clone();
        ab.join(&b);
        let mut ba = b.clone();
        ba.join(&a);
        assert_eq!(ab, ba);
        for t in 0..40 {
            assert_eq!(ab.get(t), a.get(t).max(b.get(t)), "thread {t}");
        }
    }

    #[test]
    fn reads_do_not_race_with_reads_and_reset_forgets() {
        let mut d = Detector::new();
        d.spawn(0, 1);
        assert!(d.access(0, 8, 4, false, 1, 1).is_none());
        assert!(d.access(1, 8, 4, false, 2, 2).is_none());
        assert!(
            d.access(1, 8, 4, true, 3, 3).is_some(),
            "write after an unordered read"
        );
        d.reset(0, 64);
        assert!(d.access(0, 8, 4, true, 4, 4).is_none());
        // A wake orders the notifier's past before the woken thread.
        d.wake(0, 1);
        assert!(d.access(1, 8, 4, true, 5, 5).is_none());
    }

    /// Fresh heap memory has no release history: a flag released in a
    /// freed object does not order the next object's accesses.
    #[test]
    fn reset_forgets_release_clocks() {
        let mut d = Detector::new();
        d.spawn(0, 1);
        assert!(d.access(0, 64, 4, true, 1, 1).is_none());
        d.release(0, 16);
        d.reset(16, 4);
        d.acquire(1, 16);
        assert!(
            d.access(1, 64, 4, true, 2, 2).is_some(),
            "ordered only through a freed word"
        );
        assert!(d.sync.is_empty());
    }

    /// Releases by threads that hold the location's clock share their
    /// thread's snapshot: an array of atomics costs no clock per atomic.
    #[test]
    fn many_atomics_share_a_few_clocks() {
        let mut d = Detector::new();
        for t in 1..32 {
            d.spawn(0, t);
        }
        for i in 0..100_000u32 {
            let t = i % 32;
            d.rmw(t, 4 * i);
            if i % 1000 == 0 {
                // Threads meet now and then: a join starts a new snapshot.
                d.wake(t, (t + 1) % 32);
            }
        }
        let mut snaps = std::collections::BTreeSet::new();
        for c in d.sync.values() {
            match c {
                SyncClock::Copy { snap, .. } => {
                    snaps.insert(Arc::as_ptr(snap) as usize);
                }
                other => panic!("not a shared copy: {other:?}"),
            }
        }
        assert_eq!(d.sync.len(), 100_000);
        assert!(snaps.len() <= 32 + 100, "{} snapshots", snaps.len());
        // And each reads as the releasing thread's clock then: word 5 is
        // thread 5's first release, made in its first epoch.
        let mut probe = VectorClock::default();
        d.sync[&5].join_into(&mut probe);
        assert_eq!(probe.get(5), 1);
        assert!(d.threads[5].get(5) > 3000);
    }
}
