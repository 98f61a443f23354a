//! The scheduler's random stream: xoshiro256** seeded through SplitMix64.
//!
//! Written out here (rather than taken from a crate) so that a seed means the
//! same schedule in every heddle version that keeps this file unchanged,
//! whatever happens to the algorithms behind `rand`'s generic generators.

/// A small, fast, deterministic PRNG (Blackman & Vigna, xoshiro256**).
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator for `seed` on the named `stream`, so that independent
    /// consumers (strategy, preemption budgets, …) never share draws.
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut x = seed ^ stream.wrapping_mul(0xd1b5_4a32_d192_ed03);
        Rng {
            s: [
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
            ],
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, n)` (Lemire's multiply-and-reject). `n` must be > 0.
    /// The rejection threshold (a division) is computed only when a draw
    /// could be rejected: it is below `n`, so a draw whose low half is at
    /// least `n` is kept either way, and the draws are the same.
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let mut m = (self.next_u64() as u128) * (n as u128);
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = (self.next_u64() as u128) * (n as u128);
            }
        }
        (m >> 64) as u64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64) * (1.0 / (1u64 << 53) as f64) < p
    }

    /// Uniform in `[lo, hi]`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
}

/// Stream ids.
pub const STREAM_STRATEGY: u64 = 1;
/// The stream for the preemption budget.
pub const STREAM_BUDGET: u64 = 2;
/// The stream for time choices (`+stall`), apart from the wrapped
/// strategy's so that wrapping changes none of its other answers.
pub const STREAM_TIME: u64 = 4;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let mut a = Rng::new(42, STREAM_STRATEGY);
        let mut b = Rng::new(42, STREAM_STRATEGY);
        for _ in 0..1000 {
            let x = a.below(7);
            assert_eq!(x, b.below(7));
            assert!(x < 7);
        }
        assert_ne!(Rng::new(42, 1).next_u64(), Rng::new(42, 2).next_u64());
    }

    /// The same draws as the textbook form, which divides on every call
    /// (a seed must mean the same schedule in every version).
    #[test]
    fn below_draws_what_the_textbook_form_draws() {
        fn textbook(r: &mut Rng, n: u64) -> u64 {
            let threshold = n.wrapping_neg() % n;
            loop {
                let m = (r.next_u64() as u128) * (n as u128);
                if (m as u64) >= threshold {
                    return (m >> 64) as u64;
                }
            }
        }
        let ns = [
            1,
            2,
            3,
            7,
            100,
            1 << 32,
            (1 << 63) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        for seed in 0..20 {
            let (mut a, mut b) = (Rng::new(seed, 1), Rng::new(seed, 1));
            for i in 0..2_000 {
                let n = ns[i % ns.len()];
                assert_eq!(
                    a.below(n),
                    textbook(&mut b, n),
                    "seed {seed} draw {i} n {n}"
                );
            }
        }
    }

    #[test]
    fn below_is_roughly_uniform() {
        let mut r = Rng::new(1, 1);
        let mut counts = [0u32; 3];
        for _ in 0..30_000 {
            counts[r.below(3) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }
}
