//! Hierarchy builder specifications through the API, on both databases: previews (JSON and CSV)
//! compared with the engine's builders, errors naming the offending value, specifications stored
//! per column and used by jobs (result checked row by row against the specification and for
//! k-anonymity), persistence across a restart, and columns whose values were not kept.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use deid_engine::{Hierarchy, HierarchySpec};
use serde_json::{Value, json};

use crate::both_databases;
use crate::helpers::*;

/// The distinct values of `column` in a CSV with a header, in order of first appearance.
fn distinct(csv: &str, delimiter: u8, column: &str) -> Vec<String> {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .from_reader(csv.as_bytes());
    let idx = reader
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == column)
        .unwrap();
    let mut seen = HashSet::new();
    reader
        .records()
        .map(|r| r.unwrap()[idx].to_string())
        .filter(|v| seen.insert(v.clone()))
        .collect()
}

/// What the engine's builder produces for `spec` on `values`.
fn engine_table(spec: &Value, column: &str, values: &[String]) -> Hierarchy {
    let spec: HierarchySpec = serde_json::from_value(spec.clone()).unwrap();
    spec.build_values(column, values).unwrap()
}

fn rows_of(v: &Value) -> Vec<Vec<String>> {
    serde_json::from_value(v["rows"].clone()).unwrap()
}

impl ApiClient {
    async fn preview(
        &self,
        dataset: &str,
        column: &str,
        spec: &Value,
        query: &str,
        accept: Option<&str>,
    ) -> Reply {
        let mut r = self
            .request(
                reqwest::Method::POST,
                &format!("/v1/datasets/{dataset}/hierarchies/{column}/preview{query}"),
            )
            .header("content-type", "application/json")
            .body(spec.to_string());
        if let Some(a) = accept {
            r = r.header("accept", a);
        }
        self.send(r).await
    }

    async fn put_spec(&self, dataset: &str, column: &str, spec: &Value) -> Reply {
        self.send(
            self.request(
                reqwest::Method::PUT,
                &format!("/v1/datasets/{dataset}/hierarchies/{column}"),
            )
            .header("content-type", "application/json")
            .body(spec.to_string()),
        )
        .await
    }

    async fn get_hierarchy(&self, dataset: &str, column: &str, accept: &str) -> Reply {
        self.send(
            self.request(
                reqwest::Method::GET,
                &format!("/v1/datasets/{dataset}/hierarchies/{column}"),
            )
            .header("accept", accept),
        )
        .await
    }
}

/// Parses an interval label `[lo, hi[` into its bounds.
fn bounds(label: &str) -> (i64, i64) {
    let inner = label
        .strip_prefix('[')
        .and_then(|l| l.strip_suffix('['))
        .unwrap_or_else(|| panic!("not an interval: {label}"));
    let (lo, hi) = inner.split_once(", ").unwrap();
    (lo.parse().unwrap(), hi.parse().unwrap())
}

/// Every label has one parent on the next level.
fn assert_monotone(rows: &[Vec<String>]) {
    for level in 0..rows[0].len() - 1 {
        let mut parent = HashMap::new();
        for r in rows {
            let p = parent.entry(&r[level]).or_insert(&r[level + 1]);
            assert_eq!(*p, &r[level + 1], "label {} has two parents", r[level]);
        }
    }
}

async fn previews(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let adult = std::fs::read_to_string(repo("examples/adult/adult.csv")).unwrap();
    let ds = app.upload(adult.clone(), "delimiter=;&name=adult").await;
    let id = ds["id"].as_str().unwrap();
    let ages = distinct(&adult, b';', "age");
    assert_eq!(ages.len(), 72);

    // Interval: JSON by default, equal to the engine's table, with its shares.
    let spec = json!({"type": "interval", "width": 5, "levels": [2, 2, 2]});
    let r = app.preview(id, "age", &spec, "", None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let v = r.json();
    let expected = engine_table(&spec, "age", &ages);
    assert_eq!(v["column"], "age");
    assert_eq!(v["kind"], "builder");
    assert_eq!(v["spec"]["type"], "interval");
    assert_eq!(v["spec"]["width"], 5);
    assert_eq!(v["levels"], 6, "value, intervals, three groupings, *");
    let rows = rows_of(&v);
    assert_eq!(rows, expected.rows());
    let shares: Vec<Vec<f64>> = serde_json::from_value(v["shares"].clone()).unwrap();
    for (got, want) in shares
        .iter()
        .flatten()
        .zip(expected.shares().unwrap().iter().flatten())
    {
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }
    // Independently: one row per distinct age, each inside its intervals, nested, monotone.
    let leaves: HashSet<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(leaves, ages.iter().map(String::as_str).collect());
    for r in &rows {
        let age: i64 = r[0].parse().unwrap();
        let (lo, hi) = bounds(&r[1]);
        assert!(lo <= age && age < hi && hi - lo == 5, "{r:?}");
        for l in 2..5 {
            let (plo, phi) = bounds(&r[l]);
            let (clo, chi) = bounds(&r[l - 1]);
            assert!(
                plo <= clo && chi <= phi && phi - plo == 5 << (l - 1),
                "{r:?}"
            );
        }
        assert_eq!(r[5], "*");
    }
    assert_monotone(&rows);
    assert!(
        shares
            .iter()
            .all(|s| s.windows(2).all(|w| w[0] <= w[1]) && s[5] == 1.0)
    );

    // The same as ARX CSV: by Accept, or by ?format=csv with another delimiter.
    let r = app.preview(id, "age", &spec, "", Some("text/csv")).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    assert_eq!(r.headers["x-deid-delimiter"], ";");
    assert_eq!(r.text, expected.to_csv(b';'));
    assert_eq!(r.text.lines().count(), 72);
    let r = app
        .preview(
            id,
            "age",
            &spec,
            "?format=csv&delimiter=,",
            Some("application/json"),
        )
        .await;
    assert_eq!(r.text, expected.to_csv(b','));
    assert_eq!(r.headers["x-deid-delimiter"], ",");

    // Masking, on codes of another dataset.
    let mut rng = Rng::new(3);
    let mut data = String::from("zip,born,disease\n");
    for i in 0..300 {
        let zip = 81000 + rng.below(700);
        let born = format!(
            "{:02}.{:02}.{}",
            1 + rng.below(28),
            1 + rng.below(12),
            1950 + rng.below(50)
        );
        let born = if i % 50 == 7 {
            "unknown".to_string()
        } else {
            born
        };
        data.push_str(&format!("{zip},{born},d{}\n", rng.below(4)));
    }
    data.push_str("81667,01.02.1970,d1\n");
    let ds2 = app.upload(data.clone(), "name=zips").await;
    let id2 = ds2["id"].as_str().unwrap();
    let zips = distinct(&data, b',', "zip");
    let spec = json!({"type": "masking"});
    let v = app.preview(id2, "zip", &spec, "", None).await.json();
    let expected = engine_table(&spec, "zip", &zips);
    let rows = rows_of(&v);
    assert_eq!(rows, expected.rows());
    assert_eq!(v["levels"], 6);
    assert!(
        rows.contains(
            &["81667", "8166*", "816**", "81***", "8****", "*****"]
                .map(String::from)
                .to_vec()
        )
    );
    assert_eq!(rows.len(), zips.len());
    assert_monotone(&rows);
    let r = app.preview(id2, "zip", &spec, "?format=csv", None).await;
    assert_eq!(r.text, expected.to_csv(b';'));

    // Dates: the value that does not parse is named, until it is declared missing.
    let spec =
        json!({"type": "date", "format": "dd.MM.yyyy", "levels": ["month", "year", "decade"]});
    let v = app
        .preview(id2, "born", &spec, "", None)
        .await
        .assert_error(422, "invalid_spec");
    assert_eq!(v["error"]["details"]["field"], "format", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'unknown'"),
        "{v}"
    );
    let spec = json!({"type": "date", "format": "dd.MM.yyyy", "levels": ["month", "year", "decade"], "missing": ["unknown"]});
    let v = app.preview(id2, "born", &spec, "", None).await.json();
    let rows = rows_of(&v);
    assert_eq!(
        rows,
        engine_table(&spec, "born", &distinct(&data, b',', "born")).rows()
    );
    assert!(
        rows.contains(
            &["01.02.1970", "1970-02", "1970", "1970-1979", "*"]
                .map(String::from)
                .to_vec()
        )
    );
    assert!(
        rows.contains(
            &["unknown", "unknown", "unknown", "unknown", "*"]
                .map(String::from)
                .to_vec()
        )
    );

    // Invalid specifications: 422 naming the field and the value.
    let invalid = |spec: Value, field: &'static str, needles: &'static [&'static str]| {
        let app = &app;
        async move {
            let v = app
                .preview(id, "age", &spec, "", None)
                .await
                .assert_error(422, "invalid_spec");
            assert_eq!(v["error"]["details"]["field"], field, "{v}");
            let message = v["error"]["message"].as_str().unwrap();
            for n in needles {
                assert!(message.contains(n), "{n:?} not in {message}");
            }
        }
    };
    invalid(
        json!({"type": "interval", "intervals": [{"from": 0, "to": 50}, {"from": 40, "to": 100}]}),
        "intervals[1]",
        &["[40, 100[", "overlaps", "[0, 50["],
    )
    .await;
    invalid(
        json!({"type": "interval", "intervals": [{"from": 0, "to": 50, "label": "young"}, {"from": 50, "to": 60}]}),
        "intervals",
        &["outside the intervals [0, 60[", "value '"],
    )
    .await;
    invalid(
        json!({"type": "interval", "width": 10, "max": 80}),
        "max",
        &["above the maximum 80"],
    )
    .await;
    invalid(
        json!({"type": "interval", "width": -1}),
        "width",
        &["width -1"],
    )
    .await;
    invalid(
        json!({"type": "intervals", "width": 10}),
        "$",
        &["intervals"],
    )
    .await;
    invalid(json!({"type": "interval", "widht": 10}), "$", &["widht"]).await;
    invalid(json!([1, 2]), "$", &[]).await;

    // Malformed JSON, unknown dataset and column, bad query.
    app.send(
        app.request(
            reqwest::Method::POST,
            &format!("/v1/datasets/{id}/hierarchies/age/preview"),
        )
        .body("{\"type\": "),
    )
    .await
    .assert_error(400, "malformed_json");
    let spec = json!({"type": "suppression"});
    let v = app
        .preview(id, "height", &spec, "", None)
        .await
        .assert_error(404, "column_not_found");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("education")
    );
    app.preview("nope", "age", &spec, "", None)
        .await
        .assert_error(404, "dataset_not_found");
    app.preview(id, "age", &spec, "?format=xml", None)
        .await
        .assert_error(400, "invalid_query");

    // ?limit= cuts long tables; the total is reported.
    let v = app.preview(id, "age", &spec, "?limit=5", None).await.json();
    assert_eq!(v["total_rows"], 72);
    assert_eq!(v["rows"].as_array().unwrap().len(), 5);
    assert_eq!(v["shares"].as_array().unwrap().len(), 5);
    let full = app.preview(id, "age", &spec, "", None).await.json();
    assert_eq!(
        v["rows"].as_array().unwrap()[..],
        full["rows"].as_array().unwrap()[..5]
    );
    assert_eq!(full["total_rows"], 72);
    let r = app
        .preview(id, "age", &spec, "?format=csv&limit=7", None)
        .await;
    assert_eq!(r.text.lines().count(), 7);
    assert_eq!(r.headers["x-deid-total-rows"], "72");
    let r = app
        .preview(id, "age", &spec, "?limit=1000", None)
        .await
        .json();
    assert_eq!(r["rows"].as_array().unwrap().len(), 72);
    let e = app
        .preview(id, "age", &spec, "?limit=0", None)
        .await
        .assert_error(400, "invalid_query");
    assert!(e["error"]["message"].as_str().unwrap().contains("limit"));

    // Nothing was stored.
    let ds = app.get(&format!("/v1/datasets/{id}")).await.json();
    assert_eq!(ds["hierarchies"], json!({}));
    app.get(&format!("/v1/datasets/{id}/hierarchies/age"))
        .await
        .assert_error(404, "hierarchy_not_found");
    app.stop().await;
}
both_databases!(previews, previews_sqlite, previews_postgres);

async fn stored_specs(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let adult = std::fs::read_to_string(repo("examples/adult/adult.csv")).unwrap();
    let ds = app.upload(adult.clone(), "delimiter=;&name=adult").await;
    let id = ds["id"].as_str().unwrap().to_string();
    let ages = distinct(&adult, b';', "age");
    let spec = json!({"type": "interval", "width": 10, "levels": [2], "top_coding": 80});
    let expected = engine_table(&spec, "age", &ages);

    // Age as a specification, the other quasi-identifiers as ARX tables (PUT CSV still works).
    let r = app.put_spec(&id, "age", &spec).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.json(),
        json!({"column": "age", "kind": "builder", "levels": 4, "rows": 72})
    );
    for q in ADULT_QIS.iter().filter(|q| **q != "age") {
        let h = std::fs::read_to_string(repo(&format!("examples/adult/adult_hierarchy_{q}.csv")))
            .unwrap();
        app.put_hierarchy(&id, q, &h).await;
    }
    // A specification that does not fit the data is refused and leaves the stored one alone.
    let v = app
        .put_spec(
            &id,
            "age",
            &json!({"type": "interval", "width": 10, "min": 20}),
        )
        .await
        .assert_error(422, "invalid_spec");
    assert_eq!(v["error"]["details"]["field"], "min");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("below the minimum 20")
    );
    app.put_spec(
        &id,
        "age",
        &json!({"type": "interval", "width": 10, "delimiter": ";"}),
    )
    .await
    .assert_error(422, "invalid_spec");
    app.put_spec(&id, "height", &spec)
        .await
        .assert_error(404, "column_not_found");
    // Without the JSON content type the body is a table; the error says what was meant.
    let v = app
        .send(
            app.request(
                reqwest::Method::PUT,
                &format!("/v1/datasets/{id}/hierarchies/age"),
            )
            .header("content-type", "application/x-www-form-urlencoded")
            .body(spec.to_string()),
        )
        .await
        .assert_error(422, "hierarchy_missing_values");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Content-Type: application/json")
    );
    app.send(
        app.request(
            reqwest::Method::PUT,
            &format!("/v1/datasets/{id}/hierarchies/age"),
        )
        .header("content-type", "application/json")
        .body("{"),
    )
    .await
    .assert_error(400, "malformed_json");

    let check_stored = |app: ApiClient| {
        let (id, spec, expected) = (id.clone(), spec.clone(), expected.clone());
        async move {
            let ds = app.get(&format!("/v1/datasets/{id}")).await.json();
            assert_eq!(ds["hierarchies"]["age"], 4);
            assert_eq!(ds["hierarchies"]["sex"], 2);
            assert_eq!(ds["hierarchy_kinds"]["age"], "builder");
            assert_eq!(ds["hierarchy_kinds"]["sex"], "csv");
            // The table as CSV, and the specification as JSON.
            let r = app.get_hierarchy(&id, "age", "text/csv").await;
            assert_eq!(r.status, 200, "{}", r.text);
            assert_eq!(r.text, expected.to_csv(b';'));
            assert_eq!(r.headers["x-deid-delimiter"], ";");
            assert_eq!(r.headers["x-deid-hierarchy-kind"], "builder");
            let v = app
                .get_hierarchy(&id, "age", "application/json")
                .await
                .json();
            assert_eq!(v["kind"], "builder");
            assert_eq!(v["levels"], 4);
            assert_eq!(rows_of(&v), expected.rows());
            for (k, want) in spec.as_object().unwrap() {
                assert_eq!(&v["spec"][k], want, "{v}");
            }
            // An uploaded table comes back as uploaded, or as JSON without a specification.
            let r = app.get(&format!("/v1/datasets/{id}/hierarchies/sex")).await;
            assert_eq!(
                r.text,
                std::fs::read_to_string(repo("examples/adult/adult_hierarchy_sex.csv")).unwrap()
            );
            let v = app
                .get(&format!("/v1/datasets/{id}/hierarchies/sex?format=json"))
                .await
                .json();
            assert_eq!(v["kind"], "csv");
            assert!(v.get("spec").is_none());
            assert_eq!(v["rows"][0], json!(["Male", "*"]));
        }
    };
    check_stored(app.api.clone()).await;

    // A job with the stored hierarchies: age is generalized by the specification.
    let (k, limit) = (5, 0.02);
    let job = app.create_job(&adult_job(&id, k, limit)).await;
    let jid = job["id"].as_str().unwrap();
    let done = app.wait_job(jid, Duration::from_secs(120), finished).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let report = app.get(&format!("/v1/jobs/{jid}/result")).await.json();
    // No duplicated hierarchy values: the report has no `warnings` key at all.
    assert!(report.get("warnings").is_none(), "{report}");
    let level = report["transformation"]["age"].as_u64().unwrap() as usize;
    let csv = app.get(&format!("/v1/jobs/{jid}/result.csv")).await.text;
    let max_suppressed = (limit * 30162.0f64).floor() as usize;
    let (rows, suppressed) = check_k_anonymity(&csv, b';', &ADULT_QIS, k as usize, max_suppressed);
    assert_eq!(rows, 30162);
    let label: HashMap<&str, &str> = expected
        .rows()
        .iter()
        .map(|r| (r[0].as_str(), r[level].as_str()))
        .collect();
    let mut checked = 0;
    for (input, output) in adult.lines().zip(csv.lines()).skip(1) {
        let out: Vec<&str> = output.split(';').collect();
        if out[..5].iter().all(|v| *v == "*") {
            continue;
        }
        let age = input.split(';').nth(1).unwrap();
        assert_eq!(out[1], label[age], "age {age} at level {level}");
        checked += 1;
    }
    assert_eq!(checked + suppressed, rows);

    // Replacing the specification by a table switches the kind; put it back afterwards.
    app.put_hierarchy(&id, "age", &expected.to_csv(b';')).await;
    let v = app
        .get_hierarchy(&id, "age", "application/json")
        .await
        .json();
    assert_eq!(v["kind"], "csv");
    assert!(v.get("spec").is_none());
    assert_eq!(app.put_spec(&id, "age", &spec).await.status, 200);

    // The specification survives a restart.
    let db = app.stop().await;
    let c = config(&db);
    let app = spawn_app_with(db, c).await;
    check_stored(app.api.clone()).await;
    let mut spec_job = adult_job(&id, k, limit);
    spec_job["attributes"]["age"] = json!({"type": "quasi_identifying"});
    let job = app.create_job(&spec_job).await;
    let again = app
        .wait_job(
            job["id"].as_str().unwrap(),
            Duration::from_secs(120),
            finished,
        )
        .await;
    assert_eq!(again["status"], "succeeded", "{again}");
    assert_eq!(
        again["best"]["transformation"],
        done["best"]["transformation"]
    );
    app.stop().await;
}
both_databases!(stored_specs, stored_specs_sqlite, stored_specs_postgres);

/// A column with more distinct values than the dataset keeps: the values are read from the
/// stored CSV for previews and stored specifications.
async fn values_not_kept(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let n = deid::api::datasets::MAX_STORED_VALUES + 1;
    let mut data = String::from("code;group\n");
    for i in 0..n {
        data.push_str(&format!("{};g{}\n", 1_000_000 + (i * 7919) % n, i % 3));
    }
    let ds = app.upload(data.clone(), "delimiter=;").await;
    let id = ds["id"].as_str().unwrap();
    assert_eq!(ds["columns"][0]["distinct_count"], n);
    let codes = distinct(&data, b';', "code");
    assert_eq!(codes.len(), n);
    let spec = json!({"type": "masking", "alphabet_size": 10});
    let expected = engine_table(&spec, "code", &codes).to_csv(b';');
    let r = app.preview(id, "code", &spec, "", Some("text/csv")).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.text, expected);
    let r = app.put_spec(id, "code", &spec).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["rows"], n);
    assert_eq!(
        app.get(&format!("/v1/datasets/{id}/hierarchies/code"))
            .await
            .text,
        expected
    );
    app.stop().await;
}
both_databases!(
    values_not_kept,
    values_not_kept_sqlite,
    values_not_kept_postgres
);

/// A hierarchy listing a value twice with different generalizations: rejected by default with
/// every value and its rows named; accepted with `hierarchy_duplicates: "last"` (the last row
/// generalizes) and reported as a warning.
async fn duplicated_hierarchy_values(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    // Every age once: 2-anonymity needs level 1, where the last rows put all four under 'low'.
    let data = "age;sex\n1;m\n2;f\n3;m\n4;f\n";
    let ds = app.upload(data, "delimiter=;").await;
    let id = ds["id"].as_str().unwrap();
    // '3' (rows 3, 5) and '4' (rows 4, 6) conflict; '1' is listed twice identically.
    let hierarchy = "1;low;*\n2;low;*\n3;high;*\n4;high;*\n3;low;*\n4;low;*\n1;low;*\n";
    let job = |duplicates: Option<&str>| {
        let mut spec = json!({
            "dataset_id": id,
            "attributes": {
                "age": {"type": "quasi_identifying", "hierarchy": {"csv": hierarchy}},
                "sex": {"type": "insensitive"},
            },
            "privacy": ["k-anonymity(k=2)"],
            "time_limit": "30s",
        });
        if let Some(d) = duplicates {
            spec["hierarchy_duplicates"] = json!(d);
        }
        spec
    };
    for duplicates in [None, Some("reject")] {
        let v = app
            .post_json("/v1/jobs", &job(duplicates))
            .await
            .assert_error(422, "invalid_hierarchy");
        assert_eq!(v["error"]["details"]["field"], "attributes.age.hierarchy");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("'3' (rows 3, 5), '4' (rows 4, 6)")
                && message.contains("hierarchy_duplicates")
                && !message.contains("'1'"),
            "{message}"
        );
    }
    let created = app.create_job(&job(Some("last"))).await;
    let jid = created["id"].as_str().unwrap();
    let done = app.wait_job(jid, Duration::from_secs(60), finished).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let report = app.get(&format!("/v1/jobs/{jid}/result")).await.json();
    let warnings = report["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{report}");
    let w = warnings[0].as_str().unwrap();
    assert!(
        w.contains("column 'age'") && w.contains("'3' (rows 3, 5), '4' (rows 4, 6)"),
        "{w}"
    );
    // The last rows put every value under 'low': age is generalized to level 1 and the output
    // holds 'low' only.
    assert_eq!(report["transformation"]["age"], 1, "{report}");
    let csv = app.get(&format!("/v1/jobs/{jid}/result.csv")).await.text;
    let ages: HashSet<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(';').next().unwrap())
        .collect();
    assert_eq!(ages, HashSet::from(["low"]), "{csv}");
    app.stop().await;
}
both_databases!(
    duplicated_hierarchy_values,
    duplicated_hierarchy_values_sqlite,
    duplicated_hierarchy_values_postgres
);

/// Creates a database at schema version 1 holding a dataset with an uploaded hierarchy, as a
/// release before specifications could be stored left it.
async fn version_1_database(db: &TestDb) {
    use sqlx::Connection;
    assert_eq!(deid::store::MIGRATIONS[0].0, 1);
    let migrator = deid::store::migrator_of(&deid::store::MIGRATIONS[..1]);
    const DATASET: &str = "INSERT INTO datasets (id, tenant, name, status, delimiter, has_header, size_bytes, row_count, chunk_count, columns, created_at) \
         VALUES ('v1', 'default', 'old', 'ready', ',', 1, 10, 3, 1, '[{\"name\":\"zip\",\"detected_type\":\"code\",\"distinct_count\":3}]', 0)";
    const CHUNK: &str = "INSERT INTO dataset_chunks (dataset_id, seq, data) VALUES ('v1', 0, $1)";
    const HIERARCHY: &str = "INSERT INTO hierarchies (dataset_id, column_name, delimiter, csv, levels, created_at) \
         VALUES ('v1', 'zip', ';', '81667;8****\n81675;8****\n70000;7****\n', 2, 0)";
    macro_rules! fill {
        ($conn:expr) => {{
            let mut conn = $conn;
            migrator.run(&mut conn).await.unwrap();
            sqlx::query(DATASET).execute(&mut conn).await.unwrap();
            sqlx::query(CHUNK)
                .bind(b"zip\n81667\n81675\n70000\n".to_vec())
                .execute(&mut conn)
                .await
                .unwrap();
            sqlx::query(HIERARCHY).execute(&mut conn).await.unwrap();
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
}

/// Hierarchies stored before the `spec` column existed keep working after the migration, and
/// the column can get a specification (its values, never kept by that release, are read from
/// the stored CSV).
async fn version_1_rows_survive(kind: Db) {
    let Some(db) = TestDb::new(kind).await else {
        return;
    };
    version_1_database(&db).await;
    let c = config(&db);
    let app = spawn_app_with(db, c).await;
    let ds = app.get("/v1/datasets/v1").await.json();
    assert_eq!(ds["hierarchies"], json!({"zip": 2}));
    assert_eq!(ds["hierarchy_kinds"], json!({"zip": "csv"}));
    let r = app.get("/v1/datasets/v1/hierarchies/zip").await;
    assert_eq!(r.text, "81667;8****\n81675;8****\n70000;7****\n");
    let v = app
        .get_hierarchy("v1", "zip", "application/json")
        .await
        .json();
    assert_eq!(v["kind"], "csv");
    assert_eq!(v["rows"][2], json!(["70000", "7****"]));
    let r = app.put_spec("v1", "zip", &json!({"type": "masking"})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = app.get("/v1/datasets/v1/hierarchies/zip").await;
    assert_eq!(
        r.text,
        "70000;7000*;700**;70***;7****;*****\n\
         81667;8166*;816**;81***;8****;*****\n\
         81675;8167*;816**;81***;8****;*****\n"
    );
    app.stop().await;
}
both_databases!(
    version_1_rows_survive,
    version_1_rows_survive_sqlite,
    version_1_rows_survive_postgres
);

/// Issue 11: a specification with more levels than a hierarchy may have (255) is 422 naming
/// `levels` on preview and PUT, before any value is read, and is not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_levels() {
    let app = spawn_app(Db::Sqlite).await.unwrap();
    let ds = app.upload("age,sex\n30,m\n31,f\n40,m\n41,f\n", "").await;
    let id = ds["id"].as_str().unwrap();
    // Interval: the values, the intervals, the entries of `levels` and `*`: at most 252 entries.
    let spec = |n: usize| json!({"type": "interval", "width": 1, "levels": vec![1; n]});
    for n in [253, 256, 100_000] {
        for r in [
            app.preview(id, "age", &spec(n), "", None).await,
            app.put_spec(id, "age", &spec(n)).await,
        ] {
            let v = r.assert_error(422, "invalid_spec");
            assert_eq!(v["error"]["details"]["field"], "levels", "{v}");
            let message = v["error"]["message"].as_str().unwrap();
            assert!(
                message.contains(&format!("expected at most 252 levels, got {n}")),
                "{message}"
            );
        }
    }
    app.get_hierarchy(id, "age", "text/csv")
        .await
        .assert_error(404, "hierarchy_not_found");
    // Order: the values, the entries of `levels` and `*`.
    let order = json!({"type": "order", "levels": vec![1; 254]});
    let v = app
        .put_spec(id, "sex", &order)
        .await
        .assert_error(422, "invalid_spec");
    assert_eq!(v["error"]["details"]["field"], "levels", "{v}");
    // At the limit: built and stored with 255 levels.
    let v = app.preview(id, "age", &spec(252), "", None).await.json();
    assert_eq!(v["levels"], 255);
    let r = app.put_spec(id, "age", &spec(252)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["levels"], 255);
    app.stop().await;
}
