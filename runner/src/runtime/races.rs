//! The race detector of one run: the happens-before state ([`Detector`],
//! the vector-clock core) and the per-run pieces around it — which events
//! are edges and which are plain accesses, the races found so far, and
//! whether the first one ends the run.
//!
//! The scheduler tells it what each thread executes ([`Races::executed`])
//! and the edges the events alone do not show: spawns, thread ends, futex
//! wakes, `pthread_join`, barrier and once departures, and fresh heap
//! memory.
//!
//! Invariants:
//! * A `Races` exists only in a run whose race mode is not
//!   [`RaceMode::Off`] (`Checkers::races` is `None` otherwise), so nothing
//!   is tracked in a run that does not look for races.
//! * Only the program's own synchronisation makes edges: the order in which
//!   the scheduler ran two threads never does.
//! * Races are reported once per pair of sites (in either order), in the
//!   order found; with [`RaceMode::Fail`] the first one is also returned to
//!   end the run, so a run ends with the first race it reports.
//! * It keeps no reference to guest memory or to the scheduler: everything
//!   it needs is passed in, so it can be driven on its own.

use crate::instrument::{SiteId, SiteInfo};
use crate::model::hb::{Detector, Race};
use crate::model::{EventKind, Pending, RaceMode, Tid};
use std::collections::BTreeSet;

/// The race detector's state for one run (see the module documentation).
#[derive(Debug, Clone)]
pub struct Races {
    /// The first race ends the run ([`RaceMode::Fail`]).
    fail: bool,
    /// Happens-before state.
    hb: Detector,
    /// Races found, one per pair of sites, in the order found.
    found: Vec<Race>,
    /// The pairs of sites (lower first) of the races in `found`.
    pairs: BTreeSet<(SiteId, SiteId)>,
}

impl Races {
    /// The detector of a run in race mode `mode` (`None` when it is off),
    /// in the buffers of an earlier run's detector when there is one
    /// (emptied: only their capacity carries over).
    pub fn new(mode: RaceMode, old: Option<Box<Races>>) -> Option<Box<Races>> {
        if mode == RaceMode::Off {
            return None;
        }
        let fail = mode == RaceMode::Fail;
        Some(match old {
            Some(mut r) => {
                r.fail = fail;
                r.hb.clear();
                r.found.clear();
                r.pairs.clear();
                r
            }
            None => Box::new(Races {
                fail,
                hb: Detector::new(),
                found: Vec::new(),
                pairs: BTreeSet::new(),
            }),
        })
    }

    /// Races found so far, one per pair of sites, in the order found.
    pub fn found(&self) -> &[Race] {
        &self.found
    }

    /// `tid` executes `p` at global step `step` (`info` tells which sites
    /// are atomic). Returns the race that ends the run, if any (a new one,
    /// with [`RaceMode::Fail`]).
    #[inline]
    pub fn executed(&mut self, tid: Tid, p: Pending, info: &[SiteInfo], step: u64) -> Option<Race> {
        let atomic = info.get(p.site as usize).is_some_and(|s| s.atomic);
        let hb = &mut self.hb;
        let race = match p.kind {
            EventKind::Read | EventKind::Write if atomic => {
                if p.kind == EventKind::Read {
                    hb.acquire(tid, p.addr);
                } else {
                    hb.release(tid, p.addr);
                }
                None
            }
            EventKind::Rmw | EventKind::Cmpxchg => {
                hb.rmw(tid, p.addr);
                None
            }
            EventKind::Wait => {
                hb.acquire(tid, p.addr);
                None
            }
            EventKind::Read => hb.access(tid, p.addr, p.len, false, p.site, step),
            EventKind::Write | EventKind::Copy | EventKind::Fill => {
                hb.access(tid, p.addr, p.len, true, p.site, step)
            }
            _ => None,
        }?;
        self.report(race)
    }

    /// Keeps `r` unless its pair of sites raced already; returns it when it
    /// ends the run.
    fn report(&mut self, r: Race) -> Option<Race> {
        let pair = (
            r.first.site.min(r.second.site),
            r.first.site.max(r.second.site),
        );
        if !self.pairs.insert(pair) {
            return None;
        }
        self.found.push(r);
        self.fail.then_some(r)
    }

    /// `parent` created `child`.
    #[inline]
    pub fn spawn(&mut self, parent: Tid, child: Tid) {
        self.hb.spawn(parent, child);
    }

    /// `tid` finished.
    #[inline]
    pub fn finish(&mut self, tid: Tid) {
        self.hb.finish(tid);
    }

    /// `notifier` woke `woken` from a futex wait.
    #[inline]
    pub fn wake(&mut self, notifier: Tid, woken: Tid) {
        self.hb.wake(notifier, woken);
    }

    /// `tid` left a barrier or a once initialiser whose control word is at
    /// `addr`: it acquires what every arrival released there.
    #[inline]
    pub fn departed(&mut self, tid: Tid, addr: u32) {
        self.hb.acquire(tid, addr);
    }

    /// `tid` wrote to pipe channel `chan` (or closed it).
    #[inline]
    pub fn sent(&mut self, tid: Tid, chan: u32) {
        self.hb.release_object(tid, chan);
    }

    /// `tid` read from pipe channel `chan`.
    #[inline]
    pub fn received(&mut self, tid: Tid, chan: u32) {
        self.hb.acquire_object(tid, chan);
    }

    /// `joiner`'s `pthread_join` of `joined` returned.
    #[inline]
    pub fn joined(&mut self, joiner: Tid, joined: Tid) {
        self.hb.join_thread(joiner, joined);
    }

    /// `[addr, addr + len)` is fresh heap memory: it has no history.
    #[inline]
    pub fn fresh(&mut self, addr: u32, len: u32) {
        self.hb.reset(addr, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instrument::SiteKind;

    /// Sites 0 and 1 are plain, 2 and 3 atomic.
    fn info() -> Vec<SiteInfo> {
        let site = |atomic, kind| SiteInfo {
            kind,
            atomic,
            size: 4,
            mem_offset: 0,
            takes_lock: false,
            inline_mutex: false,
            private: false,
        };
        vec![
            site(false, SiteKind::Write),
            site(false, SiteKind::Write),
            site(true, SiteKind::Write),
            site(true, SiteKind::Read),
        ]
    }

    fn ev(site: SiteId, kind: EventKind, addr: u32) -> Pending {
        Pending {
            site,
            kind,
            addr,
            len: 4,
        }
    }

    /// Threads 1 and 2, both created by thread 0.
    fn two_threads(mode: RaceMode) -> Races {
        let mut r = Races::new(mode, None).expect("on");
        r.spawn(0, 1);
        r.spawn(0, 2);
        *r
    }

    #[test]
    fn off_tracks_nothing() {
        assert!(Races::new(RaceMode::Off, None).is_none());
    }

    #[test]
    fn unsynchronised_writes_race_once_per_pair_of_sites() {
        let info = info();
        let mut r = two_threads(RaceMode::Report);
        assert_eq!(r.executed(1, ev(0, EventKind::Write, 64), &info, 1), None);
        // Reported, not returned: the run goes on.
        assert_eq!(r.executed(2, ev(1, EventKind::Write, 64), &info, 2), None);
        assert_eq!(r.found().len(), 1);
        let race = r.found()[0];
        assert_eq!(race.addr, 64);
        assert_eq!(
            (race.first.tid, race.first.site, race.first.write),
            (1, 0, true)
        );
        assert_eq!(
            (race.second.tid, race.second.site, race.second.step),
            (2, 1, 2)
        );
        // The same pair of sites (in either order) is not reported again.
        assert_eq!(r.executed(1, ev(0, EventKind::Write, 64), &info, 3), None);
        assert_eq!(r.executed(2, ev(1, EventKind::Write, 68), &info, 4), None);
        assert_eq!(r.executed(1, ev(0, EventKind::Write, 68), &info, 5), None);
        assert_eq!(r.found().len(), 1);
    }

    #[test]
    fn a_release_acquire_pair_orders_the_writes() {
        let info = info();
        let mut r = two_threads(RaceMode::Fail);
        assert_eq!(r.executed(1, ev(0, EventKind::Write, 64), &info, 1), None);
        // Thread 1 stores a flag atomically, thread 2 loads it.
        assert_eq!(r.executed(1, ev(2, EventKind::Write, 128), &info, 2), None);
        assert_eq!(r.executed(2, ev(3, EventKind::Read, 128), &info, 3), None);
        assert_eq!(r.executed(2, ev(1, EventKind::Write, 64), &info, 4), None);
        assert!(r.found().is_empty());
        // An acquire of another location gives no edge.
        assert_eq!(r.executed(1, ev(0, EventKind::Write, 72), &info, 5), None);
        assert_eq!(r.executed(1, ev(2, EventKind::Write, 128), &info, 6), None);
        assert_eq!(r.executed(2, ev(3, EventKind::Read, 132), &info, 7), None);
        let race = r.executed(2, ev(1, EventKind::Write, 72), &info, 8);
        assert_eq!(race.map(|x| x.addr), Some(72), "fail mode returns the race");
        assert_eq!(r.found().len(), 1);
    }

    #[test]
    fn rmw_wake_join_and_barrier_edges() {
        let info = info();
        // A compare-exchange both acquires and releases.
        let mut r = two_threads(RaceMode::Fail);
        r.executed(1, ev(0, EventKind::Write, 64), &info, 1);
        r.executed(1, ev(2, EventKind::Cmpxchg, 128), &info, 2);
        r.executed(2, ev(2, EventKind::Rmw, 128), &info, 3);
        assert_eq!(r.executed(2, ev(1, EventKind::Write, 64), &info, 4), None);
        // A futex wake orders the notifier's past before the woken thread.
        r.executed(1, ev(0, EventKind::Write, 80), &info, 5);
        r.wake(1, 2);
        assert_eq!(r.executed(2, ev(1, EventKind::Write, 80), &info, 6), None);
        // Joining a finished thread orders its writes.
        r.executed(2, ev(1, EventKind::Write, 96), &info, 7);
        r.finish(2);
        r.joined(0, 2);
        assert_eq!(r.executed(0, ev(0, EventKind::Read, 96), &info, 8), None);
        // Leaving a barrier acquires what the arrivals released there.
        r.executed(1, ev(0, EventKind::Write, 112), &info, 9);
        r.executed(1, ev(2, EventKind::Rmw, 256), &info, 10);
        r.departed(0, 256);
        assert_eq!(r.executed(0, ev(0, EventKind::Write, 112), &info, 11), None);
        assert!(r.found().is_empty());
        // Without the edge, the same pattern races.
        r.executed(1, ev(0, EventKind::Write, 116), &info, 12);
        assert!(r
            .executed(0, ev(1, EventKind::Write, 116), &info, 13)
            .is_some());
    }

    #[test]
    fn fresh_memory_has_no_history() {
        let info = info();
        let mut r = two_threads(RaceMode::Report);
        r.executed(1, ev(0, EventKind::Write, 4096), &info, 1);
        // The block was freed and handed out again to thread 2.
        r.fresh(4096 - 16, 48);
        assert_eq!(r.executed(2, ev(1, EventKind::Write, 4096), &info, 2), None);
        assert!(r.found().is_empty());
    }
}
