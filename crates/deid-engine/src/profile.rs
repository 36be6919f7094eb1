//! Column profiles: type detection (integer, decimal, date with its format, fixed-length code or
//! free text) with a suggested hierarchy specification. The one [`ColumnProfile`] type is
//! printed by `deid profile` and answered (and stored) by the service; [`streaming`] computes
//! the profiles of a whole CSV table in one pass (what the service does while an upload streams
//! in) and reads the distinct values of one column.
//!
//! Rules, applied to the distinct values after setting aside common missing-value markers
//! (empty, `?`, `NA`, `N/A`, `n/a`, `NULL`, `null`, `None`, `-`, `.`):
//! 1. **date** if every value parses with one of the [`DATE_FORMATS`] (first match wins, so
//!    `MM/dd/yyyy` is preferred over `dd/MM/yyyy` when both fit; `yyyyMMdd` only with years
//!    1800–2199) → date chain month → quarter → year → decade (preceded by day for date-times);
//! 2. **code** if every value is a string of ASCII digits of the same length L ≥ 2 and either
//!    L ≥ 5 or some value has a leading zero (ZIP codes, not years) → masking from the right;
//! 3. **integer** / **decimal** if every value is a number (decimal as soon as one value has a
//!    fraction or exponent) → regular intervals of a "nice" width (1, 2 or 5 × 10^k, at least
//!    2 units of the finest decimal place) giving at most 16 intervals over the range, then
//!    levels doubling the width (5, 10, 20, …; ×4, ×8, … where doubling would merge no groups
//!    of the data) while more than one group remains (at most 6 levels), then `*`;
//! 4. otherwise **text** → order-based grouping (lexicographic, groups of ⌈√d⌉) for 3 to 20
//!    distinct values, suppression otherwise.
//!
//! Columns with at most two distinct (non-missing) values, or a single number, get suppression.
//! Markers found are listed in the profile and, for numbers and dates, in the suggestion's
//! `missing` list.

pub mod streaming;

use std::collections::HashSet;

use serde::{Deserialize, Deserializer, Serialize};

use crate::calendar::DateFormat;
use crate::data::Column;
use crate::hierarchy::builder::{
    DateGranularity, DateSpec, GroupSizes, HierarchySpec, IntervalSpec, MAX_SCALE, MaskingSpec,
    Number, OrderSpec, SortOrder,
};
pub use streaming::{MAX_KEPT_VALUES, TableProfile, profile_counted_csv, profile_csv, scan_column};

/// Values treated as missing-value markers during detection (compared after trimming).
pub const MISSING_MARKERS: &[&str] = &[
    "", "?", "NA", "N/A", "n/a", "NULL", "null", "None", "-", ".",
];

/// Date formats tried by the detection, in order of preference.
pub const DATE_FORMATS: &[&str] = &[
    "yyyy-MM-dd",
    "yyyy/MM/dd",
    "dd.MM.yyyy",
    "MM/dd/yyyy",
    "dd/MM/yyyy",
    "dd-MM-yyyy",
    "yyyyMMdd",
    "d.M.yyyy",
    "M/d/yyyy",
    "d/M/yyyy",
    "yyyy-MM-dd HH:mm:ss",
    "yyyy-MM-dd'T'HH:mm:ss",
    "yyyy-MM-dd HH:mm",
    "yyyy-MM-dd'T'HH:mm",
    "dd.MM.yyyy HH:mm:ss",
    "dd.MM.yyyy HH:mm",
    "MM/dd/yyyy HH:mm:ss",
    "MM/dd/yyyy HH:mm",
];

/// Most intervals the suggested width produces over the value range.
const TARGET_INTERVALS: i128 = 16;
/// Most levels of merged intervals in a suggestion.
const MAX_SUGGESTED_LEVELS: usize = 6;
/// Most distinct text values for which an order-based grouping is suggested.
const MAX_ORDER_DISTINCT: usize = 20;

/// The detected type of a column (`detected_type` in JSON: `integer`, `decimal`, `date`, `code`
/// or `text`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnType {
    /// Whole numbers.
    Integer,
    /// Numbers with fractions (or exponents).
    Decimal,
    /// Dates (or date-times); the format is in [`ColumnProfile::date_format`].
    Date,
    /// Digit strings of one fixed length, e.g. ZIP codes; the length is in
    /// [`ColumnProfile::code_length`].
    Code,
    /// Anything else.
    Text,
}

crate::names::enum_names! {
    ColumnType {
        Integer => "integer",
        Decimal => "decimal",
        Date => "date",
        Code => "code",
        Text => "text",
    }
    /// The JSON name (`integer`, `decimal`, `date`, `code`, `text`).
    pub fn as_str;
}

/// What the detection found out about a column: printed by `deid profile`, answered by the
/// service's dataset endpoints and stored with each dataset (the JSON shape is part of the API
/// and of stored rows: optional fields are omitted when empty).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnProfile {
    /// Column name.
    pub name: String,
    /// Detected type.
    pub detected_type: ColumnType,
    /// Number of distinct values (including missing-value markers).
    pub distinct_count: usize,
    /// Format of a `date` column in the syntax of [`DateSpec::format`], e.g. `dd.MM.yyyy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date_format: Option<String>,
    /// Number of digits of a `code` column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_length: Option<usize>,
    /// Missing-value markers present in the column (`NA`, `?`, empty, …; empty for text
    /// columns, where every value counts as a value).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// A hierarchy specification that fits the column (usable as the hierarchy of a
    /// quasi-identifier); `None` when the values were not all seen ([`profile_csv`] with more
    /// than `keep` distinct values).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "stored_suggestion"
    )]
    pub suggested_hierarchy: Option<HierarchySpec>,
}

/// Reads a stored suggestion; one this version cannot read (written by another version) is
/// dropped instead of making the whole profile unreadable.
fn stored_suggestion<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<HierarchySpec>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        Spec(Box<HierarchySpec>),
        Other(serde::de::IgnoredAny),
    }
    Ok(match Stored::deserialize(d)? {
        Stored::Spec(spec) => Some(*spec),
        Stored::Other(_) => None,
    })
}

/// Profiles every distinct value of `column`.
pub fn detect(column: &Column) -> ColumnProfile {
    let values: Vec<&str> = column.dict.values().collect();
    detect_values(&column.name, &values)
}

/// Profiles a list of values (duplicates are ignored).
pub fn detect_values<S: AsRef<str>>(name: &str, values: &[S]) -> ColumnProfile {
    let mut seen = HashSet::new();
    let distinct: Vec<&str> = values
        .iter()
        .map(|v| v.as_ref())
        .filter(|v| seen.insert(*v))
        .collect();
    let (mut markers, present): (Vec<&str>, Vec<&str>) = distinct
        .iter()
        .partition(|v| MISSING_MARKERS.contains(&v.trim()));
    markers.sort_unstable();
    let missing: Vec<String> = markers.iter().map(|m| m.to_string()).collect();
    let profile = |detected_type, suggestion, missing| ColumnProfile {
        name: name.to_string(),
        detected_type,
        distinct_count: distinct.len(),
        date_format: None,
        code_length: None,
        missing,
        suggested_hierarchy: Some(suggestion),
    };
    let missing_spec = if missing.is_empty() {
        vec![String::new()]
    } else {
        missing.clone()
    };

    if !present.is_empty() {
        if let Some(format) = detect_dates(&present) {
            let suggestion = suggest_dates(format, present.len(), missing_spec);
            return ColumnProfile {
                date_format: Some(format.to_string()),
                ..profile(ColumnType::Date, suggestion, missing)
            };
        }
        if let Some(length) = detect_code(&present) {
            let suggestion = if present.len() <= 2 {
                HierarchySpec::Suppression {}
            } else {
                HierarchySpec::Masking(MaskingSpec::default())
            };
            return ColumnProfile {
                code_length: Some(length),
                ..profile(ColumnType::Code, suggestion, missing)
            };
        }
        let numbers: Option<Vec<Number>> = present.iter().map(|v| Number::parse(v)).collect();
        if let Some(numbers) = numbers {
            let integer = present.iter().all(|v| is_integer_syntax(v));
            let suggestion = suggest_intervals(&numbers, missing_spec);
            let detected_type = if integer {
                ColumnType::Integer
            } else {
                ColumnType::Decimal
            };
            return profile(detected_type, suggestion, missing);
        }
    }
    // Text: markers are ordinary values here.
    profile(ColumnType::Text, suggest_text(distinct.len()), Vec::new())
}

/// The hierarchy suggested for `present` (non-missing) values in date `format`: a date
/// hierarchy (from the day when the format has a time), or suppression for at most 2 values.
fn suggest_dates(format: &str, present: usize, missing_spec: Vec<String>) -> HierarchySpec {
    let mut levels = DateSpec::default().levels;
    if DateFormat::parse(format).is_ok_and(|f| f.has_time()) {
        levels.insert(0, DateGranularity::Day);
    }
    if present <= 2 {
        HierarchySpec::Suppression {}
    } else {
        HierarchySpec::Date(DateSpec {
            format: format.to_string(),
            levels,
            missing: missing_spec,
        })
    }
}

/// The hierarchy suggested for a text column of `d` distinct values: a lexicographic order in
/// groups of about √d, or suppression outside 3..=`MAX_ORDER_DISTINCT` values.
fn suggest_text(d: usize) -> HierarchySpec {
    if (3..=MAX_ORDER_DISTINCT).contains(&d) {
        let size = (1..).find(|k: &u64| k * k >= d as u64).unwrap_or(1);
        HierarchySpec::Order(OrderSpec {
            order: SortOrder::Lexicographic,
            ..OrderSpec::new(vec![GroupSizes::Uniform(size)])
        })
    } else {
        HierarchySpec::Suppression {}
    }
}

/// Optional sign followed by ASCII digits only.
fn is_integer_syntax(v: &str) -> bool {
    let t = v.trim();
    let t = t.strip_prefix(['-', '+']).unwrap_or(t);
    !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())
}

/// The first date format that parses every value.
fn detect_dates(values: &[&str]) -> Option<&'static str> {
    DATE_FORMATS.iter().copied().find(|&pattern| {
        let Ok(format) = DateFormat::parse(pattern) else {
            return false;
        };
        let compact = pattern == "yyyyMMdd";
        values.iter().all(|v| {
            format
                .parse_date(v)
                .is_some_and(|dt| !compact || (1800..=2199).contains(&dt.date.year))
        })
    })
}

/// Length of fixed-length digit codes (see the module rules), if the values are such codes.
fn detect_code(values: &[&str]) -> Option<usize> {
    let len = values.first()?.len();
    let digits = values
        .iter()
        .all(|v| v.len() == len && v.bytes().all(|b| b.is_ascii_digit()));
    let leading_zero = values.iter().any(|v| v.starts_with('0'));
    (digits && len >= 2 && (len >= 5 || leading_zero)).then_some(len)
}

/// Regular intervals with a nice width and doubling levels (see the module rules).
fn suggest_intervals(numbers: &[Number], missing: Vec<String>) -> HierarchySpec {
    if numbers.len() <= 2 {
        return HierarchySpec::Suppression {};
    }
    let scale = numbers
        .iter()
        .map(|n| n.scale())
        .max()
        .unwrap_or(0)
        .min(MAX_SCALE);
    let units: Vec<i128> = numbers.iter().map(|n| n.units(scale)).collect();
    let (lo, hi) = (
        units.iter().copied().min().unwrap_or(0),
        units.iter().copied().max().unwrap_or(0),
    );
    let range = hi - lo;
    if range <= 0 {
        return HierarchySpec::Suppression {};
    }
    // At least two units: intervals of one unit would repeat level 0 with other labels.
    let target = ((range + TARGET_INTERVALS - 1) / TARGET_INTERVALS).max(2);
    let mut width: i128 = 1;
    'nice: loop {
        for m in [1, 2, 5] {
            if m * width >= target {
                width *= m;
                break 'nice;
            }
        }
        width *= 10;
    }
    let groups = |w: i128| {
        let mut g: Vec<i128> = units.iter().map(|u| u.div_euclid(w)).collect();
        g.sort_unstable();
        g.dedup();
        g.len()
    };
    // Add levels multiplying the width by 2 (or by 4, 8, … when doubling merges no groups of
    // the data) while more than one group remains.
    let mut levels = Vec::new();
    let (mut w, mut count) = (width, groups(width));
    let limit = range.saturating_add(width).saturating_mul(4);
    let mut factor: i128 = 2;
    while levels.len() < MAX_SUGGESTED_LEVELS {
        let Some(next_w) = w.checked_mul(factor).filter(|&x| x <= limit) else {
            break;
        };
        let next = groups(next_w);
        if next <= 1 {
            break;
        }
        if next < count {
            levels.push(GroupSizes::Uniform(factor as u64));
            (w, count, factor) = (next_w, next, 2);
        } else {
            factor *= 2;
        }
    }
    let Some(width) = Number::from_units(width, scale) else {
        return HierarchySpec::Suppression {};
    };
    HierarchySpec::Interval(IntervalSpec {
        levels,
        missing,
        ..IntervalSpec::regular(width)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The detected type with its format or length, e.g. `date dd.MM.yyyy`, `code 5`.
    fn kind(values: &[&str]) -> String {
        let p = detect_values("c", values);
        let mut k = p.detected_type.as_str().to_string();
        if let Some(f) = p.date_format {
            k = format!("{k} {f}");
        }
        if let Some(l) = p.code_length {
            k = format!("{k} {l}");
        }
        k
    }

    /// The suggestion of a detected profile (always present).
    fn suggestion(p: ColumnProfile) -> HierarchySpec {
        p.suggested_hierarchy.expect("detection always suggests")
    }

    #[test]
    fn kinds() {
        assert_eq!(kind(&["34", "45", "7"]), "integer");
        assert_eq!(kind(&["3.4", "45", "-7"]), "decimal");
        assert_eq!(kind(&["81667", "81675", "81925"]), "code 5");
        assert_eq!(kind(&["012", "345"]), "code 3");
        assert_eq!(kind(&["1985", "2001"]), "integer");
        assert_eq!(kind(&["31.12.2020", "01.01.2021"]), "date dd.MM.yyyy");
        assert_eq!(kind(&["12/31/2020", "01/02/2021"]), "date MM/dd/yyyy");
        assert_eq!(kind(&["13/01/2020", "01/02/2021"]), "date dd/MM/yyyy");
        assert_eq!(kind(&["20201231", "19990101"]), "date yyyyMMdd");
        // 8 digits that are no plausible dates: a code.
        assert_eq!(kind(&["12345678", "99999999"]), "code 8");
        assert_eq!(kind(&["male", "female"]), "text");
        assert_eq!(kind(&["", "?"]), "text");
    }

    #[test]
    fn missing_markers_are_set_aside_for_numbers() {
        let p = detect_values("age", &["34", "?", "", "51", "17", "90"]);
        assert_eq!(p.detected_type, ColumnType::Integer);
        assert_eq!(p.missing, vec!["".to_string(), "?".to_string()]);
        assert_eq!(p.distinct_count, 6);
        let suggested = suggestion(p.clone());
        let HierarchySpec::Interval(spec) = &suggested else {
            panic!("{suggested:?}")
        };
        assert_eq!(spec.missing, p.missing);
        // Range 73 → width ≥ 73/16 → 5. The four values lie in different 10- and 20-wide
        // groups ({1,3,5,9}, {0,1,2,4}); at 40 they form 3 groups → ×8; at 80, 2 groups → ×2;
        // at 160 a single group → stop.
        assert_eq!(spec.width, Some(Number::from(5)));
        assert_eq!(
            spec.levels,
            vec![GroupSizes::Uniform(8), GroupSizes::Uniform(2)]
        );
        suggested
            .build_values("age", &["34", "?", "", "51", "17", "90"])
            .unwrap();
        // Dense ages 17..=90: 5, 10, 20, 40, 80.
        let ages: Vec<String> = (17..=90).map(|a| a.to_string()).collect();
        let HierarchySpec::Interval(spec) = suggestion(detect_values("age", &ages)) else {
            panic!()
        };
        assert_eq!(spec.width, Some(Number::from(5)));
        assert_eq!(spec.levels, vec![GroupSizes::Uniform(2); 4]);
    }

    #[test]
    fn decimal_widths_use_the_data_scale() {
        let p = suggestion(detect_values("x", &["0.01", "0.5", "0.33"]));
        let HierarchySpec::Interval(spec) = &p else {
            panic!()
        };
        // Range 49 hundredths / 16 → 4 → nice 5 hundredths.
        assert_eq!(spec.width, Number::parse("0.05"));
        // Small integer ranges start at width 2 (width 1 would repeat the values).
        let p = suggestion(detect_values("x", &["0", "1", "2", "3", "4"]));
        let HierarchySpec::Interval(spec) = &p else {
            panic!()
        };
        assert_eq!(spec.width, Some(Number::from(2)));
        assert_eq!(spec.levels, vec![GroupSizes::Uniform(2)]);
        // Around zero, doubling stops once only "negative" and "non-negative" remain:
        // width 2 → 6 intervals, 4 → 4 groups, 8 → 2 groups ({-8..-1}, {0..7}), 16 → still 2.
        let values: Vec<String> = (-5..=5).map(|v| v.to_string()).collect();
        let HierarchySpec::Interval(spec) = suggestion(detect_values("x", &values)) else {
            panic!()
        };
        assert_eq!(spec.width, Some(Number::from(2)));
        assert_eq!(spec.levels, vec![GroupSizes::Uniform(2); 2]);
    }

    #[test]
    fn text_suggestions_depend_on_distinct_values() {
        assert_eq!(
            suggestion(detect_values("s", &["m", "f"])),
            HierarchySpec::Suppression {}
        );
        let p = suggestion(detect_values("s", &["a", "b", "c", "d", "e"]));
        let HierarchySpec::Order(o) = &p else {
            panic!()
        };
        assert_eq!(o.levels, vec![GroupSizes::Uniform(3)]);
        let many: Vec<String> = (0..30).map(|i| format!("name{i}")).collect();
        assert_eq!(
            suggestion(detect_values("s", &many)),
            HierarchySpec::Suppression {}
        );
    }

    #[test]
    fn profiles_serialize_with_the_api_field_names() {
        let p = detect_values("zip", &["81667", "81675", "81925", "NA"]);
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "name": "zip",
                "detected_type": "code",
                "distinct_count": 4,
                "code_length": 5,
                "missing": ["NA"],
                "suggested_hierarchy": {
                    "type": "masking",
                    "redact_from": "right",
                    "pad_side": "right",
                    "pad_char": "*",
                    "redaction_char": "*"
                }
            })
        );
        let back: ColumnProfile = serde_json::from_value(json).unwrap();
        assert_eq!(back, p);
        // Field order as the API has always written it; empty optional fields are omitted.
        let text = serde_json::to_string(&detect_values("d", &["01.02.2020", "?"])).unwrap();
        assert!(
            text.starts_with(
                r#"{"name":"d","detected_type":"date","distinct_count":2,"date_format":"dd.MM.yyyy","missing":["?"],"suggested_hierarchy":{"#
            ),
            "{text}"
        );
        let text = serde_json::to_string(&detect_values("t", &["a", "b"])).unwrap();
        assert_eq!(
            text,
            r#"{"name":"t","detected_type":"text","distinct_count":2,"suggested_hierarchy":{"type":"suppression"}}"#
        );
    }

    #[test]
    fn stored_profiles_of_earlier_versions_still_read() {
        // As stored before suggestions existed, and one this version cannot read.
        let old: Vec<ColumnProfile> = serde_json::from_str(
            r#"[{"name":"zip","detected_type":"code","distinct_count":3},
                {"name":"x","detected_type":"integer","distinct_count":9,
                 "suggested_hierarchy":{"type":"fancy","depth":3}}]"#,
        )
        .unwrap();
        assert_eq!(old[0].detected_type, ColumnType::Code);
        assert_eq!(
            (&old[0].date_format, old[0].code_length, &old[0].missing),
            (&None, None, &vec![])
        );
        assert_eq!(
            (
                old[0].suggested_hierarchy.as_ref(),
                old[1].suggested_hierarchy.as_ref()
            ),
            (None, None)
        );
        assert_eq!(old[1].distinct_count, 9);
        // Every kind of suggestion reads back as written.
        let columns: [&[&str]; 6] = [
            &["1", "5", "9", "30", "?"],
            &["0.5", "1.25", "7"],
            &["2020-01-01", "2021-06-30", "2019-12-24"],
            &["81667", "81675", "81925"],
            &["a", "b", "c", "d"],
            &["m", "f"],
        ];
        for values in columns {
            let p = detect_values("c", values);
            let text = serde_json::to_string(&p).unwrap();
            assert_eq!(
                serde_json::from_str::<ColumnProfile>(&text).unwrap(),
                p,
                "{text}"
            );
        }
    }

    /// Each column type's name is its JSON name.
    #[test]
    fn column_type_names_are_the_serialized_names() {
        for t in ColumnType::ALL {
            let json = format!("\"{}\"", t.as_str());
            assert_eq!(serde_json::to_string(&t).unwrap(), json);
            assert_eq!(serde_json::from_str::<ColumnType>(&json).unwrap(), t);
        }
    }
}
