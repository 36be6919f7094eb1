//! Frequency tables: a count column says how many records each row stands for
//! (`docs/definitions.md` §1.1). Parsed once per distinct value of the column into one count per
//! row; the engine weighs every row by its count and never expands the table.
//!
//! A second count column may say how many of a row's records are released (the research subset
//! of a frequency table); a yes/no research subset column releases all of a row's records or
//! none.

use std::io::Read;

use crate::data::subset::Subset;
use crate::data::{CsvOptions, CsvScanner, Table};
use crate::error::{EngineError, Result};

/// The most records a frequency table may stand for: the engine counts records in `u32`.
pub const MAX_RECORDS: u64 = u32::MAX as u64;

/// Records per row of a frequency table, and the released records per row when it has a
/// research subset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frequencies {
    /// Records per row.
    counts: Vec<u32>,
    /// With a research subset: released records per row (≤ the row's count).
    released: Option<Vec<u32>>,
    /// Sum of `counts`.
    records: usize,
    /// Sum of `released` (or of `counts` without a subset).
    released_records: usize,
}

impl Frequencies {
    /// Reads the counts of `count_column` and, if given, the released counts of
    /// `subset_count_column`. Errors name the field (`count_column`, `subset_count_column`), the
    /// 1-based data row, the column and its value, and what was expected: a whole number of
    /// records written in decimal digits (0 to [`MAX_RECORDS`]; 0 rows are ignored), at most
    /// the row's count for the subset, a total of at most [`MAX_RECORDS`], and at least one
    /// record.
    pub fn resolve(
        table: &Table,
        count_column: &str,
        subset_count_column: Option<&str>,
    ) -> Result<Frequencies> {
        let counts = read_counts(table, count_column, "count_column")?;
        let mut records = 0u64;
        for (row, &c) in counts.iter().enumerate() {
            records += u64::from(c);
            if records > MAX_RECORDS {
                return Err(too_many(count_column, row + 1));
            }
        }
        if records == 0 {
            return Err(no_record(count_column));
        }
        let released = match subset_count_column {
            None => None,
            Some(name) => {
                if name == count_column {
                    return Err(EngineError::config(
                        "subset_count_column",
                        format!("column '{name}' is already the count column"),
                    ));
                }
                let released = read_counts(table, name, "subset_count_column")?;
                for (row, (&s, &c)) in released.iter().zip(&counts).enumerate() {
                    if s > c {
                        return Err(EngineError::config(
                            "subset_count_column",
                            format!(
                                "row {} of column '{name}' holds '{s}': expected at most the \
                                 row's {c} records (column '{count_column}')",
                                row + 1
                            ),
                        ));
                    }
                }
                Some(released)
            }
        };
        Ok(Frequencies::new(counts, released))
    }

    fn new(counts: Vec<u32>, released: Option<Vec<u32>>) -> Frequencies {
        let records = counts.iter().map(|&c| c as usize).sum();
        let released_records = released
            .as_ref()
            .map_or(records, |r| r.iter().map(|&c| c as usize).sum());
        Frequencies {
            counts,
            released,
            records,
            released_records,
        }
    }

    /// The same frequencies with a research subset given by rows: a selected row releases all
    /// its records, another none (replacing any released counts).
    pub fn with_subset(self, subset: &Subset) -> Frequencies {
        let released = (self.counts.iter().enumerate())
            .map(|(row, &c)| if subset.contains(row) { c } else { 0 })
            .collect();
        Frequencies::new(self.counts, Some(released))
    }

    /// The same frequencies with `released[row]` released records per row (each at most the
    /// row's count): differential privacy's sample (`problem::dp`).
    pub(crate) fn with_released(self, released: Vec<u32>) -> Frequencies {
        debug_assert!(released.iter().zip(&self.counts).all(|(r, c)| r <= c));
        Frequencies::new(self.counts, Some(released))
    }

    /// The frequencies of the rows with `keep[row]` set.
    pub fn retain(&self, keep: &[bool]) -> Frequencies {
        let pick = |v: &[u32]| -> Vec<u32> {
            (v.iter().zip(keep))
                .filter(|(_, k)| **k)
                .map(|(&c, _)| c)
                .collect()
        };
        Frequencies::new(pick(&self.counts), self.released.as_deref().map(pick))
    }

    /// Records of row `row`.
    #[inline]
    pub fn count(&self, row: usize) -> u32 {
        self.counts[row]
    }

    /// Released records of row `row`: its count, or its subset count with a research subset.
    #[inline]
    pub fn released(&self, row: usize) -> u32 {
        match &self.released {
            Some(r) => r[row],
            None => self.counts[row],
        }
    }

    /// Records of every row.
    pub fn counts(&self) -> &[u32] {
        &self.counts
    }

    /// Whether a research subset selects the released records.
    pub fn has_subset(&self) -> bool {
        self.released.is_some()
    }

    /// Records of the table (the sum of the counts).
    pub fn records(&self) -> usize {
        self.records
    }

    /// Released records (the sum of the subset counts, or of the counts without a subset).
    pub fn released_records(&self) -> usize {
        self.released_records
    }

    /// Rows of the table.
    pub fn rows(&self) -> usize {
        self.counts.len()
    }

    /// Heap size in bytes.
    pub fn heap_bytes(&self) -> usize {
        (self.counts.capacity() + self.released.as_ref().map_or(0, Vec::capacity)) * 4
    }
}

/// What [`scan_counts`] found: rows and the records they stand for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountSummary {
    /// Data rows.
    pub rows: usize,
    /// The sum of the counts.
    pub records: u64,
}

/// Streams a CSV (the rules of [`CsvScanner::table`]) and checks and sums its count column
/// `column` in constant memory: the check of an upload declared a frequency table. Errors are
/// those of [`Frequencies::resolve`] (field `count_column`, the 1-based data row, the value),
/// or the CSV's.
pub fn scan_counts<R: Read>(
    input: R,
    options: CsvOptions,
    source_name: &str,
    column: &str,
) -> Result<CountSummary> {
    let mut scanner = CsvScanner::table(input, options, source_name)?;
    let Some(c) = scanner.columns().iter().position(|n| n == column) else {
        return Err(EngineError::config(
            "count_column",
            format!(
                "the table has no column '{column}'; its columns are: {}",
                scanner.columns().join(", ")
            ),
        ));
    };
    let mut summary = CountSummary {
        rows: 0,
        records: 0,
    };
    while let Some(record) = scanner.next_record()? {
        summary.rows += 1;
        let value = record.get(c).unwrap_or("");
        let count = parse_count(value).ok_or_else(|| bad_count(column, value, summary.rows))?;
        summary.records += u64::from(count);
        if summary.records > MAX_RECORDS {
            return Err(too_many(column, summary.rows));
        }
    }
    if summary.records == 0 {
        return Err(no_record(column));
    }
    Ok(summary)
}

fn bad_count(column: &str, value: &str, row: usize) -> EngineError {
    EngineError::config(
        "count_column",
        format!(
            "row {row} of column '{column}' holds '{value}': expected a whole number of records \
             in decimal digits, 0 to {MAX_RECORDS}"
        ),
    )
}

fn too_many(column: &str, row: usize) -> EngineError {
    EngineError::config(
        "count_column",
        format!(
            "the counts of column '{column}' add up to more than {MAX_RECORDS} records at row \
             {row}: expected a table of at most {MAX_RECORDS} records"
        ),
    )
}

fn no_record(column: &str) -> EngineError {
    EngineError::config(
        "count_column",
        format!("every row of column '{column}' counts 0 records: expected at least one record"),
    )
}

/// A count: decimal digits only (no sign, blank or decimal point), at most [`MAX_RECORDS`].
pub fn parse_count(value: &str) -> Option<u32> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse::<u32>().ok()
}

/// The count of every row of column `name`, parsed once per distinct value. `field` names the
/// configuration field in errors.
fn read_counts(table: &Table, name: &str, field: &str) -> Result<Vec<u32>> {
    let c = table.column_index(name).ok_or_else(|| {
        EngineError::config(
            field,
            format!(
                "the table has no column '{name}'; its columns are: {}",
                table.column_names()
            ),
        )
    })?;
    let col = table.column(c);
    let mut parsed = Vec::with_capacity(col.dict.len());
    for (code, value) in col.dict.values().enumerate() {
        let Some(n) = parse_count(value) else {
            let row = (0..table.rows()).find(|&r| col.codes.get(r) as usize == code);
            let e = bad_count(name, value, row.map_or(0, |r| r + 1));
            return Err(match e {
                EngineError::InvalidConfig { message, .. } => EngineError::config(field, message),
                other => other,
            });
        };
        parsed.push(n);
    }
    Ok(col.codes.iter().map(|code| parsed[code as usize]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(rows: &[[&str; 3]]) -> Table {
        let rows: Vec<Vec<String>> = rows
            .iter()
            .map(|r| r.iter().map(|v| v.to_string()).collect())
            .collect();
        Table::from_rows(&["a", "n", "s"], &rows).unwrap()
    }

    fn message(t: &Table, subset: Option<&str>) -> (String, String) {
        let e = Frequencies::resolve(t, "n", subset).unwrap_err();
        let (field, message) = e.config_error().unwrap();
        (field.to_string(), message)
    }

    #[test]
    fn counts_and_released_counts_are_read_per_row() {
        let t = table(&[["x", "3", "1"], ["y", "0", "0"], ["x", "007", "7"]]);
        let f = Frequencies::resolve(&t, "n", None).unwrap();
        assert_eq!(f.counts(), [3, 0, 7]);
        assert_eq!((f.records(), f.released_records()), (10, 10));
        assert!(!f.has_subset());
        let f = Frequencies::resolve(&t, "n", Some("s")).unwrap();
        assert_eq!((f.released(0), f.released(2)), (1, 7));
        assert_eq!(f.released_records(), 8);
        let kept = f.retain(&[true, false, true]);
        assert_eq!(kept.counts(), [3, 7]);
        assert_eq!(kept.released_records(), 8);
    }

    #[test]
    fn bad_counts_name_the_row_the_column_the_value_and_what_was_expected() {
        for bad in ["-1", "1.5", "two", "", " 2", "4294967296"] {
            let t = table(&[["x", "1", "0"], ["y", bad, "0"]]);
            let (field, m) = message(&t, None);
            assert_eq!(field, "count_column");
            assert!(
                m.contains("row 2") && m.contains("'n'") && m.contains(&format!("'{bad}'")),
                "{m}"
            );
            assert!(m.contains("whole number"), "{m}");
        }
        let t = table(&[["x", "4294967295", "0"], ["y", "1", "0"]]);
        let (field, m) = message(&t, None);
        assert_eq!(field, "count_column");
        assert!(m.contains("row 2") && m.contains("4294967295"), "{m}");
        let t = table(&[["x", "0", "0"]]);
        assert!(message(&t, None).1.contains("at least one record"));
        let t = table(&[["x", "2", "1"], ["y", "2", "3"]]);
        let (field, m) = message(&t, Some("s"));
        assert_eq!(field, "subset_count_column");
        assert!(
            m.contains("row 2") && m.contains("'3'") && m.contains("at most"),
            "{m}"
        );
        let e = Frequencies::resolve(&t, "missing", None).unwrap_err();
        assert_eq!(e.config_error().unwrap().0, "count_column");
    }

    #[test]
    fn a_scan_agrees_with_the_table() {
        let options = CsvOptions::default();
        let scan = |csv: &str| scan_counts(csv.as_bytes(), options, "t", "n");
        let s = scan("a,n\nx,3\ny,0\nz,12\n").unwrap();
        assert_eq!((s.rows, s.records), (3, 15));
        let e = scan("a,n\nx,3\ny,-1\n").unwrap_err();
        let (field, m) = e.config_error().unwrap();
        assert_eq!(field, "count_column");
        assert!(m.contains("row 2") && m.contains("'-1'"), "{m}");
        let e = scan("a,n\nx,4294967295\ny,1\n").unwrap_err();
        assert!(e.config_error().unwrap().1.contains("row 2"));
        assert!(scan("a,n\nx,0\n").is_err());
        assert_eq!(
            scan("a,m\nx,0\n").unwrap_err().config_error().unwrap().0,
            "count_column"
        );
    }
}
