//! deid's anonymization engine: synchronous, pure and deterministic. No async runtime, no database,
//! no HTTP — usable as a library, from the CLI and from the service's worker pool alike.
//!
//! Layout, in layers (a module only uses modules of lower layers; the engine's integration test
//! `layering` fails on any import cycle):
//!
//! 1. [`error`] (what can go wrong), [`cancel`] (cooperative cancellation), [`hash`] (the fixed
//!    hashes of codes and values), [`names`] (the names of enum values: [`names::enum_names!`]),
//!    [`lattice`] (the space of transformations) and [`population`] (population models and
//!    population-uniqueness estimators: numerics on class sizes);
//! 2. [`data`] (the CSV scanner and dictionary-encoded tables);
//! 3. [`hierarchy`] (generalization hierarchies; [`hierarchy::builder`] creates them from small
//!    specifications) and [`profile`] (column profiles: type detection with a suggested
//!    hierarchy, the streaming profile of a CSV table);
//! 4. [`privacy`] and [`quality`] models, each compiled against the data by the layer above,
//!    and [`aggregate`] (microaggregation functions);
//! 5. [`config`] (what the user asks for) and [`dataset`] (loads datasets in the layout of ARX's
//!    benchmark files);
//! 6. [`problem`] (a validated, encoded problem);
//! 7. [`check`] (decide and score one transformation);
//! 8. [`mod@search`] (finds the best anonymous transformation), [`output`] (writes the
//!    anonymized table) and [`risk`] (re-identification risks);
//! 9. [`posthoc`] (quality measured on an output's records);
//! 10. [`local`] (local generalization: a transformation per group of records);
//! 11. [`verify`] (released data re-checked against the privacy models from scratch, with a
//!     grouping of its own).
//! 12. [`plan`] (the recoding plan of an output, and applying it to a CSV).

pub mod aggregate;
pub mod calendar;
pub mod cancel;
pub mod check;
pub mod config;
pub mod data;
pub mod dataset;
pub mod decimal;
pub mod error;
pub mod hash;
pub mod hierarchy;
pub mod lattice;
pub mod local;
pub mod names;
pub mod output;
pub mod plan;
pub mod population;
pub mod posthoc;
pub mod privacy;
pub mod problem;
pub mod profile;
pub mod quality;
pub mod risk;
pub mod search;
pub mod verify;

pub use check::{CheckResult, Checker, Evaluation};
pub use config::{ProblemConfig, QuasiIdentifier, SensitiveAttribute};
pub use data::{CsvOptions, CsvScanner, Table};
pub use error::{EngineError, Result};
pub use hierarchy::builder::HierarchySpec;
pub use hierarchy::{DuplicatePolicy, DuplicateValue, Hierarchy};
pub use lattice::{Lattice, Levels};
pub use privacy::PrivacyModel;
pub use problem::Problem;
pub use profile::{ColumnProfile, ColumnType, TableProfile};
pub use quality::{QualityConfig, QualityModel};
pub use search::{
    Algorithm, CancelFlag, GeneticParams, Improvement, NoObserver, Phase, Progress,
    ProgressObserver, SearchConfig, SearchOutcome, StopReason, search,
};
