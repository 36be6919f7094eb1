//! `"task": "evaluate"` (`deid evaluate`): the report of the transformation given in `levels`
//! and, when it satisfies the privacy models, its CSV; otherwise the task fails with
//! `not_anonymous` and keeps the report.

use std::time::{Duration, Instant};

use deid_engine::{Checker, Table};

use super::{Outcome, Run, Sink, Summary, TaskError, TaskFailure, Verdict, ms};
use crate::job::error::{ErrorCode, SpecError};
use crate::job::problem::{DatasetFacts, build_problem};
use crate::job::report::{DEFAULT_RISK_THRESHOLD, EvaluationReport, SuppressionReport, Timings};
use crate::job::spec::{JobSpec, SearchLimits};

/// An evaluation generalizes with the quasi-identifiers' hierarchies.
pub const READS_HIERARCHIES: bool = true;

/// One check, no search.
pub const SEARCHES: bool = false;

/// The fields of an evaluation: the transformation (`levels`) is required; no search.
pub fn check_fields(spec: &JobSpec) -> Result<(), SpecError> {
    if spec.levels.is_none() {
        return Err(SpecError::new(
            "levels",
            "required by \"task\": \"evaluate\": the transformation to evaluate, e.g. \
             {\"age\": 2, \"zip\": 1} (quasi-identifiers not named keep level 0)",
        ));
    }
    super::refuse_local(spec)?;
    super::refuse_qi_combinations(spec)
}

/// Checks a job before queueing: the problem against the dataset's facts and the levels
/// against its lattice. Returns the resolved time limit (the job's, though an evaluation does
/// not search).
pub fn validate(
    spec: &JobSpec,
    facts: &DatasetFacts,
    limits: &SearchLimits,
) -> Result<Option<Duration>, SpecError> {
    super::validate_generalizing(spec, facts, limits, |_, problem| {
        spec.transformation(problem).map(drop)
    })
}

/// Evaluates the transformation on `table`; writes its CSV to `sink` if it is anonymous (or
/// `run.force_output`).
pub fn run(run: &Run<'_>, table: Table, sink: Sink<'_>) -> Result<Outcome, TaskError> {
    let spec = run.spec;
    let problem = build_problem(spec, table, run.frontend)?;
    let load = run.started.elapsed();
    let levels = spec.transformation(&problem)?;
    run.host.writing();
    let started = Instant::now();
    let eval = Checker::new(&problem).evaluate(&levels);
    let options = spec.output_options();
    let anonymous = eval.result.anonymous;
    let written = match sink {
        Some(out) if anonymous || run.force_output => {
            Some(super::write_output(run, &problem, &eval, &options, out)?)
        }
        _ => None,
    };
    let threshold = spec.risk_threshold.unwrap_or(DEFAULT_RISK_THRESHOLD);
    let mut report = EvaluationReport::new(&problem, &eval, threshold);
    report.suppression = Some(SuppressionReport::new(
        &problem,
        &eval,
        eval.result.suppressed,
        &options,
        written,
    ));
    report.job = run.job.cloned();
    report.timings = Some(Timings {
        load_ms: ms(load),
        search_ms: 0.0,
        output_ms: ms(started.elapsed()),
        peak_memory_bytes: run.host.peak_memory(),
    });
    let verdict = if anonymous {
        Verdict::Done
    } else {
        Verdict::Failed(TaskFailure {
            code: ErrorCode::NotAnonymous,
            message: format!(
                "the transformation does not satisfy the privacy models: {} records would have \
                 to be suppressed, the limit is {}",
                eval.result.suppressed,
                problem.max_suppressed()
            ),
            details: serde_json::json!({
                "suppressed_rows": eval.result.suppressed,
                "max_suppressed": problem.max_suppressed(),
            }),
        })
    };
    Ok(Outcome {
        plan: None,
        summary: Summary {
            found: anonymous,
            checks: 1,
            elapsed: started.elapsed(),
            optimal_proven: false,
            stop: "completed",
        },
        report: Some(report.to_json()),
        wrote_csv: written.is_some(),
        verdict,
    })
}
