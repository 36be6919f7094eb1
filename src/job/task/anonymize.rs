//! `"task": "anonymize"` (the default; `deid anonymize`): search the best transformation that
//! satisfies the privacy models — or run local generalization — then write its CSV and compute
//! the search report at once.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use deid_engine::output::OutputOptions;
use deid_engine::plan::Stepped;
use deid_engine::{Problem, SearchConfig, Table};

use super::search::anonymize;
use super::{Outcome, Run, Sink, Summary, TaskError, TaskFailure, Verdict, ms};
use crate::job::error::{ErrorCode, SpecError};
use crate::job::plan::{AuditFacts, hierarchy_digests, plan_json};
use crate::job::problem::{DatasetFacts, build_problem_with, search_error};
use crate::job::report::{DEFAULT_RISK_THRESHOLD, SuppressionReport, Timings};
use crate::job::spec::{JobSpec, SearchLimits};

/// A search reads every quasi-identifier's hierarchy.
pub const READS_HIERARCHIES: bool = true;

/// It searches (the search reports progress).
pub const SEARCHES: bool = true;

/// The fields of a search: no given transformation (`levels`), no risk-analysis options.
pub fn check_fields(spec: &JobSpec) -> Result<(), SpecError> {
    super::refuse_levels(spec)?;
    super::refuse_qi_combinations(spec)
}

/// Checks a job before queueing: its search settings against the service's limits and the
/// problem against the dataset's facts. Returns the resolved time limit.
pub fn validate(
    spec: &JobSpec,
    facts: &DatasetFacts,
    limits: &SearchLimits,
) -> Result<Option<Duration>, SpecError> {
    super::validate_generalizing(spec, facts, limits, |search, problem| {
        search.resolve(problem).map(drop).map_err(search_error)
    })
}

/// The output phase is predicted to take the load's time (the CSV and the report read every
/// row as loading does: 10 M rows, load 4.1 s, output 3.5 s), twice that with a recoding plan
/// (its self-check re-applies it to every row: load 4.7 s, output 9.4 s).
fn predicted_output(load: Duration, plan: bool) -> Duration {
    load.saturating_mul(if plan { 2 } else { 1 })
}

/// The search settings once loading took `load`: the time limit covers the whole job, so the
/// search gets what is left after the load and the predicted output ([`predicted_output`]) —
/// at least a quarter of the limit, so that a load longer than the limit still leaves the
/// search time for a first solution.
fn search_after_load(search: &SearchConfig, load: Duration, plan: bool) -> SearchConfig {
    let mut search = search.clone();
    let floor = search.time_limit / 4;
    let reserved = load.saturating_add(predicted_output(load, plan));
    search.time_limit = search.time_limit.saturating_sub(reserved).max(floor);
    search
}

/// Runs the search on `table` and writes the best result's CSV to `sink`.
pub fn run(run: &Run<'_>, table: Table, sink: Sink<'_>) -> Result<Outcome, TaskError> {
    let spec = run.spec;
    let mut hierarchies = BTreeMap::new();
    let problem = build_problem_with(spec, table, run.frontend, |config| {
        if run.plan {
            hierarchies = hierarchy_digests(config);
        }
    })?;
    let load = run.started.elapsed();
    let observer = run.host.observer(&problem);
    let search = search_after_load(run.search, load, run.plan);
    let result = anonymize(
        &problem,
        spec.local_config(),
        &search,
        run.host.cancel(),
        &*observer,
    )
    .map_err(search_error)?;
    drop(observer);
    let summary = result.summary();
    if run.host.aborted() {
        return Ok(Outcome {
            summary,
            report: None,
            plan: None,
            wrote_csv: false,
            verdict: Verdict::Aborted,
        });
    }
    run.host.writing();
    let output_started = Instant::now();
    let options = spec.output_options();
    let threshold = spec.risk_threshold.unwrap_or(DEFAULT_RISK_THRESHOLD);
    // The CSV, the report and the plan are independent: computed at once (on 10 M rows each
    // takes seconds).
    let ((written, mut report), plan) = rayon::join(
        || {
            rayon::join(
                || match (sink, result.recoding()) {
                    (Some(out), Some(recoding)) => {
                        super::write_output(run, &problem, recoding, &options, out).map(Some)
                    }
                    _ => Ok(None),
                },
                || result.report(&problem, threshold),
            )
        },
        || match (run.plan, result.stepped()) {
            (true, Some(stepped)) => Some(plan(run, &problem, stepped, &options, hierarchies)),
            _ => None,
        },
    );
    let written = written?;
    if let Some(recoding) = result.recoding() {
        report.set_suppression(SuppressionReport::new(
            &problem,
            recoding,
            result.suppressed(),
            &options,
            written,
        ));
    }
    report.job = run.job.cloned();
    report.timings = Some(Timings {
        load_ms: ms(load),
        search_ms: ms(summary.elapsed),
        output_ms: ms(output_started.elapsed()),
        peak_memory_bytes: run.host.peak_memory(),
    });
    Ok(Outcome {
        plan,
        summary,
        report: Some(report.to_json()),
        wrote_csv: written.is_some(),
        verdict: verdict(&summary),
    })
}

/// Done if a solution was found, else failed with `no_solution`.
fn verdict(summary: &Summary) -> Verdict {
    if summary.found {
        return Verdict::Done;
    }
    Verdict::Failed(TaskFailure {
        code: ErrorCode::NoSolution,
        message: format!(
            "no transformation satisfies the privacy models within the limits ({} checks, \
             stopped: {})",
            summary.checks, summary.stop
        ),
        details: serde_json::json!({
            "stop": summary.stop,
            "optimal_proven": summary.optimal_proven,
        }),
    })
}

/// The recoding plan of the output (JSON), or why there is none.
fn plan(
    run: &Run<'_>,
    problem: &Problem,
    stepped: &dyn Stepped,
    options: &OutputOptions,
    hierarchies: BTreeMap<String, String>,
) -> Result<String, String> {
    let facts = AuditFacts {
        spec: run.spec,
        input_sha256: run.input_sha256,
        seed: run.search.seed,
        hierarchies,
    };
    plan_json(problem, stepped, options, run.delimiter, facts).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_limit_covers_the_load_and_the_predicted_output() {
        let search = SearchConfig {
            time_limit: Duration::from_secs(60),
            ..SearchConfig::default()
        };
        let after =
            |load, plan| search_after_load(&search, Duration::from_secs(load), plan).time_limit;
        assert_eq!(after(0, true), Duration::from_secs(60));
        // 10 s of load, 10 s kept for the output; 20 s with a plan.
        assert_eq!(after(10, false), Duration::from_secs(40));
        assert_eq!(after(10, true), Duration::from_secs(30));
        // A load longer than the limit still leaves a quarter of it.
        assert_eq!(after(15, true), Duration::from_secs(15));
        assert_eq!(after(20, false), Duration::from_secs(20));
        assert_eq!(after(25, false), Duration::from_secs(15));
        assert_eq!(after(90, false), Duration::from_secs(15));
    }
}
