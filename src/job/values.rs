//! The report's `values`: per quasi-identifier, the most frequent values before and after
//! anonymization (bounded to [`TOP_VALUES`] each), with the records of the other values and,
//! after, of the suppressed ones. Computed from the base groups and the output's recoding (one
//! pass over the groups, labels looked up once per distinct generalized value), so it costs
//! little beside the output. Values go into the report only, never into a log.

use std::collections::{BTreeMap, HashMap};

use rayon::prelude::*;
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
/// quasi-identifier. Counted in dense per-code tables, chunks of base groups in parallel.
pub fn attribute_values<R: Recoding + ?Sized>(
    problem: &Problem,
    recoding: &R,
) -> BTreeMap<String, AttributeValues> {
    let base = problem.base_groups();
    let q = problem.qi_columns().len();
    let counts = (0..base.len())
        .into_par_iter()
        .with_min_len(1 << 16)
        .fold(
            || Counts::new(q),
            |mut acc, g| {
                let n = u64::from(base.counts[g]);
                for (i, counts) in acc.before.iter_mut().enumerate() {
                    add(counts, base.codes[g * q + i], n);
                }
                match recoding.recode(g) {
                    Some((levels, codes)) => {
                        for (i, per_level) in acc.after.iter_mut().enumerate() {
                            let level = usize::from(levels[i]);
                            if level >= per_level.len() {
                                per_level.resize_with(level + 1, Vec::new);
                            }
                            add(&mut per_level[level], codes[i], n);
                        }
                    }
                    None => acc.suppressed += n,
                }
                acc
            },
        )
        .reduce(|| Counts::new(q), Counts::merge);
    let Counts {
        before,
        after,
        suppressed,
    } = counts;
    let mut out = BTreeMap::new();
    for (i, qi) in problem.quasi_identifiers().iter().enumerate() {
        let h = &problem.hierarchies()[i];
        let column = problem.table().column(problem.qi_columns()[i]);
        let label = |level: usize, code: u32| h.label(level, code, column);
        // Base codes are the column's dictionary codes (level 0): the input as given, also for
        // data given at a floor of its hierarchy (`data_level`) or with a `min_level`.
        let b = nonzero(&before[i]).map(|(code, n)| (label(0, code), n));
        let a = (after[i].iter().enumerate())
            .flat_map(|(level, per_code)| nonzero(per_code).map(move |(c, n)| (level, c, n)))
            .map(|(level, code, n)| (label(level, code), n));
        let values = AttributeValues {
            before: distribution(b, None),
            after: distribution(a, Some(suppressed)),
        };
        out.insert(qi.column.clone(), values);
    }
    out
}

/// Records per code of each quasi-identifier: before, after (per level), and suppressed.
struct Counts {
    before: Vec<Vec<u64>>,
    after: Vec<Vec<Vec<u64>>>,
    suppressed: u64,
}

impl Counts {
    fn new(q: usize) -> Counts {
        Counts {
            before: vec![Vec::new(); q],
            after: vec![Vec::new(); q],
            suppressed: 0,
        }
    }

    fn merge(mut self, other: Counts) -> Counts {
        for (mine, theirs) in self.before.iter_mut().zip(&other.before) {
            add_all(mine, theirs);
        }
        for (mine, theirs) in self.after.iter_mut().zip(&other.after) {
            if theirs.len() > mine.len() {
                mine.resize_with(theirs.len(), Vec::new);
            }
            for (m, t) in mine.iter_mut().zip(theirs) {
                add_all(m, t);
            }
        }
        self.suppressed += other.suppressed;
        self
    }
}

/// Adds `n` records to `code` (the table grows to hold it).
fn add(counts: &mut Vec<u64>, code: u32, n: u64) {
    let c = code as usize;
    if c >= counts.len() {
        counts.resize(c + 1, 0);
    }
    counts[c] += n;
}

/// Adds the counts of `other` to `counts`, code by code.
fn add_all(counts: &mut Vec<u64>, other: &[u64]) {
    if other.len() > counts.len() {
        counts.resize(other.len(), 0);
    }
    for (c, o) in counts.iter_mut().zip(other) {
        *c += o;
    }
}

/// The codes with records, and their records.
fn nonzero(counts: &[u64]) -> impl Iterator<Item = (u32, u64)> + '_ {
    (counts.iter().enumerate())
        .filter(|(_, n)| **n > 0)
        .map(|(c, &n)| (c as u32, n))
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
