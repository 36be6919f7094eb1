//! Frequency tables: a count column says how many records each row stands for
//! (`docs/definitions.md` §1.1). Parsed once per distinct value of the column and kept as the
//! column's codes; the engine weighs every row by its count and never expands the table.
//!
//! A second count column may say how many of a row's records are released (the research subset
//! of a frequency table); a yes/no research subset column releases all of a row's records or
//! none.

use crate::data::subset::Subset;
use crate::data::{Codes, Table};
use crate::error::{EngineError, Result};

/// The most records a frequency table may stand for: the engine counts records in `u32`.
pub const MAX_RECORDS: u64 = u32::MAX as u64;

/// Records per row of a frequency table, and the released records per row when it has a
/// research subset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frequencies {
    /// Records per row.
    counts: PerRow,
    /// With a research subset: released records per row (≤ the row's count).
    released: Option<PerRow>,
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
        for (row, c) in counts.iter().enumerate() {
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
                for (row, (s, c)) in released.iter().zip(counts.iter()).enumerate() {
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

    fn new(counts: PerRow, released: Option<PerRow>) -> Frequencies {
        let records = counts.iter().map(|c| c as usize).sum();
        let released_records = released
            .as_ref()
            .map_or(records, |r| r.iter().map(|c| c as usize).sum());
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
            .map(|(row, c)| if subset.contains(row) { c } else { 0 })
            .collect();
        Frequencies::new(self.counts, Some(PerRow::Plain(released)))
    }

    /// The same frequencies with `released[row]` released records per row (each at most the
    /// row's count): differential privacy's sample (`problem::dp`).
    pub(crate) fn with_released(self, released: Vec<u32>) -> Frequencies {
        debug_assert!(
            released
                .iter()
                .zip(self.counts.iter())
                .all(|(&r, c)| r <= c)
        );
        Frequencies::new(self.counts, Some(PerRow::Plain(released)))
    }

    /// The frequencies of the rows with `keep[row]` set.
    pub fn retain(&self, keep: &[bool]) -> Frequencies {
        let pick = |v: &PerRow| -> PerRow {
            PerRow::Plain(
                (v.iter().zip(keep))
                    .filter(|(_, k)| **k)
                    .map(|(c, _)| c)
                    .collect(),
            )
        };
        Frequencies::new(pick(&self.counts), self.released.as_ref().map(pick))
    }

    /// Records of row `row`.
    #[inline]
    pub fn count(&self, row: usize) -> u32 {
        self.counts.get(row)
    }

    /// Released records of row `row`: its count, or its subset count with a research subset.
    #[inline]
    pub fn released(&self, row: usize) -> u32 {
        match &self.released {
            Some(r) => r.get(row),
            None => self.counts.get(row),
        }
    }

    /// Records of every row, in row order.
    pub fn counts(&self) -> impl Iterator<Item = u32> + '_ {
        self.counts.iter()
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
        self.counts.heap_bytes() + self.released.as_ref().map_or(0, PerRow::heap_bytes)
    }
}

/// A number per row: as read from a count column, the column's codes and the number of each
/// code (one byte per row when the column holds fewer than 256 distinct counts); or computed,
/// one number per row.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PerRow {
    /// `numbers[codes[row]]`.
    Coded { codes: Codes, numbers: Vec<u32> },
    /// `numbers[row]`.
    Plain(Vec<u32>),
}

impl PerRow {
    #[inline]
    fn get(&self, row: usize) -> u32 {
        match self {
            PerRow::Coded { codes, numbers } => numbers[codes.get(row) as usize],
            PerRow::Plain(v) => v[row],
        }
    }

    fn len(&self) -> usize {
        match self {
            PerRow::Coded { codes, .. } => codes.len(),
            PerRow::Plain(v) => v.len(),
        }
    }

    fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.len()).map(|row| self.get(row))
    }

    fn heap_bytes(&self) -> usize {
        match self {
            PerRow::Coded { codes, numbers } => codes.heap_bytes() + numbers.capacity() * 4,
            PerRow::Plain(v) => v.capacity() * 4,
        }
    }
}

/// What a [`CountSum`] found: rows and the records they stand for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountSummary {
    /// Data rows.
    pub rows: usize,
    /// The sum of the counts.
    pub records: u64,
}

/// Checks and sums a count column row by row, in a pass over a CSV that does something else as
/// well (the upload's profile, [`crate::profile::profile_counted_csv`]): constant memory; the
/// errors of [`Frequencies::resolve`] (field `count_column`, the 1-based data row, the value).
#[derive(Debug, Clone)]
pub struct CountSum {
    name: String,
    column: usize,
    summary: CountSummary,
}

impl CountSum {
    /// A sum of column `name` of a table with these columns (an error if it has none such).
    pub fn new(columns: &[String], name: &str) -> Result<CountSum> {
        let Some(column) = columns.iter().position(|n| n == name) else {
            return Err(EngineError::config(
                "count_column",
                format!(
                    "the table has no column '{name}'; its columns are: {}",
                    columns.join(", ")
                ),
            ));
        };
        Ok(CountSum {
            name: name.to_string(),
            column,
            summary: CountSummary {
                rows: 0,
                records: 0,
            },
        })
    }

    /// The count column's position.
    pub fn column(&self) -> usize {
        self.column
    }

    /// Adds the next row's count (its cell `value`).
    pub fn add(&mut self, value: &str) -> Result<()> {
        let s = &mut self.summary;
        s.rows += 1;
        let count = parse_count(value).ok_or_else(|| bad_count(&self.name, value, s.rows))?;
        s.records += u64::from(count);
        if s.records > MAX_RECORDS {
            return Err(too_many(&self.name, s.rows));
        }
        Ok(())
    }

    /// The rows and records, or an error if no row counts a record.
    pub fn finish(self) -> Result<CountSummary> {
        if self.summary.records == 0 {
            return Err(no_record(&self.name));
        }
        Ok(self.summary)
    }
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
fn read_counts(table: &Table, name: &str, field: &str) -> Result<PerRow> {
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
    Ok(PerRow::Coded {
        codes: col.codes.clone(),
        numbers: parsed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{CsvOptions, CsvScanner};

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
        assert_eq!(f.counts().collect::<Vec<_>>(), [3, 0, 7]);
        assert_eq!((f.records(), f.released_records()), (10, 10));
        assert!(!f.has_subset());
        let f = Frequencies::resolve(&t, "n", Some("s")).unwrap();
        assert_eq!((f.released(0), f.released(2)), (1, 7));
        assert_eq!(f.released_records(), 8);
        let kept = f.retain(&[true, false, true]);
        assert_eq!(kept.counts().collect::<Vec<_>>(), [3, 7]);
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
        let scan = |csv: &str| {
            let mut scanner = CsvScanner::table(csv.as_bytes(), options, "t")?;
            let mut sum = CountSum::new(scanner.columns(), "n")?;
            while let Some(record) = scanner.next_record()? {
                sum.add(record.get(sum.column()).unwrap_or(""))?;
            }
            sum.finish()
        };
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
