//! Snapshots of every error body the API can return, one per [`ErrorCode`], each produced by a
//! real request to a test server (or, for job failures, read from the failed job's `error`).
//! The snapshots are in `snapshots/service__error_bodies__<code>.snap`, their description the
//! request that produced them; ids that vary between runs are replaced by placeholders before
//! snapshotting. [`every_code_has_a_snapshot`] fails when a code has none and is not on the
//! commented [`NOT_SNAPSHOTTED`] list.

use std::collections::BTreeSet;
use std::time::Duration;

use deid::job::error::ErrorCode;
use reqwest::Method;
use serde_json::{Value, json};

use crate::contract::{Schemas, document};
use crate::helpers::*;

/// Codes no test can make the API return, with the reason.
const NOT_SNAPSHOTTED: &[(ErrorCode, &str)] = &[
    // An unexpected failure (a bug, a panicking handler or task): no request produces one on
    // purpose. Its body has the same shape (`api::error::ApiError`), with a generic message.
    (
        ErrorCode::InternalError,
        "no request produces an unexpected failure",
    ),
    // A job failure when the database fails while the job runs, after the job's attempts are
    // used up: the same database then cannot show the job.
    (
        ErrorCode::StorageError,
        "the database must fail while a job runs",
    ),
];

/// A dataset or job id no test creates (ids in messages are stable this way).
const UNKNOWN_ID: &str = "01a20000-0000-7000-8000-000000000000";

/// The directory of the snapshots (insta's default for this file).
fn snapshot_dir() -> std::path::PathBuf {
    repo("tests/service/snapshots")
}

/// Replaces every occurrence of each `(text, placeholder)` in the strings of `value`.
fn scrub(value: &mut Value, ids: &[(&str, &str)]) {
    match value {
        Value::String(s) => {
            for (text, placeholder) in ids {
                *s = s.replace(text, placeholder);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| scrub(v, ids)),
        Value::Object(map) => map.values_mut().for_each(|v| scrub(v, ids)),
        _ => {}
    }
}

/// Asserts the API's error shape (`openapi.yaml`'s `Error`) with `code` in `body` and snapshots it as `<code>`, described
/// by `request`.
fn snapshot_body(code: ErrorCode, request: &str, mut body: Value, ids: &[(&str, &str)]) {
    let error = &body["error"];
    assert_eq!(error["code"], code.as_str(), "{request}: {body}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{request}: {body}"
    );
    assert!(error["details"].is_object(), "{request}: {body}");
    let errors = Schemas::new(&document()).validate_named(&body, "Error");
    assert!(errors.is_empty(), "{request}: {errors:?}\n{body}");
    scrub(&mut body, ids);
    insta::with_settings!({description => request, omit_expression => true}, {
        insta::assert_json_snapshot!(code.as_str(), body);
    });
}

/// Snapshots the error answer `reply` to `request`: its status is the code's.
fn snapshot(code: ErrorCode, request: &str, reply: &Reply, ids: &[(&str, &str)]) {
    assert_eq!(reply.status, code.status(), "{request}: {}", reply.text);
    snapshot_body(code, request, reply.json(), ids);
}

/// Snapshots the `error` of the failed job `job` (a job view), in the API's error shape.
fn snapshot_job(code: ErrorCode, job: &Value, ids: &[(&str, &str)]) {
    assert_eq!(job["status"], "failed", "{job}");
    let request = "GET /v1/jobs/{id}: the failed job's `error`";
    snapshot_body(code, request, json!({"error": job["error"]}), ids);
}

/// Every code of the table has a snapshot, except those on [`NOT_SNAPSHOTTED`]; every
/// snapshot of this file is of a code.
#[test]
fn every_code_has_a_snapshot() {
    let excluded: BTreeSet<&str> = NOT_SNAPSHOTTED.iter().map(|(c, _)| c.as_str()).collect();
    let expected: BTreeSet<&str> = ErrorCode::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|c| !excluded.contains(c))
        .collect();
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(snapshot_dir()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(code) = name
            .strip_prefix("service__error_bodies__")
            .and_then(|n| n.strip_suffix(".snap"))
        {
            found.insert(code.to_string());
        }
    }
    let found: BTreeSet<&str> = found.iter().map(String::as_str).collect();
    let missing: Vec<_> = expected.difference(&found).collect();
    assert!(missing.is_empty(), "codes without a snapshot: {missing:?}");
    let unknown: Vec<_> = found.difference(&expected).collect();
    assert!(
        unknown.is_empty(),
        "snapshots of excluded or unknown codes: {unknown:?}"
    );
}

/// Errors of requests: authentication, routes, queries, bodies, uploads, datasets, jobs and
/// hierarchies, and a dataset that can no longer be read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_error_bodies() {
    let db = TestDb::new(Db::Sqlite).await.unwrap();
    let url = db.url.clone();
    let mut c = config(&db);
    let key = "errors-key-0123456789";
    c.api_keys = vec![format!("acme:{key}")];
    c.max_upload_bytes = 10_000;
    c.max_rows = 100;
    c.max_columns = 70;
    c.max_output_bytes = 10;
    let app = spawn_app_with(db, c).await;
    let api = app.with_key(Some(key));
    let none: &[(&str, &str)] = &[];
    use ErrorCode as E;

    let r = app.get("/v1/datasets").await;
    snapshot(E::Unauthorized, "GET /v1/datasets without a key", &r, none);
    let r = api.get("/v1/nothing").await;
    snapshot(E::RouteNotFound, "GET /v1/nothing", &r, none);
    let r = api.send(api.request(Method::PATCH, "/v1/jobs")).await;
    snapshot(E::MethodNotAllowed, "PATCH /v1/jobs", &r, none);
    let r = api.post_raw("/v1/jobs", "{not json").await;
    snapshot(E::MalformedJson, "POST /v1/jobs {not json", &r, none);
    let r = api.get("/v1/jobs?status=done").await;
    snapshot(E::InvalidQuery, "GET /v1/jobs?status=done", &r, none);
    let r = api.get(&format!("/v1/datasets/{UNKNOWN_ID}")).await;
    snapshot(E::DatasetNotFound, "GET /v1/datasets/{unknown}", &r, none);
    let r = api.get(&format!("/v1/jobs/{UNKNOWN_ID}")).await;
    snapshot(E::JobNotFound, "GET /v1/jobs/{unknown}", &r, none);

    // Uploads.
    let multipart = |body: &'static str| {
        api.request(Method::POST, "/v1/datasets")
            .header("content-type", "multipart/form-data; boundary=XYZ")
            .body(body)
    };
    let r = api
        .send(multipart(
            "--XYZ\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nhello\r\n--XYZ--\r\n",
        ))
        .await;
    snapshot(
        E::InvalidRequest,
        "POST /v1/datasets: a multipart form without a file field",
        &r,
        none,
    );
    let r = api
        .send(multipart(
            "--XYZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.csv\"\r\n\r\na,b\n1,2\n",
        ))
        .await;
    snapshot(
        E::UploadInterrupted,
        "POST /v1/datasets: a multipart form that ends inside its file",
        &r,
        none,
    );
    let r = api.post_raw("/v1/datasets", vec![b'a'; 20_000]).await;
    snapshot(
        E::PayloadTooLarge,
        "POST /v1/datasets: 20,000 bytes (--max-upload-bytes 10000)",
        &r,
        none,
    );
    let rows: String = std::iter::once("a\n".to_string())
        .chain((0..101).map(|i| format!("{i}\n")))
        .collect();
    let r = api.post_raw("/v1/datasets", rows).await;
    snapshot(
        E::TooManyRows,
        "POST /v1/datasets: 101 rows (--max-rows 100)",
        &r,
        none,
    );
    let header: Vec<String> = (0..71).map(|i| format!("c{i}")).collect();
    let wide = format!("{}\n{}\n", header.join(","), vec!["1"; 71].join(","));
    let r = api.post_raw("/v1/datasets", wide).await;
    snapshot(
        E::TooManyColumns,
        "POST /v1/datasets: 71 columns (--max-columns 70)",
        &r,
        none,
    );
    let r = api.post_raw("/v1/datasets", "a,b\n1,2\n3\n").await;
    snapshot(
        E::InvalidCsv,
        "POST /v1/datasets: a row with one field of two",
        &r,
        none,
    );

    // Hierarchies and jobs of a dataset.
    let ds = api.upload("age,sex\n30,m\n31,f\n40,m\n", "").await;
    let id = ds["id"].as_str().unwrap().to_string();
    let ids = [(id.as_str(), "[dataset id]")];
    let put = |column: &str, body: &'static str| {
        api.request(
            Method::PUT,
            &format!("/v1/datasets/{id}/hierarchies/{column}"),
        )
        .body(body)
    };
    let r = api.send(put("height", "1;*\n")).await;
    snapshot(
        E::ColumnNotFound,
        "PUT /v1/datasets/{id}/hierarchies/height",
        &r,
        &ids,
    );
    let r = api.get(&format!("/v1/datasets/{id}/hierarchies/sex")).await;
    snapshot(
        E::HierarchyNotFound,
        "GET /v1/datasets/{id}/hierarchies/sex before any was stored",
        &r,
        &ids,
    );
    let r = api.send(put("age", "30;3*;*\n31;3*\n40;4*;*\n")).await;
    snapshot(
        E::InvalidHierarchy,
        "PUT /v1/datasets/{id}/hierarchies/age: a row with fewer levels",
        &r,
        &ids,
    );
    let r = api.send(put("age", "30;3*;*\n31;3*;*\n")).await;
    snapshot(
        E::HierarchyMissingValues,
        "PUT /v1/datasets/{id}/hierarchies/age: no row for 40",
        &r,
        &ids,
    );
    let r = api
        .post_json("/v1/jobs", &json!({"dataset_id": id, "time_limit": -5}))
        .await;
    snapshot(
        E::InvalidSpec,
        "POST /v1/jobs {\"time_limit\": -5}",
        &r,
        &ids,
    );
    let spec = json!({
        "dataset_id": id,
        "attributes": {"sex": {"type": "quasi_identifying", "hierarchy": {"csv": "m;*\nf;*\n"}}},
        "privacy": ["k-anonymity(k=2)"],
    });
    let r = api.post_json("/v1/jobs", &spec).await;
    snapshot(
        E::OutputTooLarge,
        "POST /v1/jobs: an output of 3 rows (--max-output-bytes 10)",
        &r,
        &ids,
    );

    // A stored dataset whose bytes were damaged after its upload (not valid UTF-8 any more).
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    let damaged = sqlx::query("UPDATE dataset_chunks SET data = ? WHERE dataset_id = ?")
        .bind(&b"age,sex\n30,m\n31,\xff\n40,m\n"[..])
        .bind(&id)
        .execute(&mut conn)
        .await
        .unwrap();
    assert_eq!(damaged.rows_affected(), 1);
    drop(conn);
    let r = api
        .post_json(
            &format!("/v1/datasets/{id}/risk"),
            &json!({"quasi_identifiers": ["age", "sex"]}),
        )
        .await;
    snapshot(
        E::DatasetUnreadable,
        "POST /v1/datasets/{id}/risk on damaged stored bytes",
        &r,
        &ids,
    );
    app.stop().await;
}

/// Job failures (no solution, not anonymous) and the errors of jobs and their datasets: a
/// result that is not available, a finished job cancelled, a dataset in use, risk analyses
/// beyond `--max-risk-requests`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_error_bodies() {
    let db = TestDb::new(Db::Sqlite).await.unwrap();
    let mut c = config(&db);
    c.max_risk_requests = 1;
    let app = spawn_app_with(db, c).await;
    use ErrorCode as E;
    let ds = app
        .upload(
            "age,sex,zip,disease\n30,m,1,a\n31,f,2,b\n40,m,1,a\n41,f,2,c\n",
            "",
        )
        .await;
    let id = ds["id"].as_str().unwrap().to_string();
    // Two classes of two at the top of the age hierarchy: 3-anonymity needs suppression.
    let spec = json!({
        "dataset_id": id,
        "algorithm": "flash",
        "attributes": {"age": {"type": "quasi_identifying",
            "hierarchy": {"csv": "30;3*\n31;3*\n40;4*\n41;4*\n"}}},
        "privacy": ["k-anonymity(k=3)"],
        "suppression_limit": 0,
    });
    let job = app.create_job(&spec).await;
    let job_id = job["id"].as_str().unwrap().to_string();
    let j = app
        .wait_job(&job_id, Duration::from_secs(60), finished)
        .await;
    snapshot_job(E::NoSolution, &j, &[]);
    // The untransformed data (level 0) have unique records.
    let mut evaluate = spec.clone();
    evaluate["task"] = json!("evaluate");
    evaluate["levels"] = json!({});
    evaluate["privacy"] = json!(["k-anonymity(k=2)"]);
    evaluate.as_object_mut().unwrap().remove("algorithm");
    let job = app.create_job(&evaluate).await;
    let job_id = job["id"].as_str().unwrap().to_string();
    let j = app
        .wait_job(&job_id, Duration::from_secs(60), finished)
        .await;
    snapshot_job(E::NotAnonymous, &j, &[]);
    let ids = [(job_id.as_str(), "[job id]"), (id.as_str(), "[dataset id]")];
    let r = app.get(&format!("/v1/jobs/{job_id}/result.csv")).await;
    snapshot(
        E::ResultNotAvailable,
        "GET /v1/jobs/{id}/result.csv of a job that failed",
        &r,
        &ids,
    );
    let r = app.post_raw(&format!("/v1/jobs/{job_id}/cancel"), "").await;
    snapshot(
        E::JobFinished,
        "POST /v1/jobs/{id}/cancel of a job that failed",
        &r,
        &ids,
    );

    // A dataset used by a queued or running job.
    let slow = app.upload(slow_csv(500), "").await;
    let slow_id = slow["id"].as_str().unwrap().to_string();
    let job = app.create_job(&slow_job(&slow_id, "60s")).await;
    let job_id = job["id"].as_str().unwrap().to_string();
    let ids = [(slow_id.as_str(), "[dataset id]")];
    let r = app
        .send(app.request(Method::DELETE, &format!("/v1/datasets/{slow_id}")))
        .await;
    snapshot(
        E::DatasetInUse,
        "DELETE /v1/datasets/{id} while a job uses it",
        &r,
        &ids,
    );
    app.post_raw(&format!("/v1/jobs/{job_id}/cancel"), "").await;
    app.wait_job(&job_id, Duration::from_secs(60), finished)
        .await;

    // Risk analyses at once beyond the one slot (--max-risk-requests 1): of several sent
    // together, all but the one that got the slot are refused (sent again if none was).
    let busy = app.upload(slow_risk_csv(), "name=slow").await;
    let busy = format!("/v1/datasets/{}/risk", busy["id"].as_str().unwrap());
    let request = slow_risk_request();
    let mut refused = None;
    for _ in 0..10 {
        let replies =
            futures_util::future::join_all((0..6).map(|_| app.post_json(&busy, &request))).await;
        refused = replies.into_iter().find(|r| r.status != 200);
        if refused.is_some() {
            break;
        }
    }
    let r = refused.expect("one of six risk analyses at once is refused");
    snapshot(
        E::TooManyRequests,
        "POST /v1/datasets/{id}/risk while --max-risk-requests analyses run",
        &r,
        &[],
    );
    app.stop().await;
}

/// Limits of the queue and of uploads: a full queue, an upload slower than `--upload-timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_error_bodies() {
    let db = TestDb::new(Db::Sqlite).await.unwrap();
    let mut c = config(&db);
    c.max_queued_jobs = 0;
    c.upload_timeout = Duration::from_secs(1);
    let app = spawn_app_with(db, c).await;
    use ErrorCode as E;
    let ds = app.upload("age\n30\n31\n", "").await;
    let spec = json!({
        "dataset_id": ds["id"],
        "attributes": {"age": {"type": "quasi_identifying", "hierarchy": {"csv": "30;*\n31;*\n"}}},
        "privacy": ["k-anonymity(k=2)"],
    });
    let r = app.post_json("/v1/jobs", &spec).await;
    snapshot(
        E::QueueFull,
        "POST /v1/jobs with --max-queued-jobs 0",
        &r,
        &[],
    );
    let slow = futures_util::stream::unfold(0, |i| async move {
        if i > 0 {
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        (i < 2).then(|| (Ok::<_, std::io::Error>(b"a,b\n1,2\n".to_vec()), i + 1))
    });
    let r = app
        .send(
            app.request(Method::POST, "/v1/datasets")
                .header("content-type", "text/csv")
                .body(reqwest::Body::wrap_stream(slow)),
        )
        .await;
    snapshot(
        E::RequestTimeout,
        "POST /v1/datasets slower than --upload-timeout 1s",
        &r,
        &[],
    );
    app.stop().await;
}

/// A job whose worker died with its attempts used up (`--max-attempts 1`): a server process
/// killed while running it, then a server on the same database that recovers the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_lost_body() {
    let db = TestDb::new(Db::Sqlite).await.unwrap();
    let mut first = ChildServer::start(&db, "lost", &["--max-attempts", "1"]);
    let api = first.api();
    let ds = api.upload(slow_csv(2000), "").await;
    let job = api
        .create_job(&slow_job(ds["id"].as_str().unwrap(), "60s"))
        .await;
    let id = job["id"].as_str().unwrap().to_string();
    api.wait_job(&id, Duration::from_secs(30), |j| j["status"] == "running")
        .await;
    first.kill();
    let mut c = config(&db);
    c.max_attempts = 1;
    let app = spawn_app_with(db, c).await;
    let j = app.wait_job(&id, Duration::from_secs(60), finished).await;
    snapshot_job(ErrorCode::WorkerLost, &j, &[]);
    app.stop().await;
}

/// `/readyz` when the database does not answer (PostgreSQL: the database is dropped under the
/// running server).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_body() {
    let Some(db) = TestDb::new(Db::Postgres).await else {
        return;
    };
    let name = db.url.rsplit('/').next().unwrap().to_string();
    let c = config(&db);
    let app = spawn_app_with(db, c).await;
    assert_eq!(app.get("/readyz").await.status, 200);
    let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&admin_url())
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE \"{name}\" WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    let r = app.get("/readyz").await;
    snapshot(
        ErrorCode::NotReady,
        "GET /readyz without a database",
        &r,
        &[],
    );
    app.stop().await;
}
