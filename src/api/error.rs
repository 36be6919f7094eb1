//! The one error shape of the API: `{"error": {"code", "message", "details"}}`, with the status
//! taken from the code ([`ErrorCode`], the table shared with job failures). Client mistakes are
//! 4xx and logged at debug level at most; a 5xx is logged once, when it is answered, and its
//! client sees a generic message.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub use crate::job::error::ErrorCode;
use crate::job::error::SpecError;
use crate::store::StoreError;

/// An API error.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// Machine-readable code; it decides the status.
    pub code: ErrorCode,
    /// Human-readable explanation.
    pub message: String,
    /// Structured details (field, limits, missing values, …).
    pub details: Value,
    /// Seconds for `Retry-After` (429, 503).
    pub retry_after: Option<u64>,
    /// What went wrong inside (5xx only): logged when answered, never sent.
    cause: Option<String>,
}

/// Result alias of handlers.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

impl ApiError {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            details: json!({}),
            retry_after: None,
            cause: None,
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

    /// A 500 for an unexpected failure; `error` is logged when the error is answered, not sent.
    pub fn internal(error: impl std::fmt::Display) -> ApiError {
        let mut e = ApiError::new(
            ErrorCode::InternalError,
            "an internal error occurred; see the server log",
        );
        e.cause = Some(error.to_string());
        e
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::internal(e)
    }
}

impl From<SpecError> for ApiError {
    fn from(e: SpecError) -> Self {
        ApiError::new(e.code, e.client_message()).with_details(e.client_details())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::error!(code = %self.code, error = self.cause.as_deref().unwrap_or(""), "request failed");
        } else {
            tracing::debug!(
                code = %self.code,
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
