//! The HTML report: one self-contained page (no network, no CDN: the
//! style, the script and the data are all inline) with a swimlane timeline,
//! one lane per thread, the verdict, the configuration, the command that
//! replays the run, and the text diagram of `heddle show`.
//!
//! The page is built by its script from the JSON embedded in it
//! (`<script type="application/json" id="heddle-data">`): each event box
//! shows its step and text; hovering or clicking it shows its source line
//! and stack in the detail panel. The marks are those of the text diagram
//! (`fail`, `seen`, `preempt`, …), as CSS classes `mark-<name>`.

use super::diagram;
use super::source::SourceCache;
use super::timeline::{Group, Timeline};
use super::RunInfo;
use crate::instrument::Frame;
use serde::Serialize;

#[derive(Serialize)]
struct Data<'a> {
    title: String,
    verdict: String,
    verdict_kind: &'a str,
    signature: String,
    replay_command: Option<&'a str>,
    config: &'a [(String, String)],
    threads: Vec<Lane>,
    events: Vec<Box_>,
    notes: Vec<String>,
}

#[derive(Serialize)]
struct Lane {
    tid: u32,
    label: String,
}

#[derive(Serialize)]
struct Box_ {
    /// Position in time order (the column of the box).
    index: usize,
    step: u64,
    last_step: u64,
    tid: u32,
    text: String,
    at: Option<String>,
    function: Option<String>,
    source: Option<String>,
    marks: Vec<&'static str>,
    stack: Vec<String>,
    failing: bool,
}

fn frame_text(f: &Frame) -> String {
    format!("{} ({})", super::timeline::display_fn(f.name()), f.place())
}

fn group_box(tl: &Timeline, gi: usize, index: usize) -> Box_ {
    let g: &Group = &tl.groups[gi];
    let stack = tl.events[g.events.clone()]
        .iter()
        .find(|e| !e.stack.is_empty())
        .map(|e| e.stack.iter().map(frame_text).collect())
        .unwrap_or_default();
    Box_ {
        index,
        step: g.first_step,
        last_step: g.last_step,
        tid: g.tid,
        text: if g.text.is_empty() {
            "⋯".into()
        } else {
            g.text.clone()
        },
        at: g.loc.as_ref().map(|l| l.display()),
        function: g.function.clone(),
        source: g.source.clone(),
        marks: g.marks.iter().map(|m| m.name()).collect(),
        stack,
        failing: tl.failing == Some(gi),
    }
}

/// Escapes text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

const STYLE: &str = r#"
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; margin: 0 0 .3em; }
.verdict { padding: .6em .8em; border-left: 4px solid #c62828; background: #fdecea; margin: .6em 0; }
.verdict.pass { border-color: #2e7d32; background: #e8f5e9; }
code, pre, .ev, .lane-label, #detail { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
pre { background: #f6f8fa; padding: .8em; overflow-x: auto; }
#timeline { overflow-x: auto; border: 1px solid #ddd; margin: .8em 0; }
.lane { display: flex; border-bottom: 1px solid #eee; min-height: 44px; width: max-content; min-width: 100%; }
.lane-label { flex: 0 0 12em; padding: .4em; background: #fafafa; border-right: 1px solid #ddd; position: sticky; left: 0; z-index: 1; }
.track { position: relative; flex: 1 0 auto; }
.ev { position: absolute; top: 6px; width: 150px; height: 30px; overflow: hidden; white-space: nowrap; text-overflow: ellipsis;
      border: 1px solid #90a4ae; border-radius: 3px; background: #eceff1; padding: 1px 4px; cursor: pointer; box-sizing: border-box; }
.ev .step { color: #777; margin-right: .4em; }
.ev:hover, .ev.selected { outline: 2px solid #1565c0; }
.mark-preempt { border-left: 4px solid #00838f; }
.mark-seen, .mark-saw, .mark-stale, .mark-race, .mark-block { background: #fff8e1; border-color: #f9a825; }
.mark-overwrite, .mark-blocked { background: #ffebee; border-color: #e53935; }
.ev.failing, .mark-fail { background: #c62828; color: #fff; border-color: #8e0000; }
.ev.failing .step { color: #fdd; }
#detail { border: 1px solid #ddd; padding: .6em; min-height: 4em; white-space: pre-wrap; background: #fcfcfc; }
table.config td { padding: 0 1em 0 0; font-family: ui-monospace, monospace; font-size: 12px; }
"#;

const SCRIPT: &str = r#"
(function () {
  var data = JSON.parse(document.getElementById('heddle-data').textContent);
  var W = 160;
  var tl = document.getElementById('timeline');
  var detail = document.getElementById('detail');
  var tracks = {};
  data.threads.forEach(function (t) {
    var lane = document.createElement('div');
    lane.className = 'lane';
    lane.id = 'lane-' + t.tid;
    lane.setAttribute('data-tid', t.tid);
    var label = document.createElement('div');
    label.className = 'lane-label';
    label.textContent = t.label;
    var track = document.createElement('div');
    track.className = 'track';
    track.style.width = (data.events.length * W + 10) + 'px';
    lane.appendChild(label);
    lane.appendChild(track);
    tl.appendChild(lane);
    tracks[t.tid] = track;
  });
  function show(e, el) {
    var prev = document.querySelector('.ev.selected');
    if (prev) prev.classList.remove('selected');
    if (el) el.classList.add('selected');
    var lines = ['step ' + e.step + (e.last_step !== e.step ? '-' + e.last_step : '') + '  ' +
                 (data.threads[e.tid] ? data.threads[e.tid].label : 'T' + e.tid) + ': ' + e.text];
    if (e.at) lines.push(e.at + (e.function ? '  in ' + e.function : ''));
    if (e.source) lines.push('    ' + e.source);
    if (e.marks.length) lines.push('marks: ' + e.marks.join(', '));
    if (e.stack.length) { lines.push('stack:'); e.stack.forEach(function (f) { lines.push('  ' + f); }); }
    detail.textContent = lines.join('\n');
  }
  data.events.forEach(function (e) {
    var track = tracks[e.tid];
    if (!track) return;
    var el = document.createElement('div');
    el.className = 'ev' + (e.failing ? ' failing' : '') +
      e.marks.map(function (m) { return ' mark-' + m; }).join('');
    el.id = 'ev-' + e.index;
    el.style.left = (e.index * W + 4) + 'px';
    var s = document.createElement('span');
    s.className = 'step';
    s.textContent = e.step;
    el.appendChild(s);
    el.appendChild(document.createTextNode(e.text));
    el.title = (e.at ? e.at + '  ' : '') + (e.source || '');
    el.addEventListener('mouseenter', function () { show(e, el); });
    el.addEventListener('click', function () { show(e, el); });
    track.appendChild(el);
  });
  var f = data.events.filter(function (e) { return e.failing; })[0];
  if (f) {
    show(f, document.getElementById('ev-' + f.index));
    tl.scrollLeft = Math.max(0, f.index * W - tl.clientWidth / 2);
  }
  document.body.setAttribute('data-ready', 'yes');
})();
"#;

/// Event boxes a page draws at most.
pub const MAX_BOXES: usize = 2000;

/// The groups drawn as boxes: the interesting ones and the failing one; of
/// more than `max`, those with marks that explain the verdict and then the
/// latest.
fn boxes(tl: &Timeline, max: usize) -> Vec<usize> {
    let shown: Vec<usize> = (0..tl.groups.len())
        .filter(|&g| tl.groups[g].interesting || tl.failing == Some(g))
        .collect();
    if shown.len() <= max {
        return shown;
    }
    let key = |g: usize| {
        tl.groups[g]
            .marks
            .iter()
            .filter(|m| **m != super::timeline::Mark::Preempt)
            .map(|m| m.rank())
            .min()
            .unwrap_or(u8::MAX)
    };
    let mut by_rank: Vec<usize> = shown.clone();
    by_rank.sort_by_key(|&g| (key(g), std::cmp::Reverse(g)));
    by_rank.truncate(max);
    by_rank.sort_unstable();
    by_rank
}

/// The whole page. `text` is the text diagram shown under the timeline.
pub fn render(tl: &Timeline, info: &RunInfo, text: &str) -> String {
    let shown = boxes(tl, MAX_BOXES);
    let data = Data {
        title: info.title(),
        verdict: tl.verdict.summary(),
        verdict_kind: tl.verdict.kind(),
        signature: tl.verdict.signature(),
        replay_command: info.replay_command.as_deref(),
        config: &info.config,
        threads: tl
            .threads
            .iter()
            .map(|t| Lane {
                tid: t.tid,
                label: t.label.clone(),
            })
            .collect(),
        events: shown
            .iter()
            .enumerate()
            .map(|(i, &g)| group_box(tl, g, i))
            .collect(),
        notes: tl
            .notes
            .iter()
            .map(|n| format!("{} {}", n.mark.symbol(), n.text))
            .collect(),
    };
    // No `<` inside the script element (`</script>`, `<!--` in a source
    // line); in JSON text `<` only occurs inside strings, where `\u003c`
    // means the same.
    let json = serde_json::to_string(&data)
        .unwrap_or_else(|_| "{}".into())
        .replace('<', "\\u003c");
    let pass = tl.verdict.is_pass();
    let mut config = String::new();
    for (k, v) in &info.config {
        config.push_str(&format!(
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(k),
            escape(v)
        ));
    }
    let notes: String = data
        .notes
        .iter()
        .map(|n| format!("<li>{}</li>", escape(n)))
        .collect();
    let races = if tl.races.is_empty() {
        String::new()
    } else {
        let mut h = format!(
            "<h2>Data races ({})</h2>\n<ul id=\"races\">",
            tl.races.len()
        );
        for r in &tl.races {
            h.push_str(&format!("<li class=\"race\">{}", escape(&r.summary())));
            for (which, a) in [("first", &r.first), ("second", &r.second)] {
                let frames: Vec<String> = if a.stack.is_empty() {
                    vec![format!("{} ({})", a.function, a.site)]
                } else {
                    a.stack.iter().map(frame_text).collect()
                };
                h.push_str(&format!(
                    "<div>{which} {} by {}:<pre>{}</pre></div>",
                    if a.write { "write" } else { "read" },
                    escape(&tl.label(a.tid)),
                    escape(&frames.join("\n"))
                ));
            }
            h.push_str("</li>");
        }
        h.push_str("</ul>\n");
        h
    };
    let interesting = (0..tl.groups.len())
        .filter(|&g| tl.groups[g].interesting || tl.failing == Some(g))
        .count();
    let elided = if tl.gaps.is_empty() && interesting == shown.len() {
        String::new()
    } else {
        let steps: u64 = tl.gap_steps();
        let mut parts: Vec<String> = Vec::new();
        if !tl.gaps.is_empty() {
            parts.push(format!(
                "{} steps in {} stretch{} (only the steps around the marks that explain the verdict and the last ones are kept)",
                diagram::grouped(steps),
                tl.gaps.len(),
                if tl.gaps.len() == 1 { "" } else { "es" }
            ));
        }
        if interesting > shown.len() {
            parts.push(format!(
                "{} of {} events worth drawing (those far from the marks)",
                diagram::grouped((interesting - shown.len()) as u64),
                diagram::grouped(interesting as u64)
            ));
        }
        format!(
            "<p id=\"elided\" class=\"elided\">Left out of this long run: {}. <code>heddle show FILE --context N</code> shows more around each mark, <code>--all</code> every step.</p>\n",
            escape(&parts.join("; "))
        )
    };
    let replay = info
        .replay_command
        .as_deref()
        .map(|c| format!("<p>Replay: <code id=\"replay\">{}</code></p>", escape(c)))
        .unwrap_or_default();
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>heddle: {title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n<div class=\"verdict{cls}\" id=\"verdict\"><b>{kind}</b>: {verdict}</div>\n{replay}<p>Signature: <code>{sig}</code></p>\n<h2>Timeline</h2>\n<p>One lane per thread, in step order; hover or click an event for its source line and stack.</p>\n<div id=\"timeline\"></div>\n<div id=\"detail\">(hover an event)</div>\n{elided}<ul id=\"notes\">{notes}</ul>\n{races}<h2>Configuration</h2>\n<table class=\"config\">{config}</table>\n<details><summary>Text diagram</summary><pre id=\"diagram\">{text}</pre></details>\n<script type=\"application/json\" id=\"heddle-data\">{json}</script>\n<script>{SCRIPT}</script>\n</body>\n</html>\n",
        title = escape(&info.title()),
        cls = if pass { " pass" } else { "" },
        kind = escape(tl.verdict.kind()),
        verdict = escape(&tl.verdict.summary()),
        sig = escape(&tl.verdict.signature()),
        text = escape(text),
    )
}

/// The page for a run: the timeline and, under it, the text diagram
/// (uncoloured, 160 columns).
pub fn page(tl: &Timeline, info: &RunInfo, src: &mut SourceCache) -> String {
    let opts = diagram::Options {
        width: 160,
        max_rows: Some(diagram::MAX_ROWS),
        ..diagram::Options::default()
    };
    let text = super::show_text(tl, info, &opts, src);
    render(tl, info, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
    }
}
