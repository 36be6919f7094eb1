//! Jobs: creation (validated before queueing), views, Server-Sent Events, cancel and results.

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

use super::auth::Tenant;
use super::datasets::{ColumnProfile, Page, missing_values_error, page_limit, stored_column};
use super::error::{ApiError, Result};
use super::extract::{ApiQuery, body_rejection, parse_json};
use super::state::AppState;
use crate::jobs::execute::{check_config, search_config};
use crate::jobs::progress::Snapshot;
use crate::jobs::view::{JobView, is_terminal, parse_snapshot};
use crate::spec::{AttributeType, DurationSpec, HierarchySource, JobSpec, SpecError};
use crate::store::datasets::DatasetRow;
use crate::store::jobs::{CancelOutcome, JobRow, NewJob, STATUSES};
use deid_engine::search::SearchConfig;
use deid_engine::{EngineError, Problem, Table};

fn spec_error(field: &str, message: impl Into<String>) -> ApiError {
    SpecError::new(field, message).into()
}

fn job_not_found(id: &str) -> ApiError {
    ApiError::new("job_not_found", format!("no job with id '{id}'"))
}

/// `POST /v1/jobs`: validates the specification against the dataset, resolves stored
/// hierarchies into it, and queues it (202 with `Location`).
pub async fn create_job(
    State(state): State<AppState>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    body: std::result::Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Response> {
    let body = body.map_err(body_rejection)?;
    let mut spec: JobSpec = parse_json(&body, "invalid_spec")?;
    for (field, present) in [
        ("input", spec.input.is_some()),
        ("delimiter", spec.delimiter.is_some()),
        ("levels", spec.levels.is_some()),
    ] {
        if present {
            return Err(spec_error(
                field,
                "only the command line accepts this field; the service uses dataset_id",
            ));
        }
    }
    let Some(dataset_id) = spec.dataset_id.clone() else {
        return Err(spec_error(
            "dataset_id",
            "required: the id of an uploaded dataset",
        ));
    };
    let dataset = state
        .store
        .dataset(&tenant, &dataset_id)
        .await?
        .ok_or_else(|| spec_error("dataset_id", format!("no dataset with id '{dataset_id}'")))?;
    let columns: Vec<ColumnProfile> = serde_json::from_str(&dataset.columns).unwrap_or_default();
    for name in spec.attributes.keys() {
        if !columns.iter().any(|c| &c.name == name) {
            return Err(spec_error(
                &format!("attributes.{name}"),
                format!(
                    "the dataset has no column '{name}'; its columns are: {}",
                    columns
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    let qis = spec
        .attributes
        .values()
        .filter(|a| a.kind == AttributeType::QuasiIdentifying)
        .count();
    if qis > deid_engine::problem::MAX_QUASI_IDENTIFIERS {
        return Err(spec_error(
            "attributes",
            format!(
                "at most {} quasi-identifiers are supported, got {qis}",
                deid_engine::problem::MAX_QUASI_IDENTIFIERS
            ),
        ));
    }
    // Stored hierarchies become inline ones, so the job does not change if they are replaced.
    for (name, attr) in spec.attributes.iter_mut() {
        let wants_stored = match &attr.hierarchy {
            Some(HierarchySource::Stored { stored }) => {
                if !*stored {
                    return Err(spec_error(
                        &format!("attributes.{name}.hierarchy.stored"),
                        "must be true (or give the hierarchy inline)",
                    ));
                }
                true
            }
            None => attr.kind == AttributeType::QuasiIdentifying,
            Some(_) => false,
        };
        if wants_stored {
            match state.store.hierarchy(&dataset_id, name).await? {
                // A stored specification is built against the full data when the job runs
                // (the same values, so the same table as stored, plus analytic shares).
                Some(h) => {
                    attr.hierarchy = Some(match h.spec {
                        Some(spec) => HierarchySource::Builder(
                            serde_json::from_str(&spec).map_err(ApiError::internal)?,
                        ),
                        None => HierarchySource::Inline {
                            csv: h.csv,
                            delimiter: h.delimiter.chars().next(),
                        },
                    });
                }
                None => {
                    return Err(spec_error(
                        &format!("attributes.{name}.hierarchy"),
                        format!(
                            "no hierarchy is stored for column '{name}'; upload one with \
                             PUT /v1/datasets/{dataset_id}/hierarchies/{name} or give it inline"
                        ),
                    ));
                }
            }
        }
    }
    let settings = search_config(&spec, state.config.default_time_limit, state.engine_threads)?;
    if settings.time_limit > state.config.max_time_limit || settings.time_limit.is_zero() {
        return Err(spec_error(
            "time_limit",
            format!(
                "must be more than 0 and at most {} ms, got {} ms",
                state.config.max_time_limit.as_millis(),
                settings.time_limit.as_millis()
            ),
        )
        .with_details(json!({"field": "time_limit", "max_ms": state.config.max_time_limit.as_millis() as u64})));
    }
    spec.time_limit = Some(DurationSpec::Millis(settings.time_limit.as_millis() as u64));
    if let Some(url) = &spec.callback_url
        && let Err(message) =
            crate::jobs::webhook::check_url(url, state.config.webhook_allow_private)
    {
        return Err(spec_error("callback_url", message));
    }
    if let Some(t) = spec.risk_threshold
        && !(t > 0.0 && t <= 1.0)
    {
        return Err(spec_error(
            "risk_threshold",
            format!("expected a share in (0, 1], got {t}"),
        ));
    }
    validate_problem(&state, &dataset, &spec, &columns, settings).await?;

    let id = uuid::Uuid::now_v7().to_string();
    let spec_json = serde_json::to_string(&spec).map_err(ApiError::internal)?;
    let queued = state
        .store
        .insert_job(
            &NewJob {
                id: &id,
                tenant: &tenant,
                dataset_id: &dataset_id,
                spec: &spec_json,
                max_attempts: state.config.max_attempts,
                webhook: spec.callback_url.as_ref().map(|_| "pending"),
            },
            state.config.max_queued_jobs,
        )
        .await?;
    if !queued {
        return Err(ApiError::new(
            "queue_full",
            format!(
                "{} jobs are waiting already; try again later",
                state.config.max_queued_jobs
            ),
        )
        .retry_after(10));
    }
    state.runner.wake();
    if let Err(e) = state.store.notify_job_queued().await {
        tracing::warn!(error = %e, "notifying other processes failed; they will poll");
    }
    metrics::counter!("deid_jobs_created_total").increment(1);
    tracing::info!(job = %id, dataset = %dataset_id, "job queued");
    let row = state
        .store
        .job(&tenant, &id)
        .await?
        .ok_or_else(|| ApiError::internal("queued job vanished"))?;
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

/// Validates the whole problem before queueing: the engine's `Problem::new` runs on a small
/// table made of the stored distinct values of the dataset's columns, which checks roles,
/// hierarchies (coverage of every value), level bounds, privacy models and the quality model
/// without reading the data. Columns whose values were not kept (too many) are checked when the
/// job runs.
async fn validate_problem(
    state: &AppState,
    dataset: &DatasetRow,
    spec: &JobSpec,
    columns: &[ColumnProfile],
    search: SearchConfig,
) -> Result<()> {
    let mut values: Vec<Option<Vec<String>>> = Vec::with_capacity(columns.len());
    let mut complete = true;
    for c in columns {
        if spec.attributes.contains_key(&c.name) {
            match stored_column(state, dataset, &c.name).await? {
                Some(col) => values.push(Some(col.dict.values().map(|v| v.to_string()).collect())),
                None => {
                    complete = false;
                    values.push(None);
                }
            }
        } else {
            values.push(None);
        }
    }
    let spec = spec.clone();
    let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
    let rows = dataset.row_count as usize;
    tokio::task::spawn_blocking(move || -> Result<()> {
        // As many rows as the largest domain, or the largest minimal class size the data allows.
        let k = spec
            .privacy
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.parse(&format!("privacy[{i}]")).ok())
            .filter_map(|m| m.min_class_size())
            .max()
            .unwrap_or(1) as usize;
        let domain = values.iter().flatten().map(Vec::len).max().unwrap_or(1);
        let n = domain.max(k.min(rows)).max(1);
        let data: Vec<Vec<String>> = (0..n)
            .map(|r| {
                values
                    .iter()
                    .map(|v| match v {
                        Some(list) if !list.is_empty() => list[r % list.len()].clone(),
                        _ => String::new(),
                    })
                    .collect()
            })
            .collect();
        let header: Vec<&str> = names.iter().map(String::as_str).collect();
        let table = Table::from_rows(&header, &data).map_err(ApiError::internal)?;
        let mut config = spec
            .problem_config(|c, s| {
                let known = names
                    .iter()
                    .position(|n| n == c)
                    .is_some_and(|i| values[i].is_some());
                crate::jobs::load_hierarchy(known.then_some(&table), c, s)
            })
            .map_err(|e| {
                let mut err = ApiError::from(e.clone());
                if e.field.ends_with(".hierarchy") {
                    err.code = "invalid_hierarchy";
                }
                err
            })?;
        if !complete {
            return Ok(());
        }
        crate::spec::order_by_table(&mut config, &table);
        match Problem::new(table, config) {
            Ok(problem) => check_config(&problem, &search)
                .map(|_| ())
                .map_err(|e| spec_error(&e.field, e.message)),
            Err(e @ EngineError::HierarchyMissingValues { .. }) => {
                let field = match &e {
                    EngineError::HierarchyMissingValues { column, .. } => {
                        format!("attributes.{column}.hierarchy")
                    }
                    _ => unreachable!(),
                };
                Err(missing_values_error(e, &field))
            }
            // Checked on a small table: the error names the dataset's rows.
            Err(EngineError::TooFewRecords {
                field,
                model,
                required,
                ..
            }) => Err(SpecError::from(EngineError::TooFewRecords {
                field,
                model,
                required,
                rows,
            })
            .into()),
            Err(e) => Err(SpecError::from(e).into()),
        }
    })
    .await
    .map_err(ApiError::internal)?
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
    pub cursor: Option<String>,
}

/// `GET /v1/jobs`.
pub async fn list_jobs(
    State(state): State<AppState>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    ApiQuery(params): ApiQuery<JobListParams>,
) -> Result<Json<Page<JobView>>> {
    let limit = page_limit(params.limit)?;
    if let Some(s) = &params.status
        && !STATUSES.contains(&s.as_str())
    {
        return Err(ApiError::new(
            "invalid_query",
            format!(
                "unknown status '{s}'; expected one of {}",
                STATUSES.join(", ")
            ),
        )
        .with_details(json!({"field": "status"})));
    }
    let rows = state
        .store
        .list_jobs(
            &tenant,
            params.status.as_deref(),
            params.cursor.as_deref(),
            limit + 1,
        )
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

/// The view of a row, with the live snapshot if the job runs in this process.
fn view_with_live(state: &AppState, row: &JobRow) -> JobView {
    match state.live.get(&row.id) {
        Some(live) if row.status == "running" => JobView::new(row, Some(&live.snapshot())),
        _ => JobView::new(row, None),
    }
}

async fn find_job(state: &AppState, tenant: &str, id: &str) -> Result<JobRow> {
    state
        .store
        .job(tenant, id)
        .await?
        .ok_or_else(|| job_not_found(id))
}

/// `GET /v1/jobs/{id}`.
pub async fn get_job(
    State(state): State<AppState>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    Path(id): Path<String>,
) -> Result<Json<JobView>> {
    let row = find_job(&state, &tenant, &id).await?;
    Ok(Json(view_with_live(&state, &row)))
}

/// `POST /v1/jobs/{id}/cancel`: 202 while the worker stops, 200 if the job was still queued.
pub async fn cancel_job(
    State(state): State<AppState>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    Path(id): Path<String>,
) -> Result<Response> {
    let outcome = state.store.request_cancel(&tenant, &id).await?;
    let status = match outcome {
        CancelOutcome::NotFound => return Err(job_not_found(&id)),
        CancelOutcome::AlreadyFinished => {
            return Err(ApiError::new("job_finished", "the job has already ended"));
        }
        CancelOutcome::Cancelled => StatusCode::OK,
        CancelOutcome::Requested => {
            if let Some(live) = state.live.get(&id) {
                live.stop(crate::jobs::progress::StopCause::User);
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
    Extension(Tenant(tenant)): Extension<Tenant>,
    Path(id): Path<String>,
) -> Result<Response> {
    let (status, result) = state
        .store
        .job_result(&tenant, &id)
        .await?
        .ok_or_else(|| job_not_found(&id))?;
    match result {
        Some(report) => Ok(([(header::CONTENT_TYPE, "application/json")], report).into_response()),
        None => Err(not_available(&status)),
    }
}

fn not_available(status: &str) -> ApiError {
    let message = if is_terminal(status) {
        format!("the job ended ({status}) without a result")
    } else {
        format!("the job is {status}; the result is available when it ends")
    };
    ApiError::new("result_not_available", message).with_details(json!({"status": status}))
}

/// `GET /v1/jobs/{id}/result.csv`: the anonymized CSV, streamed chunk by chunk.
pub async fn get_result_csv(
    State(state): State<AppState>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    Path(id): Path<String>,
) -> Result<Response> {
    let row = find_job(&state, &tenant, &id).await?;
    let Some(chunks) = row.result_chunks else {
        return Err(not_available(&row.status));
    };
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
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{id}.csv\""),
            ),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

/// Where an event stream gets its updates.
enum Source {
    /// The job runs in this process: its watch channel.
    Local(watch::Receiver<Arc<Snapshot>>),
    /// Elsewhere (or not running): the job's row, polled.
    Remote,
}

struct EventState {
    state: AppState,
    row: JobRow,
    source: Source,
    first: bool,
    ended: bool,
    seq: u64,
    trace_seen: usize,
    pending: VecDeque<Event>,
}

/// Polling interval of event streams for jobs not running in this process.
const POLL: Duration = Duration::from_millis(250);

impl EventState {
    fn event(&mut self, name: &str, data: &impl serde::Serialize) -> Event {
        self.seq += 1;
        Event::default()
            .event(name)
            .id(self.seq.to_string())
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
        let mut snapshot: Option<Snapshot> = None;
        if self.first {
            self.first = false;
            self.subscribe_local();
            if let Source::Local(rx) = &mut self.source {
                snapshot = Some((**rx.borrow_and_update()).clone());
                self.row.status = "running".into();
            }
        } else {
            match &mut self.source {
                Source::Local(rx) => {
                    match tokio::time::timeout(Duration::from_secs(1), rx.changed()).await {
                        Ok(Ok(())) => {
                            snapshot = Some((**rx.borrow_and_update()).clone());
                            self.row.status = "running".into();
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
        let snap = snapshot.unwrap_or_else(|| parse_snapshot(self.row.progress.as_deref()));
        let view = JobView::new(&self.row, Some(&snap));
        if self.seq == 0 {
            // A late subscriber starts from the current state, not the whole history.
            self.trace_seen = snap.trace.len();
        }
        let progress = self.event("progress", &view);
        self.pending.push_back(progress);
        if snap.trace.len() > self.trace_seen {
            for i in self.trace_seen..snap.trace.len() {
                let e = self.event("improvement", &snap.trace[i]);
                self.pending.push_back(e);
            }
            self.trace_seen = snap.trace.len();
        }
        if is_terminal(&self.row.status) {
            let name = match self.row.status.as_str() {
                "succeeded" => "done",
                other => other,
            }
            .to_string();
            let e = self.event(&name, &view);
            self.pending.push_back(e);
            self.ended = true;
        }
    }
}

/// `GET /v1/jobs/{id}/events`: `progress` about 4 times a second, `improvement` on every new
/// best, then `done`, `failed` or `cancelled`; ends with the job or at shutdown.
pub async fn job_events(
    State(state): State<AppState>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    Path(id): Path<String>,
) -> Result<Sse<impl Stream<Item = std::result::Result<Event, Infallible>>>> {
    let row = find_job(&state, &tenant, &id).await?;
    let shutdown = state.shutdown.clone();
    let init = EventState {
        state,
        row,
        source: Source::Remote,
        first: true,
        ended: false,
        seq: 0,
        trace_seen: 0,
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
