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
//! table, snapshot cache) from a pool. Results never depend on which snapshot was used.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::lattice::{Lattice, Levels};
use super::privacy;
use super::problem::{Groups, Histograms, Problem, hash_codes};
use super::quality::Quality;

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

/// What quality and privacy models see of a grouped transformation.
#[derive(Debug, Clone, Copy)]
pub struct ClassView<'a> {
    /// The problem.
    pub problem: &'a Problem,
    /// The transformation.
    pub levels: &'a [u8],
    /// Generalized codes, row-major (`q` per class).
    pub codes: &'a [u32],
    /// Records per class.
    pub counts: &'a [u32],
    /// Suppression flag per class.
    pub suppressed: &'a [bool],
    /// The groups (representatives and histograms).
    pub groups: &'a Groups,
}

/// Decides and scores transformations of one problem. Thread-safe.
#[derive(Debug)]
pub struct Checker<'p> {
    problem: &'p Problem,
    pool: Mutex<Vec<Workspace>>,
    checks: AtomicU64,
    snapshot_budget_words: usize,
}

#[derive(Debug, Default)]
struct Snapshot {
    levels: Levels,
    groups: Groups,
    last_used: u64,
}

#[derive(Debug, Default)]
struct Workspace {
    snapshots: Vec<Snapshot>,
    words: usize,
    clock: u64,
    slots: Vec<u32>,
    hashes: Vec<u64>,
    class_of_src: Vec<u32>,
    key: Vec<u32>,
    acc: Vec<u32>,
    touched: Vec<u32>,
    order: Vec<u32>,
    starts: Vec<u32>,
}

const EMPTY: u32 = u32::MAX;

impl<'p> Checker<'p> {
    /// A checker with a snapshot cache of 32 Mi words (128 MiB) per worker thread.
    pub fn new(problem: &'p Problem) -> Self {
        Self::with_snapshot_budget(problem, 32 << 20)
    }

    /// A checker whose per-thread snapshot cache holds at most `words` 4-byte words (0 disables
    /// snapshots: every check groups the base groups).
    pub fn with_snapshot_budget(problem: &'p Problem, words: usize) -> Self {
        Checker {
            problem,
            pool: Mutex::new(Vec::new()),
            checks: AtomicU64::new(0),
            snapshot_budget_words: words,
        }
    }

    /// The problem.
    pub fn problem(&self) -> &'p Problem {
        self.problem
    }

    /// Number of checks performed so far.
    pub fn checks(&self) -> u64 {
        self.checks.load(Ordering::Relaxed)
    }

    /// Checks one transformation. `levels` must lie in the problem's lattice.
    pub fn check(&self, levels: &[u8]) -> CheckResult {
        debug_assert!(self.problem.lattice().contains(levels));
        self.checks.fetch_add(1, Ordering::Relaxed);
        let mut ws = self.take_workspace();
        let groups = match self.pick_snapshot(&mut ws, levels) {
            Some(i) => {
                // Take the snapshot out so that the workspace's buffers can be borrowed mutably.
                let snap = std::mem::take(&mut ws.snapshots[i]);
                let out = self.group_from(&mut ws, &snap.groups, &snap.levels, levels, false);
                ws.snapshots[i] = snap;
                out
            }
            None => {
                let bottom = vec![0u8; levels.len()];
                self.group_from(&mut ws, self.problem.base_groups(), &bottom, levels, false)
            }
        };
        let (suppressed, suppressed_records) = self.suppress(&groups);
        let view = ClassView {
            problem: self.problem,
            levels,
            codes: &groups.codes,
            counts: &groups.counts,
            suppressed: &suppressed,
            groups: &groups,
        };
        let quality = self.problem.prepared_quality().evaluate(&view);
        let result = self.verdict(levels, &groups, &suppressed, suppressed_records, &quality);
        self.store_snapshot(&mut ws, levels, groups);
        self.return_workspace(ws);
        result
    }

    /// Checks a transformation and returns the classes too (for output and reports). Always
    /// groups the base groups, so class order is the order of first appearance in the data.
    pub fn evaluate(&self, levels: &[u8]) -> Evaluation {
        self.checks.fetch_add(1, Ordering::Relaxed);
        let mut ws = self.take_workspace();
        let base = self.problem.base_groups();
        let bottom = vec![0u8; levels.len()];
        let groups = self.group_from(&mut ws, base, &bottom, levels, true);
        let class_of_base = ws.class_of_src.clone();
        let (suppressed, suppressed_records) = self.suppress(&groups);
        let view = ClassView {
            problem: self.problem,
            levels,
            codes: &groups.codes,
            counts: &groups.counts,
            suppressed: &suppressed,
            groups: &groups,
        };
        let quality = self.problem.prepared_quality().evaluate(&view);
        let result = self.verdict(levels, &groups, &suppressed, suppressed_records, &quality);
        self.return_workspace(ws);
        Evaluation {
            result,
            quality,
            groups,
            suppressed,
            class_of_base,
        }
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
            classes: groups.len(),
            score: quality.score,
            lower_bound: quality.lower_bound,
            utility: quality.utility,
        }
    }

    /// Flags classes that violate a class-based model, then suppresses further classes until the
    /// sample-based models hold (smallest first, ties by codes); returns the flags and the
    /// suppressed records.
    fn suppress(&self, groups: &Groups) -> (Vec<bool>, usize) {
        let p = self.problem;
        let k = p.min_class_size();
        let models = &p.class_models;
        let mut hists: Vec<(&[u32], &[u32])> = Vec::with_capacity(groups.hists.len());
        let mut suppressed = vec![false; groups.len()];
        let mut records = 0usize;
        for (c, (flag, &count)) in suppressed.iter_mut().zip(&groups.counts).enumerate() {
            let mut bad = count < k;
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
            records += privacy::risk::enforce(
                &p.sample_models,
                &groups.counts,
                &groups.codes,
                &mut suppressed,
            );
        }
        (suppressed, records)
    }

    fn take_workspace(&self) -> Workspace {
        self.pool
            .lock()
            .map(|mut p| p.pop())
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    fn return_workspace(&self, ws: Workspace) {
        if let Ok(mut p) = self.pool.lock() {
            p.push(ws);
        }
    }

    /// Index of the smallest cached result that `levels` generalizes, if any.
    fn pick_snapshot(&self, ws: &mut Workspace, levels: &[u8]) -> Option<usize> {
        ws.clock += 1;
        let mut best: Option<usize> = None;
        for (i, s) in ws.snapshots.iter().enumerate() {
            if Lattice::le(&s.levels, levels)
                && best.is_none_or(|b| s.groups.len() < ws.snapshots[b].groups.len())
            {
                best = Some(i);
            }
        }
        if let Some(i) = best {
            ws.snapshots[i].last_used = ws.clock;
        }
        best
    }

    /// Regroups `src` (the classes of transformation `src_levels`) into the classes of `levels`.
    fn group_from(
        &self,
        ws: &mut Workspace,
        src: &Groups,
        src_levels: &[u8],
        levels: &[u8],
        from_base_codes: bool,
    ) -> Groups {
        let p = self.problem;
        let q = levels.len();
        let base = &p.base_groups().codes;
        let hs = p.hierarchies();
        let is_base = std::ptr::eq(src, p.base_groups());
        // Columns whose codes must be looked up; the others are copied from the source.
        let changed: Vec<usize> = (0..q)
            .filter(|&i| is_base || from_base_codes || src_levels[i] != levels[i])
            .collect();
        let maps: Vec<&[u32]> = (0..q).map(|i| &hs[i].map[levels[i] as usize][..]).collect();

        let entries = src.len();
        let cap = (entries * 2).next_power_of_two().max(16);
        ws.slots.clear();
        ws.slots.resize(cap, EMPTY);
        ws.hashes.clear();
        ws.class_of_src.clear();
        ws.class_of_src.reserve(entries);
        ws.key.resize(q, 0);
        let mask = cap - 1;
        let mut out = Groups {
            codes: Vec::with_capacity(entries.min(1 << 16) * q),
            counts: Vec::with_capacity(entries.min(1 << 16)),
            reps: Vec::with_capacity(entries.min(1 << 16)),
            hists: Vec::new(),
        };
        for e in 0..entries {
            let rep = src.reps[e] as usize;
            let key = &mut ws.key;
            if !is_base && !from_base_codes {
                key.copy_from_slice(&src.codes[e * q..e * q + q]);
            }
            let rb = &base[rep * q..rep * q + q];
            for &i in &changed {
                key[i] = maps[i][rb[i] as usize];
            }
            let h = hash_codes(key);
            let mut slot = (h as usize) & mask;
            let class = loop {
                let s = ws.slots[slot];
                if s == EMPTY {
                    let c = out.counts.len() as u32;
                    ws.slots[slot] = c;
                    ws.hashes.push(h);
                    out.codes.extend_from_slice(key);
                    out.counts.push(0);
                    out.reps.push(rep as u32);
                    break c;
                }
                let su = s as usize;
                if ws.hashes[su] == h && out.codes[su * q..su * q + q] == key[..] {
                    break s;
                }
                slot = (slot + 1) & mask;
            };
            out.counts[class as usize] += src.counts[e];
            ws.class_of_src.push(class);
        }
        if !src.hists.is_empty() {
            out.hists = self.merge_hists(ws, src, out.len());
        }
        out
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

    /// Keeps `groups` as a snapshot if it is small enough to be worth regrouping from.
    fn store_snapshot(&self, ws: &mut Workspace, levels: &[u8], groups: Groups) {
        let n = self.problem.rows();
        let words = groups.words();
        if self.snapshot_budget_words == 0
            || groups.len() * 5 > n
            || groups.len() * 5 > self.problem.base_groups().len() * 4
            || words > self.snapshot_budget_words
            || ws.snapshots.iter().any(|s| s.levels == levels)
        {
            return;
        }
        while ws.words + words > self.snapshot_budget_words {
            // Evict the least recently used snapshot.
            let Some(i) = ws
                .snapshots
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(i, _)| i)
            else {
                break;
            };
            let s = ws.snapshots.swap_remove(i);
            ws.words -= s.groups.words();
        }
        ws.clock += 1;
        ws.words += words;
        ws.snapshots.push(Snapshot {
            levels: levels.to_vec(),
            groups,
            last_used: ws.clock,
        });
    }
}
