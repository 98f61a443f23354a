//! Function-pointer casts as on native targets.
//!
//! C lets a program call a function through a pointer of another type (a
//! prototype-less `void worker()` passed to `pthread_create`, a callback
//! table of mixed signatures), and native ABIs tolerate it: extra arguments
//! are ignored, missing ones are whatever the registers hold. WebAssembly's
//! `call_indirect` traps instead ("indirect call type mismatch"), and a
//! direct call with another signature makes wasm-ld link a
//! `signature_mismatch:NAME` stub that traps.
//!
//! The rewriter makes both behave natively:
//!
//! * For each type `U` that a `call_indirect` on the function table uses, and
//!   for which some table entry has another type, the module gets a copy
//!   `T_U` of the table: entry `i` of `T_U` is entry `i` of the original
//!   table when its type is `U`, and otherwise an *adapter* of type `U` that
//!   calls it ([`adapter`]). The copies are regions of one added table (so a
//!   module has two tables however many types it calls through): `T_U`
//!   starts at `base(U) = k * size`. Every `call_indirect U` on the original
//!   table calls entry `i < size ? base(U) + i : -1` of the added table (an
//!   index out of the original table's bounds still traps as out of
//!   bounds). Entries an adapter cannot reach (vector or reference
//!   parameters) stay as they are and trap as before.
//! * A `signature_mismatch:NAME` stub's body becomes an adapter that calls
//!   `NAME`'s definition (found through the name section).
//!
//! An adapter passes the arguments it has, converted to the callee's types
//! (`i32`→`i64` sign-extends, `i64`→`i32` wraps, `f32`↔`f64` converts, an
//! integer where a float is expected or the reverse becomes zero), zero for
//! arguments the callee expects but the caller did not pass, and drops the
//! rest; results likewise (a missing result is zero).
//!
//! Adapters are appended after the module's own functions, so no original
//! function index, site or code offset changes, and they contain no yield
//! point: a call through one is the call it adapts. The tables are
//! initialised by the active element segments wasm-ld emits; a module that
//! changes its table at run time (`table.set`, `table.grow`, `table.init`,
//! `table.copy`, `table.fill`), imports it, or initialises it otherwise is
//! left untouched ([`Plan::skipped`] says why).

use anyhow::{bail, Result};
use std::collections::{BTreeMap, BTreeSet};
use wasm_encoder::{Function, Instruction, ValType as EncType};
use wasmparser::{
    ElementItems, ElementKind, KnownCustom, Name, Operator, Parser, Payload, TypeRef, ValType,
};

/// The most entries the added table may have (the runtime's pool reserves
/// tables of this size).
pub const MAX_ADDED_ENTRIES: u64 = 1 << 16;

/// A function signature: parameter and result types.
pub type Sig = (Vec<ValType>, Vec<ValType>);

/// One adapter function appended to the module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thunk {
    /// Its type (a type index of the original module: the `call_indirect`'s).
    pub ty: u32,
    /// The function it calls (original index).
    pub callee: u32,
}

/// An adapted copy of the function table for one `call_indirect` type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdaptedTable {
    /// The `call_indirect` type.
    pub ty: u32,
    /// Per original element segment, its entries: `Ok(original function)`
    /// or `Err(thunk number)`.
    pub segments: Vec<Vec<std::result::Result<u32, u32>>>,
}

/// What the rewriter does about function-pointer casts in one module.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Why indirect calls are left untouched, when they are.
    pub skipped: Option<String>,
    /// The original table's limits (`initial`, `maximum`).
    pub limits: (u64, Option<u64>),
    /// The number of tables the original module has.
    pub num_tables: u32,
    /// Offsets of the original table's element segments.
    pub offsets: Vec<i32>,
    /// The adapted tables, in type order; the `k`th is the region of the
    /// added table (index `num_tables`) that starts at `k * size`.
    pub tables: Vec<AdaptedTable>,
    /// The adapters, in order: thunk `j` is appended as the `j`th function
    /// after the module's own.
    pub thunks: Vec<Thunk>,
    /// `signature_mismatch:NAME` stubs (original index) whose body becomes
    /// an adapter calling `NAME` (original index).
    pub stubs: BTreeMap<u32, u32>,
}

impl Plan {
    /// The size of the original table (and of each region).
    pub fn size(&self) -> u32 {
        self.limits.0 as u32
    }

    /// Where the region for `call_indirect` type `ty` starts in the added
    /// table.
    pub fn base_for(&self, ty: u32) -> Option<u32> {
        self.tables
            .iter()
            .position(|t| t.ty == ty)
            .map(|k| k as u32 * self.size())
    }

    /// The size of the added table.
    pub fn added_len(&self) -> u64 {
        self.tables.len() as u64 * self.limits.0
    }
}

/// The facts about the original module the plan needs.
pub struct Facts<'a> {
    /// Every function type, by type index.
    pub types: &'a [Sig],
    /// Type index of each function (imported, then defined).
    pub func_types: &'a [u32],
    /// Function names from the `name` section, by function index.
    pub func_names: &'a BTreeMap<u32, String>,
    /// Exported functions by export name: a definition whose symbol is an
    /// alias (`pthread_create` for `__pthread_create`) is found here once
    /// the link keeps it with `--export-if-defined`.
    pub func_exports: &'a BTreeMap<String, u32>,
}

impl Facts<'_> {
    fn sig_of_func(&self, f: u32) -> Option<&Sig> {
        self.types.get(*self.func_types.get(f as usize)? as usize)
    }
}

/// The instructions that turn a value of type `from` on the stack into one
/// of type `to`, or `None` when no conversion exists.
pub fn convert(from: ValType, to: ValType) -> Option<Vec<Instruction<'static>>> {
    use ValType as V;
    if from == to {
        return Some(Vec::new());
    }
    Some(match (from, to) {
        (V::I32, V::I64) => vec![Instruction::I64ExtendI32S],
        (V::I64, V::I32) => vec![Instruction::I32WrapI64],
        (V::F32, V::F64) => vec![Instruction::F64PromoteF32],
        (V::F64, V::F32) => vec![Instruction::F32DemoteF64],
        (V::I32 | V::I64 | V::F32 | V::F64, V::I32 | V::I64 | V::F32 | V::F64) => {
            vec![Instruction::Drop, zero(to)?]
        }
        _ => return None,
    })
}

/// The zero of a numeric type.
pub fn zero(t: ValType) -> Option<Instruction<'static>> {
    Some(match t {
        ValType::I32 => Instruction::I32Const(0),
        ValType::I64 => Instruction::I64Const(0),
        ValType::F32 => Instruction::F32Const(0.0f32.into()),
        ValType::F64 => Instruction::F64Const(0.0f64.into()),
        ValType::V128 => Instruction::V128Const(0),
        ValType::Ref(_) => return None,
    })
}

fn enc(t: ValType) -> EncType {
    match t {
        ValType::I32 => EncType::I32,
        ValType::I64 => EncType::I64,
        ValType::F32 => EncType::F32,
        ValType::F64 => EncType::F64,
        ValType::V128 => EncType::V128,
        // Adapters never involve reference types (see `adaptable`).
        ValType::Ref(_) => EncType::FUNCREF,
    }
}

/// Whether a caller of type `from` can reach a callee of type `to`.
pub fn adaptable(from: &Sig, to: &Sig) -> bool {
    adapter(from, to, 0).is_some()
}

/// The body of a function of type `from` that calls function `callee` of
/// type `to`, converting arguments and results (see the module comment).
pub fn adapter(from: &Sig, to: &Sig, callee: u32) -> Option<Function> {
    let (from_params, from_results) = from;
    let (to_params, to_results) = to;
    let mut code: Vec<Instruction<'static>> = Vec::new();
    for (i, &want) in to_params.iter().enumerate() {
        match from_params.get(i) {
            Some(&have) => {
                code.push(Instruction::LocalGet(i as u32));
                code.extend(convert(have, want)?);
            }
            None => code.push(zero(want)?),
        }
    }
    code.push(Instruction::Call(callee));
    // The callee's results go to locals (last on top), then the caller's
    // are pushed from them.
    let base = from_params.len() as u32;
    for (j, _) in to_results.iter().enumerate().rev() {
        code.push(Instruction::LocalSet(base + j as u32));
    }
    for (j, &want) in from_results.iter().enumerate() {
        match to_results.get(j) {
            Some(&have) => {
                code.push(Instruction::LocalGet(base + j as u32));
                code.extend(convert(have, want)?);
            }
            None => code.push(zero(want)?),
        }
    }
    // Extra parameters the callee does not take are dropped by not reading
    // them; their types only need to exist.
    if from_params
        .iter()
        .chain(from_results)
        .chain(to_params)
        .chain(to_results)
        .any(|t| matches!(t, ValType::Ref(_)))
    {
        return None;
    }
    let locals: Vec<(u32, EncType)> = to_results.iter().map(|&t| (1, enc(t))).collect();
    let mut f = Function::new(locals);
    for i in &code {
        f.instruction(i);
    }
    f.instruction(&Instruction::End);
    Some(f)
}

/// `(i32, i64) -> f64`.
pub fn describe_sig(sig: &Sig) -> String {
    let list = |v: &[ValType]| {
        v.iter()
            .map(|t| format!("{t}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match sig.1.len() {
        0 => format!("({}) -> ()", list(&sig.0)),
        1 => format!("({}) -> {}", list(&sig.0), list(&sig.1)),
        _ => format!("({}) -> ({})", list(&sig.0), list(&sig.1)),
    }
}

/// The `signature_mismatch:NAME` stubs of a module, each with `NAME`'s
/// definition: `(stub index, target index)`, or a one-line error naming a
/// stub that cannot be adapted (its function undefined, or a signature pair
/// no adapter converts).
pub fn stub_targets(facts: &Facts) -> Result<BTreeMap<u32, u32>> {
    let mut by_name: BTreeMap<&str, u32> = BTreeMap::new();
    for (&i, n) in facts.func_names {
        by_name.entry(n.as_str()).or_insert(i);
    }
    for (n, &i) in facts.func_exports {
        by_name.entry(n.as_str()).or_insert(i);
    }
    let mut out = BTreeMap::new();
    for (&stub, n) in facts.func_names {
        let Some(target) = n.strip_prefix("signature_mismatch:") else {
            continue;
        };
        let Some(&t) = by_name.get(target) else {
            bail!("`{target}` is called with another signature than its definition's, and the module has no definition of it to adapt the call to (link with -Wl,--export-if-defined={target} to keep it)");
        };
        let (Some(from), Some(to)) = (facts.sig_of_func(stub), facts.sig_of_func(t)) else {
            bail!("`{target}`: function types out of range");
        };
        if !adaptable(from, to) {
            bail!(
                "`{target}` is called as {} but defined as {}; heddle cannot adapt the call (vector or reference types)",
                describe_sig(from),
                describe_sig(to)
            );
        }
        out.insert(stub, t);
    }
    Ok(out)
}

/// Plans the adapted tables and stubs for the module `bytes` (already
/// validated by the caller's parse).
pub fn plan(bytes: &[u8], facts: &Facts) -> Result<Plan> {
    let mut plan = Plan {
        stubs: stub_targets(facts).unwrap_or_default(),
        ..Plan::default()
    };
    let mut segments: Vec<(i32, Vec<u32>)> = Vec::new();
    let mut used: BTreeSet<u32> = BTreeSet::new();
    let skip = |plan: &mut Plan, why: String| {
        if plan.skipped.is_none() {
            plan.skipped = Some(why);
        }
    };
    for p in Parser::new(0).parse_all(bytes) {
        match p? {
            Payload::ImportSection(r) => {
                for imp in r.into_imports() {
                    if let TypeRef::Table(_) = imp?.ty {
                        plan.num_tables += 1;
                        skip(&mut plan, "the function table is imported".into());
                    }
                }
            }
            Payload::TableSection(r) => {
                for (i, t) in r.into_iter().enumerate() {
                    let t = t?;
                    if i == 0 && plan.num_tables == 0 {
                        if t.ty.table64 || t.ty.element_type != wasmparser::RefType::FUNCREF {
                            skip(&mut plan, "table 0 is not a 32-bit funcref table".into());
                        }
                        if !matches!(t.init, wasmparser::TableInit::RefNull) {
                            skip(&mut plan, "table 0 has an initialiser expression".into());
                        }
                        plan.limits = (t.ty.initial, t.ty.maximum);
                    }
                    plan.num_tables += 1;
                }
            }
            Payload::ElementSection(r) => {
                for e in r {
                    let e = e?;
                    match e.kind {
                        ElementKind::Declared => {}
                        ElementKind::Passive => {
                            skip(&mut plan, "the module has a passive element segment".into())
                        }
                        ElementKind::Active {
                            table_index,
                            offset_expr,
                        } => {
                            if table_index.unwrap_or(0) != 0 {
                                continue;
                            }
                            let mut ops = offset_expr.get_operators_reader();
                            let offset = match (ops.read(), ops.read()) {
                                (Ok(Operator::I32Const { value }), Ok(Operator::End)) => value,
                                _ => {
                                    skip(
                                        &mut plan,
                                        "an element segment's offset is not a constant".into(),
                                    );
                                    continue;
                                }
                            };
                            let mut funcs = Vec::new();
                            match e.items {
                                ElementItems::Functions(r) => {
                                    for f in r {
                                        funcs.push(f?);
                                    }
                                }
                                ElementItems::Expressions(..) => {
                                    skip(&mut plan, "an element segment holds expressions".into())
                                }
                            }
                            segments.push((offset, funcs));
                        }
                    }
                }
            }
            Payload::CodeSectionEntry(body) => {
                let mut r = body.get_operators_reader()?;
                while !r.eof() {
                    match r.read()? {
                        Operator::CallIndirect {
                            type_index,
                            table_index: 0,
                        }
                        | Operator::ReturnCallIndirect {
                            type_index,
                            table_index: 0,
                        } => {
                            used.insert(type_index);
                        }
                        Operator::TableSet { table: 0 } => {
                            skip(&mut plan, "the module changes its table (table.set)".into())
                        }
                        Operator::TableGrow { table: 0 } => {
                            skip(&mut plan, "the module grows its table (table.grow)".into())
                        }
                        Operator::TableFill { table: 0 } => skip(
                            &mut plan,
                            "the module changes its table (table.fill)".into(),
                        ),
                        Operator::TableInit { table: 0, .. } => skip(
                            &mut plan,
                            "the module changes its table (table.init)".into(),
                        ),
                        Operator::TableCopy { dst_table: 0, .. } => skip(
                            &mut plan,
                            "the module changes its table (table.copy)".into(),
                        ),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if plan.skipped.is_some() || plan.num_tables == 0 {
        return Ok(plan);
    }
    let mut thunk_of: BTreeMap<(u32, u32), u32> = BTreeMap::new();
    for &ty in &used {
        let Some(want) = facts.types.get(ty as usize) else {
            continue;
        };
        let mut any = false;
        let mut table = AdaptedTable {
            ty,
            segments: Vec::new(),
        };
        for (_, funcs) in &segments {
            let mut entries = Vec::with_capacity(funcs.len());
            for &f in funcs {
                let entry = match facts.sig_of_func(f) {
                    Some(have) if have != want && adaptable(want, have) => {
                        any = true;
                        let next = thunk_of.len() as u32;
                        let j = *thunk_of.entry((ty, f)).or_insert_with(|| {
                            plan.thunks.push(Thunk { ty, callee: f });
                            next
                        });
                        Err(j)
                    }
                    _ => Ok(f),
                };
                entries.push(entry);
            }
            table.segments.push(entries);
        }
        if any {
            plan.tables.push(table);
        }
    }
    if plan.added_len() > MAX_ADDED_ENTRIES {
        return Ok(Plan {
            skipped: Some(format!(
                "the adapted tables would hold {} entries (at most {MAX_ADDED_ENTRIES})",
                plan.added_len()
            )),
            stubs: plan.stubs,
            ..Plan::default()
        });
    }
    if plan.tables.is_empty() {
        plan.thunks.clear();
    }
    plan.offsets = segments.iter().map(|s| s.0).collect();
    Ok(plan)
}

/// A name for thunk `t` in the name section.
pub fn thunk_name(t: &Thunk, facts: &Facts) -> String {
    let callee = facts
        .func_names
        .get(&t.callee)
        .cloned()
        .unwrap_or_else(|| format!("func[{}]", t.callee));
    match facts.types.get(t.ty as usize) {
        Some(sig) => format!("heddle_cast_adapter:{callee} as {}", describe_sig(sig)),
        None => format!("heddle_cast_adapter:{callee}"),
    }
}

/// [`Facts`] read from a module on their own ([`module_facts`]).
pub struct OwnedFacts {
    /// Every function type, by type index.
    pub types: Vec<Sig>,
    /// Type index of each function (imported, then defined).
    pub func_types: Vec<u32>,
    /// Function names from the `name` section, by function index.
    pub func_names: BTreeMap<u32, String>,
    /// Exported functions, by export name.
    pub func_exports: BTreeMap<String, u32>,
}

impl OwnedFacts {
    /// The borrowed view the plan takes.
    pub fn facts(&self) -> Facts<'_> {
        Facts {
            types: &self.types,
            func_types: &self.func_types,
            func_names: &self.func_names,
            func_exports: &self.func_exports,
        }
    }
}

/// Parses the signatures and names [`stub_targets`] needs from `bytes`.
pub fn module_facts(bytes: &[u8]) -> Result<OwnedFacts> {
    let mut types = Vec::new();
    let mut func_types = Vec::new();
    let mut names = BTreeMap::new();
    let mut func_exports = BTreeMap::new();
    for p in Parser::new(0).parse_all(bytes) {
        match p? {
            Payload::TypeSection(r) => {
                for ty in r.into_iter_err_on_gc_types() {
                    let ty = ty?;
                    types.push((ty.params().to_vec(), ty.results().to_vec()));
                }
            }
            Payload::ImportSection(r) => {
                for imp in r.into_imports() {
                    if let TypeRef::Func(t) | TypeRef::FuncExact(t) = imp?.ty {
                        func_types.push(t);
                    }
                }
            }
            Payload::FunctionSection(r) => {
                for t in r {
                    func_types.push(t?);
                }
            }
            Payload::ExportSection(r) => {
                for e in r {
                    let e = e?;
                    if e.kind == wasmparser::ExternalKind::Func {
                        func_exports.insert(e.name.to_string(), e.index);
                    }
                }
            }
            Payload::CustomSection(c) => {
                if let KnownCustom::Name(ns) = c.as_known() {
                    for n in ns.into_iter().flatten() {
                        if let Name::Function(map) = n {
                            for naming in map.into_iter().flatten() {
                                names.insert(naming.index, naming.name.to_string());
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(OwnedFacts {
        types,
        func_types,
        func_names: names,
        func_exports,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use ValType::{F64, I32, I64};

    #[test]
    fn reference_and_vector_mixes_are_not_adaptable() {
        let fr = ValType::Ref(wasmparser::RefType::FUNCREF);
        assert!(!adaptable(&(vec![fr], vec![]), &(vec![I32], vec![])));
        assert!(!adaptable(&(vec![I32], vec![]), &(vec![fr], vec![])));
        assert!(!adaptable(
            &(vec![ValType::V128], vec![]),
            &(vec![I32], vec![])
        ));
        // A vector the caller does not pass is zero.
        assert!(adaptable(&(vec![], vec![]), &(vec![ValType::V128], vec![])));
        assert!(adaptable(&(vec![I32, F64], vec![]), &(vec![], vec![I64])));
    }

    #[test]
    fn signatures_read_like_wat() {
        assert_eq!(
            describe_sig(&(vec![I32, I64], vec![F64])),
            "(i32, i64) -> f64"
        );
        assert_eq!(describe_sig(&(vec![], vec![])), "() -> ()");
        assert_eq!(
            describe_sig(&(vec![I32], vec![I32, I32])),
            "(i32) -> (i32, i32)"
        );
    }

    #[test]
    fn an_unadaptable_stub_is_one_line_naming_both_signatures() {
        let fr = ValType::Ref(wasmparser::RefType::FUNCREF);
        let types = vec![(vec![I32], vec![I32]), (vec![fr], vec![I32])];
        let func_types = vec![1, 0];
        let mut names = BTreeMap::new();
        names.insert(0, "cb".to_string());
        names.insert(1, "signature_mismatch:cb".to_string());
        let facts = Facts {
            types: &types,
            func_types: &func_types,
            func_names: &names,
            func_exports: &BTreeMap::new(),
        };
        let e = stub_targets(&facts).unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        assert!(
            e.contains("`cb`") && e.contains("(i32) -> i32") && e.contains("(funcref) -> i32"),
            "{e}"
        );
        // Numeric signatures always adapt.
        let types = vec![(vec![I32], vec![I32]), (vec![I32, I32], vec![])];
        let facts = Facts {
            types: &types,
            func_types: &func_types,
            func_names: &names,
            func_exports: &BTreeMap::new(),
        };
        assert_eq!(
            stub_targets(&facts)
                .unwrap()
                .into_iter()
                .collect::<Vec<_>>(),
            [(1, 0)]
        );
    }
}
