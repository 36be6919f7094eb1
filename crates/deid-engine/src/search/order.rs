//! The total order of the optimum (`docs/definitions.md` §2.1): lower score (equal within a
//! relative tolerance), then lower rank (sum of levels), then lexicographically smaller levels.

use std::cmp::Ordering;

use crate::check::CheckResult;
use crate::lattice::{Lattice, Levels};

/// Order of two transformations with the same score: lower rank, then lexicographically smaller.
pub(crate) fn levels_cmp(a: &[u8], b: &[u8]) -> Ordering {
    Lattice::rank(a)
        .cmp(&Lattice::rank(b))
        .then_with(|| a.cmp(b))
}

/// Relative tolerance for comparing scores. Normalised quality values are truncated to 10
/// digits and summed in different orders along different code paths (per class for the score,
/// per value for the generalization-only bound), so mathematically equal scores can differ by
/// about 1e-10; such differences must not decide between two transformations.
pub(crate) const SCORE_TOLERANCE: f64 = 1e-9;

/// The absolute tolerance of two scores: [`SCORE_TOLERANCE`] relative, at least absolute.
pub(crate) fn tolerance(a: f64, b: f64) -> f64 {
    SCORE_TOLERANCE * a.abs().max(b.abs()).max(1.0)
}

/// Compares two scores for the optimum: equal within [`SCORE_TOLERANCE`] (relative, at least
/// absolute), NaN sorts last.
pub(crate) fn score_cmp(a: f64, b: f64) -> Ordering {
    if (a - b).abs() <= tolerance(a, b) {
        return Ordering::Equal;
    }
    a.partial_cmp(&b).unwrap_or_else(|| a.total_cmp(&b))
}

/// The optimum order: score (with tolerance), then rank, then levels. Decides what the result
/// is; not a total order in the strict sense (tolerance is not transitive), so heaps and sorts use
/// [`exact_cmp`].
pub(crate) fn key_cmp(a_score: f64, a: &[u8], b_score: f64, b: &[u8]) -> Ordering {
    score_cmp(a_score, b_score).then_with(|| levels_cmp(a, b))
}

/// A strict total order consistent with [`key_cmp`] up to the tolerance: exact score, then rank,
/// then levels. Used to order queues and populations.
pub(crate) fn exact_cmp(a_score: f64, a: &[u8], b_score: f64, b: &[u8]) -> Ordering {
    a_score.total_cmp(&b_score).then_with(|| levels_cmp(a, b))
}

/// A checked transformation as a heap entry, ordered by (score, rank, levels) only; wrap in
/// `Reverse` for a min-heap.
#[derive(Debug, Clone)]
pub(crate) struct Scored {
    pub score: f64,
    pub levels: Levels,
    pub lower_bound: f64,
    pub anonymous: bool,
}

impl Scored {
    /// The entry for a check result.
    pub fn of(r: &CheckResult) -> Scored {
        Scored {
            score: r.score,
            levels: r.levels.clone(),
            lower_bound: r.lower_bound,
            anonymous: r.anonymous,
        }
    }
}

impl PartialEq for Scored {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        exact_cmp(self.score, &self.levels, other.score, &other.levels)
    }
}
