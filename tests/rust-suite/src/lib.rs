//! Three tests at the edge of what `wasm32-wasip1-threads` can run:
//! a thousand threads (runs), a caught panic and a spawned process (cannot
//! run: the target's `std` aborts on panic and has no processes).

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Barrier, Mutex};

    /// A thousand scoped threads alive at once (each waits for all the
    /// others), each bumping a counter and pushing to a shared vector.
    #[test]
    fn thousand_threads() {
        const N: usize = 1000;
        let count = AtomicUsize::new(0);
        let seen = Mutex::new(Vec::new());
        let all = Barrier::new(N);
        std::thread::scope(|s| {
            for i in 0..N {
                let (count, seen, all) = (&count, &seen, &all);
                s.spawn(move || {
                    count.fetch_add(1, Ordering::Relaxed);
                    all.wait();
                    seen.lock().unwrap().push(i);
                });
            }
        });
        assert_eq!(count.load(Ordering::Relaxed), N);
        assert_eq!(seen.into_inner().unwrap().len(), N);
    }

    /// A panic caught with `catch_unwind`.
    #[test]
    fn catches_a_panic() {
        let r = std::panic::catch_unwind(|| {
            let v: Vec<u32> = Vec::new();
            v[1]
        });
        assert!(r.is_err());
    }

    /// A panic the harness expects.
    #[test]
    #[should_panic(expected = "empty")]
    fn expects_a_panic() {
        let v: Vec<u32> = Vec::new();
        assert!(!v.is_empty(), "empty");
    }

    /// A child process.
    #[test]
    fn spawns_a_process() {
        let out = std::process::Command::new("echo")
            .arg("hi")
            .output()
            .unwrap();
        assert!(out.status.success());
    }
}
