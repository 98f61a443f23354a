//! The model every report is drawn from: the events of one run, each with
//! its thread, the variable it touched, its user-code location and source
//! line; grouped into the steps a reader cares about; with the relations
//! that explain a failure marked (preemptions, the writes failing reads saw,
//! lost updates, the failing step).
//!
//! Definitions used throughout:
//! - *library event*: executed in library code (wasi-libc, libc++, the
//!   compat library), i.e. its site is not user code or its innermost frame
//!   is in a library file (e.g. an inlined libc++ template). Its location is
//!   that of the user-code call it happens in.
//! - *shared word*: a 4-byte word accessed by two threads, at least one
//!   access a write, where the earlier of the two accesses happened after
//!   the other thread was created (so initialisation before a thread is
//!   spawned does not count).
//! - *group*: a maximal run of consecutive steps of one thread at one
//!   user-code line (one row of a diagram).

use super::source::SourceCache;
use crate::instrument::dwarf::is_library_unit;
use crate::instrument::{Frame, Loc, SiteKind, SiteTable};
use crate::model::{EventKind, Tid, NO_SITE};
use crate::runtime::{Program, RunResult};
use crate::trace::Event;
use crate::verdict::Verdict;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// What a report is made from.
pub struct Input<'a> {
    /// The program the run was made of (its site table names things).
    pub program: &'a Program,
    /// A run recorded with `record_events` (and ideally `event_stacks`).
    pub result: &'a RunResult,
    /// Where to look for source files whose recorded path is not found.
    pub source_dirs: Vec<PathBuf>,
}

/// A guest thread of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadInfo {
    /// Its id (spawn order; 0 is main).
    pub tid: Tid,
    /// Set with `heddle_thread_name`.
    pub name: Option<String>,
    /// The user function it started in (`main` for thread 0).
    pub entry: Option<String>,
    /// `T1 depositor`: the tid and the name (or entry function).
    pub label: String,
}

/// One executed event, resolved for display.
#[derive(Debug, Clone)]
pub struct Ev {
    /// The event as the run recorded it.
    pub ev: Event,
    /// Executed in library code (see the module documentation).
    pub lib: bool,
    /// The user-code location it belongs to.
    pub loc: Option<Loc>,
    /// The user function at `loc`.
    pub function: Option<String>,
    /// For a library event: the library function user code called at `loc`.
    pub callee: Option<String>,
    /// The variable touched (`balance`, `lock_a`, `cache+4`, `[0x21690]`).
    pub var: Option<String>,
    /// Touches a shared word.
    pub shared: bool,
    /// Symbolized stack, innermost first (empty without event stacks).
    pub stack: Vec<Frame>,
    /// `R balance = 0`, `lock account_lock`, `spawn T1`, …
    pub text: String,
}

/// What a mark says about a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mark {
    /// The thread was switched to here by a preemption.
    Preempt,
    /// A write that a failing read saw.
    Seen,
    /// A read by the failing thread that saw another thread's write.
    Saw,
    /// The read a lost update was based on (it read the value before
    /// another thread's write).
    Stale,
    /// A write that overwrote another thread's write it had not read (a lost update).
    Overwrite,
    /// One side of a data race.
    Race,
    /// The allocation or the free of the heap block a memory error is about.
    Block,
    /// Where the thread is blocked for good (deadlock) or stopped (hang).
    Blocked,
    /// The failing step.
    Fail,
}

impl Mark {
    /// One-character symbol for text diagrams.
    pub fn symbol(self) -> &'static str {
        match self {
            Mark::Preempt => "»",
            Mark::Seen => "◆",
            Mark::Saw => "◇",
            Mark::Stale => "○",
            Mark::Overwrite => "!",
            Mark::Race => "≠",
            Mark::Block => "†",
            Mark::Blocked => "■",
            Mark::Fail => "✗",
        }
    }

    /// A stable lower-case name (used by the HTML report).
    pub fn name(self) -> &'static str {
        match self {
            Mark::Preempt => "preempt",
            Mark::Seen => "seen",
            Mark::Saw => "saw",
            Mark::Stale => "stale",
            Mark::Overwrite => "overwrite",
            Mark::Race => "race",
            Mark::Block => "block",
            Mark::Blocked => "blocked",
            Mark::Fail => "fail",
        }
    }
}

/// Consecutive steps of one thread at one user-code line.
#[derive(Debug, Clone)]
pub struct Group {
    /// The thread that made the steps.
    pub tid: Tid,
    /// Indices into [`Timeline::events`] (consecutive).
    pub events: std::ops::Range<usize>,
    /// The step of its first event.
    pub first_step: u64,
    /// The step of its last event.
    pub last_step: u64,
    /// The user-code location of its steps.
    pub loc: Option<Loc>,
    /// The user function at `loc`.
    pub function: Option<String>,
    /// The source line at `loc`.
    pub source: Option<String>,
    /// The cell text (empty for steps with nothing to say).
    pub text: String,
    /// Worth a row of its own: it touches shared data, is a sync operation,
    /// blocks, or carries a mark.
    pub interesting: bool,
    /// Only library events.
    pub lib: bool,
    /// What the report says about these steps.
    pub marks: BTreeSet<Mark>,
    /// For [`Mark::Preempt`]: the thread that was preempted.
    pub preempted: Option<Tid>,
}

/// An explanation attached to a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// What kind of explanation.
    pub mark: Mark,
    /// The group it explains (index into [`Timeline::groups`]).
    pub group: usize,
    /// The explanation.
    pub text: String,
}

/// The whole model of a run.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// Every thread of the run, by tid.
    pub threads: Vec<ThreadInfo>,
    /// Every event, in step order.
    pub events: Vec<Ev>,
    /// The events grouped into rows, in step order.
    pub groups: Vec<Group>,
    /// Explanations of the marks, in row order.
    pub notes: Vec<Note>,
    /// How the run ended.
    pub verdict: Verdict,
    /// The failing group (assertion, trap, memory error, race).
    pub failing: Option<usize>,
    /// The data races of the run: those it reported and, with
    /// `--races fail`, the one that is its verdict.
    pub races: Vec<crate::verdict::RaceReport>,
}

/// Whether a source file belongs to a library.
pub fn is_library_file(file: &str) -> bool {
    is_library_unit(file, "") || file.starts_with("/usr/")
}

/// A library function as users know it: `__pthread_mutex_lock` is
/// `pthread_mutex_lock`.
pub fn display_fn(name: &str) -> String {
    // C++: drop template arguments, ABI tags, parameters and libc++'s
    // inline namespace (`std::__2::map<…>::find[abi:ne190000]<int>(int const&)`
    // is `std::map::find`).
    let mut out = String::new();
    let mut depth = 0usize;
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            '[' if depth == 0 => {
                for d in chars.by_ref() {
                    if d == ']' {
                        break;
                    }
                }
            }
            '(' if depth == 0 && !out.is_empty() => break,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    let out = out
        .replace("std::__2::", "std::")
        .replace("std::__1::", "std::");
    let n = out.trim_start_matches('_');
    if n.is_empty() {
        name.to_string()
    } else {
        n.to_string()
    }
}

/// An integer for humans: decimal when small, hex otherwise.
pub fn format_value(v: u64, len: u32) -> String {
    let bits = (len.clamp(1, 8) * 8) as u64;
    let v = if bits < 64 {
        v & ((1u64 << bits) - 1)
    } else {
        v
    };
    let signed = if bits < 64 && v >> (bits - 1) & 1 == 1 {
        v as i64 - (1i64 << bits)
    } else {
        v as i64
    };
    if signed.unsigned_abs() < 1_000_000 {
        signed.to_string()
    } else {
        format!("{v:#x}")
    }
}

fn var_name(sites: &SiteTable, addr: u32) -> String {
    match sites.symbol_at(addr) {
        Some(s) if s.addr == addr => s.name.clone(),
        Some(s) => format!("{}+{}", s.name, addr - s.addr),
        None => format!("[{addr:#x}]"),
    }
}

/// The innermost frame in a user file.
fn user_frame(stack: &[Frame]) -> Option<usize> {
    stack.iter().position(|f| {
        f.loc
            .as_ref()
            .is_some_and(|l| !is_library_file(&l.file) && l.line > 0)
    })
}

fn words(addr: u32, len: u32) -> std::ops::RangeInclusive<u32> {
    let len = len.clamp(1, 64);
    (addr >> 2)..=(addr.saturating_add(len - 1) >> 2)
}

fn is_read(k: EventKind) -> bool {
    matches!(
        k,
        EventKind::Read | EventKind::Rmw | EventKind::Cmpxchg | EventKind::Copy
    )
}

/// Sync operations (shown when user code performs them).
fn is_sync(k: EventKind, atomic: bool) -> bool {
    match k {
        EventKind::Rmw | EventKind::Cmpxchg => true,
        EventKind::Read | EventKind::Write => atomic,
        EventKind::Copy | EventKind::Fill | EventKind::Budget | EventKind::Call => false,
        _ => true,
    }
}

impl Timeline {
    /// Builds the model. With `all`, every event is its own group and
    /// library events keep their own location.
    pub fn build(input: &Input, all: bool) -> Timeline {
        let r = input.result;
        let sites = &input.program.sites;
        let mut src = SourceCache::new(input.source_dirs.clone());
        let n = r.events.len();

        // When each thread was created: the step of the spawn that made it
        // (spawns number threads in order), 0 for the main thread.
        let nthreads = (r.threads as usize).max(r.thread_names.len()).max(
            r.events
                .iter()
                .map(|e| e.tid as usize + 1)
                .max()
                .unwrap_or(1),
        );
        let mut created = vec![0u64; nthreads];
        let mut parent: Vec<Option<Tid>> = vec![None; nthreads];
        let mut next_child = 1usize;
        for e in &r.events {
            if e.kind == EventKind::Spawn && next_child < nthreads {
                created[next_child] = e.step;
                parent[next_child] = Some(e.tid);
                next_child += 1;
            }
        }

        // Resolve each event.
        let mut events: Vec<Ev> = Vec::with_capacity(n);
        let mut spawned: Tid = 0;
        for (i, e) in r.events.iter().enumerate() {
            let stack = r.event_stacks.get(i).cloned().unwrap_or_default();
            let site = if e.site == NO_SITE {
                None
            } else {
                sites.site(e.site)
            };
            let site_lib_file = site
                .and_then(|s| s.loc.as_ref())
                .is_some_and(|l| is_library_file(&l.file));
            let inner_lib_file = stack
                .first()
                .and_then(|f| f.loc.as_ref())
                .is_some_and(|l| is_library_file(&l.file));
            let lib = match e.kind {
                // Thread lifecycle, and lock calls (instrumented at their
                // call sites in user code).
                EventKind::Start
                | EventKind::Exit
                | EventKind::Spawn
                | EventKind::Lock
                | EventKind::Acquire
                | EventKind::Unlock
                | EventKind::CondWait
                | EventKind::Join => false,
                _ => site.is_none_or(|s| !s.user) || site_lib_file || inner_lib_file,
            };
            let (loc, function, callee) = match user_frame(&stack) {
                Some(u) => (
                    stack[u].loc.clone(),
                    stack[u].function.clone(),
                    if u > 0 {
                        stack[u - 1].function.as_deref().map(display_fn)
                    } else {
                        None
                    },
                ),
                None => match site {
                    Some(s) if s.user && !site_lib_file => {
                        (s.loc.clone(), Some(s.func_name.clone()), None)
                    }
                    Some(s) => (None, None, Some(display_fn(&s.func_name))),
                    None => (None, None, None),
                },
            };
            let (loc, function) = if all && lib {
                match site {
                    Some(s) => (s.loc.clone(), Some(s.func_name.clone())),
                    None => (loc, function),
                }
            } else {
                (loc, function)
            };
            let var = match e.kind {
                k if k.is_access() => Some(var_name(sites, e.addr)),
                EventKind::Lock
                | EventKind::Acquire
                | EventKind::Unlock
                | EventKind::CondWait
                | EventKind::Wait
                | EventKind::Notify => Some(var_name(sites, e.addr)),
                _ => None,
            };
            let v = var.clone().unwrap_or_default();
            let val = e
                .value
                .map(|x| format!(" = {}", format_value(x, e.len)))
                .unwrap_or_default();
            let text = match e.kind {
                EventKind::Read => format!("R {v}{val}"),
                EventKind::Write => format!("W {v}{val}"),
                EventKind::Rmw => format!("RMW {v}{val}"),
                EventKind::Cmpxchg => format!("CAS {v}{val}"),
                EventKind::Copy => format!("copy {v} ({} bytes)", e.len),
                EventKind::Fill => format!("fill {v} ({} bytes)", e.len),
                EventKind::Lock => format!("lock {v}"),
                EventKind::Acquire => format!("acquired {v}"),
                EventKind::Unlock => format!("unlock {v}"),
                EventKind::CondWait => format!("cond-wait (unlocks {v})"),
                EventKind::Wait => format!("wait {v}"),
                EventKind::Notify => format!("notify {v}"),
                EventKind::Wake => "woken".into(),
                EventKind::Spawn => {
                    spawned += 1;
                    format!("spawn T{spawned}")
                }
                EventKind::Start => "start".into(),
                EventKind::Exit => "exit".into(),
                EventKind::Label => {
                    match r
                        .labels
                        .iter()
                        .find(|(s, t, _)| *s <= e.step && *t == e.tid && *s + 1 >= e.step)
                    {
                        Some((_, _, l)) => format!("event \"{l}\""),
                        None => "event".into(),
                    }
                }
                // Calls into the guest SDK say what they are; other host
                // calls (WASI, pthread internals) say nothing.
                EventKind::Call => match site.map(|s| (s.kind, s.callee.as_deref())) {
                    Some((_, Some(c @ ("heddle.assert" | "heddle.fail")))) => {
                        c.replace("heddle.", "heddle_")
                    }
                    // Allocator calls (recorded by the memory checker).
                    Some((SiteKind::Alloc, c)) => {
                        format!("{} {} bytes → {:#x}", c.unwrap_or("alloc"), e.len, e.addr)
                    }
                    Some((SiteKind::Free, c)) => format!("{} {:#x}", c.unwrap_or("free"), e.addr),
                    _ => String::new(),
                },
                EventKind::Budget => String::new(),
                k => k.label().to_string(),
            };
            events.push(Ev {
                ev: *e,
                lib,
                loc,
                function,
                callee,
                var,
                shared: false,
                stack,
                text,
            });
        }

        // Shared words.
        let mut by_word: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, e) in r.events.iter().enumerate() {
            if e.kind.is_access() && e.len > 0 {
                for w in words(e.addr, e.len) {
                    by_word.entry(w).or_default().push(i);
                }
            }
        }
        let mut shared_words = BTreeSet::new();
        for (w, acc) in &by_word {
            let mut last_write: BTreeMap<Tid, u64> = BTreeMap::new();
            let mut last_access: BTreeMap<Tid, u64> = BTreeMap::new();
            let mut shared = false;
            for &i in acc {
                let e = &r.events[i];
                let alive = |t: Tid| created[t as usize];
                // A conflicting earlier access by another thread made when
                // this thread already existed?
                let earlier = if e.kind.writes() {
                    &last_access
                } else {
                    &last_write
                };
                // Accesses of the thread that created this one, made before
                // it did, are initialisation; a third thread's are not.
                let before_spawn = |t: Tid, s: u64| {
                    s < alive(e.tid) && parent.get(e.tid as usize).copied().flatten() == Some(t)
                };
                if earlier
                    .iter()
                    .any(|(&t, &s)| t != e.tid && !before_spawn(t, s))
                {
                    shared = true;
                    break;
                }
                last_access.insert(e.tid, e.step);
                if e.kind.writes() {
                    last_write.insert(e.tid, e.step);
                }
            }
            if shared {
                shared_words.insert(*w);
            }
        }
        for ev in events.iter_mut() {
            let e = ev.ev;
            if e.kind.is_access() && e.len > 0 {
                ev.shared = words(e.addr, e.len).any(|w| shared_words.contains(&w));
            }
        }
        // The words of lock objects (their internals explain nothing).
        let mut lock_words = BTreeSet::new();
        for e in &r.events {
            if matches!(
                e.kind,
                EventKind::Lock | EventKind::Acquire | EventKind::Unlock | EventKind::CondWait
            ) {
                let size = match sites.symbol_at(e.addr) {
                    Some(s) if s.addr == e.addr && s.size > 0 => s.size,
                    _ => 24,
                };
                lock_words.extend(words(e.addr, size.min(64)));
            }
        }
        // Shared data that is not a lock's.
        let data_words: BTreeSet<u32> = shared_words.difference(&lock_words).copied().collect();

        // Targets of joins: the spawned thread whose struct the join names
        // (the child's first library accesses are to its own struct).
        let mut child_addrs: BTreeMap<Tid, Vec<u32>> = BTreeMap::new();
        for e in &events {
            if e.ev.tid != 0 && e.lib && e.ev.kind.is_access() {
                let v = child_addrs.entry(e.ev.tid).or_default();
                if v.len() < 4 {
                    v.push(e.ev.addr);
                }
            }
        }
        for ev in events.iter_mut() {
            if ev.ev.kind == EventKind::Join {
                let j = ev.ev.addr;
                let target = child_addrs
                    .iter()
                    .filter_map(|(t, addrs)| {
                        addrs
                            .iter()
                            .filter(|&&a| a >= j && a - j < 1024)
                            .map(|&a| a - j)
                            .min()
                            .map(|d| (d, *t))
                    })
                    .min();
                ev.text = match target {
                    Some((_, t)) => format!("join T{t}"),
                    None => "join".into(),
                };
                ev.var = None;
            }
        }

        // Threads.
        let mut threads = Vec::new();
        for tid in 0..nthreads as Tid {
            let name = r.thread_names.get(tid as usize).cloned().flatten();
            let entry = if tid == 0 {
                Some("main".to_string())
            } else {
                events.iter().filter(|e| e.ev.tid == tid).find_map(|e| {
                    e.stack
                        .iter()
                        .rev()
                        .find(|f| f.loc.as_ref().is_some_and(|l| !is_library_file(&l.file)))
                        .and_then(|f| f.function.clone())
                })
            };
            let label = match (&name, &entry) {
                (Some(n), _) => format!("T{tid} {n}"),
                (None, Some(f)) => format!("T{tid} {f}"),
                (None, None) => format!("T{tid}"),
            };
            threads.push(ThreadInfo {
                tid,
                name,
                entry,
                label,
            });
        }

        // Event-level marks.
        let mut marks: BTreeMap<usize, BTreeSet<Mark>> = BTreeMap::new();
        let mut preempted_from: BTreeMap<usize, Tid> = BTreeMap::new();
        let mut notes_ev: Vec<(Mark, usize, String)> = Vec::new();
        for i in 0..n {
            if r.events[i].preempted && i > 0 && r.events[i - 1].tid != r.events[i].tid {
                marks.entry(i).or_default().insert(Mark::Preempt);
                preempted_from.insert(i, r.events[i - 1].tid);
            }
        }
        let last_of = |tid: Tid| (0..n).rev().find(|&i| r.events[i].tid == tid);
        let label = |t: Tid| {
            threads
                .get(t as usize)
                .map(|x| x.label.clone())
                .unwrap_or_else(|| format!("T{t}"))
        };
        let at = |i: usize| -> String {
            match &events[i].loc {
                Some(l) => format!("step {} ({})", r.events[i].step, l.short()),
                None => format!("step {}", r.events[i].step),
            }
        };
        let failing_tid = match &r.verdict {
            Verdict::Assertion { tid, .. } | Verdict::Trap { tid, .. } => Some(*tid),
            Verdict::Memory(m) => Some(m.tid),
            Verdict::Race(x) => Some(x.second.tid),
            _ => None,
        };
        let failing_ev = failing_tid.and_then(last_of);
        if let Some(f) = failing_ev {
            marks.entry(f).or_default().insert(Mark::Fail);
        }
        match &r.verdict {
            Verdict::Deadlock { threads: bt } => {
                for b in bt {
                    if let Some(i) = last_of(b.tid) {
                        marks.entry(i).or_default().insert(Mark::Blocked);
                    }
                }
            }
            Verdict::Hang { threads: ts, .. } => {
                for t in ts {
                    if let Some(i) = last_of(t.tid) {
                        marks.entry(i).or_default().insert(Mark::Blocked);
                    }
                }
            }
            _ => {}
        }

        // A memory error: where its block was allocated and freed.
        if let (Verdict::Memory(m), Some(f)) = (&r.verdict, failing_ev) {
            if let Some(b) = &m.block {
                let heap = |kind: SiteKind| {
                    (0..f).rev().find(|&i| {
                        let e = &r.events[i];
                        e.kind == EventKind::Call
                            && e.addr == b.start
                            && sites.site(e.site).is_some_and(|s| s.kind == kind)
                    })
                };
                for (kind, what) in [(SiteKind::Alloc, "allocated"), (SiteKind::Free, "freed")] {
                    if let Some(i) = heap(kind) {
                        marks.entry(i).or_default().insert(Mark::Block);
                        notes_ev.push((
                            Mark::Block,
                            i,
                            format!(
                                "{} {what} the block at {:#x} ({} bytes) at {}",
                                label(r.events[i].tid),
                                b.start,
                                b.size,
                                at(i)
                            ),
                        ));
                    }
                }
            }
        }

        // The writes the failing thread's last reads of shared data saw.
        if let (Some(ft), Some(f)) = (failing_tid, failing_ev) {
            let mut seen_words = BTreeSet::new();
            let mut writers: Vec<(usize, usize)> = Vec::new();
            for i in (0..f).rev() {
                let e = &r.events[i];
                if e.tid != ft || !is_read(e.kind) || !events[i].shared {
                    continue;
                }
                let ws: Vec<u32> = words(e.addr, e.len)
                    .filter(|w| data_words.contains(w))
                    .collect();
                if ws.is_empty() {
                    continue;
                }
                if ws.iter().all(|w| seen_words.contains(w)) {
                    continue;
                }
                seen_words.extend(ws.iter().copied());
                // The last write to an overlapping word before the read.
                let w = (0..i).rev().find(|&j| {
                    let x = &r.events[j];
                    x.kind.writes() && x.len > 0 && words(x.addr, x.len).any(|w| ws.contains(&w))
                });
                if let Some(w) = w {
                    if r.events[w].tid != ft && !writers.iter().any(|&(ww, _)| ww == w) {
                        writers.push((w, i));
                    }
                }
                if writers.len() >= 3 {
                    break;
                }
            }
            writers.reverse();
            for (w, rd) in writers {
                marks.entry(w).or_default().insert(Mark::Seen);
                marks.entry(rd).or_default().insert(Mark::Saw);
                let what = events[rd].var.clone().unwrap_or_default();
                let val = r.events[rd]
                    .value
                    .map(|v| format!(" = {}", format_value(v, r.events[rd].len)))
                    .unwrap_or_default();
                notes_ev.push((
                    Mark::Seen,
                    w,
                    format!(
                        "{} read {what}{val} at {}: the value {} wrote at {}",
                        label(ft),
                        at(rd),
                        label(r.events[w].tid),
                        at(w)
                    ),
                ));
            }
        }

        // Lost updates: a thread writes a word it read before another
        // thread's write, without reading that write.
        for acc in by_word.values() {
            let mut last: BTreeMap<Tid, (usize, bool)> = BTreeMap::new(); // (event, was a read)
            let mut last_write: Option<usize> = None;
            for &i in acc {
                let e = &r.events[i];
                if events[i].lib || !data_words.contains(&(e.addr >> 2)) {
                    continue;
                }
                if e.kind == EventKind::Write {
                    if let (Some(&(rd, true)), Some(w)) = (last.get(&e.tid), last_write) {
                        let other = &r.events[w];
                        if other.tid != e.tid
                            && w > rd
                            && !marks.get(&i).is_some_and(|m| m.contains(&Mark::Overwrite))
                        {
                            marks.entry(i).or_default().insert(Mark::Overwrite);
                            marks.entry(rd).or_default().insert(Mark::Stale);
                            let what = events[i].var.clone().unwrap_or_default();
                            let v = |x: usize| {
                                r.events[x]
                                    .value
                                    .map(|v| format!(" = {}", format_value(v, r.events[x].len)))
                                    .unwrap_or_default()
                            };
                            notes_ev.push((
                                Mark::Overwrite,
                                i,
                                format!(
                                    "lost update: {} writes {what}{} at {}, over the {what}{} {} wrote at {}; it had read {what}{} at {}, before that write",
                                    label(e.tid),
                                    v(i),
                                    at(i),
                                    v(w),
                                    label(other.tid),
                                    at(w),
                                    v(rd),
                                    at(rd)
                                ),
                            ));
                        }
                    }
                }
                last.insert(e.tid, (i, e.kind == EventKind::Read));
                if e.kind.writes() {
                    last_write = Some(i);
                }
            }
        }

        // Data races reported by the run.
        for race in &r.races {
            let find = |tid: Tid, site: &str, write: bool, before: usize| {
                (0..before).rev().find(|&i| {
                    let e = &r.events[i];
                    e.tid == tid
                        && e.kind.is_access()
                        && e.kind.writes() == write
                        && sites.site(e.site).is_some_and(|s| s.where_() == site)
                })
            };
            let second = find(race.second.tid, &race.second.site, race.second.write, n);
            let first =
                second.and_then(|s| find(race.first.tid, &race.first.site, race.first.write, s));
            if let (Some(a), Some(b)) = (first, second) {
                marks.entry(a).or_default().insert(Mark::Race);
                marks.entry(b).or_default().insert(Mark::Race);
                notes_ev.push((Mark::Race, b, race.summary()));
            }
        }

        // Which waits blocked: the thread's next event is a wake-up.
        let mut blocking = BTreeSet::new();
        let mut pending_wait: BTreeMap<Tid, usize> = BTreeMap::new();
        for (i, e) in r.events.iter().enumerate() {
            if let Some(w) = pending_wait.remove(&e.tid) {
                if e.kind == EventKind::Wake {
                    blocking.insert(w);
                }
            }
            if matches!(e.kind, EventKind::Wait) {
                pending_wait.insert(e.tid, i);
            }
        }
        // A wait that is a thread's last event blocked until the end.
        blocking.extend(pending_wait.values().copied());

        // Groups.
        let mut groups: Vec<Group> = Vec::new();
        let mut i = 0;
        while i < n {
            let tid = r.events[i].tid;
            let key = events[i].loc.as_ref().map(|l| (l.file.clone(), l.line));
            let mut j = i + 1;
            if !all {
                while j < n
                    && r.events[j].tid == tid
                    && events[j].loc.as_ref().map(|l| (l.file.clone(), l.line)) == key
                    && !marks.get(&j).is_some_and(|m| m.contains(&Mark::Preempt))
                {
                    j += 1;
                }
            }
            groups.push(Group {
                tid,
                events: i..j,
                first_step: r.events[i].step,
                last_step: r.events[j - 1].step,
                loc: events[i].loc.clone(),
                function: events[i].function.clone(),
                source: None,
                text: String::new(),
                interesting: false,
                lib: events[i..j].iter().all(|e| e.lib),
                marks: BTreeSet::new(),
                preempted: None,
            });
            i = j;
        }
        let mut group_of = vec![0usize; n];
        for (gi, g) in groups.iter().enumerate() {
            for k in g.events.clone() {
                group_of[k] = gi;
            }
        }
        let last_group_of: BTreeMap<Tid, usize> = groups
            .iter()
            .enumerate()
            .map(|(gi, g)| (g.tid, gi))
            .collect();
        // Per thread: its first and last group with user code, and the
        // first group of its exit path (library code after the last).
        let mut user_span: BTreeMap<Tid, (usize, usize)> = BTreeMap::new();
        for (gi, g) in groups.iter().enumerate() {
            if !g.lib && g.loc.is_some() {
                let e = user_span.entry(g.tid).or_insert((gi, gi));
                e.1 = gi;
            }
        }
        let mut first_exit: BTreeMap<Tid, usize> = BTreeMap::new();
        for (gi, g) in groups.iter().enumerate() {
            if let Some(&(_, last)) = user_span.get(&g.tid) {
                if gi > last && g.loc.is_none() {
                    first_exit.entry(g.tid).or_insert(gi);
                }
            }
        }
        let finished: BTreeSet<Tid> = match &r.verdict {
            Verdict::Deadlock { threads: bt } => {
                let b: BTreeSet<Tid> = bt.iter().map(|b| b.tid).collect();
                (1..nthreads as Tid).filter(|t| !b.contains(t)).collect()
            }
            Verdict::Hang { threads: ts, .. } => {
                let b: BTreeSet<Tid> = ts.iter().map(|b| b.tid).collect();
                (1..nthreads as Tid).filter(|t| !b.contains(t)).collect()
            }
            _ => (1..nthreads as Tid)
                .filter(|t| Some(*t) != failing_tid)
                .collect(),
        };
        // The previous group of each thread (and its location).
        let mut prev_of_thread: BTreeMap<Tid, usize> = BTreeMap::new();
        let mut prev_loc: BTreeMap<Tid, Option<Loc>> = BTreeMap::new();
        for (gi, g) in groups.iter_mut().enumerate() {
            let evs = &events[g.events.clone()];
            let mut items: Vec<String> = Vec::new();
            let mut lib_wait = false;
            let mut lib_wake = false;
            let mut lib_shared = false;
            let mut interesting = false;
            let mut k = g.events.start;
            while k < g.events.end {
                let e = &events[k];
                let atomic = sites.site(e.ev.site).is_some_and(|s| s.atomic);
                if e.lib && !all {
                    if e.ev.kind == EventKind::Wait && blocking.contains(&k) {
                        lib_wait = true;
                    }
                    if e.ev.kind == EventKind::Wake {
                        lib_wake = true;
                    }
                    lib_shared |= e.shared;
                    k += 1;
                    continue;
                }
                let says = all
                    || e.shared
                    || is_sync(e.ev.kind, atomic)
                    || (e.ev.kind == EventKind::Call && !e.text.is_empty());
                if !says {
                    k += 1;
                    continue;
                }
                interesting = true;
                if e.ev.kind == EventKind::Wait && blocking.contains(&k) {
                    lib_wait = true;
                }
                let mut text = e.text.clone();
                // lock + acquired at once: "lock X".
                if e.ev.kind == EventKind::Lock {
                    if let Some(a) = (k + 1..g.events.end).find(|&x| {
                        events[x].ev.kind == EventKind::Acquire && events[x].ev.addr == e.ev.addr
                    }) {
                        let _ = a;
                        items.push(text);
                        k += 1;
                        // Skip to the acquire (the library steps between are the lock's).
                        while k < g.events.end && events[k].ev.kind != EventKind::Acquire {
                            k += 1;
                        }
                        k += 1;
                        continue;
                    }
                }
                if !text.is_empty() {
                    if let Some(last) = items.last_mut() {
                        if strip_count(last) == text {
                            let c = count_of(last) + 1;
                            *last = format!("{text} ×{c}");
                            k += 1;
                            continue;
                        }
                    }
                    items.push(std::mem::take(&mut text));
                }
                k += 1;
            }
            let lib_only = evs.iter().all(|e| e.lib) && !all;
            if lib_only {
                let (first_user, last_user) =
                    user_span.get(&g.tid).copied().unwrap_or((usize::MAX, 0));
                if gi < first_user || first_user == usize::MAX {
                    // Thread start-up code (before its first user-code step).
                } else if gi > last_user && g.loc.is_none() {
                    if Some(&gi) == first_exit.get(&g.tid) && finished.contains(&g.tid) {
                        items.push("exit".into());
                        interesting = true;
                    }
                } else {
                    items.push(match evs.iter().find_map(|e| e.callee.clone()) {
                        Some(c) => format!("in {c}"),
                        None => "in library code".to_string(),
                    });
                    // The rest of a call whose start is already shown
                    // (the thread was switched away inside it) says
                    // nothing new.
                    let continues = prev_of_thread
                        .get(&g.tid)
                        .is_some_and(|&p: &usize| p < gi && prev_loc.get(&g.tid) == Some(&g.loc));
                    if lib_shared && !continues {
                        interesting = true;
                    }
                }
            }
            if lib_wake {
                if lib_only {
                    items.clear();
                }
                items.insert(0, "woken".into());
                interesting = true;
            }
            if lib_wait {
                match items.last_mut() {
                    Some(l) if lib_only && l.starts_with("in ") => *l = format!("blocks {l}"),
                    _ => items.push("blocks".into()),
                }
                interesting = true;
            }
            for x in g.events.clone() {
                if let Some(m) = marks.get(&x) {
                    g.marks.extend(m.iter().copied());
                }
                if let Some(&from) = preempted_from.get(&x) {
                    g.preempted = Some(from);
                }
            }
            // A preemption alone is worth a row only where it lands in
            // user code with something to say; elsewhere the thread's next
            // row shows that it ran.
            let only_preempt = g.marks.iter().all(|m| *m == Mark::Preempt);
            if !g.marks.is_empty() && (!only_preempt || (!lib_only && !items.is_empty())) {
                interesting = true;
            }
            if Some(gi) == last_group_of.get(&g.tid).copied()
                && finished.contains(&g.tid)
                && !first_exit.contains_key(&g.tid)
                && !items.iter().any(|s| s == "exit")
            {
                items.push("exit".into());
                interesting = true;
            }
            g.text = items.join("; ");
            g.interesting = interesting;
            prev_of_thread.insert(g.tid, gi);
            prev_loc.insert(g.tid, g.loc.clone());
            g.lib = lib_only;
            g.source = g.loc.as_ref().and_then(|l| src.line(&l.file, l.line));
        }

        let mut notes: Vec<Note> = notes_ev
            .into_iter()
            .map(|(mark, i, text)| Note {
                mark,
                group: group_of[i],
                text,
            })
            .collect();
        let npreempt = groups
            .iter()
            .filter(|g| g.interesting && g.marks.contains(&Mark::Preempt))
            .count();
        for (gi, g) in groups.iter().enumerate() {
            if npreempt > 3 {
                break;
            }
            if let (Some(from), true) = (
                g.preempted,
                g.interesting && g.marks.contains(&Mark::Preempt),
            ) {
                notes.push(Note {
                    mark: Mark::Preempt,
                    group: gi,
                    text: format!(
                        "step {}: {} preempts {}, which could have gone on",
                        g.first_step,
                        label(g.tid),
                        label(from)
                    ),
                });
            }
        }
        notes.sort_by_key(|x| (x.group, x.mark));
        let failing = failing_ev.map(|f| group_of[f]);
        let mut races = r.races.clone();
        if let Verdict::Race(x) = &r.verdict {
            if !races.iter().any(|y| y.key() == x.key()) {
                races.push(x.clone());
            }
        }
        Timeline {
            races,
            threads,
            events,
            groups,
            notes,
            verdict: r.verdict.clone(),
            failing,
        }
    }

    /// The label of thread `tid` (`T1 depositor`).
    pub fn label(&self, tid: Tid) -> String {
        self.threads
            .get(tid as usize)
            .map(|t| t.label.clone())
            .unwrap_or_else(|| format!("T{tid}"))
    }
}

fn count_of(s: &str) -> u32 {
    s.rsplit_once(" ×")
        .and_then(|(_, c)| c.parse().ok())
        .unwrap_or(1)
}

fn strip_count(s: &str) -> &str {
    match s.rsplit_once(" ×") {
        Some((a, c)) if c.parse::<u32>().is_ok() => a,
        _ => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_names_read_like_source() {
        assert_eq!(display_fn("__pthread_mutex_lock"), "pthread_mutex_lock");
        assert_eq!(
            display_fn("std::__2::map<int, Block*, std::__2::less<int>>::find[abi:ne190000]<int>(int const&)"),
            "std::map::find"
        );
        assert_eq!(display_fn("executor(void*)"), "executor");
    }

    #[test]
    fn values_read_like_integers() {
        assert_eq!(format_value(3, 4), "3");
        assert_eq!(format_value(0xffff_ffff, 4), "-1");
        assert_eq!(format_value(1, 1), "1");
        assert_eq!(format_value(0x21690, 4), "136848");
        assert_eq!(format_value(0x0123_4567, 4), "0x1234567");
    }

    #[test]
    fn repeated_texts_count() {
        assert_eq!(count_of("R x = 1 ×3"), 3);
        assert_eq!(strip_count("R x = 1 ×3"), "R x = 1");
        assert_eq!(strip_count("R x = 1"), "R x = 1");
    }
}
