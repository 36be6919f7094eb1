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

/// A configuration error in `DEID_API_KEYS` (it never shows a key).
#[derive(Debug, thiserror::Error)]
pub enum KeyConfigError {
    /// An entry is not `tenant:key`.
    #[error(
        "invalid API key entry #{index}: expected tenant:key with a non-empty tenant and a key of at least 16 characters"
    )]
    Malformed {
        /// 1-based position in the list.
        index: usize,
    },
    /// A key is a publicly known placeholder (from a template or an example).
    #[error(
        "API key entry #{index} is a placeholder from a template or an example; generate a key, e.g. with `openssl rand -hex 24`"
    )]
    Placeholder {
        /// 1-based position in the list.
        index: usize,
    },
    /// Two entries have the same key: a key must identify one tenant.
    #[error(
        "API key entry #{index} repeats the key of entry #{first}: every key must belong to one tenant"
    )]
    Duplicate {
        /// 1-based position of the repetition.
        index: usize,
        /// 1-based position of the first entry with the key.
        first: usize,
    },
}

/// Parts of keys that templates and examples use (compared in lower case): a key containing one
/// is public and refused at start-up.
const PLACEHOLDERS: &[&str] = &[
    "change-me",
    "changeme",
    "change_me",
    "replace-me",
    "replaceme",
    "your-key",
    "a-long-random-key",
];

fn hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

impl ApiKeys {
    /// Parses `tenant:key` entries.
    pub fn parse(entries: &[String]) -> Result<ApiKeys, KeyConfigError> {
        let mut keys = Vec::new();
        let mut positions = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            match entry.split_once(':') {
                Some((tenant, key)) if !tenant.trim().is_empty() && key.trim().len() >= 16 => {
                    let lower = key.trim().to_lowercase();
                    if PLACEHOLDERS.iter().any(|p| lower.contains(p)) {
                        return Err(KeyConfigError::Placeholder { index: i + 1 });
                    }
                    let h = hash(key.trim());
                    if let Some(j) = keys.iter().position(|(k, _)| *k == h) {
                        return Err(KeyConfigError::Duplicate {
                            index: i + 1,
                            first: positions[j],
                        });
                    }
                    keys.push((h, TenantId::from(tenant.trim())));
                    positions.push(i + 1);
                }
                _ => return Err(KeyConfigError::Malformed { index: i + 1 }),
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
        // Keys of templates and examples are public: refused, without showing them.
        for key in [
            "default:change-me-please-0123456789",
            "acme:a-long-random-key-0123456789",
            "t:REPLACE-ME-0123456789abcdef",
        ] {
            let err = ApiKeys::parse(&["ok:0123456789abcdef".into(), key.into()]).unwrap_err();
            assert!(
                matches!(err, KeyConfigError::Placeholder { index: 2 }),
                "{key}"
            );
            assert!(!err.to_string().contains("0123456789"), "{err}");
        }
        assert!(ApiKeys::parse(&[]).unwrap().is_empty());
        // One key for two tenants is a configuration error that names the entries, not the key.
        let err = ApiKeys::parse(&[
            "acme:0123456789abcdef".into(),
            "globex:fedcba9876543210".into(),
            "initech: 0123456789abcdef".into(),
        ])
        .unwrap_err();
        assert!(matches!(
            err,
            KeyConfigError::Duplicate { index: 3, first: 1 }
        ));
        assert!(!err.to_string().contains("0123456789abcdef"));
    }
}
