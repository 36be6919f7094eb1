//! The job as clients see it (`GET /v1/jobs/{id}`, SSE payloads, webhooks), built from its row
//! and, for jobs running in this process, the live progress.

use serde::Serialize;

use super::id::{DatasetId, JobId, JobStatus};
use super::progress::{BestView, Counters, JobPhase, JobProgress};
use crate::store::jobs::JobRow;

/// Links to the job's sub-resources.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobLinks {
    /// This job.
    #[serde(rename = "self")]
    pub this: String,
    /// Server-Sent Events.
    pub events: String,
    /// The result report.
    pub result: String,
    /// The anonymized CSV.
    pub result_csv: String,
    /// The recoding plan of the anonymized CSV.
    pub plan: String,
}

/// A job as returned by the API.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobView {
    /// Job id.
    pub id: JobId,
    /// Dataset id.
    pub dataset_id: DatasetId,
    /// What the job does: `anonymize`, `evaluate` or `risk`.
    pub task: String,
    /// The search algorithm the job names (`auto`, `flash`, …; `null` for `evaluate` and
    /// `risk`).
    pub algorithm: Option<String>,
    /// `queued`, `running`, `succeeded`, `failed` or `cancelled`.
    pub status: JobStatus,
    /// Times the job was claimed by a worker.
    pub attempts: i64,
    /// Claims allowed before the job fails.
    pub max_attempts: i64,
    /// Whether a cancel was requested.
    pub cancel_requested: bool,
    /// Progress counters (`phase`: `queued`, `loading`, a search phase, `writing` or
    /// `finished`).
    pub progress: Counters,
    /// Best transformation so far (or the result's).
    pub best: Option<BestView>,
    /// Error (`{"code", "message", "details"}`) of a failed job.
    pub error: Option<serde_json::Value>,
    /// Webhook delivery: `pending`, `delivered` or `failed` (absent without `callback_url`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    /// RFC 3339 times.
    pub created_at: String,
    /// First claimed by a worker.
    pub started_at: Option<String>,
    /// Ended.
    pub finished_at: Option<String>,
    /// Related resources.
    pub links: JobLinks,
}

impl JobView {
    /// Builds the view of `row`; `live` overrides the persisted progress.
    pub fn new(row: &JobRow, live: Option<&JobProgress>) -> JobView {
        let parsed;
        let progress = match live {
            Some(p) => p,
            None => {
                parsed = JobProgress::from_row(row.progress.as_deref());
                &parsed
            }
        };
        let mut counters = progress.counters.clone();
        if row.status == JobStatus::Queued {
            counters.phase = JobPhase::Queued;
        } else if row.status.is_terminal() {
            counters.phase = JobPhase::Finished;
        }
        let base = format!("/v1/jobs/{}", row.id);
        JobView {
            id: row.id.clone(),
            dataset_id: row.dataset_id.clone(),
            task: row.task.clone(),
            algorithm: row.algorithm.clone(),
            status: row.status,
            attempts: row.attempts,
            max_attempts: row.max_attempts,
            cancel_requested: row.cancel_requested != 0,
            progress: counters,
            best: progress.best.clone(),
            error: row
                .error
                .as_deref()
                .and_then(|e| serde_json::from_str(e).ok()),
            webhook: row.webhook.clone(),
            created_at: rfc3339(row.created_at),
            started_at: row.started_at.map(rfc3339),
            finished_at: row.finished_at.map(rfc3339),
            links: JobLinks {
                this: base.clone(),
                events: format!("{base}/events"),
                result: format!("{base}/result"),
                result_csv: format!("{base}/result.csv"),
                plan: format!("{base}/plan"),
            },
        }
    }
}

/// Formats milliseconds since the epoch as RFC 3339 UTC (`2026-01-31T12:00:00.123Z`).
pub fn rfc3339(ms: i64) -> String {
    // Times are stored by this service, never before 1970.
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(time).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_times() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        // 2000-02-29T12:34:56.789Z = 951827696789 ms (leap day).
        assert_eq!(rfc3339(951_827_696_789), "2000-02-29T12:34:56.789Z");
        // 2026-12-31T23:59:59.999Z
        assert_eq!(rfc3339(1_798_761_599_999), "2026-12-31T23:59:59.999Z");
    }
}
