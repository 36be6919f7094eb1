//! Re-identification risks of the input and of a transformation (`docs/definitions.md` §6):
//! prosecutor statistics of the published classes (the original report), the attacker models
//! after El Emam (prosecutor, journalist, marketer), the risk distribution, sample and — with a
//! population model — population uniqueness by every estimator, and for the input the distinction
//! and separation of the quasi-identifiers and their subsets.
//!
//! Suppressed records carry no quasi-identifying information and are reported separately; every
//! statistic covers the published (non-suppressed) classes.

mod combinations;

use crate::cancel::CancelFlag;
use crate::check::Evaluation;
use crate::population::{ClassSizes, SolverConfig, UniquenessEstimates};
use crate::problem::Problem;
use combinations::GroupStats;

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
    /// Share of the published records that are sample uniques.
    pub sample_uniqueness: f64,
    /// Prosecutor, journalist and marketer risk.
    pub attacker_models: AttackerModels,
    /// Share of the published records per risk bucket (ARX's 24 buckets).
    pub distribution: Vec<RiskBucket>,
    /// Estimated population uniqueness; absent without a population model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub population_uniqueness: Option<PopulationUniqueness>,
    /// Distinction and separation of the quasi-identifiers and their combinations (input only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quasi_identifiers: Option<Vec<QuasiIdentifierRisk>>,
}

/// The risks of one attacker model.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AttackerRisk {
    /// Share of the published records whose risk exceeds the report's threshold.
    pub records_at_risk: f64,
    /// The highest risk of a record.
    pub highest_risk: f64,
    /// The lowest risk of a record.
    pub lowest_risk: f64,
    /// The expected share of records re-identified (success rate).
    pub success_rate: f64,
}

/// Attacker models after El Emam (ARX's `RiskModelSampleSummary`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AttackerModels {
    /// The attacker knows the target is in the data: risk 1/|EC|.
    pub prosecutor: AttackerRisk,
    /// The attacker matches against a population register: risk 1/F (F = the class's size in the
    /// population). Without a research subset the population classes are the published classes
    /// (as in ARX), so this equals the prosecutor risk — an upper bound.
    pub journalist: AttackerRisk,
    /// The attacker re-identifies as many records as possible: expected share (1/n)·Σ f/F; without
    /// a research subset classes / records.
    pub marketer_risk: f64,
    /// Where the population class sizes F come from: `published_classes` (no research subset)
    /// or `population_table` (the classes of the whole table, of which a research subset is
    /// released).
    pub population_classes: &'static str,
}

/// One bucket (lower, upper] of the risk distribution.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RiskBucket {
    /// Upper bound of the risk (inclusive).
    pub upper: f64,
    /// Share of the published records whose risk 1/|EC| falls in the bucket.
    pub records: f64,
    /// Share of the published records with a risk up to `upper`.
    pub cumulative: f64,
}

/// One estimator's population uniqueness.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EstimatorResult {
    /// Estimated population uniques / population size (0 when not available).
    pub share: f64,
    /// Estimated number of population uniques (0 when not available).
    pub uniques: f64,
    /// False if the estimator failed (its solver did not converge or the value is out of range)
    /// although there are sample uniques.
    pub available: bool,
}

/// Estimated population uniqueness (`docs/definitions.md` §6.2).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PopulationUniqueness {
    /// The population size N.
    pub population: u64,
    /// Published records / N.
    pub sampling_fraction: f64,
    /// Pitman.
    pub pitman: EstimatorResult,
    /// Zayatz.
    pub zayatz: EstimatorResult,
    /// SNB.
    pub snb: EstimatorResult,
    /// Dankar et al.'s rule (with the Zayatz fallback).
    pub dankar: EstimatorResult,
    /// The estimator Dankar's rule chose (`dankar` when there are no sample uniques).
    pub dankar_model: &'static str,
}

/// Distinction and separation of one set of quasi-identifiers (Motwani & Xu).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QuasiIdentifierRisk {
    /// The quasi-identifiers, in column order.
    pub attributes: Vec<String>,
    /// Distinct combinations / records.
    pub distinction: f64,
    /// Share of the pairs of records that differ on the combination.
    pub separation: f64,
}

/// Upper bounds of ARX's 24 risk buckets.
pub const RISK_BUCKETS: [f64; 24] = [
    1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 0.001, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1,
    0.125, 0.143, 0.167, 0.2, 0.25, 0.334, 0.5, 1.0,
];

/// Quasi-identifier sets up to this size get every combination (2^q − 1 sets); larger sets get
/// the single attributes and the whole set (ARX's GUI limit is 10).
pub const MAX_COMBINATION_QIS: usize = 10;

/// At most this many (combination × distinct input tuple) steps for every combination; above it
/// only the single attributes and the whole set are reported (a report must stay cheap on
/// millions of rows).
pub const MAX_COMBINATION_WORK: usize = 20_000_000;

/// Which combinations of quasi-identifiers the risk report gives distinction and separation for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QiCombinations {
    /// Every combination of up to [`MAX_COMBINATION_QIS`] quasi-identifiers while that costs at
    /// most [`MAX_COMBINATION_WORK`] steps, else the single attributes and the whole set.
    #[default]
    Auto,
    /// Every combination of up to [`MAX_COMBINATION_QIS`] quasi-identifiers, whatever it costs
    /// (the steps grow with the distinct input tuples × 2^q; the analysis stays cancellable).
    All,
    /// Each quasi-identifier alone and all of them together (q + 1 sets, from counts the problem
    /// already holds): what the reports of anonymizations and evaluations give.
    Singles,
}

impl RiskReport {
    /// Computes the report from class sizes (published classes only), without population
    /// uniqueness and quasi-identifier statistics.
    pub fn from_class_sizes(
        sizes: impl Iterator<Item = u32>,
        suppressed: usize,
        risk_threshold: f64,
    ) -> RiskReport {
        let sizes: Vec<u32> = sizes.collect();
        let (mut classes, mut records, mut min, mut max) = (0usize, 0usize, u32::MAX, 0u32);
        let (mut at_risk, mut uniques) = (0usize, 0usize);
        for &s in &sizes {
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
        let highest = if classes == 0 { 0.0 } else { 1.0 / min as f64 };
        let prosecutor = AttackerRisk {
            records_at_risk: ratio(at_risk, records),
            highest_risk: highest,
            lowest_risk: if classes == 0 { 0.0 } else { 1.0 / max as f64 },
            success_rate: ratio(classes, records),
        };
        RiskReport {
            classes,
            min_class_size: if classes == 0 { 0 } else { min },
            max_class_size: max,
            avg_class_size: ratio(records, classes),
            highest_risk: highest,
            average_risk: ratio(classes, records),
            risk_threshold,
            records_at_risk: ratio(at_risk, records),
            sample_uniques: uniques,
            suppressed,
            sample_uniqueness: ratio(uniques, records),
            attacker_models: AttackerModels {
                journalist: prosecutor.clone(),
                marketer_risk: ratio(classes, records),
                prosecutor,
                population_classes: "published_classes",
            },
            distribution: distribution(&sizes, records),
            population_uniqueness: None,
            quasi_identifiers: None,
        }
    }

    /// Replaces the journalist and marketer risks with those against a population table (ARX's
    /// `RiskModelSampleSummary` with a research subset): `classes` gives every published class's
    /// (released records f, records of the whole table F). Journalist: records at risk
    /// Σ_{1/F > t} f / n, highest 1/min F, lowest 1/max F, success rate
    /// max(u / Σ F, (1/n)·Σ f/F); marketer (1/n)·Σ f/F.
    pub fn with_population_table(mut self, classes: &[(u32, u32)]) -> RiskReport {
        let n: u64 = classes.iter().map(|&(f, _)| u64::from(f)).sum();
        let total: u64 = classes.iter().map(|&(_, big)| u64::from(big)).sum();
        let (mut min, mut max, mut at_risk, mut expected) = (u32::MAX, 0u32, 0u64, 0.0f64);
        for &(f, big) in classes {
            min = min.min(big);
            max = max.max(big);
            if 1.0 / big as f64 > self.risk_threshold {
                at_risk += u64::from(f);
            }
            expected += f as f64 / big as f64;
        }
        let (journalist, marketer) = if classes.is_empty() || n == 0 {
            (
                AttackerRisk {
                    records_at_risk: 0.0,
                    highest_risk: 0.0,
                    lowest_risk: 0.0,
                    success_rate: 0.0,
                },
                0.0,
            )
        } else {
            let marketer = expected / n as f64;
            (
                AttackerRisk {
                    records_at_risk: at_risk as f64 / n as f64,
                    highest_risk: 1.0 / min as f64,
                    lowest_risk: 1.0 / max as f64,
                    success_rate: (classes.len() as f64 / total as f64).max(marketer),
                },
                marketer,
            )
        };
        self.attacker_models.journalist = journalist;
        self.attacker_models.marketer_risk = marketer;
        self.attacker_models.population_classes = "population_table";
        self
    }

    /// Adds the population uniqueness of these classes for a population of `population`.
    pub fn with_population(mut self, sizes: &ClassSizes, population: u64) -> RiskReport {
        self.population_uniqueness = Some(population_uniqueness(sizes, population));
        self
    }

    /// Risks of the original data (classes of the original quasi-identifier values), with the
    /// population uniqueness if the problem has a population model and the distinction and
    /// separation of the quasi-identifiers.
    pub fn input(problem: &Problem, risk_threshold: f64) -> RiskReport {
        Self::input_cancellable(problem, risk_threshold, &CancelFlag::new())
            .expect("a flag nobody raises")
    }

    /// [`RiskReport::input`] that stops when `cancel` is raised (checked between the
    /// statistics and between the attribute combinations of the QI risks): `None` then.
    pub fn input_cancellable(
        problem: &Problem,
        risk_threshold: f64,
        cancel: &CancelFlag,
    ) -> Option<RiskReport> {
        Self::input_with(problem, risk_threshold, QiCombinations::Auto, cancel)
    }

    /// [`RiskReport::input_cancellable`] with the quasi-identifier combinations to report.
    pub fn input_with(
        problem: &Problem,
        risk_threshold: f64,
        combinations: QiCombinations,
        cancel: &CancelFlag,
    ) -> Option<RiskReport> {
        let base = problem.base_groups();
        // With a research subset, base groups of unreleased records only are no classes.
        let counts = || base.counts.iter().copied().filter(|&c| c > 0);
        let mut report = Self::from_class_sizes(counts(), 0, risk_threshold);
        if !base.pcounts.is_empty() {
            report =
                report.with_population_table(&released_pairs(&base.counts, &base.pcounts, None));
        }
        if let Some(n) = problem.population() {
            let h = ClassSizes::from_sizes(counts().map(u64::from));
            report = report.with_population(&h, n);
        }
        if cancel.is_cancelled() {
            return None;
        }
        report.quasi_identifiers = Some(qi_risks(problem, combinations, cancel)?);
        Some(report)
    }

    /// Risks of the anonymized data of an evaluated transformation.
    pub fn output(problem: &Problem, evaluation: &Evaluation, risk_threshold: f64) -> RiskReport {
        let g = &evaluation.groups;
        let sizes = g
            .counts
            .iter()
            .zip(&evaluation.suppressed)
            .filter(|(_, s)| !**s)
            .map(|(c, _)| *c);
        let mut report =
            Self::from_class_sizes(sizes.clone(), evaluation.result.suppressed, risk_threshold);
        if !g.pcounts.is_empty() {
            report = report.with_population_table(&released_pairs(
                &g.counts,
                &g.pcounts,
                Some(&evaluation.suppressed),
            ));
        }
        match problem.population() {
            Some(n) => report.with_population(&ClassSizes::from_sizes(sizes.map(u64::from)), n),
            None => report,
        }
    }
}

/// (released records, records of the whole table) of every class with released records that
/// is not suppressed.
fn released_pairs(counts: &[u32], pcounts: &[u32], suppressed: Option<&[bool]>) -> Vec<(u32, u32)> {
    counts
        .iter()
        .zip(pcounts)
        .enumerate()
        .filter(|&(c, (&f, _))| f > 0 && !suppressed.is_some_and(|s| s[c]))
        .map(|(_, (&f, &big))| (f, big))
        .collect()
}

/// ARX's risk distribution: every class's records go to the bucket of its risk 1/|EC| (the first
/// bucket whose upper bound is at least the risk); shares of the published records.
fn distribution(sizes: &[u32], records: usize) -> Vec<RiskBucket> {
    let mut shares = [0.0f64; 24];
    if records > 0 {
        for &s in sizes {
            let r = 1.0 / s as f64;
            let i = RISK_BUCKETS.partition_point(|&upper| upper < r);
            shares[i.min(23)] += s as f64 / records as f64;
        }
    }
    let mut cumulative = 0.0;
    RISK_BUCKETS
        .iter()
        .zip(shares)
        .map(|(&upper, share)| {
            cumulative = (cumulative + share).min(1.0);
            RiskBucket {
                upper,
                records: share,
                cumulative,
            }
        })
        .collect()
}

/// Every estimator on `h` for a population of `population`.
pub fn population_uniqueness(h: &ClassSizes, population: u64) -> PopulationUniqueness {
    let e = UniquenessEstimates::compute(h, population, &SolverConfig::default());
    let n = population as f64;
    let result = |u: f64| {
        let uniques = UniquenessEstimates::reported(u);
        EstimatorResult {
            share: uniques / n,
            uniques,
            available: UniquenessEstimates::available(u, h),
        }
    };
    let dankar_value = e.dankar.uniques.unwrap_or(f64::NAN);
    PopulationUniqueness {
        population,
        sampling_fraction: h.records() as f64 / n,
        pitman: result(e.pitman),
        zayatz: result(e.zayatz),
        snb: result(e.snb),
        dankar: result(dankar_value),
        dankar_model: e.dankar.model.name(),
    }
}

/// Distinction and separation of every non-empty set of quasi-identifiers (all 2^q − 1 of them up
/// to [`MAX_COMBINATION_QIS`] and [`MAX_COMBINATION_WORK`], else the single ones and the whole
/// set), sorted by (size, distinction, separation, names).
pub fn quasi_identifier_risks(problem: &Problem) -> Vec<QuasiIdentifierRisk> {
    qi_risks(problem, QiCombinations::Auto, &CancelFlag::new()).expect("a flag nobody raises")
}

/// [`quasi_identifier_risks`], `None` once `cancel` is raised (checked before each combination).
fn qi_risks(
    problem: &Problem,
    combinations: QiCombinations,
    cancel: &CancelFlag,
) -> Option<Vec<QuasiIdentifierRisk>> {
    let base = problem.base_groups();
    let q = problem.quasi_identifiers().len();
    let names: Vec<&str> = problem
        .quasi_identifiers()
        .iter()
        .map(|x| x.column.as_str())
        .collect();
    let all = q <= MAX_COMBINATION_QIS
        && match combinations {
            QiCombinations::All => true,
            QiCombinations::Auto => {
                base.counts.len().saturating_mul((1usize << q) - 1) <= MAX_COMBINATION_WORK
            }
            QiCombinations::Singles => false,
        };
    let sets: Vec<Vec<usize>> = if all {
        (1u32..(1 << q))
            .map(|mask| (0..q).filter(|i| mask & (1 << i) != 0).collect())
            .collect()
    } else {
        let whole = (q > 1).then(|| (0..q).collect());
        (0..q).map(|i| vec![i]).chain(whole).collect()
    };
    let n: u64 = base.counts.iter().map(|&c| c as u64).sum();
    // The combinations between one attribute and the whole set, by partition refinement.
    let combined = if all && q > 2 {
        combinations::every_combination(&base.codes, &base.counts, q, cancel)?
    } else {
        Vec::new()
    };
    let mut out: Vec<QuasiIdentifierRisk> = sets
        .into_iter()
        .map(|set| {
            if cancel.is_cancelled() {
                return None;
            }
            // A column's value counts for one attribute, the base groups for the whole set.
            let stats = if set.len() == 1 {
                let counts = problem.qi_value_counts(set[0]);
                GroupStats::of(counts.iter().filter(|&&c| c > 0).map(|&c| c as u64))
            } else if set.len() == q {
                GroupStats::of(base.counts.iter().filter(|&&c| c > 0).map(|&c| c as u64))
            } else {
                combined[set.iter().map(|&i| 1usize << i).sum::<usize>()]
            };
            let pairs = |m: u64| (m as f64) * (m as f64 - 1.0) / 2.0;
            Some(QuasiIdentifierRisk {
                attributes: set.iter().map(|&i| names[i].to_string()).collect(),
                distinction: if n == 0 {
                    0.0
                } else {
                    stats.groups as f64 / n as f64
                },
                separation: if n <= 1 {
                    0.0
                } else {
                    1.0 - stats.same_pairs as f64 / pairs(n)
                },
            })
        })
        .collect::<Option<_>>()?;
    out.sort_by(|a, b| {
        a.attributes
            .len()
            .cmp(&b.attributes.len())
            .then(a.distinction.total_cmp(&b.distinction))
            .then(a.separation.total_cmp(&b.separation))
            .then_with(|| a.attributes.join(", ").cmp(&b.attributes.join(", ")))
    });
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journalist_and_marketer_against_a_population_table_by_hand() {
        // Released (f, F): (2, 5) and (1, 3); n = 3, threshold 0.25.
        let r = RiskReport::from_class_sizes([2u32, 1].into_iter(), 0, 0.25)
            .with_population_table(&[(2, 5), (1, 3)]);
        let j = &r.attacker_models.journalist;
        assert_eq!(j.highest_risk, 1.0 / 3.0);
        assert_eq!(j.lowest_risk, 0.2);
        assert_eq!(j.records_at_risk, 1.0 / 3.0);
        let marketer = (2.0 / 5.0 + 1.0 / 3.0) / 3.0;
        assert!((r.attacker_models.marketer_risk - marketer).abs() < 1e-15);
        // max(u / ΣF, marketer) = max(2/8, 0.244…).
        assert_eq!(j.success_rate, 0.25);
        assert_eq!(r.attacker_models.population_classes, "population_table");
        // The prosecutor keeps the released classes.
        assert_eq!(r.attacker_models.prosecutor.highest_risk, 1.0);
    }

    #[test]
    fn attacker_models_and_distribution_by_hand() {
        // Sizes 1, 2, 2, 5 (n = 10), threshold 0.3: at risk 1 + 2 + 2 = 5 records.
        let r = RiskReport::from_class_sizes([1u32, 2, 2, 5].into_iter(), 3, 0.3);
        let p = &r.attacker_models.prosecutor;
        assert_eq!(p.records_at_risk, 0.5);
        assert_eq!(p.highest_risk, 1.0);
        assert_eq!(p.lowest_risk, 0.2);
        assert_eq!(p.success_rate, 0.4);
        assert_eq!(r.attacker_models.journalist, *p);
        assert_eq!(r.attacker_models.marketer_risk, 0.4);
        assert_eq!(r.sample_uniqueness, 0.1);
        // Buckets: risk 1 → (0.5, 1]; 0.5 → (0.334, 0.5]; 0.2 → (0.167, 0.2].
        let share = |upper: f64| {
            r.distribution
                .iter()
                .find(|b| b.upper == upper)
                .unwrap()
                .records
        };
        assert_eq!(share(1.0), 0.1);
        assert_eq!(share(0.5), 0.4);
        assert_eq!(share(0.2), 0.5);
        assert_eq!(r.distribution.len(), 24);
        assert_eq!(r.distribution[23].cumulative, 1.0);
        assert!((r.distribution[19].cumulative - 0.5).abs() < 1e-15);
        // Nothing published: all zero.
        let e = RiskReport::from_class_sizes(std::iter::empty(), 4, 0.2);
        assert_eq!(e.attacker_models.prosecutor.highest_risk, 0.0);
        assert!(e.distribution.iter().all(|b| b.records == 0.0));
    }

    #[test]
    fn distinction_and_separation_by_hand() {
        use crate::{Hierarchy, PrivacyModel, ProblemConfig, QuasiIdentifier, Table};
        let rows: Vec<Vec<String>> = [("x", "1"), ("x", "1"), ("y", "1"), ("y", "2")]
            .iter()
            .map(|(a, b)| vec![a.to_string(), b.to_string()])
            .collect();
        let table = Table::from_rows(&["a", "b"], &rows).unwrap();
        let h = |values: &[&str], c: &str| {
            Hierarchy::from_rows(
                values
                    .iter()
                    .map(|v| vec![v.to_string(), "*".into()])
                    .collect(),
                c,
            )
            .unwrap()
        };
        let config = ProblemConfig {
            quasi_identifiers: vec![
                QuasiIdentifier::new("a", h(&["x", "y"], "a")),
                QuasiIdentifier::new("b", h(&["1", "2"], "b")),
            ],
            privacy: vec![PrivacyModel::KAnonymity { k: 1 }],
            ..Default::default()
        };
        let problem = Problem::new(table, config).unwrap();
        let r = quasi_identifier_risks(&problem);
        let got: Vec<(String, f64, f64)> = r
            .iter()
            .map(|x| (x.attributes.join(","), x.distinction, x.separation))
            .collect();
        // {b}: 1:3, 2:1 → 2/4, 1 − 3/6; {a}: 2, 2 → 2/4, 1 − 2/6; {a,b}: 2, 1, 1 → 3/4, 1 − 1/6.
        let expected = [
            ("b", 0.5, 0.5),
            ("a", 0.5, 1.0 - 2.0 / 6.0),
            ("a,b", 0.75, 1.0 - 1.0 / 6.0),
        ];
        assert_eq!(got.len(), 3);
        for ((name, d, s), (en, ed, es)) in got.iter().zip(expected) {
            assert_eq!(name, en);
            assert!((d - ed).abs() < 1e-15 && (s - es).abs() < 1e-15, "{name}");
        }
        // Without a population model the input report has no population uniqueness.
        let input = RiskReport::input(&problem, 0.2);
        assert!(input.population_uniqueness.is_none());
        assert_eq!(input.quasi_identifiers.unwrap().len(), 3);
        // A raised cancel flag stops the analysis.
        let cancel = CancelFlag::new();
        cancel.cancel();
        assert!(RiskReport::input_cancellable(&problem, 0.2, &cancel).is_none());
        assert!(qi_risks(&problem, QiCombinations::Auto, &cancel).is_none());
    }

    #[test]
    fn population_uniqueness_reports_every_estimator() {
        // Zayatz at f = 1 is the sample-uniques share.
        let h = ClassSizes::from_sizes([1u64, 1, 2, 3, 3, 5]);
        let p = population_uniqueness(&h, h.records());
        assert!((p.zayatz.share - 2.0 / 15.0).abs() < 1e-12);
        assert_eq!(p.sampling_fraction, 1.0);
        assert!(p.zayatz.available);
        // No sample uniques: everything 0 and available, Dankar's model "dankar".
        let h = ClassSizes::from_sizes([2u64, 3, 3]);
        let p = population_uniqueness(&h, 1000);
        assert_eq!(p.dankar_model, "dankar");
        for e in [&p.pitman, &p.zayatz, &p.snb, &p.dankar] {
            assert_eq!((e.share, e.available), (0.0, true));
        }
    }
}
