//! Date hierarchies: a chain of calendar granularities, e.g. day → month → quarter → year →
//! decade, followed by `*` (height = `levels.len() + 2`).
//!
//! Input dates are parsed with a Java-style `format` (default `yyyy-MM-dd`): `yyyy` year (4
//! digits), `MM`/`dd` month/day (2 digits), `M`/`d` (1 or 2 digits), optional time `HH`/`H`,
//! `mm`/`m`, `ss`/`s` (validated, then ignored), any other non-letter character literally, and
//! text in single quotes literally (`yyyy-MM-dd'T'HH:mm:ss`). Examples: `dd.MM.yyyy`,
//! `MM/dd/yyyy`, `yyyyMMdd`.
//!
//! Labels: `day` `2024-01-31`, `week` `2024-W05` (ISO 8601 week and week-based year), `month`
//! `2024-01`, `quarter` `2024-Q1`, `year` `2024`, `decade` `2020-2029`, `century` `2000-2099`.
//! Granularities must get strictly coarser; ISO weeks cross month, quarter and year
//! boundaries, so `week` can only be the last granularity of a chain.
//!
//! Calendar arithmetic is proleptic Gregorian ([`crate::calendar`]).
//! Values listed in `missing` keep their text up to `*`. Domain shares: days in the period /
//! days of the whole covered range (like intervals); level 0 `1/N`; `*` 1.

use serde::{Deserialize, Serialize};

use super::{
    LabelRegistry, Rows, check_cancel, default_missing, extent_range, extent_shares, invalid,
    is_missing, require_values,
};
pub use crate::calendar::{Date, DateFormat, DateTime};
use crate::calendar::{days_from_civil, iso_week};
use crate::cancel::CancelFlag;
use crate::error::Result;

/// A calendar granularity of a date hierarchy level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DateGranularity {
    /// The calendar day, `2024-01-31` (useful for date-times or non-ISO input formats).
    Day,
    /// ISO 8601 week, `2024-W05`; must be the last granularity.
    Week,
    /// Month, `2024-01`.
    Month,
    /// Quarter, `2024-Q1`.
    Quarter,
    /// Year, `2024`.
    Year,
    /// Decade, `2020-2029`.
    Decade,
    /// Century (hundreds), `2000-2099`.
    Century,
}

crate::names::enum_names! {
    DateGranularity {
        Day => "day",
        Week => "week",
        Month => "month",
        Quarter => "quarter",
        Year => "year",
        Decade => "decade",
        Century => "century",
    }
    /// The name in specifications (`day`, `week`, `month`, …; as serialized).
    fn name;
}

impl DateGranularity {
    /// Label and extent `[first day, last day + 1[` (days since 1970-01-01) of the period
    /// containing `date`.
    fn period(self, date: Date) -> (String, i64, i64) {
        let Date { year, month, day } = date;
        match self {
            DateGranularity::Day => {
                let d = days_from_civil(year, month, day);
                (format!("{year:04}-{month:02}-{day:02}"), d, d + 1)
            }
            DateGranularity::Week => {
                let d = days_from_civil(year, month, day);
                let (iso_year, week, monday) = iso_week(d);
                (format!("{iso_year:04}-W{week:02}"), monday, monday + 7)
            }
            DateGranularity::Month => {
                let (ny, nm) = if month == 12 {
                    (year + 1, 1)
                } else {
                    (year, month + 1)
                };
                (
                    format!("{year:04}-{month:02}"),
                    days_from_civil(year, month, 1),
                    days_from_civil(ny, nm, 1),
                )
            }
            DateGranularity::Quarter => {
                let q = (month - 1) / 3 + 1;
                let first = (q - 1) * 3 + 1;
                let (ny, nm) = if q == 4 {
                    (year + 1, 1)
                } else {
                    (year, first + 3)
                };
                (
                    format!("{year:04}-Q{q}"),
                    days_from_civil(year, first, 1),
                    days_from_civil(ny, nm, 1),
                )
            }
            DateGranularity::Year => (
                format!("{year:04}"),
                days_from_civil(year, 1, 1),
                days_from_civil(year + 1, 1, 1),
            ),
            DateGranularity::Decade | DateGranularity::Century => {
                let span = if self == DateGranularity::Decade {
                    10
                } else {
                    100
                };
                let start = year.div_euclid(span) * span;
                (
                    format!("{start:04}-{:04}", start + span - 1),
                    days_from_civil(start, 1, 1),
                    days_from_civil(start + span, 1, 1),
                )
            }
        }
    }
}

fn default_format() -> String {
    "yyyy-MM-dd".to_string()
}

fn default_chain() -> Vec<DateGranularity> {
    vec![
        DateGranularity::Month,
        DateGranularity::Quarter,
        DateGranularity::Year,
        DateGranularity::Decade,
    ]
}

/// Specification of a date hierarchy.
///
/// JSON examples: `{"type":"date"}` (ISO dates; month → quarter → year → decade),
/// `{"type":"date","format":"dd.MM.yyyy","levels":["week"]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DateSpec {
    /// Input format of the values (default `yyyy-MM-dd`).
    #[serde(default = "default_format")]
    pub format: String,
    /// Granularities above the original value (default month, quarter, year, decade).
    #[serde(default = "default_chain")]
    pub levels: Vec<DateGranularity>,
    /// Values that mark a missing entry (kept as they are up to `*`); default `[""]`.
    #[serde(default = "default_missing")]
    pub missing: Vec<String>,
}

impl Default for DateSpec {
    fn default() -> Self {
        DateSpec {
            format: default_format(),
            levels: default_chain(),
            missing: default_missing(),
        }
    }
}

impl DateSpec {
    /// Data-independent checks (see [`super::HierarchySpec::validate`]); returns the compiled
    /// format.
    pub(crate) fn check(&self) -> Result<DateFormat> {
        let format =
            DateFormat::parse(&self.format).map_err(|message| invalid("format", message))?;
        for (i, pair) in self.levels.windows(2).enumerate() {
            let (a, b) = (pair[0], pair[1]);
            if a == DateGranularity::Week {
                return Err(invalid(
                    &format!("levels[{}]", i + 1),
                    format!(
                        "'{}' cannot follow 'week': ISO weeks cross month, quarter and year boundaries, so 'week' must be the last granularity",
                        b.name()
                    ),
                ));
            }
            if b <= a {
                return Err(invalid(
                    &format!("levels[{}]", i + 1),
                    format!(
                        "'{}' cannot follow '{}': expected strictly coarser granularities in the order day, week or month, quarter, year, decade, century",
                        b.name(),
                        a.name()
                    ),
                ));
            }
        }
        Ok(format)
    }

    /// Builds rows and shares for distinct `values`.
    pub(crate) fn rows(&self, values: &[&str], cancel: &CancelFlag) -> Result<Rows> {
        let format = self.check()?;
        require_values(values)?;
        let mut parsed: Vec<(&str, Option<DateTime>)> = Vec::with_capacity(values.len());
        for v in values {
            if is_missing(&self.missing, v) {
                parsed.push((v, None));
                continue;
            }
            let dt = format.parse_date(v).ok_or_else(|| {
                invalid("format",
                    format!(
                        "value '{v}' is not a valid date in the format '{}' (list it in \"missing\" if it marks a missing value)",
                        self.format
                    ),
                )
            })?;
            parsed.push((v, Some(dt)));
        }
        parsed.sort_by(|(a, x), (b, y)| match (x, y) {
            (Some(x), Some(y)) => x.cmp(y).then_with(|| a.cmp(b)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.cmp(b),
        });

        let k = self.levels.len();
        let height = k + 2;
        let n = values.len() as f64;
        let mut registry: LabelRegistry<Option<usize>> = LabelRegistry::new(height);
        let mut rows = Vec::with_capacity(values.len());
        let mut extents: Vec<Vec<(i64, i64)>> = Vec::with_capacity(values.len());
        for (i, &(value, dt)) in parsed.iter().enumerate() {
            check_cancel(cancel)?;
            let mut row = Vec::with_capacity(height);
            let mut ext = Vec::with_capacity(k);
            row.push(value.to_string());
            for (l, g) in self.levels.iter().enumerate() {
                match dt {
                    None => {
                        registry.register(l + 1, value, &Some(i))?;
                        row.push(value.to_string());
                    }
                    Some(dt) => {
                        let (label, lo, hi) = g.period(dt.date);
                        registry.register(l + 1, &label, &None)?;
                        row.push(label);
                        ext.push((lo, hi));
                    }
                }
            }
            row.push("*".to_string());
            rows.push(row);
            extents.push(ext);
        }
        let range = extent_range(&extents);
        let shares = parsed
            .iter()
            .zip(&extents)
            .map(|((_, dt), ext)| {
                let widths = dt
                    .is_some()
                    .then(|| ext.iter().map(|&(lo, hi)| (hi - lo) as f64).collect());
                extent_shares(widths, k, n, range)
            })
            .collect();
        Ok((rows, shares))
    }
}

#[cfg(test)]
mod tests {
    use super::super::HierarchySpec;
    use super::*;
    use crate::calendar::{civil_from_days, days_in_month, weekday};

    #[test]
    fn civil_days_round_trip_and_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        // 2000-01-01 was a Saturday (weekday 5).
        assert_eq!(weekday(days_from_civil(2000, 1, 1)), 5);
        for d in -800_000..800_000i64 {
            let c = civil_from_days(d);
            assert_eq!(days_from_civil(c.year, c.month, c.day), d, "{c:?}");
            assert!(c.day >= 1 && c.day <= days_in_month(c.year, c.month));
        }
    }

    #[test]
    fn iso_weeks_at_year_boundaries() {
        // Hand-checked against the ISO rule (week with the year's first Thursday is week 1).
        let cases = [
            ((2021, 1, 3), (2020, 53)),
            ((2021, 1, 4), (2021, 1)),
            ((2019, 12, 30), (2020, 1)),
            ((2024, 12, 30), (2025, 1)),
            ((2026, 1, 1), (2026, 1)),
            ((2015, 12, 31), (2015, 53)),
            ((2024, 2, 29), (2024, 9)),
        ];
        for ((y, m, d), (wy, w)) in cases {
            let (iy, iw, monday) = iso_week(days_from_civil(y, m, d));
            assert_eq!((iy, iw), (wy, w), "{y}-{m}-{d}");
            assert_eq!(weekday(monday), 0);
        }
    }

    #[test]
    fn formats_parse_and_reject() {
        let f = DateFormat::parse("dd.MM.yyyy").unwrap();
        let dt = f.parse_date("29.02.2024").unwrap();
        assert_eq!(
            dt.date,
            Date {
                year: 2024,
                month: 2,
                day: 29
            }
        );
        assert!(f.parse_date("29.02.2023").is_none());
        assert!(f.parse_date("1.02.2024").is_none());
        assert!(f.parse_date("01.02.2024x").is_none());
        let f = DateFormat::parse("M/d/yyyy").unwrap();
        assert_eq!(f.parse_date("3/7/2020").unwrap().date.day, 7);
        let f = DateFormat::parse("yyyy-MM-dd'T'HH:mm:ss").unwrap();
        assert!(f.has_time());
        assert_eq!(
            f.parse_date("2020-01-02T03:04:05").unwrap().seconds,
            3 * 3600 + 4 * 60 + 5
        );
        assert!(f.parse_date("2020-01-02T24:00:00").is_none());
        assert!(
            DateFormat::parse("yyyyMMdd")
                .unwrap()
                .parse_date("20200131")
                .is_some()
        );
        for bad in [
            "yy-MM-dd",
            "yyyy-MM",
            "yyyy-MM-dd-dd",
            "yyyy-MM-dd 'x",
            "yyyy-QQ-dd",
        ] {
            assert!(DateFormat::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn default_chain_table() {
        let h = HierarchySpec::Date(DateSpec::default())
            .build_values("d", &["2019-12-31", "2020-02-29", "", "2020-01-15"])
            .unwrap();
        let got: Vec<String> = h.rows().iter().map(|r| r.join(";")).collect();
        assert_eq!(
            got,
            vec![
                "2019-12-31;2019-12;2019-Q4;2019;2010-2019;*",
                "2020-01-15;2020-01;2020-Q1;2020;2020-2029;*",
                "2020-02-29;2020-02;2020-Q1;2020;2020-2029;*",
                ";;;;;*",
            ]
        );
        // Covered range: 2010-01-01 .. 2030-01-01 = 7305 days; the 2020s have 3653 days.
        // February 2020 (29 days) and 2020 (366 days) are narrower than one of the 4 values
        // (share 1/4), so they are clamped up to 1/4.
        let s = &h.shares().unwrap()[2];
        assert_eq!(&s[..4], &[0.25; 4]);
        assert!((s[4] - 3653.0 / 7305.0).abs() < 1e-12, "{s:?}");
        assert_eq!(s[5], 1.0);
        // The missing value keeps the share of one value.
        assert_eq!(
            h.shares().unwrap()[3],
            vec![0.25, 0.25, 0.25, 0.25, 0.25, 1.0]
        );
    }

    #[test]
    fn week_chain_and_invalid_chains() {
        let spec = DateSpec {
            format: "dd.MM.yyyy".into(),
            levels: vec![DateGranularity::Week],
            missing: vec![],
        };
        let h = HierarchySpec::Date(spec)
            .build_values("d", &["03.01.2021", "04.01.2021"])
            .unwrap();
        let got: Vec<String> = h.rows().iter().map(|r| r.join(";")).collect();
        assert_eq!(got, vec!["03.01.2021;2020-W53;*", "04.01.2021;2021-W01;*"]);
        let spec = DateSpec {
            levels: vec![DateGranularity::Week, DateGranularity::Year],
            ..DateSpec::default()
        };
        let err = HierarchySpec::Date(spec)
            .build_values("d", &["2020-01-01"])
            .unwrap_err();
        assert!(
            err.to_string().contains("'year' cannot follow 'week'"),
            "{err}"
        );
        let spec = DateSpec {
            levels: vec![DateGranularity::Year, DateGranularity::Month],
            ..DateSpec::default()
        };
        let err = HierarchySpec::Date(spec)
            .build_values("d", &["2020-01-01"])
            .unwrap_err();
        assert!(
            err.to_string().contains("'month' cannot follow 'year'"),
            "{err}"
        );
    }

    /// Each granularity's name is its JSON name.
    #[test]
    fn granularity_names_are_the_serialized_names() {
        for g in DateGranularity::ALL {
            let json = format!("\"{}\"", g.name());
            assert_eq!(serde_json::to_string(&g).unwrap(), json);
            assert_eq!(serde_json::from_str::<DateGranularity>(&json).unwrap(), g);
        }
    }
}
