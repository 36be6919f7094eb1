//! `deid evaluate` end to end, and every input error naming its culprit.

use std::path::{Path, PathBuf};
use std::process::Command;

fn tmp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("deid-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the `deid` binary in `cwd`: (exit code, stdout, stderr).
pub(crate) fn deid(args: &[&str], cwd: &Path) -> (i32, String, String) {
    deid_with_env(args, &[], cwd)
}

fn deid_with_env(args: &[&str], env: &[(&str, &str)], cwd: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_deid"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(cwd)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const DATA: &str = "name,age,zip,disease\nAnn,34,81667,flu\nBob,45,81675,cold\nCid,66,81925,flu\nDan,70,81931,cold\n";
const AGE: &str = "34;<50;*\n45;<50;*\n66;>=50;*\n70;>=50;*\n";

fn setup(name: &str, data: &[u8], age: &str) -> PathBuf {
    let dir = tmp_dir(name);
    std::fs::write(dir.join("data.csv"), data).unwrap();
    std::fs::write(dir.join("age.csv"), age).unwrap();
    dir
}

fn evaluate(dir: &Path, extra: &[&str]) -> (i32, String, String) {
    evaluate_with(dir, "k-anonymity(k=2)", extra)
}

/// `deid evaluate` of data.csv with age=age.csv, name identifying and `model`.
fn evaluate_with(dir: &Path, model: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "evaluate",
        "--input",
        "data.csv",
        "--hierarchy",
        "age=age.csv",
        "--identifying",
        "name",
        "--privacy",
        model,
    ];
    args.extend_from_slice(extra);
    deid(&args, dir)
}

#[test]
fn evaluate_reports_and_writes_output() {
    let dir = setup("ok", DATA.as_bytes(), AGE);
    let (code, stdout, stderr) = evaluate(&dir, &["--levels", "age=1", "--output", "out.csv"]);
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["anonymous"], true);
    assert_eq!(report["transformation"]["age"], 1);
    assert_eq!(report["classes"], 2);
    assert_eq!(report["suppressed_rows"], 0);
    assert_eq!(report["quality"]["loss"]["score"], report["score"]);
    for m in [
        "aecs",
        "discernibility",
        "precision",
        "height",
        "entropy",
        "kl-divergence",
        "ambiguity",
    ] {
        let u = report["quality"][m]["utility"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&u), "{m}: {u}");
    }
    assert!(report["per_attribute"]["age"].is_number());
    assert_eq!(report["risk"]["input"]["sample_uniques"], 4);
    assert_eq!(report["risk"]["output"]["highest_risk"], 0.5);
    let out = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    assert_eq!(
        out,
        "age,zip,disease\n<50,81667,flu\n<50,81675,cold\n>=50,81925,flu\n>=50,81931,cold\n"
    );
    // Same settings from a JSON configuration.
    let config = r#"{"input": "data.csv", "attributes": {"age": {"type": "quasi_identifying",
        "hierarchy": {"file": "age.csv"}}, "name": {"type": "identifying"}},
        "privacy": [{"model": "k-anonymity", "k": 2}], "levels": {"age": 0}}"#;
    std::fs::write(dir.join("job.json"), config).unwrap();
    let (code, stdout, stderr) = deid(&["evaluate", "--config", "job.json"], &dir);
    // Not anonymous at level 0 without suppression: the report, and exit status 4.
    assert_eq!(code, 4, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["anonymous"], false);
    assert_eq!(report["suppressed_rows"], 4);
}

fn assert_error(dir: &Path, extra: &[&str], needles: &[&str]) {
    let (code, _, stderr) = evaluate(dir, extra);
    assert_eq!(code, 2, "expected failure, stderr: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "'{n}' not in: {stderr}");
    }
}

#[test]
fn data_errors_name_the_culprit() {
    let ragged = setup("ragged", b"name,age,zip\nAnn,34,1\nBob,45\n", AGE);
    assert_error(&ragged, &[], &["row 3 has 2 fields, expected 3"]);
    let open = setup("open", b"name,age\nAnn,34\n\"Bob,45\nCid,56\n", AGE);
    assert_error(&open, &[], &["row 3: a quoted field is not closed"]);
    // A column has one role.
    let roles = setup("roles", DATA.as_bytes(), AGE);
    assert_error(
        &roles,
        &["--sensitive", "disease", "--identifying", "disease"],
        &["column 'disease' is given --identifying and --sensitive"],
    );
    assert_error(
        &roles,
        &["--identifying", "age"],
        &["column 'age' is given --identifying and --hierarchy"],
    );
    // A negative number is a value (and out of range), not a flag.
    assert_error(
        &roles,
        &["--suppression-limit", "-0.1"],
        &["'suppression_limit'", "got -0.1"],
    );
    let utf8 = setup("utf8", b"name,age\nAnn,34\nB\xffb,45\n", AGE);
    assert_error(&utf8, &[], &["row 3, column 1", "UTF-8"]);
    let empty = setup("empty", b"", AGE);
    assert_error(&empty, &[], &["data.csv", "empty"]);
    let dup = setup("dup", b"name,age,age\nAnn,34,3\n", AGE);
    assert_error(&dup, &[], &["'age'", "more than once"]);
    let ok = setup("unknown", DATA.as_bytes(), AGE);
    assert_error(
        &ok,
        &["--sensitive", "diagnosis"],
        &["'diagnosis'", "age, zip, disease"],
    );
}

#[test]
fn hierarchy_errors_name_the_culprit() {
    let missing = setup("missing", DATA.as_bytes(), "34;<50;*\n45;<50;*\n");
    assert_error(&missing, &[], &["'age'", "'66', '70'"]);
    let ragged = setup(
        "hragged",
        DATA.as_bytes(),
        "34;<50;*\n45;<50\n66;>=50;*\n70;>=50;*\n",
    );
    assert_error(&ragged, &[], &["row 2 has 2 levels, expected 3"]);
    let nonmono = setup(
        "nonmono",
        DATA.as_bytes(),
        "34;young;a\n45;young;b\n66;old;*\n70;old;*\n",
    );
    assert_error(&nonmono, &[], &["not monotone", "'young'", "'a'", "'b'"]);
}

#[test]
fn hierarchy_duplicates_flag_and_config() {
    // '45' is listed in rows 2 and 5 with different generalizations; the last row says >=50.
    let age = "34;<50;*\n45;<50;*\n66;>=50;*\n70;>=50;*\n45;>=50;*\n";
    let dir = setup("duplicates", DATA.as_bytes(), age);
    assert_error(
        &dir,
        &["--levels", "age=1"],
        &["'45' (rows 2, 5)", "--hierarchy-duplicates last"],
    );
    assert_error(
        &dir,
        &["--levels", "age=1", "--hierarchy-duplicates", "reject"],
        &["'45' (rows 2, 5)"],
    );
    let (code, _, stderr) = evaluate(&dir, &["--hierarchy-duplicates", "first"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("expected 'reject' or 'last', got 'first'"),
        "{stderr}"
    );
    let warned = |report: &serde_json::Value| {
        let w = report["warnings"].as_array().expect("warnings");
        assert_eq!(w.len(), 1, "{report}");
        let w = w[0].as_str().unwrap();
        assert!(
            w.contains("column 'age'") && w.contains("'45' (rows 2, 5)"),
            "{w}"
        );
    };
    let (code, stdout, stderr) = evaluate(
        &dir,
        &[
            "--levels",
            "age=1",
            "--hierarchy-duplicates",
            "last",
            "--output",
            "out.csv",
            "--suppression-limit",
            "0.25",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    warned(&serde_json::from_str(&stdout).unwrap());
    // 45 is generalized by its last row (>=50), which leaves 34 alone under <50: suppressed.
    let out = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    assert_eq!(
        out,
        "age,zip,disease\n*,81667,flu\n>=50,81675,cold\n>=50,81925,flu\n>=50,81931,cold\n"
    );
    // anonymize takes the flag too, and a configuration file the setting.
    std::fs::write(dir.join("zip.json"), r#"{"type": "masking"}"#).unwrap();
    let mut args = ANONYMIZE_K2.to_vec();
    args.extend(["flash", "--hierarchy-duplicates", "last"]);
    let (code, stdout, stderr) = deid(&args, &dir);
    assert_eq!(code, 0, "{stderr}");
    warned(&serde_json::from_str(&stdout).unwrap());
    let config = r#"{"input": "data.csv", "attributes": {"age": {"type": "quasi_identifying",
        "hierarchy": {"file": "age.csv"}}, "name": {"type": "identifying"}},
        "privacy": ["k-anonymity(k=2)"], "levels": {"age": 1}, "suppression_limit": 0.25,
        "hierarchy_duplicates": "last"}"#;
    std::fs::write(dir.join("job.json"), config).unwrap();
    let (code, stdout, stderr) = deid(&["evaluate", "--config", "job.json"], &dir);
    assert_eq!(code, 0, "{stderr}");
    warned(&serde_json::from_str(&stdout).unwrap());
    // Without duplicates there is no `warnings` key.
    let plain = setup("noduplicates", DATA.as_bytes(), AGE);
    let (code, stdout, _) = evaluate(&plain, &["--levels", "age=1"]);
    assert_eq!(code, 0);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(report.get("warnings").is_none(), "{report}");
}

#[test]
fn config_errors_name_the_field() {
    let dir = setup("config", DATA.as_bytes(), AGE);
    assert_error(&dir, &["--levels", "age=7"], &["got 7", "levels.age"]);
    assert_error(
        &dir,
        &["--suppression-limit", "1.5"],
        &["suppression_limit", "1.5"],
    );
    assert_error(&dir, &["--quality", "lost"], &["'lost'"]);
    assert_error(&dir, &["--privacy", "k-anonymity(k=9)"], &["9", "only 4"]);
    assert_error(
        &dir,
        &["--privacy", "distinct-l-diversity(attribute=disease,l=2)"],
        &["'disease'", "sensitive"],
    );
}

#[test]
fn builder_specifications_work_as_hierarchies() {
    let dir = setup("builder", DATA.as_bytes(), AGE);
    std::fs::write(dir.join("age.json"), r#"{"type": "interval", "width": 50}"#).unwrap();
    std::fs::write(dir.join("zip.json"), r#"{"type": "masking"}"#).unwrap();
    let (code, stdout, stderr) = deid(
        &[
            "evaluate",
            "--input",
            "data.csv",
            "--hierarchy",
            "age=age.json",
            "--hierarchy",
            "zip=zip.json",
            "--identifying",
            "name",
            "--privacy",
            "k-anonymity(k=2)",
            "--levels",
            "age=1,zip=2",
            "--output",
            "out.csv",
        ],
        &dir,
    );
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["anonymous"], true);
    let out = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    assert_eq!(
        out,
        "age,zip,disease\n\"[0, 50[\",816**,flu\n\"[0, 50[\",816**,cold\n\"[50, 100[\",819**,flu\n\"[50, 100[\",819**,cold\n"
    );
    // `deid hierarchy` prints the table; an invalid specification names the problem.
    let (code, stdout, _) = deid(
        &[
            "hierarchy",
            "--input",
            "data.csv",
            "--column",
            "zip",
            "--spec",
            "zip.json",
        ],
        &dir,
    );
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with("81667;8166*;816**;81***;8****;*****\n"),
        "{stdout}"
    );
    std::fs::write(dir.join("bad.json"), r#"{"type": "interval", "widht": 5}"#).unwrap();
    let (code, _, stderr) = deid(
        &[
            "hierarchy",
            "--input",
            "data.csv",
            "--column",
            "age",
            "--spec",
            "bad.json",
        ],
        &dir,
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("widht"), "{stderr}");
    // `deid profile` detects types.
    let (code, stdout, _) = deid(&["profile", "--input", "data.csv"], &dir);
    assert_eq!(code, 0);
    let profiles: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(profiles[1]["name"], "age");
    assert_eq!(profiles[1]["detected_type"], "integer");
}

/// `deid anonymize` on the test data with both hierarchies and 2-anonymity, up to the
/// algorithm's name.
const ANONYMIZE_K2: [&str; 12] = [
    "anonymize",
    "--input",
    "data.csv",
    "--hierarchy",
    "age=age.csv",
    "--hierarchy",
    "zip=zip.json",
    "--identifying",
    "name",
    "--privacy",
    "k-anonymity(k=2)",
    "--algorithm",
];

#[test]
fn anonymize_searches_and_reports() {
    let dir = setup("anonymize", DATA.as_bytes(), AGE);
    std::fs::write(dir.join("zip.json"), r#"{"type": "masking"}"#).unwrap();
    for algorithm in [
        "flash",
        "lightning",
        "genetic",
        "top-down",
        "bfs",
        "datafly",
        "igreedy",
        "exhaustive",
        "auto",
    ] {
        let mut args = ANONYMIZE_K2.to_vec();
        args.extend([
            algorithm,
            "--time-limit",
            "2s",
            "--seed",
            "3",
            "--output",
            "out.csv",
        ]);
        let (code, stdout, stderr) = deid(&args, &dir);
        assert_eq!(code, 0, "{algorithm}: {stderr}");
        let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(r["anonymous"], true, "{algorithm}");
        for field in [
            "algorithm",
            "levels",
            "checks",
            "elapsed_ms",
            "best_found_ms",
            "optimal_proven",
            "trace",
            "transformation",
            "quality",
            "risk",
        ] {
            assert!(!r[field].is_null(), "{algorithm}: {field} missing");
        }
        let trace = r["trace"].as_array().unwrap();
        assert!(!trace.is_empty());
        assert_eq!(trace.last().unwrap()["score"], r["score"]);
        // Every class of the output has at least 2 records.
        let out = std::fs::read_to_string(dir.join("out.csv")).unwrap();
        let mut counts = std::collections::HashMap::new();
        for line in out.lines().skip(1) {
            let f: Vec<&str> = line.split(',').collect();
            *counts
                .entry((f[0].to_string(), f[1].to_string()))
                .or_insert(0) += 1;
        }
        assert!(counts.values().all(|&c| c >= 2), "{algorithm}: {out}");
    }
    // Flash proves optimality; an unknown algorithm exits with status 2 and lists the valid ones.
    let (_, stdout, _) = deid(&[ANONYMIZE_K2.as_slice(), &["flash"]].concat(), &dir);
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["optimal_proven"], true);
    // The genetic algorithm evolves until it has checked this small space (and then proves the
    // optimum), unless told to stop after its generations.
    let genetic = |extra: &[&str]| {
        let mut args = ANONYMIZE_K2.to_vec();
        args.extend(["genetic", "--subpopulation-size", "2"]);
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = deid(&args, &dir);
        assert_eq!(code, 0, "{stderr}");
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap()
    };
    let full = genetic(&[]);
    assert_eq!(full["optimal_proven"], true);
    let space = full["solution_space"]
        .as_str()
        .unwrap()
        .parse::<u64>()
        .unwrap();
    assert_eq!(full["checks"].as_u64().unwrap(), space);
    assert!(space > 6, "{space}");
    // Two subpopulations of 2 (4 individuals), then one generation breeds 1 per subpopulation.
    let short = genetic(&["--stop-after-iterations", "--iterations", "1"]);
    assert!(short["checks"].as_u64().unwrap() <= 6, "{short}");
    let (code, _, stderr) = deid(&[ANONYMIZE_K2.as_slice(), &["quantum"]].concat(), &dir);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("'quantum'") && stderr.contains("lightning"),
        "{stderr}"
    );
}

/// `--algorithm`, `--quality` and `--log-format` (flag or `DEID_LOG_FORMAT`) accept only the
/// names they know: anything else exits with status 2 and the list of valid values.
#[test]
fn unknown_names_are_rejected_with_the_valid_ones() {
    let dir = setup("names", DATA.as_bytes(), AGE);
    let expect = |(code, _, stderr): (i32, String, String), needles: &[&str]| {
        assert_eq!(code, 2, "expected failure, stderr: {stderr}");
        assert!(stderr.contains("possible values"), "{stderr}");
        for n in needles {
            assert!(stderr.contains(n), "'{n}' not in: {stderr}");
        }
    };
    expect(
        deid(&[ANONYMIZE_K2.as_slice(), &["quantum"]].concat(), &dir),
        &["'quantum'", "--algorithm", "improved-greedy", "exhaustive"],
    );
    expect(
        evaluate(&dir, &["--quality", "lost"]),
        &[
            "'lost'",
            "--quality",
            "discernibility-star",
            "kl-divergence",
        ],
    );
    // A non-loopback address without API keys: were the format accepted, the service would
    // refuse to start with another message instead of running.
    let serve = ["serve", "--bind", "0.0.0.0:0", "--data-dir", "data"];
    let no_keys = ("DEID_API_KEYS", "");
    expect(
        deid_with_env(
            &[serve.as_slice(), &["--log-format", "jsno"]].concat(),
            &[no_keys],
            &dir,
        ),
        &["'jsno'", "--log-format", "text", "json"],
    );
    expect(
        deid_with_env(&serve, &[no_keys, ("DEID_LOG_FORMAT", "jsno")], &dir),
        &["'jsno'", "text", "json"],
    );
    // `deid` without a subcommand serves with the environment's settings.
    expect(
        deid_with_env(
            &[],
            &[
                no_keys,
                ("DEID_BIND", "0.0.0.0:0"),
                ("DEID_DATA_DIR", "data"),
                ("DEID_LOG_FORMAT", "jsno"),
            ],
            &dir,
        ),
        &["'jsno'", "text", "json"],
    );
    // Valid names are accepted (the alias too); they run as before.
    let (code, stdout, stderr) = evaluate(
        &dir,
        &["--quality", "discernibility-star", "--levels", "age=1"],
    );
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["quality_model"], "discernibility-star");
}

/// `auto` on generated census-like data (`deid bench generate`): the portfolio's output is
/// verified from the CSV alone (classes by their published values, suppressed rows are those
/// whose quasi-identifiers are all `*`), the trace names portfolio members, and the result does
/// not depend on the number of threads.
#[test]
fn auto_on_generated_data_is_verified_from_the_output_and_deterministic() {
    const QIS: [&str; 10] = deid::cli::synth::QUASI_IDENTIFIERS;
    let dir = tmp_dir("scale");
    let (code, _, stderr) = deid(
        &[
            "bench", "generate", "--rows", "40000", "--dir", ".", "--seed", "5",
        ],
        &dir,
    );
    assert_eq!(code, 0, "{stderr}");
    let data = dir.join("synth-40000");
    let run = |threads: &str, output: &str| {
        let mut args: Vec<String> = [
            "anonymize",
            "--input",
            "synth-40000.csv",
            "--delimiter",
            ";",
            "--sensitive",
            "diagnosis",
            "--privacy",
            "k-anonymity(k=5)",
            "--suppression-limit",
            "0.05",
            "--algorithm",
            "auto",
            "--check-limit",
            "150",
            "--time-limit",
            "10m",
            "--threads",
            threads,
            "--output",
            output,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for q in QIS {
            args.push("--hierarchy".into());
            args.push(format!("{q}=synth-40000_hierarchy_{q}.csv"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stdout, stderr) = deid(&args, &data);
        assert_eq!(code, 0, "{stderr}");
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap()
    };
    let one = run("1", "one.csv");
    let two = run("2", "two.csv");
    assert_eq!(one["algorithm"], "auto");
    assert_eq!(one["stop"], "check-limit");
    assert_eq!(one["levels"], two["levels"], "independent of threads");
    assert_eq!(
        one["trace"].as_array().unwrap().len(),
        two["trace"].as_array().unwrap().len()
    );
    let members = ["bfs", "top-down", "genetic", "lightning", "flash"];
    for t in one["trace"].as_array().unwrap() {
        assert!(members.contains(&t["strategy"].as_str().unwrap()), "{t}");
    }
    assert!(one["timings"]["load_ms"].as_f64().unwrap() > 0.0);
    let out = std::fs::read(data.join("one.csv")).unwrap();
    assert_eq!(out, std::fs::read(data.join("two.csv")).unwrap());
    // Independent verification: classes are the distinct published QI tuples.
    let text = String::from_utf8(out).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(';').collect();
    let idx: Vec<usize> = QIS
        .iter()
        .map(|q| header.iter().position(|h| h == q).unwrap())
        .collect();
    let mut classes: std::collections::HashMap<Vec<String>, usize> = Default::default();
    let (mut rows, mut suppressed) = (0usize, 0usize);
    for line in lines {
        let f: Vec<&str> = line.split(';').collect();
        rows += 1;
        let key: Vec<String> = idx.iter().map(|&i| f[i].to_string()).collect();
        if key.iter().all(|v| v == "*") {
            suppressed += 1;
        } else {
            *classes.entry(key).or_default() += 1;
        }
    }
    assert_eq!(rows, 40000);
    assert!(suppressed <= 2000, "{suppressed} suppressed");
    assert_eq!(
        one["suppressed_rows"].as_u64().unwrap() as usize,
        suppressed
    );
    assert!(classes.values().all(|&c| c >= 5), "a class below k=5");
    // Published classes: the report's (suppressed ones included) at least as many.
    assert!(one["classes"].as_u64().unwrap() as usize >= classes.len());
}

/// `deid bench scale --seeds`: one row per seed with the seed in its column, each run a
/// separate `deid anonymize` that found a solution; a malformed list names the flag.
#[test]
fn bench_scale_runs_every_seed() {
    let dir = tmp_dir("bench-scale");
    let (code, stdout, stderr) = deid(
        &[
            "bench",
            "scale",
            "--rows",
            "3000",
            "--dir",
            ".",
            "--time-limits",
            "1s",
            "--seeds",
            "0,2-3",
        ],
        &dir,
    );
    assert_eq!(code, 0, "{stderr}");
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.starts_with("| 3000 |"))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    let header: Vec<&str> = stdout
        .lines()
        .next()
        .unwrap()
        .trim_matches('|')
        .split('|')
        .map(str::trim)
        .collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let seeds: Vec<&str> = rows.iter().map(|r| r[col("seed")]).collect();
    assert_eq!(seeds, ["0", "2", "3"]);
    for r in &rows {
        let loss: f64 = r[col("Loss")].parse().unwrap_or_else(|_| panic!("{r:?}"));
        assert!((0.0..=1.0).contains(&loss), "{r:?}");
        assert_eq!(r[col("algorithm")], "auto");
    }
    let (code, _, stderr) = deid(
        &[
            "bench", "scale", "--rows", "3000", "--dir", ".", "--seeds", "1-x",
        ],
        &dir,
    );
    assert_ne!(code, 0);
    assert!(
        stderr.contains("--seeds") && stderr.contains("1-x"),
        "{stderr}"
    );
}

/// `deid anonymize --local-iterations`: deterministic for a check limit whatever the threads,
/// the classes of the output (by output values, across steps) are k-anonymous, the steps
/// account for every record; bad settings exit 2 naming the field.
#[test]
fn local_generalization_is_verified_from_the_output() {
    let dir = tmp_dir("local");
    let (code, _, stderr) = deid(
        &[
            "bench", "generate", "--rows", "20000", "--dir", ".", "--seed", "3",
        ],
        &dir,
    );
    assert_eq!(code, 0, "{stderr}");
    let data = dir.join("synth-20000");
    const QIS: [&str; 4] = ["zip", "age", "sex", "income"];
    let run = |extra: &[&str]| {
        let mut args: Vec<String> = [
            "anonymize",
            "--input",
            "synth-20000.csv",
            "--delimiter",
            ";",
            "--sensitive",
            "diagnosis",
            "--privacy",
            "k-anonymity(k=5)",
            "--check-limit",
            "2000",
            "--time-limit",
            "10m",
            "--suppression-marker",
            "<s>",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for q in QIS {
            args.push("--hierarchy".into());
            args.push(format!("{q}=synth-20000_hierarchy_{q}.csv"));
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        deid(&args, &data)
    };
    let one = run(&[
        "--local-iterations",
        "20",
        "--threads",
        "1",
        "--output",
        "one.csv",
    ]);
    assert_eq!(one.0, 0, "{}", one.2);
    let two = run(&[
        "--local-iterations",
        "20",
        "--threads",
        "2",
        "--output",
        "two.csv",
    ]);
    assert_eq!(two.0, 0, "{}", two.2);
    let report: serde_json::Value = serde_json::from_str(&one.1).unwrap();
    let out = std::fs::read_to_string(data.join("one.csv")).unwrap();
    assert_eq!(out, std::fs::read_to_string(data.join("two.csv")).unwrap());
    let steps = report["local"]["steps"].as_array().unwrap();
    assert!(steps.len() > 1, "{report}");
    let published: u64 = steps
        .iter()
        .map(|s| s["published_rows"].as_u64().unwrap())
        .sum();
    let suppressed = report["suppressed_rows"].as_u64().unwrap();
    assert_eq!(published + suppressed, 20000);
    // The output's classes (by output values) and its records marked suppressed.
    let classes_of = |out: &str| {
        let mut lines = out.lines();
        let header: Vec<String> = lines
            .next()
            .unwrap()
            .split(';')
            .map(str::to_string)
            .collect();
        let idx: Vec<usize> = QIS
            .iter()
            .map(|q| header.iter().position(|h| h == q).unwrap())
            .collect();
        let mut classes: std::collections::HashMap<Vec<String>, usize> = Default::default();
        let mut marked = 0u64;
        for line in lines {
            let f: Vec<&str> = line.split(';').collect();
            let key: Vec<String> = idx.iter().map(|&i| f[i].to_string()).collect();
            if key.iter().all(|v| v == "<s>") {
                marked += 1;
            } else {
                *classes.entry(key).or_default() += 1;
            }
        }
        (classes, marked)
    };
    let (classes, marked) = classes_of(&out);
    assert_eq!(marked, suppressed);
    assert!(classes.values().all(|&c| c >= 5), "a class below k=5");
    assert_eq!(report["classes"].as_u64().unwrap() as usize, classes.len());
    // The sweep (`--local-method sweep`, local generalization by itself): every record
    // published, in classes of at least 5 by the output's values, one step per transformation.
    let sweep = run(&["--local-method", "sweep", "--output", "sweep.csv"]);
    assert_eq!(sweep.0, 0, "{}", sweep.2);
    let report: serde_json::Value = serde_json::from_str(&sweep.1).unwrap();
    assert_eq!(report["local"]["method"], "sweep", "{report}");
    let steps = report["local"]["steps"].as_array().unwrap();
    assert!(steps.len() > 1, "{report}");
    assert!(steps.iter().all(|s| s["algorithm"] == "exhaustive"));
    let (classes, marked) = classes_of(&std::fs::read_to_string(data.join("sweep.csv")).unwrap());
    assert_eq!(marked, report["suppressed_rows"].as_u64().unwrap());
    assert_eq!(classes.values().sum::<usize>() as u64 + marked, 20000);
    assert!(classes.values().all(|&c| c >= 5), "a class below k=5");
    let (code, _, stderr) = run(&[
        "--local-method",
        "sweep",
        "--privacy",
        "average-risk(threshold=0.5)",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("local.method"), "{stderr}");
    // Settings and unsupported models exit 2, naming the field.
    let (code, _, stderr) = run(&["--local-iterations", "0"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("local.iterations"), "{stderr}");
    let (code, _, stderr) = run(&[
        "--local-iterations",
        "5",
        "--privacy",
        "sample-uniqueness(threshold=0.1)",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("privacy[1]"), "{stderr}");
}

/// `--microaggregate COLUMN=FUNCTION`: the column becomes a quasi-identifier without a
/// hierarchy, shown as its class's aggregate; an unknown function exits 2 naming the field.
#[test]
fn microaggregate_flag() {
    let dir = setup("microaggregate", DATA.as_bytes(), AGE);
    std::fs::write(dir.join("zip.json"), r#"{"type": "masking"}"#).unwrap();
    let args = |function: &str| {
        vec![
            "anonymize".to_string(),
            "--input".into(),
            "data.csv".into(),
            "--hierarchy".into(),
            "zip=zip.json".into(),
            "--microaggregate".into(),
            format!("age={function}"),
            "--identifying".into(),
            "name".into(),
            "--privacy".into(),
            "k-anonymity(k=2)".into(),
            "--output".into(),
            "out.csv".into(),
        ]
    };
    let run = |function: &str| {
        let a = args(function);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        deid(&a, &dir)
    };
    let (code, stdout, stderr) = run("interval");
    assert_eq!(code, 0, "{stderr}");
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(r["transformation"].get("age").is_none());
    let out = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    // zip masked to 816**/819** (k = 2); each class shows the interval of its ages (quoted:
    // it contains the delimiter).
    assert_eq!(
        out,
        "age,zip,disease\n\"[34, 45]\",816**,flu\n\"[34, 45]\",816**,cold\n\
         \"[66, 70]\",819**,flu\n\"[66, 70]\",819**,cold\n"
    );
    let (code, _, stderr) = run("average");
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("attributes.age.microaggregation.function"),
        "{stderr}"
    );
    // A column given a hierarchy and an aggregate, or two aggregates, is refused (the last
    // would silently win).
    for extra in [
        ["--hierarchy", "age=zip.json"],
        ["--microaggregate", "age=mode"],
    ] {
        let mut a = args("interval");
        a.extend(extra.iter().map(|s| s.to_string()));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let (code, _, stderr) = deid(&a, &dir);
        assert_eq!(code, 2, "{extra:?}: {stderr}");
        assert!(stderr.contains("column 'age' is given"), "{stderr}");
    }
}

/// Ctrl-C during `deid anonymize` stops the search like a cancel and writes the best so far;
/// a reader that goes away (`| true`) is not reported as an error.
#[test]
fn ctrl_c_writes_the_best_so_far_and_a_closed_pipe_is_no_error() {
    let dir = tmp_dir("ctrl-c");
    let (code, _, stderr) = deid(
        &["bench", "generate", "--rows", "30000", "--dir", "."],
        &dir,
    );
    assert_eq!(code, 0, "{stderr}");
    let data = dir.join("synth-30000");
    let mut args: Vec<String> = [
        "anonymize",
        "--input",
        "synth-30000.csv",
        "--delimiter",
        ";",
        "--privacy",
        "k-anonymity(k=5)",
        "--algorithm",
        "genetic",
        "--time-limit",
        "10m",
        "--output",
        "out.csv",
        "--report",
        "report.json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for q in [
        "zip",
        "age",
        "sex",
        "state",
        "year",
        "income",
        "education",
        "marital",
        "occupation",
        "race",
    ] {
        args.push("--hierarchy".into());
        args.push(format!("{q}=synth-30000_hierarchy_{q}.csv"));
    }
    let child = Command::new(env!("CARGO_BIN_EXE_deid"))
        .args(&args)
        .current_dir(&data)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Let it load and find solutions — 2 s of its CPU time, so that a loaded machine delays the
    // interrupt instead of making it come before the first solution — then interrupt it.
    let started = std::time::Instant::now();
    while crate::helpers::cpu_ticks(child.id()) < 200
        && started.elapsed() < std::time::Duration::from_secs(120)
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["stop"], "cancelled", "{report}");
    assert_eq!(report["anonymous"], true);
    let csv = std::fs::read_to_string(data.join("out.csv")).unwrap();
    assert_eq!(csv.lines().count(), 30_001);

    // The report to a pipe whose reader has already gone.
    let cmd = format!(
        "'{}' {} | true; exit ${{PIPESTATUS[0]}}",
        env!("CARGO_BIN_EXE_deid"),
        args[..args.len() - 4]
            .iter()
            .map(|a| format!("'{a}'"))
            .collect::<Vec<_>>()
            .join(" ")
            .replace("'10m'", "'1s'")
    );
    let out = Command::new("bash")
        .args(["-c", &cmd])
        .current_dir(&data)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.to_lowercase().contains("broken pipe"), "{stderr}");
}

/// The issue's example: k=3 and distinct 2-diversity over `zip, sex` with an `hiv` column; the
/// small town 990** has only `pos` records, all suppressed. Read from the output CSV alone,
/// every group of identical published quasi-identifiers (the suppressed block included) must
/// show at least 2 distinct hiv values or none at all.
fn hiv_dir(name: &str) -> PathBuf {
    let dir = tmp_dir(name);
    let mut data = String::from("zip,sex,hiv\n");
    for i in 0..12 {
        let sex = if i % 2 == 0 { "m" } else { "f" };
        let hiv = if i % 3 == 0 { "pos" } else { "neg" };
        data.push_str(&format!("1000{},{sex},{hiv}\n", i % 4));
    }
    for i in 0..6 {
        let sex = if i % 2 == 0 { "m" } else { "f" };
        data.push_str(&format!("9900{},{sex},pos\n", i % 3));
    }
    std::fs::write(dir.join("data.csv"), data).unwrap();
    let mut zip = String::new();
    for z in ["10000", "10001", "10002", "10003"] {
        zip.push_str(&format!("{z};100**;*\n"));
    }
    for z in ["99000", "99001", "99002"] {
        zip.push_str(&format!("{z};990**;*\n"));
    }
    std::fs::write(dir.join("zip.csv"), zip).unwrap();
    std::fs::write(dir.join("sex.csv"), "m;*\nf;*\n").unwrap();
    dir
}

/// The problem of [`hiv_dir`]'s data: zip and sex quasi-identifiers, k = 3 and distinct
/// 2-diversity of `hiv`.
const HIV_PROBLEM: [&str; 12] = [
    "--input",
    "data.csv",
    "--hierarchy",
    "zip=zip.csv",
    "--hierarchy",
    "sex=sex.csv",
    "--sensitive",
    "hiv",
    "--privacy",
    "k-anonymity(k=3)",
    "--privacy",
    "distinct-l-diversity(attribute=hiv,l=2)",
];

fn hiv_evaluate(dir: &Path, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut args = vec!["evaluate"];
    args.extend(HIV_PROBLEM);
    args.extend(["--output", "out.csv"]);
    // Defaults unless `extra` gives them.
    for (flag, value) in [("--suppression-limit", "0.5"), ("--levels", "zip=1,sex=1")] {
        if !extra.contains(&flag) {
            args.extend([flag, value]);
        }
    }
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = deid(&args, dir);
    let report = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    (code, report, stderr)
}

/// Groups of rows with the same published `zip, sex` whose hiv values are visible but not
/// 2-diverse (an attacker who places someone in the group learns their status).
fn leaking_groups(csv: &str) -> Vec<String> {
    let mut groups: std::collections::BTreeMap<
        (String, String),
        std::collections::BTreeSet<String>,
    > = Default::default();
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        groups
            .entry((f[0].to_string(), f[1].to_string()))
            .or_default()
            .insert(f[2].to_string());
    }
    groups
        .into_iter()
        .filter(|(_, hiv)| hiv.len() < 2 && !hiv.contains("*"))
        .map(|(k, hiv)| format!("{k:?} → {hiv:?}"))
        .collect()
}

#[test]
fn suppressed_records_leak_nothing_by_default() {
    let dir = hiv_dir("hiv");
    // Default (mask): the suppressed block shows `*;*;*`.
    let (code, report, stderr) = hiv_evaluate(&dir, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["suppressed_rows"], 6);
    assert_eq!(report["suppression"]["mode"], "mask");
    assert_eq!(report["suppression"]["block_satisfies_models"], true);
    let out = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    assert!(out.contains("*,*,*"), "{out}");
    assert_eq!(leaking_groups(&out), Vec::<String>::new(), "{out}");
    // ARX's output keeps the sensitive values: the block leaks, and the report says so.
    let (code, report, _) = hiv_evaluate(&dir, &["--suppressed", "keep_sensitive"]);
    assert_eq!(code, 0);
    assert_eq!(report["suppression"]["block_satisfies_models"], false);
    let out = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    assert_eq!(leaking_groups(&out).len(), 1, "{out}");
    // remove: the suppressed records are not in the output.
    let (code, report, _) = hiv_evaluate(&dir, &["--suppressed", "remove"]);
    assert_eq!(code, 0);
    assert_eq!(report["suppression"]["removed_rows"], 6);
    let out = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    assert_eq!(out.lines().count(), 1 + 12);
    assert!(!out.contains('*') || !out.contains("990"), "{out}");
    assert_eq!(leaking_groups(&out), Vec::<String>::new());
    // Another marker.
    let (code, _, _) = hiv_evaluate(&dir, &["--suppression-marker", "[suppressed]"]);
    assert_eq!(code, 0);
    let out = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    assert!(
        out.contains("[suppressed],[suppressed],[suppressed]"),
        "{out}"
    );
    // An unknown mode is refused, listing the modes.
    let (code, _, stderr) = hiv_evaluate(&dir, &["--suppressed", "hide"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(
            "'hide' is not a mode for suppressed records; expected mask, remove or keep_sensitive"
        ),
        "{stderr}"
    );
}

#[test]
fn a_marker_found_in_the_data_is_refused() {
    let dir = hiv_dir("marker");
    let data = std::fs::read_to_string(dir.join("data.csv")).unwrap();
    std::fs::write(dir.join("data.csv"), data.replacen("neg", "*", 1)).unwrap();
    let (code, _, stderr) = hiv_evaluate(&dir, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("suppression_marker") && stderr.contains("'hiv'") && stderr.contains("'*'"),
        "{stderr}"
    );
    let (code, _, stderr) = hiv_evaluate(&dir, &["--suppression-marker", "#"]);
    assert_eq!(code, 0, "{stderr}");
}

/// Exit statuses a pipeline can trust: 0 published, 2 bad input, 3 no solution, 4 not anonymous
/// (and no CSV unless --force).
#[test]
fn exit_statuses_tell_a_pipeline_what_happened() {
    let dir = hiv_dir("exit");
    // Not anonymous: 6 + 12 records would have to be suppressed at level 0 with limit 0.
    let not = ["--suppression-limit", "0"];
    let _ = std::fs::remove_file(dir.join("out.csv"));
    let (code, report, stderr) = hiv_evaluate(&dir, &not);
    assert_eq!(code, 4, "{stderr}");
    assert_eq!(report["anonymous"], false);
    assert!(stderr.contains("no CSV written"), "{stderr}");
    assert!(!dir.join("out.csv").exists());
    let forced = [&not[..], &["--force"]].concat();
    let (code, _, stderr) = hiv_evaluate(&dir, &forced);
    assert_eq!(code, 4, "{stderr}");
    assert!(dir.join("out.csv").exists());
    // Bad input.
    let (code, _, _) = hiv_evaluate(&dir, &["--suppression-limit", "2"]);
    assert_eq!(code, 2);
    // No solution: 3-anonymity cannot hold for 990** without suppression unless generalized,
    // and 2-diversity needs the towns merged; with a check limit of 1 the bottom is all a
    // search sees.
    let mut args = vec!["anonymize"];
    args.extend(HIV_PROBLEM);
    args.extend(["--algorithm", "exhaustive", "--check-limit", "1"]);
    let (code, _, stderr) = deid(&args, &dir);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("no transformation"), "{stderr}");
}

/// `deid risk` prints the report's `risk` shape for the data as they are; population flags add
/// population uniqueness; errors name the flag.
#[test]
fn risk_reports_the_data_as_they_are() {
    // Classes on (age, zip): every record is unique; on zip's first digits nothing changes.
    let dir = setup("risk", DATA.as_bytes(), AGE);
    let (code, stdout, stderr) = deid(
        &[
            "risk",
            "--input",
            "data.csv",
            "--quasi-identifiers",
            "age,zip",
        ],
        &dir,
    );
    assert_eq!(code, 0, "{stderr}");
    let risk: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let input = &risk["input"];
    assert_eq!(input["classes"], 4);
    assert_eq!(input["sample_uniques"], 4);
    assert_eq!(input["sample_uniqueness"], 1.0);
    assert_eq!(input["attacker_models"]["prosecutor"]["highest_risk"], 1.0);
    assert_eq!(input["attacker_models"]["marketer_risk"], 1.0);
    assert!(input.get("population_uniqueness").is_none());
    // Three combinations of two quasi-identifiers; the four records are all distinct on each.
    let qis = input["quasi_identifiers"].as_array().unwrap();
    assert_eq!(qis.len(), 3);
    assert!(
        qis.iter()
            .all(|q| q["distinction"] == 1.0 && q["separation"] == 1.0)
    );
    // The risk bucket of risk 1 holds every record.
    let last = input["distribution"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (last["upper"].clone(), last["records"].clone()),
        (1.0.into(), 1.0.into())
    );

    // With a population: at f = 1 Zayatz counts the sample uniques (4 of 4 people).
    let (code, stdout, stderr) = deid(
        &[
            "risk",
            "--input",
            "data.csv",
            "--quasi-identifiers",
            "disease",
            "--population-size",
            "4",
        ],
        &dir,
    );
    assert_eq!(code, 0, "{stderr}");
    let risk: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let pu = &risk["input"]["population_uniqueness"];
    assert_eq!(pu["population"], 4);
    // disease: flu ×2, cold ×2 → no sample uniques: every estimate is 0 and available.
    assert_eq!(pu["zayatz"]["share"], 0.0);
    assert_eq!(pu["dankar_model"], "dankar");
    let (code, stdout, stderr) = deid(
        &[
            "risk",
            "--input",
            "data.csv",
            "--quasi-identifiers",
            "age",
            "--sampling-fraction",
            "1",
        ],
        &dir,
    );
    assert_eq!(code, 0, "{stderr}");
    let risk: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let pu = &risk["input"]["population_uniqueness"];
    assert_eq!(pu["zayatz"]["share"], 1.0);
    assert_eq!(pu["sampling_fraction"], 1.0);

    for (args, needle) in [
        (
            &["--quasi-identifiers", "agee"][..],
            "unknown column 'agee'",
        ),
        (
            &["--quasi-identifiers", "age", "--population-size", "3"],
            "--population-size",
        ),
        (
            &["--quasi-identifiers", "age", "--sampling-fraction", "0"],
            "--sampling-fraction: the sampling fraction must lie in (0, 1]",
        ),
        (
            &[
                "--quasi-identifiers",
                "age",
                "--population-region",
                "atlantis",
            ],
            "unknown region 'atlantis'",
        ),
        (
            &[
                "--quasi-identifiers",
                "age",
                "--population-size",
                "9",
                "--population-region",
                "usa",
            ],
            "cannot be used with",
        ),
    ] {
        let mut all = vec!["risk", "--input", "data.csv"];
        all.extend_from_slice(args);
        let (code, _, stderr) = deid(&all, &dir);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// `population-uniqueness` on the command line: without a population the error names it; with
/// one the report carries population uniqueness before and after.
#[test]
fn population_uniqueness_on_the_command_line() {
    let dir = setup("population", DATA.as_bytes(), AGE);
    let model = [
        "--privacy",
        "population-uniqueness(threshold=0.5,model=zayatz)",
    ];
    let (code, _, stderr) = evaluate(&dir, &model);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("population") && stderr.contains("--population-size"),
        "{stderr}"
    );
    // Four people in all, everyone in the data: Zayatz = the sample-uniques share. Level 1
    // (<50, >=50) has no uniques; level 0 has 4 of 4 and would need everything suppressed.
    let mut args = model.to_vec();
    args.extend_from_slice(&["--population-size", "4", "--levels", "age=1"]);
    let (code, stdout, stderr) = evaluate(&dir, &args);
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report["risk"]["input"]["population_uniqueness"]["zayatz"]["share"],
        1.0
    );
    assert_eq!(
        report["risk"]["output"]["population_uniqueness"]["zayatz"]["share"],
        0.0
    );
    assert_eq!(report["suppressed_rows"], 0);
    let mut args = model.to_vec();
    args.extend_from_slice(&["--population-size", "4", "--levels", "age=0"]);
    let (code, stdout, _) = evaluate(&dir, &args);
    assert_eq!(code, 4);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["anonymous"], false);
    assert_eq!(report["suppressed_rows"], 4);
}

/// A research subset on the command line: by a column (yes/no or a value) or a file of record
/// numbers; only the subset is written, δ-presence decided against the whole input; bad files,
/// numbers and columns are exit 2 naming the flag or field.
#[test]
fn research_subset_flags() {
    // Ann and Cid are released: at age level 1 the classes <50 (Ann, Bob) and >=50 (Cid, Dan)
    // each have δ = 1/2; at level 0 every record is its own class (δ 1 or 0).
    let data = "name,age,zip,disease,study\nAnn,34,81667,flu,yes\nBob,45,81675,cold,no\n\
                Cid,66,81925,flu,1\nDan,70,81931,cold,\n";
    let dir = setup("subset", data.as_bytes(), AGE);
    std::fs::write(dir.join("rows.txt"), "1,\n3\n").unwrap();
    std::fs::write(dir.join("bad.txt"), "1, two\n").unwrap();
    std::fs::write(dir.join("far.txt"), "1 9\n").unwrap();
    let run = |extra: &[&str]| evaluate_with(&dir, "k-anonymity(k=1)", extra);
    let model = [
        "--privacy",
        "delta-presence(delta_min=0.4,delta_max=0.6)",
        "--identifying",
        "study",
        "--output",
        "out.csv",
    ];
    for subset in [
        &["--research-subset-column", "study"][..],
        &["--research-subset-rows", "rows.txt"][..],
    ] {
        let mut args = model.to_vec();
        args.extend_from_slice(subset);
        args.extend_from_slice(&["--levels", "age=1"]);
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, 0, "{stderr}");
        let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(report["rows"], 2);
        assert_eq!(report["research_subset"]["population_records"], 4);
        let out = std::fs::read_to_string(dir.join("out.csv")).unwrap();
        assert_eq!(out, "age,zip,disease\n<50,81667,flu\n>=50,81925,flu\n");
        // Level 0: Bob and Dan are classes with δ = 0 < 0.4, which no suppression can fix.
        let mut args = model.to_vec();
        args.extend_from_slice(subset);
        args.extend_from_slice(&["--levels", "age=0", "--suppression-limit", "1"]);
        let (code, stdout, _) = run(&args);
        assert_eq!(code, 4);
        let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(report["anonymous"], false);
    }
    let (code, _, stderr) = run(&["--research-subset-column", "zip", "--levels", "age=1"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("research_subset.column") && stderr.contains("'81667'"),
        "{stderr}"
    );
    let (code, _, stderr) = run(&[
        "--research-subset-column",
        "zip",
        "--research-subset-value",
        "81925",
        "--levels",
        "age=1",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = run(&["--research-subset-rows", "bad.txt"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--research-subset-rows") && stderr.contains("'two'"),
        "{stderr}"
    );
    let (code, _, stderr) = run(&["--research-subset-rows", "far.txt"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("research_subset.rows[1]") && stderr.contains("1 to 4"),
        "{stderr}"
    );
    let (code, _, stderr) = run(&["--privacy", "k-map(k=2)", "--levels", "age=1"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("research subset"), "{stderr}");
}

/// `--neutralize-formulas` (issue 27 item 5): cells starting with `=`, `+`, `-`, `@` get a
/// leading `'`; without it the output is faithful.
#[test]
fn formulas_are_neutralized_with_the_flag() {
    let data = "name,age\n=1+2,34\n-3,45\n@x,66\nplain,70\n";
    let dir = setup("formulas", data.as_bytes(), AGE);
    let run = |extra: &[&str]| {
        let mut args = vec![
            "anonymize",
            "--input",
            "data.csv",
            "--hierarchy",
            "age=age.csv",
            "--privacy",
            "k-anonymity(k=2)",
            "--output",
            "out.csv",
        ];
        args.extend_from_slice(extra);
        let (code, _, stderr) = deid(&args, &dir);
        assert_eq!(code, 0, "{stderr}");
        std::fs::read_to_string(dir.join("out.csv")).unwrap()
    };
    let faithful = run(&[]);
    let names: Vec<&str> = faithful
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(names, ["=1+2", "-3", "@x", "plain"]);
    let safe = run(&["--neutralize-formulas"]);
    let names: Vec<&str> = safe
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(names, ["'=1+2", "'-3", "'@x", "plain"]);
}

/// `deid anonymize` of examples/adult with differential privacy (all nine columns generalized).
fn anonymize_adult_dp(dir: &Path, model: &str, extra: &[&str]) -> (i32, String, String) {
    anonymize_adult_dp_task(dir, "anonymize", model, extra)
}

/// `deid <task>` of examples/adult with differential privacy (all nine columns generalized).
fn anonymize_adult_dp_task(
    dir: &Path,
    task: &str,
    model: &str,
    extra: &[&str],
) -> (i32, String, String) {
    let adult = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/adult");
    let input = adult.join("adult.csv");
    let mut args: Vec<String> = vec![
        task.into(),
        "--input".into(),
        input.display().to_string(),
        "--delimiter".into(),
        ";".into(),
        "--privacy".into(),
        model.into(),
    ];
    for c in [
        "age",
        "education",
        "marital-status",
        "native-country",
        "occupation",
        "race",
        "salary-class",
        "sex",
        "workclass",
    ] {
        let file = adult.join(format!("adult_hierarchy_{c}.csv"));
        args.push("--hierarchy".into());
        args.push(format!("{c}={}", file.display()));
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    deid(&args, dir)
}

#[test]
fn evaluate_with_differential_privacy_takes_a_seed() {
    // Given levels: `--seed` fixes the sample, and the report gives the whole configuration
    // (seed, ε split, k, β) needed to reproduce it.
    let dir = tmp_dir("dp-evaluate-seed");
    let model = "differential-privacy(epsilon=1,delta=1e-6)";
    let levels = "age=3,education=3,marital-status=2,native-country=2,occupation=2,race=1,\
                  salary-class=1,sex=1,workclass=2";
    let run = |seed: &str, out: &str| {
        let args = ["--levels", levels, "--seed", seed, "--output", out];
        let (code, stdout, stderr) = anonymize_adult_dp_task(&dir, "evaluate", model, &args);
        assert_eq!(code, 0, "{stderr}");
        let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        (r, std::fs::read_to_string(dir.join(out)).unwrap())
    };
    let (r, a) = run("17", "a.csv");
    let dp = &r["differential_privacy"];
    assert_eq!(dp["seed"], 17, "{dp}");
    assert_eq!(dp["epsilon"], 1.0);
    assert_eq!(dp["delta"], 1e-6);
    assert_eq!(dp["epsilon_search"], 0.0);
    assert_eq!(dp["epsilon_anonymization"], 1.0);
    assert!(dp["k"].as_u64().unwrap() > 1);
    assert!((dp["beta"].as_f64().unwrap() - (1.0 - (-1.0f64).exp())).abs() < 1e-9);
    let (r2, b) = run("17", "b.csv");
    assert_eq!(a, b, "the same seed gives the same output");
    assert_eq!(r2["differential_privacy"], r["differential_privacy"]);
    let (r3, c) = run("18", "c.csv");
    assert_ne!(a, c, "another seed draws another sample");
    assert_eq!(r3["differential_privacy"]["seed"], 18);
}

#[test]
fn anonymize_with_differential_privacy_reports_the_sample() {
    let dir = tmp_dir("dp");
    let model = "differential-privacy(epsilon=1,delta=1e-6)";
    let run = |out: &str| anonymize_adult_dp(&dir, model, &["--seed", "9", "--output", out]);
    let (code, stdout, stderr) = run("a.csv");
    assert_eq!(code, 0, "{stderr}");
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let dp = &r["differential_privacy"];
    assert_eq!(dp["k"], 74, "{dp}");
    assert_eq!(dp["seed"], 9);
    assert_eq!(dp["steps"], 200);
    assert_eq!(dp["input_records"], 30162);
    assert!((dp["beta"].as_f64().unwrap() - 0.5934).abs() < 1e-3);
    assert!((dp["epsilon_search"].as_f64().unwrap() - 0.1).abs() < 1e-12);
    let sampled = dp["sampled_records"].as_u64().unwrap();
    let released = dp["released_records"].as_u64().unwrap();
    assert_eq!(r["rows"], sampled);
    assert_eq!(released + r["suppressed_rows"].as_u64().unwrap(), sampled);
    // The output: the released records only, every class of at least k = 74 of them.
    let out = std::fs::read_to_string(dir.join("a.csv")).unwrap();
    let mut classes: std::collections::HashMap<&str, u64> = Default::default();
    for line in out.lines().skip(1) {
        *classes.entry(line).or_default() += 1;
    }
    assert_eq!(classes.values().sum::<u64>(), released);
    assert!(classes.values().all(|&n| n >= 74), "{classes:?}");
    // The same seed gives the same output.
    let (code, _, stderr) = run("b.csv");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(out, std::fs::read_to_string(dir.join("b.csv")).unwrap());
    // Given levels (data-independent generalization): the whole ε goes to the anonymization.
    let mut args: Vec<String> = vec!["--levels".into(), "age=3,education=3,marital-status=2,native-country=2,occupation=2,race=1,salary-class=1,sex=1,workclass=2".into()];
    args.extend(["--output", "c.csv"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = anonymize_adult_dp_task(&dir, "evaluate", model, &args);
    assert_eq!(code, 0, "{stderr}");
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let dp = &r["differential_privacy"];
    assert_eq!(dp["epsilon_search"], 0.0, "{dp}");
    // Without a seed, an unpredictable one is drawn and reported (exact in JSON).
    assert!(dp["seed"].as_u64().unwrap() < 1 << 53);
    assert!(dp["steps"].is_null());
    assert!((dp["beta"].as_f64().unwrap() - (1.0 - (-1.0f64).exp())).abs() < 1e-9);
    assert_eq!(r["anonymous"], true);
    // Bad parameters and local generalization: the CLI's error names them.
    for (model, extra, needle) in [
        (
            "differential-privacy(epsilon=0,delta=1e-6)",
            vec![],
            "epsilon",
        ),
        (
            "differential-privacy(epsilon=1,delta=1e-6,steps=0)",
            vec![],
            "steps",
        ),
        (model, vec!["--local-iterations", "4"], "local"),
    ] {
        let (code, _, stderr) = anonymize_adult_dp(&dir, model, &extra);
        assert_eq!(code, 2, "{model}: {stderr}");
        assert!(stderr.contains(needle), "'{needle}' not in: {stderr}");
    }
}

/// The binary bounds glibc's malloc arenas (`src/main.rs`): started without
/// `MALLOC_ARENA_MAX`, the running process has it (one arena per core, at least two); a value
/// the user set is kept.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_binary_bounds_its_malloc_arenas() {
    let dir = tmp_dir("arenas");
    let environ_of = |set: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_deid"));
        cmd.args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
            .arg(dir.join("data"))
            .env_remove("DEID_API_KEYS")
            .env_remove("DATABASE_URL")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        match set {
            Some(v) => cmd.env("MALLOC_ARENA_MAX", v),
            None => cmd.env_remove("MALLOC_ARENA_MAX"),
        };
        let mut child = cmd.spawn().expect("the deid binary starts");
        // The re-exec keeps the process id; wait until the listening server's environment is
        // the final one (it serves once started).
        let start = std::time::Instant::now();
        let mut found = None;
        while start.elapsed() < std::time::Duration::from_secs(20) {
            let environ =
                std::fs::read(format!("/proc/{}/environ", child.id())).unwrap_or_default();
            let value = (environ.split(|&b| b == 0))
                .filter_map(|e| e.strip_prefix(b"MALLOC_ARENA_MAX="))
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .next();
            if value.is_some() {
                found = value;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        child.kill().ok();
        child.wait().ok();
        found
    };
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    assert_eq!(environ_of(None), Some(cores.to_string()));
    assert_eq!(environ_of(Some("3")), Some("3".to_string()));
}
