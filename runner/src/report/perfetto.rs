//! A run's timeline in the Chrome trace-event JSON format, which Perfetto
//! (ui.perfetto.dev) and `chrome://tracing` open (`heddle show FILE
//! --perfetto OUT.json`).
//!
//! Time is the run's step counter: one step is one microsecond, so the
//! trace is as deterministic as the run. Each guest thread is a track
//! (`tid` = guest thread id + 1, named by `thread_name` metadata); each
//! stretch of steps one thread ran without a switch is a complete slice
//! (`ph: "X"`) named after the user function it ran in; accesses to shared
//! data, lock operations, waits, spawns and joins are instant events
//! (`ph: "i"`) with `file:line` in their args; the failing step is a
//! process-wide instant event named after the verdict.

use super::timeline::{Ev, Timeline};
use crate::model::EventKind;
use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::path::Path;

/// The one process of the trace.
const PID: u32 = 1;

/// The track id of guest thread `tid` (0 is not used as a tid).
fn track(tid: u32) -> u32 {
    tid + 1
}

/// The instant-event category of an event worth marking, if it is one.
fn category(e: &Ev) -> Option<&'static str> {
    Some(match e.ev.kind {
        EventKind::Lock | EventKind::Acquire | EventKind::Unlock => "lock",
        EventKind::Wait | EventKind::CondWait | EventKind::Wake | EventKind::Notify => "wait",
        EventKind::Spawn | EventKind::Join | EventKind::Start | EventKind::Exit => "thread",
        k if k.is_access() && e.shared && !e.lib => "access",
        EventKind::Label | EventKind::Choose => "label",
        _ => return None,
    })
}

fn args(e: &Ev) -> Value {
    let mut a = json!({ "step": e.ev.step });
    if let Some(l) = &e.loc {
        a["file:line"] = json!(l.display());
    }
    if let Some(f) = &e.function {
        a["function"] = json!(f);
    }
    if let Some(v) = &e.var {
        a["variable"] = json!(v);
    }
    if e.ev.preempted {
        a["preempted"] = json!(true);
    }
    a
}

/// The trace of a timeline, as a JSON object with `traceEvents`.
pub fn trace(tl: &Timeline, title: &str) -> Value {
    let mut out: Vec<Value> = vec![json!({
        "name": "process_name", "ph": "M", "pid": PID, "tid": 0,
        "args": { "name": format!("heddle: {title}") }
    })];
    for t in &tl.threads {
        out.push(json!({
            "name": "thread_name", "ph": "M", "pid": PID, "tid": track(t.tid),
            "args": { "name": t.label }
        }));
        out.push(json!({
            "name": "thread_sort_index", "ph": "M", "pid": PID, "tid": track(t.tid),
            "args": { "sort_index": t.tid }
        }));
    }
    // Slices: maximal stretches of consecutive events of one thread. A
    // slice lasts from its first step to the step the next one starts at
    // (its own last step + 1 for the last slice).
    // Two events of different threads can share a step (a wake-up is
    // recorded at the step of the switch): a slice then starts where the
    // previous one ended, so that tracks never overlap.
    let evs = &tl.events;
    let mut cursor = 0u64;
    let mut i = 0;
    while i < evs.len() {
        let tid = evs[i].ev.tid;
        let mut j = i;
        while j + 1 < evs.len() && evs[j + 1].ev.tid == tid {
            j += 1;
        }
        let start = evs[i].ev.step.max(cursor);
        let end = evs
            .get(j + 1)
            .map(|n| n.ev.step)
            .unwrap_or(evs[j].ev.step + 1)
            .max(start + 1);
        cursor = end;
        let name = evs[i..=j]
            .iter()
            .find(|e| !e.lib)
            .and_then(|e| e.function.clone())
            .unwrap_or_else(|| "library".into());
        let mut a = args(&evs[i]);
        a["events"] = json!(j - i + 1);
        out.push(json!({
            "name": name, "cat": "run", "ph": "X", "pid": PID, "tid": track(tid),
            "ts": start, "dur": end - start, "args": a
        }));
        i = j + 1;
    }
    for e in evs {
        if let Some(cat) = category(e) {
            let name = if e.text.is_empty() {
                format!("{:?}", e.ev.kind).to_lowercase()
            } else {
                e.text.clone()
            };
            out.push(json!({
                "name": name, "cat": cat, "ph": "i", "s": "t", "pid": PID,
                "tid": track(e.ev.tid), "ts": e.ev.step, "args": args(e)
            }));
        }
    }
    if !tl.verdict.is_pass() {
        let at = tl
            .failing
            .and_then(|g| tl.groups.get(g))
            .map(|g| (g.tid, g.last_step, g.loc.clone()))
            .or_else(|| evs.last().map(|e| (e.ev.tid, e.ev.step, e.loc.clone())));
        if let Some((tid, step, loc)) = at {
            let mut a = json!({ "verdict": tl.verdict.summary(), "step": step });
            if let Some(l) = loc {
                a["file:line"] = json!(l.display());
            }
            out.push(json!({
                "name": format!("FAIL: {}", tl.verdict.kind()), "cat": "verdict",
                "ph": "i", "s": "p", "pid": PID, "tid": track(tid), "ts": step, "args": a
            }));
        }
    }
    json!({
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "otherData": {
            "producer": format!("heddle {}", env!("CARGO_PKG_VERSION")),
            "verdict": tl.verdict.summary(),
            "time": "1 us = 1 scheduling step"
        }
    })
}

/// Writes the trace of `tl` to `path`.
pub fn write(path: &Path, tl: &Timeline, title: &str) -> Result<()> {
    let text = serde_json::to_string(&trace(tl, title))?;
    crate::paths::write_atomic(path, text.as_bytes())
        .with_context(|| format!("{}: cannot write", path.display()))
}
