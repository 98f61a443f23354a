//! The one worker pool: a fixed number of scoped threads that take work
//! items (indices, seeds) from a shared counter in increasing order until
//! the items run out or one of them says stop. Campaigns (seeds) and
//! comparisons (trials) run on it; runs are pure functions of their seed,
//! so the order in which workers finish does not change any result.

use anyhow::Result;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// What a worker does after an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Take the next item.
    Go,
    /// Stop: no worker takes another item (items in flight finish).
    Stop,
}

/// Runs `f` on the items of `range` with `jobs` threads. Each item is
/// taken once; after an `f` returns [`Next::Stop`] no new item is taken.
pub fn drain(jobs: usize, range: Range<u64>, f: impl Fn(u64) -> Next + Sync) {
    let next = AtomicU64::new(range.start);
    let stop = AtomicBool::new(false);
    let work = || loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let item = next.fetch_add(1, Ordering::Relaxed);
        if item >= range.end {
            break;
        }
        if f(item) == Next::Stop {
            stop.store(true, Ordering::Relaxed);
            break;
        }
    };
    let n = range.end.saturating_sub(range.start);
    let jobs = (jobs.max(1) as u64).min(n.max(1)) as usize;
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(work);
        }
    });
}

/// `f` over `0..n` on `jobs` threads; the results in index order. The
/// first error stops the pool and is returned.
pub fn par_map<R: Send>(
    n: usize,
    jobs: usize,
    f: impl Fn(usize) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let out: Mutex<Vec<(usize, R)>> = Mutex::new(Vec::new());
    let error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    drain(jobs, 0..n as u64, |i| match f(i as usize) {
        Ok(r) => {
            out.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((i as usize, r));
            Next::Go
        }
        Err(e) => {
            let mut slot = error.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = Some(e);
            }
            Next::Stop
        }
    });
    if let Some(e) = error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let mut v = out.into_inner().unwrap_or_else(|e| e.into_inner());
    v.sort_by_key(|(i, _)| *i);
    Ok(v.into_iter().map(|(_, r)| r).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn every_item_once_in_order_and_stop_ends_the_pool() {
        let v = par_map(100, 4, |i| Ok(i * 2)).unwrap();
        assert_eq!(v, (0..100).map(|i| i * 2).collect::<Vec<_>>());
        let e = par_map(100, 3, |i| {
            if i == 10 {
                anyhow::bail!("ten")
            }
            Ok(i)
        });
        assert_eq!(e.unwrap_err().to_string(), "ten");
        let taken = AtomicUsize::new(0);
        drain(2, 5..1_000_000, |i| {
            taken.fetch_add(1, Ordering::Relaxed);
            if i >= 20 {
                Next::Stop
            } else {
                Next::Go
            }
        });
        let t = taken.load(Ordering::Relaxed);
        assert!((16..=18).contains(&t), "{t}");
        drain(8, 3..3, |_| unreachable!());
    }
}
