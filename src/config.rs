//! Configuration of `deid serve`: every setting is a flag with an environment variable
//! (`DEID_*`, plus the conventional `DATABASE_URL`), so the same binary runs on a laptop with no
//! setup and in containers configured by environment.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::telemetry::LogFormat;

/// Flags of `deid serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port). Without API keys only loopback
    /// addresses are allowed.
    #[arg(long, env = "DEID_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
    /// Database: `postgres://user@host/db` or `sqlite:path`. Default: SQLite in the data directory.
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,
    /// Directory of the embedded SQLite database.
    #[arg(long, env = "DEID_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// Database connections of this process.
    #[arg(long, env = "DEID_DB_CONNECTIONS", default_value_t = 16)]
    pub db_connections: u32,
    /// API keys as `tenant:key` pairs separated by commas. Keys are kept only as SHA-256 hashes.
    #[arg(
        long,
        env = "DEID_API_KEYS",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub api_keys: Vec<String>,
    /// Jobs this process runs at once.
    #[arg(long, env = "DEID_WORKERS", default_value_t = 1)]
    pub workers: usize,
    /// Threads of the engine pool (default: the number of CPUs).
    #[arg(long, env = "DEID_ENGINE_THREADS")]
    pub engine_threads: Option<usize>,
    /// Largest accepted upload in bytes.
    #[arg(long, env = "DEID_MAX_UPLOAD_BYTES", default_value_t = 1 << 30)]
    pub max_upload_bytes: u64,
    /// Largest accepted number of data rows.
    #[arg(long, env = "DEID_MAX_ROWS", default_value_t = 20_000_000)]
    pub max_rows: u64,
    /// Largest accepted number of columns.
    #[arg(long, env = "DEID_MAX_COLUMNS", default_value_t = 1000)]
    pub max_columns: u64,
    /// Largest accepted job time limit (e.g. `30m`).
    #[arg(long, env = "DEID_MAX_TIME_LIMIT", default_value = "1h", value_parser = parse_duration)]
    pub max_time_limit: Duration,
    /// Time limit of jobs that give none.
    #[arg(long, env = "DEID_DEFAULT_TIME_LIMIT", default_value = "60s", value_parser = parse_duration)]
    pub default_time_limit: Duration,
    /// Queued jobs (all tenants) beyond which new jobs get 429.
    #[arg(long, env = "DEID_MAX_QUEUED_JOBS", default_value_t = 100)]
    pub max_queued_jobs: i64,
    /// Largest anonymized CSV of one job in bytes: measured before it is written (a larger one
    /// fails the job with `output_too_large`; 422 at submission when it cannot fit).
    #[arg(long, env = "DEID_MAX_OUTPUT_BYTES", default_value_t = 4 << 30)]
    pub max_output_bytes: u64,
    /// Synchronous risk analyses (`POST /v1/datasets/{id}/risk`) running at once; more get 429
    /// `too_many_requests` with `Retry-After`.
    #[arg(long, env = "DEID_MAX_RISK_REQUESTS", default_value_t = 2)]
    pub max_risk_requests: usize,
    /// Queued jobs of one tenant beyond which its new jobs get 429 (other tenants are still
    /// admitted).
    #[arg(long, env = "DEID_MAX_QUEUED_JOBS_PER_TENANT", default_value_t = 25)]
    pub max_queued_jobs_per_tenant: i64,
    /// Running jobs of one tenant (all processes): its further jobs wait while other tenants'
    /// jobs are claimed.
    #[arg(long, env = "DEID_MAX_RUNNING_JOBS_PER_TENANT", default_value_t = 4)]
    pub max_running_jobs_per_tenant: i64,
    /// Claims of a job before it fails (crashes, lost leases, storage errors).
    #[arg(long, env = "DEID_MAX_ATTEMPTS", default_value_t = 3)]
    pub max_attempts: i64,
    /// Lease of a running job; another process takes over this long after heartbeats stop.
    #[arg(long, env = "DEID_LEASE", default_value = "30s", value_parser = parse_duration)]
    pub lease: Duration,
    /// How often idle workers look for jobs queued by other processes.
    #[arg(long, env = "DEID_POLL_INTERVAL", default_value = "1s", value_parser = parse_duration)]
    pub poll_interval: Duration,
    /// Timeout of ordinary requests (not uploads, event streams or downloads).
    #[arg(long, env = "DEID_REQUEST_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// Timeout of dataset uploads.
    #[arg(long, env = "DEID_UPLOAD_TIMEOUT", default_value = "30m", value_parser = parse_duration)]
    pub upload_timeout: Duration,
    /// Time running jobs get to hand back their lease at shutdown.
    #[arg(long, env = "DEID_SHUTDOWN_GRACE", default_value = "10s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    /// Attempts of a webhook delivery.
    #[arg(long, env = "DEID_WEBHOOK_ATTEMPTS", default_value_t = 5)]
    pub webhook_attempts: u32,
    /// First delay between webhook attempts (doubled each time).
    #[arg(long, env = "DEID_WEBHOOK_BACKOFF", default_value = "1s", value_parser = parse_duration)]
    pub webhook_backoff: Duration,
    /// Allow callback URLs that point to loopback, private, link-local or other non-public
    /// addresses (off by default: a job submitter must not be able to make the server POST to
    /// internal services).
    #[arg(long, env = "DEID_WEBHOOK_ALLOW_PRIVATE", default_value_t = false)]
    pub webhook_allow_private: bool,
    /// PEM file of certificate authorities trusted for https callbacks besides the system's
    /// (e.g. an internal CA).
    #[arg(long, env = "DEID_WEBHOOK_CA_FILE")]
    pub webhook_ca_file: Option<std::path::PathBuf>,
    /// Log format.
    #[arg(long, env = "DEID_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl Default for ServeArgs {
    fn default() -> Self {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            args: ServeArgs,
        }
        // Defaults only: ignore the process's arguments (but not its environment).
        Wrapper::parse_from(["deid"]).args
    }
}

impl ServeArgs {
    /// Engine threads: the flag or the number of CPUs.
    pub fn engine_threads(&self) -> usize {
        self.engine_threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
            .max(1)
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    crate::job::spec::parse_duration(text).map_err(|_| {
        format!("cannot read '{text}' as a duration; expected e.g. 500ms, 30s, 5m, 1h")
    })
}
