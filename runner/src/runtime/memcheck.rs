//! The memory checker of one run: the shadow heap ([`Heap`]) and the
//! per-run pieces around it — the allocator calls in flight, the redzone
//! poison, the null page and the stacks reports show.
//!
//! The instrumented module calls every allocator entry point through three
//! hooks: `alloc_args` (the guest's arguments, before the call), `alloc_arg`
//! (each argument to really pass) and `alloc_post` (the allocator's result,
//! after the call). [`MemCheck`] widens each request by a redzone on both
//! sides, hands the guest the pointer past the left one, fills both with
//! [`POISON`], and keeps freed blocks in the heap's quarantine; every plain
//! access is then checked against the heap ([`MemCheck::check_access`]).
//!
//! Invariants:
//! * A `MemCheck` exists only in a run of a module instrumented with
//!   memcheck (`Checkers::mem` is `None` otherwise), so its methods never
//!   ask whether checking is on.
//! * A thread has a pending allocator call exactly between its `alloc_args`
//!   and `alloc_post` hooks, and at most one: a thread makes one allocator
//!   call at a time. `alloc_arg` answers from that call (0 when there is
//!   none).
//! * Every block the heap knows as live was returned by a hooked allocator
//!   call of this run and has had its redzones poisoned; at `free` the
//!   poison is verified first, so an overflow by code that was not
//!   instrumented is reported before the block is released.
//! * Guest memory is read and written only through the [`GuestMemory`] a
//!   method is given, from a hook, while no guest thread runs.
//! * The stacks of allocations and frees are kept by the block's guest
//!   start, and only when the run captures diagnostics (the hooks add them).

use super::memory::GuestMemory;
use crate::instrument::SiteId;
use crate::model::heap::{Block as HeapBlock, Fault, Heap, Origin, POISON, REDZONE};
use crate::model::{Pending, RawFrame, Tid};
use std::collections::BTreeMap;

/// A memory error, as the memory checker saw it.
#[derive(Debug, Clone)]
pub struct MemoryError {
    /// `null-deref`, `use-after-free`, `heap-overflow`, `double-free`, `invalid-free`.
    pub kind: &'static str,
    pub tid: Tid,
    /// The guest address accessed or freed.
    pub addr: u32,
    /// The site of the access or free.
    pub site: SiteId,
    pub stack: Vec<RawFrame>,
    /// The heap block involved, if any.
    pub block: Option<HeapBlock>,
    /// Stacks where the block was allocated and freed (with diagnostics).
    pub alloc_stack: Vec<RawFrame>,
    pub free_stack: Vec<RawFrame>,
}

/// An invalid free or realloc: the error's kind, the pointer and the block
/// it names, if the heap knows one.
pub type InvalidFree = (&'static str, u32, Option<HeapBlock>);

/// An allocator call between its `alloc_args` and `alloc_post` hooks.
#[derive(Debug, Clone, Copy)]
pub struct PendingAlloc {
    pub func: AllocFn,
    /// The arguments to really pass.
    pub args: [u32; 3],
    /// The size the guest asked for.
    pub size: u32,
    pub redzone: u32,
    /// `realloc`: the block being resized.
    pub old: Option<u32>,
    /// `posix_memalign`: where the pointer is stored.
    pub out: u32,
    /// Checking is off for this call (the request cannot be widened).
    pub untracked: bool,
}

/// Which allocator entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocFn {
    Malloc,
    Calloc,
    Realloc,
    Free,
    AlignedAlloc,
    PosixMemalign,
}

impl AllocFn {
    /// The entry point a call to `callee` is (unknown names are `malloc`).
    pub fn of(callee: Option<&str>) -> AllocFn {
        match callee {
            Some("malloc") => AllocFn::Malloc,
            Some("calloc") => AllocFn::Calloc,
            Some("realloc") => AllocFn::Realloc,
            Some("free") => AllocFn::Free,
            Some("aligned_alloc" | "memalign") => AllocFn::AlignedAlloc,
            Some("valloc") => AllocFn::Malloc,
            Some("posix_memalign") => AllocFn::PosixMemalign,
            _ => AllocFn::Malloc,
        }
    }
}

/// The memory checker's state for one run (see the module documentation).
#[derive(Debug, Clone)]
pub struct MemCheck {
    /// The shadow heap.
    heap: Heap,
    /// Accesses below this address are null dereferences.
    null_limit: u32,
    /// Each thread's allocator call in flight, by thread id.
    pending: Vec<Option<PendingAlloc>>,
    /// Guest start of the block the last allocator call returned.
    last_alloc: Option<u32>,
    /// With diagnostics: stacks of each block's allocation and free.
    alloc_stacks: BTreeMap<u32, Vec<RawFrame>>,
    free_stacks: BTreeMap<u32, Vec<RawFrame>>,
}

impl MemCheck {
    /// A checker with an empty heap; accesses below `null_limit` are null
    /// dereferences.
    pub fn new(null_limit: u32) -> MemCheck {
        MemCheck {
            heap: Heap::new(),
            null_limit,
            pending: Vec::new(),
            last_alloc: None,
            alloc_stacks: BTreeMap::new(),
            free_stacks: BTreeMap::new(),
        }
    }

    /// Empties the checker for a new run, as [`MemCheck::new`] makes it,
    /// keeping its buffers' capacity.
    pub fn reset(&mut self, null_limit: u32) {
        self.heap.clear();
        self.null_limit = null_limit;
        self.pending.clear();
        self.last_alloc = None;
        self.alloc_stacks.clear();
        self.free_stacks.clear();
    }

    /// The shadow heap.
    pub fn heap(&self) -> &Heap {
        &self.heap
    }

    /// The checker's verdict on an access, if it is invalid.
    #[inline]
    pub fn check_access(&self, p: &Pending) -> Option<(&'static str, Option<HeapBlock>)> {
        if p.len == 0 {
            return None;
        }
        if p.addr < self.null_limit {
            return Some(("null-deref", None));
        }
        match self.heap.check(p.addr, p.len) {
            Ok(()) => None,
            Err(Fault::UseAfterFree(b)) => Some(("use-after-free", Some(b))),
            Err(Fault::HeapOverflow(b)) => Some(("heap-overflow", Some(b))),
            Err(_) => None,
        }
    }

    /// An allocator call to `callee` with the guest's `args`, made at `at`.
    /// Returns the pointer a `free` released (for the trace), or the invalid
    /// free or realloc it is.
    pub fn alloc_args(
        &mut self,
        callee: Option<&str>,
        args: [u32; 3],
        at: Origin,
        memory: GuestMemory<'_>,
    ) -> Result<Option<u32>, InvalidFree> {
        let func = AllocFn::of(callee);
        let mut pa = PendingAlloc {
            func,
            args,
            size: 0,
            redzone: REDZONE,
            old: None,
            out: 0,
            untracked: false,
        };
        let mut freed = None;
        let widen = |n: u32, r: u32| n.checked_add(2 * r).filter(|&w| w < (1 << 31));
        match func {
            AllocFn::Malloc if callee == Some("valloc") => {
                pa.redzone = Heap::redzone_for(65536);
                pa.size = args[0];
                match widen(args[0], pa.redzone) {
                    // valloc(n) = memalign(65536, n): widen through aligned_alloc's shape.
                    Some(w) => pa.args[0] = w,
                    None => pa.untracked = true,
                }
            }
            AllocFn::Malloc => {
                pa.size = args[0];
                match widen(args[0], REDZONE) {
                    Some(w) => pa.args[0] = w,
                    None => pa.untracked = true,
                }
            }
            AllocFn::Calloc => match args[0]
                .checked_mul(args[1])
                .and_then(|n| widen(n, REDZONE).map(|w| (n, w)))
            {
                Some((n, w)) => {
                    pa.size = n;
                    pa.args = [w, 1, 0];
                }
                None => pa.untracked = true,
            },
            AllocFn::Realloc => match self.heap.check_realloc(args[0]) {
                Err(Fault::DoubleFree(b)) => return Err(("double-free", args[0], Some(b))),
                Err(_) => return Err(("invalid-free", args[0], None)),
                Ok(old) => {
                    pa.redzone = old.map_or(REDZONE, |b| b.redzone);
                    pa.old = old.map(|b| b.start);
                    pa.size = args[1];
                    match widen(args[1], pa.redzone) {
                        Some(w) => pa.args = [old.map_or(0, |b| b.real_start()), w, 0],
                        None => {
                            pa.args[0] = old.map_or(0, |b| b.real_start());
                            pa.untracked = true;
                        }
                    }
                }
            },
            AllocFn::AlignedAlloc => {
                pa.redzone = Heap::redzone_for(args[0]);
                pa.size = args[1];
                match widen(args[1], pa.redzone) {
                    Some(w) => pa.args[1] = w,
                    None => pa.untracked = true,
                }
            }
            AllocFn::PosixMemalign => {
                pa.redzone = Heap::redzone_for(args[1]);
                pa.size = args[2];
                pa.out = args[0];
                match widen(args[2], pa.redzone) {
                    Some(w) => pa.args[2] = w,
                    None => pa.untracked = true,
                }
            }
            AllocFn::Free => {
                let ptr = args[0];
                if ptr != 0 {
                    if let Some(b) = self.heap.block(ptr).copied() {
                        if b.free.is_none() {
                            let (lo, hi) = (b.real_start(), b.start + b.size);
                            if !memory.all(lo, b.redzone, POISON)
                                || !memory.all(hi, b.redzone, POISON)
                            {
                                return Err(("heap-overflow", ptr, Some(b)));
                            }
                        }
                    }
                    match self.heap.free(ptr, at) {
                        Ok(release) => {
                            pa.args[0] = release.unwrap_or(0);
                            freed = Some(ptr);
                        }
                        Err(Fault::DoubleFree(b)) => return Err(("double-free", ptr, Some(b))),
                        Err(_) => return Err(("invalid-free", ptr, None)),
                    }
                }
            }
        }
        let t = at.tid as usize;
        if self.pending.len() <= t {
            self.pending.resize(t + 1, None);
        }
        self.pending[t] = Some(pa);
        Ok(freed)
    }

    /// The `i`-th argument `tid`'s allocator call should really get.
    pub fn alloc_arg(&self, tid: Tid, i: u32) -> u32 {
        self.pending
            .get(tid as usize)
            .copied()
            .flatten()
            .map_or(0, |pa| pa.args.get(i as usize).copied().unwrap_or(0))
    }

    /// The allocator call `at` returned `result`. Returns what the guest
    /// gets and, when a block was allocated, the block: the caller records
    /// it and then poisons its redzones ([`MemCheck::poison`]).
    pub fn alloc_post(
        &mut self,
        result: u32,
        at: Origin,
        memory: GuestMemory<'_>,
    ) -> (u32, Option<HeapBlock>) {
        let Some(pa) = self.pending.get_mut(at.tid as usize).and_then(Option::take) else {
            return (result, None);
        };
        if pa.untracked {
            return (result, None);
        }
        let r = pa.redzone;
        let (real, ret) = match pa.func {
            AllocFn::Free => return (result, None),
            AllocFn::PosixMemalign => {
                if result != 0 {
                    return (result, None);
                }
                let Some(p) = memory.read_le(pa.out, 4) else {
                    return (result, None);
                };
                let q = p as u32 + r;
                memory.write(pa.out, &q.to_le_bytes());
                (p as u32, result)
            }
            _ => {
                if result == 0 {
                    return (0, None);
                }
                (result, result + r)
            }
        };
        let start = real + r;
        if let Some(old) = pa.old {
            self.heap.reallocated(old);
        }
        self.heap.allocated(start, pa.size, r, at);
        self.last_alloc = Some(start);
        let block = self.heap.block(start).copied();
        (ret, block)
    }

    /// Fills the redzones of the new block `b` with [`POISON`].
    pub fn poison(memory: GuestMemory<'_>, b: &HeapBlock) {
        memory.fill(b.real_start(), b.redzone, POISON);
        memory.fill(b.start + b.size, b.redzone, POISON);
    }

    /// With diagnostics: the stack of the allocation that returned the
    /// last block.
    pub fn allocated_at(&mut self, stack: Vec<RawFrame>) {
        if let Some(start) = self.last_alloc {
            self.alloc_stacks.insert(start, stack);
        }
    }

    /// With diagnostics: the stack of the `free` of the block at `ptr`.
    pub fn freed_at(&mut self, ptr: u32, stack: Vec<RawFrame>) {
        self.free_stacks.insert(ptr, stack);
    }

    /// The error `kind` at `addr` by `tid` at `site` (its `stack`), with the
    /// stacks where `block` was allocated and freed, if `checker` kept them.
    pub fn error(
        checker: Option<&MemCheck>,
        kind: &'static str,
        (tid, addr, site): (Tid, u32, SiteId),
        stack: Vec<RawFrame>,
        block: Option<HeapBlock>,
    ) -> MemoryError {
        let kept = |stacks: fn(&MemCheck) -> &BTreeMap<u32, Vec<RawFrame>>| {
            checker
                .zip(block)
                .and_then(|(m, b)| stacks(m).get(&b.start).cloned())
                .unwrap_or_default()
        };
        MemoryError {
            kind,
            tid,
            addr,
            site,
            stack,
            block,
            alloc_stack: kept(|m| &m.alloc_stacks),
            free_stack: kept(|m| &m.free_stacks),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EventKind;
    use std::cell::UnsafeCell;

    /// A small synthetic guest memory.
    fn cells(len: usize) -> Vec<UnsafeCell<u8>> {
        (0..len).map(|_| UnsafeCell::new(0)).collect()
    }

    fn memory(cells: &[UnsafeCell<u8>]) -> GuestMemory<'_> {
        // SAFETY: the cells are local to the test; nothing else uses them.
        unsafe { GuestMemory::serialized(cells) }
    }

    fn at(tid: Tid, site: SiteId, step: u64) -> Origin {
        Origin { tid, site, step }
    }

    fn access(addr: u32, len: u32) -> Pending {
        Pending {
            site: 1,
            kind: EventKind::Read,
            addr,
            len,
        }
    }

    /// `malloc(size)` through the hooks, with the guest's allocator
    /// returning `real` for the widened request.
    fn malloc(m: &mut MemCheck, mem: GuestMemory<'_>, tid: Tid, size: u32, real: u32) -> u32 {
        assert_eq!(
            m.alloc_args(Some("malloc"), [size, 0, 0], at(tid, 2, 1), mem),
            Ok(None)
        );
        assert_eq!(
            m.alloc_arg(tid, 0),
            size + 2 * REDZONE,
            "the request is widened"
        );
        let (ret, block) = m.alloc_post(real, at(tid, 2, 1), mem);
        let b = block.expect("a block");
        assert_eq!((b.start, b.size, b.real_start()), (ret, size, real));
        MemCheck::poison(mem, &b);
        assert_eq!(m.alloc_arg(tid, 0), 0, "nothing pending after alloc_post");
        ret
    }

    fn free(m: &mut MemCheck, mem: GuestMemory<'_>, tid: Tid, ptr: u32) -> Result<(), InvalidFree> {
        let freed = m.alloc_args(Some("free"), [ptr, 0, 0], at(tid, 3, 2), mem)?;
        assert_eq!(
            freed,
            (ptr != 0).then_some(ptr),
            "the freed pointer is traced"
        );
        assert_eq!(m.alloc_post(0, at(tid, 3, 2), mem), (0, None));
        Ok(())
    }

    #[test]
    fn flags_use_after_free_and_overflow_and_null() {
        let c = cells(8192);
        let mem = memory(&c);
        let mut m = MemCheck::new(1024);
        let p = malloc(&mut m, mem, 0, 8, 4096);
        assert_eq!(p, 4096 + REDZONE);
        // Redzones hold the poison, the block itself is untouched.
        assert!(mem.all(4096, REDZONE, POISON) && mem.all(p + 8, REDZONE, POISON));
        assert!(mem.all(p, 8, 0));
        assert_eq!(m.check_access(&access(p, 8)), None);
        assert_eq!(m.check_access(&access(p, 0)), None, "zero-length");
        let (kind, block) = m.check_access(&access(p + 4, 8)).expect("overflow");
        assert_eq!((kind, block.map(|b| b.start)), ("heap-overflow", Some(p)));
        assert_eq!(
            m.check_access(&access(p - 1, 1)).map(|e| e.0),
            Some("heap-overflow"),
            "underflow into the left redzone"
        );
        assert_eq!(m.check_access(&access(16, 4)), Some(("null-deref", None)));
        assert_eq!(m.check_access(&access(2048, 4)), None, "not heap memory");
        free(&mut m, mem, 0, p).expect("a valid free");
        let (kind, block) = m.check_access(&access(p, 4)).expect("use after free");
        assert_eq!(kind, "use-after-free");
        assert_eq!(block.and_then(|b| b.free).map(|f| f.step), Some(2));
    }

    #[test]
    fn flags_double_and_invalid_frees() {
        let c = cells(8192);
        let mem = memory(&c);
        let mut m = MemCheck::new(1024);
        let p = malloc(&mut m, mem, 1, 32, 4096);
        free(&mut m, mem, 1, 0).expect("free(NULL) is fine");
        assert_eq!(
            free(&mut m, mem, 1, p + 4).map_err(|e| e.0),
            Err("invalid-free")
        );
        free(&mut m, mem, 1, p).expect("a valid free");
        let e = free(&mut m, mem, 1, p).expect_err("double free");
        assert_eq!(
            (e.0, e.1, e.2.map(|b| b.start)),
            ("double-free", p, Some(p))
        );
        // realloc of a freed block is a double free, of a wild one invalid.
        let r = m.alloc_args(Some("realloc"), [p, 64, 0], at(1, 4, 3), mem);
        assert_eq!(r.map_err(|e| e.0), Err("double-free"));
        let r = m.alloc_args(Some("realloc"), [5000, 64, 0], at(1, 4, 3), mem);
        assert_eq!(r.map_err(|e| e.0), Err("invalid-free"));
    }

    #[test]
    fn free_finds_overflows_by_uninstrumented_code_in_the_redzones() {
        let c = cells(8192);
        let mem = memory(&c);
        let mut m = MemCheck::new(1024);
        let p = malloc(&mut m, mem, 0, 16, 4096);
        // A library loop writes one byte past the end: no access was checked.
        assert!(mem.write(p + 16, &[0]));
        let e = free(&mut m, mem, 0, p).expect_err("overflow found at free");
        assert_eq!((e.0, e.1), ("heap-overflow", p));
    }

    #[test]
    fn calloc_realloc_and_posix_memalign_are_widened_and_tracked() {
        let c = cells(65536);
        let mem = memory(&c);
        let mut m = MemCheck::new(1024);
        // calloc(4, 8): one widened request of 32 + 2 redzones.
        m.alloc_args(Some("calloc"), [4, 8, 0], at(0, 5, 1), mem)
            .unwrap();
        assert_eq!(
            (m.alloc_arg(0, 0), m.alloc_arg(0, 1), m.alloc_arg(0, 2)),
            (32 + 2 * REDZONE, 1, 0)
        );
        let (p, b) = m.alloc_post(8192, at(0, 5, 1), mem);
        assert_eq!((p, b.map(|b| b.size)), (8192 + REDZONE, Some(32)));
        // realloc(p, 100) passes the real start and keeps the redzone.
        m.alloc_args(Some("realloc"), [p, 100, 0], at(0, 6, 2), mem)
            .unwrap();
        assert_eq!(
            (m.alloc_arg(0, 0), m.alloc_arg(0, 1)),
            (8192, 100 + 2 * REDZONE)
        );
        let (q, _) = m.alloc_post(12288, at(0, 6, 2), mem);
        assert_eq!(q, 12288 + REDZONE);
        assert!(m.heap().block(p).is_none(), "the old block is gone");
        assert_eq!(m.heap().live_blocks(), 1);
        // posix_memalign(&out, 64, 10): the pointer stored at `out` moves
        // past the (alignment-sized) left redzone.
        let out = 2048;
        m.alloc_args(Some("posix_memalign"), [out, 64, 10], at(2, 7, 3), mem)
            .unwrap();
        assert_eq!(m.alloc_arg(2, 2), 10 + 2 * 64);
        assert!(mem.write(out, &16384u32.to_le_bytes()));
        let (ret, b) = m.alloc_post(0, at(2, 7, 3), mem);
        assert_eq!(ret, 0);
        assert_eq!(mem.read_le(out, 4), Some(16384 + 64));
        assert_eq!(b.map(|b| (b.start, b.redzone)), Some((16384 + 64, 64)));
        // A request that cannot be widened is not tracked.
        m.alloc_args(Some("malloc"), [u32::MAX - 8, 0, 0], at(0, 2, 4), mem)
            .unwrap();
        assert_eq!(m.alloc_arg(0, 0), u32::MAX - 8);
        assert_eq!(m.alloc_post(30000, at(0, 2, 4), mem), (30000, None));
    }

    #[test]
    fn each_thread_has_its_own_pending_call_and_errors_carry_stacks() {
        let c = cells(8192);
        let mem = memory(&c);
        let mut m = MemCheck::new(0);
        m.alloc_args(Some("malloc"), [8, 0, 0], at(0, 2, 1), mem)
            .unwrap();
        m.alloc_args(Some("malloc"), [24, 0, 0], at(3, 2, 2), mem)
            .unwrap();
        assert_eq!((m.alloc_arg(0, 0), m.alloc_arg(3, 0)), (40, 56));
        assert_eq!(m.alloc_arg(1, 0), 0, "no call in flight");
        let (p, _) = m.alloc_post(4096, at(3, 2, 3), mem);
        let frame = RawFrame {
            func: 7,
            offset: Some(70),
        };
        m.allocated_at(vec![frame]);
        m.freed_at(p, vec![frame, frame]);
        let e = MemCheck::error(
            Some(&m),
            "use-after-free",
            (3, p, 9),
            Vec::new(),
            m.heap().block(p).copied(),
        );
        assert_eq!((e.alloc_stack.len(), e.free_stack.len()), (1, 2));
        assert_eq!(m.alloc_arg(0, 0), 40, "thread 0's call is still pending");
        assert_eq!(m.check_access(&access(0, 4)), None, "no null page");
    }
}
