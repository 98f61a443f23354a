//! The last steps of building a [`Timeline`](super::Timeline): events
//! grouped into rows, what each row says and whether it is worth showing,
//! and the notes in row order.

use super::marks::EventMarks;
use super::{thread_label, Ev, Group, Mark, Note, ThreadInfo};
use crate::instrument::SiteTable;
use crate::model::{EventKind, Tid};
use crate::verdict::Verdict;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

/// Takes the resolved events and their marks; produces the groups: maximal
/// runs of consecutive events of one thread at one user-code line, a
/// preemption starting a new group (with `all`, one group per event). Each
/// group has its thread, events, steps, location, function and whether all
/// its events are library events; what it says is left to
/// [`describe_groups`].
pub(super) fn group_events(events: &[Ev], marks: &EventMarks, all: bool) -> Vec<Group> {
    let n = events.len();
    let line = |i: usize| events[i].loc.as_ref().map(|l| (l.file.as_str(), l.line));
    let mut groups: Vec<Group> = Vec::new();
    let mut i = 0;
    while i < n {
        let tid = events[i].ev.tid;
        let mut j = i + 1;
        if !all {
            while j < n
                && events[j].index == events[j - 1].index + 1
                && events[j].ev.tid == tid
                && line(j) == line(i)
                && !marks.has(j, Mark::Preempt)
            {
                j += 1;
            }
        }
        groups.push(Group {
            tid,
            events: i..j,
            first_step: events[i].ev.step,
            last_step: events[j - 1].ev.step,
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
    groups
}

/// Takes the groups and the number of events; produces the group of each
/// event.
pub(super) fn group_of_events(groups: &[Group], n: usize) -> Vec<usize> {
    let mut group_of = vec![0usize; n];
    for (gi, g) in groups.iter().enumerate() {
        for k in g.events.clone() {
            group_of[k] = gi;
        }
    }
    group_of
}

/// Where each thread's user code starts and ends among the groups, and
/// which threads finished.
pub(super) struct ThreadSpans {
    /// Per thread: its last group.
    last_group: BTreeMap<Tid, usize>,
    /// Per thread: its first and last group with user code.
    user: BTreeMap<Tid, (usize, usize)>,
    /// Per thread: the first group of its exit path (library code after
    /// its last user-code group).
    first_exit: BTreeMap<Tid, usize>,
    /// The spawned threads that ran to their end: all but the failing
    /// thread, or the deadlocked or hanging ones.
    finished: BTreeSet<Tid>,
}

impl ThreadSpans {
    /// Takes the groups (before [`describe_groups`]), the verdict, the
    /// number of threads and the failing thread; produces the spans.
    pub fn of(
        groups: &[Group],
        verdict: &Verdict,
        nthreads: usize,
        failing_tid: Option<Tid>,
    ) -> ThreadSpans {
        let last_group = groups
            .iter()
            .enumerate()
            .map(|(gi, g)| (g.tid, gi))
            .collect();
        let mut user: BTreeMap<Tid, (usize, usize)> = BTreeMap::new();
        for (gi, g) in groups.iter().enumerate() {
            if !g.lib && g.loc.is_some() {
                let e = user.entry(g.tid).or_insert((gi, gi));
                e.1 = gi;
            }
        }
        let mut first_exit: BTreeMap<Tid, usize> = BTreeMap::new();
        for (gi, g) in groups.iter().enumerate() {
            if let Some(&(_, last)) = user.get(&g.tid) {
                if gi > last && g.loc.is_none() {
                    first_exit.entry(g.tid).or_insert(gi);
                }
            }
        }
        let stuck: Option<BTreeSet<Tid>> = match verdict {
            Verdict::Deadlock { threads } => Some(threads.iter().map(|b| b.tid).collect()),
            Verdict::Hang { threads, .. } => Some(threads.iter().map(|b| b.tid).collect()),
            _ => None,
        };
        let finished = (1..nthreads as Tid)
            .filter(|t| match &stuck {
                Some(b) => !b.contains(t),
                None => Some(*t) != failing_tid,
            })
            .collect();
        ThreadSpans {
            last_group,
            user,
            first_exit,
            finished,
        }
    }
}

/// What a group says and how it says it.
#[derive(Default)]
struct Said {
    /// The parts of its text, in order.
    items: Vec<String>,
    /// Worth a row of its own.
    interesting: bool,
    /// One of its waits blocked.
    blocks: bool,
    /// One of its library events is a wake-up.
    woken: bool,
    /// One of its library events touches a shared word.
    lib_shared: bool,
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

/// Takes the events of one group, the site table (which accesses are
/// atomic) and the waits that blocked; produces what its events say:
/// the texts of its shared accesses, sync operations and SDK calls (a lock
/// with its acquire as one `lock X`, repeats counted as `R x = 1 ×3`), and
/// what its library events did (blocked, woke up, touched shared data).
/// With `all`, every event speaks for itself.
fn event_items(
    range: Range<usize>,
    events: &[Ev],
    sites: &SiteTable,
    blocking: &BTreeSet<usize>,
    all: bool,
) -> Said {
    let mut said = Said::default();
    let mut k = range.start;
    while k < range.end {
        let e = &events[k];
        let blocks = e.ev.kind == EventKind::Wait && blocking.contains(&k);
        if e.lib && !all {
            said.blocks |= blocks;
            said.woken |= e.ev.kind == EventKind::Wake;
            said.lib_shared |= e.shared;
            k += 1;
            continue;
        }
        let atomic = sites.site(e.ev.site).is_some_and(|s| s.atomic);
        let says = all
            || e.shared
            || is_sync(e.ev.kind, atomic)
            || (e.ev.kind == EventKind::Call && !e.text.is_empty());
        if !says {
            k += 1;
            continue;
        }
        said.interesting = true;
        said.blocks |= blocks;
        // lock + acquired at once: "lock X".
        if e.ev.kind == EventKind::Lock
            && (k + 1..range.end)
                .any(|x| events[x].ev.kind == EventKind::Acquire && events[x].ev.addr == e.ev.addr)
        {
            said.items.push(e.text.clone());
            k += 1;
            // Skip to the acquire (the library steps between are the lock's).
            while k < range.end && events[k].ev.kind != EventKind::Acquire {
                k += 1;
            }
            k += 1;
            continue;
        }
        if !e.text.is_empty() {
            match said.items.last_mut() {
                Some(last) if strip_count(last) == e.text => {
                    *last = format!("{} ×{}", e.text, count_of(last) + 1);
                }
                _ => said.items.push(e.text.clone()),
            }
        }
        k += 1;
    }
    said
}

/// Takes a group of only library events, its index, the first library
/// function user code called in it, what its events said, the thread spans
/// and whether it continues a call whose start is already shown; adds what
/// it says from where it is in its thread: nothing before the thread's
/// first user code, `exit` at the start of a finished thread's exit path,
/// else `in <callee>` (worth a row when it touched shared data and is not
/// such a continuation).
fn library_items(
    g: &Group,
    gi: usize,
    callee: Option<&str>,
    said: &mut Said,
    spans: &ThreadSpans,
    continues: bool,
) {
    let (first_user, last_user) = spans.user.get(&g.tid).copied().unwrap_or((usize::MAX, 0));
    if gi < first_user || first_user == usize::MAX {
        // Thread start-up code (before its first user-code step).
    } else if gi > last_user && g.loc.is_none() {
        if Some(&gi) == spans.first_exit.get(&g.tid) && spans.finished.contains(&g.tid) {
            said.items.push("exit".into());
            said.interesting = true;
        }
    } else {
        said.items.push(match callee {
            Some(c) => format!("in {c}"),
            None => "in library code".to_string(),
        });
        // The rest of a call whose start is already shown (the thread was
        // switched away inside it) says nothing new.
        if said.lib_shared && !continues {
            said.interesting = true;
        }
    }
}

/// Takes the groups, the resolved events, the site table, the event marks,
/// the waits that blocked and the thread spans; sets each group's text,
/// marks, preempted thread, whether it is interesting, and `lib` (only
/// library events, never with `all`).
pub(super) fn describe_groups(
    groups: &mut [Group],
    events: &[Ev],
    sites: &SiteTable,
    marks: &EventMarks,
    blocking: &BTreeSet<usize>,
    spans: &ThreadSpans,
    all: bool,
) {
    // The previous group of each thread.
    let mut prev_of_thread: BTreeMap<Tid, usize> = BTreeMap::new();
    for gi in 0..groups.len() {
        let mut said = event_items(groups[gi].events.clone(), events, sites, blocking, all);
        let continues = prev_of_thread
            .get(&groups[gi].tid)
            .is_some_and(|&p| p < gi && groups[p].loc == groups[gi].loc);
        let g = &mut groups[gi];
        let evs = &events[g.events.clone()];
        let lib_only = g.lib && !all;
        if lib_only {
            let callee = evs.iter().find_map(|e| e.callee.as_deref());
            library_items(g, gi, callee, &mut said, spans, continues);
        }
        let Said {
            mut items,
            mut interesting,
            blocks,
            woken,
            ..
        } = said;
        if woken {
            if lib_only {
                items.clear();
            }
            items.insert(0, "woken".into());
            interesting = true;
        }
        if blocks {
            match items.last_mut() {
                Some(l) if lib_only && l.starts_with("in ") => *l = format!("blocks {l}"),
                _ => items.push("blocks".into()),
            }
            interesting = true;
        }
        for x in g.events.clone() {
            if let Some(m) = marks.marks.get(&x) {
                g.marks.extend(m.iter().copied());
            }
            if let Some(&from) = marks.preempted_from.get(&x) {
                g.preempted = Some(from);
            }
        }
        // A preemption alone is worth a row only where it lands in user
        // code with something to say; elsewhere the thread's next row shows
        // that it ran.
        let only_preempt = g.marks.iter().all(|m| *m == Mark::Preempt);
        if !g.marks.is_empty() && (!only_preempt || (!lib_only && !items.is_empty())) {
            interesting = true;
        }
        if Some(gi) == spans.last_group.get(&g.tid).copied()
            && spans.finished.contains(&g.tid)
            && !spans.first_exit.contains_key(&g.tid)
            && !items.iter().any(|s| s == "exit")
        {
            items.push("exit".into());
            interesting = true;
        }
        g.text = items.join("; ");
        g.interesting = interesting;
        g.lib = lib_only;
        prev_of_thread.insert(g.tid, gi);
    }
}

/// Takes the notes found on events, the group of each event, the described
/// groups and the threads; produces the notes on groups: those, and a note
/// on each shown preemption when there are at most three, ordered by group
/// and then by mark (in the order found within each).
pub(super) fn group_notes(
    event_notes: Vec<(Mark, usize, String)>,
    group_of: &[usize],
    groups: &[Group],
    threads: &[ThreadInfo],
) -> Vec<Note> {
    let mut notes: Vec<Note> = event_notes
        .into_iter()
        .map(|(mark, i, text)| Note {
            mark,
            group: group_of[i],
            text,
        })
        .collect();
    let shown_preemption = |g: &Group| g.interesting && g.marks.contains(&Mark::Preempt);
    if groups.iter().filter(|g| shown_preemption(g)).count() <= 3 {
        for (gi, g) in groups.iter().enumerate() {
            if let (Some(from), true) = (g.preempted, shown_preemption(g)) {
                notes.push(Note {
                    mark: Mark::Preempt,
                    group: gi,
                    text: format!(
                        "step {}: {} preempts {}, which could have gone on",
                        g.first_step,
                        thread_label(threads, g.tid),
                        thread_label(threads, from)
                    ),
                });
            }
        }
    }
    notes.sort_by_key(|x| (x.group, x.mark));
    notes
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
    fn repeated_texts_count() {
        assert_eq!(count_of("R x = 1 ×3"), 3);
        assert_eq!(strip_count("R x = 1 ×3"), "R x = 1");
        assert_eq!(strip_count("R x = 1"), "R x = 1");
    }
}
