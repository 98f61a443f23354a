//! Traces: the decisions θ of a run (the schedule) and, when requested, the
//! events it executed; and the replay file that carries θ to another machine.

pub mod replay;

use crate::instrument::SiteId;
use crate::model::{EventKind, Tid, NO_SITE};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// One decision of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Decision {
    /// Thread `tid` ran next, about to execute `site`; it was one of
    /// `options` enabled threads.
    Thread {
        /// The thread that ran.
        tid: Tid,
        /// The site it was about to execute.
        site: SiteId,
        /// How many threads were enabled.
        options: u32,
    },
    /// Thread `tid` at `site` chose `value` in `[0, options)` (a notify's
    /// waiter, a `heddle_choose`).
    Value {
        /// The thread that chose.
        tid: Tid,
        /// Where.
        site: SiteId,
        /// The value chosen.
        value: u32,
        /// How many values there were to choose from.
        options: u32,
    },
}

impl Decision {
    /// The site the decision was made at.
    pub fn site(&self) -> SiteId {
        match *self {
            Decision::Thread { site, .. } | Decision::Value { site, .. } => site,
        }
    }
    /// The thread that was running (or chose).
    pub fn tid(&self) -> Tid {
        match *self {
            Decision::Thread { tid, .. } | Decision::Value { tid, .. } => tid,
        }
    }
}

impl std::fmt::Display for Decision {
    /// `T@S/N` for a thread decision, `=V/N:T@S` for a value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let site = |s: SiteId| {
            if s == NO_SITE {
                "-".to_string()
            } else {
                s.to_string()
            }
        };
        match *self {
            Decision::Thread {
                tid,
                site: s,
                options,
            } => write!(f, "{tid}@{}/{options}", site(s)),
            Decision::Value {
                tid,
                site: s,
                value,
                options,
            } => {
                write!(f, "={value}/{options}:{tid}@{}", site(s))
            }
        }
    }
}

impl std::str::FromStr for Decision {
    type Err = anyhow::Error;
    fn from_str(tok: &str) -> Result<Decision> {
        let parse_site = |s: &str| -> Result<SiteId> {
            if s == "-" {
                Ok(NO_SITE)
            } else {
                s.parse().with_context(|| format!("bad site `{s}`"))
            }
        };
        let num =
            |s: &str| -> Result<u32> { s.parse().with_context(|| format!("bad number `{s}`")) };
        if let Some(rest) = tok.strip_prefix('=') {
            let (vn, ts) = rest.split_once(':').context("missing `:`")?;
            let (v, n) = vn.split_once('/').context("missing `/`")?;
            let (t, s) = ts.split_once('@').context("missing `@`")?;
            Ok(Decision::Value {
                value: num(v)?,
                options: num(n)?,
                tid: num(t)?,
                site: parse_site(s)?,
            })
        } else {
            let (t, rest) = tok.split_once('@').context("missing `@`")?;
            let (s, n) = rest.split_once('/').context("missing `/`")?;
            Ok(Decision::Thread {
                tid: num(t)?,
                site: parse_site(s)?,
                options: num(n)?,
            })
        }
    }
}

/// θ as compact text: decisions separated by spaces, wrapped every 16.
pub fn encode_decisions(ds: &[Decision]) -> String {
    let mut out = String::new();
    for (i, d) in ds.iter().enumerate() {
        if i > 0 {
            out.push(if i % 16 == 0 { '\n' } else { ' ' });
        }
        out.push_str(&d.to_string());
    }
    out
}

/// Parses [`encode_decisions`] output.
pub fn decode_decisions(text: &str) -> Result<Vec<Decision>> {
    let mut out = Vec::new();
    for (i, tok) in text.split_whitespace().enumerate() {
        let d: Decision = tok
            .parse()
            .with_context(|| format!("decision {i} (`{tok}`) is malformed"))?;
        if let Decision::Thread { options: 0, .. } | Decision::Value { options: 0, .. } = d {
            bail!("decision {i} (`{tok}`) has no options");
        }
        out.push(d);
    }
    Ok(out)
}

/// One executed event (recorded only when a run asks for events).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Global step number at which it executed.
    pub step: u64,
    /// The thread.
    pub tid: Tid,
    /// The instruction.
    pub site: SiteId,
    /// What it did.
    pub kind: EventKind,
    /// The address accessed (0 when none).
    pub addr: u32,
    /// Bytes accessed.
    pub len: u32,
    /// The value in memory at `addr` right after the access (up to 8 bytes,
    /// little-endian), when known.
    pub value: Option<u64>,
    /// The thread was switched to at this step without its previous thread
    /// having blocked or ended: a preemption.
    pub preempted: bool,
}

/// A 64-bit hash of the decision sequence: the identity of a schedule (for
/// "distinct schedules seen" statistics). Two multiplications per decision
/// (a byte-wise hash took several percent of a run with a thousand
/// decisions).
pub fn schedule_hash(ds: &[Decision]) -> u64 {
    let mut h = ScheduleHash::default();
    for d in ds {
        h.add(d);
    }
    h.value()
}

/// [`schedule_hash`] computed as the decisions are made, without keeping
/// them: a run counts and hashes its schedule whether or not it keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleHash(u64);

impl Default for ScheduleHash {
    fn default() -> Self {
        ScheduleHash(0xcbf2_9ce4_8422_2325)
    }
}

impl ScheduleHash {
    /// Adds the next decision.
    #[inline]
    pub fn add(&mut self, d: &Decision) {
        fn mix(x: u64) -> u64 {
            (x ^ (x >> 31)).wrapping_mul(0xd6e8_feb8_6659_fd93)
        }
        let (tid, site, options, value) = match *d {
            Decision::Thread { tid, site, options } => (tid, site, options, 0),
            Decision::Value {
                tid,
                site,
                value,
                options,
            } => (tid ^ 0x8000_0000, site, options, value),
        };
        self.0 = mix(self.0 ^ (tid as u64 | (site as u64) << 32));
        self.0 = mix(self.0 ^ (options as u64 | (value as u64) << 32));
    }

    /// The hash of the decisions added so far.
    pub fn value(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_round_trip() {
        let ds = vec![
            Decision::Thread {
                tid: 1,
                site: 24,
                options: 2,
            },
            Decision::Thread {
                tid: 0,
                site: NO_SITE,
                options: 3,
            },
            Decision::Value {
                tid: 2,
                site: 40,
                value: 1,
                options: 3,
            },
        ];
        let text = encode_decisions(&ds);
        assert_eq!(text, "1@24/2 0@-/3 =1/3:2@40");
        assert_eq!(decode_decisions(&text).unwrap(), ds);
        assert!(decode_decisions("1@x/2").is_err());
        assert!(decode_decisions("1@2/0").is_err());
        assert!(decode_decisions("garbage").is_err());
    }
}
