//! Frequency tables in the service and the command line: adult uploaded grouped on all its
//! columns (`?count_column=n`) gives the CSV upload's report and, expanded, its output; bad
//! counts and fields that do not fit a frequency table are refused naming the field and row; a
//! frequency table at a floor (`data_level`) gives the raw data's numbers from that level; cup
//! and fars_int as frequency tables give the CSV path's report byte for byte.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::both_databases;
use crate::helpers::*;

/// adult grouped on all its columns, with the count column `n` last (rows in order of first
/// appearance); `;`-delimited like adult.csv.
fn adult_frequency_csv() -> String {
    grouped(&std::fs::read_to_string(repo("examples/adult/adult.csv")).unwrap())
}

/// Asserts that the reports `got` and `want` agree on each of `fields`.
fn assert_same_fields(got: &Value, want: &Value, fields: &[&str]) {
    for field in fields {
        assert_eq!(got[field], want[field], "{field}");
    }
}

/// The records of a CSV with delimiter `d`: each row repeated as often as its column `count`
/// says (that column left out), sorted.
fn records(csv: &str, d: char, count: Option<&str>) -> Vec<String> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(d).collect();
    let c = count.map(|name| header.iter().position(|h| *h == name).unwrap());
    let mut out = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let cells: Vec<&str> = line.split(d).collect();
        let n: usize = c.map_or(1, |c| cells[c].parse().unwrap());
        let kept: Vec<&str> = (0..cells.len())
            .filter(|&i| Some(i) != c)
            .map(|i| cells[i])
            .collect();
        for _ in 0..n {
            out.push(kept.join(","));
        }
    }
    out.sort();
    out
}

async fn run_job(app: &TestApp, spec: &Value) -> (Value, String) {
    let job = app.create_job(spec).await;
    let id = job["id"].as_str().unwrap().to_string();
    let job = app.wait_job(&id, Duration::from_secs(120), finished).await;
    assert_eq!(job["status"], "succeeded", "{job}");
    let report = app.get(&format!("/v1/jobs/{id}/result")).await.json();
    let csv = app.get(&format!("/v1/jobs/{id}/result.csv")).await.text;
    (report, csv)
}

/// adult as a frequency table: the dataset's records are adult's, the job's report is the
/// CSV upload's, the output expands to the CSV upload's output and its classes (counted from
/// the output's count column) have at least k records.
async fn adult_as_a_frequency_table(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let plain = upload_adult(&app).await;
    let ds = app
        .upload(
            adult_frequency_csv(),
            "delimiter=;&name=adult-freq&count_column=n",
        )
        .await;
    assert_eq!(ds["records"], 30162, "{ds}");
    assert_eq!(ds["count_column"], "n");
    assert!(ds["rows"].as_i64().unwrap() < 30162);
    let freq = ds["id"].as_str().unwrap().to_string();
    for q in ADULT_QIS {
        let h = std::fs::read_to_string(repo(&format!("examples/adult/adult_hierarchy_{q}.csv")))
            .unwrap();
        app.put_hierarchy(&freq, q, &h).await;
    }
    let k = 5;
    let spec = |dataset: &str| {
        let mut s = adult_job(dataset, k, 0.02);
        s["algorithm"] = json!("flash");
        s["privacy"] = json!([
            format!("k-anonymity(k={k})"),
            "distinct-l-diversity(attribute=salary-class,l=2)"
        ]);
        s
    };
    let (want, want_csv) = run_job(&app, &spec(&plain)).await;
    let (got, got_csv) = run_job(&app, &spec(&freq)).await;
    // The output, a frequency table, verifies with its count column.
    let job = got["job_id"].as_str().unwrap();
    let r = crate::verify::verify_released(&app, job, got_csv.clone(), "").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["passed"], true, "{}", r.text);
    assert_eq!(r.json()["released_records"], 30162, "{}", r.text);
    assert_same_fields(
        &got,
        &want,
        &[
            "transformation",
            "suppressed_rows",
            "classes",
            "score",
            "rows",
            "quality",
            "risk",
            "output_quality",
        ],
    );
    assert_eq!(got["rows"], 30162);
    assert_eq!(
        records(&got_csv, ';', Some("n")),
        records(&want_csv, ';', None)
    );
    assert!(got_csv.lines().count() < want_csv.lines().count());
    // Independently of the engine: classes from the output's quasi-identifiers, weighed by n.
    let mut lines = got_csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(';').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let qis: Vec<usize> = ADULT_QIS.iter().map(|q| col(q)).collect();
    let n = col("n");
    let mut classes: HashMap<Vec<String>, u64> = HashMap::new();
    for line in lines {
        let cells: Vec<&str> = line.split(';').collect();
        let key: Vec<String> = qis.iter().map(|&i| cells[i].to_string()).collect();
        if key.iter().all(|v| v == "*") {
            continue;
        }
        *classes.entry(key).or_default() += cells[n].parse::<u64>().unwrap();
    }
    assert!(!classes.is_empty());
    assert!(classes.values().all(|&size| size >= k as u64));
    // The risks of the data as they are: those of the CSV upload.
    let body = json!({"quasi_identifiers": ADULT_QIS});
    let want = app
        .post_json(&format!("/v1/datasets/{plain}/risk"), &body)
        .await;
    let got = app
        .post_json(&format!("/v1/datasets/{freq}/risk"), &body)
        .await;
    assert_eq!(got.status, 200, "{}", got.text);
    assert_eq!(got.json(), want.json());
}

both_databases!(
    adult_as_a_frequency_table,
    adult_as_a_frequency_table_sqlite,
    adult_as_a_frequency_table_postgres
);

/// Bad counts are 422 naming `count_column`, the row and the value; nothing is stored. Job
/// fields that do not fit the dataset's count column are 422 naming the field.
async fn bad_counts_and_fields(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let upload = |csv: &'static str, query: &'static str| {
        app.send(
            app.request(reqwest::Method::POST, &format!("/v1/datasets?{query}"))
                .header("content-type", "text/csv")
                .body(csv),
        )
    };
    for (bad, expected) in [("-2", "'-2'"), ("1.5", "'1.5'"), ("x", "'x'"), ("", "''")] {
        let csv: &'static str = Box::leak(format!("a,n\nx,3\ny,{bad}\nz,1\n").into_boxed_str());
        let r = upload(csv, "count_column=n").await;
        let v = r.assert_error(422, "invalid_csv");
        assert_eq!(v["error"]["details"]["field"], "count_column", "{v}");
        let m = v["error"]["message"].as_str().unwrap();
        assert!(m.contains("row 2") && m.contains(expected), "{m}");
    }
    let r = upload("a,n\nx,4294967295\ny,1\n", "count_column=n").await;
    let v = r.assert_error(422, "invalid_csv");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("row 2"),
        "{v}"
    );
    let r = upload("a,n\nx,1\n", "count_column=m").await;
    let v = r.assert_error(422, "invalid_csv");
    assert_eq!(v["error"]["details"]["field"], "count_column");
    let list = app.get("/v1/datasets").await.json();
    assert_eq!(list["items"].as_array().unwrap().len(), 0, "{list}");

    let ds = app.upload("a,n,s\nx,3,1\ny,2,0\n", "count_column=n").await;
    assert_eq!(
        (ds["rows"].as_i64(), ds["records"].as_i64()),
        (Some(2), Some(5))
    );
    let id = ds["id"].as_str().unwrap();
    let spec = |extra: Value| {
        let mut s = json!({
            "dataset_id": id,
            "attributes": {"a": {"type": "quasi_identifying", "hierarchy": {"csv": "x;*\ny;*"}}},
            "privacy": ["k-anonymity(k=2)"],
        });
        for (k, v) in extra.as_object().unwrap() {
            s[k] = v.clone();
        }
        s
    };
    for (extra, field) in [
        (json!({"count_column": "s"}), "count_column"),
        (
            json!({"research_subset": {"rows": [1]}, "privacy": ["delta-presence(delta_min=0,delta_max=1)"]}),
            "research_subset.rows",
        ),
        (json!({"count_column": "nope"}), "count_column"),
    ] {
        let r = app.post_json("/v1/jobs", &spec(extra)).await;
        let v = r.assert_error(422, "invalid_spec");
        assert_eq!(v["error"]["details"]["field"], field, "{v}");
    }
    // A plain dataset takes no count column from a specification.
    let plain = app.upload("a,n\nx,3\ny,2\n", "").await;
    let mut s = spec(json!({"count_column": "n"}));
    s["dataset_id"] = plain["id"].clone();
    let v = app
        .post_json("/v1/jobs", &s)
        .await
        .assert_error(422, "invalid_spec");
    assert_eq!(v["error"]["details"]["field"], "count_column");
    // A subset count column of the dataset selects the released records.
    let job = app
        .create_job(&spec(json!({
            "subset_count_column": "s",
            "privacy": ["k-anonymity(k=1)", "delta-presence(delta_min=0,delta_max=1)"],
        })))
        .await;
    let job = app
        .wait_job(
            job["id"].as_str().unwrap(),
            Duration::from_secs(60),
            finished,
        )
        .await;
    assert_eq!(job["status"], "succeeded", "{job}");
}

both_databases!(
    bad_counts_and_fields,
    bad_counts_and_fields_sqlite,
    bad_counts_and_fields_postgres
);

/// `deid anonymize --count-column`: the output is a frequency table whose records are those of
/// the expanded input's output; `deid risk --count-column` gives the expansion's risks; bad
/// counts name the column, the row and the value.
#[test]
fn the_command_line_reads_and_writes_frequency_tables() {
    let dir = std::env::temp_dir().join(format!("deid-freq-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("freq.csv"),
        "age,n,disease\n34,2,flu\n45,0,cold\n66,1,flu\n70,3,cold\n45,1,cold\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("full.csv"),
        "age,disease\n34,flu\n34,flu\n66,flu\n70,cold\n70,cold\n70,cold\n45,cold\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("age.csv"),
        "34;<50;*\n45;<50;*\n66;>=50;*\n70;>=50;*\n",
    )
    .unwrap();
    let anonymize = |input: &str, out: &str, extra: &[&str]| {
        let mut args = vec![
            "anonymize",
            "--input",
            input,
            "--hierarchy",
            "age=age.csv",
            "--sensitive",
            "disease",
            "--privacy",
            "k-anonymity(k=3)",
            "--algorithm",
            "flash",
            "--output",
            out,
        ];
        args.extend_from_slice(extra);
        crate::cli::deid(&args, &dir)
    };
    let (code, freq_report, stderr) =
        anonymize("freq.csv", "freq-out.csv", &["--count-column", "n"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, full_report, stderr) = anonymize("full.csv", "full-out.csv", &[]);
    assert_eq!(code, 0, "{stderr}");
    let (f, e): (Value, Value) = (
        serde_json::from_str(&freq_report).unwrap(),
        serde_json::from_str(&full_report).unwrap(),
    );
    assert_same_fields(
        &f,
        &e,
        &[
            "transformation",
            "rows",
            "classes",
            "suppressed_rows",
            "score",
            "risk",
        ],
    );
    assert_eq!(f["rows"], 7);
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let out = read("freq-out.csv");
    assert_eq!(out.lines().next(), Some("age,n,disease"));
    assert_eq!(out.lines().count(), 5, "{out}");
    assert_eq!(
        records(&out, ',', Some("n")),
        records(&read("full-out.csv"), ',', None)
    );

    let risk = |input: &str, extra: &[&str]| {
        let mut args = vec!["risk", "--input", input, "--quasi-identifiers", "age"];
        args.extend_from_slice(extra);
        crate::cli::deid(&args, &dir)
    };
    let (code, f, stderr) = risk("freq.csv", &["--count-column", "n"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(f, risk("full.csv", &[]).1);

    std::fs::write(dir.join("bad.csv"), "age,n,disease\n34,2,flu\n45,-1,cold\n").unwrap();
    let (code, _, stderr) = anonymize("bad.csv", "bad-out.csv", &["--count-column", "n"]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("count_column") && stderr.contains("row 2") && stderr.contains("'-1'"),
        "{stderr}"
    );
    let (code, _, stderr) = risk("bad.csv", &["--count-column", "n"]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("--count-column") && stderr.contains("row 2"),
        "{stderr}"
    );
    std::fs::write(dir.join("rows.txt"), "1").unwrap();
    let (code, _, stderr) = anonymize(
        "freq.csv",
        "x.csv",
        &["--count-column", "n", "--research-subset-rows", "rows.txt"],
    );
    assert_ne!(code, 0);
    assert!(
        stderr.contains("research_subset") && stderr.contains("subset_count_column"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `;`-delimited CSV grouped on all its columns, with the count column `n` last (rows in
/// order of first appearance).
fn grouped(text: &str) -> String {
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let mut counts: HashMap<&str, u32> = HashMap::new();
    let mut order: Vec<&str> = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let n = counts.entry(line).or_insert(0);
        if *n == 0 {
            order.push(line);
        }
        *n += 1;
    }
    let mut out = format!("{header};n\n");
    for line in order {
        out.push_str(&format!("{line};{}\n", counts[line]));
    }
    out
}

/// cup and fars_int (samples in tests/fixtures, every column a quasi-identifier) given as
/// frequency tables grouped on all their columns: `deid anonymize --count-column n` writes the
/// CSV path's report byte for byte, `rows` and the timings aside, for k-anonymity with and
/// without suppression and with average risk.
#[test]
fn cup_and_fars_int_as_frequency_tables_give_the_csv_reports() {
    for name in ["cup", "fars_int"] {
        let fixture = repo(&format!("tests/fixtures/{name}"));
        let dir = std::env::temp_dir().join(format!("deid-freq-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let text = std::fs::read_to_string(fixture.join(format!("{name}.csv"))).unwrap();
        let freq = grouped(&text);
        let records = text.lines().skip(1).filter(|l| !l.is_empty()).count();
        let rows = freq.lines().count() - 1;
        // fars_int's records repeat; cup's sample has none alike (every count is 1).
        assert!(
            rows <= records && (name == "cup" || rows < records),
            "{name}: {rows} rows"
        );
        std::fs::write(dir.join("freq.csv"), &freq).unwrap();
        let columns: Vec<String> = text
            .lines()
            .next()
            .unwrap()
            .split(';')
            .map(String::from)
            .collect();
        let mut flags: Vec<String> = Vec::new();
        for c in &columns {
            let h = fixture.join(format!("{name}_hierarchy_{c}.csv"));
            flags.extend(["--hierarchy".into(), format!("{c}={}", h.display())]);
        }
        for (privacy, suppression) in [
            ("k-anonymity(k=5)", "0"),
            ("k-anonymity(k=5)", "0.05"),
            ("average-risk(threshold=0.1)", "0.02"),
        ] {
            let report = |input: &Path, extra: &[&str]| -> Value {
                let mut args = vec![
                    "anonymize",
                    "--input",
                    input.to_str().unwrap(),
                    "--delimiter",
                    ";",
                    "--privacy",
                    privacy,
                    "--suppression-limit",
                    suppression,
                    "--algorithm",
                    "flash",
                    "--quiet",
                ];
                args.extend(flags.iter().map(String::as_str));
                args.extend_from_slice(extra);
                let (code, out, stderr) = crate::cli::deid(&args, &dir);
                assert_eq!(code, 0, "{name} {privacy} {suppression}: {stderr}");
                serde_json::from_str(&out).unwrap()
            };
            let mut csv = report(&fixture.join(format!("{name}.csv")), &[]);
            let mut table = report(&dir.join("freq.csv"), &["--count-column", "n"]);
            assert_eq!(csv["rows"], records);
            assert_eq!(table["rows"], records);
            // Timings aside: `timings`, `elapsed_ms`, `best_found_ms` and each trace entry's
            // `time_ms`.
            for r in [&mut csv, &mut table] {
                let r = r.as_object_mut().unwrap();
                for field in ["rows", "timings", "elapsed_ms", "best_found_ms"] {
                    r.remove(field);
                }
                for entry in r["trace"].as_array_mut().unwrap() {
                    entry.as_object_mut().unwrap().remove("time_ms");
                }
            }
            assert_eq!(
                table.to_string(),
                csv.to_string(),
                "{name} {privacy} {suppression}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The ZIP hierarchy of the floor tests: 5 digits, 3 digits, `*`.
const ZIP_HIERARCHY: &str =
    "12345;123**;*\n12346;123**;*\n12399;123**;*\n45678;456**;*\n45699;456**;*\n77777;777**;*";

/// A frequency table of 3-digit ZIP codes with `"data_level": 1` gives the raw 5-digit data's
/// transformation, scores and output records with `"min_level": 1`, without the entropy-based
/// models and with a warning; bad floors are 422 naming `attributes.zip.data_level`.
async fn data_at_a_floor(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let raw = app
        .upload(
            "zip,disease\n12345,flu\n12346,flu\n12399,cold\n45678,flu\n45699,cold\n45699,flu\n",
            "",
        )
        .await;
    let floor = app
        .upload(
            "zip,n,disease\n123**,2,flu\n123**,1,cold\n456**,2,flu\n456**,1,cold\n",
            "count_column=n",
        )
        .await;
    let spec = |dataset: &Value, zip: Value| {
        json!({
            "dataset_id": dataset["id"],
            "attributes": {"zip": zip, "disease": {"type": "sensitive"}},
            "privacy": ["k-anonymity(k=3)"],
            "quality": {"model": "loss"},
            "algorithm": "flash",
        })
    };
    let zip = |extra: Value| {
        let mut z = json!({"type": "quasi_identifying", "hierarchy": {"csv": ZIP_HIERARCHY}});
        for (k, v) in extra.as_object().unwrap() {
            z[k] = v.clone();
        }
        z
    };
    let (want, want_csv) = run_job(&app, &spec(&raw, zip(json!({"min_level": 1})))).await;
    let (got, got_csv) = run_job(&app, &spec(&floor, zip(json!({"data_level": 1})))).await;
    assert_eq!(got["transformation"], json!({"zip": 1}), "{got}");
    assert_same_fields(
        &got,
        &want,
        &[
            "transformation",
            "rows",
            "classes",
            "suppressed_rows",
            "score",
        ],
    );
    // Every model's score but the entropy-based ones (left out); utilities are measured from
    // the data as given.
    let scores = |q: &Value| -> Vec<(String, Value)> {
        (q.as_object().unwrap().iter())
            .map(|(m, v)| (m.clone(), v["score"].clone()))
            .filter(|(m, _)| {
                !["entropy", "normalized-entropy", "kl-divergence"].contains(&m.as_str())
            })
            .collect()
    };
    assert_eq!(scores(&got["quality"]), scores(&want["quality"]));
    assert_eq!(
        got["quality"].as_object().unwrap().len(),
        want["quality"].as_object().unwrap().len() - 3
    );
    assert_eq!(got["risk"]["output"], want["risk"]["output"]);
    let warnings = got["warnings"].to_string();
    assert!(warnings.contains("data_level"), "{warnings}");
    assert_eq!(
        records(&got_csv, ',', Some("n")),
        records(&want_csv, ',', None)
    );
    // Bad floors, before the job is queued.
    for (attribute, extra, code, field) in [
        (
            "zip",
            json!({"data_level": 3}),
            "invalid_spec",
            "attributes.zip.data_level",
        ),
        (
            "zip",
            json!({"data_level": 2}),
            "hierarchy_missing_values",
            "attributes.zip.data_level",
        ),
        (
            "zip",
            json!({"data_level": 1, "max_level": 0}),
            "invalid_spec",
            "attributes.zip.data_level",
        ),
        (
            "disease",
            json!({"data_level": 1}),
            "invalid_spec",
            "attributes.disease.data_level",
        ),
    ] {
        let mut s = spec(&floor, zip(json!({"data_level": 1})));
        if attribute == "zip" {
            s["attributes"]["zip"] = zip(extra);
        } else {
            s["attributes"][attribute] = json!({"type": "sensitive", "data_level": 1});
        }
        let v = app.post_json("/v1/jobs", &s).await.assert_error(422, code);
        assert_eq!(v["error"]["details"]["field"], field, "{v}");
        if code == "hierarchy_missing_values" {
            assert_eq!(v["error"]["details"]["total_missing"], 2, "{v}");
            assert_eq!(v["error"]["details"]["level"], 2, "{v}");
        }
    }
    let mut s = spec(
        &floor,
        json!({"type": "quasi_identifying", "data_level": 1,
        "microaggregation": {"function": "mode"}}),
    );
    let v = app
        .post_json("/v1/jobs", &s)
        .await
        .assert_error(422, "invalid_spec");
    assert_eq!(
        v["error"]["details"]["field"], "attributes.zip.data_level",
        "{v}"
    );
    s = spec(&floor, zip(json!({"data_level": 1})));
    s["quality"] = json!({"model": "entropy"});
    let v = app
        .post_json("/v1/jobs", &s)
        .await
        .assert_error(422, "invalid_spec");
    assert_eq!(
        v["error"]["details"]["field"], "attributes.zip.data_level",
        "{v}"
    );
    s = spec(&floor, zip(json!({"data_level": 1})));
    s["task"] = json!("evaluate");
    s.as_object_mut().unwrap().remove("algorithm");
    s["levels"] = json!({"zip": 0});
    let v = app
        .post_json("/v1/jobs", &s)
        .await
        .assert_error(422, "invalid_spec");
    assert_eq!(v["error"]["details"]["field"], "levels.zip", "{v}");
    let m = v["error"]["message"].as_str().unwrap();
    assert!(m.contains("data_level"), "{m}");
}

both_databases!(
    data_at_a_floor,
    data_at_a_floor_sqlite,
    data_at_a_floor_postgres
);
