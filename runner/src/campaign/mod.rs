//! Campaigns: many seeded runs of one target, in parallel, sharded across
//! machines, resumable, with statistics.
//!
//! The pure parts live here and in [`state`], [`journal`] and [`summary`]: which seeds a
//! campaign (or one shard of it) runs, which portfolio member runs each seed,
//! the state that aggregates finished runs (and the optional per-run
//! journal), and the summary computed from the state. The
//! parallel driver that executes runs is [`exec`].
//!
//! A campaign is identified by its [`journal::Identity`] (module, run
//! configuration, portfolio, seed range). Everything in the deterministic
//! part of its summary is a function of the identity and of the set of seeds
//! that ran — never of the number of worker threads, of timing, or of how the
//! seeds were split between shards.

pub mod exec;
pub mod feedback;
pub mod journal;
pub mod merge;
pub mod sketch;
pub mod state;
pub mod summary;

use anyhow::{bail, Result};
use std::time::Duration;

/// The splitmix64 finalizer: a well-mixed 64-bit hash of `x`.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One shard `K/N` of a campaign: the seeds whose splitmix64 hash is
/// `K-1` modulo `N`. Hashing (rather than `seed mod N`) keeps every shard
/// a mix of all portfolio members, which are assigned by `seed mod len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shard {
    /// 1-based shard number `K`.
    pub index: u32,
    /// Number of shards `N`.
    pub count: u32,
}

impl Shard {
    /// The whole seed space (`1/1`).
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// Whether `seed` belongs to this shard.
    pub fn contains(&self, seed: u64) -> bool {
        self.count <= 1 || splitmix64(seed) % self.count as u64 == (self.index - 1) as u64
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for Shard {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Shard> {
        let bad = || anyhow::anyhow!("bad shard `{s}` (expected K/N with 1 <= K <= N)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let k: u32 = k.trim().parse().map_err(|_| bad())?;
        let n: u32 = n.trim().parse().map_err(|_| bad())?;
        if n == 0 || k == 0 || k > n {
            return Err(bad());
        }
        Ok(Shard { index: k, count: n })
    }
}

impl Shard {
    /// The shard a job engine assigned to this process, for `--shard
    /// auto` (Slurm array jobs: `SLURM_ARRAY_TASK_ID` counted from
    /// `SLURM_ARRAY_TASK_MIN`, default 0, out of `SLURM_ARRAY_TASK_COUNT`)
    /// and `--shard auto/N` (Kubernetes Indexed Jobs: the 0-based
    /// `JOB_COMPLETION_INDEX` out of N completions; a Slurm array's count,
    /// when given, must equal N). Other specs parse as `K/N`. `env` looks
    /// a variable up (the process environment, or a test's).
    pub fn resolve(spec: &str, env: impl Fn(&str) -> Option<String>) -> Result<Shard> {
        let Some(rest) = spec.strip_prefix("auto") else {
            return spec.parse();
        };
        let given: Option<u32> =
            match rest.strip_prefix('/') {
                Some(n) => Some(n.trim().parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                    anyhow::anyhow!("bad shard `{spec}` (expected auto or auto/N)")
                })?),
                None if rest.is_empty() => None,
                None => bail!("bad shard `{spec}` (expected auto or auto/N)"),
            };
        let num =
            |name: &str| -> Result<Option<u64>> {
                match env(name) {
                    None => Ok(None),
                    Some(v) => v.trim().parse().map(Some).map_err(|_| {
                        anyhow::anyhow!("--shard {spec}: {name}=`{v}` is not a number")
                    }),
                }
            };
        let (index0, count, source) = if let Some(id) = num("SLURM_ARRAY_TASK_ID")? {
            let min = num("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let count = match (num("SLURM_ARRAY_TASK_COUNT")?, given) {
                (Some(c), Some(n)) if c != n as u64 => bail!(
                    "--shard {spec}: SLURM_ARRAY_TASK_COUNT is {c}, not {n}"
                ),
                (Some(c), _) => c,
                (None, Some(n)) => n as u64,
                (None, None) => bail!(
                    "--shard {spec}: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not; give the count as --shard auto/N"
                ),
            };
            let index0 = id.checked_sub(min).ok_or_else(|| {
                anyhow::anyhow!(
                    "--shard {spec}: SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}"
                )
            })?;
            (index0, count, "SLURM_ARRAY_TASK_ID")
        } else if let Some(i) = num("JOB_COMPLETION_INDEX")? {
            let Some(n) = given else {
                bail!("--shard {spec}: JOB_COMPLETION_INDEX is set; give the number of completions as --shard auto/N");
            };
            (i, n as u64, "JOB_COMPLETION_INDEX")
        } else {
            bail!("--shard {spec}: no job engine variables (SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT, or JOB_COMPLETION_INDEX); pass --shard K/N");
        };
        if count == 0 || count > u32::MAX as u64 || index0 >= count {
            bail!(
                "--shard {spec}: {source} gives shard {} of {count}",
                index0 + 1
            );
        }
        Ok(Shard {
            index: index0 as u32 + 1,
            count: count as u32,
        })
    }
}

/// A portfolio of strategies, interleaved over seeds: seed `s` runs member
/// `s mod len`, so the assignment does not depend on the seed range, the
/// shard or the number of workers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Portfolio {
    /// Strategy specs (canonical once calibrated).
    pub members: Vec<String>,
}

/// The portfolio `heddle fuzz` runs when no strategy is given, also named
/// `default`. Chosen from `heddle compare` over the bundled targets (see
/// `benches/RESULTS.md`): site priorities find the bugs hidden among many
/// identical threads and lock cycles, POS and SURW the bugs that need
/// several preemptions at precise points (ABA), random walk the shallow
/// ones; every member makes time choices (`+stall`), so that windows
/// guarded by sleeps are explored too.
pub const DEFAULT_PORTFOLIO: &str = "sites+stall,pos+stall,surw+stall,random+stall";

impl Portfolio {
    /// Parses `random,pct:3,pct:10,rr:0.2` (every member is checked), or
    /// `default` ([`DEFAULT_PORTFOLIO`]).
    pub fn parse(spec: &str) -> Result<Portfolio> {
        let spec = if spec.trim() == "default" {
            DEFAULT_PORTFOLIO
        } else {
            spec
        };
        let mut members = Vec::new();
        for m in spec.split(',') {
            let m = m.trim();
            if m.is_empty() {
                bail!("bad strategy portfolio `{spec}`: empty member");
            }
            crate::sched::parse(m, 1)?;
            members.push(m.to_string());
        }
        Ok(Portfolio { members })
    }

    /// The member index that runs `seed`.
    pub fn member(&self, seed: u64) -> usize {
        (seed % self.members.len().max(1) as u64) as usize
    }
}

/// Which seeds a campaign runs: `[seed_start, seed_start + runs)` (or
/// unbounded), restricted to one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedPlan {
    /// First seed of the campaign (of all shards).
    pub seed_start: u64,
    /// Number of seeds of the whole campaign; `None` is unbounded (a time
    /// budget ends it).
    pub runs: Option<u64>,
    /// The part this process runs.
    pub shard: Shard,
}

impl SeedPlan {
    /// One past the last seed.
    pub fn end(&self) -> u64 {
        match self.runs {
            Some(r) => self.seed_start.saturating_add(r),
            None => u64::MAX,
        }
    }

    /// Whether `seed` is one this plan runs.
    pub fn contains(&self, seed: u64) -> bool {
        seed >= self.seed_start && seed < self.end() && self.shard.contains(seed)
    }

    /// The seeds of this plan, in order.
    pub fn seeds(&self) -> impl Iterator<Item = u64> + '_ {
        (self.seed_start..self.end()).filter(|s| self.shard.contains(*s))
    }
}

/// Parses a duration: `90` or `90s`, `500ms`, `10m`, `2h`.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let t = s.trim();
    let bad = || anyhow::anyhow!("bad duration `{s}` (expected e.g. 90s, 10m, 2h, 500ms)");
    let (num, mult_ms) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1u64)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1000)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60_000)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3_600_000)
    } else {
        (t, 1000)
    };
    let v: f64 = num.trim().parse().map_err(|_| bad())?;
    if !v.is_finite() || v <= 0.0 {
        return Err(bad());
    }
    Ok(Duration::from_millis(
        (v * mult_ms as f64).round().max(1.0) as u64
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_auto_reads_the_job_engine() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let slurm = env(&[
            ("SLURM_ARRAY_TASK_ID", "3"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ]);
        assert_eq!(Shard::resolve("auto", slurm).unwrap().to_string(), "4/4");
        let from_one = env(&[
            ("SLURM_ARRAY_TASK_ID", "1"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_COUNT", "8"),
        ]);
        assert_eq!(Shard::resolve("auto", from_one).unwrap().to_string(), "1/8");
        let k8s = env(&[("JOB_COMPLETION_INDEX", "0")]);
        assert_eq!(Shard::resolve("auto/5", k8s).unwrap().to_string(), "1/5");
        let err = |spec: &str, vars: &'static [(&'static str, &'static str)]| {
            Shard::resolve(spec, env(vars)).unwrap_err().to_string()
        };
        assert!(err("auto", &[("JOB_COMPLETION_INDEX", "0")]).contains("auto/N"));
        assert!(err("auto", &[]).contains("no job engine variables"));
        assert!(err("auto/2", &[("JOB_COMPLETION_INDEX", "2")]).contains("shard 3 of 2"));
        assert!(err("auto/2", &[("JOB_COMPLETION_INDEX", "x")]).contains("not a number"));
        assert!(err(
            "auto/3",
            &[
                ("SLURM_ARRAY_TASK_ID", "0"),
                ("SLURM_ARRAY_TASK_COUNT", "4")
            ]
        )
        .contains("not 3"));
        assert!(err("automatic", &[]).contains("bad shard"));
        assert_eq!(Shard::resolve("2/3", env(&[])).unwrap().to_string(), "2/3");
    }

    #[test]
    fn shards_partition_the_seeds() {
        let shards: Vec<Shard> = (1..=3).map(|k| format!("{k}/3").parse().unwrap()).collect();
        for seed in 0..3000u64 {
            let n = shards.iter().filter(|s| s.contains(seed)).count();
            assert_eq!(n, 1, "seed {seed}");
        }
        // Each shard gets every portfolio member.
        let p = Portfolio::parse("random,pct:3,rr").unwrap();
        for s in &shards {
            let mut seen = [0; 3];
            for seed in (0..300).filter(|x| s.contains(*x)) {
                seen[p.member(seed)] += 1;
            }
            assert!(seen.iter().all(|n| *n > 10), "{s}: {seen:?}");
        }
    }

    #[test]
    fn bad_specs_are_errors() {
        for s in ["0/2", "3/2", "1", "a/b", "1/0", "/", ""] {
            assert!(s.parse::<Shard>().is_err(), "{s}");
        }
        assert_eq!("2/5".parse::<Shard>().unwrap().to_string(), "2/5");
        assert!(Portfolio::parse("random,,pct").is_err());
        assert!(Portfolio::parse("random,bogus").is_err());
        assert_eq!(Portfolio::parse("random, pct:3").unwrap().members.len(), 2);
        assert_eq!(parse_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        for s in ["", "x", "-1s", "0", "5d"] {
            assert!(parse_duration(s).is_err(), "{s}");
        }
    }

    #[test]
    fn seed_plan_covers_its_range() {
        let whole = SeedPlan {
            seed_start: 10,
            runs: Some(100),
            shard: Shard::WHOLE,
        };
        assert_eq!(whole.seeds().count(), 100);
        let parts: usize = (1..=4)
            .map(|k| {
                SeedPlan {
                    shard: Shard { index: k, count: 4 },
                    ..whole
                }
                .seeds()
                .count()
            })
            .sum();
        assert_eq!(parts, 100);
        assert!(!whole.contains(9) && whole.contains(10) && !whole.contains(110));
    }
}
