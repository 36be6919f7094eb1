//! SafePub's differentially private search (Bild, Kuhn, Prasser, PoPETs 2018;
//! `docs/definitions.md` §3.9). On a lattice of at most [`MAX_SCANNED`] transformations one
//! exponential mechanism with the whole ε_search draws the result among all of them (scored by
//! `scan`). On larger lattices (and for the entropy score) a walk from the top: each of `steps`
//! steps adds the predecessors of the current pivot to the candidates, removes the pivot and
//! draws the next pivot with the exponential mechanism (ε_search / (4 · steps) per step); one
//! more (¾ ε_search) on the same score chooses the result among the pivots visited. ARX returns
//! the pivot with the best exact score, a data-dependent choice no ε covers; deid does not.
//!
//! Scores are measured on the whole input: records not drawn into the sample count as
//! suppressed. Higher is better. With d quasi-identifiers, k the least class size, n the
//! input's records, w the ramp of [`kept_weight`]:
//!
//! | quality model | score | sensitivity |
//! |---|---|---|
//! | `loss` | −Σ_E (w(\|E\|) · L_E + (\|E\| − w(\|E\|)) · d) − d · unsampled, L_E = Σ over QIs of the normalized domain share | d · max(min(2, k) − 1, 1) |
//! | `precision` | as `loss`, L_E = Σ over QIs of level/(height − 1) | the same |
//! | `discernibility` | −(Σ kept classes \|E\|² + n · suppressed) | n · (5 if k = 1, else k²/(k − 1) + 1) |
//! | `aecs` | kept classes + 1 if any record is suppressed | 1 |
//! | `entropy` | −Σ over QIs of Σ over sampled records of −log₂ P(x \| y) | d · (2k − 1) · (log₂(n + 2) + log₂ e) |
//!
//! Loss and precision: a record joining or leaving a class E changes that class's cost only
//! (every record of a class has the same generalized values), by d − Δw · (d − L_E) with Δw, the
//! change of w, in [0, min(2, k)] and d − L_E in [0, d]: so by at most d · max(min(2, k) − 1,
//! 1). An unsampled record changes the cost by d. Discernibility treats n as public, as ARX
//! does.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{Rng, SeedableRng};

mod scan;

pub use scan::MAX_SCANNED;

use super::Ctx;
use crate::error::Result;
use crate::lattice::Levels;
use crate::privacy::dp::SEARCH_STREAM;
use crate::problem::Problem;
use crate::quality::QualityModel;

/// The score functions of the search (one per supported quality model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreFunction {
    /// Granularity (Iyengar's loss): domain shares.
    Loss,
    /// Generalization intensity (Sweeney's precision).
    Precision,
    /// Discernibility.
    Discernibility,
    /// Number of classes (the inverse of the average class size).
    Aecs,
    /// Non-uniform entropy: the conditional entropy of the original values given the output's.
    Entropy,
}

impl ScoreFunction {
    /// The score function of a quality model; errors name `quality.model`.
    pub fn of(model: QualityModel) -> Result<ScoreFunction> {
        crate::problem::dp_search_quality(model)?;
        Ok(match model {
            QualityModel::Loss => ScoreFunction::Loss,
            QualityModel::Precision => ScoreFunction::Precision,
            QualityModel::Discernibility => ScoreFunction::Discernibility,
            QualityModel::Entropy => ScoreFunction::Entropy,
            _ => ScoreFunction::Aecs,
        })
    }

    /// The sensitivity of the score for `n` input records, `d` quasi-identifiers and least
    /// class size `k`.
    pub fn sensitivity(self, n: u64, d: usize, k: u32) -> f64 {
        let k = k.max(1) as f64;
        match self {
            ScoreFunction::Loss | ScoreFunction::Precision => {
                d as f64 * (RAMP_SLOPE.min(k) - 1.0).max(1.0)
            }
            ScoreFunction::Discernibility => {
                let c = if k == 1.0 {
                    5.0
                } else {
                    k * k / (k - 1.0) + 1.0
                };
                n.max(1) as f64 * c
            }
            ScoreFunction::Aecs => 1.0,
            ScoreFunction::Entropy => {
                d as f64 * (2.0 * k - 1.0) * (((n as f64) + 2.0).log2() + std::f64::consts::LOG2_E)
            }
        }
    }

    /// The score (higher = better) of the sample's classes at one transformation measured on
    /// the whole input: `unsampled` records were not drawn, `n` is the input's records, `d`
    /// the number of quasi-identifiers and `k` the least class size (smaller classes are
    /// suppressed). Entropy is not a function of the classes alone (NaN here): see
    /// [`entropy_score`].
    pub fn score<I>(self, classes: I, unsampled: u64, n: u64, d: usize, k: u32) -> f64
    where
        I: IntoIterator<Item = ClassScore>,
        I::IntoIter: Clone,
    {
        let classes = classes.into_iter();
        let k = u64::from(k.max(1));
        let d_f = d as f64;
        let kept = |c: &ClassScore| c.count >= k;
        let suppressed: u64 = unsampled
            + (classes.clone())
                .filter(|c| c.count < k)
                .map(|c| c.count)
                .sum::<u64>();
        match self {
            ScoreFunction::Loss | ScoreFunction::Precision => {
                let loss = |c: &ClassScore| match self {
                    ScoreFunction::Loss => c.loss,
                    _ => c.precision,
                };
                let cost: f64 = classes
                    .map(|c| {
                        let w = kept_weight(c.count, k);
                        w * loss(&c) + (c.count as f64 - w) * d_f
                    })
                    .sum();
                -(cost + unsampled as f64 * d_f)
            }
            ScoreFunction::Discernibility => {
                let kept: f64 = (classes.filter(kept))
                    .map(|c| (c.count * c.count) as f64)
                    .sum();
                -(kept + (n * suppressed) as f64)
            }
            ScoreFunction::Aecs => {
                classes.filter(kept).count() as f64 + if suppressed > 0 { 1.0 } else { 0.0 }
            }
            // Not a function of the classes alone (see `entropy_score`).
            ScoreFunction::Entropy => f64::NAN,
        }
    }
}

/// The slope of the Loss and precision scores' ramp below k ([`kept_weight`]): the scores'
/// sensitivity is d · max(min(slope, k) − 1, 1).
pub const RAMP_SLOPE: f64 = 2.0;

/// How many of a class's `count` records the Loss and precision scores count as kept (the
/// others cost d, as suppressed): all from k on; below k, max(0, k − s · (k − count)) with s
/// = [`RAMP_SLOPE`], so that one record more or less changes the weight by at most
/// min(s, k) (by 1 from k on) — a ramp instead of the step at k, whose height k makes the
/// sensitivity of the exact suppression d · (k − 1).
pub fn kept_weight(count: u64, k: u64) -> f64 {
    if count >= k {
        count as f64
    } else {
        (k as f64 - RAMP_SLOPE * (k - count) as f64).max(0.0)
    }
}

/// One class as the score functions see it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassScore {
    /// Sampled records in the class.
    pub count: u64,
    /// Σ over the quasi-identifiers of the domain share of the class's value, normalized
    /// between 1/domain size and 1 (each in [0, 1]).
    pub loss: f64,
    /// Σ over the quasi-identifiers of level/(height − 1) (each in [0, 1]).
    pub precision: f64,
}

/// The probabilities with which the exponential mechanism picks each of `scores` (already
/// divided by their sensitivity) with ε = `epsilon`: proportional to exp(ε · score / 2).
pub fn selection_probabilities(scores: &[f64], epsilon: f64) -> Vec<f64> {
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = scores
        .iter()
        .map(|s| (0.5 * epsilon * (s - max)).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    weights.iter().map(|w| w / total).collect()
}

/// Draws an index with the probabilities of [`selection_probabilities`].
pub fn select(scores: &[f64], epsilon: f64, rng: &mut impl Rng) -> usize {
    let p = selection_probabilities(scores, epsilon);
    let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
    let mut acc = 0.0;
    for (i, q) in p.iter().enumerate() {
        acc += q;
        if u < acc {
            return i;
        }
    }
    p.len() - 1
}

/// The entropy score of one quasi-identifier (higher = better): `cells` are (original value x,
/// generalized value y or `None` for suppressed, sampled records), a pair may repeat. The
/// definition the search's fast path (`Scorer`) must equal.
pub fn entropy_score(cells: impl IntoIterator<Item = (u32, Option<u32>, u64)>) -> f64 {
    use std::collections::HashMap;
    let mut xy: HashMap<(u32, Option<u32>), u64> = HashMap::new();
    let mut y: HashMap<Option<u32>, u64> = HashMap::new();
    for (xv, yv, c) in cells {
        *xy.entry((xv, yv)).or_default() += c;
        *y.entry(yv).or_default() += c;
    }
    -(y.values().map(|&c| mlog(c)).sum::<f64>() - xy.values().map(|&c| mlog(c)).sum::<f64>())
}

/// m log₂ m (0 for m = 0).
fn mlog(m: u64) -> f64 {
    if m == 0 {
        0.0
    } else {
        m as f64 * (m as f64).log2()
    }
}

/// Scores transformations of a problem for the search (divided by the sensitivity).
struct Scorer<'p> {
    problem: &'p Problem,
    function: ScoreFunction,
    sensitivity: f64,
    /// Input records not drawn into the sample.
    unsampled: u64,
    /// Input records.
    n: u64,
    /// Entropy: per QI, Σ_x c(x) log₂ c(x) over the sampled value counts.
    x_terms: Vec<f64>,
    /// Entropy: per QI and level, sampled records per generalized code (empty for the other
    /// score functions).
    y_counts: Vec<Vec<Vec<u64>>>,
}

impl<'p> Scorer<'p> {
    fn new(problem: &'p Problem, function: ScoreFunction, n: u64) -> Scorer<'p> {
        let d = problem.quasi_identifiers().len();
        let x_terms = (0..d)
            .map(|i| {
                problem
                    .qi_value_counts(i)
                    .iter()
                    .map(|&c| mlog(c.into()))
                    .sum()
            })
            .collect();
        Scorer {
            problem,
            function,
            sensitivity: function.sensitivity(n, d, problem.min_class_size()),
            unsampled: n - problem.rows() as u64,
            n,
            x_terms,
            y_counts: match function {
                ScoreFunction::Entropy => y_counts(problem),
                _ => Vec::new(),
            },
        }
    }

    /// The score of `levels` divided by the sensitivity.
    fn score(&self, checker: &crate::check::Checker<'_>, levels: &[u8]) -> f64 {
        let e = checker.evaluate(levels);
        let raw = match self.function {
            ScoreFunction::Entropy => self.entropy(&e, levels),
            f => {
                let d = levels.len();
                f.score(
                    classes_of(self.problem, &e, levels),
                    self.unsampled,
                    self.n,
                    d,
                    self.problem.min_class_size(),
                )
            }
        };
        raw / self.sensitivity
    }

    /// Σ over the QIs of [`entropy_score`], from the precomputed counts and the suppressed
    /// base groups only.
    fn entropy(&self, e: &crate::check::Evaluation, levels: &[u8]) -> f64 {
        use std::collections::HashMap;
        let problem = self.problem;
        let base = problem.base_groups();
        let d = levels.len();
        let suppressed: Vec<usize> = (0..base.len())
            .filter(|&b| base.counts[b] > 0 && e.suppressed[e.class_of_base[b] as usize])
            .collect();
        let mut total = 0.0;
        for (i, &level) in levels.iter().enumerate() {
            let h = &problem.hierarchies()[i];
            let map = h.generalize(0, level as usize);
            let (mut sx, mut sy) = (HashMap::<u32, u64>::new(), HashMap::<u32, u64>::new());
            for &b in &suppressed {
                let x = base.codes[b * d + i];
                let c = u64::from(base.counts[b]);
                *sx.entry(x).or_default() += c;
                *sy.entry(map.get(x)).or_default() += c;
            }
            let c0 = problem.qi_value_counts(i);
            let ny = &self.y_counts[i][level as usize];
            let s: u64 = sx.values().sum();
            let mut f = ny.iter().map(|&c| mlog(c)).sum::<f64>() + mlog(s) - self.x_terms[i];
            for (&y, &c) in &sy {
                f -= mlog(ny[y as usize]) - mlog(ny[y as usize] - c);
            }
            for (&x, &c) in &sx {
                let all = u64::from(c0[x as usize]);
                f += mlog(all) - mlog(all - c) - mlog(c);
            }
            total -= f;
        }
        total
    }
}

/// Sampled records per generalized code, per QI and level.
fn y_counts(problem: &Problem) -> Vec<Vec<Vec<u64>>> {
    (problem.hierarchies().iter().enumerate())
        .map(|(i, h)| {
            (0..h.height())
                .map(|level| {
                    let map = h.generalize(0, level);
                    let mut counts = vec![0u64; h.distinct(level)];
                    for (x, &c) in problem.qi_value_counts(i).iter().enumerate() {
                        counts[map.get(x as u32) as usize] += u64::from(c);
                    }
                    counts
                })
                .collect()
        })
        .collect()
}

/// The classes of an evaluation as the score functions see them.
fn classes_of(problem: &Problem, e: &crate::check::Evaluation, levels: &[u8]) -> Vec<ClassScore> {
    let d = levels.len();
    let hierarchies = problem.hierarchies();
    (0..e.groups.len())
        .map(|c| {
            let codes = &e.groups.codes[c * d..(c + 1) * d];
            let mut loss = 0.0;
            let mut precision = 0.0;
            for (i, (&code, &level)) in codes.iter().zip(levels).enumerate() {
                let h = &hierarchies[i];
                loss += normalized_share(h, level as usize, code);
                if h.height() > 1 {
                    precision += level as f64 / (h.height() - 1) as f64;
                }
            }
            ClassScore {
                count: e.groups.counts[c] as u64,
                loss,
                precision,
            }
        })
        .collect()
}

/// The domain share of a generalized value normalized between the share of one value
/// (1/domain size: no loss) and 1, as ARX's Loss and granularity normalize it (in [0, 1]).
pub(super) fn normalized_share(
    h: &crate::hierarchy::EncodedHierarchy,
    level: usize,
    code: u32,
) -> f64 {
    let min = 1.0 / h.domain_size.max(1) as f64;
    if min >= 1.0 {
        return 0.0;
    }
    ((h.share(level, code) - min) / (1.0 - min)).clamp(0.0, 1.0)
}

/// The share of ε_search a walk spends on the final choice among the visited pivots; the steps
/// share the rest equally (¾ kept the most utility of adult's walk among ½, ¾ and 9/10).
pub const FINAL_SELECTION_SHARE: f64 = 0.75;

/// How the search spends ε_search over `steps` steps: (ε of each step's exponential mechanism,
/// ε of the final choice). By sequential composition they add up to at most ε_search: each
/// part is rounded down until their sum, computed in `f64`, does not exceed it.
pub fn search_epsilons(epsilon_search: f64, steps: u32) -> (f64, f64) {
    let steps = f64::from(steps.max(1));
    let mut final_choice = epsilon_search * FINAL_SELECTION_SHARE;
    let mut per_step = (epsilon_search - final_choice) / steps;
    while per_step * steps + final_choice > epsilon_search {
        per_step = per_step.next_down();
        final_choice = final_choice.next_down();
    }
    (per_step, final_choice)
}

/// Runs the search on a problem with data-dependent differential privacy: one exponential
/// mechanism with the whole ε_search over every transformation when the lattice is small
/// ([`scan::MAX_SCANNED`]); otherwise `steps` steps of the exponential mechanism from the top,
/// then one more choosing the result among the pivots visited on the same scores
/// ([`search_epsilons`]). Either way the result is chosen privately. Returns false (the result
/// is not a proven optimum).
pub(super) fn run(ctx: &mut Ctx<'_, '_>) -> bool {
    let problem = ctx.problem;
    let Some(dp) = problem.dp() else {
        return false;
    };
    let Ok(function) = ScoreFunction::of(problem.quality_config().model) else {
        return false;
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(dp.model.seed ^ SEARCH_STREAM);
    let chosen = match scan::Scan::new(problem, function, dp.rows as u64) {
        Some(scan) => choose_from_lattice(ctx, scan, function, dp.params.epsilon_search, &mut rng),
        None => walk(ctx, function, &mut rng),
    };
    if let Some(chosen) = chosen {
        let r = ctx.checker.check(&chosen);
        ctx.offer(&r);
    }
    false
}

/// The raw score (not divided by the sensitivity) of every transformation of a differentially
/// private problem by lattice id, as the exponential mechanism over the whole lattice sees
/// them; `None` when the search walks instead (a lattice larger than [`scan::MAX_SCANNED`],
/// packed keys beyond 64 bits, or the entropy score).
pub fn lattice_scores(problem: &Problem) -> Option<Vec<f64>> {
    let dp = problem.dp()?;
    let function = ScoreFunction::of(problem.quality_config().model).ok()?;
    scan::Scan::new(problem, function, dp.rows as u64)?.run(None, false, &|| false)
}

/// The exponential mechanism with `epsilon` over every transformation of the lattice, scored
/// by `scan` (`None` if the search was stopped first).
fn choose_from_lattice(
    ctx: &mut Ctx<'_, '_>,
    scan: scan::Scan<'_>,
    function: ScoreFunction,
    epsilon: f64,
    rng: &mut Xoshiro256PlusPlus,
) -> Option<Levels> {
    let problem = ctx.problem;
    let d = problem.quasi_identifiers().len();
    let n = problem.dp()?.rows as u64;
    let sensitivity = function.sensitivity(n, d, problem.min_class_size());
    let this = &*ctx;
    let stop = || this.interrupted();
    let raw = scan.run(ctx.pool, ctx.parallel, &stop)?;
    let scores: Vec<f64> = raw.iter().map(|s| s / sensitivity).collect();
    ctx.set_explored(scores.len() as u64);
    ctx.set_algorithm_progress(1.0);
    problem
        .lattice()
        .levels_of(select(&scores, epsilon, rng) as u128)
}

/// The walk of `steps` steps from the top and the final choice among its pivots (`None` if no
/// pivot was scored).
fn walk(
    ctx: &mut Ctx<'_, '_>,
    function: ScoreFunction,
    rng: &mut Xoshiro256PlusPlus,
) -> Option<Levels> {
    let problem = ctx.problem;
    let dp = problem.dp()?;
    let scorer = Scorer::new(problem, function, dp.rows as u64);
    let steps = dp.model.steps;
    let (epsilon, epsilon_final) = search_epsilons(dp.params.epsilon_search, steps);
    let lattice = problem.lattice();
    let mut pivot: Levels = lattice.top();
    let top_score = scorer.score(ctx.checker, &pivot);
    // The pivots, each once: a pivot leaves the candidates and never enters them again.
    let mut pivots: Vec<(Levels, f64)> = vec![(pivot.clone(), top_score)];
    let mut candidates: Vec<(Levels, f64)> = vec![(pivot.clone(), top_score)];
    let mut seen: std::collections::HashSet<Levels> = std::collections::HashSet::new();
    seen.insert(pivot.clone());
    for step in 1..=steps {
        if ctx.should_stop() {
            break;
        }
        let fresh: Vec<Levels> = (lattice.predecessors(&pivot).into_iter())
            .filter(|p| seen.insert(p.clone()))
            .collect();
        let nodes: Vec<&Levels> = fresh.iter().collect();
        let scores = ctx.run_parallel(&nodes, |checker, levels| scorer.score(checker, levels));
        if scores.iter().any(Option::is_none) {
            break; // time limit or cancelled
        }
        candidates.extend(fresh.into_iter().zip(scores.into_iter().flatten()));
        candidates.retain(|(l, _)| *l != pivot);
        if candidates.is_empty() {
            break;
        }
        let scores: Vec<f64> = candidates.iter().map(|(_, s)| *s).collect();
        let next = candidates[select(&scores, epsilon, rng)].clone();
        pivot = next.0.clone();
        pivots.push(next);
        ctx.add_expansions(1);
        ctx.set_algorithm_progress(step as f64 / steps as f64);
    }
    let scores: Vec<f64> = pivots.iter().map(|(_, s)| *s).collect();
    Some(pivots[select(&scores, epsilon_final, rng)].0.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safepub_search_spends_a_quarter_on_the_steps_and_the_rest_on_the_final_choice() {
        for (eps, steps) in [(0.1, 200), (0.05, 1), (0.2, 7), (1.0, 10_000)] {
            let (step, last) = search_epsilons(eps, steps);
            assert!(last <= 0.75 * eps && 0.75 * eps - last <= 1e-12 * eps);
            assert!((step - eps / (4.0 * f64::from(steps))).abs() <= 1e-12 * eps);
            // Sequential composition: the steps and the final choice spend ε_search, never more.
            let total = step * f64::from(steps) + last;
            assert!(
                total <= eps && eps - total <= 1e-12 * eps,
                "{total} ≠ {eps}"
            );
        }
    }
}
