//! Flash: the globally optimal search of Kohlmayer et al. (PASSAT 2012) as generalized by ARX
//! (`docs/definitions.md` §2.3), with one byte of tags per transformation.
//!
//! The outer loop visits the lattice level by level; on each level the untagged transformations
//! are taken in the *strategy order* (rank; mean relative level; share of distinct values lost)
//! and a phase is started from each:
//! - *binary phase*: build a greedy path of untagged transformations up to the top, binary-search
//!   it for the lowest transformation with the phase's monotone property (anonymity, or the
//!   minimal class size when only that is monotone); explicitly checked transformations without
//!   the property are kept in a heap and new paths start from their untagged successors;
//! - *linear phase*: depth-first over every transformation above a node, checking each, then
//!   marking the node done.
//!
//! Which phases run depends on the monotonicity of the privacy models
//! ([`Problem::privacy_monotonicity`]) and of the score (every model without suppression; with
//! suppression only models monotone with suppression), giving the six configurations of ARX:
//!
//! | privacy \ utility | monotone | not monotone |
//! |---|---|---|
//! | Full | binary on anonymity; anonymous ⇒ generalizations pruned | binary on anonymity, then linear above the border |
//! | Partial | binary on min. class size, then linear; anonymous ⇒ generalizations pruned | binary on min. class size, then linear |
//! | None | linear only; anonymous ⇒ generalizations pruned | linear only |
//!
//! Predictive tagging: anonymity is inherited upwards and non-anonymity downwards only for
//! `Full`; the minimal class size (`CheckResult::min_class_size_ok`) always is. Lower-bound
//! pruning (the up-set of a transformation whose lower bound cannot beat the optimum is done) is
//! applied in every configuration, and bounds of earlier checks are re-tested whenever a
//! transformation is met again.
//!
//! [`Problem::privacy_monotonicity`]: crate::Problem::privacy_monotonicity

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};

use super::{Ctx, Phase};
use crate::check::CheckResult;
use crate::lattice::Levels;
use crate::problem::PrivacyMonotonicity;

const CHECKED: u8 = 1;
const ANON: u8 = 2;
const NOT_ANON: u8 = 4;
const K_OK: u8 = 8;
const NOT_K: u8 = 16;
/// Nothing in the up-set (including the node) that is unchecked can beat the optimum.
const PRUNED: u8 = 32;
/// Tags that classify a transformation (for the explored share).
const DONE: u8 = CHECKED | NOT_ANON | NOT_K | PRUNED;

/// Marker: a limit was hit or the search was cancelled.
struct Stopped;

/// Strategy order key: (rank, Σ relative level, −Σ distinct share, id).
#[derive(Debug, Clone, Copy)]
struct StrategyKey {
    rank: u32,
    generalization: f64,
    distinct: f64,
    id: usize,
}

impl PartialEq for StrategyKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for StrategyKey {}
impl PartialOrd for StrategyKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for StrategyKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank
            .cmp(&other.rank)
            .then_with(|| self.generalization.total_cmp(&other.generalization))
            .then_with(|| self.distinct.total_cmp(&other.distinct))
            .then_with(|| self.id.cmp(&other.id))
    }
}

struct Flash {
    min: Vec<u8>,
    range: Vec<usize>,
    strides: Vec<usize>,
    flags: Vec<u8>,
    lower_bounds: HashMap<usize, f64>,
    privacy: PrivacyMonotonicity,
    utility: bool,
    /// `gen_term[i][level - min_i]` = level / (height_i − 1).
    gen_term: Vec<Vec<f64>>,
    /// `distinct_term[i][level - min_i]` = −distinct_i(level) / distinct_i(0).
    distinct_term: Vec<Vec<f64>>,
    explored: u64,
    /// Linear phases go top-down with suppression-excess bounds ([`Ctx::excess_bounds`]).
    excess_bounds: bool,
    /// With `excess_bounds`: per transformation, a lower bound of its suppression excess (its
    /// own once checked; else the largest of its checked or bounded successors').
    excess: HashMap<usize, Vec<f64>>,
}

/// Most transformations a top-down linear phase collects; beyond, it goes depth-first.
const TOP_DOWN_MAX: usize = 1 << 20;

/// Runs Flash; returns true if the whole space was classified (always, unless stopped).
pub(crate) fn run(ctx: &mut Ctx<'_, '_>) -> bool {
    let mut f = Flash::new(ctx);
    f.outer(ctx).is_ok()
}

impl Flash {
    fn new(ctx: &Ctx<'_, '_>) -> Flash {
        let lattice = ctx.lattice();
        let min = lattice.min().to_vec();
        let max = lattice.max();
        let dims = min.len();
        let range: Vec<usize> = (0..dims).map(|i| (max[i] - min[i]) as usize + 1).collect();
        let mut strides = vec![1usize; dims];
        for i in (0..dims.saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * range[i + 1];
        }
        let size = strides[0] * range[0];
        let hierarchies = ctx.problem.hierarchies();
        let gen_term = (0..dims)
            .map(|i| {
                let top = (hierarchies[i].height() - 1).max(1) as f64;
                (min[i]..=max[i]).map(|l| l as f64 / top).collect()
            })
            .collect();
        let distinct_term = (0..dims)
            .map(|i| {
                let d0 = hierarchies[i].distinct(0).max(1) as f64;
                (min[i]..=max[i])
                    .map(|l| -(hierarchies[i].distinct(l as usize) as f64) / d0)
                    .collect()
            })
            .collect();
        Flash {
            min,
            range,
            strides,
            flags: vec![0; size],
            lower_bounds: HashMap::new(),
            privacy: ctx.privacy(),
            utility: ctx.utility_monotone,
            gen_term,
            distinct_term,
            explored: 0,
            excess_bounds: ctx.excess_bounds(),
            excess: HashMap::new(),
        }
    }

    fn digit(&self, id: usize, i: usize) -> usize {
        (id / self.strides[i]) % self.range[i]
    }

    fn levels(&self, id: usize) -> Levels {
        (0..self.min.len())
            .map(|i| self.min[i] + self.digit(id, i) as u8)
            .collect()
    }

    fn id(&self, levels: &[u8]) -> usize {
        levels
            .iter()
            .enumerate()
            .map(|(i, &l)| (l - self.min[i]) as usize * self.strides[i])
            .sum()
    }

    fn key(&self, id: usize) -> StrategyKey {
        let mut rank = 0u32;
        let mut generalization = 0.0;
        let mut distinct = 0.0;
        for i in 0..self.min.len() {
            let d = self.digit(id, i);
            rank += d as u32;
            generalization += self.gen_term[i][d];
            distinct += self.distinct_term[i][d];
        }
        StrategyKey {
            rank,
            generalization,
            distinct,
            id,
        }
    }

    fn successors(&self, id: usize) -> Vec<usize> {
        (0..self.min.len())
            .filter(|&i| self.digit(id, i) + 1 < self.range[i])
            .map(|i| id + self.strides[i])
            .collect()
    }

    /// Successors in strategy order.
    fn sorted_successors(&self, id: usize) -> Vec<usize> {
        let mut s: Vec<StrategyKey> = self
            .successors(id)
            .into_iter()
            .map(|s| self.key(s))
            .collect();
        s.sort_unstable();
        s.into_iter().map(|k| k.id).collect()
    }

    fn has(&self, id: usize, bit: u8) -> bool {
        self.flags[id] & bit != 0
    }

    fn set(&mut self, id: usize, bit: u8) {
        let before = self.flags[id];
        self.flags[id] |= bit;
        if before & DONE == 0 && bit & DONE != 0 {
            self.explored += 1;
        }
    }

    /// Tags `id` and all its generalizations.
    fn tag_up(&mut self, id: usize, bit: u8) {
        self.tag_closure(id, bit, true);
    }

    /// Tags `id` and all its specializations.
    fn tag_down(&mut self, id: usize, bit: u8) {
        self.tag_closure(id, bit, false);
    }

    /// Tags `id` and everything above (`up`) or below it that is not tagged yet.
    fn tag_closure(&mut self, id: usize, bit: u8, up: bool) {
        if self.has(id, bit) {
            return;
        }
        self.set(id, bit);
        let mut stack = vec![id];
        while let Some(x) = stack.pop() {
            for i in 0..self.min.len() {
                let d = self.digit(x, i);
                let y = if up && d + 1 < self.range[i] {
                    x + self.strides[i]
                } else if !up && d > 0 {
                    x - self.strides[i]
                } else {
                    continue;
                };
                if !self.has(y, bit) {
                    self.set(y, bit);
                    stack.push(y);
                }
            }
        }
    }

    /// Bits of the binary phase's property: (has it, lacks it).
    fn property(&self) -> (u8, u8) {
        match self.privacy {
            PrivacyMonotonicity::Full => (ANON, NOT_ANON),
            _ => (K_OK, NOT_K),
        }
    }

    fn uses_binary(&self) -> bool {
        self.privacy != PrivacyMonotonicity::None
    }

    fn uses_linear(&self) -> bool {
        !(self.privacy == PrivacyMonotonicity::Full && self.utility)
    }

    fn skipped_binary(&self, id: usize) -> bool {
        let (yes, no) = self.property();
        self.has(id, PRUNED | yes | no)
    }

    /// Known not to be anonymous without checking it.
    fn known_not_anonymous(&self, id: usize) -> bool {
        self.has(id, NOT_ANON | NOT_K)
    }

    /// Records a check result and applies predictive tagging and pruning.
    fn after_check(&mut self, ctx: &Ctx<'_, '_>, id: usize, r: &CheckResult) {
        self.set(id, CHECKED);
        self.lower_bounds.insert(id, r.lower_bound);
        if self.excess_bounds && !r.excess.is_empty() {
            self.raise_excess(id, &r.excess);
        }
        match self.privacy {
            PrivacyMonotonicity::Full => {
                if r.anonymous {
                    self.tag_up(id, ANON);
                } else {
                    self.tag_down(id, NOT_ANON);
                }
            }
            PrivacyMonotonicity::Partial => {
                self.set(id, if r.anonymous { ANON } else { NOT_ANON });
                if r.min_class_size_ok {
                    self.tag_up(id, K_OK);
                } else {
                    self.tag_down(id, NOT_K);
                }
            }
            PrivacyMonotonicity::None => {
                self.set(id, if r.anonymous { ANON } else { NOT_ANON });
            }
        }
        if self.utility && r.anonymous {
            // Generalizations of an anonymous transformation score no better and rank higher.
            self.tag_up(id, PRUNED);
        }
        self.retest(ctx, id);
    }

    /// Prunes the up-set of a checked transformation if its bound cannot beat the optimum.
    fn retest(&mut self, ctx: &Ctx<'_, '_>, id: usize) {
        if self.has(id, PRUNED) {
            return;
        }
        if let Some(&lb) = self.lower_bounds.get(&id)
            && ctx.cannot_improve(lb, &self.levels(id))
        {
            self.tag_up(id, PRUNED);
        }
    }

    fn check(&mut self, ctx: &mut Ctx<'_, '_>, id: usize) -> Result<CheckResult, Stopped> {
        let r = ctx.check(&self.levels(id)).ok_or(Stopped)?;
        self.after_check(ctx, id, &r);
        ctx.set_explored(self.explored);
        Ok(r)
    }

    /// The outer loop over the levels of the lattice.
    fn outer(&mut self, ctx: &mut Ctx<'_, '_>) -> Result<(), Stopped> {
        let max_digit_sum: usize = self.range.iter().map(|r| r - 1).sum();
        for rank in 0..=max_digit_sum {
            let mut nodes: Vec<StrategyKey> = Vec::new();
            self.for_rank(rank, |id| nodes.push(id));
            let mut nodes: Vec<StrategyKey> = nodes
                .into_iter()
                .filter(|k| !self.skipped_outer(k.id))
                .collect();
            nodes.sort_unstable();
            for k in nodes {
                if ctx.should_stop() {
                    return Err(Stopped);
                }
                if self.skipped_outer(k.id) {
                    continue;
                }
                if self.uses_binary() {
                    self.binary_phase(ctx, k.id)?;
                } else {
                    self.linear_phase(ctx, k.id)?;
                }
            }
        }
        Ok(())
    }

    fn skipped_outer(&self, id: usize) -> bool {
        if self.uses_binary() {
            self.skipped_binary(id)
        } else {
            self.has(id, PRUNED)
        }
    }

    /// Calls `f` with the strategy key of every transformation whose digits sum to `rank`.
    fn for_rank(&self, rank: usize, mut f: impl FnMut(StrategyKey)) {
        let dims = self.min.len();
        // suffix[i] = largest digit sum of the QIs i.. .
        let mut suffix = vec![0usize; dims + 1];
        for i in (0..dims).rev() {
            suffix[i] = suffix[i + 1] + self.range[i] - 1;
        }
        fn rec(
            this: &Flash,
            i: usize,
            left: usize,
            id: usize,
            suffix: &[usize],
            f: &mut dyn FnMut(StrategyKey),
        ) {
            if i == this.min.len() {
                f(this.key(id));
                return;
            }
            let lo = left.saturating_sub(suffix[i + 1]);
            let hi = left.min(this.range[i] - 1);
            for d in lo..=hi {
                rec(this, i + 1, left - d, id + d * this.strides[i], suffix, f);
            }
        }
        if rank <= suffix[0] {
            rec(self, 0, rank, 0, &suffix, &mut f);
        }
    }

    /// Greedy path of untagged transformations from `id` towards the top.
    fn find_path(&self, id: usize) -> Vec<usize> {
        let mut path = vec![id];
        let mut cur = id;
        while let Some(next) = self
            .sorted_successors(cur)
            .into_iter()
            .find(|&s| !self.skipped_binary(s))
        {
            path.push(next);
            cur = next;
        }
        path
    }

    /// Binary search on a path for the lowest transformation with the phase's property;
    /// checked transformations without it go into `heap`.
    fn check_path(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        path: &[usize],
        heap: &mut BinaryHeap<Reverse<StrategyKey>>,
    ) -> Result<Option<usize>, Stopped> {
        let (yes, no) = self.property();
        let mut lo = 0isize;
        let mut hi = path.len() as isize - 1;
        let mut found = None;
        while lo <= hi {
            let mid = ((lo + hi) / 2) as usize;
            let id = path[mid];
            if self.has(id, PRUNED) {
                // Pruning is inherited upwards: everything above on the path is pruned too.
                hi = mid as isize - 1;
                continue;
            }
            let has_property = if self.has(id, yes) {
                true
            } else if self.has(id, no) {
                false
            } else if self.uses_linear() && ctx.cannot_improve_unchecked(&self.levels(id)) {
                // Not for Full/Full: there checks of non-anonymous transformations classify
                // their whole down-sets, which pays off more than skipping them.
                self.tag_up(id, PRUNED);
                hi = mid as isize - 1;
                continue;
            } else {
                let r = self.check(ctx, id)?;
                let p = match self.privacy {
                    PrivacyMonotonicity::Full => r.anonymous,
                    _ => r.min_class_size_ok,
                };
                if !p {
                    heap.push(Reverse(self.key(id)));
                }
                p
            };
            if has_property {
                found = Some(id);
                hi = mid as isize - 1;
            } else {
                lo = mid as isize + 1;
            }
        }
        Ok(found)
    }

    fn binary_phase(&mut self, ctx: &mut Ctx<'_, '_>, start: usize) -> Result<(), Stopped> {
        let mut heap: BinaryHeap<Reverse<StrategyKey>> = BinaryHeap::new();
        self.path_then_linear(ctx, start, &mut heap)?;
        while let Some(Reverse(k)) = heap.pop() {
            ctx.add_expansions(1);
            for s in self.sorted_successors(k.id) {
                if ctx.should_stop() {
                    return Err(Stopped);
                }
                if !self.skipped_binary(s) {
                    self.path_then_linear(ctx, s, &mut heap)?;
                }
            }
        }
        Ok(())
    }

    fn path_then_linear(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        start: usize,
        heap: &mut BinaryHeap<Reverse<StrategyKey>>,
    ) -> Result<(), Stopped> {
        ctx.set_phase(Phase::Binary);
        let path = self.find_path(start);
        let found = self.check_path(ctx, &path, heap)?;
        if self.uses_linear()
            && let Some(f) = found
        {
            self.linear_phase(ctx, f)?;
        }
        Ok(())
    }

    /// Visits `id` in the linear phase: checks it if needed and returns its successors that
    /// still have to be visited (`None` if it is pruned). Unchecked successors are checked as one
    /// parallel batch.
    fn open(&mut self, ctx: &mut Ctx<'_, '_>, id: usize) -> Result<Option<Vec<usize>>, Stopped> {
        if self.has(id, PRUNED) {
            return Ok(None);
        }
        if !self.has(id, CHECKED) && !self.known_not_anonymous(id) {
            if ctx.cannot_improve_unchecked(&self.levels(id)) {
                self.tag_up(id, PRUNED);
                return Ok(None);
            }
            self.check(ctx, id)?;
        } else {
            self.retest(ctx, id);
        }
        if self.has(id, PRUNED) {
            return Ok(None);
        }
        ctx.add_expansions(1);
        let children: Vec<usize> = self
            .sorted_successors(id)
            .into_iter()
            .filter(|&s| !self.has(s, PRUNED))
            .collect();
        let mut to_check: Vec<Levels> = Vec::new();
        for &s in &children {
            if self.has(s, CHECKED) || self.known_not_anonymous(s) {
                continue;
            }
            let levels = self.levels(s);
            if ctx.cannot_improve_unchecked(&levels) {
                self.tag_up(s, PRUNED);
            } else {
                to_check.push(levels);
            }
        }
        self.check_batch(ctx, &to_check)?;
        Ok(Some(
            children
                .into_iter()
                .filter(|&s| !self.has(s, PRUNED))
                .collect(),
        ))
    }

    /// Checks `nodes` as one parallel batch and records the results.
    fn check_batch(&mut self, ctx: &mut Ctx<'_, '_>, nodes: &[Levels]) -> Result<(), Stopped> {
        if nodes.is_empty() {
            return Ok(());
        }
        let results = ctx.check_all(nodes);
        for r in &results {
            let id = self.id(&r.levels);
            self.after_check(ctx, id, r);
        }
        ctx.set_explored(self.explored);
        if results.len() < nodes.len() {
            return Err(Stopped);
        }
        Ok(())
    }

    /// Raises the excess bound of `id` to at least `excess`, attribute by attribute.
    fn raise_excess(&mut self, id: usize, excess: &[f64]) {
        let e = self
            .excess
            .entry(id)
            .or_insert_with(|| vec![0.0; excess.len()]);
        for (a, &b) in e.iter_mut().zip(excess) {
            *a = a.max(b);
        }
    }

    /// The largest excess bound of the successors of `id`, if any has one: a lower bound of
    /// the excess of `id` (records suppressed above are suppressed at `id`).
    fn inherited_excess(&self, id: usize) -> Option<Vec<f64>> {
        let mut out: Option<Vec<f64>> = None;
        for s in self.successors(id) {
            if let Some(e) = self.excess.get(&s) {
                match &mut out {
                    None => out = Some(e.clone()),
                    Some(o) => o.iter_mut().zip(e).for_each(|(a, &b)| *a = a.max(b)),
                }
            }
        }
        out
    }

    /// Everything above `start` (itself included) that is neither pruned nor bounded out by
    /// the generalization-only bound, or `None` beyond [`TOP_DOWN_MAX`] transformations.
    fn up_set_to_visit(&mut self, ctx: &Ctx<'_, '_>, start: usize) -> Option<Vec<usize>> {
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![start];
        let mut out = Vec::new();
        seen.insert(start);
        while let Some(id) = stack.pop() {
            if self.has(id, PRUNED) {
                continue;
            }
            if !self.has(id, CHECKED) && ctx.cannot_improve_unchecked(&self.levels(id)) {
                self.tag_up(id, PRUNED);
                continue;
            }
            out.push(id);
            if out.len() > TOP_DOWN_MAX {
                return None;
            }
            for s in self.successors(id) {
                if seen.insert(s) {
                    stack.push(s);
                }
            }
        }
        Some(out)
    }

    /// The linear phase top-down (with [`Flash::excess_bounds`]): the up-set of `start` level
    /// by level from its top, each level's checks as one parallel batch. A transformation whose
    /// successors' suppression excess already rules it out is not checked; its bound passes on
    /// to its own specializations. With a good optimum, most transformations near the bottom,
    /// which suppress much and cost most to check, are ruled out this way.
    fn top_down_phase(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        start: usize,
        nodes: Vec<usize>,
    ) -> Result<(), Stopped> {
        let mut keys: Vec<StrategyKey> = nodes.into_iter().map(|id| self.key(id)).collect();
        keys.sort_unstable_by(|a, b| b.rank.cmp(&a.rank).then_with(|| a.cmp(b)));
        for level in keys.chunk_by(|a, b| a.rank == b.rank) {
            if ctx.should_stop() {
                return Err(Stopped);
            }
            ctx.add_expansions(level.len() as u64);
            let mut to_check: Vec<Levels> = Vec::new();
            for k in level {
                let id = k.id;
                if self.has(id, PRUNED) {
                    continue;
                }
                let inherited = self.inherited_excess(id);
                if let Some(e) = &inherited {
                    self.raise_excess(id, e);
                }
                if self.has(id, CHECKED) {
                    self.retest(ctx, id);
                    continue;
                }
                let levels = self.levels(id);
                if ctx.cannot_improve_unchecked(&levels) {
                    self.tag_up(id, PRUNED);
                } else if self.known_not_anonymous(id)
                    || inherited.is_some_and(|e| ctx.cannot_improve_below(&levels, &e))
                {
                    continue;
                } else {
                    to_check.push(levels);
                }
            }
            self.check_batch(ctx, &to_check)?;
        }
        // Everything above `start` is checked or ruled out.
        self.tag_up(start, PRUNED);
        ctx.set_explored(self.explored);
        Ok(())
    }

    /// Everything above `start`; every visited node ends up pruned. Top-down with excess
    /// bounds once there is an optimum to beat ([`Flash::top_down_phase`]), else depth-first.
    fn linear_phase(&mut self, ctx: &mut Ctx<'_, '_>, start: usize) -> Result<(), Stopped> {
        ctx.set_phase(Phase::Linear);
        if self.excess_bounds
            && ctx.best.is_some()
            && let Some(nodes) = self.up_set_to_visit(ctx, start)
        {
            return self.top_down_phase(ctx, start, nodes);
        }
        let Some(children) = self.open(ctx, start)? else {
            return Ok(());
        };
        let mut stack: Vec<(usize, Vec<usize>, usize)> = vec![(start, children, 0)];
        while let Some(top) = stack.last_mut() {
            if top.2 < top.1.len() {
                let c = top.1[top.2];
                top.2 += 1;
                if ctx.should_stop() {
                    return Err(Stopped);
                }
                if let Some(grand) = self.open(ctx, c)? {
                    stack.push((c, grand, 0));
                }
            } else {
                let id = top.0;
                stack.pop();
                // Every successor is done, so nothing unchecked above `id` can win.
                self.tag_up(id, PRUNED);
            }
        }
        ctx.set_explored(self.explored);
        Ok(())
    }
}
