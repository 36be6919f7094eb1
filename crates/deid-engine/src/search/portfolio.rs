//! `auto`: a portfolio of complementary strategies sharing what they learn
//! (`docs/scale.md`).
//!
//! 1. **Incumbent.** BFS's diagonal search (binary search for the lowest anonymous
//!    transformation on a bottom–top path, a ternary search above it; on small spaces also a
//!    descent) gives a first solution after a few dozen checks, mostly of generalized
//!    transformations with few classes — cheap even on millions of records.
//! 2. **Small spaces** (at most [`SearchConfig::flash_max_space`](super::SearchConfig)
//!    transformations): a short top-down descent ([`TOP_DOWN_BEFORE_FLASH`] units), then Flash,
//!    which proves the optimum and prunes with the best solution from its first step.
//! 3. **Large spaces**: first top-down's first descent — slices of one budget unit (the incumbent's
//!    work) for as long as the work since top-down last lowered its own best score is at most the
//!    work before (`descent_goes_on`): its checks lie high in the lattice and are cheap, and on
//!    large spaces nothing improves faster in the first few hundred checks (what a short limit or a
//!    loaded machine allows). Then rounds of slices of the [`MEMBERS`], top-down and the genetic
//!    algorithm, and — when the genetic algorithm is favoured and some quasi-identifiers are
//!    correlated — the ruin-and-repair member (`search::reshape`, initial weight
//!    [`RESHAPE_WEIGHT`]), which lowers correlated attributes of the best solution together and
//!    generalizes others one level at a time until the result is anonymous. In each round every
//!    member runs until its new checks have cost `budget × weight` work units; the budget starts
//!    at the incumbent's work and doubles every round. The member that suits the problem
//!    ([`favoured`]) runs first in each round and starts with weight [`FAVOURED_WEIGHT`], the
//!    other with 1; a member's weight doubles (up to [`MAX_WEIGHT`]) after
//!    a slice in which it improved the best solution and halves (down to 1) after one in which it
//!    did not. Each member's search is kept between slices and resumes exactly where it stopped
//!    (`Member`). The members share the best solution (pruning; the genetic algorithm starts from
//!    the [`genetic::PORTFOLIO_SEEDS`] best transformations checked before it, adopts a new best
//!    into its population whenever it resumes and makes [`genetic::PORTFOLIO_PAIR_MOVES`] pair
//!    moves of each subpopulation's fittest per generation) and every check result. A member
//!    that exhausts the space proves the optimum and ends the search.
//!
//! Slices are measured in *work*, not in time: a check costs the number of classes of its result
//! plus a fixed overhead (half the base groups, see `check_overhead`) —
//! a deterministic stand-in for its cost. The sequence of checks therefore depends only on the
//! problem, the configuration and the seed — never on the machine's speed or the number of
//! threads (a time limit only decides where it is cut). The trace names the member that found
//! each improvement ([`Improvement::strategy`](super::Improvement)).

use super::{Algorithm, Ctx, Phase, Strategy, bfs, flash, genetic, lightning, reshape};

/// The members of the portfolio on large spaces. BFS and Lightning are left out: on the
/// benchmark's large spaces neither is better than both of these within 1 s or 5 s by more than
/// 0.02 % (docs/benchmarks.md, search), and a share given to them would be missing where it
/// pays.
pub const MEMBERS: [Algorithm; 2] = [Algorithm::TopDown, Algorithm::Genetic];

/// Initial weight of the member the problem favours ([`favoured`]); the other starts at 1. At
/// short time limits the favoured member must not lose its lead to the other's slices: with 4,
/// the genetic algorithm found mach2019_int's solutions 0.1–0.3 s later than alone.
pub const FAVOURED_WEIGHT: u64 = 16;

/// Largest weight of a member: a member that keeps improving gets up to this many times the
/// base budget of a round.
pub const MAX_WEIGHT: u64 = 16;

/// Initial weight of the ruin-and-repair member (`search::reshape`), where the genetic
/// algorithm is favoured and some quasi-identifiers are correlated: as much as the genetic
/// algorithm's. On creditcard_int (5 % and 100 %
/// suppression, 500 to 2,000 checks, seeds 0–7) the runs more than 1 % worse than the best
/// single algorithm of their seed fell from 10 of 48 to 5 with weight 1 and to 1 with 4 or 16;
/// 16 had the better medians at 500 and 1,000 checks (docs/scale.md §1).
pub const RESHAPE_WEIGHT: u64 = 16;

/// Units of top-down before Flash on small spaces: its first descent usually finds the optimum
/// or close to it (cup with 5 % suppression: after 91 checks), which Flash then prunes with.
pub const TOP_DOWN_BEFORE_FLASH: u64 = 4;

/// The index in [`MEMBERS`] of the member favoured from the start (it runs first in every round
/// and starts with [`FAVOURED_WEIGHT`]): the genetic algorithm when
/// records may be suppressed (anonymous transformations then fill most of the lattice, where
/// recombination finds good ones), top-down without suppression (anonymous transformations lie
/// high in the lattice, where top-down starts) or when there are more than
/// [`GENETIC_MAX_BASE_GROUPS`] base groups. Measured on creditcard_int, mach2019_int and the
/// synthetic scale data (docs/scale.md); the weights adapt from there.
pub fn favoured(max_suppressed: usize, base_groups: usize) -> usize {
    if max_suppressed > 0 && base_groups <= GENETIC_MAX_BASE_GROUPS {
        1
    } else {
        0
    }
}

/// Most base groups for which the genetic algorithm is favoured: its first populations are a
/// few hundred random transformations, mostly low in the lattice with about as many classes as
/// base groups; on 10 M distinct records they take about a second each, and with the genetic
/// algorithm first `auto` ended at Loss 0.2155 after 60 s instead of top-down's 0.1744.
pub const GENETIC_MAX_BASE_GROUPS: usize = 2_000_000;

/// A resumable search (top-down, Lightning or the genetic algorithm), kept between slices so
/// that it goes on where it stopped.
pub(crate) enum Member<'p> {
    /// Top-down or Lightning.
    BestFirst(lightning::BestFirst),
    /// The genetic algorithm.
    Genetic(genetic::Evolution<'p>),
    /// Ruin and repair around the best solution.
    Reshape(reshape::Reshape),
}

impl<'p> Member<'p> {
    /// A search of `algorithm` that has not started (top-down for anything but Lightning and
    /// the genetic algorithm).
    pub(crate) fn new(algorithm: Algorithm, ctx: &Ctx<'_, 'p>) -> Member<'p> {
        match algorithm {
            Algorithm::Genetic => Member::Genetic(genetic::Evolution::new(ctx)),
            Algorithm::Lightning => Member::BestFirst(lightning::BestFirst::new(ctx, false)),
            _ => Member::BestFirst(lightning::BestFirst::new(ctx, true)),
        }
    }

    /// A member of the portfolio: as [`Member::new`], the genetic algorithm with at most
    /// [`genetic::PORTFOLIO_SUBPOPULATION`] individuals per subpopulation.
    pub(crate) fn for_portfolio(algorithm: Algorithm, ctx: &Ctx<'_, 'p>) -> Member<'p> {
        match algorithm {
            Algorithm::Genetic => Member::Genetic(genetic::Evolution::for_portfolio(ctx)),
            _ => Member::new(algorithm, ctx),
        }
    }

    /// Searches until a limit or the slice stops it; true if the optimum is proven.
    pub(crate) fn resume(&mut self, ctx: &mut Ctx<'_, '_>) -> bool {
        match self {
            Member::BestFirst(s) => s.resume(ctx),
            Member::Genetic(e) => e.resume(ctx),
            Member::Reshape(r) => r.resume(ctx),
        }
    }
}

/// Whether top-down's first descent goes on after a slice that did not lower its own best
/// score, `work` units into the search, the last one that did having ended at `last_gain`: while
/// the work since is at most the work before. Patience grows with the descent's progress,
/// counted in work, so a machine's speed or load never changes where the descent ends. A
/// descent makes its gains in bursts: on creditcard_int with 5 % suppression top-down lowers
/// Loss to 0.6707 within 76 checks, then nothing for five slices (82 checks) until 0.6567 —
/// one idle slice used to end it there, and the genetic member, which starts from the
/// descent's best, ended 1 s at 0.6707 where it reaches 0.6449 from 0.6567 (docs/scale.md §1).
fn descent_goes_on(last_gain: u64, work: u64) -> bool {
    work - last_gain <= last_gain
}

/// The index of top-down in [`MEMBERS`].
const TOP_DOWN: usize = 0;

/// The index of the ruin-and-repair member in the rounds (after [`MEMBERS`]).
const RESHAPE: usize = MEMBERS.len();

/// Members taking turns in the rounds.
const ROUND: usize = MEMBERS.len() + 1;

/// The first weights of the members in the rounds: [`FAVOURED_WEIGHT`] for the favoured one,
/// [`RESHAPE_WEIGHT`] for ruin and repair, 1 for the other.
fn first_weights(first: usize) -> [u64; ROUND] {
    let mut weights = [1; ROUND];
    weights[first] = FAVOURED_WEIGHT;
    weights[RESHAPE] = RESHAPE_WEIGHT;
    weights
}

/// The ruin-and-repair member, where the genetic algorithm is favoured (`first`) and some
/// quasi-identifiers are correlated (without them it has no move of its own). Without
/// suppression its specializations take checks from top-down, then the best member:
/// creditcard_int at 0 % ended at 0.7905 instead of 0.7631 after 1,000 checks in 2 of 8 runs.
fn reshape_member<'p>(ctx: &Ctx<'_, 'p>, first: usize) -> Option<Member<'p>> {
    if first == TOP_DOWN {
        return None;
    }
    reshape::Reshape::new(ctx).map(Member::Reshape)
}

/// Runs member `i` of [`MEMBERS`] (started on its first slice) until [`Ctx::work`] reaches
/// `end`; true if it proved the optimum.
fn resume<'p>(ctx: &mut Ctx<'_, 'p>, state: &mut Option<Member<'p>>, i: usize, end: u64) -> bool {
    ctx.sliced(Some(end), |ctx| {
        state
            .get_or_insert_with(|| Member::for_portfolio(MEMBERS[i], ctx))
            .resume(ctx)
    })
}

/// Runs the portfolio. Returns true if the optimum is proven. Long because it is the
/// portfolio's three phases in order (incumbent, first descent, weighted rounds), each a short
/// loop over the members' slices.
pub(crate) fn run<'p>(ctx: &mut Ctx<'_, 'p>) -> bool {
    ctx.strategy = Algorithm::Bfs.into();
    ctx.set_phase(Phase::Greedy);
    let small = ctx.config().flash_fits(ctx.problem);
    if bfs::incumbent(ctx, small).is_none() {
        return false;
    }
    // The unit of a slice: the work of the incumbent's checks (at least 16 checks' overhead).
    let mut budget = ctx.work.max(16 * ctx.check_overhead);
    if small {
        ctx.strategy = Algorithm::TopDown.into();
        let end = ctx.work.saturating_add(budget * TOP_DOWN_BEFORE_FLASH);
        if ctx.sliced(Some(end), lightning::run_top_down) {
            return true;
        }
        if ctx.should_stop() {
            return false;
        }
        ctx.strategy = Algorithm::Flash.into();
        return flash::run(ctx);
    }
    let first = favoured(
        ctx.problem.max_suppressed(),
        ctx.problem.base_groups().len(),
    );
    let mut weights = first_weights(first);
    let mut members: [Option<Member<'p>>; ROUND] = std::array::from_fn(|_| None);
    members[RESHAPE] = reshape_member(ctx, first);
    let round = ROUND - usize::from(members[RESHAPE].is_none());
    // Top-down's first descent, in slices of one budget unit. Its checks lie high in the
    // lattice (few classes, cheap), and on the benchmark's large spaces it is the best member
    // for the first few hundred checks — a short limit or a loaded machine ends the search
    // there. It goes on while the work since top-down last lowered its own best score (from
    // the top it is worse than the incumbent at first) is at most the work before
    // ([`descent_goes_on`]).
    ctx.strategy = MEMBERS[TOP_DOWN].into();
    let own_best = |m: &Option<Member<'p>>| match m {
        Some(Member::BestFirst(s)) => s.best_score(),
        _ => f64::INFINITY,
    };
    let mut last_gain = ctx.work;
    #[cfg(test)]
    {
        super::DESCENT.with_borrow_mut(|d| *d = vec![(ctx.work, f64::INFINITY)]);
        super::DESCENT_ENDED.set(false);
    }
    loop {
        let before = own_best(&members[TOP_DOWN]);
        let end = ctx.work.saturating_add(budget);
        if resume(ctx, &mut members[TOP_DOWN], TOP_DOWN, end) {
            return true;
        }
        #[cfg(test)]
        super::DESCENT.with_borrow_mut(|d| d.push((ctx.work, own_best(&members[TOP_DOWN]))));
        if ctx.should_stop() {
            return false;
        }
        if own_best(&members[TOP_DOWN]) < before {
            last_gain = ctx.work;
        } else if !descent_goes_on(last_gain, ctx.work) {
            #[cfg(test)]
            super::DESCENT_ENDED.set(true);
            break;
        }
    }
    loop {
        let before = ctx.checker.checks();
        for i in (0..round).map(|j| (first + j) % round) {
            ctx.strategy = MEMBERS.get(i).map_or(Strategy::Reshape, |&a| a.into());
            let best_before = ctx.best_score();
            let end = ctx.work.saturating_add(budget.saturating_mul(weights[i]));
            let complete = resume(ctx, &mut members[i], i, end);
            // A member that improved the best solution gets twice its share next round, one that
            // did not half of it (at least one unit): checks go where they pay.
            weights[i] = if ctx.best_score() < best_before {
                (weights[i] * 2).min(MAX_WEIGHT)
            } else {
                (weights[i] / 2).max(1)
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::problem::Problem;
    use crate::search::tests::adult;
    use crate::search::{
        Algorithm, CancelFlag, NoObserver, SearchConfig, SearchOutcome, Strategy, search,
    };

    /// `auto` on a large space (Flash disabled) with a seed, a check limit and a time limit.
    fn auto(p: &Problem, seed: u64, checks: u64, time: Duration, threads: usize) -> SearchOutcome {
        let cfg = SearchConfig {
            algorithm: Algorithm::Auto,
            flash_max_space: 0,
            check_limit: Some(checks),
            time_limit: time,
            threads: Some(threads),
            seed,
            ..SearchConfig::default()
        };
        search(p, &cfg, &CancelFlag::new(), &NoObserver).unwrap()
    }

    /// The improvements of a run: transformation, score and the member that found it.
    fn improvements(o: &SearchOutcome) -> Vec<(Vec<u8>, u64, Strategy)> {
        o.trace
            .iter()
            .map(|i| (i.levels.clone(), i.score.to_bits(), i.strategy))
            .collect()
    }

    #[test]
    fn a_time_limit_only_cuts_the_sequence_of_checks() {
        // The portfolio's decisions follow work, not time: a run cut by a time limit (on any
        // number of threads, however loaded the machine) found a prefix of the improvements of
        // an uncut run, with the same members.
        for (k, suppression, seed) in [(5, 0.05, 1), (2, 1.0, 6), (10, 0.0, 2)] {
            let p = adult(k, suppression);
            let whole = auto(&p, seed, 2000, Duration::from_secs(600), 1);
            let all = improvements(&whole);
            assert!(all.len() > 1, "k={k}, {suppression}");
            for (ms, threads) in [(20, 1), (60, 2), (150, 2)] {
                let cut = auto(&p, seed, 2000, Duration::from_millis(ms), threads);
                let some = improvements(&cut);
                assert!(cut.checks <= whole.checks);
                assert_eq!(
                    some[..],
                    all[..some.len()],
                    "k={k}, {suppression}, {ms} ms, {threads} threads"
                );
            }
        }
    }
}
