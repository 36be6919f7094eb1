//! The report's `values`: per quasi-identifier, the most frequent values before and after
//! anonymization (bounded to [`TOP_VALUES`] each), with the records of the other values and,
//! after, of the suppressed ones. Computed from the base groups and the output's recoding (one
//! pass over the groups, labels looked up once per distinct generalized value), so it costs
//! little beside the output. Values go into the report only, never into a log.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use deid_engine::Problem;
use deid_engine::output::Recoding;

/// Most values listed per attribute and side.
pub const TOP_VALUES: usize = 10;

/// One value and its records.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValueCount {
    /// The text as written (generalized after anonymization).
    pub value: String,
    /// Records showing it.
    pub records: u64,
}

/// The distribution of one attribute's values on one side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValueDistribution {
    /// Distinct values (suppressed records not counted).
    pub distinct: usize,
    /// The most frequent values, most records first (ties: by value).
    pub top: Vec<ValueCount>,
    /// Records of the values not in `top`.
    pub other_records: u64,
    /// Records suppressed (after anonymization only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppressed_records: Option<u64>,
}

/// An attribute before and after.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttributeValues {
    /// The input.
    pub before: ValueDistribution,
    /// The output.
    pub after: ValueDistribution,
}

/// Column → its values before and after `recoding` (an output of `problem`), for every
/// quasi-identifier.
pub fn attribute_values<R: Recoding + ?Sized>(
    problem: &Problem,
    recoding: &R,
) -> BTreeMap<String, AttributeValues> {
    let base = problem.base_groups();
    let q = problem.qi_columns().len();
    let mut before: Vec<HashMap<u32, u64>> = vec![HashMap::new(); q];
    let mut after: Vec<HashMap<(u8, u32), u64>> = vec![HashMap::new(); q];
    let mut suppressed = 0u64;
    for g in 0..base.len() {
        let n = u64::from(base.counts[g]);
        for (i, counts) in before.iter_mut().enumerate() {
            *counts.entry(base.codes[g * q + i]).or_default() += n;
        }
        match recoding.recode(g) {
            Some((levels, codes)) => {
                for (i, counts) in after.iter_mut().enumerate() {
                    *counts.entry((levels[i], codes[i])).or_default() += n;
                }
            }
            None => suppressed += n,
        }
    }
    let mut out = BTreeMap::new();
    for (i, qi) in problem.quasi_identifiers().iter().enumerate() {
        let h = &problem.hierarchies()[i];
        let column = problem.table().column(problem.qi_columns()[i]);
        let label = |level: usize, code: u32| h.label(level, code, column);
        // Base codes are the column's dictionary codes (level 0): the input as given, also for
        // data given at a floor of its hierarchy (`data_level`) or with a `min_level`.
        let b = before[i].iter().map(|(&code, &n)| (label(0, code), n));
        let a = after[i]
            .iter()
            .map(|(&(level, code), &n)| (label(level as usize, code), n));
        let values = AttributeValues {
            before: distribution(b, None),
            after: distribution(a, Some(suppressed)),
        };
        out.insert(qi.column.clone(), values);
    }
    out
}

/// The distribution of `(text, records)` pairs (a text may come more than once).
fn distribution<'a>(
    pairs: impl Iterator<Item = (&'a str, u64)>,
    suppressed: Option<u64>,
) -> ValueDistribution {
    let mut by_text: HashMap<&str, u64> = HashMap::new();
    for (text, n) in pairs {
        *by_text.entry(text).or_default() += n;
    }
    let mut all: Vec<(&str, u64)> = by_text.into_iter().collect();
    all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let other = all.iter().skip(TOP_VALUES).map(|x| x.1).sum();
    ValueDistribution {
        distinct: all.len(),
        top: (all.iter().take(TOP_VALUES))
            .map(|&(value, records)| ValueCount {
                value: value.to_string(),
                records,
            })
            .collect(),
        other_records: other,
        suppressed_records: suppressed,
    }
}
