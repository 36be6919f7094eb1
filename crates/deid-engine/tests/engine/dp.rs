//! (ε, δ)-differential privacy (SafePub, `docs/definitions.md` §3.9): the derived k and β, the
//! sample (plain and frequency tables), the output's k-anonymity on the released records
//! (verified from the CSV by the independent checker), reproducibility, the exponential
//! mechanism's probabilities and the score functions' sensitivities.

use crate::common;

use std::collections::HashMap;
use std::path::Path;

use common::independent::{Model, Output, verify};
use deid_engine::dataset::ArxDataset;
use deid_engine::privacy::{DpModel, PrivacyModel};
use deid_engine::search::safepub::{
    ClassScore, ScoreFunction, entropy_score, select, selection_probabilities,
};
use deid_engine::search::{CancelFlag, NoObserver, SearchConfig, search};
use deid_engine::{EngineError, Problem, ProblemConfig, Table};
use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;

fn dp(epsilon: f64, delta: f64, seed: u64) -> DpModel {
    DpModel {
        seed,
        ..DpModel::new(epsilon, delta)
    }
}

fn adult() -> ArxDataset {
    ArxDataset::load(Path::new("../../examples/adult"), "adult").expect("adult loads")
}

fn config(ds: &ArxDataset, model: DpModel, count: bool) -> ProblemConfig {
    ProblemConfig {
        quasi_identifiers: ds.quasi_identifiers.clone(),
        privacy: vec![PrivacyModel::DifferentialPrivacy(model)],
        count_column: count.then(|| "n".into()),
        ..Default::default()
    }
}

fn adult_dp(model: DpModel) -> deid_engine::Result<Problem> {
    let ds = adult();
    let config = config(&ds, model, false);
    Problem::new(ds.table, config)
}

/// The levels SafePub chose and the anonymized CSV (`;`).
fn run(problem: &Problem) -> (Vec<u8>, String) {
    let out = search(
        problem,
        &SearchConfig::default(),
        &CancelFlag::default(),
        &NoObserver,
    )
    .unwrap();
    let best = out.best.expect("a result");
    let eval = deid_engine::Checker::new(problem).evaluate(&best.levels);
    let mut buf = Vec::new();
    deid_engine::output::write_csv(problem, &eval, &mut buf, b';', &Default::default()).unwrap();
    (best.levels, String::from_utf8(buf).unwrap())
}

#[test]
fn k_and_beta_match_arx_table() {
    // ARX 3.9.2, δ = 10⁻⁶, search budget 10 % of ε.
    for (eps, k, beta) in [(0.5, 65, 0.362), (1.0, 74, 0.593), (2.0, 118, 0.835)] {
        let p = dp(eps, 1e-6, 0).derive(1_000_000).unwrap();
        assert_eq!(p.k, k, "ε = {eps}");
        assert!((p.beta - beta).abs() < 5e-4, "ε = {eps}: β = {}", p.beta);
        // β = 1 − e^(−0.9 ε) by hand, never above it.
        let exact = 1.0 - (-0.9 * eps).exp();
        assert!(p.beta <= exact && exact - p.beta < 1e-12, "ε = {eps}");
        assert!((p.epsilon_search - 0.1 * eps).abs() < 1e-12);
    }
    // Given levels (data-independent): the whole ε goes to the anonymization.
    let mut m = dp(1.0, 1e-6, 0);
    m.data_dependent = false;
    let p = m.derive(1_000_000).unwrap();
    assert_eq!(p.epsilon_search, 0.0);
    assert!((p.beta - (1.0 - (-1.0f64).exp())).abs() < 1e-12);
}

/// δ(k) by a plain computation (binomial pmf by recursion, maximum over a long range of n).
fn delta_by_hand(eps: f64, k: usize) -> f64 {
    let beta = 1.0 - (-eps).exp();
    let gamma = 1.0 - (1.0 - beta) * (-eps).exp();
    let tail = |n: usize| -> f64 {
        let mut pmf = vec![0.0f64; n + 1];
        pmf[0] = (1.0 - beta).powi(n as i32);
        for j in 0..n {
            pmf[j + 1] = pmf[j] * (n - j) as f64 / (j + 1) as f64 * beta / (1.0 - beta);
        }
        let from = (gamma * n as f64).floor() as usize + 1;
        pmf[from.min(n + 1)..].iter().sum()
    };
    let n_m = (k as f64 / gamma - 1.0).ceil() as usize;
    (n_m.max(1)..2000).map(tail).fold(0.0, f64::max)
}

#[test]
fn k_follows_delta_of_k_computed_by_hand() {
    // The derived k is one more than the smallest k with δ(k) < δ (as ARX 3.9.2).
    for (share, delta) in [(0.1, 1e-6), (0.1, 1e-5), (0.5, 1e-7)] {
        let eps = 1.0 - share;
        let smallest = (1..).find(|&k| delta_by_hand(eps, k) < delta).unwrap();
        let mut m = dp(1.0, delta, 0);
        m.search_share = share;
        let derived = m.derive(100_000).unwrap().k as usize;
        assert_eq!(derived, smallest + 1, "share {share}, δ {delta}");
        // The engine's bound is never below the plain value.
        let engine =
            deid_engine::privacy::dp::delta_of_k(m.epsilon_anon(), smallest as u32).unwrap();
        assert!(engine >= delta_by_hand(eps, smallest) * (1.0 - 1e-9));
    }
}

#[test]
fn bad_parameters_name_their_field() {
    let cases = [
        ("differential-privacy(epsilon=0,delta=1e-6)", "epsilon"),
        ("differential-privacy(epsilon=-1,delta=1e-6)", "epsilon"),
        ("differential-privacy(epsilon=1,delta=0)", "delta"),
        ("differential-privacy(epsilon=1,delta=1)", "delta"),
        (
            "differential-privacy(epsilon=1,delta=1e-6,search_share=1)",
            "search_share",
        ),
        (
            "differential-privacy(epsilon=1,delta=1e-6,search_share=0)",
            "search_share",
        ),
        (
            "differential-privacy(epsilon=1,delta=1e-6,steps=0)",
            "steps",
        ),
    ];
    for (text, field) in cases {
        match PrivacyModel::parse(text) {
            Err(EngineError::InvalidConfig { field: f, .. }) => assert_eq!(f, field, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }
    // δ too small for the data size.
    match dp(0.1, 1e-12, 0).derive(50) {
        Err(EngineError::InvalidConfig { field, .. }) => assert_eq!(field, "delta"),
        other => panic!("{other:?}"),
    }
    let m = PrivacyModel::parse("differential-privacy(epsilon=1,delta=1e-6,steps=7)").unwrap();
    assert_eq!(PrivacyModel::parse(&m.to_string()).unwrap(), m);
}

#[test]
fn combinations_the_model_cannot_take_are_refused() {
    let refused =
        |config: ProblemConfig, table: Table, want: &str| match Problem::new(table, config) {
            Err(EngineError::InvalidConfig { field, .. }) => assert_eq!(field, want),
            other => panic!("{:?}", other.map(|_| ())),
        };
    let ds = adult();
    let mut c = config(&ds, dp(1.0, 1e-6, 0), false);
    c.privacy
        .push(PrivacyModel::SampleUniqueness { threshold: 0.1 });
    refused(c, ds.table.clone(), "privacy[1]");
    let mut c = config(&ds, dp(1.0, 1e-6, 0), false);
    c.research_subset = Some(deid_engine::config::ResearchSubset::Rows(vec![1, 2, 3]));
    refused(c, ds.table.clone(), "research_subset");
    let mut c = config(&ds, dp(1.0, 1e-6, 0), false);
    c.quality.model = deid_engine::QualityModel::KlDivergence;
    refused(c, ds.table.clone(), "quality.model");
    // A column neither generalized nor removed would be released as it is.
    let mut c = config(&ds, dp(1.0, 1e-6, 0), false);
    c.quasi_identifiers.retain(|q| q.column != "sex");
    refused(c, ds.table.clone(), "attributes.sex");
    // k-anonymity may be added: the larger k holds.
    let mut c = config(&ds, dp(1.0, 1e-6, 0), false);
    c.privacy.push(PrivacyModel::KAnonymity { k: 200 });
    let p = Problem::new(ds.table, c).unwrap();
    assert_eq!(p.min_class_size(), 200);
}

/// Classes of the released records (all quasi-identifiers) verified by the independent checker;
/// returns the released records.
fn verify_k(problem: &Problem, csv: &str, k: usize) -> usize {
    let out = Output::parse(csv, b';');
    let qis: Vec<String> = common::qi_names(problem);
    let qis: Vec<&str> = qis.iter().map(String::as_str).collect();
    // No suppressed record is written: a suppression limit of 0 checks that too.
    let verdict = verify(&out, &qis, &[Model::K(k)], 0.0);
    assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
    assert_eq!(verdict.suppressed, 0);
    out.rows.len()
}

#[test]
fn output_is_k_anonymous_on_the_released_records() {
    for (eps, seed) in [(0.5, 11), (1.0, 12), (2.0, 13)] {
        let problem = adult_dp(dp(eps, 1e-6, seed)).unwrap();
        let setup = problem.dp().unwrap();
        let k = setup.params.k as usize;
        assert_eq!(problem.rows(), setup.sampled);
        let (levels, csv) = run(&problem);
        let released = verify_k(&problem, &csv, k);
        assert!(released > 0, "ε = {eps}");
        // Only sampled records of kept classes are written.
        let suppressed = deid_engine::Checker::new(&problem)
            .check(&levels)
            .suppressed;
        assert_eq!(released + suppressed, setup.sampled);
    }
}

#[test]
fn same_seed_same_output_other_seed_other_sample() {
    let a = run(&adult_dp(dp(1.0, 1e-6, 5)).unwrap());
    let b = run(&adult_dp(dp(1.0, 1e-6, 5)).unwrap());
    assert_eq!(a, b);
    let c = adult_dp(dp(1.0, 1e-6, 6)).unwrap();
    let d = adult_dp(dp(1.0, 1e-6, 5)).unwrap();
    let released = |p: &Problem| -> Vec<usize> {
        (0..p.table().rows())
            .filter(|&r| p.is_released(r))
            .collect()
    };
    assert_ne!(released(&c), released(&d));
}

#[test]
fn sampling_rate_matches_beta() {
    // 200 seeds × 10,000 records: the standard error of the rate is about 3.5e-4; the tolerance
    // (5 standard errors, 1.7e-3) fails for β off by 0.002 or more, e.g. 1 − e^(−ε) with the
    // whole ε (0.632 instead of 0.593).
    let p = dp(1.0, 1e-6, 0).derive(10_000).unwrap();
    let draws: u64 = (0..200u64)
        .map(|seed| {
            p.sample(10_000, |_| 1, seed)
                .iter()
                .map(|&c| u64::from(c))
                .sum::<u64>()
        })
        .sum();
    let rate = draws as f64 / 2_000_000.0;
    let se = (p.beta * (1.0 - p.beta) / 2_000_000.0).sqrt();
    assert!(
        (rate - p.beta).abs() < 5.0 * se,
        "rate {rate}, β {}",
        p.beta
    );
}

#[test]
fn a_row_of_count_c_releases_a_binomial_number_of_records() {
    // 20,000 rows of count 12: a chi-square goodness of fit of the released counts against
    // Binomial(12, β), bins 0–3 pooled and 11–12 pooled (8 bins, 7 degrees of freedom; the
    // 0.999 quantile is 24.32). With β off by 0.01 the statistic exceeds 60.
    let p = dp(1.0, 1e-6, 0).derive(1_000_000).unwrap();
    let (rows, c) = (20_000usize, 12u32);
    let drawn = p.sample(rows, |_| c, 3);
    let pmf = |beta: f64| -> Vec<f64> {
        let mut pmf = vec![(1.0 - beta).powi(c as i32)];
        for j in 0..c {
            let next = pmf[j as usize] * f64::from(c - j) / f64::from(j + 1) * beta / (1.0 - beta);
            pmf.push(next);
        }
        pmf
    };
    let bin = |j: u32| (j.clamp(3, 11) - 3) as usize;
    let chi2 = |beta: f64| -> f64 {
        let (mut observed, mut expected) = ([0f64; 9], [0f64; 9]);
        for &d in &drawn {
            observed[bin(d)] += 1.0;
        }
        for (j, q) in pmf(beta).iter().enumerate() {
            expected[bin(j as u32)] += q * rows as f64;
        }
        (observed.iter().zip(&expected))
            .filter(|(_, e)| **e > 0.0)
            .map(|(o, e)| (o - e).powi(2) / e)
            .sum()
    };
    assert!(chi2(p.beta) < 24.32, "χ² = {}", chi2(p.beta));
    assert!(chi2(p.beta + 0.01) > 24.32, "the test detects a wrong β");
    assert!(chi2(p.beta - 0.01) > 24.32, "the test detects a wrong β");
}

/// adult grouped on all its columns into a frequency table (count column `n`), and the same
/// records expanded with every row's records next to each other.
fn adult_grouped() -> (ArxDataset, Table, Table, Vec<u32>) {
    let ds = adult();
    let t = &ds.table;
    let mut counts: HashMap<Vec<&str>, u32> = HashMap::new();
    let mut order: Vec<Vec<&str>> = Vec::new();
    for row in 0..t.rows() {
        let key: Vec<&str> = (t.columns().iter())
            .map(|c| c.dict.value(c.codes.get(row)))
            .collect();
        let n = counts.entry(key.clone()).or_insert(0);
        if *n == 0 {
            order.push(key);
        }
        *n += 1;
    }
    let names: Vec<&str> = t.columns().iter().map(|c| c.name.as_str()).collect();
    let mut header = names.clone();
    header.push("n");
    let (mut grouped, mut expanded, mut per_row) = (Vec::new(), Vec::new(), Vec::new());
    for key in &order {
        let values: Vec<String> = key.iter().map(|v| v.to_string()).collect();
        let c = counts[key];
        per_row.push(c);
        expanded.extend(std::iter::repeat_n(values.clone(), c as usize));
        let mut row = values;
        row.push(c.to_string());
        grouped.push(row);
    }
    let grouped = Table::from_rows(&header, &grouped).unwrap();
    let expanded = Table::from_rows(&names, &expanded).unwrap();
    (ds, grouped, expanded, per_row)
}

/// The output's records, every row repeated as often as its count column says (that column
/// left out), sorted.
fn records(csv: &str, count: Option<&str>) -> Vec<Vec<String>> {
    let out = Output::parse(csv, b';');
    let c = count.map(|name| out.col(name));
    let mut records = Vec::new();
    for row in &out.rows {
        let times = c.map_or(1, |c| row[c].parse::<usize>().unwrap());
        let values: Vec<String> = (row.iter().enumerate())
            .filter(|(i, _)| Some(*i) != c)
            .map(|(_, v)| v.clone())
            .collect();
        records.extend(std::iter::repeat_n(values, times));
    }
    records.sort();
    records
}

#[test]
fn a_frequency_table_samples_as_its_expansion() {
    // The records of a row are drawn one after another: the frequency table releases of every
    // row exactly the records its expansion (rows next to each other) draws with the same seed,
    // and SafePub's output is the expansion's, record for record.
    let (ds, grouped, expanded, per_row) = adult_grouped();
    let model = dp(1.0, 1e-6, 21);
    let f = Problem::new(grouped, config(&ds, model.clone(), true)).unwrap();
    let e = Problem::new(expanded, config(&ds, model, false)).unwrap();
    assert_eq!(f.dp().unwrap().params, e.dp().unwrap().params);
    assert_eq!(f.dp().unwrap().sampled, e.dp().unwrap().sampled);
    let mut first = 0usize;
    for (row, &c) in per_row.iter().enumerate() {
        let drawn = (first..first + c as usize)
            .filter(|&r| e.is_released(r))
            .count();
        assert_eq!(f.released_records(row) as usize, drawn, "row {row}");
        first += c as usize;
    }
    let (fl, fcsv) = run(&f);
    let (el, ecsv) = run(&e);
    assert_eq!(fl, el);
    assert_eq!(records(&fcsv, Some("n")), records(&ecsv, None));
    // The frequency table's output is k-anonymous on its released records.
    let k = f.dp().unwrap().params.k as usize;
    let mut classes: HashMap<Vec<String>, usize> = HashMap::new();
    for r in records(&fcsv, Some("n")) {
        *classes.entry(r).or_default() += 1;
    }
    assert!(classes.values().all(|&size| size >= k));
}

#[test]
fn exponential_mechanism_matches_its_definition() {
    // Chi-square goodness of fit of 20,000 draws over 5 candidates (4 degrees of freedom; the
    // 0.999 quantile is 18.47).
    let scores = [0.0, -1.0, -2.5, -0.3, -4.0];
    let eps = 1.2;
    let p = selection_probabilities(&scores, eps);
    let total: f64 = scores.iter().map(|s| (eps * s / 2.0).exp()).sum();
    for (q, s) in p.iter().zip(scores) {
        assert!((q - (eps * s / 2.0).exp() / total).abs() < 1e-12);
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(42);
    let draws = 20_000;
    let mut counts = [0usize; 5];
    for _ in 0..draws {
        counts[select(&scores, eps, &mut rng)] += 1;
    }
    let chi2: f64 = counts
        .iter()
        .zip(&p)
        .map(|(&o, &q)| {
            let e = q * draws as f64;
            (o as f64 - e).powi(2) / e
        })
        .sum();
    assert!(chi2 < 18.47, "χ² = {chi2}, counts {counts:?}, p {p:?}");
}

/// One quasi-identifier `a` of three values, 400 records each, generalized to `*` at level 1:
/// the lattice is the top [1] and the bottom [0].
fn three_classes(model: DpModel) -> Problem {
    let rows: Vec<Vec<String>> = (0..1200).map(|i| vec![format!("a{}", i % 3)]).collect();
    let table = Table::from_rows(&["a"], &rows).unwrap();
    let hierarchy = (0..3).map(|v| vec![format!("a{v}"), "*".into()]).collect();
    let config = ProblemConfig {
        quasi_identifiers: vec![deid_engine::QuasiIdentifier::new(
            "a",
            deid_engine::Hierarchy::from_rows(hierarchy, "a").unwrap(),
        )],
        privacy: vec![PrivacyModel::DifferentialPrivacy(model)],
        quality: deid_engine::QualityConfig {
            model: deid_engine::QualityModel::Aecs,
            ..Default::default()
        },
        ..Default::default()
    };
    Problem::new(table, config).unwrap()
}

#[test]
fn the_result_is_chosen_among_the_pivots_by_the_exponential_mechanism() {
    // One step visits the top and the bottom (the top's only specialization). ε = 2 split
    // evenly: ε_anon = 1 gives k < 100 while every value has about 250 sampled records, so
    // nothing sampled is suppressed and the AECS scores (sensitivity 1) differ by 2 whatever the
    // sample: 1 class at the top, 3 at the bottom (+ 1 each for the unsampled records). The
    // bottom is the better pivot; the result must still be the top with the probability the
    // final exponential mechanism (¾ ε_search) gives it (the best pivot by exact score is
    // never the top).
    let draws = 4000u64;
    let mut tops = 0u64;
    for seed in 0..draws {
        let mut m = dp(2.0, 1e-6, seed);
        m.search_share = 0.5;
        m.steps = 1;
        let problem = three_classes(m);
        let setup = problem.dp().unwrap();
        assert!(setup.params.k <= 100, "k = {}", setup.params.k);
        let (levels, csv) = run(&problem);
        // The classes of the output, counted from the CSV: 1 (top) or 3 (bottom).
        let out = Output::parse(&csv, b';');
        let mut classes: HashMap<&Vec<String>, usize> = HashMap::new();
        for r in &out.rows {
            *classes.entry(r).or_default() += 1;
        }
        assert_eq!(out.rows.len(), setup.sampled, "seed {seed}");
        match (levels.as_slice(), classes.len()) {
            ([1], 1) => tops += 1,
            ([0], 3) => {}
            other => panic!("seed {seed}: {other:?}"),
        }
    }
    let epsilon_search = 2.0 * 0.5;
    let p = selection_probabilities(&[1.0, 3.0], 0.75 * epsilon_search)[0];
    assert!((p - 1.0 / (1.0 + 0.75f64.exp())).abs() < 1e-12);
    // Chi-square goodness of fit with 1 degree of freedom (the 0.999 quantile is 10.83).
    let (o, e) = (tops as f64, p * draws as f64);
    let chi2 = (o - e).powi(2) / e + (o - e).powi(2) / (draws as f64 - e);
    assert!(chi2 < 10.83, "χ² = {chi2}: {tops} tops of {draws}, p = {p}");
}

/// A random table of records: each has a class key and an original value per QI; every class
/// has a fixed generalized value, loss and precision per QI; records are sampled or not.
#[derive(Debug, Clone)]
struct Records {
    /// (class key, original values, sampled) per record.
    records: Vec<(u8, [u8; 3], bool)>,
    /// Per class key: per QI the generalized value, the share and the precision.
    classes: Vec<[(u8, f64, f64); 3]>,
}

fn classes_of(r: &Records, k: u64) -> (Vec<ClassScore>, u64) {
    let mut counts: HashMap<u8, u64> = HashMap::new();
    let mut unsampled = 0;
    for &(key, _, sampled) in &r.records {
        if sampled {
            *counts.entry(key).or_default() += 1;
        } else {
            unsampled += 1;
        }
    }
    let classes = counts
        .into_iter()
        .map(|(key, count)| {
            let c = &r.classes[key as usize];
            ClassScore {
                count,
                kept: count >= k,
                loss: c.iter().map(|q| q.1).sum(),
                precision: c.iter().map(|q| q.2).sum(),
            }
        })
        .collect();
    (classes, unsampled)
}

/// The entropy score from its definition: per QI the (original, generalized or suppressed)
/// value of every sampled record.
fn entropy_of(r: &Records, k: u64) -> f64 {
    let mut sizes: HashMap<u8, u64> = HashMap::new();
    for &(key, _, sampled) in &r.records {
        if sampled {
            *sizes.entry(key).or_default() += 1;
        }
    }
    (0..3)
        .map(|i| {
            entropy_score(r.records.iter().filter(|x| x.2).map(|&(key, x, _)| {
                let kept = sizes[&key] >= k;
                (
                    u32::from(x[i]),
                    kept.then(|| u32::from(r.classes[key as usize][i].0)),
                    1,
                )
            }))
        })
        .sum()
}

fn records_strategy() -> impl Strategy<Value = Records> {
    let class = prop::array::uniform3((0u8..3, 0.0f64..=1.0, 0.0f64..=1.0));
    (
        prop::collection::vec(
            (0u8..6, prop::array::uniform3(0u8..4), any::<bool>()),
            0..60,
        ),
        prop::collection::vec(class, 6),
    )
        .prop_map(|(records, classes)| Records { records, classes })
}

proptest! {
    #[test]
    fn scores_change_by_at_most_their_sensitivity(
        r in records_strategy(),
        extra in (0u8..6, prop::array::uniform3(0u8..4), any::<bool>()),
        k in 1u32..8,
    ) {
        let d = 3;
        let mut bigger = r.clone();
        bigger.records.push(extra);
        let n = bigger.records.len() as u64;
        let (a, ua) = classes_of(&r, k as u64);
        let (b, ub) = classes_of(&bigger, k as u64);
        for f in [
            ScoreFunction::Loss,
            ScoreFunction::Precision,
            ScoreFunction::Discernibility,
            ScoreFunction::Aecs,
            ScoreFunction::Entropy,
        ] {
            let delta = match f {
                ScoreFunction::Entropy => {
                    (entropy_of(&bigger, k as u64) - entropy_of(&r, k as u64)).abs()
                }
                _ => (f.score(&b, ub, n, d) - f.score(&a, ua, n, d)).abs(),
            };
            let s = f.sensitivity(n, d, k);
            prop_assert!(delta <= s * (1.0 + 1e-12), "{f:?}: Δ = {delta} > {s} (k = {k})");
        }
    }
}

/// The utility of SafePub's output on adult as ARX's granularity measures it: per
/// quasi-identifier the mean over the input's records of the output value's domain share
/// (unsampled and suppressed records count 1), normalized between 1/domain size and 1; 1 − the
/// arithmetic mean over the quasi-identifiers (`docs/definitions.md` §4.7).
fn adult_utility(problem: &Problem) -> f64 {
    let (levels, _) = run(problem);
    granularity(problem, &levels)
}

fn granularity(problem: &Problem, levels: &[u8]) -> f64 {
    let e = deid_engine::Checker::new(problem).evaluate(levels);
    let d = levels.len();
    let n = problem.dp().unwrap().rows as f64;
    let mut loss = vec![0.0; d];
    let mut kept = 0.0;
    for c in (0..e.groups.len()).filter(|&c| !e.suppressed[c]) {
        let count = f64::from(e.groups.counts[c]);
        kept += count;
        let codes = &e.groups.codes[c * d..(c + 1) * d];
        for (i, (&code, &l)) in codes.iter().zip(levels).enumerate() {
            loss[i] += count * problem.hierarchies()[i].share(l as usize, code);
        }
    }
    let normalized: f64 = (0..d)
        .map(|i| {
            let min = 1.0 / problem.hierarchies()[i].domain_size as f64;
            ((loss[i] + n - kept) / n - min) / (1.0 - min)
        })
        .sum();
    1.0 - normalized / d as f64
}

/// `DEID_DP_STEPS=… cargo test --release -p deid-engine --test engine dp::utility -- --ignored
/// --nocapture`: the median utility over seeds 1–7 at ε = 0.5, 1, 2 (docs/benchmarks.md).
#[test]
#[ignore]
fn utility_on_adult() {
    let steps: u32 = std::env::var("DEID_DP_STEPS")
        .map_or(deid_engine::privacy::dp::DEFAULT_STEPS, |s| {
            s.parse().unwrap()
        });
    for eps in [0.5, 1.0, 2.0] {
        let started = std::time::Instant::now();
        let mut u: Vec<f64> = (1..=7u64)
            .map(|seed| {
                let mut m = dp(eps, 1e-6, seed);
                m.steps = steps;
                adult_utility(&adult_dp(m).unwrap())
            })
            .collect();
        u.sort_by(f64::total_cmp);
        println!(
            "ε = {eps}, steps {steps}: median {:.3} (range {:.3}–{:.3}), {:.2} s per run",
            u[3],
            u[0],
            u[6],
            started.elapsed().as_secs_f64() / 7.0
        );
    }
}

/// The best utility of any transformation of the sample (seed 1), for comparison.
#[test]
#[ignore]
fn utility_optimum_on_adult() {
    for eps in [0.5, 1.0, 2.0] {
        let problem = adult_dp(dp(eps, 1e-6, 1)).unwrap();
        let top = problem.lattice().top();
        let bottom = problem.lattice().bottom();
        let mut levels = bottom.clone();
        let (mut best, mut count) = (f64::MIN, 0);
        let d = levels.len();
        loop {
            let u = granularity(&problem, &levels);
            if u > best {
                best = u;
            }
            count += 1;
            let mut i = 0;
            while i < d && levels[i] == top[i] {
                levels[i] = bottom[i];
                i += 1;
            }
            if i == d {
                break;
            }
            levels[i] += 1;
        }
        println!("ε = {eps}: optimum {best:.3} over {count}");
    }
}

#[test]
fn no_plan_expresses_the_sample() {
    // Applying a plan to the input would release every record, not the sample: refused, for a
    // frequency table (its sample is released counts) and for plain records alike.
    let (ds, grouped, expanded, _) = adult_grouped();
    let model = dp(1.0, 1e-6, 5);
    for (table, grouped) in [(grouped, true), (expanded, false)] {
        let problem = Problem::new(table, config(&ds, model.clone(), grouped)).unwrap();
        let (levels, _) = run(&problem);
        let eval = deid_engine::Checker::new(&problem).evaluate(&levels);
        let err = deid_engine::plan::Plan::of(&problem, &eval, &Default::default(), b';')
            .expect_err("no plan of a differentially private output");
        assert!(err.to_string().contains("differential privacy"), "{err}");
    }
}
