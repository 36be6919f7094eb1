//! Generalization hierarchies: the ARX CSV format (one row per original value, column j = level j,
//! no header), validation (equal row lengths, unique leaves, monotonicity, coverage of the data)
//! and the encoded form used by the check (`level × input code → generalized code`). [`builder`]
//! creates hierarchies from small specifications.

use std::collections::HashMap;
use std::io::Read;

use crate::data::{Column, CsvScanner};
pub use crate::error::{DuplicateValue, list_duplicates};
use crate::error::{EngineError, Result};

pub mod builder;

/// Most levels (columns, including the original values) a hierarchy may have: levels are
/// stored as `u8` in a transformation. Builders refuse specifications that would produce more,
/// and a problem refuses taller hierarchies.
pub const MAX_HEIGHT: usize = 255;

/// A hierarchy as a table of strings: `rows[r][l]` is the level-`l` label of leaf `rows[r][0]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Hierarchy {
    rows: Vec<Vec<String>>,
    /// Optional analytic domain shares per row and level (builder hierarchies,
    /// `docs/definitions.md` §5.2). When absent, shares are materialized from the table: rows
    /// under a label / all rows (duplicated rows included, as ARX counts them).
    shares: Option<Vec<Vec<f64>>>,
    /// Values listed in several rows with different generalizations, accepted under
    /// [`DuplicatePolicy::Last`] (empty otherwise).
    duplicates: Vec<DuplicateValue>,
}

/// What to do with a value that appears in several rows of a hierarchy table with different
/// generalizations (identical duplicate rows are always accepted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DuplicatePolicy {
    /// Reject the table, listing every such value (the default).
    #[default]
    Reject,
    /// ARX's behaviour: the last row of the value defines its generalization; every row still
    /// counts for the domain shares. The values are listed by [`Hierarchy::duplicates`].
    Last,
}

/// Writes hierarchy rows in the ARX format (no header, quoting where needed).
pub fn rows_to_csv(rows: &[Vec<String>], delimiter: u8) -> String {
    let mut w = csv::WriterBuilder::new()
        .delimiter(delimiter)
        .from_writer(Vec::new());
    for row in rows {
        // Writing to a Vec cannot fail.
        let _ = w.write_record(row);
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

impl Hierarchy {
    /// Parses an ARX hierarchy CSV (no header, `"` quoting allowed) with the rules of
    /// [`CsvScanner::rows`]; the shape is checked by [`Hierarchy::from_rows`]. `column` names
    /// the attribute in error messages.
    pub fn read_csv<R: Read>(input: R, delimiter: u8, column: &str) -> Result<Hierarchy> {
        Hierarchy::read_csv_with(input, delimiter, column, DuplicatePolicy::Reject)
    }

    /// [`Hierarchy::read_csv`] with a policy for values listed in several rows with different
    /// generalizations.
    pub fn read_csv_with<R: Read>(
        input: R,
        delimiter: u8,
        column: &str,
        duplicates: DuplicatePolicy,
    ) -> Result<Hierarchy> {
        let source = format!("hierarchy of column '{column}'");
        let mut scanner = CsvScanner::rows(input, delimiter, &source)?;
        let mut rows = Vec::new();
        while let Some(record) = scanner.next_record()? {
            rows.push(record.iter().map(str::to_string).collect());
        }
        Hierarchy::from_rows_with(rows, column, duplicates)
    }

    /// Builds a hierarchy from rows, checking shape, unique leaves and monotonicity.
    pub fn from_rows(rows: Vec<Vec<String>>, column: &str) -> Result<Hierarchy> {
        Hierarchy::from_rows_with(rows, column, DuplicatePolicy::Reject)
    }

    /// [`Hierarchy::from_rows`] with a policy for values listed in several rows with different
    /// generalizations.
    pub fn from_rows_with(
        rows: Vec<Vec<String>>,
        column: &str,
        duplicates: DuplicatePolicy,
    ) -> Result<Hierarchy> {
        let mut h = Hierarchy {
            rows,
            shares: None,
            duplicates: Vec::new(),
        };
        h.duplicates = h.validate(column, duplicates)?;
        Ok(h)
    }

    /// Builds a hierarchy with analytic domain shares (`shares[r][l]` for row r, level l).
    pub fn with_shares(
        rows: Vec<Vec<String>>,
        shares: Vec<Vec<f64>>,
        column: &str,
    ) -> Result<Hierarchy> {
        if shares.len() != rows.len() || shares.iter().zip(&rows).any(|(s, r)| s.len() != r.len()) {
            return Err(EngineError::config(
                "",
                format!(
                    "hierarchy of column '{column}': domain shares must have one value per row \
                     and level"
                ),
            ));
        }
        let h = Hierarchy {
            rows,
            shares: Some(shares),
            duplicates: Vec::new(),
        };
        h.validate(column, DuplicatePolicy::Reject)?;
        Ok(h)
    }

    /// Checks shape, leaves and monotonicity; returns the conflicting duplicates accepted by
    /// `policy`.
    fn validate(&self, column: &str, policy: DuplicatePolicy) -> Result<Vec<DuplicateValue>> {
        let Some(first) = self.rows.first() else {
            return Err(EngineError::EmptyInput {
                source_name: format!("hierarchy of column '{column}'"),
            });
        };
        let height = first.len();
        for (r, row) in self.rows.iter().enumerate() {
            if row.len() != height {
                return Err(EngineError::HierarchyRaggedRow {
                    column: column.to_string(),
                    row: r + 1,
                    expected: height,
                    found: row.len(),
                });
            }
        }
        // Unique leaves: an identical duplicate row is harmless, a conflicting one is listed.
        // `effective[leaf]`: the row that defines its generalization (the last one).
        let mut effective: HashMap<&str, usize> = HashMap::with_capacity(self.rows.len());
        let mut all_rows: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut conflicting: Vec<&str> = Vec::new();
        for (r, row) in self.rows.iter().enumerate() {
            let leaf = row[0].as_str();
            if let Some(prev) = effective.insert(leaf, r) {
                let rows = all_rows.entry(leaf).or_insert_with(|| vec![prev]);
                if rows.iter().any(|&p| self.rows[p] != *row) && !conflicting.contains(&leaf) {
                    conflicting.push(leaf);
                }
                rows.push(r);
            }
        }
        let duplicates: Vec<DuplicateValue> = conflicting
            .iter()
            .map(|&leaf| DuplicateValue {
                value: leaf.to_string(),
                rows: all_rows[leaf].iter().map(|r| r + 1).collect(),
            })
            .collect();
        if !duplicates.is_empty() && policy == DuplicatePolicy::Reject {
            return Err(EngineError::HierarchyDuplicateValues {
                column: column.to_string(),
                duplicates,
            });
        }
        // Monotone: a label of level l has exactly one parent at level l+1.
        // Only the rows that define a generalization take part (the last row of every leaf).
        for level in 0..height.saturating_sub(1) {
            let mut parent: HashMap<&str, &str> = HashMap::new();
            for (r, row) in self.rows.iter().enumerate() {
                if effective[row[0].as_str()] != r {
                    continue;
                }
                let (child, up) = (row[level].as_str(), row[level + 1].as_str());
                match parent.get(child) {
                    Some(&p) if p != up => {
                        return Err(EngineError::HierarchyNotMonotone {
                            column: column.to_string(),
                            level,
                            value: child.to_string(),
                            first: p.to_string(),
                            second: up.to_string(),
                        });
                    }
                    Some(_) => {}
                    None => {
                        parent.insert(child, up);
                    }
                }
            }
        }
        Ok(duplicates)
    }

    /// Frees the table and its shares once encoded; [`Hierarchy::duplicates`] stays available
    /// (for the report's warnings).
    pub(crate) fn release_table(&mut self) {
        self.rows = Vec::new();
        self.shares = None;
    }

    /// Values listed in several rows with different generalizations that were accepted under
    /// [`DuplicatePolicy::Last`], in order of first appearance (empty otherwise).
    pub fn duplicates(&self) -> &[DuplicateValue] {
        &self.duplicates
    }

    /// Number of levels including level 0.
    pub fn height(&self) -> usize {
        self.rows.first().map_or(0, |r| r.len())
    }

    /// The rows of the table.
    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    /// Analytic domain shares, if the hierarchy came from a builder.
    pub fn shares(&self) -> Option<&[Vec<f64>]> {
        self.shares.as_deref()
    }

    /// Serializes the table as ARX CSV with the given delimiter.
    pub fn to_csv(&self, delimiter: u8) -> String {
        rows_to_csv(&self.rows, delimiter)
    }

    /// Encodes the hierarchy against the column's dictionary. Fails if data values are missing.
    ///
    /// Only what depends on the level is stored: level 0 is the column's dictionary (identity
    /// map, one leaf per value, labels in the dictionary), and every per-value table of a higher
    /// level is kept per generalized value, with the narrowest code width.
    pub fn encode(&self, column: &Column) -> Result<EncodedHierarchy> {
        self.encode_at(column, 0)
    }

    /// [`Hierarchy::encode`] for a column whose values are labels of level `floor` (data
    /// already generalized to that level; `floor < height`). Each label stands for its
    /// representative row, the first row defining a generalization whose level-`floor` cell is
    /// the label: every level from `floor` up (labels, domain shares, leaves) is that of the
    /// full hierarchy, and the levels below `floor` repeat level `floor` (the data as given).
    /// The label's ancestors are the same in every row (monotonicity), so the choice of row
    /// changes nothing at those levels. Fails naming (up to 10 of) the values that are no
    /// label of level `floor`.
    pub fn encode_at(&self, column: &Column, floor: usize) -> Result<EncodedHierarchy> {
        let height = self.height();
        debug_assert!(floor < height.max(1));
        let data_rows = self.data_rows(column, floor)?;
        // The domain counts the rows of the table, duplicated rows included (as ARX does): the
        // share of a value is the number of rows under it divided by the number of rows.
        let domain_size = self.rows.len();
        let mut maps = Vec::with_capacity(height);
        let mut labels = Vec::with_capacity(height);
        let mut share = Vec::with_capacity(height);
        let mut distinct = Vec::with_capacity(height);
        let mut leaves = Vec::with_capacity(height);
        // Level 0: the data's values are unique labels of level `floor`, so level-0 codes are
        // the dictionary codes.
        maps.push(PackedCodes::default());
        labels.push(Labels::default());
        let under0 = self.rows_under(floor);
        share.push(PerCode::from_vec(match &self.shares {
            Some(s) => data_rows.iter().map(|&r| s[r][floor]).collect(),
            None => data_rows
                .iter()
                .map(|&r| under0[self.rows[r][floor].as_str()] as f64 / domain_size as f64)
                .collect(),
        }));
        distinct.push(data_rows.len());
        leaves.push(PerCode::from_vec(
            data_rows
                .iter()
                .map(|&r| under0[self.rows[r][floor].as_str()])
                .collect(),
        ));
        // Level-l code of every data code, kept until the `up` tables are built.
        let mut level_codes: Vec<Vec<u32>> = vec![Vec::new()];
        for level in 1..height {
            let (map, level_labels, level_share, level_leaves) =
                self.encode_level(level.max(floor), &data_rows, domain_size);
            distinct.push(level_leaves.len());
            maps.push(PackedCodes::new(&map));
            labels.push(level_labels);
            share.push(PerCode::from_vec(level_share));
            leaves.push(PerCode::from_vec(level_leaves));
            level_codes.push(map);
        }
        Ok(EncodedHierarchy {
            maps,
            up: up_tables(&level_codes, &distinct),
            distinct,
            labels,
            share,
            leaves,
            domain_size,
        })
    }

    /// The row that defines the generalization of each value of the column's dictionary, in
    /// code order. At level 0: the last row of the value (ARX's rule; duplicates are identical
    /// unless accepted by `DuplicatePolicy::Last`). At a higher `level` (the value is a label
    /// of that level): the first of the rows defining a generalization that has the label at
    /// `level`. Fails naming (up to 10 of) the values without a row.
    fn data_rows(&self, column: &Column, level: usize) -> Result<Vec<usize>> {
        let mut row_of: HashMap<&str, usize> = HashMap::with_capacity(self.rows.len());
        for (r, row) in self.rows.iter().enumerate() {
            row_of.insert(row[0].as_str(), r);
        }
        if level > 0 {
            let mut defining: Vec<usize> = row_of.into_values().collect();
            defining.sort_unstable();
            row_of = HashMap::new();
            for r in defining {
                row_of.entry(self.rows[r][level].as_str()).or_insert(r);
            }
        }
        let mut missing = Vec::new();
        let mut total_missing = 0;
        let mut data_rows = Vec::with_capacity(column.dict.len());
        for value in column.dict.values() {
            match row_of.get(value) {
                Some(&r) => data_rows.push(r),
                None => {
                    total_missing += 1;
                    if missing.len() < 10 {
                        missing.push(value.to_string());
                    }
                }
            }
        }
        if total_missing == 0 {
            Ok(data_rows)
        } else if level == 0 {
            Err(EngineError::HierarchyMissingValues {
                column: column.name.clone(),
                missing,
                total_missing,
            })
        } else {
            Err(EngineError::HierarchyMissingLabels {
                column: column.name.clone(),
                level,
                missing,
                total_missing,
            })
        }
    }

    /// Rows of the full table under each label of `level`.
    fn rows_under(&self, level: usize) -> HashMap<&str, u32> {
        let mut under: HashMap<&str, u32> = HashMap::new();
        for row in &self.rows {
            *under.entry(row[level].as_str()).or_insert(0) += 1;
        }
        under
    }

    /// Level `level` ≥ 1 of the encoding: the level code of every data code (codes numbered in
    /// order of first appearance), and per level code its label, domain share and number of
    /// rows under it.
    fn encode_level(
        &self,
        level: usize,
        data_rows: &[usize],
        domain_size: usize,
    ) -> (Vec<u32>, Labels, Vec<f64>, Vec<u32>) {
        let under = self.rows_under(level);
        let mut codes: HashMap<&str, u32> = HashMap::new();
        let mut level_labels = Labels::default();
        let mut level_share: Vec<f64> = Vec::new();
        let mut level_leaves: Vec<u32> = Vec::new();
        let mut map = Vec::with_capacity(data_rows.len());
        for &r in data_rows {
            let label = self.rows[r][level].as_str();
            let code = *codes.entry(label).or_insert_with(|| {
                level_labels.push(label);
                let s = match &self.shares {
                    Some(s) => s[r][level],
                    None => under[label] as f64 / domain_size as f64,
                };
                level_share.push(s);
                level_leaves.push(under[label]);
                (level_leaves.len() - 1) as u32
            });
            map.push(code);
        }
        level_labels.shrink_to_fit();
        (map, level_labels, level_share, level_leaves)
    }
}

/// `up[from][to][code at from]` = code at `to` for 1 ≤ `from` < `to`, via a representative leaf
/// (from level 0 the table is the level map itself), given each level's code of every data code
/// (`level_codes`) and number of codes (`distinct`).
fn up_tables(level_codes: &[Vec<u32>], distinct: &[usize]) -> Vec<Vec<PackedCodes>> {
    let height = level_codes.len();
    let mut up = Vec::with_capacity(height);
    up.push(Vec::new());
    for from in 1..height {
        let mut rep = vec![0u32; distinct[from]];
        for (leaf, &c) in level_codes[from].iter().enumerate() {
            rep[c as usize] = leaf as u32;
        }
        let tables: Vec<PackedCodes> = (0..height)
            .map(|to| {
                if to <= from {
                    PackedCodes::default()
                } else {
                    let t: Vec<u32> = rep
                        .iter()
                        .map(|&leaf| level_codes[to][leaf as usize])
                        .collect();
                    PackedCodes::new(&t)
                }
            })
            .collect();
        up.push(tables);
    }
    up
}

/// Labels of the generalized values of one level, in one string arena.
#[derive(Debug, Clone, Default)]
struct Labels {
    arena: String,
    /// `ends[c]`: end of label c in the arena (it starts where label c − 1 ends).
    ends: Vec<u32>,
}

impl Labels {
    fn push(&mut self, label: &str) {
        self.arena.push_str(label);
        self.ends.push(self.arena.len() as u32);
    }

    fn get(&self, code: u32) -> &str {
        let c = code as usize;
        let start = if c == 0 { 0 } else { self.ends[c - 1] as usize };
        &self.arena[start..self.ends[c] as usize]
    }

    fn shrink_to_fit(&mut self) {
        self.arena.shrink_to_fit();
        self.ends.shrink_to_fit();
    }

    fn heap_bytes(&self) -> usize {
        self.arena.capacity() + self.ends.capacity() * 4
    }
}

/// One value per code of a level, stored once when all codes share it (e.g. level 0, where every
/// value is one leaf with the same domain share).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PerCode<T> {
    /// The value of every code.
    All(T),
    /// `values[code]`.
    Each(Vec<T>),
}

impl<T: Copy + PartialEq> PerCode<T> {
    /// [`PerCode::All`] if the values are all equal (and there is at least one), else
    /// [`PerCode::Each`].
    pub(crate) fn from_vec(mut values: Vec<T>) -> PerCode<T> {
        match values.first() {
            Some(&first) if values.iter().all(|&v| v == first) => PerCode::All(first),
            _ => {
                values.shrink_to_fit();
                PerCode::Each(values)
            }
        }
    }

    /// The value of `code`.
    #[inline]
    pub(crate) fn get(&self, code: u32) -> T {
        match self {
            PerCode::All(v) => *v,
            PerCode::Each(values) => values[code as usize],
        }
    }

    /// The same table with `f` applied to every value.
    pub(crate) fn map<U: Copy + PartialEq>(&self, f: impl Fn(T) -> U) -> PerCode<U> {
        match self {
            PerCode::All(v) => PerCode::All(f(*v)),
            PerCode::Each(values) => PerCode::from_vec(values.iter().map(|&v| f(v)).collect()),
        }
    }

    /// Heap size in bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            PerCode::All(_) => 0,
            PerCode::Each(values) => values.capacity() * std::mem::size_of::<T>(),
        }
    }
}

/// Codes stored with 1, 2 or 4 bytes each, the narrowest width that holds the largest one. A code
/// is read without branching on the width: the 4 little-endian bytes at `index · width`, masked to
/// the width (3 bytes of padding keep the last read in bounds).
#[derive(Debug, Clone, Default)]
struct PackedCodes {
    bytes: Vec<u8>,
    /// log2 of the width in bytes.
    shift: u32,
}

impl PackedCodes {
    fn new(codes: &[u32]) -> PackedCodes {
        let shift = match codes.iter().max().copied().unwrap_or(0) {
            m if m <= u8::MAX as u32 => 0,
            m if m <= u16::MAX as u32 => 1,
            _ => 2,
        };
        let width = 1usize << shift;
        let mut bytes = Vec::with_capacity(codes.len() * width + 3);
        for &c in codes {
            bytes.extend_from_slice(&c.to_le_bytes()[..width]);
        }
        bytes.extend_from_slice(&[0; 3]);
        PackedCodes { bytes, shift }
    }

    fn view(&self) -> CodeMap<'_> {
        CodeMap {
            table: Some(&self.bytes),
            shift: self.shift,
            mask: (u64::from(u32::MAX) >> (32 - (8u32 << self.shift))) as u32,
        }
    }

    fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
    }
}

/// A table from the codes of one level of an [`EncodedHierarchy`] to the codes of a higher level
/// (or the identity, from a level to itself).
#[derive(Debug, Clone, Copy)]
pub struct CodeMap<'a> {
    /// Packed target codes; `None` for the identity.
    table: Option<&'a [u8]>,
    shift: u32,
    mask: u32,
}

impl CodeMap<'_> {
    /// The identity (from a level to itself).
    pub const IDENTITY: CodeMap<'static> = CodeMap {
        table: None,
        shift: 0,
        mask: 0,
    };

    /// The target code of `code`.
    #[inline]
    pub fn get(self, code: u32) -> u32 {
        match self.table {
            None => code,
            Some(bytes) => {
                let at = (code as usize) << self.shift;
                let word: [u8; 4] = bytes[at..at + 4].try_into().expect("4 bytes");
                u32::from_le_bytes(word) & self.mask
            }
        }
    }
}

/// A hierarchy restricted to the values of one column, ready for the check.
///
/// Level-0 codes are the column's dictionary codes; the level-l code of a value is its
/// generalized value's index in order of first appearance over the dictionary.
#[derive(Debug, Clone)]
pub struct EncodedHierarchy {
    /// `maps[level]`: level code of every dictionary code (`maps[0]` is empty: the identity).
    maps: Vec<PackedCodes>,
    /// Distinct generalized values occurring in the data, per level.
    distinct: Vec<usize>,
    /// `up[from][to][code]` = code at level `to` of the level-`from` value `code`, for
    /// 1 ≤ from < to (empty otherwise); used to regroup cached results.
    up: Vec<Vec<PackedCodes>>,
    /// Labels of the generalized values per level (`labels[0]` is empty: the dictionary).
    labels: Vec<Labels>,
    /// Domain share of every generalized value, per level.
    share: Vec<PerCode<f64>>,
    /// Rows of the hierarchy table under every generalized value, per level.
    leaves: Vec<PerCode<u32>>,
    /// Number of rows of the hierarchy table (the attribute's domain size).
    pub domain_size: usize,
}

impl EncodedHierarchy {
    /// Number of levels including level 0.
    pub fn height(&self) -> usize {
        self.distinct.len()
    }

    /// Distinct generalized values occurring in the data at `level`.
    pub fn distinct(&self, level: usize) -> usize {
        self.distinct[level]
    }

    /// Text of the generalized value `code` at `level`; `column` is the encoded column.
    pub fn label<'a>(&'a self, level: usize, code: u32, column: &'a Column) -> &'a str {
        if level == 0 {
            column.dict.value(code)
        } else {
            self.labels[level].get(code)
        }
    }

    /// The level-`level` code of the column's dictionary code `value`.
    #[inline]
    pub fn code(&self, level: usize, value: u32) -> u32 {
        self.generalize(0, level).get(value)
    }

    /// The table from level-`from` codes to level-`to` codes (`from ≤ to`; level-0 codes are the
    /// column's dictionary codes). Monotonicity makes it well defined.
    #[inline]
    pub fn generalize(&self, from: usize, to: usize) -> CodeMap<'_> {
        debug_assert!(from <= to && to < self.height());
        if from == to {
            CodeMap::IDENTITY
        } else if from == 0 {
            self.maps[to].view()
        } else {
            self.up[from][to].view()
        }
    }

    /// Domain share of the generalized value `code` at `level`: hierarchy rows under it divided
    /// by all rows, or the builder's analytic share.
    #[inline]
    pub fn share(&self, level: usize, code: u32) -> f64 {
        self.share[level].get(code)
    }

    /// Rows of the hierarchy table under the generalized value `code` at `level` (its leaves,
    /// duplicated rows counted each time).
    #[inline]
    pub fn leaves(&self, level: usize, code: u32) -> u32 {
        self.leaves[level].get(code)
    }

    /// Domain shares of one level, per generalized code.
    pub(crate) fn level_shares(&self, level: usize) -> &PerCode<f64> {
        &self.share[level]
    }

    /// Leaves under the generalized values of one level, per generalized code.
    pub(crate) fn level_leaves(&self, level: usize) -> &PerCode<u32> {
        &self.leaves[level]
    }

    /// Heap size in bytes: level maps, `up` tables, labels, shares and leaf counts.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.maps.iter().map(PackedCodes::heap_bytes).sum::<usize>()
            + self
                .up
                .iter()
                .map(|u| {
                    u.iter().map(PackedCodes::heap_bytes).sum::<usize>()
                        + u.capacity() * size_of::<PackedCodes>()
                })
                .sum::<usize>()
            + self.labels.iter().map(Labels::heap_bytes).sum::<usize>()
            + self.share.iter().map(PerCode::heap_bytes).sum::<usize>()
            + self.leaves.iter().map(PerCode::heap_bytes).sum::<usize>()
            + self.maps.capacity() * size_of::<PackedCodes>()
            + self.up.capacity() * size_of::<Vec<PackedCodes>>()
            + self.labels.capacity() * size_of::<Labels>()
            + self.share.capacity() * size_of::<PerCode<f64>>()
            + self.leaves.capacity() * size_of::<PerCode<u32>>()
            + self.distinct.capacity() * size_of::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{CsvOptions, Table};

    fn rows(text: &str) -> Vec<Vec<String>> {
        text.lines()
            .map(|l| l.split(';').map(String::from).collect())
            .collect()
    }

    fn column(values: &[&str]) -> Column {
        let text = format!("c\n{}\n", values.join("\n"));
        let t = Table::read_csv(text.as_bytes(), CsvOptions::default(), "t").unwrap();
        t.column(0).clone()
    }

    #[test]
    fn parses_quoted_fields_and_encodes() {
        let text = "a;\"x;y\";*\r\nb;\"x;y\";*\r\nc;z;*\r\n";
        let h = Hierarchy::read_csv(text.as_bytes(), b';', "c").unwrap();
        assert_eq!(h.height(), 3);
        assert_eq!(h.rows()[0][1], "x;y");
        let e = h.encode(&column(&["c", "a"])).unwrap();
        assert_eq!(e.domain_size, 3);
        assert_eq!((e.code(1, 0), e.code(1, 1)), (0, 1)); // c → z, a → x;y
        assert_eq!((e.code(0, 0), e.code(0, 1)), (0, 1)); // level 0: dictionary codes
        let col = column(&["c", "a"]);
        assert_eq!(e.label(0, 1, &col), "a");
        assert_eq!(e.label(1, 1, &col), "x;y");
        assert_eq!((0..3).map(|l| e.distinct(l)).collect::<Vec<_>>(), [2, 2, 1]);
        assert!((e.share(0, 1) - 1.0 / 3.0).abs() < 1e-12);
        assert!((e.share(1, 1) - 2.0 / 3.0).abs() < 1e-12);
        assert!((e.share(2, 0) - 1.0).abs() < 1e-12);
        assert_eq!((e.leaves(0, 1), e.leaves(1, 1), e.leaves(2, 0)), (1, 2, 3));
        assert_eq!(e.distinct(2), 1);
    }

    #[test]
    fn level_tables_compose_and_use_narrow_codes() {
        // 600 values: level 1 = v / 2 (300 codes: 2 bytes), level 2 = v / 100, level 3 = *.
        let rows: Vec<Vec<String>> = (0..600)
            .map(|v| {
                vec![
                    v.to_string(),
                    (v / 2).to_string(),
                    (v / 100).to_string(),
                    "*".into(),
                ]
            })
            .collect();
        let values: Vec<String> = (0..600).rev().map(|v| v.to_string()).collect();
        let col = column(&values.iter().map(String::as_str).collect::<Vec<_>>());
        let e = Hierarchy::from_rows(rows, "c")
            .unwrap()
            .encode(&col)
            .unwrap();
        assert_eq!(
            (e.maps[1].shift, e.maps[2].shift, e.maps[3].shift),
            (1, 0, 0)
        );
        assert_eq!((e.distinct(1), e.distinct(2), e.distinct(3)), (300, 6, 1));
        for v in 0..600u32 {
            for from in 0..4 {
                for to in from..4 {
                    assert_eq!(e.generalize(from, to).get(e.code(from, v)), e.code(to, v));
                }
            }
            let text = col.dict.value(v);
            let n: u32 = text.parse().unwrap();
            assert_eq!(e.label(1, e.code(1, v), &col), (n / 2).to_string());
            assert_eq!(e.label(2, e.code(2, v), &col), (n / 100).to_string());
        }
    }

    #[test]
    fn heap_bytes_counts_every_table() {
        // Leaves x, y, z, w, v; data x, y, z. Level 1: xy (2 leaves), zwv (3); level 2: *.
        let text = "x;xy;*\ny;xy;*\nz;zwv;*\nw;zwv;*\nv;zwv;*";
        let h = Hierarchy::read_csv(text.as_bytes(), b';', "c").unwrap();
        let e = h.encode(&column(&["x", "y", "z"])).unwrap();
        assert_eq!(e.share(1, 1), 3.0 / 5.0);
        assert_eq!(e.leaves(1, 0), 2);
        use std::mem::size_of;
        let payload = (3 + 3) * 2 // level maps 1 and 2: 3 one-byte codes + 3 bytes padding each
            + (2 + 3) // up[1][2]: 2 one-byte codes + padding
            + (2 + 3 + 2 * 4) + (1 + 4) // labels "xy", "zwv" and "*" with their end offsets
            + 2 * 8 // level-1 shares 2/5, 3/5 (levels 0 and 2 share one value: not stored)
            + 2 * 4; // level-1 leaf counts 2, 3
        let headers = 3 * size_of::<PackedCodes>() // maps
            + 3 * size_of::<Vec<PackedCodes>>() + 2 * 3 * size_of::<PackedCodes>() // up
            + 3 * size_of::<Labels>()
            + 3 * size_of::<PerCode<f64>>()
            + 3 * size_of::<PerCode<u32>>()
            + 3 * size_of::<usize>(); // distinct
        assert_eq!(e.heap_bytes(), payload + headers);
    }

    #[test]
    fn read_csv_errors_name_the_hierarchy() {
        let read = |text: &[u8]| Hierarchy::read_csv(text, b';', "age");
        assert_eq!(
            read(b"").unwrap_err().to_string(),
            "hierarchy of column 'age': the file is empty"
        );
        assert_eq!(
            read(b"1;*\n2;\xff\n").unwrap_err().to_string(),
            "hierarchy of column 'age': row 2, column 2: the value is not valid UTF-8"
        );
        assert_eq!(
            read(b"1;a;*\n2;*\n").unwrap_err().to_string(),
            "hierarchy of column 'age': row 2 has 2 levels, expected 3"
        );
        let h = read("\u{feff}1;*\n2;*\n".as_bytes()).unwrap();
        assert_eq!(h.rows(), [vec!["1", "*"], vec!["2", "*"]]);
    }

    #[test]
    fn ragged_rows_are_rejected() {
        let err = Hierarchy::from_rows(rows("a;x;*\nb;x"), "c").unwrap_err();
        assert!(matches!(
            err,
            EngineError::HierarchyRaggedRow {
                row: 2,
                expected: 3,
                found: 2,
                ..
            }
        ));
    }

    #[test]
    fn non_monotone_hierarchy_names_the_value() {
        let err = Hierarchy::from_rows(rows("a;x;p\nb;x;q"), "c").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("'x'") && msg.contains("'p'") && msg.contains("'q'"),
            "{msg}"
        );
    }

    #[test]
    fn conflicting_duplicate_leaves_are_all_listed() {
        // 'a' (rows 1, 3, 5) and 'b' (rows 2, 4) conflict; 'c' is listed twice identically.
        let text = "a;x\nb;x\na;y\nb;y\na;x\nc;x\nc;x";
        let err = Hierarchy::from_rows(rows(text), "c").unwrap_err();
        let expected = vec![
            DuplicateValue {
                value: "a".into(),
                rows: vec![1, 3, 5],
            },
            DuplicateValue {
                value: "b".into(),
                rows: vec![2, 4],
            },
        ];
        assert_eq!(
            err,
            EngineError::HierarchyDuplicateValues {
                column: "c".into(),
                duplicates: expected.clone(),
            }
        );
        assert_eq!(
            err.to_string(),
            "hierarchy of column 'c': 2 value(s) appear in several rows with different \
             generalizations: 'a' (rows 1, 3, 5), 'b' (rows 2, 4)"
        );
        let read = Hierarchy::read_csv(text.as_bytes(), b';', "c").unwrap_err();
        assert_eq!(read, err);
        let h = Hierarchy::from_rows(rows("a;x\na;x"), "c").unwrap();
        assert!(h.duplicates().is_empty());
        // Under `Last` the same table is accepted and the duplicates are reported.
        let h =
            Hierarchy::read_csv_with(text.as_bytes(), b';', "c", DuplicatePolicy::Last).unwrap();
        assert_eq!(h.duplicates(), expected);
    }

    #[test]
    fn last_row_generalizes_and_every_row_counts_for_shares() {
        // Leaf '1' is listed under 'lo' (row 1) and under 'hi' (row 4): the last row wins.
        // Domain: 5 rows. Level 1 labels over all rows: lo = rows 1, 2 → 2/5; hi = rows 3, 4,
        // 5 → 3/5. Level 0: '1' is listed twice → 2/5, the others 1/5.
        let text = "1;lo;*\n2;lo;*\n3;hi;*\n1;hi;*\n4;hi;*";
        assert!(Hierarchy::read_csv(text.as_bytes(), b';', "c").is_err());
        let h =
            Hierarchy::read_csv_with(text.as_bytes(), b';', "c", DuplicatePolicy::Last).unwrap();
        assert_eq!(
            h.duplicates(),
            [DuplicateValue {
                value: "1".into(),
                rows: vec![1, 4]
            }]
        );
        let col = column(&["1", "2", "3"]);
        let e = h.encode(&col).unwrap();
        assert_eq!(e.domain_size, 5);
        // Dictionary codes: '1' = 0, '2' = 1, '3' = 2.
        assert_eq!(e.label(1, e.code(1, 0), &col), "hi");
        assert_eq!(e.label(1, e.code(1, 1), &col), "lo");
        assert_eq!(e.code(1, 0), e.code(1, 2));
        assert_eq!(e.share(0, 0), 2.0 / 5.0);
        assert_eq!(e.share(0, 1), 1.0 / 5.0);
        assert_eq!(e.share(1, e.code(1, 0)), 3.0 / 5.0);
        assert_eq!(e.share(1, e.code(1, 1)), 2.0 / 5.0);
        assert_eq!(e.share(2, 0), 1.0);
        assert_eq!(
            (e.leaves(0, 0), e.leaves(1, e.code(1, 0)), e.leaves(2, 0)),
            (2, 3, 5)
        );
    }

    #[test]
    fn identical_duplicate_rows_count_for_domain_shares() {
        // '9' is listed twice: 4 rows. Level 1: 'lo' has 1 row (1/4), 'hi' 3 rows (3/4).
        let h = Hierarchy::from_rows(rows("1;lo;*\n5;hi;*\n9;hi;*\n9;hi;*"), "c").unwrap();
        let e = h.encode(&column(&["1", "9"])).unwrap();
        assert_eq!(e.domain_size, 4);
        assert_eq!((e.share(0, 0), e.share(0, 1)), (1.0 / 4.0, 2.0 / 4.0));
        assert_eq!((e.share(1, 0), e.share(1, 1)), (1.0 / 4.0, 3.0 / 4.0));
        assert_eq!((e.leaves(1, 0), e.leaves(1, 1)), (1, 3));
    }

    #[test]
    fn data_at_a_floor_stand_for_their_representative_rows() {
        // Leaves x, y under xy (2 of 5 rows), z, w, v under zwv (3 of 5); the data hold labels
        // of level 1. Levels 0 and 1 are the labels themselves, level 2 the root.
        let text = "x;xy;*\ny;xy;*\nz;zwv;*\nw;zwv;*\nv;zwv;*";
        let h = Hierarchy::read_csv(text.as_bytes(), b';', "c").unwrap();
        let col = column(&["zwv", "xy", "zwv"]);
        let e = h.encode_at(&col, 1).unwrap();
        assert_eq!((e.height(), e.domain_size), (3, 5));
        assert_eq!((0..3).map(|l| e.distinct(l)).collect::<Vec<_>>(), [2, 2, 1]);
        for level in [0, 1] {
            assert_eq!(e.label(level, e.code(level, 0), &col), "zwv");
            assert_eq!(e.label(level, e.code(level, 1), &col), "xy");
            assert_eq!(e.share(level, e.code(level, 0)), 3.0 / 5.0);
            assert_eq!(e.leaves(level, e.code(level, 1)), 2);
        }
        assert_eq!((e.code(2, 0), e.code(2, 1), e.share(2, 0)), (0, 0, 1.0));
        assert_eq!(e.generalize(1, 2).get(e.code(1, 1)), 0);
        // Leaves and labels of another level are no labels of level 1.
        let err = h.encode_at(&column(&["xy", "x", "*"]), 1).unwrap_err();
        assert_eq!(
            err,
            EngineError::HierarchyMissingLabels {
                column: "c".into(),
                level: 1,
                missing: vec!["x".into(), "*".into()],
                total_missing: 2
            }
        );
        // Under `DuplicatePolicy::Last` only the rows that define a generalization represent a
        // label: '1' is under 'hi' (row 4), 'lo' is represented by '2' alone; shares still count
        // every row.
        let text = "1;lo;*\n2;lo;*\n3;hi;*\n1;hi;*\n4;hi;*";
        let h =
            Hierarchy::read_csv_with(text.as_bytes(), b';', "c", DuplicatePolicy::Last).unwrap();
        let e = h.encode_at(&column(&["lo", "hi"]), 1).unwrap();
        assert_eq!((e.share(0, 0), e.share(0, 1)), (2.0 / 5.0, 3.0 / 5.0));
        assert_eq!((e.leaves(1, 0), e.leaves(1, 1)), (2, 3));
    }

    #[test]
    fn missing_values_are_listed() {
        let h = Hierarchy::from_rows(rows("a;*\nb;*"), "c").unwrap();
        let err = h.encode(&column(&["a", "q", "r", "q"])).unwrap_err();
        assert_eq!(
            err,
            EngineError::HierarchyMissingValues {
                column: "c".into(),
                missing: vec!["q".into(), "r".into()],
                total_missing: 2
            }
        );
        assert!(err.to_string().contains("'q', 'r'"));
    }
}
