//! Quality measured on an output's records (ARX's post-hoc measures, `docs/definitions.md`
//! §4.7): works for any [`Recoding`] — one global transformation or the mixed output of local
//! generalization — so both compare directly.
//!
//! The output's classes are the records with equal generalized *labels* (what a reader of the
//! CSV sees; two steps may produce the same labels at different levels). Suppressed cells count
//! as fully generalized. Every measure reports its raw value and `loss` = (raw − min)/(max − min)
//! clipped to [0, 1] with the bounds below (`quality` = 1 − loss; higher is better):
//!
//! | measure | raw value | min | max |
//! |---|---|---|---|
//! | granularity | mean over cells of the domain share of the output value | 1/domain size | 1 |
//! | generalization intensity | mean over cells of level/(height − 1) | 0 | 1 |
//! | non-uniform entropy | Σ over cells of −log2 P(input value ∣ output value) | 0 | Σ log2(n / f(input value)) |
//! | discernibility | Σ published class size² + n · suppressed | the same for the input | n² |
//! | AECS | n / classes (the suppressed block counts as one class) | the same for the input | n |
//! | ambiguity | Σ over records of ∏ leaves under each output value | n | n · ∏ domain sizes |
//!
//! Microaggregated attributes have a measure of their own (`microaggregation`: the share of the
//! column's range each record's class spans), the others cover the generalized attributes.
//!
//! Column-oriented measures (granularity, intensity, entropy) average the attributes' losses
//! arithmetically. P(x ∣ y) is the share of input value x among the cells whose output is y, so
//! a value generalized differently in different steps is handled exactly; for one global
//! transformation it equals ARX's f(x)/f(y).

use std::collections::HashMap;

use crate::output::{OutputClasses, Recoding, class_distributions};
use crate::problem::Problem;

/// The hasher of the packed (value, label) keys.
type FastHash = crate::hash::BuildCodeHasher;

/// Base groups per chunk of [`output_quality_of`]'s sums.
const SUM_CHUNK: usize = 1 << 16;

/// Counts of (input code, output label) pairs of one attribute: per input code the first label
/// seen, in a dense array (for one global transformation the only one but the marker), and the
/// other pairs in a map.
#[derive(Debug, Clone)]
struct JointCounts {
    /// Per input code: (label, records); `u32::MAX`: none yet.
    first: Vec<(u32, u64)>,
    /// (input code << 32 | label) → records, for labels other than the first.
    other: HashMap<u64, u64, FastHash>,
}

impl JointCounts {
    fn new(domain: usize) -> JointCounts {
        JointCounts {
            first: vec![(u32::MAX, 0); domain],
            other: HashMap::default(),
        }
    }

    fn add(&mut self, input: u32, label: u32, records: u64) {
        match self.first.get_mut(input as usize) {
            Some(slot) if slot.0 == label => slot.1 += records,
            Some(slot) if slot.0 == u32::MAX => *slot = (label, records),
            _ => {
                *self
                    .other
                    .entry((input as u64) << 32 | label as u64)
                    .or_default() += records
            }
        }
    }

    /// Calls `f(input, label, records)` for every pair.
    fn for_each(&self, mut f: impl FnMut(u32, u32, u64)) {
        for (input, &(label, records)) in self.first.iter().enumerate() {
            if label != u32::MAX {
                f(input as u32, label, records);
            }
        }
        for (&pair, &records) in &self.other {
            f((pair >> 32) as u32, (pair & 0xffff_ffff) as u32, records);
        }
    }
}

/// The sums of [`output_quality_of`] over some base groups.
struct Sums {
    suppressed: usize,
    share_sum: Vec<f64>,
    intensity_sum: Vec<f64>,
    ambiguity: f64,
    joint: Vec<JointCounts>,
    out_counts: Vec<Vec<u64>>,
}

impl Sums {
    fn new(problem: &Problem, classes: &OutputClasses) -> Sums {
        let q = problem.qi_columns().len();
        Sums {
            suppressed: 0,
            share_sum: vec![0.0; q],
            intensity_sum: vec![0.0; q],
            ambiguity: 0.0,
            joint: (0..q)
                .map(|i| JointCounts::new(problem.qi_value_counts(i).len()))
                .collect(),
            out_counts: classes.label_counts.iter().map(|&n| vec![0; n]).collect(),
        }
    }

    /// Adds base group `g`.
    fn add<R: Recoding + ?Sized>(
        &mut self,
        problem: &Problem,
        recoding: &R,
        classes: &OutputClasses,
        g: usize,
    ) {
        let base = problem.base_groups();
        let hierarchies = problem.hierarchies();
        let q = hierarchies.len();
        let records = base.counts[g] as u64;
        if records == 0 {
            // Unreleased records only (research subset).
            return;
        }
        let count = records as f64;
        let input = &base.codes[g * q..(g + 1) * q];
        let recoded = recoding.recode(g);
        if recoded.is_none() {
            self.suppressed += records as usize;
        }
        let mut product = 1.0f64;
        for (i, h) in hierarchies.iter().enumerate() {
            let top = (h.height() - 1) as f64;
            let label = match recoded {
                Some((levels, codes)) => {
                    let (level, code) = (levels[i] as usize, codes[i]);
                    self.share_sum[i] += count * h.share(level, code);
                    if top > 0.0 {
                        self.intensity_sum[i] += count * level as f64 / top;
                    }
                    product *= h.leaves(level, code) as f64;
                    classes.label(i, level, code)
                }
                None => {
                    self.share_sum[i] += count;
                    self.intensity_sum[i] += count;
                    product *= h.domain_size as f64;
                    classes.suppressed_labels[i]
                }
            };
            self.joint[i].add(input[i], label, records);
            self.out_counts[i][label as usize] += records;
        }
        self.ambiguity += count * product;
    }

    /// `self` followed by `next`.
    fn merge(mut self, next: Sums) -> Sums {
        self.suppressed += next.suppressed;
        self.ambiguity += next.ambiguity;
        for i in 0..self.share_sum.len() {
            self.share_sum[i] += next.share_sum[i];
            self.intensity_sum[i] += next.intensity_sum[i];
            let joint = &mut self.joint[i];
            next.joint[i].for_each(|x, y, c| joint.add(x, y, c));
            for (a, b) in self.out_counts[i].iter_mut().zip(&next.out_counts[i]) {
                *a += b;
            }
        }
        self
    }
}

/// One post-hoc measure.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Measure {
    /// The measure's raw value (see the module table).
    pub value: f64,
    /// Normalized loss in [0, 1] (lower is better).
    pub loss: f64,
    /// 1 − loss.
    pub quality: f64,
    /// Per quasi-identifier loss, in the problem's order (column-oriented measures only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Vec<f64>>,
}

impl Measure {
    fn new(value: f64, min: f64, max: f64) -> Measure {
        let loss = normalized(value, min, max);
        Measure {
            value,
            loss,
            quality: 1.0 - loss,
            attributes: None,
        }
    }

    /// Arithmetic mean of per-attribute measures (`(value, min, max)` each).
    fn columns(parts: &[(f64, f64, f64)]) -> Measure {
        let losses: Vec<f64> = parts.iter().map(|&(v, a, b)| normalized(v, a, b)).collect();
        let d = parts.len().max(1) as f64;
        let loss = losses.iter().sum::<f64>() / d;
        Measure {
            value: parts.iter().map(|p| p.0).sum::<f64>() / d,
            loss,
            quality: 1.0 - loss,
            attributes: Some(losses),
        }
    }
}

fn normalized(value: f64, min: f64, max: f64) -> f64 {
    if max - min <= f64::EPSILON * max.abs().max(1.0) {
        0.0
    } else {
        ((value - min) / (max - min)).clamp(0.0, 1.0)
    }
}

/// The post-hoc quality of one output.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OutputQuality {
    /// Records of the output (suppressed ones included).
    pub records: usize,
    /// Suppressed records.
    pub suppressed: usize,
    /// Published classes (records with equal output labels).
    pub classes: usize,
    /// Granularity (ARX's column-oriented Loss).
    pub granularity: Measure,
    /// Generalization intensity (ARX's column-oriented Precision).
    pub generalization_intensity: Measure,
    /// Non-uniform entropy.
    pub non_uniform_entropy: Measure,
    /// Discernibility.
    pub discernibility: Measure,
    /// Average equivalence class size.
    pub aecs: Measure,
    /// Ambiguity.
    pub ambiguity: Measure,
    /// Microaggregated attributes (absent without them): per record the share of the column's
    /// range its class's values span (suppressed records 1), averaged over the records and
    /// then the attributes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub microaggregation: Option<Measure>,
}

/// Measures the output `recoding` makes of `problem` (the whole problem).
pub fn output_quality<R: Recoding + ?Sized>(problem: &Problem, recoding: &R) -> OutputQuality {
    output_quality_of(problem, recoding, &OutputClasses::of(problem, recoding))
}

/// [`output_quality`] with the output's classes already grouped (`OutputClasses::of` the same
/// recoding): the sums over the base groups, then each measure from them.
pub fn output_quality_of<R: Recoding + ?Sized>(
    problem: &Problem,
    recoding: &R,
    classes: &OutputClasses,
) -> OutputQuality {
    let base = problem.base_groups();
    let n = problem.rows() as f64;
    let sums = Sums::over(problem, recoding, classes);
    let columns = ColumnMeasures::of(problem, &sums, n);
    let suppressed = sums.suppressed;
    let published = classes.counts.len();
    let disc: f64 = classes
        .counts
        .iter()
        .map(|&c| (c as f64) * (c as f64))
        .sum::<f64>()
        + n * suppressed as f64;
    let disc_min: f64 = base.counts.iter().map(|&c| (c as f64) * (c as f64)).sum();
    let blocks = published + usize::from(suppressed > 0);
    let aecs = if blocks == 0 { n } else { n / blocks as f64 };
    let base_classes = base.counts.iter().filter(|&&c| c > 0).count();
    let aecs_min = if base_classes == 0 {
        n
    } else {
        n / base_classes as f64
    };
    let domains: f64 = problem
        .hierarchies()
        .iter()
        .map(|h| h.domain_size as f64)
        .product();
    OutputQuality {
        records: problem.rows(),
        suppressed,
        classes: published,
        granularity: Measure::columns(&columns.granularity),
        generalization_intensity: Measure::columns(&columns.intensity),
        non_uniform_entropy: Measure::columns(&columns.entropy),
        discernibility: Measure::new(disc, disc_min, n * n),
        aecs: Measure::new(aecs, aecs_min, n),
        ambiguity: Measure::new(sums.ambiguity, n, n * domains),
        microaggregation: microaggregation(problem, classes, suppressed, n),
    }
}

impl Sums {
    /// The sums over every base group, in fixed chunks on the pool merged in chunk order: the
    /// result does not depend on the number of threads.
    fn over<R: Recoding + ?Sized>(
        problem: &Problem,
        recoding: &R,
        classes: &OutputClasses,
    ) -> Sums {
        use rayon::prelude::*;
        let groups = problem.base_groups().len();
        let starts: Vec<usize> = (0..groups).step_by(SUM_CHUNK).collect();
        let chunks: Vec<Sums> = starts
            .par_iter()
            .map(|&start| {
                let mut sums = Sums::new(problem, classes);
                for g in start..(start + SUM_CHUNK).min(groups) {
                    sums.add(problem, recoding, classes, g);
                }
                sums
            })
            .collect();
        let mut chunks = chunks.into_iter();
        match chunks.next() {
            Some(first) => chunks.fold(first, Sums::merge),
            None => Sums::new(problem, classes),
        }
    }
}

/// The column-oriented measures' parts: per quasi-identifier (value, min, max).
struct ColumnMeasures {
    granularity: Vec<(f64, f64, f64)>,
    intensity: Vec<(f64, f64, f64)>,
    entropy: Vec<(f64, f64, f64)>,
}

impl ColumnMeasures {
    /// Granularity, intensity and non-uniform entropy of every quasi-identifier from `sums`
    /// over `n` records.
    fn of(problem: &Problem, sums: &Sums, n: f64) -> ColumnMeasures {
        let hierarchies = problem.hierarchies();
        let q = problem.qi_columns().len();
        let mut measures = ColumnMeasures {
            granularity: Vec::with_capacity(q),
            intensity: Vec::with_capacity(q),
            entropy: Vec::with_capacity(q),
        };
        for (i, h) in hierarchies.iter().enumerate() {
            let granularity = sums.share_sum[i] / n;
            measures
                .granularity
                .push((granularity, 1.0 / h.domain_size.max(1) as f64, 1.0));
            measures
                .intensity
                .push((sums.intensity_sum[i] / n, 0.0, 1.0));
            let mut value = 0.0f64;
            let out_counts = &sums.out_counts[i];
            sums.joint[i].for_each(|_, y, c| {
                value += c as f64 * (out_counts[y as usize] as f64 / c as f64).log2();
            });
            let max: f64 = problem
                .qi_value_counts(i)
                .iter()
                .filter(|&&c| c > 0)
                .map(|&c| c as f64 * (n / c as f64).log2())
                .sum();
            measures.entropy.push((value, 0.0, max));
        }
        measures
    }
}

/// The microaggregation measure (`None` without microaggregated attributes): per attribute the
/// share of the column's range each record's class spans, suppressed records 1, over `n`.
fn microaggregation(
    problem: &Problem,
    classes: &OutputClasses,
    suppressed: usize,
    n: f64,
) -> Option<Measure> {
    (!problem.microaggregated().is_empty()).then(|| {
        let parts: Vec<(f64, f64, f64)> = problem
            .microaggregated()
            .iter()
            .map(|m| {
                let shares: f64 = class_distributions(problem, classes, m.slot)
                    .iter()
                    .zip(&classes.counts)
                    .map(|((codes, _), &count)| count as f64 * m.prepared.range_share(codes))
                    .sum();
                ((shares + suppressed as f64) / n, 0.0, 1.0)
            })
            .collect();
        Measure::columns(&parts)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Checker;
    use crate::config::{ProblemConfig, QuasiIdentifier};
    use crate::data::Table;
    use crate::hierarchy::Hierarchy;
    use crate::privacy::PrivacyModel;

    /// 150,000 distinct (a, b) pairs: three chunks of base groups.
    fn problem() -> Problem {
        let rows: Vec<Vec<String>> = (0..150_000)
            .map(|i| vec![(i % 500).to_string(), (i / 500).to_string()])
            .collect();
        let table = Table::from_rows(&["a", "b"], &rows).unwrap();
        let hierarchy = |n: usize, name: &str| {
            Hierarchy::from_rows(
                (0..n)
                    .map(|v| vec![v.to_string(), (v / 10).to_string(), "*".to_string()])
                    .collect(),
                name,
            )
            .unwrap()
        };
        let config = ProblemConfig {
            quasi_identifiers: vec![
                QuasiIdentifier::new("a", hierarchy(500, "a")),
                QuasiIdentifier::new("b", hierarchy(300, "b")),
            ],
            privacy: vec![PrivacyModel::KAnonymity { k: 20 }],
            suppression_limit: 0.5,
            ..Default::default()
        };
        Problem::new(table, config).unwrap()
    }

    /// The sums run in chunks on the pool: the measures are the same with one thread or
    /// several, and equal to a direct count on this data.
    #[test]
    fn measures_do_not_depend_on_the_threads() {
        let p = problem();
        assert!(p.base_groups().len() > 2 * SUM_CHUNK);
        let eval = Checker::new(&p).evaluate(&[1, 1]);
        let on = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| output_quality(&p, &eval))
        };
        let one = on(1);
        assert_eq!(one, on(2));
        assert_eq!(one, on(3));
        // Level 1 of both: classes of 10 × 10 values = 100 records each, none suppressed;
        // intensity 1/2 per cell; AECS 100.
        assert_eq!((one.suppressed, one.classes), (0, 1500));
        assert!((one.generalization_intensity.value - 0.5).abs() < 1e-12);
        assert!((one.aecs.value - 100.0).abs() < 1e-9);
        // Non-uniform entropy: every cell's input value is 1 of 10 equally frequent values of
        // its output value: log2 10 per cell, 150,000 cells per attribute (the value is the
        // attributes' mean).
        let expected = 150_000.0 * 10f64.log2();
        assert!(
            (one.non_uniform_entropy.value - expected).abs() < 1e-6 * expected,
            "{} {expected}",
            one.non_uniform_entropy.value
        );
    }
}
