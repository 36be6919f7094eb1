//! deid: de-identification of tabular personal data, as a service and a command line.
//!
//! The anonymization engine is its own crate, [`deid_engine`] (`crates/deid-engine`): pure,
//! synchronous and deterministic. This crate holds everything around it:
//! - [`cli`]: the `deid` command line (`evaluate`, `anonymize`, `serve`, `bench`, `bench-api`, …).
//! - The service: [`config`] (flags and environment), [`app`] (assembly, graceful shutdown),
//!   [`api`] (HTTP routes), [`jobs`] (queue worker, engine pool, progress), [`store`]
//!   (PostgreSQL or SQLite), [`telemetry`] (logs and metrics).
//!
//! `docs/architecture.md` maps every concept to its one home.

pub mod api;
pub mod app;
pub mod cli;
pub mod config;
pub mod jobs;
pub mod report;
pub mod spec;
pub mod store;
pub mod telemetry;
