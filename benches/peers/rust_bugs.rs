//! The bugs of `benches/programs/rust/peer_bugs.rs`, the same logic written
//! against shuttle's `sync` and `thread` modules. Included with `#[path]` by
//! the `rust_peers` bench and by the tests, because shuttle is a
//! dev-dependency of this crate and the library cannot name it.

use shuttle::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use shuttle::sync::mpsc;
use shuttle::sync::{Arc, Condvar, Mutex};
use shuttle::thread;

/// One bug: its argument to `peer_bugs.wasm` and its shuttle port.
pub struct Bug {
    /// The argument that selects it in `peer_bugs.rs`.
    pub name: &'static str,
    /// What goes wrong, for the table.
    pub what: &'static str,
    /// One execution under shuttle; panics (or deadlocks) when the bug hits.
    pub shuttle: fn(),
}

/// Every bug, in the order of `peer_bugs.rs`.
pub const BUGS: [Bug; 6] = [
    Bug {
        name: "lost_update",
        what: "atomic load + store increment, 2 threads × 2",
        shuttle: lost_update,
    },
    Bug {
        name: "check_then_act",
        what: "Mutex check and act in two critical sections",
        shuttle: check_then_act,
    },
    Bug {
        name: "double_init",
        what: "double-checked init with a separate flag",
        shuttle: double_init,
    },
    Bug {
        name: "lost_wakeup",
        what: "Condvar wait without re-checking (deadlock)",
        shuttle: lost_wakeup,
    },
    Bug {
        name: "channel_order",
        what: "mpsc consumer assumes producer order",
        shuttle: channel_order,
    },
    Bug {
        name: "ring3",
        what: "3 threads, 3 Mutexes taken in a ring (deadlock)",
        shuttle: ring3,
    },
];

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
