//! The documents that describe the service agree with it: `openapi.yaml` (every route and
//! method, every error code and status), `docker-compose.yml`, `Dockerfile` and `.ci/run`.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::helpers::*;

/// A YAML file of the repository as JSON values.
fn yaml(name: &str) -> Value {
    let text = std::fs::read_to_string(repo(name)).unwrap();
    yaml_serde::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The status of the error code `name` (panics on unknown codes).
fn status_of(name: &str) -> u16 {
    deid::job::error::ErrorCode::ALL
        .iter()
        .find(|c| c.as_str() == name)
        .unwrap_or_else(|| panic!("unknown error code {name}"))
        .status()
}

fn openapi() -> Value {
    yaml("openapi.yaml")
}

#[test]
fn openapi_describes_every_route() {
    let doc = openapi();
    let methods = ["get", "put", "post", "delete", "patch", "head", "options"];
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .filter(|m| methods.contains(&m.as_str()))
                .map(move |m| (m.clone(), path.clone()))
        })
        .collect();
    let implemented: BTreeSet<(String, String)> = deid::api::ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(documented, implemented);
}

#[test]
fn openapi_lists_every_error_code() {
    let doc = openapi();
    let schema = &doc["components"]["schemas"]["ErrorCode"];
    let listed: BTreeSet<&str> = schema["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let codes: BTreeSet<&str> = deid::job::error::ErrorCode::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    assert_eq!(listed, codes);
    // The description states each code's status as the implementation does.
    let text = schema["description"]
        .as_str()
        .unwrap()
        .split_once("Status by code: ")
        .unwrap()
        .1;
    for part in text.trim_end_matches('.').split("; ") {
        let (status, names) = part.split_once(' ').unwrap();
        for name in names.split(", ") {
            assert_eq!(status_of(name).to_string(), status, "status of {name}");
        }
    }
    // Every operation documents its error responses with the Error shape, and every status an
    // error code can have is used somewhere.
    let mut statuses = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let Some(responses) = op.get("responses").and_then(Value::as_object) else {
                continue;
            };
            for (status, r) in responses {
                if status.starts_with('4') || status.starts_with('5') {
                    assert_eq!(
                        r["$ref"], "#/components/responses/Error",
                        "{method} {path} {status}"
                    );
                    statuses.insert(status.parse::<u16>().unwrap());
                }
            }
            if path.starts_with("/v1/") {
                assert!(
                    responses.contains_key("401"),
                    "{method} {path} documents 401"
                );
            }
        }
    }
    for needed in [400, 401, 404, 409, 413, 422, 429, 503] {
        assert!(
            statuses.contains(&needed),
            "no operation documents {needed}"
        );
    }
}

#[test]
fn openapi_job_spec_matches_the_parser() {
    // Every documented property of JobSpec is accepted by the job specification parser.
    let doc = openapi();
    let props = doc["components"]["schemas"]["JobSpec"]["properties"]
        .as_object()
        .unwrap();
    for name in props.keys() {
        let mut spec = serde_json::Map::new();
        let value = match name.as_str() {
            // Enumerations: their first value.
            _ if props[name]["enum"].is_array() => props[name]["enum"][0].clone(),
            "attributes" | "genetic" | "local" => serde_json::json!({}),
            "privacy" => serde_json::json!([]),
            "suppression_limit" | "risk_threshold" => serde_json::json!(0.5),
            "check_limit" | "seed" | "threads" | "flash_max_space" | "candidates" => {
                serde_json::json!(1)
            }
            "hierarchy_duplicates" => serde_json::json!("last"),
            "population" => serde_json::json!({"sampling_fraction": 0.01}),
            "research_subset" => serde_json::json!({"rows": [1]}),
            "levels" => serde_json::json!({"age": 1}),
            "task" => serde_json::json!("evaluate"),
            "neutralize_formulas" => serde_json::json!(true),
            _ => serde_json::json!("x"),
        };
        spec.insert(name.clone(), value);
        let text = Value::Object(spec).to_string();
        assert!(
            deid::job::spec::JobSpec::from_json(&text).is_ok(),
            "{name} is not accepted: {text}"
        );
    }
    // And the algorithms listed are the ones the service accepts.
    let listed: Vec<&str> = props["algorithm"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let names: Vec<&str> = deid_engine::search::Algorithm::ALL
        .iter()
        .map(|a| a.name())
        .collect();
    assert_eq!(listed, names);
}

#[test]
fn compose_runs_deid_next_to_postgres() {
    let doc = yaml("docker-compose.yml");
    let services = &doc["services"];
    let pg = &services["postgres"];
    assert!(pg["image"].as_str().unwrap().starts_with("postgres:"));
    let volume = pg["volumes"][0].as_str().unwrap();
    let (name, mount) = volume.split_once(':').unwrap();
    assert_eq!(mount, "/var/lib/postgresql/data");
    assert!(
        doc["volumes"].as_object().unwrap().contains_key(name),
        "named volume {name}"
    );
    assert!(pg["healthcheck"]["test"].to_string().contains("pg_isready"));

    let deid = &services["deid"];
    assert_eq!(deid["build"], ".");
    // Published on loopback unless DEID_PUBLISH says otherwise.
    assert_eq!(deid["ports"][0], "${DEID_PUBLISH:-127.0.0.1}:8080:8080");
    assert_eq!(
        deid["depends_on"]["postgres"]["condition"],
        "service_healthy"
    );
    assert!(
        deid["healthcheck"]["test"]
            .to_string()
            .contains("healthcheck")
    );
    let env = &deid["environment"];
    let url = env["DATABASE_URL"].as_str().unwrap();
    assert!(
        url.starts_with("postgres://") && url.contains("@postgres:5432/"),
        "{url}"
    );
    assert_eq!(env["DEID_BIND"], "0.0.0.0:8080");
    // No secret has a default: compose refuses to start without them.
    assert!(
        env["DEID_API_KEYS"]
            .as_str()
            .is_some_and(|k| k.starts_with("${DEID_API_KEYS:?")),
        "{}",
        env["DEID_API_KEYS"]
    );
    let password = pg["environment"]["POSTGRES_PASSWORD"].as_str().unwrap();
    assert!(password.starts_with("${POSTGRES_PASSWORD:?"), "{password}");
    assert!(url.contains(":${POSTGRES_PASSWORD:?"), "{url}");
    // Compose waits longer than deid's shutdown grace before it kills the container.
    let seconds = |v: &Value| {
        humantime::parse_duration(v.as_str().unwrap())
            .unwrap()
            .as_secs()
    };
    assert!(
        seconds(&deid["stop_grace_period"]) > seconds(&env["DEID_SHUTDOWN_GRACE"]),
        "stop_grace_period must exceed DEID_SHUTDOWN_GRACE"
    );
}

/// `docker-compose config` (Debian's docker-compose, no Docker engine needed) accepts the file
/// with both secrets set, publishes on loopback by default, and refuses it without either.
#[test]
fn compose_needs_its_secrets() {
    let run = |env: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new("docker-compose");
        cmd.args(["-f", "docker-compose.yml", "config"])
            .current_dir(repo(""))
            .env_remove("DEID_API_KEYS")
            .env_remove("POSTGRES_PASSWORD")
            .env_remove("DEID_PUBLISH");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd
            .output()
            .expect("docker-compose runs (scripts/test installs Debian's docker-compose)");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let key = ("DEID_API_KEYS", "acme:3f9a0c27d1e84b6f9a0c27d1e84b6f9a");
    let password = ("POSTGRES_PASSWORD", "9a0c27d1e84b6f3f");
    let (ok, text) = run(&[key, password]);
    assert!(ok, "{text}");
    assert!(text.contains("127.0.0.1:8080:8080"), "{text}");
    let (ok, text) = run(&[key, password, ("DEID_PUBLISH", "0.0.0.0")]);
    assert!(ok && text.contains("0.0.0.0:8080:8080"), "{text}");
    for (env, missing) in [
        (vec![password], "DEID_API_KEYS"),
        (vec![key], "POSTGRES_PASSWORD"),
    ] {
        let (ok, text) = run(&env);
        assert!(!ok, "started without {missing}: {text}");
        assert!(text.contains(missing), "{text}");
    }
}

/// deid refuses to start with a key from a template or an example (and does not print it).
#[test]
fn placeholder_keys_are_refused_at_start_up() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_deid"))
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(std::env::temp_dir().join(format!("deid-placeholder-{}", std::process::id())))
        .env("DEID_API_KEYS", "default:change-me-please-0123456789")
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("placeholder"), "{stderr}");
    assert!(!stderr.contains("change-me-please"), "{stderr}");
}

#[test]
fn dockerfile_is_multi_stage_and_unprivileged() {
    let text = std::fs::read_to_string(repo("Dockerfile")).unwrap();
    let stages = text.lines().filter(|l| l.starts_with("FROM ")).count();
    assert!(stages >= 2, "multi-stage");
    assert!(
        text.contains("cargo build --release --locked"),
        "the same release build as CI"
    );
    let user = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER line");
    assert!(
        !user.starts_with("root") && !user.starts_with('0'),
        "non-root: {user}"
    );
    assert!(text.contains("EXPOSE 8080"));
    // Dependencies are built in a layer of their own, before the sources are copied.
    let deps = text.find("cargo build --release --locked").unwrap();
    let sources = text.find("COPY . .").expect("the sources are copied");
    assert!(deps < sources, "a dependency layer before COPY . .");
    assert!(
        text.contains("strip target/release/deid"),
        "a stripped binary"
    );
    assert!(
        text.contains("VOLUME [\"/var/lib/deid/data\"]"),
        "the data directory is a volume"
    );
    let runtime = text.rsplit("FROM ").next().unwrap();
    assert!(
        runtime.starts_with("debian:") && runtime.contains("slim"),
        "small runtime image"
    );
    // The command README gives for the whole test suite is what .ci/run runs last.
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let mut lines = readme.lines();
    lines
        .find(|l| l.starts_with("Run the whole test suite"))
        .expect("README: Run the whole test suite");
    let command = lines
        .find(|l| !l.trim().is_empty())
        .expect("the command")
        .trim();
    let ci = std::fs::read_to_string(repo(".ci/run")).unwrap();
    let last = ci
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap()
        .trim();
    assert_eq!(last, command, "README's test command is what .ci/run runs");
}
