//! Re-identification risk report (prosecutor model) for the input and for a transformation.
//!
//! Suppressed records carry no quasi-identifying information and are reported separately; the
//! class statistics cover the published (non-suppressed) classes.

use crate::check::Evaluation;
use crate::problem::Problem;

/// Risk statistics of one table.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RiskReport {
    /// Published equivalence classes.
    pub classes: usize,
    /// Smallest published class (0 if none).
    pub min_class_size: u32,
    /// Largest published class.
    pub max_class_size: u32,
    /// Published records / published classes.
    pub avg_class_size: f64,
    /// Highest prosecutor risk: 1 / smallest class.
    pub highest_risk: f64,
    /// Average prosecutor risk: classes / published records.
    pub average_risk: f64,
    /// The threshold used for `records_at_risk`.
    pub risk_threshold: f64,
    /// Share of published records whose risk (1/class size) exceeds `risk_threshold`.
    pub records_at_risk: f64,
    /// Records that are unique in the published data (classes of size 1).
    pub sample_uniques: usize,
    /// Suppressed records.
    pub suppressed: usize,
}

impl RiskReport {
    /// Computes the report from class sizes (published classes only).
    pub fn from_class_sizes(
        sizes: impl Iterator<Item = u32>,
        suppressed: usize,
        risk_threshold: f64,
    ) -> RiskReport {
        let (mut classes, mut records, mut min, mut max) = (0usize, 0usize, u32::MAX, 0u32);
        let (mut at_risk, mut uniques) = (0usize, 0usize);
        for s in sizes {
            classes += 1;
            records += s as usize;
            min = min.min(s);
            max = max.max(s);
            if 1.0 / s as f64 > risk_threshold {
                at_risk += s as usize;
            }
            if s == 1 {
                uniques += 1;
            }
        }
        let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        RiskReport {
            classes,
            min_class_size: if classes == 0 { 0 } else { min },
            max_class_size: max,
            avg_class_size: ratio(records, classes),
            highest_risk: if classes == 0 { 0.0 } else { 1.0 / min as f64 },
            average_risk: ratio(classes, records),
            risk_threshold,
            records_at_risk: ratio(at_risk, records),
            sample_uniques: uniques,
            suppressed,
        }
    }

    /// Risks of the original data (classes of the original quasi-identifier values).
    pub fn input(problem: &Problem, risk_threshold: f64) -> RiskReport {
        let counts = &problem.base_groups().counts;
        Self::from_class_sizes(counts.iter().copied(), 0, risk_threshold)
    }

    /// Risks of the anonymized data of an evaluated transformation.
    pub fn output(evaluation: &Evaluation, risk_threshold: f64) -> RiskReport {
        let g = &evaluation.groups;
        let sizes = g
            .counts
            .iter()
            .zip(&evaluation.suppressed)
            .filter(|(_, s)| !**s)
            .map(|(c, _)| *c);
        Self::from_class_sizes(sizes, evaluation.result.suppressed, risk_threshold)
    }
}
