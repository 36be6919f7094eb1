//! Verification of released data against a job's privacy models — `deid verify` and
//! `POST /v1/jobs/{id}/verify` (`docs/definitions.md` §3.8). The job's specification says what
//! to check (quasi-identifiers, sensitive attributes, privacy models, suppression mode and
//! marker, count column); the released data are grouped and judged by
//! [`deid_engine::verify`]; the job's input is read only when a model needs it (t-closeness,
//! δ-disclosure, β-likeness, population models, research subsets), as a
//! [`Problem`](deid_engine::Problem) built from the same specification.

use std::io::Read;

use deid_engine::verify::{Released, VerifyConfig, VerifyReport};
use deid_engine::{CancelFlag, EngineError, Table};

use super::error::SpecError;
use super::hierarchy::Frontend;
use super::problem::build_problem;
use super::spec::{AttributeType, JobSpec, Task};

/// What the caller asks besides the job: how to read the released data, what to show.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VerifyRequest {
    /// The released data are a frequency table with this count column (default: the job's
    /// count column, which deid's output of a frequency table keeps).
    pub count_column: Option<String>,
    /// List the quasi-identifier values of violating classes.
    pub show_values: bool,
}

/// Why a verification could not be made (a verdict, passed or not, is no error).
#[derive(Debug)]
pub enum VerifyError {
    /// The job's specification cannot be verified (a risk job), or its input does not fit it.
    Spec(SpecError),
    /// The released data cannot be read: bad CSV, a missing column, a bad count.
    Released(EngineError),
    /// The job's input is not available (no input file given, the dataset deleted).
    NoInput(String),
    /// The job's input cannot be read.
    Input(String),
    /// The work was cancelled.
    Cancelled,
}

impl From<SpecError> for VerifyError {
    fn from(e: SpecError) -> Self {
        VerifyError::Spec(e)
    }
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerifyError::Spec(e) => write!(f, "{}: {}", e.field, e.message),
            VerifyError::Released(e) => write!(f, "{e}"),
            VerifyError::NoInput(message) | VerifyError::Input(message) => f.write_str(message),
            VerifyError::Cancelled => f.write_str("the verification was cancelled"),
        }
    }
}

impl std::error::Error for VerifyError {}

/// What `spec` asks to verify. A risk job has no privacy models: an error naming `task`.
pub fn verify_config(spec: &JobSpec, request: &VerifyRequest) -> Result<VerifyConfig, SpecError> {
    if spec.task() == Task::Risk {
        return Err(SpecError::new(
            "task",
            "a risk job has no privacy models to verify: verify an anonymize or evaluate job",
        ));
    }
    let named = |kind: AttributeType| -> Vec<String> {
        (spec.attributes.iter())
            .filter(|(_, a)| a.kind == kind)
            .map(|(name, _)| name.clone())
            .collect()
    };
    let models = (spec.privacy.iter().enumerate())
        .map(|(i, p)| p.parse(&super::field::privacy(i)))
        .collect::<Result<Vec<_>, _>>()?;
    let options = spec.output_options();
    Ok(VerifyConfig {
        quasi_identifiers: named(AttributeType::QuasiIdentifying),
        sensitive: named(AttributeType::Sensitive),
        models,
        suppressed: options.suppressed,
        marker: options.marker,
        count_column: request
            .count_column
            .clone()
            .or_else(|| spec.count_column.clone()),
        show_values: request.show_values,
    })
}

/// Verifies `released` (CSV with a header, delimited by `delimiter`) against `spec`'s privacy
/// models. `input` loads the job's input table; it is called only when a model needs it.
pub fn verify<R: Read>(
    spec: &JobSpec,
    request: &VerifyRequest,
    released: R,
    delimiter: u8,
    input: impl FnOnce() -> Result<Table, VerifyError>,
    frontend: Frontend<'_>,
    cancel: &CancelFlag,
) -> Result<VerifyReport, VerifyError> {
    let config = verify_config(spec, request)?;
    let needs_input = config.needs_input();
    let released = Released::read(config, released, delimiter, cancel).map_err(|e| match e {
        EngineError::Cancelled => VerifyError::Cancelled,
        e => VerifyError::Released(e),
    })?;
    let problem = match needs_input {
        true => Some(build_problem(spec, input()?, frontend)?),
        false => None,
    };
    if cancel.is_cancelled() {
        return Err(VerifyError::Cancelled);
    }
    deid_engine::verify::verify(&released, problem.as_ref()).map_err(VerifyError::Released)
}
