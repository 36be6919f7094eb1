//! The vocabulary of a running search: its phases, progress snapshots, improvements of the
//! best, the observer that receives them, why a search stopped and its outcome.

use std::time::Duration;

use super::{Algorithm, Candidate};
use crate::check::CheckResult;
use crate::lattice::Levels;

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

crate::names::enum_names! {
    Phase {
        Starting => "starting",
        Searching => "searching",
        Binary => "binary",
        Linear => "linear",
        BestFirst => "best-first",
        Greedy => "greedy",
        Evolving => "evolving",
        Finished => "finished",
    }
    /// Stable name for reports (`starting`, `searching`, `binary`, `linear`, `best-first`,
    /// `greedy`, `evolving`, `finished`).
    pub fn name;
    /// The phase with this [`name`](Phase::name).
    pub fn parse;
}

impl Phase {
    pub(super) fn from_u8(v: u8) -> Phase {
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

/// What found an improvement: an algorithm, or a member of `auto`'s portfolio that is not an
/// algorithm of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// The algorithm (or `auto`'s member running as that algorithm).
    Algorithm(Algorithm),
    /// `auto`'s ruin-and-repair member (`search::reshape`).
    Reshape,
}

impl Strategy {
    /// Stable name in reports and events: the algorithm's name, or `reshape`.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Algorithm(a) => a.name(),
            Strategy::Reshape => "reshape",
        }
    }
}

impl From<Algorithm> for Strategy {
    fn from(a: Algorithm) -> Strategy {
        Strategy::Algorithm(a)
    }
}

impl PartialEq<Algorithm> for Strategy {
    fn eq(&self, a: &Algorithm) -> bool {
        *self == Strategy::Algorithm(*a)
    }
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
    pub strategy: Strategy,
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

crate::names::enum_names! {
    StopReason {
        Completed => "completed",
        TimeLimit => "time-limit",
        CheckLimit => "check-limit",
        Cancelled => "cancelled",
    }
    /// Stable name for reports (`completed`, `time-limit`, `check-limit`, `cancelled`).
    pub fn name;
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
    /// The best anonymous transformations checked, best first (at most
    /// [`SearchConfig::candidates`](super::SearchConfig::candidates); `best` is the first).
    /// Empty with differential privacy: the list would disclose choices SafePub makes privately.
    pub candidates: Vec<Candidate>,
}
