//! The API-key middleware: resolves the tenant of a request from `Authorization: Bearer <key>`
//! or `X-Api-Key: <key>` ([`super::keys`]) and attaches it as a [`TenantId`] extension.
//! Without configured keys every request belongs to the tenant `default` (the server then only
//! listens on loopback addresses).

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;

use super::error::{ApiError, ErrorCode};
use super::state::AppState;
use crate::job::id::TenantId;

/// Middleware: resolves the tenant or answers 401.
pub async fn require_api_key(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let tenant = if state.keys.is_empty() {
        TenantId::from("default")
    } else {
        let headers = req.headers();
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
            .map(str::trim);
        match presented.and_then(|k| state.keys.tenant_of(k)) {
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
