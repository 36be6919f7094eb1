//! API keys and tenant isolation.

use serde_json::json;

use crate::both_databases;
use crate::helpers::*;

const ACME: &str = "acme-key-0123456789";
const GLOBEX: &str = "globex-key-0123456789";

async fn tenants_are_isolated(kind: Db) {
    let Some(db) = TestDb::new(kind).await else {
        return;
    };
    let mut c = config(&db);
    c.api_keys = vec![format!("acme:{ACME}"), format!("globex:{GLOBEX}")];
    let app = spawn_app_with(db, c).await;
    let acme = app.with_key(Some(ACME));
    let globex = app.with_key(Some(GLOBEX));

    // Without a key or with a wrong one: 401 in the error shape; health needs no key.
    app.get("/v1/datasets")
        .await
        .assert_error(401, "unauthorized");
    app.with_key(Some("wrong-key-0123456789"))
        .get("/v1/jobs")
        .await
        .assert_error(401, "unauthorized");
    let r = app
        .send(
            app.client
                .get(app.url("/v1/datasets"))
                .header("x-api-key", ACME),
        )
        .await;
    assert_eq!(r.status, 200, "X-Api-Key works too");
    // The scheme name is case-insensitive; a garbage Authorization header is not rescued by a
    // valid X-Api-Key, nor are two different keys accepted.
    let r = app
        .send(
            app.client
                .get(app.url("/v1/datasets"))
                .header("authorization", format!("bEaReR {ACME}")),
        )
        .await;
    assert_eq!(r.status, 200, "bearer in any case");
    for garbage in ["garbage".to_string(), format!("Bearer {GLOBEX}")] {
        app.send(
            app.client
                .get(app.url("/v1/datasets"))
                .header("authorization", garbage)
                .header("x-api-key", ACME),
        )
        .await
        .assert_error(401, "unauthorized");
    }
    assert_eq!(app.get("/healthz").await.status, 200);
    // The API's description is public and is the repository's openapi.yaml.
    let doc = app.get("/openapi.yaml").await;
    assert_eq!(doc.status, 200);
    assert_eq!(
        doc.text,
        std::fs::read_to_string(repo("openapi.yaml")).unwrap()
    );
    assert_eq!(app.get("/readyz").await.status, 200);

    let ds = acme
        .upload("a;b\n1;x\n2;y\n1;y\n2;x\n", "delimiter=;")
        .await;
    let id = ds["id"].as_str().unwrap();
    acme.put_hierarchy(id, "a", "1;*\n2;*\n").await;
    let job = acme
        .create_job(&json!({
            "dataset_id": id,
            "attributes": {"a": {"type": "quasi_identifying"}},
            "privacy": ["k-anonymity(k=2)"],
        }))
        .await;
    let job_id = job["id"].as_str().unwrap();

    // The other tenant sees nothing of it.
    globex
        .get(&format!("/v1/datasets/{id}"))
        .await
        .assert_error(404, "dataset_not_found");
    globex
        .get(&format!("/v1/datasets/{id}/hierarchies/a"))
        .await
        .assert_error(404, "dataset_not_found");
    assert_eq!(globex.get("/v1/datasets").await.json()["items"], json!([]));
    assert_eq!(globex.get("/v1/jobs").await.json()["items"], json!([]));
    globex
        .get(&format!("/v1/jobs/{job_id}"))
        .await
        .assert_error(404, "job_not_found");
    globex
        .get(&format!("/v1/jobs/{job_id}/result"))
        .await
        .assert_error(404, "job_not_found");
    globex
        .get(&format!("/v1/jobs/{job_id}/result.csv"))
        .await
        .assert_error(404, "job_not_found");
    globex
        .get(&format!("/v1/jobs/{job_id}/events"))
        .await
        .assert_error(404, "job_not_found");
    globex
        .post_raw(&format!("/v1/jobs/{job_id}/cancel"), "")
        .await
        .assert_error(404, "job_not_found");
    globex
        .send(globex.request(reqwest::Method::DELETE, &format!("/v1/datasets/{id}")))
        .await
        .assert_error(404, "dataset_not_found");
    globex
        .send(
            globex
                .request(
                    reqwest::Method::PUT,
                    &format!("/v1/datasets/{id}/hierarchies/a"),
                )
                .body("1;*\n2;*\n"),
        )
        .await
        .assert_error(404, "dataset_not_found");
    let r = globex
        .post_json("/v1/jobs", &json!({"dataset_id": id, "attributes": {"a": {"type": "quasi_identifying"}}, "privacy": ["k-anonymity(k=2)"]}))
        .await;
    let v = r.assert_error(422, "invalid_spec");
    assert_eq!(v["error"]["details"]["field"], "dataset_id");

    // The owner does.
    acme.wait_job(job_id, std::time::Duration::from_secs(30), finished)
        .await;
    assert_eq!(
        acme.get(&format!("/v1/jobs/{job_id}/result")).await.status,
        200
    );
    assert_eq!(
        acme.get("/v1/jobs").await.json()["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    app.stop().await;
}
both_databases!(
    tenants_are_isolated,
    tenants_are_isolated_sqlite,
    tenants_are_isolated_postgres
);

/// Without keys the server refuses to listen beyond loopback.
#[tokio::test]
async fn open_mode_is_loopback_only() {
    let db = TestDb::new(Db::Sqlite).await.unwrap();
    let mut c = config(&db);
    c.bind = "0.0.0.0:0".parse().unwrap();
    let err = deid::app::App::build(c.clone()).await.unwrap_err();
    assert!(err.to_string().contains("without API keys"), "{err}");
    c.api_keys = vec!["t:short".into()];
    assert!(
        deid::app::App::build(c).await.is_err(),
        "keys shorter than 16 characters are refused"
    );
}
