//! Population-uniqueness estimators on a class-size histogram (`docs/definitions.md` §6.2):
//! each estimates the **number** U of population-unique individuals; shares are U / N.
//!
//! * Pitman (Hoshino 2001): maximum-likelihood fit of Pitman's two-parameter partition model
//!   (θ, α) by Newton–Raphson, U = Γ(θ+1)/Γ(θ+α)·N^α.
//! * Zayatz (1991): U = c₁·P(population unique | sample unique)/f with hypergeometric
//!   probabilities h_j = P(one of j population members drawn).
//! * SNB (Chen & McNulty 1998): slide negative binomial fitted to c₁ and c₂ by Newton–Raphson,
//!   U = K̂·β^α with K̂ a Shlosser-type estimate of the number of population classes.
//! * Dankar et al. (2012): Pitman if f ≤ 0.1, else the smaller of Zayatz and SNB.
//!
//! Every formula follows ARX 3.9.2, including the two quirks that change results (the exponent of
//! SNB's second equation and the denominator of K̂); see the docs for each function. An estimate
//! is *valid* when it is a number other than 0 (ARX's rule: negative SNB values count as valid).
//! Without sample uniques (c₁ = 0) every estimate is 0 and nothing is solved.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::ClassSizes;
use super::newton::{self, SolverConfig};
use super::special::{digamma, gamma, ln_gamma, trigamma};
use crate::hash::BuildCodeHasher;

/// Which estimator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Estimator {
    /// Pitman's model (Hoshino 2001).
    Pitman,
    /// Zayatz's model.
    Zayatz,
    /// Slide negative binomial (Chen & McNulty 1998).
    Snb,
    /// Dankar et al.'s decision rule over the other three.
    Dankar,
}

crate::names::enum_names! {
    Estimator {
        Pitman => "pitman",
        Zayatz => "zayatz",
        Snb => "snb",
        Dankar => "dankar",
    }
    /// Name in the text syntax: `pitman`, `zayatz`, `snb` or `dankar`.
    pub fn name;
    /// The estimator named exactly `name`.
    fn from_name;
}

impl Estimator {
    /// Parses a name (case-insensitive).
    pub fn parse(text: &str) -> Option<Estimator> {
        Estimator::from_name(&text.trim().to_ascii_lowercase())
    }
}

/// ARX's validity rule: a number other than 0.
pub fn is_valid(u: f64) -> bool {
    !u.is_nan() && u != 0.0
}

fn valid_or_zero(u: f64) -> f64 {
    if is_valid(u) { u } else { 0.0 }
}

/// Sampling fraction n / N (0 for an empty sample).
fn fraction(h: &ClassSizes, population: u64) -> f64 {
    if population == 0 {
        return f64::NAN;
    }
    h.records() as f64 / population as f64
}

// ---------------------------------------------------------------------------------------------
// Pitman

/// The likelihood equations of Pitman's model and their Jacobian at (θ, α), by the literal
/// sums (cost O(u + n + largest class)). The terms are computed [`LANES`] at a time (the
/// divisions run as vector instructions, each correctly rounded as a scalar one) and added one
/// by one in the order of the sums, so the result is bit-identical to adding each term as it is
/// computed.
fn pitman_exact(h: &ClassSizes, theta: f64, alpha: f64) -> newton::Evaluation {
    PITMAN_MEMO.sums.fetch_add(1, Ordering::Relaxed);
    let (n, u) = (h.records(), h.classes());
    // [s1, s3, q1, q3, q4]
    let mut a = [0.0; 5];
    add_terms(1, u, &mut a, |i| {
        let t = lanes(|l| theta + i[l] * alpha);
        let tt = lanes(|l| t[l] * t[l]);
        [
            lanes(|l| 1.0 / t[l]),
            lanes(|l| i[l] / t[l]),
            lanes(|l| 1.0 / tt[l]),
            lanes(|l| i[l] / tt[l]),
            lanes(|l| i[l] * i[l] / tt[l]),
        ]
    });
    let [s1, s3, q1, q3, q4] = a;
    // [s2, q2]
    let mut b = [0.0; 2];
    add_terms(1, n, &mut b, |i| {
        let t = lanes(|l| theta + i[l]);
        [lanes(|l| 1.0 / t[l]), lanes(|l| 1.0 / (t[l] * t[l]))]
    });
    let [s2, q2] = b;
    // [s4, q5]
    let mut c = [0.0; 2];
    add_size_terms(h, &mut c, |k, m| {
        let t = lanes(|l| k[l] - alpha);
        [lanes(|l| m / t[l]), lanes(|l| m / (t[l] * t[l]))]
    });
    let [s4, q5] = c;
    ([s1 - s2, s3 - s4], [[-q1 + q2, -q3], [-q3, -q4 - q5]])
}

/// The residual F of [`pitman_exact`] alone, without the Jacobian: the same terms added in the
/// same order to the same accumulators, so bit-identical to `pitman_exact(h, θ, α).0`, with
/// 4 divisions per term instead of 9.
fn pitman_residual(h: &ClassSizes, theta: f64, alpha: f64) -> [f64; 2] {
    PITMAN_MEMO.residuals.fetch_add(1, Ordering::Relaxed);
    let (n, u) = (h.records(), h.classes());
    // [s1, s3]
    let mut a = [0.0; 2];
    add_terms(1, u, &mut a, |i| {
        let t = lanes(|l| theta + i[l] * alpha);
        [lanes(|l| 1.0 / t[l]), lanes(|l| i[l] / t[l])]
    });
    let [s1, s3] = a;
    let mut b = [0.0; 1];
    add_terms(1, n, &mut b, |i| [lanes(|l| 1.0 / (theta + i[l]))]);
    let mut c = [0.0; 1];
    add_size_terms(h, &mut c, |k, m| [lanes(|l| m / (k[l] - alpha))]);
    [s1 - b[0], s3 - c[0]]
}

/// Adds Σ_j c_j Σ_{k<j} g(k) = Σ_k g(k) · (classes larger than k) to `acc`, k ascending, in runs
/// of k with the same number m of larger classes: `terms(k lanes, m)` gives the `K` terms.
#[inline(always)]
fn add_size_terms<const K: usize>(
    h: &ClassSizes,
    acc: &mut [f64; K],
    terms: impl Fn([f64; LANES], f64) -> [[f64; LANES]; K],
) {
    let pairs = h.pairs();
    let largest = pairs.last().map_or(0, |x| x.0);
    let mut larger = h.classes();
    let mut k = 1;
    for &(size, count) in pairs {
        // Every class from this pair on is larger than the k in [k, size).
        let end = size.min(largest);
        if k < end {
            let m = larger as f64;
            add_terms(k, end, acc, |k| terms(k, m));
            k = end;
        }
        larger -= count;
    }
}

/// Terms computed together by [`add_terms`].
const LANES: usize = 4;

/// `[f(0), f(1), …]`: one operation on every lane (written out so that the compiler emits vector
/// instructions).
#[inline(always)]
fn lanes(f: impl Fn(usize) -> f64) -> [f64; LANES] {
    [f(0), f(1), f(2), f(3)]
}

/// Adds the `K` terms of x for x = first, first + 1, …, end − 1 (as floats) to `acc`, in that
/// order; `terms` computes them for [`LANES`] consecutive values at once (lane l: the l-th).
#[inline(always)]
fn add_terms<const K: usize>(
    first: u64,
    end: u64,
    acc: &mut [f64; K],
    terms: impl Fn([f64; LANES]) -> [[f64; LANES]; K],
) {
    let mut x = first;
    while x < end {
        let block = terms(lanes(|l| (x + l as u64) as f64));
        let live = (end - x).min(LANES as u64) as usize;
        for l in 0..live {
            for (a, t) in acc.iter_mut().zip(&block) {
                *a += t[l];
            }
        }
        x += LANES as u64;
    }
}

/// The same equations in closed form with digamma and trigamma (cost O(distinct sizes)).
fn pitman_closed(h: &ClassSizes, theta: f64, alpha: f64) -> newton::Evaluation {
    let (n, u) = (h.records() as f64, h.classes() as f64);
    let r = theta / alpha;
    let d = digamma(r + u) - digamma(r + 1.0);
    let e = trigamma(r + 1.0) - trigamma(r + u);
    let s1 = d / alpha;
    let s3 = ((u - 1.0) - r * d) / alpha;
    let q1 = e / (alpha * alpha);
    let q3 = d / (alpha * alpha) - theta / (alpha * alpha * alpha) * e;
    let q4 = ((u - 1.0) * alpha * alpha - 2.0 * alpha * theta * d + theta * theta * e)
        / (alpha * alpha * alpha * alpha);
    let s2 = digamma(theta + n) - digamma(theta + 1.0);
    let q2 = trigamma(theta + 1.0) - trigamma(theta + n);
    let (mut s4, mut q5) = (0.0, 0.0);
    let (d1, t1) = (digamma(1.0 - alpha), trigamma(1.0 - alpha));
    for &(j, c) in h.pairs() {
        if j >= 2 {
            let jf = j as f64;
            s4 += c as f64 * (digamma(jf - alpha) - d1);
            q5 += c as f64 * (t1 - trigamma(jf - alpha));
        }
    }
    ([s1 - s2, s3 - s4], [[-q1 + q2, -q3], [-q3, -q4 - q5]])
}

/// Hoshino's moment-type starting point (θ₀, α₀).
fn pitman_start(h: &ClassSizes) -> (f64, f64) {
    let (n, u) = (h.records() as f64, h.classes() as f64);
    let c1 = h.uniques() as f64;
    let c2 = match h.count(2) {
        0 => 1.0,
        c => c as f64,
    };
    let c = c1 * (c1 - 1.0) / c2;
    let theta = (n * u * c - c1 * (n - 1.0) * (2.0 * u + c)) / (2.0 * c1 * u + c1 * c - n * c);
    let alpha = (theta * (c1 - n) + (n - 1.0) * c1) / (n * u);
    (theta, alpha)
}

/// Pitman's maximum-likelihood parameters (θ, α), or `None` if Newton–Raphson does not converge
/// to a point of the model.
///
/// Steps (as ARX): 1. solve the closed form from Hoshino's start with the constraint θ ≥ 0;
/// 2. accept the root if the literal sums vanish there too (to the accuracy); 3. otherwise solve
/// the literal sums from the same start. Unlike ARX, a root outside the model's domain
/// ([`pitman_in_domain`]) is no root: the likelihood is undefined there.
///
/// Solutions are memoized process-wide by (histogram, solver settings): the result is a pure
/// function of both, so a hit returns exactly what a solve would, whoever asked first (the
/// search's checks, the input and output risk reports, the verification).
pub fn pitman_parameters(h: &ClassSizes, solver: &SolverConfig) -> Option<(f64, f64)> {
    let key = (
        solver.accuracy.to_bits(),
        solver.iterations_per_try,
        h.clone(),
    );
    if let Some(known) = PITMAN_MEMO.get(&key) {
        return known;
    }
    let solved = solve_pitman(h, solver);
    PITMAN_MEMO.insert(key, solved);
    solved
}

/// Pitman's parameters without the memo (see [`pitman_parameters`]).
fn solve_pitman(h: &ClassSizes, solver: &SolverConfig) -> Option<(f64, f64)> {
    let start = pitman_start(h);
    let feasible = |theta: f64, _: f64| theta >= 0.0;
    if let Some((t, a)) = newton::solve(solver, start, feasible, |t, a| pitman_closed(h, t, a)) {
        // Only the residual decides; the Jacobian is not needed here.
        let [f1, f2] = pitman_residual(h, t, a);
        if f1.abs() <= solver.accuracy && f2.abs() <= solver.accuracy && pitman_in_domain(h, t, a) {
            return Some((t, a));
        }
    }
    PITMAN_MEMO.by_sums.fetch_add(1, Ordering::Relaxed);
    newton::solve(solver, start, feasible, |t, a| pitman_exact(h, t, a))
        .filter(|&(t, a)| pitman_in_domain(h, t, a))
}

/// Key of a memoized Pitman solution: (accuracy bits, steps per try, histogram).
type PitmanKey = (u64, u32, ClassSizes);

/// Memoized Pitman solutions by key.
type PitmanSolutions = HashMap<PitmanKey, Option<(f64, f64)>, BuildCodeHasher>;

/// Memo of Pitman solutions by histogram, bounded (cleared when full), with counters of how
/// often a solution was reused and how often it was solved (in closed form or by the sums).
struct PitmanMemo {
    solutions: Mutex<PitmanSolutions>,
    reused: AtomicU64,
    solved: AtomicU64,
    by_sums: AtomicU64,
    sums: AtomicU64,
    residuals: AtomicU64,
}

/// Histograms kept by [`PitmanMemo`] before it is cleared.
const MEMO_ENTRIES: usize = 4096;

/// The process-wide memo of [`pitman_parameters`].
static PITMAN_MEMO: PitmanMemo = PitmanMemo {
    solutions: Mutex::new(HashMap::with_hasher(BuildHasherDefault::new())),
    reused: AtomicU64::new(0),
    solved: AtomicU64::new(0),
    by_sums: AtomicU64::new(0),
    sums: AtomicU64::new(0),
    residuals: AtomicU64::new(0),
};

/// Counts of Pitman solutions since the process started (all problems and threads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PitmanStatistics {
    /// Histograms whose solution came from the memo.
    pub reused: u64,
    /// Histograms solved.
    pub solved: u64,
    /// Of the solved, those whose closed-form root was not accepted, solved by the literal sums.
    pub by_sums: u64,
    /// Evaluations of the literal sums with their Jacobian (each O(records + classes + largest
    /// class), 9 divisions per term): the Newton steps of the solves by the sums.
    pub sums: u64,
    /// Evaluations of the residual of the literal sums alone (4 divisions per term): the
    /// acceptance tests of closed-form roots.
    pub residuals: u64,
}

/// The counters of the Pitman memo (see [`PitmanStatistics`]).
pub fn pitman_statistics() -> PitmanStatistics {
    PitmanStatistics {
        reused: PITMAN_MEMO.reused.load(Ordering::Relaxed),
        solved: PITMAN_MEMO.solved.load(Ordering::Relaxed),
        by_sums: PITMAN_MEMO.by_sums.load(Ordering::Relaxed),
        sums: PITMAN_MEMO.sums.load(Ordering::Relaxed),
        residuals: PITMAN_MEMO.residuals.load(Ordering::Relaxed),
    }
}

impl PitmanMemo {
    /// The memoized solution of `key`, if any (counted as reused).
    fn get(&self, key: &PitmanKey) -> Option<Option<(f64, f64)>> {
        let hit = self.solutions.lock().ok()?.get(key).copied();
        if hit.is_some() {
            self.reused.fetch_add(1, Ordering::Relaxed);
        }
        hit
    }

    /// Keeps a solution (counted as solved).
    fn insert(&self, key: PitmanKey, solution: Option<(f64, f64)>) {
        self.solved.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut m) = self.solutions.lock() {
            if m.len() >= MEMO_ENTRIES {
                m.clear();
            }
            m.insert(key, solution);
        }
    }
}

/// Whether Pitman's likelihood is defined at (θ, α) for the histogram: every factor θ + iα
/// (1 ≤ i < u) and k − α (1 ≤ k < the largest class size) is positive.
pub fn pitman_in_domain(h: &ClassSizes, theta: f64, alpha: f64) -> bool {
    let u = h.classes() as f64;
    let largest = h.pairs().last().map_or(0, |x| x.0);
    let classes_ok = u < 2.0 || (theta + alpha > 0.0 && theta + (u - 1.0) * alpha > 0.0);
    let sizes_ok = largest < 2 || alpha < 1.0;
    theta.is_finite() && alpha.is_finite() && classes_ok && sizes_ok
}

/// Hoshino's expected number of population uniques Γ(θ+1)/Γ(θ+α)·N^α, computed via ln Γ and via Γ;
/// the larger of the candidates within [0, N]; NaN if none or α = 0.
pub fn pitman_uniques(theta: f64, alpha: f64, population: u64) -> f64 {
    if theta.is_nan() || alpha.is_nan() || alpha == 0.0 {
        return f64::NAN;
    }
    let big_n = population as f64;
    let power = big_n.powf(alpha);
    let by_logs = (ln_gamma(theta + 1.0) - ln_gamma(theta + alpha)).exp() * power;
    let direct = gamma(theta + 1.0) / gamma(theta + alpha) * power;
    [by_logs, direct]
        .into_iter()
        .filter(|v| (0.0..=big_n).contains(v))
        .fold(f64::NAN, f64::max)
}

/// Pitman's estimate of the number of population uniques (NaN: no convergence).
pub fn pitman(h: &ClassSizes, population: u64, solver: &SolverConfig) -> f64 {
    if h.uniques() == 0 {
        return 0.0;
    }
    match pitman_parameters(h, solver) {
        Some((t, a)) => pitman_uniques(t, a, population),
        None => f64::NAN,
    }
}

// ---------------------------------------------------------------------------------------------
// Zayatz

/// ln h_j for every size j of the histogram, h_j = j·C(N−j, n−1)/C(N, n)
/// = j·f·Π_{i=1}^{j−1} (1 − (n−1)/(N−i)) (exact in log space; −∞ where it is 0).
fn ln_hypergeometric(h: &ClassSizes, population: u64) -> Vec<f64> {
    let (n, big_n) = (h.records() as f64, population as f64);
    let ln_f = (n / big_n).ln();
    let mut product = 0.0f64;
    let mut i = 1u64;
    let mut out = Vec::with_capacity(h.pairs().len());
    for &(j, _) in h.pairs() {
        while i < j {
            let x = (n - 1.0) / (big_n - i as f64);
            product += if x >= 1.0 {
                f64::NEG_INFINITY
            } else {
                (-x).ln_1p()
            };
            i += 1;
        }
        out.push((j as f64).ln() + ln_f + product);
    }
    out
}

/// Zayatz's estimate: U = c₁·P(F = 1 | f = 1)/f with P(F = 1 | f = 1) = (c₁/u)h₁ / Σ_j (c_j/u)h_j;
/// NaN if N < n. At f = 1 it is c₁ (only sample uniques are population uniques).
pub fn zayatz(h: &ClassSizes, population: u64) -> f64 {
    let c1 = h.uniques();
    if c1 == 0 {
        return 0.0;
    }
    if population < h.records() {
        return f64::NAN;
    }
    let u = h.classes() as f64;
    let ln_h = ln_hypergeometric(h, population);
    let denominator: f64 = h
        .pairs()
        .iter()
        .zip(&ln_h)
        .map(|(&(_, c), lh)| c as f64 / u * lh.exp())
        .sum();
    let h1 = ln_h[0].exp();
    let p = (c1 as f64 / u) * h1 / denominator;
    c1 as f64 * p / fraction(h, population)
}

// ---------------------------------------------------------------------------------------------
// SNB

/// ARX's Shlosser-type estimate of the number of population classes:
/// K̂ = u + c₁·(A/B)·(C/D)² with A = Σ j f²(1−f²)^{j−1} c_j, B = Σ [(1−f)^j(1+f)^j c_j − 1] (the
/// −1 once per distinct size, as coded in ARX), C = Σ (1−f)^j c_j, D = Σ j f (1−f)^{j−1} c_j.
pub fn shlosser_classes(h: &ClassSizes, f: f64) -> f64 {
    let (mut a, mut b, mut c, mut d) = (0.0, 0.0, 0.0, 0.0);
    for &(j, cj) in h.pairs() {
        let (jf, cj) = (j as f64, cj as f64);
        let jm1 = (j - 1) as i32;
        a += jf * f * f * (1.0 - f * f).powi(jm1) * cj;
        b += (1.0 - f).powi(j as i32) * (1.0 + f).powi(j as i32) * cj - 1.0;
        c += (1.0 - f).powi(j as i32) * cj;
        d += jf * f * (1.0 - f).powi(jm1) * cj;
    }
    h.classes() as f64 + h.uniques() as f64 * (a / b) * (c / d) * (c / d)
}

/// SNB's expected c₁ and c₂ (textbook, Chen & McNulty eqs. 1 and 2) for K classes at (α, β).
pub fn snb_expected(k: f64, f: f64, alpha: f64, beta: f64) -> (f64, f64) {
    let d = (1.0 - f) * (1.0 - beta);
    let g = 1.0 - d;
    let e1 = k * f * (beta / g).powf(alpha) * (1.0 + alpha * d / g);
    let e2 = k * alpha * beta.powf(alpha) * f * f * (1.0 - beta) / 2.0
        * g.powf(-(alpha + 2.0))
        * (2.0 - (1.0 - alpha) * d);
    (e1, e2)
}

/// The SNB system as ARX solves it: F = (E₁ − c₁, E₂′ − c₂) where E₂′ multiplies by
/// (1−d)^(α+2) instead of dividing (ARX's coded objective), with the Jacobian of the textbook
/// equations.
fn snb_system(k: f64, f: f64, c1: f64, c2: f64, alpha: f64, beta: f64) -> newton::Evaluation {
    let d = (1.0 - f) * (1.0 - beta);
    let g = 1.0 - d;
    let (e1, _) = snb_expected(k, f, alpha, beta);
    let b = beta.powf(alpha);
    let m = 1.0 - beta;
    let s = 2.0 - (1.0 - alpha) * d;
    let c2k = k * f * f / 2.0;
    let e2_coded = c2k * alpha * b * m * g.powf(alpha + 2.0) * s;
    // Jacobian of the textbook equations (product rule, no logarithms of possibly zero factors).
    let hh = g.powf(-alpha);
    let r = 1.0 + alpha * d / g;
    let db_da = b * beta.ln();
    let db_db = alpha * beta.powf(alpha - 1.0);
    let dh_da = -hh * g.ln();
    let dh_db = -alpha * g.powf(-alpha - 1.0) * (1.0 - f);
    let dr_da = d / g;
    let dr_db = -alpha * (1.0 - f) / (g * g);
    let c1k = k * f;
    let de1_da = c1k * (db_da * hh * r + b * dh_da * r + b * hh * dr_da);
    let de1_db = c1k * (db_db * hh * r + b * dh_db * r + b * hh * dr_db);
    let gg = g.powf(-(alpha + 2.0));
    let dg_da = -gg * g.ln();
    let dg_db = -(alpha + 2.0) * g.powf(-(alpha + 3.0)) * (1.0 - f);
    let ds_da = d;
    let ds_db = (1.0 - alpha) * (1.0 - f);
    let de2_da = c2k
        * (b * m * gg * s
            + alpha * db_da * m * gg * s
            + alpha * b * m * dg_da * s
            + alpha * b * m * gg * ds_da);
    let de2_db =
        c2k * alpha * (db_db * m * gg * s - b * gg * s + b * m * dg_db * s + b * m * gg * ds_db);
    (
        [e1 - c1, e2_coded - c2],
        [[de1_da, de1_db], [de2_da, de2_db]],
    )
}

/// SNB's estimate K̂·β^α of the number of population uniques (NaN: no convergence). Newton starts
/// at (α, β) = (1, 1), without constraints; the result is not range-checked (as ARX).
pub fn snb(h: &ClassSizes, population: u64, solver: &SolverConfig) -> f64 {
    let c1 = h.uniques();
    if c1 == 0 {
        return 0.0;
    }
    let f = fraction(h, population);
    let k = shlosser_classes(h, f);
    let c2 = h.count(2) as f64;
    match newton::solve(
        solver,
        (1.0, 1.0),
        |_, _| true,
        |a, b| snb_system(k, f, c1 as f64, c2, a, b),
    ) {
        Some((a, b)) => k * b.powf(a),
        None => f64::NAN,
    }
}

// ---------------------------------------------------------------------------------------------
// Dankar and the set of estimates

/// The outcome of Dankar et al.'s rule: the estimate and the estimator it chose.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Estimated number of population uniques; `None` when Pitman failed at f ≤ 0.1 and no
    /// fallback was asked for (ARX's privacy model: not fulfilled).
    pub uniques: Option<f64>,
    /// The estimator chosen (`Dankar` when there are no sample uniques).
    pub model: Estimator,
}

/// Dankar et al.'s decision rule as ARX implements it: no sample uniques → 0; f ≤ 0.1 → Pitman
/// if valid, else Zayatz (`zayatz_fallback`) or nothing; f > 0.1 → the smaller of Zayatz and SNB
/// if SNB is valid (ties and an invalid Zayatz → SNB), else Zayatz. Computes only the estimates
/// the rule needs.
pub fn dankar(
    h: &ClassSizes,
    population: u64,
    solver: &SolverConfig,
    zayatz_fallback: bool,
) -> Estimate {
    if h.uniques() == 0 {
        return choose(h, population, f64::NAN, f64::NAN, f64::NAN, zayatz_fallback);
    }
    if fraction(h, population) <= 0.1 {
        let p = pitman(h, population, solver);
        let z = if !is_valid(p) && zayatz_fallback {
            zayatz(h, population)
        } else {
            f64::NAN
        };
        choose(h, population, p, z, f64::NAN, zayatz_fallback)
    } else {
        let s = snb(h, population, solver);
        let z = zayatz(h, population);
        choose(h, population, f64::NAN, z, s, zayatz_fallback)
    }
}

/// Dankar's rule on given estimates (see [`dankar`]).
fn choose(
    h: &ClassSizes,
    population: u64,
    pitman: f64,
    zayatz: f64,
    snb: f64,
    zayatz_fallback: bool,
) -> Estimate {
    let chosen = |u: f64, model| Estimate {
        uniques: Some(u),
        model,
    };
    if h.uniques() == 0 {
        chosen(0.0, Estimator::Dankar)
    } else if fraction(h, population) <= 0.1 {
        if is_valid(pitman) {
            chosen(pitman, Estimator::Pitman)
        } else if zayatz_fallback {
            chosen(zayatz, Estimator::Zayatz)
        } else {
            Estimate {
                uniques: None,
                model: Estimator::Pitman,
            }
        }
    } else if is_valid(snb) {
        if zayatz < snb {
            chosen(zayatz, Estimator::Zayatz)
        } else {
            chosen(snb, Estimator::Snb)
        }
    } else {
        chosen(zayatz, Estimator::Zayatz)
    }
}

/// The estimate a privacy model compares with its threshold, as a number of uniques: the
/// estimator's value if valid, else 0 (Dankar: without the Zayatz fallback; `None` when it
/// leaves no value, which fails the model).
pub fn model_estimate(
    h: &ClassSizes,
    population: u64,
    model: Estimator,
    solver: &SolverConfig,
) -> Option<f64> {
    match model {
        Estimator::Pitman => Some(valid_or_zero(pitman(h, population, solver))),
        Estimator::Zayatz => Some(valid_or_zero(zayatz(h, population))),
        Estimator::Snb => Some(valid_or_zero(snb(h, population, solver))),
        Estimator::Dankar => dankar(h, population, solver, false)
            .uniques
            .map(valid_or_zero),
    }
}

/// All estimates of one histogram (for reports): numbers of population uniques, each the raw
/// estimate (NaN: the solver did not converge).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UniquenessEstimates {
    /// The population size N.
    pub population: u64,
    /// Pitman.
    pub pitman: f64,
    /// Zayatz.
    pub zayatz: f64,
    /// SNB.
    pub snb: f64,
    /// Dankar's rule with the Zayatz fallback (as ARX's risk analysis).
    pub dankar: Estimate,
}

impl UniquenessEstimates {
    /// Computes every estimator on `h`.
    pub fn compute(h: &ClassSizes, population: u64, solver: &SolverConfig) -> Self {
        let pitman = pitman(h, population, solver);
        let zayatz = zayatz(h, population);
        let snb = snb(h, population, solver);
        // Dankar's rule on the values above (the same as `dankar(h, N, solver, true)`).
        let dankar = choose(h, population, pitman, zayatz, snb, true);
        UniquenessEstimates {
            population,
            pitman,
            zayatz,
            snb,
            dankar,
        }
    }

    /// Whether an estimate is available (ARX: the estimate is not 0, or there are no sample
    /// uniques); `false` means the estimator failed.
    pub fn available(u: f64, h: &ClassSizes) -> bool {
        valid_or_zero(u) != 0.0 || h.uniques() == 0
    }

    /// An estimate as reported: the value if valid, else 0.
    pub fn reported(u: f64) -> f64 {
        valid_or_zero(u)
    }
}

#[cfg(test)]
mod tests;
