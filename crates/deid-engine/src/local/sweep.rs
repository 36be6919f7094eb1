//! The sweep ([`LocalMethod::Sweep`](super::LocalMethod), `docs/definitions.md` §3.6): every
//! transformation of the lattice in order of its granularity loss over all records (the mean
//! domain share, normalized per attribute from 1/domain size to 1); each
//! publishes the classes of the records not yet published that satisfy the privacy models on
//! their own. Records left after the top transformation are suppressed.
//!
//! A record published at a transformation fits no class published at an earlier one: it was
//! not yet published there, so it would have been a member of that class. The plan's rule "a
//! row belongs to the first step whose maps send it to a class that step publishes" therefore
//! holds with one step per transformation that published something, in sweep order.

use std::time::Instant;

use super::refine::Ctx;
use super::{LocalObserver, LocalStop};
use crate::cancel::CancelFlag;
use crate::error::{EngineError, Result};
use crate::lattice::Levels;
use crate::problem::Problem;
use crate::search::{Algorithm, Phase, Progress};

/// Transformations visited between two progress snapshots of the sweep.
const PROGRESS_EVERY: u64 = 256;

/// Most transformations the sweep visits: larger lattices are refused (`local.method`).
pub const SWEEP_MAX_SPACE: u128 = 2_000_000;

/// The sweep's output.
pub(super) struct Swept {
    /// Transformations that published records, in sweep order.
    pub levels: Vec<Levels>,
    /// Records not yet published before each of them, and the records it published.
    pub counts: Vec<(usize, usize)>,
    /// Step of every base group (`u32::MAX`: suppressed).
    pub step_of_base: Vec<u32>,
    /// Generalized codes of every base group at its step (`q` per group).
    pub codes: Vec<u32>,
    /// Records no step published.
    pub suppressed: usize,
    /// Transformations visited (the sweep's checks).
    pub visited: u64,
    /// Why it ended.
    pub stop: LocalStop,
    /// True if every step published its classes in sweep order: no limit cut the sweep and no
    /// class was taken back to the top.
    pub in_order: bool,
}

/// Limits of a sweep: a deadline, a number of transformations and the cancel flag. When one
/// stops it, the records left are published at the top transformation if they satisfy the
/// models there as one class (otherwise they are suppressed). Progress goes to `observer`
/// (clock from `start`, the time limit `limit`).
pub(super) struct SweepLimits<'a> {
    pub start: Instant,
    pub limit: std::time::Duration,
    pub max_visits: Option<u64>,
    pub cancel: &'a CancelFlag,
    pub observer: &'a dyn LocalObserver,
}

impl SweepLimits<'_> {
    /// A progress snapshot after `visited` of `size` transformations, `steps` of which
    /// published records.
    fn report(&self, visited: u64, size: usize, steps: usize, phase: Phase) {
        let elapsed = self.start.elapsed();
        let explored = if size > 0 {
            visited as f64 / size as f64
        } else {
            1.0
        };
        let by_time = elapsed.as_secs_f64() / self.limit.as_secs_f64().max(1e-9);
        let by_checks = self
            .max_visits
            .map_or(0.0, |m| visited as f64 / m.max(1) as f64);
        let progress = Progress {
            algorithm: Algorithm::Exhaustive,
            phase,
            checks: visited,
            expansions: 0,
            elapsed,
            space_size: size as f64,
            explored: explored.min(1.0),
            progress: explored.max(by_time).max(by_checks).min(1.0),
            best_score: None,
        };
        self.observer.progress(steps, &progress);
    }
}

/// Checks that `problem`'s lattice can be swept (at most [`SWEEP_MAX_SPACE`] transformations)
/// and that its values pack into 128 bits a record; errors name `local.method`.
pub(super) fn check_space(problem: &Problem) -> Result<()> {
    let size = problem.lattice().size().unwrap_or(u128::MAX);
    if size > SWEEP_MAX_SPACE {
        return Err(EngineError::config(
            "local.method",
            format!(
                "the sweep visits every transformation: at most {SWEEP_MAX_SPACE}, the \
                 solution space has {} (use method \"steps\")",
                problem.lattice().size_string()
            ),
        ));
    }
    let bytes = code_bytes(problem);
    if bytes > SWEEP_MAX_CODE_BYTES {
        return Err(EngineError::config(
            "local.method",
            format!(
                "the sweep keeps every distinct record's codes at every level: {} MiB, at most \
                 {} MiB (use method \"steps\")",
                bytes >> 20,
                SWEEP_MAX_CODE_BYTES >> 20
            ),
        ));
    }
    let bits: u32 = widths(problem).iter().sum();
    if bits > 128 {
        return Err(EngineError::config(
            "local.method",
            format!(
                "the sweep packs a record's generalized values into 128 bits, these \
                 quasi-identifiers need {bits} (use method \"steps\")"
            ),
        ));
    }
    Ok(())
}

/// Bits of every quasi-identifier's codes in the packed keys: codes of a level are dense, below
/// the number of distinct values there.
fn widths(problem: &Problem) -> Vec<u32> {
    let lattice = problem.lattice();
    problem
        .hierarchies()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let most = (lattice.min()[i]..=lattice.max()[i])
                .map(|l| h.distinct(l as usize))
                .max()
                .unwrap_or(1);
            32 - (most.saturating_sub(1) as u32).leading_zeros()
        })
        .collect()
}

/// The mean share of every quasi-identifier at every level over all records, normalized as
/// granularity's loss is (from 1/domain size to 1): `costs[i][level]`. The summed loss of a
/// transformation is separable, so its mean is the sum of these ([`cost_key`]).
fn level_costs(problem: &Problem) -> Vec<Vec<f64>> {
    let base = problem.base_groups();
    let q = problem.qi_columns().len();
    let max = problem.lattice().max();
    let total: f64 = base.counts.iter().map(|&c| c as f64).sum::<f64>().max(1.0);
    (0..q)
        .map(|i| {
            let h = &problem.hierarchies()[i];
            let floor = 1.0 / h.domain_size.max(1) as f64;
            (0..=max[i] as usize)
                .map(|l| {
                    let m = (0..base.len())
                        .map(|g| {
                            let code = h.code(l, base.codes[g * q + i]);
                            base.counts[g] as f64 * h.share(l, code)
                        })
                        .sum::<f64>()
                        / total;
                    if floor < 1.0 {
                        (m - floor) / (1.0 - floor)
                    } else {
                        0.0
                    }
                })
                .collect()
        })
        .collect()
}

/// A transformation's place in the sweep order: its granularity loss over all records, then
/// the sum of its levels (then the levels themselves).
fn cost_key(costs: &[Vec<f64>], levels: &[u8]) -> (f64, u32) {
    let cost = levels
        .iter()
        .zip(costs)
        .map(|(&l, c)| c[l as usize])
        .sum::<f64>();
    let sum = levels.iter().map(|&l| l as u32).sum::<u32>();
    (cost, sum)
}

/// The sweep order of two transformations with their [`cost_key`]s: the key, then the levels.
fn sweep_cmp(a: (&(f64, u32), &[u8]), b: (&(f64, u32), &[u8])) -> std::cmp::Ordering {
    let ((ca, sa), la) = a;
    let ((cb, sb), lb) = b;
    ca.total_cmp(cb).then(sa.cmp(sb)).then(la.cmp(lb))
}

/// Every transformation of the lattice, cheapest first ([`cost_key`], then the levels).
fn sweep_order(problem: &Problem, costs: &[Vec<f64>]) -> Vec<Levels> {
    let lattice = problem.lattice();
    let size = lattice.size().expect("checked by check_space");
    let mut all: Vec<((f64, u32), Levels)> = (0..size)
        .filter_map(|id| lattice.levels_of(id))
        .map(|levels| (cost_key(costs, &levels), levels))
        .collect();
    all.sort_by(|a, b| sweep_cmp((&a.0, &a.1), (&b.0, &b.1)));
    all.into_iter().map(|(_, l)| l).collect()
}

/// Time the climb after a cut ([`climb`]) may take beyond the time limit before the records
/// still left go to the top: a job still ends within its limit and one second.
const CLIMB_GRACE: std::time::Duration = std::time::Duration::from_millis(300);

/// After a limit cut the sweep before `next` (with the levels' `costs`, [`level_costs`]): the
/// records left climb a chain from the lattice's bottom towards the top, one level at a time in
/// the quasi-identifier whose next level costs least, and each transformation on the chain that
/// the sweep had not visited publishes the classes it can, as a step of its own (the plan's rule
/// holds as for the sweep: the records were left at every earlier step). A chain has at most the
/// lattice's height of transformations, so a short limit on a large lattice no longer publishes
/// nearly everything at the top (cup, k = 5, 1 s: Loss 0.62 before the refinement). Stops
/// [`CLIMB_GRACE`] after the time limit, and below the top, which the caller publishes.
fn climb(
    problem: &Problem,
    (costs, next): (&[Vec<f64>], &[u8]),
    limits: &SweepLimits<'_>,
    left: &mut Left,
    swept: &mut Swept,
    publish: &mut impl FnMut(&[u8], &mut Left, &mut Swept),
) {
    let until = limits.limit.saturating_add(CLIMB_GRACE);
    let max = problem.lattice().max();
    let first_left = cost_key(costs, next);
    let mut cur = problem.lattice().min().to_vec();
    while cur[..] != max[..] && !left.groups.is_empty() && limits.start.elapsed() < until {
        if sweep_cmp((&cost_key(costs, &cur), &cur), (&first_left, next)).is_ge() {
            swept.visited += 1;
            publish(&cur, left, swept);
        }
        let rise = |i: usize| costs[i][cur[i] as usize + 1] - costs[i][cur[i] as usize];
        let Some(i) = (0..cur.len())
            .filter(|&i| cur[i] < max[i])
            .min_by(|&a, &b| rise(a).total_cmp(&rise(b)))
        else {
            return;
        };
        cur[i] += 1;
    }
}

/// Most bytes of the records' codes at every level that the sweep keeps ([`Left`]).
pub const SWEEP_MAX_CODE_BYTES: usize = 1 << 30;

/// Bytes of [`Left`]'s columns for every base group of `problem`.
fn code_bytes(problem: &Problem) -> usize {
    let lattice = problem.lattice();
    let levels: usize = lattice
        .min()
        .iter()
        .zip(lattice.max())
        .map(|(&lo, &hi)| (hi - lo) as usize + 1)
        .sum();
    levels
        .saturating_mul(problem.base_groups().len())
        .saturating_mul(4)
}

/// The base groups not yet published, in a fixed order, with their codes at every level of
/// every quasi-identifier as columns in that order (`cols[i][level][j]`; empty below the
/// lattice's minimum level, which no transformation has): a key is then built from sequential
/// reads.
struct Left {
    groups: Vec<u32>,
    cols: Vec<Vec<Vec<u32>>>,
}

impl Left {
    /// The groups `groups` (in this order) and their codes.
    fn new(ctx: &Ctx<'_>, groups: Vec<u32>) -> Left {
        let lattice = ctx.problem().lattice();
        let (min, max) = (lattice.min(), lattice.max());
        let cols = (0..ctx.q)
            .map(|i| {
                (0..=max[i])
                    .map(|l| {
                        if l < min[i] {
                            Vec::new()
                        } else {
                            groups.iter().map(|&g| ctx.code(g as usize, i, l)).collect()
                        }
                    })
                    .collect()
            })
            .collect();
        Left { groups, cols }
    }

    /// Keeps the groups for which `keep` is true.
    fn retain(&mut self, keep: impl Fn(u32) -> bool) {
        let mask: Vec<bool> = self.groups.iter().map(|&g| keep(g)).collect();
        let kept = |v: &mut Vec<u32>| {
            let mut j = 0;
            v.retain(|_| {
                j += 1;
                mask[j - 1]
            });
        };
        kept(&mut self.groups);
        for col in self.cols.iter_mut().flatten() {
            kept(col);
        }
    }
}

/// A record's packed key (its generalized values) with its index in [`Left`]: sorting entries
/// sorts by key. One integer where key and index fit (`u64`: keys of up to 32 bits, `u128`: up
/// to 96), a pair otherwise.
trait Entry: Copy + Ord {
    /// The entry of index `j` with an empty key.
    fn start(j: u32) -> Self;
    /// The entry with `code` appended to its key in `width` bits.
    fn push(self, width: u32, code: u32) -> Self;
    /// The index.
    fn index(self) -> u32;
    /// True if both keys are equal.
    fn same_key(self, other: Self) -> bool;
}

/// [`Entry`] for an integer type holding the key above the index's low 32 bits.
macro_rules! packed_entry {
    ($t:ty) => {
        impl Entry for $t {
            #[inline]
            fn start(j: u32) -> $t {
                j as $t
            }
            #[inline]
            fn push(self, width: u32, code: u32) -> $t {
                ((((self >> 32) << width) | code as $t) << 32) | (self & 0xffff_ffff)
            }
            #[inline]
            fn index(self) -> u32 {
                self as u32
            }
            #[inline]
            fn same_key(self, other: $t) -> bool {
                self >> 32 == other >> 32
            }
        }
    };
}

packed_entry!(u64);
packed_entry!(u128);

impl Entry for (u128, u32) {
    #[inline]
    fn start(j: u32) -> (u128, u32) {
        (0, j)
    }
    #[inline]
    fn push(self, width: u32, code: u32) -> (u128, u32) {
        ((self.0 << width) | code as u128, self.1)
    }
    #[inline]
    fn index(self) -> u32 {
        self.1
    }
    #[inline]
    fn same_key(self, other: (u128, u32)) -> bool {
        self.0 == other.0
    }
}

/// Runs the sweep on `problem` (checked with [`check_space`]).
pub(super) fn sweep(problem: &Problem, limits: &SweepLimits<'_>) -> Swept {
    let ctx = Ctx::new(problem);
    let base = problem.base_groups();
    let q = problem.qi_columns().len();
    let widths = widths(problem);
    let bits = widths.iter().sum::<u32>();
    let (mut narrow, mut packed, mut wide) = (Vec::new(), Vec::new(), Vec::new());
    let mut publish = |levels: &[u8], left: &mut Left, swept: &mut Swept| match bits {
        0..=32 => publish_at::<u64>(&ctx, levels, &widths, left, &mut narrow, swept),
        33..=96 => publish_at::<u128>(&ctx, levels, &widths, left, &mut packed, swept),
        _ => publish_at::<(u128, u32)>(&ctx, levels, &widths, left, &mut wide, swept),
    };
    let costs = level_costs(problem);
    let order = sweep_order(problem, &costs);
    let mut swept = Swept {
        levels: Vec::new(),
        counts: Vec::new(),
        step_of_base: vec![u32::MAX; base.len()],
        codes: vec![0; base.len() * q],
        suppressed: 0,
        visited: 0,
        stop: LocalStop::Complete,
        in_order: true,
    };
    let mut left = Left::new(&ctx, (0..base.len() as u32).collect());
    let top = problem.lattice().max().to_vec();
    let mut cut = None;
    for (next, levels) in order.iter().enumerate() {
        if left.groups.is_empty() {
            break;
        }
        if let Some(stop) = stopped(limits, swept.visited) {
            cut = Some((stop, next));
            break;
        }
        if swept.visited.is_multiple_of(PROGRESS_EVERY) {
            limits.report(
                swept.visited,
                order.len(),
                swept.levels.len(),
                Phase::Searching,
            );
        }
        swept.visited += 1;
        publish(levels, &mut left, &mut swept);
    }
    if let Some((stop, next)) = cut {
        swept.stop = stop;
        swept.in_order = false;
        if stop != LocalStop::Cancelled {
            let at = (&costs[..], &order[next][..]);
            climb(problem, at, limits, &mut left, &mut swept, &mut publish);
        }
        publish(&top, &mut left, &mut swept);
    }
    // Records left over (too few, or not diverse, at the top) beyond the suppression limit:
    // the last step's smallest classes join them at the top until they satisfy the models.
    let mut left = left.groups;
    if ctx.records(&left) as usize > problem.max_suppressed() {
        left = to_the_top(&ctx, left, &top, &mut swept, &mut publish);
    }
    swept.suppressed = ctx.records(&left) as usize;
    if swept.suppressed > 0 && cut.is_none() {
        swept.stop = LocalStop::NoProgress;
    }
    limits.report(
        swept.visited,
        order.len(),
        swept.levels.len(),
        Phase::Finished,
    );
    swept
}

/// Takes the last steps' smallest classes back to the records `left` until they satisfy the
/// models as one class, then publishes them at `top` with `publish`; returns the records left.
fn to_the_top(
    ctx: &Ctx<'_>,
    mut left: Vec<u32>,
    top: &[u8],
    swept: &mut Swept,
    publish: &mut impl FnMut(&[u8], &mut Left, &mut Swept),
) -> Vec<u32> {
    while let Some(classes) = last_step_classes(ctx, swept) {
        for members in classes {
            swept.in_order = false;
            take_back(ctx, &members, swept);
            left.extend(members);
            if ctx.holds(&left) {
                left.sort_unstable();
                let mut rest = Left::new(ctx, left);
                publish(top, &mut rest, swept);
                return rest.groups;
            }
        }
    }
    left
}

/// The classes of the last step, smallest first (fewest records, then first base group); None
/// if there is no step. Their records fit no class of an earlier step (they were not yet
/// published there), so they may be published at the top after every other step.
fn last_step_classes(ctx: &Ctx<'_>, swept: &Swept) -> Option<Vec<Vec<u32>>> {
    let last = swept.levels.len().checked_sub(1)? as u32;
    let q = ctx.q;
    let mut classes: std::collections::BTreeMap<&[u32], Vec<u32>> = Default::default();
    for (g, &s) in swept.step_of_base.iter().enumerate() {
        if s == last {
            classes
                .entry(&swept.codes[g * q..(g + 1) * q])
                .or_default()
                .push(g as u32);
        }
    }
    let mut classes: Vec<Vec<u32>> = classes.into_values().collect();
    classes.sort_by_key(|m| (ctx.records(m), m[0]));
    Some(classes)
}

/// Takes the class `members` of the last step back out of the output; the step goes once it
/// publishes nothing.
fn take_back(ctx: &Ctx<'_>, members: &[u32], swept: &mut Swept) {
    for &g in members {
        swept.step_of_base[g as usize] = u32::MAX;
    }
    let records = ctx.records(members) as usize;
    let counts = swept.counts.last_mut().expect("a step per level vector");
    counts.1 -= records;
    if counts.1 == 0 {
        swept.levels.pop();
        swept.counts.pop();
    }
}

/// Why the sweep stops before its next transformation, if it does.
fn stopped(limits: &SweepLimits<'_>, visited: u64) -> Option<LocalStop> {
    if limits.cancel.is_cancelled() {
        return Some(LocalStop::Cancelled);
    }
    if limits.max_visits.is_some_and(|m| visited >= m) {
        return Some(LocalStop::CheckLimit);
    }
    if limits.start.elapsed() >= limits.limit {
        return Some(LocalStop::TimeLimit);
    }
    None
}

/// Publishes, at `levels`, the classes of the groups `left` that satisfy the models, as the
/// next step if there are any; `left` keeps the others. `keys` is a buffer. Records are
/// counted per key as the sorted keys are walked: only classes of the minimal size are judged.
fn publish_at<E: Entry>(
    ctx: &Ctx<'_>,
    levels: &[u8],
    widths: &[u32],
    left: &mut Left,
    keys: &mut Vec<E>,
    swept: &mut Swept,
) {
    let q = widths.len();
    keys.clear();
    keys.extend((0..left.groups.len() as u32).map(E::start));
    for (i, &width) in widths.iter().enumerate() {
        let col = &left.cols[i][levels[i] as usize];
        for (key, &code) in keys.iter_mut().zip(col) {
            *key = key.push(width, code);
        }
    }
    keys.sort_unstable();
    let counts = &ctx.problem().base_groups().counts;
    let min = ctx.problem().min_class_size() as u64;
    let step = swept.levels.len() as u32;
    let mut published = 0usize;
    let mut members: Vec<u32> = Vec::new();
    let mut start = 0;
    while start < keys.len() {
        let mut end = start + 1;
        let mut records = counts[left.groups[keys[start].index() as usize] as usize] as u64;
        while end < keys.len() && keys[end].same_key(keys[start]) {
            records += counts[left.groups[keys[end].index() as usize] as usize] as u64;
            end += 1;
        }
        if records >= min {
            members.clear();
            members.extend(
                keys[start..end]
                    .iter()
                    .map(|e| left.groups[e.index() as usize]),
            );
            if ctx.holds(&members) {
                for e in &keys[start..end] {
                    let j = e.index();
                    let g = left.groups[j as usize] as usize;
                    swept.step_of_base[g] = step;
                    for (i, &level) in levels.iter().enumerate() {
                        swept.codes[g * q + i] = left.cols[i][level as usize][j as usize];
                    }
                }
                published += records as usize;
            }
        }
        start = end;
    }
    if published > 0 {
        let before = ctx.records(&left.groups) as usize;
        left.retain(|g| swept.step_of_base[g as usize] == u32::MAX);
        swept.levels.push(levels.to_vec());
        swept.counts.push((before, published));
    }
}
