//! Counting distinct values (schedule hashes) in bounded memory.
//!
//! A [`Distinct`] is exact up to [`EXACT_MAX`] values; past that it turns
//! into a HyperLogLog of 2^[`P`] one-byte registers (about ±0.8%). Both
//! forms are functions of the *set* of values added, never of their order,
//! so a campaign, the same campaign with other `--jobs`, and the merge of
//! its shards count the same. The estimate uses only integer arithmetic and
//! IEEE `+ * /` (no libm), so it is the same number on every machine.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Values counted exactly before the sketch turns into registers.
pub const EXACT_MAX: usize = 4096;
/// log2 of the number of registers.
pub const P: u32 = 14;
const M: usize = 1 << P;

/// A distinct count: exact while small, estimated past [`EXACT_MAX`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Distinct {
    /// The values themselves.
    Exact(BTreeSet<u64>),
    /// HyperLogLog registers, as hex (two digits per register).
    #[serde(with = "hex_registers")]
    Estimated(Vec<u8>),
}

impl Default for Distinct {
    fn default() -> Self {
        Distinct::Exact(BTreeSet::new())
    }
}

impl Distinct {
    /// Adds a value.
    pub fn insert(&mut self, v: u64) {
        match self {
            Distinct::Exact(set) => {
                set.insert(v);
                if set.len() > EXACT_MAX {
                    let mut regs = vec![0u8; M];
                    for x in set.iter() {
                        add_register(&mut regs, *x);
                    }
                    *self = Distinct::Estimated(regs);
                }
            }
            Distinct::Estimated(regs) => add_register(regs, v),
        }
    }

    /// Adds every value of `other` (a set union).
    pub fn merge(&mut self, other: &Distinct) {
        match other {
            Distinct::Exact(set) => {
                for v in set {
                    self.insert(*v);
                }
            }
            Distinct::Estimated(theirs) => {
                if let Distinct::Exact(set) = self {
                    let mut regs = vec![0u8; M];
                    for x in set.iter() {
                        add_register(&mut regs, *x);
                    }
                    *self = Distinct::Estimated(regs);
                }
                if let Distinct::Estimated(mine) = self {
                    for (a, b) in mine.iter_mut().zip(theirs) {
                        *a = (*a).max(*b);
                    }
                }
            }
        }
    }

    /// Whether [`Distinct::count`] is an estimate.
    pub fn estimated(&self) -> bool {
        matches!(self, Distinct::Estimated(_))
    }

    /// The number of distinct values (estimated past [`EXACT_MAX`]).
    pub fn count(&self) -> u64 {
        match self {
            Distinct::Exact(set) => set.len() as u64,
            Distinct::Estimated(regs) => estimate(regs),
        }
    }
}

fn add_register(regs: &mut [u8], v: u64) {
    let h = super::splitmix64(v);
    let idx = (h >> (64 - P)) as usize;
    let rest = h << P;
    let rank = if rest == 0 {
        (64 - P + 1) as u8
    } else {
        rest.leading_zeros() as u8 + 1
    };
    if let Some(r) = regs.get_mut(idx) {
        *r = (*r).max(rank);
    }
}

/// The HyperLogLog estimate, with linear counting for small cardinalities.
fn estimate(regs: &[u8]) -> u64 {
    let m = regs.len() as f64;
    // Σ 2^-r exactly, as a 64.64 fixed-point sum.
    let sum: u128 = regs.iter().map(|&r| 1u128 << (64 - r.min(64) as u32)).sum();
    let harmonic = sum as f64 / 18_446_744_073_709_551_616.0;
    let alpha = 0.7213 / (1.0 + 1.079 / m);
    let raw = alpha * m * m / harmonic;
    let zeros = regs.iter().filter(|&&r| r == 0).count();
    let e = if raw <= 2.5 * m && zeros > 0 {
        m * ln(m / zeros as f64)
    } else {
        raw
    };
    (e + 0.5) as u64
}

/// The natural logarithm of a positive finite `x`, from `+ * /` only (so
/// the same on every platform, unlike libm's `ln`).
fn ln(x: f64) -> f64 {
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i64 - 1023;
    // The mantissa scaled into [1, 2).
    let mant = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    // ln(m) = 2 atanh(z), z = (m - 1) / (m + 1) in [0, 1/3).
    let z = (mant - 1.0) / (mant + 1.0);
    let z2 = z * z;
    let mut term = z;
    let mut sum = 0.0;
    let mut k = 1.0;
    for _ in 0..40 {
        sum += term / k;
        term *= z2;
        k += 2.0;
    }
    exp as f64 * std::f64::consts::LN_2 + 2.0 * sum
}

mod hex_registers {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(regs: &[u8], s: S) -> Result<S::Ok, S::Error> {
        let mut t = String::with_capacity(regs.len() * 2);
        for r in regs {
            t.push_str(&format!("{r:02x}"));
        }
        s.serialize_str(&t)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let t = String::deserialize(d)?;
        if t.len() != super::M * 2 {
            return Err(serde::de::Error::custom(format!(
                "expected {} registers",
                super::M
            )));
        }
        (0..t.len())
            .step_by(2)
            .map(|i| {
                u8::from_str_radix(&t[i..i + 2], 16)
                    .ok()
                    .filter(|r| *r <= 64)
                    .ok_or_else(|| serde::de::Error::custom("bad register"))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_then_estimated_within_three_percent() {
        let mut d = Distinct::default();
        for v in 0..EXACT_MAX as u64 {
            d.insert(v * 7);
            d.insert(v * 7);
        }
        assert_eq!(d.count(), EXACT_MAX as u64);
        assert!(!d.estimated());
        for n in [5_000u64, 50_000, 500_000] {
            let mut d = Distinct::default();
            for v in 0..n {
                d.insert(v.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            }
            assert!(d.estimated());
            let err = (d.count() as f64 - n as f64).abs() / n as f64;
            assert!(err < 0.03, "{n}: {} ({err})", d.count());
        }
    }

    #[test]
    fn merging_is_a_union_whatever_the_order() {
        let part = |r: std::ops::Range<u64>| {
            let mut d = Distinct::default();
            for v in r {
                d.insert(v);
            }
            d
        };
        let whole = part(0..9000);
        let (a, b, c) = (part(0..3000), part(2000..6000), part(5000..9000));
        let mut x = a.clone();
        x.merge(&b);
        x.merge(&c);
        let mut y = c.clone();
        y.merge(&a);
        y.merge(&b);
        assert_eq!(x, whole);
        assert_eq!(y, whole);
        // Small unions stay exact.
        let mut s = part(0..10);
        s.merge(&part(5..20));
        assert_eq!(s, part(0..20));
        // Serialized and read back.
        let text = serde_json::to_string(&whole).unwrap();
        assert_eq!(serde_json::from_str::<Distinct>(&text).unwrap(), whole);
        assert!(serde_json::from_str::<Distinct>("{\"estimated\":\"00\"}").is_err());
    }

    #[test]
    fn ln_matches_libm_closely() {
        for x in [1.0, 1.5, 2.0, 3.0, 10.0, 4096.0 / 3.0, 1e6] {
            assert!((ln(x) - f64::ln(x)).abs() < 1e-12, "{x}");
        }
    }
}
