//! Deadlock rendering: the wait-for cycle (thread → lock → owner → …), then
//! each blocked thread with what it waits for, the locks it holds and the
//! line where it took each, and its stack.

use super::source::SourceCache;
use super::timeline::{is_library_file, Timeline};
use crate::model::Tid;
use crate::verdict::BlockedThread;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The wait-for cycle among `threads`, as tids in order, if there is one.
pub fn cycle(threads: &[BlockedThread]) -> Option<Vec<Tid>> {
    let owner: BTreeMap<Tid, Tid> = threads
        .iter()
        .filter_map(|t| t.owner.map(|o| (t.tid, o)))
        .collect();
    for start in threads.iter().map(|t| t.tid) {
        let mut path = vec![start];
        let mut cur = start;
        while let Some(&next) = owner.get(&cur) {
            if let Some(pos) = path.iter().position(|&t| t == next) {
                let mut c = path[pos..].to_vec();
                // Start the cycle at its lowest tid, for a stable picture.
                let min = c
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, t)| **t)
                    .map(|(i, _)| i)
                    .unwrap_or(0);
                c.rotate_left(min);
                return Some(c);
            }
            path.push(next);
            cur = next;
        }
    }
    None
}

fn object(t: &BlockedThread) -> String {
    t.object
        .clone()
        .unwrap_or_else(|| format!("[{:#x}]", t.addr))
}

/// `file:line` → the source line there.
fn source_at(src: &mut SourceCache, site: &str) -> Option<String> {
    let (file, line) = site.rsplit_once(':')?;
    src.line(file, line.parse().ok()?)
}

/// Draws the deadlock section.
pub fn render(
    tl: &Timeline,
    threads: &[BlockedThread],
    src: &mut SourceCache,
    all: bool,
) -> String {
    let mut out = String::new();
    let by_tid: BTreeMap<Tid, &BlockedThread> = threads.iter().map(|t| (t.tid, t)).collect();
    match cycle(threads) {
        Some(c) => {
            let names: Vec<String> = c.iter().map(|&t| tl.label(t)).collect();
            let _ = writeln!(out, "deadlock: {} wait for each other", join_and(&names));
            let mut chain = String::from("  ");
            for &t in &c {
                let b = by_tid[&t];
                let _ = write!(
                    chain,
                    "{} ─waits for─▶ {} ─held by─▶ ",
                    tl.label(t),
                    object(b)
                );
            }
            chain.push_str(&tl.label(c[0]));
            let _ = writeln!(out, "\n{chain}");
        }
        None => {
            let _ = writeln!(
                out,
                "deadlock: every unfinished thread waits, and no thread is left to wake it"
            );
        }
    }
    out.push('\n');
    let label_w = threads
        .iter()
        .map(|t| tl.label(t.tid).chars().count())
        .max()
        .unwrap_or(2);
    // At most `MAX_BLOCKED` (unless `all`), those of the cycle first.
    let in_cycle = cycle(threads).unwrap_or_default();
    let mut listed: Vec<&BlockedThread> = threads.iter().collect();
    let more = if all {
        0
    } else {
        listed.len().saturating_sub(MAX_BLOCKED)
    };
    if more > 0 {
        listed.sort_by_key(|t| !in_cycle.contains(&t.tid));
        listed.truncate(MAX_BLOCKED);
    }
    for t in listed {
        let label = tl.label(t.tid);
        let ind = " ".repeat(label_w + 4);
        let user = t
            .stack
            .iter()
            .find(|f| f.loc.as_ref().is_some_and(|l| !is_library_file(&l.file)));
        let at = user
            .and_then(|f| f.loc.as_ref())
            .map(|l| l.short())
            .unwrap_or_else(|| "?".into());
        let line = user
            .and_then(|f| f.loc.as_ref())
            .and_then(|l| src.line(&l.file, l.line))
            .unwrap_or_default();
        // What it waits for.
        let what = if t.owner.is_some() || t.object.is_some() {
            let mut s = format!("waits for {}", object(t));
            if let Some(o) = t.owner {
                let _ = write!(s, " (held by {})", tl.label(o));
            }
            s
        } else {
            // Not a lock: say which call it waits in (e.g. pthread_join T1).
            let last = tl.groups.iter().rev().find(|g| g.tid == t.tid);
            match last.map(|g| g.text.as_str()) {
                Some(x) if x.starts_with("join") => {
                    format!("waits in {}", x.split(';').next().unwrap_or(x))
                }
                _ => match library_call(t) {
                    Some(f) => format!("waits in {f}"),
                    None => "waits".to_string(),
                },
            }
        };
        let _ = writeln!(
            out,
            "  {}  {what}, at {at}{}",
            pad(&label, label_w),
            if line.is_empty() {
                String::new()
            } else {
                format!("   {line}")
            }
        );
        for h in &t.holds {
            let what = h
                .object
                .clone()
                .unwrap_or_else(|| format!("[{:#x}]", h.addr));
            let line = source_at(src, &h.site)
                .map(|l| format!("   {l}"))
                .unwrap_or_default();
            let _ = writeln!(out, "{ind}holds {what}, taken at {}{line}", h.site);
        }
        let _ = writeln!(out, "{ind}stack: {}", stack_line(&t.stack, all));
    }
    if more > 0 {
        let _ = writeln!(
            out,
            "  … and {more} more blocked threads (--all lists every one)"
        );
    }
    out
}

/// Blocked threads a deadlock section lists (without `--all`).
const MAX_BLOCKED: usize = 16;

/// A stack on one line, innermost first: `pthread_mutex_lock (library) ←
/// t1_main (deadlock_abba.c:33)`. Runs of library frames are shown as the
/// library function user code called, and the library frames that call
/// user code (thread start-up) are left out, unless `all`.
pub fn stack_line(stack: &[crate::instrument::Frame], all: bool) -> String {
    let is_user =
        |f: &crate::instrument::Frame| f.loc.as_ref().is_some_and(|l| !is_library_file(&l.file));
    let last_user = stack.iter().rposition(is_user);
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < stack.len() {
        let f = &stack[i];
        let name = f.name();
        if all {
            parts.push(format!("{name} ({})", f.place()));
            i += 1;
            continue;
        }
        if is_user(f) {
            let loc = f.loc.as_ref().map(|l| l.short()).unwrap_or_default();
            parts.push(format!("{} ({loc})", super::timeline::display_fn(name)));
            i += 1;
            continue;
        }
        if last_user.is_none_or(|u| i > u) {
            break;
        }
        // A run of library frames: the outermost is what user code called.
        let mut j = i;
        while j + 1 < stack.len() && !is_user(&stack[j + 1]) {
            j += 1;
        }
        let called = stack[j].name();
        parts.push(format!("{} (library)", super::timeline::display_fn(called)));
        i = j + 1;
    }
    if parts.is_empty() {
        "?".into()
    } else {
        parts.join(" ← ")
    }
}

/// The library function a blocked thread's user code called.
fn library_call(t: &BlockedThread) -> Option<String> {
    let u = t
        .stack
        .iter()
        .position(|f| f.loc.as_ref().is_some_and(|l| !is_library_file(&l.file)))?;
    let f = t.stack.get(u.checked_sub(1)?)?.function.as_deref()?;
    Some(super::timeline::display_fn(f))
}

fn pad(s: &str, w: usize) -> String {
    format!("{s}{}", " ".repeat(w.saturating_sub(s.chars().count())))
}

fn join_and(v: &[String]) -> String {
    match v.len() {
        0 => String::new(),
        1 => v[0].clone(),
        _ => format!("{} and {}", v[..v.len() - 1].join(", "), v[v.len() - 1]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bt(tid: Tid, owner: Option<Tid>) -> BlockedThread {
        BlockedThread {
            tid,
            name: None,
            addr: 16 * tid,
            object: Some(format!("lock{tid}")),
            owner,
            holds: Vec::new(),
            stack: Vec::new(),
            waits_at: String::new(),
        }
    }

    #[test]
    fn finds_the_cycle_from_its_lowest_thread() {
        let ts = vec![bt(0, None), bt(2, Some(1)), bt(1, Some(2))];
        assert_eq!(cycle(&ts), Some(vec![1, 2]));
        assert_eq!(cycle(&[bt(1, Some(2)), bt(2, None)]), None);
        assert_eq!(
            join_and(&["a".into(), "b".into(), "c".into()]),
            "a, b and c"
        );
    }
}
