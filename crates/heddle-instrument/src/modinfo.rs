//! A quick structural look at a wasm module: imports, exports, memory and
//! function names. Used to check a module before anything else touches it, so
//! that bad input gets a one-line error naming the problem.

use anyhow::{bail, Context, Result};
use wasmparser::{ExternalKind, KnownCustom, Name, Parser, Payload, TypeRef};

/// What an import is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportKind {
    /// A function.
    Func {
        /// Its type index.
        type_index: u32,
    },
    /// A linear memory.
    Memory {
        /// Whether it is shared (threads).
        shared: bool,
        /// Its minimum size in pages.
        min_pages: u64,
        /// Its maximum size in pages, if any.
        max_pages: Option<u64>,
        /// Whether it is a 64-bit memory.
        memory64: bool,
    },
    /// A table.
    Table,
    /// A global.
    Global,
    /// An exception tag.
    Tag,
}

#[derive(Debug, Clone, PartialEq, Eq)]
/// One import of a module.
pub struct Import {
    /// The module it is imported from.
    pub module: String,
    /// Its name.
    pub name: String,
    /// What it is.
    pub kind: ImportKind,
}

/// Structural facts about a module.
#[derive(Debug, Clone, Default)]
pub struct ModuleInfo {
    /// The imports, in order.
    pub imports: Vec<Import>,
    /// `(name, kind, index)`.
    pub exports: Vec<(String, ExternalKind, u32)>,
    /// Function names from the `name` section, by function index.
    pub function_names: Vec<(u32, String)>,
    /// Memories defined (not imported) by the module.
    pub defined_memories: u32,
    /// Whether the module has DWARF debug info.
    pub has_debug_info: bool,
    /// A relocatable object file (`clang -c` output, with a `linking`
    /// section), not a linked module.
    pub is_object: bool,
}

/// Weak symbols that wasi-libc declares and leaves undefined on purpose: it
/// compares their address with null before calling, so their stub never runs.
/// `__wasilibc_find_relpath_alloc` is defined only when `chdir` is linked in;
/// without it, path lookups (`fopen`, `open`, `stat`) use the preopens alone.
pub const BENIGN_WEAK: &[&str] = &[
    "__wasilibc_futex_wait_maybe_busy",
    "__wasilibc_find_relpath_alloc",
];

/// The WebAssembly magic number and version 1.
const WASM_HEADER: &[u8] = b"\0asm\x01\0\0\0";

impl ModuleInfo {
    /// Parses `bytes`. A file that is not a wasm module at all gets an error
    /// saying so; a truncated or malformed one an error with the offset.
    pub fn parse(bytes: &[u8]) -> Result<ModuleInfo> {
        if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
            bail!("not a WebAssembly module (no \\0asm header)");
        }
        if &bytes[..8] != WASM_HEADER {
            bail!("not a core WebAssembly module (a component or an unsupported version)");
        }
        let mut info = ModuleInfo::default();
        for payload in Parser::new(0).parse_all(bytes) {
            match payload.context("malformed WebAssembly module")? {
                Payload::ImportSection(reader) => {
                    for imp in reader.into_imports() {
                        let imp = imp.context("malformed import section")?;
                        let kind = match imp.ty {
                            TypeRef::Func(i) | TypeRef::FuncExact(i) => {
                                ImportKind::Func { type_index: i }
                            }
                            TypeRef::Memory(m) => ImportKind::Memory {
                                shared: m.shared,
                                min_pages: m.initial,
                                max_pages: m.maximum,
                                memory64: m.memory64,
                            },
                            TypeRef::Table(_) => ImportKind::Table,
                            TypeRef::Global(_) => ImportKind::Global,
                            TypeRef::Tag(_) => ImportKind::Tag,
                        };
                        info.imports.push(Import {
                            module: imp.module.to_string(),
                            name: imp.name.to_string(),
                            kind,
                        });
                    }
                }
                Payload::MemorySection(reader) => info.defined_memories += reader.count(),
                Payload::ExportSection(reader) => {
                    for e in reader {
                        let e = e.context("malformed export section")?;
                        info.exports.push((e.name.to_string(), e.kind, e.index));
                    }
                }
                Payload::CustomSection(c) => {
                    if c.name().starts_with(".debug_") {
                        info.has_debug_info = true;
                    }
                    if c.name() == "linking" {
                        info.is_object = true;
                    }
                    if let KnownCustom::Name(names) = c.as_known() {
                        for n in names.into_iter().flatten() {
                            if let Name::Function(map) = n {
                                for naming in map.into_iter().flatten() {
                                    info.function_names
                                        .push((naming.index, naming.name.to_string()));
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(info)
    }

    /// The imported memory `env.memory`, if any.
    pub fn imported_memory(&self) -> Option<&ImportKind> {
        self.imports
            .iter()
            .find(|i| matches!(i.kind, ImportKind::Memory { .. }))
            .map(|i| &i.kind)
    }

    /// Whether it imports the function `module.name`.
    pub fn imports_func(&self, module: &str, name: &str) -> bool {
        self.imports.iter().any(|i| {
            i.module == module && i.name == name && matches!(i.kind, ImportKind::Func { .. })
        })
    }

    /// Whether it exports a function named `name`.
    pub fn exports_func(&self, name: &str) -> bool {
        self.exports
            .iter()
            .any(|(n, k, _)| n == name && *k == ExternalKind::Func)
    }

    /// Whether memory `index` is exported as `name`.
    pub fn exports_memory(&self, name: &str, index: u32) -> bool {
        self.exports
            .iter()
            .any(|(n, k, i)| n == name && *k == ExternalKind::Memory && *i == index)
    }

    /// wasm-ld's trap stubs (`signature_mismatch:*`, `undefined_weak:*`),
    /// except those for optional hooks that wasi-libc tests for null before
    /// calling ([`BENIGN_WEAK`]).
    pub fn trap_stubs(&self) -> Vec<String> {
        self.function_names
            .iter()
            .filter(|(_, n)| {
                n.starts_with("signature_mismatch:")
                    || n.strip_prefix("undefined_weak:")
                        .is_some_and(|sym| !BENIGN_WEAK.contains(&sym))
            })
            .map(|(_, n)| n.clone())
            .collect()
    }

    /// The first trap stub that would trap at run time: one for an
    /// undefined weak symbol. `signature_mismatch:` stubs are not among
    /// them: the instrumentation turns them into adapters
    /// ([`crate::adaptable_stubs`] checks that it can).
    pub fn fatal_trap_stub(&self) -> Option<String> {
        self.trap_stubs()
            .into_iter()
            .find(|s| !s.starts_with("signature_mismatch:"))
    }

    /// Checks that this is a module heddle can run as a threaded program:
    /// it imports one shared memory and exports `_start` (and
    /// `wasi_thread_start` when it can spawn threads).
    pub fn check_runnable(&self) -> Result<()> {
        match self.imported_memory() {
            None if self.defined_memories > 0 => bail!(
                "module defines its own memory instead of importing a shared one: it was not built for wasm32-wasip1-threads (build it with `heddle cc`)"
            ),
            None => bail!("module has no memory import: it was not built for wasm32-wasip1-threads (build it with `heddle cc`)"),
            Some(ImportKind::Memory { shared: false, .. }) => bail!(
                "module's memory is not shared: it was not built with threads (build it with `heddle cc`, which passes -pthread)"
            ),
            Some(ImportKind::Memory { memory64: true, .. }) => {
                bail!("module uses 64-bit memory, which heddle does not support")
            }
            _ => {}
        }
        if !self.exports_func("_start") {
            bail!(
                "module does not export `_start`: heddle runs command modules (a `main` program)"
            );
        }
        if self.imports_func("wasi", "thread-spawn") && !self.exports_func("wasi_thread_start") {
            bail!("module imports wasi.thread-spawn but does not export `wasi_thread_start`");
        }
        if let Some(stub) = self.fatal_trap_stub() {
            bail!("module contains the wasm-ld trap stub `{stub}`: it traps at run time for a reason unrelated to concurrency");
        }
        Ok(())
    }
}
