//! Minimal-anonymization heuristics (Lightning paper §4): both climb from the bottom one QI at a
//! time and stop at the first anonymous transformation (or at the top).
//!
//! - DataFly (Sweeney 1997): raise the QI with the most distinct values at its current level
//!   (ties: the first such QI).
//! - Improved Greedy (Babu et al. 2013), as described in the Lightning paper: raise the QI whose
//!   generalization yields the smallest minimal equivalence class size (over all classes, before
//!   suppression); ties fall back on DataFly's rule. Each step evaluates all successors (one
//!   parallel batch).
//!
//! Neither claims optimality; with suppression or non-monotone models the first anonymous
//! transformation on the climb can be far from optimal (`docs/definitions.md` §2.3, Lightning
//! paper §4).

use std::cmp::Reverse;

use super::{Ctx, Phase};
use crate::check::CheckResult;
use crate::lattice::Levels;

/// Distinct values of QI `i` in the data at `level`.
fn distinct(ctx: &Ctx<'_, '_>, i: usize, level: u8) -> usize {
    ctx.problem.hierarchies()[i].distinct(level as usize)
}

/// DataFly. Never claims optimality.
pub(crate) fn run_datafly(ctx: &mut Ctx<'_, '_>) -> bool {
    ctx.set_phase(Phase::Searching);
    let lattice = ctx.lattice();
    let mut cur = lattice.bottom();
    let Some(mut r) = ctx.check(&cur) else {
        return false;
    };
    let mut steps = 1u64;
    while !r.anonymous {
        let Some(i) = (0..cur.len())
            .filter(|&i| cur[i] < lattice.max()[i])
            .max_by_key(|&i| (distinct(ctx, i, cur[i]), Reverse(i)))
        else {
            break;
        };
        cur[i] += 1;
        ctx.add_expansions(1);
        let Some(next) = ctx.check(&cur) else {
            return false;
        };
        r = next;
        steps += 1;
        ctx.set_explored(steps);
    }
    false
}

/// Improved Greedy. Never claims optimality.
pub(crate) fn run_improved_greedy(ctx: &mut Ctx<'_, '_>) -> bool {
    ctx.set_phase(Phase::Searching);
    let lattice = ctx.lattice();
    let mut cur = lattice.bottom();
    let Some(mut r) = ctx.check(&cur) else {
        return false;
    };
    let mut explored = 1u64;
    while !r.anonymous {
        let succ: Vec<Levels> = lattice.successors(&cur);
        if succ.is_empty() {
            break;
        }
        ctx.add_expansions(1);
        let evals: Vec<(CheckResult, u32)> = ctx.batch(
            &succ,
            |checker, levels| {
                let e = checker.evaluate(levels);
                let smallest = e.groups.counts.iter().copied().min().unwrap_or(0);
                (e.result, smallest)
            },
            |(r, _)| r,
        );
        explored += evals.len() as u64;
        ctx.set_explored(explored);
        if evals.len() < succ.len() {
            return false;
        }
        // The raised QI of each successor is where it differs from `cur`.
        let raised = |l: &[u8]| (0..l.len()).find(|&i| l[i] != cur[i]).unwrap_or(0);
        let Some((best, _)) = evals.into_iter().min_by_key(|(e, smallest)| {
            let i = raised(&e.levels);
            (*smallest, Reverse(distinct(ctx, i, cur[i])), i)
        }) else {
            break;
        };
        cur = best.levels.clone();
        r = best;
        if ctx.should_stop() {
            return false;
        }
    }
    false
}
