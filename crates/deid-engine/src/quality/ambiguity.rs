//! Ambiguity (Goldberger & Tassa; ARX `MetricSDNMAmbiguity`): for every record, the number of
//! domain tuples its output could stand for.
//!
//! score = Σ_kept |EC|·∏_i area_i(EC) + s·∏_i leaves_i, where area_i is the number of hierarchy
//! leaves under the class's value (materialized, as in ARX) and a suppressed record stands for the
//! whole domain. No gs-factor. Range: n (unchanged data, every area 1) to n·∏ leaves_i.
//!
//! Lower bound (ARX's): Σ_all |EC|·∏_i area_i(EC), i.e. suppression ignored. Both sums are exact
//! ([`WideSum`]) and correctly rounded, so the bound is ≤ the score and non-decreasing in the
//! lattice bit for bit. Without grouping, the AM–GM inequality gives
//! n·2^(Σ_records Σ_i log2 area_i / n) from the per-column tables.
//!
//! Utility: 1 − (v − v_min)/(v_max − v_min) on the linear scale, like ARX's post-hoc model.

use super::sum::{WideSum, from_fixed};
use super::{ClassView, PreparedQuality, Quality, Summary};

/// Ambiguity of a grouped transformation.
pub(super) fn evaluate(p: &PreparedQuality, view: &ClassView<'_>, s: &Summary) -> Quality {
    let q = view.levels.len();
    let mut bound = WideSum::default();
    let mut score = WideSum::default();
    for (c, (&count, &supp)) in view.counts.iter().zip(view.suppressed).enumerate() {
        let codes = &view.codes[c * q..c * q + q];
        let mut area = 1.0f64;
        for ((col, &level), &code) in p.columns.iter().zip(view.levels).zip(codes) {
            area *= col.area(level as usize, code);
        }
        let area = area.min(f64::MAX);
        bound.add(count as u64, area);
        score.add(count as u64, if supp { p.base.domain_area } else { area });
    }
    let score = score.value().min(f64::MAX);
    Quality {
        score,
        lower_bound: bound.value().min(f64::MAX),
        per_attribute: Vec::new(),
        excess: Vec::new(),
        utility: p.range_utility(
            score,
            p.base.ambiguity_min,
            p.base.ambiguity_max,
            s.suppressed,
        ),
    }
}

/// AM–GM bound from the per-column log-area tables, with a relative margin for rounding.
pub(super) fn independent_bound(p: &PreparedQuality, levels: &[u8]) -> f64 {
    let n = p.n as f64;
    let log_sum: f64 = p
        .columns
        .iter()
        .zip(levels)
        .map(|(col, &l)| from_fixed(col.log_area_sum[l as usize]))
        .fold(0.0, |a, x| a + x);
    (n * (log_sum / n).exp2() * (1.0 - 1e-9)).min(f64::MAX)
}
