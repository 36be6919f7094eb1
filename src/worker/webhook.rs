//! Webhooks: when a job ends, its view is POSTed as JSON to the job's `callback_url`, retried
//! with doubling delays until a 2xx answer or the attempts are used up. The delivery state
//! (`pending`, `delivered`, `failed`) is kept in the job's row.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::job::id::JobId;
use crate::job::view::JobView;
use crate::store::Store;

/// How webhooks are delivered.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Attempts before the delivery is `failed`.
    pub attempts: u32,
    /// First delay between attempts (doubled each time, at most 5 minutes).
    pub backoff: Duration,
    /// Deliver to loopback, private and other non-public addresses too.
    pub allow_private: bool,
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

/// True for globally routable unicast addresses; false for loopback, private (RFC 1918, unique
/// local), link-local, carrier-grade NAT, unspecified, multicast, broadcast, documentation,
/// benchmarking and reserved ranges, and IPv6 forms embedding such an IPv4 address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0
        || a >= 240
        || (a == 100 && (64..128).contains(&b))
        || (a == 198 && (b == 18 || b == 19))
        || (a == 192 && b == 0 && c == 0))
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let seg = ip.segments();
    // NAT64 (64:ff9b::/96) embeds an IPv4 address in the last 32 bits.
    if seg[0] == 0x64 && seg[1] == 0xff9b && seg[2..6].iter().all(|&s| s == 0) {
        let [.., a, b, c, d] = ip.octets();
        return is_public_v4(Ipv4Addr::new(a, b, c, d));
    }
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (seg[0] & 0xfe00) == 0xfc00 // unique local
        || (seg[0] & 0xffc0) == 0xfe80 // link-local
        || (seg[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
        || (seg[0] == 0x2001 && seg[1] == 0x0db8) // documentation
        || seg[..6].iter().all(|&s| s == 0)) // IPv4-compatible (deprecated)
}

/// Checks a callback URL when a job is submitted: an `http` URL with a host; unless
/// `allow_private`, not `localhost` nor a literal non-public address (names are checked again
/// when they are resolved at delivery). The error says what is wrong.
pub fn check_url(url: &str, allow_private: bool) -> Result<reqwest::Url, String> {
    let parsed = reqwest::Url::parse(url).map_err(|_| format!("not an http URL: '{url}'"))?;
    match parsed.scheme() {
        "http" => {}
        "https" => {
            return Err(
                "https callbacks are not supported by this build; use http (e.g. \
                        through a local TLS proxy)"
                    .into(),
            );
        }
        _ => return Err(format!("not an http URL: '{url}'")),
    }
    let Some(host) = parsed.host_str() else {
        return Err(format!("not an http URL: '{url}'"));
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let private = match host.parse::<IpAddr>() {
        Ok(ip) => !is_public(ip),
        Err(_) => {
            let d = host.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
    };
    if private && !allow_private {
        return Err(format!(
            "'{url}' points to a loopback or private address; callbacks go to public addresses \
             only unless the server runs with DEID_WEBHOOK_ALLOW_PRIVATE=true"
        ));
    }
    Ok(parsed)
}

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
                let client = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .resolve(host, addr)
                    .timeout(ATTEMPT_TIMEOUT)
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

    #[test]
    fn public_and_non_public_addresses() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "198.18.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2001:db8::1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
    }

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

    #[test]
    fn callback_urls_are_checked() {
        assert!(check_url("http://hooks.example.com/x", false).is_ok());
        assert!(check_url("http://8.8.8.8:8080/x", false).is_ok());
        for url in [
            "http://127.0.0.1:9/x",
            "http://localhost/x",
            "http://api.localhost/x",
            "http://[::1]/x",
            "http://169.254.169.254/latest/meta-data",
            "http://10.0.0.5/",
        ] {
            let err = check_url(url, false).unwrap_err();
            assert!(err.contains("private"), "{url}: {err}");
            assert!(check_url(url, true).is_ok(), "{url}");
        }
        assert!(
            check_url("https://example.com", true)
                .unwrap_err()
                .contains("https")
        );
        assert!(
            check_url("ftp://example.com", true)
                .unwrap_err()
                .contains("not an http URL")
        );
        assert!(
            check_url("nonsense", true)
                .unwrap_err()
                .contains("not an http URL")
        );
    }
}
