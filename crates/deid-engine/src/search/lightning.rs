//! Lightning (Prasser et al., Trans. Data Privacy 2016, Algorithms 1–3) and its top-down variant
//! (Prasser et al., GigaScience 2020; `docs/definitions.md` §2.3).
//!
//! Bottom-up: a priority queue of checked transformations ordered by score (best first). Each
//! step pops the best one; every `stepping`-th step (stepping = lattice height) performs a greedy
//! dive — expand, follow the best successor, expand again, until no unprocessed successor is
//! left — otherwise a single expansion. Expanding checks all successors that were neither
//! expanded nor pruned (as one parallel batch) and queues them. Anonymity is never predicted
//! (every transformation is checked explicitly, as in ARX), but the up-set of a transformation
//! whose lower bound cannot beat the optimum is pruned and remembered in an [`Antichain`]; so is
//! the up-set of an anonymous transformation when the score is monotone.
//!
//! Top-down: the same best-first machinery starting at the top and expanding predecessors, without
//! greedy dives and without utility pruning. When the privacy models allow it, a transformation
//! that is not anonymous (`Full`) or misses the minimal class size (`Partial`) is not expanded and
//! its down-set is remembered (nothing below it can be anonymous). Where the quality model's bounds
//! are valid (`lower_bound_valid`), predecessors are checked lazily: an expansion queues them by a
//! lower bound of their score ([`Ctx::score_bound`], with the parent's suppression excess for
//! Loss), and they are checked — [`LAZY_BATCH`] at a time, smallest bound first — only when that
//! bound comes before every checked transformation in the queue. The expansions are exactly those
//! of checking every predecessor at once (a checked transformation is expanded only when no
//! unchecked one can have a lower score), but a predecessor whose bound never comes first is never
//! checked: on creditcard_int a step of the descent checks a few of its 24 predecessors.
//!
//! Both end when the queue is empty — then every transformation was checked or pruned, and the
//! result is optimal — or at a limit.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use super::bfs::{Antichain, Direction};
use super::order::tolerance;
use super::{Ctx, Phase, Scored, exact_cmp};
use crate::check::CheckResult;
use crate::lattice::Levels;
use crate::problem::PrivacyMonotonicity;

/// Unchecked predecessors checked together when their bounds come first (top-down, lazy): a
/// constant, so that the checks do not depend on the number of threads.
pub(crate) const LAZY_BATCH: usize = 4;

#[derive(Debug, Clone)]
struct NodeState {
    score: f64,
    lower_bound: f64,
    anonymous: bool,
    min_class_size_ok: bool,
    expanded: bool,
    queued: bool,
    /// Top-down: suppression excess per quasi-identifier (Loss; bounds the predecessors'
    /// scores), taken when the transformation is expanded.
    excess: Vec<f64>,
}

impl NodeState {
    /// The state of a checked transformation; `top_down` keeps its suppression excess.
    fn of(r: &CheckResult, top_down: bool) -> NodeState {
        NodeState {
            score: r.score,
            lower_bound: r.lower_bound,
            anonymous: r.anonymous,
            min_class_size_ok: r.min_class_size_ok,
            expanded: false,
            queued: false,
            excess: if top_down {
                r.excess.clone()
            } else {
                Vec::new()
            },
        }
    }
}

struct Search {
    nodes: HashMap<Levels, NodeState>,
    queue: BinaryHeap<Reverse<Scored>>,
    /// Bottom-up: up-sets that cannot contain a better solution. Top-down: down-sets without any
    /// anonymous transformation.
    pruned: Antichain,
    top_down: bool,
    /// The lowest score of an anonymous transformation this search checked.
    best: f64,
    /// Top-down with valid bounds: unchecked predecessors by a lower bound of their score.
    lazy: BinaryHeap<Reverse<Scored>>,
    /// The transformations in `lazy`.
    lazy_queued: HashSet<Levels>,
}

impl Search {
    fn new(ctx: &Ctx<'_, '_>, top_down: bool) -> Search {
        let dims = ctx.lattice().dimensions();
        let dir = if top_down {
            Direction::Down
        } else {
            Direction::Up
        };
        Search {
            nodes: HashMap::new(),
            queue: BinaryHeap::new(),
            pruned: Antichain::new(dir, dims),
            top_down,
            best: f64::INFINITY,
            lazy: BinaryHeap::new(),
            lazy_queued: HashSet::new(),
        }
    }

    /// Checks and queues the start node.
    fn start(&mut self, ctx: &mut Ctx<'_, '_>, levels: Levels) -> bool {
        let Some(r) = ctx.check(&levels) else {
            return false;
        };
        self.note(&r);
        self.nodes.insert(levels, NodeState::of(&r, self.top_down));
        self.enqueue(&r.levels);
        ctx.set_explored(1);
        true
    }

    /// Keeps the lowest score of the anonymous transformations checked.
    fn note(&mut self, r: &CheckResult) {
        if r.anonymous && r.score < self.best {
            self.best = r.score;
        }
    }

    fn enqueue(&mut self, levels: &[u8]) {
        if let Some(st) = self.nodes.get_mut(levels)
            && !st.queued
        {
            st.queued = true;
            self.queue.push(Reverse(Scored {
                score: st.score,
                levels: levels.to_vec(),
                lower_bound: st.lower_bound,
                anonymous: st.anonymous,
            }));
        }
    }

    /// True if nothing below (top-down) a transformation can be anonymous.
    fn hopeless(ctx: &Ctx<'_, '_>, st: &NodeState) -> bool {
        match ctx.privacy() {
            PrivacyMonotonicity::Full => !st.anonymous,
            PrivacyMonotonicity::Partial => !st.min_class_size_ok,
            PrivacyMonotonicity::None => false,
        }
    }

    /// True if the transformation need not be expanded (records new pruning facts).
    fn prune(&mut self, ctx: &Ctx<'_, '_>, levels: &[u8]) -> bool {
        let Some(st) = self.nodes.get(levels) else {
            return true;
        };
        if st.expanded || self.pruned.covers(levels) {
            return true;
        }
        let prune = if self.top_down {
            Self::hopeless(ctx, st)
        } else {
            ctx.cannot_improve(st.lower_bound, levels) || (st.anonymous && ctx.utility_monotone)
        };
        if prune {
            self.pruned.insert(levels);
        }
        prune
    }

    /// Algorithm 1: checks the unexpanded, unpruned neighbours of `levels`, queues them and
    /// returns the best of them.
    fn expand(&mut self, ctx: &mut Ctx<'_, '_>, levels: &[u8]) -> Option<Levels> {
        if let Some(st) = self.nodes.get_mut(levels) {
            st.expanded = true;
        }
        ctx.add_expansions(1);
        #[cfg(test)]
        if self.top_down {
            super::EXPANDED.with_borrow_mut(|e| e.push(levels.to_vec()));
        }
        #[cfg(test)]
        let lazy = !super::EAGER_TOP_DOWN.get();
        #[cfg(not(test))]
        let lazy = true;
        let lattice = ctx.lattice();
        let neighbours = if self.top_down {
            lattice.predecessors(levels)
        } else {
            lattice.successors(levels)
        };
        let mut kept: Vec<Levels> = Vec::with_capacity(neighbours.len());
        for n in neighbours {
            if self.nodes.get(&n).is_some_and(|s| s.expanded) || self.pruned.covers(&n) {
                continue;
            }
            if !self.top_down && !self.nodes.contains_key(&n) && ctx.cannot_improve_unchecked(&n) {
                // Skip the check: the bound alone shows that nothing above can win.
                self.pruned.insert(&n);
                continue;
            }
            kept.push(n);
        }
        let neighbours = kept;
        if self.top_down
            && lazy
            && ctx.lower_bound_valid
            && let Some(st) = self.nodes.get_mut(levels)
        {
            let excess = std::mem::take(&mut st.excess);
            self.defer(ctx, neighbours, &excess);
            return None;
        }
        let to_check: Vec<Levels> = neighbours
            .iter()
            .filter(|n| !self.nodes.contains_key(*n))
            .cloned()
            .collect();
        for r in ctx.check_all(&to_check) {
            self.note(&r);
            self.nodes
                .insert(r.levels.clone(), NodeState::of(&r, self.top_down));
        }
        ctx.set_explored(self.nodes.len() as u64);
        let mut best: Option<(f64, Levels)> = None;
        for n in neighbours {
            if !self.nodes.contains_key(&n) || self.prune(ctx, &n) {
                continue;
            }
            self.enqueue(&n);
            let score = self.nodes[&n].score;
            if best
                .as_ref()
                .is_none_or(|(s, l)| exact_cmp(score, &n, *s, l).is_lt())
            {
                best = Some((score, n));
            }
        }
        best.map(|(_, l)| l)
    }

    /// Top-down, lazily: queues the checked `neighbours` that are not pruned and the unchecked
    /// ones by a lower bound of their score (`excess`: the expanded parent's).
    fn defer(&mut self, ctx: &Ctx<'_, '_>, neighbours: Vec<Levels>, excess: &[f64]) {
        for n in neighbours {
            if self.nodes.contains_key(&n) {
                if !self.prune(ctx, &n) {
                    self.enqueue(&n);
                }
            } else if !self.lazy_queued.contains(&n) {
                let bound = ctx.score_bound(&n, excess);
                // Ahead of a checked transformation whose score equals the bound within the
                // tolerance of score comparisons.
                let key = bound - tolerance(bound, bound);
                self.lazy.push(Reverse(Scored {
                    score: key,
                    levels: n.clone(),
                    lower_bound: key,
                    anonymous: false,
                }));
                self.lazy_queued.insert(n);
            }
        }
    }

    /// True if the next transformation in order is an unchecked one.
    fn lazy_first(&self) -> bool {
        match (self.lazy.peek(), self.queue.peek()) {
            (Some(Reverse(l)), Some(Reverse(c))) => l.cmp(c).is_le(),
            (Some(_), None) => true,
            _ => false,
        }
    }

    /// Checks up to [`LAZY_BATCH`] unchecked transformations whose bounds come before every
    /// checked one in the queue, and queues those not pruned. False if the search must stop.
    fn check_lazy(&mut self, ctx: &mut Ctx<'_, '_>) -> bool {
        let mut entries: Vec<Scored> = Vec::with_capacity(LAZY_BATCH);
        while entries.len() < LAZY_BATCH && self.lazy_first() {
            let Some(Reverse(item)) = self.lazy.pop() else {
                break;
            };
            self.lazy_queued.remove(&item.levels);
            if self.pruned.covers(&item.levels) {
                continue;
            }
            if self.nodes.contains_key(&item.levels) {
                if !self.prune(ctx, &item.levels) {
                    self.enqueue(&item.levels);
                }
                continue;
            }
            entries.push(item);
        }
        let batch: Vec<Levels> = entries.iter().map(|e| e.levels.clone()).collect();
        let results = ctx.check_all(&batch);
        let complete = results.len() == batch.len();
        for r in results {
            self.note(&r);
            self.nodes
                .insert(r.levels.clone(), NodeState::of(&r, self.top_down));
            if !self.prune(ctx, &r.levels) {
                self.enqueue(&r.levels);
            }
        }
        ctx.set_explored(self.nodes.len() as u64);
        if !complete {
            // Stopped inside the batch: the unchecked rest goes back to the queue.
            for item in entries {
                if !self.nodes.contains_key(&item.levels) {
                    self.lazy_queued.insert(item.levels.clone());
                    self.lazy.push(Reverse(item));
                }
            }
            return false;
        }
        true
    }

    /// Algorithm 3: a greedy dive from `levels`. Returns the transformation the dive was to
    /// expand next if a limit (or the portfolio's slice) stopped it.
    fn greedy(&mut self, ctx: &mut Ctx<'_, '_>, levels: Levels) -> Option<Levels> {
        ctx.set_phase(Phase::Greedy);
        let mut cur = levels;
        let mut left = None;
        loop {
            if ctx.should_stop() {
                left = Some(cur);
                break;
            }
            match self.expand(ctx, &cur) {
                Some(next) => cur = next,
                None => break,
            }
        }
        ctx.set_phase(Phase::BestFirst);
        left
    }
}

/// The top-down variant. Returns true if the queue ran empty (optimal).
pub(crate) fn run_top_down(ctx: &mut Ctx<'_, '_>) -> bool {
    BestFirst::new(ctx, true).resume(ctx)
}

/// A run of Lightning or top-down that can stop at any point (a limit, or the end of a slice of
/// `auto`'s portfolio) and [resume](BestFirst::resume) where it stopped: the queue, the checked
/// transformations, the pruned sets and a greedy dive in progress persist. A slice ends between
/// expansions (it never cuts a batch of checks); only the limits, which end the run, cut one.
pub(crate) struct BestFirst {
    s: Search,
    started: bool,
    step: u64,
    /// Where a greedy dive that was stopped goes on.
    dive: Option<Levels>,
}

impl BestFirst {
    /// A run that has not started (bottom-up Lightning, or top-down).
    pub(crate) fn new(ctx: &Ctx<'_, '_>, top_down: bool) -> BestFirst {
        BestFirst {
            s: Search::new(ctx, top_down),
            started: false,
            step: 0,
            dive: None,
        }
    }

    /// The lowest score of an anonymous transformation this search checked (infinite before).
    pub(crate) fn best_score(&self) -> f64 {
        self.s.best
    }

    /// Searches until the queue runs empty (returns true: optimal) or a limit (or the
    /// portfolio's slice) stops it.
    pub(crate) fn resume(&mut self, ctx: &mut Ctx<'_, '_>) -> bool {
        let lattice = ctx.lattice();
        let top_down = self.s.top_down;
        ctx.set_phase(if top_down {
            Phase::Searching
        } else {
            Phase::BestFirst
        });
        if !self.started {
            let start = if top_down {
                lattice.top()
            } else {
                lattice.bottom()
            };
            if !self.s.start(ctx, start) {
                return false;
            }
            self.started = true;
        }
        let stepping = u64::from(lattice.height().max(1));
        if let Some(cur) = self.dive.take() {
            // A dive that was stopped goes on first.
            self.dive = self.s.greedy(ctx, cur);
            if ctx.stopped() {
                return false;
            }
        }
        loop {
            if self.s.lazy_first() {
                if ctx.should_stop() || !self.s.check_lazy(ctx) {
                    return false;
                }
                continue;
            }
            let Some(Reverse(item)) = self.s.queue.pop() else {
                break;
            };
            if ctx.should_stop() {
                self.s.queue.push(Reverse(item));
                return false;
            }
            if self.s.prune(ctx, &item.levels) {
                continue;
            }
            if top_down {
                self.s.expand(ctx, &item.levels);
            } else {
                self.step += 1;
                if self.step.is_multiple_of(stepping) {
                    self.dive = self.s.greedy(ctx, item.levels);
                } else {
                    self.s.expand(ctx, &item.levels);
                }
            }
        }
        !ctx.stopped()
    }
}
