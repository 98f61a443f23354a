//! Schedule plans (after REINS, Zhang/Pasareanu/Yang 2026): ordering and
//! state constraints over events, parsed from TOML and validated against a
//! module before anything runs.
//!
//! ```toml
//! hypothesis = "the executor takes cache_lock only after the invalidator erased the block"
//! bug = "trap"          # the verdict kind that means "triggered" (default: any failure)
//! stall_budget = 5000   # decisions that may hold a thread without progress
//!
//! [[order]]             # e1
//! thread = "invalidator" # a heddle_thread_name, or a spawn index (0 = main)
//! kind = "unlock"
//! var = "cache_lock"
//!
//! [[order]]             # e2: after e1
//! thread = "executor"
//! kind = "lock"
//! var = "cache_lock"
//! when = ["executed == 0"]  # state constraint: must hold when e2 happens
//! ```
//!
//! An event names a thread, a site (`at`: `file:line`, `function` or
//! `function+k`), a `heddle_event` label, an access kind, a variable the event
//! touches and an occurrence (`nth`); every part is optional and they combine.
//! The strategy that follows a plan is [`crate::sched::plan`].

use crate::instrument::dwarf::short_file;
use crate::instrument::{SiteKind, SiteTable};
use crate::model::{EventKind, Pending, Tid, NO_SITE};
use crate::text::nearest;
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;

/// Default number of stalled decisions before a plan is abandoned.
pub const DEFAULT_STALL_BUDGET: u64 = 5000;

/// A plan file as written.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// The bug hypothesis the plan encodes (for humans and reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypothesis: Option<String>,
    /// Verdict kind that counts as "triggered" (`trap`, `assertion`,
    /// `deadlock`, `use-after-free`, …); by default any failing verdict
    /// other than a hang.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bug: Option<String>,
    /// Program arguments (`argv[1..]`) the plan is written for; command-line
    /// arguments after `--` replace them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Decisions at which the plan may hold a thread without the next
    /// constraint happening before the remaining constraints are abandoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_budget: Option<u64>,
    /// The ordering constraints e1 ≺ e2 ≺ … in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<EventSpec>,
}

/// A thread as a plan names it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ThreadSpec {
    /// Spawn index: 0 is main, then threads in creation order.
    Index(u32),
    /// The name the thread gave itself with `heddle_thread_name`.
    Name(String),
}

/// One event of a plan as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    /// A short name for reports (default `e<i>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The thread (spawn index or name; default any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<ThreadSpec>,
    /// `file:line`, `function` or `function+k` (k lines below the function's
    /// first line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// A `heddle_event` label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `read`, `write`, `rmw`, `access`, `lock`, `unlock`, `cond-wait`,
    /// `join`, `wait`, `notify`, `call`, `label`, `yield` or `any`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A global (by name, or `0xADDR[:size]`) the event must touch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub var: Option<String>,
    /// Which occurrence (1 = the first time the thread does this event);
    /// by default the next one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nth: Option<u32>,
    /// State constraint: predicates `var OP value` that must all hold when
    /// the event happens (OP is ==, !=, <, <=, >, >=).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub when: Vec<String>,
}

/// Which thread an event belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadMatch {
    /// Any thread.
    Any,
    /// The thread with this spawn index.
    Tid(Tid),
    /// The thread that named itself so.
    Name(String),
}

/// A comparison operator of a predicate.
pub use crate::text::Cmp as Op;

/// `var OP value` on guest memory, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Predicate {
    /// As written.
    pub text: String,
    /// Address of the variable (plus offset).
    pub addr: u32,
    /// Bytes (1..=8): the variable is read as a signed little-endian integer.
    pub size: u32,
    /// The comparison.
    pub op: Op,
    /// The value compared with.
    pub value: i64,
}

impl Predicate {
    /// Evaluates the predicate on a raw little-endian read of `size` bytes.
    pub fn holds(&self, raw: Option<u64>) -> bool {
        let Some(v) = raw else { return false };
        let shift = 64 - 8 * self.size;
        let v = ((v << shift) as i64) >> shift;
        self.op.holds(v, self.value)
    }
}

/// One event of a validated plan.
#[derive(Debug, Clone)]
pub struct PlanEvent {
    /// `e<i>` or the given name.
    pub name: String,
    /// What the event is, in words (for reports).
    pub text: String,
    /// Whose event it is.
    pub thread: ThreadMatch,
    /// Allowed sites, by id (None: any site).
    pub sites: Option<Vec<bool>>,
    /// Allowed event kinds.
    pub kinds: Vec<EventKind>,
    /// Address range `[lo, hi)` the event must touch.
    pub range: Option<(u32, u32)>,
    /// The `heddle_event` label it must carry.
    pub label: Option<String>,
    /// Which occurrence (None: the next one).
    pub nth: Option<u32>,
    /// The state constraint φ (empty: none).
    pub when: Vec<Predicate>,
}

impl PlanEvent {
    /// Whether `tid` performing `p` is this event, occurrence aside.
    /// `name` and `label` give the thread's name and latest label.
    pub fn matches(
        &self,
        tid: Tid,
        p: &Pending,
        name: impl FnOnce() -> Option<String>,
        label: impl FnOnce() -> Option<String>,
    ) -> bool {
        if !self.kinds.contains(&p.kind) {
            return false;
        }
        if let Some(sites) = &self.sites {
            if p.site == NO_SITE || !sites.get(p.site as usize).copied().unwrap_or(false) {
                return false;
            }
        }
        if let Some((lo, hi)) = self.range {
            let end = p.addr.saturating_add(p.len.max(1));
            if !(p.addr < hi && end > lo) {
                return false;
            }
        }
        match &self.thread {
            ThreadMatch::Any => {}
            ThreadMatch::Tid(t) if *t != tid => return false,
            ThreadMatch::Tid(_) => {}
            ThreadMatch::Name(n) => {
                if name().as_deref() != Some(n.as_str()) {
                    return false;
                }
            }
        }
        if let Some(l) = &self.label {
            if label().as_deref() != Some(l.as_str()) {
                return false;
            }
        }
        true
    }
}

/// A validated plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The file stem, for reports and file names.
    pub name: String,
    /// The hypothesis it encodes.
    pub hypothesis: Option<String>,
    /// The verdict kind that counts as triggered.
    pub bug: Option<String>,
    /// Program arguments it is written for.
    pub args: Option<Vec<String>>,
    /// Stalled decisions before the remaining constraints are abandoned.
    pub stall_budget: u64,
    /// S, in order.
    pub events: Vec<PlanEvent>,
}

impl Plan {
    /// Number of state constraints (events with a `when`).
    pub fn state_constraints(&self) -> usize {
        self.events.iter().filter(|e| !e.when.is_empty()).count()
    }
}

/// What runs of the target showed, for validating names that only exist
/// at run time.
#[derive(Debug, Clone, Default)]
pub struct Known<'a> {
    /// Most threads a probe run created.
    pub threads: u32,
    /// Thread names seen (sorted, distinct).
    pub thread_names: Vec<String>,
    /// `heddle_event` labels seen (sorted, distinct).
    pub labels: Vec<String>,
    /// The original module, whose data may hold names the probes missed.
    pub module: &'a [u8],
}

impl Known<'_> {
    fn in_module(&self, s: &str) -> bool {
        let mut needle = s.as_bytes().to_vec();
        needle.push(0);
        self.module.windows(needle.len()).any(|w| w == needle)
    }
}

/// Reads and parses a plan file (syntax only).
pub fn load_file(path: &Path) -> Result<PlanFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse_file(&text).with_context(|| format!("{}", path.display()))
}

/// Parses plan text (syntax only).
pub fn parse_file(text: &str) -> Result<PlanFile> {
    let f: PlanFile = toml::from_str(text).map_err(|e| {
        let msg = e.message().to_string();
        match e.span() {
            Some(sp) => {
                let line = text[..sp.start.min(text.len())].matches('\n').count() + 1;
                anyhow!("bad plan (line {line}): {msg}")
            }
            None => anyhow!("bad plan: {msg}"),
        }
    })?;
    if f.order.is_empty() {
        bail!("bad plan: no [[order]] events");
    }
    Ok(f)
}

/// Validates `file` against the module's sites and symbols and what probe
/// runs showed: every site, variable, thread and label must exist; an
/// unknown one is an error naming it and the nearest existing ones.
pub fn validate(name: &str, file: &PlanFile, sites: &SiteTable, known: &Known) -> Result<Plan> {
    let mut events = Vec::new();
    for (i, spec) in file.order.iter().enumerate() {
        let ev = resolve_event(i, spec, sites, known)
            .with_context(|| format!("order[{i}] (e{})", i + 1))?;
        events.push(ev);
    }
    if let Some(b) = &file.bug {
        const KINDS: &[&str] = &[
            "assertion",
            "panic",
            "trap",
            "exit",
            "deadlock",
            "hang",
            "data-race",
            "null-deref",
            "use-after-free",
            "double-free",
            "invalid-free",
            "heap-overflow",
        ];
        if !KINDS.contains(&b.as_str()) {
            bail!(
                "unknown bug kind `{b}`; nearest: {}",
                nearest(b, KINDS, 3).join(", ")
            );
        }
    }
    Ok(Plan {
        name: name.to_string(),
        hypothesis: file.hypothesis.clone(),
        bug: file.bug.clone(),
        args: file.args.clone(),
        stall_budget: file.stall_budget.unwrap_or(DEFAULT_STALL_BUDGET),
        events,
    })
}

/// The event kinds of a plan `kind`, and the site kind it requires.
fn kind_set(kind: &str) -> Option<(Vec<EventKind>, Option<SiteKind>)> {
    // (Allocator and pthread_create calls are not yield points, so no kind
    // names them: plan around the accesses next to them instead.)
    use EventKind as K;
    Some(match kind {
        "read" => (vec![K::Read], None),
        "write" => (vec![K::Write], None),
        "rmw" => (vec![K::Rmw, K::Cmpxchg], None),
        "access" => (
            vec![K::Read, K::Write, K::Rmw, K::Cmpxchg, K::Copy, K::Fill],
            None,
        ),
        "lock" => (vec![K::Lock], None),
        "unlock" => (vec![K::Unlock], None),
        "cond-wait" => (vec![K::CondWait], None),
        "join" => (vec![K::Join], None),
        "wait" => (vec![K::Wait], None),
        "notify" => (vec![K::Notify], None),
        "call" => (vec![K::Call], None),
        "label" => (vec![K::Label], None),
        "yield" => (vec![K::Yield], None),
        "any" => (
            vec![
                K::Read,
                K::Write,
                K::Rmw,
                K::Cmpxchg,
                K::Wait,
                K::Notify,
                K::Fence,
                K::Copy,
                K::Fill,
                K::Call,
                K::Yield,
                K::Label,
                K::Lock,
                K::Unlock,
                K::CondWait,
                K::Join,
            ],
            None,
        ),
        _ => return None,
    })
}

const KIND_NAMES: &[&str] = &[
    "read",
    "write",
    "rmw",
    "access",
    "lock",
    "unlock",
    "cond-wait",
    "join",
    "wait",
    "notify",
    "call",
    "label",
    "yield",
    "any",
];

fn resolve_event(
    i: usize,
    spec: &EventSpec,
    sites: &SiteTable,
    known: &Known,
) -> Result<PlanEvent> {
    let kind_name = spec.kind.clone().unwrap_or_else(|| {
        if spec.label.is_some() {
            "label".into()
        } else if spec.var.is_some() {
            "access".into()
        } else {
            "any".into()
        }
    });
    let (kinds, site_kind) = kind_set(&kind_name).ok_or_else(|| {
        anyhow!(
            "unknown kind `{kind_name}`; nearest: {}",
            nearest(&kind_name, KIND_NAMES, 3).join(", ")
        )
    })?;
    let mut words = Vec::new();
    let thread = match &spec.thread {
        None => ThreadMatch::Any,
        Some(ThreadSpec::Index(t)) => {
            if *t >= known.threads.max(1) {
                bail!(
                    "unknown thread {t}: runs of this target create threads 0..{} (0 is main)",
                    known.threads.max(1) - 1
                );
            }
            words.push(format!("thread {t}"));
            ThreadMatch::Tid(*t)
        }
        Some(ThreadSpec::Name(n)) => {
            if !known.thread_names.contains(n) && !known.in_module(n) {
                let names: Vec<&str> = known.thread_names.iter().map(|s| s.as_str()).collect();
                if names.is_empty() {
                    bail!("unknown thread `{n}` (no thread named itself in the probe runs, and the module holds no such string)");
                }
                bail!(
                    "unknown thread `{n}`; nearest: {}",
                    nearest(n, &names, 5).join(", ")
                );
            }
            words.push(n.clone());
            ThreadMatch::Name(n.clone())
        }
    };
    words.push(kind_name.clone());
    // Sites allowed by `at`, then narrowed by the kind.
    let mut allowed: Option<BTreeSet<u32>> = match &spec.at {
        None => None,
        Some(at) => Some(resolve_at(at, sites)?),
    };
    let fits_kind = |id: u32| -> bool {
        let s = &sites.sites[id as usize];
        if let Some(k) = site_kind {
            return s.kind == k;
        }
        let ek = EventKind::from_site(s.kind);
        kinds.contains(&ek)
    };
    if let Some(set) = &allowed {
        let fit: BTreeSet<u32> = set.iter().copied().filter(|&id| fits_kind(id)).collect();
        if fit.is_empty() {
            let mut have: Vec<&str> = set
                .iter()
                .map(|&id| sites.sites[id as usize].kind.label())
                .collect();
            have.sort();
            have.dedup();
            bail!(
                "no `{kind_name}` yield point at `{}` (it has: {})",
                spec.at.as_deref().unwrap_or_default(),
                have.join(", ")
            );
        }
        allowed = Some(fit);
    } else if site_kind.is_some() {
        let all: BTreeSet<u32> = (0..sites.sites.len() as u32)
            .filter(|&id| fits_kind(id) && sites.sites[id as usize].user)
            .collect();
        if all.is_empty() {
            bail!("the module has no `{kind_name}` call in user code");
        }
        allowed = Some(all);
    }
    if let Some(at) = &spec.at {
        words.push(format!("at {at}"));
    }
    let range = match &spec.var {
        None => None,
        Some(v) => {
            let (addr, size) = resolve_var(v, sites)?;
            words.push(format!("`{v}`"));
            Some((addr, addr.saturating_add(size.max(1))))
        }
    };
    if let Some(l) = &spec.label {
        if !known.labels.contains(l) && !known.in_module(l) {
            let labels: Vec<&str> = known.labels.iter().map(|s| s.as_str()).collect();
            if labels.is_empty() {
                bail!("unknown label `{l}` (no heddle_event label was seen in the probe runs, and the module holds no such string)");
            }
            bail!(
                "unknown label `{l}`; nearest: {}",
                nearest(l, &labels, 5).join(", ")
            );
        }
        words.push(format!("\"{l}\""));
    }
    if spec.nth == Some(0) {
        bail!("nth = 0: occurrences count from 1");
    }
    if let Some(k) = spec.nth {
        words.push(format!("#{k}"));
    }
    let when = spec
        .when
        .iter()
        .map(|w| parse_predicate(w, sites))
        .collect::<Result<Vec<_>>>()?;
    if !when.is_empty() {
        let texts: Vec<&str> = when.iter().map(|p| p.text.as_str()).collect();
        words.push(format!("when {}", texts.join(" && ")));
    }
    let sites_vec = allowed.map(|set| {
        let mut v = vec![false; sites.sites.len()];
        for id in set {
            v[id as usize] = true;
        }
        v
    });
    Ok(PlanEvent {
        name: spec.name.clone().unwrap_or_else(|| format!("e{}", i + 1)),
        text: words.join(" "),
        thread,
        sites: sites_vec,
        kinds,
        range,
        label: spec.label.clone(),
        nth: spec.nth,
        when,
    })
}

/// Whether a site's file is `file` (a short name or a path suffix).
fn file_matches(path: &str, file: &str) -> bool {
    path == file || short_file(path) == file || path.ends_with(&format!("/{file}"))
}

/// A function's name without its C++ parameter list.
fn bare(name: &str) -> &str {
    name.split('(').next().unwrap_or(name)
}

/// The sites `at` names.
fn resolve_at(at: &str, sites: &SiteTable) -> Result<BTreeSet<u32>> {
    if let Some((file, line)) = at.rsplit_once(':') {
        let line: u32 = line
            .parse()
            .map_err(|_| anyhow!("bad site `{at}` (expected file:line, function or function+k)"))?;
        let in_file: Vec<&crate::instrument::Site> = sites
            .sites
            .iter()
            .filter(|s| s.loc.as_ref().is_some_and(|l| file_matches(&l.file, file)))
            .collect();
        if in_file.is_empty() {
            let mut files: Vec<&str> = sites
                .sites
                .iter()
                .filter(|s| s.user)
                .filter_map(|s| s.loc.as_ref().map(|l| short_file(&l.file)))
                .collect();
            files.sort();
            files.dedup();
            bail!(
                "unknown site `{at}`: no yield point in a file `{file}`; nearest files: {}",
                nearest(file, &files, 3).join(", ")
            );
        }
        let set: BTreeSet<u32> = in_file
            .iter()
            .filter(|s| s.loc.as_ref().is_some_and(|l| l.line == line))
            .map(|s| s.id)
            .collect();
        if set.is_empty() {
            let mut lines: Vec<u32> = in_file
                .iter()
                .filter_map(|s| s.loc.as_ref().map(|l| l.line))
                .collect();
            lines.sort();
            lines.dedup();
            lines.sort_by_key(|l| (l.abs_diff(line), *l));
            let near: Vec<String> = lines
                .iter()
                .take(4)
                .map(|l| format!("{file}:{l}"))
                .collect();
            bail!(
                "unknown site `{at}`: no yield point on that line; nearest: {}",
                near.join(", ")
            );
        }
        return Ok(set);
    }
    let (func, k) = match at.rsplit_once('+') {
        Some((f, k)) => (
            f,
            Some(k.trim().parse::<u32>().map_err(|_| {
                anyhow!("bad site `{at}` (expected file:line, function or function+k)")
            })?),
        ),
        None => (at, None),
    };
    let in_func: Vec<&crate::instrument::Site> = sites
        .sites
        .iter()
        .filter(|s| s.func_name == func || bare(&s.func_name) == func)
        .collect();
    if in_func.is_empty() {
        let mut names: Vec<&str> = sites
            .sites
            .iter()
            .filter(|s| s.user)
            .map(|s| bare(&s.func_name))
            .collect();
        names.sort();
        names.dedup();
        bail!(
            "unknown site `{at}`: no function `{func}` with yield points; nearest: {}",
            nearest(func, &names, 5).join(", ")
        );
    }
    let Some(k) = k else {
        return Ok(in_func.iter().map(|s| s.id).collect());
    };
    // Lines of the function's own file (inlined code brings other files).
    let home = in_func
        .iter()
        .find_map(|s| s.loc.as_ref().map(|l| l.file.clone()));
    let in_func: Vec<&crate::instrument::Site> = in_func
        .into_iter()
        .filter(|s| s.loc.as_ref().map(|l| &l.file) == home.as_ref())
        .collect();
    let lines: Vec<u32> = in_func
        .iter()
        .filter_map(|s| s.loc.as_ref().map(|l| l.line))
        .collect();
    let Some(&first) = lines.iter().min() else {
        bail!("unknown site `{at}`: `{func}` has no line information");
    };
    let set: BTreeSet<u32> = in_func
        .iter()
        .filter(|s| s.loc.as_ref().is_some_and(|l| l.line == first + k))
        .map(|s| s.id)
        .collect();
    if set.is_empty() {
        let mut offs: Vec<u32> = lines.iter().map(|l| l - first).collect();
        offs.sort();
        offs.dedup();
        offs.sort_by_key(|o| (o.abs_diff(k), *o));
        let near: Vec<String> = offs.iter().take(4).map(|o| format!("{func}+{o}")).collect();
        bail!(
            "unknown site `{at}`: no yield point {k} lines below the first line of `{func}`; nearest: {}",
            near.join(", ")
        );
    }
    Ok(set)
}

/// A variable: a global by name, `name+OFF[:SIZE]` (bytes into it), or
/// `0xADDR[:SIZE]`. Returns (address, size).
pub fn resolve_var(v: &str, sites: &SiteTable) -> Result<(u32, u32)> {
    let bad = || anyhow!("bad variable `{v}` (expected NAME, NAME+OFFSET[:SIZE] or 0xADDR[:SIZE])");
    if !v.starts_with("0x") && (v.contains('+') || v.contains(':')) {
        let (base, size) = match v.rsplit_once(':') {
            Some((b, s)) => (b, Some(s.parse::<u32>().map_err(|_| bad())?)),
            None => (v, None),
        };
        let (name, off) = match base.split_once('+') {
            Some((n, o)) => (n, o.parse::<u32>().map_err(|_| bad())?),
            None => (base, 0),
        };
        let (addr, full) = resolve_var(name, sites)?;
        if off >= full.max(1) {
            bail!("bad variable `{v}`: `{name}` is only {full} bytes");
        }
        return Ok((addr + off, size.unwrap_or(full - off)));
    }
    if let Some(hex) = v.strip_prefix("0x") {
        let (a, size) = match hex.split_once(':') {
            Some((a, s)) => (
                a,
                s.parse::<u32>()
                    .map_err(|_| anyhow!("bad variable `{v}` (expected 0xADDR[:size])"))?,
            ),
            None => (hex, 4),
        };
        let addr = u32::from_str_radix(a, 16)
            .map_err(|_| anyhow!("bad variable `{v}` (expected 0xADDR[:size])"))?;
        return Ok((addr, size));
    }
    if let Some(s) = sites.symbols.iter().find(|s| s.name == v) {
        return Ok((s.addr, s.size));
    }
    let names: Vec<&str> = sites.symbols.iter().map(|s| s.name.as_str()).collect();
    let near = nearest(v, &names, 5);
    if near.is_empty() {
        bail!("unknown variable `{v}` (the module has no global variables with debug info)");
    }
    bail!("unknown variable `{v}`; nearest: {}", near.join(", "))
}

/// Parses `var OP value`.
pub fn parse_predicate(text: &str, sites: &SiteTable) -> Result<Predicate> {
    let (var, op, val) = crate::text::split_comparison(text).ok_or_else(|| {
        anyhow!(
            "bad state constraint `{text}` (expected `var OP value`, OP one of == != < <= > >=)"
        )
    })?;
    if var.is_empty() {
        bail!("bad state constraint `{text}`: no variable before the operator");
    }
    let (addr, size) = resolve_var(var, sites).with_context(|| format!("in `{text}`"))?;
    if !(1..=8).contains(&size) {
        bail!("bad state constraint `{text}`: `{var}` is {size} bytes; predicates compare integers of 1 to 8 bytes");
    }
    let value = crate::text::parse_int(val)
        .ok_or_else(|| anyhow!("bad state constraint `{text}`: `{val}` is not an integer"))?;
    Ok(Predicate {
        text: text.trim().to_string(),
        addr,
        size,
        op,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_values_and_rejects_bad_files() {
        assert!(parse_file("").is_err());
        let e = parse_file("[[order]]\nthred = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("thred"), "{e}");
        let f = parse_file("[[order]]\nthread = 1\n[[order]]\nthread = \"x\"\nnth = 2\n").unwrap();
        assert_eq!(f.order[0].thread, Some(ThreadSpec::Index(1)));
        assert_eq!(f.order[1].thread, Some(ThreadSpec::Name("x".into())));
    }

    #[test]
    fn predicates_sign_extend() {
        let p = Predicate {
            text: String::new(),
            addr: 0,
            size: 1,
            op: Op::Lt,
            value: 0,
        };
        assert!(p.holds(Some(0xff)));
        assert!(!p.holds(Some(1)));
        assert!(!p.holds(None));
    }
}
