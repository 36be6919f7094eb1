//! Quality models (REFERENCE.md §6.1): each scores a transformation (lower = less information
//! loss), gives a lower bound that is monotone in the lattice (for pruning) and a user-facing
//! utility in [0, 1] (1 = data unchanged).
//!
//! Sums over classes use [`ExactSum`] so that scores do not depend on the order of the classes
//! (which varies with the check's reuse of earlier results and with thread scheduling).

use super::check::ClassView;
use super::error::{EngineError, Result};
use super::problem::Problem;

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
    /// All models, in report order.
    pub const ALL: [QualityModel; 10] = [
        QualityModel::Loss,
        QualityModel::Aecs,
        QualityModel::Discernibility,
        QualityModel::DiscernibilityStar,
        QualityModel::Precision,
        QualityModel::Height,
        QualityModel::Entropy,
        QualityModel::NormalizedEntropy,
        QualityModel::KlDivergence,
        QualityModel::Ambiguity,
    ];

    /// Stable name used in configuration and reports.
    pub fn name(self) -> &'static str {
        match self {
            QualityModel::Loss => "loss",
            QualityModel::Aecs => "aecs",
            QualityModel::Discernibility => "discernibility",
            QualityModel::DiscernibilityStar => "discernibility-star",
            QualityModel::Precision => "precision",
            QualityModel::Height => "height",
            QualityModel::Entropy => "entropy",
            QualityModel::NormalizedEntropy => "normalized-entropy",
            QualityModel::KlDivergence => "kl-divergence",
            QualityModel::Ambiguity => "ambiguity",
        }
    }

    /// Parses a name produced by [`QualityModel::name`].
    pub fn parse(name: &str) -> Option<QualityModel> {
        QualityModel::ALL.into_iter().find(|m| m.name() == name)
    }

    /// True if the score never improves under generalization when suppression may change
    /// (i.e. the score itself may be used for pruning up-sets). Only the lower bound is monotone
    /// for the others.
    pub fn monotone_with_suppression(self) -> bool {
        matches!(
            self,
            QualityModel::DiscernibilityStar | QualityModel::Height
        )
    }
}

/// How per-attribute values are combined into one score.
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

    /// Checks parameter ranges.
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.gs_factor) {
            return Err(EngineError::config(
                "quality.gs_factor",
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
    /// User-facing utility in [0, 1], 1 = data unchanged.
    pub utility: f64,
}

/// Order-independent sum of floats: every term is converted to fixed point (2^-40 resolution)
/// and added as an integer, so any summation order gives bit-identical results.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExactSum(i128);

impl ExactSum {
    const SCALE: f64 = (1u64 << 40) as f64;

    /// Adds a term.
    #[inline]
    pub fn add(&mut self, x: f64) {
        self.0 += (x * Self::SCALE).round() as i128;
    }

    /// The sum as a float.
    pub fn value(self) -> f64 {
        self.0 as f64 / Self::SCALE
    }
}

/// ARX's 10-digit truncation of normalised values.
pub fn truncate10(x: f64) -> f64 {
    (x * 1e10).floor() / 1e10
}

/// Data-independent tables computed once per problem.
#[derive(Debug, Clone)]
pub(crate) struct PreparedQuality {
    /// `loss_lb[i][level]`: Σ over records of the domain share of their value at `level`.
    loss_gen_sum: Vec<Vec<f64>>,
    /// Normalised attribute weights w_i = weight_i / max weight.
    weights: Vec<f64>,
}

impl PreparedQuality {
    /// Precomputes the tables needed by the configured model.
    pub(crate) fn prepare(problem: &Problem) -> Result<PreparedQuality> {
        let model = problem.quality_config().model;
        if model != QualityModel::Loss {
            return Err(EngineError::config(
                "quality.model",
                format!("model '{}' is not supported yet", model.name()),
            ));
        }
        let mut loss_gen_sum = Vec::new();
        for (i, h) in problem.hierarchies().iter().enumerate() {
            let counts = problem.qi_value_counts(i);
            let mut per_level = Vec::with_capacity(h.height());
            for level in 0..h.height() {
                let mut s = ExactSum::default();
                for (code, &c) in counts.iter().enumerate() {
                    s.add(c as f64 * h.share[level][h.map[level][code] as usize]);
                }
                per_level.push(s.value());
            }
            loss_gen_sum.push(per_level);
        }
        let max_w = problem
            .quasi_identifiers()
            .iter()
            .map(|q| q.weight)
            .fold(0.0f64, f64::max);
        let weights = problem
            .quasi_identifiers()
            .iter()
            .map(|q| if max_w > 0.0 { q.weight / max_w } else { 1.0 })
            .collect();
        Ok(PreparedQuality {
            loss_gen_sum,
            weights,
        })
    }

    /// Lower bound of the configured model for a transformation, without grouping the data.
    pub(crate) fn lower_bound(&self, problem: &Problem, levels: &[u8]) -> f64 {
        let cfg = problem.quality_config();
        let g = cfg.generalization_factor();
        let n = problem.rows() as f64;
        let per: Vec<f64> = levels
            .iter()
            .enumerate()
            .map(|(i, &l)| {
                let d = problem.hierarchies()[i].domain_size as f64;
                normalise_loss(self.loss_gen_sum[i][l as usize] * g, n, g, d)
            })
            .collect();
        self.aggregate(cfg, &per)
    }

    fn aggregate(&self, cfg: &QualityConfig, per: &[f64]) -> f64 {
        let agg = cfg.aggregate.unwrap_or(Aggregate::GeometricMean);
        let d = per.len().max(1) as f64;
        let weighted = per.iter().zip(&self.weights).map(|(v, w)| v * w);
        match agg {
            Aggregate::Sum => weighted.sum(),
            Aggregate::Maximum => weighted.fold(0.0, f64::max),
            Aggregate::ArithmeticMean => weighted.sum::<f64>() / d,
            Aggregate::GeometricMean => weighted_geo(per, &self.weights, d),
        }
    }

    /// Evaluates the configured model on a grouped, suppressed transformation.
    pub(crate) fn evaluate(&self, view: &ClassView<'_>) -> Quality {
        let problem = view.problem;
        let cfg = problem.quality_config();
        let g = cfg.generalization_factor();
        let s = cfg.suppression_factor();
        let n = problem.rows() as f64;
        let q = view.levels.len();
        // Start from the generalization-only sum over all records (precomputed per level) and
        // correct for the suppressed classes, which are usually few. Suppressed records and
        // classes are counted per generalized code (integers) and summed in code order, so the
        // result is exact and independent of the order of the classes.
        let mut per = Vec::with_capacity(q);
        let mut supp_records: Vec<u64> = Vec::new();
        let mut supp_classes: Vec<u64> = Vec::new();
        let suppressed: Vec<usize> = (0..view.counts.len())
            .filter(|&c| view.suppressed[c])
            .collect();
        for (i, h) in problem.hierarchies().iter().enumerate() {
            let level = view.levels[i] as usize;
            let shares = &h.share[level];
            let mut sum = self.loss_gen_sum[i][level] * g;
            if !suppressed.is_empty() {
                supp_records.clear();
                supp_records.resize(shares.len(), 0);
                supp_classes.clear();
                supp_classes.resize(shares.len(), 0);
                for &c in &suppressed {
                    let code = view.codes[c * q + i] as usize;
                    supp_records[code] += view.counts[c] as u64;
                    supp_classes[code] += 1;
                }
                let mut removed = 0.0;
                let mut added = 0.0;
                for (code, &share) in shares.iter().enumerate() {
                    let records = supp_records[code] as f64;
                    if records == 0.0 {
                        continue;
                    }
                    removed += records * share * g;
                    // Per suppressed class: |EC| if sF = 1, else share + sF·(|EC| − share).
                    added += if s == 1.0 {
                        records
                    } else {
                        let classes = supp_classes[code] as f64;
                        classes * share + s * (records - classes * share)
                    };
                }
                sum = sum - removed + added;
            }
            per.push(normalise_loss(sum, n, g, h.domain_size as f64));
        }
        let score = self.aggregate(cfg, &per);
        let lower_bound = self.lower_bound(problem, view.levels).min(score);
        Quality {
            score,
            lower_bound,
            utility: (1.0 - score).clamp(0.0, 1.0),
            per_attribute: per,
        }
    }
}

fn weighted_geo(per: &[f64], weights: &[f64], d: f64) -> f64 {
    let product: f64 = per.iter().zip(weights).map(|(v, w)| v * w + 1.0).product();
    product.powf(1.0 / d) - 1.0
}

/// (L − gF·n/D) / (n − gF·n/D), clipped at 0 and truncated to 10 digits.
fn normalise_loss(l: f64, n: f64, g: f64, domain: f64) -> f64 {
    let min = g * n / domain;
    let denom = n - min;
    if denom <= 0.0 {
        return 0.0;
    }
    truncate10(((l - min) / denom).max(0.0))
}
