//! deid's anonymization engine: synchronous, pure and deterministic. No async runtime, no database,
//! no HTTP — usable as a library, from the CLI and from the service's worker pool alike.
//!
//! Layout: [`data`] (the CSV scanner and dictionary-encoded tables) → [`hierarchy`]
//! (generalization hierarchies) → [`problem`] (a validated, encoded problem) → [`check`] (decide
//! and score one transformation) using [`privacy`] and [`quality`] models over the [`lattice`] of
//! transformations; [`output`] writes the anonymized table and [`risk`] reports
//! re-identification risks; [`mod@search`] finds the best anonymous transformation. [`builder`]
//! creates hierarchies from small specifications and [`profile`] profiles columns (type
//! detection with a suggested specification, the streaming profile of a CSV table).
//! [`dataset`] loads datasets in the layout of ARX's benchmark files.

pub mod builder;
pub mod check;
pub mod config;
pub mod data;
pub mod dataset;
pub mod error;
pub mod hierarchy;
pub mod lattice;
pub mod output;
pub mod privacy;
pub mod problem;
pub mod profile;
pub mod quality;
pub mod risk;
pub mod search;

pub use builder::HierarchySpec;
pub use check::{CheckResult, Checker, Evaluation};
pub use config::{ProblemConfig, QuasiIdentifier, SensitiveAttribute};
pub use data::{CsvOptions, CsvScanner, Table};
pub use error::{EngineError, Result};
pub use hierarchy::Hierarchy;
pub use lattice::{Lattice, Levels};
pub use privacy::PrivacyModel;
pub use problem::Problem;
pub use profile::{ColumnProfile, ColumnType, TableProfile};
pub use quality::{QualityConfig, QualityModel};
pub use search::{
    Algorithm, CancelFlag, GeneticParams, Improvement, NoObserver, Phase, Progress,
    ProgressObserver, SearchConfig, SearchOutcome, StopReason, search,
};
