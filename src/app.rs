//! Assembling and running the service: [`App::build`] connects the store (running migrations),
//! creates the engine pool and the worker, builds the router and binds the listener (port 0 is
//! fine: [`App::port`] tells which port was taken); [`App::run`] serves until the shutdown
//! future completes, then shuts down gracefully:
//! 1. cancel the root token: the server stops accepting, event streams end, the worker stops
//!    claiming, running jobs stop and hand their lease back;
//! 2. wait (at most the grace period) for the tracked tasks;
//! 3. close the database pool.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, bail};
use dashmap::DashMap;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::api;
use crate::api::keys::ApiKeys;
use crate::api::state::AppState;
use crate::config::ServeArgs;
use crate::store::Store;
use crate::worker::pool::EnginePool;
use crate::worker::runner::{Runner, RunnerSettings};

/// A built, bound, not yet serving application.
#[derive(Debug)]
pub struct App {
    listener: TcpListener,
    router: axum::Router,
    state: AppState,
    token: CancellationToken,
    tracker: TaskTracker,
}

/// Refuses a configuration that cannot be served: no API keys on a non-loopback address, or a
/// limit below 1.
fn check_limits(config: &ServeArgs, keys: &ApiKeys) -> anyhow::Result<()> {
    if keys.is_empty() && !config.bind.ip().is_loopback() {
        bail!(
            "refusing to listen on {} without API keys: set DEID_API_KEYS (tenant:key,…) or bind to 127.0.0.1",
            config.bind
        );
    }
    if config.max_queued_jobs_per_tenant < 1 || config.max_running_jobs_per_tenant < 1 {
        bail!("--max-queued-jobs-per-tenant and --max-running-jobs-per-tenant must be at least 1");
    }
    if config.max_risk_requests == 0 {
        bail!("--max-risk-requests must be at least 1");
    }
    if config.workers == 0 {
        bail!("--workers must be at least 1");
    }
    if config.max_attempts < 1 {
        bail!("--max-attempts must be at least 1");
    }
    Ok(())
}

/// The extra root certificates trusted for webhooks (`DEID_WEBHOOK_CA_FILE`, PEM), if any.
fn webhook_roots(config: &ServeArgs) -> anyhow::Result<Vec<reqwest::Certificate>> {
    Ok(match &config.webhook_ca_file {
        Some(path) => {
            let pem = std::fs::read(path)
                .with_context(|| format!("cannot read DEID_WEBHOOK_CA_FILE {}", path.display()))?;
            let roots = reqwest::Certificate::from_pem_bundle(&pem).with_context(|| {
                format!(
                    "DEID_WEBHOOK_CA_FILE {}: not PEM certificates",
                    path.display()
                )
            })?;
            if roots.is_empty() {
                bail!(
                    "DEID_WEBHOOK_CA_FILE {}: no certificate in the file",
                    path.display()
                );
            }
            roots
        }
        None => Vec::new(),
    })
}

impl App {
    /// Validates the configuration, connects the database and binds the listener.
    pub async fn build(config: ServeArgs) -> anyhow::Result<App> {
        let keys = ApiKeys::parse(&config.api_keys)?;
        check_limits(&config, &keys)?;
        crate::tls::install_crypto_provider();
        let webhook_roots = webhook_roots(&config)?;
        let store = Store::connect(
            config.database_url.as_deref(),
            &config.data_dir,
            config.db_connections.max(2),
        )
        .await
        .context("cannot open the database")?;
        let engine_threads = config.engine_threads();
        let pool =
            Arc::new(EnginePool::new(engine_threads).context("cannot start the engine pool")?);
        let token = CancellationToken::new();
        let tracker = TaskTracker::new();
        let live = Arc::new(DashMap::new());
        let runner = Runner::new(
            store.clone(),
            pool,
            live.clone(),
            RunnerSettings {
                concurrency: config.workers,
                lease: config.lease,
                poll_interval: config.poll_interval,
                default_time_limit: config.default_time_limit,
                webhook_attempts: config.webhook_attempts,
                webhook_backoff: config.webhook_backoff,
                webhook_allow_private: config.webhook_allow_private,
                webhook_roots: Arc::new(webhook_roots),
                upload_timeout: config.upload_timeout,
                max_output_bytes: config.max_output_bytes,
                max_running_per_tenant: config.max_running_jobs_per_tenant,
            },
            token.clone(),
            tracker.clone(),
        );
        crate::telemetry::metrics();
        let state = AppState {
            store,
            runner,
            live,
            config: Arc::new(config.clone()),
            keys: Arc::new(keys),
            shutdown: token.clone(),
            engine_threads,
            risk_slots: Arc::new(tokio::sync::Semaphore::new(config.max_risk_requests)),
        };
        let router = api::router(state.clone());
        let listener = TcpListener::bind(config.bind)
            .await
            .with_context(|| format!("cannot listen on {}", config.bind))?;
        Ok(App {
            listener,
            router,
            state,
            token,
            tracker,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.local_addr().port()
    }

    /// The root cancellation token (cancelling it shuts the app down).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Starts the worker and serves until `shutdown` completes; then shuts down gracefully.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let App {
            listener,
            router,
            state,
            token,
            tracker,
        } = self;
        let addr = listener.local_addr()?;
        state
            .runner
            .start()
            .await
            .context("cannot start the job worker")?;
        if state.keys.is_empty() {
            tracing::warn!(
                "no API keys configured: listening on loopback only, every request is tenant 'default'"
            );
        }
        tracing::info!(
            %addr,
            database = state.store.backend_name(),
            worker = state.runner.owner(),
            "deid listening on http://{addr}"
        );
        let signal_token = token.clone();
        tokio::spawn(async move {
            shutdown.await;
            signal_token.cancel();
        });
        let serve_token = token.clone();
        axum::serve(listener, router)
            .with_graceful_shutdown(async move { serve_token.cancelled().await })
            .await
            .context("the HTTP server failed")?;
        token.cancel();
        tracing::info!("shutting down: waiting for running jobs to hand back their lease");
        tracker.close();
        if tokio::time::timeout(state.config.shutdown_grace, tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("shutdown grace period over; some tasks were still running");
        }
        state.store.close().await;
        tracing::info!("stopped");
        Ok(())
    }
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

/// Flags of `deid healthcheck`.
#[derive(Debug, Clone, clap::Args)]
pub struct HealthcheckArgs {
    /// Address the service listens on (an unspecified IP means loopback).
    #[arg(long, env = "DEID_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
}

/// `GET /healthz` over plain TCP (the runtime image has no curl); fails unless the answer is 200.
pub fn healthcheck(args: &HealthcheckArgs) -> anyhow::Result<()> {
    use std::io::{Read, Write};
    let mut addr = args.bind;
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let timeout = std::time::Duration::from_secs(3);
    let mut stream = std::net::TcpStream::connect_timeout(&addr, timeout)
        .with_context(|| format!("cannot connect to {addr}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.write_all(b"GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) == Some("200") {
        Ok(())
    } else {
        bail!("unhealthy: {status}")
    }
}
