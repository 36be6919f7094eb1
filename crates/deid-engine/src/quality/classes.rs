//! Models that only look at class sizes: AECS, Discernibility (DM) and DM*.
//!
//! * **AECS** (ARX `MetricSDAECS`): n / (#kept·sF + gF·[s > 0]) — all suppressed records form one
//!   class; ARX deliberately swaps the factors relative to the other models, and so do we. Where
//!   that denominator is 0 (gs-factor 0 and nothing suppressed, or gs-factor 1 and everything
//!   suppressed; ARX divides by zero) the score is n. Lower bound n / #classes: ARX uses
//!   n / (#classes·sF), which exceeds the score when sF < 1 (gs-factor < 0.5) and records are
//!   suppressed, so it is not a valid bound there; with sF = 1 both agree. Utility: neutral value
//!   n / (#kept + [s > 0]) between n / #base groups (unchanged data) and n (everything removed).
//! * **DM** (`MetricSDNMDiscernability`): Σ_kept |EC|² + Σ_suppressed n·|EC| (no gs-factor).
//!   Lower bound DM* (exact integers). Utility between Σ_base |b|² and n².
//! * **DM*** (`MetricSDDiscernability`): Σ_all |EC|², monotone; lower bound = score. Its utility
//!   is DM's: the score ignores suppression (to stay monotone), but suppressed records are removed
//!   from the output, so a user-facing utility must count them.

use super::{PreparedQuality, Quality, Summary};

/// Average equivalence class size.
pub(super) fn aecs(p: &PreparedQuality, s: &Summary) -> Quality {
    let n = p.n as f64;
    let sf = p.config.suppression_factor();
    let g = p.config.generalization_factor();
    let any = s.suppressed > 0;
    let denom = s.kept_classes as f64 * sf + if any { g } else { 0.0 };
    let score = if denom > 0.0 {
        (n / denom).min(f64::MAX)
    } else {
        n
    };
    let neutral = n / (s.kept_classes + any as u64).max(1) as f64;
    let min = n / p.base.groups.max(1) as f64;
    Quality {
        score,
        lower_bound: n / s.classes.max(1) as f64,
        per_attribute: Vec::new(),
        excess: Vec::new(),
        utility: p.range_utility(neutral, min, n, s.suppressed),
    }
}

/// Discernibility with suppression.
pub(super) fn discernibility(p: &PreparedQuality, s: &Summary) -> Quality {
    let dm = s.sum_sq_kept + p.n as u128 * s.suppressed as u128;
    Quality {
        score: dm as f64,
        lower_bound: s.sum_sq_all as f64,
        per_attribute: Vec::new(),
        excess: Vec::new(),
        utility: dm_utility(p, dm, s),
    }
}

/// Discernibility ignoring suppression (monotone).
pub(super) fn discernibility_star(p: &PreparedQuality, s: &Summary) -> Quality {
    let dm = s.sum_sq_kept + p.n as u128 * s.suppressed as u128;
    Quality {
        score: s.sum_sq_all as f64,
        lower_bound: s.sum_sq_all as f64,
        per_attribute: Vec::new(),
        excess: Vec::new(),
        utility: dm_utility(p, dm, s),
    }
}

fn dm_utility(p: &PreparedQuality, dm: u128, s: &Summary) -> f64 {
    let max = p.n as u128 * p.n as u128;
    let min = p.base.sum_sq;
    if max > min {
        1.0 - (dm.saturating_sub(min)) as f64 / (max - min) as f64
    } else {
        p.range_utility(0.0, 0.0, 0.0, s.suppressed)
    }
}
