//! `auto`: a portfolio of complementary strategies sharing what they learn
//! (`docs/scale.md`).
//!
//! 1. **Incumbent.** BFS's diagonal search (binary search for the lowest anonymous
//!    transformation on a bottom–top path, a ternary search above it, a descent) gives a first
//!    solution after a few dozen checks, mostly of generalized transformations with few classes
//!    — cheap even on millions of records.
//! 2. **Small spaces** (at most [`SearchConfig::flash_max_space`](super::SearchConfig)
//!    transformations): Flash, which proves the optimum and prunes with the incumbent from its
//!    first step.
//! 3. **Large spaces**: rounds of slices. In each round every member — top-down, the genetic
//!    algorithm, BFS (best-first branch and bound) and Lightning — runs until its new checks
//!    have cost `budget × weight` work units; the budget starts at the incumbent's work and
//!    doubles every round, and a member's weight
//!    doubles (up to [`MAX_WEIGHT`]) after a slice in which it improved the best and halves
//!    (down to 1) after one in which it did not. All members share the best solution
//!    so far (their lower-bound pruning uses it) and every check result: a member that starts its
//!    next slice replays its earlier steps from the shared cache at no check cost and goes on from
//!    where it stopped. A member that exhausts the space proves the optimum and ends the search.
//!
//! Slices are measured in *work*, not in time: a check costs the number of classes of its result
//! plus a constant ([`CHECK_OVERHEAD`](super::CHECK_OVERHEAD)) — a deterministic stand-in for its
//! cost, so a member that checks cheap transformations near the top of the lattice (few classes)
//! gets many more checks than one working near the bottom (a class per record). The sequence of
//! checks therefore depends only on the problem, the configuration and the seed — never on the
//! machine's speed or the number of threads (a time limit only decides where it is cut). The trace names the member
//! that found each improvement ([`Improvement::strategy`](super::Improvement)).

use super::{Algorithm, Ctx, Phase, bfs, flash, genetic, lightning};

/// The members of the portfolio on large spaces, in the order they run in each round.
pub const MEMBERS: [Algorithm; 4] = [
    Algorithm::TopDown,
    Algorithm::Genetic,
    Algorithm::Bfs,
    Algorithm::Lightning,
];

/// Largest weight of a member: a member that keeps improving the best gets up to this many
/// times the base budget of a round.
pub const MAX_WEIGHT: u64 = 16;

/// Runs the portfolio. Returns true if the optimum is proven.
pub(crate) fn run(ctx: &mut Ctx<'_, '_>) -> bool {
    ctx.strategy = Algorithm::Bfs;
    ctx.set_phase(Phase::Greedy);
    if bfs::incumbent(ctx).is_none() {
        return false;
    }
    if ctx.config().flash_fits(ctx.problem) {
        ctx.strategy = Algorithm::Flash;
        return flash::run(ctx);
    }
    // The unit of a slice: the work of the incumbent's checks (at least 16 cheap checks).
    let mut budget = ctx.work.max(16 * super::CHECK_OVERHEAD);
    let mut weights = [1u64; MEMBERS.len()];
    loop {
        let before = ctx.checker.checks();
        for (member, weight) in MEMBERS.into_iter().zip(weights.iter_mut()) {
            ctx.strategy = member;
            let improvements = ctx.trace.len();
            ctx.slice_end = Some(ctx.work.saturating_add(budget.saturating_mul(*weight)));
            let complete = match member {
                Algorithm::Bfs => bfs::run(ctx),
                Algorithm::TopDown => lightning::run_top_down(ctx),
                Algorithm::Genetic => genetic::run(ctx),
                _ => lightning::run_bottom_up(ctx),
            };
            ctx.slice_end = None;
            // A member that improved the best gets twice its share next round, one that did not
            // half of it (at least one unit): checks go where they pay.
            *weight = if ctx.trace.len() > improvements {
                (*weight * 2).min(MAX_WEIGHT)
            } else {
                (*weight / 2).max(1)
            };
            if complete {
                return true;
            }
            if ctx.should_stop() {
                return false;
            }
        }
        if ctx.checker.checks() == before {
            // No member could make a new check (cannot happen with a finite budget unless every
            // member ended early); stop rather than spin.
            return false;
        }
        budget = budget.saturating_mul(2);
    }
}
