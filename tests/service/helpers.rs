//! Test harness: a fresh database per test (a temporary SQLite file, or a UUID-named PostgreSQL
//! database created and dropped around the test), the app on a random port (in process, or the
//! built binary as a child process), typed request helpers, an SSE reader, synthetic data and an
//! independent k-anonymity checker.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use deid::app::App;
use deid::config::ServeArgs;
use futures_util::StreamExt;
use serde_json::{Value, json};
use sqlx::Connection;

/// Which database a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Db {
    Sqlite,
    Postgres,
}

pub fn admin_url() -> String {
    std::env::var("DEID_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string())
}

/// A database for one test; removed on drop (also when the test fails).
pub struct TestDb {
    pub url: String,
    pub dir: PathBuf,
    pg_name: Option<String>,
}

impl TestDb {
    /// Creates the database, or returns `None` when PostgreSQL is unavailable and
    /// `DEID_SKIP_POSTGRES=1` (otherwise an unreachable PostgreSQL fails the test).
    pub async fn new(kind: Db) -> Option<TestDb> {
        let dir = std::env::temp_dir().join(format!("deid-test-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&dir).unwrap();
        match kind {
            Db::Sqlite => Some(TestDb {
                url: format!("sqlite://{}", dir.join("deid.db").display()),
                dir,
                pg_name: None,
            }),
            Db::Postgres => {
                let admin = admin_url();
                let mut conn = match sqlx::PgConnection::connect(&admin).await {
                    Ok(c) => c,
                    Err(e) => {
                        if std::env::var("DEID_SKIP_POSTGRES").as_deref() == Ok("1") {
                            eprintln!("skipping a PostgreSQL test: {e} (DEID_SKIP_POSTGRES=1)");
                            return None;
                        }
                        panic!(
                            "PostgreSQL is not reachable at {admin}: {e}\n\
                             Start it (e.g. `pg_ctlcluster --skip-systemctl-redirect 15 main start`), point \
                             DEID_TEST_DATABASE_URL at a server, or set DEID_SKIP_POSTGRES=1 to skip these tests."
                        );
                    }
                };
                let name = format!("deid_test_{}", uuid::Uuid::now_v7().simple());
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
                    .execute(&mut conn)
                    .await
                    .unwrap();
                let _ = conn.close().await;
                let base = admin
                    .rsplit_once('/')
                    .map_or(admin.as_str(), |(b, _)| b)
                    .to_string();
                Some(TestDb {
                    url: format!("{base}/{name}"),
                    dir,
                    pg_name: Some(name),
                })
            }
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(name) = self.pg_name.take() {
            // Dropping needs async I/O; do it on a thread with its own runtime.
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    if let Ok(mut conn) = sqlx::PgConnection::connect(&admin_url()).await {
                        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                            "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                        )))
                        .execute(&mut conn)
                        .await;
                    }
                });
            })
            .join();
        }
    }
}

/// Test configuration: loopback, random port, small pool, short lease, fast polling.
pub fn config(db: &TestDb) -> ServeArgs {
    ServeArgs {
        bind: "127.0.0.1:0".parse().unwrap(),
        database_url: Some(db.url.clone()),
        data_dir: db.dir.clone(),
        db_connections: 4,
        api_keys: vec![],
        workers: 1,
        engine_threads: Some(1),
        lease: Duration::from_secs(2),
        poll_interval: Duration::from_millis(200),
        webhook_backoff: Duration::from_millis(100),
        shutdown_grace: Duration::from_secs(5),
        ..ServeArgs::default()
    }
}

/// A client of the API (base URL, optional API key).
#[derive(Clone)]
pub struct ApiClient {
    pub base: String,
    pub client: reqwest::Client,
    pub key: Option<String>,
}

/// An app running in this process.
pub struct TestApp {
    pub api: ApiClient,
    token: tokio_util::sync::CancellationToken,
    handle: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    db: Option<TestDb>,
}

impl std::ops::Deref for TestApp {
    type Target = ApiClient;
    fn deref(&self) -> &ApiClient {
        &self.api
    }
}

/// Starts the app on `db` with `config` adjusted by the caller.
pub async fn spawn_app_with(db: TestDb, config: ServeArgs) -> TestApp {
    let app = App::build(config).await.expect("the app builds");
    let base = format!("http://127.0.0.1:{}", app.port());
    let token = app.shutdown_token();
    let t = token.clone();
    let handle = tokio::spawn(app.run(async move { t.cancelled().await }));
    TestApp {
        api: ApiClient {
            base,
            client: {
                deid::tls::install_crypto_provider();
                reqwest::Client::new()
            },
            key: None,
        },
        token,
        handle: Some(handle),
        db: Some(db),
    }
}

/// Starts the app with the test configuration, or `None` if the database is skipped.
pub async fn spawn_app(kind: Db) -> Option<TestApp> {
    let db = TestDb::new(kind).await?;
    let c = config(&db);
    Some(spawn_app_with(db, c).await)
}

/// A response: status, headers and body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    /// Asserts an error response with `status` and `code` in the API's shape.
    pub fn assert_error(&self, status: u16, code: &str) -> Value {
        assert_eq!(
            self.status, status,
            "expected {status} {code}, got: {}",
            self.text
        );
        let v = self.json();
        assert_eq!(v["error"]["code"], code, "{}", self.text);
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{}",
            self.text
        );
        assert!(v["error"]["details"].is_object(), "{}", self.text);
        v
    }
}

impl ApiClient {
    /// A client for a server at `base`.
    pub fn new(base: &str) -> ApiClient {
        ApiClient {
            base: base.to_string(),
            client: {
                deid::tls::install_crypto_provider();
                reqwest::Client::new()
            },
            key: None,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The same server with another API key (or none).
    pub fn with_key(&self, key: Option<&str>) -> ApiClient {
        ApiClient {
            key: key.map(str::to_string),
            ..self.clone()
        }
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.client.request(method, self.url(path));
        match &self.key {
            Some(k) => r.bearer_auth(k),
            None => r,
        }
    }

    pub async fn send(&self, r: reqwest::RequestBuilder) -> Reply {
        let resp = r.send().await.expect("request sent");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap_or_default();
        Reply {
            status,
            headers,
            text,
        }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(self.request(reqwest::Method::GET, path)).await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Reply {
        self.send(
            self.request(reqwest::Method::POST, path)
                .body(body.to_string()),
        )
        .await
    }

    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> Reply {
        self.send(self.request(reqwest::Method::POST, path).body(body))
            .await
    }

    /// Uploads CSV text; returns the dataset JSON (asserting 201).
    pub async fn upload(&self, csv: impl Into<reqwest::Body>, query: &str) -> Value {
        let r = self
            .send(
                self.request(reqwest::Method::POST, &format!("/v1/datasets?{query}"))
                    .header("content-type", "text/csv")
                    .body(csv),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
        r.json()
    }

    /// Stores a hierarchy (asserting 200).
    pub async fn put_hierarchy(&self, dataset: &str, column: &str, csv: &str) {
        let r = self
            .send(
                self.request(
                    reqwest::Method::PUT,
                    &format!("/v1/datasets/{dataset}/hierarchies/{column}"),
                )
                .body(csv.to_string()),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }

    /// Creates a job (asserting 202 and `Location`).
    pub async fn create_job(&self, spec: &Value) -> Value {
        let r = self.post_json("/v1/jobs", spec).await;
        assert_eq!(r.status, 202, "{}", r.text);
        let v = r.json();
        let location = r.headers.get("location").unwrap().to_str().unwrap();
        assert_eq!(location, format!("/v1/jobs/{}", v["id"].as_str().unwrap()));
        v
    }

    pub async fn job(&self, id: &str) -> Value {
        let r = self.get(&format!("/v1/jobs/{id}")).await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()
    }

    /// Polls until `pred` holds for the job (panics after `timeout`).
    pub async fn wait_job(
        &self,
        id: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let start = Instant::now();
        loop {
            let j = self.job(id).await;
            if pred(&j) {
                return j;
            }
            assert!(
                start.elapsed() < timeout,
                "timed out waiting for job {id}: {j}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Reads the job's event stream until it ends (panics after `timeout`).
    pub async fn events(&self, id: &str, timeout: Duration) -> Vec<(String, Value)> {
        self.events_after(id, None, timeout).await
    }

    /// The events of job `id` for a client that saw events up to `last_event_id`.
    pub async fn events_after(
        &self,
        id: &str,
        last_event_id: Option<usize>,
        timeout: Duration,
    ) -> Vec<(String, Value)> {
        let mut request = self.request(reqwest::Method::GET, &format!("/v1/jobs/{id}/events"));
        if let Some(n) = last_event_id {
            request = request.header("last-event-id", n.to_string());
        }
        let resp = request.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        let mut stream = resp.bytes_stream();
        let mut buf = String::new();
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let next = tokio::time::timeout_at(deadline, stream.next())
                .await
                .unwrap_or_else(|_| {
                    panic!("event stream of {id} did not end; got {} events", out.len())
                });
            let Some(chunk) = next else { break };
            buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            while let Some(end) = buf.find("\n\n") {
                let block: String = buf.drain(..end + 2).collect();
                let mut name = String::from("message");
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if !data.is_empty() {
                    out.push((name, serde_json::from_str(&data).unwrap()));
                }
            }
        }
        out
    }
}

impl TestApp {
    /// Stops the app gracefully and hands back its database (removed when dropped).
    pub async fn stop(mut self) -> TestDb {
        self.token.cancel();
        if let Some(h) = self.handle.take() {
            h.await.unwrap().unwrap();
        }
        self.db.take().expect("the database")
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

/// Path of a file in the repository.
pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// The adult quasi-identifiers used by the tests.
pub const ADULT_QIS: [&str; 5] = ["sex", "age", "race", "marital-status", "education"];

/// Uploads adult with the hierarchies of `ADULT_QIS`; returns the dataset id.
pub async fn upload_adult(app: &TestApp) -> String {
    let csv = std::fs::read(repo("examples/adult/adult.csv")).unwrap();
    let ds = app.upload(csv, "delimiter=;&name=adult").await;
    let id = ds["id"].as_str().unwrap().to_string();
    assert_eq!(ds["rows"], 30162);
    for q in ADULT_QIS {
        let h = std::fs::read_to_string(repo(&format!("examples/adult/adult_hierarchy_{q}.csv")))
            .unwrap();
        app.put_hierarchy(&id, q, &h).await;
    }
    id
}

/// A job on adult with stored hierarchies.
pub fn adult_job(dataset: &str, k: u32, suppression: f64) -> Value {
    let mut attributes = serde_json::Map::new();
    for q in ADULT_QIS {
        attributes.insert(
            q.into(),
            json!({"type": "quasi_identifying", "hierarchy": {"stored": true}}),
        );
    }
    attributes.insert("salary-class".into(), json!({"type": "sensitive"}));
    json!({
        "dataset_id": dataset,
        "attributes": attributes,
        "privacy": [format!("k-anonymity(k={k})")],
        "suppression_limit": suppression,
        "time_limit": "60s",
    })
}

/// Deterministic pseudo-random numbers (xorshift).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407)
            | 1)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Number of quasi-identifiers of the synthetic "slow" dataset.
pub const SLOW_QIS: usize = 10;

/// A synthetic dataset whose lattice (4^10 transformations) takes far longer to walk than any
/// test waits: `rows` rows of `SLOW_QIS` columns `q0..` with values 0..19 plus a `value` column.
pub fn slow_csv(rows: usize) -> String {
    let mut rng = Rng::new(7);
    let mut s = (0..SLOW_QIS)
        .map(|i| format!("q{i}"))
        .collect::<Vec<_>>()
        .join(",");
    s.push_str(",value\n");
    for r in 0..rows {
        for _ in 0..SLOW_QIS {
            s.push_str(&rng.below(20).to_string());
            s.push(',');
        }
        s.push_str(&format!("v{}\n", r % 7));
    }
    s
}

/// The hierarchy of a slow column: value, band of 5, band of 10, `*` (the load jobs' of
/// `deid bench-api`).
pub fn slow_hierarchy() -> String {
    deid::cli::bench_api::slow_hierarchy()
}

/// A long job on the slow dataset (inline hierarchies): with a suppression limit of 100 % every
/// transformation is a solution, and the exhaustive search checks all 4^10 of them, so the best
/// improves steadily until the time limit.
pub fn slow_job(dataset: &str, time_limit: &str) -> Value {
    let mut attributes = serde_json::Map::new();
    for i in 0..SLOW_QIS {
        attributes.insert(
            format!("q{i}"),
            json!({"type": "quasi_identifying", "hierarchy": {"csv": slow_hierarchy()}}),
        );
    }
    json!({
        "dataset_id": dataset,
        "attributes": attributes,
        "privacy": ["k-anonymity(k=3)"],
        "suppression_limit": 1.0,
        "time_limit": time_limit,
        "algorithm": "exhaustive",
    })
}

/// Independent k-anonymity check of an anonymized CSV: rows grouped by their quasi-identifier
/// values; rows whose quasi-identifiers are all `*` are suppressed; every other group needs at
/// least `k` rows, and at most `max_suppressed` rows may be suppressed. Returns (rows, suppressed).
pub fn check_k_anonymity(
    csv: &str,
    delimiter: u8,
    qis: &[&str],
    k: usize,
    max_suppressed: usize,
) -> (usize, usize) {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .from_reader(csv.as_bytes());
    let header = reader.headers().unwrap().clone();
    let idx: Vec<usize> = qis
        .iter()
        .map(|q| {
            header
                .iter()
                .position(|h| h == *q)
                .unwrap_or_else(|| panic!("no column {q}"))
        })
        .collect();
    let mut groups: HashMap<Vec<String>, usize> = HashMap::new();
    let mut rows = 0;
    let mut suppressed = 0;
    for rec in reader.records() {
        let rec = rec.unwrap();
        rows += 1;
        let key: Vec<String> = idx.iter().map(|&i| rec[i].to_string()).collect();
        if key.iter().all(|v| v == "*") {
            suppressed += 1;
        } else {
            *groups.entry(key).or_default() += 1;
        }
    }
    for (key, n) in &groups {
        assert!(*n >= k, "class {key:?} has {n} < {k} rows");
    }
    assert!(
        suppressed <= max_suppressed,
        "{suppressed} rows suppressed, at most {max_suppressed} allowed"
    );
    (rows, suppressed)
}

/// A `deid serve` child process with its log captured in a file.
pub struct ChildServer {
    pub child: Child,
    pub base: String,
    pub log: PathBuf,
}

impl ChildServer {
    /// Starts the built binary on `db` with extra flags; waits until it listens.
    pub fn start(db: &TestDb, tag: &str, extra: &[&str]) -> ChildServer {
        Self::spawn(db, tag, extra, None)
    }

    /// Like [`ChildServer::start`], with the process's address space capped at `bytes`
    /// (`prlimit --as`): an allocation beyond it fails and aborts the server.
    pub fn start_capped(db: &TestDb, tag: &str, extra: &[&str], bytes: u64) -> ChildServer {
        Self::spawn(db, tag, extra, Some(bytes))
    }

    fn spawn(db: &TestDb, tag: &str, extra: &[&str], cap: Option<u64>) -> ChildServer {
        let log = db.dir.join(format!("{tag}-{}.log", uuid::Uuid::now_v7()));
        let file = std::fs::File::create(&log).unwrap();
        let mut cmd = match cap {
            None => Command::new(env!("CARGO_BIN_EXE_deid")),
            Some(bytes) => {
                let mut c = Command::new("prlimit");
                c.arg(format!("--as={bytes}"))
                    .arg("--")
                    .arg(env!("CARGO_BIN_EXE_deid"))
                    // Few malloc arenas: each reserves 64 MiB of address space per thread.
                    .env("MALLOC_ARENA_MAX", "2");
                c
            }
        };
        cmd.arg("serve");
        let defaults = [
            ("--bind", "127.0.0.1:0"),
            ("--engine-threads", "1"),
            ("--workers", "1"),
            ("--lease", "1s"),
            ("--poll-interval", "200ms"),
            ("--db-connections", "4"),
        ];
        for (flag, value) in defaults {
            if !extra.contains(&flag) {
                cmd.args([flag, value]);
            }
        }
        cmd.arg("--database-url")
            .arg(&db.url)
            .arg("--data-dir")
            .arg(&db.dir)
            .args(extra)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .env_remove("DEID_API_KEYS")
            .env_remove("DATABASE_URL")
            .stdout(Stdio::null())
            .stderr(file);
        #[allow(clippy::zombie_processes)] // Waited for in `kill` (also on drop).
        let child = cmd.spawn().expect("the deid binary starts");
        let start = Instant::now();
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(i) = text.find("deid listening on http://") {
                let rest = &text[i + "deid listening on ".len()..];
                let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
                let base = rest[..end].to_string();
                return ChildServer { child, base, log };
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the server did not start:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A client for this server.
    pub fn api(&self) -> ApiClient {
        ApiClient::new(&self.base)
    }

    /// Kills the process (SIGKILL: no graceful shutdown).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log_text(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        // Strip ANSI colours in case the subscriber used them.
        let mut out = String::with_capacity(text.len());
        let mut esc = false;
        for c in text.chars() {
            if c == '\u{1b}' {
                esc = true;
            } else if esc {
                if c.is_ascii_alphabetic() {
                    esc = false;
                }
            } else {
                out.push(c);
            }
        }
        out
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// True for a terminal job status.
pub fn finished(j: &Value) -> bool {
    matches!(
        j["status"].as_str(),
        Some("succeeded" | "failed" | "cancelled")
    )
}

/// The poison dataset of issue 27: `g;v` with `rows` rows `x;<distinct number>`.
pub fn poison_csv(rows: usize) -> String {
    let mut s = String::from("g;v\n");
    for i in 0..rows {
        s.push_str(&format!("x;{i}\n"));
    }
    s
}

/// The poison job: `g` generalized by `x;*`, `v` microaggregated as a `set`, k = 2: one class
/// holding every record and every value of `v`.
pub fn poison_job(dataset: &str) -> Value {
    json!({
        "dataset_id": dataset,
        "attributes": {
            "g": {"type": "quasi_identifying", "hierarchy": {"csv": "x;*\n"}},
            "v": {"type": "quasi_identifying", "microaggregation": {"function": "set"}},
        },
        "privacy": ["k-anonymity(k=2)"],
    })
}

/// A dataset whose risk analysis takes seconds when every combination is asked for
/// ([`slow_risk_request`]): all 4^10 = 1,048,576 rows of 10 columns `c0…c9` with values 0–3.
/// Every combination of fewer than 10 columns leaves every distinct tuple sharing its group
/// with others, so the partition refinement of the QI risks carries the whole table through
/// each of the 1,023 combinations (about 10⁹ steps).
pub fn slow_risk_csv() -> String {
    let mut s = (0..10)
        .map(|i| format!("c{i}"))
        .collect::<Vec<_>>()
        .join(",");
    s.push('\n');
    for r in 0..1usize << 20 {
        for i in 0..10 {
            if i > 0 {
                s.push(',');
            }
            s.push(char::from(b'0' + ((r >> (2 * i)) & 3) as u8));
        }
        s.push('\n');
    }
    s
}

/// The risk request of [`slow_risk_csv`]: every column quasi-identifying, every combination.
pub fn slow_risk_request() -> Value {
    json!({
        "quasi_identifiers": (0..10).map(|i| format!("c{i}")).collect::<Vec<_>>(),
        "qi_combinations": "all",
    })
}

/// CPU time (user + system) a process has used so far, in clock ticks (Linux `/proc`).
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}
