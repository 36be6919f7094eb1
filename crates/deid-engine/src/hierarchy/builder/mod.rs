//! Hierarchy builders: turn a small, serialisable [`HierarchySpec`] plus the values of a column
//! into a validated [`Hierarchy`] with analytic domain shares (`docs/definitions.md` §4.2, §5.2).
//!
//! Five kinds, selected by the `"type"` field of the JSON form:
//!
//! | `type` | builder | levels |
//! |---|---|---|
//! | `interval` | [`IntervalSpec`]: numbers into `[lo, hi[` intervals, bottom/top coding, groups of intervals | value, intervals, one level per group size, `*` |
//! | `order` | [`OrderSpec`]: consecutive runs of ordered values | value, one level per group size, `*` |
//! | `masking` | [`MaskingSpec`]: redact one more character per level (`81667` → `8166*` → … → `*****`) | value, 1 … L characters redacted |
//! | `date` | [`DateSpec`]: day → week or month → quarter → year → decade → century | value, one level per granularity, `*` |
//! | `suppression` | value → `*` | value, `*` |
//!
//! Every builder is pure and deterministic: the rows are sorted (by number, date, order or text),
//! the labels depend only on the specification and the value, never on the order of the input.
//! The result always covers every given value, has rows of equal length and is monotone (checked
//! once more by [`Hierarchy::with_shares`]). Invalid specifications and values that do not fit
//! the specification produce [`EngineError::InvalidConfig`] naming the value and what was
//! expected; its field is the path inside the specification (`intervals[2]`, `format`, or empty
//! for the specification as a whole). Nothing panics on user input.
//!
//! Numbers are handled exactly: [`Number`] is a decimal (up to 18 fractional digits, magnitude
//! below 10^19), so widths like `0.1` never accumulate floating-point error and labels stay
//! short (`[0.3, 0.4[`, not `[0.30000000000000004, …`).
//!
//! Domain shares (used by the Loss metric): level 0 has share `1/N` (N = rows of the hierarchy),
//! the last level (`*` or fully redacted) share 1; intermediate levels follow the builder's
//! analytic model (interval and date: width of the group / width of the whole covered range;
//! order: values in the group / N; masking: interpolation between `1/N` and 1). Shares are
//! clamped so that they lie in `[1/N, 1]` and never decrease along a row.

pub mod date;
pub mod interval;
pub mod masking;
pub mod order;

use std::collections::HashSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Hierarchy, MAX_HEIGHT};
use crate::cancel::CancelFlag;
use crate::data::Column;
use crate::error::{EngineError, Result};

pub use date::{DateFormat, DateGranularity, DateSpec};
pub use interval::{IntervalDef, IntervalSpec};
pub use masking::{MaskingSpec, Side};
pub use order::{OrderLabels, OrderSpec, SortOrder};

/// A hierarchy specification: how to build a hierarchy for a column from its values.
///
/// JSON: an object with a `"type"` tag, e.g. `{"type":"interval","width":10}`,
/// `{"type":"masking","redact_from":"right"}`, `{"type":"suppression"}`.
// A few hundred bytes per specification, created once per column: boxing buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum HierarchySpec {
    /// Numeric intervals (integers and decimals).
    Interval(IntervalSpec),
    /// Groups of consecutive values in a numeric, lexicographic or explicit order.
    Order(OrderSpec),
    /// Character masking for codes such as ZIP codes.
    Masking(MaskingSpec),
    /// Calendar generalization of dates.
    Date(DateSpec),
    /// Every value generalizes directly to `*`. (A struct variant without fields, so that
    /// unknown fields in `{"type":"suppression", …}` are rejected like everywhere else.)
    Suppression {},
}

impl HierarchySpec {
    /// Builds the hierarchy for every distinct value of `column`.
    pub fn build(&self, column: &Column) -> Result<Hierarchy> {
        self.build_cancellable(column, &CancelFlag::new())
    }

    /// Like [`HierarchySpec::build`], but stops with [`EngineError::Cancelled`] once `cancel`
    /// is raised (checked before every row).
    pub fn build_cancellable(&self, column: &Column, cancel: &CancelFlag) -> Result<Hierarchy> {
        let values: Vec<&str> = column.dict.values().collect();
        self.build_values_cancellable(&column.name, &values, cancel)
    }

    /// Builds the hierarchy for the given values (duplicates are ignored). `column` names the
    /// attribute in the errors about the resulting table (e.g. [`EngineError::EmptyInput`]).
    pub fn build_values<S: AsRef<str>>(&self, column: &str, values: &[S]) -> Result<Hierarchy> {
        self.build_values_cancellable(column, values, &CancelFlag::new())
    }

    /// Like [`HierarchySpec::build_values`], but stops with [`EngineError::Cancelled`] once
    /// `cancel` is raised (checked before every row).
    pub fn build_values_cancellable<S: AsRef<str>>(
        &self,
        column: &str,
        values: &[S],
        cancel: &CancelFlag,
    ) -> Result<Hierarchy> {
        let mut seen = HashSet::with_capacity(values.len());
        let distinct: Vec<&str> = values
            .iter()
            .map(|v| v.as_ref())
            .filter(|v| seen.insert(*v))
            .collect();
        let (rows, shares) = match self {
            HierarchySpec::Interval(spec) => spec.rows(&distinct, cancel)?,
            HierarchySpec::Order(spec) => spec.rows(&distinct, cancel)?,
            HierarchySpec::Masking(spec) => spec.rows(&distinct, cancel)?,
            HierarchySpec::Date(spec) => spec.rows(&distinct, cancel)?,
            HierarchySpec::Suppression {} => suppression_rows(&distinct)?,
        };
        check_cancel(cancel)?;
        Hierarchy::with_shares(rows, shares, column)
    }

    /// Checks everything that does not depend on the data (interval definitions, bounds, group
    /// sizes, explicit orders, date formats and chains), e.g. when a job is submitted.
    /// [`HierarchySpec::build`] runs the same checks, plus those against the values.
    pub fn validate(&self) -> Result<()> {
        match self {
            HierarchySpec::Interval(spec) => spec.check(),
            HierarchySpec::Order(spec) => spec.check(),
            HierarchySpec::Masking(spec) => spec.check(),
            HierarchySpec::Date(spec) => spec.check().map(|_| ()),
            HierarchySpec::Suppression {} => Ok(()),
        }
    }

    /// The `"type"` tag of this specification (`interval`, `order`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            HierarchySpec::Interval(_) => "interval",
            HierarchySpec::Order(_) => "order",
            HierarchySpec::Masking(_) => "masking",
            HierarchySpec::Date(_) => "date",
            HierarchySpec::Suppression {} => "suppression",
        }
    }
}

/// Rows and shares of a hierarchy as produced by one builder.
pub(crate) type Rows = (Vec<Vec<String>>, Vec<Vec<f64>>);

/// value → `*`, rows sorted by value.
fn suppression_rows(values: &[&str]) -> Result<Rows> {
    require_values(values)?;
    let mut sorted: Vec<&str> = values.to_vec();
    sorted.sort_unstable();
    let n = sorted.len() as f64;
    let rows = sorted
        .iter()
        .map(|v| vec![v.to_string(), "*".to_string()])
        .collect();
    let shares = vec![vec![1.0 / n, 1.0]; sorted.len()];
    Ok((rows, shares))
}

/// Error for a specification or data problem; `path` is the position inside the specification
/// (e.g. `intervals[2]`), empty for the specification as a whole.
/// [`EngineError::Cancelled`] once `cancel` is raised.
pub(crate) fn check_cancel(cancel: &CancelFlag) -> Result<()> {
    if cancel.is_cancelled() {
        Err(EngineError::Cancelled)
    } else {
        Ok(())
    }
}

/// Rejects more levels than a hierarchy may have ([`MAX_HEIGHT`]); `fixed` is the number of
/// levels the builder adds besides `levels` (the values, `*`, …), `what` names them.
pub(crate) fn check_level_count(count: usize, fixed: usize, what: &str) -> Result<()> {
    let max = MAX_HEIGHT - fixed;
    if count > max {
        return Err(invalid(
            "levels",
            format!(
                "expected at most {max} levels, got {count}: a hierarchy has at most {MAX_HEIGHT} levels ({what})"
            ),
        ));
    }
    Ok(())
}

pub(crate) fn invalid(path: &str, message: impl Into<String>) -> EngineError {
    EngineError::config(path, message)
}

/// A hierarchy needs at least one value.
pub(crate) fn require_values(values: &[&str]) -> Result<()> {
    if values.is_empty() {
        return Err(invalid(
            "",
            "the column has no values to build a hierarchy for",
        ));
    }
    Ok(())
}

/// Makes a row of raw shares valid: level 0 keeps its value, later levels are clamped to
/// `[previous level, 1]` (non-finite values count as 1). Applied per row; because every
/// builder's groups are nested, the result is still a function of the label.
pub(crate) fn clamp_shares(raw: &mut [f64]) {
    let mut prev = 0.0f64;
    for (l, s) in raw.iter_mut().enumerate() {
        let v = if s.is_finite() { *s } else { 1.0 };
        let v = v.clamp(0.0, 1.0);
        *s = if l == 0 { v } else { v.max(prev) };
        prev = *s;
    }
}

/// Width of everything the extents of a hierarchy's rows cover (0 if nothing is covered): the
/// denominator of [`extent_shares`].
pub(crate) fn extent_range<T: Copy + Ord + Into<i128>>(extents: &[Vec<(T, T)>]) -> f64 {
    let lo = extents.iter().flatten().map(|e| e.0).min();
    let hi = extents.iter().flatten().map(|e| e.1).max();
    match (lo, hi) {
        (Some(lo), Some(hi)) => (hi.into() - lo.into()) as f64,
        _ => 0.0,
    }
}

/// Analytic domain shares of one row of an interval or date hierarchy: 1/n for the value
/// itself, width / range at each group level (`None`: a missing value, which keeps the share of
/// a single value at the `group_levels` levels), 1 for the top `*`; clamped by [`clamp_shares`].
pub(crate) fn extent_shares(
    widths: Option<Vec<f64>>,
    group_levels: usize,
    n: f64,
    range: f64,
) -> Vec<f64> {
    let mut s = Vec::with_capacity(group_levels + 2);
    s.push(1.0 / n);
    match widths {
        None => s.extend(std::iter::repeat_n(1.0 / n, group_levels)),
        Some(w) => s.extend(
            w.into_iter()
                .map(|w| if range > 0.0 { w / range } else { 1.0 }),
        ),
    }
    s.push(1.0);
    clamp_shares(&mut s);
    s
}

// ---------------------------------------------------------------------------------------------
// Group sizes

/// The group sizes of one level: a single size, or a list used round-robin
/// (`[2, 3]` → groups of 2, 3, 2, 3, … children). JSON: `2` or `[2, 3]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum GroupSizes {
    /// Every group has this many children.
    Uniform(u64),
    /// Group sizes repeated cyclically.
    Cycle(Vec<u64>),
}

impl<'de> Deserialize<'de> for GroupSizes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        const EXPECTED: &str =
            "a group size (a positive integer) or a list of group sizes, e.g. 2 or [2, 3]";
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = GroupSizes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<GroupSizes, E> {
                Ok(GroupSizes::Uniform(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<GroupSizes, E> {
                u64::try_from(v).map(GroupSizes::Uniform).map_err(|_| {
                    E::custom(format!("group size {v} is negative: expected {EXPECTED}"))
                })
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<GroupSizes, E> {
                Err(E::custom(format!(
                    "group size {v} is not a whole number: expected {EXPECTED}"
                )))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<GroupSizes, A::Error> {
                let mut sizes = Vec::new();
                while let Some(s) = seq.next_element::<u64>()? {
                    sizes.push(s);
                }
                Ok(GroupSizes::Cycle(sizes))
            }
        }
        d.deserialize_any(V)
    }
}

/// Largest group size accepted (keeps the index arithmetic far from overflow).
const MAX_GROUP_SIZE: u64 = 1 << 31;

impl GroupSizes {
    /// The sizes as a list.
    pub fn sizes(&self) -> &[u64] {
        match self {
            GroupSizes::Uniform(s) => std::slice::from_ref(s),
            GroupSizes::Cycle(v) => v,
        }
    }

    /// Rejects empty lists and sizes of 0 (or absurdly large sizes).
    pub(crate) fn validate(&self, path: &str) -> Result<()> {
        let sizes = self.sizes();
        if sizes.len() > MAX_SIZES_PER_LEVEL {
            return Err(invalid(
                path,
                format!(
                    "expected at most {MAX_SIZES_PER_LEVEL} group sizes in one level, got {}",
                    sizes.len()
                ),
            ));
        }
        if sizes.is_empty() {
            return Err(invalid(
                path,
                "the list of group sizes is empty: expected at least one size ≥ 1, e.g. 2 or [2, 3]",
            ));
        }
        for (i, &s) in sizes.iter().enumerate() {
            if s == 0 || s > MAX_GROUP_SIZE {
                let at = if sizes.len() == 1 && matches!(self, GroupSizes::Uniform(_)) {
                    path.to_string()
                } else {
                    format!("{path}[{i}]")
                };
                return Err(invalid(
                    &at,
                    format!(
                        "group size {s} is invalid: expected a number from 1 to {MAX_GROUP_SIZE}"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Index of the group that contains child `index` (children numbered from any origin,
    /// negative allowed; groups of the cycle start at child 0).
    pub(crate) fn group_of(&self, index: i128) -> i128 {
        let sizes = self.sizes();
        let period: i128 = sizes.iter().map(|&s| s as i128).sum();
        let (q, mut r) = (index.div_euclid(period), index.rem_euclid(period));
        let mut j = 0;
        while r >= sizes[j] as i128 {
            r -= sizes[j] as i128;
            j += 1;
        }
        q * sizes.len() as i128 + j as i128
    }

    /// First and last child of group `group` (inverse of [`GroupSizes::group_of`]).
    pub(crate) fn children(&self, group: i128) -> (i128, i128) {
        let sizes = self.sizes();
        let period: i128 = sizes.iter().map(|&s| s as i128).sum();
        let n = sizes.len() as i128;
        let (q, j) = (group.div_euclid(n), group.rem_euclid(n) as usize);
        let offset: i128 = sizes[..j].iter().map(|&s| s as i128).sum();
        let first = q * period + offset;
        (first, first + sizes[j] as i128 - 1)
    }
}

/// Largest product of the periods (sums of sizes) of all levels: keeps every child index of a
/// group far from overflowing.
const MAX_PERIOD_PRODUCT: u128 = 1 << 62;

/// Most group sizes in the round-robin list of one level (each row walks the list).
pub const MAX_SIZES_PER_LEVEL: usize = 1_000;

/// Validates a list of levels of group sizes (`levels[i]`); `fixed` levels (the values, `*`, …,
/// named by `what`) come on top of them.
pub(crate) fn validate_levels(levels: &[GroupSizes], fixed: usize, what: &str) -> Result<()> {
    check_level_count(levels.len(), fixed, what)?;
    let mut product: u128 = 1;
    for (i, level) in levels.iter().enumerate() {
        let path = format!("levels[{i}]");
        level.validate(&path)?;
        let period: u128 = level.sizes().iter().map(|&s| s as u128).sum();
        product = product.saturating_mul(period);
        if product > MAX_PERIOD_PRODUCT {
            return Err(invalid(
                &path,
                "the group sizes are too large: one group of the top level would hold more than 2^62 values; expected smaller sizes or fewer levels",
            ));
        }
    }
    Ok(())
}

/// The levels of group sizes of a specification, prepared for [`LevelChain::leaf_range`]: a level
/// of size 1 (`[1]`) maps every group to itself and is skipped. At most 62 levels merge (their
/// periods multiply to at most 2^62), so a leaf range costs at most 62 steps and a build is
/// linear in the number of levels (it was quadratic: issue 11, 4,000 levels took 9 s).
pub(crate) struct LevelChain<'a> {
    levels: &'a [GroupSizes],
    /// Indices of the levels that merge groups, ascending.
    merging: Vec<usize>,
}

impl<'a> LevelChain<'a> {
    /// Prepares validated `levels`.
    pub(crate) fn new(levels: &'a [GroupSizes]) -> Self {
        let merging = (0..levels.len())
            .filter(|&i| levels[i].sizes() != [1])
            .collect();
        LevelChain { levels, merging }
    }

    /// Group of level `level` (1-based) that holds group `group` of the level below.
    pub(crate) fn group_of(&self, level: usize, group: i128) -> i128 {
        let sizes = &self.levels[level - 1];
        if sizes.sizes() == [1] {
            group
        } else {
            sizes.group_of(group)
        }
    }

    /// Range of level-0 children covered by group `group` at `level` (1-based: level 1 groups
    /// the children directly with `levels[0]`).
    pub(crate) fn leaf_range(&self, level: usize, group: i128) -> (i128, i128) {
        let (mut first, mut last) = (group, group);
        let below = self.merging.partition_point(|&i| i < level);
        for &i in self.merging[..below].iter().rev() {
            #[cfg(test)]
            LEAF_STEPS.with(|s| s.set(s.get() + 1));
            first = self.levels[i].children(first).0;
            last = self.levels[i].children(last).1;
        }
        (first, last)
    }
}

#[cfg(test)]
thread_local! {
    /// Steps taken by [`LevelChain::leaf_range`] on this thread (the cost model of the tests).
    pub(crate) static LEAF_STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

// ---------------------------------------------------------------------------------------------
// Exact decimal numbers

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

/// Ensures that, per level, each label names exactly one group: two different groups with the
/// same text (e.g. a custom label equal to a generated one) would silently merge.
pub(crate) struct LabelRegistry<K> {
    levels: Vec<std::collections::HashMap<String, K>>,
}

impl<K: PartialEq + Clone> LabelRegistry<K> {
    /// A registry for `height` levels.
    pub(crate) fn new(height: usize) -> Self {
        LabelRegistry {
            levels: (0..height).map(|_| Default::default()).collect(),
        }
    }

    /// Records that `label` names group `key` at `level`; error if it already names another.
    pub(crate) fn register(&mut self, level: usize, label: &str, key: &K) -> Result<()> {
        match self.levels[level].get(label) {
            Some(k) if k != key => Err(invalid(
                "",
                format!(
                    "label '{label}' would be used for two different groups at level {level}: expected distinct labels (check custom labels and missing-value markers)"
                ),
            )),
            Some(_) => Ok(()),
            None => {
                self.levels[level].insert(label.to_string(), key.clone());
                Ok(())
            }
        }
    }
}

/// Default value of the `missing` field: only the empty string counts as missing.
pub(crate) fn default_missing() -> Vec<String> {
    vec![String::new()]
}

/// True if `value` is one of the missing-value markers (compared after trimming whitespace).
pub(crate) fn is_missing(missing: &[String], value: &str) -> bool {
    let t = value.trim();
    missing.iter().any(|m| m.trim() == t)
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

    #[test]
    fn group_math_is_cyclic_and_invertible() {
        let g = GroupSizes::Cycle(vec![2, 3]);
        // children 0,1 → 0; 2,3,4 → 1; 5,6 → 2; 7,8,9 → 3; -1 → -1 (previous period's "3").
        let got: Vec<i128> = (-3..10).map(|i| g.group_of(i)).collect();
        assert_eq!(got, vec![-1, -1, -1, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3]);
        for grp in -4..6 {
            let (a, b) = g.children(grp);
            assert!((a..=b).all(|i| g.group_of(i) == grp));
            assert_ne!(g.group_of(a - 1), grp);
            assert_ne!(g.group_of(b + 1), grp);
        }
    }

    fn spec(json: serde_json::Value) -> HierarchySpec {
        serde_json::from_value(json).unwrap()
    }

    fn field_of(e: EngineError) -> (String, String) {
        match e {
            EngineError::InvalidConfig { field, message } => (field, message),
            other => panic!("expected an invalid configuration, got {other:?}"),
        }
    }

    #[test]
    fn more_levels_than_a_hierarchy_may_have_are_rejected() {
        // Issue 11: such specifications were stored, and every job using them failed.
        let values: Vec<String> = (0..5).map(|i| i.to_string()).collect();
        for (kind, fixed) in [("interval", 3), ("order", 2)] {
            let mk = |n: usize| {
                let mut j = serde_json::json!({"type": kind, "levels": vec![1; n]});
                if kind == "interval" {
                    j["width"] = 1.into();
                }
                spec(j)
            };
            let max = MAX_HEIGHT - fixed;
            let h = mk(max).build_values("c", &values).unwrap();
            assert_eq!(h.height(), MAX_HEIGHT, "{kind}");
            for n in [max + 1, 256, 100_000] {
                let s = mk(n);
                let (field, message) = field_of(s.validate().unwrap_err());
                assert_eq!(field, "levels", "{kind}");
                assert!(
                    message.contains(&format!("expected at most {max} levels, got {n}")),
                    "{message}"
                );
                assert_eq!(
                    field_of(s.build_values("c", &values).unwrap_err()).0,
                    "levels"
                );
            }
        }
        // Masking: one level per character of the longest value.
        let masking = spec(serde_json::json!({"type": "masking"}));
        let long = ["x".repeat(MAX_HEIGHT - 1)];
        assert_eq!(
            masking.build_values("c", &long).unwrap().height(),
            MAX_HEIGHT
        );
        let (field, message) = field_of(
            masking
                .build_values("c", &["x".repeat(MAX_HEIGHT)])
                .unwrap_err(),
        );
        assert_eq!(field, "");
        assert!(message.contains("at most 254 characters"), "{message}");
        // A round-robin list of sizes is walked per row: bounded too.
        let s = spec(serde_json::json!({"type": "order", "levels": [vec![1; 1001]]}));
        assert_eq!(field_of(s.validate().unwrap_err()).0, "levels[0]");
    }

    /// Steps of the leaf-range walks of one build.
    fn steps_of(s: &HierarchySpec, values: &[String]) -> u64 {
        LEAF_STEPS.with(|c| c.set(0));
        s.build_values("c", values).unwrap();
        LEAF_STEPS.with(|c| c.get())
    }

    #[test]
    fn the_build_cost_is_linear_in_the_levels() {
        // Issue 11: every label walked down all levels below it (quadratic: 4,000 levels took
        // 9 s). Levels of size 1 map a group to itself and are skipped, and at most 62 levels
        // merge groups (their periods multiply to at most 2^62).
        let values: Vec<String> = (0..200).map(|i| (i * 7).to_string()).collect();
        let interval = |levels: Vec<serde_json::Value>| {
            spec(serde_json::json!({"type": "interval", "width": 1, "levels": levels}))
        };
        let order = |levels: Vec<serde_json::Value>| {
            spec(serde_json::json!({"type": "order", "levels": levels}))
        };
        for build in [interval, order] {
            let ones = |n: usize| vec![serde_json::json!(1); n];
            // Only levels of size 1: no walk at all, whatever their number.
            assert_eq!(steps_of(&build(ones(250)), &values), 0);
            // Two merging levels among 248 of size 1: each label walks at most 2 levels.
            let mut mixed = ones(248);
            mixed[10] = serde_json::json!(2);
            mixed[100] = serde_json::json!([2, 3]);
            let labels = (values.len() * (mixed.len() + 1)) as u64;
            let steps = steps_of(&build(mixed.clone()), &values);
            assert!(steps > 0 && steps <= 2 * labels, "{steps} > 2 · {labels}");
            // The old walk took one step per level below each label: Σ levels ≈ 250²/2 per row.
            assert!(
                2 * labels < (values.len() * 248 * 247 / 2) as u64,
                "the bound separates linear from quadratic"
            );
            // A level of size 1 repeats the label below it: each row has at most five labels
            // (value, interval, two merged groups, `*`).
            let h = build(mixed).build_values("c", &values).unwrap();
            for row in h.rows() {
                let distinct: HashSet<&String> = row.iter().collect();
                assert!(distinct.len() <= 5, "{row:?}");
            }
        }
    }

    #[test]
    fn a_raised_cancel_flag_stops_a_build() {
        let values: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        let cancel = CancelFlag::new();
        cancel.cancel();
        for s in [
            serde_json::json!({"type": "interval", "width": 1, "levels": vec![1; 200]}),
            serde_json::json!({"type": "order", "levels": [2, 2]}),
            serde_json::json!({"type": "masking"}),
            serde_json::json!({"type": "date", "format": "dd.MM.yyyy"}),
            serde_json::json!({"type": "suppression"}),
        ] {
            let s = spec(s);
            let values: Vec<String> = if matches!(s, HierarchySpec::Date(_)) {
                (1900..2000).map(|y| format!("01.01.{y}")).collect()
            } else {
                values.clone()
            };
            assert_eq!(
                s.build_values_cancellable("c", &values, &cancel)
                    .unwrap_err(),
                EngineError::Cancelled,
                "{s:?}"
            );
            assert!(
                s.build_values_cancellable("c", &values, &CancelFlag::new())
                    .is_ok()
            );
        }
    }

    #[test]
    fn shares_are_clamped_monotone() {
        let mut s = vec![0.25, 0.1, 0.5, f64::NAN, 2.0];
        clamp_shares(&mut s);
        assert_eq!(s, vec![0.25, 0.25, 0.5, 1.0, 1.0]);
    }
}
