//! Running jobs in this process: the queue worker ([`runner`]: claim, heartbeat, run, finish),
//! the engine pool ([`pool`]: CPU-bound searches off the async runtime), the jobs running here
//! ([`live`]: cancel flags and live progress), chunked I/O against the store ([`chunks`]) and
//! webhooks ([`webhook`]). What a job *is* (specification, problem, progress, report, view) is
//! the job domain's, [`crate::job`].

pub mod chunks;
pub mod live;
pub mod pool;
pub mod runner;
pub mod webhook;
