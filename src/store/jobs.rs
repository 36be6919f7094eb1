//! The job queue and job results.
//!
//! - **Claim**: one `UPDATE … WHERE id = (SELECT … LIMIT 1) RETURNING …` statement; PostgreSQL
//!   adds `FOR UPDATE SKIP LOCKED` so concurrent workers never claim the same job. SQLite has a
//!   single writer, so the same statement is atomic there.
//! - **Lease**: the claimer becomes `lease_owner` until `lease_expires_at`; every heartbeat
//!   extends it and persists the progress. A heartbeat that updates no row means the lease was
//!   lost: the worker stops and writes nothing more.
//! - **Fencing**: result chunks, completion, retry and release all require
//!   `lease_owner = $me AND status = 'running'`, so a zombie worker's late writes are rejected.
//! - **Reaper**: running jobs whose lease expired go back to the queue, or fail once their
//!   attempts are used up or at their second interruption ([`MAX_INTERRUPTIONS`]).
//! - **Documents**: a job's specification and result report live in `job_documents`, beside the
//!   row, so that status polling reads small rows only (issue 11 item 6); they are written in
//!   the same transaction as the row.

use super::{Result, Store, now_ms, on_pool};
use crate::job::id::{DatasetId, JobId, JobStatus, TenantId};

/// Interruptions (the worker stopped while running the job: crash, out of memory, lost lease)
/// after which a job fails with `worker_lost` instead of being queued again: a job that crashes
/// its worker is retried once, never into the same crash again and again.
pub const MAX_INTERRUPTIONS: i64 = 2;

/// A job as shown by the API (everything but the specification and the result).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct JobRow {
    /// UUIDv7.
    pub id: JobId,
    /// Owning tenant.
    pub tenant: TenantId,
    /// The dataset.
    pub dataset_id: DatasetId,
    /// What the job does (`anonymize`, `evaluate` or `risk`).
    pub task: String,
    /// The search algorithm it names (`None`: a task without search, or a job queued before
    /// the column existed).
    pub algorithm: Option<String>,
    /// Where the job is.
    #[sqlx(try_from = "String")]
    pub status: JobStatus,
    /// Claims so far.
    pub attempts: i64,
    /// Claims allowed.
    pub max_attempts: i64,
    /// Worker holding the lease.
    pub lease_owner: Option<String>,
    /// 1 once a cancel was requested.
    pub cancel_requested: i64,
    /// Progress JSON (see `jobs::progress::Snapshot`).
    pub progress: Option<String>,
    /// Number of chunks of the result CSV.
    pub result_chunks: Option<i64>,
    /// Error JSON.
    pub error: Option<String>,
    /// Webhook delivery state.
    pub webhook: Option<String>,
    /// Times (ms since the epoch).
    pub created_at: i64,
    /// First claim.
    pub started_at: Option<i64>,
    /// End.
    pub finished_at: Option<i64>,
}

macro_rules! select_job {
    ($rest:literal) => {
        concat!(
            "SELECT id, tenant, dataset_id, task, algorithm, status, attempts, max_attempts, lease_owner, cancel_requested, progress, \
             result_chunks, error, webhook, created_at, started_at, finished_at FROM jobs ",
            $rest
        )
    };
}

/// A job just claimed by this worker.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ClaimedJob {
    /// UUIDv7.
    pub id: JobId,
    /// Owning tenant.
    pub tenant: TenantId,
    /// The dataset.
    pub dataset_id: DatasetId,
    /// The specification JSON.
    pub spec: String,
    /// Claims including this one.
    pub attempts: i64,
    /// Claims allowed.
    pub max_attempts: i64,
}

/// A new job.
#[derive(Debug, Clone)]
pub struct NewJob<'a> {
    /// UUIDv7.
    pub id: &'a JobId,
    /// Owning tenant.
    pub tenant: &'a TenantId,
    /// The dataset.
    pub dataset_id: &'a DatasetId,
    /// What the job does (`anonymize`, `evaluate` or `risk`).
    pub task: &'a str,
    /// The search algorithm it names (`None` for tasks without search).
    pub algorithm: Option<&'a str>,
    /// Validated specification JSON.
    pub spec: &'a str,
    /// Claims allowed.
    pub max_attempts: i64,
    /// Initial webhook state (`pending` when a callback URL is set).
    pub webhook: Option<&'a str>,
    /// The callback URL (webhook), if any.
    pub callback_url: Option<&'a str>,
    /// The resolved time limit of its search, if it has one.
    pub time_limit_ms: Option<i64>,
}

/// How a running job ended, written with a fenced statement.
#[derive(Debug, Clone)]
pub struct Completion<'a> {
    /// `succeeded`, `failed` or `cancelled`.
    pub status: JobStatus,
    /// Final progress JSON.
    pub progress: &'a str,
    /// Result report JSON.
    pub result: Option<&'a str>,
    /// Chunks of the result CSV.
    pub result_chunks: Option<i64>,
    /// Error JSON.
    pub error: Option<&'a str>,
    /// The recoding plan (JSON) of the result CSV.
    pub plan: Option<&'a str>,
}

/// What a cancel request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The job was queued and is now cancelled.
    Cancelled,
    /// The job is running; its worker will stop and keep the best so far.
    Requested,
    /// The job had already ended.
    AlreadyFinished,
    /// No such job for this tenant.
    NotFound,
}

/// How many jobs may wait in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    /// Queued jobs of all tenants.
    pub queued: i64,
    /// Queued jobs of one tenant.
    pub queued_per_tenant: i64,
}

/// What [`Store::insert_job`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// The job is queued.
    Queued,
    /// `QueueLimits::queued` jobs wait already.
    QueueFull,
    /// The tenant has `QueueLimits::queued_per_tenant` jobs waiting already.
    TenantQueueFull,
}

impl Store {
    /// Queues a job unless `limits` are reached (all tenants' queued jobs, or this tenant's).
    pub async fn insert_job(&self, job: &NewJob<'_>, limits: QueueLimits) -> Result<Admission> {
        const SQL: &str = "INSERT INTO jobs (id, tenant, dataset_id, task, status, attempts, max_attempts, run_at, \
             cancel_requested, webhook, created_at, callback_url, time_limit_ms, algorithm) \
             SELECT $1, $2, $3, $4, 'queued', 0, $5, $6, 0, $7, $6, $10, $11, $12 \
             WHERE (SELECT COUNT(*) FROM jobs WHERE status = 'queued') < $8 \
             AND (SELECT COUNT(*) FROM jobs WHERE status = 'queued' AND tenant = $2) < $9";
        const TENANT: &str = "SELECT COUNT(*) FROM jobs WHERE status = 'queued' AND tenant = $1";
        const SPEC: &str = "INSERT INTO job_documents (job_id, spec) VALUES ($1, $2)";
        let now = now_ms();
        let n = on_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            let n = sqlx::query(SQL)
                .bind(job.id)
                .bind(job.tenant)
                .bind(job.dataset_id)
                .bind(job.task)
                .bind(job.max_attempts)
                .bind(now)
                .bind(job.webhook)
                .bind(limits.queued)
                .bind(limits.queued_per_tenant)
                .bind(job.callback_url)
                .bind(job.time_limit_ms)
                .bind(job.algorithm)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if n == 1 {
                sqlx::query(SPEC).bind(job.id).bind(job.spec).execute(&mut *tx).await?;
            }
            tx.commit().await.map(|()| n)
        })?;
        if n == 1 {
            return Ok(Admission::Queued);
        }
        let waiting = on_pool!(self, pool => sqlx::query_scalar::<_, i64>(TENANT).bind(job.tenant).fetch_one(pool).await)?;
        Ok(if waiting >= limits.queued_per_tenant {
            Admission::TenantQueueFull
        } else {
            Admission::QueueFull
        })
    }

    /// Tells the workers of every process that a job was queued (PostgreSQL `NOTIFY`; nothing
    /// on SQLite, where the only worker is woken in process).
    pub async fn notify_job_queued(&self) -> Result<()> {
        if let super::Backend::Postgres(pool) = &self.backend {
            sqlx::query("SELECT pg_notify('deid_jobs', '')")
                .execute(pool)
                .await?;
        }
        Ok(())
    }

    /// A listener for [`Store::notify_job_queued`] (PostgreSQL only).
    pub async fn job_listener(&self) -> Result<Option<sqlx::postgres::PgListener>> {
        match &self.backend {
            super::Backend::Postgres(pool) => {
                let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
                listener.listen("deid_jobs").await?;
                Ok(Some(listener))
            }
            super::Backend::Sqlite(_) => Ok(None),
        }
    }

    /// A tenant's job.
    pub async fn job(&self, tenant: &TenantId, id: &JobId) -> Result<Option<JobRow>> {
        const SQL: &str = select_job!("WHERE id = $1 AND tenant = $2");
        Ok(
            on_pool!(self, pool => sqlx::query_as::<_, JobRow>(SQL).bind(id).bind(tenant).fetch_optional(pool).await)?,
        )
    }

    /// A page of a tenant's jobs, newest first, optionally with one status, older than `before`.
    pub async fn list_jobs(
        &self,
        tenant: &TenantId,
        status: Option<JobStatus>,
        before: Option<&JobId>,
        limit: i64,
    ) -> Result<Vec<JobRow>> {
        // One statement: NULL parameters disable their filter.
        const SQL: &str = select_job!(
            "WHERE tenant = $1 AND ($2 IS NULL OR status = $2) AND ($3 IS NULL OR id < $3) ORDER BY id DESC LIMIT $4"
        );
        Ok(on_pool!(self, pool => sqlx::query_as::<_, JobRow>(SQL)
            .bind(tenant)
            .bind(status.map(JobStatus::as_str))
            .bind(before)
            .bind(limit)
            .fetch_all(pool)
            .await)?)
    }

    /// The result report JSON of a tenant's job, with its status (None if the job does not
    /// exist).
    pub async fn job_result(
        &self,
        tenant: &TenantId,
        id: &JobId,
    ) -> Result<Option<(JobStatus, Option<String>)>> {
        const SQL: &str = "SELECT j.status, d.result FROM jobs j LEFT JOIN job_documents d ON d.job_id = j.id \
             WHERE j.id = $1 AND j.tenant = $2";
        self.job_document(SQL, tenant, id).await
    }

    /// The recoding plan JSON of a tenant's job, with its status (None if the job does not
    /// exist).
    pub async fn job_plan(
        &self,
        tenant: &TenantId,
        id: &JobId,
    ) -> Result<Option<(JobStatus, Option<String>)>> {
        const SQL: &str = "SELECT j.status, d.plan FROM jobs j LEFT JOIN job_documents d ON d.job_id = j.id \
             WHERE j.id = $1 AND j.tenant = $2";
        self.job_document(SQL, tenant, id).await
    }

    /// A job's status and one of its documents, read by `sql` (status, document; binds the id
    /// and the tenant).
    async fn job_document(
        &self,
        sql: &'static str,
        tenant: &TenantId,
        id: &JobId,
    ) -> Result<Option<(JobStatus, Option<String>)>> {
        let row = on_pool!(self, pool => sqlx::query_as::<_, (String, Option<String>)>(sql).bind(id).bind(tenant).fetch_optional(pool).await)?;
        row.map(|(status, document)| {
            JobStatus::try_from(status)
                .map(|s| (s, document))
                .map_err(super::StoreError::Corrupt)
        })
        .transpose()
    }

    /// Claims the next due job for `owner` with a lease of `lease_ms`, fairly across tenants:
    /// tenants with fewer running jobs first, then the tenant whose last job started longest
    /// ago (or never), then the oldest job; tenants with `max_running_per_tenant` running jobs
    /// are skipped. On PostgreSQL claims are serialized (a transaction-scoped advisory lock), so
    /// concurrent workers never exceed a tenant's limit.
    pub async fn claim_next_job(
        &self,
        owner: &str,
        lease_ms: i64,
        max_running_per_tenant: i64,
    ) -> Result<Option<ClaimedJob>> {
        macro_rules! claim {
            ($lock:literal) => {
                concat!(
                    "UPDATE jobs SET status = 'running', lease_owner = $1, lease_expires_at = $2, heartbeat_at = $3, \
                     attempts = attempts + 1, started_at = COALESCE(started_at, $3) \
                     WHERE id = (SELECT q.id FROM jobs q WHERE q.status = 'queued' AND q.run_at <= $3 \
                     AND (SELECT COUNT(*) FROM jobs r WHERE r.tenant = q.tenant AND r.status = 'running') < $4 \
                     ORDER BY (SELECT COUNT(*) FROM jobs r WHERE r.tenant = q.tenant AND r.status = 'running'), \
                     (SELECT COALESCE(MAX(s.started_at), 0) FROM jobs s WHERE s.tenant = q.tenant), \
                     q.run_at, q.id LIMIT 1",
                    $lock,
                    ") AND status = 'queued' \
                     RETURNING id, tenant, dataset_id, \
                     (SELECT spec FROM job_documents WHERE job_id = jobs.id) AS spec, attempts, max_attempts"
                )
            };
        }
        const PG: &str = claim!(" FOR UPDATE SKIP LOCKED");
        const SQLITE: &str = claim!("");
        /// Serializes claims across processes (an arbitrary key of this application).
        const LOCK: &str = "SELECT pg_advisory_xact_lock(727027)";
        let now = now_ms();
        let job = match &self.backend {
            super::Backend::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                sqlx::query(LOCK).execute(&mut *tx).await?;
                let job = sqlx::query_as::<_, ClaimedJob>(PG)
                    .bind(owner)
                    .bind(now + lease_ms)
                    .bind(now)
                    .bind(max_running_per_tenant)
                    .fetch_optional(&mut *tx)
                    .await?;
                tx.commit().await?;
                job
            }
            super::Backend::Sqlite(pool) => {
                sqlx::query_as::<_, ClaimedJob>(SQLITE)
                    .bind(owner)
                    .bind(now + lease_ms)
                    .bind(now)
                    .bind(max_running_per_tenant)
                    .fetch_optional(pool)
                    .await?
            }
        };
        Ok(job)
    }

    /// Extends the lease and persists the progress. Returns `None` if the lease was lost,
    /// otherwise whether a cancel was requested.
    pub async fn heartbeat(
        &self,
        id: &JobId,
        owner: &str,
        lease_ms: i64,
        progress: &str,
    ) -> Result<Option<bool>> {
        const SQL: &str = "UPDATE jobs SET lease_expires_at = $3, heartbeat_at = $4, progress = $5 \
             WHERE id = $1 AND lease_owner = $2 AND status = 'running' RETURNING cancel_requested";
        let now = now_ms();
        let r = on_pool!(self, pool => sqlx::query_scalar::<_, i64>(SQL)
            .bind(id)
            .bind(owner)
            .bind(now + lease_ms)
            .bind(now)
            .bind(progress)
            .fetch_optional(pool)
            .await)?;
        Ok(r.map(|c| c != 0))
    }

    /// Stores chunk `seq` of a job's result CSV, fenced by the lease. Returns false if the lease
    /// was lost.
    pub async fn insert_result_chunk(
        &self,
        id: &JobId,
        owner: &str,
        seq: i64,
        data: &[u8],
    ) -> Result<bool> {
        const SQL: &str = "INSERT INTO result_chunks (job_id, seq, data) SELECT $1, $2, $3 \
             WHERE EXISTS (SELECT 1 FROM jobs WHERE id = $1 AND lease_owner = $4 AND status = 'running') \
             ON CONFLICT (job_id, seq) DO UPDATE SET data = excluded.data";
        let n = on_pool!(self, pool => sqlx::query(SQL).bind(id).bind(seq).bind(data).bind(owner).execute(pool).await.map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Chunk `seq` of a job's result CSV.
    pub async fn result_chunk(&self, id: &JobId, seq: i64) -> Result<Option<Vec<u8>>> {
        const SQL: &str = "SELECT data FROM result_chunks WHERE job_id = $1 AND seq = $2";
        Ok(
            on_pool!(self, pool => sqlx::query_scalar::<_, Vec<u8>>(SQL).bind(id).bind(seq).fetch_optional(pool).await)?,
        )
    }

    /// Ends a running job (fenced). Returns false if the lease was lost.
    pub async fn complete_job(
        &self,
        id: &JobId,
        owner: &str,
        done: &Completion<'_>,
    ) -> Result<bool> {
        const SQL: &str = "UPDATE jobs SET status = $3, progress = $4, result_chunks = $5, error = $6, \
             finished_at = $7, lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = $1 AND lease_owner = $2 AND status = 'running'";
        const RESULT: &str = "UPDATE job_documents SET result = $2, plan = $3 WHERE job_id = $1";
        const TRIM: &str = "DELETE FROM result_chunks WHERE job_id = $1 AND seq >= $2";
        // The row and its report change together (one transaction), fenced by the row's lease.
        let n = on_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            let n = sqlx::query(SQL)
                .bind(id)
                .bind(owner)
                .bind(done.status.as_str())
                .bind(done.progress)
                .bind(done.result_chunks)
                .bind(done.error)
                .bind(now_ms())
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if n == 1 {
                sqlx::query(RESULT).bind(id).bind(done.result).bind(done.plan).execute(&mut *tx).await?;
            }
            tx.commit().await.map(|()| n)
        })?;
        if n == 1 {
            // Chunks beyond the result (left by an earlier, interrupted attempt).
            let keep = done.result_chunks.unwrap_or(0);
            on_pool!(self, pool => sqlx::query(TRIM).bind(id).bind(keep).execute(pool).await.map(|r| r.rows_affected()))?;
        }
        Ok(n == 1)
    }

    /// Puts a running job back in the queue after a failure that may pass (fenced): due again
    /// after `delay_ms`, or failed with `error` if its attempts are used up.
    pub async fn retry_job(
        &self,
        id: &JobId,
        owner: &str,
        delay_ms: i64,
        error: &str,
    ) -> Result<bool> {
        const SQL: &str = "UPDATE jobs SET \
             status = CASE WHEN attempts < max_attempts THEN 'queued' ELSE 'failed' END, \
             run_at = $3, error = $4, \
             finished_at = CASE WHEN attempts < max_attempts THEN NULL ELSE $5 END, \
             lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = $1 AND lease_owner = $2 AND status = 'running'";
        let now = now_ms();
        let n = on_pool!(self, pool => sqlx::query(SQL)
            .bind(id)
            .bind(owner)
            .bind(now + delay_ms)
            .bind(error)
            .bind(now)
            .execute(pool)
            .await.map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Gives a running job back at shutdown (fenced): queued again at once, without counting
    /// the attempt, so another worker picks it up immediately.
    pub async fn release_job(&self, id: &JobId, owner: &str) -> Result<bool> {
        // The job keeps its `run_at`, and with it its place at the front of the queue.
        const SQL: &str = "UPDATE jobs SET status = 'queued', attempts = attempts - 1, \
             lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = $1 AND lease_owner = $2 AND status = 'running'";
        let n = on_pool!(self, pool => sqlx::query(SQL).bind(id).bind(owner).execute(pool).await.map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Re-queues running jobs whose lease expired before `deadline_ms` — their worker crashed,
    /// ran out of memory or lost its lease — and counts the interruption; fails them with
    /// `error` instead when their attempts are used up or this is their
    /// [`MAX_INTERRUPTIONS`]-th interruption. Returns (re-queued, failed).
    pub async fn reap_expired_leases(&self, deadline_ms: i64, error: &str) -> Result<(u64, u64)> {
        const FAIL: &str = "UPDATE jobs SET status = 'failed', error = $2, finished_at = $3, lease_owner = NULL, \
             lease_expires_at = NULL, interruptions = interruptions + 1 \
             WHERE status = 'running' AND lease_expires_at < $1 \
             AND (attempts >= max_attempts OR interruptions + 1 >= $4)";
        // Re-queued jobs keep their `run_at`: they keep their place in the queue.
        const REQUEUE: &str = "UPDATE jobs SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, \
             interruptions = interruptions + 1 \
             WHERE status = 'running' AND lease_expires_at < $1 AND attempts < max_attempts \
             AND interruptions + 1 < $2";
        let now = now_ms();
        let failed = on_pool!(self, pool => sqlx::query(FAIL).bind(deadline_ms).bind(error).bind(now).bind(MAX_INTERRUPTIONS).execute(pool).await.map(|r| r.rows_affected()))?;
        let requeued = on_pool!(self, pool => sqlx::query(REQUEUE).bind(deadline_ms).bind(MAX_INTERRUPTIONS).execute(pool).await.map(|r| r.rows_affected()))?;
        Ok((requeued, failed))
    }

    /// Cancels a tenant's job: a queued job at once, a running one cooperatively.
    pub async fn request_cancel(&self, tenant: &TenantId, id: &JobId) -> Result<CancelOutcome> {
        const QUEUED: &str = "UPDATE jobs SET status = 'cancelled', cancel_requested = 1, finished_at = $3 \
             WHERE id = $1 AND tenant = $2 AND status = 'queued'";
        const RUNNING: &str = "UPDATE jobs SET cancel_requested = 1 WHERE id = $1 AND tenant = $2 AND status = 'running'";
        let n = on_pool!(self, pool => sqlx::query(QUEUED).bind(id).bind(tenant).bind(now_ms()).execute(pool).await.map(|r| r.rows_affected()))?;
        if n == 1 {
            return Ok(CancelOutcome::Cancelled);
        }
        let n = on_pool!(self, pool => sqlx::query(RUNNING).bind(id).bind(tenant).execute(pool).await.map(|r| r.rows_affected()))?;
        if n == 1 {
            return Ok(CancelOutcome::Requested);
        }
        Ok(match self.job(tenant, id).await? {
            Some(_) => CancelOutcome::AlreadyFinished,
            None => CancelOutcome::NotFound,
        })
    }

    /// The specification JSON of a tenant's job (None if the job does not exist).
    pub async fn tenant_job_spec(&self, tenant: &TenantId, id: &JobId) -> Result<Option<String>> {
        const SQL: &str = "SELECT d.spec FROM jobs j JOIN job_documents d ON d.job_id = j.id \
             WHERE j.id = $1 AND j.tenant = $2";
        Ok(
            on_pool!(self, pool => sqlx::query_scalar::<_, String>(SQL).bind(id).bind(tenant).fetch_optional(pool).await)?,
        )
    }

    /// The specification JSON of a job (for webhooks).
    pub async fn job_spec(&self, id: &JobId) -> Result<Option<String>> {
        const SQL: &str = "SELECT spec FROM job_documents WHERE job_id = $1";
        Ok(
            on_pool!(self, pool => sqlx::query_scalar::<_, String>(SQL).bind(id).fetch_optional(pool).await)?,
        )
    }

    /// A job by id regardless of tenant (workers and webhooks).
    pub async fn job_by_id(&self, id: &JobId) -> Result<Option<JobRow>> {
        const SQL: &str = select_job!("WHERE id = $1");
        Ok(
            on_pool!(self, pool => sqlx::query_as::<_, JobRow>(SQL).bind(id).fetch_optional(pool).await)?,
        )
    }

    /// Records the webhook delivery state.
    pub async fn set_webhook_state(&self, id: &JobId, state: &str) -> Result<()> {
        const SQL: &str = "UPDATE jobs SET webhook = $2 WHERE id = $1";
        on_pool!(self, pool => sqlx::query(SQL).bind(id).bind(state).execute(pool).await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Takes the delivery of job `id`'s webhook until `until_ms` if it is still `pending`, the
    /// job has ended and no other process holds an unexpired lease on it. True if taken.
    pub async fn claim_webhook(&self, id: &JobId, until_ms: i64) -> Result<bool> {
        const SQL: &str = "UPDATE jobs SET webhook_lease_until = $2 WHERE id = $1 AND webhook = 'pending' \
             AND status IN ('succeeded', 'failed', 'cancelled') \
             AND (webhook_lease_until IS NULL OR webhook_lease_until < $3)";
        let n = on_pool!(self, pool => sqlx::query(SQL).bind(id).bind(until_ms).bind(now_ms()).execute(pool).await.map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Gives up the lease on job `id`'s webhook (shutdown): it stays `pending` for another process
    /// or the next start.
    pub async fn release_webhook(&self, id: &JobId) -> Result<()> {
        const SQL: &str = "UPDATE jobs SET webhook_lease_until = NULL WHERE id = $1";
        on_pool!(self, pool => sqlx::query(SQL).bind(id).execute(pool).await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Ended jobs whose webhook is still `pending` and not leased (or the lease expired): their
    /// delivering process died. At most `limit`, oldest first.
    pub async fn orphaned_webhooks(&self, limit: i64) -> Result<Vec<(JobId, Option<String>)>> {
        const SQL: &str = "SELECT id, callback_url FROM jobs WHERE webhook = 'pending' \
             AND status IN ('succeeded', 'failed', 'cancelled') \
             AND (webhook_lease_until IS NULL OR webhook_lease_until < $1) \
             ORDER BY finished_at LIMIT $2";
        Ok(
            on_pool!(self, pool => sqlx::query_as::<_, (JobId, Option<String>)>(SQL).bind(now_ms()).bind(limit).fetch_all(pool).await)?,
        )
    }

    /// Number of jobs per status (metrics).
    pub async fn count_jobs_by_status(&self) -> Result<Vec<(String, i64)>> {
        const SQL: &str = "SELECT status, COUNT(*) FROM jobs GROUP BY status";
        Ok(on_pool!(self, pool => sqlx::query_as::<_, (String, i64)>(SQL).fetch_all(pool).await)?)
    }
}
