//! API keys and tenants. Keys come from configuration as `tenant:key`; only their SHA-256 hashes
//! are kept, and a presented key is compared with every configured hash in constant time.
//! Requests carry the key as `Authorization: Bearer <key>` or `X-Api-Key: <key>`. Without
//! configured keys every request belongs to the tenant `default` (the server then only listens
//! on loopback addresses).

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;
use super::state::AppState;

/// The tenant a request acts for (a request extension set by [`require_api_key`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(pub String);

/// Hashed API keys.
#[derive(Debug, Clone, Default)]
pub struct ApiKeys {
    keys: Vec<([u8; 32], String)>,
}

/// A configuration error in `DEID_API_KEYS`.
#[derive(Debug, thiserror::Error)]
#[error(
    "invalid API key entry #{index}: expected tenant:key with a non-empty tenant and a key of at least 16 characters"
)]
pub struct KeyConfigError {
    /// 1-based position in the list.
    pub index: usize,
}

fn hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

impl ApiKeys {
    /// Parses `tenant:key` entries.
    pub fn parse(entries: &[String]) -> Result<ApiKeys, KeyConfigError> {
        let mut keys = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            match entry.split_once(':') {
                Some((tenant, key)) if !tenant.trim().is_empty() && key.trim().len() >= 16 => {
                    keys.push((hash(key.trim()), tenant.trim().to_string()));
                }
                _ => return Err(KeyConfigError { index: i + 1 }),
            }
        }
        Ok(ApiKeys { keys })
    }

    /// True if no key is configured (open, loopback-only mode).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The tenant of `key`, comparing against every hash in constant time.
    pub fn tenant_of(&self, key: &str) -> Option<&str> {
        let presented = hash(key);
        let mut found = None;
        for (h, tenant) in &self.keys {
            if bool::from(h.ct_eq(&presented)) {
                found = Some(tenant.as_str());
            }
        }
        found
    }
}

/// Middleware: resolves the tenant or answers 401.
pub async fn require_api_key(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let tenant = if state.keys.is_empty() {
        "default".to_string()
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
            Some(t) => t.to_string(),
            None => {
                return Err(ApiError::new(
                    "unauthorized",
                    "a valid API key is required: send 'Authorization: Bearer <key>' or 'X-Api-Key: <key>'",
                ));
            }
        }
    };
    req.extensions_mut().insert(Tenant(tenant));
    Ok(next.run(req).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_tenants() {
        let keys = ApiKeys::parse(&[
            "acme:0123456789abcdef".into(),
            " globex : fedcba9876543210 ".into(),
        ])
        .unwrap();
        assert_eq!(keys.tenant_of("0123456789abcdef"), Some("acme"));
        assert_eq!(keys.tenant_of("fedcba9876543210"), Some("globex"));
        assert_eq!(keys.tenant_of("0123456789abcdeX"), None);
        assert!(ApiKeys::parse(&["acme:short".into()]).is_err());
        assert!(ApiKeys::parse(&["nocolon".into()]).is_err());
        assert!(ApiKeys::parse(&[]).unwrap().is_empty());
    }
}
