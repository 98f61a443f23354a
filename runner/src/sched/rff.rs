//! `rff` — reads-from fuzzing: a search that learns from earlier runs.
//!
//! After Wolff et al., "Greybox Fuzzing for Concurrency Testing", ASPLOS'24.
//! The behaviour of a run is abstracted as the set of its *reads-from
//! pairs* — which store (by site, or the initial value) each load read (by
//! site). A run is steered by a few *constraints*, each a pair to make
//! happen (`enforce`: a load at the read site runs as soon as the last store
//! to its word came from the write site, and waits otherwise; stores at the
//! write site go first) or to avoid (the load runs before such a store, or
//! waits for another one); everything else is decided by POS's random
//! priorities ([`super::pos`]), and spinners are held back as there.
//!
//! The campaign's [`Corpus`] counts in how many runs each pair was seen and
//! keeps the *seeds* worth mutating: the constraints of every run that
//! showed a pair no earlier run had, with those new pairs. A run (one in
//! four runs unconstrained) starts from such a seed (half the time) or from
//! nothing, and mutates it once: it *extends* it (enforces one of the
//! seed's new pairs, or a pair drawn with weight `1 / runs that showed it`,
//! so rare behaviour gets the runs), *reverses* one constraint (the race
//! goes the other way) or *drops* one. So runs concentrate where behaviour
//! was new, as a greybox fuzzer's do.
//!
//! The strategy observes every step ([`Strategy::observes_run`]) to keep
//! the last writer of every word, and returns its pairs and constraints as
//! its [`Strategy::take_feedback`]. A campaign merges them into the corpus
//! in generations of seeds (see `campaign::feedback`), so the corpus a run
//! sees depends only on the seeds before its generation: the same campaign
//! gives the same results whatever `--jobs`. A run without a corpus
//! (`heddle run --strategy rff`) is unconstrained. A failing run's replay
//! file records its decisions like any other and replays without the corpus.

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

/// A pair a run tries to make happen (`enforce`) or to avoid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Constraint {
    /// The pair.
    pub pair: RfPair,
    /// Make the load read from the store (else avoid it).
    pub enforce: bool,
}

/// What one run gives back to the corpus.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Feedback {
    /// The pairs it showed, sorted.
    pub pairs: Vec<RfPair>,
    /// The constraints it ran with.
    pub constraints: Vec<Constraint>,
}

/// A run worth mutating: its constraints and the pairs it showed first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seed {
    /// The constraints it ran with.
    pub constraints: Vec<Constraint>,
    /// Pairs no earlier run had shown (at most [`MAX_NEW`]).
    pub new: Vec<RfPair>,
}

/// Seeds kept (the latest).
pub const MAX_SEEDS: usize = 256;
/// New pairs kept per seed.
pub const MAX_NEW: usize = 8;
/// Constraints per run at most.
pub const MAX_CONSTRAINTS: usize = 4;

/// What earlier runs of a campaign showed. Immutable once built; shared by
/// the runs of a generation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Corpus {
    /// Runs merged.
    pub runs: u64,
    /// Runs that showed each pair.
    pub pairs: BTreeMap<RfPair, u64>,
    /// Runs that showed new pairs, oldest first.
    pub seeds: Vec<Seed>,
}

impl Corpus {
    /// Adds one run's feedback.
    pub fn add(&mut self, f: &Feedback) {
        self.runs += 1;
        let mut new = Vec::new();
        for p in &f.pairs {
            let n = self.pairs.entry(*p).or_insert(0);
            if *n == 0 && new.len() < MAX_NEW {
                new.push(*p);
            }
            *n += 1;
        }
        // The first run's pairs are all new: it is no seed.
        if !new.is_empty() && self.runs > 1 {
            if self.seeds.len() == MAX_SEEDS {
                self.seeds.remove(0);
            }
            self.seeds.push(Seed {
                constraints: f.constraints.clone(),
                new,
            });
        }
    }
}

/// The `rff` strategy.
pub struct Rff {
    corpus: Arc<Corpus>,
    rng: Rng,
    /// This run's constraints (dropped when they hold threads back too long).
    constraints: Vec<Constraint>,
    /// The constraints it started with (its feedback).
    started_with: Vec<Constraint>,
    /// POS's priorities and spinners.
    priorities: Priorities,
    /// The site of the last store to each 4-byte word.
    last_writer: BTreeMap<u32, SiteId>,
    /// This run's pairs.
    seen: BTreeSet<RfPair>,
    /// Decisions so far that held a thread back for a constraint.
    holds: u32,
}

/// After this many decisions that held a thread back, the run drops its
/// constraints: holding a load back until a store that never comes would
/// otherwise turn a waiting loop into a hang the program does not have.
const MAX_HOLDS: u32 = 256;

impl Rff {
    /// `rff` guided by `corpus`.
    pub fn new(corpus: Arc<Corpus>) -> Rff {
        Rff {
            corpus,
            rng: Rng::new(0, STREAM_STRATEGY),
            constraints: Vec::new(),
            started_with: Vec::new(),
            priorities: Priorities::default(),
            last_writer: BTreeMap::new(),
            seen: BTreeSet::new(),
            holds: 0,
        }
    }

    /// A pair drawn with weight `1 / count` (rare pairs first).
    fn rare_pair(&mut self) -> Option<RfPair> {
        // Weights scaled to integers: 2^20 / count.
        let weight = |n: u64| (1u64 << 20) / n.max(1);
        let total: u64 = self.corpus.pairs.values().map(|&n| weight(n)).sum();
        let mut at = self.rng.below(total.max(1));
        for (pair, &n) in &self.corpus.pairs {
            let w = weight(n);
            if at < w {
                return Some(*pair);
            }
            at -= w;
        }
        self.corpus.pairs.keys().next_back().copied()
    }

    /// This run's constraints: a seed of the corpus (or none), mutated once.
    fn draw_constraints(&mut self) -> Vec<Constraint> {
        if self.corpus.pairs.is_empty() || self.rng.below(4) == 0 {
            return Vec::new();
        }
        let corpus = self.corpus.clone();
        let seed = (!corpus.seeds.is_empty() && self.rng.chance(0.5))
            .then(|| &corpus.seeds[self.rng.below(corpus.seeds.len() as u64) as usize]);
        let mut c: Vec<Constraint> = seed.map(|s| s.constraints.clone()).unwrap_or_default();
        let mutation = if c.is_empty() { 0 } else { self.rng.below(3) };
        match mutation {
            // Reverse one race.
            1 => {
                let i = self.rng.below(c.len() as u64) as usize;
                c[i].enforce = !c[i].enforce;
            }
            // Drop one constraint (extend instead when it is the only one).
            2 if c.len() > 1 => {
                let i = self.rng.below(c.len() as u64) as usize;
                c.remove(i);
            }
            // Extend: a new pair of the seed made to happen again, or a
            // rare pair either way.
            _ => {
                let new = seed.map(|s| s.new.as_slice()).unwrap_or_default();
                let add = if !new.is_empty() && self.rng.chance(0.5) {
                    let pair = new[self.rng.below(new.len() as u64) as usize];
                    Some(Constraint {
                        pair,
                        enforce: true,
                    })
                } else {
                    self.rare_pair().map(|pair| Constraint {
                        pair,
                        enforce: self.rng.chance(0.5),
                    })
                };
                if let Some(a) = add {
                    c.retain(|x| x.pair != a.pair);
                    c.push(a);
                }
            }
        }
        if c.len() > MAX_CONSTRAINTS {
            c.drain(..c.len() - MAX_CONSTRAINTS);
        }
        c
    }
}

/// The site of the last store to `p`'s word.
fn writer_of(last_writer: &BTreeMap<u32, SiteId>, p: &Pending) -> SiteId {
    last_writer.get(&(p.addr >> 2)).copied().unwrap_or(NO_SITE)
}

/// For the constraints: +1 run `p` now; -1 hold it back; 0 no opinion (the
/// first constraint with an opinion decides).
fn bias(constraints: &[Constraint], last_writer: &BTreeMap<u32, SiteId>, p: &Pending) -> i8 {
    let reads = matches!(
        p.kind,
        EventKind::Read | EventKind::Rmw | EventKind::Cmpxchg
    );
    for t in constraints {
        let (w, r) = t.pair;
        if reads && p.site == r {
            let from_w = writer_of(last_writer, p) == w;
            return if from_w == t.enforce { 1 } else { -1 };
        }
        if p.kind.writes() && p.site == w && w != NO_SITE {
            return if t.enforce { 1 } else { -1 };
        }
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
        self.constraints = self.draw_constraints();
        self.started_with = self.constraints.clone();
    }

    fn pick_thread(&mut self, choice: &Choice) -> usize {
        let (cs, writers) = (&self.constraints, &self.last_writer);
        let pick = self
            .priorities
            .pick(&mut self.rng, choice.candidates, |p| bias(cs, writers, p));
        let ran = choice.candidates[pick];
        if !cs.is_empty()
            && choice
                .candidates
                .iter()
                .any(|c| c.tid != ran.tid && bias(cs, writers, &c.pending) < 0)
        {
            self.holds += 1;
            if self.holds > MAX_HOLDS {
                self.constraints.clear();
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
            let w = writer_of(&self.last_writer, event);
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

    fn take_feedback(&mut self) -> Feedback {
        Feedback {
            pairs: std::mem::take(&mut self.seen).into_iter().collect(),
            constraints: std::mem::take(&mut self.started_with),
        }
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

    fn run_of(pairs: &[RfPair], constraints: &[Constraint]) -> Feedback {
        Feedback {
            pairs: pairs.to_vec(),
            constraints: constraints.to_vec(),
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
            s.take_feedback().pairs,
            vec![(11, 12), (11, 13), (13, 14), (NO_SITE, 10)]
        );
        s.reset(2);
        assert!(s.take_feedback().pairs.is_empty(), "reset forgets the run");
    }

    #[test]
    fn a_constraint_holds_or_hurries_the_load() {
        let mut corpus = Corpus::default();
        corpus.add(&run_of(&[(11, 12)], &[]));
        assert!(corpus.seeds.is_empty(), "the first run is no seed");
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
            let Some(&t) = s.constraints.first() else {
                continue;
            };
            assert_eq!(s.constraints.len(), 1);
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
            assert_eq!(s.take_feedback().constraints, vec![t]);
        }
        assert!(enforced > 30 && enforced < 120, "{enforced}");
    }

    /// Runs that showed new pairs become seeds; runs start from them and
    /// extend, reverse or drop one constraint.
    #[test]
    fn seeds_are_mutated() {
        let x = Constraint {
            pair: (1, 2),
            enforce: true,
        };
        let y = Constraint {
            pair: (3, 4),
            enforce: false,
        };
        let mut corpus = Corpus::default();
        corpus.add(&run_of(&[(1, 2), (3, 4)], &[]));
        corpus.add(&run_of(&[(1, 2), (5, 6)], &[x, y]));
        corpus.add(&run_of(&[(1, 2)], &[y]));
        assert_eq!(
            corpus.seeds,
            vec![Seed {
                constraints: vec![x, y],
                new: vec![(5, 6)]
            }]
        );
        let corpus = Arc::new(corpus);
        let (mut extended, mut reversed, mut dropped) = (0, 0, 0);
        for seed in 0..400 {
            let mut s = Rff::new(corpus.clone());
            s.reset(seed);
            let c = &s.constraints;
            assert!(c.len() <= MAX_CONSTRAINTS);
            if c.len() == 3 && c[..2] == [x, y] {
                extended += 1;
            }
            if c.len() == 2
                && c.contains(&y)
                && c.contains(&Constraint {
                    enforce: false,
                    ..x
                })
            {
                reversed += 1;
            }
            if c.len() == 1 && c[0] == y {
                dropped += 1;
            }
        }
        assert!(
            extended > 10 && reversed > 10 && dropped > 5,
            "{extended} {reversed} {dropped}"
        );
        // The seed list keeps the latest runs.
        let mut c = Corpus::default();
        for i in 0..(MAX_SEEDS as u32 + 10) {
            c.add(&run_of(&[(i, i)], &[]));
        }
        assert_eq!(c.seeds.len(), MAX_SEEDS);
        assert_eq!(
            c.seeds.last().unwrap().new,
            vec![(MAX_SEEDS as u32 + 9, MAX_SEEDS as u32 + 9)]
        );
    }
}
