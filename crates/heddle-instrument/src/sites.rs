//! The site table: every instrumented instruction of the original module,
//! with its kind, size and source position, plus the map from instrumented
//! code offsets back to original ones (so that backtraces of the instrumented
//! module symbolize to source lines).

use super::dwarf::{Frame, Loc};
use serde::{Deserialize, Serialize};

/// Index of a site in [`SiteTable::sites`].
pub type SiteId = u32;

/// What a site does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SiteKind {
    /// A load (plain or atomic).
    Read,
    /// A store (plain or atomic).
    Write,
    /// An atomic read-modify-write (add, sub, and, or, xor, xchg).
    Rmw,
    /// An atomic compare-exchange.
    Cmpxchg,
    /// `memory.atomic.wait32/64`.
    Wait,
    /// `memory.atomic.notify`.
    Notify,
    /// `atomic.fence`.
    Fence,
    /// `memory.copy` (reads the source range, writes the destination range).
    Copy,
    /// `memory.fill` (writes the range).
    Fill,
    /// A loop header: decrements the preemption budget.
    BackEdge,
    /// A function entry: decrements the preemption budget.
    Entry,
    /// A call to a host import (WASI, `wasi.thread-spawn`, the guest SDK).
    Call,
    /// A call to a lock operation (`pthread_mutex_lock`, rwlock/spin locks).
    Lock,
    /// A call to an unlock operation.
    Unlock,
    /// A call to `pthread_cond_wait`/`timedwait` (releases, then re-takes, the mutex).
    CondWait,
    /// A call to an allocator entry point (`malloc`, `calloc`, …).
    Alloc,
    /// A call to `free`.
    Free,
    /// A call to `pthread_create` in user code.
    ThreadCreate,
    /// A call to `pthread_join` in user code.
    ThreadJoin,
    /// A call to `pthread_barrier_wait` in user code: every thread's
    /// arrival happens before every thread's departure (its return acquires
    /// the barrier word every arrival wrote atomically).
    Barrier,
    /// A call to `pthread_once` in user code: the initialiser's end happens
    /// before every caller's return.
    Once,
    /// A call of the program's to a synchronisation function of Rust's
    /// `std::sync` or libc++ that is not copied because it loops (a
    /// channel's `send`, a shared mutex's slow path): its own operations
    /// are the library's, so the decision is made before the call, at the
    /// program's line.
    SyncCall,
}

impl SiteKind {
    /// Short label used in tables and diagrams.
    pub fn label(self) -> &'static str {
        match self {
            SiteKind::Read => "R",
            SiteKind::Write => "W",
            SiteKind::Rmw => "RMW",
            SiteKind::Cmpxchg => "CAS",
            SiteKind::Wait => "wait",
            SiteKind::Notify => "notify",
            SiteKind::Fence => "fence",
            SiteKind::Copy => "copy",
            SiteKind::Fill => "fill",
            SiteKind::BackEdge => "back-edge",
            SiteKind::Entry => "entry",
            SiteKind::Call => "call",
            SiteKind::Lock => "lock",
            SiteKind::Unlock => "unlock",
            SiteKind::CondWait => "cond-wait",
            SiteKind::Alloc => "alloc",
            SiteKind::Free => "free",
            SiteKind::ThreadCreate => "create",
            SiteKind::ThreadJoin => "join",
            SiteKind::Barrier => "barrier",
            SiteKind::Once => "once",
            SiteKind::SyncCall => "sync-call",
        }
    }

    /// Whether the site reads or writes memory.
    pub fn is_access(self) -> bool {
        matches!(
            self,
            SiteKind::Read
                | SiteKind::Write
                | SiteKind::Rmw
                | SiteKind::Cmpxchg
                | SiteKind::Copy
                | SiteKind::Fill
        )
    }

    /// Whether the site writes memory.
    pub fn writes(self) -> bool {
        matches!(
            self,
            SiteKind::Write | SiteKind::Rmw | SiteKind::Cmpxchg | SiteKind::Copy | SiteKind::Fill
        )
    }
}

/// One instrumented instruction of the original module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Site {
    /// Its id (its index in the site table).
    pub id: SiteId,
    /// Function index in the original module.
    pub func: u32,
    /// The function the instruction belongs to in the source, demangled:
    /// the innermost user frame of its inlined call chain when that frame
    /// was inlined into `func` (a closure's atomic inlined from `core`
    /// names the closure), else `func`'s name from the name section, or
    /// `func[N]`.
    pub func_name: String,
    /// Byte offset of the instruction in the original module.
    pub offset: u32,
    /// What the instruction does.
    pub kind: SiteKind,
    /// An atomic instruction (always a yield point, whatever the granularity).
    pub atomic: bool,
    /// Access size in bytes (0 when not an access or when dynamic).
    pub size: u32,
    /// The static `offset=` of the memory argument, added to the dynamic address.
    pub mem_offset: u64,
    /// Source position, when the module has DWARF for it: the line in the
    /// innermost user frame of the inlined call chain.
    pub loc: Option<Loc>,
    /// Whether the instruction is user code: its function's unit is, and
    /// some frame of its inlined chain is (see `DebugInfo::owner`).
    pub user: bool,
    /// For [`SiteKind::Call`]: the import called, as `module.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callee: Option<String>,
    /// A compare-exchange of the C library that takes a lock word from 0
    /// in a loop which, when the word is held, only waits for it to be
    /// released: the fast path of wasi-libc's `pthread_mutex_lock` (normal
    /// mutexes), and `__tl_lock`, its thread-list lock (inlined into
    /// `pthread_create` and the thread exit path; found by its DWARF frame).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub takes_lock: bool,
    /// A call to `pthread_mutex_lock` or `pthread_mutex_unlock` that the
    /// rewriter made take or release a default mutex itself, without
    /// calling, when the C library's own fast path would: see
    /// [`inline_mutex_op`]. The next site (id + 1) is that access to the
    /// lock word: a library compare-exchange (lock) or exchange (unlock)
    /// at the call's line.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inline_mutex: bool,
    /// A yield point before which no scheduling decision is made, because
    /// where between its neighbours it runs is invisible to the program:
    /// see [`decides_nothing`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub private: bool,
}

/// Whether a yield point makes no scheduling decision ([`Site::private`]):
/// it stays a yield point (recorded, checked, seen by the race detector and
/// DPOR), but the thread goes on. Three kinds:
/// - an atomic load, store, read-modify-write or fence of the C library on
///   its own bookkeeping, in a function [`is_private_library_function`]
///   names;
/// - a notify or a futex wait of the C library's synchronisation code
///   ([`is_c_library_sync_function`]). A notify wakes threads that wait in
///   the same library code, on a word the library changed first (a mutex's
///   lock word, a semaphore's value, the thread-list lock, a joiner's wait
///   for the detach state); whether a waiter is woken before or after what
///   other threads do next, it can still be held back after (woken threads
///   are only candidates), and it re-checks the word when it runs. A wait
///   follows the library's own check of the word: if another thread
///   changed it first, the wait returns at once, and if the thread blocks,
///   the change wakes it, and it re-checks the word either way; blocking
///   itself is a decision among the other threads. A program's own waits
///   and notifies (and Rust's standard library's) keep their decisions;
/// - a call to `pthread_create` ([`SiteKind::ThreadCreate`]), and the
///   `wasi.thread-spawn` import it calls: everything between the call and
///   the new thread's existence is the library's bookkeeping, and the
///   decision is made where the spawn returns to the parent, with the new
///   thread among the candidates;
/// - a synchronisation operation of the internals of Rust's standard
///   library or libc++ that no call of the program's asked for
///   ([`is_library_internal_file`]): `thread::spawn`'s and `std::thread`'s
///   handshakes, `Arc`'s and `shared_ptr`'s counts, the environment's lock,
///   a lock's contended path spinning before it waits. The program sees
///   them only through what its own synchronisation (a site of its own)
///   then observes, as shuttle and loom decide only at the program's own
///   operations. A thread that passes many such points in a row (a spin)
///   is given a decision now and then all the same (the runtime's bound).
pub fn decides_nothing(
    kind: SiteKind,
    atomic: bool,
    user: bool,
    func_name: &str,
    callee: Option<&str>,
) -> bool {
    match kind {
        SiteKind::ThreadCreate => true,
        SiteKind::Call => callee == Some("wasi.thread-spawn"),
        SiteKind::Read | SiteKind::Write | SiteKind::Rmw | SiteKind::Cmpxchg | SiteKind::Fence => {
            !user && atomic && is_private_library_function(func_name)
        }
        SiteKind::Notify | SiteKind::Wait => !user && is_c_library_sync_function(func_name),
        _ => false,
    }
}

/// What an operation inside one of the primitives of Rust's standard
/// library (`std::sys::…`: its futex-based mutex, condition variable,
/// once, rwlock and thread parker, and the futex calls under them) is
/// part of, by the innermost such function around it ([`std_primitive`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdPrimitive {
    /// `Mutex::lock`: its compare-exchange from 0 is the fast path; when
    /// the word is held, the contended path only spins on it and waits for
    /// it to be released, as wasi-libc's does ([`Site::takes_lock`]).
    MutexLock,
    /// Anything else of theirs.
    Other,
}

/// [`StdPrimitive`] for a demangled function name (legacy or v0 form),
/// `None` when it is not one of the standard library's primitives.
pub fn std_primitive(name: &str) -> Option<StdPrimitive> {
    let n = name.trim_start_matches('<').replace(">::", "::");
    let rest = n.strip_prefix("std::sys::")?;
    Some(
        if rest.starts_with("sync::mutex::") && rest.ends_with("Mutex::lock") {
            StdPrimitive::MutexLock
        } else {
            StdPrimitive::Other
        },
    )
}

/// Whether an operation of the program's inside a primitive of Rust's
/// standard library makes no decision: its futex waits and wakes, as those
/// of the C library's synchronisation code ([`decides_nothing`]). Each
/// follows the primitive's own change of the word (a mutex's release, a
/// condition variable's counter, a parker's state), which decides; a wait
/// re-checks the word, and blocking is itself a decision among the others.
pub fn std_primitive_decides_nothing(kind: SiteKind) -> bool {
    matches!(kind, SiteKind::Notify | SiteKind::Wait)
}

/// Whether a plain (non-atomic) access of the program's at `file` makes no
/// decision: Rust source. Safe Rust cannot race on plain memory, so where
/// the program's plain accesses fall between its synchronisation changes
/// nothing it can observe; `unsafe` code that does race is still reported
/// by the race detector, which sees every access. shuttle and loom decide
/// only at synchronisation too. C and C++ plain accesses keep their
/// decisions.
pub fn plain_decides_nothing(file: &str) -> bool {
    file.ends_with(".rs")
}

/// Whether a source file (or, for code without line information, a
/// demangled function name) belongs to the internals of Rust's `std`,
/// `core` or `alloc` or of libc++, where a synchronisation operation the
/// program did not ask for is no decision ([`decides_nothing`]).
pub fn is_library_internal_file(file: Option<&str>, func_name: &str) -> bool {
    match file {
        Some(f) => {
            crate::dwarf::is_rust_toolchain_path(f)
                || f.starts_with("/rust/deps/")
                || f.contains("/c++/v1/")
                || f.contains("/libcxx/")
                || f.contains("/libcxxabi/")
        }
        None => func_name.starts_with("std::__1::") || func_name.starts_with("__cxxabiv1::"),
    }
}

/// The wasi-libc functions whose atomics only guard the C library's own
/// state, which the program cannot see except through what the call
/// returns:
/// - the allocator (dlmalloc's lock);
/// - thread creation, start and exit (the thread-list lock, the thread's
///   detach state and its kill lock) and musl's internal `__lock`;
/// - a condition variable's own bookkeeping: its waiter list and lock,
///   each waiter's state and barrier (the chain a broadcast wakes its
///   waiters through, one after another), and the waiter bit and count
///   it sets on the mutex a woken waiter re-takes. A program sees a
///   condition variable only through its waits returning; the release and
///   the re-taking of the mutex keep their decisions (they are in the
///   mutex's functions), and a waiter that blocks leaves the choice of who
///   runs next to the scheduler.
///
/// The order in which two threads pass through them is invisible to the
/// program except through what they return, which the program's own next
/// access orders; a scheduling decision in them only spends the strategy's
/// switches where no bug can be. Most of their atomics are not even yield
/// points ([`unseen_library_atomic`]); the rest (the thread-list lock's
/// compare-exchange, and the allocator's without the memory checker) are
/// recorded, checked and seen by the race detector.
pub fn is_private_library_function(name: &str) -> bool {
    is_allocator_function(name)
        || matches!(
            name,
            "__pthread_create"
                | "__wasi_thread_start_C"
                | "wasi_thread_start"
                | "__lock"
                | "__unlock"
                | "__tl_lock"
                | "__tl_unlock"
                | "__tl_sync"
                | "__pthread_cond_timedwait"
                | "__private_cond_signal"
                | "pthread_cond_signal"
                | "pthread_cond_broadcast"
        )
}

/// dlmalloc's entry points in wasi-libc: the allocator's bookkeeping.
fn is_allocator_function(name: &str) -> bool {
    matches!(
        name,
        "dlmalloc" | "dlfree" | "dlrealloc" | "dlcalloc" | "internal_memalign"
    )
}

/// Whether an atomic of the C library's own bookkeeping is left as it is,
/// without a yield point: an atomic load, store, read-modify-write or fence
/// (never a wait or a notify) in a function [`is_private_library_function`]
/// names, in library code (`user` false), but
/// - the compare-exchange that takes the thread-list lock (`takes_lock`,
///   see [`Site::takes_lock`]): a thread that would wait for the held lock
///   is kept from running there, and a parent holds the lock across the
///   `thread-spawn` import, which is a yield point;
/// - the allocator's, unless the memory checker's allocation hooks are in
///   the module (`memcheck`): they tell the race detector that a block is
///   fresh, which is what the allocator lock's edges would otherwise order.
///
/// Nothing else runs while such an atomic does, so the host would only
/// count it, and where a lock word is held the scheduler reads from memory
/// when it decides. The program sees the order in which two threads pass
/// through this code only through what the calls return (see
/// [`is_private_library_function`]); the race detector orders thread
/// creation, exit and joins with edges of its own, and a wake by its
/// notify. What is given up: these atomics are not in the trace nor in the
/// deadlock diagnosis's word model, the memory checker does not check
/// them, the race detector takes no edge from them, and DPOR does not see
/// two threads' passes through this code as dependent.
pub fn unseen_library_atomic(
    kind: SiteKind,
    user: bool,
    func_name: &str,
    takes_lock: bool,
    memcheck: bool,
) -> bool {
    matches!(
        kind,
        SiteKind::Read | SiteKind::Write | SiteKind::Rmw | SiteKind::Cmpxchg | SiteKind::Fence
    ) && !user
        && !takes_lock
        && is_private_library_function(func_name)
        && (memcheck || !is_allocator_function(func_name))
}

/// The wasi-libc functions that implement synchronisation (pthread's
/// objects, semaphores, stdio's file locks, the futex waits they share) or
/// its own bookkeeping ([`is_private_library_function`]): library code
/// whose notifies follow its own change of the word they wake on, and
/// whose waits re-check the word they wait on. Not Rust's standard
/// library, nor a program's own futex code.
pub fn is_c_library_sync_function(name: &str) -> bool {
    let bare = name.trim_start_matches('_');
    bare.starts_with("pthread_")
        || bare.starts_with("private_cond")
        || bare.starts_with("sem_")
        || matches!(
            bare,
            "lockfile"
                | "unlockfile"
                | "wait"
                | "timedwait"
                | "timedwait_cp"
                | "wasilibc_futex_wait"
        )
        || is_private_library_function(name)
}

/// Which call sites the rewriter inlines a mutex operation at: a call to
/// `pthread_mutex_lock` or `pthread_mutex_unlock` (`callee`, leading
/// underscores ignored) taking the mutex and returning an `i32`.
///
/// The inserted code does what wasi-libc's fast path does, on the same
/// words (a `pthread_mutex_t` is the type in its first word, the lock word
/// in its second, the waiter count in its third), and calls the function
/// whenever that fast path would not be taken:
/// - lock: a default mutex (`type & 15 == 0`) whose lock word is 0 gets
///   `EBUSY` ([`MUTEX_TAKEN`]) there by a compare-exchange;
/// - unlock: a default mutex with no waiters and a lock word without its
///   waiter bit gets 0 there.
///
/// The host sees both as one step: the announcement of the call, whose
/// effects it applies itself when [`inline_mutex_applies`] says the
/// inserted code will not call.
pub fn inline_mutex_op(kind: SiteKind, callee: &str, params: usize, has_result: bool) -> bool {
    let name = callee.trim_start_matches('_');
    params == 1
        && has_result
        && matches!(
            (kind, name),
            (SiteKind::Lock, "pthread_mutex_lock") | (SiteKind::Unlock, "pthread_mutex_unlock")
        )
}

/// The lock word's offset in a `pthread_mutex_t`.
pub const MUTEX_LOCK_WORD: u32 = 4;
/// What the inlined lock stores in a free lock word: wasi-libc's `EBUSY`
/// (WASI's errno 10), as its own fast path does (`trylock` tests the word
/// against that value).
pub const MUTEX_TAKEN: i32 = 10;

/// Whether the code inlined at a `kind` site ([`inline_mutex_op`]) takes
/// or releases the mutex itself, given the mutex's first three words
/// (type, lock word, waiters) just before it runs; otherwise it calls the
/// C library. The rewriter emits exactly this test.
pub fn inline_mutex_applies(kind: SiteKind, [ty, lock, waiters]: [u32; 3]) -> bool {
    ty & 15 == 0
        && match kind {
            SiteKind::Lock => lock == 0,
            SiteKind::Unlock => waiters == 0 && (lock as i32) >= 0,
            _ => false,
        }
}

impl Site {
    /// `file:line` if known, else `function+offset`.
    pub fn where_(&self) -> String {
        match &self.loc {
            Some(l) => l.short(),
            None => format!("{}+{:#x}", self.func_name, self.offset),
        }
    }
}

/// The per-site facts the runtime needs at every yield point, packed
/// (the hot path must not chase the full [`Site`] with its strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteInfo {
    /// What the instruction does.
    pub kind: SiteKind,
    /// Whether it is atomic.
    pub atomic: bool,
    /// Bytes accessed.
    pub size: u32,
    /// The instruction's static offset (`memarg.offset`).
    pub mem_offset: u64,
    /// Takes a lock or waits for it: a call to `pthread_mutex_lock` (not
    /// `trylock`, `timedlock` or a rwlock), or a library compare-exchange
    /// that takes a lock word ([`Site::takes_lock`]: the fast path of
    /// wasi-libc's `pthread_mutex_lock`, reached from library code too —
    /// `pthread_cond_wait` re-taking its mutex, libc++'s `std::mutex` — and
    /// the thread-list lock of `pthread_create` and thread exit).
    pub takes_lock: bool,
    /// A lock or unlock call the rewriter inlines ([`Site::inline_mutex`];
    /// the lock word's access is the next site).
    pub inline_mutex: bool,
    /// No decision is made before it ([`Site::private`], [`decides_nothing`]).
    pub private: bool,
}

/// A run of instrumented code offsets: instrumented `[start, next run's
/// start)` maps to original `orig + (x - start)`, or to `orig` itself when
/// `fixed` (code heddle inserted before an original instruction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetRun {
    /// Instrumented offset where the run starts.
    pub start: u32,
    /// The original offset it maps to.
    pub orig: u32,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    /// Whether the whole run maps to `orig` itself.
    pub fixed: bool,
}

/// A function of the original module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FuncInfo {
    /// Its index in the original module.
    pub index: u32,
    /// Its name (demangled when the module has a name section).
    pub name: String,
    /// Whether it is user code (not the C library or heddle's runtime).
    pub user: bool,
    /// Whether plain accesses in it were instrumented.
    pub instrumented: bool,
}

/// The whole table, serializable and content-addressed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteTable {
    /// The instrumenter's version: a table from another version does not match the module.
    pub instrumenter_version: u32,
    /// SHA-256 of the original module.
    pub module_sha256: String,
    /// The configuration the module was instrumented with, as text.
    pub config: String,
    /// Every yield point, by site id.
    pub sites: Vec<Site>,
    /// Every function of the original module.
    pub funcs: Vec<FuncInfo>,
    /// Number of functions imported by the original module.
    pub orig_imported_funcs: u32,
    /// Number of host imports heddle added (they follow the original ones).
    pub added_imports: u32,
    /// Sorted offset map of the instrumented module's code.
    pub offset_map: Vec<OffsetRun>,
    /// Lowest address where a global object can live (first data segment).
    pub data_start: u32,
    /// Whether allocator calls were instrumented for the memory checker.
    #[serde(default)]
    pub memcheck: bool,
    /// Named globals (from the name section or exports) with their address,
    /// for resolving `var == v` in plans and naming addresses in reports.
    #[serde(default)]
    pub symbols: Vec<Symbol>,
    /// The C library's own lock objects (`dwarf::LIBRARY_LOCK_OBJECTS`):
    /// a yield point on them makes no decision, as the bookkeeping they
    /// guard is invisible to the program.
    #[serde(default)]
    pub private_words: Vec<Symbol>,
    /// Why an instance of the module cannot be reset and reused by later
    /// runs ([`crate::reuse::blocker`]); `None` when it can.
    #[serde(default)]
    pub reuse_blocker: Option<String>,
    /// The thread entry the rewriter added (`rewrite::EXPORT_ENTRY`), by
    /// instrumented function index: not the program's, so in no stack.
    #[serde(default)]
    pub entry_func: Option<u32>,
}

/// A named object in linear memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Symbol {
    /// The symbol's name.
    pub name: String,
    /// Its address in linear memory.
    pub addr: u32,
    /// Its size in bytes.
    pub size: u32,
}

impl SiteTable {
    /// The site with id `id`.
    pub fn site(&self, id: SiteId) -> Option<&Site> {
        self.sites.get(id as usize)
    }

    /// [`SiteInfo`] for every site, by id.
    pub fn compact(&self) -> Vec<SiteInfo> {
        self.sites
            .iter()
            .map(|s| SiteInfo {
                kind: s.kind,
                atomic: s.atomic,
                size: s.size,
                mem_offset: s.mem_offset,
                takes_lock: match s.kind {
                    SiteKind::Lock => {
                        s.callee.as_deref().map(|c| c.trim_start_matches('_'))
                            == Some("pthread_mutex_lock")
                    }
                    SiteKind::Cmpxchg => s.takes_lock,
                    _ => false,
                },
                inline_mutex: s.inline_mutex,
                private: s.private,
            })
            .collect()
    }

    /// The original module offset for an offset in the instrumented module.
    pub fn original_offset(&self, instrumented: u32) -> Option<u32> {
        let i = self.offset_map.partition_point(|r| r.start <= instrumented);
        let run = self.offset_map.get(i.checked_sub(1)?)?;
        Some(if run.fixed {
            run.orig
        } else {
            run.orig + (instrumented - run.start)
        })
    }

    /// The original function index of a function index in the instrumented
    /// module (None for the imports and the thread entry heddle added).
    pub fn original_func(&self, instrumented: u32) -> Option<u32> {
        if Some(instrumented) == self.entry_func {
            None
        } else if instrumented < self.orig_imported_funcs {
            Some(instrumented)
        } else if instrumented < self.orig_imported_funcs + self.added_imports {
            None
        } else {
            Some(instrumented - self.added_imports)
        }
    }

    /// The name of the original function `orig_index` (or `func[N]` when it has none).
    pub fn func_name(&self, orig_index: u32) -> String {
        self.funcs
            .iter()
            .find(|f| f.index == orig_index)
            .map(|f| f.name.clone())
            .unwrap_or_else(|| format!("func[{orig_index}]"))
    }

    /// The global symbol containing `addr`, if any.
    pub fn symbol_at(&self, addr: u32) -> Option<&Symbol> {
        let i = self.symbols.partition_point(|s| s.addr <= addr);
        let s = self.symbols.get(i.checked_sub(1)?)?;
        (addr < s.addr + s.size.max(1)).then_some(s)
    }

    /// Counts of sites by kind, in kind order.
    pub fn counts_by_kind(&self) -> Vec<(SiteKind, usize)> {
        let mut m = std::collections::BTreeMap::new();
        for s in &self.sites {
            *m.entry(s.kind).or_insert(0) += 1;
        }
        m.into_iter().collect()
    }
}

/// Frames resolved for an instrumented-module backtrace.
pub type Stack = Vec<Frame>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_primitives_are_named_in_both_manglings() {
        use StdPrimitive as P;
        let p = std_primitive;
        assert_eq!(
            p("std::sys::sync::mutex::futex::Mutex::lock"),
            Some(P::MutexLock)
        );
        assert_eq!(
            p("<std::sys::sync::mutex::futex::Mutex>::lock"),
            Some(P::MutexLock)
        );
        assert_eq!(
            p("<std::sys::sync::mutex::futex::Mutex>::try_lock"),
            Some(P::Other)
        );
        assert_eq!(
            p("<std::sys::sync::mutex::futex::Mutex>::unlock"),
            Some(P::Other)
        );
        assert_eq!(
            p("<std::sys::sync::condvar::futex::Condvar>::wait"),
            Some(P::Other)
        );
        assert_eq!(p("std::sys::pal::wasi::futex::futex_wake"), Some(P::Other));
        assert_eq!(p("std::sync::poison::mutex::Mutex<T>::lock"), None);
        assert_eq!(p("core::sync::atomic::atomic_compare_exchange"), None);
        assert!(std_primitive_decides_nothing(SiteKind::Wait));
        assert!(!std_primitive_decides_nothing(SiteKind::Cmpxchg));
        assert!(plain_decides_nothing("/src/lib.rs"));
        assert!(!plain_decides_nothing("/src/lib.c"));
    }

    #[test]
    fn decisions_are_left_out_only_where_the_program_cannot_see_the_order() {
        use SiteKind as K;
        let lib = |kind, atomic, name| decides_nothing(kind, atomic, false, name, None);
        // The C library's bookkeeping: its atomics, notifies and waits, not
        // its plain accesses.
        assert!(lib(K::Cmpxchg, true, "dlmalloc"));
        assert!(lib(K::Rmw, true, "__tl_lock"));
        assert!(lib(K::Notify, true, "__wasi_thread_start_C"));
        assert!(lib(K::Notify, true, "wasi_thread_start"));
        assert!(!lib(K::Write, false, "__pthread_create"));
        // A condition variable's own bookkeeping decides nothing; the
        // mutex, semaphore and barrier atomics keep their decisions, their
        // notifies (after the library's own change of the word) do not.
        assert!(lib(K::Cmpxchg, true, "__pthread_cond_timedwait"));
        assert!(lib(K::Cmpxchg, true, "__private_cond_signal"));
        assert!(!lib(K::Cmpxchg, true, "__pthread_mutex_lock"));
        assert!(!lib(K::Cmpxchg, true, "sem_post"));
        assert!(!lib(K::Cmpxchg, true, "pthread_barrier_wait"));
        assert!(lib(K::Notify, true, "__pthread_mutex_unlock"));
        assert!(lib(K::Notify, true, "sem_post"));
        assert!(lib(K::Notify, true, "__unlockfile"));
        assert!(lib(K::Wait, true, "__wasilibc_futex_wait"));
        assert!(lib(K::Wait, true, "__wait"));
        // Rust's standard library and a program's own futex code keep
        // their decisions.
        let rust = "std::sys::pal::wasi::futex::futex_wake";
        assert!(!lib(K::Notify, true, rust));
        assert!(!lib(K::Wait, true, rust));
        assert!(!lib(K::Notify, true, "my_futex_wake"));
        assert!(!decides_nothing(K::Wait, true, true, "__wait", None));
        // The same names in user code are the program's own.
        assert!(!decides_nothing(K::Notify, true, true, "__lock", None));
        assert!(!decides_nothing(K::Cmpxchg, true, true, "dlmalloc", None));
        // Thread creation decides where the spawn returns, not before.
        assert!(decides_nothing(
            K::ThreadCreate,
            false,
            true,
            "main",
            Some("__pthread_create")
        ));
        let call =
            |callee| decides_nothing(K::Call, false, false, "__pthread_create", Some(callee));
        assert!(call("wasi.thread-spawn"));
        assert!(!call("wasi_snapshot_preview1.fd_write"));
        assert!(!call("wasi_snapshot_preview1.sched_yield"));
        assert!(!decides_nothing(
            K::ThreadJoin,
            false,
            true,
            "main",
            Some("__pthread_join")
        ));
    }

    #[test]
    fn only_the_c_librarys_bookkeeping_atomics_are_left_unseen() {
        use SiteKind as K;
        let unseen = |kind, user, func, takes_lock, memcheck| {
            unseen_library_atomic(kind, user, func, takes_lock, memcheck)
        };
        for kind in [K::Read, K::Write, K::Rmw, K::Cmpxchg, K::Fence] {
            assert!(unseen(kind, false, "__wasi_thread_start_C", false, true));
            assert!(unseen(
                kind,
                false,
                "__pthread_cond_timedwait",
                false,
                false
            ));
            assert!(unseen(kind, false, "dlmalloc", false, true));
            // Without the allocation hooks the lock's edges order reuse.
            assert!(!unseen(kind, false, "dlmalloc", false, false));
            // The program's own atomics, and other library objects'.
            assert!(!unseen(kind, true, "__wasi_thread_start_C", false, true));
            assert!(!unseen(kind, false, "__pthread_mutex_lock", false, true));
            assert!(!unseen(kind, false, "sem_post", false, true));
        }
        // Taking the thread-list lock stays a yield point.
        assert!(!unseen(K::Cmpxchg, false, "__pthread_create", true, true));
        // Waits and notifies always stay.
        assert!(!unseen(
            K::Wait,
            false,
            "__wasi_thread_start_C",
            false,
            true
        ));
        assert!(!unseen(
            K::Notify,
            false,
            "__wasi_thread_start_C",
            false,
            true
        ));
    }

    #[test]
    fn only_mutex_lock_and_unlock_calls_are_inlined() {
        let lock = SiteKind::Lock;
        assert!(inline_mutex_op(lock, "pthread_mutex_lock", 1, true));
        assert!(inline_mutex_op(lock, "__pthread_mutex_lock", 1, true));
        assert!(inline_mutex_op(
            SiteKind::Unlock,
            "pthread_mutex_unlock",
            1,
            true
        ));
        assert!(!inline_mutex_op(lock, "pthread_mutex_trylock", 1, true));
        assert!(!inline_mutex_op(lock, "pthread_rwlock_wrlock", 1, true));
        assert!(!inline_mutex_op(
            SiteKind::Unlock,
            "pthread_mutex_lock",
            1,
            true
        ));
        // Not wasi-libc's signature: left alone.
        assert!(!inline_mutex_op(lock, "pthread_mutex_lock", 1, false));
        assert!(!inline_mutex_op(lock, "pthread_mutex_lock", 2, true));
    }

    #[test]
    fn the_fast_path_is_taken_only_where_the_c_library_takes_it() {
        let (lock, unlock) = (SiteKind::Lock, SiteKind::Unlock);
        // A free default mutex is taken; a held one, or another kind, is
        // left to the library (musl's type bits: recursive 1, errorcheck 2,
        // robust 4, priority-inheriting 8, process-shared 128).
        assert!(inline_mutex_applies(lock, [0, 0, 0]));
        assert!(!inline_mutex_applies(lock, [0, MUTEX_TAKEN as u32, 0]));
        for ty in [1, 2, 4, 8, 128 | 2] {
            assert!(!inline_mutex_applies(lock, [ty, 0, 0]));
            assert!(!inline_mutex_applies(unlock, [ty, MUTEX_TAKEN as u32, 0]));
        }
        // A process-shared default mutex (128) is still a default one.
        assert!(inline_mutex_applies(lock, [128, 0, 0]));
        // Released unless a thread waits (counted, or the waiter bit).
        assert!(inline_mutex_applies(unlock, [0, MUTEX_TAKEN as u32, 0]));
        assert!(!inline_mutex_applies(unlock, [0, MUTEX_TAKEN as u32, 1]));
        assert!(!inline_mutex_applies(unlock, [0, 0x8000_0000 | 10, 0]));
        assert!(!inline_mutex_applies(SiteKind::CondWait, [0, 0, 0]));
    }
}
