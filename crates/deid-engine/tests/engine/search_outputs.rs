//! For every algorithm and for k-anonymity, ℓ-diversity and t-closeness problems on adult: the
//! search result's output CSV passes the independent checker, and the result is what `check` says.

use crate::common;

use std::time::Duration;

use common::independent::{Model, Output, verify};
use deid_engine::{
    Algorithm, CancelFlag, Checker, NoObserver, PrivacyModel, Problem, SearchConfig, search,
};

/// adult with occupation sensitive, k = 5 and `privacy`.
fn problem(privacy: &str, limit: f64) -> Problem {
    let models = vec![
        PrivacyModel::KAnonymity { k: 5 },
        PrivacyModel::parse(privacy).unwrap(),
    ];
    common::adult_with_sensitive("occupation", models, limit)
}

fn run_all(privacy: &str, independent: Model, limit: f64) {
    let p = problem(privacy, limit);
    let qis: Vec<String> = common::qi_names(&p);
    let qis: Vec<&str> = qis.iter().map(String::as_str).collect();
    let mut optimum: Option<f64> = None;
    for algorithm in Algorithm::ALL {
        // Work-bounded, not time-bounded: twice the space's size in checks lets every algorithm
        // finish (or find a solution) whatever else the machine is doing; the time limit is a
        // cap that does not bind.
        let config = SearchConfig {
            algorithm,
            time_limit: Duration::from_secs(600),
            check_limit: Some(2 * p.lattice().size_f64() as u64),
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
            &[Model::K(5), independent.clone()],
            limit,
        );
        assert!(
            v.violations.is_empty(),
            "{algorithm} {privacy}: {:?}",
            v.violations
        );
        assert_eq!(v.suppressed, best.suppressed, "{algorithm}");
        // Optimal algorithms agree; heuristics are never better than the optimum.
        if outcome.optimal_proven {
            match optimum {
                None => optimum = Some(best.score),
                Some(o) => assert!((o - best.score).abs() <= 1e-9 * o.max(1.0), "{algorithm}"),
            }
        }
        if let Some(o) = optimum {
            assert!(
                best.score >= o - 1e-9,
                "{algorithm} beat the proven optimum"
            );
        }
    }
}

#[test]
fn k_anonymity() {
    run_all("k-anonymity(k=10)", Model::K(10), 0.02);
}

#[test]
fn l_diversity() {
    run_all(
        "recursive-l-diversity(attribute=occupation,c=4,l=3)",
        Model::RecursiveCL {
            attr: "occupation".into(),
            c: 4.0,
            l: 3,
        },
        0.05,
    );
}

#[test]
fn t_closeness() {
    run_all(
        "t-closeness(attribute=occupation,t=0.2,distance=equal)",
        Model::TEqual {
            attr: "occupation".into(),
            t: 0.2,
        },
        0.05,
    );
}
