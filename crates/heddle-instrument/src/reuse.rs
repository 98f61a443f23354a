//! Whether an instance of a module can be reset and reused by later runs.
//!
//! An instance's state outside linear memory is its mutable globals, its
//! tables and its data and element segments. The rewriter exports every
//! mutable global (as [`GLOBAL_PREFIX`]`N`) but the budget global (which
//! the runtime sets whenever a thread starts), so the runtime can put them
//! back; tables and segments it cannot reset, so a module that changes them
//! after its start function (`table.set`/`grow`/`fill`/`copy`/`init`,
//! `elem.drop`, or `data.drop` outside the start function) gets a fresh
//! instance for every guest thread. (`memory.init` reads a segment without
//! changing it.) wasm-ld's output changes none of them: the start function
//! (`__wasm_init_memory`) copies the passive data segments and drops all
//! but the TLS image, which `__wasm_init_tls` copies for every thread; its
//! tables are filled by active element segments.

use anyhow::{Context, Result};
use wasmparser::{Operator, Parser, Payload};

/// Prefix of the export names under which the rewriter exports every
/// mutable global defined by the module (`heddle_global.7`).
pub const GLOBAL_PREFIX: &str = "heddle_global.";

/// Why instances of the original module `bytes` cannot be reused across
/// runs, or `None` when they can.
pub fn blocker(bytes: &[u8]) -> Result<Option<String>> {
    let mut start = None;
    let mut imported_funcs = 0u32;
    let mut body_index = 0u32;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.context("malformed WebAssembly module")? {
            Payload::ImportSection(r) => {
                for imp in r.into_imports() {
                    match imp?.ty {
                        wasmparser::TypeRef::Func(_) | wasmparser::TypeRef::FuncExact(_) => {
                            imported_funcs += 1
                        }
                        wasmparser::TypeRef::Global(_) => {
                            return Ok(Some("it imports a global".into()))
                        }
                        wasmparser::TypeRef::Table(_) => {
                            return Ok(Some("it imports a table".into()))
                        }
                        _ => {}
                    }
                }
            }
            Payload::StartSection { func, .. } => start = Some(func),
            Payload::CodeSectionEntry(body) => {
                let func = imported_funcs + body_index;
                body_index += 1;
                let in_start = start == Some(func);
                let mut ops = body.get_operators_reader()?;
                while !ops.eof() {
                    let what = match ops.read()? {
                        Operator::TableSet { .. } => "table.set",
                        Operator::TableGrow { .. } => "table.grow",
                        Operator::TableFill { .. } => "table.fill",
                        Operator::TableCopy { .. } => "table.copy",
                        Operator::TableInit { .. } => "table.init",
                        Operator::ElemDrop { .. } => "elem.drop",
                        Operator::DataDrop { .. } if !in_start => "data.drop",
                        _ => continue,
                    };
                    return Ok(Some(format!(
                        "function {func} uses {what}, which changes the instance's state"
                    )));
                }
            }
            _ => {}
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::blocker;

    fn wat(text: &str) -> Vec<u8> {
        wat::parse_str(text).expect("valid wat")
    }

    #[test]
    fn start_function_segments_are_reusable() {
        let m = wat(r#"(module
            (memory 1)
            (data $d "hi")
            (data $tls "t")
            (func $init (memory.init $d (i32.const 0) (i32.const 0) (i32.const 2)) (data.drop $d))
            (func (export "tls") (memory.init $tls (i32.const 8) (i32.const 0) (i32.const 1)))
            (start $init))"#);
        assert_eq!(blocker(&m).unwrap(), None);
    }

    #[test]
    fn segments_used_later_and_table_changes_are_not() {
        let m = wat(r#"(module
            (memory 1)
            (data $d "hi")
            (func (export "f") (data.drop $d)))"#);
        assert!(blocker(&m).unwrap().unwrap().contains("data.drop"));
        let m = wat(r#"(module
            (table 1 funcref)
            (func (export "f") (table.set (i32.const 0) (ref.null func))))"#);
        assert!(blocker(&m).unwrap().unwrap().contains("table.set"));
    }
}
