//! Dictionary-encoded tables: every column stores one code per row (1, 2 or 4 bytes, the
//! narrowest width that holds its dictionary) plus a dictionary of its distinct values. CSV import
//! goes straight from the records of the [`scanner`] (which owns every CSV rule) into the
//! dictionaries.

pub mod scanner;

use std::collections::HashMap;
use std::io::Read;

use crate::error::{EngineError, Result};
pub use scanner::{CsvScanner, Record, sniff_delimiter};

/// Distinct values of one column, in order of first appearance; code = index.
///
/// The strings live in one contiguous arena (`offsets[c]..offsets[c+1]`). While values are
/// encoded, a hash index maps a hash to the first code with that hash and collisions chain through
/// `next` (about 25 more bytes per value). A loaded [`Table`] *seals* its dictionaries: the index
/// is dropped, leaving `len + 4` bytes per value; [`Dictionary::code`] then scans the values and
/// [`Dictionary::encode`] rebuilds the index first.
#[derive(Debug, Clone, Default)]
pub struct Dictionary {
    arena: String,
    offsets: Vec<u32>,
    index: HashMap<u64, u32>,
    /// `next[c]`: the next code whose value has the same hash as `c` (u32::MAX = none). Empty
    /// when the dictionary is sealed.
    next: Vec<u32>,
}

fn hash_str(value: &str) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // Fixed keys: deterministic across runs.
    let mut h =
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .build_hasher();
    h.write(value.as_bytes());
    h.finish()
}

impl Dictionary {
    /// An empty dictionary.
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns the code of `value`, inserting it if it is new.
    pub fn encode(&mut self, value: &str) -> u32 {
        if self.next.len() != self.len() {
            self.reindex();
        }
        let h = hash_str(value);
        let head = self.index.get(&h).copied();
        let mut cur = head.unwrap_or(u32::MAX);
        while cur != u32::MAX {
            if self.value(cur) == value {
                return cur;
            }
            cur = self.next[cur as usize];
        }
        let code = self.next.len() as u32;
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.arena.push_str(value);
        self.offsets.push(self.arena.len() as u32);
        self.next.push(head.unwrap_or(u32::MAX));
        self.index.insert(h, code);
        code
    }

    /// The code of `value`, if present. A hash lookup while the dictionary is being built; a scan
    /// of the values once it is sealed (loaded tables only look codes up in tests).
    pub fn code(&self, value: &str) -> Option<u32> {
        if self.next.len() != self.len() {
            return (0..self.len() as u32).find(|&c| self.value(c) == value);
        }
        let mut cur = *self.index.get(&hash_str(value))?;
        while cur != u32::MAX {
            if self.value(cur) == value {
                return Some(cur);
            }
            cur = self.next[cur as usize];
        }
        None
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

    /// Heap size in bytes: arena, offsets and, unless sealed, the hash index (a hashbrown table
    /// of 16-byte entries plus one control byte, at most 7/8 full) and its chain.
    pub fn heap_bytes(&self) -> usize {
        let index = if self.index.capacity() == 0 {
            0
        } else {
            (self.index.capacity() * 8 / 7).next_power_of_two() * 17
        };
        self.arena.capacity() + self.offsets.capacity() * 4 + self.next.capacity() * 4 + index
    }

    /// Drops the hash index and releases spare capacity (the table is complete).
    fn seal(&mut self) {
        self.index = HashMap::new();
        self.next = Vec::new();
        self.arena.shrink_to_fit();
        self.offsets.shrink_to_fit();
    }

    /// Rebuilds the hash index of a sealed dictionary.
    fn reindex(&mut self) {
        self.index = HashMap::with_capacity(self.len());
        self.next = Vec::with_capacity(self.len());
        for code in 0..self.len() as u32 {
            let h = hash_str(self.value(code));
            let head = self.index.insert(h, code);
            self.next.push(head.unwrap_or(u32::MAX));
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
    pub fn read_csv<R: Read>(input: R, options: CsvOptions, source_name: &str) -> Result<Table> {
        let mut scanner = CsvScanner::table(input, options, source_name)?;
        let mut columns: Vec<Column> = scanner
            .columns()
            .iter()
            .map(|name| Column {
                name: name.clone(),
                dict: Dictionary::new(),
                codes: Codes::default(),
            })
            .collect();
        let mut rows = 0usize;
        while let Some(record) = scanner.next_record()? {
            for (col, value) in columns.iter_mut().zip(record.iter()) {
                let code = col.dict.encode(value);
                col.codes.push(code);
            }
            rows += 1;
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
            if row.len() != columns.len() {
                return Err(EngineError::RaggedRow {
                    source_name: "table".into(),
                    row: r as u64 + 2,
                    expected: columns.len(),
                    found: row.len(),
                });
            }
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
