//! Running jobs: the queue worker ([`runner`]), the engine pool ([`cpu`]), the seam to the search
//! ([`execute`]), live progress ([`progress`]), chunked I/O against the store ([`chunks`]), the
//! client view ([`view`]) and webhooks ([`webhook`]).

pub mod chunks;
pub mod cpu;
pub mod execute;
pub mod progress;
pub mod runner;
pub mod view;
pub mod webhook;

use crate::spec::{HierarchySource, SpecError};
use deid_engine::{Hierarchy, Table};

/// Resolves the hierarchy sources a job may contain once stored hierarchies have been inlined:
/// inline CSV, and builder specifications, built against the column of `table` (without a
/// table a builder specification is only checked, and a one-level placeholder is returned).
pub fn load_hierarchy(
    table: Option<&Table>,
    column: &str,
    source: Option<&HierarchySource>,
) -> Result<Hierarchy, SpecError> {
    let field = format!("attributes.{column}.hierarchy");
    match source {
        None => Err(SpecError::new(
            field,
            "a quasi-identifier needs a hierarchy: upload one with PUT /v1/datasets/{id}/hierarchies/{column} \
             and use {\"stored\": true}, or give {\"csv\": \"…\"} inline",
        )),
        Some(HierarchySource::Inline { csv, delimiter }) => {
            crate::spec::hierarchy_from_csv(csv.as_bytes(), *delimiter, column, &field)
        }
        Some(HierarchySource::Stored { .. }) => Err(SpecError::new(
            field,
            "stored hierarchies are resolved when the job is created",
        )),
        Some(HierarchySource::File { .. }) => Err(SpecError::new(
            field,
            "file paths are not accepted by the service; upload the hierarchy or give it inline",
        )),
        Some(HierarchySource::Builder(value)) => {
            crate::spec::hierarchy_from_builder(value, table, column, &field)
        }
    }
}
