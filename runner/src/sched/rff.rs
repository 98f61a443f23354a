//! `rff` — reads-from fuzzing: a search that learns from earlier runs.
//!
//! After Wolff et al., "Greybox Fuzzing for Concurrency Testing", ASPLOS'24:
//! the behaviour of a run is abstracted as the set of its *reads-from
//! pairs* — which store (by site, or the initial value) each load read (by
//! site) — and the campaign keeps, in a [`Corpus`], in how many runs each
//! pair was seen. A run of `rff` picks a *target* from the corpus, favouring
//! rare pairs (weight `1 / runs that showed it`): with probability ½ it
//! tries to make the pair happen again (a load at the read site runs as
//! soon as the last store to its word came from the write site, and waits
//! otherwise; stores at the write site go first), else to avoid it (the
//! load runs before such a store, or waits for another one). One run in
//! four has no target. Everything else is decided by POS's random
//! priorities ([`super::pos`]), and spinners are held back as there.
//!
//! The strategy observes every step ([`Strategy::observes_run`]) to keep
//! the last writer of every word, and returns the run's pairs as its
//! [`Strategy::take_feedback`]. A campaign merges them into the corpus in
//! generations of seeds (see `campaign::feedback`), so the corpus a run
//! sees depends only on the seeds before its generation: the same campaign
//! gives the same results whatever `--jobs`. A run without a corpus (`heddle
//! run --strategy rff`) has no target. A failing run's replay file records
//! its decisions like any other and replays without the corpus.

use super::pos::Priorities;
use super::rng::{Rng, STREAM_STRATEGY};
use super::{Choice, RunView, Strategy};
use crate::instrument::SiteId;
use crate::model::{EventKind, Pending, Tid, NO_SITE};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A reads-from pair: (site of the store, or [`NO_SITE`] for the initial
/// value; site of the load).
pub type RfPair = (SiteId, SiteId);

/// What earlier runs of a campaign showed: in how many runs each
/// reads-from pair was seen. Immutable once built; shared by the runs of a
/// generation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Corpus {
    /// Runs merged.
    pub runs: u64,
    /// Runs that showed each pair.
    pub pairs: BTreeMap<RfPair, u64>,
}

impl Corpus {
    /// Adds one run's pairs.
    pub fn add(&mut self, pairs: &[RfPair]) {
        self.runs += 1;
        for p in pairs {
            *self.pairs.entry(*p).or_insert(0) += 1;
        }
    }
}

/// What a run tries to do about one pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Target {
    pair: RfPair,
    /// Make the load read from the store (else avoid it).
    enforce: bool,
}

/// The `rff` strategy.
pub struct Rff {
    corpus: Arc<Corpus>,
    rng: Rng,
    target: Option<Target>,
    /// POS's priorities and spinners.
    priorities: Priorities,
    /// The site of the last store to each 4-byte word.
    last_writer: BTreeMap<u32, SiteId>,
    /// This run's pairs.
    seen: BTreeSet<RfPair>,
    /// Decisions so far that held a thread back for the target.
    holds: u32,
}

/// After this many decisions that held a thread back, the run drops its
/// target: holding a load back until a store that never comes would
/// otherwise turn a waiting loop into a hang the program does not have.
const MAX_HOLDS: u32 = 256;

impl Rff {
    /// `rff` guided by `corpus`.
    pub fn new(corpus: Arc<Corpus>) -> Rff {
        Rff {
            corpus,
            rng: Rng::new(0, STREAM_STRATEGY),
            target: None,
            priorities: Priorities::default(),
            last_writer: BTreeMap::new(),
            seen: BTreeSet::new(),
            holds: 0,
        }
    }

    /// A pair drawn with weight `1 / count` (rare pairs first).
    fn draw_target(&mut self) -> Option<Target> {
        if self.corpus.pairs.is_empty() || self.rng.below(4) == 0 {
            return None;
        }
        // Weights scaled to integers: 2^20 / count.
        let weight = |n: u64| (1u64 << 20) / n.max(1);
        let total: u64 = self.corpus.pairs.values().map(|&n| weight(n)).sum();
        let mut at = self.rng.below(total.max(1));
        let mut pick = None;
        for (pair, &n) in &self.corpus.pairs {
            let w = weight(n);
            if at < w {
                pick = Some(*pair);
                break;
            }
            at -= w;
        }
        let pair = pick.or_else(|| self.corpus.pairs.keys().next_back().copied())?;
        Some(Target {
            pair,
            enforce: self.rng.chance(0.5),
        })
    }

    fn writer_of(&self, p: &Pending) -> SiteId {
        writer_of(&self.last_writer, p)
    }
}

/// The site of the last store to `p`'s word.
fn writer_of(last_writer: &BTreeMap<u32, SiteId>, p: &Pending) -> SiteId {
    last_writer.get(&(p.addr >> 2)).copied().unwrap_or(NO_SITE)
}

/// For `target`: +1 run `p` now; -1 hold it back; 0 no opinion.
fn bias(target: Option<Target>, last_writer: &BTreeMap<u32, SiteId>, p: &Pending) -> i8 {
    let Some(t) = target else { return 0 };
    let (w, r) = t.pair;
    let reads = matches!(
        p.kind,
        EventKind::Read | EventKind::Rmw | EventKind::Cmpxchg
    );
    if reads && p.site == r {
        let from_w = writer_of(last_writer, p) == w;
        return if from_w == t.enforce { 1 } else { -1 };
    }
    if p.kind.writes() && p.site == w && w != NO_SITE {
        return if t.enforce { 1 } else { -1 };
    }
    0
}

/// The words `[addr, addr + len)` covers.
fn words(p: &Pending) -> std::ops::RangeInclusive<u32> {
    let last = p.addr.saturating_add(p.len.max(1) - 1);
    (p.addr >> 2)..=(last >> 2)
}

impl Strategy for Rff {
    fn spec(&self) -> String {
        "rff".into()
    }

    fn reset(&mut self, seed: u64) {
        self.rng = Rng::new(seed, STREAM_STRATEGY);
        self.priorities.clear();
        self.last_writer.clear();
        self.seen.clear();
        self.holds = 0;
        self.target = self.draw_target();
    }

    fn pick_thread(&mut self, choice: &Choice) -> usize {
        let (target, writers) = (self.target, &self.last_writer);
        let pick = self.priorities.pick(&mut self.rng, choice.candidates, |p| {
            bias(target, writers, p)
        });
        let ran = choice.candidates[pick];
        if target.is_some()
            && choice
                .candidates
                .iter()
                .any(|c| c.tid != ran.tid && bias(target, writers, &c.pending) < 0)
        {
            self.holds += 1;
            if self.holds > MAX_HOLDS {
                self.target = None;
            }
        }
        pick
    }

    fn pick_value(&mut self, _tid: Tid, n: u32) -> u32 {
        self.rng.below(n as u64) as u32
    }

    fn observes_run(&self) -> bool {
        true
    }

    fn on_event(&mut self, _tid: Tid, event: &Pending, _view: &dyn RunView) {
        let k = event.kind;
        if matches!(k, EventKind::Read | EventKind::Rmw | EventKind::Cmpxchg) && event.len > 0 {
            let w = self.writer_of(event);
            self.seen.insert((w, event.site));
        }
        if k.writes() && event.len > 0 {
            for word in words(event) {
                self.last_writer.insert(word, event.site);
            }
        }
    }

    fn learn_from(&mut self, corpus: Arc<Corpus>) {
        self.corpus = corpus;
    }

    fn take_feedback(&mut self) -> Vec<RfPair> {
        std::mem::take(&mut self.seen).into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::Candidate;

    struct NoView;
    impl RunView for NoView {
        fn read(&self, _addr: u32, _len: u32) -> Option<u64> {
            None
        }
        fn thread_name(&self, _tid: Tid) -> Option<&str> {
            None
        }
        fn last_label(&self, _tid: Tid) -> Option<&str> {
            None
        }
    }

    fn ev(site: SiteId, kind: EventKind, addr: u32) -> Pending {
        Pending {
            site,
            kind,
            addr,
            len: 4,
        }
    }

    #[test]
    fn records_reads_from_pairs_by_site() {
        let mut s = Rff::new(Arc::default());
        s.reset(1);
        s.on_event(1, &ev(10, EventKind::Read, 64), &NoView);
        s.on_event(1, &ev(11, EventKind::Write, 64), &NoView);
        s.on_event(2, &ev(12, EventKind::Read, 66), &NoView);
        s.on_event(2, &ev(13, EventKind::Rmw, 64), &NoView);
        s.on_event(1, &ev(14, EventKind::Read, 64), &NoView);
        assert_eq!(
            s.take_feedback(),
            vec![(11, 12), (11, 13), (13, 14), (NO_SITE, 10)]
        );
        s.reset(2);
        assert!(s.take_feedback().is_empty(), "reset forgets the run");
    }

    #[test]
    fn a_target_holds_or_hurries_the_load() {
        let mut corpus = Corpus::default();
        corpus.add(&[(11, 12)]);
        let corpus = Arc::new(corpus);
        let read = Candidate {
            tid: 2,
            pending: ev(12, EventKind::Read, 64),
            spinning: false,
        };
        let other = Candidate {
            tid: 1,
            pending: ev(30, EventKind::Write, 900),
            spinning: false,
        };
        let mut enforced = 0;
        for seed in 0..200 {
            let mut s = Rff::new(corpus.clone());
            s.reset(seed);
            let Some(t) = s.target else { continue };
            assert_eq!(t.pair, (11, 12));
            // The word was last written elsewhere: enforcing waits, avoiding goes.
            s.on_event(1, &ev(99, EventKind::Write, 64), &NoView);
            let pick = s.pick_thread(&Choice {
                current: None,
                candidates: &[other, read],
                decision: 0,
            });
            assert_eq!(pick == 1, !t.enforce, "seed {seed}: {t:?}");
            enforced += t.enforce as u32;
        }
        assert!(enforced > 30 && enforced < 120, "{enforced}");
    }
}
