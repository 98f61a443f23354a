//! Failures as SARIF 2.1.0 (`--sarif FILE`), the format code-scanning
//! services read, and as GitHub Actions `::error` annotations.
//!
//! One result per failure: the rule is the verdict kind (`heddle/deadlock`),
//! the location is the failing step's `file:line`, and the interleaving is a
//! code flow with one thread flow per guest thread, whose locations carry a
//! global `executionOrder` (the order the steps ran in). The replay command
//! and the seed are result properties; the verdict signature is the
//! fingerprint, so the same bug found again is the same alert.

use super::timeline::{Group, Timeline};
use crate::instrument::dwarf::Loc;
use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// The schema a SARIF file names.
pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// Interleaving steps kept per code flow (the last ones: nearest the failure).
const MAX_FLOW_STEPS: usize = 1000;

/// One failure to report.
pub struct Finding<'a> {
    /// The failing run, as a timeline.
    pub timeline: &'a Timeline,
    /// The target as given (`targets/race_bank.c`).
    pub target: String,
    /// The seed of the run, when it has one.
    pub seed: Option<u64>,
    /// Why it fails when its verdict is a pass (a broken invariant).
    pub reason: Option<String>,
    /// The command that replays it.
    pub replay_command: Option<String>,
    /// Where source files named by DWARF are looked for.
    pub source_dirs: Vec<PathBuf>,
}

impl Finding<'_> {
    /// The verdict kind (`expectation` for a passing run that broke an
    /// invariant).
    fn kind(&self) -> &'static str {
        match (&self.reason, self.timeline.verdict.is_pass()) {
            (Some(_), true) => "expectation",
            _ => self.timeline.verdict.kind(),
        }
    }

    /// One line on what failed.
    fn summary(&self) -> String {
        match (&self.reason, self.timeline.verdict.is_pass()) {
            (Some(r), true) => r.clone(),
            _ => self.timeline.verdict.summary(),
        }
    }

    /// What identifies the bug across runs.
    fn signature(&self) -> String {
        match (&self.reason, self.timeline.verdict.is_pass()) {
            (Some(r), true) => format!("expectation: {r}"),
            _ => self.timeline.verdict.signature(),
        }
    }
}

/// What a rule says about a verdict kind.
fn rule_text(kind: &str) -> &'static str {
    match kind {
        "assertion" => "An assertion failed under some thread interleaving.",
        "panic" => "A Rust panic under some thread interleaving.",
        "deadlock" => "Every unfinished thread is blocked: a deadlock.",
        "hang" => "A run did not finish within its step budget (a livelock or an endless wait).",
        "trap" => "The program trapped (abort, unreachable, an invalid access).",
        "exit" => "The program exited with an unexpected code.",
        "data-race" => {
            "Two threads access the same memory, at least one writes, and nothing orders them."
        }
        "use-after-free" => "Memory was used after it was freed.",
        "double-free" => "Memory was freed twice.",
        "heap-overflow" => "An access past the end of a heap block.",
        "null-deref" => "A null pointer was dereferenced.",
        "invalid-free" => "free() of a pointer malloc did not return.",
        "expectation" => "A value invariant did not hold at the end of a run.",
        _ => "A concurrency failure found by heddle.",
    }
}

/// A location's file as a SARIF artifact location: relative to the
/// current directory (the checkout root in CI) when the file is there,
/// else an absolute `file://` URI, else the name DWARF gave.
fn artifact(file: &str, dirs: &[PathBuf]) -> Value {
    let found = locate(file, dirs);
    let cwd = std::env::current_dir().ok();
    if let Some(p) = found {
        let rel = if p.is_absolute() {
            cwd.as_ref()
                .and_then(|c| p.strip_prefix(c).ok())
                .map(Path::to_path_buf)
        } else {
            Some(p.clone())
        };
        if let Some(rel) = rel {
            return json!({ "uri": uri_path(&normalize(&rel)), "uriBaseId": "%SRCROOT%" });
        }
        return json!({ "uri": format!("file://{}", uri_path(&p)) });
    }
    json!({ "uri": uri_path(&normalize(Path::new(file))) })
}

/// The file DWARF names, found as it is or in `dirs`.
fn locate(file: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    let p = Path::new(file);
    if p.is_file() {
        return Some(p.to_path_buf());
    }
    let name = p.file_name()?;
    dirs.iter()
        .flat_map(|d| [d.join(p), d.join(name)])
        .find(|c| c.is_file())
}

/// `./a/./b.c` → `a/b.c`.
fn normalize(p: &Path) -> PathBuf {
    p.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// A path as URI text: `/` separators, spaces and `%` escaped.
fn uri_path(p: &Path) -> String {
    p.to_string_lossy()
        .replace('\\', "/")
        .replace('%', "%25")
        .replace(' ', "%20")
}

fn physical(loc: &Loc, dirs: &[PathBuf]) -> Value {
    json!({
        "artifactLocation": artifact(&loc.file, dirs),
        "region": { "startLine": loc.line.max(1) }
    })
}

/// The group a result points at: the failing step; for a deadlock, the
/// last user step of the first thread that waits for a lock another holds
/// (not, say, `main` waiting in a join); else the last user step with a
/// location.
fn primary(tl: &Timeline) -> Option<&Group> {
    let last_user = |tid: Option<crate::model::Tid>| {
        tl.groups
            .iter()
            .rev()
            .find(|g| !g.lib && g.loc.is_some() && tid.is_none_or(|t| g.tid == t))
    };
    let in_cycle = match &tl.verdict {
        crate::verdict::Verdict::Deadlock { threads } => {
            threads.iter().find(|b| b.owner.is_some()).map(|b| b.tid)
        }
        _ => None,
    };
    tl.failing
        .and_then(|i| tl.groups.get(i))
        .filter(|g| g.loc.is_some())
        .or_else(|| in_cycle.and_then(|t| last_user(Some(t))))
        .or_else(|| last_user(None))
}

/// The steps of the interleaving worth showing: user-code rows that touch
/// shared data, synchronize, block, or carry a mark.
fn flow_steps(tl: &Timeline) -> Vec<&Group> {
    let steps: Vec<&Group> = tl
        .groups
        .iter()
        .filter(|g| g.loc.is_some() && (g.interesting || !g.marks.is_empty()))
        .collect();
    let skip = steps.len().saturating_sub(MAX_FLOW_STEPS);
    steps.into_iter().skip(skip).collect()
}

/// One step's message: `T1 depositor: W balance = 3 (preempted)`.
fn step_text(tl: &Timeline, g: &Group) -> String {
    let mut s = format!("{}: ", tl.label(g.tid));
    if g.text.is_empty() {
        s.push_str(g.function.as_deref().unwrap_or("step"));
    } else {
        s.push_str(&g.text);
    }
    let marks: Vec<&str> = g.marks.iter().map(|m| m.name()).collect();
    if !marks.is_empty() {
        s.push_str(&format!(" [{}]", marks.join(", ")));
    }
    s
}

fn result(f: &Finding, rule_index: usize) -> Value {
    let tl = f.timeline;
    let kind = f.kind();
    let mut r = json!({
        "ruleId": format!("heddle/{kind}"),
        "ruleIndex": rule_index,
        "level": "error",
        "message": { "text": f.summary() },
        "partialFingerprints": { "heddleSignature/v1": f.signature() },
        "properties": {
            "target": f.target,
            "signature": f.signature(),
        }
    });
    if let Some(seed) = f.seed {
        r["properties"]["seed"] = json!(seed);
    }
    if let Some(c) = &f.replay_command {
        r["properties"]["replayCommand"] = json!(c);
        r["message"]["text"] = json!(format!("{} (replay: {c})", f.summary()));
    }
    if let Some(loc) = primary(tl).and_then(|g| g.loc.as_ref()) {
        r["locations"] = json!([{ "physicalLocation": physical(loc, &f.source_dirs) }]);
    }
    let steps = flow_steps(tl);
    if !steps.is_empty() {
        let mut by_thread: BTreeMap<u32, Vec<Value>> = BTreeMap::new();
        for (order, g) in steps.iter().enumerate() {
            let Some(loc) = &g.loc else { continue };
            by_thread.entry(g.tid).or_default().push(json!({
                "location": {
                    "physicalLocation": physical(loc, &f.source_dirs),
                    "message": { "text": step_text(tl, g) }
                },
                "executionOrder": order + 1,
                "importance": if g.marks.is_empty() { "unimportant" } else { "essential" }
            }));
        }
        let flows: Vec<Value> = by_thread
            .into_iter()
            .map(|(tid, locations)| {
                json!({
                    "id": format!("T{tid}"),
                    "message": { "text": tl.label(tid) },
                    "locations": locations
                })
            })
            .collect();
        let all_steps = tl
            .groups
            .iter()
            .filter(|g| g.loc.is_some() && (g.interesting || !g.marks.is_empty()))
            .count();
        let mut message = "the interleaving that fails, one thread flow per thread; executionOrder is the order the steps ran in".to_string();
        if !tl.gaps.is_empty() || all_steps > steps.len() {
            let gap_steps: u64 = tl.gap_steps();
            message.push_str(&format!(
                " (a long run: {gap_steps} steps left out, and {} earlier steps worth showing; `heddle show` on the replay file draws more)",
                all_steps - steps.len()
            ));
            r["properties"]["elidedSteps"] = json!(gap_steps);
        }
        r["codeFlows"] = json!([{
            "message": { "text": message },
            "threadFlows": flows
        }]);
    }
    r
}

/// The SARIF log of `findings`.
pub fn log(findings: &[Finding]) -> Value {
    let mut kinds: Vec<&str> = findings.iter().map(|f| f.kind()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let rules: Vec<Value> = kinds
        .iter()
        .map(|k| {
            json!({
                "id": format!("heddle/{k}"),
                "name": k,
                "shortDescription": { "text": rule_text(k) },
                "defaultConfiguration": { "level": "error" },
                "properties": { "tags": ["concurrency"] }
            })
        })
        .collect();
    let results: Vec<Value> = findings
        .iter()
        .map(|f| {
            let kind = f.kind();
            result(f, kinds.iter().position(|k| *k == kind).unwrap_or(0))
        })
        .collect();
    json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "heddle",
                    "semanticVersion": env!("CARGO_PKG_VERSION"),
                    "rules": rules
                }
            },
            "results": results,
            "columnKind": "unicodeCodePoints"
        }]
    })
}

/// Writes the SARIF log of `findings` (an empty `results` list when there
/// are none, so that a scanning service closes earlier alerts).
pub fn write(path: &Path, findings: &[Finding]) -> Result<()> {
    let text = serde_json::to_string_pretty(&log(findings))?;
    crate::paths::write_atomic(path, text.as_bytes())
        .with_context(|| format!("{}: cannot write", path.display()))
}

/// GitHub Actions escaping of a workflow command's message.
fn gh_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// GitHub Actions escaping of a workflow command's property.
fn gh_property(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// The `::error file=…,line=…,title=…::message` line of a finding.
pub fn annotation(f: &Finding) -> String {
    let tl = f.timeline;
    let mut props = Vec::new();
    if let Some(loc) = primary(tl).and_then(|g| g.loc.as_ref()) {
        let file = artifact(&loc.file, &f.source_dirs)["uri"]
            .as_str()
            .unwrap_or(&loc.file)
            .trim_start_matches("file://")
            .to_string();
        props.push(format!("file={}", gh_property(&file)));
        props.push(format!("line={}", loc.line.max(1)));
    }
    props.push(format!(
        "title={}",
        gh_property(&format!("heddle: {}", f.kind()))
    ));
    let mut msg = f.summary();
    if let Some(c) = &f.replay_command {
        msg.push_str(&format!("\nreplay: {c}"));
    }
    format!("::error {}::{}", props.join(","), gh_data(&msg))
}

/// Whether the process runs in GitHub Actions (`GITHUB_ACTIONS=true`).
pub fn in_github_actions() -> bool {
    std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_escaping() {
        assert_eq!(gh_data("50%\nnext"), "50%25%0Anext");
        assert_eq!(gh_property("a:b,c"), "a%3Ab%2Cc");
        assert_eq!(normalize(Path::new("././t/x.c")), PathBuf::from("t/x.c"));
        assert_eq!(uri_path(Path::new("a b/%.c")), "a%20b/%25.c");
    }
}
