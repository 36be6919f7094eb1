//! Jobs: creation (validated by the job domain before queueing), views, Server-Sent Events,
//! cancel and results.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::watch;

use super::datasets::{Page, check_cursor, column_profiles, page_limit, stored_column};
use super::error::{ApiError, ErrorCode, Result};
use super::extract::{ApiJson, ApiQuery};
use super::state::AppState;
use crate::job::error::SpecError;
use crate::job::id::{JobId, JobStatus, TenantId};
use crate::job::problem::DatasetFacts;
use crate::job::progress::JobProgress;
use crate::job::spec::{DurationSpec, HierarchySource, JobSpec};
use crate::job::task;
use crate::job::view::JobView;
use crate::store::datasets::DatasetRow;
use crate::store::jobs::{Admission, CancelOutcome, JobRow, NewJob, QueueLimits};

fn job_not_found(id: &JobId) -> ApiError {
    ApiError::new(ErrorCode::JobNotFound, format!("no job with id '{id}'"))
}

/// `POST /v1/jobs`: validates the specification against the dataset (stored hierarchies are
/// inlined, so the job does not change if they are replaced), stores it in its normalized form
/// and queues it (202 with `Location`).
pub async fn create_job(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    ApiJson(mut spec): ApiJson<JobSpec>,
) -> Result<Response> {
    let dataset_id = spec.service_dataset()?;
    task::check_fields(&spec)?;
    let dataset = state
        .store
        .dataset(&tenant, &dataset_id)
        .await?
        .ok_or_else(|| {
            SpecError::new("dataset_id", format!("no dataset with id '{dataset_id}'"))
        })?;
    let columns: Vec<String> = column_profiles(&dataset)
        .into_iter()
        .map(|c| c.name)
        .collect();
    spec.check_columns(&columns)?;
    spec.adopt_count_column(dataset.count_column.as_deref())?;
    let facts = if spec.task().reads_hierarchies() {
        // A generalizing task writes a CSV: refused at once if even its least size is too large.
        crate::job::output::check_output_size(
            &spec,
            &columns,
            dataset.row_count.max(0) as u64,
            state.config.max_output_bytes,
        )?;
        inline_stored_hierarchies(&state, &dataset, &mut spec).await?;
        dataset_facts(&state, &dataset, &spec, columns).await?
    } else {
        // Nothing is generalized: hierarchies are not needed (nor read).
        DatasetFacts {
            rows: dataset.records() as usize,
            values: vec![None; columns.len()],
            columns,
        }
    };
    let (limits, allow_private) = (state.search_limits(), state.config.webhook_allow_private);
    let checked = spec.clone();
    let time_limit = tokio::task::spawn_blocking(move || {
        task::validate(&checked, &facts, &limits, allow_private)
    })
    .await
    .map_err(ApiError::internal)??;
    if let Some(limit) = time_limit {
        spec.time_limit = Some(DurationSpec::Millis(limit.as_millis() as u64));
    }

    let id = queue_job(&state, &tenant, &dataset, &spec).await?;
    accepted(&state, &tenant, &id).await
}

/// The answer to a queued job: 202 with `Location` and the job's view.
async fn accepted(state: &AppState, tenant: &TenantId, id: &JobId) -> Result<Response> {
    let row = find_job(state, tenant, id).await?;
    let mut headers = HeaderMap::new();
    if let Ok(v) = format!("/v1/jobs/{id}").parse() {
        headers.insert(header::LOCATION, v);
    }
    Ok((
        StatusCode::ACCEPTED,
        headers,
        Json(JobView::new(&row, None)),
    )
        .into_response())
}

/// Stores the validated specification and queues the job; 429 when the queue is full.
async fn queue_job(
    state: &AppState,
    tenant: &TenantId,
    dataset: &DatasetRow,
    spec: &JobSpec,
) -> Result<JobId> {
    let id = JobId::generate();
    let new = NewJob {
        id: &id,
        tenant,
        dataset_id: &dataset.id,
        task: spec.task().as_str(),
        algorithm: spec.search_algorithm(),
        spec: &serde_json::to_string(spec).map_err(ApiError::internal)?,
        max_attempts: state.config.max_attempts,
        webhook: spec.callback_url.as_ref().map(|_| "pending"),
        callback_url: spec.callback_url.as_deref(),
        time_limit_ms: spec.time_limit.as_ref().and_then(|t| match t {
            DurationSpec::Millis(ms) => i64::try_from(*ms).ok(),
            DurationSpec::Text(_) => None,
        }),
    };
    let limits = QueueLimits {
        queued: state.config.max_queued_jobs,
        queued_per_tenant: state.config.max_queued_jobs_per_tenant,
    };
    let (limit, scope, whose) = match state.store.insert_job(&new, limits).await? {
        Admission::Queued => (0, "", ""),
        Admission::QueueFull => (limits.queued, "all", ""),
        Admission::TenantQueueFull => (limits.queued_per_tenant, "tenant", " of this tenant"),
    };
    if !scope.is_empty() {
        return Err(ApiError::new(
            ErrorCode::QueueFull,
            format!("{limit} jobs{whose} are waiting already; try again later"),
        )
        .with_details(json!({"limit": limit, "scope": scope}))
        .retry_after(10));
    }
    state.runner.wake();
    if let Err(e) = state.store.notify_job_queued().await {
        tracing::warn!(error = %e, "notifying other processes failed; they will poll");
    }
    metrics::counter!("deid_jobs_created_total").increment(1);
    tracing::info!(job = %id, dataset = %dataset.id, "job queued");
    Ok(id)
}

/// Replaces every stored-hierarchy source of `spec` by the hierarchy stored for the column (a
/// builder specification, built against the full data when the job runs, or the CSV table).
async fn inline_stored_hierarchies(
    state: &AppState,
    dataset: &DatasetRow,
    spec: &mut JobSpec,
) -> Result<()> {
    for column in spec.stored_hierarchies()? {
        let Some(h) = state.store.hierarchy(&dataset.id, &column).await? else {
            return Err(SpecError::new(
                crate::job::field::hierarchy(&column),
                format!(
                    "no hierarchy is stored for column '{column}'; upload one with \
                     PUT /v1/datasets/{}/hierarchies/{column} or give it inline",
                    dataset.id
                ),
            )
            .into());
        };
        let source = match h.spec {
            Some(builder) => HierarchySource::Builder(
                serde_json::from_str(&builder).map_err(ApiError::internal)?,
            ),
            None => HierarchySource::Inline {
                csv: h.csv,
                delimiter: h.delimiter.chars().next(),
            },
        };
        spec.inline_hierarchy(&column, source);
    }
    Ok(())
}

/// What validation needs to know about the dataset: its columns, rows, and the stored distinct
/// values of the columns `spec` names.
async fn dataset_facts(
    state: &AppState,
    dataset: &DatasetRow,
    spec: &JobSpec,
    columns: Vec<String>,
) -> Result<DatasetFacts> {
    let mut values = Vec::with_capacity(columns.len());
    for c in &columns {
        let named = spec.attributes.contains_key(c) || spec.research_subset_column() == Some(c);
        values.push(match named {
            true => stored_column(state, dataset, c)
                .await?
                .map(|col| col.dict.values().map(str::to_string).collect()),
            false => None,
        });
    }
    Ok(DatasetFacts {
        columns,
        rows: dataset.records() as usize,
        values,
    })
}

/// Query parameters of `GET /v1/jobs`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobListParams {
    /// Only jobs with this status.
    pub status: Option<String>,
    /// Page size, 1..=100 (default 20).
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<JobId>,
}

/// `GET /v1/jobs`.
pub async fn list_jobs(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    ApiQuery(params): ApiQuery<JobListParams>,
) -> Result<Json<Page<JobView, JobId>>> {
    let limit = page_limit(params.limit)?;
    check_cursor(params.cursor.as_ref().map(JobId::as_str))?;
    let status = match params.status.as_deref() {
        None => None,
        Some(s) => Some(JobStatus::parse(s).ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidQuery,
                format!(
                    "unknown status '{s}'; expected one of {}",
                    JobStatus::NAMES.join(", ")
                ),
            )
            .with_details(json!({"field": "status"}))
        })?),
    };
    let rows = state
        .store
        .list_jobs(&tenant, status, params.cursor.as_ref(), limit + 1)
        .await?;
    let more = rows.len() as i64 > limit;
    let items: Vec<JobView> = rows
        .iter()
        .take(limit as usize)
        .map(|r| view_with_live(&state, r))
        .collect();
    let next_cursor = if more {
        items.last().map(|j| j.id.clone())
    } else {
        None
    };
    Ok(Json(Page { items, next_cursor }))
}

/// The view of a row, with the live progress if the job runs in this process.
fn view_with_live(state: &AppState, row: &JobRow) -> JobView {
    match state.live.get(&row.id) {
        Some(live) if row.status == JobStatus::Running => JobView::new(row, Some(&live.progress())),
        _ => JobView::new(row, None),
    }
}

async fn find_job(state: &AppState, tenant: &TenantId, id: &JobId) -> Result<JobRow> {
    state
        .store
        .job(tenant, id)
        .await?
        .ok_or_else(|| job_not_found(id))
}

/// `GET /v1/jobs/{id}`.
pub async fn get_job(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<JobId>,
) -> Result<Json<JobView>> {
    let row = find_job(&state, &tenant, &id).await?;
    Ok(Json(view_with_live(&state, &row)))
}

/// `POST /v1/jobs/{id}/cancel`: 202 while the worker stops, 200 if the job was still queued.
pub async fn cancel_job(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<JobId>,
) -> Result<Response> {
    let outcome = state.store.request_cancel(&tenant, &id).await?;
    let status = match outcome {
        CancelOutcome::NotFound => return Err(job_not_found(&id)),
        CancelOutcome::AlreadyFinished => {
            return Err(ApiError::new(
                ErrorCode::JobFinished,
                "the job has already ended",
            ));
        }
        CancelOutcome::Cancelled => StatusCode::OK,
        CancelOutcome::Requested => {
            if let Some(live) = state.live.get(&id) {
                live.stop(crate::worker::live::StopCause::User);
            }
            StatusCode::ACCEPTED
        }
    };
    let row = find_job(&state, &tenant, &id).await?;
    Ok((status, Json(view_with_live(&state, &row))).into_response())
}

/// `GET /v1/jobs/{id}/result`: the report.
pub async fn get_result(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<JobId>,
) -> Result<Response> {
    let (status, result) = state
        .store
        .job_result(&tenant, &id)
        .await?
        .ok_or_else(|| job_not_found(&id))?;
    match result {
        Some(report) => Ok(([(header::CONTENT_TYPE, "application/json")], report).into_response()),
        None => Err(not_available(status)),
    }
}

fn not_available(status: JobStatus) -> ApiError {
    let message = if status.is_terminal() {
        format!("the job ended ({status}) without a result")
    } else {
        format!("the job is {status}; the result is available when it ends")
    };
    ApiError::new(ErrorCode::ResultNotAvailable, message).with_details(json!({"status": status}))
}

/// `GET /v1/jobs/{id}/plan`: the recoding plan of the result CSV (JSON,
/// `docs/definitions.md` §7); 409 `result_not_available` while the job has no output, or when
/// its output has no plan (another task; a research subset of records).
pub async fn get_plan(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<JobId>,
) -> Result<Response> {
    let (status, plan) = state
        .store
        .job_plan(&tenant, &id)
        .await?
        .ok_or_else(|| job_not_found(&id))?;
    match plan {
        Some(plan) => Ok(([(header::CONTENT_TYPE, "application/json")], plan).into_response()),
        None if status == JobStatus::Succeeded => Err(ApiError::new(
            ErrorCode::ResultNotAvailable,
            "the job has no recoding plan: only an anonymize job's output has one (and not \
             with a research subset of records)",
        )
        .with_details(json!({"status": status}))),
        None => Err(not_available(status)),
    }
}

/// `GET /v1/jobs/{id}/spec`: the job's specification as stored (normalized, stored hierarchies
/// inlined; unset settings left out), e.g. to submit it again with other settings or as an
/// evaluate job.
pub async fn get_spec(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<JobId>,
) -> Result<Response> {
    let spec = state
        .store
        .tenant_job_spec(&tenant, &id)
        .await?
        .ok_or_else(|| job_not_found(&id))?;
    // Unset settings are stored as null; the answer leaves them out, as a client writes them.
    let mut spec: serde_json::Value = serde_json::from_str(&spec).map_err(ApiError::internal)?;
    if let Some(fields) = spec.as_object_mut() {
        fields.retain(|_, v| !v.is_null());
    }
    Ok(Json(spec).into_response())
}

/// Query parameters of `GET /v1/jobs/{id}/result.csv`.
#[derive(Debug, Deserialize)]
pub struct CsvQuery {
    /// Neutralize spreadsheet formulas in this download.
    #[serde(default)]
    neutralize_formulas: bool,
}

/// `GET /v1/jobs/{id}/result.csv`: the anonymized CSV, streamed chunk by chunk; with
/// `?neutralize_formulas=true`, copied cell by cell on a blocking thread with formulas
/// neutralized (`deid_engine::output::neutralize_csv`).
pub async fn get_result_csv(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<JobId>,
    ApiQuery(query): ApiQuery<CsvQuery>,
) -> Result<Response> {
    let row = find_job(&state, &tenant, &id).await?;
    let chunks = result_chunks(&row, "CSV")?;
    let headers = [
        (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
        (
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{id}.csv\""),
        ),
    ];
    if query.neutralize_formulas {
        let body = neutralized_csv(&state, &row, chunks).await?;
        return Ok((headers, body).into_response());
    }
    let store = state.store.clone();
    let job_id = row.id.clone();
    let stream = futures_util::stream::unfold(0i64, move |seq| {
        let store = store.clone();
        let job_id = job_id.clone();
        async move {
            if seq >= chunks {
                return None;
            }
            let item = match store.result_chunk(&job_id, seq).await {
                Ok(Some(data)) => Ok(Bytes::from(data)),
                Ok(None) => Err(std::io::Error::other("a result chunk is missing")),
                Err(e) => Err(std::io::Error::other(e.to_string())),
            };
            Some((item, seq + 1))
        }
    });
    Ok((headers, Body::from_stream(stream)).into_response())
}

/// The stored result CSV of `row` with formulas neutralized, streamed from a blocking thread
/// (64 KiB at a time).
async fn neutralized_csv(state: &AppState, row: &JobRow, chunks: i64) -> Result<Body> {
    let delimiter = result_delimiter(state, row).await?;
    Ok(converted_result(
        state,
        row,
        chunks,
        "neutralizing a result CSV",
        move |input, out| deid_engine::output::neutralize_csv(input, out, delimiter),
    ))
}

/// The stored result CSV of `row` streamed through `convert` on a blocking thread (64 KiB at a
/// time). A failed conversion truncates the download and is logged as `what`, without cell values.
fn converted_result<E: std::fmt::Display>(
    state: &AppState,
    row: &JobRow,
    chunks: i64,
    what: &'static str,
    convert: impl FnOnce(
        std::io::BufReader<crate::worker::chunks::ChunkReader>,
        ChannelWriter,
    ) -> std::result::Result<(), E>
    + Send
    + 'static,
) -> Body {
    let reader = crate::worker::chunks::ChunkReader::result(
        state.store.clone(),
        tokio::runtime::Handle::current(),
        row.id.clone(),
        chunks,
    );
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(4);
    tokio::task::spawn_blocking(move || {
        let out = ChannelWriter {
            tx: tx.clone(),
            buf: Vec::with_capacity(1 << 16),
        };
        let input = std::io::BufReader::with_capacity(1 << 16, reader);
        if let Err(e) = convert(input, out) {
            tracing::warn!(error = %e, "{what} failed");
            let _ = tx.blocking_send(Err(std::io::Error::other("the download failed")));
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Body::from_stream(stream)
}

/// The delimiter of `row`'s result CSV: the dataset's, or, once the dataset is deleted, the most
/// frequent of `,` `;` tab `|` in the header line.
async fn result_delimiter(state: &AppState, row: &JobRow) -> Result<u8> {
    Ok(
        match state.store.dataset(&row.tenant, &row.dataset_id).await? {
            Some(d) => d.delimiter.bytes().next().unwrap_or(b','),
            None => {
                let first = state
                    .store
                    .result_chunk(&row.id, 0)
                    .await?
                    .unwrap_or_default();
                let line = first.split(|&b| b == b'\n').next().unwrap_or_default();
                [b',', b';', b'\t', b'|']
                    .into_iter()
                    .rev()
                    .max_by_key(|d| line.iter().filter(|b| *b == d).count())
                    .unwrap_or(b',')
            }
        },
    )
}

/// `GET /v1/jobs/{id}/result.parquet`: the result CSV as Parquet (`crate::parquet::write`:
/// text columns, the count column of a frequency table as INT64), converted on a blocking
/// thread as it is streamed.
pub async fn get_result_parquet(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<JobId>,
) -> Result<Response> {
    let row = find_job(&state, &tenant, &id).await?;
    let chunks = result_chunks(&row, "result.parquet")?;
    let delimiter = result_delimiter(&state, &row).await?;
    let spec = state.store.job_spec(&row.id).await?.unwrap_or_default();
    let count_column = serde_json::from_str::<serde_json::Value>(&spec)
        .ok()
        .and_then(|v| v.get("count_column")?.as_str().map(str::to_string));
    let body = converted_result(
        &state,
        &row,
        chunks,
        "converting a result to Parquet",
        move |input, out| {
            crate::parquet::csv_to_parquet(input, delimiter, count_column.as_deref(), out, "result")
                .map(drop)
        },
    );
    let headers = [
        (header::CONTENT_TYPE, crate::parquet::MEDIA_TYPE.to_string()),
        (
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{id}.parquet\""),
        ),
    ];
    Ok((headers, body).into_response())
}

/// The number of result chunks of `row`: 409 for a risk job (no CSV) or a job without a result.
fn result_chunks(row: &JobRow, file: &str) -> Result<i64> {
    if row.task == "risk" {
        return Err(ApiError::new(
            ErrorCode::ResultNotAvailable,
            format!(
                "a risk job's result is its report (GET /v1/jobs/{}/result); it has no {file}",
                row.id
            ),
        )
        .with_details(json!({"status": row.status, "task": "risk"})));
    }
    row.result_chunks.ok_or_else(|| not_available(row.status))
}

/// Sends what is written, 64 KiB at a time, to a download's stream (blocking thread only).
struct ChannelWriter {
    tx: tokio::sync::mpsc::Sender<std::io::Result<Bytes>>,
    buf: Vec<u8>,
}

impl std::io::Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= 1 << 16 {
            self.flush()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::take(&mut self.buf));
        // The client went away: stop copying.
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::other("the download was abandoned"))
    }
}

/// Where an event stream gets its updates.
enum Source {
    /// The job runs in this process: its watch channel.
    Local(watch::Receiver<Arc<JobProgress>>),
    /// Elsewhere (or not running): the job's row, polled.
    Remote,
}

struct EventState {
    state: AppState,
    row: JobRow,
    source: Source,
    first: bool,
    ended: bool,
    /// Improvements (trace entries) already sent.
    trace_seen: usize,
    pending: VecDeque<Event>,
}

/// Polling interval of event streams for jobs not running in this process.
const POLL: Duration = Duration::from_millis(250);

impl EventState {
    /// An event whose id is the number of improvements sent so far (what `Last-Event-ID` resumes
    /// from).
    fn event(&mut self, name: &str, data: &impl serde::Serialize) -> Event {
        Event::default()
            .event(name)
            .id(self.trace_seen.to_string())
            .json_data(data)
            .unwrap_or_else(|_| Event::default().event(name))
    }

    fn subscribe_local(&mut self) {
        if matches!(self.source, Source::Remote)
            && let Some(live) = self.state.live.get(&self.row.id)
        {
            self.source = Source::Local(live.updates.subscribe());
        }
    }

    /// Waits for the next state and queues its events.
    async fn advance(&mut self) {
        let mut snapshot: Option<JobProgress> = None;
        if self.first {
            self.first = false;
            self.subscribe_local();
            if let Source::Local(rx) = &mut self.source {
                snapshot = Some((**rx.borrow_and_update()).clone());
                self.row.status = JobStatus::Running;
            }
        } else {
            match &mut self.source {
                Source::Local(rx) => {
                    match tokio::time::timeout(Duration::from_secs(1), rx.changed()).await {
                        Ok(Ok(())) => {
                            snapshot = Some((**rx.borrow_and_update()).clone());
                            self.row.status = JobStatus::Running;
                        }
                        // The job ended here (channel closed) or is silent: read the row.
                        Ok(Err(_)) | Err(_) => self.source = Source::Remote,
                    }
                }
                Source::Remote => tokio::time::sleep(POLL).await,
            }
            if matches!(self.source, Source::Remote) {
                match self.state.store.job_by_id(&self.row.id).await {
                    Ok(Some(row)) => self.row = row,
                    Ok(None) => {
                        self.ended = true;
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "event stream: reading the job failed");
                        return;
                    }
                }
                self.subscribe_local();
            }
        }
        let snap = snapshot.unwrap_or_else(|| JobProgress::from_row(self.row.progress.as_deref()));
        let view = JobView::new(&self.row, Some(&snap));
        let progress = self.event("progress", &view);
        self.pending.push_back(progress);
        // Every improvement not seen yet, from the start (or from `Last-Event-ID`) on.
        while self.trace_seen < snap.trace.len() {
            let i = self.trace_seen;
            self.trace_seen += 1;
            let e = self.event("improvement", &snap.trace[i]);
            self.pending.push_back(e);
        }
        if self.row.status.is_terminal() {
            let name = match self.row.status {
                JobStatus::Succeeded => "done",
                other => other.as_str(),
            };
            let e = self.event(name, &view);
            self.pending.push_back(e);
            self.ended = true;
        }
    }
}

/// `GET /v1/jobs/{id}/events`: the current state (`progress`) and every improvement so far
/// (`improvement`, replayed for late subscribers), then `progress` about 4 times a second and
/// `improvement` on every new best, then `done`, `failed` or `cancelled`; ends with the job or at
/// shutdown. Event ids count the improvements sent: a client reconnecting with `Last-Event-ID: n`
/// gets the improvements from the (n+1)-th on.
pub async fn job_events(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path(id): Path<JobId>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = std::result::Result<Event, Infallible>>>> {
    let row = find_job(&state, &tenant, &id).await?;
    let seen = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let shutdown = state.shutdown.clone();
    let init = EventState {
        state,
        row,
        source: Source::Remote,
        first: true,
        ended: false,
        trace_seen: seen,
        pending: VecDeque::new(),
    };
    let stream = futures_util::stream::unfold(init, |mut st| async move {
        loop {
            if let Some(e) = st.pending.pop_front() {
                return Some((Ok(e), st));
            }
            if st.ended {
                return None;
            }
            st.advance().await;
        }
    });
    use futures_util::StreamExt;
    let stream = stream.take_until(shutdown.cancelled_owned());
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
