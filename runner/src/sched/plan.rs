//! `plan`: follow a schedule plan — REINS Algorithm 1 (Zhang, Pasareanu and
//! Yang, "REINS", 2026).
//!
//! A plan is an ordering S = [e1 ≺ … ≺ en] of events, each optionally with
//! a state constraint φ on guest variables ([`crate::plan`]). The strategy
//! keeps `s`, the length of the satisfied prefix of S. At every decision the
//! enabled threads are split into
//!
//! * T_next — about to perform e_{s+1}, with its φ holding now;
//! * T_held — about to perform e_{s+1} with φ false, or some later e_j
//!   (j > s+1): running them would break the order or the state constraint;
//! * T_free — everything else.
//!
//! A T_next thread runs first (performing e_{s+1} advances `s`); else a
//! random T_free thread; else a held thread is forced, which does not
//! advance `s`. Decisions that hold a thread without progress are stalls:
//! after the plan's stall budget — or as soon as e_{s+1} can no longer
//! happen (its `nth` occurrence went by unsatisfied) — the remaining
//! constraints are abandoned and the run continues at random. Everything
//! the plan does not constrain is decided by the seed, so a plan run is a
//! pure function of (module, plan, seed), and its decisions replay like any
//! other run's.
//!
//! The strategy observes the run ([`Strategy::observes_run`]): it sees every
//! executed event, to count occurrences and advance `s` also at steps where
//! no decision was needed, and reads guest memory to evaluate φ.

use super::rng::{Rng, STREAM_STRATEGY};
use super::{Choice, RunView, Strategy};
use crate::model::{Pending, Tid};
use crate::plan::Plan;
use std::sync::{Arc, Mutex};

/// How far a plan run got; shared with the caller, who reads it after the run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanProgress {
    /// κS: length of the satisfied prefix of S.
    pub satisfied: usize,
    /// Per event: its state constraint held at least once when the event
    /// occurred or was about to (always true for events without one).
    pub phi_held: Vec<bool>,
    /// Per event: it occurred (or was about to) at least once, in any order.
    pub seen: Vec<bool>,
    /// The constraint abandoned (index into S) and why.
    pub abandoned: Option<(usize, String)>,
    /// Held threads forced because no other thread could run.
    pub forced: u64,
    /// The first event that ran out of the plan's order: (its index, the
    /// satisfied prefix then). It ran before e_{s+1}, forced because every
    /// thread that could run was held (or it was the only one), so the run
    /// does not count as following the plan even if κS reaches n later.
    pub bent: Option<(usize, usize)>,
    /// Decisions that held a thread back.
    pub held: u64,
    /// Step (global event count) at which each satisfied event happened.
    pub at_step: Vec<u64>,
}

impl PlanProgress {
    /// Whether the run followed the whole plan of `n` events: every event in
    /// order, none of them forced out of it.
    pub fn followed(&self, n: usize) -> bool {
        self.satisfied == n && self.bent.is_none()
    }

    /// κΦ: indices of events whose state constraint never held.
    pub fn phi_never_held(&self) -> Vec<usize> {
        (0..self.phi_held.len())
            .filter(|&i| !self.phi_held[i])
            .collect()
    }
}

/// The plan strategy. See the module documentation.
pub struct PlanStrategy {
    plan: Arc<Plan>,
    rng: Rng,
    s: usize,
    /// Executed occurrences of each event (matching everything but `nth`).
    counts: Vec<u32>,
    /// Stalled decisions since the last progress.
    stall: u64,
    steps: u64,
    progress: PlanProgress,
    out: Arc<Mutex<PlanProgress>>,
}

impl PlanStrategy {
    /// A strategy following `plan`; `out` receives its progress.
    pub fn new(plan: Arc<Plan>, out: Arc<Mutex<PlanProgress>>) -> PlanStrategy {
        let mut p = PlanStrategy {
            plan,
            rng: Rng::new(0, STREAM_STRATEGY),
            s: 0,
            counts: Vec::new(),
            stall: 0,
            steps: 0,
            progress: PlanProgress::default(),
            out,
        };
        p.reset(0);
        p
    }

    fn active(&self) -> bool {
        self.progress.abandoned.is_none() && self.s < self.plan.events.len()
    }

    fn publish(&self) {
        let mut o = self.out.lock().unwrap_or_else(|e| e.into_inner());
        *o = self.progress.clone();
    }

    /// Whether `tid` doing `p` is event `j` (ignoring the occurrence).
    fn spec_matches(&self, j: usize, tid: Tid, p: &Pending, view: &dyn RunView) -> bool {
        self.plan.events[j].matches(
            tid,
            p,
            || view.thread_name(tid).map(String::from),
            || view.last_label(tid).map(String::from),
        )
    }

    /// Whether `tid` doing `p` is the occurrence of event `j` the plan means.
    fn occurs(&self, j: usize, tid: Tid, p: &Pending, view: &dyn RunView) -> bool {
        let e = &self.plan.events[j];
        e.nth.is_none_or(|k| self.counts[j] + 1 == k) && self.spec_matches(j, tid, p, view)
    }

    /// Evaluates φ_j now and remembers whether it ever held.
    fn phi(&mut self, j: usize, view: &dyn RunView) -> bool {
        let ok = self.plan.events[j]
            .when
            .iter()
            .all(|p| p.holds(view.read(p.addr, p.size)));
        let first_seen = !self.progress.seen[j];
        self.progress.seen[j] = true;
        if ok && !self.progress.phi_held[j] {
            self.progress.phi_held[j] = true;
            self.publish();
        } else if first_seen {
            self.publish();
        }
        ok
    }

    fn abandon(&mut self, why: String) {
        self.progress.abandoned = Some((self.s, why));
        self.publish();
    }

    fn note_stall(&mut self) {
        self.stall += 1;
        self.progress.held += 1;
        if self.stall > self.plan.stall_budget {
            let why = format!(
                "stall budget of {} decisions exceeded waiting for it",
                self.plan.stall_budget
            );
            self.abandon(why);
        }
    }

    fn random(&mut self, n: usize) -> usize {
        self.rng.below(n as u64) as usize
    }
}

impl Strategy for PlanStrategy {
    fn spec(&self) -> String {
        format!("plan:{}", self.plan.name)
    }

    fn reset(&mut self, seed: u64) {
        let n = self.plan.events.len();
        self.rng = Rng::new(seed, STREAM_STRATEGY);
        self.s = 0;
        self.counts = vec![0; n];
        self.stall = 0;
        self.steps = 0;
        self.progress = PlanProgress {
            phi_held: self.plan.events.iter().map(|e| e.when.is_empty()).collect(),
            seen: vec![false; n],
            ..PlanProgress::default()
        };
        self.publish();
    }

    fn pick_thread(&mut self, choice: &Choice) -> usize {
        // Without a view of the run nothing can be matched: all threads are free.
        self.random(choice.candidates.len())
    }

    fn pick_value(&mut self, _tid: Tid, n: u32) -> u32 {
        self.rng.below(n as u64) as u32
    }

    fn observes_run(&self) -> bool {
        true
    }

    fn pick_thread_in(&mut self, choice: &Choice, view: &dyn RunView) -> usize {
        let cands = choice.candidates;
        if !self.active() {
            return self.random(cands.len());
        }
        let n = self.plan.events.len();
        let next = self.s;
        let (mut t_next, mut t_held, mut t_free) = (Vec::new(), Vec::new(), Vec::new());
        for (i, c) in cands.iter().enumerate() {
            if self.occurs(next, c.tid, &c.pending, view) {
                if self.phi(next, view) {
                    t_next.push(i);
                } else {
                    t_held.push(i);
                }
            } else if (next + 1..n).any(|j| self.occurs(j, c.tid, &c.pending, view)) {
                t_held.push(i);
            } else {
                t_free.push(i);
            }
        }
        if !t_next.is_empty() {
            let k = self.random(t_next.len());
            return t_next[k];
        }
        if !t_held.is_empty() {
            self.note_stall();
            if !self.active() {
                return self.random(cands.len());
            }
        }
        if !t_free.is_empty() {
            let k = self.random(t_free.len());
            return t_free[k];
        }
        // Every enabled thread is held: force one (s does not advance).
        self.progress.forced += 1;
        self.publish();
        let k = self.random(t_held.len());
        t_held[k]
    }

    fn on_event(&mut self, tid: Tid, event: &Pending, view: &dyn RunView) {
        self.steps += 1;
        let n = self.plan.events.len();
        if self.active() && self.occurs(self.s, tid, event, view) && self.phi(self.s, view) {
            self.progress.at_step.push(self.steps);
            self.s += 1;
            self.progress.satisfied = self.s;
            self.stall = 0;
            self.publish();
        } else if self.active() && self.progress.bent.is_none() {
            // A later event ran before e_{s+1}: forced, or alone to run.
            let s = self.s;
            if let Some(j) = (s + 1..n).find(|&j| self.occurs(j, tid, event, view)) {
                self.progress.bent = Some((j, s));
                self.publish();
            }
        }
        for j in 0..n {
            if self.spec_matches(j, tid, event, view) {
                if !self.progress.seen[j] || !self.plan.events[j].when.is_empty() {
                    let k = self.plan.events[j].nth;
                    if k.is_none_or(|k| self.counts[j] + 1 == k) {
                        self.phi(j, view);
                    }
                }
                self.counts[j] += 1;
            }
        }
        if self.active() {
            let s = self.s;
            if let Some(k) = self.plan.events[s].nth {
                if self.counts[s] >= k {
                    self.abandon(format!(
                        "occurrence {k} happened before the events it must follow, or with its state constraint false"
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EventKind;
    use crate::plan::{Op, PlanEvent, Predicate, ThreadMatch};
    use crate::sched::Candidate;

    /// Guest memory of one 4-byte variable at address 100.
    struct Mem(u64);
    impl RunView for Mem {
        fn read(&self, addr: u32, _len: u32) -> Option<u64> {
            (addr == 100).then_some(self.0)
        }
        fn thread_name(&self, _tid: Tid) -> Option<&str> {
            None
        }
        fn last_label(&self, _tid: Tid) -> Option<&str> {
            None
        }
    }

    fn event(tid: Tid, kind: EventKind, when: Vec<Predicate>) -> PlanEvent {
        PlanEvent {
            name: format!("t{tid}"),
            text: String::new(),
            thread: ThreadMatch::Tid(tid),
            sites: None,
            kinds: vec![kind],
            range: None,
            label: None,
            nth: Some(1),
            when,
        }
    }

    fn pending(kind: EventKind) -> Pending {
        Pending {
            site: 0,
            kind,
            addr: 100,
            len: 4,
        }
    }

    fn cand(tid: Tid, kind: EventKind) -> Candidate {
        Candidate {
            tid,
            pending: pending(kind),
            spinning: false,
        }
    }

    fn strategy(when: Vec<Predicate>, budget: u64) -> (PlanStrategy, Arc<Mutex<PlanProgress>>) {
        let plan = Plan {
            name: "t".into(),
            hypothesis: None,
            bug: None,
            args: None,
            stall_budget: budget,
            events: vec![
                event(1, EventKind::Write, Vec::new()),
                event(2, EventKind::Read, when),
            ],
        };
        let out = Arc::new(Mutex::new(PlanProgress::default()));
        (PlanStrategy::new(Arc::new(plan), out.clone()), out)
    }

    fn pick(s: &mut PlanStrategy, cands: &[Candidate], mem: &Mem) -> Tid {
        let choice = Choice {
            current: None,
            candidates: cands,
            decision: 0,
        };
        cands[s.pick_thread_in(&choice, mem)].tid
    }

    #[test]
    fn next_before_free_before_held() {
        let (mut s, out) = strategy(Vec::new(), 100);
        let mem = Mem(0);
        // t2's read is e2: held while e1 (t1's write) is pending; t1 is next.
        let both = [cand(1, EventKind::Write), cand(2, EventKind::Read)];
        for seed in 0..20 {
            s.reset(seed);
            assert_eq!(pick(&mut s, &both, &mem), 1);
        }
        // A free thread runs before a held one.
        let free_held = [cand(2, EventKind::Read), cand(3, EventKind::Read)];
        for _ in 0..20 {
            assert_eq!(pick(&mut s, &free_held, &mem), 3);
        }
        // e1 happens: s advances and t2 becomes next.
        s.on_event(1, &pending(EventKind::Write), &mem);
        assert_eq!(out.lock().unwrap().satisfied, 1);
        for _ in 0..20 {
            assert_eq!(pick(&mut s, &free_held, &mem), 2);
        }
        s.on_event(2, &pending(EventKind::Read), &mem);
        assert_eq!(out.lock().unwrap().satisfied, 2);
        assert!(out.lock().unwrap().abandoned.is_none());
    }

    #[test]
    fn forced_held_thread_and_state_constraints() {
        let when = vec![Predicate {
            text: "x == 5".into(),
            addr: 100,
            size: 4,
            op: Op::Eq,
            value: 5,
        }];
        let (mut s, out) = strategy(when, 100);
        s.on_event(1, &pending(EventKind::Write), &Mem(0));
        // Only t2 can run, but φ is false: it is forced, s stays.
        assert_eq!(pick(&mut s, &[cand(2, EventKind::Read)], &Mem(0)), 2);
        s.on_event(2, &pending(EventKind::Read), &Mem(0));
        let p = out.lock().unwrap().clone();
        assert_eq!((p.satisfied, p.forced), (1, 1));
        assert_eq!(p.phi_never_held(), vec![1]);
        // Its first occurrence went by: the rest of the plan is abandoned.
        assert_eq!(p.abandoned.as_ref().map(|a| a.0), Some(1));

        // With φ true the same event advances s.
        s.reset(0);
        s.on_event(1, &pending(EventKind::Write), &Mem(5));
        s.on_event(2, &pending(EventKind::Read), &Mem(5));
        let p = out.lock().unwrap().clone();
        assert_eq!(p.satisfied, 2);
        assert!(p.phi_never_held().is_empty());
    }

    #[test]
    fn a_forced_later_event_bends_the_order() {
        let (mut s, out) = strategy(Vec::new(), 100);
        let mem = Mem(0);
        // Only t2 can run and its read is e2, held behind e1: forced.
        assert_eq!(pick(&mut s, &[cand(2, EventKind::Read)], &mem), 2);
        s.on_event(2, &pending(EventKind::Read), &mem);
        let p = out.lock().unwrap().clone();
        assert_eq!((p.forced, p.bent), (1, Some((1, 0))));
        assert!(!p.followed(2));
        // e1 and e2 in order: followed.
        s.reset(0);
        s.on_event(1, &pending(EventKind::Write), &mem);
        s.on_event(2, &pending(EventKind::Read), &mem);
        let p = out.lock().unwrap().clone();
        assert!(p.followed(2) && p.bent.is_none(), "{p:?}");
    }

    #[test]
    fn an_event_that_is_next_is_not_out_of_order_though_it_matches_a_later_one() {
        // e1 and e2 both match any write of t1: the first write is e1, not
        // an early e2.
        let any = |name: &str| PlanEvent {
            nth: None,
            name: name.into(),
            ..event(1, EventKind::Write, Vec::new())
        };
        let plan = Plan {
            name: "t".into(),
            hypothesis: None,
            bug: None,
            args: None,
            stall_budget: 100,
            events: vec![any("e1"), any("e2")],
        };
        let out = Arc::new(Mutex::new(PlanProgress::default()));
        let mut s = PlanStrategy::new(Arc::new(plan), out.clone());
        s.on_event(1, &pending(EventKind::Write), &Mem(0));
        s.on_event(1, &pending(EventKind::Write), &Mem(0));
        let p = out.lock().unwrap().clone();
        assert!(p.followed(2), "{p:?}");
    }

    #[test]
    fn stall_budget_abandons() {
        let (mut s, out) = strategy(Vec::new(), 3);
        let held_free = [cand(2, EventKind::Read), cand(3, EventKind::Read)];
        for _ in 0..4 {
            pick(&mut s, &held_free, &Mem(0));
        }
        let p = out.lock().unwrap().clone();
        assert_eq!(p.abandoned.as_ref().map(|a| a.0), Some(0), "{p:?}");
        assert_eq!(p.held, 4);
    }
}
