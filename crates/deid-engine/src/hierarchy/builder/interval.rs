//! Interval-based hierarchies for integers and decimals.
//!
//! Level 1 puts every number into an interval `[lo, hi[` (lower bound inclusive, upper bound
//! exclusive), either a regular tiling (`width`, anchored at `start`) or an explicit list of
//! consecutive `intervals`. Values below `bottom_coding` become `<b`, values at or above
//! `top_coding` become `>=t`; those two labels are kept on every level up to `*`. Each entry of
//! `levels` adds a level that merges consecutive groups of the level below (fan-out, round-robin
//! over a list of sizes, aligned at interval 0 = the one starting at `start` or the first
//! explicit interval). A final `*` level is always added, so the height is
//! `levels.len() + 3` regardless of the data.
//!
//! Default labels: `[20, 30[` for the interval from 20 (inclusive) to 30 (exclusive); merged
//! groups are labelled by their overall bounds (`[20, 40[`); intervals clipped by bottom/top
//! coding show the clipped bounds. Explicit intervals may carry a custom `label`, used on
//! level 1 and on higher levels whose group consists of that interval alone.
//! Values listed in `missing` (default: the empty string) keep their text up to `*`.
//!
//! Domain shares: width of the group / width of the whole covered range (lowest lower bound to
//! highest upper bound of all groups holding values; bottom/top-coded groups reach down to
//! `min` (or the smallest value) and up to `max` (or the largest value)); level 0 has `1/N`;
//! missing values keep `1/N`; `*` has 1.

use serde::{Deserialize, Serialize};

use super::{
    GroupSizes, LabelRegistry, LevelChain, MAX_SCALE, Number, Rows, check_cancel, default_missing,
    extent_range, extent_shares, format_units, invalid, is_missing, require_values,
    validate_levels,
};
use crate::cancel::CancelFlag;
use crate::error::{EngineError, Result};

/// Specification of an interval-based hierarchy.
///
/// JSON examples: `{"type":"interval","width":10,"levels":[2,2]}` (ages: `[20, 30[` →
/// `[20, 40[` → `[0, 40[` → `*`), `{"type":"interval","intervals":[{"from":0,"to":18,
/// "label":"minor"},{"from":18,"to":65},{"from":65,"to":120}]}`,
/// `{"type":"interval","width":10,"bottom_coding":20,"top_coding":90}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntervalSpec {
    /// Width of regular intervals (alternative to `intervals`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<Number>,
    /// Where a regular interval starts (default: `bottom_coding`, else 0). Only with `width`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Number>,
    /// Explicit consecutive intervals (alternative to `width`); any order, but no gaps or
    /// overlaps. Values outside them (and not bottom/top coded) are rejected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<IntervalDef>,
    /// Values below this bound are labelled `<b` (bottom coding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottom_coding: Option<Number>,
    /// Values at or above this bound are labelled `>=t` (top coding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_coding: Option<Number>,
    /// Smallest plausible value (inclusive); smaller values are rejected as errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Number>,
    /// Largest plausible value (inclusive); larger values are rejected as errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Number>,
    /// One entry per level above the intervals: how many groups of the level below form one
    /// group (`2`, or a round-robin list like `[2, 3]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<GroupSizes>,
    /// Values that mark a missing entry (kept as they are up to `*`); default `[""]`.
    #[serde(default = "default_missing")]
    pub missing: Vec<String>,
}

/// One explicit interval `[from, to[`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntervalDef {
    /// Lower bound (inclusive).
    pub from: Number,
    /// Upper bound (exclusive).
    pub to: Number,
    /// Custom label (default `[from, to[`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl IntervalSpec {
    /// Regular intervals of `width` with default settings.
    pub fn regular(width: Number) -> Self {
        IntervalSpec {
            width: Some(width),
            start: None,
            intervals: Vec::new(),
            bottom_coding: None,
            top_coding: None,
            min: None,
            max: None,
            levels: Vec::new(),
            missing: default_missing(),
        }
    }

    /// Explicit intervals with default settings.
    pub fn explicit(intervals: Vec<IntervalDef>) -> Self {
        IntervalSpec {
            width: None,
            intervals,
            ..IntervalSpec::regular(Number::from(1))
        }
    }

    /// Data-independent checks (see [`super::HierarchySpec::validate`]).
    pub(crate) fn check(&self) -> Result<()> {
        validate_levels(
            &self.levels,
            3,
            "the values, the intervals, one per entry of levels and *",
        )?;
        self.validate_bounds()?;
        let scale = self.spec_numbers().map(|n| n.scale()).max().unwrap_or(0);
        self.tiling(scale).map(|_| ())
    }

    /// Builds rows and shares for distinct `values`.
    pub(crate) fn rows(&self, values: &[&str], cancel: &CancelFlag) -> Result<Rows> {
        self.check()?;
        let chain = LevelChain::new(&self.levels);
        require_values(values)?;
        // Parse the values first: their scale decides the common unit.
        let parsed = self.parse_values(values)?;
        let scale = self
            .spec_numbers()
            .chain(parsed.iter().filter_map(|(_, n)| *n))
            .map(|n| n.scale())
            .max()
            .unwrap_or(0)
            .min(MAX_SCALE);
        let tiling = self.tiling(scale)?;
        let data_min = parsed.iter().filter_map(|(_, n)| *n).min();
        let data_max = parsed.iter().filter_map(|(_, n)| *n).max();
        let group_levels = self.levels.len() + 1; // intervals + merged levels
        let height = group_levels + 2;
        let n = values.len() as f64;
        let mut labeller = IntervalLabeller {
            chain,
            tiling,
            scale,
            group_levels,
            b: self.bottom_coding.map(|n| n.units(scale)),
            t: self.top_coding.map(|n| n.units(scale)),
            low_end: self.min.or(data_min).map(|n| n.units(scale)),
            high_end: self.max.or(data_max).map(|n| n.units(scale)),
            registry: LabelRegistry::new(height),
            last: vec![None; group_levels + 1],
        };
        let mut rows = Vec::with_capacity(values.len());
        let mut extents: Vec<Vec<(i128, i128)>> = Vec::with_capacity(values.len());
        for &(i, num) in &parsed {
            check_cancel(cancel)?;
            let value = values[i];
            let mut row = Vec::with_capacity(height);
            row.push(value.to_string());
            let mut ext = Vec::with_capacity(group_levels);
            labeller.label(value, i, num, &mut row, &mut ext)?;
            row.push("*".to_string());
            rows.push(row);
            extents.push(ext);
        }

        // Shares: width / range of everything covered.
        let range = extent_range(&extents);
        let shares = extents
            .iter()
            .map(|ext| {
                // An empty extent is a missing value.
                let widths = (!ext.is_empty())
                    .then(|| ext.iter().map(|&(lo, hi)| (hi - lo) as f64).collect());
                extent_shares(widths, group_levels, n, range)
            })
            .collect();
        Ok((rows, shares))
    }

    /// The values as numbers (`None`: a missing-value marker) with their positions in `values`,
    /// checked against `min` and `max` and sorted: numbers ascending (ties by text), then
    /// missing markers by text.
    fn parse_values(&self, values: &[&str]) -> Result<Vec<(usize, Option<Number>)>> {
        let mut parsed: Vec<(usize, Option<Number>)> = Vec::with_capacity(values.len());
        for (i, v) in values.iter().enumerate() {
            if is_missing(&self.missing, v) {
                parsed.push((i, None));
                continue;
            }
            let n = Number::parse(v).ok_or_else(|| {
                invalid("",
                    format!(
                        "value '{v}' is not a number: interval hierarchies need integers or decimals (list it in \"missing\" if it marks a missing value)"
                    ),
                )
            })?;
            if let Some(min) = self.min
                && n < min
            {
                return Err(invalid(
                    "min",
                    format!("value '{v}' is below the minimum {min}: expected values ≥ {min}"),
                ));
            }
            if let Some(max) = self.max
                && n > max
            {
                return Err(invalid(
                    "max",
                    format!("value '{v}' is above the maximum {max}: expected values ≤ {max}"),
                ));
            }
            parsed.push((i, Some(n)));
        }
        parsed.sort_by(|(i, a), (j, b)| match (a, b) {
            (Some(x), Some(y)) => x.cmp(y).then_with(|| values[*i].cmp(values[*j])),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => values[*i].cmp(values[*j]),
        });
        Ok(parsed)
    }

    /// All numbers of the specification (for the common scale).
    fn spec_numbers(&self) -> impl Iterator<Item = Number> + '_ {
        [
            self.width,
            self.start,
            self.bottom_coding,
            self.top_coding,
            self.min,
            self.max,
        ]
        .into_iter()
        .flatten()
        .chain(self.intervals.iter().flat_map(|i| [i.from, i.to]))
    }

    fn validate_bounds(&self) -> Result<()> {
        if let (Some(b), Some(t)) = (self.bottom_coding, self.top_coding)
            && b >= t
        {
            return Err(invalid(
                "top_coding",
                format!("top_coding {t} must be greater than bottom_coding {b}"),
            ));
        }
        if let (Some(min), Some(max)) = (self.min, self.max)
            && min > max
        {
            return Err(invalid(
                "max",
                format!("max {max} must not be smaller than min {min}"),
            ));
        }
        Ok(())
    }

    /// Validates the level-1 definition and converts it to units.
    fn tiling(&self, scale: u32) -> Result<Tiling> {
        match (self.width, self.intervals.is_empty()) {
            (Some(_), false) | (None, true) => Err(invalid(
                "",
                "expected exactly one of \"width\" (regular intervals) and \"intervals\" (a list of {\"from\", \"to\"})",
            )),
            (Some(w), true) => {
                if w <= Number::from(0) {
                    return Err(invalid(
                        "width",
                        format!("width {w} is invalid: expected a positive number"),
                    ));
                }
                let start = self
                    .start
                    .or(self.bottom_coding)
                    .map_or(0, |s| s.units(scale));
                Ok(Tiling::Regular {
                    start,
                    width: w.units(scale),
                })
            }
            (None, false) => self.explicit_tiling(scale),
        }
    }

    /// The explicit `intervals` in units, sorted by their lower bound: checked by
    /// [`Self::sorted_intervals`], and their labels distinct.
    fn explicit_tiling(&self, scale: u32) -> Result<Tiling> {
        if self.start.is_some() {
            return Err(invalid(
                "start",
                "\"start\" only applies to regular intervals (\"width\"); explicit intervals start at their \"from\"",
            ));
        }
        let list = self.sorted_intervals()?;
        let mut seen = std::collections::HashMap::new();
        for &(i, d) in &list {
            if let Some(l) = &d.label
                && let Some(prev) = seen.insert(l.clone(), i)
            {
                return Err(invalid(
                    &format!("intervals[{i}].label"),
                    format!(
                        "label '{l}' is also used by intervals[{prev}]: expected distinct labels"
                    ),
                ));
            }
        }
        Ok(Tiling::Explicit {
            bounds: list
                .iter()
                .map(|(_, d)| (d.from.units(scale), d.to.units(scale)))
                .collect(),
            labels: list.iter().map(|(_, d)| d.label.clone()).collect(),
        })
    }

    /// The explicit intervals with their positions in the specification, each checked to be
    /// non-empty with a non-blank label (if any), sorted by lower bound and checked to follow
    /// each other without overlap or gap.
    fn sorted_intervals(&self) -> Result<Vec<(usize, &IntervalDef)>> {
        let mut list: Vec<(usize, &IntervalDef)> = self.intervals.iter().enumerate().collect();
        for &(i, d) in &list {
            if d.from >= d.to {
                return Err(invalid(
                    &format!("intervals[{i}]"),
                    format!(
                        "interval [{}, {}[ is empty: expected \"from\" < \"to\"",
                        d.from, d.to
                    ),
                ));
            }
            if d.label.as_deref().is_some_and(|l| l.trim().is_empty()) {
                return Err(invalid(
                    &format!("intervals[{i}].label"),
                    "the label is empty: expected a non-empty text or no label",
                ));
            }
        }
        list.sort_by(|a, b| a.1.from.cmp(&b.1.from).then(a.0.cmp(&b.0)));
        for pair in list.windows(2) {
            let ((i, a), (j, b)) = (pair[0], pair[1]);
            if a.to > b.from {
                return Err(invalid(
                    &format!("intervals[{j}]"),
                    format!(
                        "interval [{}, {}[ overlaps intervals[{i}] [{}, {}[: expected intervals that do not overlap",
                        b.from, b.to, a.from, a.to
                    ),
                ));
            }
            if a.to < b.from {
                return Err(invalid(
                    &format!("intervals[{j}]"),
                    format!(
                        "gap between intervals[{i}] [{}, {}[ and intervals[{j}] [{}, {}[: values from {} to {} would not be covered; expected each interval to start where the previous one ends",
                        a.from, a.to, b.from, b.to, a.to, b.from
                    ),
                ));
            }
        }
        Ok(list)
    }
}

/// Labels the levels of one sorted value after another (the state of [`IntervalSpec::rows`]):
/// registers each label and caches the last group of each level, since sorted neighbours
/// mostly share groups.
struct IntervalLabeller<'a> {
    chain: LevelChain<'a>,
    tiling: Tiling,
    scale: u32,
    /// Levels between the values and `*` (intervals + merged levels).
    group_levels: usize,
    /// Bottom and top coding in units.
    b: Option<i128>,
    t: Option<i128>,
    /// Where bottom- and top-coded groups reach (`min`/`max`, or the data's extremes).
    low_end: Option<i128>,
    high_end: Option<i128>,
    registry: LabelRegistry<(u8, i128)>,
    /// Per level: the last group seen, its bounds and label.
    last: Vec<Option<(i128, i128, i128, String)>>,
}

impl IntervalLabeller<'_> {
    /// Appends the labels of levels 1..=`group_levels` of `value` (at position `i`; `num` is
    /// `None` for a missing-value marker) to `row` and their extents to `ext` (none for a
    /// missing value).
    fn label(
        &mut self,
        value: &str,
        i: usize,
        num: Option<Number>,
        row: &mut Vec<String>,
        ext: &mut Vec<(i128, i128)>,
    ) -> Result<()> {
        let (b, t, scale) = (self.b, self.t, self.scale);
        let Some(num) = num else {
            for level in 1..=self.group_levels {
                self.registry.register(level, value, &(0, i as i128))?;
                row.push(value.to_string());
            }
            return Ok(());
        };
        let u = num.units(scale);
        let class = if b.is_some_and(|b| u < b) {
            Class::Bottom
        } else if t.is_some_and(|t| u >= t) {
            Class::Top
        } else {
            Class::Index(self.tiling.index(value, u, scale)?)
        };
        match class {
            Class::Bottom => {
                let b = b.unwrap_or_default();
                let label = format!("<{}", format_units(b, scale));
                for level in 1..=self.group_levels {
                    self.registry.register(level, &label, &(1, 0))?;
                    row.push(label.clone());
                    ext.push((self.low_end.unwrap_or(b).min(b), b));
                }
            }
            Class::Top => {
                let t = t.unwrap_or_default();
                let label = format!(">={}", format_units(t, scale));
                for level in 1..=self.group_levels {
                    self.registry.register(level, &label, &(2, 0))?;
                    row.push(label.clone());
                    ext.push((t, self.high_end.unwrap_or(t).max(t)));
                }
            }
            Class::Index(mut g) => {
                #[allow(clippy::needless_range_loop)] // `level` indexes two tables
                for level in 1..=self.group_levels {
                    if level > 1 {
                        g = self.chain.group_of(level - 1, g);
                    }
                    // Rows are sorted, so neighbours mostly share groups.
                    let cached = &mut self.last[level];
                    if cached.as_ref().is_none_or(|c| c.0 != g) {
                        let (lo, hi, label) =
                            self.tiling.group(&self.chain, level - 1, g, b, t, scale)?;
                        self.registry.register(level, &label, &(3, g))?;
                        *cached = Some((g, lo, hi, label));
                    }
                    if let Some((_, lo, hi, label)) = cached {
                        row.push(label.clone());
                        ext.push((*lo, *hi));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Where a number falls at level 1.
enum Class {
    Bottom,
    Top,
    Index(i128),
}

/// Level-1 intervals in units of `10^-scale`.
enum Tiling {
    Regular {
        start: i128,
        width: i128,
    },
    Explicit {
        bounds: Vec<(i128, i128)>,
        labels: Vec<Option<String>>,
    },
}

fn overflow() -> EngineError {
    invalid(
        "",
        "the numbers are too large for exact interval arithmetic: expected smaller values or wider intervals",
    )
}

impl Tiling {
    /// Level-1 interval index of `u` (a value in units).
    fn index(&self, value: &str, u: i128, scale: u32) -> Result<i128> {
        match self {
            Tiling::Regular { start, width } => Ok(u
                .checked_sub(*start)
                .ok_or_else(overflow)?
                .div_euclid(*width)),
            Tiling::Explicit { bounds, .. } => {
                let k = bounds.partition_point(|&(from, _)| from <= u);
                if k > 0 && u < bounds[k - 1].1 {
                    Ok(k as i128 - 1)
                } else {
                    let (lo, hi) = (bounds[0].0, bounds[bounds.len() - 1].1);
                    Err(invalid(
                        "intervals",
                        format!(
                            "value '{value}' is outside the intervals [{}, {}[: expected a covered value; extend \"intervals\" or set \"bottom_coding\"/\"top_coding\"",
                            format_units(lo, scale),
                            format_units(hi, scale)
                        ),
                    ))
                }
            }
        }
    }

    /// Bounds and label of group `g` on group level `level` (0 = the intervals themselves),
    /// clipped to `[b, t[`.
    #[allow(clippy::too_many_arguments)]
    fn group(
        &self,
        levels: &LevelChain<'_>,
        level: usize,
        g: i128,
        b: Option<i128>,
        t: Option<i128>,
        scale: u32,
    ) -> Result<(i128, i128, String)> {
        let (first, last) = levels.leaf_range(level, g);
        let (mut lo, mut hi, custom) = match self {
            Tiling::Regular { start, width } => {
                let lo = first
                    .checked_mul(*width)
                    .and_then(|x| x.checked_add(*start));
                let hi = last
                    .checked_add(1)
                    .and_then(|x| x.checked_mul(*width))
                    .and_then(|x| x.checked_add(*start));
                match (lo, hi) {
                    (Some(lo), Some(hi)) => (lo, hi, None),
                    _ => return Err(overflow()),
                }
            }
            Tiling::Explicit { bounds, labels } => {
                let m = bounds.len() as i128 - 1;
                let (a, z) = (first.clamp(0, m) as usize, last.clamp(0, m) as usize);
                let custom = if a == z { labels[a].clone() } else { None };
                (bounds[a].0, bounds[z].1, custom)
            }
        };
        if let Some(b) = b {
            lo = lo.max(b);
        }
        if let Some(t) = t {
            hi = hi.min(t);
        }
        let label = custom.unwrap_or_else(|| {
            format!("[{}, {}[", format_units(lo, scale), format_units(hi, scale))
        });
        Ok((lo, hi, label))
    }
}

#[cfg(test)]
mod tests {
    use super::super::HierarchySpec;
    use super::*;

    fn n(s: &str) -> Number {
        Number::parse(s).unwrap()
    }

    fn table(spec: IntervalSpec, values: &[&str]) -> Vec<String> {
        let h = HierarchySpec::Interval(spec)
            .build_values("c", values)
            .unwrap();
        h.rows().iter().map(|r| r.join(";")).collect()
    }

    #[test]
    fn regular_intervals_with_groups() {
        let mut spec = IntervalSpec::regular(n("10"));
        spec.levels = vec![GroupSizes::Uniform(2)];
        // Hand-written: 10-wide intervals anchored at 0, pairs of them, then *.
        assert_eq!(
            table(spec, &["34", "7", "45", "-3", "20"]),
            vec![
                "-3;[-10, 0[;[-20, 0[;*",
                "7;[0, 10[;[0, 20[;*",
                "20;[20, 30[;[20, 40[;*",
                "34;[30, 40[;[20, 40[;*",
                "45;[40, 50[;[40, 60[;*",
            ]
        );
    }

    #[test]
    fn coding_clips_and_anchors() {
        let mut spec = IntervalSpec::regular(n("10"));
        spec.bottom_coding = Some(n("25"));
        spec.top_coding = Some(n("50"));
        spec.levels = vec![GroupSizes::Uniform(2)];
        // start defaults to bottom_coding: [25, 35[, [35, 45[, [45, 55[ clipped to [45, 50[.
        assert_eq!(
            table(spec, &["20", "25", "44", "47", "50", "90"]),
            vec![
                "20;<25;<25;*",
                "25;[25, 35[;[25, 45[;*",
                "44;[35, 45[;[25, 45[;*",
                "47;[45, 50[;[45, 50[;*",
                "50;>=50;>=50;*",
                "90;>=50;>=50;*",
            ]
        );
    }

    #[test]
    fn decimals_are_exact() {
        let mut spec = IntervalSpec::regular(n("0.1"));
        spec.levels = vec![GroupSizes::Cycle(vec![2, 3])];
        assert_eq!(
            table(spec, &["0.35", "0.2", "0.05", "0.51"]),
            vec![
                "0.05;[0, 0.1[;[0, 0.2[;*",
                "0.2;[0.2, 0.3[;[0.2, 0.5[;*",
                "0.35;[0.3, 0.4[;[0.2, 0.5[;*",
                "0.51;[0.5, 0.6[;[0.5, 0.7[;*",
            ]
        );
    }
}
