//! The check: generalize → group into equivalence classes → evaluate the privacy models per class
//! → suppress violating classes → decide (suppressed ≤ ⌊limit·n⌋) → score.
//!
//! Work is reused between checks the way the Flash framework does it, generalized: every check
//! groups the *entries of the smallest cached result* `s ≤ t` (a snapshot; the base groups of the
//! problem are the snapshot of the bottom) instead of the rows. Because hierarchies are monotone,
//! every class of `s` falls into exactly one class of `t`. Columns whose level did not change are
//! copied from the snapshot (projection); only the others are looked up in the hierarchy.
//!
//! A [`Checker`] may be shared between threads: each check borrows a private workspace (hash
//! table, the thread's `last` result) from a pool, and all threads share one snapshot cache, so
//! that a check on one thread rolls up from the result its parent had on another (with a cache
//! per thread, two threads regrouped from coarser sources than one, and held the snapshots twice).
//! Results never depend on which snapshot was used.
//!
//! Memory is bounded on large data (`docs/scale.md` §3): a regrouping that grows beyond the
//! *large* size (millions of classes near the bottom of a lattice over millions of records) must
//! hold the checker's single large-regrouping permit, so at most one of them runs at a time and
//! the others wait at that size; the buffers of a large check are released after it, and results
//! too large for the snapshot cache are kept as a thread's `last` result only within one budget
//! shared by all threads. None of this changes a result, only when it is computed.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::hash::{hash_codes, mix};
use crate::hierarchy::{CodeMap, EncodedHierarchy};
use crate::lattice::{Lattice, Levels};
use crate::privacy;
use crate::problem::{Groups, Histograms, Problem};
use crate::quality::{ClassView, Quality, QualityModel};

/// Verdict and score of one transformation.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckResult {
    /// The transformation.
    pub levels: Levels,
    /// All privacy models hold after suppressing at most ⌊limit·n⌋ records.
    pub anonymous: bool,
    /// The minimal class size (k) alone holds within the suppression limit.
    pub min_class_size_ok: bool,
    /// Records in suppressed classes.
    pub suppressed: usize,
    /// Number of equivalence classes (including suppressed ones).
    pub classes: usize,
    /// Score of the configured quality model (lower = better); measured for non-solutions too.
    pub score: f64,
    /// Lower bound of the score for this transformation and all its generalizations.
    pub lower_bound: f64,
    /// Utility in [0, 1] (1 = data unchanged).
    pub utility: f64,
    /// Loss only: the suppression excess per quasi-identifier ([`Quality::excess`]), a bound
    /// for the specializations when
    /// [`Problem::suppression_shrinks_upwards`](crate::Problem::suppression_shrinks_upwards).
    pub excess: Vec<f64>,
}

/// Everything about one transformation: the verdict plus the classes themselves, for output and
/// reports.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// Verdict and score.
    pub result: CheckResult,
    /// Full quality of the configured model, with per-attribute values.
    pub quality: Quality,
    /// The classes, in order of first appearance in the data.
    pub groups: Groups,
    /// Whether each class is suppressed.
    pub suppressed: Vec<bool>,
    /// Class of every base group of the problem.
    pub class_of_base: Vec<u32>,
}

impl Evaluation {
    /// What the quality models see of the evaluated classes.
    fn class_view(&self) -> ClassView<'_> {
        ClassView {
            levels: &self.result.levels,
            codes: &self.groups.codes,
            counts: &self.groups.counts,
            suppressed: &self.suppressed,
        }
    }
}

/// Every model's quality of one evaluated transformation, in [`QualityModel::ALL`] order (for
/// reports). Uses the problem's gs-factor and aggregate. When a quasi-identifier is given at a
/// `data_level` above 0, the models that need the original values
/// ([`QualityModel::needs_original_values`]) are left out.
pub fn evaluate_all(problem: &Problem, evaluation: &Evaluation) -> Vec<(QualityModel, Quality)> {
    let floor = (problem.config().quasi_identifiers.iter()).any(|q| q.data_level > 0);
    let mut all = problem
        .prepared_quality()
        .evaluate_all(&evaluation.class_view());
    if floor {
        all.retain(|(m, _)| !m.needs_original_values());
    }
    all
}

/// Decides and scores transformations of one problem. Thread-safe.
#[derive(Debug)]
pub struct Checker<'p> {
    problem: &'p Problem,
    /// One workspace per rayon worker index (slot 0: callers outside rayon), so that each thread
    /// keeps reusing its own buffers.
    workspaces: Vec<Mutex<Workspace>>,
    /// The snapshots of all threads.
    snapshots: Mutex<SnapshotCache>,
    checks: AtomicU64,
    /// Source entries regrouped by all checks and evaluations.
    regrouped: AtomicU64,
    /// The longest check so far, in nanoseconds (searches keep time for one more check and the
    /// evaluation of their result before their time limit).
    slowest_nanos: AtomicU64,
    snapshot_budget_words: usize,
    /// Words held by all workspaces' `last` results (at most [`LAST_BUDGETS`] snapshot budgets).
    last_words: AtomicUsize,
    /// Admission of large regroupings.
    gate: LargeGate,
}

/// Largest result (in 4-byte words: codes, count and representative per class) whose vectors
/// are reserved for the most classes possible before a regrouping (4 MiB).
const PRESIZE_WORDS: usize = 1 << 20;

/// How many snapshot budgets the `last` results of all threads may hold together.
const LAST_BUDGETS: usize = 4;

/// Default size beyond which a regrouping is large: 8 Mi words (32 MiB) of classes and keys.
const DEFAULT_LARGE_WORDS: usize = 8 << 20;

/// At most one regrouping at a time may grow beyond `classes` classes; the others wait for it
/// when they reach that size. The holder never waits for anything else, so this cannot deadlock.
#[derive(Debug)]
struct LargeGate {
    /// Classes at which a regrouping needs the permit (`usize::MAX`: never).
    classes: usize,
    busy: Mutex<bool>,
    released: Condvar,
    /// Regroupings holding the permit now, and the most ever seen at once (tests).
    active: AtomicUsize,
    max_active: AtomicUsize,
    /// Regroupings that needed the permit.
    admitted: AtomicU64,
}

/// The large-regrouping permit; released on drop (also when a check panics).
#[derive(Debug)]
struct LargePermit<'a>(&'a LargeGate);

impl LargeGate {
    fn new(classes: usize) -> Self {
        LargeGate {
            classes,
            busy: Mutex::new(false),
            released: Condvar::new(),
            active: AtomicUsize::new(0),
            max_active: AtomicUsize::new(0),
            admitted: AtomicU64::new(0),
        }
    }

    /// Waits until no other regrouping holds the permit, then takes it.
    fn acquire(&self) -> LargePermit<'_> {
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        while *busy {
            busy = self.released.wait(busy).unwrap_or_else(|e| e.into_inner());
        }
        *busy = true;
        drop(busy);
        let now = self.active.fetch_add(1, Ordering::Relaxed) + 1;
        self.max_active.fetch_max(now, Ordering::Relaxed);
        self.admitted.fetch_add(1, Ordering::Relaxed);
        LargePermit(self)
    }
}

impl Drop for LargePermit<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
        *self.0.busy.lock().unwrap_or_else(|e| e.into_inner()) = false;
        self.0.released.notify_one();
    }
}

#[derive(Debug, Default)]
struct Snapshot {
    levels: Levels,
    groups: Groups,
}

/// The cached results every check may regroup from, least recently used evicted first.
#[derive(Debug, Default)]
struct SnapshotCache {
    /// Each snapshot with the time it was last stored or picked.
    entries: Vec<(Arc<Snapshot>, u64)>,
    /// Words held by the entries.
    words: usize,
    clock: u64,
}

#[derive(Debug, Default)]
struct Workspace {
    /// The previous result when it was too large to cache: still a cheap roll-up source for a
    /// direct generalization.
    last: Option<Snapshot>,
    /// Open-addressing table of classes (`EMPTY` = free); 4 bytes per slot.
    slots: Vec<u32>,
    /// Packed key (or hash) of every class of the regrouping in progress.
    class_keys: Vec<u64>,
    strides: Vec<u64>,
    class_of_src: Vec<u32>,
    /// The generalized codes of the block of source entries being regrouped.
    key: Vec<u32>,
    /// The vectors of a released result, reused by the next regrouping.
    spare: Groups,
    acc: Vec<u32>,
    touched: Vec<u32>,
    order: Vec<u32>,
    starts: Vec<u32>,
}

const EMPTY: u32 = u32::MAX;

impl Workspace {
    /// Empties the class table for a regrouping of `entries` mapped source entries (0 when the
    /// class of each is not wanted) with `q` columns into at most `bound` classes (load factor
    /// ≤ 2/3); returns the hash shift and the slot mask of the table.
    fn reset_table(&mut self, bound: usize, entries: usize, q: usize) -> (u32, usize) {
        let cap = (bound + bound / 2).next_power_of_two().max(16);
        let shift = 64 - cap.trailing_zeros();
        self.slots.clear();
        self.slots.resize(cap, EMPTY);
        self.class_keys.clear();
        self.class_keys.reserve(presize(bound, q));
        self.class_of_src.clear();
        self.class_of_src.reserve(entries);
        (shift, cap - 1)
    }

    /// Empty groups for at most `bound` classes with `q` columns, in the vectors of an earlier
    /// result when one was released (no allocation and no page faults for most checks).
    fn recycled_groups(&mut self, bound: usize, q: usize) -> Groups {
        let guess = presize(bound, q);
        let mut g = std::mem::take(&mut self.spare);
        g.codes.clear();
        g.counts.clear();
        g.reps.clear();
        g.codes.reserve(guess * q);
        g.counts.reserve(guess);
        g.reps.reserve(guess);
        Groups {
            codes: g.codes,
            counts: g.counts,
            reps: g.reps,
            pcounts: Vec::new(),
            hists: Vec::new(),
        }
    }

    /// Keeps the vectors of a released result for the next regrouping (the larger of it and
    /// the one kept), unless they outgrew `limit` words.
    fn recycle(&mut self, groups: Groups, limit: usize) {
        let words = |g: &Groups| g.codes.capacity() + g.counts.capacity() + g.reps.capacity();
        if words(&groups) <= limit && words(&groups) > words(&self.spare) {
            self.spare = groups;
        }
    }
}

/// Fills `strides` with the radices of packed keys (mixed radix over the distinct values of
/// each column at `levels`); returns the number of possible keys, `None` when they do not fit
/// in 64 bits (the strides are then not used).
fn key_strides(strides: &mut Vec<u64>, hs: &[EncodedHierarchy], levels: &[u8]) -> Option<u64> {
    strides.clear();
    let mut product: Option<u64> = Some(1);
    for i in (0..levels.len()).rev() {
        strides.push(product.unwrap_or(0));
        product = product.and_then(|p| p.checked_mul(hs[i].distinct(levels[i] as usize) as u64));
    }
    strides.reverse();
    product
}

/// How many classes of at most `bound` to reserve room for, with `q` columns: every one when
/// that is small (the vectors then never grow: growing copies them, about a sixth of a check of
/// tens of thousands of classes); else a small start, so that a check of few classes over
/// millions of entries does not reserve for millions.
fn presize(bound: usize, q: usize) -> usize {
    if bound.saturating_mul(q + 2) <= PRESIZE_WORDS {
        bound
    } else {
        bound.min(1 << 12)
    }
}

/// One regrouping in progress: the source entries, the per-column code tables, and the
/// workspace's class table.
struct Regrouping<'a, 'g> {
    src: &'a Groups,
    tables: &'a [CodeMap<'a>],
    /// Radices of the packed keys (used only when they pack).
    strides: &'a [u64],
    /// Open-addressing table of class numbers.
    slots: &'a mut Vec<u32>,
    /// Packed key (or hash) of every class.
    class_keys: &'a mut Vec<u64>,
    /// The class of every source entry, when wanted.
    class_of_src: Option<&'a mut Vec<u32>>,
    shift: u32,
    mask: usize,
    gate: &'g LargeGate,
    permit: &'a mut Option<LargePermit<'g>>,
}

impl Regrouping<'_, '_> {
    /// Groups every source entry into `out` (empty). With `PACKED` the key of a class is its
    /// codes packed with the strides (exact: the table compares keys only); otherwise a hash of
    /// the codes, confirmed by comparing them.
    ///
    /// Entries go in blocks of [`BLOCK`]: their codes and keys first, then one read of each
    /// one's home slot (independent reads: the memory fetches them at once instead of one
    /// after the other), then the probes, which find the slots in the cache.
    fn run<const PACKED: bool>(&mut self, out: &mut Groups, buf: &mut Vec<u32>) {
        let src = self.src;
        let q = self.tables.len();
        buf.clear();
        buf.resize(BLOCK * q, 0);
        let mut stored = [0u64; BLOCK];
        let (shift, mask) = (self.shift, self.mask);
        let large = self.gate.classes;
        let slots = &mut self.slots[..];
        let mut first = 0;
        while first < src.len() {
            let n = BLOCK.min(src.len() - first);
            let entries = &src.codes[first * q..(first + n) * q];
            for ((codes, key), k) in entries
                .chunks_exact(q.max(1))
                .zip(buf.chunks_exact_mut(q.max(1)))
                .zip(&mut stored)
            {
                let mut packed_key = 0u64;
                // Zipped slices: no bounds checks in the hot loop.
                for (((k, &c), t), &stride) in
                    key.iter_mut().zip(codes).zip(self.tables).zip(self.strides)
                {
                    let c = t.get(c);
                    *k = c;
                    if PACKED {
                        packed_key = packed_key.wrapping_add(u64::from(c) * stride);
                    }
                }
                *k = if PACKED { packed_key } else { hash_codes(key) };
            }
            let mut touched = 0u32;
            for &k in &stored[..n] {
                touched ^= slots[(mix_for::<PACKED>(k) >> shift) as usize & mask];
            }
            std::hint::black_box(touched);
            for (j, &key_stored) in stored[..n].iter().enumerate() {
                let e = first + j;
                let key = &buf[j * q..j * q + q];
                let mut slot = (mix_for::<PACKED>(key_stored) >> shift) as usize & mask;
                let class = loop {
                    let c = slots[slot];
                    if c == EMPTY {
                        let c = out.counts.len() as u32;
                        if c as usize == large && self.permit.is_none() {
                            *self.permit = Some(self.gate.acquire());
                        }
                        slots[slot] = c;
                        self.class_keys.push(key_stored);
                        // Element by element: `extend_from_slice` calls `memmove` for a few bytes.
                        out.codes.extend(key.iter().copied());
                        out.counts.push(src.counts[e]);
                        out.reps.push(src.reps[e]);
                        break c;
                    }
                    let ci = c as usize;
                    if self.class_keys[ci] == key_stored
                        && (PACKED || out.codes[ci * q..ci * q + q] == key[..])
                    {
                        out.counts[ci] += src.counts[e];
                        break c;
                    }
                    slot = (slot + 1) & mask;
                };
                if let Some(map) = self.class_of_src.as_deref_mut() {
                    map.push(class);
                }
            }
            first += n;
        }
    }
}

/// Source entries per block of a regrouping.
const BLOCK: usize = 16;

/// The slot hash of a stored key: packed keys are mixed, hashes are used as they are.
#[inline]
fn mix_for<const PACKED: bool>(stored: u64) -> u64 {
    if PACKED { mix(stored) } else { stored }
}

/// Where a check regroups from.
#[derive(Debug)]
enum Source {
    /// A snapshot of the shared cache.
    Cached(Arc<Snapshot>),
    /// `ws.last`.
    Last,
}

impl<'p> Checker<'p> {
    /// A checker with a snapshot cache of 8 Mi words (32 MiB) shared by its threads; regroupings
    /// beyond 8 Mi words of classes are large (one at a time).
    pub fn new(problem: &'p Problem) -> Self {
        Self::with_snapshot_budget(problem, 8 << 20)
    }

    /// A checker whose snapshot cache (shared by its threads) holds at most `words` 4-byte words
    /// (0 disables snapshots: every check groups the base groups).
    pub fn with_snapshot_budget(problem: &'p Problem, words: usize) -> Self {
        Self::with_budgets(problem, words, DEFAULT_LARGE_WORDS)
    }

    /// A checker with a snapshot cache of `snapshot_words` 4-byte words (shared) whose
    /// regroupings are *large* beyond `large_words` words of classes (codes, count,
    /// representative and key of each class): at most one large regrouping runs at a time, and
    /// a check's buffers larger than that are released after it. `usize::MAX` never limits.
    /// Results do not depend on either budget.
    pub fn with_budgets(problem: &'p Problem, snapshot_words: usize, large_words: usize) -> Self {
        let threads = rayon::current_num_threads().max(2) + 1;
        let per_class = problem.lattice().dimensions() + 4;
        Checker {
            problem,
            workspaces: (0..threads.max(9)).map(|_| Mutex::default()).collect(),
            snapshots: Mutex::default(),
            checks: AtomicU64::new(0),
            regrouped: AtomicU64::new(0),
            slowest_nanos: AtomicU64::new(0),
            snapshot_budget_words: snapshot_words,
            last_words: AtomicUsize::new(0),
            gate: LargeGate::new(if large_words == usize::MAX {
                usize::MAX
            } else {
                (large_words / per_class).max(1)
            }),
        }
    }

    /// Number of regroupings so far that grew large and had to hold the large-regrouping permit.
    pub fn large_regroupings(&self) -> u64 {
        self.gate.admitted.load(Ordering::Relaxed)
    }

    /// The most large regroupings that ever ran at once (at most 1).
    pub fn max_concurrent_large_regroupings(&self) -> usize {
        self.gate.max_active.load(Ordering::Relaxed)
    }

    /// The problem.
    pub fn problem(&self) -> &'p Problem {
        self.problem
    }

    /// Number of checks performed so far.
    pub fn checks(&self) -> u64 {
        self.checks.load(Ordering::Relaxed)
    }

    /// Source entries (base groups or classes of a snapshot) regrouped by all checks so far: the
    /// work of the checks.
    pub fn regrouped_entries(&self) -> u64 {
        self.regrouped.load(Ordering::Relaxed)
    }

    /// The longest [`Checker::check`] or [`Checker::evaluate`] so far.
    pub fn slowest_check(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.slowest_nanos.load(Ordering::Relaxed))
    }

    fn record_duration(&self, started: std::time::Instant) {
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.slowest_nanos.fetch_max(nanos, Ordering::Relaxed);
    }

    /// Checks one transformation. `levels` must lie in the problem's lattice.
    pub fn check(&self, levels: &[u8]) -> CheckResult {
        debug_assert!(self.problem.lattice().contains(levels));
        self.checks.fetch_add(1, Ordering::Relaxed);
        let started = std::time::Instant::now();
        let result = self.check_in_workspace(levels);
        self.record_duration(started);
        result
    }

    fn check_in_workspace(&self, levels: &[u8]) -> CheckResult {
        self.with_workspace(|ws| {
            // Held (if the regrouping grows large) until the result is judged and stored.
            let mut permit = None;
            let groups = match self.pick_snapshot(ws, levels) {
                Some(Source::Cached(snap)) => self.group_from(
                    ws,
                    &snap.groups,
                    Some(&snap.levels),
                    levels,
                    false,
                    &mut permit,
                ),
                Some(Source::Last) => {
                    let snap = ws.last.take().expect("picked");
                    let out = self.group_from(
                        ws,
                        &snap.groups,
                        Some(&snap.levels),
                        levels,
                        false,
                        &mut permit,
                    );
                    ws.last = Some(snap);
                    out
                }
                None => {
                    let base = self.problem.base_groups();
                    self.group_from(ws, base, None, levels, false, &mut permit)
                }
            };
            let (result, _, _) = self.judge(levels, &groups);
            self.store_snapshot(ws, levels, groups);
            self.trim(ws);
            drop(permit);
            result
        })
    }

    /// Releases the workspace's per-check buffers that outgrew the large size (they were sized
    /// for millions of classes; kept per thread they would multiply the memory of the check).
    fn trim(&self, ws: &mut Workspace) {
        let limit = self.gate.classes.saturating_mul(2);
        if ws.slots.capacity() > limit {
            ws.slots = Vec::new();
        }
        if ws.class_keys.capacity() > self.gate.classes {
            ws.class_keys = Vec::new();
        }
        for v in [&mut ws.class_of_src, &mut ws.order, &mut ws.starts] {
            if v.capacity() > limit {
                *v = Vec::new();
            }
        }
    }

    /// Checks a transformation and returns the classes too (for output and reports). Always
    /// groups the base groups, so class order is the order of first appearance in the data.
    pub fn evaluate(&self, levels: &[u8]) -> Evaluation {
        self.checks.fetch_add(1, Ordering::Relaxed);
        let started = std::time::Instant::now();
        let mut permit = None;
        let (groups, class_of_base) = self.with_workspace(|ws| {
            let mut groups = self.group_from(
                ws,
                self.problem.base_groups(),
                None,
                levels,
                true,
                &mut permit,
            );
            // Kept for the output: only its classes (a check's result is shrunk when stored).
            groups.shrink_to_fit();
            let class_of_base = if ws.class_of_src.capacity() > self.gate.classes.saturating_mul(2)
            {
                std::mem::take(&mut ws.class_of_src)
            } else {
                ws.class_of_src.clone()
            };
            self.trim(ws);
            (groups, class_of_base)
        });
        let (result, quality, suppressed) = self.judge(levels, &groups);
        drop(permit);
        self.record_duration(started);
        Evaluation {
            result,
            quality,
            groups,
            suppressed,
            class_of_base,
        }
    }

    /// Suppresses violating classes, scores the result and decides.
    fn judge(&self, levels: &[u8], groups: &Groups) -> (CheckResult, Quality, Vec<bool>) {
        let (suppressed, suppressed_records, rejected) = self.suppress(levels, groups);
        let view = ClassView {
            levels,
            codes: &groups.codes,
            counts: &groups.counts,
            suppressed: &suppressed,
        };
        let quality = self.problem.prepared_quality().evaluate(&view);
        let mut result = self.verdict(levels, groups, &suppressed, suppressed_records, &quality);
        result.anonymous &= !rejected;
        (result, quality, suppressed)
    }

    fn verdict(
        &self,
        levels: &[u8],
        groups: &Groups,
        suppressed: &[bool],
        suppressed_records: usize,
        quality: &Quality,
    ) -> CheckResult {
        let p = self.problem;
        let k = p.min_class_size();
        let small: usize = groups
            .counts
            .iter()
            .filter(|&&c| c < k)
            .map(|&c| c as usize)
            .sum();
        debug_assert_eq!(suppressed.len(), groups.len());
        CheckResult {
            levels: levels.to_vec(),
            anonymous: suppressed_records <= p.max_suppressed(),
            min_class_size_ok: small <= p.max_suppressed(),
            suppressed: suppressed_records,
            // With a research subset, classes of unreleased records only are not classes of the
            // output.
            classes: if groups.pcounts.is_empty() {
                groups.len()
            } else {
                groups.counts.iter().filter(|&&c| c > 0).count()
            },
            score: quality.score,
            lower_bound: quality.lower_bound,
            utility: quality.utility,
            excess: quality.excess.clone(),
        }
    }

    /// Flags classes that violate a class-based model, then suppresses further classes until the
    /// sample-based models hold (smallest first; among equal sizes the cheapest to suppress under
    /// the quality model, then by codes); returns the flags, the suppressed records and whether
    /// the transformation fails whatever is suppressed.
    ///
    /// With a research subset, a class without released records (count 0) is flagged without
    /// suppressing anything (it is not part of the output); if it fails δ-presence (δ = 0 <
    /// δmin) the transformation fails (`docs/definitions.md` §3.2).
    fn suppress(&self, levels: &[u8], groups: &Groups) -> (Vec<bool>, usize, bool) {
        let p = self.problem;
        let k = p.min_class_size();
        let models = &p.class_models;
        let presence = &p.presence_models;
        let mut hists: Vec<(&[u32], &[u32])> = Vec::with_capacity(groups.hists.len());
        let mut suppressed = vec![false; groups.len()];
        let mut records = 0usize;
        let mut rejected = false;
        let subset = !groups.pcounts.is_empty();
        for (c, (flag, &count)) in suppressed.iter_mut().zip(&groups.counts).enumerate() {
            if subset && count == 0 {
                *flag = true;
                rejected |= presence.iter().any(|m| m.rejects_unreleased());
                continue;
            }
            let mut bad = count < k;
            if !bad && subset {
                bad = presence.iter().any(|m| !m.holds(count, groups.pcounts[c]));
            }
            if !bad && !models.is_empty() {
                hists.clear();
                hists.extend(groups.hists.iter().map(|h| h.get(c)));
                bad = models.iter().any(|m| !m.holds(count, &hists));
            }
            if bad {
                *flag = true;
                records += count as usize;
            }
        }
        if !p.sample_models.is_empty() {
            let q = levels.len();
            let quality = p.prepared_quality();
            let cost = |c: usize| {
                quality.suppression_cost(levels, &groups.codes[c * q..c * q + q], groups.counts[c])
            };
            records += privacy::risk::enforce(
                &p.sample_models,
                &groups.counts,
                &groups.codes,
                &mut suppressed,
                &cost,
            );
        }
        (suppressed, records, rejected)
    }

    /// Runs `f` with the calling thread's workspace (a fresh one if it is busy, e.g. when two
    /// pools share a worker index).
    fn with_workspace<R>(&self, f: impl FnOnce(&mut Workspace) -> R) -> R {
        let idx = rayon::current_thread_index().map_or(0, |i| i + 1) % self.workspaces.len();
        match self.workspaces[idx].try_lock() {
            Ok(mut ws) => f(&mut ws),
            Err(_) => {
                let mut ws = Workspace::default();
                let out = f(&mut ws);
                if let Some(last) = ws.last {
                    self.last_words
                        .fetch_sub(last.groups.words(), Ordering::Relaxed);
                }
                out
            }
        }
    }

    /// The cache, also after a panic of another check (the cache is consistent between
    /// statements).
    fn cache(&self) -> std::sync::MutexGuard<'_, SnapshotCache> {
        self.snapshots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The smallest earlier result that `levels` generalizes, if any.
    fn pick_snapshot(&self, ws: &Workspace, levels: &[u8]) -> Option<Source> {
        let mut smallest = usize::MAX;
        let mut last = false;
        if let Some(l) = &ws.last
            && Lattice::le(&l.levels, levels)
        {
            smallest = l.groups.len();
            last = true;
        }
        let mut cache = self.cache();
        cache.clock += 1;
        let clock = cache.clock;
        let mut picked = None;
        for (i, (s, _)) in cache.entries.iter().enumerate() {
            if s.groups.len() < smallest && Lattice::le(&s.levels, levels) {
                smallest = s.groups.len();
                picked = Some(i);
            }
        }
        match picked {
            Some(i) => {
                cache.entries[i].1 = clock;
                Some(Source::Cached(Arc::clone(&cache.entries[i].0)))
            }
            None => last.then_some(Source::Last),
        }
    }

    /// Regroups `src` (the classes of transformation `src_levels`; `None` = the base groups,
    /// whose codes are level-0 codes) into the classes of `levels`. With `map_sources` (or
    /// when the problem tracks more than counts) leaves the class of every source entry in
    /// `ws.class_of_src`. Takes the large-regrouping permit into `permit` (waiting for it) when
    /// the classes reach the large size.
    fn group_from<'g>(
        &'g self,
        ws: &mut Workspace,
        src: &Groups,
        src_levels: Option<&[u8]>,
        levels: &[u8],
        map_sources: bool,
        permit: &mut Option<LargePermit<'g>>,
    ) -> Groups {
        let q = levels.len();
        let hs = self.problem.hierarchies();
        // Per column: the table from the source level to the target level.
        let tables: Vec<CodeMap<'_>> = (0..q)
            .map(|i| hs[i].generalize(src_levels.map_or(0, |s| s[i]) as usize, levels[i] as usize))
            .collect();
        let product = key_strides(&mut ws.strides, hs, levels);

        let entries = src.len();
        self.regrouped.fetch_add(entries as u64, Ordering::Relaxed);
        // At most min(entries, product of distinct values) classes; load factor ≤ 2/3.
        let bound = product.map_or(entries, |p| entries.min(p.min(usize::MAX as u64) as usize));
        let map_sources = map_sources || !src.pcounts.is_empty() || !src.hists.is_empty();
        let (shift, mask) = ws.reset_table(bound, if map_sources { entries } else { 0 }, q);
        let mut out = ws.recycled_groups(bound, q);
        let mut run = Regrouping {
            src,
            tables: &tables,
            strides: &ws.strides,
            slots: &mut ws.slots,
            class_keys: &mut ws.class_keys,
            class_of_src: map_sources.then_some(&mut ws.class_of_src),
            shift,
            mask,
            gate: &self.gate,
            permit,
        };
        if product.is_some() {
            run.run::<true>(&mut out, &mut ws.key);
        } else {
            run.run::<false>(&mut out, &mut ws.key);
        }
        if permit.is_some() {
            // The table and the keys are not needed any more: free them before the result is
            // judged (millions of classes).
            ws.slots = Vec::new();
            ws.class_keys = Vec::new();
        }
        self.merge_extras(ws, src, &mut out);
        out
    }

    /// Completes the classes `out` regrouped from `src` (`ws.class_of_src` maps each source
    /// entry to its class) with what the problem tracks besides counts: the records of the
    /// whole table per class (research subset) and the sensitive histograms.
    fn merge_extras(&self, ws: &mut Workspace, src: &Groups, out: &mut Groups) {
        if !src.pcounts.is_empty() {
            // Research subset: the records of the whole table per class.
            out.pcounts = vec![0; out.len()];
            for (&class, &p) in ws.class_of_src.iter().zip(&src.pcounts) {
                out.pcounts[class as usize] += p;
            }
        }
        if !src.hists.is_empty() {
            out.hists = self.merge_hists(ws, src, out.len());
        }
    }

    /// Merges the source entries' histograms into the new classes (counting sort by class).
    fn merge_hists(&self, ws: &mut Workspace, src: &Groups, classes: usize) -> Vec<Histograms> {
        // Order source entries by class.
        ws.starts.clear();
        ws.starts.resize(classes + 1, 0);
        for &c in &ws.class_of_src {
            ws.starts[c as usize + 1] += 1;
        }
        for c in 0..classes {
            ws.starts[c + 1] += ws.starts[c];
        }
        ws.order.clear();
        ws.order.resize(ws.class_of_src.len(), 0);
        let mut fill = ws.starts.clone();
        for (e, &c) in ws.class_of_src.iter().enumerate() {
            ws.order[fill[c as usize] as usize] = e as u32;
            fill[c as usize] += 1;
        }
        let mut result = Vec::with_capacity(src.hists.len());
        for (slot, sh) in src.hists.iter().enumerate() {
            let domain = self.problem.sensitive_domains()[slot].global_counts.len();
            ws.acc.clear();
            ws.acc.resize(domain, 0);
            let mut h = Histograms {
                offsets: Vec::with_capacity(classes + 1),
                values: Vec::new(),
                freqs: Vec::new(),
            };
            h.offsets.push(0);
            for c in 0..classes {
                let (a, b) = (ws.starts[c] as usize, ws.starts[c + 1] as usize);
                if b - a == 1 {
                    let (v, f) = sh.get(ws.order[a] as usize);
                    h.values.extend_from_slice(v);
                    h.freqs.extend_from_slice(f);
                } else {
                    ws.touched.clear();
                    for &e in &ws.order[a..b] {
                        let (v, f) = sh.get(e as usize);
                        for (&v, &f) in v.iter().zip(f) {
                            if ws.acc[v as usize] == 0 {
                                ws.touched.push(v);
                            }
                            ws.acc[v as usize] += f;
                        }
                    }
                    ws.touched.sort_unstable();
                    for &v in &ws.touched {
                        h.values.push(v);
                        h.freqs.push(ws.acc[v as usize]);
                        ws.acc[v as usize] = 0;
                    }
                }
                h.offsets.push(h.values.len() as u32);
            }
            result.push(h);
        }
        result
    }

    /// Keeps `groups` as a snapshot if it is small enough to be worth regrouping from; a
    /// result too large for the cache stays as the thread's `last` one if it fits, with the
    /// other threads' `last` results, in [`LAST_BUDGETS`] budgets (millions of classes near the
    /// bottom of a large dataset: kept per thread, those would multiply the memory of the check).
    fn store_snapshot(&self, ws: &mut Workspace, levels: &[u8], mut groups: Groups) {
        let words = groups.words();
        let mut cache = self.cache();
        if self.snapshot_budget_words == 0
            || groups.len() * 5 > self.problem.base_groups().len() * 4
            || words > self.snapshot_budget_words
            || cache.entries.iter().any(|(s, _)| s.levels == levels)
        {
            drop(cache);
            let spare_limit = self.gate.classes.saturating_mul(levels.len() + 2);
            if let Some(old) = ws.last.take() {
                self.last_words
                    .fetch_sub(old.groups.words(), Ordering::Relaxed);
                ws.recycle(old.groups, spare_limit);
            }
            let limit = self.snapshot_budget_words.saturating_mul(LAST_BUDGETS);
            let total = self.last_words.fetch_add(words, Ordering::Relaxed) + words;
            if words <= limit && total <= limit {
                // The vectors were sized for the worst case: a kept result holds little more
                // than its classes (it is recycled when the next one replaces it).
                if groups.codes.capacity() + groups.counts.capacity() * 2 > words + PRESIZE_WORDS {
                    groups.shrink_to_fit();
                }
                ws.last = Some(Snapshot {
                    levels: levels.to_vec(),
                    groups,
                });
            } else {
                self.last_words.fetch_sub(words, Ordering::Relaxed);
                ws.recycle(groups, spare_limit);
            }
            return;
        }
        groups.shrink_to_fit();
        while cache.words + words > self.snapshot_budget_words {
            // Evict the least recently used snapshot.
            let Some(i) = (cache.entries.iter().enumerate())
                .min_by_key(|(_, (_, used))| *used)
                .map(|(i, _)| i)
            else {
                break;
            };
            let (s, _) = cache.entries.swap_remove(i);
            cache.words -= s.groups.words();
        }
        cache.clock += 1;
        cache.words += words;
        let clock = cache.clock;
        let snapshot = Snapshot {
            levels: levels.to_vec(),
            groups,
        };
        cache.entries.push((Arc::new(snapshot), clock));
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use rayon::prelude::*;

    use super::*;
    use crate::config::ProblemConfig;
    use crate::dataset::ArxDataset;
    use crate::privacy::PrivacyModel;

    fn adult() -> Problem {
        let ds = ArxDataset::load(Path::new("../../examples/adult"), "adult").unwrap();
        let cfg = ProblemConfig {
            quasi_identifiers: ds.quasi_identifiers,
            privacy: vec![PrivacyModel::KAnonymity { k: 5 }],
            suppression_limit: 0.05,
            ..ProblemConfig::default()
        };
        Problem::new(ds.table, cfg).unwrap()
    }

    /// Words held by the `last` results of all workspaces.
    fn last_words(c: &Checker<'_>) -> usize {
        c.workspaces
            .iter()
            .map(|w| {
                w.lock()
                    .unwrap()
                    .last
                    .as_ref()
                    .map_or(0, |l| l.groups.words())
            })
            .sum()
    }

    /// The classes of `src` (at `src_levels`) regrouped at `levels` by a plain ordered map:
    /// codes, counts and representatives in order of first appearance, and the class of every
    /// source entry. Shares nothing with the checker but the hierarchies' code tables.
    fn naive_regrouping(
        p: &Problem,
        src: &Groups,
        src_levels: &[u8],
        levels: &[u8],
    ) -> (Vec<u32>, Vec<u32>, Vec<u32>, Vec<u32>) {
        let q = levels.len();
        let hs = p.hierarchies();
        let mut index = std::collections::BTreeMap::<Vec<u32>, u32>::new();
        let (mut codes, mut counts, mut reps, mut map) = (vec![], vec![], vec![], vec![]);
        for e in 0..src.len() {
            let key: Vec<u32> = (0..q)
                .map(|i| {
                    let t = hs[i].generalize(src_levels[i] as usize, levels[i] as usize);
                    t.get(src.codes[e * q + i])
                })
                .collect();
            let class = *index.entry(key.clone()).or_insert_with(|| {
                codes.extend_from_slice(&key);
                counts.push(0);
                reps.push(src.reps[e]);
                counts.len() as u32 - 1
            });
            counts[class as usize] += src.counts[e];
            map.push(class);
        }
        (codes, counts, reps, map)
    }

    /// Regroups `src` at `levels` with packed keys (`packed`) or hashed ones, mapping sources.
    fn regroup(
        p: &Problem,
        src: &Groups,
        src_levels: &[u8],
        levels: &[u8],
        packed: bool,
    ) -> (Groups, Vec<u32>) {
        let checker = Checker::new(p);
        let hs = p.hierarchies();
        let q = levels.len();
        let tables: Vec<CodeMap<'_>> = (0..q)
            .map(|i| hs[i].generalize(src_levels[i] as usize, levels[i] as usize))
            .collect();
        let mut ws = Workspace::default();
        let product = key_strides(&mut ws.strides, hs, levels);
        assert!(product.is_some() || !packed);
        // Bound: every entry its own class (the hashed path never knows better).
        let (shift, mask) = ws.reset_table(src.len(), src.len(), q);
        let mut out = ws.recycled_groups(src.len(), q);
        let mut permit = None;
        let mut run = Regrouping {
            src,
            tables: &tables,
            strides: &ws.strides,
            slots: &mut ws.slots,
            class_keys: &mut ws.class_keys,
            class_of_src: Some(&mut ws.class_of_src),
            shift,
            mask,
            gate: &checker.gate,
            permit: &mut permit,
        };
        let mut key = Vec::new();
        if packed {
            run.run::<true>(&mut out, &mut key);
        } else {
            run.run::<false>(&mut out, &mut key);
        }
        (out, ws.class_of_src)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// Regrouping the classes of a transformation (or the base groups) at a generalization
        /// of it, with packed keys and with hashed ones, gives exactly the classes of a naive
        /// grouping, in the same order; so do the checker's evaluation and its check (which
        /// rolls up from whatever it has cached).
        #[test]
        fn regrouping_equals_a_naive_grouping(
            a in proptest::collection::vec(0u8..8, 9),
            b in proptest::collection::vec(0u8..8, 9),
            via_base in proptest::bool::ANY,
        ) {
            let p = adult_problem();
            let (min, max) = (p.lattice().min(), p.lattice().max());
            let clamp = |v: &[u8]| -> Vec<u8> {
                (0..9).map(|i| min[i] + v[i] % (max[i] - min[i] + 1)).collect()
            };
            let (a, b) = (clamp(&a), clamp(&b));
            let low: Vec<u8> = a.iter().zip(&b).map(|(&x, &y)| x.min(y)).collect();
            let high: Vec<u8> = a.iter().zip(&b).map(|(&x, &y)| x.max(y)).collect();
            let (src, src_levels) = if via_base {
                (p.base_groups().clone(), vec![0; 9])
            } else {
                (Checker::new(p).evaluate(&low).groups, low.clone())
            };
            let (codes, counts, reps, map) = naive_regrouping(p, &src, &src_levels, &high);
            for packed in [true, false] {
                let (out, of_src) = regroup(p, &src, &src_levels, &high, packed);
                proptest::prop_assert_eq!(&out.codes, &codes);
                proptest::prop_assert_eq!(&out.counts, &counts);
                proptest::prop_assert_eq!(&out.reps, &reps);
                proptest::prop_assert_eq!(&of_src, &map);
            }
            let checker = Checker::new(p);
            checker.check(&low);
            let rolled = checker.check(&high);
            let evaluated = checker.evaluate(&high);
            let (base_codes, base_counts, _, base_map) =
                naive_regrouping(p, p.base_groups(), &[0; 9], &high);
            proptest::prop_assert_eq!(&evaluated.groups.codes, &base_codes);
            proptest::prop_assert_eq!(&evaluated.groups.counts, &base_counts);
            proptest::prop_assert_eq!(&evaluated.class_of_base, &base_map);
            proptest::prop_assert_eq!(rolled, evaluated.result);
        }
    }

    /// The adult problem, built once for the property tests.
    fn adult_problem() -> &'static Problem {
        static P: std::sync::OnceLock<Problem> = std::sync::OnceLock::new();
        P.get_or_init(adult)
    }

    #[test]
    fn threads_share_the_snapshots() {
        let p = adult();
        let checker = Checker::new(&p);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        // The parent on the caller's workspace, its generalization on a worker's.
        let parent = checker.check(&[0, 1, 0, 0, 0, 0, 0, 0, 0]);
        let before = checker.regrouped_entries();
        let child = pool.install(|| checker.check(&[0, 2, 0, 0, 0, 0, 0, 0, 0]));
        assert_eq!(
            checker.regrouped_entries() - before,
            parent.classes as u64,
            "the worker rolls up from the parent's classes, not the base groups"
        );
        assert_eq!(child, Checker::new(&p).check(&[0, 2, 0, 0, 0, 0, 0, 0, 0]));
    }

    #[test]
    fn the_memory_bounds_change_no_result_and_hold() {
        let p = adult();
        let mut nodes: Vec<Levels> = Vec::new();
        p.lattice().for_each(|t| nodes.push(t.to_vec()));
        // Every 3rd transformation, bottom-up: many regroupings of the base groups and of
        // large earlier results.
        let nodes: Vec<Levels> = nodes.into_iter().step_by(3).collect();
        let free = Checker::with_budgets(&p, 8 << 20, usize::MAX);
        let expected: Vec<CheckResult> = nodes.iter().map(|t| free.check(t)).collect();
        assert_eq!(free.large_regroupings(), 0);
        // Tiny budgets: nearly every regrouping is large, `last` results compete for 4 × 2,048
        // words, on four threads at once.
        let bounded = Checker::with_budgets(&p, 2048, 64);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        let got: Vec<CheckResult> =
            pool.install(|| nodes.par_iter().map(|t| bounded.check(t)).collect());
        assert_eq!(got, expected);
        assert!(bounded.large_regroupings() > nodes.len() as u64 / 2);
        assert_eq!(bounded.max_concurrent_large_regroupings(), 1);
        assert_eq!(bounded.gate.active.load(Ordering::Relaxed), 0);
        assert!(
            !*bounded.gate.busy.lock().unwrap(),
            "the permit is released"
        );
        // The shared budget of `last` results holds and its accounting is exact.
        let held = last_words(&bounded);
        assert!(held <= 4 * 2048, "{held}");
        assert_eq!(held, bounded.last_words.load(Ordering::Relaxed));
        // Buffers of large checks were released.
        for w in &bounded.workspaces {
            let w = w.lock().unwrap();
            assert!(w.slots.capacity() <= 2 * bounded.gate.classes);
            assert!(w.class_of_src.capacity() <= 2 * bounded.gate.classes);
        }
        // Full evaluations too.
        for t in nodes.iter().step_by(101) {
            let (a, b) = (free.evaluate(t), bounded.evaluate(t));
            assert_eq!(a.result, b.result);
            assert_eq!(a.groups.codes, b.groups.codes);
            assert_eq!(a.groups.counts, b.groups.counts);
            assert_eq!(a.class_of_base, b.class_of_base);
        }
    }
}
