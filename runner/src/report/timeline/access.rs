//! Conflicting accesses: which 4-byte words are shared (see the module
//! documentation of [`timeline`](super)), and the relations between
//! accesses that explain a failure — the writes the failing thread's reads
//! saw, lost updates, and the accesses of the reported data races.

use super::marks::{EventMarks, Failure, Run};
use super::resolve::ThreadOrigins;
use super::{format_value, Mark};
use crate::instrument::SiteTable;
use crate::model::{EventKind, Tid};
use crate::runtime::RunResult;
use std::collections::{BTreeMap, BTreeSet};

/// The words a run's accesses touched, and which of them are shared.
pub(super) struct Words {
    /// Per word (address / 4): the accesses to it, as event indices in step
    /// order.
    by_word: BTreeMap<u32, Vec<usize>>,
    /// The shared words.
    shared: BTreeSet<u32>,
    /// The shared words that are not part of a lock object (a lock's
    /// internals explain nothing).
    data: BTreeSet<u32>,
}

/// The 4-byte words `len` bytes at `addr` overlap (at most 64 bytes).
fn word_range(addr: u32, len: u32) -> std::ops::RangeInclusive<u32> {
    let len = len.clamp(1, 64);
    (addr >> 2)..=(addr.saturating_add(len - 1) >> 2)
}

fn is_read(k: EventKind) -> bool {
    matches!(
        k,
        EventKind::Read | EventKind::Rmw | EventKind::Cmpxchg | EventKind::Copy
    )
}

impl Words {
    /// Takes the run's events, its site table (for the size of lock
    /// objects) and when each thread was created; produces the accesses to
    /// each word and the shared and shared-data words.
    pub fn of(r: &RunResult, sites: &SiteTable, origins: &ThreadOrigins) -> Words {
        let mut by_word: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, e) in r.events.iter().enumerate() {
            if e.kind.is_access() && e.len > 0 {
                for w in word_range(e.addr, e.len) {
                    by_word.entry(w).or_default().push(i);
                }
            }
        }
        let shared: BTreeSet<u32> = by_word
            .iter()
            .filter(|(_, acc)| is_shared(r, acc, origins))
            .map(|(&w, _)| w)
            .collect();
        let data = shared.difference(&lock_words(r, sites)).copied().collect();
        Words {
            by_word,
            shared,
            data,
        }
    }

    /// Per event of `r`: it is an access that touches a shared word.
    pub fn shared_flags(&self, r: &RunResult) -> Vec<bool> {
        r.events
            .iter()
            .map(|e| {
                e.kind.is_access()
                    && e.len > 0
                    && word_range(e.addr, e.len).any(|w| self.shared.contains(&w))
            })
            .collect()
    }
}

/// Whether the accesses `acc` to one word make it shared: an access
/// conflicts with an earlier one by another thread made when the accessing
/// thread already existed. Accesses of the thread that created the
/// accessing one, made before it did, are initialisation; a third thread's
/// are not.
fn is_shared(r: &RunResult, acc: &[usize], origins: &ThreadOrigins) -> bool {
    let mut last_write: BTreeMap<Tid, u64> = BTreeMap::new();
    let mut last_access: BTreeMap<Tid, u64> = BTreeMap::new();
    for &i in acc {
        let e = &r.events[i];
        let earlier = if e.kind.writes() {
            &last_access
        } else {
            &last_write
        };
        let before_spawn = |t: Tid, s: u64| {
            s < origins.created[e.tid as usize]
                && origins.parent.get(e.tid as usize).copied().flatten() == Some(t)
        };
        if earlier
            .iter()
            .any(|(&t, &s)| t != e.tid && !before_spawn(t, s))
        {
            return true;
        }
        last_access.insert(e.tid, e.step);
        if e.kind.writes() {
            last_write.insert(e.tid, e.step);
        }
    }
    false
}

/// The words of the lock objects the run's lock operations name (the
/// object's symbol size, 24 bytes when unknown, at most 64).
fn lock_words(r: &RunResult, sites: &SiteTable) -> BTreeSet<u32> {
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
            lock_words.extend(word_range(e.addr, size.min(64)));
        }
    }
    lock_words
}

/// ` = 3` for an event with a value, empty otherwise.
fn value_of(r: &RunResult, i: usize) -> String {
    r.events[i]
        .value
        .map(|v| format!(" = {}", format_value(v, r.events[i].len)))
        .unwrap_or_default()
}

/// Takes the failing thread and step and the shared-data words; finds the
/// failing thread's last reads of shared data (newest first, one per set
/// of words, at most three) whose value another thread wrote, and marks
/// each such write [`Mark::Seen`] (with a note) and its read [`Mark::Saw`].
pub(super) fn mark_seen_writes(
    run: &Run,
    words: &Words,
    failure: &Failure,
    marks: &mut EventMarks,
) {
    let (Some(ft), Some(f)) = (failure.tid, failure.event) else {
        return;
    };
    let r = run.r;
    let mut seen_words = BTreeSet::new();
    let mut writers: Vec<(usize, usize)> = Vec::new();
    for i in (0..f).rev() {
        let e = &r.events[i];
        if e.tid != ft || !is_read(e.kind) || !run.shared[i] {
            continue;
        }
        let ws: Vec<u32> = word_range(e.addr, e.len)
            .filter(|w| words.data.contains(w))
            .collect();
        if ws.is_empty() || ws.iter().all(|w| seen_words.contains(w)) {
            continue;
        }
        seen_words.extend(ws.iter().copied());
        // The last write to an overlapping word before the read.
        let w = (0..i).rev().find(|&j| {
            let x = &r.events[j];
            x.kind.writes() && x.len > 0 && word_range(x.addr, x.len).any(|w| ws.contains(&w))
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
        marks.mark(w, Mark::Seen);
        marks.mark(rd, Mark::Saw);
        let what = run.var(rd);
        marks.notes.push((
            Mark::Seen,
            w,
            format!(
                "{} read {what}{} at {}: the value {} wrote at {}",
                run.label(ft),
                value_of(r, rd),
                run.at(rd),
                run.label(r.events[w].tid),
                run.at(w)
            ),
        ));
    }
}

/// Takes the accesses to each shared-data word; finds lost updates — a
/// thread's user-code write to a word it read before another thread's
/// write, without reading that write — and marks the write
/// [`Mark::Overwrite`] (with a note) and the read [`Mark::Stale`].
pub(super) fn mark_lost_updates(run: &Run, words: &Words, marks: &mut EventMarks) {
    let r = run.r;
    for acc in words.by_word.values() {
        let mut last: BTreeMap<Tid, (usize, bool)> = BTreeMap::new(); // (event, was a read)
        let mut last_write: Option<usize> = None;
        for &i in acc {
            let e = &r.events[i];
            if run.lib[i] || !words.data.contains(&(e.addr >> 2)) {
                continue;
            }
            if e.kind == EventKind::Write {
                if let (Some(&(rd, true)), Some(w)) = (last.get(&e.tid), last_write) {
                    let other = &r.events[w];
                    if other.tid != e.tid && w > rd && !marks.has(i, Mark::Overwrite) {
                        marks.mark(i, Mark::Overwrite);
                        marks.mark(rd, Mark::Stale);
                        let what = run.var(i);
                        marks.notes.push((
                            Mark::Overwrite,
                            i,
                            format!(
                                "lost update: {} writes {what}{} at {}, over the {what}{} {} wrote at {}; it had read {what}{} at {}, before that write",
                                run.label(e.tid),
                                value_of(r, i),
                                run.at(i),
                                value_of(r, w),
                                run.label(other.tid),
                                run.at(w),
                                value_of(r, rd),
                                run.at(rd)
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
}

/// Takes the data races the run reported; finds each race's two accesses
/// (the last matching access of the second thread, and the last matching
/// access of the first before it) and marks both [`Mark::Race`], with the
/// race's summary as a note on the second.
pub(super) fn mark_races(run: &Run, marks: &mut EventMarks) {
    let r = run.r;
    for race in &r.races {
        let find = |tid: Tid, site: &str, write: bool, before: usize| {
            (0..before).rev().find(|&i| {
                let e = &r.events[i];
                e.tid == tid
                    && e.kind.is_access()
                    && e.kind.writes() == write
                    && run.sites.site(e.site).is_some_and(|s| s.where_() == site)
            })
        };
        let second = find(
            race.second.tid,
            &race.second.site,
            race.second.write,
            r.events.len(),
        );
        let first =
            second.and_then(|s| find(race.first.tid, &race.first.site, race.first.write, s));
        if let (Some(a), Some(b)) = (first, second) {
            marks.mark(a, Mark::Race);
            marks.mark(b, Mark::Race);
            marks.notes.push((Mark::Race, b, race.summary()));
        }
    }
}
