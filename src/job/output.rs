//! The size of a job's output as far as it is known before the job runs: the service refuses a
//! job at submission (422 `output_too_large`) when its output cannot fit `--max-output-bytes`,
//! and the worker measures the exact size before writing (`deid_engine::output::CsvOutput::size`).

use super::error::{ErrorCode, SpecError};
use super::spec::{AttributeType, JobSpec, SuppressedSpec};

/// The fewest bytes the anonymized CSV of `spec` on a dataset with `columns` and `rows` data
/// rows can have: the header's names, and per row one delimiter between output columns and a
/// line end (every row is written unless suppressed records may be removed or a research
/// subset selects rows: then the rows count for nothing). A frequency table's `rows` are its
/// rows, not its records: one output row per row.
pub fn min_output_bytes(spec: &JobSpec, columns: &[String], rows: u64) -> u64 {
    let kept: Vec<&String> = columns
        .iter()
        .filter(|c| {
            spec.attributes
                .get(*c)
                .is_none_or(|a| a.kind != AttributeType::Identifying)
        })
        .collect();
    let header: u64 = kept.iter().map(|c| c.len() as u64 + 1).sum();
    let every_row = spec.suppressed != Some(SuppressedSpec::Remove)
        && spec.research_subset.is_none()
        && spec.subset_count_column.is_none();
    let per_row = if every_row {
        kept.len().max(1) as u64
    } else {
        0
    };
    header + per_row * rows
}

/// Refuses `spec` if its output cannot fit `limit` bytes (see [`min_output_bytes`]).
pub fn check_output_size(
    spec: &JobSpec,
    columns: &[String],
    rows: u64,
    limit: u64,
) -> Result<(), SpecError> {
    let min = min_output_bytes(spec, columns, rows);
    if min <= limit {
        return Ok(());
    }
    Err(SpecError::new(
        "dataset_id",
        format!(
            "the anonymized CSV of this dataset has at least {min} bytes, more than the server's \
             limit of {limit} bytes (DEID_MAX_OUTPUT_BYTES)"
        ),
    )
    .with_code(ErrorCode::OutputTooLarge)
    .with_details(serde_json::json!({"min_bytes": min, "limit": limit})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_output_counts_delimiters_and_line_ends_of_kept_columns() {
        let columns = vec!["id".to_string(), "g".to_string(), "v".to_string()];
        let spec =
            JobSpec::from_json(r#"{"attributes": {"id": {"type": "identifying"}}}"#).unwrap();
        // Header "g;v\n" (4 bytes), each row at least ";\n".
        assert_eq!(min_output_bytes(&spec, &columns, 10), 4 + 20);
        assert!(check_output_size(&spec, &columns, 10, 24).is_ok());
        let e = check_output_size(&spec, &columns, 10, 23).unwrap_err();
        assert_eq!(
            (e.code, e.field.as_str()),
            (ErrorCode::OutputTooLarge, "dataset_id")
        );
        let remove = JobSpec::from_json(r#"{"suppressed": "remove"}"#).unwrap();
        assert_eq!(min_output_bytes(&remove, &columns, 10), 7);
    }
}
