//! The API's contract (issue 11 item 10): real responses of every operation of `openapi.yaml`
//! — successes and the main errors — have a documented status and content type, and their
//! bodies validate against the documented schemas (a small JSON Schema validator for what
//! `openapi.yaml` uses: `$ref`, `type` (also lists, `null`), `enum`, `properties`, `required`,
//! `additionalProperties`, `items`, `anyOf`/`oneOf`/`allOf`, `minimum`/`maximum`, `minItems`).
//! The validator is driven by the document, so new operations and fields are covered as they
//! are documented; the test fails if an operation of the document was not exercised.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::*;

/// `openapi.yaml` as JSON.
fn document() -> Value {
    let text = std::fs::read_to_string(repo("openapi.yaml")).unwrap();
    yaml_serde::from_str(&text).unwrap()
}

/// Follows `$ref`s within the document.
fn deref<'a>(doc: &'a Value, mut schema: &'a Value) -> &'a Value {
    while let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let mut target = doc;
        for part in r.trim_start_matches("#/").split('/') {
            target = &target[part];
        }
        assert!(!target.is_null(), "unresolved $ref {r}");
        schema = target;
    }
    schema
}

/// The errors of `value` against `schema` (empty: valid), each with its JSON path.
fn validate(doc: &Value, value: &Value, schema: &Value, path: &str) -> Vec<String> {
    let schema = deref(doc, schema);
    let mut errors = Vec::new();
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for s in all {
            errors.extend(validate(doc, value, s, path));
        }
    }
    for (key, exactly_one) in [("anyOf", false), ("oneOf", true)] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            let matching = options
                .iter()
                .filter(|s| validate(doc, value, s, path).is_empty())
                .count();
            let ok = if exactly_one {
                matching == 1
            } else {
                matching >= 1
            };
            if !ok {
                let details: Vec<String> = options
                    .iter()
                    .flat_map(|s| validate(doc, value, s, path))
                    .collect();
                errors.push(format!(
                    "{path}: {matching} of the {key} alternatives match: {details:?}"
                ));
            }
        }
    }
    if value.is_null() && schema.get("nullable") == Some(&Value::Bool(true)) {
        return errors;
    }
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let fits = types.iter().any(|t| match *t {
            "null" => value.is_null(),
            "boolean" => value.is_boolean(),
            "string" => value.is_string(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            "number" => value.is_number(),
            "integer" => {
                value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        });
        if !fits {
            errors.push(format!("{path}: {value} is not of type {types:?}"));
            return errors;
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        errors.push(format!("{path}: {value} is not one of {options:?}"));
    }
    if let Some(x) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && x < min
        {
            errors.push(format!("{path}: {x} < minimum {min}"));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && x > max
        {
            errors.push(format!("{path}: {x} > maximum {max}"));
        }
    }
    if let Some(items) = value.as_array() {
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && (items.len() as u64) < min
        {
            errors.push(format!("{path}: fewer than {min} items"));
        }
        if let Some(s) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                errors.extend(validate(doc, item, s, &format!("{path}[{i}]")));
            }
        }
    }
    if let Some(object) = value.as_object() {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for r in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(r) {
                    errors.push(format!("{path}: required property {r} is missing"));
                }
            }
        }
        for (k, v) in object {
            match properties.and_then(|p| p.get(k)) {
                Some(s) => errors.extend(validate(doc, v, s, &format!("{path}.{k}"))),
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        errors.push(format!("{path}: property {k} is not documented"))
                    }
                    Some(s @ Value::Object(_)) => {
                        errors.extend(validate(doc, v, s, &format!("{path}.{k}")))
                    }
                    _ => {}
                },
            }
        }
    }
    errors
}

/// The documented operations as (method, path template).
fn operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if method != "parameters" {
                out.insert((method.clone(), path.clone()));
            }
        }
    }
    out
}

/// The template of `path` among the documented ones (`/v1/jobs/01…/result` →
/// `/v1/jobs/{id}/result`).
fn template(doc: &Value, path: &str) -> String {
    let path = path.split('?').next().unwrap();
    let parts: Vec<&str> = path.split('/').collect();
    doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .find(|t| {
            let tp: Vec<&str> = t.split('/').collect();
            tp.len() == parts.len()
                && tp
                    .iter()
                    .zip(&parts)
                    .all(|(a, b)| a == b || (a.starts_with('{') && a.ends_with('}')))
        })
        .unwrap_or_else(|| panic!("{path} is not in openapi.yaml"))
        .clone()
}

/// Checks answers against the document and remembers which operations succeeded.
struct Contract {
    doc: Value,
    succeeded: BTreeSet<(String, String)>,
    answers: usize,
}

impl Contract {
    fn new() -> Contract {
        Contract {
            doc: document(),
            succeeded: BTreeSet::new(),
            answers: 0,
        }
    }

    /// Validates one answer to `method path`.
    fn check(&mut self, method: &str, path: &str, reply: &Reply) -> Value {
        let method = method.to_lowercase();
        let template = template(&self.doc, path);
        let op = &self.doc["paths"][&template][&method];
        assert!(op.is_object(), "{method} {template} is not documented");
        let status = reply.status.to_string();
        let response = deref(&self.doc, &op["responses"][&status]);
        assert!(
            response.is_object(),
            "{method} {path}: status {status} is not documented: {}",
            reply.text
        );
        self.answers += 1;
        if reply.status < 300 {
            self.succeeded.insert((method.clone(), template.clone()));
        }
        let Some(content) = response.get("content").and_then(Value::as_object) else {
            return Value::Null;
        };
        let content_type = reply
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap()
            .trim()
            .to_string();
        let media = content.get(&content_type).unwrap_or_else(|| {
            panic!(
                "{method} {path} {status}: content type {content_type:?} is not documented ({:?})",
                content.keys().collect::<Vec<_>>()
            )
        });
        if content_type != "application/json" {
            return Value::Null;
        }
        let body: Value = serde_json::from_str(&reply.text)
            .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {}", reply.text));
        let errors = validate(&self.doc, &body, &media["schema"], "$");
        assert!(
            errors.is_empty(),
            "{method} {path} {status} does not match its schema:\n{}\n{body}",
            errors.join("\n")
        );
        body
    }
}

/// The validator rejects what it should (so that the contract test can fail).
#[test]
fn the_validator_finds_mismatches() {
    let doc = document();
    let job = json!({"$ref": "#/components/schemas/Job"});
    let error = json!({"$ref": "#/components/schemas/Error"});
    let ok = json!({"error": {"code": "job_not_found", "message": "m", "details": {}}});
    assert!(validate(&doc, &ok, &error, "$").is_empty());
    for bad in [
        json!({"error": {"code": "no_such_code", "message": "m", "details": {}}}),
        json!({"error": {"code": "job_not_found", "details": {}}}),
        json!({"error": {"code": 3, "message": "m", "details": {}}}),
        json!([]),
    ] {
        assert!(!validate(&doc, &bad, &error, "$").is_empty(), "{bad}");
    }
    assert!(!validate(&doc, &json!({"id": "x"}), &job, "$").is_empty());
    assert_eq!(
        template(&doc, "/v1/jobs/abc/result.csv"),
        "/v1/jobs/{id}/result.csv"
    );
}

/// Every operation of the document, answered by a live server (SQLite), matches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_answers_as_documented() {
    let Some(db) = TestDb::new(Db::Sqlite).await else {
        return;
    };
    let mut c = config(&db);
    let key = "contract-key-0123456789";
    c.api_keys = vec![format!("acme:{key}")];
    let app = spawn_app_with(db, c).await;
    let api = app.with_key(Some(key));
    let mut k = Contract::new();
    use reqwest::Method;

    for path in ["/healthz", "/readyz", "/metrics", "/openapi.yaml"] {
        let r = app.get(path).await;
        k.check("get", path, &r);
    }
    let r = app.get("/v1/datasets").await;
    assert_eq!(r.status, 401);
    k.check("get", "/v1/datasets", &r);

    // Datasets.
    let csv = std::fs::read(repo("examples/adult/adult.csv")).unwrap();
    let r = api
        .send(
            api.request(Method::POST, "/v1/datasets?delimiter=;&name=adult")
                .header("content-type", "text/csv")
                .body(csv),
        )
        .await;
    let ds = k.check("post", "/v1/datasets", &r);
    let id = ds["id"].as_str().unwrap().to_string();
    let r = api.post_raw("/v1/datasets", "a,b\n1\n").await;
    assert_eq!(r.status, 422);
    k.check("post", "/v1/datasets", &r);
    for path in [
        "/v1/datasets".to_string(),
        "/v1/datasets?limit=1".into(),
        "/v1/datasets?cursor=nonsense".into(),
        format!("/v1/datasets/{id}"),
        "/v1/datasets/01a20000-0000-7000-8000-000000000000".into(),
    ] {
        let r = api.get(&path).await;
        k.check("get", &path, &r);
    }

    // Hierarchies: CSV and builder, read back as CSV and JSON, previews, errors.
    let hpath = |c: &str| format!("/v1/datasets/{id}/hierarchies/{c}");
    for q in ADULT_QIS {
        let h = std::fs::read_to_string(repo(&format!("examples/adult/adult_hierarchy_{q}.csv")))
            .unwrap();
        let r = api.send(api.request(Method::PUT, &hpath(q)).body(h)).await;
        k.check("put", &hpath(q), &r);
    }
    let spec = json!({"type": "interval", "width": 10, "levels": [2]});
    let r = api
        .send(
            api.request(Method::PUT, &hpath("age"))
                .header("content-type", "application/json")
                .body(spec.to_string()),
        )
        .await;
    k.check("put", &hpath("age"), &r);
    let r = api
        .send(api.request(Method::PUT, &hpath("sex")).body("nobody;*\n"))
        .await;
    assert_eq!(r.status, 422);
    k.check("put", &hpath("sex"), &r);
    for accept in ["text/csv", "application/json"] {
        let r = api
            .send(
                api.request(Method::GET, &hpath("age"))
                    .header("accept", accept),
            )
            .await;
        k.check("get", &hpath("age"), &r);
    }
    let r = api.get(&hpath("native-country")).await;
    k.check("get", &hpath("native-country"), &r);
    let preview = format!("{}/preview", hpath("age"));
    for (body, accept) in [
        (spec.clone(), "application/json"),
        (spec.clone(), "text/csv"),
        (json!({"type": "interval", "width": -1}), "application/json"),
    ] {
        let r = api
            .send(
                api.request(Method::POST, &preview)
                    .header("accept", accept)
                    .body(body.to_string()),
            )
            .await;
        k.check("post", &preview, &r);
    }

    // Risk analysis.
    let risk = format!("/v1/datasets/{id}/risk");
    for body in [
        json!({"quasi_identifiers": ["age", "sex"], "population": {"region": "usa"}}),
        json!({"quasi_identifiers": ["nope"]}),
    ] {
        let r = api.post_json(&risk, &body).await;
        k.check("post", &risk, &r);
    }

    // Jobs of every task, their events, results and CSVs.
    let anonymize = adult_job(&id, 5, 0.02);
    let mut evaluate = anonymize.clone();
    evaluate["task"] = json!("evaluate");
    evaluate["levels"] = json!({});
    let qi = json!({"type": "quasi_identifying"});
    let risk_job = json!({"dataset_id": id, "task": "risk",
        "attributes": {"age": qi, "sex": qi}, "population": {"sampling_fraction": 0.1}});
    let mut jobs = Vec::new();
    for spec in [&anonymize, &evaluate, &risk_job] {
        let r = api.post_json("/v1/jobs", spec).await;
        let job = k.check("post", "/v1/jobs", &r);
        jobs.push(job["id"].as_str().unwrap().to_string());
    }
    let r = api
        .post_json("/v1/jobs", &json!({"dataset_id": id, "time_limit": -5}))
        .await;
    k.check("post", "/v1/jobs", &r);
    for job in &jobs {
        let j = api.wait_job(job, Duration::from_secs(60), finished).await;
        let path = format!("/v1/jobs/{job}");
        k.check("get", &path, &api.get(&path).await);
        // Events: the stream of an ended job replays its state; every event's data validates.
        let events = api.events(job, Duration::from_secs(30)).await;
        assert!(!events.is_empty());
        let best = json!({"$ref": "#/components/schemas/Best"});
        let view = json!({"$ref": "#/components/schemas/Job"});
        for (name, data) in &events {
            let schema = if name == "improvement" { &best } else { &view };
            let errors = validate(&k.doc, data, schema, "$");
            assert!(errors.is_empty(), "event {name}: {errors:?}\n{data}");
        }
        let r = api.get(&format!("{path}/events")).await;
        k.check("get", &format!("{path}/events"), &r);
        for sub in ["result", "result.csv", "cancel"] {
            let p = format!("{path}/{sub}");
            let r = if sub == "cancel" {
                api.post_raw(&p, "").await
            } else {
                api.get(&p).await
            };
            k.check(if sub == "cancel" { "post" } else { "get" }, &p, &r);
        }
        assert!(finished(&j));
    }
    // A queued job cancelled at once, and a running one.
    let mut slow = anonymize.clone();
    slow["algorithm"] = json!("genetic");
    slow["time_limit"] = json!("60s");
    let mut ids = Vec::new();
    for _ in 0..2 {
        let r = api.post_json("/v1/jobs", &slow).await;
        ids.push(
            k.check("post", "/v1/jobs", &r)["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    api.wait_job(&ids[0], Duration::from_secs(30), |j| {
        j["status"] == "running"
    })
    .await;
    for job in ids.iter().rev() {
        let p = format!("/v1/jobs/{job}/cancel");
        let r = api.post_raw(&p, "").await;
        k.check("post", &p, &r);
    }
    for path in [
        "/v1/jobs".to_string(),
        "/v1/jobs?status=succeeded&limit=2".into(),
        "/v1/jobs?cursor=garbage".into(),
        "/v1/jobs/01a20000-0000-7000-8000-000000000000".into(),
        "/v1/jobs/01a20000-0000-7000-8000-000000000000/result".into(),
    ] {
        let r = api.get(&path).await;
        k.check("get", &path, &r);
    }
    for job in &ids {
        api.wait_job(job, Duration::from_secs(60), finished).await;
    }

    // Deleting: the dataset, then again (404).
    let path = format!("/v1/datasets/{id}");
    for _ in 0..2 {
        let r = api.send(api.request(Method::DELETE, &path)).await;
        k.check("delete", &path, &r);
    }

    let missing: Vec<_> = operations(&k.doc)
        .difference(&k.succeeded)
        .cloned()
        .collect();
    assert!(
        missing.is_empty(),
        "operations never answered with success: {missing:?}"
    );
    assert!(k.answers > 40, "{} answers checked", k.answers);
    app.stop().await;
}
