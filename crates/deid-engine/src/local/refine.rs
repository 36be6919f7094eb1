//! Refinement of local generalization's output (`docs/definitions.md` §3.6): every published
//! class is split, top-down along the hierarchies, into finer classes that satisfy the privacy
//! models on their own.
//!
//! A class of transformation L is split along a quasi-identifier j (one level lower) into parts
//! by their value there. Parts that satisfy the models are published at the finer level; the
//! others stay together at L (the *rest*), which must satisfy the models too — if it does not,
//! passing parts join it, smallest first. Of the quasi-identifiers, the split that makes the
//! most cells finer (by domain share) is taken, and parts and rest are refined again. Only
//! records get finer; none is suppressed or coarsened.
//!
//! A part is published only if no record outside it generalizes to the same tuple at its
//! levels (*exclusive*): otherwise a record of another class — with the same tuple at the
//! part's levels but published by another step — would read as a member of the part. This
//! keeps the plan's rule "a row belongs to the first step whose maps send it to a class that
//! step publishes" true when the refined transformations come first, finer ones before coarser
//! ones (`Stepped` for [`LocalOutcome`](super::LocalOutcome)).

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use crate::hash::{BuildCodeHasher, hash_codes};

use crate::lattice::Levels;
use crate::problem::Problem;

/// What refinement changed.
#[derive(Debug, Clone, Default)]
pub(super) struct Refined {
    /// The refined transformations, finer first (by the sum of their levels).
    pub levels: Vec<Levels>,
    /// Per base group: its index in `levels`, or `u32::MAX` if it was not refined.
    pub of_base: Vec<u32>,
    /// Records moved to a finer transformation.
    pub records: usize,
}

/// Refines the output of local generalization: `step_levels` are the steps' transformations,
/// `step_of_base` the step of every base group (`u32::MAX`: suppressed). Returns the refined
/// transformations; `codes` (`q` per base group) is updated for the refined groups.
///
/// Only problems whose models all judge classes on their own (no sample-based model such as
/// average risk) are refined; the others come back unchanged. At `deadline` refinement stops
/// where it is: classes not split by then stay as published (refining is never needed for the
/// models, only for the quality), so a job still ends near its time limit.
pub(super) fn refine(
    problem: &Problem,
    step_levels: &[&[u8]],
    step_of_base: &[u32],
    codes: &mut [u32],
    deadline: Instant,
) -> Refined {
    let groups = problem.base_groups().len();
    let mut refined = Refined {
        of_base: vec![u32::MAX; groups],
        ..Refined::default()
    };
    if !problem.sample_models.is_empty() || step_levels.is_empty() {
        return refined;
    }
    let ctx = Ctx {
        deadline: Some(deadline),
        ..Ctx::new(problem)
    };
    let mut out: Vec<(Levels, Vec<u32>)> = Vec::new();
    let Some(classes) = classes(&ctx, step_levels, step_of_base) else {
        return refined;
    };
    for class in classes {
        ctx.split(class.levels, class.members, class.foreign, false, &mut out);
    }
    // Distinct refined transformations, finer first; then the groups' codes at them.
    let mut distinct: BTreeMap<(u32, Levels), Vec<u32>> = BTreeMap::new();
    for (levels, members) in out {
        let sum = levels.iter().map(|&l| l as u32).sum::<u32>();
        distinct.entry((sum, levels)).or_default().extend(members);
    }
    let q = ctx.q;
    let base = problem.base_groups();
    for (index, ((_, levels), members)) in distinct.into_iter().enumerate() {
        for &g in &members {
            let g = g as usize;
            refined.of_base[g] = index as u32;
            refined.records += base.counts[g] as usize;
            for i in 0..q {
                codes[g * q + i] = ctx.code(g, i, levels[i]);
            }
        }
        refined.levels.push(levels);
    }
    refined
}

/// A published class of the output before refinement.
struct Class {
    levels: Levels,
    members: Vec<u32>,
    /// Base groups of earlier steps with the same tuple at `levels`.
    foreign: Vec<u32>,
}

/// The published classes of every step, each with its foreign groups (those published by an
/// earlier step whose tuple at the class's levels is the class's: no later step can have one,
/// it would have been published by the class's step). `None` if the refinement's deadline
/// passed first.
fn classes(ctx: &Ctx<'_>, step_levels: &[&[u8]], step_of_base: &[u32]) -> Option<Vec<Class>> {
    // Classes by step and a hash of their tuple (tuples compared on a match): no allocation per
    // lookup, which matters for the foreign groups (a lookup per group and later step).
    let mut by_key: HashMap<(u32, u64), Vec<usize>, BuildCodeHasher> = HashMap::default();
    let mut tuples: Vec<Vec<u32>> = Vec::new();
    let mut classes: Vec<Class> = Vec::new();
    let mut tuple = Vec::with_capacity(ctx.q);
    for (g, &s) in step_of_base.iter().enumerate() {
        if s == u32::MAX {
            continue;
        }
        let levels = step_levels[s as usize];
        ctx.fill_tuple(g, levels, &mut tuple);
        let same = by_key.entry((s, hash_codes(&tuple))).or_default();
        let c = match same.iter().find(|&&c| tuples[c] == tuple) {
            Some(&c) => c,
            None => {
                classes.push(Class {
                    levels: levels.to_vec(),
                    members: Vec::new(),
                    foreign: Vec::new(),
                });
                tuples.push(tuple.clone());
                same.push(classes.len() - 1);
                classes.len() - 1
            }
        };
        classes[c].members.push(g as u32);
    }
    for (g, &s0) in step_of_base.iter().enumerate() {
        if s0 == u32::MAX {
            continue;
        }
        if g % 1024 == 0 && ctx.late() {
            return None;
        }
        for (s, levels) in step_levels.iter().enumerate().skip(s0 as usize + 1) {
            ctx.fill_tuple(g, levels, &mut tuple);
            let Some(same) = by_key.get(&(s as u32, hash_codes(&tuple))) else {
                continue;
            };
            if let Some(&c) = same.iter().find(|&&c| tuples[c] == tuple) {
                classes[c].foreign.push(g as u32);
            }
        }
    }
    Some(classes)
}

/// The problem's data as refinement (and the sweep) read them.
pub(super) struct Ctx<'a> {
    problem: &'a Problem,
    pub(super) q: usize,
    min: &'a [u8],
    /// When refinement stops splitting (`None`: never).
    deadline: Option<Instant>,
}

/// One candidate split of a class: the parts published finer and the rest.
struct Split {
    qi: usize,
    parts: Vec<Vec<u32>>,
    rest: Vec<u32>,
    gain: f64,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(problem: &'a Problem) -> Ctx<'a> {
        Ctx {
            problem,
            q: problem.qi_columns().len(),
            min: problem.lattice().min(),
            deadline: None,
        }
    }

    /// True if the deadline has passed.
    fn late(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// The problem.
    pub(super) fn problem(&self) -> &'a Problem {
        self.problem
    }

    /// Code of base group `g`'s quasi-identifier `i` at `level`.
    pub(super) fn code(&self, g: usize, i: usize, level: u8) -> u32 {
        let base = self.problem.base_groups().codes[g * self.q + i];
        self.problem.hierarchies()[i].code(level as usize, base)
    }

    /// The tuple of base group `g` at `levels`, into `out` (cleared first).
    fn fill_tuple(&self, g: usize, levels: &[u8], out: &mut Vec<u32>) {
        out.clear();
        out.extend((0..self.q).map(|i| self.code(g, i, levels[i])));
    }

    /// Records of the groups `members`.
    pub(super) fn records(&self, members: &[u32]) -> u64 {
        let counts = &self.problem.base_groups().counts;
        members.iter().map(|&g| counts[g as usize] as u64).sum()
    }

    /// True if the groups `members`, as one class, satisfy the minimal class size and every
    /// class-based model.
    pub(super) fn holds(&self, members: &[u32]) -> bool {
        let records = self.records(members);
        if records < self.problem.min_class_size() as u64 {
            return false;
        }
        let Ok(count) = u32::try_from(records) else {
            return false;
        };
        if self.problem.class_models.is_empty() {
            return true;
        }
        let base = self.problem.base_groups();
        let merged: Vec<(Vec<u32>, Vec<u32>)> = base
            .hists
            .iter()
            .map(|h| {
                let mut m: BTreeMap<u32, u32> = BTreeMap::new();
                for &g in members {
                    let (values, freqs) = h.get(g as usize);
                    for (&v, &f) in values.iter().zip(freqs) {
                        *m.entry(v).or_default() += f;
                    }
                }
                (m.keys().copied().collect(), m.values().copied().collect())
            })
            .collect();
        let view: Vec<(&[u32], &[u32])> = merged
            .iter()
            .map(|(v, f)| (v.as_slice(), f.as_slice()))
            .collect();
        self.problem
            .class_models
            .iter()
            .all(|m| m.holds(count, &view))
    }

    /// Splits the class `members` at `levels` as far as the models allow and appends the
    /// refined classes to `out`: every part, split further, and — if `refined` (the class is
    /// itself a part) — its final rest. `foreign`: groups outside the class with its tuple at
    /// `levels`.
    fn split(
        &self,
        levels: Levels,
        members: Vec<u32>,
        foreign: Vec<u32>,
        refined: bool,
        out: &mut Vec<(Levels, Vec<u32>)>,
    ) {
        let best = (0..self.q)
            .filter(|_| !self.late())
            .filter_map(|i| self.try_split(&levels, &members, &foreign, i))
            .max_by(|a, b| a.gain.total_cmp(&b.gain).then(b.qi.cmp(&a.qi)));
        let Some(best) = best else {
            if refined {
                out.push((levels, members));
            }
            return;
        };
        let mut finer = levels.clone();
        finer[best.qi] -= 1;
        // The rest keeps `levels`, where the parts now share its tuple.
        let mut rest_foreign = foreign;
        for part in &best.parts {
            rest_foreign.extend_from_slice(part);
        }
        for part in best.parts {
            self.split(finer.clone(), part, Vec::new(), true, out);
        }
        if !best.rest.is_empty() {
            self.split(levels, best.rest, rest_foreign, refined, out);
        }
    }

    /// The split of `members` (at `levels`) along quasi-identifier `i`, if it publishes
    /// something finer and its rest satisfies the models.
    fn try_split(
        &self,
        levels: &[u8],
        members: &[u32],
        foreign: &[u32],
        i: usize,
    ) -> Option<Split> {
        if levels[i] <= self.min[i] {
            return None;
        }
        let fine = levels[i] - 1;
        let mut by_code: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for &g in members {
            by_code
                .entry(self.code(g as usize, i, fine))
                .or_default()
                .push(g);
        }
        let taken: std::collections::HashSet<u32> = foreign
            .iter()
            .map(|&g| self.code(g as usize, i, fine))
            .collect();
        let mut parts = Vec::new();
        let mut rest = Vec::new();
        for (code, part) in by_code {
            if !taken.contains(&code) && self.holds(&part) {
                parts.push(part);
            } else {
                rest.extend(part);
            }
        }
        // The rest must hold as a class; passing parts join it, smallest first.
        parts.sort_by_key(|p| (self.records(p), p[0]));
        while !rest.is_empty() && !self.holds(&rest) {
            if parts.is_empty() {
                return None;
            }
            rest.extend(parts.remove(0));
        }
        if parts.is_empty() {
            return None;
        }
        let h = &self.problem.hierarchies()[i];
        let counts = &self.problem.base_groups().counts;
        let coarse = levels[i] as usize;
        let gain = parts
            .iter()
            .flatten()
            .map(|&g| {
                let g = g as usize;
                let base = self.problem.base_groups().codes[g * self.q + i];
                let before = h.share(coarse, h.code(coarse, base));
                let after = h.share(fine as usize, h.code(fine as usize, base));
                counts[g] as f64 * (before - after)
            })
            .sum::<f64>();
        if gain <= 0.0 {
            return None;
        }
        Some(Split {
            qi: i,
            parts,
            rest,
            gain,
        })
    }
}
