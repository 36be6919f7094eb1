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
//! 3. **Large spaces**: rounds of slices. In each round every member — BFS (best-first branch
//!    and bound), top-down, the genetic algorithm and Lightning — runs until it has made
//!    `budget` new checks; the budget doubles every round. All members share the best solution
//!    so far (their lower-bound pruning uses it) and every check result: a member that starts its
//!    next slice replays its earlier steps from the shared cache at no check cost and goes on from
//!    where it stopped. A member that exhausts the space proves the optimum and ends the search.
//!
//! Slices are counted in checks, not in time, so the sequence of checks depends only on the
//! problem, the configuration and the seed — never on the machine's speed or the number of
//! threads (a time limit only decides where the sequence is cut). The trace names the member
//! that found each improvement ([`Improvement::strategy`](super::Improvement)).

use super::{Algorithm, Ctx, Phase, bfs, flash, genetic, lightning};

/// The members of the portfolio on large spaces, in the order they run in each round.
pub const MEMBERS: [Algorithm; 4] = [
    Algorithm::Bfs,
    Algorithm::TopDown,
    Algorithm::Genetic,
    Algorithm::Lightning,
];

/// New checks per member in the first round (doubled every round).
pub const FIRST_SLICE: u64 = 16;

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
    let mut budget = FIRST_SLICE;
    loop {
        let before = ctx.checker.checks();
        for member in MEMBERS {
            ctx.strategy = member;
            ctx.slice_end = Some(ctx.checker.checks().saturating_add(budget));
            let complete = match member {
                Algorithm::Bfs => bfs::run(ctx),
                Algorithm::TopDown => lightning::run_top_down(ctx),
                Algorithm::Genetic => genetic::run(ctx),
                _ => lightning::run_bottom_up(ctx),
            };
            ctx.slice_end = None;
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
