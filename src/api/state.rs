//! Shared state of the handlers.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::auth::ApiKeys;
use crate::config::ServeArgs;
use crate::jobs::runner::{LiveJobs, Runner};
use crate::store::Store;

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
}
