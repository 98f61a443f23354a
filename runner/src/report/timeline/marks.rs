//! Marks on single events: preemptions, the failing step, blocked threads,
//! the heap block of a memory error and the waits that blocked. The marks
//! that come from comparing accesses are in [`access`](super::access).

use super::resolve::{var_of, Resolver};
use super::{thread_label, Mark, ThreadInfo};
use crate::instrument::{SiteKind, SiteTable};
use crate::model::{EventKind, Tid};
use crate::runtime::RunResult;
use crate::verdict::Verdict;
use std::collections::{BTreeMap, BTreeSet};

/// What the marking steps read: the run, which of its events ran in
/// library code and which touch shared words, and its threads.
pub(super) struct Run<'a> {
    /// The run.
    pub r: &'a RunResult,
    /// The site table of its program.
    pub sites: &'a SiteTable,
    /// Per event of `r`: it executed in library code.
    pub lib: &'a [bool],
    /// Per event of `r`: it touches a shared word.
    pub shared: &'a [bool],
    /// Its threads.
    pub threads: &'a [ThreadInfo],
    /// Where events happened (asked only for the few events notes name).
    pub res: std::cell::RefCell<Resolver<'a>>,
}

impl Run<'_> {
    /// The label of thread `t` (`T1 depositor`).
    pub fn label(&self, t: Tid) -> String {
        thread_label(self.threads, t)
    }

    /// Where event `i` happened: `step 12 (race_bank.c:20)`.
    pub fn at(&self, i: usize) -> String {
        match &self.res.borrow_mut().locate(i).0 {
            Some(l) => format!("step {} ({})", self.r.events[i].step, l.display()),
            None => format!("step {}", self.r.events[i].step),
        }
    }

    /// The variable event `i` touched (empty when none).
    pub fn var(&self, i: usize) -> String {
        var_of(&self.r.events[i], self.sites).unwrap_or_default()
    }

    /// The last event of thread `tid`.
    pub fn last_of(&self, tid: Tid) -> Option<usize> {
        self.r.events.iter().rposition(|e| e.tid == tid)
    }
}

/// Marks on events (by index) and the notes that explain them.
#[derive(Debug, Default)]
pub(super) struct EventMarks {
    /// The marks of each marked event.
    pub marks: BTreeMap<usize, BTreeSet<Mark>>,
    /// For an event marked [`Mark::Preempt`]: the thread it preempted.
    pub preempted_from: BTreeMap<usize, Tid>,
    /// Explanations, each attached to an event, in the order they were
    /// found.
    pub notes: Vec<(Mark, usize, String)>,
}

impl EventMarks {
    /// Marks event `i` with `mark`.
    pub fn mark(&mut self, i: usize, mark: Mark) {
        self.marks.entry(i).or_default().insert(mark);
    }

    /// The marks and notes of the events `sparse` maps to an index (an
    /// event left out maps to none: its marks and notes are dropped).
    pub fn restricted(self, sparse: impl Fn(usize) -> Option<usize>) -> EventMarks {
        EventMarks {
            marks: self
                .marks
                .into_iter()
                .filter_map(|(i, m)| Some((sparse(i)?, m)))
                .collect(),
            preempted_from: self
                .preempted_from
                .into_iter()
                .filter_map(|(i, t)| Some((sparse(i)?, t)))
                .collect(),
            notes: self
                .notes
                .into_iter()
                .filter_map(|(m, i, t)| Some((m, sparse(i)?, t)))
                .collect(),
        }
    }

    /// Whether event `i` has `mark`.
    pub fn has(&self, i: usize, mark: Mark) -> bool {
        self.marks.get(&i).is_some_and(|m| m.contains(&mark))
    }
}

/// Where a failing run failed.
pub(super) struct Failure {
    /// The thread that failed (assertion, trap, memory error, or the second
    /// access of the race that is the verdict).
    pub tid: Option<Tid>,
    /// Its last event: the failing step.
    pub event: Option<usize>,
}

impl Failure {
    /// Takes the run's verdict and events; produces the failing thread and
    /// step, if the verdict has one.
    pub fn of(run: &Run) -> Failure {
        let tid = match &run.r.verdict {
            Verdict::Assertion { tid, .. }
            | Verdict::Trap { tid, .. }
            | Verdict::Panic { tid, .. } => Some(*tid),
            Verdict::Memory(m) => Some(m.tid),
            Verdict::Race(x) => Some(x.second.tid),
            _ => None,
        };
        Failure {
            tid,
            event: tid.and_then(|t| run.last_of(t)),
        }
    }
}

/// Takes the run's events; marks each event a preemption switched to (the
/// previous event is another thread's) with [`Mark::Preempt`] and records
/// the thread it preempted.
pub(super) fn mark_preemptions(r: &RunResult, marks: &mut EventMarks) {
    for i in 1..r.events.len() {
        if r.events[i].preempted && r.events[i - 1].tid != r.events[i].tid {
            marks.mark(i, Mark::Preempt);
            marks.preempted_from.insert(i, r.events[i - 1].tid);
        }
    }
}

/// Takes the failure and the verdict; marks the failing step with
/// [`Mark::Fail`] and, for a deadlock or a hang, the last step of each
/// stuck thread with [`Mark::Blocked`].
pub(super) fn mark_failure(run: &Run, failure: &Failure, marks: &mut EventMarks) {
    if let Some(f) = failure.event {
        marks.mark(f, Mark::Fail);
    }
    let stuck: Vec<Tid> = match &run.r.verdict {
        Verdict::Deadlock { threads } => threads.iter().map(|b| b.tid).collect(),
        Verdict::Hang { threads, .. } => threads.iter().map(|t| t.tid).collect(),
        _ => Vec::new(),
    };
    for tid in stuck {
        if let Some(i) = run.last_of(tid) {
            marks.mark(i, Mark::Blocked);
        }
    }
}

/// Takes a memory error's verdict and its failing step; marks where its
/// heap block was allocated and freed (the last allocator calls for the
/// block before the failing step) with [`Mark::Block`], each with a note.
pub(super) fn mark_heap_block(run: &Run, failure: &Failure, marks: &mut EventMarks) {
    let (Verdict::Memory(m), Some(f)) = (&run.r.verdict, failure.event) else {
        return;
    };
    let Some(b) = &m.block else {
        return;
    };
    let r = run.r;
    let heap = |kind: SiteKind| {
        (0..f).rev().find(|&i| {
            let e = &r.events[i];
            e.kind == EventKind::Call
                && e.addr == b.start
                && run.sites.site(e.site).is_some_and(|s| s.kind == kind)
        })
    };
    for (kind, what) in [(SiteKind::Alloc, "allocated"), (SiteKind::Free, "freed")] {
        if let Some(i) = heap(kind) {
            marks.mark(i, Mark::Block);
            marks.notes.push((
                Mark::Block,
                i,
                format!(
                    "{} {what} the block at {:#x} ({} bytes) at {}",
                    run.label(r.events[i].tid),
                    b.start,
                    b.size,
                    run.at(i)
                ),
            ));
        }
    }
}

/// Takes the run's events; produces the waits that blocked: those whose
/// thread's next event is a wake-up, and those that are their thread's
/// last event (blocked until the end).
pub(super) fn blocking_waits(r: &RunResult) -> BTreeSet<usize> {
    let mut blocking = BTreeSet::new();
    let mut pending_wait: BTreeMap<Tid, usize> = BTreeMap::new();
    for (i, e) in r.events.iter().enumerate() {
        if let Some(w) = pending_wait.remove(&e.tid) {
            if e.kind == EventKind::Wake {
                blocking.insert(w);
            }
        }
        if e.kind == EventKind::Wait {
            pending_wait.insert(e.tid, i);
        }
    }
    blocking.extend(pending_wait.values().copied());
    blocking
}
