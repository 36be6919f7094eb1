//! Shared state of the handlers.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::keys::ApiKeys;
use crate::config::ServeArgs;
use crate::job::spec::SearchLimits;
use crate::store::Store;
use crate::worker::runner::{LiveJobs, Runner};

/// Everything handlers need; cheap to clone.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The database.
    pub store: Store,
    /// This process's worker (to wake it when a job is queued).
    pub runner: Arc<Runner>,
    /// Jobs running in this process.
    pub live: LiveJobs,
    /// Configuration.
    pub config: Arc<ServeArgs>,
    /// API keys.
    pub keys: Arc<ApiKeys>,
    /// Root shutdown token: event streams end when it fires.
    pub shutdown: CancellationToken,
    /// Threads of the engine pool (the maximum of a job's `threads`).
    pub engine_threads: usize,
    /// Permits of synchronous risk analyses (`--max-risk-requests`).
    pub risk_slots: Arc<tokio::sync::Semaphore>,
}

impl AppState {
    /// The search limits of jobs: the configured default and maximum time limits, and the
    /// engine pool searches run on.
    pub fn search_limits(&self) -> SearchLimits {
        SearchLimits {
            default_time_limit: self.config.default_time_limit,
            max_time_limit: Some(self.config.max_time_limit),
            pool_threads: Some(self.engine_threads),
        }
    }
}
