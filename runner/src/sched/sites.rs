//! `sites:d` — PCT over sites instead of threads.
//!
//! PCT gives every *thread* a random priority, so with many identical
//! threads the chance that the one interesting thread is favoured at the
//! right moment falls with the thread count. `sites` gives every *site* (the
//! instruction a thread is about to execute) a random priority, drawn when
//! the site is first seen in the run; the enabled thread whose next site has
//! the highest priority runs, ties between threads at the same site broken
//! by a random per-thread priority. Identical workers then move as one: a
//! low-priority site is a point where every worker waits while the rest of
//! the program runs — the checker created last, the second stage of an
//! update. Like PCT, `d − 1` change points are drawn from the first `k`
//! decisions (`k` = estimated decisions per run); at the i-th one the site
//! of the thread that would run gets priority `d − i`, below every site's
//! initial priority.
//!
//! Sites are those of the instrumented module, so they are the same in every
//! run: lock and unlock calls are sites at their user call site, and a
//! thread's first step is one site shared by every new thread. A thread seen
//! spinning is held back until it runs again (see [`super::Spinners`]), as
//! in every priority strategy here.

use super::rng::{Rng, STREAM_STRATEGY};
use super::{Choice, Spinners, Strategy};
use crate::instrument::SiteId;
use crate::model::Tid;
use std::collections::BTreeMap;

/// The state of one run.
pub struct Sites {
    depth: u32,
    k: u64,
    rng: Rng,
    /// Priority per site; higher runs first.
    site_priority: BTreeMap<SiteId, i64>,
    /// Tie-break between threads at the same site (by tid; drawn when the
    /// thread is first ranked).
    thread_priority: Vec<Option<u64>>,
    /// Per tid: the site it was last ranked at and that site's priority,
    /// good while `changes_done` is the same (a change point is the only
    /// thing that changes a drawn site priority). Saves the look-up in
    /// `site_priority` for a thread still at the same site.
    last_key: Vec<Option<(SiteId, u32, i64)>>,
    change_points: Vec<u64>,
    changes_done: u32,
    spinners: Spinners,
    /// When each thread was last seen spinning (a decision number).
    spun_at: BTreeMap<Tid, u64>,
}

impl Sites {
    /// Site priorities for bugs of depth `depth` in runs of about `k` decisions.
    pub fn new(depth: u32, k: u64) -> Sites {
        Sites {
            depth,
            k: k.max(1),
            rng: Rng::new(0, STREAM_STRATEGY),
            site_priority: BTreeMap::new(),
            thread_priority: Vec::new(),
            last_key: Vec::new(),
            change_points: Vec::new(),
            changes_done: 0,
            spinners: Spinners::default(),
            spun_at: BTreeMap::new(),
        }
    }

    /// The rank of thread `tid` at `site`, drawing the site's and the
    /// thread's priorities the first time each is ranked (site first).
    fn key(&mut self, site: SiteId, tid: Tid) -> (i64, u64) {
        let t = tid as usize;
        if let Some(Some((s, changes, p))) = self.last_key.get(t) {
            if *s == site && *changes == self.changes_done {
                // Ranked before at this site: both priorities are drawn.
                return (*p, self.thread_priority[t].unwrap_or(0));
            }
        }
        let depth = self.depth as i64;
        let rng = &mut self.rng;
        let s = *self
            .site_priority
            .entry(site)
            .or_insert_with(|| depth + 1 + (rng.next_u64() >> 2) as i64);
        if self.thread_priority.len() <= t {
            self.thread_priority.resize(t + 1, None);
            self.last_key.resize(t + 1, None);
        }
        let tp = *self.thread_priority[t].get_or_insert_with(|| rng.next_u64());
        self.last_key[t] = Some((site, self.changes_done, s));
        (s, tp)
    }

    fn best(&mut self, choice: &Choice) -> usize {
        let held = |s: &Spinners, i: usize| s.contains(choice.candidates[i].tid);
        let all_held = (0..choice.candidates.len()).all(|i| held(&self.spinners, i));
        if all_held {
            // Every thread spins: the one that spun longest ago goes, so
            // spinners take turns (else the favoured one spins forever).
            return (0..choice.candidates.len())
                .min_by_key(|&i| {
                    let tid = choice.candidates[i].tid;
                    (self.spun_at.get(&tid).copied().unwrap_or(0), tid)
                })
                .unwrap_or(0);
        }
        let mut best: Option<(usize, (i64, u64))> = None;
        for (i, c) in choice.candidates.iter().enumerate() {
            if held(&self.spinners, i) {
                continue;
            }
            let key = self.key(c.pending.site, c.tid);
            if best.is_none_or(|(_, b)| key > b) {
                best = Some((i, key));
            }
        }
        best.map(|(i, _)| i).unwrap_or(0)
    }
}

impl Strategy for Sites {
    fn spec(&self) -> String {
        format!("sites:{}:k={}", self.depth, self.k)
    }

    fn reset(&mut self, seed: u64) {
        self.rng = Rng::new(seed, STREAM_STRATEGY);
        self.site_priority.clear();
        self.thread_priority.clear();
        self.last_key.clear();
        self.change_points = (1..self.depth).map(|_| self.rng.range(1, self.k)).collect();
        self.change_points.sort_unstable();
        self.changes_done = 0;
        self.spinners.clear();
        self.spun_at.clear();
    }

    fn pick_thread(&mut self, choice: &Choice) -> usize {
        self.spinners.observe(choice.candidates);
        for c in choice.candidates.iter().filter(|c| c.spinning) {
            self.spun_at.insert(c.tid, choice.decision);
        }
        let mut pick = self.best(choice);
        while (self.changes_done as usize) < self.change_points.len()
            && self.change_points[self.changes_done as usize] <= choice.decision + 1
        {
            self.changes_done += 1;
            let site = choice.candidates[pick].pending.site;
            self.site_priority
                .insert(site, (self.depth - self.changes_done) as i64);
            pick = self.best(choice);
        }
        self.spinners.ran(choice.candidates[pick].tid);
        pick
    }

    fn pick_value(&mut self, _tid: Tid, n: u32) -> u32 {
        self.rng.below(n as u64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EventKind, Pending};
    use crate::sched::Candidate;

    fn cand(tid: Tid, site: SiteId) -> Candidate {
        Candidate {
            tid,
            pending: Pending {
                site,
                kind: EventKind::Write,
                addr: 0,
                len: 0,
            },
            spinning: false,
        }
    }

    /// Threads at the same site move together: whichever site wins, every
    /// thread waiting at the other one waits as a group.
    #[test]
    fn threads_at_one_site_share_its_priority() {
        for seed in 0..50 {
            let mut s = Sites::new(1, 100);
            s.reset(seed);
            let cands = [cand(1, 7), cand(2, 9), cand(3, 7), cand(4, 9)];
            let choice = Choice {
                current: None,
                candidates: &cands,
                decision: 0,
            };
            let first = cands[s.pick_thread(&choice)].pending.site;
            // Without the chosen thread, the next pick is at the same site.
            let rest: Vec<Candidate> = cands
                .iter()
                .copied()
                .filter(|c| c.pending.site != first || c.tid != cands[0].tid)
                .collect();
            let choice = Choice {
                current: None,
                candidates: &rest,
                decision: 1,
            };
            let again = rest[s.pick_thread(&choice)].pending.site;
            assert_eq!(first, again, "seed {seed}");
        }
    }

    #[test]
    fn same_seed_same_picks_and_spinners_are_held_back() {
        let cands = [cand(1, 3), cand(2, 4)];
        let run = |seed| {
            let mut s = Sites::new(3, 10);
            s.reset(seed);
            (0..10)
                .map(|d| {
                    s.pick_thread(&Choice {
                        current: None,
                        candidates: &cands,
                        decision: d,
                    })
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(5), run(5));
        let mut s = Sites::new(1, 10);
        s.reset(1);
        let pick = s.pick_thread(&Choice {
            current: None,
            candidates: &cands,
            decision: 0,
        });
        let mut spun = cands;
        spun[pick].spinning = true;
        let next = s.pick_thread(&Choice {
            current: None,
            candidates: &spun,
            decision: 1,
        });
        assert_ne!(next, pick, "a spinner is held back");
    }

    /// The ranking with every priority looked up in its map each time (no
    /// remembered rank): what `Sites` must pick, draw for draw.
    struct Plain {
        rng: Rng,
        depth: u32,
        site: BTreeMap<SiteId, i64>,
        thread: BTreeMap<Tid, u64>,
    }

    impl Plain {
        fn key(&mut self, site: SiteId, tid: Tid) -> (i64, u64) {
            let (depth, rng) = (self.depth as i64, &mut self.rng);
            let s = *self
                .site
                .entry(site)
                .or_insert_with(|| depth + 1 + (rng.next_u64() >> 2) as i64);
            (s, *self.thread.entry(tid).or_insert_with(|| rng.next_u64()))
        }

        fn best(&mut self, cands: &[Candidate]) -> usize {
            let mut best: Option<(usize, (i64, u64))> = None;
            for (i, c) in cands.iter().enumerate() {
                let key = self.key(c.pending.site, c.tid);
                if best.is_none_or(|(_, b)| key > b) {
                    best = Some((i, key));
                }
            }
            best.map(|(i, _)| i).unwrap_or(0)
        }
    }

    /// Threads that move between sites, with change points: the
    /// remembered ranks never give another pick than plain look-ups.
    #[test]
    fn remembered_ranks_pick_as_look_ups_do() {
        for seed in 0..200 {
            let (depth, k) = (4, 12);
            let mut s = Sites::new(depth, k);
            s.reset(seed);
            let mut plain = Plain {
                rng: Rng::new(seed, STREAM_STRATEGY),
                depth,
                site: BTreeMap::new(),
                thread: BTreeMap::new(),
            };
            let changes: Vec<u64> = {
                let mut c: Vec<u64> = (1..depth).map(|_| plain.rng.range(1, k)).collect();
                c.sort_unstable();
                c
            };
            assert_eq!(changes, s.change_points, "seed {seed}");
            let mut done = 0;
            let mut shape = Rng::new(seed, 99);
            let mut at: Vec<SiteId> = (0..6).map(|_| shape.below(4) as SiteId).collect();
            for decision in 0..40u64 {
                let n = 2 + shape.below(5) as usize;
                let cands: Vec<Candidate> = (0..n).map(|t| cand(t as Tid, at[t])).collect();
                let choice = Choice {
                    current: None,
                    candidates: &cands,
                    decision,
                };
                let got = s.pick_thread(&choice);
                let mut want = plain.best(&cands);
                while done < changes.len() && changes[done] <= decision + 1 {
                    done += 1;
                    plain
                        .site
                        .insert(cands[want].pending.site, (depth as usize - done) as i64);
                    want = plain.best(&cands);
                }
                assert_eq!(got, want, "seed {seed}, decision {decision}");
                // The chosen thread moves on to another site.
                at[cands[got].tid as usize] = shape.below(4) as SiteId;
            }
        }
    }
}
