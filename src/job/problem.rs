//! From a job specification to the engine's [`Problem`] — written once, for the command line,
//! the worker, and the service's validation before a job is queued.
//!
//! - [`build_problem`]: roles, hierarchies (resolved for the [`Frontend`]), privacy and quality
//!   models, in the table's column order, then [`Problem::new`].
//! - [`validate_service_job`]: what `POST /v1/jobs` checks before queueing, without reading the
//!   data: the search settings against the service's limits, the callback URL, the risk
//!   threshold, and the whole problem built on a small table made of the dataset's stored
//!   distinct values ([`DatasetFacts`]), which checks hierarchies (coverage of every value), level
//!   bounds, privacy and quality models and the search configuration.

use deid_engine::{EngineError, Problem, ProblemConfig, SearchConfig, Table};

use super::error::SpecError;
use super::hierarchy::{Frontend, resolve};
use super::spec::{JobSpec, SearchLimits};

/// Builds the problem `spec` describes on `table`.
pub fn build_problem(
    spec: &JobSpec,
    table: Table,
    frontend: Frontend<'_>,
) -> Result<Problem, SpecError> {
    let config = spec.problem_config(|c, s| resolve(frontend, Some(&table), c, s))?;
    let config = in_table_order(config, &table);
    Problem::new(table, config).map_err(SpecError::from)
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

/// A search configuration that does not fit the problem, with the field of the specification.
pub fn search_error(e: EngineError) -> SpecError {
    match e {
        EngineError::InvalidConfig { field, message } => SpecError::new(
            field.strip_prefix("search.").unwrap_or(&field).to_string(),
            message,
        ),
        other => SpecError::new("algorithm", other.to_string()),
    }
}

/// What the service knows about a dataset without reading it.
#[derive(Debug, Clone, Default)]
pub struct DatasetFacts {
    /// Column names in file order.
    pub columns: Vec<String>,
    /// Data rows.
    pub rows: usize,
    /// Per column: its distinct values if they were kept at upload and the specification names
    /// the column, else `None`.
    pub values: Vec<Option<Vec<String>>>,
}

/// Validates a service job whose stored hierarchies are inlined (see the module documentation)
/// and returns its search configuration. Columns whose values were not kept at upload (too
/// many) are only partly checked here; the rest is checked when the job runs.
pub fn validate_service_job(
    spec: &JobSpec,
    facts: &DatasetFacts,
    limits: &SearchLimits,
    allow_private_webhooks: bool,
) -> Result<SearchConfig, SpecError> {
    let search = spec.search_config(limits)?;
    if let Some(url) = &spec.callback_url
        && let Err(message) = super::callback::check_url(url, allow_private_webhooks)
    {
        return Err(SpecError::new("callback_url", message));
    }
    if let Some(t) = spec.risk_threshold
        && !(t > 0.0 && t <= 1.0)
    {
        return Err(SpecError::new(
            "risk_threshold",
            format!("expected a share in (0, 1], got {t}"),
        ));
    }
    // A table of the stored distinct values: as many rows as the largest domain, or the largest
    // minimal class size the data allows.
    let k = spec
        .privacy
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.parse(&format!("privacy[{i}]")).ok())
        .filter_map(|m| m.min_class_size())
        .max()
        .unwrap_or(1) as usize;
    let domain = facts
        .values
        .iter()
        .flatten()
        .map(Vec::len)
        .max()
        .unwrap_or(1);
    let n = domain.max(k.min(facts.rows)).max(1);
    let data: Vec<Vec<String>> = (0..n)
        .map(|r| {
            facts
                .values
                .iter()
                .map(|v| match v {
                    Some(list) if !list.is_empty() => list[r % list.len()].clone(),
                    _ => String::new(),
                })
                .collect()
        })
        .collect();
    let header: Vec<&str> = facts.columns.iter().map(String::as_str).collect();
    let table = Table::from_rows(&header, &data).map_err(SpecError::from)?;
    let complete = facts
        .columns
        .iter()
        .zip(&facts.values)
        .all(|(c, v)| v.is_some() || !spec.attributes.contains_key(c));
    // Builder specifications of columns without kept values are only checked.
    let known: Vec<bool> = facts.values.iter().map(Option::is_some).collect();
    let config = spec.problem_config(|c, s| {
        let kept = table.column_index(c).is_some_and(|i| known[i]);
        resolve(Frontend::Service, kept.then_some(&table), c, s)
    })?;
    if !complete {
        return Ok(search);
    }
    let config = in_table_order(config, &table);
    match Problem::new(table, config) {
        Ok(problem) => {
            search.resolve(&problem).map_err(search_error)?;
            Ok(search)
        }
        // The sample has `n` rows; the message must speak of the dataset's.
        Err(EngineError::InvalidConfig { field, message })
            if message.contains("but the data has only") =>
        {
            Err(SpecError::new(
                field,
                message.replace(&format!("only {n}"), &format!("only {}", facts.rows)),
            ))
        }
        Err(e) => Err(SpecError::from(e)),
    }
}
