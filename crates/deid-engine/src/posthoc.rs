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
use std::hash::{BuildHasherDefault, Hasher};

use crate::output::{OutputClasses, Recoding, class_distributions};
use crate::problem::Problem;

/// A fast hasher for the packed (value, label) keys (not exposed to untrusted keys' choice:
/// the codes are the engine's own).
#[derive(Default)]
struct PairHasher(u64);

impl Hasher for PairHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

type FastHash = BuildHasherDefault<PairHasher>;

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
/// recoding).
pub fn output_quality_of<R: Recoding + ?Sized>(
    problem: &Problem,
    recoding: &R,
    classes: &OutputClasses,
) -> OutputQuality {
    let q = problem.qi_columns().len();
    let base = problem.base_groups();
    let n = problem.rows() as f64;
    let hierarchies = problem.hierarchies();
    let mut suppressed = 0usize;
    let mut share_sum = vec![0.0f64; q];
    let mut intensity_sum = vec![0.0f64; q];
    let mut ambiguity = 0.0f64;
    // Joint counts (input code, output label) and output label counts, per attribute. For one
    // global transformation an input value has one output label (and the marker), so the
    // joint map stays as small as the attribute's domain.
    let mut joint: Vec<HashMap<u64, u64, FastHash>> = vec![HashMap::default(); q];
    let mut out_counts: Vec<Vec<u64>> = classes.label_counts.iter().map(|&n| vec![0; n]).collect();
    for g in 0..base.len() {
        let count = base.counts[g] as f64;
        let input = &base.codes[g * q..(g + 1) * q];
        let recoded = recoding.recode(g);
        if recoded.is_none() {
            suppressed += base.counts[g] as usize;
        }
        let mut product = 1.0f64;
        for i in 0..q {
            let h = &hierarchies[i];
            let top = (h.height() - 1) as f64;
            let label = match recoded {
                Some((levels, codes)) => {
                    let (level, code) = (levels[i] as usize, codes[i]);
                    share_sum[i] += count * h.share(level, code);
                    if top > 0.0 {
                        intensity_sum[i] += count * level as f64 / top;
                    }
                    product *= h.leaves(level, code) as f64;
                    classes.label(i, level, code)
                }
                None => {
                    share_sum[i] += count;
                    intensity_sum[i] += count;
                    product *= h.domain_size as f64;
                    classes.suppressed_labels[i]
                }
            };
            let pair = (input[i] as u64) << 32 | label as u64;
            *joint[i].entry(pair).or_default() += base.counts[g] as u64;
            out_counts[i][label as usize] += base.counts[g] as u64;
        }
        ambiguity += count * product;
    }
    let mut granularity = Vec::with_capacity(q);
    let mut intensity = Vec::with_capacity(q);
    let mut entropy = Vec::with_capacity(q);
    for i in 0..q {
        let h = &hierarchies[i];
        granularity.push((share_sum[i] / n, 1.0 / h.domain_size.max(1) as f64, 1.0));
        intensity.push((intensity_sum[i] / n, 0.0, 1.0));
        let value: f64 = joint[i]
            .iter()
            .map(|(&pair, &c)| {
                let y = (pair & 0xffff_ffff) as usize;
                c as f64 * (out_counts[i][y] as f64 / c as f64).log2()
            })
            .sum();
        let max: f64 = problem
            .qi_value_counts(i)
            .iter()
            .filter(|&&c| c > 0)
            .map(|&c| c as f64 * (n / c as f64).log2())
            .sum();
        entropy.push((value, 0.0, max));
    }
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
    let aecs_min = if base.is_empty() {
        n
    } else {
        n / base.len() as f64
    };
    let domains: f64 = hierarchies.iter().map(|h| h.domain_size as f64).product();
    let microaggregation = (!problem.microaggregated().is_empty()).then(|| {
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
    });
    OutputQuality {
        records: problem.rows(),
        suppressed,
        classes: published,
        granularity: Measure::columns(&granularity),
        generalization_intensity: Measure::columns(&intensity),
        non_uniform_entropy: Measure::columns(&entropy),
        discernibility: Measure::new(disc, disc_min, n * n),
        aecs: Measure::new(aecs, aecs_min, n),
        ambiguity: Measure::new(ambiguity, n, n * domains),
        microaggregation,
    }
}
