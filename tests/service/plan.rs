//! The recoding plan: `deid apply --plan` reproduces `deid anonymize --output` byte for byte
//! (Flash, Lightning, genetic with a seed, local generalization, microaggregation, every
//! suppression mode, a frequency table); rows the plan does not cover are suppressed and
//! counted, `--strict` fails; tampered plans, other versions and other columns are refused;
//! `GET /v1/jobs/{id}/plan` gives the command line's plan for the same specification (its
//! digest included); the plan
//! does not grow with the rows.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::cli::deid;
use crate::helpers::*;

fn tmp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("deid-plan-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The privacy model and suppression limit of most tests.
const K5: [&str; 4] = [
    "--privacy",
    "k-anonymity(k=5)",
    "--suppression-limit",
    "0.05",
];

/// `deid anonymize` on adult (run in examples/adult) with `extra` flags, writing `out.csv` and
/// `plan.json` to `dir`.
fn anonymize(dir: &Path, extra: &[&str]) {
    let (out, plan) = (dir.join("out.csv"), dir.join("plan.json"));
    let mut args = vec![
        "anonymize",
        "--delimiter",
        ";",
        "--time-limit",
        "5s",
        "--quiet",
        "--output",
        out.to_str().unwrap(),
        "--plan-output",
        plan.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, _, stderr) = deid(&args, &repo("examples/adult"));
    assert_eq!(code, 0, "{extra:?}: {stderr}");
}

/// `deid apply` of `dir/plan.json` to `input` (relative to examples/adult) into `dir/applied.csv`:
/// (exit code, stderr).
fn apply(dir: &Path, plan: &str, input: &Path, extra: &[&str]) -> (i32, String) {
    let applied = dir.join("applied.csv");
    let plan = dir.join(plan);
    let mut args = vec![
        "apply",
        "--plan",
        plan.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--output",
        applied.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, _, stderr) = deid(&args, &repo("examples/adult"));
    (code, stderr)
}

fn hierarchy_flags(qis: &[&str]) -> Vec<String> {
    qis.iter()
        .flat_map(|q| {
            [
                "--hierarchy".to_string(),
                format!("{q}=adult_hierarchy_{q}.csv"),
            ]
        })
        .collect()
}

/// adult grouped on all its columns with a count column `n` (rows in order of first
/// appearance).
fn adult_frequency_table() -> String {
    let text = std::fs::read_to_string(repo("examples/adult/adult.csv")).unwrap();
    let mut lines = text.lines();
    let mut out = format!("{};n\n", lines.next().unwrap());
    let mut counts: HashMap<&str, u32> = HashMap::new();
    let mut order = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let n = counts.entry(line).or_insert(0);
        if *n == 0 {
            order.push(line);
        }
        *n += 1;
    }
    for line in order {
        out += &format!("{line};{}\n", counts[line]);
    }
    out
}

/// Every algorithm, local generalization, microaggregation, every suppression mode and a
/// frequency table: `apply` writes `anonymize --output`'s bytes.
#[test]
fn apply_reproduces_anonymize_byte_for_byte() {
    let dir = tmp_dir("reproduce");
    std::fs::write(dir.join("freq.csv"), adult_frequency_table()).unwrap();
    let qis = hierarchy_flags(&ADULT_QIS);
    let freq = dir.join("freq.csv");
    let freq = freq.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--algorithm", "flash"],
        vec!["--algorithm", "lightning", "--suppressed", "remove"],
        vec!["--algorithm", "genetic", "--seed", "7", "--iterations", "5"],
        vec!["--algorithm", "flash", "--local-iterations", "10"],
        vec![
            "--algorithm",
            "flash",
            "--sensitive",
            "salary-class",
            "--suppressed",
            "keep_sensitive",
        ],
        vec![
            "--algorithm",
            "flash",
            "--sensitive",
            "salary-class",
            "--suppression-marker",
            "=x",
            "--neutralize-formulas",
        ],
        vec![
            "--algorithm",
            "flash",
            "--input",
            freq,
            "--count-column",
            "n",
            "--suppressed",
            "remove",
        ],
    ];
    for case in cases {
        let mut args: Vec<&str> = qis.iter().map(String::as_str).chain(K5).collect();
        if !case.contains(&"--input") {
            args.extend(["--input", "adult.csv"]);
        }
        args.extend(case.iter().copied());
        anonymize(&dir, &args);
        let input = match case.contains(&"--input") {
            true => PathBuf::from(freq),
            false => repo("examples/adult/adult.csv"),
        };
        let (code, stderr) = apply(&dir, "plan.json", &input, &["--strict"]);
        assert_eq!(code, 0, "{case:?}: {stderr}");
        assert!(
            stderr.contains("0 rows (0 records) not covered"),
            "{stderr}"
        );
        let (out, applied) = (
            std::fs::read(dir.join("out.csv")).unwrap(),
            std::fs::read(dir.join("applied.csv")).unwrap(),
        );
        assert!(out == applied, "{case:?}: apply differs from anonymize");
    }
    // Microaggregation: age as its class's mean, the others generalized.
    let qis = hierarchy_flags(&["sex", "race", "marital-status", "education"]);
    let mut args: Vec<&str> = qis.iter().map(String::as_str).chain(K5).collect();
    args.extend([
        "--input",
        "adult.csv",
        "--microaggregate",
        "age=arithmetic_mean",
    ]);
    anonymize(&dir, &args);
    let (code, stderr) = apply(&dir, "plan.json", &repo("examples/adult/adult.csv"), &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        std::fs::read(dir.join("out.csv")).unwrap()
            == std::fs::read(dir.join("applied.csv")).unwrap()
    );
    let plan: Value =
        serde_json::from_slice(&std::fs::read(dir.join("plan.json")).unwrap()).unwrap();
    assert_eq!(plan["microaggregated"], serde_json::json!(["age"]));
}

/// A value the plan never saw is suppressed and counted; `--strict` fails naming the row and
/// the column; a tampered plan, another version and other columns are refused by name.
#[test]
fn apply_fails_closed_and_refuses_other_plans() {
    let dir = tmp_dir("refuse");
    let qis = hierarchy_flags(&ADULT_QIS);
    let mut args: Vec<&str> = qis.iter().map(String::as_str).chain(K5).collect();
    args.extend(["--input", "adult.csv", "--algorithm", "flash"]);
    anonymize(&dir, &args);
    let text = std::fs::read_to_string(repo("examples/adult/adult.csv")).unwrap();
    let mut lines: Vec<&str> = text.lines().take(4).collect();
    let header: Vec<&str> = lines[0].split(';').collect();
    let age = header.iter().position(|h| *h == "age").unwrap();
    let mut cells: Vec<&str> = lines[3].split(';').collect();
    cells[age] = "999";
    let changed = cells.join(";");
    lines[3] = &changed;
    std::fs::write(dir.join("new.csv"), lines.join("\n") + "\n").unwrap();
    let (code, stderr) = apply(&dir, "plan.json", &dir.join("new.csv"), &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("1 rows (1 records) not covered"),
        "{stderr}"
    );
    let applied = std::fs::read_to_string(dir.join("applied.csv")).unwrap();
    let row: Vec<&str> = applied.lines().nth(3).unwrap().split(';').collect();
    assert!(
        row.iter().filter(|c| **c == "*").count() >= ADULT_QIS.len(),
        "{applied}"
    );
    let (code, stderr) = apply(&dir, "plan.json", &dir.join("new.csv"), &["--strict"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("row 3") && stderr.contains("column 'age'"),
        "{stderr}"
    );
    assert!(!dir.join("applied.csv").exists(), "no output is kept");

    let plan = std::fs::read_to_string(dir.join("plan.json")).unwrap();
    let adult = repo("examples/adult/adult.csv");
    let refused = |name: &str, text: String, input: &Path, expected: &[&str]| {
        std::fs::write(dir.join(name), text).unwrap();
        let (code, stderr) = apply(&dir, name, input, &[]);
        assert_eq!(code, 2, "{name}: {stderr}");
        for e in expected {
            assert!(stderr.contains(e), "{name}: {stderr}");
        }
    };
    let mut v: Value = serde_json::from_str(&plan).unwrap();
    let class = v["classes"][0]["values"][0].as_str().unwrap().to_string();
    v["classes"][0]["values"][0] = Value::from(format!("{class}x"));
    refused(
        "tampered.json",
        v.to_string(),
        &adult,
        &["'digest'", "changed"],
    );
    let mut v: Value = serde_json::from_str(&plan).unwrap();
    v["version"] = 2.into();
    refused(
        "version.json",
        v.to_string(),
        &adult,
        &["'version'", "version 1", "got 2"],
    );
    let mut v: Value = serde_json::from_str(&plan).unwrap();
    v["format"] = "arx".into();
    refused(
        "format.json",
        v.to_string(),
        &adult,
        &["'format'", "deid-plan"],
    );
    let mut other = text.replacen("age", "years", 1);
    other.truncate(other.find('\n').unwrap() + 1);
    other += text.lines().nth(1).unwrap();
    std::fs::write(dir.join("other.csv"), other).unwrap();
    refused(
        "plan2.json",
        plan.clone(),
        &dir.join("other.csv"),
        &["'years'", "expects 'age'"],
    );
}

/// The same data ten times (k ten times larger) give the same plan except for the input's
/// digest and the plan's.
#[test]
fn the_plan_does_not_grow_with_the_rows() {
    let dir = tmp_dir("size");
    let text = std::fs::read_to_string(repo("examples/adult/adult.csv")).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let rows: Vec<&str> = lines.take(3000).collect();
    std::fs::write(
        dir.join("x1.csv"),
        format!("{header}\n{}\n", rows.join("\n")),
    )
    .unwrap();
    let ten = rows.repeat(10).join("\n");
    std::fs::write(dir.join("x10.csv"), format!("{header}\n{ten}\n")).unwrap();
    let qis = hierarchy_flags(&ADULT_QIS);
    let plan_of = |input: &str, k: &str| -> Value {
        let mut args: Vec<&str> = qis.iter().map(String::as_str).collect();
        let input = dir.join(input);
        args.extend([
            "--input",
            input.to_str().unwrap(),
            "--algorithm",
            "flash",
            "--privacy",
            k,
        ]);
        anonymize(&dir, &args);
        serde_json::from_slice(&std::fs::read(dir.join("plan.json")).unwrap()).unwrap()
    };
    let mut one = plan_of("x1.csv", "k-anonymity(k=2)");
    let mut ten = plan_of("x10.csv", "k-anonymity(k=20)");
    assert!(!one["classes"].as_array().unwrap().is_empty());
    for plan in [&mut one, &mut ten] {
        let audit = plan["audit"].as_object_mut().unwrap();
        audit.remove("input_sha256");
        audit.remove("specification_sha256");
        plan.as_object_mut().unwrap().remove("digest");
    }
    assert_eq!(one, ten);
}

/// `GET /v1/jobs/{id}/plan` of an adult job is the command line's plan for the same
/// specification (the specification's digest and the plan's digest included), and applied to adult it writes the
/// job's result.csv; jobs without a plan answer 409, unknown ones 404.
async fn http_plan_is_the_cli_plan(kind: Db) {
    let Some(app) = spawn_app(kind).await else {
        return;
    };
    let id = upload_adult(&app).await;
    let mut spec = adult_job(&id, 5, 0.02);
    spec["algorithm"] = "flash".into();
    spec["time_limit"] = "5s".into();
    let job = app.create_job(&spec).await;
    let job_id = job["id"].as_str().unwrap().to_string();
    app.wait_job(&job_id, Duration::from_secs(120), finished)
        .await;
    let r = app.get(&format!("/v1/jobs/{job_id}/plan")).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let http: Value = r.json();
    let csv = app.get(&format!("/v1/jobs/{job_id}/result.csv")).await.text;

    let dir = tmp_dir(&format!("http-{kind:?}"));
    let mut args: Vec<String> = hierarchy_flags(&ADULT_QIS);
    for a in [
        "--input",
        "adult.csv",
        "--algorithm",
        "flash",
        "--sensitive",
        "salary-class",
    ] {
        args.push(a.into());
    }
    let mut flags: Vec<&str> = args.iter().map(String::as_str).collect();
    flags.extend([
        "--privacy",
        "k-anonymity(k=5)",
        "--suppression-limit",
        "0.02",
    ]);
    anonymize(&dir, &flags);
    let cli: Value =
        serde_json::from_slice(&std::fs::read(dir.join("plan.json")).unwrap()).unwrap();
    std::fs::write(dir.join("http.json"), http.to_string()).unwrap();
    let (code, stderr) = apply(
        &dir,
        "http.json",
        &repo("examples/adult/adult.csv"),
        &["--strict"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.join("applied.csv")).unwrap(),
        csv
    );
    // The same job gives the same plan, the specification's digest included: the normalized
    // specification is one thing whichever front end ran the job.
    assert_eq!(
        http["audit"]["specification_sha256"],
        cli["audit"]["specification_sha256"]
    );
    assert_eq!(http, cli);

    let mut evaluate = spec.clone();
    evaluate["task"] = "evaluate".into();
    evaluate["levels"] = serde_json::json!({});
    evaluate.as_object_mut().unwrap().remove("algorithm");
    let job = app.create_job(&evaluate).await;
    let eval_id = job["id"].as_str().unwrap().to_string();
    app.wait_job(&eval_id, Duration::from_secs(120), finished)
        .await;
    app.get(&format!("/v1/jobs/{eval_id}/plan"))
        .await
        .assert_error(409, "result_not_available");
    app.get("/v1/jobs/01a20000-0000-7000-8000-000000000000/plan")
        .await
        .assert_error(404, "job_not_found");
    app.stop().await;
}

crate::both_databases!(
    http_plan_is_the_cli_plan,
    http_plan_is_the_cli_plan_sqlite,
    http_plan_is_the_cli_plan_postgres
);
