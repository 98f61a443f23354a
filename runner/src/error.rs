//! Errors by kind.
//!
//! A caller decides from an error's kind, never from its text: the command
//! line maps the kind to its exit code ([`ErrorKind`]), a campaign counts a
//! run that failed inside heddle apart from a verdict. The layers whose
//! callers branch declare their errors as types:
//!
//! - what the user gave is wrong — `target::TargetError` (a file that is
//!   missing, not a module, an object file, a failing build) and
//!   `trace::replay::ReplayError` (a replay that cannot be read or is not
//!   one);
//! - a replay did not reproduce its recorded run — [`NotReproduced`];
//! - heddle itself failed — [`Internal`].
//!
//! The two kinds that are not about the input are declared here, at the
//! bottom of the crate, so that every layer can raise them and [`kind_of`]
//! needs to know no layer above. Text added with `anyhow`'s context on the
//! way up is for people to read; [`kind_of`] looks through it for the first
//! typed error.

use std::fmt;

/// What kind of failure an error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input is wrong: usage, a missing or malformed file, a failing
    /// build. Also the kind of an error no layer classified: those name
    /// something the user gave.
    Input,
    /// A replay ran but did not follow or end as recorded.
    NotReproduced,
    /// heddle itself failed; nothing is known about the target.
    Internal,
}

/// heddle failed in a way that says nothing about the target or the input:
/// a broken invariant of its own.
#[derive(Debug)]
pub struct Internal(pub String);

impl fmt::Display for Internal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "internal error: {}", self.0)
    }
}

impl std::error::Error for Internal {}

/// A replay that ran but did not give the recorded run (the message says
/// where it diverged).
#[derive(Debug, Clone)]
pub struct NotReproduced(pub String);

impl fmt::Display for NotReproduced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotReproduced {}

/// An [`Internal`] error from a format string, as an `anyhow::Error`.
#[macro_export]
macro_rules! internal {
    ($($arg:tt)*) => {
        ::anyhow::Error::new($crate::error::Internal(format!($($arg)*)))
    };
}

/// The kind of `e`: that of the first [`Internal`] or [`NotReproduced`] in
/// its chain (outermost first), else [`ErrorKind::Input`] (the layers'
/// input errors, and any error no layer typed).
pub fn kind_of(e: &anyhow::Error) -> ErrorKind {
    for cause in e.chain() {
        if cause.is::<Internal>() {
            return ErrorKind::Internal;
        }
        if cause.is::<NotReproduced>() {
            return ErrorKind::NotReproduced;
        }
    }
    ErrorKind::Input
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn the_kind_survives_context_and_the_text_does_not_decide_it() {
        let e = Err::<(), _>(crate::internal!("run ended without an outcome"))
            .context("seed 7")
            .unwrap_err();
        assert_eq!(kind_of(&e), ErrorKind::Internal);
        assert_eq!(
            crate::text::one_line(&e),
            "seed 7: internal error: run ended without an outcome"
        );
        let e = anyhow::Error::new(NotReproduced("verdict differs".into()))
            .context("internal error: words only");
        assert_eq!(kind_of(&e), ErrorKind::NotReproduced);
        let e = anyhow::anyhow!("internal error: a message is not a kind");
        assert_eq!(kind_of(&e), ErrorKind::Input);
        let e = anyhow::Error::new(crate::target::TargetError::NotFound("x.c".into()));
        assert_eq!(kind_of(&e), ErrorKind::Input);
        assert_eq!(crate::text::one_line(&e), "x.c: no such file");
    }
}
