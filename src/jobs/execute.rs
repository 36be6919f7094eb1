//! **The seam between the service and the search.** Everything the service knows about the
//! search goes through [`run_job`]: it gets a validated [`Problem`], the job's [`SearchConfig`]
//! (from [`search_config`]), a cancel flag and a progress callback, runs
//! [`deid_engine::search::search`] on the calling (engine pool) thread and returns the engine's
//! [`SearchOutcome`]. Progress and improvements arrive through one callback as [`Progress`]
//! values carrying the best transformation so far.

use std::sync::Mutex;
use std::time::Duration;

use crate::spec::{DurationSpec, JobSpec, SpecError};
use deid_engine::search::{
    self, Algorithm, CancelFlag, Improvement, ProgressObserver, SearchConfig, SearchOutcome,
};
use deid_engine::{EngineError, Problem};

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

impl Best {
    fn of(i: &Improvement) -> Best {
        Best {
            levels: i.levels.clone(),
            score: i.score,
            utility: i.utility,
            suppressed: i.suppressed,
            elapsed: i.found_at,
            checks: i.checks,
        }
    }
}

/// A progress report: about every 100 ms while searching, and on every improvement.
#[derive(Debug, Clone)]
pub struct Progress {
    /// The search phase (`starting`, `binary`, `linear`, `best-first`, `greedy`, `evolving`, …).
    pub phase: &'static str,
    /// Transformations checked so far.
    pub checks: u64,
    /// Time since the search started.
    pub elapsed: Duration,
    /// Share of the search space classified (checked or pruned), in [0, 1].
    pub explored_share: f64,
    /// The best transformation so far.
    pub best: Option<Best>,
}

/// A search that could not start (its configuration does not fit the problem).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct JobError {
    /// Dotted path of the offending setting.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// Adapts the engine's observer calls to the job's progress callback.
struct Observer<'a> {
    callback: &'a (dyn Fn(&Progress) + Sync),
    state: Mutex<(Option<Best>, f64, &'static str)>,
}

impl ProgressObserver for Observer<'_> {
    fn progress(&self, p: &search::Progress) {
        let best = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.1 = p.explored;
            s.2 = p.phase.name();
            s.0.clone()
        };
        (self.callback)(&Progress {
            phase: p.phase.name(),
            checks: p.checks,
            elapsed: p.elapsed,
            explored_share: p.explored,
            best,
        });
    }

    fn improved(&self, i: &Improvement) {
        let best = Best::of(i);
        let (explored, phase) = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.0 = Some(best.clone());
            (s.1, s.2)
        };
        (self.callback)(&Progress {
            phase,
            checks: i.checks,
            elapsed: i.found_at,
            explored_share: explored,
            best: Some(best),
        });
    }
}

/// Runs the search of one job on the current (engine pool) thread; rayon parallelism inside
/// the search uses the same pool.
pub fn run_job(
    problem: &Problem,
    config: &SearchConfig,
    cancel: &CancelFlag,
    progress: &(dyn Fn(&Progress) + Sync),
) -> Result<SearchOutcome, JobError> {
    let observer = Observer {
        callback: progress,
        state: Mutex::new((None, 0.0, "starting")),
    };
    search::search(problem, config, cancel, &observer).map_err(job_error)
}

fn job_error(e: EngineError) -> JobError {
    match e {
        EngineError::InvalidConfig { field, message } => JobError { field, message },
        other => JobError {
            field: "algorithm".into(),
            message: other.to_string(),
        },
    }
}

/// Checks the search configuration against the problem (e.g. Flash on a space too large) before
/// the job is queued.
pub fn check_config(problem: &Problem, config: &SearchConfig) -> Result<Algorithm, JobError> {
    config.resolve(problem).map_err(job_error)
}

/// The search configuration of a job: the specification's settings (`algorithm`, `time_limit`,
/// `check_limit`, `seed`, `genetic`, `flash_max_space`), with the server's default time limit
/// when none is given. `threads` may be at most the engine pool's size; the search then runs on
/// the engine pool (`threads: 1` runs it sequentially).
pub fn search_config(
    spec: &JobSpec,
    default_time_limit: Duration,
    max_threads: usize,
) -> Result<SearchConfig, SpecError> {
    let mut spec = spec.clone();
    if spec.time_limit.is_none() {
        spec.time_limit = Some(DurationSpec::Millis(default_time_limit.as_millis() as u64));
    }
    if let Some(t) = spec.threads
        && (t == 0 || t > max_threads)
    {
        return Err(SpecError::new(
            "threads",
            format!("expected 1 to {max_threads} threads, got {t}"),
        ));
    }
    let mut config = spec.search_config()?;
    config.threads = match spec.threads {
        Some(1) => Some(1),
        _ => None,
    };
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use deid_engine::{Checker, Hierarchy, PrivacyModel, ProblemConfig, QuasiIdentifier, Table};

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

    #[test]
    fn finds_the_best_anonymous_transformation_and_reports_it() {
        let p = problem();
        let calls = Mutex::new(Vec::new());
        let config = SearchConfig {
            algorithm: Algorithm::Exhaustive,
            ..SearchConfig::default()
        };
        let out = run_job(&p, &config, &CancelFlag::new(), &|pr| {
            calls.lock().unwrap().push(pr.clone())
        })
        .unwrap();
        let best = out.best.clone().unwrap();
        // Every anonymous transformation scores no better than the best (checked independently).
        let checker = Checker::new(&p);
        p.lattice().for_each(|l| {
            let r = checker.check(l);
            if r.anonymous {
                assert!(r.score >= best.score);
            }
        });
        let calls = calls.into_inner().unwrap();
        assert!(!calls.is_empty());
        // The last report carries the best transformation.
        assert_eq!(
            calls.last().unwrap().best.as_ref().unwrap().levels,
            best.levels
        );
    }

    #[test]
    fn cancelled_searches_stop() {
        let p = problem();
        let cancel = CancelFlag::new();
        cancel.cancel();
        let out = run_job(&p, &SearchConfig::default(), &cancel, &|_| {}).unwrap();
        assert_eq!(out.stop, search::StopReason::Cancelled);
    }

    #[test]
    fn configuration_from_the_specification() {
        let spec =
            JobSpec::from_json(r#"{"algorithm": "genetic", "seed": 3, "threads": 1}"#).unwrap();
        let c = search_config(&spec, Duration::from_secs(7), 2).unwrap();
        assert_eq!(c.algorithm, Algorithm::Genetic);
        assert_eq!(c.time_limit, Duration::from_secs(7));
        assert_eq!((c.seed, c.threads), (3, Some(1)));
        let spec = JobSpec::from_json(r#"{"threads": 3}"#).unwrap();
        assert_eq!(
            search_config(&spec, Duration::from_secs(7), 2)
                .unwrap_err()
                .field,
            "threads"
        );
        let spec = JobSpec::from_json(r#"{"algorithm": "magic"}"#).unwrap();
        assert_eq!(
            search_config(&spec, Duration::from_secs(7), 2)
                .unwrap_err()
                .field,
            "algorithm"
        );
        // Flash on a space larger than flash_max_space is refused before the job runs.
        let spec = JobSpec::from_json(r#"{"algorithm": "flash", "flash_max_space": 2}"#).unwrap();
        let c = search_config(&spec, Duration::from_secs(7), 2).unwrap();
        assert_eq!(check_config(&problem(), &c).unwrap_err().field, "algorithm");
    }
}
