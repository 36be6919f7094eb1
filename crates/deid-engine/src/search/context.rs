//! The search context every algorithm works through ([`Ctx`]): batches of checks on the pool
//! (results in input order), the best anonymous transformation so far, the time and check
//! limits, cancellation, the portfolio's slices and shared result cache, and the progress
//! ticker ([`Shared`]).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::candidates::Candidates;
use super::{
    Algorithm, CancelFlag, Improvement, Phase, Progress, ProgressObserver, SearchConfig,
    StopReason, Strategy, key_cmp, levels_cmp, score_cmp, tolerance,
};
use crate::check::{CheckResult, Checker};
use crate::lattice::{Lattice, Levels};
use crate::problem::{PrivacyMonotonicity, Problem};

/// Progress state shared with the ticker thread.
pub(super) struct Shared {
    pub(super) algorithm: Algorithm,
    pub(super) space_size: f64,
    pub(super) expansions: AtomicU64,
    pub(super) explored: AtomicU64,
    pub(super) phase: AtomicU8,
    pub(super) best_score: AtomicU64,
    pub(super) has_best: AtomicBool,
    pub(super) algo_progress: AtomicU64,
    pub(super) done: Mutex<bool>,
    pub(super) wake: Condvar,
}

/// Interval of progress snapshots.
pub(super) const TICK: Duration = Duration::from_millis(100);

impl Shared {
    pub(super) fn new(algorithm: Algorithm, space_size: f64) -> Shared {
        Shared {
            algorithm,
            space_size,
            expansions: AtomicU64::new(0),
            explored: AtomicU64::new(0),
            phase: AtomicU8::new(Phase::Starting as u8),
            best_score: AtomicU64::new(0),
            has_best: AtomicBool::new(false),
            algo_progress: AtomicU64::new(0f64.to_bits()),
            done: Mutex::new(false),
            wake: Condvar::new(),
        }
    }

    pub(super) fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u8, AtomicOrdering::Relaxed);
    }

    pub(super) fn finish(&self) {
        if let Ok(mut d) = self.done.lock() {
            *d = true;
        }
        self.wake.notify_all();
    }

    /// The ticker loop: a snapshot every [`TICK`] until [`Shared::finish`].
    pub(super) fn tick(
        &self,
        checker: &Checker<'_>,
        config: &SearchConfig,
        start: Instant,
        observer: &dyn ProgressObserver,
    ) {
        let Ok(mut done) = self.done.lock() else {
            return;
        };
        loop {
            if *done {
                return;
            }
            let (guard, _) = match self.wake.wait_timeout(done, TICK) {
                Ok(r) => r,
                Err(_) => return,
            };
            done = guard;
            if *done {
                return;
            }
            observer.progress(&self.snapshot(checker, config, start));
        }
    }

    pub(super) fn snapshot(
        &self,
        checker: &Checker<'_>,
        config: &SearchConfig,
        start: Instant,
    ) -> Progress {
        let checks = checker.checks();
        let elapsed = start.elapsed();
        let explored = if self.space_size > 0.0 {
            (self.explored.load(AtomicOrdering::Relaxed) as f64 / self.space_size).min(1.0)
        } else {
            0.0
        };
        let algo = f64::from_bits(self.algo_progress.load(AtomicOrdering::Relaxed));
        let by_time = elapsed.as_secs_f64() / config.time_limit.as_secs_f64();
        let by_checks = config.check_limit.map_or(0.0, |l| checks as f64 / l as f64);
        let progress = explored.max(algo).max(by_time).max(by_checks).min(1.0);
        let best_score = self
            .has_best
            .load(AtomicOrdering::Acquire)
            .then(|| f64::from_bits(self.best_score.load(AtomicOrdering::Relaxed)));
        Progress {
            algorithm: self.algorithm,
            phase: Phase::from_u8(self.phase.load(AtomicOrdering::Relaxed)),
            checks,
            expansions: self.expansions.load(AtomicOrdering::Relaxed),
            elapsed,
            space_size: self.space_size,
            explored,
            progress,
            best_score,
        }
    }
}

/// The search context every algorithm works through.
pub(crate) struct Ctx<'a, 'p> {
    /// The problem.
    pub problem: &'p Problem,
    pub(super) checker: &'a Checker<'p>,
    pub(super) config: &'a SearchConfig,
    pub(super) cancel: &'a CancelFlag,
    pub(super) observer: &'a dyn ProgressObserver,
    pub(super) shared: &'a Shared,
    pub(super) pool: Option<&'a rayon::ThreadPool>,
    pub(super) parallel: bool,
    pub(super) start: Instant,
    pub(super) best: Option<CheckResult>,
    pub(super) best_found_at: Option<Duration>,
    pub(super) trace: Vec<Improvement>,
    pub(super) stop: Option<StopReason>,
    pub(super) privacy: PrivacyMonotonicity,
    /// See [`utility_monotone`].
    pub utility_monotone: bool,
    pub(super) lower_bound_valid: bool,
    /// The strategy running now (labels improvements).
    pub(super) strategy: Strategy,
    /// The [`Ctx::work`] at which the current slice of the portfolio ends.
    pub(super) slice_end: Option<u64>,
    /// Fixed cost of one check in [`Ctx::work`] units, see [`check_overhead`].
    pub(super) check_overhead: u64,
    /// Work of the checks made so far: the classes of each result plus the check overhead, a
    /// deterministic measure of their cost (cached results cost nothing).
    pub(super) work: u64,
    /// Results of every check so far (portfolio: strategies share them), bounded by
    /// [`RESULT_CACHE_ENTRIES`].
    pub(super) cache: Option<HashMap<Levels, CheckResult>>,
    /// The best anonymous transformations offered so far ([`Ctx::offer`]).
    pub(super) candidates: Candidates,
}

/// Least fixed cost of one check in [`Ctx::work`] units (classes), besides its classes.
pub(crate) const CHECK_OVERHEAD: u64 = 64;

/// Fixed cost of one check in [`Ctx::work`] units, besides its classes: half the base groups
/// (at least [`CHECK_OVERHEAD`]). A check groups the entries of a cached finer result, and on
/// the way down the lattice (top-down) or at random points (genetic) that is mostly the base
/// groups, whatever the size of the result; measured on creditcard_int, a check of a few
/// hundred classes costs about 40 % of one of 30,000.
pub(crate) fn check_overhead(problem: &Problem) -> u64 {
    (problem.base_groups().len() as u64 / 2).max(CHECK_OVERHEAD)
}

/// Most results the portfolio's shared cache keeps (about 150 bytes each); later results are
/// not cached.
pub(crate) const RESULT_CACHE_ENTRIES: usize = 1 << 20;

impl<'a, 'p> Ctx<'a, 'p> {
    /// The configuration.
    pub fn config(&self) -> &SearchConfig {
        self.config
    }

    /// The solution space.
    pub fn lattice(&self) -> &'p Lattice {
        self.problem.lattice()
    }

    /// Monotonicity of the privacy models.
    pub fn privacy(&self) -> PrivacyMonotonicity {
        self.privacy
    }

    /// In `auto`'s portfolio, the best transformation found so far by any member (`None`
    /// outside the portfolio, so that single algorithms behave as documented).
    pub fn shared_best(&self) -> Option<Levels> {
        self.cache.as_ref()?;
        self.best.as_ref().map(|b| b.levels.clone())
    }

    /// In `auto`'s portfolio, the `m` best anonymous transformations checked so far by any
    /// member, best first (empty outside the portfolio). Taken from the shared result cache,
    /// not from `Ctx::candidates`: that list's length is a reporting option (0 with
    /// differential privacy), which must not change the search.
    pub(crate) fn best_seen(&self, m: usize) -> Vec<Levels> {
        let Some(cache) = self.cache.as_ref() else {
            return Vec::new();
        };
        let mut seen: Vec<&CheckResult> = cache.values().filter(|r| r.anonymous).collect();
        seen.sort_by(|a, b| super::exact_cmp(a.score, &a.levels, b.score, &b.levels));
        seen.into_iter().take(m).map(|r| r.levels.clone()).collect()
    }

    /// The score of the best solution so far (infinite before the first).
    pub(crate) fn best_score(&self) -> f64 {
        self.best.as_ref().map_or(f64::INFINITY, |b| b.score)
    }

    /// Sets the current phase.
    pub fn set_phase(&self, phase: Phase) {
        self.shared.set_phase(phase);
    }

    /// Adds to the expansion counter.
    pub fn add_expansions(&self, n: u64) {
        self.shared.expansions.fetch_add(n, AtomicOrdering::Relaxed);
    }

    /// Sets the number of transformations classified so far.
    pub fn set_explored(&self, n: u64) {
        self.shared.explored.store(n, AtomicOrdering::Relaxed);
    }

    /// Sets the algorithm's own progress estimate in [0, 1].
    pub fn set_algorithm_progress(&self, p: f64) {
        self.shared
            .algo_progress
            .store(p.clamp(0.0, 1.0).to_bits(), AtomicOrdering::Relaxed);
    }

    /// True if the search must stop (limit hit or cancelled; the reason is recorded) or the
    /// current slice of the portfolio is used up.
    pub fn should_stop(&mut self) -> bool {
        if self.stop.is_some() {
            return true;
        }
        if self.slice_end.is_some_and(|e| self.work >= e) {
            return true;
        }
        if self.cancel.is_cancelled() {
            self.stop = Some(StopReason::Cancelled);
        } else if self.out_of_time() {
            self.stop = Some(StopReason::TimeLimit);
        } else if self
            .config
            .check_limit
            .is_some_and(|l| self.checker.checks() >= l)
        {
            self.stop = Some(StopReason::CheckLimit);
        }
        self.stop.is_some()
    }

    /// Adds the work of a new check's result to [`Ctx::work`].
    pub(super) fn charge(&mut self, r: &CheckResult) {
        self.work += r.classes as u64 + self.check_overhead;
    }

    /// Runs `f` as a slice of the portfolio that ends once [`Ctx::work`] reaches `end` (`None`:
    /// only the limits stop it). A slice never cuts a batch of checks: it ends before the next.
    pub fn sliced<R>(&mut self, end: Option<u64>, f: impl FnOnce(&mut Self) -> R) -> R {
        self.slice_end = end;
        let r = f(self);
        self.slice_end = None;
        r
    }

    /// Thread-safe part of [`Ctx::should_stop`] used inside parallel batches.
    pub(super) fn interrupted(&self) -> bool {
        self.cancel.is_cancelled() || self.out_of_time()
    }

    /// True once the time left is less than the time kept for one more check and the
    /// evaluation of the result (see [`SearchConfig::time_limit`]).
    pub(super) fn out_of_time(&self) -> bool {
        let reserve = (self.checker.slowest_check() * 2).min(self.config.time_limit / 10);
        self.start.elapsed() + reserve > self.config.time_limit
    }

    /// Checks one transformation (`None` if the search must stop). A result already in the
    /// shared cache is returned without checking again.
    pub fn check(&mut self, levels: &[u8]) -> Option<CheckResult> {
        if self.should_stop() {
            return None;
        }
        if let Some(r) = self.cache.as_ref().and_then(|c| c.get(levels)) {
            let r = r.clone();
            self.offer(&r);
            return Some(r);
        }
        let r = self.checker.check(levels);
        self.charge(&r);
        self.offer(&r);
        self.remember(&r);
        Some(r)
    }

    pub(super) fn remember(&mut self, r: &CheckResult) {
        if let Some(c) = &mut self.cache
            && c.len() < RESULT_CACHE_ENTRIES
        {
            c.insert(r.levels.clone(), r.clone());
        }
    }

    /// Checks left before the check limit (`usize::MAX`: unlimited). A slice of the portfolio
    /// is not cut inside a batch: it ends before the next one.
    pub(super) fn check_budget(&self) -> usize {
        match self.config.check_limit {
            Some(l) => {
                usize::try_from(l.saturating_sub(self.checker.checks())).unwrap_or(usize::MAX)
            }
            None => usize::MAX,
        }
    }

    /// Checks `nodes` (in parallel if configured) and returns the results of those that were
    /// checked, in input order; offers each to the optimum in that order. Fewer results than
    /// nodes means the search must stop ([`Ctx::stopped`] is then true). The check limit cuts
    /// the batch deterministically (cached results cost nothing).
    pub fn check_all(&mut self, nodes: &[Levels]) -> Vec<CheckResult> {
        if self.cache.is_none() {
            return self.batch(nodes, |c, n| c.check(n), |r| r);
        }
        if nodes.is_empty() || self.should_stop() {
            return Vec::new();
        }
        let cache = self.cache.as_ref().expect("checked");
        let cached: Vec<Option<CheckResult>> =
            nodes.iter().map(|n| cache.get(n).cloned()).collect();
        let budget = self.check_budget();
        let mut cut = nodes.len();
        let mut misses = 0usize;
        for (i, c) in cached.iter().enumerate() {
            if c.is_none() {
                if misses == budget {
                    cut = i;
                    break;
                }
                misses += 1;
            }
        }
        let fresh_nodes: Vec<&Levels> = (0..cut)
            .filter(|&i| cached[i].is_none())
            .map(|i| &nodes[i])
            .collect();
        let mut fresh = self
            .run_parallel(&fresh_nodes, |c, n| c.check(n))
            .into_iter();
        let mut out = Vec::with_capacity(cut);
        for c in cached.into_iter().take(cut) {
            match c {
                Some(r) => out.push(r),
                None => match fresh.next().flatten() {
                    Some(r) => {
                        self.charge(&r);
                        out.push(r);
                    }
                    None => break,
                },
            }
        }
        for r in &out {
            self.offer(r);
            self.remember(r);
        }
        if out.len() < nodes.len() {
            self.should_stop();
        }
        out
    }

    /// Runs `f` on every node (in parallel if configured), `None` for nodes skipped because the
    /// time limit passed or the search was cancelled.
    pub(super) fn run_parallel<R: Send>(
        &self,
        nodes: &[&Levels],
        f: impl Fn(&Checker<'p>, &[u8]) -> R + Sync + Send,
    ) -> Vec<Option<R>> {
        let checker = self.checker;
        if !self.parallel || nodes.len() <= 1 {
            let mut out = Vec::with_capacity(nodes.len());
            for n in nodes {
                out.push((!self.interrupted()).then(|| f(checker, n)));
            }
            return out;
        }
        let run = || {
            nodes
                .par_iter()
                .map(|n| (!self.interrupted()).then(|| f(checker, n)))
                .collect::<Vec<Option<R>>>()
        };
        match self.pool {
            Some(p) => p.install(run),
            None => run(),
        }
    }

    /// Like [`Ctx::check_all`] but runs `f` (which must check exactly once, e.g. via
    /// `Checker::evaluate`) and extracts the verdict with `result`.
    pub fn batch<R: Send>(
        &mut self,
        nodes: &[Levels],
        f: impl Fn(&Checker<'p>, &[u8]) -> R + Sync + Send,
        result: impl Fn(&R) -> &CheckResult,
    ) -> Vec<R> {
        if nodes.is_empty() || self.should_stop() {
            return Vec::new();
        }
        let total = nodes.len();
        let take = total.min(self.check_budget());
        let nodes = &nodes[..take];
        let checker = self.checker;
        let out: Vec<R> = if !self.parallel || nodes.len() == 1 {
            let mut out = Vec::with_capacity(nodes.len());
            for n in nodes {
                if self.interrupted() {
                    break;
                }
                out.push(f(checker, n));
            }
            out
        } else {
            let this = &*self;
            let run = || {
                nodes
                    .par_iter()
                    .map(|n| (!this.interrupted()).then(|| f(checker, n)))
                    .collect::<Vec<Option<R>>>()
            };
            let raw = match self.pool {
                Some(p) => p.install(run),
                None => run(),
            };
            raw.into_iter().flatten().collect()
        };
        for r in &out {
            self.charge(result(r));
            self.offer(result(r));
        }
        if out.len() < total {
            self.should_stop();
        }
        out
    }

    /// True once a limit was hit or the search was cancelled (as last seen by
    /// [`Ctx::should_stop`]), or the portfolio's slice is used up.
    pub fn stopped(&self) -> bool {
        self.stop.is_some() || self.slice_end.is_some_and(|e| self.work >= e)
    }

    /// Makes `r` the optimum if it is anonymous and better than the current one.
    pub fn offer(&mut self, r: &CheckResult) {
        if !r.anonymous {
            return;
        }
        self.candidates.offer(r);
        if let Some(b) = &self.best
            && key_cmp(r.score, &r.levels, b.score, &b.levels) != Ordering::Less
        {
            return;
        }
        let found_at = self.start.elapsed();
        let imp = Improvement {
            levels: r.levels.clone(),
            score: r.score,
            utility: r.utility,
            suppressed: r.suppressed,
            found_at,
            checks: self.checker.checks(),
            strategy: self.strategy,
            step: None,
        };
        self.best = Some(r.clone());
        self.best_found_at = Some(found_at);
        self.shared
            .best_score
            .store(r.score.to_bits(), AtomicOrdering::Relaxed);
        self.shared.has_best.store(true, AtomicOrdering::Release);
        self.observer.improved(&imp);
        self.trace.push(imp);
    }

    /// Like [`Ctx::cannot_improve`] for a transformation that was not checked, using the
    /// data-independent (generalization-only) bound of the quality model. That bound is never
    /// below `CheckResult::lower_bound` and also bounds the up-set whenever
    /// [`lower_bound_valid`] holds (a suppressed record then costs at least as much as a fully
    /// generalized one).
    pub fn cannot_improve_unchecked(&self, levels: &[u8]) -> bool {
        if !self.lower_bound_valid || self.best.is_none() {
            return false;
        }
        self.cannot_improve(self.score_bound(levels, &[]), levels)
    }

    /// The data-independent bound of the score of `levels` without checking it — a lower
    /// bound only where the quality model's bounds are valid ([`lower_bound_valid`]).
    /// `excess`: the suppression excess of a checked generalization of `levels`
    /// ([`CheckResult::excess`]), which tightens it under [`Ctx::excess_bounds`]; empty
    /// otherwise.
    pub fn score_bound(&self, levels: &[u8], excess: &[f64]) -> f64 {
        let q = self.problem.prepared_quality();
        if self.excess_bounds() && !excess.is_empty() {
            q.bound_below(levels, excess)
        } else {
            q.lower_bound(levels)
        }
    }

    /// Whether the suppression excess of a checked transformation bounds the Loss of its
    /// specializations ([`Ctx::cannot_improve_below`]).
    pub fn excess_bounds(&self) -> bool {
        self.lower_bound_valid
            && self.problem.quality_config().model == crate::quality::QualityModel::Loss
            && self.problem.suppression_shrinks_upwards()
    }

    /// True if `levels` itself cannot beat the optimum when a generalization of it has the
    /// suppression excess `excess` ([`CheckResult::excess`]; only when
    /// [`Ctx::excess_bounds`]): each record suppressed there is suppressed at `levels` too, at
    /// a cost at least as high.
    pub fn cannot_improve_below(&self, levels: &[u8], excess: &[f64]) -> bool {
        if !self.excess_bounds() || self.best.is_none() {
            return false;
        }
        let lb = self.problem.prepared_quality().bound_below(levels, excess);
        self.cannot_improve(lb, levels)
    }

    /// True if no transformation in the up-set of `levels` (including itself) can beat the
    /// optimum, given a lower bound `lb` of their scores.
    pub fn cannot_improve(&self, lb: f64, levels: &[u8]) -> bool {
        if !self.lower_bound_valid {
            return false;
        }
        let Some(b) = &self.best else {
            return false;
        };
        // `lb` itself may exceed a generalization's score by rounding (see SCORE_TOLERANCE).
        let lb = lb - tolerance(lb, b.score);
        match score_cmp(lb, b.score) {
            Ordering::Greater => true,
            // Every generalization has a higher rank, so ties are lost if `levels` is not before
            // the optimum itself.
            Ordering::Equal => levels_cmp(levels, &b.levels) != Ordering::Less,
            Ordering::Less => false,
        }
    }
}
