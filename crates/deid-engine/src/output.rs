//! Writes the anonymized table: header kept (minus identifying columns), row order kept,
//! quasi-identifiers generalized, everything else unchanged — except for the records of
//! suppressed classes, which [`SuppressedRecords`] decides: by default ([`SuppressedRecords::Mask`])
//! their quasi-identifiers *and* sensitive attributes become the marker, so the block of
//! suppressed records discloses nothing (ARX keeps their sensitive values: whoever knows that a
//! neighbour's records were suppressed would learn them). Streams row by row.

use std::collections::BTreeMap;
use std::io::Write;

use crate::check::Evaluation;
use crate::error::{EngineError, Result};
use crate::problem::Problem;

/// The default text written for the suppressed values of a record.
pub const SUPPRESSED: &str = "*";

/// What a suppressed record looks like in the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SuppressedRecords {
    /// Quasi-identifiers and sensitive attributes are the marker (the default).
    #[default]
    Mask,
    /// The record is left out of the output.
    Remove,
    /// ARX's output: quasi-identifiers are the marker, sensitive attributes are kept. Unsafe:
    /// the suppressed block can itself violate the privacy models.
    KeepSensitive,
}

impl SuppressedRecords {
    /// Every mode.
    pub const ALL: [SuppressedRecords; 3] = [
        SuppressedRecords::Mask,
        SuppressedRecords::Remove,
        SuppressedRecords::KeepSensitive,
    ];

    /// Stable name (`mask`, `remove`, `keep_sensitive`).
    pub fn name(self) -> &'static str {
        match self {
            SuppressedRecords::Mask => "mask",
            SuppressedRecords::Remove => "remove",
            SuppressedRecords::KeepSensitive => "keep_sensitive",
        }
    }

    /// The mode named `name`.
    pub fn parse(name: &str) -> Option<SuppressedRecords> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// How suppressed records are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputOptions {
    /// What a suppressed record looks like.
    pub suppressed: SuppressedRecords,
    /// The text of a suppressed value (default `*`).
    pub marker: String,
}

impl Default for OutputOptions {
    fn default() -> Self {
        OutputOptions {
            suppressed: SuppressedRecords::Mask,
            marker: SUPPRESSED.to_string(),
        }
    }
}

impl OutputOptions {
    /// Refuses an empty marker and a marker that occurs as a value of a quasi-identifier or
    /// sensitive column: suppressed and published records would look the same. Errors name
    /// `suppression_marker` and the column.
    pub fn validate(&self, problem: &Problem) -> Result<()> {
        if self.marker.is_empty() {
            return Err(EngineError::config(
                "suppression_marker",
                "expected a non-empty text for suppressed values, e.g. \"*\"",
            ));
        }
        for &c in self.masked_columns(problem).keys() {
            let column = problem.table().column(c);
            if column.dict.code(&self.marker).is_some() {
                return Err(EngineError::config(
                    "suppression_marker",
                    format!(
                        "column '{}' contains the value '{}', which marks suppressed values: \
                         suppressed and published records would look the same; choose another \
                         suppression_marker (e.g. \"[suppressed]\")",
                        column.name, self.marker
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The columns a suppressed record masks → quasi-identifier index (`None`: a sensitive
    /// attribute, masked in [`SuppressedRecords::Mask`] mode only).
    fn masked_columns(&self, problem: &Problem) -> BTreeMap<usize, Option<usize>> {
        let mut columns: BTreeMap<usize, Option<usize>> = problem
            .qi_columns()
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, Some(i)))
            .collect();
        if self.suppressed != SuppressedRecords::KeepSensitive {
            for s in &problem.config().sensitive {
                if let Some(c) = problem.table().column_index(&s.column) {
                    columns.entry(c).or_insert(None);
                }
            }
        }
        columns
    }
}

/// What [`write_csv`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Written {
    /// Data rows written.
    pub rows: usize,
    /// Suppressed records left out ([`SuppressedRecords::Remove`]).
    pub removed: usize,
}

/// Streams the anonymized table as CSV with the given delimiter.
pub fn write_csv<W: Write>(
    problem: &Problem,
    evaluation: &Evaluation,
    out: W,
    delimiter: u8,
    options: &OutputOptions,
) -> Result<Written> {
    let table = problem.table();
    let levels = &evaluation.result.levels;
    let masked = options.masked_columns(problem);
    /// What an output column holds.
    enum Cell {
        /// The value as it is.
        Copy,
        /// Quasi-identifier i, generalized.
        Qi(usize),
        /// A sensitive attribute: copied, the marker for suppressed records.
        Sensitive,
    }
    let plan: Vec<(usize, Cell)> = (0..table.columns().len())
        .filter(|c| !problem.identifying_columns().contains(c))
        .map(|c| {
            let cell = match masked.get(&c) {
                Some(Some(i)) => Cell::Qi(*i),
                Some(None) => Cell::Sensitive,
                None => Cell::Copy,
            };
            (c, cell)
        })
        .collect();
    let q = levels.len();
    let mut w = csv::WriterBuilder::new()
        .delimiter(delimiter)
        .from_writer(out);
    let io = |e: csv::Error| EngineError::Output(e.to_string());
    w.write_record(plan.iter().map(|(c, _)| table.column(*c).name.as_str()))
        .map_err(io)?;
    let mut written = Written::default();
    let marker = options.marker.as_str();
    let mut record: Vec<&str> = Vec::with_capacity(plan.len());
    for (row, &base) in problem.row_groups().iter().enumerate() {
        let class = evaluation.class_of_base[base as usize] as usize;
        let suppressed = evaluation.suppressed[class];
        if suppressed && options.suppressed == SuppressedRecords::Remove {
            written.removed += 1;
            continue;
        }
        record.clear();
        for (c, cell) in &plan {
            let value = match cell {
                Cell::Qi(_) | Cell::Sensitive if suppressed => marker,
                Cell::Copy | Cell::Sensitive => {
                    let col = table.column(*c);
                    col.dict.value(col.codes.get(row))
                }
                Cell::Qi(i) => {
                    let code = evaluation.groups.codes[class * q + i];
                    problem.hierarchies()[*i].label(levels[*i] as usize, code, table.column(*c))
                }
            };
            record.push(value);
        }
        w.write_record(&record).map_err(io)?;
        written.rows += 1;
    }
    w.flush().map_err(|e| EngineError::Output(e.to_string()))?;
    Ok(written)
}

/// Whether the block of suppressed records, read as one more class (every quasi-identifier
/// the marker), satisfies the privacy models in the output `options` produce: with
/// [`SuppressedRecords::Mask`] it discloses no sensitive value and with
/// [`SuppressedRecords::Remove`] it is not published, so it holds; with
/// [`SuppressedRecords::KeepSensitive`] the block must have the minimal class size (unless it
/// is empty) and satisfy every class-based model (ℓ-diversity, t-closeness, …) with the
/// sensitive values it shows.
pub fn suppressed_block_holds(
    problem: &Problem,
    evaluation: &Evaluation,
    options: &OutputOptions,
) -> bool {
    if options.suppressed != SuppressedRecords::KeepSensitive {
        return true;
    }
    let groups = &evaluation.groups;
    let mut count = 0u32;
    let mut merged: Vec<BTreeMap<u32, u32>> = vec![BTreeMap::new(); groups.hists.len()];
    for (c, &s) in evaluation.suppressed.iter().enumerate() {
        if !s {
            continue;
        }
        count += groups.counts[c];
        for (slot, h) in groups.hists.iter().enumerate() {
            let (values, freqs) = h.get(c);
            for (&v, &f) in values.iter().zip(freqs) {
                *merged[slot].entry(v).or_default() += f;
            }
        }
    }
    if count == 0 {
        return true;
    }
    if count < problem.min_class_size() {
        return false;
    }
    let columns: Vec<(Vec<u32>, Vec<u32>)> = merged
        .iter()
        .map(|m| (m.keys().copied().collect(), m.values().copied().collect()))
        .collect();
    let hists: Vec<(&[u32], &[u32])> = columns
        .iter()
        .map(|(v, f)| (v.as_slice(), f.as_slice()))
        .collect();
    problem.class_models.iter().all(|m| m.holds(count, &hists))
}
