//! The privacy models compiled against the data: what a class-based model sees of its
//! attribute over the whole table, the compiled class, sample and presence models, and the
//! per-class dispatch to the models' own files.

use super::ldiversity::{self, EntropyL};
use super::likeness::{BetaLikeness, DeltaDisclosure};
use super::risk::PreparedSampleModel;
use super::tcloseness::{EqualDistance, HierarchicalDistance, OrderedDistance};
use super::{PrivacyModel, TClosenessDistance};
use crate::error::{EngineError, Result};
use crate::hierarchy::EncodedHierarchy;

/// What a class-based model sees of the sensitive attribute over the whole table.
#[derive(Debug, Clone)]
pub struct SensitiveDomain {
    /// Column name.
    pub column: String,
    /// Frequency of every value code in the whole table.
    pub global_counts: Vec<u32>,
    /// The values themselves (for ordered distances).
    pub values: Vec<String>,
    /// Number of records.
    pub n: usize,
}

impl SensitiveDomain {
    /// Heap size in bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.column.capacity()
            + self.global_counts.capacity() * 4
            + self.values.capacity() * std::mem::size_of::<String>()
            + self.values.iter().map(String::capacity).sum::<usize>()
    }
}

/// A class-based model compiled against the data.
#[derive(Debug, Clone)]
pub(crate) enum PreparedClassModel {
    /// Distinct ℓ-diversity on sensitive slot `slot`.
    DistinctL { slot: usize, l: u32 },
    /// Entropy ℓ-diversity.
    EntropyL { slot: usize, model: EntropyL },
    /// Recursive (c,ℓ)-diversity.
    RecursiveL { slot: usize, c: f64, l: u32 },
    /// t-closeness with equal ground distance.
    EqualT {
        slot: usize,
        t: f64,
        model: EqualDistance,
    },
    /// t-closeness with ordered ground distance.
    OrderedT {
        slot: usize,
        t: f64,
        model: OrderedDistance,
    },
    /// t-closeness with hierarchical ground distance.
    HierarchicalT {
        slot: usize,
        t: f64,
        model: HierarchicalDistance,
    },
    /// δ-disclosure privacy.
    Delta { slot: usize, model: DeltaDisclosure },
    /// Basic or enhanced β-likeness.
    Beta { slot: usize, model: BetaLikeness },
}

/// A privacy model compiled against the data, by kind of evaluation.
#[derive(Debug, Clone)]
pub(crate) enum PreparedModel {
    /// Enforced through the minimal class size only (k-anonymity).
    MinClassSize,
    /// Evaluated per class.
    Class(PreparedClassModel),
    /// Evaluated on the class-size distribution after the class-based models.
    Sample(PreparedSampleModel),
    /// Evaluated per class on its records in the research subset and in the whole table.
    Presence(PresenceModel),
}

/// A model that compares a class's records in the research subset (`count`, released) with its
/// records in the whole table (`pcount`, the population): δ-presence and k-map with the table
/// as the population (`docs/definitions.md` §3.2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum PresenceModel {
    /// δmin ≤ count / pcount ≤ δmax.
    DeltaPresence { min: f64, max: f64 },
    /// pcount ≥ k.
    KMap { k: u32 },
}

impl PresenceModel {
    /// Whether a class with `count` released records of `pcount` records in the table may be
    /// published (`count` ≥ 1).
    pub(crate) fn holds(self, count: u32, pcount: u32) -> bool {
        match self {
            PresenceModel::DeltaPresence { min, max } => {
                let delta = if pcount == 0 {
                    0.0
                } else {
                    count as f64 / pcount as f64
                };
                min <= delta && delta <= max
            }
            PresenceModel::KMap { k } => pcount >= k,
        }
    }

    /// Whether a class without released records fails the model: its δ = 0 is below δmin > 0
    /// and suppression cannot change that (there is nothing to suppress), so the transformation
    /// is not anonymous.
    pub(crate) fn rejects_unreleased(self) -> bool {
        matches!(self, PresenceModel::DeltaPresence { min, .. } if min > 0.0)
    }
}

impl PreparedModel {
    /// Compiles `model`; `slot` is the index of its sensitive attribute among the problem's
    /// tracked distributions, `domain` that attribute's global distribution, `hierarchy` its
    /// encoded hierarchy, if one was declared, and `population` the problem's population size.
    /// Errors name the model's parameter (`population` for a missing population model).
    ///
    /// Long because it is one match arm per privacy model, each a few lines (the sensitive
    /// attribute and t-closeness' distances are resolved by helpers).
    pub(crate) fn prepare(
        model: &PrivacyModel,
        slot: Option<usize>,
        domain: Option<&SensitiveDomain>,
        hierarchy: Option<&EncodedHierarchy>,
        population: Option<u64>,
    ) -> Result<PreparedModel> {
        let sensitive = || sensitive_attribute(model, slot, domain);
        Ok(match model {
            // Estimated k-map holds as k′-anonymity (k′ from the problem's rows and population).
            // Differential privacy's k is the problem's (from its sample, `Problem::dp`).
            PrivacyModel::KAnonymity { .. }
            | PrivacyModel::KMap { .. }
            | PrivacyModel::DifferentialPrivacy(_) => PreparedModel::MinClassSize,
            PrivacyModel::KMapSubset { k } => {
                PreparedModel::Presence(PresenceModel::KMap { k: *k })
            }
            PrivacyModel::DeltaPresence {
                delta_min,
                delta_max,
            } => PreparedModel::Presence(PresenceModel::DeltaPresence {
                min: *delta_min,
                max: *delta_max,
            }),
            PrivacyModel::DistinctLDiversity { l, .. } => {
                let (slot, _) = sensitive()?;
                PreparedModel::Class(PreparedClassModel::DistinctL { slot, l: *l })
            }
            PrivacyModel::EntropyLDiversity { l, estimator, .. } => {
                let (slot, _) = sensitive()?;
                PreparedModel::Class(PreparedClassModel::EntropyL {
                    slot,
                    model: EntropyL::new(*l, *estimator),
                })
            }
            PrivacyModel::RecursiveCLDiversity { c, l, .. } => {
                let (slot, _) = sensitive()?;
                PreparedModel::Class(PreparedClassModel::RecursiveL { slot, c: *c, l: *l })
            }
            PrivacyModel::TCloseness { t, distance, .. } => {
                let (slot, domain) = sensitive()?;
                PreparedModel::Class(PreparedClassModel::t_closeness(
                    slot, *t, *distance, domain, hierarchy,
                )?)
            }
            PrivacyModel::DeltaDisclosure { delta, .. } => {
                let (slot, domain) = sensitive()?;
                PreparedModel::Class(PreparedClassModel::Delta {
                    slot,
                    model: DeltaDisclosure::new(domain, *delta),
                })
            }
            PrivacyModel::BasicBetaLikeness { beta, .. }
            | PrivacyModel::EnhancedBetaLikeness { beta, .. } => {
                let (slot, domain) = sensitive()?;
                let enhanced = matches!(model, PrivacyModel::EnhancedBetaLikeness { .. });
                PreparedModel::Class(PreparedClassModel::Beta {
                    slot,
                    model: BetaLikeness::new(domain, *beta, enhanced),
                })
            }
            PrivacyModel::AverageRisk {
                threshold,
                highest,
                records_at_risk,
            } => PreparedModel::Sample(PreparedSampleModel::average_risk(
                *threshold,
                highest.zip(*records_at_risk),
            )),
            PrivacyModel::SampleUniqueness { threshold } => {
                PreparedModel::Sample(PreparedSampleModel::sample_uniqueness(*threshold))
            }
            PrivacyModel::PopulationUniqueness {
                threshold,
                estimator,
            } => {
                let Some(population) = population else {
                    return Err(EngineError::NeedsPopulation {
                        model: "population-uniqueness".into(),
                        position: String::new(),
                    });
                };
                PreparedModel::Sample(PreparedSampleModel::population_uniqueness(
                    *threshold, *estimator, population,
                ))
            }
        })
    }
}

/// The tracked slot and global distribution of `model`'s sensitive attribute; fails if the
/// model has none.
fn sensitive_attribute<'d>(
    model: &PrivacyModel,
    slot: Option<usize>,
    domain: Option<&'d SensitiveDomain>,
) -> Result<(usize, &'d SensitiveDomain)> {
    match (slot, domain) {
        (Some(s), Some(d)) => Ok((s, d)),
        _ => Err(EngineError::config(
            "attribute",
            format!("{} needs a sensitive attribute", model.name()),
        )),
    }
}

impl PreparedClassModel {
    /// t-closeness with threshold `t` on sensitive slot `slot`, by ground distance; the
    /// hierarchical distance needs the attribute's encoded `hierarchy`.
    fn t_closeness(
        slot: usize,
        t: f64,
        distance: TClosenessDistance,
        domain: &SensitiveDomain,
        hierarchy: Option<&EncodedHierarchy>,
    ) -> Result<PreparedClassModel> {
        Ok(match distance {
            TClosenessDistance::Equal => PreparedClassModel::EqualT {
                slot,
                t,
                model: EqualDistance::new(domain),
            },
            TClosenessDistance::Ordered => PreparedClassModel::OrderedT {
                slot,
                t,
                model: OrderedDistance::new(domain),
            },
            TClosenessDistance::Hierarchical => {
                let Some(h) = hierarchy else {
                    return Err(EngineError::config(
                        "distance",
                        format!(
                            "t-closeness with hierarchical distance needs a hierarchy \
                             for the sensitive attribute '{}'; declare one for it or \
                             use distance=equal or distance=ordered",
                            domain.column
                        ),
                    ));
                };
                PreparedClassModel::HierarchicalT {
                    slot,
                    t,
                    model: HierarchicalDistance::new(domain, h)?,
                }
            }
        })
    }

    /// Heap size of the model's tables in bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            PreparedClassModel::DistinctL { .. } | PreparedClassModel::RecursiveL { .. } => 0,
            PreparedClassModel::EntropyL { model, .. } => model.heap_bytes(),
            PreparedClassModel::EqualT { model, .. } => model.heap_bytes(),
            PreparedClassModel::OrderedT { model, .. } => model.heap_bytes(),
            PreparedClassModel::HierarchicalT { model, .. } => model.heap_bytes(),
            PreparedClassModel::Delta { model, .. } => model.heap_bytes(),
            PreparedClassModel::Beta { model, .. } => model.heap_bytes(),
        }
    }

    /// Relative cost of one evaluation; the check evaluates cheap models first.
    pub(crate) fn cost(&self) -> u8 {
        match self {
            PreparedClassModel::DistinctL { .. } => 0,
            PreparedClassModel::RecursiveL { .. }
            | PreparedClassModel::Delta { .. }
            | PreparedClassModel::Beta { .. } => 1,
            PreparedClassModel::EntropyL { .. } | PreparedClassModel::EqualT { .. } => 2,
            PreparedClassModel::OrderedT { .. } | PreparedClassModel::HierarchicalT { .. } => 3,
        }
    }

    /// True if the class (its size and, per tracked sensitive slot, its sorted histogram of value
    /// codes and frequencies) satisfies the model.
    pub(crate) fn holds(&self, count: u32, hists: &[(&[u32], &[u32])]) -> bool {
        match self {
            PreparedClassModel::DistinctL { slot, l } => hists[*slot].0.len() >= *l as usize,
            PreparedClassModel::EntropyL { slot, model } => {
                let (values, freqs) = hists[*slot];
                model.holds(count, values.len(), freqs)
            }
            PreparedClassModel::RecursiveL { slot, c, l } => {
                ldiversity::recursive_holds(*c, *l, count, hists[*slot].1)
            }
            PreparedClassModel::EqualT { slot, t, model } => {
                let (values, freqs) = hists[*slot];
                model.emd(count, values, freqs) <= *t
            }
            PreparedClassModel::OrderedT { slot, t, model } => {
                let (values, freqs) = hists[*slot];
                model.emd(count, values, freqs) <= *t
            }
            PreparedClassModel::HierarchicalT { slot, t, model } => {
                let (values, freqs) = hists[*slot];
                model.emd(count, values, freqs) <= *t
            }
            PreparedClassModel::Delta { slot, model } => {
                let (values, freqs) = hists[*slot];
                model.holds(count, values, freqs)
            }
            PreparedClassModel::Beta { slot, model } => {
                let (values, freqs) = hists[*slot];
                model.holds(count, values, freqs)
            }
        }
    }
}
