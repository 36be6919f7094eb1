//! Datasets: upload (the streaming itself is [`super::upload`]), listing, deletion, and the
//! stored distinct values of their columns (the hierarchies of their columns are in
//! [`super::hierarchies`]).

use std::collections::BTreeMap;
use std::io::Read;

use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::error::{ApiError, ErrorCode, Result};
use super::extract::ApiQuery;
use super::state::AppState;
use crate::config::ServeArgs;
use crate::job::id::{DatasetId, TenantId};
use crate::job::view::rfc3339;
use crate::store::datasets::{DatasetRow, DeleteOutcome, HierarchyLevels};
use deid_engine::data::Column;
use deid_engine::{ColumnKind, CsvOptions, EngineError};

/// Distinct values of a column are kept (for validation) up to this many.
pub const MAX_STORED_VALUES: usize = 100_000;

/// Profile of one column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnProfile {
    /// Header name.
    pub name: String,
    /// `integer`, `decimal`, `date`, `code` (fixed-length digit strings) or `text`.
    pub detected_type: String,
    /// Number of distinct values.
    pub distinct_count: u64,
    /// Format of a `date` column, e.g. `dd.MM.yyyy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date_format: Option<String>,
    /// Number of digits of a `code` column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_length: Option<usize>,
    /// Missing-value markers found (`NA`, `?`, empty, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// A hierarchy builder specification that fits the column (usable as
    /// `"hierarchy": {…}` in a job); absent for columns with too many distinct values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggested_hierarchy: Option<serde_json::Value>,
}

/// A dataset as returned by the API.
#[derive(Debug, Clone, Serialize)]
pub struct DatasetView {
    /// Dataset id.
    pub id: DatasetId,
    /// Name given at upload.
    pub name: String,
    /// Field delimiter.
    pub delimiter: String,
    /// Whether the first record was a header.
    pub header: bool,
    /// Size of the CSV in bytes.
    pub size_bytes: i64,
    /// Data rows.
    pub rows: i64,
    /// Column profiles, in file order.
    pub columns: Vec<ColumnProfile>,
    /// Columns with a stored hierarchy → number of levels.
    pub hierarchies: BTreeMap<String, i64>,
    /// Columns with a stored hierarchy → `csv` (an uploaded table) or `builder` (a
    /// specification). A separate map so that `hierarchies` keeps its shape.
    pub hierarchy_kinds: BTreeMap<String, String>,
    /// Upload time (RFC 3339).
    pub created_at: String,
}

impl DatasetView {
    fn new(row: &DatasetRow, hierarchies: Vec<HierarchyLevels>) -> DatasetView {
        DatasetView {
            id: row.id.clone(),
            name: row.name.clone(),
            delimiter: row.delimiter.clone(),
            header: row.has_header != 0,
            size_bytes: row.size_bytes,
            rows: row.row_count,
            columns: serde_json::from_str(&row.columns).unwrap_or_default(),
            hierarchy_kinds: hierarchies
                .iter()
                .map(|h| (h.column_name.clone(), h.kind.clone()))
                .collect(),
            hierarchies: hierarchies
                .into_iter()
                .map(|h| (h.column_name, h.levels))
                .collect(),
            created_at: rfc3339(row.created_at),
        }
    }
}

/// Query parameters of an upload.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UploadParams {
    /// Display name (default: the multipart file name or `dataset`).
    pub name: Option<String>,
    /// Field delimiter: one ASCII character, or `tab` (default `,`).
    pub delimiter: Option<String>,
    /// Whether the first record is a header (default true).
    pub header: Option<bool>,
}

/// Paging parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageParams {
    /// Page size, 1..=100 (default 20).
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<DatasetId>,
}

/// Checks a page size.
pub fn page_limit(limit: Option<i64>) -> Result<i64> {
    match limit {
        None => Ok(20),
        Some(l) if (1..=100).contains(&l) => Ok(l),
        Some(l) => Err(ApiError::new(
            ErrorCode::InvalidQuery,
            format!("limit must be in 1..=100, got {l}"),
        )
        .with_details(json!({"field": "limit"}))),
    }
}

/// Parses a delimiter parameter.
pub fn parse_delimiter(text: Option<&str>, default: u8, field: &str) -> Result<u8> {
    match text {
        None => Ok(default),
        Some("tab") | Some("\t") => Ok(b'\t'),
        Some(t) if t.len() == 1 && t.is_ascii() && !matches!(t, "\"" | "\n" | "\r") => {
            Ok(t.as_bytes()[0])
        }
        Some(t) => Err(ApiError::new(
            ErrorCode::InvalidQuery,
            format!("{field} must be one ASCII character or 'tab', got '{t}'"),
        )
        .with_details(json!({"field": field}))),
    }
}

/// What the parser learned about an upload.
pub struct Profile {
    /// Data rows.
    pub rows: usize,
    /// Column profiles, in file order.
    pub columns: Vec<ColumnProfile>,
    /// (column position, JSON array of its distinct values) for columns whose values are kept.
    pub values: Vec<(i64, String)>,
}

/// Streaming profile of one column: exact distinct count through 64-bit hashes, the values
/// themselves only while there are at most [`MAX_STORED_VALUES`] of them.
struct ColumnStats {
    name: String,
    hashes: std::collections::HashSet<u64>,
    values: Option<Vec<Box<str>>>,
    any: bool,
    integer: bool,
    number: bool,
}

impl ColumnStats {
    fn add(&mut self, value: &str) {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        value.hash(&mut h);
        if !self.hashes.insert(h.finish()) {
            return;
        }
        if let Some(v) = &mut self.values {
            if v.len() < MAX_STORED_VALUES {
                v.push(value.into());
            } else {
                self.values = None;
            }
        }
        let t = value.trim();
        if !t.is_empty() {
            self.any = true;
            if self.integer && t.parse::<i64>().is_err() {
                self.integer = false;
            }
            if self.number && !self.integer && !t.parse::<f64>().is_ok_and(f64::is_finite) {
                self.number = false;
            }
        }
    }

    fn detected_type(&self) -> &'static str {
        match (self.any, self.integer, self.number) {
            (true, true, _) => "integer",
            (true, false, true) => "decimal",
            _ => "text",
        }
    }
}

/// Validates and profiles a CSV with the same rules as the engine's import (`Table::read_csv`:
/// unique non-empty header names, equal row lengths, UTF-8, at least one data row) but without
/// encoding the table, so memory grows with the number of distinct values only.
pub fn profile_csv<R: Read>(
    input: R,
    options: CsvOptions,
) -> std::result::Result<Profile, EngineError> {
    use deid_engine::data::{csv_error, csv_reader, field_str, header_name};
    let source = "dataset";
    let mut reader = csv_reader(input, options.delimiter);
    let mut record = csv::ByteRecord::new();
    let mut columns: Vec<ColumnStats> = Vec::new();
    let mut record_no: u64 = 0;
    let mut rows = 0usize;
    while reader
        .read_byte_record(&mut record)
        .map_err(|e| csv_error(source, e))?
    {
        record_no += 1;
        let bom = |i: usize, raw: &'_ [u8]| -> Vec<u8> {
            if record_no == 1 && i == 0 {
                raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw).to_vec()
            } else {
                raw.to_vec()
            }
        };
        if record_no == 1 {
            for (i, raw) in record.iter().enumerate() {
                let name = header_name(
                    source,
                    i,
                    &bom(i, raw),
                    options.has_header,
                    columns.iter().map(|c| c.name.as_str()),
                )?;
                columns.push(ColumnStats {
                    name,
                    hashes: Default::default(),
                    values: Some(Vec::new()),
                    any: false,
                    integer: true,
                    number: true,
                });
            }
            if options.has_header {
                continue;
            }
        }
        if record.len() != columns.len() {
            return Err(EngineError::RaggedRow {
                source_name: source.into(),
                row: record_no,
                expected: columns.len(),
                found: record.len(),
            });
        }
        for (i, raw) in record.iter().enumerate() {
            if record_no == 1 && i == 0 {
                let raw = bom(i, raw);
                columns[i].add(field_str(source, record_no, i, &raw)?);
            } else {
                columns[i].add(field_str(source, record_no, i, raw)?);
            }
        }
        rows += 1;
    }
    if columns.is_empty() {
        return Err(EngineError::EmptyInput {
            source_name: source.into(),
        });
    }
    if rows == 0 {
        return Err(EngineError::Csv {
            source_name: source.into(),
            message: "the file has a header but no data rows".into(),
        });
    }
    let mut profiles = Vec::with_capacity(columns.len());
    let mut values = Vec::new();
    for (i, c) in columns.into_iter().enumerate() {
        let mut profile = ColumnProfile {
            name: c.name.clone(),
            detected_type: c.detected_type().to_string(),
            distinct_count: c.hashes.len() as u64,
            date_format: None,
            code_length: None,
            missing: Vec::new(),
            suggested_hierarchy: None,
        };
        if let Some(v) = &c.values {
            // The engine's type detection needs every distinct value: only for kept columns.
            let detected = deid_engine::types::detect_values(&c.name, v);
            profile.detected_type = match &detected.kind {
                ColumnKind::Integer => "integer",
                ColumnKind::Decimal => "decimal",
                ColumnKind::Date { .. } => "date",
                ColumnKind::Code { .. } => "code",
                ColumnKind::Text => "text",
            }
            .to_string();
            match &detected.kind {
                ColumnKind::Date { format } => profile.date_format = Some(format.clone()),
                ColumnKind::Code { length } => profile.code_length = Some(*length),
                _ => {}
            }
            profile.missing = detected.missing.clone();
            profile.suggested_hierarchy = serde_json::to_value(&detected.suggestion).ok();
            let list: Vec<&str> = v.iter().map(|s| &**s).collect();
            values.push((
                i as i64,
                serde_json::to_string(&list).unwrap_or_else(|_| "[]".into()),
            ));
        }
        profiles.push(profile);
    }
    Ok(Profile {
        rows,
        columns: profiles,
        values,
    })
}

/// `POST /v1/datasets`: streams the CSV into the store while profiling it
/// ([`super::upload::receive`]), checks the row and column limits, and answers 201 with the
/// dataset's view. A failed upload leaves nothing behind.
pub async fn create_dataset(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    ApiQuery(params): ApiQuery<UploadParams>,
    req: Request,
) -> Result<Response> {
    let options = CsvOptions {
        delimiter: parse_delimiter(params.delimiter.as_deref(), b',', "delimiter")?,
        has_header: params.header.unwrap_or(true),
    };
    let mut upload =
        super::upload::receive(&state, &tenant, params.name.clone(), options, req).await?;
    let profile = upload.profile().await?;
    check_limits(&profile, &state.config)?;
    let columns_json = serde_json::to_string(&profile.columns).map_err(ApiError::internal)?;
    let id = upload
        .finish(profile.rows, &columns_json, &profile.values)
        .await?;
    let row = state
        .store
        .dataset(&tenant, &id)
        .await?
        .ok_or_else(|| ApiError::internal("uploaded dataset vanished"))?;
    let mut headers = HeaderMap::new();
    if let Ok(v) = format!("/v1/datasets/{id}").parse() {
        headers.insert(header::LOCATION, v);
    }
    Ok((
        StatusCode::CREATED,
        headers,
        Json(DatasetView::new(&row, vec![])),
    )
        .into_response())
}

/// Refuses data with more rows or columns than the service accepts.
fn check_limits(profile: &Profile, config: &ServeArgs) -> Result<()> {
    if profile.rows as u64 > config.max_rows {
        return Err(ApiError::new(
            ErrorCode::TooManyRows,
            format!(
                "the data has {} rows; the limit is {}",
                profile.rows, config.max_rows
            ),
        )
        .with_details(json!({"rows": profile.rows, "limit": config.max_rows})));
    }
    if profile.columns.len() as u64 > config.max_columns {
        return Err(ApiError::new(
            ErrorCode::TooManyColumns,
            format!(
                "the data has {} columns; the limit is {}",
                profile.columns.len(),
                config.max_columns
            ),
        )
        .with_details(json!({"columns": profile.columns.len(), "limit": config.max_columns})));
    }
    Ok(())
}

/// The answer to a CSV the engine cannot read.
pub fn csv_error(e: EngineError) -> ApiError {
    ApiError::new(
        ErrorCode::InvalidCsv,
        format!("the CSV cannot be read: {e}"),
    )
}

/// Paged list.
#[derive(Debug, Serialize)]
pub struct Page<T, C> {
    /// The items.
    pub items: Vec<T>,
    /// Cursor of the next page (the id of the last item), if there is one.
    pub next_cursor: Option<C>,
}

/// `GET /v1/datasets`.
pub async fn list_datasets(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> Result<Json<Page<DatasetView, DatasetId>>> {
    let limit = page_limit(params.limit)?;
    let rows = state
        .store
        .list_datasets(&tenant, params.cursor.as_ref(), limit + 1)
        .await?;
    let more = rows.len() as i64 > limit;
    let mut items = Vec::new();
    for row in rows.iter().take(limit as usize) {
        let h = state.store.hierarchy_levels(&row.id).await?;
        items.push(DatasetView::new(row, h));
    }
    let next_cursor = if more {
        items.last().map(|d| d.id.clone())
    } else {
        None
    };
    Ok(Json(Page { items, next_cursor }))
}

/// Loads a tenant's dataset or answers 404.
pub async fn find_dataset(
    state: &AppState,
    tenant: &TenantId,
    id: &DatasetId,
) -> Result<DatasetRow> {
    state
        .store
        .dataset(tenant, id)
        .await?
        .ok_or_else(|| dataset_not_found(id))
}

fn dataset_not_found(id: &DatasetId) -> ApiError {
    ApiError::new(
        ErrorCode::DatasetNotFound,
        format!("no dataset with id '{id}'"),
    )
}

/// `GET /v1/datasets/{id}`.
pub async fn get_dataset(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<DatasetId>,
) -> Result<Json<DatasetView>> {
    let row = find_dataset(&state, &tenant, &id).await?;
    let h = state.store.hierarchy_levels(&row.id).await?;
    Ok(Json(DatasetView::new(&row, h)))
}

/// `DELETE /v1/datasets/{id}`.
pub async fn delete_dataset(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<DatasetId>,
) -> Result<StatusCode> {
    match state.store.delete_dataset(&tenant, &id).await? {
        DeleteOutcome::Deleted => Ok(StatusCode::NO_CONTENT),
        DeleteOutcome::InUse => Err(ApiError::new(
            ErrorCode::DatasetInUse,
            "a queued or running job uses this dataset; cancel it or wait for it to end",
        )),
        DeleteOutcome::NotFound => Err(dataset_not_found(&id)),
    }
}

/// The column profiles stored with a dataset (in file order).
pub fn column_profiles(dataset: &DatasetRow) -> Vec<ColumnProfile> {
    serde_json::from_str(&dataset.columns).unwrap_or_default()
}

/// Builds a column holding the stored distinct values of a dataset column, or `None` if they
/// were not kept (too many).
pub async fn stored_column(
    state: &AppState,
    dataset: &DatasetRow,
    column: &str,
) -> Result<Option<Column>> {
    let columns = column_profiles(dataset);
    let Some(position) = columns.iter().position(|c| c.name == column) else {
        return Ok(None);
    };
    let Some(json) = state
        .store
        .column_values(&dataset.id, position as i64)
        .await?
    else {
        return Ok(None);
    };
    let values: Vec<String> = serde_json::from_str(&json).map_err(ApiError::internal)?;
    let mut col = Column {
        name: column.to_string(),
        dict: Default::default(),
        codes: Default::default(),
    };
    for v in &values {
        col.dict.encode(v);
    }
    Ok(Some(col))
}

/// Maps a hierarchy that misses data values to a 422 listing them.
pub fn missing_values_error(e: EngineError, field: &str) -> ApiError {
    match e {
        EngineError::HierarchyMissingValues {
            column,
            missing,
            total_missing,
        } => ApiError::new(
            ErrorCode::HierarchyMissingValues,
            format!(
                "the hierarchy of column '{column}' has no row for {total_missing} value(s) of the data"
            ),
        )
        .with_details(json!({"field": field, "column": column, "missing": missing, "total_missing": total_missing})),
        other => ApiError::new(ErrorCode::InvalidHierarchy, other.to_string()).with_details(json!({"field": field})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(text: &str) -> Profile {
        profile_csv(text.as_bytes(), CsvOptions::default()).unwrap()
    }

    #[test]
    fn profiles_like_the_engine_reads() {
        let p = profile("\u{feff}i,d,t,e\n1,2.5,x,\n22,3,y,\n-3,3,x,\n1,2.5,\"a,b\",\n");
        assert_eq!(p.rows, 4);
        let types: Vec<&str> = p.columns.iter().map(|c| c.detected_type.as_str()).collect();
        assert_eq!(types, ["integer", "decimal", "text", "text"]);
        let distinct: Vec<u64> = p.columns.iter().map(|c| c.distinct_count).collect();
        assert_eq!(distinct, [3, 2, 3, 1]);
        assert_eq!(p.columns[0].name, "i", "the byte order mark is stripped");
        assert_eq!(p.values[2], (2, r#"["x","y","a,b"]"#.to_string()));
        // The same data through the engine gives the same distinct counts.
        let t = deid_engine::Table::read_csv(
            "i,d,t,e\n1,2.5,x,\n22,3,y,\n-3,3,x,\n1,2.5,\"a,b\",\n".as_bytes(),
            CsvOptions::default(),
            "t",
        )
        .unwrap();
        for (c, col) in p.columns.iter().zip(t.columns()) {
            assert_eq!(c.distinct_count as usize, col.dict.len());
        }
        for bad in ["", "a,a\n1,2\n", "a,b\n1\n", "a,b\n", ",b\n1,2\n"] {
            assert!(
                profile_csv(bad.as_bytes(), CsvOptions::default()).is_err(),
                "{bad:?}"
            );
        }
    }
}
