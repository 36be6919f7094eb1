//! Engine-side configuration of an anonymization problem: which columns are quasi-identifiers
//! (with hierarchies), sensitive or identifying, the privacy models, the suppression limit and the
//! quality model. The service's job specification is parsed into these types.

use crate::aggregate::Microaggregation;
pub use crate::data::subset::ResearchSubset;
use crate::hierarchy::Hierarchy;
use crate::population::PopulationModel;
use crate::privacy::PrivacyModel;
use crate::quality::QualityConfig;

/// A quasi-identifier: a column generalized with a hierarchy.
#[derive(Debug, Clone)]
pub struct QuasiIdentifier {
    /// Column name.
    pub column: String,
    /// Its generalization hierarchy.
    pub hierarchy: Hierarchy,
    /// Lowest level a transformation may use (default 0).
    pub min_level: Option<u8>,
    /// Highest level a transformation may use (default: the hierarchy's top).
    pub max_level: Option<u8>,
    /// The level the data are given at (default 0, the leaves): the column's values are labels
    /// of this level of the hierarchy (a table already generalized to a floor), transformations
    /// start at this level and the quality models measure against the full hierarchy
    /// (`docs/definitions.md` §1.2).
    pub data_level: u8,
    /// Attribute weight for the quality models (default 0.5 as in ARX; only ratios matter).
    pub weight: f64,
}

impl QuasiIdentifier {
    /// A quasi-identifier with default levels and weight.
    pub fn new(column: impl Into<String>, hierarchy: Hierarchy) -> Self {
        QuasiIdentifier {
            column: column.into(),
            hierarchy,
            min_level: None,
            max_level: None,
            data_level: 0,
            weight: 0.5,
        }
    }
}

/// A sensitive attribute: kept as is, protected by ℓ-diversity, t-closeness, δ-disclosure or β-likeness.
#[derive(Debug, Clone)]
pub struct SensitiveAttribute {
    /// Column name.
    pub column: String,
    /// Hierarchy for t-closeness with hierarchical distance (optional otherwise).
    pub hierarchy: Option<Hierarchy>,
}

/// Everything the engine needs besides the data.
#[derive(Debug, Clone)]
pub struct ProblemConfig {
    /// Quasi-identifiers in the order of the lattice dimensions.
    pub quasi_identifiers: Vec<QuasiIdentifier>,
    /// Sensitive attributes.
    pub sensitive: Vec<SensitiveAttribute>,
    /// Identifying columns (removed from the output).
    pub identifying: Vec<String>,
    /// Quasi-identifiers without a hierarchy whose values are aggregated within each class.
    pub microaggregated: Vec<Microaggregation>,
    /// Privacy models; all must hold.
    pub privacy: Vec<PrivacyModel>,
    /// Share of records that may be suppressed, in [0, 1].
    pub suppression_limit: f64,
    /// Quality model used to score transformations.
    pub quality: QualityConfig,
    /// The population the data were sampled from (needed by `population-uniqueness`; enables the
    /// population risks of the report).
    pub population: Option<PopulationModel>,
    /// The records to release when the table is the population they were drawn from
    /// (δ-presence, k-map without α); the other records are never written.
    pub research_subset: Option<ResearchSubset>,
    /// The count column of a frequency table: each row stands for that many records
    /// (`docs/definitions.md` §1.1). Not an attribute; the output's count column.
    pub count_column: Option<String>,
    /// With a count column: how many of each row's records are released (the research subset
    /// of a frequency table). Not an attribute, never written.
    pub subset_count_column: Option<String>,
}

impl Default for ProblemConfig {
    fn default() -> Self {
        ProblemConfig {
            quasi_identifiers: Vec::new(),
            sensitive: Vec::new(),
            identifying: Vec::new(),
            microaggregated: Vec::new(),
            privacy: Vec::new(),
            suppression_limit: 0.0,
            quality: QualityConfig::default(),
            population: None,
            research_subset: None,
            count_column: None,
            subset_count_column: None,
        }
    }
}
