//! Predictive properties stored as antichains in a prefix tree, and the best-first branch and
//! bound search (BFS) built on them (Prasser et al., "Efficient and effective pruning strategies
//! for health data de-identification", BMC Med Inform Decis Mak 2016).
//!
//! [`Antichain`] represents an up-closed (or down-closed) set of transformations by its minimal
//! (maximal) elements only. Each tree level is one quasi-identifier; each node remembers the
//! lowest (highest) rank below it, so range queries skip subtrees that cannot contain a
//! specialization (generalization) of the query. Memory grows with the antichain, not with the
//! lattice.
//!
//! BFS starts at the bottom with a greedy dive to a first solution (a deid addition, see `run`),
//! then always expands the queued transformation with the best score.
//! Every transformation is generated exactly once, from its *canonical parent* (the node with
//! its last non-minimal level decremented), so no set of visited nodes is needed. A transformation
//! whose lower bound cannot beat the optimum is added to the "insufficient utility" antichain,
//! which prunes its whole up-set. When the queue runs empty the optimum is proven.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::{Ctx, Phase, Scored, exact_cmp};
use crate::check::CheckResult;
use crate::lattice::{Lattice, Levels};

/// Which way a stored property is inherited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Inherited by generalizations: `x` has the property if a stored `y ≤ x` exists.
    Up,
    /// Inherited by specializations: `x` has the property if a stored `y ≥ x` exists.
    Down,
}

#[derive(Debug, Clone)]
struct TrieNode {
    level: u8,
    /// Min (Up) or max (Down) rank of the elements below; may be stale in the safe direction
    /// after removals.
    bound: u32,
    children: Vec<u32>,
}

/// An up- or down-closed set of transformations stored as the antichain of its minimal (Up) or
/// maximal (Down) elements in a prefix tree.
#[derive(Debug, Clone)]
pub struct Antichain {
    direction: Direction,
    dims: usize,
    nodes: Vec<TrieNode>,
    free: Vec<u32>,
    len: usize,
}

impl Antichain {
    /// An empty set over transformations with `dims` quasi-identifiers.
    pub fn new(direction: Direction, dims: usize) -> Antichain {
        Antichain {
            direction,
            dims,
            nodes: vec![TrieNode {
                level: 0,
                bound: 0,
                children: Vec::new(),
            }],
            free: Vec::new(),
            len: 0,
        }
    }

    /// The direction of inheritance.
    pub fn direction(&self) -> Direction {
        self.direction
    }

    /// Number of stored (pairwise incomparable) elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True if `x` belongs to the set (a stored element is ≤ `x` for Up, ≥ `x` for Down).
    pub fn covers(&self, x: &[u8]) -> bool {
        debug_assert_eq!(x.len(), self.dims);
        if self.len == 0 {
            return false;
        }
        let rank = Lattice::rank(x);
        let mut stack: Vec<(u32, usize)> = vec![(0, 0)];
        while let Some((n, d)) = stack.pop() {
            if d == self.dims {
                return true;
            }
            for &c in &self.nodes[n as usize].children {
                let cn = &self.nodes[c as usize];
                let follow = match self.direction {
                    Direction::Up => cn.level <= x[d] && cn.bound <= rank,
                    Direction::Down => cn.level >= x[d] && cn.bound >= rank,
                };
                if follow {
                    stack.push((c, d + 1));
                }
            }
        }
        false
    }

    /// Adds `x` (and thereby its up- or down-set). Returns false if it was already covered.
    /// Stored elements that `x` covers are removed, so the store stays an antichain.
    pub fn insert(&mut self, x: &[u8]) -> bool {
        debug_assert_eq!(x.len(), self.dims);
        if self.covers(x) {
            return false;
        }
        if self.len > 0 {
            self.remove_covered(0, 0, x);
        }
        let rank = Lattice::rank(x);
        let mut n = 0u32;
        for &level in x {
            let found = self.nodes[n as usize]
                .children
                .iter()
                .copied()
                .find(|&c| self.nodes[c as usize].level == level);
            let c = match found {
                Some(c) => c,
                None => {
                    let c = self.alloc(level, rank);
                    self.nodes[n as usize].children.push(c);
                    c
                }
            };
            let node = &mut self.nodes[c as usize];
            node.bound = match self.direction {
                Direction::Up => node.bound.min(rank),
                Direction::Down => node.bound.max(rank),
            };
            n = c;
        }
        self.len += 1;
        true
    }

    fn alloc(&mut self, level: u8, bound: u32) -> u32 {
        let node = TrieNode {
            level,
            bound,
            children: Vec::new(),
        };
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Removes every stored element covered by `x` below node `n` at depth `d`; returns true if
    /// `n` has no element left below it.
    fn remove_covered(&mut self, n: u32, d: usize, x: &[u8]) -> bool {
        if d == self.dims {
            self.len -= 1;
            return true;
        }
        let children = std::mem::take(&mut self.nodes[n as usize].children);
        let mut keep = Vec::with_capacity(children.len());
        for c in children {
            let level = self.nodes[c as usize].level;
            let candidate = match self.direction {
                Direction::Up => level >= x[d],
                Direction::Down => level <= x[d],
            };
            if candidate && self.remove_covered(c, d + 1, x) {
                self.nodes[c as usize].children = Vec::new();
                self.free.push(c);
                continue;
            }
            keep.push(c);
        }
        let empty = keep.is_empty();
        self.nodes[n as usize].children = keep;
        empty
    }
}

/// Index of the last quasi-identifier whose level is above its minimum (`None` for the bottom).
fn last_raised(levels: &[u8], min: &[u8]) -> Option<usize> {
    (0..levels.len()).rev().find(|&i| levels[i] > min[i])
}

/// The children of `levels` in the canonical spanning tree of the lattice: raise one QI at or
/// after the last raised one. Every transformation except the bottom has exactly one parent.
pub(crate) fn canonical_children(lattice: &Lattice, levels: &[u8]) -> Vec<Levels> {
    let from = last_raised(levels, lattice.min()).unwrap_or(0);
    (from..levels.len())
        .filter(|&i| levels[i] < lattice.max()[i])
        .map(|i| {
            let mut c = levels.to_vec();
            c[i] += 1;
            c
        })
        .collect()
}

/// Finds a first solution quickly, so that lower-bound pruning works from the start:
/// 1. a diagonal path from the bottom to the top (each step raises the quasi-identifier with
///    the lowest relative level), binary-searched for its lowest anonymous transformation
///    (about log₂ height checks; the path is not checked as a whole, so with non-monotone models
///    the result is just some anonymous transformation on it);
/// 2. a ternary search for the best score on the path above it (with suppression the lowest
///    anonymous transformation may suppress much more than a slightly higher one);
/// 3. with `descend`, a descent from the best of them: while a direct specialization is
///    anonymous and scores better, move to the best one (at most #QIs checks per step). `auto`
///    leaves it out on large spaces, where its members improve faster (with 24 quasi-identifiers
///    the descent costs hundreds of checks).
///
/// Returns every result so that the branch and bound does not check them again; `None` if
/// stopped.
pub(crate) fn incumbent(
    ctx: &mut Ctx<'_, '_>,
    descend: bool,
) -> Option<HashMap<Levels, CheckResult>> {
    let lattice = ctx.lattice();
    let path = diagonal_path(lattice);
    let mut known: HashMap<Levels, CheckResult> = HashMap::new();
    // 1. The lowest anonymous transformation on the path.
    let (mut lo, mut hi) = (1usize, path.len() - 1);
    let mut found: Option<usize> = None;
    while lo <= hi {
        let mid = (lo + hi) / 2;
        if probe(ctx, &mut known, &path[mid])?.anonymous {
            found = Some(mid);
            hi = mid - 1;
        } else {
            lo = mid + 1;
        }
    }
    let Some(first) = found else {
        return Some(known);
    };
    // 2. The best above it.
    let Some(cur) = best_on_path(ctx, &mut known, &path, first)? else {
        return Some(known);
    };
    if !descend {
        return Some(known);
    }
    // 3. The descent.
    descend_from(ctx, &mut known, cur)?;
    Some(known)
}

/// The diagonal path from the bottom to the top of the lattice: each step raises the
/// quasi-identifier with the lowest relative level after the step.
fn diagonal_path(lattice: &Lattice) -> Vec<Levels> {
    let (min, max) = (lattice.min(), lattice.max());
    let mut path = vec![lattice.bottom()];
    loop {
        let cur = path.last().expect("non-empty");
        let raise = (0..cur.len())
            .filter(|&i| cur[i] < max[i])
            .min_by(|&a, &b| {
                let rel = |i: usize| f64::from(cur[i] + 1 - min[i]) / f64::from(max[i] - min[i]);
                rel(a).total_cmp(&rel(b))
            });
        let Some(i) = raise else { break };
        let mut next = cur.clone();
        next[i] += 1;
        path.push(next);
    }
    path
}

/// Step 2 of [`incumbent`]: the best anonymous transformation on `path` from index `first`
/// (anonymous) up; `None` if stopped, `Some(None)` if none is anonymous after all.
fn best_on_path(
    ctx: &mut Ctx<'_, '_>,
    known: &mut HashMap<Levels, CheckResult>,
    path: &[Levels],
    first: usize,
) -> Option<Option<CheckResult>> {
    // Above the border the score along the path typically falls (less suppression) and then
    // rises (more generalization): a ternary search for its minimum.
    let (mut a, mut b) = (first, path.len() - 1);
    while b - a > 2 {
        let m1 = a + (b - a) / 3;
        let m2 = b - (b - a) / 3;
        let r1 = probe(ctx, known, &path[m1])?;
        let r2 = probe(ctx, known, &path[m2])?;
        let key = |r: &CheckResult| if r.anonymous { r.score } else { f64::INFINITY };
        if key(&r1) <= key(&r2) {
            b = m2;
        } else {
            a = m1;
        }
    }
    let mut found: Option<CheckResult> = None;
    for levels in path.iter().take(b + 1).skip(a) {
        let r = probe(ctx, known, levels)?;
        if r.anonymous
            && found
                .as_ref()
                .is_none_or(|f| exact_cmp(r.score, &r.levels, f.score, &f.levels).is_lt())
        {
            found = Some(r);
        }
    }
    if let Some(border) = known.get(&path[first])
        && found
            .as_ref()
            .is_none_or(|f| exact_cmp(border.score, &border.levels, f.score, &f.levels).is_lt())
    {
        found = Some(border.clone());
    }
    Some(found)
}

/// Step 3 of [`incumbent`]: from `cur`, moves to the best anonymous direct specialization
/// while one scores better, adding every result to `known`; `None` if stopped.
fn descend_from(
    ctx: &mut Ctx<'_, '_>,
    known: &mut HashMap<Levels, CheckResult>,
    mut cur: CheckResult,
) -> Option<()> {
    let lattice = ctx.lattice();
    loop {
        let preds: Vec<Levels> = lattice
            .predecessors(&cur.levels)
            .into_iter()
            .filter(|p| !known.contains_key(p))
            .collect();
        let results = ctx.check_all(&preds);
        if results.len() < preds.len() {
            return None;
        }
        let better = results
            .iter()
            .filter(|r| {
                r.anonymous && exact_cmp(r.score, &r.levels, cur.score, &cur.levels).is_lt()
            })
            .min_by(|a, b| exact_cmp(a.score, &a.levels, b.score, &b.levels))
            .cloned();
        for r in results {
            known.insert(r.levels.clone(), r);
        }
        match better {
            Some(b) => cur = b,
            None => return Some(()),
        }
    }
}

/// The result for `levels`, checked unless `known` has it; `None` if stopped.
fn probe(
    ctx: &mut Ctx<'_, '_>,
    known: &mut HashMap<Levels, CheckResult>,
    levels: &[u8],
) -> Option<CheckResult> {
    if let Some(r) = known.get(levels) {
        return Some(r.clone());
    }
    let r = ctx.check(levels)?;
    known.insert(r.levels.clone(), r.clone());
    Some(r)
}

/// Best-first branch and bound. Returns true if the space was exhausted.
///
/// Steps:
/// 1. check the bottom and queue it (ordered by score, then rank and levels);
/// 2. find a first solution ([`incumbent`]; not in the paper, which starts without an
///    incumbent and can then run for a long time without any solution, e.g. on cup without
///    suppression), so that lower-bound pruning works from the start;
/// 3. pop the best; skip it if its up-set is known to be insufficient or its lower bound cannot
///    beat the optimum (then record it in the antichain); if it is anonymous and the score is
///    monotone, its proper generalizations cannot win either (record it);
/// 4. otherwise take its canonical children that are neither covered by the antichain nor
///    hopeless by the quality model's generalization-only bound, check those the dive did not
///    (in parallel) and queue them;
/// 5. repeat until the queue is empty (optimal) or a limit is hit (anytime result).
pub(crate) fn run(ctx: &mut Ctx<'_, '_>) -> bool {
    ctx.set_phase(Phase::Searching);
    let lattice = ctx.lattice();
    let mut insufficient = Antichain::new(Direction::Up, lattice.dimensions());
    let mut queue: BinaryHeap<Reverse<Scored>> = BinaryHeap::new();
    let Some(r) = ctx.check(&lattice.bottom()) else {
        return false;
    };
    ctx.set_phase(Phase::Greedy);
    let Some(mut known) = incumbent(ctx, true) else {
        return false;
    };
    ctx.set_phase(Phase::Searching);
    let mut explored = 1u64;
    queue.push(Reverse(Scored::of(&r)));
    while let Some(Reverse(item)) = queue.pop() {
        if ctx.should_stop() {
            return false;
        }
        let node = &item.levels;
        if insufficient.covers(node) {
            continue;
        }
        if ctx.cannot_improve(item.lower_bound, node) || (item.anonymous && ctx.utility_monotone) {
            insufficient.insert(node);
            continue;
        }
        let mut children: Vec<Levels> = Vec::new();
        let mut results: Vec<CheckResult> = Vec::new();
        for c in canonical_children(lattice, node) {
            if insufficient.covers(&c) {
                continue;
            }
            if let Some(r) = known.remove(&c) {
                results.push(r);
            } else if ctx.cannot_improve_unchecked(&c) {
                insufficient.insert(&c);
            } else {
                children.push(c);
            }
        }
        ctx.add_expansions(1);
        let checked = ctx.check_all(&children);
        let complete = checked.len() == children.len();
        results.extend(checked);
        explored += results.len() as u64;
        ctx.set_explored(explored);
        for r in &results {
            if ctx.cannot_improve(r.lower_bound, &r.levels) {
                insufficient.insert(&r.levels);
            } else {
                queue.push(Reverse(Scored::of(r)));
            }
        }
        if !complete || ctx.should_stop() {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn brute_covers(stored: &[Vec<u8>], x: &[u8], dir: Direction) -> bool {
        stored.iter().any(|y| match dir {
            Direction::Up => Lattice::le(y, x),
            Direction::Down => Lattice::le(x, y),
        })
    }

    #[test]
    fn paper_example_query() {
        // Elements (1,1,1), (1,3,0), (3,2,0); (1,2,2) is covered via (1,1,1).
        let mut a = Antichain::new(Direction::Up, 3);
        assert!(a.insert(&[1, 1, 1]));
        assert!(a.insert(&[1, 3, 0]));
        assert!(a.insert(&[3, 2, 0]));
        assert_eq!(a.len(), 3);
        assert!(a.covers(&[1, 2, 2]));
        assert!(!a.covers(&[0, 3, 3]));
        assert!(!a.covers(&[2, 2, 0]));
        // Inserting a specialization of (1,3,0) and (3,2,0) removes both.
        assert!(a.insert(&[1, 2, 0]));
        assert_eq!(a.len(), 2);
        assert!(a.covers(&[3, 2, 0]) && a.covers(&[1, 3, 0]) && !a.covers(&[0, 3, 3]));
        assert!(!a.insert(&[2, 2, 2]));
    }

    proptest! {
        #[test]
        fn antichain_matches_brute_force(
            ops in prop::collection::vec(prop::collection::vec(0u8..4, 3), 1..40),
            queries in prop::collection::vec(prop::collection::vec(0u8..4, 3), 1..40),
            down in any::<bool>(),
        ) {
            let dir = if down { Direction::Down } else { Direction::Up };
            let mut a = Antichain::new(dir, 3);
            let mut stored: Vec<Vec<u8>> = Vec::new();
            for x in &ops {
                let was = brute_covers(&stored, x, dir);
                prop_assert_eq!(a.insert(x), !was);
                if !was {
                    stored.retain(|y| !brute_covers(std::slice::from_ref(x), y, dir));
                    stored.push(x.clone());
                }
                prop_assert_eq!(a.len(), stored.len());
            }
            for x in queries.iter().chain(&ops) {
                prop_assert_eq!(a.covers(x), brute_covers(&stored, x, dir));
            }
        }

        #[test]
        fn canonical_tree_reaches_every_node_once(
            bounds in prop::collection::vec((0u8..2, 0u8..3), 1..5),
        ) {
            let min: Vec<u8> = bounds.iter().map(|b| b.0).collect();
            let max: Vec<u8> = bounds.iter().map(|b| b.0 + b.1).collect();
            let l = Lattice::new(min, max);
            let mut seen = std::collections::HashSet::new();
            let mut stack = vec![l.bottom()];
            while let Some(t) = stack.pop() {
                prop_assert!(seen.insert(t.clone()), "{:?} generated twice", t);
                stack.extend(canonical_children(&l, &t));
            }
            prop_assert_eq!(seen.len() as u128, l.size().unwrap());
        }
    }
}
