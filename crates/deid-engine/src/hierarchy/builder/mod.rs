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
mod groups;
pub mod interval;
pub mod masking;
pub mod order;

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::{Hierarchy, MAX_HEIGHT};
use crate::cancel::CancelFlag;
use crate::data::Column;
use crate::error::{EngineError, Result};

pub(crate) use crate::decimal::format_units;
pub use crate::decimal::{MAX_SCALE, Number};
pub use date::{DateFormat, DateGranularity, DateSpec};
#[cfg(test)]
pub(crate) use groups::LEAF_STEPS;
pub use groups::{GroupSizes, MAX_SIZES_PER_LEVEL};
pub(crate) use groups::{LevelChain, validate_levels};
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
