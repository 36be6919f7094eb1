//! A validated, encoded anonymization problem: the table, the encoded hierarchies, the lattice,
//! the *base groups* (distinct combinations of original quasi-identifier values, with counts and
//! sensitive-value histograms) and the compiled privacy and quality models.
//!
//! Everything that does not depend on a transformation is computed here once, so that the check
//! (`super::check`) only has to regroup base groups or earlier results.

use std::sync::Arc;

use crate::aggregate::PreparedAggregate;
use crate::config::{ProblemConfig, QuasiIdentifier};
use crate::data::Table;
use crate::data::frequency::Frequencies;
use crate::data::subset::Subset;
use crate::error::Result;
use crate::hierarchy::EncodedHierarchy;
use crate::lattice::Lattice;
pub use crate::lattice::MAX_QUASI_IDENTIFIERS;
use crate::privacy::risk::PreparedSampleModel;
use crate::privacy::{PreparedClassModel, PresenceModel, PrivacyModel, SensitiveDomain};
use crate::quality::{PreparedQuality, QualityConfig};

mod dp;
mod grouping;
mod steps;

pub use dp::{
    DpSetup, check_combinations as check_dp_combinations,
    check_released_columns as check_dp_columns, search_quality as dp_search_quality,
};

use grouping::base_groups;
pub use grouping::{Groups, Histograms, RowWeights};
use steps::{CompileInput, Roles, Slots};

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
    /// Released records of the problem: the table's rows (the sum of the released counts of a
    /// frequency table), or the records of the selected base groups of a
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
    /// The counts of a frequency table (with its research subset, if any).
    frequencies: Option<Arc<Frequencies>>,
    min_class_size: u32,
    max_suppressed: usize,
    quality: PreparedQuality,
    monotonicity: PrivacyMonotonicity,
    aggregates: Vec<MicroColumn>,
    population: Option<u64>,
    /// Differential privacy's parameters and sample, if configured.
    dp: Option<Arc<DpSetup>>,
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
    /// 1. resolve every named column and reject columns with two roles (or a count column with
    ///    a role);
    /// 2. read the counts of a frequency table (rows counting no record are left out) and the
    ///    research subset;
    /// 3. encode the hierarchies (coverage of the data) and check the level bounds; validate
    ///    the privacy models, their attributes and the suppression limit;
    /// 4. group the records by their original QI values (base groups), every row weighted by
    ///    its records, with histograms of every sensitive attribute a model needs;
    /// 5. compile the privacy and quality models.
    ///
    /// Errors about the configuration name the field of `config` (`privacy[1].k`,
    /// `quality.gs_factor`, `attributes.age.max_level`, …; see
    /// [`EngineError::InvalidConfig`](crate::EngineError::InvalidConfig)).
    pub fn new(table: Table, mut config: ProblemConfig) -> Result<Problem> {
        // 1. Columns and roles.
        let Roles {
            qi_columns,
            identifying_columns,
        } = Roles::resolve(&table, &config)?;
        // 2. Records per row, research subset.
        let (table, frequencies, subset) = steps::frequencies(table, &config)?;
        // Differential privacy: its sample becomes the released records.
        let (frequencies, subset, dp) = dp::prepare(&table, &mut config, frequencies, subset)?;
        let weights = match (&frequencies, &subset) {
            (Some(f), _) => RowWeights::Counts(f),
            (None, Some(s)) => RowWeights::Subset(s),
            (None, None) => RowWeights::Ones,
        };
        // 3. Hierarchies and levels; privacy models and suppression, for the released records.
        let (hierarchies, lattice) = steps::encode_hierarchies(&table, &mut config, &qi_columns)?;
        let n = match (&frequencies, &subset) {
            (Some(f), _) => f.released_records(),
            (None, Some(s)) => s.len(),
            (None, None) => table.rows(),
        };
        let population = (config.population)
            .map(|m| m.population_size(n))
            .transpose()
            .map_err(|e| e.within("population"))?;
        config.validate_models(n, population, weights.has_subset())?;
        let slots = Slots::assign(&table, &config)?;
        // 4. Base groups.
        let (base, row_group) = base_groups(&table, &qi_columns, &slots.columns, weights);
        debug_assert_eq!(base.codes.len(), base.len() * qi_columns.len());
        let qi_value_counts: Vec<Vec<u32>> = (qi_columns.iter())
            .map(|&c| steps::released_counts(&table, weights, c))
            .collect();
        // 5. Models.
        let compiled = steps::compile(
            &mut config,
            CompileInput {
                table: &table,
                slots: &slots,
                n,
                population,
                weights,
                hierarchies: &hierarchies,
                qi_value_counts: &qi_value_counts,
                base: &base,
            },
        )?;
        let max_suppressed = (config.suppression_limit * n as f64).floor() as usize;
        let min_class_size = (compiled.min_class_size).max(dp.as_ref().map_or(1, |d| d.params.k));
        let monotonicity = monotonicity_of(&config.privacy, max_suppressed, min_class_size);
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
            slot_columns: slots.columns,
            domains: compiled.domains,
            sensitive_hierarchies: compiled.sensitive_hierarchies,
            class_models: compiled.class_models,
            sample_models: compiled.sample_models,
            presence_models: compiled.presence_models,
            subset: subset.map(Arc::new),
            frequencies: frequencies.map(Arc::new),
            min_class_size,
            max_suppressed,
            quality: compiled.quality,
            monotonicity,
            aggregates: slots.aggregates,
            population,
            dp: dp.map(Arc::new),
        })
    }

    /// Differential privacy as derived for this problem (k, β, the split of ε, the sample's
    /// size), if configured; its sample is the problem's released records.
    pub fn dp(&self) -> Option<&DpSetup> {
        self.dp.as_deref()
    }

    /// The input table (of a frequency table, the rows that count at least one record).
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Number of released records (the sum of the released counts of a frequency table; of the
    /// selected base groups, for a [restricted](Problem::restrict) problem).
    pub fn rows(&self) -> usize {
        self.n
    }

    /// The counts of a frequency table, if the table is one.
    pub fn frequencies(&self) -> Option<&Frequencies> {
        self.frequencies.as_deref()
    }

    /// The records each row of the table stands for.
    pub fn weights(&self) -> RowWeights<'_> {
        match (&self.frequencies, &self.subset) {
            (Some(f), _) => RowWeights::Counts(f),
            (None, Some(s)) => RowWeights::Subset(s),
            (None, None) => RowWeights::Ones,
        }
    }

    /// Released records of row `row` of the table (0 outside the research subset).
    #[inline]
    pub fn released_records(&self, row: usize) -> u32 {
        self.weights().released(row)
    }

    /// With a research subset (of rows, or of a frequency table's records): (released records,
    /// records of the whole table).
    pub fn subset_records(&self) -> Option<(usize, usize)> {
        match (&self.frequencies, &self.subset) {
            (Some(f), _) if f.has_subset() => Some((f.released_records(), f.records())),
            (Some(_), _) => None,
            (None, s) => s.as_ref().map(|s| (s.len(), s.table_rows())),
        }
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
        let (base, qi_value_counts, n) = self.included_groups(include);
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
            frequencies: self.frequencies.clone(),
            min_class_size: self.min_class_size,
            max_suppressed,
            quality,
            monotonicity,
            aggregates: self.aggregates.clone(),
            population: self.population,
            dp: self.dp.clone(),
        }
    }

    /// The base groups with `include[g]` set (renumbered in order), the quasi-identifiers' value
    /// frequencies among their records, and their records: the data of [`Problem::restrict`].
    fn included_groups(&self, include: &[bool]) -> (Groups, Vec<Vec<u32>>, usize) {
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
        (base, qi_value_counts, n)
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

    /// The research subset of rows (the released records) when the table is the population;
    /// rows outside it are never written. A frequency table's subset is in its
    /// [`Problem::frequencies`].
    pub fn subset(&self) -> Option<&Subset> {
        self.subset.as_deref()
    }

    /// Whether row `row` of the table has released records (in the research subset, or there
    /// is none).
    #[inline]
    pub fn is_released(&self, row: usize) -> bool {
        self.released_records(row) > 0
    }

    /// The population size N of the configured population model (validated: N ≥ rows).
    pub fn population(&self) -> Option<u64> {
        self.population
    }

    /// Whether every record suppressed at a transformation is suppressed at each of its
    /// specializations too: only the minimal class size suppresses (no other class-based,
    /// sample-based or presence model, no research subset, no differential privacy), so a
    /// class too small at a transformation is split into classes too small below it. Then
    /// the Loss's suppression excess of a transformation ([`Quality::excess`]) bounds those of
    /// its specializations.
    ///
    /// [`Quality::excess`]: crate::quality::Quality::excess
    pub fn suppression_shrinks_upwards(&self) -> bool {
        self.class_models.is_empty()
            && self.sample_models.is_empty()
            && self.presence_models.is_empty()
            && self.base_groups().pcounts.is_empty()
            && self.dp.is_none()
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
                + self.subset.as_ref().map_or(0, |s| s.heap_bytes())
                + self.frequencies.as_ref().map_or(0, |f| f.heap_bytes()),
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

#[cfg(test)]
mod tests {
    use super::grouping::tests::numbers;
    use super::*;
    use crate::EngineError;
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
