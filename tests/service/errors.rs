//! Every validation and limit error: status, code and shape.

use std::time::Duration;

use serde_json::json;

use crate::helpers::*;

/// Malformed requests, unknown resources and routes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_errors() {
    let app = spawn_app(Db::Sqlite).await.unwrap();
    app.post_raw("/v1/jobs", "{not json")
        .await
        .assert_error(400, "malformed_json");
    app.post_raw("/v1/jobs", "")
        .await
        .assert_error(400, "malformed_json");
    app.post_json("/v1/jobs", &json!([1, 2]))
        .await
        .assert_error(422, "invalid_spec");
    app.post_json("/v1/jobs", &json!({"privacy": "k"}))
        .await
        .assert_error(422, "invalid_spec");
    let v = app
        .post_json("/v1/jobs", &json!({"supression_limit": 1}))
        .await
        .assert_error(422, "invalid_spec");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("supression_limit")
    );
    // Type and range errors name the field.
    for (body, field) in [
        (json!({"time_limit": -5}), "time_limit"),
        (json!({"suppression_limit": "NaN"}), "suppression_limit"),
        (
            json!({"genetic": {"elite_fraction": "x"}}),
            "genetic.elite_fraction",
        ),
    ] {
        let v = app
            .post_json("/v1/jobs", &body)
            .await
            .assert_error(422, "invalid_spec");
        assert_eq!(v["error"]["details"]["field"], field, "{body}");
    }
    // A cursor that is not the id of an earlier page is a bad query, not an empty page.
    for path in ["/v1/jobs?cursor=garbage", "/v1/datasets?cursor=x%27%3B--"] {
        let v = app.get(path).await.assert_error(400, "invalid_query");
        assert_eq!(v["error"]["details"]["field"], "cursor");
    }
    app.get("/v1/nothing")
        .await
        .assert_error(404, "route_not_found");
    app.send(app.request(reqwest::Method::PATCH, "/v1/jobs"))
        .await
        .assert_error(405, "method_not_allowed");
    app.get("/v1/datasets?limit=0")
        .await
        .assert_error(400, "invalid_query");
    app.get("/v1/datasets?limit=abc")
        .await
        .assert_error(400, "invalid_query");
    app.get("/v1/datasets?colour=red")
        .await
        .assert_error(400, "invalid_query");
    let e = app
        .get("/v1/jobs?status=done")
        .await
        .assert_error(400, "invalid_query");
    assert_eq!(
        e["error"]["message"],
        "unknown status 'done'; expected one of queued, running, succeeded, failed, cancelled"
    );
    app.get("/v1/jobs/nope")
        .await
        .assert_error(404, "job_not_found");
    app.get("/v1/jobs/nope/result")
        .await
        .assert_error(404, "job_not_found");
    app.get("/v1/jobs/nope/result.csv")
        .await
        .assert_error(404, "job_not_found");
    app.get("/v1/jobs/nope/events")
        .await
        .assert_error(404, "job_not_found");
    app.post_raw("/v1/jobs/nope/cancel", "")
        .await
        .assert_error(404, "job_not_found");
    app.get("/v1/datasets/nope")
        .await
        .assert_error(404, "dataset_not_found");
    app.send(app.request(reqwest::Method::DELETE, "/v1/datasets/nope"))
        .await
        .assert_error(404, "dataset_not_found");
    app.post_raw("/v1/datasets?delimiter=ab", "a\n1\n")
        .await
        .assert_error(400, "invalid_query");
    app.post_raw("/v1/datasets?header=maybe", "a\n1\n")
        .await
        .assert_error(400, "invalid_query");
    app.stop().await;
}

/// Invalid uploads and hierarchies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_and_hierarchy_errors() {
    let db = TestDb::new(Db::Sqlite).await.unwrap();
    let mut c = config(&db);
    c.max_upload_bytes = 10_000;
    c.max_rows = 100;
    c.max_columns = 70;
    let app = spawn_app_with(db, c).await;
    // Without delimiter= the delimiter is detected from the first line.
    for (text, delimiter, columns) in [
        ("sex;age;race\nm;30;x\nf;41;y\n", ";", 3),
        ("sex\tage\nm\t30\n", "\t", 2),
        ("a,b\n1;2,3\n", ",", 2),
        ("single\n1\n", ",", 1),
    ] {
        let r = app.post_raw("/v1/datasets", text).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let v = r.json();
        assert_eq!(v["delimiter"], delimiter, "{text:?}");
        assert_eq!(v["columns"].as_array().unwrap().len(), columns, "{text:?}");
        let id = v["id"].as_str().unwrap();
        assert_eq!(
            app.get(&format!("/v1/datasets/{id}")).await.json()["delimiter"],
            delimiter
        );
        let r = app
            .send(app.request(reqwest::Method::DELETE, &format!("/v1/datasets/{id}")))
            .await;
        assert_eq!(r.status, 204);
    }
    // NUL bytes are refused with their row and column.
    let v = app
        .post_raw("/v1/datasets", "a,b\n1,2\n3,x\u{0}y\n")
        .await
        .assert_error(422, "invalid_csv");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("row 3, column 2"),
        "{v}"
    );
    let v = app
        .post_raw("/v1/datasets", "a,b\n1,2\n3\n")
        .await
        .assert_error(422, "invalid_csv");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("row 3"),
        "{v}"
    );
    // A quoted field left open would swallow the later records: refused, naming its row.
    let v = app
        .post_raw("/v1/datasets", "a,b\n1,2\n3,\"x\n4,5\n6,7\n")
        .await
        .assert_error(422, "invalid_csv");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("row 3: a quoted field is not closed"),
        "{v}"
    );
    app.post_raw("/v1/datasets", "")
        .await
        .assert_error(422, "invalid_csv");
    app.post_raw("/v1/datasets", "a,a\n1,2\n")
        .await
        .assert_error(422, "invalid_csv");
    app.post_raw("/v1/datasets", "a,b\n")
        .await
        .assert_error(422, "invalid_csv");
    app.post_raw("/v1/datasets", vec![b'a'; 20_000])
        .await
        .assert_error(413, "payload_too_large");
    // JSON bodies (job specifications, hierarchy specifications) have their own limit.
    let big_json = vec![b' '; deid::api::JSON_BODY_LIMIT + 1];
    app.post_raw("/v1/jobs", big_json)
        .await
        .assert_error(413, "payload_too_large");
    let many_rows: String = std::iter::once("a\n".to_string())
        .chain((0..101).map(|i| format!("{i}\n")))
        .collect();
    app.post_raw("/v1/datasets", many_rows)
        .await
        .assert_error(413, "too_many_rows");
    let wide: String = (0..71)
        .map(|i| format!("c{i}"))
        .collect::<Vec<_>>()
        .join(",")
        + "\n"
        + &vec!["1"; 71].join(",")
        + "\n";
    app.post_raw("/v1/datasets", wide)
        .await
        .assert_error(413, "too_many_columns");
    // An upload that breaks off midway.
    let parts: Vec<Result<Vec<u8>, std::io::Error>> = vec![
        Ok(b"a,b\n1,2\n".to_vec()),
        Err(std::io::Error::other("client gave up")),
    ];
    let broken = app
        .request(reqwest::Method::POST, "/v1/datasets")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            parts,
        )))
        .send()
        .await;
    assert!(broken.is_err() || !broken.unwrap().status().is_success());
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Failed uploads leave nothing behind.
    assert_eq!(app.get("/v1/datasets").await.json()["items"], json!([]));

    let ds = app.upload("age,sex\n30,m\n31,f\n40,m\n", "").await;
    let id = ds["id"].as_str().unwrap();
    let put = |col: &str, body: &str| {
        app.request(
            reqwest::Method::PUT,
            &format!("/v1/datasets/{id}/hierarchies/{col}"),
        )
        .body(body.to_string())
    };
    let v = app
        .send(put("age", "30;3*;*\n31;3*;*\n"))
        .await
        .assert_error(422, "hierarchy_missing_values");
    assert_eq!(v["error"]["details"]["missing"], json!(["40"]));
    assert_eq!(v["error"]["details"]["total_missing"], 1);
    app.send(put("age", "30;3*;*\n31;3*\n40;4*;*\n"))
        .await
        .assert_error(422, "invalid_hierarchy");
    app.send(put("age", "30;3*;*\n30;4*;*\n31;3*;*\n40;4*;*\n"))
        .await
        .assert_error(422, "invalid_hierarchy");
    app.send(put("age", ""))
        .await
        .assert_error(422, "invalid_hierarchy");
    app.send(put("height", "1;*\n"))
        .await
        .assert_error(404, "column_not_found");
    app.get(&format!("/v1/datasets/{id}/hierarchies/sex"))
        .await
        .assert_error(404, "hierarchy_not_found");
    let ok = app.send(put("age", "30,3*,*\n31,3*,*\n40,4*,*\n")).await;
    assert_eq!(
        ok.status, 200,
        "comma-separated hierarchies are detected: {}",
        ok.text
    );
    assert_eq!(ok.json()["levels"], 3);
    app.stop().await;
}

/// Invalid job specifications: 422 naming the field, before anything is queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_spec_errors() {
    let app = spawn_app(Db::Sqlite).await.unwrap();
    let ds = app
        .upload(
            "age,sex,zip,disease\n30,m,1,a\n31,f,2,b\n40,m,1,a\n41,f,2,c\n",
            "",
        )
        .await;
    let id = ds["id"].as_str().unwrap();
    app.put_hierarchy(id, "age", "30;3*;*\n31;3*;*\n40;4*;*\n41;4*;*\n")
        .await;
    let base = json!({
        "dataset_id": id,
        "attributes": {"age": {"type": "quasi_identifying"}, "disease": {"type": "sensitive"}},
        "privacy": ["k-anonymity(k=2)"],
    });
    let field_error = |spec: serde_json::Value, code: &'static str, field: &'static str| {
        let app = &app;
        async move {
            let r = app.post_json("/v1/jobs", &spec).await;
            let v = r.assert_error(422, code);
            assert_eq!(v["error"]["details"]["field"], field, "{v}");
        }
    };
    let with = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut s = base.clone();
        f(&mut s);
        s
    };
    field_error(
        with(&|s| {
            s.as_object_mut()
                .unwrap()
                .remove("dataset_id")
                .map(|_| ())
                .unwrap()
        }),
        "invalid_spec",
        "dataset_id",
    )
    .await;
    // Population models: a model that needs one without it, a population smaller than the
    // dataset (4 rows), a bad fraction or region, a threshold outside [0, 1].
    let population_model = "population-uniqueness(threshold=0.01,model=pitman)";
    field_error(
        with(&|s| s["privacy"] = json!([population_model])),
        "invalid_spec",
        "population",
    )
    .await;
    for (population, field) in [
        (json!({"size": 3}), "population.size"),
        (
            json!({"sampling_fraction": 1.5}),
            "population.sampling_fraction",
        ),
        (json!({"region": "mars"}), "population.region"),
        (json!({"size": 10, "region": "usa"}), "population"),
    ] {
        field_error(
            with(&|s| {
                s["privacy"] = json!([population_model]);
                s["population"] = population.clone();
            }),
            "invalid_spec",
            field,
        )
        .await;
    }
    field_error(
        with(&|s| {
            s["privacy"] = json!(["population-uniqueness(threshold=1.5)"]);
            s["population"] = json!({"region": "usa"});
        }),
        "invalid_spec",
        "privacy[0].threshold",
    )
    .await;
    // Differential privacy: its parameters, a δ no k reaches with 4 records, and what it cannot
    // be combined with.
    let dp_attributes = json!({
        "age": {"type": "quasi_identifying"},
        "sex": {"type": "identifying"},
        "zip": {"type": "identifying"},
        "disease": {"type": "identifying"},
    });
    let dp = |model: serde_json::Value, f: &dyn Fn(&mut serde_json::Value)| {
        with(&|s| {
            s["attributes"] = dp_attributes.clone();
            s["privacy"] = json!([model.clone()]);
            f(s);
        })
    };
    let none = |_: &mut serde_json::Value| {};
    let model = |extra: serde_json::Value| {
        let mut m = json!({"model": "differential-privacy", "epsilon": 1, "delta": 1e-6});
        for (k, v) in extra.as_object().unwrap() {
            m[k] = v.clone();
        }
        m
    };
    for (extra, field) in [
        (json!({"epsilon": 0}), "privacy[0].epsilon"),
        (json!({"epsilon": -1}), "privacy[0].epsilon"),
        (json!({"delta": 1}), "privacy[0].delta"),
        (json!({"search_share": 1.5}), "privacy[0].search_share"),
        (json!({"steps": 0}), "privacy[0].steps"),
        (json!({}), "privacy[0].delta"),
    ] {
        field_error(dp(model(extra), &none), "invalid_spec", field).await;
    }
    let dp_text = json!("differential-privacy(epsilon=1,delta=1e-6)");
    field_error(
        dp(dp_text.clone(), &|s| s["local"] = json!({"iterations": 5})),
        "invalid_spec",
        "local",
    )
    .await;
    field_error(
        dp(dp_text.clone(), &|s| {
            s["privacy"] = json!([dp_text.clone(), "sample-uniqueness(threshold=0.1)"])
        }),
        "invalid_spec",
        "privacy[1]",
    )
    .await;
    field_error(
        dp(dp_text.clone(), &|s| {
            s["attributes"]["disease"] = json!({"type": "sensitive"})
        }),
        "invalid_spec",
        "attributes.disease",
    )
    .await;
    field_error(
        dp(dp_text.clone(), &|s| {
            s["attributes"].as_object_mut().unwrap().remove("sex");
        }),
        "invalid_spec",
        "attributes.sex",
    )
    .await;
    // The suppression marker must not occur in a quasi-identifier or sensitive column.
    field_error(
        with(&|s| s["suppression_marker"] = json!("a")),
        "invalid_spec",
        "suppression_marker",
    )
    .await;
    field_error(
        with(&|s| s["suppressed"] = json!("hide")),
        "invalid_spec",
        "suppressed",
    )
    .await;
    // Microaggregation: a known function, quasi-identifiers without a hierarchy only.
    field_error(
        with(&|s| {
            s["attributes"]["age"] =
                json!({"type": "quasi_identifying", "microaggregation": {"function": "average"}})
        }),
        "invalid_spec",
        "attributes.age.microaggregation.function",
    )
    .await;
    field_error(
        with(&|s| {
            s["attributes"]["disease"] =
                json!({"type": "sensitive", "microaggregation": {"function": "mode"}})
        }),
        "invalid_spec",
        "attributes.disease.microaggregation",
    )
    .await;
    field_error(
        with(&|s| {
            s["attributes"]["age"] = json!({"type": "quasi_identifying",
                "hierarchy": {"stored": true}, "microaggregation": {"function": "mode"}})
        }),
        "invalid_spec",
        "attributes.age.microaggregation",
    )
    .await;
    // Local generalization: its settings and the models it supports.
    field_error(
        with(&|s| s["local"] = json!({"iterations": 0})),
        "invalid_spec",
        "local.iterations",
    )
    .await;
    field_error(
        with(&|s| s["local"] = json!({"gs_factor": 2})),
        "invalid_spec",
        "local.gs_factor",
    )
    .await;
    field_error(
        with(&|s| s["local"] = json!({"steps": 3})),
        "invalid_spec",
        "local.steps",
    )
    .await;
    field_error(
        with(&|s| s["local"] = json!({"method": "greedy"})),
        "invalid_spec",
        "local.method",
    )
    .await;
    // The sweep publishes classes that satisfy the models on their own: average risk, which
    // judges the whole output, is refused.
    field_error(
        with(&|s| {
            s["local"] = json!({"method": "sweep"});
            s["privacy"] = json!(["k-anonymity(k=2)", "average-risk(threshold=0.5)"]);
        }),
        "invalid_spec",
        "local.method",
    )
    .await;
    field_error(
        with(&|s| {
            s["local"] = json!({});
            s["privacy"] = json!(["k-anonymity(k=2)", "sample-uniqueness(threshold=0.1)"]);
        }),
        "invalid_spec",
        "privacy[1]",
    )
    .await;
    // δ-disclosure and Grassberger's entropy do not survive the union of equal-label classes
    // of different steps: refused with local generalization.
    for model in [
        "delta-disclosure(attribute=disease,delta=1.5)",
        "entropy-l-diversity(attribute=disease,l=1.5,estimator=grassberger)",
    ] {
        field_error(
            with(&|s| {
                s["local"] = json!({});
                s["privacy"] = json!(["k-anonymity(k=2)", model]);
            }),
            "invalid_spec",
            "privacy[1]",
        )
        .await;
    }
    // A column named twice (a repeated JSON key) would silently replace its first entry.
    let twice = format!(
        r#"{{"dataset_id": "{id}", "privacy": ["k-anonymity(k=2)"], "attributes": {{
            "age": {{"type": "quasi_identifying", "microaggregation": {{"function": "arithmetic_mean"}}}},
            "age": {{"type": "quasi_identifying", "microaggregation": {{"function": "median"}}}}}}}}"#
    );
    let r = app.post_raw("/v1/jobs", twice).await;
    let v = r.assert_error(422, "invalid_spec");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'age' is named twice"),
        "{v}"
    );
    field_error(
        with(&|s| s["dataset_id"] = json!("nope")),
        "invalid_spec",
        "dataset_id",
    )
    .await;
    // disease has 3 distinct values: 4-diversity is refused at submission, 3 is accepted.
    field_error(
        with(&|s| {
            s["privacy"] = json!([
                "k-anonymity(k=2)",
                "distinct-l-diversity(attribute=disease,l=4)"
            ])
        }),
        "invalid_spec",
        "privacy[1].l",
    )
    .await;
    field_error(
        with(&|s| s["input"] = json!("/etc/passwd")),
        "invalid_spec",
        "input",
    )
    .await;
    field_error(
        with(&|s| s["attributes"]["height"] = json!({"type": "sensitive"})),
        "invalid_spec",
        "attributes.height",
    )
    .await;
    field_error(
        with(&|s| s["attributes"]["sex"] = json!({"type": "quasi_identifying"})),
        "invalid_spec",
        "attributes.sex.hierarchy",
    )
    .await;
    field_error(
        with(&|s| {
            s["attributes"]["sex"] =
                json!({"type": "quasi_identifying", "hierarchy": {"csv": "m;*\n"}})
        }),
        "hierarchy_missing_values",
        "attributes.sex.hierarchy",
    )
    .await;
    field_error(
        with(&|s| {
            s["attributes"]["sex"] =
                json!({"type": "quasi_identifying", "hierarchy": {"csv": "m;*\nf\n"}})
        }),
        "invalid_hierarchy",
        "attributes.sex.hierarchy",
    )
    .await;
    field_error(
        with(&|s| s["attributes"]["age"]["max_level"] = json!(7)),
        "invalid_spec",
        "attributes.age.max_level",
    )
    .await;
    field_error(
        with(&|s| s["privacy"] = json!(["k-anonymity(k=x)"])),
        "invalid_spec",
        "privacy[0].k",
    )
    .await;
    field_error(
        with(&|s| s["privacy"] = json!(["k-anonymity(k=5)"])),
        "invalid_spec",
        "privacy[0]",
    )
    .await;
    field_error(
        with(&|s| s["privacy"] = json!([])),
        "invalid_spec",
        "privacy",
    )
    .await;
    field_error(
        with(&|s| s["suppression_limit"] = json!(1.5)),
        "invalid_spec",
        "suppression_limit",
    )
    .await;
    field_error(
        with(&|s| s["quality"] = json!("lost")),
        "invalid_spec",
        "quality.model",
    )
    .await;
    field_error(
        with(&|s| s["algorithm"] = json!("magic")),
        "invalid_spec",
        "algorithm",
    )
    .await;
    field_error(
        with(&|s| s["time_limit"] = json!("2h")),
        "invalid_spec",
        "time_limit",
    )
    .await;
    field_error(
        with(&|s| s["time_limit"] = json!("soon")),
        "invalid_spec",
        "time_limit",
    )
    .await;
    field_error(
        with(&|s| s["threads"] = json!(64)),
        "invalid_spec",
        "threads",
    )
    .await;
    field_error(
        with(&|s| s["callback_url"] = json!("ftp://x")),
        "invalid_spec",
        "callback_url",
    )
    .await;
    field_error(
        // https is delivered (tests/service/tls.rs), but not to private addresses either.
        with(&|s| s["callback_url"] = json!("https://10.0.0.7/hook")),
        "invalid_spec",
        "callback_url",
    )
    .await;
    field_error(
        with(&|s| s["attributes"]["age"]["hierarchy"] = json!({"file": "/etc/age.csv"})),
        "invalid_hierarchy",
        "attributes.age.hierarchy",
    )
    .await;
    field_error(
        with(&|s| s["attributes"]["age"]["hierarchy"] = json!({"stored": false})),
        "invalid_spec",
        "attributes.age.hierarchy.stored",
    )
    .await;
    // Nothing was queued.
    assert_eq!(app.get("/v1/jobs").await.json()["items"], json!([]));
    // As many distinct values as ℓ: accepted.
    let ok = with(&|s| {
        s["privacy"] = json!([
            "k-anonymity(k=2)",
            "distinct-l-diversity(attribute=disease,l=3)"
        ])
    });
    assert_eq!(app.post_json("/v1/jobs", &ok).await.status, 202);

    // More than 64 quasi-identifiers.
    let header: Vec<String> = (0..65).map(|i| format!("c{i}")).collect();
    let wide = format!("{}\n{}\n", header.join(","), vec!["1"; 65].join(","));
    let ds = app.upload(wide, "").await;
    let attributes: serde_json::Map<String, serde_json::Value> = header
        .iter()
        .map(|c| {
            (
                c.clone(),
                json!({"type": "quasi_identifying", "hierarchy": {"csv": "1;*\n"}}),
            )
        })
        .collect();
    let spec =
        json!({"dataset_id": ds["id"], "attributes": attributes, "privacy": ["k-anonymity(k=1)"]});
    let v = app
        .post_json("/v1/jobs", &spec)
        .await
        .assert_error(422, "invalid_spec");
    assert_eq!(v["error"]["details"]["field"], "attributes");
    assert!(v["error"]["message"].as_str().unwrap().contains("64"));
    app.stop().await;
}

/// Issue 11: every numeric search parameter is bounded (10^9 individuals per subpopulation
/// crashed the server): 422 `invalid_spec` naming the field and the allowed range, nothing
/// queued. A builder specification with more levels than a hierarchy may have is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_parameters_are_bounded() {
    let app = spawn_app(Db::Sqlite).await.unwrap();
    let ds = app
        .upload(
            "age,disease
30,a
31,b
40,a
41,c
",
            "",
        )
        .await;
    let base = json!({
        "dataset_id": ds["id"],
        "algorithm": "genetic",
        "attributes": {
            "age": {"type": "quasi_identifying", "hierarchy": {"type": "interval", "width": 10}},
            "disease": {"type": "sensitive"},
        },
        "privacy": ["k-anonymity(k=2)"],
    });
    let cases: [(&str, serde_json::Value, &str, &str); 7] = [
        (
            "genetic",
            json!({"subpopulation_size": 1_000_000_000}),
            "genetic.subpopulation_size",
            "expected 2 to 10000 individuals, got 1000000000",
        ),
        (
            "genetic",
            json!({"iterations": 1_000_000_000}),
            "genetic.iterations",
            "expected 1 to 100000 iterations",
        ),
        (
            "genetic",
            json!({"immigration_interval": 1_000_000_000}),
            "genetic.immigration_interval",
            "expected 0 to 100000 generations",
        ),
        (
            "check_limit",
            json!(1_000_000_000_000_000u64),
            "check_limit",
            "expected 1 to 1000000000000 checks",
        ),
        (
            "flash_max_space",
            json!(1_000_000_000u64),
            "flash_max_space",
            "expected 0 to 100000000 transformations",
        ),
        (
            "threads",
            json!(1_000_000_000u64),
            "threads",
            "expected 1 to",
        ),
        ("time_limit", json!("1000h"), "time_limit", "at most"),
    ];
    for (key, value, field, needle) in cases {
        let mut spec = base.clone();
        spec[key] = value;
        let v = app
            .post_json("/v1/jobs", &spec)
            .await
            .assert_error(422, "invalid_spec");
        assert_eq!(v["error"]["details"]["field"], field, "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{needle:?} not in {message}");
    }
    let mut spec = base.clone();
    spec["attributes"]["age"]["hierarchy"]["levels"] = json!(vec![1; 256]);
    let v = app
        .post_json("/v1/jobs", &spec)
        .await
        .assert_error(422, "invalid_hierarchy");
    assert_eq!(
        v["error"]["details"]["field"], "attributes.age.hierarchy",
        "{v}"
    );
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("levels"), "{message}");
    assert!(message.contains("at most 252 levels"), "{message}");
    // Nothing was queued; at the bounds the job is accepted.
    assert_eq!(app.get("/v1/jobs").await.json()["items"], json!([]));
    let mut spec = base.clone();
    spec["genetic"] =
        json!({"subpopulation_size": 10_000, "iterations": 1, "stop_after_iterations": true});
    spec["time_limit"] = json!("2s");
    let r = app.post_json("/v1/jobs", &spec).await;
    assert_eq!(r.status, 202, "{}", r.text);
    app.stop().await;
}

/// An upload slower than `--upload-timeout` answers 503 `request_timeout` and leaves nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_uploads_time_out() {
    let db = TestDb::new(Db::Sqlite).await.unwrap();
    let mut c = config(&db);
    c.upload_timeout = Duration::from_millis(300);
    let app = spawn_app_with(db, c).await;
    let slow = futures_util::stream::unfold(0, |i| async move {
        if i > 0 {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        (i < 2).then(|| (Ok::<_, std::io::Error>(b"a,b\n1,2\n".to_vec()), i + 1))
    });
    let r = app
        .request(reqwest::Method::POST, "/v1/datasets")
        .header("content-type", "text/csv")
        .body(reqwest::Body::wrap_stream(slow))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "request_timeout", "{v}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(app.get("/v1/datasets").await.json()["items"], json!([]));
    app.stop().await;
}

/// A full queue answers 429 with Retry-After.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_limit() {
    let db = TestDb::new(Db::Sqlite).await.unwrap();
    let mut c = config(&db);
    c.max_queued_jobs = 1;
    let app = spawn_app_with(db, c).await;
    let ds = app.upload(slow_csv(500), "").await;
    let id = ds["id"].as_str().unwrap();
    let running = app.create_job(&slow_job(id, "60s")).await;
    let rid = running["id"].as_str().unwrap();
    app.wait_job(rid, Duration::from_secs(30), |j| j["status"] == "running")
        .await;
    let queued = app.create_job(&slow_job(id, "60s")).await;
    let r = app.post_json("/v1/jobs", &slow_job(id, "60s")).await;
    let body = r.assert_error(429, "queue_full");
    assert_eq!(body["error"]["details"]["scope"], "all");
    assert!(r.headers.get("retry-after").is_some());
    app.post_raw(
        &format!("/v1/jobs/{}/cancel", queued["id"].as_str().unwrap()),
        "",
    )
    .await;
    app.post_raw(&format!("/v1/jobs/{rid}/cancel"), "").await;
    app.wait_job(rid, Duration::from_secs(30), finished).await;
    app.stop().await;
}

/// The output limit (`--max-output-bytes`): a job whose output cannot fit is refused at
/// submission (422 `output_too_large`, the least size in `details`); one whose measured output
/// is too large fails before anything is written (issue 27 item 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_limit() {
    let db = TestDb::new(Db::Sqlite).await.unwrap();
    let mut c = config(&db);
    c.max_output_bytes = 100_000;
    let app = spawn_app_with(db, c).await;
    // 60,000 rows: at least "x;…\n" per row, 120,004 bytes with the header.
    let big = app.upload(poison_csv(60_000), "delimiter=;").await;
    let r = app
        .post_json("/v1/jobs", &poison_job(big["id"].as_str().unwrap()))
        .await;
    let body = r.assert_error(422, "output_too_large");
    let details = &body["error"]["details"];
    assert_eq!(details["field"], "dataset_id");
    assert_eq!(details["min_bytes"], 120_004);
    assert_eq!(details["limit"], 100_000);
    // 20,000 rows fit the least size (40,004) but not the sets: the job fails, writes nothing.
    let ds = app.upload(poison_csv(20_000), "delimiter=;").await;
    let job = app
        .create_job(&poison_job(ds["id"].as_str().unwrap()))
        .await;
    let id = job["id"].as_str().unwrap();
    let j = app.wait_job(id, Duration::from_secs(60), finished).await;
    assert_eq!(j["status"], "failed", "{j}");
    assert_eq!(j["error"]["code"], "output_too_large", "{j}");
    assert_eq!(j["error"]["details"]["limit"], 100_000);
    assert!(j["error"]["details"]["bytes"].as_u64().unwrap() > 100_000);
    app.get(&format!("/v1/jobs/{id}/result.csv"))
        .await
        .assert_error(409, "result_not_available");
    app.stop().await;
}

/// The queue limit per tenant: a tenant with `--max-queued-jobs-per-tenant` waiting jobs gets
/// 429 `queue_full` (`details.scope` `tenant`) while another tenant's job is still admitted
/// (issue 27 item 4: one tenant's 110 jobs locked every other tenant out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_queue_limit() {
    let db = TestDb::new(Db::Sqlite).await.unwrap();
    let mut c = config(&db);
    c.max_queued_jobs_per_tenant = 1;
    c.api_keys = vec![
        "a:a-key-0123456789abcdef".to_string(),
        "b:b-key-0123456789abcdef".to_string(),
    ];
    let app = spawn_app_with(db, c).await;
    let a = app.with_key(Some("a-key-0123456789abcdef"));
    let b = app.with_key(Some("b-key-0123456789abcdef"));
    let ds_a = a.upload(slow_csv(500), "").await;
    let ds_b = b.upload(slow_csv(500), "").await;
    let spec_a = slow_job(ds_a["id"].as_str().unwrap(), "60s");
    let running = a.create_job(&spec_a).await;
    let rid = running["id"].as_str().unwrap();
    a.wait_job(rid, Duration::from_secs(30), |j| j["status"] == "running")
        .await;
    let queued = a.create_job(&spec_a).await;
    let r = a.post_json("/v1/jobs", &spec_a).await;
    let body = r.assert_error(429, "queue_full");
    assert_eq!(body["error"]["details"]["scope"], "tenant");
    assert_eq!(body["error"]["details"]["limit"], 1);
    assert!(r.headers.get("retry-after").is_some());
    let theirs = b
        .create_job(&slow_job(ds_b["id"].as_str().unwrap(), "60s"))
        .await;
    for (api, id) in [(&b, &theirs), (&a, &queued), (&a, &running)] {
        api.post_raw(
            &format!("/v1/jobs/{}/cancel", id["id"].as_str().unwrap()),
            "",
        )
        .await;
    }
    a.wait_job(rid, Duration::from_secs(30), finished).await;
    app.stop().await;
}
