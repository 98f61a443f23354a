//! Copies of synchronisation wrappers, one per call the program makes to
//! one.
//!
//! At `-O0` a C++ `x.load()` or a Rust `x.fetch_add(1, …)` or `m.lock()` is
//! a call to an out-of-line function of libc++'s `<atomic>` or Rust's
//! `core::sync::atomic` or `std::sync` ([`dwarf::is_sync_wrapper_file`]),
//! which calls
//! the next wrapper down until one holds the atomic instruction. Its DWARF
//! line is the wrapper's, so the operation would be the library's, while at
//! `-O2` the same operation is inlined into the program's function at the
//! program's line. So that both builds have the same decision at the same
//! line, each call from the program's code to a wrapper gets a copy of the
//! wrappers it reaches, whose synchronisation operations are the program's
//! at the calling line; calls from library code keep the original.
//!
//! The plan is worked out before the module is rewritten: the copies'
//! types go in the function section, their bodies after every other
//! function.

use crate::dwarf::{self, DebugInfo, Frame, Owner};
use crate::Filters;
use anyhow::Result;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use wasmparser::{Operator, Parser, Payload};

/// Most copies a module gets (beyond that, operations stay the library's).
pub const MAX_COPIES: usize = 20_000;

/// One copy of a wrapper.
#[derive(Debug, Clone)]
pub struct Copy {
    /// The wrapper copied (index in the original module).
    pub wrapper: u32,
    /// The frame of the program's that asked for its operations.
    pub asked_at: Frame,
    /// Its calls to other wrappers, redirected: original offset of the call
    /// → the function index (in the instrumented module) of their copy.
    pub redirect: HashMap<usize, u32>,
    /// Its calls to synchronisation functions that loop (not copied): a
    /// decision is made before each, at the program's line.
    pub decide: BTreeSet<usize>,
    /// The innermost function of Rust's standard library's primitives
    /// (`std::sys::…`, see [`crate::sites::std_primitive`]) on the path
    /// from the program's call to this copy, itself included: what its
    /// operations are part of at `-O0`, where nothing is inlined. `None`
    /// when there is none, or when two paths disagree.
    pub within: Option<String>,
}

/// The copies of a module and the calls redirected to them.
#[derive(Debug, Default)]
pub struct Plan {
    /// The copies, in the order their functions follow the module's.
    pub copies: Vec<Copy>,
    /// The wrappers copied (original indices).
    copied: BTreeSet<u32>,
    /// Per function of the program (original index): its calls redirected
    /// to copies (original offset → function index of the copy).
    pub calls: HashMap<u32, HashMap<usize, u32>>,
    /// Per function of the program (original index): its calls to
    /// synchronisation functions that loop, before each of which a decision
    /// is made ([`crate::sites::SiteKind::SyncCall`]).
    pub decide: HashMap<u32, BTreeSet<usize>>,
}

impl Plan {
    /// Whether function `index` (original) is copied: its body is needed
    /// again after the module's own functions.
    pub fn copies_of(&self, index: u32) -> bool {
        self.copied.contains(&index)
    }
}

/// A defined function as the plan sees it.
struct Func {
    /// Whether it is a synchronisation wrapper (its own frame is in one, or
    /// it is `core` glue that calls one).
    wrapper: bool,
    /// Whether it is user code.
    user: bool,
    /// Whether it is Rust `core` code (copied when it leads to a wrapper).
    glue: bool,
    /// Whether it is a synchronisation function that loops (or a
    /// synchronisation library's function that reaches a loop): not copied,
    /// but a call of the program's to it is a decision.
    slow: bool,
    /// Whether it belongs to a synchronisation library
    /// ([`dwarf::is_sync_library_file`]).
    library: bool,
    /// Whether it has a loop.
    loops: bool,
    /// Its direct calls: (original offset, callee).
    calls: Vec<(usize, u32)>,
}

/// Works out the copies of `bytes`' wrappers: the first copy's index in the
/// instrumented module is `base`. `func_names` are the raw names of the
/// name section.
pub fn plan(
    bytes: &[u8],
    imported_funcs: u32,
    func_names: &BTreeMap<u32, String>,
    debug: &DebugInfo,
    filters: &Filters,
    base: u32,
) -> Result<Plan> {
    let mut funcs: Vec<Func> = Vec::new();
    for payload in Parser::new(0).parse_all(bytes) {
        let Payload::CodeSectionEntry(body) = payload? else {
            continue;
        };
        let index = imported_funcs + funcs.len() as u32;
        let mut reader = body.get_operators_reader()?;
        let first = reader.original_position() as u64;
        let mut calls = Vec::new();
        let mut loops = false;
        while !reader.eof() {
            let (op, offset) = reader.read_with_offset()?;
            match op {
                Operator::Call { function_index } if function_index >= imported_funcs => {
                    calls.push((offset, function_index));
                }
                Operator::Loop { .. } => loops = true,
                _ => {}
            }
        }
        let own = debug.frames(first).pop();
        let file = own
            .as_ref()
            .and_then(|f| f.loc.as_ref())
            .map(|l| l.file.clone());
        let range = body.range();
        let raw = func_names.get(&index);
        let name = raw.map(|r| dwarf::demangle(r)).unwrap_or_default();
        // A wrapper that loops is the library's slow path (Rust's
        // `Mutex::lock_contended` spinning, then waiting): its retries are
        // not the program's decisions, and it is not copied (inlined, it
        // is not either: `#[cold]` keeps it out of line at every level).
        let sync_file = file.as_deref().is_some_and(dwarf::is_sync_wrapper_file)
            || dwarf::is_sync_wrapper_function(&name);
        let library = file.as_deref().is_some_and(dwarf::is_sync_library_file);
        let wrapper = !loops && sync_file;
        // Not the primitives' own slow paths (`std::sys::sync`: a contended
        // lock spinning, then waiting): the operation before the call, which
        // found the lock taken, was the decision. A synchronisation library's
        // function is slow when it can retry or block (below).
        let slow = loops
            && (library
                || (sync_file && !file.as_deref().is_some_and(|f| f.contains("/std/src/sys/"))));
        let glue = !wrapper && file.as_deref().is_some_and(dwarf::is_rust_core_file);
        let user = !wrapper && {
            let dwarf_user =
                debug.is_user_function(range.start as u64..range.end as u64, &filters.code);
            filters.is_user(
                dwarf_user,
                raw.map(String::as_str).unwrap_or(&name),
                &name,
                file.as_deref(),
            )
        };
        funcs.push(Func {
            wrapper,
            user,
            glue,
            slow,
            library,
            loops,
            calls: if wrapper || user || glue || library {
                calls
            } else {
                Vec::new()
            },
        });
    }
    // A synchronisation library's function that reaches a loop through
    // its calls can retry or block: slow.
    propagate(
        &mut funcs,
        imported_funcs,
        |f| f.library && !f.slow,
        |c| c.slow || c.loops,
        |f| f.slow = true,
    );
    // `core`'s glue that leads to a wrapper (`drop_in_place` of a
    // `MutexGuard`, `mem::drop`) or to a slow synchronisation function (a
    // channel's end dropped) is copied with it, so that a guard
    // dropped at `-O0` unlocks at the program's line as it does inlined.
    propagate(
        &mut funcs,
        imported_funcs,
        |f| f.glue && !f.wrapper,
        |c| c.wrapper || c.slow,
        |f| f.wrapper = true,
    );
    let defined = |f: u32| {
        f.checked_sub(imported_funcs)
            .and_then(|i| funcs.get(i as usize))
    };
    let is_wrapper = |f: u32| defined(f).is_some_and(|f| f.wrapper);
    let is_slow = |f: u32| defined(f).is_some_and(|f| f.slow);

    let mut plan = Plan::default();
    for (i, f) in funcs.iter().enumerate() {
        if !f.user {
            continue;
        }
        let caller = imported_funcs + i as u32;
        for &(offset, callee) in &f.calls {
            if is_slow(callee)
                && matches!(
                    debug.call_owner(offset as u64, &filters.code),
                    Owner::User { .. }
                )
            {
                plan.decide.entry(caller).or_default().insert(offset);
                continue;
            }
            if !is_wrapper(callee) || plan.copies.len() >= MAX_COPIES {
                continue;
            }
            let Owner::User { frame, inlined } = debug.owner(offset as u64, &filters.code, true)
            else {
                continue;
            };
            if frame.loc.as_ref().is_none_or(|l| l.line == 0) {
                continue;
            }
            let mut asked_at = frame;
            if !inlined {
                let name = func_names.get(&caller).map(|r| dwarf::demangle(r));
                asked_at.function = name.or(asked_at.function);
            }
            // The wrappers this call reaches, each copied once for it.
            let mut copy_of: HashMap<u32, u32> = HashMap::new();
            let mut todo = vec![callee];
            let first = plan.copies.len();
            while let Some(w) = todo.pop() {
                if copy_of.contains_key(&w) {
                    continue;
                }
                copy_of.insert(w, base + plan.copies.len() as u32);
                plan.copied.insert(w);
                plan.copies.push(Copy {
                    wrapper: w,
                    asked_at: asked_at.clone(),
                    redirect: HashMap::new(),
                    decide: BTreeSet::new(),
                    within: None,
                });
                if let Some(func) = defined(w) {
                    todo.extend(func.calls.iter().map(|c| c.1).filter(|&c| is_wrapper(c)));
                }
            }
            for c in &mut plan.copies[first..] {
                let func = defined(c.wrapper).expect("a defined wrapper");
                c.redirect = func
                    .calls
                    .iter()
                    .filter_map(|&(o, callee)| Some((o, *copy_of.get(&callee)?)))
                    .collect();
                c.decide = func
                    .calls
                    .iter()
                    .filter(|&&(_, callee)| is_slow(callee))
                    .map(|&(o, _)| o)
                    .collect();
            }
            within_paths(
                &mut plan.copies[first..],
                base + first as u32,
                func_names,
                debug,
            );
            plan.calls
                .entry(caller)
                .or_default()
                .insert(offset, copy_of[&callee]);
        }
    }
    Ok(plan)
}

/// Sets each copy's [`Copy::within`]: `copies` are one call's, the first
/// (the callee) at function index `base`, each redirecting to the others.
/// A copy is within the primitive it is, else the innermost one inlined
/// around the call that reaches it (std's optimized generic code has the
/// primitives inlined at `-O0` too), else its caller's.
fn within_paths(
    copies: &mut [Copy],
    base: u32,
    func_names: &BTreeMap<u32, String>,
    debug: &DebugInfo,
) {
    let own = |w: u32| {
        func_names
            .get(&w)
            .map(|r| dwarf::demangle(r))
            .filter(|n| crate::sites::std_primitive(n).is_some())
    };
    let around = |offset: usize| {
        debug
            .frames(offset as u64)
            .into_iter()
            .filter_map(|f| f.function)
            .find(|n| crate::sites::std_primitive(n).is_some())
    };
    // `Some(None)`: reached along paths that disagree.
    let mut within: Vec<Option<Option<String>>> = vec![None; copies.len()];
    if let Some(c) = copies.first() {
        within[0] = Some(own(c.wrapper));
    }
    let mut todo = vec![0usize];
    while let Some(i) = todo.pop() {
        let here = within[i].clone().flatten();
        let mut next: Vec<(usize, usize)> = copies[i]
            .redirect
            .iter()
            .filter_map(|(&o, &f)| Some((f.checked_sub(base)? as usize, o)))
            .filter(|&(j, _)| j < copies.len())
            .collect();
        next.sort_unstable();
        for (j, o) in next {
            let via = own(copies[j].wrapper)
                .or_else(|| around(o))
                .or_else(|| here.clone());
            match &within[j] {
                None => {
                    within[j] = Some(via);
                    todo.push(j);
                }
                Some(w) if *w != via && w.is_some() => {
                    within[j] = Some(None);
                    todo.push(j);
                }
                Some(_) => {}
            }
        }
    }
    for (c, w) in copies.iter_mut().zip(within) {
        c.within = w.flatten();
    }
}

/// Until nothing changes: marks (`mark`) each function that `open` and
/// that directly calls a defined function `leads` to.
fn propagate(
    funcs: &mut [Func],
    imported_funcs: u32,
    open: impl Fn(&Func) -> bool,
    leads: impl Fn(&Func) -> bool,
    mark: impl Fn(&mut Func),
) {
    let mut changed = true;
    while changed {
        changed = false;
        for i in 0..funcs.len() {
            if !open(&funcs[i]) {
                continue;
            }
            let reaches = funcs[i].calls.iter().any(|&(_, c)| {
                c.checked_sub(imported_funcs)
                    .and_then(|j| funcs.get(j as usize))
                    .is_some_and(&leads)
            });
            if reaches {
                mark(&mut funcs[i]);
                changed = true;
            }
        }
    }
}
