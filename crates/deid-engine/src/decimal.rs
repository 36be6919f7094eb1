//! Exact decimal numbers ([`Number`]): the bounds and widths of interval hierarchies and the
//! values of microaggregation, compared and added without binary rounding.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Most fractional digits a [`Number`] may have.
pub const MAX_SCALE: u32 = 18;

/// An exact decimal number `mantissa / 10^scale`, normalised (no trailing zeros in the
/// fraction). Magnitude below 10^19, at most [`MAX_SCALE`] fractional digits.
///
/// JSON: a number (`20`, `0.5`) or a string (`"0.1"`, `"1e3"`); serialised as a JSON number
/// unless it has more than 15 significant digits (then as a string, to stay exact).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Number {
    mantissa: i128,
    scale: u32,
}

impl Number {
    /// Parses a decimal: optional sign, digits with an optional `.` fraction, optional exponent
    /// (`e`/`E`). Surrounding ASCII whitespace is ignored. `None` if it is not such a number or
    /// lies outside the supported range.
    pub fn parse(text: &str) -> Option<Number> {
        let t = text.trim_ascii().as_bytes();
        let (neg, t) = match t.first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            _ => (false, t),
        };
        let mut mantissa: i128 = 0;
        let mut digits = 0usize;
        let mut frac = 0i64;
        let mut i = 0;
        let mut seen_dot = false;
        while i < t.len() {
            match t[i] {
                d @ b'0'..=b'9' => {
                    mantissa = mantissa.checked_mul(10)?.checked_add((d - b'0') as i128)?;
                    digits += 1;
                    if seen_dot {
                        frac += 1;
                    }
                }
                b'.' if !seen_dot => seen_dot = true,
                _ => break,
            }
            i += 1;
        }
        if digits == 0 {
            return None;
        }
        let mut exp: i64 = 0;
        if i < t.len() {
            if t[i] != b'e' && t[i] != b'E' {
                return None;
            }
            let rest = std::str::from_utf8(&t[i + 1..]).ok()?;
            if rest.is_empty() || rest.starts_with('+') && rest.len() == 1 {
                return None;
            }
            let e: i64 = rest.parse().ok()?;
            if !(-100..=100).contains(&e) {
                return None;
            }
            exp = e;
        }
        let mut scale = frac - exp;
        if scale < 0 {
            mantissa = mantissa.checked_mul(10i128.checked_pow((-scale) as u32)?)?;
            scale = 0;
        }
        // Normalise before the range checks so that `1.000…0` with many zeros is accepted.
        while scale > 0 && mantissa % 10 == 0 {
            mantissa /= 10;
            scale -= 1;
        }
        if mantissa == 0 {
            scale = 0;
        }
        if scale > MAX_SCALE as i64 {
            return None;
        }
        let scale = scale as u32;
        if mantissa >= 10i128.pow(19 + scale) {
            return None;
        }
        Some(Number {
            mantissa: if neg { -mantissa } else { mantissa },
            scale,
        })
    }

    /// Number of fractional digits (after normalisation).
    pub fn scale(&self) -> u32 {
        self.scale
    }

    /// The value in units of `10^-scale` (`scale` ≥ [`Number::scale`]); exact, cannot overflow.
    pub(crate) fn units(&self, scale: u32) -> i128 {
        debug_assert!(scale >= self.scale && scale <= MAX_SCALE);
        self.mantissa * 10i128.pow(scale - self.scale)
    }

    /// The number `units / 10^scale`, normalised; `None` if out of range.
    pub(crate) fn from_units(units: i128, scale: u32) -> Option<Number> {
        Number::parse(&format_units(units, scale))
    }

    fn significant_digits(&self) -> usize {
        let m = self.mantissa.unsigned_abs().to_string();
        m.trim_end_matches('0').len().max(1)
    }
}

impl From<i64> for Number {
    fn from(v: i64) -> Self {
        Number {
            mantissa: v as i128,
            scale: 0,
        }
    }
}

impl PartialOrd for Number {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Number {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let s = self.scale.max(other.scale);
        self.units(s).cmp(&other.units(s))
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_units(self.mantissa, self.scale))
    }
}

impl std::str::FromStr for Number {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Number::parse(s).ok_or_else(|| {
            format!(
                "'{s}' is not a supported number (expected a decimal with magnitude below 1e19 and at most {MAX_SCALE} fractional digits)"
            )
        })
    }
}

/// Formats `units / 10^scale` without trailing fractional zeros (`1500, 3` → `1.5`).
pub(crate) fn format_units(units: i128, scale: u32) -> String {
    let neg = units < 0;
    let abs = units.unsigned_abs();
    let pow = 10u128.pow(scale);
    let (int, frac) = (abs / pow, abs % pow);
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    s.push_str(&int.to_string());
    if frac > 0 {
        let digits = format!("{frac:0width$}", width = scale as usize);
        s.push('.');
        s.push_str(digits.trim_end_matches('0'));
    }
    s
}

impl Serialize for Number {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        if self.scale == 0
            && let Ok(v) = i64::try_from(self.mantissa)
        {
            return s.serialize_i64(v);
        }
        if self.significant_digits() <= 15 {
            // Shortest round-trip formatting of f64 reproduces the decimal exactly.
            s.serialize_f64(self.to_string().parse::<f64>().unwrap_or(f64::NAN))
        } else {
            s.serialize_str(&self.to_string())
        }
    }
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Number;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or a string holding a decimal number")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<Number, E> {
                Ok(Number::from(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Number, E> {
                v.to_string().parse().map_err(E::custom)
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<Number, E> {
                if !v.is_finite() {
                    return Err(E::custom(format!("{v} is not a finite number")));
                }
                // `Display` of f64 is the shortest representation that round-trips, without
                // exponent: 0.1 → "0.1", 1e21 → "1000000000000000000000".
                v.to_string().parse().map_err(E::custom)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Number, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_decimals_exactly() {
        let cases = [
            ("20", "20"),
            ("-7", "-7"),
            ("+3.50", "3.5"),
            ("0.1", "0.1"),
            ("007", "7"),
            ("1e3", "1000"),
            ("2.5E-2", "0.025"),
            (" 4 ", "4"),
            ("-0.0", "0"),
            (".5", "0.5"),
            ("5.", "5"),
        ];
        for (input, shown) in cases {
            let n = Number::parse(input).unwrap_or_else(|| panic!("{input}"));
            assert_eq!(n.to_string(), shown, "{input}");
        }
        for bad in [
            "", "-", ".", "abc", "1,5", "1e", "1e+", "--1", "1.2.3", "1e999", "NaN", "inf",
        ] {
            assert!(Number::parse(bad).is_none(), "{bad:?}");
        }
        // Range limits: 19 integer digits or 19 fractional digits are rejected.
        assert!(Number::parse("9999999999999999999").is_some());
        assert!(Number::parse("10000000000000000000").is_none());
        assert!(Number::parse("0.000000000000000001").is_some());
        assert!(Number::parse("0.0000000000000000001").is_none());
    }

    #[test]
    fn compares_across_scales() {
        let a = Number::parse("1.5").unwrap();
        let b = Number::parse("1.50").unwrap();
        let c = Number::parse("2").unwrap();
        assert_eq!(a, b);
        assert!(a < c && Number::parse("-3").unwrap() < a);
        assert_eq!(a.units(3), 1500);
        assert_eq!(format_units(-1500, 3), "-1.5");
        assert_eq!(format_units(-5, 1), "-0.5");
    }
}
