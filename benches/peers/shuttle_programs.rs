//! The bench programs written against shuttle, with the same logic as their
//! C sources. Included with `#[path]` by the bench and the tests, because
//! shuttle is a dev-dependency of this crate and the library cannot name it.

use heddle_peers::Case;
use shuttle::sync::atomic::{AtomicUsize, Ordering};
use shuttle::sync::{Arc, Condvar, Mutex};
use shuttle::thread;

/// The programs of the bench, each paired with its C source: the four the
/// per-run cost is judged on, race_bank with no deposits, whose run is
/// only the start and end of its two threads (the floor under race_bank
/// 2×2's run), and three long runs of 10^6–10^7 steps each (a lock-heavy
/// loop, a bounded queue, a 256-thread pool), where the cost of a step
/// rather than of a run is measured.
pub const CASES: [Case; 8] = [
    Case {
        name: "race_bank 2×0 (fixed; threads only)",
        source: "targets/race_bank.c",
        args: &["2", "0"],
        fixed: true,
        shuttle: || race_bank(2, 0, true),
        long: false,
    },
    Case {
        name: "race_bank 2×2 (fixed)",
        source: "targets/race_bank.c",
        args: &["2", "2"],
        fixed: true,
        shuttle: || race_bank(2, 2, true),
        long: false,
    },
    Case {
        name: "race_bank 4×25 (fixed)",
        source: "targets/race_bank.c",
        args: &["4", "25"],
        fixed: true,
        shuttle: || race_bank(4, 25, true),
        long: false,
    },
    Case {
        name: "condvar_ring 16 threads × 2 rounds",
        source: "benches/programs/condvar_ring.c",
        args: &["16", "2"],
        fixed: false,
        shuttle: || condvar_ring(16, 2),
        long: false,
    },
    Case {
        name: "many_threads 100",
        source: "benches/programs/many_threads.c",
        args: &["100"],
        fixed: false,
        shuttle: || many_threads(100),
        long: false,
    },
    Case {
        name: "lock_loop 4 threads × 250,000",
        source: "benches/programs/lock_loop.c",
        args: &["4", "250000"],
        fixed: false,
        shuttle: || lock_loop(4, 250_000),
        long: true,
    },
    Case {
        name: "bounded_queue 4+4 threads × 100,000 items",
        source: "benches/programs/bounded_queue.c",
        args: &["4", "100000"],
        fixed: false,
        shuttle: || bounded_queue(4, 100_000),
        long: true,
    },
    Case {
        name: "thread_pool 256 workers × 100,000 jobs",
        source: "benches/programs/thread_pool.c",
        args: &["256", "100000"],
        fixed: false,
        shuttle: || thread_pool(256, 100_000),
        long: true,
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

/// `benches/programs/lock_loop.c`: `n` threads each take one mutex `k` times
/// to add to a counter; the total is checked.
pub fn lock_loop(n: usize, k: usize) {
    let counter = Arc::new(Mutex::new(0usize));
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let counter = Arc::clone(&counter);
            thread::spawn(move || {
                for _ in 0..k {
                    *counter.lock().unwrap() += 1;
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*counter.lock().unwrap(), n * k);
}

/// The queue of `bounded_queue`: at most [`SLOTS`] items.
struct Slots {
    items: std::collections::VecDeque<u64>,
}

/// Capacity of `bounded_queue`'s queue, as in the C source.
const SLOTS: usize = 64;

/// `benches/programs/bounded_queue.c`: `pairs` producers and `pairs`
/// consumers pass `per` items each through a queue of [`SLOTS`] slots
/// guarded by a mutex and two condition variables; every item must arrive
/// once.
pub fn bounded_queue(pairs: usize, per: usize) {
    let q = Arc::new((
        Mutex::new(Slots {
            items: std::collections::VecDeque::with_capacity(SLOTS),
        }),
        Condvar::new(),
        Condvar::new(),
    ));
    let totals = Arc::new(Mutex::new((0u64, 0usize)));
    let mut threads = Vec::new();
    for p in 0..pairs {
        let qp = Arc::clone(&q);
        threads.push(thread::spawn(move || {
            let (lock, not_full, not_empty) = &*qp;
            for i in 0..per {
                let mut s = lock.lock().unwrap();
                while s.items.len() == SLOTS {
                    s = not_full.wait(s).unwrap();
                }
                s.items.push_back((p * per + i) as u64);
                not_empty.notify_one();
            }
        }));
        let qc = Arc::clone(&q);
        let totals = Arc::clone(&totals);
        threads.push(thread::spawn(move || {
            let (lock, not_full, not_empty) = &*qc;
            let mut sum = 0u64;
            for _ in 0..per {
                let mut s = lock.lock().unwrap();
                while s.items.is_empty() {
                    s = not_empty.wait(s).unwrap();
                }
                sum += s.items.pop_front().expect("an item");
                not_full.notify_one();
            }
            let mut t = totals.lock().unwrap();
            t.0 += sum;
            t.1 += per;
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    let n = (pairs * per) as u64;
    assert_eq!(*totals.lock().unwrap(), (n * (n - 1) / 2, pairs * per));
}

/// The state of `thread_pool`'s pool.
struct Pool {
    next: usize,
    submitted: usize,
    done: usize,
    stopping: bool,
}

/// `benches/programs/thread_pool.c`: `workers` threads run `jobs` jobs
/// that main submits one by one; main waits until all are done, stops the
/// pool and checks each job ran once.
pub fn thread_pool(workers: usize, jobs: usize) {
    let pool = Arc::new((
        Mutex::new(Pool {
            next: 0,
            submitted: 0,
            done: 0,
            stopping: false,
        }),
        Condvar::new(),
        Condvar::new(),
    ));
    // A plain array in C: each job's slot is written by one thread.
    let results = Arc::new((0..jobs).map(|_| AtomicUsize::new(0)).collect::<Vec<_>>());
    let threads: Vec<_> = (0..workers)
        .map(|_| {
            let pool = Arc::clone(&pool);
            let results = Arc::clone(&results);
            thread::spawn(move || {
                let (lock, work, idle) = &*pool;
                let mut p = lock.lock().unwrap();
                loop {
                    while p.next == p.submitted && !p.stopping {
                        p = work.wait(p).unwrap();
                    }
                    if p.next == p.submitted {
                        break;
                    }
                    let job = p.next;
                    p.next += 1;
                    drop(p);
                    results[job].fetch_add(job + 1, Ordering::Relaxed);
                    p = lock.lock().unwrap();
                    p.done += 1;
                    if p.done == p.submitted {
                        idle.notify_one();
                    }
                }
            })
        })
        .collect();
    let (lock, work, idle) = &*pool;
    for _ in 0..jobs {
        let mut p = lock.lock().unwrap();
        p.submitted += 1;
        work.notify_one();
    }
    let mut p = lock.lock().unwrap();
    while p.done < jobs {
        p = idle.wait(p).unwrap();
    }
    p.stopping = true;
    work.notify_all();
    drop(p);
    for t in threads {
        t.join().unwrap();
    }
    for (j, r) in results.iter().enumerate() {
        assert_eq!(r.load(Ordering::Relaxed), j + 1);
    }
}
