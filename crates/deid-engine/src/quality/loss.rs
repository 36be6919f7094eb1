//! Loss (Iyengar; ARX `MetricMDNMLoss`), the default model.
//!
//! Per quasi-identifier i at level l_i, with share(v) the domain share of a generalized value
//! (hierarchy leaves under v / all leaves, or the builder's analytic share) and D_i the domain size:
//!
//! * raw loss L_i = Σ_kept |EC|·share·gF + Σ_suppressed { |EC| if sF = 1, else
//!   |EC|·share + sF·(|EC| − |EC|·share) };
//! * normalised ℓ_i = truncate10(max(0, (L_i − gF·n/D_i) / (n − gF·n/D_i))) ∈ [0, 1];
//! * score = aggregate(ℓ_i·w_i), geometric mean by default.
//!
//! Lower bound: the same with every class treated as kept (generalization only), i.e.
//! Σ_all |EC|·share·gF = gF · Σ_x c0(x)·share(x at l_i) — a per-column table, exactly equal to the
//! class sum in fixed point, non-decreasing in the level. The score is computed as that bound plus
//! the non-negative suppression excess sF·(s − S_i) + (1 − gF)·S_i with S_i = Σ_suppressed
//! |EC|·share (this equals the formula above because sF < 1 implies gF = 1).
//!
//! Utility: per attribute (L_i⁰ − L_i(0)) / (n − L_i(0)) with L_i⁰ the neutral raw loss (gF = sF = 1)
//! and L_i(0) its value on the unchanged data (= n/D_i), then 1 − agg/agg(1…1). Suppressed records
//! and values generalized to the whole domain count 1 each, so removing everything gives 0.

use super::sum::{FIXED_ONE, from_fixed};
use super::{ClassView, PreparedQuality, Quality, QualityModel, Summary};
use crate::hierarchy::PerCode;
use crate::lattice::MAX_QUASI_IDENTIFIERS;

/// Loss of a grouped transformation.
pub(super) fn evaluate(p: &PreparedQuality, view: &ClassView<'_>, s: &Summary) -> Quality {
    let q = view.levels.len();
    let g = p.config.generalization_factor();
    let sf = p.config.suppression_factor();
    let n = p.n as f64;
    // S_i = Σ over suppressed classes of |EC|·share, fixed point.
    let mut suppressed_share = [0i128; MAX_QUASI_IDENTIFIERS];
    if s.suppressed > 0 {
        // A level whose share is the same for every value (always level 0) needs no pass over
        // the classes; the other columns are summed in one pass over the suppressed classes.
        let mut each: Vec<(usize, &[i64])> = Vec::with_capacity(q);
        for (i, total) in suppressed_share.iter_mut().enumerate().take(q) {
            match &p.columns[i].share[view.levels[i] as usize] {
                PerCode::All(share) => *total = s.suppressed as i128 * *share as i128,
                PerCode::Each(shares) => each.push((i, shares)),
            }
        }
        if !each.is_empty() {
            let classes = view.counts.iter().zip(view.suppressed);
            for ((&count, _), codes) in classes.zip(view.codes.chunks_exact(q)).filter(|c| *c.0.1) {
                for &(i, shares) in &each {
                    suppressed_share[i] += count as i128 * shares[codes[i] as usize] as i128;
                }
            }
        }
    }
    let s_fixed = s.suppressed as i128 * FIXED_ONE;
    let mut per = Vec::with_capacity(q);
    let mut excesses = Vec::with_capacity(q);
    let mut bound = Vec::with_capacity(q);
    let mut neutral = Vec::with_capacity(q);
    for (i, col) in p.columns.iter().enumerate() {
        let all = col.loss_sum[view.levels[i] as usize];
        let sup = suppressed_share[i];
        // Records suppressed beyond their generalized share: ≥ 0 because shares are ≤ 1.
        let rest = s_fixed - sup;
        let base = g * from_fixed(all);
        let excess = sf * from_fixed(rest) + (1.0 - g) * from_fixed(sup);
        per.push(normalise(base + excess, n, g, col.domain_size));
        excesses.push(excess);
        bound.push(normalise(base, n, g, col.domain_size));
        let unchanged = from_fixed(col.loss_sum[0]);
        neutral.push(if n > unchanged {
            ((from_fixed(all + rest) - unchanged) / (n - unchanged)).clamp(0.0, 1.0)
        } else {
            s.suppressed as f64 / n
        });
    }
    Quality {
        score: p.aggregate(QualityModel::Loss, &per),
        lower_bound: p.aggregate(QualityModel::Loss, &bound),
        utility: p.aggregate_utility(QualityModel::Loss, &neutral),
        per_attribute: per,
        excess: excesses,
    }
}

/// The generalization-only bound from the tables (no grouping needed).
pub(super) fn lower_bound(p: &PreparedQuality, levels: &[u8]) -> f64 {
    bound_with_excess(p, levels, &[])
}

/// The generalization-only bound of `levels` with a suppression excess per attribute added
/// (none where `excess` is shorter): a lower bound of the score of `levels` whenever the
/// excess of `levels` is at least `excess`. Each record suppressed at a generalization is
/// suppressed at `levels` too, and adds sF·(1 − share) + (1 − gF)·share there, which is at
/// least what it adds at the generalization (shares grow with the level and sF < 1 ⇒ gF = 1).
pub(super) fn bound_with_excess(p: &PreparedQuality, levels: &[u8], excess: &[f64]) -> f64 {
    let g = p.config.generalization_factor();
    let n = p.n as f64;
    let bound: Vec<f64> = p
        .columns
        .iter()
        .zip(levels)
        .enumerate()
        .map(|(i, (col, &l))| {
            let extra = excess.get(i).copied().unwrap_or(0.0);
            normalise(
                g * from_fixed(col.loss_sum[l as usize]) + extra,
                n,
                g,
                col.domain_size,
            )
        })
        .collect();
    p.aggregate(QualityModel::Loss, &bound)
}

/// (L − gF·n/D) / (n − gF·n/D), clipped at 0 and truncated to 10 digits (0 if the range is empty).
fn normalise(l: f64, n: f64, g: f64, domain: f64) -> f64 {
    let min = g * n / domain;
    let denom = n - min;
    if denom <= 0.0 {
        return 0.0;
    }
    super::truncate10(((l - min) / denom).max(0.0))
}
