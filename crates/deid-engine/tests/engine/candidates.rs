//! The candidates of a search (the best anonymous transformations it checked): for the
//! exhaustive search exactly the best N of the whole space; for every algorithm sorted, distinct,
//! led by the result, each one's output k-anonymous by the independent checker; the same list
//! for the same seed; none with differential privacy.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::independent::{Model, Output, verify};
use deid_engine::dataset::ArxDataset;
use deid_engine::lattice::Lattice;
use deid_engine::privacy::{DpModel, PrivacyModel};
use deid_engine::search::Candidate;
use deid_engine::{
    Algorithm, CancelFlag, Checker, NoObserver, Problem, ProblemConfig, SearchConfig,
    SearchOutcome, search,
};

fn problem() -> Problem {
    common::adult(vec![PrivacyModel::KAnonymity { k: 10 }], 0.02)
}

fn run(p: &Problem, algorithm: Algorithm, candidates: usize) -> SearchOutcome {
    let config = SearchConfig {
        algorithm,
        time_limit: Duration::from_secs(600),
        check_limit: Some(2 * p.lattice().size_f64() as u64),
        seed: 3,
        candidates,
        ..Default::default()
    };
    search(p, &config, &CancelFlag::new(), &NoObserver).unwrap()
}

/// (score, rank, levels): the order candidates are listed in.
fn key(c: &Candidate) -> (f64, u32, Vec<u8>) {
    (c.score, Lattice::rank(&c.levels), c.levels.clone())
}

#[test]
fn exhaustive_lists_the_best_n_of_the_whole_space() {
    let p = problem();
    let outcome = run(&p, Algorithm::Exhaustive, 20);
    let checker = Checker::new(&p);
    let mut all = Vec::new();
    p.lattice().for_each(|levels| {
        let r = checker.check(levels);
        if r.anonymous {
            all.push((r.score, Lattice::rank(levels), levels.to_vec()));
        }
    });
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    all.truncate(20);
    let got: Vec<_> = outcome.candidates.iter().map(key).collect();
    assert_eq!(got, all);
}

#[test]
fn every_algorithm_lists_sorted_distinct_anonymous_candidates_led_by_its_result() {
    let p = problem();
    let qis = common::qi_names(&p);
    let qis: Vec<&str> = qis.iter().map(String::as_str).collect();
    for algorithm in Algorithm::ALL {
        let outcome = run(&p, algorithm, 7);
        let c = &outcome.candidates;
        assert!(!c.is_empty() && c.len() <= 7, "{algorithm}: {}", c.len());
        assert_eq!(
            c[0].levels,
            outcome.best.as_ref().unwrap().levels,
            "{algorithm}"
        );
        for w in c.windows(2) {
            assert!(
                key(&w[0]) < key(&w[1]),
                "{algorithm}: not sorted or repeated"
            );
        }
        // The last candidate's output, checked from its CSV.
        let last = c.last().unwrap();
        let (eval, csv) = common::anonymize(&p, &last.levels);
        let v = verify(&Output::parse(&csv, b';'), &qis, &[Model::K(10)], 0.02);
        assert!(v.violations.is_empty(), "{algorithm}: {:?}", v.violations);
        assert_eq!(v.suppressed, last.suppressed, "{algorithm}");
        assert_eq!(eval.result.utility, last.utility, "{algorithm}");
    }
}

#[test]
fn the_same_seed_lists_the_same_candidates_and_zero_lists_none() {
    let p = problem();
    let a = run(&p, Algorithm::Genetic, 20);
    let b = run(&p, Algorithm::Genetic, 20);
    assert_eq!(a.candidates, b.candidates);
    assert!(run(&p, Algorithm::Lightning, 0).candidates.is_empty());
}

#[test]
fn too_many_candidates_are_refused_naming_the_setting() {
    let p = problem();
    let config = SearchConfig {
        candidates: deid_engine::search::MAX_CANDIDATES + 1,
        ..Default::default()
    };
    let e = search(&p, &config, &CancelFlag::new(), &NoObserver).unwrap_err();
    assert!(e.to_string().contains("candidates"), "{e}");
}

#[test]
fn differential_privacy_lists_no_candidates() {
    let ds = ArxDataset::load(Path::new("../../examples/adult"), "adult").expect("adult loads");
    let config = ProblemConfig {
        quasi_identifiers: ds.quasi_identifiers.clone(),
        privacy: vec![PrivacyModel::DifferentialPrivacy(DpModel::new(1.0, 1e-5))],
        ..Default::default()
    };
    let p = Problem::new(ds.table, config).unwrap();
    let outcome = search(
        &p,
        &SearchConfig::default(),
        &CancelFlag::new(),
        &NoObserver,
    )
    .unwrap();
    assert!(outcome.best.is_some());
    assert!(outcome.candidates.is_empty());
}
