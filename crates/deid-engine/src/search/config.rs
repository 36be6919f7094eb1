//! What a search is asked to do: the algorithm, its limits (time, checks, threads), the genetic
//! algorithm's parameters, and their validation against a problem.

use std::time::Duration;

use crate::error::{EngineError, Result};
use crate::problem::Problem;

/// The search strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// The portfolio (`search::portfolio`): a quick incumbent, then Flash if the solution space
    /// has at most [`SearchConfig::flash_max_space`] transformations, otherwise BFS, top-down,
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

crate::names::enum_names! {
    Algorithm: Display {
        Auto => "auto",
        Flash => "flash",
        Lightning => "lightning",
        TopDown => "top-down",
        Genetic => "genetic",
        Bfs => "bfs",
        DataFly => "datafly",
        ImprovedGreedy => "improved-greedy",
        Exhaustive => "exhaustive",
    }
    /// Stable name used in configuration and reports (`auto`, `flash`, `lightning`, `top-down`,
    /// `genetic`, `bfs`, `datafly`, `improved-greedy`, `exhaustive`).
    pub fn name;
    /// Parses a name produced by [`Algorithm::name`].
    pub fn parse;
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
    /// Individuals per subpopulation (≥ 2). `auto`'s genetic member uses at most
    /// [`PORTFOLIO_SUBPOPULATION`](super::genetic::PORTFOLIO_SUBPOPULATION).
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
    /// How many of the best anonymous transformations checked the outcome lists
    /// ([`SearchOutcome::candidates`](super::SearchOutcome::candidates)); at most
    /// [`MAX_CANDIDATES`](super::MAX_CANDIDATES), 0 for none.
    pub candidates: usize,
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
            candidates: super::DEFAULT_CANDIDATES,
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
        if self.candidates > super::MAX_CANDIDATES {
            return Err(EngineError::config(
                "candidates",
                format!(
                    "expected 0 to {} candidates, got {}",
                    super::MAX_CANDIDATES,
                    self.candidates
                ),
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
