//! Datasets: upload (the streaming itself is [`super::upload`]), listing, deletion, and the
//! stored distinct values of their columns (the hierarchies of their columns are in
//! [`super::hierarchies`]).

use std::collections::BTreeMap;

use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::cancel::CancelOnDrop;
use super::error::{ApiError, ErrorCode, Result};
use super::extract::{ApiJson, ApiQuery};
use super::state::AppState;
use super::upload::Profile;
use crate::config::ServeArgs;
use crate::job::id::{DatasetId, TenantId};
use crate::job::task::risk::RiskRequest;
use crate::job::view::rfc3339;
use crate::store::datasets::{DatasetRow, DeleteOutcome, HierarchyLevels};
use crate::worker::chunks::ChunkReader;
use deid_engine::data::Column;
use deid_engine::{CancelFlag, ColumnProfile, CsvOptions, EngineError};

pub use super::upload::MAX_STORED_VALUES;

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
    /// A frequency table's count column (given at upload): each row stands for that many
    /// records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count_column: Option<String>,
    /// Records: the sum of a frequency table's counts, else the rows.
    pub records: i64,
    /// Column profiles, in file order.
    #[serde(serialize_with = "as_json_value")]
    pub columns: Vec<ColumnProfile>,
    /// Columns with a stored hierarchy → number of levels.
    pub hierarchies: BTreeMap<String, i64>,
    /// Columns with a stored hierarchy → `csv` (an uploaded table) or `builder` (a
    /// specification). A separate map so that `hierarchies` keeps its shape.
    pub hierarchy_kinds: BTreeMap<String, String>,
    /// Upload time (RFC 3339).
    pub created_at: String,
}

/// Serializes through a `serde_json::Value`, whose objects sort their keys: the suggested
/// specifications keep the key order the API has always answered with.
fn as_json_value<S: serde::Serializer>(
    columns: &[ColumnProfile],
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    serde_json::to_value(columns)
        .map_err(serde::ser::Error::custom)?
        .serialize(s)
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
            count_column: row.count_column.clone(),
            records: row.records(),
            columns: column_profiles(row),
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
    /// Field delimiter: one ASCII character, or `tab` (default: detected from the first line,
    /// `,` on ties).
    pub delimiter: Option<String>,
    /// Whether the first record is a header (default true).
    pub header: Option<bool>,
    /// The data are a frequency table: this column says how many records each row stands for
    /// (checked at upload; jobs on the dataset use it).
    pub count_column: Option<String>,
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

/// Checks a paging cursor: the `next_cursor` of an earlier page, i.e. an id (a UUID).
pub fn check_cursor(cursor: Option<&str>) -> Result<()> {
    match cursor {
        Some(c) if uuid::Uuid::parse_str(c).is_err() => Err(ApiError::new(
            ErrorCode::InvalidQuery,
            format!("cursor must be the next_cursor of an earlier page, got '{c}'"),
        )
        .with_details(json!({"field": "cursor"}))),
        _ => Ok(()),
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

/// `POST /v1/datasets`: streams the CSV into the store while profiling it
/// ([`super::upload::receive`]), checks the row and column limits, and answers 201 with the
/// dataset's view. A failed upload leaves nothing behind.
pub async fn create_dataset(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    ApiQuery(params): ApiQuery<UploadParams>,
    req: Request,
) -> Result<Response> {
    let delimiter = match params.delimiter.as_deref() {
        None => None,
        Some(d) => Some(parse_delimiter(Some(d), b',', "delimiter")?),
    };
    let has_header = params.header.unwrap_or(true);
    let mut upload = super::upload::receive(
        &state,
        &tenant,
        params.name.clone(),
        delimiter,
        has_header,
        params.count_column.clone(),
        req,
    )
    .await?;
    let profile = upload.profile().await?;
    check_limits(&profile, &state.config)?;
    let columns_json = serde_json::to_string(&profile.columns).map_err(ApiError::internal)?;
    // A frequency table's counts were checked and summed by the profiler.
    let frequency = (params.count_column.as_deref()).zip(profile.records);
    let id = upload
        .finish(profile.rows, &columns_json, &profile.values, frequency)
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
    check_cursor(params.cursor.as_ref().map(DatasetId::as_str))?;
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

/// `POST /v1/datasets/{id}/risk`: the re-identification risks of the stored dataset as it is, for
/// the given quasi-identifiers and population model (`{"input": RiskReport}`, the report's `risk`
/// shape). Synchronous: the data are read once on a blocking thread, at most
/// `--max-risk-requests` analyses at once (429 `too_many_requests` beyond); the analysis stops
/// when the request is dropped (the client went away, or the request timed out).
pub async fn dataset_risk(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<DatasetId>,
    ApiJson(mut request): ApiJson<RiskRequest>,
) -> Result<Json<serde_json::Value>> {
    let dataset = find_dataset(&state, &tenant, &id).await?;
    request.count_column = dataset.count_column.clone();
    let columns: Vec<String> = column_profiles(&dataset)
        .into_iter()
        .map(|c| c.name)
        .collect();
    // Bad requests are answered before any data is read.
    request.validate(&columns, dataset.records() as usize)?;
    let Ok(permit) = state.risk_slots.clone().try_acquire_owned() else {
        return Err(ApiError::new(
            ErrorCode::TooManyRequests,
            format!(
                "{} risk analyses are running; try again later, or queue a job with \
                 \"task\": \"risk\"",
                state.config.max_risk_requests
            ),
        )
        .retry_after(5));
    };
    let cancel = CancelFlag::new();
    let _guard = CancelOnDrop(cancel.clone());
    let reader = ChunkReader::new(
        state.store.clone(),
        tokio::runtime::Handle::current(),
        dataset.id.clone(),
        dataset.chunk_count,
    )
    .cancellable(cancel.clone());
    let options = CsvOptions {
        delimiter: dataset.delimiter.bytes().next().unwrap_or(b','),
        has_header: dataset.has_header != 0,
    };
    let analysis = tokio::task::spawn_blocking(move || {
        // Held until the work stops, also when the request was dropped before.
        let _permit = permit;
        let table = deid_engine::Table::read_csv(
            std::io::BufReader::with_capacity(1 << 16, reader),
            options,
            "dataset",
        )
        .map_err(|e| ApiError::new(ErrorCode::DatasetUnreadable, e.to_string()))?;
        // `None`: cancelled, and nobody waits for the answer any more.
        request
            .analyse_cancellable(table, &cancel)?
            .ok_or_else(|| ApiError::new(ErrorCode::RequestTimeout, "the request was abandoned"))
    })
    .await
    .map_err(ApiError::internal)??;
    Ok(Json(
        serde_json::to_value(analysis).map_err(ApiError::internal)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::super::upload::profile_csv;
    use super::*;

    #[test]
    fn answers_suggestions_with_sorted_keys() {
        let p = profile_csv("age\n1\n5\n9\n30\n".as_bytes(), CsvOptions::default(), None).unwrap();
        let spec = serde_json::to_value(p.columns[0].suggested_hierarchy.as_ref().unwrap())
            .unwrap()
            .to_string();
        let view = DatasetView {
            id: "d".into(),
            name: "n".into(),
            delimiter: ",".into(),
            header: true,
            size_bytes: 1,
            rows: 4,
            count_column: None,
            records: 4,
            columns: p.columns,
            hierarchies: BTreeMap::new(),
            hierarchy_kinds: BTreeMap::new(),
            created_at: "t".into(),
        };
        let text = serde_json::to_string(&view).unwrap();
        assert!(
            text.contains(&format!(r#""suggested_hierarchy":{spec}}}"#)),
            "{text}"
        );
    }
}
