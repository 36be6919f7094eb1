//! The steps of [`Problem::new`](super::Problem::new) before and after the grouping: the
//! columns and their roles, the hierarchies and the lattice, the privacy models' checks (also
//! run by front ends before the data are read: [`ProblemConfig::validate_models`]), the tracked
//! distributions, and the compilation of the models against the data.

use std::collections::HashMap;

use super::grouping::{Groups, RowWeights};
use super::{MAX_QUASI_IDENTIFIERS, MicroColumn};
use crate::aggregate::PreparedAggregate;
use crate::config::{ProblemConfig, QuasiIdentifier};
use crate::data::Table;
use crate::data::frequency::Frequencies;
use crate::data::subset::{ResearchSubset, Subset};
use crate::error::{EngineError, Result};
use crate::hierarchy::EncodedHierarchy;
use crate::lattice::Lattice;
use crate::privacy::risk::PreparedSampleModel;
use crate::privacy::{
    PreparedClassModel, PreparedModel, PresenceModel, PrivacyModel, SensitiveDomain,
};
use crate::quality::PreparedQuality;

/// Step 1: the table columns of the quasi-identifiers and of the identifying attributes, after
/// checking that every named column exists and has one role.
pub(super) struct Roles {
    /// Column of each quasi-identifier, in the configuration's order.
    pub qi_columns: Vec<usize>,
    /// Columns removed from the output.
    pub identifying_columns: Vec<usize>,
}

impl Roles {
    pub(super) fn resolve(table: &Table, config: &ProblemConfig) -> Result<Roles> {
        if config.quasi_identifiers.is_empty() {
            return Err(EngineError::config(
                "attributes",
                "at least one quasi-identifier (a column with a hierarchy) is required",
            ));
        }
        if config.quasi_identifiers.len() > MAX_QUASI_IDENTIFIERS {
            return Err(EngineError::config(
                "attributes",
                format!(
                    "at most {MAX_QUASI_IDENTIFIERS} quasi-identifiers are supported, got {}",
                    config.quasi_identifiers.len()
                ),
            ));
        }
        let mut roles: HashMap<&str, &str> = HashMap::new();
        let named = (config.quasi_identifiers.iter())
            .map(|q| (q.column.as_str(), "quasi-identifying"))
            .chain(
                config
                    .sensitive
                    .iter()
                    .map(|s| (s.column.as_str(), "sensitive")),
            )
            .chain(
                config
                    .identifying
                    .iter()
                    .map(|c| (c.as_str(), "identifying")),
            )
            .chain((config.microaggregated.iter()).map(|m| (m.column.as_str(), "microaggregated")));
        let counts = [&config.count_column, &config.subset_count_column];
        for (name, role) in named {
            table.require_column(name, "attributes")?;
            if counts.iter().any(|c| c.as_deref() == Some(name)) {
                return Err(EngineError::config(
                    format!("attributes.{name}"),
                    format!(
                        "column '{name}' is a count column of the frequency table: it counts \
                         records and cannot be {role}"
                    ),
                ));
            }
            if let Some(prev) = roles.insert(name, role) {
                return Err(EngineError::config(
                    format!("attributes.{name}"),
                    format!("column '{name}' is declared both {prev} and {role}"),
                ));
            }
        }
        let columns = |names: &mut dyn Iterator<Item = &str>| -> Result<Vec<usize>> {
            names
                .map(|name| table.require_column(name, "attributes"))
                .collect()
        };
        Ok(Roles {
            qi_columns: columns(&mut config.quasi_identifiers.iter().map(|q| q.column.as_str()))?,
            identifying_columns: columns(&mut config.identifying.iter().map(String::as_str))?,
        })
    }
}

/// Step 2: the encoded hierarchies of the quasi-identifiers (checked to cover the data) and
/// the lattice of their level bounds. The raw tables are released afterwards.
pub(super) fn encode_hierarchies(
    table: &Table,
    config: &mut ProblemConfig,
    qi_columns: &[usize],
) -> Result<(Vec<EncodedHierarchy>, Lattice)> {
    let mut hierarchies = Vec::with_capacity(qi_columns.len());
    let mut min = Vec::with_capacity(qi_columns.len());
    let mut max = Vec::with_capacity(qi_columns.len());
    for (q, &col) in config.quasi_identifiers.iter().zip(qi_columns) {
        let (lo, hi) = level_bounds(q, q.hierarchy.height())?;
        let h = q
            .hierarchy
            .encode_at(table.column(col), q.data_level as usize)?;
        if !(q.weight.is_finite() && q.weight >= 0.0) {
            return Err(EngineError::config(
                format!("attributes.{}.weight", q.column),
                format!("expected a non-negative number, got {}", q.weight),
            ));
        }
        hierarchies.push(h);
        min.push(lo);
        max.push(hi);
    }
    // The encoded form holds every label of the data; the raw tables can be much larger than
    // the data (e.g. a 100,000-row ZIP hierarchy).
    for q in &mut config.quasi_identifiers {
        q.hierarchy.release_table();
    }
    Ok((hierarchies, Lattice::new(min, max)))
}

/// The lowest and highest level a quasi-identifier may take: from its `min_level`, lifted to
/// its `data_level` (the data have no values below it), to its `max_level`.
fn level_bounds(q: &QuasiIdentifier, height: usize) -> Result<(u8, u8)> {
    if height > crate::hierarchy::MAX_HEIGHT {
        return Err(EngineError::config(
            format!("attributes.{}.hierarchy", q.column),
            format!(
                "hierarchies may have at most {} levels, got {height}",
                crate::hierarchy::MAX_HEIGHT
            ),
        ));
    }
    let top = height.saturating_sub(1) as u8;
    if q.data_level > top {
        return Err(EngineError::config(
            format!("attributes.{}.data_level", q.column),
            format!(
                "the hierarchy has levels 0..={top}, got {}: the data must be labels of one of \
                 its levels",
                q.data_level
            ),
        ));
    }
    let lo = q.min_level.unwrap_or(0).max(q.data_level);
    let hi = q.max_level.unwrap_or(top);
    if hi > top {
        return Err(EngineError::config(
            format!("attributes.{}.max_level", q.column),
            format!("the hierarchy has levels 0..={top}, got {hi}"),
        ));
    }
    if q.data_level > hi {
        return Err(EngineError::config(
            format!("attributes.{}.data_level", q.column),
            format!(
                "data_level {} is above max_level {hi}: the data have no values below level {}",
                q.data_level, q.data_level
            ),
        ));
    }
    if lo > hi {
        return Err(EngineError::config(
            format!("attributes.{}.min_level", q.column),
            format!("min_level {lo} is above max_level {hi}"),
        ));
    }
    Ok((lo, hi))
}

impl ProblemConfig {
    /// Step 3 of [`Problem::new`](super::Problem::new), which needs no data: the privacy models
    /// (their parameters; a population model or research subset where a model needs one; a
    /// minimal class size within `n` records), the suppression limit and the quality model,
    /// for `n` released records, a population of `population` individuals and a research
    /// subset if `has_subset`. Front ends run it before reading the data.
    pub fn validate_models(
        &self,
        n: usize,
        population: Option<u64>,
        has_subset: bool,
    ) -> Result<()> {
        if self.privacy.is_empty() {
            return Err(EngineError::config(
                "privacy",
                "at least one privacy model is required, e.g. k-anonymity(k=5)",
            ));
        }
        if !(0.0..=1.0).contains(&self.suppression_limit) {
            return Err(EngineError::config(
                "suppression_limit",
                format!(
                    "expected a share of records in [0, 1], got {}",
                    self.suppression_limit
                ),
            ));
        }
        self.quality.validate().map_err(|e| e.within("quality"))?;
        super::dp::check_combinations(self)?;
        // Before the data are read (no subset yet): k must exist for n records. When the
        // problem is built, the sample is the subset and k was derived for the whole table.
        if let (Some((i, dp)), false) = (super::dp::dp_model(self)?, has_subset) {
            dp.derive(n)
                .map_err(|e| e.within(&format!("privacy[{i}]")))?;
        }
        self.validate_floors()?;
        for (i, model) in self.privacy.iter().enumerate() {
            let field = format!("privacy[{i}]");
            model.validate().map_err(|e| e.within(&field))?;
            if matches!(
                model,
                PrivacyModel::PopulationUniqueness { .. } | PrivacyModel::KMap { .. }
            ) && population.is_none()
            {
                return Err(EngineError::NeedsPopulation {
                    model: model.name().to_string(),
                    position: field,
                });
            }
            if matches!(
                model,
                PrivacyModel::KMapSubset { .. } | PrivacyModel::DeltaPresence { .. }
            ) && !has_subset
            {
                let model = match model {
                    PrivacyModel::KMapSubset { .. } => {
                        "k-map without alpha (the table as the population)"
                    }
                    _ => "delta-presence",
                };
                return Err(EngineError::NeedsResearchSubset {
                    model: model.to_string(),
                    position: field,
                });
            }
            if let Some(m) = model.min_class_size()
                && m as usize > n
            {
                return Err(EngineError::TooFewRecords {
                    field,
                    model: model.name().to_string(),
                    required: m,
                    rows: n,
                });
            }
        }
        Ok(())
    }
}

impl ProblemConfig {
    /// Refuses a quality model that measures against the original values (non-uniform entropy,
    /// normalized entropy, KL divergence) when a quasi-identifier is given at a `data_level`
    /// above 0: its values below that level are unknown.
    fn validate_floors(&self) -> Result<()> {
        let model = self.quality.model;
        if !model.needs_original_values() {
            return Ok(());
        }
        match self.quasi_identifiers.iter().find(|q| q.data_level > 0) {
            None => Ok(()),
            Some(q) => Err(EngineError::config(
                format!("attributes.{}.data_level", q.column),
                format!(
                    "the quality model '{}' measures against the original values, but column \
                     '{}' is given at level {}; use another quality model (e.g. loss)",
                    model.name(),
                    q.column,
                    q.data_level
                ),
            )),
        }
    }
}

/// The distributions a problem tracks per class ("slots"): the sensitive attributes its
/// privacy models protect and its microaggregated columns.
pub(super) struct Slots {
    /// Table column of each slot.
    pub columns: Vec<usize>,
    /// Per privacy model, its attribute's slot.
    pub models: Vec<Option<usize>>,
    /// The microaggregated columns with their compiled aggregates.
    pub aggregates: Vec<MicroColumn>,
}

impl Slots {
    /// Assigns the slots: a model's attribute must be a declared sensitive column.
    pub(super) fn assign(table: &Table, config: &ProblemConfig) -> Result<Slots> {
        let mut columns: Vec<usize> = Vec::new();
        let mut slot_of = |col: usize| match columns.iter().position(|&c| c == col) {
            Some(s) => s,
            None => {
                columns.push(col);
                columns.len() - 1
            }
        };
        let mut models = Vec::with_capacity(config.privacy.len());
        for (i, model) in config.privacy.iter().enumerate() {
            let field = format!("privacy[{i}]");
            let slot = match model.attribute() {
                None => None,
                Some(attr) => {
                    let col = table.require_column(attr, &format!("{field}.attribute"))?;
                    if !config.sensitive.iter().any(|s| s.column == attr) {
                        return Err(EngineError::config(
                            format!("{field}.attribute"),
                            format!(
                                "column '{attr}' must be declared sensitive to be protected by {}",
                                model.name()
                            ),
                        ));
                    }
                    Some(slot_of(col))
                }
            };
            models.push(slot);
        }
        // Microaggregated columns: their per-class distributions are tracked like a sensitive
        // attribute's, to aggregate them in the output.
        let mut aggregates = Vec::with_capacity(config.microaggregated.len());
        for m in &config.microaggregated {
            let col = table.require_column(&m.column, "attributes")?;
            let field = format!("attributes.{}.microaggregation", m.column);
            let prepared = PreparedAggregate::prepare(m, table.column(col), &field)?;
            aggregates.push(MicroColumn {
                column: col,
                slot: slot_of(col),
                prepared,
            });
        }
        Ok(Slots {
            columns,
            models,
            aggregates,
        })
    }
}

/// Value frequencies of the released records in column `c`.
pub(super) fn released_counts(table: &Table, weights: RowWeights<'_>, c: usize) -> Vec<u32> {
    let col = table.column(c);
    let mut counts = vec![0u32; col.dict.len()];
    match weights {
        RowWeights::Ones => {
            for code in col.codes.iter() {
                counts[code as usize] += 1;
            }
        }
        _ => {
            for (row, code) in col.codes.iter().enumerate() {
                counts[code as usize] += weights.released(row);
            }
        }
    }
    counts
}

/// Step 0: the counts of a frequency table (`config.count_column`), its rows without records
/// left out of the table (whose dictionaries are encoded anew, as if those rows had never been
/// read), and the research subset: a subset count column or yes/no column folded into the
/// frequencies, or the subset of an ordinary table. Record numbers cannot select records of a
/// frequency table (one row stands for several records).
pub(super) fn frequencies(
    table: Table,
    config: &ProblemConfig,
) -> Result<(Table, Option<Frequencies>, Option<Subset>)> {
    let Some(count_column) = &config.count_column else {
        if config.subset_count_column.is_some() {
            return Err(EngineError::config(
                "subset_count_column",
                "a subset count column needs a count column: give count_column too",
            ));
        }
        let subset = (config.research_subset.as_ref())
            .map(|spec| Subset::resolve(spec, &table).map_err(|e| e.within("research_subset")))
            .transpose()?;
        return Ok((table, None, subset));
    };
    match &config.research_subset {
        Some(ResearchSubset::Rows(_)) => {
            return Err(EngineError::config(
                "research_subset",
                "record numbers cannot select records of a frequency table (a row stands for \
                 several records): give subset_count_column, the released records of each row",
            ));
        }
        Some(_) if config.subset_count_column.is_some() => {
            return Err(EngineError::config(
                "research_subset",
                "give either research_subset or subset_count_column, not both",
            ));
        }
        _ => {}
    }
    let mut frequencies =
        Frequencies::resolve(&table, count_column, config.subset_count_column.as_deref())?;
    let table = if frequencies.counts().all(|c| c > 0) {
        table
    } else {
        let keep: Vec<bool> = frequencies.counts().map(|c| c > 0).collect();
        frequencies = frequencies.retain(&keep);
        table.retain_rows(&keep)
    };
    if let Some(spec) = &config.research_subset {
        let subset = Subset::resolve(spec, &table).map_err(|e| e.within("research_subset"))?;
        frequencies = frequencies.with_subset(&subset);
    }
    if frequencies.released_records() == 0 {
        return Err(EngineError::config(
            "subset_count_column",
            "the research subset selects no record: expected at least one",
        ));
    }
    Ok((table, Some(frequencies), None))
}

/// Step 5: the models compiled against the data.
pub(super) struct Compiled {
    /// The tracked distributions' domains, by slot.
    pub domains: Vec<SensitiveDomain>,
    /// The tracked attributes' hierarchies, by slot.
    pub sensitive_hierarchies: Vec<Option<EncodedHierarchy>>,
    /// Models decided per class, cheapest first.
    pub class_models: Vec<PreparedClassModel>,
    /// Models decided on the whole sample.
    pub sample_models: Vec<PreparedSampleModel>,
    /// Models decided against the population table (research subset).
    pub presence_models: Vec<PresenceModel>,
    /// The smallest class any model allows.
    pub min_class_size: u32,
    /// The quality model.
    pub quality: PreparedQuality,
}

/// What the compilation reads besides the configuration.
pub(super) struct CompileInput<'a> {
    pub table: &'a Table,
    pub slots: &'a Slots,
    pub n: usize,
    pub population: Option<u64>,
    pub weights: RowWeights<'a>,
    pub hierarchies: &'a [EncodedHierarchy],
    pub qi_value_counts: &'a [Vec<u32>],
    pub base: &'a Groups,
}

/// Step 5: compiles the privacy and quality models (releasing the sensitive attributes' raw
/// hierarchy tables once encoded).
pub(super) fn compile(config: &mut ProblemConfig, input: CompileInput<'_>) -> Result<Compiled> {
    let CompileInput {
        table,
        slots,
        n,
        population,
        weights,
        ..
    } = input;
    let domains: Vec<SensitiveDomain> = (slots.columns.iter())
        .map(|&c| {
            let col = table.column(c);
            SensitiveDomain {
                column: col.name.clone(),
                global_counts: released_counts(table, weights, c),
                values: col.dict.values().map(str::to_string).collect(),
                n,
            }
        })
        .collect();
    let sensitive_hierarchies = encode_sensitive_hierarchies(config, table, slots)?;
    let mut class_models = Vec::new();
    let mut sample_models = Vec::new();
    let mut presence_models = Vec::new();
    for (i, (model, slot)) in config.privacy.iter().zip(&slots.models).enumerate() {
        let domain = slot.map(|s| &domains[s]);
        let hierarchy = slot.and_then(|s| sensitive_hierarchies[s].as_ref());
        let prepared = PreparedModel::prepare(model, *slot, domain, hierarchy, population)
            .map_err(|e| e.within(&format!("privacy[{i}]")))?;
        match prepared {
            PreparedModel::MinClassSize => {}
            PreparedModel::Class(m) => class_models.push(m),
            PreparedModel::Sample(m) => sample_models.push(m),
            PreparedModel::Presence(m) => presence_models.push(m),
        }
    }
    // Cheap models first: a class is suppressed as soon as one model rejects it.
    class_models.sort_by_key(PreparedClassModel::cost);
    let min_class_size = min_class_size(&config.privacy, population, n);
    let weights: Vec<f64> = config.quasi_identifiers.iter().map(|q| q.weight).collect();
    let quality = PreparedQuality::prepare(
        config.quality,
        n,
        &weights,
        input.hierarchies,
        input.qi_value_counts,
        &input.base.codes,
        &input.base.counts,
    );
    Ok(Compiled {
        domains,
        sensitive_hierarchies,
        class_models,
        sample_models,
        presence_models,
        min_class_size,
        quality,
    })
}

/// The encoded hierarchy of each tracked attribute (by slot) that declares one; then releases
/// the raw tables: as for the quasi-identifiers, the encoded form is all that is used from
/// here on.
fn encode_sensitive_hierarchies(
    config: &mut ProblemConfig,
    table: &Table,
    slots: &Slots,
) -> Result<Vec<Option<EncodedHierarchy>>> {
    let mut sensitive_hierarchies = Vec::with_capacity(slots.columns.len());
    for &c in &slots.columns {
        let col = table.column(c);
        let decl = config.sensitive.iter().find(|s| s.column == col.name);
        sensitive_hierarchies.push(match decl.and_then(|d| d.hierarchy.as_ref()) {
            Some(h) => Some(h.encode(col)?),
            None => None,
        });
    }
    for s in &mut config.sensitive {
        if let Some(h) = &mut s.hierarchy {
            h.release_table();
        }
    }
    Ok(sensitive_hierarchies)
}

/// The smallest class any of the `privacy` models allows (at least 1); estimated k-map's is
/// its k′ for `n` records of the `population`.
fn min_class_size(privacy: &[PrivacyModel], population: Option<u64>, n: usize) -> u32 {
    privacy
        .iter()
        .filter_map(|m| match m {
            PrivacyModel::KMap {
                k,
                alpha,
                estimator,
            } => population
                .map(|pop| crate::population::k_prime(*k, *alpha, *estimator, n as u64, pop).k),
            other => other.min_class_size(),
        })
        .max()
        .unwrap_or(1)
}
