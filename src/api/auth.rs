//! The API-key middleware: resolves the tenant of a request from `Authorization: Bearer <key>`
//! or `X-Api-Key: <key>` ([`super::keys`]) and attaches it as a [`TenantId`] extension.
//! Without configured keys every request belongs to the tenant `default` (the server then only
//! listens on loopback addresses).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::Response;

use super::error::{ApiError, ErrorCode};
use super::state::AppState;
use crate::job::id::TenantId;

/// The key a request presents: `Authorization: Bearer <key>` (scheme case-insensitive) or
/// `X-Api-Key: <key>`. A request whose `Authorization` header is not a bearer key, or whose two
/// headers name different keys, presents none (it is refused, whatever the other header holds).
fn presented_key(headers: &HeaderMap) -> Option<&str> {
    let bearer = match headers.get(header::AUTHORIZATION) {
        None => None,
        Some(v) => {
            let (scheme, key) = v.to_str().ok()?.trim().split_once(' ')?;
            if !scheme.eq_ignore_ascii_case("bearer") {
                return None;
            }
            Some(key.trim())
        }
    };
    let api_key = match headers.get("x-api-key") {
        None => None,
        Some(v) => Some(v.to_str().ok()?.trim()),
    };
    match (bearer, api_key) {
        (Some(a), Some(b)) if a != b => None,
        (Some(k), _) | (None, Some(k)) => Some(k),
        (None, None) => None,
    }
}

/// Middleware: resolves the tenant or answers 401.
pub async fn require_api_key(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let tenant = if state.keys.is_empty() {
        TenantId::from("default")
    } else {
        match presented_key(req.headers()).and_then(|k| state.keys.tenant_of(k)) {
            Some(t) => t.clone(),
            None => {
                return Err(ApiError::new(
                    ErrorCode::Unauthorized,
                    "a valid API key is required: send 'Authorization: Bearer <key>' or 'X-Api-Key: <key>'",
                ));
            }
        }
    };
    req.extensions_mut().insert(tenant);
    Ok(next.run(req).await)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn keys_come_from_one_well_formed_header() {
        let key = "0123456789abcdef";
        for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
            let value: &'static str = Box::leak(format!("{scheme} {key}").into_boxed_str());
            assert_eq!(
                presented_key(&headers(&[("authorization", value)])),
                Some(key)
            );
        }
        assert_eq!(presented_key(&headers(&[("x-api-key", key)])), Some(key));
        assert_eq!(
            presented_key(&headers(&[
                ("authorization", "Bearer 0123456789abcdef"),
                ("x-api-key", key)
            ])),
            Some(key)
        );
        // A garbage Authorization header is not rescued by a valid X-Api-Key.
        for garbage in [
            "garbage",
            "Basic dXNlcjpwdw==",
            "Bearer",
            "Token 0123456789abcdef",
        ] {
            assert_eq!(
                presented_key(&headers(&[("authorization", garbage), ("x-api-key", key)])),
                None,
                "{garbage}"
            );
        }
        // Two different keys.
        assert_eq!(
            presented_key(&headers(&[
                ("authorization", "Bearer fedcba9876543210"),
                ("x-api-key", key)
            ])),
            None
        );
        assert_eq!(presented_key(&HeaderMap::new()), None);
    }
}
