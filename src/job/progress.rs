//! The progress of a job — one type from the engine to the client. The worker folds the
//! engine's [`Progress`] reports and [`Improvement`]s into a [`JobProgress`]
//! ([`JobProgress::observe`], [`JobProgress::improve`]); the same value is published to local
//! event streams, persisted in the job's row (JSON) and shown in the job's view.

use serde::{Deserialize, Serialize};

use deid_engine::search::Phase;
use deid_engine::{Improvement, Problem, Progress};

use super::report::transformation_json;

/// At most this many improvements are kept in the trace (later ones replace the last entry).
pub const MAX_TRACE: usize = 1000;

/// Where a job is, as clients see it: waiting, loading its data, one of the search's phases,
/// writing its result, or finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JobPhase {
    /// Waiting for a worker.
    Queued,
    /// Claimed; reading the dataset and building the problem.
    #[default]
    Loading,
    /// Searching, in this phase of the algorithm.
    Search(Phase),
    /// A risk job (`"task": "risk"`): analysing the data read.
    Analysing,
    /// Writing the report and the anonymized CSV.
    Writing,
    /// Ended.
    Finished,
}

impl JobPhase {
    /// The phase's name (`queued`, `loading`, a search phase such as `best-first`, `analysing`,
    /// `writing`, `finished`).
    pub fn as_str(self) -> &'static str {
        match self {
            JobPhase::Queued => "queued",
            JobPhase::Loading => "loading",
            JobPhase::Search(p) => p.name(),
            JobPhase::Analysing => "analysing",
            JobPhase::Writing => "writing",
            JobPhase::Finished => "finished",
        }
    }

    /// The phase named `name`; unknown names (written by another version) read as `loading`.
    pub fn parse(name: &str) -> JobPhase {
        match name {
            "queued" => JobPhase::Queued,
            "analysing" => JobPhase::Analysing,
            "writing" => JobPhase::Writing,
            "finished" => JobPhase::Finished,
            other => Phase::parse(other).map_or(JobPhase::Loading, JobPhase::Search),
        }
    }
}

impl Serialize for JobPhase {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for JobPhase {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<str>::deserialize(d)?;
        Ok(JobPhase::parse(&name))
    }
}

/// The counters of a job's progress (the `progress` object of the job's view).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// The phase.
    pub phase: JobPhase,
    /// Transformations checked.
    pub checks: u64,
    /// Milliseconds since the search started.
    pub elapsed_ms: u64,
    /// Share of the search space explored, in [0, 1].
    pub explored_share: f64,
}

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
    /// The algorithm that found it (for `auto`: the portfolio member; absent in rows written
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// The step of local generalization whose records it transforms (absent for a global
    /// search; its score and suppressed records are those of the step's records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
}

impl BestView {
    /// The view of an improvement of `problem`'s search.
    pub fn new(problem: &Problem, best: &Improvement) -> BestView {
        BestView {
            transformation: transformation_json(problem, &best.levels),
            score: best.score,
            utility: best.utility,
            suppressed_rows: best.suppressed as u64,
            elapsed_ms: best.found_at.as_millis() as u64,
            checks: best.checks,
            strategy: Some(best.strategy.name().to_string()),
            step: best.step,
        }
    }
}

/// The progress of a job (persisted as JSON in its row: the counters, `best` and `trace`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobProgress {
    /// Phase and counters.
    #[serde(flatten)]
    pub counters: Counters,
    /// Best transformation so far.
    pub best: Option<BestView>,
    /// Improvements of the best, in order.
    #[serde(default)]
    pub trace: Vec<BestView>,
}

impl JobProgress {
    /// Reads the progress column of a job's row (an unreadable value counts as no progress).
    pub fn from_row(progress: Option<&str>) -> JobProgress {
        progress
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or_default()
    }

    /// The JSON stored in the job's row.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }

    /// Takes in a periodic report of the search.
    pub fn observe(&mut self, p: &Progress) {
        self.counters.phase = JobPhase::Search(p.phase);
        self.counters.checks = p.checks;
        self.counters.elapsed_ms = p.elapsed.as_millis() as u64;
        self.counters.explored_share = p.explored;
    }

    /// Takes in a new best transformation of `problem`'s search.
    pub fn improve(&mut self, problem: &Problem, i: &Improvement) {
        self.counters.checks = i.checks;
        self.counters.elapsed_ms = i.found_at.as_millis() as u64;
        let view = BestView::new(problem, i);
        if self.trace.len() >= MAX_TRACE {
            self.trace.pop();
        }
        self.trace.push(view.clone());
        self.best = Some(view);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_round_trip_and_old_rows_read() {
        for p in [
            JobPhase::Queued,
            JobPhase::Loading,
            JobPhase::Analysing,
            JobPhase::Writing,
            JobPhase::Finished,
            JobPhase::Search(Phase::BestFirst),
            JobPhase::Search(Phase::Evolving),
        ] {
            assert_eq!(JobPhase::parse(p.as_str()), p);
        }
        // The row format of earlier versions.
        let row = r#"{"phase":"linear","checks":7,"elapsed_ms":12,"explored_share":0.5,"best":null,"trace":[]}"#;
        let p = JobProgress::from_row(Some(row));
        assert_eq!(p.counters.phase, JobPhase::Search(Phase::Linear));
        assert_eq!((p.counters.checks, p.counters.elapsed_ms), (7, 12));
        assert_eq!(p.to_json(), row);
        assert_eq!(
            JobProgress::from_row(Some("garbage")),
            JobProgress::default()
        );
    }
}
