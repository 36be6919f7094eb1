//! Per-column, per-level tables computed once per problem, so that evaluating a transformation
//! only has to look at its classes (and often only at its suppressed classes).
//!
//! Every table that is summed over the records of a column (`loss_sum`, `log_area_sum`, …) is a
//! sum of fixed-point terms `count(x) · unit(x)` over the column's values x. The same sum taken over
//! the classes of any transformation (`Σ_class |class| · unit(class value)`) is then *exactly* equal
//! to the table entry, which is what makes the lower bounds exact and monotone.

use super::sum::{ExactSum, fixed_k_log_k, to_fixed};
use crate::hierarchy::{EncodedHierarchy, PerCode};

/// Tables of one quasi-identifier.
#[derive(Debug, Clone)]
pub(crate) struct ColumnTables {
    /// Number of hierarchy levels (including level 0).
    pub height: usize,
    /// Domain size D used by Loss's normalisation (distinct leaves of the hierarchy).
    pub domain_size: f64,
    /// `share[level][code]`: fixed-point domain share (materialized or analytic), in [0, 1].
    pub share: Vec<PerCode<i64>>,
    /// `loss_sum[level]` = Σ_x c0(x) · share(x at level), fixed point.
    pub loss_sum: Vec<i128>,
    /// `area[level][code]`: number of hierarchy leaves under a generalized value (materialized,
    /// also for hierarchies with analytic shares: KL-divergence and Ambiguity count domain points).
    pub area: Vec<PerCode<f64>>,
    /// `log_area[level][code]` = log2(area), fixed point.
    pub log_area: Vec<PerCode<i64>>,
    /// `log_area_sum[level]` = Σ_x c0(x) · log2 area(x at level), fixed point.
    pub log_area_sum: Vec<i128>,
    /// Number of leaves of the hierarchy (the area of the whole domain).
    pub leaves: f64,
    /// log2(leaves), fixed point.
    pub log_leaves: i64,
    /// `entropy_sum[level]` = Σ_x c0(x) · log2(c_level(gen x) / c0(x)) (generalization part of
    /// non-uniform entropy), fixed point, non-decreasing in the level.
    pub entropy_sum: Vec<i128>,
    /// Σ_x c0(x) · log2(n / c0(x)): the entropy of the column when all values are merged, i.e. the
    /// maximum of the generalization part.
    pub entropy_max: i128,
    /// `kl_bound[level]`: n · KL divergence of the column's marginal distribution from the
    /// distribution that is uniform within each generalized value, fixed point, made
    /// non-decreasing over the levels. A lower bound of n · KL of the whole table.
    pub kl_bound: Vec<i128>,
    /// Distinct generalized values present in the data, per level.
    pub distinct: Vec<usize>,
}

impl ColumnTables {
    /// Builds the tables of one quasi-identifier. `counts[x]` is the frequency of dictionary code
    /// x of `column`; `encoded` is `hierarchy` encoded against `column`.
    pub(crate) fn build(encoded: &EncodedHierarchy, counts: &[u32], n: u64) -> ColumnTables {
        let height = encoded.height();
        let leaves = encoded.domain_size as f64;
        let mut share = Vec::with_capacity(height);
        let mut loss_sum = Vec::with_capacity(height);
        let mut area = Vec::with_capacity(height);
        let mut log_area = Vec::with_capacity(height);
        let mut log_area_sum = Vec::with_capacity(height);
        let mut entropy_sum = Vec::with_capacity(height);
        let mut kl_bound = Vec::with_capacity(height);
        let mut distinct = Vec::with_capacity(height);
        let values_k_log_k: i128 = counts.iter().map(|&c| fixed_k_log_k(c as u64)).sum();
        let mut entropy_prev = 0i128;
        let mut kl_prev = 0i128;
        for level in 0..height {
            let map = encoded.generalize(0, level);
            let level_share = encoded
                .level_shares(level)
                .map(|s| to_fixed(s.clamp(0.0, 1.0)) as i64);
            // Areas count hierarchy leaves (domain points), also for analytic shares.
            let level_area = encoded.level_leaves(level).map(|l| l as f64);
            let level_log_area = level_area.map(|a| to_fixed(a.max(1.0).log2()) as i64);
            // Frequencies of the generalized values.
            let mut freq = vec![0u64; encoded.distinct(level)];
            for (x, &c) in counts.iter().enumerate() {
                freq[map.get(x as u32) as usize] += c as u64;
            }
            let mut loss = 0i128;
            let mut log_sum = 0i128;
            let mut entropy = ExactSum::default();
            for (x, &c) in counts.iter().enumerate() {
                let v = map.get(x as u32) as usize;
                loss += c as i128 * level_share.get(v as u32) as i128;
                log_sum += c as i128 * level_log_area.get(v as u32) as i128;
                if c > 0 {
                    let c = c as f64;
                    entropy.add(c * (freq[v] as f64 / c).log2());
                }
            }
            let freq_k_log_k: i128 = freq.iter().map(|&f| fixed_k_log_k(f)).sum();
            // Generalization never lowers these in exact arithmetic; the running maximum removes
            // rounding noise so that the bounds built on them are monotone bit for bit.
            entropy_prev = entropy_prev.max(entropy.fixed());
            kl_prev = kl_prev.max(values_k_log_k + log_sum - freq_k_log_k);
            share.push(level_share);
            loss_sum.push(loss);
            area.push(level_area);
            log_area.push(level_log_area);
            log_area_sum.push(log_sum);
            entropy_sum.push(entropy_prev);
            kl_bound.push(kl_prev);
            distinct.push(encoded.distinct(level));
        }
        let mut entropy_max = ExactSum::default();
        for &c in counts.iter().filter(|&&c| c > 0) {
            let c = c as f64;
            entropy_max.add(c * (n as f64 / c).log2());
        }
        ColumnTables {
            height,
            domain_size: encoded.domain_size as f64,
            share,
            loss_sum,
            area,
            log_area,
            log_area_sum,
            leaves,
            log_leaves: to_fixed(leaves.max(1.0).log2()) as i64,
            entropy_sum,
            entropy_max: entropy_max.fixed(),
            kl_bound,
            distinct,
        }
    }

    /// Hierarchy leaves under the generalized value `code` at `level`.
    #[inline]
    pub fn area(&self, level: usize, code: u32) -> f64 {
        self.area[level].get(code)
    }

    /// log2 of [`ColumnTables::area`], fixed point.
    #[inline]
    pub fn log_area(&self, level: usize, code: u32) -> i64 {
        self.log_area[level].get(code)
    }

    /// Heap size in bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let per_code = |v: &Vec<PerCode<i64>>| {
            v.iter().map(PerCode::heap_bytes).sum::<usize>()
                + v.capacity() * size_of::<PerCode<i64>>()
        };
        per_code(&self.share)
            + per_code(&self.log_area)
            + self.area.iter().map(PerCode::heap_bytes).sum::<usize>()
            + self.area.capacity() * size_of::<PerCode<f64>>()
            + (self.loss_sum.capacity()
                + self.log_area_sum.capacity()
                + self.entropy_sum.capacity()
                + self.kl_bound.capacity())
                * size_of::<i128>()
            + self.distinct.capacity() * size_of::<usize>()
    }
}
