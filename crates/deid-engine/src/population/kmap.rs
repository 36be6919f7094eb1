//! The estimated k-map model's minimal class size (REFERENCE-RISK §3.3, El Emam & Dankar 2008):
//! with sampling fraction f = n/N and λ = f·k, the smallest sample class size k' for which a
//! class of the sample is a class of at least k in the population with probability 1 − α, under
//! a Poisson or a zero-truncated Poisson model of the population class sizes. The model then
//! holds as k'-anonymity.
//!
//! Computed as ARX 3.9.2 does, including its offsets (Poisson: k' = c + 2 where c is the first
//! count whose CDF reaches 1 − α; zero-truncated: k' = m + 1), so users get the k' they know:
//! the search for c (or m) stops early once c + 1 (m + 1) reaches k, and k' = min(k, k', n).

/// Population model of the estimated k-map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KMapEstimator {
    /// Population class sizes are Poisson(λ).
    Poisson,
    /// Population class sizes are zero-truncated Poisson(λ) (classes exist: size ≥ 1).
    ZeroTruncatedPoisson,
}

impl KMapEstimator {
    /// The name in the text syntax.
    pub fn name(self) -> &'static str {
        match self {
            KMapEstimator::Poisson => "poisson",
            KMapEstimator::ZeroTruncatedPoisson => "zero-truncated-poisson",
        }
    }

    /// Parses a name (case-insensitive).
    pub fn parse(text: &str) -> Option<KMapEstimator> {
        match text.trim().to_ascii_lowercase().as_str() {
            "poisson" => Some(KMapEstimator::Poisson),
            "zero-truncated-poisson" | "ztp" => Some(KMapEstimator::ZeroTruncatedPoisson),
            _ => None,
        }
    }
}

/// The derived minimal class size and its type-I error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KPrime {
    /// k′: every published class of the sample has at least this many records.
    pub k: u32,
    /// The probability that a class of size k′ in the sample has fewer than k individuals in
    /// the population (0 when the search stopped at k).
    pub type_one_error: f64,
}

/// k′ for `k`, `alpha` and `estimator` with `rows` records sampled from `population`
/// individuals (rows ≥ 1, population ≥ rows, k ≥ 1, α in [0, 1]).
pub fn k_prime(k: u32, alpha: f64, estimator: KMapEstimator, rows: u64, population: u64) -> KPrime {
    let lambda = rows as f64 / population.max(1) as f64 * k as f64;
    let target = 1.0 - alpha;
    let (raw, v) = match estimator {
        KMapEstimator::Poisson => {
            // CDF by summing the pmf: p(0) = e^-λ, p(i) = p(i−1)·λ/i.
            let mut pmf = (-lambda).exp();
            let mut cdf = pmf;
            let mut c: u64 = 0;
            loop {
                if cdf >= target {
                    break (c + 2, cdf);
                }
                if c + 1 >= k as u64 {
                    break (c + 2, 1.0);
                }
                c += 1;
                pmf *= lambda / c as f64;
                cdf += pmf;
            }
        }
        KMapEstimator::ZeroTruncatedPoisson => {
            let z = 1.0 - (-lambda).exp();
            let mut pmf = (-lambda).exp(); // p(0), not counted
            let mut v = 0.0;
            let mut m: u64 = 0;
            loop {
                m += 1;
                pmf *= lambda / m as f64;
                v += pmf / z;
                if v >= target {
                    break (m + 1, v);
                }
                if m + 1 >= k as u64 {
                    break (m + 1, 1.0);
                }
            }
        }
    };
    let k_prime = raw.min(k as u64).min(rows.max(1)) as u32;
    KPrime {
        k: k_prime.max(1),
        type_one_error: (1.0 - v).max(0.0),
    }
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
}
