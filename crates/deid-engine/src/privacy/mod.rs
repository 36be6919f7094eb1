//! Privacy models. Class-based models decide per equivalence class whether it may be published
//! (violating classes are suppressed); sample-based models (risk thresholds) look at the whole
//! distribution of class sizes after that and suppress further classes, smallest first.
//!
//! Every model declares its monotonicity (`docs/definitions.md` §3.3) so that searches prune
//! only where safe, and the minimal class size it implies (used for the fast k-anonymity
//! verdict).
//!
//! Layout: this module holds the user-facing [`PrivacyModel`]; `compiled` its form compiled
//! against the data and the dispatch to the models; [`ldiversity`] (entropy and recursive ℓ-diversity), [`tcloseness`] (the three earth
//! mover's distances), [`likeness`] (δ-disclosure privacy, basic and enhanced β-likeness) and
//! [`risk`] (average re-identification risk, sample and population uniqueness) hold the models
//! themselves;
//! `syntax` implements the compact text form `name(key=value,…)` ([`PrivacyModel::parse`] and
//! `Display`).
//!
//! Per-class evaluation never allocates: everything that depends only on the data (global
//! distributions, orders, hierarchy tables) is computed once when the problem is compiled.
//!
//! # Deliberate differences from ARX 3.9.2
//!
//! (Also listed in `docs/definitions.md` §3.4.)
//!
//! * **Grassberger entropy ℓ-diversity is not monotone** under generalization, so it is declared
//!   non-monotone (ARX declares every entropy ℓ-diversity monotone, which lets its searches prune
//!   transformations that are in fact anonymous). Counterexample: the classes {x:1, y:1} and
//!   {x:1, y:1} both have the Grassberger estimate 2.0, their union {x:2, y:2} only 2/3 < ln 2.
//!   Shannon entropy is concave and stays monotone.
//! * **The relaxed average-risk model is not monotone with suppression** (ARX declares it so).
//!   Counterexample (highest risk 0.2, i.e. classes below 5 records are at risk; average 0.28;
//!   records at risk 0.55; 4 records may be suppressed): class sizes 5, 4, 2, 2, 1 need 3 records
//!   suppressed (1 and one 2), but generalizing the two classes of 2 into one of 4 gives
//!   5, 4, 4, 1, which needs 5 (1 and a 4). The plain average risk and sample uniqueness are
//!   monotone: suppressing the smallest classes first suppresses the fewest records.
//! * **Population uniqueness with Zayatz's estimator is not monotone** under generalization (ARX
//!   declares it so; every other estimator is declared non-monotone by both). Counterexample
//!   (N = 10, threshold 0.1): class sizes 1, 2, 2 have the share 0.062, merging the two classes
//!   of 2 gives 1, 4 with 0.135.
//! * Entropy ℓ-diversity accepts ties up to a relative 1e-10 (a uniform class over exactly ℓ values
//!   has entropy ln ℓ; ARX may reject it due to rounding). With the Grassberger estimator the sum is
//!   never aborted early: G(1) < 0, so a partial sum above the bound can still end below it
//!   (ARX aborts early and may reject classes that fulfil the model).
//! * All t-closeness distances are computed in exact integer arithmetic with one final division
//!   (ARX uses 32-bit integers for the hierarchical distance, which overflow when
//!   n · |EC| > 2³¹, and floating-point sums elsewhere).
//! * Hierarchical distance: when the top level of the sensitive attribute's hierarchy has several
//!   values (no single root), moving mass between them costs the maximal distance 1. ARX does not
//!   charge these moves at all, so a class can reach distance 0 although its distribution differs
//!   from the table's.
//! * Ordered distance: values are ordered numerically when every value of the attribute parses as
//!   a finite number (ties such as `1` and `1.0` broken lexicographically), otherwise
//!   lexicographically by their UTF-8 bytes. ARX uses the attribute's declared data type. The
//!   distance is normalised by m − 1, m = number of distinct values occurring in the data.
//! * δ-disclosure privacy and β-likeness check the values present in the class, as ARX does
//!   (Brickell and Shmatikov's definition also covers absent values, which no class could fulfil
//!   unless it contains every value).
//! * Sample-based models: the number of classes to suppress is found by a linear scan over the
//!   classes sorted by size (the minimal prefix, the same as ARX's binary search), but without
//!   ARX's early abort once the suppression limit is exceeded, so the suppression flags (and the
//!   score of non-anonymous transformations) are always complete. Classes of equal size are
//!   suppressed cheapest first under the configured quality model, then in lexicographic order
//!   of their generalized codes (ARX: information loss ascending — the most informative, i.e.
//!   costliest, class first — then representative row).
//! * δ-presence: a class of the population table without released records (count 0, δ = 0 <
//!   δmin) makes the transformation fail also when a minimal class size is configured (ARX
//!   classifies it as too small first and never rejects the transformation for it).
//!   A record is at risk under the relaxed average-risk model iff 1/|EC| > highest risk; ARX
//!   rounds the highest risk to an "effective" threshold (up to 1 % off). The share of records at
//!   risk may be 0.

use std::fmt;

use crate::error::{EngineError, Result};
pub use crate::population::{Estimator, KMapEstimator};

mod compiled;
pub mod dp;
pub mod ldiversity;
pub mod likeness;
#[cfg(test)]
mod monotonicity_tests;
pub mod risk;
mod syntax;
pub mod tcloseness;
#[cfg(test)]
mod testutil;

pub use compiled::SensitiveDomain;
pub(crate) use compiled::{PreparedClassModel, PreparedModel, PresenceModel};
pub use dp::{DpModel, DpParameters};

/// How entropy ℓ-diversity estimates the entropy of a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EntropyEstimator {
    /// The plug-in estimate −Σ p ln p (Machanavajjhala et al.).
    #[default]
    Shannon,
    /// Grassberger's bias-corrected estimate (Grassberger 2003; Stammler et al., PSD 2016).
    Grassberger,
}

crate::names::enum_names! {
    EntropyEstimator {
        Shannon => "shannon",
        Grassberger => "grassberger",
    }
    /// Name in the text syntax: `shannon` or `grassberger`.
    pub fn name;
    /// The estimator named exactly `name`.
    fn from_name;
}

impl EntropyEstimator {
    /// Parses a name (case-insensitive).
    pub fn parse(name: &str) -> Option<EntropyEstimator> {
        EntropyEstimator::from_name(&name.to_ascii_lowercase())
    }
}

/// Ground distance of t-closeness' earth mover's distance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TClosenessDistance {
    /// All distinct values are at distance 1: EMD = ½ Σ |p − q|.
    Equal,
    /// Values at positions i < j of the value order are at distance (j − i)/(m − 1), m = number
    /// of distinct values in the data. The order is numeric when every value of the attribute
    /// parses as a finite number (ties broken by the text), otherwise lexicographic.
    Ordered,
    /// Values are at distance level(lowest common ancestor)/height in the attribute's hierarchy.
    Hierarchical,
}

crate::names::enum_names! {
    TClosenessDistance {
        Equal => "equal",
        Ordered => "ordered",
        Hierarchical => "hierarchical",
    }
    /// Name in the text syntax: `equal`, `ordered` or `hierarchical`.
    pub fn name;
    /// The distance named exactly `name`.
    fn from_name;
}

impl TClosenessDistance {
    /// Parses a name (case-insensitive).
    pub fn parse(name: &str) -> Option<TClosenessDistance> {
        TClosenessDistance::from_name(&name.to_ascii_lowercase())
    }
}

/// A privacy model with its parameters, as configured by the user.
#[derive(Debug, Clone, PartialEq)]
pub enum PrivacyModel {
    /// Every class has at least `k` records.
    KAnonymity {
        /// Minimal class size (≥ 1).
        k: u32,
    },
    /// Every class has at least `l` distinct values of `attribute`.
    DistinctLDiversity {
        /// Sensitive attribute.
        attribute: String,
        /// Minimal number of distinct values (≥ 1).
        l: u32,
    },
    /// Every class has at least ⌈l⌉ distinct values and an estimated entropy of at least ln l.
    EntropyLDiversity {
        /// Sensitive attribute.
        attribute: String,
        /// Diversity (≥ 1; need not be an integer).
        l: f64,
        /// Entropy estimator.
        estimator: EntropyEstimator,
    },
    /// Recursive (c,ℓ)-diversity: with the value counts r₁ ≥ r₂ ≥ … ≥ r_m of a class,
    /// m ≥ ℓ and r₁ < c · (r_ℓ + … + r_m).
    RecursiveCLDiversity {
        /// Sensitive attribute.
        attribute: String,
        /// Factor c (> 0).
        c: f64,
        /// ℓ (≥ 1).
        l: u32,
    },
    /// The earth mover's distance between a class's distribution of `attribute` and the table's is
    /// at most `t`.
    TCloseness {
        /// Sensitive attribute.
        attribute: String,
        /// Threshold in [0, 1].
        t: f64,
        /// Ground distance.
        distance: TClosenessDistance,
    },
    /// δ-disclosure privacy: |log₂(p_class(v) / p_table(v))| < δ for every value v of the class.
    DeltaDisclosure {
        /// Sensitive attribute.
        attribute: String,
        /// δ (> 0).
        delta: f64,
    },
    /// Basic β-likeness: (p_class(v) − p_table(v)) / p_table(v) ≤ β for every value v.
    BasicBetaLikeness {
        /// Sensitive attribute.
        attribute: String,
        /// β (> 0).
        beta: f64,
    },
    /// Enhanced β-likeness: (p_class(v) − p_table(v)) / p_table(v) ≤ min(β, −ln p_table(v)).
    EnhancedBetaLikeness {
        /// Sensitive attribute.
        attribute: String,
        /// β (> 0).
        beta: f64,
    },
    /// Average prosecutor re-identification risk (published classes / published records) at most
    /// `threshold`; relaxed variant: additionally at most a share `records_at_risk` of the
    /// published records has a risk 1/|EC| above `highest`.
    AverageRisk {
        /// Threshold of the average risk, in (0, 1].
        threshold: f64,
        /// Highest acceptable individual risk, in (0, 1] (given together with `records_at_risk`).
        highest: Option<f64>,
        /// Share of records that may exceed `highest`, in [0, 1].
        records_at_risk: Option<f64>,
    },
    /// At most a share `threshold` of the published records are alone in their class.
    SampleUniqueness {
        /// Threshold in (0, 1].
        threshold: f64,
    },
    /// Estimated k-map: every published class is, with probability 1 − `alpha`, a class of at
    /// least `k` individuals of the population (needs the problem's population model); holds
    /// as k′-anonymity with k′ derived from k, α, the estimator and the sampling fraction
    /// (`population::k_prime`, `docs/definitions.md` §3.2).
    KMap {
        /// k of the population (≥ 1).
        k: u32,
        /// Significance level α in [0, 1].
        alpha: f64,
        /// Population model of the class sizes.
        estimator: KMapEstimator,
    },
    /// k-map with the table as the population: every published class stands for at least `k`
    /// records of the whole table, of which only the research subset is released
    /// (`docs/definitions.md` §3.2).
    KMapSubset {
        /// k of the population (≥ 1).
        k: u32,
    },
    /// δ-presence (Nergiz et al.): the share of a class's records of the whole table that
    /// belong to the released research subset lies in [`delta_min`, `delta_max`] for every
    /// class (`docs/definitions.md` §3.2).
    DeltaPresence {
        /// Lowest probability of membership, in [0, 1].
        delta_min: f64,
        /// Highest probability of membership, in [0, 1], at least `delta_min`.
        delta_max: f64,
    },
    /// The estimated share of the population that is unique on the published quasi-identifiers
    /// (estimated population uniques / N) is at most `threshold`; needs the problem's population
    /// model (`docs/definitions.md` §3.2, §6.2).
    PopulationUniqueness {
        /// Threshold in [0, 1].
        threshold: f64,
        /// The estimator (default Dankar et al.'s rule, as ARX).
        estimator: Estimator,
    },
    /// (ε, δ)-differential privacy (SafePub): a β-sample of the records, generalized, with every
    /// class of fewer than k sampled records suppressed ([`dp`], `docs/definitions.md` §3.9).
    DifferentialPrivacy(DpModel),
}

/// Whether a property is inherited by generalizations, for the two ways of transforming data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Monotonicity {
    /// Fulfilled stays fulfilled under further generalization (without suppression).
    pub generalization: bool,
    /// Fulfilled stays fulfilled under further generalization when suppression is applied.
    pub suppression: bool,
}

/// Every model name of the text syntax with its parameters, for error messages.
pub(crate) const MODEL_SYNTAX: &[&str] = &[
    "k-anonymity(k=…)",
    "distinct-l-diversity(attribute=…,l=…)",
    "entropy-l-diversity(attribute=…,l=…[,estimator=shannon|grassberger])",
    "recursive-l-diversity(attribute=…,c=…,l=…)",
    "t-closeness(attribute=…,t=…,distance=equal|ordered|hierarchical)",
    "delta-disclosure(attribute=…,delta=…)",
    "basic-beta-likeness(attribute=…,beta=…)",
    "enhanced-beta-likeness(attribute=…,beta=…)",
    "average-risk(threshold=…[,highest=…,records_at_risk=…])",
    "sample-uniqueness(threshold=…)",
    "population-uniqueness(threshold=…[,model=pitman|zayatz|snb|dankar])",
    "k-map(k=…[,alpha=…,estimator=poisson|zero-truncated-poisson])",
    "delta-presence(delta_min=…,delta_max=…)",
    "differential-privacy(epsilon=…,delta=…[,search_share=…,steps=…])",
];

/// Largest ℓ of entropy ℓ-diversity: its classes need ⌈ℓ⌉ records, a 32-bit count.
pub const MAX_ENTROPY_L: f64 = u32::MAX as f64;

impl PrivacyModel {
    /// Parses the compact text syntax, e.g. `t-closeness(attribute=disease,t=0.2,distance=ordered)`;
    /// the inverse of `Display`: splits the text into the name and its `key=value` pairs
    /// (values containing `,`, `(`, `)`, `=` or `"` in double quotes), then
    /// [`PrivacyModel::from_params`]. Syntax errors name the model as a whole (the empty path).
    pub fn parse(text: &str) -> Result<PrivacyModel> {
        syntax::parse(text)
    }

    /// Builds and validates a model from its name and parameters, e.g. `("t-closeness",
    /// [("attribute", "a,b"), ("t", "0.2"), ("distance", "ordered")])`; values need no quoting.
    /// Names and keys are case-insensitive; surrounding whitespace is ignored in them and in every
    /// value but `attribute` (a column name, taken as given). Unknown models, unknown, repeated or
    /// missing keys, malformed and out-of-range values are errors that list what is expected;
    /// their field is the parameter (`k`), or the empty path for an unknown model (see
    /// [`EngineError::InvalidConfig`]).
    pub fn from_params(name: &str, params: &[(String, String)]) -> Result<PrivacyModel> {
        syntax::from_params(name, params)
    }

    /// Model name of the text syntax, e.g. `k-anonymity` or `entropy-l-diversity`.
    pub fn name(&self) -> &'static str {
        match self {
            PrivacyModel::KAnonymity { .. } => "k-anonymity",
            PrivacyModel::DistinctLDiversity { .. } => "distinct-l-diversity",
            PrivacyModel::EntropyLDiversity { .. } => "entropy-l-diversity",
            PrivacyModel::RecursiveCLDiversity { .. } => "recursive-l-diversity",
            PrivacyModel::TCloseness { .. } => "t-closeness",
            PrivacyModel::DeltaDisclosure { .. } => "delta-disclosure",
            PrivacyModel::BasicBetaLikeness { .. } => "basic-beta-likeness",
            PrivacyModel::EnhancedBetaLikeness { .. } => "enhanced-beta-likeness",
            PrivacyModel::AverageRisk { .. } => "average-risk",
            PrivacyModel::SampleUniqueness { .. } => "sample-uniqueness",
            PrivacyModel::PopulationUniqueness { .. } => "population-uniqueness",
            PrivacyModel::KMap { .. } | PrivacyModel::KMapSubset { .. } => "k-map",
            PrivacyModel::DeltaPresence { .. } => "delta-presence",
            PrivacyModel::DifferentialPrivacy(_) => "differential-privacy",
        }
    }

    /// The sensitive attribute the model protects, if any.
    pub fn attribute(&self) -> Option<&str> {
        match self {
            PrivacyModel::KAnonymity { .. }
            | PrivacyModel::AverageRisk { .. }
            | PrivacyModel::SampleUniqueness { .. }
            | PrivacyModel::KMap { .. }
            | PrivacyModel::KMapSubset { .. }
            | PrivacyModel::DeltaPresence { .. }
            | PrivacyModel::DifferentialPrivacy(_)
            | PrivacyModel::PopulationUniqueness { .. } => None,
            PrivacyModel::DistinctLDiversity { attribute, .. }
            | PrivacyModel::EntropyLDiversity { attribute, .. }
            | PrivacyModel::RecursiveCLDiversity { attribute, .. }
            | PrivacyModel::TCloseness { attribute, .. }
            | PrivacyModel::DeltaDisclosure { attribute, .. }
            | PrivacyModel::BasicBetaLikeness { attribute, .. }
            | PrivacyModel::EnhancedBetaLikeness { attribute, .. } => Some(attribute),
        }
    }

    /// Monotonicity of the model (`docs/definitions.md` §3.3; Grassberger entropy and the
    /// relaxed average risk differ from ARX, see the module docs).
    pub fn monotonicity(&self) -> Monotonicity {
        let (generalization, suppression) = match self {
            PrivacyModel::KAnonymity { .. }
            | PrivacyModel::KMap { .. }
            | PrivacyModel::KMapSubset { .. }
            | PrivacyModel::DistinctLDiversity { .. }
            | PrivacyModel::SampleUniqueness { .. } => (true, true),
            PrivacyModel::AverageRisk { highest, .. } => (true, highest.is_none()),
            PrivacyModel::EntropyLDiversity { estimator, .. } => {
                (*estimator == EntropyEstimator::Shannon, false)
            }
            PrivacyModel::RecursiveCLDiversity { .. }
            | PrivacyModel::TCloseness { .. }
            | PrivacyModel::DeltaPresence { .. }
            | PrivacyModel::BasicBetaLikeness { .. }
            | PrivacyModel::EnhancedBetaLikeness { .. } => (true, false),
            PrivacyModel::DeltaDisclosure { .. }
            | PrivacyModel::PopulationUniqueness { .. }
            | PrivacyModel::DifferentialPrivacy(_) => (false, false),
        };
        Monotonicity {
            generalization,
            suppression,
        }
    }

    /// The minimal class size every published class must have under this model, if it implies one.
    pub fn min_class_size(&self) -> Option<u32> {
        match self {
            PrivacyModel::KAnonymity { k } => Some(*k),
            PrivacyModel::DistinctLDiversity { l, .. }
            | PrivacyModel::RecursiveCLDiversity { l, .. } => Some(*l),
            PrivacyModel::EntropyLDiversity { l, .. } => Some(ceil_u32(*l)),
            _ => None,
        }
    }

    /// Checks parameter ranges ([`MAX_ENTROPY_L`] for entropy ℓ-diversity); errors name the
    /// parameter (`t`, `attribute`, …), relative to the model (see
    /// [`EngineError::InvalidConfig`]).
    ///
    /// Long because it is one match arm per privacy model and parameter, each a range check.
    pub fn validate(&self) -> Result<()> {
        let err = |name: &str, message: String| Err(EngineError::config(name, message));
        if let Some(attribute) = self.attribute()
            && attribute.is_empty()
        {
            return err("attribute", "the sensitive attribute must be named".into());
        }
        match self {
            PrivacyModel::KAnonymity { k } if *k < 1 => {
                err("k", format!("k must be at least 1, got {k}"))
            }
            PrivacyModel::DistinctLDiversity { l, .. } if *l < 1 => {
                err("l", format!("l must be at least 1, got {l}"))
            }
            PrivacyModel::EntropyLDiversity { l, .. } if !(1.0..=MAX_ENTROPY_L).contains(l) => err(
                "l",
                format!("l must be a number from 1 to {MAX_ENTROPY_L}, got {l:?}"),
            ),
            PrivacyModel::RecursiveCLDiversity { c, .. } if !(c.is_finite() && *c > 0.0) => {
                err("c", format!("c must be a number above 0, got {c}"))
            }
            PrivacyModel::RecursiveCLDiversity { l, .. } if *l < 1 => {
                err("l", format!("l must be at least 1, got {l}"))
            }
            PrivacyModel::TCloseness { t, .. } if !(0.0..=1.0).contains(t) => {
                err("t", format!("t must lie in [0, 1], got {t}"))
            }
            PrivacyModel::DeltaDisclosure { delta, .. } if !(delta.is_finite() && *delta > 0.0) => {
                err(
                    "delta",
                    format!("delta must be a number above 0, got {delta}"),
                )
            }
            PrivacyModel::BasicBetaLikeness { beta, .. }
            | PrivacyModel::EnhancedBetaLikeness { beta, .. }
                if !(beta.is_finite() && *beta > 0.0) =>
            {
                err("beta", format!("beta must be a number above 0, got {beta}"))
            }
            PrivacyModel::AverageRisk {
                threshold,
                highest,
                records_at_risk,
            } => {
                check_share("threshold", *threshold, false)?;
                match (highest, records_at_risk) {
                    (None, None) => Ok(()),
                    (Some(h), Some(r)) => {
                        check_share("highest", *h, false)?;
                        check_share("records_at_risk", *r, true)
                    }
                    (Some(_), None) => err(
                        "records_at_risk",
                        "the relaxed average-risk model needs both highest and records_at_risk"
                            .into(),
                    ),
                    (None, Some(_)) => err(
                        "highest",
                        "the relaxed average-risk model needs both highest and records_at_risk"
                            .into(),
                    ),
                }
            }
            PrivacyModel::SampleUniqueness { threshold } => {
                check_share("threshold", *threshold, false)
            }
            PrivacyModel::PopulationUniqueness { threshold, .. } => {
                check_share("threshold", *threshold, true)
            }
            PrivacyModel::KMap { k, .. } if *k < 1 => {
                err("k", format!("k must be at least 1, got {k}"))
            }
            PrivacyModel::KMap { alpha, .. } => check_share("alpha", *alpha, true),
            PrivacyModel::KMapSubset { k } if *k < 1 => {
                err("k", format!("k must be at least 1, got {k}"))
            }
            PrivacyModel::DeltaPresence {
                delta_min,
                delta_max,
            } => {
                check_share("delta_min", *delta_min, true)?;
                check_share("delta_max", *delta_max, true)?;
                if delta_min > delta_max {
                    return err(
                        "delta_min",
                        format!(
                            "delta_min must be at most delta_max, got {delta_min} > {delta_max}"
                        ),
                    );
                }
                Ok(())
            }
            PrivacyModel::DifferentialPrivacy(dp) => dp.validate(),
            _ => Ok(()),
        }
    }
}

/// ⌈l⌉ as an integer (l ≥ 1 and finite after validation; saturates otherwise).
fn ceil_u32(l: f64) -> u32 {
    let c = l.ceil();
    if c.is_nan() || c < 1.0 {
        1
    } else if c >= u32::MAX as f64 {
        u32::MAX
    } else {
        c as u32
    }
}

/// Checks that the share `name` lies in (0, 1] (or [0, 1] with `zero_ok`).
fn check_share(name: &str, value: f64, zero_ok: bool) -> Result<()> {
    let ok = if zero_ok {
        (0.0..=1.0).contains(&value)
    } else {
        value > 0.0 && value <= 1.0
    };
    if ok {
        Ok(())
    } else {
        let range = if zero_ok { "[0, 1]" } else { "(0, 1]" };
        Err(EngineError::config(
            name,
            format!("{name} must lie in {range}, got {value}"),
        ))
    }
}

impl fmt::Display for PrivacyModel {
    /// Writes the text syntax accepted by [`PrivacyModel::parse`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        syntax::write(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;
    use crate::Checker;

    #[test]
    fn names_attributes_and_kinds() {
        let all = sample_models();
        let names: Vec<&str> = all.iter().map(PrivacyModel::name).collect();
        assert_eq!(
            names,
            [
                "k-anonymity",
                "distinct-l-diversity",
                "entropy-l-diversity",
                "entropy-l-diversity",
                "recursive-l-diversity",
                "t-closeness",
                "t-closeness",
                "t-closeness",
                "delta-disclosure",
                "basic-beta-likeness",
                "enhanced-beta-likeness",
                "average-risk",
                "average-risk",
                "sample-uniqueness",
                "population-uniqueness"
            ]
        );
        for m in &all {
            assert_eq!(
                m.attribute().is_none(),
                matches!(
                    m,
                    PrivacyModel::KAnonymity { .. }
                        | PrivacyModel::AverageRisk { .. }
                        | PrivacyModel::SampleUniqueness { .. }
                        | PrivacyModel::PopulationUniqueness { .. }
                )
            );
        }
    }

    #[test]
    fn monotonicity_and_min_class_sizes_follow_the_reference() {
        let yes_yes = Monotonicity {
            generalization: true,
            suppression: true,
        };
        let gen_only = Monotonicity {
            generalization: true,
            suppression: false,
        };
        let none = Monotonicity {
            generalization: false,
            suppression: false,
        };
        let expected = [
            (yes_yes, Some(3)),  // k-anonymity(k=3)
            (yes_yes, Some(2)),  // distinct l=2
            (gen_only, Some(3)), // entropy l=2.5 shannon
            (none, Some(2)),     // entropy l=2 grassberger
            (gen_only, Some(3)), // recursive l=3
            (gen_only, None),
            (gen_only, None),
            (gen_only, None),
            (none, None), // delta
            (gen_only, None),
            (gen_only, None),
            (yes_yes, None),
            (gen_only, None), // relaxed average risk
            (yes_yes, None),
            (none, None), // population uniqueness (every estimator)
        ];
        for (m, (mono, min)) in sample_models().iter().zip(expected) {
            assert_eq!(m.monotonicity(), mono, "{m}");
            assert_eq!(m.min_class_size(), min, "{m}");
        }
        let e = PrivacyModel::EntropyLDiversity {
            attribute: "s".into(),
            l: 3.0,
            estimator: EntropyEstimator::Shannon,
        };
        assert_eq!(e.min_class_size(), Some(3));
    }

    #[test]
    fn every_parameter_is_validated_with_its_field() {
        let a = || "s".to_string();
        let cases: Vec<(PrivacyModel, &str)> = vec![
            (PrivacyModel::KAnonymity { k: 0 }, "privacy[3].k"),
            (
                PrivacyModel::DistinctLDiversity {
                    attribute: a(),
                    l: 0,
                },
                "privacy[3].l",
            ),
            (
                PrivacyModel::DistinctLDiversity {
                    attribute: String::new(),
                    l: 2,
                },
                "privacy[3].attribute",
            ),
            (
                PrivacyModel::EntropyLDiversity {
                    attribute: a(),
                    l: 0.5,
                    estimator: EntropyEstimator::Shannon,
                },
                "privacy[3].l",
            ),
            (
                PrivacyModel::EntropyLDiversity {
                    attribute: a(),
                    l: 1e300,
                    estimator: EntropyEstimator::Shannon,
                },
                "privacy[3].l",
            ),
            (
                PrivacyModel::EntropyLDiversity {
                    attribute: a(),
                    l: f64::NAN,
                    estimator: EntropyEstimator::Grassberger,
                },
                "privacy[3].l",
            ),
            (
                PrivacyModel::RecursiveCLDiversity {
                    attribute: a(),
                    c: 0.0,
                    l: 2,
                },
                "privacy[3].c",
            ),
            (
                PrivacyModel::RecursiveCLDiversity {
                    attribute: a(),
                    c: 2.0,
                    l: 0,
                },
                "privacy[3].l",
            ),
            (
                PrivacyModel::TCloseness {
                    attribute: a(),
                    t: 1.5,
                    distance: TClosenessDistance::Equal,
                },
                "privacy[3].t",
            ),
            (
                PrivacyModel::TCloseness {
                    attribute: a(),
                    t: -0.1,
                    distance: TClosenessDistance::Ordered,
                },
                "privacy[3].t",
            ),
            (
                PrivacyModel::DeltaDisclosure {
                    attribute: a(),
                    delta: 0.0,
                },
                "privacy[3].delta",
            ),
            (
                PrivacyModel::BasicBetaLikeness {
                    attribute: a(),
                    beta: -1.0,
                },
                "privacy[3].beta",
            ),
            (
                PrivacyModel::EnhancedBetaLikeness {
                    attribute: a(),
                    beta: f64::INFINITY,
                },
                "privacy[3].beta",
            ),
            (
                PrivacyModel::AverageRisk {
                    threshold: 0.0,
                    highest: None,
                    records_at_risk: None,
                },
                "privacy[3].threshold",
            ),
            (
                PrivacyModel::AverageRisk {
                    threshold: 1.1,
                    highest: None,
                    records_at_risk: None,
                },
                "privacy[3].threshold",
            ),
            (
                PrivacyModel::AverageRisk {
                    threshold: 0.1,
                    highest: Some(0.0),
                    records_at_risk: Some(0.1),
                },
                "privacy[3].highest",
            ),
            (
                PrivacyModel::AverageRisk {
                    threshold: 0.1,
                    highest: Some(0.2),
                    records_at_risk: Some(1.5),
                },
                "privacy[3].records_at_risk",
            ),
            (
                PrivacyModel::AverageRisk {
                    threshold: 0.1,
                    highest: Some(0.2),
                    records_at_risk: None,
                },
                "privacy[3].records_at_risk",
            ),
            (
                PrivacyModel::AverageRisk {
                    threshold: 0.1,
                    highest: None,
                    records_at_risk: Some(0.2),
                },
                "privacy[3].highest",
            ),
            (
                PrivacyModel::SampleUniqueness { threshold: 0.0 },
                "privacy[3].threshold",
            ),
            (
                PrivacyModel::SampleUniqueness {
                    threshold: f64::NAN,
                },
                "privacy[3].threshold",
            ),
        ];
        for (model, field) in cases {
            // Errors name the parameter; the caller puts the model's position in front.
            match model.validate().map_err(|e| e.within("privacy[3]")) {
                Err(EngineError::InvalidConfig { field: f, .. }) => {
                    assert_eq!(f, field, "{model:?}")
                }
                other => panic!("{model:?}: expected an error for {field}, got {other:?}"),
            }
        }
        for m in sample_models() {
            assert_eq!(m.validate(), Ok(()), "{m}");
        }
        // Boundaries are accepted.
        for m in [
            PrivacyModel::TCloseness {
                attribute: a(),
                t: 0.0,
                distance: TClosenessDistance::Equal,
            },
            PrivacyModel::TCloseness {
                attribute: a(),
                t: 1.0,
                distance: TClosenessDistance::Equal,
            },
            PrivacyModel::AverageRisk {
                threshold: 1.0,
                highest: Some(1.0),
                records_at_risk: Some(0.0),
            },
            PrivacyModel::EntropyLDiversity {
                attribute: a(),
                l: 1.0,
                estimator: EntropyEstimator::Shannon,
            },
        ] {
            assert_eq!(m.validate(), Ok(()), "{m}");
        }
    }

    #[test]
    fn problem_reports_invalid_parameters_by_index() {
        let t = table(&["g", "s"], &["a;x", "b;y"]);
        let err = problem(
            t,
            &[("g", "a;*\nb;*")],
            &[("s", None)],
            vec![
                PrivacyModel::KAnonymity { k: 1 },
                PrivacyModel::TCloseness {
                    attribute: "s".into(),
                    t: 2.0,
                    distance: TClosenessDistance::Equal,
                },
            ],
            0.0,
        )
        .unwrap_err();
        assert!(
            matches!(&err, EngineError::InvalidConfig { field, .. } if field == "privacy[1].t"),
            "{err}"
        );
    }

    #[test]
    fn entropy_min_class_size_is_enforced_through_ceil_l() {
        // Classes of sizes 2 and 3; entropy-2.5 needs ⌈2.5⌉ = 3 records (and 3 values).
        let t = table(&["g", "s"], &["a;x", "a;y", "b;x", "b;y", "b;z"]);
        let p = problem(
            t,
            &[("g", "a;*\nb;*")],
            &[("s", None)],
            vec![PrivacyModel::EntropyLDiversity {
                attribute: "s".into(),
                l: 2.5,
                estimator: EntropyEstimator::Shannon,
            }],
            0.0,
        )
        .unwrap();
        assert_eq!(p.min_class_size(), 3);
        let r = Checker::new(&p).check(&[0]);
        assert_eq!(r.suppressed, 2);
        assert!(!r.min_class_size_ok);
    }
}
