//! Which memory accesses are provably to the running thread's own stack frame.
//!
//! An address is *frame-derived* when it comes from `__stack_pointer` read in
//! the same function, directly or through locals that only ever hold
//! frame-derived values (plus or minus anything). Such accesses are not yield
//! points at granularity `all` (atomics always are), unless the frame
//! *escapes*: a frame-derived
//! value is passed to a call, stored to memory, returned, or flows anywhere
//! else this analysis does not follow — then another thread might reach the
//! frame, and every access in the function stays a yield point.
//!
//! The analysis runs alongside validation: wasmparser's validator gives the
//! exact arity of every operator, so a shadow stack of provenances stays in
//! step with the real operand stack through all control flow.

use wasmparser::Operator;

/// Where a value on the operand stack came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prov {
    /// Anything else.
    Other,
    /// `global.get $__stack_pointer`, possibly plus/minus something.
    Sp,
    /// The value of a local (possibly plus/minus something).
    Local(u32),
}

impl Prov {
    fn derived(self) -> bool {
        self != Prov::Other
    }
}

/// How an operator uses memory addresses, for the analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrUse {
    /// Pops `[addr]` (a load).
    Load,
    /// Pops `[addr, value…]` with `values` values after the address.
    Store {
        /// How many values follow the address.
        values: u32,
    },
    /// `memory.copy`: pops `[dst, src, len]`.
    Copy,
    /// `memory.fill`: pops `[dst, value, len]`.
    Fill,
}

/// Per-function state of the analysis.
pub struct FrameAnalysis {
    sp_global: Option<u32>,
    params: u32,
    stack: Vec<Prov>,
    /// Per local: assignments seen.
    assigns: Vec<Vec<Prov>>,
    /// Per local: the control depth of the assignment that dominates the
    /// code being analysed, if any. An assignment at depth `d` dominates
    /// what follows it until the block at depth `d` ends (or reaches its
    /// `else`): the same rule wasm uses for non-nullable locals.
    defined: Vec<Option<u32>>,
    /// Per local: read where no assignment dominates (it may be the
    /// zero it starts with).
    read_early: Vec<bool>,
    escapes: Vec<Prov>,
    /// Per recorded access: provenance of the address(es).
    accesses: Vec<(Prov, Option<Prov>)>,
}

impl FrameAnalysis {
    /// An analysis for a function with `params` parameters and `locals` locals, where `sp_global` is the stack-pointer global.
    pub fn new(sp_global: Option<u32>, params: u32, locals: u32) -> FrameAnalysis {
        let n = locals as usize;
        FrameAnalysis {
            sp_global,
            params,
            stack: Vec::new(),
            assigns: vec![Vec::new(); n],
            defined: vec![None; n],
            read_early: vec![false; n],
            escapes: Vec::new(),
            accesses: Vec::new(),
        }
    }

    fn pop(&mut self) -> Prov {
        self.stack.pop().unwrap_or(Prov::Other)
    }

    fn escape(&mut self, p: Prov) {
        if p.derived() {
            self.escapes.push(p);
        }
    }

    /// Steps over `op`, whose arity is `arity` (pops, pushes), executed at
    /// control depth `depth` (1 = the function body's top level). When the
    /// operator is a memory access, `addr_use` says how, and the access is
    /// recorded; its index is returned.
    pub fn step(
        &mut self,
        op: &Operator,
        arity: Option<(u32, u32)>,
        depth: u32,
        addr_use: Option<AddrUse>,
    ) -> Option<usize> {
        if let Some(use_) = addr_use {
            let (a, b) = match use_ {
                AddrUse::Load => (self.pop(), None),
                AddrUse::Store { values } => {
                    for _ in 0..values {
                        let v = self.pop();
                        self.escape(v);
                    }
                    (self.pop(), None)
                }
                AddrUse::Copy => {
                    self.pop();
                    let src = self.pop();
                    (self.pop(), Some(src))
                }
                AddrUse::Fill => {
                    self.pop();
                    let v = self.pop();
                    self.escape(v);
                    (self.pop(), None)
                }
            };
            let pushes = arity.map(|(_, p)| p).unwrap_or(0);
            for _ in 0..pushes {
                self.stack.push(Prov::Other);
            }
            self.accesses.push((a, b));
            return Some(self.accesses.len() - 1);
        }
        match *op {
            Operator::LocalGet { local_index } => {
                if let Some(slot) = self.read_early.get_mut(local_index as usize) {
                    if self.defined[local_index as usize].is_none() {
                        *slot = true;
                    }
                }
                self.stack.push(Prov::Local(local_index));
            }
            Operator::GlobalGet { global_index } if Some(global_index) == self.sp_global => {
                self.stack.push(Prov::Sp);
            }
            Operator::LocalSet { local_index } | Operator::LocalTee { local_index } => {
                let v = self.pop();
                if let Some(a) = self.assigns.get_mut(local_index as usize) {
                    a.push(v);
                    let d = &mut self.defined[local_index as usize];
                    if d.is_none() {
                        *d = Some(depth);
                    }
                }
                if matches!(op, Operator::LocalTee { .. }) {
                    self.stack.push(v);
                }
            }
            // Leaving a block (or reaching its `else`, or a legacy try's
            // handler, which an exception enters from anywhere in its body):
            // assignments made in it no longer dominate. `depth` is the
            // depth of that block.
            Operator::End
            | Operator::Else
            | Operator::Catch { .. }
            | Operator::CatchAll
            | Operator::Delegate { .. } => {
                for d in &mut self.defined {
                    if d.is_some_and(|d| d >= depth) {
                        *d = None;
                    }
                }
                let (pops, pushes) = arity.unwrap_or((self.stack.len() as u32, 0));
                for _ in 0..pops {
                    let v = self.pop();
                    self.escape(v);
                }
                for _ in 0..pushes {
                    self.stack.push(Prov::Other);
                }
            }
            Operator::GlobalSet { global_index } => {
                let v = self.pop();
                if Some(global_index) != self.sp_global {
                    self.escape(v);
                }
            }
            Operator::I32Add | Operator::I32Sub => {
                let b = self.pop();
                let a = self.pop();
                self.stack.push(if a.derived() { a } else { b });
            }
            _ => {
                let (pops, pushes) = arity.unwrap_or((self.stack.len() as u32, 0));
                for _ in 0..pops {
                    let v = self.pop();
                    self.escape(v);
                }
                for _ in 0..pushes {
                    self.stack.push(Prov::Other);
                }
            }
        }
        None
    }

    /// Steps over a call, with `arity` (pops, pushes), to a function that
    /// reads or writes through its pointer arguments only while it runs and
    /// keeps none of them ([`keeps_no_pointer`]): the frame does not escape
    /// through it (at `-O0` every `printf` is passed a pointer to the
    /// variadic arguments in the caller's frame).
    pub fn call_keeping_nothing(&mut self, arity: Option<(u32, u32)>) {
        let (pops, pushes) = arity.unwrap_or((self.stack.len() as u32, 0));
        for _ in 0..pops {
            self.pop();
        }
        for _ in 0..pushes {
            self.stack.push(Prov::Other);
        }
    }

    /// Re-synchronises the shadow stack with the validator's real height
    /// (after control flow and unreachable code).
    pub fn sync_height(&mut self, height: usize) {
        if self.stack.len() > height {
            for p in self.stack.split_off(height) {
                if p.derived() {
                    self.escapes.push(p);
                }
            }
        }
        while self.stack.len() < height {
            self.stack.push(Prov::Other);
        }
    }

    /// Finishes the analysis: for each recorded access, whether it is
    /// provably to the running thread's own frame.
    pub fn finish(self) -> Vec<bool> {
        let n = self.assigns.len();
        // Greatest fixpoint of "local only ever holds frame-derived values".
        let mut frame_local: Vec<bool> = (0..n)
            .map(|l| {
                l as u32 >= self.params
                    && !self.read_early[l]
                    && !self.assigns[l].is_empty()
                    && self.assigns[l].iter().all(|p| p.derived())
            })
            .collect();
        loop {
            let mut changed = false;
            for l in 0..n {
                if frame_local[l]
                    && self.assigns[l].iter().any(|p| match *p {
                        Prov::Local(m) => !frame_local.get(m as usize).copied().unwrap_or(false),
                        Prov::Sp => false,
                        Prov::Other => true,
                    })
                {
                    frame_local[l] = false;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let is_frame = |p: Prov| match p {
            Prov::Sp => true,
            Prov::Local(m) => frame_local.get(m as usize).copied().unwrap_or(false),
            Prov::Other => false,
        };
        if self.escapes.iter().any(|&p| is_frame(p)) {
            return vec![false; self.accesses.len()];
        }
        self.accesses
            .iter()
            .map(|&(a, b)| is_frame(a) && b.is_none_or(is_frame))
            .collect()
    }
}

/// Whether the C library function `name` keeps none of its pointer
/// arguments once it returns (formatted output and input, string and
/// memory functions): passing it a pointer into the frame is no escape.
pub fn keeps_no_pointer(name: &str) -> bool {
    matches!(
        name,
        "printf"
            | "fprintf"
            | "sprintf"
            | "snprintf"
            | "dprintf"
            | "vprintf"
            | "vfprintf"
            | "vsprintf"
            | "vsnprintf"
            | "scanf"
            | "sscanf"
            | "fscanf"
            | "vscanf"
            | "vsscanf"
            | "vfscanf"
            | "puts"
            | "fputs"
            | "fwrite"
            | "fread"
            | "strlen"
            | "strnlen"
            | "strcmp"
            | "strncmp"
            | "strcpy"
            | "strncpy"
            | "strcat"
            | "strncat"
            | "memcpy"
            | "memmove"
            | "memset"
            | "memcmp"
            | "atoi"
            | "atol"
            | "strtol"
            | "strtoul"
            | "strtoll"
            | "strtoull"
            | "strtod"
    )
}
