//! `--format json`: one JSON document on stdout describing what a command
//! found, in the versioned schema of `docs/report-schema.json`
//! ([`SCHEMA_VERSION`]). Human-readable text still goes out, on stderr.
//!
//! Everything in a document is a function of the command line and the
//! target, except `statistics.elapsed_seconds` and
//! `statistics.runs_per_second` (wall time).

use crate::verdict::{RaceReport, Verdict};
use serde::Serialize;

/// The version of the document format; bumped on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// The value of [`Document::format`].
pub const FORMAT_NAME: &str = "heddle-report";

/// `--format`: how a command reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Text for people (the default).
    #[default]
    Text,
    /// One JSON document on stdout (text moves to stderr).
    Json,
}

/// A verdict as the schema describes it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct VerdictDoc {
    /// `pass`, `assertion`, `trap`, `deadlock`, `use-after-free`, …
    pub kind: String,
    /// The stable signature used to deduplicate failures.
    pub signature: String,
    /// One line for people.
    pub summary: String,
}

impl VerdictDoc {
    /// The document form of `v`.
    pub fn of(v: &Verdict) -> VerdictDoc {
        VerdictDoc {
            kind: v.kind().into(),
            signature: v.signature(),
            summary: v.summary(),
        }
    }
}

/// A failure a command found.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FailureDoc {
    /// The seed of the failing run.
    pub seed: u64,
    /// Its verdict.
    pub verdict: VerdictDoc,
    /// The replay file written for it, if any.
    pub replay: Option<String>,
    /// The HTML report written next to it, if any.
    pub report: Option<String>,
    /// The command that reproduces it.
    pub replay_command: Option<String>,
    /// The build that failed (`O0`), in a campaign of several builds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
}

/// One side of a data race.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AccessDoc {
    /// The thread that made the access.
    pub tid: u32,
    /// Whether it wrote.
    pub write: bool,
    /// `file:line` of the access.
    pub site: String,
    /// The function it is in.
    pub function: String,
}

/// A data race.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RaceDoc {
    /// The first seed that showed it.
    pub seed: u64,
    /// The variable raced on, when known.
    pub object: Option<String>,
    /// Its address.
    pub addr: u32,
    /// The earlier access.
    pub first: AccessDoc,
    /// The later access.
    pub second: AccessDoc,
    /// One line for people.
    pub summary: String,
}

impl RaceDoc {
    /// The document form of `r`, seen first with `seed`.
    pub fn of(seed: u64, r: &RaceReport) -> RaceDoc {
        let side = |a: &crate::verdict::RaceAccess| AccessDoc {
            tid: a.tid,
            write: a.write,
            site: a.site.clone(),
            function: a.function.clone(),
        };
        RaceDoc {
            seed,
            object: r.object.clone(),
            addr: r.addr,
            first: side(&r.first),
            second: side(&r.second),
            summary: r.summary(),
        }
    }
}

/// Counts of a command.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct Statistics {
    /// Runs made.
    pub runs: u64,
    /// Runs that did not pass.
    pub failing: u64,
    /// Steps of the run (single-run commands), else null.
    pub steps: Option<u64>,
    /// Decisions of the run (single-run commands), else null.
    pub decisions: Option<u64>,
    /// Preemptions of the run (single-run commands), else null.
    pub preemptions: Option<u64>,
    /// Wall time (not reproducible).
    pub elapsed_seconds: f64,
    /// Runs per wall-clock second (not reproducible).
    pub runs_per_second: f64,
}

/// The document `--format json` prints.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Document {
    /// Always [`FORMAT_NAME`].
    pub format: &'static str,
    /// Always [`SCHEMA_VERSION`].
    pub version: u32,
    /// The version of heddle that wrote the document.
    pub heddle: &'static str,
    /// `run`, `fuzz`, `replay`, …
    pub command: String,
    /// The target as given.
    pub target: String,
    /// The strategy spec the runs used.
    pub strategy: String,
    /// `pass` when nothing failed, else `fail`.
    pub result: &'static str,
    /// The verdict of the run (single-run commands) or of the first
    /// failure (null when a campaign found nothing).
    pub verdict: Option<VerdictDoc>,
    /// The seed of that run or failure.
    pub seed: Option<u64>,
    /// Its replay file.
    pub replay: Option<String>,
    /// Each distinct failure (one per verdict signature) with its replay file.
    pub failures: Vec<FailureDoc>,
    /// Each distinct data race, with the first seed that showed it.
    pub races: Vec<RaceDoc>,
    /// Counts and rates.
    pub statistics: Statistics,
}

impl Document {
    /// An empty document for `command` on `target`.
    pub fn new(command: &str, target: &str, strategy: &str) -> Document {
        Document {
            format: FORMAT_NAME,
            version: SCHEMA_VERSION,
            heddle: env!("CARGO_PKG_VERSION"),
            command: command.into(),
            target: target.into(),
            strategy: strategy.into(),
            result: "pass",
            verdict: None,
            seed: None,
            replay: None,
            failures: Vec::new(),
            races: Vec::new(),
            statistics: Statistics::default(),
        }
    }

    /// The document of one run (`run`, `replay`): its verdict, seed, races
    /// and counts.
    pub fn of_run(
        command: &str,
        target: &str,
        seed: u64,
        r: &crate::runtime::RunResult,
    ) -> Document {
        let mut doc = Document::new(command, target, &r.strategy);
        // As the exit code says: a run that could not conclude (too long,
        // unsupported here) is not a failure; its verdict says which.
        let pass = !r.verdict.is_failure();
        doc.result = if pass { "pass" } else { "fail" };
        doc.verdict = Some(VerdictDoc::of(&r.verdict));
        doc.seed = Some(seed);
        doc.races = r.races.iter().map(|x| RaceDoc::of(seed, x)).collect();
        doc.statistics = Statistics {
            runs: 1,
            failing: u64::from(!pass),
            steps: Some(r.steps),
            decisions: Some(r.decisions.len() as u64),
            preemptions: Some(r.preemptions),
            ..Statistics::default()
        };
        doc
    }

    /// Pretty JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".into())
    }
}

/// Prints `doc` on stdout (the command's text went to stderr).
pub fn emit(doc: &Document) {
    println!("{}", doc.to_json());
}
