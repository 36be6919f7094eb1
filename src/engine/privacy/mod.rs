//! Privacy models. Class-based models decide per equivalence class whether it may be published
//! (violating classes are suppressed); sample-based models (risk thresholds) look at the whole
//! distribution of class sizes after that and suppress further classes, smallest first.
//!
//! Every model declares its monotonicity (REFERENCE.md §5) so that searches prune only where safe.

use super::error::{EngineError, Result};

/// A privacy model with its parameters, as configured by the user.
#[derive(Debug, Clone, PartialEq)]
pub enum PrivacyModel {
    /// Every class has at least `k` records.
    KAnonymity {
        /// Minimal class size (≥ 1).
        k: u32,
    },
    /// Every class has at least `l` distinct values of `attribute`.
    DistinctLDiversity {
        /// Sensitive attribute.
        attribute: String,
        /// Minimal number of distinct values (≥ 1).
        l: u32,
    },
}

/// Whether a property is inherited by generalizations, for the two ways of transforming data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Monotonicity {
    /// Fulfilled stays fulfilled under further generalization (without suppression).
    pub generalization: bool,
    /// Fulfilled stays fulfilled under further generalization when suppression is applied.
    pub suppression: bool,
}

impl PrivacyModel {
    /// Short name used in reports and errors, e.g. `k-anonymity`.
    pub fn name(&self) -> &'static str {
        match self {
            PrivacyModel::KAnonymity { .. } => "k-anonymity",
            PrivacyModel::DistinctLDiversity { .. } => "distinct-l-diversity",
        }
    }

    /// The sensitive attribute the model protects, if any.
    pub fn attribute(&self) -> Option<&str> {
        match self {
            PrivacyModel::KAnonymity { .. } => None,
            PrivacyModel::DistinctLDiversity { attribute, .. } => Some(attribute),
        }
    }

    /// Monotonicity of the model (REFERENCE.md §5).
    pub fn monotonicity(&self) -> Monotonicity {
        match self {
            PrivacyModel::KAnonymity { .. } | PrivacyModel::DistinctLDiversity { .. } => {
                Monotonicity {
                    generalization: true,
                    suppression: true,
                }
            }
        }
    }

    /// The minimal class size every published class must have under this model, if it implies one.
    pub fn min_class_size(&self) -> Option<u32> {
        match self {
            PrivacyModel::KAnonymity { k } => Some(*k),
            PrivacyModel::DistinctLDiversity { l, .. } => Some(*l),
        }
    }

    /// Parses the compact syntax `name(key=value,…)`, e.g. `k-anonymity(k=5)`.
    pub fn parse(text: &str) -> Result<PrivacyModel> {
        let t = text.trim();
        let (name, rest) = t.split_once('(').unwrap_or((t, ")"));
        let params = rest
            .strip_suffix(')')
            .ok_or_else(|| EngineError::config("privacy", format!("missing ')' in '{text}'")))?;
        let mut map = std::collections::BTreeMap::new();
        for kv in params.split(',').filter(|s| !s.trim().is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| {
                EngineError::config("privacy", format!("expected key=value, got '{kv}'"))
            })?;
            map.insert(k.trim().to_string(), v.trim().to_string());
        }
        let int = |key: &str| -> Result<u32> {
            let v = map.get(key).ok_or_else(|| {
                EngineError::config(format!("privacy.{key}"), format!("{name} needs '{key}'"))
            })?;
            v.parse().map_err(|_| {
                EngineError::config(
                    format!("privacy.{key}"),
                    format!("expected a whole number, got '{v}'"),
                )
            })
        };
        match name.trim() {
            "k-anonymity" => Ok(PrivacyModel::KAnonymity { k: int("k")? }),
            "distinct-l-diversity" => Ok(PrivacyModel::DistinctLDiversity {
                attribute: map.get("attribute").cloned().unwrap_or_default(),
                l: int("l")?,
            }),
            other => Err(EngineError::config(
                "privacy",
                format!("unknown privacy model '{other}'"),
            )),
        }
    }

    /// Checks parameter ranges; `field` is the path used in errors (e.g. `privacy[0]`).
    pub fn validate(&self, field: &str) -> Result<()> {
        match self {
            PrivacyModel::KAnonymity { k } if *k < 1 => Err(EngineError::config(
                format!("{field}.k"),
                format!("k must be at least 1, got {k}"),
            )),
            PrivacyModel::DistinctLDiversity { l, .. } if *l < 1 => Err(EngineError::config(
                format!("{field}.l"),
                format!("l must be at least 1, got {l}"),
            )),
            _ => Ok(()),
        }
    }
}

/// What a class-based model sees of the sensitive attribute over the whole table.
#[derive(Debug, Clone)]
pub struct SensitiveDomain {
    /// Column name.
    pub column: String,
    /// Frequency of every value code in the whole table.
    pub global_counts: Vec<u32>,
    /// The values themselves (for ordered distances).
    pub values: Vec<String>,
    /// Number of records.
    pub n: usize,
}

/// A class-based model compiled against the data.
#[derive(Debug, Clone)]
pub(crate) enum PreparedClassModel {
    /// Distinct ℓ-diversity on sensitive slot `slot`.
    DistinctL { slot: usize, l: u32 },
}

impl PreparedClassModel {
    /// Compiles `model`; `slot` is the index of its sensitive attribute among the problem's
    /// tracked distributions. Returns `None` for models that need no per-class evaluation beyond
    /// the minimal class size (k-anonymity).
    pub(crate) fn prepare(
        model: &PrivacyModel,
        slot: Option<usize>,
        _domain: Option<&SensitiveDomain>,
    ) -> Result<Option<PreparedClassModel>> {
        Ok(match model {
            PrivacyModel::KAnonymity { .. } => None,
            PrivacyModel::DistinctLDiversity { l, .. } => Some(PreparedClassModel::DistinctL {
                slot: slot.expect("distribution tracked"),
                l: *l,
            }),
        })
    }

    /// True if the class (its size and, per tracked sensitive slot, its sorted histogram of value
    /// codes and frequencies) satisfies the model.
    pub(crate) fn holds(&self, _count: u32, hists: &[(&[u32], &[u32])]) -> bool {
        match self {
            PreparedClassModel::DistinctL { slot, l } => hists[*slot].0.len() >= *l as usize,
        }
    }
}
