//! Cooperative cancellation of long-running work (searches, hierarchy builds).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Cooperative cancellation: set it from any thread; a search stops within ~100 ms plus one
/// check and returns the best transformation found so far, a hierarchy build stops after the
/// current row with [`EngineError::Cancelled`](crate::EngineError::Cancelled).
#[derive(Debug, Clone, Default)]
pub struct CancelFlag(pub Arc<AtomicBool>);

impl CancelFlag {
    /// A flag that is not set.
    pub fn new() -> Self {
        CancelFlag::default()
    }

    /// Requests cancellation.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// True once cancellation was requested.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
