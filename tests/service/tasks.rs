//! Job tasks besides the search: `"task": "evaluate"` (a given transformation, the service's
//! `deid evaluate`) and `"task": "risk"` (risk analysis as a job, for large datasets), on both
//! databases, with their bad-input answers.

use std::time::Duration;

use serde_json::{Value, json};

use crate::both_databases;
use crate::helpers::*;

/// Waits for the job's end and returns its view.
async fn ended(app: &TestApp, job: &Value) -> Value {
    let id = job["id"].as_str().unwrap();
    app.wait_job(id, Duration::from_secs(120), finished).await
}

/// The evaluation of the transformation a search found reproduces the search's result: same
/// transformation, scores and suppressed records, the same CSV byte for byte (k-anonymous by an
/// independent check); a transformation that is not anonymous fails with `not_anonymous`,
/// keeps its report and writes no CSV.
async fn evaluate_task(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let dataset = upload_adult(&app).await;
    let k = 5;
    let mut spec = adult_job(&dataset, k, 0.02);
    spec["time_limit"] = json!("3s");
    let search = app.create_job(&spec).await;
    assert_eq!(search["task"], "anonymize");
    let search = ended(&app, &search).await;
    assert_eq!(search["status"], "succeeded", "{search}");
    let sid = search["id"].as_str().unwrap();
    let found = app.get(&format!("/v1/jobs/{sid}/result")).await.json();
    let found_csv = app.get(&format!("/v1/jobs/{sid}/result.csv")).await.text;

    let mut spec = adult_job(&dataset, k, 0.02);
    spec["task"] = json!("evaluate");
    spec["levels"] = found["transformation"].clone();
    let job = app.create_job(&spec).await;
    assert_eq!(job["task"], "evaluate");
    let job = ended(&app, &job).await;
    assert_eq!(job["status"], "succeeded", "{job}");
    let id = job["id"].as_str().unwrap();
    let report = app.get(&format!("/v1/jobs/{id}/result")).await.json();
    assert_eq!(report["anonymous"], true);
    assert_eq!(report["job_id"], id);
    for field in [
        "transformation",
        "suppressed_rows",
        "classes",
        "score",
        "rows",
    ] {
        assert_eq!(report[field], found[field], "{field}");
    }
    assert!(report["algorithm"].is_null() && report["trace"].is_null());
    let csv = app.get(&format!("/v1/jobs/{id}/result.csv")).await.text;
    assert_eq!(csv, found_csv);
    let max = (30162.0 * 0.02) as usize;
    let (rows, suppressed) = check_k_anonymity(&csv, b';', &ADULT_QIS, k as usize, max);
    assert_eq!(rows, 30162);
    assert_eq!(
        suppressed as u64,
        report["suppressed_rows"].as_u64().unwrap()
    );

    // Every quasi-identifier at level 0 (none named): adult has unique records.
    spec["levels"] = json!({});
    let job = ended(&app, &app.create_job(&spec).await).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["error"]["code"], "not_anonymous", "{job}");
    assert!(job["error"]["details"]["suppressed_rows"].as_u64().unwrap() > max as u64);
    let id = job["id"].as_str().unwrap();
    let report = app.get(&format!("/v1/jobs/{id}/result")).await.json();
    assert_eq!(report["anonymous"], false);
    assert!(
        report["transformation"]
            .as_object()
            .unwrap()
            .values()
            .all(|l| l == 0)
    );
    app.get(&format!("/v1/jobs/{id}/result.csv"))
        .await
        .assert_error(409, "result_not_available");
    app.stop().await;
}
both_databases!(evaluate_task, evaluate_task_sqlite, evaluate_task_postgres);

/// A risk-analysis job answers exactly what the synchronous endpoint answers, needs no
/// hierarchies, and has no CSV.
async fn risk_task(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let csv = std::fs::read(repo("examples/adult/adult.csv")).unwrap();
    let ds = app.upload(csv, "delimiter=;&name=adult").await;
    let dataset = ds["id"].as_str().unwrap();
    let population = json!({"sampling_fraction": 0.01});
    let sync = app
        .post_json(
            &format!("/v1/datasets/{dataset}/risk"),
            &json!({"quasi_identifiers": ["age", "sex", "race"], "population": population}),
        )
        .await;
    assert_eq!(sync.status, 200, "{}", sync.text);
    let qi = json!({"type": "quasi_identifying"});
    let spec = json!({
        "dataset_id": dataset,
        "task": "risk",
        "attributes": {"age": qi, "sex": qi, "race": qi, "salary-class": {"type": "sensitive"}},
        "population": population,
    });
    let job = app.create_job(&spec).await;
    assert_eq!(job["task"], "risk");
    let job = ended(&app, &job).await;
    assert_eq!(job["status"], "succeeded", "{job}");
    let id = job["id"].as_str().unwrap();
    let result = app.get(&format!("/v1/jobs/{id}/result")).await.json();
    assert_eq!(result, sync.json());
    assert!(
        result["input"]["population_uniqueness"].is_object(),
        "{result}"
    );
    app.get(&format!("/v1/jobs/{id}/result.csv"))
        .await
        .assert_error(409, "result_not_available");
    app.stop().await;
}
both_databases!(risk_task, risk_task_sqlite, risk_task_postgres);

/// Fields that do not fit the task are refused at submission, naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_fields_are_checked() {
    let Some(app) = spawn_app(Db::Sqlite).await else {
        return;
    };
    let dataset = upload_adult(&app).await;
    let base = adult_job(&dataset, 5, 0.02);
    let with = |changes: Value| {
        let mut spec = base.clone();
        for (k, v) in changes.as_object().unwrap() {
            if v.is_null() {
                spec.as_object_mut().unwrap().remove(k);
            } else {
                spec[k] = v.clone();
            }
        }
        spec
    };
    let qi = json!({"type": "quasi_identifying"});
    for (changes, field) in [
        (json!({"task": "evaluate"}), "levels"),
        (json!({"levels": {"age": 1}}), "levels"),
        (json!({"task": "risk", "levels": {"age": 1}}), "levels"),
        (
            json!({"task": "evaluate", "levels": {"salary-class": 1}}),
            "levels.salary-class",
        ),
        (
            json!({"task": "evaluate", "levels": {"age": 99}}),
            "levels.age",
        ),
        (
            json!({"task": "evaluate", "levels": {"age": 1}, "local": {}}),
            "local",
        ),
        (json!({"task": "risk"}), "privacy"),
        (
            json!({"task": "risk", "privacy": [], "attributes": {"salary-class": {"type": "sensitive"}}}),
            "attributes",
        ),
        (
            json!({"task": "risk", "privacy": [], "attributes": {"age": qi},
                   "population": {"size": 100}}),
            "population.size",
        ),
        (json!({"task": "summarize"}), "task"),
    ] {
        let r = app.post_json("/v1/jobs", &with(changes.clone())).await;
        let e = r.assert_error(422, "invalid_spec");
        assert_eq!(e["error"]["details"]["field"], field, "{changes}: {e}");
    }
    // Nothing was queued.
    let page = app.get("/v1/jobs").await.json();
    assert_eq!(page["items"].as_array().unwrap().len(), 0, "{page}");
    app.stop().await;
}

/// Jobs stored before specifications and reports moved to `job_documents` (schema version 3)
/// keep them: an ended job shows its report and task, a queued one is read and run by the
/// worker (its dataset is gone, so it fails with `dataset_not_found`, not with an unreadable
/// specification).
async fn version_3_jobs_survive(kind: Db) {
    use sqlx::Connection;
    let Some(db) = TestDb::new(kind).await else {
        return;
    };
    let migrator = deid::store::migrator_of(&deid::store::MIGRATIONS[..3]);
    let done = "0190f000-0000-7000-8000-000000000001";
    let queued = "0190f000-0000-7000-8000-000000000002";
    const JOB: &str = "INSERT INTO jobs (id, tenant, dataset_id, status, spec, attempts, max_attempts, run_at, \
         cancel_requested, result, result_chunks, created_at, finished_at) \
         VALUES ($1, 'default', 'gone', $2, $3, 1, 3, 0, 0, $4, NULL, 0, $5)";
    let spec = json!({"dataset_id": "gone", "attributes": {}, "privacy": ["k-anonymity(k=2)"]})
        .to_string();
    macro_rules! fill {
        ($conn:expr) => {{
            let mut conn = $conn;
            migrator.run(&mut conn).await.unwrap();
            for (id, status, result, finished) in [
                (
                    done,
                    "succeeded",
                    Some(r#"{"anonymous": true}"#),
                    Some(5i64),
                ),
                (queued, "queued", None, None),
            ] {
                sqlx::query(JOB)
                    .bind(id)
                    .bind(status)
                    .bind(&spec)
                    .bind(result)
                    .bind(finished)
                    .execute(&mut conn)
                    .await
                    .unwrap();
            }
            conn.close().await.unwrap();
        }};
    }
    if db.url.starts_with("sqlite:") {
        let options: sqlx::sqlite::SqliteConnectOptions = db.url.parse().unwrap();
        fill!(
            sqlx::SqliteConnection::connect_with(&options.create_if_missing(true))
                .await
                .unwrap()
        );
    } else {
        fill!(sqlx::PgConnection::connect(&db.url).await.unwrap());
    }
    let c = config(&db);
    let app = spawn_app_with(db, c).await;
    let job = app.job(done).await;
    assert_eq!(
        (&job["task"], &job["status"]),
        (&json!("anonymize"), &json!("succeeded"))
    );
    let result = app.get(&format!("/v1/jobs/{done}/result")).await.json();
    assert_eq!(result, json!({"anonymous": true}));
    let job = app
        .wait_job(queued, Duration::from_secs(30), finished)
        .await;
    assert_eq!(job["error"]["code"], "dataset_not_found", "{job}");
    app.stop().await;
}
both_databases!(
    version_3_jobs_survive,
    version_3_jobs_survive_sqlite,
    version_3_jobs_survive_postgres
);

/// Estimated k-map through the service: refused without a population (422 naming
/// `population`), enforced as k′-anonymity with one (the report says k′; the CSV's classes have
/// at least k′ records by an independent count).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn estimated_k_map_job() {
    let Some(app) = spawn_app(Db::Sqlite).await else {
        return;
    };
    let dataset = upload_adult(&app).await;
    let mut spec = adult_job(&dataset, 5, 0.05);
    spec["privacy"] = json!(["k-map(k=1000,alpha=0.01)"]);
    let e = app
        .post_json("/v1/jobs", &spec)
        .await
        .assert_error(422, "invalid_spec");
    assert_eq!(e["error"]["details"]["field"], "population", "{e}");
    spec["population"] = json!({"region": "usa"});
    let job = ended(&app, &app.create_job(&spec).await).await;
    assert_eq!(job["status"], "succeeded", "{job}");
    let id = job["id"].as_str().unwrap();
    let report = app.get(&format!("/v1/jobs/{id}/result")).await.json();
    let warnings = report["warnings"].to_string();
    assert!(warnings.contains("holds as 3-anonymity"), "{warnings}");
    let csv = app.get(&format!("/v1/jobs/{id}/result.csv")).await.text;
    let (rows, _) = check_k_anonymity(&csv, b';', &ADULT_QIS, 3, (30162.0 * 0.05) as usize);
    assert_eq!(rows, 30162);
    app.stop().await;
}
