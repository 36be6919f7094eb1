//! API keys: configured as `tenant:key`; only their SHA-256 hashes are kept, and a presented key
//! is compared with every configured hash in constant time.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::job::id::TenantId;

/// Hashed API keys.
#[derive(Debug, Clone, Default)]
pub struct ApiKeys {
    keys: Vec<([u8; 32], TenantId)>,
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
                    keys.push((hash(key.trim()), TenantId::from(tenant.trim())));
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
    pub fn tenant_of(&self, key: &str) -> Option<&TenantId> {
        let presented = hash(key);
        let mut found = None;
        for (h, tenant) in &self.keys {
            if bool::from(h.ct_eq(&presented)) {
                found = Some(tenant);
            }
        }
        found
    }
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
        assert_eq!(
            keys.tenant_of("0123456789abcdef"),
            Some(&TenantId::from("acme"))
        );
        assert_eq!(
            keys.tenant_of("fedcba9876543210"),
            Some(&TenantId::from("globex"))
        );
        assert_eq!(keys.tenant_of("0123456789abcdeX"), None);
        assert!(ApiKeys::parse(&["acme:short".into()]).is_err());
        assert!(ApiKeys::parse(&["nocolon".into()]).is_err());
        assert!(ApiKeys::parse(&[]).unwrap().is_empty());
    }
}
