//! The futex table: which threads are parked on which address, in arrival
//! order. Which of several waiters a `notify` wakes is a scheduling decision
//! made by the caller; this table only keeps the queues.

use super::Tid;

#[derive(Debug, Default, Clone)]
/// Threads parked in `memory.atomic.wait`, with the address each waits on,
/// in the order they parked: one list for all addresses (an address's queue
/// is its entries in order), since at most one entry per thread is parked
/// at once, and a vector keeps its capacity from run to run where a map of
/// queues allocated at every first wait on an address.
pub struct FutexTable {
    parked: Vec<(u32, Tid)>,
}

impl FutexTable {
    /// Parks `tid` on `addr`, behind the threads already waiting there.
    pub fn park(&mut self, addr: u32, tid: Tid) {
        self.parked.push((addr, tid));
    }

    /// How many threads are parked on `addr`.
    pub fn waiting(&self, addr: u32) -> usize {
        self.parked.iter().filter(|p| p.0 == addr).count()
    }

    /// Removes the waiter at `index` of `addr`'s queue (oldest first).
    pub fn take(&mut self, addr: u32, index: usize) -> Tid {
        let i = self
            .parked
            .iter()
            .enumerate()
            .filter(|(_, p)| p.0 == addr)
            .nth(index)
            .map(|(i, _)| i)
            .expect("futex queue");
        self.parked.remove(i).1
    }

    /// Removes `tid` wherever it waits (timeout).
    pub fn remove(&mut self, addr: u32, tid: Tid) {
        self.parked.retain(|&p| p != (addr, tid));
    }

    /// Parks no thread any more; the capacity stays.
    pub fn clear(&mut self) {
        self.parked.clear();
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
        f.park(8, 4);
        assert_eq!(f.waiting(8), 3);
        assert_eq!(f.take(8, 1), 2);
        f.remove(8, 1);
        assert_eq!(f.waiting(8), 1);
        assert_eq!(f.take(8, 0), 4);
        assert_eq!(f.waiting(8), 0);
        assert_eq!(f.waiting(16), 1);
        assert_eq!(f.take(16, 0), 3);
        f.park(16, 5);
        f.clear();
        assert_eq!(f.waiting(16), 0);
    }
}
