//! One run: wasmtime, deterministic WASI and the scheduler, on one OS thread.
//!
//! Every guest thread of a run is its own wasmtime `Store` and instance over
//! one fresh `SharedMemory`, and runs as an async fiber. heddle's executor
//! polls exactly one fiber at a time — the thread the scheduler picked — and
//! a yield point that switches threads suspends the running fiber (its
//! `switch` future is pending) so the executor can resume the next one. A new
//! thread's store is instantiated by the executor, outside any fiber, when
//! the thread is first scheduled. No OS thread is created per guest thread,
//! so there is nothing in a run for the OS scheduler to race.
//!
//! This is the only module that uses wasmtime.

pub(crate) mod files;
pub(crate) mod hooks;
pub(crate) mod memcheck;
pub(crate) mod memory;
pub(crate) mod overflow;
pub(crate) mod pipes;
pub mod plain;
pub(crate) mod progress;
pub(crate) mod races;
pub(crate) mod ready;
pub(crate) mod signals;
pub(crate) mod state;
pub(crate) mod wasi;

use crate::instrument::{self, Config as InstrumentConfig, DebugInfo, Frame, SiteTable};
use crate::model::{RawFrame, Status, Tid, NO_SITE};
use crate::paths;
use crate::sched::{self, Strategy};
use crate::trace::{Decision, Event};
use crate::verdict::{BlockedThread, HeldLock, ThreadAt, Verdict};
use anyhow::{anyhow, bail, Result};
use hooks::ThreadExit;
use state::{Divergence, Limits, Outcome, RunCell, RunEnd, RunState, Scheduler};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use wasi_common::WasiCtx;
use wasmtime::{
    AsContextMut, Engine, Global, Linker, Module, SharedMemory, Store, Table, TypedFunc,
};

pub use state::RaceMode;
pub use wasi::Grant;

/// Most guest threads a run may create.
pub const MAX_THREADS: usize = 4096;

/// Slots (a memory and its idle instances) kept per program.
const MAX_SPARE_SLOTS: usize = 64;

/// Idle guest-thread instances kept for later runs, across every program
/// of the process.
const MAX_IDLE_INSTANCES: usize = 2_048;

/// Idle instances kept now (see [`MAX_IDLE_INSTANCES`]).
static IDLE_INSTANCES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Size of a guest thread's fiber stack (wasm frames and host calls).
const STACK_SIZE: usize = 2 << 20;

/// Fiber stacks kept for reuse when no guest thread uses them: as many as
/// one run may have threads, so that a program with many threads maps its
/// stacks in its first run only (a stack keeps resident only the pages its
/// deepest call touched).
const MAX_FREE_STACKS: usize = MAX_THREADS;

/// At most this many raw frames' symbols are kept for reuse
/// (`Program::symbolized`): a few megabytes; frames beyond it are
/// symbolized each time.
const SYMBOLIZED_MAX: usize = 1 << 16;

/// The data of each guest thread's store.
pub(crate) struct ThreadCtx {
    pub tid: Tid,
    pub run: Arc<RunCell>,
    pub wasi: WasiCtx,
    /// What the WASI calls heddle answers itself are answered from.
    pub answers: Arc<wasi::Answers>,
    /// [`Program`]'s `memory_export`.
    pub memory_export: bool,
    /// The instrumented module's preemption-budget global.
    pub budget: Option<Global>,
    /// The instrumented module's skip counter (the fast path).
    pub skip: Option<Global>,
    /// `__stack_pointer`, for unwinding `pthread_exit`.
    pub sp: Option<Global>,
    /// The function table, for `call_catching`.
    pub table: Option<Table>,
    /// The module's own function table, for calls by function pointer
    /// (signal delivery).
    pub funcs: Option<Table>,
    /// False while the instance's start function runs.
    pub started: bool,
}

impl ThreadCtx {
    /// Store data that belongs to no run (a store used only to link).
    fn detached() -> Result<ThreadCtx> {
        Ok(ThreadCtx {
            tid: 0,
            run: RunCell::detached(),
            wasi: wasi::context("", &[], &[], &[], &wasi::Output::default())?,
            answers: Default::default(),
            memory_export: false,
            budget: None,
            skip: None,
            sp: None,
            table: None,
            funcs: None,
            started: false,
        })
    }
}

/// Decisions a campaign's run keeps for its replay file (20 bytes each):
/// a run with more is rerun to write it ([`RunConfig::keep_decisions`]).
pub const CAMPAIGN_KEPT_DECISIONS: u64 = 1 << 20;

/// The default step budget: ten times the longest unit tests of real
/// libraries heddle was measured on (10^6–10^7 steps), so that they finish;
/// a run still making progress there is inconclusive, not a failure.
pub const DEFAULT_MAX_STEPS: u64 = 100_000_000;

/// The default hang window: 2^20 steps without progress.
pub const DEFAULT_HANG_STEPS: u64 = 1 << 20;

/// The default fairness bound: a ready thread runs after at most 2^16
/// steps of others (rounded up to the next check, every 4,096 steps).
pub const DEFAULT_FAIR_STEPS: u64 = 1 << 16;

/// The longest a calibration probe run goes ([`Program::calibrate`]).
pub const CALIBRATION_MAX_STEPS: u64 = 1 << 21;

/// Probe runs of [`Program::calibrate_with`] by (strategy, seed): their
/// decisions.
#[derive(Debug, Default)]
pub struct Probes(std::collections::BTreeMap<(String, u64), Vec<Decision>>);

/// A run given up before its end: its deadline passed
/// ([`RunConfig::deadline`]) or a stop signal came. It has no result.
#[derive(Debug, Clone, Copy)]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the run was given up (time budget or stop signal)")
    }
}

impl std::error::Error for Cancelled {}

/// Whether `e` is a run given up ([`Cancelled`]).
pub fn cancelled(e: &anyhow::Error) -> bool {
    e.downcast_ref::<Cancelled>().is_some()
}

/// Everything that determines a run besides the module.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// `argv[1..]`.
    pub args: Vec<String>,
    /// The program's environment.
    pub env: Vec<(String, String)>,
    /// The run's seed (strategy, clock, random bytes all derive from it).
    pub seed: u64,
    /// Strategy spec (see [`sched::parse`]).
    pub strategy: String,
    /// Steps (yield points) after which a run that still makes progress
    /// is stopped as too long (inconclusive).
    pub max_steps: u64,
    /// Steps without progress that make a run a hang (at most a quarter of
    /// `max_steps` is used).
    pub hang_steps: u64,
    /// Steps a ready thread may be kept waiting while others run before it
    /// is run regardless of the strategy (0: never).
    pub fair_steps: u64,
    /// Virtual time before the run is declared a hang.
    pub max_time_ns: u64,
    /// Preemption budget range per slice (back-edges).
    pub budget: (u32, u32),
    /// The exit code that counts as a pass.
    pub expected_exit: i32,
    /// Record every executed event (for reports).
    pub record_events: bool,
    /// Capture stacks where threads block (for deadlock reports).
    pub diagnostics: bool,
    /// Directories granted to the guest.
    pub grants: Vec<Grant>,
    /// Decisions to apply first (replay, exploration).
    pub forced: Vec<Decision>,
    /// A run that makes more decisions than this keeps none of them in
    /// [`RunResult::decisions`] (it still counts and hashes them): a
    /// campaign's runs keep [`CAMPAIGN_KEPT_DECISIONS`] at most, so that a
    /// long run's memory does not grow with its length.
    pub keep_decisions: u64,
    /// A decision beyond `forced` is a divergence.
    pub strict: bool,
    /// Record what each decision chose from ([`RunResult::choice_points`]).
    pub record_choices: bool,
    /// Capture the stack of every recorded event ([`RunResult::event_stacks`]).
    pub event_stacks: bool,
    /// Global variables whose final values to report ([`RunResult::observed`]).
    pub observe: Vec<String>,
    /// Happens-before race detection ([`RunResult::races`]).
    pub races: RaceMode,
    /// What earlier runs of the campaign showed, for a strategy that
    /// learns ([`sched::learns`]); None: nothing yet.
    pub corpus: Option<std::sync::Arc<sched::rff::Corpus>>,
    /// When to give the run up ([`Cancelled`]): not part of what the run
    /// does, only of whether it ends.
    pub deadline: Option<std::time::Instant>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            args: Vec::new(),
            env: Vec::new(),
            seed: 0,
            strategy: "random".into(),
            max_steps: DEFAULT_MAX_STEPS,
            hang_steps: DEFAULT_HANG_STEPS,
            fair_steps: DEFAULT_FAIR_STEPS,
            max_time_ns: 3_600 * 1_000_000_000,
            budget: (1, 2000),
            expected_exit: 0,
            record_events: false,
            diagnostics: false,
            grants: Vec::new(),
            forced: Vec::new(),
            keep_decisions: u64::MAX,
            strict: false,
            record_choices: false,
            event_stacks: false,
            observe: Vec::new(),
            races: RaceMode::Report,
            corpus: None,
            deadline: None,
        }
    }
}

/// The final value of an observed global.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The variable's name.
    pub name: String,
    /// Its address.
    pub addr: u32,
    /// Its size in bytes.
    pub size: u32,
    /// Little-endian value (when size <= 8), sign-extended from `size` bytes.
    pub value: Option<i64>,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// How the run ended.
    pub verdict: Verdict,
    /// The canonical strategy spec used.
    pub strategy: String,
    /// What the run showed its strategy, for the corpus of later runs
    /// ([`sched::Strategy::take_feedback`]; empty for most strategies).
    pub feedback: sched::rff::Feedback,
    /// The decisions made, in order (the schedule): all of them, or none
    /// when there were more than [`RunConfig::keep_decisions`]
    /// ([`RunResult::decisions_complete`]).
    pub decisions: Vec<Decision>,
    /// How many decisions the run made.
    pub decision_count: u64,
    /// The hash of the schedule ([`crate::trace::schedule_hash`] of all the
    /// decisions, kept or not).
    pub schedule: u64,
    /// The events recorded (when the configuration asks for them).
    pub events: Vec<Event>,
    /// `heddle_event` labels: (step, tid, label).
    pub labels: Vec<(u64, Tid, String)>,
    /// Names given with `heddle_thread_name`, by tid.
    pub thread_names: Vec<Option<String>>,
    /// What the program wrote to stdout.
    pub stdout: Vec<u8>,
    /// What the program wrote to stderr.
    pub stderr: Vec<u8>,
    /// Yield points executed.
    pub steps: u64,
    /// Times the running thread changed.
    pub switches: u64,
    /// Switches away from a thread that could have gone on.
    pub preemptions: u64,
    /// Threads the run had, the main thread included.
    pub threads: u32,
    /// Set when a replay did not follow its recording.
    pub divergence: Option<Divergence>,
    /// With `record_choices`: one entry per decision.
    pub choice_points: Vec<state::ChoicePoint>,
    /// With `event_stacks`: the symbolized stack of each event (innermost
    /// first). Events with the same raw stack share one symbolized stack.
    pub event_stacks: Vec<Arc<[Frame]>>,
    /// With `observe`: the final value of each variable.
    pub observed: Vec<Observed>,
    /// Data races found (one per pair of sites), with `races` on.
    pub races: Vec<crate::verdict::RaceReport>,
    /// Yield-point sites the run reached, as a bitset by site id (the sites
    /// of yield points the guest skipped on the fast path are not in it).
    pub sites_hit: Vec<u64>,
    /// Of `steps`, the yield points the guest skipped on the fast path
    /// (counted, never seen by the host).
    pub skipped: u64,
    /// With `record_events`: `pthread_t` values of threads created in user
    /// code, with their tids (what a `Join` event's address means).
    pub thread_handles: Vec<(u32, Tid)>,
    /// The creator of each thread, by tid (0 for main itself).
    pub thread_parents: Vec<Tid>,
    /// With `record_events` and the memory checker: the heap blocks known at
    /// the end of the run (live or quarantined).
    pub heap_blocks: Vec<HeapBlockInfo>,
}

/// A heap block and where it was allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapBlockInfo {
    /// First byte the guest may use.
    pub start: u32,
    /// Bytes asked for.
    pub size: u32,
    /// The allocating thread.
    pub alloc_tid: Tid,
    /// The allocation call site.
    pub alloc_site: crate::instrument::SiteId,
}

impl RunResult {
    /// Whether [`RunResult::decisions`] holds every decision of the run.
    pub fn decisions_complete(&self) -> bool {
        self.decisions.len() as u64 == self.decision_count
    }

    /// SHA-256 of stdout, a zero byte, and stderr.
    pub fn output_hash(&self) -> String {
        let mut all = self.stdout.clone();
        all.push(0);
        all.extend_from_slice(&self.stderr);
        paths::sha256_hex(&all)
    }
}

/// A module ready to run many times: compiled once, shared by every run
/// (and by worker threads).
pub struct Program {
    engine: Engine,
    module: Module,
    linker: Linker<ThreadCtx>,
    /// Memories and instances of finished runs, reset for the next. Boxed:
    /// a slot is a kilobyte, and goes from here to a run and back every run.
    #[allow(clippy::vec_box)]
    spare_slots: Mutex<Vec<Box<Slot>>>,
    /// Whether guest-thread instances are reset and reused
    /// ([`Program::set_instance_reuse`]).
    reuse: bool,
    /// The memory right after the first instance's start function ran on a
    /// zeroed memory (what every run starts from), up to its last non-zero
    /// byte.
    image: std::sync::OnceLock<memory::Image>,
    /// Which pages of the process are populated, for the memory reset
    /// between runs (None where the kernel does not say).
    page_map: Option<memory::PageMap>,
    /// The mutable globals of the instance the image was taken from, right
    /// after its start function: every run's main thread starts from them.
    main_globals: std::sync::OnceLock<Vec<wasmtime::Val>>,
    /// The instrumented sites, symbolized.
    pub sites: Arc<SiteTable>,
    site_info: Arc<[instrument::SiteInfo]>,
    original: Arc<Vec<u8>>,
    debug: Mutex<Option<DebugInfo>>,
    /// What [`Program::symbolize`] made of each raw frame it has seen: the
    /// failing runs of a campaign mostly fail at the same few stacks, and
    /// looking a frame up in the DWARF and demangling its names was most of
    /// a failing run's cost. Only looked up, never iterated.
    symbolized: Mutex<HashMap<RawFrame, Arc<[Frame]>>>,
    /// Where the module's stacks are, read from `original` when first needed.
    stack_layout: std::sync::OnceLock<overflow::StackLayout>,
    mem_pages: (u32, u32),
    has_thread_start: bool,
    /// The module exports its imported memory (memory 0, the run's) as
    /// `memory`, where wasi-common's calls read and write: heddle answers
    /// WASI calls itself only then, and otherwise lets wasi-common answer
    /// (with the memory exported as `memory`, or its error without one).
    memory_export: bool,
    /// SHA-256 of the original (uninstrumented) module.
    pub module_sha256: String,
    /// How the module was instrumented.
    pub instrumentation: InstrumentConfig,
}

/// What a wasm `unreachable` in user code usually is.
const UB_TRAP: &str = "clang turns undefined behaviour it can see (an uninitialised \
    variable, a missing return, an out-of-range shift, a null dereference, \
    `__builtin_unreachable()` reached) into this trap at -O1 and above, heddle's default; \
    build with -O0 (`--cflag -O0`) to run the code as written, or with \
    `-fsanitize=undefined -fsanitize-trap=undefined` to trap where it happens";

/// The process-wide engine: every program shares its compiled-code
/// registry and its instance/stack pool.
fn engine() -> Result<Engine> {
    static ENGINE: std::sync::OnceLock<std::result::Result<Engine, String>> =
        std::sync::OnceLock::new();
    ENGINE
        .get_or_init(|| new_engine().map_err(|e| e.to_string()))
        .clone()
        .map_err(|e| anyhow!("{e}"))
}

fn new_engine() -> Result<Engine> {
    let mut c = wasmtime::Config::new();
    c.wasm_threads(true);
    c.shared_memory(true);
    // heddle's rewriter marks its cold paths (host calls the fast path
    // skips) with branch hints; they change code layout, never semantics.
    c.wasm_branch_hinting(true);
    // C++ exceptions (clang's legacy encoding, translated by the
    // instrumenter into the final one): `try_table`, `throw_ref`, exnref.
    c.wasm_exceptions(true);
    c.wasm_backtrace_max_frames(std::num::NonZeroUsize::new(64));
    c.cranelift_opt_level(wasmtime::OptLevel::Speed);
    c.async_stack_size(STACK_SIZE);
    c.max_wasm_stack(1 << 20);
    // Instances come from the on-demand allocator: a run reuses its slot's
    // instances, so instantiation is rare. Fiber stacks come from
    // `FiberStacks`, which maps each stack (and its guard page) on first
    // use and keeps it: a guest thread's start maps nothing, and a process
    // maps only the stacks it uses at once (a pool reserved up front costs
    // a `mprotect` per stack at start-up, tens of milliseconds).
    c.allocation_strategy(wasmtime::InstanceAllocationStrategy::OnDemand);
    c.with_host_stack(Arc::new(FiberStacks));
    Engine::new(&c).map_err(|e| anyhow!("cannot create the wasm engine: {e}"))
}

impl Program {
    /// Checks, instruments and compiles `bytes` (the original module).
    pub fn new(bytes: &[u8], cfg: &InstrumentConfig) -> Result<Program> {
        let info = crate::modinfo::ModuleInfo::parse(bytes)?;
        info.check_runnable()?;
        crate::instrument::adaptable_stubs(bytes)?;
        let (min, max) = match info.imported_memory() {
            Some(crate::modinfo::ImportKind::Memory {
                min_pages,
                max_pages,
                ..
            }) => (*min_pages as u32, max_pages.unwrap_or(65536) as u32),
            _ => bail!("module has no shared memory import"),
        };
        let inst = instrument::instrument_cached(bytes, cfg)?;
        let engine = engine()?;
        let module = compile_cached(&engine, &inst.module)?;
        let mut linker: Linker<ThreadCtx> = Linker::new(&engine);
        wasi::add_to_linker(&mut linker)?;
        hooks::add_to_linker(&mut linker)?;
        signals::add_to_linker(&mut linker)?;
        pipes::add_to_linker(&mut linker)?;
        for imp in module.imports() {
            if !provided(imp.module(), imp.name()) {
                bail!(
                    "module imports `{}.{}`, which heddle does not provide (only WASI preview 1, wasi.thread-spawn and the heddle guest SDK)",
                    imp.module(),
                    imp.name()
                );
            }
        }
        let memory_export = info.exports_memory("memory", 0);
        Ok(Program {
            engine,
            module,
            linker,
            spare_slots: Mutex::new(Vec::new()),
            reuse: inst.sites.reuse_blocker.is_none(),
            image: std::sync::OnceLock::new(),
            page_map: memory::PageMap::open(),
            main_globals: std::sync::OnceLock::new(),
            site_info: inst.sites.compact().into(),
            sites: Arc::new(inst.sites),
            original: Arc::new(bytes.to_vec()),
            debug: Mutex::new(None),
            symbolized: Mutex::new(HashMap::new()),
            stack_layout: std::sync::OnceLock::new(),
            mem_pages: (min, max),
            has_thread_start: info.exports_func("wasi_thread_start"),
            memory_export,
            module_sha256: paths::sha256_hex(bytes),
            instrumentation: cfg.clone(),
        })
    }

    /// The global variable called `name` (from DWARF), or an error naming
    /// it and listing the nearest existing names.
    pub fn resolve_symbol(&self, name: &str) -> Result<&instrument::Symbol> {
        if let Some(s) = self.sites.symbols.iter().find(|s| s.name == name) {
            return Ok(s);
        }
        let names: Vec<&str> = self.sites.symbols.iter().map(|s| s.name.as_str()).collect();
        let near = crate::text::nearest(name, &names, 5);
        if near.is_empty() {
            bail!("unknown variable `{name}` (the module has no global variables with debug info)");
        }
        bail!("unknown variable `{name}`; nearest: {}", near.join(", "))
    }

    /// Names the cause of a trap or a memory error where heddle can tell
    /// it: a stack overflow (see [`overflow`]), or the trap the compiler
    /// makes of undefined behaviour.
    fn explain(&self, verdict: Verdict, regs: Option<overflow::Regs>, st: &RunState) -> Verdict {
        let overflow = |tid: Tid| {
            let regs = regs.filter(|r| r.tid == tid)?;
            self.stack_layout()
                .overflow(regs, |a| st.read_le(a, 4).map(|v| v as u32))
        };
        match verdict {
            Verdict::Trap {
                trap,
                message,
                tid,
                stack,
            } if !matches!(
                trap.as_str(),
                "abort" | "instantiation" | "spawn" | "internal"
            ) =>
            {
                if let Some(o) = overflow(tid) {
                    return Verdict::Trap {
                        trap: "stack-overflow".into(),
                        message: o.message(&message),
                        tid,
                        stack,
                    };
                }
                let missing = stack
                    .first()
                    .and_then(|f| f.function.as_deref())
                    .and_then(crate::cc::missing::missing_names);
                let message = match trap.as_str() {
                    "unreachable" if missing.is_some() => format!(
                        "call to missing function {} (linked with \
                         -Wl,--unresolved-symbols=ignore-all: no definition was found)",
                        missing.unwrap_or_default().join(" or ")
                    ),
                    "stack-overflow" => format!(
                        "{message}: the wasm call stack ran out (recursion too deep, or \
                         unbounded)"
                    ),
                    "unreachable" if crate::verdict::user_frame(&stack).is_some() => {
                        format!("{message}: {UB_TRAP}")
                    }
                    _ => message,
                };
                Verdict::Trap {
                    trap,
                    message,
                    tid,
                    stack,
                }
            }
            Verdict::Memory(m) => match overflow(m.tid) {
                Some(o) => Verdict::Trap {
                    trap: "stack-overflow".into(),
                    message: o.message(&format!(
                        "the memory checker saw a {} at {:#x}",
                        m.error, m.addr
                    )),
                    tid: m.tid,
                    stack: m.stack,
                },
                None => Verdict::Memory(m),
            },
            v => v,
        }
    }

    /// Whether function `orig` of the original module is user code.
    fn is_user_func(&self, orig: u32) -> bool {
        self.sites.funcs.iter().any(|f| f.index == orig && f.user)
    }

    /// Where the module's stacks are ([`overflow::StackLayout`]).
    fn stack_layout(&self) -> &overflow::StackLayout {
        self.stack_layout
            .get_or_init(|| overflow::StackLayout::parse(&self.original))
    }

    /// Symbolizes raw frames through the site table and the original DWARF.
    pub fn symbolize(&self, raw: &[RawFrame]) -> Vec<Frame> {
        let mut memo = self.symbolized.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        for f in raw {
            if let Some(frames) = memo.get(f) {
                out.extend_from_slice(frames);
                continue;
            }
            let frames: Arc<[Frame]> = self.symbolize_frame(f).into();
            out.extend_from_slice(&frames);
            if memo.len() < SYMBOLIZED_MAX {
                memo.insert(*f, frames);
            }
        }
        out
    }

    /// The frames of one raw frame: its function's inlined calls, innermost
    /// first, then the function itself.
    fn symbolize_frame(&self, f: &RawFrame) -> Vec<Frame> {
        let mut guard = self.debug.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            *guard = DebugInfo::parse(&self.original).ok();
        }
        let debug = guard.as_ref();
        let Some(orig_func) = self.sites.original_func(f.func) else {
            return Vec::new();
        };
        let name = self.sites.func_name(orig_func);
        let off = f.offset.and_then(|o| self.sites.original_offset(o));
        let mut frames = match (debug, off) {
            (Some(d), Some(off)) => d.frames(off as u64),
            _ => Vec::new(),
        };
        // No line for the instruction (code the compiler added, such as
        // the trap it makes of undefined behaviour, may have none): a
        // user function keeps its file, line 0, so that the report names
        // it rather than a library caller.
        let unplaced = frames.last().is_none_or(|f| f.loc.is_none());
        let fallback = match (debug, off) {
            (Some(d), Some(off)) if unplaced && self.is_user_func(orig_func) => {
                d.unit_name(off as u64).map(|(file, _)| instrument::Loc {
                    file,
                    line: 0,
                    col: 0,
                })
            }
            _ => None,
        };
        match frames.last_mut() {
            None => vec![Frame {
                function: Some(name),
                loc: fallback,
                offset: off.map(u64::from),
            }],
            Some(outer) => {
                if outer.loc.is_none() {
                    outer.loc = fallback;
                }
                // The outermost frame is the wasm function itself:
                // code without a DWARF name (assembly) keeps the name
                // its symbol has.
                if outer.function.as_deref().is_none_or(str::is_empty) {
                    outer.function = Some(name);
                }
                frames
            }
        }
    }

    /// Symbolizes the stacks of every recorded event, each distinct raw
    /// stack once (a run of millions of steps has a few hundred distinct
    /// stacks; symbolizing each event's stack on its own took minutes and
    /// gigabytes).
    fn symbolize_all(&self, raw: &[Vec<RawFrame>]) -> Vec<Arc<[Frame]>> {
        use std::hash::{Hash, Hasher};
        let hash = |s: &[RawFrame]| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            for f in s {
                (f.func, f.offset).hash(&mut h);
            }
            h.finish()
        };
        // An event with a raw stack, and that stack symbolized.
        type Seen = (usize, Arc<[Frame]>);
        // Per hash of a raw stack: those with that hash.
        let mut seen: HashMap<u64, Vec<Seen>> = HashMap::new();
        let mut out: Vec<Arc<[Frame]>> = Vec::with_capacity(raw.len());
        for (i, s) in raw.iter().enumerate() {
            if i > 0 && raw[i - 1] == *s {
                let prev = out[i - 1].clone();
                out.push(prev);
                continue;
            }
            let bucket = seen.entry(hash(s)).or_default();
            let sym = match bucket.iter().find(|(j, _)| raw[*j] == *s) {
                Some((_, sym)) => sym.clone(),
                None => {
                    let sym: Arc<[Frame]> = self.symbolize(s).into();
                    bucket.push((i, sym.clone()));
                    sym
                }
            };
            out.push(sym);
        }
        out
    }

    /// Whether guest-thread instances are reset and reused by later
    /// threads and runs (the default, when the module allows it: see
    /// `instrument::reuse`); off, every guest thread gets a fresh instance.
    /// A run is the same either way (tested byte for byte).
    pub fn set_instance_reuse(&mut self, on: bool) {
        self.reuse = on && self.sites.reuse_blocker.is_none();
        self.spare_slots
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Whether instances are reused ([`Program::set_instance_reuse`]).
    pub fn reuses_instances(&self) -> bool {
        self.reuse
    }

    /// A slot for a run: a recycled one, or a new memory (zeroed) linked
    /// to the module.
    fn take_slot(&self) -> Result<Box<Slot>> {
        if let Some(slot) = self
            .spare_slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
        {
            return Ok(slot);
        }
        let memory = SharedMemory::new(
            &self.engine,
            wasmtime::MemoryType::shared(self.mem_pages.0, self.mem_pages.1),
        )
        .map_err(|e| anyhow!("cannot create shared memory: {e}"))?;
        let mut linker = self.linker.clone();
        let store = Store::new(&self.engine, ThreadCtx::detached()?);
        linker
            .define(&store, "env", "memory", memory.clone())
            .map_err(|e| anyhow!("cannot provide env.memory: {e}"))?;
        drop(store);
        let pre = linker
            .instantiate_pre(&self.module)
            .map_err(|e| anyhow!("cannot link the module: {e}"))?;
        Ok(Box::new(Slot {
            memory,
            pre,
            idle: Vec::new(),
            scratch: Default::default(),
            run: None,
            wasi: None,
            populated: Default::default(),
        }))
    }

    /// Resets the slot of a finished run (its memory as the next run
    /// starts: the image, or zeros) and keeps it.
    fn return_slot(&self, mut slot: Box<Slot>, pages: u32) {
        let image = self.image.get().filter(|_| self.reuse);
        // SAFETY: the run is over: no guest thread of it runs any more, and
        // this memory belongs to no other run.
        let mem = unsafe { memory::GuestMemory::serialized(slot.memory.data()) };
        let empty = memory::Image::default();
        mem.reset(
            image.unwrap_or(&empty),
            (pages as usize) << 16,
            self.page_map.as_ref(),
            &mut slot.populated,
        );
        let mut spare = self.spare_slots.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() < MAX_SPARE_SLOTS {
            spare.push(slot);
        }
    }

    /// Fills in a strategy's estimates (PCT's `k`, SURW's per-thread event
    /// counts; see [`sched::Estimate`]) from probe runs: seeds
    /// `0..sched::probe_runs` under `random`, which is itself deterministic,
    /// so every run of a campaign uses the same parameters. `k` is the number
    /// of decisions of seed 0; for a strategy that draws change points
    /// ([`sched::draws_change_points`]) it is the longer of that and the
    /// strategy's own seed-0 run, widened by [`sched::change_point_range`]
    /// (a priority scheduler keeps threads waiting that random walk would
    /// have run, so its runs can be longer, and a change point is never
    /// drawn past `k`). Other strategies come back unchanged.
    ///
    /// A probe run stops at [`CALIBRATION_MAX_STEPS`] (a long program's
    /// estimate is then that of its first steps), and gives up at
    /// `cfg.deadline` (an error saying so).
    pub fn calibrate(&self, cfg: RunConfig) -> Result<RunConfig> {
        self.calibrate_with(cfg, &mut Probes::default())
    }

    /// [`Program::calibrate`], taking probe runs already made under the
    /// same configuration from `probes` (the members of a portfolio share
    /// the `random` ones).
    pub fn calibrate_with(&self, mut cfg: RunConfig, probes: &mut Probes) -> Result<RunConfig> {
        if !sched::needs_estimate(&cfg.strategy) {
            return Ok(cfg);
        }
        let original = cfg.strategy.clone();
        let mut probe = |strategy: String, seed: u64| -> Result<Vec<crate::trace::Decision>> {
            if let Some(d) = probes.0.get(&(strategy.clone(), seed)) {
                return Ok(d.clone());
            }
            let run = RunConfig {
                strategy: strategy.clone(),
                seed,
                record_events: false,
                diagnostics: false,
                forced: Vec::new(),
                max_steps: cfg.max_steps.min(CALIBRATION_MAX_STEPS),
                ..cfg.clone()
            };
            let d = match self.run(&run) {
                Ok(r) => r.decisions,
                Err(e) if cancelled(&e) => bail!(
                    "the time budget ran out while calibrating `{original}` (a probe run of seed \
                     {seed} under `{strategy}`): give a longer --time-budget, or strategies that \
                     need no calibration (random, pos, rr)"
                ),
                Err(e) => return Err(e),
            };
            probes.0.insert((strategy, seed), d.clone());
            Ok(d)
        };
        let mut runs = Vec::new();
        for seed in 0..sched::probe_runs(&cfg.strategy) {
            runs.push(probe("random".into(), seed)?);
        }
        let mut est = sched::Estimate::from_runs(&runs);
        let mut spec = sched::parse_with(&cfg.strategy, &est)?.spec();
        if sched::draws_change_points(&cfg.strategy) {
            let own = probe(spec.clone(), 0)?.len() as u64;
            est.steps = sched::change_point_range(est.steps.max(own));
            spec = sched::parse_with(&cfg.strategy, &est)?.spec();
        }
        cfg.strategy = spec;
        Ok(cfg)
    }

    /// Runs the program once.
    pub fn run(&self, cfg: &RunConfig) -> Result<RunResult> {
        let mut strategy: Box<dyn Strategy> = sched::parse(&cfg.strategy, 1000)?;
        if let Some(corpus) = &cfg.corpus {
            strategy.learn_from(corpus.clone());
        }
        self.run_with_strategy(cfg, strategy)
    }

    /// Runs the program once with a strategy object instead of
    /// `cfg.strategy` (explorers and external strategies). `cfg.forced`
    /// still applies first.
    pub fn run_with_strategy(
        &self,
        cfg: &RunConfig,
        strategy: Box<dyn Strategy>,
    ) -> Result<RunResult> {
        let spec = strategy.spec();
        let mut slot = self.take_slot()?;
        let limits = Limits {
            max_steps: cfg.max_steps,
            hang_steps: cfg.hang_steps,
            fair_steps: cfg.fair_steps,
            deadline: cfg.deadline,
            max_time_ns: cfg.max_time_ns,
            budget: cfg.budget,
            record_events: cfg.record_events || cfg.event_stacks,
            diagnostics: cfg.diagnostics,
            event_stacks: cfg.event_stacks,
            races: cfg.races,
        };
        let observe: Vec<instrument::Symbol> = cfg
            .observe
            .iter()
            .map(|n| self.resolve_symbol(n).cloned())
            .collect::<Result<_>>()?;
        let mut sched = Scheduler::new(strategy, cfg.forced.clone(), cfg.strict);
        sched.keep = cfg.keep_decisions;
        if cfg.record_choices {
            sched.choice_points = Some(Vec::new());
        }
        let run = slot.run.get_or_insert_with(RunCell::detached).clone();
        run.renew(|| {
            RunState::new(
                slot.memory.clone(),
                self.mem_pages,
                self.sites.clone(),
                self.site_info.clone(),
                sched,
                limits,
                cfg.seed,
                &mut slot.scratch,
            )
        });
        let session =
            wasi::Session::reuse(slot.wasi.take(), "target", &cfg.args, &cfg.env, &cfg.grants)?;

        let mut exec = Executor {
            program: self,
            run: run.clone(),
            wasi: session.ctx.clone(),
            answers: session.answers.clone(),
            slot,
            threads: Vec::new(),
            regs: None,
        };
        exec.start()?;
        let end = exec.drive();
        // A memory error ends the run in a host call: its thread is still
        // suspended there, and its registers are read as it unwinds.
        let want = match &run.get().outcome {
            Some(Outcome::Memory(m)) => Some(m.tid),
            _ => None,
        };
        let (mut slot, regs) = exec.close(want);
        let (stdout, stderr) = session.output.take();
        if self.reuse && session.as_built() {
            slot.wasi = Some(session);
        }
        let mut st = run.get();
        if let Some(failure) = st.sched.strategy.failure() {
            let used = st.memory.high_pages;
            drop(st);
            run.retire(&mut slot.scratch);
            self.return_slot(slot, used);
            return Err(sched::StrategyFailed(failure).into());
        }
        let used = st.memory.high_pages;
        let observed = observe
            .iter()
            .map(|s| {
                let size = s.size.clamp(1, 8);
                let value = st.read_le(s.addr, size).map(|v| {
                    let shift = 64 - 8 * size;
                    ((v << shift) as i64) >> shift
                });
                Observed {
                    name: s.name.clone(),
                    addr: s.addr,
                    size: s.size,
                    value,
                }
            })
            .collect();
        let feedback = st.sched.strategy.take_feedback();
        let r = self.finish(&mut st, end, regs, stdout, stderr, spec, cfg);
        drop(st);
        run.retire(&mut slot.scratch);
        self.return_slot(slot, used);
        let mut r = r?;
        r.observed = observed;
        r.feedback = feedback;
        Ok(r)
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        st: &mut RunState,
        end: Ended,
        regs: Option<overflow::Regs>,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
        strategy: String,
        cfg: &RunConfig,
    ) -> Result<RunResult> {
        for tid in 0..st.threads.len() as Tid {
            if st.limits.record_events {
                st.fill_last_value(tid);
            }
        }
        let mut divergence = None;
        let verdict = match end {
            Ended::Trap {
                tid,
                trap,
                message,
                stack,
            } => {
                let stack = self.symbolize(&stack);
                let stderr_text = String::from_utf8_lossy(&stderr);
                let in_abort = stack.iter().any(|f| f.function.as_deref() == Some("abort"));
                let panic = in_abort
                    .then(|| crate::verdict::rust_panic(&stderr_text))
                    .flatten();
                let assertion = stderr_text
                    .lines()
                    .rev()
                    .find(|l| l.starts_with("Assertion failed"));
                match (panic, assertion) {
                    (Some(p), _) => crate::verdict::unsupported(
                        Verdict::Panic {
                            message: p.message,
                            location: p.location,
                            thread: Some(p.thread),
                            tid,
                            stack,
                        },
                        crate::verdict::SpawnLimits {
                            threads: st.threads.len(),
                            max_threads: MAX_THREADS,
                            max_pages: st.memory.max_pages,
                        },
                        &source_line,
                    ),
                    (None, Some(line)) if in_abort => Verdict::Assertion {
                        message: line.to_string(),
                        tid,
                        stack,
                    },
                    _ if in_abort => Verdict::Trap {
                        trap: "abort".into(),
                        message: "abort() called".into(),
                        tid,
                        stack,
                    },
                    _ => Verdict::Trap {
                        trap,
                        message,
                        tid,
                        stack,
                    },
                }
            }
            Ended::Outcome => match st.outcome.clone() {
                Some(Outcome::Exit(code)) if code == cfg.expected_exit => {
                    Verdict::Pass { exit_code: code }
                }
                Some(Outcome::Exit(code)) => Verdict::Exit {
                    code,
                    expected: cfg.expected_exit,
                },
                Some(Outcome::Assertion {
                    message,
                    tid,
                    stack,
                }) => Verdict::Assertion {
                    message,
                    tid,
                    stack: self.symbolize(&stack),
                },
                Some(Outcome::Deadlock) => self.deadlock(st),
                Some(Outcome::Memory(m)) => Verdict::Memory(self.memory_verdict(&m)),
                Some(Outcome::Race(r)) => Verdict::Race(self.race_report(&r, st)),
                Some(Outcome::Cancelled) => return Err(Cancelled.into()),
                Some(Outcome::TooLong { steps }) => Verdict::TooLong {
                    steps,
                    threads: self.positions(st),
                },
                Some(Outcome::Hang { reason }) => Verdict::Hang {
                    reason,
                    threads: self.positions(st),
                },
                Some(Outcome::Diverged(d)) => {
                    divergence = Some(d);
                    Verdict::Hang {
                        reason: "replay diverged".into(),
                        threads: self.positions(st),
                    }
                }
                None => return Err(crate::internal!("run ended without an outcome")),
            },
        };
        let verdict = self.explain(verdict, regs, st);
        let thread_names = st.threads.iter().map(|t| t.name.clone()).collect();
        // One report per pair of source lines (a `counter++` races as a read
        // and as a write of the same line).
        let mut races: Vec<crate::verdict::RaceReport> = Vec::new();
        for r in st.checkers.races.as_ref().map_or(&[][..], |x| x.found()) {
            let report = self.race_report(r, st);
            if !races.iter().any(|x| x.key() == report.key()) {
                races.push(report);
            }
        }
        let event_stacks = self.symbolize_all(&st.record.event_stacks);
        st.record.event_stacks.clear();
        Ok(RunResult {
            verdict,
            strategy,
            feedback: Default::default(),
            decisions: std::mem::take(&mut st.sched.decisions),
            decision_count: st.sched.decision_count,
            schedule: st.sched.schedule.value(),
            events: std::mem::take(&mut st.record.events),
            labels: std::mem::take(&mut st.record.labels),
            thread_names,
            stdout,
            stderr,
            steps: st.steps,
            switches: st.switches,
            preemptions: st.preemptions,
            threads: st.threads.len() as u32,
            divergence,
            choice_points: st.sched.choice_points.take().unwrap_or_default(),
            event_stacks,
            observed: Vec::new(),
            races,
            sites_hit: std::mem::take(&mut st.record.hit),
            skipped: st.skipped,
            thread_parents: st.threads.iter().map(|t| t.parent).collect(),
            thread_handles: if st.limits.record_events {
                st.handles.iter().map(|(h, &t)| (h, t)).collect()
            } else {
                Vec::new()
            },
            heap_blocks: match (&st.checkers.mem, st.limits.record_events) {
                (Some(m), true) => m
                    .heap()
                    .blocks()
                    .map(|b| HeapBlockInfo {
                        start: b.start,
                        size: b.size,
                        alloc_tid: b.alloc.tid,
                        alloc_site: b.alloc.site,
                    })
                    .collect(),
                _ => Vec::new(),
            },
        })
    }

    fn race_report(&self, r: &crate::model::hb::Race, st: &RunState) -> crate::verdict::RaceReport {
        let side = |a: &crate::model::hb::Access| {
            let site = self.sites.site(a.site);
            // With event stacks, the event at that step has the stack.
            let stack = st
                .record
                .events
                .iter()
                .position(|e| e.step == a.step && e.tid == a.tid && e.site == a.site)
                .and_then(|i| st.record.event_stacks.get(i))
                .map(|s| self.symbolize(s))
                .unwrap_or_default();
            crate::verdict::RaceAccess {
                tid: a.tid,
                write: a.write,
                site: self.site_text(a.site),
                function: site.map(|s| s.func_name.clone()).unwrap_or_default(),
                stack,
            }
        };
        crate::verdict::RaceReport {
            addr: r.addr,
            object: self.sites.symbol_at(r.addr).map(|s| s.name.clone()),
            first: side(&r.first),
            second: side(&r.second),
        }
    }

    fn memory_verdict(&self, m: &memcheck::MemoryError) -> crate::verdict::MemoryVerdict {
        let mut stack = self.symbolize(&m.stack);
        if stack.is_empty() {
            if let Some(s) = self.sites.site(m.site) {
                stack.push(Frame {
                    function: Some(s.func_name.clone()),
                    loc: s.loc.clone(),
                    offset: None,
                });
            }
        }
        crate::verdict::MemoryVerdict {
            error: m.kind.to_string(),
            tid: m.tid,
            addr: m.addr,
            stack,
            block: m.block.map(|b| crate::verdict::HeapBlockReport {
                start: b.start,
                size: b.size,
                alloc_tid: b.alloc.tid,
                alloc_site: self.site_text(b.alloc.site),
                alloc_stack: self.symbolize(&m.alloc_stack),
                free_tid: b.free.map(|f| f.tid),
                free_site: b.free.map(|f| self.site_text(f.site)),
                free_stack: self.symbolize(&m.free_stack),
            }),
        }
    }

    /// The locks a thread holds (address, site taken), for a report.
    fn held_locks(&self, holds: &[(u32, crate::instrument::SiteId)]) -> Vec<HeldLock> {
        holds
            .iter()
            .map(|&(a, site)| HeldLock {
                addr: a,
                object: self.sites.symbol_at(a).map(|s| s.name.clone()),
                site: self.site_text(site),
            })
            .collect()
    }

    fn site_text(&self, site: u32) -> String {
        match self.sites.site(site) {
            Some(s) => s.where_(),
            None => "-".into(),
        }
    }

    fn positions(&self, st: &RunState) -> Vec<ThreadAt> {
        st.threads
            .iter()
            .enumerate()
            .filter(|(_, t)| t.status != Status::Done)
            .map(|(i, _)| {
                let p = st.pending(i as Tid);
                ThreadAt {
                    tid: i as Tid,
                    site: if p.site == NO_SITE {
                        p.kind.label().to_string()
                    } else {
                        self.site_text(p.site)
                    },
                }
            })
            .collect()
    }

    fn deadlock(&self, st: &RunState) -> Verdict {
        // Threads blocked on a futex outside any modelled lock or join call:
        // what they wait for may be a futex-word lock (`model::wordlock`).
        let bare_wait = |t: Tid| match st.threads.get(t as usize) {
            Some(th) if th.wants.is_none() => match th.status {
                Status::Blocked(crate::model::Block::Futex { addr, .. }) => Some(addr),
                _ => None,
            },
            _ => None,
        };
        let bare: Vec<Tid> = (0..st.threads.len() as Tid)
            .filter(|&t| bare_wait(t).is_some())
            .collect();
        let mut threads = Vec::new();
        for (i, t) in st.threads.iter().enumerate() {
            if let Status::Blocked(crate::model::Block::Futex { addr, .. }) = t.status {
                let tid = i as Tid;
                let mut stack = self.symbolize(&t.block_stack);
                if stack.is_empty() {
                    // No stack was captured (a fast run of a lock or join
                    // call): the call's site stands for it, as the innermost
                    // user frame of a captured stack would.
                    let at = t.wants.map_or(t.block_site, |(_, s)| s);
                    if let Some(s) = self.sites.site(at) {
                        stack.push(Frame {
                            function: Some(s.func_name.clone()),
                            loc: s.loc.clone(),
                            offset: None,
                        });
                    }
                }
                // A thread blocked inside a lock call waits for that lock.
                let object_addr = t.wants.map(|(a, _)| a).unwrap_or(addr);
                let mut owner = t.wants.and_then(|(a, _)| st.locks.owner.get(a).copied());
                let mut holds = self.held_locks(&t.holds);
                if let Some(words) = &st.locks.words {
                    if t.wants.is_none() {
                        owner = words.owner_for(tid, addr, bare_wait).map(|o| o.tid);
                    }
                    holds.extend(words.held_by(tid, &bare, bare_wait).into_iter().map(
                        |(a, taken)| HeldLock {
                            addr: a,
                            object: self.sites.symbol_at(a).map(|s| s.name.clone()),
                            site: self.taken_at(st, taken),
                        },
                    ));
                }
                threads.push(BlockedThread {
                    tid,
                    name: t.name.clone(),
                    addr: object_addr,
                    object: self.sites.symbol_at(object_addr).map(|s| s.name.clone()),
                    owner,
                    holds,
                    waits_at: match t.wants {
                        Some((_, s)) => self.site_text(s),
                        None if self.sites.site(t.block_site).is_some_and(|s| s.user) => {
                            self.site_text(t.block_site)
                        }
                        // A wait in library code: the user frame that led
                        // there (the stack is captured for such waits).
                        None => user_line(&stack).unwrap_or_else(|| self.site_text(t.block_site)),
                    },
                    stack,
                });
            } else if let Status::Blocked(crate::model::Block::Io { .. }) = t.status {
                // In a read, write or poll of pipes: the object is what it
                // waits to read or write.
                let stack = self.symbolize(&t.block_stack);
                threads.push(BlockedThread {
                    tid: i as Tid,
                    name: t.name.clone(),
                    addr: 0,
                    object: Some(st.io.describe(i as Tid)),
                    owner: None,
                    holds: self.held_locks(&t.holds),
                    waits_at: user_line(&stack).unwrap_or_else(|| self.site_text(t.block_site)),
                    stack,
                });
            } else if let Status::Blocked(crate::model::Block::Signal { set }) = t.status {
                // In sigwait, sigsuspend or pause: the object is the
                // signals it waits for.
                let stack = self.symbolize(&t.block_stack);
                let names: Vec<String> = (1..=64u32)
                    .filter(|&s| set & crate::model::signals::bit(s) != 0)
                    .take(4)
                    .map(crate::model::signals::name)
                    .collect();
                threads.push(BlockedThread {
                    tid: i as Tid,
                    name: t.name.clone(),
                    addr: 0,
                    object: Some(format!("a signal ({})", names.join(", "))),
                    owner: None,
                    holds: self.held_locks(&t.holds),
                    waits_at: user_line(&stack).unwrap_or_else(|| self.site_text(t.block_site)),
                    stack,
                });
            }
        }
        Verdict::Deadlock { threads }
    }

    /// `file:line` where a futex-word lock was taken: the innermost frame
    /// in user code of the stack captured then, else the taking site.
    fn taken_at(&self, st: &RunState, taken: crate::model::wordlock::Taken) -> String {
        let stack = taken
            .stack
            .and_then(|i| st.locks.word_stacks.get(i))
            .map(|raw| self.symbolize(raw))
            .unwrap_or_default();
        user_line(&stack).unwrap_or_else(|| self.site_text(taken.site))
    }
}

/// `file:line` of the innermost user-code frame of `stack`.
fn user_line(stack: &[Frame]) -> Option<String> {
    crate::verdict::user_frame(stack)
        .and_then(|f| f.loc.as_ref())
        .map(|l| l.short())
}

/// Whether heddle provides the import `module.name`.
fn provided(module: &str, name: &str) -> bool {
    use crate::instrument::{RtImport, SdkImport};
    match module {
        "wasi_snapshot_preview1" => true,
        "wasi" => name == "thread-spawn",
        "env" => name == "memory",
        m if m == RtImport::MODULE => RtImport::ALL.iter().any(|i| i.name() == name),
        m if m == SdkImport::MODULE => SdkImport::ALL.iter().any(|i| i.name() == name),
        _ => false,
    }
}

/// Compiles `bytes`, through the serialized-module cache.
fn compile_cached(engine: &Engine, bytes: &[u8]) -> Result<Module> {
    use std::hash::{Hash, Hasher};
    // DefaultHasher::new() has fixed keys: the same engine gives the same hash.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    let key = paths::sha256_hex(
        format!(
            "heddle-module-1\n{}\n{:x}\n{}",
            env!("CARGO_PKG_VERSION"),
            h.finish(),
            paths::sha256_hex(bytes)
        )
        .as_bytes(),
    );
    let dir = paths::cache_dir("modules")?;
    let path = dir.join(format!("{}.cwasm", &key[..32]));
    if path.exists() {
        // SAFETY: the file was written by `Module::serialize` of this same
        // engine configuration (its key covers the engine's compatibility
        // hash); wasmtime checks the header and version before using it.
        if let Ok(m) = unsafe { Module::deserialize_file(engine, &path) } {
            return Ok(m);
        }
    }
    let module = Module::new(engine, bytes).map_err(|e| anyhow!("cannot compile module: {e}"))?;
    if let Ok(ser) = module.serialize() {
        let _ = paths::write_atomic(&path, &ser);
    }
    Ok(module)
}

/// How the executor stopped.
enum Ended {
    /// `RunState::outcome` says why.
    Outcome,
    /// A guest trap in `tid`.
    Trap {
        tid: Tid,
        trap: String,
        message: String,
        stack: Vec<RawFrame>,
    },
}

/// Fiber stacks: each mapped with a guard page below it on first use and
/// kept on a free list when its thread's call returns (up to
/// [`MAX_FREE_STACKS`]; beyond that a stack is unmapped).
struct FiberStacks;

/// Base addresses of mapped stacks no call uses now.
static FREE_STACKS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn page_size() -> usize {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    // SAFETY: sysconf has no preconditions.
    *PAGE.get_or_init(|| unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize })
}

struct FiberStack {
    /// Start of the mapping (the guard page).
    base: usize,
}

impl FiberStack {
    fn guard() -> usize {
        page_size()
    }

    fn map() -> Result<usize, wasmtime::Error> {
        let len = Self::guard() + STACK_SIZE;
        // SAFETY: a new private anonymous mapping; nothing else refers to it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(wasmtime::Error::msg("cannot map a fiber stack"));
        }
        // SAFETY: the guard page is the first page of the mapping just made.
        if unsafe { libc::mprotect(p, Self::guard(), libc::PROT_NONE) } != 0 {
            // SAFETY: unmapping the mapping made above, unused.
            unsafe { libc::munmap(p, len) };
            return Err(wasmtime::Error::msg(
                "cannot protect a fiber stack's guard page",
            ));
        }
        Ok(p as usize)
    }
}

// SAFETY: `FiberStack` hands out a mapping of `STACK_SIZE` bytes above a
// guard page, owned by this value until it is dropped.
unsafe impl wasmtime::StackMemory for FiberStack {
    fn top(&self) -> *mut u8 {
        (self.base + Self::guard() + STACK_SIZE) as *mut u8
    }
    fn range(&self) -> std::ops::Range<usize> {
        self.base + Self::guard()..self.base + Self::guard() + STACK_SIZE
    }
    fn guard_range(&self) -> std::ops::Range<*mut u8> {
        self.base as *mut u8..(self.base + Self::guard()) as *mut u8
    }
}

impl Drop for FiberStack {
    fn drop(&mut self) {
        let mut free = FREE_STACKS.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < MAX_FREE_STACKS {
            free.push(self.base);
        } else {
            // SAFETY: the mapping is this stack's own and no fiber runs on it.
            unsafe { libc::munmap(self.base as *mut _, Self::guard() + STACK_SIZE) };
        }
    }
}

// SAFETY: the stacks are page aligned, have a guard page below them, and
// are zero filled when first mapped; a reused stack keeps what an earlier
// fiber left, which wasmtime allows when zeroing is not asked for (it is
// honoured when it is).
unsafe impl wasmtime::StackCreator for FiberStacks {
    fn new_stack(
        &self,
        size: usize,
        zeroed: bool,
    ) -> Result<Box<dyn wasmtime::StackMemory>, wasmtime::Error> {
        if size > STACK_SIZE {
            return Err(wasmtime::Error::msg(
                "fiber stack size above the configured size",
            ));
        }
        let reused = FREE_STACKS.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let base = match reused {
            Some(base) => base,
            None => FiberStack::map()?,
        };
        let stack = FiberStack { base };
        if zeroed && reused.is_some() {
            // SAFETY: the usable range belongs to this stack and no fiber runs on it.
            unsafe {
                std::ptr::write_bytes((base + FiberStack::guard()) as *mut u8, 0, STACK_SIZE)
            };
        }
        Ok(Box::new(stack))
    }
}

/// A guest thread's call; it gives its instance back when it returns.
type ThreadFuture = Pin<Box<dyn Future<Output = (Worker, wasmtime::Result<()>)> + Send>>;

/// A memory and what is linked to it, kept from run to run: the module
/// linked against the memory and the instances of finished guest threads.
struct Slot {
    memory: SharedMemory,
    pre: wasmtime::InstancePre<ThreadCtx>,
    /// Instances of finished guest threads, ready to be reset and reused.
    idle: Vec<Worker>,
    /// The buffers the last run on this memory left.
    scratch: state::Scratch,
    /// The cell of the runs on this memory, kept from run to run. Made by
    /// the first run, not with the slot: made with the slot, runs with
    /// many switches were 2% slower (benches/HISTORY.md, "A run's state
    /// moved less").
    run: Option<Arc<RunCell>>,
    /// The last run's WASI context, if the next may use it.
    wasi: Option<wasi::Session>,
    /// What the last reset of the memory found populated.
    populated: memory::Populated,
}

impl Slot {
    /// Keeps `w` for a later thread, within the process-wide limit.
    fn keep(&mut self, w: Worker) {
        use std::sync::atomic::Ordering::Relaxed;
        if IDLE_INSTANCES.fetch_add(1, Relaxed) < MAX_IDLE_INSTANCES {
            self.idle.push(w);
        } else {
            IDLE_INSTANCES.fetch_sub(1, Relaxed);
        }
    }

    /// An idle instance, if there is one (a main thread on it starts from
    /// `Program::main_globals`, whatever it was made for).
    fn reuse(&mut self) -> Option<Worker> {
        let w = self.idle.pop()?;
        IDLE_INSTANCES.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        Some(w)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        IDLE_INSTANCES.fetch_sub(self.idle.len(), std::sync::atomic::Ordering::Relaxed);
    }
}

/// A guest thread's store and instance. Its state outside the shared
/// memory is its mutable globals (the rewriter exports them all; tables and
/// segments do not change after instantiation, `instrument::reuse`), so
/// putting the globals back makes it a fresh instance again.
struct Worker {
    store: Store<ThreadCtx>,
    /// `_start` and `wasi_thread_start`, or why they cannot be called.
    main: Result<TypedFunc<(), ()>, String>,
    entry: Result<TypedFunc<(i32, i32), ()>, String>,
    /// Every mutable global with its value right after instantiation.
    globals: Vec<(Global, wasmtime::Val)>,
    /// The rewriter's `heddle_thread_entry(tid, start_arg, budget)`, which
    /// puts those values back itself (from copies made at instantiation),
    /// sets the budget and calls `wasi_thread_start`: a thread starts
    /// without a host `Global::set` per global. None when the module has
    /// none (see `instrument::rewrite::EXPORT_ENTRY`).
    thread_entry: Option<ThreadEntry>,
    /// `__tls_base`, read after a trap to find the thread's stack.
    tls: Option<Global>,
}

/// `heddle_thread_entry(tid, start_arg, budget)`.
type ThreadEntry = TypedFunc<(i32, i32, i32), ()>;

/// A worker made ready for a thread, and how its thread starts: with the
/// budget of its first slice for `Worker::thread_entry` to set, or (None)
/// with its globals and budget already set by the host.
type Prepared = (Worker, Option<i32>);

struct Executor<'p> {
    program: &'p Program,
    run: Arc<RunCell>,
    wasi: WasiCtx,
    answers: Arc<wasi::Answers>,
    slot: Box<Slot>,
    /// Per tid: the thread's running future (None before start / after end).
    threads: Vec<Option<ThreadFuture>>,
    /// The registers of the last thread whose call failed (a trap, or the
    /// end of the run it caused), read before its instance is released.
    regs: Option<overflow::Regs>,
}

/// The rewriter's thread entry of a new instance, with its saved copies of
/// the reset globals (`names`, with their values right after
/// instantiation in `globals`) set to those values; None when the module
/// has no entry or a copy is missing.
fn saved_globals(
    instance: &wasmtime::Instance,
    store: &mut Store<ThreadCtx>,
    names: &[(String, Global)],
    globals: &[(Global, wasmtime::Val)],
) -> Result<Option<ThreadEntry>> {
    use instrument::rewrite::{EXPORT_ENTRY, SAVED_PREFIX};
    let Ok(entry) = instance.get_typed_func(&mut *store, EXPORT_ENTRY) else {
        return Ok(None);
    };
    let mut saved = Vec::with_capacity(names.len());
    for (name, _) in names {
        let n = &name[instrument::reuse::GLOBAL_PREFIX.len()..];
        match instance.get_global(&mut *store, &format!("{SAVED_PREFIX}{n}")) {
            Some(g) => saved.push(g),
            None => return Ok(None),
        }
    }
    for (copy, (_, v)) in saved.iter().zip(globals) {
        copy.set(&mut *store, *v)
            .map_err(|e| anyhow!("cannot save a global: {e}"))?;
    }
    Ok(Some(entry))
}

/// The stack pointer and TLS base of `w`'s instance, as its call left them.
fn read_regs(tid: Tid, w: &mut Worker) -> Option<overflow::Regs> {
    let sp = w.store.data().sp?.get(&mut w.store).i32()? as u32;
    let tls = w
        .tls
        .and_then(|g| g.get(&mut w.store).i32())
        .map(|v| v as u32);
    Some(overflow::Regs { tid, sp, tls })
}

/// Polls a future that is expected to complete without suspending.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

impl Executor<'_> {
    /// An instance for thread `tid`: an idle one reset, or a new one.
    /// Every mutable global the rewriter exports for reuse is set once: to
    /// the value it had right after instantiation, or for a main thread to
    /// `Program::main_globals`; the budget global (not among them) to the
    /// first slice's budget. A thread that starts through
    /// `Worker::thread_entry` gets that budget to pass to it instead: the
    /// entry sets the globals and the budget itself.
    fn worker(&mut self, tid: Tid) -> Result<Prepared> {
        let reused = if self.program.reuse {
            self.slot.reuse()
        } else {
            None
        };
        let fresh = reused.is_none();
        let mut w = match reused {
            Some(mut w) => {
                let d = w.store.data_mut();
                d.tid = tid;
                d.run = self.run.clone();
                d.wasi = self.wasi.clone();
                d.answers = self.answers.clone();
                w
            }
            None => self.instantiate(tid)?,
        };
        if tid != 0 && w.thread_entry.is_some() {
            // The entry puts the globals back and sets the budget.
            let budget = self.run.get().next_budget();
            return Ok((w, Some(budget)));
        }
        // Only the instance whose start function initialised the memory
        // (wasm-ld's `__wasm_init_memory`, which also points the main
        // thread's `__tls_base` at the static TLS block) has the globals a
        // main thread starts with; one made later, over the image, or a
        // thread's, has others (`__tls_base` 0).
        let main = (tid == 0 && self.program.reuse)
            .then(|| self.program.main_globals.get())
            .flatten();
        for (i, (g, v)) in w.globals.iter().enumerate() {
            let v = match main {
                Some(vals) => vals[i],
                // Just instantiated: already its own value.
                None if fresh => continue,
                None => *v,
            };
            g.set(&mut w.store, v)
                .map_err(|e| anyhow!("cannot reset a global: {e}"))?;
        }
        if let Some(g) = w.store.data().budget {
            let b = self.run.get().next_budget();
            g.set(&mut w.store, wasmtime::Val::I32(b))
                .map_err(|e| anyhow!("{e}"))?;
        }
        Ok((w, None))
    }

    /// Instantiates the module in a fresh store for `tid`.
    fn instantiate(&mut self, tid: Tid) -> Result<Worker> {
        let mut store = Store::new(
            &self.program.engine,
            ThreadCtx {
                tid,
                run: self.run.clone(),
                wasi: self.wasi.clone(),
                answers: self.answers.clone(),
                memory_export: self.program.memory_export,
                budget: None,
                skip: None,
                sp: None,
                table: None,
                funcs: None,
                started: false,
            },
        );
        let instance = block_on(self.slot.pre.instantiate_async(&mut store))
            .map_err(|e| anyhow!("cannot instantiate the module: {e}"))?;
        let mut first_on_zeros = false;
        if tid == 0 && self.program.reuse {
            // Until the image is taken every slot is reset to zeros, so the
            // start function has just run on a zeroed memory.
            // SAFETY: no guest thread of this run has started yet.
            let mem = unsafe { memory::GuestMemory::serialized(self.slot.memory.data()) };
            let mut took_image = false;
            self.program.image.get_or_init(|| {
                took_image = true;
                mem.image((self.program.mem_pages.0 as usize) << 16)
            });
            if took_image {
                first_on_zeros = true;
            }
        }
        let names: Vec<(String, Global)> = instance
            .exports(&mut store)
            .filter(|e| e.name().starts_with(instrument::reuse::GLOBAL_PREFIX))
            .filter_map(|e| Some((e.name().to_owned(), e.into_global()?)))
            .collect();
        let globals: Vec<(Global, wasmtime::Val)> =
            names.iter().map(|(_, g)| (*g, g.get(&mut store))).collect();
        let thread_entry = saved_globals(&instance, &mut store, &names, &globals)?;
        if first_on_zeros {
            let vals = globals.iter().map(|(_, v)| *v).collect();
            let _ = self.program.main_globals.set(vals);
        }
        let budget = instance.get_global(&mut store, instrument::rewrite::EXPORT_BUDGET);
        let skip = instance.get_global(&mut store, instrument::rewrite::EXPORT_SKIP);
        let sp = instance.get_global(&mut store, instrument::rewrite::EXPORT_SP);
        let table = instance.get_table(&mut store, instrument::rewrite::EXPORT_TABLE);
        let funcs = instance.get_table(&mut store, instrument::rewrite::EXPORT_FUNCS);
        let main = instance
            .get_typed_func(&mut store, "_start")
            .map_err(|e| e.to_string());
        let entry = instance
            .get_typed_func(&mut store, "wasi_thread_start")
            .map_err(|e| e.to_string());
        let data = store.data_mut();
        data.budget = budget;
        data.skip = skip;
        data.sp = sp;
        data.table = table;
        data.funcs = funcs;
        data.started = true;
        let tls = self.program.stack_layout().tls_global.and_then(|g| {
            instance.get_global(
                &mut store,
                &format!("{}{g}", instrument::reuse::GLOBAL_PREFIX),
            )
        });
        Ok(Worker {
            store,
            main,
            entry,
            globals,
            thread_entry,
            tls,
        })
    }

    /// Keeps the instance of a thread that ended for later threads.
    fn release(&mut self, w: Worker) {
        if self.program.reuse {
            self.slot.keep(w);
        }
    }

    /// Creates the main thread. Errors here are setup errors, not verdicts.
    fn start(&mut self) -> Result<()> {
        let (mut w, _) = self.worker(0)?;
        if let Err(e) = &w.main {
            bail!("module's `_start` is not a function of no arguments: {e}");
        }
        self.threads.push(Some(Box::pin(async move {
            let r = match &w.main {
                Ok(start) => start.call_async(&mut w.store, ()).await,
                Err(e) => Err(wasmtime::Error::msg(e.clone())),
            };
            let r = r.map_err(|e| uncaught(&mut w.store, e));
            let r = r.and(settle_skips(&mut w.store));
            (w, r)
        })));
        Ok(())
    }

    fn start_thread(&mut self, tid: Tid) -> Result<(), Ended> {
        let start_arg = self.run.get().threads[tid as usize].start_arg;
        let (mut w, budget) = match self.worker(tid) {
            Ok(x) => x,
            Err(e) => return Err(self.setup_trap(tid, e)),
        };
        if let Err(e) = &w.entry {
            return Err(self.setup_trap(tid, anyhow!("{e}")));
        }
        while self.threads.len() <= tid as usize {
            self.threads.push(None);
        }
        // The functions are borrowed from the worker, not cloned: a clone
        // of a typed function takes a reference on its registered type.
        self.threads[tid as usize] = Some(Box::pin(async move {
            let (tid, arg) = (tid as i32, start_arg as i32);
            let r = match (&w.thread_entry, budget, &w.entry) {
                (Some(f), Some(budget), _) => f.call_async(&mut w.store, (tid, arg, budget)).await,
                (_, _, Ok(f)) => f.call_async(&mut w.store, (tid, arg)).await,
                (_, _, Err(e)) => Err(wasmtime::Error::msg(e.clone())),
            };
            let r = r.map_err(|e| uncaught(&mut w.store, e));
            let r = r.and(settle_skips(&mut w.store));
            (w, r)
        }));
        Ok(())
    }

    fn setup_trap(&self, tid: Tid, e: anyhow::Error) -> Ended {
        Ended::Trap {
            tid,
            trap: "instantiation".into(),
            message: e.to_string(),
            stack: Vec::new(),
        }
    }

    /// Runs until the run ends.
    fn drive(&mut self) -> Ended {
        let mut cx = Context::from_waker(Waker::noop());
        let mut spurious = 0u32;
        loop {
            let cur = {
                let st = self.run.get();
                if st.ended() {
                    return Ended::Outcome;
                }
                st.current
            };
            if self.threads.get(cur as usize).is_none_or(|t| t.is_none()) {
                if !self.program.has_thread_start && cur != 0 {
                    return Ended::Trap {
                        tid: cur,
                        trap: "spawn".into(),
                        message: "module cannot start threads (no wasi_thread_start export)".into(),
                        stack: Vec::new(),
                    };
                }
                if let Err(e) = self.start_thread(cur) {
                    return e;
                }
            }
            let fut = self.threads[cur as usize].as_mut().expect("thread future");
            match fut.as_mut().poll(&mut cx) {
                Poll::Pending => {
                    let st = self.run.get();
                    if st.current == cur && !st.ended() {
                        spurious += 1;
                        if spurious > 1_000_000 {
                            drop(st);
                            return Ended::Trap {
                                tid: cur,
                                trap: "internal".into(),
                                message: "guest thread suspended without a scheduling decision"
                                    .into(),
                                stack: Vec::new(),
                            };
                        }
                    } else {
                        spurious = 0;
                    }
                }
                Poll::Ready((mut w, r)) => {
                    self.threads[cur as usize] = None;
                    if r.is_err() {
                        self.regs = read_regs(cur, &mut w);
                    }
                    self.release(w);
                    if let Some(end) = self.thread_ended(cur, r) {
                        return end;
                    }
                }
            }
        }
    }

    /// After the run: the threads still suspended return (their pending
    /// host call fails, so their wasm unwinds without running), in tid
    /// order, and give their instances back. Nothing here changes what the
    /// run reports. Returns the slot, and the registers of thread `want`
    /// (the unwinding leaves its globals as they were at its host call).
    fn close(mut self, want: Option<Tid>) -> (Box<Slot>, Option<overflow::Regs>) {
        self.run.get().closed = true;
        let mut cx = Context::from_waker(Waker::noop());
        let threads = std::mem::take(&mut self.threads);
        for (tid, mut t) in threads.into_iter().enumerate() {
            let Some(t) = t.as_mut() else { continue };
            for _ in 0..4 {
                if let Poll::Ready((mut w, _)) = t.as_mut().poll(&mut cx) {
                    if want == Some(tid as Tid) {
                        self.regs = read_regs(tid as Tid, &mut w);
                    }
                    self.release(w);
                    break;
                }
            }
        }
        (self.slot, self.regs)
    }

    /// Handles a thread's future completing. Returns `Some` when the run ends.
    fn thread_ended(&mut self, tid: Tid, r: wasmtime::Result<()>) -> Option<Ended> {
        match r {
            Ok(()) if tid == 0 => {
                // `_start` returned: `main` returned 0.
                self.run.get().end(Outcome::Exit(0));
                Some(Ended::Outcome)
            }
            Ok(()) => self
                .run
                .get()
                .finish(tid)
                .err()
                .map(|RunEnd| Ended::Outcome),
            Err(e) => {
                if e.downcast_ref::<RunEnd>().is_some() || self.run.get().ended() {
                    return Some(Ended::Outcome);
                }
                if e.downcast_ref::<ThreadExit>().is_some() {
                    // pthread_exit outside a start routine: the main thread.
                    return self
                        .run
                        .get()
                        .finish(tid)
                        .err()
                        .map(|RunEnd| Ended::Outcome);
                }
                if let Some(exit) = e.downcast_ref::<wasi_common::I32Exit>() {
                    self.run.get().end(Outcome::Exit(exit.0));
                    return Some(Ended::Outcome);
                }
                let trap = match e.downcast_ref::<Uncaught>() {
                    Some(_) => "uncaught-exception".to_string(),
                    None if e.downcast_ref::<hooks::Killed>().is_some() => "signal".to_string(),
                    None => e
                        .downcast_ref::<wasmtime::Trap>()
                        .map(trap_name)
                        .unwrap_or_else(|| "error".to_string()),
                };
                let stack = e
                    .downcast_ref::<wasmtime::WasmBacktrace>()
                    .map(|bt| {
                        bt.frames()
                            .iter()
                            .map(|f| RawFrame {
                                func: f.func_index(),
                                offset: f.module_offset().map(|o| o as u32),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let message = match e.downcast_ref::<wasmtime::Trap>() {
                    Some(t) => t.to_string(),
                    None if e.downcast_ref::<Uncaught>().is_some() => {
                        e.downcast_ref::<Uncaught>().expect("uncaught").to_string()
                    }
                    // The error and its causes, without the backtrace
                    // wasmtime wraps a host function's error in.
                    None => e
                        .chain()
                        .skip(usize::from(
                            e.downcast_ref::<wasmtime::WasmBacktrace>().is_some(),
                        ))
                        .filter_map(|c| c.to_string().lines().next().map(str::to_string))
                        .collect::<Vec<_>>()
                        .join(": "),
                };
                Some(Ended::Trap {
                    tid,
                    trap,
                    message,
                    stack,
                })
            }
        }
    }
}

/// Accounts for the yield points the thread of `cx` skipped since its last
/// host call (the fast path) and takes its unused skips back, so that the
/// step count and clock are the same as with every yield point seen. Called
/// at every host call that can follow skipped yield points
/// ([`hooks::reconcile`]) and when a thread's call returns or traps.
fn settle_skips(mut cx: impl AsContextMut<Data = ThreadCtx>) -> wasmtime::Result<()> {
    let (run, tid, skip) = {
        let cx = cx.as_context_mut();
        let d = cx.data();
        (d.run.clone(), d.tid, d.skip)
    };
    let g = {
        let mut st = run.get();
        if st.granted == 0 || st.current != tid || st.closed {
            return Ok(());
        }
        match skip {
            Some(g) => g,
            None => {
                st.granted = 0;
                return Ok(());
            }
        }
    };
    let left = g.get(&mut cx).i32().unwrap_or(0) as u32;
    g.set(&mut cx, wasmtime::Val::I32(0))?;
    run.get().reconcile(left);
    Ok(())
}

/// A short stable name for a trap code.
/// An exception that no handler caught left a thread's entry (`_start` or
/// `wasi_thread_start`): with wasm exception handling there is no search
/// phase, so libc++abi never sees that nothing will catch it and never
/// calls `std::terminate`; the engine hands it to the host instead.
#[derive(Debug)]
struct Uncaught(String);

impl std::fmt::Display for Uncaught {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Uncaught {}

/// `e`, with what was thrown named when it is an uncaught exception.
fn uncaught(store: &mut Store<ThreadCtx>, e: wasmtime::Error) -> wasmtime::Error {
    if e.downcast_ref::<wasmtime::ThrownException>().is_none() {
        return e;
    }
    let what = describe_thrown(store).unwrap_or_else(|| "uncaught wasm exception".to_string());
    e.context(Uncaught(what))
}

/// What the pending exception of `store` is: a C++ exception libc++abi
/// threw ([`thrown_cxx_type`]), or a `longjmp` of the guest SDK's runtime
/// (its field is the `{env, val}` it keeps 8 bytes into `env`, the
/// jmp_buf) that no active `setjmp` caught.
fn describe_thrown(store: &mut Store<ThreadCtx>) -> Option<String> {
    let exn = store.take_pending_exception()?;
    let ptr = exn.field(&mut *store, 0).ok()?.i32()? as u32;
    let run = store.data().run.clone();
    let st = run.get();
    let mem = st.guest();
    if let Some(t) = thrown_cxx_type(&mem, ptr) {
        return Some(format!("uncaught C++ exception of type {t}"));
    }
    let env = mem.read(ptr, 4)?;
    if ptr >= 8 && u32::from_le_bytes(env.try_into().ok()?) == ptr - 8 {
        return Some(format!(
            "longjmp to the jmp_buf at {:#x}, whose setjmp is no longer active (its function returned, or it is another thread's)",
            ptr - 8
        ));
    }
    None
}

/// The C++ type of the exception whose `__cpp_exception` field is `ptr`,
/// when libc++abi threw it (with its message, for the standard exceptions
/// that carry one).
///
/// The `__cpp_exception` tag's one field is the address of the
/// `_Unwind_Exception` at the end of libc++abi's `__cxa_exception` (or of
/// a `__cxa_dependent_exception`, for `std::rethrow_exception`); on wasm32
/// both hold the thrown type's `std::type_info*` 48 bytes before it, and
/// the `type_info`'s mangled name is its second word.
fn thrown_cxx_type(mem: &memory::GuestMemory<'_>, ptr: u32) -> Option<String> {
    let word = |addr: u32| -> Option<u32> {
        let b = mem.read(addr, 4)?;
        Some(u32::from_le_bytes(b.try_into().ok()?))
    };
    // `exception_class`, the little-endian u64 "CLNGC++\0" (primary) or
    // "CLNGC++\x01" (dependent).
    let class = mem.read(ptr, 8)?;
    if class[0] > 1 || class[1..8] != *b"++CGNLC" {
        return None;
    }
    let type_info = word(ptr.checked_sub(48)?)?;
    let name = mem.cstr(word(type_info.checked_add(4)?)?, 1024);
    if name.is_empty() {
        return None;
    }
    let demangled = crate::instrument::dwarf::demangle(&format!("_ZTS{name}"));
    let mut what = demangled
        .strip_prefix("typeinfo name for ")
        .unwrap_or(&name)
        .to_string();
    // The standard exceptions that carry a message keep it behind their
    // vtable pointer (libc++'s `__libcpp_refstring`, a `const char*`). The
    // thrown object follows the 32-byte `_Unwind_Exception`; a dependent
    // exception's `primaryException`, just before it, points to it.
    if STD_MESSAGE_EXCEPTIONS.contains(&name.as_str()) {
        let object = if class[0] == 1 {
            word(ptr.checked_sub(4)?)
        } else {
            ptr.checked_add(32)
        };
        let message = object
            .and_then(|o| word(o.checked_add(4)?))
            .map(|at| mem.cstr(at, 1024))
            .unwrap_or_default();
        if !message.is_empty() {
            what.push_str(": ");
            what.push_str(&message);
        }
    }
    Some(what)
}

/// Mangled names of the standard exception types whose message
/// [`thrown_cxx_type`] reads.
const STD_MESSAGE_EXCEPTIONS: &[&str] = &[
    "St11logic_error",
    "St12domain_error",
    "St16invalid_argument",
    "St12length_error",
    "St12out_of_range",
    "St13runtime_error",
    "St11range_error",
    "St14overflow_error",
    "St15underflow_error",
];

fn trap_name(t: &wasmtime::Trap) -> String {
    use wasmtime::Trap as T;
    match t {
        T::StackOverflow => "stack-overflow",
        T::MemoryOutOfBounds => "out-of-bounds",
        T::HeapMisaligned => "misaligned",
        T::TableOutOfBounds => "table-out-of-bounds",
        T::IndirectCallToNull => "null-call",
        T::BadSignature => "bad-signature",
        T::IntegerOverflow => "integer-overflow",
        T::IntegerDivisionByZero => "division-by-zero",
        T::BadConversionToInteger => "bad-conversion",
        T::UnreachableCodeReached => "unreachable",
        T::Interrupt => "interrupt",
        T::OutOfFuel => "out-of-fuel",
        _ => return format!("{t:?}").to_lowercase(),
    }
    .to_string()
}

/// The source a frame names, when its file can be read: its line, and the
/// lines before it that continue the same statement (a method chain
/// `Command::new(…)` … `.unwrap()` split over several lines).
fn source_line(f: &crate::instrument::Frame) -> Option<String> {
    let loc = f.loc.as_ref()?;
    let text = std::fs::read_to_string(&loc.file).ok()?;
    let lines: Vec<&str> = text.lines().collect();
    let at = loc.line.checked_sub(1)? as usize;
    let mut out = vec![*lines.get(at)?];
    for l in lines[..at].iter().rev().take(8) {
        if l.trim_end().ends_with([';', '{', '}']) {
            break;
        }
        out.push(l);
    }
    out.reverse();
    Some(out.join("\n"))
}

/// The host-call interface is declared once (`instrument::interface`);
/// these tests check that both sets of definitions follow it.
#[cfg(test)]
mod interface_tests {
    use super::*;
    use crate::instrument::{HostType, RtImport, SdkImport};
    use wasm_encoder::{EntityType, ImportSection, TypeSection, ValType};

    /// A module that imports every declared function with its declared type.
    fn importer() -> Vec<u8> {
        let val = |t: &HostType| match t {
            HostType::I32 => ValType::I32,
            HostType::I64 => ValType::I64,
        };
        let calls: Vec<(&str, &str, &[HostType], &[HostType])> = RtImport::ALL
            .iter()
            .map(|i| (RtImport::MODULE, i.name(), i.params(), i.results()))
            .chain(
                SdkImport::ALL
                    .iter()
                    .map(|i| (SdkImport::MODULE, i.name(), i.params(), i.results())),
            )
            .collect();
        let mut types = TypeSection::new();
        let mut imports = ImportSection::new();
        for (n, (module, name, p, r)) in calls.iter().enumerate() {
            types.ty().function(p.iter().map(val), r.iter().map(val));
            imports.import(module, name, EntityType::Function(n as u32));
        }
        let mut m = wasm_encoder::Module::new();
        m.section(&types).section(&imports);
        m.finish()
    }

    /// heddle's definitions (`hooks`) and the plain ones (`plain`) define
    /// every declared function with the declared type: instantiating a
    /// module that imports them all type-checks each import.
    #[test]
    fn both_linkers_define_the_declared_interface() {
        let bytes = importer();
        let e = engine().unwrap();
        let module = Module::new(&e, &bytes).unwrap();
        let mut linker: Linker<ThreadCtx> = Linker::new(&e);
        hooks::add_to_linker(&mut linker).unwrap();
        signals::add_to_linker(&mut linker).unwrap();
        pipes::add_to_linker(&mut linker).unwrap();
        linker
            .instantiate_pre(&module)
            .expect("heddle's host functions match their declarations");

        let pe = plain::engine().unwrap();
        let module = Module::new(&pe, &bytes).unwrap();
        let mut linker: Linker<()> = Linker::new(&pe);
        let memory: plain::MemoryFn<()> = |_| None;
        plain::add_noop_hooks(&mut linker, Arc::from(Vec::new()), memory).unwrap();
        plain::add_sdk(&mut linker, memory).unwrap();
        linker
            .instantiate_pre(&module)
            .expect("the plain host functions match their declarations");
        for i in RtImport::ALL {
            assert!(provided(RtImport::MODULE, i.name()));
        }
        for i in SdkImport::ALL {
            assert!(provided(SdkImport::MODULE, i.name()));
        }
        assert!(!provided(SdkImport::MODULE, "nope"));
    }
}
