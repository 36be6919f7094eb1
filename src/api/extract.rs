//! Extractors whose rejections use the API's error shape: [`ApiJson`] (malformed JSON → 400,
//! well-formed but wrong JSON → 422) and [`ApiQuery`] (→ 400).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::error::ApiError;

/// A JSON body; the content type is not required.
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

/// Parses a JSON body: syntax errors are 400 `malformed_json`, type and field errors are 422
/// with `invalid_code`.
pub fn parse_json<T: DeserializeOwned>(
    body: &[u8],
    invalid_code: &'static str,
) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        use serde_json::error::Category;
        match e.classify() {
            Category::Syntax | Category::Eof | Category::Io => ApiError::new(
                "malformed_json",
                format!("the request body is not valid JSON: {e}"),
            )
            .with_details(json!({"line": e.line(), "column": e.column()})),
            Category::Data => ApiError::new(invalid_code, format!("invalid request body: {e}"))
                .with_details(json!({"field": "$", "line": e.line(), "column": e.column()})),
        }
    })
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(body_rejection)?;
        parse_json(&bytes, "invalid_spec").map(ApiJson)
    }
}

/// Maps a failure to read the body (too large, interrupted) to the API's errors.
pub fn body_rejection(e: axum::extract::rejection::BytesRejection) -> ApiError {
    let status = e.status();
    if status == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new("payload_too_large", "the request body is too large")
    } else {
        ApiError::new(
            "invalid_request",
            format!("cannot read the request body: {e}"),
        )
    }
}

/// Query parameters.
#[derive(Debug, Clone)]
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(q)| ApiQuery(q))
            .map_err(|e| ApiError::new("invalid_query", e.body_text()))
    }
}
