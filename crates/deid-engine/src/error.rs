//! Errors of the engine: every variant names the culprit (file, row, column, value or field) so
//! that the CLI and the HTTP layer can show the user exactly what to fix.

/// Convenient result alias for the engine.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// Everything that can go wrong while importing data, validating hierarchies or configuring a problem.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum EngineError {
    /// The CSV input contains no header and no rows.
    #[error("{source_name}: the file is empty")]
    EmptyInput {
        /// Name of the input (file name, "dataset", "hierarchy of <column>").
        source_name: String,
    },
    /// A row has a different number of fields than the header (or the first row).
    #[error("{source_name}: row {row} has {found} fields, expected {expected}")]
    RaggedRow {
        /// Name of the input.
        source_name: String,
        /// 1-based line/record number (header = 1).
        row: u64,
        /// Fields expected.
        expected: usize,
        /// Fields found.
        found: usize,
    },
    /// A field is not valid UTF-8.
    #[error("{source_name}: row {row}, column {column}: the value is not valid UTF-8")]
    InvalidUtf8 {
        /// Name of the input.
        source_name: String,
        /// 1-based record number.
        row: u64,
        /// 1-based column number.
        column: usize,
    },
    /// Any other CSV syntax problem.
    #[error("{source_name}: {message}")]
    Csv {
        /// Name of the input.
        source_name: String,
        /// What the CSV parser reported.
        message: String,
    },
    /// Two columns of the header have the same name.
    #[error("column name '{name}' occurs more than once in the header")]
    DuplicateColumn {
        /// The duplicated name.
        name: String,
    },
    /// A column named in the configuration does not exist in the data.
    #[error("unknown column '{name}' in {field}; the data has the columns: {available}")]
    UnknownColumn {
        /// The name that was not found.
        name: String,
        /// Where it was named (e.g. "attributes", "privacy model t-closeness").
        field: String,
        /// Comma-separated list of the existing columns.
        available: String,
    },
    /// The hierarchy lacks rows for values that occur in the data.
    #[error(
        "hierarchy of column '{column}' has no row for {total_missing} value(s) of the data, e.g. {}",
        .missing.iter().map(|v| format!("'{v}'")).collect::<Vec<_>>().join(", ")
    )]
    HierarchyMissingValues {
        /// The quasi-identifier.
        column: String,
        /// The first missing values (at most 10).
        missing: Vec<String>,
        /// How many distinct values are missing in total.
        total_missing: usize,
    },
    /// Hierarchy rows differ in length.
    #[error("hierarchy of column '{column}': row {row} has {found} levels, expected {expected}")]
    HierarchyRaggedRow {
        /// The quasi-identifier.
        column: String,
        /// 1-based row of the hierarchy file.
        row: usize,
        /// Levels expected (length of the first row).
        expected: usize,
        /// Levels found.
        found: usize,
    },
    /// The same original value appears twice with different generalizations.
    #[error(
        "hierarchy of column '{column}': value '{value}' appears in rows {first_row} and {second_row} with different generalizations"
    )]
    HierarchyDuplicateValue {
        /// The quasi-identifier.
        column: String,
        /// The duplicated level-0 value.
        value: String,
        /// 1-based row of the first occurrence.
        first_row: usize,
        /// 1-based row of the conflicting occurrence.
        second_row: usize,
    },
    /// A value of level l generalizes to two different values at level l+1.
    #[error(
        "hierarchy of column '{column}' is not monotone: level-{level} value '{value}' generalizes to both '{first}' and '{second}' at level {}",
        .level + 1
    )]
    HierarchyNotMonotone {
        /// The quasi-identifier.
        column: String,
        /// The level of the ambiguous value.
        level: usize,
        /// The ambiguous value.
        value: String,
        /// One of its parents.
        first: String,
        /// Another of its parents.
        second: String,
    },
    /// A configuration value is invalid.
    #[error("invalid value for '{field}': {message}")]
    InvalidConfig {
        /// Which configuration field (dotted path, e.g. `privacy[1].l`).
        field: String,
        /// What is wrong and what was expected.
        message: String,
    },
    /// The output could not be written.
    #[error("writing the output failed: {0}")]
    Output(String),
}

impl EngineError {
    /// Shorthand for [`EngineError::InvalidConfig`].
    pub fn config(field: impl Into<String>, message: impl Into<String>) -> Self {
        EngineError::InvalidConfig {
            field: field.into(),
            message: message.into(),
        }
    }
}
