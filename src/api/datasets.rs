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
    values: Vec<(i64, String)>,
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
fn profile_csv<R: Read>(
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
