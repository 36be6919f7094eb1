//! deid: de-identification of tabular personal data.
//!
//! - [`engine`]: the pure, synchronous anonymization engine (data, hierarchies, lattice, checks,
//!   privacy and quality models, search algorithms).
//! - [`cli`]: the `deid` command line (`evaluate`, `serve`, …).
//! - The service: [`config`] (flags and environment), [`app`] (assembly, graceful shutdown),
//!   [`api`] (HTTP routes), [`jobs`] (queue worker, engine pool, progress), [`store`]
//!   (PostgreSQL or SQLite), [`telemetry`] (logs and metrics).

pub mod api;
pub mod api_bench;
pub mod app;
pub mod cli;
pub mod config;
pub mod dataset;
pub mod engine;
pub mod jobs;
pub mod report;
pub mod spec;
pub mod store;
pub mod telemetry;
