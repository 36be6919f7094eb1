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
//!   order above) is skipped — valid unless suppression is cheaper than generalization (see
//!   `lower_bound_valid`);
//! - *anonymity*: anonymous ⇒ generalizations anonymous and not anonymous ⇒ specializations not
//!   anonymous only if [`Problem::privacy_monotonicity`] is `Full`; the minimal class size alone
//!   is monotone when it is `Partial`;
//! - *utility*: an anonymous transformation's generalizations cannot beat it if the score is
//!   monotone (suppression limit 0, or a model that is monotone with suppression).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::check::{CheckResult, Checker};
use crate::error::{EngineError, Result};
use crate::lattice::{Lattice, Levels};
use crate::problem::{PrivacyMonotonicity, Problem};

pub mod bfs;
pub mod exhaustive;
pub mod flash;
pub mod genetic;
pub mod greedy;
pub mod lightning;
pub mod portfolio;

pub use bfs::{Antichain, Direction};

/// The search strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// The portfolio ([`portfolio`]): a quick incumbent, then Flash if the solution space has
    /// at most [`SearchConfig::flash_max_space`] transformations, otherwise BFS, top-down,
    /// genetic and Lightning taking turns and sharing what they find.
    Auto,
    /// Flash: globally optimal, with predictive tagging (`docs/definitions.md` §2.3).
    Flash,
    /// Lightning: bottom-up hybrid best-first/greedy heuristic (`docs/definitions.md` §2.3).
    Lightning,
    /// Top-down best-first heuristic (`docs/definitions.md` §2.3).
    TopDown,
    /// Genetic algorithm with two subpopulations (`docs/definitions.md` §2.3).
    Genetic,
    /// Best-first branch and bound with antichain pruning: optimal when it finishes.
    Bfs,
    /// Sweeney's DataFly (minimal anonymization).
    DataFly,
    /// Improved Greedy heuristic of Babu et al. (minimal anonymization).
    ImprovedGreedy,
    /// Checks every transformation.
    Exhaustive,
}

impl Algorithm {
    /// All algorithms, in documentation order.
    pub const ALL: [Algorithm; 9] = [
        Algorithm::Auto,
        Algorithm::Flash,
        Algorithm::Lightning,
        Algorithm::TopDown,
        Algorithm::Genetic,
        Algorithm::Bfs,
        Algorithm::DataFly,
        Algorithm::ImprovedGreedy,
        Algorithm::Exhaustive,
    ];

    /// Stable name used in configuration and reports (`auto`, `flash`, `lightning`, `top-down`,
    /// `genetic`, `bfs`, `datafly`, `improved-greedy`, `exhaustive`).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Auto => "auto",
            Algorithm::Flash => "flash",
            Algorithm::Lightning => "lightning",
            Algorithm::TopDown => "top-down",
            Algorithm::Genetic => "genetic",
            Algorithm::Bfs => "bfs",
            Algorithm::DataFly => "datafly",
            Algorithm::ImprovedGreedy => "improved-greedy",
            Algorithm::Exhaustive => "exhaustive",
        }
    }

    /// Parses a name produced by [`Algorithm::name`].
    pub fn parse(name: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name() == name)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parameters of the genetic algorithm. Defaults are those of Table 2 of the paper
/// (Prasser et al., GigaScience 2020), which differ from ARX 3.9.2's built-in defaults
/// (crossover 0.2, mutation 0.2, subpopulation 100).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeneticParams {
    /// Generations (≥ 1) after which the search stops if `stop_after_iterations` is set (the
    /// paper's and ARX's behaviour). Otherwise evolution goes on until the time limit, and this
    /// is the stagnation window: after `iterations` generations without a better individual,
    /// everything but the elite is re-seeded at random.
    pub iterations: u32,
    /// Stop after `iterations` generations even if time is left (default false: use the whole
    /// time limit, which finds better transformations on large solution spaces).
    pub stop_after_iterations: bool,
    /// Individuals per subpopulation (≥ 2).
    pub subpopulation_size: usize,
    /// Share of each subpopulation copied unchanged into the next generation, in [0, 1].
    pub elite_fraction: f64,
    /// Share of each subpopulation replaced by children of two parents, in [0, 1].
    pub crossover_fraction: f64,
    /// Share of the fittest individuals that may become parents, in (0, 1].
    pub production_fraction: f64,
    /// A mutant changes between 1 and ⌈mutation_probability · #QIs⌉ genes, in [0, 1].
    pub mutation_probability: f64,
    /// Generations between two exchanges of the fittest individuals (0 disables immigration).
    pub immigration_interval: u32,
    /// Share of each subpopulation exchanged at an immigration, in [0, 1].
    pub immigration_fraction: f64,
}

impl Default for GeneticParams {
    fn default() -> Self {
        GeneticParams {
            iterations: 50,
            stop_after_iterations: false,
            subpopulation_size: 50,
            elite_fraction: 0.2,
            crossover_fraction: 0.4,
            production_fraction: 0.2,
            mutation_probability: 0.05,
            immigration_interval: 10,
            immigration_fraction: 0.2,
        }
    }
}

/// Largest [`GeneticParams::iterations`].
pub const MAX_ITERATIONS: u32 = 100_000;
/// Largest [`GeneticParams::subpopulation_size`]: both subpopulations are allocated (and
/// checked) at once, so this bounds the memory of one generation.
pub const MAX_SUBPOPULATION_SIZE: usize = 10_000;
/// Largest [`GeneticParams::immigration_interval`].
pub const MAX_IMMIGRATION_INTERVAL: u32 = 100_000;
/// Largest [`SearchConfig::threads`] (a dedicated pool of that many threads is started).
pub const MAX_THREADS: usize = 1024;
/// Largest [`SearchConfig::check_limit`] (far more checks than any time limit allows).
pub const MAX_CHECK_LIMIT: u64 = 1_000_000_000_000;

impl GeneticParams {
    /// Checks parameter ranges; errors name the parameter (`elite_fraction`, …) and the
    /// allowed range.
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_ITERATIONS).contains(&self.iterations) {
            return Err(EngineError::config(
                "iterations",
                format!(
                    "expected 1 to {MAX_ITERATIONS} iterations, got {}",
                    self.iterations
                ),
            ));
        }
        if !(2..=MAX_SUBPOPULATION_SIZE).contains(&self.subpopulation_size) {
            return Err(EngineError::config(
                "subpopulation_size",
                format!(
                    "expected 2 to {MAX_SUBPOPULATION_SIZE} individuals, got {}",
                    self.subpopulation_size
                ),
            ));
        }
        if self.immigration_interval > MAX_IMMIGRATION_INTERVAL {
            return Err(EngineError::config(
                "immigration_interval",
                format!(
                    "expected 0 to {MAX_IMMIGRATION_INTERVAL} generations, got {}",
                    self.immigration_interval
                ),
            ));
        }
        let fractions = [
            ("elite_fraction", self.elite_fraction, false),
            ("crossover_fraction", self.crossover_fraction, false),
            ("production_fraction", self.production_fraction, true),
            ("mutation_probability", self.mutation_probability, false),
            ("immigration_fraction", self.immigration_fraction, false),
        ];
        for (name, v, positive) in fractions {
            if !(0.0..=1.0).contains(&v) || (positive && v <= 0.0) {
                let range = if positive { "(0, 1]" } else { "[0, 1]" };
                return Err(EngineError::config(
                    name,
                    format!("expected a number in {range}, got {v}"),
                ));
            }
        }
        if self.elite_fraction + self.crossover_fraction > 1.0 {
            return Err(EngineError::config(
                "crossover_fraction",
                format!(
                    "elite_fraction + crossover_fraction must not exceed 1, got {} + {}",
                    self.elite_fraction, self.crossover_fraction
                ),
            ));
        }
        Ok(())
    }
}

/// Everything that controls a search (besides the problem).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchConfig {
    /// The strategy.
    pub algorithm: Algorithm,
    /// Wall-clock limit of the search and of the evaluation of its result: the search starts no
    /// check once the time left is less than twice its slowest check so far (at most a tenth of
    /// the limit) — one more check and the evaluation of the best — and returns the best
    /// transformation found so far. Must be > 0.
    pub time_limit: Duration,
    /// Stop after this many checks (≥ 1); `None` = unlimited.
    pub check_limit: Option<u64>,
    /// Seed of the random number generator (genetic algorithm).
    pub seed: u64,
    /// Worker threads for checking: `None` = the rayon pool the caller runs in (the global pool
    /// unless inside `ThreadPool::install`), `Some(1)` = sequential, `Some(n)` = a dedicated pool
    /// of n threads for this search. Results never depend on it.
    pub threads: Option<usize>,
    /// Parameters of the genetic algorithm.
    pub genetic: GeneticParams,
    /// Largest solution space for which `Auto` picks Flash and Flash may be used at all
    /// (Flash keeps one byte per transformation).
    pub flash_max_space: u128,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            algorithm: Algorithm::Auto,
            time_limit: Duration::from_secs(30),
            check_limit: None,
            seed: 0,
            threads: None,
            genetic: GeneticParams::default(),
            flash_max_space: DEFAULT_FLASH_MAX_SPACE,
        }
    }
}

/// Default of [`SearchConfig::flash_max_space`] (ARX's `heuristicSearchThreshold`).
pub const DEFAULT_FLASH_MAX_SPACE: u128 = 100_000;

/// Hard upper bound on the space Flash accepts, whatever `flash_max_space` says: Flash keeps
/// one byte per transformation, so this bounds its memory to 100 MB (ARX allows 2^31 − 1).
pub const FLASH_HARD_LIMIT: u128 = 100_000_000;

impl SearchConfig {
    /// True if Flash may run on `problem`: its space has at most
    /// [`SearchConfig::flash_max_space`] (and [`FLASH_HARD_LIMIT`]) transformations.
    pub fn flash_fits(&self, problem: &Problem) -> bool {
        problem
            .lattice()
            .size()
            .is_some_and(|s| s <= self.flash_max_space && s <= FLASH_HARD_LIMIT)
    }

    /// Checks the configuration against a problem and resolves [`Algorithm::Auto`]. Errors name
    /// the setting (`time_limit`, `genetic.elite_fraction`, …).
    pub fn resolve(&self, problem: &Problem) -> Result<Algorithm> {
        if self.time_limit.is_zero() {
            return Err(EngineError::config(
                "time_limit",
                "expected a positive duration, got 0",
            ));
        }
        if let Some(c) = self.check_limit
            && !(1..=MAX_CHECK_LIMIT).contains(&c)
        {
            return Err(EngineError::config(
                "check_limit",
                format!("expected 1 to {MAX_CHECK_LIMIT} checks, got {c}"),
            ));
        }
        if let Some(t) = self.threads
            && !(1..=MAX_THREADS).contains(&t)
        {
            return Err(EngineError::config(
                "threads",
                format!("expected 1 to {MAX_THREADS} threads, got {t}"),
            ));
        }
        let flash_ok = self.flash_fits(problem);
        match self.algorithm {
            Algorithm::Auto => {
                self.genetic.validate().map_err(|e| e.within("genetic"))?;
                Ok(Algorithm::Auto)
            }
            Algorithm::Flash if !flash_ok => Err(EngineError::config(
                "algorithm",
                format!(
                    "flash needs a solution space of at most {} transformations (flash_max_space), \
                     this one has {}; choose a heuristic (lightning, top-down, genetic, bfs) \
                     or raise flash_max_space",
                    self.flash_max_space.min(FLASH_HARD_LIMIT),
                    problem.lattice().size_string()
                ),
            )),
            Algorithm::Genetic => {
                self.genetic.validate().map_err(|e| e.within("genetic"))?;
                Ok(Algorithm::Genetic)
            }
            other => Ok(other),
        }
    }
}

pub use crate::cancel::CancelFlag;

/// What a search is doing right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Phase {
    /// Before the first check.
    Starting = 0,
    /// Generic search step (exhaustive, greedy heuristics, BFS, top-down).
    Searching = 1,
    /// Flash: binary search on paths for the anonymity border.
    Binary = 2,
    /// Flash: depth-first check of every candidate above the border.
    Linear = 3,
    /// Lightning: best-first expansion.
    BestFirst = 4,
    /// Lightning: greedy dive.
    Greedy = 5,
    /// Genetic algorithm: evolving generations.
    Evolving = 6,
    /// The search has ended.
    Finished = 7,
}

impl Phase {
    /// Every phase, in the order of their values.
    pub const ALL: [Phase; 8] = [
        Phase::Starting,
        Phase::Searching,
        Phase::Binary,
        Phase::Linear,
        Phase::BestFirst,
        Phase::Greedy,
        Phase::Evolving,
        Phase::Finished,
    ];

    /// The phase with this [`name`](Phase::name).
    pub fn parse(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Stable name for reports (`starting`, `searching`, `binary`, `linear`, `best-first`,
    /// `greedy`, `evolving`, `finished`).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Searching => "searching",
            Phase::Binary => "binary",
            Phase::Linear => "linear",
            Phase::BestFirst => "best-first",
            Phase::Greedy => "greedy",
            Phase::Evolving => "evolving",
            Phase::Finished => "finished",
        }
    }

    fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::Starting,
            1 => Phase::Searching,
            2 => Phase::Binary,
            3 => Phase::Linear,
            4 => Phase::BestFirst,
            5 => Phase::Greedy,
            6 => Phase::Evolving,
            _ => Phase::Finished,
        }
    }
}

/// A progress snapshot (sent at least every ~100 ms while searching, and once at the end).
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// The algorithm running (`Auto` for the portfolio).
    pub algorithm: Algorithm,
    /// Current phase.
    pub phase: Phase,
    /// Checks performed so far.
    pub checks: u64,
    /// Expansions so far (see [`SearchOutcome::expansions`]).
    pub expansions: u64,
    /// Time since the search started.
    pub elapsed: Duration,
    /// Number of transformations in the solution space (approximate beyond 2^53).
    pub space_size: f64,
    /// Share of the solution space classified so far (checked or pruned), in [0, 1].
    pub explored: f64,
    /// Overall progress estimate in [0, 1]: the largest of `explored`, the algorithm's own
    /// estimate (e.g. generations done), elapsed/time limit and checks/check limit.
    pub progress: f64,
    /// Score of the best anonymous transformation so far.
    pub best_score: Option<f64>,
}

/// A new best anonymous transformation.
#[derive(Debug, Clone, PartialEq)]
pub struct Improvement {
    /// The transformation.
    pub levels: Levels,
    /// Its score (lower = better).
    pub score: f64,
    /// Its utility in [0, 1].
    pub utility: f64,
    /// Records it suppresses.
    pub suppressed: usize,
    /// Time since the search started.
    pub found_at: Duration,
    /// Checks performed when it was found.
    pub checks: u64,
    /// The strategy that found it: the algorithm itself, or for [`Algorithm::Auto`] the
    /// portfolio member that was running.
    pub strategy: Algorithm,
    /// The step of local generalization whose records it transforms (`None`: a global
    /// search; see the module `local`).
    pub step: Option<usize>,
}

/// Receives progress and improvements. Called from the search thread and from a progress ticker
/// thread, so implementations must be `Sync` and cheap (e.g. store into a `watch` channel).
pub trait ProgressObserver: Sync {
    /// A periodic snapshot.
    fn progress(&self, progress: &Progress) {
        let _ = progress;
    }

    /// A strictly better anonymous transformation was found (calls come in order, each better
    /// than the previous one).
    fn improved(&self, improvement: &Improvement) {
        let _ = improvement;
    }
}

/// An observer that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoObserver;

impl ProgressObserver for NoObserver {}

/// Why a search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// The algorithm ran to its natural end.
    Completed,
    /// The time limit was reached.
    TimeLimit,
    /// The check limit was reached.
    CheckLimit,
    /// The cancel flag was set.
    Cancelled,
}

impl StopReason {
    /// Stable name for reports (`completed`, `time-limit`, `check-limit`, `cancelled`).
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Completed => "completed",
            StopReason::TimeLimit => "time-limit",
            StopReason::CheckLimit => "check-limit",
            StopReason::Cancelled => "cancelled",
        }
    }
}

/// Result of a search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome {
    /// The algorithm that ran (`Auto`: the portfolio).
    pub algorithm: Algorithm,
    /// The best anonymous transformation found (`None`: no anonymous transformation was found).
    pub best: Option<CheckResult>,
    /// Transformations checked.
    pub checks: u64,
    /// Nodes whose neighbours were generated (Lightning, top-down, BFS, Flash's linear phase and
    /// heap), steps of the greedy heuristics, individuals bred by the genetic algorithm.
    pub expansions: u64,
    /// Total time.
    pub elapsed: Duration,
    /// When `best` was found.
    pub best_found_at: Option<Duration>,
    /// True if the whole space was checked or pruned, i.e. `best` is the global optimum (and
    /// `best == None` proves that no anonymous transformation exists).
    pub optimal_proven: bool,
    /// Why the search ended.
    pub stop: StopReason,
    /// Every improvement, in order.
    pub trace: Vec<Improvement>,
}

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
    let pool = match config.threads {
        Some(n) if n > 1 => Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(|i| format!("deid-search-{i}"))
                .build()
                .map_err(|e| EngineError::config("threads", e.to_string()))?,
        ),
        _ => None,
    };
    let parallel = match config.threads {
        Some(1) => false,
        Some(_) => true,
        None => rayon::current_num_threads() > 1,
    };
    let shared = Shared::new(algorithm, problem.lattice().size_f64());
    let start = Instant::now();
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
            strategy: algorithm,
            slice_end: None,
            check_overhead: check_overhead(problem),
            work: 0,
            cache: (algorithm == Algorithm::Auto).then(HashMap::new),
        };
        let complete = match algorithm {
            Algorithm::Auto => portfolio::run(&mut ctx),
            Algorithm::Flash => flash::run(&mut ctx),
            Algorithm::Lightning | Algorithm::TopDown | Algorithm::Genetic => {
                run_resumable(&mut ctx, algorithm)
            }
            Algorithm::Bfs => bfs::run(&mut ctx),
            Algorithm::DataFly => greedy::run_datafly(&mut ctx),
            Algorithm::ImprovedGreedy => greedy::run_improved_greedy(&mut ctx),
            Algorithm::Exhaustive => exhaustive::run(&mut ctx),
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
        };
        observer.progress(&shared.snapshot(checker, config, start));
        Ok(outcome)
    })
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
    pub(crate) static ADOPTED: std::cell::RefCell<Vec<Levels>> =
        const { std::cell::RefCell::new(Vec::new()) };
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

/// True if `CheckResult::lower_bound` bounds the scores of all generalizations. It does not when
/// suppressed records cost less than generalized ones (gs-factor < 0.5, i.e. suppression factor
/// < 1) and records may be suppressed: a generalization can then suppress more cheaply than the
/// generalization-only bound assumes (found by comparison with exhaustive search). Lower-bound
/// pruning is disabled in that case.
pub(crate) fn lower_bound_valid(problem: &Problem) -> bool {
    problem.max_suppressed() == 0 || problem.quality_config().suppression_factor() >= 1.0
}

/// Order of two transformations with the same score: lower rank, then lexicographically smaller.
pub(crate) fn levels_cmp(a: &[u8], b: &[u8]) -> Ordering {
    Lattice::rank(a)
        .cmp(&Lattice::rank(b))
        .then_with(|| a.cmp(b))
}

/// Relative tolerance for comparing scores. Normalised quality values are truncated to 10
/// digits and summed in different orders along different code paths (per class for the score,
/// per value for the generalization-only bound), so mathematically equal scores can differ by
/// about 1e-10; such differences must not decide between two transformations.
pub(crate) const SCORE_TOLERANCE: f64 = 1e-9;

fn tolerance(a: f64, b: f64) -> f64 {
    SCORE_TOLERANCE * a.abs().max(b.abs()).max(1.0)
}

/// Compares two scores for the optimum: equal within [`SCORE_TOLERANCE`] (relative, at least
/// absolute), NaN sorts last.
pub(crate) fn score_cmp(a: f64, b: f64) -> Ordering {
    if (a - b).abs() <= tolerance(a, b) {
        return Ordering::Equal;
    }
    a.partial_cmp(&b).unwrap_or_else(|| a.total_cmp(&b))
}

/// The optimum order: score (with tolerance), then rank, then levels. Decides what the result
/// is; not a total order in the strict sense (tolerance is not transitive), so heaps and sorts use
/// [`exact_cmp`].
pub(crate) fn key_cmp(a_score: f64, a: &[u8], b_score: f64, b: &[u8]) -> Ordering {
    score_cmp(a_score, b_score).then_with(|| levels_cmp(a, b))
}

/// A strict total order consistent with [`key_cmp`] up to the tolerance: exact score, then rank,
/// then levels. Used to order queues and populations.
pub(crate) fn exact_cmp(a_score: f64, a: &[u8], b_score: f64, b: &[u8]) -> Ordering {
    a_score.total_cmp(&b_score).then_with(|| levels_cmp(a, b))
}

/// A checked transformation as a heap entry, ordered by (score, rank, levels) only; wrap in
/// `Reverse` for a min-heap.
#[derive(Debug, Clone)]
pub(crate) struct Scored {
    pub score: f64,
    pub levels: Levels,
    pub lower_bound: f64,
    pub anonymous: bool,
}

impl Scored {
    /// The entry for a check result.
    pub fn of(r: &CheckResult) -> Scored {
        Scored {
            score: r.score,
            levels: r.levels.clone(),
            lower_bound: r.lower_bound,
            anonymous: r.anonymous,
        }
    }
}

impl PartialEq for Scored {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        exact_cmp(self.score, &self.levels, other.score, &other.levels)
    }
}

/// Progress state shared with the ticker thread.
struct Shared {
    algorithm: Algorithm,
    space_size: f64,
    expansions: AtomicU64,
    explored: AtomicU64,
    phase: AtomicU8,
    best_score: AtomicU64,
    has_best: AtomicBool,
    algo_progress: AtomicU64,
    done: Mutex<bool>,
    wake: Condvar,
}

/// Interval of progress snapshots.
const TICK: Duration = Duration::from_millis(100);

impl Shared {
    fn new(algorithm: Algorithm, space_size: f64) -> Shared {
        Shared {
            algorithm,
            space_size,
            expansions: AtomicU64::new(0),
            explored: AtomicU64::new(0),
            phase: AtomicU8::new(Phase::Starting as u8),
            best_score: AtomicU64::new(0),
            has_best: AtomicBool::new(false),
            algo_progress: AtomicU64::new(0f64.to_bits()),
            done: Mutex::new(false),
            wake: Condvar::new(),
        }
    }

    fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u8, AtomicOrdering::Relaxed);
    }

    fn finish(&self) {
        if let Ok(mut d) = self.done.lock() {
            *d = true;
        }
        self.wake.notify_all();
    }

    /// The ticker loop: a snapshot every [`TICK`] until [`Shared::finish`].
    fn tick(
        &self,
        checker: &Checker<'_>,
        config: &SearchConfig,
        start: Instant,
        observer: &dyn ProgressObserver,
    ) {
        let Ok(mut done) = self.done.lock() else {
            return;
        };
        loop {
            if *done {
                return;
            }
            let (guard, _) = match self.wake.wait_timeout(done, TICK) {
                Ok(r) => r,
                Err(_) => return,
            };
            done = guard;
            if *done {
                return;
            }
            observer.progress(&self.snapshot(checker, config, start));
        }
    }

    fn snapshot(&self, checker: &Checker<'_>, config: &SearchConfig, start: Instant) -> Progress {
        let checks = checker.checks();
        let elapsed = start.elapsed();
        let explored = if self.space_size > 0.0 {
            (self.explored.load(AtomicOrdering::Relaxed) as f64 / self.space_size).min(1.0)
        } else {
            0.0
        };
        let algo = f64::from_bits(self.algo_progress.load(AtomicOrdering::Relaxed));
        let by_time = elapsed.as_secs_f64() / config.time_limit.as_secs_f64();
        let by_checks = config.check_limit.map_or(0.0, |l| checks as f64 / l as f64);
        let progress = explored.max(algo).max(by_time).max(by_checks).min(1.0);
        let best_score = self
            .has_best
            .load(AtomicOrdering::Acquire)
            .then(|| f64::from_bits(self.best_score.load(AtomicOrdering::Relaxed)));
        Progress {
            algorithm: self.algorithm,
            phase: Phase::from_u8(self.phase.load(AtomicOrdering::Relaxed)),
            checks,
            expansions: self.expansions.load(AtomicOrdering::Relaxed),
            elapsed,
            space_size: self.space_size,
            explored,
            progress,
            best_score,
        }
    }
}

/// The search context every algorithm works through.
pub(crate) struct Ctx<'a, 'p> {
    /// The problem.
    pub problem: &'p Problem,
    checker: &'a Checker<'p>,
    config: &'a SearchConfig,
    cancel: &'a CancelFlag,
    observer: &'a dyn ProgressObserver,
    shared: &'a Shared,
    pool: Option<&'a rayon::ThreadPool>,
    parallel: bool,
    start: Instant,
    best: Option<CheckResult>,
    best_found_at: Option<Duration>,
    trace: Vec<Improvement>,
    stop: Option<StopReason>,
    privacy: PrivacyMonotonicity,
    /// See [`utility_monotone`].
    pub utility_monotone: bool,
    lower_bound_valid: bool,
    /// The strategy running now (labels improvements).
    strategy: Algorithm,
    /// The [`Ctx::work`] at which the current slice of the portfolio ends.
    slice_end: Option<u64>,
    /// Fixed cost of one check in [`Ctx::work`] units, see [`check_overhead`].
    check_overhead: u64,
    /// Work of the checks made so far: the classes of each result plus the check overhead, a
    /// deterministic measure of their cost (cached results cost nothing).
    work: u64,
    /// Results of every check so far (portfolio: strategies share them), bounded by
    /// [`RESULT_CACHE_ENTRIES`].
    cache: Option<HashMap<Levels, CheckResult>>,
}

/// Least fixed cost of one check in [`Ctx::work`] units (classes), besides its classes.
pub(crate) const CHECK_OVERHEAD: u64 = 64;

/// Fixed cost of one check in [`Ctx::work`] units, besides its classes: half the base groups
/// (at least [`CHECK_OVERHEAD`]). A check groups the entries of a cached finer result, and on
/// the way down the lattice (top-down) or at random points (genetic) that is mostly the base
/// groups, whatever the size of the result; measured on creditcard_int, a check of a few
/// hundred classes costs about 40 % of one of 30,000.
pub(crate) fn check_overhead(problem: &Problem) -> u64 {
    (problem.base_groups().len() as u64 / 2).max(CHECK_OVERHEAD)
}

/// Most results the portfolio's shared cache keeps (about 150 bytes each); later results are
/// not cached.
pub(crate) const RESULT_CACHE_ENTRIES: usize = 1 << 20;

impl<'a, 'p> Ctx<'a, 'p> {
    /// The configuration.
    pub fn config(&self) -> &SearchConfig {
        self.config
    }

    /// The solution space.
    pub fn lattice(&self) -> &'p Lattice {
        self.problem.lattice()
    }

    /// Monotonicity of the privacy models.
    pub fn privacy(&self) -> PrivacyMonotonicity {
        self.privacy
    }

    /// In `auto`'s portfolio, the best transformation found so far by any member (`None`
    /// outside the portfolio, so that single algorithms behave as documented).
    pub fn shared_best(&self) -> Option<Levels> {
        self.cache.as_ref()?;
        self.best.as_ref().map(|b| b.levels.clone())
    }

    /// The score of the best solution so far (infinite before the first).
    pub(crate) fn best_score(&self) -> f64 {
        self.best.as_ref().map_or(f64::INFINITY, |b| b.score)
    }

    /// Sets the current phase.
    pub fn set_phase(&self, phase: Phase) {
        self.shared.set_phase(phase);
    }

    /// Adds to the expansion counter.
    pub fn add_expansions(&self, n: u64) {
        self.shared.expansions.fetch_add(n, AtomicOrdering::Relaxed);
    }

    /// Sets the number of transformations classified so far.
    pub fn set_explored(&self, n: u64) {
        self.shared.explored.store(n, AtomicOrdering::Relaxed);
    }

    /// Sets the algorithm's own progress estimate in [0, 1].
    pub fn set_algorithm_progress(&self, p: f64) {
        self.shared
            .algo_progress
            .store(p.clamp(0.0, 1.0).to_bits(), AtomicOrdering::Relaxed);
    }

    /// True if the search must stop (limit hit or cancelled; the reason is recorded) or the
    /// current slice of the portfolio is used up.
    pub fn should_stop(&mut self) -> bool {
        if self.stop.is_some() {
            return true;
        }
        if self.slice_end.is_some_and(|e| self.work >= e) {
            return true;
        }
        if self.cancel.is_cancelled() {
            self.stop = Some(StopReason::Cancelled);
        } else if self.out_of_time() {
            self.stop = Some(StopReason::TimeLimit);
        } else if self
            .config
            .check_limit
            .is_some_and(|l| self.checker.checks() >= l)
        {
            self.stop = Some(StopReason::CheckLimit);
        }
        self.stop.is_some()
    }

    /// Adds the work of a new check's result to [`Ctx::work`].
    fn charge(&mut self, r: &CheckResult) {
        self.work += r.classes as u64 + self.check_overhead;
    }

    /// Runs `f` as a slice of the portfolio that ends once [`Ctx::work`] reaches `end` (`None`:
    /// only the limits stop it). A slice never cuts a batch of checks: it ends before the next.
    pub fn sliced<R>(&mut self, end: Option<u64>, f: impl FnOnce(&mut Self) -> R) -> R {
        self.slice_end = end;
        let r = f(self);
        self.slice_end = None;
        r
    }

    /// Thread-safe part of [`Ctx::should_stop`] used inside parallel batches.
    fn interrupted(&self) -> bool {
        self.cancel.is_cancelled() || self.out_of_time()
    }

    /// True once the time left is less than the time kept for one more check and the
    /// evaluation of the result (see [`SearchConfig::time_limit`]).
    fn out_of_time(&self) -> bool {
        let reserve = (self.checker.slowest_check() * 2).min(self.config.time_limit / 10);
        self.start.elapsed() + reserve > self.config.time_limit
    }

    /// Checks one transformation (`None` if the search must stop). A result already in the
    /// shared cache is returned without checking again.
    pub fn check(&mut self, levels: &[u8]) -> Option<CheckResult> {
        if self.should_stop() {
            return None;
        }
        if let Some(r) = self.cache.as_ref().and_then(|c| c.get(levels)) {
            let r = r.clone();
            self.offer(&r);
            return Some(r);
        }
        let r = self.checker.check(levels);
        self.charge(&r);
        self.offer(&r);
        self.remember(&r);
        Some(r)
    }

    fn remember(&mut self, r: &CheckResult) {
        if let Some(c) = &mut self.cache
            && c.len() < RESULT_CACHE_ENTRIES
        {
            c.insert(r.levels.clone(), r.clone());
        }
    }

    /// Checks left before the check limit (`usize::MAX`: unlimited). A slice of the portfolio
    /// is not cut inside a batch: it ends before the next one.
    fn check_budget(&self) -> usize {
        match self.config.check_limit {
            Some(l) => {
                usize::try_from(l.saturating_sub(self.checker.checks())).unwrap_or(usize::MAX)
            }
            None => usize::MAX,
        }
    }

    /// Checks `nodes` (in parallel if configured) and returns the results of those that were
    /// checked, in input order; offers each to the optimum in that order. Fewer results than
    /// nodes means the search must stop ([`Ctx::stopped`] is then true). The check limit cuts
    /// the batch deterministically (cached results cost nothing).
    pub fn check_all(&mut self, nodes: &[Levels]) -> Vec<CheckResult> {
        if self.cache.is_none() {
            return self.batch(nodes, |c, n| c.check(n), |r| r);
        }
        if nodes.is_empty() || self.should_stop() {
            return Vec::new();
        }
        let cache = self.cache.as_ref().expect("checked");
        let cached: Vec<Option<CheckResult>> =
            nodes.iter().map(|n| cache.get(n).cloned()).collect();
        let budget = self.check_budget();
        let mut cut = nodes.len();
        let mut misses = 0usize;
        for (i, c) in cached.iter().enumerate() {
            if c.is_none() {
                if misses == budget {
                    cut = i;
                    break;
                }
                misses += 1;
            }
        }
        let fresh_nodes: Vec<&Levels> = (0..cut)
            .filter(|&i| cached[i].is_none())
            .map(|i| &nodes[i])
            .collect();
        let mut fresh = self
            .run_parallel(&fresh_nodes, |c, n| c.check(n))
            .into_iter();
        let mut out = Vec::with_capacity(cut);
        for c in cached.into_iter().take(cut) {
            match c {
                Some(r) => out.push(r),
                None => match fresh.next().flatten() {
                    Some(r) => {
                        self.charge(&r);
                        out.push(r);
                    }
                    None => break,
                },
            }
        }
        for r in &out {
            self.offer(r);
            self.remember(r);
        }
        if out.len() < nodes.len() {
            self.should_stop();
        }
        out
    }

    /// Runs `f` on every node (in parallel if configured), `None` for nodes skipped because the
    /// time limit passed or the search was cancelled.
    fn run_parallel<R: Send>(
        &self,
        nodes: &[&Levels],
        f: impl Fn(&Checker<'p>, &[u8]) -> R + Sync + Send,
    ) -> Vec<Option<R>> {
        let checker = self.checker;
        if !self.parallel || nodes.len() <= 1 {
            let mut out = Vec::with_capacity(nodes.len());
            for n in nodes {
                out.push((!self.interrupted()).then(|| f(checker, n)));
            }
            return out;
        }
        let run = || {
            nodes
                .par_iter()
                .map(|n| (!self.interrupted()).then(|| f(checker, n)))
                .collect::<Vec<Option<R>>>()
        };
        match self.pool {
            Some(p) => p.install(run),
            None => run(),
        }
    }

    /// Like [`Ctx::check_all`] but runs `f` (which must check exactly once, e.g. via
    /// `Checker::evaluate`) and extracts the verdict with `result`.
    pub fn batch<R: Send>(
        &mut self,
        nodes: &[Levels],
        f: impl Fn(&Checker<'p>, &[u8]) -> R + Sync + Send,
        result: impl Fn(&R) -> &CheckResult,
    ) -> Vec<R> {
        if nodes.is_empty() || self.should_stop() {
            return Vec::new();
        }
        let total = nodes.len();
        let take = total.min(self.check_budget());
        let nodes = &nodes[..take];
        let checker = self.checker;
        let out: Vec<R> = if !self.parallel || nodes.len() == 1 {
            let mut out = Vec::with_capacity(nodes.len());
            for n in nodes {
                if self.interrupted() {
                    break;
                }
                out.push(f(checker, n));
            }
            out
        } else {
            let this = &*self;
            let run = || {
                nodes
                    .par_iter()
                    .map(|n| (!this.interrupted()).then(|| f(checker, n)))
                    .collect::<Vec<Option<R>>>()
            };
            let raw = match self.pool {
                Some(p) => p.install(run),
                None => run(),
            };
            raw.into_iter().flatten().collect()
        };
        for r in &out {
            self.charge(result(r));
            self.offer(result(r));
        }
        if out.len() < total {
            self.should_stop();
        }
        out
    }

    /// True once a limit was hit or the search was cancelled (as last seen by
    /// [`Ctx::should_stop`]), or the portfolio's slice is used up.
    pub fn stopped(&self) -> bool {
        self.stop.is_some() || self.slice_end.is_some_and(|e| self.work >= e)
    }

    /// Makes `r` the optimum if it is anonymous and better than the current one.
    pub fn offer(&mut self, r: &CheckResult) {
        if !r.anonymous {
            return;
        }
        if let Some(b) = &self.best
            && key_cmp(r.score, &r.levels, b.score, &b.levels) != Ordering::Less
        {
            return;
        }
        let found_at = self.start.elapsed();
        let imp = Improvement {
            levels: r.levels.clone(),
            score: r.score,
            utility: r.utility,
            suppressed: r.suppressed,
            found_at,
            checks: self.checker.checks(),
            strategy: self.strategy,
            step: None,
        };
        self.best = Some(r.clone());
        self.best_found_at = Some(found_at);
        self.shared
            .best_score
            .store(r.score.to_bits(), AtomicOrdering::Relaxed);
        self.shared.has_best.store(true, AtomicOrdering::Release);
        self.observer.improved(&imp);
        self.trace.push(imp);
    }

    /// Like [`Ctx::cannot_improve`] for a transformation that was not checked, using the
    /// data-independent (generalization-only) bound of the quality model. That bound is never
    /// below `CheckResult::lower_bound` and also bounds the up-set whenever
    /// [`lower_bound_valid`] holds (a suppressed record then costs at least as much as a fully
    /// generalized one).
    pub fn cannot_improve_unchecked(&self, levels: &[u8]) -> bool {
        if !self.lower_bound_valid || self.best.is_none() {
            return false;
        }
        let lb = self.problem.prepared_quality().lower_bound(levels);
        self.cannot_improve(lb, levels)
    }

    /// True if no transformation in the up-set of `levels` (including itself) can beat the
    /// optimum, given a lower bound `lb` of their scores.
    pub fn cannot_improve(&self, lb: f64, levels: &[u8]) -> bool {
        if !self.lower_bound_valid {
            return false;
        }
        let Some(b) = &self.best else {
            return false;
        };
        // `lb` itself may exceed a generalization's score by rounding (see SCORE_TOLERANCE).
        let lb = lb - tolerance(lb, b.score);
        match score_cmp(lb, b.score) {
            Ordering::Greater => true,
            // Every generalization has a higher rank, so ties are lost if `levels` is not before
            // the optimum itself.
            Ordering::Equal => levels_cmp(levels, &b.levels) != Ordering::Less,
            Ordering::Less => false,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
