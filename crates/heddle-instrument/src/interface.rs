//! The host-call interface between an instrumented module and heddle,
//! declared once. Each table names a wasm import module and, per function,
//! its name, parameter and result types and meaning. Everything else is
//! derived from these tables: the imports the rewriter adds
//! ([`crate::rewrite`]), heddle's own definitions (`runtime::hooks`) and
//! the plain-wasmtime definitions (`runtime::plain`) name the functions by
//! their variant; a test instantiates a module importing every declared
//! function against both linkers, so a definition whose type differs from
//! its declaration, or a missing one, fails it; and the guest SDK header
//! (`guest-sdk/include/heddle.h`) is checked against [`SdkImport`].

/// A wasm value type of the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostType {
    /// `i32`.
    I32,
    /// `i64`.
    I64,
}

/// Declares one import module of the interface: an enum with a variant per
/// function, and its module name, order, names and types.
macro_rules! host_calls {
    (
        $(#[$meta:meta])*
        $vis:vis enum $enum:ident in $module:literal {
            $(
                $(#[doc = $doc:expr])*
                $variant:ident = $name:literal ( $($p:ident),* ) -> ( $($r:ident),* );
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(u32)]
        $vis enum $enum {
            $(
                $(#[doc = $doc])*
                $variant,
            )*
        }

        impl $enum {
            /// The wasm import module.
            pub const MODULE: &'static str = $module;
            /// Every function, in declaration (and import) order.
            pub const ALL: &'static [$enum] = &[$($enum::$variant),*];
            /// How many functions the module has.
            pub const COUNT: u32 = Self::ALL.len() as u32;

            /// The import name.
            pub fn name(self) -> &'static str {
                match self {
                    $($enum::$variant => $name,)*
                }
            }

            /// Parameter types.
            pub fn params(self) -> &'static [HostType] {
                match self {
                    $($enum::$variant => &[$(HostType::$p),*],)*
                }
            }

            /// Result types.
            pub fn results(self) -> &'static [HostType] {
                match self {
                    $($enum::$variant => &[$(HostType::$r),*],)*
                }
            }
        }
    };
}

host_calls! {
    /// The host imports added by instrumentation, module `heddle_rt`, in
    /// order (appended after the module's own function imports).
    pub enum RtImport in "heddle_rt" {
        /// `access(site, addr) -> i32`: a yield point before an access, fence
        /// or import call; non-zero means "call `switch` now".
        Access = "access" (I32, I32) -> (I32);
        /// `switch() -> i32`: give up the CPU until the scheduler picks this
        /// thread again; returns the preemption budget of the slice that
        /// starts then (the guest stores it in the budget global).
        Switch = "switch" () -> (I32);
        /// `wait32(site, addr, expected: i32, timeout_ns: i64) -> i32`.
        Wait32 = "wait32" (I32, I32, I32, I64) -> (I32);
        /// `wait64(site, addr, expected: i64, timeout_ns: i64) -> i32`.
        Wait64 = "wait64" (I32, I32, I64, I64) -> (I32);
        /// `notify(site, addr, count) -> i32`: the number woken, or -1 when
        /// the scheduler picked another thread first: then the guest calls
        /// `notify_switched` with the same arguments.
        Notify = "notify" (I32, I32, I32) -> (I32);
        /// `budget(site) -> i32`: the preemption budget ran out at a
        /// back-edge or entry; returns the next slice's budget.
        Budget = "budget" (I32) -> (I32);
        /// `range(site, addr, len) -> i32`: a yield point before
        /// `memory.fill`.
        Range = "range" (I32, I32, I32) -> (I32);
        /// `copy(site, dst, src, len) -> i32`: a yield point before
        /// `memory.copy`.
        Copy = "copy" (I32, I32, I32, I32) -> (I32);
        /// `call_catching(arg, fn) -> i32`: calls table function `fn(arg)` and
        /// returns its result, or the value passed to `pthread_exit`.
        CallCatching = "call_catching" (I32, I32) -> (I32);
        /// `locked(site, addr, ret)`: a lock operation called at `site` on the
        /// object at `addr` returned `ret` (ownership bookkeeping, no yield).
        /// Not called after an unlock.
        Locked = "locked" (I32, I32, I32) -> ();
        /// `grow(delta) -> i32`: replaces `memory.grow` (the runtime keeps the
        /// memory's size itself, so that memories can be recycled across
        /// runs).
        Grow = "grow" (I32) -> (I32);
        /// `size() -> i32`: replaces `memory.size`.
        Size = "size" () -> (I32);
        /// `alloc_args(site, a0, a1, a2)`: an allocator call at `site` is
        /// about to be made with these arguments (unused ones are 0).
        AllocArgs = "alloc_args" (I32, I32, I32, I32) -> ();
        /// `alloc_arg(i) -> i32`: the i-th argument to really pass (widened by
        /// redzones, or the real pointer to free).
        AllocArg = "alloc_arg" (I32) -> (I32);
        /// `alloc_post(site, result) -> i32`: the allocator returned `result`;
        /// returns what the caller gets (the pointer past the left redzone).
        AllocPost = "alloc_post" (I32, I32) -> (I32);
        /// `notify_switched(site, addr, count) -> i32`: after `notify`
        /// returned -1, waits until this thread runs again (its new slice's
        /// budget goes to the budget global), then notifies; returns the
        /// number woken.
        NotifySwitched = "notify_switched" (I32, I32, I32) -> (I32);
        /// `unreachable()`: in place of each `unreachable` instruction (an
        /// `abort`, a Rust panic, a failed assertion): traps as the
        /// instruction would, through the host, without the signal a trap
        /// in wasm code raises (most of a failing run's time).
        Unreachable = "unreachable" () -> ();
    }
}

host_calls! {
    /// The guest SDK, module `heddle`: what `heddle.h` declares for programs
    /// to call (pointers are `i32` addresses of C strings).
    pub enum SdkImport in "heddle" {
        /// `assert(cond, msg)`: a failed heddle assertion when `cond` is 0.
        Assert = "assert" (I32, I32) -> ();
        /// `fail(msg)`: a failed heddle assertion.
        Fail = "fail" (I32) -> ();
        /// `yield()`: a scheduling point.
        Yield = "yield" () -> ();
        /// `event(name)`: a label in the trace.
        Event = "event" (I32) -> ();
        /// `thread_name(name)`: names the calling thread in reports.
        ThreadName = "thread_name" (I32) -> ();
        /// `choose(n) -> i32`: a value in `0..n` the strategy picks.
        Choose = "choose" (I32) -> (I32);
        /// `thread_exit(value)`: `pthread_exit`, ending the thread with
        /// `value`.
        ThreadExit = "thread_exit" (I32) -> ();
        /// `sig_action(sig, kind, deliver)`: signal `sig`'s disposition
        /// becomes the default action (`kind` 0), ignored (1) or a handler
        /// (2), which the host runs by calling table function
        /// `deliver(sig)` on the receiving thread.
        SigAction = "sig_action" (I32, I32, I32) -> ();
        /// `sig_mask(how, set) -> old`: the calling thread's signal mask,
        /// changed by `how` (0 block, 1 unblock, 2 set, 3 only read); a
        /// pending signal it unblocks is delivered before the call returns.
        SigMask = "sig_mask" (I32, I64) -> (I64);
        /// `sig_kill(thread, sig) -> i32`: makes `sig` pending for the
        /// thread whose `pthread_t` is `thread` (0: the calling thread, -1:
        /// the process, one of its threads that does not block `sig`); a
        /// signal to the caller is delivered before the call returns. 0, or
        /// -1 when no such thread lives.
        SigKill = "sig_kill" (I32, I32) -> (I32);
        /// `sig_pending() -> set`: the calling thread's pending signals.
        SigPending = "sig_pending" () -> (I64);
        /// `sig_wait(set, suspend) -> sig`: blocks until a signal of `set`
        /// is pending and takes it (`sigwait`); with `suspend`, `set` is
        /// the mask to wait under and the signal is delivered instead
        /// (`sigsuspend`, `pause`).
        SigWait = "sig_wait" (I64, I32) -> (I32);
        /// `sig_timer(ns, interval) -> left`: the process's real-time
        /// timer (`alarm`, `setitimer(ITIMER_REAL)`): `SIGALRM` goes to the
        /// process `ns` virtual nanoseconds from now (0: never), then every
        /// `interval` nanoseconds (0: once); returns the nanoseconds that
        /// were left of the previous setting. `ns` = `u64::MAX` only reads
        /// what is left, changing nothing.
        SigTimer = "sig_timer" (I64, I64) -> (I64);
        /// `sig_interrupted() -> i32`: 1 when a signal handler ran during
        /// one of the calling thread's futex waits since it last asked
        /// (cleared by asking), else 0.
        SigInterrupted = "sig_interrupted" () -> (I32);
        /// `pipe(fds, flags) -> errno`: a new pipe, its read and write
        /// descriptors written to `fds` (bit 0 of `flags`: `O_NONBLOCK`).
        Pipe = "pipe" (I32, I32) -> (I32);
        /// `socketpair(fds, flags) -> errno`: a new pair of connected
        /// stream sockets, as `pipe`.
        SocketPair = "socketpair" (I32, I32) -> (I32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_counts_match() {
        let mut names: Vec<&str> = RtImport::ALL.iter().map(|i| i.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len() as u32, RtImport::COUNT);
        assert_eq!(RtImport::COUNT, 17);
        assert_eq!(
            RtImport::ALL[RtImport::NotifySwitched as usize],
            RtImport::NotifySwitched
        );
        assert_eq!(
            RtImport::ALL[RtImport::Unreachable as usize],
            RtImport::Unreachable
        );
        assert_eq!(SdkImport::ALL.len() as u32, SdkImport::COUNT);
    }

    /// The guest side names exactly the declared SDK functions: the
    /// header's `HEDDLE_IMPORT("name")` declarations and the compatibility
    /// library's `import_module("heddle"), import_name("name")` ones.
    #[test]
    fn the_guest_sdk_declares_the_sdk() {
        let header = include_str!("../../../guest-sdk/include/heddle.h");
        let compat = concat!(
            include_str!("../../../guest-sdk/compat/compat.c"),
            include_str!("../../../guest-sdk/compat/signals.c"),
            include_str!("../../../guest-sdk/compat/semaphore.c"),
            include_str!("../../../guest-sdk/compat/net.c")
        );
        let mut guest: Vec<&str> = header
            .split("HEDDLE_IMPORT(\"")
            .skip(1)
            .chain(
                compat
                    .split("import_module(\"heddle\"), import_name(\"")
                    .skip(1),
            )
            .filter_map(|rest| rest.split('"').next())
            .filter(|n| *n != "name")
            .collect();
        guest.sort_unstable();
        guest.dedup();
        let mut declared: Vec<&str> = SdkImport::ALL.iter().map(|i| i.name()).collect();
        declared.sort_unstable();
        assert_eq!(guest, declared);
    }
}
