//! README's commands run as a new user would run them (issue 11 item 14): the walkthrough with
//! curl against the binary started as `cargo run --release` starts it (no arguments, embedded
//! defaults), every command-line example, the JSON configuration, and the sample output of
//! `deid evaluate` compared with the real report. Every code block of README is either run here
//! (or by the Python client's tests, for the Python example) or listed in [`NOT_RUN`] with the
//! reason, so a new example cannot escape.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::helpers::*;

/// Blocks not run by these tests: (first line, why).
const NOT_RUN: &[(&str, &str)] = &[(
    "scripts/test",
    "the test suite itself: CI runs it (.ci/run)",
)];

/// A code block of README: its first line number, its language (`""` for indented blocks) and
/// its text.
struct Block {
    line: usize,
    lang: String,
    text: String,
}

fn blocks() -> Vec<Block> {
    let text = std::fs::read_to_string(repo("README.md")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(lang) = line.strip_prefix("```") {
            let start = i + 1;
            i += 1;
            while i < lines.len() && !lines[i].starts_with("```") {
                i += 1;
            }
            out.push(Block {
                line: start + 1,
                lang: lang.trim().to_string(),
                text: lines[start..i].join("\n"),
            });
        } else if line.starts_with("    ") && i > 0 && lines[i - 1].trim().is_empty() {
            let start = i;
            while i < lines.len() && lines[i].starts_with("    ") {
                i += 1;
            }
            let text: Vec<&str> = lines[start..i].iter().map(|l| &l[4..]).collect();
            out.push(Block {
                line: start + 1,
                lang: String::new(),
                text: text.join("\n"),
            });
            continue;
        }
        i += 1;
    }
    out
}

/// What runs a block.
#[derive(Debug, PartialEq)]
enum Runner {
    /// The curl walkthrough ([`walkthrough_runs`]).
    Walkthrough,
    /// A command-line example ([`command_lines_run`]).
    CommandLine,
    /// `cargo run --release`: the server the walkthrough talks to.
    Serve,
    /// The JSON configuration ([`command_lines_run`]).
    Configuration,
    /// Output shown in README, compared with the real output.
    SampleOutput,
    /// The Python example (`clients/python/tests/test_readme.py`).
    Python,
    /// Listed in [`NOT_RUN`].
    NotRun,
}

fn runner(b: &Block) -> Option<Runner> {
    let first = b.text.lines().next().unwrap_or("").trim();
    if NOT_RUN.iter().any(|(prefix, _)| first.starts_with(prefix)) {
        return Some(Runner::NotRun);
    }
    match b.lang.as_str() {
        "sh" if b.text.contains("$B") => Some(Runner::Walkthrough),
        "python" => Some(Runner::Python),
        "json" if b.text.contains("\"input\": \"adult.csv\"") => Some(Runner::Configuration),
        "json" if b.text.contains("\"anonymous\": true") => Some(Runner::SampleOutput),
        "" if b.text.trim() == "cargo run --release" => Some(Runner::Serve),
        "" if b.text.contains("cargo run --release -- ") || b.text.contains("\ndeid ") => {
            Some(Runner::CommandLine)
        }
        _ => None,
    }
}

/// Every block is run by something, and each kind occurs.
#[test]
fn every_readme_block_is_run() {
    let blocks = blocks();
    let mut seen = Vec::new();
    for b in &blocks {
        match runner(b) {
            Some(r) => seen.push(r),
            None => panic!(
                "README block at line {} ({}) is run by no test: run it in tests/service/readme.rs \
                 or list it in NOT_RUN with the reason",
                b.line,
                b.text.lines().next().unwrap_or("")
            ),
        }
    }
    for r in [
        Runner::Walkthrough,
        Runner::CommandLine,
        Runner::Serve,
        Runner::Configuration,
        Runner::SampleOutput,
        Runner::Python,
    ] {
        assert!(seen.contains(&r), "no README block for {r:?}");
    }
}

/// The binary as a README command names it.
fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_deid")
}

/// A README command with the binary's path for `cargo run --release --` and `deid`, and `dir`
/// for `/tmp/`.
fn localize(text: &str, dir: &Path) -> String {
    let tmp = format!("{}/", dir.display());
    text.lines()
        .map(|l| {
            // `/tmp/` first: the binary itself may live under /tmp (a clone there).
            let l = l
                .replace("/tmp/", &tmp)
                .replace("cargo run --release --", bin());
            match l.strip_prefix("deid ") {
                Some(rest) => format!("{} {rest}", bin()),
                None => l,
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs a bash script from the repository's root; panics with its output unless it succeeds.
/// `options`: the `set` options (`-euo pipefail`; `-eu` where README pipes curl into `head`,
/// which ends curl with a write error as it would in a user's shell).
fn bash(script: &str, options: &str, what: &str) -> String {
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("set {options}\n{script}"))
        .current_dir(repo(""))
        .stdin(Stdio::null())
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{script}\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("deid-readme-{tag}-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every value of `expected` (README's rounded excerpt) is in `actual`: numbers within the
/// rounding, objects key by key.
fn assert_excerpt(expected: &Value, actual: &Value, path: &str) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, v) in e {
                let inner = a
                    .get(k)
                    .unwrap_or_else(|| panic!("README shows {path}.{k}, the report has none"));
                assert_excerpt(v, inner, &format!("{path}.{k}"));
            }
        }
        (Value::Number(e), Value::Number(a)) => {
            let (e, a) = (e.as_f64().unwrap(), a.as_f64().unwrap());
            assert!(
                (e - a).abs() <= 1e-4 * a.abs().max(1.0),
                "{path}: README {e}, real {a}"
            );
        }
        _ => assert_eq!(expected, actual, "{path}"),
    }
}

/// The command-line examples succeed; the first one's report matches README's sample output;
/// the JSON configuration runs with `deid evaluate --config`.
#[test]
fn command_lines_run() {
    let blocks = blocks();
    let dir = temp_dir("cli");
    let mut outputs = Vec::new();
    for b in blocks
        .iter()
        .filter(|b| runner(b) == Some(Runner::CommandLine))
    {
        let what = format!("README block at line {}", b.line);
        outputs.push(bash(&localize(&b.text, &dir), "-euo pipefail", &what));
    }
    assert!(outputs.len() >= 4, "{} command-line blocks", outputs.len());
    // The sample output follows the first example.
    let sample = blocks
        .iter()
        .find(|b| runner(b) == Some(Runner::SampleOutput))
        .unwrap();
    let sample: Value = serde_json::from_str(&sample.text).expect("README's sample output is JSON");
    let report: Value = serde_json::from_str(&outputs[0]).unwrap();
    assert_excerpt(&sample, &report, "report");
    // The configuration, as a file.
    let config = blocks
        .iter()
        .find(|b| runner(b) == Some(Runner::Configuration))
        .unwrap();
    let path = dir.join("job.json");
    std::fs::write(&path, &config.text).unwrap();
    let out = bash(
        &format!(
            "cd examples/adult\n{} evaluate --config {}",
            bin(),
            path.display()
        ),
        "-euo pipefail",
        "README's JSON configuration",
    );
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["anonymous"], true, "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The walkthrough with curl, against the binary started without arguments (as
/// `cargo run --release` starts it: SQLite in its default data directory, here a fresh working
/// directory), run as one script.
#[test]
fn walkthrough_runs() {
    let dir = temp_dir("serve");
    let log = dir.join("server.log");
    let mut child = Command::new(bin())
        .current_dir(&dir)
        .env("DEID_BIND", "127.0.0.1:0")
        .env("NO_COLOR", "1")
        .env_remove("DEID_API_KEYS")
        .env_remove("DATABASE_URL")
        .env_remove("DEID_DATA_DIR")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let base = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(i) = text.find("deid listening on http://") {
            let rest = &text[i + "deid listening on ".len()..];
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            break rest[..end].to_string();
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the server did not start:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let script: Vec<String> = blocks()
        .iter()
        .filter(|b| runner(b) == Some(Runner::Walkthrough))
        .map(|b| {
            b.text
                .lines()
                .map(|l| {
                    if l.starts_with("B=http://127.0.0.1:8080") {
                        format!("B={base}")
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    assert!(script.len() >= 3, "{} walkthrough blocks", script.len());
    let out = bash(&script.join("\n"), "-eu", "README's walkthrough");
    let _ = child.kill();
    let _ = child.wait();
    // The one error README shows on purpose: the overlapping intervals.
    assert_eq!(out.matches("\"error\":{").count(), 1, "{out}");
    assert!(out.contains("overlaps intervals[0]"), "{out}");
    // The events of the job, its report and its CSV came through.
    assert!(out.contains("event: done"), "{out}");
    assert!(out.contains("\"optimal_proven\""), "{out}");
    assert!(
        out.contains("sex;age;race;marital-status;education"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
