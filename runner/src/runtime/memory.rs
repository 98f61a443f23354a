//! Guest linear memory as the host sees it: every raw access to a run's
//! shared memory goes through this module, which owns the `unsafe` and
//! states the rule that makes it sound.
//!
//! A wasm shared memory is `[UnsafeCell<u8>]` to the host: guest threads may
//! write it at any time.
//! * In heddle's own runs the scheduler runs one guest thread at a time, on
//!   the thread that also runs the host functions, and none while the host
//!   runs; so a host access never overlaps a guest access and plain reads
//!   and writes are sound. [`GuestMemory`] is that view; constructing it is
//!   `unsafe`: the caller promises the rule holds while the view lives.
//! * In plain wasmtime runs guest threads run on real OS threads while the
//!   host reads, so [`concurrent_cstr`] reads every byte with a relaxed
//!   atomic load: a string being written may come out garbled, never
//!   undefined behaviour.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU8, Ordering};

/// Where a run's shared memory is and how long it is: what
/// `SharedMemory::data` returns, kept by the run so that its many reads do
/// not each call into wasmtime. A shared memory never moves, and a run's
/// memory changes length only when the run grows it
/// ([`MemorySpan::refresh`] after each growth).
#[derive(Clone, Copy)]
pub struct MemorySpan {
    base: *const UnsafeCell<u8>,
    len: usize,
}

// SAFETY: the span is an address and a length; using it to reach the memory
// takes `GuestMemory::serialized`'s promise, and the run that holds it owns
// the memory (a clone of its `SharedMemory`), so the address stays valid.
unsafe impl Send for MemorySpan {}

impl MemorySpan {
    /// The span of `memory` as it is now.
    pub fn of(memory: &wasmtime::SharedMemory) -> MemorySpan {
        let data = memory.data();
        MemorySpan {
            base: data.as_ptr(),
            len: data.len(),
        }
    }

    /// Takes the new length of `memory` (the memory this span was taken of)
    /// after it grew.
    pub fn refresh(&mut self, memory: &wasmtime::SharedMemory) {
        let base = self.base;
        *self = MemorySpan::of(memory);
        debug_assert!(std::ptr::eq(base, self.base), "a shared memory moved");
    }

    /// The memory's length in bytes.
    pub fn byte_len(&self) -> usize {
        self.len
    }

    /// The host's view of the memory.
    ///
    /// # Safety
    /// The memory the span was taken of is alive (the caller holds it), and
    /// `GuestMemory::serialized`'s contract holds while the view is used.
    pub unsafe fn serialized<'a>(&self) -> GuestMemory<'a> {
        // SAFETY: a shared memory never moves and never shrinks, so the
        // span's bytes stay inside it while it is alive (the caller's
        // promise); the rest is `serialized`'s contract.
        unsafe { GuestMemory::serialized(std::slice::from_raw_parts(self.base, self.len)) }
    }
}

/// A run's guest memory: the shared memory, where it is, and its sizes as
/// the guest sees them.
pub struct RunMemory {
    /// The shared memory (it may be larger than the guest sees: it is
    /// recycled from earlier runs).
    pub shared: wasmtime::SharedMemory,
    /// Where `shared` is and how long it is now.
    pub span: MemorySpan,
    /// The guest memory's size in pages as the guest sees it.
    pub pages: u32,
    /// The module's maximum memory size in pages.
    pub max_pages: u32,
    /// The largest size the memory had in this run (what to clear after it).
    pub high_pages: u32,
}

impl RunMemory {
    /// `shared` at the start of a run, with the module's initial and
    /// maximum sizes in pages.
    pub fn new(shared: wasmtime::SharedMemory, (pages, max_pages): (u32, u32)) -> RunMemory {
        RunMemory {
            span: MemorySpan::of(&shared),
            shared,
            pages,
            max_pages,
            high_pages: pages,
        }
    }

    /// `memory.grow`: grows the logical size (and the shared memory, when
    /// it is not already large enough). Returns the old size or -1.
    pub fn grow(&mut self, delta: u32) -> i32 {
        let old = self.pages;
        let Some(new) = old.checked_add(delta).filter(|&n| n <= self.max_pages) else {
            return -1;
        };
        let physical = (self.span.byte_len() >> 16) as u32;
        if new > physical {
            if self.shared.grow((new - physical) as u64).is_err() {
                return -1;
            }
            self.span.refresh(&self.shared);
        }
        self.pages = new;
        self.high_pages = self.high_pages.max(new);
        old as i32
    }
}

/// The host's view of a run's guest memory while no guest thread runs
/// (see the module documentation).
#[derive(Clone, Copy)]
pub struct GuestMemory<'a> {
    data: &'a [UnsafeCell<u8>],
}

impl<'a> GuestMemory<'a> {
    /// The view of a memory no guest thread accesses while the view is used.
    ///
    /// # Safety
    /// While the view (or a copy) is used, no other thread reads or writes
    /// `data`: heddle's scheduler guarantees it for the memory of a run it
    /// drives (guest threads run one at a time, never while the host does),
    /// and a memory between runs has no guest threads at all.
    pub unsafe fn serialized(data: &'a [UnsafeCell<u8>]) -> Self {
        GuestMemory { data }
    }

    fn byte(&self, i: usize) -> u8 {
        // SAFETY: the `serialized` contract: nothing else accesses the
        // memory while this view is used.
        unsafe { *self.data[i].get() }
    }

    /// The byte range `[addr, addr + len)`, if it is inside the memory.
    fn range(&self, addr: u32, len: usize) -> Option<std::ops::Range<usize>> {
        let start = addr as usize;
        let end = start.checked_add(len).filter(|&e| e <= self.data.len())?;
        Some(start..end)
    }

    /// Whether `[addr, addr + len)` is inside the memory.
    pub fn contains(&self, addr: u32, len: u32) -> bool {
        self.range(addr, len as usize).is_some()
    }

    /// Appends the `len` bytes at `addr` to `out`; false (and nothing
    /// appended) when out of bounds.
    pub fn append(&self, addr: u32, len: u32, out: &mut Vec<u8>) -> bool {
        let Some(r) = self.range(addr, len as usize) else {
            return false;
        };
        let cells = &self.data[r];
        // SAFETY: `UnsafeCell<u8>` has the layout of `u8`, and the
        // `serialized` contract: nothing else accesses the memory while
        // this view is used.
        out.extend_from_slice(unsafe {
            std::slice::from_raw_parts(cells.as_ptr().cast::<u8>(), cells.len())
        });
        true
    }

    /// `len` bytes at `addr`, or None when out of bounds.
    pub fn read(&self, addr: u32, len: u32) -> Option<Vec<u8>> {
        Some(
            self.range(addr, len as usize)?
                .map(|i| self.byte(i))
                .collect(),
        )
    }

    /// Up to 8 bytes at `addr` as a little-endian integer.
    pub fn read_le(&self, addr: u32, len: u32) -> Option<u64> {
        if len > 8 {
            return None;
        }
        let r = self.range(addr, len as usize)?;
        // SAFETY: the range is in bounds, and the memory is serialized
        // (see `serialized`): no guest thread runs while the host reads.
        let p = self.data[r.start].get();
        Some(match len {
            4 => u32::from_le_bytes(unsafe { (p as *const [u8; 4]).read_unaligned() }) as u64,
            8 => u64::from_le_bytes(unsafe { (p as *const [u8; 8]).read_unaligned() }),
            _ => r
                .enumerate()
                .fold(0u64, |v, (k, i)| v | (self.byte(i) as u64) << (8 * k)),
        })
    }

    /// The NUL-terminated string at `addr` (at most `max` bytes, invalid
    /// UTF-8 replaced).
    pub fn cstr(&self, addr: u32, max: usize) -> String {
        cstr(self.data.len(), addr, max, |i| self.byte(i))
    }

    /// Whether `[addr, addr + len)` is inside the memory and holds only `byte`.
    pub fn all(&self, addr: u32, len: u32, byte: u8) -> bool {
        self.range(addr, len as usize)
            .is_some_and(|mut r| r.all(|i| self.byte(i) == byte))
    }

    /// Writes `bytes` at `addr`; false (and nothing written) when out of
    /// bounds.
    pub fn write(&self, addr: u32, bytes: &[u8]) -> bool {
        let Some(r) = self.range(addr, bytes.len()) else {
            return false;
        };
        for (i, b) in r.zip(bytes) {
            // SAFETY: the `serialized` contract.
            unsafe { *self.data[i].get() = *b };
        }
        true
    }

    /// Sets `[addr, addr + len)` to `byte`; false (and nothing written) when
    /// out of bounds.
    pub fn fill(&self, addr: u32, len: u32, byte: u8) -> bool {
        let Some(r) = self.range(addr, len as usize) else {
            return false;
        };
        for i in r {
            // SAFETY: the `serialized` contract.
            unsafe { *self.data[i].get() = byte };
        }
        true
    }

    /// Makes the first `len` bytes (clamped to the memory) equal to `image`
    /// followed by zeros. Only the 4 KiB blocks that differ are written: a
    /// run dirties few of the pages it can reach (thread stacks are mostly
    /// untouched), and reading a block costs less than writing it. With
    /// `pages`, the blocks of pages the kernel never populated are not
    /// even read: they hold zeros ([`PageMap`]). Give `pages` only for a
    /// memory that is a private anonymous mapping, as wasmtime maps a shared
    /// memory (it has no copy-on-write image): in a file mapping an
    /// unpopulated page holds the file's bytes. `known` is what the last
    /// reset of this memory found populated ([`Populated`]).
    ///
    /// Within the image too, a block the image has all zero is only read
    /// (and cleared if the run wrote it), not copied: a Rust program's image
    /// starts with its main stack, a mebibyte of zeros but for its top, and
    /// copying it was most of a short run's time (`Image`).
    pub fn reset(&self, image: &Image, len: usize, pages: Option<&PageMap>, known: &mut Populated) {
        let len = len.min(self.data.len());
        // SAFETY: the `serialized` contract; the range is inside the memory.
        let mem = unsafe { std::slice::from_raw_parts_mut(self.data.as_ptr() as *mut u8, len) };
        let head = image.bytes.len().min(len);
        let base = mem.as_ptr() as usize;
        if let Some(map) = pages.filter(|m| m.scan && base.is_multiple_of(PAGE) && len >= PAGE) {
            // Every populated page is cleared but the image's non-zero
            // blocks, which are copied after: the image's zero blocks that
            // no run wrote (most of a Rust main stack) are not even read.
            let zero = &image.zero;
            map.for_each_populated_since(mem, 0, known, |run| {
                let first = (run.as_ptr() as usize - base) / PAGE;
                for (i, block) in (first..).zip(run.chunks_mut(PAGE)) {
                    if zero.get(i) != Some(&false) && !is_zero(block) {
                        block.fill(0);
                    }
                }
            });
            let blocks = mem[..head].chunks_mut(PAGE).zip(image.bytes.chunks(PAGE));
            for ((dst, src), &zero) in blocks.zip(zero) {
                if !zero {
                    dst.copy_from_slice(src);
                }
            }
            // The rest of the image's last block, when it was not cleared.
            let end = head.next_multiple_of(PAGE).min(len);
            if zero.last() == Some(&false) && !is_zero(&mem[head..end]) {
                mem[head..end].fill(0);
            }
            return;
        }
        let blocks = mem[..head]
            .chunks_mut(PAGE)
            .zip(image.bytes[..head].chunks(PAGE));
        for ((dst, src), &zero) in blocks.zip(&image.zero) {
            if !zero {
                dst.copy_from_slice(src);
            } else if !is_zero(dst) {
                dst.fill(0);
            }
        }
        // Up to the next page boundary block by block, then page by page.
        let aligned = (head + (base + head).wrapping_neg() % PAGE).min(len);
        clear_blocks(&mut mem[head..aligned]);
        let rest = len - aligned;
        match pages.filter(|m| rest >= if m.scan { PAGE } else { PAGEMAP_MIN }) {
            Some(map) if map.scan => {
                map.for_each_populated_since(mem, aligned, known, clear_blocks)
            }
            Some(map) => {
                map.for_each_populated(&mut mem[aligned..], clear_blocks);
            }
            None => clear_blocks(&mut mem[aligned..]),
        }
    }

    /// A copy of the memory up to its last non-zero byte among the first
    /// `len` bytes.
    pub fn image(&self, len: usize) -> Image {
        let len = len.min(self.data.len());
        // SAFETY: the `serialized` contract; the range is inside the memory.
        let mem = unsafe { std::slice::from_raw_parts(self.data.as_ptr() as *const u8, len) };
        let end = mem.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        Image::new(mem[..end].to_vec())
    }
}

/// What a memory is reset to between runs ([`GuestMemory::reset`]): its
/// bytes from address 0, and which of their 4 KiB blocks are all zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Image {
    bytes: Vec<u8>,
    zero: Vec<bool>,
}

impl Image {
    /// The image of `bytes`.
    pub fn new(bytes: Vec<u8>) -> Image {
        let zero = bytes.chunks(PAGE).map(is_zero).collect();
        Image { bytes, zero }
    }

    /// Its bytes.
    #[cfg(test)]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// The size of a block [`GuestMemory::reset`] checks: a page.
const PAGE: usize = 4096;

/// The least memory past the image for which [`GuestMemory::reset`] reads
/// the [`PageMap`] without `PAGEMAP_SCAN`: the read is a system call, which
/// costs about as much as reading a few hundred KiB that are in cache, and
/// every page it does not skip has been read before, so it is present (as
/// the zero page) and read again (`benches/versions.sh`: an empty `main`,
/// 2 wasm pages, ran 0.76× as fast with it). With `PAGEMAP_SCAN`, which
/// leaves out the zero page, the map pays from the first page (an empty
/// `main` 1.09×, one thread 1.05×).
const PAGEMAP_MIN: usize = 256 << 10;

/// Zeroes the 4 KiB blocks of `mem` that are not zero already.
fn clear_blocks(mem: &mut [u8]) {
    for block in mem.chunks_mut(PAGE) {
        if !is_zero(block) {
            block.fill(0);
        }
    }
}

/// Which pages of this process the kernel has populated, from
/// `/proc/self/pagemap`: a page of a private anonymous mapping (a wasm
/// memory) that is neither present nor swapped out has never been written
/// since it was mapped or discarded, so it reads as zeros. A run touches few
/// of its memory's pages (a thread stack's top, not its bottom), and the
/// memory reset between runs skips the others without reading them, which
/// would populate them. Where the kernel has the `PAGEMAP_SCAN` request
/// (Linux 6.7), one call lists the populated pages, and a page that is
/// present as the shared zero page (a page only ever read) is left out too:
/// it reads as zeros. Linux with 4 KiB pages only; elsewhere, or when the
/// file cannot be read, there is no map and every page is read.
pub struct PageMap {
    file: std::fs::File,
    /// `PAGEMAP_SCAN` answers, and as [`PageMap::open`]'s probe expects.
    scan: bool,
}

/// `PAGEMAP_SCAN`'s argument (`struct pm_scan_arg`, linux/fs.h).
#[repr(C)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// One run of pages `PAGEMAP_SCAN` reports (`struct page_region`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

/// `_IOWR('f', 16, struct pm_scan_arg)`.
const PAGEMAP_SCAN: u64 =
    (3 << 30) | ((std::mem::size_of::<PmScanArg>() as u64) << 16) | (0x66 << 8) | 16;
const PAGE_IS_PRESENT: u64 = 1 << 3;
const PAGE_IS_SWAPPED: u64 = 1 << 4;
const PAGE_IS_PFNZERO: u64 = 1 << 5;

impl PageMap {
    /// The map of this process, if the kernel gives it.
    pub fn open() -> Option<PageMap> {
        if !cfg!(target_os = "linux") || page_size() != Some(PAGE) {
            return None;
        }
        let file = std::fs::File::open("/proc/self/pagemap").ok()?;
        let mut map = PageMap { file, scan: false };
        // A map that cannot be read, or that does not show as populated a
        // page just written, is no map.
        let probe = std::hint::black_box([1u8; 64]);
        let mut populated = false;
        let page = probe.as_ptr() as usize & !(PAGE - 1);
        let read = map.entries(page, 1, |p| populated = p);
        if !(read && populated) {
            return None;
        }
        map.scan = map.scan_works();
        Some(map)
    }

    /// Whether `PAGEMAP_SCAN`, on a fresh private anonymous mapping of four
    /// pages of which the first is written, the second read and the others
    /// left alone, reports exactly the first.
    fn scan_works(&self) -> bool {
        let len = 4 * PAGE;
        let Some(base) = anonymous_mapping(len) else {
            return false;
        };
        let page = base as *mut u8;
        // SAFETY: both bytes are inside the mapping, readable and writable,
        // which only this function uses.
        unsafe {
            page.add(7).write_volatile(1);
            page.add(PAGE + 7).read_volatile();
        }
        let mut seen = Vec::new();
        let whole = self.scan_regions(base as usize, len, |r| seen.push(r));
        let ok = whole && seen.len() == 1 && seen[0] == (0..PAGE);
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(base, len) };
        ok
    }

    /// Calls `f` with the ranges of offsets from `base` (a page boundary),
    /// below `len`, of the pages that `PAGEMAP_SCAN` reports populated by a
    /// page of their own (present and not the zero page, or swapped out),
    /// in order. Returns false if a call fails; the ranges reported until
    /// then were passed.
    fn scan_regions(
        &self,
        base: usize,
        len: usize,
        mut f: impl FnMut(std::ops::Range<usize>),
    ) -> bool {
        use std::os::fd::AsRawFd;
        let base = base as u64;
        let end = base + (len / PAGE * PAGE) as u64;
        let mut regions = [PageRegion::default(); 256];
        let mut start = base;
        while start < end {
            let mut arg = PmScanArg {
                size: std::mem::size_of::<PmScanArg>() as u64,
                flags: 0,
                start,
                end,
                walk_end: 0,
                vec: regions.as_mut_ptr() as u64,
                vec_len: regions.len() as u64,
                max_pages: 0,
                category_inverted: PAGE_IS_PFNZERO,
                category_mask: PAGE_IS_PFNZERO,
                category_anyof_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
                return_mask: 0,
            };
            // SAFETY: the request reads `arg` and writes at most `vec_len`
            // regions to `vec` and `walk_end` to `arg`; it reads the page
            // tables of this process only.
            let n = unsafe {
                libc::ioctl(
                    self.file.as_raw_fd(),
                    PAGEMAP_SCAN as _,
                    &mut arg as *mut PmScanArg,
                )
            };
            let Ok(n) = usize::try_from(n) else {
                return false;
            };
            for r in &regions[..n.min(regions.len())] {
                f((r.start - base) as usize..(r.end.min(end) - base) as usize);
            }
            if arg.walk_end <= start {
                return false;
            }
            start = arg.walk_end;
        }
        true
    }

    /// Calls `f` with the parts of `mem` (which starts at a page boundary)
    /// that may hold a non-zero byte, in order: with `PAGEMAP_SCAN`, each
    /// run of pages it reports; otherwise each page the entries do not show
    /// as never populated; and in both, what follows a failed call and the
    /// tail shorter than a page. Returns whether no call failed.
    fn for_each_populated(&self, mem: &mut [u8], mut f: impl FnMut(&mut [u8])) -> bool {
        let base = mem.as_ptr() as usize;
        debug_assert_eq!(base % PAGE, 0);
        if self.scan {
            let mut done = 0;
            let whole = self.scan_regions(base, mem.len(), |r| {
                // Debug builds (the tests') check what is skipped.
                debug_assert!(
                    is_zero(&mem[done..r.start]),
                    "an unpopulated page holds data"
                );
                f(&mut mem[r.clone()]);
                done = r.end;
            });
            if whole {
                debug_assert!(
                    is_zero(&mem[done..mem.len() / PAGE * PAGE]),
                    "an unpopulated page holds data"
                );
                done = mem.len() / PAGE * PAGE;
            }
            // What is left: the pages after a failed call, and the tail
            // shorter than a page.
            if done < mem.len() {
                f(&mut mem[done..]);
            }
            return whole;
        }
        let pages = mem.len() / PAGE;
        let mut chunks = mem.chunks_mut(PAGE);
        let whole = self.entries(base, pages, |populated| {
            let chunk = chunks.next().expect("one chunk per page");
            if populated {
                f(chunk);
            } else {
                // Debug builds (the tests') check what is skipped.
                debug_assert!(is_zero(chunk), "an unpopulated page holds data");
            }
        });
        // What is left: the pages after a failed read, and the tail shorter
        // than a page.
        for chunk in chunks {
            f(chunk);
        }
        whole
    }

    /// As [`PageMap::for_each_populated`] on `mem[from..]` (`mem` a whole
    /// memory from its start, `from` a page boundary), with the runs of
    /// pages that `known` kept from the last call on this memory instead
    /// of a `PAGEMAP_SCAN`, when no page of it can have been populated
    /// since: the same OS thread makes both calls and took no page fault
    /// in between. A page of an anonymous mapping is populated by a fault
    /// of the thread that touches it, and only the thread that resets a
    /// memory or runs on it touches it; a read that maps the zero page is
    /// a fault too, but leaves the page unpopulated as the scan counts
    /// it. So that no page is populated without a fault, the part scanned
    /// is kept from transparent huge pages (`MADV_NOHUGEPAGE`):
    /// `khugepaged` would fill the unpopulated pages of a huge page's
    /// range with zeros behind the thread's back. Zeros are harmless, but
    /// then a write to such a page would take no fault.
    fn for_each_populated_since(
        &self,
        mem: &mut [u8],
        from: usize,
        known: &mut Populated,
        mut f: impl FnMut(&mut [u8]),
    ) {
        let to = mem.len();
        let now = Faults::now();
        if now.is_some()
            && known.after == now
            && known.covered.start <= from
            && to <= known.covered.end
        {
            let mut done = from;
            for r in &known.runs {
                let r = r.start.max(done)..r.end.min(to);
                if r.start >= r.end {
                    continue;
                }
                // Debug builds (the tests') check what is skipped.
                debug_assert!(
                    is_zero(&mem[done..r.start]),
                    "a page populated without a fault holds data"
                );
                f(&mut mem[r.clone()]);
                done = r.end;
            }
            debug_assert!(
                is_zero(&mem[done..to]),
                "a page populated without a fault holds data"
            );
            // Clearing wrote only populated pages: no fault since `now`
            // (the checks of debug builds may map the zero page, a fault,
            // and make the next reset scan).
            known.after = now;
            return;
        }
        #[cfg(test)]
        {
            known.scans += 1;
        }
        known.runs.clear();
        known.covered = 0..0;
        let base = mem.as_ptr() as usize;
        let runs = &mut known.runs;
        let whole = self.for_each_populated(&mut mem[from..], |part| {
            let start = part.as_ptr() as usize - base;
            runs.push(start..start + part.len());
            f(part);
        });
        if whole && no_huge_pages(&mut mem[from..]) {
            known.covered = from..to;
        }
        // The scan's own reads may have taken faults: count from here.
        known.after = if known.covered.is_empty() {
            None
        } else {
            Faults::now()
        };
    }

    /// Calls `f` for the `pages` pages from address `base`, in order, with
    /// whether each is populated (present or swapped out). Stops at a failed
    /// read, returning false.
    fn entries(&self, base: usize, pages: usize, mut f: impl FnMut(bool)) -> bool {
        use std::os::unix::fs::FileExt;
        const BATCH: usize = 512;
        let mut buf = [0u8; 8 * BATCH];
        let mut done = 0;
        while done < pages {
            let n = (pages - done).min(BATCH);
            let offset = ((base / PAGE + done) * 8) as u64;
            let Ok(got) = self.file.read_at(&mut buf[..8 * n], offset) else {
                return false;
            };
            let whole = got / 8;
            for e in buf[..8 * whole].chunks_exact(8) {
                let e = u64::from_le_bytes(e.try_into().expect("8 bytes"));
                // Bit 63: present; bit 62: swapped out.
                f(e >> 62 != 0);
            }
            done += whole;
            if whole < n {
                return false;
            }
        }
        true
    }
}

/// What the last reset of a memory found populated past its image, kept
/// with the memory for the next reset
/// ([`PageMap::for_each_populated_since`]).
#[derive(Debug, Default)]
pub struct Populated {
    /// The runs of pages the last scan passed on, as offsets from the
    /// memory's start.
    runs: Vec<std::ops::Range<usize>>,
    /// What that scan covered; empty when nothing is known.
    covered: std::ops::Range<usize>,
    /// The page faults of the OS thread that made the last reset, counted
    /// when it ended.
    after: Option<Faults>,
    /// How many resets scanned.
    #[cfg(test)]
    scans: u32,
}

/// The page faults an OS thread has taken so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Faults {
    thread: std::thread::ThreadId,
    count: u64,
}

impl Faults {
    /// The calling thread's.
    #[cfg(target_os = "linux")]
    fn now() -> Option<Faults> {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: the call writes one `rusage`.
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) } != 0 {
            return None;
        }
        // SAFETY: written by the call that succeeded (and zeroed before).
        let usage = unsafe { usage.assume_init() };
        Some(Faults {
            thread: std::thread::current().id(),
            count: (usage.ru_minflt as u64).wrapping_add(usage.ru_majflt as u64),
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn now() -> Option<Faults> {
        None
    }
}

/// Keeps `mem` (page-aligned) from transparent huge pages; false if the
/// kernel refuses.
fn no_huge_pages(mem: &mut [u8]) -> bool {
    // SAFETY: advice on pages of a mapping the caller holds; it changes
    // how the kernel backs them, not their contents.
    unsafe { libc::madvise(mem.as_mut_ptr().cast(), mem.len(), libc::MADV_NOHUGEPAGE) == 0 }
}

/// A fresh private anonymous mapping of `len` bytes, readable and
/// writable (what wasmtime maps a shared memory as); the caller unmaps it.
fn anonymous_mapping(len: usize) -> Option<*mut libc::c_void> {
    // SAFETY: a new mapping, at an address the kernel chooses.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    (base != libc::MAP_FAILED).then_some(base)
}

/// The kernel's page size.
fn page_size() -> Option<usize> {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok()
}

/// Whether `bytes` are all zero: every word OR-ed into one, without an
/// early exit, so that the loop vectorises (a clean block, the common case,
/// is read whole either way); AVX2 when the CPU has it.
fn is_zero(bytes: &[u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked above).
        return unsafe { is_zero_avx2(bytes) };
    }
    is_zero_portable(bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn is_zero_avx2(bytes: &[u8]) -> bool {
    is_zero_portable(bytes)
}

#[inline(always)]
fn is_zero_portable(bytes: &[u8]) -> bool {
    // SAFETY: every bit pattern is a valid u64.
    let (head, words, tail) = unsafe { bytes.align_to::<u64>() };
    let mut acc = [0u64; 8];
    let mut chunks = words.chunks_exact(8);
    for c in &mut chunks {
        for (a, w) in acc.iter_mut().zip(c) {
            *a |= w;
        }
    }
    let rest = chunks.remainder().iter().fold(0, |a, &w| a | w);
    head.iter().chain(tail).all(|&b| b == 0) && acc.iter().fold(rest, |a, &w| a | w) == 0
}

/// The NUL-terminated string at `addr` of a memory `len` bytes long, read
/// with `byte` (at most `max` bytes, invalid UTF-8 replaced).
fn cstr(len: usize, addr: u32, max: usize, byte: impl Fn(usize) -> u8) -> String {
    let out: Vec<u8> = (addr as usize..len)
        .map(byte)
        .take_while(|&b| b != 0)
        .take(max)
        .collect();
    String::from_utf8_lossy(&out).into_owned()
}

/// The NUL-terminated string at `addr` of a memory other threads may be
/// writing: relaxed atomic byte loads (see the module documentation).
pub fn concurrent_cstr(data: &[UnsafeCell<u8>], addr: u32, max: usize) -> String {
    cstr(data.len(), addr, max, |i| {
        // SAFETY: the pointer is valid and aligned for a u8 for the
        // memory's lifetime; concurrent guest accesses are the shared
        // memory's defined behaviour, and an atomic load is the host's
        // race-free way to read it.
        unsafe { AtomicU8::from_ptr(data[i].get()) }.load(Ordering::Relaxed)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_writes_and_bounds() {
        let cells: Vec<UnsafeCell<u8>> = (0..16).map(|_| UnsafeCell::new(0)).collect();
        // SAFETY: the cells are local to this test.
        let m = unsafe { GuestMemory::serialized(&cells) };
        assert!(m.write(2, b"hi\0x"));
        assert_eq!(m.cstr(2, 100), "hi");
        assert_eq!(m.read(2, 2).unwrap(), b"hi");
        assert_eq!(
            m.read_le(2, 2),
            Some(u64::from(b'h') | u64::from(b'i') << 8)
        );
        // Word reads, unaligned, agree with the bytes.
        assert_eq!(
            m.read_le(1, 4),
            Some(u64::from_le_bytes([0, b'h', b'i', 0, 0, 0, 0, 0]))
        );
        assert_eq!(m.read_le(8, 8), Some(0));
        assert_eq!(m.read_le(9, 8), None);
        assert_eq!(m.read(15, 2), None);
        assert!(!m.write(15, b"ab"));
        assert!(m.all(6, 10, 0) && !m.all(2, 2, 0) && !m.all(10, 10, 0));
        assert!(m.fill(12, 3, 0xaa) && m.all(12, 3, 0xaa) && m.all(15, 1, 0));
        assert!(!m.fill(14, 3, 0xbb) && m.all(14, 1, 0xaa));
        assert!(m.fill(12, 3, 0));
        assert_eq!(concurrent_cstr(&cells, 2, 1), "h");
        assert_eq!(concurrent_cstr(&cells, 2, 100), "hi");
        assert_eq!(m.image(16).bytes(), b"\0\0hi\0x");
        m.reset(
            &Image::new(b"ab".to_vec()),
            100,
            None,
            &mut Populated::default(),
        );
        assert_eq!(m.read(0, 3).unwrap(), b"ab\0");
        assert!(m.all(2, 14, 0));
    }

    #[test]
    fn reset_clears_every_dirty_block_past_the_image() {
        let cells: Vec<UnsafeCell<u8>> = (0..3 * 4096 + 100).map(|_| UnsafeCell::new(0)).collect();
        // SAFETY: the cells are local to this test.
        let m = unsafe { GuestMemory::serialized(&cells) };
        for addr in [5, 4095, 4096 + 17, 3 * 4096 + 99] {
            assert!(m.write(addr, &[7]));
        }
        m.reset(
            &Image::new(vec![1, 2]),
            cells.len(),
            None,
            &mut Populated::default(),
        );
        assert_eq!(m.read(0, 2).unwrap(), [1, 2]);
        assert!(m.all(2, cells.len() as u32 - 2, 0));
        assert_eq!(m.image(cells.len()).bytes(), [1, 2]);
    }

    #[test]
    fn reset_restores_the_image_block_by_block() {
        let len = 4 * 4096;
        let cells: Vec<UnsafeCell<u8>> = (0..len).map(|_| UnsafeCell::new(0)).collect();
        // SAFETY: the cells are local to this test.
        let m = unsafe { GuestMemory::serialized(&cells) };
        // An image with a zero block between two that are not, and a
        // partial last block.
        let mut bytes = vec![0u8; 2 * 4096 + 10];
        bytes[3] = 1;
        bytes[2 * 4096 + 9] = 2;
        let image = Image::new(bytes.clone());
        assert_eq!(image.zero, [false, true, false]);
        for addr in [3, 4096 + 5, 2 * 4096 + 9, 3 * 4096 + 1] {
            assert!(m.write(addr, &[9]));
        }
        m.reset(&image, len, None, &mut Populated::default());
        assert_eq!(m.read(0, bytes.len() as u32).unwrap(), bytes);
        assert!(m.all(bytes.len() as u32, (len - bytes.len()) as u32, 0));
        assert_eq!(m.image(len), image);
    }

    /// The page map shows exactly the written pages of a private anonymous
    /// mapping (what a wasm memory is) as populated, and a reset with it
    /// clears them: with `PAGEMAP_SCAN` where the kernel has it, and with
    /// the entries' read.
    #[test]
    fn the_page_map_shows_the_written_pages_and_reset_clears_them() {
        let Some(map) = PageMap::open() else {
            eprintln!("no usable /proc/self/pagemap here: nothing to check");
            return;
        };
        if !map.scan {
            eprintln!("no PAGEMAP_SCAN here: only the entries' read is checked");
        }
        let entries = PageMap {
            file: map.file.try_clone().unwrap(),
            scan: false,
        };
        check_page_map(&entries);
        if map.scan {
            check_page_map(&map);
        }
    }

    fn check_page_map(map: &PageMap) {
        let len = 2 * PAGEMAP_MIN;
        let base = anonymous_mapping(len).expect("an anonymous mapping");
        // Pages one by one, not a huge page populated at the first write.
        // SAFETY: advice on the mapping just made.
        unsafe { libc::madvise(base, len, libc::MADV_NOHUGEPAGE) };
        let written = [0, 3 * PAGE + 5, 40 * PAGE, len - 1];
        {
            // SAFETY: the mapping is `len` bytes, readable and writable,
            // and only this block uses it.
            let mem = unsafe { std::slice::from_raw_parts_mut(base as *mut u8, len) };
            for &addr in &written {
                mem[addr] = 9;
            }
            // A page only read maps the shared zero page: present, and
            // left out where the kernel can say so.
            let read_only = 41 * PAGE;
            // SAFETY: inside the mapping.
            assert_eq!(unsafe { std::ptr::read_volatile(&mem[read_only]) }, 0);
            let mut seen = Vec::new();
            map.for_each_populated(mem, |pages| {
                let first = (pages.as_ptr() as usize - base as usize) / PAGE;
                seen.extend(first..first + pages.len().div_ceil(PAGE));
            });
            let mut expected = written.map(|a| a / PAGE).to_vec();
            if !map.scan {
                expected.insert(3, read_only / PAGE);
            }
            assert_eq!(seen, expected);
        }
        // SAFETY: as above; the slice of the block above is gone.
        let cells = unsafe { std::slice::from_raw_parts(base as *const UnsafeCell<u8>, len) };
        // SAFETY: as above.
        let m = unsafe { GuestMemory::serialized(cells) };
        m.reset(
            &Image::new(vec![1]),
            len,
            Some(map),
            &mut Populated::default(),
        );
        assert_eq!(m.read(0, 2).unwrap(), [1, 0]);
        assert!(m.all(1, len as u32 - 1, 0));
        // SAFETY: the mapping made above, no longer used.
        assert_eq!(unsafe { libc::munmap(base, len) }, 0);
    }

    /// With `PAGEMAP_SCAN`, a reset reads only populated pages, inside the
    /// image too, and still restores the image and clears the rest.
    #[test]
    fn a_scanning_reset_restores_the_image_and_clears_the_rest() {
        let Some(map) = PageMap::open().filter(|m| m.scan) else {
            return;
        };
        let len = 16 * PAGE;
        let base = anonymous_mapping(len).expect("a mapping");
        // SAFETY: the mapping is `len` bytes, readable and writable, and
        // only this test uses it.
        let cells = unsafe { std::slice::from_raw_parts(base as *const UnsafeCell<u8>, len) };
        // SAFETY: as above.
        let m = unsafe { GuestMemory::serialized(cells) };
        // Non-zero blocks 0 and 5 (its last, partial), zero blocks between.
        let mut bytes = vec![0u8; 5 * PAGE + 100];
        bytes[7] = 1;
        bytes[5 * PAGE + 99] = 2;
        let image = Image::new(bytes.clone());
        let mut known = Populated::default();
        for round in 0..3 {
            for addr in [7, 2 * PAGE + 3, 5 * PAGE + 99, 5 * PAGE + 200, 9 * PAGE + 1] {
                assert!(m.write(addr as u32, &[9 + round]));
            }
            m.reset(&image, len, Some(&map), &mut known);
            assert_eq!(
                m.read(0, bytes.len() as u32).unwrap(),
                bytes,
                "round {round}"
            );
            assert!(
                m.all(bytes.len() as u32, (len - bytes.len()) as u32, 0),
                "round {round}"
            );
        }
        // SAFETY: the mapping made above, no longer used.
        assert_eq!(unsafe { libc::munmap(base, len) }, 0);
    }

    /// A reset after which the thread took no page fault clears what the
    /// run wrote to pages the last reset found populated, without a scan;
    /// a write that populates a page is a fault, and the next reset scans.
    #[test]
    fn a_reset_after_no_fault_uses_what_the_last_one_found() {
        let Some(map) = PageMap::open().filter(|m| m.scan) else {
            return;
        };
        let len = 64 * PAGE;
        let base = anonymous_mapping(len).expect("a mapping");
        // SAFETY: the mapping is `len` bytes, readable and writable, and
        // only this test uses it.
        let cells = unsafe { std::slice::from_raw_parts(base as *const UnsafeCell<u8>, len) };
        // SAFETY: as above.
        let m = unsafe { GuestMemory::serialized(cells) };
        let mut known = Populated::default();
        // Allocated before the resets: an allocation between them may take
        // a fault of its own.
        let page5: Vec<std::ops::Range<usize>> = std::iter::once((5 * PAGE)..(6 * PAGE)).collect();
        let empty = Image::default();
        // Reading every page maps the zero page at each, so that the reads
        // below take no fault; those pages stay unpopulated.
        assert!(m.all(0, len as u32, 0));
        assert!(m.write(5 * PAGE as u32 + 7, &[1]));
        m.reset(&empty, len, Some(&map), &mut known);
        assert_eq!(known.scans, 1);
        assert_eq!(known.covered, 0..len);
        assert_eq!(known.runs, page5);
        assert!(m.all(0, len as u32, 0));
        // Page 5 is populated: writing it again takes no fault.
        assert!(m.write(5 * PAGE as u32 + 9, &[2]));
        assert_eq!(known.after, Faults::now(), "a fault between the resets");
        m.reset(&empty, len, Some(&map), &mut known);
        assert_eq!(known.scans, 1, "the second reset scanned");
        assert!(m.all(0, len as u32, 0));
        assert_eq!(known.runs, page5);
        // Page 9 is not: the write is a fault, and the reset scans again.
        assert!(m.write(9 * PAGE as u32, &[3]));
        assert_ne!(known.after, Faults::now());
        m.reset(&empty, len, Some(&map), &mut known);
        assert_eq!(known.scans, 2);
        assert!(m.all(0, len as u32, 0));
        assert_eq!(known.runs, [5 * PAGE..6 * PAGE, 9 * PAGE..10 * PAGE]);
        // SAFETY: the mapping made above, no longer used.
        assert_eq!(unsafe { libc::munmap(base, len) }, 0);
    }
}
