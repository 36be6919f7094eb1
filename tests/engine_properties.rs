//! Property tests: on random small tables and random monotone hierarchies, the check's verdict,
//! suppressed rows and class count equal an independent brute-force computation made from the
//! output rows.

mod common;

use common::independent::{Model, Output, verify};
use deid::engine::privacy::PrivacyModel;
use deid::engine::{
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
    l: Option<u32>,
    limit: f64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((0u8..6, 0u8..4, 0u8..4), 4..40),
        prop::collection::vec(prop::collection::vec(0u8..3, 1..6), 0..3),
        prop::collection::vec(prop::collection::vec(0u8..2, 1..4), 0..2),
        1u32..5,
        prop::option::of(1u32..4),
        prop::sample::select(vec![0.0, 0.1, 0.25, 1.0]),
    )
        .prop_map(|(rows, merges_a, merges_b, k, l, limit)| Case {
            rows,
            merges_a,
            merges_b,
            k,
            l,
            limit,
        })
}

fn build(c: &Case) -> Option<Problem> {
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
    let mut privacy = vec![PrivacyModel::KAnonymity { k: c.k }];
    if let Some(l) = c.l {
        privacy.push(PrivacyModel::DistinctLDiversity {
            attribute: "s".into(),
            l,
        });
    }
    let config = ProblemConfig {
        quasi_identifiers: vec![QuasiIdentifier::new("a", ha), QuasiIdentifier::new("b", hb)],
        sensitive: vec![SensitiveAttribute {
            column: "s".into(),
            hierarchy: None,
        }],
        privacy,
        suppression_limit: c.limit,
        ..Default::default()
    };
    Problem::new(table, config).ok()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]
    #[test]
    fn check_matches_brute_force_on_output(c in case()) {
        let Some(problem) = build(&c) else { return Ok(()); };
        let lattice = problem.lattice();
        let checker = Checker::new(&problem);
        // Check every transformation (exercises snapshot reuse), then compare each with the
        // independent computation from its output.
        let mut models = vec![Model::K(c.k as usize)];
        if let Some(l) = c.l {
            models.push(Model::DistinctL { attr: "s".into(), l: l as usize });
        }
        let mut all = Vec::new();
        lattice.for_each(|t| all.push(checker.check(t)));
        for r in &all {
            let eval = Checker::new(&problem).evaluate(&r.levels);
            prop_assert_eq!(&eval.result, r);
            let csv = common::output_csv(&problem, &eval);
            let out = Output::parse(&csv, b';');
            let v = verify(&out, &["a", "b"], &models, c.limit);
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
