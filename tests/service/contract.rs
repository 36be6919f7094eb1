//! The API's contract (issue 11 item 10): real responses of every operation of `openapi.yaml`
//! — successes and the main errors — have a documented status and content type, and their
//! bodies validate against the documented schemas. `openapi.yaml` is OpenAPI 3.1, whose schemas
//! are JSON Schema 2020-12: the `jsonschema` crate validates them, `format` (`date-time`) and
//! every other keyword included. The test is driven by the document, so new operations and
//! fields are covered as they are documented; it fails if an operation of the document was not
//! exercised.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::*;

/// `openapi.yaml` as JSON.
pub(crate) fn document() -> Value {
    let text = std::fs::read_to_string(repo("openapi.yaml")).unwrap();
    yaml_serde::from_str(&text).unwrap()
}

/// Follows `$ref`s between OpenAPI objects (a response may be `#/components/responses/Error`);
/// schemas are left to [`Schemas`].
fn deref<'a>(doc: &'a Value, mut object: &'a Value) -> &'a Value {
    while let Some(r) = object.get("$ref").and_then(Value::as_str) {
        let target = r
            .strip_prefix('#')
            .and_then(|pointer| doc.pointer(pointer))
            .unwrap_or_else(|| panic!("unresolved $ref {r}"));
        object = target;
    }
    object
}

/// JSON Schema 2020-12 validators of the document's schemas, compiled once each.
///
/// A schema of the document is validated as the root of a schema document that also holds the
/// document's `components`, so that its `$ref`s (`#/components/schemas/Job`) resolve in place;
/// nothing is fetched (the crate is built without file or HTTP resolving). `format` is
/// asserted, not only annotated. Like JSON Schema, an object may have properties its schema does
/// not list unless the schema says `additionalProperties: false`.
pub(crate) struct Schemas {
    components: Value,
    validators: HashMap<String, jsonschema::Validator>,
}

impl Schemas {
    pub(crate) fn new(doc: &Value) -> Schemas {
        Schemas {
            components: doc["components"].clone(),
            validators: HashMap::new(),
        }
    }

    /// The errors of `value` against `schema` (empty: valid), each with its JSON pointer.
    pub(crate) fn validate(&mut self, value: &Value, schema: &Value) -> Vec<String> {
        let key = schema.to_string();
        if !self.validators.contains_key(&key) {
            let mut root = schema.clone();
            let object = root
                .as_object_mut()
                .unwrap_or_else(|| panic!("a schema that is not an object: {schema}"));
            assert!(!object.contains_key("components"), "{schema}");
            object.insert("components".into(), self.components.clone());
            let validator = jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .should_validate_formats(true)
                .build(&root)
                .unwrap_or_else(|e| panic!("invalid schema {schema}: {e}"));
            self.validators.insert(key.clone(), validator);
        }
        self.validators[&key]
            .iter_errors(value)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect()
    }

    /// [`Schemas::validate`] against a schema of `components.schemas`.
    pub(crate) fn validate_named(&mut self, value: &Value, name: &str) -> Vec<String> {
        self.validate(
            value,
            &json!({"$ref": format!("#/components/schemas/{name}")}),
        )
    }
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
    schemas: Schemas,
    succeeded: BTreeSet<(String, String)>,
    answers: usize,
}

impl Contract {
    fn new() -> Contract {
        let doc = document();
        Contract {
            schemas: Schemas::new(&doc),
            doc,
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
        let errors = self.schemas.validate(&body, &media["schema"]);
        assert!(
            errors.is_empty(),
            "{method} {path} {status} does not match its schema:\n{}\n{body}",
            errors.join("\n")
        );
        body
    }
}

/// The validator rejects what it should (so that the contract test can fail): a wrong type, a
/// value outside an `enum`, a missing required property, a property a closed schema
/// (`additionalProperties: false`) does not list, a `format` violation and an
/// `exclusiveMinimum` violation. The strictness about undocumented properties is JSON Schema's
/// (and was the hand-written validator's before): only closed schemas refuse them.
#[test]
fn the_validator_finds_mismatches() {
    let doc = document();
    let mut schemas = Schemas::new(&doc);
    let ok = json!({"error": {"code": "job_not_found", "message": "m", "details": {}}});
    assert_eq!(schemas.validate_named(&ok, "Error"), Vec::<String>::new());
    for (bad, needle) in [
        (
            json!({"error": {"code": "no_such_code", "message": "m", "details": {}}}),
            "/error/code",
        ),
        (
            json!({"error": {"code": "job_not_found", "details": {}}}),
            "\"message\" is a required property",
        ),
        (
            json!({"error": {"code": 3, "message": "m", "details": {}}}),
            "/error/code",
        ),
        (json!([]), "is not of type \"object\""),
    ] {
        let errors = schemas.validate_named(&bad, "Error");
        assert!(
            errors.iter().any(|e| e.contains(needle)),
            "{bad}: {errors:?}"
        );
    }
    assert!(
        !schemas
            .validate_named(&json!({"id": "x"}), "Job")
            .is_empty()
    );
    // A closed schema: a property it does not list.
    let population = json!({"size": 10});
    assert_eq!(
        schemas.validate_named(&population, "Population"),
        Vec::<String>::new()
    );
    let errors = schemas.validate_named(&json!({"size": 10, "colour": "red"}), "Population");
    assert!(errors.iter().any(|e| e.contains("colour")), "{errors:?}");
    // exclusiveMinimum: a sampling fraction of 0 is refused, one just above it accepted.
    let errors = schemas.validate_named(&json!({"sampling_fraction": 0}), "Population");
    assert!(
        errors.iter().any(|e| e.starts_with("/sampling_fraction")),
        "{errors:?}"
    );
    assert_eq!(
        schemas.validate_named(&json!({"sampling_fraction": 1e-9}), "Population"),
        Vec::<String>::new()
    );
    // format: date-time, in a property reached through a $ref.
    let created_at = json!({"$ref": "#/components/schemas/Dataset/properties/created_at"});
    assert_eq!(
        schemas.validate(&json!("2026-01-02T03:04:05.678Z"), &created_at),
        Vec::<String>::new()
    );
    for bad in ["yesterday", "2026-13-02T03:04:05Z"] {
        let errors = schemas.validate(&json!(bad), &created_at);
        assert!(
            errors.iter().any(|e| e.contains("date-time")),
            "{bad}: {errors:?}"
        );
    }
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
            let errors = k.schemas.validate(data, schema);
            assert!(errors.is_empty(), "event {name}: {errors:?}\n{data}");
        }
        let r = api.get(&format!("{path}/events")).await;
        k.check("get", &format!("{path}/events"), &r);
        for sub in [
            "result",
            "result.csv",
            "result.parquet",
            "plan",
            "spec",
            "cancel",
        ] {
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
    // Verification of the anonymize job's output, and of data without its columns (422).
    let verify = format!("/v1/jobs/{}/verify", jobs[0]);
    let released = api
        .get(&format!("/v1/jobs/{}/result.csv", jobs[0]))
        .await
        .text;
    for body in [released, "x;y\n1;2\n".to_string()] {
        let r = api
            .send(
                api.request(Method::POST, &verify)
                    .header("content-type", "text/csv")
                    .body(body),
            )
            .await;
        k.check("post", &verify, &r);
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
