//! Property tests of the declared monotonicity: on random small tables and hierarchies, for every
//! model declared monotone under generalization, anonymous(t) ⇒ anonymous(t') for all t ≤ t' of
//! the lattice with suppression limit 0; likewise with a positive limit for the models declared
//! monotone with suppression.

use proptest::prelude::*;

use super::testutil::problem;
use super::{EntropyEstimator, PrivacyModel, TClosenessDistance};
use crate::data::Table;
use crate::{Checker, Lattice, Problem};

/// A random table: QIs `a` (5 values, 4 levels), `b` (4 values, 3 levels), sensitive `s`
/// (5 numeric values, 3 levels).
#[derive(Debug, Clone)]
struct Case {
    rows: Vec<(u8, u8, u8)>,
    /// Level-1 group of each value of a, level-2 group of each level-1 group of a.
    a1: Vec<u8>,
    a2: Vec<u8>,
    b1: Vec<u8>,
    s1: Vec<u8>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((0u8..5, 0u8..4, 0u8..5), 4..28),
        prop::collection::vec(0u8..3, 5),
        prop::collection::vec(0u8..2, 3),
        prop::collection::vec(0u8..2, 4),
        prop::collection::vec(0u8..3, 5),
    )
        .prop_map(|(rows, a1, a2, b1, s1)| Case {
            rows,
            a1,
            a2,
            b1,
            s1,
        })
}

impl Case {
    fn build(&self, models: Vec<PrivacyModel>, limit: f64) -> Option<Problem> {
        let rows: Vec<String> = self
            .rows
            .iter()
            .map(|&(a, b, s)| format!("a{a};b{b};{}", s as u32 * 10))
            .collect();
        let refs: Vec<&str> = rows.iter().map(String::as_str).collect();
        let t: Table = super::testutil::table(&["a", "b", "s"], &refs);
        let ha: String = (0..5)
            .map(|v| {
                let g = self.a1[v];
                format!("a{v};A{g};AA{};*", self.a2[g as usize])
            })
            .collect::<Vec<_>>()
            .join("\n");
        let hb: String = (0..4)
            .map(|v| format!("b{v};B{};*", self.b1[v]))
            .collect::<Vec<_>>()
            .join("\n");
        let hs: String = (0..5)
            .map(|v| format!("{};S{};*", v * 10, self.s1[v]))
            .collect::<Vec<_>>()
            .join("\n");
        // Models may be unsatisfiable for tiny tables (k > n): those cases are skipped.
        problem(
            t,
            &[("a", &ha), ("b", &hb)],
            &[("s", Some(&hs))],
            models,
            limit,
        )
        .ok()
    }
}

/// Checks anonymous(t) ⇒ anonymous(t') for every pair t ≤ t' of the lattice.
fn assert_monotone(p: &Problem) -> Result<(), TestCaseError> {
    let checker = Checker::new(p);
    let mut nodes: Vec<(Vec<u8>, bool)> = Vec::new();
    p.lattice().for_each(|l| nodes.push((l.to_vec(), false)));
    for node in nodes.iter_mut() {
        node.1 = checker.check(&node.0).anonymous;
    }
    for (t, anonymous) in &nodes {
        if !anonymous {
            continue;
        }
        for (u, other) in &nodes {
            if Lattice::le(t, u) {
                prop_assert!(
                    *other,
                    "{:?} is anonymous but its generalization {:?} is not ({})",
                    t,
                    u,
                    p.config()
                        .privacy
                        .iter()
                        .map(|m| m.to_string())
                        .collect::<Vec<_>>()
                        .join(" + ")
                );
            }
        }
    }
    Ok(())
}

fn attribute() -> String {
    "s".into()
}

/// Every model declared monotone under generalization, with random parameters.
fn generalization_monotone_model() -> impl Strategy<Value = PrivacyModel> {
    let share = (1u32..=100).prop_map(|x| x as f64 / 100.0);
    prop_oneof![
        (1u32..5).prop_map(|k| PrivacyModel::KAnonymity { k }),
        (1u32..5).prop_map(|l| PrivacyModel::DistinctLDiversity {
            attribute: attribute(),
            l
        }),
        (100u32..400).prop_map(|l| PrivacyModel::EntropyLDiversity {
            attribute: attribute(),
            l: l as f64 / 100.0,
            estimator: EntropyEstimator::Shannon,
        }),
        (1u32..40, 1u32..4).prop_map(|(c, l)| PrivacyModel::RecursiveCLDiversity {
            attribute: attribute(),
            c: c as f64 / 8.0,
            l,
        }),
        (share.clone(), 0u8..3).prop_map(|(t, d)| PrivacyModel::TCloseness {
            attribute: attribute(),
            t,
            distance: [
                TClosenessDistance::Equal,
                TClosenessDistance::Ordered,
                TClosenessDistance::Hierarchical,
            ][d as usize],
        }),
        (1u32..300).prop_map(|b| PrivacyModel::BasicBetaLikeness {
            attribute: attribute(),
            beta: b as f64 / 100.0,
        }),
        (1u32..300).prop_map(|b| PrivacyModel::EnhancedBetaLikeness {
            attribute: attribute(),
            beta: b as f64 / 100.0,
        }),
        sample_model(),
    ]
}

/// The sample-based models.
fn sample_model() -> impl Strategy<Value = PrivacyModel> {
    let share = (1u32..=100).prop_map(|x| x as f64 / 100.0);
    prop_oneof![
        (
            share.clone(),
            prop::option::of((share.clone(), (0u32..=100).prop_map(|x| x as f64 / 100.0)))
        )
            .prop_map(|(threshold, relaxed)| PrivacyModel::AverageRisk {
                threshold,
                highest: relaxed.map(|r| r.0),
                records_at_risk: relaxed.map(|r| r.1),
            }),
        share.prop_map(|threshold| PrivacyModel::SampleUniqueness { threshold }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn monotone_under_generalization(c in case(), model in generalization_monotone_model()) {
        prop_assert!(model.monotonicity().generalization);
        if let Some(p) = c.build(vec![model], 0.0) {
            assert_monotone(&p)?;
        }
    }

    #[test]
    fn monotone_with_suppression(
        c in case(),
        model in generalization_monotone_model(),
        limit in prop::sample::select(vec![0.1, 0.2, 0.35, 0.5]),
    ) {
        // Only the models declared monotone with suppression (k, distinct-ℓ, average risk,
        // sample uniqueness); the others are known not to be.
        if !model.monotonicity().suppression {
            return Ok(());
        }
        if let Some(p) = c.build(vec![model], limit) {
            assert_monotone(&p)?;
        }
    }
}
