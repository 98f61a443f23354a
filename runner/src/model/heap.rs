//! The memory checker's shadow heap.
//!
//! Every allocation the guest makes through its allocator entry points
//! (`malloc`, `calloc`, `realloc`, `aligned_alloc`, `posix_memalign`,
//! `memalign`, `valloc` — and so C++ `new`, which calls `malloc`) is widened by
//! a redzone on each side; the guest gets a pointer past the left redzone.
//! This table remembers each block: where it is, who allocated it where, and,
//! once freed, who freed it where. Freed blocks are not handed back to the
//! guest's allocator at once: they wait in a bounded FIFO quarantine, so a
//! use after free hits a block the table still knows about.
//!
//! Checks: an access inside a freed block is a use-after-free; an access in a
//! redzone is a heap overflow; freeing a freed block is a double free;
//! freeing anything that is not the start of a live block is an invalid free.
//! Redzones are also filled with a pattern that is verified at `free`, which
//! catches overflows by code that is not instrumented (library loops).

use super::AddrMap;
use super::Tid;
use crate::instrument::SiteId;
use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};

/// Bytes of redzone on each side of a block (keeps 16-byte alignment).
pub const REDZONE: u32 = 16;
/// The byte redzones are filled with.
pub const POISON: u8 = 0xfa;
/// Most freed blocks kept in quarantine.
pub const QUARANTINE_BLOCKS: usize = 1024;
/// Most freed bytes kept in quarantine.
pub const QUARANTINE_BYTES: u64 = 4 << 20;

/// Where and by whom something happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// The thread.
    pub tid: Tid,
    /// The instruction (the allocation or free call).
    pub site: SiteId,
    /// Global step number.
    pub step: u64,
}

/// A heap block as the guest sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// First byte the guest may use.
    pub start: u32,
    /// Bytes the guest asked for.
    pub size: u32,
    /// Redzone on each side (larger than [`REDZONE`] for aligned allocations).
    pub redzone: u32,
    /// Where it was allocated.
    pub alloc: Origin,
    /// Where it was freed, if it was.
    pub free: Option<Origin>,
}

impl Block {
    /// The real block start, as the guest's allocator knows it.
    pub fn real_start(&self) -> u32 {
        self.start - self.redzone
    }
    fn end(&self) -> u32 {
        self.start + self.size
    }
    fn outer(&self) -> (u32, u32) {
        (self.start - self.redzone, self.end() + self.redzone)
    }
}

/// What is wrong with an access or a free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// An access to a freed block.
    UseAfterFree(Block),
    /// An access to a block's redzone.
    HeapOverflow(Block),
    /// A second free of the same block.
    DoubleFree(Block),
    /// A free of an address that is no block's start.
    InvalidFree,
}

/// The shadow heap of one run.
#[derive(Debug, Default, Clone)]
pub struct Heap {
    /// Known blocks (live or quarantined) by guest-visible start.
    blocks: Blocks,
    quarantine: VecDeque<u32>,
    quarantined_bytes: u64,
    /// Lowest and highest addresses any known block spans (fast rejection).
    lo: u32,
    hi: u32,
    /// The live block the last access found itself inside: the next access
    /// is usually to the same block. Forgotten at every change of `blocks`.
    last: Cell<Option<Block>>,
}

impl Heap {
    /// An empty heap.
    pub fn new() -> Heap {
        Heap {
            lo: u32::MAX,
            hi: 0,
            ..Heap::default()
        }
    }

    /// Forgets every block, as [`Heap::new`] starts.
    pub fn clear(&mut self) {
        self.blocks.clear();
        self.quarantine.clear();
        self.quarantined_bytes = 0;
        self.lo = u32::MAX;
        self.hi = 0;
        self.last.set(None);
    }

    /// The redzone for an allocation aligned to `align` (0 = default).
    pub fn redzone_for(align: u32) -> u32 {
        align.max(REDZONE).next_power_of_two()
    }

    /// Records a new block; any stale (evicted) knowledge it overlaps goes.
    pub fn allocated(&mut self, start: u32, size: u32, redzone: u32, alloc: Origin) {
        self.last.set(None);
        let b = Block {
            start,
            size,
            redzone,
            alloc,
            free: None,
        };
        let (lo, hi) = b.outer();
        // Drop blocks the new one overlaps (they were freed and reused).
        while let Some(s) = self.blocks.overlapping(lo, hi) {
            self.blocks.remove(s);
            self.quarantine.retain(|&q| q != s);
        }
        self.lo = self.lo.min(lo);
        self.hi = self.hi.max(hi);
        self.blocks.insert(start, b);
    }

    /// A `free(ptr)` by `by`. On success returns the real pointer the guest
    /// allocator should free now (the oldest block leaving the quarantine),
    /// if any: at most one per call, since the guest makes one `free` call.
    pub fn free(&mut self, ptr: u32, by: Origin) -> Result<Option<u32>, Fault> {
        self.last.set(None);
        let Some(b) = self.blocks.get_mut(ptr) else {
            return Err(Fault::InvalidFree);
        };
        if b.free.is_some() {
            return Err(Fault::DoubleFree(*b));
        }
        b.free = Some(by);
        let bytes = b.size as u64 + 2 * b.redzone as u64;
        self.quarantine.push_back(ptr);
        self.quarantined_bytes += bytes;
        if self.quarantine.len() > QUARANTINE_BLOCKS || self.quarantined_bytes > QUARANTINE_BYTES {
            if let Some(old) = self.quarantine.pop_front() {
                if let Some(ob) = self.blocks.remove(old) {
                    self.quarantined_bytes -= ob.size as u64 + 2 * ob.redzone as u64;
                    return Ok(Some(ob.real_start()));
                }
            }
        }
        Ok(None)
    }

    /// A `realloc` moved (or resized) `old`: the old block is gone at once
    /// (the allocator already reused or kept its memory).
    pub fn reallocated(&mut self, old: u32) {
        self.last.set(None);
        self.blocks.remove(old);
    }

    /// Checks that `ptr` may be passed to `realloc` (null or a live block).
    pub fn check_realloc(&self, ptr: u32) -> Result<Option<Block>, Fault> {
        if ptr == 0 {
            return Ok(None);
        }
        match self.blocks.get(ptr) {
            None => Err(Fault::InvalidFree),
            Some(b) if b.free.is_some() => Err(Fault::DoubleFree(*b)),
            Some(b) => Ok(Some(*b)),
        }
    }

    /// The block whose outer extent (redzones included) contains `addr`.
    fn containing(&self, addr: u32) -> Option<Block> {
        if addr < self.lo || addr >= self.hi {
            return None;
        }
        let before = self.blocks.at_or_below(addr);
        if let Some(b) = before {
            if addr < b.outer().1 {
                return Some(b);
            }
        }
        let after = self.blocks.at_or_above(addr);
        after.filter(|b| addr >= b.outer().0)
    }

    /// Checks an access of `len` bytes at `addr` (a zero-length access
    /// touches nothing).
    #[inline]
    pub fn check(&self, addr: u32, len: u32) -> Result<(), Fault> {
        if len == 0 || addr >= self.hi || addr.saturating_add(len) <= self.lo {
            return Ok(());
        }
        let end = addr.saturating_add(len);
        // Known blocks never overlap, so a live block holding the whole
        // access is the answer the look-up below would find.
        if let Some(b) = self.last.get() {
            if addr >= b.start && end <= b.end() {
                return Ok(());
            }
        }
        let bad = |b: Block| {
            if b.free.is_some() {
                Fault::UseAfterFree(b)
            } else {
                Fault::HeapOverflow(b)
            }
        };
        if let Some(b) = self.containing(addr) {
            if b.free.is_some() || addr < b.start || end > b.end() {
                return Err(bad(b));
            }
            self.last.set(Some(b));
            return Ok(());
        }
        // Starts outside every block: it must not reach into the next one.
        match self.blocks.at_or_above(addr) {
            Some(b) if b.outer().0 < end => Err(bad(b)),
            _ => Ok(()),
        }
    }

    /// The block (live or quarantined) at guest pointer `ptr`.
    pub fn block(&self, ptr: u32) -> Option<&Block> {
        self.blocks.get(ptr)
    }

    /// Every known block (live or quarantined), by start address.
    pub fn blocks(&self) -> Box<dyn Iterator<Item = &Block> + '_> {
        match &self.blocks {
            Blocks::Few(m) => Box::new(m.values()),
            Blocks::Many(m) => Box::new(m.values()),
        }
    }

    /// How many blocks are allocated and not freed.
    #[cfg(test)]
    pub fn live_blocks(&self) -> usize {
        self.blocks().filter(|b| b.free.is_none()).count()
    }
}

/// Most blocks [`Blocks`] keeps in a sorted vector: past it, an insert
/// could move tens of kilobytes, and the blocks move to a B-tree.
const FEW_BLOCKS: usize = 256;

/// The heap's blocks by start: a vector sorted by address while there are
/// few (most runs: no allocation per insert, and the vector's capacity
/// stays from run to run), a B-tree once there are many (a program may
/// hold tens of thousands, added and freed anywhere, and a vector's insert
/// would move them all). Both iterate by address.
#[derive(Debug, Clone)]
enum Blocks {
    Few(AddrMap<Block>),
    Many(BTreeMap<u32, Block>),
}

impl Default for Blocks {
    fn default() -> Self {
        Blocks::Few(AddrMap::default())
    }
}

impl Blocks {
    fn clear(&mut self) {
        match self {
            Blocks::Few(m) => m.clear(),
            Blocks::Many(_) => *self = Blocks::default(),
        }
    }

    fn get(&self, start: u32) -> Option<&Block> {
        match self {
            Blocks::Few(m) => m.get(start),
            Blocks::Many(m) => m.get(&start),
        }
    }

    fn get_mut(&mut self, start: u32) -> Option<&mut Block> {
        match self {
            Blocks::Few(m) => m.get_mut(start),
            Blocks::Many(m) => m.get_mut(&start),
        }
    }

    fn insert(&mut self, start: u32, b: Block) {
        match self {
            Blocks::Few(m) if m.len() < FEW_BLOCKS => {
                m.insert(start, b);
            }
            Blocks::Few(m) => {
                let mut many: BTreeMap<u32, Block> = m.iter().map(|(a, b)| (a, *b)).collect();
                many.insert(start, b);
                *self = Blocks::Many(many);
            }
            Blocks::Many(m) => {
                m.insert(start, b);
            }
        }
    }

    fn remove(&mut self, start: u32) -> Option<Block> {
        match self {
            Blocks::Few(m) => m.remove(start),
            Blocks::Many(m) => m.remove(&start),
        }
    }

    fn at_or_below(&self, addr: u32) -> Option<Block> {
        match self {
            Blocks::Few(m) => m.at_or_below(addr).map(|e| e.1),
            Blocks::Many(m) => m.range(..=addr).next_back().map(|(_, b)| *b),
        }
    }

    fn at_or_above(&self, addr: u32) -> Option<Block> {
        match self {
            Blocks::Few(m) => m.at_or_above(addr).map(|e| e.1),
            Blocks::Many(m) => m.range(addr..).next().map(|(_, b)| *b),
        }
    }

    /// The start of a block whose outer extent overlaps `[lo, hi)`. Known
    /// blocks never overlap each other, so sorted by start they are sorted
    /// by end too: the walk goes back from `hi` (plus the largest
    /// redzone) while the blocks still end past `lo`.
    fn overlapping(&self, lo: u32, hi: u32) -> Option<u32> {
        let bound = hi.saturating_add(1 << 16);
        let hit = |o: &Block| o.outer().0 < hi;
        let live = |o: &Block| o.outer().1 > lo;
        match self {
            Blocks::Few(m) => m
                .below(bound)
                .iter()
                .rev()
                .take_while(|(_, o)| live(o))
                .find(|(_, o)| hit(o))
                .map(|e| e.0),
            Blocks::Many(m) => m
                .range(..bound)
                .rev()
                .take_while(|(_, o)| live(o))
                .find(|(_, o)| hit(o))
                .map(|(s, _)| *s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(step: u64) -> Origin {
        Origin {
            tid: 0,
            site: 1,
            step,
        }
    }

    /// The vector and the B-tree answer alike, before, across and after
    /// the move from one to the other, on a deterministic stream of
    /// inserts, removes and look-ups.
    #[test]
    fn blocks_answer_alike_as_a_vector_and_as_a_tree() {
        let mut few = Blocks::default();
        let mut many = Blocks::Many(BTreeMap::new());
        let mut x = 0x2545_f491u32;
        let mut moved = false;
        for step in 0..40_000u64 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            // Blocks of 16 bytes with 16-byte redzones, 64 bytes apart:
            // they never overlap.
            let start = 64 * (x % 1024) + 32;
            let b = Block {
                start,
                size: 16,
                redzone: 16,
                alloc: at(step),
                free: None,
            };
            if x.is_multiple_of(3) {
                assert_eq!(few.remove(start), many.remove(start));
            } else {
                few.insert(start, b);
                many.insert(start, b);
            }
            moved |= matches!(few, Blocks::Many(_));
            let probe = x.rotate_left(7) % (64 * 1024 + 128);
            assert_eq!(few.get(start), many.get(start));
            assert_eq!(few.at_or_below(probe), many.at_or_below(probe));
            assert_eq!(few.at_or_above(probe), many.at_or_above(probe));
            assert_eq!(
                few.overlapping(probe, probe + 40),
                many.overlapping(probe, probe + 40)
            );
            if step == 20_000 {
                assert!(moved, "the vector never moved to a tree");
                few.clear();
                many = Blocks::Many(BTreeMap::new());
                assert!(matches!(few, Blocks::Few(_)));
            }
        }
    }

    #[test]
    fn detects_each_kind() {
        let mut h = Heap::new();
        h.allocated(1016, 8, REDZONE, at(1));
        assert_eq!(h.check(1016, 4), Ok(()));
        assert!(matches!(h.check(1024, 1), Err(Fault::HeapOverflow(_))));
        assert!(matches!(h.check(1010, 4), Err(Fault::HeapOverflow(_))));
        assert!(
            matches!(h.check(1022, 4), Err(Fault::HeapOverflow(_))),
            "straddles the end"
        );
        assert_eq!(h.check(2000, 4), Ok(()));
        assert_eq!(h.free(1016, at(2)), Ok(None));
        assert!(matches!(h.check(1016, 4), Err(Fault::UseAfterFree(_))));
        assert!(matches!(h.free(1016, at(3)), Err(Fault::DoubleFree(_))));
        assert_eq!(h.free(5000, at(4)), Err(Fault::InvalidFree));
        assert_eq!(h.free(1018, at(4)), Err(Fault::InvalidFree));
    }

    #[test]
    fn the_block_an_access_found_is_forgotten_when_blocks_change() {
        let mut h = Heap::new();
        h.allocated(1024, 64, REDZONE, at(1));
        assert_eq!(h.check(1040, 8), Ok(()));
        // A new block inside the old one's memory (it was reused): some of
        // the old block's bytes are the new one's redzone now.
        h.allocated(1060, 8, REDZONE, at(2));
        assert!(matches!(h.check(1048, 4), Err(Fault::HeapOverflow(_))));
        assert_eq!(h.check(1060, 8), Ok(()));
        assert_eq!(h.free(1060, at(3)), Ok(None));
        assert!(matches!(h.check(1060, 4), Err(Fault::UseAfterFree(_))));
        h.allocated(2048, 64, REDZONE, at(4));
        assert_eq!(h.check(2048, 64), Ok(()));
        h.reallocated(2048);
        h.allocated(2080, 4, REDZONE, at(5));
        assert!(matches!(h.check(2068, 4), Err(Fault::HeapOverflow(_))));
    }

    #[test]
    fn quarantine_releases_oldest_and_reuse_forgets_stale_blocks() {
        let mut h = Heap::new();
        let mut released = Vec::new();
        for i in 0..(QUARANTINE_BLOCKS as u32 + 2) {
            let start = 100_000 + i * 64;
            h.allocated(start, 16, REDZONE, at(i as u64));
            released.extend(h.free(start, at(i as u64)).unwrap());
            assert!(released.len() <= i as usize);
        }
        assert_eq!(released, vec![100_000 - REDZONE, 100_064 - REDZONE]);
        // The allocator hands the released memory out again.
        h.allocated(100_000, 40, REDZONE, at(9999));
        assert_eq!(h.check(100_000, 40), Ok(()));
        assert_eq!(h.live_blocks(), 1);
    }
}
