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
        *self = MemorySpan::of(memory);
        debug_assert!(std::ptr::eq(self.base, memory.data().as_ptr()));
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
    /// untouched), and reading a block costs less than writing it.
    pub fn reset(&self, image: &[u8], len: usize) {
        const BLOCK: usize = 4096;
        let len = len.min(self.data.len());
        // SAFETY: the `serialized` contract; the range is inside the memory.
        let mem = unsafe { std::slice::from_raw_parts_mut(self.data.as_ptr() as *mut u8, len) };
        let head = image.len().min(len);
        mem[..head].copy_from_slice(&image[..head]);
        for block in mem[head..].chunks_mut(BLOCK) {
            if !is_zero(block) {
                block.fill(0);
            }
        }
    }

    /// A copy of the memory up to its last non-zero byte among the first
    /// `len` bytes.
    pub fn image(&self, len: usize) -> Vec<u8> {
        let len = len.min(self.data.len());
        // SAFETY: the `serialized` contract; the range is inside the memory.
        let mem = unsafe { std::slice::from_raw_parts(self.data.as_ptr() as *const u8, len) };
        let end = mem.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        mem[..end].to_vec()
    }
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
        assert_eq!(m.image(16), b"\0\0hi\0x");
        m.reset(b"ab", 100);
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
        m.reset(&[1, 2], cells.len());
        assert_eq!(m.read(0, 2).unwrap(), [1, 2]);
        assert!(m.all(2, cells.len() as u32 - 2, 0));
        assert_eq!(m.image(cells.len()), [1, 2]);
    }
}
