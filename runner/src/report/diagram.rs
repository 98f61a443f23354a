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
    /// Most rows to draw (rows far from the marks that explain the verdict
    /// go first, then the earliest); `None`: every row.
    pub max_rows: Option<usize>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            all: false,
            context: None,
            width: 120,
            color: false,
            max_rows: None,
        }
    }
}

/// Rows `heddle show` and the HTML report draw at most (without `--all`).
pub const MAX_ROWS: usize = 400;

/// What a diagram left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Elided {
    /// Rows left out (by `context` or `max_rows`).
    pub rows: usize,
    /// Threads drawn in the shared `others` column, not in their own.
    pub merged_threads: usize,
}

/// A row of the diagram.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Row {
    /// Groups shown as one row: one group, or a critical section
    /// (`lock X`, one access, `unlock X` of one thread in a row) shown as
    /// `access under X` at the access's line.
    Groups(Vec<usize>),
    /// Rows left out by `context` or `max_rows`.
    Elided(usize),
    /// A stretch of the run the timeline left out (index into
    /// [`Timeline::gaps`]).
    Gap(usize),
}

/// The rows to draw. Groups with nothing to say are left out (their steps
/// are folded into the rows around them); library-only ones too unless
/// `all`.
fn rows(tl: &Timeline, all: bool) -> Vec<Row> {
    let mut out = Vec::new();
    let mut gaps = tl.gaps.iter().enumerate().peekable();
    let mut start = 0;
    for gi in 0..=tl.groups.len() {
        let at = tl
            .groups
            .get(gi)
            .map_or(tl.events.len(), |g| g.events.start);
        if gi < tl.groups.len() && gaps.peek().is_none_or(|(_, g)| g.before != at) {
            continue;
        }
        // The groups before the gap (or the end).
        rows_of(tl, all, start..gi, &mut out);
        start = gi;
        while let Some((k, _)) = gaps.next_if(|(_, g)| g.before == at) {
            out.push(Row::Gap(k));
        }
    }
    out
}

/// The rows of the groups `range` (no gap among them).
fn rows_of(tl: &Timeline, all: bool, range: std::ops::Range<usize>, out: &mut Vec<Row>) {
    let shown: Vec<usize> = range.filter(|&g| all || tl.groups[g].interesting).collect();
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
}

/// Whether a row carries a mark (`important`: one that explains the
/// verdict, not a preemption).
fn marked(tl: &Timeline, r: &Row, important: bool) -> bool {
    match r {
        Row::Groups(g) => g.iter().any(|&g| {
            tl.groups[g]
                .marks
                .iter()
                .any(|m| !important || *m != Mark::Preempt)
        }),
        _ => false,
    }
}

/// Applies `context`: rows further than `n` rows from every marked row
/// (`important`: every row with a mark that explains the verdict) are
/// replaced by one [`Row::Elided`] per run; gaps stay.
fn with_context(tl: &Timeline, rows: Vec<Row>, n: usize, important: bool) -> Vec<Row> {
    let marks: Vec<usize> = (0..rows.len())
        .filter(|&i| marked(tl, &rows[i], important))
        .collect();
    if marks.is_empty() {
        return rows;
    }
    // Distance to the nearest mark, in one pass each way.
    let mut near = vec![usize::MAX; rows.len()];
    for &m in &marks {
        near[m] = 0;
    }
    for i in 1..rows.len() {
        near[i] = near[i].min(near[i - 1].saturating_add(1));
    }
    for i in (0..rows.len().saturating_sub(1)).rev() {
        near[i] = near[i].min(near[i + 1].saturating_add(1));
    }
    let mut out = Vec::new();
    let mut skipped = 0;
    for (i, r) in rows.into_iter().enumerate() {
        if near[i] <= n || matches!(r, Row::Gap(_)) {
            if skipped > 0 {
                out.push(Row::Elided(skipped));
                skipped = 0;
            }
            out.push(r);
        } else {
            skipped += match r {
                Row::Elided(k) => k,
                _ => 1,
            };
        }
    }
    if skipped > 0 {
        out.push(Row::Elided(skipped));
    }
    out
}

/// Rows drawn (not gaps or left-out rows).
fn drawn(rows: &[Row]) -> usize {
    rows.iter().filter(|r| matches!(r, Row::Groups(_))).count()
}

/// Cuts `rows` to at most `max` drawn rows: those nearest the marks that
/// explain the verdict, then, when these are still too many, the last.
fn capped(tl: &Timeline, rows: Vec<Row>, max: usize) -> Vec<Row> {
    if drawn(&rows) <= max {
        return rows;
    }
    let mut rows = rows;
    for n in [8, 4, 2, 1, 0] {
        rows = with_context(tl, rows, n, true);
        if drawn(&rows) <= max {
            return rows;
        }
    }
    // The last `max` rows.
    let mut out = Vec::new();
    let mut left = max;
    let mut skipped = 0;
    for r in rows.into_iter().rev() {
        match r {
            Row::Groups(_) if left > 0 => {
                left -= 1;
                out.push(r);
            }
            Row::Gap(_) if left > 0 => out.push(r),
            Row::Elided(k) => skipped += k,
            _ => skipped += 1,
        }
    }
    if skipped > 0 {
        out.push(Row::Elided(skipped));
    }
    out.reverse();
    out
}

/// `1234567` → `1,234,567`.
pub fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Threads as ranges of tids: `T1–T5, T7, T9–T64`.
pub fn tid_ranges(tids: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < tids.len() {
        let mut j = i;
        while j + 1 < tids.len() && tids[j + 1] == tids[j] + 1 {
            j += 1;
        }
        parts.push(if j == i {
            format!("T{}", tids[i])
        } else {
            format!("T{}–T{}", tids[i], tids[j])
        });
        i = j + 1;
    }
    parts.join(", ")
}

/// What a gap row says: `… 1,234,567 steps (12–1,234,578) of T1–T64 left out …`.
pub fn gap_text(g: &super::timeline::Gap) -> String {
    format!(
        "… {} steps ({}–{}) of {} left out …",
        grouped(g.steps()),
        grouped(g.first_step),
        grouped(g.last_step),
        if g.threads.len() == 1 {
            format!("T{}", g.threads[0])
        } else {
            format!("{} threads ({})", g.threads.len(), tid_ranges(&g.threads))
        }
    )
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
                    crate::instrument::dwarf::display_file(&a.file)
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
                a.display(),
                g.and_then(|g| tl.groups[g].source.clone())
                    .unwrap_or_default(),
            )
        }
        _ => (String::new(), String::new()),
    }
}

/// The threads that explain the verdict, most first: the failing thread,
/// those of rows with marks other than preemptions (by mark), those the
/// verdict names.
fn focus_threads(tl: &Timeline, rows: &[Row]) -> Vec<u32> {
    let mut ranked: Vec<(u8, u32)> = Vec::new();
    if let Some(f) = tl.failing {
        ranked.push((0, tl.groups[f].tid));
    }
    for r in rows {
        if let Row::Groups(gs) = r {
            for &g in gs {
                let g = &tl.groups[g];
                if let Some(rank) = g.marks.iter().map(|m| m.rank()).min() {
                    if rank < Mark::Preempt.rank() {
                        ranked.push((rank, g.tid));
                    }
                }
            }
        }
    }
    use crate::verdict::Verdict;
    if let Verdict::Deadlock { threads } = &tl.verdict {
        ranked.extend(threads.iter().map(|t| (1, t.tid)));
    }
    for x in &tl.races {
        ranked.extend([(3, x.first.tid), (3, x.second.tid)]);
    }
    ranked.sort();
    let mut out: Vec<u32> = Vec::new();
    for (_, t) in ranked {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// Draws the diagram of `tl`, and says what it left out. Threads that do
/// not fit in `opts.width` share one last column (`+N others`), whose cells
/// name their thread; the threads that explain the verdict and then those
/// with the most rows get columns of their own.
pub fn render_elided(tl: &Timeline, opts: &Options) -> (String, Elided) {
    let paint = Paint { on: opts.color };
    let mut rows = rows(tl, opts.all);
    let total_rows = drawn(&rows);
    if let Some(n) = opts.context {
        rows = with_context(tl, rows, n, false);
    }
    if let Some(m) = opts.max_rows {
        rows = capped(tl, rows, m);
    }
    let mut elided = Elided {
        rows: total_rows - drawn(&rows),
        merged_threads: 0,
    };
    // Which threads appear at all, with their number of rows.
    let mut row_count: std::collections::BTreeMap<u32, usize> = Default::default();
    for r in &rows {
        if let Row::Groups(g) = r {
            *row_count.entry(tl.groups[g[0]].tid).or_default() += 1;
        }
    }
    let present: Vec<u32> = row_count.keys().copied().collect();
    // Cell texts.
    struct Line {
        marks: Vec<Mark>,
        step: String,
        tid: Option<u32>,
        cell: String,
        at: String,
        source: String,
        dim: bool,
        /// Spans the table (a gap).
        wide: bool,
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
                    tid: Some(g.tid),
                    cell,
                    at,
                    source,
                    dim: false,
                    wide: false,
                });
            }
            Row::Elided(k) => lines.push(Line {
                marks: Vec::new(),
                step: "⋮".into(),
                tid: None,
                cell: format!("({k} rows)"),
                at: String::new(),
                source: String::new(),
                dim: true,
                wide: false,
            }),
            Row::Gap(k) => lines.push(Line {
                marks: Vec::new(),
                step: "⋮".into(),
                tid: None,
                cell: gap_text(&tl.gaps[*k]),
                at: String::new(),
                source: String::new(),
                dim: true,
                wide: true,
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
    let natural = |t: u32| {
        let head = width(&tl.label(t));
        let cells = lines
            .iter()
            .filter(|l| l.tid == Some(t) && !l.wide)
            .map(|l| width(&l.cell))
            .max()
            .unwrap_or(0);
        head.max(cells).clamp(6, 34)
    };
    let src_natural = lines.iter().map(|l| width(&l.source)).max().unwrap_or(0);
    let src_target = src_natural.min(16);
    // marks, step, the thread columns and `where`, with their separators.
    let fixed = |ncol: usize| 2 + 1 + step_w + 3 + 3 * (ncol.max(1) - 1) + 3 + at_w + 2;
    // Every thread has a column when the columns fit narrowed to 10 (as
    // far as the narrowing below goes).
    let fits = |widths: &[usize]| {
        fixed(widths.len()) + widths.iter().map(|&w| w.min(10)).sum::<usize>() <= opts.width
    };
    let all_widths: Vec<usize> = present.iter().map(|&t| natural(t)).collect();
    let (tids, others): (Vec<u32>, Vec<u32>) = if fits(&all_widths) {
        (present.clone(), Vec::new())
    } else {
        // Own columns for the threads that explain the verdict, then the
        // busiest, while they and the `others` column fit.
        let mut order: Vec<u32> = focus_threads(tl, &rows)
            .into_iter()
            .filter(|t| row_count.contains_key(t))
            .collect();
        let mut busy: Vec<u32> = present
            .iter()
            .copied()
            .filter(|t| !order.contains(t))
            .collect();
        busy.sort_by_key(|t| (std::cmp::Reverse(row_count[t]), *t));
        order.extend(busy);
        // Columns of their own keep up to 18 columns of their text, the
        // `others` column (whose cells name their thread) 26.
        let fits_merged = |widths: &[usize]| {
            fixed(widths.len() + 1)
                + widths.iter().map(|&w| w.min(18)).sum::<usize>()
                + 26
                + src_target
                <= opts.width
        };
        let mut own: Vec<u32> = Vec::new();
        for &t in &order {
            let mut w: Vec<usize> = own.iter().map(|&x| natural(x)).collect();
            w.push(natural(t));
            if own.is_empty() || fits_merged(&w) {
                own.push(t);
            } else {
                break;
            }
        }
        if own.len() + 1 >= present.len() {
            // One column for the rest saves nothing.
            own = present.clone();
        }
        own.sort_unstable();
        let others = present
            .iter()
            .copied()
            .filter(|t| !own.contains(t))
            .collect();
        (own, others)
    };
    elided.merged_threads = others.len();
    let others_col = tids.len();
    let col_of = |t: u32| match tids.iter().position(|&x| x == t) {
        Some(c) => Some(c),
        None => Some(others_col),
    };
    let others_head = format!(
        "+{} other{}",
        others.len(),
        if others.len() == 1 { "" } else { "s" }
    );
    let mut col_w: Vec<usize> = tids.iter().map(|&t| natural(t)).collect();
    // Cells of the `others` column name their thread.
    for l in lines.iter_mut() {
        if let Some(t) = l.tid {
            if !tids.contains(&t) {
                l.cell = format!("T{t}: {}", l.cell);
            }
        }
    }
    if !others.is_empty() {
        let cells = lines
            .iter()
            .filter(|l| l.tid.is_some_and(|t| !tids.contains(&t)))
            .map(|l| width(&l.cell))
            .max()
            .unwrap_or(0);
        col_w.push(width(&others_head).max(cells).clamp(6, 34));
    }
    // Merged, the narrowing below stops at these widths: 18 for columns of
    // their own, 26 for `others`.
    let floor: Vec<usize> = if others.is_empty() {
        vec![10; col_w.len()]
    } else {
        let mut f: Vec<usize> = col_w.iter().map(|&w| w.min(18)).collect();
        if let Some(last) = f.last_mut() {
            *last = col_w[col_w.len() - 1].min(26);
        }
        f
    };
    if col_w.is_empty() {
        col_w.push(6);
    }
    let ncol = col_w.len();
    let avail = opts.width.saturating_sub(fixed(ncol));
    // Narrow the widest thread columns until the source gets its share.
    while col_w.iter().sum::<usize>() + src_target > avail {
        let Some((i, _)) = col_w
            .iter()
            .enumerate()
            .filter(|(i, w)| **w > floor.get(*i).copied().unwrap_or(10))
            .max_by_key(|(i, w)| (**w, usize::MAX - i))
        else {
            break;
        };
        col_w[i] -= 1;
    }
    let src_w = avail.saturating_sub(col_w.iter().sum::<usize>());

    let mut out = String::new();
    // Header.
    let mut head = format!("{} {} │", "  ", pad_left("step", step_w));
    for (c, &t) in tids.iter().enumerate() {
        let _ = write!(head, " {} │", pad(&tl.label(t), col_w[c]));
    }
    if !others.is_empty() {
        let _ = write!(head, " {} │", pad(&others_head, col_w[others_col]));
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
    // The width of the table up to `where`.
    let table_w = 2 + 1 + step_w + 2 + col_w.iter().map(|w| w + 3).sum::<usize>();
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
        if l.wide {
            let room = opts.width.max(table_w).saturating_sub(width(&s) + 1);
            let _ = write!(s, " {}", paint.wrap("2", &fit(&l.cell, room)));
            out.push_str(s.trim_end());
            out.push('\n');
            continue;
        }
        let col = l.tid.and_then(col_of);
        for (c, w) in col_w.iter().enumerate() {
            let cell = if col == Some(c) || (col.is_none() && c == 0) {
                pad(&l.cell, *w)
            } else {
                " ".repeat(*w)
            };
            let cell = if l.dim { paint.wrap("2", &cell) } else { cell };
            let cell = match l.marks.first() {
                Some(k) if col == Some(c) && !l.dim => paint.mark(*k, &cell),
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
    (out, elided)
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

    #[test]
    fn numbers_and_thread_sets_read_short() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1234567), "1,234,567");
        assert_eq!(tid_ranges(&[1, 2, 3, 5, 7, 8]), "T1–T3, T5, T7–T8");
        assert_eq!(tid_ranges(&[]), "");
    }
}
