//! The streaming profile of a CSV table and the distinct values of one column, both read in
//! one pass with the rules of [`CsvScanner::table`] (the same as [`Table::read_csv`]) without
//! encoding the table.
//!
//! Per column, [`profile_csv`] counts the distinct values exactly through 64-bit hashes and
//! keeps the values themselves while there are at most `keep` of them: memory grows with the
//! number of distinct values, never with the file. Kept columns get the full type detection of
//! [`detect_values`]; the others a guess from their values (`integer` if every non-blank value
//! is a 64-bit integer, `decimal` if every one is a finite number, `text` otherwise) and no
//! suggestion.
//!
//! [`Table::read_csv`]: crate::data::Table::read_csv

use std::collections::HashSet;
use std::io::Read;

use super::{ColumnProfile, ColumnType, detect_values};
use crate::data::frequency::{CountSum, CountSummary};
use crate::data::{Column, CsvOptions, CsvScanner};
use crate::error::{EngineError, Result};
use crate::hash::BuildCodeHasher;

/// Distinct values the service keeps per column of an upload (see [`profile_csv`]): columns
/// with more get a type guess only, no suggestion.
pub const MAX_KEPT_VALUES: usize = 100_000;

/// What one streaming pass over a CSV table found out ([`profile_csv`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TableProfile {
    /// Data rows.
    pub rows: usize,
    /// One profile per column, in file order.
    pub columns: Vec<ColumnProfile>,
    /// Per column, in file order: its distinct values in order of first appearance, or `None`
    /// when it has more than `keep` of them.
    pub values: Vec<Option<Vec<String>>>,
}

/// Streaming profile of one column: exact distinct count through 64-bit hashes, the values
/// themselves only while there are at most `keep` of them, and a type guess.
struct ColumnStats {
    name: String,
    hashes: HashSet<u64, BuildCodeHasher>,
    values: Option<Vec<Box<str>>>,
    /// Some value is not blank.
    any: bool,
    /// Every non-blank value is a 64-bit integer.
    integer: bool,
    /// Every non-blank value is a finite number.
    number: bool,
}

impl ColumnStats {
    fn new(name: &str) -> Self {
        ColumnStats {
            name: name.to_string(),
            hashes: HashSet::default(),
            values: Some(Vec::new()),
            any: false,
            integer: true,
            number: true,
        }
    }

    fn add(&mut self, value: &str, keep: usize) {
        // The engine's string hash, kept in a set that mixes it once more (SipHash twice was
        // half of an upload's time).
        if !self.hashes.insert(crate::hash::hash_str(value)) {
            return;
        }
        if let Some(v) = &mut self.values {
            if v.len() < keep {
                v.push(value.into());
            } else {
                self.values = None;
            }
        }
        let t = value.trim();
        if !t.is_empty() {
            self.any = true;
            if self.integer && t.parse::<i64>().is_err() {
                self.integer = false;
            }
            if self.number && !self.integer && !t.parse::<f64>().is_ok_and(f64::is_finite) {
                self.number = false;
            }
        }
    }

    /// The guess for columns whose values were not kept.
    fn guess(&self) -> ColumnType {
        match (self.any, self.integer, self.number) {
            (true, true, _) => ColumnType::Integer,
            (true, false, true) => ColumnType::Decimal,
            _ => ColumnType::Text,
        }
    }

    /// The column's profile and its kept values.
    fn finish(self) -> (ColumnProfile, Option<Vec<String>>) {
        let distinct_count = self.hashes.len();
        match self.values {
            // The type detection needs every distinct value: only for kept columns.
            Some(values) => {
                let profile = ColumnProfile {
                    distinct_count,
                    ..detect_values(&self.name, &values)
                };
                (
                    profile,
                    Some(values.into_iter().map(String::from).collect()),
                )
            }
            None => {
                let profile = ColumnProfile {
                    detected_type: self.guess(),
                    distinct_count,
                    date_format: None,
                    code_length: None,
                    missing: Vec::new(),
                    suggested_hierarchy: None,
                    name: self.name,
                };
                (profile, None)
            }
        }
    }
}

/// Validates and profiles a CSV table in one pass, with the rules of [`CsvScanner::table`]
/// (the same as [`Table::read_csv`](crate::data::Table::read_csv)) but without encoding it:
/// memory grows with the number of distinct values only (see the module documentation).
/// `source_name` names the input in error messages; `keep` is the most distinct values kept
/// (and fully profiled) per column, e.g. [`MAX_KEPT_VALUES`].
pub fn profile_csv<R: Read>(
    input: R,
    options: CsvOptions,
    source_name: &str,
    keep: usize,
) -> Result<TableProfile> {
    profile_counted_csv(input, options, source_name, keep, None).map(|(profile, _)| profile)
}

/// [`profile_csv`] of a frequency table: in the same pass, the count column `count_column` is
/// checked and summed ([`CountSum`]: its errors name the field
/// `count_column`). Without a count column, the sum is `None`.
pub fn profile_counted_csv<R: Read>(
    input: R,
    options: CsvOptions,
    source_name: &str,
    keep: usize,
    count_column: Option<&str>,
) -> Result<(TableProfile, Option<CountSummary>)> {
    let mut scanner = CsvScanner::table(input, options, source_name)?;
    let mut columns: Vec<ColumnStats> = scanner
        .columns()
        .iter()
        .map(|name| ColumnStats::new(name))
        .collect();
    let mut sum = count_column
        .map(|name| CountSum::new(scanner.columns(), name))
        .transpose()?;
    let mut rows = 0usize;
    while let Some(record) = scanner.next_record()? {
        for (column, value) in columns.iter_mut().zip(record.iter()) {
            column.add(value, keep);
        }
        if let Some(sum) = &mut sum {
            sum.add(record.get(sum.column()).unwrap_or(""))?;
        }
        rows += 1;
    }
    let (columns, values) = columns.into_iter().map(ColumnStats::finish).unzip();
    let profile = TableProfile {
        rows,
        columns,
        values,
    };
    Ok((profile, sum.map(CountSum::finish).transpose()?))
}

/// The distinct values of the column at `position` (0-based) of a CSV table, in order of first
/// appearance, as a column named `name` (dictionary only, no codes). One pass with the rules of
/// [`CsvScanner::table`]; only that column's distinct values are held. `source_name` names the
/// input in error messages.
pub fn scan_column<R: Read>(
    input: R,
    options: CsvOptions,
    source_name: &str,
    position: usize,
    name: &str,
) -> Result<Column> {
    let mut scanner = CsvScanner::table(input, options, source_name)?;
    let width = scanner.columns().len();
    if position >= width {
        return Err(EngineError::config(
            "column",
            format!(
                "{source_name} has {width} column(s), there is no column number {}",
                position + 1
            ),
        ));
    }
    let mut column = Column {
        name: name.to_string(),
        dict: Default::default(),
        codes: Default::default(),
    };
    while let Some(record) = scanner.next_record()? {
        if let Some(value) = record.get(position) {
            column.dict.encode(value);
        }
    }
    Ok(column)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Table;
    use crate::profile::detect;

    #[test]
    fn profiles_like_the_engine_reads() {
        let text = "i,d,t,e\n1,2.5,x,\n22,3,y,\n-3,3,x,\n1,2.5,\"a,b\",\n";
        let p = profile_csv(
            format!("\u{feff}{text}").as_bytes(),
            CsvOptions::default(),
            "dataset",
            MAX_KEPT_VALUES,
        )
        .unwrap();
        assert_eq!(p.rows, 4);
        let types: Vec<&str> = p.columns.iter().map(|c| c.detected_type.as_str()).collect();
        assert_eq!(types, ["integer", "decimal", "text", "text"]);
        let distinct: Vec<usize> = p.columns.iter().map(|c| c.distinct_count).collect();
        assert_eq!(distinct, [3, 2, 3, 1]);
        assert_eq!(p.columns[0].name, "i", "the byte order mark is stripped");
        assert_eq!(
            p.values[2],
            Some(vec!["x".into(), "y".into(), "a,b".into()])
        );
        // The same data through the engine's import gives the same distinct values and the
        // same profiles.
        let t = Table::read_csv(text.as_bytes(), CsvOptions::default(), "t").unwrap();
        for ((c, values), col) in p.columns.iter().zip(&p.values).zip(t.columns()) {
            assert_eq!(c.distinct_count, col.dict.len());
            let values = values.as_ref().unwrap();
            assert!(values.iter().map(String::as_str).eq(col.dict.values()));
            assert_eq!(*c, detect(col));
        }
        for (bad, message) in [
            ("", "dataset: the file is empty"),
            (
                "a,a\n1,2\n",
                "column name 'a' occurs more than once in the header",
            ),
            ("a,b\n1\n", "dataset: row 2 has 1 fields, expected 2"),
            ("a,b\n", "dataset: the file has a header but no data rows"),
            (",b\n1,2\n", "dataset: header column 1 has an empty name"),
        ] {
            let err = profile_csv(bad.as_bytes(), CsvOptions::default(), "dataset", 10)
                .unwrap_err()
                .to_string();
            assert_eq!(err, message, "{bad:?}");
        }
    }

    #[test]
    fn columns_with_too_many_values_get_a_guess() {
        let mut text = String::from("n,x,t,c\n");
        for i in 0..6 {
            text.push_str(&format!("{i},{i}.5,w{i},{:05}\n", i % 3));
        }
        text.push_str(" ,,w0,00000\n");
        let p = profile_csv(text.as_bytes(), CsvOptions::default(), "d", 4).unwrap();
        assert_eq!(p.rows, 7);
        let guesses: Vec<(ColumnType, usize)> = p
            .columns
            .iter()
            .map(|c| (c.detected_type, c.distinct_count))
            .collect();
        assert_eq!(
            guesses,
            [
                (ColumnType::Integer, 7),
                (ColumnType::Decimal, 7),
                (ColumnType::Text, 6),
                (ColumnType::Code, 3)
            ]
        );
        for c in &p.columns[..3] {
            assert_eq!(
                (
                    &c.date_format,
                    c.code_length,
                    &c.missing,
                    &c.suggested_hierarchy
                ),
                (&None, None, &vec![], &None),
                "{}",
                c.name
            );
        }
        assert_eq!(p.values[..3], [None, None, None]);
        // At most `keep` values: kept and fully detected.
        assert_eq!(p.columns[3].code_length, Some(5));
        assert_eq!(
            p.values[3],
            Some(vec!["00000".into(), "00001".into(), "00002".into()])
        );
        assert!(p.columns[3].suggested_hierarchy.is_some());
    }

    #[test]
    fn scans_the_distinct_values_of_one_column() {
        let csv = "\u{feff}a;b\n1;x\n2;\"y;z\"\n1;x\n3;\n";
        let options = CsvOptions {
            delimiter: b';',
            has_header: true,
        };
        let col = scan_column(csv.as_bytes(), options, "d", 1, "b").unwrap();
        assert_eq!(col.name, "b");
        assert_eq!(col.dict.values().collect::<Vec<_>>(), ["x", "y;z", ""]);
        let col = scan_column(csv.as_bytes(), options, "d", 0, "a").unwrap();
        assert_eq!(col.dict.values().collect::<Vec<_>>(), ["1", "2", "3"]);
        // Without a header the first record is data (and loses its byte order mark).
        let options = CsvOptions {
            delimiter: b';',
            has_header: false,
        };
        let col = scan_column(csv.as_bytes(), options, "d", 0, "a").unwrap();
        assert_eq!(col.dict.values().collect::<Vec<_>>(), ["a", "1", "2", "3"]);
        let err = scan_column(csv.as_bytes(), options, "d", 2, "c").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value for 'column': d has 2 column(s), there is no column number 3"
        );
    }

    #[test]
    fn a_count_column_is_checked_and_summed_in_the_same_pass() {
        let text = "a,n\nx,3\ny,0\nx,7\n";
        let (p, sum) =
            profile_counted_csv(text.as_bytes(), CsvOptions::default(), "d", 4, Some("n")).unwrap();
        assert_eq!(p.rows, 3);
        let sum = sum.unwrap();
        assert_eq!((sum.rows, sum.records), (3, 10));
        let (_, none) =
            profile_counted_csv(text.as_bytes(), CsvOptions::default(), "d", 4, None).unwrap();
        assert!(none.is_none());
        for (bad, expected) in [
            ("a,n\nx,3\ny,-1\n", "row 2 of column 'n' holds '-1'"),
            ("a,n\nx,0\n", "counts 0 records"),
            ("a,m\nx,1\n", "no column 'n'"),
        ] {
            let e = profile_counted_csv(bad.as_bytes(), CsvOptions::default(), "d", 4, Some("n"))
                .unwrap_err();
            let (field, message) = e.config_error().unwrap();
            assert_eq!(field, "count_column");
            assert!(message.contains(expected), "{message}");
        }
    }
}
