//! Tests of the quality models: hand-computed values on a tiny table, properties on random
//! tables and hierarchies, determinism under the check's reuse of earlier results, and Loss on
//! the adult data set against an independent computation from the raw strings.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::check::{CheckResult, Checker, evaluate_all};
use crate::config::{ProblemConfig, QuasiIdentifier};
use crate::data::{CsvOptions, Table};
use crate::hierarchy::Hierarchy;
use crate::lattice::Lattice;
use crate::privacy::PrivacyModel;
use crate::problem::Problem;

fn strings(rows: &[&[&str]]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| r.iter().map(|s| s.to_string()).collect())
        .collect()
}

/// The tiny table used by the hand computations:
///
/// | age | sex |      age hierarchy: 1,2 → 1-2; 3,4 → 3-4; 5,6 → 5-6 (not in the data); → *
/// |-----|-----|      sex hierarchy: m, f → *
/// | 1   | m   | ×2
/// | 2   | m   |
/// | 3   | f   | ×2
/// | 4   | m   |
///
/// Domain sizes 6 and 2. With k = 2: at (0,0) the classes (2,m) and (4,m) are suppressed (s = 2),
/// at (1,0) the classes are (1-2,m)×3, (3-4,f)×2 and (3-4,m)×1 (suppressed, s = 1), at (0,1)
/// (2,*) and (4,*) are suppressed (s = 2).
fn tiny(model: QualityModel, gs_factor: f64, k: u32, weights: [f64; 2]) -> Problem {
    tiny_with(model, gs_factor, k, weights, None)
}

fn tiny_with(
    model: QualityModel,
    gs_factor: f64,
    k: u32,
    weights: [f64; 2],
    aggregate: Option<Aggregate>,
) -> Problem {
    let table = Table::from_rows(
        &["age", "sex"],
        &strings(&[
            &["1", "m"],
            &["1", "m"],
            &["2", "m"],
            &["3", "f"],
            &["3", "f"],
            &["4", "m"],
        ]),
    )
    .unwrap();
    let age = Hierarchy::from_rows(
        strings(&[
            &["1", "1-2", "*"],
            &["2", "1-2", "*"],
            &["3", "3-4", "*"],
            &["4", "3-4", "*"],
            &["5", "5-6", "*"],
            &["6", "5-6", "*"],
        ]),
        "age",
    )
    .unwrap();
    let sex = Hierarchy::from_rows(strings(&[&["m", "*"], &["f", "*"]]), "sex").unwrap();
    let mut qa = QuasiIdentifier::new("age", age);
    qa.weight = weights[0];
    let mut qs = QuasiIdentifier::new("sex", sex);
    qs.weight = weights[1];
    let config = ProblemConfig {
        quasi_identifiers: vec![qa, qs],
        privacy: vec![PrivacyModel::KAnonymity { k }],
        suppression_limit: 0.5,
        quality: QualityConfig {
            model,
            gs_factor,
            aggregate,
        },
        ..Default::default()
    };
    Problem::new(table, config).unwrap()
}

fn quality_of(p: &Problem, levels: &[u8]) -> Quality {
    Checker::new(p).evaluate(levels).quality
}

fn eval(model: QualityModel, gs: f64, levels: &[u8]) -> Quality {
    quality_of(&tiny(model, gs, 2, [0.5, 0.5]), levels)
}

#[track_caller]
fn close(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() <= 1e-9 * expected.abs().max(1.0),
        "expected {expected}, got {actual}"
    );
}

fn geo(values: &[f64]) -> f64 {
    values
        .iter()
        .map(|v| v + 1.0)
        .product::<f64>()
        .powf(1.0 / values.len() as f64)
        - 1.0
}

#[test]
fn names_round_trip() {
    for m in QualityModel::ALL {
        assert_eq!(QualityModel::parse(m.name()), Some(m));
    }
    assert_eq!(QualityModel::parse("rank"), None);
}

#[test]
fn loss_by_hand() {
    // (1,0), gs 0.5: age raw = 3·(2/6) + 2·(2/6) + 1 (suppressed) = 8/3, min n/D = 1 ⇒ 1/3;
    // sex raw = 3·½ + 2·½ + 1 = 3.5, min 3 ⇒ 1/6. Bound: age 6·(2/6) = 2 ⇒ 1/5, sex 0.
    let q = eval(QualityModel::Loss, 0.5, &[1, 0]);
    let per = [truncate10(1.0 / 3.0), truncate10(1.0 / 6.0)];
    assert_eq!(q.per_attribute, per.to_vec());
    close(q.score, geo(&per));
    close(q.lower_bound, geo(&[0.2, 0.0]));
    close(
        q.utility,
        1.0 - geo(&[1.0 / 3.0, 1.0 / 6.0]) / geo(&[1.0, 1.0]),
    );

    // gs 0.25 (sF = ½, gF = 1): the suppressed record costs share + ½(1 − share):
    // age 5/3 + (1/3 + 1/3) = 7/3 ⇒ 4/15; sex 2.5 + (½ + ¼) = 3.25 ⇒ 1/12.
    let q = eval(QualityModel::Loss, 0.25, &[1, 0]);
    let per = [truncate10(4.0 / 15.0), truncate10(1.0 / 12.0)];
    assert_eq!(q.per_attribute, per.to_vec());
    close(q.score, geo(&per));
    close(q.lower_bound, geo(&[0.2, 0.0]));

    // gs 0.75 (sF = 1, gF = ½): age (5/3)·½ + 1 = 11/6, min ½ ⇒ (8/6)/5.5 = 8/33;
    // sex 2.5·½ + 1 = 2.25, min 1.5 ⇒ 0.75/4.5 = 1/6. Bound age (2·½ − ½)/5.5 = 1/11.
    let q = eval(QualityModel::Loss, 0.75, &[1, 0]);
    let per = [truncate10(8.0 / 33.0), truncate10(1.0 / 6.0)];
    assert_eq!(q.per_attribute, per.to_vec());
    close(q.score, geo(&per));
    close(q.lower_bound, geo(&[truncate10(1.0 / 11.0), 0.0]));
    // Utility ignores the gs-factor.
    close(
        q.utility,
        1.0 - geo(&[1.0 / 3.0, 1.0 / 6.0]) / geo(&[1.0, 1.0]),
    );

    // Weights 1 : 0.5 and the Sum aggregate.
    let mut p = tiny(QualityModel::Loss, 0.5, 2, [1.0, 0.5]);
    let q = quality_of(&p, &[1, 0]);
    close(q.score, {
        let per = [truncate10(1.0 / 3.0), truncate10(1.0 / 6.0) * 0.5];
        geo(&per)
    });
    p = tiny_with(QualityModel::Loss, 0.5, 2, [1.0, 0.5], Some(Aggregate::Sum));
    let q = quality_of(&p, &[1, 0]);
    close(q.score, truncate10(1.0 / 3.0) + 0.5 * truncate10(1.0 / 6.0));
    close(q.utility, 1.0 - (1.0 / 3.0 + 0.5 / 6.0) / 1.5);
}

#[test]
fn aecs_by_hand() {
    // (1,0): 2 kept classes + one class of suppressed records.
    let q = eval(QualityModel::Aecs, 0.5, &[1, 0]);
    close(q.score, 6.0 / 3.0);
    close(q.lower_bound, 6.0 / 3.0);
    // Between n/#base = 1.5 and n = 6.
    close(q.utility, 1.0 - (2.0 - 1.5) / (6.0 - 1.5));
    // gs 0.25: n / (2·sF + gF) = 6 / (1 + 1); gs 0.75: 6 / (2 + ½).
    close(eval(QualityModel::Aecs, 0.25, &[1, 0]).score, 3.0);
    close(eval(QualityModel::Aecs, 0.75, &[1, 0]).score, 2.4);
    // (0,0), gs 0.25: 6 / (2·½ + 1) = 3; bound n / #classes = 1.5 (ARX's 6/(4·½) = 3).
    let q = eval(QualityModel::Aecs, 0.25, &[0, 0]);
    close(q.score, 3.0);
    close(q.lower_bound, 1.5);
    // gs 0: ARX divides by zero when nothing is suppressed; we report n.
    close(eval(QualityModel::Aecs, 0.0, &[2, 1]).score, 6.0);
}

#[test]
fn discernibility_by_hand() {
    // (1,0): 3² + 2² + 6·1 = 19; DM* = 9 + 4 + 1 = 14; Σ base k² = 10, max 36.
    let q = eval(QualityModel::Discernibility, 0.5, &[1, 0]);
    close(q.score, 19.0);
    close(q.lower_bound, 14.0);
    close(q.utility, 1.0 - 9.0 / 26.0);
    let q = eval(QualityModel::DiscernibilityStar, 0.5, &[1, 0]);
    close(q.score, 14.0);
    close(q.lower_bound, 14.0);
    close(q.utility, 1.0 - 9.0 / 26.0);
    // (0,0): 4 + 4 + 6·2 = 20; DM* = 10 — suppression does not count, utility still does.
    let q = eval(QualityModel::DiscernibilityStar, 0.5, &[0, 0]);
    close(q.score, 10.0);
    close(q.utility, 1.0 - 10.0 / 26.0);
    // No gs-factor.
    assert_eq!(
        eval(QualityModel::Discernibility, 0.1, &[1, 0]),
        eval(QualityModel::Discernibility, 0.5, &[1, 0])
    );
}

#[test]
fn precision_and_height_by_hand() {
    // (1,0): r = (½, 0), s = 1: P = ((5·½ + 1)/6, 1/6) = (7/12, 1/6), mean 3/8.
    let q = eval(QualityModel::Precision, 0.5, &[1, 0]);
    assert_eq!(q.per_attribute.len(), 2);
    close(q.per_attribute[0], 7.0 / 12.0);
    close(q.per_attribute[1], 1.0 / 6.0);
    close(q.score, 3.0 / 8.0);
    close(q.lower_bound, 0.25);
    close(q.utility, 5.0 / 8.0);
    // gs 0.25 (sF ½): ((5·½ + ½)/6, ½/6) ⇒ mean 7/24; bound (min(½, ½), 0).
    let q = eval(QualityModel::Precision, 0.25, &[1, 0]);
    close(q.score, 7.0 / 24.0);
    close(q.lower_bound, 0.25);
    close(q.utility, 5.0 / 8.0);
    // gs 0.75 (gF ½): ((5·¼ + 1)/6, 1/6) ⇒ mean (0.375 + 1/6)/2; bound (¼, 0)/2.
    let q = eval(QualityModel::Precision, 0.75, &[1, 0]);
    close(q.score, (0.375 + 1.0 / 6.0) / 2.0);
    close(q.lower_bound, 0.125);
    // gs 0.1 (sF 0.2), k = 3 at (2,0): (*,f)×2 is suppressed. P_age = (4·1 + 2·0.2)/6 < 1, so
    // ARX's bound r·gF = 1 would exceed the score; ours is min(1, 0.2).
    let p = tiny(QualityModel::Precision, 0.1, 3, [0.5, 0.5]);
    let q = quality_of(&p, &[2, 0]);
    close(q.per_attribute[0], 4.4 / 6.0);
    close(q.per_attribute[1], 0.4 / 6.0);
    close(q.lower_bound, 0.1);
    assert!(q.lower_bound <= q.score);

    let q = eval(QualityModel::Height, 0.5, &[1, 0]);
    assert_eq!(q.per_attribute, vec![1.0, 0.0]);
    close(q.score, 1.0);
    close(q.lower_bound, 1.0);
    close(q.utility, 5.0 / 8.0);
    close(eval(QualityModel::Height, 0.5, &[2, 1]).score, 3.0);
}

#[test]
fn entropy_by_hand() {
    // (0,1): suppressed (2,*) and (4,*): age values {2, 4} ⇒ S_age = 2·1·log2(2/1) = 2, G_age = 0;
    // sex at level 1: G = 4·log2(6/4) + 2·log2(6/2), S_sex = 2·log2(2/2) = 0.
    let g_sex = 4.0 * 1.5f64.log2() + 2.0 * 3.0f64.log2();
    let m_age = 4.0 * 3.0f64.log2() + 2.0 * 6.0f64.log2();
    let q = eval(QualityModel::Entropy, 0.5, &[0, 1]);
    close(q.per_attribute[0], 2.0);
    close(q.per_attribute[1], g_sex);
    close(q.score, 2.0 + g_sex);
    close(q.lower_bound, g_sex);
    close(q.utility, 1.0 - (2.0 / m_age + 1.0) / 2.0);
    // gs 0.25 (sF ½) and 0.75 (gF ½).
    let q = eval(QualityModel::Entropy, 0.25, &[0, 1]);
    close(q.score, 1.0 + g_sex);
    close(q.lower_bound, g_sex);
    let q = eval(QualityModel::Entropy, 0.75, &[0, 1]);
    close(q.score, 2.0 + 0.5 * g_sex);
    close(q.lower_bound, 0.5 * g_sex);
    // (1,0): G_age = 2·log2(3/2) + log2 3 + 2·log2(3/2) + log2 3; the suppressed (3-4,m) alone
    // has no entropy.
    let q = eval(QualityModel::Entropy, 0.5, &[1, 0]);
    close(q.score, 4.0 * 1.5f64.log2() + 2.0 * 3.0f64.log2());

    // Normalised: E_i / M_i, M_sex = G_sex at the top; ignores the gs-factor.
    let q = eval(QualityModel::NormalizedEntropy, 0.5, &[0, 1]);
    close(q.per_attribute[0], 2.0 / truncate10(m_age));
    close(q.per_attribute[1], 1.0);
    close(q.score, 2.0 / m_age + 1.0);
    close(q.lower_bound, 1.0);
    close(q.utility, 1.0 - (2.0 / m_age + 1.0) / 2.0);
    assert_eq!(
        q,
        eval(QualityModel::NormalizedEntropy, 0.25, &[0, 1]),
        "normalised entropy ignores the gs-factor"
    );
}

#[test]
fn kl_divergence_by_hand() {
    // (1,0): q = (3/6)/2 for (1,m) and (2,m), (2/6)/2 for (3,f), (1/6)/12 for the suppressed (4,m).
    let expected = (1.0 / 3.0) * (4.0f64 / 3.0).log2()
        + (1.0 / 6.0) * (2.0f64 / 3.0).log2()
        + (1.0 / 3.0) * 1.0
        + (1.0 / 6.0) * 12.0f64.log2();
    // Bound: the age marginal against "uniform within 1-2 / 3-4".
    let bound = 2.0 * ((2.0 / 6.0) * (4.0f64 / 3.0).log2() + (1.0 / 6.0) * (2.0f64 / 3.0).log2());
    // Maximum: Σ p·log2(p·12) = 2·(1/3)·2 + 2·(1/6)·1 = 5/3.
    let q = eval(QualityModel::KlDivergence, 0.5, &[1, 0]);
    close(q.score, expected);
    assert!((q.lower_bound - bound).abs() < 1e-8 && q.lower_bound < bound);
    close(q.utility, 1.0 - expected / (5.0 / 3.0));
    assert!(q.per_attribute.is_empty());
    // Unchanged data: 0; everything generalized: the maximum.
    let bottom = tiny(QualityModel::KlDivergence, 0.5, 1, [0.5, 0.5]);
    close(quality_of(&bottom, &[0, 0]).score, 0.0);
    close(quality_of(&bottom, &[0, 0]).utility, 1.0);
    close(quality_of(&bottom, &[2, 1]).score, 5.0 / 3.0);
    close(quality_of(&bottom, &[2, 1]).utility, 0.0);
}

#[test]
fn ambiguity_by_hand() {
    // (1,0): kept 3·(2·1) + 2·(2·1), suppressed 1·(6·2) = 22; bound 3·2 + 2·2 + 1·2 = 12;
    // range 6 .. 6·12.
    let q = eval(QualityModel::Ambiguity, 0.5, &[1, 0]);
    close(q.score, 22.0);
    close(q.lower_bound, 12.0);
    close(q.utility, 1.0 - 16.0 / 66.0);
    let p = tiny(QualityModel::Ambiguity, 0.5, 2, [0.5, 0.5]);
    assert!(p.prepared_quality().lower_bound(&[1, 0]) <= 12.0);
    // AM–GM at (1,0): every record has area 2 ⇒ 6·2.
    assert!((p.prepared_quality().lower_bound(&[1, 0]) - 12.0).abs() < 1e-6);
}

#[test]
fn analytic_shares_change_loss_but_not_domain_counts() {
    // Interval-like shares: 1-2 covers 40 % of the domain, 3-4 covers 10 %.
    let age = Hierarchy::with_shares(
        strings(&[
            &["1", "1-2", "*"],
            &["2", "1-2", "*"],
            &["3", "3-4", "*"],
            &["4", "3-4", "*"],
        ]),
        vec![
            vec![0.25, 0.4, 1.0],
            vec![0.25, 0.4, 1.0],
            vec![0.25, 0.1, 1.0],
            vec![0.25, 0.1, 1.0],
        ],
        "age",
    )
    .unwrap();
    let table = Table::from_rows(&["age"], &strings(&[&["1"], &["2"], &["3"], &["4"]])).unwrap();
    let make = |model| {
        let config = ProblemConfig {
            quasi_identifiers: vec![QuasiIdentifier::new("age", age.clone())],
            privacy: vec![PrivacyModel::KAnonymity { k: 1 }],
            quality: QualityConfig {
                model,
                ..Default::default()
            },
            ..Default::default()
        };
        Problem::new(table.clone(), config).unwrap()
    };
    // Loss: (2·0.4 + 2·0.1 − 1) / (4 − 1) = 0.
    close(quality_of(&make(QualityModel::Loss), &[1]).score, 0.0);
    // Ambiguity counts hierarchy leaves: 4·2.
    close(quality_of(&make(QualityModel::Ambiguity), &[1]).score, 8.0);
}

#[test]
fn loss_counts_duplicated_hierarchy_rows() {
    // ARX's domain share is (rows of the hierarchy table under a value) / (rows of the table),
    // so a row listed twice counts twice. Table: 1, 2, 3, 4 (n = 4); the hierarchy lists '4'
    // twice, N = 5 rows. Loss per QI = (Σ_rows share − n/N) / (n − n/N), n/N = 0.8.
    let age = Hierarchy::from_rows(
        strings(&[
            &["1", "1-2", "*"],
            &["2", "1-2", "*"],
            &["3", "3-4", "*"],
            &["4", "3-4", "*"],
            &["4", "3-4", "*"],
        ]),
        "age",
    )
    .unwrap();
    let table = Table::from_rows(&["age"], &strings(&[&["1"], &["2"], &["3"], &["4"]])).unwrap();
    let config = ProblemConfig {
        quasi_identifiers: vec![QuasiIdentifier::new("age", age)],
        privacy: vec![PrivacyModel::KAnonymity { k: 1 }],
        ..Default::default()
    };
    let p = Problem::new(table, config).unwrap();
    // Level 1: 1-2 has 2 of 5 rows, 3-4 has 3 of 5: Σ = 2·0.4 + 2·0.6 = 2.0 → 1.2 / 3.2 = 0.375
    // (counting distinct values instead: (2·0.5 + 2·0.5 − 1) / 3 = 1/3).
    close(quality_of(&p, &[1]).score, 0.375);
    // Level 0: '4' has 2 of 5 rows, the others 1: Σ = 3·0.2 + 0.4 = 1.0 → 0.2 / 3.2 = 0.0625.
    close(quality_of(&p, &[0]).score, 0.0625);
    close(quality_of(&p, &[2]).score, 1.0);
}

#[test]
fn evaluate_all_matches_each_configured_model() {
    for gs in [0.25, 0.5, 0.8] {
        let p = tiny(QualityModel::Loss, gs, 2, [1.0, 0.25]);
        let evaluation = Checker::new(&p).evaluate(&[1, 0]);
        let all = evaluate_all(&p, &evaluation);
        assert_eq!(
            all.iter().map(|(m, _)| *m).collect::<Vec<_>>(),
            QualityModel::ALL.to_vec()
        );
        for (model, quality) in all {
            let single = quality_of(&tiny(model, gs, 2, [1.0, 0.25]), &[1, 0]);
            assert_eq!(quality, single, "{}", model.name());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Properties on random tables.

/// A random problem: the seed drives the data and hierarchies, the rest the configuration.
#[derive(Debug, Clone)]
struct Spec {
    seed: u64,
    rows: usize,
    qis: usize,
    k: u32,
    limit: f64,
    gs_factor: f64,
    aggregate: Option<Aggregate>,
    weights: Vec<f64>,
}

fn arb_spec() -> impl Strategy<Value = Spec> {
    (
        any::<u64>(),
        1usize..24,
        1usize..=3,
        1u32..=4,
        0u32..=4,
        prop_oneof![
            Just(0.0),
            Just(0.25),
            Just(0.5),
            Just(0.75),
            Just(1.0),
            0.0f64..=1.0
        ],
        0usize..5,
        prop::collection::vec(0u32..=4, 3),
    )
        .prop_map(
            |(seed, rows, qis, k, limit, gs_factor, agg, weights)| Spec {
                seed,
                rows,
                qis,
                k,
                limit: limit as f64 / 4.0,
                gs_factor,
                aggregate: [
                    None,
                    Some(Aggregate::Sum),
                    Some(Aggregate::Maximum),
                    Some(Aggregate::ArithmeticMean),
                    Some(Aggregate::GeometricMean),
                ][agg],
                weights: weights.iter().map(|&w| w as f64 / 4.0).collect(),
            },
        )
}

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        crate::hash::splitmix64(&mut self.0) % n
    }
}

/// Builds the random problem of `spec` for `model`: 2–5 leaves per attribute (some unused by the
/// data), 2–4 levels with random monotone groupings and a final `*`.
fn build(spec: &Spec, model: QualityModel) -> Problem {
    let mut rng = Rng(spec.seed);
    let mut qis = Vec::new();
    let mut leaves = Vec::new();
    for j in 0..spec.qis {
        let m = 2 + rng.below(4) as usize;
        let height = 2 + rng.below(3) as usize;
        let mut group: Vec<usize> = (0..m).collect();
        let mut groups = m;
        let mut rows: Vec<Vec<String>> = (0..m).map(|x| vec![format!("v{x}")]).collect();
        for level in 1..height {
            if level == height - 1 {
                rows.iter_mut().for_each(|r| r.push("*".into()));
                break;
            }
            let next = 1 + rng.below(groups as u64) as usize;
            let parent: Vec<usize> = (0..groups)
                .map(|_| rng.below(next as u64) as usize)
                .collect();
            for (x, row) in rows.iter_mut().enumerate() {
                group[x] = parent[group[x]];
                row.push(format!("L{level}g{}", group[x]));
            }
            groups = next;
        }
        let name = format!("q{j}");
        let mut qi = QuasiIdentifier::new(&name, Hierarchy::from_rows(rows, &name).unwrap());
        qi.weight = spec.weights[j];
        qis.push(qi);
        leaves.push(m as u64);
    }
    let data: Vec<Vec<String>> = (0..spec.rows)
        .map(|_| {
            leaves
                .iter()
                .map(|&m| format!("v{}", rng.below(m)))
                .collect()
        })
        .collect();
    let header: Vec<String> = (0..spec.qis).map(|j| format!("q{j}")).collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let table = Table::from_rows(&header, &data).unwrap();
    let config = ProblemConfig {
        quasi_identifiers: qis,
        privacy: vec![PrivacyModel::KAnonymity {
            k: spec.k.min(spec.rows as u32),
        }],
        suppression_limit: spec.limit,
        quality: QualityConfig {
            model,
            gs_factor: spec.gs_factor,
            aggregate: spec.aggregate,
        },
        ..Default::default()
    };
    Problem::new(table, config).unwrap()
}

fn nodes(lattice: &Lattice) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    lattice.for_each(|t| out.push(t.to_vec()));
    out
}

fn bits(r: &CheckResult) -> (u64, u64, u64) {
    (
        r.score.to_bits(),
        r.lower_bound.to_bits(),
        r.utility.to_bits(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn bounds_utility_and_determinism(spec in arb_spec()) {
        for model in QualityModel::ALL {
            let p = build(&spec, model);
            let all = nodes(p.lattice());
            let checker = Checker::new(&p);
            let results: Vec<CheckResult> = all.iter().map(|t| checker.check(t)).collect();
            let prepared = p.prepared_quality();
            let independent: Vec<f64> = all.iter().map(|t| prepared.lower_bound(t)).collect();
            let name = model.name();
            for (i, r) in results.iter().enumerate() {
                prop_assert!(r.lower_bound <= r.score, "{name} {:?}: {} > {}", r.levels, r.lower_bound, r.score);
                prop_assert!(
                    independent[i] <= r.lower_bound + 1e-9 * r.lower_bound.abs().max(1.0),
                    "{name} {:?}: independent {} > {}", r.levels, independent[i], r.lower_bound
                );
                prop_assert!((0.0..=1.0).contains(&r.utility), "{name} {:?}: utility {}", r.levels, r.utility);
                prop_assert!(r.score.is_finite() && r.lower_bound.is_finite());
                if r.levels.iter().all(|&l| l == 0) && r.suppressed == 0 {
                    prop_assert_eq!(r.utility, 1.0, "{} at the unchanged data", name);
                }
            }
            for (a, ra) in all.iter().zip(&results) {
                for (b, rb) in all.iter().zip(&results) {
                    if Lattice::le(a, b) {
                        prop_assert!(ra.lower_bound <= rb.lower_bound, "{name}: bound {a:?} {} > {b:?} {}", ra.lower_bound, rb.lower_bound);
                        if model.monotone_with_suppression() {
                            prop_assert!(ra.score <= rb.score, "{name}: score {a:?} {} > {b:?} {}", ra.score, rb.score);
                        }
                        if model == QualityModel::Loss {
                            // Bounds from above (definitions.md §4.4): only k suppresses here.
                            prop_assert!(p.suppression_shrinks_upwards());
                            for (i, (&ea, &eb)) in ra.excess.iter().zip(&rb.excess).enumerate() {
                                prop_assert!(eb <= ea * (1.0 + 1e-12), "excess {i} {a:?} {ea} < {b:?} {eb}");
                            }
                            let bound = prepared.bound_below(a, &rb.excess);
                            prop_assert!(
                                bound <= ra.score + 1e-9 * ra.score.abs().max(1.0),
                                "{name}: bound from {b:?} {bound} > score of {a:?} {}", ra.score
                            );
                        }
                    }
                }
            }
            for (i, a) in all.iter().enumerate() {
                for (j, b) in all.iter().enumerate() {
                    if Lattice::le(a, b) {
                        prop_assert!(independent[i] <= independent[j], "{name}: independent bound {a:?} > {b:?}");
                    }
                }
            }
            // Everything generalized to `*`: utility 0 unless some column is constant in the data
            // (or, for KL, the data is uniform over the whole domain: nothing to lose).
            let mut varied = (0..spec.qis).all(|j| p.qi_value_counts(j).len() >= 2);
            if model == QualityModel::KlDivergence {
                varied &= kl::kl_max(prepared) > kl::kl_unchanged(prepared);
            }
            let top = results.last().unwrap();
            if varied {
                prop_assert!(top.utility <= 1e-12, "{name}: utility at the top {}", top.utility);
            }
            // Determinism: other previous checks (reverse order, no snapshots, full evaluation)
            // give bit-identical results.
            let reverse = Checker::new(&p);
            let mut again: Vec<CheckResult> = all.iter().rev().map(|t| reverse.check(t)).collect();
            again.reverse();
            let plain = Checker::with_snapshot_budget(&p, 0);
            for (t, (r, r2)) in all.iter().zip(results.iter().zip(&again)) {
                prop_assert_eq!(bits(r), bits(r2), "{} {:?} after other checks", name, t);
                prop_assert_eq!(bits(r), bits(&plain.check(t)), "{} {:?} without snapshots", name, t);
                prop_assert_eq!(bits(r), bits(&checker.evaluate(t).result), "{} {:?} evaluate", name, t);
            }
        }
    }
}

#[test]
fn determinism_on_a_larger_random_table() {
    // Enough rows for snapshots to be taken and reused.
    let spec = Spec {
        seed: 7,
        rows: 400,
        qis: 3,
        k: 3,
        limit: 0.1,
        gs_factor: 0.3,
        aggregate: None,
        weights: vec![0.5, 1.0, 0.25],
    };
    for model in QualityModel::ALL {
        let p = build(&spec, model);
        let all = nodes(p.lattice());
        let a = Checker::new(&p);
        let first: Vec<CheckResult> = all.iter().map(|t| a.check(t)).collect();
        let b = Checker::new(&p);
        // A different history: top-down, then bottom-up again.
        for t in all.iter().rev() {
            b.check(t);
        }
        for (t, r) in all.iter().zip(&first) {
            assert_eq!(bits(r), bits(&b.check(t)), "{} {t:?}", model.name());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Adult.

const ADULT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/adult");

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn adult_problem() -> Problem {
    let table = Table::read_csv(
        read(&format!("{ADULT}/adult.csv")).as_bytes(),
        CsvOptions {
            delimiter: b';',
            has_header: true,
        },
        "adult",
    )
    .unwrap();
    let qis = table
        .columns()
        .iter()
        .map(|c| {
            let text = read(&format!("{ADULT}/adult_hierarchy_{}.csv", c.name));
            let h = Hierarchy::read_csv(text.as_bytes(), b';', &c.name).unwrap();
            QuasiIdentifier::new(&c.name, h)
        })
        .collect();
    let config = ProblemConfig {
        quasi_identifiers: qis,
        privacy: vec![PrivacyModel::KAnonymity { k: 5 }],
        suppression_limit: 0.05,
        ..Default::default()
    };
    Problem::new(table, config).unwrap()
}

/// Loss of `levels` computed from the raw strings: generalize every cell with the hierarchy
/// table, group, suppress classes below k = 5, then Iyengar's normalised loss per attribute
/// (share = leaves under the label / leaves) and the geometric mean. Returns (loss, suppressed).
fn adult_loss_from_strings(levels: &[u8]) -> (f64, usize) {
    let data = read(&format!("{ADULT}/adult.csv"));
    let mut lines = data.lines();
    let header: Vec<&str> = lines.next().unwrap().split(';').collect();
    let rows: Vec<Vec<&str>> = lines
        .filter(|l| !l.is_empty())
        .map(|l| l.split(';').collect())
        .collect();
    let n = rows.len() as f64;
    let mut label_of: Vec<HashMap<String, String>> = Vec::new();
    let mut share_of: Vec<HashMap<String, f64>> = Vec::new();
    let mut domain: Vec<f64> = Vec::new();
    for (j, name) in header.iter().enumerate() {
        let text = read(&format!("{ADULT}/adult_hierarchy_{name}.csv"));
        let table: Vec<Vec<&str>> = text
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| l.split(';').collect())
            .collect();
        let level = levels[j] as usize;
        let mut under: HashMap<String, f64> = HashMap::new();
        let mut labels = HashMap::new();
        for row in &table {
            *under.entry(row[level].to_string()).or_insert(0.0) += 1.0;
            labels.insert(row[0].to_string(), row[level].to_string());
        }
        let d = table.len() as f64;
        share_of.push(under.into_iter().map(|(k, v)| (k, v / d)).collect());
        label_of.push(labels);
        domain.push(d);
    }
    let generalized: Vec<Vec<&str>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .enumerate()
                .map(|(j, v)| label_of[j][*v].as_str())
                .collect()
        })
        .collect();
    let mut sizes: HashMap<&[&str], usize> = HashMap::new();
    for g in &generalized {
        *sizes.entry(g.as_slice()).or_insert(0) += 1;
    }
    let mut suppressed = 0;
    let mut raw = vec![0.0; header.len()];
    for g in &generalized {
        let small = sizes[g.as_slice()] < 5;
        suppressed += small as usize;
        for (j, label) in g.iter().enumerate() {
            raw[j] += if small { 1.0 } else { share_of[j][*label] };
        }
    }
    let per: Vec<f64> = raw
        .iter()
        .zip(&domain)
        .map(|(l, d)| truncate10(((l - n / d) / (n - n / d)).max(0.0)))
        .collect();
    (geo(&per), suppressed)
}

#[test]
fn adult_loss_matches_an_independent_computation() {
    let p = adult_problem();
    let checker = Checker::new(&p);
    let bottom = p.lattice().bottom();
    let top = p.lattice().top();
    let middle = vec![0, 2, 0, 1, 2, 1, 1, 1, 0];
    for levels in [bottom.clone(), middle, top.clone()] {
        let (expected, suppressed) = adult_loss_from_strings(&levels);
        let r = checker.check(&levels);
        assert_eq!(r.suppressed, suppressed, "{levels:?}");
        assert!(
            (r.score - expected).abs() < 1e-9,
            "{levels:?}: {} vs {expected}",
            r.score
        );
    }
    // The bottom needs suppression (and too much of it); the top is one class of everything.
    let r = checker.check(&bottom);
    assert!(r.suppressed > 0 && !r.anonymous);
    // At the bottom every share is 1/D, so each attribute's loss is exactly s/n.
    let s_over_n = r.suppressed as f64 / p.rows() as f64;
    assert!((r.score - s_over_n).abs() < 1e-9);
    let r = checker.check(&top);
    assert!((r.score - 1.0).abs() < 1e-12);
    assert_eq!(r.utility, 0.0);
}
