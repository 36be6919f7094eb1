//! Property tests: on random small tables and random monotone hierarchies, the check's verdict,
//! suppressed rows and class count equal an independent brute-force computation made from the
//! output rows.

use crate::common;

use common::independent::{Model, Output, verify};
use deid_engine::privacy::PrivacyModel;
use deid_engine::{
    Checker, Hierarchy, Problem, ProblemConfig, QuasiIdentifier, SensitiveAttribute, Table,
};
use proptest::prelude::*;

/// A random monotone hierarchy over `values`: each level merges groups of the previous one by a
/// random mapping into fewer labels; the last level is `*`.
fn hierarchy(values: &[String], merges: &[Vec<u8>]) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = values.iter().map(|v| vec![v.clone()]).collect();
    for (lvl, merge) in merges.iter().enumerate() {
        // Map each distinct label of the previous level to a bucket.
        let mut labels: Vec<String> = rows.iter().map(|r| r.last().unwrap().clone()).collect();
        labels.sort();
        labels.dedup();
        for r in rows.iter_mut() {
            let prev = r.last().unwrap().clone();
            let idx = labels.iter().position(|l| *l == prev).unwrap();
            let bucket = merge[idx % merge.len()];
            r.push(format!("L{}g{}", lvl + 1, bucket));
        }
    }
    for r in rows.iter_mut() {
        r.push("*".into());
    }
    rows
}

#[derive(Debug, Clone)]
struct Case {
    rows: Vec<(u8, u8, u8)>,
    merges_a: Vec<Vec<u8>>,
    merges_b: Vec<Vec<u8>>,
    k: u32,
    /// Which extra model (0 = none), see `extra_model`.
    model: usize,
    merges_s: Vec<u8>,
    limit: f64,
}

/// The extra privacy model of a case: engine syntax and the independent checker's model.
fn extra_model(
    c: &Case,
    paths: &std::collections::HashMap<String, Vec<String>>,
) -> Option<(String, Model)> {
    let a = "s".to_string();
    Some(match c.model {
        0 => return None,
        1 => (
            "distinct-l-diversity(attribute=s,l=2)".into(),
            Model::DistinctL { attr: a, l: 2 },
        ),
        2 => (
            "entropy-l-diversity(attribute=s,l=1.8)".into(),
            Model::EntropyL { attr: a, l: 1.8 },
        ),
        3 => (
            "recursive-l-diversity(attribute=s,c=2,l=2)".into(),
            Model::RecursiveCL {
                attr: a,
                c: 2.0,
                l: 2,
            },
        ),
        4 => (
            "t-closeness(attribute=s,t=0.3,distance=equal)".into(),
            Model::TEqual { attr: a, t: 0.3 },
        ),
        5 => (
            "t-closeness(attribute=s,t=0.25,distance=ordered)".into(),
            Model::TOrdered { attr: a, t: 0.25 },
        ),
        6 => (
            "t-closeness(attribute=s,t=0.3,distance=hierarchical)".into(),
            Model::THierarchical {
                attr: a,
                t: 0.3,
                paths: paths.clone(),
            },
        ),
        7 => (
            "delta-disclosure(attribute=s,delta=1.3)".into(),
            Model::Delta {
                attr: a,
                delta: 1.3,
            },
        ),
        8 => (
            "basic-beta-likeness(attribute=s,beta=0.7)".into(),
            Model::BetaBasic { attr: a, beta: 0.7 },
        ),
        9 => (
            "enhanced-beta-likeness(attribute=s,beta=1.3)".into(),
            Model::BetaEnhanced { attr: a, beta: 1.3 },
        ),
        10 => (
            "average-risk(threshold=0.3)".into(),
            Model::AverageRisk {
                avg: 0.3,
                highest: None,
                records_at_risk: None,
            },
        ),
        11 => (
            "average-risk(threshold=0.4,highest=0.34,records_at_risk=0.2)".into(),
            Model::AverageRisk {
                avg: 0.4,
                highest: Some(0.34),
                records_at_risk: Some(0.2),
            },
        ),
        _ => (
            "sample-uniqueness(threshold=0.1)".into(),
            Model::SampleUniqueness(0.1),
        ),
    })
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((0u8..6, 0u8..4, 0u8..4), 4..40),
        prop::collection::vec(prop::collection::vec(0u8..3, 1..6), 0..3),
        prop::collection::vec(prop::collection::vec(0u8..2, 1..4), 0..2),
        1u32..5,
        0usize..13,
        prop::collection::vec(0u8..2, 1..4),
        prop::sample::select(vec![0.0, 0.1, 0.25, 1.0]),
    )
        .prop_map(
            |(rows, merges_a, merges_b, k, model, merges_s, limit)| Case {
                rows,
                merges_a,
                merges_b,
                k,
                model,
                merges_s,
                limit,
            },
        )
}

fn build(c: &Case) -> Option<(Problem, Vec<Model>)> {
    let rows: Vec<Vec<String>> = c
        .rows
        .iter()
        .map(|(a, b, s)| vec![format!("a{a}"), format!("b{b}"), format!("s{s}")])
        .collect();
    let table = Table::from_rows(&["a", "b", "s"], &rows).unwrap();
    let distinct = |i: usize| {
        let mut v: Vec<String> = rows.iter().map(|r| r[i].clone()).collect();
        v.sort();
        v.dedup();
        v
    };
    let ha = Hierarchy::from_rows(hierarchy(&distinct(0), &c.merges_a), "a").unwrap();
    let hb = Hierarchy::from_rows(hierarchy(&distinct(1), &c.merges_b), "b").unwrap();
    // A two-level hierarchy for the sensitive attribute (hierarchical t-closeness).
    let s_rows = hierarchy(&distinct(2), std::slice::from_ref(&c.merges_s));
    let paths = s_rows
        .iter()
        .map(|r| (r[0].clone(), r[1..].to_vec()))
        .collect();
    let hs = Hierarchy::from_rows(s_rows, "s").unwrap();
    let mut privacy = vec![PrivacyModel::KAnonymity { k: c.k }];
    let mut models = vec![Model::K(c.k as usize)];
    if let Some((text, model)) = extra_model(c, &paths) {
        privacy.push(PrivacyModel::parse(&text).unwrap());
        models.push(model);
    }
    let config = ProblemConfig {
        quasi_identifiers: vec![QuasiIdentifier::new("a", ha), QuasiIdentifier::new("b", hb)],
        sensitive: vec![SensitiveAttribute {
            column: "s".into(),
            hierarchy: Some(hs),
        }],
        privacy,
        suppression_limit: c.limit,
        ..Default::default()
    };
    Problem::new(table, config).ok().map(|p| (p, models))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]
    #[test]
    fn check_matches_brute_force_on_output(c in case()) {
        let Some((problem, models)) = build(&c) else { return Ok(()); };
        let lattice = problem.lattice();
        let checker = Checker::new(&problem);
        // Check every transformation (exercises snapshot reuse), then compare each with the
        // independent computation from its output.
        let mut all = Vec::new();
        lattice.for_each(|t| all.push(checker.check(t)));
        for r in &all {
            let eval = Checker::new(&problem).evaluate(&r.levels);
            prop_assert_eq!(&eval.result, r);
            let csv = common::output_csv(&problem, &eval);
            let out = Output::parse(&csv, b';');
            let v = verify(&out, &["a", "b"], &models, c.limit);
            // The default output differs only in the suppressed records: every cell but the
            // insensitive ones is `*` there.
            let masked = Output::parse(&common::output_csv_with(&problem, &eval, &Default::default()), b';');
            prop_assert_eq!(masked.rows.len(), out.rows.len());
            let suppressed_row = |k: &Vec<String>| {
                k[out.col("a")] == "*"
                    && k[out.col("b")] == "*"
                    && (v.classes > 0 || r.suppressed == problem.rows())
            };
            for (m, k) in masked.rows.iter().zip(&out.rows) {
                if suppressed_row(k) {
                    prop_assert!(m[masked.col("s")] == "*", "sensitive value of a suppressed record published: {:?}", m);
                } else {
                    prop_assert_eq!(m, k);
                }
            }
            let published = eval.suppressed.iter().filter(|s| !**s).count();
            if v.classes > 0 {
                prop_assert_eq!(v.violations.is_empty(), r.anonymous,
                    "levels {:?} violations {:?} result {:?}", r.levels, v.violations, r);
                prop_assert_eq!(v.suppressed, r.suppressed);
                prop_assert_eq!(v.classes, published);
            } else {
                // Every row is `*`: all records suppressed (indistinguishable in the output from
                // the fully generalized table, and safe either way) or the single top class.
                prop_assert!(r.suppressed == problem.rows() || published == 1, "{:?}", r);
                if published == 1 {
                    prop_assert_eq!(v.violations.is_empty(), r.anonymous);
                }
            }
        }
    }
}
