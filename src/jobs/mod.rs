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

use crate::engine::{Hierarchy, Table};
use crate::spec::{HierarchySource, SpecError};

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
            let d = match delimiter {
                Some(c) if c.is_ascii() => *c as u8,
                Some(c) => {
                    return Err(SpecError::new(
                        format!("{field}.delimiter"),
                        format!("the delimiter must be one ASCII character, got '{c}'"),
                    ));
                }
                None => sniff_delimiter(csv.as_bytes()),
            };
            Hierarchy::read_csv(csv.as_bytes(), d, column)
                .map_err(|e| SpecError::new(field, e.to_string()))
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
            let spec = crate::spec::parse_builder(value, &field)?;
            let on_field = |e: crate::engine::EngineError| SpecError::new(&field, e.to_string());
            spec.validate(column).map_err(on_field)?;
            match table.and_then(|t| t.column_index(column).map(|i| t.column(i))) {
                Some(col) => spec.build(col).map_err(on_field),
                None => Hierarchy::from_rows(vec![vec![String::new()]], column).map_err(on_field),
            }
        }
    }
}

/// Picks the most frequent of `;`, `,`, tab and `|` in the first line (`;`, ARX's default, on ties).
pub fn sniff_delimiter(text: &[u8]) -> u8 {
    let first = text.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let mut best = (b';', first.iter().filter(|&&b| b == b';').count());
    for d in [b',', b'\t', b'|'] {
        let n = first.iter().filter(|&&b| b == d).count();
        if n > best.1 {
            best = (d, n);
        }
    }
    best.0
}
