//! The error vocabulary shared by every front end: [`ErrorCode`] (one code table for API errors
//! and job failures, each code with its HTTP status) and [`SpecError`] (what is wrong with a job
//! specification, and where).

use serde::{Deserialize, Serialize};

/// Declares [`ErrorCode`] with its wire name and HTTP status in one table.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = ($name:literal, $status:literal),)*) => {
        /// Every machine-readable error code of the service: the `code` of an API error body and
        /// of a failed job's `error`. Listed in `openapi.yaml` (`ErrorCode`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum ErrorCode {
            $($(#[$doc])* #[serde(rename = $name)] $variant,)*
        }

        impl ErrorCode {
            /// Every code, in table order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The code as sent to clients (`job_not_found`).
            pub fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $name,)* }
            }

            /// The HTTP status of an API error with this code (job failures report the status
            /// the same error would have had in a request).
            pub fn status(self) -> u16 {
                match self { $(ErrorCode::$variant => $status,)* }
            }
        }
    };
}

error_codes! {
    /// The body is not valid JSON.
    MalformedJson = ("malformed_json", 400),
    /// A query parameter is invalid.
    InvalidQuery = ("invalid_query", 400),
    /// The request is malformed otherwise (multipart form, body cannot be read).
    InvalidRequest = ("invalid_request", 400),
    /// The upload ended before the body was complete.
    UploadInterrupted = ("upload_interrupted", 400),
    /// No valid API key.
    Unauthorized = ("unauthorized", 401),
    /// No such route.
    RouteNotFound = ("route_not_found", 404),
    /// No such dataset for this tenant.
    DatasetNotFound = ("dataset_not_found", 404),
    /// No such job for this tenant.
    JobNotFound = ("job_not_found", 404),
    /// The dataset has no such column.
    ColumnNotFound = ("column_not_found", 404),
    /// No hierarchy is stored for the column.
    HierarchyNotFound = ("hierarchy_not_found", 404),
    /// The method is not allowed on this route.
    MethodNotAllowed = ("method_not_allowed", 405),
    /// The server did not answer within the request time limit (a server-side timeout).
    RequestTimeout = ("request_timeout", 503),
    /// A queued or running job uses the dataset.
    DatasetInUse = ("dataset_in_use", 409),
    /// The job has already ended.
    JobFinished = ("job_finished", 409),
    /// The job has no result (yet).
    ResultNotAvailable = ("result_not_available", 409),
    /// The body is larger than the limit.
    PayloadTooLarge = ("payload_too_large", 413),
    /// The dataset has more rows than the limit.
    TooManyRows = ("too_many_rows", 413),
    /// The dataset has more columns than the limit.
    TooManyColumns = ("too_many_columns", 413),
    /// The job specification is invalid (`details.field` names the setting).
    InvalidSpec = ("invalid_spec", 422),
    /// The CSV cannot be read.
    InvalidCsv = ("invalid_csv", 422),
    /// A hierarchy is invalid.
    InvalidHierarchy = ("invalid_hierarchy", 422),
    /// A hierarchy has no row for values of the data (listed in `details.missing`).
    HierarchyMissingValues = ("hierarchy_missing_values", 422),
    /// Job failure: no transformation satisfies the privacy models within the limits; the
    /// job's result has its report (the input's risks, the search's trace).
    NoSolution = ("no_solution", 422),
    /// Job failure (`"task": "evaluate"`): the given transformation does not satisfy the
    /// privacy models within the suppression limit; the job's result has its report.
    NotAnonymous = ("not_anonymous", 422),
    /// The job's output would be larger than the server's limit (`--max-output-bytes`):
    /// refused at submission when the dataset alone shows it, otherwise the job fails before
    /// anything is written. `details` has `bytes` (or `min_bytes`) and `limit`.
    OutputTooLarge = ("output_too_large", 422),
    /// Too many synchronous risk analyses run at once (`--max-risk-requests`); try again after
    /// `Retry-After`, or queue a job with `"task": "risk"`.
    TooManyRequests = ("too_many_requests", 429),
    /// Too many jobs are waiting.
    QueueFull = ("queue_full", 429),
    /// An unexpected failure; the server log has the details.
    InternalError = ("internal_error", 500),
    /// Job failure: the database failed while the job ran.
    StorageError = ("storage_error", 500),
    /// Job failure: the stored dataset could not be read.
    DatasetUnreadable = ("dataset_unreadable", 500),
    /// Job failure: its worker stopped (crash, out of memory, lost lease) while running it
    /// twice, or its attempts are used up; it is not run again.
    WorkerLost = ("worker_lost", 500),
    /// The service is not ready (database unreachable, shutting down).
    NotReady = ("not_ready", 503),
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A specification error: which field, what is wrong. The code is `invalid_spec` unless the
/// error is about a hierarchy (`invalid_hierarchy`) or its coverage of the data
/// (`hierarchy_missing_values`, with the missing values in `details`).
#[derive(Debug, Clone, PartialEq)]
pub struct SpecError {
    /// The error code.
    pub code: ErrorCode,
    /// Dotted path of the offending field, e.g. `attributes.age.hierarchy`.
    pub field: String,
    /// What is wrong and what was expected.
    pub message: String,
    /// Structured details besides the field (missing values, limits, …).
    pub details: Option<serde_json::Value>,
}

impl SpecError {
    /// An `invalid_spec` error for `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        SpecError {
            code: ErrorCode::InvalidSpec,
            field: field.into(),
            message: message.into(),
            details: None,
        }
    }

    /// The same error with another code.
    pub fn with_code(mut self, code: ErrorCode) -> Self {
        self.code = code;
        self
    }

    /// The same error with details (merged with `field` in the API's `details`).
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(details);
        self
    }

    /// The message clients see: "invalid value for '…': …", except for missing hierarchy
    /// values, whose message stands alone (the values are in the details).
    pub fn client_message(&self) -> String {
        match self.code {
            ErrorCode::HierarchyMissingValues => self.message.clone(),
            _ => self.to_string(),
        }
    }

    /// The details clients see: `field` and the error's own details.
    pub fn client_details(&self) -> serde_json::Value {
        let mut details = serde_json::json!({ "field": self.field });
        if let (Some(serde_json::Value::Object(extra)), Some(map)) =
            (&self.details, details.as_object_mut())
        {
            map.extend(extra.clone());
        }
        details
    }
}

impl std::fmt::Display for SpecError {
    /// `invalid value for '<field>': <message>`, with examples of missing hierarchy values.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid value for '{}': {}", self.field, self.message)?;
        let missing = self.details.as_ref().and_then(|d| d["missing"].as_array());
        if let (ErrorCode::HierarchyMissingValues, Some(values)) = (self.code, missing) {
            let examples: Vec<String> = values
                .iter()
                .filter_map(|v| v.as_str())
                .map(|v| format!("'{v}'"))
                .collect();
            write!(f, ", e.g. {}", examples.join(", "))?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecError {}

impl From<deid_engine::EngineError> for SpecError {
    /// The one mapping of engine errors to specification errors: configuration errors keep
    /// their field, a hierarchy missing values of the data lists them (code
    /// `hierarchy_missing_values`), anything else is about the data.
    fn from(e: deid_engine::EngineError) -> Self {
        use deid_engine::EngineError;
        if let Some((field, message)) = e.config_error() {
            return SpecError::new(field, message);
        }
        match e {
            EngineError::HierarchyMissingValues {
                column,
                missing,
                total_missing,
            } => {
                let field = super::field::hierarchy(&column);
                SpecError::new(
                    field,
                    format!(
                        "the hierarchy of column '{column}' has no row for {total_missing} value(s) of the data"
                    ),
                )
                .with_code(ErrorCode::HierarchyMissingValues)
                .with_details(serde_json::json!({
                    "column": column,
                    "missing": missing,
                    "total_missing": total_missing,
                }))
            }
            EngineError::HierarchyMissingLabels {
                column,
                level,
                missing,
                total_missing,
            } => SpecError::new(
                format!("{}.data_level", super::field::attribute(&column)),
                format!(
                    "the hierarchy of column '{column}' has no label at level {level} (the \
                     data_level) for {total_missing} value(s) of the data"
                ),
            )
            .with_code(ErrorCode::HierarchyMissingValues)
            .with_details(serde_json::json!({
                "column": column,
                "level": level,
                "missing": missing,
                "total_missing": total_missing,
            })),
            other => SpecError::new("data", other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_round_trip() {
        let mut names: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ErrorCode::ALL.len());
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            assert_eq!(serde_json::from_str::<ErrorCode>(&json).unwrap(), *code);
            assert!((400..600).contains(&code.status()));
        }
    }
}
