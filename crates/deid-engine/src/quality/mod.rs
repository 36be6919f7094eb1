//! Quality models (`docs/definitions.md` §4): each scores a transformation (lower = less
//! information loss), gives a lower bound that is monotone in the lattice (for pruning) and a
//! user-facing utility in [0, 1] (1 = data unchanged).
//!
//! Layout: `sum` (order-independent accumulators), `tables` (per column and level, computed
//! once in `PreparedQuality::prepare`), one file per family of models (`loss`,
//! `classes`: AECS, DM, DM*; `precision`: Precision, Height; `entropy`: non-uniform and
//! normalised entropy; `kl`; `ambiguity`).
//!
//! Conventions shared by all models (n = records, s = suppressed records, gF/sF = generalization
//! and suppression factors derived from the gs-factor, see [`QualityConfig`]):
//! * **Scores** follow ARX 3.9.2's definitions; deviations (where ARX is wrong) are documented on
//!   the model and collected in `docs/definitions.md` §4.6.
//! * **Lower bounds** are valid for the transformation *and all its generalizations* and are
//!   non-decreasing in the lattice bit for bit: they are computed from exact integer or fixed-point
//!   tables, and scores are computed as `bound + non-negative excess` so that `bound ≤ score` holds
//!   in floating point too. `PreparedQuality::lower_bound` gives a (weaker) bound without
//!   grouping the data.
//! * **Utility** = 1 − (v − v_min)/(v_max − v_min), clipped to [0, 1], where v is the model's value
//!   with neutral factors (gs-factor 0.5) and the configured attribute weights, v_min its value on
//!   the unchanged data (every level 0, nothing suppressed) and v_max its value when everything is
//!   removed (all records suppressed, or every attribute generalized to a single value that covers
//!   the whole domain). Multi-dimensional models normalise each attribute to [0, 1] first and
//!   divide the aggregate by the aggregate of all-ones. If a model cannot tell the two extremes
//!   apart (e.g. all records identical), utility falls back to 1 − s/n.
//! * Sums over classes are order-independent ([`ExactSum`], `sum::WideSum`, integers), because
//!   the order of classes varies with the check's reuse of earlier results.

mod ambiguity;
mod classes;
mod entropy;
mod kl;
mod loss;
mod precision;
pub(crate) mod sum;
pub(crate) mod tables;
#[cfg(test)]
mod tests;

pub use sum::ExactSum;

use crate::error::{EngineError, Result};
use crate::hierarchy::EncodedHierarchy;
use crate::lattice::MAX_QUASI_IDENTIFIERS;
use sum::{WideSum, fixed_k_log_k};
use tables::ColumnTables;

/// The available quality models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QualityModel {
    /// Iyengar's Loss, normalised per attribute, geometric-mean aggregate (the default).
    Loss,
    /// Average equivalence class size.
    Aecs,
    /// Discernibility (DM): Σ kept |EC|² + Σ suppressed n·|EC|.
    Discernibility,
    /// DM*: Σ |EC|² over all classes, ignoring suppression.
    DiscernibilityStar,
    /// Sweeney's precision.
    Precision,
    /// Sum of generalization levels.
    Height,
    /// Non-uniform entropy (de Waal & Willenborg).
    Entropy,
    /// Normalised non-uniform entropy.
    NormalizedEntropy,
    /// KL divergence between input and output distributions.
    KlDivergence,
    /// Ambiguity (Goldberger–Tassa).
    Ambiguity,
}

impl QualityModel {
    /// True for the models that compare the output with the original (level-0) values
    /// themselves, not only with the hierarchy: non-uniform entropy, normalized entropy and KL
    /// divergence. They cannot score data given at a `data_level` above 0.
    pub fn needs_original_values(self) -> bool {
        matches!(
            self,
            QualityModel::Entropy | QualityModel::NormalizedEntropy | QualityModel::KlDivergence
        )
    }
}

crate::names::enum_names! {
    QualityModel {
        Loss => "loss",
        Aecs => "aecs",
        Discernibility => "discernibility",
        DiscernibilityStar => "discernibility-star",
        Precision => "precision",
        Height => "height",
        Entropy => "entropy",
        NormalizedEntropy => "normalized-entropy",
        KlDivergence => "kl-divergence",
        Ambiguity => "ambiguity",
    }
    /// Stable name used in configuration and reports.
    pub fn name;
    /// Parses a name produced by [`QualityModel::name`].
    pub fn parse;
}

impl QualityModel {
    /// True if the score never improves under generalization when suppression may change
    /// (i.e. the score itself may be used for pruning up-sets). Only the lower bound is monotone
    /// for the others.
    pub fn monotone_with_suppression(self) -> bool {
        matches!(
            self,
            QualityModel::DiscernibilityStar | QualityModel::Height
        )
    }

    /// The aggregate ARX uses by default (only meaningful for the models with one value per
    /// quasi-identifier: Loss, Precision, Height and the two entropies).
    pub fn default_aggregate(self) -> Aggregate {
        match self {
            QualityModel::Loss => Aggregate::GeometricMean,
            QualityModel::Precision => Aggregate::ArithmeticMean,
            _ => Aggregate::Sum,
        }
    }
}

/// How per-attribute values are combined into one score. ARX's RANK aggregate (a lexicographic
/// comparison) is not offered: it does not reduce to one number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    /// Σ v_i·w_i.
    Sum,
    /// max v_i·w_i.
    Maximum,
    /// Σ v_i·w_i / d.
    ArithmeticMean,
    /// (∏ (v_i·w_i + 1))^(1/d) − 1.
    GeometricMean,
}

crate::names::enum_names! {
    Aggregate {
        Sum => "sum",
        Maximum => "maximum",
        ArithmeticMean => "arithmetic_mean",
        GeometricMean => "geometric_mean",
    }
    /// The name in specifications (`sum`, `maximum`, `arithmetic_mean`, `geometric_mean`).
    pub fn name;
    /// Parses a name produced by [`Aggregate::name`].
    pub fn parse;
}

impl Aggregate {
    /// Combines `values` with the normalised `weights` (same length).
    fn apply(self, values: &[f64], weights: &[f64]) -> f64 {
        let d = values.len().max(1) as f64;
        let weighted = values.iter().zip(weights).map(|(v, w)| v * w);
        match self {
            Aggregate::Sum => weighted.fold(0.0, |a, x| a + x),
            Aggregate::Maximum => weighted.fold(0.0, f64::max),
            Aggregate::ArithmeticMean => weighted.fold(0.0, |a, x| a + x) / d,
            Aggregate::GeometricMean => {
                let product = weighted.fold(1.0, |a, x| a * (x + 1.0));
                product.powf(1.0 / d) - 1.0
            }
        }
    }
}

/// Quality model plus its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QualityConfig {
    /// The model.
    pub model: QualityModel,
    /// gs-factor in [0, 1]: 0.5 weighs generalization and suppression equally.
    pub gs_factor: f64,
    /// Aggregate for multi-dimensional models; `None` = the model's default.
    pub aggregate: Option<Aggregate>,
}

impl Default for QualityConfig {
    fn default() -> Self {
        QualityConfig {
            model: QualityModel::Loss,
            gs_factor: 0.5,
            aggregate: None,
        }
    }
}

impl QualityConfig {
    /// Suppression factor sF = 2g if g < 0.5 else 1.
    pub fn suppression_factor(&self) -> f64 {
        if self.gs_factor < 0.5 {
            2.0 * self.gs_factor
        } else {
            1.0
        }
    }

    /// Generalization factor gF = 1 if g ≤ 0.5 else 1 − 2(g − 0.5).
    pub fn generalization_factor(&self) -> f64 {
        if self.gs_factor <= 0.5 {
            1.0
        } else {
            1.0 - 2.0 * (self.gs_factor - 0.5)
        }
    }

    /// The aggregate used for `model`: the configured one, else the model's default.
    pub fn aggregate_for(&self, model: QualityModel) -> Aggregate {
        self.aggregate.unwrap_or(model.default_aggregate())
    }

    /// Checks parameter ranges; errors name the parameter (`gs_factor`).
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.gs_factor) {
            return Err(EngineError::config(
                "gs_factor",
                format!("expected a number in [0, 1], got {}", self.gs_factor),
            ));
        }
        Ok(())
    }
}

/// Score of one transformation under one quality model.
#[derive(Debug, Clone, PartialEq)]
pub struct Quality {
    /// The model's value (lower = better).
    pub score: f64,
    /// Lower bound of `score` for this transformation and all its generalizations.
    pub lower_bound: f64,
    /// Per-quasi-identifier values for multi-dimensional models (empty otherwise).
    pub per_attribute: Vec<f64>,
    /// Loss only (empty otherwise): per quasi-identifier, the raw loss the suppressed records
    /// add beyond their generalized share (`docs/definitions.md` §4.4, bounds from above). It
    /// never grows with generalization when only the minimal class size suppresses (see
    /// [`Problem::suppression_shrinks_upwards`](crate::Problem::suppression_shrinks_upwards)),
    /// so it bounds the score of every specialization.
    pub excess: Vec<f64>,
    /// User-facing utility in [0, 1], 1 = data unchanged.
    pub utility: f64,
}

/// ARX's 10-digit truncation of normalised values.
pub fn truncate10(x: f64) -> f64 {
    (x * 1e10).floor() / 1e10
}

/// What the quality models see of a grouped, suppressed transformation.
#[derive(Debug, Clone, Copy)]
pub struct ClassView<'a> {
    /// The transformation.
    pub levels: &'a [u8],
    /// Generalized codes, row-major (one per quasi-identifier and class).
    pub codes: &'a [u32],
    /// Records per class.
    pub counts: &'a [u32],
    /// Suppression flag per class.
    pub suppressed: &'a [bool],
}

/// Constants of the unchanged data (the base groups) used by several models.
#[derive(Debug, Clone)]
pub(crate) struct BaseConstants {
    /// Number of base groups (classes of the unchanged data).
    groups: usize,
    /// Σ_b k_b² over base groups (DM of the unchanged data).
    sum_sq: u128,
    /// Σ_b k_b·log2 k_b, fixed point (KL).
    k_log_k: i128,
    /// Ambiguity of the unchanged data.
    ambiguity_min: f64,
    /// Ambiguity when everything is removed: n · ∏ leaves_i.
    ambiguity_max: f64,
    /// ∏ leaves_i (saturating at `f64::MAX`), the area of a suppressed record.
    domain_area: f64,
    /// Σ_i log2 leaves_i, fixed point.
    log_domain_area: i128,
}

/// What every model needs to know about the classes of a transformation (one pass).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Summary {
    /// Suppressed records.
    suppressed: u64,
    /// Classes that are not suppressed.
    kept_classes: u64,
    /// All classes.
    classes: u64,
    /// Σ |EC|² over all classes.
    sum_sq_all: u128,
    /// Σ |EC|² over kept classes.
    sum_sq_kept: u128,
}

impl Summary {
    fn of(view: &ClassView<'_>) -> Summary {
        let mut s = Summary::default();
        for (&count, &suppressed) in view.counts.iter().zip(view.suppressed) {
            if count == 0 {
                // Unreleased records only (research subset): not a class of the output.
                continue;
            }
            let k = count as u64;
            let sq = k as u128 * k as u128;
            s.classes += 1;
            s.sum_sq_all += sq;
            if suppressed {
                s.suppressed += k;
            } else {
                s.kept_classes += 1;
                s.sum_sq_kept += sq;
            }
        }
        s
    }
}

/// Tables and constants computed once per problem, for all models (so that reports can show every
/// model's value for the chosen transformation).
#[derive(Debug, Clone)]
pub(crate) struct PreparedQuality {
    config: QualityConfig,
    /// Number of records.
    n: u64,
    /// Normalised attribute weights w_i = weight_i / max weight (all 1 if every weight is 0).
    weights: Vec<f64>,
    columns: Vec<ColumnTables>,
    base: BaseConstants,
}

impl PreparedQuality {
    /// Precomputes the per-column tables and the constants of the unchanged data: `rows`
    /// records; per quasi-identifier its attribute weight, encoded hierarchy and the frequency of
    /// every dictionary code; the base groups (classes of the unchanged data) as row-major codes
    /// and counts. `config` must be valid ([`QualityConfig::validate`]).
    pub(crate) fn prepare(
        config: QualityConfig,
        rows: usize,
        weights: &[f64],
        hierarchies: &[EncodedHierarchy],
        value_counts: &[Vec<u32>],
        base_codes: &[u32],
        base_counts: &[u32],
    ) -> PreparedQuality {
        let n = rows as u64;
        let columns: Vec<ColumnTables> = hierarchies
            .iter()
            .zip(value_counts)
            .map(|(h, counts)| ColumnTables::build(h, counts, n))
            .collect();
        let max_w = weights.iter().copied().fold(0.0f64, f64::max);
        let weights = weights
            .iter()
            .map(|&w| if max_w > 0.0 { w / max_w } else { 1.0 })
            .collect();

        let q = columns.len();
        let mut sum_sq = 0u128;
        let mut k_log_k = 0i128;
        let mut ambiguity_min = WideSum::default();
        for (b, &count) in base_counts.iter().enumerate() {
            let k = count as u64;
            sum_sq += k as u128 * k as u128;
            k_log_k += fixed_k_log_k(k);
            let codes = &base_codes[b * q..b * q + q];
            let mut product = 1.0f64;
            for (i, col) in columns.iter().enumerate() {
                product *= col.area(0, codes[i]);
            }
            ambiguity_min.add(k, product.min(f64::MAX));
        }
        let domain_area = columns
            .iter()
            .fold(1.0f64, |a, c| a * c.leaves)
            .min(f64::MAX);
        let mut ambiguity_max = WideSum::default();
        ambiguity_max.add(n, domain_area);
        let base = BaseConstants {
            // Base groups of unreleased records only (research subset) are no classes.
            groups: base_counts.iter().filter(|&&c| c > 0).count(),
            sum_sq,
            k_log_k,
            ambiguity_min: ambiguity_min.value().min(f64::MAX),
            ambiguity_max: ambiguity_max.value().min(f64::MAX),
            domain_area,
            log_domain_area: columns.iter().map(|c| c.log_leaves as i128).sum(),
        };
        debug_assert!(q <= MAX_QUASI_IDENTIFIERS);
        PreparedQuality {
            config,
            n,
            weights,
            columns,
            base,
        }
    }

    /// Heap size of the per-column tables in bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.columns
            .iter()
            .map(ColumnTables::heap_bytes)
            .sum::<usize>()
            + self.columns.capacity() * std::mem::size_of::<ColumnTables>()
            + self.weights.capacity() * 8
    }

    /// Lower bound of the configured model for a transformation and all its generalizations,
    /// without grouping the data. Never above the `lower_bound` of [`PreparedQuality::evaluate`].
    pub(crate) fn lower_bound(&self, levels: &[u8]) -> f64 {
        debug_assert_eq!(levels.len(), self.columns.len());
        let model = self.config.model;
        let n = self.n as f64;
        // Classes of any transformation ≤ min(#base groups, ∏ distinct values per level).
        let max_classes = || {
            levels
                .iter()
                .zip(&self.columns)
                .fold(1.0f64, |a, (&l, c)| a * c.distinct[l as usize] as f64)
                .min(self.base.groups as f64)
                .max(1.0)
        };
        match model {
            QualityModel::Loss => loss::lower_bound(self, levels),
            QualityModel::Aecs => n / max_classes(),
            // Σ k² ≥ n² / #classes (Cauchy–Schwarz), with a margin for rounding.
            QualityModel::Discernibility | QualityModel::DiscernibilityStar => {
                n * n / max_classes() * (1.0 - 1e-12)
            }
            QualityModel::Precision => precision::lower_bound(self, levels),
            QualityModel::Height => precision::height_score(self, levels),
            QualityModel::Entropy | QualityModel::NormalizedEntropy => {
                entropy::lower_bound(self, model, levels)
            }
            QualityModel::KlDivergence => kl::lower_bound(self, levels),
            QualityModel::Ambiguity => ambiguity::independent_bound(self, levels),
        }
    }

    /// What suppressing one more class costs under the configured model, for choosing among
    /// classes of equal size (lower first): the class of `count` records with the generalized
    /// `codes` at `levels`.
    ///
    /// * Loss: the weighted sum over the attributes of the normalised increase of the raw loss,
    ///   count·(sF·(1 − share_i) + (1 − gF)·share_i) / (n − gF·n/D_i) — exact for the sum
    ///   aggregate, the first-order change for the others (they increase in every attribute);
    /// * Ambiguity: count·(∏ D_i − ∏ area_i);
    /// * every other model: 0 — AECS, DM, DM*, Precision and Height charge every class of a size
    ///   the same, and the entropies and KL divergence are not separable per class.
    pub(crate) fn suppression_cost(&self, levels: &[u8], codes: &[u32], count: u32) -> f64 {
        let k = count as f64;
        match self.config.model {
            QualityModel::Loss => {
                let g = self.config.generalization_factor();
                let sf = self.config.suppression_factor();
                let n = self.n as f64;
                self.columns
                    .iter()
                    .zip(&self.weights)
                    .enumerate()
                    .map(|(i, (col, w))| {
                        let share =
                            sum::from_fixed(col.share[levels[i] as usize].get(codes[i]) as i128);
                        let denominator = n - g * n / col.domain_size;
                        let raw = k * (sf * (1.0 - share) + (1.0 - g) * share);
                        if denominator > 0.0 {
                            w * raw / denominator
                        } else {
                            0.0
                        }
                    })
                    .sum()
            }
            QualityModel::Ambiguity => {
                let area = self
                    .columns
                    .iter()
                    .enumerate()
                    .fold(1.0f64, |a, (i, c)| a * c.area(levels[i] as usize, codes[i]));
                k * (self.base.domain_area - area.min(f64::MAX))
            }
            _ => 0.0,
        }
    }

    /// A lower bound of the Loss of `levels` when a generalization of it has the suppression
    /// excess `excess` ([`Quality::excess`]): the generalization-only bound of `levels` with that
    /// excess added per attribute. Only for Loss (the generalization-only bound otherwise).
    pub(crate) fn bound_below(&self, levels: &[u8], excess: &[f64]) -> f64 {
        match self.config.model {
            QualityModel::Loss => loss::bound_with_excess(self, levels, excess),
            _ => self.lower_bound(levels),
        }
    }

    /// Evaluates the configured model on a grouped, suppressed transformation.
    pub(crate) fn evaluate(&self, view: &ClassView<'_>) -> Quality {
        let quality = self.evaluate_model(self.config.model, view, &Summary::of(view));
        debug_assert!({
            let independent = self.lower_bound(view.levels);
            independent <= quality.lower_bound + 1e-9 * quality.lower_bound.abs().max(1.0)
        });
        quality
    }

    /// Evaluates every model on a grouped, suppressed transformation, in [`QualityModel::ALL`]
    /// order, with the configured gs-factor and aggregate.
    pub(crate) fn evaluate_all(&self, view: &ClassView<'_>) -> Vec<(QualityModel, Quality)> {
        let summary = Summary::of(view);
        QualityModel::ALL
            .into_iter()
            .map(|m| (m, self.evaluate_model(m, view, &summary)))
            .collect()
    }

    fn evaluate_model(&self, model: QualityModel, view: &ClassView<'_>, s: &Summary) -> Quality {
        let mut quality = match model {
            QualityModel::Loss => loss::evaluate(self, view, s),
            QualityModel::Aecs => classes::aecs(self, s),
            QualityModel::Discernibility => classes::discernibility(self, s),
            QualityModel::DiscernibilityStar => classes::discernibility_star(self, s),
            QualityModel::Precision => precision::precision(self, view, s),
            QualityModel::Height => precision::height(self, view, s),
            QualityModel::Entropy | QualityModel::NormalizedEntropy => {
                entropy::evaluate(self, model, view, s)
            }
            QualityModel::KlDivergence => kl::evaluate(self, view, s),
            QualityModel::Ambiguity => ambiguity::evaluate(self, view, s),
        };
        // Safety net only: the models compute `score = bound + excess` with excess ≥ 0.
        quality.lower_bound = quality.lower_bound.min(quality.score);
        quality.utility = unit(quality.utility);
        quality
    }

    /// Aggregates per-attribute values for `model`.
    fn aggregate(&self, model: QualityModel, values: &[f64]) -> f64 {
        self.config
            .aggregate_for(model)
            .apply(values, &self.weights)
    }

    /// Utility of a multi-dimensional model from per-attribute values normalised to [0, 1]
    /// (0 = unchanged, 1 = removed): 1 − agg(values) / agg(1, …, 1).
    fn aggregate_utility(&self, model: QualityModel, normalised: &[f64]) -> f64 {
        let agg = self.config.aggregate_for(model);
        let ones = vec![1.0; normalised.len()];
        let max = agg.apply(&ones, &self.weights);
        if max > 0.0 {
            1.0 - agg.apply(normalised, &self.weights) / max
        } else {
            1.0
        }
    }

    /// 1 − (v − min)/(max − min), or 1 − s/n if the range is empty.
    fn range_utility(&self, v: f64, min: f64, max: f64, suppressed: u64) -> f64 {
        if max > min {
            1.0 - unit((v - min) / (max - min))
        } else {
            1.0 - suppressed as f64 / self.n.max(1) as f64
        }
    }
}

/// Clips to [0, 1] (NaN → 0).
fn unit(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}
