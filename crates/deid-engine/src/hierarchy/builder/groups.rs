//! Group arithmetic of the builders: the group sizes of one level (uniform or cyclic), their
//! validation, and the chain of levels that maps a leaf to its group at every level.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{check_level_count, invalid};
use crate::error::Result;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
