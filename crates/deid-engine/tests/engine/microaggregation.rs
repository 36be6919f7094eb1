//! Microaggregation, verified from the output CSV: the classes formed by the generalized
//! quasi-identifiers satisfy k, and within each class the microaggregated column holds the
//! aggregate of the class's original values, computed here from the input file.

use crate::common;

use std::collections::HashMap;
use std::path::Path;

use common::independent::{Model, Output, verify};
use deid_engine::aggregate::{AggregateFunction, Microaggregation, MissingValues};
use deid_engine::dataset::ArxDataset;
use deid_engine::hierarchy::Hierarchy;
use deid_engine::local::{Forward, LocalConfig, local_search};
use deid_engine::posthoc::output_quality;
use deid_engine::{
    Algorithm, CancelFlag, NoObserver, PrivacyModel, Problem, ProblemConfig, QuasiIdentifier,
    SearchConfig, Table, search,
};

fn adult(function: AggregateFunction) -> Problem {
    let ds = ArxDataset::load(Path::new("../../examples/adult"), "adult").unwrap();
    let config = ProblemConfig {
        quasi_identifiers: ds
            .quasi_identifiers
            .into_iter()
            .filter(|q| q.column != "age")
            .collect(),
        microaggregated: vec![Microaggregation {
            column: "age".into(),
            function,
            missing: MissingValues::Ignore,
            date_format: None,
        }],
        privacy: vec![PrivacyModel::KAnonymity { k: 5 }],
        suppression_limit: 0.05,
        ..Default::default()
    };
    Problem::new(ds.table, config).unwrap()
}

/// Output rows grouped by the values of `qis` (suppressed rows, all `*`, left out), with the
/// input row each came from.
fn classes<'a>(out: &'a Output, qis: &[&str]) -> HashMap<Vec<&'a str>, Vec<usize>> {
    let cols: Vec<usize> = qis.iter().map(|q| out.col(q)).collect();
    let mut classes: HashMap<Vec<&str>, Vec<usize>> = HashMap::new();
    for (i, r) in out.rows.iter().enumerate() {
        let key: Vec<&str> = cols.iter().map(|&c| r[c].as_str()).collect();
        if !key.iter().all(|v| *v == "*") {
            classes.entry(key).or_default().push(i);
        }
    }
    classes
}

fn adult_ages() -> Vec<f64> {
    let input = std::fs::read_to_string("../../examples/adult/adult.csv").unwrap();
    let input = Output::parse(&input, b';');
    let col = input.col("age");
    input
        .rows
        .iter()
        .map(|r| r[col].trim().parse().unwrap())
        .collect()
}

#[test]
fn adult_age_mean_median_and_interval() {
    let ages = adult_ages();
    for function in [
        AggregateFunction::ArithmeticMean,
        AggregateFunction::Median,
        AggregateFunction::Interval,
    ] {
        let p = adult(function);
        let config = SearchConfig {
            algorithm: Algorithm::Flash,
            ..Default::default()
        };
        let best = search(&p, &config, &CancelFlag::new(), &NoObserver)
            .unwrap()
            .best
            .unwrap();
        let (eval, csv) = common::anonymize(&p, &best.levels);
        let out = Output::parse(&csv, b';');
        let qis = common::qi_names(&p);
        let qis: Vec<&str> = qis.iter().map(String::as_str).collect();
        let v = verify(&out, &qis, &[Model::K(5)], 0.05);
        assert!(v.violations.is_empty(), "{:?}", v.violations);
        let age = out.col("age");
        for rows in classes(&out, &qis).values() {
            let mut values: Vec<f64> = rows.iter().map(|&i| ages[i]).collect();
            values.sort_by(f64::total_cmp);
            let expected = match function {
                AggregateFunction::ArithmeticMean => {
                    let mean = values.iter().sum::<f64>() / values.len() as f64;
                    let shown: f64 = out.rows[rows[0]][age].parse().unwrap();
                    assert!((shown - mean).abs() <= 0.005 + 1e-9, "{shown} vs {mean}");
                    continue;
                }
                AggregateFunction::Median => format!("{}", values[values.len().div_ceil(2) - 1]),
                _ => format!("[{}, {}]", values[0], values[values.len() - 1]),
            };
            for &i in rows {
                assert_eq!(out.rows[i][age], expected, "{function:?}");
            }
        }
        // Suppressed records show the marker in the microaggregated column too.
        for r in &out.rows {
            if qis.iter().all(|q| r[out.col(q)] == "*") {
                assert_eq!(r[age], "*");
            }
        }
        let q = output_quality(&p, &eval);
        let m = q.microaggregation.expect("a microaggregation measure");
        assert!(m.loss > 0.0 && m.loss < 1.0, "{m:?}");
    }
}

#[test]
fn dates_and_local_generalization() {
    // 600 records: a zip code (3-level hierarchy) and a birth date.
    let mut rows = Vec::new();
    for i in 0..600u32 {
        let zip = format!("{}", 10000 + (i * 7919) % 40);
        let date = format!(
            "{:02}.{:02}.{}",
            1 + i % 28,
            1 + (i / 28) % 12,
            1950 + i % 37
        );
        rows.push(vec![zip, date]);
    }
    let p = zip_and_birth(&rows, AggregateFunction::Median, 20).unwrap();
    let local = local_search(
        &p,
        &LocalConfig::default(),
        &SearchConfig::default(),
        &CancelFlag::new(),
        &Forward(&NoObserver),
    )
    .unwrap();
    let mut buf = Vec::new();
    deid_engine::output::write_csv(&p, &local, &mut buf, b';', &Default::default()).unwrap();
    let out = Output::parse(&String::from_utf8(buf).unwrap(), b';');
    let key = |d: &str| {
        let f: Vec<u32> = d.split('.').map(|x| x.parse().unwrap()).collect();
        (f[2], f[1], f[0])
    };
    let classes = classes(&out, &["zip"]);
    assert!(classes.len() > 1);
    for members in classes.values() {
        assert!(members.len() >= 20);
        let mut dates: Vec<&str> = members.iter().map(|&i| rows[i][1].as_str()).collect();
        dates.sort_by_key(|d| key(d));
        let median = dates[dates.len().div_ceil(2) - 1];
        for &i in members {
            assert_eq!(out.rows[i][1], median);
        }
    }
}

#[test]
fn bad_values_are_named() {
    let rows = [["1", "01.01.2000"], ["2", "2000-01-02"]].map(|r| r.map(str::to_string).to_vec());
    let e = zip_and_birth(&rows, AggregateFunction::ArithmeticMean, 2)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("attributes.birth.microaggregation") && e.contains("'2000-01-02'"),
        "{e}"
    );
}

/// A table of (zip, birth date) rows: zip generalized (value, first four digits + `*`, `*`),
/// birth microaggregated with `function` as dates `dd.MM.yyyy`, k-anonymity.
fn zip_and_birth(
    rows: &[Vec<String>],
    function: AggregateFunction,
    k: u32,
) -> deid_engine::Result<Problem> {
    let table = Table::from_rows(&["zip", "birth"], rows).unwrap();
    let mut zips: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    zips.sort();
    zips.dedup();
    let h = Hierarchy::from_rows(
        zips.iter()
            .map(|z| {
                let prefix = &z[..z.len().min(4)];
                vec![z.to_string(), format!("{prefix}*"), "*".into()]
            })
            .collect(),
        "zip",
    )
    .unwrap();
    let config = ProblemConfig {
        quasi_identifiers: vec![QuasiIdentifier::new("zip", h)],
        microaggregated: vec![Microaggregation {
            column: "birth".into(),
            function,
            missing: MissingValues::Ignore,
            date_format: Some("dd.MM.yyyy".into()),
        }],
        privacy: vec![PrivacyModel::KAnonymity { k }],
        ..Default::default()
    };
    Problem::new(table, config)
}
