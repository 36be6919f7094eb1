//! A validated, encoded anonymization problem: the table, the encoded hierarchies, the lattice,
//! the *base groups* (distinct combinations of original quasi-identifier values, with counts and
//! sensitive-value histograms) and the compiled privacy and quality models.
//!
//! Everything that does not depend on a transformation is computed here once, so that the check
//! (`super::check`) only has to regroup base groups or earlier results.

use std::collections::HashMap;
use std::sync::Arc;

use crate::aggregate::PreparedAggregate;
use crate::config::{ProblemConfig, QuasiIdentifier};
use crate::data::Table;
use crate::data::subset::Subset;
use crate::error::{EngineError, Result};
use crate::hierarchy::EncodedHierarchy;
use crate::lattice::Lattice;
pub use crate::lattice::MAX_QUASI_IDENTIFIERS;
use crate::privacy::risk::PreparedSampleModel;
use crate::privacy::{
    PreparedClassModel, PreparedModel, PresenceModel, PrivacyModel, SensitiveDomain,
};
use crate::quality::{PreparedQuality, QualityConfig};

/// How far the privacy models' verdicts can be predicted in the lattice
/// (`docs/definitions.md` §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrivacyMonotonicity {
    /// Anonymous ⇒ every generalization is anonymous; not anonymous ⇒ every specialization is not.
    Full,
    /// Only the minimal class size (k-anonymity part) is monotone.
    Partial,
    /// Nothing can be predicted.
    None,
}

/// Per-class histograms of one sensitive attribute in CSR layout, values sorted ascending.
#[derive(Debug, Clone, Default)]
pub struct Histograms {
    /// `offsets[c]..offsets[c+1]` is the range of class c.
    pub offsets: Vec<u32>,
    /// Value codes.
    pub values: Vec<u32>,
    /// Frequencies.
    pub freqs: Vec<u32>,
}

impl Histograms {
    /// The histogram of class `c`: (value codes, frequencies).
    #[inline]
    pub fn get(&self, c: usize) -> (&[u32], &[u32]) {
        let (a, b) = (self.offsets[c] as usize, self.offsets[c + 1] as usize);
        (&self.values[a..b], &self.freqs[a..b])
    }
}

/// A list of groups (equivalence classes) of some transformation.
#[derive(Debug, Clone, Default)]
pub struct Groups {
    /// Generalized codes, row-major: `codes[g * q + i]` is the code of QI i at that transformation.
    pub codes: Vec<u32>,
    /// Records per group.
    pub counts: Vec<u32>,
    /// A representative base group (its original values generalize to this group).
    pub reps: Vec<u32>,
    /// With a research subset: records of the whole table per group (`counts` are the records
    /// in the subset); empty otherwise.
    pub pcounts: Vec<u32>,
    /// Per tracked sensitive attribute, the histograms of the groups.
    pub hists: Vec<Histograms>,
}

impl Groups {
    /// Number of groups.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// True if there are no groups.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Heap size in bytes (capacities of codes, counts, representatives and histograms).
    pub fn heap_bytes(&self) -> usize {
        (self.codes.capacity()
            + self.counts.capacity()
            + self.reps.capacity()
            + self.pcounts.capacity())
            * 4
            + self.hists.capacity() * std::mem::size_of::<Histograms>()
            + self
                .hists
                .iter()
                .map(|h| (h.offsets.capacity() + h.values.capacity() + h.freqs.capacity()) * 4)
                .sum::<usize>()
    }

    /// Releases spare capacity of every vector.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.codes.shrink_to_fit();
        self.counts.shrink_to_fit();
        self.reps.shrink_to_fit();
        self.pcounts.shrink_to_fit();
        for h in &mut self.hists {
            h.offsets.shrink_to_fit();
            h.values.shrink_to_fit();
            h.freqs.shrink_to_fit();
        }
    }

    /// Approximate heap size in 4-byte words.
    pub(crate) fn words(&self) -> usize {
        self.codes.len()
            + self.counts.len() * 2
            + self.pcounts.len()
            + self
                .hists
                .iter()
                .map(|h| h.offsets.len() + h.values.len() * 2)
                .sum::<usize>()
    }
}

/// Heap memory held by a [`Problem`], by part, in bytes (allocator overhead not counted).
///
/// Not included: the checker's per-thread snapshot caches, which live in a
/// [`Checker`](super::Checker) and are bounded by its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryUsage {
    /// The encoded table: the codes of every column (1, 2 or 4 bytes per row) and the
    /// dictionaries of distinct values.
    pub table: usize,
    /// Encoded hierarchies of the quasi-identifiers and of the sensitive attributes: level maps,
    /// level-to-level tables, labels, domain shares and leaf counts.
    pub hierarchies: usize,
    /// Tables per distinct value: frequencies of the quasi-identifiers' values, the quality
    /// models' per-level tables, the sensitive attributes' distributions and the compiled privacy
    /// models.
    pub value_tables: usize,
    /// The check's index: the base groups (codes, counts, representatives, histograms) and the
    /// base group of every record.
    pub index: usize,
}

impl MemoryUsage {
    /// The encoded data: table, hierarchies and per-value tables (everything but the index).
    pub fn encoded(&self) -> usize {
        self.table + self.hierarchies + self.value_tables
    }

    /// Everything the problem holds.
    pub fn total(&self) -> usize {
        self.encoded() + self.index
    }
}

/// An encoded, validated problem.
#[derive(Debug)]
pub struct Problem {
    table: Arc<Table>,
    /// Records of the problem: the table's rows, or the records of the selected base groups of a
    /// [restricted](Problem::restrict) problem.
    n: usize,
    config: ProblemConfig,
    qi_columns: Vec<usize>,
    identifying_columns: Vec<usize>,
    hierarchies: Vec<EncodedHierarchy>,
    lattice: Lattice,
    base: Groups,
    row_group: Vec<u32>,
    qi_value_counts: Vec<Vec<u32>>,
    /// Column index of each tracked sensitive distribution ("slot").
    slot_columns: Vec<usize>,
    domains: Vec<SensitiveDomain>,
    sensitive_hierarchies: Vec<Option<EncodedHierarchy>>,
    pub(crate) class_models: Vec<PreparedClassModel>,
    pub(crate) sample_models: Vec<PreparedSampleModel>,
    pub(crate) presence_models: Vec<PresenceModel>,
    /// The research subset (the released records), if the table is the population.
    subset: Option<Arc<Subset>>,
    min_class_size: u32,
    max_suppressed: usize,
    quality: PreparedQuality,
    monotonicity: PrivacyMonotonicity,
    aggregates: Vec<MicroColumn>,
    population: Option<u64>,
}

/// A microaggregated column of a problem.
#[derive(Debug, Clone)]
pub struct MicroColumn {
    /// Table column index.
    pub column: usize,
    /// Its tracked distribution ([`Groups::hists`] index).
    pub slot: usize,
    /// The compiled aggregate.
    pub prepared: PreparedAggregate,
}

impl Problem {
    /// Validates `config` against `table`, encodes hierarchies and precomputes the base groups.
    ///
    /// Steps:
    /// 1. resolve every named column and reject columns with two roles;
    /// 2. encode the hierarchies (coverage of the data) and check the level bounds;
    /// 3. validate the privacy models, their attributes and the suppression limit;
    /// 4. group the records by their original QI values (base groups) with histograms of every
    ///    sensitive attribute a model needs;
    /// 5. compile the privacy and quality models.
    ///
    /// Errors about the configuration name the field of `config` (`privacy[1].k`,
    /// `quality.gs_factor`, `attributes.age.max_level`, …; see [`EngineError::InvalidConfig`]).
    pub fn new(table: Table, mut config: ProblemConfig) -> Result<Problem> {
        // 1. Columns and roles.
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
        let named = config
            .quasi_identifiers
            .iter()
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
            .chain(
                config
                    .microaggregated
                    .iter()
                    .map(|m| (m.column.as_str(), "microaggregated")),
            );
        for (name, role) in named {
            table.require_column(name, "attributes")?;
            if let Some(prev) = roles.insert(name, role) {
                return Err(EngineError::config(
                    format!("attributes.{name}"),
                    format!("column '{name}' is declared both {prev} and {role}"),
                ));
            }
        }
        let qi_columns: Vec<usize> = config
            .quasi_identifiers
            .iter()
            .map(|q| table.require_column(&q.column, "attributes"))
            .collect::<Result<_>>()?;
        let identifying_columns: Vec<usize> = config
            .identifying
            .iter()
            .map(|c| table.require_column(c, "attributes"))
            .collect::<Result<_>>()?;

        // 2. Hierarchies and levels.
        let mut hierarchies = Vec::with_capacity(qi_columns.len());
        let mut min = Vec::with_capacity(qi_columns.len());
        let mut max = Vec::with_capacity(qi_columns.len());
        for (q, &col) in config.quasi_identifiers.iter().zip(&qi_columns) {
            let h = q.hierarchy.encode(table.column(col))?;
            let (lo, hi) = level_bounds(q, h.height())?;
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
        let lattice = Lattice::new(min, max);
        // The raw tables are no longer needed (the encoded form holds every label of the data);
        // release them, they can be much larger than the data (e.g. a 100,000-row ZIP hierarchy).
        for q in &mut config.quasi_identifiers {
            q.hierarchy.release_table();
        }

        // 3. Privacy models and suppression.
        if config.privacy.is_empty() {
            return Err(EngineError::config(
                "privacy",
                "at least one privacy model is required, e.g. k-anonymity(k=5)",
            ));
        }
        if !(0.0..=1.0).contains(&config.suppression_limit) {
            return Err(EngineError::config(
                "suppression_limit",
                format!(
                    "expected a share of records in [0, 1], got {}",
                    config.suppression_limit
                ),
            ));
        }
        config.quality.validate().map_err(|e| e.within("quality"))?;
        let subset = config
            .research_subset
            .as_ref()
            .map(|spec| Subset::resolve(spec, &table).map_err(|e| e.within("research_subset")))
            .transpose()?;
        // The records of the problem are the released ones: the subset, if there is one.
        let n = subset.as_ref().map_or(table.rows(), Subset::len);
        let population = config
            .population
            .map(|m| m.population_size(n))
            .transpose()
            .map_err(|e| e.within("population"))?;
        let mut slot_columns: Vec<usize> = Vec::new();
        let mut model_slots = Vec::with_capacity(config.privacy.len());
        for (i, model) in config.privacy.iter().enumerate() {
            let field = format!("privacy[{i}]");
            model.validate().map_err(|e| e.within(&field))?;
            if matches!(
                model,
                PrivacyModel::PopulationUniqueness { .. } | PrivacyModel::KMap { .. }
            ) && population.is_none()
            {
                return Err(EngineError::config(
                    "population",
                    format!(
                        "{} ({field}) needs a population model: give \"population\": \
                         {{\"size\": N}}, {{\"sampling_fraction\": f}} or {{\"region\": \"usa\"}} \
                         (CLI: --population-size, --sampling-fraction or --population-region)",
                        model.name()
                    ),
                ));
            }
            if matches!(
                model,
                PrivacyModel::KMapSubset { .. } | PrivacyModel::DeltaPresence { .. }
            ) && subset.is_none()
            {
                let what = match model {
                    PrivacyModel::KMapSubset { .. } => {
                        "k-map without alpha (the table as the population)"
                    }
                    _ => "delta-presence",
                };
                return Err(EngineError::config(
                    "research_subset",
                    format!(
                        "{what} ({field}) needs a research subset, the records to release: give \
                         \"research_subset\": {{\"column\": \"…\"}} or {{\"rows\": […]}} (CLI: \
                         --research-subset-column or --research-subset-rows){}",
                        if what.starts_with("k-map") {
                            "; or give alpha and a population model for the estimated k-map"
                        } else {
                            ""
                        }
                    ),
                ));
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
                    Some(match slot_columns.iter().position(|&c| c == col) {
                        Some(s) => s,
                        None => {
                            slot_columns.push(col);
                            slot_columns.len() - 1
                        }
                    })
                }
            };
            model_slots.push(slot);
        }

        // Microaggregated columns: their per-class distributions are tracked like a sensitive
        // attribute's, to aggregate them in the output.
        let mut aggregates = Vec::with_capacity(config.microaggregated.len());
        for m in &config.microaggregated {
            let col = table.require_column(&m.column, "attributes")?;
            let field = format!("attributes.{}.microaggregation", m.column);
            let prepared = PreparedAggregate::prepare(m, table.column(col), &field)?;
            let slot = match slot_columns.iter().position(|&c| c == col) {
                Some(s) => s,
                None => {
                    slot_columns.push(col);
                    slot_columns.len() - 1
                }
            };
            aggregates.push(MicroColumn {
                column: col,
                slot,
                prepared,
            });
        }

        // 4. Base groups.
        let q = qi_columns.len();
        let (base, row_group) = base_groups(&table, &qi_columns, &slot_columns, subset.as_ref());
        // Value frequencies of the released records.
        let released_counts = |c: usize| {
            let col = table.column(c);
            let mut counts = vec![0u32; col.dict.len()];
            match &subset {
                None => {
                    for code in col.codes.iter() {
                        counts[code as usize] += 1;
                    }
                }
                Some(s) => {
                    for (row, code) in col.codes.iter().enumerate() {
                        if s.contains(row) {
                            counts[code as usize] += 1;
                        }
                    }
                }
            }
            counts
        };
        let qi_value_counts: Vec<Vec<u32>> =
            qi_columns.iter().map(|&c| released_counts(c)).collect();
        debug_assert_eq!(base.codes.len(), base.len() * q);

        // 5. Models.
        let domains: Vec<SensitiveDomain> = slot_columns
            .iter()
            .map(|&c| {
                let col = table.column(c);
                let global_counts = released_counts(c);
                SensitiveDomain {
                    column: col.name.clone(),
                    global_counts,
                    values: col.dict.values().map(str::to_string).collect(),
                    n,
                }
            })
            .collect();
        let mut sensitive_hierarchies = Vec::with_capacity(slot_columns.len());
        for &c in &slot_columns {
            let col = table.column(c);
            let decl = config.sensitive.iter().find(|s| s.column == col.name);
            sensitive_hierarchies.push(match decl.and_then(|d| d.hierarchy.as_ref()) {
                Some(h) => Some(h.encode(col)?),
                None => None,
            });
        }
        // As for the quasi-identifiers, the encoded form is all that is used from here on.
        for s in &mut config.sensitive {
            if let Some(h) = &mut s.hierarchy {
                h.release_table();
            }
        }
        let mut class_models = Vec::new();
        let mut sample_models = Vec::new();
        let mut presence_models = Vec::new();
        for (i, (model, slot)) in config.privacy.iter().zip(&model_slots).enumerate() {
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
        let min_class_size = config
            .privacy
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
            .unwrap_or(1);
        let max_suppressed = (config.suppression_limit * n as f64).floor() as usize;
        let monotonicity = monotonicity_of(&config.privacy, max_suppressed, min_class_size);
        let weights: Vec<f64> = config.quasi_identifiers.iter().map(|q| q.weight).collect();
        let quality = PreparedQuality::prepare(
            config.quality,
            n,
            &weights,
            &hierarchies,
            &qi_value_counts,
            &base.codes,
            &base.counts,
        );
        Ok(Problem {
            table: Arc::new(table),
            n,
            config,
            qi_columns,
            identifying_columns,
            hierarchies,
            lattice,
            base,
            row_group,
            qi_value_counts,
            slot_columns,
            domains,
            sensitive_hierarchies,
            class_models,
            sample_models,
            presence_models,
            subset: subset.map(Arc::new),
            min_class_size,
            max_suppressed,
            quality,
            monotonicity,
            aggregates,
            population,
        })
    }

    /// The input table.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Number of records (of the selected base groups, for a [restricted](Problem::restrict)
    /// problem).
    pub fn rows(&self) -> usize {
        self.n
    }

    /// The same problem on the records of the base groups with `include[g]` set, with another
    /// suppression limit (and optionally another gs-factor): one step of local generalization
    /// (`docs/definitions.md` §3.6). Hierarchies, level bounds, domain shares and the privacy
    /// models' global distributions (t-closeness, δ-disclosure, β-likeness) stay those of the
    /// whole table; the quality models' value frequencies are those of the subset. A restricted
    /// problem has no row index ([`Problem::row_groups`] is empty): its transformations are
    /// checked and evaluated, while output is written from the whole problem.
    ///
    /// # Panics
    /// If `include` does not have one entry per base group, or the limits are outside [0, 1]
    /// (callers validate them).
    pub fn restrict(
        &self,
        include: &[bool],
        suppression_limit: f64,
        gs_factor: Option<f64>,
    ) -> Problem {
        assert_eq!(include.len(), self.base.len(), "one flag per base group");
        assert!((0.0..=1.0).contains(&suppression_limit));
        let q = self.qi_columns.len();
        let mut base = Groups {
            hists: vec![Histograms::default(); self.base.hists.len()],
            ..Groups::default()
        };
        for h in &mut base.hists {
            h.offsets.push(0);
        }
        let mut qi_value_counts: Vec<Vec<u32>> = self
            .qi_value_counts
            .iter()
            .map(|c| vec![0; c.len()])
            .collect();
        let mut n = 0usize;
        for (g, _) in include.iter().enumerate().filter(|(_, i)| **i) {
            let codes = &self.base.codes[g * q..(g + 1) * q];
            let count = self.base.counts[g];
            base.codes.extend_from_slice(codes);
            base.counts.push(count);
            if let Some(&p) = self.base.pcounts.get(g) {
                base.pcounts.push(p);
            }
            base.reps.push(base.reps.len() as u32);
            for (i, &c) in codes.iter().enumerate() {
                qi_value_counts[i][c as usize] += count;
            }
            for (slot, h) in self.base.hists.iter().enumerate() {
                let (values, freqs) = h.get(g);
                let out = &mut base.hists[slot];
                out.values.extend_from_slice(values);
                out.freqs.extend_from_slice(freqs);
                out.offsets.push(out.values.len() as u32);
            }
            n += count as usize;
        }
        let mut config = self.config.clone();
        config.suppression_limit = suppression_limit;
        if let Some(g) = gs_factor {
            config.quality.gs_factor = g;
        }
        let max_suppressed = (suppression_limit * n as f64).floor() as usize;
        let monotonicity = monotonicity_of(&config.privacy, max_suppressed, self.min_class_size);
        let weights: Vec<f64> = config.quasi_identifiers.iter().map(|q| q.weight).collect();
        let quality = PreparedQuality::prepare(
            config.quality,
            n,
            &weights,
            &self.hierarchies,
            &qi_value_counts,
            &base.codes,
            &base.counts,
        );
        Problem {
            table: Arc::clone(&self.table),
            n,
            config,
            qi_columns: self.qi_columns.clone(),
            identifying_columns: self.identifying_columns.clone(),
            hierarchies: self.hierarchies.clone(),
            lattice: self.lattice.clone(),
            base,
            row_group: Vec::new(),
            qi_value_counts,
            slot_columns: self.slot_columns.clone(),
            domains: self.domains.clone(),
            sensitive_hierarchies: self.sensitive_hierarchies.clone(),
            class_models: self.class_models.clone(),
            sample_models: self.sample_models.clone(),
            presence_models: self.presence_models.clone(),
            subset: self.subset.clone(),
            min_class_size: self.min_class_size,
            max_suppressed,
            quality,
            monotonicity,
            aggregates: self.aggregates.clone(),
            population: self.population,
        }
    }

    /// The configuration the problem was built from. The hierarchy tables of the
    /// quasi-identifiers and sensitive attributes are released after encoding (see
    /// [`Problem::hierarchies`] and [`Problem::sensitive_hierarchies`]).
    pub fn config(&self) -> &ProblemConfig {
        &self.config
    }

    /// The quality configuration.
    pub fn quality_config(&self) -> &QualityConfig {
        &self.config.quality
    }

    /// The quasi-identifiers, in lattice order.
    pub fn quasi_identifiers(&self) -> &[QuasiIdentifier] {
        &self.config.quasi_identifiers
    }

    /// Table column index of each quasi-identifier.
    pub fn qi_columns(&self) -> &[usize] {
        &self.qi_columns
    }

    /// Table column indices of the identifying attributes.
    pub fn identifying_columns(&self) -> &[usize] {
        &self.identifying_columns
    }

    /// Encoded hierarchies, one per quasi-identifier.
    pub fn hierarchies(&self) -> &[EncodedHierarchy] {
        &self.hierarchies
    }

    /// The solution space.
    pub fn lattice(&self) -> &Lattice {
        &self.lattice
    }

    /// Distinct combinations of original QI values (codes are dictionary codes of the columns).
    pub fn base_groups(&self) -> &Groups {
        &self.base
    }

    /// Base group of every record (empty for a [restricted](Problem::restrict) problem).
    pub fn row_groups(&self) -> &[u32] {
        &self.row_group
    }

    /// Frequency of every dictionary code of quasi-identifier `i` in the data.
    pub fn qi_value_counts(&self, i: usize) -> &[u32] {
        &self.qi_value_counts[i]
    }

    /// Table columns whose per-class distributions are tracked (slots).
    pub fn slot_columns(&self) -> &[usize] {
        &self.slot_columns
    }

    /// Global distribution of each tracked sensitive attribute.
    pub fn sensitive_domains(&self) -> &[SensitiveDomain] {
        &self.domains
    }

    /// Encoded hierarchy of each tracked sensitive attribute, if one was given.
    pub fn sensitive_hierarchies(&self) -> &[Option<EncodedHierarchy>] {
        &self.sensitive_hierarchies
    }

    /// The microaggregated columns.
    pub fn microaggregated(&self) -> &[MicroColumn] {
        &self.aggregates
    }

    /// The largest minimal class size implied by the privacy models (1 if none).
    pub fn min_class_size(&self) -> u32 {
        self.min_class_size
    }

    /// Absolute suppression limit: ⌊limit · n⌋ records.
    pub fn max_suppressed(&self) -> usize {
        self.max_suppressed
    }

    /// The research subset (the released records) when the table is the population; rows
    /// outside it are never written.
    pub fn subset(&self) -> Option<&Subset> {
        self.subset.as_deref()
    }

    /// Whether row `row` of the table is released (in the research subset, or there is none).
    #[inline]
    pub fn is_released(&self, row: usize) -> bool {
        self.subset.as_ref().is_none_or(|s| s.contains(row))
    }

    /// The population size N of the configured population model (validated: N ≥ rows).
    pub fn population(&self) -> Option<u64> {
        self.population
    }

    /// Monotonicity of the combined privacy models under this suppression limit.
    pub fn privacy_monotonicity(&self) -> PrivacyMonotonicity {
        self.monotonicity
    }

    pub(crate) fn prepared_quality(&self) -> &PreparedQuality {
        &self.quality
    }

    /// Heap memory held by the problem, by part.
    pub fn memory(&self) -> MemoryUsage {
        let vec_bytes = |v: &Vec<u32>| v.capacity() * 4;
        MemoryUsage {
            table: self.table.heap_bytes(),
            hierarchies: self
                .hierarchies
                .iter()
                .chain(self.sensitive_hierarchies.iter().flatten())
                .map(EncodedHierarchy::heap_bytes)
                .sum::<usize>(),
            value_tables: self.qi_value_counts.iter().map(vec_bytes).sum::<usize>()
                + self.prepared_quality().heap_bytes()
                + self
                    .domains
                    .iter()
                    .map(SensitiveDomain::heap_bytes)
                    .sum::<usize>()
                + self
                    .class_models
                    .iter()
                    .map(PreparedClassModel::heap_bytes)
                    .sum::<usize>(),
            index: self.base.heap_bytes()
                + vec_bytes(&self.row_group)
                + self.subset.as_ref().map_or(0, |s| s.heap_bytes()),
        }
    }
}

/// Monotonicity of the combined models under a suppression limit of `max_suppressed` records.
fn monotonicity_of(
    privacy: &[PrivacyModel],
    max_suppressed: usize,
    min_class_size: u32,
) -> PrivacyMonotonicity {
    let all_monotone = privacy.iter().all(|m| {
        let mono = m.monotonicity();
        mono.generalization && (max_suppressed == 0 || mono.suppression)
    });
    if all_monotone {
        PrivacyMonotonicity::Full
    } else if min_class_size > 1 {
        PrivacyMonotonicity::Partial
    } else {
        PrivacyMonotonicity::None
    }
}

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
    let top = (height - 1) as u8;
    let lo = q.min_level.unwrap_or(0);
    let hi = q.max_level.unwrap_or(top);
    if hi > top {
        return Err(EngineError::config(
            format!("attributes.{}.max_level", q.column),
            format!("the hierarchy has levels 0..={top}, got {hi}"),
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

/// FxHash-style mixing of a code sequence.
#[inline]
pub(crate) fn hash_codes(codes: &[u32]) -> u64 {
    let mut h: u64 = 0;
    for &c in codes {
        h = (h.rotate_left(5) ^ c as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    h ^ (h >> 29)
}

/// Groups the records by their original QI codes: one pass over the rows with an
/// open-addressing table of group numbers. Keys are the codes packed into one `u64` (mixed
/// radix over the dictionary sizes) when they fit, otherwise a hash of the codes, confirmed by
/// comparing the codes. No allocation per group: 4 bytes per slot plus 8 per group while
/// grouping, released afterwards.
/// Tables with at least this many rows are grouped by [`group_rows_partitioned`].
const PARTITIONED_MIN_ROWS: usize = 1 << 16;

/// Partitions of [`group_rows_partitioned`] (a power of two; fixed, so that the grouping does
/// not depend on the number of threads).
const PARTITION_BITS: u32 = 8;

/// The strides of the mixed-radix packing of one code per column (`sizes` = dictionary sizes)
/// into 64 bits, if the product of the sizes fits.
fn packing(sizes: &[u64]) -> Option<Vec<u64>> {
    let mut strides = vec![0u64; sizes.len()];
    let mut product: u64 = 1;
    for i in (0..sizes.len()).rev() {
        strides[i] = product;
        product = product.checked_mul(sizes[i])?;
    }
    Some(strides)
}

/// The multiplicative mixing of packed keys (and hashes) into table slots.
#[inline]
fn mix(key: u64) -> u64 {
    key.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Adds `stride` times the code of each row of `range` to `out` (one per row).
fn add_codes(
    out: &mut [u64],
    codes: &crate::data::Codes,
    range: std::ops::Range<usize>,
    stride: u64,
) {
    fn add<T: Copy + Into<u64>>(out: &mut [u64], codes: &[T], stride: u64) {
        for (k, &c) in out.iter_mut().zip(codes) {
            *k = k.wrapping_add(c.into() * stride);
        }
    }
    use crate::data::Codes;
    match codes {
        Codes::U8(v) => add(out, &v[range], stride),
        Codes::U16(v) => add(out, &v[range], stride),
        Codes::U32(v) => add(out, &v[range], stride),
    }
}

/// One pass over the rows with one open-addressing table: the groups (codes and
/// representatives; counts are left empty) in the order of their first row, and the group of
/// every row. Keys are packed with `strides` when given, else hashed (and compared).
fn group_rows(
    cols: &[&crate::data::Codes],
    strides: Option<&[u64]>,
    n: usize,
) -> (Groups, Vec<u32>) {
    const EMPTY: u32 = u32::MAX;
    let q = cols.len();
    let mut groups = Groups::default();
    let mut keys: Vec<u64> = Vec::new();
    let mut slots: Vec<u32> = vec![EMPTY; 1 << 12];
    let mut shift = 64 - slots.len().trailing_zeros();
    let mut row_group = Vec::with_capacity(n);
    let mut key = vec![0u32; q];
    for row in 0..n {
        for (k, codes) in key.iter_mut().zip(cols) {
            *k = codes.get(row);
        }
        let stored = match strides {
            Some(s) => key
                .iter()
                .zip(s)
                .fold(0u64, |k, (&c, &s)| k.wrapping_add(c as u64 * s)),
            None => hash_codes(&key),
        };
        let mask = slots.len() - 1;
        let mut slot = (mix(stored) >> shift) as usize & mask;
        let g = loop {
            let g = slots[slot];
            if g == EMPTY {
                let g = groups.reps.len() as u32;
                slots[slot] = g;
                keys.push(stored);
                groups.codes.extend_from_slice(&key);
                groups.reps.push(g);
                break g;
            }
            let gi = g as usize;
            if keys[gi] == stored
                && (strides.is_some() || groups.codes[gi * q..gi * q + q] == key[..])
            {
                break g;
            }
            slot = (slot + 1) & mask;
        };
        row_group.push(g);
        if groups.reps.len() * 2 > slots.len() {
            // Grow (load factor ≤ 1/2) and re-insert every group.
            slots = vec![EMPTY; slots.len() * 2];
            shift = 64 - slots.len().trailing_zeros();
            let mask = slots.len() - 1;
            for (gi, &k) in keys.iter().enumerate() {
                let mut slot = (mix(k) >> shift) as usize & mask;
                while slots[slot] != EMPTY {
                    slot = (slot + 1) & mask;
                }
                slots[slot] = gi as u32;
            }
        }
    }
    (groups, row_group)
}

/// [`group_rows`] for packed keys on the pool, with the same result: the rows are split into
/// 2^[`PARTITION_BITS`] partitions by the high bits of their mixed key (in row order), each
/// partition is grouped with a table of its own (small enough for the caches), and the groups
/// are numbered in the order of their first rows by one scan over the rows.
fn group_rows_partitioned(
    cols: &[&crate::data::Codes],
    strides: &[u64],
    n: usize,
) -> (Groups, Vec<u32>) {
    use rayon::prelude::*;
    const EMPTY: u32 = u32::MAX;
    const CHUNK: usize = 1 << 16;
    let parts = 1usize << PARTITION_BITS;
    let part_of = |key: u64| (mix(key) >> (64 - PARTITION_BITS)) as usize;
    // 1. Packed keys (column by column, a chunk of rows at a time), and per chunk of rows the
    //    rows of each partition (in row order).
    let mut keys = vec![0u64; n];
    let chunk_parts: Vec<Vec<Vec<u32>>> = keys
        .par_chunks_mut(CHUNK)
        .enumerate()
        .map(|(c, out)| {
            let range = c * CHUNK..c * CHUNK + out.len();
            for (codes, &stride) in cols.iter().zip(strides) {
                add_codes(out, codes, range.clone(), stride);
            }
            let mut by_part: Vec<Vec<u32>> = vec![Vec::new(); parts];
            for (row, &k) in range.zip(out.iter()) {
                by_part[part_of(k)].push(row as u32);
            }
            by_part
        })
        .collect();
    // 2. Per partition: its rows in row order, grouped with its own table: the local group of
    //    each of its rows, and whether a row is the first of its group.
    let grouped: Vec<(Vec<u32>, Vec<u32>, Vec<u32>)> = (0..parts)
        .into_par_iter()
        .map(|p| {
            let rows: Vec<u32> = chunk_parts
                .iter()
                .flat_map(|c| c[p].iter().copied())
                .collect();
            let mut slots: Vec<u32> = vec![EMPTY; (rows.len() * 2).next_power_of_two().max(16)];
            let mask = slots.len() - 1;
            let shift = 64 - slots.len().trailing_zeros();
            let mut local_keys: Vec<u64> = Vec::new();
            let mut firsts: Vec<u32> = Vec::new();
            let mut local = Vec::with_capacity(rows.len());
            for &row in &rows {
                let key = keys[row as usize];
                // The low bits of the mixed key select the slot (the high ones the partition).
                let mut slot = ((mix(key) << PARTITION_BITS) >> shift) as usize & mask;
                let g = loop {
                    let g = slots[slot];
                    if g == EMPTY {
                        let g = local_keys.len() as u32;
                        slots[slot] = g;
                        local_keys.push(key);
                        firsts.push(row);
                        break g;
                    }
                    if local_keys[g as usize] == key {
                        break g;
                    }
                    slot = (slot + 1) & mask;
                };
                local.push(g);
            }
            (rows, local, firsts)
        })
        .collect();
    drop(chunk_parts);
    // 3. Global numbers in the order of the first rows: a partition's first rows come in row
    //    order, so one scan over the rows hands out the numbers partition by partition.
    let mut first = vec![false; n];
    for (_, _, firsts) in &grouped {
        for &row in firsts {
            first[row as usize] = true;
        }
    }
    let q = cols.len();
    let mut global: Vec<Vec<u32>> = grouped
        .iter()
        .map(|(_, _, f)| Vec::with_capacity(f.len()))
        .collect();
    let total: usize = grouped.iter().map(|(_, _, f)| f.len()).sum();
    let mut first_rows: Vec<u32> = Vec::with_capacity(total);
    for (row, &is_first) in first.iter().enumerate() {
        if is_first {
            global[part_of(keys[row])].push(first_rows.len() as u32);
            first_rows.push(row as u32);
        }
    }
    // The codes of each group: those of its first row.
    let mut groups = Groups {
        codes: vec![0; total * q],
        reps: (0..total as u32).collect(),
        ..Groups::default()
    };
    groups
        .codes
        .par_chunks_mut(CHUNK * q)
        .zip(first_rows.par_chunks(CHUNK))
        .for_each(|(out, rows)| {
            for (codes, &row) in out.chunks_exact_mut(q).zip(rows) {
                for (c, col) in codes.iter_mut().zip(cols) {
                    *c = col.get(row as usize);
                }
            }
        });
    drop(first);
    drop(keys);
    // 4. The group of every row.
    let mut row_group = vec![0u32; n];
    for ((rows, local, _), ids) in grouped.iter().zip(&global) {
        for (&row, &l) in rows.iter().zip(local) {
            row_group[row as usize] = ids[l as usize];
        }
    }
    (groups, row_group)
}

/// Groups the rows by their quasi-identifier codes. With a research subset, `counts` and the
/// histograms count the subset's rows and `pcounts` every row (groups of rows outside the
/// subset only have count 0). Groups are numbered in the order of their first row, whichever
/// way they are found ([`group_rows_partitioned`] on large tables whose codes pack into 64 bits,
/// else one pass over the rows).
fn base_groups(
    table: &Table,
    qi_columns: &[usize],
    slot_columns: &[usize],
    subset: Option<&Subset>,
) -> (Groups, Vec<u32>) {
    let n = table.rows();
    let cols: Vec<&crate::data::Codes> =
        qi_columns.iter().map(|&c| &table.column(c).codes).collect();
    let sizes: Vec<u64> = qi_columns
        .iter()
        .map(|&c| table.column(c).dict.len().max(1) as u64)
        .collect();
    let (mut groups, row_group) = match packing(&sizes) {
        Some(strides) if n >= PARTITIONED_MIN_ROWS => group_rows_partitioned(&cols, &strides, n),
        strides => group_rows(&cols, strides.as_deref(), n),
    };
    // Records per group (of the subset, and of the whole table with a subset).
    groups.counts = vec![0; groups.reps.len()];
    match subset {
        None => {
            for &g in &row_group {
                groups.counts[g as usize] += 1;
            }
        }
        Some(s) => {
            groups.pcounts = vec![0; groups.reps.len()];
            for (row, &g) in row_group.iter().enumerate() {
                groups.pcounts[g as usize] += 1;
                groups.counts[g as usize] += u32::from(s.contains(row));
            }
        }
    }
    // Histograms: rows ordered by group (counting sort), then the values of each group counted.
    let groups_n = groups.counts.len();
    if !slot_columns.is_empty() {
        let mut starts: Vec<u32> = Vec::with_capacity(groups_n + 1);
        starts.push(0);
        for &c in &groups.counts {
            starts.push(starts.last().copied().unwrap_or(0) + c);
        }
        let mut order = vec![0u32; n];
        let mut fill = starts.clone();
        for (row, &g) in row_group.iter().enumerate() {
            if subset.is_some_and(|s| !s.contains(row)) {
                continue;
            }
            order[fill[g as usize] as usize] = row as u32;
            fill[g as usize] += 1;
        }
        drop(fill);
        let mut vals: Vec<u32> = Vec::new();
        for &sc in slot_columns {
            let codes = &table.column(sc).codes;
            let mut h = Histograms {
                offsets: Vec::with_capacity(groups_n + 1),
                ..Default::default()
            };
            h.offsets.push(0);
            for g in 0..groups_n {
                vals.clear();
                let (a, b) = (starts[g] as usize, starts[g + 1] as usize);
                vals.extend(order[a..b].iter().map(|&row| codes.get(row as usize)));
                vals.sort_unstable();
                for run in vals.chunk_by(|a, b| a == b) {
                    h.values.push(run[0]);
                    h.freqs.push(run.len() as u32);
                }
                h.offsets.push(h.values.len() as u32);
            }
            groups.hists.push(h);
        }
    }
    // The vectors grew by doubling; the index is kept for the problem's lifetime.
    groups.codes.shrink_to_fit();
    groups.counts.shrink_to_fit();
    groups.reps.shrink_to_fit();
    groups.pcounts.shrink_to_fit();
    for h in &mut groups.hists {
        h.values.shrink_to_fit();
        h.freqs.shrink_to_fit();
    }
    (groups, row_group)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{QuasiIdentifier, SensitiveAttribute};
    use crate::data::{Column, CsvOptions};
    use crate::hierarchy::Hierarchy;

    fn k_anonymity(qis: Vec<QuasiIdentifier>) -> ProblemConfig {
        ProblemConfig {
            quasi_identifiers: qis,
            privacy: vec![PrivacyModel::KAnonymity { k: 2 }],
            ..Default::default()
        }
    }

    #[test]
    fn memory_parts_add_up_on_a_small_problem() {
        let rows: Vec<Vec<String>> = [["x", "1"], ["y", "1"], ["x", "2"], ["z", "2"]]
            .iter()
            .map(|r| r.iter().map(|v| v.to_string()).collect())
            .collect();
        let table = Table::from_rows(&["a", "b"], &rows).unwrap();
        let text = "x;xy;*\nz;zwv;*\nw;zwv;*\nv;zwv;*\ny;xy;*";
        let h = Hierarchy::read_csv(text.as_bytes(), b';', "a").unwrap();
        let p = Problem::new(table, k_anonymity(vec![QuasiIdentifier::new("a", h)])).unwrap();
        let m = p.memory();
        // Per column: one byte per row, the values' bytes, 4 bytes per offset (values + 1), the
        // name; the hash index is gone.
        let a = 4 + 3 + 4 * 4 + 1;
        let b = 4 + 2 + 3 * 4 + 1;
        assert_eq!(m.table, 2 * std::mem::size_of::<Column>() + a + b);
        assert_eq!(m.hierarchies, p.hierarchies()[0].heap_bytes());
        // Value counts of the 3 values of a, plus the quality tables.
        assert_eq!(m.value_tables, 3 * 4 + p.prepared_quality().heap_bytes());
        // 3 base groups × (1 code + count + representative), 4 rows × their group.
        assert_eq!(m.index, 3 * 3 * 4 + 4 * 4);
        assert_eq!(m.encoded(), m.table + m.hierarchies + m.value_tables);
        assert_eq!(m.total(), m.encoded() + m.index);
    }

    #[test]
    fn errors_name_the_field_of_the_configuration() {
        let rows: Vec<Vec<String>> = [["x"], ["y"], ["x"], ["z"]]
            .iter()
            .map(|r| r.iter().map(|v| v.to_string()).collect())
            .collect();
        let table = || Table::from_rows(&["a"], &rows).unwrap();
        let qi = || {
            let h = Hierarchy::from_rows(
                ["x", "y", "z"]
                    .map(|v| vec![v.to_string(), "*".to_string()])
                    .to_vec(),
                "a",
            )
            .unwrap();
            vec![QuasiIdentifier::new("a", h)]
        };
        let field = |config: ProblemConfig| match Problem::new(table(), config).unwrap_err() {
            EngineError::InvalidConfig { field, .. } => field,
            other => panic!("expected an invalid value, got {other:?}"),
        };
        let mut config = k_anonymity(qi());
        config.quality.gs_factor = 1.5;
        assert_eq!(field(config), "quality.gs_factor");
        let mut config = k_anonymity(qi());
        config.privacy.push(PrivacyModel::KAnonymity { k: 0 });
        assert_eq!(field(config), "privacy[1].k");

        // Larger classes than records: its own variant, read like an invalid value.
        let mut config = k_anonymity(qi());
        config.privacy[0] = PrivacyModel::KAnonymity { k: 10 };
        let err = Problem::new(table(), config).unwrap_err();
        assert_eq!(
            err,
            EngineError::TooFewRecords {
                field: "privacy[0]".into(),
                model: "k-anonymity".into(),
                required: 10,
                rows: 4
            }
        );
        assert_eq!(
            err.to_string(),
            "invalid value for 'privacy[0]': k-anonymity requires classes of at least 10 records \
             but the data has only 4"
        );
    }

    /// Hierarchies accepted with duplicate values keep their duplicates after the problem has
    /// released their tables.
    #[test]
    fn accepted_duplicates_survive_the_released_tables() {
        let rows: Vec<Vec<String>> = [["x", "1"], ["y", "1"], ["x", "2"], ["y", "2"]]
            .iter()
            .map(|r| r.iter().map(|v| v.to_string()).collect())
            .collect();
        let table = Table::from_rows(&["a", "b"], &rows).unwrap();
        let last = crate::DuplicatePolicy::Last;
        let ha = Hierarchy::read_csv_with(&b"x;p;*\ny;p;*\nx;q;*"[..], b';', "a", last).unwrap();
        let hb = Hierarchy::read_csv_with(&b"1;*\n2;*\n1;1"[..], b';', "b", last).unwrap();
        let config = ProblemConfig {
            sensitive: vec![SensitiveAttribute {
                column: "b".into(),
                hierarchy: Some(hb),
            }],
            privacy: vec![
                PrivacyModel::KAnonymity { k: 2 },
                PrivacyModel::parse("t-closeness(attribute=b,t=0.9,distance=hierarchical)")
                    .unwrap(),
            ],
            quasi_identifiers: vec![QuasiIdentifier::new("a", ha)],
            ..Default::default()
        };
        let p = Problem::new(table, config).unwrap();
        let qi = &p.quasi_identifiers()[0].hierarchy;
        assert!(qi.rows().is_empty());
        assert_eq!(qi.duplicates()[0].rows, [1, 3]);
        let s = p.config().sensitive[0].hierarchy.as_ref().unwrap();
        assert!(s.rows().is_empty());
        assert_eq!(s.duplicates()[0].rows, [1, 3]);
    }

    /// A deterministic stream of numbers (splitmix64).
    fn numbers(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut state = seed;
        move |bound| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) % bound
        }
    }

    /// The partitioned grouping of large tables gives exactly the groups, their order (first
    /// rows) and the row → group map of the one-pass grouping, on skewed data (many repeats and
    /// many singletons), whatever the number of threads.
    #[test]
    fn partitioned_grouping_equals_the_one_pass_grouping() {
        let mut next = numbers(7);
        let rows = PARTITIONED_MIN_ROWS + 12_345;
        let data: Vec<Vec<String>> = (0..rows)
            .map(|_| {
                let common = next(4) > 0;
                vec![
                    next(if common { 3 } else { 1000 }).to_string(),
                    next(if common { 5 } else { 500 }).to_string(),
                    next(7).to_string(),
                ]
            })
            .collect();
        let table = Table::from_rows(&["a", "b", "c"], &data).unwrap();
        let cols: Vec<&crate::data::Codes> = (0..3).map(|c| &table.column(c).codes).collect();
        let sizes: Vec<u64> = (0..3).map(|c| table.column(c).dict.len() as u64).collect();
        let strides = packing(&sizes).unwrap();
        let (one, one_rows) = group_rows(&cols, Some(&strides), rows);
        let (hashed, hashed_rows) = group_rows(&cols, None, rows);
        assert_eq!(one.codes, hashed.codes);
        assert_eq!(one_rows, hashed_rows);
        assert!(
            one.reps.len() > 1000 && one.reps.len() < rows / 2,
            "{}",
            one.reps.len()
        );
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let (parted, parted_rows) =
                pool.install(|| group_rows_partitioned(&cols, &strides, rows));
            assert_eq!(parted.codes, one.codes, "{threads} threads");
            assert_eq!(parted.reps, one.reps);
            assert_eq!(parted_rows, one_rows);
        }
    }

    /// The shape of creditcard_int (which used to need 4.5× its CSV): a third of the columns with
    /// thousands of distinct values, each with a hierarchy of tens of thousands of leaves.
    #[test]
    fn encoded_data_stays_within_twice_the_csv() {
        let mut next = numbers(7);
        let wide = ["w1", "w2", "w3", "w4"];
        let narrow = ["n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"];
        let mut csv = format!("{};{}\n", wide.join(";"), narrow.join(";"));
        for _ in 0..20_000 {
            let row: Vec<String> = (0..wide.len() + narrow.len())
                .map(|i| next(if i < wide.len() { 30_000 } else { 10 }).to_string())
                .collect();
            csv.push_str(&row.join(";"));
            csv.push('\n');
        }
        let options = CsvOptions {
            delimiter: b';',
            has_header: true,
        };
        let table = Table::read_csv(csv.as_bytes(), options, "generated.csv").unwrap();
        let hierarchy = |leaves: u32, name: &str| {
            let rows = (0..leaves)
                .map(|v| {
                    vec![
                        v.to_string(),
                        format!("{}-{}", v / 1000 * 1000, v / 1000 * 1000 + 999),
                        format!("{}-{}", v / 10_000 * 10_000, v / 10_000 * 10_000 + 9_999),
                        "*".to_string(),
                    ]
                })
                .collect();
            QuasiIdentifier::new(name, Hierarchy::from_rows(rows, name).unwrap())
        };
        let qis = wide
            .iter()
            .map(|c| hierarchy(40_000, c))
            .chain(narrow.iter().map(|c| hierarchy(10, c)))
            .collect();
        let p = Problem::new(table, k_anonymity(qis)).unwrap();
        let m = p.memory();
        assert!(
            m.encoded() <= 2 * csv.len(),
            "{m:?}: {} bytes for a {}-byte CSV",
            m.encoded(),
            csv.len()
        );
    }
}
