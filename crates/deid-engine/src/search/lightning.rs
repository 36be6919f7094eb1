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
//! that is not anonymous (`Full`) or misses the minimal class size (`Partial`) is not expanded
//! and its down-set is remembered (nothing below it can be anonymous).
//!
//! Both end when the queue is empty — then every transformation was checked or pruned, and the
//! result is optimal — or at a limit.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::bfs::{Antichain, Direction};
use super::{Ctx, Phase, Scored, exact_cmp};
use crate::check::CheckResult;
use crate::lattice::Levels;
use crate::problem::PrivacyMonotonicity;

#[derive(Debug, Clone)]
struct NodeState {
    score: f64,
    lower_bound: f64,
    anonymous: bool,
    min_class_size_ok: bool,
    expanded: bool,
    queued: bool,
}

impl NodeState {
    fn of(r: &CheckResult) -> NodeState {
        NodeState {
            score: r.score,
            lower_bound: r.lower_bound,
            anonymous: r.anonymous,
            min_class_size_ok: r.min_class_size_ok,
            expanded: false,
            queued: false,
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
        }
    }

    /// Checks and queues the start node.
    fn start(&mut self, ctx: &mut Ctx<'_, '_>, levels: Levels) -> bool {
        let Some(r) = ctx.check(&levels) else {
            return false;
        };
        self.nodes.insert(levels, NodeState::of(&r));
        self.enqueue(&r.levels);
        ctx.set_explored(1);
        true
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
        let to_check: Vec<Levels> = neighbours
            .iter()
            .filter(|n| !self.nodes.contains_key(*n))
            .cloned()
            .collect();
        for r in ctx.check_all(&to_check) {
            self.nodes.insert(r.levels.clone(), NodeState::of(&r));
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

    /// Algorithm 3: a greedy dive from `levels`.
    fn greedy(&mut self, ctx: &mut Ctx<'_, '_>, levels: Levels) {
        ctx.set_phase(Phase::Greedy);
        let mut cur = levels;
        while !ctx.should_stop() {
            match self.expand(ctx, &cur) {
                Some(next) => cur = next,
                None => break,
            }
        }
        ctx.set_phase(Phase::BestFirst);
    }
}

/// Lightning, bottom-up (Algorithm 2). Returns true if the queue ran empty (optimal).
pub(crate) fn run_bottom_up(ctx: &mut Ctx<'_, '_>) -> bool {
    ctx.set_phase(Phase::BestFirst);
    let lattice = ctx.lattice();
    let stepping = u64::from(lattice.height().max(1));
    let mut s = Search::new(ctx, false);
    if !s.start(ctx, lattice.bottom()) {
        return false;
    }
    let mut step = 0u64;
    while let Some(Reverse(item)) = s.queue.pop() {
        if ctx.should_stop() {
            return false;
        }
        if s.prune(ctx, &item.levels) {
            continue;
        }
        step += 1;
        if step.is_multiple_of(stepping) {
            s.greedy(ctx, item.levels);
        } else {
            s.expand(ctx, &item.levels);
        }
    }
    !ctx.stopped()
}

/// The top-down variant. Returns true if the queue ran empty (optimal).
pub(crate) fn run_top_down(ctx: &mut Ctx<'_, '_>) -> bool {
    ctx.set_phase(Phase::Searching);
    let lattice = ctx.lattice();
    let mut s = Search::new(ctx, true);
    if !s.start(ctx, lattice.top()) {
        return false;
    }
    while let Some(Reverse(item)) = s.queue.pop() {
        if ctx.should_stop() {
            return false;
        }
        if s.prune(ctx, &item.levels) {
            continue;
        }
        s.expand(ctx, &item.levels);
    }
    !ctx.stopped()
}
