//! Resolving the hierarchy of a column from its source in a job specification — an ARX CSV file
//! (command line), CSV given inline, a builder specification, or the hierarchy stored for the
//! column (service; inlined when the job is created) — with one set of rules for every front end.

use std::path::Path;

use deid_engine::{DuplicatePolicy, EngineError, Hierarchy, HierarchySpec, Table};

use super::error::{ErrorCode, SpecError};
use super::spec::HierarchySource;

/// The front end resolving a specification: it decides which sources exist and what the errors
/// suggest.
#[derive(Debug, Clone, Copy)]
pub enum Frontend<'a> {
    /// The command line: files are read relative to `base`; nothing is stored.
    Cli {
        /// Directory that relative hierarchy paths start from.
        base: &'a Path,
    },
    /// The service: no file paths; stored hierarchies were inlined when the job was created.
    Service,
}

/// Resolves the hierarchy of `column` from `source`. Builder specifications are built against
/// the column of `table`; without a table (or without the column in it) they are only checked
/// and a one-level placeholder is returned. Errors name `attributes.{column}.hierarchy` and have
/// the code `invalid_hierarchy` (a malformed delimiter is `invalid_spec`). `duplicates` decides
/// about values listed in several rows of a CSV table with different generalizations.
pub fn resolve(
    frontend: Frontend<'_>,
    table: Option<&Table>,
    column: &str,
    source: Option<&HierarchySource>,
    duplicates: DuplicatePolicy,
) -> Result<Hierarchy, SpecError> {
    let field = super::field::hierarchy(column);
    let invalid = |message: String| {
        SpecError::new(field.as_str(), message).with_code(ErrorCode::InvalidHierarchy)
    };
    match (source, frontend) {
        (None, Frontend::Cli { .. }) => Err(invalid(
            "a quasi-identifier needs a hierarchy (e.g. --hierarchy COLUMN=FILE)".into(),
        )),
        (None, Frontend::Service) => Err(invalid(
            "a quasi-identifier needs a hierarchy: upload one with PUT /v1/datasets/{id}/hierarchies/{column} \
             and use {\"stored\": true}, or give {\"csv\": \"…\"} inline"
                .into(),
        )),
        (Some(HierarchySource::File { file, delimiter }), Frontend::Cli { base }) => {
            let path = if file.is_absolute() {
                file.clone()
            } else {
                base.join(file)
            };
            if path.extension().is_some_and(|e| e == "json") {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| invalid(format!("cannot read {}: {e}", path.display())))?;
                let value: serde_json::Value = serde_json::from_str(&text)
                    .map_err(|e| invalid(format!("{} is not valid JSON: {e}", path.display())))?;
                return from_builder(&value, table, column, &field);
            }
            let text = std::fs::read(&path)
                .map_err(|e| invalid(format!("cannot open {}: {e}", path.display())))?;
            from_csv_with(&text, *delimiter, column, &field, duplicates)
        }
        (Some(HierarchySource::File { .. }), Frontend::Service) => Err(invalid(
            "file paths are not accepted by the service; upload the hierarchy or give it inline"
                .into(),
        )),
        (Some(HierarchySource::Inline { csv, delimiter }), _) => {
            from_csv_with(csv.as_bytes(), *delimiter, column, &field, duplicates)
        }
        (Some(HierarchySource::Stored { .. }), Frontend::Cli { .. }) => Err(invalid(
            "stored hierarchies exist only in the service; give a file or inline CSV".into(),
        )),
        (Some(HierarchySource::Stored { .. }), Frontend::Service) => Err(invalid(
            "stored hierarchies are resolved when the job is created".into(),
        )),
        (Some(HierarchySource::Builder(value)), _) => from_builder(value, table, column, &field),
    }
}

/// Parses a builder specification (`{"type": "interval", …}`) with an error naming `field`.
pub fn parse_builder(value: &serde_json::Value, field: &str) -> Result<HierarchySpec, SpecError> {
    serde_json::from_value(value.clone()).map_err(|e| {
        SpecError::new(
            field,
            format!(
                "invalid hierarchy specification: {e}; expected an object with \"type\": interval, order, masking, date or suppression"
            ),
        )
        .with_code(ErrorCode::InvalidHierarchy)
    })
}

/// The delimiter of a hierarchy table whose delimiter was not given: of `;`, `,`, tab and `|`
/// the one that gives its first rows one width, else the most frequent in the first line (`;`,
/// ARX's default, on ties): [`deid_engine::data::sniff_rows_delimiter`].
pub fn sniff_delimiter(text: &[u8]) -> u8 {
    deid_engine::data::sniff_rows_delimiter(text, b';')
}

/// A delimiter as a byte, or an error naming `field` if it is not one ASCII character.
pub fn delimiter_byte(c: char, field: &str) -> Result<u8, SpecError> {
    u8::try_from(c)
        .ok()
        .filter(|b| b.is_ascii())
        .ok_or_else(|| {
            SpecError::new(
                field,
                format!("the delimiter must be one ASCII character, got '{c}'"),
            )
        })
}

/// Parses an ARX hierarchy table given as text (delimiter sniffed unless given).
pub fn from_csv(
    text: &[u8],
    delimiter: Option<char>,
    column: &str,
    field: &str,
) -> Result<Hierarchy, SpecError> {
    from_csv_with(text, delimiter, column, field, DuplicatePolicy::Reject)
}

/// [`from_csv`] with a policy for values listed in several rows with different
/// generalizations; the rejection says how to accept them.
pub fn from_csv_with(
    text: &[u8],
    delimiter: Option<char>,
    column: &str,
    field: &str,
    duplicates: DuplicatePolicy,
) -> Result<Hierarchy, SpecError> {
    let d = match delimiter {
        Some(c) => delimiter_byte(c, &format!("{field}.delimiter"))?,
        None => sniff_delimiter(text),
    };
    Hierarchy::read_csv_with(text, d, column, duplicates).map_err(|e| {
        let mut message = e.to_string();
        if matches!(e, EngineError::HierarchyDuplicateValues { .. }) {
            message.push_str(
                "; to use the last row of each value as ARX does, set \"hierarchy_duplicates\": \
                 \"last\" (command line: --hierarchy-duplicates last)",
            );
        }
        if delimiter.is_none() && matches!(e, EngineError::HierarchyRaggedRow { .. }) {
            message.push_str(&format!(
                " (the delimiter '{}' was detected; set \"delimiter\" in {field} if it is \
                 another)",
                (d as char).escape_default()
            ));
        }
        SpecError::new(field, message).with_code(ErrorCode::InvalidHierarchy)
    })
}

/// Builds a hierarchy from a builder specification for `column` of `table`. Without the column
/// the specification is only validated and a one-level placeholder is returned.
pub fn from_builder(
    value: &serde_json::Value,
    table: Option<&Table>,
    column: &str,
    field: &str,
) -> Result<Hierarchy, SpecError> {
    let spec = parse_builder(value, field)?;
    // The message names the column and the path inside its specification.
    let context = format!("hierarchies.{column}");
    let on_field = |e: EngineError| {
        SpecError::new(field, e.within(&context).to_string()).with_code(ErrorCode::InvalidHierarchy)
    };
    spec.validate().map_err(on_field)?;
    match table.and_then(|t| t.column_index(column).map(|i| t.column(i))) {
        Some(col) => spec.build(col).map_err(on_field),
        None => Hierarchy::from_rows(vec![vec![String::new()]], column).map_err(on_field),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delimiters_are_sniffed_with_semicolon_on_ties() {
        assert_eq!(sniff_delimiter(b"a;b,c\n"), b';');
        assert_eq!(sniff_delimiter(b"a,b,c;d\n"), b',');
        assert_eq!(sniff_delimiter(b"single\n"), b';');
        assert_eq!(sniff_delimiter(b"a\tb\n"), b'\t');
        // A value with commas on the first line: every row has one ';'.
        assert_eq!(sniff_delimiter(b"x,y;x,y\n18;L1\n"), b';');
        let h = from_csv(b"x,y;x,y\n18;L1\n", None, "a", "attributes.a.hierarchy").unwrap();
        assert_eq!(h.height(), 2);
        // A shape error says which delimiter was detected.
        let err = from_csv(b"a;*\nb;c;*\n", None, "a", "attributes.a.hierarchy").unwrap_err();
        assert!(
            err.message.contains("row 2 has 3 levels, expected 2")
                && err.message.contains("the delimiter ';' was detected"),
            "{}",
            err.message
        );
        let err = from_csv(b"a;*\nb;c;*\n", Some(';'), "a", "f").unwrap_err();
        assert!(!err.message.contains("detected"), "{}", err.message);
        let err = delimiter_byte('é', "delimiter").unwrap_err();
        assert!(err.message.contains("'é'"));
    }

    #[test]
    fn each_front_end_has_its_sources() {
        let inline = HierarchySource::Inline {
            csv: "a;*\nb;*\n".into(),
            delimiter: None,
        };
        let cli = Frontend::Cli {
            base: Path::new("."),
        };
        for frontend in [cli, Frontend::Service] {
            let h = resolve(frontend, None, "c", Some(&inline), DuplicatePolicy::Reject).unwrap();
            assert_eq!(h.height(), 2);
            let err = resolve(frontend, None, "c", None, DuplicatePolicy::Reject).unwrap_err();
            assert_eq!(err.field, "attributes.c.hierarchy");
            assert_eq!(err.code, ErrorCode::InvalidHierarchy);
        }
        let stored = HierarchySource::Stored { stored: true };
        assert!(
            resolve(cli, None, "c", Some(&stored), DuplicatePolicy::Reject)
                .unwrap_err()
                .message
                .contains("only in the service")
        );
        let file = HierarchySource::File {
            file: "h.csv".into(),
            delimiter: None,
        };
        assert!(
            resolve(
                Frontend::Service,
                None,
                "c",
                Some(&file),
                DuplicatePolicy::Reject
            )
            .unwrap_err()
            .message
            .contains("file paths")
        );
        let bad = HierarchySource::Inline {
            csv: "a".into(),
            delimiter: Some('é'),
        };
        let err = resolve(cli, None, "c", Some(&bad), DuplicatePolicy::Reject).unwrap_err();
        assert_eq!(
            (err.field.as_str(), err.code),
            ("attributes.c.hierarchy.delimiter", ErrorCode::InvalidSpec)
        );
    }
}
