//! Persistence: one [`Store`] over PostgreSQL (`DATABASE_URL=postgres://…`) or an embedded SQLite
//! file (the default, `<data dir>/deid.db`). This is the only module that contains SQL.
//!
//! Both backends share one schema (`migrations/`) and, apart from the job claim, one SQL dialect:
//! `$n` placeholders, `TEXT`/`BIGINT`/`BYTEA` columns, times as milliseconds since the epoch and
//! ids as UUIDv7 strings. Every query is a `&'static str` run with the runtime query API; the
//! [`on_pool!`] macro instantiates the same code for whichever pool is configured.
//!
//! - [`datasets`]: datasets (chunked CSV bytes), distinct values per column, hierarchies.
//! - [`jobs`]: the job queue (claim with lease, heartbeat, fenced completion, reaper) and results.

pub mod datasets;
pub mod jobs;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A database error.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// Applying the migrations failed.
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// Another process uses the SQLite database.
    #[error(
        "the database {0} is used by another deid process (SQLite allows one process; use PostgreSQL for several)"
    )]
    Locked(String),
    /// The database URL is not supported.
    #[error("unsupported DATABASE_URL '{0}': expected postgres://… or sqlite:…")]
    UnsupportedUrl(String),
    /// A stored value this version cannot read.
    #[error("unreadable stored value: {0}")]
    Corrupt(String),
    /// The database cannot be reached or refused the connection (TLS included).
    #[error("cannot connect to the database {address}: {message}")]
    Connect {
        /// The URL, password redacted.
        address: String,
        /// What went wrong, each cause once.
        message: String,
    },
    /// Creating the data directory failed.
    #[error("cannot create the data directory {path}: {message}")]
    DataDir {
        /// The directory.
        path: String,
        /// The I/O error.
        message: String,
    },
}

/// Result alias of the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The connection pool of the configured backend.
#[derive(Debug, Clone)]
pub enum Backend {
    /// PostgreSQL: several processes may share the database.
    Postgres(PgPool),
    /// SQLite: one process per database file.
    Sqlite(SqlitePool),
}

/// Handle to the database; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    backend: Backend,
    /// For SQLite: an exclusive lock on `<database>.lock`, held while any clone lives, so that
    /// a second process cannot work the same file (its recovery would steal running jobs).
    _lock: Option<std::sync::Arc<std::fs::File>>,
}

/// Runs `$body` with `$pool` bound to the concrete pool of `$store` (the code is instantiated once
/// per backend, so query and row types are inferred for each).
macro_rules! on_pool {
    ($store:expr, $pool:ident => $body:expr) => {
        match &$store.backend {
            $crate::store::Backend::Postgres($pool) => $body,
            $crate::store::Backend::Sqlite($pool) => $body,
        }
    };
}
pub(crate) use on_pool;

/// Size of the chunks datasets and results are stored in.
pub const CHUNK_BYTES: usize = 1 << 20;

/// The migrations of `migrations/`, embedded: (version, description, SQL). Every file of the
/// folder must be listed here (a unit test checks it).
pub const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "init", include_str!("../../migrations/0001_init.sql")),
    (
        2,
        "hierarchy specs",
        include_str!("../../migrations/0002_hierarchy_specs.sql"),
    ),
    (
        3,
        "webhook leases",
        include_str!("../../migrations/0003_webhook_leases.sql"),
    ),
    (
        4,
        "job documents",
        include_str!("../../migrations/0004_job_documents.sql"),
    ),
    (
        5,
        "job interruptions",
        include_str!("../../migrations/0005_job_interruptions.sql"),
    ),
    (
        6,
        "tenant fairness",
        include_str!("../../migrations/0006_tenant_fairness.sql"),
    ),
    (
        7,
        "job callback and limit",
        include_str!("../../migrations/0007_job_callback_and_limit.sql"),
    ),
    (
        8,
        "frequency tables",
        include_str!("../../migrations/0008_frequency_tables.sql"),
    ),
    (
        9,
        "job plans",
        include_str!("../../migrations/0009_job_plans.sql"),
    ),
    (
        10,
        "job algorithm",
        include_str!("../../migrations/0010_job_algorithm.sql"),
    ),
];

/// The migrator over [`MIGRATIONS`] (sqlx's own bookkeeping table and locking).
fn migrator() -> sqlx::migrate::Migrator {
    migrator_of(MIGRATIONS)
}

/// A migrator over some of [`MIGRATIONS`] (tests build databases as older releases left them).
pub fn migrator_of(migrations: &[(i64, &'static str, &'static str)]) -> sqlx::migrate::Migrator {
    use sqlx::SqlSafeStr;
    use sqlx::migrate::{Migration, MigrationType, Migrator};
    let migrations: Vec<Migration> = migrations
        .iter()
        .map(|&(version, description, sql)| {
            Migration::new(
                version,
                description.into(),
                MigrationType::Simple,
                sql.into_sql_str(),
                false,
            )
        })
        .collect();
    Migrator {
        migrations: migrations.into(),
        ..Migrator::DEFAULT
    }
}

/// Milliseconds since the Unix epoch, the store's time unit.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Store {
    /// Connects to `url` (or to `<data_dir>/deid.db` when `url` is `None`) and applies the
    /// migrations. SQLite runs in WAL mode with a busy timeout; sqlx serializes concurrent
    /// migrators on PostgreSQL with an advisory lock, so several replicas may start at once.
    pub async fn connect(
        url: Option<&str>,
        data_dir: &Path,
        max_connections: u32,
    ) -> Result<Store> {
        let url = match url {
            Some(u) if !u.trim().is_empty() => u.trim().to_string(),
            _ => {
                std::fs::create_dir_all(data_dir).map_err(|e| StoreError::DataDir {
                    path: data_dir.display().to_string(),
                    message: e.to_string(),
                })?;
                format!("sqlite://{}", data_dir.join("deid.db").display())
            }
        };
        let mut lock = None;
        let backend = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            check_postgres(&url).await?;
            let pool = PgPoolOptions::new()
                .max_connections(max_connections)
                .acquire_timeout(Duration::from_secs(10))
                .connect(&url)
                .await?;
            Backend::Postgres(pool)
        } else if url.starts_with("sqlite:") {
            let options = SqliteConnectOptions::from_str(&url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(10))
                .foreign_keys(true);
            let file = options.get_filename();
            if !file.as_os_str().is_empty() && file.as_os_str() != ":memory:" {
                let path = format!("{}.lock", file.display());
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(&path)
                    .map_err(|e| StoreError::DataDir {
                        path: path.clone(),
                        message: e.to_string(),
                    })?;
                if f.try_lock().is_err() {
                    return Err(StoreError::Locked(file.display().to_string()));
                }
                lock = Some(std::sync::Arc::new(f));
            }
            let pool = SqlitePoolOptions::new()
                .max_connections(max_connections)
                .acquire_timeout(Duration::from_secs(10))
                .connect_with(options)
                .await?;
            Backend::Sqlite(pool)
        } else {
            return Err(StoreError::UnsupportedUrl(redact_url(&url)));
        };
        let store = Store {
            backend,
            _lock: lock,
        };
        let migrator = migrator();
        on_pool!(store, pool => migrator.run(pool).await)?;
        Ok(store)
    }

    /// True for PostgreSQL (several processes may work the queue), false for SQLite.
    pub fn is_shared(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }

    /// Name of the backend for logs: `postgres` or `sqlite`.
    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Postgres(_) => "postgres",
            Backend::Sqlite(_) => "sqlite",
        }
    }

    /// Checks that the database answers (`/readyz`).
    pub async fn ping(&self) -> Result<()> {
        on_pool!(self, pool => sqlx::query("SELECT 1").execute(pool).await.map(|_| ()))?;
        Ok(())
    }

    /// Closes the pool.
    pub async fn close(&self) {
        on_pool!(self, pool => pool.close().await)
    }
}

/// Connects once to PostgreSQL at `url` before the pool is made, so that a bad address, a
/// refused connection or a TLS failure is reported at once, naming the address and each cause
/// once (the pool retries until its timeout and repeats the cause in every layer of its error).
/// An `sslrootcert` that cannot be read or holds no PEM certificate is named with its path.
async fn check_postgres(url: &str) -> Result<()> {
    use sqlx::ConnectOptions;
    let connect_error = |message: String| StoreError::Connect {
        address: redact_url(url),
        message,
    };
    let options = sqlx::postgres::PgConnectOptions::from_str(url)
        .map_err(|e| connect_error(error_chain(&e)))?;
    if let Some(path) = url
        .split_once('?')
        .and_then(|(_, q)| q.split('&').find_map(|kv| kv.strip_prefix("sslrootcert=")))
    {
        let pem = std::fs::read(path)
            .map_err(|e| connect_error(format!("cannot read sslrootcert {path}: {e}")))?;
        if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
            return Err(connect_error(format!(
                "sslrootcert {path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
            )));
        }
    }
    match tokio::time::timeout(Duration::from_secs(10), options.connect()).await {
        Ok(Ok(conn)) => {
            let _ = sqlx::Connection::close(conn).await;
            Ok(())
        }
        Ok(Err(e)) => Err(connect_error(error_chain(&e))),
        Err(_) => Err(connect_error("no answer within 10 s".into())),
    }
}

/// An error and its sources as one message, each distinct part once: sqlx and rustls repeat
/// their cause's text in every layer.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(e);
    while let Some(err) = next {
        for part in err.to_string().split(": ") {
            let part = part.trim();
            if !part.is_empty() && !parts.iter().any(|p| p.contains(part)) {
                parts.push(part.to_string());
            }
        }
        next = err.source();
    }
    parts.join(": ")
}

/// Removes the password from a database URL for messages.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_chains_name_each_cause_once() {
        #[derive(Debug)]
        struct E(&'static str, Option<Box<E>>);
        impl std::fmt::Display for E {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for E {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|e| e as _)
            }
        }
        let inner = E("invalid peer certificate: UnknownIssuer", None);
        let middle = E(
            "error communicating with database: invalid peer certificate: UnknownIssuer",
            Some(Box::new(inner)),
        );
        let outer = E(
            "error occurred while attempting to establish a TLS connection: invalid peer certificate: UnknownIssuer",
            Some(Box::new(middle)),
        );
        assert_eq!(
            error_chain(&outer),
            "error occurred while attempting to establish a TLS connection: invalid peer certificate: UnknownIssuer: error communicating with database"
        );
    }

    #[test]
    fn every_migration_file_is_embedded() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "sql"))
            .collect();
        files.sort();
        assert_eq!(files.len(), MIGRATIONS.len());
        for (path, (version, _, sql)) in files.iter().zip(MIGRATIONS) {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            assert!(name.starts_with(&format!("{version:04}_")), "{name}");
            assert_eq!(&std::fs::read_to_string(path).unwrap(), sql);
        }
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("postgres://u:secret@h/db"),
            "postgres://u:***@h/db"
        );
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
    }
}
