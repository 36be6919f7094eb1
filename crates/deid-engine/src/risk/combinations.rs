//! The groups of every combination of quasi-identifiers, by partition refinement of the base
//! groups: a depth-first walk over the combinations in which each one is its parent (the
//! combination without its last attribute) split by one more column. Only blocks of two or more
//! base groups are carried down — a block of one base group can split no further (base groups
//! differ on the whole set) and counts the same in every descendant — so each step costs the
//! base groups still sharing a block with another, not the table. The keys (parent block, code)
//! go through a dense table where it is small enough, else a fast hash; no allocation per key.

use std::collections::HashMap;

use rayon::prelude::*;

use crate::cancel::CancelFlag;
use crate::hash::BuildCodeHasher;

/// Distinct groups and pairs of records within a group, of one combination.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Groups (distinct value combinations among the records).
    pub groups: u64,
    /// Σ over the groups of m·(m − 1)/2 (m: the group's records).
    pub same_pairs: u128,
}

impl GroupStats {
    fn add(&mut self, records: u64) {
        self.groups += 1;
        self.same_pairs += pairs(records);
    }

    /// The stats of groups of these sizes.
    pub fn of(sizes: impl Iterator<Item = u64>) -> GroupStats {
        sizes.fold(GroupStats::default(), |mut s, m| {
            s.add(m);
            s
        })
    }
}

/// m·(m − 1)/2.
fn pairs(m: u64) -> u128 {
    u128::from(m) * u128::from(m.saturating_sub(1)) / 2
}

/// Combinations whose keys (parent block × code) number at most this many are grouped through
/// a dense table (4 MiB of `u32`), the others through a hash map.
const DENSE_KEYS: u64 = 1 << 20;

/// A partition of the live base groups into blocks of at least two, plus what the blocks of
/// one contribute. The members keep the order of the base groups.
#[derive(Debug, Default)]
struct Level {
    /// The members' base groups (indices into [`Columns`]), increasing.
    groups: Vec<u32>,
    /// Each member's block, dense from 0.
    blocks: Vec<u32>,
    /// Each member's records.
    records: Vec<u64>,
    /// Blocks.
    block_count: u32,
    /// The blocks of one base group split off so far.
    frozen: GroupStats,
}

/// Scratch space of one refinement.
#[derive(Default)]
struct Scratch {
    /// Dense key (block × domain + code) → new block (`u32::MAX`: none yet).
    slot: Vec<u32>,
    /// The dense keys set in `slot`, to reset it.
    keys: Vec<u32>,
    /// The keys of a refinement too wide for `slot`.
    map: HashMap<u64, u32, BuildCodeHasher>,
    /// Each member's new block.
    ids: Vec<u32>,
    /// Members per new block.
    count: Vec<u32>,
    /// Records per new block.
    weight: Vec<u64>,
    /// New block → the child's block (`u32::MAX`: a block of one).
    remap: Vec<u32>,
}

/// The columns of the base groups with records, for the walk.
struct Columns {
    /// Per quasi-identifier, the code of every live base group.
    codes: Vec<Vec<u32>>,
    /// Per quasi-identifier, 1 + its largest code.
    domains: Vec<u64>,
}

/// The [`GroupStats`] of every combination of the `q` quasi-identifiers of base groups `codes`
/// (row-major, `q` codes per group) with `counts` records each (groups without records are left
/// out), indexed by the combination's bit mask (bit i: quasi-identifier i; index 0 is the empty
/// combination: everything in one group). The subtrees of the walk under each first attribute
/// run in parallel. `None` once `cancel` is raised (checked before each combination).
pub fn every_combination(
    codes: &[u32],
    counts: &[u32],
    q: usize,
    cancel: &CancelFlag,
) -> Option<Vec<GroupStats>> {
    assert!(q < 32, "too many quasi-identifiers for every combination");
    let live: Vec<usize> = (0..counts.len()).filter(|&g| counts[g] > 0).collect();
    let domain = |i: usize| {
        live.iter()
            .map(|&g| u64::from(codes[g * q + i]) + 1)
            .max()
            .unwrap_or(1)
    };
    // The walk refines its last column 2^(q−1) times and its first once: the widest columns go
    // first, so that the frequent refinements have few keys.
    let mut order: Vec<usize> = (0..q).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(domain(i)));
    let columns = Columns {
        codes: order
            .iter()
            .map(|&i| live.iter().map(|&g| codes[g * q + i]).collect())
            .collect(),
        domains: order.iter().map(|&i| domain(i)).collect(),
    };
    let records: Vec<u64> = live.iter().map(|&g| u64::from(counts[g])).collect();
    let mut root = Level::default();
    let total: u64 = records.iter().sum();
    match live.len() {
        0 => {}
        1 => root.frozen.add(total),
        m => {
            root.groups = (0..m as u32).collect();
            root.blocks = vec![0; m];
            root.records = records;
            root.block_count = 1;
        }
    }
    let mut out = vec![GroupStats::default(); 1 << q];
    out[0] = root.frozen;
    if root.block_count == 1 {
        out[0].add(total);
    }
    let subtrees: Vec<Vec<(usize, GroupStats)>> = (0..q)
        .into_par_iter()
        .map(|column| {
            let mut found = Vec::with_capacity(1 << (q - 1 - column));
            let mut levels: Vec<Level> = (0..q - column).map(|_| Level::default()).collect();
            let mut scratch = Scratch::default();
            visit(
                &columns,
                cancel,
                &root,
                0,
                column,
                &mut levels,
                &mut scratch,
                &mut found,
            );
            found
        })
        .collect();
    if cancel.is_cancelled() {
        return None;
    }
    for (mask, stats) in subtrees.into_iter().flatten() {
        let original: usize = (0..q)
            .filter(|&j| mask & 1 << j != 0)
            .map(|j| 1 << order[j])
            .sum();
        out[original] = stats;
    }
    Some(out)
}

/// Records the stats of `mask` plus `column` (refining `parent`, the partition of `mask`) in
/// `out` and descends into the combinations that add later columns.
#[allow(clippy::too_many_arguments)]
fn visit(
    columns: &Columns,
    cancel: &CancelFlag,
    parent: &Level,
    mask: usize,
    column: usize,
    levels: &mut [Level],
    scratch: &mut Scratch,
    out: &mut Vec<(usize, GroupStats)>,
) {
    if cancel.is_cancelled() {
        return;
    }
    let q = columns.codes.len();
    let mask = mask | 1 << column;
    let (child, deeper) = levels.split_first_mut().expect("a level per depth");
    let descend = column + 1 < q;
    let stats = refine(
        columns,
        parent,
        column,
        descend.then_some(&mut *child),
        scratch,
    );
    out.push((mask, stats));
    if !descend {
        return;
    }
    if child.groups.is_empty() {
        // Every block is final: the descendants have the same groups.
        fill(out, mask, column + 1, q, stats);
        return;
    }
    for next in column + 1..q {
        visit(columns, cancel, child, mask, next, deeper, scratch, out);
    }
}

/// Records `stats` for every combination that adds columns from `first` on to `mask`.
fn fill(
    out: &mut Vec<(usize, GroupStats)>,
    mask: usize,
    first: usize,
    q: usize,
    stats: GroupStats,
) {
    for column in first..q {
        let m = mask | 1 << column;
        out.push((m, stats));
        fill(out, m, column + 1, q, stats);
    }
}

/// Splits every block of `parent` by `column`: returns the stats of the refined partition and,
/// with `child`, writes its blocks of at least two there (the others to `child.frozen`).
fn refine(
    columns: &Columns,
    parent: &Level,
    column: usize,
    child: Option<&mut Level>,
    scratch: &mut Scratch,
) -> GroupStats {
    let codes = &columns.codes[column];
    let domain = columns.domains[column];
    let Scratch {
        slot,
        keys,
        map,
        ids,
        count,
        weight,
        remap,
    } = scratch;
    ids.clear();
    count.clear();
    weight.clear();
    let width = u64::from(parent.block_count) * domain;
    let members = parent
        .groups
        .iter()
        .zip(&parent.blocks)
        .zip(&parent.records);
    if width <= DENSE_KEYS {
        if slot.len() < width as usize {
            slot.resize(width as usize, u32::MAX);
        }
        for ((&g, &block), &records) in members {
            let key = u64::from(block) * domain + u64::from(codes[g as usize]);
            let entry = &mut slot[key as usize];
            if *entry == u32::MAX {
                *entry = count.len() as u32;
                keys.push(key as u32);
                count.push(0);
                weight.push(0);
            }
            let id = *entry as usize;
            count[id] += 1;
            weight[id] += records;
            ids.push(id as u32);
        }
        for &key in keys.iter() {
            slot[key as usize] = u32::MAX;
        }
        keys.clear();
    } else {
        for ((&g, &block), &records) in members {
            let key = u64::from(block) * domain + u64::from(codes[g as usize]);
            let next = count.len() as u32;
            let id = *map.entry(key).or_insert(next) as usize;
            if id == count.len() {
                count.push(0);
                weight.push(0);
            }
            count[id] += 1;
            weight[id] += records;
            ids.push(id as u32);
        }
        map.clear();
    }
    let mut stats = parent.frozen;
    for &w in weight.iter() {
        stats.add(w);
    }
    if let Some(child) = child {
        write_child(parent, child, ids, count, weight, remap);
    }
    stats
}

/// Writes the refinement of `parent` into `child`: the members of the new blocks of at least
/// two (renumbered), the records of the blocks of one added to `child.frozen`. `ids`, `count`
/// and `weight` are each member's new block and the members and records per new block;
/// `remap` is scratch.
fn write_child(
    parent: &Level,
    child: &mut Level,
    ids: &[u32],
    count: &[u32],
    weight: &[u64],
    remap: &mut Vec<u32>,
) {
    child.groups.clear();
    child.blocks.clear();
    child.records.clear();
    child.frozen = parent.frozen;
    remap.clear();
    let mut blocks = 0u32;
    for (&n, &w) in count.iter().zip(weight.iter()) {
        if n > 1 {
            remap.push(blocks);
            blocks += 1;
        } else {
            remap.push(u32::MAX);
            child.frozen.add(w);
        }
    }
    child.block_count = blocks;
    for (j, &id) in ids.iter().enumerate() {
        let block = remap[id as usize];
        if block != u32::MAX {
            child.groups.push(parent.groups[j]);
            child.blocks.push(block);
            child.records.push(parent.records[j]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_of_every_combination_by_hand() {
        // Base groups (a, b) with counts: (0, 0)×2, (0, 1)×1, (1, 1)×3, an empty (1, 0).
        let codes = [0, 0, 0, 1, 1, 1, 1, 0];
        let counts = [2, 1, 3, 0];
        let s = every_combination(&codes, &counts, 2, &CancelFlag::new()).unwrap();
        let stats = |groups, same_pairs| GroupStats { groups, same_pairs };
        // Nothing: one group of 6; {a}: 3, 3; {b}: 2, 4; {a, b}: 2, 1, 3.
        assert_eq!(s, [stats(1, 15), stats(2, 6), stats(2, 7), stats(3, 4)]);
        assert_eq!(
            every_combination(&[], &[], 1, &CancelFlag::new()).unwrap(),
            [GroupStats::default(); 2]
        );
        assert_eq!(
            every_combination(&[5], &[4], 1, &CancelFlag::new()).unwrap(),
            [stats(1, 6); 2]
        );
    }

    /// Wide codes (the hash map) and narrow ones (the dense table) against grouping every
    /// combination's keys in an ordered map.
    #[test]
    fn every_combination_equals_grouping_each_one() {
        let q = 5;
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let (mut codes, mut counts) = (Vec::new(), Vec::new());
        for _ in 0..3000 {
            for i in 0..q {
                // Column 0 has a wide domain: its keys exceed the dense table.
                codes.push(if i == 0 {
                    (1 << 21) + next(6) as u32 * 100_000
                } else {
                    next(2 + i as u64) as u32
                });
            }
            counts.push(next(4) as u32);
        }
        let got = every_combination(&codes, &counts, q, &CancelFlag::new()).unwrap();
        for (mask, stats) in got.iter().enumerate() {
            let mut groups = std::collections::BTreeMap::<Vec<u32>, u64>::new();
            for (g, &c) in counts.iter().enumerate().filter(|(_, c)| **c > 0) {
                let key = (0..q)
                    .filter(|i| mask & 1 << i != 0)
                    .map(|i| codes[g * q + i]);
                *groups.entry(key.collect()).or_default() += u64::from(c);
            }
            assert_eq!(
                *stats,
                GroupStats::of(groups.into_values()),
                "mask {mask:b}"
            );
        }
    }
}
