//! The first steps of building a [`Timeline`](super::Timeline): the threads
//! of the run and where each event happened — its user-code location and
//! function, whether it ran in library code, the variable it touched and
//! the text that shows it.

use super::{display_fn, format_value, is_library_file, Ev, ThreadInfo};
use crate::instrument::{Frame, Loc, Site, SiteKind, SiteTable};
use crate::model::{EventKind, Tid, NO_SITE};
use crate::runtime::RunResult;
use crate::trace::Event;
use std::collections::{BTreeMap, HashMap};

/// How the run's threads came to be (spawns number threads in order).
pub(super) struct ThreadOrigins {
    /// Per thread: the step of the spawn that created it, 0 for the main
    /// thread.
    pub created: Vec<u64>,
    /// Per thread: the thread that spawned it, `None` for the main thread.
    pub parent: Vec<Option<Tid>>,
}

impl ThreadOrigins {
    /// Takes the run's thread count, names and events; produces when and by
    /// whom each thread was created, for every thread an event or the run
    /// names.
    pub fn of(r: &RunResult) -> ThreadOrigins {
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
        ThreadOrigins { created, parent }
    }

    /// How many threads the run had.
    pub fn count(&self) -> usize {
        self.created.len()
    }
}

/// Resolves events one at a time, remembering what it worked out per
/// site and per stack (a long run has millions of events but few distinct
/// sites and stacks).
pub(super) struct Resolver<'a> {
    r: &'a RunResult,
    sites: &'a SiteTable,
    all: bool,
    /// Per site id: its location is in a library file.
    site_lib: HashMap<u32, bool>,
    /// Per symbolized stack (by address): its innermost frame is in a
    /// library file, and its innermost user frame.
    stacks: HashMap<usize, (bool, Option<usize>)>,
}

/// No stack (events recorded without stacks).
const NO_STACK: &[Frame] = &[];

impl<'a> Resolver<'a> {
    /// A resolver for `r`'s events (`all`: library events keep their own
    /// location).
    pub fn new(r: &'a RunResult, sites: &'a SiteTable, all: bool) -> Resolver<'a> {
        Resolver {
            r,
            sites,
            all,
            site_lib: HashMap::new(),
            stacks: HashMap::new(),
        }
    }

    fn stack(&self, i: usize) -> &'a [Frame] {
        self.r.event_stacks.get(i).map_or(NO_STACK, |s| &s[..])
    }

    fn site(&self, i: usize) -> Option<&'a Site> {
        let e = &self.r.events[i];
        if e.site == NO_SITE {
            None
        } else {
            self.sites.site(e.site)
        }
    }

    fn site_lib_file(&mut self, i: usize) -> bool {
        let site = self.site(i);
        let id = self.r.events[i].site;
        *self.site_lib.entry(id).or_insert_with(|| {
            site.and_then(|s| s.loc.as_ref())
                .is_some_and(|l| is_library_file(&l.file))
        })
    }

    fn stack_info(&mut self, i: usize) -> (bool, Option<usize>) {
        let stack = self.stack(i);
        if stack.is_empty() {
            return (false, None);
        }
        *self
            .stacks
            .entry(stack.as_ptr() as usize)
            .or_insert_with(|| {
                let inner_lib = stack
                    .first()
                    .and_then(|f| f.loc.as_ref())
                    .is_some_and(|l| is_library_file(&l.file));
                (inner_lib, user_frame(stack))
            })
    }

    /// Whether event `i` executed in library code.
    pub fn lib(&mut self, i: usize) -> bool {
        let site_lib_file = self.site_lib_file(i);
        let (inner_lib, _) = self.stack_info(i);
        is_library_event(
            self.r.events[i].kind,
            self.site(i),
            site_lib_file,
            inner_lib,
        )
    }

    /// The user-code location of event `i`, its user function and, for a
    /// library event, the library function user code called there.
    pub fn locate(&mut self, i: usize) -> (Option<Loc>, Option<String>, Option<String>) {
        let site = self.site(i);
        let site_lib_file = self.site_lib_file(i);
        let (_, user) = self.stack_info(i);
        let (loc, function, callee) = locate(self.stack(i), user, site, site_lib_file);
        match site {
            Some(s) if self.all && self.lib(i) => {
                (s.loc.clone(), Some(s.func_name.clone()), callee)
            }
            _ => (loc, function, callee),
        }
    }

    /// Event `i` resolved (`spawned`: the number of spawns up to and
    /// including it; `lib` and `shared` as worked out for the whole run).
    pub fn event(&mut self, i: usize, spawned: Tid, lib: bool, shared: bool) -> Ev {
        let e = &self.r.events[i];
        let site = self.site(i);
        let (loc, function, callee) = self.locate(i);
        let var = var_of(e, self.sites);
        let text = event_text(self.r, e, site, var.as_deref().unwrap_or_default(), spawned);
        Ev {
            ev: *e,
            index: i,
            lib,
            loc,
            function,
            callee,
            var,
            shared,
            stack: self
                .r
                .event_stacks
                .get(i)
                .cloned()
                .unwrap_or_else(|| NO_STACK.into()),
            text,
        }
    }
}

/// Takes the run's events with their stacks and the site table; produces
/// whether each event executed in library code.
pub(super) fn library_flags(res: &mut Resolver) -> Vec<bool> {
    (0..res.r.events.len()).map(|i| res.lib(i)).collect()
}

/// Takes the run's events, the ranges of them to keep (in order, not
/// overlapping) and each event's library and shared flags; produces one
/// [`Ev`] per kept event with its location, function, callee, variable and
/// text. Joins say only `join` (see [`name_join_targets`]). With `all`,
/// library events keep their own location.
pub(super) fn resolve_events(
    res: &mut Resolver,
    keep: &[std::ops::Range<usize>],
    lib: &[bool],
    shared: &[bool],
) -> Vec<Ev> {
    let r = res.r;
    let mut events: Vec<Ev> = Vec::with_capacity(keep.iter().map(|k| k.len()).sum());
    let mut spawned: Tid = 0;
    let mut counted = 0;
    for k in keep {
        // Spawns number threads: count those before the range.
        spawned += r.events[counted..k.start]
            .iter()
            .filter(|e| e.kind == EventKind::Spawn)
            .count() as Tid;
        for i in k.clone() {
            if r.events[i].kind == EventKind::Spawn {
                spawned += 1;
            }
            events.push(res.event(i, spawned, lib[i], shared[i]));
        }
        counted = k.end;
    }
    events
}

/// Whether an event executed in library code (see the module documentation
/// of [`timeline`](super)): its site is not user code, is in a library
/// file, or its innermost frame is.
fn is_library_event(
    kind: EventKind,
    site: Option<&Site>,
    site_lib_file: bool,
    inner_lib_file: bool,
) -> bool {
    match kind {
        // Thread lifecycle, and lock calls (instrumented at their call
        // sites in user code).
        EventKind::Start
        | EventKind::Exit
        | EventKind::Spawn
        | EventKind::Lock
        | EventKind::Acquire
        | EventKind::Unlock
        | EventKind::CondWait
        | EventKind::Join => false,
        _ => site.is_none_or(|s| !s.user) || site_lib_file || inner_lib_file,
    }
}

/// The user-code location of an event, its user function and, for a
/// library event, the library function user code called there: from the
/// innermost user frame of its stack, else from its site.
fn locate(
    stack: &[Frame],
    user: Option<usize>,
    site: Option<&Site>,
    site_lib_file: bool,
) -> (Option<Loc>, Option<String>, Option<String>) {
    match user {
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
            Some(s) if s.user && !site_lib_file => (s.loc.clone(), Some(s.func_name.clone()), None),
            Some(s) => (None, None, Some(display_fn(&s.func_name))),
            None => (None, None, None),
        },
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

/// The variable an access or sync event touched.
pub(super) fn var_of(e: &Event, sites: &SiteTable) -> Option<String> {
    match e.kind {
        k if k.is_access() => Some(var_name(sites, e.addr)),
        EventKind::Lock
        | EventKind::Acquire
        | EventKind::Unlock
        | EventKind::CondWait
        | EventKind::Wait
        | EventKind::Notify => Some(var_name(sites, e.addr)),
        _ => None,
    }
}

fn var_name(sites: &SiteTable, addr: u32) -> String {
    match sites.symbol_at(addr) {
        Some(s) if s.addr == addr => s.name.clone(),
        Some(s) => format!("{}+{}", s.name, addr - s.addr),
        None => format!("[{addr:#x}]"),
    }
}

/// What an event shows (`R balance = 0`, `lock account_lock`, `spawn T1`):
/// `v` is its variable, `spawned` the number of spawns up to and including
/// it.
fn event_text(r: &RunResult, e: &Event, site: Option<&Site>, v: &str, spawned: Tid) -> String {
    let val = e
        .value
        .map(|x| format!(" = {}", format_value(x, e.len)))
        .unwrap_or_default();
    match e.kind {
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
        EventKind::Spawn => format!("spawn T{spawned}"),
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
        // Calls into the guest SDK say what they are; other host calls
        // (WASI, pthread internals) say nothing.
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
    }
}

/// Takes the run's `pthread_t` values of the threads it created
/// ([`RunResult::thread_handles`]) and the resolved events; makes each join
/// say the thread it waits for (`join T2`) and drop its variable. A join
/// of a handle the run did not create (made outside user code) says
/// `join`.
pub(super) fn name_join_targets(handles: &[(u32, Tid)], events: &mut [Ev]) {
    let handles: BTreeMap<u32, Tid> = handles.iter().copied().collect();
    for ev in events.iter_mut() {
        if ev.ev.kind == EventKind::Join {
            ev.text = match handles.get(&ev.ev.addr) {
                Some(t) => format!("join T{t}"),
                None => "join".into(),
            };
            ev.var = None;
        }
    }
}

/// Takes the run (its thread names, events and their stacks) and the
/// thread count; produces every thread with its name, the user function it
/// started in (the outermost user frame of its first event that has one)
/// and its label.
pub(super) fn threads(r: &RunResult, nthreads: usize) -> Vec<ThreadInfo> {
    let mut entry: Vec<Option<String>> = vec![None; nthreads];
    if let Some(e) = entry.first_mut() {
        *e = Some("main".to_string());
    }
    let mut missing = nthreads.saturating_sub(1);
    let mut looked: std::collections::HashSet<(usize, usize)> = Default::default();
    for (i, e) in r.events.iter().enumerate() {
        if missing == 0 {
            break;
        }
        let t = e.tid as usize;
        if t >= nthreads || entry[t].is_some() {
            continue;
        }
        let Some(stack) = r.event_stacks.get(i) else {
            continue;
        };
        // Each distinct stack is looked at once.
        if !looked.insert((stack.as_ptr() as usize, t)) {
            continue;
        }
        entry[t] = stack
            .iter()
            .rev()
            .find(|f| f.loc.as_ref().is_some_and(|l| !is_library_file(&l.file)))
            .and_then(|f| f.function.clone());
        if entry[t].is_some() {
            missing -= 1;
        }
    }
    entry
        .into_iter()
        .enumerate()
        .map(|(tid, entry)| {
            let tid = tid as Tid;
            let name = r.thread_names.get(tid as usize).cloned().flatten();
            let label = match (&name, &entry) {
                (Some(n), _) => format!("T{tid} {n}"),
                (None, Some(f)) => format!("T{tid} {f}"),
                (None, None) => format!("T{tid}"),
            };
            ThreadInfo {
                tid,
                name,
                entry,
                label,
            }
        })
        .collect()
}
