//! Masking (redaction) hierarchies for codes such as ZIP codes: `81667` → `8166*` → `816**`
//! → … → `*****`.
//!
//! All values are first padded to the length L of the longest value (counted in Unicode
//! characters) with `pad_char` on `pad_side`; level j (1 ≤ j ≤ L) replaces j characters from
//! `redact_from` with `redaction_char`. Height L + 1; the last level is fully redacted and plays
//! the role of `*` (an all-empty column gets one padded character, so height 2).
//! Defaults: pad on the right with `*`, redact from the right with `*`.
//!
//! Domain shares (`docs/definitions.md` §5.2): with alphabet size
//! a and domain size D, level l has share `1/D + (1 − 1/D)·(a^l − 1)/(a^L − 1)` — the fraction
//! of codes a pattern with l free positions matches, interpolated so that level 0 has exactly
//! `1/D` and level L exactly 1 (linear `l/L` when a = 1). By default a is the number of distinct
//! characters in the padded values and D the number of values; both can be given explicitly.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{Rows, check_cancel, clamp_shares, invalid, require_values};
use crate::cancel::CancelFlag;
use crate::error::Result;
use crate::hierarchy::MAX_HEIGHT;

/// A side of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The beginning of the text.
    Left,
    /// The end of the text.
    #[default]
    Right,
}

fn star() -> char {
    '*'
}

/// Specification of a masking hierarchy.
///
/// JSON examples: `{"type":"masking"}` (ZIP codes, redact from the right),
/// `{"type":"masking","redact_from":"left","pad_side":"left","pad_char":"0"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaskingSpec {
    /// Side from which characters are redacted (default `right`).
    #[serde(default)]
    pub redact_from: Side,
    /// Side on which shorter values are padded (default `right`).
    #[serde(default)]
    pub pad_side: Side,
    /// Padding character (default `*`).
    #[serde(default = "star")]
    pub pad_char: char,
    /// Redaction character (default `*`).
    #[serde(default = "star")]
    pub redaction_char: char,
    /// Size of the alphabet of the codes (e.g. 10 for digits), for the domain shares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alphabet_size: Option<u64>,
    /// Number of possible codes (≥ the number of values), for the domain shares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_size: Option<u64>,
}

impl Default for MaskingSpec {
    fn default() -> Self {
        MaskingSpec {
            redact_from: Side::Right,
            pad_side: Side::Right,
            pad_char: '*',
            redaction_char: '*',
            alphabet_size: None,
            domain_size: None,
        }
    }
}

impl MaskingSpec {
    /// Data-independent checks (see [`super::HierarchySpec::validate`]).
    pub(crate) fn check(&self) -> Result<()> {
        for (name, v) in [
            ("alphabet_size", self.alphabet_size),
            ("domain_size", self.domain_size),
        ] {
            if v == Some(0) {
                return Err(invalid(
                    name,
                    format!("{name} 0 is invalid: expected at least 1"),
                ));
            }
        }
        Ok(())
    }

    /// Builds rows and shares for distinct `values`.
    pub(crate) fn rows(&self, values: &[&str], cancel: &CancelFlag) -> Result<Rows> {
        self.check()?;
        require_values(values)?;
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        let len = sorted
            .iter()
            .map(|v| v.chars().count())
            .max()
            .unwrap_or(0)
            .max(1);
        if len >= MAX_HEIGHT {
            return Err(invalid(
                "",
                format!(
                    "the longest value has {len} characters: masking builds one level per character and a hierarchy has at most {MAX_HEIGHT} levels; expected values of at most {} characters",
                    MAX_HEIGHT - 1
                ),
            ));
        }
        let padded: Vec<Vec<char>> = sorted.iter().map(|v| self.pad(v, len)).collect();
        let n = sorted.len() as u64;
        let domain = match self.domain_size {
            Some(d) if d < n => {
                return Err(invalid(
                    "domain_size",
                    format!(
                        "domain_size {d} is smaller than the {n} distinct values of the column: expected at least {n}"
                    ),
                ));
            }
            Some(d) => d,
            None => n,
        };
        let alphabet = match self.alphabet_size {
            Some(a) => a,
            None => padded.iter().flatten().collect::<BTreeSet<_>>().len() as u64,
        };
        let level_share: Vec<f64> = (0..=len)
            .map(|l| {
                let base = 1.0 / domain as f64;
                base + (1.0 - base) * fraction(alphabet as f64, l, len)
            })
            .collect();

        let mut rows = Vec::with_capacity(sorted.len());
        let mut shares = Vec::with_capacity(sorted.len());
        for (value, chars) in sorted.iter().zip(&padded) {
            check_cancel(cancel)?;
            let mut row = Vec::with_capacity(len + 1);
            row.push(value.to_string());
            for j in 1..=len {
                row.push(self.mask(chars, j));
            }
            let mut share = level_share.clone();
            clamp_shares(&mut share);
            rows.push(row);
            shares.push(share);
        }
        Ok((rows, shares))
    }

    /// `value` padded with `pad_char` on `pad_side` to `len` characters.
    fn pad(&self, value: &str, len: usize) -> Vec<char> {
        let chars: Vec<char> = value.chars().collect();
        let pad = std::iter::repeat_n(self.pad_char, len - chars.len());
        match self.pad_side {
            Side::Right => chars.iter().copied().chain(pad).collect(),
            Side::Left => pad.chain(chars.iter().copied()).collect(),
        }
    }

    /// A padded value with its last (`redact_from` right) or first (left) `j` characters
    /// replaced by `redaction_char`.
    fn mask(&self, chars: &[char], j: usize) -> String {
        let len = chars.len();
        match self.redact_from {
            Side::Right => chars[..len - j]
                .iter()
                .copied()
                .chain(std::iter::repeat_n(self.redaction_char, j))
                .collect(),
            Side::Left => std::iter::repeat_n(self.redaction_char, j)
                .chain(chars[j..].iter().copied())
                .collect(),
        }
    }
}

/// `(a^l − 1)/(a^L − 1)` computed without overflow; `l/L` for `a ≤ 1`.
fn fraction(a: f64, l: usize, len: usize) -> f64 {
    if l >= len {
        return 1.0;
    }
    if a <= 1.0 {
        return l as f64 / len as f64;
    }
    // a^(l−L) · (1 − a^−l) / (1 − a^−L)
    let (l, len) = (l as f64, len as f64);
    a.powf(l - len) * (1.0 - a.powf(-l)) / (1.0 - a.powf(-len))
}

#[cfg(test)]
mod tests {
    use super::super::HierarchySpec;
    use super::*;

    #[test]
    fn zip_codes_redacted_from_the_right() {
        let h = HierarchySpec::Masking(MaskingSpec::default())
            .build_values("zip", &["81667", "81675", "8166"])
            .unwrap();
        let got: Vec<String> = h.rows().iter().map(|r| r.join(";")).collect();
        assert_eq!(
            got,
            vec![
                "8166;8166*;816**;81***;8****;*****",
                "81667;8166*;816**;81***;8****;*****",
                "81675;8167*;816**;81***;8****;*****",
            ]
        );
        // Alphabet {1,5,6,7,8,*} = 6, D = 3: level 1 share = 1/3 + 2/3 · 5/7775.
        let s = &h.shares().unwrap()[0];
        assert!((s[1] - (1.0 / 3.0 + 2.0 / 3.0 * 5.0 / 7775.0)).abs() < 1e-12);
        assert_eq!(s[0], 1.0 / 3.0);
        assert_eq!(s[5], 1.0);
    }

    #[test]
    fn left_padding_and_left_redaction() {
        let spec = MaskingSpec {
            redact_from: Side::Left,
            pad_side: Side::Left,
            pad_char: '0',
            redaction_char: '#',
            alphabet_size: Some(10),
            domain_size: Some(1000),
        };
        let h = HierarchySpec::Masking(spec)
            .build_values("c", &["7", "123"])
            .unwrap();
        let got: Vec<String> = h.rows().iter().map(|r| r.join(";")).collect();
        assert_eq!(got, vec!["123;#23;##3;###", "7;#07;##7;###"]);
        let s = &h.shares().unwrap()[0];
        // 1/1000 + 999/1000 · 9/999 = 10/1000
        assert!((s[1] - 0.01).abs() < 1e-12, "{s:?}");
        assert!((s[2] - 0.1).abs() < 1e-12, "{s:?}");
    }
}
