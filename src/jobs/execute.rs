//! **The seam between the service and the search.** Everything the service knows about search
//! algorithms goes through [`run_job`]: it gets a validated [`Problem`], the [`SearchSettings`]
//! of the job, a cancel flag and a progress callback, and returns the best transformation found.
//!
//! The current implementation is a plain exhaustive walk of the lattice in id order with
//! [`Checker::check`], honouring the time limit, the check limit and the cancel flag. To plug in
//! the real algorithms, replace the body of [`run_job`] with a dispatch on
//! `settings.algorithm` (see [`ALGORITHMS`]) that maps the engine's search result and progress
//! onto [`JobOutcome`] and [`Progress`]; nothing else in the service has to change.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::engine::{Checker, Lattice, Problem};

/// Algorithm names accepted in job specifications (`algorithm`); `auto` lets the engine choose.
pub const ALGORITHMS: &[&str] = &["auto", "exhaustive", "flash", "lightning", "genetic"];

/// Search parameters of one job, already validated.
#[derive(Debug, Clone)]
pub struct SearchSettings {
    /// Algorithm name, one of [`ALGORITHMS`].
    pub algorithm: String,
    /// Wall-clock budget of the search.
    pub time_limit: Duration,
    /// Optional budget of checks.
    pub check_limit: Option<u64>,
    /// Seed of randomized algorithms.
    pub seed: u64,
    /// Worker threads the search may use (within the engine pool).
    pub threads: usize,
    /// Genetic algorithm parameters, as given.
    pub genetic: Option<serde_json::Value>,
}

/// The best transformation found so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Best {
    /// Generalization level per quasi-identifier (lattice order).
    pub levels: Vec<u8>,
    /// Score of the quality model (lower is better).
    pub score: f64,
    /// Utility in [0, 1].
    pub utility: f64,
    /// Records suppressed.
    pub suppressed: usize,
    /// Time since the search started when it was found.
    pub elapsed: Duration,
    /// Checks done when it was found.
    pub checks: u64,
}

/// A progress report, sent by the search a few times per second and on every improvement.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Transformations checked so far.
    pub checks: u64,
    /// Time since the search started.
    pub elapsed: Duration,
    /// Share of the search space explored (checked or pruned), in [0, 1].
    pub explored_share: f64,
    /// The best transformation so far.
    pub best: Option<Best>,
}

/// Why the search stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The search space was exhausted (the result is optimal for exhaustive algorithms).
    Completed,
    /// The time limit was reached.
    TimeLimit,
    /// The check limit was reached.
    CheckLimit,
    /// The cancel flag was raised.
    Cancelled,
}

impl StopReason {
    /// Name in reports: `completed`, `time_limit`, `check_limit`, `cancelled`.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Completed => "completed",
            StopReason::TimeLimit => "time_limit",
            StopReason::CheckLimit => "check_limit",
            StopReason::Cancelled => "cancelled",
        }
    }
}

/// The result of a search.
#[derive(Debug, Clone)]
pub struct JobOutcome {
    /// The best anonymous transformation, if any was found.
    pub best: Option<Best>,
    /// Every improvement of the best, in order.
    pub trace: Vec<Best>,
    /// Checks done.
    pub checks: u64,
    /// Search time.
    pub elapsed: Duration,
    /// Share of the search space explored.
    pub explored_share: f64,
    /// Why the search stopped.
    pub stopped: StopReason,
}

/// A search failure (invalid parameters the validation did not catch, engine errors).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct JobError {
    /// Machine-readable code (`invalid_algorithm`, …).
    pub code: &'static str,
    /// What went wrong.
    pub message: String,
}

/// How often (in checks) the walk reports progress when nothing improves.
const PROGRESS_EVERY: u64 = 32;

/// Runs the search of one job on the current (engine pool) thread.
///
/// Steps of the current implementation:
/// 1. walk the lattice in id order, checking every transformation;
/// 2. keep the anonymous transformation with the lowest score (ties: lower rank, then lower
///    levels), reporting each improvement at once;
/// 3. stop on cancel, time limit or check limit; report progress every few checks.
pub fn run_job(
    problem: &Problem,
    settings: &SearchSettings,
    cancel: &AtomicBool,
    progress: &dyn Fn(&Progress),
) -> Result<JobOutcome, JobError> {
    if !ALGORITHMS.contains(&settings.algorithm.as_str()) {
        return Err(JobError {
            code: "invalid_algorithm",
            message: format!("unknown algorithm '{}'", settings.algorithm),
        });
    }
    let start = Instant::now();
    let checker = Checker::new(problem);
    let lattice = problem.lattice();
    let size = lattice.size_f64().max(1.0);
    let mut best: Option<Best> = None;
    let mut trace = Vec::new();
    let mut checks = 0u64;
    let mut stopped = StopReason::Completed;
    let report = |checks: u64, best: &Option<Best>| {
        progress(&Progress {
            checks,
            elapsed: start.elapsed(),
            explored_share: (checks as f64 / size).min(1.0),
            best: best.clone(),
        })
    };
    report(0, &best);
    // `for_each` cannot stop early, so the walk skips the rest once it must stop.
    let mut stop = false;
    lattice.for_each(|levels| {
        if stop {
            return;
        }
        if cancel.load(Ordering::Relaxed) {
            stopped = StopReason::Cancelled;
            stop = true;
            return;
        }
        if start.elapsed() >= settings.time_limit {
            stopped = StopReason::TimeLimit;
            stop = true;
            return;
        }
        if settings.check_limit.is_some_and(|l| checks >= l) {
            stopped = StopReason::CheckLimit;
            stop = true;
            return;
        }
        let r = checker.check(levels);
        checks += 1;
        if r.anonymous && better(&r.levels, r.score, best.as_ref()) {
            let b = Best {
                levels: r.levels.clone(),
                score: r.score,
                utility: r.utility,
                suppressed: r.suppressed,
                elapsed: start.elapsed(),
                checks,
            };
            trace.push(b.clone());
            best = Some(b);
            report(checks, &best);
        } else if checks.is_multiple_of(PROGRESS_EVERY) {
            report(checks, &best);
        }
    });
    let explored_share = if stopped == StopReason::Completed {
        1.0
    } else {
        (checks as f64 / size).min(1.0)
    };
    progress(&Progress {
        checks,
        elapsed: start.elapsed(),
        explored_share,
        best: best.clone(),
    });
    Ok(JobOutcome {
        best,
        trace,
        checks,
        elapsed: start.elapsed(),
        explored_share,
        stopped,
    })
}

/// Lower score wins; ties go to the lower rank, then the lexicographically lower levels, so the
/// result does not depend on the visiting order.
fn better(levels: &[u8], score: f64, best: Option<&Best>) -> bool {
    match best {
        None => true,
        Some(b) => match score.total_cmp(&b.score) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => {
                (Lattice::rank(levels), levels) < (Lattice::rank(&b.levels), b.levels.as_slice())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Hierarchy, PrivacyModel, ProblemConfig, QuasiIdentifier, Table};

    fn problem() -> Problem {
        let rows: Vec<Vec<String>> = [
            ("20", "a"),
            ("21", "a"),
            ("30", "b"),
            ("31", "b"),
            ("32", "a"),
        ]
        .iter()
        .map(|(x, y)| vec![x.to_string(), y.to_string()])
        .collect();
        let table = Table::from_rows(&["age", "g"], &rows).unwrap();
        let age = Hierarchy::from_rows(
            ["20", "21", "30", "31", "32"]
                .iter()
                .map(|v| vec![v.to_string(), format!("{}*", &v[..1]), "*".into()])
                .collect(),
            "age",
        )
        .unwrap();
        let g = Hierarchy::from_rows(
            vec![vec!["a".into(), "*".into()], vec!["b".into(), "*".into()]],
            "g",
        )
        .unwrap();
        let config = ProblemConfig {
            quasi_identifiers: vec![
                QuasiIdentifier::new("age", age),
                QuasiIdentifier::new("g", g),
            ],
            privacy: vec![PrivacyModel::KAnonymity { k: 2 }],
            ..ProblemConfig::default()
        };
        Problem::new(table, config).unwrap()
    }

    fn settings() -> SearchSettings {
        SearchSettings {
            algorithm: "auto".into(),
            time_limit: Duration::from_secs(10),
            check_limit: None,
            seed: 0,
            threads: 1,
            genetic: None,
        }
    }

    #[test]
    fn finds_the_best_anonymous_transformation() {
        let p = problem();
        let calls = std::sync::Mutex::new(0);
        let out = run_job(&p, &settings(), &AtomicBool::new(false), &|_| {
            *calls.lock().unwrap() += 1
        })
        .unwrap();
        assert_eq!(out.stopped, StopReason::Completed);
        assert_eq!(out.checks, 6);
        let best = out.best.unwrap();
        // Every anonymous transformation scores no better than the best (checked independently).
        let checker = Checker::new(&p);
        p.lattice().for_each(|l| {
            let r = checker.check(l);
            if r.anonymous {
                assert!(r.score >= best.score);
            }
        });
        assert!(checker.check(&best.levels).anonymous);
        assert!(*calls.lock().unwrap() >= 2);
        assert_eq!(out.trace.last().unwrap().levels, best.levels);
    }

    #[test]
    fn stops_on_cancel_and_check_limit() {
        let p = problem();
        let out = run_job(&p, &settings(), &AtomicBool::new(true), &|_| {}).unwrap();
        assert_eq!(out.stopped, StopReason::Cancelled);
        assert_eq!(out.checks, 0);
        let mut s = settings();
        s.check_limit = Some(2);
        let out = run_job(&p, &s, &AtomicBool::new(false), &|_| {}).unwrap();
        assert_eq!(out.stopped, StopReason::CheckLimit);
        assert_eq!(out.checks, 2);
    }
}
