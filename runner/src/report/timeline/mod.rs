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
//!
//! [`Timeline::build_in`] follows the data through these steps:
//! 1. when and by whom each thread was created, whether each event ran in
//!    library code, and each thread's name, entry function and label
//!    (`resolve`);
//! 2. the shared words, and which accesses touch them (`access`);
//! 3. the marks on events: preemptions, the failing step, blocked threads,
//!    a memory error's block (`marks`); the conflicting accesses that
//!    explain a failure: the writes the failing reads saw, lost updates,
//!    data races (`access`); the waits that blocked (`marks`);
//! 4. the events to keep: all of a short run; of a long one (see
//!    [`Scope`]), those around the marks that explain the verdict and the
//!    last ones, the rest left out as [`Gap`]s. Steps 1–3 look at every
//!    event but make no text; from here on only kept events count;
//! 5. each kept event resolved: user-code location and function,
//!    variable, text; joins named by the thread they wait for (`resolve`);
//! 6. the events grouped into rows, where each thread's user code starts
//!    and ends, and what each row says (`group`);
//! 7. the source line of each row (the one use of [`super::source`]);
//! 8. the notes, in row order (`group`).

mod access;
mod group;
mod marks;
mod resolve;

use super::source::SourceCache;
use crate::instrument::dwarf::is_library_unit;
use crate::instrument::{Frame, Loc};
use crate::model::Tid;
use crate::runtime::{Program, RunResult};
use crate::trace::Event;
use crate::verdict::Verdict;
use marks::{EventMarks, Failure, Run};
use std::collections::BTreeSet;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

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
    /// Its index among the run's events.
    pub index: usize,
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
    pub stack: Arc<[Frame]>,
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

    /// How much it explains the verdict (0 most): a long run keeps the
    /// events around the marks that explain most.
    pub fn rank(self) -> u8 {
        match self {
            Mark::Fail => 0,
            Mark::Blocked => 1,
            Mark::Seen | Mark::Saw => 2,
            Mark::Race | Mark::Block => 3,
            Mark::Overwrite | Mark::Stale => 4,
            Mark::Preempt => 5,
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
    /// The stretches of a long run left out (see [`Scope`]), in step order.
    pub gaps: Vec<Gap>,
}

/// How much of a run a timeline keeps. A long run keeps only the events
/// around the steps that explain its verdict (the failing step, the writes
/// it saw, lost updates, data races, blocked threads, a memory error's
/// block) and its last events; what lies between is a [`Gap`].
#[derive(Debug, Clone, Copy)]
pub struct Scope {
    /// Runs of at most this many events are kept whole.
    pub whole: usize,
    /// Events kept on each side of a step that explains the verdict.
    pub around: usize,
    /// Events kept at the end of the run.
    pub tail: usize,
    /// Most steps that explain the verdict to keep events around (the
    /// failing step and blocked threads first, then the latest).
    pub focus: usize,
}

impl Scope {
    /// Every event.
    pub const WHOLE: Scope = Scope {
        whole: usize::MAX,
        around: 0,
        tail: 0,
        focus: 0,
    };
}

impl Default for Scope {
    fn default() -> Self {
        Scope {
            whole: 20_000,
            around: 60,
            tail: 600,
            focus: 256,
        }
    }
}

/// A stretch of a long run's events that the timeline leaves out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    /// The first kept event after it (index into [`Timeline::events`];
    /// their number when the gap ends the run).
    pub before: usize,
    /// The step of its first event.
    pub first_step: u64,
    /// The step of its last event.
    pub last_step: u64,
    /// How many events it has.
    pub events: usize,
    /// The threads that ran in it, in tid order.
    pub threads: Vec<Tid>,
}

impl Gap {
    /// The steps it spans.
    pub fn steps(&self) -> u64 {
        self.last_step.saturating_sub(self.first_step) + 1
    }
}

/// The ranges of events to keep: every event of a short run (or with
/// `scope.whole` large enough); else the events around the focus events
/// (at most `scope.focus` of them, in order of importance, then the
/// latest) and the last ones. Sorted, not overlapping, not adjacent.
fn kept_ranges(n: usize, scope: &Scope, focus: &[(u8, usize)]) -> Vec<Range<usize>> {
    if n <= scope.whole {
        #[allow(clippy::single_range_in_vec_init)]
        return if n == 0 { Vec::new() } else { vec![0..n] };
    }
    let mut focus = focus.to_vec();
    // Most important first, then the latest.
    focus.sort_by_key(|&(rank, i)| (rank, std::cmp::Reverse(i)));
    focus.truncate(scope.focus);
    let mut wanted: Vec<Range<usize>> = focus
        .iter()
        .map(|&(_, i)| i.saturating_sub(scope.around)..(i + scope.around + 1).min(n))
        .collect();
    wanted.push(n.saturating_sub(scope.tail)..n);
    wanted.sort_by_key(|r| r.start);
    let mut out: Vec<Range<usize>> = Vec::new();
    for r in wanted {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// The gaps between `keep` (ranges of the run's `events`), each placed
/// before the kept event it precedes.
fn gaps_of(events: &[Event], keep: &[Range<usize>], nthreads: usize) -> Vec<Gap> {
    let mut out = Vec::new();
    let mut kept_before = 0;
    let mut from = 0;
    let mut seen = vec![false; nthreads];
    let mut gap = |a: usize, b: usize, before: usize, out: &mut Vec<Gap>| {
        if a >= b {
            return;
        }
        seen.iter_mut().for_each(|x| *x = false);
        for e in &events[a..b] {
            if let Some(s) = seen.get_mut(e.tid as usize) {
                *s = true;
            }
        }
        out.push(Gap {
            before,
            first_step: events[a].step,
            last_step: events[b - 1].step,
            events: b - a,
            threads: (0..nthreads as Tid).filter(|&t| seen[t as usize]).collect(),
        });
    };
    for k in keep {
        gap(from, k.start, kept_before, &mut out);
        kept_before += k.len();
        from = k.end;
    }
    gap(from, events.len(), kept_before, &mut out);
    out
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

/// The label of thread `tid` among `threads` (`T1 depositor`, or `T5` for a
/// thread not among them).
fn thread_label(threads: &[ThreadInfo], tid: Tid) -> String {
    threads
        .get(tid as usize)
        .map(|t| t.label.clone())
        .unwrap_or_else(|| format!("T{tid}"))
}

/// Takes the groups; sets the source line of each group with a location
/// (source files are looked up in `dirs` too).
fn read_sources(groups: &mut [Group], dirs: Vec<PathBuf>) {
    let mut src = SourceCache::new(dirs);
    for g in groups {
        g.source = g.loc.as_ref().and_then(|l| src.line(&l.file, l.line));
    }
}

impl Timeline {
    /// Builds the model of the events `scope` keeps (all of them with
    /// `all`, every event its own group and library events keeping their
    /// own location). Only kept events are described: the rest is looked
    /// at only for what explains the verdict, and left out as [`Gap`]s.
    pub fn build_in(input: &Input, all: bool, scope: &Scope) -> Timeline {
        let r = input.result;
        let sites = &input.program.sites;
        let n = r.events.len();

        // The threads; where each event ran and which accesses are shared.
        let origins = resolve::ThreadOrigins::of(r);
        let mut res = resolve::Resolver::new(r, sites, all);
        let lib = resolve::library_flags(&mut res);
        let words = access::Words::of(r, sites, &origins);
        let shared = words.shared_flags(r);
        let threads = resolve::threads(r, origins.count());

        let run = Run {
            r,
            sites,
            lib: &lib,
            shared: &shared,
            threads: &threads,
            res: std::cell::RefCell::new(resolve::Resolver::new(r, sites, all)),
        };
        // What explains the verdict, marked on events.
        let failure = Failure::of(&run);
        let mut marks = EventMarks::default();
        marks::mark_preemptions(r, &mut marks);
        marks::mark_failure(&run, &failure, &mut marks);
        marks::mark_heap_block(&run, &failure, &mut marks);
        access::mark_seen_writes(&run, &words, &failure, &mut marks);
        access::mark_lost_updates(&run, &words, &mut marks);
        access::mark_races(&run, &mut marks);
        let blocking = marks::blocking_waits(r);
        drop(run);

        // The events kept, resolved.
        let focus: Vec<(u8, usize)> = marks
            .marks
            .iter()
            .filter_map(|(&i, m)| {
                let rank = m.iter().map(|m| m.rank()).min()?;
                (rank < Mark::Preempt.rank()).then_some((rank, i))
            })
            .collect();
        let scope = if all { &Scope::WHOLE } else { scope };
        let keep = kept_ranges(n, scope, &focus);
        let mut events = resolve::resolve_events(&mut res, &keep, &lib, &shared);
        drop(lib);
        drop(shared);
        resolve::name_join_targets(&r.thread_handles, &mut events);
        let gaps = gaps_of(&r.events, &keep, origins.count());
        let (marks, blocking, failing_event) = if keep.len() == 1 && keep[0] == (0..n) {
            (marks, blocking, failure.event)
        } else {
            let sparse = |i: usize| events.binary_search_by_key(&i, |e| e.index).ok();
            (
                marks.restricted(sparse),
                blocking.iter().filter_map(|&i| sparse(i)).collect(),
                failure.event.and_then(sparse),
            )
        };

        // Rows, what they say, their source lines and notes.
        let mut groups = group::group_events(&events, &marks, all);
        let spans = group::ThreadSpans::of(&groups, &r.verdict, origins.count(), failure.tid);
        group::describe_groups(&mut groups, &events, sites, &marks, &blocking, &spans, all);
        read_sources(&mut groups, input.source_dirs.clone());

        let group_of = group::group_of_events(&groups, events.len());
        let notes = group::group_notes(marks.notes, &group_of, &groups, &threads);
        Timeline {
            races: races(r),
            threads,
            events,
            groups,
            notes,
            verdict: r.verdict.clone(),
            failing: failing_event.map(|f| group_of[f]),
            gaps,
        }
    }

    /// The label of thread `tid` (`T1 depositor`).
    pub fn label(&self, tid: Tid) -> String {
        thread_label(&self.threads, tid)
    }

    /// Steps left out in gaps.
    pub fn gap_steps(&self) -> u64 {
        self.gaps.iter().map(Gap::steps).sum()
    }
}

/// The data races of a run: those it reported and, when a race is its
/// verdict, that one (if not among them).
fn races(r: &RunResult) -> Vec<crate::verdict::RaceReport> {
    let mut races = r.races.clone();
    if let Verdict::Race(x) = &r.verdict {
        if !races.iter().any(|y| y.key() == x.key()) {
            races.push(x.clone());
        }
    }
    races
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
    fn a_long_run_keeps_the_steps_around_its_focus_and_its_end() {
        let scope = Scope {
            whole: 100,
            around: 5,
            tail: 10,
            focus: 2,
        };
        // Short: everything.
        assert_eq!(kept_ranges(100, &scope, &[(0, 50)]), vec![0..100]);
        // Long: around the two most important focus events, and the end.
        assert_eq!(
            kept_ranges(1000, &scope, &[(4, 100), (0, 500), (4, 990), (1, 200)]),
            vec![195..206, 495..506, 990..1000]
        );
        // Overlapping windows merge.
        assert_eq!(
            kept_ranges(1000, &scope, &[(0, 100), (0, 108)]),
            vec![95..114, 990..1000]
        );
        let ev = |step: u64, tid: Tid| Event {
            step,
            tid,
            site: 0,
            kind: crate::model::EventKind::Read,
            addr: 0,
            len: 4,
            value: None,
            preempted: false,
        };
        let events: Vec<Event> = (0..20).map(|i| ev(i + 1, (i % 3) as Tid)).collect();
        let gaps = gaps_of(&events, &[5..8, 10..20], 3);
        assert_eq!(gaps.len(), 2);
        assert_eq!(
            gaps[0],
            Gap {
                before: 0,
                first_step: 1,
                last_step: 5,
                events: 5,
                threads: vec![0, 1, 2]
            }
        );
        assert_eq!((gaps[1].before, gaps[1].events), (3, 2));
        assert_eq!(gaps[1].threads, vec![0, 2]);
    }

    #[test]
    fn values_read_like_integers() {
        assert_eq!(format_value(3, 4), "3");
        assert_eq!(format_value(0xffff_ffff, 4), "-1");
        assert_eq!(format_value(1, 1), "1");
        assert_eq!(format_value(0x21690, 4), "136848");
        assert_eq!(format_value(0x0123_4567, 4), "0x1234567");
    }
}
