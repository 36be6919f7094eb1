//! The web console: a static single-page application served by deid itself at `/`, its assets
//! embedded in the binary (no Node.js, no CDN; `docs/console.md` says why).
//!
//! - `GET /` (and `/console`, `/console/`): the page (`index.html`), never cached for long: it
//!   names the current build.
//! - `GET /console/{build}/{file}`: the assets (ES modules, CSS, the vendored uPlot chart library
//!   and `openapi.json`, the API description converted once from `openapi.yaml`). `{build}` is a
//!   fingerprint of every asset, so these URLs are cached for a year (`immutable`); a request
//!   naming another build gets the current file, not cached.
//!
//! Every response carries a strict Content-Security-Policy (scripts, styles and connections to
//! this origin only; no inline script, no eval), `X-Content-Type-Options: nosniff` and
//! `Referrer-Policy: no-referrer`. Assets are gzipped once at start-up and sent compressed to
//! clients that accept it. The assets contain no data, so they need no API key; the page sends
//! the key with its API calls.

use std::collections::HashMap;
use std::io::Write;
use std::sync::LazyLock;

use axum::Router;
use axum::body::Bytes;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use crate::api::error::{ApiError, ErrorCode};

/// The Content-Security-Policy of every console response.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// `Cache-Control` of fingerprinted assets of the current build.
pub const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// `Cache-Control` of the page and of assets requested under another build.
pub const REVALIDATE: &str = "no-cache";

/// The page weight budget: every asset the console loads (HTML, JS, CSS; not the API
/// description of the reference page), gzipped, in bytes.
pub const PAGE_WEIGHT_BUDGET: usize = 150 * 1024;

/// The embedded files: (name, content type, bytes). `index.html` is the page template.
const FILES: &[(&str, &str, &[u8])] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_bytes!("assets/index.html"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/app.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/api.js"),
    ),
    (
        "ui.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/ui.js"),
    ),
    (
        "jobs.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/jobs.js"),
    ),
    (
        "chart.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/chart.js"),
    ),
    (
        "datasets.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/datasets.js"),
    ),
    (
        "newjob.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/newjob.js"),
    ),
    (
        "compare.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/compare.js"),
    ),
    (
        "reference.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/reference.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_bytes!("assets/style.css"),
    ),
    (
        "uplot.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/uplot.min.js"),
    ),
    (
        "uplot.min.css",
        "text/css; charset=utf-8",
        include_bytes!("assets/uplot.min.css"),
    ),
    (
        "uplot.LICENSE",
        "text/plain; charset=utf-8",
        include_bytes!("assets/uplot.LICENSE"),
    ),
];

/// One file as served: its bytes and, when smaller, their gzip.
struct Served {
    content_type: &'static str,
    body: Vec<u8>,
    gzip: Option<Vec<u8>>,
}

impl Served {
    fn new(content_type: &'static str, body: Vec<u8>) -> Served {
        let compressed = gzip(&body);
        let gzip = (compressed.len() < body.len()).then_some(compressed);
        Served {
            content_type,
            body,
            gzip,
        }
    }
}

/// The console's files of this build.
struct Console {
    /// Fingerprint of every file (12 hex digits).
    build: String,
    /// The page, with the build filled in.
    index: Served,
    /// Assets by name.
    assets: HashMap<&'static str, Served>,
}

static CONSOLE: LazyLock<Console> = LazyLock::new(Console::build);

impl Console {
    fn build() -> Console {
        let openapi = openapi_json();
        let mut hash = Sha256::new();
        for (name, _, bytes) in FILES {
            hash.update(name.as_bytes());
            hash.update(bytes);
        }
        hash.update(&openapi);
        let build: String = hash
            .finalize()
            .iter()
            .take(6)
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut assets = HashMap::new();
        let mut index = None;
        for (name, content_type, bytes) in FILES {
            if *name == "index.html" {
                let page = String::from_utf8_lossy(bytes).replace("{{BUILD}}", &build);
                index = Some(Served::new(content_type, page.into_bytes()));
            } else {
                assets.insert(*name, Served::new(content_type, bytes.to_vec()));
            }
        }
        assets.insert(
            "openapi.json",
            Served::new("application/json", openapi.into_bytes()),
        );
        Console {
            build,
            index: index.unwrap_or_else(|| Served::new("text/html; charset=utf-8", Vec::new())),
            assets,
        }
    }
}

/// `openapi.yaml` as JSON (the reference page reads it; browsers have no YAML parser).
fn openapi_json() -> String {
    let doc: serde_json::Value = yaml_serde::from_str(crate::api::health::OPENAPI_YAML)
        .unwrap_or_else(|e| serde_json::json!({"error": format!("openapi.yaml: {e}")}));
    doc.to_string()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 3),
        flate2::Compression::best(),
    );
    // Writing into a Vec cannot fail.
    let _ = encoder.write_all(bytes);
    encoder.finish().unwrap_or_default()
}

/// The fingerprint of this build's console files (part of every asset URL).
pub fn build_id() -> &'static str {
    &CONSOLE.build
}

/// The gzipped size, in bytes, of what the console loads: the page and every asset but the API
/// description and the license text.
pub fn page_weight() -> usize {
    let console = &*CONSOLE;
    let size = |s: &Served| s.gzip.as_ref().unwrap_or(&s.body).len();
    size(&console.index)
        + console
            .assets
            .iter()
            .filter(|(name, _)| !matches!(**name, "openapi.json" | "uplot.LICENSE"))
            .map(|(_, s)| size(s))
            .sum::<usize>()
}

/// The console's routes (no state, no API key).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/console", get(index))
        .route("/console/", get(index))
        .route("/console/{build}/{file}", get(asset))
}

/// `GET /`: the page.
async fn index(headers: HeaderMap) -> Response {
    let console = &*CONSOLE;
    let etag = format!("\"{}\"", console.build);
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    if matches {
        let mut r = StatusCode::NOT_MODIFIED.into_response();
        secure(&mut r, REVALIDATE);
        return r;
    }
    let mut r = serve(&console.index, &headers, REVALIDATE);
    if let Ok(v) = HeaderValue::from_str(&etag) {
        r.headers_mut().insert(header::ETAG, v);
    }
    r
}

/// `GET /console/{build}/{file}`: an asset; 404 in the API's error shape if there is none.
async fn asset(Path((build, file)): Path<(String, String)>, headers: HeaderMap) -> Response {
    let console = &*CONSOLE;
    let Some(served) = console.assets.get(file.as_str()) else {
        let mut r = ApiError::new(
            ErrorCode::RouteNotFound,
            format!("the console has no file '{file}'"),
        )
        .into_response();
        secure(&mut r, REVALIDATE);
        return r;
    };
    let cache = if build == console.build {
        IMMUTABLE
    } else {
        REVALIDATE
    };
    serve(served, &headers, cache)
}

/// The response for `served`: gzipped when the client accepts it (the bytes are not copied).
fn serve(served: &'static Served, request: &HeaderMap, cache: &'static str) -> Response {
    let accepts_gzip = request
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|e| {
            let mut parts = e.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| matches!(p.trim(), "q=0" | "q=0.0" | "q=0.00" | "q=0.000"));
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        });
    let mut r = match (&served.gzip, accepts_gzip) {
        (Some(gz), true) => {
            let mut r = Bytes::from_static(gz.as_slice()).into_response();
            r.headers_mut()
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            r
        }
        _ => Bytes::from_static(served.body.as_slice()).into_response(),
    };
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(served.content_type),
    );
    r.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    secure(&mut r, cache);
    r
}

/// Adds the security and cache headers.
fn secure(r: &mut Response, cache: &'static str) {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page weight goal of issue 14: HTML + JS + CSS, compressed, at most 150 KB.
    #[test]
    fn page_weight_stays_under_the_budget() {
        let weight = page_weight();
        assert!(
            weight <= PAGE_WEIGHT_BUDGET,
            "the console weighs {weight} bytes gzipped, over the budget of {PAGE_WEIGHT_BUDGET}"
        );
        // Every script and stylesheet counts.
        assert!(weight > CONSOLE.assets["uplot.min.js"].gzip.as_ref().unwrap().len());
    }

    /// The page names the current build; every module it imports is embedded; no inline script.
    #[test]
    fn the_page_references_embedded_assets_only() {
        let page = String::from_utf8(CONSOLE.index.body.clone()).unwrap();
        assert!(page.contains(&format!("/console/{}/app.js", build_id())));
        assert!(!page.contains("{{BUILD}}"));
        for script in page.split("<script").skip(1) {
            assert!(script.contains("src="), "inline script in index.html");
        }
        for (name, _, bytes) in FILES.iter().filter(|(n, _, _)| n.ends_with(".js")) {
            let text = String::from_utf8_lossy(bytes);
            for line in text.lines().filter(|l| l.starts_with("import ")) {
                let target = line.split(['"', '\'']).nth(1).unwrap();
                let file = target.trim_start_matches("./");
                assert!(CONSOLE.assets.contains_key(file), "{name} imports {target}");
            }
            assert!(!text.contains("eval("), "{name} calls eval");
        }
    }

    /// The API description converts to JSON with its paths.
    #[test]
    fn openapi_converts_to_json() {
        let doc: serde_json::Value =
            serde_json::from_slice(&CONSOLE.assets["openapi.json"].body).unwrap();
        assert!(doc["paths"]["/v1/jobs"]["post"].is_object());
    }

    /// Gzipped bodies decompress to the files.
    #[test]
    fn gzip_round_trips() {
        use std::io::Read;
        let served = &CONSOLE.assets["app.js"];
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(served.gzip.as_ref().unwrap().as_slice())
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, served.body);
    }
}
