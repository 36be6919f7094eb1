//! The scores of every transformation of a small lattice, for SafePub's exponential mechanism
//! over the whole lattice (`docs/definitions.md` §3.9).
//!
//! The classes of the sample at each transformation are rolled up from those of its parent in
//! a spanning tree of the lattice (the parent has one quasi-identifier one level lower), so a
//! transformation costs its parent's classes, not the records. A class is a packed key (one
//! bit field per quasi-identifier), its sampled records and the sum of its values' normalized
//! domain shares. Subtrees are scored in parallel; every score lands at its transformation's
//! lattice id, so the result does not depend on the threads.

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use super::{ClassScore, ScoreFunction, normalized_share};
use crate::hash::mix;
use crate::hierarchy::EncodedHierarchy;
use crate::lattice::Lattice;
use crate::problem::Problem;

/// Largest lattice whose transformations are all scored (adult's has 12,960). The choice
/// depends on the lattice alone, never on the records.
pub const MAX_SCANNED: u128 = 100_000;

/// Bit fields of the packed class keys: per quasi-identifier its shift and mask.
struct Layout {
    shift: Vec<u32>,
    mask: Vec<u64>,
}

impl Layout {
    /// The fields for the hierarchies' values (sized by the hierarchies' domains, public), or
    /// `None` when they need more than 64 bits.
    fn new(hierarchies: &[EncodedHierarchy]) -> Option<Layout> {
        let (mut shift, mut mask, mut at) = (Vec::new(), Vec::new(), 0u32);
        for h in hierarchies {
            let values = (0..h.height())
                .map(|l| h.distinct(l))
                .chain([h.domain_size, 1])
                .max()
                .unwrap_or(1);
            let bits = usize::BITS - (values - 1).leading_zeros();
            if at + bits > 64 {
                return None;
            }
            shift.push(at.min(63));
            mask.push(if bits == 0 {
                0
            } else {
                u64::MAX >> (64 - bits)
            });
            at += bits;
        }
        Some(Layout { shift, mask })
    }

    fn code(&self, key: u64, i: usize) -> u32 {
        ((key >> self.shift[i]) & self.mask[i]) as u32
    }

    fn with(&self, key: u64, i: usize, code: u32) -> u64 {
        (key & !(self.mask[i] << self.shift[i])) | (u64::from(code) << self.shift[i])
    }
}

/// The classes of the sample at one transformation.
#[derive(Debug, Default)]
struct Classes {
    keys: Vec<u64>,
    counts: Vec<u32>,
    /// Σ over the quasi-identifiers of the normalized domain share of the class's values.
    loss: Vec<f64>,
}

/// Merges classes by key (open addressing, load factor ≤ ½).
struct Merger {
    slots: Vec<u32>,
    shift: u32,
}

impl Classes {
    /// Empty, with room for `n` classes.
    fn with_capacity(n: usize) -> Classes {
        Classes {
            keys: Vec::with_capacity(n),
            counts: Vec::with_capacity(n),
            loss: Vec::with_capacity(n),
        }
    }
}

impl Merger {
    fn new(entries: usize) -> Merger {
        let cap = (2 * entries).next_power_of_two().max(16);
        Merger {
            slots: vec![u32::MAX; cap],
            shift: 64 - cap.trailing_zeros(),
        }
    }

    fn add(&mut self, out: &mut Classes, key: u64, count: u32, loss: f64) {
        let mask = self.slots.len() - 1;
        let mut at = (mix(key) >> self.shift) as usize;
        loop {
            let slot = self.slots[at];
            if slot == u32::MAX {
                self.slots[at] = out.keys.len() as u32;
                out.keys.push(key);
                out.counts.push(count);
                out.loss.push(loss);
                return;
            }
            if out.keys[slot as usize] == key {
                out.counts[slot as usize] += count;
                return;
            }
            at = (at + 1) & mask;
        }
    }
}

/// Scores every transformation of a problem's lattice.
pub(super) struct Scan<'p> {
    problem: &'p Problem,
    layout: Layout,
    /// Per quasi-identifier and level, the normalized domain share of every code.
    shares: Vec<Vec<Vec<f64>>>,
    function: ScoreFunction,
    /// Input records not drawn into the sample, and all input records.
    unsampled: u64,
    n: u64,
    scores: Vec<AtomicU64>,
    /// The quasi-identifiers by decreasing domain size: a transformation's parent in the
    /// spanning tree lowers the last raised of them, mostly one of few values, so that the
    /// parent has few more classes than the child.
    order: Vec<usize>,
}

impl<'p> Scan<'p> {
    /// A scan of `problem`'s lattice with `function` (`n` input records), or `None` when the
    /// lattice is larger than [`MAX_SCANNED`], the keys do not fit or the function needs more
    /// than the classes (entropy).
    pub(super) fn new(problem: &'p Problem, function: ScoreFunction, n: u64) -> Option<Scan<'p>> {
        let size = problem.lattice().size()?;
        if size > MAX_SCANNED || function == ScoreFunction::Entropy {
            return None;
        }
        let hs = problem.hierarchies();
        let shares = (hs.iter())
            .map(|h| {
                (0..h.height())
                    .map(|l| {
                        (0..h.distinct(l) as u32)
                            .map(|c| normalized_share(h, l, c))
                            .collect()
                    })
                    .collect()
            })
            .collect();
        let mut order: Vec<usize> = (0..hs.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(hs[i].domain_size));
        Some(Scan {
            order,
            problem,
            layout: Layout::new(hs)?,
            shares,
            function,
            unsampled: n - problem.rows() as u64,
            n,
            scores: (0..size)
                .map(|_| AtomicU64::new(f64::NAN.to_bits()))
                .collect(),
        })
    }

    /// The score of every transformation (raw, not divided by the sensitivity), by lattice id;
    /// `None` if `stop` said so before all were scored.
    pub(super) fn run(
        self,
        pool: Option<&rayon::ThreadPool>,
        parallel: bool,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Option<Vec<f64>> {
        let bottom = self.bottom();
        let levels = self.problem.lattice().bottom();
        let go = || self.visit(&levels, 0, &bottom, parallel, stop);
        match pool {
            Some(p) if parallel => p.install(go),
            _ => go(),
        }
        let scores: Vec<f64> = (self.scores.iter())
            .map(|s| f64::from_bits(s.load(Ordering::Relaxed)))
            .collect();
        scores.iter().all(|s| !s.is_nan()).then_some(scores)
    }

    /// The classes of the sample at the lattice's bottom, from the base groups.
    fn bottom(&self) -> Classes {
        let base = self.problem.base_groups();
        let bottom = self.problem.lattice().bottom();
        let d = bottom.len();
        let maps: Vec<_> = (self.problem.hierarchies().iter().zip(&bottom))
            .map(|(h, &l)| h.generalize(0, l as usize))
            .collect();
        let mut out = Classes::default();
        let mut merger = Merger::new(base.len());
        for g in (0..base.len()).filter(|&g| base.counts[g] > 0) {
            let (mut key, mut loss) = (0u64, 0.0);
            for (i, map) in maps.iter().enumerate() {
                let code = map.get(base.codes[g * d + i]);
                key = self.layout.with(key, i, code);
                loss += self.shares[i][bottom[i] as usize][code as usize];
            }
            merger.add(&mut out, key, base.counts[g], loss);
        }
        out
    }

    /// The classes at `from` with quasi-identifier `i` one level above `level`.
    fn roll_up(&self, from: &Classes, i: usize, level: usize) -> Classes {
        let map = self.problem.hierarchies()[i].generalize(level, level + 1);
        let (below, above) = (&self.shares[i][level], &self.shares[i][level + 1]);
        let mut out = Classes::with_capacity(from.keys.len());
        let mut merger = Merger::new(from.keys.len());
        for c in 0..from.keys.len() {
            let old = self.layout.code(from.keys[c], i);
            let new = map.get(old);
            let key = self.layout.with(from.keys[c], i, new);
            let loss = from.loss[c] - below[old as usize] + above[new as usize];
            merger.add(&mut out, key, from.counts[c], loss);
        }
        out
    }

    /// Scores `levels` (whose classes are `classes`) and its subtree: the transformations
    /// reached by raising quasi-identifiers `first` and later.
    fn visit(
        &self,
        levels: &[u8],
        first: usize,
        classes: &Classes,
        parallel: bool,
        stop: &(dyn Fn() -> bool + Sync),
    ) {
        if stop() {
            return;
        }
        self.record(levels, classes);
        let lattice: &Lattice = self.problem.lattice();
        let max = lattice.max();
        let children: Vec<usize> = (first..levels.len())
            .filter(|&p| levels[self.order[p]] < max[self.order[p]])
            .collect();
        let child = |&p: &usize| {
            let i = self.order[p];
            let mut up = levels.to_vec();
            up[i] += 1;
            let rolled = self.roll_up(classes, i, levels[i] as usize);
            self.visit(&up, p, &rolled, parallel, stop);
        };
        if parallel {
            children.par_iter().for_each(child);
        } else {
            children.iter().for_each(child);
        }
    }

    /// Stores the score of `levels`.
    fn record(&self, levels: &[u8], classes: &Classes) {
        let hs = self.problem.hierarchies();
        let precision: f64 = (levels.iter().zip(hs))
            .filter(|(_, h)| h.height() > 1)
            .map(|(&l, h)| f64::from(l) / (h.height() - 1) as f64)
            .sum();
        let view = (0..classes.keys.len()).map(|c| ClassScore {
            count: u64::from(classes.counts[c]),
            loss: classes.loss[c],
            precision,
        });
        let k = self.problem.min_class_size();
        let score = (self.function).score(view, self.unsampled, self.n, levels.len(), k);
        let id = self.problem.lattice().id(levels).expect("a small lattice") as usize;
        self.scores[id].store(score.to_bits(), Ordering::Relaxed);
    }
}
