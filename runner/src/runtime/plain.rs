//! Running a module under plain wasmtime, without heddle's scheduler: the
//! baseline for differential tests and benchmarks.
//!
//! Unlike [`super::Program`], nothing here is deterministic: every guest
//! thread is a real OS thread with its own synchronous wasmtime `Store` over
//! one `SharedMemory`, WASI is wasi-common's (real clocks, real randomness),
//! and `memory.atomic.wait`/`notify` really block and wake OS threads. This is
//! "the same module under plain wasmtime with real threads", which is what an
//! instrumented module is compared against:
//!
//! * an *original* module runs as it is ([`run_plain`] with `hooks: None`);
//! * an *instrumented* module runs with no-op `heddle_rt` hooks
//!   ([`run_plain`] with `hooks: Some(site_table)`): every yield point returns
//!   "keep running", the preemption budget is ignored, and the futex hooks
//!   that replaced `memory.atomic.wait*`/`notify` call wasmtime's own
//!   [`SharedMemory::atomic_wait32`]/[`SharedMemory::atomic_wait64`]/
//!   [`SharedMemory::atomic_notify`] with the same effective address the
//!   original instruction would have used, `grow`/`size` really grow and
//!   measure the memory, and the memory checker's allocator hooks pass the
//!   allocator's arguments and result through unchanged (details in
//!   [`add_noop_hooks`]). So the instrumented module must behave exactly like
//!   the original one; any difference is a rewriter bug.
//!
//! The guest SDK (`heddle.*`) is provided with plain meanings (see
//! [`add_sdk`]). Nothing in a run can exit or abort the host process: exits,
//! traps and failed assertions all become a [`PlainOutcome`].
//!
//! Tests: instrument.

use crate::instrument::rewrite::{EXPORT_SKIP, EXPORT_SP, EXPORT_TABLE};
use crate::instrument::{RtImport, SdkImport, SiteTable};
use anyhow::{anyhow, bail, Result};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};
use wasi_common::pipe::{ReadPipe, WritePipe};
use wasi_common::sync::WasiCtxBuilder;
use wasi_common::WasiCtx;
use wasmtime::{
    Caller, Engine, Extern, ExternType, Linker, Module, SharedMemory, Store, Trap, TypedFunc,
    UpdateDeadline,
};

/// How a plain run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainOutcome {
    /// The process exit code: 0 when `_start` returned, the argument of
    /// `proc_exit` otherwise. -1 when `trap` is set.
    pub exit_code: i32,
    /// Everything the guest wrote to fd 1.
    pub stdout: Vec<u8>,
    /// Everything the guest wrote to fd 2.
    pub stderr: Vec<u8>,
    /// Set when a guest thread trapped (the trap's message, with the thread
    /// id), a `heddle_assert`/`heddle_fail` failed (`assertion failed: …`),
    /// or the run exceeded its timeout (`timeout: …`).
    pub trap: Option<String>,
}

/// The error a host function returns for `heddle.assert(0, msg)` and
/// `heddle.fail(msg)`: it unwinds the guest thread and ends the run with
/// `trap: Some("assertion failed: msg")`. Public so that other embedders of
/// [`add_sdk`] can recognise it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssertionFailed(pub String);

impl std::fmt::Display for AssertionFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "assertion failed: {}", self.0)
    }
}
impl std::error::Error for AssertionFailed {}

/// The error `heddle.thread_exit(value)` (the compat library's
/// `pthread_exit`) returns. The no-op `call_catching` hook catches it and
/// makes the start routine return `value`, as heddle's runtime does. In an
/// uninstrumented module nothing catches it: the OS thread ends without
/// wasi-libc's thread epilogue, so its joiners are never woken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadExit(pub i32);

impl std::fmt::Display for ThreadExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "thread exited with pthread_exit({})", self.0)
    }
}
impl std::error::Error for ThreadExit {}

/// How the host functions of [`add_noop_hooks`] and [`add_sdk`] find the
/// calling instance's linear memory (for futex operations, `memory.grow`/
/// `memory.size` and C strings):
/// plain runs return their `SharedMemory`, other embedders may look up an
/// export. A plain `fn` pointer so that it is `Copy + Send + Sync`.
pub type MemoryFn<T> = fn(&mut Caller<'_, T>) -> Option<Extern>;

/// An engine suitable for plain runs: threads and shared memory on (needed
/// by `wasm32-wasip1-threads` modules) and epoch interruption on, so that the
/// other threads of a run can be stopped when one of them exits or traps.
/// [`run_plain_module`] expects modules compiled with such an engine.
pub fn engine() -> Result<Engine> {
    engine_with(true)
}

/// [`engine`], with epoch interruption on or off. Off is wasmtime's default
/// and what heddle's own engine does (it never needs to interrupt a guest);
/// without it, the threads still running when one thread of a run exits or
/// traps are not stopped, so it suits single-threaded measurements, where
/// the per-loop epoch check would otherwise be part of every figure.
pub fn engine_with(epochs: bool) -> Result<Engine> {
    let mut c = wasmtime::Config::new();
    c.wasm_threads(true);
    c.shared_memory(true);
    // heddle's rewriter marks its cold paths (host calls the fast path
    // skips) with branch hints; they change code layout, never semantics.
    c.wasm_branch_hinting(true);
    // C++ exceptions (clang's legacy encoding, translated by the
    // instrumenter into the final one): `try_table`, `throw_ref`, exnref.
    c.wasm_exceptions(true);
    c.epoch_interruption(epochs);
    c.cranelift_opt_level(wasmtime::OptLevel::Speed);
    Engine::new(&c).map_err(|e| anyhow!("cannot create the wasm engine: {e}"))
}

/// Runs the `wasm32-wasip1-threads` command module `bytes` with `args` as
/// `argv[1..]` under plain wasmtime, with real OS threads.
///
/// `hooks: None` runs an ordinary (uninstrumented) module. `hooks:
/// Some(sites)` runs a module instrumented by heddle, whose site table is
/// `sites` (it supplies the static memory offsets of the futex sites), with
/// the no-op `heddle_rt` hooks of [`add_noop_hooks`].
///
/// Compiles the module each time; use [`PlainProgram`] to run one module
/// many times.
pub fn run_plain(bytes: &[u8], args: &[String], hooks: Option<&SiteTable>) -> Result<PlainOutcome> {
    PlainProgram::new(bytes, hooks)?.run(args)
}

/// [`run_plain`] for a module that is already compiled with `engine` (which
/// should come from [`engine`]).
pub fn run_plain_module(
    engine: &Engine,
    module: &Module,
    args: &[String],
    hooks: Option<&SiteTable>,
) -> Result<PlainOutcome> {
    PlainProgram::from_module(engine, module.clone(), hooks)?.run(args)
}

/// A module compiled once, with its linker, ready for many plain runs (each
/// run gets fresh memory, fresh WASI state and fresh threads). Cheap to share
/// between OS threads.
pub struct PlainProgram {
    engine: Engine,
    module: Module,
    linker: Linker<PlainCtx>,
    memory_type: Option<wasmtime::MemoryType>,
}

impl PlainProgram {
    /// Compiles `bytes` with a fresh [`engine`]. `hooks` as in [`run_plain`].
    /// clang's legacy exception handling is translated first, as the
    /// instrumenter does ([`heddle_instrument::eh`]).
    pub fn new(bytes: &[u8], hooks: Option<&SiteTable>) -> Result<PlainProgram> {
        let engine = engine()?;
        let bytes = heddle_instrument::eh::translate(bytes)
            .map_err(|e| anyhow!("cannot translate exception handling: {e}"))?;
        let module =
            Module::new(&engine, &bytes).map_err(|e| anyhow!("cannot compile module: {e}"))?;
        PlainProgram::from_module(&engine, module, hooks)
    }

    /// Wraps a module compiled with `engine`. `hooks` as in [`run_plain`].
    pub fn from_module(
        engine: &Engine,
        module: Module,
        hooks: Option<&SiteTable>,
    ) -> Result<PlainProgram> {
        let mut linker: Linker<PlainCtx> = Linker::new(engine);
        wasi_common::sync::add_to_linker(&mut linker, |c: &mut PlainCtx| &mut c.wasi)
            .map_err(|e| anyhow!("{e}"))?;
        add_sdk(&mut linker, ctx_memory)?;
        if let Some(sites) = hooks {
            add_noop_hooks(&mut linker, mem_offsets(sites), ctx_memory)?;
        }
        linker.func_wrap(
            "wasi",
            "thread-spawn",
            |caller: Caller<'_, PlainCtx>, start_arg: i32| -> i32 {
                let Some(run) = caller.data().run.clone() else {
                    return -6;
                };
                let wasi = caller.data().wasi.clone();
                spawn_thread(run, wasi, start_arg)
            },
        )?;
        let mut memory_type = None;
        let mut dummy = Store::new(engine, PlainCtx::dummy());
        for imp in module.imports() {
            match imp.ty() {
                ExternType::Memory(m) if imp.module() == "env" && imp.name() == "memory" => {
                    if !m.is_shared() {
                        bail!("module imports env.memory but not as a shared memory");
                    }
                    memory_type = Some(m);
                }
                _ if imp.module() == "env" && imp.name() == "memory" => {
                    bail!("module imports env.memory but not as a memory")
                }
                _ => {
                    if linker.get_by_import(&mut dummy, &imp).is_none() {
                        bail!(
                            "module imports `{}.{}`, which plain runs do not provide{}",
                            imp.module(),
                            imp.name(),
                            if imp.module() == RtImport::MODULE && hooks.is_none() {
                                " (an instrumented module needs hooks)"
                            } else {
                                ""
                            }
                        );
                    }
                }
            }
        }
        if module.get_export("_start").is_none() {
            bail!("module has no `_start` export (not a command module)");
        }
        Ok(PlainProgram {
            engine: engine.clone(),
            module,
            linker,
            memory_type,
        })
    }

    /// The compiled module.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// Runs the program once with `args` as `argv[1..]`, waiting as long as
    /// it takes.
    pub fn run(&self, args: &[String]) -> Result<PlainOutcome> {
        self.run_with_timeout(args, None)
    }

    /// Runs the program once; after `timeout` the run is stopped and reported
    /// as `trap: Some("timeout: …")` (a thread blocked in a futex wait cannot
    /// be interrupted and is left behind).
    ///
    /// Errors are setup errors (the module cannot be instantiated); whatever
    /// the guest does is an `Ok` outcome.
    pub fn run_with_timeout(
        &self,
        args: &[String],
        timeout: Option<Duration>,
    ) -> Result<PlainOutcome> {
        let stdout = Arc::new(RwLock::new(Vec::new()));
        let stderr = Arc::new(RwLock::new(Vec::new()));
        let mut b = WasiCtxBuilder::new();
        b.stdin(Box::new(ReadPipe::new(std::io::empty())))
            .stdout(Box::new(WritePipe::from_shared(stdout.clone())))
            .stderr(Box::new(WritePipe::from_shared(stderr.clone())))
            .arg("target")?;
        for a in args {
            b.arg(a)?;
        }
        let wasi = b.build();

        let memory = match &self.memory_type {
            Some(ty) => Some(
                SharedMemory::new(&self.engine, ty.clone())
                    .map_err(|e| anyhow!("cannot create shared memory: {e}"))?,
            ),
            None => None,
        };
        let mut linker = self.linker.clone();
        if let Some(m) = &memory {
            linker
                .define(
                    &mut Store::new(&self.engine, PlainCtx::dummy()),
                    "env",
                    "memory",
                    m.clone(),
                )
                .map_err(|e| anyhow!("cannot provide env.memory: {e}"))?;
        }
        let run = Arc::new(Run {
            engine: self.engine.clone(),
            module: self.module.clone(),
            linker,
            memory,
            next_tid: AtomicU32::new(1),
            stop: AtomicBool::new(false),
            end: Mutex::new(None),
            ended: Condvar::new(),
            live: Mutex::new(0),
            live_changed: Condvar::new(),
        });

        // The main thread: instantiated here, so that setup errors are
        // errors, then run on its own OS thread, so that the run can end
        // while it is blocked (another thread exited or trapped).
        let mut store = run.store(wasi, 0);
        let instance = run
            .linker
            .instantiate(&mut store, &run.module)
            .map_err(|e| anyhow!("cannot instantiate the module: {e:#}"))?;
        unleash(&mut store, &instance);
        let start: TypedFunc<(), ()> = instance
            .get_typed_func(&mut store, "_start")
            .map_err(|e| anyhow!("module's `_start` is not a function of no arguments: {e}"))?;
        run.thread_started();
        let main_run = run.clone();
        let spawned = std::thread::Builder::new()
            .name("plain-main".into())
            .stack_size(THREAD_STACK)
            .spawn(move || {
                let _live = LiveGuard(main_run.clone());
                let r = start.call(&mut store, ());
                main_run.thread_returned(0, r);
            });
        if let Err(e) = spawned {
            run.thread_stopped();
            bail!("cannot start the main thread: {e}");
        }

        let deadline = timeout.map(|t| Instant::now() + t);
        let end = {
            let mut end = run.end.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(e) = end.clone() {
                    break e;
                }
                match deadline {
                    None => end = run.ended.wait(end).unwrap_or_else(|e| e.into_inner()),
                    Some(d) => {
                        let now = Instant::now();
                        if now >= d {
                            drop(end);
                            run.finish(End::Trap(format!(
                                "timeout: the run took longer than {:?}",
                                timeout.unwrap_or_default()
                            )));
                            end = run.end.lock().unwrap_or_else(|e| e.into_inner());
                            continue;
                        }
                        end = run
                            .ended
                            .wait_timeout(end, d - now)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                }
            }
        };
        // Let the other threads notice the end (they are interrupted at
        // their next epoch check); do not wait for threads blocked forever.
        run.wait_live(Duration::from_millis(200));
        let take = |b: &Arc<RwLock<Vec<u8>>>| b.read().unwrap_or_else(|e| e.into_inner()).clone();
        let (exit_code, trap) = match end {
            End::Exit(c) => (c, None),
            End::Trap(t) => (-1, Some(t)),
        };
        Ok(PlainOutcome {
            exit_code,
            stdout: take(&stdout),
            stderr: take(&stderr),
            trap,
        })
    }
}

/// Native stack of each guest OS thread (wasmtime's default wasm stack limit
/// is 512 KiB, which must fit).
const THREAD_STACK: usize = 4 << 20;

/// The data of each guest thread's store in a plain run.
pub struct PlainCtx {
    wasi: WasiCtx,
    /// `None` only in the stores used to fill in linkers.
    run: Option<Arc<Run>>,
    tid: u32,
}

impl PlainCtx {
    /// A context for stores that only define things in a linker.
    fn dummy() -> PlainCtx {
        PlainCtx {
            wasi: WasiCtxBuilder::new().build(),
            run: None,
            tid: 0,
        }
    }

    /// The guest thread id (0 is main, then 1, 2, 3… in spawn order).
    pub fn tid(&self) -> u32 {
        self.tid
    }
}

fn ctx_memory(caller: &mut Caller<'_, PlainCtx>) -> Option<Extern> {
    match caller.data().run.as_ref().and_then(|r| r.memory.as_ref()) {
        Some(m) => Some(Extern::SharedMemory(m.clone())),
        None => caller.get_export("memory"),
    }
}

#[derive(Debug, Clone)]
enum End {
    Exit(i32),
    Trap(String),
}

/// State shared by the threads of one run.
struct Run {
    engine: Engine,
    module: Module,
    /// The program's linker with this run's `env.memory` defined.
    linker: Linker<PlainCtx>,
    memory: Option<SharedMemory>,
    next_tid: AtomicU32,
    /// Set once the run has ended: running threads stop at their next
    /// epoch check.
    stop: AtomicBool,
    end: Mutex<Option<End>>,
    ended: Condvar,
    /// Guest OS threads still running.
    live: Mutex<usize>,
    live_changed: Condvar,
}

/// Most guest threads alive at once in a plain run.
const MAX_LIVE_THREADS: usize = 1024;

impl Run {
    fn store(self: &Arc<Self>, wasi: WasiCtx, tid: u32) -> Store<PlainCtx> {
        let mut store = Store::new(
            &self.engine,
            PlainCtx {
                wasi,
                run: Some(self.clone()),
                tid,
            },
        );
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|ctx| {
            let stop = ctx.data().run.as_ref().is_none_or(|r| r.stopped());
            Ok(if stop {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Continue(1)
            })
        });
        store
    }

    /// Records how the run ended (the first end wins) and stops the others.
    fn finish(&self, end: End) {
        let mut e = self.end.lock().unwrap_or_else(|e| e.into_inner());
        if e.is_none() {
            *e = Some(end);
            self.stop.store(true, Ordering::SeqCst);
            self.engine.increment_epoch();
            self.ended.notify_all();
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Handles the result of a thread's entry point.
    fn thread_returned(&self, tid: u32, r: wasmtime::Result<()>) {
        match r {
            Ok(()) if tid == 0 => self.finish(End::Exit(0)),
            Ok(()) => {}
            Err(e) => {
                if let Some(exit) = e.downcast_ref::<wasi_common::I32Exit>() {
                    self.finish(End::Exit(exit.0));
                } else if let Some(a) = e.downcast_ref::<AssertionFailed>() {
                    self.finish(End::Trap(format!("{a} (thread {tid})")));
                } else if e.downcast_ref::<ThreadExit>().is_some() {
                    // pthread_exit in a thread nothing catches it in: the
                    // thread is over (for main: the process exits when the
                    // last thread does, which plain runs approximate by
                    // ending the run).
                    if tid == 0 {
                        self.finish(End::Exit(0));
                    }
                } else if self.stopped() {
                    // Interrupted because the run already ended.
                } else {
                    self.finish(End::Trap(trap_text(tid, &e)));
                }
            }
        }
    }

    fn thread_started(&self) {
        *self.live.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    }

    fn thread_stopped(&self) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        *live = live.saturating_sub(1);
        self.live_changed.notify_all();
    }

    fn wait_live(&self, max: Duration) {
        let deadline = Instant::now() + max;
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        while *live > 0 {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            live = self
                .live_changed
                .wait_timeout(live, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Decrements the live-thread count when a guest OS thread ends, however it
/// ends.
struct LiveGuard(Arc<Run>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.thread_stopped();
    }
}

/// The text of a trap or host error in thread `tid`.
fn trap_text(tid: u32, e: &wasmtime::Error) -> String {
    let what = match e.downcast_ref::<Trap>() {
        Some(t) => format!("wasm trap: {t}"),
        None => format!("{e:#}")
            .lines()
            .next()
            .unwrap_or("error")
            .to_string(),
    };
    format!("thread {tid}: {what}")
}

/// No-op hooks have nothing to do at a guarded yield point: let the guest
/// skip them all (the fast path at its limit).
fn unleash<T>(store: &mut Store<T>, instance: &wasmtime::Instance) {
    if let Some(g) = instance.get_global(&mut *store, EXPORT_SKIP) {
        let _ = g.set(&mut *store, wasmtime::Val::I32(i32::MAX));
    }
}

/// `wasi.thread-spawn`: a new OS thread that instantiates the module in its
/// own store over the run's shared memory and calls
/// `wasi_thread_start(tid, start_arg)`. Returns the new tid, or a negative
/// value (EAGAIN) when no thread can be started.
fn spawn_thread(run: Arc<Run>, wasi: WasiCtx, start_arg: i32) -> i32 {
    const EAGAIN: i32 = -6;
    if run.stopped() {
        return EAGAIN;
    }
    {
        let mut live = run.live.lock().unwrap_or_else(|e| e.into_inner());
        if *live >= MAX_LIVE_THREADS {
            return EAGAIN;
        }
        *live += 1;
    }
    let tid = run.next_tid.fetch_add(1, Ordering::SeqCst);
    let r = run.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("plain-{tid}"))
        .stack_size(THREAD_STACK)
        .spawn(move || {
            let _live = LiveGuard(r.clone());
            let mut store = r.store(wasi, tid);
            let result = (|| -> wasmtime::Result<()> {
                let instance = r.linker.instantiate(&mut store, &r.module)?;
                unleash(&mut store, &instance);
                let entry: TypedFunc<(i32, i32), ()> =
                    instance.get_typed_func(&mut store, "wasi_thread_start")?;
                entry.call(&mut store, (tid as i32, start_arg))
            })();
            r.thread_returned(tid, result);
        });
    match spawned {
        Ok(_) => tid as i32,
        Err(_) => {
            run.thread_stopped();
            EAGAIN
        }
    }
}

/// The static memory offset (`offset=` immediate) of every site, by id.
pub fn mem_offsets(sites: &SiteTable) -> Arc<[u64]> {
    sites.sites.iter().map(|s| s.mem_offset).collect()
}

/// The effective address of the futex operation at `site`: `addr +
/// offset`, which traps out of bounds when it does not fit in 32 bits (as
/// wasmtime's compiled code does before any other check).
fn futex_ea(offsets: &[u64], site: u32, addr: u32) -> Result<u64, Trap> {
    let ea = addr as u64 + offsets.get(site as usize).copied().unwrap_or(0);
    if ea > u32::MAX as u64 {
        return Err(Trap::MemoryOutOfBounds);
    }
    Ok(ea)
}

/// Checks a futex address as wasmtime does for a non-shared memory
/// (alignment first, then bounds).
fn check_futex_addr(ea: u64, size: u64, len: u64) -> Result<(), Trap> {
    if !ea.is_multiple_of(size) {
        return Err(Trap::HeapMisaligned);
    }
    if ea.saturating_add(size) > len {
        return Err(Trap::MemoryOutOfBounds);
    }
    Ok(())
}

fn no_memory() -> wasmtime::Error {
    wasmtime::Error::msg("heddle_rt hook: the calling instance has no memory")
}

/// Defines every `heddle_rt.*` import of an instrumented module with host
/// functions that do nothing observable, so that the instrumented module
/// behaves exactly like the original:
///
/// * `access`, `range`, `copy` return 0 ("do not switch"); `switch`,
///   `budget` and `locked` do nothing;
/// * `wait32`, `wait64`, `notify` perform the futex operation the rewriter
///   replaced, at the original effective address `addr + mem_offsets[site]`
///   (an address beyond 4 GiB traps out of bounds, as in wasmtime), on the memory
///   `memory` returns: on a shared memory with wasmtime's real atomics (they
///   block the OS thread), on a non-shared memory with wasm's semantics
///   (`notify` returns 0, `wait` traps);
/// * the memory checker's allocator hooks change nothing: `alloc_arg(i)`
///   returns the i-th argument given to the preceding `alloc_args`,
///   `alloc_post` returns the allocator's result;
/// * `grow(delta)` and `size()` do what the `memory.grow`/`memory.size` they
///   replaced do, on that memory (old size or -1; size in pages);
/// * `call_catching(arg, fn)` calls `fn` of the exported `heddle_table` with
///   `arg`, and turns a [`ThreadExit`] into the return value (restoring
///   `heddle_sp`), as heddle's runtime does.
pub fn add_noop_hooks<T: 'static>(
    linker: &mut Linker<T>,
    mem_offsets: Arc<[u64]>,
    memory: MemoryFn<T>,
) -> Result<()> {
    let m = RtImport::MODULE;
    linker.func_wrap(
        m,
        RtImport::Access.name(),
        |mut caller: Caller<'_, T>, _site: u32, _addr: u32| {
            // Reached when the skip counter ran out (or at an unguarded
            // yield point): skip again.
            if let Some(Extern::Global(g)) = caller.get_export(EXPORT_SKIP) {
                if g.get(&mut caller).i32() == Some(0) {
                    let _ = g.set(&mut caller, wasmtime::Val::I32(i32::MAX));
                }
            }
            0i32
        },
    )?;
    linker.func_wrap(m, RtImport::Switch.name(), || i32::MAX)?;
    linker.func_wrap(m, RtImport::Budget.name(), |_site: u32| i32::MAX)?;
    linker.func_wrap(
        m,
        RtImport::Range.name(),
        |_site: u32, _addr: u32, _len: u32| 0i32,
    )?;
    linker.func_wrap(
        m,
        RtImport::Copy.name(),
        |_site: u32, _dst: u32, _src: u32, _len: u32| 0i32,
    )?;
    linker.func_wrap(
        m,
        RtImport::Locked.name(),
        |_site: u32, _addr: u32, _ret: i32| {},
    )?;

    let offs = mem_offsets.clone();
    linker.func_wrap(
        m,
        RtImport::Wait32.name(),
        move |mut caller: Caller<'_, T>,
              site: u32,
              addr: u32,
              expected: i32,
              timeout: i64|
              -> wasmtime::Result<i32> {
            let ea = futex_ea(&offs, site, addr)?;
            let timeout = (timeout >= 0).then(|| Duration::from_nanos(timeout as u64));
            match memory(&mut caller) {
                Some(Extern::SharedMemory(sm)) => {
                    Ok(sm.atomic_wait32(ea, expected as u32, timeout)? as i32)
                }
                Some(Extern::Memory(mem)) => {
                    check_futex_addr(ea, 4, mem.data_size(&caller) as u64)?;
                    Err(Trap::AtomicWaitNonSharedMemory.into())
                }
                _ => Err(no_memory()),
            }
        },
    )?;
    let offs = mem_offsets.clone();
    linker.func_wrap(
        m,
        RtImport::Wait64.name(),
        move |mut caller: Caller<'_, T>,
              site: u32,
              addr: u32,
              expected: i64,
              timeout: i64|
              -> wasmtime::Result<i32> {
            let ea = futex_ea(&offs, site, addr)?;
            let timeout = (timeout >= 0).then(|| Duration::from_nanos(timeout as u64));
            match memory(&mut caller) {
                Some(Extern::SharedMemory(sm)) => {
                    Ok(sm.atomic_wait64(ea, expected as u64, timeout)? as i32)
                }
                Some(Extern::Memory(mem)) => {
                    check_futex_addr(ea, 8, mem.data_size(&caller) as u64)?;
                    Err(Trap::AtomicWaitNonSharedMemory.into())
                }
                _ => Err(no_memory()),
            }
        },
    )?;
    // Never -1 here: nothing switches, so `notify_switched` is not called
    // but links like `notify`.
    for f in [RtImport::Notify, RtImport::NotifySwitched] {
        let offs = mem_offsets.clone();
        linker.func_wrap(
            m,
            f.name(),
            move |mut caller: Caller<'_, T>,
                  site: u32,
                  addr: u32,
                  count: u32|
                  -> wasmtime::Result<i32> {
                let ea = futex_ea(&offs, site, addr)?;
                match memory(&mut caller) {
                    Some(Extern::SharedMemory(sm)) => Ok(sm.atomic_notify(ea, count)? as i32),
                    Some(Extern::Memory(mem)) => {
                        check_futex_addr(ea, 4, mem.data_size(&caller) as u64)?;
                        Ok(0)
                    }
                    _ => Err(no_memory()),
                }
            },
        )?;
    }

    linker.func_wrap(
        m,
        RtImport::AllocArgs.name(),
        |_site: u32, a0: i32, a1: i32, a2: i32| ALLOC_ARGS.with(|c| c.set([a0, a1, a2])),
    )?;
    linker.func_wrap(m, RtImport::AllocArg.name(), |i: u32| -> i32 {
        ALLOC_ARGS.with(|c| c.get().get(i as usize).copied().unwrap_or(0))
    })?;
    linker.func_wrap(m, RtImport::AllocPost.name(), |_site: u32, result: i32| {
        result
    })?;
    linker.func_wrap(
        m,
        RtImport::Grow.name(),
        move |mut caller: Caller<'_, T>, delta: u32| -> wasmtime::Result<i32> {
            let old = match memory(&mut caller) {
                Some(Extern::SharedMemory(sm)) => sm.grow(delta as u64),
                Some(Extern::Memory(mem)) => mem.grow(&mut caller, delta as u64),
                _ => return Err(no_memory()),
            };
            Ok(old.map(|p| p as i32).unwrap_or(-1))
        },
    )?;
    linker.func_wrap(
        m,
        RtImport::Size.name(),
        move |mut caller: Caller<'_, T>| -> wasmtime::Result<i32> {
            match memory(&mut caller) {
                Some(Extern::SharedMemory(sm)) => Ok(sm.size() as i32),
                Some(Extern::Memory(mem)) => Ok(mem.size(&caller) as i32),
                _ => Err(no_memory()),
            }
        },
    )?;

    linker.func_wrap(
        m,
        RtImport::Unreachable.name(),
        || -> wasmtime::Result<()> { Err(wasmtime::Trap::UnreachableCodeReached.into()) },
    )?;

    linker.func_wrap(
        m,
        RtImport::CallCatching.name(),
        |mut caller: Caller<'_, T>, arg: i32, func: u32| -> wasmtime::Result<i32> {
            let table = caller
                .get_export(EXPORT_TABLE)
                .and_then(Extern::into_table)
                .ok_or_else(|| wasmtime::Error::msg("module exports no heddle_table"))?;
            if func as u64 >= table.size(&caller) {
                return Err(Trap::TableOutOfBounds.into());
            }
            let f = table
                .get(&mut caller, func as u64)
                .and_then(|r| r.as_func().flatten().copied())
                .ok_or(Trap::IndirectCallToNull)?;
            let f = f
                .typed::<i32, i32>(&caller)
                .map_err(|_| wasmtime::Error::new(Trap::BadSignature))?;
            let sp = caller.get_export(EXPORT_SP).and_then(Extern::into_global);
            let saved = sp.map(|g| g.get(&mut caller));
            match f.call(&mut caller, arg) {
                Ok(r) => Ok(r),
                Err(e) => match e.downcast_ref::<ThreadExit>() {
                    Some(&ThreadExit(v)) => {
                        if let (Some(g), Some(val)) = (sp, saved) {
                            g.set(&mut caller, val)?;
                        }
                        Ok(v)
                    }
                    None => Err(e),
                },
            }
        },
    )?;
    Ok(())
}

thread_local! {
    /// The arguments of the allocator call a guest thread is making
    /// (`alloc_args` then `alloc_arg`, with nothing in between: a wasm call
    /// never leaves the OS thread, and each plain guest thread has its own).
    static ALLOC_ARGS: std::cell::Cell<[i32; 3]> = const { std::cell::Cell::new([0; 3]) };
}

/// Reads a NUL-terminated string (at most 4 KiB) at `addr`.
fn read_cstr<T>(caller: &mut Caller<'_, T>, memory: MemoryFn<T>, addr: u32) -> String {
    let mut out = Vec::new();
    match memory(caller) {
        Some(Extern::SharedMemory(sm)) => {
            // Other guest threads may be writing: atomic byte reads (at
            // worst the message is garbled).
            return super::memory::concurrent_cstr(sm.data(), addr, 4096);
        }
        Some(Extern::Memory(mem)) => {
            let data = mem.data(&*caller);
            out.extend(
                data.iter()
                    .skip(addr as usize)
                    .take(4096)
                    .take_while(|&&b| b != 0),
            );
        }
        _ => return format!("<string at {addr:#x}>"),
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Defines the guest SDK imports (`heddle.*`) with their plain meanings:
/// `assert(0, msg)` and `fail(msg)` end the run with an [`AssertionFailed`]
/// error; `yield` yields the OS thread; `event` and `thread_name` do
/// nothing; `choose(n)` always answers 0; `thread_exit(v)` unwinds with
/// [`ThreadExit`].
pub fn add_sdk<T: 'static>(linker: &mut Linker<T>, memory: MemoryFn<T>) -> Result<()> {
    let m = SdkImport::MODULE;
    linker.func_wrap(
        m,
        SdkImport::Assert.name(),
        move |mut caller: Caller<'_, T>, cond: i32, msg: u32| -> wasmtime::Result<()> {
            if cond != 0 {
                return Ok(());
            }
            let text = read_cstr(&mut caller, memory, msg);
            Err(wasmtime::Error::new(AssertionFailed(text)))
        },
    )?;
    linker.func_wrap(
        m,
        SdkImport::Fail.name(),
        move |mut caller: Caller<'_, T>, msg: u32| -> wasmtime::Result<()> {
            let text = read_cstr(&mut caller, memory, msg);
            Err(wasmtime::Error::new(AssertionFailed(text)))
        },
    )?;
    linker.func_wrap(m, SdkImport::Yield.name(), std::thread::yield_now)?;
    linker.func_wrap(m, SdkImport::Event.name(), |_name: u32| {})?;
    linker.func_wrap(m, SdkImport::ThreadName.name(), |_name: u32| {})?;
    linker.func_wrap(m, SdkImport::Choose.name(), |_n: u32| 0u32)?;
    // No signal is sent between threads without heddle; a signal a thread
    // sends itself is not delivered.
    linker.func_wrap(m, SdkImport::SigAction.name(), |_: u32, _: u32, _: u32| {})?;
    linker.func_wrap(m, SdkImport::SigMask.name(), |_: u32, _: u64| 0u64)?;
    linker.func_wrap(m, SdkImport::SigKill.name(), |_: u32, _: u32| 0i32)?;
    linker.func_wrap(m, SdkImport::SigPending.name(), || 0u64)?;
    linker.func_wrap(m, SdkImport::SigTimer.name(), |_: u64, _: u64| 0u64)?;
    linker.func_wrap(m, SdkImport::SigInterrupted.name(), || 0i32)?;
    // No pipes without heddle (ENOSYS).
    linker.func_wrap(m, SdkImport::Pipe.name(), |_: u32, _: u32| 52i32)?;
    linker.func_wrap(m, SdkImport::SocketPair.name(), |_: u32, _: u32| 52i32)?;
    linker.func_wrap(
        m,
        SdkImport::SigWait.name(),
        |_: u64, _: u32| -> wasmtime::Result<i32> {
            Err(wasmtime::Error::msg(
                "sigwait without heddle's scheduler would wait forever",
            ))
        },
    )?;
    linker.func_wrap(
        m,
        SdkImport::ThreadExit.name(),
        |value: i32| -> wasmtime::Result<()> { Err(wasmtime::Error::new(ThreadExit(value))) },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `;; => NAME(ARG) = RESULT` of `tests/data/eh/legacy.wat` holds
    /// when the module runs translated into the final encoding, by itself
    /// and as the instrumenter translates it (every function user code, with
    /// budget points and yield points, and no-op hooks).
    #[test]
    fn translated_legacy_exceptions_run_as_written() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/eh/legacy.wat");
        let text = std::fs::read_to_string(path).unwrap();
        let legacy = wat::parse_str(&text).unwrap();
        let engine = engine_with(false).unwrap();

        let bytes = heddle_instrument::eh::translate(&legacy).unwrap();
        let module = Module::new(&engine, &bytes).unwrap();
        let mut store = wasmtime::Store::new(&engine, ());
        let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
        check_cases(&text, &mut store, &instance);

        let with_memory = text.replacen(
            "(module",
            r#"(module (import "env" "memory" (memory 1 1 shared))"#,
            1,
        );
        let legacy = wat::parse_str(&with_memory).unwrap();
        let cfg = crate::instrument::Config {
            include_funcs: vec!["*".into()],
            ..Default::default()
        };
        let inst = crate::instrument::instrument(&legacy, &cfg).unwrap();
        let module = Module::new(&engine, &inst.module).unwrap();
        let mut linker: Linker<()> = Linker::new(&engine);
        fn memory(caller: &mut Caller<'_, ()>) -> Option<Extern> {
            caller.get_export("memory")
        }
        add_noop_hooks(&mut linker, mem_offsets(&inst.sites), memory).unwrap();
        let mut store = wasmtime::Store::new(&engine, ());
        let mem = wasmtime::SharedMemory::new(&engine, wasmtime::MemoryType::shared(1, 1)).unwrap();
        linker.define(&mut store, "env", "memory", mem).unwrap();
        let instance = linker.instantiate(&mut store, &module).unwrap();
        check_cases(&text, &mut store, &instance);
    }

    fn check_cases(text: &str, store: &mut wasmtime::Store<()>, instance: &wasmtime::Instance) {
        let mut checked = 0;
        for line in text.lines() {
            let Some(case) = line.trim().strip_prefix(";; => ") else {
                continue;
            };
            let (call, want) = case.split_once(" = ").unwrap();
            let (name, arg) = call.trim_end_matches(')').split_once('(').unwrap();
            let f = instance.get_func(&mut *store, name).unwrap();
            let args: Vec<wasmtime::Val> = arg
                .parse::<i32>()
                .map(|a| vec![wasmtime::Val::I32(a)])
                .unwrap_or_default();
            let mut results = [wasmtime::Val::I32(0)];
            let got = f.call(&mut *store, &args, &mut results);
            match want {
                "trap" => assert!(got.is_err(), "{call} returned"),
                _ => {
                    got.unwrap_or_else(|e| panic!("{call}: {e:?}"));
                    assert_eq!(
                        results[0].unwrap_i32(),
                        want.parse::<i32>().unwrap(),
                        "{call}"
                    );
                }
            }
            checked += 1;
        }
        assert!(checked >= 25, "{checked} cases");
    }
}
