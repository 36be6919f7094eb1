//! Microaggregation (`docs/definitions.md` §3.7): a quasi-identifier without a hierarchy whose
//! values are replaced, within each published class of the output, by one aggregate of the
//! class's values — arithmetic or geometric mean, median, mode, the interval [min, max] or the
//! set of values. The classes are those of the generalized quasi-identifiers; the aggregated
//! attribute is constant within each, so it never splits a class and the privacy models are
//! judged exactly as without it.
//!
//! Values are numbers, or dates when a date format is given (means of dates are dates, in the
//! same format). Missing values are empty cells: `ignore` aggregates the others (empty if none
//! is left); `keep` makes the means, the median and the interval missing when a class has a
//! missing value, and counts it as a value (`NULL`) in the mode and the set.

use std::cmp::Ordering;

use crate::calendar::{DateFormat, DateTime, civil_from_days, days_from_civil};
use crate::data::Column;
use crate::error::{EngineError, Result};

/// The aggregate written for a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggregateFunction {
    /// Arithmetic mean (numbers, dates).
    ArithmeticMean,
    /// Geometric mean (positive numbers).
    GeometricMean,
    /// The middle value in order (the lower one of two): a value of the class.
    Median,
    /// The most frequent value (ties: the first in order).
    Mode,
    /// `[min, max]`, written with the original texts.
    Interval,
    /// `{a, b, …}`: the distinct values in order, at most [`SET_MAX_LISTED`] of them and then
    /// how many more there are.
    Set,
}

crate::names::enum_names! {
    AggregateFunction {
        ArithmeticMean => "arithmetic_mean",
        GeometricMean => "geometric_mean",
        Median => "median",
        Mode => "mode",
        Interval => "interval",
        Set => "set",
    }
    /// Stable name (`arithmetic_mean`, `geometric_mean`, `median`, `mode`, `interval`, `set`).
    pub fn name;
    /// Parses a name produced by [`AggregateFunction::name`].
    pub fn parse;
}

impl AggregateFunction {
    /// True if the function needs ordered values (numbers or dates).
    fn needs_order(self) -> bool {
        !matches!(self, AggregateFunction::Mode | AggregateFunction::Set)
    }
}

/// What happens to missing (empty) values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MissingValues {
    /// Aggregate the other values (the default).
    #[default]
    Ignore,
    /// A missing value makes means, median and interval missing; mode and set count it.
    Keep,
}

crate::names::enum_names! {
    MissingValues {
        Ignore => "ignore",
        Keep => "keep",
    }
    /// The name in specifications: `ignore` or `keep`.
    pub fn name;
    /// Parses a name produced by [`MissingValues::name`].
    pub fn parse;
}

/// A microaggregated attribute.
#[derive(Debug, Clone, PartialEq)]
pub struct Microaggregation {
    /// Column name.
    pub column: String,
    /// The aggregate.
    pub function: AggregateFunction,
    /// Missing values.
    pub missing: MissingValues,
    /// The values are dates in this format (e.g. `dd.MM.yyyy`); numbers otherwise (mode and set
    /// also take any text).
    pub date_format: Option<String>,
}

/// How a column's values are ordered and averaged.
#[derive(Debug, Clone)]
enum Kind {
    /// Numbers, with the most decimals a value has.
    Number { decimals: usize },
    /// Dates (seconds since 1970-01-01) in a format.
    Date(DateFormat),
    /// Text (mode and set only), ordered by text.
    Text,
}

/// Shown for a missing value in a mode or set.
const MISSING: &str = "NULL";

/// Values a `set` aggregate lists: a class with more distinct values is written as its first
/// `SET_MAX_LISTED` values in order followed by `… N more` (`{1, 2, …, 10, … 19990 more}`), so a
/// cell holds at most this many of the data's values (docs/definitions.md §3.7).
pub const SET_MAX_LISTED: usize = 10;

/// A microaggregated attribute compiled against its column.
#[derive(Debug, Clone)]
pub struct PreparedAggregate {
    /// Column name.
    pub column: String,
    function: AggregateFunction,
    missing: MissingValues,
    kind: Kind,
    /// Numeric value (seconds for dates) of every dictionary code; `None` for missing values
    /// and text.
    values: Vec<Option<f64>>,
    /// Whether each code is the missing value.
    is_missing: Vec<bool>,
    /// Smallest and largest value of the column (for the post-hoc range share).
    range: Option<(f64, f64)>,
    /// Distinct non-missing values of the column.
    distinct: usize,
}

impl PreparedAggregate {
    /// Compiles `m` against `column`; errors name `field` (e.g. `attributes.age.microaggregation`)
    /// and the first value that does not fit.
    pub fn prepare(
        m: &Microaggregation,
        column: &Column,
        field: &str,
    ) -> Result<PreparedAggregate> {
        let mut kind = match &m.date_format {
            Some(f) => Kind::Date(
                DateFormat::parse(f)
                    .map_err(|e| EngineError::config(format!("{field}.date_format"), e))?,
            ),
            None if m.function.needs_order() => Kind::Number { decimals: 0 },
            None => Kind::Text,
        };
        let mut values = Vec::with_capacity(column.dict.len());
        let mut is_missing = Vec::with_capacity(column.dict.len());
        let mut range: Option<(f64, f64)> = None;
        let mut numeric = true;
        let reader = ValueReader { m, column, field };
        for text in column.dict.values() {
            let t = text.trim();
            let missing = t.is_empty();
            is_missing.push(missing);
            if missing {
                values.push(None);
                continue;
            }
            let v = reader.value(&mut kind, text, &mut numeric)?;
            if let Some(v) = v {
                range = Some(range.map_or((v, v), |(a, b)| (a.min(v), b.max(v))));
            }
            values.push(v);
        }
        if matches!(kind, Kind::Date(_)) && m.function == AggregateFunction::GeometricMean {
            return Err(EngineError::config(
                format!("{field}.function"),
                "geometric_mean needs positive numbers, not dates",
            ));
        }
        // Text columns whose values are all numbers are ordered numerically.
        if matches!(kind, Kind::Text) && numeric {
            kind = Kind::Number { decimals: 0 };
        }
        if matches!(kind, Kind::Text) {
            values.iter_mut().for_each(|v| *v = None);
            range = None;
        }
        let distinct = is_missing.iter().filter(|m| !**m).count();
        Ok(PreparedAggregate {
            column: m.column.clone(),
            function: m.function,
            missing: m.missing,
            kind,
            values,
            is_missing,
            range,
            distinct,
        })
    }

    /// Order of two codes: by value (numbers, dates) or text; missing values last.
    fn cmp_codes(&self, a: u32, b: u32, column: &Column) -> Ordering {
        let (a, b) = (a as usize, b as usize);
        match (self.is_missing[a], self.is_missing[b]) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            _ => {}
        }
        match (self.values[a], self.values[b]) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            _ => column.dict.value(a as u32).cmp(column.dict.value(b as u32)),
        }
    }

    /// The aggregate of a class whose values are `codes` with frequencies `freqs`.
    pub fn aggregate(&self, codes: &[u32], freqs: &[u32], column: &Column) -> String {
        let has_missing = codes.iter().any(|&c| self.is_missing[c as usize]);
        let mut present: Vec<(u32, u32)> = codes
            .iter()
            .zip(freqs)
            .filter(|(c, _)| !self.is_missing[**c as usize])
            .map(|(&c, &f)| (c, f))
            .collect();
        present.sort_by(|a, b| self.cmp_codes(a.0, b.0, column));
        let keep = self.missing == MissingValues::Keep && has_missing;
        match self.function {
            AggregateFunction::Mode | AggregateFunction::Set => {
                let mut all = present.clone();
                if keep {
                    let missing: u32 = codes
                        .iter()
                        .zip(freqs)
                        .filter(|(c, _)| self.is_missing[**c as usize])
                        .map(|(_, f)| *f)
                        .sum();
                    all.push((u32::MAX, missing));
                }
                if self.function == AggregateFunction::Mode {
                    mode(&all, column)
                } else {
                    set(&all, column)
                }
            }
            _ if keep || present.is_empty() => String::new(),
            AggregateFunction::Interval => {
                let lo = column.dict.value(present[0].0);
                let hi = column.dict.value(present[present.len() - 1].0);
                format!("[{lo}, {hi}]")
            }
            AggregateFunction::Median => median(&present, column),
            AggregateFunction::ArithmeticMean | AggregateFunction::GeometricMean => {
                self.mean(&present)
            }
        }
    }

    /// The arithmetic or geometric mean of the (non-missing, non-empty) `present` values, in
    /// the column's format.
    fn mean(&self, present: &[(u32, u32)]) -> String {
        let geometric = self.function == AggregateFunction::GeometricMean;
        let (mut sum, mut weight) = (0.0f64, 0.0f64);
        for &(c, f) in present {
            let v = self.values[c as usize].unwrap_or(0.0);
            sum += f as f64 * if geometric { v.ln() } else { v };
            weight += f as f64;
        }
        let mean = sum / weight;
        let mean = if geometric { mean.exp() } else { mean };
        match &self.kind {
            Kind::Date(f) => f.format(&from_seconds(mean)),
            Kind::Number { decimals } => format_number(mean, decimals + 2),
            Kind::Text => String::new(),
        }
    }

    /// The share of the column's range the class's values span, in [0, 1] (the post-hoc
    /// information loss of the aggregate): (max − min)/(column max − column min) for numbers
    /// and dates, (distinct values − 1)/(column's distinct values − 1) for text. A class with a
    /// missing value kept counts as 1.
    pub fn range_share(&self, codes: &[u32]) -> f64 {
        let has_missing = codes.iter().any(|&c| self.is_missing[c as usize]);
        if has_missing && self.missing == MissingValues::Keep {
            return 1.0;
        }
        let present: Vec<u32> = codes
            .iter()
            .copied()
            .filter(|&c| !self.is_missing[c as usize])
            .collect();
        if present.is_empty() {
            return 1.0;
        }
        match self.range {
            Some((lo, hi)) if hi > lo => {
                let vals = present.iter().filter_map(|&c| self.values[c as usize]);
                let (a, b) = vals.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                    (a.min(v), b.max(v))
                });
                ((b - a) / (hi - lo)).clamp(0.0, 1.0)
            }
            Some(_) => 0.0,
            None if self.distinct > 1 => {
                (present.len() as f64 - 1.0) / (self.distinct as f64 - 1.0)
            }
            None => 0.0,
        }
    }
}

/// Reads the values of a column for [`PreparedAggregate::prepare`].
struct ValueReader<'a> {
    m: &'a Microaggregation,
    column: &'a Column,
    field: &'a str,
}

impl ValueReader<'_> {
    /// The value of the non-missing `text` (seconds for dates; `None` for text that is not a
    /// number): widens a number kind's decimals and clears `numeric` when a text is not a
    /// number. Errors name the value that is not a date or number as `kind` needs, or not
    /// positive for a geometric mean.
    fn value(&self, kind: &mut Kind, text: &str, numeric: &mut bool) -> Result<Option<f64>> {
        let t = text.trim();
        let v = match kind {
            Kind::Date(f) => match f.parse_date(t) {
                Some(dt) => Some(seconds(&dt)),
                None => {
                    return Err(self.error(
                        text,
                        format!(
                            "is not a date in the format '{}'",
                            self.m.date_format.as_deref().unwrap_or_default()
                        ),
                    ));
                }
            },
            Kind::Number { decimals } => match t.parse::<f64>().ok().filter(|v| v.is_finite()) {
                Some(v) => {
                    let d = t.split_once('.').map_or(0, |(_, f)| f.len());
                    *decimals = (*decimals).max(d);
                    Some(v)
                }
                None => {
                    return Err(self.error(
                        text,
                        format!(
                            "is not a number ({} needs numbers, or dates with a date_format)",
                            self.m.function.name()
                        ),
                    ));
                }
            },
            Kind::Text => {
                let v = t.parse::<f64>().ok().filter(|v| v.is_finite());
                *numeric &= v.is_some();
                v
            }
        };
        if let Some(v) = v
            && self.m.function == AggregateFunction::GeometricMean
            && v <= 0.0
        {
            return Err(self.error(
                text,
                "is not positive (geometric_mean needs positive numbers)".to_string(),
            ));
        }
        Ok(v)
    }

    /// The error naming the value `text` of the column, which `what`.
    fn error(&self, text: &str, what: String) -> EngineError {
        EngineError::config(
            self.field,
            format!("value '{text}' of column '{}' {what}", self.column.name),
        )
    }
}

/// The mode of `all` (sorted (code, records); `u32::MAX`: missing): the first of the most
/// frequent, in order.
fn mode(all: &[(u32, u32)], column: &Column) -> String {
    let best = all
        .iter()
        .fold(None::<(u32, u32)>, |best, &(c, f)| match best {
            Some((_, bf)) if bf >= f => best,
            _ => Some((c, f)),
        });
    best.map(|(c, _)| label(c, column)).unwrap_or_default()
}

/// The set of `all` (sorted (code, records); `u32::MAX`: missing): at most [`SET_MAX_LISTED`]
/// values, then how many more there are, so the cell stays bounded whatever the class's size
/// (§3.7).
fn set(all: &[(u32, u32)], column: &Column) -> String {
    if all.is_empty() {
        return String::new();
    }
    let mut items: Vec<String> = all
        .iter()
        .take(SET_MAX_LISTED)
        .map(|&(c, _)| label(c, column))
        .collect();
    if all.len() > SET_MAX_LISTED {
        items.push(format!("… {} more", all.len() - SET_MAX_LISTED));
    }
    format!("{{{}}}", items.join(", "))
}

/// The text of code `c` in a mode or set ([`MISSING`] for `u32::MAX`).
fn label(c: u32, column: &Column) -> String {
    if c == u32::MAX {
        MISSING.to_string()
    } else {
        column.dict.value(c).to_string()
    }
}

/// The lower middle value of the (sorted, non-empty) `present` values: the ⌈total/2⌉-th in
/// order, trimmed.
fn median(present: &[(u32, u32)], column: &Column) -> String {
    let total: u64 = present.iter().map(|p| p.1 as u64).sum();
    let target = total.div_ceil(2);
    let mut seen = 0u64;
    let mut median = present[0].0;
    for &(c, f) in present {
        seen += f as u64;
        if seen >= target {
            median = c;
            break;
        }
    }
    column.dict.value(median).trim().to_string()
}

/// Seconds since 1970-01-01 00:00 of a date/time.
fn seconds(dt: &DateTime) -> f64 {
    days_from_civil(dt.date.year, dt.date.month, dt.date.day) as f64 * 86_400.0 + dt.seconds as f64
}

/// The date/time of (rounded) seconds since 1970-01-01.
fn from_seconds(s: f64) -> DateTime {
    let s = s.round() as i64;
    let days = s.div_euclid(86_400);
    DateTime {
        date: civil_from_days(days),
        seconds: s.rem_euclid(86_400) as u32,
    }
}

/// `v` with at most `decimals` decimals, trailing zeros removed.
fn format_number(v: f64, decimals: usize) -> String {
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        let t = text.trim_end_matches('0').trim_end_matches('.');
        if t == "-0" {
            "0".to_string()
        } else {
            t.to_string()
        }
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Table;

    fn column(values: &[&str]) -> Table {
        let rows: Vec<Vec<String>> = values.iter().map(|v| vec![v.to_string()]).collect();
        Table::from_rows(&["x"], &rows).unwrap()
    }

    fn run(
        values: &[&str],
        f: AggregateFunction,
        missing: MissingValues,
        date: Option<&str>,
    ) -> String {
        let t = column(values);
        let c = t.column(0);
        let m = Microaggregation {
            column: "x".into(),
            function: f,
            missing,
            date_format: date.map(str::to_string),
        };
        let p = PreparedAggregate::prepare(&m, c, "f").unwrap();
        let mut counts = vec![0u32; c.dict.len()];
        for code in c.codes.iter() {
            counts[code as usize] += 1;
        }
        let codes: Vec<u32> = (0..c.dict.len() as u32).collect();
        p.aggregate(&codes, &counts, c)
    }

    #[test]
    fn numbers() {
        use AggregateFunction::*;
        let v = ["30", "40", "40", "11"];
        let ig = MissingValues::Ignore;
        assert_eq!(run(&v, ArithmeticMean, ig, None), "30.25");
        assert_eq!(run(&["2", "8"], GeometricMean, ig, None), "4");
        assert_eq!(run(&v, Median, ig, None), "30");
        assert_eq!(run(&["1", "2", "3"], Median, ig, None), "2");
        assert_eq!(run(&v, Mode, ig, None), "40");
        assert_eq!(run(&v, Interval, ig, None), "[11, 40]");
        assert_eq!(run(&v, Set, ig, None), "{11, 30, 40}");
        assert_eq!(run(&["1.5", "2"], ArithmeticMean, ig, None), "1.75");
        assert_eq!(run(&["1", "2", "2"], ArithmeticMean, ig, None), "1.67");
    }

    /// Texts keep their leading and trailing blanks in mode, set and interval (the original
    /// texts, §3.7); numbers are still read through the blanks.
    #[test]
    fn original_texts_keep_their_blanks() {
        use AggregateFunction::*;
        let ig = MissingValues::Ignore;
        let v = [" a", "b ", "b ", " c "];
        assert_eq!(run(&v, Mode, ig, None), "b ");
        assert_eq!(run(&v, Set, ig, None), "{ a,  c , b }");
        assert_eq!(run(&[" 7", "12 "], Interval, ig, None), "[ 7, 12 ]");
        assert_eq!(run(&["a", " a"], Set, ig, None), "{ a, a}");
    }

    #[test]
    fn a_large_set_lists_its_first_values_and_counts_the_rest() {
        let v: Vec<String> = (0..20_000).rev().map(|i| i.to_string()).collect();
        let v: Vec<&str> = v.iter().map(String::as_str).collect();
        let ig = MissingValues::Ignore;
        let set = run(&v, AggregateFunction::Set, ig, None);
        assert_eq!(set, "{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, … 19990 more}");
        // Exactly SET_MAX_LISTED values: all listed; a kept missing value counts as one more.
        let ten: Vec<String> = (0..10).map(|i| i.to_string()).collect();
        let mut ten: Vec<&str> = ten.iter().map(String::as_str).collect();
        assert_eq!(
            run(&ten, AggregateFunction::Set, ig, None),
            "{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}"
        );
        ten.push("");
        assert_eq!(
            run(&ten, AggregateFunction::Set, MissingValues::Keep, None),
            "{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, … 1 more}"
        );
    }

    #[test]
    fn missing_values() {
        use AggregateFunction::*;
        let v = ["30", "", "40"];
        assert_eq!(run(&v, ArithmeticMean, MissingValues::Ignore, None), "35");
        assert_eq!(run(&v, ArithmeticMean, MissingValues::Keep, None), "");
        assert_eq!(run(&v, Set, MissingValues::Keep, None), "{30, 40, NULL}");
        assert_eq!(run(&v, Set, MissingValues::Ignore, None), "{30, 40}");
        assert_eq!(run(&["", ""], Median, MissingValues::Ignore, None), "");
    }

    #[test]
    fn dates() {
        use AggregateFunction::*;
        let v = ["01.01.2020", "03.01.2020", "31.12.2019"];
        let f = Some("dd.MM.yyyy");
        let ig = MissingValues::Ignore;
        assert_eq!(run(&v, ArithmeticMean, ig, f), "01.01.2020");
        assert_eq!(run(&v, Median, ig, f), "01.01.2020");
        assert_eq!(run(&v, Interval, ig, f), "[31.12.2019, 03.01.2020]");
        assert_eq!(run(&v, Set, ig, f), "{31.12.2019, 01.01.2020, 03.01.2020}");
    }

    #[test]
    fn errors_name_the_value() {
        let t = column(&["1", "x"]);
        let m = Microaggregation {
            column: "x".into(),
            function: AggregateFunction::ArithmeticMean,
            missing: MissingValues::Ignore,
            date_format: None,
        };
        let e = PreparedAggregate::prepare(&m, t.column(0), "attributes.x.microaggregation")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("'x'") && e.contains("attributes.x.microaggregation"),
            "{e}"
        );
        let t = column(&["0", "2"]);
        let m = Microaggregation {
            function: AggregateFunction::GeometricMean,
            ..m
        };
        let e = PreparedAggregate::prepare(&m, t.column(0), "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("positive"), "{e}");
        // Text works for mode and set.
        assert_eq!(
            run(
                &["b", "a", "b"],
                AggregateFunction::Mode,
                MissingValues::Ignore,
                None
            ),
            "b"
        );
        assert_eq!(
            run(
                &["b", "a", "b"],
                AggregateFunction::Set,
                MissingValues::Ignore,
                None
            ),
            "{a, b}"
        );
    }

    #[test]
    fn range_shares() {
        let t = column(&["0", "10", "5", "100"]);
        let m = Microaggregation {
            column: "x".into(),
            function: AggregateFunction::ArithmeticMean,
            missing: MissingValues::Ignore,
            date_format: None,
        };
        let p = PreparedAggregate::prepare(&m, t.column(0), "f").unwrap();
        let code = |v: &str| t.column(0).dict.code(v).unwrap();
        assert_eq!(p.range_share(&[code("0"), code("10")]), 0.1);
        assert_eq!(p.range_share(&[code("5")]), 0.0);
    }
}
