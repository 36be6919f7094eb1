//! Special functions for the estimators: ln Γ, Γ, digamma ψ and trigamma ψ₁ (f64 has none of them
//! on stable Rust). Accuracy about 1e-14 relative, which is far below the solver's accuracy.
//!
//! Unlike ARX's `risk/Gamma.trigamma` (which returns only a partial sum for 1e-4 < x < 12, see
//! `docs/definitions.md` §6.2), [`trigamma`] is correct everywhere.

use std::f64::consts::PI;

/// Lanczos coefficients (g = 7, n = 9).
const LANCZOS: [f64; 9] = [
    0.999_999_999_999_809_9,
    676.520_368_121_885_1,
    -1_259.139_216_722_402_8,
    771.323_428_777_653_1,
    -176.615_029_162_140_6,
    12.507_343_278_686_905,
    -0.138_571_095_265_720_12,
    9.984_369_578_019_572e-6,
    1.505_632_735_149_311_6e-7,
];

/// ln Γ(x) for x > 0; NaN for x ≤ 0 and NaN (as Apache Commons Math's `logGamma`).
pub fn ln_gamma(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 {
        return f64::NAN;
    }
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1−x) = π / sin(πx), positive for 0 < x < 1.
        return (PI / (PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    if x > 1e15 {
        // Stirling; the series below loses nothing significant here.
        return (x - 0.5) * x.ln() - x + 0.5 * (2.0 * PI).ln() + 1.0 / (12.0 * x);
    }
    let x = x - 1.0;
    let mut a = LANCZOS[0];
    let t = x + 7.5;
    for (i, c) in LANCZOS.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Γ(x) for every x that is not a non-positive integer (NaN there); ±∞ on overflow.
pub fn gamma(x: f64) -> f64 {
    if x.is_nan() || (x <= 0.0 && x == x.floor()) {
        return f64::NAN;
    }
    if x < 0.5 {
        return PI / ((PI * x).sin() * gamma(1.0 - x));
    }
    if x > 171.7 {
        return f64::INFINITY;
    }
    ln_gamma(x).exp()
}

/// Digamma ψ(x) = d/dx ln Γ(x); NaN at the poles (non-positive integers).
pub fn digamma(x: f64) -> f64 {
    if x.is_nan() || (x <= 0.0 && x == x.floor()) {
        return f64::NAN;
    }
    if x < 0.0 {
        // ψ(1 − x) − ψ(x) = π cot(πx).
        return digamma(1.0 - x) - PI / (PI * x).tan();
    }
    let mut x = x;
    let mut result = 0.0;
    while x < 10.0 {
        result -= 1.0 / x;
        x += 1.0;
    }
    let f = 1.0 / (x * x);
    result
        + x.ln()
        + -0.5 / x
        + f * (-1.0 / 12.0
            + f * (1.0 / 120.0 + f * (-1.0 / 252.0 + f * (1.0 / 240.0 + f * (-1.0 / 132.0)))))
}

/// Trigamma ψ₁(x) = d²/dx² ln Γ(x); NaN at the poles.
pub fn trigamma(x: f64) -> f64 {
    if x.is_nan() || (x <= 0.0 && x == x.floor()) {
        return f64::NAN;
    }
    if x < 0.0 {
        // ψ₁(1 − x) + ψ₁(x) = π² / sin²(πx).
        let s = (PI * x).sin();
        return -trigamma(1.0 - x) + PI * PI / (s * s);
    }
    let mut x = x;
    let mut result = 0.0;
    while x < 10.0 {
        result += 1.0 / (x * x);
        x += 1.0;
    }
    let f = 1.0 / (x * x);
    result
        + 1.0 / x
        + f / 2.0
        + f / x
            * (1.0 / 6.0
                + f * (-1.0 / 30.0 + f * (1.0 / 42.0 + f * (-1.0 / 30.0 + f * (5.0 / 66.0)))))
}

/// δ(j) = ln j! − [(j + ½) ln j − j + ½ ln 2π], the error of Stirling's formula, for j ≥ 1
/// (about 1/(12j)); accurate to about 1e-16 absolute.
fn stirling_error(j: u64) -> f64 {
    let x = j as f64;
    if j < 16 {
        // ln j! as an exact sum of logarithms of integers (at most 15 terms).
        let ln_factorial: f64 = (2..=j).map(|i| (i as f64).ln()).sum();
        return ln_factorial - ((x + 0.5) * x.ln() - x + 0.5 * (2.0 * PI).ln());
    }
    // The asymptotic series; its fifth term is below 1e-17 for j ≥ 16.
    let y = 1.0 / (x * x);
    (1.0 / 12.0 - y * (1.0 / 360.0 - y * (1.0 / 1260.0 - y * (1.0 / 1680.0 - y / 1188.0)))) / x
}

/// x·ln(x/μ) + μ − x ≥ 0 for x ≥ 0, μ > 0, without the cancellation of the direct formula when
/// x ≈ μ (the deviance term of Loader's saddle-point Poisson pmf).
fn deviance(x: f64, mu: f64) -> f64 {
    if x == 0.0 {
        return mu;
    }
    let d = x - mu;
    if d.abs() < 0.1 * (x + mu) {
        // With v = d/(x+μ): x ln(x/μ) + μ − x = d·v + 2x·Σ_{i≥1} v^{2i+1}/(2i+1).
        let v = d / (x + mu);
        let mut sum = d * v;
        let mut power = 2.0 * x * v;
        let v2 = v * v;
        for i in 1..1000 {
            power *= v2;
            let next = sum + power / (2 * i + 1) as f64;
            if next == sum {
                break;
            }
            sum = next;
        }
        return sum;
    }
    x * (x / mu).ln() + mu - x
}

/// ln P(X = j) for X ~ Poisson(λ), λ > 0, accurate to a few units of 1e-16 relative in P for
/// every j and λ up to 2⁵³ (Loader's saddle-point form: no ln j! and no λ^j that cancel).
pub fn ln_poisson_pmf(j: u64, lambda: f64) -> f64 {
    if j == 0 {
        return -lambda;
    }
    let x = j as f64;
    -stirling_error(j) - deviance(x, lambda) - 0.5 * (2.0 * PI * x).ln()
}

/// P(X > c) for X ~ Poisson(λ), λ > 0: the upper tail, summed directly where it is the small
/// side (c + 1 > λ), so tiny tails keep their relative accuracy; 1 − P(X ≤ c) otherwise.
pub fn poisson_upper_tail(c: u64, lambda: f64) -> f64 {
    if (c + 1) as f64 > lambda {
        // Σ_{j>c} P(j) = P(c+1)·(1 + λ/(c+2) + λ²/((c+2)(c+3)) + …); the ratios are below 1.
        tail_sum(
            ln_poisson_pmf(c + 1, lambda),
            |i| lambda / (c + 1 + i) as f64,
            u64::MAX,
        )
    } else {
        1.0 - poisson_lower_sum(c, lambda)
    }
}

/// P(X ≤ c) for X ~ Poisson(λ), λ > 0; the complement of [`poisson_upper_tail`].
pub fn poisson_cdf(c: u64, lambda: f64) -> f64 {
    if (c + 1) as f64 > lambda {
        1.0 - poisson_upper_tail(c, lambda)
    } else {
        poisson_lower_sum(c, lambda)
    }
}

/// Σ_{j≤c} P(j) = P(c)·(1 + c/λ + c(c−1)/λ² + …) for c < λ (ratios below 1).
fn poisson_lower_sum(c: u64, lambda: f64) -> f64 {
    tail_sum(
        ln_poisson_pmf(c, lambda),
        |i| (c + 1 - i) as f64 / lambda,
        c,
    )
}

/// e^ln_first · (1 + r(1) + r(1)r(2) + …) over at most `terms` ratios r(i) < 1, until a term no
/// longer changes the sum.
fn tail_sum(ln_first: f64, ratio: impl Fn(u64) -> f64, terms: u64) -> f64 {
    let mut sum = 1.0;
    let mut term = 1.0;
    let mut i = 1;
    while i <= terms {
        term *= ratio(i);
        let next = sum + term;
        if next == sum {
            break;
        }
        sum = next;
        i += 1;
    }
    (ln_first + sum.ln()).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    #[test]
    fn known_values() {
        // Γ(n) = (n−1)!, Γ(1/2) = √π, Γ(−1/2) = −2√π.
        assert!(close(gamma(5.0), 24.0, 1e-13));
        assert!(close(gamma(0.5), PI.sqrt(), 1e-13));
        assert!(close(gamma(-0.5), -2.0 * PI.sqrt(), 1e-13));
        assert!(gamma(-2.0).is_nan() && ln_gamma(0.0).is_nan() && ln_gamma(-1.5).is_nan());
        assert!(close(
            ln_gamma(101.0),
            (1..=100).map(|i| (i as f64).ln()).sum(),
            1e-13
        ));
        assert!(close(ln_gamma(1e-3), gamma(1e-3).ln(), 1e-12));
        // ψ(1) = −γ, ψ(1/2) = −γ − 2 ln 2, ψ(n+1) = ψ(n) + 1/n.
        let euler = 0.577_215_664_901_532_9;
        assert!(close(digamma(1.0), -euler, 1e-13));
        assert!(close(digamma(0.5), -euler - 2.0 * 2f64.ln(), 1e-13));
        assert!(close(digamma(10.5), digamma(9.5) + 1.0 / 9.5, 1e-13));
        assert!(close(digamma(-0.5), digamma(0.5) + 2.0, 1e-13));
        // ψ₁(1) = π²/6, ψ₁(2) = π²/6 − 1 (ARX's port returns 0.5118 here), ψ₁(1/2) = π²/2.
        assert!(close(trigamma(1.0), PI * PI / 6.0, 1e-12));
        assert!(close(trigamma(2.0), PI * PI / 6.0 - 1.0, 1e-12));
        assert!(close(trigamma(0.5), PI * PI / 2.0, 1e-12));
        assert!(close(
            trigamma(9.0),
            PI * PI / 6.0 - (1..9).map(|k| 1.0 / (k * k) as f64).sum::<f64>(),
            1e-13
        ));
        assert!(close(trigamma(-0.5), PI * PI - trigamma(1.5), 1e-12));
    }

    #[test]
    fn derivatives_agree_with_finite_differences() {
        for x in [0.01f64, 0.3, 1.7, 7.9, 11.5, 40.0, 1e4, -0.3, -2.6] {
            let h = 1e-5 * x.abs().max(1.0);
            let lg = |y: f64| {
                if y > 0.0 {
                    ln_gamma(y)
                } else {
                    gamma(y).abs().ln()
                }
            };
            let d = (lg(x + h) - lg(x - h)) / (2.0 * h);
            assert!(close(digamma(x), d, 1e-6), "ψ({x})");
            let t = (digamma(x + h) - digamma(x - h)) / (2.0 * h);
            assert!(close(trigamma(x), t, 1e-6), "ψ₁({x})");
        }
    }
}
