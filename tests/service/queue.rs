//! The job queue at the store level: concurrent claims never hand out a job twice, expired
//! leases are reaped, and a stale owner's writes are rejected (fencing).

use std::collections::HashSet;
use std::time::Duration;

use deid::job::id::{DatasetId, JobId, JobStatus, TenantId};
use deid::store::Store;
use deid::store::jobs::{Admission, Completion, NewJob, QueueLimits};

const UNLIMITED: QueueLimits = QueueLimits {
    queued: 1000,
    queued_per_tenant: 1000,
};

use crate::both_databases;
use crate::helpers::*;

async fn store(db: &TestDb) -> Store {
    Store::connect(Some(&db.url), &db.dir, 4).await.unwrap()
}

async fn queue(store: &Store, n: usize) -> Vec<JobId> {
    let mut ids = Vec::new();
    for _ in 0..n {
        let id = JobId::generate();
        let job = NewJob {
            id: &id,
            tenant: &TenantId::from("t"),
            dataset_id: &DatasetId::from("d"),
            task: "anonymize",
            algorithm: Some("auto"),
            spec: "{}",
            max_attempts: 2,
            webhook: None,
            callback_url: None,
            time_limit_ms: None,
        };
        assert_eq!(
            store.insert_job(&job, UNLIMITED).await.unwrap(),
            Admission::Queued
        );
        ids.push(id);
    }
    ids
}

async fn concurrent_claims(kind: Db) {
    let Some(db) = TestDb::new(kind).await else {
        return;
    };
    let store = store(&db).await;
    let ids = queue(&store, 40).await;
    let mut tasks = Vec::new();
    for w in 0..4 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let owner = format!("worker-{w}");
            let mut claimed = Vec::new();
            while let Some(job) = store
                .claim_next_job(&owner, 60_000, i64::MAX)
                .await
                .unwrap()
            {
                assert_eq!(job.attempts, 1);
                claimed.push(job.id);
            }
            claimed
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let unique: HashSet<&JobId> = all.iter().collect();
    assert_eq!(all.len(), ids.len(), "every job claimed exactly once");
    assert_eq!(unique.len(), ids.len());
    store.close().await;
}
both_databases!(
    concurrent_claims,
    concurrent_claims_sqlite,
    concurrent_claims_postgres
);

async fn stale_owner_is_fenced(kind: Db) {
    let Some(db) = TestDb::new(kind).await else {
        return;
    };
    let store = store(&db).await;
    let id = queue(&store, 1).await.remove(0);
    // A claims with a lease that expires at once; the reaper gives the job back.
    let a = store
        .claim_next_job("a", 1, i64::MAX)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a.id, id);
    assert!(store.heartbeat(&id, "a", 1, "{}").await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (requeued, failed) = store
        .reap_expired_leases(deid::store::now_ms(), "{}")
        .await
        .unwrap();
    assert_eq!((requeued, failed), (1, 0));
    // B claims it (second attempt).
    let b = store
        .claim_next_job("b", 60_000, i64::MAX)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((b.id.as_str(), b.attempts), (id.as_str(), 2));
    // Everything A still tries is rejected.
    assert_eq!(
        store
            .heartbeat(&id, "a", 60_000, "{\"stale\":1}")
            .await
            .unwrap(),
        None
    );
    assert!(
        !store
            .insert_result_chunk(&id, "a", 0, b"stale")
            .await
            .unwrap()
    );
    let done = Completion {
        status: JobStatus::Succeeded,
        progress: "{}",
        result: Some("{\"by\":\"a\"}"),
        result_chunks: Some(1),
        error: None,
        plan: None,
    };
    assert!(!store.complete_job(&id, "a", &done).await.unwrap());
    assert!(!store.release_job(&id, "a").await.unwrap());
    assert!(!store.retry_job(&id, "a", 0, "{}").await.unwrap());
    // B's writes go through.
    assert_eq!(
        store.heartbeat(&id, "b", 60_000, "{}").await.unwrap(),
        Some(false)
    );
    assert!(
        store
            .insert_result_chunk(&id, "b", 0, b"x;y\n")
            .await
            .unwrap()
    );
    let done_b = Completion {
        result: Some("{\"by\":\"b\"}"),
        ..done
    };
    assert!(store.complete_job(&id, "b", &done_b).await.unwrap());
    let (status, result) = store
        .job_result(&TenantId::from("t"), &id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.as_str(), "succeeded");
    assert_eq!(result.as_deref(), Some("{\"by\":\"b\"}"));
    assert_eq!(
        store.result_chunk(&id, 0).await.unwrap().as_deref(),
        Some(&b"x;y\n"[..])
    );

    // A job whose attempts are used up fails when its lease expires.
    let id2 = queue(&store, 1).await.remove(0);
    for owner in ["c", "d"] {
        let j = store
            .claim_next_job(owner, 1, i64::MAX)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(j.id, id2);
        tokio::time::sleep(Duration::from_millis(20)).await;
        store
            .reap_expired_leases(deid::store::now_ms(), "{\"code\":\"worker_lost\"}")
            .await
            .unwrap();
    }
    let row = store.job_by_id(&id2).await.unwrap().unwrap();
    assert_eq!(row.status.as_str(), "failed");
    assert_eq!(row.attempts, 2);
    assert!(row.error.unwrap().contains("worker_lost"));
    assert!(
        store
            .claim_next_job("e", 1000, i64::MAX)
            .await
            .unwrap()
            .is_none()
    );
    store.close().await;
}
both_databases!(
    stale_owner_is_fenced,
    stale_owner_is_fenced_sqlite,
    stale_owner_is_fenced_postgres
);

/// Webhook deliveries are leased: one process takes a pending webhook of an ended job, a
/// second claim fails while the lease lives, and a released or expired lease makes it an orphan
/// that any process picks up again.
async fn webhook_leases(kind: Db) {
    let Some(db) = TestDb::new(kind).await else {
        return;
    };
    let store = store(&db).await;
    let id = JobId::generate();
    let job = NewJob {
        id: &id,
        tenant: &TenantId::from("t"),
        dataset_id: &DatasetId::from("d"),
        task: "anonymize",
        algorithm: Some("auto"),
        spec: "{}",
        max_attempts: 1,
        webhook: Some("pending"),
        callback_url: Some("https://receiver.example/hook"),
        time_limit_ms: Some(30_000),
    };
    assert_eq!(
        store.insert_job(&job, UNLIMITED).await.unwrap(),
        Admission::Queued
    );
    let far = deid::store::now_ms() + 60_000;
    // Not ended yet: neither claimable nor orphaned.
    assert!(!store.claim_webhook(&id, far).await.unwrap());
    assert!(store.orphaned_webhooks(10).await.unwrap().is_empty());
    store
        .claim_next_job("w", 60_000, i64::MAX)
        .await
        .unwrap()
        .unwrap();
    let done = Completion {
        status: JobStatus::Succeeded,
        progress: "{}",
        result: None,
        result_chunks: None,
        error: None,
        plan: None,
    };
    assert!(store.complete_job(&id, "w", &done).await.unwrap());
    // The URL comes from the job's row: no specification to parse.
    let orphan = vec![(
        id.clone(),
        Some("https://receiver.example/hook".to_string()),
    )];
    assert_eq!(store.orphaned_webhooks(10).await.unwrap(), orphan);
    assert!(store.claim_webhook(&id, far).await.unwrap());
    assert!(!store.claim_webhook(&id, far).await.unwrap(), "leased");
    assert!(store.orphaned_webhooks(10).await.unwrap().is_empty());
    // Shutdown releases the lease: pending again for anyone.
    store.release_webhook(&id).await.unwrap();
    assert_eq!(store.orphaned_webhooks(10).await.unwrap(), orphan);
    // An expired lease (its process died) counts as none.
    assert!(
        store
            .claim_webhook(&id, deid::store::now_ms() - 1)
            .await
            .unwrap()
    );
    assert_eq!(store.orphaned_webhooks(10).await.unwrap(), orphan);
    assert!(store.claim_webhook(&id, far).await.unwrap());
    // Delivered (or failed) webhooks are never taken again.
    store.set_webhook_state(&id, "delivered").await.unwrap();
    store.release_webhook(&id).await.unwrap();
    assert!(!store.claim_webhook(&id, far).await.unwrap());
    assert!(store.orphaned_webhooks(10).await.unwrap().is_empty());
    store.close().await;
}
both_databases!(
    webhook_leases,
    webhook_leases_sqlite,
    webhook_leases_postgres
);

/// A job re-queued by the reaper (its worker died) or released at shutdown keeps its place:
/// it is claimed again before jobs queued after it.
async fn requeued_jobs_keep_their_place(kind: Db) {
    let Some(db) = TestDb::new(kind).await else {
        return;
    };
    let store = store(&db).await;
    let ids = queue(&store, 1).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let later = queue(&store, 2).await;
    // The reaper puts the first job back after its lease expired.
    let a = store
        .claim_next_job("a", 1, i64::MAX)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a.id, ids[0]);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (requeued, _) = store
        .reap_expired_leases(deid::store::now_ms(), "{}")
        .await
        .unwrap();
    assert_eq!(requeued, 1);
    let b = store
        .claim_next_job("b", 60_000, i64::MAX)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b.id, ids[0], "the re-queued job comes first");
    // Released at shutdown: first again.
    assert!(store.release_job(&b.id, "b").await.unwrap());
    let c = store
        .claim_next_job("c", 60_000, i64::MAX)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.id, ids[0], "the released job comes first");
    let d = store
        .claim_next_job("d", 60_000, i64::MAX)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.id, later[0]);
    store.close().await;
}

both_databases!(
    requeued_jobs_keep_their_place,
    requeued_jobs_keep_their_place_sqlite,
    requeued_jobs_keep_their_place_postgres
);

/// Uploads left incomplete by a stopped process are removed (on both databases); complete
/// datasets stay.
async fn abandoned_uploads_are_purged(kind: Db) {
    let Some(db) = TestDb::new(kind).await else {
        return;
    };
    let store = store(&db).await;
    let tenant = TenantId::from("t");
    let abandoned = DatasetId::generate();
    let new = |id| deid::store::datasets::NewDataset {
        id,
        tenant: &tenant,
        name: "x",
        delimiter: ",",
        has_header: true,
    };
    store.create_dataset(&new(&abandoned)).await.unwrap();
    store
        .insert_dataset_chunk(&abandoned, 0, b"a,b\n1,2\n")
        .await
        .unwrap();
    let ready = DatasetId::generate();
    store.create_dataset(&new(&ready)).await.unwrap();
    store
        .finish_dataset(&deid::store::datasets::FinishedDataset {
            id: &ready,
            delimiter: ",",
            size_bytes: 8,
            rows: 1,
            chunks: 0,
            columns_json: "[]",
            values: &[],
            frequency: None,
        })
        .await
        .unwrap();
    // Not yet older than the horizon: kept.
    assert_eq!(store.purge_stale_uploads(0).await.unwrap(), 0);
    let purged = store
        .purge_stale_uploads(deid::store::now_ms() + 1)
        .await
        .unwrap();
    assert_eq!(purged, 1);
    assert!(store.dataset_chunk(&abandoned, 0).await.unwrap().is_none());
    assert!(store.dataset(&tenant, &ready).await.unwrap().is_some());
    store.close().await;
}

both_databases!(
    abandoned_uploads_are_purged,
    abandoned_uploads_are_purged_sqlite,
    abandoned_uploads_are_purged_postgres
);

/// A job whose worker stops while running it (crash, out of memory, lost lease) is queued again
/// once; the second interruption fails it with `worker_lost`, attempts left or not (issue 27
/// item 1: a poison job crashed the server at every restart until its attempts were used up).
async fn crashing_jobs_are_retried_once(kind: Db) {
    let Some(db) = TestDb::new(kind).await else {
        return;
    };
    let store = store(&db).await;
    let (id, admission) = queue_for(&store, "t", 5, UNLIMITED).await;
    assert_eq!(admission, Admission::Queued);
    let mut reaped = Vec::new();
    for owner in ["a", "b"] {
        let j = store
            .claim_next_job(owner, 1, i64::MAX)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(j.id, id);
        tokio::time::sleep(Duration::from_millis(20)).await;
        reaped.push(
            store
                .reap_expired_leases(deid::store::now_ms(), "{\"code\":\"worker_lost\"}")
                .await
                .unwrap(),
        );
    }
    assert_eq!(reaped, [(1, 0), (0, 1)]);
    let row = store.job_by_id(&id).await.unwrap().unwrap();
    assert_eq!((row.status.as_str(), row.attempts), ("failed", 2));
    assert!(row.error.unwrap().contains("worker_lost"));
    assert!(
        store
            .claim_next_job("c", 1000, i64::MAX)
            .await
            .unwrap()
            .is_none()
    );
    store.close().await;
}
both_databases!(
    crashing_jobs_are_retried_once,
    crashing_jobs_are_retried_once_sqlite,
    crashing_jobs_are_retried_once_postgres
);

/// Queues a job of `tenant` under `limits`.
async fn queue_for(
    store: &Store,
    tenant: &str,
    max_attempts: i64,
    limits: QueueLimits,
) -> (JobId, Admission) {
    let id = JobId::generate();
    let job = NewJob {
        id: &id,
        tenant: &TenantId::from(tenant),
        dataset_id: &DatasetId::from("d"),
        task: "anonymize",
        algorithm: Some("auto"),
        spec: "{}",
        max_attempts,
        webhook: None,
        callback_url: None,
        time_limit_ms: None,
    };
    let admission = store.insert_job(&job, limits).await.unwrap();
    (id, admission)
}

/// Per-tenant limits and fair claims (issue 27 item 4): a tenant at its queue limit is refused
/// while others are admitted; a claim prefers the tenant served longest ago over older jobs of a
/// tenant that was just served, and skips tenants at their running limit.
async fn tenants_share_the_queue(kind: Db) {
    let Some(db) = TestDb::new(kind).await else {
        return;
    };
    let store = store(&db).await;
    let limits = QueueLimits {
        queued: 10,
        queued_per_tenant: 3,
    };
    let mut a = Vec::new();
    for _ in 0..3 {
        let (id, admission) = queue_for(&store, "a", 2, limits).await;
        assert_eq!(admission, Admission::Queued);
        a.push(id);
    }
    assert_eq!(
        queue_for(&store, "a", 2, limits).await.1,
        Admission::TenantQueueFull
    );
    let (b1, admission) = queue_for(&store, "b", 2, limits).await;
    assert_eq!(admission, Admission::Queued);
    let (b2, _) = queue_for(&store, "b", 2, limits).await;
    // The whole queue: 5 of 5 allowed here.
    let full = QueueLimits {
        queued: 5,
        queued_per_tenant: 5,
    };
    assert_eq!(
        queue_for(&store, "c", 2, full).await.1,
        Admission::QueueFull
    );

    // Neither tenant ran anything: the oldest job (a's) first.
    let claim = |owner: &'static str, max_running: i64| {
        let store = store.clone();
        async move {
            store
                .claim_next_job(owner, 60_000, max_running)
                .await
                .unwrap()
                .map(|j| j.id)
        }
    };
    assert_eq!(claim("w1", 10).await.as_ref(), Some(&a[0]));
    // a runs one job, b none: b's job comes before a's older ones.
    assert_eq!(claim("w2", 10).await.as_ref(), Some(&b1));
    // One running each: a was served longest ago.
    assert_eq!(claim("w3", 10).await.as_ref(), Some(&a[1]));
    // With one running job allowed per tenant: a (2 running) and b (1) wait.
    assert_eq!(claim("w4", 1).await, None);
    // b's job ends: b may run one again, and does before a's older job.
    let done = Completion {
        status: JobStatus::Succeeded,
        progress: "{}",
        result: None,
        result_chunks: None,
        error: None,
        plan: None,
    };
    assert!(store.complete_job(&b1, "w2", &done).await.unwrap());
    assert_eq!(claim("w4", 1).await.as_ref(), Some(&b2));
    assert_eq!(claim("w5", 1).await, None);
    assert_eq!(claim("w5", 10).await.as_ref(), Some(&a[2]));
    store.close().await;
}
both_databases!(
    tenants_share_the_queue,
    tenants_share_the_queue_sqlite,
    tenants_share_the_queue_postgres
);
