//! The distinction and separation of every combination of quasi-identifiers (the input risk
//! report) equal a straightforward count made from the table's rows: for each combination, the
//! rows grouped by their values as strings in an ordered map.

use std::collections::BTreeMap;

use deid_engine::risk::quasi_identifier_risks;
use deid_engine::{Hierarchy, PrivacyModel, Problem, ProblemConfig, QuasiIdentifier, Table};
use proptest::prelude::*;

/// Distinction and separation of the columns in `set`, counted on `rows`.
fn by_rows(rows: &[Vec<String>], set: &[usize]) -> (f64, f64) {
    let mut groups: BTreeMap<Vec<&str>, u64> = BTreeMap::new();
    for row in rows {
        let key = set.iter().map(|&i| row[i].as_str()).collect();
        *groups.entry(key).or_default() += 1;
    }
    let n = rows.len() as u64;
    let pairs = |m: u64| (m as f64) * (m as f64 - 1.0) / 2.0;
    let same: f64 = groups.values().map(|&m| pairs(m)).sum();
    let distinction = if n == 0 {
        0.0
    } else {
        groups.len() as f64 / n as f64
    };
    let separation = if n <= 1 { 0.0 } else { 1.0 - same / pairs(n) };
    (distinction, separation)
}

/// `rows` (values 0..domain per column, as text) with one quasi-identifier per column.
fn problem(rows: &[Vec<String>], columns: usize) -> Problem {
    let names: Vec<String> = (0..columns).map(|i| format!("c{i}")).collect();
    let header: Vec<&str> = names.iter().map(String::as_str).collect();
    let table = Table::from_rows(&header, rows).unwrap();
    let quasi_identifiers = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut values: Vec<String> = rows.iter().map(|r| r[i].clone()).collect();
            values.sort();
            values.dedup();
            let h = values.into_iter().map(|v| vec![v, "*".into()]).collect();
            QuasiIdentifier::new(name, Hierarchy::from_rows(h, name).unwrap())
        })
        .collect();
    let config = ProblemConfig {
        quasi_identifiers,
        privacy: vec![PrivacyModel::KAnonymity { k: 1 }],
        ..Default::default()
    };
    Problem::new(table, config).unwrap()
}

fn table() -> impl Strategy<Value = (usize, Vec<Vec<String>>)> {
    (1usize..=7, 1usize..=6).prop_flat_map(|(columns, domain)| {
        let row = prop::collection::vec(0..domain, columns)
            .prop_map(|r| r.into_iter().map(|v| v.to_string()).collect::<Vec<_>>());
        (Just(columns), prop::collection::vec(row, 1..120))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_combination_matches_a_count_of_the_rows((columns, rows) in table()) {
        let p = problem(&rows, columns);
        let report = quasi_identifier_risks(&p);
        prop_assert_eq!(report.len(), (1 << columns) - 1);
        for r in &report {
            let set: Vec<usize> = r
                .attributes
                .iter()
                .map(|a| a[1..].parse::<usize>().unwrap())
                .collect();
            prop_assert!(set.windows(2).all(|w| w[0] < w[1]), "{:?}", r.attributes);
            let (distinction, separation) = by_rows(&rows, &set);
            prop_assert_eq!(r.distinction, distinction, "{:?}", r.attributes);
            prop_assert_eq!(r.separation, separation, "{:?}", r.attributes);
        }
    }
}

/// Beyond the work bound the default report gives the single attributes and the whole set;
/// `QiCombinations::All` gives every combination, each equal to the count of the rows.
#[test]
fn every_combination_on_request_beyond_the_work_bound() {
    use deid_engine::CancelFlag;
    use deid_engine::risk::{MAX_COMBINATION_WORK, QiCombinations, RiskReport};
    // 10 columns, 4 values each, distinct rows: more base groups than the bound allows.
    let columns = 10;
    let rows_wanted = MAX_COMBINATION_WORK / 1023 + 500;
    let rows: Vec<Vec<String>> = (0..rows_wanted)
        .map(|r| {
            (0..columns)
                .map(|i| ((r >> (2 * i)) & 3).to_string())
                .collect()
        })
        .collect();
    let p = problem(&rows, columns);
    let auto = quasi_identifier_risks(&p);
    assert_eq!(auto.len(), columns + 1);
    let all = RiskReport::input_with(&p, 0.2, QiCombinations::All, &CancelFlag::new())
        .unwrap()
        .quasi_identifiers
        .unwrap();
    assert_eq!(all.len(), (1 << columns) - 1);
    for r in all.iter().step_by(37).chain(auto.iter()) {
        let set: Vec<usize> = (r.attributes.iter())
            .map(|a| a[1..].parse::<usize>().unwrap())
            .collect();
        let (distinction, separation) = by_rows(&rows, &set);
        assert_eq!(r.distinction, distinction, "{:?}", r.attributes);
        assert_eq!(r.separation, separation, "{:?}", r.attributes);
    }
    for r in &auto {
        assert!(all.contains(r), "{:?}", r.attributes);
    }
}

/// `QiCombinations::Singles` (the reports of anonymizations) gives each quasi-identifier alone
/// and all together, equal to the counts of the rows, on a table `Auto` gives every combination
/// of; with one quasi-identifier, that one once.
#[test]
fn singles_are_each_attribute_and_the_whole_set() {
    use deid_engine::CancelFlag;
    use deid_engine::risk::{QiCombinations, RiskReport};
    let columns = 4;
    let rows: Vec<Vec<String>> = (0..300usize)
        .map(|r| {
            (0..columns)
                .map(|i| ((r * (i + 3)) % (i + 2) + r % 5).to_string())
                .collect()
        })
        .collect();
    let p = problem(&rows, columns);
    let singles = |p: &deid_engine::Problem| {
        RiskReport::input_with(p, 0.2, QiCombinations::Singles, &CancelFlag::new())
            .unwrap()
            .quasi_identifiers
            .unwrap()
    };
    let got = singles(&p);
    assert_eq!(got.len(), columns + 1);
    assert_eq!(quasi_identifier_risks(&p).len(), (1 << columns) - 1);
    for r in &got {
        let set: Vec<usize> = (r.attributes.iter())
            .map(|a| a[1..].parse::<usize>().unwrap())
            .collect();
        assert!(set.len() == 1 || set.len() == columns, "{set:?}");
        let (distinction, separation) = by_rows(&rows, &set);
        assert_eq!(r.distinction, distinction, "{:?}", r.attributes);
        assert_eq!(r.separation, separation, "{:?}", r.attributes);
    }
    let one: Vec<Vec<String>> = rows.iter().map(|r| r[..1].to_vec()).collect();
    assert_eq!(singles(&problem(&one, 1)).len(), 1);
}
