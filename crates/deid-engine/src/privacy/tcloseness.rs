//! t-closeness (Li, Li and Venkatasubramanian, ICDE 2007): the earth mover's distance (EMD)
//! between a class's distribution p of the sensitive attribute and the table's distribution q is
//! at most t, for three ground distances.
//!
//! All distances are computed exactly in integers: with n records in the table, N in the class,
//! global counts g_v and class counts c_v, p_v − q_v = (n·c_v − N·g_v)/(n·N), so every sum below
//! is an integer divided once by a product of n, N and a normalisation at the end.
//!
//! * Equal: EMD = ½ Σ_v |p_v − q_v|.
//! * Ordered (values at positions 0..m−1): EMD = Σ_{i<m−1} |Σ_{j≤i} (p_j − q_j)| / (m − 1).
//! * Hierarchical (hierarchy with levels 0..h, ground distance level(LCA)/h): the tree is an
//!   ultrametric, so EMD = (1/h) Σ_{levels l<h} Σ_{nodes Y at l} max(0, p_Y − q_Y), where p_Y, q_Y
//!   are the masses under Y. This equals Li et al.'s Σ_nodes (level/h)·min(pos_extra, neg_extra):
//!   min(pos, neg) of a node is the sum of its children's deficits minus its own deficit. When
//!   the top level has several values, moving mass between them costs 1 (virtual root).
//!
//! Per class only the values present in the class are visited. The ordered and hierarchical
//! distances need those values in order: up to [`STACK`] values are sorted in a stack buffer;
//! larger classes walk the whole order and look their counts up by binary search.

use super::SensitiveDomain;
use crate::error::{EngineError, Result};
use crate::hierarchy::EncodedHierarchy;

/// Classes with at most this many distinct sensitive values are sorted on the stack.
pub const STACK: usize = 512;

/// Most levels a sensitive hierarchy may have.
pub const MAX_LEVELS: usize = 256;

/// t-closeness with equal ground distance.
#[derive(Debug, Clone)]
pub struct EqualDistance {
    n: i128,
    global: Vec<u32>,
}

impl EqualDistance {
    /// Heap size in bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.global.capacity() * 4
    }

    /// Compiles the distance against the table's distribution.
    pub fn new(domain: &SensitiveDomain) -> EqualDistance {
        EqualDistance {
            n: domain.n as i128,
            global: domain.global_counts.clone(),
        }
    }

    /// EMD between the class (size `count`, sorted histogram) and the table.
    pub fn emd(&self, count: u32, values: &[u32], freqs: &[u32]) -> f64 {
        let (n, bn) = (self.n, count as i128);
        if n == 0 || bn == 0 {
            return 0.0;
        }
        // Σ_all |n c − N g| = Σ_{v ∈ class} (|n c − N g| − N g) + N n.
        let mut d = bn * n;
        for (&v, &f) in values.iter().zip(freqs) {
            let ng = bn * self.global[v as usize] as i128;
            d += (n * f as i128 - ng).abs() - ng;
        }
        d as f64 / (2 * n * bn) as f64
    }
}

/// The order of the sensitive values for the ordered distance: numeric if every value parses as
/// a finite number (ties broken lexicographically), else lexicographic. Only values occurring in
/// the data (count > 0) take part. Returns the codes in order.
pub fn value_order(domain: &SensitiveDomain) -> Vec<u32> {
    let mut codes: Vec<u32> = (0..domain.global_counts.len() as u32)
        .filter(|&c| domain.global_counts[c as usize] > 0)
        .collect();
    let numbers: Option<Vec<f64>> = domain
        .values
        .iter()
        .map(|v| v.trim().parse::<f64>().ok().filter(|x| x.is_finite()))
        .collect();
    let values = &domain.values;
    match numbers {
        Some(x) => codes.sort_by(|&a, &b| {
            x[a as usize]
                .total_cmp(&x[b as usize])
                .then_with(|| values[a as usize].cmp(&values[b as usize]))
        }),
        None => codes.sort_by(|&a, &b| values[a as usize].cmp(&values[b as usize])),
    }
    codes
}

/// t-closeness with ordered ground distance.
#[derive(Debug, Clone)]
pub struct OrderedDistance {
    n: i128,
    /// Position of every value code in the order (`u32::MAX` for values absent from the data).
    pos: Vec<u32>,
    /// Codes by position.
    order: Vec<u32>,
    /// `cum[i]` = global records with position ≤ i.
    cum: Vec<u64>,
    /// `cum_sum[k]` = Σ_{i<k} cum[i].
    cum_sum: Vec<i128>,
}

impl OrderedDistance {
    /// Heap size in bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        (self.pos.capacity() + self.order.capacity()) * 4
            + self.cum.capacity() * 8
            + self.cum_sum.capacity() * 16
    }

    /// Compiles the distance: value order and cumulative global counts.
    pub fn new(domain: &SensitiveDomain) -> OrderedDistance {
        let order = value_order(domain);
        let mut pos = vec![u32::MAX; domain.global_counts.len()];
        let mut cum = Vec::with_capacity(order.len());
        let mut cum_sum = Vec::with_capacity(order.len() + 1);
        cum_sum.push(0i128);
        let mut acc = 0u64;
        for (i, &code) in order.iter().enumerate() {
            pos[code as usize] = i as u32;
            acc += domain.global_counts[code as usize] as u64;
            cum.push(acc);
            let last = *cum_sum.last().unwrap_or(&0);
            cum_sum.push(last + acc as i128);
        }
        OrderedDistance {
            n: domain.n as i128,
            pos,
            order,
            cum,
            cum_sum,
        }
    }

    /// EMD between the class (size `count`, sorted histogram) and the table.
    pub fn emd(&self, count: u32, values: &[u32], freqs: &[u32]) -> f64 {
        self.emd_with(count, values, freqs, STACK)
    }

    /// [`Self::emd`] with a configurable stack buffer (`limit` ≤ [`STACK`]; tests use it to reach
    /// the large-class path).
    pub(crate) fn emd_with(&self, count: u32, values: &[u32], freqs: &[u32], limit: usize) -> f64 {
        let m = self.order.len();
        let bn = count as i128;
        if m <= 1 || bn == 0 || self.n == 0 {
            return 0.0;
        }
        let pairs = values
            .iter()
            .zip(freqs)
            .map(|(&v, &f)| (self.pos[v as usize], f));
        let d = with_sorted(values.len(), limit, pairs, |items| {
            self.sum_segments(bn, items)
        })
        .unwrap_or_else(|| self.sum_scan(bn, values, freqs));
        d as f64 / ((m as i128 - 1) * self.n * bn) as f64
    }

    /// Σ_{i ≤ m−2} |N·cum(i) − n·C(i)| from the class's (position, count) pairs sorted by
    /// position: between two class positions the class's cumulative count C is constant.
    fn sum_segments(&self, bn: i128, items: &[(u32, u32)]) -> i128 {
        let last = self.order.len() - 2;
        let mut total = 0i128;
        let mut c = 0i128;
        let mut start = 0usize;
        for &(p, f) in items {
            let p = p as usize;
            if p > start && start <= last {
                total += self.segment(bn, c, start, (p - 1).min(last));
            }
            c += f as i128;
            start = p;
        }
        if start <= last {
            total += self.segment(bn, c, start, last);
        }
        total
    }

    /// Σ_{i=a..=b} |N·cum(i) − n·c| using the prefix sums of cum: split where N·cum(i) reaches n·c.
    fn segment(&self, bn: i128, c: i128, a: usize, b: usize) -> i128 {
        let nc = self.n * c;
        let split = a + self.cum[a..=b].partition_point(|&g| bn * (g as i128) < nc);
        let below = nc * (split - a) as i128 - bn * (self.cum_sum[split] - self.cum_sum[a]);
        let above = bn * (self.cum_sum[b + 1] - self.cum_sum[split]) - nc * (b + 1 - split) as i128;
        below + above
    }

    /// The same sum for large classes: walk all positions, counts by binary search.
    fn sum_scan(&self, bn: i128, values: &[u32], freqs: &[u32]) -> i128 {
        let mut total = 0i128;
        let mut c = 0i128;
        for i in 0..self.order.len() - 1 {
            if let Ok(j) = values.binary_search(&self.order[i]) {
                c += freqs[j] as i128;
            }
            total += (bn * self.cum[i] as i128 - self.n * c).abs();
        }
        total
    }
}

/// t-closeness with hierarchical ground distance.
#[derive(Debug, Clone)]
pub struct HierarchicalDistance {
    n: i128,
    /// h: index of the top level (levels 0..h−1 contribute).
    height: usize,
    /// Leaf codes in depth-first order (every node's leaves are contiguous).
    dfs: Vec<u32>,
    /// Position of every code in `dfs`.
    dfs_pos: Vec<u32>,
    /// `node[l - 1][code]` = node of the value at level l, for 1 ≤ l < h (at level 0 the node is
    /// the code itself).
    node: Vec<Vec<u32>>,
    /// `global[l][node]` = table records under the node.
    global: Vec<Vec<u64>>,
}

impl HierarchicalDistance {
    /// Compiles the distance from the encoded hierarchy of the sensitive attribute (it needs 2
    /// to [`MAX_LEVELS`] levels; the error names the model's `distance`).
    pub fn new(
        domain: &SensitiveDomain,
        hierarchy: &EncodedHierarchy,
    ) -> Result<HierarchicalDistance> {
        let levels = hierarchy.height();
        if !(2..=MAX_LEVELS).contains(&levels) {
            return Err(EngineError::config(
                "distance",
                format!(
                    "the hierarchy of the sensitive attribute '{}' has {levels} level(s); \
                     hierarchical t-closeness needs 2 to {MAX_LEVELS}",
                    domain.column
                ),
            ));
        }
        let height = levels - 1;
        let codes = domain.global_counts.len();
        let mut dfs: Vec<u32> = (0..codes as u32)
            .filter(|&c| domain.global_counts[c as usize] > 0)
            .collect();
        // Sort by the path from the top level down: nodes become contiguous ranges.
        dfs.sort_by(|&a, &b| {
            (0..levels)
                .rev()
                .map(|l| hierarchy.code(l, a).cmp(&hierarchy.code(l, b)))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let mut dfs_pos = vec![u32::MAX; codes];
        for (i, &c) in dfs.iter().enumerate() {
            dfs_pos[c as usize] = i as u32;
        }
        let node: Vec<Vec<u32>> = (1..height)
            .map(|l| (0..codes as u32).map(|c| hierarchy.code(l, c)).collect())
            .collect();
        let global = (0..height)
            .map(|l| {
                let mut g = vec![0u64; hierarchy.distinct(l)];
                for (code, &count) in domain.global_counts.iter().enumerate() {
                    g[hierarchy.code(l, code as u32) as usize] += count as u64;
                }
                g
            })
            .collect();
        Ok(HierarchicalDistance {
            n: domain.n as i128,
            height,
            dfs,
            dfs_pos,
            node,
            global,
        })
    }

    /// EMD between the class (size `count`, sorted histogram) and the table.
    pub fn emd(&self, count: u32, values: &[u32], freqs: &[u32]) -> f64 {
        self.emd_with(count, values, freqs, STACK)
    }

    /// [`Self::emd`] with a configurable stack buffer (`limit` ≤ [`STACK`]).
    pub(crate) fn emd_with(&self, count: u32, values: &[u32], freqs: &[u32], limit: usize) -> f64 {
        let bn = count as i128;
        if bn == 0 || self.n == 0 {
            return 0.0;
        }
        let pairs = values
            .iter()
            .zip(freqs)
            .map(|(&v, &f)| (self.dfs_pos[v as usize], f));
        let excess = with_sorted(values.len(), limit, pairs, |items| {
            self.excess(bn, || items.iter().map(|&(p, f)| (self.dfs[p as usize], f)))
        })
        .unwrap_or_else(|| {
            self.excess(bn, || {
                self.dfs
                    .iter()
                    .filter_map(|&code| values.binary_search(&code).ok().map(|j| (code, freqs[j])))
            })
        });
        excess as f64 / (self.height as i128 * self.n * bn) as f64
    }

    /// Σ over levels l < h and nodes Y at l of max(0, n·C_Y − N·G_Y), from the class's
    /// (code, count) pairs in depth-first order (`items` yields them afresh for every level; the
    /// nodes a class touches are contiguous runs).
    fn excess<I: Iterator<Item = (u32, u32)>>(&self, bn: i128, items: impl Fn() -> I) -> i128 {
        let mut total = self.level_excess(bn, items(), &self.global[0], |code| code);
        for (node, global) in self.node.iter().zip(&self.global[1..]) {
            total += self.level_excess(bn, items(), global, |code| node[code as usize]);
        }
        total
    }

    /// The sum of [`Self::excess`] over the nodes of one level (`node_of` maps a code to its
    /// node, `global` holds the table's records per node).
    #[inline]
    fn level_excess(
        &self,
        bn: i128,
        items: impl Iterator<Item = (u32, u32)>,
        global: &[u64],
        node_of: impl Fn(u32) -> u32,
    ) -> i128 {
        let excess =
            |id: u32, c: u64| (self.n * c as i128 - bn * global[id as usize] as i128).max(0);
        let mut total = 0i128;
        let mut current = u32::MAX;
        let mut acc = 0u64;
        for (code, f) in items {
            let id = node_of(code);
            if id != current {
                if current != u32::MAX {
                    total += excess(current, acc);
                }
                current = id;
                acc = 0;
            }
            acc += f as u64;
        }
        if current != u32::MAX {
            total += excess(current, acc);
        }
        total
    }

    /// Heap size in bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        (self.dfs.capacity() + self.dfs_pos.capacity()) * 4
            + self
                .node
                .iter()
                .map(|n| n.capacity() * 4 + 24)
                .sum::<usize>()
            + self
                .global
                .iter()
                .map(|g| g.capacity() * 8 + 24)
                .sum::<usize>()
    }
}

/// Classes with at most this many distinct values use a small buffer (cheap to set up).
const SMALL: usize = 16;

/// Calls `f` with the (key, count) `pairs` sorted by key in a stack buffer, if there are at most
/// `limit` (≤ [`STACK`]) of them (`len` = their number); `None` otherwise.
fn with_sorted<R>(
    len: usize,
    limit: usize,
    pairs: impl Iterator<Item = (u32, u32)>,
    f: impl FnOnce(&[(u32, u32)]) -> R,
) -> Option<R> {
    fn on_stack<const N: usize, R>(
        pairs: impl Iterator<Item = (u32, u32)>,
        f: impl FnOnce(&[(u32, u32)]) -> R,
    ) -> R {
        let mut buf = [(0u32, 0u32); N];
        let mut k = 0;
        for (slot, p) in buf.iter_mut().zip(pairs) {
            *slot = p;
            k += 1;
        }
        let items = &mut buf[..k];
        items.sort_unstable();
        f(items)
    }
    if len <= SMALL.min(limit) {
        Some(on_stack::<SMALL, R>(pairs, f))
    } else if len <= STACK.min(limit) {
        Some(on_stack::<STACK, R>(pairs, f))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{PreparedClassModel, PrivacyModel, TClosenessDistance};
    use super::*;
    use crate::EngineError;
    use crate::Problem;
    use proptest::prelude::*;

    /// The table of the hand examples: s ∈ {2, 10, 30}, global counts 2:2, 10:1, 30:3 (n = 6);
    /// classes c0 {2, 10}, c1 {30, 30}, c2 {2, 30}.
    const CLASSES: &[&[&str]] = &[&["2", "10"], &["30", "30"], &["2", "30"]];
    /// 2, 10 → low; 30 → high; * on top (h = 2).
    const S_HIERARCHY: &str = "2;low;*\n10;low;*\n30;high;*";

    fn tc(t: f64, distance: TClosenessDistance) -> PrivacyModel {
        PrivacyModel::TCloseness {
            attribute: "s".into(),
            t,
            distance,
        }
    }

    fn hand_problem(classes: &[&[&str]], s_hierarchy: &str) -> Problem {
        problem(
            class_table(classes),
            &[("g", &class_hierarchy(classes.len()))],
            &[("s", Some(s_hierarchy))],
            vec![tc(1.0, TClosenessDistance::Hierarchical)],
            0.0,
        )
        .unwrap()
    }

    /// EMD of every class at level 0 under the given distance.
    fn emds(p: &Problem, distance: TClosenessDistance) -> Vec<f64> {
        let domain = &p.sensitive_domains()[0];
        let h = p.sensitive_hierarchies()[0].as_ref();
        let model = match distance {
            TClosenessDistance::Equal => Model::Equal(EqualDistance::new(domain)),
            TClosenessDistance::Ordered => Model::Ordered(OrderedDistance::new(domain)),
            TClosenessDistance::Hierarchical => {
                Model::Hier(HierarchicalDistance::new(domain, h.unwrap()).unwrap())
            }
        };
        let base = p.base_groups();
        let h0 = &p.hierarchies()[0];
        let col0 = p.table().column(p.qi_columns()[0]);
        let mut out: Vec<(String, f64)> = (0..base.len())
            .map(|c| {
                let (v, f) = base.hists[0].get(c);
                let d = match &model {
                    Model::Equal(m) => m.emd(base.counts[c], v, f),
                    Model::Ordered(m) => m.emd(base.counts[c], v, f),
                    Model::Hier(m) => m.emd(base.counts[c], v, f),
                };
                (h0.label(0, base.codes[c], col0).to_string(), d)
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.into_iter().map(|x| x.1).collect()
    }

    enum Model {
        Equal(EqualDistance),
        Ordered(OrderedDistance),
        Hier(HierarchicalDistance),
    }

    fn assert_close(actual: &[f64], expected: &[f64]) {
        assert_eq!(actual.len(), expected.len());
        for (a, e) in actual.iter().zip(expected) {
            assert!((a - e).abs() < 1e-15, "{actual:?} vs {expected:?}");
        }
    }

    #[test]
    fn equal_distance_by_hand() {
        // q = (2: 1/3, 10: 1/6, 30: 1/2).
        // c0 p = (1/2, 1/2, 0): ½(1/6 + 1/3 + 1/2) = 1/2; c1 (0, 0, 1): ½(1/3 + 1/6 + 1/2) = 1/2;
        // c2 (1/2, 0, 1/2): ½(1/6 + 1/6 + 0) = 1/6.
        let p = hand_problem(CLASSES, S_HIERARCHY);
        assert_close(&emds(&p, TClosenessDistance::Equal), &[0.5, 0.5, 1.0 / 6.0]);
        assert_eq!(
            suppressed_classes(CLASSES, None, vec![tc(0.2, TClosenessDistance::Equal)]),
            [true, true, false]
        );
        assert_eq!(
            suppressed_classes(CLASSES, None, vec![tc(0.5, TClosenessDistance::Equal)]),
            [false, false, false]
        );
    }

    #[test]
    fn ordered_distance_by_hand() {
        // Numeric order 2 < 10 < 30 (lexicographic would be 10 < 2 < 30), m − 1 = 2.
        // c0: p − q = (1/6, 1/3, −1/2), prefix sums 1/6, 1/2 → (2/3)/2 = 1/3.
        // c1: (−1/3, −1/6, 1/2), prefix sums −1/3, −1/2 → (5/6)/2 = 5/12.
        // c2: (1/6, −1/6, 0), prefix sums 1/6, 0 → 1/12.
        let p = hand_problem(CLASSES, S_HIERARCHY);
        assert_close(
            &emds(&p, TClosenessDistance::Ordered),
            &[1.0 / 3.0, 5.0 / 12.0, 1.0 / 12.0],
        );
        assert_eq!(
            suppressed_classes(CLASSES, None, vec![tc(0.4, TClosenessDistance::Ordered)]),
            [false, true, false]
        );
        assert_eq!(
            suppressed_classes(
                CLASSES,
                None,
                vec![tc(1.0 / 3.0, TClosenessDistance::Ordered)]
            ),
            [false, true, false]
        );
        assert_eq!(
            suppressed_classes(CLASSES, None, vec![tc(0.3, TClosenessDistance::Ordered)]),
            [true, true, false]
        );
    }

    #[test]
    fn ordered_distance_falls_back_to_lexicographic_order() {
        // One non-numeric value makes the order lexicographic: a10 < a2 < a30.
        // q in that order = (1/6, 1/3, 1/2).
        // c0 {a2, a10}: p − q = (1/3, 1/6, −1/2), prefix sums 1/3, 1/2 → 5/12 (numeric: 1/3).
        // c1 {a30, a30}: (−1/6, −1/3, 1/2), prefix sums −1/6, −1/2 → 1/3 (numeric: 5/12).
        // c2 {a2, a30}: (−1/6, 1/6, 0), prefix sums −1/6, 0 → 1/12.
        let classes: &[&[&str]] = &[&["a2", "a10"], &["a30", "a30"], &["a2", "a30"]];
        let h = "a2;low;*\na10;low;*\na30;high;*";
        let p = hand_problem(classes, h);
        assert_close(
            &emds(&p, TClosenessDistance::Ordered),
            &[5.0 / 12.0, 1.0 / 3.0, 1.0 / 12.0],
        );
        let domain = &p.sensitive_domains()[0];
        let names: Vec<&str> = value_order(domain)
            .iter()
            .map(|&c| domain.values[c as usize].as_str())
            .collect();
        assert_eq!(names, ["a10", "a2", "a30"]);
        // Numbers with equal values are ordered by their text; exotic spellings still count.
        let numeric = SensitiveDomain {
            column: "s".into(),
            global_counts: vec![1; 5],
            values: vec![
                "1.0".into(),
                "-3".into(),
                "1".into(),
                "2e1".into(),
                " 7 ".into(),
            ],
            n: 5,
        };
        let names: Vec<&str> = value_order(&numeric)
            .iter()
            .map(|&c| numeric.values[c as usize].as_str())
            .collect();
        assert_eq!(names, ["-3", "1", "1.0", " 7 ", "2e1"]);
        // NaN is not a number for this purpose.
        let nan = SensitiveDomain {
            values: vec!["5".into(), "NaN".into(), "10".into()],
            global_counts: vec![1; 3],
            ..numeric
        };
        let names: Vec<&str> = value_order(&nan)
            .iter()
            .map(|&c| nan.values[c as usize].as_str())
            .collect();
        assert_eq!(names, ["10", "5", "NaN"]);
    }

    #[test]
    fn hierarchical_distance_by_hand() {
        // h = 2. c0 {2, 10}: level 0 excess 1/6 + 1/3, level 1 (low) 1/2 → 1/2 (move 1/2 from low
        // to high at distance 1). c1 {30, 30}: 1/2 + 1/2 → 1/2. c2 {2, 30}: level 0 excess 1/6
        // (2), level 1 none → 1/12 (move 1/6 from 2 to 10 at distance 1/2).
        let p = hand_problem(CLASSES, S_HIERARCHY);
        assert_close(
            &emds(&p, TClosenessDistance::Hierarchical),
            &[0.5, 0.5, 1.0 / 12.0],
        );
        assert_eq!(
            suppressed_classes(
                CLASSES,
                Some(S_HIERARCHY),
                vec![tc(0.1, TClosenessDistance::Hierarchical)]
            ),
            [true, true, false]
        );
        assert_eq!(
            suppressed_classes(
                CLASSES,
                Some(S_HIERARCHY),
                vec![tc(1.0 / 12.0, TClosenessDistance::Hierarchical)]
            ),
            [true, true, false]
        );
        assert_eq!(
            suppressed_classes(
                CLASSES,
                Some(S_HIERARCHY),
                vec![tc(0.08, TClosenessDistance::Hierarchical)]
            ),
            [true, true, true]
        );
    }

    #[test]
    fn hierarchical_distance_without_a_single_root_charges_top_level_moves() {
        // Two levels, top values low/high (h = 1): c0 {2, 10} must move 1/2 from low to high at
        // the maximal distance 1 → 1/2 (ARX: 0). c2 {2, 30}: move 1/6 from 2 to 10 within low,
        // which costs level 1 / h = 1 → 1/6.
        let h = "2;low\n10;low\n30;high";
        let p = hand_problem(CLASSES, h);
        assert_close(
            &emds(&p, TClosenessDistance::Hierarchical),
            &[0.5, 0.5, 1.0 / 6.0],
        );
    }

    #[test]
    fn hierarchical_distance_needs_a_usable_hierarchy() {
        let t = class_table(CLASSES);
        let err = problem(
            t,
            &[("g", &class_hierarchy(3))],
            &[("s", None)],
            vec![
                PrivacyModel::KAnonymity { k: 1 },
                tc(0.2, TClosenessDistance::Hierarchical),
            ],
            0.0,
        )
        .unwrap_err();
        let EngineError::InvalidConfig { field, message } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(field, "privacy[1].distance");
        assert!(message.contains("'s'"), "{message}");
        assert!(message.contains("hierarchy"), "{message}");

        let err = problem(
            class_table(CLASSES),
            &[("g", &class_hierarchy(3))],
            &[("s", Some("2\n10\n30"))],
            vec![tc(0.2, TClosenessDistance::Hierarchical)],
            0.0,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("1 level(s)") && err.to_string().contains("'s'"),
            "{err}"
        );
        // The other distances need no hierarchy.
        for d in [TClosenessDistance::Equal, TClosenessDistance::Ordered] {
            assert!(
                problem(
                    class_table(CLASSES),
                    &[("g", &class_hierarchy(3))],
                    &[("s", None)],
                    vec![tc(0.2, d)],
                    0.0,
                )
                .is_ok()
            );
        }
    }

    #[test]
    fn single_valued_attribute_has_distance_zero() {
        let classes: &[&[&str]] = &[&["x", "x"], &["x"]];
        let p = hand_problem(classes, "x;*");
        for d in [
            TClosenessDistance::Equal,
            TClosenessDistance::Ordered,
            TClosenessDistance::Hierarchical,
        ] {
            assert_close(&emds(&p, d), &[0.0, 0.0]);
        }
        assert_eq!(
            suppressed_classes(classes, None, vec![tc(0.0, TClosenessDistance::Ordered)]),
            [false, false]
        );
    }

    // --- Random comparisons against direct definitions ---------------------------------------

    /// A random table distribution: global counts of `m` values, a class drawn from it, and a
    /// hierarchy given as the parent chain of each leaf (group ids per level).
    fn domain_of(global: &[u32]) -> SensitiveDomain {
        SensitiveDomain {
            column: "s".into(),
            values: (0..global.len())
                .map(|i| format!("{}", i * 7 % 11))
                .collect(),
            n: global.iter().map(|&g| g as usize).sum(),
            global_counts: global.to_vec(),
        }
    }

    fn encoded(groups: &[Vec<u32>], m: usize, single_root: bool) -> EncodedHierarchy {
        // Level 0: the values 0..m (dictionary codes 0..m); level l: groups[l-1][leaf] (made
        // monotone by including the path).
        let mut path: Vec<String> = (0..m).map(|_| String::new()).collect();
        let mut levels = groups.to_vec();
        if single_root {
            levels.push(vec![0; m]);
        }
        // Build top-down so that every node has a single parent.
        let mut full_paths: Vec<Vec<String>> = vec![Vec::new(); levels.len()];
        for l in (0..levels.len()).rev() {
            for leaf in 0..m {
                path[leaf] = format!("{}/{}", path[leaf], levels[l][leaf]);
            }
            full_paths[l] = path.clone();
        }
        let rows: Vec<Vec<String>> = (0..m)
            .map(|leaf| {
                std::iter::once(leaf.to_string())
                    .chain(full_paths.iter().map(|p| p[leaf].clone()))
                    .collect()
            })
            .collect();
        let values: Vec<Vec<String>> = (0..m).map(|leaf| vec![leaf.to_string()]).collect();
        let table = crate::Table::from_rows(&["s"], &values).unwrap();
        crate::Hierarchy::from_rows(rows, "s")
            .unwrap()
            .encode(table.column(0))
            .unwrap()
    }

    /// Li et al.'s formula, evaluated recursively over explicit nodes with rationals scaled by n·N.
    fn li_hierarchical(h: &EncodedHierarchy, global: &[u32], class: &[u32]) -> f64 {
        let n: i128 = global.iter().map(|&g| g as i128).sum();
        let bn: i128 = class.iter().map(|&c| c as i128).sum();
        let height = h.height() - 1;
        // extra(leaf) = n·c − N·g (positive = class has too much).
        let mut extra: Vec<i128> = (0..global.len())
            .map(|v| n * class[v] as i128 - bn * global[v] as i128)
            .collect();
        let mut cost = 0.0;
        for l in 1..=height {
            let nodes = h.distinct(l);
            let mut pos = vec![0i128; nodes];
            let mut neg = vec![0i128; nodes];
            // Children of level l are the level l−1 nodes.
            for (child, &e) in extra.iter().enumerate() {
                let leaf = (0..global.len())
                    .find(|&v| h.code(l - 1, v as u32) as usize == child)
                    .unwrap();
                let parent = h.code(l, leaf as u32) as usize;
                if e > 0 {
                    pos[parent] += e;
                } else {
                    neg[parent] -= e;
                }
            }
            for node in 0..nodes {
                cost += l as f64 / height as f64 * pos[node].min(neg[node]) as f64;
            }
            extra = (0..nodes).map(|node| pos[node] - neg[node]).collect();
        }
        cost / (n * bn) as f64
    }

    fn histogram(class: &[u32]) -> (Vec<u32>, Vec<u32>) {
        class
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(v, &c)| (v as u32, c))
            .unzip()
    }

    proptest! {
        #[test]
        fn distances_match_their_definitions(
            global_extra in prop::collection::vec(0u32..6, 2..12),
            take in prop::collection::vec(0u32..7, 12),
            g1 in prop::collection::vec(0u32..3, 12),
            g2 in prop::collection::vec(0u32..2, 12),
        ) {
            let m = global_extra.len();
            // The class is part of the table: global = class + extra, every value occurs.
            let mut class: Vec<u32> = (0..m).map(|v| take[v] % (global_extra[v] + 2)).collect();
            if class.iter().all(|&c| c == 0) {
                class[0] = 1;
            }
            let global: Vec<u32> = (0..m).map(|v| class[v] + global_extra[v].max(1)).collect();
            let domain = domain_of(&global);
            let n: f64 = global.iter().map(|&g| g as f64).sum();
            let bn: f64 = class.iter().map(|&c| c as f64).sum();
            let (values, freqs) = histogram(&class);
            let count = bn as u32;

            // Equal.
            let eq: f64 = (0..m).map(|v| (class[v] as f64 / bn - global[v] as f64 / n).abs()).sum::<f64>() / 2.0;
            prop_assert!((EqualDistance::new(&domain).emd(count, &values, &freqs) - eq).abs() < 1e-12);

            // Ordered, both paths.
            let ordered = OrderedDistance::new(&domain);
            let direct = direct_ordered(&domain, &class);
            let fast = ordered.emd_with(count, &values, &freqs, STACK);
            let slow = ordered.emd_with(count, &values, &freqs, 0);
            prop_assert_eq!(fast, slow);
            prop_assert!((fast - direct).abs() < 1e-12, "{} vs {}", fast, direct);

            // Hierarchical with a single root, both paths, against Li et al.'s formula.
            let groups = vec![
                (0..m).map(|v| g1[v]).collect::<Vec<_>>(),
                (0..m).map(|v| g2[v]).collect::<Vec<_>>(),
            ];
            let h = encoded(&groups, m, true);
            let hier = HierarchicalDistance::new(&domain, &h).unwrap();
            let fast = hier.emd_with(count, &values, &freqs, STACK);
            let slow = hier.emd_with(count, &values, &freqs, 0);
            prop_assert_eq!(fast, slow);
            let li = li_hierarchical(&h, &global, &class);
            prop_assert!((fast - li).abs() < 1e-12, "{} vs {}", fast, li);
            // Within [0, 1]; equal to the equal distance for a flat hierarchy (leaf → root).
            prop_assert!((0.0..=1.0 + 1e-12).contains(&fast));
            let flat = encoded(&[], m, true);
            let flat = HierarchicalDistance::new(&domain, &flat).unwrap();
            prop_assert!((flat.emd(count, &values, &freqs) - eq).abs() < 1e-12);
        }
    }

    /// The ordered distance straight from its definition, in floating point.
    fn direct_ordered(domain: &SensitiveDomain, class: &[u32]) -> f64 {
        let n: f64 = domain.global_counts.iter().map(|&g| g as f64).sum();
        let bn: f64 = class.iter().map(|&c| c as f64).sum();
        let order = value_order(domain);
        let mut acc = 0.0;
        let mut total = 0.0;
        for &code in &order[..order.len() - 1] {
            acc +=
                class[code as usize] as f64 / bn - domain.global_counts[code as usize] as f64 / n;
            total += acc.abs();
        }
        total / (order.len() - 1) as f64
    }

    #[test]
    fn mid_sized_classes_use_the_large_buffer() {
        // 120 values, 80 in the class (between SMALL and STACK): all paths agree.
        let m = 120usize;
        let global: Vec<u32> = (0..m as u32).map(|v| 2 + v % 3).collect();
        let domain = domain_of(&global);
        let class: Vec<u32> = (0..m as u32).map(|v| (v * 5 + 1) % 3).collect();
        let (values, freqs) = histogram(&class);
        assert!(values.len() > SMALL && values.len() <= STACK);
        let count: u32 = freqs.iter().sum();
        let o = OrderedDistance::new(&domain);
        let fast = o.emd(count, &values, &freqs);
        assert_eq!(fast, o.emd_with(count, &values, &freqs, 0));
        assert!((fast - direct_ordered(&domain, &class)).abs() < 1e-12);
        let groups = vec![(0..m as u32).map(|v| v % 7).collect::<Vec<_>>()];
        let h = encoded(&groups, m, true);
        let hd = HierarchicalDistance::new(&domain, &h).unwrap();
        let fast = hd.emd(count, &values, &freqs);
        assert_eq!(fast, hd.emd_with(count, &values, &freqs, 0));
        assert!((fast - li_hierarchical(&h, &global, &class)).abs() < 1e-12);
    }

    #[test]
    fn large_classes_use_the_scan() {
        // 900 values, 600 of them in the class (> STACK): the scan paths agree with the
        // definitions.
        let m = 900usize;
        let global: Vec<u32> = (0..m as u32).map(|v| 3 + v % 5).collect();
        let domain = domain_of(&global);
        let class: Vec<u32> = (0..m as u32).map(|v| (v * 7 + 3) % 3).collect();
        let (values, freqs) = histogram(&class);
        assert!(values.len() > STACK);
        let count: u32 = freqs.iter().sum();
        let o = OrderedDistance::new(&domain);
        let direct = direct_ordered(&domain, &class);
        assert!((o.emd(count, &values, &freqs) - direct).abs() < 1e-12);
        let groups = vec![(0..m as u32).map(|v| v % 17).collect::<Vec<_>>()];
        let h = encoded(&groups, m, true);
        let hd = HierarchicalDistance::new(&domain, &h).unwrap();
        let li = li_hierarchical(&h, &global, &class);
        assert!((hd.emd(count, &values, &freqs) - li).abs() < 1e-12);
    }

    #[test]
    fn prepared_models_compare_with_t() {
        // holds() is emd ≤ t, boundary included: c2 = {2, 30} is at distance exactly 1/6.
        let p = hand_problem(CLASSES, S_HIERARCHY);
        let domain = &p.sensitive_domains()[0];
        let code = |s: &str| domain.values.iter().position(|v| v == s).unwrap() as u32;
        let mut values = [code("2"), code("30")];
        values.sort_unstable();
        let freqs = [1, 1];
        let at = |t: f64| PreparedClassModel::EqualT {
            slot: 0,
            t,
            model: EqualDistance::new(domain),
        };
        assert!(at(1.0 / 6.0).holds(2, &[(&values, &freqs)]));
        assert!(!at(0.166).holds(2, &[(&values, &freqs)]));
    }
}
