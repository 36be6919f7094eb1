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
    let body = app
        .get(&format!("/v1/jobs/{id}/result.csv"))
        .await
        .assert_error(409, "result_not_available");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no CSV") && message.contains("/result"),
        "{body}"
    );
    // `{}` names the missing field, as the message does.
    let body = app
        .post_json(&format!("/v1/datasets/{dataset}/risk"), &json!({}))
        .await
        .assert_error(422, "invalid_spec");
    assert_eq!(
        body["error"]["details"]["field"], "quasi_identifiers",
        "{body}"
    );
    app.stop().await;
}
both_databases!(risk_task, risk_task_sqlite, risk_task_postgres);

/// A risk job shows its phase and elapsed time while it runs, and a cancel stops the analysis:
/// the job ends `cancelled` without a result (issue 27 item 2: the cancel was ignored, the job
/// ended `cancelled` with the full result, and showed `elapsed_ms: 0` while running).
async fn risk_job_cancel(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let ds = app.upload(slow_risk_csv(), "name=slow").await;
    let qi = json!({"type": "quasi_identifying"});
    let attributes: serde_json::Map<String, Value> =
        (0..10).map(|i| (format!("c{i}"), qi.clone())).collect();
    let spec = json!({
        "dataset_id": ds["id"],
        "task": "risk",
        "attributes": attributes,
        "qi_combinations": "all",
    });
    let job = app.create_job(&spec).await;
    let id = job["id"].as_str().unwrap();
    let running = app
        .wait_job(id, Duration::from_secs(30), |j| {
            j["progress"]["phase"] == "analysing" || finished(j)
        })
        .await;
    assert_eq!(running["status"], "running", "{running}");
    let running = app
        .wait_job(id, Duration::from_secs(30), |j| {
            j["progress"]["elapsed_ms"].as_u64().unwrap_or(0) > 0 || finished(j)
        })
        .await;
    assert_eq!(running["status"], "running", "{running}");
    let r = app.post_raw(&format!("/v1/jobs/{id}/cancel"), "").await;
    assert_eq!(r.status, 202, "{}", r.text);
    let j = app.wait_job(id, Duration::from_secs(30), finished).await;
    assert_eq!(j["status"], "cancelled", "{j}");
    app.get(&format!("/v1/jobs/{id}/result"))
        .await
        .assert_error(409, "result_not_available");
    app.stop().await;
}
both_databases!(
    risk_job_cancel,
    risk_job_cancel_sqlite,
    risk_job_cancel_postgres
);

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
        // One readable sentence: no run of blanks (from a broken line continuation).
        let message = e["error"]["message"].as_str().unwrap();
        assert!(!message.contains("  "), "{changes}: {message}");
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

/// adult with a column `in_study` (`yes` for every third record, `no` otherwise), uploaded with
/// the hierarchies of `ADULT_QIS`; returns the dataset id and the released records' numbers.
async fn upload_adult_with_subset(app: &TestApp) -> (String, Vec<usize>) {
    let text = std::fs::read_to_string(repo("examples/adult/adult.csv")).unwrap();
    let mut csv = String::new();
    let mut released = Vec::new();
    for (i, line) in text.lines().enumerate() {
        csv.push_str(line);
        if i == 0 {
            csv.push_str(";in_study\n");
        } else {
            let yes = i % 3 == 1;
            if yes {
                released.push(i);
            }
            csv.push_str(if yes { ";yes\n" } else { ";no\n" });
        }
    }
    let ds = app.upload(csv, "delimiter=;&name=adult-study").await;
    let id = ds["id"].as_str().unwrap().to_string();
    for q in ADULT_QIS {
        let h = std::fs::read_to_string(repo(&format!("examples/adult/adult_hierarchy_{q}.csv")))
            .unwrap();
        app.put_hierarchy(&id, q, &h).await;
    }
    (id, released)
}

/// δ-presence and k-map with the dataset as the population, on both databases: the research
/// subset given by a column and by record numbers gives the same result; only the subset is
/// written, its classes stand for at least k records of the whole dataset and make up at most
/// δmax of them (recounted here from the input and the output); the report gives both sizes and
/// the journalist risk against the population table. Bad subsets are 422s naming the field.
async fn research_subset_job(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let (dataset, released) = upload_adult_with_subset(&app).await;
    let mut spec = adult_job(&dataset, 5, 0.05);
    spec["privacy"] = json!([
        {"model": "delta-presence", "delta_min": 0, "delta_max": 0.5},
        "k-map(k=10)"
    ]);
    spec["time_limit"] = json!("20s");
    spec["attributes"]["in_study"] = json!({"type": "identifying"});
    let e = app
        .post_json("/v1/jobs", &spec)
        .await
        .assert_error(422, "invalid_spec");
    assert_eq!(e["error"]["details"]["field"], "research_subset", "{e}");

    let mut results = Vec::new();
    for subset in [
        json!({"column": "in_study", "value": "yes"}),
        json!({"rows": released}),
    ] {
        spec["research_subset"] = subset;
        let job = ended(&app, &app.create_job(&spec).await).await;
        assert_eq!(job["status"], "succeeded", "{job}");
        let id = job["id"].as_str().unwrap();
        let report = app.get(&format!("/v1/jobs/{id}/result")).await.json();
        assert_eq!(report["rows"], released.len(), "{report}");
        assert_eq!(report["research_subset"]["records"], released.len());
        assert_eq!(report["research_subset"]["population_records"], 30162);
        assert_eq!(
            report["risk"]["output"]["attacker_models"]["population_classes"],
            "population_table"
        );
        let csv = app.get(&format!("/v1/jobs/{id}/result.csv")).await.text;
        let max = (released.len() as f64 * 0.05) as usize;
        let (rows, _) = check_k_anonymity(&csv, b';', &ADULT_QIS, 1, max);
        assert_eq!(rows, released.len());
        check_population_classes(&csv, &report, 10, 0.5);
        results.push((report["transformation"].clone(), csv));
    }
    assert_eq!(results[0], results[1]);

    for (subset, field) in [
        (json!({"column": "nope"}), "research_subset.column"),
        (json!({"column": "sex"}), "research_subset.column"),
        (
            json!({"column": "sex", "value": "Other"}),
            "research_subset",
        ),
        (json!({"rows": [0]}), "research_subset.rows[0]"),
        (json!({"rows": [1, 30163]}), "research_subset.rows[1]"),
        (json!({"rows": [4, 4]}), "research_subset.rows[1]"),
        (json!({"rows": [1], "column": "sex"}), "research_subset"),
        (json!({"value": "yes"}), "research_subset.value"),
        (json!({"rows": "all"}), "research_subset.rows"),
    ] {
        spec["research_subset"] = subset.clone();
        let e = app
            .post_json("/v1/jobs", &spec)
            .await
            .assert_error(422, "invalid_spec");
        assert_eq!(e["error"]["details"]["field"], field, "{subset}: {e}");
    }
    spec["research_subset"] = json!({"column": "in_study"});
    spec["local"] = json!({});
    let e = app
        .post_json("/v1/jobs", &spec)
        .await
        .assert_error(422, "invalid_spec");
    assert_eq!(e["error"]["details"]["field"], "privacy[0]", "{e}");
    spec["privacy"] = json!(["k-anonymity(k=2)"]);
    let e = app
        .post_json("/v1/jobs", &spec)
        .await
        .assert_error(422, "invalid_spec");
    assert_eq!(e["error"]["details"]["field"], "research_subset", "{e}");
    app.stop().await;
}
both_databases!(
    research_subset_job,
    research_subset_job_sqlite,
    research_subset_job_postgres
);

/// Recounts, from adult's file and its hierarchies, how many records of the whole dataset each
/// published class of `csv` stands for (at the report's transformation): at least `k`, and the
/// class's published records at most `delta_max` of them.
fn check_population_classes(csv: &str, report: &Value, k: usize, delta_max: f64) {
    use std::collections::HashMap;
    let read = |text: &str| -> Vec<Vec<String>> {
        csv::ReaderBuilder::new()
            .delimiter(b';')
            .has_headers(false)
            .flexible(true)
            .from_reader(text.as_bytes())
            .records()
            .map(|r| r.unwrap().iter().map(String::from).collect())
            .collect()
    };
    let input = read(&std::fs::read_to_string(repo("examples/adult/adult.csv")).unwrap());
    let output = read(csv);
    // Per quasi-identifier: input column, output column, level, value → labels.
    type Column = (usize, usize, usize, HashMap<String, Vec<String>>);
    let columns: Vec<Column> = ADULT_QIS
        .iter()
        .map(|q| {
            let level = report["transformation"][q].as_u64().unwrap() as usize;
            let h =
                std::fs::read_to_string(repo(&format!("examples/adult/adult_hierarchy_{q}.csv")))
                    .unwrap();
            let map = read(&h).into_iter().map(|r| (r[0].clone(), r)).collect();
            let i = input[0].iter().position(|c| c == q).unwrap();
            let o = output[0].iter().position(|c| c == q).unwrap();
            (i, o, level, map)
        })
        .collect();
    let mut population: HashMap<Vec<String>, usize> = HashMap::new();
    for row in &input[1..] {
        let key: Vec<String> = columns
            .iter()
            .map(|(i, _, level, map)| map[&row[*i]][*level].clone())
            .collect();
        *population.entry(key).or_default() += 1;
    }
    let mut published: HashMap<Vec<String>, usize> = HashMap::new();
    for row in &output[1..] {
        let key: Vec<String> = columns.iter().map(|(_, o, _, _)| row[*o].clone()).collect();
        if !key.iter().all(|v| v == "*") {
            *published.entry(key).or_default() += 1;
        }
    }
    assert!(!published.is_empty());
    for (key, count) in published {
        let big = population[&key];
        assert!(big >= k, "{key:?}: {big} records in the population");
        assert!(
            count as f64 / big as f64 <= delta_max,
            "{key:?}: δ = {count}/{big}"
        );
    }
}

/// Formula injection (issue 27 item 5): result.csv is faithful by default; the download option
/// `?neutralize_formulas=true` and the job option `neutralize_formulas` give every cell and
/// column name starting with `=`, `+`, `-`, `@` a leading `'`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn formulas_are_neutralized_on_request() {
    let app = spawn_app(Db::Sqlite).await.unwrap();
    let csv = "\"=HYPERLINK(\"\"http://x\"\")\",g\n=1+2,a\n-3,a\n@x,a\nplain,a\n";
    let ds = app.upload(csv, "delimiter=,").await;
    let spec = |neutralize: bool| {
        json!({
            "dataset_id": ds["id"],
            "attributes": {"g": {"type": "quasi_identifying", "hierarchy": {"csv": "a;*\n"}}},
            "privacy": ["k-anonymity(k=2)"],
            "neutralize_formulas": neutralize,
        })
    };
    let faithful = "\"=HYPERLINK(\"\"http://x\"\")\",g\n=1+2,a\n-3,a\n@x,a\nplain,a\n";
    let safe = "\"'=HYPERLINK(\"\"http://x\"\")\",g\n'=1+2,a\n'-3,a\n'@x,a\nplain,a\n";
    for (neutralize, stored) in [(false, faithful), (true, safe)] {
        let job = app.create_job(&spec(neutralize)).await;
        let job = ended(&app, &job).await;
        assert_eq!(job["status"], "succeeded", "{job}");
        let id = job["id"].as_str().unwrap();
        let plain = app.get(&format!("/v1/jobs/{id}/result.csv")).await;
        assert_eq!((plain.status, plain.text.as_str()), (200, stored));
        let download = app
            .get(&format!(
                "/v1/jobs/{id}/result.csv?neutralize_formulas=true"
            ))
            .await;
        assert_eq!((download.status, download.text.as_str()), (200, safe));
        app.get(&format!(
            "/v1/jobs/{id}/result.csv?neutralize_formulas=maybe"
        ))
        .await
        .assert_error(400, "invalid_query");
    }
    app.stop().await;
}

/// Records per value of `column` in a `;`-separated CSV.
fn value_counts(csv: &str, column: &str) -> std::collections::HashMap<String, u64> {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(b';')
        .from_reader(csv.as_bytes());
    let at = reader
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == column)
        .unwrap();
    let mut out = std::collections::HashMap::new();
    for record in reader.records() {
        *out.entry(record.unwrap()[at].to_string()).or_default() += 1;
    }
    out
}

/// The job view names the algorithm; the report lists the candidates (best first, led by the
/// result, at most `candidates`) and the values before and after (checked against counts of the
/// input and the output made here); the stored specification, submitted as an evaluate job with
/// a candidate's levels, releases that candidate (k-anonymous by an independent check).
async fn candidates_and_values(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let dataset = upload_adult(&app).await;
    let k = 5;
    let mut spec = adult_job(&dataset, k, 0.02);
    spec["algorithm"] = json!("flash");
    spec["candidates"] = json!(5);
    let job = app.create_job(&spec).await;
    assert_eq!(job["algorithm"], "flash");
    let job = ended(&app, &job).await;
    assert_eq!(job["status"], "succeeded", "{job}");
    let id = job["id"].as_str().unwrap();
    let listed = app.get("/v1/jobs?limit=100").await.json();
    let item = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == id);
    assert_eq!(item.unwrap()["algorithm"], "flash");
    let report = app.get(&format!("/v1/jobs/{id}/result")).await.json();
    let candidates = report["candidates"].as_array().unwrap();
    assert!((2..=5).contains(&candidates.len()), "{}", candidates.len());
    assert_eq!(candidates[0]["levels"], report["levels"]);
    assert_eq!(candidates[0]["transformation"], report["transformation"]);
    for w in candidates.windows(2) {
        assert!(w[0]["score"].as_f64() <= w[1]["score"].as_f64());
        assert_ne!(w[0]["levels"], w[1]["levels"]);
    }
    let order: Vec<&str> = (report["quasi_identifiers"].as_array().unwrap().iter())
        .map(|q| q.as_str().unwrap())
        .collect();
    assert_eq!(order.len(), ADULT_QIS.len());

    // Values before (from the input) and after (from the output) of every quasi-identifier.
    let input =
        String::from_utf8(std::fs::read(repo("examples/adult/adult.csv")).unwrap()).unwrap();
    let output = app.get(&format!("/v1/jobs/{id}/result.csv")).await.text;
    let suppressed = report["suppressed_rows"].as_u64().unwrap();
    for q in ADULT_QIS {
        let values = &report["values"][q];
        for (side, counts) in [
            ("before", value_counts(&input, q)),
            ("after", value_counts(&output, q)),
        ] {
            let d = &values[side];
            let top = d["top"].as_array().unwrap();
            assert!(!top.is_empty() && top.len() <= 10, "{q} {side}");
            let mut listed = 0;
            for v in top {
                let mut expected = counts[v["value"].as_str().unwrap()];
                if side == "after" && v["value"] == "*" {
                    expected -= suppressed; // suppressed records show * too
                }
                assert_eq!(v["records"], expected, "{q} {side} {v}");
                listed += expected;
            }
            let all: u64 = counts.values().sum();
            let masked = if side == "after" { suppressed } else { 0 };
            assert_eq!(
                listed + d["other_records"].as_u64().unwrap() + masked,
                all,
                "{q} {side}"
            );
        }
        assert_eq!(values["after"]["suppressed_records"], suppressed);
        assert!(values["before"]["suppressed_records"].is_null());
    }

    // The stored specification as an evaluate job with the third candidate's levels.
    let stored = app.get(&format!("/v1/jobs/{id}/spec")).await.json();
    assert_eq!(stored["candidates"], 5);
    let chosen = &candidates[2];
    let mut evaluate = stored.clone();
    evaluate["task"] = json!("evaluate");
    evaluate["levels"] = chosen["transformation"].clone();
    let job = app.create_job(&evaluate).await;
    assert!(job["algorithm"].is_null(), "{job}");
    let job = ended(&app, &job).await;
    assert_eq!(job["status"], "succeeded", "{job}");
    let eid = job["id"].as_str().unwrap();
    let evaluation = app.get(&format!("/v1/jobs/{eid}/result")).await.json();
    assert_eq!(evaluation["transformation"], chosen["transformation"]);
    assert_eq!(evaluation["suppressed_rows"], chosen["suppressed_rows"]);
    assert_eq!(evaluation["utility"], chosen["utility"]);
    let csv = app.get(&format!("/v1/jobs/{eid}/result.csv")).await.text;
    let max = (30162.0 * 0.02) as usize;
    let (_, suppressed) = check_k_anonymity(&csv, b';', &ADULT_QIS, k as usize, max);
    assert_eq!(
        suppressed as u64,
        chosen["suppressed_rows"].as_u64().unwrap()
    );

    // Unknown job: 404; too many candidates: 422 naming the field.
    let r = app
        .get("/v1/jobs/01a00000-0000-7000-8000-000000000000/spec")
        .await;
    assert_eq!(r.status, 404);
    spec["candidates"] = json!(101);
    let r = app.post_json("/v1/jobs", &spec).await;
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["error"]["details"]["field"], "candidates");
}

both_databases!(
    candidates_and_values,
    candidates_and_values_sqlite,
    candidates_and_values_postgres
);
