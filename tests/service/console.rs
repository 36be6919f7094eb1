//! The web console's routes: the page and its assets need no API key (they hold no data), carry
//! a strict Content-Security-Policy and the other security headers, are cached for a year under
//! the current build's fingerprint only, are gzipped for clients that accept it, and unknown
//! assets are 404 in the API's error shape.

use crate::helpers::*;

fn header<'a>(r: &'a Reply, name: &str) -> &'a str {
    r.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no {name} header: {:?}", r.headers))
}

fn assert_secure(r: &Reply) {
    let csp = header(r, "content-security-policy");
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{directive} missing from {csp}");
    }
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
        "{csp}"
    );
    assert_eq!(header(r, "x-content-type-options"), "nosniff");
    assert_eq!(header(r, "referrer-policy"), "no-referrer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_assets_are_served_with_strict_headers() {
    let Some(db) = TestDb::new(Db::Sqlite).await else {
        return;
    };
    let mut c = config(&db);
    c.api_keys = vec!["acme:acme-key-0123456789".into()];
    let app = spawn_app_with(db, c).await;

    // The page: no key needed, HTML, revalidated, names the current build's assets.
    let page = app.get("/").await;
    assert_eq!(page.status, 200, "{}", page.text);
    assert_eq!(header(&page, "content-type"), "text/html; charset=utf-8");
    assert_eq!(header(&page, "cache-control"), "no-cache");
    assert_secure(&page);
    let build = deid::console::build_id();
    assert!(page.text.contains(&format!("/console/{build}/app.js")));
    assert!(!page.text.contains("<script>"), "no inline script");
    assert_eq!(app.get("/console/").await.text, page.text);
    // Revalidation by ETag.
    let etag = header(&page, "etag").to_string();
    let r = app
        .send(app.client.get(app.url("/")).header("if-none-match", &etag))
        .await;
    assert_eq!(r.status, 304);
    assert_secure(&r);

    // Assets of this build: their type, cached for a year; the API still needs the key.
    for (file, kind) in [
        ("app.js", "text/javascript; charset=utf-8"),
        ("style.css", "text/css; charset=utf-8"),
        ("uplot.min.js", "text/javascript; charset=utf-8"),
        ("openapi.json", "application/json"),
    ] {
        let r = app.get(&format!("/console/{build}/{file}")).await;
        assert_eq!(r.status, 200, "{file}");
        assert_eq!(header(&r, "content-type"), kind, "{file}");
        assert_eq!(
            header(&r, "cache-control"),
            "public, max-age=31536000, immutable"
        );
        assert_secure(&r);
        assert!(
            r.headers.get("content-encoding").is_none(),
            "not asked for gzip"
        );
    }
    let doc: serde_json::Value = serde_json::from_str(
        &app.get(&format!("/console/{build}/openapi.json"))
            .await
            .text,
    )
    .unwrap();
    assert_eq!(doc["info"]["title"], "deid");
    app.get("/v1/jobs").await.assert_error(401, "unauthorized");

    // Another build's URL gets the current file, not cached for long.
    let r = app.get("/console/0123456789ab/app.js").await;
    assert_eq!(r.status, 200);
    assert_eq!(header(&r, "cache-control"), "no-cache");

    // gzip for clients that accept it (smaller than the file).
    let plain = app.get(&format!("/console/{build}/uplot.min.js")).await;
    let r = app
        .send(
            app.client
                .get(app.url(&format!("/console/{build}/uplot.min.js")))
                .header("accept-encoding", "br, gzip;q=0.8"),
        )
        .await;
    assert_eq!(header(&r, "content-encoding"), "gzip");
    assert_eq!(header(&r, "vary"), "accept-encoding");
    let gz_len: usize = header(&r, "content-length").parse().unwrap();
    assert!(
        gz_len < plain.text.len() / 2,
        "{gz_len} vs {}",
        plain.text.len()
    );
    let r = app
        .send(
            app.client
                .get(app.url(&format!("/console/{build}/app.js")))
                .header("accept-encoding", "gzip;q=0"),
        )
        .await;
    assert!(r.headers.get("content-encoding").is_none(), "gzip refused");

    // Unknown assets: 404 in the error shape, with the security headers.
    let r = app.get(&format!("/console/{build}/nope.js")).await;
    r.assert_error(404, "route_not_found");
    assert_secure(&r);
    app.get(&format!("/console/{build}/../Cargo.toml"))
        .await
        .assert_error(404, "route_not_found");
    app.get("/console/app.js")
        .await
        .assert_error(404, "route_not_found");
    app.stop().await;
}
