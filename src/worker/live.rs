//! Jobs running in this process: their cancel flag, why they were stopped, and their live
//! [`JobProgress`].
//!
//! The search reports into [`LiveJob`] through [`Observer`] (hot loop → mutex-protected
//! progress); the runner's heartbeat copies it every 250 ms into a `watch` channel (local event
//! streams) and into the job's row (other replicas, late subscribers, restarts).

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;

use crate::job::progress::{JobPhase, JobProgress};
use deid_engine::{CancelFlag, Improvement, Problem, Progress, ProgressObserver};

/// Why a running job is being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum StopCause {
    /// Not stopped.
    None = 0,
    /// The client cancelled: the best so far becomes the result.
    User = 1,
    /// The process is shutting down: the job goes back to the queue.
    Shutdown = 2,
    /// Another worker owns the job now: write nothing more.
    LeaseLost = 3,
}

/// A job running in this process.
#[derive(Debug)]
pub struct LiveJob {
    /// Raised to stop the search (shared with the engine).
    pub cancel: CancelFlag,
    cause: AtomicU8,
    /// Checks already added to the `deid_checks_total` counter.
    counted_checks: AtomicU64,
    progress: Mutex<JobProgress>,
    /// Latest progress for local event streams.
    pub updates: watch::Sender<Arc<JobProgress>>,
    /// Set for jobs without a search (risk): `elapsed_ms` is the time since this instant.
    clock: Mutex<Option<std::time::Instant>>,
}

impl LiveJob {
    /// A job that has just been claimed (phase `loading`).
    pub fn new() -> LiveJob {
        let progress = JobProgress::default();
        let (updates, _) = watch::channel(Arc::new(progress.clone()));
        LiveJob {
            cancel: CancelFlag::new(),
            cause: AtomicU8::new(StopCause::None as u8),
            counted_checks: AtomicU64::new(0),
            progress: Mutex::new(progress),
            updates,
            clock: Mutex::new(None),
        }
    }

    /// Stops the search for `cause`; the first cause wins.
    pub fn stop(&self, cause: StopCause) {
        let _ = self.cause.compare_exchange(
            StopCause::None as u8,
            cause as u8,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        self.cancel.cancel();
    }

    /// Why the job was stopped.
    pub fn cause(&self) -> StopCause {
        match self.cause.load(Ordering::SeqCst) {
            1 => StopCause::User,
            2 => StopCause::Shutdown,
            3 => StopCause::LeaseLost,
            _ => StopCause::None,
        }
    }

    /// The observer that feeds this job's progress from `problem`'s search.
    pub fn observer<'a>(&'a self, problem: &'a Problem) -> Observer<'a> {
        Observer {
            live: self,
            problem,
        }
    }

    /// Adds the checks done since the last call to the `deid_checks_total` counter.
    pub fn count_checks(&self, checks: u64) {
        let before = self.counted_checks.swap(checks, Ordering::Relaxed);
        metrics::counter!("deid_checks_total").increment(checks.saturating_sub(before));
    }

    /// Sets the phase.
    pub fn set_phase(&self, phase: JobPhase) {
        self.lock().counters.phase = phase;
    }

    /// A copy of the current progress.
    pub fn progress(&self) -> JobProgress {
        self.lock().clone()
    }

    /// From now on, `elapsed_ms` counts the wall-clock time since now (jobs without a search,
    /// whose engine reports no progress).
    pub fn start_clock(&self) {
        *self.clock.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
    }

    /// Publishes the current progress to local subscribers and returns it.
    pub fn publish(&self) -> JobProgress {
        let clock = *self.clock.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(start) = clock {
            self.lock().counters.elapsed_ms = start.elapsed().as_millis() as u64;
        }
        let p = self.progress();
        self.updates.send_replace(Arc::new(p.clone()));
        p
    }

    fn lock(&self) -> MutexGuard<'_, JobProgress> {
        // A panic while holding the lock leaves a consistent value (plain field writes).
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Default for LiveJob {
    fn default() -> Self {
        LiveJob::new()
    }
}

/// Feeds the engine's reports into a [`LiveJob`] (see [`LiveJob::observer`]).
pub struct Observer<'a> {
    live: &'a LiveJob,
    problem: &'a Problem,
}

impl ProgressObserver for Observer<'_> {
    fn progress(&self, p: &Progress) {
        self.live.lock().observe(p);
    }

    fn improved(&self, i: &Improvement) {
        self.live.lock().improve(self.problem, i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deid_engine::{
        Algorithm, Checker, Hierarchy, PrivacyModel, ProblemConfig, QuasiIdentifier, SearchConfig,
        Table, search,
    };

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
    fn the_live_progress_ends_with_the_best_transformation() {
        let p = problem();
        let live = LiveJob::new();
        let config = SearchConfig {
            algorithm: Algorithm::Exhaustive,
            ..SearchConfig::default()
        };
        let out = search(&p, &config, &live.cancel, &live.observer(&p)).unwrap();
        let best = out.best.clone().unwrap();
        // Every anonymous transformation scores no better than the best (checked independently).
        let checker = Checker::new(&p);
        p.lattice().for_each(|l| {
            let r = checker.check(l);
            if r.anonymous {
                assert!(r.score >= best.score);
            }
        });
        let progress = live.progress();
        let shown = progress.best.unwrap();
        assert_eq!(shown.score, best.score);
        assert_eq!(shown.transformation["age"], best.levels[0]);
        assert_eq!(shown.transformation["g"], best.levels[1]);
        assert_eq!(progress.trace.len(), out.trace.len());
    }

    #[test]
    fn cancelled_searches_stop_and_the_first_cause_wins() {
        let p = problem();
        let live = LiveJob::new();
        live.stop(StopCause::User);
        live.stop(StopCause::Shutdown);
        assert_eq!(live.cause(), StopCause::User);
        let out = search(
            &p,
            &SearchConfig::default(),
            &live.cancel,
            &live.observer(&p),
        )
        .unwrap();
        assert_eq!(out.stop, deid_engine::StopReason::Cancelled);
    }
}
