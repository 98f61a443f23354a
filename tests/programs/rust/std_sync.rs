//! Correct programs on Rust's `std::sync` and `std::thread`, one per
//! argument (`std_sync.wasm -- mutex`); each asserts its invariants and
//! must pass under every schedule. Built with
//! `rustc --target wasm32-wasip1-threads -g -O std_sync.rs`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Condvar, Mutex, Once, OnceLock, RwLock};
use std::thread;
use std::time::{Duration, Instant};

/// Three threads add to a counter under a `Mutex`.
fn mutex() {
    let total = Arc::new(Mutex::new(0u32));
    let hs: Vec<_> = (0..3)
        .map(|_| {
            let total = Arc::clone(&total);
            thread::spawn(move || {
                for _ in 0..2 {
                    *total.lock().unwrap() += 1;
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(*total.lock().unwrap(), 6);
}

/// A writer keeps two fields equal; readers never see them differ.
fn rwlock() {
    let pair = Arc::new(RwLock::new((0u32, 0u32)));
    let w = {
        let pair = Arc::clone(&pair);
        thread::spawn(move || {
            for _ in 0..2 {
                let mut g = pair.write().unwrap();
                g.0 += 1;
                g.1 += 1;
            }
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let pair = Arc::clone(&pair);
            thread::spawn(move || {
                for _ in 0..2 {
                    let g = pair.read().unwrap();
                    assert_eq!(g.0, g.1, "torn read");
                }
            })
        })
        .collect();
    w.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(*pair.read().unwrap(), (2, 2));
}

/// A bounded queue of one slot between a producer and a consumer, on a
/// `Mutex` and two `Condvar`s, each wait in a while loop.
fn condvar() {
    struct Slot {
        item: Option<u32>,
        done: bool,
    }
    let shared = Arc::new((
        Mutex::new(Slot {
            item: None,
            done: false,
        }),
        Condvar::new(),
        Condvar::new(),
    ));
    let consumer = {
        let shared = Arc::clone(&shared);
        thread::spawn(move || {
            let (m, not_empty, not_full) = &*shared;
            let mut sum = 0;
            loop {
                let mut g = m.lock().unwrap();
                while g.item.is_none() && !g.done {
                    g = not_empty.wait(g).unwrap();
                }
                match g.item.take() {
                    Some(v) => sum += v,
                    None => break,
                }
                not_full.notify_one();
            }
            sum
        })
    };
    let (m, not_empty, not_full) = &*shared;
    for v in 1..=3 {
        let mut g = m.lock().unwrap();
        while g.item.is_some() {
            g = not_full.wait(g).unwrap();
        }
        g.item = Some(v);
        not_empty.notify_one();
    }
    {
        let mut g = m.lock().unwrap();
        while g.item.is_some() {
            g = not_full.wait(g).unwrap();
        }
        g.done = true;
        not_empty.notify_all();
    }
    assert_eq!(consumer.join().unwrap(), 6);
}

/// `Once` and `OnceLock` run their initialiser exactly once, and every
/// caller sees its result.
fn once() {
    static INIT: Once = Once::new();
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    static CELL: OnceLock<u32> = OnceLock::new();
    static CELL_RUNS: AtomicUsize = AtomicUsize::new(0);
    let hs: Vec<_> = (0..3u32)
        .map(|i| {
            thread::spawn(move || {
                INIT.call_once(|| {
                    RUNS.fetch_add(1, Ordering::Relaxed);
                });
                assert!(INIT.is_completed());
                assert_eq!(RUNS.load(Ordering::Relaxed), 1);
                let v = *CELL.get_or_init(|| {
                    CELL_RUNS.fetch_add(1, Ordering::Relaxed);
                    40 + i
                });
                assert_eq!(Some(&v), CELL.get());
                v
            })
        })
        .collect();
    let vs: Vec<u32> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(vs.iter().all(|&v| v == vs[0]));
    assert_eq!(CELL_RUNS.load(Ordering::Relaxed), 1);
}

/// `mpsc::channel` with two senders, then `sync_channel` of capacity 0
/// (a rendezvous) and 1: every message arrives once, in each sender's order.
fn channels() {
    let (tx, rx) = mpsc::channel();
    let hs: Vec<_> = (0..2u32)
        .map(|id| {
            let tx = tx.clone();
            thread::spawn(move || {
                for k in 0..2 {
                    tx.send((id, k)).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let mut next = [0u32; 2];
    for (id, k) in rx {
        assert_eq!(next[id as usize], k, "out of order");
        next[id as usize] += 1;
    }
    assert_eq!(next, [2, 2]);
    for h in hs {
        h.join().unwrap();
    }
    for cap in [0, 1] {
        let (tx, rx) = mpsc::sync_channel(cap);
        let h = thread::spawn(move || {
            for k in 0..3u32 {
                tx.send(k).unwrap();
            }
        });
        let got: Vec<u32> = rx.iter().collect();
        assert_eq!(got, [0, 1, 2], "capacity {cap}");
        h.join().unwrap();
    }
}

/// `thread::park` in a loop on a flag, `unpark` after setting it.
fn park() {
    let flag = Arc::new(AtomicBool::new(false));
    let waiter = {
        let flag = Arc::clone(&flag);
        thread::spawn(move || {
            while !flag.load(Ordering::Acquire) {
                thread::park();
            }
        })
    };
    flag.store(true, Ordering::Release);
    waiter.thread().unpark();
    waiter.join().unwrap();
}

/// Scoped threads borrow the stack; a `Barrier` separates two phases.
fn scope_barrier() {
    let mut slots = [0u32; 3];
    let barrier = Barrier::new(3);
    let seen = AtomicUsize::new(0);
    thread::scope(|s| {
        for (i, slot) in slots.iter_mut().enumerate() {
            let (barrier, seen) = (&barrier, &seen);
            s.spawn(move || {
                *slot = i as u32 + 1;
                seen.fetch_add(1, Ordering::SeqCst);
                let leader = barrier.wait().is_leader();
                // Everyone arrived before anyone leaves.
                assert_eq!(seen.load(Ordering::SeqCst), 3);
                leader
            });
        }
    });
    assert_eq!(slots, [1, 2, 3]);
}

/// Timed waits, sleeps and clocks: `recv_timeout` that times out and one
/// that gets its message, `Condvar::wait_timeout`, `thread::sleep`.
fn timeouts() {
    let start = Instant::now();
    let (tx, rx) = mpsc::channel::<u32>();
    assert!(rx.recv_timeout(Duration::from_millis(5)).is_err());
    let h = thread::spawn(move || {
        thread::sleep(Duration::from_millis(1));
        tx.send(7).unwrap();
    });
    assert_eq!(rx.recv_timeout(Duration::from_secs(60)), Ok(7));
    h.join().unwrap();
    let pair = (Mutex::new(false), Condvar::new());
    let (m, c) = &pair;
    let g = m.lock().unwrap();
    let (g, r) = c.wait_timeout(g, Duration::from_millis(2)).unwrap();
    assert!(r.timed_out() && !*g);
    assert!(start.elapsed() >= Duration::from_millis(7));
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    match which.as_str() {
        "mutex" => mutex(),
        "rwlock" => rwlock(),
        "condvar" => condvar(),
        "once" => once(),
        "channels" => channels(),
        "park" => park(),
        "scope" => scope_barrier(),
        "timeouts" => timeouts(),
        other => panic!("unknown case {other:?}"),
    }
}
