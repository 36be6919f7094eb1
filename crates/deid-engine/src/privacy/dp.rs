//! (ε, δ)-differential privacy by sampling, generalization and suppression (SafePub: Bild, Kuhn,
//! Prasser, PoPETs 2018, after Li, Qardaji, Su, ASIACCS 2012; `docs/definitions.md` §3.9).
//!
//! The privacy budget ε is split into ε_search (the differentially private search over the
//! lattice, [`crate::search`](mod@crate::search)'s SafePub, only when the levels are not
//! given) and ε_anon. Every record is drawn into a sample with probability β = 1 − e^(−ε_anon);
//! the sample is then generalized with one transformation and every class of fewer than k
//! sampled records is suppressed. k is one more than the smallest value with δ(k) < δ (the same k as ARX 3.9.2,
//! whose loop counts on once after the test; a larger k only strengthens the guarantee), where
//!
//! δ(k) = max over n ≥ n_m of a_n,  a_n = Σ_{j > γn}^{n} C(n, j) β^j (1 − β)^(n − j),
//! n_m = ⌈k/γ − 1⌉,  γ = (e^ε_anon − 1 + β) / e^ε_anon.
//!
//! # Safe arithmetic
//!
//! The bound is never optimistic: every rounding is directed so that the computed δ(k) is at
//! least the exact one (k can only come out larger, never smaller).
//!
//! * The sampling probability actually used is `⌊β_lo · 2⁶⁴⌋ / 2⁶⁴` with β_lo ≤ 1 − e^(−ε_anon)
//!   (so the sampling spends at most ε_anon); a record is drawn iff a uniform 64-bit number is
//!   below that threshold.
//! * a_n is computed with β_hi ≥ every sampling probability in [β_lo, 1 − e^(−ε_anon)] and with
//!   γ_lo ≤ γ, i.e. with a larger success probability and a lower threshold than the exact
//!   tail; n_m uses γ_hi ≥ γ (more n enter the maximum).
//! * Each binomial term is computed in logarithms (a table of ln m!) and multiplied by
//!   e^err, err an upper bound of the absolute error of its logarithm
//!   (`8 (n + 2) u (ln n! + n |ln β| + n |ln(1 − β)| + 1)`, u = 2⁻⁵³), the sum by (1 + 2(n + 1)u).
//! * The maximum over the infinitely many n stops once the Chernoff bound
//!   c_n = exp(−n (γ ln(γ/β) − (γ − β))) ≥ a_m for every m ≥ n (non-increasing in n, computed
//!   with its exponent rounded down) is at most the maximum so far.
//!
//! δ(k) is non-increasing in k, so k is found by an exponential then a binary search.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{Rng, SeedableRng};

use crate::error::{EngineError, Result};

/// Default share of ε spent on the search (ARX's experiments: 10 %).
pub const DEFAULT_SEARCH_SHARE: f64 = 0.1;
/// Default number of steps of the search.
pub const DEFAULT_STEPS: u32 = 200;
/// Largest number of steps.
pub const MAX_STEPS: u32 = 100_000;
/// The largest n the maximum over n may reach before ε is declared too small.
const MAX_N: usize = 20_000_000;

/// The user's parameters of (ε, δ)-differential privacy.
#[derive(Debug, Clone, PartialEq)]
pub struct DpModel {
    /// ε > 0, the whole privacy budget.
    pub epsilon: f64,
    /// δ in (0, 1).
    pub delta: f64,
    /// Share of ε spent on the search, in (0, 1) (unused when the levels are given).
    pub search_share: f64,
    /// Steps of the search (≥ 1).
    pub steps: u32,
    /// Seed of the sampling and of the search's random choices (set by the front end from the
    /// job's seed; not part of the text syntax).
    pub seed: u64,
    /// True if the levels are chosen by the differentially private search; false if they are
    /// given (data-independent generalization: the whole ε goes to the anonymization).
    pub data_dependent: bool,
}

impl DpModel {
    /// A model with the default search share and steps.
    pub fn new(epsilon: f64, delta: f64) -> DpModel {
        DpModel {
            epsilon,
            delta,
            search_share: DEFAULT_SEARCH_SHARE,
            steps: DEFAULT_STEPS,
            seed: 0,
            data_dependent: true,
        }
    }

    /// Checks parameter ranges; errors name the parameter.
    pub fn validate(&self) -> Result<()> {
        if !(self.epsilon.is_finite() && self.epsilon > 0.0) {
            return Err(EngineError::config(
                "epsilon",
                format!("epsilon must be a number above 0, got {}", self.epsilon),
            ));
        }
        if !(self.delta > 0.0 && self.delta < 1.0) {
            return Err(EngineError::config(
                "delta",
                format!("delta must lie in (0, 1), got {}", self.delta),
            ));
        }
        if !(self.search_share > 0.0 && self.search_share < 1.0) {
            return Err(EngineError::config(
                "search_share",
                format!("search_share must lie in (0, 1), got {}", self.search_share),
            ));
        }
        if !(1..=MAX_STEPS).contains(&self.steps) {
            return Err(EngineError::config(
                "steps",
                format!("steps must lie in 1 to {MAX_STEPS}, got {}", self.steps),
            ));
        }
        Ok(())
    }

    /// ε spent on the search (0 when the levels are given).
    pub fn epsilon_search(&self) -> f64 {
        if self.data_dependent {
            self.epsilon * self.search_share
        } else {
            0.0
        }
    }

    /// ε spent on the anonymization (sampling and suppression), rounded down.
    pub fn epsilon_anon(&self) -> f64 {
        if self.data_dependent {
            next_down(self.epsilon - self.epsilon_search())
        } else {
            self.epsilon
        }
    }

    /// Derives k and β for a table of `rows` records; errors name `delta` (no k up to `rows`
    /// reaches it) or `epsilon` (too small to compute).
    pub fn derive(&self, rows: usize) -> Result<DpParameters> {
        let eps = self.epsilon_anon();
        let (beta_lo, beta_hi) = beta_bounds(eps)?;
        let threshold = sampling_threshold(beta_lo);
        let k = smallest_k(eps, beta_lo, beta_hi, self.delta, rows)?;
        Ok(DpParameters {
            epsilon_anon: eps,
            epsilon_search: self.epsilon_search(),
            beta: threshold as f64 / 2f64.powi(64),
            k,
            threshold,
        })
    }
}

/// What (ε, δ) and the split imply for the anonymization.
#[derive(Debug, Clone, PartialEq)]
pub struct DpParameters {
    /// ε spent on sampling and suppression.
    pub epsilon_anon: f64,
    /// ε spent on the search (0 for given levels).
    pub epsilon_search: f64,
    /// The sampling probability actually used (≤ 1 − e^(−ε_anon)).
    pub beta: f64,
    /// Classes of fewer sampled records are suppressed.
    pub k: u32,
    /// A record is drawn iff a uniform 64-bit number is below this.
    threshold: u64,
}

impl DpParameters {
    /// The sample drawn with seed `seed` from a table of `rows` rows, row `r` standing for
    /// `count(r)` records (1 for a plain table): the sampled records of every row. Every record
    /// is drawn independently with probability β, one uniform 64-bit number each, row after
    /// row — so a row of count c releases a Binomial(c, β) number of records, exactly as the
    /// records of the expanded table would be drawn (the records of one row are alike).
    pub fn sample(&self, rows: usize, count: impl Fn(usize) -> u32, seed: u64) -> Vec<u32> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ SAMPLE_STREAM);
        (0..rows)
            .map(|r| {
                (0..count(r))
                    .map(|_| u32::from(rng.next_u64() < self.threshold))
                    .sum()
            })
            .collect()
    }
}

/// Separates the random streams of the sample and of the search drawn from one seed.
const SAMPLE_STREAM: u64 = 0x5afe_9b0b_0000_0001;
/// The search's stream (see [`SAMPLE_STREAM`]).
pub(crate) const SEARCH_STREAM: u64 = 0x5afe_9b0b_0000_0002;

/// u = 2⁻⁵³, the unit roundoff.
const U: f64 = f64::EPSILON / 2.0;

fn next_down(x: f64) -> f64 {
    x.next_down()
}

fn next_up(x: f64) -> f64 {
    x.next_up()
}

/// Bounds of e^x: [lo, hi] (the library's exp is within a few ulps).
fn exp_bounds(x: f64) -> (f64, f64) {
    let e = x.exp();
    (
        next_down(next_down(e * (1.0 - 4.0 * U))),
        next_up(next_up(e * (1.0 + 4.0 * U))),
    )
}

/// Bounds of β = 1 − e^(−ε).
fn beta_bounds(eps: f64) -> Result<(f64, f64)> {
    let (e_lo, e_hi) = exp_bounds(-eps);
    let lo = next_down(next_down(1.0 - e_hi));
    let hi = next_up(next_up(1.0 - e_lo)).min(1.0);
    if lo <= 0.0 {
        return Err(EngineError::config(
            "epsilon",
            format!("epsilon {eps} is too small: no record could be sampled"),
        ));
    }
    Ok((lo, hi))
}

/// ⌊β · 2⁶⁴⌋ for β in (0, 1).
fn sampling_threshold(beta: f64) -> u64 {
    let t = (beta * 2f64.powi(64)).floor();
    if t >= u64::MAX as f64 {
        u64::MAX
    } else {
        t as u64
    }
}

/// The binomial tails a_n, computed on demand, and the Chernoff bounds.
struct Tails {
    /// ln β_hi and ln(1 − β_hi).
    ln_b: f64,
    ln_nb: f64,
    /// γ_lo, used as the threshold of the tails.
    gamma_lo: f64,
    /// γ_hi, used for n_m (more n enter the maximum).
    gamma_hi: f64,
    /// Exponent of the Chernoff bound per n, rounded down.
    chernoff: f64,
    /// ln m! for m = 0, 1, …
    ln_fact: Vec<f64>,
    /// a_n by n (NaN: not computed).
    a: Vec<f64>,
}

impl Tails {
    fn ln_fact(&mut self, m: usize) -> f64 {
        while self.ln_fact.len() <= m {
            let i = self.ln_fact.len();
            let last = self.ln_fact[i - 1];
            self.ln_fact.push(last + (i as f64).ln());
        }
        self.ln_fact[m]
    }

    /// An upper bound of a_n = P[Bin(n, β) > γ n].
    fn a(&mut self, n: usize) -> f64 {
        if n < self.a.len() && !self.a[n].is_nan() {
            return self.a[n];
        }
        // Rounded down: a lower threshold only adds terms.
        let from = (self.gamma_lo * n as f64 * (1.0 - 2.0 * U)).floor() as usize + 1;
        let mut sum = 0.0;
        if from <= n {
            let lf_n = self.ln_fact(n);
            let err = 8.0
                * (n as f64 + 2.0)
                * U
                * (lf_n + n as f64 * (self.ln_b.abs() + self.ln_nb.abs()) + 1.0);
            for j in from..=n {
                let ln_term = lf_n - self.ln_fact(j) - self.ln_fact(n - j)
                    + j as f64 * self.ln_b
                    + (n - j) as f64 * self.ln_nb;
                let term = (ln_term + err).exp() * (1.0 + 4.0 * U);
                sum += term;
                // Beyond γn > βn the terms shrink by the ratio r = (n − j)/(j + 1) · β/(1 − β),
                // itself decreasing: once r ≤ ½ (with margin) the rest is at most this term.
                if term < sum * U * 1e-3 {
                    let ratio = ((n - j) as f64 / (j + 1) as f64) * (self.ln_b - self.ln_nb).exp();
                    if ratio < 0.45 {
                        sum += term;
                        break;
                    }
                }
            }
            sum *= 1.0 + 2.0 * (n as f64 + 1.0) * U;
            sum = next_up(sum);
        }
        if self.a.len() <= n {
            self.a.resize(n + 1, f64::NAN);
        }
        self.a[n] = sum;
        sum
    }

    /// An upper bound of c_n.
    fn c(&self, n: usize) -> f64 {
        next_up((-(n as f64) * self.chernoff).exp() * (1.0 + 4.0 * U))
    }
}

impl Tails {
    /// The tails for ε_anon = `eps` with β in [`beta_lo`, `beta_hi`]; errors name `epsilon`.
    fn new(eps: f64, beta_lo: f64, beta_hi: f64) -> Result<Tails> {
        let too_small = || {
            EngineError::config(
                "epsilon",
                format!("epsilon {eps} is too small to derive k with safe arithmetic"),
            )
        };
        // γ = 1 − (1 − β) e^(−ε): bounds from β's bounds and e^(−ε)'s.
        let (e_lo, e_hi) = exp_bounds(-eps);
        let gamma_lo = next_down(next_down(1.0 - next_up((1.0 - beta_lo) * e_hi)));
        let gamma_hi = next_up(next_up(1.0 - next_down((1.0 - beta_hi) * e_lo))).min(1.0);
        if gamma_lo <= beta_hi {
            return Err(too_small());
        }
        let chernoff = gamma_lo * (gamma_lo / beta_hi).ln() - (gamma_lo - beta_hi);
        let chernoff = chernoff * (1.0 - 1e-9) - 1e-300;
        if chernoff.is_nan() || chernoff <= 0.0 {
            return Err(too_small());
        }
        Ok(Tails {
            ln_b: beta_hi.ln(),
            ln_nb: (1.0 - beta_hi).ln(),
            gamma_lo,
            gamma_hi,
            chernoff,
            ln_fact: vec![0.0],
            a: Vec::new(),
        })
    }

    /// An upper bound of δ(k) = max over n ≥ n_m of a_n; errors name `epsilon` when the
    /// maximum needs more than [`MAX_N`] terms.
    fn delta(&mut self, k: u64, eps: f64) -> Result<f64> {
        let n_m = ((k as f64 / self.gamma_hi - 1.0) * (1.0 - 4.0 * U))
            .ceil()
            .max(1.0) as usize;
        let mut max = 0.0f64;
        for n in n_m..=MAX_N {
            max = max.max(self.a(n));
            if max >= self.c(n) {
                return Ok(max);
            }
        }
        Err(EngineError::config(
            "epsilon",
            format!("epsilon {eps} is too small: δ(k) needs more than {MAX_N} terms"),
        ))
    }
}

/// One more than the smallest k with δ(k) < `delta` (as ARX 3.9.2), at most `rows`.
fn smallest_k(eps: f64, beta_lo: f64, beta_hi: f64, delta: f64, rows: usize) -> Result<u32> {
    let mut tails = Tails::new(eps, beta_lo, beta_hi)?;
    let rows = rows.max(1) as u64;
    let too_small = || {
        EngineError::config(
            "delta",
            format!(
                "delta {delta} is too small for {rows} records: no k up to {rows} reaches it \
                 (classes would need more sampled records than the table has); raise delta or \
                 epsilon"
            ),
        )
    };
    // Exponential search for an upper end, then binary search (δ(k) is non-increasing).
    let mut hi = 1u64;
    while tails.delta(hi, eps)? >= delta {
        if hi >= rows {
            return Err(too_small());
        }
        hi = (hi * 2).min(rows);
    }
    let mut lo = hi / 2; // δ(lo) ≥ delta, or lo = 0
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if tails.delta(mid, eps)? < delta {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    // As ARX 3.9.2: one more than the smallest k (its loop counts on after the test). δ(k) is
    // non-increasing, so the larger k keeps the guarantee.
    let k = hi + 1;
    if k > rows {
        return Err(too_small());
    }
    Ok(u32::try_from(k).unwrap_or(u32::MAX))
}

/// δ(k) for ε_anon = `eps` (an upper bound, see the module docs); for tests and reports.
pub fn delta_of_k(eps: f64, k: u32) -> Result<f64> {
    let (beta_lo, beta_hi) = beta_bounds(eps)?;
    Tails::new(eps, beta_lo, beta_hi)?.delta(u64::from(k), eps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn derived(epsilon: f64, delta: f64, share: f64) -> DpParameters {
        let mut m = DpModel::new(epsilon, delta);
        m.search_share = share;
        m.derive(1_000_000).unwrap()
    }

    #[test]
    fn arx_table_k_and_beta() {
        for (eps, k, beta) in [(0.5, 65, 0.362), (1.0, 74, 0.593), (2.0, 118, 0.835)] {
            let p = derived(eps, 1e-6, 0.1);
            assert_eq!(p.k, k, "ε = {eps}");
            assert!((p.beta - beta).abs() < 5e-4, "ε = {eps}: β = {}", p.beta);
        }
    }
}
