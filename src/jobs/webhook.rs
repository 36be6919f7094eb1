//! Webhooks: when a job ends, its view is POSTed as JSON to the job's `callback_url`, retried
//! with doubling delays until a 2xx answer or the attempts are used up. The delivery state
//! (`pending`, `delivered`, `failed`) is kept in the job's row.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::view::JobView;
use crate::store::Store;

/// Delivers the final state of job `id` to `url`.
pub async fn deliver(
    store: &Store,
    http: &reqwest::Client,
    id: &str,
    url: &str,
    attempts: u32,
    backoff: Duration,
    shutdown: &CancellationToken,
) {
    let row = match store.job_by_id(id).await {
        Ok(Some(row)) => row,
        _ => return,
    };
    let body = serde_json::json!({ "event": "job.finished", "job": JobView::new(&row, None) });
    let mut delay = backoff;
    for attempt in 1..=attempts.max(1) {
        let sent = http
            .post(url)
            .timeout(Duration::from_secs(10))
            .json(&body)
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => {
                tracing::info!(job = id, attempt, "webhook delivered");
                let _ = store.set_webhook_state(id, "delivered").await;
                metrics::counter!("deid_webhooks_total", "outcome" => "delivered").increment(1);
                return;
            }
            Ok(r) => tracing::warn!(
                job = id,
                attempt,
                status = r.status().as_u16(),
                "webhook rejected"
            ),
            Err(e) => tracing::warn!(job = id, attempt, error = %e, "webhook failed"),
        }
        if attempt < attempts {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = shutdown.cancelled() => break,
            }
            delay = (delay * 2).min(Duration::from_secs(300));
        }
    }
    let _ = store.set_webhook_state(id, "failed").await;
    metrics::counter!("deid_webhooks_total", "outcome" => "failed").increment(1);
}
