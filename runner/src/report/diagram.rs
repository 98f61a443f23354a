//! The interleaving diagram: one column per thread, one row per step that
//! matters, in global step order, with the source line of each row on the
//! right — the way kernel developers draw a race by hand.
//!
//! ```text
//!    step │ T0 main  │ T1 depositor      │ T2 depositor      │ where
//! ────────┼──────────┼───────────────────┼───────────────────┼──────────────────────────
//!      31 │          │ R balance = 0     │                   │ race_bank.c:40  local = balance;
//!  »   35 │          │                   │ lock account_lock │ race_bank.c:39  pthread_mutex_lock(&account_lock);
//! ```
//!
//! Rows are [`Group`]s of the [`Timeline`]. Groups with nothing to say
//! (no shared data, no sync operation, no mark) are folded into the rows
//! around them (the step numbers show the gap); library code is shown only
//! where user code calls it and it matters (it blocks, or touches shared
//! data), unless `all`. A critical section of one access (`lock X`, the
//! access, `unlock X`, with no other thread in between) is one row:
//! `R balance = 0 under account_lock`.

use super::timeline::{Group, Mark, Timeline};
use std::fmt::Write as _;

/// How to draw.
#[derive(Debug, Clone)]
pub struct Options {
    /// Every event on its own row, library code included.
    pub all: bool,
    /// Keep only rows within this many rows of a marked row.
    pub context: Option<usize>,
    /// Total width in columns.
    pub width: usize,
    /// ANSI colours.
    pub color: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            all: false,
            context: None,
            width: 120,
            color: false,
        }
    }
}

/// A row of the diagram.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Row {
    /// Groups shown as one row: one group, or a critical section
    /// (`lock X`, one access, `unlock X` of one thread in a row) shown as
    /// `access under X` at the access's line.
    Groups(Vec<usize>),
    /// Rows left out by `context`.
    Elided(usize),
}

/// The rows to draw. Groups with nothing to say are left out (their steps
/// are folded into the rows around them); library-only ones too unless
/// `all`.
fn rows(tl: &Timeline, all: bool) -> Vec<Row> {
    let shown: Vec<usize> = (0..tl.groups.len())
        .filter(|&g| all || tl.groups[g].interesting)
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < shown.len() {
        if !all && i + 2 < shown.len() {
            let (a, b, c) = (
                &tl.groups[shown[i]],
                &tl.groups[shown[i + 1]],
                &tl.groups[shown[i + 2]],
            );
            let lock = a.text.strip_prefix("lock ");
            let unlock = c.text.strip_prefix("unlock ");
            let access = ["R ", "W ", "RMW ", "CAS "]
                .iter()
                .any(|p| b.text.starts_with(p))
                && !b.text.contains(';');
            if a.tid == b.tid
                && b.tid == c.tid
                && lock.is_some()
                && lock == unlock
                && !lock.is_some_and(|l| l.contains(';'))
                && access
            {
                out.push(Row::Groups(vec![shown[i], shown[i + 1], shown[i + 2]]));
                i += 3;
                continue;
            }
        }
        out.push(Row::Groups(vec![shown[i]]));
        i += 1;
    }
    out
}

fn marked(tl: &Timeline, r: &Row) -> bool {
    match r {
        Row::Groups(g) => g.iter().any(|&g| !tl.groups[g].marks.is_empty()),
        _ => false,
    }
}

/// Applies `context`: rows further than `n` rows from every marked row are
/// replaced by one [`Row::Elided`] per run.
fn with_context(tl: &Timeline, rows: Vec<Row>, n: usize) -> Vec<Row> {
    let marks: Vec<usize> = (0..rows.len()).filter(|&i| marked(tl, &rows[i])).collect();
    if marks.is_empty() {
        return rows;
    }
    let keep = |i: usize| marks.iter().any(|&m| i.abs_diff(m) <= n);
    let mut out = Vec::new();
    let mut skipped = 0;
    for (i, r) in rows.into_iter().enumerate() {
        if keep(i) {
            if skipped > 0 {
                out.push(Row::Elided(skipped));
                skipped = 0;
            }
            out.push(r);
        } else {
            skipped += 1;
        }
    }
    if skipped > 0 {
        out.push(Row::Elided(skipped));
    }
    out
}

/// Display width (every character heddle puts in a diagram is one column).
fn width(s: &str) -> usize {
    s.chars().count()
}

/// `s` cut to `w` columns (with `…` when cut).
pub fn fit(s: &str, w: usize) -> String {
    if width(s) <= w {
        return s.to_string();
    }
    if w == 0 {
        return String::new();
    }
    let mut t: String = s.chars().take(w - 1).collect();
    t.push('…');
    t
}

fn pad(s: &str, w: usize) -> String {
    let s = fit(s, w);
    let n = width(&s);
    format!("{s}{}", " ".repeat(w.saturating_sub(n)))
}

/// Colours.
struct Paint {
    on: bool,
}

impl Paint {
    fn wrap(&self, code: &str, s: &str) -> String {
        if self.on && !s.trim().is_empty() {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn mark(&self, m: Mark, s: &str) -> String {
        let code = match m {
            Mark::Fail | Mark::Blocked | Mark::Overwrite => "1;31",
            Mark::Seen | Mark::Saw | Mark::Stale | Mark::Race | Mark::Block => "1;33",
            Mark::Preempt => "1;36",
        };
        self.wrap(code, s)
    }
}

/// The most important marks of some groups, for the marker column (two at most).
fn marker(groups: &[&Group]) -> Vec<Mark> {
    let all: std::collections::BTreeSet<Mark> = groups
        .iter()
        .flat_map(|g| g.marks.iter().copied())
        .collect();
    let mut v: Vec<Mark> = all.into_iter().rev().collect();
    v.truncate(2);
    v
}

fn where_of(tl: &Timeline, groups: &[usize]) -> (String, String) {
    let first = groups.iter().find_map(|&g| tl.groups[g].loc.clone());
    let last = groups.iter().rev().find_map(|&g| tl.groups[g].loc.clone());
    match (first, last) {
        (Some(a), Some(b)) if a.file == b.file && a.line != b.line => {
            let (lo, hi) = (a.line.min(b.line), a.line.max(b.line));
            (
                format!(
                    "{}:{lo}-{hi}",
                    crate::instrument::dwarf::short_file(&a.file)
                ),
                String::new(),
            )
        }
        (Some(a), _) => {
            let g = groups
                .iter()
                .find(|&&g| tl.groups[g].loc.is_some())
                .copied();
            (
                a.short(),
                g.and_then(|g| tl.groups[g].source.clone())
                    .unwrap_or_default(),
            )
        }
        _ => (String::new(), String::new()),
    }
}

/// Draws the diagram of `tl` (the table, then the notes and the verdict).
pub fn render(tl: &Timeline, opts: &Options) -> String {
    let paint = Paint { on: opts.color };
    let mut rows = rows(tl, opts.all);
    if let Some(n) = opts.context {
        rows = with_context(tl, rows, n);
    }
    // Which threads appear at all.
    let tids: Vec<u32> = tl
        .threads
        .iter()
        .map(|t| t.tid)
        .filter(|&t| {
            rows.iter().any(|r| match r {
                Row::Groups(g) => tl.groups[g[0]].tid == t,
                Row::Elided(_) => false,
            })
        })
        .collect();
    let col_of = |t: u32| tids.iter().position(|&x| x == t);
    // Cell texts.
    struct Line {
        marks: Vec<Mark>,
        step: String,
        col: Option<usize>,
        cell: String,
        at: String,
        source: String,
        dim: bool,
    }
    let mut lines: Vec<Line> = Vec::new();
    for r in &rows {
        match r {
            Row::Groups(gs) => {
                let groups: Vec<&Group> = gs.iter().map(|&g| &tl.groups[g]).collect();
                let g = groups[0];
                let (main, cell) = if gs.len() == 3 {
                    let lock = g.text.strip_prefix("lock ").unwrap_or_default();
                    (gs[1], format!("{} under {lock}", groups[1].text))
                } else if g.text.is_empty() {
                    let n = g.events.len();
                    (
                        gs[0],
                        if n > 1 {
                            format!("⋯ {n} steps")
                        } else {
                            "⋯".into()
                        },
                    )
                } else {
                    (gs[0], g.text.clone())
                };
                let (at, source) = where_of(tl, &[main]);
                lines.push(Line {
                    marks: marker(&groups),
                    step: tl.groups[main].first_step.to_string(),
                    col: col_of(g.tid),
                    cell,
                    at,
                    source,
                    dim: false,
                });
            }
            Row::Elided(k) => lines.push(Line {
                marks: Vec::new(),
                step: "⋮".into(),
                col: None,
                cell: format!("({k} rows)"),
                at: String::new(),
                source: String::new(),
                dim: true,
            }),
        }
    }
    // Column widths.
    let step_w = lines
        .iter()
        .map(|l| width(&l.step))
        .max()
        .unwrap_or(1)
        .max(4);
    let at_w = lines.iter().map(|l| width(&l.at)).max().unwrap_or(0).max(5);
    let mut col_w: Vec<usize> = tids
        .iter()
        .enumerate()
        .map(|(c, &t)| {
            let head = width(&tl.label(t));
            let cells = lines
                .iter()
                .filter(|l| l.col == Some(c))
                .map(|l| width(&l.cell))
                .max()
                .unwrap_or(0);
            head.max(cells).clamp(6, 34)
        })
        .collect();
    if col_w.is_empty() {
        col_w.push(6);
    }
    let ncol = col_w.len();
    // marks, step, the thread columns and `where`, with their separators.
    let fixed = 2 + 1 + step_w + 3 + 3 * (ncol - 1) + 3 + at_w + 2;
    let avail = opts.width.saturating_sub(fixed);
    let src_natural = lines.iter().map(|l| width(&l.source)).max().unwrap_or(0);
    let src_target = src_natural.min(16);
    // Narrow the widest thread columns until the source gets its share.
    while col_w.iter().sum::<usize>() + src_target > avail {
        let (i, w) = col_w
            .iter()
            .enumerate()
            .max_by_key(|(i, w)| (**w, usize::MAX - i))
            .map(|(i, w)| (i, *w))
            .unwrap_or((0, 0));
        if w <= 10 {
            break;
        }
        col_w[i] -= 1;
    }
    let src_w = avail.saturating_sub(col_w.iter().sum::<usize>());

    let mut out = String::new();
    // Header.
    let mut head = format!("{} {} │", "  ", pad_left("step", step_w));
    for (c, &t) in tids.iter().enumerate() {
        let _ = write!(head, " {} │", pad(&tl.label(t), col_w[c]));
    }
    head.push_str(" where");
    out.push_str(&paint.wrap("1", head.trim_end()));
    out.push('\n');
    let mut rule = "─".repeat(3 + step_w + 1);
    for w in &col_w {
        rule.push('┼');
        rule.push_str(&"─".repeat(w + 2));
    }
    rule.push('┼');
    let rest = at_w + 2 + src_w.min(src_natural);
    rule.push_str(&"─".repeat(rest.min(opts.width.saturating_sub(width(&rule)))));
    out.push_str(&rule);
    out.push('\n');
    for l in &lines {
        let mut m = String::new();
        for k in &l.marks {
            m.push_str(&paint.mark(*k, k.symbol()));
        }
        let mlen = l.marks.len();
        let mut s = format!(
            "{m}{} {} │",
            " ".repeat(2 - mlen),
            pad_left(&l.step, step_w)
        );
        for (c, w) in col_w.iter().enumerate() {
            let cell = if l.col == Some(c) || (l.col.is_none() && c == 0) {
                pad(&l.cell, *w)
            } else {
                " ".repeat(*w)
            };
            let cell = if l.dim { paint.wrap("2", &cell) } else { cell };
            let cell = match l.marks.first() {
                Some(k) if l.col == Some(c) && !l.dim => paint.mark(*k, &cell),
                _ => cell,
            };
            let _ = write!(s, " {cell} │");
        }
        if !l.at.is_empty() {
            let _ = write!(s, " {}", pad(&l.at, at_w));
            if !l.source.is_empty() && src_w > 4 {
                let _ = write!(s, "  {}", paint.wrap("2", &fit(&l.source, src_w)));
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    }
    out
}

fn pad_left(s: &str, w: usize) -> String {
    format!("{}{s}", " ".repeat(w.saturating_sub(width(s))))
}

/// The notes under a diagram: what each mark means here.
pub fn render_notes(tl: &Timeline, color: bool, width_: usize) -> String {
    let paint = Paint { on: color };
    let mut out = String::new();
    for n in &tl.notes {
        let line = format!("{} {}", n.mark.symbol(), n.text);
        let _ = writeln!(out, "{}", wrap_line(&paint.mark(n.mark, &line), width_, 2));
    }
    out
}

/// Wraps a long line at spaces, indenting continuation lines.
pub fn wrap_line(s: &str, w: usize, indent: usize) -> String {
    if width(s) <= w || w < 20 {
        return s.to_string();
    }
    let mut out = String::new();
    let mut cur = String::new();
    for word in s.split(' ') {
        if !cur.is_empty() && width(&cur) + 1 + width(word) > w {
            out.push_str(cur.trim_end());
            out.push('\n');
            cur = " ".repeat(indent);
        }
        if !cur.is_empty() && !cur.trim().is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    out.push_str(&cur);
    out
}

/// The legend of the marks used in `tl`.
pub fn legend(tl: &Timeline) -> String {
    let mut used: std::collections::BTreeSet<Mark> = Default::default();
    for g in tl.groups.iter().filter(|g| g.interesting) {
        used.extend(g.marks.iter().copied());
    }
    let parts: Vec<String> = used
        .iter()
        .map(|m| {
            let what = match m {
                Mark::Preempt => "preemption",
                Mark::Seen => "write a failing read saw",
                Mark::Saw => "that read",
                Mark::Stale => "the read it was based on",
                Mark::Overwrite => "lost update",
                Mark::Race => "data race",
                Mark::Block => "the block's allocation / free",
                Mark::Blocked => "blocked for good",
                Mark::Fail => "failing step",
            };
            format!("{} {what}", m.symbol())
        })
        .collect();
    parts.join("   ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fitting_and_wrapping() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
        assert_eq!(pad("ab", 4), "ab  ");
        assert_eq!(
            wrap_line("one two three four five six seven", 20, 2),
            "one two three four\n  five six seven"
        );
    }
}
