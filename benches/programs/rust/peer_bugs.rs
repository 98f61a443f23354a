//! Classic concurrency bugs after the ones in shuttle's and loom's test
//! suites, on plain `std`, one per argument (`peer_bugs.wasm -- ring3`).
//! `benches/peers/rust_bugs.rs` has the same logic against shuttle's types;
//! `benches/rust-peers.sh` measures how soon each tool finds each bug.
//! Built with `rustc --edition 2021 --target wasm32-wasip1-threads -g -O`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

/// Two threads each add 1 twice to an atomic counter with a load and a
/// separate store: an increment made in between is lost.
fn lost_update() {
    let n = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..2)
        .map(|_| {
            let n = Arc::clone(&n);
            thread::spawn(move || {
                for _ in 0..2 {
                    let v = n.load(Ordering::SeqCst);
                    n.store(v + 1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(n.load(Ordering::SeqCst), 4, "lost update");
}

/// One thread clears an `Option` under a mutex; the other checks it in one
/// critical section and unwraps it in another (PCT paper, figure 1b).
fn check_then_act() {
    let x = Arc::new(Mutex::new(Some(1u32)));
    let clearer = {
        let x = Arc::clone(&x);
        thread::spawn(move || {
            *x.lock().unwrap() = None;
        })
    };
    let user = {
        let x = Arc::clone(&x);
        thread::spawn(move || {
            let present = x.lock().unwrap().is_some();
            if present {
                let v = x.lock().unwrap().expect("checked, then gone");
                assert_eq!(v, 1);
            }
        })
    };
    clearer.join().unwrap();
    user.join().unwrap();
}

/// Double-checked initialisation with the flag read and set apart from the
/// work: two threads can both see it unset and both initialise.
fn double_init() {
    let ready = Arc::new(AtomicBool::new(false));
    let inits = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..2)
        .map(|_| {
            let (ready, inits) = (Arc::clone(&ready), Arc::clone(&inits));
            thread::spawn(move || {
                if !ready.load(Ordering::Acquire) {
                    inits.fetch_add(1, Ordering::Relaxed);
                    ready.store(true, Ordering::Release);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(inits.load(Ordering::Relaxed), 1, "initialised twice");
}

/// A waiter reads the flag in one critical section and then waits on the
/// condition variable in another without checking it again: a notify in
/// between is lost and the waiter sleeps for good (a deadlock).
fn lost_wakeup() {
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let notifier = {
        let pair = Arc::clone(&pair);
        thread::spawn(move || {
            let (m, c) = &*pair;
            *m.lock().unwrap() = true;
            c.notify_one();
        })
    };
    let (m, c) = &*pair;
    let ready = *m.lock().unwrap();
    if !ready {
        let g = m.lock().unwrap();
        let _g = c.wait(g).unwrap();
    }
    notifier.join().unwrap();
}

/// Two producers send their id on a channel; the consumer assumes the
/// first producer's message comes first.
fn channel_order() {
    let (tx, rx) = mpsc::channel();
    let hs: Vec<_> = (0..2u32)
        .map(|id| {
            let tx = tx.clone();
            thread::spawn(move || tx.send(id).unwrap())
        })
        .collect();
    drop(tx);
    let first = rx.recv().unwrap();
    assert_eq!(first, 0, "producer 1 overtook producer 0");
    for h in hs {
        h.join().unwrap();
    }
}

/// Three threads each take lock i, then lock i+1 (mod 3): a ring deadlock.
fn ring3() {
    let locks: Arc<Vec<Mutex<u32>>> = Arc::new((0..3).map(Mutex::new).collect());
    let hs: Vec<_> = (0..3)
        .map(|i| {
            let locks = Arc::clone(&locks);
            thread::spawn(move || {
                let mut a = locks[i].lock().unwrap();
                let b = locks[(i + 1) % 3].lock().unwrap();
                *a += *b;
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    match which.as_str() {
        "lost_update" => lost_update(),
        "check_then_act" => check_then_act(),
        "double_init" => double_init(),
        "lost_wakeup" => lost_wakeup(),
        "channel_order" => channel_order(),
        "ring3" => ring3(),
        other => panic!("unknown case {other:?}"),
    }
}
