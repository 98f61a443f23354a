//! DWARF of the *original* module: source locations of sites, inlined call
//! stacks for backtraces, and which functions are user code.
//!
//! Addresses in wasm DWARF are byte offsets from the start of the code
//! section's payload. This module takes and returns module offsets and does
//! the conversion itself.
//!
//! User code = functions whose compile unit is not part of the toolchain's
//! libraries. The threads wasi-libc from rustup carries DWARF (its units are
//! named `wasisdk://v30.0/src/wasi-libc/…`), as may libc++; those, and
//! functions with no DWARF at all, are library code.

use anyhow::Result;
use gimli::{EndianArcSlice, LittleEndian, Reader as _};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use wasmparser::{Parser, Payload};

type Reader = EndianArcSlice<LittleEndian>;

/// A source position.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Loc {
    /// The source file, as the debug info names it.
    pub file: String,
    /// The line (1-based).
    pub line: u32,
    /// The column (0 when unknown).
    pub col: u32,
}

impl Loc {
    /// `file:line` with the file's last path component only; the file
    /// alone when the line is unknown (0).
    pub fn short(&self) -> String {
        match self.line {
            0 => short_file(&self.file).to_string(),
            line => format!("{}:{line}", short_file(&self.file)),
        }
    }
}

impl Loc {
    /// `file:line` for display ([`display_file`]): a library's file named
    /// by its library (`wasi-libc: pthread_create.c:42`), a program's by
    /// its last path component (`bank.c:12`); the file alone when the line
    /// is unknown (0). [`Loc::short`] stays as it is: verdict signatures
    /// are made with it.
    pub fn display(&self) -> String {
        match self.line {
            0 => display_file(&self.file),
            line => format!("{}:{line}", display_file(&self.file)),
        }
    }
}

impl std::fmt::Display for Loc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", short_file(&self.file), self.line, self.col)
    }
}

/// The name users know a function by: clang renames `main` for wasm
/// (`__main_argc_argv`, `__main_void`, `__original_main`).
pub fn display_name(name: &str) -> &str {
    match name {
        "__main_argc_argv" | "__main_void" | "__original_main" => "main",
        _ => name,
    }
}

/// The name users know a symbol by, as a Rust or C++ backtrace shows it:
/// - Rust v0 (`_R…`) and legacy (`_ZN…17h<hash>E`) symbols, without the hash;
/// - the legacy form the linker's name section holds, `::`-joined segments
///   that keep their `$LT$`/`..` escapes and a trailing `h<16 hex>` hash
///   (`core::ptr::drop_in_place$LT$T$GT$::h0123…`);
/// - C++ (`_Z…`);
/// - anything else (C names) as it is.
///
/// An LLVM clone suffix (` [clone .llvm.123]`, `.llvm.123`) is dropped.
/// Only mangled names go through a demangler: C++'s takes a bare `f`, `g`,
/// `w` or `x` for the builtin type it encodes (`float`, `__float128`, …).
pub fn demangle(name: &str) -> String {
    let base = name.split(" [clone ").next().unwrap_or(name);
    if let Some(rust) = demangle_rust(base) {
        return display_name(&rust).to_string();
    }
    if base.starts_with("_Z") || base.starts_with("__Z") {
        let d = addr2line::demangle(base, gimli::DW_LANG_C_plus_plus)
            .unwrap_or_else(|| base.to_string());
        return display_name(&d).to_string();
    }
    display_name(base).to_string()
}

/// A Rust symbol (v0, legacy, or the name section's legacy form) demangled
/// without its hash, or `None` when `name` is not one.
fn demangle_rust(name: &str) -> Option<String> {
    if name.starts_with("_R") {
        return rustc_demangle::try_demangle(name)
            .ok()
            .map(|d| format!("{d:#}"));
    }
    // Legacy symbols end in a hash segment `17h<16 hex>E`; C++ `_ZN…E`
    // names have none and go to the C++ demangler.
    if name.starts_with("_ZN") {
        let d = rustc_demangle::try_demangle(name).ok()?;
        let full = format!("{d}");
        return is_rust_hash(full.rsplit("::").next()?).then(|| format!("{d:#}"));
    }
    // The name section's form: rebuild the legacy symbol.
    let segments: Vec<&str> = name.split("::").collect();
    if segments.len() < 2 || !is_rust_hash(segments[segments.len() - 1]) {
        return None;
    }
    if segments
        .iter()
        .any(|s| s.is_empty() || s.contains(['<', '>', ' ', '(', '&', ',']))
    {
        return None;
    }
    let mut symbol = String::from("_ZN");
    for s in &segments {
        symbol.push_str(&format!("{}{s}", s.len()));
    }
    symbol.push('E');
    rustc_demangle::try_demangle(&symbol)
        .ok()
        .map(|d| format!("{d:#}"))
}

/// `h` and 16 hex digits: the hash segment of a legacy Rust symbol.
fn is_rust_hash(segment: &str) -> bool {
    segment.len() == 17
        && segment.starts_with('h')
        && segment[1..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// The last path component of `path`.
pub fn short_file(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A source file for display, short and named by what it is part of:
/// - the C library: `wasi-libc: pthread_create.c` (for
///   `…/wasisdk://v30.0/src/wasi-libc/libc-top-half/musl/src/thread/pthread_create.c`);
/// - libc++ and libc++abi: `libc++: __mutex/unique_lock.h` (a header, by
///   its path under `c++/v1/`), `libc++: thread.cpp`, `libc++abi: cxa_guard.cpp`;
/// - Rust's own libraries: `rust std: std/thread/mod.rs` (for
///   `/rustc/<commit>/library/std/src/thread/mod.rs`), and the crates `std`
///   depends on (`rust std: hashbrown-0.15.2/src/raw/mod.rs`);
/// - a crate from cargo's registry or a git checkout, by its directory:
///   `crossbeam-utils-0.8.21: src/backoff.rs`;
/// - compiler-rt, libunwind, clang's own headers and heddle's guest
///   headers, likewise;
/// - anything else (the program's own files) by its last path component.
pub fn display_file(path: &str) -> String {
    let last = short_file(path);
    let after = |marker: &str| path.rsplit_once(marker).map(|(_, t)| t);
    if is_rust_toolchain_path(path) {
        if let Some(tail) = after("/library/") {
            return format!("rust std: {}", tail.replacen("/src/", "/", 1));
        }
        return format!("rust std: {last}");
    }
    if let Some(tail) = path.strip_prefix("/rust/deps/") {
        return format!("rust std: {tail}");
    }
    for registry in ["/.cargo/registry/src/", "/.cargo/git/checkouts/"] {
        // `…/src/<index>/<crate>-<version>/<path>`.
        if let Some((krate, rest)) = after(registry)
            .and_then(|t| t.split_once('/'))
            .and_then(|(_, t)| t.split_once('/'))
        {
            return format!("{krate}: {rest}");
        }
    }
    if let Some(tail) = after("/c++/v1/") {
        return format!("libc++: {tail}");
    }
    const BY_MARKER: &[(&str, &str)] = &[
        ("/libcxxabi/", "libc++abi"),
        ("/libcxx/", "libc++"),
        ("/libunwind/", "libunwind"),
        ("/compiler-rt/", "compiler-rt"),
        ("wasisdk:", "wasi-libc"),
        ("/wasi-libc/", "wasi-libc"),
        ("/include/wasm32-wasi", "wasi-libc"),
        ("/wasi-sysroot/", "wasi-libc"),
        ("/toolchain/sysroot/", "wasi-libc"),
        ("/guest-sdk/compat/", "heddle"),
        ("/include/heddle.h", "heddle"),
    ];
    if let Some((_, lib)) = BY_MARKER.iter().find(|(m, _)| path.contains(m)) {
        return format!("{lib}: {last}");
    }
    if path.starts_with("/usr/lib/llvm") && path.contains("/include/") {
        return format!("clang: {last}");
    }
    last.to_string()
}

/// One frame of a symbolized stack (innermost first when inlined). Two
/// frames are equal when their function and location are: the offset of
/// the same frame can differ between two instrumentations of a module.
#[derive(Debug, Clone, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// The function's name, demangled, when known.
    pub function: Option<String>,
    /// The source location, when known.
    pub loc: Option<Loc>,
    /// The instruction's offset in the original module, when known: where
    /// a frame without a location is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

impl PartialEq for Frame {
    fn eq(&self, other: &Frame) -> bool {
        self.function == other.function && self.loc == other.loc
    }
}

impl Frame {
    /// The function's name, `?` when unknown.
    pub fn name(&self) -> &str {
        self.function
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or("?")
    }

    /// Where the frame is, for display: its location ([`Loc::display`]),
    /// else its offset in the module (`wasm+0x1f3a`), else `?`. Never empty.
    pub fn place(&self) -> String {
        match (
            self.loc.as_ref().filter(|l| !l.file.is_empty()),
            self.offset,
        ) {
            (Some(l), _) => l.display(),
            (None, Some(off)) => format!("wasm+{off:#x}"),
            (None, None) => "?".into(),
        }
    }
}

/// Debug information of a module, if it has any.
pub struct DebugInfo {
    ctx: Option<addr2line::Context<Reader>>,
    dwarf: Option<Arc<gimli::Dwarf<Reader>>>,
    /// Start of the code section payload in the module.
    code_start: u64,
}

impl DebugInfo {
    /// Loads the DWARF sections of `module`. A module without DWARF (or with
    /// DWARF this reader cannot parse) gives an empty `DebugInfo`.
    pub fn parse(module: &[u8]) -> Result<DebugInfo> {
        let mut sections: BTreeMap<String, Arc<[u8]>> = BTreeMap::new();
        let mut code_start = 0;
        for payload in Parser::new(0).parse_all(module) {
            match payload? {
                Payload::CodeSectionStart { range, .. } => code_start = range.start as u64,
                Payload::CustomSection(c) if c.name().starts_with(".debug_") => {
                    sections.insert(c.name().to_string(), Arc::from(c.data()));
                }
                _ => {}
            }
        }
        if sections.is_empty() {
            return Ok(DebugInfo {
                ctx: None,
                dwarf: None,
                code_start,
            });
        }
        let empty: Arc<[u8]> = Arc::from(&[][..]);
        let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
            let data = sections
                .get(id.name())
                .cloned()
                .unwrap_or_else(|| empty.clone());
            Ok(EndianArcSlice::new(data, LittleEndian))
        };
        let dwarf = Arc::new(gimli::Dwarf::load(load)?);
        let ctx = addr2line::Context::from_arc_dwarf(dwarf.clone()).ok();
        Ok(DebugInfo {
            ctx,
            dwarf: Some(dwarf),
            code_start,
        })
    }

    /// True when the module carries any DWARF.
    pub fn present(&self) -> bool {
        self.ctx.is_some()
    }

    fn addr(&self, module_offset: u64) -> Option<u64> {
        module_offset.checked_sub(self.code_start)
    }

    /// The source position of the instruction at `module_offset`.
    pub fn location(&self, module_offset: u64) -> Option<Loc> {
        let ctx = self.ctx.as_ref()?;
        let loc = ctx.find_location(self.addr(module_offset)?).ok()??;
        Some(Loc {
            file: loc.file?.to_string(),
            line: loc.line.unwrap_or(0),
            col: loc.column.unwrap_or(0),
        })
    }

    /// The inlined call stack at `module_offset`, innermost first.
    pub fn frames(&self, module_offset: u64) -> Vec<Frame> {
        let mut out = Vec::new();
        let (Some(ctx), Some(addr)) = (self.ctx.as_ref(), self.addr(module_offset)) else {
            return out;
        };
        let Ok(mut iter) = ctx.find_frames(addr).skip_all_loads() else {
            return out;
        };
        while let Ok(Some(f)) = iter.next() {
            let function = f
                .function
                .as_ref()
                .and_then(|n| n.raw_name().ok().map(|s| demangle(&s)));
            let loc = f.location.and_then(|l| {
                Some(Loc {
                    file: l.file?.to_string(),
                    line: l.line.unwrap_or(0),
                    col: l.column.unwrap_or(0),
                })
            });
            out.push(Frame {
                function,
                loc,
                offset: Some(module_offset),
            });
        }
        out
    }

    /// The name (`DW_AT_name`) and compilation directory of the compile unit
    /// covering `module_offset`.
    pub fn unit_name(&self, module_offset: u64) -> Option<(String, String)> {
        let ctx = self.ctx.as_ref()?;
        let unit = ctx
            .find_dwarf_and_unit(self.addr(module_offset)?)
            .skip_all_loads()?;
        let name = unit
            .name
            .as_ref()
            .and_then(|n| n.to_string_lossy().ok().map(|s| s.into_owned()))
            .unwrap_or_default();
        let dir = unit
            .comp_dir
            .as_ref()
            .and_then(|n| n.to_string_lossy().ok().map(|s| s.into_owned()))
            .unwrap_or_default();
        Some((name, dir))
    }

    /// Whether the function whose body spans `body` (module offsets) is user
    /// code: it has line information and its unit is not a library's.
    pub fn is_user_function(&self, body: std::ops::Range<u64>, code: &CodeOwnership) -> bool {
        // Probe a few instructions into the body: the first bytes are the
        // locals declaration, which has no line row.
        let Some(ctx) = self.ctx.as_ref() else {
            return false;
        };
        let (Some(start), Some(end)) = (self.addr(body.start), self.addr(body.end)) else {
            return false;
        };
        let Ok(mut rows) = ctx.find_location_range(start, end) else {
            return false;
        };
        let Some((addr, _, _)) = rows.next() else {
            return false;
        };
        match self.unit_name(addr + self.code_start) {
            Some((name, dir)) => !code.is_library_unit(&name, &dir),
            None => false,
        }
    }
}

/// Whose code an instruction is: the innermost *user* frame of its inlined
/// call chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// No DWARF frame covers it.
    Unknown,
    /// Every frame of its chain is library code (e.g. a generic function of
    /// Rust's `core` instantiated in the program's unit, or a libc++
    /// template).
    Library,
    /// `frame` is the innermost user frame; `inlined` when it is not the
    /// function the instruction sits in (the code was inlined into it).
    User {
        /// The frame: its function and the line in it.
        frame: Frame,
        /// Whether `frame` is an inlined frame rather than the outermost.
        inlined: bool,
    },
}

impl DebugInfo {
    /// Who the instruction at `module_offset` belongs to. A plain access
    /// belongs to the innermost user frame of its inlined chain: an access
    /// inlined from a C++ template into the program's function is the
    /// program's, at its line; one inlined from Rust's `std` or `alloc` is
    /// not (safe Rust cannot race through them, and their
    /// bookkeeping, such as `thread::spawn`'s, is no decision of the
    /// program's). A synchronisation operation (`sync`) belongs to whoever
    /// asked for it: the first frame outside the synchronisation wrappers
    /// ([`is_sync_wrapper_file`]) — the program's `x.load()` or
    /// `m.lock()` at its line, but not the reference count `Arc::clone` or
    /// `std::shared_ptr` updates, nor `thread::spawn`'s. An operation inside an
    /// out-of-line wrapper (`-O0`) is the library's here; the rewriter
    /// gives each call the program makes to one a copy of its own.
    pub fn owner(&self, module_offset: u64, code: &CodeOwnership, sync: bool) -> Owner {
        self.owner_with(module_offset, code, sync, false)
    }

    /// The owner of a call into a synchronisation library
    /// ([`is_sync_library_file`]): as [`DebugInfo::owner`] of a
    /// synchronisation, with the library's own inlined frames skipped too
    /// (at `-O2` the channel's front is inlined into the program's function
    /// and calls the rest), so the call is the program's at its line.
    pub fn call_owner(&self, module_offset: u64, code: &CodeOwnership) -> Owner {
        self.owner_with(module_offset, code, true, true)
    }

    fn owner_with(
        &self,
        module_offset: u64,
        code: &CodeOwnership,
        sync: bool,
        skip_libraries: bool,
    ) -> Owner {
        let frames = self.frames(module_offset);
        let last = frames.len().saturating_sub(1);
        let user = |i: usize, f: &Frame| Owner::User {
            frame: f.clone(),
            inlined: i < last,
        };
        for (i, f) in frames.iter().enumerate() {
            let Some(loc) = &f.loc else { continue };
            // `core`'s glue between the program and a wrapper
            // (`drop_in_place` running a guard's `Drop`) is transparent.
            if sync && (is_sync_wrapper_file(&loc.file) || is_rust_core_file(&loc.file)) {
                continue;
            }
            if skip_libraries && is_sync_library_file(&loc.file) {
                continue;
            }
            if !code.is_library_file(&loc.file) {
                return user(i, f);
            }
            if sync || is_rust_std_file(&loc.file) {
                return Owner::Library;
            }
        }
        if frames.iter().any(|f| f.loc.is_some()) {
            Owner::Library
        } else {
            Owner::Unknown
        }
    }

    /// Whether the function the instruction at `module_offset` sits in is
    /// itself user code (its outermost frame), whatever was inlined there.
    pub fn outer_is_user(&self, module_offset: u64, code: &CodeOwnership) -> Option<bool> {
        let frames = self.frames(module_offset);
        let loc = frames.last()?.loc.as_ref()?;
        Some(!code.is_library_file(&loc.file))
    }
}

/// Which source files are user code. By default every file is, except the
/// toolchain's libraries ([`is_library_unit`]): wasi-libc, libc++, Rust's
/// `std`/`core`/`alloc` (`/rustc/<commit>/library/…`) and crates from
/// cargo's registry or git checkouts. `--user-code PREFIX` and
/// `--library-code PREFIX` override that; the longest matching prefix wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CodeOwnership {
    /// Path prefixes that are user code.
    pub user: Vec<String>,
    /// Path prefixes that are library code.
    pub library: Vec<String>,
}

impl CodeOwnership {
    /// Whether the source file at `path` is library code.
    pub fn is_library_file(&self, path: &str) -> bool {
        let longest = |prefixes: &[String]| {
            prefixes
                .iter()
                .filter(|p| prefix_matches(path, p))
                .map(|p| p.len())
                .max()
        };
        match (longest(&self.user), longest(&self.library)) {
            (Some(u), Some(l)) => l > u,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (None, None) => is_library_unit(path, ""),
        }
    }

    /// Whether the compile unit `name`, compiled in `dir`, is library code.
    pub fn is_library_unit(&self, name: &str, dir: &str) -> bool {
        let path = if name.starts_with('/') || dir.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", dir.trim_end_matches('/'))
        };
        if self.user.is_empty() && self.library.is_empty() {
            return is_library_unit(name, dir);
        }
        self.is_library_file(&path)
    }
}

/// Whether `prefix` names `path` or a directory above it: an absolute
/// prefix from the start, a relative one at any path component.
fn prefix_matches(path: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    if prefix.is_empty() {
        return false;
    }
    let at = |i: usize| {
        path[i..].starts_with(prefix)
            && matches!(path.as_bytes().get(i + prefix.len()), None | Some(b'/'))
    };
    if prefix.starts_with('/') {
        return at(0);
    }
    at(0) || path.match_indices('/').any(|(i, _)| at(i + 1))
}

/// A global variable of user code, found through DWARF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalVar {
    /// The variable's name.
    pub name: String,
    /// Its address in linear memory.
    pub addr: u32,
    /// Its size in bytes.
    pub size: u32,
}

impl DebugInfo {
    /// Global (and function-static) variables of user compile units with a
    /// fixed address, sorted by address.
    pub fn globals(&self) -> Vec<GlobalVar> {
        let mut out = Vec::new();
        if let Some(dwarf) = &self.dwarf {
            let _ = collect_globals(
                dwarf,
                |name, dir| !is_library_unit(name, dir),
                |_, _| true,
                &mut out,
            );
        }
        out.sort_by(|a, b| (a.addr, &a.name).cmp(&(b.addr, &b.name)));
        out.dedup_by(|a, b| a.addr == b.addr && a.name == b.name);
        out
    }

    /// The C library's own lock objects ([`LIBRARY_LOCK_OBJECTS`]) the
    /// module links, by address.
    pub fn library_lock_objects(&self) -> Vec<GlobalVar> {
        let mut out = Vec::new();
        if let Some(dwarf) = &self.dwarf {
            let _ = collect_globals(
                dwarf,
                |name, _| LIBRARY_LOCK_OBJECTS.iter().any(|(f, _)| name.ends_with(f)),
                |unit, var| {
                    LIBRARY_LOCK_OBJECTS
                        .iter()
                        .any(|&(f, v)| unit.ends_with(f) && var == v)
                },
                &mut out,
            );
        }
        out.sort_by_key(|g| g.addr);
        out.dedup_by_key(|g| g.addr);
        out
    }
}

/// Lock objects of wasi-libc that guard only its own bookkeeping, by the
/// file that defines them: musl's lock of thread-specific data keys,
/// read-locked by every exiting thread that used a key (Rust's standard
/// library does, for its thread-locals) to run the keys' destructors.
/// Their operations make no decision (see `sites::decides_nothing`).
pub const LIBRARY_LOCK_OBJECTS: &[(&str, &str)] = &[("/thread/pthread_key_create.c", "key_lock")];

fn attr_str(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    e: &gimli::DebuggingInformationEntry<Reader>,
    at: gimli::DwAt,
) -> Option<String> {
    let v = e.attr_value(at)?;
    let r = dwarf.attr_string(unit, v).ok()?;
    r.to_string_lossy().ok().map(|s| s.into_owned())
}

/// The global variables of the units `unit` accepts (by name and
/// directory) that `var` accepts (by unit name and variable name).
fn collect_globals(
    dwarf: &gimli::Dwarf<Reader>,
    unit_filter: impl Fn(&str, &str) -> bool,
    var_filter: impl Fn(&str, &str) -> bool,
    out: &mut Vec<GlobalVar>,
) -> gimli::Result<()> {
    let mut headers = dwarf.units();
    while let Some(header) = headers.next()? {
        let unit = dwarf.unit(header)?;
        let name = unit
            .name
            .as_ref()
            .and_then(|n| n.to_string_lossy().ok().map(|s| s.into_owned()))
            .unwrap_or_default();
        let dir = unit
            .comp_dir
            .as_ref()
            .and_then(|n| n.to_string_lossy().ok().map(|s| s.into_owned()))
            .unwrap_or_default();
        if !unit_filter(&name, &dir) {
            continue;
        }
        let mut cursor = unit.entries();
        while let Some(entry) = cursor.next_dfs()? {
            if entry.tag() != gimli::DW_TAG_variable {
                continue;
            }
            let Some(gimli::AttributeValue::Exprloc(expr)) =
                entry.attr_value(gimli::DW_AT_location)
            else {
                continue;
            };
            let mut r = expr.0.clone();
            let addr = match gimli::Operation::parse(&mut r, unit.encoding()) {
                Ok(gimli::Operation::Address { address }) => address,
                Ok(gimli::Operation::AddressIndex { index }) => match dwarf.address(&unit, index) {
                    Ok(a) => a,
                    Err(_) => continue,
                },
                _ => continue,
            };
            if addr >= u32::MAX as u64 - 16 {
                continue; // tombstone of a discarded definition
            }
            let Some(var) = attr_str(dwarf, &unit, entry, gimli::DW_AT_name) else {
                continue;
            };
            if !var_filter(&name, &var) {
                continue;
            }
            let size = entry
                .attr_value(gimli::DW_AT_type)
                .and_then(|t| type_size(&unit, t, 0))
                .unwrap_or(0);
            out.push(GlobalVar {
                name: var,
                addr: addr as u32,
                size: size as u32,
            });
        }
    }
    Ok(())
}

/// Byte size of a DWARF type, following typedefs and qualifiers.
fn type_size(
    unit: &gimli::Unit<Reader>,
    ty: gimli::AttributeValue<Reader>,
    depth: u32,
) -> Option<u64> {
    if depth > 16 {
        return None;
    }
    let gimli::AttributeValue::UnitRef(off) = ty else {
        return None;
    };
    let e = unit.entry(off).ok()?;
    if let Some(sz) = e
        .attr_value(gimli::DW_AT_byte_size)
        .and_then(|v| v.udata_value())
    {
        return Some(sz);
    }
    match e.tag() {
        gimli::DW_TAG_pointer_type
        | gimli::DW_TAG_reference_type
        | gimli::DW_TAG_rvalue_reference_type => Some(4),
        gimli::DW_TAG_array_type => {
            let elem = type_size(unit, e.attr_value(gimli::DW_AT_type)?, depth + 1)?;
            let mut count = 1u64;
            let mut tree = unit.entries_tree(Some(off)).ok()?;
            let root = tree.root().ok()?;
            let mut children = root.children();
            while let Ok(Some(child)) = children.next() {
                let c = child.entry();
                if c.tag() == gimli::DW_TAG_subrange_type {
                    let n = c
                        .attr_value(gimli::DW_AT_count)
                        .and_then(|v| v.udata_value())
                        .or_else(|| {
                            c.attr_value(gimli::DW_AT_upper_bound)
                                .and_then(|v| v.udata_value())
                                .map(|u| u + 1)
                        })
                        .unwrap_or(0);
                    count = count.saturating_mul(n);
                }
            }
            Some(elem.saturating_mul(count))
        }
        _ => type_size(unit, e.attr_value(gimli::DW_AT_type)?, depth + 1),
    }
}

/// Whether `path` is one of the layers through which a program asks for
/// synchronisation: libc++'s `<atomic>` (`std::atomic`, `std::atomic_flag`,
/// `std::atomic_thread_fence`, in `c++/v1/atomic` and `c++/v1/__atomic/`),
/// `<mutex>`, `<condition_variable>` and `<shared_mutex>` (`lock_guard`,
/// `unique_lock`, `scoped_lock`),
/// Rust's `core::sync::atomic`, and Rust's `std::sync` (`Mutex`, `RwLock`,
/// `Condvar`, `Once`, channels) with the `std::sys::sync` code under it. An
/// atomic, wait or notify in one is the program's own operation, at the
/// line that called it.
pub fn is_sync_wrapper_file(path: &str) -> bool {
    let rust = is_rust_toolchain_path(path);
    const LIBCXX: &[&str] = &[
        "/c++/v1/__atomic/",
        "/c++/v1/__mutex/",
        "/c++/v1/__condition_variable/",
    ];
    const LIBCXX_HEADERS: &[&str] = &[
        "/c++/v1/atomic",
        "/c++/v1/stdatomic.h",
        "/c++/v1/mutex",
        "/c++/v1/condition_variable",
        "/c++/v1/shared_mutex",
    ];
    LIBCXX.iter().any(|d| path.contains(d))
        || LIBCXX_HEADERS.iter().any(|h| path.ends_with(h))
        || (rust
            && !is_sync_library_file(path)
            && (path.ends_with("/library/core/src/sync/atomic.rs")
                || path.contains("/library/std/src/sync/")
                || path.contains("/library/std/src/sys/sync/")))
}

/// Whether `path` is a synchronisation *library* rather than a thin
/// wrapper: the implementation of Rust's channels (`std::sync::mpmc`, behind
/// `std::sync::mpsc`), whose operations are whole algorithms of their own
/// (a lock-free list, wakers, parking). Its operations are its internals,
/// never the program's; a call of the program's into it that can block or
/// retry is one decision (`wrappers`).
pub fn is_sync_library_file(path: &str) -> bool {
    is_rust_toolchain_path(path) && path.contains("/library/std/src/sync/mpmc/")
}

/// Whether the function named `name` (demangled) is one of libc++'s
/// compiled synchronisation classes, which call the C library's lock,
/// unlock and wait (`std::mutex::lock`, `std::condition_variable::wait`):
/// libc++ is built without line information, so they are known by name.
pub fn is_sync_wrapper_function(name: &str) -> bool {
    const CLASSES: &[&str] = &[
        "mutex::",
        "recursive_mutex::",
        "timed_mutex::",
        "recursive_timed_mutex::",
        "condition_variable::",
        "__shared_mutex_base::",
        "shared_timed_mutex::",
    ];
    name.strip_prefix("std::__1::")
        .or_else(|| name.strip_prefix("std::"))
        .is_some_and(|rest| CLASSES.iter().any(|c| rest.starts_with(c)))
}

/// Whether `path` is a source file of Rust's `core`, precompiled or from
/// rust-src.
pub fn is_rust_core_file(path: &str) -> bool {
    is_rust_toolchain_path(path) && path.contains("/library/core/")
}

/// Whether `path` is a source file of Rust's own libraries (`std`, `core`,
/// `alloc`, …), precompiled (`/rustc/<commit>/library/…`) or from rust-src
/// (`…/rustlib/src/rust/library/…`).
pub fn is_rust_toolchain_path(path: &str) -> bool {
    path.starts_with("/rustc/") || path.contains("/rustlib/src/rust/")
}

/// Whether `path` is a source file of Rust's `std` or `alloc` (or a crate
/// `std` depends on), precompiled (`/rustc/<commit>/library/…`) or from
/// rust-src: their internals (a spawn's bookkeeping, `Arc`'s count, a
/// `Vec`'s buffer) are not the program's accesses even when inlined into
/// it. `core`'s primitives (`ptr::write`, `Cell`, `mem::swap`) are.
pub fn is_rust_std_file(path: &str) -> bool {
    path.starts_with("/rust/deps/")
        || (is_rust_toolchain_path(path)
            && (path.contains("/library/std/") || path.contains("/library/alloc/")))
}

/// Whether a compile unit named `name` (compiled in `dir`) belongs to the
/// toolchain's libraries rather than to the program.
pub fn is_library_unit(name: &str, dir: &str) -> bool {
    const MARKERS: &[&str] = &[
        "wasisdk://",
        "/wasi-libc/",
        "/libcxx/",
        "/libcxxabi/",
        "/libunwind/",
        "/compiler-rt/",
        "/wasi-sysroot/",
        "/llvm-project/",
        "/llvm-toolchain-",
        "/c++/v1/",
        "/include/wasm32-wasi",
        "/toolchain/sysroot/",
        "/guest-sdk/compat/",
        "/include/heddle.h",
        // Crates from cargo's registry and git checkouts, and rustup's
        // toolchains (rust-src).
        "/.cargo/registry/",
        "/.cargo/git/",
        "/.rustup/toolchains/",
    ];
    // The prefixes first: they are cheap, and Rust's std, on every Rust
    // stack, is one (this runs for each frame of a failing run's stacks).
    name.starts_with("wasisdk:")
        || name.starts_with("/usr/lib/llvm")
        || name.starts_with("/usr/include/")
        || dir.starts_with("/usr/lib/llvm")
        // Rust's std, core and alloc: precompiled with paths remapped to
        // `/rustc/<commit>/library/…`, their units named `library/…`.
        || name.starts_with("/rustc/")
        || dir.starts_with("/rustc/")
        // The crates std itself depends on (hashbrown, the `wasi` bindings,
        // libtest's getopts), remapped the same way.
        || name.starts_with("/rust/deps/")
        || dir.starts_with("/rust/deps/")
        || MARKERS.iter().any(|m| name.contains(m))
        || {
            let joined = format!("{dir}/{name}");
            MARKERS.iter().any(|m| joined.contains(m))
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_files_are_named_by_their_library() {
        for (path, want) in [
            (
                "/b/wasi-libc-wasm32-wasip1-threads-build-prefix/src/wasi-libc-wasm32-wasip1-threads-build/wasisdk://v30.0/src/wasi-libc/libc-top-half/musl/src/thread/pthread_create.c",
                "wasi-libc: pthread_create.c",
            ),
            ("wasisdk://v30.0/src/wasi-libc/libc-bottom-half/crt/crt1-command.c", "wasi-libc: crt1-command.c"),
            ("/usr/include/wasm32-wasip1-threads/c++/v1/__mutex/unique_lock.h", "libc++: __mutex/unique_lock.h"),
            ("/cache/libcxx-19/llvm-project/libcxx/src/thread.cpp", "libc++: thread.cpp"),
            ("/cache/libcxx-19/llvm-project/libcxxabi/src/cxa_guard.cpp", "libc++abi: cxa_guard.cpp"),
            (
                "/rustc/4d91de4e48198da2e33413efdcd9cd2cc0c46688/library/std/src/thread/mod.rs",
                "rust std: std/thread/mod.rs",
            ),
            (
                "/home/u/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/lib/rustlib/src/rust/library/core/src/sync/atomic.rs",
                "rust std: core/sync/atomic.rs",
            ),
            ("/rust/deps/hashbrown-0.15.2/src/raw/mod.rs", "rust std: hashbrown-0.15.2/src/raw/mod.rs"),
            (
                "/home/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/crossbeam-utils-0.8.21/src/backoff.rs",
                "crossbeam-utils-0.8.21: src/backoff.rs",
            ),
            ("/usr/lib/llvm-19/lib/clang/19/include/stdatomic.h", "clang: stdatomic.h"),
            ("/work/targets/race_bank.c", "race_bank.c"),
            ("bank.c", "bank.c"),
        ] {
            assert_eq!(display_file(path), want, "{path}");
        }
        let loc = |file: &str, line| Loc {
            file: file.into(),
            line,
            col: 3,
        };
        assert_eq!(
            loc(
                "wasisdk://v30.0/src/wasi-libc/libc-top-half/musl/src/thread/pthread_create.c",
                42
            )
            .display(),
            "wasi-libc: pthread_create.c:42"
        );
        assert_eq!(loc("/src/a.c", 0).display(), "a.c");
        // `short` (verdict signatures) is unchanged.
        assert_eq!(loc("wasisdk://v30.0/src/x/y.c", 7).short(), "y.c:7");
    }

    #[test]
    fn every_frame_prints_something() {
        let frame = |function: Option<&str>, loc: Option<Loc>, offset| Frame {
            function: function.map(str::to_string),
            loc,
            offset,
        };
        let f = frame(None, None, None);
        assert_eq!((f.name(), f.place().as_str()), ("?", "?"));
        let f = frame(Some(""), None, Some(0x1f3a));
        assert_eq!((f.name(), f.place().as_str()), ("?", "wasm+0x1f3a"));
        let empty = Loc {
            file: String::new(),
            line: 0,
            col: 0,
        };
        let f = frame(Some("main"), Some(empty), Some(16));
        assert_eq!((f.name(), f.place().as_str()), ("main", "wasm+0x10"));
        // The offset is no part of a frame's identity.
        assert_eq!(
            f,
            Frame {
                offset: Some(20),
                ..f.clone()
            }
        );
        let f = frame(
            Some("worker"),
            Some(Loc {
                file: "/p/w.c".into(),
                line: 9,
                col: 1,
            }),
            Some(16),
        );
        assert_eq!((f.name(), f.place().as_str()), ("worker", "w.c:9"));
    }

    #[test]
    fn demangles_rust_and_cpp_names() {
        // The name section's legacy form, with a clone suffix.
        assert_eq!(
            demangle("_$LT$core..iter..adapters..map..Map$LT$I$C$F$GT$$u20$as$u20$core..iter..traits..iterator..Iterator$GT$::fold::h4e3e83984a520655"),
            "<core::iter::adapters::map::Map<I,F> as core::iter::traits::iterator::Iterator>::fold"
        );
        assert_eq!(
            demangle("std::rt::lang_start::_$u7b$$u7b$closure$u7d$$u7d$::h11009330ee0964d7 [clone .llvm.3483150290158221416]"),
            "std::rt::lang_start::{{closure}}"
        );
        assert_eq!(demangle("lost::main::h785132ba9889615a"), "lost::main");
        // v0 and legacy symbols.
        assert_eq!(
            demangle("_RNvNtCs1cbpOjQgv0Q_3std9panicking15panic_with_hook"),
            "std::panicking::panic_with_hook"
        );
        assert_eq!(demangle("_ZN4lost4main17h785132ba9889615aE"), "lost::main");
        // C++ and C.
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(demangle("_Z6workerPv"), "worker(void*)");
        assert_eq!(demangle("worker"), "worker");
        assert_eq!(demangle("__original_main"), "main");
        assert_eq!(demangle("f"), "f");
        // `::`-joined names that are not Rust's stay as they are.
        assert_eq!(demangle("foo::bar()"), "foo::bar()");
        assert_eq!(demangle("a::b"), "a::b");
    }

    #[test]
    fn code_ownership_prefixes() {
        let rust =
            "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/sync/atomic.rs";
        let dep = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/foo-1.0.0/src/lib.rs";
        let own = "/home/u/proj/src/lib.rs";
        let none = CodeOwnership::default();
        assert!(none.is_library_file(rust));
        assert!(none.is_library_file(dep));
        assert!(!none.is_library_file(own));
        assert!(none.is_library_unit("library/std/src/lib.rs/@/std.abc", "/rustc/5980761"));
        assert!(none.is_library_file("/rust/deps/hashbrown-0.16.1/src/raw/mod.rs"));
        let o = CodeOwnership {
            user: vec!["foo-1.0.0".into(), "/home/u/proj".into()],
            library: vec!["/home/u/proj/vendor".into()],
        };
        assert!(!o.is_library_file(dep));
        assert!(!o.is_library_file(own));
        assert!(o.is_library_file("/home/u/proj/vendor/x/src/lib.rs"));
        assert!(!o.is_library_file("/home/u/proj/vendorized/lib.rs"));
        assert!(o.is_library_file(rust));
        // A relative prefix matches whole components only.
        assert!(o.is_library_file("/root/.cargo/registry/src/i/xfoo-1.0.0/src/lib.rs"));
    }

    #[test]
    fn atomic_wrappers_and_rust_std_files() {
        let v1 = "/root/.cache/heddle/toolchain/sysroot/include/c++/v1";
        assert!(is_sync_wrapper_file(&format!(
            "{v1}/__atomic/cxx_atomic_impl.h"
        )));
        assert!(is_sync_wrapper_file(&format!("{v1}/atomic")));
        assert!(is_sync_wrapper_file(
            "/rustc/0123abcd/library/core/src/sync/atomic.rs"
        ));
        assert!(is_sync_wrapper_file(
            "/rustc/0123abcd/library/std/src/sys/sync/mutex/futex.rs"
        ));
        assert!(!is_sync_wrapper_file(
            "/rustc/0123abcd/library/std/src/thread/mod.rs"
        ));
        // Library internals that use atomics are not wrappers.
        assert!(!is_sync_wrapper_file(&format!(
            "{v1}/__memory/shared_ptr.h"
        )));
        assert!(!is_sync_wrapper_file(
            "/rustc/0123abcd/library/alloc/src/sync.rs"
        ));
        assert!(!is_sync_wrapper_file("/home/u/proj/src/atomic.rs"));
        assert!(is_sync_wrapper_file(&format!("{v1}/__mutex/lock_guard.h")));
        assert!(is_sync_wrapper_function("std::__1::mutex::lock()"));
        assert!(is_sync_wrapper_function(
            "std::__1::condition_variable::wait(std::__1::unique_lock<std::__1::mutex>&)"
        ));
        assert!(!is_sync_wrapper_function("std::__1::thread::join()"));
        assert!(!is_sync_wrapper_function("my::mutex::lock()"));
        // std and alloc are internals; core's primitives and user files are not.
        assert!(is_rust_std_file(
            "/rustc/0123abcd/library/std/src/thread/mod.rs"
        ));
        assert!(is_rust_std_file(
            "/rustc/0123abcd/library/alloc/src/vec/mod.rs"
        ));
        assert!(is_rust_std_file(
            "/rust/deps/hashbrown-0.15.2/src/raw/mod.rs"
        ));
        assert!(!is_rust_std_file(
            "/rustc/0123abcd/library/core/src/ptr/mod.rs"
        ));
        assert!(!is_rust_std_file("/home/u/library/std/src/main.rs"));
    }

    #[test]
    fn library_units() {
        assert!(is_library_unit(
            "wasisdk://v30.0/src/wasi-libc/libc-top-half/musl/src/thread/pthread_mutex_lock.c",
            "wasisdk://v30.0/build"
        ));
        assert!(is_library_unit(
            "/build/llvm-toolchain-19-x/libcxx/src/string.cpp",
            "/build"
        ));
        assert!(!is_library_unit("race_bank.c", "/work/main/targets"));
        assert!(!is_library_unit("/home/u/src/a.c", "/home/u"));
    }
}
