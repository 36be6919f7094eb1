//! The engine pool: one named rayon pool for searches, so CPU-bound work never runs on tokio's
//! worker threads. [`EnginePool::spawn`] runs a closure there inside
//! `catch_unwind` (a panic in a rayon task would abort the process) and hands the result back
//! on a oneshot channel; the caller awaits it.

use std::panic::{AssertUnwindSafe, catch_unwind};

use tokio::sync::oneshot;

/// A search panicked; the message is kept for the job's error.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the search panicked: {0}")]
pub struct JobPanic(pub String);

/// The dedicated pool for searches.
#[derive(Debug)]
pub struct EnginePool {
    pool: rayon::ThreadPool,
}

impl EnginePool {
    /// A pool of `threads` threads named `engine-{i}`.
    pub fn new(threads: usize) -> std::io::Result<EnginePool> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .thread_name(|i| format!("engine-{i}"))
            .build()
            .map_err(std::io::Error::other)?;
        Ok(EnginePool { pool })
    }

    /// Number of threads.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Runs `f` on the pool (inside the caller's tracing span); the receiver yields its result
    /// or the panic message. If the receiver is dropped, the result is discarded.
    pub fn spawn<T, F>(&self, f: F) -> oneshot::Receiver<Result<T, JobPanic>>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let span = tracing::Span::current();
        self.pool.spawn(move || {
            let _entered = span.enter();
            let result = catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_string());
                JobPanic(message)
            });
            let _ = tx.send(result);
        });
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn results_and_panics_come_back() {
        let pool = EnginePool::new(1).unwrap();
        assert_eq!(pool.spawn(|| 6 * 7).await.unwrap().unwrap(), 42);
        let err = pool
            .spawn(|| -> u32 { panic!("boom") })
            .await
            .unwrap()
            .unwrap_err();
        assert!(err.0.contains("boom"));
        // The pool survives the panic.
        assert_eq!(pool.spawn(|| 1).await.unwrap().unwrap(), 1);
    }
}
