//! Non-uniform entropy (de Waal & Willenborg; ARX `MetricMDNUNMEntropy`, the non-monotone
//! variant) and its normalised form (`MetricMDNUNMNormalizedEntropy`).
//!
//! Per quasi-identifier i at level l, with c0(x) the frequency of original value x and c_l(v) the
//! frequency of generalized value v in the data:
//!
//! * generalization part G_i = Σ_x c0(x)·log2(c_l(gen(x)) / c0(x)) over all n records (a table per
//!   level, [`super::tables::ColumnTables::entropy_sum`]);
//! * suppression part S_i = Σ_v c_s(v)·log2(s / c_s(v)) where c_s(v) counts the suppressed records
//!   whose value *at the current level* is v (ARX takes the generalized class keys here, so no
//!   original values are needed);
//! * **Entropy**: E_i = truncate10(gF·G_i + sF·S_i), summed by default. Lower bound
//!   truncate10(gF·G_i) (the monotone variant, ARX `MetricMDNUEntropy`).
//! * **Normalised entropy**: truncate10(G_i + S_i) / truncate10(M_i), M_i = Σ_x c0(x)·log2(n/c0(x))
//!   the value when every value is merged into one; summed by default. Like ARX it ignores the
//!   gs-factor (ARX fixes it at 0.5 for this model). Lower bound truncate10(G_i)/truncate10(M_i).
//!
//! Utility (both): per attribute (G_i + S_i) / M_i clipped to [0, 1] (s/n for a constant column,
//! M_i = 0). 0 at the unchanged data, 1 when the column is merged into one value or all records are
//! suppressed. ARX's definition counts suppressed records in both parts, so a transformation that
//! generalizes *and* suppresses can exceed M_i; it is clipped.

use super::sum::{ExactSum, from_fixed};
use super::{ClassView, PreparedQuality, Quality, QualityModel, Summary, truncate10};

/// Entropy or normalised entropy of a grouped transformation.
pub(super) fn evaluate(
    p: &PreparedQuality,
    model: QualityModel,
    view: &ClassView<'_>,
    s: &Summary,
) -> Quality {
    let q = view.levels.len();
    let g = p.config.generalization_factor();
    let sf = p.config.suppression_factor();
    let n = p.n as f64;
    // Suppressed classes as (value at the current level, count), per column.
    let suppressed_classes: Vec<usize> = if s.suppressed > 0 {
        // Classes without records (unreleased ones of a research subset) contribute nothing.
        (0..view.counts.len())
            .filter(|&c| view.suppressed[c] && view.counts[c] > 0)
            .collect()
    } else {
        Vec::new()
    };
    let mut pairs: Vec<(u32, u32)> = Vec::with_capacity(suppressed_classes.len());
    let mut per = Vec::with_capacity(q);
    let mut bound = Vec::with_capacity(q);
    let mut neutral = Vec::with_capacity(q);
    for (i, col) in p.columns.iter().enumerate() {
        let generalization = col.entropy_sum[view.levels[i] as usize];
        pairs.clear();
        pairs.extend(
            suppressed_classes
                .iter()
                .map(|&c| (view.codes[c * q + i], view.counts[c])),
        );
        let sup = suppression_part(&mut pairs, s.suppressed);
        match model {
            QualityModel::Entropy => {
                let base = g * from_fixed(generalization);
                let excess = sf * from_fixed(sup);
                per.push(truncate10(base + excess));
                bound.push(truncate10(base));
            }
            _ => {
                let max = truncate10(from_fixed(col.entropy_max));
                if max > 0.0 {
                    per.push(truncate10(from_fixed(generalization + sup)) / max);
                    bound.push(truncate10(from_fixed(generalization)) / max);
                } else {
                    per.push(0.0);
                    bound.push(0.0);
                }
            }
        }
        neutral.push(if col.entropy_max > 0 {
            (from_fixed(generalization + sup) / from_fixed(col.entropy_max)).clamp(0.0, 1.0)
        } else {
            s.suppressed as f64 / n
        });
    }
    Quality {
        score: p.aggregate(model, &per),
        lower_bound: p.aggregate(model, &bound),
        utility: p.aggregate_utility(model, &neutral),
        per_attribute: per,
        excess: Vec::new(),
    }
}

/// S = Σ_v c(v)·log2(s / c(v)) over the suppressed (value, count) pairs, fixed point.
fn suppression_part(pairs: &mut [(u32, u32)], suppressed: u64) -> i128 {
    if pairs.is_empty() {
        return 0;
    }
    pairs.sort_unstable_by_key(|&(v, _)| v);
    let s = suppressed as f64;
    let mut sum = ExactSum::default();
    for run in pairs.chunk_by(|a, b| a.0 == b.0) {
        let c = run.iter().map(|&(_, k)| k as u64).sum::<u64>() as f64;
        sum.add(c * (s / c).log2());
    }
    sum.fixed()
}

/// The generalization-only bound from the tables (no grouping needed).
pub(super) fn lower_bound(p: &PreparedQuality, model: QualityModel, levels: &[u8]) -> f64 {
    let g = p.config.generalization_factor();
    let bound: Vec<f64> = p
        .columns
        .iter()
        .zip(levels)
        .map(|(col, &l)| {
            let generalization = col.entropy_sum[l as usize];
            if model == QualityModel::Entropy {
                truncate10(g * from_fixed(generalization))
            } else {
                let max = truncate10(from_fixed(col.entropy_max));
                if max > 0.0 {
                    truncate10(from_fixed(generalization)) / max
                } else {
                    0.0
                }
            }
        })
        .collect();
    p.aggregate(model, &bound)
}
