//! Precision (Sweeney; ARX `MetricMDNMPrecision`) and Height (`MetricMDHeight`).
//!
//! With r_i = l_i / (h_i − 1) the relative level of quasi-identifier i (0 for a one-level
//! hierarchy):
//!
//! * **Precision**: P_i = ((n − s)·r_i·gF + s·sF) / n ∈ [0, max(gF, sF)], arithmetic mean by
//!   default. Lower bound min(r_i·gF, sF) per attribute: a weighted mean of r_i·gF and sF
//!   is never below the smaller one, whatever is suppressed later. (ARX uses r_i·gF, which is not
//!   a bound when sF < r_i·gF, i.e. gs-factor < 0.5 and a high level.) Utility: per attribute
//!   ((n − s)·r_i + s)/n, i.e. suppressed cells and cells at the top level count 1.
//! * **Height**: the levels l_i, summed by default; monotone, lower bound = score. It ignores
//!   suppression like ARX; its utility uses the same per-attribute values as Precision's (so that
//!   suppressed records count as removed).

use super::{ClassView, PreparedQuality, Quality, QualityModel, Summary};

/// Relative level l / (h − 1) of a column.
fn ratio(p: &PreparedQuality, i: usize, level: u8) -> f64 {
    let h = p.columns[i].height;
    if h > 1 {
        level as f64 / (h - 1) as f64
    } else {
        0.0
    }
}

/// Per-attribute lower bound min(r·gF, sF) and the score as bound + non-negative excess.
fn attribute(p: &PreparedQuality, i: usize, level: u8, suppressed: u64) -> (f64, f64) {
    let n = p.n as f64;
    let s = suppressed as f64;
    let g = p.config.generalization_factor();
    let sf = p.config.suppression_factor();
    let a = ratio(p, i, level) * g;
    if a <= sf {
        (a, a + s * (sf - a) / n)
    } else {
        (sf, sf + (n - s) * (a - sf) / n)
    }
}

/// Per-attribute values for utility: ((n − s)·r + s) / n.
fn neutral(p: &PreparedQuality, levels: &[u8], suppressed: u64) -> Vec<f64> {
    let n = p.n as f64;
    let s = suppressed as f64;
    levels
        .iter()
        .enumerate()
        .map(|(i, &l)| (((n - s) * ratio(p, i, l) + s) / n).clamp(0.0, 1.0))
        .collect()
}

/// Precision of a grouped transformation.
pub(super) fn precision(p: &PreparedQuality, view: &ClassView<'_>, s: &Summary) -> Quality {
    let (bound, per): (Vec<f64>, Vec<f64>) = view
        .levels
        .iter()
        .enumerate()
        .map(|(i, &l)| attribute(p, i, l, s.suppressed))
        .unzip();
    Quality {
        score: p.aggregate(QualityModel::Precision, &per),
        lower_bound: p.aggregate(QualityModel::Precision, &bound),
        utility: p.aggregate_utility(
            QualityModel::Precision,
            &neutral(p, view.levels, s.suppressed),
        ),
        per_attribute: per,
        excess: Vec::new(),
    }
}

/// Precision's lower bound without grouping (the same as the grouped one).
pub(super) fn lower_bound(p: &PreparedQuality, levels: &[u8]) -> f64 {
    let bound: Vec<f64> = levels
        .iter()
        .enumerate()
        .map(|(i, &l)| attribute(p, i, l, 0).0)
        .collect();
    p.aggregate(QualityModel::Precision, &bound)
}

/// Height of a transformation (independent of the data).
pub(super) fn height_score(p: &PreparedQuality, levels: &[u8]) -> f64 {
    let per: Vec<f64> = levels.iter().map(|&l| l as f64).collect();
    p.aggregate(QualityModel::Height, &per)
}

/// Height of a grouped transformation.
pub(super) fn height(p: &PreparedQuality, view: &ClassView<'_>, s: &Summary) -> Quality {
    let score = height_score(p, view.levels);
    Quality {
        score,
        lower_bound: score,
        utility: p.aggregate_utility(QualityModel::Height, &neutral(p, view.levels, s.suppressed)),
        per_attribute: view.levels.iter().map(|&l| l as f64).collect(),
        excess: Vec::new(),
    }
}
