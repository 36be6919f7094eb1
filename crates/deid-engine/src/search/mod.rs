//! Search strategies over the generalization lattice, all behind one entry point: [`search`].
//!
//! Every algorithm works on the same search context (`Ctx`): it asks the context to check batches of
//! transformations (in parallel on a rayon pool, results processed in input order so that the
//! outcome never depends on the number of threads), the context keeps the best anonymous
//! transformation found so far, enforces the time limit, the check limit and cancellation, and
//! reports progress and improvements to a [`ProgressObserver`].
//!
//! The optimum is defined by an order (`docs/definitions.md` §2.1): lower score;
//! ties → lower rank (sum of levels); then lexicographically smaller levels. Scores within a
//! relative 1e-9 count as ties: normalised quality values carry rounding noise of about 1e-10.
//! Only anonymous transformations can be the result.
//!
//! Algorithms (`docs/definitions.md` §2.3):
//! - [`Algorithm::Flash`] — globally optimal (`flash`), for spaces up to
//!   [`SearchConfig::flash_max_space`];
//! - [`Algorithm::Lightning`] / [`Algorithm::TopDown`] — utility-guided heuristics (`lightning`);
//! - [`Algorithm::Genetic`] — two-population genetic algorithm (`genetic`);
//! - [`Algorithm::Bfs`] — best-first branch and bound with antichain pruning (`bfs`);
//! - [`Algorithm::DataFly`] / [`Algorithm::ImprovedGreedy`] — minimal-anonymization greedy
//!   heuristics (`greedy`);
//! - [`Algorithm::Exhaustive`] — checks every transformation (`exhaustive`);
//! - [`Algorithm::Auto`] — a portfolio ([`portfolio`]): a quick incumbent, then Flash if the space
//!   is small enough, otherwise BFS, top-down, genetic and Lightning in rounds of check-counted
//!   slices sharing the best solution and every check result.
//!
//! Pruning rules used by the algorithms (each only where valid):
//! - *lower bound*: `CheckResult::lower_bound` bounds the score of a transformation and all its
//!   generalizations, so an up-set whose bound cannot beat the current optimum (in the total
//!   order above) is skipped — valid for Loss, and for the other models unless suppression is
//!   cheaper than generalization (see `lower_bound_valid`);
//! - *anonymity*: anonymous ⇒ generalizations anonymous and not anonymous ⇒ specializations not
//!   anonymous only if [`Problem::privacy_monotonicity`] is `Full`; the minimal class size alone
//!   is monotone when it is `Partial`;
//! - *utility*: an anonymous transformation's generalizations cannot beat it if the score is
//!   monotone (suppression limit 0, or a model that is monotone with suppression).

use std::collections::HashMap;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::time::Instant;

use crate::check::Checker;
use crate::error::{EngineError, Result};
use crate::problem::{PrivacyMonotonicity, Problem};

pub mod bfs;
pub mod exhaustive;
pub mod flash;
pub mod genetic;
pub mod greedy;
pub mod lightning;
pub mod portfolio;
pub mod safepub;

mod candidates;
mod config;
mod context;
mod order;
mod progress;
mod reshape;

pub use bfs::{Antichain, Direction};
pub use candidates::{Candidate, DEFAULT_CANDIDATES, MAX_CANDIDATES};
pub use config::*;
pub(crate) use context::*;
pub(crate) use order::*;
pub use progress::*;

pub use crate::cancel::CancelFlag;

/// Runs a search. Errors only for an invalid configuration (see [`SearchConfig::resolve`]) or if
/// the dedicated thread pool cannot be created.
///
/// Steps:
/// 1. validate the configuration and resolve `Auto`;
/// 2. create a [`Checker`] and, if requested, a dedicated rayon pool;
/// 3. start a progress ticker thread (snapshots every 100 ms);
/// 4. run the algorithm; it checks transformations through the context, which tracks the optimum and
///    the limits;
/// 5. stop the ticker, send a final snapshot and return the outcome.
pub fn search(
    problem: &Problem,
    config: &SearchConfig,
    cancel: &CancelFlag,
    observer: &dyn ProgressObserver,
) -> Result<SearchOutcome> {
    let assumptions = Assumptions {
        privacy: problem.privacy_monotonicity(),
        utility_monotone: utility_monotone(problem),
        lower_bound_valid: lower_bound_valid(problem),
    };
    search_with(problem, config, cancel, observer, assumptions)
}

/// What the algorithms may assume about monotonicity. Weaker assumptions than the problem's
/// (e.g. `Partial` instead of `Full`) are always valid, only slower; tests use them to exercise
/// every configuration of Flash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Assumptions {
    /// Monotonicity of the privacy models.
    pub privacy: PrivacyMonotonicity,
    /// See [`utility_monotone`].
    pub utility_monotone: bool,
    /// See [`lower_bound_valid`].
    pub lower_bound_valid: bool,
}

/// [`search`] with explicit monotonicity assumptions.
pub(crate) fn search_with(
    problem: &Problem,
    config: &SearchConfig,
    cancel: &CancelFlag,
    observer: &dyn ProgressObserver,
    assumptions: Assumptions,
) -> Result<SearchOutcome> {
    let checker = Checker::new(problem);
    search_in(problem, config, cancel, observer, assumptions, &checker)
}

/// [`search_with`] checking with `checker` (tests: other memory budgets give the same outcome).
pub(crate) fn search_in<'p>(
    problem: &'p Problem,
    config: &SearchConfig,
    cancel: &CancelFlag,
    observer: &dyn ProgressObserver,
    assumptions: Assumptions,
    checker: &Checker<'p>,
) -> Result<SearchOutcome> {
    let algorithm = config.resolve(problem)?;
    let (pool, parallel) = search_threads(config.threads)?;
    let shared = Shared::new(algorithm, problem.lattice().size_f64());
    let start = Instant::now();
    // Differential privacy: no candidates (their list would disclose non-private choices).
    let candidates = if problem.dp().is_some() {
        0
    } else {
        config.candidates
    };
    observer.progress(&shared.snapshot(checker, config, start));
    std::thread::scope(|scope| {
        let ticker = scope.spawn(|| shared.tick(checker, config, start, observer));
        let mut ctx = Ctx {
            problem,
            checker,
            config,
            cancel,
            observer,
            shared: &shared,
            pool: pool.as_ref(),
            parallel,
            start,
            best: None,
            best_found_at: None,
            trace: Vec::new(),
            stop: None,
            privacy: assumptions.privacy,
            utility_monotone: assumptions.utility_monotone,
            lower_bound_valid: assumptions.lower_bound_valid,
            strategy: algorithm.into(),
            slice_end: None,
            check_overhead: check_overhead(problem),
            work: 0,
            cache: (algorithm == Algorithm::Auto).then(HashMap::new),
            candidates: candidates::Candidates::new(candidates),
        };
        // Differential privacy with levels to choose: SafePub's search instead (safepub.rs).
        let safepub = problem.dp().is_some_and(|d| d.model.data_dependent);
        let complete = if safepub {
            safepub::run(&mut ctx)
        } else {
            run_algorithm(&mut ctx, algorithm)
        };
        shared.set_phase(Phase::Finished);
        shared.finish();
        let _ = ticker.join();
        let outcome = SearchOutcome {
            algorithm,
            checks: checker.checks(),
            expansions: shared.expansions.load(AtomicOrdering::Relaxed),
            elapsed: start.elapsed(),
            best_found_at: ctx.best_found_at,
            optimal_proven: complete,
            stop: if complete {
                StopReason::Completed
            } else {
                ctx.stop.unwrap_or(StopReason::Completed)
            },
            trace: std::mem::take(&mut ctx.trace),
            best: ctx.best.take(),
            candidates: std::mem::take(&mut ctx.candidates).into_vec(),
        };
        observer.progress(&shared.snapshot(checker, config, start));
        Ok(outcome)
    })
}

/// The pool of a search with `threads` threads (none for one thread, or to use the current
/// pool) and whether the search checks in parallel.
fn search_threads(threads: Option<usize>) -> Result<(Option<rayon::ThreadPool>, bool)> {
    let pool = match threads {
        Some(n) if n > 1 => Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(|i| format!("deid-search-{i}"))
                .build()
                .map_err(|e| EngineError::config("threads", e.to_string()))?,
        ),
        _ => None,
    };
    let parallel = match threads {
        Some(1) => false,
        Some(_) => true,
        None => rayon::current_num_threads() > 1,
    };
    Ok((pool, parallel))
}

/// Runs `algorithm` on `ctx`; true if it completed (the best is optimal).
fn run_algorithm(ctx: &mut Ctx<'_, '_>, algorithm: Algorithm) -> bool {
    match algorithm {
        Algorithm::Auto => portfolio::run(ctx),
        Algorithm::Flash => flash::run(ctx),
        Algorithm::Lightning | Algorithm::TopDown | Algorithm::Genetic => {
            run_resumable(ctx, algorithm)
        }
        Algorithm::Bfs => bfs::run(ctx),
        Algorithm::DataFly => greedy::run_datafly(ctx),
        Algorithm::ImprovedGreedy => greedy::run_improved_greedy(ctx),
        Algorithm::Exhaustive => exhaustive::run(ctx),
    }
}

#[cfg(test)]
thread_local! {
    /// Tests: top-down, Lightning and the genetic algorithm run in slices of this much work,
    /// resuming between them as in `auto`'s portfolio (the outcome must be that of one run).
    pub(crate) static SLICE_WORK: std::cell::Cell<Option<u64>> =
        const { std::cell::Cell::new(None) };
}

#[cfg(test)]
thread_local! {
    /// Tests: the individuals the genetic algorithm adopted from `auto`'s other members.
    pub(crate) static ADOPTED: std::cell::RefCell<Vec<crate::lattice::Levels>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(test)]
thread_local! {
    /// Tests: the transformations that seeded the genetic member of `auto`'s portfolio when it
    /// started, in order.
    pub(crate) static SEEDED: std::cell::RefCell<Vec<crate::lattice::Levels>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(test)]
thread_local! {
    /// Tests: top-down checks every predecessor of an expanded transformation at once, as
    /// without bounds (the reference its lazy checks are compared with).
    pub(crate) static EAGER_TOP_DOWN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Tests: the transformations top-down expanded, in order.
    pub(crate) static EXPANDED: std::cell::RefCell<Vec<crate::lattice::Levels>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(test)]
thread_local! {
    /// Tests: the ruins of `auto`'s ruin-and-repair member (best solution, ruined
    /// transformation) and its repair steps (from, to), in order.
    pub(crate) static RUINS: std::cell::RefCell<Vec<(crate::lattice::Levels, crate::lattice::Levels)>> =
        const { std::cell::RefCell::new(Vec::new()) };
    pub(crate) static REPAIRS: std::cell::RefCell<Vec<(crate::lattice::Levels, crate::lattice::Levels)>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// Tests: the anonymous transformations the member's tries ended at.
    pub(crate) static REPAIRED: std::cell::RefCell<Vec<crate::lattice::Levels>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(test)]
thread_local! {
    /// Tests: `auto`'s first descent, one entry per slice: the work done when it ended and
    /// top-down's own best score then (the first entry: the work before the descent).
    pub(crate) static DESCENT: std::cell::RefCell<Vec<(u64, f64)>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// Tests: whether the first descent ended by its rule (not by a limit or a proof).
    pub(crate) static DESCENT_ENDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs one of the resumable algorithms (in test slices if [`SLICE_WORK`] is set).
fn run_resumable(ctx: &mut Ctx<'_, '_>, algorithm: Algorithm) -> bool {
    #[cfg(test)]
    let slice = SLICE_WORK.get();
    #[cfg(not(test))]
    let slice: Option<u64> = None;
    let mut member = portfolio::Member::new(algorithm, ctx);
    loop {
        let end = slice.map(|n| ctx.work.saturating_add(n));
        if ctx.sliced(end, |ctx| member.resume(ctx)) {
            return true;
        }
        if slice.is_none() || ctx.should_stop() {
            return false;
        }
    }
}

/// True if, among anonymous transformations, the score never decreases under generalization:
/// without suppression every model is monotone with generalization; with suppression only the
/// models flagged monotone with suppression are.
pub(crate) fn utility_monotone(problem: &Problem) -> bool {
    problem.max_suppressed() == 0 || problem.quality_config().model.monotone_with_suppression()
}

/// True if `CheckResult::lower_bound` bounds the scores of all generalizations. For Loss it
/// always does: a suppressed record costs its generalized share plus a non-negative excess
/// (`quality/loss.rs`), so the score of every generalization is at least its
/// generalization-only bound, which never decreases upwards. For the other models it does not
/// when suppressed records cost less than generalized ones (gs-factor < 0.5, i.e. suppression
/// factor < 1) and records may be suppressed: a generalization can then suppress more cheaply
/// than their bounds assume (found by comparison with exhaustive search), and lower-bound
/// pruning is disabled.
pub(crate) fn lower_bound_valid(problem: &Problem) -> bool {
    problem.max_suppressed() == 0
        || problem.quality_config().suppression_factor() >= 1.0
        || problem.quality_config().model == crate::quality::QualityModel::Loss
}

#[cfg(test)]
pub(crate) mod tests;
