//! The bench programs written against shuttle, with the same logic as their
//! C sources. Included with `#[path]` by the bench and the tests, because
//! shuttle is a dev-dependency of this crate and the library cannot name it.

use heddle_peers::Case;
use shuttle::sync::{Arc, Condvar, Mutex};
use shuttle::thread;

/// The programs of the bench, each paired with its C source: the four the
/// per-run cost is judged on, and race_bank with no deposits, whose run is
/// only the start and end of its two threads (the floor under race_bank
/// 2×2's run).
pub const CASES: [Case; 5] = [
    Case {
        name: "race_bank 2×0 (fixed; threads only)",
        source: "targets/race_bank.c",
        args: &["2", "0"],
        fixed: true,
        shuttle: || race_bank(2, 0, true),
    },
    Case {
        name: "race_bank 2×2 (fixed)",
        source: "targets/race_bank.c",
        args: &["2", "2"],
        fixed: true,
        shuttle: || race_bank(2, 2, true),
    },
    Case {
        name: "race_bank 4×25 (fixed)",
        source: "targets/race_bank.c",
        args: &["4", "25"],
        fixed: true,
        shuttle: || race_bank(4, 25, true),
    },
    Case {
        name: "condvar_ring 16 threads × 2 rounds",
        source: "benches/programs/condvar_ring.c",
        args: &["16", "2"],
        fixed: false,
        shuttle: || condvar_ring(16, 2),
    },
    Case {
        name: "many_threads 100",
        source: "benches/programs/many_threads.c",
        args: &["100"],
        fixed: false,
        shuttle: || many_threads(100),
    },
];

/// `targets/race_bank.c`: `n` threads each make `k` deposits; main joins them
/// and checks the balance is `n * k`. Unless `fixed`, a deposit reads the
/// balance in one critical section and writes it back in another, so a
/// deposit made in between is lost.
pub fn race_bank(n: usize, k: usize, fixed: bool) {
    let balance = Arc::new(Mutex::new(0));
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let balance = Arc::clone(&balance);
            thread::spawn(move || {
                for _ in 0..k {
                    if fixed {
                        *balance.lock().unwrap() += 1;
                    } else {
                        let local = *balance.lock().unwrap();
                        // Another thread may deposit here; its deposit is
                        // overwritten below.
                        *balance.lock().unwrap() = local + 1;
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let balance = *balance.lock().unwrap();
    assert_eq!(
        balance,
        n * k,
        "lost update: balance is {balance}, expected {} ({n} threads x {k} deposits)",
        n * k
    );
}

/// The turn and how many times it has been passed, under one mutex.
struct Ring {
    turn: usize,
    passes: usize,
}

/// `benches/programs/condvar_ring.c`: `n` threads pass a turn around a ring
/// `rounds` times with one mutex and one condition variable; thread `i`
/// waits until the turn is `i`, hands it to `i + 1` and broadcasts.
pub fn condvar_ring(n: usize, rounds: usize) {
    let shared = Arc::new((Mutex::new(Ring { turn: 0, passes: 0 }), Condvar::new()));
    let threads: Vec<_> = (0..n)
        .map(|me| {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                let (lock, changed) = &*shared;
                for _ in 0..rounds {
                    let mut ring = lock.lock().unwrap();
                    while ring.turn != me {
                        ring = changed.wait(ring).unwrap();
                    }
                    ring.turn = (ring.turn + 1) % n;
                    ring.passes += 1;
                    changed.notify_all();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(shared.0.lock().unwrap().passes, n * rounds);
}

/// `benches/programs/many_threads.c`: main starts `n` threads that each
/// increment one mutex-protected counter, joins them and checks the total.
pub fn many_threads(n: usize) {
    let counter = Arc::new(Mutex::new(0));
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let counter = Arc::clone(&counter);
            thread::spawn(move || *counter.lock().unwrap() += 1)
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*counter.lock().unwrap(), n);
}
