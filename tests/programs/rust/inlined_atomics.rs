// Two threads each increment a counter twice with a separate load and
// store: a lost update. The atomics are `core`'s, inlined into the closure.
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

fn main() {
    let c = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || {
                for _ in 0..2 {
                    let v = c.load(SeqCst);
                    c.store(v + 1, SeqCst);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(c.load(SeqCst), 4);
}
