//! `--junit out.xml`: JUnit XML, so that CI systems show each target as a
//! test case, with the failure text and the command that replays it.
//!
//! Several commands may write into one file (`heddle fuzz a.c --junit r.xml;
//! heddle fuzz b.c --junit r.xml`): a file heddle wrote keeps its other test
//! cases and the one of the same name is replaced. Each `<testcase>` is one
//! line, which is what makes merging reliable; cases are sorted by name.

use super::html::escape;
use anyhow::{Context, Result};
use std::path::Path;

/// The first line heddle writes after the XML declaration; marks a file as
/// one heddle may merge into.
const MARK: &str = "<!-- written by heddle -->";

/// One test case: a target and what became of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The target's name (its file stem, or the manifest name).
    pub name: String,
    /// `heddle.fuzz`, `heddle.plan`, …
    pub classname: String,
    /// Seconds taken.
    pub time: f64,
    /// What became of it.
    pub outcome: Outcome,
}

/// What became of a test case.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It passed.
    Pass,
    /// A bug (or an unexpected verdict): `<failure>`.
    Failure {
        /// One line.
        message: String,
        /// The details: what failed, the replay command.
        text: String,
    },
    /// heddle itself failed while running it: `<error>`.
    Error {
        /// One line.
        message: String,
        /// The details.
        text: String,
    },
    /// It did not run (skipped in the project file, or stopped by a
    /// signal first): `<skipped>`.
    Skipped {
        /// Why.
        message: String,
    },
}

/// XML text: escapes markup and writes newlines as character references so
/// each element stays on one line.
fn xml(s: &str) -> String {
    escape(s)
        .replace('\n', "&#10;")
        .replace('\r', "&#13;")
        .chars()
        .filter(|c| *c == '\t' || !c.is_control())
        .collect()
}

impl Case {
    fn line(&self) -> String {
        let head = format!(
            "  <testcase name=\"{}\" classname=\"{}\" time=\"{:.3}\"",
            xml(&self.name),
            xml(&self.classname),
            self.time
        );
        match &self.outcome {
            Outcome::Pass => format!("{head}/>"),
            Outcome::Failure { message, text } => format!(
                "{head}><failure message=\"{}\" type=\"heddle\">{}</failure></testcase>",
                xml(message),
                xml(text)
            ),
            Outcome::Error { message, text } => format!(
                "{head}><error message=\"{}\" type=\"heddle.internal\">{}</error></testcase>",
                xml(message),
                xml(text)
            ),
            Outcome::Skipped { message } => {
                format!("{head}><skipped message=\"{}\"/></testcase>", xml(message))
            }
        }
    }
}

/// The XML of a test suite holding `lines` (test case lines).
fn document(lines: &[String]) -> String {
    let count = |tag: &str| lines.iter().filter(|l| l.contains(tag)).count();
    let (failures, errors, skipped) = (count("><failure "), count("><error "), count("><skipped "));
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{MARK}\n<testsuites tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">\n <testsuite name=\"heddle\" tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">\n",
        n = lines.len()
    );
    for l in lines {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(" </testsuite>\n</testsuites>\n");
    out
}

fn case_name(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("<testcase name=\"")?;
    rest.split('"').next()
}

/// Writes `case` into `path`, merging with the cases of a file heddle wrote
/// there before (a file heddle did not write is replaced).
pub fn write(path: &Path, case: &Case) -> Result<()> {
    let mut lines: Vec<String> = match std::fs::read_to_string(path) {
        Ok(old) if old.lines().nth(1) == Some(MARK) => old
            .lines()
            .filter(|l| l.trim_start().starts_with("<testcase "))
            .map(String::from)
            .collect(),
        _ => Vec::new(),
    };
    let name = xml(&case.name);
    lines.retain(|l| case_name(l) != Some(name.as_str()));
    lines.push(case.line());
    lines.sort_by(|a, b| case_name(a).cmp(&case_name(b)));
    crate::paths::write_atomic(path, document(&lines).as_bytes())
        .with_context(|| format!("{}: cannot write", path.display()))
}

/// Writes `cases` as a new file at `path` (in the order given), replacing
/// whatever was there: for a command that reports many cases at once
/// (`heddle test`).
pub fn write_all(path: &Path, cases: &[Case]) -> Result<()> {
    let lines: Vec<String> = cases.iter().map(Case::line).collect();
    crate::paths::write_atomic(path, document(&lines).as_bytes())
        .with_context(|| format!("{}: cannot write", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_merge_by_name_and_escape() {
        let dir = std::env::temp_dir().join(format!("heddle-junit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("r.xml");
        let case = |name: &str, fail: bool| Case {
            name: name.into(),
            classname: "heddle.fuzz".into(),
            time: 0.5,
            outcome: if fail {
                Outcome::Failure {
                    message: "a < b & \"c\"".into(),
                    text: "line 1\nline 2".into(),
                }
            } else {
                Outcome::Pass
            },
        };
        write(&p, &case("b", true)).unwrap();
        write(&p, &case("a", false)).unwrap();
        write(&p, &case("b", false)).unwrap();
        let x = std::fs::read_to_string(&p).unwrap();
        assert!(x.contains("tests=\"2\" failures=\"0\""), "{x}");
        write(&p, &case("b", true)).unwrap();
        let x = std::fs::read_to_string(&p).unwrap();
        assert!(x.contains("tests=\"2\" failures=\"1\""), "{x}");
        assert!(x.contains("a &lt; b &amp; &quot;c&quot;"));
        assert!(x.contains("line 1&#10;line 2"));
        assert!(x.find("name=\"a\"").unwrap() < x.find("name=\"b\"").unwrap());
        let other = |name: &str, outcome: Outcome| Case {
            name: name.into(),
            classname: "heddle.fuzz".into(),
            time: 0.0,
            outcome,
        };
        let err = Outcome::Error {
            message: "boom".into(),
            text: "seed 3".into(),
        };
        write(&p, &other("c", err)).unwrap();
        let skip = Outcome::Skipped {
            message: "stopped by SIGTERM".into(),
        };
        write(&p, &other("d", skip)).unwrap();
        let x = std::fs::read_to_string(&p).unwrap();
        assert!(
            x.contains("tests=\"4\" failures=\"1\" errors=\"1\" skipped=\"1\""),
            "{x}"
        );
        assert!(x.contains("<error message=\"boom\""), "{x}");
        assert!(
            x.contains("<skipped message=\"stopped by SIGTERM\"/>"),
            "{x}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
