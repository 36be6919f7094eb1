//! `POST /v1/jobs/{id}/verify` and `deid verify`: a job's real output passes (a model that
//! needs the input included), tampered outputs fail with 200 and `"passed": false` naming the
//! model and the violating classes (exit status 5 on the command line), unreadable released
//! data are 422 naming the column or the row.

use std::time::Duration;

use serde_json::{Value, json};

use crate::both_databases;
use crate::cli::deid;
use crate::helpers::*;

/// POSTs `csv` as the released data of job `job` with the query `query`.
pub(crate) async fn verify_released(app: &TestApp, job: &str, csv: String, query: &str) -> Reply {
    app.send(
        app.request(
            reqwest::Method::POST,
            &format!("/v1/jobs/{job}/verify?{query}"),
        )
        .header("content-type", "text/csv")
        .body(csv),
    )
    .await
}

/// Splits `;`-separated text into cells (adult has no quoted cells).
fn cells(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|l| l.split(';').map(String::from).collect())
        .collect()
}

fn join(rows: &[Vec<String>]) -> String {
    rows.iter().map(|r| r.join(";") + "\n").collect()
}

/// The model verdict named `model`.
fn model<'a>(report: &'a Value, model: &str) -> &'a Value {
    report["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["model"] == model)
        .unwrap_or_else(|| panic!("no verdict for {model}: {report}"))
}

async fn verify_endpoint(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let dataset = upload_adult(&app).await;
    let mut spec = adult_job(&dataset, 5, 0.02);
    spec["time_limit"] = json!("5s");
    spec["privacy"] = json!([
        "k-anonymity(k=5)",
        "t-closeness(attribute=salary-class,t=0.3,distance=equal)"
    ]);
    let job = app.create_job(&spec).await;
    let id = job["id"].as_str().unwrap().to_string();
    let job = app.wait_job(&id, Duration::from_secs(120), finished).await;
    assert_eq!(job["status"], "succeeded", "{job}");
    let report = app.get(&format!("/v1/jobs/{id}/result")).await.json();
    let csv = app.get(&format!("/v1/jobs/{id}/result.csv")).await.text;

    let r = verify_released(&app, &id, csv.clone(), "").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["passed"], true, "{v}");
    assert_eq!(v["released_records"], 30162);
    assert_eq!(v["suppressed_records"], report["suppressed_rows"], "{v}");
    assert_eq!(v["models"].as_array().unwrap().len(), 2);
    let histogram: u64 = (v["class_sizes"].as_array().unwrap().iter())
        .map(|b| b["records"].as_u64().unwrap())
        .sum();
    assert_eq!(histogram + v["suppressed_records"].as_u64().unwrap(), 30162);

    // One row shown with its input values (un-suppressed if one was suppressed): a class of
    // one record — a verdict, not an error.
    let input = cells(&std::fs::read_to_string(repo("examples/adult/adult.csv")).unwrap());
    let mut rows = cells(&csv);
    let sex = rows[0].iter().position(|c| c == "sex").unwrap();
    let r = (1..rows.len()).find(|&r| rows[r][sex] == "*").unwrap_or(1);
    rows[r] = input[r].clone();
    let tampered = verify_released(&app, &id, join(&rows), "show_values=true").await;
    assert_eq!(tampered.status, 200, "{}", tampered.text);
    let t = tampered.json();
    assert_eq!(t["passed"], false, "{t}");
    let k = model(&t, "k-anonymity(k=5)");
    assert_eq!(k["passed"], false);
    assert!(k["violating_classes"].as_u64().unwrap() >= 1, "{k}");
    assert!(k["violations"][0]["values"].is_array(), "{k}");
    let plain = verify_released(&app, &id, join(&rows), "").await.json();
    assert!(model(&plain, "k-anonymity(k=5)")["violations"][0]["values"].is_null());

    // Unreadable released data: the missing column, the short row, the bad count.
    let e = verify_released(&app, &id, "sex;age\nMale;39\n".into(), "")
        .await
        .assert_error(422, "invalid_csv");
    assert_eq!(e["error"]["details"]["column"], "education", "{e}");
    let short = format!("{}{}\n", csv.lines().next().unwrap(), "\nMale;39");
    let e = verify_released(&app, &id, short, "")
        .await
        .assert_error(422, "invalid_csv");
    assert_eq!(e["error"]["details"]["row"], 2, "{e}");
    let e = verify_released(&app, &id, csv.clone(), "count_column=sex")
        .await
        .assert_error(422, "invalid_csv");
    assert_eq!(e["error"]["details"]["field"], "count_column", "{e}");
    verify_released(&app, &id, csv.clone(), "nope=1")
        .await
        .assert_error(400, "invalid_query");
    verify_released(&app, "01a20000-0000-7000-8000-000000000000", csv, "")
        .await
        .assert_error(404, "job_not_found");

    // A risk job has no privacy models to verify.
    let qi = json!({"type": "quasi_identifying"});
    let risk = app
        .create_job(&json!({"dataset_id": dataset, "task": "risk", "attributes": {"age": qi}}))
        .await;
    let risk = risk["id"].as_str().unwrap();
    let e = verify_released(&app, risk, "age\n1\n".into(), "")
        .await
        .assert_error(422, "invalid_spec");
    assert_eq!(e["error"]["details"]["field"], "task", "{e}");
    app.wait_job(risk, Duration::from_secs(60), finished).await;
    app.stop().await;
}
both_databases!(
    verify_endpoint,
    verify_endpoint_sqlite,
    verify_endpoint_postgres
);

const DATA: &str = "name,age,zip,disease\nAnn,34,81667,flu\nBob,45,81675,cold\nCid,66,81925,flu\nDan,70,81931,cold\n";
const AGE: &str = "34;<50;*\n45;<50;*\n66;>=50;*\n70;>=50;*\n";

/// `deid anonymize --config job.json --output out.csv`, then `deid verify --config job.json
/// --released …`: the output passes (exit 0), a tampered one fails (exit 5), released data
/// without a quasi-identifier are bad input (exit 2).
#[test]
fn the_command_line_verifies_released_data() {
    let dir = std::env::temp_dir().join(format!("deid-verify-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("data.csv"), DATA).unwrap();
    std::fs::write(dir.join("age.csv"), AGE).unwrap();
    let spec = json!({
        "input": "data.csv",
        "attributes": {
            "name": {"type": "identifying"},
            "age": {"type": "quasi_identifying", "hierarchy": {"file": "age.csv"}},
            "disease": {"type": "sensitive"}
        },
        "privacy": ["k-anonymity(k=2)", "t-closeness(attribute=disease,t=0.2,distance=equal)"],
    });
    std::fs::write(dir.join("job.json"), spec.to_string()).unwrap();
    let (code, _, stderr) = deid(
        &["anonymize", "--config", "job.json", "--output", "out.csv"],
        &dir,
    );
    assert_eq!(code, 0, "{stderr}");
    let verify = |released: &str| {
        deid(
            &["verify", "--config", "job.json", "--released", released],
            &dir,
        )
    };
    let (code, stdout, stderr) = verify("out.csv");
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["passed"], true, "{v}");
    assert_eq!(v["released_records"], 4);

    let out = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    let tampered = out.replacen("<50", "34", 1);
    assert_ne!(tampered, out);
    std::fs::write(dir.join("tampered.csv"), tampered).unwrap();
    let (code, stdout, stderr) = verify("tampered.csv");
    assert_eq!(code, 5, "{stderr}");
    assert!(stderr.contains("k-anonymity(k=2)"), "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["passed"], false);
    assert_eq!(model(&v, "k-anonymity(k=2)")["violating_classes"], 2, "{v}");

    std::fs::write(dir.join("bad.csv"), "zip,disease\n81667,flu\n").unwrap();
    let (code, _, stderr) = verify("bad.csv");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("'age'"), "{stderr}");
}
