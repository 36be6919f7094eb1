//! Applying a [`Plan`] to a CSV, row by row in constant memory: the bytes
//! [`CsvOutput::write`](crate::output::CsvOutput::write) writes for the same data. A row whose
//! values the plan does not cover (a value missing from a map, a tuple of no class) is
//! suppressed and counted, or refused in strict mode.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};

use super::{ColumnRole, Plan, parse_mode};
use crate::data::frequency::parse_count;
use crate::data::{CsvOptions, CsvScanner};
use crate::error::{EngineError, Result};
use crate::hash::{BuildCodeHasher, BuildTextHasher};
use crate::output::{SuppressedRecords, neutralize_formula};

/// The maps of an [`Applier`]: the engine's fixed fast hashes (keys are the plan's own values).
type FastMap<K, V> = HashMap<K, V, BuildCodeHasher>;
type FastSet<K> = HashSet<K, BuildCodeHasher>;
type TextMap<'p> = HashMap<&'p str, u32, BuildTextHasher>;

/// The tuples of label ids packed into one number (mixed radix) when their product fits: the
/// classes of every step and the suppressed tuples by packed key.
#[derive(Debug)]
struct Packed {
    strides: Vec<u64>,
    steps: Vec<FastMap<u64, u32>>,
    suppressed: FastSet<u64>,
}

impl Packed {
    /// The packed tables of `applier`'s, if every tuple fits in 64 bits.
    fn of(applier: &Applier<'_>) -> Option<Packed> {
        let mut strides = Vec::with_capacity(applier.labels.len());
        let mut size = 1u64;
        for labels in &applier.labels {
            strides.push(size);
            size = size.checked_mul(labels.len().max(1) as u64)?;
        }
        let mut packed = Packed {
            strides,
            steps: Vec::new(),
            suppressed: FastSet::default(),
        };
        for step in &applier.steps {
            let classes = (step.publishes.iter())
                .map(|(key, &c)| (packed.key(key), c))
                .collect();
            packed.steps.push(classes);
        }
        packed.suppressed = applier.suppressed.iter().map(|k| packed.key(k)).collect();
        Some(packed)
    }

    fn key(&self, ids: &[u32]) -> u64 {
        ids.iter()
            .zip(&self.strides)
            .map(|(&id, &s)| u64::from(id) * s)
            .sum()
    }
}

/// What an [`Applier`] makes of one tuple of quasi-identifier values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Classified {
    /// Published in this class.
    Class(u32),
    /// Suppressed by the plan.
    Suppressed,
    /// Not covered: the value of this quasi-identifier is in no map (`None`: the tuple is of no
    /// class).
    Uncovered(Option<usize>),
}

/// One step, indexed: per quasi-identifier value → output label id, and the classes it
/// publishes by their tuple of label ids.
#[derive(Debug)]
struct StepIndex<'p> {
    maps: Vec<TextMap<'p>>,
    publishes: FastMap<Vec<u32>, u32>,
}

/// A plan ready to be applied (see the module documentation).
#[derive(Debug)]
pub struct Applier<'p> {
    plan: &'p Plan,
    mode: SuppressedRecords,
    /// Input column of every quasi-identifier and microaggregated column.
    qi_columns: Vec<usize>,
    micro_columns: Vec<usize>,
    /// Per input column, its quasi-identifier or microaggregated column index (0 otherwise).
    slots: Vec<usize>,
    /// Input columns of the count and the subset count.
    count: Option<usize>,
    subset_count: Option<usize>,
    steps: Vec<StepIndex<'p>>,
    /// Per quasi-identifier, label id → output text.
    labels: Vec<Vec<&'p str>>,
    /// The suppressed tuples (label ids by the last step's maps).
    suppressed: FastSet<Vec<u32>>,
    /// The same tables by packed tuple, when tuples fit in 64 bits.
    packed: Option<Packed>,
}

/// What [`Applier::apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Applied {
    /// Data rows read.
    pub rows_read: u64,
    /// Data rows written.
    pub rows: u64,
    /// Records written (the rows, or the sum of their released counts).
    pub records: u64,
    /// Suppressed records left out (mode `remove`).
    pub removed: u64,
    /// Rows the plan does not cover (suppressed).
    pub uncovered_rows: u64,
    /// Their records.
    pub uncovered_records: u64,
}

/// Interns `text` as a label of one quasi-identifier.
fn intern<'p>(ids: &mut TextMap<'p>, labels: &mut Vec<&'p str>, text: &'p str) -> u32 {
    *ids.entry(text).or_insert_with(|| {
        labels.push(text);
        labels.len() as u32 - 1
    })
}

impl<'p> Applier<'p> {
    /// Indexes `plan`. Refuses a plan of another format or version and an inconsistent one
    /// (errors name the field).
    pub fn new(plan: &'p Plan) -> Result<Applier<'p>> {
        check_header_fields(plan)?;
        let position = |role: ColumnRole, names: &[String], field: &str| {
            names
                .iter()
                .map(|n| {
                    (plan.columns.iter())
                        .position(|c| &c.name == n && c.role == role)
                        .ok_or_else(|| {
                            EngineError::config(
                                field,
                                format!("column '{n}' is not a column of the plan with its role"),
                            )
                        })
                })
                .collect::<Result<Vec<usize>>>()
        };
        let qi_columns = position(
            ColumnRole::QuasiIdentifying,
            &plan.quasi_identifiers,
            "quasi_identifiers",
        )?;
        let micro_columns = position(
            ColumnRole::Microaggregated,
            &plan.microaggregated,
            "microaggregated",
        )?;
        let role = |r| plan.columns.iter().position(|c| c.role == r);
        let mut slots = vec![0; plan.columns.len()];
        for (i, &c) in qi_columns.iter().chain(&micro_columns).enumerate() {
            slots[c] = if i < qi_columns.len() {
                i
            } else {
                i - qi_columns.len()
            };
        }
        let mut applier = Applier {
            plan,
            mode: parse_mode(&plan.suppression.mode)?,
            qi_columns,
            micro_columns,
            slots,
            count: role(ColumnRole::Count),
            subset_count: role(ColumnRole::SubsetCount),
            steps: Vec::new(),
            labels: vec![Vec::new(); plan.quasi_identifiers.len()],
            suppressed: FastSet::default(),
            packed: None,
        };
        applier.index()?;
        applier.packed = Packed::of(&applier);
        Ok(applier)
    }

    /// Builds the steps' maps, their published classes and the suppressed tuples.
    fn index(&mut self) -> Result<()> {
        let plan = self.plan;
        let q = plan.quasi_identifiers.len();
        let mut ids: Vec<TextMap<'p>> = vec![TextMap::default(); q];
        let width = |field: String, n: usize| {
            EngineError::config(
                field,
                format!("expected {q} entries (one per quasi-identifier), got {n}"),
            )
        };
        for (s, step) in plan.steps.iter().enumerate() {
            if step.maps.len() != q {
                return Err(width(format!("steps[{s}].maps"), step.maps.len()));
            }
            let maps = (step.maps.iter().enumerate())
                .map(|(i, m)| {
                    (m.iter())
                        .map(|(k, v)| (k.as_str(), intern(&mut ids[i], &mut self.labels[i], v)))
                        .collect()
                })
                .collect();
            let mut publishes = FastMap::default();
            for &c in &step.publishes {
                let class = (plan.classes.get(c as usize)).ok_or_else(|| {
                    EngineError::config(
                        format!("steps[{s}].publishes"),
                        format!("class {c} does not exist"),
                    )
                })?;
                if class.values.len() != q {
                    return Err(width(format!("classes[{c}].values"), class.values.len()));
                }
                if class.aggregates.len() != self.micro_columns.len() {
                    return Err(EngineError::config(
                        format!("classes[{c}].aggregates"),
                        "expected one value per microaggregated column",
                    ));
                }
                let key = (class.values.iter().enumerate())
                    .map(|(i, v)| intern(&mut ids[i], &mut self.labels[i], v))
                    .collect();
                publishes.insert(key, c);
            }
            self.steps.push(StepIndex { maps, publishes });
        }
        for (t, tuple) in plan.suppressed.iter().enumerate() {
            if tuple.len() != q {
                return Err(width(format!("suppressed[{t}]"), tuple.len()));
            }
            let key = (tuple.iter().enumerate())
                .map(|(i, v)| intern(&mut ids[i], &mut self.labels[i], v))
                .collect();
            self.suppressed.insert(key);
        }
        Ok(())
    }

    /// The class of the tuple whose value of quasi-identifier i is `value(i)`; `key` is scratch.
    pub(crate) fn classify<'v>(
        &self,
        value: impl Fn(usize) -> &'v str,
        key: &mut Vec<u32>,
    ) -> Classified {
        let q = self.qi_columns.len();
        for (s, step) in self.steps.iter().enumerate() {
            key.clear();
            for i in 0..q {
                match step.maps[i].get(value(i)) {
                    Some(&id) => key.push(id),
                    None => return Classified::Uncovered(Some(i)),
                }
            }
            let class = match &self.packed {
                Some(p) => p.steps[s].get(&p.key(key)),
                None => step.publishes.get(key.as_slice()),
            };
            if let Some(&c) = class {
                return Classified::Class(c);
            }
        }
        let suppressed = match &self.packed {
            Some(p) => p.suppressed.contains(&p.key(key)),
            None => self.suppressed.contains(key.as_slice()),
        };
        match suppressed {
            true => Classified::Suppressed,
            false => Classified::Uncovered(None),
        }
    }

    /// Streams `input` (CSV with a header, the plan's delimiter, the engine's CSV rules)
    /// through the plan to `output`. The header must be the plan's columns. With `strict`, the
    /// first row the plan does not cover is an error naming its row number (and the column
    /// whose value is in no map); otherwise such rows are suppressed and counted.
    pub fn apply<R: Read, W: Write>(
        &self,
        input: R,
        mut output: W,
        source_name: &str,
        strict: bool,
    ) -> Result<Applied> {
        use rayon::prelude::*;
        let delimiter = self.plan.delimiter.as_bytes()[0];
        let options = CsvOptions {
            delimiter,
            has_header: true,
        };
        let mut scanner = CsvScanner::table(input, options, source_name)?;
        self.check_header(scanner.columns())?;
        let header = (self.plan.columns.iter())
            .filter(|c| !matches!(c.role, ColumnRole::Drop | ColumnRole::SubsetCount))
            .map(|c| c.name.as_str());
        let mut writer = self.csv_writer(Vec::new());
        self.write_cells(&mut writer, header)?;
        let write_err = |e: std::io::Error| EngineError::Output(e.to_string());
        output.write_all(&into_bytes(writer)?).map_err(write_err)?;
        let mut applied = Applied::default();
        let window = rayon::current_num_threads().max(1) * 2;
        loop {
            // A window of chunks read in order, formatted in parallel, written in order: memory
            // stays bounded and the bytes are those of one row after the other.
            let mut chunks = Vec::with_capacity(window);
            while chunks.len() < window {
                match Chunk::read(&mut scanner, applied.rows_read)? {
                    Some(chunk) => {
                        applied.rows_read += chunk.rows as u64;
                        chunks.push(chunk);
                    }
                    None => break,
                }
            }
            if chunks.is_empty() {
                break;
            }
            let parts: Vec<Result<(Vec<u8>, Applied)>> = chunks
                .par_iter()
                .map(|chunk| self.format_chunk(chunk, strict))
                .collect();
            for part in parts {
                let (bytes, a) = part?;
                output.write_all(&bytes).map_err(write_err)?;
                applied.rows += a.rows;
                applied.records += a.records;
                applied.removed += a.removed;
                applied.uncovered_rows += a.uncovered_rows;
                applied.uncovered_records += a.uncovered_records;
            }
        }
        output.flush().map_err(write_err)?;
        Ok(applied)
    }

    /// A CSV writer of the plan's delimiter (no header of its own).
    fn csv_writer<W: Write>(&self, out: W) -> csv::Writer<W> {
        csv::WriterBuilder::new()
            .delimiter(self.plan.delimiter.as_bytes()[0])
            .has_headers(false)
            .from_writer(out)
    }

    /// The output of the rows of `chunk`, with what was done (`rows_read` not counted).
    fn format_chunk(&self, chunk: &Chunk, strict: bool) -> Result<(Vec<u8>, Applied)> {
        let mut writer = self.csv_writer(Vec::with_capacity(chunk.text.len() + 64));
        let mut applied = Applied::default();
        let mut key = Vec::with_capacity(self.qi_columns.len());
        let mut count_text = String::new();
        for r in 0..chunk.rows {
            let row = chunk.first_row + r as u64 + 1;
            let fields = |c: usize| chunk.field(r, c);
            let records = self.released(&fields, row)?;
            if records == 0 {
                continue;
            }
            let class = self.classify(|i| fields(self.qi_columns[i]), &mut key);
            if let Classified::Uncovered(column) = class {
                if strict {
                    return Err(self.uncovered(row, column));
                }
                applied.uncovered_rows += 1;
                applied.uncovered_records += records;
            }
            let class = match class {
                Classified::Class(c) => Some(c as usize),
                _ if self.mode == SuppressedRecords::Remove => {
                    applied.removed += records;
                    continue;
                }
                _ => None,
            };
            count_text.clear();
            std::fmt::Write::write_fmt(&mut count_text, format_args!("{records}"))
                .expect("writing to a String");
            let cells = (self.plan.columns.iter().enumerate()).filter_map(|(c, column)| {
                self.cell(column.role, c, &fields, class, &key, &count_text)
            });
            self.write_cells(&mut writer, cells)?;
            applied.rows += 1;
            applied.records += records;
        }
        Ok((into_bytes(writer)?, applied))
    }

    /// The written cell of input column `c` (`None`: not written).
    fn cell<'a>(
        &'a self,
        role: ColumnRole,
        c: usize,
        fields: &impl Fn(usize) -> &'a str,
        class: Option<usize>,
        key: &[u32],
        count: &'a str,
    ) -> Option<&'a str> {
        let marker = self.plan.suppression.marker.as_str();
        Some(match (role, class) {
            (ColumnRole::Drop | ColumnRole::SubsetCount, _) => return None,
            (ColumnRole::Copy, _) => fields(c),
            (ColumnRole::Count, _) => count,
            (ColumnRole::Sensitive, Some(_)) => fields(c),
            (ColumnRole::QuasiIdentifying, Some(_)) => {
                let i = self.slots[c];
                self.labels[i][key[i] as usize]
            }
            (ColumnRole::Microaggregated, Some(k)) => {
                self.plan.classes[k].aggregates[self.slots[c]].as_str()
            }
            (
                ColumnRole::Sensitive | ColumnRole::QuasiIdentifying | ColumnRole::Microaggregated,
                None,
            ) => marker,
        })
    }

    /// Writes one record, formulas neutralized if the plan says so.
    fn write_cells<'a, W: Write>(
        &self,
        writer: &mut csv::Writer<W>,
        cells: impl Iterator<Item = &'a str>,
    ) -> Result<()> {
        let err = |e: csv::Error| EngineError::Output(e.to_string());
        for cell in cells {
            match self.plan.neutralize_formulas {
                true => writer.write_field(neutralize_formula(cell).as_bytes()),
                false => writer.write_field(cell),
            }
            .map_err(err)?;
        }
        writer.write_record(None::<&[u8]>).map_err(err)
    }

    /// The released records of a row: 1, or its count (its subset count with a subset count
    /// column). Errors name the row and the column.
    fn released<'a>(&self, fields: &impl Fn(usize) -> &'a str, row: u64) -> Result<u64> {
        let Some(count) = self.count else {
            return Ok(1);
        };
        let column = self.subset_count.unwrap_or(count);
        for c in [count, column] {
            if parse_count(fields(c)).is_none() {
                return Err(EngineError::config(
                    "input",
                    format!(
                        "row {row} of column '{}' holds '{}': expected a whole number of \
                         records in decimal digits",
                        self.plan.columns[c].name,
                        fields(c)
                    ),
                ));
            }
        }
        Ok(u64::from(parse_count(fields(column)).unwrap_or(0)))
    }

    /// The strict mode's error for row `row`.
    fn uncovered(&self, row: u64, column: Option<usize>) -> EngineError {
        let what = match column {
            Some(i) => format!(
                "the value of column '{}' is in none of the plan's maps",
                self.plan.quasi_identifiers[i]
            ),
            None => "its combination of values is of no class of the plan".to_string(),
        };
        EngineError::config(
            "input",
            format!("row {row} is not covered by the plan: {what} (strict mode)"),
        )
    }

    /// Refuses an input whose header is not the plan's columns, naming the first difference.
    fn check_header(&self, header: &[String]) -> Result<()> {
        let expected: Vec<&str> = self.plan.columns.iter().map(|c| c.name.as_str()).collect();
        if header
            .iter()
            .map(String::as_str)
            .eq(expected.iter().copied())
        {
            return Ok(());
        }
        let at = (header.iter().zip(&expected))
            .position(|(h, e)| h != e)
            .unwrap_or(header.len().min(expected.len()));
        let found = header
            .get(at)
            .map_or("nothing".to_string(), |h| format!("'{h}'"));
        let wanted = expected
            .get(at)
            .map_or("nothing".to_string(), |e| format!("'{e}'"));
        Err(EngineError::config(
            "columns",
            format!(
                "the input's column {} is {found}, the plan expects {wanted}: the plan is for \
                 the columns {}",
                at + 1,
                expected.join(", ")
            ),
        ))
    }
}

/// Records per chunk that [`Applier::apply`] formats on one thread.
const CHUNK_ROWS: usize = 1 << 14;

/// Rows of the input, owned: their fields' text one after the other.
struct Chunk {
    /// Data rows read before this chunk.
    first_row: u64,
    rows: usize,
    width: usize,
    text: String,
    /// End of every field in `text` (`width` per row).
    ends: Vec<usize>,
}

impl Chunk {
    /// Up to [`CHUNK_ROWS`] rows of `scanner` (`None`: none left).
    fn read<R: Read>(scanner: &mut CsvScanner<R>, first_row: u64) -> Result<Option<Chunk>> {
        let width = scanner.columns().len();
        let mut chunk = Chunk {
            first_row,
            rows: 0,
            width,
            text: String::new(),
            ends: Vec::with_capacity(CHUNK_ROWS * width),
        };
        while chunk.rows < CHUNK_ROWS {
            let Some(record) = scanner.next_record()? else {
                break;
            };
            for field in record.iter() {
                chunk.text.push_str(field);
                chunk.ends.push(chunk.text.len());
            }
            chunk.rows += 1;
        }
        Ok((chunk.rows > 0).then_some(chunk))
    }

    /// Field `c` of row `r`.
    fn field(&self, r: usize, c: usize) -> &str {
        let at = r * self.width + c;
        let start = if at == 0 { 0 } else { self.ends[at - 1] };
        &self.text[start..self.ends[at]]
    }
}

/// The bytes a CSV writer on a buffer wrote.
fn into_bytes(writer: csv::Writer<Vec<u8>>) -> Result<Vec<u8>> {
    writer
        .into_inner()
        .map_err(|e| EngineError::Output(e.to_string()))
}

/// Refuses another format or version, and a delimiter that is not one ASCII character.
fn check_header_fields(plan: &Plan) -> Result<()> {
    if plan.format != super::PLAN_FORMAT {
        return Err(EngineError::config(
            "format",
            format!(
                "expected \"{}\", got \"{}\"",
                super::PLAN_FORMAT,
                plan.format
            ),
        ));
    }
    if plan.version != super::PLAN_VERSION {
        return Err(EngineError::config(
            "version",
            format!(
                "this deid reads plans of version {}, got version {}",
                super::PLAN_VERSION,
                plan.version
            ),
        ));
    }
    if plan.delimiter.len() != 1 || !plan.delimiter.is_ascii() {
        return Err(EngineError::config(
            "delimiter",
            format!("expected one ASCII character, got '{}'", plan.delimiter),
        ));
    }
    Ok(())
}
