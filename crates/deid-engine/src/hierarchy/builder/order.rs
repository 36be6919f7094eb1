//! Order-based hierarchies: sort the values (numerically, lexicographically or in an explicit
//! order), then merge runs of consecutive values level by level.
//!
//! Each entry of `levels` adds a level: level 1 groups `levels[0]` consecutive values, level 2
//! groups `levels[1]` consecutive groups of level 1, and so on (a list of sizes is used
//! round-robin). A final `*` level is always added: height = `levels.len() + 2`.
//!
//! Labels (`labels`): `range` (default) → `[first, last]` of the group in the order, a group of
//! one value keeps the value's text; `set` → `{a, b, c}` listing every value of the group in
//! order. Lexicographic order compares the UTF-8 text byte by byte (code-point order).
//!
//! With an explicit order (`values`), the hierarchy has a row for every listed value (the
//! listed values are the attribute's domain, even those absent from the data), and every value
//! of the data must be listed. Domain shares: values in the group / N.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::{
    GroupSizes, LabelRegistry, LevelChain, Number, Rows, check_cancel, clamp_shares, invalid,
    require_values, validate_levels,
};
use crate::cancel::CancelFlag;
use crate::error::Result;

/// How values are ordered before grouping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SortOrder {
    /// Numeric if every value is a number, otherwise lexicographic.
    #[default]
    Auto,
    /// By numeric value (every value must be a number).
    Numeric,
    /// By text (UTF-8 code points).
    Lexicographic,
}

/// How groups are labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderLabels {
    /// `[first, last]`; a single value keeps its text.
    #[default]
    Range,
    /// `{a, b, c}`: all values of the group.
    Set,
}

/// Specification of an order-based hierarchy.
///
/// JSON examples: `{"type":"order","levels":[3,2]}`,
/// `{"type":"order","values":["none","primary","secondary","tertiary"],"levels":[2],"labels":"set"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrderSpec {
    /// Sort order (ignored with `values`, where it must stay `auto`).
    #[serde(default)]
    pub order: SortOrder,
    /// Explicit order of all values of the domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    /// Group sizes per level (`2` or a round-robin list `[2, 3]`).
    #[serde(default)]
    pub levels: Vec<GroupSizes>,
    /// Label style.
    #[serde(default)]
    pub labels: OrderLabels,
}

impl OrderSpec {
    /// An order-based specification with the given group sizes per level and defaults otherwise.
    pub fn new(levels: Vec<GroupSizes>) -> Self {
        OrderSpec {
            order: SortOrder::Auto,
            values: None,
            levels,
            labels: OrderLabels::Range,
        }
    }

    /// Data-independent checks (see [`super::HierarchySpec::validate`]).
    pub(crate) fn check(&self) -> Result<()> {
        validate_levels(&self.levels, 2, "the values, one per entry of levels and *")?;
        if let Some(list) = &self.values {
            if self.order != SortOrder::Auto {
                return Err(invalid(
                    "order",
                    "\"order\" cannot be combined with an explicit order in \"values\"",
                ));
            }
            if list.is_empty() {
                return Err(invalid(
                    "values",
                    "the explicit order is empty: expected every value of the column in order",
                ));
            }
            let mut seen = HashSet::with_capacity(list.len());
            for (i, v) in list.iter().enumerate() {
                if !seen.insert(v.as_str()) {
                    return Err(invalid(
                        &format!("values[{i}]"),
                        format!("value '{v}' is listed twice: expected each value once"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Builds rows and shares for distinct `values`.
    pub(crate) fn rows(&self, values: &[&str], cancel: &CancelFlag) -> Result<Rows> {
        self.check()?;
        let domain = self.domain(values)?;

        let n = domain.len();
        let height = self.levels.len() + 2;
        let mut registry: LabelRegistry<i128> = LabelRegistry::new(height);
        let mut rows = Vec::with_capacity(n);
        let mut shares = Vec::with_capacity(n);
        let chain = LevelChain::new(&self.levels);
        for (pos, value) in domain.iter().enumerate() {
            check_cancel(cancel)?;
            let mut row = Vec::with_capacity(height);
            let mut share = Vec::with_capacity(height);
            row.push(value.to_string());
            share.push(1.0 / n as f64);
            let mut g = pos as i128;
            for level in 1..=self.levels.len() {
                g = chain.group_of(level, g);
                let (first, last) = chain.leaf_range(level, g);
                let (a, z) = (first.max(0) as usize, last.min(n as i128 - 1) as usize);
                let label = match self.labels {
                    OrderLabels::Range if a == z => domain[a].to_string(),
                    OrderLabels::Range => format!("[{}, {}]", domain[a], domain[z]),
                    OrderLabels::Set => format!("{{{}}}", domain[a..=z].join(", ")),
                };
                registry.register(level, &label, &g)?;
                row.push(label);
                share.push((z - a + 1) as f64 / n as f64);
            }
            row.push("*".to_string());
            share.push(1.0);
            clamp_shares(&mut share);
            rows.push(row);
            shares.push(share);
        }
        Ok((rows, shares))
    }

    /// The values in their order: the explicit `values` (which must list every value of the
    /// column), else the column's values sorted by `order`.
    fn domain<'v>(&'v self, values: &[&'v str]) -> Result<Vec<&'v str>> {
        Ok(match &self.values {
            Some(list) => {
                let seen: HashSet<&str> = list.iter().map(String::as_str).collect();
                let mut absent: Vec<&str> = values
                    .iter()
                    .copied()
                    .filter(|v| !seen.contains(v))
                    .collect();
                if !absent.is_empty() {
                    absent.sort_unstable();
                    let total = absent.len();
                    let shown: Vec<String> =
                        absent.iter().take(10).map(|v| format!("'{v}'")).collect();
                    return Err(invalid(
                        "values",
                        format!(
                            "{total} value(s) of the column are not in the explicit order, e.g. {}: expected every value of the column to be listed",
                            shown.join(", ")
                        ),
                    ));
                }
                list.iter().map(String::as_str).collect()
            }
            None => {
                require_values(values)?;
                let mut sorted = values.to_vec();
                let numbers: Option<Vec<Number>> =
                    values.iter().map(|v| Number::parse(v)).collect();
                match (self.order, numbers) {
                    (SortOrder::Numeric | SortOrder::Auto, Some(_)) => {
                        sorted.sort_by(|a, b| {
                            // Both parse: checked above.
                            let (x, y) = (Number::parse(a), Number::parse(b));
                            x.cmp(&y).then_with(|| a.cmp(b))
                        });
                    }
                    (SortOrder::Numeric, None) => {
                        let bad = values
                            .iter()
                            .find(|v| Number::parse(v).is_none())
                            .copied()
                            .unwrap_or_default();
                        return Err(invalid(
                            "order",
                            format!(
                                "value '{bad}' is not a number: numeric order needs numbers only (use \"order\": \"lexicographic\")"
                            ),
                        ));
                    }
                    (SortOrder::Auto | SortOrder::Lexicographic, _) => sorted.sort_unstable(),
                }
                sorted
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::HierarchySpec;
    use super::*;

    fn table(spec: OrderSpec, values: &[&str]) -> Vec<String> {
        let h = HierarchySpec::Order(spec)
            .build_values("c", values)
            .unwrap();
        h.rows().iter().map(|r| r.join(";")).collect()
    }

    #[test]
    fn numeric_order_with_ranges() {
        let spec = OrderSpec::new(vec![GroupSizes::Uniform(2), GroupSizes::Uniform(2)]);
        // 1 2 | 5 10 | 20  → [1, 2] [5, 10] | 20  → [1, 10] | 20
        assert_eq!(
            table(spec, &["10", "2", "20", "1", "5"]),
            vec![
                "1;[1, 2];[1, 10];*",
                "2;[1, 2];[1, 10];*",
                "5;[5, 10];[1, 10];*",
                "10;[5, 10];[1, 10];*",
                "20;20;20;*",
            ]
        );
    }

    #[test]
    fn explicit_order_with_sets_covers_the_domain() {
        let mut spec = OrderSpec::new(vec![GroupSizes::Cycle(vec![1, 2])]);
        spec.values = Some(vec![
            "low".into(),
            "mid".into(),
            "high".into(),
            "top".into(),
        ]);
        spec.labels = OrderLabels::Set;
        let h = HierarchySpec::Order(spec)
            .build_values("c", &["high", "low"])
            .unwrap();
        let got: Vec<String> = h.rows().iter().map(|r| r.join(";")).collect();
        assert_eq!(
            got,
            vec![
                "low;{low};*",
                "mid;{mid, high};*",
                "high;{mid, high};*",
                "top;{top};*"
            ]
        );
        let s = h.shares().unwrap();
        assert_eq!(s[1], vec![0.25, 0.5, 1.0]);
    }
}
