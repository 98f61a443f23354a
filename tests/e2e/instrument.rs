//! Tests: instrument.
//!
//! The instrumenter against its contract: an instrumented module computes
//! exactly what the original computes (differentially, on random wasm-smith
//! modules and on the bundled targets under plain wasmtime with real
//! threads), invalid input is an error and never a panic, the site table
//! names the right source lines, granularity and filters choose the right
//! instructions, accesses to a thread's own stack frame are not yield points
//! unless the frame escapes, and backtraces of the instrumented module
//! symbolize to the original source.

use crate::common::{build, heddle_out, manifest, repo, rust_build, target_module, tempdir, text};
use heddle::instrument::{self, Config, Granularity, Instrumented, SiteKind, SiteTable};
use heddle::runtime::plain::{self, PlainOutcome, PlainProgram};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use wasmparser::{Operator, Parser, Payload, Validator, WasmFeatures};
use wasmtime::{
    Caller, Engine, Extern, ExternType, Linker, Module, OptLevel, Store, StoreLimits,
    StoreLimitsBuilder, Trap, Val,
};

fn all_cfg() -> Config {
    Config {
        granularity: Granularity::All,
        ..Config::default()
    }
}

fn instrument_ok(bytes: &[u8], cfg: &Config) -> Instrumented {
    instrument::instrument(bytes, cfg).expect("instrument")
}

// ---------------------------------------------------------------------------
// (a) Differential fuzzing with wasm-smith modules.
// ---------------------------------------------------------------------------

/// splitmix64: a fixed-seed PRNG for the fuzz inputs.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A wasm-smith module from `data`, if the bytes make one.
fn smith(cfg: &wasm_smith::Config, data: &[u8]) -> Option<Vec<u8>> {
    let mut u = arbitrary::Unstructured::new(data);
    let m = wasm_smith::Module::new(cfg.clone(), &mut u).ok()?;
    Some(m.to_bytes())
}

fn smith_config() -> wasm_smith::Config {
    wasm_smith::Config {
        max_imports: 0,
        min_memories: 1,
        max_memories: 1,
        max_memory32_bytes: 4 << 16,
        memory64_enabled: false,
        gc_enabled: false,
        exceptions_enabled: false,
        // Wasmtime is built without the `gc` feature: no externref.
        reference_types_enabled: false,
        relaxed_simd_enabled: false,
        simd_enabled: true,
        threads_enabled: true,
        shared_everything_threads_enabled: false,
        tail_call_enabled: true,
        custom_page_sizes_enabled: false,
        wide_arithmetic_enabled: false,
        export_everything: true,
        min_funcs: 1,
        max_funcs: 12,
        max_instructions: 200,
        max_data_segments: 8,
        max_element_segments: 8,
        max_globals: 12,
        max_types: 20,
        max_exports: 40,
        max_table_elements: 1000,
        ..wasm_smith::Config::default()
    }
}

fn fuzz_engine() -> Engine {
    let mut c = wasmtime::Config::new();
    c.wasm_threads(true);
    c.shared_memory(true);
    c.consume_fuel(true);
    c.cranelift_opt_level(OptLevel::None);
    c.parallel_compilation(false);
    Engine::new(&c).expect("engine")
}

struct FuzzCtx {
    /// The module's exported memory, for the futex hooks.
    memory_export: Option<String>,
    limits: StoreLimits,
}

fn fuzz_memory(caller: &mut Caller<'_, FuzzCtx>) -> Option<Extern> {
    let name = caller.data().memory_export.clone()?;
    caller.get_export(&name)
}

/// A value, bitwise (floats by their bits, NaN payloads included).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Bits {
    I32(i32),
    I64(i64),
    F32(u32),
    F64(u64),
    V128(u128),
    Ref { null: bool },
}

fn bits(v: &Val) -> Bits {
    match v {
        Val::I32(x) => Bits::I32(*x),
        Val::I64(x) => Bits::I64(*x),
        Val::F32(x) => Bits::F32(*x),
        Val::F64(x) => Bits::F64(*x),
        Val::V128(x) => Bits::V128(x.as_u128()),
        Val::FuncRef(f) => Bits::Ref { null: f.is_none() },
        Val::ExternRef(r) => Bits::Ref { null: r.is_none() },
        Val::AnyRef(r) => Bits::Ref { null: r.is_none() },
        Val::ExnRef(r) => Bits::Ref { null: r.is_none() },
        Val::ContRef(r) => Bits::Ref { null: r.is_none() },
    }
}

/// One observable step of a module's execution.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Instantiate(Result<(), String>),
    Call {
        export: String,
        result: Result<Vec<Bits>, String>,
    },
}

/// Everything compared between the original and the instrumented run.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Observed {
    steps: Vec<Step>,
    memories: Vec<(String, Vec<u8>)>,
    globals: Vec<(String, Bits)>,
}

/// Why a module is not compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    OutOfFuel,
    StackOverflow,
    NoDefaultArg,
}

fn outcome_of(e: &wasmtime::Error) -> Result<String, Stop> {
    match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => Err(Stop::OutOfFuel),
        Some(Trap::StackOverflow) => Err(Stop::StackOverflow),
        Some(t) => Ok(format!("trap {t:?}")),
        None => Ok(format!("error {e:#}")),
    }
}

/// Instantiates `module` and calls every export of `exports` (the original
/// module's, in order) with default arguments, within `fuel`.
fn execute(
    engine: &Engine,
    linker: &Linker<FuzzCtx>,
    module: &Module,
    exports: &[(String, ExternType)],
    fuel: u64,
) -> Result<Observed, Stop> {
    let memory_export = exports
        .iter()
        .find(|(_, t)| matches!(t, ExternType::Memory(_)))
        .map(|(n, _)| n.clone());
    let mut store = Store::new(
        engine,
        FuzzCtx {
            memory_export,
            limits: StoreLimitsBuilder::new()
                .memory_size(16 << 20)
                .table_elements(100_000)
                .build(),
        },
    );
    store.limiter(|c| &mut c.limits);
    store.set_fuel(fuel).expect("fuel");
    let mut obs = Observed {
        steps: Vec::new(),
        memories: Vec::new(),
        globals: Vec::new(),
    };
    let instance = match linker.instantiate(&mut store, module) {
        Ok(i) => {
            obs.steps.push(Step::Instantiate(Ok(())));
            i
        }
        Err(e) => {
            obs.steps.push(Step::Instantiate(Err(outcome_of(&e)?)));
            return Ok(obs);
        }
    };
    for (name, ty) in exports {
        let ExternType::Func(_) = ty else { continue };
        let f = instance
            .get_func(&mut store, name)
            .unwrap_or_else(|| panic!("export {name} is not a function"));
        let ty = f.ty(&store);
        let params: Option<Vec<Val>> = ty.params().map(|t| Val::default_for_ty(&t)).collect();
        let params = params.ok_or(Stop::NoDefaultArg)?;
        let mut results: Vec<Val> = ty.results().map(|_| Val::I32(0)).collect();
        let result = match f.call(&mut store, &params, &mut results) {
            Ok(()) => Ok(results.iter().map(bits).collect()),
            Err(e) => Err(outcome_of(&e)?),
        };
        obs.steps.push(Step::Call {
            export: name.clone(),
            result,
        });
    }
    for (name, ty) in exports {
        match ty {
            ExternType::Memory(_) => {
                let bytes = match instance.get_export(&mut store, name) {
                    Some(Extern::Memory(m)) => m.data(&store).to_vec(),
                    Some(Extern::SharedMemory(m)) => m
                        .data()
                        .iter()
                        // SAFETY: single-threaded; nothing runs in the store.
                        .map(|c| unsafe { *c.get() })
                        .collect(),
                    other => panic!("export {name} is not a memory: {other:?}"),
                };
                obs.memories.push((name.clone(), bytes));
            }
            ExternType::Global(_) => {
                let g = instance.get_global(&mut store, name).expect("global");
                let v = g.get(&mut store);
                obs.globals.push((name.clone(), bits(&v)));
            }
            _ => {}
        }
    }
    Ok(obs)
}

/// Static features of a module, for skipping and for coverage statistics.
#[derive(Default, Debug, Clone, Copy)]
struct Features {
    wait: bool,
    notify: bool,
    atomic: bool,
    simd: bool,
    bulk: bool,
    plain_access: bool,
    start: bool,
}

fn features(bytes: &[u8]) -> Features {
    let mut f = Features::default();
    for p in Parser::new(0).parse_all(bytes) {
        match p.expect("wasm-smith output parses") {
            Payload::StartSection { .. } => f.start = true,
            Payload::CodeSectionEntry(body) => {
                let mut r = body.get_operators_reader().expect("ops");
                while !r.eof() {
                    let op = r.read().expect("op");
                    let name = format!("{op:?}");
                    match op {
                        Operator::MemoryAtomicWait32 { .. }
                        | Operator::MemoryAtomicWait64 { .. } => f.wait = true,
                        Operator::MemoryAtomicNotify { .. } => f.notify = true,
                        Operator::MemoryCopy { .. } | Operator::MemoryFill { .. } => f.bulk = true,
                        _ if name.contains("Atomic") => f.atomic = true,
                        _ if name.starts_with("V128")
                            || name.contains("x4")
                            || name.contains("x2")
                            || name.contains("x8")
                            || name.contains("x16") =>
                        {
                            f.simd = true;
                            if name.contains("Load") || name.contains("Store") {
                                f.plain_access = true;
                            }
                        }
                        _ if name.contains("Load") || name.contains("Store") => {
                            f.plain_access = true
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    f
}

/// What happened to one generated module.
enum Fate {
    Compared(Features),
    Skipped(&'static str),
    Failed(String),
}

fn fuzz_one(
    engine: &Engine,
    smith_cfg: &wasm_smith::Config,
    seed: u64,
    failures_dir: &std::path::Path,
) -> Fate {
    let mut rng = SplitMix(0x6865_6464_6c65_0000 ^ seed.wrapping_mul(0x1000_0001));
    let len = 2048 + (rng.next() % 30000) as usize;
    let data = rng.bytes(len);
    // Every other module has no traps: wasm-smith masks its addresses into
    // bounds, so more of it runs and more memory is written. Half of the
    // modules use integer memory instructions (plain, atomic, bulk, futex)
    // and control flow only, so that those are dense.
    let mut variant = smith_cfg.clone();
    variant.disallow_traps = seed.is_multiple_of(2);
    if seed % 4 >= 2 {
        use wasm_smith::InstructionKind as K;
        variant.allowed_instructions = wasm_smith::InstructionKinds::new(&[
            K::MemoryInt,
            K::NumericInt,
            K::Variable,
            K::Control,
            K::Parametric,
        ]);
    }
    let smith_cfg = &variant;
    let Some(bytes) = smith(smith_cfg, &data) else {
        return Fate::Skipped("wasm-smith gave up");
    };
    let feats = features(&bytes);
    if feats.wait {
        return Fate::Skipped("memory.atomic.wait");
    }
    let save = |what: &str, extra: &[u8]| -> String {
        let p = failures_dir.join(format!("seed{seed}.wasm"));
        let _ = std::fs::write(&p, &bytes);
        if !extra.is_empty() {
            let _ = std::fs::write(failures_dir.join(format!("seed{seed}.inst.wasm")), extra);
        }
        format!("seed {seed}: {what} (module: {})", p.display())
    };
    let original = match Module::new(engine, &bytes) {
        Ok(m) => m,
        Err(_) => return Fate::Skipped("wasmtime rejects the original"),
    };
    let cfg = Config {
        granularity: Granularity::All,
        include_funcs: vec!["*".into()],
        ..Config::default()
    };
    let inst = match std::panic::catch_unwind(|| instrument::instrument(&bytes, &cfg)) {
        Ok(Ok(i)) => i,
        Ok(Err(e)) => return Fate::Failed(save(&format!("instrument failed: {e:#}"), &[])),
        Err(_) => return Fate::Failed(save("instrument panicked", &[])),
    };
    let mut features = WasmFeatures::default();
    features.insert(WasmFeatures::THREADS);
    if let Err(e) = Validator::new_with_features(features).validate_all(&inst.module) {
        return Fate::Failed(save(
            &format!("instrumented module does not validate: {e}"),
            &inst.module,
        ));
    }
    let instrumented = match Module::new(engine, &inst.module) {
        Ok(m) => m,
        Err(e) => {
            return Fate::Failed(save(
                &format!("wasmtime rejects the instrumented module: {e:#}"),
                &inst.module,
            ))
        }
    };
    let exports: Vec<(String, ExternType)> = original
        .exports()
        .map(|e| (e.name().to_string(), e.ty()))
        .collect();
    for (name, ty) in &exports {
        let same = instrumented
            .get_export(name)
            .map(|t| std::mem::discriminant(&t) == std::mem::discriminant(ty));
        if same != Some(true) {
            return Fate::Failed(save(
                &format!("export `{name}` missing or of another kind"),
                &inst.module,
            ));
        }
    }

    const FUEL: u64 = 200_000;
    let plain_linker: Linker<FuzzCtx> = Linker::new(engine);
    let want = match execute(engine, &plain_linker, &original, &exports, FUEL) {
        Ok(o) => o,
        Err(Stop::OutOfFuel) => return Fate::Skipped("original runs out of fuel"),
        Err(Stop::StackOverflow) => return Fate::Skipped("original overflows its stack"),
        Err(Stop::NoDefaultArg) => return Fate::Skipped("export takes a non-defaultable argument"),
    };
    let mut hook_linker: Linker<FuzzCtx> = Linker::new(engine);
    plain::add_noop_hooks(
        &mut hook_linker,
        plain::mem_offsets(&inst.sites),
        fuzz_memory,
    )
    .expect("hooks");
    let got = match execute(
        engine,
        &hook_linker,
        &instrumented,
        &exports,
        FUEL * 50 + 1_000_000,
    ) {
        Ok(o) => o,
        Err(stop) => {
            return Fate::Failed(save(
                &format!("instrumented run stopped ({stop:?}) where the original did not"),
                &inst.module,
            ))
        }
    };
    if want != got {
        return Fate::Failed(save(&describe_difference(&want, &got), &inst.module));
    }
    Fate::Compared(feats)
}

fn describe_difference(want: &Observed, got: &Observed) -> String {
    for (i, (a, b)) in want.steps.iter().zip(&got.steps).enumerate() {
        if a != b {
            return format!("step {i} differs: original {a:?}, instrumented {b:?}");
        }
    }
    if want.steps.len() != got.steps.len() {
        return format!(
            "{} steps in the original, {} instrumented",
            want.steps.len(),
            got.steps.len()
        );
    }
    for (a, b) in want.memories.iter().zip(&got.memories) {
        if a != b {
            let at = a.1.iter().zip(&b.1).position(|(x, y)| x != y);
            return format!(
                "memory `{}` differs (lengths {} / {}, first difference at {at:?})",
                a.0,
                a.1.len(),
                b.1.len()
            );
        }
    }
    format!(
        "globals differ: original {:?}, instrumented {:?}",
        want.globals, got.globals
    )
}

#[test]
fn differential_fuzz_wasm_smith() {
    differential_fuzz(1000);
}

/// The slow tier's run of [`differential_fuzz_wasm_smith`]: ten times the
/// modules.
#[test]
#[ignore = "slow tier: scripts/test.sh --slow"]
fn differential_fuzz_wasm_smith_10k() {
    differential_fuzz(10_000);
}

/// Compares `want` wasm-smith modules, original against instrumented
/// (seeds from 0, the same modules in every run); the coverage floors
/// scale with `want`.
fn differential_fuzz(want: usize) {
    let started = std::time::Instant::now();
    let engine = fuzz_engine();
    let smith_cfg = smith_config();
    let dir = tempdir();
    const BATCH: u64 = 250;
    let max_seeds = 6 * want as u64;
    let compared = AtomicUsize::new(0);
    let mut stats: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut cover = [0usize; 6];
    let mut failures: Vec<String> = Vec::new();
    let mut next = 0u64;
    while compared.load(Ordering::Relaxed) < want && next < max_seeds {
        let seeds: Vec<u64> = (next..next + BATCH).collect();
        next += BATCH;
        let fates =
            crate::common::par_map(&seeds, |&s| fuzz_one(&engine, &smith_cfg, s, dir.path()));
        for f in fates {
            match f {
                Fate::Compared(ft) => {
                    compared.fetch_add(1, Ordering::Relaxed);
                    for (i, on) in [
                        ft.atomic,
                        ft.notify,
                        ft.simd,
                        ft.bulk,
                        ft.plain_access,
                        ft.start,
                    ]
                    .into_iter()
                    .enumerate()
                    {
                        cover[i] += on as usize;
                    }
                }
                Fate::Skipped(why) => *stats.entry(why).or_default() += 1,
                Fate::Failed(msg) => failures.push(msg),
            }
        }
    }
    let compared = compared.load(Ordering::Relaxed);
    eprintln!(
        "differential fuzz: {next} modules generated, {compared} compared, skipped {stats:?}, {} failures, {:.1}s; compared modules with atomics {}, notify {}, simd {}, memory.copy/fill {}, plain loads/stores {}, start function {}",
        failures.len(),
        started.elapsed().as_secs_f64(),
        cover[0],
        cover[1],
        cover[2],
        cover[3],
        cover[4],
        cover[5],
    );
    if !failures.is_empty() {
        // Keep the failing modules for analysis.
        let keep = dir.keep();
        panic!(
            "{} of {next} modules differ (kept in {}):\n{}",
            failures.len(),
            keep.display(),
            failures
                .iter()
                .take(10)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    assert!(compared >= want, "only {compared} modules compared");
    assert!(
        cover[0] >= want / 20,
        "too few modules with atomics: {}",
        cover[0]
    );
    assert!(
        cover[4] >= want / 5,
        "too few modules with plain accesses: {}",
        cover[4]
    );
}

// Futex instructions are rare in wasm-smith output (and its waits are
// skipped), so the instructions the rewriter *replaces* by host calls get
// their own differential cases: every alignment, bounds and offset corner,
// on shared and non-shared memory.

/// A module with one page of memory (shared or not, exported as `memory`)
/// and a function `f` of no arguments whose body is `body`.
fn futex_module(
    shared: bool,
    imported: bool,
    result: bool,
    body: &[wasm_encoder::Instruction],
) -> Vec<u8> {
    use wasm_encoder::{
        CodeSection, EntityType, ExportKind, ExportSection, Function, FunctionSection,
        ImportSection, MemorySection, MemoryType, TypeSection, ValType,
    };
    let mem = MemoryType {
        minimum: 1,
        maximum: Some(1),
        memory64: false,
        shared,
        page_size_log2: None,
    };
    let mut m = wasm_encoder::Module::new();
    let mut types = TypeSection::new();
    types
        .ty()
        .function([], if result { vec![ValType::I32] } else { vec![] });
    m.section(&types);
    if imported {
        let mut imports = ImportSection::new();
        imports.import("env", "memory", EntityType::Memory(mem));
        m.section(&imports);
    }
    let mut funcs = FunctionSection::new();
    funcs.function(0);
    m.section(&funcs);
    if !imported {
        let mut mems = MemorySection::new();
        mems.memory(mem);
        m.section(&mems);
    }
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    exports.export(if imported { "_start" } else { "f" }, ExportKind::Func, 0);
    m.section(&exports);
    let mut code = CodeSection::new();
    let mut f = Function::new([]);
    for i in body {
        f.instruction(i);
    }
    f.instruction(&wasm_encoder::Instruction::End);
    code.function(&f);
    m.section(&code);
    m.finish()
}

fn futex_cases() -> Vec<(String, Vec<wasm_encoder::Instruction<'static>>)> {
    use wasm_encoder::{Instruction as I, MemArg};
    let arg = |offset: u64, align: u32| MemArg {
        offset,
        align,
        memory_index: 0,
    };
    // (address, static offset): aligned, misaligned, last word, just out of
    // bounds, out of bounds and misaligned, beyond 4 GiB (out of bounds,
    // misaligned for wait64, aligned and in bounds after a 32-bit
    // wrap-around), offset making a misaligned address aligned.
    let places: [(u32, u64); 9] = [
        (0, 0),
        (8, 0),
        (2, 0),
        (65536 - 8, 0),
        (65536, 0),
        (65538, 0),
        (0xffff_fffc, 8),
        (0xffff, 1),
        (1, 7),
    ];
    let mut cases = Vec::new();
    for (addr, off) in places {
        let a = addr as i32;
        cases.push((
            format!("notify addr={addr:#x} offset={off}"),
            vec![
                I::I32Const(a),
                I::I32Const(5),
                I::MemoryAtomicNotify(arg(off, 2)),
            ],
        ));
        // Memory holds 0: expecting 1 does not block (1 = "not-equal"),
        // expecting 0 with a 0 ns timeout times out (2).
        for (expected, timeout) in [(1, -1i64), (0, 0)] {
            cases.push((
                format!("wait32 addr={addr:#x} offset={off} expected={expected} timeout={timeout}"),
                vec![
                    I::I32Const(a),
                    I::I32Const(expected),
                    I::I64Const(timeout),
                    I::MemoryAtomicWait32(arg(off, 2)),
                ],
            ));
            cases.push((
                format!("wait64 addr={addr:#x} offset={off} expected={expected} timeout={timeout}"),
                vec![
                    I::I32Const(a),
                    I::I64Const(expected as i64),
                    I::I64Const(timeout),
                    I::MemoryAtomicWait64(arg(off, 3)),
                ],
            ));
        }
    }
    cases
}

#[test]
fn futex_replacements_behave_like_the_originals() {
    let engine = fuzz_engine();
    let mut compared = 0;
    let mut traps = 0;
    let mut failures = Vec::new();
    for shared in [true, false] {
        for (name, body) in futex_cases() {
            let what = format!("{name} ({})", if shared { "shared" } else { "non-shared" });
            let bytes = futex_module(shared, false, true, &body);
            let inst = instrument_ok(
                &bytes,
                &Config {
                    include_funcs: vec!["*".into()],
                    ..all_cfg()
                },
            );
            assert!(
                inst.sites
                    .sites
                    .iter()
                    .any(|s| matches!(s.kind, SiteKind::Wait | SiteKind::Notify)),
                "{what}: no futex site"
            );
            let original = Module::new(&engine, &bytes).expect("original");
            let instrumented = Module::new(&engine, &inst.module).expect("instrumented");
            let exports: Vec<(String, ExternType)> = original
                .exports()
                .map(|e| (e.name().to_string(), e.ty()))
                .collect();
            let want = execute(&engine, &Linker::new(&engine), &original, &exports, 10_000)
                .unwrap_or_else(|s| panic!("{what}: original stopped: {s:?}"));
            let mut linker = Linker::new(&engine);
            plain::add_noop_hooks(&mut linker, plain::mem_offsets(&inst.sites), fuzz_memory)
                .expect("hooks");
            let got = execute(&engine, &linker, &instrumented, &exports, 1_000_000)
                .unwrap_or_else(|s| panic!("{what}: instrumented stopped: {s:?}"));
            if want != got {
                failures.push(format!("{what}: {}", describe_difference(&want, &got)));
            }
            traps += want
                .steps
                .iter()
                .any(|s| matches!(s, Step::Call { result: Err(_), .. }))
                as usize;
            compared += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {compared} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(compared, 2 * futex_cases().len());
    assert!(traps > 0 && traps < compared, "{traps} of {compared} trap");
}

/// A futex instruction whose effective address (`addr + offset`) is beyond
/// 4 GiB traps out of bounds in wasm; heddle's runtime must not wrap the
/// address around to low memory. Library bug: `futex_addr` in
/// runtime/hooks.rs adds the offset with `u32::wrapping_add`, so the
/// notify below reaches address 4 and the run passes.
#[test]

fn heddle_runtime_futex_address_does_not_wrap() {
    use wasm_encoder::{Instruction as I, MemArg};
    let body = [
        I::I32Const(0xffff_fffcu32 as i32),
        I::I32Const(1),
        I::MemoryAtomicNotify(MemArg {
            offset: 8,
            align: 2,
            memory_index: 0,
        }),
        I::Drop,
    ];
    let bytes = futex_module(true, true, false, &body);
    // Plain wasmtime: out of bounds.
    let o = plain::run_plain(&bytes, &[], None).expect("plain run");
    assert!(
        o.trap
            .as_deref()
            .is_some_and(|t| t.contains("out of bounds")),
        "{o:?}"
    );
    // The same module under heddle.
    let p = heddle::runtime::Program::new(&bytes, &all_cfg()).expect("program");
    let r = p.run(&heddle::runtime::RunConfig::default()).expect("run");
    let verdict = format!("{:?}", r.verdict);
    assert!(
        verdict.contains("out-of-bounds"),
        "notify at 0xfffffffc+8 under heddle: {verdict}"
    );
}

// ---------------------------------------------------------------------------
// (b) The bundled targets: original vs instrumented under plain wasmtime.
// ---------------------------------------------------------------------------

const PLAIN_TIMEOUT: Duration = Duration::from_secs(60);

fn run_checked(p: &PlainProgram, args: &[String], what: &str) -> PlainOutcome {
    let o = p
        .run_with_timeout(args, Some(PLAIN_TIMEOUT))
        .unwrap_or_else(|e| panic!("{what}: {e:#}"));
    assert_eq!(
        o.trap,
        None,
        "{what}: stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Fixed targets whose result under real threads depends on the wall clock
/// (`timed_wait` checks that sleepers wake in deadline order, which a loaded
/// machine can upset under plain wasmtime): a failed plain run is retried.
const WALL_CLOCK_TARGETS: &[&str] = &["timed_wait.c"];

/// [`run_checked`], retrying up to `tries` times while the run traps.
fn run_retried(p: &PlainProgram, args: &[String], what: &str, tries: u32) -> PlainOutcome {
    for _ in 1..tries {
        if let Ok(o) = p.run_with_timeout(args, Some(PLAIN_TIMEOUT)) {
            if o.trap.is_none() && o.exit_code == 0 {
                return o;
            }
        }
    }
    run_checked(p, args, what)
}

/// Seeds of heddle's own (deterministic) runtime used to find the outputs a
/// fixed target can legitimately print.
const OUTPUT_SEEDS: u64 = 200;

#[test]
fn bundled_fixed_targets_same_output_plain_and_instrumented() {
    let entries = manifest().targets;
    let sources: Vec<String> = {
        let mut s: Vec<String> = entries.iter().map(|e| e.source.clone()).collect();
        s.sort();
        s.dedup();
        s
    };
    // Compile each source once: (original, instrumented) programs.
    let programs: Vec<(PlainProgram, PlainProgram)> = crate::common::par_map(&sources, |src| {
        let bytes = target_module(src, true);
        let inst = instrument_ok(&bytes, &all_cfg());
        (
            PlainProgram::new(&bytes, None).expect("original"),
            PlainProgram::new(&inst.module, Some(&inst.sites)).expect("instrumented"),
        )
    });
    let by_source: BTreeMap<&str, &(PlainProgram, PlainProgram)> = sources
        .iter()
        .map(String::as_str)
        .zip(programs.iter())
        .collect();
    let results = crate::common::par_map(&entries, |e| {
        // Not every fixed target prints the same in every schedule
        // (codeblock's `executed` is 0 or 42, depending on which thread
        // goes first): the outputs heddle's runtime gives over many
        // schedules are the legitimate ones.
        let heddle_program = crate::common::program(&e.source, true, Granularity::All);
        let mut allowed = std::collections::BTreeSet::new();
        for seed in 0..OUTPUT_SEEDS {
            let r = crate::common::run(&heddle_program, &crate::common::config(e, "random", seed));
            allowed.insert(text(&r.stdout));
        }
        let (orig, inst) = by_source[e.source.as_str()];
        let mut outputs = Vec::new();
        for round in 0..3 {
            let tries = if WALL_CLOCK_TARGETS.contains(&e.source.as_str()) {
                5
            } else {
                1
            };
            let a = run_retried(
                orig,
                &e.args,
                &format!("{} original #{round}", e.name),
                tries,
            );
            let b = run_retried(
                inst,
                &e.args,
                &format!("{} instrumented #{round}", e.name),
                tries,
            );
            assert_eq!(
                (a.exit_code, b.exit_code),
                (0, 0),
                "{}: the fixed build should exit 0 (stderr {:?} / {:?})",
                e.name,
                text(&a.stderr),
                text(&b.stderr)
            );
            for (what, o) in [("original", &a), ("instrumented", &b)] {
                let out = text(&o.stdout);
                assert!(
                    allowed.contains(&out),
                    "{} {what}: stdout {out:?} is none of heddle's {allowed:?}",
                    e.name
                );
            }
            if allowed.len() == 1 {
                assert_eq!(
                    text(&a.stdout),
                    text(&b.stdout),
                    "{}: stdout differs",
                    e.name
                );
            }
            outputs.push((text(&a.stdout), text(&b.stdout)));
        }
        (e.name.clone(), allowed.len(), outputs)
    });
    for (name, n, outputs) in &results {
        eprintln!(
            "{name}: {n} legitimate output(s), plain runs printed {:?}",
            outputs[0].0
        );
    }
    let deterministic = results.iter().filter(|(_, n, _)| *n == 1).count();
    assert!(
        deterministic + 1 >= results.len(),
        "more than one fixed target prints schedule-dependent output: {:?}",
        results
            .iter()
            .filter(|(_, n, _)| *n > 1)
            .map(|(name, n, _)| (name, n))
            .collect::<Vec<_>>()
    );
}

#[test]
fn plain_runner_reports_exits_traps_and_assertions() {
    let bytes = std::fs::read(build("tests/programs/inst_plain.c", &[])).expect("read");
    let inst = instrument_ok(&bytes, &all_cfg());
    let original = PlainProgram::new(&bytes, None).expect("original");
    let instrumented = PlainProgram::new(&inst.module, Some(&inst.sites)).expect("instrumented");
    // An instrumented module needs the hooks.
    let err = PlainProgram::new(&inst.module, None)
        .err()
        .expect("instrumented module without hooks");
    assert!(format!("{err:#}").contains("heddle_rt"), "{err:#}");
    let run = |p: &PlainProgram, arg: &str| {
        p.run_with_timeout(&[arg.to_string()], Some(PLAIN_TIMEOUT))
            .expect("run")
    };
    for (name, p) in [("original", &original), ("instrumented", &instrumented)] {
        let o = run(p, "pass");
        assert_eq!(
            (o.exit_code, &o.trap, text(&o.stdout)),
            (0, &None, "pass\n".into()),
            "{name}"
        );
        let o = run(p, "exit");
        assert_eq!((o.exit_code, &o.trap), (3, &None), "{name}: {o:?}");
        assert_eq!(text(&o.stdout), "exiting\n", "{name}");
        let o = run(p, "trap");
        assert_eq!(o.exit_code, -1, "{name}: {o:?}");
        let trap = o.trap.unwrap_or_default();
        assert!(
            trap.contains("thread 1") && trap.contains("out of bounds"),
            "{name}: {trap}"
        );
        let o = run(p, "assert");
        assert_eq!(
            o.trap.as_deref(),
            Some("assertion failed: boom (thread 1)"),
            "{name}: {o:?}"
        );
    }
    let o = run(&instrumented, "pthread_exit");
    assert_eq!((o.exit_code, &o.trap), (7, &None), "{o:?}");
}

// ---------------------------------------------------------------------------
// (c) Invalid input.
// ---------------------------------------------------------------------------

#[test]
fn invalid_input_is_an_error_never_a_panic() {
    let real = target_module("race_bank.c", false);
    let already = instrument_ok(&real, &all_cfg()).module;
    let mut garbage = b"\0asm\x01\0\0\0".to_vec();
    // A type section (id 1) of 5 bytes claiming 0x7f types of form 0xff.
    garbage.extend([0x01, 0x05, 0x7f, 0xff, 0xff, 0xff, 0xff]);
    // Well-formed but invalid: a function of type [] -> [i32] whose body
    // is empty.
    let ill_typed = {
        use wasm_encoder::{CodeSection, Function, FunctionSection, TypeSection, ValType};
        let mut m = wasm_encoder::Module::new();
        let mut types = TypeSection::new();
        types.ty().function([], [ValType::I32]);
        m.section(&types);
        let mut funcs = FunctionSection::new();
        funcs.function(0);
        m.section(&funcs);
        let mut code = CodeSection::new();
        let mut f = Function::new([]);
        f.instruction(&wasm_encoder::Instruction::End);
        code.function(&f);
        m.section(&code);
        m.finish()
    };
    // The last two messages are wasmparser's own (`invalid leading byte
    // (0xff) for type (at offset 0xb)`, `type mismatch: expected i32 but
    // nothing on stack (at offset 0x18)`): the rewriter's `scan` and its
    // function-body validation add no "malformed/invalid WebAssembly module"
    // context. They are still one line with the offset.
    let cases: [(&str, &[u8], &str); 5] = [
        ("not wasm", b"hello", "not a WebAssembly module"),
        ("truncated", &real[..40], "WebAssembly module"),
        ("already instrumented", &already, "already instrumented"),
        ("garbage section", &garbage, "at offset 0x"),
        ("ill-typed function", &ill_typed, "type mismatch"),
    ];
    for (what, bytes, needle) in cases {
        let r = std::panic::catch_unwind(|| instrument::instrument(bytes, &all_cfg()));
        let r = r.unwrap_or_else(|_| panic!("{what}: instrument panicked"));
        let e = r.err().unwrap_or_else(|| panic!("{what}: accepted"));
        let msg = format!("{e:#}");
        assert!(
            msg.contains(needle),
            "{what}: message `{msg}` lacks `{needle}`"
        );
        assert!(!msg.contains("panicked"), "{what}: {msg}");
        assert_eq!(msg.lines().count(), 1, "{what}: {msg}");
    }
}

#[test]
fn cli_instrument_rejects_non_wasm_with_one_line() {
    let dir = tempdir();
    let input = dir.path().join("notwasm.txt");
    std::fs::write(&input, "hello, not a module\n").expect("write");
    let out_path = dir.path().join("out.wasm");
    let out = heddle_out(&[
        "instrument",
        input.to_str().expect("utf-8 path"),
        "-o",
        out_path.to_str().expect("utf-8 path"),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "stderr: {err}");
    assert!(lines[0].starts_with("heddle: error:"), "stderr: {err}");
    assert!(err.contains("not a WebAssembly module"), "stderr: {err}");
    assert!(!out_path.exists(), "no output on error");
}

// ---------------------------------------------------------------------------
// (d) The site table.
// ---------------------------------------------------------------------------

/// The 1-based line of the first line of `file` (relative to the repo)
/// containing `needle`.
fn line_of(file: &str, needle: &str) -> u32 {
    let src = std::fs::read_to_string(repo().join(file)).expect("read source");
    src.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("`{needle}` not in {file}")) as u32
        + 1
}

fn plain_sites<'a>(t: &'a SiteTable, line: u32, file: &str) -> Vec<&'a instrument::Site> {
    t.sites
        .iter()
        .filter(|s| {
            s.loc
                .as_ref()
                .is_some_and(|l| l.line == line && l.file.ends_with(file))
        })
        .collect()
}

#[test]
fn race_bank_sites_name_the_balance_lines() {
    let read_line = line_of("targets/race_bank.c", "local = balance;");
    let write_line = line_of("targets/race_bank.c", "balance = local + 1;");
    assert_eq!((read_line, write_line), (40, 44), "race_bank.c changed");
    let bytes = target_module("race_bank.c", false);
    let inst = instrument_ok(&bytes, &all_cfg());
    for (line, kind) in [(read_line, SiteKind::Read), (write_line, SiteKind::Write)] {
        let found: Vec<_> = plain_sites(&inst.sites, line, "race_bank.c")
            .into_iter()
            .filter(|s| s.kind == kind)
            .collect();
        assert!(
            found.iter().any(|s| s.size == 4
                && !s.atomic
                && s.user
                && (s.func_name == "deposit" || s.func_name == "depositor")),
            "no user {kind:?} of size 4 at race_bank.c:{line} in deposit/depositor: {found:#?}"
        );
    }
    let out = heddle_out(&["sites", "targets/race_bank.c"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    for line in [read_line, write_line] {
        assert!(
            stdout.contains(&format!("race_bank.c:{line}")),
            "`heddle sites` lacks race_bank.c:{line}:\n{stdout}"
        );
    }
}

#[test]
fn instrumentation_is_deterministic() {
    for (src, fixed) in [("race_bank.c", false), ("codeblock.cpp", false)] {
        let bytes = target_module(src, fixed);
        let a = instrument_ok(&bytes, &all_cfg());
        let b = instrument_ok(&bytes, &all_cfg());
        assert!(a.module == b.module, "{src}: module bytes differ");
        assert_eq!(a.sites, b.sites, "{src}: site tables differ");
        assert_eq!(
            serde_json::to_vec(&a.sites).expect("json"),
            serde_json::to_vec(&b.sites).expect("json"),
            "{src}: serialized site tables differ"
        );
    }
}

// ---------------------------------------------------------------------------
// (e) Granularity and filters.
// ---------------------------------------------------------------------------

fn is_plain_access(s: &instrument::Site) -> bool {
    matches!(s.kind, SiteKind::Read | SiteKind::Write) && !s.atomic
}

#[test]
fn granularity_sync_has_no_plain_user_accesses() {
    let bytes = target_module("race_bank.c", false);
    let sync = instrument_ok(
        &bytes,
        &Config {
            granularity: Granularity::Sync,
            ..Config::default()
        },
    );
    let bad: Vec<_> = sync
        .sites
        .sites
        .iter()
        .filter(|s| s.user && is_plain_access(s))
        .collect();
    assert!(bad.is_empty(), "plain user accesses at sync: {bad:#?}");
    assert!(
        sync.sites.sites.iter().any(|s| s.atomic),
        "no atomics at sync"
    );
    let all = instrument_ok(&bytes, &all_cfg());
    assert!(
        all.sites.sites.iter().any(|s| s.user && is_plain_access(s)),
        "no plain user accesses at all"
    );
}

#[test]
fn include_and_exclude_filters() {
    let bytes = target_module("race_bank.c", false);
    let all = instrument_ok(&bytes, &all_cfg());
    let in_funcs = |t: &SiteTable, names: &[&str]| -> usize {
        t.sites
            .iter()
            .filter(|s| names.contains(&s.func_name.as_str()) && is_plain_access(s))
            .count()
    };
    let bank = ["deposit", "depositor"];
    assert!(in_funcs(&all.sites, &bank) > 0, "no sites in deposit(or)");
    let excluded = instrument_ok(
        &bytes,
        &Config {
            exclude_funcs: bank.iter().map(|s| s.to_string()).collect(),
            ..all_cfg()
        },
    );
    assert_eq!(
        in_funcs(&excluded.sites, &bank),
        0,
        "excluded functions still have plain-access sites"
    );
    assert!(
        in_funcs(&excluded.sites, &["main"]) > 0,
        "excluding deposit(or) removed main's sites too"
    );
    let lib = "strlen";
    assert!(
        all.sites.funcs.iter().any(|f| f.name == lib && !f.user),
        "race_bank has no library {lib}: {:?}",
        all.sites.funcs.iter().map(|f| &f.name).collect::<Vec<_>>()
    );
    assert_eq!(
        in_funcs(&all.sites, &[lib]),
        0,
        "library {lib} instrumented"
    );
    let included = instrument_ok(
        &bytes,
        &Config {
            include_funcs: vec![lib.into()],
            ..all_cfg()
        },
    );
    assert!(
        in_funcs(&included.sites, &[lib]) > 0,
        "include_funcs did not instrument {lib}"
    );
    assert!(included
        .sites
        .funcs
        .iter()
        .any(|f| f.name == lib && f.user && f.instrumented));
}

// ---------------------------------------------------------------------------
// (f) Stack-frame exclusion.
// ---------------------------------------------------------------------------

const STACK_SRC: &str = "tests/programs/inst_stack.c";

/// inst_stack.c at -O0, instrumented at `all`.
fn stack_program() -> (Vec<u8>, Instrumented) {
    let bytes = std::fs::read(build(STACK_SRC, &["-O0"])).expect("read");
    let inst = instrument_ok(&bytes, &all_cfg());
    (bytes, inst)
}

fn access_sites<'a>(t: &'a SiteTable, func: &str) -> Vec<&'a instrument::Site> {
    t.sites
        .iter()
        .filter(|s| s.func_name == func && s.kind.is_access())
        .collect()
}

#[test]
fn own_stack_frame_accesses_are_not_sites_unless_the_frame_escapes() {
    let (bytes, inst) = stack_program();
    let t = &inst.sites;
    for f in ["scalar_sum", "local_sum", "shared_sum", "doubler"] {
        assert!(
            t.funcs
                .iter()
                .any(|i| i.name == f && i.user && i.instrumented),
            "{f} is not instrumented user code"
        );
    }
    // Own-frame scalars (every local is a stack slot at -O0): no sites.
    let scalar = access_sites(t, "scalar_sum");
    assert!(
        scalar.is_empty(),
        "scalar_sum's own-frame accesses are sites: {scalar:#?}"
    );
    // local_sum's scalars (`i`, `sum`, `seed`) are not sites either: any site
    // left is on an array-element line (see the ignored test below).
    let array_lines = [
        line_of(STACK_SRC, "LOCAL_STORE"),
        line_of(STACK_SRC, "LOCAL_LOAD"),
    ];
    let local = access_sites(t, "local_sum");
    assert!(
        local.iter().all(|s| s
            .loc
            .as_ref()
            .is_some_and(|l| array_lines.contains(&l.line))),
        "local_sum has sites outside its array lines: {local:#?}"
    );
    // The escaping frame: its accesses stay sites.
    let shared = access_sites(t, "shared_sum");
    for marker in ["SHARED_STORE", "SHARED_LOAD"] {
        let line = line_of(STACK_SRC, marker);
        assert!(
            shared
                .iter()
                .any(|s| s.loc.as_ref().is_some_and(|l| l.line == line)),
            "no site at inst_stack.c:{line} ({marker}) in shared_sum: {shared:#?}"
        );
    }
    // printf reads its variadic arguments from the frame but keeps no
    // pointer to it: the frame does not escape.
    let printing = access_sites(t, "printing_sum");
    assert!(
        printing.is_empty(),
        "printing_sum's own-frame accesses are sites: {printing:#?}"
    );
    // The thread reaches the escaped frame through its argument.
    assert!(
        !access_sites(t, "doubler").is_empty(),
        "doubler has no sites"
    );
    // And the program computes the same under plain wasmtime.
    let a = PlainProgram::new(&bytes, None)
        .expect("original")
        .run(&[])
        .expect("run");
    let b = PlainProgram::new(&inst.module, Some(&inst.sites))
        .expect("instrumented")
        .run(&[])
        .expect("run");
    assert_eq!((a.exit_code, &a.trap), (0, &None), "{a:?}");
    assert_eq!(a, b);
}

/// Library bug (stack.rs): an address derived from `__stack_pointer` through
/// a local that is assigned inside a block or loop is never frame-derived
/// (`FrameAnalysis::finish` requires `defined_at_top`), so at -O0, where
/// clang puts every intermediate value in a fresh local at its point of use,
/// the element accesses of a non-escaping stack array in a loop stay yield
/// points.
#[test]

fn own_frame_array_accesses_in_a_loop_are_not_sites() {
    let (_, inst) = stack_program();
    let local = access_sites(&inst.sites, "local_sum");
    assert!(
        local.is_empty(),
        "local_sum's own-frame array accesses are sites: {local:#?}"
    );
}

/// A minimal module for the bug above: `frame = sp - 16` at the top level,
/// then `p = frame + 4; *p = 7` either at the top level or inside a loop.
fn frame_module(in_loop: bool) -> Vec<u8> {
    use wasm_encoder::{
        BlockType, CodeSection, ConstExpr, ExportKind, ExportSection, Function, FunctionSection,
        GlobalSection, GlobalType, Instruction as I, MemArg, MemorySection, MemoryType, NameMap,
        NameSection, TypeSection, ValType,
    };
    let mut m = wasm_encoder::Module::new();
    let mut types = TypeSection::new();
    types.ty().function([], []);
    m.section(&types);
    let mut funcs = FunctionSection::new();
    funcs.function(0);
    m.section(&funcs);
    let mut mems = MemorySection::new();
    mems.memory(MemoryType {
        minimum: 1,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    m.section(&mems);
    let mut globals = GlobalSection::new();
    globals.global(
        GlobalType {
            val_type: ValType::I32,
            mutable: true,
            shared: false,
        },
        &ConstExpr::i32_const(4096),
    );
    m.section(&globals);
    let mut exports = ExportSection::new();
    exports.export("f", ExportKind::Func, 0);
    m.section(&exports);
    let mut f = Function::new([(2, ValType::I32)]);
    let store = I::I32Store(MemArg {
        offset: 0,
        align: 2,
        memory_index: 0,
    });
    let mut body = vec![
        I::GlobalGet(0),
        I::I32Const(16),
        I::I32Sub,
        I::LocalTee(0),
        I::GlobalSet(0),
    ];
    let access = [
        I::LocalGet(0),
        I::I32Const(4),
        I::I32Add,
        I::LocalSet(1),
        I::LocalGet(1),
        I::I32Const(7),
        store,
    ];
    if in_loop {
        body.push(I::Block(BlockType::Empty));
        body.push(I::Loop(BlockType::Empty));
        body.extend(access);
        body.push(I::End);
        body.push(I::End);
    } else {
        body.extend(access);
    }
    body.extend([
        I::LocalGet(0),
        I::I32Const(16),
        I::I32Add,
        I::GlobalSet(0),
        I::End,
    ]);
    for i in &body {
        f.instruction(i);
    }
    let mut code = CodeSection::new();
    code.function(&f);
    m.section(&code);
    let mut names = NameSection::new();
    let mut fnames = NameMap::new();
    fnames.append(0, "f");
    names.functions(&fnames);
    let mut gnames = NameMap::new();
    gnames.append(0, "__stack_pointer");
    names.globals(&gnames);
    m.section(&names);
    m.finish()
}

fn frame_module_sites(in_loop: bool) -> Vec<instrument::Site> {
    let inst = instrument_ok(
        &frame_module(in_loop),
        &Config {
            include_funcs: vec!["f".into()],
            ..all_cfg()
        },
    );
    inst.sites
        .sites
        .into_iter()
        .filter(|s| s.kind.is_access())
        .collect()
}

#[test]
fn own_frame_access_through_a_top_level_local_is_not_a_site() {
    let sites = frame_module_sites(false);
    assert!(sites.is_empty(), "{sites:#?}");
}

#[test]

fn own_frame_access_through_a_local_set_in_a_loop_is_not_a_site() {
    let sites = frame_module_sites(true);
    assert!(sites.is_empty(), "{sites:#?}");
}

// ---------------------------------------------------------------------------
// (g) The offset map: a trap symbolizes to the original source line.
// ---------------------------------------------------------------------------

#[test]
fn codeblock_trap_symbolizes_to_executor_lines() {
    const SRC: &str = "targets/codeblock.cpp";
    let start = line_of(SRC, "static void *executor(void *)");
    let end = start
        + std::fs::read_to_string(repo().join(SRC))
            .expect("read")
            .lines()
            .skip(start as usize)
            .position(|l| l == "}")
            .expect("end of executor") as u32
        + 1;
    let mut seen = Vec::new();
    for seed in 0..300u64 {
        let s = seed.to_string();
        let out = heddle_out(&["run", SRC, "--seed", &s]);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        match out.status.code() {
            Some(0) => continue,
            Some(1) if all.contains("trap") => {
                let lines: Vec<u32> = all
                    .match_indices("codeblock.cpp:")
                    .filter_map(|(i, m)| {
                        let rest = &all[i + m.len()..];
                        let digits: String =
                            rest.chars().take_while(|c| c.is_ascii_digit()).collect();
                        digits.parse().ok()
                    })
                    .collect();
                assert!(
                    lines.iter().any(|l| (start..=end).contains(l)),
                    "seed {seed}: no codeblock.cpp line within executor ({start}..={end}) in:\n{all}"
                );
                return;
            }
            other => seen.push(format!("seed {seed}: exit {other:?}: {all}")),
        }
    }
    panic!(
        "no trapping seed in 0..300; unexpected outcomes: {:?}",
        seen.iter().take(3).collect::<Vec<_>>()
    );
}

/// The instrumented module marks the `if`s that guard its cold paths (the
/// budget hook, the guarded yield points, the switch after a hook) with
/// not-taken branch hints, so that wasmtime lays their host calls out of
/// line: the hint section comes before the code, names defined functions,
/// and every hint points at an `if` of that function's new body.
#[test]
fn cold_paths_carry_branch_hints_at_ifs() {
    use wasmparser::KnownCustom;
    let bytes = target_module("race_bank.c", false);
    for granularity in [Granularity::Sync, Granularity::All] {
        let inst = instrument_ok(
            &bytes,
            &Config {
                granularity,
                ..Config::default()
            },
        );
        let mut hints: Vec<(u32, Vec<(u32, bool)>)> = Vec::new();
        let mut hint_sections = 0;
        let mut bodies: Vec<usize> = Vec::new();
        let mut imported = 0u32;
        for payload in Parser::new(0).parse_all(&inst.module) {
            match payload.expect("parse") {
                Payload::ImportSection(r) => {
                    for imp in r.into_imports() {
                        if matches!(imp.expect("import").ty, wasmparser::TypeRef::Func(_)) {
                            imported += 1;
                        }
                    }
                }
                Payload::CustomSection(c) => {
                    if let KnownCustom::BranchHints(r) = c.as_known() {
                        hint_sections += 1;
                        assert!(bodies.is_empty(), "{granularity:?}: hints after the code");
                        for f in r {
                            let f = f.expect("hint function");
                            let hs = f.hints.into_iter().map(|h| h.expect("hint"));
                            hints.push((f.func, hs.map(|h| (h.func_offset, h.taken)).collect()));
                        }
                    }
                }
                Payload::CodeSectionEntry(body) => {
                    bodies.push(body.get_binary_reader().original_position());
                }
                _ => {}
            }
        }
        assert_eq!(hint_sections, 1, "{granularity:?}: hint sections");
        let mut hinted = 0;
        for (func, hs) in &hints {
            let start = bodies[(func - imported) as usize];
            for &(at, taken) in hs {
                assert!(
                    !taken,
                    "{granularity:?}: func {func} hint at {at} says taken"
                );
                assert_eq!(
                    inst.module[start + at as usize],
                    0x04,
                    "{granularity:?}: func {func} hint at {at} is not at an `if`"
                );
                hinted += 1;
            }
        }
        let budget_points = inst
            .sites
            .sites
            .iter()
            .filter(|s| matches!(s.kind, SiteKind::BackEdge | SiteKind::Entry))
            .count();
        assert!(
            hinted >= budget_points && budget_points > 0,
            "{granularity:?}: {hinted} hints for {budget_points} budget points"
        );
    }
}

/// The `heddle sites` rows of a source: (line, function) per user-code site.
fn site_rows(source: &str) -> Vec<(u32, String)> {
    let o = heddle_out(&["sites", source]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    text(&o.stdout)
        .lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let loc = cols.get(3)?;
            let line = loc.split(':').nth(1)?.parse().ok()?;
            Some((line, cols[4..].join(" ")))
        })
        .collect()
}

#[test]
fn sites_name_functions_as_written() {
    let c = site_rows("tests/programs/names.c");
    for (line, name) in [(9, "f"), (10, "g"), (11, "w"), (12, "x"), (23, "main")] {
        assert!(
            c.iter().any(|(l, n)| *l == line && n == name),
            "no site of {name} at line {line}: {c:?}"
        );
    }
    // The inlined function's access belongs to it, at its own line (the
    // innermost user frame of the inlined chain).
    assert!(
        c.iter().any(|(l, n)| *l == 13 && n == "bump_inlined"),
        "{c:?}"
    );
    for wrong in ["float", "__float128", "wchar_t", "long long", "long"] {
        assert!(!c.iter().any(|(_, n)| n == wrong), "{wrong}: {c:?}");
    }
    let cpp = site_rows("tests/programs/names.cpp");
    for (line, name) in [
        (10, "bank::Account::deposit(int)"),
        (12, "void bank::add<long>(long)"),
        (13, "bank::q()"),
        (20, "main::$_0::operator()(void*) const"),
    ] {
        assert!(
            cpp.iter().any(|(l, n)| *l == line && n == name),
            "no site of {name} at line {line}: {cpp:?}"
        );
    }
    // Races are reported with the same names.
    let dir = tempdir();
    let o = heddle_out(&[
        "fuzz",
        "tests/programs/names.c",
        "--runs",
        "200",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let out = text(&o.stdout);
    assert!(out.contains("names.c:9 (f)"), "{out}");
    assert!(!out.contains("(float)"), "{out}");
}

#[test]
fn two_sources_with_the_same_contents_keep_their_own_names() {
    let dir = tempdir();
    let code = std::fs::read(repo().join("tests/programs/names.c")).unwrap();
    for name in ["first.c", "second.c"] {
        std::fs::write(dir.path().join(name), &code).unwrap();
    }
    for name in ["first.c", "second.c"] {
        let path = dir.path().join(name);
        let o = heddle_out(&["sites", path.to_str().unwrap()]);
        let out = text(&o.stdout);
        assert!(out.contains(&format!("{name}:9:")), "{name}: {out}");
    }
}

/// A Rust closure's atomics are inlined from `core`: they belong to the
/// closure, at its lines and under its demangled name, and are found; the
/// bodies of `std`'s functions are library code.
#[test]
fn rust_atomics_inlined_from_core_belong_to_the_closure() {
    let dir = tempdir();
    let wasm = rust_build("tests/programs/rust/inlined_atomics.rs");
    let module = std::fs::read(&wasm).unwrap();
    let table = instrument::instrument(&module, &all_cfg()).unwrap().sites;
    let user: Vec<_> = table.sites.iter().filter(|s| s.user).collect();
    let hashed = |n: &str| {
        n.rsplit("::")
            .next()
            .is_some_and(|l| l.len() == 17 && l.starts_with('h'))
    };
    for s in &table.sites {
        let n = &s.func_name;
        assert!(
            !n.contains("$LT$")
                && !n.contains("$u7b$")
                && !n.starts_with("_R")
                && !n.starts_with("_ZN")
                && !hashed(n),
            "name not demangled: {n}"
        );
    }
    for s in &user {
        let file = &s.loc.as_ref().expect("user sites have lines").file;
        assert!(
            file.ends_with("inlined_atomics.rs"),
            "user site in {file}: {s:?}"
        );
    }
    assert!(
        user.len() < 200,
        "{} user sites: std counted as user code?",
        user.len()
    );
    // `let v = c.load(SeqCst);` and `c.store(v + 1, SeqCst);`, lines 13-14.
    for (line, kind) in [(13, SiteKind::Read), (14, SiteKind::Write)] {
        assert!(
            user.iter().any(|s| s.atomic
                && s.kind == kind
                && s.loc.as_ref().is_some_and(|l| l.line == line)
                && s.func_name == "inlined_atomics::main::{{closure}}::{{closure}}"),
            "no atomic {kind:?} at line {line} in the closure: {user:#?}"
        );
    }
    // Library code: std's own bodies, sites at `/rustc/…`.
    assert!(table.sites.iter().any(|s| !s.user
        && s.loc
            .as_ref()
            .is_some_and(|l| l.file.starts_with("/rustc/"))));
    // The default strategy finds the lost update and points at the assert.
    let out_dir = dir.path().join("out");
    let out = heddle_out(&[
        "fuzz",
        wasm.to_str().unwrap(),
        "--runs",
        "3000",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("inlined_atomics.rs:22"), "{stdout}");
    // With std's sources counted as user code, std is instrumented again.
    let cfg = Config {
        user_code: vec!["/rustc".into()],
        ..all_cfg()
    };
    let wide = instrument::instrument(&module, &cfg).unwrap().sites;
    assert!(wide.sites.iter().filter(|s| s.user).count() > 10 * user.len());
    // The same from the command line, and the other way round: a C
    // target's own directory declared library code leaves no user site.
    let user_sites = |args: &[&str]| -> usize {
        let out = heddle_out(&[&["sites"], args].concat());
        assert!(out.status.success(), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        let last = stdout.lines().last().unwrap_or_default().to_string();
        let n = last
            .split(" in user code")
            .next()
            .and_then(|s| s.rsplit('(').next());
        n.and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{last}"))
    };
    let w = wasm.to_str().unwrap();
    assert_eq!(user_sites(&[w]), user.len());
    assert!(user_sites(&[w, "--user-code", "/rustc"]) > 10 * user.len());
    assert!(user_sites(&["targets/race_bank.c"]) > 0);
    assert_eq!(
        user_sites(&["targets/race_bank.c", "--library-code", "targets"]),
        0
    );
    assert!(
        user_sites(&[
            "targets/race_bank.c",
            "--library-code",
            "targets",
            "--user-code",
            "targets/race_bank.c"
        ]) > 0
    );
}
