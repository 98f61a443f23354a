//! The execution model of one run, independent of wasmtime: guest thread
//! states, the futex table, virtual time and the events threads are about to
//! perform. The runtime drives it; strategies read it.

pub(crate) mod addrmap;
pub(crate) mod channels;
pub(crate) mod clock;
pub(crate) mod futex;
pub mod hb;
pub(crate) mod heap;
pub(crate) mod signals;
pub mod wordlock;

pub use addrmap::AddrMap;
pub use clock::Clock;
pub use futex::FutexTable;

use crate::instrument::{SiteId, SiteKind};
use serde::{Deserialize, Serialize};

/// A guest thread id: 0 is the main thread, the others are numbered in spawn
/// order (they are also the ids `wasi.thread-spawn` returns).
pub type Tid = u32;

/// "No site": events that do not come from an instrumented instruction.
pub const NO_SITE: SiteId = u32::MAX;

/// What a thread is about to do (or just did) at a yield point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// A plain or atomic load.
    Read,
    /// A plain or atomic store.
    Write,
    /// An atomic read-modify-write.
    Rmw,
    /// An atomic compare-exchange.
    Cmpxchg,
    /// `memory.atomic.wait`.
    Wait,
    /// `memory.atomic.notify`.
    Notify,
    /// `atomic.fence`.
    Fence,
    /// `memory.copy`.
    Copy,
    /// `memory.fill`.
    Fill,
    /// Preemption budget ran out (back-edge or function entry).
    Budget,
    /// A call to a host import (WASI, guest SDK).
    Call,
    /// `wasi.thread-spawn` returned to the parent.
    Spawn,
    /// A thread's first step.
    Start,
    /// Resuming after a futex wake, a timeout or a sleep.
    Wake,
    /// `sched_yield` / `heddle_yield`.
    Yield,
    /// A `heddle_event` label.
    Label,
    /// A `heddle_choose` value choice.
    Choose,
    /// The thread returned from its start routine.
    Exit,
    /// About to take a lock (`pthread_mutex_lock` and friends).
    Lock,
    /// Took the lock it asked for.
    Acquire,
    /// About to release a lock.
    Unlock,
    /// About to wait on a condition variable (releases the mutex).
    CondWait,
    /// About to join a thread (`pthread_join`).
    Join,
}

impl EventKind {
    /// The kind of event an instrumented site of `kind` makes.
    pub fn from_site(kind: SiteKind) -> EventKind {
        match kind {
            SiteKind::Read => EventKind::Read,
            SiteKind::Write => EventKind::Write,
            SiteKind::Rmw => EventKind::Rmw,
            SiteKind::Cmpxchg => EventKind::Cmpxchg,
            SiteKind::Wait => EventKind::Wait,
            SiteKind::Notify => EventKind::Notify,
            SiteKind::Fence => EventKind::Fence,
            SiteKind::Copy => EventKind::Copy,
            SiteKind::Fill => EventKind::Fill,
            SiteKind::BackEdge | SiteKind::Entry => EventKind::Budget,
            SiteKind::Call => EventKind::Call,
            SiteKind::Lock => EventKind::Lock,
            SiteKind::Unlock => EventKind::Unlock,
            SiteKind::CondWait => EventKind::CondWait,
            SiteKind::Alloc | SiteKind::Free => EventKind::Call,
            SiteKind::ThreadCreate | SiteKind::Barrier | SiteKind::Once | SiteKind::SyncCall => {
                EventKind::Call
            }
            SiteKind::ThreadJoin => EventKind::Join,
        }
    }

    /// Whether the rewriter guards yield points of this kind with the skip
    /// counter (loads, stores, atomics and fences: the fast path).
    pub fn is_skippable(self) -> bool {
        matches!(
            self,
            EventKind::Read
                | EventKind::Write
                | EventKind::Rmw
                | EventKind::Cmpxchg
                | EventKind::Fence
        )
    }

    /// Whether the event reads or writes guest memory.
    pub fn is_access(self) -> bool {
        matches!(
            self,
            EventKind::Read
                | EventKind::Write
                | EventKind::Rmw
                | EventKind::Cmpxchg
                | EventKind::Copy
                | EventKind::Fill
        )
    }

    /// Whether the event may write guest memory.
    pub fn writes(self) -> bool {
        matches!(
            self,
            EventKind::Write
                | EventKind::Rmw
                | EventKind::Cmpxchg
                | EventKind::Copy
                | EventKind::Fill
        )
    }

    /// A short name for reports.
    pub fn label(self) -> &'static str {
        match self {
            EventKind::Read => "R",
            EventKind::Write => "W",
            EventKind::Rmw => "RMW",
            EventKind::Cmpxchg => "CAS",
            EventKind::Wait => "wait",
            EventKind::Notify => "notify",
            EventKind::Fence => "fence",
            EventKind::Copy => "copy",
            EventKind::Fill => "fill",
            EventKind::Budget => "preempt",
            EventKind::Call => "call",
            EventKind::Spawn => "spawn",
            EventKind::Start => "start",
            EventKind::Wake => "wake",
            EventKind::Yield => "yield",
            EventKind::Label => "event",
            EventKind::Choose => "choose",
            EventKind::Exit => "exit",
            EventKind::Lock => "lock",
            EventKind::Acquire => "acquired",
            EventKind::Unlock => "unlock",
            EventKind::CondWait => "cond-wait",
            EventKind::Join => "join",
        }
    }
}

/// The event a thread will perform when it is next scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    /// The instruction.
    pub site: SiteId,
    /// What it does.
    pub kind: EventKind,
    /// Effective address of an access (0 when none).
    pub addr: u32,
    /// Bytes accessed (0 when none).
    pub len: u32,
}

impl Pending {
    /// A thread that has not run yet.
    pub const START: Pending = Pending {
        site: NO_SITE,
        kind: EventKind::Start,
        addr: 0,
        len: 0,
    };
}

/// A raw guest frame: function index and module offset in the
/// *instrumented* module (symbolized later, through the site table). The
/// stacks of blocked threads, memory errors and recorded events are made
/// of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawFrame {
    /// The function's index.
    pub func: u32,
    /// The instruction's offset in the module, when known.
    pub offset: Option<u32>,
}

/// Why a thread cannot run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// Parked in `memory.atomic.wait` on `addr`, until woken or `deadline`.
    Futex {
        /// The futex word.
        addr: u32,
        /// The virtual time it times out at, if any.
        deadline: Option<u64>,
    },
    /// Sleeping (`poll_oneoff` clock subscription) until `deadline`.
    Sleep {
        /// The virtual time it wakes at.
        deadline: u64,
    },
    /// In `sigwait`, `sigsuspend` or `pause`, until one of `set` (bit
    /// `sig - 1`) is sent to it.
    Signal {
        /// The signals it waits for.
        set: u64,
    },
    /// In a read, write or poll of pipes or socket pairs
    /// (`model::channels`), until one of their channels changes or
    /// `deadline` (a poll's timeout).
    Io {
        /// The virtual time it times out at, if any.
        deadline: Option<u64>,
    },
}

impl Block {
    /// When the block ends by itself, if ever.
    pub fn deadline(&self) -> Option<u64> {
        match *self {
            Block::Futex { deadline, .. } => deadline,
            Block::Sleep { deadline } => Some(deadline),
            Block::Signal { .. } => None,
            Block::Io { deadline } => deadline,
        }
    }
}

/// Scheduling state of a guest thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Can take a step: stopped at a yield point with `pending` next.
    Ready,
    /// Waiting.
    Blocked(Block),
    /// Returned from its start routine (or ended by `pthread_exit`).
    Done,
}

/// What to do about data races.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RaceMode {
    /// Do not track happens-before.
    Off,
    /// Report races with the run's result (the verdict is unchanged).
    #[default]
    Report,
    /// The first race ends the run with verdict `data-race`.
    Fail,
}

impl std::str::FromStr for RaceMode {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<RaceMode> {
        match s {
            "off" => Ok(RaceMode::Off),
            "report" => Ok(RaceMode::Report),
            "fail" => Ok(RaceMode::Fail),
            _ => anyhow::bail!("unknown race mode `{s}` (expected report, fail or off)"),
        }
    }
}

impl std::fmt::Display for RaceMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RaceMode::Off => "off",
            RaceMode::Report => "report",
            RaceMode::Fail => "fail",
        })
    }
}
