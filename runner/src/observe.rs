//! Shared-access observation (`heddle observe`): what a person reads to form
//! a bug hypothesis, and so a plan.
//!
//! Over the recorded events of several runs, per shared variable (a global
//! by its DWARF/symbol name, else a heap block by its address and allocation
//! site, else an address): the accesses ⟨thread, R/W, file:line⟩ in observed order with
//! the lock set held at each (wasi-libc mutexes, recognised by their
//! lock/unlock call sites), how many threads and sites touch it, and the
//! *conflicting pairs* — accesses from different threads to overlapping
//! bytes, at least one a write, holding no common lock and not ordered by
//! spawn/join or by the race detector's other synchronisation edges
//! (atomics, barriers, `pthread_once`; see `add_run`) — with in how many
//! runs each pair was seen in each order. Pairs that share a lock are
//! listed apart: the lock serialises them but does not fix their order,
//! which is where atomicity violations live.

use crate::instrument::{SiteId, SiteKind, SiteTable};
use crate::model::hb::VectorClock;
use crate::model::{EventKind, Tid};
use crate::runtime::RunResult;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Most accesses per variable and run that pairs are computed over.
const MAX_PAIR_ACCESSES: usize = 4000;
/// Bytes of a lock object from its address (wasi-libc's rwlock, the
/// largest): atomics there are the lock's own, modelled by lock sets.
const LOCK_OBJECT_BYTES: u32 = 32;
/// Most accesses listed per variable in the report.
const MAX_LISTED: usize = 40;

/// How a shared variable is identified across runs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum VarKey {
    Global(String),
    /// A heap block, by allocation site and start address.
    Heap(SiteId, u32),
    Addr(u32),
}

/// A static access point: site and access kind.
type Point = (SiteId, &'static str);

/// One dynamic access of a run.
#[derive(Debug, Clone)]
struct Access {
    tid: Tid,
    point: Point,
    write: bool,
    /// The bytes accessed (elements of one array are one variable but
    /// conflict only where they overlap).
    bytes: (u32, u32),
    locks: Vec<u32>,
    /// The thread's vector clock over spawn/join edges.
    vc: Arc<VectorClock>,
}

#[derive(Debug, Default)]
struct PairAcc {
    /// Runs with the first point's access before the second's, and after.
    orders: [u64; 2],
    threads: BTreeSet<(Tid, Tid)>,
    locks: BTreeSet<String>,
}

#[derive(Debug, Default)]
struct VarAcc {
    display: String,
    class: &'static str,
    threads: BTreeSet<Tid>,
    sites: BTreeSet<SiteId>,
    runs: u64,
    /// The first run in which it was shared: (seed, accesses listed).
    listed: Option<(u64, Vec<AccessReport>)>,
    conflicting: BTreeMap<(Point, Point), PairAcc>,
    locked: BTreeMap<(Point, Point), PairAcc>,
}

/// Accumulates runs into a [`Report`].
pub struct Observer<'a> {
    sites: &'a SiteTable,
    vars: BTreeMap<VarKey, VarAcc>,
    seeds: Vec<u64>,
}

/// The observation report (also its JSON form).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Runs observed.
    pub runs: usize,
    /// Their seeds.
    pub seeds: Vec<u64>,
    /// Shared variables, globals first (by name), then heap blocks, then addresses.
    pub variables: Vec<VarReport>,
}

/// One shared variable.
#[derive(Debug, Clone, Serialize)]
pub struct VarReport {
    /// The variable's name, or how its block was allocated, or its address.
    pub name: String,
    /// `global`, `heap` or `address`.
    pub class: String,
    /// Threads that touched it (over all runs).
    pub threads: usize,
    /// Sites that touched it (over all runs).
    pub sites: usize,
    /// Runs in which more than one thread touched it.
    pub runs: u64,
    /// The seed whose accesses are listed.
    pub listed_seed: u64,
    /// That run's accesses, in observed order.
    pub accesses: Vec<AccessReport>,
    /// Different threads, at least one write, no common lock, not ordered
    /// by spawn/join.
    pub conflicting_pairs: Vec<PairReport>,
    /// As conflicting pairs, but holding a common lock.
    pub lock_ordered_pairs: Vec<PairReport>,
}

/// One access in observed order (consecutive repeats folded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AccessReport {
    /// Spawn index of the thread.
    pub thread: Tid,
    /// Its `heddle_thread_name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_name: Option<String>,
    /// `R`, `W`, `RMW` or `copy`.
    pub access: String,
    /// `file:line`.
    pub site: String,
    /// The function of the site.
    pub function: String,
    /// Locks held (by name where known).
    pub locks: Vec<String>,
    /// How many times in a row.
    pub repeat: u32,
}

/// A static access point in a pair.
#[derive(Debug, Clone, Serialize)]
pub struct PointReport {
    /// `R`, `W`, `RMW` or `copy`.
    pub access: String,
    /// `file:line`.
    pub site: String,
    /// The function of the site.
    pub function: String,
}

/// A pair of access points and the orders it was seen in.
#[derive(Debug, Clone, Serialize)]
pub struct PairReport {
    /// The lesser access point (by site id).
    pub first: PointReport,
    /// The other one.
    pub second: PointReport,
    /// Thread pairs (first's thread, second's thread) seen.
    pub threads: Vec<[Tid; 2]>,
    /// Locks held in common (lock-ordered pairs only).
    pub common_locks: Vec<String>,
    /// Runs in which `first` happened before `second`.
    pub runs_first_before_second: u64,
    /// Runs in which `second` happened before `first`.
    pub runs_second_before_first: u64,
}

fn access_label(k: EventKind) -> &'static str {
    match k {
        EventKind::Read => "R",
        EventKind::Write | EventKind::Fill => "W",
        EventKind::Copy => "copy",
        _ => "RMW",
    }
}

impl<'a> Observer<'a> {
    /// An observer over the module whose sites are `sites`.
    pub fn new(sites: &'a SiteTable) -> Observer<'a> {
        Observer {
            sites,
            vars: BTreeMap::new(),
            seeds: Vec::new(),
        }
    }

    fn site_text(&self, site: SiteId) -> (String, String) {
        match self.sites.site(site) {
            Some(s) => (s.where_(), s.func_name.clone()),
            None => ("-".into(), String::new()),
        }
    }

    fn lock_name(&self, addr: u32) -> String {
        match self.sites.symbol_at(addr) {
            Some(s) if s.addr == addr => s.name.clone(),
            Some(s) => format!("{}+{}", s.name, addr - s.addr),
            None => format!("{addr:#x}"),
        }
    }

    fn key(&self, addr: u32, r: &RunResult) -> (VarKey, String, &'static str) {
        if let Some(s) = self.sites.symbol_at(addr) {
            return (VarKey::Global(s.name.clone()), s.name.clone(), "global");
        }
        let i = r.heap_blocks.partition_point(|b| b.start <= addr);
        if let Some(b) = i.checked_sub(1).map(|i| r.heap_blocks[i]) {
            if addr < b.start + b.size.max(1) {
                let (at, _) = self.site_text(b.alloc_site);
                return (
                    VarKey::Heap(b.alloc_site, b.start),
                    format!(
                        "heap block at {:#x} ({} bytes, allocated at {at} by thread {})",
                        b.start, b.size, b.alloc_tid
                    ),
                    "heap",
                );
            }
        }
        (VarKey::Addr(addr), format!("{addr:#x}"), "address")
    }

    /// Adds the recorded events of one run (`record_events` on).
    pub fn add_run(&mut self, seed: u64, r: &RunResult) {
        self.seeds.push(seed);
        let handles: BTreeMap<u32, Tid> = r.thread_handles.iter().copied().collect();
        let nthreads = r.threads.max(1) as usize;
        let mut vc: Vec<Arc<VectorClock>> = Vec::new();
        for t in 0..nthreads {
            let mut v = VectorClock::default();
            v.set(t as Tid, 1);
            vc.push(Arc::new(v));
        }
        // Spawn edges: a child's clock starts from its parent's at the spawn
        // (the parent's Spawn event or the child's first event, whichever
        // comes first); the parent then ticks.
        let mut started = vec![false; nthreads];
        started[0] = true;
        let mut children: Vec<std::collections::VecDeque<Tid>> =
            vec![std::collections::VecDeque::new(); nthreads];
        for c in 1..nthreads {
            if let Some(&p) = r.thread_parents.get(c) {
                if (p as usize) < nthreads {
                    children[p as usize].push_back(c as Tid);
                }
            }
        }
        let start_child =
            |vc: &mut Vec<Arc<VectorClock>>, started: &mut Vec<bool>, p: usize, c: usize| {
                if started[c] {
                    return;
                }
                started[c] = true;
                let mut v = (*vc[p]).clone();
                v.set(c as Tid, 1);
                vc[c] = Arc::new(v);
                Arc::make_mut(&mut vc[p]).tick(p as Tid);
            };
        let mut join_pending: Vec<Option<Tid>> = vec![None; nthreads];
        // Synchronisation edges, the race detector's rule without locks
        // (which are kept as lock sets, so that lock-ordered pairs stay
        // visible): an atomic write releases its word, an atomic read
        // acquires it; a barrier's arrival releases into it and every
        // return from `pthread_barrier_wait` or `pthread_once` acquires the
        // object; a thread woken from a futex wait acquires the notifies on
        // its word. Atomics on a lock's own words are left out.
        let lock_words: BTreeSet<u32> = r
            .events
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    EventKind::Lock | EventKind::Acquire | EventKind::Unlock | EventKind::CondWait
                )
            })
            .map(|e| e.addr)
            .collect();
        let in_lock = |addr: u32| {
            lock_words
                .range(..=addr)
                .next_back()
                .is_some_and(|&l| addr - l < LOCK_OBJECT_BYTES)
        };
        let mut released: BTreeMap<u32, VectorClock> = BTreeMap::new();
        // Clocks of the notifies on each futex word, which the threads they
        // wake acquire (the race detector's wake edge).
        let mut notified: BTreeMap<u32, VectorClock> = BTreeMap::new();
        let mut acquire_after_call: Vec<Option<u32>> = vec![None; nthreads];
        let acquire = |vc: &mut Arc<VectorClock>, clock: Option<&VectorClock>| {
            if let Some(c) = clock {
                Arc::make_mut(vc).join(c);
            }
        };
        let release = |vc: &mut Arc<VectorClock>,
                       released: &mut BTreeMap<u32, VectorClock>,
                       t: usize,
                       addr: u32| {
            released.entry(addr).or_default().join(vc);
            Arc::make_mut(vc).tick(t as Tid);
        };
        let mut locks: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); nthreads];
        let mut per_var: BTreeMap<VarKey, (String, &'static str, Vec<Access>)> = BTreeMap::new();
        for e in &r.events {
            let t = e.tid as usize;
            if t >= nthreads {
                continue;
            }
            if !started[t] {
                let p = r.thread_parents.get(t).copied().unwrap_or(0) as usize;
                start_child(&mut vc, &mut started, p.min(nthreads - 1), t);
            }
            if let Some(j) = join_pending[t].take() {
                let other = vc[j as usize].clone();
                acquire(&mut vc[t], Some(&other));
            }
            let site = self.sites.site(e.site);
            // The call returns before the thread's next event in user code
            // (its events inside the call are the library's).
            if site.is_some_and(|s| s.user) {
                if let Some(addr) = acquire_after_call[t].take() {
                    acquire(&mut vc[t], released.get(&addr));
                }
            }
            let sync_word =
                e.kind.is_access() && site.is_some_and(|s| s.atomic) && !in_lock(e.addr);
            if sync_word
                && matches!(
                    e.kind,
                    EventKind::Read | EventKind::Rmw | EventKind::Cmpxchg
                )
            {
                acquire(&mut vc[t], released.get(&e.addr));
            }
            // A user access is recorded with the clock before its release;
            // library accesses are not recorded (the arm below skips them).
            let user = site.is_some_and(|s| s.user);
            if sync_word && e.kind.writes() && !user {
                release(&mut vc[t], &mut released, t, e.addr);
            }
            match e.kind {
                EventKind::Call => match site.map(|s| s.kind) {
                    Some(SiteKind::Barrier) => {
                        release(&mut vc[t], &mut released, t, e.addr);
                        acquire_after_call[t] = Some(e.addr);
                    }
                    Some(SiteKind::Once) => acquire_after_call[t] = Some(e.addr),
                    _ => {}
                },
                EventKind::Spawn => {
                    if let Some(c) = children[t].pop_front() {
                        start_child(&mut vc, &mut started, t, c as usize);
                    }
                }
                EventKind::Join => join_pending[t] = handles.get(&e.addr).copied(),
                EventKind::Notify => release(&mut vc[t], &mut notified, t, e.addr),
                EventKind::Wake => acquire(&mut vc[t], notified.get(&e.addr)),
                EventKind::Acquire => {
                    locks[t].insert(e.addr);
                }
                EventKind::Unlock | EventKind::CondWait => {
                    locks[t].remove(&e.addr);
                }
                k if k.is_access() => {
                    let Some(site) = self.sites.site(e.site) else {
                        continue;
                    };
                    if !site.user {
                        continue;
                    }
                    let (key, display, class) = self.key(e.addr, r);
                    let entry = per_var
                        .entry(key)
                        .or_insert_with(|| (display, class, Vec::new()));
                    entry.2.push(Access {
                        tid: e.tid,
                        point: (e.site, access_label(k)),
                        write: k.writes(),
                        bytes: (e.addr, e.addr.saturating_add(e.len.max(1))),
                        locks: locks[t].iter().copied().collect(),
                        vc: vc[t].clone(),
                    });
                }
                _ => {}
            }
            if sync_word && e.kind.writes() && user {
                release(&mut vc[t], &mut released, t, e.addr);
            }
        }
        for (key, (display, class, accesses)) in per_var {
            let threads: BTreeSet<Tid> = accesses.iter().map(|a| a.tid).collect();
            if threads.len() < 2 {
                continue;
            }
            let listed = self.listing(&accesses, r);
            let pairs = self.pairs(&accesses);
            let v = self.vars.entry(key).or_default();
            v.display = display;
            v.class = class;
            v.runs += 1;
            v.threads.extend(threads);
            v.sites.extend(accesses.iter().map(|a| a.point.0));
            if v.listed.is_none() {
                v.listed = Some((seed, listed));
            }
            for (locked, pair, orders, threads, common) in pairs {
                let map = if locked {
                    &mut v.locked
                } else {
                    &mut v.conflicting
                };
                let acc = map.entry(pair).or_default();
                for (i, seen) in orders.iter().enumerate() {
                    if *seen {
                        acc.orders[i] += 1;
                    }
                }
                acc.threads.extend(threads);
                acc.locks.extend(common);
            }
        }
    }

    /// The pairs of one run's accesses to one variable: (lock-ordered,
    /// points, orders seen, thread pairs, common lock names).
    #[allow(clippy::type_complexity)]
    fn pairs(
        &self,
        accesses: &[Access],
    ) -> Vec<(
        bool,
        (Point, Point),
        [bool; 2],
        BTreeSet<(Tid, Tid)>,
        BTreeSet<String>,
    )> {
        // Fold consecutive identical accesses: they add no new order.
        let mut folded: Vec<&Access> = Vec::new();
        for a in accesses {
            if let Some(last) = folded.last() {
                if last.tid == a.tid
                    && last.point == a.point
                    && last.locks == a.locks
                    && last.bytes == a.bytes
                    && Arc::ptr_eq(&last.vc, &a.vc)
                {
                    continue;
                }
            }
            folded.push(a);
        }
        folded.truncate(MAX_PAIR_ACCESSES);
        type Acc = ([bool; 2], BTreeSet<(Tid, Tid)>, BTreeSet<u32>);
        let mut found: BTreeMap<(bool, (Point, Point)), Acc> = BTreeMap::new();
        for (i, x) in folded.iter().enumerate() {
            for y in &folded[i + 1..] {
                let overlap = x.bytes.0 < y.bytes.1 && y.bytes.0 < x.bytes.1;
                if x.tid == y.tid || !(x.write || y.write) || !overlap {
                    continue;
                }
                // Ordered by spawn/join: y's clock has seen x.
                if y.vc.get(x.tid) >= x.vc.get(x.tid) {
                    continue;
                }
                let common: Vec<u32> = x
                    .locks
                    .iter()
                    .filter(|l| y.locks.contains(l))
                    .copied()
                    .collect();
                let (pair, order, threads) = if x.point <= y.point {
                    ((x.point, y.point), 0, (x.tid, y.tid))
                } else {
                    ((y.point, x.point), 1, (y.tid, x.tid))
                };
                let m = found.entry((!common.is_empty(), pair)).or_default();
                m.0[order] = true;
                m.1.insert(threads);
                m.2.extend(common);
            }
        }
        found
            .into_iter()
            .map(|((locked, pair), (orders, threads, locks))| {
                let names = locks.into_iter().map(|a| self.lock_name(a)).collect();
                (locked, pair, orders, threads, names)
            })
            .collect()
    }

    /// One run's accesses in order, consecutive repeats folded, capped.
    fn listing(&self, accesses: &[Access], r: &RunResult) -> Vec<AccessReport> {
        let mut out: Vec<AccessReport> = Vec::new();
        for a in accesses {
            let (site, function) = self.site_text(a.point.0);
            let rep = AccessReport {
                thread: a.tid,
                thread_name: r.thread_names.get(a.tid as usize).cloned().flatten(),
                access: a.point.1.to_string(),
                site,
                function,
                locks: a.locks.iter().map(|&l| self.lock_name(l)).collect(),
                repeat: 1,
            };
            match out.last_mut() {
                Some(last)
                    if AccessReport {
                        repeat: last.repeat,
                        ..rep.clone()
                    } == *last =>
                {
                    last.repeat += 1
                }
                _ => {
                    if out.len() == MAX_LISTED {
                        break;
                    }
                    out.push(rep)
                }
            }
        }
        out
    }

    fn point(&self, p: Point) -> PointReport {
        let (site, function) = self.site_text(p.0);
        PointReport {
            access: p.1.to_string(),
            site,
            function,
        }
    }

    /// The report over every run added.
    pub fn report(&self) -> Report {
        let pair_reports = |m: &BTreeMap<(Point, Point), PairAcc>| -> Vec<PairReport> {
            m.iter()
                .map(|((a, b), acc)| PairReport {
                    first: self.point(*a),
                    second: self.point(*b),
                    threads: acc.threads.iter().map(|&(x, y)| [x, y]).collect(),
                    common_locks: acc.locks.iter().cloned().collect(),
                    runs_first_before_second: acc.orders[0],
                    runs_second_before_first: acc.orders[1],
                })
                .collect()
        };
        let variables = self
            .vars
            .values()
            .map(|v| {
                let (listed_seed, accesses) = v.listed.clone().unwrap_or_default();
                VarReport {
                    name: v.display.clone(),
                    class: v.class.to_string(),
                    threads: v.threads.len(),
                    sites: v.sites.len(),
                    runs: v.runs,
                    listed_seed,
                    accesses,
                    conflicting_pairs: pair_reports(&v.conflicting),
                    lock_ordered_pairs: pair_reports(&v.locked),
                }
            })
            .collect();
        Report {
            runs: self.seeds.len(),
            seeds: self.seeds.clone(),
            variables,
        }
    }
}

impl Report {
    /// The report as text.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        let seeds = match (self.seeds.first(), self.seeds.last()) {
            (Some(a), Some(b)) => format!("seeds {a}..={b}"),
            _ => "no seeds".into(),
        };
        let _ = writeln!(
            o,
            "{} run(s) observed ({seeds}): {} shared variable(s)",
            self.runs,
            self.variables.len()
        );
        let pair_line = |o: &mut String, p: &PairReport, locked: bool| {
            let threads: Vec<String> = p
                .threads
                .iter()
                .map(|[a, b]| format!("t{a}/t{b}"))
                .collect();
            let locks = if locked {
                format!(", common lock {{{}}}", p.common_locks.join(", "))
            } else {
                String::new()
            };
            let _ = writeln!(
                o,
                "    {} {} ({}) <-> {} {} ({}), threads {}{locks}: first-before-second in {} run(s), second-before-first in {}",
                p.first.access,
                p.first.site,
                p.first.function,
                p.second.access,
                p.second.site,
                p.second.function,
                threads.join(" "),
                p.runs_first_before_second,
                p.runs_second_before_first
            );
        };
        for v in &self.variables {
            let _ = writeln!(
                o,
                "\n{} ({}): {} threads, {} sites, shared in {} of {} run(s)",
                v.name, v.class, v.threads, v.sites, v.runs, self.runs
            );
            let _ = writeln!(o, "  accesses (seed {}, observed order):", v.listed_seed);
            for a in &v.accesses {
                let name = a
                    .thread_name
                    .as_ref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default();
                let rep = if a.repeat > 1 {
                    format!(" x{}", a.repeat)
                } else {
                    String::new()
                };
                let _ = writeln!(
                    o,
                    "    t{}{name} {:<3} {} {} locks {{{}}}{rep}",
                    a.thread,
                    a.access,
                    a.site,
                    a.function,
                    a.locks.join(", ")
                );
            }
            if v.conflicting_pairs.is_empty() {
                let _ = writeln!(o, "  conflicting pairs: none");
            } else {
                let _ = writeln!(
                    o,
                    "  conflicting pairs (no common lock, not ordered by spawn/join):"
                );
                for p in &v.conflicting_pairs {
                    pair_line(&mut o, p, false);
                }
            }
            if !v.lock_ordered_pairs.is_empty() {
                let _ = writeln!(
                    o,
                    "  pairs under a common lock (serialised, but in either order):"
                );
                for p in &v.lock_ordered_pairs {
                    pair_line(&mut o, p, true);
                }
            }
        }
        o
    }
}
