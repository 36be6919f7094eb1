//! What a job does, one file per task kind, shared by the command line and the worker.
//!
//! - [`anonymize`]: search the best transformation (or run local generalization), write the
//!   anonymized CSV and the search report;
//! - [`evaluate`]: one given transformation's report, and its CSV when it satisfies the models;
//! - [`risk`]: the re-identification risks of the data as they are (no CSV).
//!
//! Every task has a `validate` (what `POST /v1/jobs` checks before queueing, without reading
//! the data) and a `run` on a loaded [`Table`] that writes its CSV to any [`Write`] sink (a file
//! for the command line, the job's result chunks for the worker) and returns one [`Outcome`].
//! [`validate`] and [`run`] dispatch on [`Task`]: a new task kind is a new file here plus one
//! line in each.

use std::io::Write;
use std::time::{Duration, Instant};

use deid_engine::output::{CsvOutput, OutputOptions, Recoding, Written};
use deid_engine::{CancelFlag, Problem, ProgressObserver, SearchConfig, Table};

use super::error::{ErrorCode, SpecError};
use super::hierarchy::Frontend;
use super::problem::{DatasetFacts, validate_generalization};
use super::report::JobInfo;
use super::spec::{JobSpec, SearchLimits};

pub use super::spec::Task;

pub mod anonymize;
pub mod evaluate;
pub mod risk;
pub mod search;

/// What the front end running a task provides: cancellation, progress, and what it knows of
/// the process.
pub trait Host: Sync {
    /// Raised to stop a search early (the best so far is kept).
    fn cancel(&self) -> &CancelFlag;
    /// The observer of a search on `problem`.
    fn observer<'a>(&'a self, problem: &'a Problem) -> Box<dyn ProgressObserver + 'a>;
    /// The task starts writing its result.
    fn writing(&self) {}
    /// The task starts analysing the data (a risk analysis, which reports no other progress).
    fn analysing(&self) {}
    /// Whether the run must write nothing more (the worker shuts down or lost its lease).
    fn aborted(&self) -> bool {
        false
    }
    /// The process's peak memory, when it measures this task alone (the command line).
    fn peak_memory(&self) -> Option<u64> {
        None
    }
}

/// Everything a task's run needs besides its data and its sink.
#[derive(Clone, Copy)]
pub struct Run<'a> {
    /// The specification.
    pub spec: &'a JobSpec,
    /// Where hierarchy sources are resolved.
    pub frontend: Frontend<'a>,
    /// The resolved search settings (time limit, seed, threads, …).
    pub search: &'a SearchConfig,
    /// The front end.
    pub host: &'a dyn Host,
    /// The job, for service results.
    pub job: Option<&'a JobInfo>,
    /// The CSV delimiter of the output.
    pub delimiter: u8,
    /// When loading the data started (the report's `load_ms` runs from here to the problem).
    pub started: Instant,
    /// `evaluate`: write the CSV also when the transformation is not anonymous (`--force`).
    pub force_output: bool,
    /// The largest CSV the task may write (bytes), measured before anything is written.
    pub max_output_bytes: Option<u64>,
    /// Whether the task makes the recoding plan of its output (`anonymize`).
    pub plan: bool,
    /// SHA-256 (hex) of the input as read, for the plan's audit block.
    pub input_sha256: Option<&'a str>,
}

/// What a task's run produced.
#[derive(Debug)]
pub struct Outcome {
    /// Counters for the end of the job.
    pub summary: Summary,
    /// The JSON report (`None` when the run was aborted).
    pub report: Option<serde_json::Value>,
    /// Whether the CSV was written to the sink.
    pub wrote_csv: bool,
    /// The recoding plan of the output (JSON), when [`Run::plan`] asked for it and there is an
    /// output; `Err` says why the output has none (e.g. a research subset of records).
    pub plan: Option<Result<String, String>>,
    /// How the task ended.
    pub verdict: Verdict,
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// It did what was asked.
    Done,
    /// It ran to its end without the result asked for (`no_solution`, `not_anonymous`): the
    /// report is kept, the job fails with this error.
    Failed(TaskFailure),
    /// It stopped before its end (the host aborted it, or it was cancelled before it had a
    /// result): nothing was written.
    Aborted,
}

/// Why a task failed although it ran to its end.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskFailure {
    /// The job's error code.
    pub code: ErrorCode,
    /// What happened, without what each front end adds about the CSV.
    pub message: String,
    /// Counters behind the message.
    pub details: serde_json::Value,
}

/// What the end of a job needs to know of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Whether there is an output.
    pub found: bool,
    /// Checks performed.
    pub checks: u64,
    /// Duration of the search (or the evaluation).
    pub elapsed: Duration,
    /// Whether the result is proven optimal.
    pub optimal_proven: bool,
    /// Why it ended.
    pub stop: &'static str,
}

/// A task's run failed before it could end.
#[derive(Debug)]
pub enum TaskError {
    /// The specification does not fit the data (the job fails, the command exits with 2).
    Spec(SpecError),
    /// Writing the CSV to the sink failed.
    Output(String),
    /// The CSV would be larger than [`Run::max_output_bytes`]: nothing was written.
    OutputTooLarge {
        /// Its exact size.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
}

impl From<SpecError> for TaskError {
    fn from(e: SpecError) -> TaskError {
        TaskError::Spec(e)
    }
}

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskError::Spec(e) => e.fmt(f),
            TaskError::Output(m) => f.write_str(m),
            TaskError::OutputTooLarge { bytes, limit } => write!(
                f,
                "the anonymized CSV would have {bytes} bytes, more than the limit of {limit}"
            ),
        }
    }
}

impl std::error::Error for TaskError {}

/// The sink of a task's CSV.
pub type Sink<'s> = Option<&'s mut (dyn Write + Send)>;

/// The task kinds and their files: one line per kind. Each module has `READS_HIERARCHIES`,
/// `SEARCHES`,
/// `check_fields`, `validate` and `run` with the signatures of the functions below.
macro_rules! dispatch {
    ($($kind:ident => $module:ident),+ $(,)?) => {
        impl Task {
            /// Whether the task generalizes, so that its hierarchies are read and checked
            /// before queueing.
            pub fn reads_hierarchies(self) -> bool {
                match self { $(Task::$kind => $module::READS_HIERARCHIES),+ }
            }

            /// Whether the task searches, so that the search reports its progress and time.
            pub fn searches(self) -> bool {
                match self { $(Task::$kind => $module::SEARCHES),+ }
            }
        }

        /// Checks that the specification's fields fit its task (e.g. `levels` only and always
        /// with `evaluate`), before anything is read.
        pub fn check_fields(spec: &JobSpec) -> Result<(), SpecError> {
            match spec.task() { $(Task::$kind => $module::check_fields(spec)),+ }
        }

        /// What the service checks before queueing a job, without reading the data: the
        /// callback URL, the risk threshold, then the task's own checks. Returns the resolved
        /// time limit of a search (`None`: the task has none).
        pub fn validate(
            spec: &JobSpec,
            facts: &DatasetFacts,
            limits: &SearchLimits,
            allow_private_webhooks: bool,
        ) -> Result<Option<Duration>, SpecError> {
            validate_common(spec, allow_private_webhooks)?;
            match spec.task() { $(Task::$kind => $module::validate(spec, facts, limits)),+ }
        }

        /// Runs the task of `run.spec` on `table`, writing its CSV (if any) to `sink`.
        pub fn run(run: &Run<'_>, table: Table, sink: Sink<'_>) -> Result<Outcome, TaskError> {
            match run.spec.task() { $(Task::$kind => $module::run(run, table, sink)),+ }
        }
    };
}

dispatch! {
    Anonymize => anonymize,
    Evaluate => evaluate,
    Risk => risk,
}

/// The checks of every task before queueing: the callback URL and the risk threshold.
fn validate_common(spec: &JobSpec, allow_private_webhooks: bool) -> Result<(), SpecError> {
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
    Ok(())
}

/// The checks of a generalizing task before queueing: its search settings against the
/// service's limits, then the problem built on the dataset's facts
/// ([`validate_generalization`]), on which `check` runs the task's own checks. Returns the
/// resolved time limit.
fn validate_generalizing(
    spec: &JobSpec,
    facts: &DatasetFacts,
    limits: &SearchLimits,
    check: impl FnOnce(&SearchConfig, &Problem) -> Result<(), SpecError>,
) -> Result<Option<Duration>, SpecError> {
    let search = spec.search_config(limits)?;
    if let Some(problem) = validate_generalization(spec, facts)? {
        check(&search, &problem)?;
    }
    Ok(Some(search.time_limit))
}

/// `Err` naming `field` with `message` when a field that `spec`'s task does not take is given.
fn refuse(given: bool, field: &str, message: impl FnOnce() -> String) -> Result<(), SpecError> {
    if given {
        Err(SpecError::new(field, message()))
    } else {
        Ok(())
    }
}

/// `levels` is only used by `"task": "evaluate"`.
fn refuse_levels(spec: &JobSpec) -> Result<(), SpecError> {
    refuse(spec.levels.is_some(), "levels", || {
        format!(
            "a given transformation is only used by \"task\": \"evaluate\", not by \"{}\"",
            spec.task().as_str()
        )
    })
}

/// `qi_combinations` chooses what a risk analysis reports: only `"task": "risk"` takes it.
fn refuse_qi_combinations(spec: &JobSpec) -> Result<(), SpecError> {
    refuse(spec.qi_combinations.is_some(), "qi_combinations", || {
        format!(
            "the combinations of a risk analysis are chosen by \"task\": \"risk\", not by \"{}\"",
            spec.task().as_str()
        )
    })
}

/// Local generalization is a search: only `"task": "anonymize"` has one.
fn refuse_local(spec: &JobSpec) -> Result<(), SpecError> {
    refuse(spec.local.is_some(), "local", || {
        format!(
            "local generalization is a search; \"task\": \"{}\" has none",
            spec.task().as_str()
        )
    })
}

/// Writes the CSV of `recoding` to `out`, after measuring it against `run.max_output_bytes`.
fn write_output<R: Recoding + ?Sized>(
    run: &Run<'_>,
    problem: &Problem,
    recoding: &R,
    options: &OutputOptions,
    out: &mut (dyn Write + Send),
) -> Result<Written, TaskError> {
    let output = CsvOutput::new(problem, recoding, options);
    if let Some(limit) = run.max_output_bytes {
        // The output's size is known before anything is written or formatted.
        let bytes = output.size(run.delimiter);
        if bytes > limit {
            return Err(TaskError::OutputTooLarge { bytes, limit });
        }
    }
    output
        .write(out, run.delimiter)
        .map_err(|e| TaskError::Output(e.to_string()))
}

/// Milliseconds of a duration, for reports.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each task refuses the fields it does not use and requires the ones it needs, naming the
    /// field in one readable sentence.
    #[test]
    fn task_fields_are_checked_by_their_task() {
        let qi = r#""attributes": {"age": {"type": "quasi_identifying"}}"#;
        for (json, field) in [
            (r#"{"task": "evaluate"}"#.to_string(), "levels"),
            (r#"{"levels": {"age": 1}}"#.to_string(), "levels"),
            (
                r#"{"task": "risk", "levels": {"age": 1}}"#.to_string(),
                "levels",
            ),
            (
                r#"{"task": "evaluate", "levels": {"age": 1}, "local": {}}"#.to_string(),
                "local",
            ),
            (
                format!(r#"{{"task": "risk", "local": {{}}, {qi}}}"#),
                "local",
            ),
            (
                format!(r#"{{"task": "risk", "privacy": ["k-anonymity(k=2)"], {qi}}}"#),
                "privacy",
            ),
            (
                format!(r#"{{"task": "risk", "research_subset": {{"column": "x"}}, {qi}}}"#),
                "research_subset",
            ),
            (r#"{"task": "risk"}"#.to_string(), "attributes"),
            (
                r#"{"qi_combinations": "all"}"#.to_string(),
                "qi_combinations",
            ),
            (
                r#"{"task": "evaluate", "levels": {"age": 1}, "qi_combinations": "auto"}"#
                    .to_string(),
                "qi_combinations",
            ),
        ] {
            let spec = JobSpec::from_json(&json).unwrap();
            let e = check_fields(&spec).unwrap_err();
            assert_eq!(e.field, field, "{json}: {e}");
            assert!(!e.message.contains("  "), "{json}: {}", e.message);
        }
        for json in [
            r#"{}"#.to_string(),
            r#"{"task": "evaluate", "levels": {"age": 1}}"#.to_string(),
            format!(r#"{{"task": "risk", {qi}}}"#),
            format!(r#"{{"task": "risk", "qi_combinations": "all", {qi}}}"#),
        ] {
            assert!(
                check_fields(&JobSpec::from_json(&json).unwrap()).is_ok(),
                "{json}"
            );
        }
    }

    /// The messages of the `levels` and `local` checks, word for word (each once broken by a
    /// line continuation that left a run of blanks in the sentence).
    #[test]
    fn task_field_messages_read_in_full() {
        for (json, message) in [
            (
                r#"{"task": "evaluate"}"#,
                r#"required by "task": "evaluate": the transformation to evaluate, e.g. {"age": 2, "zip": 1} (quasi-identifiers not named keep level 0)"#,
            ),
            (
                r#"{"levels": {"age": 1}}"#,
                r#"a given transformation is only used by "task": "evaluate", not by "anonymize""#,
            ),
            (
                r#"{"task": "risk", "levels": {"age": 1}}"#,
                r#"a given transformation is only used by "task": "evaluate", not by "risk""#,
            ),
            (
                r#"{"task": "evaluate", "levels": {"age": 1}, "local": {}}"#,
                r#"local generalization is a search; "task": "evaluate" has none"#,
            ),
        ] {
            let e = check_fields(&JobSpec::from_json(json).unwrap()).unwrap_err();
            assert_eq!(e.message, message, "{json}");
        }
    }
}
