//! The instrumenter ([`heddle_instrument`], re-exported here whole: wasm
//! bytes in, instrumented wasm bytes plus a [`SiteTable`] out) and
//! [`instrument_cached`], which keeps its results in heddle's cache.

pub use heddle_instrument::*;

use crate::paths;
use anyhow::Result;
use std::fs;

/// [`instrument`] through the on-disk cache.
pub fn instrument_cached(bytes: &[u8], cfg: &Config) -> Result<Instrumented> {
    let key = paths::sha256_hex(
        format!(
            "heddle-instrument-{INSTRUMENTER_VERSION}\n{}\n{}",
            cfg.describe(),
            paths::sha256_hex(bytes)
        )
        .as_bytes(),
    );
    let dir = paths::cache_dir("instrumented")?;
    let wasm_path = dir.join(format!("{}.wasm", &key[..32]));
    let sites_path = dir.join(format!("{}.sites.json", &key[..32]));
    if let (Ok(module), Ok(text)) = (fs::read(&wasm_path), fs::read(&sites_path)) {
        if let Ok(sites) = serde_json::from_slice::<SiteTable>(&text) {
            if sites.instrumenter_version == INSTRUMENTER_VERSION {
                return Ok(Instrumented { module, sites });
            }
        }
    }
    let inst = instrument(bytes, cfg)?;
    paths::write_atomic(&sites_path, &serde_json::to_vec(&inst.sites)?)?;
    paths::write_atomic(&wasm_path, &inst.module)?;
    Ok(inst)
}

/// Function-pointer adapters ([`fnptr::adapter`]) run under wasmtime: the
/// callee sees the arguments, and the caller the results, that native ABIs
/// give a call through a pointer of another type.
#[cfg(test)]
mod fnptr_tests {
    use super::fnptr::{adapter, Sig};
    use wasm_encoder::{
        CodeSection, ExportKind, ExportSection, Function, FunctionSection, Instruction, Module,
        TypeSection,
    };
    use wasmparser::ValType;
    use wasmtime::{Engine, Instance, Store, Val};

    use ValType::{F32, F64, I32, I64};

    fn enc(t: ValType) -> wasm_encoder::ValType {
        wasm_encoder::ValType::try_from(t).expect("a numeric type")
    }

    /// A module with `callee` (type `to`, body `body`) and an adapter of type
    /// `from` calling it, exported as `a`; the adapter called with `args`.
    fn call(from: Sig, to: Sig, body: &[Instruction], args: &[Val]) -> Vec<Val> {
        let mut types = TypeSection::new();
        for (p, r) in [&to, &from] {
            types.ty().function(
                p.iter().map(|&t| enc(t)).collect::<Vec<_>>(),
                r.iter().map(|&t| enc(t)).collect::<Vec<_>>(),
            );
        }
        let mut funcs = FunctionSection::new();
        funcs.function(0).function(1);
        let mut exports = ExportSection::new();
        exports.export("a", ExportKind::Func, 1);
        let mut code = CodeSection::new();
        let mut f = Function::new([]);
        for i in body {
            f.instruction(i);
        }
        f.instruction(&Instruction::End);
        code.function(&f);
        code.function(&adapter(&from, &to, 0).expect("adaptable"));
        let mut m = Module::new();
        m.section(&types)
            .section(&funcs)
            .section(&exports)
            .section(&code);
        let bytes = m.finish();
        wasmparser::Validator::new()
            .validate_all(&bytes)
            .expect("valid adapter");
        let engine = Engine::default();
        let module = wasmtime::Module::new(&engine, &bytes).unwrap();
        let mut store = Store::new(&engine, ());
        let inst = Instance::new(&mut store, &module, &[]).unwrap();
        let a = inst.get_func(&mut store, "a").unwrap();
        let mut out = vec![Val::I32(0); from.1.len()];
        a.call(&mut store, args, &mut out).unwrap();
        out
    }

    fn i32s(v: &[Val]) -> Vec<i32> {
        v.iter().map(|x| x.unwrap_i32()).collect()
    }

    /// `a * 10 + b`.
    fn ab() -> Vec<Instruction<'static>> {
        vec![
            Instruction::LocalGet(0),
            Instruction::I32Const(10),
            Instruction::I32Mul,
            Instruction::LocalGet(1),
            Instruction::I32Add,
        ]
    }

    #[test]
    fn extra_arguments_are_dropped_and_missing_ones_are_zero() {
        let to = (vec![I32, I32], vec![I32]);
        let r = call(
            (vec![I32, I32, I32], vec![I32]),
            to.clone(),
            &ab(),
            &[Val::I32(1), Val::I32(2), Val::I32(99)],
        );
        assert_eq!(i32s(&r), [12]);
        let r = call((vec![I32], vec![I32]), to, &ab(), &[Val::I32(5)]);
        assert_eq!(i32s(&r), [50]);
    }

    #[test]
    fn a_missing_result_is_zero_and_an_extra_one_is_dropped() {
        // `void f()` called as `void *(*)(void *)`: a thread start routine.
        let r = call(
            (vec![I32], vec![I32]),
            (vec![], vec![]),
            &[],
            &[Val::I32(7)],
        );
        assert_eq!(i32s(&r), [0]);
        // `int f(int)` called as `void (*)(int)`.
        let r = call(
            (vec![I32], vec![]),
            (vec![I32], vec![I32]),
            &[Instruction::LocalGet(0)],
            &[Val::I32(7)],
        );
        assert!(r.is_empty());
    }

    #[test]
    fn integers_wrap_and_sign_extend() {
        // An i64 argument to an i32 parameter wraps; the i32 result sign-extends.
        let r = call(
            (vec![I64], vec![I64]),
            (vec![I32], vec![I32]),
            &[Instruction::LocalGet(0)],
            &[Val::I64(0x1_0000_0005)],
        );
        assert_eq!(r[0].unwrap_i64(), 5);
        let r = call(
            (vec![I64], vec![I64]),
            (vec![I32], vec![I32]),
            &[Instruction::LocalGet(0)],
            &[Val::I64(0xffff_ffff)],
        );
        assert_eq!(r[0].unwrap_i64(), -1);
        let r = call(
            (vec![I32], vec![I32]),
            (vec![I64], vec![I64]),
            &[Instruction::LocalGet(0)],
            &[Val::I32(-3)],
        );
        assert_eq!(i32s(&r), [-3]);
    }

    #[test]
    fn floats_convert_and_int_float_mixes_are_zero() {
        // f64 -> f32 argument, f64 result -> f32.
        let r = call(
            (vec![F64], vec![F32]),
            (vec![F32], vec![F64]),
            &[
                Instruction::LocalGet(0),
                Instruction::F64PromoteF32,
                Instruction::F64Const(2.0f64.into()),
                Instruction::F64Mul,
            ],
            &[Val::F64(1.5f64.to_bits())],
        );
        assert_eq!(r[0].unwrap_f32(), 3.0);
        // An integer where a float is expected: the callee sees 0.0; its
        // float result where an integer is expected reads as zero.
        let r = call(
            (vec![I32], vec![I32]),
            (vec![F64], vec![F64]),
            &[
                Instruction::LocalGet(0),
                Instruction::F64Const(1.0f64.into()),
                Instruction::F64Add,
            ],
            &[Val::I32(41)],
        );
        assert_eq!(i32s(&r), [0]);
        let r = call(
            (vec![F32], vec![F64]),
            (vec![I32], vec![I32]),
            &[
                Instruction::LocalGet(0),
                Instruction::I32Const(1),
                Instruction::I32Add,
            ],
            &[Val::F32(2.5f32.to_bits())],
        );
        assert_eq!(r[0].unwrap_f64(), 0.0);
    }
}
