//! Helpers for the `peers` bench, which measures heddle against
//! [shuttle](https://crates.io/crates/shuttle) on the same programs,
//! side by side in one invocation: `cargo bench -p heddle-peers --bench peers`
//! (or `benches/peers.sh`, which also writes `benches/RESULTS.md`).
//!
//! The shuttle ports of the programs live in `shuttle_programs.rs`, shared by
//! the bench and the tests; shuttle is a dev-dependency only, so nothing here
//! names it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One program measured by the bench: the C source heddle compiles and the
/// same logic written against shuttle's `sync` and `thread` modules.
#[derive(Clone, Copy)]
pub struct Case {
    /// Row label in the table, e.g. `race_bank 2×2 (fixed)`.
    pub name: &'static str,
    /// C source, relative to the workspace root.
    pub source: &'static str,
    /// Arguments after `--`.
    pub args: &'static [&'static str],
    /// Whether heddle builds the `-DFIXED` variant (`--fixed`).
    pub fixed: bool,
    /// One execution of the program under shuttle; panics on a failed check.
    pub shuttle: fn(),
    /// A long run (10^6 steps and more): measured over few runs, and
    /// checked under shuttle at a smaller size.
    pub long: bool,
}

/// The first stdout line of `heddle fuzz`, e.g.
/// `20000 runs in 0.78s (25796 runs/s, 1 jobs), strategy random: 0 failing`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FuzzSummary {
    pub runs: u64,
    pub secs: f64,
    pub runs_per_sec: f64,
    pub failing: u64,
}

/// Parses the summary line of `heddle fuzz`; `None` if it is not one.
pub fn parse_fuzz_summary(line: &str) -> Option<FuzzSummary> {
    let (runs, rest) = line.trim().split_once(" runs in ")?;
    let (secs, rest) = rest.split_once("s (")?;
    let (rate, rest) = rest.split_once(" runs/s")?;
    let (_, rest) = rest.split_once(": ")?;
    let failing = rest.strip_suffix(" failing")?;
    Some(FuzzSummary {
        runs: runs.parse().ok()?,
        secs: secs.parse().ok()?,
        runs_per_sec: rate.parse().ok()?,
        failing: failing.parse().ok()?,
    })
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

/// The heddle binary: `$HEDDLE`, or the release build in the target
/// directory cargo would use, built if it is not there.
pub fn heddle_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("HEDDLE") {
        return PathBuf::from(p);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let bin = target.join("release/heddle");
    if !bin.is_file() {
        eprintln!("building {}", bin.display());
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let st = Command::new(cargo)
            .args(["build", "--release", "-p", "heddle"])
            .current_dir(workspace_root())
            .status()
            .expect("run cargo");
        assert!(st.success(), "cargo build --release -p heddle failed");
        assert!(bin.is_file(), "no heddle binary at {}", bin.display());
    }
    bin
}

/// Median of `xs` (mean of the middle two for an even count); NaN if empty.
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// How many runs take about `secs` at `runs_per_sec`, at least 1.
pub fn runs_for(runs_per_sec: f64, secs: f64) -> u64 {
    (runs_per_sec * secs).round().max(1.0) as u64
}

/// Per-round runs/s of both tools for one program.
pub struct Row {
    pub program: String,
    pub heddle: Vec<f64>,
    pub shuttle: Vec<f64>,
}

impl Row {
    /// heddle/shuttle runs/s of each round.
    pub fn ratios(&self) -> Vec<f64> {
        self.heddle
            .iter()
            .zip(&self.shuttle)
            .map(|(h, s)| h / s)
            .collect()
    }
}

/// A runs/s figure: whole runs, but two decimals below 10 (a long run
/// takes seconds).
pub fn rate(runs_per_sec: f64) -> String {
    if runs_per_sec < 10.0 {
        format!("{runs_per_sec:.2}")
    } else {
        format!("{runs_per_sec:.0}")
    }
}

/// A markdown table: medians of each tool's runs/s, the median of the
/// per-round ratios, and every round's ratio.
pub fn markdown_table(rows: &[Row]) -> String {
    let mut t = String::from(
        "| program | heddle runs/s (median) | shuttle runs/s (median) \
         | heddle / shuttle (median) | per round |\n|---|---:|---:|---:|---|\n",
    );
    for r in rows {
        let ratios = r.ratios();
        let each: Vec<String> = ratios.iter().map(|x| format!("{x:.2}")).collect();
        t.push_str(&format!(
            "| {} | {} | {} | {:.2}× | {} |\n",
            r.program,
            rate(median(&r.heddle)),
            rate(median(&r.shuttle)),
            median(&ratios),
            each.join(", ")
        ));
    }
    t
}

/// A `key = number` line of a `campaign.toml`, e.g. `steps_per_run`.
pub fn campaign_stat(toml: &str, key: &str) -> Option<f64> {
    toml.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// How many scheduling points each tool went through per run of one
/// program: heddle's steps (every yield point the host saw), decisions
/// (those with more than one thread to choose from) and thread switches;
/// shuttle's calls to its scheduler, those with more than one runnable
/// task, and those that chose another task than the current one. With each
/// tool's runs/s, a run's time per switch.
pub struct Points {
    pub program: String,
    pub heddle_steps: f64,
    pub heddle_decisions: f64,
    pub heddle_switches: f64,
    pub heddle_runs_per_sec: f64,
    pub shuttle_points: f64,
    pub shuttle_decisions: f64,
    pub shuttle_switches: f64,
    pub shuttle_runs_per_sec: f64,
}

/// A markdown table of [`Points`], with each tool's run time per switch
/// (µs: the time of a run over its switches, everything included).
pub fn points_table(rows: &[Points]) -> String {
    let mut t = String::from(
        "| program | heddle steps / run | heddle decisions / run | heddle switches / run \
         | shuttle points / run | shuttle decisions / run | shuttle switches / run \
         | µs of a run per switch: heddle | shuttle |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let per_switch = |runs_per_sec: f64, switches: f64| 1e6 / (runs_per_sec * switches);
    for r in rows {
        t.push_str(&format!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} |\n",
            r.program,
            r.heddle_steps,
            r.heddle_decisions,
            r.heddle_switches,
            r.shuttle_points,
            r.shuttle_decisions,
            r.shuttle_switches,
            per_switch(r.heddle_runs_per_sec, r.heddle_switches),
            per_switch(r.shuttle_runs_per_sec, r.shuttle_switches),
        ));
    }
    t
}

/// `old` with the text between the `begin` and `end` markers replaced by
/// `body`; if the markers are missing, `heading` and a marked section are
/// appended at the end.
pub fn replace_section(old: &str, begin: &str, end: &str, heading: &str, body: &str) -> String {
    let block = format!("{begin}\n{body}{end}");
    match (old.find(begin), old.find(end)) {
        (Some(b), Some(e)) if b < e => format!("{}{block}{}", &old[..b], &old[e + end.len()..]),
        _ => format!("{old}\n{heading}\n\n{block}\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_campaign_stat_and_tabulates_points() {
        let toml = "decisions = 73586\ndecisions_per_run = 367.93\nsteps_per_run = 832.47\n";
        assert_eq!(campaign_stat(toml, "steps_per_run"), Some(832.47));
        assert_eq!(campaign_stat(toml, "decisions_per_run"), Some(367.93));
        assert_eq!(campaign_stat(toml, "decisions"), Some(73586.0));
        assert_eq!(campaign_stat(toml, "steps"), None);
        let t = points_table(&[Points {
            program: "p".into(),
            heddle_steps: 832.47,
            heddle_decisions: 367.93,
            heddle_switches: 250.0,
            heddle_runs_per_sec: 8000.0,
            shuttle_points: 208.0,
            shuttle_decisions: 150.2,
            shuttle_switches: 100.0,
            shuttle_runs_per_sec: 20000.0,
        }]);
        // 1e6 / (8000 × 250) = 0.5 µs; 1e6 / (20000 × 100) = 0.5 µs.
        assert!(
            t.ends_with("| p | 832 | 368 | 250 | 208 | 150 | 100 | 0.50 | 0.50 |\n"),
            "{t}"
        );
    }

    #[test]
    fn parses_the_summary_line() {
        let s = parse_fuzz_summary(
            "20000 runs in 0.78s (25796 runs/s, 1 jobs), strategy random: 0 failing",
        )
        .unwrap();
        assert_eq!(
            s,
            FuzzSummary {
                runs: 20000,
                secs: 0.78,
                runs_per_sec: 25796.0,
                failing: 0
            }
        );
        let s =
            parse_fuzz_summary("1 runs in 0.00s (365 runs/s, 1 jobs), strategy random: 1 failing")
                .unwrap();
        assert_eq!(s.failing, 1);
        assert_eq!(parse_fuzz_summary("summary: out/campaign.toml"), None);
        assert_eq!(parse_fuzz_summary(""), None);
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn runs_for_is_at_least_one() {
        assert_eq!(runs_for(1000.0, 1.5), 1500);
        assert_eq!(runs_for(0.1, 1.0), 1);
    }

    #[test]
    fn table_has_medians_and_per_round_ratios() {
        let t = markdown_table(&[Row {
            program: "p".into(),
            heddle: vec![100.0, 300.0, 200.0],
            shuttle: vec![100.0, 100.0, 100.0],
        }]);
        assert!(
            t.ends_with("| p | 200 | 100 | 2.00× | 1.00, 3.00, 2.00 |\n"),
            "{t}"
        );
    }

    #[test]
    fn section_is_replaced_or_appended() {
        let (b, e, h) = ("<!-- x:begin -->", "<!-- x:end -->", "## X");
        let appended = replace_section("# R\n", b, e, h, "one\n");
        assert_eq!(
            appended,
            "# R\n\n## X\n\n<!-- x:begin -->\none\n<!-- x:end -->\n"
        );
        let replaced = replace_section(&appended, b, e, h, "two\n");
        assert_eq!(
            replaced,
            "# R\n\n## X\n\n<!-- x:begin -->\ntwo\n<!-- x:end -->\n"
        );
    }
}
