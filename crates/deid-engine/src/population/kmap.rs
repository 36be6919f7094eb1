//! The estimated k-map model's minimal class size (REFERENCE-RISK §3.3, El Emam & Dankar 2008):
//! with sampling fraction f = n/N and λ = f·k, the smallest sample class size k' for which a
//! class of the sample is a class of at least k in the population with probability 1 − α, under
//! a Poisson or a zero-truncated Poisson model of the population class sizes. The model then
//! holds as k'-anonymity.
//!
//! Computed as ARX 3.9.2 does, including its offsets (Poisson: k' = c + 2 where c is the first
//! count whose CDF reaches 1 − α; zero-truncated: k' = m + 1), so users get the k' they know:
//! the search for c (or m) stops early once c + 1 (m + 1) reaches k, and k' = min(k, k', n).

use super::special;

/// Population model of the estimated k-map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KMapEstimator {
    /// Population class sizes are Poisson(λ).
    Poisson,
    /// Population class sizes are zero-truncated Poisson(λ) (classes exist: size ≥ 1).
    ZeroTruncatedPoisson,
}

crate::names::enum_names! {
    KMapEstimator {
        Poisson => "poisson",
        ZeroTruncatedPoisson => "zero-truncated-poisson" | "ztp",
    }
    /// The name in the text syntax.
    pub fn name;
    /// The estimator named `name` (exactly, or `ztp` for the zero-truncated Poisson).
    fn from_name;
}

impl KMapEstimator {
    /// Parses a name (case-insensitive).
    pub fn parse(text: &str) -> Option<KMapEstimator> {
        KMapEstimator::from_name(&text.trim().to_ascii_lowercase())
    }
}

/// The derived minimal class size and its type-I error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KPrime {
    /// k′: every published class of the sample has at least this many records.
    pub k: u32,
    /// The probability that a class of size k′ in the sample has fewer than k individuals in
    /// the population, for the k′ enforced (0 when k′ = k).
    pub type_one_error: f64,
}

/// k′ for `k`, `alpha` and `estimator` with `rows` records sampled from `population`
/// individuals (rows ≥ 1, population ≥ rows, k ≥ 1, α in [0, 1]).
///
/// The quantile is found on the exact tail probability (computed in log space, so it holds for
/// every λ = f·k a `u32` k can give, up to 4.3·10⁹): the Poisson variant's c is the first count
/// with P(X > c) ≤ α, the zero-truncated variant's m the first m ≥ 1 with P(X > m) / (1 − e^−λ)
/// ≤ α — the same counts as ARX's running sums reaching 1 − α, without their underflow of e^−λ
/// above λ ≈ 737.
pub fn k_prime(k: u32, alpha: f64, estimator: KMapEstimator, rows: u64, population: u64) -> KPrime {
    let k = u64::from(k.max(1));
    let rows = rows.max(1);
    let lambda = rows as f64 / population.max(1) as f64 * k as f64;
    // The error of a class of `size` sample records: the tail beyond the count that size stands
    // for (ARX's offsets: size = c + 2, resp. m + 1).
    let error = |size: u64| -> f64 {
        match estimator {
            KMapEstimator::Poisson if size >= 2 => tail(estimator, size - 2, lambda),
            KMapEstimator::ZeroTruncatedPoisson if size >= 2 => tail(estimator, size - 1, lambda),
            _ => 1.0,
        }
    };
    // The counts ARX's loop visits before its cap at k fires (c + 1 ≥ k, m + 1 ≥ k).
    let (first, last, offset) = match estimator {
        KMapEstimator::Poisson => (0, k - 1, 2),
        KMapEstimator::ZeroTruncatedPoisson => (1, (k - 1).max(1), 1),
    };
    let raw = match first_within(estimator, lambda, alpha, first, last) {
        Some(count) => count + offset,
        None => k,
    };
    let k_prime = raw.min(k).min(rows);
    KPrime {
        k: k_prime as u32,
        // A class of k records has at least k individuals: no error. Otherwise the error of the
        // size enforced (also when the rows cap it below the quantile).
        type_one_error: if k_prime >= k { 0.0 } else { error(k_prime) },
    }
}

/// The tail probability of the count `count`: P(X > c) (Poisson) or P(X > m) / P(X ≥ 1)
/// (zero-truncated).
fn tail(estimator: KMapEstimator, count: u64, lambda: f64) -> f64 {
    let upper = special::poisson_upper_tail(count, lambda);
    match estimator {
        KMapEstimator::Poisson => upper,
        KMapEstimator::ZeroTruncatedPoisson => {
            let z = -(-lambda).exp_m1();
            if z > 0.0 { (upper / z).min(1.0) } else { 1.0 }
        }
    }
}

/// The first count in `first..=last` whose tail is at most α (the tail falls with the count),
/// by bisection; None if even `last`'s is above α. α = 0 is never reached (every tail of a
/// Poisson distribution is positive).
fn first_within(
    estimator: KMapEstimator,
    lambda: f64,
    alpha: f64,
    first: u64,
    last: u64,
) -> Option<u64> {
    if alpha <= 0.0 || lambda.is_nan() || lambda <= 0.0 {
        return if alpha > 0.0 { Some(first) } else { None };
    }
    let reached = |count: u64| tail(estimator, count, lambda) <= alpha;
    // Beyond λ + 40√λ + 1200 every tail is below the smallest positive f64.
    let beyond = (lambda + 40.0 * lambda.sqrt() + 1200.0).min(u64::MAX as f64 / 2.0) as u64;
    let mut hi = last.min(beyond.max(first));
    if !reached(hi) {
        return None;
    }
    let mut lo = first;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if reached(mid) { hi = mid } else { lo = mid + 1 }
    }
    Some(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// adult (30,162 records) in the USA population of ARX's region preset, α = 0.01: the
    /// worked examples of REFERENCE-RISK §3.3.
    #[test]
    fn worked_examples() {
        let (n, usa) = (30_162, 317_238_626);
        let both = [KMapEstimator::Poisson, KMapEstimator::ZeroTruncatedPoisson];
        for e in both {
            assert_eq!(k_prime(3, 0.01, e, n, usa).k, 2, "{e:?}");
            assert_eq!(k_prime(100, 0.01, e, n, usa).k, 2, "{e:?}");
            assert_eq!(k_prime(1000, 0.01, e, n, usa).k, 3, "{e:?}");
            assert_eq!(k_prime(2, 0.01, e, n, usa).k, 2, "{e:?}");
            assert_eq!(k_prime(2, 0.01, e, 10, 20).k, 2, "{e:?}");
        }
        assert_eq!(k_prime(10_000, 0.01, KMapEstimator::Poisson, n, usa).k, 6);
        assert_eq!(
            k_prime(10_000, 0.01, KMapEstimator::ZeroTruncatedPoisson, n, usa).k,
            5
        );
    }

    /// The type-I error is 1 − the probability reached; k′ never exceeds k or the rows; a
    /// census (f = 1, λ = k) needs large classes.
    #[test]
    fn bounds_and_errors() {
        let r = k_prime(1000, 0.01, KMapEstimator::Poisson, 30_162, 317_238_626);
        // λ = 0.0951: P(X ≤ 1) = e^-λ (1 + λ) ≈ 0.99570.
        let lambda: f64 = 30_162.0 / 317_238_626.0 * 1000.0;
        let expected = 1.0 - (-lambda).exp() * (1.0 + lambda);
        assert!((r.type_one_error - expected).abs() < 1e-12, "{r:?}");
        assert!(r.type_one_error <= 0.01);
        let capped = k_prime(5, 0.0, KMapEstimator::Poisson, 100, 100);
        assert_eq!(
            capped,
            KPrime {
                k: 5,
                type_one_error: 0.0
            }
        );
        assert_eq!(k_prime(50, 0.05, KMapEstimator::Poisson, 3, 3).k, 3);
        for k in [1, 2, 7, 40] {
            for e in [KMapEstimator::Poisson, KMapEstimator::ZeroTruncatedPoisson] {
                let r = k_prime(k, 0.05, e, 1000, 1000);
                assert!(r.k >= 1 && r.k <= k, "{k} {e:?} {r:?}");
            }
        }
        assert_eq!(
            KMapEstimator::parse("ZTP"),
            Some(KMapEstimator::ZeroTruncatedPoisson)
        );
        assert_eq!(KMapEstimator::parse("normal"), None);
    }

    /// ln j! for j < len, by a compensated running sum of ln i (no Stirling, no Γ).
    fn ln_factorials(len: usize) -> Vec<f64> {
        let mut out = Vec::with_capacity(len);
        let (mut sum, mut carry) = (0.0f64, 0.0f64);
        out.push(0.0);
        for i in 1..len {
            let y = (i as f64).ln() - carry;
            let t = sum + y;
            carry = (t - sum) - y;
            sum = t;
            out.push(sum);
        }
        out
    }

    /// Upper tails P(X > c), X ~ Poisson(λ), for c in [lo, hi), written independently of the
    /// engine: each pmf term e^(j ln λ − λ − ln j!) in log space, summed from the far end.
    fn literal_tails(lambda: f64, ln_fact: &[f64]) -> (u64, Vec<f64>) {
        let spread = 60.0 * lambda.sqrt() + 1500.0;
        let lo = (lambda - spread).max(0.0) as u64;
        let hi = (lambda + spread) as u64;
        assert!((hi as usize) < ln_fact.len());
        let mut tails = vec![0.0; (hi - lo) as usize];
        let mut sum = 0.0;
        for c in (lo..hi).rev() {
            tails[(c - lo) as usize] = sum;
            let j = c as usize;
            sum += (c as f64 * lambda.ln() - lambda - ln_fact[j]).exp();
        }
        (lo, tails)
    }

    /// k′ is ARX's quantile on exact tails for λ from 10⁻³ to 10⁶ (densely where ARX's sums
    /// underflow, λ ≈ 700–800) with both estimators and α from 10⁻¹² to 0.9; the type-I error is
    /// the tail of the k′ enforced. Ties closer than 10⁻⁷ relative may go either way.
    #[test]
    fn k_prime_is_exact_for_every_lambda() {
        let (rows, population) = (2_000_000u64, 2_000_000_000u64);
        let ln_fact = ln_factorials(1_200_000);
        let mut ks: Vec<u32> = (0..=2000).map(|i| 700_000 + 50 * i).collect();
        ks.extend((0..=540).map(|i| 10f64.powf(i as f64 / 60.0).round() as u32));
        ks.extend([745_050, 737_700, 999_999_999, 1_000_000_000]);
        let alphas = [0.01, 0.05, 1e-12, 1e-6, 0.2, 0.5, 0.9];
        for &k in &ks {
            let lambda = rows as f64 / population as f64 * k as f64;
            let (lo, tails) = literal_tails(lambda, &ln_fact);
            let upper = |c: u64| -> f64 {
                if c < lo {
                    1.0
                } else {
                    tails[(c - lo) as usize]
                }
            };
            // P(X ≥ 1): the zero-truncated variant's normaliser.
            let z = upper(0);
            for estimator in [KMapEstimator::Poisson, KMapEstimator::ZeroTruncatedPoisson] {
                let (offset, first) = match estimator {
                    KMapEstimator::Poisson => (2, 0),
                    KMapEstimator::ZeroTruncatedPoisson => (1, 1),
                };
                let tail = |count: u64| match estimator {
                    KMapEstimator::Poisson => upper(count),
                    KMapEstimator::ZeroTruncatedPoisson => upper(count) / z,
                };
                for &alpha in &alphas {
                    let r = k_prime(k, alpha, estimator, rows, population);
                    let at = format!("λ = {lambda}, k = {k}, α = {alpha}, {estimator:?}: {r:?}");
                    if r.k == k {
                        // The cap: the quantile is at least k − offset (k small here).
                        assert_eq!(r.type_one_error, 0.0, "{at}");
                        let count = (k as u64).saturating_sub(offset).max(first);
                        assert!(
                            count == first || tail(count - 1) > alpha * (1.0 - 1e-7),
                            "{at}"
                        );
                        continue;
                    }
                    let count = r.k as u64 - offset;
                    assert!(count >= first, "{at}");
                    assert!(tail(count) <= alpha * (1.0 + 1e-7), "{at}: {}", tail(count));
                    assert!(
                        count == first || tail(count - 1) > alpha * (1.0 - 1e-7),
                        "{at}: the count before has tail {}",
                        tail(count - 1)
                    );
                    let error = tail(count);
                    assert!(
                        (r.type_one_error - error).abs() <= 1e-7 * error + 1e-300,
                        "{at}: error {error}"
                    );
                }
            }
        }
    }

    /// The audited case: adult (30,162 records) in a population of 404,832, k = 10,000, α = 0.01:
    /// λ = 745.05, where ARX's running sum underflows; P(X ≤ 747) ≈ 0.538, so k′ = 749 would have
    /// a type-I error of 0.46; the exact quantile is 809 (k′ = 811).
    #[test]
    fn adult_at_lambda_745() {
        let r = k_prime(10_000, 0.01, KMapEstimator::Poisson, 30_162, 404_832);
        assert_eq!(r.k, 811, "{r:?}");
        assert!(
            r.type_one_error <= 0.01 && r.type_one_error > 0.009,
            "{r:?}"
        );
        let lambda = 30_162.0 / 404_832.0 * 10_000.0;
        let cdf = special::poisson_cdf(747, lambda);
        assert!((cdf - 0.538).abs() < 0.001, "{cdf}");
    }
}
