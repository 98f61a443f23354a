//! SIGINT and SIGTERM as a request to stop. Long commands (campaigns,
//! explorations) check [`requested`] between runs: they stop taking new
//! work, finish the runs in flight, write what they have, and exit with
//! [`exit_code`] (128 + the signal, the shell's convention). A second
//! signal of the same kind ends the process at once (the handler resets).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The first stop signal received (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Set with the signal number; for code that polls a flag (the explorer).
pub static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    let _ = SIGNAL.compare_exchange(0, sig, Ordering::Relaxed, Ordering::Relaxed);
    STOP.store(true, Ordering::Relaxed);
}

/// Catches SIGINT and SIGTERM (once each: the next one has its default
/// effect). Called by commands that stop gracefully.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask"
        // value; the handler only stores to atomics, which is
        // async-signal-safe.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            act.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
}

/// The signal that asked to stop, if one did.
pub fn requested() -> Option<i32> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        s => Some(s),
    }
}

/// The exit code of a command stopped by `sig`: 128 + its number (130 for
/// SIGINT, 143 for SIGTERM).
pub fn exit_code(sig: i32) -> i32 {
    128 + sig
}

/// `SIGINT`, `SIGTERM`, or `signal N`.
pub fn name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}
