//! TLS (issue 11 item 12): https webhooks with rustls (a receiver whose certificate a test CA
//! signed: delivered when the CA is configured, refused otherwise) and PostgreSQL with
//! `sslmode` in `DATABASE_URL`. Certificates: `tests/fixtures/tls/` (`generate.sh`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::helpers::*;

fn fixture(name: &str) -> std::path::PathBuf {
    repo(&format!("tests/fixtures/tls/{name}"))
}

/// An https receiver on 127.0.0.1 (the test CA's server certificate) that answers 200 and keeps
/// the JSON bodies it receives.
async fn https_receiver() -> (std::net::SocketAddr, Arc<Mutex<Vec<Value>>>) {
    deid::tls::install_crypto_provider();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(fixture("server.pem"))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(fixture("server.key")).unwrap();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received = Arc::new(Mutex::new(Vec::new()));
    let bodies = received.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let bodies = bodies.clone();
            tokio::spawn(async move {
                // A failed handshake (the client refused the certificate) just ends here.
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let n = tls.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + length {
                        let body = &buf[end + 4..end + 4 + length];
                        if let Ok(v) = serde_json::from_slice(body) {
                            bodies.lock().unwrap().push(v);
                        }
                        let _ = tls
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                            .await;
                        let _ = tls.shutdown().await;
                        return;
                    }
                }
            });
        }
    });
    (addr, received)
}

/// A job whose callback is the https receiver; the webhook's final state.
async fn webhook_outcome(ca: Option<std::path::PathBuf>) -> (String, Vec<Value>) {
    let (addr, received) = https_receiver().await;
    let db = TestDb::new(Db::Sqlite).await.unwrap();
    let mut cfg = config(&db);
    cfg.webhook_allow_private = true;
    cfg.webhook_attempts = 2;
    cfg.webhook_ca_file = ca;
    let app = spawn_app_with(db, cfg).await;
    let ds = app.upload("age,zip\n30,1\n31,1\n40,2\n41,2\n", "").await;
    let hierarchy = "30;3*\n31;3*\n40;4*\n41;4*\n";
    let spec = json!({
        "dataset_id": ds["id"],
        "attributes": {"age": {"type": "quasi_identifying", "hierarchy": {"csv": hierarchy}}},
        "privacy": ["k-anonymity(k=2)"],
        "callback_url": format!("https://127.0.0.1:{}/hook", addr.port()),
    });
    let job = app.create_job(&spec).await;
    let id = job["id"].as_str().unwrap();
    let j = app
        .wait_job(id, Duration::from_secs(60), |j| {
            matches!(j["webhook"].as_str(), Some("delivered" | "failed"))
        })
        .await;
    let got = received.lock().unwrap().clone();
    app.stop().await;
    (j["webhook"].as_str().unwrap().to_string(), got)
}

/// With the test CA configured the https webhook is delivered (certificate checked for
/// 127.0.0.1); without it the receiver's certificate is not trusted and the delivery fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_webhooks_check_the_receivers_certificate() {
    let (state, got) = webhook_outcome(Some(fixture("ca.pem"))).await;
    assert_eq!(state, "delivered");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["event"], "job.finished");
    assert_eq!(got[0]["job"]["status"], "succeeded");
    let (state, got) = webhook_outcome(None).await;
    assert_eq!(state, "failed");
    assert!(got.is_empty(), "{got:?}");
}

/// A CA file that is not PEM is a start-up error naming the setting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_webhook_ca_file_is_refused_at_start_up() {
    let db = TestDb::new(Db::Sqlite).await.unwrap();
    let mut cfg = config(&db);
    cfg.webhook_ca_file = Some(fixture("generate.sh"));
    let Err(err) = deid::app::App::build(cfg).await else {
        panic!("a bad CA file must be refused");
    };
    assert!(
        format!("{err:#}").contains("DEID_WEBHOOK_CA_FILE"),
        "{err:#}"
    );
}

/// `sslmode=require` in DATABASE_URL: the connection is encrypted when the server offers TLS
/// (Debian's cluster does), and refused with a clear start-up error when it does not;
/// `verify-full` against a CA that did not sign the server's certificate is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_over_tls() {
    use sqlx::Connection;
    deid::tls::install_crypto_provider();
    let Some(db) = TestDb::new(Db::Postgres).await else {
        return;
    };
    let sep = if db.url.contains('?') { '&' } else { '?' };
    let mut plain = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let offered: String = sqlx::query_scalar("SHOW ssl")
        .fetch_one(&mut plain)
        .await
        .unwrap();
    plain.close().await.unwrap();
    let require = format!("{}{sep}sslmode=require", db.url);
    let store = deid::store::Store::connect(Some(&require), &db.dir, 2).await;
    if offered == "on" {
        let store = store.expect("sslmode=require connects");
        store.close().await;
        let mut conn = sqlx::PgConnection::connect(&require).await.unwrap();
        let encrypted: bool =
            sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
                .fetch_one(&mut conn)
                .await
                .unwrap();
        assert!(encrypted);
        conn.close().await.unwrap();
        // The service on top of it.
        let mut cfg = config(&db);
        cfg.database_url = Some(require.clone());
        let app = spawn_app_with(db, cfg).await;
        let ds = app.upload("a,b\n1,2\n", "").await;
        assert_eq!(ds["rows"], 1);
        let db = app.stop().await;
        let wrong_ca = format!(
            "{}{sep}sslmode=verify-full&sslrootcert={}",
            db.url,
            fixture("ca.pem").display()
        );
        let Err(err) = deid::store::Store::connect(Some(&wrong_ca), &db.dir, 2).await else {
            panic!("a certificate the CA did not sign must be refused");
        };
        assert!(!err.to_string().is_empty());
    } else {
        let Err(err) = store else {
            panic!("no TLS offered: sslmode=require must fail");
        };
        assert!(!err.to_string().is_empty());
    }
}

/// Database connection errors name the address and the cause once (issue 27 item 6): an
/// unreachable server, a missing `sslrootcert` (with its path), a file that holds no
/// certificate. None needs a running PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_connection_errors_name_the_problem() {
    deid::tls::install_crypto_provider();
    let dir = std::env::temp_dir().join(format!("deid-conn-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let connect = |url: String| {
        let dir = dir.clone();
        async move {
            match deid::store::Store::connect(Some(&url), &dir, 1).await {
                Ok(_) => panic!("{url} must not connect"),
                Err(e) => e.to_string(),
            }
        }
    };
    // Port 1 on loopback: refused at once.
    let err = connect("postgres://deid:secret@127.0.0.1:1/db".into()).await;
    assert!(err.contains("127.0.0.1:1"), "{err}");
    assert!(!err.contains("secret"), "{err}");
    let missing = dir.join("missing-ca.pem");
    let err = connect(format!(
        "postgres://127.0.0.1:1/db?sslmode=verify-full&sslrootcert={}",
        missing.display()
    ))
    .await;
    assert!(err.contains(&missing.display().to_string()), "{err}");
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let err = connect(format!(
        "postgres://127.0.0.1:1/db?sslmode=verify-ca&sslrootcert={}",
        empty.display()
    ))
    .await;
    assert!(
        err.contains(&empty.display().to_string()) && err.contains("no PEM certificate"),
        "{err}"
    );
    // Each cause once.
    for part in err.split(": ") {
        assert_eq!(err.matches(part).count(), 1, "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
