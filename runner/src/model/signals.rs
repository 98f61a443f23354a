//! POSIX signal numbers and default actions (musl's numbering), for the
//! runtime's signal delivery (`runtime::signals`).

/// Signal `sig`'s bit in a set (bit `sig - 1`).
pub const fn bit(sig: u32) -> u64 {
    1u64 << ((sig - 1) & 63)
}

/// `SIGKILL` and `SIGSTOP`, which no mask blocks.
pub const UNBLOCKABLE: u64 = bit(9) | bit(19);

/// Signals whose default action is to do nothing here: `SIGCHLD`,
/// `SIGCONT`, `SIGURG`, `SIGWINCH`, and the stop signals (no job control
/// in the sandbox).
pub const DEFAULT_IGNORED: u64 =
    bit(17) | bit(18) | bit(19) | bit(20) | bit(21) | bit(22) | bit(23) | bit(28);

/// The name of signal `sig` (musl's numbering).
pub fn name(sig: u32) -> String {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match NAMES.get(sig.wrapping_sub(1) as usize) {
        Some(n) => (*n).to_string(),
        None => format!("signal {sig}"),
    }
}

/// Whether a signal sent now is discarded: ignored, explicitly (`ignored`)
/// or by default, and not handled (`handled`).
pub fn discarded(handled: u64, ignored: u64, b: u64) -> bool {
    handled & b == 0 && (ignored & b != 0 || DEFAULT_IGNORED & b != 0)
}
