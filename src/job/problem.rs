//! From a job specification to the engine's [`Problem`] — written once, for the command line,
//! the worker, and the service's validation before a job is queued.
//!
//! - [`build_problem`]: roles, hierarchies (resolved for the [`Frontend`]), privacy and quality
//!   models, in the table's column order, then [`Problem::new`].
//! - [`validate_generalization`]: what `POST /v1/jobs` checks of a generalizing task before
//!   queueing, without reading the data: the models against the dataset's rows with the
//!   engine's own checks, and the whole problem built on a small table made of the dataset's
//!   stored distinct values ([`DatasetFacts`]), which checks hierarchies (coverage of every
//!   value), level bounds, privacy and quality models; each task adds its own checks
//!   ([`super::task::validate`]).
//! - [`engine_error`]: an engine error with what the front end offers to fix it.

use deid_engine::config::ResearchSubset;
use deid_engine::{EngineError, PrivacyModel, Problem, ProblemConfig, Table};

use super::error::SpecError;
use super::hierarchy::{Frontend, resolve};
use super::spec::JobSpec;

/// Builds the problem `spec` describes on `table`.
pub fn build_problem(
    spec: &JobSpec,
    table: Table,
    frontend: Frontend<'_>,
) -> Result<Problem, SpecError> {
    build_problem_with(spec, table, frontend, |_| {})
}

/// [`build_problem`], showing `inspect` the resolved configuration (hierarchy tables included,
/// which the problem frees once encoded) before the problem is built.
pub fn build_problem_with(
    spec: &JobSpec,
    table: Table,
    frontend: Frontend<'_>,
    inspect: impl FnOnce(&ProblemConfig),
) -> Result<Problem, SpecError> {
    let duplicates = spec.duplicate_policy();
    let config = spec.problem_config(|c, s| resolve(frontend, Some(&table), c, s, duplicates))?;
    let config = in_table_order(config, &table);
    inspect(&config);
    let problem = Problem::new(table, config).map_err(|e| engine_error(frontend, e))?;
    spec.output_options()
        .validate(&problem)
        .map_err(SpecError::from)?;
    if let Some(local) = spec.local_config() {
        local.validate(&problem).map_err(SpecError::from)?;
    }
    Ok(problem)
}

/// An engine error as a specification error, with what `frontend` offers to fix it: a missing
/// population model or research subset names the flags of the command line or the fields of
/// the JSON specification.
pub fn engine_error(frontend: Frontend<'_>, e: EngineError) -> SpecError {
    let hint = match (&e, frontend) {
        (EngineError::NeedsPopulation { .. }, Frontend::Cli { .. }) => {
            "give --population-size N, --sampling-fraction F or --population-region REGION \
             (or \"population\" in --config)"
        }
        (EngineError::NeedsPopulation { .. }, Frontend::Service) => {
            "give \"population\": {\"size\": N}, {\"sampling_fraction\": f} or \
             {\"region\": \"usa\"}"
        }
        (EngineError::NeedsResearchSubset { .. }, Frontend::Cli { .. }) => {
            "give --research-subset-column COLUMN or --research-subset-rows FILE \
             (or \"research_subset\" in --config)"
        }
        (EngineError::NeedsResearchSubset { .. }, Frontend::Service) => {
            "give \"research_subset\": {\"column\": \"…\"} or {\"rows\": […]}"
        }
        _ => return SpecError::from(e),
    };
    let alternative = match &e {
        EngineError::NeedsResearchSubset { model, .. } if model.starts_with("k-map") => {
            "; or give alpha and a population model for the estimated k-map"
        }
        _ => "",
    };
    let mut error = SpecError::from(e);
    error.message = format!("{}: {hint}{alternative}", error.message);
    error
}

/// `config` with the quasi-identifiers (lattice dimensions) and sensitive attributes in the
/// table's column order, so that results do not depend on the order of keys in the
/// specification.
fn in_table_order(mut config: ProblemConfig, table: &Table) -> ProblemConfig {
    config
        .quasi_identifiers
        .sort_by_key(|q| table.column_index(&q.column));
    config
        .sensitive
        .sort_by_key(|s| table.column_index(&s.column));
    config
}

/// Replaces differential privacy by k-anonymity with k = 1: it was checked against the
/// dataset's records; its k would not fit the small table of distinct values, which is built
/// for the rest of the checks.
fn without_dp(config: &mut ProblemConfig) {
    for model in &mut config.privacy {
        if matches!(model, PrivacyModel::DifferentialPrivacy(_)) {
            *model = PrivacyModel::KAnonymity { k: 1 };
        }
    }
}

/// ℓ-diversity needs ℓ distinct values of its attribute in every class: a dataset with fewer
/// (counted from the stored distinct values) cannot satisfy it, so the job is refused here
/// instead of failing after its search.
fn check_distinct_values(
    models: &[(usize, PrivacyModel)],
    facts: &DatasetFacts,
) -> Result<(), SpecError> {
    for (i, model) in models {
        let (Some(attribute), Some(l)) = (model.attribute(), model.min_class_size()) else {
            continue;
        };
        let distinct = facts
            .columns
            .iter()
            .position(|c| c == attribute)
            .and_then(|c| facts.values[c].as_ref())
            .map(Vec::len);
        if let Some(distinct) = distinct
            && l as usize > distinct
        {
            return Err(SpecError::new(
                format!("privacy[{i}].l"),
                format!(
                    "{} needs at least {l} distinct values of '{attribute}' in every class but \
                     the dataset has only {distinct}",
                    model.name()
                ),
            ));
        }
    }
    Ok(())
}

/// A search configuration that does not fit the problem, with the field of the specification
/// (the engine's paths are relative to the search configuration, whose fields are top-level
/// fields of the specification).
pub fn search_error(e: EngineError) -> SpecError {
    match e.config_error() {
        Some((field, message)) => SpecError::new(field, message),
        None => SpecError::new("algorithm", e.to_string()),
    }
}

/// What the service knows about a dataset without reading it.
#[derive(Debug, Clone, Default)]
pub struct DatasetFacts {
    /// Column names in file order.
    pub columns: Vec<String>,
    /// Records: the data rows, or the sum of the counts of a frequency table.
    pub rows: usize,
    /// Per column: its distinct values if they were kept at upload and the specification names
    /// the column, else `None`.
    pub values: Vec<Option<Vec<String>>>,
}

/// What the service checks of a generalizing task (`anonymize`, `evaluate`) before queueing,
/// without reading the data (see the module documentation; stored hierarchies are inlined).
/// Returns the problem built on the dataset's stored distinct values, for the task's own
/// checks, or `None` when the values of some named column were not kept at upload (too many):
/// those columns are only partly checked here, the rest when the job runs.
pub fn validate_generalization(
    spec: &JobSpec,
    facts: &DatasetFacts,
) -> Result<Option<Problem>, SpecError> {
    check_research_subset(spec, facts)?;
    // Models that do not parse are reported by `problem_config` below.
    let models: Vec<(usize, PrivacyModel)> = (spec.privacy.iter().enumerate())
        .filter_map(|(i, p)| p.parse(&super::field::privacy(i)).ok().map(|m| (i, m)))
        .collect();
    let table = distinct_value_table(facts, &models)?;
    let complete = facts
        .columns
        .iter()
        .zip(&facts.values)
        .all(|(c, v)| v.is_some() || !spec.attributes.contains_key(c));
    // Builder specifications of columns without kept values are only checked.
    let known: Vec<bool> = facts.values.iter().map(Option::is_some).collect();
    let duplicates = spec.duplicate_policy();
    let config = spec.problem_config(|c, s| {
        let kept = table.column_index(c).is_some_and(|i| known[i]);
        resolve(Frontend::Service, kept.then_some(&table), c, s, duplicates)
    })?;
    // The models against the dataset's rows (the table above is smaller), with the engine's
    // own checks: a population or research subset where a model needs one, minimal class sizes.
    let population = config
        .population
        .map(|m| m.population_size(facts.rows))
        .transpose()
        .map_err(|e| SpecError::from(e.within("population")))?;
    deid_engine::problem::check_dp_columns(facts.columns.iter().map(String::as_str), &config)
        .map_err(|e| engine_error(Frontend::Service, e))?;
    let has_subset = config.research_subset.is_some() || config.subset_count_column.is_some();
    config
        .validate_models(facts.rows, population, has_subset)
        .map_err(|e| engine_error(Frontend::Service, e))?;
    check_distinct_values(&models, facts)?;
    check_level_names(spec, &config)?;
    if let Some(local) = spec.local_config() {
        local.validate_settings().map_err(SpecError::from)?;
        deid_engine::local::LocalConfig::validate_config(&config).map_err(SpecError::from)?;
        local
            .validate_method(&config.privacy)
            .map_err(SpecError::from)?;
    }
    if !complete {
        return Ok(None);
    }
    let mut config = in_table_order(config, &table);
    // The small table is no frequency table (its count columns hold other columns' values);
    // the dataset's counts were checked at upload, the released counts are checked when the
    // job runs.
    config.count_column = None;
    config.subset_count_column = None;
    if has_subset {
        config.research_subset = Some(ResearchSubset::Rows((1..=table.rows() as u64).collect()));
    }
    without_dp(&mut config);
    match Problem::new(table, config) {
        Ok(problem) => {
            spec.output_options()
                .validate(&problem)
                .map_err(SpecError::from)?;
            Ok(Some(problem))
        }
        // Checked on a small table: the error names the dataset's rows.
        Err(EngineError::TooFewRecords {
            field,
            model,
            required,
            ..
        }) => Err(SpecError::from(EngineError::TooFewRecords {
            field,
            model,
            required,
            rows: facts.rows,
        })),
        Err(e) => Err(SpecError::from(e)),
    }
}

/// The research subset against the dataset's rows and the column's stored values (the problem
/// built on the distinct values gets a subset of all its rows instead).
fn check_research_subset(spec: &JobSpec, facts: &DatasetFacts) -> Result<(), SpecError> {
    let Some(subset) = &spec.research_subset else {
        return Ok(());
    };
    let subset = subset.parse()?;
    if let (ResearchSubset::Rows(_), Some(count)) = (&subset, &spec.count_column) {
        return Err(SpecError::new(
            "research_subset.rows",
            format!(
                "record numbers cannot select records of a frequency table (column '{count}' \
                 counts the records of each row): give subset_count_column, the column of the \
                 released records of each row"
            ),
        ));
    }
    let values = match &subset {
        ResearchSubset::Column { column, .. } => (facts.columns.iter())
            .position(|c| c == column)
            .and_then(|i| facts.values[i].as_deref()),
        ResearchSubset::Rows(_) => None,
    };
    subset
        .check(facts.rows, values)
        .map_err(|e| SpecError::from(e.within("research_subset")))
}

/// A table of the dataset's stored distinct values: as many rows as the largest domain, or the
/// largest minimal class size of `models` the data allows; columns without kept values are
/// empty.
fn distinct_value_table(
    facts: &DatasetFacts,
    models: &[(usize, PrivacyModel)],
) -> Result<Table, SpecError> {
    let k = (models.iter())
        .filter_map(|(_, m)| m.min_class_size())
        .max()
        .unwrap_or(1) as usize;
    let domain = (facts.values.iter().flatten())
        .map(Vec::len)
        .max()
        .unwrap_or(1);
    let n = domain.max(k.min(facts.rows)).max(1);
    let data: Vec<Vec<String>> = (0..n)
        .map(|r| {
            (facts.values.iter())
                .map(|v| match v {
                    Some(list) if !list.is_empty() => list[r % list.len()].clone(),
                    _ => String::new(),
                })
                .collect()
        })
        .collect();
    let header: Vec<&str> = facts.columns.iter().map(String::as_str).collect();
    Table::from_rows(&header, &data).map_err(SpecError::from)
}

/// The levels of an evaluation name generalized quasi-identifiers (their ranges are checked on
/// the problem, or when the job runs).
fn check_level_names(spec: &JobSpec, config: &ProblemConfig) -> Result<(), SpecError> {
    let Some(levels) = &spec.levels else {
        return Ok(());
    };
    let names: Vec<&str> = (config.quasi_identifiers.iter())
        .map(|q| q.column.as_str())
        .collect();
    match levels.keys().find(|c| !names.contains(&c.as_str())) {
        Some(column) => Err(SpecError::new(
            super::field::levels(column),
            format!(
                "'{column}' is not a generalized quasi-identifier; levels can be given for: {}",
                names.join(", ")
            ),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deid_engine::PrivacyModel;

    /// A service job with population-uniqueness and no population is refused naming
    /// `population`, also when the problem cannot be built from the stored values; a population
    /// smaller than the dataset names its field.
    #[test]
    fn service_jobs_need_a_valid_population() {
        let spec = |population: &str| {
            JobSpec::from_json(&format!(
                r#"{{"dataset_id": "d", "attributes": {{"age": {{"type": "quasi_identifying",
                    "hierarchy": {{"csv": "1;*\n2;*"}}}}}},
                    "privacy": ["population-uniqueness(threshold=0.01)"]{population}}}"#
            ))
            .unwrap()
        };
        let facts = DatasetFacts {
            columns: vec!["age".into()],
            rows: 1000,
            values: vec![None],
        };
        let limits = super::super::spec::SearchLimits::CLI;
        let e = crate::job::task::validate(&spec(""), &facts, &limits, false).unwrap_err();
        assert_eq!(e.field, "population");
        let e = crate::job::task::validate(
            &spec(r#","population": {"size": 999}"#),
            &facts,
            &limits,
            false,
        )
        .unwrap_err();
        assert_eq!(e.field, "population.size");
        assert!(
            crate::job::task::validate(
                &spec(r#","population": {"size": 1000}"#),
                &facts,
                &limits,
                false
            )
            .is_ok()
        );
    }

    /// Column names with the characters of the compact syntax (`,`, `=`, `(`, `)`) work in the
    /// JSON object form of a privacy model, and the built problem satisfies it.
    #[test]
    fn privacy_objects_take_any_column_name() {
        let name = "diagnosis, (ICD=10)";
        let rows: Vec<Vec<String>> = [("20", "x"), ("21", "y"), ("30", "x"), ("31", "y")]
            .iter()
            .map(|(a, d)| vec![a.to_string(), d.to_string()])
            .collect();
        let table = Table::from_rows(&["age", name], &rows).unwrap();
        let spec = JobSpec::from_json(
            &serde_json::json!({
                "attributes": {
                    "age": {"type": "quasi_identifying",
                            "hierarchy": {"csv": "20;2*;*\n21;2*;*\n30;3*;*\n31;3*;*\n"}},
                    name: {"type": "sensitive"}
                },
                "privacy": [
                    {"model": "k-anonymity", "k": 2},
                    {"model": "distinct-l-diversity", "attribute": name, "l": 2}
                ]
            })
            .to_string(),
        )
        .unwrap();
        let problem = build_problem(&spec, table, Frontend::Service).unwrap();
        assert_eq!(
            problem.config().privacy[1],
            PrivacyModel::DistinctLDiversity {
                attribute: name.to_string(),
                l: 2
            }
        );
        // Level 1 (2*, 3*) makes classes of two records with two diagnoses each.
        let r = deid_engine::Checker::new(&problem).check(&[1]);
        assert!(r.anonymous);
        // The same name in the compact syntax needs quotes, and gets them right.
        let quoted = format!("distinct-l-diversity(attribute=\"{name}\",l=2)");
        assert_eq!(
            PrivacyModel::parse(&quoted).unwrap(),
            problem.config().privacy[1]
        );
        // Errors inside an object name the parameter.
        let bad = JobSpec::from_json(r#"{"privacy": [{"model": "k-anonymity", "k": "x"}]}"#)
            .unwrap()
            .privacy[0]
            .parse("privacy[0]")
            .unwrap_err();
        assert_eq!(bad.field, "privacy[0].k");
    }
}
