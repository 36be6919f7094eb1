//! Order-independent accumulators. Classes arrive in a different order from run to run (the
//! check reuses cached groupings), so every sum a score depends on must give bit-identical results
//! for any order of its terms:
//!
//! * [`ExactSum`]: fixed point with 2^-40 resolution in an `i128` (magnitudes up to ~10^26), for
//!   logarithms and entropies. Tables multiply integer counts by fixed-point units ([`to_fixed`])
//!   and add them as integers, without any rounding, which lets a sum over classes equal the same
//!   sum over values exactly (the basis of the exact lower bounds);
//! * [`WideSum`]: an exact sum of non-negative `count · x` terms over the whole `f64` range (a
//!   2,304-bit integer), correctly rounded at the end, for Ambiguity whose terms span hundreds of
//!   orders of magnitude.

/// Scale of the fixed-point representation used by [`ExactSum`].
const FIXED_SCALE: f64 = (1u64 << 40) as f64;

/// The fixed-point value of 1.0.
pub(crate) const FIXED_ONE: i128 = 1 << 40;

/// Converts a float to fixed point (rounded to the nearest 2^-40).
#[inline]
pub(crate) fn to_fixed(x: f64) -> i128 {
    (x * FIXED_SCALE).round() as i128
}

/// Converts a fixed-point value back to a float (monotone in its argument).
#[inline]
pub(crate) fn from_fixed(f: i128) -> f64 {
    f as f64 / FIXED_SCALE
}

/// `k · log2 k` in fixed point (0 for k ≤ 1); shared by every model that needs it so that equal
/// class sizes always contribute identical terms.
#[inline]
pub(crate) fn fixed_k_log_k(k: u64) -> i128 {
    if k <= 1 {
        0
    } else {
        let k = k as f64;
        to_fixed(k * k.log2())
    }
}

/// Order-independent sum of floats: every term is converted to fixed point (2^-40 resolution)
/// and added as an integer, so any summation order gives bit-identical results.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExactSum(i128);

impl ExactSum {
    /// Adds a term (rounded to the nearest 2^-40).
    #[inline]
    pub fn add(&mut self, x: f64) {
        self.0 += to_fixed(x);
    }

    /// The sum in fixed point.
    pub(crate) fn fixed(self) -> i128 {
        self.0
    }

    /// The sum as a float.
    pub fn value(self) -> f64 {
        from_fixed(self.0)
    }
}

/// Number of 64-bit limbs of a [`WideSum`]: bit 0 has weight 2^-1074 (the smallest subnormal);
/// finite terms reach bit 2,045 + 117 (53-bit mantissa × 64-bit count), plus 64 bits of carries.
const WIDE_LIMBS: usize = 36;

/// Exact sum of non-negative terms `count · x` (x finite) as a big integer in units of 2^-1074.
/// [`WideSum::value`] rounds correctly, so the result depends only on the multiset of terms and is
/// monotone in the exact sum.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WideSum {
    limbs: [u64; WIDE_LIMBS],
}

impl Default for WideSum {
    fn default() -> Self {
        WideSum {
            limbs: [0; WIDE_LIMBS],
        }
    }
}

impl WideSum {
    /// Adds `count · x`; `x` must be finite and non-negative (other values are ignored).
    #[inline]
    pub(crate) fn add(&mut self, count: u64, x: f64) {
        if count == 0 || !(x > 0.0 && x.is_finite()) {
            return;
        }
        let bits = x.to_bits();
        let exp = ((bits >> 52) & 0x7ff) as usize;
        let frac = bits & ((1u64 << 52) - 1);
        // x = m · 2^(shift − 1074).
        let (m, shift) = if exp == 0 {
            (frac, 0)
        } else {
            (frac | (1u64 << 52), exp - 1)
        };
        let p = count as u128 * m as u128;
        let (lo, hi) = (p as u64, (p >> 64) as u64);
        let (mut idx, off) = (shift / 64, shift % 64);
        let parts = if off == 0 {
            [lo, hi, 0]
        } else {
            [
                lo << off,
                (lo >> (64 - off)) | (hi << off),
                hi >> (64 - off),
            ]
        };
        let mut carry = 0u64;
        for part in parts {
            let (s1, c1) = self.limbs[idx].overflowing_add(part);
            let (s2, c2) = s1.overflowing_add(carry);
            self.limbs[idx] = s2;
            carry = c1 as u64 + c2 as u64;
            idx += 1;
        }
        while carry > 0 && idx < WIDE_LIMBS {
            let (s, c) = self.limbs[idx].overflowing_add(carry);
            self.limbs[idx] = s;
            carry = c as u64;
            idx += 1;
        }
    }

    /// The sum, correctly rounded to the nearest float (infinite beyond `f64::MAX`).
    pub(crate) fn value(&self) -> f64 {
        let Some(top_limb) = (0..WIDE_LIMBS).rev().find(|&i| self.limbs[i] != 0) else {
            return 0.0;
        };
        let top_bit = top_limb * 64 + 63 - self.limbs[top_limb].leading_zeros() as usize;
        if top_bit < 64 {
            return ldexp(self.limbs[0] as f64, -1074);
        }
        // The 64 bits below and including the top bit, with a sticky bit for everything below
        // them: converting that to f64 rounds exactly like the full number would.
        let s = top_bit - 63;
        let (li, off) = (s / 64, s % 64);
        let mut window = if off == 0 {
            self.limbs[li]
        } else {
            (self.limbs[li] >> off) | (self.limbs[li + 1] << (64 - off))
        };
        let sticky = self.limbs[..li].iter().any(|&l| l != 0)
            || (off > 0 && self.limbs[li] & ((1u64 << off) - 1) != 0);
        if sticky {
            window |= 1;
        }
        ldexp(window as f64, s as i32 - 1074)
    }
}

/// x · 2^e, exact unless the result overflows or is subnormal.
fn ldexp(mut x: f64, mut e: i32) -> f64 {
    while e > 1000 {
        x *= 2f64.powi(1000);
        e -= 1000;
    }
    while e < -1000 {
        x *= 2f64.powi(-1000);
        e += 1000;
    }
    x * 2f64.powi(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn exact_sum_is_order_independent() {
        let xs = [0.1, 1e9 / 3.0, -2.5, 7.0 / 11.0, 1e-9];
        let mut a = ExactSum::default();
        let mut b = ExactSum::default();
        for x in xs {
            a.add(x);
        }
        for x in xs.iter().rev() {
            b.add(*x);
        }
        assert_eq!(a.value().to_bits(), b.value().to_bits());
        assert!((a.value() - xs.iter().sum::<f64>()).abs() < 1e-9);
    }

    #[test]
    fn wide_sum_spans_the_float_range() {
        let mut s = WideSum::default();
        s.add(3, 1e300);
        s.add(1, 1.0);
        s.add(2, 0.25);
        assert_eq!(s.value(), 3.0 * 1e300);
        let mut t = WideSum::default();
        t.add(1, 1.0);
        t.add(4, 0.125);
        t.add(1_000_000, 2.0f64.powi(-60));
        // Correctly rounded, like a single float addition of the exact parts.
        assert_eq!(t.value(), 1.5 + 1_000_000.0 * 2.0f64.powi(-60));
        assert_eq!(WideSum::default().value(), 0.0);
        let mut u = WideSum::default();
        u.add(u64::MAX, f64::MAX);
        assert!(u.value().is_infinite());
    }

    #[test]
    fn wide_sum_rounds_ties_to_even_and_uses_sticky_bits() {
        // 2^53 + 1 is a tie between 2^53 and 2^53 + 2: rounds to even (2^53).
        let mut a = WideSum::default();
        a.add(1, 2.0f64.powi(53));
        a.add(1, 1.0);
        assert_eq!(a.value(), 2.0f64.powi(53));
        // A tiny extra term breaks the tie upwards.
        a.add(1, 2.0f64.powi(-1000));
        assert_eq!(a.value(), 2.0f64.powi(53) + 2.0);
    }

    proptest! {
        #[test]
        fn wide_sum_matches_integer_arithmetic(terms in prop::collection::vec((0u64..1000, 0u64..(1 << 40)), 0..40)) {
            let mut s = WideSum::default();
            let mut exact: u128 = 0;
            for &(k, x) in &terms {
                s.add(k, x as f64 * 0.5);
                exact += k as u128 * x as u128;
            }
            // exact/2 correctly rounded: compare against the f64 of the integer, halved.
            prop_assert_eq!(s.value(), exact as f64 * 0.5);
        }

        #[test]
        fn wide_sum_is_order_independent(terms in prop::collection::vec((1u64..100, -300i32..300, 1.0f64..2.0), 1..30)) {
            let mut a = WideSum::default();
            let mut b = WideSum::default();
            for &(k, e, m) in &terms {
                a.add(k, m * 10f64.powi(e));
            }
            for &(k, e, m) in terms.iter().rev() {
                b.add(k, m * 10f64.powi(e));
            }
            prop_assert_eq!(a.value().to_bits(), b.value().to_bits());
        }
    }
}
