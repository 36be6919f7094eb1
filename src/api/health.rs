//! `/healthz` (the process answers), `/readyz` (the database answers) and `/metrics`
//! (Prometheus text format).

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde_json::json;

use super::error::ApiError;
use super::state::AppState;
use crate::job::error::ErrorCode;

/// Liveness.
pub async fn healthz() -> impl IntoResponse {
    axum::Json(json!({"status": "ok"}))
}

/// Readiness: the database answers.
pub async fn readyz(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    match tokio::time::timeout(std::time::Duration::from_secs(2), state.store.ping()).await {
        Ok(Ok(())) => Ok(axum::Json(
            json!({"status": "ready", "database": state.store.backend_name()}),
        )),
        _ => Err(ApiError::new(ErrorCode::NotReady, "the database does not answer").retry_after(5)),
    }
}

/// The OpenAPI document of this API (the repository's `openapi.yaml`, built into the binary).
pub const OPENAPI_YAML: &str = include_str!("../../openapi.yaml");

/// `GET /openapi.yaml`: the API's description, for clients and schema-driven tools.
pub async fn openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/yaml; charset=utf-8")],
        OPENAPI_YAML,
    )
}

/// Prometheus metrics; job counts by state are read from the database at each scrape.
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    if let Ok(counts) = state.store.count_jobs_by_status().await {
        for status in crate::job::id::JobStatus::ALL {
            let n = counts
                .iter()
                .find(|(s, _)| s == status.as_str())
                .map_or(0, |(_, n)| *n);
            metrics::gauge!("deid_jobs", "state" => status.as_str()).set(n as f64);
        }
    }
    metrics::gauge!("deid_jobs_running_here").set(state.live.len() as f64);
    let handle = crate::telemetry::metrics();
    handle.run_upkeep();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        handle.render(),
    )
}
