//! Sample-based privacy models: conditions on the distribution of class sizes of the published
//! records, enforced after the class-based models by suppressing further classes.
//!
//! * Average re-identification risk: the average prosecutor risk of the published records,
//!   (published classes)/(published records) = 1/mean class size, is at most the threshold.
//!   Relaxed variant: additionally at most a share `records_at_risk` of the published records
//!   lies in classes whose risk 1/|EC| exceeds `highest`.
//! * Sample uniqueness: the share of published records alone in their class is at most the
//!   threshold.
//! * Population uniqueness: the estimated share of the population that is unique on the published
//!   quasi-identifiers ([`crate::population`]) is at most the threshold; an estimate of 0 counts
//!   only without sample uniques, so a solver that does not converge fails the model (as ARX).
//!
//! Suppressed records are never counted as risky: they leave both the classes and the records.
//! If nothing is published, every condition holds.
//!
//! Enforcement ([`enforce`]): classes are suppressed smallest first until all conditions hold.
//! For average risk and sample uniqueness, removing the smallest class never increases the risk
//! (the mean of the remaining sizes cannot drop; the share of small classes can only drop), so
//! the first prefix that works is the minimal one — found by a linear scan. Population uniqueness
//! is not monotone in the prefix, but it always holds once no sample unique is left, so only
//! classes of size 1 are ever suppressed for it; the number of them is found by a binary search
//! (as ARX's), which needs O(log c₁) estimates but may miss a smaller number that also works.
//!
//! Among classes of equal size, the ones whose suppression costs the least under the configured
//! quality model go first (the caller's cost, e.g. for Loss the classes whose generalized values
//! already cover the most of their domains), then those with the lexicographically smallest
//! generalized codes, so the result never depends on the (non-deterministic) order of the
//! classes. ARX sorts equal sizes by their information loss *ascending* — the most informative
//! class, the costliest to suppress, first — and then by representative row.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::population::{ClassSizes, Estimator, SolverConfig, estimators};

/// Estimates already computed, by histogram: estimates are pure functions of the histogram, so a
/// hit returns exactly what a fresh computation would (the result never depends on the order of
/// the checks).
#[derive(Debug, Default)]
pub struct EstimateCache(Mutex<HashMap<ClassSizes, Option<f64>>>);

/// Entries kept before the cache is cleared.
const CACHE_ENTRIES: usize = 1024;

impl Clone for EstimateCache {
    fn clone(&self) -> Self {
        EstimateCache::default()
    }
}

impl PartialEq for EstimateCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// A compiled sample-based model.
#[derive(Debug, Clone, PartialEq)]
pub enum PreparedSampleModel {
    /// Average risk ≤ `threshold`; optionally records in classes smaller than `safe_size` make up
    /// at most `share` of the published records.
    AverageRisk {
        /// Threshold of the average risk.
        threshold: f64,
        /// (smallest class size whose risk is ≤ highest, share of records allowed below it).
        relaxed: Option<(u32, f64)>,
    },
    /// Records in classes of size 1 make up at most `threshold` of the published records.
    SampleUniqueness {
        /// Threshold.
        threshold: f64,
    },
    /// Estimated population uniques / `population` ≤ `threshold`.
    PopulationUniqueness {
        /// Threshold in [0, 1].
        threshold: f64,
        /// The estimator.
        estimator: Estimator,
        /// The population size N.
        population: u64,
        /// Estimates by histogram.
        cache: EstimateCache,
    },
}

impl PreparedSampleModel {
    /// Average risk, relaxed with (highest risk, share of records at risk) if given.
    pub fn average_risk(threshold: f64, relaxed: Option<(f64, f64)>) -> PreparedSampleModel {
        PreparedSampleModel::AverageRisk {
            threshold,
            relaxed: relaxed.map(|(highest, share)| (safe_size(highest), share)),
        }
    }

    /// Sample uniqueness with the given threshold.
    pub fn sample_uniqueness(threshold: f64) -> PreparedSampleModel {
        PreparedSampleModel::SampleUniqueness { threshold }
    }

    /// Population uniqueness with the given threshold, estimator and population size.
    pub fn population_uniqueness(
        threshold: f64,
        estimator: Estimator,
        population: u64,
    ) -> PreparedSampleModel {
        PreparedSampleModel::PopulationUniqueness {
            threshold,
            estimator,
            population,
            cache: EstimateCache::default(),
        }
    }

    /// True for the models decided on (classes, records, small records) alone.
    fn is_monotone_in_prefix(&self) -> bool {
        !matches!(self, PreparedSampleModel::PopulationUniqueness { .. })
    }

    /// Classes smaller than this put their records at risk (0: the model has no such notion).
    fn small_below(&self) -> u32 {
        match self {
            PreparedSampleModel::AverageRisk { relaxed, .. } => relaxed.map_or(0, |r| r.0),
            PreparedSampleModel::SampleUniqueness { .. } => 2,
            PreparedSampleModel::PopulationUniqueness { .. } => 0,
        }
    }

    /// Whether the condition holds for `classes` published classes with `records` records,
    /// `small` of which lie in classes smaller than [`Self::small_below`] (not for population
    /// uniqueness, see [`Self::holds_on`]).
    fn holds(&self, classes: u64, records: u64, small: u64) -> bool {
        if records == 0 {
            return true;
        }
        let r = records as f64;
        match self {
            PreparedSampleModel::AverageRisk { threshold, relaxed } => {
                classes as f64 / r <= *threshold
                    && relaxed.is_none_or(|(_, share)| small as f64 / r <= share)
            }
            PreparedSampleModel::SampleUniqueness { threshold } => small as f64 / r <= *threshold,
            PreparedSampleModel::PopulationUniqueness { .. } => true,
        }
    }

    /// Whether the condition holds for the published classes with the histogram `h`.
    pub fn holds_on(&self, h: &ClassSizes) -> bool {
        let PreparedSampleModel::PopulationUniqueness {
            threshold,
            estimator,
            population,
            cache,
        } = self
        else {
            let small = h
                .pairs()
                .iter()
                .filter(|(s, _)| *s < self.small_below() as u64)
                .map(|(s, c)| s * c)
                .sum();
            return self.holds(h.classes(), h.records(), small);
        };
        if h.records() == 0 {
            return true;
        }
        let cached = cache.0.lock().ok().and_then(|m| m.get(h).copied());
        let estimate = match cached {
            Some(e) => e,
            None => {
                let e = estimators::model_estimate(
                    h,
                    *population,
                    *estimator,
                    &SolverConfig::default(),
                );
                if let Ok(mut m) = cache.0.lock() {
                    if m.len() >= CACHE_ENTRIES {
                        m.clear();
                    }
                    m.insert(h.clone(), e);
                }
                e
            }
        };
        population_share_holds(estimate, *population, *threshold, h.uniques())
    }
}

/// ARX's verdict on an estimate of population uniques: the share p = estimate / N fulfils the
/// threshold iff 0 < p ≤ threshold, or p = 0 and there are no sample uniques; no estimate fails.
pub fn population_share_holds(
    estimate: Option<f64>,
    population: u64,
    threshold: f64,
    sample_uniques: u64,
) -> bool {
    match estimate {
        None => false,
        Some(u) => {
            let p = u / population as f64;
            (p > 0.0 && p <= threshold) || (p == 0.0 && sample_uniques == 0)
        }
    }
}

impl PreparedSampleModel {
    /// Whether the condition holds for published classes of the given sizes.
    pub(crate) fn holds_for_sizes(&self, sizes: &[u32]) -> bool {
        let below = self.small_below();
        let records: u64 = sizes.iter().map(|&s| s as u64).sum();
        let small: u64 = sizes
            .iter()
            .filter(|&&s| s < below)
            .map(|&s| s as u64)
            .sum();
        self.holds(sizes.len() as u64, records, small)
    }
}

/// The smallest class size s with 1/s ≤ `highest` (records in smaller classes are at risk).
pub fn safe_size(highest: f64) -> u32 {
    if highest.is_nan() || highest <= 0.0 {
        return u32::MAX;
    }
    let mut s = (1.0 / highest).ceil().clamp(1.0, u32::MAX as f64) as u32;
    while s > 1 && 1.0 / (s - 1) as f64 <= highest {
        s -= 1;
    }
    while s < u32::MAX && 1.0 / s as f64 > highest {
        s += 1;
    }
    s
}

/// Running totals of the published classes.
#[derive(Debug, Clone, Copy)]
struct Totals {
    classes: u64,
    records: u64,
}

/// Suppresses further classes (flags in `suppressed`) until every model holds; returns the
/// records newly suppressed. `counts` are the class sizes; classes of equal size are ordered by
/// `cost` (of suppressing class c, lower first), then by `codes` (the generalized codes,
/// row-major, the same number per class).
///
/// Steps:
/// 1. total the published classes, records and, per model, records in small classes;
/// 2. sort the published sizes and drop the smallest until every model but population
///    uniqueness holds: the minimal prefix p;
/// 3. population uniqueness: if it fails after p classes and sample uniques are left, binary
///    search the number of further uniques to drop (it holds once none is left);
/// 4. with the p classes dropped, the largest of size b, j of them of size b: suppress every
///    published class smaller than b and the j cheapest classes of size b.
pub fn enforce(
    models: &[PreparedSampleModel],
    counts: &[u32],
    codes: &[u32],
    suppressed: &mut [bool],
    cost: &dyn Fn(usize) -> f64,
) -> usize {
    if models.is_empty() || counts.is_empty() {
        return 0;
    }
    let (prefix_models, population_models): (Vec<&PreparedSampleModel>, Vec<_>) =
        models.iter().partition(|m| m.is_monotone_in_prefix());
    // 1. and 2.
    let (sizes, mut p) = minimal_prefix(&prefix_models, counts, suppressed);
    // 3. Population uniqueness over the remaining classes.
    if !population_models.is_empty() {
        p += uniques_to_drop(&population_models, &sizes, p);
    }
    if p == 0 {
        return 0;
    }
    // 4. Suppress.
    suppress_smallest(&sizes[..p], counts, codes, suppressed, cost)
}

/// Steps 1 and 2 of [`enforce`]: the sorted sizes of the published classes and the number of
/// the smallest to drop until every model in `prefix_models` holds.
fn minimal_prefix(
    prefix_models: &[&PreparedSampleModel],
    counts: &[u32],
    suppressed: &[bool],
) -> (Vec<u32>, usize) {
    // 1. Totals.
    let limits: Vec<u32> = prefix_models.iter().map(|m| m.small_below()).collect();
    let mut totals = Totals {
        classes: 0,
        records: 0,
    };
    let mut small = vec![0u64; prefix_models.len()];
    let mut sizes = Vec::new();
    for (c, &size) in counts.iter().enumerate() {
        if suppressed[c] || size == 0 {
            continue;
        }
        totals.classes += 1;
        totals.records += size as u64;
        for (s, &limit) in small.iter_mut().zip(&limits) {
            if size < limit {
                *s += size as u64;
            }
        }
        sizes.push(size);
    }
    sizes.sort_unstable();
    // 2. Minimal prefix for the models that are monotone in it.
    let all_hold = |t: Totals, small: &[u64]| {
        prefix_models
            .iter()
            .zip(small)
            .all(|(m, &s)| m.holds(t.classes, t.records, s))
    };
    let mut p = 0;
    while p < sizes.len() && !all_hold(totals, &small) {
        let size = sizes[p];
        totals.classes -= 1;
        totals.records -= size as u64;
        for (s, &limit) in small.iter_mut().zip(&limits) {
            if size < limit {
                *s -= size as u64;
            }
        }
        p += 1;
    }
    (sizes, p)
}

/// Step 3 of [`enforce`]: how many further sample uniques to drop (after the `p` smallest of
/// the sorted `sizes`) for the population models to hold; 0 if they hold or no unique is left.
fn uniques_to_drop(population_models: &[&PreparedSampleModel], sizes: &[u32], p: usize) -> usize {
    let uniques = sizes.iter().take_while(|&&s| s == 1).count();
    if p >= uniques {
        return 0;
    }
    let histogram = ClassSizes::from_sizes(sizes[p..].iter().map(|&s| s as u64));
    let holds = |k: usize| {
        let h = histogram.without_uniques(k as u64);
        population_models.iter().all(|m| m.holds_on(&h))
    };
    if holds(0) {
        return 0;
    }
    // The smallest k in (0, uniques − p] that holds, assuming monotonicity; k = uniques − p (no
    // sample unique left) always holds.
    let (mut lo, mut hi) = (1, uniques - p);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if holds(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    hi
}

/// Step 4 of [`enforce`]: with `dropped` (the smallest published sizes, sorted, not empty) the
/// largest of size b, j of them of size b, suppresses every published class smaller than b and
/// the j cheapest classes of size b; returns the records newly suppressed.
fn suppress_smallest(
    dropped: &[u32],
    counts: &[u32],
    codes: &[u32],
    suppressed: &mut [bool],
    cost: &dyn Fn(usize) -> f64,
) -> usize {
    let q = codes.len() / counts.len();
    let boundary = dropped[dropped.len() - 1];
    let at_boundary = dropped.iter().rev().take_while(|&&s| s == boundary).count();
    let mut newly = 0usize;
    let mut ties: Vec<usize> = Vec::new();
    for (c, &size) in counts.iter().enumerate() {
        if suppressed[c] || size == 0 {
            continue;
        }
        if size < boundary {
            suppressed[c] = true;
            newly += size as usize;
        } else if size == boundary {
            ties.push(c);
        }
    }
    if at_boundary < ties.len() {
        let mut keyed: Vec<(f64, usize)> = ties.iter().map(|&c| (cost(c), c)).collect();
        keyed.select_nth_unstable_by(at_boundary, |(ca, a), (cb, b)| {
            ca.total_cmp(cb)
                .then_with(|| codes[a * q..a * q + q].cmp(&codes[b * q..b * q + q]))
        });
        ties = keyed.into_iter().map(|(_, c)| c).collect();
    }
    for &c in &ties[..at_boundary] {
        suppressed[c] = true;
        newly += boundary as usize;
    }
    newly
}

#[cfg(test)]
mod tests {
    use super::super::PrivacyModel;
    use super::super::testutil::*;
    use super::*;
    use crate::population::Estimator;
    use crate::{Checker, Problem};
    use proptest::prelude::*;

    fn average(threshold: f64) -> PrivacyModel {
        PrivacyModel::AverageRisk {
            threshold,
            highest: None,
            records_at_risk: None,
        }
    }

    fn uniqueness(threshold: f64) -> PrivacyModel {
        PrivacyModel::SampleUniqueness { threshold }
    }

    /// Classes c0, c1, … of the given sizes (sensitive value constant).
    fn sized(sizes: &[usize]) -> Vec<Vec<&'static str>> {
        sizes.iter().map(|&s| vec!["v"; s]).collect()
    }

    fn suppressed_sized(sizes: &[usize], models: Vec<PrivacyModel>) -> Vec<bool> {
        let classes = sized(sizes);
        let refs: Vec<&[&str]> = classes.iter().map(Vec::as_slice).collect();
        suppressed_classes(&refs, None, models)
    }

    #[test]
    fn safe_sizes() {
        assert_eq!(safe_size(1.0), 1);
        assert_eq!(safe_size(0.5), 2);
        assert_eq!(safe_size(0.34), 3);
        assert_eq!(safe_size(1.0 / 3.0), 3);
        assert_eq!(safe_size(0.2), 5);
        assert_eq!(safe_size(0.1), 10);
        assert_eq!(safe_size(0.0999), 11);
    }

    #[test]
    fn average_risk_by_hand() {
        // Sizes 1, 1, 2, 3, 5 (n = 12): risk 5/12 = 0.417.
        // Threshold 0.45 holds; 0.3: without the two singletons 3/10 = 0.3 ✓ (one: 4/11 = 0.36).
        assert_eq!(
            suppressed_sized(&[1, 1, 2, 3, 5], vec![average(0.45)]),
            [false; 5]
        );
        assert_eq!(
            suppressed_sized(&[1, 1, 2, 3, 5], vec![average(0.3)]),
            [true, true, false, false, false]
        );
        // 0.25: 2/8 after also dropping the 2.
        assert_eq!(
            suppressed_sized(&[1, 1, 2, 3, 5], vec![average(0.25)]),
            [true, true, true, false, false]
        );
        // Ties: sizes 2, 2, 2, 6 (risk 4/12); threshold 0.3 needs one size-2 class less (3/10):
        // the one with the smallest code, i.e. the first to appear in the data (c0).
        assert_eq!(
            suppressed_sized(&[2, 2, 2, 6], vec![average(0.3)]),
            [true, false, false, false]
        );
    }

    #[test]
    fn relaxed_average_risk_by_hand() {
        // Highest risk 0.34 → classes below 3 records are at risk. Sizes 1, 2, 2, 3, 4 (n = 12):
        // average 5/12 ≤ 0.5 ✓; at risk 5/12 > 0.2. Drop 1: 4/11; drop a 2: 2/9 = 0.22;
        // drop the other 2: 0 ✓.
        let model = PrivacyModel::AverageRisk {
            threshold: 0.5,
            highest: Some(0.34),
            records_at_risk: Some(0.2),
        };
        assert_eq!(
            suppressed_sized(&[1, 2, 2, 3, 4], vec![model.clone()]),
            [true, true, true, false, false]
        );
        // A share of 0.25 stops after the first 2.
        let model = PrivacyModel::AverageRisk {
            threshold: 0.5,
            highest: Some(0.34),
            records_at_risk: Some(0.25),
        };
        assert_eq!(
            suppressed_sized(&[1, 2, 2, 3, 4], vec![model]),
            [true, true, false, false, false]
        );
    }

    #[test]
    fn sample_uniqueness_by_hand() {
        // Sizes 1, 1, 1, 2, 5 (n = 10): 3/10 uniques. Threshold 0.3 holds; 0.2: 2/9 = 0.22 after
        // one, 1/8 after two → the two singletons with the smallest codes (c0, c1).
        assert_eq!(
            suppressed_sized(&[1, 1, 1, 2, 5], vec![uniqueness(0.3)]),
            [false; 5]
        );
        assert_eq!(
            suppressed_sized(&[1, 1, 1, 2, 5], vec![uniqueness(0.2)]),
            [true, true, false, false, false]
        );
        // Combined with average risk 0.25: uniqueness alone needs c0, c1; the average then is
        // 3/8 > 0.25 → drop c2 (2/7 = 0.29) and c3 (1/5) as well.
        assert_eq!(
            suppressed_sized(&[1, 1, 1, 2, 5], vec![uniqueness(0.2), average(0.25)]),
            [true, true, true, true, false]
        );
    }

    #[test]
    fn suppressed_records_are_never_risky() {
        // k = 2 suppresses the two singletons first; the published classes 4, 4 have risk
        // 2/8 = 0.25. Threshold 0.25 holds as is. At 0.22 the published records alone are
        // judged: 0.25 > 0.22, 1/4 > 0.22, so everything goes (counting the suppressed records
        // as records would give 2/10 ✓, as one more class 3/10 ✗ — both wrong).
        let t = class_table(&[&["v"], &["v"], &["v"; 4], &["v"; 4]]);
        let build = |threshold: f64| -> Problem {
            problem(
                t.clone(),
                &[("g", &class_hierarchy(4))],
                &[],
                vec![PrivacyModel::KAnonymity { k: 2 }, average(threshold)],
                1.0,
            )
            .unwrap()
        };
        let p = build(0.25);
        assert_eq!(Checker::new(&p).check(&[0]).suppressed, 2);
        let p = build(0.22);
        assert_eq!(Checker::new(&p).check(&[0]).suppressed, 10);
    }

    #[test]
    fn anonymity_depends_on_the_suppression_limit() {
        // Sizes 1, 1, 1, 2, 5, uniqueness 0.2 suppresses 2 records: anonymous iff ⌊limit·10⌋ ≥ 2.
        let classes = sized(&[1, 1, 1, 2, 5]);
        let refs: Vec<&[&str]> = classes.iter().map(Vec::as_slice).collect();
        for (limit, anonymous) in [(0.1, false), (0.2, true)] {
            let p = problem(
                class_table(&refs),
                &[("g", &class_hierarchy(5))],
                &[],
                vec![uniqueness(0.2)],
                limit,
            )
            .unwrap();
            let r = Checker::new(&p).check(&[0]);
            assert_eq!(r.suppressed, 2);
            assert_eq!(r.anonymous, anonymous, "limit {limit}");
        }
    }

    #[test]
    fn relaxed_average_risk_is_not_monotone_with_suppression() {
        // Sizes 5, 4, 2, 2, 1 (n = 14, 4 records may go); c2 and c3 generalize into one class.
        // Level 0: drop 1 (4/13 = 0.31 > 0.28, at risk 8/13) and a 2 (3/11 = 0.27, at risk 6/11 =
        // 0.545) → 3 records. Level 1 (5, 4, 4, 1): drop 1 (3/13 = 0.23, at risk 8/13 = 0.62)
        // and a 4 (at risk 4/9) → 5 records.
        let model = PrivacyModel::AverageRisk {
            threshold: 0.28,
            highest: Some(0.2),
            records_at_risk: Some(0.55),
        };
        assert!(!model.monotonicity().suppression);
        let classes = sized(&[5, 4, 2, 2, 1]);
        let refs: Vec<&[&str]> = classes.iter().map(Vec::as_slice).collect();
        let h = "c0;c0;*\nc1;c1;*\nc2;m;*\nc3;m;*\nc4;c4;*";
        let p = problem(class_table(&refs), &[("g", h)], &[], vec![model], 0.3).unwrap();
        let checker = Checker::new(&p);
        let bottom = checker.check(&[0]);
        assert_eq!((bottom.suppressed, bottom.anonymous), (3, true));
        let up = checker.check(&[1]);
        assert_eq!((up.suppressed, up.anonymous), (5, false));
    }

    /// Zayatz's estimate by its literal formula: h_j = j·C(N−j, n−1)/C(N, n),
    /// U = c₁·((c₁/u)·h₁ / Σ_j (c_j/u)·h_j)/f (independent of the engine's log-space form).
    fn zayatz_share(sizes: &[u64], population: u64) -> f64 {
        let binomial =
            |a: u64, b: u64| (0..b).fold(1.0, |acc, i| acc * (a - i) as f64 / (i + 1) as f64);
        let n: u64 = sizes.iter().sum();
        let u = sizes.len() as f64;
        let c1 = sizes.iter().filter(|&&s| s == 1).count() as f64;
        if c1 == 0.0 {
            return 0.0;
        }
        let h = |j: u64| j as f64 * binomial(population - j, n - 1) / binomial(population, n);
        let sum: f64 = sizes.iter().map(|&j| h(j) / u).sum();
        let f = n as f64 / population as f64;
        c1 * ((c1 / u) * h(1) / sum) / f / population as f64
    }

    fn population(threshold: f64, estimator: Estimator) -> PrivacyModel {
        PrivacyModel::PopulationUniqueness {
            threshold,
            estimator,
        }
    }

    #[test]
    fn population_uniqueness_suppresses_sample_uniques_only() {
        // Sizes 1, 1, 1, 1, 2, 3, 5 (n = 14) in a population of 20 (Zayatz).
        let sizes = [1u64, 1, 1, 1, 2, 3, 5];
        let before = zayatz_share(&sizes, 20);
        for threshold in [before * 1.01, before * 0.7, before * 0.3, 0.0] {
            let classes = sized(&sizes.map(|s| s as usize));
            let refs: Vec<&[&str]> = classes.iter().map(Vec::as_slice).collect();
            let p = problem_with_population(
                class_table(&refs),
                &[("g", &class_hierarchy(sizes.len()))],
                &[],
                vec![population(threshold, Estimator::Zayatz)],
                1.0,
                Some(crate::population::PopulationModel::Size(20)),
            )
            .unwrap();
            let flags: Vec<bool> = suppressed_by_label(&p, &[0])
                .into_iter()
                .map(|(_, s)| s)
                .collect();
            let k = flags.iter().filter(|&&s| s).count();
            // Only uniques go, the ones with the smallest codes first.
            assert!(flags[..k].iter().all(|&s| s) && k <= 4, "{flags:?}");
            // The published classes fulfil the model (recomputed independently) …
            let published = &sizes[k..];
            let share = zayatz_share(published, 20);
            let uniques = published.iter().filter(|&&s| s == 1).count();
            assert!(
                (share > 0.0 && share <= threshold) || uniques == 0,
                "{threshold}: {share}"
            );
            // … and one unique fewer would not (the binary search stops at a boundary).
            if k > 0 {
                let share = zayatz_share(&sizes[k - 1..], 20);
                assert!(share > threshold, "{threshold}: {share}");
            }
            if threshold >= before {
                assert_eq!(k, 0);
            }
            if threshold == 0.0 {
                assert_eq!(k, 4);
            }
        }
    }

    /// Among classes of equal size, the one whose suppression loses the least information goes
    /// first (ARX: the most informative first).
    #[test]
    fn ties_suppress_the_cheapest_class_under_the_quality_model() {
        // Level 1: a specific singleton (share 1/5), a general one (3 of the 5 leaves) and 5
        // records of z. Sample uniqueness 0.2 needs one singleton suppressed (2/7 → 1/6). Loss
        // charges 1 − share per suppressed record: the general singleton is cheaper (0.4 < 0.8).
        // Both layouts, so that the order of the codes cannot decide.
        let rows = ["x", "y", "z", "z", "z", "z", "z"];
        for (h, general) in [
            ("x;x;*\ny;Y;*\ny2;Y;*\ny3;Y;*\nz;z;*", "Y"),
            ("x;X;*\nx2;X;*\nx3;X;*\ny;y;*\nz;z;*", "X"),
        ] {
            let p = problem(
                table(&["g"], &rows),
                &[("g", h)],
                &[],
                vec![uniqueness(0.2)],
                1.0,
            )
            .unwrap();
            let suppressed: Vec<String> = suppressed_by_label(&p, &[1])
                .into_iter()
                .filter(|(_, s)| *s)
                .map(|(l, _)| l)
                .collect();
            assert_eq!(suppressed, [general.to_string()], "{h}");
        }
    }

    #[test]
    fn population_uniqueness_needs_a_population() {
        let t = class_table(&[&["v"], &["v", "v"]]);
        let e = problem(
            t,
            &[("g", &class_hierarchy(2))],
            &[],
            vec![
                PrivacyModel::KAnonymity { k: 1 },
                population(0.001, Estimator::Dankar),
            ],
            0.0,
        )
        .unwrap_err();
        let (field, message) = e.config_error().unwrap();
        assert_eq!(field, "population");
        assert!(message.contains("privacy[1]"), "{message}");
    }

    /// ARX declares population uniqueness with Zayatz's estimator monotone under generalization;
    /// it is not: merging two classes of size 2 into one of 4 lowers h_j (a class of 4 is less
    /// likely to be sampled exactly once than two of 2) and raises the estimate.
    #[test]
    fn population_uniqueness_is_not_monotone_under_generalization() {
        // Sizes {1, 2, 2} → {1, 4} (n = 5, N = 10): Zayatz share 0.062 → 0.135.
        let (low, high) = (zayatz_share(&[1, 2, 2], 10), zayatz_share(&[1, 4], 10));
        assert!(low < 0.1 && high > 0.1, "{low} {high}");
        let model = population(0.1, Estimator::Zayatz);
        assert!(!model.monotonicity().generalization);
        let t = table(&["g"], &["u", "a", "a", "b", "b"]);
        let h = "u;u;*\na;m;*\nb;m;*";
        let p = problem_with_population(
            t,
            &[("g", h)],
            &[],
            vec![model],
            0.0,
            Some(crate::population::PopulationModel::Size(10)),
        )
        .unwrap();
        let checker = Checker::new(&p);
        assert!(checker.check(&[0]).anonymous);
        assert!(!checker.check(&[1]).anonymous);
        assert_eq!(
            p.privacy_monotonicity(),
            crate::problem::PrivacyMonotonicity::None
        );
    }

    proptest! {
        #[test]
        fn enforce_ignores_class_order(
            sizes in prop::collection::vec(1u32..5, 1..30),
            pre in prop::collection::vec(any::<bool>(), 30),
            rotate in 0usize..30,
            threshold in 0.05f64..0.6,
            which in 0u8..3,
        ) {
            let model = match which {
                0 => PreparedSampleModel::average_risk(threshold, None),
                1 => PreparedSampleModel::average_risk(0.9, Some((threshold, threshold / 2.0))),
                _ => PreparedSampleModel::sample_uniqueness(threshold),
            };
            let models = [model];
            let n = sizes.len();
            // Class c has the codes (c / 3, c % 3): many equal sizes, distinct codes.
            let codes: Vec<u32> = (0..n as u32).flat_map(|c| [c / 3, c % 3]).collect();
            let mut flags: Vec<bool> = (0..n).map(|c| pre[c]).collect();
            let newly = enforce(&models, &sizes, &codes, &mut flags, &|_| 0.0);
            // The same classes in another order.
            let perm: Vec<usize> = (0..n).map(|i| (i + rotate) % n).rev().collect();
            let sizes2: Vec<u32> = perm.iter().map(|&c| sizes[c]).collect();
            let codes2: Vec<u32> = perm.iter().flat_map(|&c| [codes[2 * c], codes[2 * c + 1]]).collect();
            let mut flags2: Vec<bool> = perm.iter().map(|&c| pre[c]).collect();
            let newly2 = enforce(&models, &sizes2, &codes2, &mut flags2, &|_| 0.0);
            prop_assert_eq!(newly, newly2);
            for (i, &c) in perm.iter().enumerate() {
                prop_assert_eq!(flags[c], flags2[i]);
            }
            // The result fulfils the model and no smaller prefix would.
            let published: Vec<u32> = (0..n).filter(|&c| !flags[c]).map(|c| sizes[c]).collect();
            let limit = models[0].small_below();
            let small: u64 = published.iter().filter(|&&s| s < limit).map(|&s| s as u64).sum();
            let records: u64 = published.iter().map(|&s| s as u64).sum();
            prop_assert!(models[0].holds(published.len() as u64, records, small));
            // Only previously published classes were suppressed, smallest first.
            let newly_sizes: Vec<u32> = (0..n).filter(|&c| flags[c] && !pre[c]).map(|c| sizes[c]).collect();
            prop_assert_eq!(newly_sizes.iter().map(|&s| s as usize).sum::<usize>(), newly);
            if let Some(&largest) = newly_sizes.iter().max() {
                prop_assert!(published.iter().all(|&s| s >= largest));
            }
        }
    }

    /// Classes that appear in a different order depending on how they are grouped: the check
    /// (regrouping snapshots of earlier checks) and the evaluation (grouping the data) must agree.
    #[test]
    fn sample_based_results_do_not_depend_on_snapshots() {
        // QIs a (a0..a5 → A0/A1 → *) and b (b0..b3 → B0/B1 → *); many classes of equal size.
        // Combination x = (a, b) has 1 + (5x mod 7) records; rows are emitted round robin over
        // a scrambled order of the combinations.
        let sizes: Vec<usize> = (0..24).map(|x| 1 + (5 * x) % 7).collect();
        let mut rows = Vec::new();
        for round in 0..7 {
            for j in 0..24usize {
                let x = (j * 11 + 5) % 24;
                if round < sizes[x] {
                    rows.push(format!("a{};b{};v", x % 6, x / 6));
                }
            }
        }
        let refs: Vec<&str> = rows.iter().map(String::as_str).collect();
        let t = table(&["a", "b", "s"], &refs);
        let ha = "a0;A0;*\na1;A1;*\na2;A0;*\na3;A1;*\na4;A0;*\na5;A1;*";
        let hb = "b0;B0;*\nb1;B1;*\nb2;B1;*\nb3;B0;*";
        for model in [
            average(0.04),
            uniqueness(0.01),
            PrivacyModel::AverageRisk {
                threshold: 0.2,
                highest: Some(0.1),
                records_at_risk: Some(0.3),
            },
            population(0.005, Estimator::Zayatz),
            population(0.005, Estimator::Pitman),
            population(0.001, Estimator::Dankar),
        ] {
            let p = problem_with_population(
                t.clone(),
                &[("a", ha), ("b", hb)],
                &[],
                vec![model.clone()],
                0.5,
                Some(crate::population::PopulationModel::SamplingFraction(0.3)),
            )
            .unwrap();
            let nodes: Vec<Vec<u8>> = {
                let mut v = Vec::new();
                p.lattice().for_each(|l| v.push(l.to_vec()));
                v
            };
            let reference: Vec<_> = nodes
                .iter()
                .map(|l| Checker::new(&p).evaluate(l).result)
                .collect();
            // Several visiting orders, each with a fresh checker (and snapshot cache).
            for order in 0..4usize {
                let checker = Checker::new(&p);
                let mut idx: Vec<usize> = (0..nodes.len()).collect();
                match order {
                    0 => {}
                    1 => idx.reverse(),
                    2 => idx.sort_by_key(|&i| (i * 5) % nodes.len()),
                    _ => idx.sort_by_key(|&i| std::cmp::Reverse((i * 7) % nodes.len())),
                }
                for &i in &idx {
                    assert_eq!(
                        checker.check(&nodes[i]),
                        reference[i],
                        "{model} at {:?}",
                        nodes[i]
                    );
                }
            }
            assert!(reference.iter().any(|r| r.suppressed > 0), "{model}");
        }
    }
}
