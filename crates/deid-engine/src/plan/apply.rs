//! Applying a [`Plan`] to a CSV, row by row in constant memory: the bytes
//! [`CsvOutput::write`](crate::output::CsvOutput::write) writes for the same data. A row whose
//! values the plan does not cover (a value missing from a map, a tuple of no class) is
//! suppressed and counted, or refused in strict mode.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};

use super::{ColumnRole, Plan, parse_mode};
use crate::data::frequency::parse_count;
use crate::data::{Block, Dictionary, TableBlocks};
use crate::error::{EngineError, Result};
use crate::hash::{BuildCodeHasher, BuildTextHasher};
use crate::output::{SuppressedRecords, neutralize_formula};

/// The maps of an [`Applier`]: the engine's fixed fast hashes (keys are the plan's own values).
type FastMap<K, V> = HashMap<K, V, BuildCodeHasher>;
type FastSet<K> = HashSet<K, BuildCodeHasher>;
type TextMap<'p> = HashMap<&'p str, u32, BuildTextHasher>;

/// Most entries of the dense class tables of all steps together (4 bytes each).
const MAX_DENSE: u64 = 1 << 22;

/// The classes of one step by packed tuple: a dense table (class or [`NONE`] per tuple) when
/// the tuples are few, else a hash map.
#[derive(Debug)]
enum ClassTable {
    Dense(Vec<u32>),
    Hashed(FastMap<u64, u32>),
}

/// The tuples of label ids packed into one number (mixed radix) when their product fits: the
/// classes of every step and the suppressed tuples by packed key.
#[derive(Debug)]
struct Packed {
    strides: Vec<u64>,
    steps: Vec<ClassTable>,
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
        let dense = size.saturating_mul(applier.steps.len() as u64) <= MAX_DENSE;
        let mut packed = Packed {
            strides,
            steps: Vec::new(),
            suppressed: FastSet::default(),
        };
        for step in &applier.steps {
            let classes = (step.publishes.iter()).map(|(key, &c)| (packed.key(key), c));
            let table = match dense {
                true => {
                    let mut table = vec![NONE; size as usize];
                    for (key, c) in classes {
                        table[key as usize] = c;
                    }
                    ClassTable::Dense(table)
                }
                false => ClassTable::Hashed(classes.collect()),
            };
            packed.steps.push(table);
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

    /// The class step `s` publishes for the tuple `ids`.
    fn class(&self, s: usize, ids: &[u32]) -> Option<u32> {
        let key = self.key(ids);
        match &self.steps[s] {
            ClassTable::Dense(table) => Some(table[key as usize]).filter(|&c| c != NONE),
            ClassTable::Hashed(map) => map.get(&key).copied(),
        }
    }
}

/// The values of one quasi-identifier's maps, value → code: packed into one word when every
/// value has at most 8 bytes and no NUL (an open-addressing table of (word, code), one memory
/// access per lookup), else the dictionary.
#[derive(Debug)]
enum ValueIndex {
    Short { slots: Vec<(u64, u32)>, shift: u32 },
    Dictionary(Dictionary),
}

impl ValueIndex {
    /// The index of `dict`'s values (codes as in `dict`).
    fn of(dict: Dictionary) -> ValueIndex {
        let capacity = (dict.len() * 2).next_power_of_two().max(16);
        let mut slots = vec![(0, NONE); capacity];
        let short = |v: &str| v.len() <= 8 && !v.contains('\0');
        if !dict.values().all(short) {
            return ValueIndex::Dictionary(dict);
        }
        for (code, value) in dict.values().enumerate() {
            let word = word(value).expect("at most 8 bytes");
            let mut i = slot(word, capacity);
            while slots[i].1 != NONE {
                i = (i + 1) & (capacity - 1);
            }
            slots[i] = (word, code as u32);
        }
        let shift = 64 - capacity.trailing_zeros();
        ValueIndex::Short { slots, shift }
    }

    /// The code of `value` ([`NONE`]: not a value of the maps).
    #[inline]
    fn code(&self, value: &str) -> u32 {
        match self {
            ValueIndex::Dictionary(dict) => dict.code(value).unwrap_or(NONE),
            ValueIndex::Short { slots, shift } => {
                let Some(word) = word(value) else {
                    return NONE;
                };
                let mask = slots.len() - 1;
                let mut i = (crate::hash::mix(word) >> shift) as usize;
                loop {
                    let (w, code) = slots[i];
                    if code == NONE || w == word {
                        return code;
                    }
                    i = (i + 1) & mask;
                }
            }
        }
    }
}

/// A text of at most 8 bytes as one word (little-endian, zero-padded).
#[inline]
fn word(value: &str) -> Option<u64> {
    let bytes = value.as_bytes();
    if bytes.len() > 8 {
        return None;
    }
    let mut word = [0u8; 8];
    word[..bytes.len()].copy_from_slice(bytes);
    Some(u64::from_le_bytes(word))
}

/// The first slot of `word` in a table of `capacity` (a power of two ≥ 16) slots.
fn slot(word: u64, capacity: usize) -> usize {
    (crate::hash::mix(word) >> (64 - capacity.trailing_zeros())) as usize
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

/// No value, no label: a value missing from a step's map.
const NONE: u32 = u32::MAX;

/// One step, indexed: per quasi-identifier the output label id of every value code
/// ([`NONE`]: not in the step's map), and the classes it publishes by their tuple of label ids.
#[derive(Debug)]
struct StepIndex {
    maps: Vec<Vec<u32>>,
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
    /// Per quasi-identifier, the values of the steps' maps (value → code): one hash lookup per
    /// value of a row, whatever the number of steps.
    values: Vec<ValueIndex>,
    steps: Vec<StepIndex>,
    /// Per quasi-identifier, label id → output text.
    labels: Vec<Vec<&'p str>>,
    /// The suppressed tuples (label ids by the last step's maps).
    suppressed: FastSet<Vec<u32>>,
    /// The same tables by packed tuple, when tuples fit in 64 bits.
    packed: Option<Packed>,
    /// The bytes that make a written cell quoted: the delimiter, `"`, CR and LF.
    special: [bool; 256],
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
        let delimiter = check_header_fields(plan)?;
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
            values: Vec::new(),
            steps: Vec::new(),
            labels: vec![Vec::new(); plan.quasi_identifiers.len()],
            suppressed: FastSet::default(),
            packed: None,
            special: [false; 256],
        };
        for b in [delimiter, b'"', b'\r', b'\n'] {
            applier.special[usize::from(b)] = true;
        }
        applier.index()?;
        applier.packed = Packed::of(&applier);
        Ok(applier)
    }

    /// Builds the steps' maps, their published classes and the suppressed tuples.
    fn index(&mut self) -> Result<()> {
        let plan = self.plan;
        let q = plan.quasi_identifiers.len();
        let mut ids: Vec<TextMap<'p>> = vec![TextMap::default(); q];
        let mut values = vec![Dictionary::new(); q];
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
            let mut maps = vec![Vec::new(); q];
            for (i, m) in step.maps.iter().enumerate() {
                for (value, label) in m {
                    let code = values[i].encode(value) as usize;
                    let map: &mut Vec<u32> = &mut maps[i];
                    if map.len() <= code {
                        map.resize(code + 1, NONE);
                    }
                    map[code] = intern(&mut ids[i], &mut self.labels[i], label);
                }
            }
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
        self.values = values.into_iter().map(ValueIndex::of).collect();
        Ok(())
    }

    /// The class of the tuple whose value of quasi-identifier i is `value(i)`; `key` is scratch.
    pub(crate) fn classify<'v>(
        &self,
        value: impl Fn(usize) -> &'v str,
        key: &mut Vec<u32>,
    ) -> Classified {
        let codes: Vec<u32> = (0..self.qi_columns.len())
            .map(|i| self.values[i].code(value(i)))
            .collect();
        self.classify_codes(&codes, key)
    }

    /// The class of the tuple whose value of quasi-identifier i has code `codes[i]` in
    /// `values[i]` ([`NONE`]: in no map); `key` is scratch.
    fn classify_codes(&self, codes: &[u32], key: &mut Vec<u32>) -> Classified {
        for (s, step) in self.steps.iter().enumerate() {
            key.clear();
            for (i, (&code, map)) in codes.iter().zip(&step.maps).enumerate() {
                match map.get(code as usize) {
                    Some(&id) if id != NONE => key.push(id),
                    _ => return Classified::Uncovered(Some(i)),
                }
            }
            let class = match &self.packed {
                Some(p) => p.class(s, key),
                None => step.publishes.get(key.as_slice()).copied(),
            };
            if let Some(c) = class {
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
    ///
    /// Blocks of rows ([`TableBlocks`]) are read in order, formatted in parallel while the next
    /// are read ([`TableBlocks::map_in_order`]) and written in order: memory stays bounded and
    /// the bytes are those of one row after the other.
    pub fn apply<R: Read, W: Write>(
        &self,
        input: R,
        mut output: W,
        source_name: &str,
        strict: bool,
    ) -> Result<Applied> {
        let delimiter = self.plan.delimiter.as_bytes()[0];
        let mut blocks = TableBlocks::open(input, delimiter, source_name)?;
        self.check_header(blocks.columns())?;
        let header = (self.plan.columns.iter())
            .filter(|c| !matches!(c.role, ColumnRole::Drop | ColumnRole::SubsetCount))
            .map(|c| c.name.as_str());
        let mut head = Vec::new();
        self.write_record(&mut head, header);
        let write_err = |e: std::io::Error| EngineError::Output(e.to_string());
        output.write_all(&head).map_err(write_err)?;
        let mut applied = Applied::default();
        blocks.map_in_order(
            |block| self.format_block(block, strict),
            |(bytes, a)| {
                output.write_all(&bytes).map_err(write_err)?;
                applied.rows += a.rows;
                applied.records += a.records;
                applied.removed += a.removed;
                applied.uncovered_rows += a.uncovered_rows;
                applied.uncovered_records += a.uncovered_records;
                Ok(())
            },
        )?;
        applied.rows_read = blocks.records();
        output.flush().map_err(write_err)?;
        Ok(applied)
    }

    /// The output of the rows of `block`, with what was done (`rows_read` not counted).
    fn format_block(&self, block: &Block, strict: bool) -> Result<(Vec<u8>, Applied)> {
        let mut out = Vec::with_capacity(block.text_len() + block.text_len() / 2 + 64);
        let mut applied = Applied::default();
        let mut scratch = Scratch {
            codes: vec![NONE; self.qi_columns.len()],
            key: Vec::with_capacity(self.qi_columns.len()),
            count: String::new(),
        };
        block.for_each(|row, fields| {
            self.format_row(row, fields, strict, &mut scratch, &mut out, &mut applied)
        })?;
        Ok((out, applied))
    }

    /// Writes the output of one row (`row`: its 1-based number) to `out`, counting it.
    fn format_row(
        &self,
        row: u64,
        fields: &[&str],
        strict: bool,
        scratch: &mut Scratch,
        out: &mut Vec<u8>,
        applied: &mut Applied,
    ) -> Result<()> {
        let records = self.released(fields, row)?;
        if records == 0 {
            return Ok(());
        }
        for (code, (&c, values)) in
            (scratch.codes.iter_mut()).zip(self.qi_columns.iter().zip(&self.values))
        {
            *code = values.code(fields[c]);
        }
        let class = self.classify_codes(&scratch.codes, &mut scratch.key);
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
                return Ok(());
            }
            _ => None,
        };
        scratch.count.clear();
        std::fmt::Write::write_fmt(&mut scratch.count, format_args!("{records}"))
            .expect("writing to a String");
        let (key, count) = (&scratch.key, scratch.count.as_str());
        let cells = (self.plan.columns.iter().enumerate())
            .filter_map(|(c, column)| self.cell(column.role, c, fields, class, key, count));
        self.write_record(out, cells);
        applied.rows += 1;
        applied.records += records;
        Ok(())
    }

    /// The written cell of input column `c` (`None`: not written).
    fn cell<'a>(
        &'a self,
        role: ColumnRole,
        c: usize,
        fields: &[&'a str],
        class: Option<usize>,
        key: &[u32],
        count: &'a str,
    ) -> Option<&'a str> {
        let marker = self.plan.suppression.marker.as_str();
        Some(match (role, class) {
            (ColumnRole::Drop | ColumnRole::SubsetCount, _) => return None,
            (ColumnRole::Copy, _) => fields[c],
            (ColumnRole::Count, _) => count,
            (ColumnRole::Sensitive, Some(_)) => fields[c],
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

    /// Writes one record as the `csv` crate's writer does (delimiter between cells, quoted
    /// only where a cell holds the delimiter, `"`, CR or LF, quotes doubled, `""` for a record
    /// of no bytes, LF at the end), formulas neutralized if the plan says so.
    fn write_record<'a>(&self, out: &mut Vec<u8>, cells: impl Iterator<Item = &'a str>) {
        let delimiter = self.plan.delimiter.as_bytes()[0];
        let start = out.len();
        for (n, cell) in cells.enumerate() {
            if n > 0 {
                out.push(delimiter);
            }
            match self.plan.neutralize_formulas {
                true => self.write_cell(out, neutralize_formula(cell).as_bytes()),
                false => self.write_cell(out, cell.as_bytes()),
            }
        }
        if out.len() == start {
            out.extend_from_slice(b"\"\"");
        }
        out.push(b'\n');
    }

    /// Writes one cell, quoted if it must be.
    fn write_cell(&self, out: &mut Vec<u8>, cell: &[u8]) {
        if !cell.iter().any(|&b| self.special[usize::from(b)]) {
            out.extend_from_slice(cell);
            return;
        }
        out.push(b'"');
        for part in cell.split_inclusive(|&b| b == b'"') {
            out.extend_from_slice(part);
            if part.last() == Some(&b'"') {
                out.push(b'"');
            }
        }
        out.push(b'"');
    }

    /// The released records of a row: 1, or its count (its subset count with a subset count
    /// column). Errors name the row and the column.
    fn released(&self, fields: &[&str], row: u64) -> Result<u64> {
        let Some(count) = self.count else {
            return Ok(1);
        };
        let column = self.subset_count.unwrap_or(count);
        for c in [count, column] {
            if parse_count(fields[c]).is_none() {
                return Err(EngineError::config(
                    "input",
                    format!(
                        "row {row} of column '{}' holds '{}': expected a whole number of \
                         records in decimal digits",
                        self.plan.columns[c].name, fields[c]
                    ),
                ));
            }
        }
        Ok(u64::from(parse_count(fields[column]).unwrap_or(0)))
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

/// Per-thread scratch of [`Applier::format_row`].
struct Scratch {
    /// The value code of every quasi-identifier of the row.
    codes: Vec<u32>,
    /// The label ids of the row's tuple.
    key: Vec<u32>,
    /// The released records in decimal.
    count: String,
}

/// Refuses another format or version, and a delimiter that is not one ASCII character; the
/// delimiter.
fn check_header_fields(plan: &Plan) -> Result<u8> {
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
    Ok(plan.delimiter.as_bytes()[0])
}
