//! Rust's synchronisation, the way a crate's tests use it: atomics through a
//! small helper type, a `Mutex` and a `Condvar` through a queue, a channel,
//! and threads spawned in a loop. The site-table test (tests/e2e/site_table.rs) expects a
//! site per operation on its own line at opt-level 0 and 2; keep each
//! operation on its own line (and update the test when this file changes).
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;

struct Stats {
    hits: AtomicUsize,
    peak: AtomicUsize,
    done: AtomicBool,
}

impl Stats {
    fn hit(&self, n: usize) {
        let now = self.hits.fetch_add(n, Ordering::AcqRel) + n;
        let mut seen = self.peak.load(Ordering::Acquire);
        while now > seen {
            match self.peak.compare_exchange(seen, now, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(v) => seen = v,
            }
        }
    }

    fn finish(&self) {
        fence(Ordering::SeqCst);
        self.done.store(true, Ordering::Release);
    }
}

struct Queue {
    items: Mutex<Vec<usize>>,
    ready: Condvar,
}

impl Queue {
    fn push(&self, v: usize) {
        let mut items = self.items.lock().unwrap();
        items.push(v);
        drop(items);
        self.ready.notify_one();
    }

    fn pop(&self) -> usize {
        let mut items = self.items.lock().unwrap();
        while items.is_empty() {
            items = self.ready.wait(items).unwrap();
        }
        items.pop().unwrap()
    }
}

fn main() {
    let stats = Arc::new(Stats {
        hits: AtomicUsize::new(0),
        peak: AtomicUsize::new(0),
        done: AtomicBool::new(false),
    });
    let queue = Arc::new(Queue {
        items: Mutex::new(Vec::new()),
        ready: Condvar::new(),
    });
    let (done_tx, done_rx) = mpsc::channel();
    let mut handles = Vec::new();
    for id in 1..=2 {
        let (stats, queue) = (Arc::clone(&stats), Arc::clone(&queue));
        let done_tx = done_tx.clone();
        handles.push(thread::spawn(move || {
            queue.push(id);
            stats.hit(id);
            done_tx.send(id).unwrap();
        }));
    }
    let got = queue.pop() + queue.pop();
    let sent = done_rx.recv().unwrap() + done_rx.recv().unwrap();
    assert_eq!(sent, 3);
    for h in handles {
        h.join().unwrap();
    }
    stats.finish();
    assert_eq!(got, 3);
    assert_eq!(stats.hits.load(Ordering::Acquire), 3);
    println!("peak {}", stats.peak.load(Ordering::Relaxed));
}
