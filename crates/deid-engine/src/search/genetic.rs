//! The genetic algorithm of ARX (Prasser et al., GigaScience 2020, after Wan et al. 2017;
//! `docs/definitions.md` §2.3). An individual is a transformation (one gene per
//! quasi-identifier). Its fitness orders anonymous individuals before non-anonymous ones, then by
//! score (lower = fitter; measured for non-anonymous transformations too), rank and levels. ARX
//! ranks by score alone, so without suppression the low scores of non-anonymous transformations
//! near the bottom crowd out every solution (on cup and mach2019_int at 0 % it returns the top,
//! Loss 1.0; this order finds Loss 0.78 and 0.70 in 5 s).
//!
//! Two subpopulations of [`GeneticParams::subpopulation_size`] individuals. The first starts
//! with the "triangle" (individual i has the maximal level for QIs 0..=i and the minimal level
//! for the others), the rest of it and all of the second are uniformly random. Each generation,
//! per subpopulation (sorted by fitness):
//! 1. the ⌈elite·k⌉ fittest are kept;
//! 2. the ⌈crossover·k⌉ least fit are replaced by children of two parents drawn (with
//!    replacement) from the ⌈production·k⌉ fittest with probability ∝ 1 − relative score; each
//!    gene comes from either parent with probability ½;
//! 3. all others are replaced by mutants of random individuals of the old generation: between 1
//!    and ⌈mutation·#QIs⌉ distinct genes are set to a different random level;
//! 4. every `immigration_interval` generations copies of the ⌊immigration·k⌋ fittest of each
//!    subpopulation replace the least fit of the other. ARX 3.9.2 computes this count as
//!    `(int) fraction * k`, which is always 0, so immigration never happens there; here it does.
//!
//! ARX stops after `iterations` generations (also here with
//! [`GeneticParams::stop_after_iterations`]). By default evolution goes on until the time limit:
//! when the fittest individual has not improved for `iterations` generations, both
//! subpopulations keep their elite and are re-seeded at random. Once every transformation of the
//! space has been checked the search ends with the proven optimum.
//!
//! Every individual is checked once (results are cached); new individuals of a generation are
//! checked as one parallel batch. All randomness comes from a Xoshiro256++ generator seeded with
//! [`SearchConfig::seed`](super::SearchConfig::seed), and it is drawn on the search thread only,
//! so a seed gives the same result with any number of threads.

use std::collections::HashMap;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::{Ctx, GeneticParams, Phase, exact_cmp};
use crate::lattice::Levels;

/// Most of the best anonymous transformations `auto`'s other members found that seed the second
/// subpopulation when the genetic member starts: top-down's first descent passes many good
/// ones, and recombining them starts the evolution where random individuals take hundreds of
/// checks to get (creditcard_int, 5 % and 100 % suppression, 1 s: docs/scale.md §1). A quarter
/// of the member's [`PORTFOLIO_SUBPOPULATION`]: with half of it (10) the population crowded
/// around top-down's solution on mach2019_int at 5 % suppression; with none, 9 of 32 runs at
/// 1 s were more than 1 % worse than the best single algorithm.
pub const PORTFOLIO_SEEDS: usize = 5;

/// Most individuals per subpopulation of `auto`'s genetic member (the genetic algorithm's own
/// default is 50, [`GeneticParams::subpopulation_size`]). Within the slices a short limit
/// leaves it, smaller subpopulations go through more generations and converge sooner: at 1 s
/// on creditcard_int and mach2019_int (5 % and 100 % suppression, seeds 0–7) the runs more than
/// 1 % worse than the best single algorithm fell from 11 to 4 of 32 idle and from 14 to 1 beside
/// a busy thread; at 5 s nothing changed beyond the runs' noise (docs/scale.md §1). 30 was no
/// better at 1 s.
pub const PORTFOLIO_SUBPOPULATION: usize = 20;

/// Pair moves of its fittest individual that each subpopulation of `auto`'s genetic member
/// gets per generation, in place of as many mutants: one gene a level down, another a level up
/// — a step to a neighbour of the same height, which single-gene mutation never makes and
/// uniform crossover rarely once the population crowds around one solution. Over seeds 0–31 of
/// creditcard_int and mach2019_int at 0, 5 and 100 % suppression, read at nine check counts
/// from 500 to 2,000, the readings more than 1 % worse than the best single algorithm of the
/// seed fell from 90 to 27 — mostly mach2019_int at 5 %, where the member stayed at 0.5326
/// with its 20 individuals around top-down's solution; 4 moves gave 30 on seeds 0–15, 2 gave 15.
/// On 1 M synthetic rows at 60 s, 7 of seeds 0–7 ended at Loss 0.2535 against 4 without
/// (docs/scale.md §1). The genetic algorithm alone keeps ARX's operators.
pub const PORTFOLIO_PAIR_MOVES: usize = 2;

#[derive(Debug, Clone, Copy)]
struct Fitness {
    score: f64,
    anonymous: bool,
}

struct Genetic<'c> {
    params: GeneticParams,
    min: &'c [u8],
    max: &'c [u8],
    rng: Xoshiro256PlusPlus,
    cache: HashMap<Levels, Fitness>,
    /// Pair moves of each subpopulation's fittest individual per generation
    /// ([`PORTFOLIO_PAIR_MOVES`] in `auto`'s genetic member, 0 alone).
    pair_moves: usize,
}

/// What the populations wait for: their new individuals must be evaluated before the next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// Nothing: the next generation can be bred.
    Nothing,
    /// Fresh populations: the initial ones, or re-seeded after stagnation.
    Fresh,
    /// A new generation.
    Generation,
    /// The best solution of `auto`'s other members, adopted into the second subpopulation.
    Adopted,
}

/// A run of the genetic algorithm that can stop at any point (a limit, or the end of a slice
/// of `auto`'s portfolio) and [resume](Evolution::resume) exactly where it stopped: the
/// populations, the generator and the counters persist, so an interrupted run continues the
/// same evolution instead of starting again.
pub(crate) struct Evolution<'p> {
    g: Genetic<'p>,
    pops: [Vec<Levels>; 2],
    best: Levels,
    stale: u32,
    generation: u64,
    pending: Pending,
}

impl<'p> Evolution<'p> {
    /// The initial populations (not yet evaluated) with the configured parameters.
    pub(crate) fn new(ctx: &Ctx<'_, 'p>) -> Evolution<'p> {
        Self::with_params(ctx, ctx.config().genetic)
    }

    /// The initial populations of `auto`'s genetic member: the configured parameters with at
    /// most [`PORTFOLIO_SUBPOPULATION`] individuals per subpopulation.
    pub(crate) fn for_portfolio(ctx: &Ctx<'_, 'p>) -> Evolution<'p> {
        let mut params = ctx.config().genetic;
        params.subpopulation_size = params.subpopulation_size.min(PORTFOLIO_SUBPOPULATION);
        let mut e = Self::with_params(ctx, params);
        e.g.pair_moves = PORTFOLIO_PAIR_MOVES;
        e
    }

    /// The initial populations (not yet evaluated) with `params`.
    fn with_params(ctx: &Ctx<'_, 'p>, params: GeneticParams) -> Evolution<'p> {
        let lattice = ctx.lattice();
        let mut g = Genetic {
            params,
            min: lattice.min(),
            max: lattice.max(),
            rng: Xoshiro256PlusPlus::seed_from_u64(ctx.config().seed),
            cache: HashMap::new(),
            pair_moves: 0,
        };
        let k = params.subpopulation_size;
        let q = lattice.dimensions();
        let mut z1: Vec<Levels> = (0..k.min(q))
            .map(|i| {
                (0..q)
                    .map(|j| if j <= i { g.max[j] } else { g.min[j] })
                    .collect()
            })
            .collect();
        while z1.len() < k {
            let r = g.random_individual();
            z1.push(r);
        }
        let mut z2: Vec<Levels> = (0..k).map(|_| g.random_individual()).collect();
        // In `auto`'s portfolio the best solutions found by the other members so far (at most
        // PORTFOLIO_SEEDS) join the second subpopulation, where they replace random
        // individuals: the evolution starts from their findings (and later bests are adopted
        // as it resumes, see `adopt`). Outside the portfolio there are none.
        for (i, t) in ctx
            .best_seen(PORTFOLIO_SEEDS.min(k))
            .into_iter()
            .enumerate()
        {
            #[cfg(test)]
            super::SEEDED.with_borrow_mut(|s| s.push(t.clone()));
            z2[k - 1 - i] = t;
        }
        Evolution {
            g,
            pops: [z1, z2],
            best: Levels::new(),
            stale: 0,
            generation: 0,
            pending: Pending::Fresh,
        }
    }

    /// Evolves until a limit (or the portfolio's slice) stops it. Returns true (optimality
    /// proven) only once every transformation of the space has been checked.
    pub(crate) fn resume(&mut self, ctx: &mut Ctx<'_, '_>) -> bool {
        ctx.set_phase(Phase::Evolving);
        self.adopt(ctx);
        let params = self.g.params;
        let k = params.subpopulation_size;
        let elite = ceil_count(params.elite_fraction, k);
        let crossover = ceil_count(params.crossover_fraction, k).min(k - elite);
        let production = ceil_count(params.production_fraction, k).max(1);
        let immigrants = ((params.immigration_fraction * k as f64) as usize).min(k);
        let space = ctx.lattice().size();
        loop {
            if self.pending != Pending::Nothing {
                if !self.g.evaluate(ctx, &self.pops) {
                    return false;
                }
                self.evaluated(ctx, elite);
                continue;
            }
            if params.stop_after_iterations && self.generation >= u64::from(params.iterations) {
                return false;
            }
            if space.is_some_and(|s| self.g.cache.len() as u128 >= s) {
                // Every transformation has been checked: the best one is the optimum.
                return true;
            }
            if ctx.should_stop() {
                return false;
            }
            let g = &mut self.g;
            for p in self.pops.iter_mut() {
                g.sort(p);
            }
            let interval = u64::from(params.immigration_interval);
            if interval > 0
                && self.generation > 0
                && self.generation.is_multiple_of(interval)
                && immigrants > 0
            {
                let best1: Vec<Levels> = self.pops[0][..immigrants].to_vec();
                let best2: Vec<Levels> = self.pops[1][..immigrants].to_vec();
                self.pops[0].truncate(k - immigrants);
                self.pops[0].extend(best2);
                self.pops[1].truncate(k - immigrants);
                self.pops[1].extend(best1);
                for p in self.pops.iter_mut() {
                    g.sort(p);
                }
            }
            for p in self.pops.iter_mut() {
                let old = p.clone();
                let mut next: Vec<Levels> = old[..elite].to_vec();
                // In `auto`'s member: neighbours of the fittest at the same height first.
                for _ in 0..g.pair_moves {
                    if next.len() < k - crossover {
                        let m = g.pair_move(&old[0]);
                        next.push(m);
                    }
                }
                while next.len() < k - crossover {
                    let parent = &old[g.rng.random_range(0..k)];
                    let m = g.mutate(parent);
                    next.push(m);
                }
                let weights = g.parent_weights(&old[..production.min(k)]);
                while next.len() < k {
                    let a = &old[g.pick(&weights)];
                    let b = &old[g.pick(&weights)];
                    let child = g.cross(a, b);
                    next.push(child);
                }
                *p = next;
            }
            ctx.add_expansions(2 * (k - elite) as u64);
            self.pending = Pending::Generation;
        }
    }

    /// In `auto`'s portfolio, between generations: the best solution of all members, if no
    /// individual has it (another member found it since the last slice), replaces the least fit
    /// individual of the second subpopulation. Recombined with the evolved individuals it often
    /// leads to better solutions than either member finds alone (creditcard_int and mach2019_int
    /// with 5 % suppression, docs/scale.md §1). Outside the portfolio there is no shared best.
    fn adopt(&mut self, ctx: &Ctx<'_, '_>) {
        if self.pending != Pending::Nothing {
            return;
        }
        let Some(best) = ctx.shared_best() else {
            return;
        };
        if self.pops.iter().flatten().any(|ind| *ind == best) {
            return;
        }
        #[cfg(test)]
        super::ADOPTED.with_borrow_mut(|a| a.push(best.clone()));
        let p = &mut self.pops[1];
        self.g.sort(p);
        let last = p.len() - 1;
        p[last] = best;
        self.pending = Pending::Adopted;
    }

    /// Makes the fittest individual the best if it is fitter (and resets the stagnation count);
    /// true if it was.
    fn improved(&mut self) -> bool {
        let now = self.g.fittest(&self.pops);
        let better = self.g.better(&now, &self.best);
        if better {
            self.best = now;
            self.stale = 0;
        }
        better
    }

    /// Bookkeeping once the pending individuals have been evaluated.
    fn evaluated(&mut self, ctx: &mut Ctx<'_, '_>, elite: usize) {
        let params = self.g.params;
        let pending = std::mem::replace(&mut self.pending, Pending::Nothing);
        match pending {
            Pending::Nothing => {}
            Pending::Fresh => {
                self.best = self.g.fittest(&self.pops);
                self.stale = 0;
            }
            Pending::Adopted => {
                self.improved();
            }
            Pending::Generation => {
                self.generation += 1;
                if params.stop_after_iterations {
                    ctx.set_algorithm_progress(
                        self.generation as f64 / f64::from(params.iterations),
                    );
                }
                if !self.improved() {
                    self.stale += 1;
                }
                if !params.stop_after_iterations && self.stale >= params.iterations {
                    // Stagnation: keep the elite, re-seed the rest of both subpopulations at
                    // random.
                    let k = params.subpopulation_size;
                    for p in self.pops.iter_mut() {
                        self.g.sort(p);
                        p.truncate(elite.max(1));
                        while p.len() < k {
                            let r = self.g.random_individual();
                            p.push(r);
                        }
                    }
                    ctx.add_expansions(2 * (k - elite.max(1)) as u64);
                    self.pending = Pending::Fresh;
                }
            }
        }
    }
}

fn ceil_count(fraction: f64, k: usize) -> usize {
    ((fraction * k as f64).ceil() as usize).min(k)
}

impl Genetic<'_> {
    fn random_individual(&mut self) -> Levels {
        (0..self.min.len())
            .map(|i| self.rng.random_range(self.min[i]..=self.max[i]))
            .collect()
    }

    /// Checks every individual not seen before (one batch, first-seen order). False if stopped.
    fn evaluate(&mut self, ctx: &mut Ctx<'_, '_>, pops: &[Vec<Levels>; 2]) -> bool {
        let mut fresh: Vec<Levels> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for ind in pops.iter().flatten() {
            if !self.cache.contains_key(ind) && seen.insert(ind.clone()) {
                fresh.push(ind.clone());
            }
        }
        let results = ctx.check_all(&fresh);
        let complete = results.len() == fresh.len();
        for r in results {
            self.cache.insert(
                r.levels,
                Fitness {
                    score: r.score,
                    anonymous: r.anonymous,
                },
            );
        }
        ctx.set_explored(self.cache.len() as u64);
        complete
    }

    /// The fittest individual of both subpopulations (all evaluated).
    fn fittest(&self, pops: &[Vec<Levels>; 2]) -> Levels {
        pops.iter()
            .flatten()
            .min_by(|a, b| self.cmp(a, b))
            .cloned()
            .unwrap_or_default()
    }

    /// True if `a` is strictly fitter than `b` (both evaluated).
    fn better(&self, a: &[u8], b: &[u8]) -> bool {
        match (self.cache.get(a), self.cache.get(b)) {
            (Some(_), Some(_)) => self.cmp(a, b).is_lt(),
            _ => false,
        }
    }

    /// Fitness order of two evaluated individuals: anonymous before not anonymous, then score,
    /// rank and levels.
    fn cmp(&self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
        let (x, y) = (&self.cache[a], &self.cache[b]);
        y.anonymous
            .cmp(&x.anonymous)
            .then_with(|| exact_cmp(x.score, a, y.score, b))
    }

    fn sort(&self, pop: &mut [Levels]) {
        pop.sort_by(|a, b| self.cmp(a, b));
    }

    /// Selection weights 1 − (score − min)/(max − min) over the candidate parents.
    fn parent_weights(&self, parents: &[Levels]) -> Vec<f64> {
        let scores: Vec<f64> = parents.iter().map(|p| self.cache[p].score).collect();
        let lo = scores.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater)
            || !lo.is_finite()
            || !hi.is_finite()
        {
            return vec![1.0; scores.len()];
        }
        scores.iter().map(|s| 1.0 - (s - lo) / (hi - lo)).collect()
    }

    /// Roulette-wheel selection of an index.
    fn pick(&mut self, weights: &[f64]) -> usize {
        let total: f64 = weights.iter().sum();
        if total.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return self.rng.random_range(0..weights.len());
        }
        let mut x = self.rng.random_range(0.0..total);
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.iter().rposition(|w| *w > 0.0).unwrap_or(0)
    }

    /// Uniform crossover.
    fn cross(&mut self, a: &[u8], b: &[u8]) -> Levels {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| if self.rng.random_bool(0.5) { x } else { y })
            .collect()
    }

    /// A pair move: one gene of `parent` a level down and another a level up, both chosen at
    /// random among the genes that can move that way; a [mutation](Genetic::mutate) where no
    /// such pair exists or the two draws hit the same gene.
    fn pair_move(&mut self, parent: &[u8]) -> Levels {
        let q = parent.len();
        let down: Vec<usize> = (0..q).filter(|&i| parent[i] > self.min[i]).collect();
        let up: Vec<usize> = (0..q).filter(|&i| parent[i] < self.max[i]).collect();
        if !down.is_empty() && !up.is_empty() {
            let i = down[self.rng.random_range(0..down.len())];
            let j = up[self.rng.random_range(0..up.len())];
            if i != j {
                let mut child = parent.to_vec();
                child[i] -= 1;
                child[j] += 1;
                return child;
            }
        }
        self.mutate(parent)
    }

    /// Sets between 1 and ⌈mutation·q⌉ distinct genes to a different random level.
    fn mutate(&mut self, parent: &[u8]) -> Levels {
        let q = parent.len();
        let mutable: Vec<usize> = (0..q).filter(|&i| self.max[i] > self.min[i]).collect();
        let mut child = parent.to_vec();
        if mutable.is_empty() {
            return child;
        }
        let bound =
            ((self.params.mutation_probability * q as f64).ceil() as usize).clamp(1, mutable.len());
        let changes = self.rng.random_range(1..=bound);
        let mut positions = mutable;
        for c in 0..changes {
            let j = self.rng.random_range(c..positions.len());
            positions.swap(c, j);
            let i = positions[c];
            // A level in [min, max] other than the current one.
            let span = self.max[i] - self.min[i];
            let offset = self.rng.random_range(1..=span);
            let cur = child[i] - self.min[i];
            child[i] = self.min[i] + (cur + offset) % (span + 1);
        }
        child
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn genetic(entries: &[(&[u8], f64, bool)]) -> Genetic<'static> {
        const MIN: &[u8] = &[0, 0];
        const MAX: &[u8] = &[3, 3];
        let mut g = Genetic {
            params: GeneticParams::default(),
            min: MIN,
            max: MAX,
            rng: Xoshiro256PlusPlus::seed_from_u64(1),
            cache: HashMap::new(),
            pair_moves: 0,
        };
        for &(levels, score, anonymous) in entries {
            g.cache
                .insert(levels.to_vec(), Fitness { score, anonymous });
        }
        g
    }

    #[test]
    fn anonymous_individuals_are_fitter_than_better_scoring_others() {
        let g = genetic(&[
            (&[0, 0], 0.1, false),
            (&[3, 3], 1.0, true),
            (&[1, 2], 0.5, true),
            (&[2, 0], 0.3, false),
        ]);
        let mut pop: Vec<Levels> = vec![vec![0, 0], vec![3, 3], vec![1, 2], vec![2, 0]];
        g.sort(&mut pop);
        assert_eq!(pop, vec![vec![1, 2], vec![3, 3], vec![0, 0], vec![2, 0]]);
        assert!(g.better(&[3, 3], &[0, 0]));
        assert!(g.better(&[0, 0], &[2, 0]));
        assert_eq!(g.fittest(&[vec![vec![0, 0]], vec![vec![3, 3]]]), vec![3, 3]);
    }

    #[test]
    fn pair_moves_lower_one_gene_and_raise_another() {
        let mut g = genetic(&[]);
        let mut moved = std::collections::HashSet::new();
        for _ in 0..200 {
            let child = g.pair_move(&[1, 2]);
            let d: Vec<i16> = child
                .iter()
                .zip([1, 2])
                .map(|(&c, p)| i16::from(c) - p)
                .collect();
            let mut sorted = d.clone();
            sorted.sort();
            if sorted == [-1, 1] {
                moved.insert(child);
            } else {
                // The two draws hit the same gene: a plain mutation, within the bounds.
                assert!(
                    child.iter().all(|&c| c <= 3) && child != [1, 2],
                    "{child:?}"
                );
            }
        }
        let both: std::collections::HashSet<Levels> =
            [vec![0, 3], vec![2, 1]].into_iter().collect();
        assert_eq!(moved, both);
        // At the bottom no gene can go down: a mutation instead.
        for _ in 0..50 {
            let child = g.pair_move(&[0, 0]);
            assert!(
                child != [0, 0] && child.iter().all(|&c| c <= 3),
                "{child:?}"
            );
        }
    }

    #[test]
    fn mutants_change_at_least_one_gene_within_bounds() {
        let mut g = genetic(&[]);
        for _ in 0..200 {
            let m = g.mutate(&[1, 1]);
            assert_ne!(m, vec![1, 1]);
            assert!(m.iter().all(|&l| l <= 3));
        }
    }
}
