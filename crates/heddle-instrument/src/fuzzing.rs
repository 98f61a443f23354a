//! The instrumenter's robustness property, for fuzzers and tests: whatever
//! the input, [`instrument`] returns (it never panics),
//! and a module it returns validates.
//!
//! [`check_one`] checks the property on one input. The fuzz target in
//! `fuzz/` (`cargo +nightly fuzz run instrument`) calls it with the bytes
//! libFuzzer generates; this crate's tests call it on a few thousand
//! pseudo-random inputs. Three quarters of the inputs go through wasm-smith,
//! so that most reach the rewriter rather than stop at the parser.
//!
//! Available with the `fuzzing` feature (it needs `wasm-smith`).

use crate::{instrument, Config, Granularity};
use arbitrary::{Arbitrary, Unstructured};
use std::panic::{catch_unwind, AssertUnwindSafe};
use wasmparser::{Validator, WasmFeatures};

/// The wasm features the instrumenter accepts, and so those its output may
/// use: the defaults with threads and bulk memory.
pub fn features() -> WasmFeatures {
    let mut f = WasmFeatures::default();
    f.insert(WasmFeatures::THREADS);
    f.insert(WasmFeatures::BULK_MEMORY);
    f
}

/// How [`check_one`] reads its input's first byte (see there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// The rest of the input is the module.
    Raw,
    /// The rest of the input drives wasm-smith with a configuration shaped
    /// like a heddle target's (shared memory, atomics, no exotic features).
    Threaded,
    /// The rest drives wasm-smith with an arbitrary configuration (any
    /// proposal, within small size limits).
    AnyFeatures,
    /// A [`Input::Threaded`] module with one byte overwritten.
    Corrupted,
}

/// The instrumentation configuration and input kind `selector` picks: bits
/// 0-1 the [`Input`], bit 2 the granularity, bits 3-4 the memory checker
/// (default, on, off), bit 5 the budget in its global, bit 6 every function
/// as user code.
pub fn decode_selector(selector: u8) -> (Input, Config) {
    let input = match selector & 3 {
        0 => Input::Raw,
        1 => Input::Threaded,
        2 => Input::AnyFeatures,
        _ => Input::Corrupted,
    };
    let cfg = Config {
        granularity: if selector & 4 == 0 {
            Granularity::All
        } else {
            Granularity::Sync
        },
        memcheck: match (selector >> 3) & 3 {
            1 => Some(true),
            2 => Some(false),
            _ => None,
        },
        budget_in_global: selector & 32 != 0,
        include_funcs: if selector & 64 != 0 {
            vec!["*".into()]
        } else {
            Vec::new()
        },
        ..Config::default()
    };
    (input, cfg)
}

/// wasm-smith's configuration for [`Input::Threaded`]: what `heddle cc`
/// output uses (threads, bulk memory, SIMD, tail calls), imports included.
fn threaded_config() -> wasm_smith::Config {
    wasm_smith::Config {
        min_memories: 1,
        max_memories: 1,
        max_memory32_bytes: 4 << 16,
        memory64_enabled: false,
        gc_enabled: false,
        exceptions_enabled: false,
        relaxed_simd_enabled: false,
        simd_enabled: true,
        threads_enabled: true,
        shared_everything_threads_enabled: false,
        tail_call_enabled: true,
        custom_page_sizes_enabled: false,
        wide_arithmetic_enabled: false,
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

/// An arbitrary wasm-smith configuration with its sizes bounded, so one
/// input stays quick.
fn any_config(u: &mut Unstructured) -> arbitrary::Result<wasm_smith::Config> {
    let mut c = wasm_smith::Config::arbitrary(u)?;
    // 64-bit memories are out: heddle rejects them before instrumenting
    // (`ModuleInfo::check_runnable`), and the rewriter passes their i64
    // addresses to i32 host calls.
    c.memory64_enabled = false;
    c.max_funcs = c.max_funcs.min(16);
    c.max_instructions = c.max_instructions.min(300);
    c.max_types = c.max_types.min(30);
    c.max_imports = c.max_imports.min(20);
    c.max_exports = c.max_exports.min(40);
    c.max_globals = c.max_globals.min(20);
    c.max_data_segments = c.max_data_segments.min(8);
    c.max_element_segments = c.max_element_segments.min(8);
    c.max_elements = c.max_elements.min(100);
    c.max_table_elements = c.max_table_elements.min(1000);
    c.max_memory32_bytes = c.max_memory32_bytes.min(4 << 16);
    c.max_memory64_bytes = c.max_memory64_bytes.min(4 << 16);
    c.max_type_size = c.max_type_size.min(100);
    Ok(c)
}

/// The module an input stands for, or `None` when wasm-smith cannot make
/// one from it (an input that tests nothing).
pub fn module_of(input: Input, data: &[u8]) -> Option<Vec<u8>> {
    let mut u = Unstructured::new(data);
    match input {
        Input::Raw => Some(data.to_vec()),
        Input::Threaded => wasm_smith::Module::new(threaded_config(), &mut u)
            .ok()
            .map(|m| m.to_bytes()),
        Input::AnyFeatures => {
            let cfg = any_config(&mut u).ok()?;
            wasm_smith::Module::new(cfg, &mut u)
                .ok()
                .map(|m| m.to_bytes())
        }
        Input::Corrupted => {
            // The position and value come first, so that the module is
            // drawn from the same bytes as its uncorrupted twin's tail.
            let at = u32::arbitrary(&mut u).ok()?;
            let value = u8::arbitrary(&mut u).ok()?;
            let mut bytes = wasm_smith::Module::new(threaded_config(), &mut u)
                .ok()?
                .to_bytes();
            let len = bytes.len();
            bytes[at as usize % len] = value;
            Some(bytes)
        }
    }
}

/// Checks the property on one input: its first byte picks the kind of
/// input and the configuration ([`decode_selector`]), the rest is the
/// module or wasm-smith's source of choices ([`module_of`]). The module is
/// instrumented; the check fails if that panics, or if it returns a module
/// that does not validate with [`features`]. An error from `instrument` is
/// fine (the input may well be invalid), and so is an input wasm-smith
/// makes nothing of. The error names what failed, in one line.
pub fn check_one(data: &[u8]) -> Result<(), String> {
    check(data).map(|_| ())
}

/// [`check_one`], saying also what the input was and whether
/// `instrument` accepted it.
fn check(data: &[u8]) -> Result<Option<(Input, bool)>, String> {
    let Some((&selector, rest)) = data.split_first() else {
        return Ok(None);
    };
    let (input, cfg) = decode_selector(selector);
    let Some(module) = module_of(input, rest) else {
        return Ok(None);
    };
    let accepted = check_module(&module, &cfg)?;
    Ok(Some((input, accepted)))
}

/// The property for one module and configuration (see [`check_one`]):
/// whether `instrument` accepted the module, or what failed.
pub fn check_module(module: &[u8], cfg: &Config) -> Result<bool, String> {
    let describe = || format!("{} bytes, `{}`", module.len(), cfg.describe());
    let out = match catch_unwind(AssertUnwindSafe(|| instrument(module, cfg))) {
        Ok(Ok(out)) => out,
        Ok(Err(_)) => return Ok(false),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            return Err(format!("instrument panicked ({}): {msg}", describe()));
        }
    };
    Validator::new_with_features(features())
        .validate_all(&out.module)
        .map_err(|e| {
            format!(
                "the instrumented module does not validate ({}): {e}",
                describe()
            )
        })?;
    Ok(true)
}

/// splitmix64: a fixed-seed generator for test inputs (the same seed gives
/// the same inputs on every machine).
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A value in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / ((1u64 << 53) as f64) < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The property over pseudo-random inputs of every kind and
    /// configuration; most of the wasm-smith ones are instrumented.
    #[test]
    fn random_inputs_keep_the_property() {
        const INPUTS: u64 = 4000;
        let mut instrumented = [0usize; 4];
        let mut failures = Vec::new();
        for seed in 0..INPUTS {
            let mut rng = SplitMix(0x6675_7a7a_0000_0000 ^ seed);
            let len = 1 + (rng.next_u64() % 6000) as usize;
            let mut data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            // Every selector in turn, whatever the bytes.
            data[0] = seed as u8;
            match check(&data) {
                Ok(Some((input, accepted))) => instrumented[input as usize] += accepted as usize,
                Ok(None) => {}
                Err(e) => failures.push(format!("seed {seed}: {e}")),
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {INPUTS} inputs fail:\n{}",
            failures.len(),
            failures[..failures.len().min(10)].join("\n")
        );
        // A quarter of the inputs are of each kind.
        let [raw, threaded, any, corrupted] = instrumented;
        assert_eq!(raw, 0, "random bytes instrumented");
        assert!(
            threaded > 600,
            "only {threaded} threaded modules instrumented"
        );
        assert!(any > 600, "only {any} modules of any features instrumented");
        assert!(
            corrupted > 80,
            "only {corrupted} corrupted modules instrumented"
        );
    }

    #[test]
    fn trivial_inputs_pass() {
        for data in [&b""[..], b"\0", b"\0\0asm\x01\0\0\0", b"\x01"] {
            check_one(data).unwrap();
        }
    }
}
