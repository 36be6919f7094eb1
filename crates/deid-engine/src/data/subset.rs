//! The research subset: the records to publish, while the whole table is the population they
//! were drawn from (δ-presence and k-map with a population table, `docs/definitions.md` §3.2).
//! Given by a column of the table (a yes/no mark, or one value that marks the subset) or by
//! record numbers; resolved once into a bit set over the table's rows.

use crate::data::Table;
use crate::error::{EngineError, Result};

/// How the user selects the research subset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResearchSubset {
    /// The records whose value in `column` equals `value`; without a value, the column holds a
    /// yes/no mark: `1`, `true`, `yes`, `y` select a record, `0`, `false`, `no`, `n` and the
    /// empty value do not (case-insensitive; anything else is an error).
    Column {
        /// Column name.
        column: String,
        /// The value that selects a record, if not a yes/no mark.
        value: Option<String>,
    },
    /// The records with these numbers (1 = the first record after the header).
    Rows(Vec<u64>),
}

impl ResearchSubset {
    /// Checks what can be checked without reading the table: record numbers against `rows`
    /// (in range, none twice, at least one) and, for a column, its distinct `values` when they
    /// are known (a yes/no mark each, or `value` among them). Errors name the field relative to
    /// the subset, as [`Subset::resolve`].
    pub fn check(&self, rows: usize, values: Option<&[String]>) -> Result<()> {
        match self {
            ResearchSubset::Rows(numbers) => {
                let mut seen = vec![0u64; rows.div_ceil(64)];
                for (i, &number) in numbers.iter().enumerate() {
                    let r = row_index(i, number, rows)?;
                    if seen[r / 64] & (1 << (r % 64)) != 0 {
                        return Err(EngineError::config(
                            format!("rows[{i}]"),
                            format!("record number {number} is listed twice"),
                        ));
                    }
                    seen[r / 64] |= 1 << (r % 64);
                }
                if numbers.is_empty() {
                    return Err(nothing_selected());
                }
            }
            ResearchSubset::Column { column, value } => {
                let Some(values) = values else {
                    return Ok(());
                };
                let selected = match value {
                    Some(wanted) => values.iter().any(|v| v == wanted),
                    None => {
                        let mut any = false;
                        for v in values {
                            any |= yes_no(v).ok_or_else(|| not_yes_no(column, v, None))?;
                        }
                        any
                    }
                };
                if !selected {
                    return Err(nothing_selected());
                }
            }
        }
        Ok(())
    }
}

/// The 0-based row of record `number` (1-based), listed at `i`.
fn row_index(i: usize, number: u64, rows: usize) -> Result<usize> {
    if number == 0 || number > rows as u64 {
        return Err(EngineError::config(
            format!("rows[{i}]"),
            format!(
                "record number {number} is out of range: expected 1 to {rows} (1 = the first \
                 record after the header)"
            ),
        ));
    }
    Ok((number - 1) as usize)
}

fn nothing_selected() -> EngineError {
    EngineError::config(
        "",
        "the research subset selects no record: expected at least one",
    )
}

fn not_yes_no(column: &str, value: &str, row: Option<usize>) -> EngineError {
    let at = row.map_or(String::new(), |r| format!("row {r} of "));
    EngineError::config(
        "column",
        format!(
            "{at}column '{column}' holds '{value}': expected a yes/no mark (1/0, true/false, \
             yes/no, or empty for no), or give \"value\" to select the records holding one value"
        ),
    )
}

/// A resolved research subset: one bit per row of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subset {
    bits: Vec<u64>,
    rows: usize,
    len: usize,
}

impl Subset {
    /// Resolves `spec` against `table`. Errors name the field relative to the subset (`column`,
    /// `rows[3]`, or the empty path when nothing is selected).
    pub fn resolve(spec: &ResearchSubset, table: &Table) -> Result<Subset> {
        let rows = table.rows();
        let mut subset = Subset {
            bits: vec![0; rows.div_ceil(64)],
            rows,
            len: 0,
        };
        match spec {
            ResearchSubset::Column { column, value } => {
                let c = table.column_index(column).ok_or_else(|| {
                    EngineError::config(
                        "column",
                        format!(
                            "the table has no column '{column}'; its columns are: {}",
                            table.column_names()
                        ),
                    )
                })?;
                let col = table.column(c);
                // Decide per dictionary value once, then look the rows up.
                let mut selects = Vec::with_capacity(col.dict.len());
                for (code, v) in col.dict.values().enumerate() {
                    selects.push(match value {
                        Some(wanted) => v == wanted,
                        None => yes_no(v).ok_or_else(|| {
                            let row = (0..rows).find(|&r| col.codes.get(r) as usize == code);
                            not_yes_no(column, v, row.map(|r| r + 1))
                        })?,
                    });
                }
                for r in 0..rows {
                    if selects[col.codes.get(r) as usize] {
                        subset.insert(r);
                    }
                }
            }
            ResearchSubset::Rows(numbers) => {
                for (i, &number) in numbers.iter().enumerate() {
                    let r = row_index(i, number, rows)?;
                    if subset.contains(r) {
                        return Err(EngineError::config(
                            format!("rows[{i}]"),
                            format!("record number {number} is listed twice"),
                        ));
                    }
                    subset.insert(r);
                }
            }
        }
        if subset.len == 0 {
            return Err(nothing_selected());
        }
        Ok(subset)
    }

    /// The subset of the rows for which `rows` yields true (one item per row of the table).
    pub(crate) fn from_rows(rows: impl ExactSizeIterator<Item = bool>) -> Subset {
        let n = rows.len();
        let mut subset = Subset {
            bits: vec![0; n.div_ceil(64)],
            rows: n,
            len: 0,
        };
        for (r, selected) in rows.enumerate() {
            if selected {
                subset.insert(r);
            }
        }
        subset
    }

    fn insert(&mut self, row: usize) {
        let (w, b) = (row / 64, row % 64);
        if self.bits[w] & (1 << b) == 0 {
            self.bits[w] |= 1 << b;
            self.len += 1;
        }
    }

    /// Whether row `row` (0-based) belongs to the subset.
    #[inline]
    pub fn contains(&self, row: usize) -> bool {
        self.bits[row / 64] & (1 << (row % 64)) != 0
    }

    /// Number of selected rows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if no row is selected.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of rows of the table (selected or not).
    pub fn table_rows(&self) -> usize {
        self.rows
    }

    /// Heap size in bytes.
    pub fn heap_bytes(&self) -> usize {
        self.bits.capacity() * 8
    }
}

/// A yes/no mark: `Some(true)` for 1, true, yes, y; `Some(false)` for 0, false, no, n and the
/// empty value (case-insensitive, surrounding spaces ignored); `None` otherwise.
fn yes_no(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "y" => Some(true),
        "0" | "false" | "no" | "n" | "" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(csv: &str) -> Table {
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let rows: Vec<Vec<String>> = lines
            .map(|l| l.split(',').map(str::to_string).collect())
            .collect();
        Table::from_rows(&header, &rows).unwrap()
    }

    fn selected(s: &Subset) -> Vec<usize> {
        (0..s.table_rows()).filter(|&r| s.contains(r)).collect()
    }

    #[test]
    fn a_yes_no_column_or_a_value_selects_the_records() {
        let t = table("a,in\n1,yes\n2,No\n3,\n4,TRUE\n5,1\n");
        let s = Subset::resolve(
            &ResearchSubset::Column {
                column: "in".into(),
                value: None,
            },
            &t,
        )
        .unwrap();
        assert_eq!(selected(&s), [0, 3, 4]);
        assert_eq!(s.len(), 3);
        let s = Subset::resolve(
            &ResearchSubset::Column {
                column: "a".into(),
                value: Some("2".into()),
            },
            &t,
        )
        .unwrap();
        assert_eq!(selected(&s), [1]);
    }

    #[test]
    fn errors_name_the_field_the_value_and_what_was_expected() {
        let t = table("a,in\n1,yes\n2,maybe\n");
        let col = |c: &str, v: Option<&str>| ResearchSubset::Column {
            column: c.into(),
            value: v.map(Into::into),
        };
        let (field, message) = Subset::resolve(&col("in", None), &t)
            .unwrap_err()
            .config_error()
            .map(|(f, m)| (f.to_string(), m))
            .unwrap();
        assert_eq!(field, "column");
        assert!(
            message.contains("row 2") && message.contains("'maybe'"),
            "{message}"
        );
        let e = Subset::resolve(&col("nope", None), &t).unwrap_err();
        assert_eq!(e.config_error().unwrap().0, "column");
        let e = Subset::resolve(&col("a", Some("7")), &t).unwrap_err();
        assert!(e.config_error().unwrap().1.contains("selects no record"));
        let e = Subset::resolve(&ResearchSubset::Rows(vec![1, 3]), &t).unwrap_err();
        let (field, message) = e.config_error().unwrap();
        assert_eq!(field, "rows[1]");
        assert!(message.contains("1 to 2"), "{message}");
        let e = Subset::resolve(&ResearchSubset::Rows(vec![2, 2]), &t).unwrap_err();
        assert_eq!(e.config_error().unwrap().0, "rows[1]");
        let e = Subset::resolve(&ResearchSubset::Rows(vec![0]), &t).unwrap_err();
        assert_eq!(e.config_error().unwrap().0, "rows[0]");
        let s = Subset::resolve(&ResearchSubset::Rows(vec![2]), &t).unwrap();
        assert_eq!(selected(&s), [1]);
    }

    #[test]
    fn checks_without_the_table_agree_with_resolving() {
        let values = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let col = |v: Option<&str>| ResearchSubset::Column {
            column: "in".into(),
            value: v.map(Into::into),
        };
        assert!(col(None).check(5, Some(&values(&["yes", "", "0"]))).is_ok());
        let e = col(None)
            .check(5, Some(&values(&["yes", "maybe"])))
            .unwrap_err();
        let (field, message) = e.config_error().unwrap();
        assert_eq!(field, "column");
        assert!(
            message.contains("'maybe'") && !message.contains("row"),
            "{message}"
        );
        let e = col(None).check(5, Some(&values(&["no", "0"]))).unwrap_err();
        assert!(e.config_error().unwrap().1.contains("selects no record"));
        let e = col(Some("x"))
            .check(5, Some(&values(&["y", "z"])))
            .unwrap_err();
        assert!(e.config_error().unwrap().1.contains("selects no record"));
        assert!(col(Some("x")).check(5, None).is_ok());
        let rows = |r: &[u64]| ResearchSubset::Rows(r.to_vec());
        let field = |r: &[u64]| {
            let e = rows(r).check(5, None).unwrap_err();
            e.config_error().unwrap().0.to_string()
        };
        assert!(rows(&[1, 5]).check(5, None).is_ok());
        assert_eq!(field(&[1, 6]), "rows[1]");
        assert_eq!(field(&[3, 3]), "rows[1]");
        assert_eq!(field(&[]), "");
    }
}
