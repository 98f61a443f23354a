//! Calls to missing functions in a module linked with
//! `-Wl,--unresolved-symbols=ignore-all`.
//!
//! wasm-ld links each undefined function as a call to a stub whose body is
//! `unreachable`, one stub per signature, every one of them named
//! `undefined_stub`. So that a run's verdict can name what was called, the
//! driver links once more with `--unresolved-symbols=import-dynamic` (each
//! undefined function becomes an import from `env` under its own name and
//! signature), matches those imports to the stubs by signature, and renames
//! each stub in the module's name section `undefined:NAME` (`undefined:a|b`
//! when several missing functions share a signature, and so a stub). The
//! runtime turns a trap in such a function into `call to missing function
//! NAME`.

use anyhow::{Context, Result};
use wasmparser::{Parser, Payload, TypeRef, ValType};

/// wasm-ld's name for the stub of an undefined function.
pub const STUB: &str = "undefined_stub";

/// The prefix of a renamed stub's name.
pub const PREFIX: &str = "undefined:";

type Sig = (Vec<ValType>, Vec<ValType>);

/// Function types, `(module, name, signature)` of function imports, the
/// signature of every function (imports first) and the function names.
struct Facts {
    imports: Vec<(String, String, Sig)>,
    funcs: Vec<Sig>,
    names: Vec<(u32, String)>,
}

fn facts(bytes: &[u8]) -> Result<Facts> {
    let mut types: Vec<Sig> = Vec::new();
    let mut f = Facts {
        imports: Vec::new(),
        funcs: Vec::new(),
        names: Vec::new(),
    };
    let sig = |types: &[Sig], i: u32| types.get(i as usize).cloned().unwrap_or_default();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload? {
            Payload::TypeSection(reader) => {
                for ty in reader.into_iter_err_on_gc_types() {
                    let t = ty?;
                    types.push((t.params().to_vec(), t.results().to_vec()));
                }
            }
            Payload::ImportSection(reader) => {
                for imp in reader.into_imports() {
                    let imp = imp?;
                    if let TypeRef::Func(i) | TypeRef::FuncExact(i) = imp.ty {
                        let s = sig(&types, i);
                        f.funcs.push(s.clone());
                        f.imports
                            .push((imp.module.to_string(), imp.name.to_string(), s));
                    }
                }
            }
            Payload::FunctionSection(reader) => {
                for t in reader {
                    f.funcs.push(sig(&types, t?));
                }
            }
            _ => {}
        }
    }
    f.names = crate::modinfo::ModuleInfo::parse(bytes)?.function_names;
    Ok(f)
}

/// Whether the module has wasm-ld stubs for undefined functions.
pub fn has_stubs(bytes: &[u8]) -> bool {
    crate::modinfo::ModuleInfo::parse(bytes)
        .map(|m| m.function_names.iter().any(|(_, n)| n == STUB))
        .unwrap_or(false)
}

/// `module` with each `undefined_stub` renamed after the missing functions
/// of its signature, which `dynamic` (the same link with
/// `--unresolved-symbols=import-dynamic`) imports from `env`.
pub fn name_stubs(module: &[u8], dynamic: &[u8]) -> Result<Vec<u8>> {
    let m = facts(module)?;
    let d = facts(dynamic)?;
    let mut renames: Vec<(u32, String)> = Vec::new();
    for (index, name) in &m.names {
        if name != STUB {
            continue;
        }
        let Some(sig) = m.funcs.get(*index as usize) else {
            continue;
        };
        let missing: Vec<&str> = d
            .imports
            .iter()
            .filter(|(module, name, s)| {
                module == "env"
                    && s == sig
                    && !m
                        .imports
                        .iter()
                        .any(|(mm, mn, _)| mm == module && mn == name)
            })
            .map(|(_, name, _)| name.as_str())
            .collect();
        if !missing.is_empty() {
            renames.push((*index, format!("{PREFIX}{}", missing.join("|"))));
        }
    }
    if renames.is_empty() {
        return Ok(module.to_vec());
    }
    rename_functions(module, &renames)
}

fn leb(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn read_leb(bytes: &[u8], at: &mut usize) -> Result<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = *bytes.get(*at).context("truncated LEB128")?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
        shift += 7;
        if shift > 63 {
            anyhow::bail!("LEB128 too long");
        }
    }
}

fn name_bytes(s: &str, out: &mut Vec<u8>) {
    leb(s.len() as u64, out);
    out.extend_from_slice(s.as_bytes());
}

/// `module` with the function names of `renames` replaced in its name
/// section; every other byte is kept.
fn rename_functions(module: &[u8], renames: &[(u32, String)]) -> Result<Vec<u8>> {
    let mut out = module[..8].to_vec();
    let mut at = 8;
    while at < module.len() {
        let start = at;
        let id = module[at];
        at += 1;
        let size = read_leb(module, &mut at)? as usize;
        let body = module.get(at..at + size).context("truncated section")?;
        at += size;
        let mut p = 0;
        let is_name = id == 0 && {
            let len = read_leb(body, &mut p)? as usize;
            let is = body.get(p..p + len) == Some(b"name".as_slice());
            p += len;
            is
        };
        if !is_name {
            out.extend_from_slice(&module[start..at]);
            continue;
        }
        let mut payload = Vec::new();
        name_bytes("name", &mut payload);
        while p < body.len() {
            let sub = body[p];
            p += 1;
            let len = read_leb(body, &mut p)? as usize;
            let content = body.get(p..p + len).context("truncated name subsection")?;
            p += len;
            if sub != 1 {
                payload.push(sub);
                leb(len as u64, &mut payload);
                payload.extend_from_slice(content);
                continue;
            }
            let mut q = 0;
            let count = read_leb(content, &mut q)?;
            let mut names = Vec::new();
            leb(count, &mut names);
            for _ in 0..count {
                let index = read_leb(content, &mut q)?;
                let n = read_leb(content, &mut q)? as usize;
                let old = std::str::from_utf8(content.get(q..q + n).context("truncated name")?)?;
                q += n;
                let new = renames
                    .iter()
                    .find(|(i, _)| u64::from(*i) == index)
                    .map_or(old, |(_, s)| s.as_str());
                leb(index, &mut names);
                name_bytes(new, &mut names);
            }
            payload.push(1);
            leb(names.len() as u64, &mut payload);
            payload.extend_from_slice(&names);
        }
        out.push(0);
        leb(payload.len() as u64, &mut out);
        out.extend_from_slice(&payload);
    }
    Ok(out)
}

/// The missing functions a function named `name` stands for, if it is a
/// renamed stub.
pub fn missing_names(name: &str) -> Option<Vec<&str>> {
    name.strip_prefix(PREFIX).map(|s| s.split('|').collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renamed_stubs_list_their_functions() {
        assert_eq!(missing_names("undefined:a|b"), Some(vec!["a", "b"]));
        assert_eq!(missing_names("main"), None);
    }

    #[test]
    fn renaming_keeps_other_sections_and_names() {
        // A module with one function and a name section naming it.
        let mut m = wasm_encoder::Module::new();
        let mut types = wasm_encoder::TypeSection::new();
        types.ty().function([], []);
        m.section(&types);
        let mut funcs = wasm_encoder::FunctionSection::new();
        funcs.function(0);
        m.section(&funcs);
        let mut code = wasm_encoder::CodeSection::new();
        let mut f = wasm_encoder::Function::new([]);
        f.instruction(&wasm_encoder::Instruction::Unreachable);
        f.instruction(&wasm_encoder::Instruction::End);
        code.function(&f);
        m.section(&code);
        let mut names = wasm_encoder::NameSection::new();
        let mut map = wasm_encoder::NameMap::new();
        map.append(0, STUB);
        names.functions(&map);
        m.section(&names);
        let bytes = m.finish();
        let out = rename_functions(&bytes, &[(0, "undefined:gone".into())]).unwrap();
        let info = crate::modinfo::ModuleInfo::parse(&out).unwrap();
        assert_eq!(info.function_names, vec![(0, "undefined:gone".to_string())]);
        wasmparser::Validator::new().validate_all(&out).unwrap();
    }
}
