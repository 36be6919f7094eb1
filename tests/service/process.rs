//! Separate processes: a server killed mid-job and restarted (the job completes or fails
//! cleanly, datasets are intact), and two servers sharing one PostgreSQL database (each job runs
//! exactly once).

use std::time::Duration;

use serde_json::Value;

use crate::both_databases;
use crate::helpers::*;

async fn upload_slow(api: &ApiClient, rows: usize) -> String {
    let ds = api.upload(slow_csv(rows), "name=slow").await;
    ds["id"].as_str().unwrap().to_string()
}

async fn killed_mid_job(kind: Db) {
    let Some(db) = TestDb::new(kind).await else {
        return;
    };
    let mut first = ChildServer::start(&db, "first", &[]);
    let api = first.api();
    let dataset = upload_slow(&api, 2000).await;
    let job = api.create_job(&slow_job(&dataset, "4s")).await;
    let id = job["id"].as_str().unwrap().to_string();
    api.wait_job(&id, Duration::from_secs(30), |j| {
        j["status"] == "running" && j["progress"]["checks"].as_u64().unwrap_or(0) > 0
    })
    .await;
    first.kill();

    let second = ChildServer::start(&db, "second", &[]);
    let api = second.api();
    let j = api.wait_job(&id, Duration::from_secs(90), finished).await;
    // Re-queued and run again (attempt 2), or failed cleanly with a reason.
    match j["status"].as_str().unwrap() {
        "succeeded" => {
            assert_eq!(j["attempts"], 2, "{j}");
            let csv = api.get(&format!("/v1/jobs/{id}/result.csv")).await;
            assert_eq!(csv.status, 200);
            let qis: Vec<String> = (0..SLOW_QIS).map(|i| format!("q{i}")).collect();
            let qis: Vec<&str> = qis.iter().map(String::as_str).collect();
            let (rows, _) = check_k_anonymity(&csv.text, b',', &qis, 3, 2000);
            assert_eq!(rows, 2000);
        }
        "failed" => assert!(j["error"]["code"].is_string(), "{j}"),
        other => panic!("unexpected status {other}: {j}"),
    }
    // The dataset survived the crash.
    let ds = api.get(&format!("/v1/datasets/{dataset}")).await;
    assert_eq!(ds.status, 200);
    assert_eq!(ds.json()["rows"], 2000);
    let again = api.create_job(&slow_job(&dataset, "300ms")).await;
    let j2 = api
        .wait_job(
            again["id"].as_str().unwrap(),
            Duration::from_secs(60),
            finished,
        )
        .await;
    assert_eq!(j2["status"], "succeeded", "{j2}");
    let log = second.log_text();
    assert!(log.contains(&id), "the second process ran the job:\n{log}");
}
both_databases!(
    killed_mid_job,
    killed_mid_job_sqlite,
    killed_mid_job_postgres
);

/// Two processes on one PostgreSQL database: every job is claimed and run exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_the_queue() {
    let Some(db) = TestDb::new(Db::Postgres).await else {
        return;
    };
    let a = ChildServer::start(&db, "a", &[]);
    let b = ChildServer::start(&db, "b", &[]);
    let api_a = a.api();
    let api_b = b.api();
    let dataset = upload_slow(&api_a, 500).await;
    // Both processes see the same data.
    assert_eq!(
        api_b.get(&format!("/v1/datasets/{dataset}")).await.json()["rows"],
        500
    );
    let mut ids = Vec::new();
    for i in 0..6 {
        let api = if i % 2 == 0 { &api_a } else { &api_b };
        let job = api.create_job(&slow_job(&dataset, "700ms")).await;
        ids.push(job["id"].as_str().unwrap().to_string());
    }
    for id in &ids {
        let j: Value = api_a.wait_job(id, Duration::from_secs(120), finished).await;
        assert_eq!(j["status"], "succeeded", "{j}");
        assert_eq!(j["attempts"], 1, "{j}");
    }
    // Each job was started by exactly one of the processes, and both did work.
    let (log_a, log_b) = (a.log_text(), b.log_text());
    let started = |log: &str, id: &str| {
        log.lines()
            .filter(|l| l.contains("job started") && l.contains(id))
            .count()
    };
    let mut per_process = (0, 0);
    for id in &ids {
        let (na, nb) = (started(&log_a, id), started(&log_b, id));
        assert_eq!(
            na + nb,
            1,
            "job {id} started {na} times in a and {nb} times in b"
        );
        per_process.0 += na;
        per_process.1 += nb;
    }
    assert!(
        per_process.0 > 0 && per_process.1 > 0,
        "work was shared: {per_process:?}"
    );
}

/// With PostgreSQL, a job queued through one process wakes idle workers of the others at once
/// (`LISTEN`/`NOTIFY`) instead of after their poll interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_jobs_wake_other_processes() {
    let Some(db) = TestDb::new(Db::Postgres).await else {
        return;
    };
    let slow_poll = ["--poll-interval", "60s"];
    let a = ChildServer::start(&db, "a", &slow_poll);
    let b = ChildServer::start(&db, "b", &slow_poll);
    let api = a.api();
    let dataset = upload_slow(&api, 500).await;
    let first = api.create_job(&slow_job(&dataset, "60s")).await;
    let second = api.create_job(&slow_job(&dataset, "60s")).await;
    let ids = [
        first["id"].as_str().unwrap(),
        second["id"].as_str().unwrap(),
    ];
    // One worker per process: both jobs run only if both processes claimed one.
    for id in ids {
        api.wait_job(id, Duration::from_secs(10), |j| j["status"] == "running")
            .await;
    }
    for id in ids {
        api.post_raw(&format!("/v1/jobs/{id}/cancel"), "").await;
    }
    for id in ids {
        api.wait_job(id, Duration::from_secs(30), finished).await;
    }
    drop((a, b));
}

/// The poison job of issue 27 on a server whose address space is capped at 1 GiB: 20,000
/// records of one class with distinct values, microaggregated as a `set`, used to make a 5 GB
/// output (the server aborted allocating it, at every restart). The set lists 10 values and a
/// count, so the job succeeds with an output of the input's order of size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_set_job_is_bounded() {
    let db = TestDb::new(Db::Sqlite).await.unwrap();
    let server = ChildServer::start_capped(&db, "capped", &[], 1 << 30);
    let api = server.api();
    let csv = poison_csv(20_000);
    let input = csv.len();
    let ds = api.upload(csv, "delimiter=;").await;
    let job = api
        .create_job(&poison_job(ds["id"].as_str().unwrap()))
        .await;
    let id = job["id"].as_str().unwrap();
    let j = api.wait_job(id, Duration::from_secs(60), finished).await;
    assert_eq!(j["status"], "succeeded", "{j}\n{}", server.log_text());
    assert_eq!(j["attempts"], 1, "{j}");
    let out = api.get(&format!("/v1/jobs/{id}/result.csv")).await;
    assert_eq!(out.status, 200);
    let lines: Vec<&str> = out.text.lines().collect();
    assert_eq!(lines.len(), 20_001);
    assert_eq!(lines[0], "g;v");
    assert!(
        lines[1..]
            .iter()
            .all(|l| *l == "x;{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, … 19990 more}"),
        "{}",
        lines[1]
    );
    // 148,894 bytes in, 980,004 out (unbounded: 5 GB).
    assert_eq!((input, out.text.len()), (148_894, 980_004));
}

/// The synchronous risk analysis stops with its request and is bounded (issue 27 item 2): a
/// request abandoned by its client stops using CPU at once (it used to run to its end), at most
/// `--max-risk-requests` run at once (429 `too_many_requests` with `Retry-After` beyond), and the
/// abandoned request's slot is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_risk_requests_stop() {
    let db = TestDb::new(Db::Sqlite).await.unwrap();
    let server = ChildServer::start(&db, "risk", &["--max-risk-requests", "1"]);
    let api = server.api();
    let slow = api.upload(slow_risk_csv(), "name=slow").await;
    let slow = slow["id"].as_str().unwrap().to_string();
    let small = api.upload("a,b\n1,x\n2,y\n", "name=small").await;
    let small = small["id"].as_str().unwrap().to_string();
    let risk = |id: &str| format!("/v1/datasets/{id}/risk");
    // A request the client gives up on after 1 s (the analysis takes several).
    let abandoned = {
        let url = api.url(&risk(&slow));
        let client = api.client.clone();
        tokio::spawn(async move {
            client
                .post(url)
                .json(&slow_risk_request())
                .timeout(Duration::from_secs(1))
                .send()
                .await
        })
    };
    // Meanwhile the one slot is taken: another analysis is refused.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let busy = api
        .post_json(
            &risk(&small),
            &serde_json::json!({"quasi_identifiers": ["a"]}),
        )
        .await;
    busy.assert_error(429, "too_many_requests");
    assert!(busy.headers.get("retry-after").is_some());
    assert!(abandoned.await.unwrap().is_err(), "the client timed out");
    // The server stops working on it: less than 0.3 s of CPU over the next second (the
    // analysis would use a whole core).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = server.child.id();
    let before = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let used = cpu_ticks(pid) - before;
    assert!(
        used < 30,
        "{used} ticks of CPU after the request was abandoned"
    );
    // Its slot is free again.
    let r = api
        .post_json(
            &risk(&small),
            &serde_json::json!({"quasi_identifiers": ["a"]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
}
