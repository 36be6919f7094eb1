//! Extractors whose rejections use the API's error shape: [`ApiJson`] (malformed JSON → 400,
//! well-formed but wrong JSON → 422 naming the field's path) and [`ApiQuery`] (→ 400).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::error::{ApiError, ErrorCode};

/// A JSON body; the content type is not required. Invalid bodies are `invalid_spec`.
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

/// Parses a JSON body: syntax errors are 400 `malformed_json`, type and field errors are 422
/// with `invalid_code` and the path of the offending field in `details.field` (`$` for the
/// document itself).
pub fn parse_json<T: DeserializeOwned>(
    body: &[u8],
    invalid_code: ErrorCode,
) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| json_error(&e.path().to_string(), e.into_inner(), invalid_code))?;
    de.end().map_err(|e| json_error(".", e, invalid_code))?;
    Ok(value)
}

/// The API error of a JSON error at `path` (`.` for the document).
fn json_error(path: &str, e: serde_json::Error, invalid_code: ErrorCode) -> ApiError {
    use serde_json::error::Category;
    let field = if path == "." { "$" } else { path };
    match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => ApiError::new(
            ErrorCode::MalformedJson,
            format!("the request body is not valid JSON: {e}"),
        )
        .with_details(json!({"line": e.line(), "column": e.column()})),
        Category::Data => ApiError::new(invalid_code, format!("invalid request body: {e}"))
            .with_details(json!({"field": field, "line": e.line(), "column": e.column()})),
    }
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(body_rejection)?;
        parse_json(&bytes, ErrorCode::InvalidSpec).map(ApiJson)
    }
}

/// Maps a failure to read the body (too large, interrupted) to the API's errors.
pub fn body_rejection(e: axum::extract::rejection::BytesRejection) -> ApiError {
    let status = e.status();
    if status == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(ErrorCode::PayloadTooLarge, "the request body is too large")
    } else {
        ApiError::new(
            ErrorCode::InvalidRequest,
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
            .map_err(|e| ApiError::new(ErrorCode::InvalidQuery, e.body_text()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        inner: Inner,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        n: u32,
    }

    #[test]
    fn errors_name_the_path_of_the_field() {
        let e =
            parse_json::<Outer>(br#"{"inner": {"n": "x"}}"#, ErrorCode::InvalidSpec).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidSpec);
        assert_eq!(e.details["field"], "inner.n");
        let e = parse_json::<Outer>(br#"{"inner": {"n": 1}, "x": 2}"#, ErrorCode::InvalidSpec)
            .unwrap_err();
        assert_eq!(e.details["field"], "x");
        assert!(e.message.contains("unknown field `x`"));
        let e = parse_json::<Outer>(br#"{"inner": "#, ErrorCode::InvalidSpec).unwrap_err();
        assert_eq!(e.code, ErrorCode::MalformedJson);
        let e =
            parse_json::<Outer>(br#"{"inner": {"n": 1}} x"#, ErrorCode::InvalidSpec).unwrap_err();
        assert_eq!(e.code, ErrorCode::MalformedJson);
    }
}
