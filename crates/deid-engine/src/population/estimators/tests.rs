//! Estimator values against hand-computed cases, independent re-computations and each other's
//! limits.

use super::*;

fn hist(pairs: &[(u64, u64)]) -> ClassSizes {
    ClassSizes::from_pairs(pairs.iter().copied())
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs().max(1e-300)
}

/// C(a, b) as f64, by the product formula (independent of the estimator's log-space form).
fn binomial(a: u64, b: u64) -> f64 {
    (0..b).fold(1.0, |acc, i| acc * (a - i) as f64 / (i + 1) as f64)
}

#[test]
fn zayatz_by_hand() {
    // N = 10, sizes {1: 2, 2: 1} (n = 4, f = 0.4): h₁ = C(9,3)/C(10,4) = 0.4,
    // h₂ = 2·C(8,3)/C(10,4) = 112/210; U = 2 · (0.8 / (0.8 + 112/210)) / 0.4 = 3.
    let h = hist(&[(1, 2), (2, 1)]);
    assert!(close(zayatz(&h, 10), 3.0, 1e-12), "{}", zayatz(&h, 10));
    // A larger case against the literal binomial formula.
    let h = hist(&[(1, 7), (2, 4), (3, 2), (5, 1)]);
    let (n, big_n, u) = (h.records(), 60u64, h.classes() as f64);
    let hj = |j: u64| j as f64 * binomial(big_n - j, n - 1) / binomial(big_n, n);
    let denominator: f64 = h.pairs().iter().map(|&(j, c)| c as f64 / u * hj(j)).sum();
    let expected = 7.0 * ((7.0 / u) * hj(1) / denominator) / (n as f64 / big_n as f64);
    assert!(close(zayatz(&h, big_n), expected, 1e-10));
}

#[test]
fn zayatz_at_full_sampling_counts_the_sample_uniques() {
    for pairs in [
        &[(1u64, 5u64), (2, 3), (7, 1)][..],
        &[(1, 1)],
        &[(1, 100), (3, 50), (40, 2)],
    ] {
        let h = hist(pairs);
        let n = h.records();
        assert!(close(zayatz(&h, n), h.uniques() as f64, 1e-12), "{pairs:?}");
    }
    // Smaller populations than the sample have no estimate; no uniques give 0.
    assert!(zayatz(&hist(&[(1, 3), (2, 2)]), 6).is_nan());
    assert_eq!(zayatz(&hist(&[(2, 3)]), 100), 0.0);
}

#[test]
fn zayatz_tends_to_the_uniques_share_of_the_classes_in_large_populations() {
    // f → 0: h_j ≈ j·f, so U ≈ c₁²/(f·n) · … → the share c₁/N·(c₁·N/n)·… stays finite:
    // U·f → c₁² / n (every term h_j/f → j).
    let h = hist(&[(1, 30), (2, 10), (4, 5)]);
    let big_n = 10_000_000_000u64;
    let f = h.records() as f64 / big_n as f64;
    assert!(close(zayatz(&h, big_n) * f, 900.0 / 70.0, 1e-6));
}

/// The log-likelihood of Pitman's model by its literal definition.
fn log_likelihood(h: &ClassSizes, theta: f64, alpha: f64) -> f64 {
    let (n, u) = (h.records(), h.classes());
    let mut l = 0.0;
    for i in 1..u {
        l += (theta + i as f64 * alpha).ln();
    }
    for i in 1..n {
        l -= (theta + i as f64).ln();
    }
    for &(j, c) in h.pairs() {
        for k in 1..j {
            l += c as f64 * (k as f64 - alpha).ln();
        }
    }
    l
}

#[test]
fn pitman_finds_the_maximum_likelihood() {
    let h = hist(&[(1, 40), (2, 15), (3, 8), (4, 4), (6, 2), (10, 1)]);
    let (theta, alpha) = pitman_parameters(&h, &SolverConfig::default()).unwrap();
    // Pitman's model allows α < 0 (with θ > −α·(u − 1) so that every term is defined).
    assert!(theta >= 0.0 && alpha < 1.0, "{theta} {alpha}");
    assert!(theta + alpha * (h.classes() - 1) as f64 > 0.0);
    // The gradient, by finite differences of the literal likelihood, vanishes …
    let e = 1e-6;
    let g_theta =
        (log_likelihood(&h, theta + e, alpha) - log_likelihood(&h, theta - e, alpha)) / (2.0 * e);
    let g_alpha =
        (log_likelihood(&h, theta, alpha + e) - log_likelihood(&h, theta, alpha - e)) / (2.0 * e);
    assert!(
        g_theta.abs() < 1e-4 && g_alpha.abs() < 1e-4,
        "{g_theta} {g_alpha}"
    );
    // … at a maximum.
    let best = log_likelihood(&h, theta, alpha);
    for (dt, da) in [
        (0.5, 0.0),
        (-0.5, 0.0),
        (0.0, 0.02),
        (0.0, -0.02),
        (0.3, -0.01),
    ] {
        assert!(log_likelihood(&h, theta + dt, alpha + da) < best);
    }
    // U = Γ(θ+1)/Γ(θ+α)·N^α.
    let big_n = 1_000_000u64;
    let u = pitman(&h, big_n, &SolverConfig::default());
    let expected =
        (ln_gamma(theta + 1.0) - ln_gamma(theta + alpha)).exp() * (big_n as f64).powf(alpha);
    assert!(close(u, expected, 1e-12));
}

#[test]
fn pitman_closed_form_equals_the_literal_sums() {
    let h = hist(&[(1, 12), (2, 5), (3, 3), (8, 1)]);
    for (theta, alpha) in [(0.5, 0.3), (3.0, 0.7), (10.0, 0.05), (2.0, -0.03)] {
        let (f1, j1) = pitman_closed(&h, theta, alpha);
        let (f2, j2) = pitman_exact(&h, theta, alpha);
        for i in 0..2 {
            assert!(close(f1[i], f2[i], 1e-9), "F at {theta},{alpha}");
            for k in 0..2 {
                assert!(close(j1[i][k], j2[i][k], 1e-8), "J at {theta},{alpha}");
            }
        }
    }
}

#[test]
fn pitman_uniques_by_hand() {
    // θ = 1, α = 0.5, N = 100: Γ(2)/Γ(1.5)·√100 = 20/√π.
    let u = pitman_uniques(1.0, 0.5, 100);
    assert!(close(u, 20.0 / std::f64::consts::PI.sqrt(), 1e-12));
    // α = 0 and values outside [0, N] give no estimate.
    assert!(pitman_uniques(1.0, 0.0, 100).is_nan());
    assert!(pitman_uniques(1.0, 0.999, 10).is_nan() || pitman_uniques(1.0, 0.999, 10) <= 10.0);
}

#[test]
fn shlosser_by_hand() {
    // f = 0.5, sizes {1: 2, 2: 1}: A = 0.875, B = 0.0625 (ARX's −1 per size), C = 1.25, D = 1.5.
    let h = hist(&[(1, 2), (2, 1)]);
    let k = shlosser_classes(&h, 0.5);
    assert!(
        close(k, 3.0 + 2.0 * 14.0 * (1.25f64 / 1.5).powi(2), 1e-12),
        "{k}"
    );
    // f = 1: the sample is the population.
    let h = hist(&[(1, 5), (2, 3), (9, 2)]);
    assert!(close(shlosser_classes(&h, 1.0), 10.0, 1e-12));
}

#[test]
fn snb_jacobian_is_the_textbook_derivative_and_the_objective_is_arx_s() {
    let (k, f, c1, c2) = (500.0, 0.3, 40.0, 12.0);
    for (a, b) in [(0.7, 0.4), (1.3, 0.8), (0.2, 0.1)] {
        let ([f1, f2], jac) = snb_system(k, f, c1, c2, a, b);
        let (e1, e2) = snb_expected(k, f, a, b);
        assert!(close(f1, e1 - c1, 1e-12));
        // ARX multiplies by (1−d)^(α+2) where the textbook divides.
        let g: f64 = 1.0 - (1.0 - f) * (1.0 - b);
        assert!(close(f2 + c2, e2 * g.powf(2.0 * (a + 2.0)), 1e-10));
        let h = 1e-6;
        let (e1a, e2a) = snb_expected(k, f, a + h, b);
        let (e1b, e2b) = snb_expected(k, f, a - h, b);
        let (e1c, e2c) = snb_expected(k, f, a, b + h);
        let (e1d, e2d) = snb_expected(k, f, a, b - h);
        let fd = [
            [(e1a - e1b) / (2.0 * h), (e1c - e1d) / (2.0 * h)],
            [(e2a - e2b) / (2.0 * h), (e2c - e2d) / (2.0 * h)],
        ];
        for i in 0..2 {
            for j in 0..2 {
                assert!(close(jac[i][j], fd[i][j], 1e-5), "J[{i}][{j}] at ({a},{b})");
            }
        }
    }
}

/// A histogram shaped like census microdata: many small classes, a long tail.
fn census_like() -> ClassSizes {
    let pairs: Vec<(u64, u64)> = (1..=60u64)
        .map(|j| (j, (4000.0 / (j as f64).powf(1.6)).round() as u64))
        .filter(|p| p.1 > 0)
        .collect();
    hist(&pairs)
}

#[test]
fn estimators_agree_in_order_of_magnitude() {
    let h = census_like();
    let solver = SolverConfig::default();
    let big_n = h.records() * 20; // f = 0.05
    let p = pitman(&h, big_n, &solver);
    let z = zayatz(&h, big_n);
    assert!(is_valid(p) && is_valid(z), "{p} {z}");
    // Each estimate lies between 0 and the population, and they agree within a factor of 10.
    for v in [p, z] {
        assert!(v > 0.0 && v < big_n as f64);
    }
    assert!(p / z < 10.0 && z / p < 10.0, "pitman {p}, zayatz {z}");
    // Fewer population uniques than sample uniques can be unique in a 20 times larger population
    // … and a larger population never has more unique people by Zayatz than the sample has uniques
    // over f (every sample unique, scaled).
    assert!(z <= h.uniques() as f64 / 0.05);
}

#[test]
fn dankar_follows_the_sampling_fraction() {
    let h = census_like();
    let solver = SolverConfig::default();
    let n = h.records();
    // f = 0.05 ≤ 0.1: Pitman.
    let e = dankar(&h, n * 20, &solver, true);
    assert_eq!(e.model, Estimator::Pitman);
    assert_eq!(e.uniques, Some(pitman(&h, n * 20, &solver)));
    // f = 0.5: the smaller of Zayatz and a valid SNB, else Zayatz.
    let big_n = n * 2;
    let e = dankar(&h, big_n, &solver, false);
    let (s, z) = (snb(&h, big_n, &solver), zayatz(&h, big_n));
    let expected = if is_valid(s) && (z.is_nan() || z >= s) {
        s
    } else {
        z
    };
    assert_eq!(e.uniques, Some(expected));
    assert_eq!(
        UniquenessEstimates::compute(&h, big_n, &solver).dankar,
        dankar(&h, big_n, &solver, true)
    );
    // No sample uniques: 0 without solving, chosen model "dankar".
    let e = dankar(&hist(&[(2, 10), (3, 4)]), 1000, &solver, false);
    assert_eq!(
        e,
        Estimate {
            uniques: Some(0.0),
            model: Estimator::Dankar
        }
    );
}

#[test]
fn non_convergence_leaves_no_value_without_fallback() {
    // Only sample uniques: the likelihood grows without bound towards α = 1, θ → ∞;
    // Newton finds no root.
    let h = hist(&[(1, 50)]);
    let solver = SolverConfig::default();
    let p = pitman(&h, 100_000, &solver);
    assert!(!is_valid(p), "{p}");
    assert_eq!(dankar(&h, 100_000, &solver, false).uniques, None);
    assert_eq!(
        model_estimate(&h, 100_000, Estimator::Dankar, &solver),
        None
    );
    assert_eq!(
        model_estimate(&h, 100_000, Estimator::Pitman, &solver),
        Some(0.0)
    );
    let z = dankar(&h, 100_000, &solver, true);
    assert_eq!(z.model, Estimator::Zayatz);
    assert_eq!(z.uniques, Some(zayatz(&h, 100_000)));
    assert!(!UniquenessEstimates::available(p, &h));
}

#[test]
fn population_sizes_are_validated() {
    use super::super::{PopulationModel, Region};
    assert_eq!(PopulationModel::Size(100).population_size(100), Ok(100));
    assert!(PopulationModel::Size(99).population_size(100).is_err());
    // round(rows / f), halves up: 3 / 0.4 = 7.5 → 8.
    assert_eq!(
        PopulationModel::SamplingFraction(0.4).population_size(3),
        Ok(8)
    );
    assert_eq!(
        PopulationModel::SamplingFraction(1.0).population_size(30),
        Ok(30)
    );
    for bad in [0.0, -0.1, 1.5, f64::NAN] {
        let e = PopulationModel::SamplingFraction(bad)
            .population_size(30)
            .unwrap_err();
        assert_eq!(e.config_error().unwrap().0, "sampling_fraction");
    }
    assert_eq!(
        PopulationModel::Region(Region::Usa).population_size(30162),
        Ok(317_238_626)
    );
    assert_eq!(Region::parse("USA"), Some(Region::Usa));
    assert_eq!(Region::parse("brasil"), Some(Region::Brazil));
    assert_eq!(Region::parse("European Union"), Some(Region::EuropeanUnion));
    assert_eq!(Region::parse("atlantis"), None);
    for r in Region::ALL {
        assert_eq!(Region::parse(r.name()), Some(r));
    }
}

/// Newton's root of Pitman's likelihood equations can lie where the likelihood is undefined
/// (θ + (u−1)α ≤ 0); ARX reports its estimate (here 8·10⁻¹⁶ population uniques in a million
/// people). Such a root is a failed estimate: no parameters, no valid value, and the privacy
/// model's estimate is 0, which fails it while there are sample uniques.
#[test]
fn pitman_roots_outside_the_model_fail() {
    let h = hist(&[(1, 2), (15, 20), (35, 5), (45, 30), (59, 27)]);
    let solver = SolverConfig::default();
    // The root the equations have (found by the solver without the domain check).
    let start = pitman_start(&h);
    let (t, a) = newton::solve(
        &solver,
        start,
        |t, _| t >= 0.0,
        |t, a| pitman_closed(&h, t, a),
    )
    .expect("the closed form has a root");
    let ([f1, f2], _) = pitman_exact(&h, t, a);
    assert!(f1.abs() <= 1e-6 && f2.abs() <= 1e-6);
    let u = h.classes() as f64;
    assert!(t + (u - 1.0) * a <= 0.0, "θ {t}, α {a}");
    assert!(!pitman_in_domain(&h, t, a));
    let arx = pitman_uniques(t, a, 1_000_000);
    assert!(arx > 0.0 && arx < 1e-12, "{arx}");
    // deid: a failed estimate.
    assert_eq!(pitman_parameters(&h, &solver), None);
    assert!(!is_valid(pitman(&h, 1_000_000, &solver)));
    assert_eq!(
        model_estimate(&h, 1_000_000, Estimator::Pitman, &solver),
        Some(0.0)
    );
    // The domain: every θ + iα (i < u) and k − α (k < largest size) positive.
    assert!(pitman_in_domain(&h, 1.0, 0.5));
    assert!(!pitman_in_domain(&h, 1.0, 1.0));
    assert!(pitman_in_domain(&hist(&[(1, 3)]), 1.0, 1.5));
    assert!(!pitman_in_domain(&h, f64::NAN, 0.5));
}

/// The literal sums one term at a time (the definition [`pitman_exact`] computes in blocks).
fn pitman_one_term_at_a_time(h: &ClassSizes, theta: f64, alpha: f64) -> newton::Evaluation {
    let (n, u) = (h.records(), h.classes());
    let (mut s1, mut s3, mut q1, mut q3, mut q4) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for i in 1..u {
        let i = i as f64;
        let t = theta + i * alpha;
        s1 += 1.0 / t;
        s3 += i / t;
        q1 += 1.0 / (t * t);
        q3 += i / (t * t);
        q4 += i * i / (t * t);
    }
    let (mut s2, mut q2) = (0.0, 0.0);
    for i in 1..n {
        let t = theta + i as f64;
        s2 += 1.0 / t;
        q2 += 1.0 / (t * t);
    }
    let (mut s4, mut q5) = (0.0, 0.0);
    for k in 1..h.pairs().last().map_or(0, |x| x.0) {
        let larger: u64 = h.pairs().iter().filter(|p| p.0 > k).map(|p| p.1).sum();
        let t = k as f64 - alpha;
        s4 += larger as f64 / t;
        q5 += larger as f64 / (t * t);
    }
    ([s1 - s2, s3 - s4], [[-q1 + q2, -q3], [-q3, -q4 - q5]])
}

#[test]
fn pitman_literal_sums_are_bit_identical_to_one_term_at_a_time() {
    let cases = [
        hist(&[(1, 1)]),
        hist(&[(2, 1)]),
        hist(&[(1, 3), (2, 1)]),
        hist(&[(1, 7), (2, 4), (3, 2), (5, 1)]),
        hist(&[(3, 5), (4, 1), (11, 2), (12, 1), (40, 3)]),
        census_like(),
    ];
    for h in &cases {
        for (theta, alpha) in [(0.0, 0.0), (0.5, 0.33), (12.25, 0.9), (1e4, 0.01)] {
            let (f, j) = pitman_exact(h, theta, alpha);
            let (g, k) = pitman_one_term_at_a_time(h, theta, alpha);
            let bits = |e: [f64; 2]| e.map(f64::to_bits);
            assert_eq!(bits(f), bits(g), "{h:?} at ({theta}, {alpha})");
            assert_eq!(bits(pitman_residual(h, theta, alpha)), bits(g));
            assert_eq!(bits(j[0]), bits(k[0]));
            assert_eq!(bits(j[1]), bits(k[1]));
        }
    }
}

/// Bits of a Pitman solution, for exact comparisons.
fn solution_bits(s: Option<(f64, f64)>) -> Option<(u64, u64)> {
    s.map(|(t, a)| (t.to_bits(), a.to_bits()))
}

proptest::proptest! {
    /// The residual alone is bit-identical to the residual of the full evaluation, so testing a
    /// closed-form root with it accepts exactly the roots the full evaluation accepts.
    #[test]
    fn pitman_residual_is_the_residual_of_the_full_evaluation(
        pairs in proptest::collection::vec((1u64..300, 1u64..400), 1..8),
        theta in -50.0f64..5e4,
        alpha in -3.0f64..1.0,
    ) {
        let h = hist(&pairs);
        let bits = |e: [f64; 2]| e.map(f64::to_bits);
        let (f, _) = pitman_exact(&h, theta, alpha);
        proptest::prop_assert_eq!(bits(pitman_residual(&h, theta, alpha)), bits(f));
    }

    /// The memo returns exactly what a solve returns, whatever was asked before and in which
    /// order: the histograms are asked in the generated order, then again in reverse.
    #[test]
    fn memoized_pitman_solutions_are_the_solves(
        histograms in proptest::collection::vec(
            proptest::collection::vec((1u64..40, 1u64..60), 1..6),
            1..5,
        ),
    ) {
        let solver = SolverConfig::default();
        let hs: Vec<ClassSizes> = histograms.iter().map(|p| hist(p)).collect();
        let fresh: Vec<_> = hs.iter().map(|h| solution_bits(solve_pitman(h, &solver))).collect();
        for (h, f) in hs.iter().zip(&fresh) {
            proptest::prop_assert_eq!(solution_bits(pitman_parameters(h, &solver)), *f);
        }
        for (h, f) in hs.iter().zip(&fresh).rev() {
            proptest::prop_assert_eq!(solution_bits(pitman_parameters(h, &solver)), *f);
        }
    }
}

#[test]
fn the_pitman_memo_counts_solves_and_reuses() {
    // A histogram no other test asks for; other tests may run at the same time (the counters
    // only grow) and may clear the memo in between (then the second call solves again).
    let h = hist(&[(1, 4_321), (2, 1_234), (3, 77), (9, 5), (31, 2)]);
    let solver = SolverConfig::default();
    let before = pitman_statistics();
    let first = pitman_parameters(&h, &solver);
    let middle = pitman_statistics();
    assert!(middle.solved > before.solved || middle.reused > before.reused);
    let second = pitman_parameters(&h, &solver);
    let after = pitman_statistics();
    assert_eq!(solution_bits(first), solution_bits(second));
    assert!(first.is_some());
    assert!(after.reused > middle.reused || after.solved > middle.solved);
    assert!(after.by_sums <= after.solved);
}
