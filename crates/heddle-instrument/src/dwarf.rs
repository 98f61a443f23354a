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
    /// `file:line` with the file's last path component only.
    pub fn short(&self) -> String {
        format!("{}:{}", short_file(&self.file), self.line)
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

/// The name users know a symbol by: a mangled C++ (`_Z…`) or Rust (`_R…`,
/// legacy `_ZN…E`) name demangled, anything else as it is. Only mangled
/// names go through a demangler: C++'s takes a bare `f`, `g`, `w` or `x`
/// for the builtin type it encodes (`float`, `__float128`, …), and C names
/// are never mangled.
pub fn demangle(name: &str) -> String {
    let mangled = name.starts_with("_Z") || name.starts_with("_R") || name.starts_with("__Z");
    if !mangled {
        return display_name(name).to_string();
    }
    let d = addr2line::demangle_auto(std::borrow::Cow::Borrowed(name), None);
    display_name(&d).to_string()
}

/// The last path component of `path`.
pub fn short_file(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// One frame of a symbolized stack (innermost first when inlined).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// The function's name, demangled, when known.
    pub function: Option<String>,
    /// The source location, when known.
    pub loc: Option<Loc>,
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
            out.push(Frame { function, loc });
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
    pub fn is_user_function(&self, body: std::ops::Range<u64>) -> bool {
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
            Some((name, dir)) => !is_library_unit(&name, &dir),
            None => false,
        }
    }
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
            let _ = collect_globals(dwarf, &mut out);
        }
        out.sort_by(|a, b| (a.addr, &a.name).cmp(&(b.addr, &b.name)));
        out.dedup_by(|a, b| a.addr == b.addr && a.name == b.name);
        out
    }
}

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

fn collect_globals(dwarf: &gimli::Dwarf<Reader>, out: &mut Vec<GlobalVar>) -> gimli::Result<()> {
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
        if is_library_unit(&name, &dir) {
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
    ];
    let joined = format!("{dir}/{name}");
    MARKERS
        .iter()
        .any(|m| name.contains(m) || joined.contains(m))
        || name.starts_with("wasisdk:")
        || name.starts_with("/usr/lib/llvm")
        || name.starts_with("/usr/include/")
        || dir.starts_with("/usr/lib/llvm")
}

#[cfg(test)]
mod tests {
    use super::*;

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
