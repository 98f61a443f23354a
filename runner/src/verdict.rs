//! How a run ended, and its stable signature for deduplication.

use crate::instrument::dwarf::is_library_unit;
use crate::instrument::Frame;
use crate::model::Tid;
use serde::{Deserialize, Serialize};

/// A thread that could not proceed when a deadlock was declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedThread {
    /// The blocked thread.
    pub tid: Tid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Its name, when the program named it.
    pub name: Option<String>,
    /// The futex address it waits on.
    pub addr: u32,
    /// The variable at `addr` (a mutex, condition variable, …), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// The thread holding the mutex at `addr`, when heddle knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Tid>,
    /// Locks it holds, with the line where it took each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<HeldLock>,
    /// The call it waits in: the user-code lock, condition-variable or join
    /// call when there is one (`file:line`), else the waiting instruction.
    #[serde(default)]
    pub waits_at: String,
    /// Where it waits, innermost first (empty unless stacks were captured).
    pub stack: Vec<Frame>,
}

/// A lock held by a blocked thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldLock {
    /// The lock's address.
    pub addr: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The variable at `addr`, when known.
    pub object: Option<String>,
    /// `file:line` where it was taken.
    pub site: String,
}

/// A thread's position when a run was stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadAt {
    /// The thread.
    pub tid: Tid,
    /// `file:line` or `function+offset` of its next event.
    pub site: String,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Verdict {
    /// The program exited with the expected code.
    /// How the program ended: exited with the expected code.
    Pass {
        /// The exit code.
        exit_code: i32,
    },
    /// `heddle_assert`/`heddle_fail`, or C `assert()`.
    Assertion {
        /// The assertion's message.
        message: String,
        /// The thread that failed it.
        tid: Tid,
        /// Where, innermost first.
        stack: Vec<Frame>,
    },
    /// A wasm trap (out-of-bounds access, unreachable, `abort()`, …).
    Trap {
        /// The trap's kind, as wasmtime names it.
        trap: String,
        /// The full message.
        message: String,
        /// The thread that trapped.
        tid: Tid,
        /// Where, innermost first.
        stack: Vec<Frame>,
    },
    /// A Rust panic. The standard library of `wasm32-wasip1-threads` is
    /// built with `panic=abort`: a panic prints `thread 'NAME' (ID)
    /// panicked at FILE:LINE:COL:` and its message on stderr, then aborts;
    /// an abort preceded by that message is this verdict, not a trap.
    Panic {
        /// The panic's message (an `assert_eq!`'s over several lines).
        message: String,
        /// `file:line:col` the panic names (the caller of `unwrap`,
        /// `assert!`, … through `#[track_caller]`).
        location: String,
        /// The name of the thread that panicked, as the message gives it
        /// (`main`, `<unnamed>`, a `Builder::name`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread: Option<String>,
        /// The thread that panicked.
        tid: Tid,
        /// Where it aborted, innermost first.
        stack: Vec<Frame>,
    },
    /// The program exited with an unexpected code.
    Exit {
        /// The exit code.
        code: i32,
        /// The code that counts as a pass.
        expected: i32,
    },
    /// Every unfinished thread is blocked with no deadline.
    Deadlock {
        /// Every unfinished thread, with what it waits for.
        threads: Vec<BlockedThread>,
    },
    /// The step budget ran out while the threads still made progress
    /// (`runtime::progress`): not a failure, and not a pass either — the
    /// program may be correct and long, or loop forever doing new things.
    TooLong {
        /// The step budget.
        steps: u64,
        /// Where each thread was.
        threads: Vec<ThreadAt>,
    },
    /// No thread made progress for the hang window (a livelock, or a thread
    /// spinning alone), or the virtual-time budget ran out.
    Hang {
        /// Which budget ran out, or why the run counts as hung.
        reason: String,
        /// Where each thread was.
        threads: Vec<ThreadAt>,
    },
    /// The program needs what `wasm32-wasip1-threads` lacks: to catch a
    /// panic (its `std` aborts on panic), to spawn a process, or more
    /// threads than fit. Neither a pass nor a failure: the test cannot run
    /// here ([`unsupported`]).
    Unsupported {
        /// What is missing, briefly: `unwinding`, `processes`, `threads`,
        /// `platform` (part of the signature).
        feature: String,
        /// What cannot run and why, for people.
        reason: String,
        /// The panic that showed it, as its one-line summary.
        message: String,
        /// The thread that panicked.
        tid: Tid,
        /// Where it aborted, innermost first.
        stack: Vec<Frame>,
    },
    /// The memory checker found an invalid access or free.
    Memory(MemoryVerdict),
    /// With `--races fail`: a data race.
    Race(RaceReport),
}

/// A data race: two accesses to the same location, at least one a write,
/// not ordered by happens-before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaceReport {
    /// The racing location.
    pub addr: u32,
    /// The variable at `addr`, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// The earlier access.
    pub first: RaceAccess,
    /// The later access.
    pub second: RaceAccess,
}

/// One side of a race.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaceAccess {
    /// The thread that made the access.
    pub tid: Tid,
    /// Whether it wrote.
    pub write: bool,
    /// `file:line` of the access.
    pub site: String,
    /// The function of the access.
    pub function: String,
    /// Its stack (when the run recorded event stacks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<Frame>,
}

impl RaceReport {
    /// `file:line` pair, ordered, for deduplication.
    pub fn key(&self) -> (String, String) {
        let (a, b) = (self.first.site.clone(), self.second.site.clone());
        if a <= b {
            (a, b)
        } else {
            (b, a)
        }
    }

    /// One line for people: what raced, where and by whom.
    pub fn summary(&self) -> String {
        let what = self
            .object
            .clone()
            .unwrap_or_else(|| format!("{:#x}", self.addr));
        let rw = |w: bool| if w { "write" } else { "read" };
        format!(
            "data race on {what}: {} by thread {} at {} ({}) and {} by thread {} at {} ({})",
            rw(self.first.write),
            self.first.tid,
            self.first.site,
            self.first.function,
            rw(self.second.write),
            self.second.tid,
            self.second.site,
            self.second.function
        )
    }
}

/// A memory error: `null-deref`, `use-after-free`, `heap-overflow`,
/// `double-free` or `invalid-free`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryVerdict {
    /// The kind: `null-deref`, `use-after-free`, `heap-overflow`, `double-free` or `invalid-free`.
    pub error: String,
    /// The thread that made the bad access or free.
    pub tid: Tid,
    /// The address accessed or freed.
    pub addr: u32,
    /// Where the bad access or free happened, innermost first.
    pub stack: Vec<Frame>,
    /// The heap block involved, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<HeapBlockReport>,
}

/// A heap block in a memory error report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeapBlockReport {
    /// The block's first byte.
    pub start: u32,
    /// Its size in bytes, as requested.
    pub size: u32,
    /// The thread that allocated it.
    pub alloc_tid: Tid,
    /// `file:line` (or function) of the allocation call.
    pub alloc_site: String,
    /// The allocation's stack, innermost first.
    pub alloc_stack: Vec<Frame>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The thread that freed it, if it was freed.
    pub free_tid: Option<Tid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// `file:line` (or function) of the free call.
    pub free_site: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    /// The free's stack, innermost first.
    pub free_stack: Vec<Frame>,
}

impl MemoryVerdict {
    /// Where the allocation happened (the innermost user frame when stacks
    /// were captured, else the call site).
    pub fn alloc_where(&self) -> Option<String> {
        let b = self.block.as_ref()?;
        Some(if b.alloc_stack.is_empty() {
            b.alloc_site.clone()
        } else {
            top_user(&b.alloc_stack)
        })
    }

    /// Where the block was freed.
    pub fn free_where(&self) -> Option<String> {
        let b = self.block.as_ref()?;
        if !b.free_stack.is_empty() {
            return Some(top_user(&b.free_stack));
        }
        b.free_site.clone()
    }
}

impl Verdict {
    /// The verdict kind: `pass`, `assertion`, `trap`, `exit`, `deadlock`, `hang`.
    pub fn kind(&self) -> &'static str {
        match self {
            Verdict::Pass { .. } => "pass",
            Verdict::Assertion { .. } => "assertion",
            Verdict::Trap { .. } => "trap",
            Verdict::Panic { .. } => "panic",
            Verdict::Exit { .. } => "exit",
            Verdict::Deadlock { .. } => "deadlock",
            Verdict::Hang { .. } => "hang",
            Verdict::TooLong { .. } => "too-long",
            Verdict::Unsupported { .. } => "unsupported",
            Verdict::Race(_) => "data-race",
            Verdict::Memory(m) => match m.error.as_str() {
                "null-deref" => "null-deref",
                "use-after-free" => "use-after-free",
                "heap-overflow" => "heap-overflow",
                "double-free" => "double-free",
                _ => "invalid-free",
            },
        }
    }

    /// Whether the run passed.
    pub fn is_pass(&self) -> bool {
        matches!(self, Verdict::Pass { .. })
    }

    /// Whether the run neither passed nor failed: it was stopped before it
    /// could tell (the step budget ran out while threads made progress), or
    /// it needed what the target lacks (unsupported).
    pub fn is_inconclusive(&self) -> bool {
        matches!(self, Verdict::TooLong { .. } | Verdict::Unsupported { .. })
    }

    /// Whether the run found a bug (neither passed nor inconclusive).
    pub fn is_failure(&self) -> bool {
        !self.is_pass() && !self.is_inconclusive()
    }

    /// A stable signature: the kind plus the symbolized user-code sites
    /// involved, without thread ids, addresses or message values, so that the
    /// same bug found through different schedules deduplicates.
    pub fn signature(&self) -> String {
        match self {
            Verdict::Pass { .. } => "pass".into(),
            Verdict::Assertion { stack, .. } => format!("assertion@{}", top_user(stack)),
            Verdict::Trap { trap, stack, .. } => format!("trap:{trap}@{}", top_user(stack)),
            // The location, not the message: a message may hold values that
            // differ between schedules (`left: 2` or `left: 3`).
            Verdict::Panic { location, .. } => format!("panic@{location}"),
            Verdict::Exit { code, .. } => format!("exit:{code}"),
            Verdict::Deadlock { threads } => {
                // From what every run knows (not from stacks, which only
                // diagnostic runs capture), so fast and detailed runs agree.
                let mut at: Vec<String> = threads
                    .iter()
                    .map(|t| match &t.object {
                        Some(o) => format!("{o} at {}", t.waits_at),
                        None => t.waits_at.clone(),
                    })
                    .collect();
                at.sort();
                at.dedup();
                format!("deadlock@{}", at.join("|"))
            }
            Verdict::Hang { reason, .. } => format!("hang:{reason}"),
            Verdict::TooLong { .. } => "too-long".into(),
            Verdict::Unsupported { feature, .. } => format!("unsupported:{feature}"),
            Verdict::Race(r) => {
                let (a, b) = r.key();
                format!("data-race@{a}|{b}")
            }
            Verdict::Memory(m) => {
                // The access stack is always captured; allocation and free
                // stacks only in diagnostic runs, so their call sites are used.
                let mut s = format!("{}@{}", m.error, top_user(&m.stack));
                match &m.block {
                    Some(b) if b.free_site.is_some() => {
                        s.push_str(&format!(" freed@{}", b.free_site.as_deref().unwrap_or("?")))
                    }
                    Some(b) => s.push_str(&format!(" alloc@{}", b.alloc_site)),
                    None => {}
                }
                s
            }
        }
    }

    /// One line for humans.
    pub fn summary(&self) -> String {
        match self {
            Verdict::Pass { exit_code } => format!("pass (exit {exit_code})"),
            Verdict::Assertion {
                message,
                tid,
                stack,
            } => {
                format!(
                    "assertion failed in thread {tid} at {}: {message}",
                    top_user(stack)
                )
            }
            Verdict::Trap {
                trap,
                message,
                tid,
                stack,
            } => {
                format!(
                    "trap ({trap}) in thread {tid} at {}: {message}",
                    top_user(stack)
                )
            }
            Verdict::Panic {
                message,
                location,
                thread,
                tid,
                ..
            } => {
                let who = match thread {
                    Some(n) => format!("thread {tid} ({n})"),
                    None => format!("thread {tid}"),
                };
                let message: Vec<&str> = message
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect();
                format!("panic in {who} at {location}: {}", message.join("; "))
            }
            Verdict::Exit { code, expected } => format!("exit code {code} (expected {expected})"),
            Verdict::Deadlock { threads } => {
                let parts: Vec<String> = threads
                    .iter()
                    .map(|t| {
                        let who = match &t.name {
                            Some(n) => format!("thread {} ({n})", t.tid),
                            None => format!("thread {}", t.tid),
                        };
                        let mut s = format!("{who} waits at {}", top_user(&t.stack));
                        if let Some(o) = &t.object {
                            s.push_str(&format!(" for {o}"));
                        }
                        if let Some(owner) = t.owner {
                            s.push_str(&format!(" held by thread {owner}"));
                        }
                        for h in &t.holds {
                            let what = h.object.clone().unwrap_or_else(|| format!("{:#x}", h.addr));
                            s.push_str(&format!(", holding {what} (taken at {})", h.site));
                        }
                        s
                    })
                    .collect();
                format!("deadlock: {}", parts.join("; "))
            }
            Verdict::Race(r) => r.summary(),
            Verdict::Memory(m) => {
                let mut s = format!(
                    "{} in thread {} at {}: address {:#x}",
                    m.error,
                    m.tid,
                    top_user(&m.stack),
                    m.addr
                );
                if let Some(b) = &m.block {
                    s.push_str(&format!(
                        " in a block of {} bytes at {:#x} allocated by thread {} at {}",
                        b.size,
                        b.start,
                        b.alloc_tid,
                        m.alloc_where().unwrap_or_default()
                    ));
                    if let (Some(t), Some(f)) = (b.free_tid, m.free_where()) {
                        s.push_str(&format!(", freed by thread {t} at {f}"));
                    }
                }
                s
            }
            Verdict::TooLong { steps, threads } => {
                let running = threads.len();
                format!(
                    "run too long: {steps} steps and the threads still made progress \
                     ({running} unfinished; inconclusive, not a failure: raise --max-steps to let it finish)"
                )
            }
            Verdict::Hang { reason, threads } => {
                let hint = if reason.starts_with("livelock") || reason.starts_with("no progress") {
                    " (a thread that only needed longer: raise --hang-steps; the last steps: heddle show)"
                } else {
                    ""
                };
                format!("hang ({reason}): {}{hint}", threads_at(threads))
            }
            Verdict::Unsupported {
                reason, message, ..
            } => format!("unsupported: {reason} (inconclusive, not a failure; {message})"),
        }
    }
}

/// What a run may have exhausted, for the reason of an unsupported thread
/// spawn.
#[derive(Debug, Clone, Copy)]
pub struct SpawnLimits {
    /// Threads the run had started (the main thread included).
    pub threads: usize,
    /// The most threads heddle runs.
    pub max_threads: usize,
    /// The module's maximum linear memory, in 64 KiB pages.
    pub max_pages: u32,
}

/// The message of `std::io::ErrorKind::Unsupported` errors: what `std`
/// returns on `wasm32-wasip1-threads` for processes and other missing
/// parts of the platform.
pub const UNSUPPORTED_PLATFORM: &str = "operation not supported on this platform";

/// The panic `v` as [`Verdict::Unsupported`] when it shows that the program
/// needs what the target lacks, else `v` unchanged:
///
/// * *unwinding*: the panic happened inside `std::panic::catch_unwind`
///   called from user code — the program meant to catch it, and natively
///   would have (libtest's and `std`'s own `catch_unwind`s, around every
///   test and thread, do not count);
/// * *processes* (or another part of `std` the platform lacks): the panic's
///   message holds `operation not supported on this platform`, the error
///   `std::process::Command` returns here; the line it names decides
///   whether it was a process (`source_line` reads it);
/// * *threads*: `failed to spawn thread` with `WouldBlock` — heddle's
///   thread limit or the module's maximum memory (each thread's stack comes
///   from linear memory).
pub fn unsupported(
    v: Verdict,
    limits: SpawnLimits,
    source_line: &dyn Fn(&Frame) -> Option<String>,
) -> Verdict {
    let Verdict::Panic {
        message,
        tid,
        stack,
        ..
    } = &v
    else {
        return v;
    };
    let found = if let Some(at) = user_catch_unwind(stack) {
        Some((
            "unwinding",
            format!(
                "unwinding: the panic was to be caught (std::panic::catch_unwind in {at}), but \
                 the std of wasm32-wasip1-threads aborts on panic"
            ),
        ))
    } else if message.contains(UNSUPPORTED_PLATFORM) {
        let process = user_frame(stack)
            .and_then(source_line)
            .is_some_and(|l| l.contains("Command") || l.contains("process::"));
        Some(if process {
            (
                "processes",
                "spawning processes: std::process is not available on wasm32-wasip1-threads \
                 (\"operation not supported on this platform\")"
                    .to_string(),
            )
        } else {
            (
                "platform",
                "an operation std does not provide on wasm32-wasip1-threads \
                 (\"operation not supported on this platform\")"
                    .to_string(),
            )
        })
    } else if message.starts_with("failed to spawn thread") && message.contains("WouldBlock") {
        let why = if limits.threads >= limits.max_threads {
            format!(
                "heddle runs at most {} threads and the program had started {}",
                limits.max_threads, limits.threads
            )
        } else {
            format!(
                "no memory left for its stack: {} threads started, and linear memory is at most \
                 {} MiB",
                limits.threads,
                u64::from(limits.max_pages) * 64 / 1024
            )
        };
        Some(("threads", format!("spawning a thread: {why}")))
    } else {
        None
    };
    let Some((feature, reason)) = found else {
        return v;
    };
    Verdict::Unsupported {
        feature: feature.into(),
        reason,
        message: v.summary(),
        tid: *tid,
        stack: stack.clone(),
    }
}

/// Whether `f` is part of `std::panic::catch_unwind` (`std::panicking::try`
/// before Rust 1.88).
fn is_catch_frame(f: &Frame) -> bool {
    let Some(name) = f.function.as_deref() else {
        return false;
    };
    let name = name.split('<').next().unwrap_or(name);
    matches!(
        name.trim_end_matches("::"),
        "std::panic::catch_unwind"
            | "std::panicking::catch_unwind"
            | "std::panicking::catch_unwind::do_call"
            | "std::panicking::try"
            | "std::panicking::try::do_call"
            | "__rust_try"
    )
}

/// `function (file:line)` of the user-code caller of a `catch_unwind` on
/// `stack` (innermost first), if there is one.
fn user_catch_unwind(stack: &[Frame]) -> Option<String> {
    let mut i = 0;
    while i < stack.len() {
        if !is_catch_frame(&stack[i]) {
            i += 1;
            continue;
        }
        while i < stack.len() && is_catch_frame(&stack[i]) {
            i += 1;
        }
        let caller = stack.get(i)?;
        if caller
            .loc
            .as_ref()
            .is_some_and(|l| !is_library_unit(&l.file, ""))
        {
            return Some(top_user(std::slice::from_ref(caller)));
        }
    }
    None
}

/// Where threads are, briefly: the threads at the same site together, in
/// the order of their first thread (`threads 1–127 at stress.c:38 (127),
/// thread 0 at main.c:12`), at most [`MAX_SITE_GROUPS`] sites, then how
/// many threads are left out.
fn threads_at(threads: &[ThreadAt]) -> String {
    let mut groups: Vec<(&str, Vec<Tid>)> = Vec::new();
    for t in threads {
        match groups.iter_mut().find(|(site, _)| *site == t.site) {
            Some((_, tids)) => tids.push(t.tid),
            None => groups.push((&t.site, vec![t.tid])),
        }
    }
    let mut parts: Vec<String> = groups
        .iter()
        .take(MAX_SITE_GROUPS)
        .map(|(site, tids)| match tids.as_slice() {
            [t] => format!("thread {t} at {site}"),
            _ => format!("threads {} at {site} ({})", tid_ranges(tids), tids.len()),
        })
        .collect();
    if groups.len() > MAX_SITE_GROUPS {
        let rest = &groups[MAX_SITE_GROUPS..];
        let n: usize = rest.iter().map(|(_, t)| t.len()).sum();
        parts.push(format!(
            "and {n} more thread{} at {} other site{}",
            if n == 1 { "" } else { "s" },
            rest.len(),
            if rest.len() == 1 { "" } else { "s" }
        ));
    }
    parts.join(", ")
}

/// How many sites a hang's summary names.
const MAX_SITE_GROUPS: usize = 8;

/// `1–3, 7, 9–10` for thread ids in any order.
fn tid_ranges(tids: &[Tid]) -> String {
    let mut sorted = tids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        out.push(match j - i {
            0 => sorted[i].to_string(),
            1 => format!("{}, {}", sorted[i], sorted[j]),
            _ => format!("{}–{}", sorted[i], sorted[j]),
        });
        i = j + 1;
    }
    out.join(", ")
}

/// A Rust panic as the standard library prints it on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RustPanic {
    /// The thread's name (`main`, `<unnamed>`, …).
    pub thread: String,
    /// `file:line:col`.
    pub location: String,
    /// The message: every line after the header up to the `note:` lines
    /// std adds (or the end).
    pub message: String,
}

/// The last Rust panic message in `stderr`: a header `thread 'NAME' (ID)
/// panicked at FILE:LINE:COL:` (Rust 1.73 and later; the ` (ID)` since
/// 1.88), then the message. None when there is no such header.
pub fn rust_panic(stderr: &str) -> Option<RustPanic> {
    let lines: Vec<&str> = stderr.lines().collect();
    let (at, thread, location) = lines
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, l)| panic_header(l).map(|(t, loc)| (i, t, loc)))?;
    let mut message: Vec<&str> = Vec::new();
    for l in &lines[at + 1..] {
        if l.starts_with("note: ") || panic_header(l).is_some() {
            break;
        }
        message.push(l);
    }
    while message.last().is_some_and(|l| l.trim().is_empty()) {
        message.pop();
    }
    Some(RustPanic {
        thread,
        location,
        message: message.join("\n"),
    })
}

/// `(thread name, file:line:col)` of a panic header line.
fn panic_header(line: &str) -> Option<(String, String)> {
    let rest = line.strip_prefix("thread '")?;
    let (name, rest) = rest.split_once('\'')?;
    let rest = rest.trim_start();
    // ` (ID)` since Rust 1.88.
    let rest = match rest.strip_prefix('(') {
        Some(r) => r.split_once(')')?.1.trim_start(),
        None => rest,
    };
    let loc = rest.strip_prefix("panicked at ")?.strip_suffix(':')?;
    // FILE:LINE:COL, the file possibly holding colons itself.
    let mut parts = loc.rsplitn(3, ':');
    let (col, line_no) = (parts.next()?, parts.next()?);
    parts.next().filter(|f| !f.is_empty())?;
    if col.parse::<u32>().is_err() || line_no.parse::<u32>().is_err() {
        return None;
    }
    Some((name.to_string(), loc.to_string()))
}

/// The innermost frame of `stack` whose source is user code (not the
/// toolchain's libraries, Rust's `std` or a cargo registry crate).
pub fn user_frame(stack: &[Frame]) -> Option<&Frame> {
    stack.iter().find(|f| {
        f.loc
            .as_ref()
            .is_some_and(|l| !is_library_unit(&l.file, ""))
    })
}

/// The innermost frame in user code, as `function (file:line)`, falling back
/// to the innermost frame with any location, then `?`.
pub fn top_user(stack: &[Frame]) -> String {
    match user_frame(stack)
        .or_else(|| stack.iter().find(|f| f.loc.is_some()))
        .or(stack.first())
    {
        Some(f) => {
            let func = f.function.clone().unwrap_or_else(|| "?".into());
            match &f.loc {
                Some(l) => format!("{func} ({})", l.short()),
                None => func,
            }
        }
        None => "?".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_panic_messages_are_parsed() {
        let err = "thread 'main' (1) panicked at src/lib.rs:27:9:\n\
                   assertion `left == right` failed: lost update\n  left: 2\n right: 4\n\
                   note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        let p = rust_panic(err).unwrap();
        assert_eq!(p.thread, "main");
        assert_eq!(p.location, "src/lib.rs:27:9");
        assert_eq!(
            p.message,
            "assertion `left == right` failed: lost update\n  left: 2\n right: 4"
        );
        // Without the thread id (Rust before 1.88), a named thread, a path
        // with colons, and the last panic of several.
        let err = "noise\nthread '<unnamed>' panicked at /x/a:b.rs:3:4:\nfirst\n\
                   thread 'worker 1' panicked at C:/src/m.rs:10:5:\nboom";
        let p = rust_panic(err).unwrap();
        assert_eq!(p.thread, "worker 1");
        assert_eq!(p.location, "C:/src/m.rs:10:5");
        assert_eq!(p.message, "boom");
        assert_eq!(rust_panic("Assertion failed: x (a.c: f: 3)\n"), None);
        assert_eq!(rust_panic("thread 'main' panicked at nowhere:\n"), None);
    }

    #[test]
    fn a_user_frame_without_a_line_is_named_before_a_library_caller() {
        let frame = |function: &str, file: &str, line| Frame {
            function: Some(function.into()),
            loc: Some(crate::instrument::Loc {
                file: file.into(),
                line,
                col: 0,
            }),
            offset: None,
        };
        let stack = vec![
            frame("check", "src/check.c", 0),
            frame(
                "_start",
                "wasisdk://v30.0/src/wasi-libc/libc-bottom-half/crt/crt1-command.c",
                56,
            ),
        ];
        assert_eq!(top_user(&stack), "check (check.c)");
    }

    #[test]
    fn hang_summary_groups_threads_by_site() {
        let at = |tid, site: &str| ThreadAt {
            tid,
            site: site.into(),
        };
        let mut threads = vec![at(0, "main.c:12")];
        threads.extend((1..=127).map(|t| at(t, "stress.c:38")));
        threads.push(at(200, "stress.c:38"));
        threads.push(at(128, "worker.c:5"));
        let v = Verdict::Hang {
            reason: "step budget".into(),
            threads,
        };
        assert_eq!(
            v.summary(),
            "hang (step budget): thread 0 at main.c:12, threads 1–127, 200 at stress.c:38 (128), \
             thread 128 at worker.c:5"
        );
        let many: Vec<ThreadAt> = (0..12).map(|t| at(t, &format!("s.c:{}", t % 10))).collect();
        let s = Verdict::Hang {
            reason: "r".into(),
            threads: many,
        }
        .summary();
        assert!(
            s.ends_with("threads 0, 10 at s.c:0 (2), threads 1, 11 at s.c:1 (2), thread 2 at s.c:2, thread 3 at s.c:3, thread 4 at s.c:4, thread 5 at s.c:5, thread 6 at s.c:6, thread 7 at s.c:7, and 2 more threads at 2 other sites"),
            "{s}"
        );
    }

    #[test]
    fn panic_signature_is_its_location() {
        let v = |message: &str, tid| Verdict::Panic {
            message: message.into(),
            location: "src/lib.rs:27:9".into(),
            thread: Some("main".into()),
            tid,
            stack: vec![],
        };
        let (a, b) = (v("left: 2\nright: 4", 0), v("left: 3\nright: 4", 1));
        assert_eq!(a.kind(), "panic");
        assert_eq!(a.signature(), "panic@src/lib.rs:27:9");
        assert_eq!(a.signature(), b.signature());
        assert_eq!(
            a.summary(),
            "panic in thread 0 (main) at src/lib.rs:27:9: left: 2; right: 4"
        );
    }
}
