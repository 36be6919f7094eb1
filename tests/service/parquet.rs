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

    let verify = |released: &Path| verify_adult(released).0;
    assert_eq!(verify(&dir.join("out.parquet")), 0);
    // Tampered: the first suppressed row un-suppressed with the original values of its input
    // row (written by the parquet crate's own writer, through deid's library).
    let tampered = unsuppressed(&rows);
    let text = as_csv(&header, &tampered, b';');
    let out = std::fs::File::create(dir.join("tampered.parquet")).unwrap();
    deid::parquet::csv_to_parquet(text.as_bytes(), b';', None, out, "tampered").unwrap();
    assert_eq!(verify(&dir.join("tampered.parquet")), 5);
}

/// adult's output `rows` with the first suppressed row replaced by its input row.
fn unsuppressed(rows: &[Vec<String>]) -> Vec<Vec<String>> {
    let input = std::fs::read_to_string(repo("examples/adult/adult.csv")).unwrap();
    let (_, input_rows) = csv_rows(&input, b';');
    let i = rows
        .iter()
        .position(|r| r[0] == "*")
        .expect("a suppressed row");
    let mut tampered = rows.to_vec();
    tampered[i] = input_rows[i].clone();
    tampered
}

/// `deid verify` of adult's k = 5 job (salary-class sensitive) on `released`, from
/// examples/adult: (exit status, stdout, stderr).
fn verify_adult(released: &Path) -> (i32, String, String) {
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
    deid(&args, &repo("examples/adult"))
}

/// Writes `rows` under `header` as Parquet part files of `per_part` rows each
/// (`dir/part-00000.parquet`, …) by deid's writer, with Spark's `_SUCCESS` marker and a hidden
/// checksum file beside them.
fn write_parts(dir: &Path, header: &[String], rows: &[Vec<String>], per_part: usize) {
    std::fs::create_dir_all(dir).unwrap();
    for (i, chunk) in rows.chunks(per_part).enumerate() {
        let text = as_csv(header, chunk, b';');
        let out = std::fs::File::create(dir.join(format!("part-{i:05}.parquet"))).unwrap();
        deid::parquet::csv_to_parquet(text.as_bytes(), b';', None, out, "part").unwrap();
    }
    std::fs::write(dir.join("_SUCCESS"), "").unwrap();
    std::fs::write(dir.join(".part-00000.parquet.crc"), "not parquet").unwrap();
}

/// A directory of Parquet part files (Spark's layout) is one table: `anonymize` on it gives
/// the CSV's report and output, `apply` of the plan to it writes the same bytes, `profile`
/// profiles the whole table and `verify` reads a release written as parts; a part whose
/// schema differs is refused naming the file and the column.
#[test]
fn a_directory_of_parquet_parts_is_one_table() {
    let dir = tmp_dir("parts");
    let csv_dir = tmp_dir("parts-csv");
    let adult = repo("examples/adult/adult.csv");
    let (header, rows) = csv_rows(&std::fs::read_to_string(&adult).unwrap(), b';');
    let parts = dir.join("adult.parquet");
    write_parts(&parts, &header, &rows, 10_000);
    let from_csv = anonymize(&csv_dir, &adult, "csv");
    let from_parts = anonymize(&dir, &parts, "csv");
    assert_eq!(without_timings(&from_csv), without_timings(&from_parts));
    let out = std::fs::read(dir.join("out.csv")).unwrap();
    assert_eq!(out, std::fs::read(csv_dir.join("out.csv")).unwrap());

    let run = |args: &[&str]| deid(args, &repo("examples/adult"));
    let applied = dir.join("applied.csv");
    let plan = dir.join("plan.csv.json");
    let (code, _, stderr) = run(&[
        "apply",
        "--quiet",
        "--plan",
        plan.to_str().unwrap(),
        "--input",
        parts.to_str().unwrap(),
        "--output",
        applied.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(std::fs::read(&applied).unwrap(), out);

    let profile = |input: &Path| {
        run(&[
            "profile",
            "--delimiter",
            ";",
            "--input",
            input.to_str().unwrap(),
        ])
    };
    let (code, from_parts, stderr) = profile(&parts);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(from_parts, profile(&adult).1);

    let (out_header, out_rows) = csv_rows(std::str::from_utf8(&out).unwrap(), b';');
    let released = dir.join("released");
    write_parts(&released, &out_header, &out_rows, 7_000);
    let (code, report, stderr) = verify_adult(&released);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["released_records"], 30162, "{report}");

    // A part whose second column has another name.
    let mut renamed = header.clone();
    renamed[1] = "years".into();
    write_parts(&dir.join("mixed"), &header, &rows[..100], 50);
    let text = as_csv(&renamed, &rows[100..200], b';');
    let odd = dir.join("mixed/part-00009.parquet");
    let file = std::fs::File::create(&odd).unwrap();
    deid::parquet::csv_to_parquet(text.as_bytes(), b';', None, file, "part").unwrap();
    let (code, _, stderr) = profile(&dir.join("mixed"));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("part-00009.parquet"), "{stderr}");
    assert!(
        stderr.contains("'years'") && stderr.contains(&format!("'{}'", header[1])),
        "{stderr}"
    );
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (code, _, stderr) = profile(&empty);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no *.parquet file"), "{stderr}");
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
    let result = resp.bytes().await.unwrap().to_vec();
    let (header, rows) = parquet_rows(result.clone());
    assert_eq!((header.clone(), rows.clone()), csv_rows(&csv.text, b','));
    check_k_anonymity(&as_csv(&header, &rows, b','), b',', &ADULT_QIS, 5, 603);
    verify_parquet_releases(&app, &job_id, result, &header, &rows).await;

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

    // Parquet in a multipart form: known by the part's media type or by its file name.
    let adult = std::fs::read(fixture("adult.parquet")).unwrap();
    for (file_name, media) in [
        ("adult.parquet", "application/octet-stream"),
        ("adult.bin", "application/vnd.apache.parquet"),
    ] {
        let r = app
            .send(multipart_upload(&app, file_name, media, &adult))
            .await;
        assert_eq!(r.status, 201, "{file_name}: {}", r.text);
        let ds = r.json();
        assert_eq!(
            (ds["rows"].as_i64(), ds["name"].as_str()),
            (Some(30162), Some(file_name))
        );
        assert_eq!(ds["delimiter"], ",", "{ds}");
        let columns: Vec<&str> = (ds["columns"].as_array().unwrap().iter())
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(columns, header, "{ds}");
    }
    // A CSV part stays CSV; a Parquet part that is not Parquet is refused as such.
    let csv_part = std::fs::read(repo("examples/adult/adult.csv")).unwrap();
    let r = app
        .send(multipart_upload(&app, "adult.csv", "text/csv", &csv_part))
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let v = app
        .send(multipart_upload(
            &app,
            "adult.parquet",
            "text/csv",
            &csv_part,
        ))
        .await
        .assert_error(422, "invalid_csv");
    assert_eq!(v["error"]["details"]["format"], "parquet", "{v}");
}

/// `POST /v1/datasets` with a multipart form whose `file` part is `bytes`, named `file_name`,
/// of type `media`.
fn multipart_upload(
    app: &TestApp,
    file_name: &str,
    media: &str,
    bytes: &[u8],
) -> reqwest::RequestBuilder {
    let boundary = "deid-test-boundary-7f3a";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; \
         filename=\"{file_name}\"\r\nContent-Type: {media}\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    app.request(reqwest::Method::POST, "/v1/datasets")
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
}

/// `POST /v1/jobs/{id}/verify` with Parquet bodies: the job's `result.parquet` passes; one
/// suppressed row un-suppressed fails; the release as a Parquet frequency table
/// (`?count_column=n`) passes with the same records and classes; a Parquet body that is not
/// readable is a 422 `invalid_csv` saying so.
async fn verify_parquet_releases(
    app: &TestApp,
    job: &str,
    result: Vec<u8>,
    header: &[String],
    rows: &[Vec<String>],
) {
    let verify = |body: Vec<u8>, query: &str| {
        app.request(
            reqwest::Method::POST,
            &format!("/v1/jobs/{job}/verify?{query}"),
        )
        .header("content-type", "application/vnd.apache.parquet")
        .body(body)
    };
    let r = app.send(verify(result.clone(), "")).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let passed = r.json();
    assert_eq!(passed["passed"], true, "{passed}");
    assert_eq!(passed["released_records"], 30162, "{passed}");
    assert_eq!(passed["released_rows"], 30162, "{passed}");

    // Tampered: the first suppressed row gets the input values of its row.
    let tampered = unsuppressed(rows);
    let r = app
        .send(verify(to_parquet(header, &tampered, None), ""))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["passed"], false, "{}", r.text);

    // The release grouped on all its columns, with the count column `n`.
    let mut counts: Vec<(Vec<String>, u64)> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for row in rows {
        let at = *index.entry(row.clone()).or_insert_with(|| {
            counts.push((row.clone(), 0));
            counts.len() - 1
        });
        counts[at].1 += 1;
    }
    let mut freq_header = header.to_vec();
    freq_header.push("n".into());
    let freq_rows: Vec<Vec<String>> = (counts.iter())
        .map(|(row, n)| row.iter().cloned().chain([n.to_string()]).collect())
        .collect();
    let r = app
        .send(verify(
            to_parquet(&freq_header, &freq_rows, Some("n")),
            "count_column=n",
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let grouped = r.json();
    assert_eq!(grouped["passed"], true, "{grouped}");
    assert_eq!(grouped["released_rows"], freq_rows.len(), "{grouped}");
    for field in [
        "released_records",
        "suppressed_records",
        "classes",
        "class_sizes",
    ] {
        assert_eq!(grouped[field], passed[field], "{field}");
    }

    let mut truncated = result;
    truncated.truncate(truncated.len() / 2);
    let v = app
        .send(verify(truncated, ""))
        .await
        .assert_error(422, "invalid_csv");
    assert_eq!(v["error"]["details"]["format"], "parquet", "{v}");
}

/// `header` and `rows` (`,`-separated) as Parquet, by deid's writer (`count`: an INT64 count
/// column).
fn to_parquet(header: &[String], rows: &[Vec<String>], count: Option<&str>) -> Vec<u8> {
    let text = as_csv(header, rows, b',');
    deid::parquet::csv_to_parquet(text.as_bytes(), b',', count, Vec::new(), "release").unwrap()
}
