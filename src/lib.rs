//! deid: de-identification of tabular personal data, as a service and a command line.
//!
//! The anonymization engine is its own crate, [`deid_engine`] (`crates/deid-engine`): pure,
//! synchronous and deterministic. This crate holds everything around it:
//! - [`job`]: the job domain — specification, hierarchy resolution, specification → problem,
//!   validation, progress, reports, views, error codes and ids — shared by the front ends:
//! - [`cli`]: the `deid` command line (`evaluate`, `anonymize`, `serve`, `bench`, `bench-api`, …);
//! - the service: [`config`] (flags and environment), [`app`] (assembly, graceful shutdown),
//!   [`api`] (HTTP routes), [`console`] (the web console's embedded assets), [`worker`] (queue worker, engine pool, live jobs, webhooks),
//!   [`store`] (PostgreSQL or SQLite), [`telemetry`] (logs and metrics), [`tls`] (rustls's
//!   provider);
//! - [`parquet`]: Apache Parquet in and out, by the one typed→text rule.
//!
//! `docs/architecture.md` maps every concept to its one home.

pub mod api;
pub mod app;
pub mod cli;
pub mod config;
pub mod console;
pub mod job;
pub mod parquet;
pub mod store;
pub mod telemetry;
pub mod tls;
pub mod worker;
