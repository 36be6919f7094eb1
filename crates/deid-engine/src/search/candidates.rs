//! The best anonymous transformations a search checked ([`Candidates`]): a bounded list, best
//! first, updated where the search context records an anonymous result (`Ctx::offer`), so that
//! a user can choose another transformation than the optimum (e.g. a coarser `age` for a finer
//! `zip`) without a new search. It adds no check: transformations found anonymous by inference
//! (Flash's predictive tagging) and never checked are not listed.
//!
//! Ordered by the optimum's order without tolerance ([`exact_cmp`]: score, rank, levels), so
//! the list is deterministic for a deterministic search (same seed, no time limit hit).

use std::cmp::Ordering;

use super::exact_cmp;
use crate::check::CheckResult;
use crate::lattice::Levels;

/// Default of [`SearchConfig::candidates`](super::SearchConfig::candidates).
pub const DEFAULT_CANDIDATES: usize = 20;

/// Largest [`SearchConfig::candidates`](super::SearchConfig::candidates).
pub const MAX_CANDIDATES: usize = 100;

/// One anonymous transformation a search checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The transformation (one level per quasi-identifier).
    pub levels: Levels,
    /// Its score (lower = better).
    pub score: f64,
    /// Its utility in [0, 1].
    pub utility: f64,
    /// Records it suppresses.
    pub suppressed: usize,
}

impl Candidate {
    fn of(r: &CheckResult) -> Candidate {
        Candidate {
            levels: r.levels.clone(),
            score: r.score,
            utility: r.utility,
            suppressed: r.suppressed,
        }
    }

    fn cmp(&self, score: f64, levels: &[u8]) -> Ordering {
        exact_cmp(self.score, &self.levels, score, levels)
    }
}

/// At most `max` candidates, best first, each transformation once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Candidates {
    max: usize,
    list: Vec<Candidate>,
}

impl Candidates {
    /// An empty list keeping at most `max` (0: none).
    pub(crate) fn new(max: usize) -> Candidates {
        Candidates {
            max: max.min(MAX_CANDIDATES),
            list: Vec::with_capacity(max.min(MAX_CANDIDATES)),
        }
    }

    /// Keeps `r` if it is anonymous, not listed yet and better than the worst kept (or the list
    /// is not full). O(log N) to reject, O(N) to insert.
    pub(crate) fn offer(&mut self, r: &CheckResult) {
        if !r.anonymous || self.max == 0 {
            return;
        }
        if self.list.len() == self.max
            && self
                .list
                .last()
                .is_some_and(|w| w.cmp(r.score, &r.levels) != Ordering::Greater)
        {
            return;
        }
        let at = match self.list.binary_search_by(|c| c.cmp(r.score, &r.levels)) {
            Ok(_) => return,
            Err(at) => at,
        };
        self.list.insert(at, Candidate::of(r));
        self.list.truncate(self.max);
    }

    /// The candidates, best first.
    pub(crate) fn into_vec(self) -> Vec<Candidate> {
        self.list
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(levels: &[u8], score: f64, anonymous: bool) -> CheckResult {
        CheckResult {
            levels: levels.to_vec(),
            anonymous,
            min_class_size_ok: anonymous,
            suppressed: 0,
            classes: 1,
            score,
            lower_bound: 0.0,
            utility: 1.0 - score,
            excess: Vec::new(),
        }
    }

    #[test]
    fn keeps_the_best_anonymous_ones_once_best_first() {
        let mut c = Candidates::new(3);
        for (levels, score, anonymous) in [
            (&[2u8, 0][..], 0.5, true),
            (&[0, 0][..], 0.1, false),
            (&[1, 1][..], 0.4, true),
            (&[2, 0][..], 0.5, true),
            (&[0, 2][..], 0.4, true),
            (&[3, 3][..], 0.9, true),
            (&[1, 2][..], 0.45, true),
        ] {
            c.offer(&result(levels, score, anonymous));
        }
        let got: Vec<(Levels, f64)> = c
            .into_vec()
            .into_iter()
            .map(|c| (c.levels, c.score))
            .collect();
        // Equal scores: lower rank, then the lexicographically smaller levels first.
        assert_eq!(
            got,
            vec![(vec![0, 2], 0.4), (vec![1, 1], 0.4), (vec![1, 2], 0.45)]
        );
    }

    #[test]
    fn zero_keeps_nothing() {
        let mut c = Candidates::new(0);
        c.offer(&result(&[0], 0.0, true));
        assert!(c.into_vec().is_empty());
    }
}
