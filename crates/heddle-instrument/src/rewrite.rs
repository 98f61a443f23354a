//! The module rewriter.
//!
//! One pass over the original module, validating as it goes, re-encoding
//! every section with wasm-encoder's `reencode` support. The host imports of
//! [`RtImport`] are appended after the module's own function imports (so all
//! defined function indices shift by [`RtImport::COUNT`]), one mutable global
//! (the preemption budget) is appended, and a few exports are added. Function
//! bodies are rewritten as described in [`super`]. DWARF sections are dropped
//! (their offsets no longer match); the site table and offset map stand in.

use super::dwarf::{DebugInfo, Owner};
use super::fnptr;
use super::sites::{
    decides_nothing, inline_mutex_op, plain_decides_nothing, std_primitive_decides_nothing,
    unseen_library_atomic, FuncInfo, OffsetRun, Site, SiteKind, StdPrimitive, MUTEX_LOCK_WORD,
    MUTEX_TAKEN,
};
use super::stack::{AddrUse, FrameAnalysis};
use super::{Config, Filters};
use anyhow::{anyhow, bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use wasm_encoder::reencode::Reencode;
use wasm_encoder::{
    BlockType, CodeSection, EntityType, ExportKind, ExportSection, Function, GlobalSection,
    GlobalType, ImportSection, Instruction, Module, TypeSection, ValType,
};
use wasmparser::{
    ExternalKind, FuncValidatorAllocations, KnownCustom, Name, Operator, Parser, Payload, TypeRef,
    Validator, WasmFeatures,
};

use super::interface::HostType;
pub use super::interface::RtImport;

/// The wasm type of an interface type.
fn val_type(t: HostType) -> ValType {
    match t {
        HostType::I32 => ValType::I32,
        HostType::I64 => ValType::I64,
    }
}

/// The parameter and result types of a runtime import.
fn signature(imp: RtImport) -> (Vec<ValType>, Vec<ValType>) {
    (
        imp.params().iter().copied().map(val_type).collect(),
        imp.results().iter().copied().map(val_type).collect(),
    )
}

/// Export names added to the instrumented module.
pub const EXPORT_BUDGET: &str = "heddle_budget";
/// The skip counter (an `i32` global, per instance): while it is non-zero a
/// guarded yield point (a load, store, atomic or fence) decrements it instead
/// of calling `access`. The host grants skips only when it has nothing to do
/// at those yield points (see `runtime::state::RunState::solo_window`), and
/// reconciles the steps they stand for at the thread's next host call.
pub const EXPORT_SKIP: &str = "heddle_skip";
/// The exported shadow stack pointer (`__stack_pointer`), which each guest thread sets.
pub const EXPORT_SP: &str = "heddle_sp";
/// The exported function table, which the host reads for function-pointer calls.
pub const EXPORT_TABLE: &str = "heddle_table";
/// The module's own function table (table 0), whose indices are the
/// guest's function pointers: the host calls a signal delivery function
/// the guest names by pointer through it.
pub const EXPORT_FUNCS: &str = "heddle_funcs";
/// `heddle_thread_entry(tid, start_arg, budget)`, added when the module
/// exports `wasi_thread_start` and every global it resets is a number: puts
/// every mutable global (and the skip counter) back to the value it had
/// right after instantiation, which the host stores once per instance in
/// the [`SAVED_PREFIX`] globals, sets the budget global to `budget`, then
/// calls `wasi_thread_start(tid, start_arg)`. A reused instance then starts
/// a thread with one call instead of a host `Global::set` per global.
pub const EXPORT_ENTRY: &str = "heddle_thread_entry";
/// Prefix of the exports of the globals that keep each reset global's value
/// right after instantiation (`heddle_saved.7` for `heddle_global.7`).
pub const SAVED_PREFIX: &str = "heddle_saved.";

/// What the rewriter produced.
pub struct Output {
    /// The instrumented module.
    pub module: Vec<u8>,
    /// Its yield points, by site id.
    pub sites: Vec<Site>,
    /// The original module's functions.
    pub funcs: Vec<FuncInfo>,
    /// How many functions the original module imported.
    pub orig_imported_funcs: u32,
    /// Instrumented code offsets → original offsets.
    pub offset_map: Vec<OffsetRun>,
    /// Where the module's data starts in linear memory.
    pub data_start: u32,
    /// The index of the added thread entry ([`EXPORT_ENTRY`]), if any.
    pub entry_func: Option<u32>,
}

/// How an instruction is treated.
#[derive(Debug, Clone, Copy)]
enum Class {
    Load {
        atomic: bool,
        size: u32,
        offset: u64,
    },
    Store {
        atomic: bool,
        size: u32,
        offset: u64,
        val: ValType,
    },
    Rmw {
        size: u32,
        offset: u64,
        val: ValType,
    },
    Cmpxchg {
        size: u32,
        offset: u64,
        val: ValType,
    },
    /// v128 lane load/store: `[addr, v128] -> ...`.
    Lane {
        write: bool,
        size: u32,
        offset: u64,
    },
    Wait32 {
        offset: u64,
    },
    Wait64 {
        offset: u64,
    },
    Notify {
        offset: u64,
    },
    Fence,
    Copy,
    Fill,
}

fn classify(op: &Operator) -> Option<Class> {
    use Operator as O;
    let m = |memarg: &wasmparser::MemArg| (1u32 << memarg.max_align, memarg.offset, memarg.memory);
    macro_rules! mem0 {
        ($memarg:expr, $e:expr) => {{
            let (size, offset, memory) = m($memarg);
            if memory != 0 {
                return None;
            }
            let _ = size;
            let _ = offset;
            Some($e(size, offset))
        }};
    }
    match op {
        O::I32Load { memarg }
        | O::I64Load { memarg }
        | O::F32Load { memarg }
        | O::F64Load { memarg }
        | O::I32Load8S { memarg }
        | O::I32Load8U { memarg }
        | O::I32Load16S { memarg }
        | O::I32Load16U { memarg }
        | O::I64Load8S { memarg }
        | O::I64Load8U { memarg }
        | O::I64Load16S { memarg }
        | O::I64Load16U { memarg }
        | O::I64Load32S { memarg }
        | O::I64Load32U { memarg }
        | O::V128Load { memarg }
        | O::V128Load8x8S { memarg }
        | O::V128Load8x8U { memarg }
        | O::V128Load16x4S { memarg }
        | O::V128Load16x4U { memarg }
        | O::V128Load32x2S { memarg }
        | O::V128Load32x2U { memarg }
        | O::V128Load8Splat { memarg }
        | O::V128Load16Splat { memarg }
        | O::V128Load32Splat { memarg }
        | O::V128Load64Splat { memarg }
        | O::V128Load32Zero { memarg }
        | O::V128Load64Zero { memarg } => {
            mem0!(memarg, |size, offset| Class::Load {
                atomic: false,
                size,
                offset
            })
        }
        O::I32AtomicLoad { memarg }
        | O::I64AtomicLoad { memarg }
        | O::I32AtomicLoad8U { memarg }
        | O::I32AtomicLoad16U { memarg }
        | O::I64AtomicLoad8U { memarg }
        | O::I64AtomicLoad16U { memarg }
        | O::I64AtomicLoad32U { memarg } => {
            mem0!(memarg, |size, offset| Class::Load {
                atomic: true,
                size,
                offset
            })
        }
        O::I32Store { memarg } | O::I32Store8 { memarg } | O::I32Store16 { memarg } => {
            mem0!(memarg, |size, offset| Class::Store {
                atomic: false,
                size,
                offset,
                val: ValType::I32
            })
        }
        O::I64Store { memarg }
        | O::I64Store8 { memarg }
        | O::I64Store16 { memarg }
        | O::I64Store32 { memarg } => {
            mem0!(memarg, |size, offset| Class::Store {
                atomic: false,
                size,
                offset,
                val: ValType::I64
            })
        }
        O::F32Store { memarg } => {
            mem0!(memarg, |size, offset| Class::Store {
                atomic: false,
                size,
                offset,
                val: ValType::F32
            })
        }
        O::F64Store { memarg } => {
            mem0!(memarg, |size, offset| Class::Store {
                atomic: false,
                size,
                offset,
                val: ValType::F64
            })
        }
        O::V128Store { memarg } => {
            mem0!(memarg, |size, offset| Class::Store {
                atomic: false,
                size,
                offset,
                val: ValType::V128
            })
        }
        O::V128Load8Lane { memarg, .. }
        | O::V128Load16Lane { memarg, .. }
        | O::V128Load32Lane { memarg, .. }
        | O::V128Load64Lane { memarg, .. } => {
            mem0!(memarg, |size, offset| Class::Lane {
                write: false,
                size,
                offset
            })
        }
        O::V128Store8Lane { memarg, .. }
        | O::V128Store16Lane { memarg, .. }
        | O::V128Store32Lane { memarg, .. }
        | O::V128Store64Lane { memarg, .. } => {
            mem0!(memarg, |size, offset| Class::Lane {
                write: true,
                size,
                offset
            })
        }
        O::I32AtomicStore { memarg }
        | O::I32AtomicStore8 { memarg }
        | O::I32AtomicStore16 { memarg } => {
            mem0!(memarg, |size, offset| Class::Store {
                atomic: true,
                size,
                offset,
                val: ValType::I32
            })
        }
        O::I64AtomicStore { memarg }
        | O::I64AtomicStore8 { memarg }
        | O::I64AtomicStore16 { memarg }
        | O::I64AtomicStore32 { memarg } => {
            mem0!(memarg, |size, offset| Class::Store {
                atomic: true,
                size,
                offset,
                val: ValType::I64
            })
        }
        O::I32AtomicRmwAdd { memarg }
        | O::I32AtomicRmw8AddU { memarg }
        | O::I32AtomicRmw16AddU { memarg }
        | O::I32AtomicRmwSub { memarg }
        | O::I32AtomicRmw8SubU { memarg }
        | O::I32AtomicRmw16SubU { memarg }
        | O::I32AtomicRmwAnd { memarg }
        | O::I32AtomicRmw8AndU { memarg }
        | O::I32AtomicRmw16AndU { memarg }
        | O::I32AtomicRmwOr { memarg }
        | O::I32AtomicRmw8OrU { memarg }
        | O::I32AtomicRmw16OrU { memarg }
        | O::I32AtomicRmwXor { memarg }
        | O::I32AtomicRmw8XorU { memarg }
        | O::I32AtomicRmw16XorU { memarg }
        | O::I32AtomicRmwXchg { memarg }
        | O::I32AtomicRmw8XchgU { memarg }
        | O::I32AtomicRmw16XchgU { memarg } => {
            mem0!(memarg, |size, offset| Class::Rmw {
                size,
                offset,
                val: ValType::I32
            })
        }
        O::I64AtomicRmwAdd { memarg }
        | O::I64AtomicRmw8AddU { memarg }
        | O::I64AtomicRmw16AddU { memarg }
        | O::I64AtomicRmw32AddU { memarg }
        | O::I64AtomicRmwSub { memarg }
        | O::I64AtomicRmw8SubU { memarg }
        | O::I64AtomicRmw16SubU { memarg }
        | O::I64AtomicRmw32SubU { memarg }
        | O::I64AtomicRmwAnd { memarg }
        | O::I64AtomicRmw8AndU { memarg }
        | O::I64AtomicRmw16AndU { memarg }
        | O::I64AtomicRmw32AndU { memarg }
        | O::I64AtomicRmwOr { memarg }
        | O::I64AtomicRmw8OrU { memarg }
        | O::I64AtomicRmw16OrU { memarg }
        | O::I64AtomicRmw32OrU { memarg }
        | O::I64AtomicRmwXor { memarg }
        | O::I64AtomicRmw8XorU { memarg }
        | O::I64AtomicRmw16XorU { memarg }
        | O::I64AtomicRmw32XorU { memarg }
        | O::I64AtomicRmwXchg { memarg }
        | O::I64AtomicRmw8XchgU { memarg }
        | O::I64AtomicRmw16XchgU { memarg }
        | O::I64AtomicRmw32XchgU { memarg } => {
            mem0!(memarg, |size, offset| Class::Rmw {
                size,
                offset,
                val: ValType::I64
            })
        }
        O::I32AtomicRmwCmpxchg { memarg }
        | O::I32AtomicRmw8CmpxchgU { memarg }
        | O::I32AtomicRmw16CmpxchgU { memarg } => {
            mem0!(memarg, |size, offset| Class::Cmpxchg {
                size,
                offset,
                val: ValType::I32
            })
        }
        O::I64AtomicRmwCmpxchg { memarg }
        | O::I64AtomicRmw8CmpxchgU { memarg }
        | O::I64AtomicRmw16CmpxchgU { memarg }
        | O::I64AtomicRmw32CmpxchgU { memarg } => {
            mem0!(memarg, |size, offset| Class::Cmpxchg {
                size,
                offset,
                val: ValType::I64
            })
        }
        O::MemoryAtomicWait32 { memarg } => mem0!(memarg, |_s, offset| Class::Wait32 { offset }),
        O::MemoryAtomicWait64 { memarg } => mem0!(memarg, |_s, offset| Class::Wait64 { offset }),
        O::MemoryAtomicNotify { memarg } => mem0!(memarg, |_s, offset| Class::Notify { offset }),
        O::AtomicFence => Some(Class::Fence),
        O::MemoryCopy {
            dst_mem: 0,
            src_mem: 0,
        } => Some(Class::Copy),
        O::MemoryFill { mem: 0 } => Some(Class::Fill),
        _ => None,
    }
}

impl Class {
    fn is_sync(self) -> bool {
        match self {
            Class::Load { atomic, .. } | Class::Store { atomic, .. } => atomic,
            Class::Rmw { .. } | Class::Cmpxchg { .. } => true,
            Class::Wait32 { .. } | Class::Wait64 { .. } | Class::Notify { .. } | Class::Fence => {
                true
            }
            Class::Lane { .. } | Class::Copy | Class::Fill => false,
        }
    }

    fn addr_use(self) -> Option<AddrUse> {
        Some(match self {
            Class::Load { .. } => AddrUse::Load,
            Class::Store { .. } | Class::Rmw { .. } | Class::Lane { .. } => {
                AddrUse::Store { values: 1 }
            }
            Class::Cmpxchg { .. } => AddrUse::Store { values: 2 },
            Class::Copy => AddrUse::Copy,
            Class::Fill => AddrUse::Fill,
            Class::Wait32 { .. } | Class::Wait64 { .. } => AddrUse::Store { values: 2 },
            Class::Notify { .. } => AddrUse::Store { values: 1 },
            Class::Fence => return None,
        })
    }

    fn site_shape(self) -> (SiteKind, bool, u32, u64) {
        match self {
            Class::Load {
                atomic,
                size,
                offset,
            } => (SiteKind::Read, atomic, size, offset),
            Class::Store {
                atomic,
                size,
                offset,
                ..
            } => (SiteKind::Write, atomic, size, offset),
            Class::Rmw { size, offset, .. } => (SiteKind::Rmw, true, size, offset),
            Class::Cmpxchg { size, offset, .. } => (SiteKind::Cmpxchg, true, size, offset),
            Class::Lane {
                write,
                size,
                offset,
            } => (
                if write {
                    SiteKind::Write
                } else {
                    SiteKind::Read
                },
                false,
                size,
                offset,
            ),
            Class::Wait32 { offset } => (SiteKind::Wait, true, 4, offset),
            Class::Wait64 { offset } => (SiteKind::Wait, true, 8, offset),
            Class::Notify { offset } => (SiteKind::Notify, true, 4, offset),
            Class::Fence => (SiteKind::Fence, true, 0, 0),
            Class::Copy => (SiteKind::Copy, false, 0, 0),
            Class::Fill => (SiteKind::Fill, false, 0, 0),
        }
    }
}

/// Function-index remapping: original defined functions move up by the
/// number of added imports.
struct Remap {
    imported_funcs: u32,
}

impl Reencode for Remap {
    type Error = std::convert::Infallible;
    fn function_index(
        &mut self,
        func: u32,
    ) -> std::result::Result<u32, wasm_encoder::reencode::Error<Self::Error>> {
        Ok(if func < self.imported_funcs {
            func
        } else {
            func + RtImport::COUNT
        })
    }
}

fn reenc<T>(
    r: std::result::Result<T, wasm_encoder::reencode::Error<std::convert::Infallible>>,
) -> Result<T> {
    r.map_err(|e| anyhow!("re-encoding failed: {e}"))
}

/// Scratch locals appended to each rewritten function.
#[derive(Clone, Copy)]
struct Scratch {
    a: u32, // i32: address
    b: u32, // i32
    c: u32, // i32
    d: u32, // i64
    e: u32, // i64
    f: u32, // f32
    g: u32, // f64
    h: u32, // v128
    l: u32, // i32: the preemption budget, when kept in a local
    s: u32, // i32: the skip counter, when kept in a local
    r: u32, // i32: a call's result
    q: u32, // i32: a fourth call argument
}

impl Scratch {
    fn val(&self, t: ValType, second: bool) -> u32 {
        match (t, second) {
            (ValType::I32, false) => self.b,
            (ValType::I32, true) => self.c,
            (ValType::I64, false) => self.d,
            (ValType::I64, true) => self.e,
            (ValType::F32, _) => self.f,
            (ValType::F64, _) => self.g,
            _ => self.h,
        }
    }
}

struct ModuleFacts {
    imported_funcs: u32,
    /// Original function import names, by index.
    import_names: Vec<String>,
    func_names: BTreeMap<u32, String>,
    /// Exported functions by export name.
    func_exports: BTreeMap<String, u32>,
    sp_global: Option<u32>,
    start: Option<u32>,
    num_types: u32,
    num_globals: u32,
    /// Indices of the mutable globals the module defines.
    mutable_globals: Vec<u32>,
    /// Their types, in the same order.
    mutable_types: Vec<wasmparser::ValType>,
    has_table: bool,
    imports_thread_exit: bool,
    /// Parameter and result types of each type index.
    types: Vec<(Vec<wasmparser::ValType>, Vec<wasmparser::ValType>)>,
    /// Type index of each function (imported, then defined).
    func_types: Vec<u32>,
    /// `call_indirect` type index on table 0 -> where its region starts in
    /// the added table (see [`super::fnptr`]).
    adapted: BTreeMap<u32, u32>,
    /// The added table's index and the original table's size.
    adapted_table: u32,
    table_size: u32,
    /// The region `call_catching` (thread start routines, `(i32) -> i32`)
    /// uses, when there is one.
    start_base: Option<u32>,
}

fn scan(bytes: &[u8]) -> Result<ModuleFacts> {
    let mut f = ModuleFacts {
        imported_funcs: 0,
        import_names: Vec::new(),
        func_names: BTreeMap::new(),
        func_exports: BTreeMap::new(),
        sp_global: None,
        start: None,
        num_types: 0,
        num_globals: 0,
        mutable_globals: Vec::new(),
        mutable_types: Vec::new(),
        has_table: false,
        imports_thread_exit: false,
        types: Vec::new(),
        func_types: Vec::new(),
        adapted: BTreeMap::new(),
        adapted_table: 0,
        table_size: 0,
        start_base: None,
    };
    for p in Parser::new(0).parse_all(bytes) {
        match p? {
            Payload::TypeSection(r) => {
                f.num_types = r.count();
                for ty in r.into_iter_err_on_gc_types() {
                    let ty = ty?;
                    f.types.push((ty.params().to_vec(), ty.results().to_vec()));
                }
            }
            Payload::FunctionSection(r) => {
                for t in r {
                    f.func_types.push(t?);
                }
            }
            Payload::ImportSection(r) => {
                for imp in r.into_imports() {
                    let imp = imp?;
                    match imp.ty {
                        TypeRef::Func(t) | TypeRef::FuncExact(t) => {
                            f.func_types.push(t);
                            f.imported_funcs += 1;
                            f.import_names.push(format!("{}.{}", imp.module, imp.name));
                            if imp.module == super::SdkImport::MODULE
                                && imp.name == super::SdkImport::ThreadExit.name()
                            {
                                f.imports_thread_exit = true;
                            }
                            if imp.module == RtImport::MODULE {
                                bail!(
                                    "module is already instrumented (it imports {}.{})",
                                    imp.module,
                                    imp.name
                                );
                            }
                        }
                        TypeRef::Global(_) => f.num_globals += 1,
                        TypeRef::Table(_) => f.has_table = true,
                        _ => {}
                    }
                }
            }
            Payload::TableSection(r) => f.has_table |= r.count() > 0,
            Payload::GlobalSection(r) => {
                for g in r {
                    let ty = g?.ty;
                    if ty.mutable {
                        f.mutable_globals.push(f.num_globals);
                        f.mutable_types.push(ty.content_type);
                    }
                    f.num_globals += 1;
                }
            }
            Payload::StartSection { func, .. } => f.start = Some(func),
            Payload::ExportSection(r) => {
                for e in r {
                    let e = e?;
                    if e.kind == wasmparser::ExternalKind::Func {
                        f.func_exports.insert(e.name.to_string(), e.index);
                    }
                }
            }
            Payload::CustomSection(c) => {
                if let KnownCustom::Name(names) = c.as_known() {
                    for n in names.into_iter().flatten() {
                        match n {
                            Name::Function(map) => {
                                for naming in map.into_iter().flatten() {
                                    f.func_names.insert(naming.index, naming.name.to_string());
                                }
                            }
                            Name::Global(map) => {
                                for naming in map.into_iter().flatten() {
                                    if naming.name == "__stack_pointer" {
                                        f.sp_global = Some(naming.index);
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(f)
}

/// The allocator entry points the memory checker intercepts.
pub const ALLOC_FUNCS: &[&str] = &[
    "malloc",
    "calloc",
    "realloc",
    "free",
    "aligned_alloc",
    "posix_memalign",
    "memalign",
    "valloc",
];

/// If calling function `f` is an allocator entry point: the site kind, the
/// number of (i32) parameters and whether it returns an i32.
fn alloc_call(facts: &ModuleFacts, f: u32) -> Option<(SiteKind, usize, bool)> {
    let name = facts.func_names.get(&f)?.as_str();
    if !ALLOC_FUNCS.contains(&name) {
        return None;
    }
    let (params, results) = facts
        .types
        .get(*facts.func_types.get(f as usize)? as usize)?;
    let i32s = |v: &[wasmparser::ValType]| v.iter().all(|t| *t == wasmparser::ValType::I32);
    if !i32s(params) || !i32s(results) || params.len() > 3 || results.len() > 1 {
        return None;
    }
    let kind = if name == "free" {
        SiteKind::Free
    } else {
        SiteKind::Alloc
    };
    Some((kind, params.len(), results.len() == 1))
}

/// If calling function `f` is a lock operation heddle tracks: the site kind,
/// which argument is the lock, the number of (i32) parameters, and whether
/// it returns an i32.
fn lock_call(facts: &ModuleFacts, f: u32) -> Option<(SiteKind, usize, usize, bool)> {
    let name = facts.func_names.get(&f)?;
    let name = name.trim_start_matches('_');
    let (kind, arg) = match name {
        "pthread_mutex_lock"
        | "pthread_mutex_trylock"
        | "pthread_mutex_timedlock"
        | "pthread_rwlock_rdlock"
        | "pthread_rwlock_wrlock"
        | "pthread_rwlock_tryrdlock"
        | "pthread_rwlock_trywrlock"
        | "pthread_rwlock_timedrdlock"
        | "pthread_rwlock_timedwrlock"
        | "pthread_spin_lock"
        | "pthread_spin_trylock" => (SiteKind::Lock, 0),
        "pthread_mutex_unlock" | "pthread_rwlock_unlock" | "pthread_spin_unlock" => {
            (SiteKind::Unlock, 0)
        }
        "pthread_cond_wait" | "pthread_cond_timedwait" => (SiteKind::CondWait, 1),
        "pthread_create" => (SiteKind::ThreadCreate, 0),
        "pthread_join" => (SiteKind::ThreadJoin, 0),
        "pthread_barrier_wait" => (SiteKind::Barrier, 0),
        "pthread_once" => (SiteKind::Once, 0),
        _ => return None,
    };
    let (params, results) = facts
        .types
        .get(*facts.func_types.get(f as usize)? as usize)?;
    let all_i32 = params.iter().all(|t| *t == wasmparser::ValType::I32);
    if !all_i32 || params.len() > 4 || params.len() <= arg || results.len() > 1 {
        return None;
    }
    let has_result = results.first() == Some(&wasmparser::ValType::I32);
    if results.len() == 1 && !has_result {
        return None;
    }
    Some((kind, arg, params.len(), has_result))
}

use super::dwarf::demangle;

/// Per-function emission context.
struct Emitter<'a> {
    func: Function,
    scratch: Scratch,
    budget_global: u32,
    imported_funcs: u32,
    remap: &'a mut Remap,
    /// (relative offset in new body, original module offset, fixed).
    runs: Vec<(u32, u32, bool)>,
    /// Offsets in the new body of the `if`s that guard a cold path (a host
    /// call the fast path does not take), for the branch-hint section.
    cold_ifs: Vec<u32>,
    /// The local that mirrors the budget global in this function, if any:
    /// see [`Emitter::budget_point`].
    budget_local: Option<u32>,
    /// The local that mirrors the skip counter in this function, if any:
    /// see [`Emitter::guarded_yield_point`].
    skip_local: Option<u32>,
    /// Rewrites legacy exception handling as the operators pass
    /// ([`super::eh`]), in a function that has it.
    eh: Option<super::eh::FuncTranslator>,
}

impl Emitter<'_> {
    fn rt(&self, i: RtImport) -> u32 {
        self.imported_funcs + i as u32
    }

    fn ins(&mut self, i: Instruction) {
        let call = matches!(
            i,
            Instruction::Call(_) | Instruction::CallIndirect { .. } | Instruction::CallRef(_)
        );
        let tail_call = matches!(
            i,
            Instruction::ReturnCall(_)
                | Instruction::ReturnCallIndirect { .. }
                | Instruction::ReturnCallRef(_)
        );
        if call || tail_call {
            self.store_budget();
        }
        self.func.instruction(&i);
        if call {
            self.reload_budget();
            self.reload_skip();
        }
    }

    /// After a call: the host may have granted skips or taken them back
    /// (at any host call, the callee's included).
    fn reload_skip(&mut self) {
        if let Some(l) = self.skip_local {
            self.func
                .instruction(&Instruction::GlobalGet(self.budget_global + 1));
            self.func.instruction(&Instruction::LocalSet(l));
        }
    }

    /// Before a call or a way out of the function: the callee's budget
    /// points, or the caller's after the return, continue from the global.
    fn store_budget(&mut self) {
        if let Some(l) = self.budget_local {
            self.func.instruction(&Instruction::LocalGet(l));
            self.func
                .instruction(&Instruction::GlobalSet(self.budget_global));
        }
    }

    /// After a call: the callee (its own budget points, or a host hook that
    /// starts a new slice) may have changed the budget global.
    fn reload_budget(&mut self) {
        if let Some(l) = self.budget_local {
            self.func
                .instruction(&Instruction::GlobalGet(self.budget_global));
            self.func.instruction(&Instruction::LocalSet(l));
        }
    }

    /// An `if` whose body is a cold path.
    fn cold_if(&mut self) {
        self.cold_ifs.push(self.pos());
        self.ins(Instruction::If(BlockType::Empty));
    }

    fn pos(&self) -> u32 {
        self.func.byte_len() as u32
    }

    /// A yield point the host may let the guest skip: `global.get skip;
    /// if (skip == 0) { yield_point } else { skip -= 1 }`.
    ///
    /// With a skip local (see [`Emitter::skip_local`]) the counter is read
    /// from the local, which is loaded from the global at function entry
    /// and after every call (the only places the host changes the global),
    /// and every decrement is written through to the global, so that the
    /// global is exact wherever the guest may trap. The test and the
    /// decrement are then a register, not a load of the global and a
    /// read-modify-write of it.
    fn guarded_yield_point(&mut self, site: u32, addr_local: Option<u32>) {
        let g = self.budget_global + 1;
        match self.skip_local {
            Some(l) => self.ins(Instruction::LocalGet(l)),
            None => self.ins(Instruction::GlobalGet(g)),
        }
        self.ins(Instruction::I32Eqz);
        self.cold_if();
        self.yield_point(site, addr_local);
        self.ins(Instruction::Else);
        self.decremented(self.skip_local, g);
        self.ins(Instruction::GlobalSet(g));
        self.ins(Instruction::End);
    }

    /// Pushes a counter minus one: the counter is `local` when there is
    /// one (which then holds the new value too), else global `g` (left as
    /// it was).
    fn decremented(&mut self, local: Option<u32>, g: u32) {
        match local {
            Some(l) => self.ins(Instruction::LocalGet(l)),
            None => self.ins(Instruction::GlobalGet(g)),
        }
        self.ins(Instruction::I32Const(1));
        self.ins(Instruction::I32Sub);
        if let Some(l) = local {
            self.ins(Instruction::LocalTee(l));
        }
    }

    /// `i32.const site; <addr>; call access; if call switch end`.
    fn yield_point(&mut self, site: u32, addr_local: Option<u32>) {
        self.ins(Instruction::I32Const(site as i32));
        match addr_local {
            Some(l) => self.ins(Instruction::LocalGet(l)),
            None => self.ins(Instruction::I32Const(0)),
        }
        self.ins(Instruction::Call(self.rt(RtImport::Access)));
        self.switch_if();
    }

    fn switch_if(&mut self) {
        self.cold_if();
        self.call_for_budget(RtImport::Switch);
        self.ins(Instruction::End);
    }

    /// Calls the host function `f`, which starts a new slice and returns
    /// its budget: the budget goes to the global (and the local mirror).
    /// Setting the global here costs the host nothing.
    fn call_for_budget(&mut self, f: RtImport) {
        self.ins(Instruction::Call(self.rt(f)));
        self.func
            .instruction(&Instruction::GlobalSet(self.budget_global));
        self.reload_budget();
    }

    /// Decrement the budget; call `budget(site)` when it reaches zero.
    ///
    /// With a budget local (see [`Emitter::budget_local`]) the decrement
    /// touches only the local, so a loop's budget is a register and not a
    /// load that waits on the previous iteration's store. The global stays
    /// the budget's home between functions and towards the host: the local
    /// is loaded from it at function entry and after every call, and
    /// written back before every call and every way out of the function.
    /// (The host only ever writes the global, from within a call.)
    fn budget_point(&mut self, site: u32) {
        let g = self.budget_global;
        self.decremented(self.budget_local, g);
        if self.budget_local.is_none() {
            self.ins(Instruction::GlobalSet(g));
            self.ins(Instruction::GlobalGet(g));
        }
        self.ins(Instruction::I32Eqz);
        self.cold_if();
        self.ins(Instruction::I32Const(site as i32));
        self.call_for_budget(RtImport::Budget);
        self.ins(Instruction::End);
    }

    fn original(&mut self, op: Operator) -> Result<()> {
        if let Some(tr) = self.eh.as_mut() {
            let func = &mut self.func;
            if tr.op(&op, &mut |i| {
                func.instruction(&i);
            })? {
                return Ok(());
            }
        }
        let i = reenc(self.remap.instruction(op))?;
        self.ins(i);
        Ok(())
    }

    /// In place of a call to `pthread_mutex_lock` or `pthread_mutex_unlock`
    /// (`call`, at original offset `orig`) on the mutex in local `m`: the
    /// C library's fast path, done here, else the call; leaves the `i32`
    /// result. See [`inline_mutex_op`] for what it does, and
    /// [`inline_mutex_applies`] for the test, which this emits.
    fn inline_mutex(&mut self, kind: SiteKind, m: u32, orig: u32, call: &Operator) -> Result<()> {
        let word = |offset: u32| wasm_encoder::MemArg {
            offset: offset as u64,
            align: 2,
            memory_index: 0,
        };
        let result = BlockType::Result(ValType::I32);
        let fallback = |em: &mut Self| -> Result<()> {
            em.ins(Instruction::LocalGet(m));
            em.mark(orig, false);
            em.original(call.clone())?;
            em.mark(orig, true);
            Ok(())
        };
        // A default mutex: `type & 15 == 0`.
        self.ins(Instruction::LocalGet(m));
        self.ins(Instruction::I32Load(word(0)));
        self.ins(Instruction::I32Const(15));
        self.ins(Instruction::I32And);
        self.ins(Instruction::I32Eqz);
        self.ins(Instruction::If(result));
        if kind == SiteKind::Lock {
            // Taken when the compare-exchange finds the word free.
            self.ins(Instruction::LocalGet(m));
            self.ins(Instruction::I32Const(0));
            self.ins(Instruction::I32Const(MUTEX_TAKEN));
            self.ins(Instruction::I32AtomicRmwCmpxchg(word(MUTEX_LOCK_WORD)));
            self.ins(Instruction::If(result));
            fallback(self)?;
            self.ins(Instruction::Else);
            self.ins(Instruction::I32Const(0));
            self.ins(Instruction::End);
        } else {
            // Released when no thread waits: no waiters counted, no waiter
            // bit in the lock word.
            self.ins(Instruction::LocalGet(m));
            self.ins(Instruction::I32Load(word(8)));
            self.ins(Instruction::I32Eqz);
            self.ins(Instruction::LocalGet(m));
            self.ins(Instruction::I32AtomicLoad(word(MUTEX_LOCK_WORD)));
            self.ins(Instruction::I32Const(0));
            self.ins(Instruction::I32GeS);
            self.ins(Instruction::I32And);
            self.ins(Instruction::If(result));
            self.ins(Instruction::LocalGet(m));
            self.ins(Instruction::I32Const(0));
            self.ins(Instruction::I32AtomicStore(word(MUTEX_LOCK_WORD)));
            self.ins(Instruction::I32Const(0));
            self.ins(Instruction::Else);
            fallback(self)?;
            self.ins(Instruction::End);
        }
        self.ins(Instruction::Else);
        fallback(self)?;
        self.ins(Instruction::End);
        Ok(())
    }

    fn mark(&mut self, orig: u32, fixed: bool) {
        let rel = self.pos();
        self.runs.push((rel, orig, fixed));
    }
}

/// Rewrites `bytes` according to `cfg`.
pub fn rewrite(bytes: &[u8], cfg: &Config, filters: &Filters, debug: &DebugInfo) -> Result<Output> {
    let mut facts = scan(bytes).context("malformed WebAssembly module")?;
    let plan = fnptr::plan(
        bytes,
        &fnptr::Facts {
            types: &facts.types,
            func_types: &facts.func_types,
            func_names: &facts.func_names,
            func_exports: &facts.func_exports,
        },
    )
    .context("malformed WebAssembly module")?;
    for t in &plan.tables {
        let base = plan.base_for(t.ty).expect("planned table");
        facts.adapted.insert(t.ty, base);
    }
    facts.adapted_table = plan.num_tables;
    facts.table_size = plan.size();
    // Adapters follow the module's own functions.
    let thunk_base = facts.func_types.len() as u32 + RtImport::COUNT;
    // `call_catching` calls a start routine as `(i32) -> i32`: through the
    // adapted region of that type, when there is one.
    facts.start_base = plan
        .tables
        .iter()
        .find(|t| {
            facts.types.get(t.ty as usize).is_some_and(|(p, r)| {
                p.as_slice() == [wasmparser::ValType::I32]
                    && r.as_slice() == [wasmparser::ValType::I32]
            })
        })
        .and_then(|t| plan.base_for(t.ty));
    let start_table = if facts.start_base.is_some() {
        facts.adapted_table
    } else {
        0
    };
    let mut remap = Remap {
        imported_funcs: facts.imported_funcs,
    };
    let budget_global = facts.num_globals;
    let rt_type_base = facts.num_types;
    // The thread entry (see `EXPORT_ENTRY`): the globals it puts back, with
    // their types (the skip counter last), and where its saved copies go.
    let entry = facts
        .func_exports
        .get("wasi_thread_start")
        .copied()
        .filter(|&f| {
            facts
                .func_types
                .get(f as usize)
                .and_then(|&t| facts.types.get(t as usize))
                .is_some_and(|(p, r)| {
                    p.as_slice() == [wasmparser::ValType::I32, wasmparser::ValType::I32]
                        && r.is_empty()
                })
        })
        .and_then(|start| {
            let mut reset: Vec<(u32, ValType)> = Vec::new();
            for (&g, &t) in facts.mutable_globals.iter().zip(&facts.mutable_types) {
                reset.push((g, number_type(t)?));
            }
            reset.push((budget_global + 1, ValType::I32));
            Some((start, reset))
        });
    let saved_base = budget_global + 2;
    let entry_type = rt_type_base + RtImport::COUNT;
    // It follows the adapters.
    let entry_func = thunk_base + plan.thunks.len() as u32;
    // The copies of synchronisation wrappers follow it.
    let copy_base = entry_func + entry.is_some() as u32;
    let copies = super::wrappers::plan(
        bytes,
        facts.imported_funcs,
        &facts.func_names,
        debug,
        filters,
        copy_base,
    )
    .context("malformed WebAssembly module")?;
    // The bodies of the wrappers copied, with what validates them.
    type Kept<'b> = (
        wasmparser::FunctionBody<'b>,
        wasmparser::FuncToValidate<wasmparser::ValidatorResources>,
    );
    let mut kept: HashMap<u32, Kept> = HashMap::new();

    let mut features = WasmFeatures::default();
    features.insert(WasmFeatures::THREADS);
    features.insert(WasmFeatures::BULK_MEMORY);
    // clang's `-fwasm-exceptions` output, rewritten below.
    features.insert(WasmFeatures::LEGACY_EXCEPTIONS);
    let mut validator = Validator::new_with_features(features);
    let tags = super::eh::tag_params(bytes).context("malformed WebAssembly module")?;
    let mut allocs = FuncValidatorAllocations::default();

    let mut module = Module::new();
    let mut sites: Vec<Site> = Vec::new();
    let mut funcs: Vec<FuncInfo> = Vec::new();
    let mut func_runs: Vec<Vec<(u32, u32, bool)>> = Vec::new();
    let mut hints = wasm_encoder::BranchHints::new();
    let mut defined_index = facts.imported_funcs;
    let mut data_start: Option<u32> = None;

    // Sections heddle must add to, created when the module lacks them.
    // Order ranks follow the binary section order.
    let rank = |p: &Payload| -> Option<u8> {
        Some(match p {
            Payload::TypeSection(_) => 1,
            Payload::ImportSection(_) => 2,
            Payload::FunctionSection(_) => 3,
            Payload::TableSection(_) => 4,
            Payload::MemorySection(_) => 5,
            Payload::TagSection(_) => 6,
            Payload::GlobalSection(_) => 7,
            Payload::ExportSection(_) => 8,
            Payload::StartSection { .. } => 9,
            Payload::ElementSection(_) => 10,
            Payload::DataCountSection { .. } => 11,
            Payload::CodeSectionStart { .. } => 12,
            Payload::DataSection(_) => 13,
            _ => return None,
        })
    };
    let mut done_types = false;
    let mut done_imports = false;
    let mut done_globals = false;
    let mut done_exports = false;

    let rt_types = |types: &mut TypeSection| {
        for &imp in RtImport::ALL {
            let (p, r) = signature(imp);
            types.ty().function(p, r);
        }
        if entry.is_some() {
            types.ty().function([ValType::I32; 3], []);
        }
    };
    let rt_imports = |imports: &mut ImportSection| {
        for (i, imp) in RtImport::ALL.iter().enumerate() {
            imports.import(
                RtImport::MODULE,
                imp.name(),
                EntityType::Function(rt_type_base + i as u32),
            );
        }
    };
    // The budget global, then the skip counter (index `budget_global + 1`).
    let budget_globals = |globals: &mut GlobalSection| {
        for init in [i32::MAX, 0] {
            globals.global(
                GlobalType {
                    val_type: ValType::I32,
                    mutable: true,
                    shared: false,
                },
                &wasm_encoder::ConstExpr::i32_const(init),
            );
        }
        // The saved copies, set by the host once per instance.
        for &(_, val_type) in entry.iter().flat_map(|(_, reset)| reset) {
            let zero = match val_type {
                ValType::I64 => wasm_encoder::ConstExpr::i64_const(0),
                ValType::F32 => wasm_encoder::ConstExpr::f32_const(0.0.into()),
                ValType::F64 => wasm_encoder::ConstExpr::f64_const(0.0.into()),
                _ => wasm_encoder::ConstExpr::i32_const(0),
            };
            let ty = GlobalType {
                val_type,
                mutable: true,
                shared: false,
            };
            globals.global(ty, &zero);
        }
    };
    let extra_exports = |exports: &mut ExportSection| {
        exports.export(EXPORT_BUDGET, ExportKind::Global, budget_global);
        exports.export(EXPORT_SKIP, ExportKind::Global, budget_global + 1);
        if let Some(sp) = facts.sp_global {
            exports.export(EXPORT_SP, ExportKind::Global, sp);
        }
        if facts.has_table {
            exports.export(EXPORT_TABLE, ExportKind::Table, start_table);
            exports.export(EXPORT_FUNCS, ExportKind::Table, 0);
        }
        // Every mutable global, so that the runtime can reset an instance
        // for reuse (see `reuse`); not the budget global, which the runtime
        // sets at every thread's start anyway.
        let added = [budget_global + 1];
        for &g in facts.mutable_globals.iter().chain(&added) {
            exports.export(
                &format!("{}{g}", super::reuse::GLOBAL_PREFIX),
                ExportKind::Global,
                g,
            );
        }
        if let Some((_, reset)) = &entry {
            for (k, &(g, _)) in reset.iter().enumerate() {
                let saved = saved_base + k as u32;
                exports.export(&format!("{SAVED_PREFIX}{g}"), ExportKind::Global, saved);
            }
            exports.export(EXPORT_ENTRY, ExportKind::Func, entry_func);
        }
    };

    let mut code: Option<CodeSection> = None;
    let mut code_count = 0u32;
    let mut code_seen = 0u32;
    let thread_start_c = facts
        .func_names
        .iter()
        .find(|(_, n)| n.as_str() == "__wasi_thread_start_C")
        .map(|(i, _)| *i);

    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.context("malformed WebAssembly module")?;
        let valid = validator
            .payload(&payload)
            .context("invalid WebAssembly module")?;
        if let Some(r) = rank(&payload) {
            if r > 1 && !done_types {
                let mut t = TypeSection::new();
                rt_types(&mut t);
                module.section(&t);
                done_types = true;
            }
            if r > 2 && !done_imports {
                let mut t = ImportSection::new();
                rt_imports(&mut t);
                module.section(&t);
                done_imports = true;
            }
            if r > 7 && !done_globals {
                let mut g = GlobalSection::new();
                budget_globals(&mut g);
                module.section(&g);
                done_globals = true;
            }
            if r > 8 && !done_exports {
                let mut e = ExportSection::new();
                extra_exports(&mut e);
                module.section(&e);
                done_exports = true;
            }
        }
        match payload {
            Payload::Version { .. } => {}
            Payload::TypeSection(r) => {
                let mut t = TypeSection::new();
                reenc(remap.parse_type_section(&mut t, r))?;
                rt_types(&mut t);
                module.section(&t);
                done_types = true;
            }
            Payload::ImportSection(r) => {
                let mut t = ImportSection::new();
                reenc(remap.parse_import_section(&mut t, r))?;
                rt_imports(&mut t);
                module.section(&t);
                done_imports = true;
            }
            Payload::FunctionSection(r) => {
                let mut t = wasm_encoder::FunctionSection::new();
                reenc(remap.parse_function_section(&mut t, r))?;
                for th in &plan.thunks {
                    t.function(th.ty);
                }
                if entry.is_some() {
                    t.function(entry_type);
                }
                for c in &copies.copies {
                    t.function(facts.func_types[c.wrapper as usize]);
                }
                module.section(&t);
            }
            Payload::TableSection(r) => {
                let mut t = wasm_encoder::TableSection::new();
                reenc(remap.parse_table_section(&mut t, r))?;
                if !plan.tables.is_empty() {
                    t.table(wasm_encoder::TableType {
                        element_type: wasm_encoder::RefType::FUNCREF,
                        table64: false,
                        minimum: plan.added_len(),
                        maximum: Some(plan.added_len()),
                        shared: false,
                    });
                }
                module.section(&t);
            }
            Payload::MemorySection(r) => {
                let mut t = wasm_encoder::MemorySection::new();
                reenc(remap.parse_memory_section(&mut t, r))?;
                module.section(&t);
            }
            Payload::TagSection(r) => {
                let mut t = wasm_encoder::TagSection::new();
                reenc(remap.parse_tag_section(&mut t, r))?;
                module.section(&t);
            }
            Payload::GlobalSection(r) => {
                let mut t = GlobalSection::new();
                reenc(remap.parse_global_section(&mut t, r))?;
                budget_globals(&mut t);
                module.section(&t);
                done_globals = true;
            }
            Payload::ExportSection(r) => {
                let mut t = ExportSection::new();
                for e in r {
                    let e = e?;
                    let name = e.name;
                    if [
                        EXPORT_BUDGET,
                        EXPORT_SP,
                        EXPORT_TABLE,
                        EXPORT_FUNCS,
                        EXPORT_ENTRY,
                    ]
                    .contains(&name)
                        || name.starts_with(super::reuse::GLOBAL_PREFIX)
                        || name.starts_with(SAVED_PREFIX)
                    {
                        continue;
                    }
                    let idx = match e.kind {
                        ExternalKind::Func | ExternalKind::FuncExact => {
                            reenc(remap.function_index(e.index))?
                        }
                        _ => e.index,
                    };
                    t.export(name, reenc(remap.export_kind(e.kind))?, idx);
                }
                extra_exports(&mut t);
                module.section(&t);
                done_exports = true;
            }
            Payload::StartSection { func, .. } => {
                module.section(&wasm_encoder::StartSection {
                    function_index: reenc(remap.function_index(func))?,
                });
            }
            Payload::ElementSection(r) => {
                let mut t = wasm_encoder::ElementSection::new();
                reenc(remap.parse_element_section(&mut t, r))?;
                for table in &plan.tables {
                    let base = plan.base_for(table.ty).expect("planned table") as i32;
                    for (offset, entries) in plan.offsets.iter().zip(&table.segments) {
                        let funcs = entries
                            .iter()
                            .map(|e| match *e {
                                Ok(f) => reenc(remap.function_index(f)),
                                Err(j) => Ok(thunk_base + j),
                            })
                            .collect::<Result<Vec<u32>>>()?;
                        t.active(
                            Some(plan.num_tables),
                            &wasm_encoder::ConstExpr::i32_const(base + *offset),
                            wasm_encoder::Elements::Functions(funcs.into()),
                        );
                    }
                }
                module.section(&t);
            }
            Payload::DataCountSection { count, .. } => {
                module.section(&wasm_encoder::DataCountSection { count });
            }
            Payload::DataSection(r) => {
                let mut t = wasm_encoder::DataSection::new();
                for d in r.clone() {
                    if let wasmparser::DataKind::Active { offset_expr, .. } = d?.kind {
                        let mut ops = offset_expr.get_operators_reader();
                        if let Ok(Operator::I32Const { value }) = ops.read() {
                            let v = value as u32;
                            data_start = Some(data_start.map_or(v, |d| d.min(v)));
                        }
                    }
                }
                reenc(remap.parse_data_section(&mut t, r))?;
                module.section(&t);
            }
            Payload::CodeSectionStart { count, .. } => {
                code = Some(CodeSection::new());
                code_count = count;
            }
            Payload::CodeSectionEntry(body) => {
                let wasmparser::ValidPayload::Func(to_validate, _) = valid else {
                    bail!("internal error: code entry without validator");
                };
                let index = defined_index;
                defined_index += 1;
                if copies.copies_of(index) {
                    kept.insert(index, (body.clone(), validate_again(&to_validate)));
                }
                let fv = to_validate.into_validator(std::mem::take(&mut allocs));
                let raw_name = facts.func_names.get(&index).cloned();
                let name = raw_name
                    .as_deref()
                    .map(demangle)
                    .unwrap_or_else(|| format!("func[{index}]"));
                let range = body.range();
                let has_dwarf_user =
                    debug.is_user_function(range.start as u64..range.end as u64, &filters.code);
                let first_op = body.get_operators_reader()?.original_position() as u64;
                let file = debug.location(first_op).map(|l| l.file);
                let forced =
                    filters.forced(raw_name.as_deref().unwrap_or(&name), &name, file.as_deref());
                let user = forced.unwrap_or(has_dwarf_user);
                let is_start = facts.start == Some(index);
                let ctx = FuncCtx {
                    // Not inside the allocator entry points themselves (e.g.
                    // memalign calling posix_memalign), nor at start-up.
                    memcheck: cfg.memcheck()
                        && !is_start
                        && !raw_name
                            .as_deref()
                            .is_some_and(|n| ALLOC_FUNCS.contains(&n)),
                    index,
                    name: &name,
                    user,
                    attribute: user && forced.is_none(),
                    code: &filters.code,
                    is_start,
                    plain: user && cfg.granularity == super::Granularity::All && !is_start,
                    catch_thread_start: facts.imports_thread_exit && thread_start_c == Some(index),
                    budget_in_global: cfg.budget_in_global,
                    asked_at: None,
                    within: None,
                    redirect: copies.calls.get(&index),
                    decide: copies.decide.get(&index),
                    tags: &tags,
                };
                let Body {
                    func,
                    runs,
                    allocs: new_allocs,
                    init_data,
                    cold_ifs,
                } = rewrite_body(
                    &body,
                    fv,
                    &ctx,
                    &facts,
                    &mut remap,
                    budget_global,
                    debug,
                    &mut sites,
                )?;
                allocs = new_allocs;
                // A `signature_mismatch:NAME` stub calls NAME, adapted.
                let (func, runs) = match plan.stubs.get(&index) {
                    Some(&target) => {
                        let sig = |f: u32| {
                            facts
                                .types
                                .get(facts.func_types[f as usize] as usize)
                                .expect("type of a validated function")
                        };
                        let callee = reenc(remap.function_index(target))?;
                        match fnptr::adapter(sig(index), sig(target), callee) {
                            Some(f) => (f, vec![(0, range.start as u32, true)]),
                            None => (func, runs),
                        }
                    }
                    None => (func, runs),
                };
                if is_start {
                    if let Some(d) = init_data {
                        data_start = Some(data_start.map_or(d, |x| x.min(d)));
                    }
                }
                funcs.push(FuncInfo {
                    index,
                    name: name.clone(),
                    user,
                    instrumented: ctx.plain,
                });
                code.as_mut().expect("code section").function(&func);
                func_runs.push(runs);
                if !cold_ifs.is_empty() {
                    hints.function_hints(
                        index + RtImport::COUNT,
                        cold_ifs.iter().map(|&at| wasm_encoder::BranchHint {
                            branch_func_offset: at,
                            branch_hint_value: 0,
                        }),
                    );
                }
                code_seen += 1;
                if code_seen == code_count {
                    for (j, th) in plan.thunks.iter().enumerate() {
                        let sig = |f: u32| {
                            facts
                                .types
                                .get(facts.func_types[f as usize] as usize)
                                .expect("type of a validated function")
                        };
                        let from = facts.types.get(th.ty as usize).expect("planned type");
                        let callee = reenc(remap.function_index(th.callee))?;
                        let f = fnptr::adapter(from, sig(th.callee), callee)
                            .expect("planned adapters are adaptable");
                        code.as_mut().expect("code section").function(&f);
                        // No source position of its own.
                        func_runs.push(vec![(0, 0, true)]);
                        let name = fnptr::thunk_name(
                            th,
                            &fnptr::Facts {
                                types: &facts.types,
                                func_types: &facts.func_types,
                                func_names: &facts.func_names,
                                func_exports: &facts.func_exports,
                            },
                        );
                        funcs.push(FuncInfo {
                            index: thunk_base - RtImport::COUNT + j as u32,
                            name,
                            user: false,
                            instrumented: false,
                        });
                    }
                    if let Some((start, reset)) = &entry {
                        let start = reenc(remap.function_index(*start))?;
                        let f = entry_body(reset, saved_base, budget_global, start);
                        code.as_mut().expect("code section").function(&f);
                        func_runs.push(vec![(0, 0, true)]);
                        funcs.push(FuncInfo {
                            index: entry_func - RtImport::COUNT,
                            name: EXPORT_ENTRY.into(),
                            user: false,
                            instrumented: false,
                        });
                    }
                    for (k, c) in copies.copies.iter().enumerate() {
                        let (body, to_validate) = kept.get(&c.wrapper).expect("a kept wrapper");
                        let fv =
                            validate_again(to_validate).into_validator(std::mem::take(&mut allocs));
                        let index = copy_base + k as u32 - RtImport::COUNT;
                        let name = facts
                            .func_names
                            .get(&c.wrapper)
                            .map(|n| demangle(n))
                            .unwrap_or_else(|| format!("func[{}]", c.wrapper));
                        let ctx = FuncCtx {
                            memcheck: cfg.memcheck(),
                            index,
                            name: &name,
                            user: true,
                            attribute: true,
                            code: &filters.code,
                            is_start: false,
                            plain: cfg.granularity == super::Granularity::All,
                            catch_thread_start: false,
                            budget_in_global: cfg.budget_in_global,
                            asked_at: Some(&c.asked_at),
                            within: c.within.as_deref(),
                            redirect: Some(&c.redirect),
                            decide: Some(&c.decide),
                            tags: &tags,
                        };
                        let b = rewrite_body(
                            body,
                            fv,
                            &ctx,
                            &facts,
                            &mut remap,
                            budget_global,
                            debug,
                            &mut sites,
                        )?;
                        allocs = b.allocs;
                        code.as_mut().expect("code section").function(&b.func);
                        func_runs.push(b.runs);
                        if !b.cold_ifs.is_empty() {
                            hints.function_hints(
                                index + RtImport::COUNT,
                                b.cold_ifs.iter().map(|&at| wasm_encoder::BranchHint {
                                    branch_func_offset: at,
                                    branch_hint_value: 0,
                                }),
                            );
                        }
                        funcs.push(FuncInfo {
                            index,
                            name,
                            user: false,
                            instrumented: false,
                        });
                    }
                    // The hint section goes before the code it describes.
                    if !hints.is_empty() {
                        module.section(&hints);
                    }
                    module.section(code.as_ref().expect("code section"));
                }
            }
            Payload::CustomSection(c) => {
                if c.name().starts_with(".debug_")
                    || c.name().starts_with("reloc.")
                    || c.name() == "linking"
                    || c.name() == "metadata.code.branch_hint"
                {
                    continue;
                }
                if let KnownCustom::Name(names) = c.as_known() {
                    if let Ok(ns) = name_section(&mut remap, names, &funcs, thunk_base) {
                        module.section(&ns);
                        continue;
                    }
                }
                module.section(&wasm_encoder::CustomSection {
                    name: c.name().into(),
                    data: c.data().into(),
                });
            }
            Payload::End(_) => {}
            other => {
                if let Some((id, range)) = other.as_section() {
                    module.section(&wasm_encoder::RawSection {
                        id,
                        data: &bytes[range],
                    });
                }
            }
        }
    }
    if !done_types {
        let mut t = TypeSection::new();
        rt_types(&mut t);
        module.section(&t);
    }
    if !done_imports {
        let mut t = ImportSection::new();
        rt_imports(&mut t);
        module.section(&t);
    }
    if !done_globals {
        let mut g = GlobalSection::new();
        budget_globals(&mut g);
        module.section(&g);
    }
    if !done_exports {
        let mut e = ExportSection::new();
        extra_exports(&mut e);
        module.section(&e);
    }
    let out = module.finish();
    let offset_map = absolute_offsets(&out, &func_runs)?;
    Ok(Output {
        module: out,
        sites,
        funcs,
        orig_imported_funcs: facts.imported_funcs,
        offset_map,
        data_start: data_start.unwrap_or(1024),
        entry_func: entry.map(|_| entry_func),
    })
}

/// What validates a function's body once more (a copy of an atomic
/// wrapper is rewritten from the wrapper's body).
fn validate_again(
    v: &wasmparser::FuncToValidate<wasmparser::ValidatorResources>,
) -> wasmparser::FuncToValidate<wasmparser::ValidatorResources> {
    wasmparser::FuncToValidate {
        resources: v.resources.clone(),
        index: v.index,
        ty: v.ty,
        features: v.features,
    }
}

/// A number type as the encoder spells it (None for vectors and
/// references, which the thread entry does not put back).
fn number_type(t: wasmparser::ValType) -> Option<ValType> {
    Some(match t {
        wasmparser::ValType::I32 => ValType::I32,
        wasmparser::ValType::I64 => ValType::I64,
        wasmparser::ValType::F32 => ValType::F32,
        wasmparser::ValType::F64 => ValType::F64,
        _ => return None,
    })
}

/// The body of `heddle_thread_entry(tid, start_arg, budget)` (see
/// [`EXPORT_ENTRY`]): each of `reset` from its saved copy (at `saved_base`
/// on, in the same order), the budget, then the call of `start`.
fn entry_body(
    reset: &[(u32, ValType)],
    saved_base: u32,
    budget_global: u32,
    start: u32,
) -> wasm_encoder::Function {
    let mut f = wasm_encoder::Function::new([]);
    for (k, &(g, _)) in reset.iter().enumerate() {
        f.instruction(&Instruction::GlobalGet(saved_base + k as u32));
        f.instruction(&Instruction::GlobalSet(g));
    }
    f.instruction(&Instruction::LocalGet(2));
    f.instruction(&Instruction::GlobalSet(budget_global));
    f.instruction(&Instruction::LocalGet(0));
    f.instruction(&Instruction::LocalGet(1));
    f.instruction(&Instruction::Call(start));
    f.instruction(&Instruction::End);
    f
}

/// The name section, re-encoded, with the adapters' names (from their
/// [`FuncInfo`]s) added to the function names.
fn name_section(
    remap: &mut Remap,
    names: wasmparser::NameSectionReader<'_>,
    funcs: &[FuncInfo],
    thunk_base: u32,
) -> Result<wasm_encoder::NameSection> {
    let mut out = wasm_encoder::NameSection::new();
    let added = || {
        funcs
            .iter()
            .filter(|f| f.index + RtImport::COUNT >= thunk_base)
            .map(|f| (f.index + RtImport::COUNT, f.name.as_str()))
    };
    let mut had_functions = false;
    for sub in names {
        match sub? {
            Name::Function(map) => {
                had_functions = true;
                let mut m = wasm_encoder::NameMap::new();
                for naming in map {
                    let naming = naming?;
                    m.append(reenc(remap.function_index(naming.index))?, naming.name);
                }
                for (i, n) in added() {
                    m.append(i, n);
                }
                out.functions(&m);
            }
            other => reenc(remap.parse_custom_name_subsection(&mut out, other))?,
        }
    }
    if !had_functions && added().next().is_some() {
        let mut m = wasm_encoder::NameMap::new();
        for (i, n) in added() {
            m.append(i, n);
        }
        out.functions(&m);
    }
    Ok(out)
}

/// Turns per-function relative runs into sorted module-offset runs.
fn absolute_offsets(out: &[u8], func_runs: &[Vec<(u32, u32, bool)>]) -> Result<Vec<OffsetRun>> {
    let mut starts = Vec::new();
    for p in Parser::new(0).parse_all(out) {
        if let Payload::CodeSectionEntry(body) = p? {
            starts.push(body.range().start as u32);
        }
    }
    let mut map = Vec::new();
    for (start, runs) in starts.iter().zip(func_runs) {
        for &(rel, orig, fixed) in runs {
            map.push(OffsetRun {
                start: start + rel,
                orig,
                fixed,
            });
        }
    }
    map.sort_by_key(|r| r.start);
    map.dedup_by_key(|r| r.start);
    Ok(map)
}

struct FuncCtx<'a> {
    /// Rewrite allocator calls for the memory checker.
    memcheck: bool,
    index: u32,
    name: &'a str,
    /// The function's unit is user code (or a filter says it is user code).
    user: bool,
    /// Each instruction of a user function belongs to the innermost user
    /// frame of its inlined chain ([`DebugInfo::owner`]); one with none is
    /// library code. Off when a filter decided the whole function.
    attribute: bool,
    code: &'a crate::dwarf::CodeOwnership,
    is_start: bool,
    /// Plain accesses are yield points.
    plain: bool,
    /// Replace the start routine's `call_indirect` with `call_catching`.
    catch_thread_start: bool,
    /// In a copy of a synchronisation wrapper made for one call of the program's
    /// ([`crate::wrappers`]): the frame that asked for its operations.
    asked_at: Option<&'a crate::dwarf::Frame>,
    /// In such a copy: the innermost primitive of Rust's standard library
    /// on its path ([`crate::wrappers::Copy::within`]).
    within: Option<&'a str>,
    /// Calls redirected to copies of synchronisation wrappers: original offset of
    /// the call → the copy's function index.
    redirect: Option<&'a HashMap<usize, u32>>,
    /// Calls to synchronisation functions that loop, before which a
    /// decision is made ([`SiteKind::SyncCall`]): original offsets.
    decide: Option<&'a BTreeSet<usize>>,
    /// Every tag's parameter types ([`super::eh::tag_params`]).
    tags: &'a [Vec<ValType>],
    /// See [`Config::budget_in_global`].
    budget_in_global: bool,
}

/// A rewritten function body.
struct Body {
    func: Function,
    /// Offset runs (see [`compress_runs`]).
    runs: Vec<(u32, u32, bool)>,
    /// The validator's allocations, for reuse.
    allocs: FuncValidatorAllocations,
    /// For the start function, the lowest address it initialises.
    init_data: Option<u32>,
    /// Offsets (in the new body) of the `if`s that guard cold paths.
    cold_ifs: Vec<u32>,
}

#[allow(clippy::too_many_arguments)]
fn rewrite_body<'a>(
    body: &wasmparser::FunctionBody<'a>,
    mut fv: wasmparser::FuncValidator<wasmparser::ValidatorResources>,
    ctx: &FuncCtx,
    facts: &ModuleFacts,
    remap: &mut Remap,
    budget_global: u32,
    debug: &DebugInfo,
    sites: &mut Vec<Site>,
) -> Result<Body> {
    // Locals.
    let mut locals: Vec<(u32, ValType)> = Vec::new();
    let mut lr = body.get_locals_reader()?;
    let mut num_locals = 0u32;
    for _ in 0..lr.get_count() {
        let offset = lr.original_position();
        let (count, ty) = lr.read()?;
        fv.define_locals(offset, count, ty)?;
        locals.push((count, reenc(remap.val_type(ty))?));
        num_locals += count;
    }
    let params = fv.len_locals() - num_locals;

    // Pass 1: validate, compute arities and the frame analysis.
    let mut ops: Vec<(Operator<'a>, usize, Option<usize>)> = Vec::new();
    let mut frame = FrameAnalysis::new(facts.sp_global, params, fv.len_locals());
    let mut reader = body.get_operators_reader()?;
    let mut uses_v128 = false;
    let mut uses_exceptions = false;
    while !reader.eof() {
        let (op, offset) = reader.read_with_offset()?;
        let arity = op.operator_arity(&fv);
        let class = classify(&op);
        if matches!(
            class,
            Some(Class::Lane { .. })
                | Some(Class::Store {
                    val: ValType::V128,
                    ..
                })
        ) {
            uses_v128 = true;
        }
        uses_exceptions |= matches!(
            op,
            Operator::Try { .. }
                | Operator::TryTable { .. }
                | Operator::Catch { .. }
                | Operator::CatchAll
                | Operator::Delegate { .. }
        );
        let depth = fv.control_stack_height();
        let keeps_nothing = match op {
            Operator::Call { function_index } => facts
                .func_names
                .get(&function_index)
                .is_some_and(|n| super::stack::keeps_no_pointer(n)),
            _ => false,
        };
        let access = if keeps_nothing {
            frame.call_keeping_nothing(arity);
            None
        } else {
            frame.step(&op, arity, depth, class.and_then(|c| c.addr_use()))
        };
        fv.op(offset, &op)
            .with_context(|| format!("invalid WebAssembly module: function {}", ctx.index))?;
        frame.sync_height(fv.operand_stack_height() as usize);
        ops.push((op, offset, access));
    }
    reader.finish()?;
    if fv.control_stack_height() != 0 {
        bail!(
            "invalid WebAssembly module: function {} does not end with `end`",
            ctx.index
        );
    }
    let frame_access = frame.finish();

    // Scratch locals.
    let base = fv.len_locals();
    let declared = locals.len();
    let scratch = Scratch {
        a: base,
        b: base + 1,
        c: base + 2,
        r: base + 3,
        q: base + 4,
        d: base + 5,
        e: base + 6,
        f: base + 7,
        g: base + 8,
        l: base + 9,
        s: base + 10,
        h: base + 11,
    };
    locals.push((5, ValType::I32));
    locals.push((2, ValType::I64));
    locals.push((1, ValType::F32));
    locals.push((1, ValType::F64));
    locals.push((2, ValType::I32));
    if uses_v128 {
        locals.push((1, ValType::V128));
    }
    let exn_base = base + locals[declared..].iter().map(|l| l.0).sum::<u32>();
    let eh = super::eh::FuncTranslator::new(ops.iter().map(|o| &o.0), ctx.tags, exn_base)
        .with_context(|| format!("function {}: legacy exception handling", ctx.index))?;
    if let Some(n) = eh.as_ref().map(|t| t.exn_locals()).filter(|&n| n > 0) {
        locals.push((n, ValType::Ref(wasm_encoder::RefType::EXNREF)));
    }

    let mut em = Emitter {
        func: Function::new(locals),
        scratch,
        budget_global,
        imported_funcs: facts.imported_funcs,
        remap,
        runs: Vec::new(),
        cold_ifs: Vec::new(),
        budget_local: None,
        skip_local: None,
        eh,
    };
    if let Some(tr) = em.eh.as_mut() {
        let func = &mut em.func;
        tr.start(&mut |i| {
            func.instruction(&i);
        });
    }

    // Whose code an instruction is (see `FuncCtx::attribute`).
    // An instruction's owner is asked for twice (whether it is a yield
    // point, then for its site): the last answer is kept.
    // A synchronisation operation in a copy of a synchronisation wrapper
    // (`FuncCtx::asked_at`) is the caller's, at its line.
    let last_owner: std::cell::RefCell<Option<(usize, bool, Owner)>> = Default::default();
    let owner = |offset: usize, sync: bool| -> Owner {
        if !ctx.user {
            return Owner::Library;
        }
        if !ctx.attribute {
            return Owner::Unknown;
        }
        // In a copy every synchronisation is the caller's.
        if let (Some(frame), true) = (ctx.asked_at, sync) {
            return Owner::User {
                frame: frame.clone(),
                inlined: true,
            };
        }
        let mut last = last_owner.borrow_mut();
        match &*last {
            Some((at, s, o)) if *at == offset && *s == sync => o.clone(),
            _ => {
                let o = debug.owner(offset as u64, ctx.code, sync);
                *last = Some((offset, sync, o.clone()));
                o
            }
        }
    };
    let is_user_op = |offset: usize| !matches!(owner(offset, false), Owner::Library);
    let is_user_sync = |offset: usize| !matches!(owner(offset, true), Owner::Library);
    // A library compare-exchange that takes a lock ([`Site::takes_lock`]).
    let takes_lock = |kind: SiteKind, func_name: &str, offset: usize| {
        kind == SiteKind::Cmpxchg
            && (func_name.trim_start_matches('_') == "pthread_mutex_lock"
                || debug
                    .frames(offset as u64)
                    .first()
                    .and_then(|f| f.function.as_deref())
                    == Some("__tl_lock"))
    };
    let new_site = |sites: &mut Vec<Site>,
                    kind: SiteKind,
                    atomic: bool,
                    size: u32,
                    mem_offset: u64,
                    offset: usize,
                    callee: Option<String>|
     -> u32 {
        let id = sites.len() as u32;
        // Thread creation and join keep the innermost user frame: a
        // `std::thread` built by `vector::emplace_back` is created at the
        // program's `emplace_back` line.
        let sync = atomic
            || matches!(
                kind,
                SiteKind::Rmw
                    | SiteKind::Cmpxchg
                    | SiteKind::Fence
                    | SiteKind::Wait
                    | SiteKind::Notify
                    | SiteKind::Lock
                    | SiteKind::Unlock
                    | SiteKind::CondWait
                    | SiteKind::Barrier
                    | SiteKind::Once
                    | SiteKind::SyncCall
            );
        // A call into a synchronisation library is the program's through
        // the library's inlined front (`DebugInfo::call_owner`).
        let whose =
            if kind == SiteKind::SyncCall && ctx.user && ctx.attribute && ctx.asked_at.is_none() {
                debug.call_owner(offset as u64, ctx.code)
            } else {
                owner(offset, sync)
            };
        let (user, loc, func_name) = match whose {
            // A synchronisation operation whose line the compiler merged
            // away (two stores of one variable become one) is still the
            // program's, in its function.
            Owner::User { frame, inlined }
                if frame.loc.as_ref().is_some_and(|l| l.line > 0 || sync) =>
            {
                let name = match frame.function {
                    Some(f) if inlined => f,
                    _ => ctx.name.to_string(),
                };
                (true, frame.loc, name)
            }
            o => (
                !matches!(o, Owner::Library),
                debug.location(offset as u64),
                ctx.name.to_string(),
            ),
        };
        // Inside a primitive of Rust's standard library, inlined or in a
        // copy: the innermost one around the operation.
        let primitive = if sync && user {
            debug
                .frames(offset as u64)
                .iter()
                .filter_map(|f| f.function.as_deref())
                .chain(ctx.within)
                .find_map(super::sites::std_primitive)
        } else {
            None
        };
        let takes_lock = (!user && takes_lock(kind, &func_name, offset))
            || (kind == SiteKind::Cmpxchg && primitive == Some(StdPrimitive::MutexLock));
        // A synchronisation of a library's internals no call of the
        // program's asked for: no decision (`sites::decides_nothing`).
        let internal = sync
            && !user
            && !takes_lock
            && matches!(
                kind,
                SiteKind::Read
                    | SiteKind::Write
                    | SiteKind::Rmw
                    | SiteKind::Cmpxchg
                    | SiteKind::Fence
                    | SiteKind::Wait
                    | SiteKind::Notify
            )
            && {
                let file = debug
                    .frames(offset as u64)
                    .into_iter()
                    .find_map(|f| f.loc.map(|l| l.file));
                super::sites::is_library_internal_file(file.as_deref(), ctx.name)
            };
        let private = internal
            || decides_nothing(kind, atomic, user, &func_name, callee.as_deref())
            || (primitive.is_some() && std_primitive_decides_nothing(kind))
            || (!sync && user && loc.as_ref().is_some_and(|l| plain_decides_nothing(&l.file)));
        sites.push(Site {
            id,
            func: ctx.index,
            func_name,
            offset: offset as u32,
            kind,
            atomic,
            size,
            mem_offset,
            loc,
            user,
            callee,
            takes_lock,
            inline_mutex: false,
            private,
        });
        id
    };

    // Function entry: preemption budget (user code only).
    let entry_offset = ops.first().map(|o| o.1).unwrap_or(body.range().start);
    if ctx.user && !ctx.is_start {
        em.mark(entry_offset as u32, true);
        // A catch handler would be entered with a stale local: functions
        // that handle exceptions keep the budget in the global only.
        if !uses_exceptions && !ctx.budget_in_global {
            em.budget_local = Some(scratch.l);
            em.reload_budget();
            em.skip_local = Some(scratch.s);
            em.reload_skip();
        }
        // A generic library function instantiated in the program's unit
        // (Rust's `Iterator::fold`, a libc++ template) has no entry point.
        let own_code = !ctx.attribute
            || debug
                .outer_is_user(entry_offset as u64, ctx.code)
                .unwrap_or(true);
        if own_code {
            let site = new_site(sites, SiteKind::Entry, false, 0, 0, entry_offset, None);
            em.budget_point(site);
        }
    }

    // Sites whose instruction has no line (line 0, e.g. a loop header) take
    // the position of the next instruction that has one.
    let mut unplaced_from = sites.len();
    let mut init_data: Option<u32> = None;
    let mut recent_consts: [Option<i32>; 3] = [None; 3];

    // Open control frames, the function's own included (tracked where the
    // budget has a local): a branch of relative depth `depth - 1` leaves
    // the function.
    let mut depth = 1u32;
    for (op, offset, access) in ops {
        let orig = offset as u32;
        if em.budget_local.is_some() {
            let leaves = |d: u32| d + 1 == depth;
            let exits = match &op {
                // A throw may leave the function (no function with a
                // handler has a budget local).
                Operator::Return
                | Operator::Throw { .. }
                | Operator::ThrowRef
                | Operator::Rethrow { .. } => true,
                Operator::End => depth == 1,
                Operator::Br { relative_depth } | Operator::BrIf { relative_depth } => {
                    leaves(*relative_depth)
                }
                Operator::BrTable { targets } => {
                    leaves(targets.default()) || targets.targets().any(|t| t.is_ok_and(leaves))
                }
                _ => false,
            };
            if exits {
                em.store_budget();
            }
            match &op {
                Operator::Block { .. } | Operator::Loop { .. } | Operator::If { .. } => depth += 1,
                Operator::End => depth -= 1,
                _ => {}
            }
        }
        if unplaced_from < sites.len() {
            if let Some(loc) = debug.location(offset as u64).filter(|l| l.line > 0) {
                for site in &mut sites[unplaced_from..] {
                    if site.loc.as_ref().is_some_and(|l| l.line == 0) {
                        site.loc = Some(loc.clone());
                    }
                }
                unplaced_from = sites.len();
            }
        }
        if ctx.is_start {
            if let Operator::MemoryInit { .. } = op {
                if let Some(d) = recent_consts[0] {
                    init_data = Some(init_data.map_or(d as u32, |x| x.min(d as u32)));
                }
            }
            recent_consts = [
                recent_consts[1],
                recent_consts[2],
                match op {
                    Operator::I32Const { value } => Some(value),
                    _ => None,
                },
            ];
        }
        let class = classify(&op);
        let is_stack = access.map(|i| frame_access[i]).unwrap_or(false);
        let instrument = match class {
            None => false,
            Some(_) if ctx.is_start => false,
            // Atomics stay yield points even on the thread's own frame:
            // musl's `a_barrier` is a CAS on a volatile local, and a spin
            // through it in `__wait` is how a waiter sees the word change
            // before it sleeps (without the yield point every contended
            // wait ends in a futex sleep and a wake: 12% fewer runs/s on
            // 100 threads). The C library's bookkeeping atomics are left
            // as they are (`sites::unseen_library_atomic`).
            Some(c) if c.is_sync() => {
                let kind = c.site_shape().0;
                !unseen_library_atomic(
                    kind,
                    ctx.user,
                    ctx.name,
                    takes_lock(kind, ctx.name, offset),
                    ctx.memcheck,
                )
            }
            Some(_) => ctx.plain && !is_stack && is_user_op(offset),
        };
        // wait/notify never reach wasmtime: even in the start function they
        // are replaced (the host knows no thread is running yet).
        let replace_futex = matches!(
            class,
            Some(Class::Wait32 { .. } | Class::Wait64 { .. } | Class::Notify { .. })
        );
        if instrument || replace_futex {
            let c = class.expect("classified");
            let (kind, atomic, size, mem_offset) = c.site_shape();
            em.mark(orig, true);
            let site = new_site(sites, kind, atomic, size, mem_offset, offset, None);
            emit_access(&mut em, c, site, op, orig)?;
            continue;
        }
        match op {
            Operator::Call { function_index }
                if ctx.memcheck && alloc_call(facts, function_index).is_some() =>
            {
                let (kind, nparams, has_result) =
                    alloc_call(facts, function_index).expect("alloc call");
                let s = em.scratch;
                let slots = [s.a, s.b, s.c, s.q];
                em.mark(orig, true);
                let site = new_site(
                    sites,
                    kind,
                    false,
                    0,
                    0,
                    offset,
                    facts.func_names.get(&function_index).cloned(),
                );
                for i in (0..nparams).rev() {
                    em.ins(Instruction::LocalSet(slots[i]));
                }
                em.ins(Instruction::I32Const(site as i32));
                for (i, slot) in slots.iter().take(3).enumerate() {
                    if i < nparams {
                        em.ins(Instruction::LocalGet(*slot));
                    } else {
                        em.ins(Instruction::I32Const(0));
                    }
                }
                em.ins(Instruction::Call(em.rt(RtImport::AllocArgs)));
                for i in 0..nparams {
                    em.ins(Instruction::I32Const(i as i32));
                    em.ins(Instruction::Call(em.rt(RtImport::AllocArg)));
                }
                em.mark(orig, false);
                em.original(op)?;
                em.mark(orig, true);
                if has_result {
                    em.ins(Instruction::LocalSet(s.r));
                    em.ins(Instruction::I32Const(site as i32));
                    em.ins(Instruction::LocalGet(s.r));
                    em.ins(Instruction::Call(em.rt(RtImport::AllocPost)));
                }
            }
            Operator::Loop { .. } => {
                em.mark(orig, false);
                em.original(op)?;
                if !ctx.is_start {
                    let site = new_site(sites, SiteKind::BackEdge, false, 0, 0, offset, None);
                    em.mark(orig, true);
                    em.budget_point(site);
                }
            }
            Operator::Call { function_index }
                if function_index < facts.imported_funcs && !ctx.is_start =>
            {
                let callee = facts.import_names.get(function_index as usize).cloned();
                em.mark(orig, true);
                let site = new_site(sites, SiteKind::Call, false, 0, 0, offset, callee);
                em.yield_point(site, None);
                em.mark(orig, false);
                em.original(op)?;
            }
            // Lock operations in user code; thread creation and join in any
            // code, since their edges are not all made of atomics (libc++'s
            // `std::thread` calls pthread_create and pthread_join itself).
            Operator::Call { function_index }
                if !ctx.is_start
                    && lock_call(facts, function_index).is_some_and(|(kind, ..)| {
                        matches!(kind, SiteKind::ThreadCreate | SiteKind::ThreadJoin)
                            || is_user_sync(offset)
                    }) =>
            {
                let (kind, arg, nparams, has_result) =
                    lock_call(facts, function_index).expect("lock call");
                let s = em.scratch;
                let slots = [s.a, s.b, s.c, s.q];
                em.mark(orig, true);
                let callee = facts.func_names.get(&function_index).cloned();
                let inline = callee
                    .as_deref()
                    .is_some_and(|c| inline_mutex_op(kind, c, nparams, has_result));
                let site = new_site(sites, kind, false, 0, 0, offset, callee);
                if inline {
                    // The lock word's access, the next site: library code (what
                    // the C library's fast path does) at the call's line.
                    sites[site as usize].inline_mutex = true;
                    let (word_kind, name) = if kind == SiteKind::Lock {
                        (SiteKind::Cmpxchg, "pthread_mutex_lock")
                    } else {
                        (SiteKind::Rmw, "pthread_mutex_unlock")
                    };
                    let w = new_site(sites, word_kind, true, 4, 4, offset, None);
                    let w = &mut sites[w as usize];
                    w.user = false;
                    w.func_name = name.to_string();
                }
                for i in (0..nparams).rev() {
                    em.ins(Instruction::LocalSet(slots[i]));
                }
                em.yield_point(site, Some(slots[arg]));
                if inline {
                    em.inline_mutex(kind, slots[arg], orig, &op)?;
                } else {
                    for slot in slots.iter().take(nparams) {
                        em.ins(Instruction::LocalGet(*slot));
                    }
                    em.mark(orig, false);
                    em.original(op)?;
                }
                em.mark(orig, true);
                // An unlock's return tells the host nothing: the release
                // was its yield point's event.
                if kind != SiteKind::Unlock {
                    if has_result {
                        em.ins(Instruction::LocalTee(s.r));
                    }
                    em.ins(Instruction::I32Const(site as i32));
                    em.ins(Instruction::LocalGet(slots[arg]));
                    if has_result {
                        em.ins(Instruction::LocalGet(s.r));
                    } else {
                        em.ins(Instruction::I32Const(0));
                    }
                    em.ins(Instruction::Call(em.rt(RtImport::Locked)));
                }
            }
            Operator::MemoryGrow { mem: 0 } => {
                em.mark(orig, true);
                let f = em.rt(RtImport::Grow);
                em.ins(Instruction::Call(f));
            }
            Operator::MemorySize { mem: 0 } => {
                em.mark(orig, true);
                let f = em.rt(RtImport::Size);
                em.ins(Instruction::Call(f));
            }
            Operator::CallIndirect { table_index: 0, .. } if ctx.catch_thread_start => {
                em.mark(orig, true);
                if let Some(base) = facts.start_base {
                    adapted_index(&mut em, base, facts.table_size);
                }
                let f = em.rt(RtImport::CallCatching);
                em.ins(Instruction::Call(f));
            }
            Operator::CallIndirect {
                table_index: 0,
                type_index,
            } if facts.adapted.contains_key(&type_index) => {
                em.mark(orig, true);
                adapted_index(&mut em, facts.adapted[&type_index], facts.table_size);
                em.ins(Instruction::CallIndirect {
                    type_index,
                    table_index: facts.adapted_table,
                });
            }
            Operator::ReturnCallIndirect {
                table_index: 0,
                type_index,
            } if facts.adapted.contains_key(&type_index) => {
                em.mark(orig, true);
                adapted_index(&mut em, facts.adapted[&type_index], facts.table_size);
                em.ins(Instruction::ReturnCallIndirect {
                    type_index,
                    table_index: facts.adapted_table,
                });
            }
            Operator::Call { function_index }
                if !ctx.is_start && ctx.decide.is_some_and(|d| d.contains(&offset)) =>
            {
                let callee = facts
                    .func_names
                    .get(&function_index)
                    .map(|n| crate::dwarf::demangle(n));
                em.mark(orig, true);
                let site = new_site(sites, SiteKind::SyncCall, false, 0, 0, offset, callee);
                em.yield_point(site, None);
                em.mark(orig, false);
                em.original(op)?;
            }
            // The trap comes from the host: a trap in wasm code is a signal,
            // which costs several times a whole short run.
            Operator::Unreachable => {
                em.mark(orig, true);
                em.ins(Instruction::Call(em.rt(RtImport::Unreachable)));
                em.ins(Instruction::Unreachable);
            }
            Operator::Call { .. } if ctx.redirect.is_some_and(|r| r.contains_key(&offset)) => {
                em.mark(orig, false);
                em.ins(Instruction::Call(ctx.redirect.expect("redirect")[&offset]));
            }
            _ => {
                em.mark(orig, false);
                em.original(op)?;
            }
        }
    }
    Ok(Body {
        func: em.func,
        runs: compress_runs(em.runs),
        allocs: fv.into_allocations(),
        init_data,
        cold_ifs: em.cold_ifs,
    })
}

/// Turns the table index `i` on top of the stack into `i < size ? base + i :
/// -1`, its entry in an adapted region of the added table (an index out of
/// the original table's bounds stays out of bounds).
fn adapted_index(em: &mut Emitter, base: u32, size: u32) {
    let a = em.scratch.a;
    em.ins(Instruction::LocalTee(a));
    em.ins(Instruction::I32Const(base as i32));
    em.ins(Instruction::I32Add);
    em.ins(Instruction::I32Const(-1));
    em.ins(Instruction::LocalGet(a));
    em.ins(Instruction::I32Const(size as i32));
    em.ins(Instruction::I32LtU);
    em.ins(Instruction::Select);
}

/// Drops run entries that the previous run's delta already implies.
fn compress_runs(runs: Vec<(u32, u32, bool)>) -> Vec<(u32, u32, bool)> {
    let mut out: Vec<(u32, u32, bool)> = Vec::with_capacity(runs.len() / 4);
    for r in runs {
        if let Some(&(prev_rel, prev_orig, prev_fixed)) = out.last() {
            if prev_rel == r.0 {
                out.pop();
            } else if !prev_fixed && !r.2 && r.1.wrapping_sub(prev_orig) == r.0 - prev_rel {
                continue;
            }
        }
        out.push(r);
    }
    out
}

/// Emits the instrumented form of one access instruction.
fn emit_access(em: &mut Emitter, c: Class, site: u32, op: Operator, orig: u32) -> Result<()> {
    let s = em.scratch;
    match c {
        Class::Load { .. } => {
            em.ins(Instruction::LocalTee(s.a));
            em.guarded_yield_point(site, Some(s.a));
            em.mark(orig, false);
            em.original(op)?;
        }
        Class::Store { val, .. } | Class::Rmw { val, .. } => {
            let v = s.val(val, false);
            em.ins(Instruction::LocalSet(v));
            em.ins(Instruction::LocalTee(s.a));
            em.guarded_yield_point(site, Some(s.a));
            em.ins(Instruction::LocalGet(v));
            em.mark(orig, false);
            em.original(op)?;
        }
        Class::Lane { .. } => {
            em.ins(Instruction::LocalSet(s.h));
            em.ins(Instruction::LocalTee(s.a));
            em.guarded_yield_point(site, Some(s.a));
            em.ins(Instruction::LocalGet(s.h));
            em.mark(orig, false);
            em.original(op)?;
        }
        Class::Cmpxchg { val, .. } => {
            let (v1, v2) = (s.val(val, false), s.val(val, true));
            em.ins(Instruction::LocalSet(v2));
            em.ins(Instruction::LocalSet(v1));
            em.ins(Instruction::LocalTee(s.a));
            em.guarded_yield_point(site, Some(s.a));
            em.ins(Instruction::LocalGet(v1));
            em.ins(Instruction::LocalGet(v2));
            em.mark(orig, false);
            em.original(op)?;
        }
        Class::Fence => {
            em.guarded_yield_point(site, None);
            em.mark(orig, false);
            em.original(op)?;
        }
        Class::Notify { .. } => {
            em.ins(Instruction::LocalSet(s.b));
            em.ins(Instruction::LocalSet(s.a));
            em.ins(Instruction::I32Const(site as i32));
            em.ins(Instruction::LocalGet(s.a));
            em.ins(Instruction::LocalGet(s.b));
            em.ins(Instruction::Call(em.rt(RtImport::Notify)));
            // -1: another thread runs first, and the notify waits for this
            // one's next turn (an async host call, which the common case
            // does without).
            em.ins(Instruction::LocalTee(s.r));
            em.ins(Instruction::I32Const(0));
            em.ins(Instruction::I32LtS);
            em.cold_if();
            em.ins(Instruction::I32Const(site as i32));
            em.ins(Instruction::LocalGet(s.a));
            em.ins(Instruction::LocalGet(s.b));
            em.ins(Instruction::Call(em.rt(RtImport::NotifySwitched)));
            em.ins(Instruction::LocalSet(s.r));
            em.ins(Instruction::End);
            em.ins(Instruction::LocalGet(s.r));
        }
        Class::Wait32 { .. } => {
            em.ins(Instruction::LocalSet(s.d));
            em.ins(Instruction::LocalSet(s.b));
            em.ins(Instruction::LocalSet(s.a));
            em.ins(Instruction::I32Const(site as i32));
            em.ins(Instruction::LocalGet(s.a));
            em.ins(Instruction::LocalGet(s.b));
            em.ins(Instruction::LocalGet(s.d));
            em.ins(Instruction::Call(em.rt(RtImport::Wait32)));
        }
        Class::Wait64 { .. } => {
            em.ins(Instruction::LocalSet(s.e));
            em.ins(Instruction::LocalSet(s.d));
            em.ins(Instruction::LocalSet(s.a));
            em.ins(Instruction::I32Const(site as i32));
            em.ins(Instruction::LocalGet(s.a));
            em.ins(Instruction::LocalGet(s.d));
            em.ins(Instruction::LocalGet(s.e));
            em.ins(Instruction::Call(em.rt(RtImport::Wait64)));
        }
        Class::Copy => {
            em.ins(Instruction::LocalSet(s.c));
            em.ins(Instruction::LocalSet(s.b));
            em.ins(Instruction::LocalSet(s.a));
            em.ins(Instruction::I32Const(site as i32));
            em.ins(Instruction::LocalGet(s.a));
            em.ins(Instruction::LocalGet(s.b));
            em.ins(Instruction::LocalGet(s.c));
            em.ins(Instruction::Call(em.rt(RtImport::Copy)));
            em.switch_if();
            em.ins(Instruction::LocalGet(s.a));
            em.ins(Instruction::LocalGet(s.b));
            em.ins(Instruction::LocalGet(s.c));
            em.mark(orig, false);
            em.original(op)?;
        }
        Class::Fill => {
            em.ins(Instruction::LocalSet(s.c));
            em.ins(Instruction::LocalSet(s.b));
            em.ins(Instruction::LocalSet(s.a));
            em.ins(Instruction::I32Const(site as i32));
            em.ins(Instruction::LocalGet(s.a));
            em.ins(Instruction::LocalGet(s.c));
            em.ins(Instruction::Call(em.rt(RtImport::Range)));
            em.switch_if();
            em.ins(Instruction::LocalGet(s.a));
            em.ins(Instruction::LocalGet(s.b));
            em.ins(Instruction::LocalGet(s.c));
            em.mark(orig, false);
            em.original(op)?;
        }
    }
    Ok(())
}
