//! A fuzzing campaign as one library call: the driver behind `heddle fuzz`.
//! [`Fuzz::new`] calibrates the strategy portfolio on a loaded target;
//! [`Fuzz::run`] runs the campaign, writes an HTML report beside each
//! failure's replay file, and returns everything found as a
//! [`FuzzReport`], which the text output, the JSON document, JUnit and
//! SARIF are rendered from.

use crate::campaign::exec::{self, Build, Campaign, Outcome};
use crate::campaign::{Portfolio, SeedPlan};
use crate::report::campaign as report;
use crate::report::json::{FailureDoc, RaceDoc};
use crate::report::junit::Outcome as JunitOutcome;
use crate::runtime::{Program, RunConfig};
use crate::target::Target;
use anyhow::Result;
use std::path::PathBuf;

/// One build of a fuzzed target: the module and its calibrated portfolio.
pub struct FuzzBuild {
    /// How summaries name the build (`O0`); empty for a campaign of one.
    pub label: String,
    /// The target (named in replay files and reports).
    pub target: Target,
    /// The compiled program.
    pub program: Program,
    /// The portfolio, each member calibrated on this build (PCT's `k`).
    pub portfolio: Portfolio,
}

/// A campaign that owns its builds of the target, each portfolio calibrated.
pub struct Fuzz {
    /// The builds the campaign alternates (at least one).
    pub builds: Vec<FuzzBuild>,
    /// Run configuration; `seed` and `strategy` are set per run.
    pub base: RunConfig,
    /// Which seeds to run.
    pub plan: SeedPlan,
    /// Whether to collect every failure (else stop at the first).
    pub keep_going: bool,
}

/// Calibrates every member of the portfolio `spec` (PCT's `k`) on `program`
/// under `base`.
pub fn calibrated_portfolio(program: &Program, base: &RunConfig, spec: &str) -> Result<Portfolio> {
    let p = Portfolio::parse(spec)?;
    let mut members = Vec::new();
    let mut probes = crate::runtime::Probes::default();
    for m in &p.members {
        let cfg = program.calibrate_with(
            RunConfig {
                strategy: m.clone(),
                ..base.clone()
            },
            &mut probes,
        )?;
        members.push(cfg.strategy);
    }
    Ok(Portfolio { members })
}

impl Fuzz {
    /// A campaign of `program` (built from `target`) over the strategy
    /// portfolio `strategy` (`random,pct:3`, …), calibrated now.
    pub fn new(
        target: Target,
        program: Program,
        base: RunConfig,
        strategy: &str,
        plan: SeedPlan,
        keep_going: bool,
    ) -> Result<Fuzz> {
        Fuzz::of_builds(
            vec![(String::new(), target, program)],
            base,
            strategy,
            plan,
            keep_going,
        )
    }

    /// A campaign that alternates several builds of one target, each named
    /// by its label (`O0`, `O1`), the portfolio calibrated on each.
    pub fn of_builds(
        builds: Vec<(String, Target, Program)>,
        base: RunConfig,
        strategy: &str,
        plan: SeedPlan,
        keep_going: bool,
    ) -> Result<Fuzz> {
        let mut out = Vec::new();
        for (label, target, program) in builds {
            let portfolio = calibrated_portfolio(&program, &base, strategy)?;
            out.push(FuzzBuild {
                label,
                target,
                program,
                portfolio,
            });
        }
        anyhow::ensure!(!out.is_empty(), "a campaign needs at least one build");
        // A deadline bounds calibration only; the campaign has its own.
        let base = RunConfig {
            deadline: None,
            ..base
        };
        Ok(Fuzz {
            builds: out,
            base,
            plan,
            keep_going,
        })
    }

    /// The target the campaign is named after (its first build).
    pub fn target(&self) -> &Target {
        &self.builds[0].target
    }

    /// The campaign driver's view of this campaign.
    pub fn campaign(&self) -> Campaign<'_> {
        Campaign {
            builds: self
                .builds
                .iter()
                .map(|b| Build {
                    label: b.label.clone(),
                    target: &b.target,
                    program: &b.program,
                    portfolio: b.portfolio.clone(),
                })
                .collect(),
            base: self.base.clone(),
            plan: self.plan,
            keep_going: self.keep_going,
        }
    }

    /// Runs the campaign (or continues it, with `opts.resume`) in
    /// `opts.out`, and writes the HTML report of each failure beside its
    /// replay file.
    pub fn run(self, opts: &exec::Options) -> Result<FuzzReport> {
        let c = self.campaign();
        let outcome = c.run(opts)?;
        let reports = report::write_reports(&c, &outcome, &opts.out)?;
        let failures = report::failure_docs(&outcome, &opts.out, &reports);
        Ok(FuzzReport {
            fuzz: self,
            outcome,
            out: opts.out.clone(),
            reports,
            failures,
        })
    }
}

/// What a fuzzing session found: the campaign's outcome (summary, state,
/// timing, each distinct failure with its diagnostic run), the files it
/// wrote, and what the exit code is decided from.
pub struct FuzzReport {
    /// The campaign that ran.
    pub fuzz: Fuzz,
    /// The session's outcome.
    pub outcome: Outcome,
    /// The campaign directory: replay files, state, summary.
    pub out: PathBuf,
    /// The HTML report of each failure of `outcome.failures` (None when it
    /// has no replay file, or its run is too long to draw).
    pub reports: Vec<Option<PathBuf>>,
    /// One document per failure of `outcome.failures`, with its replay file
    /// and report.
    pub failures: Vec<FailureDoc>,
}

/// A replay file a campaign wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenReplay {
    /// The replay file.
    pub path: PathBuf,
    /// The seed it records.
    pub seed: u64,
}

impl FuzzReport {
    /// Failing runs of the whole campaign (not only this session).
    pub fn failing(&self) -> u64 {
        self.outcome.summary.stats.failing_runs
    }

    /// Runs of the campaign that failed inside heddle (no verdict).
    pub fn error_runs(&self) -> u64 {
        self.outcome.summary.stats.error_runs
    }

    /// The signal that stopped the session before its plan was done.
    pub fn interrupted(&self) -> Option<i32> {
        self.outcome.interrupted
    }

    /// The replay file of each distinct failure that has one, in the order
    /// of `outcome.failures`.
    pub fn replays(&self) -> Vec<WrittenReplay> {
        self.outcome
            .failures
            .iter()
            .filter(|(f, _)| !f.replay.is_empty())
            .map(|(f, _)| WrittenReplay {
                path: self.out.join(&f.replay),
                seed: f.first_seed,
            })
            .collect()
    }

    /// The name of the target's test case in JUnit (its file stem).
    pub fn target_name(&self) -> String {
        self.fuzz
            .target()
            .given
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "target".into())
    }

    /// The JUnit outcome of the campaign.
    pub fn junit_outcome(&self) -> JunitOutcome {
        report::junit_outcome(&self.outcome, &self.failures)
    }

    /// Each distinct data race as a document, from a re-run of its first
    /// seed with stacks recorded.
    pub fn race_docs(&self) -> Result<Vec<RaceDoc>> {
        report::race_docs(&self.fuzz.campaign(), &self.outcome.summary)
    }
}
