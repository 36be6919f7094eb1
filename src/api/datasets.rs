//! Datasets: upload, listing, deletion, and the stored distinct values of their columns (the
//! hierarchies of their columns are in [`super::hierarchies`]).
//!
//! Upload (`POST /v1/datasets`, a `text/csv` body or a multipart form with a `file` field): the
//! body is streamed into 1 MiB chunks in the database and, at the same time, through a channel
//! into the engine's CSV reader on a blocking thread, which validates and profiles it (rows,
//! distinct values, a type guess). Nothing holds the whole file. A failed or interrupted upload
//! is removed.

use std::collections::BTreeMap;
use std::io::Read;

use axum::body::Bytes;
use axum::extract::{FromRequest, Multipart, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::mpsc;

use super::auth::Tenant;
use super::error::{ApiError, Result};
use super::extract::ApiQuery;
use super::state::AppState;
use crate::jobs::view::rfc3339;
use crate::store::datasets::{DatasetRow, DeleteOutcome, HierarchyLevels, NewDataset};
use crate::store::{CHUNK_BYTES, Store};
use deid_engine::data::Column;
use deid_engine::{ColumnProfile, CsvOptions, EngineError};

/// Distinct values of a column are kept (for validation) up to this many.
pub const MAX_STORED_VALUES: usize = deid_engine::profile::MAX_KEPT_VALUES;

/// A dataset as returned by the API.
#[derive(Debug, Clone, Serialize)]
pub struct DatasetView {
    /// Dataset id.
    pub id: String,
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
    pub cursor: Option<String>,
}

/// Checks a page size.
pub fn page_limit(limit: Option<i64>) -> Result<i64> {
    match limit {
        None => Ok(20),
        Some(l) if (1..=100).contains(&l) => Ok(l),
        Some(l) => Err(ApiError::new(
            "invalid_query",
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
            "invalid_query",
            format!("{field} must be one ASCII character or 'tab', got '{t}'"),
        )
        .with_details(json!({"field": field}))),
    }
}

/// Removes a dataset whose upload did not complete, even if the request is dropped.
struct PurgeGuard {
    store: Store,
    id: String,
    armed: bool,
}

impl Drop for PurgeGuard {
    fn drop(&mut self) {
        if self.armed {
            let store = self.store.clone();
            let id = std::mem::take(&mut self.id);
            tokio::spawn(async move {
                if let Err(e) = store.purge_dataset(&id).await {
                    tracing::error!(error = %e, dataset = %id, "removing a failed upload failed");
                }
            });
        }
    }
}

/// Feeds chunks of the body to a blocking reader.
struct ChannelReader {
    rx: mpsc::Receiver<Bytes>,
    current: Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(b) => self.current = b,
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.current.len());
        out[..n].copy_from_slice(&self.current[..n]);
        self.current = self.current.slice(n..);
        Ok(n)
    }
}

/// What the parser learned about an upload.
struct Profile {
    rows: usize,
    columns: Vec<ColumnProfile>,
    /// `(column position, JSON array of its distinct values)` for the columns whose values were
    /// kept: the storage format of [`Store::finish_dataset`].
    values: Vec<(i64, String)>,
}

/// Validates and profiles an upload with the engine's streaming profile (the rules of the
/// engine's import, memory proportional to the distinct values) and turns the kept values into
/// their storage format.
fn profile_csv<R: Read>(
    input: R,
    options: CsvOptions,
) -> std::result::Result<Profile, EngineError> {
    let profile = deid_engine::profile::profile_csv(input, options, "dataset", MAX_STORED_VALUES)?;
    let values = profile
        .values
        .into_iter()
        .enumerate()
        .filter_map(|(i, values)| {
            let json = serde_json::to_string(&values?).unwrap_or_else(|_| "[]".into());
            Some((i as i64, json))
        })
        .collect();
    Ok(Profile {
        rows: profile.rows,
        columns: profile.columns,
        values,
    })
}

/// One upload in progress.
struct Upload {
    store: Store,
    id: String,
    max_bytes: u64,
    size: u64,
    seq: i64,
    buf: Vec<u8>,
    tx: Option<mpsc::Sender<Bytes>>,
}

impl Upload {
    async fn push(&mut self, data: &[u8]) -> Result<()> {
        self.size += data.len() as u64;
        if self.size > self.max_bytes {
            return Err(ApiError::new(
                "payload_too_large",
                format!("the upload exceeds the limit of {} bytes", self.max_bytes),
            )
            .with_details(json!({"limit_bytes": self.max_bytes})));
        }
        let mut data = data;
        while !data.is_empty() {
            let n = data.len().min(CHUNK_BYTES - self.buf.len());
            self.buf.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.buf.len() == CHUNK_BYTES {
                self.flush().await?;
            }
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(
            &mut self.buf,
            Vec::with_capacity(CHUNK_BYTES),
        ));
        self.store
            .insert_dataset_chunk(&self.id, self.seq, &chunk)
            .await?;
        self.seq += 1;
        if let Some(tx) = &self.tx
            && tx.send(chunk).await.is_err()
        {
            // The parser stopped (invalid CSV): its error is reported at the end.
            self.tx = None;
        }
        Ok(())
    }
}

/// `POST /v1/datasets`.
pub async fn create_dataset(
    State(state): State<AppState>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    ApiQuery(params): ApiQuery<UploadParams>,
    req: Request,
) -> Result<Response> {
    let delimiter = parse_delimiter(params.delimiter.as_deref(), b',', "delimiter")?;
    let has_header = params.header.unwrap_or(true);
    let multipart = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    let id = uuid::Uuid::now_v7().to_string();
    let store = state.store.clone();
    let mut name = params.name.clone().unwrap_or_default();

    let (tx, rx) = mpsc::channel::<Bytes>(4);
    let parser = tokio::task::spawn_blocking(move || {
        let reader = ChannelReader {
            rx,
            current: Bytes::new(),
        };
        profile_csv(
            std::io::BufReader::with_capacity(1 << 16, reader),
            CsvOptions {
                delimiter,
                has_header,
            },
        )
    });
    let mut upload = Upload {
        store: store.clone(),
        id: id.clone(),
        max_bytes: state.config.max_upload_bytes,
        size: 0,
        seq: 0,
        buf: Vec::with_capacity(CHUNK_BYTES),
        tx: Some(tx),
    };
    let delimiter_text = (delimiter as char).to_string();
    let mut guard = PurgeGuard {
        store: store.clone(),
        id: id.clone(),
        armed: false,
    };
    let created = |name: &str| {
        let store = store.clone();
        let (id, tenant, name, d) = (
            id.clone(),
            tenant.clone(),
            name.to_string(),
            delimiter_text.clone(),
        );
        async move {
            store
                .create_dataset(&NewDataset {
                    id: &id,
                    tenant: &tenant,
                    name: &name,
                    delimiter: &d,
                    has_header,
                })
                .await
        }
    };

    if multipart {
        let mut form = Multipart::from_request(req, &state)
            .await
            .map_err(|e| ApiError::new("invalid_request", e.body_text()))?;
        let mut found = false;
        while let Some(mut field) = form
            .next_field()
            .await
            .map_err(|e| ApiError::new("upload_interrupted", e.body_text()))?
        {
            if field.name() != Some("file") {
                continue;
            }
            if name.is_empty() {
                name = field.file_name().unwrap_or("dataset").to_string();
            }
            created(&name).await?;
            guard.armed = true;
            found = true;
            while let Some(chunk) = field
                .chunk()
                .await
                .map_err(|e| ApiError::new("upload_interrupted", e.body_text()))?
            {
                upload.push(&chunk).await?;
            }
            break;
        }
        if !found {
            return Err(ApiError::new(
                "invalid_request",
                "the multipart form has no 'file' field",
            ));
        }
    } else {
        if name.is_empty() {
            name = "dataset".into();
        }
        created(&name).await?;
        guard.armed = true;
        let mut body = req.into_body().into_data_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| {
                ApiError::new(
                    "upload_interrupted",
                    format!("reading the upload failed: {e}"),
                )
            })?;
            upload.push(&chunk).await?;
        }
    }
    upload.flush().await?;
    upload.tx = None;
    let profile = match parser.await {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return Err(csv_error(e)),
        Err(e) => return Err(ApiError::internal(e)),
    };
    if profile.rows as u64 > state.config.max_rows {
        return Err(ApiError::new(
            "too_many_rows",
            format!(
                "the data has {} rows; the limit is {}",
                profile.rows, state.config.max_rows
            ),
        )
        .with_details(json!({"rows": profile.rows, "limit": state.config.max_rows})));
    }
    if profile.columns.len() as u64 > state.config.max_columns {
        return Err(ApiError::new(
            "too_many_columns",
            format!(
                "the data has {} columns; the limit is {}",
                profile.columns.len(),
                state.config.max_columns
            ),
        )
        .with_details(
            json!({"columns": profile.columns.len(), "limit": state.config.max_columns}),
        ));
    }
    let columns_json = serde_json::to_string(&profile.columns).map_err(ApiError::internal)?;
    store
        .finish_dataset(
            &id,
            upload.size as i64,
            profile.rows as i64,
            upload.seq,
            &columns_json,
            &profile.values,
        )
        .await?;
    guard.armed = false;
    tracing::info!(dataset = %id, rows = profile.rows, bytes = upload.size, "dataset uploaded");
    metrics::counter!("deid_upload_bytes_total").increment(upload.size);
    let row = store
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

fn csv_error(e: EngineError) -> ApiError {
    ApiError::new("invalid_csv", format!("the CSV cannot be read: {e}"))
}

/// Paged list.
#[derive(Debug, Serialize)]
pub struct Page<T> {
    /// The items.
    pub items: Vec<T>,
    /// Cursor of the next page, if there is one.
    pub next_cursor: Option<String>,
}

/// `GET /v1/datasets`.
pub async fn list_datasets(
    State(state): State<AppState>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> Result<Json<Page<DatasetView>>> {
    let limit = page_limit(params.limit)?;
    let rows = state
        .store
        .list_datasets(&tenant, params.cursor.as_deref(), limit + 1)
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
pub async fn find_dataset(state: &AppState, tenant: &str, id: &str) -> Result<DatasetRow> {
    state
        .store
        .dataset(tenant, id)
        .await?
        .ok_or_else(|| dataset_not_found(id))
}

fn dataset_not_found(id: &str) -> ApiError {
    ApiError::new("dataset_not_found", format!("no dataset with id '{id}'"))
}

/// `GET /v1/datasets/{id}`.
pub async fn get_dataset(
    State(state): State<AppState>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    Path(id): Path<String>,
) -> Result<Json<DatasetView>> {
    let row = find_dataset(&state, &tenant, &id).await?;
    let h = state.store.hierarchy_levels(&row.id).await?;
    Ok(Json(DatasetView::new(&row, h)))
}

/// `DELETE /v1/datasets/{id}`.
pub async fn delete_dataset(
    State(state): State<AppState>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    match state.store.delete_dataset(&tenant, &id).await? {
        DeleteOutcome::Deleted => Ok(StatusCode::NO_CONTENT),
        DeleteOutcome::InUse => Err(ApiError::new(
            "dataset_in_use",
            "a queued or running job uses this dataset; cancel it or wait for it to end",
        )),
        DeleteOutcome::NotFound => Err(dataset_not_found(&id)),
    }
}

/// Builds a column holding the stored distinct values of a dataset column, or `None` if they
/// were not kept (too many).
pub async fn stored_column(
    state: &AppState,
    dataset: &DatasetRow,
    column: &str,
) -> Result<Option<Column>> {
    let columns: Vec<ColumnProfile> = serde_json::from_str(&dataset.columns).unwrap_or_default();
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
            "hierarchy_missing_values",
            format!(
                "the hierarchy of column '{column}' has no row for {total_missing} value(s) of the data"
            ),
        )
        .with_details(json!({"field": field, "column": column, "missing": missing, "total_missing": total_missing})),
        other => ApiError::new("invalid_hierarchy", other.to_string()).with_details(json!({"field": field})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_values_as_json_arrays() {
        let p = profile_csv(
            "i,t\n1,x\n22,y\n1,\"a,b\"\n".as_bytes(),
            CsvOptions::default(),
        )
        .unwrap();
        assert_eq!(p.rows, 3);
        assert_eq!(p.columns[1].distinct_count, 3);
        assert_eq!(
            p.values,
            [
                (0, r#"["1","22"]"#.to_string()),
                (1, r#"["x","y","a,b"]"#.to_string())
            ]
        );
        let err = profile_csv("a,b\n1\n".as_bytes(), CsvOptions::default())
            .err()
            .unwrap();
        assert_eq!(err.to_string(), "dataset: row 2 has 1 fields, expected 2");
    }

    #[test]
    fn answers_suggestions_with_sorted_keys() {
        let p = profile_csv("age\n1\n5\n9\n30\n".as_bytes(), CsvOptions::default()).unwrap();
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
