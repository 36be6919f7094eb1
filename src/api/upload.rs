//! Receiving an upload (`POST /v1/datasets`, a `text/csv` body or a multipart form with a `file`
//! field; Parquet as either): the body is streamed into 1 MiB chunks in the database and, at the same time, through
//! a channel into the CSV profiler on a blocking thread, which validates and profiles it (rows,
//! distinct values, a type guess). Nothing holds the whole file. A failed or interrupted upload
//! is removed, even if the request is dropped.
//!
//! A Parquet body (`application/vnd.apache.parquet`, or a multipart `file` part of that type or
//! named `*.parquet`) needs random access (its footer is at the
//! end): it is spooled to a temporary file, then converted row group by row group to the CSV
//! text of the typed→text rule ([`crate::parquet`]), which is stored and profiled as above.

use std::io::Read;

use axum::body::Bytes;
use axum::extract::{FromRequest, Multipart, Request};
use axum::http::header;
use futures_util::StreamExt;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::error::{ApiError, ErrorCode, Result};
use super::state::AppState;
use crate::job::id::{DatasetId, TenantId};
use crate::parquet::{ParquetError, SpooledParquet};
use crate::store::datasets::{FinishedDataset, NewDataset};
use crate::store::{CHUNK_BYTES, Store};
use deid_engine::{ColumnProfile, CsvOptions, EngineError};

/// Distinct values of a column are kept (for validation) up to this many.
pub const MAX_STORED_VALUES: usize = deid_engine::profile::MAX_KEPT_VALUES;

/// An upload whose bytes are stored; its profile is still being computed.
pub struct Received {
    upload: Upload,
    guard: PurgeGuard,
}

impl Received {
    /// Waits for the profiler: its result, or the CSV's error.
    pub async fn profile(&mut self) -> Result<Profile> {
        // The profiler ends once the channel is closed (done in `receive`).
        let Some(parser) = self.upload.parser.as_mut() else {
            return Err(ApiError::internal("the profiler was not started"));
        };
        match parser.await {
            Ok(Ok(p)) => Ok(p),
            // A bad count (field `count_column`) names its field.
            Ok(Err(e)) => Err(match e.config_error() {
                Some((field, message)) => ApiError::new(ErrorCode::InvalidCsv, message)
                    .with_details(json!({"field": field})),
                None => csv_error(e),
            }),
            Err(e) => Err(ApiError::internal(e)),
        }
    }

    /// Marks the dataset ready with its size, rows, column profiles, kept values and, for a
    /// frequency table, its count column and records; returns its id. Until then, dropping
    /// the upload removes it.
    pub async fn finish(
        mut self,
        rows: usize,
        columns_json: &str,
        values: &[(i64, String)],
        frequency: Option<(&str, i64)>,
    ) -> Result<DatasetId> {
        let u = &self.upload;
        u.store
            .finish_dataset(&FinishedDataset {
                id: &u.id,
                delimiter: &(u.options.delimiter as char).to_string(),
                size_bytes: u.size as i64,
                rows: rows as i64,
                chunks: u.seq,
                columns_json,
                values,
                frequency,
            })
            .await?;
        self.guard.armed = false;
        tracing::info!(dataset = %u.id, rows, bytes = u.size, "dataset uploaded");
        metrics::counter!("deid_upload_bytes_total").increment(u.size);
        Ok(u.id.clone())
    }
}

/// Receives the body of `req` as dataset of `tenant` (see the module documentation). Without a
/// `delimiter`, it is detected from the first line ([`deid_engine::data::sniff_delimiter`],
/// `,` on ties). Long because it is one pass over the streamed body, in order: limits,
/// delimiter, format (CSV or Parquet), storage and the dataset's record.
pub async fn receive(
    state: &AppState,
    tenant: &TenantId,
    name: Option<String>,
    delimiter: Option<u8>,
    has_header: bool,
    count_column: Option<String>,
    req: Request,
) -> Result<Received> {
    let (multipart, parquet) = body_kind(&req, has_header)?;
    let id = DatasetId::generate();
    let options = CsvOptions {
        delimiter: delimiter.unwrap_or(b','),
        has_header,
    };
    let mut upload = Upload::new(state, id.clone(), options, delimiter.is_none() && !parquet);
    upload.count_column = count_column;
    let mut guard = PurgeGuard {
        store: state.store.clone(),
        id: id.clone(),
        armed: false,
    };
    let new = |name: String| NewDatasetOwned {
        id: id.clone(),
        tenant: tenant.clone(),
        name,
        delimiter: (options.delimiter as char).to_string(),
        has_header,
    };
    if multipart {
        let mut form = Multipart::from_request(req, state)
            .await
            .map_err(|e| ApiError::new(ErrorCode::InvalidRequest, e.body_text()))?;
        let mut field = loop {
            match form.next_field().await {
                Ok(Some(f)) if f.name() == Some("file") => break f,
                Ok(Some(_)) => continue,
                Ok(None) => {
                    return Err(ApiError::new(
                        ErrorCode::InvalidRequest,
                        "the multipart form has no 'file' field",
                    ));
                }
                Err(e) => return Err(ApiError::new(ErrorCode::UploadInterrupted, e.body_text())),
            }
        };
        let name = name
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| field.file_name().unwrap_or("dataset").to_string());
        let parquet_part = is_parquet_part(field.content_type(), field.file_name());
        if parquet_part {
            check_parquet_header(has_header)?;
            upload.sniff = false;
        }
        new(name).create(&state.store).await?;
        guard.armed = true;
        match parquet_part {
            true => upload.push_parquet(field).await?,
            false => {
                while let Some(chunk) = field
                    .chunk()
                    .await
                    .map_err(|e| ApiError::new(ErrorCode::UploadInterrupted, e.body_text()))?
                {
                    upload.push(&chunk).await?;
                }
            }
        }
    } else {
        let name = name
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "dataset".into());
        new(name).create(&state.store).await?;
        guard.armed = true;
        match parquet {
            true => (upload.push_parquet(req.into_body().into_data_stream())).await?,
            false => upload.push_body(req).await?,
        }
    }
    upload.flush().await?;
    upload.start_profiler();
    upload.tx = None;
    Ok(Received { upload, guard })
}

/// Whether the body of `req` is a multipart form and whether it is Parquet, by its
/// `Content-Type`; a Parquet upload without a header is refused (Parquet names its columns).
fn body_kind(req: &Request, has_header: bool) -> Result<(bool, bool)> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let parquet = is_parquet_type(content_type);
    if parquet {
        check_parquet_header(has_header)?;
    }
    Ok((content_type.starts_with("multipart/form-data"), parquet))
}

/// Refuses a Parquet upload without a header (Parquet names its columns).
fn check_parquet_header(has_header: bool) -> Result<()> {
    match has_header {
        true => Ok(()),
        false => Err(ApiError::new(
            ErrorCode::InvalidQuery,
            "header must be true for a Parquet upload: a Parquet file always names its columns",
        )
        .with_details(json!({"field": "header"}))),
    }
}

/// Whether a multipart `file` part is Parquet: by its `Content-Type`, or by a file name ending
/// in `.parquet` (in any case).
fn is_parquet_part(content_type: Option<&str>, file_name: Option<&str>) -> bool {
    content_type.is_some_and(is_parquet_type)
        || file_name.is_some_and(|n| crate::parquet::parquet_extension(std::path::Path::new(n)))
}

/// Whether a `Content-Type` is Parquet's (`application/vnd.apache.parquet`, or the older
/// `application/x-parquet`).
pub fn is_parquet_type(content_type: &str) -> bool {
    let media = content_type.split(';').next().unwrap_or_default().trim();
    media.eq_ignore_ascii_case(crate::parquet::MEDIA_TYPE)
        || media.eq_ignore_ascii_case("application/x-parquet")
}

/// The dataset row created before the bytes arrive.
struct NewDatasetOwned {
    id: DatasetId,
    tenant: TenantId,
    name: String,
    delimiter: String,
    has_header: bool,
}

impl NewDatasetOwned {
    async fn create(&self, store: &Store) -> Result<()> {
        store
            .create_dataset(&NewDataset {
                id: &self.id,
                tenant: &self.tenant,
                name: &self.name,
                delimiter: &self.delimiter,
                has_header: self.has_header,
            })
            .await?;
        Ok(())
    }
}

/// Removes a dataset whose upload did not complete, even if the request is dropped.
struct PurgeGuard {
    store: Store,
    id: DatasetId,
    armed: bool,
}

impl Drop for PurgeGuard {
    fn drop(&mut self) {
        if self.armed {
            let store = self.store.clone();
            let id = self.id.clone();
            tokio::spawn(async move {
                if let Err(e) = store.purge_dataset(&id).await {
                    tracing::error!(error = %e, dataset = %id, "removing a failed upload failed");
                }
            });
        }
    }
}

/// Feeds chunks of the body to a blocking reader (uploads, verifications).
pub(crate) struct ChannelReader {
    rx: mpsc::Receiver<Bytes>,
    current: Bytes,
}

impl ChannelReader {
    /// A reader of the chunks `rx` receives; it ends when the channel is closed.
    pub(crate) fn new(rx: mpsc::Receiver<Bytes>) -> ChannelReader {
        ChannelReader {
            rx,
            current: Bytes::new(),
        }
    }
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

/// One upload in progress: bytes are cut into chunks, stored, and passed to the profiler, which
/// starts with the first chunk (whose first line tells the delimiter when none was given).
struct Upload {
    store: Store,
    id: DatasetId,
    max_bytes: u64,
    size: u64,
    seq: i64,
    buf: Vec<u8>,
    tx: Option<mpsc::Sender<Bytes>>,
    parser: Option<JoinHandle<std::result::Result<Profile, EngineError>>>,
    options: CsvOptions,
    /// Detect the delimiter from the first chunk.
    sniff: bool,
    /// A frequency table's count column, checked and summed by the profiler.
    count_column: Option<String>,
}

impl Upload {
    /// Starts the profiler (once), after detecting the delimiter from the buffered start of the
    /// data if none was given.
    fn start_profiler(&mut self) {
        if self.parser.is_some() {
            return;
        }
        if self.sniff {
            self.options.delimiter = deid_engine::data::sniff_delimiter(&self.buf, b',');
        }
        let (tx, rx) = mpsc::channel::<Bytes>(4);
        let options = self.options;
        let count_column = self.count_column.clone();
        self.parser = Some(tokio::task::spawn_blocking(move || {
            let reader = ChannelReader::new(rx);
            profile_csv(
                std::io::BufReader::with_capacity(1 << 16, reader),
                options,
                count_column.as_deref(),
            )
        }));
        self.tx = Some(tx);
    }

    /// A new upload of dataset `id`, nothing received yet (`sniff`: detect the delimiter).
    fn new(state: &AppState, id: DatasetId, options: CsvOptions, sniff: bool) -> Upload {
        Upload {
            store: state.store.clone(),
            id,
            max_bytes: state.config.max_upload_bytes,
            size: 0,
            seq: 0,
            buf: Vec::with_capacity(CHUNK_BYTES),
            tx: None,
            parser: None,
            options,
            sniff,
            count_column: None,
        }
    }

    /// Pushes a plain request body (a `text/csv` upload), piece by piece.
    async fn push_body(&mut self, req: Request) -> Result<()> {
        let mut body = req.into_body().into_data_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| {
                ApiError::new(
                    ErrorCode::UploadInterrupted,
                    format!("reading the upload failed: {e}"),
                )
            })?;
            self.push(&chunk).await?;
        }
        Ok(())
    }

    /// Pushes a Parquet body: spooled to a temporary file (within the upload limit) on a
    /// blocking thread, which then converts it to CSV text, pushed 1 MiB at a time (the limit
    /// applies to the text too).
    async fn push_parquet<E: std::fmt::Display>(
        &mut self,
        mut body: impl futures_util::Stream<Item = std::result::Result<Bytes, E>> + Unpin,
    ) -> Result<()> {
        let (body_tx, body_rx) = mpsc::channel::<Bytes>(4);
        let (csv_tx, mut csv_rx) = mpsc::channel::<Bytes>(4);
        let path = std::env::temp_dir().join(format!("deid-upload-{}.parquet", self.id));
        let delimiter = self.options.delimiter;
        let task = tokio::task::spawn_blocking(move || {
            convert_parquet(ChannelReader::new(body_rx), path, delimiter, &csv_tx)
        });
        let mut size = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| {
                ApiError::new(
                    ErrorCode::UploadInterrupted,
                    format!("reading the upload failed: {e}"),
                )
            })?;
            size += chunk.len() as u64;
            if size > self.max_bytes {
                return Err(too_large(self.max_bytes));
            }
            if body_tx.send(chunk).await.is_err() {
                break; // The spooler failed: its error is reported below.
            }
        }
        drop(body_tx);
        while let Some(chunk) = csv_rx.recv().await {
            self.push(&chunk).await?;
        }
        match task.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(parquet_error(e)),
            Err(e) => Err(ApiError::internal(e)),
        }
    }

    async fn push(&mut self, data: &[u8]) -> Result<()> {
        self.size += data.len() as u64;
        if self.size > self.max_bytes {
            return Err(too_large(self.max_bytes));
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
        self.start_profiler();
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

/// The answer to an upload beyond `limit` bytes.
fn too_large(limit: u64) -> ApiError {
    ApiError::new(
        ErrorCode::PayloadTooLarge,
        format!("the upload exceeds the limit of {limit} bytes"),
    )
    .with_details(json!({"limit_bytes": limit}))
}

/// Spools the Parquet bytes of `body` to `path` (removed at the end, whatever happens), then
/// sends its CSV text (`delimiter`), 1 MiB at a time, to `csv` until it is closed.
fn convert_parquet(
    body: impl Read,
    path: std::path::PathBuf,
    delimiter: u8,
    csv: &mpsc::Sender<Bytes>,
) -> std::result::Result<(), ParquetError> {
    let mut reader = SpooledParquet::new(body, path, delimiter)?;
    loop {
        let mut chunk = Vec::with_capacity(CHUNK_BYTES);
        let n = (&mut reader)
            .take(CHUNK_BYTES as u64)
            .read_to_end(&mut chunk)
            .map_err(
                |e| match e.get_ref().and_then(|i| i.downcast_ref::<ParquetError>()) {
                    Some(p) => p.clone(),
                    None => ParquetError::File(e.to_string()),
                },
            )?;
        if n == 0 || csv.blocking_send(Bytes::from(chunk)).is_err() {
            return Ok(());
        }
    }
}

/// The answer to a Parquet file deid cannot read: 422 `invalid_csv` (the code of unreadable
/// data), `details.column` naming the column if the error is about one.
pub fn parquet_error(e: ParquetError) -> ApiError {
    let err = ApiError::new(
        ErrorCode::InvalidCsv,
        format!("the Parquet file cannot be read: {e}"),
    );
    match e.column() {
        Some(column) => err.with_details(json!({"format": "parquet", "column": column})),
        None => err.with_details(json!({"format": "parquet"})),
    }
}

/// What the parser learned about an upload.
pub struct Profile {
    /// Data rows.
    pub rows: usize,
    /// Column profiles, in file order.
    pub columns: Vec<ColumnProfile>,
    /// `(column position, JSON array of its distinct values)` for the columns whose values were
    /// kept: the storage format of [`Store::finish_dataset`].
    pub values: Vec<(i64, String)>,
    /// A frequency table's records: the sum of its count column, checked in the same pass.
    pub records: Option<i64>,
}

/// Validates and profiles an upload with the engine's streaming profile (the rules of the
/// engine's import, memory proportional to the distinct values) and turns the kept values into
/// their storage format.
pub fn profile_csv<R: Read>(
    input: R,
    options: CsvOptions,
    count_column: Option<&str>,
) -> std::result::Result<Profile, EngineError> {
    let (profile, counted) = deid_engine::profile::profile_counted_csv(
        input,
        options,
        "dataset",
        MAX_STORED_VALUES,
        count_column,
    )?;
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
        records: counted.map(|c| c.records as i64),
    })
}

/// The answer to a CSV the engine cannot read.
pub fn csv_error(e: EngineError) -> ApiError {
    ApiError::new(
        ErrorCode::InvalidCsv,
        format!("the CSV cannot be read: {e}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_values_as_json_arrays() {
        let p = profile_csv(
            "i,t\n1,x\n22,y\n1,\"a,b\"\n".as_bytes(),
            CsvOptions::default(),
            None,
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
        let err = profile_csv("a,b\n1\n".as_bytes(), CsvOptions::default(), None)
            .err()
            .unwrap();
        assert_eq!(err.to_string(), "dataset: row 2 has 1 fields, expected 2");
    }
}
