//! Legacy exception handling rewritten into the final proposal.
//!
//! clang 19 (`-fwasm-exceptions`) emits the *legacy* encoding: `try`,
//! `catch $tag`, `catch_all`, `rethrow N` and `delegate N`. wasmtime runs
//! only the final one: `try_table` with `catch`/`catch_ref`/`catch_all`/
//! `catch_all_ref` clauses that branch to an enclosing block, `throw_ref`
//! and the `exnref` type. [`FuncTranslator`] rewrites one function's
//! operators as the instrumenter re-encodes them (so every instruction
//! keeps its original offset, and DWARF stays valid); [`translate`] applies
//! it to a whole module without instrumenting it.
//!
//! A `try bt … catch $t1 … catch $tn … catch_all … end` becomes
//!
//! ```text
//! block $outer bt                        ;; the try's label
//!   block $h (result exnref)
//!     try_table bt (catch_all_ref $h)
//!       …body…                           ;; branches to the try go to $outer
//!     end
//!     br $outer
//!   end
//!   local.set $exn                       ;; kept for `rethrow`
//!   block $all                           ;; only with a catch_all
//!     block $mn (result tn)
//!       …
//!         block $m1 (result t1)
//!           try_table (catch $t1 $m1) … (catch $tn $mn) (catch_all $all)
//!             local.get $exn
//!             throw_ref                  ;; no clause matched: propagates
//!           end
//!           unreachable
//!         end
//!         …handler 1…
//!         br $outer
//!       …
//!     end
//!     …handler n…
//!     br $outer
//!   end
//!   …catch_all handler…
//! end
//! ```
//!
//! The dispatch re-throws the caught exception into a `try_table` whose
//! clauses are the legacy ones in order, so the block each clause branches
//! to carries at most the tag's one parameter: no multi-value block type,
//! and so no new function type, is needed. A tag with more than one
//! parameter is refused (C and C++ tags have one `i32`).
//!
//! `rethrow N` is `local.get $exn; throw_ref` with the exnref of the try
//! whose handler label `N` names. The exnref locals are numbered by how
//! many handlers enclose the catch, so a function needs as many as its
//! deepest nesting of handlers.
//!
//! `try … delegate N` hands what its body throws to the handlers of the
//! try at label `N`: first normalised to the innermost try at or outside
//! `N` that is still in its body and can catch (a block's label, or a try
//! already in a handler, passes the exception on outwards), or to the
//! caller. The delegating try becomes `try_table bt (catch_all_ref $d)`,
//! where `$d` is a `block (result exnref)` opened just inside the target's
//! `try_table` (or around the whole function body for the caller), closed
//! at the end of the target's body and followed by `throw_ref`: the
//! exception is thrown again where the target catches it (or, at function
//! level, out of the function; the body's normal completion `return`s past
//! it).

use anyhow::{anyhow, bail, Result};
use std::borrow::Cow;
use wasm_encoder::reencode::{Reencode, RoundtripReencoder};
use wasm_encoder::{BlockType, Catch, Instruction, RefType, ValType};
use wasmparser::Operator;

/// Whether `op` exists only in the legacy exception-handling encoding.
pub fn is_legacy(op: &Operator) -> bool {
    matches!(
        op,
        Operator::Try { .. }
            | Operator::Catch { .. }
            | Operator::CatchAll
            | Operator::Delegate { .. }
            | Operator::Rethrow { .. }
    )
}

/// What one legacy `try` turns out to be (known only at its end).
#[derive(Debug, Clone, Default)]
struct TryShape {
    /// Its clauses in order: `Some(tag)` for `catch`, `None` for `catch_all`.
    clauses: Vec<Option<u32>>,
    /// Ends with `delegate`.
    delegates: bool,
    /// Where a `delegate` sends what its body throws (its own, if it
    /// delegates): another try, or the caller.
    delegate_to: Option<Target>,
    /// Some delegate sends its exceptions here.
    is_target: bool,
}

impl TryShape {
    /// It can catch (and so be where a delegate sends an exception).
    fn catches(&self) -> bool {
        !self.clauses.is_empty() || self.delegates
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Target {
    Try(usize),
    Caller,
}

/// A label of the legacy code, as the pre-scan sees it.
#[derive(Clone, Copy)]
enum ScanFrame {
    Other,
    Try { id: usize, in_handler: bool },
}

/// A label of the legacy code during translation.
#[derive(Debug, Clone, Copy)]
struct Frame {
    /// Index of the block a branch to this label goes to in the output's
    /// stack of open blocks (the function's own block excluded).
    target: u32,
    /// A try with clauses (or delegating): its shape's index.
    try_id: Option<usize>,
    /// For a try with clauses: the first clause has been seen.
    in_handler: bool,
    /// The exnref local of a try in a handler.
    exn: u32,
    /// Dispatch blocks still open around the next handlers.
    pending: u32,
    /// The `$d` block of a delegate target, if any.
    d: Option<u32>,
    /// Index of this try's `try_table` in the output's stack.
    table: u32,
}

/// Rewrites one function body's operators; see the module documentation.
pub struct FuncTranslator {
    shapes: Vec<TryShape>,
    next_try: usize,
    frames: Vec<Frame>,
    /// Blocks open in the output (the function's own excluded).
    open: u32,
    /// The `$d` block around the whole body, when a delegate reaches the
    /// caller.
    fn_d: bool,
    started: bool,
    exn_base: u32,
    exn_count: u32,
    /// Each tag's parameter types.
    tags: Vec<Vec<ValType>>,
}

impl FuncTranslator {
    /// A translator for the function whose operators are `ops`, when it
    /// has legacy exception-handling instructions (else `None`). Its exnref
    /// locals are numbered from `exn_base` ([`FuncTranslator::exn_locals`]
    /// of them). `tags` gives every tag's parameter types, imported ones
    /// first.
    pub fn new<'a: 'b, 'b, I>(ops: I, tags: &[Vec<ValType>], exn_base: u32) -> Result<Option<Self>>
    where
        I: IntoIterator<Item = &'b Operator<'a>> + Clone,
    {
        if !ops.clone().into_iter().any(is_legacy) {
            return Ok(None);
        }
        // First walk: each try's clauses and ending, and how deep handlers
        // nest.
        let mut shapes: Vec<TryShape> = Vec::new();
        let mut stack: Vec<ScanFrame> = Vec::new();
        let mut in_handlers = 0u32;
        let mut exn_count = 0u32;
        for op in ops.clone() {
            match op {
                Operator::Block { .. }
                | Operator::Loop { .. }
                | Operator::If { .. }
                | Operator::TryTable { .. } => stack.push(ScanFrame::Other),
                Operator::Try { .. } => {
                    stack.push(ScanFrame::Try {
                        id: shapes.len(),
                        in_handler: false,
                    });
                    shapes.push(TryShape::default());
                }
                Operator::Catch { tag_index } => {
                    let top = stack.last_mut();
                    let Some(ScanFrame::Try { id, in_handler }) = top else {
                        bail!("`catch` outside a `try`");
                    };
                    shapes[*id].clauses.push(Some(*tag_index));
                    if !*in_handler {
                        *in_handler = true;
                        in_handlers += 1;
                        exn_count = exn_count.max(in_handlers);
                    }
                }
                Operator::CatchAll => {
                    let top = stack.last_mut();
                    let Some(ScanFrame::Try { id, in_handler }) = top else {
                        bail!("`catch_all` outside a `try`");
                    };
                    shapes[*id].clauses.push(None);
                    if !*in_handler {
                        *in_handler = true;
                        in_handlers += 1;
                        exn_count = exn_count.max(in_handlers);
                    }
                }
                Operator::Delegate { .. } => match stack.pop() {
                    Some(ScanFrame::Try { id, in_handler }) => {
                        if in_handler {
                            bail!("`delegate` after a `catch`");
                        }
                        shapes[id].delegates = true;
                    }
                    _ => bail!("`delegate` outside a `try`"),
                },
                Operator::End => {
                    if let Some(ScanFrame::Try {
                        in_handler: true, ..
                    }) = stack.pop()
                    {
                        in_handlers -= 1;
                    }
                }
                _ => {}
            }
        }
        // Second walk: where each delegate sends its exceptions.
        let mut stack: Vec<ScanFrame> = Vec::new();
        let mut next = 0usize;
        for op in ops {
            match op {
                Operator::Block { .. }
                | Operator::Loop { .. }
                | Operator::If { .. }
                | Operator::TryTable { .. } => stack.push(ScanFrame::Other),
                Operator::Try { .. } => {
                    stack.push(ScanFrame::Try {
                        id: next,
                        in_handler: false,
                    });
                    next += 1;
                }
                Operator::Catch { .. } | Operator::CatchAll => {
                    if let Some(ScanFrame::Try { in_handler, .. }) = stack.last_mut() {
                        *in_handler = true;
                    }
                }
                Operator::Delegate { relative_depth } => {
                    let Some(ScanFrame::Try { id, .. }) = stack.pop() else {
                        bail!("`delegate` outside a `try`");
                    };
                    let depth = *relative_depth as usize;
                    if depth > stack.len() {
                        bail!("`delegate {depth}` names no label");
                    }
                    // The label's frame, then outwards.
                    let target = stack[..stack.len() - depth]
                        .iter()
                        .rev()
                        .find_map(|f| match *f {
                            ScanFrame::Try {
                                id,
                                in_handler: false,
                            } if shapes[id].catches() => Some(id),
                            _ => None,
                        })
                        .map_or(Target::Caller, Target::Try);
                    shapes[id].delegate_to = Some(target);
                    if let Target::Try(t) = target {
                        shapes[t].is_target = true;
                    }
                }
                Operator::End => {
                    stack.pop();
                }
                _ => {}
            }
        }
        let fn_d = shapes.iter().any(|s| s.delegate_to == Some(Target::Caller));
        Ok(Some(FuncTranslator {
            shapes,
            next_try: 0,
            frames: Vec::new(),
            open: 0,
            fn_d,
            started: false,
            exn_base,
            exn_count,
            tags: tags.to_vec(),
        }))
    }

    /// How many exnref locals the function needs (after its others).
    pub fn exn_locals(&self) -> u32 {
        self.exn_count
    }

    /// Relative depth, from the current position, of the output block at
    /// `index` of the open blocks.
    fn rel(&self, index: u32) -> u32 {
        self.open - 1 - index
    }

    /// Relative depth in the output of the legacy relative depth `depth`.
    fn label(&self, depth: u32) -> Result<u32> {
        let n = self.frames.len() as u32;
        if depth < n {
            Ok(self.rel(self.frames[(n - 1 - depth) as usize].target))
        } else if depth == n {
            Ok(self.open)
        } else {
            bail!("branch depth {depth} names no label")
        }
    }

    fn open_block(&mut self, out: &mut dyn FnMut(Instruction), ins: Instruction) -> u32 {
        out(ins);
        self.open += 1;
        self.open - 1
    }

    fn close(&mut self, out: &mut dyn FnMut(Instruction)) {
        out(Instruction::End);
        self.open -= 1;
    }

    fn block_type(bt: wasmparser::BlockType) -> Result<BlockType> {
        RoundtripReencoder
            .block_type(bt)
            .map_err(|e| anyhow!("re-encoding a block type: {e}"))
    }

    /// The block a clause of tag `tag` branches to carries its parameter.
    fn clause_block(&self, tag: u32) -> Result<BlockType> {
        let params = self
            .tags
            .get(tag as usize)
            .ok_or_else(|| anyhow!("`catch` of tag {tag}, which does not exist"))?;
        match params.as_slice() {
            [] => Ok(BlockType::Empty),
            [t] => Ok(BlockType::Result(*t)),
            _ => bail!(
                "`catch` of tag {tag}, which has {} parameters: only tags of at most one are supported",
                params.len()
            ),
        }
    }

    /// What comes before the function's first instruction.
    pub fn start(&mut self, out: &mut dyn FnMut(Instruction)) {
        if !self.started {
            self.started = true;
            if self.fn_d {
                self.open_block(out, Instruction::Block(BlockType::Result(ValType::EXNREF)));
            }
        }
    }

    /// Rewrites `op` into `out` when it is a control instruction this
    /// translation must see; returns `false` for any other operator, which
    /// the caller emits as it is. Every control instruction of the
    /// function must come here, in order, after [`FuncTranslator::start`].
    pub fn op(&mut self, op: &Operator, out: &mut dyn FnMut(Instruction)) -> Result<bool> {
        if !self.started {
            bail!("internal: `FuncTranslator::start` was not called");
        }
        match *op {
            Operator::Block { blockty } => {
                let i = self.open_block(out, Instruction::Block(Self::block_type(blockty)?));
                self.push_plain(i);
            }
            Operator::Loop { blockty } => {
                let i = self.open_block(out, Instruction::Loop(Self::block_type(blockty)?));
                self.push_plain(i);
            }
            Operator::If { blockty } => {
                let i = self.open_block(out, Instruction::If(Self::block_type(blockty)?));
                self.push_plain(i);
            }
            Operator::Else => out(Instruction::Else),
            Operator::TryTable { ref try_table } => {
                let mut catches = Vec::new();
                for c in &try_table.catches {
                    catches.push(match *c {
                        wasmparser::Catch::One { tag, label } => Catch::One {
                            tag,
                            label: self.label(label)?,
                        },
                        wasmparser::Catch::OneRef { tag, label } => Catch::OneRef {
                            tag,
                            label: self.label(label)?,
                        },
                        wasmparser::Catch::All { label } => Catch::All {
                            label: self.label(label)?,
                        },
                        wasmparser::Catch::AllRef { label } => Catch::AllRef {
                            label: self.label(label)?,
                        },
                    });
                }
                let bt = Self::block_type(try_table.ty)?;
                let i = self.open_block(out, Instruction::TryTable(bt, Cow::Owned(catches)));
                self.push_plain(i);
            }
            Operator::Try { blockty } => self.open_try(blockty, out)?,
            Operator::Catch { tag_index } => self.clause(Some(tag_index), out)?,
            Operator::CatchAll => self.clause(None, out)?,
            Operator::Delegate { .. } => {
                let f = self
                    .frames
                    .pop()
                    .ok_or_else(|| anyhow!("stray `delegate`"))?;
                if let Some(d) = f.d {
                    out(Instruction::Br(self.rel(f.table)));
                    debug_assert_eq!(d + 1, self.open);
                    self.close(out);
                    out(Instruction::ThrowRef);
                }
                self.close(out);
            }
            Operator::Rethrow { relative_depth } => {
                let n = self.frames.len();
                let f = (relative_depth as usize)
                    .checked_add(1)
                    .and_then(|d| n.checked_sub(d))
                    .map(|i| self.frames[i])
                    .filter(|f| f.in_handler)
                    .ok_or_else(|| anyhow!("`rethrow {relative_depth}` names no catch"))?;
                out(Instruction::LocalGet(f.exn));
                out(Instruction::ThrowRef);
            }
            Operator::End => match self.frames.pop() {
                Some(f) => {
                    if f.try_id.is_some() {
                        // A try's last handler: every dispatch block is closed.
                        if f.pending != 0 {
                            bail!("internal: a try ends with dispatch blocks open");
                        }
                    }
                    self.close(out);
                }
                None => {
                    if self.fn_d {
                        out(Instruction::Return);
                        self.close(out);
                        out(Instruction::ThrowRef);
                    }
                    out(Instruction::End);
                }
            },
            Operator::Br { relative_depth } => out(Instruction::Br(self.label(relative_depth)?)),
            Operator::BrIf { relative_depth } => {
                out(Instruction::BrIf(self.label(relative_depth)?))
            }
            Operator::BrTable { ref targets } => {
                let mut labels = Vec::new();
                for t in targets.targets() {
                    labels.push(self.label(t?)?);
                }
                let default = self.label(targets.default())?;
                out(Instruction::BrTable(Cow::Owned(labels), default));
            }
            Operator::BrOnNull { .. }
            | Operator::BrOnNonNull { .. }
            | Operator::BrOnCast { .. }
            | Operator::BrOnCastFail { .. } => {
                bail!("a reference branch in a function with legacy exception handling")
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Pushes the frame of try `id` (its label `target`, its `try_table`
    /// `table`); a `delegate`'s target also opens the block that receives
    /// the exceptions delegated to it.
    fn push_try(
        &mut self,
        out: &mut dyn FnMut(Instruction),
        id: usize,
        target: u32,
        table: u32,
        is_target: bool,
    ) {
        let d = is_target
            .then(|| self.open_block(out, Instruction::Block(BlockType::Result(ValType::EXNREF))));
        self.frames.push(Frame {
            target,
            try_id: Some(id),
            in_handler: false,
            exn: 0,
            pending: 0,
            d,
            table,
        });
    }

    fn push_plain(&mut self, target: u32) {
        self.frames.push(Frame {
            target,
            try_id: None,
            in_handler: false,
            exn: 0,
            pending: 0,
            d: None,
            table: target,
        });
    }

    fn open_try(
        &mut self,
        blockty: wasmparser::BlockType,
        out: &mut dyn FnMut(Instruction),
    ) -> Result<()> {
        let id = self.next_try;
        self.next_try += 1;
        let shape = self
            .shapes
            .get(id)
            .cloned()
            .ok_or_else(|| anyhow!("internal: unscanned `try`"))?;
        if let wasmparser::BlockType::FuncType(_) = blockty {
            bail!("a `try` with a function type (parameters or several results) is not supported");
        }
        let bt = Self::block_type(blockty)?;
        if shape.delegates {
            let d = match shape.delegate_to {
                Some(Target::Caller) => 0,
                Some(Target::Try(t)) => self
                    .frames
                    .iter()
                    .rev()
                    .find(|f| f.try_id == Some(t))
                    .and_then(|f| f.d)
                    .ok_or_else(|| anyhow!("internal: a delegate's target is not open"))?,
                None => bail!("internal: a delegate without a target"),
            };
            let catches = [Catch::AllRef { label: self.rel(d) }];
            let table = self.open_block(out, Instruction::TryTable(bt, Cow::Owned(catches.into())));
            self.push_try(out, id, table, table, shape.is_target);
        } else if shape.clauses.is_empty() {
            let i = self.open_block(out, Instruction::Block(bt));
            self.push_plain(i);
        } else {
            let outer = self.open_block(out, Instruction::Block(bt));
            self.open_block(out, Instruction::Block(BlockType::Result(ValType::EXNREF)));
            let catches = [Catch::AllRef { label: 0 }];
            let table = self.open_block(out, Instruction::TryTable(bt, Cow::Owned(catches.into())));
            self.push_try(out, id, outer, table, shape.is_target);
        }
        Ok(())
    }

    /// A `catch $tag` (`Some`) or `catch_all` (`None`) of the innermost try.
    fn clause(&mut self, _tag: Option<u32>, out: &mut dyn FnMut(Instruction)) -> Result<()> {
        let handlers = self.frames.iter().filter(|f| f.in_handler).count() as u32;
        let mut f = self
            .frames
            .pop()
            .filter(|f| f.try_id.is_some())
            .ok_or_else(|| anyhow!("`catch` outside a `try`"))?;
        if f.in_handler {
            // The previous handler completes the try.
            out(Instruction::Br(self.rel(f.target)));
            self.close(out);
            f.pending -= 1;
            self.frames.push(f);
            return Ok(());
        }
        // The body completes the try.
        if let Some(d) = f.d {
            out(Instruction::Br(self.rel(f.target)));
            debug_assert_eq!(d + 1, self.open);
            self.close(out);
            out(Instruction::ThrowRef);
        }
        self.close(out); // try_table
        out(Instruction::Br(self.rel(f.target)));
        self.close(out); // $h
        f.exn = self.exn_base + handlers;
        out(Instruction::LocalSet(f.exn));
        f.in_handler = true;
        let shape = &self.shapes[f.try_id.expect("a try")];
        let tags: Vec<u32> = shape.clauses.iter().filter_map(|c| *c).collect();
        let has_all = shape.clauses.last() == Some(&None);
        if !tags.is_empty() {
            if has_all {
                self.open_block(out, Instruction::Block(BlockType::Empty));
            }
            for &t in tags.iter().rev() {
                let bt = self.clause_block(t)?;
                self.open_block(out, Instruction::Block(bt));
            }
            let mut catches: Vec<Catch> = tags
                .iter()
                .enumerate()
                .map(|(i, &tag)| Catch::One {
                    tag,
                    label: i as u32,
                })
                .collect();
            if has_all {
                catches.push(Catch::All {
                    label: tags.len() as u32,
                });
            }
            out(Instruction::TryTable(BlockType::Empty, Cow::Owned(catches)));
            out(Instruction::LocalGet(f.exn));
            out(Instruction::ThrowRef);
            out(Instruction::End);
            out(Instruction::Unreachable);
            self.close(out); // $m1
            f.pending = tags.len() as u32 - 1 + has_all as u32;
        }
        self.frames.push(f);
        Ok(())
    }
}

/// Every tag's parameter types in `bytes` (imported tags first).
pub fn tag_params(bytes: &[u8]) -> Result<Vec<Vec<ValType>>> {
    let mut types: Vec<Vec<ValType>> = Vec::new();
    let mut tags = Vec::new();
    for p in wasmparser::Parser::new(0).parse_all(bytes) {
        match p? {
            wasmparser::Payload::TypeSection(r) => {
                for t in r.into_iter_err_on_gc_types() {
                    let t = t?;
                    let mut params = Vec::new();
                    for &p in t.params() {
                        params.push(
                            RoundtripReencoder
                                .val_type(p)
                                .map_err(|e| anyhow!("re-encoding a type: {e}"))?,
                        );
                    }
                    types.push(params);
                }
            }
            wasmparser::Payload::ImportSection(r) => {
                for imp in r.into_imports() {
                    if let wasmparser::TypeRef::Tag(t) = imp?.ty {
                        tags.push(t.func_type_idx);
                    }
                }
            }
            wasmparser::Payload::TagSection(r) => {
                for t in r {
                    tags.push(t?.func_type_idx);
                }
            }
            _ => {}
        }
    }
    tags.into_iter()
        .map(|t| {
            types
                .get(t as usize)
                .cloned()
                .ok_or_else(|| anyhow!("a tag of type {t}, which does not exist"))
        })
        .collect()
}

/// Whether the module `bytes` has legacy exception-handling instructions.
pub fn has_legacy(bytes: &[u8]) -> Result<bool> {
    for p in wasmparser::Parser::new(0).parse_all(bytes) {
        if let wasmparser::Payload::CodeSectionEntry(body) = p? {
            let mut r = body.get_operators_reader()?;
            while !r.eof() {
                if is_legacy(&r.read()?) {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

/// `bytes` with every function's legacy exception handling rewritten into
/// the final encoding, and nothing else changed but the code section (a
/// module without legacy instructions comes back as it is). For running a
/// module uninstrumented; the instrumenter translates as it rewrites.
pub fn translate(bytes: &[u8]) -> Result<Vec<u8>> {
    if !has_legacy(bytes)? {
        return Ok(bytes.to_vec());
    }
    let tags = tag_params(bytes)?;
    let mut func_types: Vec<u32> = Vec::new();
    let mut param_counts: Vec<u32> = Vec::new();
    let mut module = wasm_encoder::Module::new();
    let mut code: Option<wasm_encoder::CodeSection> = None;
    let mut defined = 0usize;
    for p in wasmparser::Parser::new(0).parse_all(bytes) {
        match p? {
            wasmparser::Payload::CodeSectionStart { .. } => {
                code = Some(wasm_encoder::CodeSection::new());
            }
            wasmparser::Payload::CodeSectionEntry(body) => {
                let ty = *func_types
                    .get(defined)
                    .ok_or_else(|| anyhow!("more bodies than functions"))?;
                defined += 1;
                let params = *param_counts
                    .get(ty as usize)
                    .ok_or_else(|| anyhow!("a function of type {ty}, which does not exist"))?;
                let f = translate_body(&body, params, &tags)?;
                code.as_mut().expect("code section").function(&f);
            }
            other => {
                match &other {
                    wasmparser::Payload::TypeSection(r) => {
                        for t in r.clone().into_iter_err_on_gc_types() {
                            param_counts.push(t?.params().len() as u32);
                        }
                    }
                    wasmparser::Payload::FunctionSection(r) => {
                        for t in r.clone() {
                            func_types.push(t?);
                        }
                    }
                    _ => {}
                }
                if let Some(c) = code.take() {
                    module.section(&c);
                }
                if let Some((id, range)) = other.as_section() {
                    module.section(&wasm_encoder::RawSection {
                        id,
                        data: &bytes[range],
                    });
                }
            }
        }
    }
    if let Some(c) = code.take() {
        module.section(&c);
    }
    Ok(module.finish())
}

fn translate_body(
    body: &wasmparser::FunctionBody,
    params: u32,
    tags: &[Vec<ValType>],
) -> Result<wasm_encoder::Function> {
    let mut locals = Vec::new();
    let mut count = params;
    for l in body.get_locals_reader()? {
        let (n, t) = l?;
        count += n;
        let t = RoundtripReencoder
            .val_type(t)
            .map_err(|e| anyhow!("re-encoding a local: {e}"))?;
        locals.push((n, t));
    }
    let mut ops = Vec::new();
    let mut r = body.get_operators_reader()?;
    while !r.eof() {
        ops.push(r.read()?);
    }
    let Some(mut tr) = FuncTranslator::new(&ops, tags, count)? else {
        let mut f = wasm_encoder::Function::new(locals);
        for op in &ops {
            f.instruction(&reencode(op)?);
        }
        return Ok(f);
    };
    if tr.exn_locals() > 0 {
        locals.push((tr.exn_locals(), ValType::Ref(RefType::EXNREF)));
    }
    let mut f = wasm_encoder::Function::new(locals);
    tr.start(&mut |i| {
        f.instruction(&i);
    });
    for op in &ops {
        let mut emit = |i: Instruction| {
            f.instruction(&i);
        };
        if !tr.op(op, &mut emit)? {
            f.instruction(&reencode(op)?);
        }
    }
    Ok(f)
}

fn reencode<'a>(op: &Operator<'a>) -> Result<Instruction<'a>> {
    RoundtripReencoder
        .instruction(op.clone())
        .map_err(|e| anyhow!("re-encoding an instruction: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmparser::{Validator, WasmFeatures};

    fn legacy_wat() -> Vec<u8> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/eh/legacy.wat"
        );
        wat::parse_file(path).expect("legacy.wat parses")
    }

    fn final_features() -> WasmFeatures {
        let mut f = WasmFeatures::default();
        f.insert(WasmFeatures::THREADS);
        f.remove(WasmFeatures::LEGACY_EXCEPTIONS);
        f
    }

    #[test]
    fn the_test_module_is_legacy() {
        let bytes = legacy_wat();
        assert!(has_legacy(&bytes).unwrap());
        assert!(Validator::new_with_features(final_features())
            .validate_all(&bytes)
            .is_err());
        let mut legacy = final_features();
        legacy.insert(WasmFeatures::LEGACY_EXCEPTIONS);
        Validator::new_with_features(legacy)
            .validate_all(&bytes)
            .unwrap();
    }

    #[test]
    fn translation_validates_without_legacy_instructions() {
        let out = translate(&legacy_wat()).unwrap();
        Validator::new_with_features(final_features())
            .validate_all(&out)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!has_legacy(&out).unwrap());
        // Already final: unchanged.
        assert_eq!(translate(&out).unwrap(), out);
    }

    #[test]
    fn handler_nesting_decides_the_exnref_locals() {
        let bytes = wat::parse_str(
            r#"(module (tag $e (param i32))
                 (func (param i32)
                   try
                     try catch_all end
                   catch $e
                     drop
                     try catch_all try catch_all rethrow 0 end end
                   end))"#,
        )
        .unwrap();
        let mut bodies = Vec::new();
        for p in wasmparser::Parser::new(0).parse_all(&bytes) {
            if let wasmparser::Payload::CodeSectionEntry(b) = p.unwrap() {
                bodies.push(b);
            }
        }
        let mut r = bodies[0].get_operators_reader().unwrap();
        let mut ops = Vec::new();
        while !r.eof() {
            ops.push(r.read().unwrap());
        }
        let tr = FuncTranslator::new(&ops, &[vec![ValType::I32]], 1)
            .unwrap()
            .unwrap();
        assert_eq!(tr.exn_locals(), 3);
    }

    /// A handler is entered from anywhere in its try's body: a local the
    /// body sets to a frame address may still hold its old value (zero)
    /// there, so the handler's store through it is a site. The analysis
    /// trusts a local everywhere or nowhere: both stores are sites.
    #[test]
    fn a_handler_does_not_trust_the_body_s_frame_addresses() {
        let bytes = wat::parse_str(
            r#"(module
                 (import "env" "memory" (memory 1 1 shared))
                 (global $__stack_pointer (mut i32) (i32.const 4096))
                 (func $g)
                 (func $f (export "f") (local $p i32)
                   try
                     call $g
                     global.get $__stack_pointer
                     i32.const 16
                     i32.sub
                     local.set $p
                     local.get $p
                     i32.const 1
                     i32.store
                   catch_all
                     local.get $p
                     i32.const 2
                     i32.store
                   end))"#,
        )
        .unwrap();
        let cfg = crate::Config {
            granularity: crate::Granularity::All,
            include_funcs: vec!["f".into()],
            ..Default::default()
        };
        let out = crate::instrument(&bytes, &cfg).unwrap();
        let stores: Vec<_> = out
            .sites
            .sites
            .iter()
            .filter(|s| s.kind.is_access())
            .collect();
        assert_eq!(stores.len(), 2, "{stores:#?}");
    }

    #[test]
    fn a_tag_of_two_parameters_is_refused() {
        let bytes = wat::parse_str(
            r#"(module (tag $e (param i32 i32))
                 (func try catch $e drop drop end))"#,
        )
        .unwrap();
        let e = translate(&bytes).unwrap_err().to_string();
        assert!(e.contains("2 parameters"), "{e}");
    }
}
