//! The job specification: one JSON schema for `deid evaluate --config`, `deid anonymize --config`
//! and `POST /v1/jobs`. It names the attributes and their roles, hierarchies (a CSV file, inline
//! CSV, a stored hierarchy or a builder specification), privacy models, suppression limit, quality
//! model and search parameters; [`JobSpec::problem_config`] turns it into the engine's
//! [`ProblemConfig`].
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

use deid_engine::config::SensitiveAttribute;
use deid_engine::privacy::PrivacyModel;
use deid_engine::quality::{Aggregate, QualityConfig, QualityModel};
use deid_engine::{
    Algorithm, EngineError, GeneticParams, Hierarchy, ProblemConfig, QuasiIdentifier, SearchConfig,
};

/// A specification error: which field, what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid value for '{field}': {message}")]
pub struct SpecError {
    /// Dotted path of the offending field, e.g. `attributes.age.hierarchy`.
    pub field: String,
    /// What is wrong and what was expected.
    pub message: String,
}

impl SpecError {
    /// Creates an error for `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        SpecError {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl From<EngineError> for SpecError {
    fn from(e: EngineError) -> Self {
        match e.config_error() {
            Some((field, message)) => SpecError::new(field, message),
            None => SpecError::new("data", e.to_string()),
        }
    }
}

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
    /// Weight in the quality model (default 0.5; only ratios matter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
}

/// A privacy model: compact text (`"k-anonymity(k=5)"`) or an object (`{"model": "k-anonymity", "k": 5}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
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
        model.map_err(|e| match e.within(field) {
            EngineError::InvalidConfig { field, message } => SpecError::new(field, message),
            other => SpecError::new(field, other.to_string()),
        })
    }
}

/// Parses a builder specification (`{"type": "interval", …}`) with an error naming `field`.
pub fn parse_builder(
    value: &serde_json::Value,
    field: &str,
) -> Result<deid_engine::HierarchySpec, SpecError> {
    serde_json::from_value(value.clone()).map_err(|e| {
        SpecError::new(
            field,
            format!(
                "invalid hierarchy specification: {e}; expected an object with \"type\": interval, order, masking, date or suppression"
            ),
        )
    })
}

/// Picks the most frequent of `;`, `,`, tab and `|` in the first line (`;`, ARX's default, on
/// ties), for hierarchy tables whose delimiter was not given.
pub fn sniff_delimiter(text: &[u8]) -> u8 {
    let first = text.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let mut best = (b';', first.iter().filter(|&&b| b == b';').count());
    for d in [b',', b'\t', b'|'] {
        let n = first.iter().filter(|&&b| b == d).count();
        if n > best.1 {
            best = (d, n);
        }
    }
    best.0
}

/// A delimiter as a byte, or an error naming `field` if it is not one ASCII character.
pub fn delimiter_byte(c: char, field: &str) -> Result<u8, SpecError> {
    u8::try_from(c)
        .ok()
        .filter(|b| b.is_ascii())
        .ok_or_else(|| {
            SpecError::new(
                field,
                format!("the delimiter must be one ASCII character, got '{c}'"),
            )
        })
}

/// Parses an ARX hierarchy table given as text (delimiter sniffed unless given).
pub fn hierarchy_from_csv(
    text: &[u8],
    delimiter: Option<char>,
    column: &str,
    field: &str,
) -> Result<Hierarchy, SpecError> {
    let d = match delimiter {
        Some(c) => delimiter_byte(c, &format!("{field}.delimiter"))?,
        None => sniff_delimiter(text),
    };
    Hierarchy::read_csv(text, d, column).map_err(|e| SpecError::new(field, e.to_string()))
}

/// Builds a hierarchy from a builder specification for `column` of `table`. Without a table the
/// specification is only validated and a one-level placeholder is returned.
pub fn hierarchy_from_builder(
    value: &serde_json::Value,
    table: Option<&deid_engine::Table>,
    column: &str,
    field: &str,
) -> Result<Hierarchy, SpecError> {
    let spec = parse_builder(value, field)?;
    let context = format!("hierarchies.{column}");
    let on_field = |e: EngineError| SpecError::new(field, e.within(&context).to_string());
    spec.validate().map_err(on_field)?;
    match table.and_then(|t| t.column_index(column).map(|i| t.column(i))) {
        Some(col) => spec.build(col).map_err(on_field),
        None => Hierarchy::from_rows(vec![vec![String::new()]], column).map_err(on_field),
    }
}

/// The quality model: a name (`"loss"`) or an object with parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
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
                    QualityModel::ALL.map(|m| m.name()).join(", ")
                ),
            )
        })?;
        let aggregate = match agg {
            None => None,
            Some("sum") => Some(Aggregate::Sum),
            Some("maximum") => Some(Aggregate::Maximum),
            Some("arithmetic_mean") => Some(Aggregate::ArithmeticMean),
            Some("geometric_mean") => Some(Aggregate::GeometricMean),
            Some(other) => {
                return Err(SpecError::new(
                    "quality.aggregate",
                    format!(
                        "unknown aggregate '{other}'; expected sum, maximum, arithmetic_mean or geometric_mean"
                    ),
                ));
            }
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
#[serde(untagged)]
pub enum DurationSpec {
    /// Milliseconds.
    Millis(u64),
    /// Text with a unit.
    Text(String),
}

impl DurationSpec {
    /// The duration; `field` names the setting in errors.
    pub fn parse(&self, field: &str) -> Result<std::time::Duration, SpecError> {
        match self {
            DurationSpec::Millis(ms) => Ok(std::time::Duration::from_millis(*ms)),
            DurationSpec::Text(t) => parse_duration(t).ok_or_else(|| {
                SpecError::new(
                    field,
                    format!("cannot read '{t}' as a duration; expected e.g. 500ms, 5s, 2m"),
                )
            }),
        }
    }
}

/// Parses `500ms`, `5s`, `1.5s`, `2m`, `1h` or a plain number of seconds.
pub fn parse_duration(text: &str) -> Option<std::time::Duration> {
    let t = text.trim();
    let (num, factor) = if let Some(v) = t.strip_suffix("ms") {
        (v, 0.001)
    } else if let Some(v) = t.strip_suffix('s') {
        (v, 1.0)
    } else if let Some(v) = t.strip_suffix('m') {
        (v, 60.0)
    } else if let Some(v) = t.strip_suffix('h') {
        (v, 3600.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| std::time::Duration::from_secs_f64(v * factor))
}

/// Parameters of the genetic algorithm; unset fields keep the defaults (Table 2 of the paper).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeneticSpec {
    /// Generations: the stop after them if `stop_after_iterations`, else the stagnation window
    /// before the population is re-seeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    /// Stop after `iterations` generations instead of using the whole time limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_after_iterations: Option<bool>,
    /// Individuals per subpopulation.
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
    /// Generations between migrations.
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
    /// Input CSV file (CLI only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<PathBuf>,
    /// Input field delimiter (CLI only; default `,`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delimiter: Option<char>,
    /// Column name → settings. Columns not named are insensitive.
    #[serde(default)]
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
    /// Optional limit on the number of checks.
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
    /// Largest solution space for which `auto` picks Flash (default 100,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flash_max_space: Option<u64>,
    /// Transformation to evaluate (`deid evaluate`): column → level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<BTreeMap<String, u8>>,
    /// Risk threshold for the "records at risk" statistic of the report (default 0.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_threshold: Option<f64>,
    /// URL POSTed when a job ends (API only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
}

impl JobSpec {
    /// The search settings: algorithm (default `auto`), time limit (default 30 s), check limit,
    /// seed, threads, genetic parameters. Ranges are validated by the engine when the search
    /// starts ([`SearchConfig::resolve`]).
    pub fn search_config(&self) -> Result<SearchConfig, SpecError> {
        let algorithm = match &self.algorithm {
            None => Algorithm::Auto,
            Some(name) => Algorithm::parse(name).ok_or_else(|| {
                SpecError::new(
                    "algorithm",
                    format!(
                        "unknown algorithm '{name}'; expected one of {}",
                        Algorithm::ALL.map(|a| a.name()).join(", ")
                    ),
                )
            })?,
        };
        let time_limit = match &self.time_limit {
            None => DEFAULT_TIME_LIMIT,
            Some(d) => d.parse("time_limit")?,
        };
        let defaults = SearchConfig::default();
        let config = SearchConfig {
            algorithm,
            time_limit,
            check_limit: self.check_limit,
            seed: self.seed.unwrap_or(0),
            threads: self.threads,
            genetic: self.genetic.unwrap_or_default().params(),
            flash_max_space: self
                .flash_max_space
                .map_or(defaults.flash_max_space, |v| v as u128),
        };
        config.genetic.validate().map_err(|e| e.within("genetic"))?;
        if config.time_limit.is_zero() {
            return Err(SpecError::new("time_limit", "expected a positive duration"));
        }
        if config.check_limit == Some(0) {
            return Err(SpecError::new("check_limit", "expected at least 1"));
        }
        if config.threads == Some(0) {
            return Err(SpecError::new("threads", "expected at least 1"));
        }
        Ok(config)
    }

    /// Parses a JSON document, naming the offending field on errors.
    pub fn from_json(text: &str) -> Result<JobSpec, SpecError> {
        serde_json::from_str(text).map_err(|e| SpecError::new("$", e.to_string()))
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
            let field = format!("attributes.{name}");
            if attr.kind != AttributeType::QuasiIdentifying
                && (attr.min_level.is_some() || attr.max_level.is_some() || attr.weight.is_some())
            {
                return Err(SpecError::new(
                    field,
                    "min_level, max_level and weight apply to quasi-identifiers only",
                ));
            }
            match attr.kind {
                AttributeType::QuasiIdentifying => {
                    let hierarchy = load(name, attr.hierarchy.as_ref())?;
                    config.quasi_identifiers.push(QuasiIdentifier {
                        column: name.clone(),
                        hierarchy,
                        min_level: attr.min_level,
                        max_level: attr.max_level,
                        weight: attr.weight.unwrap_or(0.5),
                    });
                }
                AttributeType::Sensitive => {
                    let hierarchy = match &attr.hierarchy {
                        Some(src) => Some(load(name, Some(src))?),
                        None => None,
                    };
                    config.sensitive.push(SensitiveAttribute {
                        column: name.clone(),
                        hierarchy,
                    });
                }
                AttributeType::Identifying => config.identifying.push(name.clone()),
                AttributeType::Insensitive => {}
            }
        }
        for (i, p) in self.privacy.iter().enumerate() {
            config.privacy.push(p.parse(&format!("privacy[{i}]"))?);
        }
        config.suppression_limit = self.suppression_limit.unwrap_or(0.0);
        config.quality = self.quality.clone().unwrap_or_default().parse()?;
        Ok(config)
    }
}

/// Orders the quasi-identifiers (lattice dimensions) and sensitive attributes by the table's
/// column order, so that results do not depend on the order of keys in the specification.
pub fn order_by_table(config: &mut ProblemConfig, table: &deid_engine::Table) {
    config
        .quasi_identifiers
        .sort_by_key(|q| table.column_index(&q.column));
    config
        .sensitive
        .sort_by_key(|s| table.column_index(&s.column));
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
        let c = spec.search_config().unwrap();
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
            .search_config()
            .unwrap_err();
        assert_eq!(err.field, "algorithm");
        assert!(err.message.contains("lightning"));
        let err = JobSpec::from_json(r#"{"genetic": {"elite": 1}}"#).unwrap_err();
        assert!(err.message.contains("elite"), "{err}");
        let err = JobSpec::from_json(r#"{"genetic": {"elite_fraction": 7.0}}"#)
            .unwrap()
            .search_config()
            .unwrap_err();
        assert!(err.field.starts_with("genetic"), "{err}");
    }

    #[test]
    fn delimiters_are_sniffed_with_semicolon_on_ties() {
        assert_eq!(sniff_delimiter(b"a;b,c\n"), b';');
        assert_eq!(sniff_delimiter(b"a,b,c;d\n"), b',');
        assert_eq!(sniff_delimiter(b"single\n"), b';');
        assert_eq!(sniff_delimiter(b"a\tb\n"), b'\t');
        let err = delimiter_byte('é', "delimiter").unwrap_err();
        assert!(err.message.contains("'é'"));
    }

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("5s"),
            Some(std::time::Duration::from_secs(5))
        );
        assert_eq!(
            parse_duration("250ms"),
            Some(std::time::Duration::from_millis(250))
        );
        assert_eq!(
            parse_duration("2m"),
            Some(std::time::Duration::from_secs(120))
        );
        assert_eq!(parse_duration("soon"), None);
        let err = DurationSpec::Text("x".into())
            .parse("time_limit")
            .unwrap_err();
        assert_eq!(err.field, "time_limit");
    }
}
