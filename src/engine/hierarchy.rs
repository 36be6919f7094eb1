//! Generalization hierarchies: the ARX CSV format (one row per original value, column j = level j,
//! no header), validation (equal row lengths, unique leaves, monotonicity, coverage of the data)
//! and the encoded form used by the check (`level × input code → generalized code`).

use std::collections::HashMap;
use std::io::Read;

use super::data::{Column, csv_error, csv_reader, field_str};
use super::error::{EngineError, Result};

/// A hierarchy as a table of strings: `rows[r][l]` is the level-`l` label of leaf `rows[r][0]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Hierarchy {
    rows: Vec<Vec<String>>,
    /// Optional analytic domain shares per row and level (builder hierarchies, REFERENCE §6.1).
    /// When absent, shares are materialized from the table: rows under a label / all rows.
    shares: Option<Vec<Vec<f64>>>,
}

impl Hierarchy {
    /// Parses an ARX hierarchy CSV (no header, `"` quoting allowed). `column` names the attribute
    /// in error messages.
    pub fn read_csv<R: Read>(input: R, delimiter: u8, column: &str) -> Result<Hierarchy> {
        let source = format!("hierarchy of column '{column}'");
        let mut reader = csv_reader(input, delimiter);
        let mut record = csv::ByteRecord::new();
        let mut rows = Vec::new();
        let mut n: u64 = 0;
        while reader
            .read_byte_record(&mut record)
            .map_err(|e| csv_error(&source, e))?
        {
            n += 1;
            let mut row = Vec::with_capacity(record.len());
            for (i, raw) in record.iter().enumerate() {
                let raw = if n == 1 && i == 0 {
                    raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw)
                } else {
                    raw
                };
                row.push(field_str(&source, n, i, raw)?.to_string());
            }
            rows.push(row);
        }
        Hierarchy::from_rows(rows, column)
    }

    /// Builds a hierarchy from rows, checking shape, unique leaves and monotonicity.
    pub fn from_rows(rows: Vec<Vec<String>>, column: &str) -> Result<Hierarchy> {
        let h = Hierarchy { rows, shares: None };
        h.validate(column)?;
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
                format!("hierarchy of column '{column}'"),
                "domain shares must have one value per row and level",
            ));
        }
        let h = Hierarchy {
            rows,
            shares: Some(shares),
        };
        h.validate(column)?;
        Ok(h)
    }

    /// A single-level-plus-suppression hierarchy (`value → *`) for every value of `column`.
    pub fn suppression_only(column: &Column) -> Hierarchy {
        let rows = column
            .dict
            .values()
            .map(|v| vec![v.to_string(), "*".to_string()])
            .collect();
        Hierarchy { rows, shares: None }
    }

    fn validate(&self, column: &str) -> Result<()> {
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
        // Unique leaves: an identical duplicate row is harmless, a conflicting one is an error.
        let mut leaves: HashMap<&str, usize> = HashMap::with_capacity(self.rows.len());
        for (r, row) in self.rows.iter().enumerate() {
            if let Some(&prev) = leaves.get(row[0].as_str()) {
                if self.rows[prev] != *row {
                    return Err(EngineError::HierarchyDuplicateValue {
                        column: column.to_string(),
                        value: row[0].clone(),
                        first_row: prev + 1,
                        second_row: r + 1,
                    });
                }
            } else {
                leaves.insert(&row[0], r);
            }
        }
        // Monotone: a label of level l has exactly one parent at level l+1.
        for level in 0..height.saturating_sub(1) {
            let mut parent: HashMap<&str, &str> = HashMap::new();
            for row in &self.rows {
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
        Ok(())
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
        let mut w = csv::WriterBuilder::new()
            .delimiter(delimiter)
            .from_writer(Vec::new());
        for row in &self.rows {
            // Writing to a Vec cannot fail.
            let _ = w.write_record(row);
        }
        String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
    }

    /// Encodes the hierarchy against the column's dictionary. Fails if data values are missing.
    pub fn encode(&self, column: &Column) -> Result<EncodedHierarchy> {
        let height = self.height();
        let mut row_of: HashMap<&str, usize> = HashMap::with_capacity(self.rows.len());
        for (r, row) in self.rows.iter().enumerate() {
            row_of.entry(row[0].as_str()).or_insert(r);
        }
        // Every data value needs a row.
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
        if total_missing > 0 {
            return Err(EngineError::HierarchyMissingValues {
                column: column.name.clone(),
                missing,
                total_missing,
            });
        }
        let domain_size = row_of.len();
        let mut map = Vec::with_capacity(height);
        let mut labels = Vec::with_capacity(height);
        let mut share = Vec::with_capacity(height);
        let mut distinct = Vec::with_capacity(height);
        let mut leaves = Vec::with_capacity(height);
        for level in 0..height {
            // Rows of the full table under each label (distinct leaves only).
            let mut under: HashMap<&str, u32> = HashMap::new();
            for &r in row_of.values() {
                *under.entry(self.rows[r][level].as_str()).or_insert(0) += 1;
            }
            let mut codes: HashMap<&str, u32> = HashMap::new();
            let mut level_labels: Vec<Box<str>> = Vec::new();
            let mut level_share: Vec<f64> = Vec::new();
            let mut level_leaves: Vec<u32> = Vec::new();
            let mut level_map = Vec::with_capacity(data_rows.len());
            for &r in &data_rows {
                let label = self.rows[r][level].as_str();
                let code = *codes.entry(label).or_insert_with(|| {
                    level_labels.push(label.into());
                    let s = match &self.shares {
                        Some(s) => s[r][level],
                        None => under[label] as f64 / domain_size as f64,
                    };
                    level_share.push(s);
                    level_leaves.push(under[label]);
                    (level_labels.len() - 1) as u32
                });
                level_map.push(code);
            }
            map.push(level_map);
            distinct.push(level_labels.len());
            if level == 0 {
                // Level-0 labels are the column's dictionary values: not stored twice.
                level_labels = Vec::new();
            }
            labels.push(level_labels);
            share.push(level_share);
            leaves.push(level_leaves);
        }
        // up[from][to][code at `from`] = code at `to` (for to ≥ from), via a representative leaf.
        let mut up = Vec::with_capacity(height);
        for from in 0..height {
            let mut rep = vec![0u32; distinct[from]];
            for (leaf, &c) in map[from].iter().enumerate() {
                rep[c as usize] = leaf as u32;
            }
            let tables: Vec<Vec<u32>> = (0..height)
                .map(|to| {
                    // From level 0 the table is `map[to]` itself (level-0 codes are data codes).
                    if to < from || from == 0 {
                        Vec::new()
                    } else {
                        rep.iter().map(|&leaf| map[to][leaf as usize]).collect()
                    }
                })
                .collect();
            up.push(tables);
        }
        Ok(EncodedHierarchy {
            map,
            distinct,
            up,
            labels,
            share,
            leaves,
            domain_size,
        })
    }
}

/// A table from the codes of one level of an [`EncodedHierarchy`] to the codes of a higher level,
/// stored with the narrowest width that holds the target codes.
#[derive(Debug, Clone, Copy)]
pub enum CodeMap<'a> {
    /// Same level: codes are unchanged.
    Identity,
    /// Target codes below 2^8.
    U8(&'a [u8]),
    /// Target codes below 2^16.
    U16(&'a [u16]),
    /// Anything larger.
    U32(&'a [u32]),
}

impl CodeMap<'_> {
    /// The target code of `code`.
    #[inline]
    pub fn get(self, code: u32) -> u32 {
        match self {
            CodeMap::Identity => code,
            CodeMap::U8(t) => t[code as usize] as u32,
            CodeMap::U16(t) => t[code as usize] as u32,
            CodeMap::U32(t) => t[code as usize],
        }
    }
}

/// A hierarchy restricted to the values of one column, ready for the check.
#[derive(Debug, Clone)]
pub struct EncodedHierarchy {
    /// `map[level][input code]` = code of the generalized value at `level` (level 0: identity
    /// up to renumbering).
    pub map: Vec<Vec<u32>>,
    /// Distinct generalized values occurring in the data, per level.
    pub distinct: Vec<usize>,
    /// `up[from][to][code]` = code at level `to` of the level-`from` value `code` (empty for
    /// `to < from` and for `from = 0`, where `map[to]` is the table). Monotonicity makes this well defined; used to regroup cached results.
    pub up: Vec<Vec<Vec<u32>>>,
    /// `labels[level][code]` = text of a generalized value for levels ≥ 1; `labels[0]` is empty
    /// (level-0 codes are the column's dictionary codes: use [`EncodedHierarchy::label`]).
    pub labels: Vec<Vec<Box<str>>>,
    /// `share[level][code]` = domain share of a generalized value: rows of the hierarchy table under
    /// it divided by all rows (or the builder's analytic share).
    pub share: Vec<Vec<f64>>,
    /// `leaves[level][code]` = distinct leaves of the hierarchy table under a generalized value.
    pub leaves: Vec<Vec<u32>>,
    /// Number of distinct leaves of the hierarchy table (the attribute's domain size).
    pub domain_size: usize,
}

impl EncodedHierarchy {
    /// Number of levels including level 0.
    pub fn height(&self) -> usize {
        self.map.len()
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
            &self.labels[level][code as usize]
        }
    }

    /// The level-`level` code of the column's dictionary code `value`.
    #[inline]
    pub fn code(&self, level: usize, value: u32) -> u32 {
        self.map[level][value as usize]
    }

    /// The table from level-`from` codes to level-`to` codes (`from ≤ to`; level-0 codes are the
    /// column's dictionary codes). Monotonicity makes it well defined.
    pub fn generalize(&self, from: usize, to: usize) -> CodeMap<'_> {
        debug_assert!(from <= to && to < self.height());
        if from == to {
            CodeMap::Identity
        } else if from == 0 {
            CodeMap::U32(&self.map[to])
        } else {
            CodeMap::U32(&self.up[from][to])
        }
    }

    /// Domain share of the generalized value `code` at `level`: hierarchy rows under it divided
    /// by all rows, or the builder's analytic share.
    #[inline]
    pub fn share(&self, level: usize, code: u32) -> f64 {
        self.share[level][code as usize]
    }

    /// Distinct leaves of the hierarchy table under the generalized value `code` at `level`.
    #[inline]
    pub fn leaves(&self, level: usize, code: u32) -> u32 {
        self.leaves[level][code as usize]
    }

    /// Approximate heap size in bytes.
    pub fn heap_bytes(&self) -> usize {
        self.map.iter().map(|m| m.len() * 4).sum::<usize>()
            + self
                .up
                .iter()
                .flat_map(|u| u.iter())
                .map(|t| t.len() * 4)
                .sum::<usize>()
            + self
                .labels
                .iter()
                .flat_map(|l| l.iter())
                .map(|s| s.len() + 16)
                .sum::<usize>()
            + self.share.iter().map(|s| s.len() * 8).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::data::{CsvOptions, Table};

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
        assert_eq!(e.map[1], vec![0, 1]); // c → z, a → x;y
        assert_eq!(&*e.labels[1][1], "x;y");
        let col = column(&["c", "a"]);
        assert_eq!(e.label(0, 1, &col), "a");
        assert_eq!(e.label(1, 1, &col), "x;y");
        assert_eq!(e.distinct, vec![2, 2, 1]);
        assert!((e.share[1][1] - 2.0 / 3.0).abs() < 1e-12);
        assert!((e.share[2][0] - 1.0).abs() < 1e-12);
        assert_eq!(e.distinct(2), 1);
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
    fn conflicting_duplicate_leaves_are_rejected() {
        let err = Hierarchy::from_rows(rows("a;x\nb;x\na;y"), "c").unwrap_err();
        assert!(matches!(
            err,
            EngineError::HierarchyDuplicateValue {
                first_row: 1,
                second_row: 3,
                ..
            }
        ));
        assert!(Hierarchy::from_rows(rows("a;x\na;x"), "c").is_ok());
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
