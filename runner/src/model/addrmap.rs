//! A map keyed by guest address, kept as a vector sorted by address.
//!
//! For maps a run keeps small and changes often: the lock owners, the
//! `pthread_t` handles, and the heap's blocks while there are few of them
//! (`heap::Blocks` moves to a B-tree past 256, where an insert here would
//! move tens of kilobytes). A `BTreeMap` allocates a node for its first
//! entry and frees it with its last; a vector keeps its capacity, and the
//! run's state hands it to the next run emptied
//! ([`Scratch`](crate::runtime::state::Scratch)). Iteration is by address,
//! as a `BTreeMap`'s.

/// Entries `(address, value)`, sorted by address, addresses distinct.
#[derive(Debug, Clone)]
pub struct AddrMap<V> {
    entries: Vec<(u32, V)>,
}

impl<V> Default for AddrMap<V> {
    fn default() -> Self {
        AddrMap {
            entries: Vec::new(),
        }
    }
}

impl<V> AddrMap<V> {
    fn find(&self, addr: u32) -> Result<usize, usize> {
        self.entries.binary_search_by_key(&addr, |e| e.0)
    }

    /// The value at `addr`.
    pub fn get(&self, addr: u32) -> Option<&V> {
        self.find(addr).ok().map(|i| &self.entries[i].1)
    }

    /// The value at `addr`, to change.
    pub fn get_mut(&mut self, addr: u32) -> Option<&mut V> {
        self.find(addr).ok().map(|i| &mut self.entries[i].1)
    }

    /// Sets the value at `addr`; returns the one it replaces.
    pub fn insert(&mut self, addr: u32, value: V) -> Option<V> {
        match self.find(addr) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (addr, value));
                None
            }
        }
    }

    /// Takes the value at `addr` out.
    pub fn remove(&mut self, addr: u32) -> Option<V> {
        self.find(addr).ok().map(|i| self.entries.remove(i).1)
    }

    /// Empties the map; its capacity stays.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// How many entries the map has.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every entry, by address.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (u32, &V)> {
        self.entries.iter().map(|(a, v)| (*a, v))
    }

    /// Every value, by address.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> {
        self.entries.iter().map(|(_, v)| v)
    }

    /// The entries at addresses below `addr`, by address.
    pub fn below(&self, addr: u32) -> &[(u32, V)] {
        &self.entries[..self.entries.partition_point(|e| e.0 < addr)]
    }

    /// The entry at the highest address at or below `addr`.
    pub fn at_or_below(&self, addr: u32) -> Option<&(u32, V)> {
        let n = self.entries.partition_point(|e| e.0 <= addr);
        n.checked_sub(1).map(|i| &self.entries[i])
    }

    /// The entry at the lowest address at or above `addr`.
    pub fn at_or_above(&self, addr: u32) -> Option<&(u32, V)> {
        self.entries
            .get(self.entries.partition_point(|e| e.0 < addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Every operation agrees with a `BTreeMap` on a deterministic stream
    /// of inserts, removes and look-ups.
    #[test]
    fn agrees_with_a_btree_map() {
        let mut m = AddrMap::default();
        let mut b = BTreeMap::new();
        let mut x = 0x9e37_79b9u32;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let addr = x % 64 * 8
                + if x.is_multiple_of(7) {
                    u32::MAX - 600
                } else {
                    0
                };
            match x % 5 {
                0 | 1 => assert_eq!(m.insert(addr, step), b.insert(addr, step)),
                2 => assert_eq!(m.remove(addr), b.remove(&addr)),
                3 => {
                    if let Some(v) = m.get_mut(addr) {
                        *v += 1;
                    }
                    if let Some(v) = b.get_mut(&addr) {
                        *v += 1;
                    }
                }
                _ => {}
            }
            assert_eq!(m.get(addr), b.get(&addr));
            assert_eq!(
                m.at_or_below(addr).map(|e| (e.0, e.1)),
                b.range(..=addr).next_back().map(|(&a, &v)| (a, v))
            );
            assert_eq!(
                m.at_or_above(addr).map(|e| (e.0, e.1)),
                b.range(addr..).next().map(|(&a, &v)| (a, v))
            );
            assert!(m
                .below(addr)
                .iter()
                .map(|e| (e.0, e.1))
                .eq(b.range(..addr).map(|(&a, &v)| (a, v))));
            if step.is_multiple_of(1000) {
                assert!(m
                    .iter()
                    .map(|(a, &v)| (a, v))
                    .eq(b.iter().map(|(&a, &v)| (a, v))));
            }
        }
        assert_eq!(m.is_empty(), b.is_empty());
        m.clear();
        assert!(m.is_empty() && m.get(8).is_none() && m.at_or_above(0).is_none());
    }
}
