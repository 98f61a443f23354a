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
//! [`Timeline::build`] follows the data through these steps:
//! 1. when and by whom each thread was created (`resolve`);
//! 2. each event resolved: library or user code, user-code location and
//!    function, variable, text (`resolve`);
//! 3. the shared words, and which accesses touch them (`access`); joins
//!    named by the thread they wait for, and each thread's name, entry
//!    function and label (`resolve`);
//! 4. the marks on events: preemptions, the failing step, blocked threads,
//!    a memory error's block (`marks`); the conflicting accesses that
//!    explain a failure: the writes the failing reads saw, lost updates,
//!    data races (`access`); the waits that blocked (`marks`);
//! 5. the events grouped into rows, where each thread's user code starts
//!    and ends, and what each row says (`group`);
//! 6. the source line of each row (the one use of [`super::source`]);
//! 7. the notes, in row order (`group`).

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
    /// Builds the model. With `all`, every event is its own group and
    /// library events keep their own location.
    pub fn build(input: &Input, all: bool) -> Timeline {
        let r = input.result;
        let sites = &input.program.sites;

        // The threads and the events, resolved; which accesses are shared.
        let origins = resolve::ThreadOrigins::of(r);
        let mut events = resolve::resolve_events(r, sites, all);
        let words = access::Words::of(r, sites, &origins);
        words.mark_shared(&mut events);
        resolve::name_join_targets(&r.thread_handles, &mut events);
        let threads = resolve::threads(r, origins.count(), &events);

        let run = Run {
            r,
            sites,
            events: &events,
            threads: &threads,
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
            failing: failure.event.map(|f| group_of[f]),
        }
    }

    /// The label of thread `tid` (`T1 depositor`).
    pub fn label(&self, tid: Tid) -> String {
        thread_label(&self.threads, tid)
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
    fn values_read_like_integers() {
        assert_eq!(format_value(3, 4), "3");
        assert_eq!(format_value(0xffff_ffff, 4), "-1");
        assert_eq!(format_value(1, 1), "1");
        assert_eq!(format_value(0x21690, 4), "136848");
        assert_eq!(format_value(0x0123_4567, 4), "0x1234567");
    }
}
