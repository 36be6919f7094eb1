//! The typed→text rule (docs/definitions.md §8): how one typed Parquet value becomes the text
//! the hierarchies and the CSV path see. Pure functions that append to a `String`; which one a
//! column uses is decided once from its schema ([`super::read`]).

use std::fmt::Write as _;

use deid_engine::calendar::civil_from_days;

/// The unit of a TIME or TIMESTAMP value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Milliseconds.
    Millis,
    /// Microseconds.
    Micros,
    /// Nanoseconds.
    Nanos,
}

impl Unit {
    /// Units per second.
    fn per_second(self) -> i64 {
        match self {
            Unit::Millis => 1_000,
            Unit::Micros => 1_000_000,
            Unit::Nanos => 1_000_000_000,
        }
    }

    /// Digits of one unit's fraction of a second.
    fn digits(self) -> usize {
        match self {
            Unit::Millis => 3,
            Unit::Micros => 6,
            Unit::Nanos => 9,
        }
    }
}

/// Seconds in a day.
const DAY: i64 = 86_400;

/// A value the rule cannot turn into text (a date outside years 1–9999, a decimal too wide).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfRange(pub String);

/// An integer in decimal digits (`-` for negatives, no `+`, no leading zeros).
pub fn integer(out: &mut String, value: impl std::fmt::Display) {
    let _ = write!(out, "{value}");
}

/// `true` or `false`.
pub fn boolean(out: &mut String, value: bool) {
    out.push_str(if value { "true" } else { "false" });
}

/// The exact decimal text of `unscaled` · 10^−`scale`: exactly `scale` fraction digits after
/// a `.` (none when the scale is 0), a `0` before the point when the value is below 1, `-` for
/// negatives, no exponent (`1250` with scale 2 is `12.50`, `-5` is `-0.05`).
pub fn decimal(out: &mut String, unscaled: i128, scale: u32) {
    let digits = unscaled.unsigned_abs().to_string();
    if unscaled < 0 {
        out.push('-');
    }
    let scale = scale as usize;
    if scale == 0 {
        out.push_str(&digits);
        return;
    }
    if digits.len() <= scale {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', scale - digits.len()));
        out.push_str(&digits);
    } else {
        let (int, frac) = digits.split_at(digits.len() - scale);
        out.push_str(int);
        out.push('.');
        out.push_str(frac);
    }
}

/// The unscaled value of a DECIMAL stored as bytes: big-endian two's complement, at most 16
/// bytes (precision 38); `None` if wider.
pub fn decimal_bytes(bytes: &[u8]) -> Option<i128> {
    if bytes.len() > 16 {
        return None;
    }
    if bytes.is_empty() {
        return Some(0);
    }
    let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut buf = [fill; 16];
    buf[16 - bytes.len()..].copy_from_slice(bytes);
    Some(i128::from_be_bytes(buf))
}

/// A DATE (days since 1970-01-01) as ISO 8601 `YYYY-MM-DD`, years 1–9999.
pub fn date(out: &mut String, days: i64) -> Result<(), OutOfRange> {
    let d = civil_from_days(days);
    if !(1..=9999).contains(&d.year) {
        return Err(OutOfRange(format!(
            "day {days} since 1970-01-01 is in year {}; dates must be in years 1 to 9999",
            d.year
        )));
    }
    let _ = write!(out, "{:04}-{:02}-{:02}", d.year, d.month, d.day);
    Ok(())
}

/// A TIMESTAMP (`value` units since 1970-01-01T00:00:00 UTC; a timestamp without time zone is
/// taken as UTC wall time) as `YYYY-MM-DDTHH:MM:SS`, then `.` and the fraction of the second
/// without trailing zeros if it is not zero, then `Z`.
pub fn timestamp(out: &mut String, value: i64, unit: Unit) -> Result<(), OutOfRange> {
    let per = unit.per_second();
    let seconds = value.div_euclid(per);
    let fraction = value.rem_euclid(per);
    let days = seconds.div_euclid(DAY);
    date(out, days).map_err(|_| {
        OutOfRange(format!(
            "{value} {} since 1970-01-01 is outside years 1 to 9999",
            unit_name(unit)
        ))
    })?;
    out.push('T');
    clock(out, seconds.rem_euclid(DAY), fraction, unit);
    out.push('Z');
    Ok(())
}

/// A TIME (`value` units since midnight) as `HH:MM:SS`, with the fraction as for timestamps.
pub fn time(out: &mut String, value: i64, unit: Unit) -> Result<(), OutOfRange> {
    let per = unit.per_second();
    if !(0..DAY * per).contains(&value) {
        return Err(OutOfRange(format!(
            "{value} {} is not a time of day (0 to 24 hours)",
            unit_name(unit)
        )));
    }
    clock(out, value / per, value % per, unit);
    Ok(())
}

fn unit_name(unit: Unit) -> &'static str {
    match unit {
        Unit::Millis => "milliseconds",
        Unit::Micros => "microseconds",
        Unit::Nanos => "nanoseconds",
    }
}

/// `HH:MM:SS` of `seconds` since midnight, then `.` and `fraction` (in `unit`s) without
/// trailing zeros unless it is zero.
fn clock(out: &mut String, seconds: i64, fraction: i64, unit: Unit) {
    let _ = write!(
        out,
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    );
    if fraction != 0 {
        let digits = format!("{fraction:0width$}", width = unit.digits());
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
}

/// A DOUBLE: the shortest decimal that reads back as the same number, in plain notation (no
/// exponent; integers without `.0`: `1`, `0.1`, `1e21` as `1000000000000000000000`); `-0.0` is
/// `0`; `NaN`, `Infinity`, `-Infinity`.
pub fn double(out: &mut String, value: f64) {
    if value.is_nan() {
        out.push_str("NaN");
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 { "Infinity" } else { "-Infinity" });
    } else if value == 0.0 {
        out.push('0');
    } else {
        let _ = write!(out, "{value}");
    }
}

/// A FLOAT: as [`double`], with the shortest decimal that reads back as the same 32-bit
/// number (`0.1f32` is `0.1`, not `0.10000000149011612`).
pub fn float(out: &mut String, value: f32) {
    if value.is_finite() && value != 0.0 {
        let _ = write!(out, "{value}");
    } else {
        double(out, f64::from(value));
    }
}

/// A UUID (16 bytes) in its canonical lowercase form `8-4-4-4-12`.
pub fn uuid(out: &mut String, bytes: &[u8]) {
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        let _ = write!(out, "{b:02x}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut String)) -> String {
        let mut s = String::new();
        f(&mut s);
        s
    }

    #[test]
    fn decimals_keep_their_scale() {
        assert_eq!(text(|s| decimal(s, 1250, 2)), "12.50");
        assert_eq!(text(|s| decimal(s, -5, 2)), "-0.05");
        assert_eq!(text(|s| decimal(s, 0, 3)), "0.000");
        assert_eq!(text(|s| decimal(s, -42, 0)), "-42");
        assert_eq!(text(|s| decimal(s, i128::MIN, 0)), i128::MIN.to_string());
        assert_eq!(decimal_bytes(&[0xff, 0x38]), Some(-200));
        assert_eq!(decimal_bytes(&[0x04, 0xe2]), Some(1250));
        assert_eq!(decimal_bytes(&[0; 17]), None);
    }

    #[test]
    fn dates_and_timestamps_are_iso_8601() {
        assert_eq!(text(|s| date(s, 0).unwrap()), "1970-01-01");
        assert_eq!(text(|s| date(s, -1).unwrap()), "1969-12-31");
        assert_eq!(text(|s| date(s, 11016).unwrap()), "2000-02-29");
        assert!(date(&mut String::new(), -719_163).is_err()); // year 0
        assert_eq!(
            text(|s| timestamp(s, 1_500, Unit::Millis).unwrap()),
            "1970-01-01T00:00:01.5Z"
        );
        assert_eq!(
            text(|s| timestamp(s, -1, Unit::Micros).unwrap()),
            "1969-12-31T23:59:59.999999Z"
        );
        assert_eq!(
            text(|s| timestamp(s, 951_782_400_000_000_000, Unit::Nanos).unwrap()),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            text(|s| time(s, 45_296_120, Unit::Millis).unwrap()),
            "12:34:56.12"
        );
        assert!(time(&mut String::new(), 86_400_000, Unit::Millis).is_err());
    }

    #[test]
    fn floats_are_shortest_round_trips() {
        assert_eq!(text(|s| double(s, 0.1)), "0.1");
        assert_eq!(text(|s| double(s, -0.0)), "0");
        assert_eq!(text(|s| double(s, 3.0)), "3");
        assert_eq!(text(|s| double(s, 1e21)), "1000000000000000000000");
        assert_eq!(text(|s| double(s, f64::NAN)), "NaN");
        assert_eq!(text(|s| double(s, f64::NEG_INFINITY)), "-Infinity");
        assert_eq!(text(|s| float(s, 0.1)), "0.1");
        assert_eq!(text(|s| float(s, f32::INFINITY)), "Infinity");
        assert_eq!(text(|s| float(s, -0.0)), "0");
    }

    #[test]
    fn integers_booleans_and_uuids() {
        assert_eq!(text(|s| integer(s, -7i64)), "-7");
        assert_eq!(text(|s| integer(s, u64::MAX)), "18446744073709551615");
        assert_eq!(text(|s| boolean(s, true)), "true");
        let bytes: Vec<u8> = (0..16).collect();
        assert_eq!(
            text(|s| uuid(s, &bytes)),
            "00010203-0405-0607-0809-0a0b0c0d0e0f"
        );
    }
}
