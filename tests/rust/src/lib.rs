//! Three classic concurrency bugs as ordinary `std` tests. Each passes almost
//! always when run natively; `heddle cargo test` finds the schedule that
//! breaks it. Build with `--features fixed` for the corrected variants.

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::{Arc, Condvar, Mutex};
    use std::thread;

    /// Two threads each add 1 twice to a shared counter.
    #[test]
    fn lost_update() {
        let c = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let c = Arc::clone(&c);
                thread::spawn(move || {
                    for _ in 0..2 {
                        increment(&c);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(c.load(SeqCst), 4, "lost update");
    }

    #[cfg(not(feature = "fixed"))]
    fn increment(c: &AtomicUsize) {
        let v = c.load(SeqCst); // BUG: read, then write back: not one step
        c.store(v + 1, SeqCst);
    }

    #[cfg(feature = "fixed")]
    fn increment(c: &AtomicUsize) {
        c.fetch_add(1, SeqCst);
    }

    /// Two threads take two locks, in opposite orders.
    #[test]
    fn abba_deadlock() {
        let a = Arc::new(Mutex::new(0));
        let b = Arc::new(Mutex::new(0));
        let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
        let t = thread::spawn(move || {
            let _ga = a2.lock().unwrap();
            let mut gb = b2.lock().unwrap();
            *gb += 1;
        });
        {
            #[cfg(not(feature = "fixed"))]
            let (_gb, mut ga) = (b.lock().unwrap(), a.lock().unwrap()); // BUG: b, then a
            #[cfg(feature = "fixed")]
            let (mut ga, _gb) = (a.lock().unwrap(), b.lock().unwrap());
            *ga += 1;
        }
        t.join().unwrap();
        assert_eq!(*a.lock().unwrap() + *b.lock().unwrap(), 2);
    }

    /// A waiter checks a flag once, then waits for a notification that may
    /// already have been sent.
    #[test]
    fn condvar_missed_wakeup() {
        let pair = Arc::new((Mutex::new(()), Condvar::new()));
        let ready = Arc::new(AtomicBool::new(false));
        let (p2, r2) = (Arc::clone(&pair), Arc::clone(&ready));
        let notifier = thread::spawn(move || {
            #[cfg(not(feature = "fixed"))]
            r2.store(true, SeqCst); // BUG: set without the lock the waiter checks under
            #[cfg(feature = "fixed")]
            {
                let _g = p2.0.lock().unwrap();
                r2.store(true, SeqCst);
            }
            p2.1.notify_one();
        });
        let (lock, cvar) = &*pair;
        let guard = lock.lock().unwrap();
        #[cfg(not(feature = "fixed"))]
        if !ready.load(SeqCst) {
            let _g = cvar.wait(guard).unwrap(); // BUG: the notify may come before this wait
        }
        #[cfg(feature = "fixed")]
        let _g = cvar.wait_while(guard, |_| !ready.load(SeqCst)).unwrap();
        notifier.join().unwrap();
    }

    /// Skipped: `heddle cargo test` reports `#[ignore]`d tests as skipped.
    #[test]
    #[ignore = "an example of a test heddle skips"]
    fn ignored() {}
}
