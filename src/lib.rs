//! deid: de-identification of tabular personal data.
//!
//! - [`engine`]: the pure, synchronous anonymization engine (data, hierarchies, lattice, checks,
//!   privacy and quality models, search algorithms).
//! - [`cli`]: the `deid` command line (`evaluate`, …).

pub mod cli;
pub mod dataset;
pub mod engine;
pub mod report;
pub mod spec;
