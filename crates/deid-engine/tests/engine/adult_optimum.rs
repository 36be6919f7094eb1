//! Exhaustive search over all 12,960 transformations of adult (k = 5, Loss) at 0 % and 5 %
//! suppression: the minimum-Loss solution's output CSV passes the independent checker, and every
//! transformation's verdict agrees with the checker on a sample.

use crate::common;

use common::independent::{Model, Output, verify};
use deid_engine::Checker;
use deid_engine::privacy::PrivacyModel;

fn exhaustive(limit: f64) {
    let problem = common::adult(vec![PrivacyModel::KAnonymity { k: 5 }], limit);
    assert_eq!(problem.lattice().size(), Some(12_960));
    let checker = Checker::new(&problem);
    let mut best: Option<deid_engine::CheckResult> = None;
    let mut anonymous = 0;
    let mut all = Vec::new();
    problem.lattice().for_each(|t| {
        let r = checker.check(t);
        if r.anonymous {
            anonymous += 1;
            let better = best.as_ref().is_none_or(|b| {
                r.score < b.score
                    || (r.score == b.score
                        && (deid_engine::Lattice::rank(t), t)
                            < (deid_engine::Lattice::rank(&b.levels), &b.levels[..]))
            });
            if better {
                best = Some(r.clone());
            }
        }
        all.push(r);
    });
    let best = best.expect("adult has a 5-anonymous transformation");
    assert!(anonymous > 0);
    // The top is always a solution; the bottom never is for k = 5.
    assert!(all.last().unwrap().anonymous);
    assert!(!all[0].anonymous);

    // The optimum's output passes the independent checker.
    let (eval, csv) = common::anonymize(&problem, &best.levels);
    assert_eq!(eval.result, best, "evaluate agrees with check");
    let out = Output::parse(&csv, b';');
    let qis = common::qi_names(&problem);
    let qis: Vec<&str> = qis.iter().map(String::as_str).collect();
    let verdict = verify(&out, &qis, &[Model::K(5)], limit);
    assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
    assert_eq!(verdict.suppressed, best.suppressed);
    assert_eq!(out.rows.len(), problem.rows());

    // Verdicts of a sample of transformations agree with the independent checker.
    for r in all.iter().step_by(397) {
        let (_, csv) = common::anonymize(&problem, &r.levels);
        let v = verify(&Output::parse(&csv, b';'), &qis, &[Model::K(5)], limit);
        assert_eq!(v.violations.is_empty(), r.anonymous, "{:?}", r.levels);
        if r.anonymous {
            assert_eq!(v.suppressed, r.suppressed);
        }
    }
}

#[test]
fn adult_k5_no_suppression() {
    exhaustive(0.0);
}

#[test]
fn adult_k5_five_percent_suppression() {
    exhaustive(0.05);
}
