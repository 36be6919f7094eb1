//! KL divergence (Machanavajjhala et al.; ARX `MetricSDNMKLDivergence`).
//!
//! p(x) = k_x / n is the frequency of a distinct input tuple x (a base group); the output
//! distribution spreads each kept class uniformly over its area (the product over attributes of
//! the number of hierarchy leaves under its values): q(x) = (|EC|/n) / area(EC); suppressed
//! records are spread over the whole domain: q(x) = (s/n) / ∏ leaves_i.
//!
//! KL = Σ_x p(x)·log2(p(x)/q(x)) over distinct tuples. ARX 3.9.2 sums over *rows* instead, with
//! each row weighted by its tuple's frequency, which counts a tuple occurring k times k times (not
//! a KL divergence); both agree when all tuples are distinct. Grouping the sum by class gives
//!
//! n·KL = Σ_x k_x·log2 k_x + Σ_kept |EC|·(log2 area(EC) − log2 |EC|) + s·(log2 ∏ leaves − log2 s),
//!
//! so only class sizes and generalized codes are needed. Minimum 0 (unchanged data), maximum
//! Σ_x p(x)·log2(p(x)·∏ leaves) (one class covering the domain, or everything suppressed), used
//! for the utility.
//!
//! Lower bound (ARX has none): the largest, over the attributes, of the KL divergence of the
//! attribute's marginal distribution from the marginal of q without suppression — a table per
//! column and level. Marginalizing cannot increase a KL divergence, and suppression cannot lower
//! it below its value without suppression (log-sum inequality), so it bounds every
//! generalization's score. The tighter "KL without suppression" is not used: it is monotone only in
//! exact arithmetic.

use super::sum::{fixed_k_log_k, from_fixed};
use super::{ClassView, PreparedQuality, Quality, Summary};

/// KL divergence of a grouped transformation.
pub(super) fn evaluate(p: &PreparedQuality, view: &ClassView<'_>, s: &Summary) -> Quality {
    let q = view.levels.len();
    let levels = view.levels;
    // n·KL without suppression = Σ k_x log k_x + Σ_records log2 area − Σ_classes |EC| log |EC|.
    let mut class_k_log_k = 0i128;
    // For suppressed classes: what they contributed as kept classes.
    let mut suppressed_as_kept = 0i128;
    for (c, (&count, &supp)) in view.counts.iter().zip(view.suppressed).enumerate() {
        let klk = fixed_k_log_k(count as u64);
        class_k_log_k += klk;
        if supp {
            let codes = &view.codes[c * q..c * q + q];
            let mut log_area = 0i128;
            for i in 0..q {
                log_area += p.columns[i].log_area(levels[i] as usize, codes[i]) as i128;
            }
            suppressed_as_kept += count as i128 * log_area - klk;
        }
    }
    let records_log_area: i128 = p
        .columns
        .iter()
        .zip(levels)
        .map(|(col, &l)| col.log_area_sum[l as usize])
        .sum();
    let without_suppression = (p.base.k_log_k + records_log_area - class_k_log_k).max(0);
    let excess = if s.suppressed > 0 {
        let supp = s.suppressed as i128 * p.base.log_domain_area - fixed_k_log_k(s.suppressed);
        (supp - suppressed_as_kept).max(0)
    } else {
        0
    };
    let total = without_suppression + excess;
    let n = p.n as f64;
    let unchanged = kl_unchanged(p);
    let max = kl_max(p);
    let utility = if max > unchanged {
        1.0 - (total - unchanged) as f64 / (max - unchanged) as f64
    } else {
        p.range_utility(0.0, 0.0, 0.0, s.suppressed)
    };
    Quality {
        score: from_fixed(total) / n,
        lower_bound: lower_bound(p, levels),
        per_attribute: Vec::new(),
        excess: Vec::new(),
        utility,
    }
}

/// n·KL of the unchanged data (0 up to the rounding of log2 of the level-0 areas).
pub(super) fn kl_unchanged(p: &PreparedQuality) -> i128 {
    p.columns
        .iter()
        .map(|c| c.log_area_sum[0])
        .sum::<i128>()
        .max(0)
}

/// n·KL when everything is removed: Σ k_x log k_x + n·log2 ∏ leaves − n·log2 n.
pub(super) fn kl_max(p: &PreparedQuality) -> i128 {
    p.base.k_log_k + p.n as i128 * p.base.log_domain_area - fixed_k_log_k(p.n)
}

/// max_i of the per-column marginal bound, divided by n, lowered by 10^-9 (relative and absolute).
///
/// The marginal bound and the score are computed from different terms, so where they are equal in
/// exact arithmetic (small integer counts make that common) rounding may put the bound a few 10^-13
/// above the score. The margin is far above that rounding error; an increasing affine map keeps
/// the bound monotone.
pub(super) fn lower_bound(p: &PreparedQuality, levels: &[u8]) -> f64 {
    let best = p
        .columns
        .iter()
        .zip(levels)
        .map(|(col, &l)| col.kl_bound[l as usize])
        .max()
        .unwrap_or(0);
    (from_fixed(best) / p.n as f64 * (1.0 - 1e-9) - 1e-9).max(0.0)
}
