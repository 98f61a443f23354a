//! The `heddle` command: a thin shell over the library.

// A run allocates many small, short-lived objects (vector clocks, the
// schedule, per-call futures); mimalloc's thread-local free lists make
// that cheaper than the system allocator, especially with several workers.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // Behave like other Unix tools when the reader of our output goes away
    // (`heddle sites x.wasm | head`): end quietly instead of failing to print.
    // SAFETY: restoring the default disposition of a signal at start-up,
    // before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(heddle::cli::main());
}
