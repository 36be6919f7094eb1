//! Population uniqueness on adult: every algorithm's output CSV is checked by the independent
//! checker, which recomputes the classes from the CSV and estimates the population uniques on the
//! published class sizes — Zayatz by its literal hypergeometric formula (no engine code), Pitman
//! with the engine's estimator applied to the output's class sizes.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::independent::{Model, Output, verify};
use deid_engine::dataset::ArxDataset;
use deid_engine::population::{ClassSizes, PopulationModel, Region, SolverConfig, estimators};
use deid_engine::{
    Algorithm, CancelFlag, Checker, NoObserver, PrivacyModel, Problem, ProblemConfig, SearchConfig,
    search,
};

fn problem(privacy: &str, population: PopulationModel, limit: f64) -> Problem {
    let ds = ArxDataset::load(Path::new("../../examples/adult"), "adult").unwrap();
    let config = ProblemConfig {
        quasi_identifiers: ds.quasi_identifiers,
        privacy: vec![PrivacyModel::parse(privacy).unwrap()],
        suppression_limit: limit,
        population: Some(population),
        ..Default::default()
    };
    Problem::new(ds.table, config).unwrap()
}

/// ln C(a, b) by its product form.
fn ln_binomial(a: u64, b: u64) -> f64 {
    (1..=b).map(|i| ((a - b + i) as f64 / i as f64).ln()).sum()
}

/// Zayatz's estimate from the definition: h_j = P(X = 1), X hypergeometric (N, j successes, n
/// draws); U = c₁ · ((c₁/u)·h₁ / Σ_classes h_j/u) / f.
fn zayatz_literal(sizes: &[u64], population: u64) -> Option<f64> {
    let n: u64 = sizes.iter().sum();
    let u = sizes.len() as f64;
    let c1 = sizes.iter().filter(|&&s| s == 1).count() as f64;
    if c1 == 0.0 {
        return Some(0.0);
    }
    let denominator = ln_binomial(population, n);
    let mut h = std::collections::BTreeMap::new();
    for &j in sizes {
        h.entry(j).or_insert_with(|| {
            if population - j < n - 1 {
                0.0
            } else {
                ((j as f64).ln() + ln_binomial(population - j, n - 1) - denominator).exp()
            }
        });
    }
    let sum: f64 = sizes.iter().map(|j| h[j] / u).sum();
    let f = n as f64 / population as f64;
    Some(c1 * ((c1 / u) * h[&1] / sum) / f)
}

/// The engine's Pitman estimator (ARX's rule: invalid estimates count as 0) on the sizes.
fn pitman_on_sizes(sizes: &[u64], population: u64) -> Option<f64> {
    let h = ClassSizes::from_sizes(sizes.iter().copied());
    estimators::model_estimate(
        &h,
        population,
        deid_engine::population::Estimator::Pitman,
        &SolverConfig::default(),
    )
}

fn run_all(
    privacy: &str,
    population: PopulationModel,
    independent: fn(&[u64], u64) -> Option<f64>,
    threshold: f64,
    algorithms: &[Algorithm],
) {
    let limit = 0.05;
    let p = problem(privacy, population, limit);
    let n = p.population().unwrap();
    let qis: Vec<String> = common::qi_names(&p);
    let qis: Vec<&str> = qis.iter().map(String::as_str).collect();
    for &algorithm in algorithms {
        let config = SearchConfig {
            algorithm,
            time_limit: Duration::from_secs(3),
            seed: 1,
            ..Default::default()
        };
        let outcome = search(&p, &config, &CancelFlag::new(), &NoObserver).unwrap();
        let best = outcome
            .best
            .unwrap_or_else(|| panic!("{algorithm}: no solution for {privacy}"));
        assert_eq!(Checker::new(&p).check(&best.levels), best, "{algorithm}");
        let (eval, csv) = common::anonymize(&p, &best.levels);
        assert!(eval.result.anonymous);
        let v = verify(
            &Output::parse(&csv, b';'),
            &qis,
            &[Model::PopulationUniqueness {
                threshold,
                population: n,
                estimate: independent,
            }],
            limit,
        );
        assert!(
            v.violations.is_empty(),
            "{algorithm} {privacy}: {:?}",
            v.violations
        );
        assert_eq!(v.suppressed, best.suppressed, "{algorithm}");
    }
}

#[test]
fn zayatz_outputs_pass_the_literal_estimator() {
    run_all(
        "population-uniqueness(threshold=0.002,model=zayatz)",
        PopulationModel::SamplingFraction(0.2),
        zayatz_literal,
        0.002,
        &[Algorithm::Flash, Algorithm::Genetic, Algorithm::Lightning],
    );
}

#[test]
fn pitman_one_percent_of_the_us_population() {
    // The GigaScience paper's setting: at most 1 % of the US population unique (Pitman).
    run_all(
        "population-uniqueness(threshold=0.01,model=pitman)",
        PopulationModel::Region(Region::Usa),
        pitman_on_sizes,
        0.01,
        &[Algorithm::Flash, Algorithm::Lightning],
    );
}

#[test]
fn the_literal_zayatz_agrees_with_the_engine() {
    let sizes: Vec<u64> = [1u64, 1, 1, 2, 2, 3, 7, 1, 12, 4, 4, 1].to_vec();
    for population in [40u64, 400, 40_000, 317_238_626] {
        let h = ClassSizes::from_sizes(sizes.iter().copied());
        let engine = estimators::zayatz(&h, population);
        let literal = zayatz_literal(&sizes, population).unwrap();
        assert!(
            (engine - literal).abs() <= 1e-9 * literal,
            "{population}: {engine} {literal}"
        );
    }
}

/// k′ of the estimated k-map by its definition, written independently of the engine: the
/// Poisson CDF from pmf(i) = e^−λ λ^i / i! computed in log space, ARX's "+2" offset and the caps.
fn k_prime_literal(k: u32, alpha: f64, rows: u64, population: u64) -> u32 {
    let lambda = rows as f64 * k as f64 / population as f64;
    let ln_pmf =
        |i: u64| -lambda + i as f64 * lambda.ln() - (1..=i).map(|j| (j as f64).ln()).sum::<f64>();
    let mut cdf = 0.0;
    let mut c = 0u64;
    let raw = loop {
        cdf += ln_pmf(c).exp();
        if cdf >= 1.0 - alpha || c + 1 >= k as u64 {
            break c + 2;
        }
        c += 1;
    };
    raw.min(k as u64).min(rows) as u32
}

/// Searches `p` with `algorithm` for `seconds` (seed 1) and checks the best output's CSV with the
/// independent checker: every class has at least `k` records, within `limit`.
fn assert_k_anonymous_output(
    p: &Problem,
    algorithm: Algorithm,
    seconds: u64,
    qis: &[&str],
    k: usize,
    limit: f64,
) {
    let config = SearchConfig {
        algorithm,
        time_limit: Duration::from_secs(seconds),
        seed: 1,
        ..Default::default()
    };
    let best = search(p, &config, &CancelFlag::new(), &NoObserver)
        .unwrap()
        .best
        .unwrap_or_else(|| panic!("{algorithm}: no solution"));
    let (eval, csv) = common::anonymize(p, &best.levels);
    assert!(eval.result.anonymous);
    let v = verify(&Output::parse(&csv, b';'), qis, &[Model::K(k)], limit);
    assert!(
        v.violations.is_empty(),
        "{algorithm} k = {k}: {:?}",
        v.violations
    );
}

/// The audited case of a large λ: adult with age, sex, race, marital-status and education in a
/// population of 404,832 people, k = 10,000, α = 0.01, suppression limit 10 %: λ = 745.05, where
/// a running CDF from e^−λ underflows. k′ is the literal quantile (811, not 749), and the output
/// CSV has no class below it (a class of 790 records would have a type-I error of 0.46).
#[test]
fn estimated_k_map_at_a_large_lambda() {
    let ds = ArxDataset::load(Path::new("../../examples/adult"), "adult").unwrap();
    let keep = ["age", "sex", "race", "marital-status", "education"];
    let config = ProblemConfig {
        quasi_identifiers: ds
            .quasi_identifiers
            .into_iter()
            .filter(|q| keep.contains(&q.column.as_str()))
            .collect(),
        privacy: vec![PrivacyModel::parse("k-map(k=10000,alpha=0.01)").unwrap()],
        suppression_limit: 0.1,
        population: Some(PopulationModel::Size(404_832)),
        ..Default::default()
    };
    let p = Problem::new(ds.table, config).unwrap();
    let expected = k_prime_literal(10_000, 0.01, p.rows() as u64, 404_832);
    assert_eq!(expected, 811);
    assert_eq!(p.min_class_size(), expected);
    assert_k_anonymous_output(&p, Algorithm::Flash, 30, &keep, expected as usize, 0.1);
}

/// Estimated k-map on adult in the US population: enforced as k′-anonymity with the k′ of its
/// definition; every algorithm's output CSV has classes of at least k′ (independent checker),
/// and k-map needs a population model.
#[test]
fn estimated_k_map_holds_as_k_prime_anonymity() {
    for (k, expected) in [(1000, 3), (10_000, 6)] {
        let privacy = format!("k-map(k={k},alpha=0.01)");
        let p = problem(&privacy, PopulationModel::Region(Region::Usa), 0.05);
        let n = p.population().unwrap();
        assert_eq!(k_prime_literal(k, 0.01, p.rows() as u64, n), expected);
        assert_eq!(p.min_class_size(), expected);
        let qis: Vec<String> = common::qi_names(&p);
        let qis: Vec<&str> = qis.iter().map(String::as_str).collect();
        for algorithm in [Algorithm::Flash, Algorithm::Lightning] {
            assert_k_anonymous_output(&p, algorithm, 3, &qis, expected as usize, 0.05);
        }
    }
    let ds = ArxDataset::load(Path::new("../../examples/adult"), "adult").unwrap();
    let config = ProblemConfig {
        quasi_identifiers: ds.quasi_identifiers,
        privacy: vec![PrivacyModel::parse("k-map(k=5,alpha=0.05)").unwrap()],
        ..Default::default()
    };
    let Err(err) = Problem::new(ds.table, config) else {
        panic!("k-map needs a population");
    };
    assert!(err.to_string().contains("population"), "{err}");
}
