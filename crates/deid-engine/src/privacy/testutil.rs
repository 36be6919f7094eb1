//! Helpers for the privacy model tests: small tables, hierarchies and problems from text.

use crate::config::{ProblemConfig, QuasiIdentifier, SensitiveAttribute};
use crate::data::Table;
use crate::error::Result;
use crate::hierarchy::Hierarchy;
use crate::{Checker, Problem};

use super::{EntropyEstimator, PrivacyModel, TClosenessDistance};

/// A table from `;`-separated rows.
pub(crate) fn table(header: &[&str], rows: &[&str]) -> Table {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.split(';').map(String::from).collect())
        .collect();
    Table::from_rows(header, &rows).expect("valid test table")
}

/// A hierarchy from `;`-separated rows separated by newlines.
pub(crate) fn hierarchy(text: &str, column: &str) -> Hierarchy {
    let rows: Vec<Vec<String>> = text
        .lines()
        .map(|l| l.split(';').map(String::from).collect())
        .collect();
    Hierarchy::from_rows(rows, column).expect("valid test hierarchy")
}

/// A problem with the given quasi-identifiers (column, hierarchy text), sensitive attributes
/// (column, optional hierarchy text), models and suppression limit.
pub(crate) fn problem(
    table: Table,
    qis: &[(&str, &str)],
    sensitive: &[(&str, Option<&str>)],
    privacy: Vec<PrivacyModel>,
    suppression_limit: f64,
) -> Result<Problem> {
    problem_with_population(table, qis, sensitive, privacy, suppression_limit, None)
}

/// [`problem`] with a population model.
pub(crate) fn problem_with_population(
    table: Table,
    qis: &[(&str, &str)],
    sensitive: &[(&str, Option<&str>)],
    privacy: Vec<PrivacyModel>,
    suppression_limit: f64,
    population: Option<crate::population::PopulationModel>,
) -> Result<Problem> {
    let config = ProblemConfig {
        quasi_identifiers: qis
            .iter()
            .map(|(c, h)| QuasiIdentifier::new(*c, hierarchy(h, c)))
            .collect(),
        sensitive: sensitive
            .iter()
            .map(|(c, h)| SensitiveAttribute {
                column: c.to_string(),
                hierarchy: h.map(|h| hierarchy(h, c)),
            })
            .collect(),
        privacy,
        suppression_limit,
        population,
        ..ProblemConfig::default()
    };
    Problem::new(table, config)
}

/// A table with one quasi-identifier `g` and one sensitive attribute `s`: class `c{i}` holds the
/// sensitive values `classes[i]`. Records are interleaved (round robin over the classes) so that
/// class order and row order differ from value order.
pub(crate) fn class_table(classes: &[&[&str]]) -> Table {
    let mut rows = Vec::new();
    let longest = classes.iter().map(|c| c.len()).max().unwrap_or(0);
    for j in 0..longest {
        for (i, class) in classes.iter().enumerate() {
            if let Some(v) = class.get(j) {
                rows.push(format!("c{i};{v}"));
            }
        }
    }
    let refs: Vec<&str> = rows.iter().map(String::as_str).collect();
    table(&["g", "s"], &refs)
}

/// The two-level hierarchy `c{i} → *` for [`class_table`].
pub(crate) fn class_hierarchy(classes: usize) -> String {
    (0..classes)
        .map(|i| format!("c{i};*"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Builds the [`class_table`] problem with `models` (suppression limit 1) and returns, for every
/// class `c{i}`, whether it is suppressed at level 0.
pub(crate) fn suppressed_classes(
    classes: &[&[&str]],
    sensitive_hierarchy: Option<&str>,
    models: Vec<PrivacyModel>,
) -> Vec<bool> {
    let p = problem(
        class_table(classes),
        &[("g", &class_hierarchy(classes.len()))],
        &[("s", sensitive_hierarchy)],
        models,
        1.0,
    )
    .expect("valid problem");
    suppressed_by_label(&p, &[0])
        .into_iter()
        .map(|(_, s)| s)
        .collect()
}

/// (label of the first quasi-identifier, suppressed?) for every class of `levels`, sorted by label.
pub(crate) fn suppressed_by_label(p: &Problem, levels: &[u8]) -> Vec<(String, bool)> {
    let e = Checker::new(p).evaluate(levels);
    let q = p.quasi_identifiers().len();
    let h = &p.hierarchies()[0];
    let mut out: Vec<(String, bool)> = (0..e.groups.len())
        .map(|c| {
            let code = e.groups.codes[c * q];
            (
                h.label(
                    levels[0] as usize,
                    code,
                    p.table().column(p.qi_columns()[0]),
                )
                .to_string(),
                e.suppressed[c],
            )
        })
        .collect();
    out.sort_by(|a, b| natural(&a.0).cmp(&natural(&b.0)));
    out
}

/// Sort key putting `c10` after `c9`.
fn natural(s: &str) -> (usize, &str) {
    (s.len(), s)
}

/// One model of every kind with valid parameters (attribute `s`).
pub(crate) fn sample_models() -> Vec<PrivacyModel> {
    let s = || "s".to_string();
    vec![
        PrivacyModel::KAnonymity { k: 3 },
        PrivacyModel::DistinctLDiversity {
            attribute: s(),
            l: 2,
        },
        PrivacyModel::EntropyLDiversity {
            attribute: s(),
            l: 2.5,
            estimator: EntropyEstimator::Shannon,
        },
        PrivacyModel::EntropyLDiversity {
            attribute: s(),
            l: 2.0,
            estimator: EntropyEstimator::Grassberger,
        },
        PrivacyModel::RecursiveCLDiversity {
            attribute: s(),
            c: 4.0,
            l: 3,
        },
        PrivacyModel::TCloseness {
            attribute: s(),
            t: 0.2,
            distance: TClosenessDistance::Equal,
        },
        PrivacyModel::TCloseness {
            attribute: s(),
            t: 0.25,
            distance: TClosenessDistance::Ordered,
        },
        PrivacyModel::TCloseness {
            attribute: s(),
            t: 0.3,
            distance: TClosenessDistance::Hierarchical,
        },
        PrivacyModel::DeltaDisclosure {
            attribute: s(),
            delta: 1.2,
        },
        PrivacyModel::BasicBetaLikeness {
            attribute: s(),
            beta: 1.0,
        },
        PrivacyModel::EnhancedBetaLikeness {
            attribute: s(),
            beta: 0.5,
        },
        PrivacyModel::AverageRisk {
            threshold: 0.1,
            highest: None,
            records_at_risk: None,
        },
        PrivacyModel::AverageRisk {
            threshold: 0.1,
            highest: Some(0.2),
            records_at_risk: Some(0.05),
        },
        PrivacyModel::SampleUniqueness { threshold: 0.01 },
        PrivacyModel::PopulationUniqueness {
            threshold: 0.01,
            estimator: crate::population::Estimator::Pitman,
        },
    ]
}
