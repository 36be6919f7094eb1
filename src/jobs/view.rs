//! The job as clients see it (`GET /v1/jobs/{id}`, SSE payloads, webhooks), built from its row
//! and, for jobs running in this process, the live snapshot.

use serde::Serialize;

use super::progress::{BestView, Snapshot};
use crate::store::jobs::JobRow;

/// Progress counters of a job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProgressView {
    /// `queued`, `loading`, `searching`, `writing` or `finished`.
    pub phase: String,
    /// Transformations checked.
    pub checks: u64,
    /// Milliseconds since the search started.
    pub elapsed_ms: u64,
    /// Share of the search space explored, in [0, 1].
    pub explored_share: f64,
}

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
}

/// A job as returned by the API.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobView {
    /// Job id.
    pub id: String,
    /// Dataset id.
    pub dataset_id: String,
    /// `queued`, `running`, `succeeded`, `failed` or `cancelled`.
    pub status: String,
    /// Times the job was claimed by a worker.
    pub attempts: i64,
    /// Claims allowed before the job fails.
    pub max_attempts: i64,
    /// Whether a cancel was requested.
    pub cancel_requested: bool,
    /// Progress counters.
    pub progress: ProgressView,
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

/// True for `succeeded`, `failed` and `cancelled`.
pub fn is_terminal(status: &str) -> bool {
    matches!(status, "succeeded" | "failed" | "cancelled")
}

/// Parses the progress column (an unreadable value counts as no progress).
pub fn parse_snapshot(progress: Option<&str>) -> Snapshot {
    progress
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or_default()
}

impl JobView {
    /// Builds the view of `row`; `live` overrides the persisted progress.
    pub fn new(row: &JobRow, live: Option<&Snapshot>) -> JobView {
        let parsed;
        let snap = match live {
            Some(s) => s,
            None => {
                parsed = parse_snapshot(row.progress.as_deref());
                &parsed
            }
        };
        let phase = if row.status == "queued" {
            "queued".to_string()
        } else if is_terminal(&row.status) {
            "finished".to_string()
        } else if snap.phase.is_empty() {
            "loading".to_string()
        } else {
            snap.phase.clone()
        };
        let base = format!("/v1/jobs/{}", row.id);
        JobView {
            id: row.id.clone(),
            dataset_id: row.dataset_id.clone(),
            status: row.status.clone(),
            attempts: row.attempts,
            max_attempts: row.max_attempts,
            cancel_requested: row.cancel_requested != 0,
            progress: ProgressView {
                phase,
                checks: snap.checks,
                elapsed_ms: snap.elapsed_ms,
                explored_share: snap.explored_share,
            },
            best: snap.best.clone(),
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
            },
        }
    }
}

/// Formats milliseconds since the epoch as RFC 3339 UTC (`2026-01-31T12:00:00.123Z`).
pub fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
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
