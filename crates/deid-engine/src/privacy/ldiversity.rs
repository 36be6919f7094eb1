//! Entropy ℓ-diversity (Shannon and Grassberger estimators) and recursive (c,ℓ)-diversity
//! (Machanavajjhala et al., TKDD 2007). Distinct ℓ-diversity is a one-liner in the parent module.
//!
//! Entropy: with class size N and value counts c_v, the estimated entropy is
//! Ĥ = ψ(N) − (1/N) Σ_v c_v ψ(c_v), where ψ = ln for the Shannon estimator and ψ = G for
//! Grassberger's estimator, G(2k+1) = G(2k) = −γ − ln 2 + Σ_{j=1..k} 2/(2j−1). A class fulfils the
//! model iff it has at least ⌈ℓ⌉ distinct values and Ĥ ≥ ln ℓ, i.e.
//! Σ_v c_v ψ(c_v) ≤ N (ψ(N) − ln ℓ).

use super::EntropyEstimator;

/// Euler–Mascheroni constant γ.
const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// Largest n for which G(n) is tabulated exactly; above, an asymptotic series is used.
const G_TABLE_MAX: usize = 100;

/// Relative tolerance for the entropy comparison (see the module docs of `privacy`).
const ENTROPY_TOLERANCE: f64 = 1e-10;

/// Grassberger's G(n) for n ≥ 1 (G(0) is defined as G(1)).
pub fn grassberger_g(n: u32) -> f64 {
    if (n as usize) <= G_TABLE_MAX {
        // G(2k) = G(2k+1) = −γ − ln 2 + Σ_{j=1..k} 2/(2j − 1).
        let k = n / 2;
        let mut g = -EULER_GAMMA - std::f64::consts::LN_2;
        for j in 1..=k {
            g += 2.0 / (2 * j - 1) as f64;
        }
        g
    } else {
        grassberger_asymptotic(n)
    }
}

/// G(n) for large n from the expansion of the harmonic numbers: with the even m = 2k ≤ n,
/// G = ln m + 1/(24k²) − 7/(960k⁴) + 31/(8064k⁶) + O(k⁻⁸).
fn grassberger_asymptotic(n: u32) -> f64 {
    let m = (n - n % 2) as f64;
    let k = m / 2.0;
    let x = 1.0 / (k * k);
    m.ln() + x * (1.0 / 24.0 - x * (7.0 / 960.0 - x * (31.0 / 8064.0)))
}

/// Compiled entropy ℓ-diversity.
#[derive(Debug, Clone)]
pub struct EntropyL {
    min_distinct: usize,
    log_l: f64,
    estimator: EntropyEstimator,
    /// G(n) for n ≤ [`G_TABLE_MAX`] (Grassberger only).
    g_table: Vec<f64>,
}

impl EntropyL {
    /// Heap size in bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.g_table.capacity() * 8
    }

    /// Compiles the model for diversity `l` (≥ 1) and the estimator.
    pub fn new(l: f64, estimator: EntropyEstimator) -> EntropyL {
        let g_table = match estimator {
            EntropyEstimator::Shannon => Vec::new(),
            EntropyEstimator::Grassberger => (0..=G_TABLE_MAX as u32).map(grassberger_g).collect(),
        };
        EntropyL {
            min_distinct: l.ceil().max(1.0) as usize,
            log_l: l.ln(),
            estimator,
            g_table,
        }
    }

    #[inline]
    fn psi(&self, n: u32) -> f64 {
        match self.estimator {
            EntropyEstimator::Shannon => (n as f64).ln(),
            EntropyEstimator::Grassberger => match self.g_table.get(n as usize) {
                Some(&g) => g,
                None => grassberger_asymptotic(n),
            },
        }
    }

    /// The estimated entropy (natural logarithm) of a class with `count` records and the value
    /// counts `freqs`.
    pub fn entropy(&self, count: u32, freqs: &[u32]) -> f64 {
        let sum: f64 = freqs.iter().map(|&f| f as f64 * self.psi(f)).sum();
        self.psi(count) - sum / count as f64
    }

    /// True if the class (size `count`, `distinct` values with counts `freqs`) is ℓ-diverse.
    pub fn holds(&self, count: u32, distinct: usize, freqs: &[u32]) -> bool {
        if distinct < self.min_distinct || count == 0 {
            return false;
        }
        let n = count as f64;
        let top = n * self.psi(count);
        let bound = top - n * self.log_l;
        let tolerance = ENTROPY_TOLERANCE * top.abs().max(1.0);
        let limit = bound + tolerance;
        let mut sum = 0.0;
        match self.estimator {
            EntropyEstimator::Shannon => {
                // Every term is ≥ 0, so the partial sums only grow: abort early.
                for &f in freqs {
                    sum += f as f64 * self.psi(f);
                    if sum > limit {
                        return false;
                    }
                }
            }
            EntropyEstimator::Grassberger => {
                // G(1) < 0: partial sums are not monotone, no early abort.
                for &f in freqs {
                    sum += f as f64 * self.psi(f);
                }
            }
        }
        sum <= limit
    }
}

/// Recursive (c,ℓ)-diversity: at least ℓ distinct values and, with the counts sorted descending
/// r₁ ≥ … ≥ r_m, r₁ < c · (r_ℓ + … + r_m). `count` is the class size (= Σ freqs).
pub fn recursive_holds(c: f64, l: u32, count: u32, freqs: &[u32]) -> bool {
    let l = l as usize;
    if l == 0 || freqs.len() < l {
        return false;
    }
    let (max, top) = top_sum(freqs, l - 1);
    // r_ℓ + … + r_m = everything but the ℓ − 1 largest counts.
    let rest = count as u64 - top;
    (max as f64) < c * rest as f64
}

/// The largest count and the sum of the `k` largest counts, without sorting or allocating:
/// the k-th largest value v is found by binary search over the value range, then
/// sum = Σ_{f > v} f + (k − #{f > v}) · v.
pub(crate) fn top_sum(freqs: &[u32], k: usize) -> (u32, u64) {
    let max = freqs.iter().copied().max().unwrap_or(0);
    if k == 0 {
        return (max, 0);
    }
    if k == 1 {
        return (max, max as u64);
    }
    if k >= freqs.len() {
        return (max, freqs.iter().map(|&f| f as u64).sum());
    }
    // The k-th largest count: the largest v with #{f ≥ v} ≥ k (v = 0 always qualifies).
    let (mut lo, mut hi) = (0u32, max);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if freqs.iter().filter(|&&f| f >= mid).count() >= k {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let v = lo;
    let (mut above, mut n_above) = (0u64, 0usize);
    for &f in freqs {
        if f > v {
            above += f as u64;
            n_above += 1;
        }
    }
    (max, above + (k - n_above) as u64 * v as u64)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{EntropyEstimator, PrivacyModel};
    use super::*;
    use crate::Checker;
    use proptest::prelude::*;

    fn entropy(l: f64, estimator: EntropyEstimator) -> PrivacyModel {
        PrivacyModel::EntropyLDiversity {
            attribute: "s".into(),
            l,
            estimator,
        }
    }

    #[test]
    fn grassberger_g_matches_its_definition() {
        let g1 = -EULER_GAMMA - std::f64::consts::LN_2;
        assert!((grassberger_g(1) - g1).abs() < 1e-15);
        assert!((grassberger_g(1) + 1.270_362_845_461_478).abs() < 1e-12);
        assert!((grassberger_g(2) - (g1 + 2.0)).abs() < 1e-15);
        assert_eq!(grassberger_g(3), grassberger_g(2));
        assert!((grassberger_g(4) - (g1 + 2.0 + 2.0 / 3.0)).abs() < 1e-15);
        assert!((grassberger_g(100) - 4.605_186_851_488_337).abs() < 1e-12);
        // The asymptotic series continues the exact sums.
        for n in [101u32, 102, 150, 1000, 12_345] {
            let k = n / 2;
            let exact = g1 + (1..=k).map(|j| 2.0 / (2 * j - 1) as f64).sum::<f64>();
            assert!(
                (grassberger_g(n) - exact).abs() < 1e-11,
                "n={n}: {} vs {exact}",
                grassberger_g(n)
            );
        }
    }

    #[test]
    fn entropy_estimates_by_hand() {
        let sh = EntropyL::new(2.0, EntropyEstimator::Shannon);
        assert!((sh.entropy(2, &[1, 1]) - 2f64.ln()).abs() < 1e-15);
        // {x:2, y:1}: ln 3 − (2 ln 2)/3.
        assert!((sh.entropy(3, &[2, 1]) - (3f64.ln() - 2.0 * 2f64.ln() / 3.0)).abs() < 1e-15);
        let gr = EntropyL::new(2.0, EntropyEstimator::Grassberger);
        // {x:1,y:1}: G(2) − G(1) = 2; {x:2,y:2}: G(4) − G(2) = 2/3; {x:2,y:1}: (G(2) − G(1))/3.
        assert!((gr.entropy(2, &[1, 1]) - 2.0).abs() < 1e-14);
        assert!((gr.entropy(4, &[2, 2]) - 2.0 / 3.0).abs() < 1e-14);
        assert!((gr.entropy(3, &[2, 1]) - 2.0 / 3.0).abs() < 1e-14);
    }

    #[test]
    fn shannon_entropy_l_diversity_by_hand() {
        // l = 2 (ln 2 = 0.693):
        // c0 {x,y}: H = ln 2 (tie, holds); c1 {x,x,y}: H = 0.637 < ln 2; c2 {x,y,z}: ln 3;
        // c3 {x,x,x}: one value; c4 {x,x,y,y}: ln 2 (tie).
        let classes: &[&[&str]] = &[
            &["x", "y"],
            &["x", "x", "y"],
            &["x", "y", "z"],
            &["x", "x", "x"],
            &["x", "x", "y", "y"],
        ];
        assert_eq!(
            suppressed_classes(classes, None, vec![entropy(2.0, EntropyEstimator::Shannon)]),
            [false, true, false, true, false]
        );
        // l = 2.5 needs 3 distinct values and H ≥ 0.916: only c2 (ln 3 = 1.099).
        assert_eq!(
            suppressed_classes(classes, None, vec![entropy(2.5, EntropyEstimator::Shannon)]),
            [true, true, false, true, true]
        );
        // l = 3: {x,x,y,y,z,z} has H = ln 3 exactly (a tie that rounding must not break).
        let ties: &[&[&str]] = &[&["x", "x", "y", "y", "z", "z"], &["x", "y", "z", "z"]];
        assert_eq!(
            suppressed_classes(ties, None, vec![entropy(3.0, EntropyEstimator::Shannon)]),
            [false, true]
        );
    }

    #[test]
    fn grassberger_entropy_l_diversity_by_hand() {
        // l = 2: {x,y} → 2.0 ✓; {x,x,y} → 2/3 < ln 2 ✗; {x,x,y,y} → 2/3 ✗; {x} → one value ✗.
        let classes: &[&[&str]] = &[&["x", "y"], &["x", "x", "y"], &["x", "x", "y", "y"], &["x"]];
        assert_eq!(
            suppressed_classes(
                classes,
                None,
                vec![entropy(2.0, EntropyEstimator::Grassberger)]
            ),
            [false, true, true, true]
        );
        // The Grassberger estimate exceeds ln l where Shannon's does not: l = 1.9 (ln = 0.642):
        // {x,x,y}: Shannon 0.637 ✗, Grassberger 0.667 ✓.
        let one: &[&[&str]] = &[&["x", "x", "y"], &["x", "y"]];
        assert_eq!(
            suppressed_classes(one, None, vec![entropy(1.9, EntropyEstimator::Shannon)]),
            [true, false]
        );
        assert_eq!(
            suppressed_classes(one, None, vec![entropy(1.9, EntropyEstimator::Grassberger)]),
            [false, false]
        );
    }

    #[test]
    fn grassberger_is_not_monotone() {
        // g0 and g1 are each {x, y} (estimate 2.0 ≥ ln 2); generalized together {x:2, y:2} has
        // the estimate 2/3 < ln 2.
        let t = table(&["g", "s"], &["g0;x", "g0;y", "g1;x", "g1;y"]);
        let p = problem(
            t,
            &[("g", "g0;*\ng1;*")],
            &[("s", None)],
            vec![entropy(2.0, EntropyEstimator::Grassberger)],
            0.0,
        )
        .unwrap();
        let checker = Checker::new(&p);
        assert!(checker.check(&[0]).anonymous);
        assert!(!checker.check(&[1]).anonymous);
        assert!(
            !entropy(2.0, EntropyEstimator::Grassberger)
                .monotonicity()
                .generalization
        );
    }

    #[test]
    fn grassberger_does_not_abort_on_a_partial_sum() {
        // Counts [2, 1] (N = 3), l = 1.5: the first term 2·G(2) = 1.459 alone exceeds the bound
        // N·(G(3) − ln 1.5) = 0.973, but G(1) < 0 brings the sum to 0.189: the class fulfils
        // the model.
        let gr = EntropyL::new(1.5, EntropyEstimator::Grassberger);
        let bound = 3.0 * (grassberger_g(3) - 1.5f64.ln());
        assert!(2.0 * grassberger_g(2) > bound);
        assert!(2.0 * grassberger_g(2) + grassberger_g(1) <= bound);
        assert!(gr.holds(3, 2, &[2, 1]));
        assert!(gr.entropy(3, &[2, 1]) >= 1.5f64.ln());
    }

    #[test]
    fn recursive_cl_diversity_by_hand() {
        let model = |c: f64, l: u32| PrivacyModel::RecursiveCLDiversity {
            attribute: "s".into(),
            c,
            l,
        };
        // c = 2, l = 2: r1 < 2·(r2 + … + rm).
        // {3,1,1}: 3 < 4 ✓; {4,1,1}: 4 < 4 ✗; {2,1}: 2 < 2 ✗; {1}: one value ✗; {2,2}: 2 < 4 ✓.
        let classes: &[&[&str]] = &[
            &["x", "x", "x", "y", "z"],
            &["x", "x", "x", "x", "y", "z"],
            &["x", "x", "y"],
            &["x"],
            &["x", "x", "y", "y"],
        ];
        assert_eq!(
            suppressed_classes(classes, None, vec![model(2.0, 2)]),
            [false, true, true, true, false]
        );
        // l = 3: counts {5,3,2,2}: r3 + r4 = 4; c = 2: 5 < 8 ✓; c = 1.25: 5 < 5 ✗.
        // {1,1,1}: c = 2: 1 < 2 ✓; c = 1.25: 1 < 1.25 ✓; {1,1}: only two values ✗.
        let classes: &[&[&str]] = &[
            &["a", "a", "a", "a", "a", "b", "b", "b", "c", "c", "d", "d"],
            &["a", "b", "c"],
            &["a", "b"],
        ];
        assert_eq!(
            suppressed_classes(classes, None, vec![model(2.0, 3)]),
            [false, false, true]
        );
        assert_eq!(
            suppressed_classes(classes, None, vec![model(1.25, 3)]),
            [true, false, true]
        );
        // l = 1: r1 < c · N: c = 1 rejects only single-valued classes.
        assert_eq!(
            suppressed_classes(&[&["a", "a"], &["a", "b"]], None, vec![model(1.0, 1)]),
            [true, false]
        );
    }

    proptest! {
        #[test]
        fn top_sum_equals_sorting(freqs in prop::collection::vec(1u32..50, 1..40), k in 0usize..45) {
            let mut sorted = freqs.clone();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            let expected: u64 = sorted.iter().take(k).map(|&f| f as u64).sum();
            prop_assert_eq!(top_sum(&freqs, k), (sorted[0], expected));
        }
    }
}
