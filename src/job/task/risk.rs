//! `"task": "risk"` and risk analysis without anonymizing: the re-identification risks of a
//! table as it is, for chosen quasi-identifiers and an optional population model — `deid risk`,
//! `POST /v1/datasets/{id}/risk` and risk jobs. The answer is the report's `risk` shape,
//! `{"input": RiskReport}`; nothing is generalized, so no hierarchy is read and no CSV written.

use serde::{Deserialize, Serialize};

use deid_engine::risk::{QiCombinations, RiskReport};
use deid_engine::{
    CancelFlag, Hierarchy, PrivacyModel, Problem, ProblemConfig, QuasiIdentifier, Table,
};

use std::time::Duration;

use super::{Outcome, Run, Sink, Summary, TaskError, Verdict};
use crate::job::error::SpecError;
use crate::job::problem::DatasetFacts;
use crate::job::report::DEFAULT_RISK_THRESHOLD;
use crate::job::spec::{JobSpec, PopulationSpec, SearchLimits};

/// What to analyse.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RiskRequest {
    /// The quasi-identifiers (column names; at least one). Missing reads as empty, so that
    /// `{}` is refused by [`RiskRequest::validate`] naming `quasi_identifiers`.
    #[serde(default)]
    pub quasi_identifiers: Vec<String>,
    /// The population the data were sampled from (adds population uniqueness).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub population: Option<PopulationSpec>,
    /// Threshold of the "records at risk" statistics, in (0, 1] (default 0.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_threshold: Option<f64>,
    /// Which combinations of the quasi-identifiers get distinction and separation: `auto`
    /// (default: every one while that is cheap), `all` (every one, whatever it costs) or `singles`
    /// (each alone and all together).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qi_combinations: Option<QiCombinations>,
    /// The count column of a frequency table (each row stands for that many records). The
    /// service takes it from the dataset; it is not a field of the request's body.
    #[serde(skip)]
    pub count_column: Option<String>,
}

/// The analysis: `{"input": RiskReport}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RiskAnalysis {
    /// The risks of the data as they are.
    pub input: RiskReport,
}

impl RiskRequest {
    /// The analysis a job with `"task": "risk"` asks for: its quasi-identifying attributes,
    /// population and risk threshold.
    pub fn from_spec(spec: &JobSpec) -> RiskRequest {
        RiskRequest {
            quasi_identifiers: spec.risk_quasi_identifiers(),
            population: spec.population.clone(),
            risk_threshold: spec.risk_threshold,
            qi_combinations: spec.qi_combinations,
            count_column: spec.count_column.clone(),
        }
    }

    /// Checks what can be checked without the data: the threshold, the population's form, that
    /// quasi-identifiers are named once each and exist in `columns` and that the population is at
    /// least `rows`. Errors name the field.
    pub fn validate(&self, columns: &[String], rows: usize) -> Result<(), SpecError> {
        if let Some(t) = self.risk_threshold
            && !(t > 0.0 && t <= 1.0)
        {
            return Err(SpecError::new(
                "risk_threshold",
                format!("expected a share in (0, 1], got {t}"),
            ));
        }
        if self.quasi_identifiers.is_empty() {
            return Err(SpecError::new(
                "quasi_identifiers",
                "name at least one column",
            ));
        }
        if self.quasi_identifiers.len() > deid_engine::problem::MAX_QUASI_IDENTIFIERS {
            return Err(SpecError::new(
                "quasi_identifiers",
                format!(
                    "at most {} quasi-identifiers are supported",
                    deid_engine::problem::MAX_QUASI_IDENTIFIERS
                ),
            ));
        }
        for (i, name) in self.quasi_identifiers.iter().enumerate() {
            if !columns.contains(name) {
                return Err(SpecError::new(
                    format!("quasi_identifiers[{i}]"),
                    format!(
                        "unknown column '{name}'; the data has the columns: {}",
                        columns.join(", ")
                    ),
                ));
            }
            if self.quasi_identifiers[..i].contains(name) {
                return Err(SpecError::new(
                    format!("quasi_identifiers[{i}]"),
                    format!("column '{name}' is named twice"),
                ));
            }
        }
        if let Some(p) = &self.population {
            p.parse()?
                .population_size(rows)
                .map_err(|e| SpecError::from(e.within("population")))?;
        }
        Ok(())
    }

    /// Analyses `table`.
    pub fn analyse(&self, table: Table) -> Result<RiskAnalysis, SpecError> {
        let analysis = self.analyse_cancellable(table, &CancelFlag::new())?;
        Ok(analysis.expect("a flag nobody raises"))
    }

    /// Analyses `table` until `cancel` is raised (`None` then): the request that asked for it
    /// went away, or the job was cancelled.
    pub fn analyse_cancellable(
        &self,
        table: Table,
        cancel: &CancelFlag,
    ) -> Result<Option<RiskAnalysis>, SpecError> {
        let columns: Vec<String> = table.columns().iter().map(|c| c.name.clone()).collect();
        let records = match &self.count_column {
            Some(c) => {
                deid_engine::data::frequency::Frequencies::resolve(&table, c, None)?.records()
            }
            None => table.rows(),
        };
        self.validate(&columns, records)?;
        let mut quasi_identifiers = Vec::with_capacity(self.quasi_identifiers.len());
        for name in &self.quasi_identifiers {
            let column = table.column(table.require_column(name, "quasi_identifiers")?);
            // Risks only group the original values: a one-level hierarchy (value → *).
            let rows = column
                .dict
                .values()
                .map(|v| vec![v.to_string(), "*".to_string()])
                .collect();
            quasi_identifiers.push(QuasiIdentifier::new(
                name.clone(),
                Hierarchy::from_rows(rows, name)?,
            ));
        }
        quasi_identifiers.sort_by_key(|q| table.column_index(&q.column));
        let config = ProblemConfig {
            quasi_identifiers,
            privacy: vec![PrivacyModel::KAnonymity { k: 1 }],
            population: self.population.as_ref().map(|p| p.parse()).transpose()?,
            count_column: self.count_column.clone(),
            ..ProblemConfig::default()
        };
        if cancel.is_cancelled() {
            return Ok(None);
        }
        let problem = Problem::new(table, config)?;
        let threshold = self.risk_threshold.unwrap_or(DEFAULT_RISK_THRESHOLD);
        let combinations = self.qi_combinations.unwrap_or_default();
        Ok(
            RiskReport::input_with(&problem, threshold, combinations, cancel)
                .map(|input| RiskAnalysis { input }),
        )
    }
}

/// Nothing is generalized: hierarchies are not read.
pub const READS_HIERARCHIES: bool = false;

/// No search.
pub const SEARCHES: bool = false;

/// The fields of a risk analysis: the data as they are, for at least one quasi-identifying
/// attribute — no transformation, search, research subset, privacy models or
/// microaggregation.
pub fn check_fields(spec: &JobSpec) -> Result<(), SpecError> {
    super::refuse_levels(spec)?;
    super::refuse_local(spec)?;
    if spec.subset_count_column.is_some() {
        return Err(SpecError::new(
            "subset_count_column",
            "a risk analysis measures the whole dataset; a research subset is used by \
             \"task\": \"anonymize\" or \"evaluate\"",
        ));
    }
    if spec.research_subset.is_some() {
        return Err(SpecError::new(
            "research_subset",
            "a risk analysis measures the whole dataset; a research subset is used by \
             \"task\": \"anonymize\" or \"evaluate\"",
        ));
    }
    if !spec.privacy.is_empty() {
        return Err(SpecError::new(
            "privacy",
            "a risk analysis measures the data as they are; it takes no privacy models \
             (use \"task\": \"anonymize\" or \"evaluate\")",
        ));
    }
    if let Some((name, _)) = (spec.attributes.iter()).find(|(_, a)| a.microaggregation.is_some()) {
        return Err(SpecError::new(
            crate::job::field::microaggregation(name),
            "a risk analysis transforms nothing",
        ));
    }
    if spec.risk_quasi_identifiers().is_empty() {
        return Err(SpecError::new(
            "attributes",
            "a risk analysis needs at least one quasi_identifying attribute",
        ));
    }
    Ok(())
}

/// Checks a risk job before queueing (hierarchies are not read): what
/// [`RiskRequest::validate`] checks, with errors naming the specification's fields.
pub fn validate(
    spec: &JobSpec,
    facts: &DatasetFacts,
    _: &SearchLimits,
) -> Result<Option<Duration>, SpecError> {
    let request = RiskRequest::from_spec(spec);
    request
        .validate(&facts.columns, facts.rows)
        .map_err(|mut e| {
            // The request's quasi-identifiers are the specification's attributes.
            if let Some(rest) = e.field.strip_prefix("quasi_identifiers")
                && let Some(i) = rest
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<usize>()
                    .ok()
            {
                e.field = crate::job::field::attribute(&request.quasi_identifiers[i]);
            } else if e.field == "quasi_identifiers" {
                e.field = "attributes".into();
            }
            e
        })?;
    Ok(None)
}

/// Analyses the risks of `table` for the job's quasi-identifying attributes (nothing is
/// written to the sink).
pub fn run(run: &Run<'_>, table: Table, _: Sink<'_>) -> Result<Outcome, TaskError> {
    run.host.analysing();
    let request = RiskRequest::from_spec(run.spec);
    let Some(analysis) = request.analyse_cancellable(table, run.host.cancel())? else {
        // Cancelled: no result.
        return Ok(Outcome {
            plan: None,
            summary: Summary {
                found: false,
                checks: 0,
                elapsed: run.started.elapsed(),
                optimal_proven: false,
                stop: "cancelled",
            },
            report: None,
            wrote_csv: false,
            verdict: Verdict::Aborted,
        });
    };
    // Exactly the shape of `POST /v1/datasets/{id}/risk`.
    let report = serde_json::to_value(analysis).map_err(|e| TaskError::Output(e.to_string()))?;
    Ok(Outcome {
        plan: None,
        summary: Summary {
            found: true,
            checks: 0,
            elapsed: run.started.elapsed(),
            optimal_proven: false,
            stop: "completed",
        },
        report: Some(report),
        wrote_csv: false,
        verdict: Verdict::Done,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let rows: Vec<Vec<String>> = [("30", "m"), ("30", "f"), ("40", "m"), ("40", "m")]
            .iter()
            .map(|(a, s)| vec![a.to_string(), s.to_string()])
            .collect();
        Table::from_rows(&["age", "sex"], &rows).unwrap()
    }

    #[test]
    fn analyses_and_names_bad_fields() {
        let request = |json: &str| serde_json::from_str::<RiskRequest>(json).unwrap();
        let a = request(r#"{"quasi_identifiers": ["sex", "age"], "population": {"size": 8}}"#)
            .analyse(table())
            .unwrap();
        // Classes (30,m), (30,f), (40,m)×2: two uniques of four records.
        assert_eq!(a.input.classes, 3);
        assert_eq!(a.input.sample_uniques, 2);
        let pu = a.input.population_uniqueness.unwrap();
        assert_eq!((pu.population, pu.sampling_fraction), (8, 0.5));
        for (json, field) in [
            ("{}", "quasi_identifiers"),
            (r#"{"quasi_identifiers": []}"#, "quasi_identifiers"),
            (r#"{"quasi_identifiers": ["agee"]}"#, "quasi_identifiers[0]"),
            (
                r#"{"quasi_identifiers": ["age", "age"]}"#,
                "quasi_identifiers[1]",
            ),
            (
                r#"{"quasi_identifiers": ["age"], "population": {"size": 3}}"#,
                "population.size",
            ),
            (
                r#"{"quasi_identifiers": ["age"], "risk_threshold": 0}"#,
                "risk_threshold",
            ),
        ] {
            let e = request(json).analyse(table()).unwrap_err();
            assert_eq!(e.field, field, "{json}: {e}");
        }
    }

    #[test]
    fn a_raised_cancel_flag_stops_the_analysis() {
        let request: RiskRequest =
            serde_json::from_str(r#"{"quasi_identifiers": ["sex", "age"]}"#).unwrap();
        let cancel = CancelFlag::new();
        assert!(
            request
                .analyse_cancellable(table(), &cancel)
                .unwrap()
                .is_some()
        );
        cancel.cancel();
        assert!(
            request
                .analyse_cancellable(table(), &cancel)
                .unwrap()
                .is_none()
        );
    }
}
