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
        /// Name of the input (file name, "dataset", "hierarchy of `<column>`").
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
    /// Data given at a level of the hierarchy (`data_level`) have values that are no label of
    /// that level.
    #[error(
        "hierarchy of column '{column}' has no label at level {level} (the data_level) for {total_missing} value(s) of the data, e.g. {}",
        .missing.iter().map(|v| format!("'{v}'")).collect::<Vec<_>>().join(", ")
    )]
    HierarchyMissingLabels {
        /// The quasi-identifier.
        column: String,
        /// The level the data are given at.
        level: usize,
        /// The first values that are no label of the level (at most 10).
        missing: Vec<String>,
        /// How many distinct values are no label of the level in total.
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
    /// Original values appear in several rows with different generalizations.
    #[error(
        "hierarchy of column '{column}': {} value(s) appear in several rows with different generalizations: {}",
        .duplicates.len(),
        list_duplicates(.duplicates)
    )]
    HierarchyDuplicateValues {
        /// The quasi-identifier.
        column: String,
        /// Every conflicting value with all its rows, in order of first appearance.
        duplicates: Vec<DuplicateValue>,
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
    ///
    /// `field` is a path *relative to the object validated by the function that returns the
    /// error*: keys joined by `.`, list positions in brackets (`l`, `genetic.elite_fraction`,
    /// `intervals[2]`, `privacy[1].k`); the empty path stands for that object as a whole. A caller
    /// that validates a part of a larger object prepends the part's position with
    /// [`EngineError::within`]: [`PrivacyModel::from_params`](crate::PrivacyModel::from_params)
    /// names `k`, [`Problem::new`](crate::Problem::new) turns that into `privacy[1].k`.
    #[error("invalid value for '{field}': {message}")]
    InvalidConfig {
        /// Path of the offending field (see above).
        field: String,
        /// What is wrong and what was expected.
        message: String,
    },
    /// A privacy model requires larger classes than the data has records, so no transformation
    /// can fulfil it.
    #[error(
        "invalid value for '{field}': {model} requires classes of at least {required} records but the data has only {rows}"
    )]
    TooFewRecords {
        /// Path of the privacy model (e.g. `privacy[0]`), relative like
        /// [`EngineError::InvalidConfig`]'s.
        field: String,
        /// Name of the model (e.g. `k-anonymity`).
        model: String,
        /// The minimal class size the model implies.
        required: u32,
        /// Records of the data.
        rows: usize,
    },
    /// A privacy model needs a population model (the population's size, a sampling fraction or
    /// a region) and the configuration has none. Each front end says how to give one.
    #[error("invalid value for 'population': {model} ({position}) needs a population model")]
    NeedsPopulation {
        /// Name of the model.
        model: String,
        /// Its position in the configuration (`privacy[0]`; empty until [`EngineError::within`]).
        position: String,
    },
    /// A privacy model needs a research subset — the records to release from a table that is
    /// the population — and the configuration has none. Each front end says how to give one.
    #[error(
        "invalid value for 'research_subset': {model} ({position}) needs a research subset, the records to release"
    )]
    NeedsResearchSubset {
        /// Name of the model.
        model: String,
        /// Its position in the configuration (`privacy[0]`).
        position: String,
    },
    /// The output could not be written.
    #[error("writing the output failed: {0}")]
    Output(String),
    /// The work was cancelled through its [`CancelFlag`](crate::cancel::CancelFlag) before it
    /// ended (e.g. a hierarchy build whose HTTP request was abandoned).
    #[error("cancelled before it ended")]
    Cancelled,
    /// A safety check of the engine failed (a bug, never the user's input): the result was
    /// discarded.
    #[error("internal error: {0}")]
    Internal(String),
}

impl EngineError {
    /// Shorthand for [`EngineError::InvalidConfig`].
    pub fn config(field: impl Into<String>, message: impl Into<String>) -> Self {
        EngineError::InvalidConfig {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The error with `prefix` (the position of the validated object inside the caller's) put
    /// in front of its field path: `k` within `privacy[1]` is `privacy[1].k`, `[2]` within
    /// `intervals` is `intervals[2]`, the empty path within `privacy[1]` is `privacy[1]`. Errors
    /// without a field path are returned unchanged.
    pub fn within(self, prefix: &str) -> Self {
        match self {
            EngineError::InvalidConfig { field, message } => EngineError::InvalidConfig {
                field: join_path(prefix, &field),
                message,
            },
            EngineError::TooFewRecords {
                field,
                model,
                required,
                rows,
            } => EngineError::TooFewRecords {
                field: join_path(prefix, &field),
                model,
                required,
                rows,
            },
            EngineError::NeedsPopulation { model, position } => EngineError::NeedsPopulation {
                model,
                position: join_path(prefix, &position),
            },
            EngineError::NeedsResearchSubset { model, position } => {
                EngineError::NeedsResearchSubset {
                    model,
                    position: join_path(prefix, &position),
                }
            }
            other => other,
        }
    }

    /// For an error about a configuration value ([`EngineError::InvalidConfig`],
    /// [`EngineError::TooFewRecords`], [`EngineError::NeedsPopulation`],
    /// [`EngineError::NeedsResearchSubset`]): its field path and what is wrong (the text after
    /// `invalid value for '<field>': `). `None` for errors about the data or the output.
    pub fn config_error(&self) -> Option<(&str, String)> {
        match self {
            EngineError::InvalidConfig { field, message } => Some((field, message.clone())),
            EngineError::TooFewRecords {
                field,
                model,
                required,
                rows,
            } => Some((
                field,
                format!(
                    "{model} requires classes of at least {required} records but the data has only {rows}"
                ),
            )),
            EngineError::NeedsPopulation { model, position } => Some((
                "population",
                format!("{model} ({position}) needs a population model"),
            )),
            EngineError::NeedsResearchSubset { model, position } => Some((
                "research_subset",
                format!("{model} ({position}) needs a research subset, the records to release"),
            )),
            _ => None,
        }
    }
}

/// `prefix` followed by the relative path `field` (see [`EngineError::InvalidConfig`]).
fn join_path(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_string()
    } else if field.is_empty() {
        prefix.to_string()
    } else if field.starts_with('[') {
        format!("{prefix}{field}")
    } else {
        format!("{prefix}.{field}")
    }
}

/// A value listed in several rows of a hierarchy table with different generalizations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateValue {
    /// The level-0 value.
    pub value: String,
    /// Every 1-based row of the table that lists it, ascending.
    pub rows: Vec<usize>,
}

/// `'v' (rows 1, 3), 'w' (rows 2, 4)`: the duplicates of an error message or warning.
pub fn list_duplicates(duplicates: &[DuplicateValue]) -> String {
    duplicates
        .iter()
        .map(|d| {
            let rows: Vec<String> = d.rows.iter().map(usize::to_string).collect();
            format!("'{}' (rows {})", d.value, rows.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_compose() {
        let e = EngineError::config("k", "too small").within("privacy[1]");
        assert_eq!(e, EngineError::config("privacy[1].k", "too small"));
        let e = EngineError::config("[2]", "overlaps").within("intervals");
        assert_eq!(e, EngineError::config("intervals[2]", "overlaps"));
        let e = EngineError::config("", "unknown model").within("privacy[0]");
        assert_eq!(e, EngineError::config("privacy[0]", "unknown model"));
        let e = EngineError::config("elite_fraction", "too large")
            .within("genetic")
            .within("");
        assert_eq!(
            e,
            EngineError::config("genetic.elite_fraction", "too large")
        );
        let e = EngineError::Output("disk full".into()).within("x");
        assert_eq!(e, EngineError::Output("disk full".into()));
    }

    #[test]
    fn too_few_records_reads_like_an_invalid_value() {
        let e = EngineError::TooFewRecords {
            field: String::new(),
            model: "k-anonymity".into(),
            required: 5,
            rows: 3,
        }
        .within("privacy[0]");
        let (field, message) = e.config_error().expect("a configuration error");
        assert_eq!(field, "privacy[0]");
        assert_eq!(
            e.to_string(),
            EngineError::config(field, message).to_string()
        );
        assert_eq!(
            e.to_string(),
            "invalid value for 'privacy[0]': k-anonymity requires classes of at least 5 records \
             but the data has only 3"
        );
        assert_eq!(EngineError::Output("x".into()).config_error(), None);
    }
}
