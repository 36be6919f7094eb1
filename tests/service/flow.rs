//! The main flow on both databases: upload → hierarchies → job → SSE → result → CSV (checked
//! independently), live events of a long job, cancel, webhooks, paging.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::{Value, json};

use crate::both_databases;
use crate::helpers::*;

async fn full_flow(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let dataset = upload_adult(&app).await;
    let ds = app.get(&format!("/v1/datasets/{dataset}")).await.json();
    assert_eq!(ds["columns"].as_array().unwrap().len(), 9);
    let age = &ds["columns"][1];
    assert_eq!(age["name"], "age");
    assert_eq!(age["detected_type"], "integer");
    assert_eq!(age["distinct_count"], 72);
    assert_eq!(ds["hierarchies"]["age"], 5);
    // The stored hierarchy comes back as uploaded.
    let h = app
        .get(&format!("/v1/datasets/{dataset}/hierarchies/sex"))
        .await;
    assert_eq!(h.status, 200);
    assert_eq!(
        h.text,
        std::fs::read_to_string(repo("examples/adult/adult_hierarchy_sex.csv")).unwrap()
    );

    let (k, limit) = (5, 0.02);
    let job = app.create_job(&adult_job(&dataset, k, limit)).await;
    let id = job["id"].as_str().unwrap();
    assert!(
        job["status"] == "queued" || job["status"] == "running",
        "{job}"
    );
    let events = app.events(id, Duration::from_secs(120)).await;
    assert_eq!(events.first().unwrap().0, "progress", "{events:?}");
    let (last, view) = events.last().unwrap();
    assert_eq!(last, "done", "{events:?}");
    assert_eq!(view["status"], "succeeded");
    // Event ids and names are well-formed; the final view carries the best transformation.
    assert!(
        events
            .iter()
            .all(|(n, _)| ["progress", "improvement", "done"].contains(&n.as_str()))
    );
    let best = view["best"].clone();
    assert!(best["transformation"].is_object());

    let job = app.job(id).await;
    assert_eq!(job["status"], "succeeded");
    assert_eq!(job["attempts"], 1);
    assert_eq!(job["progress"]["phase"], "finished");
    assert_eq!(
        job["progress"]["explored_share"], 1.0,
        "Flash proved the optimum"
    );
    assert!(job["finished_at"].is_string());

    let report = app.get(&format!("/v1/jobs/{id}/result")).await;
    assert_eq!(report.status, 200);
    let report = report.json();
    assert_eq!(report["anonymous"], true);
    assert_eq!(report["rows"], 30162);
    assert_eq!(report["transformation"], best["transformation"]);
    assert!(report["risk"]["input"].is_object() && report["risk"]["output"].is_object());
    assert!(report["checks"].as_u64().unwrap() > 0);
    // auto: the portfolio's incumbent (BFS's diagonal search), then a top-down descent and
    // Flash on this small space.
    assert_eq!(report["algorithm"], "auto");
    for t in report["trace"].as_array().unwrap() {
        assert!(
            ["bfs", "top-down", "flash"].contains(&t["strategy"].as_str().unwrap()),
            "{t}"
        );
    }
    assert_eq!(report["suppression"]["mode"], "mask");
    assert_eq!(report["suppression"]["block_satisfies_models"], true);
    assert_eq!(report["optimal_proven"], true);
    assert!(!report["trace"].as_array().unwrap().is_empty());

    let csv = app.get(&format!("/v1/jobs/{id}/result.csv")).await;
    assert_eq!(csv.status, 200);
    assert!(
        csv.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let max_suppressed = (limit * 30162.0f64).floor() as usize;
    let (rows, suppressed) =
        check_k_anonymity(&csv.text, b';', &ADULT_QIS, k as usize, max_suppressed);
    assert_eq!(rows, 30162);
    assert_eq!(
        suppressed as u64,
        report["suppressed_rows"].as_u64().unwrap()
    );
    // Other columns are unchanged, row by row; the sensitive salary class of suppressed
    // records is masked like their quasi-identifiers.
    let original = std::fs::read_to_string(repo("examples/adult/adult.csv")).unwrap();
    let mut masked = 0;
    for (a, b) in original.lines().zip(csv.text.lines()).skip(1) {
        let suppressed = b.split(';').take(5).all(|v| v == "*");
        if suppressed {
            masked += 1;
            assert_eq!(b.rsplit(';').next(), Some("*"), "{b}");
        } else {
            assert_eq!(a.rsplit(';').next(), b.rsplit(';').next());
        }
    }
    assert_eq!(masked, suppressed);

    // The result stays downloadable after the dataset is deleted.
    let del = app
        .send(app.request(reqwest::Method::DELETE, &format!("/v1/datasets/{dataset}")))
        .await;
    assert_eq!(del.status, 204, "{}", del.text);
    app.get(&format!("/v1/datasets/{dataset}"))
        .await
        .assert_error(404, "dataset_not_found");
    let again = app.get(&format!("/v1/jobs/{id}/result.csv")).await;
    assert_eq!(again.text, csv.text);

    // Metrics in Prometheus format.
    let metrics = app.get("/metrics").await;
    assert_eq!(metrics.status, 200);
    for name in [
        "deid_jobs{state=\"succeeded\"}",
        "deid_checks_total",
        "deid_job_duration_seconds",
        "deid_http_requests_total",
        "deid_http_request_duration_seconds",
    ] {
        assert!(
            metrics.text.contains(name),
            "{name} missing:\n{}",
            metrics.text
        );
    }
    app.stop().await;
}
both_databases!(full_flow, full_flow_sqlite, full_flow_postgres);

/// A job with local generalization: the report lists the steps, which account for every
/// record; the CSV's classes, formed by output values across steps, are k-anonymous; the
/// post-hoc granularity beats the global job's.
async fn local_generalization_job(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let dataset = upload_adult(&app).await;
    let k = 5;
    let mut spec = adult_job(&dataset, k, 0.05);
    spec["time_limit"] = json!("4s");
    let global = app.create_job(&spec).await;
    spec["local"] = json!({"iterations": 50, "method": "steps"});
    let local = app.create_job(&spec).await;
    // The default method sweeps k-anonymity; the time limit is far from what it needs (about a
    // second), so nothing cuts it.
    spec["local"] = json!({});
    spec["time_limit"] = json!("60s");
    let swept = app.create_job(&spec).await;
    let mut reports = Vec::new();
    for job in [&global, &local, &swept] {
        let id = job["id"].as_str().unwrap();
        let events = app.events(id, Duration::from_secs(120)).await;
        let (last, view) = events.last().unwrap();
        assert_eq!(last, "done", "{events:?}");
        assert_eq!(view["status"], "succeeded", "{view}");
        let report = app.get(&format!("/v1/jobs/{id}/result")).await.json();
        let csv = app.get(&format!("/v1/jobs/{id}/result.csv")).await.text;
        reports.push((report, csv, events));
    }
    let (global, _, _) = &reports[0];
    let (report, csv, events) = &reports[1];
    assert!(global["local"].is_null());
    let steps = report["local"]["steps"].as_array().unwrap();
    assert!(steps.len() > 1, "{report}");
    assert_eq!(report["local"]["iterations"], 50);
    let published: u64 = steps
        .iter()
        .map(|s| s["published_rows"].as_u64().unwrap())
        .sum();
    let suppressed = report["suppressed_rows"].as_u64().unwrap();
    assert_eq!(published + suppressed, 30162);
    assert_eq!(report["transformation"], steps[0]["transformation"]);
    // The trace and the live improvements name their step.
    assert!(
        report["trace"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["step"].is_u64())
    );
    assert!(
        events
            .iter()
            .filter(|(n, _)| n == "improvement")
            .all(|(_, v)| v["step"].is_u64()),
        "{events:?}"
    );
    // Every published class (by output values, across steps) has ≥ k records; rows whose
    // quasi-identifiers are all `*` may be suppressed records or a step's top-level class.
    let (rows, starred) = check_k_anonymity(csv, b';', &ADULT_QIS, k as usize, 30162);
    assert_eq!(rows, 30162);
    assert!(starred as u64 >= suppressed);
    let loss = |r: &serde_json::Value| r["output_quality"]["granularity"]["loss"].as_f64().unwrap();
    assert!(
        loss(report) < loss(global),
        "local {} global {}",
        loss(report),
        loss(global)
    );
    assert!(suppressed <= global["suppressed_rows"].as_u64().unwrap());

    // The sweep: its progress streams while it runs (transformations visited), its classes
    // are k-anonymous in the CSV, and it is finer than the steps.
    let (sweep, sweep_csv, sweep_events) = &reports[2];
    assert_eq!(sweep["local"]["method"], "sweep", "{sweep}");
    assert_eq!(report["local"]["method"], "steps", "{report}");
    let visited: Vec<u64> = sweep_events
        .iter()
        .filter(|(n, _)| n == "progress")
        .filter_map(|(_, v)| v["progress"]["checks"].as_u64())
        .collect();
    assert!(visited.windows(2).all(|w| w[0] <= w[1]), "{visited:?}");
    assert_eq!(
        visited.last().copied(),
        sweep["checks"].as_u64(),
        "{visited:?}"
    );
    let sweep_suppressed = sweep["suppressed_rows"].as_u64().unwrap();
    let (rows, starred) = check_k_anonymity(sweep_csv, b';', &ADULT_QIS, k as usize, 30162);
    assert_eq!(rows, 30162);
    assert!(starred as u64 >= sweep_suppressed);
    assert!(
        loss(sweep) < loss(report),
        "sweep {} steps {}",
        loss(sweep),
        loss(report)
    );
    app.stop().await;
}
both_databases!(
    local_generalization_job,
    local_generalization_job_sqlite,
    local_generalization_job_postgres
);

async fn live_events_and_cancel(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let ds = app.upload(slow_csv(3000), "name=slow").await;
    let dataset = ds["id"].as_str().unwrap();
    let job = app.create_job(&slow_job(dataset, "60s")).await;
    let id = job["id"].as_str().unwrap().to_string();
    // A second job waits in the queue (one worker) and can be cancelled at once.
    let queued = app.create_job(&slow_job(dataset, "60s")).await;
    let qid = queued["id"].as_str().unwrap();
    let j = app
        .wait_job(&id, Duration::from_secs(30), |j| j["best"].is_object())
        .await;
    assert_eq!(j["status"], "running");
    let r = app.post_raw(&format!("/v1/jobs/{qid}/cancel"), "").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["status"], "cancelled");
    // The dataset is in use by the running job.
    let del = app
        .send(app.request(reqwest::Method::DELETE, &format!("/v1/datasets/{dataset}")))
        .await;
    del.assert_error(409, "dataset_in_use");
    // The result is not there yet.
    app.get(&format!("/v1/jobs/{id}/result"))
        .await
        .assert_error(409, "result_not_available");

    // Live events: collect for a while from a second client while the job runs, then cancel.
    let events_app = app.api.clone();
    let id2 = id.clone();
    let reader =
        tokio::spawn(async move { events_app.events(&id2, Duration::from_secs(60)).await });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let r = app.post_raw(&format!("/v1/jobs/{id}/cancel"), "").await;
    assert_eq!(r.status, 202, "{}", r.text);
    let events = reader.await.unwrap();
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"progress"));
    assert_eq!(names.last(), Some(&"cancelled"), "{names:?}");
    // About 4 progress events per second while running.
    let progress = names.iter().filter(|n| **n == "progress").count();
    assert!(progress >= 4, "{names:?}");
    assert!(names.contains(&"improvement"), "{names:?}");
    let checks: Vec<u64> = events
        .iter()
        .filter(|(n, _)| n == "progress")
        .map(|(_, v)| v["progress"]["checks"].as_u64().unwrap())
        .collect();
    assert!(checks.windows(2).all(|w| w[0] <= w[1]), "{checks:?}");

    let j = app.job(&id).await;
    assert_eq!(j["status"], "cancelled");
    assert_eq!(j["cancel_requested"], true);
    // The best so far became the result.
    let report = app.get(&format!("/v1/jobs/{id}/result")).await.json();
    assert_eq!(report["stop"], "cancelled");
    assert_eq!(report["transformation"], j["best"]["transformation"]);
    let csv = app.get(&format!("/v1/jobs/{id}/result.csv")).await.text;
    let qis: Vec<String> = (0..SLOW_QIS).map(|i| format!("q{i}")).collect();
    let qis: Vec<&str> = qis.iter().map(String::as_str).collect();
    let (rows, _) = check_k_anonymity(&csv, b',', &qis, 3, 3000);
    assert_eq!(rows, 3000);
    // Cancelling again is a conflict.
    app.post_raw(&format!("/v1/jobs/{id}/cancel"), "")
        .await
        .assert_error(409, "job_finished");
    // A late subscriber gets the current state, every improvement so far (the trace of the
    // result) and the final event at once; with Last-Event-ID it gets only the later ones.
    let trace = app.get(&format!("/v1/jobs/{id}/result")).await.json()["trace"]
        .as_array()
        .unwrap()
        .len();
    assert!(trace >= 1);
    let late = app.events(&id, Duration::from_secs(10)).await;
    let late_names: Vec<&str> = late.iter().map(|(n, _)| n.as_str()).collect();
    let mut expected = vec!["progress"];
    expected.extend(std::iter::repeat_n("improvement", trace));
    expected.push("cancelled");
    assert_eq!(late_names, expected);
    let resumed = app
        .events_after(&id, Some(trace - 1), Duration::from_secs(10))
        .await;
    let resumed_names: Vec<&str> = resumed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(resumed_names, ["progress", "improvement", "cancelled"]);
    // Listing and filtering.
    let list = app.get("/v1/jobs?status=cancelled").await.json();
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    let page = app.get("/v1/jobs?limit=1").await.json();
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    let cursor = page["next_cursor"].as_str().unwrap();
    let page2 = app
        .get(&format!("/v1/jobs?limit=1&cursor={cursor}"))
        .await
        .json();
    assert_ne!(page2["items"][0]["id"], page["items"][0]["id"]);
    assert!(page2["next_cursor"].is_null());
    app.stop().await;
}
both_databases!(
    live_events_and_cancel,
    live_events_and_cancel_sqlite,
    live_events_and_cancel_postgres
);

/// Webhooks go to public addresses only unless allowed, and are retried until the receiver
/// accepts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_is_retried_until_delivered() {
    use std::sync::{Arc, Mutex};
    let received: Arc<Mutex<Vec<Value>>> = Arc::default();
    let r2 = received.clone();
    let hook = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |axum::Json(v): axum::Json<Value>| {
            let r2 = r2.clone();
            async move {
                let mut got = r2.lock().unwrap();
                got.push(v);
                // Reject the first attempt.
                if got.len() == 1 {
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    axum::http::StatusCode::OK
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook_addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, hook).await.unwrap() });

    // By default callbacks to loopback or private addresses are refused (server-side request
    // forgery), with the field named.
    let app = spawn_app(Db::Sqlite).await.unwrap();
    let dataset = upload_adult(&app).await;
    let mut spec = adult_job(&dataset, 2, 0.0);
    for url in [
        format!("http://{hook_addr}/hook"),
        "http://localhost:9/x".into(),
        "http://169.254.169.254/latest/meta-data".into(),
    ] {
        spec["callback_url"] = json!(url);
        let e = app
            .post_json("/v1/jobs", &spec)
            .await
            .assert_error(422, "invalid_spec");
        assert_eq!(e["error"]["details"]["field"], "callback_url", "{e}");
        assert!(e["error"]["message"].as_str().unwrap().contains("private"));
    }
    app.stop().await;

    let db = TestDb::new(Db::Sqlite).await.unwrap();
    let mut cfg = config(&db);
    cfg.webhook_allow_private = true;
    let app = spawn_app_with(db, cfg).await;
    let dataset = upload_adult(&app).await;
    spec["dataset_id"] = json!(dataset);
    spec["callback_url"] = json!(format!("http://{hook_addr}/hook"));
    let job = app.create_job(&spec).await;
    let id = job["id"].as_str().unwrap();
    assert_eq!(job["webhook"], "pending");
    let j = app
        .wait_job(id, Duration::from_secs(60), |j| j["webhook"] == "delivered")
        .await;
    assert_eq!(j["status"], "succeeded");
    let got = received.lock().unwrap().clone();
    assert_eq!(got.len(), 2);
    assert_eq!(got[1]["event"], "job.finished");
    assert_eq!(got[1]["job"]["id"], id);
    assert_eq!(got[1]["job"]["status"], "succeeded");

    // A process that dies between the end of a job and the delivery leaves the webhook
    // `pending` without a lease; a restarted process delivers it.
    let db = app.stop().await;
    let store = deid::store::Store::connect(Some(&db.url), &db.dir, 2)
        .await
        .unwrap();
    let job_id = deid::job::id::JobId::from(id);
    store.set_webhook_state(&job_id, "pending").await.unwrap();
    store.release_webhook(&job_id).await.unwrap();
    store.close().await;
    drop(store);
    let mut cfg = config(&db);
    cfg.webhook_allow_private = true;
    let app = spawn_app_with(db, cfg).await;
    let j = app
        .wait_job(id, Duration::from_secs(60), |j| j["webhook"] == "delivered")
        .await;
    assert_eq!(j["status"], "succeeded");
    let got = received.lock().unwrap().clone();
    assert_eq!(got.len(), 3);
    assert_eq!(got[2]["job"]["id"], id);
    app.stop().await;
}

/// Uploads as multipart forms; dataset paging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_upload_and_paging() {
    let app = spawn_app(Db::Sqlite).await.unwrap();
    for i in 0..3 {
        // A form with a text field before the file, written by hand.
        let boundary = "deid-test-boundary";
        let form = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nignored\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f{i}.csv\"\r\n\
             Content-Type: text/csv\r\n\r\na;b\n{i};x\n{i};y\n\r\n--{boundary}--\r\n"
        );
        let r = app
            .send(
                app.request(reqwest::Method::POST, "/v1/datasets?delimiter=;")
                    .header(
                        "content-type",
                        format!("multipart/form-data; boundary={boundary}"),
                    )
                    .body(form),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
        let v = r.json();
        assert_eq!(v["name"], format!("f{i}.csv"));
        assert_eq!(v["rows"], 2);
        assert_eq!(v["columns"][1]["distinct_count"], 2);
    }
    let p1 = app.get("/v1/datasets?limit=2").await.json();
    assert_eq!(p1["items"].as_array().unwrap().len(), 2);
    assert_eq!(p1["items"][0]["name"], "f2.csv", "newest first");
    let cursor = p1["next_cursor"].as_str().unwrap();
    let p2 = app
        .get(&format!("/v1/datasets?limit=2&cursor={cursor}"))
        .await
        .json();
    assert_eq!(p2["items"].as_array().unwrap().len(), 1);
    assert_eq!(p2["items"][0]["name"], "f0.csv");
    assert!(p2["next_cursor"].is_null());
    app.stop().await;
}

/// Hierarchies given as builder specifications are built against the data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builder_hierarchies() {
    let app = spawn_app(Db::Sqlite).await.unwrap();
    let csv = std::fs::read(repo("examples/adult/adult.csv")).unwrap();
    let ds = app.upload(csv, "delimiter=;").await;
    let id = ds["id"].as_str().unwrap();
    let spec = json!({
        "dataset_id": id,
        "attributes": {
            "age": {"type": "quasi_identifying", "hierarchy": {"type": "interval", "width": 10, "levels": [2]}},
            "sex": {"type": "quasi_identifying", "hierarchy": {"type": "suppression"}},
        },
        "privacy": ["k-anonymity(k=10)"],
        "suppression_limit": 0.01,
    });
    let bad = app
        .post_json("/v1/jobs", &json!({"dataset_id": id, "attributes": {"age": {"type": "quasi_identifying", "hierarchy": {"type": "bogus"}}}, "privacy": ["k-anonymity(k=2)"]}))
        .await;
    let v = bad.assert_error(422, "invalid_hierarchy");
    assert_eq!(v["error"]["details"]["field"], "attributes.age.hierarchy");
    let job = app.create_job(&spec).await;
    let jid = job["id"].as_str().unwrap();
    let j = app.wait_job(jid, Duration::from_secs(60), finished).await;
    assert_eq!(j["status"], "succeeded", "{j}");
    let csv = app.get(&format!("/v1/jobs/{jid}/result.csv")).await.text;
    let (rows, _) = check_k_anonymity(&csv, b';', &["age", "sex"], 10, 301);
    assert_eq!(rows, 30162);
    app.stop().await;
}

/// Shutdown ends event streams and hands running jobs back to the queue without counting the
/// attempt; the next start runs them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_jobs_and_ends_streams() {
    let db = TestDb::new(Db::Sqlite).await.unwrap();
    let c = config(&db);
    let app = spawn_app_with(db, c.clone()).await;
    let ds = app.upload(slow_csv(1000), "").await;
    let job = app
        .create_job(&slow_job(ds["id"].as_str().unwrap(), "60s"))
        .await;
    let id = job["id"].as_str().unwrap().to_string();
    app.wait_job(&id, Duration::from_secs(30), |j| j["best"].is_object())
        .await;
    let api = app.api.clone();
    let id2 = id.clone();
    let reader = tokio::spawn(async move { api.events(&id2, Duration::from_secs(60)).await });
    tokio::time::sleep(Duration::from_millis(600)).await;
    let start = std::time::Instant::now();
    let db = app.stop().await;
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "shutdown took {:?}",
        start.elapsed()
    );
    let events = tokio::time::timeout(Duration::from_secs(5), reader)
        .await
        .expect("the event stream ended with the server")
        .unwrap();
    assert!(!events.is_empty());
    assert!(
        events
            .iter()
            .all(|(n, _)| n == "progress" || n == "improvement"),
        "no final event: {events:?}"
    );

    let app = spawn_app_with(db, c).await;
    let j = app
        .wait_job(&id, Duration::from_secs(30), |j| {
            j["status"] == "running" && j["progress"]["checks"].as_u64().unwrap_or(0) > 0
        })
        .await;
    assert_eq!(j["attempts"], 1, "the released attempt does not count: {j}");
    app.post_raw(&format!("/v1/jobs/{id}/cancel"), "").await;
    let j = app.wait_job(&id, Duration::from_secs(30), finished).await;
    assert_eq!(j["status"], "cancelled");
    app.stop().await;
}

/// Uploads report the engine's type detection with a usable hierarchy suggestion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn type_detection_and_suggestions() {
    let app = spawn_app(Db::Sqlite).await.unwrap();
    let mut csv = String::from("zip,born,income,city\n");
    for i in 0..60 {
        csv.push_str(&format!(
            "{:05},{:02}.{:02}.19{},{}.5,{}\n",
            1000 + i * 37,
            1 + i % 28,
            1 + i % 12,
            50 + i % 40,
            i * 100,
            ["Bonn", "Kiel", "Ulm", "NA"][i % 4]
        ));
    }
    let ds = app.upload(csv, "").await;
    let cols = &ds["columns"];
    assert_eq!(cols[0]["detected_type"], "code");
    assert_eq!(cols[0]["code_length"], 5);
    assert_eq!(cols[1]["detected_type"], "date");
    assert_eq!(cols[1]["date_format"], "dd.MM.yyyy");
    assert_eq!(cols[2]["detected_type"], "decimal");
    assert_eq!(cols[3]["detected_type"], "text");
    assert_eq!(cols[3]["distinct_count"], 4);
    // The suggestion works as a job's hierarchy.
    let spec = json!({
        "dataset_id": ds["id"],
        "attributes": {
            "zip": {"type": "quasi_identifying", "hierarchy": cols[0]["suggested_hierarchy"]},
            "income": {"type": "quasi_identifying", "hierarchy": cols[2]["suggested_hierarchy"]},
        },
        "privacy": ["k-anonymity(k=3)"],
    });
    let job = app.create_job(&spec).await;
    let j = app
        .wait_job(
            job["id"].as_str().unwrap(),
            Duration::from_secs(60),
            finished,
        )
        .await;
    assert_eq!(j["status"], "succeeded", "{j}");
    app.stop().await;
}

/// A job with a microaggregated quasi-identifier (age → arithmetic mean, no hierarchy): the
/// classes of the other quasi-identifiers are k-anonymous in result.csv and the age column is
/// constant within each, the mean of the class's original ages.
async fn microaggregation_job(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let dataset = upload_adult(&app).await;
    let mut spec = adult_job(&dataset, 5, 0.05);
    spec["attributes"]["age"] = json!({
        "type": "quasi_identifying",
        "microaggregation": {"function": "arithmetic_mean"}
    });
    let job = app.create_job(&spec).await;
    let id = job["id"].as_str().unwrap();
    let events = app.events(id, Duration::from_secs(120)).await;
    assert_eq!(
        events.last().unwrap().1["status"],
        "succeeded",
        "{events:?}"
    );
    let report = app.get(&format!("/v1/jobs/{id}/result")).await.json();
    assert!(report["transformation"].get("age").is_none(), "{report}");
    assert!(report["output_quality"]["microaggregation"]["loss"].is_number());
    let csv = app.get(&format!("/v1/jobs/{id}/result.csv")).await.text;
    let qis: Vec<&str> = ADULT_QIS.iter().copied().filter(|q| *q != "age").collect();
    let (rows, _) = check_k_anonymity(&csv, b';', &qis, 5, 1508);
    assert_eq!(rows, 30162);
    let original = std::fs::read_to_string(repo("examples/adult/adult.csv")).unwrap();
    let header: Vec<&str> = original
        .lines()
        .next()
        .unwrap()
        .trim_end()
        .split(';')
        .collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let age = col("age");
    let idx: Vec<usize> = qis.iter().map(|q| col(q)).collect();
    let mut classes: HashMap<Vec<String>, (f64, f64, HashSet<String>)> = HashMap::new();
    for (a, b) in original.lines().zip(csv.lines()).skip(1) {
        let a: Vec<&str> = a.trim_end().split(';').collect();
        let b: Vec<&str> = b.trim_end().split(';').collect();
        let key: Vec<String> = idx.iter().map(|&i| b[i].to_string()).collect();
        if key.iter().all(|v| v == "*") {
            assert_eq!(b[age], "*");
            continue;
        }
        let e = classes.entry(key).or_default();
        e.0 += a[age].parse::<f64>().unwrap();
        e.1 += 1.0;
        e.2.insert(b[age].to_string());
    }
    for (sum, count, shown) in classes.values() {
        assert_eq!(shown.len(), 1, "age not constant in a class: {shown:?}");
        let shown: f64 = shown.iter().next().unwrap().parse().unwrap();
        assert!((shown - sum / count).abs() <= 0.005 + 1e-9);
    }
    app.stop().await;
}
both_databases!(
    microaggregation_job,
    microaggregation_job_sqlite,
    microaggregation_job_postgres
);

/// A population-uniqueness job: the result satisfies the model by the report's own estimate of
/// the output, and the report carries population uniqueness before and after.
async fn population_uniqueness_job(kind: Db) {
    let app = spawn_app(kind).await.unwrap();
    let csv = std::fs::read(repo("examples/adult/adult.csv")).unwrap();
    let ds = app.upload(csv, "delimiter=;").await;
    let id = ds["id"].as_str().unwrap();
    let spec = json!({
        "dataset_id": id,
        "attributes": {
            "age": {"type": "quasi_identifying", "hierarchy": {"type": "interval", "width": 5, "levels": [2, 2]}},
            "sex": {"type": "quasi_identifying", "hierarchy": {"type": "suppression"}},
            "race": {"type": "quasi_identifying", "hierarchy": {"type": "suppression"}},
        },
        "privacy": ["population-uniqueness(threshold=0.00005,model=zayatz)"],
        "population": {"sampling_fraction": 0.1},
        "suppression_limit": 0.01,
    });
    let job = app.create_job(&spec).await;
    let jid = job["id"].as_str().unwrap();
    let j = app.wait_job(jid, Duration::from_secs(60), finished).await;
    assert_eq!(j["status"], "succeeded", "{j}");
    let report = app.get(&format!("/v1/jobs/{jid}/result")).await.json();
    let input = &report["risk"]["input"]["population_uniqueness"];
    let output = &report["risk"]["output"]["population_uniqueness"];
    assert_eq!(input["population"], 301_620);
    assert!(
        input["zayatz"]["share"].as_f64().unwrap() > 0.00005,
        "{input}"
    );
    let share = output["zayatz"]["share"].as_f64().unwrap();
    let uniques = report["risk"]["output"]["sample_uniques"].as_u64().unwrap();
    assert!(
        (share > 0.0 && share <= 0.00005) || uniques == 0,
        "{output}"
    );
    for e in ["pitman", "zayatz", "snb", "dankar"] {
        assert!(output[e]["available"].is_boolean(), "{e}: {output}");
    }
    app.stop().await;
}

both_databases!(
    population_uniqueness_job,
    population_uniqueness_job_sqlite,
    population_uniqueness_job_postgres
);

/// `POST /v1/datasets/{id}/risk`: the risks of the stored data as they are, the same as
/// `deid risk` on the file; bad requests are 422 naming the field, unknown datasets 404.
async fn dataset_risk_analysis(kind: Db) {
    let app = spawn_app(kind).await.unwrap();
    let csv = std::fs::read(repo("examples/adult/adult.csv")).unwrap();
    let ds = app.upload(csv, "delimiter=;").await;
    let id = ds["id"].as_str().unwrap();
    let request = json!({
        "quasi_identifiers": ["age", "sex", "race"],
        "population": {"region": "usa"},
        "risk_threshold": 0.1,
    });
    let r = app
        .post_json(&format!("/v1/datasets/{id}/risk"), &request)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let http = r.json();
    let input = &http["input"];
    assert_eq!(input["risk_threshold"], 0.1);
    assert_eq!(input["population_uniqueness"]["population"], 317_238_626);
    assert_eq!(input["quasi_identifiers"].as_array().unwrap().len(), 7);
    // The classes add up to the rows.
    assert_eq!(
        (input["avg_class_size"].as_f64().unwrap() * input["classes"].as_f64().unwrap()).round(),
        30162.0
    );
    // The command line gives the same answer for the file.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_deid"))
        .args(["risk", "--input"])
        .arg(repo("examples/adult/adult.csv"))
        .args([
            "--delimiter",
            ";",
            "--quasi-identifiers",
            "age,sex,race",
            "--population-region",
            "usa",
            "--risk-threshold",
            "0.1",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let cli: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cli, http);
    for (body, field) in [
        (json!({"quasi_identifiers": []}), "quasi_identifiers"),
        (
            json!({"quasi_identifiers": ["agee"]}),
            "quasi_identifiers[0]",
        ),
        (
            json!({"quasi_identifiers": ["age"], "population": {"size": 10}}),
            "population.size",
        ),
        (
            json!({"quasi_identifiers": ["age"], "population": {"region": "mars"}}),
            "population.region",
        ),
        (
            json!({"quasi_identifiers": ["age"], "risk_threshold": 2}),
            "risk_threshold",
        ),
        (json!({"quasi_identifiers": ["age"], "k": 2}), "k"),
    ] {
        let r = app
            .post_json(&format!("/v1/datasets/{id}/risk"), &body)
            .await;
        let v = r.assert_error(422, "invalid_spec");
        assert_eq!(v["error"]["details"]["field"], field, "{v}");
    }
    let r = app
        .post_json(
            "/v1/datasets/00000000-0000-7000-8000-000000000000/risk",
            &request,
        )
        .await;
    r.assert_error(404, "dataset_not_found");
    app.stop().await;
}

both_databases!(
    dataset_risk_analysis,
    dataset_risk_analysis_sqlite,
    dataset_risk_analysis_postgres
);
