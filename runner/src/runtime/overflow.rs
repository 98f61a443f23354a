//! Telling a stack overflow from other traps.
//!
//! wasm32 C code keeps its stack frames in linear memory, below the
//! `__stack_pointer` global, which each thread's instance has its own copy
//! of. The main thread's stack is placed by wasm-ld: after the static data
//! (the default) it runs from the end of the data up to the global's initial
//! value; first (`--stack-first`) it runs from 0 up. A thread's stack is a
//! block wasi-libc's `pthread_create` allocates, of the size of its
//! attributes (`pthread_attr_setstacksize`) or the default, which is the main
//! thread's stack size (`-z stack-size`). Nothing checks the stack pointer
//! against those bounds: an overflowing frame lands below them — in the data
//! or the heap, silently, or past address 0, where the stack pointer wraps
//! and the access traps out of bounds.
//!
//! After a trap (or a memory-checker error) the runtime reads the stack
//! pointer of the thread's instance ([`Regs`]); [`StackLayout::overflow`]
//! compares it with the thread's bounds: the main thread's from the module
//! (the stack pointer's initial value, the end of the data its start
//! function initialises), a thread's from its `struct pthread` (found in its
//! TLS block through the pointer to itself it starts with, its `stack` and
//! `stack_size` fields recognised by their relation to `map_base` and
//! `map_size`, musl's layout). Limits: an overflow that corrupted memory but
//! trapped only after the frame was popped is not seen; a thread whose
//! `struct pthread` is not found is known to have overflowed only when its
//! stack pointer wrapped below 0.

use crate::model::Tid;
use wasmparser::{Name, Operator, Parser, Payload, TypeRef};

/// The trapping thread's registers, read from its instance after the trap.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Regs {
    pub tid: Tid,
    /// `__stack_pointer`.
    pub sp: u32,
    /// `__tls_base`, when the module has one.
    pub tls: Option<u32>,
}

/// What the module says about its stacks.
#[derive(Debug, Clone, Default)]
pub(crate) struct StackLayout {
    /// The index of `__tls_base`.
    pub tls_global: Option<u32>,
    /// The main thread's initial stack pointer (the top of its stack).
    pub main_top: Option<u32>,
    /// The end of the static data the start function initialises.
    pub data_end: Option<u32>,
}

/// A stack overflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Overflow {
    pub tid: Tid,
    /// The stack pointer.
    pub sp: u32,
    /// The stack's lowest address, and its size, when known.
    pub bottom: Option<(u32, u32)>,
    /// The main thread's stack size, when known.
    pub main_size: Option<u32>,
}

impl StackLayout {
    /// Reads the layout from the original module. Never fails: what it
    /// cannot find stays `None`.
    pub fn parse(module: &[u8]) -> StackLayout {
        let mut out = StackLayout::default();
        let mut sp_global = None;
        let mut imported_globals = 0u32;
        let mut imported_funcs = 0u32;
        let mut global_inits: Vec<Option<u32>> = Vec::new();
        let mut start = None;
        let mut func_no = 0u32;
        let mut data_end: Option<u32> = None;
        let mut bump = |end: u32| data_end = Some(data_end.map_or(end, |d: u32| d.max(end)));
        for payload in Parser::new(0).parse_all(module) {
            let Ok(payload) = payload else { break };
            match payload {
                Payload::ImportSection(r) => {
                    for imp in r.into_imports().flatten() {
                        match imp.ty {
                            TypeRef::Global(_) => imported_globals += 1,
                            TypeRef::Func(_) | TypeRef::FuncExact(_) => imported_funcs += 1,
                            _ => {}
                        }
                    }
                }
                Payload::GlobalSection(r) => {
                    for g in r.into_iter().flatten() {
                        let mut ops = g.init_expr.get_operators_reader();
                        global_inits.push(match ops.read() {
                            Ok(Operator::I32Const { value }) => Some(value as u32),
                            _ => None,
                        });
                    }
                }
                Payload::StartSection { func, .. } => start = Some(func),
                Payload::DataSection(r) => {
                    for d in r.into_iter().flatten() {
                        if let wasmparser::DataKind::Active { offset_expr, .. } = d.kind {
                            if let Ok(Operator::I32Const { value }) =
                                offset_expr.get_operators_reader().read()
                            {
                                bump((value as u32).saturating_add(d.data.len() as u32));
                            }
                        }
                    }
                }
                Payload::CodeSectionEntry(body) => {
                    let index = imported_funcs + func_no;
                    func_no += 1;
                    if Some(index) != start {
                        continue;
                    }
                    // wasm-ld's `__wasm_init_memory`: `i32.const dest;
                    // i32.const offset|value; i32.const len; memory.init|fill`.
                    let Ok(ops) = body.get_operators_reader() else {
                        continue;
                    };
                    let mut consts: [Option<u32>; 3] = [None; 3];
                    for op in ops.into_iter().flatten() {
                        match op {
                            Operator::I32Const { value } => {
                                consts = [consts[1], consts[2], Some(value as u32)];
                                continue;
                            }
                            Operator::MemoryInit { .. } | Operator::MemoryFill { .. } => {
                                if let [Some(dest), Some(_), Some(len)] = consts {
                                    bump(dest.saturating_add(len));
                                }
                            }
                            _ => {}
                        }
                        consts = [None; 3];
                    }
                }
                Payload::CustomSection(c) if c.name() == "name" => {
                    let wasmparser::KnownCustom::Name(r) = c.as_known() else {
                        continue;
                    };
                    for n in r.into_iter().flatten() {
                        if let Name::Global(map) = n {
                            for naming in map.into_iter().flatten() {
                                match naming.name {
                                    "__stack_pointer" => sp_global = Some(naming.index),
                                    "__tls_base" => out.tls_global = Some(naming.index),
                                    _ => {}
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        out.data_end = data_end;
        out.main_top = sp_global
            .and_then(|g| g.checked_sub(imported_globals))
            .and_then(|g| global_inits.get(g as usize).copied().flatten());
        out
    }

    /// The main thread's stack: its lowest address and its size.
    fn main_stack(&self) -> Option<(u32, u32)> {
        let top = self.main_top?;
        // After the data (wasm-ld's default), 16-aligned; else first, from 0.
        let bottom = match self.data_end {
            Some(end) if end <= top => end.checked_add(15)? & !15,
            _ => 0,
        };
        Some((bottom, top - bottom.min(top)))
    }

    /// Whether the thread of `regs` overflowed its stack: its stack pointer
    /// is below the stack's bottom, or wrapped below 0. `read` reads a
    /// 32-bit word of guest memory.
    pub fn overflow(&self, regs: Regs, read: impl Fn(u32) -> Option<u32>) -> Option<Overflow> {
        let main = self.main_stack();
        let bottom = if regs.tid == 0 {
            main
        } else {
            regs.tls.and_then(|tls| thread_stack(tls, &read))
        };
        // Addresses are below 2 GiB (the memory is at most 4 GiB but heddle
        // caps it far lower): a stack pointer that went below 0 is negative.
        let sp = regs.sp as i32;
        let over = match bottom {
            Some((low, _)) => sp < low as i32,
            None => sp < 0,
        };
        over.then_some(Overflow {
            tid: regs.tid,
            sp: regs.sp,
            bottom,
            main_size: main.map(|(_, size)| size),
        })
    }
}

/// A thread's stack from its `struct pthread`: `(lowest address, size)`.
/// The struct is wasi-libc's TLS variable `__wasilibc_pthread_self`, in the
/// thread's TLS block; its first field points to itself. Its `map_base`,
/// `map_size`, `stack` and `stack_size` follow each other (musl's layout):
/// the stack lies in the block `pthread_create` allocated. A stack the
/// program gave (`pthread_attr_setstack`) is not in such a block, and not
/// found.
fn thread_stack(tls: u32, read: &impl Fn(u32) -> Option<u32>) -> Option<(u32, u32)> {
    const TLS_SCAN: u32 = 1024;
    const STRUCT_SCAN: u32 = 256;
    const SLACK: u32 = 64;
    let this = (0..TLS_SCAN / 4)
        .map(|k| tls.wrapping_add(4 * k))
        .find(|&p| p != 0 && read(p) == Some(p))?;
    (0..STRUCT_SCAN / 4).find_map(|k| {
        let at = this.checked_add(4 * k)?;
        let (map, map_size) = (read(at)?, read(at.checked_add(4)?)?);
        let (stack, size) = (read(at.checked_add(8)?)?, read(at.checked_add(12)?)?);
        let low = stack.checked_sub(size)?;
        let end = map.checked_add(map_size)?;
        // wasi-libc's `stack_size` may reach a few bytes below the block
        // (it counts from the unaligned top).
        (map != 0 && size != 0 && stack > map && stack <= end && size <= map_size).then_some(())?;
        (low.saturating_add(SLACK) >= map).then_some((low, size))
    })
}

/// `65536` → `64 KiB`; otherwise the bytes, with the KiB they about are.
pub(crate) fn size_text(n: u32) -> String {
    if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else if n >= 1024 {
        format!("{n} bytes (about {} KiB)", (n + 512) / 1024)
    } else {
        format!("{n} bytes")
    }
}

impl Overflow {
    /// What went wrong and how to give the thread more stack, for a trap's
    /// message. `what` is what the run saw (the wasm trap or the memory
    /// error).
    pub fn message(&self, what: &str) -> String {
        let who = if self.tid == 0 {
            "the main thread".to_string()
        } else {
            format!("thread {}", self.tid)
        };
        let sp = self.sp as i32;
        let at = if sp < 0 {
            format!("{sp}, below address 0")
        } else {
            format!("{:#x}", self.sp)
        };
        let stack = match self.bottom {
            Some((low, size)) => format!("its stack of {} at {low:#x}", size_text(size)),
            None => "its stack".to_string(),
        };
        let link = "the link flag -Wl,-z,stack-size=N (`heddle cc … -Wl,-z,stack-size=N`, \
                    `heddle run --cflag -Wl,-z,stack-size=N`)";
        let attr = "pthread_attr_setstacksize (Rust: std::thread::Builder::stack_size)";
        let fix = match (self.tid, self.bottom, self.main_size) {
            (0, _, _) => {
                format!(
                    "Raise the main thread's stack size (also the threads' default) with {link}"
                )
            }
            (_, Some((_, size)), Some(main)) if size.abs_diff(main) <= 256 => format!(
                "Its size is the threads' default, the main thread's stack size: raise both \
                 with {link}, or give this thread its own with {attr}"
            ),
            (_, Some(_), Some(_)) => {
                format!("Its size was set with {attr}: give it more there")
            }
            _ => format!(
                "Give the thread more with {attr}, or raise the threads' default, the main \
                 thread's stack size, with {link}"
            ),
        };
        format!("stack overflow: {who} ran past the bottom of {stack} (its stack pointer is {at}). {fix} ({what})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn thread_stack_is_found_through_struct_pthread() {
        // TLS block at 0x1000, struct pthread at 0x1010 (self-pointer),
        // map_base/map_size/stack/stack_size at +44.
        let mut mem = BTreeMap::new();
        mem.insert(0x1000u32, 7u32);
        mem.insert(0x1010, 0x1010);
        mem.insert(0x1010 + 44, 0x2_0000);
        mem.insert(0x1010 + 48, 0x1_1000);
        mem.insert(0x1010 + 52, 0x3_0000);
        mem.insert(0x1010 + 56, 0x1_0000);
        let read = |a: u32| Some(*mem.get(&a).unwrap_or(&0));
        assert_eq!(thread_stack(0x1000, &read), Some((0x2_0000, 0x1_0000)));
        let layout = StackLayout {
            tls_global: Some(1),
            main_top: Some(0x1_1540),
            data_end: Some(0x153c),
        };
        let regs = |sp: u32| Regs {
            tid: 1,
            sp,
            tls: Some(0x1000),
        };
        assert_eq!(layout.overflow(regs(0x2_0100), read), None);
        let o = layout.overflow(regs(0x1_ff00), read).unwrap();
        assert_eq!(o.bottom, Some((0x2_0000, 0x1_0000)));
        assert_eq!(o.main_size, Some(0x1_0000));
        let m = o.message("wasm trap: out of bounds memory access");
        assert!(m.starts_with("stack overflow: thread 1 ran past the bottom of its stack of 64 KiB at 0x20000 (its stack pointer is 0x1ff00). Its size is the threads' default"), "{m}");
        assert!(
            m.ends_with("(wasm trap: out of bounds memory access)"),
            "{m}"
        );
        // Without its struct, a thread overflowed only if it wrapped.
        let none = |_| Some(0);
        assert_eq!(layout.overflow(regs(0x10), none), None);
        assert!(layout.overflow(regs(0xffff_fff0), none).is_some());
    }

    #[test]
    fn main_stack_follows_the_data_or_comes_first() {
        let mut layout = StackLayout {
            tls_global: None,
            main_top: Some(0x1_1540),
            data_end: Some(0x153c),
        };
        assert_eq!(layout.main_stack(), Some((0x1540, 0x1_0000)));
        let regs = |sp: u32| Regs {
            tid: 0,
            sp,
            tls: None,
        };
        assert!(layout.overflow(regs(0x1600), |_| None).is_none());
        let o = layout.overflow(regs(0x1000), |_| None).unwrap();
        let m = o.message("x");
        assert!(m.starts_with("stack overflow: the main thread ran past the bottom of its stack of 64 KiB at 0x1540 (its stack pointer is 0x1000). Raise the main thread's stack size (also the threads' default) with the link flag -Wl,-z,stack-size=N"), "{m}");
        assert!(layout
            .overflow(regs(-40i32 as u32), |_| None)
            .unwrap()
            .message("x")
            .contains("(its stack pointer is -40, below address 0)"));
        // Stack first: the data lies above the stack.
        layout.data_end = Some(0x2_0000);
        assert_eq!(layout.main_stack(), Some((0, 0x1_1540)));
        assert!(layout.overflow(regs(0x10), |_| None).is_none());
        assert_eq!(size_text(65532), "65532 bytes (about 64 KiB)");
        assert_eq!(StackLayout::parse(b"not wasm").main_top, None);
    }
}
