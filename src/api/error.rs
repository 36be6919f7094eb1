//! The one error shape of the API: `{"error": {"code", "message", "details"}}`, with the status
//! taken from a single code table ([`ERROR_CODES`]). Client mistakes are 4xx and logged at debug
//! level at most; 5xx errors are logged and answered with a generic message.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::spec::SpecError;
use crate::store::StoreError;

/// Every error code with its HTTP status.
pub const ERROR_CODES: &[(&str, u16)] = &[
    ("malformed_json", 400),
    ("invalid_query", 400),
    ("invalid_request", 400),
    ("upload_interrupted", 400),
    ("unauthorized", 401),
    ("route_not_found", 404),
    ("dataset_not_found", 404),
    ("job_not_found", 404),
    ("column_not_found", 404),
    ("hierarchy_not_found", 404),
    ("method_not_allowed", 405),
    ("request_timeout", 408),
    ("dataset_in_use", 409),
    ("job_finished", 409),
    ("result_not_available", 409),
    ("payload_too_large", 413),
    ("too_many_rows", 413),
    ("too_many_columns", 413),
    ("invalid_spec", 422),
    ("invalid_csv", 422),
    ("invalid_hierarchy", 422),
    ("hierarchy_missing_values", 422),
    ("queue_full", 429),
    ("internal_error", 500),
    ("not_ready", 503),
];

/// Status of an error code (500 for unknown codes, which is a bug).
pub fn status_of(code: &str) -> StatusCode {
    ERROR_CODES
        .iter()
        .find(|(c, _)| *c == code)
        .and_then(|(_, s)| StatusCode::from_u16(*s).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// An API error.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// Machine-readable code from [`ERROR_CODES`].
    pub code: &'static str,
    /// Human-readable explanation.
    pub message: String,
    /// Structured details (field, limits, missing values, …).
    pub details: Value,
    /// Seconds for `Retry-After` (429, 503).
    pub retry_after: Option<u64>,
}

/// Result alias of handlers.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

impl ApiError {
    /// An error with `code` and `message`.
    pub fn new(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            details: json!({}),
            retry_after: None,
        }
    }

    /// Adds details.
    pub fn with_details(mut self, details: Value) -> ApiError {
        self.details = details;
        self
    }

    /// Adds a `Retry-After` header.
    pub fn retry_after(mut self, seconds: u64) -> ApiError {
        self.retry_after = Some(seconds);
        self
    }

    /// A 500 for an unexpected failure; `error` is logged, not sent.
    pub fn internal(error: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %error, "internal error");
        ApiError::new(
            "internal_error",
            "an internal error occurred; see the server log",
        )
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        status_of(self.code)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::internal(e)
    }
}

impl From<SpecError> for ApiError {
    fn from(e: SpecError) -> Self {
        ApiError::new("invalid_spec", e.to_string()).with_details(json!({ "field": e.field }))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(code = self.code, "request failed");
        } else {
            tracing::debug!(
                code = self.code,
                status = status.as_u16(),
                "request rejected"
            );
        }
        let body =
            json!({"error": {"code": self.code, "message": self.message, "details": self.details}});
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(s) = self.retry_after
            && let Ok(v) = HeaderValue::from_str(&s.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}
