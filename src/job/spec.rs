//! The job specification: one JSON schema for `deid evaluate --config`, `deid anonymize --config`
//! and `POST /v1/jobs`. It names the attributes and their roles, hierarchies (a CSV file, inline
//! CSV, a stored hierarchy or a builder specification), privacy models, suppression limit, quality
//! model and search parameters. [`JobSpec::problem_config`] turns it into the engine's
//! [`ProblemConfig`] and [`JobSpec::search_config`] into its [`SearchConfig`]; the walk from a
//! specification to a [`deid_engine::Problem`] is in [`super::problem`].
//!
//! ```json
//! {
//!   "attributes": {
//!     "age": {"type": "quasi_identifying", "hierarchy": {"file": "age.csv"}, "max_level": 3},
//!     "disease": {"type": "sensitive"},
//!     "name": {"type": "identifying"}
//!   },
//!   "privacy": ["k-anonymity(k=5)", {"model": "distinct-l-diversity", "attribute": "disease", "l": 2}],
//!   "suppression_limit": 0.05,
//!   "quality": {"model": "loss", "gs_factor": 0.5}
//! }
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use deid_engine::config::ResearchSubset;
use deid_engine::config::SensitiveAttribute;
use deid_engine::names::alternatives;
use deid_engine::population::{PopulationModel, Region};
use deid_engine::privacy::PrivacyModel;
use deid_engine::quality::{Aggregate, QualityConfig, QualityModel};
use deid_engine::search::{FLASH_HARD_LIMIT, MAX_CANDIDATES, MAX_CHECK_LIMIT, MAX_THREADS};
use deid_engine::{
    Algorithm, DuplicatePolicy, GeneticParams, Hierarchy, ProblemConfig, QuasiIdentifier,
    SearchConfig,
};

use super::error::SpecError;
use super::id::DatasetId;

/// Role of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttributeType {
    /// Directly identifying: removed from the output.
    Identifying,
    /// Quasi-identifying: generalized with a hierarchy.
    QuasiIdentifying,
    /// Sensitive: kept, protected by ℓ-diversity, t-closeness, δ-disclosure, β-likeness.
    Sensitive,
    /// Insensitive: kept as is (the default for columns not named).
    Insensitive,
}

/// Where a hierarchy comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum HierarchySource {
    /// An ARX-format CSV file (CLI only).
    File {
        /// Path of the file.
        file: PathBuf,
        /// Field delimiter; default `;`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delimiter: Option<char>,
    },
    /// ARX-format CSV given inline.
    Inline {
        /// The CSV text.
        csv: String,
        /// Field delimiter; default `;`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delimiter: Option<char>,
    },
    /// The hierarchy stored for this column of the dataset (API only).
    Stored {
        /// Must be `true`.
        stored: bool,
    },
    /// A builder specification (`{"type": "interval", …}`), see the hierarchy builders.
    Builder(serde_json::Value),
}

/// Settings of one column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttributeSpec {
    /// The column's role.
    #[serde(rename = "type")]
    pub kind: AttributeType,
    /// Hierarchy (required for quasi-identifiers unless stored; optional for sensitive attributes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hierarchy: Option<HierarchySource>,
    /// Lowest generalization level a solution may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_level: Option<u8>,
    /// Highest generalization level a solution may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_level: Option<u8>,
    /// The level of the hierarchy the column's values are labels of (data already generalized
    /// to a floor; default 0). Solutions use levels from it up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_level: Option<u8>,
    /// Weight in the quality model (default 0.5; only ratios matter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    /// Microaggregation instead of a hierarchy (quasi-identifiers only): the column's values
    /// are replaced by an aggregate of their class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub microaggregation: Option<MicroaggregationSpec>,
}

impl AttributeSpec {
    /// Refuses the fields the column's role does not take: levels and weight outside
    /// quasi-identifiers, `data_level` outside those with a hierarchy, microaggregation outside
    /// quasi-identifiers. `field` is the attribute's path.
    fn check_role_fields(&self, field: &str) -> Result<(), SpecError> {
        let attr = self;
        if attr.kind != AttributeType::QuasiIdentifying
            && (attr.min_level.is_some() || attr.max_level.is_some() || attr.weight.is_some())
        {
            return Err(SpecError::new(
                field,
                "min_level, max_level and weight apply to quasi-identifiers only",
            ));
        }
        if attr.data_level.is_some()
            && (attr.kind != AttributeType::QuasiIdentifying || attr.microaggregation.is_some())
        {
            return Err(SpecError::new(
                format!("{field}.data_level"),
                "data_level applies to quasi-identifiers generalized with a hierarchy only \
                 (not to microaggregated or other columns)",
            ));
        }
        if attr.microaggregation.is_some() && attr.kind != AttributeType::QuasiIdentifying {
            return Err(SpecError::new(
                format!("{field}.microaggregation"),
                "microaggregation applies to quasi-identifiers only",
            ));
        }
        Ok(())
    }

    /// A column of the given role with every other setting unset.
    pub fn new(kind: AttributeType) -> AttributeSpec {
        AttributeSpec {
            kind,
            hierarchy: None,
            min_level: None,
            max_level: None,
            data_level: None,
            weight: None,
            microaggregation: None,
        }
    }
}

/// Deserializes `attributes`, refusing a column named twice (JSON objects may repeat a key;
/// the last entry would silently replace the first, e.g. one aggregate by another).
fn unique_attributes<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, AttributeSpec>, D::Error> {
    struct Columns;
    impl<'de> serde::de::Visitor<'de> for Columns {
        type Value = BTreeMap<String, AttributeSpec>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object of column names and their settings")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(column) = map.next_key::<String>()? {
                if out.contains_key(&column) {
                    return Err(serde::de::Error::custom(format!(
                        "column '{column}' is named twice: give each column one entry (with at \
                         most one hierarchy or one microaggregation)"
                    )));
                }
                let settings = map.next_value()?;
                out.insert(column, settings);
            }
            Ok(out)
        }
    }
    deserializer.deserialize_map(Columns)
}

/// The `microaggregation` setting of a quasi-identifier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MicroaggregationSpec {
    /// `arithmetic_mean`, `geometric_mean`, `median`, `mode`, `interval` or `set`.
    pub function: String,
    /// `ignore` (default: aggregate the other values) or `keep` missing (empty) values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
    /// The values are dates in this format (e.g. `dd.MM.yyyy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date_format: Option<String>,
}

impl MicroaggregationSpec {
    /// The engine's setting for `column`; errors name `field`'s `function` or `missing`.
    pub fn parse(
        &self,
        column: &str,
        field: &str,
    ) -> Result<deid_engine::aggregate::Microaggregation, SpecError> {
        use deid_engine::aggregate::{AggregateFunction, Microaggregation, MissingValues};
        let function = AggregateFunction::parse(&self.function).ok_or_else(|| {
            SpecError::new(
                format!("{field}.function"),
                format!(
                    "unknown function '{}'; expected one of {}",
                    self.function,
                    AggregateFunction::NAMES.join(", ")
                ),
            )
        })?;
        let missing = match self.missing.as_deref() {
            None => MissingValues::Ignore,
            Some(name) => MissingValues::parse(name).ok_or_else(|| {
                SpecError::new(
                    format!("{field}.missing"),
                    format!(
                        "unknown value '{name}'; expected {}",
                        alternatives(MissingValues::NAMES)
                    ),
                )
            })?,
        };
        Ok(Microaggregation {
            column: column.to_string(),
            function,
            missing,
            date_format: self.date_format.clone(),
        })
    }
}

/// A privacy model: compact text (`"k-anonymity(k=5)"`) or an object (`{"model": "k-anonymity", "k": 5}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "expected a privacy model: text such as \"k-anonymity(k=5)\", or an object with a \"model\" key"
)]
pub enum PrivacySpec {
    /// Compact syntax.
    Text(String),
    /// Object with a `model` key and the parameters.
    Object(BTreeMap<String, serde_json::Value>),
}

impl PrivacySpec {
    /// Parses into an engine model; `field` names the entry in errors.
    pub fn parse(&self, field: &str) -> Result<PrivacyModel, SpecError> {
        let model = match self {
            PrivacySpec::Text(t) => PrivacyModel::parse(t),
            PrivacySpec::Object(map) => {
                let model = map.get("model").and_then(|v| v.as_str()).ok_or_else(|| {
                    SpecError::new(
                        format!("{field}.model"),
                        "expected the model name as a string, e.g. \"k-anonymity\"",
                    )
                })?;
                // Parameter by parameter: values need no quoting, whatever they contain.
                let params: Vec<(String, String)> = map
                    .iter()
                    .filter(|(k, _)| k.as_str() != "model")
                    .map(|(k, v)| match v {
                        serde_json::Value::String(s) => (k.clone(), s.clone()),
                        other => (k.clone(), other.to_string()),
                    })
                    .collect();
                PrivacyModel::from_params(model, &params)
            }
        };
        model.map_err(|e| SpecError::from(e.within(field)))
    }
}

/// The quality model: a name (`"loss"`) or an object with parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "expected a quality model: a name such as \"loss\", or an object with a \"model\" key"
)]
pub enum QualitySpec {
    /// Just the model's name.
    Name(String),
    /// Model with parameters.
    Object {
        /// Model name.
        model: String,
        /// gs-factor in [0, 1] (default 0.5).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        gs_factor: Option<f64>,
        /// `sum`, `maximum`, `arithmetic_mean` or `geometric_mean`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        aggregate: Option<String>,
    },
}

impl QualitySpec {
    /// Converts into the engine's configuration.
    pub fn parse(&self) -> Result<QualityConfig, SpecError> {
        let (name, gs, agg) = match self {
            QualitySpec::Name(n) => (n.as_str(), None, None),
            QualitySpec::Object {
                model,
                gs_factor,
                aggregate,
            } => (model.as_str(), *gs_factor, aggregate.as_deref()),
        };
        let model = QualityModel::parse(name).ok_or_else(|| {
            SpecError::new(
                "quality.model",
                format!(
                    "unknown quality model '{name}'; expected one of {}",
                    QualityModel::NAMES.join(", ")
                ),
            )
        })?;
        let aggregate = match agg {
            None => None,
            Some(name) => Some(Aggregate::parse(name).ok_or_else(|| {
                SpecError::new(
                    "quality.aggregate",
                    format!(
                        "unknown aggregate '{name}'; expected {}",
                        alternatives(Aggregate::NAMES)
                    ),
                )
            })?),
        };
        let config = QualityConfig {
            model,
            gs_factor: gs.unwrap_or(0.5),
            aggregate,
        };
        config.validate().map_err(|e| e.within("quality"))?;
        Ok(config)
    }
}

impl Default for QualitySpec {
    fn default() -> Self {
        QualitySpec::Name("loss".into())
    }
}

/// A time limit: milliseconds as a number, or text such as `"500ms"`, `"5s"`, `"2m"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "expected a duration: milliseconds as a non-negative integer, or text such as \"500ms\", \"5s\", \"2m\""
)]
pub enum DurationSpec {
    /// Milliseconds.
    Millis(u64),
    /// Text with units, as `humantime` reads it (`500ms`, `5s`, `2m`, `1h 30m`).
    Text(String),
}

impl DurationSpec {
    /// The duration; `field` names the setting in errors.
    pub fn parse(&self, field: &str) -> Result<std::time::Duration, SpecError> {
        match self {
            DurationSpec::Millis(ms) => Ok(std::time::Duration::from_millis(*ms)),
            DurationSpec::Text(t) => {
                parse_duration(t).map_err(|message| SpecError::new(field, message))
            }
        }
    }
}

/// Parses a duration with units (`500ms`, `5s`, `2m`, `1h`); the error says what was expected.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|_| format!("cannot read '{text}' as a duration; expected e.g. 500ms, 5s, 2m"))
}

/// Parameters of the genetic algorithm; unset fields keep the defaults (Table 2 of the paper).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeneticSpec {
    /// Generations: the stop after them if `stop_after_iterations`, else the stagnation window
    /// before the population is re-seeded (1 to 100,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    /// Stop after `iterations` generations instead of using the whole time limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_after_iterations: Option<bool>,
    /// Individuals per subpopulation (2 to 10,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subpopulation_size: Option<usize>,
    /// Share of the fittest kept unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elite_fraction: Option<f64>,
    /// Share replaced by crossover children.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crossover_fraction: Option<f64>,
    /// Share of the fittest used as parents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub production_fraction: Option<f64>,
    /// Probability of mutating a level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutation_probability: Option<f64>,
    /// Generations between migrations (0 to 100,000; 0 disables them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immigration_interval: Option<u32>,
    /// Share of a subpopulation that migrates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immigration_fraction: Option<f64>,
}

impl GeneticSpec {
    /// The engine's parameters: defaults overridden by the fields that are set.
    pub fn params(&self) -> GeneticParams {
        let d = GeneticParams::default();
        GeneticParams {
            iterations: self.iterations.unwrap_or(d.iterations),
            stop_after_iterations: self
                .stop_after_iterations
                .unwrap_or(d.stop_after_iterations),
            subpopulation_size: self.subpopulation_size.unwrap_or(d.subpopulation_size),
            elite_fraction: self.elite_fraction.unwrap_or(d.elite_fraction),
            crossover_fraction: self.crossover_fraction.unwrap_or(d.crossover_fraction),
            production_fraction: self.production_fraction.unwrap_or(d.production_fraction),
            mutation_probability: self.mutation_probability.unwrap_or(d.mutation_probability),
            immigration_interval: self.immigration_interval.unwrap_or(d.immigration_interval),
            immigration_fraction: self.immigration_fraction.unwrap_or(d.immigration_fraction),
        }
    }
}

/// Default search time limit (as ARX's heuristic search limit).
pub const DEFAULT_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The whole job specification.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Dataset to anonymize (API only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_id: Option<String>,
    /// What the job does (default `anonymize`). Not the first field: a JSON array given as
    /// the specification must fail on a field of a simple type (422), not on the enumeration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Task>,
    /// Input CSV file (CLI only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<PathBuf>,
    /// Input field delimiter (CLI only; default `,`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delimiter: Option<char>,
    /// Column name → settings. Columns not named are insensitive; a column named twice is
    /// refused (its hierarchy or aggregate would otherwise be the last one given).
    #[serde(default, deserialize_with = "unique_attributes")]
    pub attributes: BTreeMap<String, AttributeSpec>,
    /// Privacy models; all must hold.
    #[serde(default)]
    pub privacy: Vec<PrivacySpec>,
    /// Share of records that may be suppressed (default 0).
    #[serde(default)]
    pub suppression_limit: Option<f64>,
    /// Quality model (default Loss).
    #[serde(default)]
    pub quality: Option<QualitySpec>,
    /// Search algorithm (`auto`, `flash`, `lightning`, …); used by anonymize and jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// Search time limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<DurationSpec>,
    /// Optional limit on the number of checks (1 to 10^12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_limit: Option<u64>,
    /// Seed for randomized algorithms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Worker threads for one search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Parameters of the genetic algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub genetic: Option<GeneticSpec>,
    /// Largest solution space for which `auto` picks Flash (default 100,000; at most
    /// 100,000,000, Flash keeps one byte per transformation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flash_max_space: Option<u64>,
    /// How many of the best anonymous transformations the search checked the report lists
    /// as `candidates` (default 20, at most 100, 0 for none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<usize>,
    /// The transformation to evaluate (`deid evaluate`, jobs with `"task": "evaluate"`):
    /// quasi-identifier → level; quasi-identifiers not named keep level 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<BTreeMap<String, u8>>,
    /// Risk threshold for the "records at risk" statistic of the report (default 0.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_threshold: Option<f64>,
    /// `"task": "risk"`: which combinations of the quasi-identifiers get distinction and
    /// separation (`auto`, the default, `all` or `singles`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qi_combinations: Option<deid_engine::risk::QiCombinations>,
    /// The population the data were sampled from: `{"size": N}`, `{"sampling_fraction": f}` or
    /// `{"region": "usa"}` (needed by `population-uniqueness`; adds population risks to the
    /// report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub population: Option<PopulationSpec>,
    /// The records to release when the dataset is the population they were drawn from
    /// (δ-presence, k-map without α): `{"column": "c"}` (a yes/no mark), `{"column": "c",
    /// "value": "v"}` or `{"rows": [1, 5, …]}` (record numbers, 1 = the first record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub research_subset: Option<ResearchSubsetSpec>,
    /// The count column of a frequency table: each row stands for that many records (decimal
    /// digits, 0 to 4294967295; rows counting 0 are left out). The service takes it from the
    /// dataset (`POST /v1/datasets?count_column=`); a specification may only repeat it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count_column: Option<String>,
    /// With a count column: the column holding how many of each row's records are released
    /// (the research subset of a frequency table; at most the row's count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subset_count_column: Option<String>,
    /// URL POSTed when a job ends (API only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
    /// Values listed in several rows of a CSV hierarchy with different generalizations:
    /// rejected (default) or resolved as ARX does (`last`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hierarchy_duplicates: Option<HierarchyDuplicates>,
    /// What a suppressed record looks like in the output (default `mask`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suppressed: Option<SuppressedSpec>,
    /// The text of suppressed values (default `*`); must not occur in a quasi-identifier or
    /// sensitive column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suppression_marker: Option<String>,
    /// Neutralize spreadsheet formulas in the output (OWASP CSV injection: cells starting with
    /// `=`, `+`, `-`, `@`, tab or CR get a leading `'`); default false, the output is faithful.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neutralize_formulas: Option<bool>,
    /// Local generalization (a transformation per group of records) instead of one global
    /// transformation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalSpec>,
}

/// The `local` setting of a job specification: local generalization with at most `iterations`
/// steps (each publishing ≥ 1/iterations of the records); unset fields keep the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalSpec {
    /// N: at most N steps, each publishing at least 1/N of the records (1 to 10,000; default
    /// 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    /// The quality model's gs-factor in every step (default: 0 — suppression is free, so each
    /// step publishes what it can keep most precise — and a second attempt with 0.5 if that
    /// leaves more records suppressed than the suppression limit allows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gs_factor: Option<f64>,
    /// Refine the output (default true): split published classes into finer ones that satisfy
    /// the models on their own; false gives ARX's procedure's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refine: Option<bool>,
    /// How records are assigned to transformations: `auto` (the default: the sweep where every
    /// model is k-anonymity or estimated k-map and the space is small enough, the steps
    /// otherwise), `steps` (ARX's procedure) or `sweep` (every transformation in order of its
    /// mean domain share; `iterations` and `gs_factor` do not apply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<deid_engine::local::LocalMethod>,
}

impl LocalSpec {
    /// The engine's settings.
    pub fn config(&self) -> deid_engine::local::LocalConfig {
        let d = deid_engine::local::LocalConfig::default();
        deid_engine::local::LocalConfig {
            iterations: self.iterations.unwrap_or(d.iterations),
            gs_factor: self.gs_factor.or(d.gs_factor),
            refine: self.refine.unwrap_or(d.refine),
            method: self.method.unwrap_or(d.method),
        }
    }
}

/// The `research_subset` of a job specification: a column (with an optional value) or record
/// numbers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResearchSubsetSpec {
    /// The column that marks the released records (yes/no, or `value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<String>,
    /// The value of `column` that marks a released record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The numbers of the released records (1 = the first record after the header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<Vec<u64>>,
}

impl ResearchSubsetSpec {
    /// The engine's research subset; errors name `research_subset` or its field.
    pub fn parse(&self) -> Result<ResearchSubset, SpecError> {
        match (&self.column, &self.value, &self.rows) {
            (Some(column), value, None) => Ok(ResearchSubset::Column {
                column: column.clone(),
                value: value.clone(),
            }),
            (None, None, Some(rows)) => Ok(ResearchSubset::Rows(rows.clone())),
            (None, Some(_), _) => Err(SpecError::new(
                "research_subset.value",
                "value selects the records of a column: give \"column\" too",
            )),
            _ => Err(SpecError::new(
                "research_subset",
                "give exactly one of column (with an optional value) or rows",
            )),
        }
    }
}

/// The `population` of a job specification: exactly one of its fields.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PopulationSpec {
    /// The population size N (at least the number of records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// The sampling fraction f in (0, 1]: N = round(records / f).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_fraction: Option<f64>,
    /// One of ARX's region presets (`usa`, `uk`, `germany`, `european_union`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

impl PopulationSpec {
    /// The engine's population model; errors name `population` or its field. The size is checked
    /// against the data when the problem is built.
    pub fn parse(&self) -> Result<PopulationModel, SpecError> {
        let model = match (self.size, self.sampling_fraction, &self.region) {
            (Some(n), None, None) => PopulationModel::Size(n),
            (None, Some(f), None) => {
                if !(f > 0.0 && f <= 1.0) {
                    return Err(SpecError::new(
                        "population.sampling_fraction",
                        format!("the sampling fraction must lie in (0, 1], got {f}"),
                    ));
                }
                PopulationModel::SamplingFraction(f)
            }
            (None, None, Some(r)) => {
                PopulationModel::Region(Region::parse(r).ok_or_else(|| {
                    SpecError::new(
                        "population.region",
                        format!(
                            "unknown region '{r}'; expected one of: {}",
                            Region::NAMES.join(", ")
                        ),
                    )
                })?)
            }
            _ => {
                return Err(SpecError::new(
                    "population",
                    "give exactly one of size, sampling_fraction or region",
                ));
            }
        };
        Ok(model)
    }
}

/// The `suppressed` setting of a job specification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SuppressedSpec {
    /// Quasi-identifiers and sensitive attributes become the marker (the default).
    Mask,
    /// Suppressed records are left out.
    Remove,
    /// ARX's output: sensitive attributes are kept (unsafe, for compatibility).
    KeepSensitive,
}

deid_engine::names::enum_names! {
    SuppressedSpec {
        Mask => "mask",
        Remove => "remove",
        KeepSensitive => "keep_sensitive",
    }
    /// The name in specifications and on the command line (`mask`, `remove`, `keep_sensitive`).
    pub fn name;
    /// Parses a name produced by [`SuppressedSpec::name`].
    pub fn parse;
}

impl JobSpec {
    /// Local generalization's settings, if it is asked for.
    pub fn local_config(&self) -> Option<deid_engine::local::LocalConfig> {
        self.local.as_ref().map(LocalSpec::config)
    }

    /// How the output writes suppressed records.
    pub fn output_options(&self) -> deid_engine::output::OutputOptions {
        use deid_engine::output::{OutputOptions, SuppressedRecords};
        let d = OutputOptions::default();
        OutputOptions {
            suppressed: match self.suppressed {
                None | Some(SuppressedSpec::Mask) => SuppressedRecords::Mask,
                Some(SuppressedSpec::Remove) => SuppressedRecords::Remove,
                Some(SuppressedSpec::KeepSensitive) => SuppressedRecords::KeepSensitive,
            },
            marker: self.suppression_marker.clone().unwrap_or(d.marker),
            neutralize_formulas: self.neutralize_formulas.unwrap_or(false),
        }
    }
}

/// What a job does: the `task` of a job specification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// Search for the best transformation that satisfies the privacy models (the default).
    #[default]
    Anonymize,
    /// Evaluate the transformation given in `levels` (the service's `deid evaluate`): its
    /// report and, when it satisfies the privacy models, its CSV.
    Evaluate,
    /// Analyse the re-identification risks of the data as they are, for the
    /// quasi-identifying attributes and the population (the report's `risk` shape; the
    /// asynchronous `POST /v1/datasets/{id}/risk`, for large datasets).
    Risk,
}

deid_engine::names::enum_names! {
    Task {
        Anonymize => "anonymize",
        Evaluate => "evaluate",
        Risk => "risk",
    }
    /// The name used in specifications, job views and the store.
    pub fn as_str;
}

/// The `hierarchy_duplicates` setting of a job specification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HierarchyDuplicates {
    /// Reject the hierarchy, listing every such value with its rows (the default).
    Reject,
    /// ARX's behaviour: the last row of a value defines its generalization, every row counts
    /// for the domain shares; the report carries a warning.
    Last,
}

deid_engine::names::enum_names! {
    HierarchyDuplicates {
        Reject => "reject",
        Last => "last",
    }
    /// The name in specifications and on the command line (`reject`, `last`).
    pub fn name;
    /// Parses a name produced by [`HierarchyDuplicates::name`].
    pub fn parse;
}

impl HierarchyDuplicates {
    /// The engine's policy.
    pub fn policy(self) -> DuplicatePolicy {
        match self {
            HierarchyDuplicates::Reject => DuplicatePolicy::Reject,
            HierarchyDuplicates::Last => DuplicatePolicy::Last,
        }
    }
}

/// Defaults and limits of the front end that runs a search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchLimits {
    /// Time limit of specifications that set none.
    pub default_time_limit: std::time::Duration,
    /// Largest time limit accepted (the service's `--max-time-limit`).
    pub max_time_limit: Option<std::time::Duration>,
    /// Searches run on an engine pool of this many threads (the service): `threads` may be at
    /// most this, and any value but 1 means "the whole pool".
    pub pool_threads: Option<usize>,
}

impl SearchLimits {
    /// The command line's: 30 s by default, no maximum, own threads.
    pub const CLI: SearchLimits = SearchLimits {
        default_time_limit: DEFAULT_TIME_LIMIT,
        max_time_limit: None,
        pool_threads: None,
    };
}

impl JobSpec {
    /// The policy for values listed in several rows of a CSV hierarchy (default: reject).
    pub fn duplicate_policy(&self) -> DuplicatePolicy {
        self.hierarchy_duplicates
            .map_or(DuplicatePolicy::Reject, HierarchyDuplicates::policy)
    }

    /// The search settings: algorithm (default `auto`), time limit, check limit, seed, threads
    /// and genetic parameters, checked against `limits`. Whether they fit the problem (e.g.
    /// Flash on a large space) is checked by [`SearchConfig::resolve`] once the problem exists.
    pub fn search_config(&self, limits: &SearchLimits) -> Result<SearchConfig, SpecError> {
        if let (Some(max), Some(t)) = (limits.pool_threads, self.threads)
            && (t == 0 || t > max)
        {
            return Err(SpecError::new(
                "threads",
                format!("expected 1 to {max} threads, got {t}"),
            ));
        }
        let algorithm = match &self.algorithm {
            None => Algorithm::Auto,
            Some(name) => Algorithm::parse(name).ok_or_else(|| {
                SpecError::new(
                    "algorithm",
                    format!(
                        "unknown algorithm '{name}'; expected one of {}",
                        Algorithm::NAMES.join(", ")
                    ),
                )
            })?,
        };
        let time_limit = match &self.time_limit {
            None => limits.default_time_limit,
            Some(d) => d.parse("time_limit")?,
        };
        let defaults = SearchConfig::default();
        let config = SearchConfig {
            algorithm,
            time_limit,
            check_limit: self.check_limit,
            seed: self.seed.unwrap_or(0),
            threads: match limits.pool_threads {
                // On the engine pool: sequential, or the whole pool.
                Some(_) => self.threads.filter(|&t| t == 1),
                None => self.threads,
            },
            genetic: self.genetic.unwrap_or_default().params(),
            flash_max_space: self
                .flash_max_space
                .map_or(defaults.flash_max_space, |v| v as u128),
            candidates: self.candidates.unwrap_or(defaults.candidates),
        };
        self.check_search_ranges(&config, limits)?;
        Ok(config)
    }

    /// The ranges of the search settings `config` (built from this specification): genetic
    /// parameters, time limit (at most `limits.max_time_limit`), check limit, threads and
    /// `flash_max_space`.
    fn check_search_ranges(
        &self,
        config: &SearchConfig,
        limits: &SearchLimits,
    ) -> Result<(), SpecError> {
        config.genetic.validate().map_err(|e| e.within("genetic"))?;
        if config.time_limit.is_zero() {
            return Err(SpecError::new("time_limit", "expected a positive duration"));
        }
        if let Some(max) = limits.max_time_limit
            && config.time_limit > max
        {
            return Err(SpecError::new(
                "time_limit",
                format!(
                    "must be more than 0 and at most {} ms, got {} ms",
                    max.as_millis(),
                    config.time_limit.as_millis()
                ),
            )
            .with_details(serde_json::json!({"max_ms": max.as_millis() as u64})));
        }
        if let Some(c) = config.check_limit
            && !(1..=MAX_CHECK_LIMIT).contains(&c)
        {
            return Err(SpecError::new(
                "check_limit",
                format!("expected 1 to {MAX_CHECK_LIMIT} checks, got {c}"),
            ));
        }
        if let Some(t) = config.threads
            && !(1..=MAX_THREADS).contains(&t)
        {
            return Err(SpecError::new(
                "threads",
                format!("expected 1 to {MAX_THREADS} threads, got {t}"),
            ));
        }
        if let Some(f) = self.flash_max_space
            && u128::from(f) > FLASH_HARD_LIMIT
        {
            return Err(SpecError::new(
                "flash_max_space",
                format!("expected 0 to {FLASH_HARD_LIMIT} transformations, got {f}"),
            ));
        }
        if config.candidates > MAX_CANDIDATES {
            return Err(SpecError::new(
                "candidates",
                format!(
                    "expected 0 to {MAX_CANDIDATES} transformations, got {}",
                    config.candidates
                ),
            ));
        }
        Ok(())
    }

    /// The search algorithm a job names (`auto` by default); `None` for tasks that do not
    /// search (`evaluate`, `risk`).
    pub fn search_algorithm(&self) -> Option<&str> {
        (self.task() == Task::Anonymize).then(|| self.algorithm.as_deref().unwrap_or("auto"))
    }

    /// The job's task (default `anonymize`).
    pub fn task(&self) -> Task {
        self.task.unwrap_or_default()
    }

    /// The specification as a plan's audit block records it (its `specification_sha256`): what
    /// decides the output, written alike by every front end for the same job. Left out: where
    /// the data come from (`input`, `dataset_id`, `delimiter`), `callback_url`, `threads` and
    /// the hierarchy sources (file, inline, stored or builder — the tables have digests of
    /// their own); the task named; genetic parameters that are all defaults as none; the time
    /// limit in milliseconds; the privacy models in the text syntax.
    pub fn audited(&self) -> JobSpec {
        let mut spec = self.clone();
        spec.dataset_id = None;
        spec.input = None;
        spec.delimiter = None;
        spec.callback_url = None;
        spec.threads = None;
        spec.task = Some(self.task());
        if spec.genetic == Some(GeneticSpec::default()) {
            spec.genetic = None;
        }
        for attribute in spec.attributes.values_mut() {
            attribute.hierarchy = None;
        }
        if let Some(Ok(d)) = spec.time_limit.as_ref().map(|t| t.parse("time_limit")) {
            spec.time_limit = Some(DurationSpec::Millis(d.as_millis() as u64));
        }
        for (i, p) in spec.privacy.iter_mut().enumerate() {
            if let Ok(model) = p.parse(&super::field::privacy(i)) {
                *p = PrivacySpec::Text(model.to_string());
            }
        }
        spec
    }

    /// Takes the count column of a service dataset (`count_column` given at upload): a
    /// specification may repeat it but not name another, nor declare one for a dataset
    /// uploaded without; `subset_count_column` needs the dataset's count column.
    pub fn adopt_count_column(&mut self, dataset: Option<&str>) -> Result<(), SpecError> {
        match (dataset, self.count_column.as_deref()) {
            (Some(d), Some(s)) if d != s => Err(SpecError::new(
                "count_column",
                format!(
                    "the dataset's count column is '{d}' (given at upload), not '{s}': omit \
                     count_column"
                ),
            )),
            (None, Some(s)) => Err(SpecError::new(
                "count_column",
                format!(
                    "the dataset was not uploaded as a frequency table: upload it with \
                     ?count_column={s} (its counts are checked then)"
                ),
            )),
            (None, None) if self.subset_count_column.is_some() => Err(SpecError::new(
                "subset_count_column",
                "the dataset is no frequency table: upload it with ?count_column=…",
            )),
            _ => {
                self.count_column = dataset.map(str::to_string);
                Ok(())
            }
        }
    }

    /// The column that marks the research subset, if it is given by a column.
    pub fn research_subset_column(&self) -> Option<&str> {
        self.research_subset.as_ref()?.column.as_deref()
    }

    /// The quasi-identifying attributes (names in key order): what a risk analysis groups by.
    pub fn risk_quasi_identifiers(&self) -> Vec<String> {
        self.attributes
            .iter()
            .filter(|(_, a)| a.kind == AttributeType::QuasiIdentifying)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// The transformation `levels` gives for `problem` (one level per quasi-identifier, in the
    /// problem's order; quasi-identifiers not named: their lowest level). Errors name
    /// `levels.<column>`.
    pub fn transformation(&self, problem: &deid_engine::Problem) -> Result<Vec<u8>, SpecError> {
        let lattice = problem.lattice();
        let mut levels = lattice.min().to_vec();
        let names: Vec<&str> = problem
            .config()
            .quasi_identifiers
            .iter()
            .map(|q| q.column.as_str())
            .collect();
        for (column, &level) in self.levels.iter().flatten() {
            let field = super::field::levels(column);
            let Some(i) = names.iter().position(|n| n == column) else {
                return Err(SpecError::new(
                    field,
                    format!(
                        "'{column}' is not a generalized quasi-identifier; levels can be given \
                         for: {}",
                        names.join(", ")
                    ),
                ));
            };
            let (lo, hi) = (lattice.min()[i], lattice.max()[i]);
            let floor = problem.config().quasi_identifiers[i].data_level;
            if level < floor {
                return Err(SpecError::new(
                    field,
                    format!(
                        "expected a level from {lo} to {hi}, got {level}: the data are given at \
                         level {floor} (attributes.{column}.data_level)"
                    ),
                ));
            }
            if level < lo || level > hi {
                return Err(SpecError::new(
                    field,
                    format!("expected a level from {lo} to {hi}, got {level}"),
                ));
            }
            levels[i] = level;
        }
        Ok(levels)
    }

    /// The dataset of a service job, after refusing the fields only the command line accepts.
    pub fn service_dataset(&self) -> Result<DatasetId, SpecError> {
        for (field, present) in [
            ("input", self.input.is_some()),
            ("delimiter", self.delimiter.is_some()),
        ] {
            if present {
                return Err(SpecError::new(
                    field,
                    "only the command line accepts this field; the service uses dataset_id",
                ));
            }
        }
        self.dataset_id
            .as_deref()
            .map(DatasetId::from)
            .ok_or_else(|| SpecError::new("dataset_id", "required: the id of an uploaded dataset"))
    }

    /// Checks that every attribute names one of `columns` and that there are not more
    /// quasi-identifiers than the engine supports.
    pub fn check_columns(&self, columns: &[String]) -> Result<(), SpecError> {
        if let Some(name) = self.attributes.keys().find(|n| !columns.contains(n)) {
            return Err(SpecError::new(
                super::field::attribute(name),
                format!(
                    "the dataset has no column '{name}'; its columns are: {}",
                    columns.join(", ")
                ),
            ));
        }
        let named = [
            ("research_subset.column", self.research_subset_column()),
            ("count_column", self.count_column.as_deref()),
            ("subset_count_column", self.subset_count_column.as_deref()),
        ];
        for (field, column) in named {
            if let Some(column) = column
                && !columns.iter().any(|c| c == column)
            {
                return Err(SpecError::new(
                    field,
                    format!(
                        "the dataset has no column '{column}'; its columns are: {}",
                        columns.join(", ")
                    ),
                ));
            }
        }
        let qis = self
            .attributes
            .values()
            .filter(|a| a.kind == AttributeType::QuasiIdentifying)
            .count();
        let max = deid_engine::problem::MAX_QUASI_IDENTIFIERS;
        if qis > max {
            return Err(SpecError::new(
                "attributes",
                format!("at most {max} quasi-identifiers are supported, got {qis}"),
            ));
        }
        Ok(())
    }

    /// The columns whose hierarchy is the one stored for the dataset: `{"stored": true}`, and
    /// quasi-identifiers without a hierarchy. The service inlines them with
    /// [`JobSpec::inline_hierarchy`] when the job is created, so that the job does not change
    /// if they are replaced later.
    pub fn stored_hierarchies(&self) -> Result<Vec<String>, SpecError> {
        let mut columns = Vec::new();
        for (name, attr) in &self.attributes {
            let stored = match &attr.hierarchy {
                Some(HierarchySource::Stored { stored: true }) => true,
                Some(HierarchySource::Stored { stored: false }) => {
                    return Err(SpecError::new(
                        format!("attributes.{name}.hierarchy.stored"),
                        "must be true (or give the hierarchy inline)",
                    ));
                }
                None => {
                    attr.kind == AttributeType::QuasiIdentifying && attr.microaggregation.is_none()
                }
                Some(_) => false,
            };
            if stored {
                columns.push(name.clone());
            }
        }
        Ok(columns)
    }

    /// Replaces the hierarchy source of `column` (a stored hierarchy made inline).
    pub fn inline_hierarchy(&mut self, column: &str, source: HierarchySource) {
        if let Some(attr) = self.attributes.get_mut(column) {
            attr.hierarchy = Some(source);
        }
    }

    /// Parses a JSON document; errors name the offending field's path (`genetic.elite`) and
    /// say what was expected.
    pub fn from_json(text: &str) -> Result<JobSpec, SpecError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let spec = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." { "$".to_string() } else { path };
            SpecError::new(field, e.into_inner().to_string())
        })?;
        de.end().map_err(|e| SpecError::new("$", e.to_string()))?;
        Ok(spec)
    }

    /// Completes a differential-privacy model (`privacy[i]`) from the rest of the
    /// specification: its seed (the job's, else a fresh unpredictable one, reported), whether
    /// the search chooses the levels (not when `levels` are given); refuses local
    /// generalization, which would release data-dependent steps the guarantee does not cover.
    fn differential_privacy(
        &self,
        i: usize,
        dp: &mut deid_engine::privacy::DpModel,
    ) -> Result<(), SpecError> {
        if self.local.is_some() {
            return Err(SpecError::new(
                "local",
                format!(
                    "differential-privacy (privacy[{i}]) cannot be combined with local \
                     generalization: expected a global transformation (leave out \"local\")"
                ),
            ));
        }
        dp.seed = self.seed.unwrap_or_else(fresh_seed);
        dp.data_dependent = self.levels.is_none();
        Ok(())
    }

    /// Builds the engine configuration. `load` resolves each hierarchy source for a column
    /// (files for the CLI, stored hierarchies for the API); quasi-identifiers without a source
    /// call `load` with `None`.
    pub fn problem_config(
        &self,
        mut load: impl FnMut(&str, Option<&HierarchySource>) -> Result<Hierarchy, SpecError>,
    ) -> Result<ProblemConfig, SpecError> {
        let mut config = ProblemConfig::default();
        for (name, attr) in &self.attributes {
            let field = super::field::attribute(name);
            attr.check_role_fields(&field)?;
            match (attr.kind, &attr.microaggregation) {
                (AttributeType::QuasiIdentifying, Some(m)) => {
                    if attr.hierarchy.is_some()
                        || attr.min_level.is_some()
                        || attr.max_level.is_some()
                    {
                        return Err(SpecError::new(
                            format!("{field}.microaggregation"),
                            "a microaggregated attribute has no hierarchy and no levels",
                        ));
                    }
                    config
                        .microaggregated
                        .push(m.parse(name, &format!("{field}.microaggregation"))?);
                }
                (AttributeType::QuasiIdentifying, None) => {
                    let hierarchy = load(name, attr.hierarchy.as_ref())?;
                    config.quasi_identifiers.push(QuasiIdentifier {
                        column: name.clone(),
                        hierarchy,
                        min_level: attr.min_level,
                        max_level: attr.max_level,
                        data_level: attr.data_level.unwrap_or(0),
                        weight: attr.weight.unwrap_or(0.5),
                    });
                }
                (AttributeType::Sensitive, _) => {
                    let hierarchy = match &attr.hierarchy {
                        Some(src) => Some(load(name, Some(src))?),
                        None => None,
                    };
                    config.sensitive.push(SensitiveAttribute {
                        column: name.clone(),
                        hierarchy,
                    });
                }
                (AttributeType::Identifying, _) => config.identifying.push(name.clone()),
                (AttributeType::Insensitive, _) => {}
            }
        }
        for (i, p) in self.privacy.iter().enumerate() {
            let mut model = p.parse(&super::field::privacy(i))?;
            if let PrivacyModel::DifferentialPrivacy(dp) = &mut model {
                self.differential_privacy(i, dp)?;
            }
            config.privacy.push(model);
        }
        config.suppression_limit = self.suppression_limit.unwrap_or(0.0);
        config.quality = self.quality.clone().unwrap_or_default().parse()?;
        config.population = self.population.as_ref().map(|p| p.parse()).transpose()?;
        config.research_subset = self
            .research_subset
            .as_ref()
            .map(|r| r.parse())
            .transpose()?;
        config.count_column = self.count_column.clone();
        config.subset_count_column = self.subset_count_column.clone();
        Ok(config)
    }
}

/// An unpredictable seed below 2⁵³ (exact in every JSON reader; from the standard library's
/// randomly keyed hasher): differential privacy's sample must not be guessable from a default
/// seed.
fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish() & ((1 << 53) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let text = r#"{
          "attributes": {
            "age": {"type": "quasi_identifying", "hierarchy": {"file": "age.csv"}, "max_level": 3},
            "disease": {"type": "sensitive"},
            "name": {"type": "identifying"}
          },
          "privacy": ["k-anonymity(k=5)", {"model": "distinct-l-diversity", "attribute": "disease", "l": 2}],
          "suppression_limit": 0.05,
          "quality": {"model": "loss", "gs_factor": 0.5}
        }"#;
        let spec = JobSpec::from_json(text).unwrap();
        let mut asked = Vec::new();
        let cfg = spec
            .problem_config(|col, src| {
                asked.push((col.to_string(), src.cloned()));
                Hierarchy::from_rows(vec![vec!["1".into(), "*".into()]], col)
                    .map_err(SpecError::from)
            })
            .unwrap();
        assert_eq!(asked.len(), 1);
        assert_eq!(
            asked[0].1,
            Some(HierarchySource::File {
                file: "age.csv".into(),
                delimiter: None
            })
        );
        assert_eq!(cfg.quasi_identifiers[0].max_level, Some(3));
        assert_eq!(cfg.identifying, vec!["name".to_string()]);
        assert_eq!(cfg.privacy.len(), 2);
        assert_eq!(cfg.privacy[0], PrivacyModel::KAnonymity { k: 5 });
        assert_eq!(cfg.suppression_limit, 0.05);
    }

    #[test]
    fn population_models_are_validated_naming_the_field() {
        let parse = |json: &str| {
            JobSpec::from_json(&format!(r#"{{"population": {json}}}"#))
                .and_then(|s| s.population.unwrap().parse())
        };
        assert_eq!(parse(r#"{"size": 1000}"#), Ok(PopulationModel::Size(1000)));
        assert_eq!(
            parse(r#"{"sampling_fraction": 0.01}"#),
            Ok(PopulationModel::SamplingFraction(0.01))
        );
        assert_eq!(
            parse(r#"{"region": "USA"}"#),
            Ok(PopulationModel::Region(Region::Usa))
        );
        for (json, field) in [
            (
                r#"{"sampling_fraction": 0}"#,
                "population.sampling_fraction",
            ),
            (
                r#"{"sampling_fraction": 1.5}"#,
                "population.sampling_fraction",
            ),
            (r#"{"region": "atlantis"}"#, "population.region"),
            (r#"{"size": 10, "region": "usa"}"#, "population"),
            (r#"{}"#, "population"),
            (r#"{"size": -1}"#, "population.size"),
            (r#"{"people": 10}"#, "population.people"),
        ] {
            let e = parse(json).unwrap_err();
            assert_eq!(e.field, field, "{json}: {e}");
        }
        // The size is checked against the data when the problem is built.
        let spec = JobSpec::from_json(
            r#"{"attributes": {"a": {"type": "quasi_identifying", "hierarchy": {"csv": "x;*\ny;*"}}},
                "privacy": ["k-anonymity(k=1)"], "population": {"size": 2}}"#,
        )
        .unwrap();
        let table = deid_engine::Table::from_rows(
            &["a"],
            &[
                vec!["x".to_string()],
                vec!["y".to_string()],
                vec!["x".to_string()],
            ],
        )
        .unwrap();
        let e = super::super::problem::build_problem(
            &spec,
            table,
            super::super::hierarchy::Frontend::Service,
        )
        .unwrap_err();
        assert_eq!(e.field, "population.size");
        assert!(e.message.contains("at least as large"), "{e}");
    }

    #[test]
    fn unknown_fields_and_models_are_named() {
        let err = JobSpec::from_json(r#"{"privacy": [], "supression_limit": 1}"#).unwrap_err();
        assert!(err.message.contains("supression_limit"), "{err}");
        let spec = JobSpec::from_json(r#"{"quality": "lost"}"#).unwrap();
        let err = spec.problem_config(|_, _| unreachable!()).unwrap_err();
        assert_eq!(err.field, "quality.model");
        assert!(err.message.contains("'lost'") && err.message.contains("loss"));
    }

    #[test]
    fn search_settings() {
        let spec = JobSpec::from_json(
            r#"{"algorithm": "genetic", "time_limit": "2s", "seed": 7, "genetic": {"iterations": 9, "stop_after_iterations": true}}"#,
        )
        .unwrap();
        let c = spec.search_config(&SearchLimits::CLI).unwrap();
        assert_eq!(c.algorithm, Algorithm::Genetic);
        assert_eq!(c.time_limit, std::time::Duration::from_secs(2));
        assert_eq!(c.genetic.iterations, 9);
        assert!(c.genetic.stop_after_iterations);
        assert!(!GeneticParams::default().stop_after_iterations);
        assert_eq!(
            c.genetic.subpopulation_size,
            GeneticParams::default().subpopulation_size
        );
        let err = JobSpec::from_json(r#"{"algorithm": "fast"}"#)
            .unwrap()
            .search_config(&SearchLimits::CLI)
            .unwrap_err();
        assert_eq!(err.field, "algorithm");
        assert!(err.message.contains("lightning"));
        let err = JobSpec::from_json(r#"{"genetic": {"elite": 1}}"#).unwrap_err();
        assert!(err.message.contains("elite"), "{err}");
        let err = JobSpec::from_json(r#"{"genetic": {"elite_fraction": 7.0}}"#)
            .unwrap()
            .search_config(&SearchLimits::CLI)
            .unwrap_err();
        assert!(err.field.starts_with("genetic"), "{err}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s"), Ok(std::time::Duration::from_secs(5)));
        assert_eq!(
            parse_duration("250ms"),
            Ok(std::time::Duration::from_millis(250))
        );
        assert_eq!(
            parse_duration("2m"),
            Ok(std::time::Duration::from_secs(120))
        );
        assert!(parse_duration("soon").unwrap_err().contains("'soon'"));
        let err = DurationSpec::Text("x".into())
            .parse("time_limit")
            .unwrap_err();
        assert_eq!(err.field, "time_limit");
    }

    #[test]
    fn command_line_search_settings_are_bounded() {
        // The command line has no engine pool: `threads` is bounded by the engine's maximum.
        let err = JobSpec::from_json(r#"{"threads": 1000000000}"#)
            .unwrap()
            .search_config(&SearchLimits::CLI)
            .unwrap_err();
        assert_eq!(err.field, "threads");
        assert!(
            err.message.contains("expected 1 to 1024"),
            "{}",
            err.message
        );
        let ok = JobSpec::from_json(
            r#"{"flash_max_space": 100000000, "check_limit": 1000000000000, "genetic": {"subpopulation_size": 10000}}"#,
        )
        .unwrap();
        assert!(ok.search_config(&SearchLimits::CLI).is_ok());
    }

    #[test]
    fn service_search_settings() {
        let limits = SearchLimits {
            default_time_limit: std::time::Duration::from_secs(7),
            max_time_limit: Some(std::time::Duration::from_secs(60)),
            pool_threads: Some(2),
        };
        let spec =
            JobSpec::from_json(r#"{"algorithm": "genetic", "seed": 3, "threads": 1}"#).unwrap();
        let c = spec.search_config(&limits).unwrap();
        assert_eq!(c.algorithm, Algorithm::Genetic);
        assert_eq!(c.time_limit, std::time::Duration::from_secs(7));
        assert_eq!((c.seed, c.threads), (3, Some(1)));
        // Any other thread count means the whole engine pool.
        let spec = JobSpec::from_json(r#"{"threads": 2}"#).unwrap();
        assert_eq!(spec.search_config(&limits).unwrap().threads, None);
        for (text, field) in [
            (r#"{"threads": 3}"#, "threads"),
            (r#"{"threads": 0}"#, "threads"),
            (r#"{"algorithm": "magic"}"#, "algorithm"),
            (r#"{"time_limit": "2m"}"#, "time_limit"),
            (r#"{"time_limit": 0}"#, "time_limit"),
            (r#"{"check_limit": 1000000000001}"#, "check_limit"),
            (r#"{"flash_max_space": 100000001}"#, "flash_max_space"),
            (r#"{"candidates": 101}"#, "candidates"),
            (
                r#"{"genetic": {"subpopulation_size": 1000000000}}"#,
                "genetic.subpopulation_size",
            ),
            (
                r#"{"genetic": {"iterations": 1000000000}}"#,
                "genetic.iterations",
            ),
            (
                r#"{"genetic": {"immigration_interval": 1000000000}}"#,
                "genetic.immigration_interval",
            ),
        ] {
            let err = JobSpec::from_json(text)
                .unwrap()
                .search_config(&limits)
                .unwrap_err();
            assert_eq!(err.field, field, "{text}");
        }
        let err = JobSpec::from_json(r#"{"time_limit": "2m"}"#)
            .unwrap()
            .search_config(&limits)
            .unwrap_err();
        assert_eq!(err.details, Some(serde_json::json!({"max_ms": 60000})));
    }

    #[test]
    fn json_errors_name_the_path() {
        let err = JobSpec::from_json(r#"{"genetic": {"elite_fraction": "x"}}"#).unwrap_err();
        assert_eq!(err.field, "genetic.elite_fraction");
        let err = JobSpec::from_json(r#"{"attributes": {"a": {"type": "quasi"}}}"#).unwrap_err();
        assert_eq!(err.field, "attributes.a.type");
        let err = JobSpec::from_json(r#"{"seed": 1} x"#).unwrap_err();
        assert_eq!(err.field, "$");
    }

    /// The names tables of the enums that serde also names agree with serde: the name of
    /// every value is its JSON string, and parses back.
    #[test]
    fn names_tables_agree_with_serde() {
        fn agree<T>(all: &[T], name: fn(T) -> &'static str)
        where
            T: Copy + std::fmt::Debug + PartialEq + Serialize + serde::de::DeserializeOwned,
        {
            for &value in all {
                let json = format!("\"{}\"", name(value));
                assert_eq!(serde_json::to_string(&value).unwrap(), json);
                assert_eq!(serde_json::from_str::<T>(&json).unwrap(), value);
            }
        }
        agree(&Task::ALL, Task::as_str);
        agree(&SuppressedSpec::ALL, SuppressedSpec::name);
        agree(&HierarchyDuplicates::ALL, HierarchyDuplicates::name);
        for value in SuppressedSpec::ALL {
            assert_eq!(SuppressedSpec::parse(value.name()), Some(value));
        }
        for value in HierarchyDuplicates::ALL {
            assert_eq!(HierarchyDuplicates::parse(value.name()), Some(value));
        }
        assert_eq!(SuppressedSpec::parse("keep-sensitive"), None);
    }

    /// The messages that list the accepted names, word for word.
    #[test]
    fn unknown_names_are_refused_listing_the_names() {
        let micro = |function: &str, missing: Option<&str>| {
            let spec = MicroaggregationSpec {
                function: function.into(),
                missing: missing.map(String::from),
                date_format: None,
            };
            spec.parse("age", "attributes.age.microaggregation")
                .unwrap_err()
        };
        let e = micro("average", None);
        assert_eq!(e.field, "attributes.age.microaggregation.function");
        assert_eq!(
            e.message,
            "unknown function 'average'; expected one of arithmetic_mean, geometric_mean, median, \
             mode, interval, set"
        );
        let e = micro("mode", Some("drop"));
        assert_eq!(e.field, "attributes.age.microaggregation.missing");
        assert_eq!(e.message, "unknown value 'drop'; expected ignore or keep");

        let quality = |model: &str, aggregate: Option<&str>| {
            QualitySpec::Object {
                model: model.into(),
                gs_factor: None,
                aggregate: aggregate.map(String::from),
            }
            .parse()
            .unwrap_err()
        };
        let e = quality("rank", None);
        assert_eq!(e.field, "quality.model");
        assert_eq!(
            e.message,
            "unknown quality model 'rank'; expected one of loss, aecs, discernibility, \
             discernibility-star, precision, height, entropy, normalized-entropy, kl-divergence, \
             ambiguity"
        );
        let e = quality("loss", Some("rank"));
        assert_eq!(e.field, "quality.aggregate");
        assert_eq!(
            e.message,
            "unknown aggregate 'rank'; expected sum, maximum, arithmetic_mean or geometric_mean"
        );

        let e = PopulationSpec {
            size: None,
            sampling_fraction: None,
            region: Some("atlantis".into()),
        }
        .parse()
        .unwrap_err();
        assert_eq!(e.field, "population.region");
        assert_eq!(
            e.message,
            "unknown region 'atlantis'; expected one of: africa, australia, europe, \
             north_america, south_america, european_union, brazil, canada, china, france, \
             germany, india, uk, usa"
        );
        // The spellings beside the names still parse.
        for region in ["Brasil", "north-america", "European Union"] {
            let spec = PopulationSpec {
                size: None,
                sampling_fraction: None,
                region: Some(region.into()),
            };
            assert!(spec.parse().is_ok(), "{region}");
        }

        let e = JobSpec::from_json(r#"{"algorithm": "igreedy"}"#)
            .unwrap()
            .search_config(&SearchLimits::CLI)
            .unwrap_err();
        assert_eq!(e.field, "algorithm");
        assert_eq!(
            e.message,
            "unknown algorithm 'igreedy'; expected one of auto, flash, lightning, top-down, \
             genetic, bfs, datafly, improved-greedy, exhaustive"
        );
    }
}
