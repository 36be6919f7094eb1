//! Parquet in and out (docs/definitions.md §8): the command line with `.parquet` input and
//! output, and the service's Parquet upload and `result.parquet`. Parquet files are read back
//! with the `parquet` crate's record API (not deid's reader); the inputs come from pyarrow
//! (tests/fixtures/parquet/generate.py).

use std::path::{Path, PathBuf};
use std::time::Duration;

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use serde_json::Value;

use crate::cli::deid;
use crate::helpers::*;

fn tmp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("deid-parquet-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn fixture(name: &str) -> PathBuf {
    repo(&format!("tests/fixtures/parquet/{name}"))
}

/// The rows of a Parquet file as text, with the record API: strings as they are, NULL as the
/// empty cell, INT64 in decimal. Returns (header, rows).
fn parquet_rows(bytes: Vec<u8>) -> (Vec<String>, Vec<Vec<String>>) {
    let reader = SerializedFileReader::new(axum::body::Bytes::from(bytes)).unwrap();
    let schema = reader.metadata().file_metadata().schema_descr();
    let header = schema
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    let rows = reader
        .get_row_iter(None)
        .unwrap()
        .map(|row| {
            row.unwrap()
                .get_column_iter()
                .map(|(_, f)| match f {
                    Field::Str(s) => s.clone(),
                    Field::Null => String::new(),
                    Field::Long(n) => n.to_string(),
                    other => panic!("unexpected field {other:?}"),
                })
                .collect()
        })
        .collect();
    (header, rows)
}

/// The rows of a CSV: (header, rows).
fn csv_rows(text: &str, delimiter: u8) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .from_reader(text.as_bytes());
    let header = r.headers().unwrap().iter().map(str::to_string).collect();
    let rows = r
        .records()
        .map(|rec| rec.unwrap().iter().map(str::to_string).collect())
        .collect();
    (header, rows)
}

/// The rows of a Parquet file as `delimiter`-separated CSV text (for the independent checker).
fn as_csv(header: &[String], rows: &[Vec<String>], delimiter: u8) -> String {
    let mut w = csv::WriterBuilder::new()
        .delimiter(delimiter)
        .from_writer(Vec::new());
    w.write_record(header).unwrap();
    for row in rows {
        w.write_record(row).unwrap();
    }
    String::from_utf8(w.into_inner().unwrap()).unwrap()
}

/// A report without what depends on the run (times, memory).
fn without_timings(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| {
                    !["time", "duration", "memory", "elapsed", "_ms", "seconds"]
                        .iter()
                        .any(|t| k.contains(t))
                })
                .map(|(k, v)| (k.clone(), without_timings(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_timings).collect()),
        other => other.clone(),
    }
}

/// `deid anonymize` on adult (`input`) into `dir/out.<ext>`, report and plan beside it.
fn anonymize(dir: &Path, input: &Path, ext: &str) -> Value {
    let out = dir.join(format!("out.{ext}"));
    let report = dir.join(format!("report.{ext}.json"));
    let plan = dir.join(format!("plan.{ext}.json"));
    let mut args: Vec<String> = [
        "anonymize",
        "--delimiter",
        ";",
        "--algorithm",
        "flash",
        "--quiet",
        "--sensitive",
        "salary-class",
        "--privacy",
        "k-anonymity(k=5)",
        "--suppression-limit",
        "0.02",
    ]
    .map(str::to_string)
    .to_vec();
    for (flag, path) in [
        ("--input", input),
        ("--output", &out),
        ("--report", &report),
        ("--plan-output", &plan),
    ] {
        args.extend([flag.to_string(), path.display().to_string()]);
    }
    for q in ADULT_QIS {
        args.extend(["--hierarchy".into(), format!("{q}=adult_hierarchy_{q}.csv")]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, stderr) = deid(&args, &repo("examples/adult"));
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap()
}

/// adult as Parquet (pyarrow, age as INT64) gives the CSV's report and rows; `apply` on Parquet
/// writes `anonymize --output`'s Parquet bytes; `verify` passes on the Parquet release and fails
/// on a tampered one.
#[test]
fn parquet_input_and_output_match_the_csv_path() {
    let dir = tmp_dir("cli");
    let from_csv = anonymize(&dir, &repo("examples/adult/adult.csv"), "csv");
    let from_parquet = anonymize(&dir, &fixture("adult.parquet"), "parquet");
    assert_eq!(without_timings(&from_csv), without_timings(&from_parquet));
    let csv_text = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    let (csv_header, csv_body) = csv_rows(&csv_text, b';');
    let (header, rows) = parquet_rows(std::fs::read(dir.join("out.parquet")).unwrap());
    assert_eq!((&header, &rows), (&csv_header, &csv_body));
    check_k_anonymity(&as_csv(&header, &rows, b';'), b';', &ADULT_QIS, 5, 603);

    let applied = dir.join("applied.parquet");
    let plan = dir.join("plan.parquet.json");
    let (code, _, stderr) = deid(
        &[
            "apply",
            "--quiet",
            "--plan",
            plan.to_str().unwrap(),
            "--input",
            fixture("adult.parquet").to_str().unwrap(),
            "--output",
            applied.to_str().unwrap(),
        ],
        &dir,
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        std::fs::read(&applied).unwrap(),
        std::fs::read(dir.join("out.parquet")).unwrap()
    );

    let verify = |released: &Path| {
        let mut args: Vec<String> = [
            "verify",
            "--delimiter",
            ";",
            "--sensitive",
            "salary-class",
            "--privacy",
            "k-anonymity(k=5)",
            "--released",
        ]
        .map(str::to_string)
        .to_vec();
        args.push(released.display().to_string());
        for q in ADULT_QIS {
            args.extend(["--hierarchy".into(), format!("{q}=adult_hierarchy_{q}.csv")]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        deid(&args, &repo("examples/adult")).0
    };
    assert_eq!(verify(&dir.join("out.parquet")), 0);
    // Tampered: the first suppressed row un-suppressed with the original values of its input
    // row (written by the parquet crate's own writer, through deid's library).
    let input = std::fs::read_to_string(repo("examples/adult/adult.csv")).unwrap();
    let (_, input_rows) = csv_rows(&input, b';');
    let i = rows
        .iter()
        .position(|r| r[0] == "*")
        .expect("a suppressed row");
    let mut tampered = rows.clone();
    tampered[i] = input_rows[i].clone();
    let text = as_csv(&header, &tampered, b';');
    let out = std::fs::File::create(dir.join("tampered.parquet")).unwrap();
    deid::parquet::csv_to_parquet(text.as_bytes(), b';', None, out, "tampered").unwrap();
    assert_eq!(verify(&dir.join("tampered.parquet")), 5);
}

/// Unsupported Parquet on the command line: exit status 2 and a message naming the column.
#[test]
fn unsupported_parquet_is_refused_by_name() {
    for (file, message) in [
        ("nested.parquet", "column 'tags' is LIST"),
        ("zstd.parquet", "column 'a' is compressed with ZSTD"),
        ("int96.parquet", "column 'when' is INT96"),
        (
            "binary.parquet",
            "column 'blob', row 2: binary value that is not UTF-8",
        ),
    ] {
        let path = fixture(file);
        let (code, _, stderr) = deid(&["profile", "--input", path.to_str().unwrap()], &repo("."));
        assert_eq!(code, 2, "{file}: {stderr}");
        assert!(stderr.contains(message), "{file}: {stderr}");
    }
}

crate::both_databases!(parquet_upload_and_result, parquet_sqlite, parquet_postgres);

/// Upload adult as Parquet, run a job, download `result.parquet`: its rows are `result.csv`'s
/// and k-anonymous. Bad Parquet is a 422 naming the column, and nothing is stored.
async fn parquet_upload_and_result(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let post = |body: Vec<u8>, query: &str, media: &str| {
        app.request(reqwest::Method::POST, &format!("/v1/datasets?{query}"))
            .header("content-type", media)
            .body(body)
    };
    let adult = std::fs::read(fixture("adult.parquet")).unwrap();
    let r = app
        .send(post(adult, "name=adult", "application/vnd.apache.parquet"))
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let ds = r.json();
    assert_eq!(
        (ds["rows"].as_i64(), ds["delimiter"].as_str()),
        (Some(30162), Some(","))
    );
    let id = ds["id"].as_str().unwrap().to_string();
    for q in ADULT_QIS {
        let h = std::fs::read_to_string(repo(&format!("examples/adult/adult_hierarchy_{q}.csv")))
            .unwrap();
        app.put_hierarchy(&id, q, &h).await;
    }
    let job = app.create_job(&adult_job(&id, 5, 0.02)).await;
    let job_id = job["id"].as_str().unwrap().to_string();
    let done = app
        .wait_job(&job_id, Duration::from_secs(120), finished)
        .await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let csv = app.get(&format!("/v1/jobs/{job_id}/result.csv")).await;
    let resp = app
        .request(
            reqwest::Method::GET,
            &format!("/v1/jobs/{job_id}/result.parquet"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"],
        "application/vnd.apache.parquet"
    );
    let (header, rows) = parquet_rows(resp.bytes().await.unwrap().to_vec());
    assert_eq!((header.clone(), rows.clone()), csv_rows(&csv.text, b','));
    check_k_anonymity(&as_csv(&header, &rows, b','), b',', &ADULT_QIS, 5, 603);

    let mut truncated = std::fs::read(fixture("types.parquet")).unwrap();
    truncated.truncate(truncated.len() / 2);
    for (body, column) in [
        (truncated, None),
        (
            std::fs::read(fixture("nested.parquet")).unwrap(),
            Some("tags"),
        ),
        (std::fs::read(fixture("zstd.parquet")).unwrap(), Some("a")),
    ] {
        let r = app.send(post(body, "", "application/x-parquet")).await;
        let v = r.assert_error(422, "invalid_csv");
        assert_eq!(v["error"]["details"]["format"], "parquet");
        assert_eq!(v["error"]["details"]["column"].as_str(), column);
    }
    let r = app
        .send(post(
            Vec::new(),
            "header=false",
            "application/vnd.apache.parquet",
        ))
        .await;
    r.assert_error(400, "invalid_query");
    let list = app.get("/v1/datasets").await.json();
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
}
