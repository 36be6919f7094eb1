//! Writes the anonymized table: header kept (minus identifying columns), row order kept,
//! quasi-identifiers generalized, everything else unchanged — except for the records of
//! suppressed classes, which [`SuppressedRecords`] decides: by default ([`SuppressedRecords::Mask`])
//! their quasi-identifiers *and* sensitive attributes become the marker, so the block of
//! suppressed records discloses nothing (ARX keeps their sensitive values: whoever knows that a
//! neighbour's records were suppressed would learn them). Streams row by row.

use std::collections::{BTreeMap, HashMap};
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

crate::names::enum_names! {
    SuppressedRecords {
        Mask => "mask",
        Remove => "remove",
        KeepSensitive => "keep_sensitive",
    }
    /// Stable name (`mask`, `remove`, `keep_sensitive`).
    pub fn name;
    /// The mode named `name`.
    pub fn parse;
}

/// How suppressed records are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputOptions {
    /// What a suppressed record looks like.
    pub suppressed: SuppressedRecords,
    /// The text of a suppressed value (default `*`).
    pub marker: String,
    /// Neutralize spreadsheet formulas: every cell (header included) that starts with `=`, `+`,
    /// `-`, `@`, a tab or a carriage return gets a leading `'` ([`neutralize_formula`]). Off by
    /// default: the output is faithful to the data.
    pub neutralize_formulas: bool,
}

impl Default for OutputOptions {
    fn default() -> Self {
        OutputOptions {
            suppressed: SuppressedRecords::Mask,
            marker: SUPPRESSED.to_string(),
            neutralize_formulas: false,
        }
    }
}

/// A cell a spreadsheet would not read as a formula (OWASP's CSV-injection rule): a cell
/// starting with `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading `'` (so `-5`
/// becomes `'-5` too); any other cell is unchanged. Quotes and delimiters inside a cell are the
/// CSV writer's business (it quotes such cells).
pub fn neutralize_formula(cell: &str) -> std::borrow::Cow<'_, str> {
    match cell.as_bytes().first() {
        Some(b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r') => format!("'{cell}").into(),
        _ => cell.into(),
    }
}

/// Copies a CSV from `input` to `output` (same delimiter), every cell through
/// [`neutralize_formula`]: the download of a stored output with formulas neutralized.
pub fn neutralize_csv<R: std::io::Read, W: Write>(
    input: R,
    output: W,
    delimiter: u8,
) -> Result<()> {
    let err = |e: csv::Error| EngineError::Output(e.to_string());
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .flexible(true)
        .from_reader(input);
    let mut writer = csv::WriterBuilder::new()
        .delimiter(delimiter)
        .flexible(true)
        .from_writer(output);
    let mut record = csv::StringRecord::new();
    while reader.read_record(&mut record).map_err(err)? {
        writer
            .write_record(
                record
                    .iter()
                    .map(neutralize_formula)
                    .collect::<Vec<_>>()
                    .iter()
                    .map(|c| c.as_ref()),
            )
            .map_err(err)?;
    }
    writer
        .flush()
        .map_err(|e| EngineError::Output(e.to_string()))
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

    /// The columns a suppressed record masks, with what they hold otherwise: generalized
    /// quasi-identifiers, microaggregated columns and (except in
    /// [`SuppressedRecords::KeepSensitive`] mode) sensitive attributes.
    fn masked_columns(&self, problem: &Problem) -> BTreeMap<usize, Cell> {
        let mut columns: BTreeMap<usize, Cell> = problem
            .qi_columns()
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, Cell::Qi(i)))
            .collect();
        for (k, m) in problem.microaggregated().iter().enumerate() {
            columns.insert(m.column, Cell::Aggregated(k));
        }
        if self.suppressed != SuppressedRecords::KeepSensitive {
            for s in &problem.config().sensitive {
                if let Some(c) = problem.table().column_index(&s.column) {
                    columns.entry(c).or_insert(Cell::Sensitive);
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
    /// Records written: the rows, or the sum of their counts for a frequency table.
    pub records: usize,
    /// Suppressed records left out ([`SuppressedRecords::Remove`]; the sum of their counts for
    /// a frequency table).
    pub removed: usize,
}

/// How the records of each base group appear in an output: what [`write_csv`], the post-hoc
/// quality (module `posthoc`) and [`suppressed_block_holds`] read. Implemented by an
/// [`Evaluation`] (one transformation for every record) and by the outcome of local
/// generalization (module `local`: a transformation per step).
pub trait Recoding: Sync {
    /// The levels and generalized codes (one per quasi-identifier) of the records of base group
    /// `g` of the whole problem; `None` if they are suppressed.
    fn recode(&self, g: usize) -> Option<(&[u8], &[u32])>;

    /// An id shared by base groups whose [`Recoding::recode`] is the same (e.g. the class of
    /// one transformation), to label each such class once; `None` if unknown.
    fn class_hint(&self, g: usize) -> Option<usize> {
        let _ = g;
        None
    }
}

impl Recoding for Evaluation {
    fn recode(&self, g: usize) -> Option<(&[u8], &[u32])> {
        let class = self.class_of_base[g] as usize;
        if self.suppressed[class] {
            return None;
        }
        let q = self.result.levels.len();
        Some((
            &self.result.levels,
            &self.groups.codes[class * q..(class + 1) * q],
        ))
    }

    fn class_hint(&self, g: usize) -> Option<usize> {
        Some(self.class_of_base[g] as usize)
    }
}

/// The classes an output's reader sees.
#[derive(Debug, Clone)]
pub struct OutputClasses {
    /// Class of every base group of the problem (`u32::MAX`: suppressed).
    pub class_of_base: Vec<u32>,
    /// Records per class.
    pub counts: Vec<u32>,
    /// Label ids: `label_ids[i][level][code]` is the id of the output text of generalized code
    /// `code` at `level` of quasi-identifier i (`u32::MAX`: never seen). Equal ids ⇔ equal text.
    label_ids: Vec<Vec<Vec<u32>>>,
    /// Per quasi-identifier, the label id of a suppressed cell: the id of the text `*` (shared
    /// with published cells showing `*`, the top of most hierarchies) or an id of its own.
    pub suppressed_labels: Vec<u32>,
    /// Per quasi-identifier, the number of label ids (suppressed cells' included).
    pub label_counts: Vec<usize>,
}

impl OutputClasses {
    /// Groups the base groups of `problem` (the whole problem) by their output labels. Base
    /// groups with the same [`Recoding::class_hint`] are labelled once.
    pub fn of<R: Recoding + ?Sized>(problem: &Problem, recoding: &R) -> OutputClasses {
        let q = problem.qi_columns().len();
        let base = problem.base_groups();
        let mut labels = Labeller::new(problem);
        let mut classes = ClassIndex::new(q);
        // Class of each hint already labelled.
        let mut hinted: Vec<u32> = Vec::new();
        let mut class_of_base = vec![NO_CLASS; base.len()];
        let mut key = vec![0u32; q];
        for (g, class) in class_of_base.iter_mut().enumerate() {
            let hint = recoding.class_hint(g);
            let known = hint.and_then(|h| hinted.get(h).copied());
            let c = match known {
                Some(c) if c != NO_CLASS => c,
                _ => {
                    let Some((levels, codes)) = recoding.recode(g) else {
                        continue;
                    };
                    labels.key(levels, codes, &mut key);
                    let c = classes.class_of(&key);
                    if let Some(h) = hint {
                        if hinted.len() <= h {
                            hinted.resize(h + 1, NO_CLASS);
                        }
                        hinted[h] = c;
                    }
                    c
                }
            };
            classes.counts[c as usize] += base.counts[g];
            *class = c;
        }
        labels.into_classes(class_of_base, classes.counts)
    }

    /// The label id of generalized code `code` at `level` of quasi-identifier `i`, for a value
    /// of a published record of the output.
    pub fn label(&self, i: usize, level: usize, code: u32) -> u32 {
        self.label_ids[i][level][code as usize]
    }
}

/// No class (a suppressed base group) or no label yet.
const NO_CLASS: u32 = u32::MAX;

/// The label ids of [`OutputClasses`], assigned as generalized codes are first met.
struct Labeller<'a> {
    problem: &'a Problem,
    /// Per quasi-identifier: label text → id.
    text_ids: Vec<HashMap<&'a str, u32>>,
    /// The memo `label_ids[i][level][code]` → id (`NO_CLASS`: not yet met).
    label_ids: Vec<Vec<Vec<u32>>>,
}

impl<'a> Labeller<'a> {
    /// No label met yet.
    fn new(problem: &'a Problem) -> Labeller<'a> {
        let label_ids = (problem.hierarchies().iter())
            .map(|h| (0..h.height()).map(|_| Vec::new()).collect())
            .collect();
        Labeller {
            problem,
            text_ids: vec![HashMap::new(); problem.qi_columns().len()],
            label_ids,
        }
    }

    /// Writes the label ids of the generalized `codes` at `levels` into `key`.
    fn key(&mut self, levels: &[u8], codes: &[u32], key: &mut [u32]) {
        let problem = self.problem;
        for (i, k) in key.iter_mut().enumerate() {
            let (level, code) = (levels[i] as usize, codes[i]);
            let m = &mut self.label_ids[i][level];
            if m.len() <= code as usize {
                m.resize(code as usize + 1, NO_CLASS);
            }
            if m[code as usize] == NO_CLASS {
                let h = &problem.hierarchies()[i];
                let column = problem.table().column(problem.qi_columns()[i]);
                let text = h.label(level, code, column);
                let next = self.text_ids[i].len() as u32;
                m[code as usize] = *self.text_ids[i].entry(text).or_insert(next);
            }
            *k = m[code as usize];
        }
    }

    /// The classes with their labels, and the label ids of suppressed cells.
    fn into_classes(self, class_of_base: Vec<u32>, counts: Vec<u32>) -> OutputClasses {
        let suppressed_labels: Vec<u32> = (self.text_ids.iter())
            .map(|ids| ids.get(SUPPRESSED).copied().unwrap_or(ids.len() as u32))
            .collect();
        let label_counts = (self.text_ids.iter())
            .zip(&suppressed_labels)
            .map(|(ids, &s)| ids.len().max(s as usize + 1))
            .collect();
        OutputClasses {
            class_of_base,
            counts,
            label_ids: self.label_ids,
            suppressed_labels,
            label_counts,
        }
    }
}

/// The classes of [`OutputClasses`] by their keys of label ids.
struct ClassIndex {
    q: usize,
    /// Hash of a key → the classes with that hash.
    by_hash: HashMap<u64, Vec<u32>>,
    /// The keys, `q` per class.
    keys: Vec<u32>,
    /// Records per class.
    counts: Vec<u32>,
}

impl ClassIndex {
    /// No class yet.
    fn new(q: usize) -> ClassIndex {
        ClassIndex {
            q,
            by_hash: HashMap::new(),
            keys: Vec::new(),
            counts: Vec::new(),
        }
    }

    /// The class of `key`, a new one (of no records) if it was not met before.
    fn class_of(&mut self, key: &[u32]) -> u32 {
        let q = self.q;
        let candidates = self
            .by_hash
            .entry(crate::hash::hash_codes(key))
            .or_default();
        let keys = &self.keys;
        if let Some(&c) =
            (candidates.iter()).find(|&&c| &keys[c as usize * q..(c as usize + 1) * q] == key)
        {
            return c;
        }
        let c = self.counts.len() as u32;
        self.counts.push(0);
        self.keys.extend_from_slice(key);
        candidates.push(c);
        c
    }
}

/// Records per chunk that [`write_csv`] formats on one thread.
const CHUNK_ROWS: usize = 1 << 15;

/// What an output column holds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cell {
    /// The value as it is.
    Copy,
    /// Quasi-identifier i, generalized.
    Qi(usize),
    /// Microaggregated column k: its class's aggregate.
    Aggregated(usize),
    /// A sensitive attribute: copied, the marker for suppressed records.
    Sensitive,
    /// The count column of a frequency table: the row's released records.
    Count,
}

/// The merged distribution of a tracked column (`slot`) in every class of `classes`:
/// (value codes ascending, frequencies).
pub fn class_distributions(
    problem: &Problem,
    classes: &OutputClasses,
    slot: usize,
) -> Vec<(Vec<u32>, Vec<u32>)> {
    let base = problem.base_groups();
    let mut merged: Vec<BTreeMap<u32, u32>> = vec![BTreeMap::new(); classes.counts.len()];
    for g in 0..base.len() {
        let c = classes.class_of_base[g];
        if c == u32::MAX {
            continue;
        }
        let (values, freqs) = base.hists[slot].get(g);
        for (&v, &f) in values.iter().zip(freqs) {
            *merged[c as usize].entry(v).or_default() += f;
        }
    }
    merged
        .into_iter()
        .map(|m| (m.keys().copied().collect(), m.values().copied().collect()))
        .collect()
}

/// The aggregates of every microaggregated column (outer) in every class (inner).
fn aggregates(problem: &Problem, classes: &OutputClasses) -> Vec<Vec<String>> {
    problem
        .microaggregated()
        .iter()
        .map(|m| {
            let column = problem.table().column(m.column);
            class_distributions(problem, classes, m.slot)
                .iter()
                .map(|(codes, freqs)| m.prepared.aggregate(codes, freqs, column))
                .collect()
        })
        .collect()
}

/// Streams the anonymized table as CSV with the given delimiter (see [`CsvOutput::write`]).
/// `problem` must be the whole (not a [restricted](Problem::restrict)) problem.
pub fn write_csv<W: Write, R: Recoding + ?Sized>(
    problem: &Problem,
    recoding: &R,
    out: W,
    delimiter: u8,
    options: &OutputOptions,
) -> Result<Written> {
    CsvOutput::new(problem, recoding, options).write(out, delimiter)
}

/// The anonymized table of one recoding, ready to be measured ([`CsvOutput::size`]) and
/// written ([`CsvOutput::write`]): the columns it holds and the aggregates of every class.
pub struct CsvOutput<'a, R: Recoding + ?Sized> {
    problem: &'a Problem,
    recoding: &'a R,
    options: &'a OutputOptions,
    /// The output's columns: table column and what it holds (also read by `plan`).
    pub(crate) plan: Vec<(usize, Cell)>,
    /// Microaggregation: the class of every base group and the aggregates of every class (also
    /// read by `plan`).
    pub(crate) micro: Option<(Vec<u32>, Vec<Vec<String>>)>,
    /// A frequency table's released counts as written (decimal), by count.
    count_texts: HashMap<u32, String>,
}

impl<'a, R: Recoding + ?Sized> CsvOutput<'a, R> {
    /// The output of `recoding` on `problem` (the whole problem) with `options`.
    pub fn new(problem: &'a Problem, recoding: &'a R, options: &'a OutputOptions) -> Self {
        let masked = options.masked_columns(problem);
        let table = problem.table();
        let config = problem.config();
        let column = |name: &Option<String>| name.as_deref().and_then(|n| table.column_index(n));
        let (count, subset_count) = (
            column(&config.count_column),
            column(&config.subset_count_column),
        );
        // A frequency table's output is one: its count column holds the released records, the
        // subset count column is not written (`docs/definitions.md` §1.1).
        let plan: Vec<(usize, Cell)> = (0..table.columns().len())
            .filter(|c| !problem.identifying_columns().contains(c) && Some(*c) != subset_count)
            .map(|c| match masked.get(&c) {
                _ if Some(c) == count => (c, Cell::Count),
                Some(&cell) => (c, cell),
                None => (c, Cell::Copy),
            })
            .collect();
        let count_texts = match problem.frequencies() {
            Some(_) => (0..table.rows())
                .map(|row| problem.released_records(row))
                .map(|n| (n, n.to_string()))
                .collect(),
            None => HashMap::new(),
        };
        // Microaggregation: the aggregate of each class as the output's reader sees it.
        let micro = (!problem.microaggregated().is_empty()).then(|| {
            let classes = OutputClasses::of(problem, recoding);
            let values = aggregates(problem, &classes);
            (classes.class_of_base, values)
        });
        CsvOutput {
            problem,
            recoding,
            options,
            plan,
            micro,
            count_texts,
        }
    }

    /// The header's cells.
    fn header(&self) -> Vec<&'a str> {
        let table = self.problem.table();
        self.plan
            .iter()
            .map(|(c, _)| table.column(*c).name.as_str())
            .collect()
    }

    /// The cells as written: formulas neutralized if the options say so.
    fn written<'c>(&self, record: &'c [&'c str]) -> Vec<std::borrow::Cow<'c, str>> {
        record
            .iter()
            .map(|c| match self.options.neutralize_formulas {
                true => neutralize_formula(c),
                false => (*c).into(),
            })
            .collect()
    }

    /// Fills `record` with the cells of `row`; false if the row is not written (outside the
    /// research subset, or a suppressed record removed — counted in `written`).
    fn cells<'s>(&'s self, row: usize, record: &mut Vec<&'s str>, written: &mut Written) -> bool {
        let problem = self.problem;
        let records = problem.released_records(row);
        if records == 0 {
            // Outside the research subset: part of the population, never written.
            return false;
        }
        let table = problem.table();
        let group = problem.row_groups()[row] as usize;
        let recoded = self.recoding.recode(group);
        let suppressed = recoded.is_none();
        // Differential privacy never writes suppressed records: with the unsampled ones left out,
        // they would tell how many records were sampled (`docs/definitions.md` §3.9).
        let remove = self.options.suppressed == SuppressedRecords::Remove || problem.dp().is_some();
        if suppressed && remove {
            written.removed += records as usize;
            return false;
        }
        record.clear();
        for (c, cell) in &self.plan {
            let value = match cell {
                Cell::Qi(_) | Cell::Sensitive | Cell::Aggregated(_) if suppressed => {
                    self.options.marker.as_str()
                }
                Cell::Aggregated(k) => {
                    let (class_of_base, values) = self.micro.as_ref().expect("aggregates computed");
                    values[*k][class_of_base[group] as usize].as_str()
                }
                Cell::Copy | Cell::Sensitive => {
                    let col = table.column(*c);
                    col.dict.value(col.codes.get(row))
                }
                Cell::Count => self.count_texts[&records].as_str(),
                Cell::Qi(i) => {
                    let (levels, codes) = recoded.expect("suppressed cells are the marker");
                    problem.hierarchies()[*i].label(
                        levels[*i] as usize,
                        codes[*i],
                        table.column(*c),
                    )
                }
            };
            record.push(value);
        }
        written.rows += 1;
        written.records += records as usize;
        true
    }

    /// The exact number of bytes [`CsvOutput::write`] writes with `delimiter`, computed without
    /// formatting anything (a bound checked before an output is written).
    pub fn size(&self, delimiter: u8) -> u64 {
        use rayon::prelude::*;
        let rows = self.problem.table().rows();
        let data: u64 = (0..rows.div_ceil(CHUNK_ROWS))
            .into_par_iter()
            .map(|c| {
                let mut record = Vec::with_capacity(self.plan.len());
                let mut written = Written::default();
                let mut bytes = 0u64;
                for row in c * CHUNK_ROWS..rows.min((c + 1) * CHUNK_ROWS) {
                    if self.cells(row, &mut record, &mut written) {
                        bytes += record_bytes(&self.written(&record), delimiter);
                    }
                }
                bytes
            })
            .sum();
        record_bytes(&self.written(&self.header()), delimiter) + data
    }

    /// Streams the anonymized table as CSV with the given delimiter: header kept (minus
    /// identifying columns), row order kept. Chunks of rows are formatted in parallel (a few at
    /// a time, so memory stays bounded) and written in row order: the bytes are the same as one
    /// row after the other.
    pub fn write<W: Write>(&self, mut out: W, delimiter: u8) -> Result<Written> {
        use rayon::prelude::*;
        let write_err = |e: std::io::Error| EngineError::Output(e.to_string());
        let mut header = csv::WriterBuilder::new()
            .delimiter(delimiter)
            .from_writer(Vec::new());
        header
            .write_record(self.written(&self.header()).iter().map(|c| c.as_ref()))
            .map_err(|e| EngineError::Output(e.to_string()))?;
        let header = header
            .into_inner()
            .map_err(|e| EngineError::Output(e.to_string()))?;
        out.write_all(&header).map_err(write_err)?;
        let rows = self.problem.table().rows();
        let chunks = rows.div_ceil(CHUNK_ROWS);
        let window = rayon::current_num_threads().max(1) * 2;
        let mut written = Written::default();
        for first in (0..chunks).step_by(window) {
            let parts: Vec<Result<(Vec<u8>, Written)>> = (first..chunks.min(first + window))
                .into_par_iter()
                .map(|c| {
                    self.format_rows(delimiter, c * CHUNK_ROWS..rows.min((c + 1) * CHUNK_ROWS))
                })
                .collect();
            for part in parts {
                let (bytes, w) = part?;
                out.write_all(&bytes).map_err(write_err)?;
                written.rows += w.rows;
                written.records += w.records;
                written.removed += w.removed;
            }
        }
        out.flush().map_err(write_err)?;
        Ok(written)
    }

    /// The CSV text of the rows in `range` (no header).
    fn format_rows(
        &self,
        delimiter: u8,
        range: std::ops::Range<usize>,
    ) -> Result<(Vec<u8>, Written)> {
        let mut w = csv::WriterBuilder::new()
            .delimiter(delimiter)
            .has_headers(false)
            .from_writer(Vec::with_capacity(range.len() * 64));
        let mut written = Written::default();
        let mut record: Vec<&str> = Vec::with_capacity(self.plan.len());
        for row in range {
            if self.cells(row, &mut record, &mut written) {
                let result = if self.options.neutralize_formulas {
                    w.write_record(self.written(&record).iter().map(|c| c.as_ref()))
                } else {
                    w.write_record(&record)
                };
                result.map_err(|e| EngineError::Output(e.to_string()))?;
            }
        }
        let bytes = w
            .into_inner()
            .map_err(|e| EngineError::Output(e.to_string()))?;
        Ok((bytes, written))
    }
}

/// The bytes of one CSV record as the `csv` writer formats it: a cell is quoted (its quotes
/// doubled) when it holds the delimiter, a quote, CR or LF; a record of one empty cell is `""`;
/// cells are separated by the delimiter, the record ends with LF.
fn record_bytes<S: AsRef<str>>(record: &[S], delimiter: u8) -> u64 {
    if let [only] = record
        && only.as_ref().is_empty()
    {
        return 3;
    }
    let cells: u64 = record
        .iter()
        .map(|cell| {
            let bytes = cell.as_ref().as_bytes();
            let special = bytes
                .iter()
                .any(|&b| b == delimiter || b == b'"' || b == b'\r' || b == b'\n');
            let quotes = if special {
                2 + bytes.iter().filter(|&&b| b == b'"').count()
            } else {
                0
            };
            (bytes.len() + quotes) as u64
        })
        .sum();
    cells + record.len().max(1) as u64
}

/// Whether the block of suppressed records, read as one more class (every quasi-identifier
/// the marker), satisfies the privacy models in the output `options` produce: with
/// [`SuppressedRecords::Mask`] it discloses no sensitive value and with
/// [`SuppressedRecords::Remove`] it is not published, so it holds; with
/// [`SuppressedRecords::KeepSensitive`] the block must have the minimal class size (unless it
/// is empty) and satisfy every class-based model (ℓ-diversity, t-closeness, …) with the
/// sensitive values it shows.
pub fn suppressed_block_holds<R: Recoding + ?Sized>(
    problem: &Problem,
    recoding: &R,
    options: &OutputOptions,
) -> bool {
    if options.suppressed != SuppressedRecords::KeepSensitive {
        return true;
    }
    let base = problem.base_groups();
    let mut count = 0u32;
    let mut merged: Vec<BTreeMap<u32, u32>> = vec![BTreeMap::new(); base.hists.len()];
    for g in 0..base.len() {
        if recoding.recode(g).is_some() {
            continue;
        }
        count += base.counts[g];
        for (slot, h) in base.hists.iter().enumerate() {
            let (values, freqs) = h.get(g);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Checker;
    use crate::config::{ProblemConfig, QuasiIdentifier, SensitiveAttribute};
    use crate::data::Table;
    use crate::hierarchy::Hierarchy;
    use crate::privacy::PrivacyModel;

    /// 70,000 rows (three chunks): an id, a quasi-identifier `g` (values 0–9, 9 rare), a
    /// sensitive `s`. At level 0 with k = 100 only the rare value's class is suppressed.
    fn problem() -> Problem {
        let rows: Vec<Vec<String>> = (0..70_000)
            .map(|i| {
                let g = if i % 1000 == 999 { 9 } else { i % 9 };
                vec![i.to_string(), g.to_string(), format!("s{}", i % 3)]
            })
            .collect();
        let table = Table::from_rows(&["id", "g", "s"], &rows).unwrap();
        let h = Hierarchy::from_rows(
            (0..10)
                .map(|v| vec![v.to_string(), "*".to_string()])
                .collect(),
            "g",
        )
        .unwrap();
        let config = ProblemConfig {
            quasi_identifiers: vec![QuasiIdentifier::new("g", h)],
            sensitive: vec![SensitiveAttribute {
                column: "s".into(),
                hierarchy: None,
            }],
            privacy: vec![PrivacyModel::KAnonymity { k: 100 }],
            suppression_limit: 0.01,
            ..Default::default()
        };
        Problem::new(table, config).unwrap()
    }

    fn write(p: &Problem, options: &OutputOptions) -> (String, Written) {
        let eval = Checker::new(p).evaluate(&[0]);
        assert_eq!(eval.result.suppressed, 70);
        let mut buf = Vec::new();
        let w = write_csv(p, &eval, &mut buf, b',', options).unwrap();
        (String::from_utf8(buf).unwrap(), w)
    }

    #[test]
    fn rows_keep_their_order_across_chunks_and_suppressed_records_follow_the_mode() {
        let p = problem();
        let (mask, w) = write(&p, &OutputOptions::default());
        assert_eq!((w.rows, w.removed), (70_000, 0));
        let lines: Vec<&str> = mask.lines().collect();
        assert_eq!(lines[0], "id,g,s");
        for (i, line) in lines[1..].iter().enumerate() {
            let expected = if i % 1000 == 999 {
                format!("{i},*,*")
            } else {
                format!("{i},{},s{}", i % 9, i % 3)
            };
            assert_eq!(*line, expected);
        }
        let keep = OutputOptions {
            suppressed: SuppressedRecords::KeepSensitive,
            marker: "#".into(),
            neutralize_formulas: false,
        };
        let (text, _) = write(&p, &keep);
        assert_eq!(text.lines().nth(1000).unwrap(), "999,#,s0");
        let remove = OutputOptions {
            suppressed: SuppressedRecords::Remove,
            ..OutputOptions::default()
        };
        let (text, w) = write(&p, &remove);
        assert_eq!((w.rows, w.removed), (69_930, 70));
        assert!(text.lines().all(|l| !l.contains('*')));
        assert_eq!(text.lines().count(), 69_931);
    }

    #[test]
    fn the_measured_size_is_the_written_size() {
        let p = problem();
        let eval = Checker::new(&p).evaluate(&[0]);
        for options in [
            OutputOptions::default(),
            OutputOptions {
                suppressed: SuppressedRecords::Remove,
                ..OutputOptions::default()
            },
            // A marker that needs quotes (delimiter, quote).
            OutputOptions {
                suppressed: SuppressedRecords::KeepSensitive,
                marker: "a,\"b\"".into(),
                neutralize_formulas: false,
            },
            // Neutralized formulas: a marker and values starting with `-`, `=`.
            OutputOptions {
                marker: "-".into(),
                neutralize_formulas: true,
                ..OutputOptions::default()
            },
        ] {
            for delimiter in [b',', b';'] {
                let output = CsvOutput::new(&p, &eval, &options);
                let mut buf = Vec::new();
                output.write(&mut buf, delimiter).unwrap();
                assert_eq!(output.size(delimiter), buf.len() as u64, "{options:?}");
            }
        }
        // Cells with line breaks and quotes; records of one empty cell (written `""`).
        let values = ["", "x\ny", "\"q\"", "", "a\rb", "plain,"];
        let rows: Vec<Vec<String>> = values.iter().map(|v| vec![v.to_string()]).collect();
        let table = Table::from_rows(&["only"], &rows).unwrap();
        let h = Hierarchy::from_rows(
            values[1..]
                .iter()
                .map(|v| vec![v.to_string(), "*".to_string()])
                .chain([vec![String::new(), "*".to_string()]])
                .collect(),
            "only",
        )
        .unwrap();
        let config = ProblemConfig {
            quasi_identifiers: vec![QuasiIdentifier::new("only", h)],
            privacy: vec![PrivacyModel::KAnonymity { k: 1 }],
            ..Default::default()
        };
        let p = Problem::new(table, config).unwrap();
        let eval = Checker::new(&p).evaluate(&[0]);
        let options = OutputOptions::default();
        let output = CsvOutput::new(&p, &eval, &options);
        let mut buf = Vec::new();
        output.write(&mut buf, b',').unwrap();
        assert!(
            buf.starts_with(b"only\n\"\"\n"),
            "{:?}",
            String::from_utf8_lossy(&buf)
        );
        assert_eq!(output.size(b','), buf.len() as u64);
    }

    #[test]
    fn formulas_are_neutralized_on_request() {
        for (cell, expected) in [
            ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"),
            ("+1", "'+1"),
            ("-5", "'-5"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\tx", "'\tx"),
            ("\rx", "'\rx"),
            ("a=b", "a=b"),
            ("", ""),
        ] {
            assert_eq!(neutralize_formula(cell), expected);
        }
        let rows: Vec<Vec<String>> = ["=1+2", "-3", "x"]
            .iter()
            .map(|v| vec![v.to_string(), "@q".to_string()])
            .collect();
        let table = Table::from_rows(&["=HYPERLINK(\"a\")", "g"], &rows).unwrap();
        let h = Hierarchy::from_rows(vec![vec!["@q".into(), "*".into()]], "g").unwrap();
        let config = ProblemConfig {
            quasi_identifiers: vec![QuasiIdentifier::new("g", h)],
            privacy: vec![PrivacyModel::KAnonymity { k: 1 }],
            ..Default::default()
        };
        let p = Problem::new(table, config).unwrap();
        let eval = Checker::new(&p).evaluate(&[0]);
        let write = |neutralize_formulas| {
            let options = OutputOptions {
                neutralize_formulas,
                ..OutputOptions::default()
            };
            let output = CsvOutput::new(&p, &eval, &options);
            let mut buf = Vec::new();
            output.write(&mut buf, b',').unwrap();
            assert_eq!(output.size(b','), buf.len() as u64);
            String::from_utf8(buf).unwrap()
        };
        let faithful = "\"=HYPERLINK(\"\"a\"\")\",g\n=1+2,@q\n-3,@q\nx,@q\n";
        assert_eq!(write(false), faithful);
        let safe = "\"'=HYPERLINK(\"\"a\"\")\",g\n'=1+2,'@q\n'-3,'@q\nx,'@q\n";
        assert_eq!(write(true), safe);
        // The download's copy gives the same bytes.
        let mut copy = Vec::new();
        neutralize_csv(faithful.as_bytes(), &mut copy, b',').unwrap();
        assert_eq!(String::from_utf8(copy).unwrap(), safe);
    }

    #[test]
    fn the_suppressed_block_and_the_marker_are_checked() {
        let p = problem();
        let eval = Checker::new(&p).evaluate(&[0]);
        // 70 suppressed records ≥ k = 100? No: the block would be a class below k.
        let keep = OutputOptions {
            suppressed: SuppressedRecords::KeepSensitive,
            ..OutputOptions::default()
        };
        assert!(!suppressed_block_holds(&p, &eval, &keep));
        assert!(suppressed_block_holds(&p, &eval, &OutputOptions::default()));
        // The marker must not be a value of a quasi-identifier or sensitive column.
        let clash = OutputOptions {
            marker: "s1".into(),
            ..OutputOptions::default()
        };
        let err = clash.validate(&p).unwrap_err().to_string();
        assert!(
            err.contains("'s'") && err.contains("suppression_marker"),
            "{err}"
        );
        // ... but may be one of an insensitive column.
        let fine = OutputOptions {
            marker: "5".into(),
            ..OutputOptions::default()
        };
        assert!(fine.validate(&p).is_err(), "5 is a value of g");
        let fine = OutputOptions {
            marker: "12345".into(),
            ..OutputOptions::default()
        };
        assert!(fine.validate(&p).is_ok(), "only id has 12345");
        assert!(OutputOptions::default().validate(&p).is_ok());
    }
}
