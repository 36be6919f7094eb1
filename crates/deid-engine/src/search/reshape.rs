//! Ruin and repair around the best solution: `auto`'s third member on large spaces.
//!
//! A try lowers a group of correlated quasi-identifiers of the best transformation by one or two
//! levels together (the *ruin*) and then generalizes one other quasi-identifier at a time until
//! the result is anonymous (the *repair*): each step checks every single-level generalization of
//! an attribute outside the group that could still beat the best solution, and if none is
//! anonymous it keeps the one that suppresses the fewest records per unit of generalization it
//! adds. Correlated attributes (monthly payment statuses, for instance) must be specialized
//! together to pay: one at a time, each raises suppression past the limit, which is where
//! top-down's descent and single-gene mutations stop.
//!
//! Groups: for every quasi-identifier, the others whose normalized mutual information with it
//! (over the base groups, each attribute at its lowest level with at most [`GROUP_VALUES`]
//! values) is at least [`GROUP_NMI`]. All randomness comes from a generator seeded with the
//! search's seed, drawn on the search thread only.

use std::collections::{HashMap, HashSet};

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::Ctx;
use crate::lattice::Levels;
use crate::problem::Problem;

/// Least normalized mutual information for two quasi-identifiers to be ruined together.
pub const GROUP_NMI: f64 = 0.4;

/// Most values of an attribute at the level where its correlations are measured.
pub const GROUP_VALUES: usize = 16;

/// Most attributes added to a ruin's first one, each correlated with one already in it.
pub const MAX_GROW: usize = 4;

/// Most repair steps of a try.
pub const REPAIR_STEPS: usize = 8;

/// Most base groups sampled (evenly) for the correlations.
const SAMPLE: usize = 200_000;

/// Where a try stands between slices.
enum Step {
    /// No try in progress.
    Idle,
    /// A ruined transformation, not yet checked, with the ruined attributes.
    Ruined(Levels, Vec<bool>),
    /// A checked transformation that is not anonymous, its suppressed records, the ruined
    /// attributes and the repair steps taken.
    Repairing(Levels, usize, Vec<bool>, usize),
}

/// The member's state, kept between slices.
pub(crate) struct Reshape {
    rng: Xoshiro256PlusPlus,
    groups: Vec<Vec<usize>>,
    tried: HashSet<Levels>,
    step: Step,
}

impl Reshape {
    /// A member for the problem of `ctx`; `None` if no two quasi-identifiers are correlated
    /// (then it has no move of its own).
    pub(crate) fn new(ctx: &Ctx<'_, '_>) -> Option<Reshape> {
        let groups = correlated_groups(ctx.problem);
        if groups.iter().all(Vec::is_empty) {
            return None;
        }
        Some(Reshape {
            rng: Xoshiro256PlusPlus::seed_from_u64(ctx.config().seed ^ 0x5eed_7e5a),
            groups,
            tried: HashSet::new(),
            step: Step::Idle,
        })
    }

    /// Tries until a limit or the slice stops it. Never proves the optimum.
    pub(crate) fn resume(&mut self, ctx: &mut Ctx<'_, '_>) -> bool {
        let mut idle = 0;
        loop {
            if ctx.should_stop() {
                return false;
            }
            match std::mem::replace(&mut self.step, Step::Idle) {
                Step::Idle => match self.ruin(ctx) {
                    Some((t, s)) => {
                        idle = 0;
                        self.step = Step::Ruined(t, s);
                    }
                    None => {
                        idle += 1;
                        if idle > 2 {
                            return false;
                        }
                    }
                },
                Step::Ruined(t, s) => {
                    let r = ctx.check_all(std::slice::from_ref(&t));
                    let Some(r) = r.into_iter().next() else {
                        self.step = Step::Ruined(t, s);
                        return false;
                    };
                    if !r.anonymous {
                        self.step = Step::Repairing(t, r.suppressed, s, 0);
                    } else {
                        #[cfg(test)]
                        super::REPAIRED.with_borrow_mut(|v| v.push(t.clone()));
                    }
                }
                Step::Repairing(t, suppressed, s, steps) => {
                    if !self.repair(ctx, t, suppressed, s, steps) {
                        return false;
                    }
                }
            }
        }
    }

    /// One repair step from `t` (checked, not anonymous, `suppressed` records suppressed) with
    /// the ruined attributes `s`: checks every one-level generalization of another attribute
    /// that could still beat the best solution; the try ends (`Idle`) when one is anonymous, no
    /// step is left or none suppresses fewer records, else it goes on from the one that
    /// suppresses the fewest records per unit of bound it adds. False if a limit or the slice
    /// cut the step (it is kept, to be made again).
    fn repair(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        t: Levels,
        suppressed: usize,
        s: Vec<bool>,
        steps: usize,
    ) -> bool {
        if steps >= REPAIR_STEPS {
            return true;
        }
        let max = ctx.lattice().max();
        let cands: Vec<Levels> = (0..t.len())
            .filter(|&j| !s[j] && t[j] < max[j])
            .map(|j| {
                let mut c = t.clone();
                c[j] += 1;
                c
            })
            .filter(|c| !ctx.cannot_improve_unchecked(c))
            .collect();
        if cands.is_empty() {
            return true;
        }
        let results = ctx.check_all(&cands);
        if results.len() < cands.len() {
            self.step = Step::Repairing(t, suppressed, s, steps);
            return false;
        }
        if results.iter().any(|r| r.anonymous) {
            #[cfg(test)]
            super::REPAIRED.with_borrow_mut(|v| {
                v.extend(
                    results
                        .iter()
                        .filter(|r| r.anonymous)
                        .map(|r| r.levels.clone()),
                )
            });
            return true;
        }
        let base = ctx.score_bound(&t, &[]);
        let mut pick: Option<(f64, usize)> = None;
        for (i, r) in results.iter().enumerate() {
            if r.suppressed >= suppressed {
                continue;
            }
            let gain = (suppressed - r.suppressed) as f64;
            let cost = (ctx.score_bound(&r.levels, &[]) - base).max(1e-12);
            if pick.is_none_or(|p| gain / cost > p.0) {
                pick = Some((gain / cost, i));
            }
        }
        if let Some((_, i)) = pick {
            let r = &results[i];
            #[cfg(test)]
            super::REPAIRS.with_borrow_mut(|v| v.push((t.clone(), r.levels.clone())));
            self.step = Step::Repairing(r.levels.clone(), r.suppressed, s, steps + 1);
        }
        true
    }

    /// A new ruined transformation of the best solution, with the attributes lowered; `None`
    /// if there is no best solution or 64 draws found nothing new worth checking.
    fn ruin(&mut self, ctx: &Ctx<'_, '_>) -> Option<(Levels, Vec<bool>)> {
        let best = ctx.shared_best()?;
        let min = ctx.lattice().min();
        let lowerable: Vec<usize> = (0..best.len())
            .filter(|&i| best[i] > min[i] && !self.groups[i].is_empty())
            .collect();
        if lowerable.is_empty() {
            return None;
        }
        for _ in 0..64 {
            let i = lowerable[self.rng.random_range(0..lowerable.len())];
            let depth = self.rng.random_range(1..=2u8);
            let mut s = vec![false; best.len()];
            let mut t = best.clone();
            s[i] = true;
            let more = self.rng.random_range(1..=MAX_GROW);
            for _ in 0..more {
                let frontier: Vec<usize> = (0..best.len())
                    .filter(|&j| {
                        !s[j]
                            && best[j] > min[j]
                            && (0..best.len()).any(|x| s[x] && self.groups[x].contains(&j))
                    })
                    .collect();
                if frontier.is_empty() {
                    break;
                }
                s[frontier[self.rng.random_range(0..frontier.len())]] = true;
            }
            for j in 0..best.len() {
                if s[j] {
                    t[j] = best[j].saturating_sub(depth).max(min[j]);
                }
            }
            if s.iter().filter(|&&x| x).count() < 2
                || ctx.cannot_improve_unchecked(&t)
                || !self.tried.insert(t.clone())
            {
                continue;
            }
            #[cfg(test)]
            super::RUINS.with_borrow_mut(|v| v.push((best.clone(), t.clone())));
            return Some((t, s));
        }
        None
    }
}

/// For every quasi-identifier, the others correlated with it ([`GROUP_NMI`]).
pub(crate) fn correlated_groups(p: &Problem) -> Vec<Vec<usize>> {
    let q = p.lattice().dimensions();
    let g = p.base_groups();
    let hs = p.hierarchies();
    let n = g.len();
    let stride = n.div_ceil(SAMPLE).max(1);
    // Each attribute's values at its measuring level, as dense codes.
    let mut cols: Vec<Vec<u8>> = Vec::with_capacity(q);
    let mut sizes = Vec::with_capacity(q);
    for (i, h) in hs.iter().enumerate().take(q) {
        let level = (0..h.height())
            .find(|&l| h.distinct(l) <= GROUP_VALUES)
            .unwrap_or(h.height() - 1);
        let map = h.generalize(0, level);
        let mut dense: HashMap<u32, u8> = HashMap::new();
        let col: Vec<u8> = (0..n)
            .step_by(stride)
            .map(|b| {
                let code = map.get(g.codes[b * q + i]);
                let next = dense.len().min(255) as u8;
                *dense.entry(code).or_insert(next)
            })
            .collect();
        sizes.push(dense.len().clamp(1, 256));
        cols.push(col);
    }
    let weights: Vec<f64> = (0..n)
        .step_by(stride)
        .map(|b| f64::from(g.counts[b]))
        .collect();
    let total: f64 = weights.iter().sum();
    let entropy = |counts: &[f64]| -> f64 {
        counts
            .iter()
            .filter(|&&c| c > 0.0)
            .map(|&c| {
                let p = c / total;
                -p * p.ln()
            })
            .sum()
    };
    let hs1: Vec<f64> = (0..q)
        .map(|i| {
            let mut c = vec![0.0; sizes[i]];
            for (x, w) in cols[i].iter().zip(&weights) {
                c[*x as usize] += w;
            }
            entropy(&c)
        })
        .collect();
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); q];
    for i in 0..q {
        for j in i + 1..q {
            let lo = hs1[i].min(hs1[j]);
            if lo <= 1e-12 {
                continue;
            }
            let mut c = vec![0.0; sizes[i] * sizes[j]];
            for ((x, y), w) in cols[i].iter().zip(&cols[j]).zip(&weights) {
                c[*x as usize * sizes[j] + *y as usize] += w;
            }
            let mi = hs1[i] + hs1[j] - entropy(&c);
            if mi / lo >= GROUP_NMI {
                groups[i].push(j);
                groups[j].push(i);
            }
        }
    }
    groups
}
