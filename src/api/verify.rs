//! `POST /v1/jobs/{id}/verify`: released data (the body: CSV, or Parquet by its `Content-Type`,
//! either of them a frequency table with `?count_column=`) re-checked against every privacy
//! model of the job, from scratch ([`crate::job::verify`]). Synchronous, like
//! `POST /v1/datasets/{id}/risk`: the body is streamed to a blocking thread in chunks (memory
//! follows the distinct released tuples, not the rows), the stored dataset is read there only
//! when a model needs the input, at most `--max-risk-requests` synchronous analyses run at once,
//! and the work stops when the request is dropped ([`CancelOnDrop`]). A verdict — passed or not
//! — is a 200; unreadable released data are a 422 `invalid_csv` naming the column or the row.
//! A Parquet body is spooled to a temporary file first (its footer is at the end), then read as
//! the CSV text of the typed→text rule ([`crate::parquet`]), as an upload is.

use axum::Extension;
use axum::Json;
use axum::body::{BodyDataStream, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::mpsc;

use super::cancel::CancelOnDrop;
use super::error::{ApiError, ErrorCode, Result};
use super::extract::ApiQuery;
use super::state::AppState;
use super::upload::{ChannelReader, is_parquet_type, parquet_error};
use crate::job::hierarchy::Frontend;
use crate::job::id::{JobId, TenantId};
use crate::job::spec::JobSpec;
use crate::job::verify::{VerifyError, VerifyRequest, verify, verify_config};
use crate::parquet::SpooledParquet;
use crate::store::datasets::DatasetRow;
use crate::worker::chunks::ChunkReader;
use deid_engine::verify::VerifyReport;
use deid_engine::{CancelFlag, CsvOptions, EngineError, Table};

/// Query parameters of `POST /v1/jobs/{id}/verify`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyQuery {
    /// The body is a frequency table with this count column (default: the job's).
    #[serde(default)]
    count_column: Option<String>,
    /// List the quasi-identifier values of violating classes.
    #[serde(default)]
    show_values: bool,
}

/// `POST /v1/jobs/{id}/verify` (see the module documentation). An error answered before the
/// body was read to its end first reads (and drops) the rest of it, up to `--max-upload-bytes`,
/// so that the client can finish sending and read the answer; beyond that limit (and after a
/// 413) the connection is closed.
pub async fn verify_job(
    State(state): State<AppState>,
    tenant: Extension<TenantId>,
    id: Path<JobId>,
    query: std::result::Result<ApiQuery<VerifyQuery>, ApiError>,
    req: Request,
) -> Response {
    let content_type = (req.headers().get(header::CONTENT_TYPE))
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let parquet = is_parquet_type(content_type);
    let mut body = req.into_body().into_data_stream();
    let answer = match query {
        Ok(query) => verify_released(&state, tenant, id, query, parquet, &mut body).await,
        Err(e) => Err(e),
    };
    match answer {
        Ok(report) => report.into_response(),
        Err(e) => {
            let drained = e.code != ErrorCode::PayloadTooLarge
                && drain(&mut body, state.config.max_upload_bytes).await;
            let mut response = e.into_response();
            if !drained {
                (response.headers_mut())
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            response
        }
    }
}

/// Reads and drops what is left of `body`; false if more than `limit` bytes were left or the
/// body failed.
async fn drain(body: &mut BodyDataStream, limit: u64) -> bool {
    let mut size = 0u64;
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else {
            return false;
        };
        size += chunk.len() as u64;
        if size > limit {
            return false;
        }
    }
    true
}

/// The verdict on the released data of the request's body (`parquet`: a Parquet file, read as
/// CSV text with the dataset's delimiter).
async fn verify_released(
    state: &AppState,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<JobId>,
    ApiQuery(query): ApiQuery<VerifyQuery>,
    parquet: bool,
    body: &mut BodyDataStream,
) -> Result<Json<VerifyReport>> {
    let row =
        state.store.job(&tenant, &id).await?.ok_or_else(|| {
            ApiError::new(ErrorCode::JobNotFound, format!("no job with id '{id}'"))
        })?;
    let text =
        state.store.job_spec(&id).await?.ok_or_else(|| {
            ApiError::new(ErrorCode::JobNotFound, format!("no job with id '{id}'"))
        })?;
    let spec = JobSpec::from_json(&text).map_err(ApiError::internal)?;
    let request = VerifyRequest {
        count_column: query.count_column,
        show_values: query.show_values,
    };
    // Bad requests are answered before the body is read.
    verify_config(&spec, &request)?;
    let dataset = state.store.dataset(&tenant, &row.dataset_id).await?;
    let Ok(permit) = state.risk_slots.clone().try_acquire_owned() else {
        return Err(ApiError::new(
            ErrorCode::TooManyRequests,
            format!(
                "{} synchronous analyses are running; try again later",
                state.config.max_risk_requests
            ),
        )
        .retry_after(5));
    };
    let cancel = CancelFlag::new();
    let _guard = CancelOnDrop(cancel.clone());
    let delimiter = dataset
        .as_ref()
        .and_then(|d| d.delimiter.bytes().next())
        .unwrap_or(b',');
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    let input = InputSource {
        state: state.clone(),
        dataset,
        cancel: cancel.clone(),
    };
    let spool = std::env::temp_dir().join(format!("deid-verify-{}.parquet", uuid::Uuid::now_v7()));
    let work = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let reader = std::io::BufReader::with_capacity(1 << 16, ChannelReader::new(rx));
        let released: Box<dyn std::io::Read> = match parquet {
            true => Box::new(SpooledParquet::new(reader, spool, delimiter).map_err(parquet_error)?),
            false => Box::new(reader),
        };
        verify(
            &spec,
            &request,
            released,
            delimiter,
            || input.table(),
            Frontend::Service,
            &cancel,
        )
        .map_err(api_error)
    });
    push_body(state, body, tx).await?;
    let report = work.await.map_err(ApiError::internal)??;
    Ok(Json(report))
}

/// Streams the request body into `tx` (at most `--max-upload-bytes`); stops early when the
/// reader stopped (it answers with its error).
async fn push_body(
    state: &AppState,
    body: &mut BodyDataStream,
    tx: mpsc::Sender<Bytes>,
) -> Result<()> {
    let limit = state.config.max_upload_bytes;
    let mut size = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::new(
                ErrorCode::UploadInterrupted,
                format!("reading the released data failed: {e}"),
            )
        })?;
        size += chunk.len() as u64;
        if size > limit {
            return Err(ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("the released data exceed the limit of {limit} bytes"),
            )
            .with_details(json!({"limit_bytes": limit})));
        }
        if tx.send(chunk).await.is_err() {
            break;
        }
    }
    Ok(())
}

/// The job's stored dataset, read on the blocking thread when a model needs it.
struct InputSource {
    state: AppState,
    dataset: Option<DatasetRow>,
    cancel: CancelFlag,
}

impl InputSource {
    fn table(self) -> std::result::Result<Table, VerifyError> {
        let Some(dataset) = self.dataset else {
            return Err(VerifyError::NoInput(
                "the job's dataset was deleted; its privacy models need it to be verified".into(),
            ));
        };
        let reader = ChunkReader::new(
            self.state.store.clone(),
            tokio::runtime::Handle::current(),
            dataset.id.clone(),
            dataset.chunk_count,
        )
        .cancellable(self.cancel);
        let options = CsvOptions {
            delimiter: dataset.delimiter.bytes().next().unwrap_or(b','),
            has_header: dataset.has_header != 0,
        };
        Table::read_csv(
            std::io::BufReader::with_capacity(1 << 16, reader),
            options,
            "dataset",
        )
        .map_err(|e| VerifyError::Input(format!("the job's dataset cannot be read: {e}")))
    }
}

/// The answer to a verification that could not be made.
fn api_error(e: VerifyError) -> ApiError {
    match e {
        VerifyError::Spec(e) => e.into(),
        VerifyError::Released(e) => released_error(e),
        VerifyError::NoInput(message) => ApiError::new(ErrorCode::DatasetNotFound, message),
        VerifyError::Input(message) => ApiError::new(ErrorCode::DatasetUnreadable, message),
        VerifyError::Cancelled => {
            ApiError::new(ErrorCode::RequestTimeout, "the request was abandoned")
        }
    }
}

/// Unreadable released data: 422 `invalid_csv`, `details` naming the column or the row.
fn released_error(e: EngineError) -> ApiError {
    let details = match &e {
        EngineError::UnknownColumn { name, .. } => json!({"column": name}),
        EngineError::RaggedRow { row, .. } => json!({"row": row}),
        EngineError::InvalidUtf8 { row, column, .. } => json!({"row": row, "column": column}),
        EngineError::InvalidConfig { field, .. } => json!({"field": field}),
        _ => json!({}),
    };
    ApiError::new(
        ErrorCode::InvalidCsv,
        format!("the released data cannot be verified: {e}"),
    )
    .with_details(details)
}
