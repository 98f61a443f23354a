#![warn(missing_docs)]
//! Instrumentation: wasm bytes in, instrumented wasm bytes plus a
//! [`SiteTable`] out.
//!
//! Every instruction that can communicate between threads is turned into a
//! *yield point*: it first calls a host import ([`RtImport`]) that receives
//! the site id and the effective address, and may switch threads; then the
//! original instruction runs in the guest, unchanged. Concretely:
//!
//! * `memory.atomic.wait32/64` and `memory.atomic.notify` are *replaced* by
//!   host calls (they must never reach wasmtime's own implementation, which
//!   parks the OS thread);
//! * every atomic load, store, RMW, cmpxchg and `atomic.fence`, and every call
//!   to a host import (WASI, `wasi.thread-spawn`, the guest SDK), is preceded
//!   by a yield point;
//! * at granularity [`Granularity::All`], so are plain loads, stores,
//!   `memory.copy` and `memory.fill` in user code, except accesses provably
//!   to the running thread's own stack frame ([`stack`]);
//! * `memory.grow` and `memory.size` become host calls: the runtime keeps
//!   the memory's logical size, so a memory can be zeroed and reused by the
//!   next run instead of being unmapped and mapped again;
//! * with the memory checker on, calls to the allocator entry points
//!   (`malloc`, `calloc`, `realloc`, `free`, `aligned_alloc`,
//!   `posix_memalign`, `memalign`, `valloc`) are bracketed by host calls that
//!   widen each block by redzones and keep a shadow heap (heddle's
//!   `model::heap`);
//! * loop headers (and user function entries) decrement a per-thread
//!   budget global and call the host only when it reaches zero, so a loop
//!   with no other yield point is preempted deterministically;
//! * indirect calls through a function pointer of another type, and direct
//!   calls wasm-ld linked to a `signature_mismatch:` trap stub, go through
//!   adapters that convert the arguments and results as native ABIs
//!   tolerate ([`fnptr`]).
//!
//! The module's start function (wasm-ld's `__wasm_init_memory`) runs during
//! instantiation, before any thread is scheduled, and is left alone except
//! for its wait/notify.
//!
//! The same input and configuration always give byte-identical output and
//! the same site ids; heddle's `instrument::instrument_cached` stores results
//! in its cache keyed by (module hash, configuration,
//! [`INSTRUMENTER_VERSION`]).
//!
//! This crate reads and writes bytes only: it runs no wasm ([`modinfo`] is
//! the quick structural check of a module that heddle makes before anything
//! else). With the `fuzzing` feature, `fuzzing::check_one` is the property
//! the fuzz target in `fuzz/` checks.

pub mod dwarf;
pub mod eh;
pub mod fnptr;
pub mod interface;
pub mod modinfo;
pub mod reuse;
pub mod rewrite;
pub mod sites;
pub mod stack;
pub mod wrappers;

#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;

use anyhow::{bail, Context, Result};
use globset::{Glob, GlobSet, GlobSetBuilder};
use modinfo::ModuleInfo;
use serde::{Deserialize, Serialize};

pub use dwarf::{DebugInfo, Frame, Loc};
pub use interface::{HostType, RtImport, SdkImport};
pub use sites::{FuncInfo, Site, SiteId, SiteInfo, SiteKind, SiteTable, Symbol};

/// Bumped whenever the rewriting changes, so cached results are not reused.
pub const INSTRUMENTER_VERSION: u32 = 60;

/// Which instructions are yield points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Granularity {
    /// Atomics, wait/notify, fences and host calls: the synchronisation points.
    Sync,
    /// `sync` plus plain loads/stores in user code (the default).
    #[default]
    All,
}

impl std::str::FromStr for Granularity {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "sync" => Ok(Granularity::Sync),
            "all" => Ok(Granularity::All),
            _ => bail!("unknown granularity `{s}` (expected `sync` or `all`)"),
        }
    }
}

impl std::fmt::Display for Granularity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Granularity::Sync => "sync",
            Granularity::All => "all",
        })
    }
}

/// How to instrument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Config {
    /// Which instructions become yield points.
    pub granularity: Granularity,
    /// Function-name globs treated as user code even without DWARF.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include_funcs: Vec<String>,
    /// Function-name globs treated as library code.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_funcs: Vec<String>,
    /// Source-file globs treated as user code.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include_files: Vec<String>,
    /// Source-file globs treated as library code.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_files: Vec<String>,
    /// Source path prefixes that are user code even where the defaults say
    /// library (see [`dwarf::CodeOwnership`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_code: Vec<String>,
    /// Source path prefixes that are library code.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub library_code: Vec<String>,
    /// The memory checker (allocator interception, null-page and heap
    /// checks): `None` means on at granularity `all`, off at `sync`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memcheck: Option<bool>,
    /// Keep the preemption budget in its global at every budget point,
    /// instead of in a function-local copy that is synchronised at calls and
    /// exits (the default, which keeps a loop's budget in a register), and
    /// read the fast path's skip counter from its global at every guarded
    /// yield point, instead of from a function-local copy reloaded after
    /// calls. Both forms count exactly the same; this one is the plain
    /// reference the tests compare the default against.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub budget_in_global: bool,
}

impl Config {
    /// A canonical one-line description (part of cache keys and replay files).
    /// Whether the memory checker is on.
    pub fn memcheck(&self) -> bool {
        self.memcheck
            .unwrap_or(self.granularity == Granularity::All)
    }

    /// The configuration as text (what replay files record; [`Config::parse_description`] reads it back).
    pub fn describe(&self) -> String {
        let mut s = format!(
            "granularity={} memcheck={}",
            self.granularity,
            if self.memcheck() { "on" } else { "off" }
        );
        if self.budget_in_global {
            s.push_str(" budget=global");
        }
        for (k, v) in [
            ("include-funcs", &self.include_funcs),
            ("exclude-funcs", &self.exclude_funcs),
            ("include-files", &self.include_files),
            ("exclude-files", &self.exclude_files),
            ("user-code", &self.user_code),
            ("library-code", &self.library_code),
        ] {
            if !v.is_empty() {
                let items: Vec<String> = v.iter().map(|p| escape(p)).collect();
                s.push_str(&format!(" {k}={}", items.join(",")));
            }
        }
        s
    }

    /// Reads a [`Config::describe`] line back (replay files record it). The
    /// result describes itself exactly as `text` does.
    pub fn parse_description(text: &str) -> Result<Config> {
        let mut cfg = Config::default();
        for part in text.split_whitespace() {
            let (k, v) = part
                .split_once('=')
                .with_context(|| format!("bad instrumentation setting `{part}`"))?;
            let list = || -> Result<Vec<String>> { v.split(',').map(unescape).collect() };
            let flag = |on: &str, off: &str| -> Result<bool> {
                match v {
                    _ if v == on => Ok(true),
                    _ if v == off => Ok(false),
                    _ => bail!("bad instrumentation setting `{part}`"),
                }
            };
            match k {
                "granularity" => cfg.granularity = v.parse()?,
                "memcheck" => cfg.memcheck = Some(flag("on", "off")?),
                "budget" => cfg.budget_in_global = flag("global", "local")?,
                "include-funcs" => cfg.include_funcs = list()?,
                "exclude-funcs" => cfg.exclude_funcs = list()?,
                "include-files" => cfg.include_files = list()?,
                "exclude-files" => cfg.exclude_files = list()?,
                "user-code" => cfg.user_code = list()?,
                "library-code" => cfg.library_code = list()?,
                _ => bail!("unknown instrumentation setting `{k}`"),
            }
        }
        cfg.filters()?;
        Ok(cfg)
    }

    fn globs(patterns: &[String]) -> Result<GlobSet> {
        let mut b = GlobSetBuilder::new();
        for p in patterns {
            b.add(Glob::new(p).with_context(|| format!("bad glob `{p}`"))?);
        }
        Ok(b.build()?)
    }

    /// Which source files are user code.
    pub fn code_ownership(&self) -> dwarf::CodeOwnership {
        dwarf::CodeOwnership {
            user: self.user_code.clone(),
            library: self.library_code.clone(),
        }
    }

    fn filters(&self) -> Result<Filters> {
        Ok(Filters {
            include_funcs: Self::globs(&self.include_funcs)?,
            exclude_funcs: Self::globs(&self.exclude_funcs)?,
            include_files: Self::globs(&self.include_files)?,
            exclude_files: Self::globs(&self.exclude_files)?,
            code: self.code_ownership(),
        })
    }
}

/// `%`, `,` and whitespace in a pattern, percent-encoded for
/// [`Config::describe`] (a glob such as `{a,b}` holds a comma).
fn escape(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    for c in pattern.chars() {
        if c == '%' || c == ',' || c.is_whitespace() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The inverse of [`escape`].
fn unescape(text: &str) -> Result<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .with_context(|| format!("bad escape in instrumentation pattern `{text}`"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .with_context(|| format!("bad escape in instrumentation pattern `{text}`"))
}

/// Compiled include/exclude filters.
pub struct Filters {
    include_funcs: GlobSet,
    exclude_funcs: GlobSet,
    include_files: GlobSet,
    exclude_files: GlobSet,
    /// Which source files are user code.
    pub code: dwarf::CodeOwnership,
}

impl Filters {
    /// Whether a function is user code: `dwarf_user` (DWARF says so) unless a
    /// filter says otherwise; excludes win over includes.
    pub fn is_user(
        &self,
        dwarf_user: bool,
        raw: &str,
        demangled: &str,
        file: Option<&str>,
    ) -> bool {
        self.forced(raw, demangled, file).unwrap_or(dwarf_user)
    }

    /// What a function-name or file filter says of a function, if any does.
    pub fn forced(&self, raw: &str, demangled: &str, file: Option<&str>) -> Option<bool> {
        let file_matches =
            |g: &GlobSet| file.is_some_and(|f| g.is_match(f) || g.is_match(dwarf::short_file(f)));
        if self.exclude_funcs.is_match(raw)
            || self.exclude_funcs.is_match(demangled)
            || file_matches(&self.exclude_files)
        {
            return Some(false);
        }
        if self.include_funcs.is_match(raw)
            || self.include_funcs.is_match(demangled)
            || file_matches(&self.include_files)
        {
            return Some(true);
        }
        None
    }
}

/// An instrumented module with its site table.
#[derive(Debug, Clone)]
pub struct Instrumented {
    /// The instrumented module.
    pub module: Vec<u8>,
    /// Its yield points and functions, symbolized.
    pub sites: SiteTable,
}

/// Instruments `bytes`. Invalid input (not wasm, truncated, invalid) gets a
/// clear error, never a panic.
pub fn instrument(bytes: &[u8], cfg: &Config) -> Result<Instrumented> {
    ModuleInfo::parse(bytes)?;
    let filters = cfg.filters()?;
    let debug = DebugInfo::parse(bytes).context("reading DWARF")?;
    let out = rewrite::rewrite(bytes, cfg, &filters, &debug)?;
    let symbols = |vars: Vec<dwarf::GlobalVar>| -> Vec<Symbol> {
        vars.into_iter()
            .map(|g| Symbol {
                name: g.name,
                addr: g.addr,
                size: g.size,
            })
            .collect()
    };
    let private_words = symbols(debug.library_lock_objects());
    let symbols = symbols(debug.globals());
    let sites = SiteTable {
        instrumenter_version: INSTRUMENTER_VERSION,
        module_sha256: sha256_hex(bytes),
        config: cfg.describe(),
        sites: out.sites,
        funcs: out.funcs,
        orig_imported_funcs: out.orig_imported_funcs,
        added_imports: RtImport::COUNT,
        offset_map: out.offset_map,
        data_start: out.data_start,
        memcheck: cfg.memcheck(),
        symbols,
        private_words,
        reuse_blocker: reuse::blocker(bytes)?,
        entry_func: out.entry_func,
    };
    Ok(Instrumented {
        module: out.module,
        sites,
    })
}

/// Checks that every `signature_mismatch:NAME` trap stub wasm-ld linked
/// into `bytes` (a direct call of `NAME` with another signature than its
/// definition's) can be replaced by an adapter that calls `NAME`, as
/// instrumentation does ([`fnptr`]). The error is one line naming the
/// function and both signatures. A module without such stubs is fine.
pub fn adaptable_stubs(bytes: &[u8]) -> Result<()> {
    let owned = fnptr::module_facts(bytes).context("malformed WebAssembly module")?;
    fnptr::stub_targets(&owned.facts())?;
    Ok(())
}

/// The link flags that keep the definitions `signature_mismatch:NAME` stubs
/// need: wasm-ld links a mismatched call to the stub, so a definition with
/// no other caller is garbage-collected. One `-Wl,--export-if-defined=NAME`
/// per stub whose `NAME` is not defined in `bytes`; a link that returns
/// flags is repeated with them appended.
pub fn stub_keep_flags(bytes: &[u8]) -> Result<Vec<String>> {
    let owned = fnptr::module_facts(bytes).context("malformed WebAssembly module")?;
    let names = &owned.func_names;
    let defined: std::collections::BTreeSet<&str> = names
        .values()
        .map(String::as_str)
        .chain(owned.func_exports.keys().map(String::as_str))
        .collect();
    let mut flags: Vec<String> = names
        .values()
        .filter_map(|n| n.strip_prefix("signature_mismatch:"))
        .filter(|n| !defined.contains(n))
        .map(|n| format!("-Wl,--export-if-defined={n}"))
        .collect();
    flags.sort();
    flags.dedup();
    Ok(flags)
}

/// The SHA-256 of `bytes`, in lowercase hex (a site table names its module
/// by it).
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzzing::SplitMix as Rng;

    /// Every configuration `describe` can write is read back to the same
    /// configuration (up to `memcheck`'s default, which `describe` spells out).
    #[test]
    fn description_round_trips() {
        let mut rng = Rng(20);
        let alphabet: Vec<char> = "ab*?{},% \t=[]-_./é".chars().collect();
        let pattern = |rng: &mut Rng| -> String {
            let n = rng.range(1, 8);
            (0..n)
                .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
                .collect()
        };
        let mut checked = 0;
        for _ in 0..6000 {
            let patterns = |rng: &mut Rng| -> Vec<String> {
                let n = rng.below(3);
                (0..n).map(|_| pattern(rng)).collect()
            };
            let cfg = Config {
                granularity: if rng.chance(0.5) {
                    Granularity::All
                } else {
                    Granularity::Sync
                },
                include_funcs: patterns(&mut rng),
                exclude_funcs: patterns(&mut rng),
                include_files: patterns(&mut rng),
                exclude_files: patterns(&mut rng),
                user_code: patterns(&mut rng),
                library_code: patterns(&mut rng),
                memcheck: [None, Some(true), Some(false)][rng.below(3) as usize],
                budget_in_global: rng.chance(0.5),
            };
            // Only configurations heddle accepts are ever written.
            if cfg.filters().is_err() {
                continue;
            }
            let text = cfg.describe();
            let back = Config::parse_description(&text)
                .unwrap_or_else(|e| panic!("`{text}` does not parse: {e:#}"));
            let expected = Config {
                memcheck: Some(cfg.memcheck()),
                ..cfg.clone()
            };
            assert_eq!(back, expected, "`{text}`");
            assert_eq!(back.describe(), text);
            checked += 1;
        }
        assert!(checked > 500, "only {checked} valid configurations drawn");
        // The case a replay reader once rejected.
        let cfg = Config {
            budget_in_global: true,
            ..Config::default()
        };
        assert!(cfg.describe().contains("budget=global"));
        assert!(
            Config::parse_description(&cfg.describe())
                .unwrap()
                .budget_in_global
        );
        assert!(Config::parse_description("granularity=most").is_err());
        assert!(Config::parse_description("colour=blue").is_err());
        assert!(Config::parse_description("include-funcs=%G1").is_err());
    }

    /// The thread entry (`rewrite::EXPORT_ENTRY`) is added, with a saved
    /// copy of every reset global, when the module has `wasi_thread_start`
    /// and every mutable global is a number; its frame belongs to no
    /// original function.
    #[test]
    fn thread_entry_needs_a_thread_start_and_number_globals() {
        let module = |globals: &str, exports: &str| {
            let text = format!(
                r#"(module
                  (import "env" "memory" (memory 1 1 shared))
                  {globals}
                  (func $start (param i32 i32))
                  (func $main)
                  (export "_start" (func $main))
                  {exports})"#
            );
            let bytes = wat::parse_str(&text).expect("valid wat");
            let out = instrument(&bytes, &Config::default()).expect("instrumented");
            let mut features = wasmparser::WasmFeatures::default();
            features.insert(wasmparser::WasmFeatures::THREADS);
            wasmparser::Validator::new_with_features(features)
                .validate_all(&out.module)
                .expect("valid output");
            let mut names = Vec::new();
            for p in wasmparser::Parser::new(0).parse_all(&out.module) {
                if let wasmparser::Payload::ExportSection(r) = p.unwrap() {
                    names.extend(r.into_iter().map(|e| e.unwrap().name.to_string()));
                }
            }
            (names, out.sites)
        };
        let start = r#"(export "wasi_thread_start" (func $start))"#;
        let numbers = "(global (mut i32) (i32.const 1)) (global (mut f64) (f64.const 2))";
        let (names, sites) = module(numbers, start);
        assert!(
            names.iter().any(|n| n == rewrite::EXPORT_ENTRY),
            "{names:?}"
        );
        let reset: Vec<&String> = names
            .iter()
            .filter(|n| n.starts_with(reuse::GLOBAL_PREFIX))
            .collect();
        // Both globals and the skip counter, each with its saved copy.
        assert_eq!(reset.len(), 3, "{names:?}");
        for n in reset {
            let saved = n.replacen(reuse::GLOBAL_PREFIX, rewrite::SAVED_PREFIX, 1);
            assert!(names.contains(&saved), "{saved} in {names:?}");
        }
        let entry = sites.entry_func.expect("entry index");
        assert_eq!(sites.original_func(entry), None);
        assert!(sites.original_func(entry - 1).is_some());

        let vector = "(global (mut i32) (i32.const 1)) (global (mut v128) (v128.const i64x2 0 0))";
        let (names, sites) = module(vector, start);
        assert!(
            !names.iter().any(|n| n == rewrite::EXPORT_ENTRY),
            "{names:?}"
        );
        assert_eq!(sites.entry_func, None);
        let (names, sites) = module(numbers, "");
        assert!(
            !names.iter().any(|n| n == rewrite::EXPORT_ENTRY),
            "{names:?}"
        );
        assert_eq!(sites.entry_func, None);
    }
}
