//! The HTTP API (axum): routes under `/v1`, health and metrics endpoints, and the layers around
//! them (API keys, timeouts, body limits, panics, metrics, tracing).
//!
//! - [`datasets`]: uploads (received by [`upload`]), listing, deletion.
//! - [`hierarchies`]: stored hierarchies (ARX tables or builder specifications) and previews.
//! - [`jobs`]: job creation, views, events (SSE), cancel, results; [`verify`]: released data
//!   re-checked against a job's privacy models.
//! - [`health`]: `/healthz`, `/readyz`, `/metrics`, `/openapi.yaml`.
//! - The web console (`/`, `/console/…`) is [`crate::console`]'s, merged here without the API key.
//! - [`error`]: the single error shape; [`extract`]: extractors that use it; [`auth`]: the
//!   API-key middleware, over the hashed keys of [`keys`]; [`state`]: what handlers share.

pub mod auth;
mod cancel;
pub mod datasets;
pub mod error;
pub mod extract;
pub mod health;
pub mod hierarchies;
pub mod jobs;
pub mod keys;
pub mod state;
pub mod upload;
pub mod verify;

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::HttpBody;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use error::{ApiError, ErrorCode};
use state::AppState;

/// Body limit of JSON and hierarchy requests (uploads are streamed and limited separately).
pub const JSON_BODY_LIMIT: usize = 64 << 20;

/// Every route of the API as (method, path): the OpenAPI document must describe exactly these.
pub const ROUTES: &[(&str, &str)] = &[
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("get", "/openapi.yaml"),
    ("get", "/v1/datasets"),
    ("post", "/v1/datasets"),
    ("get", "/v1/datasets/{id}"),
    ("delete", "/v1/datasets/{id}"),
    ("get", "/v1/datasets/{id}/hierarchies/{column}"),
    ("put", "/v1/datasets/{id}/hierarchies/{column}"),
    ("post", "/v1/datasets/{id}/hierarchies/{column}/preview"),
    ("post", "/v1/datasets/{id}/risk"),
    ("get", "/v1/jobs"),
    ("post", "/v1/jobs"),
    ("get", "/v1/jobs/{id}"),
    ("get", "/v1/jobs/{id}/events"),
    ("post", "/v1/jobs/{id}/cancel"),
    ("get", "/v1/jobs/{id}/result"),
    ("get", "/v1/jobs/{id}/result.csv"),
    ("get", "/v1/jobs/{id}/result.parquet"),
    ("post", "/v1/jobs/{id}/verify"),
    ("get", "/v1/jobs/{id}/plan"),
    ("get", "/v1/jobs/{id}/spec"),
];

/// Builds the router.
pub fn router(state: AppState) -> Router {
    let v1 = dataset_routes(&state)
        .merge(job_routes(&state))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_api_key,
        ));

    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .route("/openapi.yaml", get(health::openapi))
        .merge(crate::console::routes())
        .merge(v1)
        .fallback(|| async { ApiError::new(ErrorCode::RouteNotFound, "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                ErrorCode::MethodNotAllowed,
                "this method is not allowed on this route",
            )
        })
        .layer(DefaultBodyLimit::max(JSON_BODY_LIMIT))
        .layer(middleware::from_fn(track_metrics))
        .layer(CatchPanicLayer::custom(
            |_: Box<dyn std::any::Any + Send>| {
                ApiError::internal("a request handler panicked").into_response()
            },
        ))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// The routes of `/v1/datasets` (behind the API key).
fn dataset_routes(state: &AppState) -> Router<AppState> {
    let quick = state.config.request_timeout;
    let upload = state.config.upload_timeout;
    let list: MethodRouter<AppState> = with_timeout(get(datasets::list_datasets), quick);
    let create: MethodRouter<AppState> =
        with_timeout(post(datasets::create_dataset), upload).layer(DefaultBodyLimit::disable());
    Router::new()
        .route("/v1/datasets", list.merge(create))
        .route(
            "/v1/datasets/{id}",
            with_timeout(
                get(datasets::get_dataset).delete(datasets::delete_dataset),
                quick,
            ),
        )
        .route(
            "/v1/datasets/{id}/hierarchies/{column}",
            with_timeout(
                get(hierarchies::get_hierarchy).put(hierarchies::put_hierarchy),
                quick,
            ),
        )
        .route(
            "/v1/datasets/{id}/hierarchies/{column}/preview",
            with_timeout(post(hierarchies::preview_hierarchy), quick),
        )
        .route(
            "/v1/datasets/{id}/risk",
            with_timeout(post(datasets::dataset_risk), upload),
        )
}

/// The routes of `/v1/jobs` (behind the API key).
fn job_routes(state: &AppState) -> Router<AppState> {
    let quick = state.config.request_timeout;
    let upload = state.config.upload_timeout;
    Router::new()
        .route(
            "/v1/jobs",
            with_timeout(get(jobs::list_jobs).post(jobs::create_job), quick),
        )
        .route("/v1/jobs/{id}", with_timeout(get(jobs::get_job), quick))
        .route("/v1/jobs/{id}/events", get(jobs::job_events))
        .route(
            "/v1/jobs/{id}/cancel",
            with_timeout(post(jobs::cancel_job), quick),
        )
        .route(
            "/v1/jobs/{id}/result",
            with_timeout(get(jobs::get_result), quick),
        )
        .route("/v1/jobs/{id}/result.csv", get(jobs::get_result_csv))
        .route(
            "/v1/jobs/{id}/result.parquet",
            get(jobs::get_result_parquet),
        )
        .route(
            "/v1/jobs/{id}/verify",
            with_timeout(post(verify::verify_job), upload).layer(DefaultBodyLimit::disable()),
        )
        .route(
            "/v1/jobs/{id}/plan",
            with_timeout(get(jobs::get_plan), quick),
        )
        .route(
            "/v1/jobs/{id}/spec",
            with_timeout(get(jobs::get_spec), quick),
        )
}

/// Answers 503 `request_timeout` (a server-side timeout, with `Retry-After`) in the API's error
/// shape when a request to `route` takes longer than `limit`: tower-http's timeout answers an
/// empty 503, which the outer layer turns into the error shape.
fn with_timeout<S>(route: MethodRouter<S>, limit: Duration) -> MethodRouter<S>
where
    S: Clone + Send + Sync + 'static,
{
    route
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            limit,
        ))
        .layer(middleware::map_response(
            move |response: Response| async move { timeout_error(response, limit) },
        ))
}

/// The timeout layer's empty 503 as an [`ApiError`]; every other response unchanged (the API's
/// own 503 answers have a body).
fn timeout_error(response: Response, limit: Duration) -> Response {
    let empty = HttpBody::size_hint(response.body()).exact() == Some(0);
    if response.status() != StatusCode::SERVICE_UNAVAILABLE || !empty {
        return response;
    }
    ApiError::new(
        ErrorCode::RequestTimeout,
        format!("the request took longer than {} ms", limit.as_millis()),
    )
    .retry_after(1)
    .into_response()
}

/// Counts requests and records latencies by method, route and status.
async fn track_metrics(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let path = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".into());
    let method = req.method().to_string();
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    let labels = [("method", method), ("path", path), ("status", status)];
    metrics::counter!("deid_http_requests_total", &labels).increment(1);
    metrics::histogram!("deid_http_request_duration_seconds", &labels)
        .record(start.elapsed().as_secs_f64());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slow handler behind the timeout layers answers 503 in the error shape; a quick one
    /// answers as usual.
    #[tokio::test]
    async fn slow_requests_time_out() {
        let slow = get(|| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            "late"
        });
        let app: Router = Router::new()
            .route("/slow", with_timeout(slow, Duration::from_millis(50)))
            .route(
                "/quick",
                with_timeout(get(|| async { "early" }), Duration::from_secs(5)),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        crate::tls::install_crypto_provider();
        let r = reqwest::get(format!("http://{addr}/slow")).await.unwrap();
        assert_eq!(r.status().as_u16(), 503);
        let v: serde_json::Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "request_timeout");
        assert_eq!(v["error"]["message"], "the request took longer than 50 ms");
        let r = reqwest::get(format!("http://{addr}/quick")).await.unwrap();
        assert_eq!(r.status().as_u16(), 200);
        assert_eq!(r.text().await.unwrap(), "early");
    }

    /// Every error code's status is a valid HTTP error status.
    #[test]
    fn error_codes_have_statuses() {
        for code in ErrorCode::ALL {
            let e = ApiError::new(*code, "x");
            assert_eq!(e.status().as_u16(), code.status());
            assert!(e.status().is_client_error() || e.status().is_server_error());
        }
    }
}
