//! The state of one run, shared by all of its guest threads' stores, and the
//! scheduling core that updates it at every yield point.
//!
//! [`RunState`] is the scheduler's view of the run (threads, ready set,
//! timers, futex queues, decisions, spin hints, the fast path's skips) and
//! the run's bookkeeping (steps, virtual time, the trace, coverage, the
//! outcome). The two checkers keep their own state in their own modules and
//! are fields of it, present only when they are on: the memory checker
//! ([`MemCheck`], `memcheck.rs`) and the race detector ([`Races`],
//! `races.rs`). The scheduler tells them what it executes; they never
//! schedule, and they end the run only through what they return.
//!
//! All guest threads of a run execute on one OS thread, one at a time, so
//! this state is only ever touched by the thread that is running: the cell
//! that holds it ([`RunCell`]) is a `RefCell`, not a lock.

use super::memcheck::{InvalidFree, MemCheck, MemoryError};
use super::memory::{GuestMemory, MemorySpan, RunMemory};
use super::progress::{Liveness, Progress};
use super::races::Races;
use super::ready::ReadySets;
use crate::instrument::sites::{inline_mutex_applies, MUTEX_LOCK_WORD};
use crate::instrument::{SiteId, SiteInfo, SiteKind, SiteTable};
use crate::model::hb::Race;
use crate::model::heap::{Block as HeapBlock, Origin};
use crate::model::signals;
use crate::model::wordlock::WordLocks;
use crate::model::{
    AddrMap, Block, Clock, EventKind, FutexTable, Pending, RawFrame, Status, Tid, NO_SITE,
};
use crate::sched::{rng::STREAM_BUDGET, Candidate, Choice, Rng, Strategy};
use crate::trace::{Decision, Event};
use std::cell::{RefCell, RefMut};
use std::collections::BTreeSet;
use std::sync::Arc;
use wasmtime::SharedMemory;

/// An executed access to tracked futex words, not yet accounted for.
#[derive(Debug, Clone)]
struct WordOp {
    site: SiteId,
    /// A read-modify-write (else a store, copy or fill).
    rmw: bool,
    /// Each word's address and value before the access.
    before: Vec<(u32, u32)>,
    /// The thread's stack at the access (read-modify-writes, when captured).
    stack: Vec<RawFrame>,
}

/// Why a replay stopped following its recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// Index of the decision that differed.
    pub index: usize,
    pub expected: Decision,
    /// What the run offered instead.
    pub actual: String,
}

/// How the run is ending (set once; the first reason wins).
#[derive(Debug, Clone)]
pub enum Outcome {
    /// `proc_exit(code)`, or `_start` returned (code 0).
    Exit(i32),
    /// The memory checker found an invalid access or free.
    Memory(MemoryError),
    /// With races = fail: a data race.
    Race(Race),
    Assertion {
        message: String,
        tid: Tid,
        stack: Vec<RawFrame>,
    },
    Deadlock,
    /// The step budget ran out while threads still made progress.
    TooLong {
        steps: u64,
    },
    /// Given up: the deadline passed or a stop signal came.
    Cancelled,
    Hang {
        reason: String,
    },
    Diverged(Divergence),
}

/// Per-thread bookkeeping. What every decision reads of each ready thread
/// (its pending event and spinning hint) is kept apart, dense by tid, in
/// [`Runnable::slots`].
#[derive(Debug, Clone)]
pub struct ThreadRec {
    /// The thread that created it (0 for main itself).
    pub parent: Tid,
    pub status: Status,
    pub start_arg: u32,
    pub name: Option<String>,
    /// Its last read: (address, site, step).
    last_read: (u32, SiteId, u64),
    /// Its last few reads (address, site, step), most recent first, and how
    /// many reads in a row re-read one of them, at the same site, that
    /// nobody wrote since: a loop that polls several words (Rust's `mpsc`
    /// channels) spins without re-reading the one it read last. Only the
    /// same instruction counts: code that loads a variable at each use (at
    /// `-O0`, `t[n - 1]` after `i < n - 1`) reads it again at another
    /// site without waiting for anything.
    recent_reads: [(u32, SiteId, u64); RECENT_READS],
    reread_streak: u32,
    /// (address, value there) at this thread's last read-modify-write or
    /// compare-exchange, until it stores to that address another way.
    last_rmw: Option<(u32, u64)>,
    /// The step of its last plain store or thread creation: a re-read
    /// after one is not a poll. A loop that stores (its counter, at `-O0`)
    /// or creates a thread each time round re-reads its bound, which
    /// nobody writes, and yet it works rather than waits.
    worked_at: u64,
    /// Whether its pending event was seen to spin (unlike `spinning`, not
    /// cleared once reported).
    spins: bool,
    /// Result of the wait that blocked this thread: 0 woken, 2 timed out.
    pub wake_result: i32,
    /// Its pending signals (bit `sig - 1`) and its signal mask.
    pub sig_pending: u64,
    pub sig_mask: u64,
    /// A signal delivery was decided at a sync hook, before the yield point
    /// of this event: the `switch` the guest calls next delivers, then
    /// makes the yield point.
    pub sig_resume: Option<Pending>,
    /// Its wait or sleep ended early for a signal.
    pub interrupted: bool,
    /// A signal handler ran during one of its futex waits since the guest
    /// last asked (`sig_interrupted`: a `sem_wait` then fails with EINTR).
    pub wait_cut: bool,
    /// Site of the wait/sleep it blocked at.
    pub block_site: SiteId,
    /// Its stack when it blocked (only captured with diagnostics).
    pub block_stack: Vec<RawFrame>,
    /// Index of its last recorded event (for filling in the value).
    last_event: Option<usize>,
    /// Its stack at its pending event (only with `event_stacks`).
    pub pending_stack: Vec<RawFrame>,
    /// The lock it asked for and has not got yet (address, site of the call).
    pub wants: Option<(u32, SiteId)>,
    /// The last thread it created.
    pub last_child: Option<Tid>,
    /// Locks it holds: address and the site where it took each.
    pub holds: Vec<(u32, SiteId)>,
    /// Its executed access to tracked futex words whose effect is not yet
    /// accounted for ([`RunState::words`]): the site, whether it is a
    /// read-modify-write, and each word's address and value before it.
    word_op: Option<WordOp>,
    /// Its stack at its pending read-modify-write (with word tracking).
    pub word_stack: Vec<RawFrame>,
    /// The last event it executed was an announcement (see
    /// [`RunState::announces`]): its next yield point runs without a
    /// decision of its own.
    announced: bool,
    /// Private yield points it passed in a row without a decision
    /// ([`MAX_PRIVATE_RUN`]).
    private_run: u32,
}

/// What a decision reads of one thread, in [`Runnable::slots`]: the
/// thread as a candidate (its pending event and its spinning hint) and
/// whether that event may wait for a held lock ([`may_take_lock`], worked
/// out when the event is noted rather than at every decision).
#[derive(Debug, Clone, Copy)]
struct Slot {
    cand: Candidate,
    takes_lock: bool,
    /// The thread is in [`Runnable::ready`] (and filed in
    /// [`Runnable::filed`]).
    ready: bool,
    /// The step since which it has been ready without running.
    since: u64,
}

impl Slot {
    fn new(tid: Tid) -> Slot {
        Slot {
            cand: Candidate {
                tid,
                pending: Pending::START,
                spinning: false,
            },
            takes_lock: false,
            ready: false,
            since: 0,
        }
    }

    /// The lock its pending event may wait for, as [`ReadySets`] files it.
    fn lock(&self) -> Option<(u32, bool)> {
        let p = &self.cand.pending;
        self.takes_lock
            .then_some((p.addr, p.kind == EventKind::Lock))
    }

    /// This ready thread as a candidate; its spinning hint is reported now.
    #[inline]
    fn candidate(&mut self) -> Candidate {
        let c = self.cand;
        self.cand.spinning = false;
        c
    }
}

impl ThreadRec {
    /// Ran alone up to `step`: nothing seen so far tells of a spin (its
    /// slot's spinning hint is cleared by the caller).
    fn forget_spin(&mut self, step: u64) {
        self.spins = false;
        self.last_read = (u32::MAX, NO_SITE, step);
        self.last_rmw = None;
        self.recent_reads = [(u32::MAX, NO_SITE, step); RECENT_READS];
        self.reread_streak = 0;
    }

    fn new(start_arg: u32) -> ThreadRec {
        ThreadRec {
            status: Status::Ready,
            start_arg,
            name: None,
            last_read: (u32::MAX, NO_SITE, 0),
            recent_reads: [(u32::MAX, NO_SITE, 0); RECENT_READS],
            reread_streak: 0,
            last_rmw: None,
            worked_at: 0,
            spins: false,
            wake_result: 0,
            sig_pending: 0,
            sig_mask: 0,
            sig_resume: None,
            interrupted: false,
            wait_cut: false,
            block_site: NO_SITE,
            block_stack: Vec::new(),
            last_event: None,
            pending_stack: Vec::new(),
            wants: None,
            last_child: None,
            parent: 0,
            holds: Vec::new(),
            word_op: None,
            word_stack: Vec::new(),
            announced: false,
            private_run: 0,
        }
    }
}

/// Applies recorded decisions before handing over to the strategy.
pub struct Scheduler {
    pub strategy: Box<dyn Strategy>,
    forced: Vec<Decision>,
    pos: usize,
    /// A decision beyond the recording is a divergence (replay), rather than
    /// the strategy's business (exploration of a prefix).
    strict: bool,
    /// The decisions made, while there are at most `keep` of them (then
    /// none: [`crate::runtime::RunResult::decisions_complete`]).
    pub decisions: Vec<Decision>,
    /// How many decisions the run made.
    pub decision_count: u64,
    /// The hash of all of them ([`crate::trace::schedule_hash`]).
    pub schedule: crate::trace::ScheduleHash,
    /// Decisions kept at most ([`crate::runtime::RunConfig::keep_decisions`]).
    pub keep: u64,
    thread_decisions: u64,
    /// When recording: what each decision chose from (explorers need the
    /// alternatives, not just the choice).
    pub choice_points: Option<Vec<ChoicePoint>>,
    /// With `choice_points`: the threads the next thread decision leaves
    /// out because they wait for a held lock, with its lock word.
    waiting: Vec<(Tid, u32)>,
    /// The strategy decides on the run's state ([`Strategy::observes_run`]).
    pub observes: bool,
    /// The longest wait the strategy may let pass ([`Strategy::max_stall_ns`]).
    pub max_stall_ns: u64,
    /// Events recorded so far in the run (kept by [`RunState`] for
    /// [`ChoicePoint::event`]).
    pub events_recorded: usize,
}

/// The read-only view of a run given to strategies that observe it.
struct View<'a> {
    memory: GuestMemory<'a>,
    threads: &'a [ThreadRec],
    labels: &'a [(u64, Tid, String)],
}

impl crate::sched::RunView for View<'_> {
    fn read(&self, addr: u32, len: u32) -> Option<u64> {
        self.memory.read_le(addr, len)
    }
    fn thread_name(&self, tid: Tid) -> Option<&str> {
        self.threads.get(tid as usize)?.name.as_deref()
    }
    fn last_label(&self, tid: Tid) -> Option<&str> {
        self.labels
            .iter()
            .rev()
            .find(|(_, t, _)| *t == tid)
            .map(|(_, _, l)| l.as_str())
    }
}

/// The host's view of a run's memory.
#[inline]
fn guest(span: &MemorySpan) -> GuestMemory<'_> {
    // SAFETY: the run holds the memory the span was taken of (its `memory`)
    // and refreshes the span when it grows it. Guest threads of a run
    // execute one at a time on the run's OS thread, and none is running
    // while the host runs (the scheduler's invariant), so the host's
    // accesses never overlap a guest's.
    unsafe { span.serialized() }
}

/// The lock word `p` is about to take, if another thread holds it: a
/// `pthread_mutex_lock` call on a default (normal, non-robust) mutex,
/// or a library compare-exchange that takes a lock word and, when it
/// fails, only waits for the word to be released (`SiteInfo::takes_lock`:
/// the mutex fast path and wasi-libc's thread-list lock). wasi-libc's
/// mutex: the type in its first word, the lock word (0 when free) in its
/// second.
#[inline]
fn waits_for_lock(info: &[SiteInfo], mem: GuestMemory<'_>, p: &Pending) -> Option<u32> {
    if !may_take_lock(info, p) {
        return None;
    }
    held_lock_word(mem, p.addr, p.kind == EventKind::Lock)
}

/// Whether `p` is a lock's fast path or the thread-list lock's
/// compare-exchange, which [`waits_for_lock`] looks into.
#[inline]
fn may_take_lock(info: &[SiteInfo], p: &Pending) -> bool {
    matches!(p.kind, EventKind::Lock | EventKind::Cmpxchg)
        && info.get(p.site as usize).is_some_and(|s| s.takes_lock)
}

/// [`waits_for_lock`] for an event that [`may_take_lock`], at `addr`: a
/// mutex's fast path (`mutex`) or a compare-exchange of the word itself.
#[inline]
fn held_lock_word(mem: GuestMemory<'_>, addr: u32, mutex: bool) -> Option<u32> {
    let word = if mutex {
        let normal = mem.read_le(addr, 4).is_some_and(|ty| ty & 15 == 0);
        normal.then(|| addr.wrapping_add(4))?
    } else {
        addr
    };
    mem.read_le(word, 4).is_some_and(|w| w != 0).then_some(word)
}

/// A candidate that has not run yet, which runs first without a
/// decision: what a thread does before its first yield point that decides
/// is the library's start-up (and the decision at its first operation
/// still orders that operation against the others'). The lowest tid when
/// several are new.
#[inline]
fn fresh_thread(cands: &[Candidate]) -> Option<Tid> {
    cands
        .iter()
        .filter(|c| c.pending.kind == EventKind::Start)
        .map(|c| c.tid)
        .min()
}

/// What a decision chose from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChoicePoint {
    /// The thread that reached the yield point, if it could go on (a thread
    /// decision that picks another thread is then a preemption).
    pub current: Option<Tid>,
    /// The enabled threads of a thread decision (empty for a value decision).
    pub candidates: Vec<Candidate>,
    /// Ready threads left out because they wait for a held lock
    /// ([`RunState::waits_for_lock`]), with the lock word.
    pub waiting: Vec<(Tid, u32)>,
    /// Events recorded before this decision: with `record_events`, the event
    /// a thread decision chose is `RunResult::events[event]` (explorers map
    /// decisions to the events they ordered).
    pub event: usize,
}

impl Scheduler {
    pub fn new(strategy: Box<dyn Strategy>, forced: Vec<Decision>, strict: bool) -> Scheduler {
        let observes = strategy.observes_run();
        let max_stall_ns = strategy.max_stall_ns();
        Scheduler {
            observes,
            max_stall_ns,
            strategy,
            forced,
            pos: 0,
            strict,
            decisions: Vec::new(),
            decision_count: 0,
            schedule: Default::default(),
            keep: u64::MAX,
            thread_decisions: 0,
            choice_points: None,
            waiting: Vec::new(),
            events_recorded: 0,
        }
    }

    /// Counts and hashes `d`, and keeps it while no more than `keep` are
    /// made: a long run past that keeps none, so that its memory does not
    /// grow with its length (its replay file comes from the rerun with
    /// diagnostics, which keeps them all).
    fn made(&mut self, d: Decision) {
        self.decision_count += 1;
        self.schedule.add(&d);
        if self.decision_count <= self.keep {
            self.decisions.push(d);
        } else if !self.decisions.is_empty() {
            self.decisions = Vec::new();
        }
    }

    fn next_forced(&mut self) -> Option<Decision> {
        let d = self.forced.get(self.pos).copied();
        if d.is_some() {
            self.pos += 1;
        }
        d
    }

    fn pick_thread(
        &mut self,
        current: Option<Tid>,
        cands: &[Candidate],
        view: &dyn crate::sched::RunView,
    ) -> Result<usize, Divergence> {
        let index = self.decision_count as usize;
        let options = cands.len() as u32;
        let pick = match self.next_forced() {
            Some(
                d @ Decision::Thread {
                    tid,
                    site,
                    options: n,
                },
            ) => match cands.iter().position(|c| c.tid == tid) {
                Some(i) if cands[i].pending.site == site && n == options => i,
                _ => {
                    return Err(Divergence {
                        index,
                        expected: d,
                        actual: describe(cands),
                    });
                }
            },
            Some(d) => {
                return Err(Divergence {
                    index,
                    expected: d,
                    actual: describe(cands),
                })
            }
            None if self.strict && !self.forced.is_empty() => {
                return Err(Divergence {
                    index,
                    expected: *self.forced.last().expect("forced"),
                    actual: format!(
                        "the run continued past the end of the recording: {}",
                        describe(cands)
                    ),
                });
            }
            None => {
                let choice = Choice {
                    current,
                    candidates: cands,
                    decision: self.thread_decisions,
                };
                let i = if self.observes {
                    self.strategy.pick_thread_in(&choice, view)
                } else {
                    self.strategy.pick_thread(&choice)
                };
                i.min(cands.len() - 1)
            }
        };
        self.thread_decisions += 1;
        if let Some(cp) = &mut self.choice_points {
            cp.push(ChoicePoint {
                current: current.filter(|t| cands.iter().any(|c| c.tid == *t)),
                candidates: cands.to_vec(),
                waiting: std::mem::take(&mut self.waiting),
                event: self.events_recorded,
            });
        }
        let c = cands[pick];
        self.made(Decision::Thread {
            tid: c.tid,
            site: c.pending.site,
            options,
        });
        Ok(pick)
    }

    fn pick_value(&mut self, tid: Tid, site: SiteId, options: u32) -> Result<u32, Divergence> {
        self.decide_value(tid, site, options, |s| s.pick_value(tid, options))
    }

    /// A time choice ([`Strategy::pick_stall`]): a value decision among two
    /// (1 = let `wait_ns` pass now).
    fn pick_stall(&mut self, tid: Tid, site: SiteId, wait_ns: u64) -> Result<bool, Divergence> {
        self.decide_value(tid, site, 2, |s| s.pick_stall(tid, wait_ns) as u32)
            .map(|v| v == 1)
    }

    fn decide_value(
        &mut self,
        tid: Tid,
        site: SiteId,
        options: u32,
        ask: impl FnOnce(&mut dyn Strategy) -> u32,
    ) -> Result<u32, Divergence> {
        let index = self.decision_count as usize;
        let value = match self.next_forced() {
            Some(Decision::Value {
                tid: t,
                site: s,
                value,
                options: n,
            }) if t == tid && s == site && n == options => value,
            Some(d) => {
                return Err(Divergence {
                    index,
                    expected: d,
                    actual: format!("thread {tid} choosing among {options} at site {site}"),
                })
            }
            None if self.strict && !self.forced.is_empty() => {
                return Err(Divergence {
                    index,
                    expected: *self.forced.last().expect("forced"),
                    actual: "the run continued past the end of the recording".into(),
                });
            }
            None => ask(self.strategy.as_mut()).min(options - 1),
        };
        if let Some(cp) = &mut self.choice_points {
            cp.push(ChoicePoint {
                current: Some(tid),
                candidates: Vec::new(),
                waiting: Vec::new(),
                event: self.events_recorded,
            });
        }
        self.made(Decision::Value {
            tid,
            site,
            value,
            options,
        });
        Ok(value)
    }
}

fn describe(cands: &[Candidate]) -> String {
    let parts: Vec<String> = cands
        .iter()
        .map(|c| {
            if c.pending.site == NO_SITE {
                format!("thread {} ({})", c.tid, c.pending.kind.label())
            } else {
                format!("thread {} at site {}", c.tid, c.pending.site)
            }
        })
        .collect();
    format!("enabled: {}", parts.join(", "))
}

/// Marker error: the run is over; see [`RunState::outcome`].
#[derive(Debug)]
pub struct RunEnd;

impl std::fmt::Display for RunEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("run ended")
    }
}
impl std::error::Error for RunEnd {}

/// Limits and switches of a run that the state needs.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_steps: u64,
    /// Steps without progress that make a hang ([`super::progress`]).
    pub hang_steps: u64,
    /// Steps a ready thread may wait while others run before it is run
    /// (0: never forced).
    pub fair_steps: u64,
    /// When to give the run up (a campaign's time budget); looked at every
    /// [`CANCEL_CHECK`] steps. A run given up has no result, so the time
    /// it reads cannot show in one.
    pub deadline: Option<std::time::Instant>,
    pub max_time_ns: u64,
    /// Preemption budget per slice is drawn uniformly from this range.
    pub budget: (u32, u32),
    pub record_events: bool,
    pub diagnostics: bool,
    /// Capture the stack of every recorded event (expensive; for reports).
    pub event_stacks: bool,
    /// Happens-before race detection.
    pub races: RaceMode,
}

pub use crate::model::RaceMode;

const STAMP_SLOTS: usize = 4096;

/// How often (in steps) the run looks for a thread kept waiting too long.
const FAIR_CHECK: u64 = 4096;

/// How often (in steps) the run looks at its deadline and for a stop
/// signal.
const CANCEL_CHECK: u64 = 1 << 16;

/// Steps a thread kept waiting too long is run for before the strategy
/// decides again (fewer when it spins, blocks or ends).
const FAIR_BURST: u32 = 256;

/// Most private yield points (`SiteInfo::private`) a thread passes in a row
/// before one is a decision all the same: a library spinning through its
/// own atomics (a contended lock's path before it waits, a crate's spin
/// loop) cannot keep the other threads from running.
const MAX_PRIVATE_RUN: u32 = 256;

/// What a run leaves to the next run on the same memory: buffers whose
/// capacity, never their contents, carries over (a run's allocations are a
/// measurable share of a short run). Nothing in it can change what a run
/// does: see [`RunState::new`] and [`RunState::recycle`].
#[derive(Default)]
pub struct Scratch {
    /// `Liveness::write_stamp`, with every entry below `stamp_base`.
    write_stamp: Vec<u64>,
    /// `Liveness::progress`.
    progress: Progress,
    stamp_base: u64,
    races: Option<Box<Races>>,
    cands: Vec<Candidate>,
    /// `RunState::threads` and `Runnable`'s `slots`, `filed` and `held`,
    /// emptied: a run of a hundred threads would otherwise grow its records
    /// from one entry, copying each at every doubling.
    threads: Vec<ThreadRec>,
    slots: Vec<Slot>,
    filed: ReadySets,
    held: Vec<Option<u32>>,
    /// The ready list, `futex`, the lock owners, `handles` and the memory
    /// checker, emptied: kept for their capacity, so that a run's locks,
    /// waits and allocations do not allocate once an earlier run had as
    /// many.
    ready: Vec<Tid>,
    futex: FutexTable,
    lock_owner: AddrMap<Tid>,
    handles: AddrMap<Tid>,
    mem: Option<Box<MemCheck>>,
}

/// Reads a thread remembers for spin detection.
const RECENT_READS: usize = 8;

/// The state of one run.
pub struct RunState {
    /// The thread a new thread's start-up interrupted (`fresh_thread`),
    /// until the new thread's first decision.
    fresh_parent: Option<Tid>,
    pub threads: Vec<ThreadRec>,
    /// The threads that can run, as decisions read them.
    runnable: Runnable,
    pub current: Tid,
    pub steps: u64,
    pub clock: Clock,
    pub futex: FutexTable,
    timers: BTreeSet<(u64, Tid)>,
    pub sched: Scheduler,
    pub outcome: Option<Outcome>,
    /// The run is over and its suspended threads are being unwound
    /// (`Executor::close`): their pending host calls fail.
    pub closed: bool,
    /// The guest memory and its sizes.
    pub memory: RunMemory,
    pub sites: Arc<SiteTable>,
    /// `sites` packed for the hot path.
    pub info: Arc<[SiteInfo]>,
    pub limits: Limits,
    budget_rng: Rng,
    /// Spin hints and progress: whether the threads spin or hang.
    live: Liveness,
    /// A thread that waited [`Limits::fair_steps`] while others ran, and
    /// how many more steps it is run for before the strategy decides again.
    force: Option<(Tid, u32)>,
    /// The fast path is allowed in this run: nothing per access is needed
    /// (no memory checker, race detector, event recording, stacks, or
    /// observing strategy).
    fast: bool,
    /// Skips granted to the current thread and not yet reconciled.
    pub granted: u32,
    /// Skipped yield points accounted for so far.
    pub skipped: u64,
    /// What the run records for its result.
    pub record: Recording,
    /// Context switches, and those that were preemptions.
    pub switches: u64,
    pub preemptions: u64,
    /// Who holds which lock.
    pub locks: LockOwners,
    /// The memory checker and the race detector.
    pub checkers: Checkers,
    /// `pthread_t` values of threads created in user code.
    pub handles: AddrMap<Tid>,
    /// Signal dispositions (`runtime::signals`).
    pub signals: Signals,
    /// The guest's `random_get` stream.
    random: GuestRandom,
    /// Pipes and socket pairs (`model::channels`).
    pub io: crate::model::channels::Io,
}

/// The timers' entry of the process's `alarm` (no thread has this id).
pub const ALARM: Tid = Tid::MAX;

/// `SIGALRM`.
const SIGALRM: u32 = 14;

/// The process's signal dispositions (bit `sig - 1` of each set); a
/// thread's mask and pending signals are in its [`ThreadRec`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Signals {
    /// Signals with a handler.
    pub handled: u64,
    /// Signals set to be ignored.
    pub ignored: u64,
    /// The guest's delivery function (a table index), once a handler is set.
    pub deliver: Option<u32>,
    /// Some signal was ever sent in this run (the hooks' cheap test).
    pub sent: bool,
    /// Signals sent to the process that every thread blocked: the first
    /// thread to unblock or wait for one takes it.
    pub process: u64,
    /// When `alarm` sends `SIGALRM` (virtual time; in the timers under
    /// [`ALARM`]).
    pub alarm: Option<u64>,
    /// The alarm's period (`setitimer`'s `it_interval`; 0: it fires once).
    pub alarm_interval: u64,
}

/// The threads that can run, as a decision reads them.
struct Runnable {
    /// Per tid, what a decision reads of the thread: a walk over the ready
    /// threads touches these few bytes each, not whole records.
    slots: Vec<Slot>,
    /// The ready threads filed by the lock their pending event may wait
    /// for, so that a decision looks at each lock once.
    filed: ReadySets,
    /// Scratch of [`RunState::candidates`]: per lock of `filed.locks`, the
    /// held word, if held.
    held: Vec<Option<u32>>,
    /// Sorted ids of `Ready` threads.
    ready: Vec<Tid>,
    /// The candidates of the decision being made (kept for its capacity).
    cands: Vec<Candidate>,
}

/// What a run records for its result (beyond its verdict): the executed
/// events, with their stacks when asked, the guest's labels and the sites
/// reached.
pub struct Recording {
    /// With `record_events`: every executed event.
    pub events: Vec<Event>,
    /// With `event_stacks`: the stack of each recorded event.
    pub event_stacks: Vec<Vec<RawFrame>>,
    /// `heddle_event` labels: (step, tid, label).
    pub labels: Vec<(u64, Tid, String)>,
    /// Sites reached at least once (a bitset by site id): coverage.
    pub hit: Vec<u64>,
}

/// Who holds which lock, for reports (a deadlock's owners, the lock a
/// blocked thread waits for).
pub struct LockOwners {
    /// Lock owners known from lock/unlock calls in user code.
    pub owner: AddrMap<Tid>,
    /// Futex words used as locks, with their owners (diagnostic runs only:
    /// the history must be complete, so no yield point may be skipped).
    pub words: Option<WordLocks>,
    /// Stacks of the read-modify-writes that took words (indexed by
    /// [`crate::model::wordlock::Taken::stack`]).
    pub word_stacks: Vec<Vec<RawFrame>>,
}

/// The checkers a run may have on: each is None when off. They are boxed:
/// each is a few hundred bytes, and both go from the scratch to the state
/// and back at every run.
pub struct Checkers {
    /// The memory checker (memcheck).
    pub mem: Option<Box<MemCheck>>,
    /// The race detector.
    pub races: Option<Box<Races>>,
}

/// The guest's `random_get` stream (ChaCha8, separate from scheduling),
/// made at the run's first call ([`GuestRandom::rng`]): few programs ask,
/// and its state is a third of a kilobyte.
struct GuestRandom {
    rng: Option<Box<rand::rngs::ChaCha8Rng>>,
    /// The seed of that stream.
    seed: u64,
}

impl GuestRandom {
    /// The stream of a run of seed `seed`, not made yet.
    fn new(seed: u64) -> GuestRandom {
        GuestRandom {
            rng: None,
            seed: seed ^ STREAM_GUEST_RANDOM.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        }
    }

    /// The stream, made at its first use.
    fn rng(&mut self) -> &mut rand::rngs::ChaCha8Rng {
        let seed = self.seed;
        self.rng.get_or_insert_with(|| {
            Box::new(<rand::rngs::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(seed))
        })
    }
}

/// Stream id of the guest's random bytes.
const STREAM_GUEST_RANDOM: u64 = 3;

impl RunState {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        memory: SharedMemory,
        pages: (u32, u32),
        sites: Arc<SiteTable>,
        info: Arc<[SiteInfo]>,
        mut sched: Scheduler,
        limits: Limits,
        seed: u64,
        scratch: &mut Scratch,
    ) -> RunState {
        sched.strategy.reset(seed);
        let races = limits.races;
        let diagnostics = limits.diagnostics;
        let fast = !sites.memcheck
            && races == RaceMode::Off
            && !limits.record_events
            && !limits.event_stacks
            && !limits.diagnostics
            && !sched.observes;
        let sites_count = info.len();
        // Each buffer is taken out of the scratch, not the scratch moved:
        // it is a kilobyte, and this is every run.
        use std::mem::take;
        let stamp_base = scratch.stamp_base;
        let mut write_stamp = take(&mut scratch.write_stamp);
        let mut progress = take(&mut scratch.progress);
        progress.reset();
        let old_races = scratch.races.take();
        let mut cands = take(&mut scratch.cands);
        let mut threads = take(&mut scratch.threads);
        let mut slots = take(&mut scratch.slots);
        let mut filed = take(&mut scratch.filed);
        let mut held = take(&mut scratch.held);
        let mut ready = take(&mut scratch.ready);
        let mut futex = take(&mut scratch.futex);
        let mut lock_owner = take(&mut scratch.lock_owner);
        let mut handles = take(&mut scratch.handles);
        let old_mem = scratch.mem.take();
        let null_limit = sites.data_start.min(1024);
        let mem = sites.memcheck.then(|| match old_mem {
            Some(mut m) => {
                m.reset(null_limit);
                m
            }
            None => Box::new(MemCheck::new(null_limit)),
        });
        ready.clear();
        ready.push(0);
        futex.clear();
        lock_owner.clear();
        handles.clear();
        filed.reset(0);
        held.clear();
        threads.clear();
        threads.push(ThreadRec::new(0));
        slots.clear();
        slots.push(Slot {
            ready: true,
            ..Slot::new(0)
        });
        if write_stamp.len() != STAMP_SLOTS {
            write_stamp = vec![0; STAMP_SLOTS];
        }
        cands.clear();
        RunState {
            fresh_parent: None,
            threads,
            runnable: Runnable {
                slots,
                filed,
                held,
                ready,
                cands,
            },
            current: 0,
            steps: 0,
            clock: Clock::new(),
            futex,
            timers: BTreeSet::new(),
            sched,
            outcome: None,
            closed: false,
            memory: RunMemory::new(memory, pages),
            sites,
            info,
            limits,
            budget_rng: Rng::new(seed, STREAM_BUDGET),
            live: Liveness {
                write_stamp,
                stamp_base,
                solo_epoch: 0,
                progress,
            },
            force: None,
            fast,
            granted: 0,
            skipped: 0,
            record: Recording {
                events: Vec::new(),
                event_stacks: Vec::new(),
                labels: Vec::new(),
                hit: vec![0; sites_count.div_ceil(64)],
            },
            switches: 0,
            preemptions: 0,
            locks: LockOwners {
                owner: lock_owner,
                words: diagnostics.then(WordLocks::default),
                word_stacks: Vec::new(),
            },
            checkers: Checkers {
                mem,
                races: Races::new(races, old_races),
            },
            handles,
            signals: Signals::default(),
            io: Default::default(),
            random: GuestRandom::new(seed),
        }
    }

    /// The guest's `random_get` stream, made at its first use.
    pub fn guest_random(&mut self) -> &mut rand::rngs::ChaCha8Rng {
        self.random.rng()
    }

    /// Leaves this run's buffers to the next one on its memory, in
    /// `scratch` (after its result is taken: the race detector goes with
    /// them).
    pub fn recycle(&mut self, scratch: &mut Scratch) {
        use std::mem::take;
        // Every field, so that a new one cannot be forgotten here.
        let Scratch {
            write_stamp,
            progress,
            stamp_base,
            races,
            cands,
            threads,
            slots,
            filed,
            held,
            ready,
            futex,
            lock_owner,
            handles,
            mem,
        } = scratch;
        *write_stamp = take(&mut self.live.write_stamp);
        self.live.progress.retire(self.steps);
        *progress = take(&mut self.live.progress);
        *stamp_base = self.live.stamp_base + self.steps + 1;
        *races = self.checkers.races.take();
        *cands = take(&mut self.runnable.cands);
        *threads = take(&mut self.threads);
        *slots = take(&mut self.runnable.slots);
        *filed = take(&mut self.runnable.filed);
        *held = take(&mut self.runnable.held);
        *ready = take(&mut self.runnable.ready);
        *futex = take(&mut self.futex);
        *lock_owner = take(&mut self.locks.owner);
        *handles = take(&mut self.handles);
        *mem = self.checkers.mem.take();
    }

    /// Ends the run with `o` unless it is already ending.
    pub fn end(&mut self, o: Outcome) -> RunEnd {
        if self.outcome.is_none() {
            self.outcome = Some(o);
        }
        RunEnd
    }

    pub fn ended(&self) -> bool {
        self.outcome.is_some()
    }

    /// A fresh preemption budget for the slice that starts now.
    pub fn next_budget(&mut self) -> i32 {
        let (lo, hi) = self.limits.budget;
        self.budget_rng.range(lo as u64, hi.max(lo) as u64) as i32
    }

    fn set_ready(&mut self, tid: Tid) {
        if let Err(i) = self.runnable.ready.binary_search(&tid) {
            self.runnable.ready.insert(i, tid);
            let slot = &mut self.runnable.slots[tid as usize];
            slot.ready = true;
            slot.since = self.steps;
            self.runnable.filed.file(tid, slot.lock());
        }
        self.threads[tid as usize].status = Status::Ready;
    }

    fn unready(&mut self, tid: Tid) {
        if let Ok(i) = self.runnable.ready.binary_search(&tid) {
            self.runnable.ready.remove(i);
            let slot = &mut self.runnable.slots[tid as usize];
            slot.ready = false;
            self.runnable.filed.unfile(tid, slot.lock());
        }
    }

    /// Creates a thread (it is enabled at once, its first event `Start`).
    pub fn spawn(&mut self, parent: Tid, start_arg: u32) -> Tid {
        let tid = self.threads.len() as Tid;
        self.threads.push(ThreadRec::new(start_arg));
        self.runnable.slots.push(Slot::new(tid));
        self.threads[tid as usize].parent = parent;
        // A new thread inherits its creator's signal mask.
        self.threads[tid as usize].sig_mask = self.threads[parent as usize].sig_mask;
        if let Some(races) = &mut self.checkers.races {
            races.spawn(parent, tid);
        }
        self.threads[parent as usize].last_child = Some(tid);
        self.live.progress.made(self.steps, None);
        self.set_ready(tid);
        self.sched.strategy.on_spawn(tid);
        tid
    }

    fn hash_slot(addr: u32) -> usize {
        ((addr >> 2).wrapping_mul(0x9e37_79b1) >> 20) as usize % STAMP_SLOTS
    }

    /// What thread `tid` does next.
    #[inline]
    pub fn pending(&self, tid: Tid) -> Pending {
        self.runnable.slots[tid as usize].cand.pending
    }

    /// Sets what thread `tid` does next.
    #[inline]
    fn set_pending(&mut self, tid: Tid, p: Pending) {
        // A thread with a signal to take is not held back by a lock: it
        // must reach a yield point where the signal can be delivered.
        let takes_lock = may_take_lock(&self.info, &p) && !self.signal_ready(tid);
        let slot = &mut self.runnable.slots[tid as usize];
        // A ready thread is filed by the lock its event may wait for.
        let refile = slot.ready && (slot.takes_lock || takes_lock);
        if refile {
            self.runnable.filed.unfile(tid, slot.lock());
        }
        slot.cand.pending = p;
        slot.takes_lock = takes_lock;
        if refile {
            self.runnable.filed.file(tid, slot.lock());
        }
    }

    fn note_pending(&mut self, tid: Tid, p: Pending) {
        let steps = self.steps;
        if self.runnable.ready.len() == 1 && !self.watched(steps) {
            // A solo stretch between watches counts as progress, as a
            // stretch the fast path skipped does.
            self.live.progress.unseen(steps);
        } else {
            self.live
                .progress
                .observe(tid, &p, steps, guest(&self.memory.span));
        }
        if self.runnable.ready.len() == 1 {
            // A solo stretch: no spin tracking (see `solo_epoch`).
            self.live.solo_epoch = steps;
            self.threads[tid as usize].forget_spin(steps);
            self.runnable.slots[tid as usize].cand.spinning = false;
            self.set_pending(tid, p);
            if let Some(w) = self.record.hit.get_mut((p.site >> 6) as usize) {
                *w |= 1 << (p.site & 63);
            }
            return;
        }
        let solo_epoch = self.live.solo_epoch;
        // A failing test-and-set, exchange or CAS writes what it read (or
        // nothing), so it never looks like a re-read of an unwritten word:
        // it spins when the word holds the value this thread's last such
        // operation on it saw, and the thread has not stored there since
        // (an uncontended lock taken, released by a store and taken again
        // is not spinning).
        let rmw_seen = matches!(p.kind, EventKind::Rmw | EventKind::Cmpxchg)
            .then(|| self.read_le(p.addr, p.len.clamp(1, 8)))
            .flatten()
            .map(|v| (p.addr, v));
        let th = &mut self.threads[tid as usize];
        let worked_at = th.worked_at;
        let spinning = match p.kind {
            EventKind::Rmw | EventKind::Cmpxchg => {
                let same = rmw_seen.is_some() && th.last_rmw == rmw_seen;
                th.last_rmw = rmw_seen;
                same
            }
            EventKind::Write | EventKind::Copy | EventKind::Fill => {
                if th
                    .last_rmw
                    .is_some_and(|(a, _)| a.wrapping_sub(p.addr) < p.len.max(1))
                {
                    th.last_rmw = None;
                }
                th.worked_at = steps;
                false
            }
            EventKind::Spawn => {
                th.worked_at = steps;
                false
            }
            EventKind::Read => {
                let slot = Self::hash_slot(p.addr);
                // Nobody wrote the word since `step`, and this thread
                // neither stored nor created a thread since: it only polls.
                let unwritten_since = |step: u64| {
                    self.live.write_stamp[slot] <= self.live.stamp_base + step
                        && solo_epoch <= step
                        && worked_at <= step
                };
                let (last_addr, last_site, last_step) = th.last_read;
                th.last_read = (p.addr, p.site, steps);
                let again =
                    last_addr == p.addr && last_site == p.site && unwritten_since(last_step);
                // A re-read of one of the last few words read, unwritten
                // since; two in a row make a polling loop.
                let seen = th
                    .recent_reads
                    .iter()
                    .position(|&(a, s, _)| a == p.addr && s == p.site);
                let reread = seen.is_some_and(|i| unwritten_since(th.recent_reads[i].2));
                th.reread_streak = if reread { th.reread_streak + 1 } else { 0 };
                let i = seen.unwrap_or(RECENT_READS - 1);
                th.recent_reads.copy_within(0..i, 1);
                th.recent_reads[0] = (p.addr, p.site, steps);
                again || th.reread_streak >= 2
            }
            // A fence between the polls of a spin loop is part of the spin.
            EventKind::Fence => th.spins,
            // Out of budget at a loop header: a loop without yield points.
            EventKind::Budget => self
                .info
                .get(p.site as usize)
                .is_some_and(|s| s.kind == SiteKind::BackEdge),
            _ => false,
        };
        th.spins = spinning;
        self.runnable.slots[tid as usize].cand.spinning = spinning;
        self.set_pending(tid, p);
        if let Some(w) = self.record.hit.get_mut((p.site >> 6) as usize) {
            *w |= 1 << (p.site & 63);
        }
        if p.kind.writes() {
            self.live.write_stamp[Self::hash_slot(p.addr)] = self.live.stamp_base + steps;
        }
    }

    /// Whether `p` only announces what its thread does next (a lock,
    /// unlock, condition wait, join or thread creation about to be called):
    /// it touches nothing itself, so the yield point that follows it in the
    /// same thread needs no decision of its own.
    fn announces(&self, p: &Pending) -> bool {
        match p.kind {
            EventKind::Lock | EventKind::Unlock | EventKind::CondWait | EventKind::Join => true,
            EventKind::Call => self
                .info
                .get(p.site as usize)
                .is_some_and(|s| s.kind == crate::instrument::SiteKind::ThreadCreate),
            _ => false,
        }
    }

    /// Records that `tid` executes its pending event now.
    fn executed(&mut self, tid: Tid, preempted: bool) -> Result<(), RunEnd> {
        let p = self.pending(tid);
        self.runnable.slots[tid as usize].since = self.steps;
        if let Some((f, left)) = self.force {
            // A forced thread runs its burst, unless it spins or waits.
            self.force = (f == tid && left > 1 && !self.threads[tid as usize].spins)
                .then_some((f, left - 1))
                .or(self.force.filter(|&(f, _)| f != tid));
        }
        self.threads[tid as usize].announced = self.announces(&p);
        match p.kind {
            EventKind::Lock | EventKind::Join => {
                self.threads[tid as usize].wants = Some((p.addr, p.site))
            }
            EventKind::Unlock | EventKind::CondWait => self.release(tid, p.addr),
            _ => {}
        }
        self.account(tid, p, preempted)?;
        // An inlined lock or unlock that takes or releases the mutex itself
        // makes the lock word's access in the same step, as the C library's
        // fast path would have made it in a step of its own with no
        // decision before it; the call is then done.
        if let Some(word) = self.inline_mutex_word(&p) {
            if inline_mutex_applies(self.info[p.site as usize].kind, self.mutex_words(p.addr)) {
                self.threads[tid as usize].announced = false;
                self.live.write_stamp[Self::hash_slot(word.addr)] =
                    self.live.stamp_base + self.steps;
                self.live.progress.made(self.steps, Some(word.addr));
                return self.account(tid, word, false);
            }
        }
        Ok(())
    }

    /// What every executed event goes through: the observing strategy,
    /// the word model, the trace and the race detector.
    fn account(&mut self, tid: Tid, p: Pending, preempted: bool) -> Result<(), RunEnd> {
        if self.sched.observes {
            let view = View {
                memory: guest(&self.memory.span),
                threads: &self.threads,
                labels: &self.record.labels,
            };
            self.sched.strategy.on_event(tid, &p, &view);
        }
        if self.locks.words.is_some() {
            self.note_word_op(tid, p);
        }
        // Record before the race check, so that a racing access that ends
        // the run (`--races fail`) is the last event of the trace.
        if self.limits.record_events {
            self.record(tid, p, preempted);
        }
        if let Some(races) = &mut self.checkers.races {
            if let Some(race) = races.executed(tid, p, &self.info, self.steps) {
                self.end(Outcome::Race(race));
            }
            if self.outcome.is_some() {
                return Err(RunEnd);
            }
        }
        Ok(())
    }

    /// For a lock or unlock call the rewriter inlined
    /// ([`SiteInfo::inline_mutex`]): the access the inserted code makes to
    /// the mutex's lock word, when it takes or releases the mutex itself.
    #[inline]
    fn inline_mutex_word(&self, p: &Pending) -> Option<Pending> {
        if !matches!(p.kind, EventKind::Lock | EventKind::Unlock)
            || !self
                .info
                .get(p.site as usize)
                .is_some_and(|s| s.inline_mutex)
        {
            return None;
        }
        Some(Pending {
            site: p.site + 1,
            kind: if p.kind == EventKind::Lock {
                EventKind::Cmpxchg
            } else {
                EventKind::Rmw
            },
            addr: p.addr.wrapping_add(MUTEX_LOCK_WORD),
            len: 4,
        })
    }

    /// The type, lock word and waiter count of the mutex at `addr`.
    fn mutex_words(&self, addr: u32) -> [u32; 3] {
        let word = |i: u32| {
            self.read_le(addr.wrapping_add(4 * i), 4)
                .map_or(u32::MAX, |v| v as u32)
        };
        [word(0), word(1), word(2)]
    }

    /// Appends `p`, executed now by `tid`, to the trace.
    fn record(&mut self, tid: Tid, p: Pending, preempted: bool) {
        self.fill_last_value(tid);
        self.record.events.push(Event {
            step: self.steps,
            tid,
            site: p.site,
            kind: p.kind,
            addr: p.addr,
            len: p.len,
            value: None,
            preempted,
        });
        if self.limits.event_stacks {
            let stack = self.threads[tid as usize].pending_stack.clone();
            self.record.event_stacks.push(stack);
        }
        self.threads[tid as usize].last_event = Some(self.record.events.len() - 1);
    }

    /// Notes the values of the tracked futex words `tid`'s access `p`, which
    /// executes now, may change (a 4-byte read-modify-write is tracked from
    /// its first one on).
    fn note_word_op(&mut self, tid: Tid, p: Pending) {
        let Some(words) = &self.locks.words else {
            return;
        };
        let rmw = matches!(p.kind, EventKind::Rmw | EventKind::Cmpxchg);
        let mut before = Vec::new();
        if rmw {
            if p.len == 4 && p.addr.is_multiple_of(4) {
                if let Some(v) = self.read_le(p.addr, 4) {
                    before.push((p.addr, v as u32));
                }
            }
        } else if matches!(p.kind, EventKind::Write | EventKind::Copy | EventKind::Fill) {
            let (from, to) = (p.addr & !3, p.addr.saturating_add(p.len.max(1)));
            let mut seen = |a: u32| {
                if let Some(v) = self.read_le(a, 4) {
                    before.push((a, v as u32));
                }
            };
            if to - from <= 64 {
                (from..to)
                    .step_by(4)
                    .filter(|&a| words.tracks(a))
                    .for_each(&mut seen);
            } else {
                // A large copy or fill: look only at the tracked words.
                words.tracked(from..to).for_each(&mut seen);
            }
        }
        let th = &mut self.threads[tid as usize];
        let stack = std::mem::take(&mut th.word_stack);
        th.word_op = (!before.is_empty()).then_some(WordOp {
            site: p.site,
            rmw,
            before,
            stack,
        });
    }

    /// Accounts for the effect of `tid`'s last access to tracked futex
    /// words (it has executed by the time the thread reaches its next
    /// yield point or ends).
    fn settle_words(&mut self, tid: Tid) {
        let Some(words) = &mut self.locks.words else {
            return;
        };
        let th = &mut self.threads[tid as usize];
        let Some(WordOp {
            site,
            rmw,
            before,
            stack,
        }) = th.word_op.take()
        else {
            return;
        };
        for (addr, old) in before {
            let Some(new) = guest(&self.memory.span).read_le(addr, 4).map(|v| v as u32) else {
                continue;
            };
            if rmw {
                if words.rmw(tid, addr, site, old, new) && !stack.is_empty() {
                    self.locks.word_stacks.push(stack.clone());
                    words.taken_with_stack(tid, addr, self.locks.word_stacks.len() - 1);
                }
            } else {
                words.store(tid, addr, old, new);
            }
        }
    }

    /// Fills in the value of `tid`'s last recorded access (it has executed
    /// by the time the thread reaches its next yield point).
    pub fn fill_last_value(&mut self, tid: Tid) {
        if let Some(i) = self.threads[tid as usize].last_event.take() {
            let e = self.record.events[i];
            if e.kind.is_access() && (1..=8).contains(&e.len) {
                self.record.events[i].value = self.read_le(e.addr, e.len);
            }
        }
    }

    /// Reads `len` ≤ 8 bytes of guest memory at `addr`, little-endian.
    pub fn read_le(&self, addr: u32, len: u32) -> Option<u64> {
        self.guest().read_le(addr, len)
    }

    /// The run's guest memory, for the host's reads and writes.
    pub fn guest(&self) -> GuestMemory<'_> {
        guest(&self.memory.span)
    }

    /// How many guarded yield points the current thread may skip from now
    /// on (0: none). Each skipped one stands for a yield point at which the
    /// host would do nothing but count: the thread is the only ready one, the
    /// run needs nothing per access (`fast`), and the window ends before the
    /// step budget, the time budget or the next timer could act, so that the
    /// yield point where one of them acts is seen by the host. The memory must
    /// not be larger than the guest thinks (a recycled one may be), so that an
    /// out-of-bounds access traps in the guest as it would in the host.
    pub fn solo_window(&self) -> u32 {
        if !self.fast
            || self.runnable.ready.len() != 1
            || self.memory.span.byte_len() >> 16 != self.memory.pages as usize
        {
            return 0;
        }
        let now = self.clock.now();
        // Watched stretches are seen step by step (see `watched`).
        let w = self.hang_window();
        if self.watched(self.steps + 1) {
            return 0;
        }
        let watch_from = (self.steps / w + 1) * w;
        let mut n =
            (watch_from - 1 - self.steps).min(self.limits.max_steps.saturating_sub(self.steps));
        n = n.min(self.limits.max_time_ns.saturating_sub(now) / Clock::STEP_NS);
        if let Some(&(deadline, _)) = self.timers.first() {
            n = n.min(deadline.saturating_sub(now).saturating_sub(1) / Clock::STEP_NS);
        }
        n.min(i32::MAX as u64) as u32
    }

    /// The current thread made a host call with `left` of its `granted`
    /// skips unused: account for the yield points it skipped exactly as if
    /// the host had seen them (one step and one tick each, a solo stretch).
    pub fn reconcile(&mut self, left: u32) {
        let used = self.granted.saturating_sub(left) as u64;
        self.granted = 0;
        if used == 0 {
            return;
        }
        self.steps += used;
        self.skipped += used;
        self.clock
            .advance_to(self.clock.now() + used * Clock::STEP_NS);
        self.live.solo_epoch = self.steps;
        let steps = self.steps;
        self.live.progress.unseen(steps);
        self.threads[self.current as usize].private_run = 0;
        self.threads[self.current as usize].forget_spin(steps);
        self.runnable.slots[self.current as usize].cand.spinning = false;
    }

    fn tick(&mut self) -> Result<(), RunEnd> {
        self.steps += 1;
        self.clock.tick();
        let window = self.hang_window();
        if self.live.progress.stalled(self.steps) >= window {
            return Err(self.hang(window));
        }
        if self.steps > self.limits.max_steps {
            return Err(self.end(Outcome::TooLong {
                steps: self.limits.max_steps,
            }));
        }
        if self.clock.now() > self.limits.max_time_ns {
            return Err(self.end(Outcome::Hang {
                reason: format!(
                    "virtual-time budget of {} ms exceeded",
                    self.limits.max_time_ns / 1_000_000
                ),
            }));
        }
        if !self.timers.is_empty() {
            self.fire_timers();
        }
        if self.steps & (FAIR_CHECK - 1) == 0 {
            if self.limits.fair_steps > 0 && self.force.is_none() {
                self.force = self.starving().map(|t| (t, FAIR_BURST));
            }
            if self.steps & (CANCEL_CHECK - 1) == 0
                && (self
                    .limits
                    .deadline
                    .is_some_and(|d| std::time::Instant::now() >= d)
                    || crate::interrupt::requested().is_some())
            {
                return Err(self.end(Outcome::Cancelled));
            }
        }
        Ok(())
    }

    /// Steps without progress that make a hang: [`Limits::hang_steps`], but
    /// at most a quarter of the step budget, so that a run stopped by its
    /// budget was watched that long.
    fn hang_window(&self) -> u64 {
        self.limits.hang_steps.min(self.limits.max_steps / 4).max(1)
    }

    /// Whether step `step` is in a *watched* stretch: every other hang
    /// window of steps (the second, the fourth, …). A thread running alone
    /// is judged for progress only there; elsewhere its steps count as
    /// progress, whether the host sees them or the fast path skips them, so
    /// that both give the same run. A lone thread spinning for ever is then
    /// a hang within two windows.
    fn watched(&self, step: u64) -> bool {
        (step / self.hang_window()) % 2 == 1
    }

    /// Ends the run as hung: nothing made progress for `window` steps. With
    /// two or more threads able to run, it is a livelock (each of them only
    /// re-read words nobody changed, retried a compare-exchange on an
    /// unchanged word, or stored what was already there).
    fn hang(&mut self, window: u64) -> RunEnd {
        let reason = if self.runnable.ready.len() > 1 {
            format!("livelock: every running thread spins, none made progress in {window} steps")
        } else {
            format!(
                "no progress in {window} steps: thread {} spins alone",
                self.current
            )
        };
        self.end(Outcome::Hang { reason })
    }

    /// The ready thread that has waited longest while others ran, if it
    /// waited more than [`Limits::fair_steps`] and can run (a thread
    /// waiting for a held lock cannot).
    fn starving(&self) -> Option<Tid> {
        let steps = self.steps;
        let mem = self.guest();
        self.runnable
            .ready
            .iter()
            .map(|&t| (self.runnable.slots[t as usize].since, t))
            .filter(|&(since, t)| {
                steps - since > self.limits.fair_steps
                    && waits_for_lock(
                        &self.info,
                        mem,
                        &self.runnable.slots[t as usize].cand.pending,
                    )
                    .is_none()
            })
            .min()
            .map(|(_, t)| t)
    }

    /// Whether thread `tid` has a pending signal it does not block.
    #[inline]
    pub fn signal_ready(&self, tid: Tid) -> bool {
        let th = &self.threads[tid as usize];
        (th.sig_pending | self.signals.process) & !th.sig_mask != 0
    }

    /// At a yield point of `tid` with a signal ready for it: whether to
    /// deliver it now, a value decision of the strategy (recorded in the
    /// replay like every other).
    pub fn decide_signal(&mut self, tid: Tid, site: SiteId) -> Result<bool, RunEnd> {
        Ok(self.choose(tid, site, 2)? == 1)
    }

    /// Files ready thread `tid` again after a signal was sent to it (it
    /// is no longer left out for waiting on a lock).
    pub fn refile(&mut self, tid: Tid) {
        let p = self.pending(tid);
        self.set_pending(tid, p);
    }

    /// The virtual nanoseconds left before the process's alarm fires (0:
    /// none is set).
    pub fn alarm_left(&self) -> u64 {
        self.signals
            .alarm
            .map_or(0, |d| d.saturating_sub(self.clock.now()).max(1))
    }

    /// Sets the process's alarm to `deadline` (none: cancelled), repeating
    /// every `interval` nanoseconds after it (0: once); returns the time
    /// that was left of the previous one.
    pub fn set_alarm(&mut self, deadline: Option<u64>, interval: u64) -> u64 {
        let left = self.alarm_left();
        if let Some(d) = self.signals.alarm.take() {
            self.timers.remove(&(d, ALARM));
        }
        self.signals.alarm_interval = if deadline.is_some() { interval } else { 0 };
        if let Some(d) = deadline {
            self.signals.alarm = Some(d);
            self.timers.insert((d, ALARM));
        }
        left
    }

    /// Sends `sig` to thread `target`: pending, and a thread blocked where
    /// the signal can reach it is woken (`runtime::signals`).
    pub fn send_signal(&mut self, target: Tid, sig: u32) {
        let b = signals::bit(sig);
        if signals::discarded(self.signals.handled, self.signals.ignored, b) {
            return;
        }
        self.signals.sent = true;
        let th = &mut self.threads[target as usize];
        th.sig_pending |= b;
        let unblocked = th.sig_mask & b == 0;
        match th.status {
            Status::Blocked(Block::Signal { set }) if set & b != 0 => self.interrupt(target),
            Status::Blocked(Block::Futex { .. } | Block::Sleep { .. } | Block::Io { .. })
                if unblocked =>
            {
                self.interrupt(target)
            }
            Status::Ready if unblocked => self.refile(target),
            _ => {}
        }
    }

    /// Sends `sig` to the process, from thread `sender` (none: the alarm):
    /// to the sender unless it blocks it, else to a thread waiting for it
    /// in `sigwait`, else to the first live thread that does not block it;
    /// when every thread blocks it, it stays pending for the process.
    pub fn send_to_process(&mut self, sender: Option<Tid>, sig: u32) {
        let b = signals::bit(sig);
        if signals::discarded(self.signals.handled, self.signals.ignored, b) {
            return;
        }
        let live = |t: &ThreadRec| !matches!(t.status, Status::Done);
        let target = sender
            .filter(|&t| self.threads[t as usize].sig_mask & b == 0)
            .or_else(|| {
                self.threads.iter().position(|t| {
                    matches!(t.status, Status::Blocked(Block::Signal { set }) if set & b != 0)
                }).map(|t| t as Tid)
            })
            .or_else(|| {
                self.threads
                    .iter()
                    .position(|t| live(t) && t.sig_mask & b == 0)
                    .map(|t| t as Tid)
            });
        match target {
            Some(t) => self.send_signal(t, sig),
            None => {
                self.signals.sent = true;
                self.signals.process |= b;
            }
        }
    }

    /// Wakes blocked thread `tid` for a signal: its wait returns as if
    /// woken (a futex wait) or cut short (a sleep, `sig_wait`).
    pub fn interrupt(&mut self, tid: Tid) {
        let th = &self.threads[tid as usize];
        let Status::Blocked(b) = th.status else {
            return;
        };
        if let Block::Futex { addr, .. } = b {
            self.futex.remove(addr, tid);
        }
        if let Some(d) = b.deadline() {
            self.timers.remove(&(d, tid));
        }
        let site = th.block_site;
        let th = &mut self.threads[tid as usize];
        th.wake_result = 0;
        th.interrupted = true;
        self.woken(tid, site);
    }

    /// Channels `chans` of the pipes changed (bytes moved, an end closed):
    /// the threads waiting on them can run again and look.
    pub fn io_changed(&mut self, chans: &[u32]) {
        for t in self.io.changed(chans) {
            let th = &self.threads[t as usize];
            let Status::Blocked(b) = th.status else {
                continue;
            };
            if let Some(d) = b.deadline() {
                self.timers.remove(&(d, t));
            }
            let site = th.block_site;
            self.threads[t as usize].wake_result = 0;
            self.woken(t, site);
        }
    }

    /// `tid` wrote to channel `chan`, or closed it: a release, for the
    /// race detector.
    pub fn io_sent(&mut self, tid: Tid, chan: u32) {
        if let Some(races) = &mut self.checkers.races {
            races.sent(tid, chan);
        }
    }

    /// `tid` read from channel `chan` (or its end): an acquire.
    pub fn io_received(&mut self, tid: Tid, chan: u32) {
        if let Some(races) = &mut self.checkers.races {
            races.received(tid, chan);
        }
    }

    /// Thread `tid`, blocked at `site`, can run again: its next event is
    /// the wake.
    fn woken(&mut self, tid: Tid, site: SiteId) {
        self.set_pending(
            tid,
            Pending {
                site,
                kind: EventKind::Wake,
                addr: 0,
                len: 0,
            },
        );
        self.set_ready(tid);
    }

    fn fire_timers(&mut self) {
        let now = self.clock.now();
        while let Some(&(deadline, tid)) = self.timers.first() {
            if deadline > now {
                break;
            }
            self.timers.pop_first();
            if tid == ALARM {
                // A periodic timer keeps its phase: the next expiry is a
                // period after this one, however late this one is seen.
                self.signals.alarm = None;
                let period = self.signals.alarm_interval;
                if period > 0 {
                    let mut next = deadline.saturating_add(period);
                    if next <= now {
                        next = now.saturating_add(period - (now - deadline) % period);
                    }
                    self.signals.alarm = Some(next);
                    self.timers.insert((next, ALARM));
                }
                self.send_to_process(None, SIGALRM);
                continue;
            }
            let th = &self.threads[tid as usize];
            if let Status::Blocked(b) = th.status {
                if let Block::Futex { addr, .. } = b {
                    self.futex.remove(addr, tid);
                }
                let site = th.block_site;
                self.threads[tid as usize].wake_result = 2;
                self.woken(tid, site);
            }
        }
    }

    /// The threads a decision chooses from: the ready ones, except those
    /// about to take a lock (a default mutex, the thread list) another
    /// thread holds, unless that leaves none (they would only spin, then
    /// sleep on the lock word until it is released: waiting here is the
    /// same, without the steps). A spinning hint is reported once:
    /// strategies react to the observation, not to a flag that stays set.
    fn candidates(&mut self) -> Vec<Candidate> {
        let mut c = self.all_candidates();
        if let Some((f, _)) = self.force {
            if c.iter().any(|x| x.tid == f) {
                // Fairness: a thread that waited too long runs now.
                c.retain(|x| x.tid == f);
            } else {
                self.force = None;
            }
        }
        c
    }

    /// [`RunState::candidates`] before fairness.
    fn all_candidates(&mut self) -> Vec<Candidate> {
        let mut c = std::mem::take(&mut self.runnable.cands);
        c.clear();
        self.sched.waiting.clear();
        let record = self.sched.choice_points.is_some();
        let mem = guest(&self.memory.span);
        if !record && self.runnable.slots.len() <= 64 {
            // The same walk on one word per set (every tid below 64), with
            // no waiting list to keep.
            let mut open = self.runnable.filed.free.low_word();
            let mut any_held = false;
            for g in &self.runnable.filed.locks {
                if held_lock_word(mem, g.addr, g.mutex).is_some() {
                    any_held = true;
                } else {
                    open |= g.threads.low_word();
                }
            }
            if !any_held || open == 0 {
                for &tid in &self.runnable.ready {
                    c.push(self.runnable.slots[tid as usize].candidate());
                }
            } else {
                while open != 0 {
                    let tid = open.trailing_zeros();
                    open &= open - 1;
                    c.push(self.runnable.slots[tid as usize].candidate());
                }
            }
            #[cfg(debug_assertions)]
            self.check_candidates(&c);
            return c;
        }
        // Each lock once: the lockers of a free one are candidates, those
        // of a held one wait.
        self.runnable.held.clear();
        for g in &self.runnable.filed.locks {
            let held = held_lock_word(mem, g.addr, g.mutex);
            if let (Some(word), true) = (held, record) {
                self.sched
                    .waiting
                    .extend(g.threads.iter().map(|tid| (tid, word)));
            }
            self.runnable.held.push(held);
        }
        let held = &self.runnable.held;
        if held.iter().all(Option::is_none) {
            for &tid in &self.runnable.ready {
                c.push(self.runnable.slots[tid as usize].candidate());
            }
        } else {
            for tid in self.runnable.filed.open(|i| held[i].is_some()).iter() {
                c.push(self.runnable.slots[tid as usize].candidate());
            }
            if c.is_empty() {
                // Every ready thread waits: all of them run, as without
                // the rule.
                self.sched.waiting.clear();
                for &tid in &self.runnable.ready {
                    c.push(self.runnable.slots[tid as usize].candidate());
                }
            }
            self.sched.waiting.sort_unstable_by_key(|w| w.0);
        }
        #[cfg(debug_assertions)]
        self.check_candidates(&c);
        c
    }

    /// The candidates and waiting threads [`RunState::candidates`] found
    /// through [`Runnable::filed`] are those a walk over every ready thread
    /// finds.
    #[cfg(debug_assertions)]
    fn check_candidates(&self, c: &[Candidate]) {
        let mem = self.guest();
        let mut waiting = Vec::new();
        let mut tids = Vec::new();
        for &tid in &self.runnable.ready {
            let slot = &self.runnable.slots[tid as usize];
            assert!(slot.ready && slot.cand.tid == tid);
            let p = &slot.cand.pending;
            let signal = self.signal_ready(tid);
            assert_eq!(slot.takes_lock, may_take_lock(&self.info, p) && !signal);
            match waits_for_lock(&self.info, mem, p).filter(|_| !signal) {
                Some(word) => waiting.push((tid, word)),
                None => tids.push(tid),
            }
        }
        if tids.is_empty() {
            tids = self.runnable.ready.clone();
            waiting.clear();
        }
        let got: Vec<Tid> = c.iter().map(|c| c.tid).collect();
        assert_eq!(got, tids, "candidates");
        if self.sched.choice_points.is_some() {
            assert_eq!(self.sched.waiting, waiting, "waiting threads");
        }
        let filed = self.runnable.filed.free.iter().count()
            + self
                .runnable
                .filed
                .locks
                .iter()
                .map(|g| g.threads.iter().count())
                .sum::<usize>();
        assert_eq!(
            filed,
            self.runnable.ready.len(),
            "every ready thread filed once"
        );
    }

    /// Whether `p` is a yield point before which no decision is made
    /// ([`SiteInfo::private`]: the C library's bookkeeping, its
    /// synchronisation code's futex waits and notifies, and creating a
    /// thread up to the spawn's return).
    #[inline]
    fn private(&self, p: &Pending) -> bool {
        self.info.get(p.site as usize).is_some_and(|s| s.private)
            || p.kind == EventKind::Spawn
            || (p.len != 0
                && self
                    .sites
                    .private_words
                    .iter()
                    .any(|w| p.addr.wrapping_sub(w.addr) < w.size))
    }

    /// Thread `tid` reached a yield point and will perform `p` next.
    /// Returns whether it must switch away (another thread was chosen).
    pub fn yield_point(&mut self, tid: Tid, p: Pending) -> Result<bool, RunEnd> {
        if self.limits.record_events {
            self.fill_last_value(tid);
        }
        self.settle_words(tid);
        self.tick()?;
        self.note_pending(tid, p);
        // Right after an announcement the decision was already made: with
        // nothing another thread can see in between, switching here or
        // before the announcement reaches the same states. The C library's
        // bookkeeping, its synchronisation code's futex waits and notifies,
        // and the steps of creating a thread before the spawn returns
        // (`SiteInfo::private`) make no decision either. Unless the thread
        // is about to wait for a held lock (`pthread_create`'s thread-list
        // lock, held by an exiting thread): it must not go on.
        // A thread that spins through private points (a library's
        // contended path) still meets a decision every MAX_PRIVATE_RUN.
        // A thread alone cannot starve another, and creating a thread is
        // no spin: either ends a run of private points (so that the yield
        // points the fast path skips, all solo, count as the host would).
        let th = &self.threads[tid as usize];
        let private = self.private(&p) && th.private_run < MAX_PRIVATE_RUN;
        let solo = self.runnable.ready.len() == 1;
        if solo
            || ((th.announced || private) && waits_for_lock(&self.info, self.guest(), &p).is_none())
        {
            let th = &mut self.threads[tid as usize];
            th.private_run = if private && !solo && p.kind != EventKind::Spawn {
                th.private_run + 1
            } else {
                0
            };
            self.executed(tid, false)?;
            return Ok(false);
        }
        self.threads[tid as usize].private_run = 0;
        let cands = self.candidates();
        // A thread waiting for a held lock is not among them.
        let can_go_on = cands.iter().any(|c| c.tid == tid);
        // A new thread's start-up runs inside the slice of the thread it
        // interrupted (`fresh_thread`): at the new thread's first decision,
        // that thread is the one going on, and leaving it is the
        // preemption.
        let parent = self
            .fresh_parent
            .take()
            .filter(|&t| t != tid && cands.iter().any(|c| c.tid == t));
        let current = parent.or(can_go_on.then_some(tid));
        let fresh = fresh_thread(&cands).filter(|&t| t != tid);
        let chosen = if cands.len() == 1 {
            Ok(cands[0].tid)
        } else if let Some(t) = fresh {
            self.fresh_parent = current;
            Ok(t)
        } else {
            self.sched.events_recorded = self.record.events.len();
            let view = View {
                memory: guest(&self.memory.span),
                threads: &self.threads,
                labels: &self.record.labels,
            };
            let pick = self.sched.pick_thread(current, &cands, &view);
            pick.map(|i| cands[i].tid)
        };
        self.runnable.cands = cands;
        let chosen = match chosen {
            Ok(t) => t,
            Err(d) => return Err(self.end(Outcome::Diverged(d))),
        };
        // Leaving a thread that was seen spinning, or that waits for a
        // lock, is not a preemption: it could not have made progress by
        // going on; nor is running a new thread's start-up.
        let left = current.filter(|&t| t != chosen && fresh.is_none());
        let preempted = left.is_some_and(|t| !self.threads[t as usize].spins);
        self.preemptions += preempted as u64;
        if chosen == tid {
            self.executed(tid, preempted)?;
            return Ok(false);
        }
        let spun = !preempted;
        self.switches += 1;
        self.current = chosen;
        self.executed(chosen, !spun)?;
        Ok(true)
    }

    /// The current thread cannot run any more (it blocked or finished):
    /// choose who runs next, advancing virtual time if everyone sleeps.
    fn schedule_away(&mut self) -> Result<(), RunEnd> {
        self.fresh_parent = None;
        loop {
            if self.runnable.ready.is_empty() {
                if let Some(&(deadline, _)) = self.timers.first() {
                    self.clock.advance_to(deadline);
                    self.fire_timers();
                    continue;
                }
                if self
                    .threads
                    .iter()
                    .any(|t| matches!(t.status, Status::Blocked(_)))
                {
                    return Err(self.end(Outcome::Deadlock));
                }
                // Every thread finished (the main thread ended with pthread_exit).
                return Err(self.end(Outcome::Exit(0)));
            }
            let chosen = if self.runnable.ready.len() == 1 {
                self.runnable.ready[0]
            } else {
                let cands = self.candidates();
                if let Some(t) = (cands.len() == 1)
                    .then(|| cands[0].tid)
                    .or_else(|| fresh_thread(&cands))
                {
                    self.runnable.cands = cands;
                    self.switches += 1;
                    self.current = t;
                    self.executed(t, false)?;
                    return Ok(());
                }
                self.sched.events_recorded = self.record.events.len();
                let view = View {
                    memory: guest(&self.memory.span),
                    threads: &self.threads,
                    labels: &self.record.labels,
                };
                let pick = self.sched.pick_thread(None, &cands, &view);
                let t = pick.map(|i| cands[i].tid);
                self.runnable.cands = cands;
                match t {
                    Ok(t) => t,
                    Err(d) => return Err(self.end(Outcome::Diverged(d))),
                }
            };
            self.switches += 1;
            self.current = chosen;
            self.executed(chosen, false)?;
            return Ok(());
        }
    }

    /// `tid` blocks; another thread is chosen.
    pub fn block(&mut self, tid: Tid, b: Block, site: SiteId) -> Result<(), RunEnd> {
        let th = &mut self.threads[tid as usize];
        th.status = Status::Blocked(b);
        th.announced = false;
        th.block_site = site;
        th.wake_result = 0;
        th.interrupted = false;
        self.unready(tid);
        if let Block::Futex { addr, .. } = b {
            self.futex.park(addr, tid);
        }
        if let Some(d) = b.deadline() {
            self.timers.insert((d, tid));
            let now = self.clock.now();
            if d > now
                && d - now <= self.sched.max_stall_ns
                && self.timers.first() == Some(&(d, tid))
            {
                self.sched.events_recorded = self.record.events.len();
                match self.sched.pick_stall(tid, site, d - now) {
                    Ok(true) => {
                        self.clock.advance_to(d);
                        self.fire_timers();
                    }
                    Ok(false) => {}
                    Err(e) => return Err(self.end(Outcome::Diverged(e))),
                }
            }
        }
        self.schedule_away()
    }

    /// `tid` finished; another thread is chosen.
    pub fn finish(&mut self, tid: Tid) -> Result<(), RunEnd> {
        if self.limits.record_events {
            self.fill_last_value(tid);
        }
        self.settle_words(tid);
        self.live.progress.made(self.steps, None);
        self.threads[tid as usize].status = Status::Done;
        if let Some(races) = &mut self.checkers.races {
            races.finish(tid);
        }
        self.set_pending(
            tid,
            Pending {
                site: NO_SITE,
                kind: EventKind::Exit,
                addr: 0,
                len: 0,
            },
        );
        self.unready(tid);
        self.schedule_away()
    }

    /// Wakes up to `count` threads waiting on `addr`; which ones, when fewer
    /// than all, is a decision. Returns how many were woken.
    pub fn notify(&mut self, tid: Tid, site: SiteId, addr: u32, count: u32) -> Result<u32, RunEnd> {
        let total = self.futex.waiting(addr) as u32;
        let k = count.min(total);
        for i in 0..k {
            let remaining = total - i;
            let index = if k - i < remaining {
                self.sched.events_recorded = self.record.events.len();
                match self.sched.pick_value(tid, site, remaining) {
                    Ok(v) => v as usize,
                    Err(d) => return Err(self.end(Outcome::Diverged(d))),
                }
            } else {
                0
            };
            let woken = self.futex.take(addr, index);
            if let Some(races) = &mut self.checkers.races {
                races.wake(tid, woken);
            }
            let th = &self.threads[woken as usize];
            if let Status::Blocked(b) = th.status {
                if let Some(d) = b.deadline() {
                    self.timers.remove(&(d, woken));
                }
            }
            let wsite = th.block_site;
            self.threads[woken as usize].wake_result = 0;
            self.set_pending(
                woken,
                Pending {
                    site: wsite,
                    kind: EventKind::Wake,
                    addr,
                    len: 0,
                },
            );
            self.set_ready(woken);
        }
        Ok(k)
    }

    fn release(&mut self, tid: Tid, addr: u32) {
        if self.locks.owner.get(addr) == Some(&tid) {
            self.locks.owner.remove(addr);
        }
        self.threads[tid as usize].holds.retain(|&(a, _)| a != addr);
        let p = self.pending(tid);
        if p.kind == EventKind::CondWait {
            // Re-taken when the wait returns.
            self.threads[tid as usize].wants = Some((addr, p.site));
        }
    }

    /// A lock operation at `site` on `addr` returned `ret` in thread `tid`.
    pub fn locked(&mut self, tid: Tid, site: SiteId, addr: u32, ret: i32) {
        // The call returned: the thread no longer waits for its lock or
        // join (whose `wants` a report would otherwise still show).
        self.threads[tid as usize].wants = None;
        let kind = self.sites.site(site).map(|s| s.kind);
        use crate::instrument::SiteKind;
        match kind {
            Some(SiteKind::ThreadCreate) => {
                // `addr` is the `pthread_t *` argument.
                if ret == 0 {
                    if let (Some(h), Some(child)) =
                        (self.read_le(addr, 4), self.threads[tid as usize].last_child)
                    {
                        self.handles.insert(h as u32, child);
                    }
                }
                return;
            }
            Some(SiteKind::Barrier | SiteKind::Once) => {
                // `addr` is the `pthread_barrier_t *` or `pthread_once_t *`
                // argument. Its first word (the barrier's lock, the once
                // control) is written atomically by every arrival and by the
                // initialiser's end, so it holds their clocks; callers that
                // find the barrier open or the once done leave through a
                // plain read, which gives no edge of its own: their return
                // acquires it.
                if let Some(races) = &mut self.checkers.races {
                    races.departed(tid, addr);
                }
                return;
            }
            Some(SiteKind::ThreadJoin) => {
                // `addr` is the `pthread_t` argument.
                if ret == 0 {
                    if let (Some(&joined), Some(races)) =
                        (self.handles.get(addr), &mut self.checkers.races)
                    {
                        races.joined(tid, joined);
                    }
                }
                return;
            }
            _ => {}
        }
        let took = match kind {
            Some(SiteKind::Lock) => ret == 0,
            // pthread_cond_(timed)wait re-takes the mutex even on timeout.
            Some(SiteKind::CondWait) => true,
            _ => false,
        };
        let th = &mut self.threads[tid as usize];
        if took {
            th.holds.push((addr, site));
            self.locks.owner.insert(addr, tid);
            if self.limits.record_events {
                self.fill_last_value(tid);
                self.record.events.push(Event {
                    step: self.steps,
                    tid,
                    site,
                    kind: EventKind::Acquire,
                    addr,
                    len: 0,
                    value: None,
                    preempted: false,
                });
                if self.limits.event_stacks {
                    let stack = self.threads[tid as usize].pending_stack.clone();
                    self.record.event_stacks.push(stack);
                }
            }
        }
    }

    /// The memory checker's verdict on an access, if it is invalid.
    #[inline]
    pub fn check_access(&self, p: &Pending) -> Option<(&'static str, Option<HeapBlock>)> {
        let mem = self.checkers.mem.as_ref()?;
        if p.len == 0 {
            // An inlined lock or unlock touches the mutex's lock word itself.
            return mem.check_access(&self.inline_mutex_word(p)?);
        }
        mem.check_access(p)
    }

    /// The memory error `kind` at `addr` by `tid` at `site` (its `stack`),
    /// with the stacks the memory checker kept for `block`.
    pub fn memory_error(
        &self,
        kind: &'static str,
        (tid, addr, site): (Tid, u32, SiteId),
        stack: Vec<RawFrame>,
        block: Option<HeapBlock>,
    ) -> MemoryError {
        MemCheck::error(
            self.checkers.mem.as_deref(),
            kind,
            (tid, addr, site),
            stack,
            block,
        )
    }

    fn origin(&self, tid: Tid, site: SiteId) -> Origin {
        Origin {
            tid,
            site,
            step: self.steps,
        }
    }

    /// An allocator call at `site` by `tid` with the guest's arguments
    /// (memcheck is on). Errors describe an invalid free/realloc.
    pub fn alloc_args(
        &mut self,
        tid: Tid,
        site: SiteId,
        args: [u32; 3],
    ) -> Result<(), InvalidFree> {
        let at = self.origin(tid, site);
        let callee = self.sites.site(site).and_then(|s| s.callee.as_deref());
        let mem = self.checkers.mem.as_mut().expect("memcheck on");
        if let Some(freed) = mem.alloc_args(callee, args, at, guest(&self.memory.span))? {
            self.heap_event(tid, site, freed, 0);
        }
        Ok(())
    }

    /// Records an allocation (`len` its size) or a free (`len` 0) of the
    /// block at `addr` as a [`EventKind::Call`] event at the allocator call
    /// `site`, so that reports can show where blocks were allocated and
    /// freed. It is not a yield point: only recorded, never scheduled.
    fn heap_event(&mut self, tid: Tid, site: SiteId, addr: u32, len: u32) {
        if !self.limits.record_events {
            return;
        }
        self.fill_last_value(tid);
        self.record.events.push(Event {
            step: self.steps,
            tid,
            site,
            kind: EventKind::Call,
            addr,
            len,
            value: None,
            preempted: false,
        });
        if self.limits.event_stacks {
            // The stack of the previous yield point may be at another line:
            // leave it empty so the event is placed at its call site.
            self.record.event_stacks.push(Vec::new());
        }
    }

    /// The `i`-th argument the allocator call should really get.
    pub fn alloc_arg(&self, tid: Tid, i: u32) -> u32 {
        self.checkers
            .mem
            .as_ref()
            .map_or(0, |m| m.alloc_arg(tid, i))
    }

    /// The allocator returned `result`; returns what the guest gets.
    pub fn alloc_post(&mut self, tid: Tid, site: SiteId, result: u32) -> u32 {
        let at = self.origin(tid, site);
        let Some(mem) = self.checkers.mem.as_mut() else {
            return result;
        };
        let (ret, block) = mem.alloc_post(result, at, guest(&self.memory.span));
        if let Some(b) = block {
            if let Some(races) = &mut self.checkers.races {
                races.fresh(b.real_start(), b.size.saturating_add(2 * b.redzone));
            }
            self.heap_event(tid, site, b.start, b.size);
            MemCheck::poison(guest(&self.memory.span), &b);
        }
        ret
    }

    /// `memory.grow`: grows the logical size (and the shared memory, when it
    /// is not already large enough). Returns the old size or -1.
    pub fn grow(&mut self, delta: u32) -> i32 {
        self.memory.grow(delta)
    }

    /// A value choice by `tid` (`heddle_choose`).
    pub fn choose(&mut self, tid: Tid, site: SiteId, n: u32) -> Result<u32, RunEnd> {
        if n <= 1 {
            return Ok(0);
        }
        self.sched.events_recorded = self.record.events.len();
        match self.sched.pick_value(tid, site, n) {
            Ok(v) => Ok(v),
            Err(d) => Err(self.end(Outcome::Diverged(d))),
        }
    }
}

/// The cell shared by the stores of a run: a slot keeps one for the runs
/// on its memory, one at a time.
pub struct RunCell {
    /// None between runs ([`RunCell::retire`]); the slot's idle guest
    /// instances still point here then, but no guest code runs.
    state: RefCell<Option<RunState>>,
    /// The OS thread of the run in the cell (a slot, and its cell, may go
    /// to another between runs).
    #[cfg(debug_assertions)]
    owner: std::cell::Cell<std::thread::ThreadId>,
}

// SAFETY: a run (every store, future and the state in this cell) is
// created, driven and retired on one OS thread; between runs the cell goes
// with its slot through the program's spare-slot mutex, which orders the
// accesses of one run before those of the next. wasmtime requires store
// data to be `Send` only because its async API is generic over executors
// that may move futures. Debug builds assert the single-thread discipline
// on every access.
unsafe impl Send for RunCell {}
unsafe impl Sync for RunCell {}

impl RunCell {
    /// Puts the state of a new run, built by `make`, in the cell.
    pub fn renew(&self, make: impl FnOnce() -> RunState) {
        #[cfg(debug_assertions)]
        self.owner.set(std::thread::current().id());
        *self.state.borrow_mut() = Some(make());
    }

    /// Ends the run in the cell: its buffers go to `scratch` for the next
    /// run ([`RunState::recycle`]) and the rest of its state, its strategy
    /// with it, is dropped where it is.
    pub fn retire(&self, scratch: &mut Scratch) {
        let mut cell = self.state.borrow_mut();
        if let Some(st) = cell.as_mut() {
            st.recycle(scratch);
        }
        *cell = None;
    }

    #[inline]
    pub fn get(&self) -> RefMut<'_, RunState> {
        #[cfg(debug_assertions)]
        debug_assert_eq!(
            self.owner.get(),
            std::thread::current().id(),
            "run state used from another OS thread"
        );
        RefMut::map(self.state.borrow_mut(), |s| {
            s.as_mut().expect("run state used after the run")
        })
    }

    /// A cell with no run in it.
    pub fn detached() -> Arc<RunCell> {
        Arc::new(RunCell {
            state: RefCell::new(None),
            #[cfg(debug_assertions)]
            owner: std::cell::Cell::new(std::thread::current().id()),
        })
    }
}
