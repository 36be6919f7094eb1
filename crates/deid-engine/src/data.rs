//! Dictionary-encoded tables: every column stores one code per row (1, 2 or 4 bytes, the
//! narrowest width that holds its dictionary) plus a dictionary of its distinct values. CSV import
//! goes straight from the records of the [`scanner`] (which owns every CSV rule) into the
//! dictionaries.

pub mod blocks;
pub mod frequency;
pub mod scanner;
pub mod subset;

use std::io::Read;

use crate::error::{EngineError, Result};
pub use blocks::{Block, TableBlocks};
pub use scanner::{CsvScanner, Record, SNIFFED_ROWS, sniff_delimiter, sniff_rows_delimiter};

/// Refuses a record of `found` fields in a table of `expected` columns:
/// [`EngineError::RaggedRow`] naming the input and `row` (the 1-based record number, the header
/// being record 1).
pub(crate) fn check_width(
    source_name: &str,
    row: u64,
    expected: usize,
    found: usize,
) -> Result<()> {
    match found == expected {
        true => Ok(()),
        false => Err(EngineError::RaggedRow {
            source_name: source_name.to_string(),
            row,
            expected,
            found,
        }),
    }
}

/// Distinct values of one column, in order of first appearance; code = index.
///
/// The strings live in one contiguous arena (`offsets[c]..offsets[c+1]`). While values are
/// encoded, an open-addressing table of codes (load factor ≤ 1/2) and the hash of every value
/// find a value's code (about 16 more bytes per value). A loaded [`Table`] *seals* its
/// dictionaries: the index is dropped, leaving `len + 4` bytes per value; [`Dictionary::code`]
/// then scans the values and [`Dictionary::encode`] rebuilds the index first.
#[derive(Debug, Clone, Default)]
pub struct Dictionary {
    arena: String,
    offsets: Vec<u32>,
    /// Open addressing: code + 1 per slot, 0 = free. Empty when sealed.
    slots: Vec<u32>,
    /// `hashes[c]`: the hash of value `c`. Empty when sealed.
    hashes: Vec<u64>,
}

use crate::hash::hash_str;

impl Dictionary {
    /// An empty dictionary.
    pub fn new() -> Self {
        Self::default()
    }

    fn slot_of(&self, h: u64) -> usize {
        (h as usize) & (self.slots.len() - 1)
    }

    /// Returns the code of `value`, inserting it if it is new.
    pub fn encode(&mut self, value: &str) -> u32 {
        if self.hashes.len() != self.len() || self.slots.is_empty() {
            self.reindex();
        }
        let h = hash_str(value);
        let mask = self.slots.len() - 1;
        let mut slot = self.slot_of(h);
        loop {
            let entry = self.slots[slot];
            if entry == 0 {
                break;
            }
            let c = entry - 1;
            if self.hashes[c as usize] == h && self.value(c) == value {
                return c;
            }
            slot = (slot + 1) & mask;
        }
        let code = self.hashes.len() as u32;
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.arena.push_str(value);
        self.offsets.push(self.arena.len() as u32);
        self.hashes.push(h);
        self.slots[slot] = code + 1;
        if self.hashes.len() * 2 > self.slots.len() {
            self.rehash(self.slots.len() * 2);
        }
        code
    }

    /// The code of `value`, if present. A hash lookup while the dictionary is being built; a scan
    /// of the values once it is sealed (loaded tables only look codes up in tests).
    pub fn code(&self, value: &str) -> Option<u32> {
        if self.hashes.len() != self.len() || self.slots.is_empty() {
            return (0..self.len() as u32).find(|&c| self.value(c) == value);
        }
        let h = hash_str(value);
        let mask = self.slots.len() - 1;
        let mut slot = self.slot_of(h);
        loop {
            let entry = self.slots[slot];
            if entry == 0 {
                return None;
            }
            let c = entry - 1;
            if self.hashes[c as usize] == h && self.value(c) == value {
                return Some(c);
            }
            slot = (slot + 1) & mask;
        }
    }

    /// The value of `code`. Panics if the code is out of range (codes come from this dictionary).
    pub fn value(&self, code: u32) -> &str {
        let c = code as usize;
        &self.arena[self.offsets[c] as usize..self.offsets[c + 1] as usize]
    }

    /// Number of distinct values.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// True if the dictionary holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All values, in code order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len() as u32).map(|c| self.value(c))
    }

    /// Heap size in bytes: arena, offsets and, unless sealed, the index (slots and hashes).
    pub fn heap_bytes(&self) -> usize {
        self.arena.capacity()
            + self.offsets.capacity() * 4
            + self.slots.capacity() * 4
            + self.hashes.capacity() * 8
    }

    /// Drops the index and releases spare capacity (the table is complete).
    fn seal(&mut self) {
        self.slots = Vec::new();
        self.hashes = Vec::new();
        self.arena.shrink_to_fit();
        self.offsets.shrink_to_fit();
    }

    /// Rebuilds the index of a sealed dictionary.
    fn reindex(&mut self) {
        self.hashes = self.values().map(hash_str).collect();
        let cap = (self.len() * 2).next_power_of_two().max(16);
        self.rehash(cap);
    }

    /// Re-inserts every code into `cap` slots.
    fn rehash(&mut self, cap: usize) {
        self.slots = vec![0; cap];
        let mask = cap - 1;
        for (c, &h) in self.hashes.iter().enumerate() {
            let mut slot = (h as usize) & mask;
            while self.slots[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            self.slots[slot] = c as u32 + 1;
        }
    }
}

/// Codes of one column, stored with the narrowest width that holds the dictionary (1, 2 or 4
/// bytes per row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Codes {
    /// Fewer than 2^8 distinct values.
    U8(Vec<u8>),
    /// Fewer than 2^16 distinct values.
    U16(Vec<u16>),
    /// Anything larger.
    U32(Vec<u32>),
}

impl Default for Codes {
    fn default() -> Self {
        Codes::U8(Vec::new())
    }
}

impl Codes {
    /// The code of `row`.
    #[inline]
    pub fn get(&self, row: usize) -> u32 {
        match self {
            Codes::U8(v) => v[row] as u32,
            Codes::U16(v) => v[row] as u32,
            Codes::U32(v) => v[row],
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        match self {
            Codes::U8(v) => v.len(),
            Codes::U16(v) => v.len(),
            Codes::U32(v) => v.len(),
        }
    }

    /// True if there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All codes in row order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.len()).map(|r| self.get(r))
    }

    /// Appends a code, widening the storage when needed.
    pub fn push(&mut self, code: u32) {
        match self {
            Codes::U8(v) if code <= u8::MAX as u32 => v.push(code as u8),
            Codes::U8(v) if code <= u16::MAX as u32 => {
                let mut w: Vec<u16> = v.iter().map(|&c| c as u16).collect();
                w.push(code as u16);
                *self = Codes::U16(w);
            }
            Codes::U8(v) => {
                let mut w: Vec<u32> = v.iter().map(|&c| c as u32).collect();
                w.push(code);
                *self = Codes::U32(w);
            }
            Codes::U16(v) if code <= u16::MAX as u32 => v.push(code as u16),
            Codes::U16(v) => {
                let mut w: Vec<u32> = v.iter().map(|&c| c as u32).collect();
                w.push(code);
                *self = Codes::U32(w);
            }
            Codes::U32(v) => v.push(code),
        }
    }

    /// Heap size in bytes.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Codes::U8(v) => v.capacity(),
            Codes::U16(v) => v.capacity() * 2,
            Codes::U32(v) => v.capacity() * 4,
        }
    }

    fn shrink_to_fit(&mut self) {
        match self {
            Codes::U8(v) => v.shrink_to_fit(),
            Codes::U16(v) => v.shrink_to_fit(),
            Codes::U32(v) => v.shrink_to_fit(),
        }
    }
}

/// One dictionary-encoded column.
#[derive(Debug, Clone)]
pub struct Column {
    /// Header name (or `column<N>` when the file has no header).
    pub name: String,
    /// Distinct values.
    pub dict: Dictionary,
    /// One code per row.
    pub codes: Codes,
}

/// A dictionary-encoded table.
#[derive(Debug, Clone)]
pub struct Table {
    columns: Vec<Column>,
    rows: usize,
}

/// Records per batch of [`Table::read_csv`].
const BATCH_ROWS: usize = 1 << 15;

/// A batch of parsed records, column by column: the values of a column back to back in one
/// string, with their end offsets.
struct Batch {
    columns: Vec<(String, Vec<u32>)>,
    rows: usize,
}

impl Batch {
    fn new(width: usize) -> Batch {
        Batch {
            columns: (0..width).map(|_| (String::new(), Vec::new())).collect(),
            rows: 0,
        }
    }

    fn clear(&mut self) {
        for (text, ends) in &mut self.columns {
            text.clear();
            ends.clear();
        }
        self.rows = 0;
    }

    /// Parses up to [`BATCH_ROWS`] records; false once the input is exhausted.
    fn fill<R: Read>(&mut self, scanner: &mut CsvScanner<R>) -> Result<bool> {
        self.clear();
        while self.rows < BATCH_ROWS {
            let Some(record) = scanner.next_record()? else {
                return Ok(false);
            };
            for ((text, ends), value) in self.columns.iter_mut().zip(record.iter()) {
                text.push_str(value);
                ends.push(text.len() as u32);
            }
            self.rows += 1;
        }
        Ok(true)
    }

    /// Appends the batch's values to the columns' dictionaries and codes, a column per task.
    fn encode_into(&self, columns: &mut [Column]) {
        use rayon::prelude::*;
        columns
            .par_iter_mut()
            .zip(self.columns.par_iter())
            .for_each(|(col, (text, ends))| {
                let mut start = 0usize;
                for &end in ends {
                    let end = end as usize;
                    let code = col.dict.encode(&text[start..end]);
                    col.codes.push(code);
                    start = end;
                }
            });
    }
}

/// How to parse a CSV file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CsvOptions {
    /// Field delimiter (`,` by default; ARX files use `;`).
    pub delimiter: u8,
    /// Whether the first record is a header.
    pub has_header: bool,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            delimiter: b',',
            has_header: true,
        }
    }
}

impl Table {
    /// Reads and encodes a CSV file with the rules of [`CsvScanner::table`] (unique non-empty
    /// header names, records as wide as the header, UTF-8, at least one data row).
    /// `source_name` is used in error messages.
    pub fn read_csv<R: Read + Send>(
        input: R,
        options: CsvOptions,
        source_name: &str,
    ) -> Result<Table> {
        let mut scanner = CsvScanner::table(input, options, source_name)?;
        let width = scanner.columns().len();
        let mut columns: Vec<Column> = scanner
            .columns()
            .iter()
            .map(|name| Column {
                name: name.clone(),
                dict: Dictionary::new(),
                codes: Codes::default(),
            })
            .collect();
        // Records are parsed in batches on one thread while the previous batch is encoded
        // column by column on the others (each column's dictionary is independent).
        let mut current = Batch::new(width);
        let mut next = Batch::new(width);
        let mut more = current.fill(&mut scanner)?;
        let mut rows = 0usize;
        while current.rows > 0 {
            let (parsed, ()) = rayon::join(
                || {
                    if more {
                        next.fill(&mut scanner)
                    } else {
                        next.clear();
                        Ok(false)
                    }
                },
                || current.encode_into(&mut columns),
            );
            more = parsed?;
            rows += current.rows;
            std::mem::swap(&mut current, &mut next);
        }
        for c in &mut columns {
            c.codes.shrink_to_fit();
            c.dict.seal();
        }
        Ok(Table { columns, rows })
    }

    /// Builds a table from already split rows (tests, generated data).
    pub fn from_rows(header: &[&str], rows: &[Vec<String>]) -> Result<Table> {
        let mut columns: Vec<Column> = Vec::with_capacity(header.len());
        for name in header {
            if columns.iter().any(|c| c.name == *name) {
                return Err(EngineError::DuplicateColumn {
                    name: name.to_string(),
                });
            }
            columns.push(Column {
                name: name.to_string(),
                dict: Dictionary::new(),
                codes: Codes::default(),
            });
        }
        for (r, row) in rows.iter().enumerate() {
            check_width("table", r as u64 + 2, columns.len(), row.len())?;
            for (col, value) in columns.iter_mut().zip(row) {
                let code = col.dict.encode(value);
                col.codes.push(code);
            }
        }
        for c in &mut columns {
            c.codes.shrink_to_fit();
            c.dict.seal();
        }
        Ok(Table {
            columns,
            rows: rows.len(),
        })
    }

    /// The table of the rows with `keep[row]` set, in the same order, every dictionary encoded
    /// anew in order of first appearance (as if the other rows had never been read).
    pub fn retain_rows(&self, keep: &[bool]) -> Table {
        let columns = self
            .columns
            .iter()
            .map(|col| {
                let mut dict = Dictionary::new();
                let mut codes = Codes::default();
                let mut recode = vec![u32::MAX; col.dict.len()];
                for (row, _) in keep.iter().enumerate().filter(|(_, k)| **k) {
                    let old = col.codes.get(row) as usize;
                    if recode[old] == u32::MAX {
                        recode[old] = dict.encode(col.dict.value(old as u32));
                    }
                    codes.push(recode[old]);
                }
                codes.shrink_to_fit();
                dict.seal();
                Column {
                    name: col.name.clone(),
                    dict,
                    codes,
                }
            })
            .collect();
        Table {
            columns,
            rows: keep.iter().filter(|k| **k).count(),
        }
    }

    /// Number of data rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// All columns in file order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The column at `index`.
    pub fn column(&self, index: usize) -> &Column {
        &self.columns[index]
    }

    /// Index of the column named `name`.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// Comma-separated column names, for error messages.
    pub fn column_names(&self) -> String {
        self.columns
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Index of `name` or an [`EngineError::UnknownColumn`] naming `field`.
    pub fn require_column(&self, name: &str, field: &str) -> Result<usize> {
        self.column_index(name)
            .ok_or_else(|| EngineError::UnknownColumn {
                name: name.to_string(),
                field: field.to_string(),
                available: self.column_names(),
            })
    }

    /// Heap size of the encoded table in bytes: codes, dictionaries and column names.
    pub fn heap_bytes(&self) -> usize {
        self.columns.capacity() * std::mem::size_of::<Column>()
            + self
                .columns
                .iter()
                .map(|c| c.codes.heap_bytes() + c.dict.heap_bytes() + c.name.capacity())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Table> {
        Table::read_csv(text.as_bytes(), CsvOptions::default(), "test.csv")
    }

    #[test]
    fn encodes_columns_with_dictionaries() {
        let t = read("a,b\nx,1\ny,1\nx,2\n").unwrap();
        assert_eq!(t.rows(), 3);
        assert_eq!(t.column(0).codes.iter().collect::<Vec<_>>(), vec![0, 1, 0]);
        assert_eq!(t.column(1).dict.len(), 2);
        assert_eq!(t.column(1).dict.value(1), "2");
    }

    #[test]
    fn dictionary_round_trips() {
        let mut d = Dictionary::new();
        let words = ["", "a", "b", "a;b", "ünïcode", "b"];
        let codes: Vec<u32> = words.iter().map(|w| d.encode(w)).collect();
        assert_eq!(codes, vec![0, 1, 2, 3, 4, 2]);
        assert_eq!(d.len(), 5);
        assert_eq!(d.value(4), "ünïcode");
        assert_eq!(d.code("a;b"), Some(3));
        assert_eq!(d.code("zz"), None);
        assert_eq!(
            d.values().collect::<Vec<_>>(),
            vec!["", "a", "b", "a;b", "ünïcode"]
        );
    }

    #[test]
    fn sealed_dictionaries_drop_the_index_and_still_work() {
        let mut d = Dictionary::new();
        for w in ["x", "y", "z"] {
            d.encode(w);
        }
        let open = d.heap_bytes();
        d.seal();
        // Arena (3 bytes) and offsets (4 × 4 bytes) only.
        assert_eq!(d.heap_bytes(), 3 + 16);
        assert!(d.heap_bytes() < open);
        assert_eq!((d.code("y"), d.code("w")), (Some(1), None));
        assert_eq!(d.encode("z"), 2);
        assert_eq!(d.encode("w"), 3);
        assert_eq!((d.code("w"), d.len()), (Some(3), 4));
    }

    #[test]
    fn codes_widen_with_the_dictionary() {
        let mut c = Codes::default();
        for i in 0..300u32 {
            c.push(i);
        }
        assert!(matches!(c, Codes::U16(_)));
        c.push(70_000);
        assert!(matches!(c, Codes::U32(_)));
        assert_eq!(c.get(299), 299);
        assert_eq!(c.get(300), 70_000);
        assert_eq!(c.len(), 301);
    }

    #[test]
    fn handles_crlf_bom_quotes_and_semicolons() {
        let text = "\u{feff}name;\"note\"\r\n\"a;b\";\"say \"\"hi\"\"\"\r\nc;d\r\n";
        let opts = CsvOptions {
            delimiter: b';',
            has_header: true,
        };
        let t = Table::read_csv(text.as_bytes(), opts, "x").unwrap();
        assert_eq!(t.column(0).name, "name");
        assert_eq!(t.column(1).name, "note");
        assert_eq!(t.column(0).dict.value(0), "a;b");
        assert_eq!(t.column(1).dict.value(0), "say \"hi\"");
        assert_eq!(t.rows(), 2);
    }

    #[test]
    fn ragged_row_names_row_and_counts() {
        let err = read("a,b\n1,2\n3\n").unwrap_err();
        assert_eq!(
            err,
            EngineError::RaggedRow {
                source_name: "test.csv".into(),
                row: 3,
                expected: 2,
                found: 1
            }
        );
        assert!(err.to_string().contains("row 3 has 1 fields, expected 2"));
    }

    #[test]
    fn invalid_utf8_names_position() {
        let bytes = b"a,b\n1,\xff\xfe\n";
        let err = Table::read_csv(&bytes[..], CsvOptions::default(), "f").unwrap_err();
        assert!(
            matches!(
                err,
                EngineError::InvalidUtf8 {
                    row: 2,
                    column: 2,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn empty_and_header_only_files_are_rejected() {
        assert!(matches!(
            read("").unwrap_err(),
            EngineError::EmptyInput { .. }
        ));
        let err = read("a,b\n").unwrap_err();
        assert!(err.to_string().contains("no data rows"), "{err}");
    }

    #[test]
    fn duplicate_and_unknown_columns() {
        let err = read("a,b,a\n1,2,3\n").unwrap_err();
        assert_eq!(err, EngineError::DuplicateColumn { name: "a".into() });
        let t = read("a,b\n1,2\n").unwrap();
        let err = t.require_column("zz", "attributes").unwrap_err();
        assert!(err.to_string().contains("'zz'"));
        assert!(err.to_string().contains("a, b"));
    }

    #[test]
    fn no_header_names_columns_by_position() {
        let opts = CsvOptions {
            delimiter: b',',
            has_header: false,
        };
        let t = Table::read_csv(&b"1,2\n3,4\n"[..], opts, "x").unwrap();
        assert_eq!(t.rows(), 2);
        assert_eq!(t.column(1).name, "column2");
    }
}
