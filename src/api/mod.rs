//! The HTTP API (axum): routes under `/v1`, health and metrics endpoints, and the layers around
//! them (API keys, timeouts, body limits, panics, metrics, tracing).
//!
//! - [`datasets`]: uploads (received by [`upload`]), listing, deletion.
//! - [`hierarchies`]: stored hierarchies (ARX tables or builder specifications) and previews.
//! - [`jobs`]: job creation, views, events (SSE), cancel, results.
//! - [`health`]: `/healthz`, `/readyz`, `/metrics`.
//! - [`error`]: the single error shape; [`extract`]: extractors that use it; [`auth`]: the
//!   API-key middleware, over the hashed keys of [`keys`]; [`state`]: what handlers share.

pub mod auth;
pub mod datasets;
pub mod error;
pub mod extract;
pub mod health;
pub mod hierarchies;
pub mod jobs;
pub mod keys;
pub mod state;
pub mod upload;

use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use tower_http::catch_panic::CatchPanicLayer;
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
    ("get", "/v1/datasets"),
    ("post", "/v1/datasets"),
    ("get", "/v1/datasets/{id}"),
    ("delete", "/v1/datasets/{id}"),
    ("get", "/v1/datasets/{id}/hierarchies/{column}"),
    ("put", "/v1/datasets/{id}/hierarchies/{column}"),
    ("post", "/v1/datasets/{id}/hierarchies/{column}/preview"),
    ("get", "/v1/jobs"),
    ("post", "/v1/jobs"),
    ("get", "/v1/jobs/{id}"),
    ("get", "/v1/jobs/{id}/events"),
    ("post", "/v1/jobs/{id}/cancel"),
    ("get", "/v1/jobs/{id}/result"),
    ("get", "/v1/jobs/{id}/result.csv"),
];

/// Builds the router.
pub fn router(state: AppState) -> Router {
    let quick = state.config.request_timeout;
    let upload = state.config.upload_timeout;
    let timeout = move |d: Duration| {
        middleware::from_fn(move |req: Request, next: Next| with_timeout(d, req, next))
    };

    let list: MethodRouter<AppState> = get(datasets::list_datasets).layer(timeout(quick));
    let create: MethodRouter<AppState> = post(datasets::create_dataset)
        .layer::<_, std::convert::Infallible>(timeout(upload))
        .layer(DefaultBodyLimit::disable());
    let v1 = Router::new()
        .route("/v1/datasets", list.merge(create))
        .route(
            "/v1/datasets/{id}",
            get(datasets::get_dataset)
                .delete(datasets::delete_dataset)
                .layer(timeout(quick)),
        )
        .route(
            "/v1/datasets/{id}/hierarchies/{column}",
            get(hierarchies::get_hierarchy)
                .put(hierarchies::put_hierarchy)
                .layer(timeout(quick)),
        )
        .route(
            "/v1/datasets/{id}/hierarchies/{column}/preview",
            post(hierarchies::preview_hierarchy).layer(timeout(quick)),
        )
        .route(
            "/v1/jobs",
            get(jobs::list_jobs)
                .post(jobs::create_job)
                .layer(timeout(quick)),
        )
        .route("/v1/jobs/{id}", get(jobs::get_job).layer(timeout(quick)))
        .route("/v1/jobs/{id}/events", get(jobs::job_events))
        .route(
            "/v1/jobs/{id}/cancel",
            post(jobs::cancel_job).layer(timeout(quick)),
        )
        .route(
            "/v1/jobs/{id}/result",
            get(jobs::get_result).layer(timeout(quick)),
        )
        .route("/v1/jobs/{id}/result.csv", get(jobs::get_result_csv))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_api_key,
        ));

    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
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

/// Answers 408 in the API's error shape when a request takes longer than `limit`.
async fn with_timeout(limit: Duration, req: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(r) => r,
        Err(_) => ApiError::new(
            ErrorCode::RequestTimeout,
            format!("the request took longer than {} ms", limit.as_millis()),
        )
        .into_response(),
    }
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

    /// A slow handler behind the timeout middleware answers 408 in the error shape.
    #[tokio::test]
    async fn slow_requests_time_out() {
        let app: Router = Router::new()
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    "late"
                }),
            )
            .layer(middleware::from_fn(|req: Request, next: Next| {
                with_timeout(Duration::from_millis(50), req, next)
            }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let r = reqwest::get(format!("http://{addr}/slow")).await.unwrap();
        assert_eq!(r.status().as_u16(), 408);
        let v: serde_json::Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "request_timeout");
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
