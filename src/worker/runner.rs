//! The queue worker of one process.
//!
//! [`Runner::start`] spawns two loops on the task tracker:
//! - the **claim loop**: waits for a free slot (a semaphore of `concurrency` permits), claims
//!   the next due job fairly across tenants (lease `lease`; `Store::claim_next_job`), runs it, and sleeps until woken (a job was queued here)
//!   or the poll interval passes when the queue is empty;
//! - the **reaper**: every `lease / 2`, puts jobs whose lease expired back in the queue (or
//!   fails them after `max_attempts` claims), and delivers webhooks that a stopped process left
//!   `pending` (deliveries are leased in the job's row, so one process sends each).
//!
//! Running one job ([`Runner::run_claimed`]):
//! 1. register a [`LiveJob`] (cancel flag, progress) in the live map;
//! 2. start the heartbeat: every 250 ms publish the snapshot to local subscribers and persist it
//!    with the lease extension; a lost lease, a cancel request or shutdown raise the cancel flag;
//! 3. on the engine pool: read the dataset from its chunks and run the job's task
//!    ([`crate::job::task::run`]; progress goes into the [`LiveJob`]), which writes the CSV to
//!    the job's result chunks (fenced by the lease) and returns the report;
//! 4. finish with one fenced statement: succeeded / cancelled (best so far kept) / failed, or
//!    back to the queue (retryable errors, shutdown), or nothing at all when the lease was lost;
//! 5. send the webhook, if any, under a delivery lease.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use tokio::runtime::Handle;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::chunks::{ChunkReader, ResultWriter};
use super::live::{LiveJob, StopCause};
use super::pool::EnginePool;
use crate::job::error::{ErrorCode, SpecError};
use crate::job::hierarchy::Frontend;
use crate::job::id::{JobId, JobStatus};
use crate::job::plan::HashingReader;
use crate::job::progress::JobPhase;
use crate::job::report::JobInfo;
use crate::job::spec::{JobSpec, SearchLimits, Task};
use crate::job::task::{self, Host, Run, Summary, TaskError, TaskFailure, Verdict};
use crate::store::Store;
use crate::store::datasets::DatasetRow;
use crate::store::jobs::{ClaimedJob, Completion};
use deid_engine::search::SearchConfig;
use deid_engine::{CancelFlag, CsvOptions, Problem, ProgressObserver, Table};

/// Settings of the worker.
#[derive(Debug, Clone)]
pub struct RunnerSettings {
    /// Jobs run at once by this process.
    pub concurrency: usize,
    /// Lease length; heartbeats come every 250 ms.
    pub lease: Duration,
    /// How often an idle worker looks at the queue (other replicas may queue jobs).
    pub poll_interval: Duration,
    /// Time limit of jobs that set none.
    pub default_time_limit: Duration,
    /// Attempts of a webhook delivery.
    pub webhook_attempts: u32,
    /// First webhook retry delay (doubled each time).
    pub webhook_backoff: Duration,
    /// Deliver webhooks to non-public addresses too.
    pub webhook_allow_private: bool,
    /// Certificate authorities trusted for https callbacks besides the system's.
    pub webhook_roots: Arc<Vec<reqwest::Certificate>>,
    /// Longest upload: an upload still incomplete after it (plus a lease) was abandoned by a
    /// process that stopped, and is removed by the reaper.
    pub upload_timeout: Duration,
    /// Largest anonymized CSV of a job (bytes), measured before it is written.
    pub max_output_bytes: u64,
    /// Running jobs of one tenant (all processes) beyond which its jobs are not claimed.
    pub max_running_per_tenant: i64,
}

/// Interval of heartbeats and progress publication.
pub const HEARTBEAT: Duration = Duration::from_millis(250);

/// Jobs running in this process, by id.
pub type LiveJobs = Arc<DashMap<JobId, Arc<LiveJob>>>;

/// The worker of one process.
#[derive(Debug)]
pub struct Runner {
    store: Store,
    pool: Arc<EnginePool>,
    live: LiveJobs,
    owner: String,
    settings: RunnerSettings,
    token: CancellationToken,
    tracker: TaskTracker,
    wake: Arc<Notify>,
}

/// The outcome of the engine side of a job.
enum Processed {
    /// The search ended (completed, limits or user cancel) and the result was written.
    Finished {
        summary: Summary,
        report: Option<String>,
        /// The recoding plan (JSON) of the written output.
        plan: Option<String>,
        chunks: Option<i64>,
        /// Why the job fails although it ran to its end (`no_solution`, `not_anonymous`); the
        /// report is kept.
        failure: Option<Failure>,
    },
    /// Shutdown or lost lease: write nothing.
    Aborted,
}

/// A job failure: `retryable` ones go back to the queue while attempts remain.
#[derive(Debug)]
struct Failure {
    code: ErrorCode,
    message: String,
    details: serde_json::Value,
    retryable: bool,
}

impl Failure {
    fn spec(e: SpecError) -> Failure {
        Failure {
            code: e.code,
            message: e.client_message(),
            details: e.client_details(),
            retryable: false,
        }
    }

    /// The failure of a task that ran to its end (`no_solution`, `not_anonymous`).
    fn of_task(f: TaskFailure) -> Failure {
        Failure {
            code: f.code,
            message: match f.code {
                ErrorCode::NotAnonymous => format!(
                    "{}; the result has its report, no CSV was written",
                    f.message
                ),
                _ => f.message,
            },
            details: f.details,
            retryable: false,
        }
    }

    /// A failure that is not about the job itself (storage, engine pool): retried.
    fn transient(code: ErrorCode, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
            details: serde_json::json!({}),
            retryable: true,
        }
    }

    /// The message for logs: only for storage and internal failures, since messages about the
    /// data (hierarchies, CSV) may quote cell values, which never go to the logs.
    fn loggable(&self) -> &str {
        match self.code {
            ErrorCode::StorageError | ErrorCode::InternalError => &self.message,
            _ => "(see the job's error)",
        }
    }

    /// The error as stored in the job's row: the API's error shape.
    fn json(&self) -> String {
        serde_json::json!({"code": self.code, "message": self.message, "details": self.details})
            .to_string()
    }
}

impl Runner {
    /// A worker identified by a fresh owner id.
    pub fn new(
        store: Store,
        pool: Arc<EnginePool>,
        live: LiveJobs,
        settings: RunnerSettings,
        token: CancellationToken,
        tracker: TaskTracker,
    ) -> Arc<Runner> {
        Arc::new(Runner {
            store,
            pool,
            live,
            owner: uuid::Uuid::now_v7().to_string(),
            settings,
            token,
            tracker,
            wake: Arc::new(Notify::new()),
        })
    }

    /// This worker's lease owner id.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Wakes the claim loop (a job was queued).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Recovers and starts the loops. On SQLite (one process per database) every job still
    /// marked running was interrupted by a crash and is re-queued at once; on PostgreSQL the
    /// reaper waits for leases to expire, since other processes may hold them.
    pub async fn start(self: &Arc<Self>) -> crate::store::Result<()> {
        if !self.store.is_shared() {
            let (requeued, failed) = self
                .store
                .reap_expired_leases(i64::MAX, &interrupted_error())
                .await?;
            if requeued + failed > 0 {
                tracing::warn!(requeued, failed, "recovered jobs interrupted by a restart");
            }
            let purged = self.store.purge_stale_uploads(i64::MAX).await?;
            if purged > 0 {
                tracing::warn!(purged, "removed incomplete uploads");
            }
        }
        let me = self.clone();
        self.tracker.spawn(async move { me.claim_loop().await });
        let me = self.clone();
        self.tracker.spawn(async move { me.reap_loop().await });
        if let Some(listener) = self.store.job_listener().await? {
            let me = self.clone();
            self.tracker
                .spawn(async move { me.listen_loop(listener).await });
        }
        Ok(())
    }

    async fn claim_loop(self: Arc<Self>) {
        let slots = Arc::new(Semaphore::new(self.settings.concurrency.max(1)));
        let lease_ms = self.settings.lease.as_millis() as i64;
        loop {
            let permit = tokio::select! {
                p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
                _ = self.token.cancelled() => return,
            };
            if self.token.is_cancelled() {
                return;
            }
            let claim = self.store.claim_next_job(
                &self.owner,
                lease_ms,
                self.settings.max_running_per_tenant,
            );
            match claim.await {
                Ok(Some(job)) => {
                    let me = self.clone();
                    self.tracker.spawn(async move {
                        me.run_claimed(job).await;
                        drop(permit);
                    });
                }
                Ok(None) => {
                    drop(permit);
                    tokio::select! {
                        _ = self.wake.notified() => {}
                        _ = tokio::time::sleep(self.settings.poll_interval) => {}
                        _ = self.token.cancelled() => return,
                    }
                }
                Err(e) => {
                    drop(permit);
                    tracing::error!(error = %e, "claiming a job failed");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = self.token.cancelled() => return,
                    }
                }
            }
        }
    }

    /// Wakes the claim loop when another process queues a job (PostgreSQL `LISTEN`); the poll
    /// interval remains the fallback if the connection drops.
    async fn listen_loop(self: Arc<Self>, mut listener: sqlx::postgres::PgListener) {
        loop {
            tokio::select! {
                n = listener.try_recv() => match n {
                    Ok(Some(_)) => self.wake(),
                    // The connection was lost; `try_recv` reconnects on the next call.
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "job notifications failed; polling only");
                        return;
                    }
                },
                _ = self.token.cancelled() => return,
            }
        }
    }

    async fn reap_loop(self: Arc<Self>) {
        let every = (self.settings.lease / 2).max(Duration::from_millis(200));
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = self.token.cancelled() => return,
            }
            self.recover_webhooks().await;
            self.purge_abandoned_uploads().await;
            match self
                .store
                .reap_expired_leases(crate::store::now_ms(), &interrupted_error())
                .await
            {
                Ok((0, 0)) => {}
                Ok((requeued, failed)) => {
                    tracing::warn!(
                        requeued,
                        failed,
                        "re-queued jobs whose worker stopped heartbeating"
                    );
                    self.wake();
                }
                Err(e) => tracing::error!(error = %e, "reaping expired leases failed"),
            }
        }
    }

    /// Removes uploads that stayed incomplete longer than any upload may take: their process
    /// stopped (on PostgreSQL, possibly another replica) and nothing else would ever list or
    /// delete them.
    async fn purge_abandoned_uploads(&self) {
        let horizon = (self.settings.upload_timeout + self.settings.lease).as_millis() as i64;
        match self
            .store
            .purge_stale_uploads(crate::store::now_ms() - horizon)
            .await
        {
            Ok(0) => {}
            Ok(n) => tracing::warn!(purged = n, "removed abandoned uploads"),
            Err(e) => tracing::error!(error = %e, "removing abandoned uploads failed"),
        }
    }

    /// The webhook delivery settings.
    fn webhook_policy(&self) -> super::webhook::Policy {
        super::webhook::Policy {
            attempts: self.settings.webhook_attempts,
            backoff: self.settings.webhook_backoff,
            allow_private: self.settings.webhook_allow_private,
            extra_roots: self.settings.webhook_roots.clone(),
        }
    }

    /// Delivers job `id`'s webhook in the background if this process gets its lease.
    fn spawn_webhook(self: &Arc<Self>, id: JobId, url: String) {
        let me = self.clone();
        self.tracker.spawn(async move {
            let policy = me.webhook_policy();
            let until = crate::store::now_ms() + policy.max_duration().as_millis() as i64;
            match me.store.claim_webhook(&id, until).await {
                Ok(true) => {
                    super::webhook::deliver(&me.store, &id, &url, &policy, &me.token).await;
                }
                Ok(false) => {}
                Err(e) => tracing::error!(job = %id, error = %e, "claiming a webhook failed"),
            }
        });
    }

    /// Picks up webhooks of ended jobs that are still `pending` without a live lease (the
    /// process that was to deliver them died).
    async fn recover_webhooks(self: &Arc<Self>) {
        let ids = match self.store.orphaned_webhooks(16).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::error!(error = %e, "looking for undelivered webhooks failed");
                return;
            }
        };
        for (id, url) in ids {
            // Jobs queued before the URL had a column of its own: from the specification.
            let url = match url {
                Some(url) => Some(url),
                None => match self.store.job_spec(&id).await {
                    Ok(s) => s
                        .and_then(|s| serde_json::from_str::<JobSpec>(&s).ok())
                        .and_then(|s| s.callback_url),
                    Err(_) => continue,
                },
            };
            match url {
                Some(url) => {
                    tracing::warn!(job = %id, "delivering a webhook left pending by a stopped process");
                    self.spawn_webhook(id, url);
                }
                None => {
                    let _ = self.store.set_webhook_state(&id, "failed").await;
                }
            }
        }
    }

    /// Runs one claimed job to its end (see the module documentation).
    async fn run_claimed(self: Arc<Self>, job: ClaimedJob) {
        let span = tracing::info_span!("job", id = %job.id, attempt = job.attempts);
        let _ = tracing::Instrument::instrument(self.clone().run_claimed_inner(job), span).await;
    }

    async fn run_claimed_inner(self: Arc<Self>, job: ClaimedJob) {
        let started = Instant::now();
        tracing::info!("job started");
        let live = Arc::new(LiveJob::new());
        self.live.insert(job.id.clone(), live.clone());
        let beat_stop = CancellationToken::new();
        let beat = tokio::spawn(heartbeat(
            self.store.clone(),
            job.id.clone(),
            self.owner.clone(),
            live.clone(),
            self.settings.lease,
            self.token.clone(),
            beat_stop.clone(),
        ));

        // The stored specification, read once: the task runs it, the webhook goes to its URL.
        let spec: Result<JobSpec, Failure> = serde_json::from_str(&job.spec).map_err(|e| Failure {
            code: ErrorCode::InvalidSpec,
            message: format!("the stored specification cannot be read: {e}"),
            details: serde_json::json!({}),
            retryable: false,
        });
        let callback_url = spec.as_ref().ok().and_then(|s| s.callback_url.clone());
        let result = match spec {
            Ok(spec) => self.process(&job, spec, &live).await,
            Err(f) => Err(f),
        };
        beat_stop.cancel();
        let _ = beat.await;

        let mut progress = live.progress();
        if let Ok(Processed::Finished { summary, .. }) = &result {
            progress.counters.checks = summary.checks;
            progress.counters.elapsed_ms = summary.elapsed.as_millis() as u64;
            if summary.optimal_proven {
                progress.counters.explored_share = 1.0;
            }
        }
        live.count_checks(progress.counters.checks);
        progress.counters.phase = JobPhase::Finished;
        let write = self
            .record_end(&job, &result, live.cause(), &progress.to_json(), started)
            .await;
        // Local subscribers see the final progress, then the channel closes and they read the row.
        live.updates.send_replace(Arc::new(progress));
        self.live.remove(&job.id);
        match write {
            Ok(true) => {}
            Ok(false) => tracing::warn!("the job's final state was not written (lease lost)"),
            Err(ref e) => tracing::error!(error = %e, "writing the job's final state failed"),
        }
        if matches!(write, Ok(true)) {
            if let Ok(Some(row)) = self.store.job_by_id(&job.id).await
                && row.status.is_terminal()
            {
                tracing::info!(status = %row.status, elapsed_ms = started.elapsed().as_millis() as u64, "job ended");
                if let Some(url) = callback_url {
                    self.spawn_webhook(job.id.clone(), url);
                }
            }
            self.wake();
        }
    }

    /// Writes how the job ended with one fenced statement: succeeded / cancelled (best so far
    /// kept) / failed, or back to the queue (retryable failures, shutdown), or nothing at all
    /// when the lease was lost. True if written.
    async fn record_end(
        &self,
        job: &ClaimedJob,
        result: &Result<Processed, Failure>,
        cause: StopCause,
        progress: &str,
        started: Instant,
    ) -> crate::store::Result<bool> {
        let (status, report, chunks, failure) = match (result, cause) {
            (_, StopCause::LeaseLost) => {
                tracing::warn!("lease lost: the job belongs to another worker now");
                return Ok(false);
            }
            (Ok(Processed::Aborted), _) | (Err(_), StopCause::Shutdown) => {
                tracing::info!("shutting down: job released to the queue");
                return self.store.release_job(&job.id, &self.owner).await;
            }
            (Err(f), _) if f.retryable && job.attempts < job.max_attempts => {
                let delay = 1000i64 << job.attempts.clamp(0, 6);
                tracing::warn!(code = %f.code, error = %f.loggable(), delay_ms = delay, "job failed, will retry");
                return self
                    .store
                    .retry_job(&job.id, &self.owner, delay, &f.json())
                    .await;
            }
            (Err(f), _) => {
                tracing::warn!(code = %f.code, error = %f.loggable(), "job failed");
                (JobStatus::Failed, None, None, Some(f.json()))
            }
            (
                Ok(Processed::Finished {
                    report,
                    chunks,
                    failure,
                    ..
                }),
                _,
            ) => {
                if cause == StopCause::User {
                    (JobStatus::Cancelled, report.as_deref(), *chunks, None)
                } else if let Some(f) = failure {
                    (
                        JobStatus::Failed,
                        report.as_deref(),
                        *chunks,
                        Some(f.json()),
                    )
                } else {
                    (JobStatus::Succeeded, report.as_deref(), *chunks, None)
                }
            }
        };
        metrics::histogram!("deid_job_duration_seconds", "status" => status.as_str())
            .record(started.elapsed().as_secs_f64());
        self.store
            .complete_job(
                &job.id,
                &self.owner,
                &Completion {
                    status,
                    progress,
                    result: report,
                    result_chunks: chunks,
                    error: failure.as_deref(),
                    plan: finished_plan(result, chunks),
                },
            )
            .await
    }

    /// Loads the dataset and runs the engine side on the pool.
    async fn process(
        &self,
        job: &ClaimedJob,
        spec: JobSpec,
        live: &Arc<LiveJob>,
    ) -> Result<Processed, Failure> {
        let dataset = match self.store.dataset(&job.tenant, &job.dataset_id).await {
            Ok(Some(d)) => d,
            Ok(None) => {
                return Err(Failure {
                    code: ErrorCode::DatasetNotFound,
                    message: format!("dataset {} no longer exists", job.dataset_id),
                    details: serde_json::json!({}),
                    retryable: false,
                });
            }
            Err(e) => return Err(Failure::transient(ErrorCode::StorageError, e.to_string())),
        };
        let limits = SearchLimits {
            default_time_limit: self.settings.default_time_limit,
            max_time_limit: None,
            pool_threads: Some(self.pool.threads()),
        };
        let settings = spec.search_config(&limits).map_err(Failure::spec)?;
        let ctx = EngineJob {
            store: self.store.clone(),
            handle: Handle::current(),
            job_id: job.id.clone(),
            owner: self.owner.clone(),
            dataset,
            spec,
            settings,
            live: live.clone(),
            max_output_bytes: self.settings.max_output_bytes,
        };
        match self.pool.spawn(move || ctx.run()).await {
            Ok(Ok(r)) => r,
            Ok(Err(panic)) => {
                tracing::error!(error = %panic, "the search panicked");
                Err(Failure {
                    code: ErrorCode::InternalError,
                    message: "the search failed unexpectedly".into(),
                    details: serde_json::json!({}),
                    retryable: false,
                })
            }
            Err(_) => Err(Failure::transient(
                ErrorCode::InternalError,
                "the engine pool stopped",
            )),
        }
    }
}

/// The error recorded when a job's worker vanished too often.
fn interrupted_error() -> String {
    serde_json::json!({
        "code": ErrorCode::WorkerLost,
        "message": format!(
            "the job's worker stopped while running it (a crash, running out of memory or a lost \
             lease) {} times or its attempts are used up; it is not run again",
            crate::store::jobs::MAX_INTERRUPTIONS
        ),
        "details": {}
    })
    .to_string()
}

/// The failure of a job whose output would exceed the limit (nothing is written).
fn output_too_large(bytes: u64, limit: u64) -> Failure {
    Failure {
        code: ErrorCode::OutputTooLarge,
        message: format!(
            "the anonymized CSV would have {bytes} bytes, more than the server's limit of \
             {limit} (DEID_MAX_OUTPUT_BYTES); nothing was written"
        ),
        details: serde_json::json!({"bytes": bytes, "limit": limit}),
        retryable: false,
    }
}

/// The plan a job that ended with a written output keeps.
fn finished_plan(result: &Result<Processed, Failure>, chunks: Option<i64>) -> Option<&str> {
    match result {
        Ok(Processed::Finished { plan, .. }) if chunks.is_some() => plan.as_deref(),
        _ => None,
    }
}

/// Everything the engine side of a job needs, moved onto the pool.
struct EngineJob {
    store: Store,
    handle: Handle,
    job_id: JobId,
    owner: String,
    dataset: DatasetRow,
    spec: JobSpec,
    settings: SearchConfig,
    live: Arc<LiveJob>,
    max_output_bytes: u64,
}

/// The worker's side of a running task: the job's cancel flag, progress and phase.
struct WorkerHost<'a>(&'a LiveJob);

impl Host for WorkerHost<'_> {
    fn cancel(&self) -> &CancelFlag {
        &self.0.cancel
    }

    fn observer<'b>(&'b self, problem: &'b Problem) -> Box<dyn ProgressObserver + 'b> {
        Box::new(self.0.observer(problem))
    }

    fn writing(&self) {
        self.0.set_phase(JobPhase::Writing);
    }

    fn analysing(&self) {
        self.0.set_phase(JobPhase::Analysing);
    }

    fn aborted(&self) -> bool {
        matches!(self.0.cause(), StopCause::Shutdown | StopCause::LeaseLost)
    }
}

impl EngineJob {
    fn run(self) -> Result<Processed, Failure> {
        // 1. Data, straight from the stored chunks.
        let started = Instant::now();
        let delimiter = self.dataset.delimiter.bytes().next().unwrap_or(b',');
        if !self.spec.task().searches() {
            // No search reports progress: the phase and the wall-clock time do.
            self.live.start_clock();
        }
        let table = match self.read_table(delimiter) {
            Ok((table, digest)) => (table, digest),
            Err(_) if self.live.cancel.is_cancelled() => return Ok(self.stopped(started)),
            Err(e) => {
                return Err(Failure::transient(
                    ErrorCode::DatasetUnreadable,
                    e.to_string(),
                ));
            }
        };
        let (table, input_sha256) = table;
        // 2. The task, writing its CSV to the job's result chunks (fenced by the lease).
        let info = self.info();
        let run = Run {
            spec: &self.spec,
            frontend: Frontend::Service,
            search: &self.settings,
            host: &WorkerHost(&self.live),
            job: Some(&info),
            delimiter,
            started,
            force_output: false,
            max_output_bytes: Some(self.max_output_bytes),
            plan: true,
            input_sha256: input_sha256.as_deref(),
        };
        let mut writer = ResultWriter::new(
            self.store.clone(),
            self.handle.clone(),
            self.job_id.clone(),
            self.owner.clone(),
        );
        let outcome = match task::run(&run, table, Some(&mut writer)) {
            Ok(outcome) => outcome,
            Err(TaskError::Spec(e)) => return Err(Failure::spec(e)),
            Err(TaskError::OutputTooLarge { bytes, limit }) => {
                return Err(output_too_large(bytes, limit));
            }
            Err(TaskError::Output(message)) => return self.output_failed(message),
        };
        let chunks = match outcome.wrote_csv {
            true => match writer.finish() {
                Ok(n) => Some(n),
                Err(e) => return self.output_failed(e.to_string()),
            },
            false => None,
        };
        let failure = match outcome.verdict {
            Verdict::Aborted => return Ok(self.stopped(started)),
            Verdict::Done => None,
            Verdict::Failed(f) => Some(Failure::of_task(f)),
        };
        Ok(Processed::Finished {
            summary: outcome.summary,
            report: outcome.report.map(|r| r.to_string()),
            // A plan belongs to a written output; one the output cannot have is left out.
            plan: outcome
                .plan
                .filter(|_| chunks.is_some())
                .and_then(Result::ok),
            chunks,
            failure,
        })
    }

    /// The dataset's table, read straight from its stored chunks (stopping when the job is
    /// cancelled), with the SHA-256 of the stored bytes for an anonymize job's plan.
    fn read_table(&self, delimiter: u8) -> deid_engine::Result<(Table, Option<String>)> {
        let reader = ChunkReader::new(
            self.store.clone(),
            self.handle.clone(),
            self.dataset.id.clone(),
            self.dataset.chunk_count,
        )
        .cancellable(self.live.cancel.clone());
        let mut reader = HashingReader::new(reader, self.spec.task() == Task::Anonymize);
        let table = Table::read_csv(
            std::io::BufReader::with_capacity(1 << 16, &mut reader),
            CsvOptions {
                delimiter,
                has_header: self.dataset.has_header != 0,
            },
            "dataset",
        )?;
        Ok((table, reader.digest()))
    }

    /// Writing the result failed: nothing more is written when the lease was lost, else the
    /// job is retried.
    fn output_failed(&self, message: String) -> Result<Processed, Failure> {
        if self.live.cause() == StopCause::LeaseLost || !self.lease_held() {
            Ok(Processed::Aborted)
        } else {
            Err(Failure::transient(ErrorCode::StorageError, message))
        }
    }

    /// What a job stopped before its end (its cancel flag raised) records: cancelled by its
    /// user, it ends without a result; otherwise (shutdown, lost lease) nothing is written.
    fn stopped(&self, started: Instant) -> Processed {
        if self.live.cause() != StopCause::User {
            return Processed::Aborted;
        }
        Processed::Finished {
            summary: Summary {
                found: false,
                checks: 0,
                elapsed: started.elapsed(),
                optimal_proven: false,
                stop: "cancelled",
            },
            report: None,
            plan: None,
            chunks: None,
            failure: None,
        }
    }

    /// The job a report belongs to.
    fn info(&self) -> JobInfo {
        JobInfo {
            job_id: self.job_id.clone(),
            dataset_id: self.dataset.id.clone(),
            time_limit_ms: self.settings.time_limit.as_millis() as u64,
        }
    }

    /// Whether this worker still holds the job (after a failed fenced write).
    fn lease_held(&self) -> bool {
        match self.handle.block_on(self.store.job_by_id(&self.job_id)) {
            Ok(Some(row)) => row.lease_owner.as_deref() == Some(self.owner.as_str()),
            _ => false,
        }
    }
}

/// The heartbeat of one running job (see the module documentation).
async fn heartbeat(
    store: Store,
    id: JobId,
    owner: String,
    live: Arc<LiveJob>,
    lease: Duration,
    shutdown: CancellationToken,
    done: CancellationToken,
) {
    let lease_ms = lease.as_millis() as i64;
    let mut tick = tokio::time::interval(HEARTBEAT);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = done.cancelled() => return,
            _ = tick.tick() => {}
        }
        if shutdown.is_cancelled() {
            live.stop(StopCause::Shutdown);
        }
        let progress = live.publish();
        live.count_checks(progress.counters.checks);
        match store
            .heartbeat(&id, &owner, lease_ms, &progress.to_json())
            .await
        {
            Ok(None) => live.stop(StopCause::LeaseLost),
            Ok(Some(true)) => live.stop(StopCause::User),
            Ok(Some(false)) => {}
            Err(e) => tracing::warn!(error = %e, "heartbeat failed"),
        }
        if live.cancel.is_cancelled() && live.cause() == StopCause::LeaseLost {
            return;
        }
    }
}
