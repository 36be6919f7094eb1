//! Live progress of running jobs (STYLE §2.2).
//!
//! The search calls back into [`LiveJob::record`] (hot loop → mutex-protected [`Snapshot`]);
//! the runner's heartbeat copies the snapshot every 250 ms into a `watch` channel (local SSE
//! subscribers) and into the job's row (other replicas, late subscribers, restarts).

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::execute::{Best, Progress};
use crate::report::transformation_json;
use deid_engine::Problem;
use deid_engine::search::CancelFlag;

/// At most this many improvements are kept in the trace (later ones replace the last entry).
pub const MAX_TRACE: usize = 1000;

/// A transformation found by the search, as shown to clients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestView {
    /// Column → generalization level.
    pub transformation: serde_json::Value,
    /// Quality model score (lower is better).
    pub score: f64,
    /// Utility in [0, 1].
    pub utility: f64,
    /// Records suppressed.
    pub suppressed_rows: u64,
    /// Milliseconds after the search started.
    pub elapsed_ms: u64,
    /// Checks done when it was found.
    pub checks: u64,
}

impl BestView {
    /// Converts the engine's view of a transformation.
    pub fn new(problem: &Problem, best: &Best) -> BestView {
        BestView {
            transformation: transformation_json(problem, &best.levels),
            score: best.score,
            utility: best.utility,
            suppressed_rows: best.suppressed as u64,
            elapsed_ms: best.elapsed.as_millis() as u64,
            checks: best.checks,
        }
    }
}

/// Progress of a job, persisted as JSON in its row.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// `loading`, a search phase (`starting`, `binary`, `linear`, `best-first`, `greedy`,
    /// `evolving`, `searching`), `writing` or `finished`.
    pub phase: String,
    /// Transformations checked.
    pub checks: u64,
    /// Milliseconds since the search started.
    pub elapsed_ms: u64,
    /// Share of the search space explored, in [0, 1].
    pub explored_share: f64,
    /// Best transformation so far.
    pub best: Option<BestView>,
    /// Improvements of the best, in order.
    #[serde(default)]
    pub trace: Vec<BestView>,
}

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
    snapshot: Mutex<Snapshot>,
    /// Latest snapshot for local SSE subscribers.
    pub updates: watch::Sender<Arc<Snapshot>>,
}

impl LiveJob {
    /// A job that has just been claimed.
    pub fn new() -> LiveJob {
        let snapshot = Snapshot {
            phase: "loading".into(),
            ..Snapshot::default()
        };
        let (updates, _) = watch::channel(Arc::new(snapshot.clone()));
        LiveJob {
            cancel: CancelFlag::new(),
            cause: AtomicU8::new(StopCause::None as u8),
            counted_checks: AtomicU64::new(0),
            snapshot: Mutex::new(snapshot),
            updates,
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

    /// Records a progress report of the search (called from the engine thread).
    pub fn record(&self, problem: &Problem, p: &Progress) {
        let mut s = self.lock();
        s.phase = p.phase.to_string();
        s.checks = p.checks;
        s.elapsed_ms = p.elapsed.as_millis() as u64;
        s.explored_share = p.explored_share;
        if let Some(b) = &p.best {
            let improved = s
                .best
                .as_ref()
                .is_none_or(|cur| cur.checks != b.checks || cur.score != b.score);
            if improved {
                let view = BestView::new(problem, b);
                if s.trace.len() >= MAX_TRACE {
                    s.trace.pop();
                }
                s.trace.push(view.clone());
                s.best = Some(view);
            }
        }
    }

    /// Adds the checks done since the last call to the `deid_checks_total` counter.
    pub fn count_checks(&self, checks: u64) {
        let before = self.counted_checks.swap(checks, Ordering::Relaxed);
        metrics::counter!("deid_checks_total").increment(checks.saturating_sub(before));
    }

    /// Sets the phase.
    pub fn set_phase(&self, phase: &str) {
        self.lock().phase = phase.to_string();
    }

    /// A copy of the current snapshot.
    pub fn snapshot(&self) -> Snapshot {
        self.lock().clone()
    }

    /// Publishes the current snapshot to local subscribers and returns it.
    pub fn publish(&self) -> Snapshot {
        let s = self.snapshot();
        self.updates.send_replace(Arc::new(s.clone()));
        s
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Snapshot> {
        // A panic while holding the lock leaves a consistent snapshot (plain field writes).
        self.snapshot.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Default for LiveJob {
    fn default() -> Self {
        LiveJob::new()
    }
}
