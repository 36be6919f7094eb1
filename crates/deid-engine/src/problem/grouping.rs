//! The base groups of a problem: its records grouped by their original quasi-identifier
//! codes, with counts and the histograms of the tracked sensitive attributes — and the group
//! lists ([`Groups`]) every check regroups.
//!
//! One pass over the rows with an open-addressing table of group numbers. Keys are the codes
//! packed into one `u64` (mixed radix over the dictionary sizes) when they fit, otherwise a
//! hash of the codes, confirmed by comparing the codes. No allocation per group: 4 bytes per
//! slot plus 8 per group while grouping, released afterwards. Large tables whose keys pack are
//! grouped by partitions on the pool, with the same result.

use crate::data::Table;
use crate::data::frequency::Frequencies;
use crate::data::subset::Subset;
use crate::hash::{hash_codes, mix};

/// The records each row of a table stands for: one each, one if a research subset selects it,
/// or a frequency table's counts (`docs/definitions.md` §1.1).
#[derive(Debug, Clone, Copy)]
pub enum RowWeights<'a> {
    /// Every row is one released record.
    Ones,
    /// Every row is one record of the population, released if the subset selects it.
    Subset(&'a Subset),
    /// Every row stands for its count of records (of which its released count are released).
    Counts(&'a Frequencies),
}

impl RowWeights<'_> {
    /// Released records of row `row`.
    #[inline]
    pub fn released(self, row: usize) -> u32 {
        match self {
            RowWeights::Ones => 1,
            RowWeights::Subset(s) => u32::from(s.contains(row)),
            RowWeights::Counts(f) => f.released(row),
        }
    }

    /// Records of row `row` in the population table (its released records without a research
    /// subset).
    #[inline]
    pub fn population(self, row: usize) -> u32 {
        match self {
            RowWeights::Ones | RowWeights::Subset(_) => 1,
            RowWeights::Counts(f) => f.count(row),
        }
    }

    /// Whether a research subset selects the released records (the table is the population).
    pub fn has_subset(self) -> bool {
        match self {
            RowWeights::Ones => false,
            RowWeights::Subset(_) => true,
            RowWeights::Counts(f) => f.has_subset(),
        }
    }
}

/// Per-class histograms of one sensitive attribute in CSR layout, values sorted ascending.
#[derive(Debug, Clone, Default)]
pub struct Histograms {
    /// `offsets[c]..offsets[c+1]` is the range of class c.
    pub offsets: Vec<u32>,
    /// Value codes.
    pub values: Vec<u32>,
    /// Frequencies.
    pub freqs: Vec<u32>,
}

impl Histograms {
    /// The histogram of class `c`: (value codes, frequencies).
    #[inline]
    pub fn get(&self, c: usize) -> (&[u32], &[u32]) {
        let (a, b) = (self.offsets[c] as usize, self.offsets[c + 1] as usize);
        (&self.values[a..b], &self.freqs[a..b])
    }
}

/// A list of groups (equivalence classes) of some transformation.
#[derive(Debug, Clone, Default)]
pub struct Groups {
    /// Generalized codes, row-major: `codes[g * q + i]` is the code of QI i at that transformation.
    pub codes: Vec<u32>,
    /// Records per group.
    pub counts: Vec<u32>,
    /// A representative base group (its original values generalize to this group).
    pub reps: Vec<u32>,
    /// With a research subset: records of the whole table per group (`counts` are the records
    /// in the subset); empty otherwise.
    pub pcounts: Vec<u32>,
    /// Per tracked sensitive attribute, the histograms of the groups.
    pub hists: Vec<Histograms>,
}

impl Groups {
    /// Number of groups.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// True if there are no groups.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Heap size in bytes (capacities of codes, counts, representatives and histograms).
    pub fn heap_bytes(&self) -> usize {
        (self.codes.capacity()
            + self.counts.capacity()
            + self.reps.capacity()
            + self.pcounts.capacity())
            * 4
            + self.hists.capacity() * std::mem::size_of::<Histograms>()
            + self
                .hists
                .iter()
                .map(|h| (h.offsets.capacity() + h.values.capacity() + h.freqs.capacity()) * 4)
                .sum::<usize>()
    }

    /// Releases spare capacity of every vector.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.codes.shrink_to_fit();
        self.counts.shrink_to_fit();
        self.reps.shrink_to_fit();
        self.pcounts.shrink_to_fit();
        for h in &mut self.hists {
            h.offsets.shrink_to_fit();
            h.values.shrink_to_fit();
            h.freqs.shrink_to_fit();
        }
    }

    /// Approximate heap size in 4-byte words.
    pub(crate) fn words(&self) -> usize {
        self.codes.len()
            + self.counts.len() * 2
            + self.pcounts.len()
            + self
                .hists
                .iter()
                .map(|h| h.offsets.len() + h.values.len() * 2)
                .sum::<usize>()
    }
}

/// Tables with at least this many rows are grouped by [`group_rows_partitioned`].
const PARTITIONED_MIN_ROWS: usize = 1 << 16;

/// Partitions of [`group_rows_partitioned`] (a power of two; fixed, so that the grouping does
/// not depend on the number of threads).
const PARTITION_BITS: u32 = 8;

/// The strides of the mixed-radix packing of one code per column (`sizes` = dictionary sizes)
/// into 64 bits, if the product of the sizes fits.
fn packing(sizes: &[u64]) -> Option<Vec<u64>> {
    let mut strides = vec![0u64; sizes.len()];
    let mut product: u64 = 1;
    for i in (0..sizes.len()).rev() {
        strides[i] = product;
        product = product.checked_mul(sizes[i])?;
    }
    Some(strides)
}

/// Adds `stride` times the code of each row of `range` to `out` (one per row).
fn add_codes(
    out: &mut [u64],
    codes: &crate::data::Codes,
    range: std::ops::Range<usize>,
    stride: u64,
) {
    fn add<T: Copy + Into<u64>>(out: &mut [u64], codes: &[T], stride: u64) {
        for (k, &c) in out.iter_mut().zip(codes) {
            *k = k.wrapping_add(c.into() * stride);
        }
    }
    use crate::data::Codes;
    match codes {
        Codes::U8(v) => add(out, &v[range], stride),
        Codes::U16(v) => add(out, &v[range], stride),
        Codes::U32(v) => add(out, &v[range], stride),
    }
}

/// One pass over the rows with one open-addressing table: the groups (codes and
/// representatives; counts are left empty) in the order of their first row, and the group of
/// every row. Keys are packed with `strides` when given, else hashed (and compared).
fn group_rows(
    cols: &[&crate::data::Codes],
    strides: Option<&[u64]>,
    n: usize,
) -> (Groups, Vec<u32>) {
    const EMPTY: u32 = u32::MAX;
    let q = cols.len();
    let mut groups = Groups::default();
    let mut keys: Vec<u64> = Vec::new();
    let mut slots: Vec<u32> = vec![EMPTY; 1 << 12];
    let mut shift = 64 - slots.len().trailing_zeros();
    let mut row_group = Vec::with_capacity(n);
    let mut key = vec![0u32; q];
    for row in 0..n {
        for (k, codes) in key.iter_mut().zip(cols) {
            *k = codes.get(row);
        }
        let stored = match strides {
            Some(s) => key
                .iter()
                .zip(s)
                .fold(0u64, |k, (&c, &s)| k.wrapping_add(c as u64 * s)),
            None => hash_codes(&key),
        };
        let mask = slots.len() - 1;
        let mut slot = (mix(stored) >> shift) as usize & mask;
        let g = loop {
            let g = slots[slot];
            if g == EMPTY {
                let g = groups.reps.len() as u32;
                slots[slot] = g;
                keys.push(stored);
                groups.codes.extend_from_slice(&key);
                groups.reps.push(g);
                break g;
            }
            let gi = g as usize;
            if keys[gi] == stored
                && (strides.is_some() || groups.codes[gi * q..gi * q + q] == key[..])
            {
                break g;
            }
            slot = (slot + 1) & mask;
        };
        row_group.push(g);
        if groups.reps.len() * 2 > slots.len() {
            // Grow (load factor ≤ 1/2) and re-insert every group.
            slots = vec![EMPTY; slots.len() * 2];
            shift = 64 - slots.len().trailing_zeros();
            let mask = slots.len() - 1;
            for (gi, &k) in keys.iter().enumerate() {
                let mut slot = (mix(k) >> shift) as usize & mask;
                while slots[slot] != EMPTY {
                    slot = (slot + 1) & mask;
                }
                slots[slot] = gi as u32;
            }
        }
    }
    (groups, row_group)
}

/// [`group_rows`] for packed keys on the pool, with the same result: the rows are split into
/// 2^[`PARTITION_BITS`] partitions by the high bits of their mixed key (in row order), each
/// partition is grouped with a table of its own (small enough for the caches), and the groups
/// are numbered in the order of their first rows by one scan over the rows.
fn group_rows_partitioned(
    cols: &[&crate::data::Codes],
    strides: &[u64],
    n: usize,
) -> (Groups, Vec<u32>) {
    use rayon::prelude::*;
    // 1. Packed keys, and per chunk of rows the rows of each partition.
    let (keys, chunk_parts) = packed_keys(cols, strides, n);
    // 2. Per partition: its rows in row order, grouped with its own table.
    let grouped: Vec<PartitionGroups> = (0..1usize << PARTITION_BITS)
        .into_par_iter()
        .map(|p| group_partition(&chunk_parts, p, &keys))
        .collect();
    drop(chunk_parts);
    // 3. Global numbers in the order of the first rows, and the codes of each group.
    let (global, first_rows) = number_groups(&grouped, &keys);
    drop(keys);
    let groups = first_row_codes(cols, &first_rows);
    // 4. The group of every row.
    let mut row_group = vec![0u32; n];
    for (part, ids) in grouped.iter().zip(&global) {
        for (&row, &l) in part.rows.iter().zip(&part.local) {
            row_group[row as usize] = ids[l as usize];
        }
    }
    (groups, row_group)
}

/// Rows per chunk of the partitioned grouping's parallel passes.
const CHUNK: usize = 1 << 16;

/// The partition of a packed key: the high bits of its mix.
#[inline]
fn part_of(key: u64) -> usize {
    (mix(key) >> (64 - PARTITION_BITS)) as usize
}

/// The packed key of every row (column by column, a chunk of rows at a time, on the pool), and
/// per chunk of rows the rows of each partition (in row order).
fn packed_keys(
    cols: &[&crate::data::Codes],
    strides: &[u64],
    n: usize,
) -> (Vec<u64>, Vec<Vec<Vec<u32>>>) {
    use rayon::prelude::*;
    let parts = 1usize << PARTITION_BITS;
    let mut keys = vec![0u64; n];
    let chunk_parts: Vec<Vec<Vec<u32>>> = keys
        .par_chunks_mut(CHUNK)
        .enumerate()
        .map(|(c, out)| {
            let range = c * CHUNK..c * CHUNK + out.len();
            for (codes, &stride) in cols.iter().zip(strides) {
                add_codes(out, codes, range.clone(), stride);
            }
            let mut by_part: Vec<Vec<u32>> = vec![Vec::new(); parts];
            for (row, &k) in range.zip(out.iter()) {
                by_part[part_of(k)].push(row as u32);
            }
            by_part
        })
        .collect();
    (keys, chunk_parts)
}

/// The groups of one partition, numbered locally in the order of their first rows.
struct PartitionGroups {
    /// The partition's rows, in row order.
    rows: Vec<u32>,
    /// The local group of each of them.
    local: Vec<u32>,
    /// The first row of each local group.
    firsts: Vec<u32>,
}

/// Groups the rows of partition `p` (gathered from `chunk_parts` in row order) by their
/// `keys` with an open-addressing table of its own.
fn group_partition(chunk_parts: &[Vec<Vec<u32>>], p: usize, keys: &[u64]) -> PartitionGroups {
    const EMPTY: u32 = u32::MAX;
    let rows: Vec<u32> = chunk_parts
        .iter()
        .flat_map(|c| c[p].iter().copied())
        .collect();
    let mut slots: Vec<u32> = vec![EMPTY; (rows.len() * 2).next_power_of_two().max(16)];
    let mask = slots.len() - 1;
    let shift = 64 - slots.len().trailing_zeros();
    let mut local_keys: Vec<u64> = Vec::new();
    let mut firsts: Vec<u32> = Vec::new();
    let mut local = Vec::with_capacity(rows.len());
    for &row in &rows {
        let key = keys[row as usize];
        // The low bits of the mixed key select the slot (the high ones the partition).
        let mut slot = ((mix(key) << PARTITION_BITS) >> shift) as usize & mask;
        let g = loop {
            let g = slots[slot];
            if g == EMPTY {
                let g = local_keys.len() as u32;
                slots[slot] = g;
                local_keys.push(key);
                firsts.push(row);
                break g;
            }
            if local_keys[g as usize] == key {
                break g;
            }
            slot = (slot + 1) & mask;
        };
        local.push(g);
    }
    PartitionGroups {
        rows,
        local,
        firsts,
    }
}

/// Global group numbers in the order of the first rows: per partition the number of each
/// local group, and the first row of every group. A partition's first rows come in row order,
/// so one scan over the rows hands out the numbers partition by partition.
fn number_groups(grouped: &[PartitionGroups], keys: &[u64]) -> (Vec<Vec<u32>>, Vec<u32>) {
    let mut first = vec![false; keys.len()];
    for part in grouped {
        for &row in &part.firsts {
            first[row as usize] = true;
        }
    }
    let mut global: Vec<Vec<u32>> = grouped
        .iter()
        .map(|part| Vec::with_capacity(part.firsts.len()))
        .collect();
    let total: usize = grouped.iter().map(|part| part.firsts.len()).sum();
    let mut first_rows: Vec<u32> = Vec::with_capacity(total);
    for (row, &is_first) in first.iter().enumerate() {
        if is_first {
            global[part_of(keys[row])].push(first_rows.len() as u32);
            first_rows.push(row as u32);
        }
    }
    (global, first_rows)
}

/// The groups whose first rows are `first_rows`, in that order: the codes of each group are
/// those of its first row (copied on the pool); counts are left empty.
fn first_row_codes(cols: &[&crate::data::Codes], first_rows: &[u32]) -> Groups {
    use rayon::prelude::*;
    let q = cols.len();
    let total = first_rows.len();
    let mut groups = Groups {
        codes: vec![0; total * q],
        reps: (0..total as u32).collect(),
        ..Groups::default()
    };
    groups
        .codes
        .par_chunks_mut(CHUNK * q)
        .zip(first_rows.par_chunks(CHUNK))
        .for_each(|(out, rows)| {
            for (codes, &row) in out.chunks_exact_mut(q).zip(rows) {
                for (c, col) in codes.iter_mut().zip(cols) {
                    *c = col.get(row as usize);
                }
            }
        });
    groups
}

/// Groups the rows by their quasi-identifier codes. `counts` and the histograms count the
/// released records of each row ([`RowWeights::released`]); with a research subset `pcounts`
/// count the records of the whole table (groups of unreleased records only have count 0).
/// Groups are numbered in the order of their first row, whichever way they are found
/// ([`group_rows_partitioned`] on large tables whose codes pack into 64 bits, else one pass over
/// the rows).
pub(super) fn base_groups(
    table: &Table,
    qi_columns: &[usize],
    slot_columns: &[usize],
    weights: RowWeights<'_>,
) -> (Groups, Vec<u32>) {
    let n = table.rows();
    let cols: Vec<&crate::data::Codes> =
        qi_columns.iter().map(|&c| &table.column(c).codes).collect();
    let sizes: Vec<u64> = qi_columns
        .iter()
        .map(|&c| table.column(c).dict.len().max(1) as u64)
        .collect();
    let (mut groups, row_group) = match packing(&sizes) {
        Some(strides) if n >= PARTITIONED_MIN_ROWS => group_rows_partitioned(&cols, &strides, n),
        strides => group_rows(&cols, strides.as_deref(), n),
    };
    // Records per group (released, and of the whole table with a subset).
    groups.counts = vec![0; groups.reps.len()];
    if weights.has_subset() {
        groups.pcounts = vec![0; groups.reps.len()];
    }
    match weights {
        RowWeights::Ones => {
            for &g in &row_group {
                groups.counts[g as usize] += 1;
            }
        }
        _ => {
            for (row, &g) in row_group.iter().enumerate() {
                groups.counts[g as usize] += weights.released(row);
                if let Some(p) = groups.pcounts.get_mut(g as usize) {
                    *p += weights.population(row);
                }
            }
        }
    }
    if !slot_columns.is_empty() {
        groups.hists = histograms(table, slot_columns, &row_group, groups.reps.len(), weights);
    }
    // The vectors grew by doubling; the index is kept for the problem's lifetime.
    groups.codes.shrink_to_fit();
    groups.counts.shrink_to_fit();
    groups.reps.shrink_to_fit();
    groups.pcounts.shrink_to_fit();
    for h in &mut groups.hists {
        h.values.shrink_to_fit();
        h.freqs.shrink_to_fit();
    }
    (groups, row_group)
}

/// The histograms of the released records of every group in every slot column: the released
/// rows ordered by group (counting sort), then the values of each group counted, every row
/// with its released records.
fn histograms(
    table: &Table,
    slot_columns: &[usize],
    row_group: &[u32],
    groups_n: usize,
    weights: RowWeights<'_>,
) -> Vec<Histograms> {
    let released = |row: usize| weights.released(row) > 0;
    let mut starts: Vec<u32> = vec![0; groups_n + 1];
    for (row, &g) in row_group.iter().enumerate() {
        if released(row) {
            starts[g as usize + 1] += 1;
        }
    }
    for g in 0..groups_n {
        starts[g + 1] += starts[g];
    }
    let mut order = vec![0u32; starts[groups_n] as usize];
    let mut fill = starts.clone();
    for (row, &g) in row_group.iter().enumerate() {
        if released(row) {
            order[fill[g as usize] as usize] = row as u32;
            fill[g as usize] += 1;
        }
    }
    drop(fill);
    let weighted = matches!(weights, RowWeights::Counts(_));
    let mut vals: Vec<(u32, u32)> = Vec::new();
    let mut hists = Vec::with_capacity(slot_columns.len());
    for &sc in slot_columns {
        let codes = &table.column(sc).codes;
        let mut h = Histograms {
            offsets: Vec::with_capacity(groups_n + 1),
            ..Default::default()
        };
        h.offsets.push(0);
        for g in 0..groups_n {
            vals.clear();
            let (a, b) = (starts[g] as usize, starts[g + 1] as usize);
            vals.extend(order[a..b].iter().map(|&row| {
                let row = row as usize;
                (
                    codes.get(row),
                    if weighted { weights.released(row) } else { 1 },
                )
            }));
            vals.sort_unstable_by_key(|&(code, _)| code);
            for run in vals.chunk_by(|a, b| a.0 == b.0) {
                h.values.push(run[0].0);
                h.freqs.push(run.iter().map(|&(_, w)| w).sum());
            }
            h.offsets.push(h.values.len() as u32);
        }
        hists.push(h);
    }
    hists
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A deterministic stream of numbers (splitmix64).
    pub(in crate::problem) fn numbers(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut state = seed;
        move |bound| crate::hash::splitmix64(&mut state) % bound
    }

    /// The partitioned grouping of large tables gives exactly the groups, their order (first
    /// rows) and the row → group map of the one-pass grouping, on skewed data (many repeats and
    /// many singletons), whatever the number of threads.
    #[test]
    fn partitioned_grouping_equals_the_one_pass_grouping() {
        let mut next = numbers(7);
        let rows = PARTITIONED_MIN_ROWS + 12_345;
        let data: Vec<Vec<String>> = (0..rows)
            .map(|_| {
                let common = next(4) > 0;
                vec![
                    next(if common { 3 } else { 1000 }).to_string(),
                    next(if common { 5 } else { 500 }).to_string(),
                    next(7).to_string(),
                ]
            })
            .collect();
        let table = Table::from_rows(&["a", "b", "c"], &data).unwrap();
        let cols: Vec<&crate::data::Codes> = (0..3).map(|c| &table.column(c).codes).collect();
        let sizes: Vec<u64> = (0..3).map(|c| table.column(c).dict.len() as u64).collect();
        let strides = packing(&sizes).unwrap();
        let (one, one_rows) = group_rows(&cols, Some(&strides), rows);
        let (hashed, hashed_rows) = group_rows(&cols, None, rows);
        assert_eq!(one.codes, hashed.codes);
        assert_eq!(one_rows, hashed_rows);
        assert!(
            one.reps.len() > 1000 && one.reps.len() < rows / 2,
            "{}",
            one.reps.len()
        );
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let (parted, parted_rows) =
                pool.install(|| group_rows_partitioned(&cols, &strides, rows));
            assert_eq!(parted.codes, one.codes, "{threads} threads");
            assert_eq!(parted.reps, one.reps);
            assert_eq!(parted_rows, one_rows);
        }
    }
}
