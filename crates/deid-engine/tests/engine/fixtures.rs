//! Hand-checkable cases on ARX's `test` dataset (7 records: age, gender, zipcode).
//!
//! Hierarchies: age → `<50`/`>=50` → `*` (100 rows, 1..100: 49 rows below 50, 51 at or above);
//! gender → `*` (2 rows); zipcode 80000..89999 (10,000 rows) masked one digit per level.

use crate::common;

use std::fs::File;

use deid_engine::privacy::PrivacyModel;
use deid_engine::{Checker, CsvOptions, Hierarchy, Problem, ProblemConfig, QuasiIdentifier, Table};

const DIR: &str = "tests/fixtures/test";

fn table() -> Table {
    Table::read_csv(
        File::open(format!("{DIR}/test.csv")).unwrap(),
        CsvOptions {
            delimiter: b';',
            has_header: true,
        },
        "test.csv",
    )
    .unwrap()
}

fn qi(c: &str) -> QuasiIdentifier {
    let file = File::open(format!("{DIR}/test_hierarchy_{c}.csv")).unwrap();
    QuasiIdentifier::new(c, Hierarchy::read_csv(file, b';', c).unwrap())
}

fn problem(k: u32, limit: f64) -> Problem {
    let config = ProblemConfig {
        quasi_identifiers: vec![qi("age"), qi("gender"), qi("zipcode")],
        privacy: vec![PrivacyModel::KAnonymity { k }],
        suppression_limit: limit,
        ..Default::default()
    };
    Problem::new(table(), config).unwrap()
}

/// Normalised Loss of one attribute: (L − n/D) / (n − n/D) with gs-factor 0.5.
fn norm(l: f64, n: f64, d: f64) -> f64 {
    ((l - n / d) / (n - n / d) * 1e10).floor() / 1e10
}

#[test]
fn lattice_and_domains() {
    let p = problem(2, 0.0);
    assert_eq!(p.lattice().size(), Some(3 * 2 * 6));
    assert_eq!(p.hierarchies()[0].domain_size, 100);
    assert_eq!(p.hierarchies()[2].domain_size, 10_000);
    assert_eq!(p.base_groups().len(), 7);
}

#[test]
fn two_classes_of_four_and_three() {
    // age=1 (<50 / >=50), gender=1 (*), zipcode=3 (81***):
    // {34,45,34,45} → (<50,*,81***) = 4 records; {66,70,70} → (>=50,*,81***) = 3 records.
    let p = problem(3, 0.0);
    let c = Checker::new(&p);
    let r = c.check(&[1, 1, 3]);
    assert!(r.anonymous);
    assert_eq!((r.classes, r.suppressed), (2, 0));
    // Loss by hand: age 4·0.49 + 3·0.51 = 3.49; gender 7·1; zipcode 7·(1000/10000) = 0.7.
    let per = [
        norm(3.49, 7.0, 100.0),
        norm(7.0, 7.0, 2.0),
        norm(0.7, 7.0, 10_000.0),
    ];
    let geo = per.iter().map(|v| v + 1.0).product::<f64>().powf(1.0 / 3.0) - 1.0;
    assert!((r.score - geo).abs() < 1e-12, "{} vs {}", r.score, geo);
    let eval = c.evaluate(&[1, 1, 3]);
    for (a, b) in eval.quality.per_attribute.iter().zip(per) {
        assert!((a - b).abs() < 1e-12);
    }
    // k = 4 fails without suppression, and passes when 3 of 7 records may be suppressed.
    let p4 = problem(4, 0.0);
    let r4 = Checker::new(&p4).check(&[1, 1, 3]);
    assert!(!r4.anonymous);
    assert_eq!(r4.suppressed, 3);
    let p4s = problem(4, 3.0 / 7.0);
    assert!(Checker::new(&p4s).check(&[1, 1, 3]).anonymous);
    let p4t = problem(4, 2.0 / 7.0);
    assert!(!Checker::new(&p4t).check(&[1, 1, 3]).anonymous);
}

#[test]
fn suppression_and_output() {
    // age=1, gender=0, zipcode=2 (816** / 819**): classes (<50,male,816**) 1, (<50,female,816**) 1,
    // (>=50,male,819**) 2, (>=50,female,819**) 1, (<50,female,819**) 1, (<50,male,819**) 1.
    let p = problem(2, 5.0 / 7.0);
    let (eval, csv) = common::anonymize(&p, &[1, 0, 2]);
    assert!(eval.result.anonymous);
    assert_eq!(eval.result.classes, 6);
    assert_eq!(eval.result.suppressed, 5);
    let expected =
        "age;gender;zipcode\n*;*;*\n*;*;*\n>=50;male;819**\n*;*;*\n*;*;*\n>=50;male;819**\n*;*;*\n";
    assert_eq!(csv, expected);
}

#[test]
fn bottom_and_top() {
    let p = problem(2, 0.0);
    let c = Checker::new(&p);
    let bottom = c.check(&[0, 0, 0]);
    assert!(!bottom.anonymous);
    assert_eq!(bottom.classes, 7);
    assert_eq!(bottom.lower_bound, 0.0);
    let top = c.check(&[2, 1, 5]);
    assert!(top.anonymous);
    assert_eq!(top.classes, 1);
    assert_eq!(top.score, 1.0);
    assert_eq!(top.utility, 0.0);
}

#[test]
fn level_bounds_restrict_the_lattice_and_are_validated() {
    let build = |min: Option<u8>, max: Option<u8>| {
        let mut zip = qi("zipcode");
        zip.min_level = min;
        zip.max_level = max;
        let config = ProblemConfig {
            quasi_identifiers: vec![zip],
            privacy: vec![PrivacyModel::KAnonymity { k: 2 }],
            ..Default::default()
        };
        Problem::new(table(), config)
    };
    let p = build(Some(1), Some(3)).unwrap();
    assert_eq!(
        (p.lattice().min(), p.lattice().max()),
        (&[1u8][..], &[3u8][..])
    );
    assert_eq!(p.lattice().size(), Some(3));
    let err = build(None, Some(6)).unwrap_err().to_string();
    assert!(
        err.contains("attributes.zipcode.max_level") && err.contains("0..=5"),
        "{err}"
    );
    let err = build(Some(4), Some(2)).unwrap_err().to_string();
    assert!(err.contains("min_level 4 is above max_level 2"), "{err}");
}
