//! Webhooks: when a job ends, its view is POSTed as JSON to the job's `callback_url`, retried
//! with doubling delays until a 2xx answer or the attempts are used up. The delivery state
//! (`pending`, `delivered`, `failed`) is kept in the job's row.

use std::net::SocketAddr;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::job::callback::{check_url, is_public};
use crate::job::id::JobId;
use crate::job::view::JobView;
use crate::store::Store;

/// How webhooks are delivered.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Attempts before the delivery is `failed`.
    pub attempts: u32,
    /// First delay between attempts (doubled each time, at most 5 minutes).
    pub backoff: Duration,
    /// Deliver to loopback, private and other non-public addresses too.
    pub allow_private: bool,
    /// Certificate authorities trusted for https receivers besides the system's.
    pub extra_roots: std::sync::Arc<Vec<reqwest::Certificate>>,
}

impl Policy {
    /// The longest a delivery can take (every attempt timing out, every delay waited) plus a
    /// margin: the lease taken on the delivery.
    pub fn max_duration(&self) -> Duration {
        let attempts = self.attempts.max(1);
        let mut total = Duration::from_secs(30) + ATTEMPT_TIMEOUT * attempts;
        let mut delay = self.backoff;
        for _ in 1..attempts {
            total += delay;
            delay = (delay * 2).min(MAX_DELAY);
        }
        total
    }
}

/// Timeout of one delivery attempt.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest delay between attempts.
const MAX_DELAY: Duration = Duration::from_secs(300);

/// Why a delivery attempt did not happen.
enum Refusal {
    /// Permanent: the destination is not allowed.
    Forbidden,
    /// Temporary: the name did not resolve.
    Unresolved,
}

/// Resolves the URL's host to the address the request will be pinned to (so that a second
/// lookup cannot swap in another address), refusing non-public ones unless allowed.
async fn destination(url: &reqwest::Url, allow_private: bool) -> Result<SocketAddr, Refusal> {
    let host = url.host_str().ok_or(Refusal::Forbidden)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = url.port_or_known_default().unwrap_or(80);
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|_| Refusal::Unresolved)?
        .collect();
    if addrs.is_empty() {
        return Err(Refusal::Unresolved);
    }
    addrs
        .into_iter()
        .find(|a| allow_private || is_public(a.ip()))
        .ok_or(Refusal::Forbidden)
}

/// Delivers the final state of job `id` to `url`; the caller holds the delivery's lease
/// (`Store::claim_webhook`). At shutdown the lease is released and the webhook stays `pending`.
pub async fn deliver(
    store: &Store,
    id: &JobId,
    url: &str,
    policy: &Policy,
    shutdown: &CancellationToken,
) {
    let row = match store.job_by_id(id).await {
        Ok(Some(row)) => row,
        _ => return,
    };
    let Ok(parsed) = check_url(url, policy.allow_private) else {
        tracing::warn!(job = %id, "webhook refused: callback URL not allowed");
        fail(store, id).await;
        return;
    };
    let body = serde_json::json!({ "event": "job.finished", "job": JobView::new(&row, None) });
    let mut delay = policy.backoff;
    let attempts = policy.attempts.max(1);
    for attempt in 1..=attempts {
        match destination(&parsed, policy.allow_private).await {
            Err(Refusal::Forbidden) => {
                tracing::warn!(
                    job = %id,
                    "webhook refused: the callback host resolves to non-public addresses only"
                );
                fail(store, id).await;
                return;
            }
            Err(Refusal::Unresolved) => {
                tracing::warn!(job = %id, attempt, "webhook host did not resolve");
            }
            Ok(addr) => {
                let host = parsed.host_str().unwrap_or_default();
                // https: rustls, certificates checked against the system's roots and the
                // configured extra ones, for the URL's host (the pinned address is only where
                // the connection goes).
                crate::tls::install_crypto_provider();
                let client = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .resolve(host, addr)
                    .timeout(ATTEMPT_TIMEOUT)
                    .tls_certs_merge(policy.extra_roots.iter().cloned())
                    .build();
                let sent = match client {
                    Ok(c) => c.post(parsed.clone()).json(&body).send().await,
                    Err(e) => Err(e),
                };
                match sent {
                    Ok(r) if r.status().is_success() => {
                        tracing::info!(job = %id, attempt, "webhook delivered");
                        let _ = store.set_webhook_state(id, "delivered").await;
                        metrics::counter!("deid_webhooks_total", "outcome" => "delivered")
                            .increment(1);
                        return;
                    }
                    Ok(r) => tracing::warn!(
                        job = %id,
                        attempt,
                        status = r.status().as_u16(),
                        "webhook rejected"
                    ),
                    Err(e) => tracing::warn!(job = %id, attempt, error = %e, "webhook failed"),
                }
            }
        }
        if attempt < attempts {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = shutdown.cancelled() => {
                    let _ = store.release_webhook(id).await;
                    return;
                }
            }
            delay = (delay * 2).min(MAX_DELAY);
        }
    }
    fail(store, id).await;
}

async fn fail(store: &Store, id: &JobId) {
    let _ = store.set_webhook_state(id, "failed").await;
    metrics::counter!("deid_webhooks_total", "outcome" => "failed").increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn names_are_checked_when_resolved() {
        // `localhost` passes no submission check here (it is built directly), but resolves to
        // loopback addresses only: refused at delivery unless private addresses are allowed.
        let url = reqwest::Url::parse("http://localhost:9/hook").unwrap();
        assert!(matches!(
            destination(&url, false).await,
            Err(Refusal::Forbidden)
        ));
        let addr = destination(&url, true)
            .await
            .ok()
            .expect("localhost resolves");
        assert!(addr.ip().is_loopback());
        assert_eq!(addr.port(), 9);
        let literal = reqwest::Url::parse("http://10.1.2.3/").unwrap();
        assert!(matches!(
            destination(&literal, false).await,
            Err(Refusal::Forbidden)
        ));
    }
}
