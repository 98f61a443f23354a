//! The futex table: which threads are parked on which address, in arrival
//! order. Which of several waiters a `notify` wakes is a scheduling decision
//! made by the caller; this table only keeps the queues.

use super::Tid;
use std::collections::BTreeMap;

#[derive(Debug, Default, Clone)]
/// Threads parked in `memory.atomic.wait`, by address, in the order they parked.
pub struct FutexTable {
    queues: BTreeMap<u32, Vec<Tid>>,
}

impl FutexTable {
    /// Parks `tid` on `addr`, behind the threads already waiting there.
    pub fn park(&mut self, addr: u32, tid: Tid) {
        self.queues.entry(addr).or_default().push(tid);
    }

    /// Threads parked on `addr`, oldest first.
    pub fn waiters(&self, addr: u32) -> &[Tid] {
        self.queues.get(&addr).map(|v| v.as_slice()).unwrap_or(&[])
    }

    /// Removes the waiter at `index` of `addr`'s queue.
    pub fn take(&mut self, addr: u32, index: usize) -> Tid {
        let q = self.queues.get_mut(&addr).expect("futex queue");
        let tid = q.remove(index);
        if q.is_empty() {
            self.queues.remove(&addr);
        }
        tid
    }

    /// Removes `tid` wherever it waits (timeout).
    pub fn remove(&mut self, addr: u32, tid: Tid) {
        if let Some(q) = self.queues.get_mut(&addr) {
            q.retain(|&t| t != tid);
            if q.is_empty() {
                self.queues.remove(&addr);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_queues_per_address() {
        let mut f = FutexTable::default();
        f.park(8, 1);
        f.park(8, 2);
        f.park(16, 3);
        assert_eq!(f.waiters(8), &[1, 2]);
        assert_eq!(f.take(8, 1), 2);
        f.remove(8, 1);
        assert!(f.waiters(8).is_empty());
        assert_eq!(f.waiters(16), &[3]);
    }
}
