//! Verification of released data (`docs/definitions.md` §3.8): reads an output as a reader sees
//! it — CSV as deid writes it, or its frequency table — groups the released rows by the text of
//! their quasi-identifiers, and checks every privacy model of the job on these classes from
//! scratch.
//!
//! Independence: the grouping, the suppressed block, the research subset's population counts
//! (pcount) and the table-wide distributions are built here from the released text and the
//! job's input; nothing is taken from a search, a check, a plan or a report, and no code of the
//! engine's grouping or check path (`problem::grouping`, `check`, `output::OutputClasses`) is
//! used. What is shared are the models' *definitions*, evaluated on the classes built here:
//! the per-class functions of [`crate::privacy`] (entropy and recursive ℓ-diversity, the
//! earth mover's distances, δ-disclosure, β-likeness, the sample-based conditions), k′ of
//! estimated k-map ([`crate::population::k_prime`]) and the population-uniqueness estimators.
//! From the input (a [`Problem`](crate::problem::Problem) built on the job's dataset) only
//! facts of the data are read: its table, each row's released records, the encoded hierarchies
//! and the population size.
//!
//! Memory follows the distinct released tuples (and their sensitive values), not the rows.

use std::collections::HashMap;
use std::io::Read;

use serde::Serialize;

use crate::cancel::CancelFlag;
use crate::data::TableBlocks;
use crate::data::frequency::parse_count;
use crate::error::{EngineError, Result};
use crate::hash::{BuildCodeHasher, BuildTextHasher, hash_codes};
use crate::output::SuppressedRecords;
use crate::privacy::PrivacyModel;

/// The name of the released data in error messages.
pub const SOURCE: &str = "released data";

/// Violating classes listed per model (the count covers all of them).
pub const MAX_LISTED: usize = 100;

/// What to verify: the job's attributes, models and suppression settings.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifyConfig {
    /// The quasi-identifying columns (microaggregated ones included).
    pub quasi_identifiers: Vec<String>,
    /// The sensitive columns.
    pub sensitive: Vec<String>,
    /// Every privacy model of the job.
    pub models: Vec<PrivacyModel>,
    /// How suppressed records were written.
    pub suppressed: SuppressedRecords,
    /// The text of suppressed values.
    pub marker: String,
    /// The count column of released data that is a frequency table.
    pub count_column: Option<String>,
    /// List the quasi-identifier values of violating classes.
    pub show_values: bool,
}

impl VerifyConfig {
    /// Whether a model needs the job's input: the table-wide distribution (t-closeness,
    /// δ-disclosure, β-likeness), the population (population uniqueness, estimated k-map) or
    /// the whole table of a research subset (δ-presence, k-map without α).
    pub fn needs_input(&self) -> bool {
        self.models.iter().any(|m| {
            !matches!(
                m,
                PrivacyModel::KAnonymity { .. }
                    | PrivacyModel::DistinctLDiversity { .. }
                    | PrivacyModel::EntropyLDiversity { .. }
                    | PrivacyModel::RecursiveCLDiversity { .. }
                    | PrivacyModel::AverageRisk { .. }
                    | PrivacyModel::SampleUniqueness { .. }
            )
        })
    }
}

/// Texts ↔ ids of one column. Texts of at most 8 bytes (released cells hold no NUL) are
/// looked up as one word, longer ones by their text.
#[derive(Debug, Default)]
struct Interner {
    short: HashMap<u64, u32, BuildCodeHasher>,
    long: HashMap<String, u32, BuildTextHasher>,
    texts: Vec<String>,
}

impl Interner {
    fn id(&mut self, text: &str) -> u32 {
        if let Some(id) = self.get(text) {
            return id;
        }
        let id = self.texts.len() as u32;
        match short_word(text) {
            Some(word) => self.short.insert(word, id),
            None => self.long.insert(text.to_string(), id),
        };
        self.texts.push(text.to_string());
        id
    }

    /// The id of `text`, if it was seen.
    fn get(&self, text: &str) -> Option<u32> {
        match short_word(text) {
            Some(word) => self.short.get(&word).copied(),
            None => self.long.get(text).copied(),
        }
    }
}

/// A text of at most 8 bytes without NUL as one word (little-endian, zero-padded).
#[inline]
fn short_word(text: &str) -> Option<u64> {
    let bytes = text.as_bytes();
    if bytes.len() > 8 || bytes.contains(&0) {
        return None;
    }
    let mut word = [0u8; 8];
    word[..bytes.len()].copy_from_slice(bytes);
    Some(u64::from_le_bytes(word))
}

/// One class as a reader sees it: its records and, per sensitive column, (value id, records)
/// (few per class: searched linearly, small in memory).
#[derive(Debug, Default, Clone)]
struct Class {
    records: u64,
    values: Vec<Vec<(u32, u64)>>,
}

/// The positions of the configured columns in the released data's header.
struct Columns {
    qi: Vec<usize>,
    sensitive: Vec<usize>,
    count: Option<usize>,
}

impl Columns {
    /// Locates every configured column; a missing one is an error naming it.
    fn locate(config: &VerifyConfig, header: &[String]) -> Result<Columns> {
        let find = |name: &str, field: &str| {
            header
                .iter()
                .position(|h| h == name)
                .ok_or_else(|| EngineError::UnknownColumn {
                    name: name.to_string(),
                    field: field.to_string(),
                    available: header.join(", "),
                })
        };
        let qi = (config.quasi_identifiers.iter())
            .map(|c| find(c, "the quasi-identifiers of the job"))
            .collect::<Result<_>>()?;
        let sensitive = (config.sensitive.iter())
            .map(|c| find(c, "the sensitive attributes of the job"))
            .collect::<Result<_>>()?;
        let count = (config.count_column.as_deref())
            .map(|c| find(c, "count_column"))
            .transpose()?;
        Ok(Columns {
            qi,
            sensitive,
            count,
        })
    }
}

/// Released rows grouped by the text of their quasi-identifiers: the classes in order of first
/// appearance, texts interned per column in order of first appearance.
#[derive(Debug)]
struct Grouping {
    labels: Vec<Interner>,
    values: Vec<Interner>,
    /// Class of every tuple of label ids by the tuple's hash ([`hash_codes`]); tuples whose
    /// hash another tuple has in `overflow`.
    index: HashMap<u64, u32, BuildCodeHasher>,
    overflow: HashMap<Box<[u32]>, u32, BuildTextHasher>,
    keys: Vec<Box<[u32]>>,
    classes: Vec<Class>,
    /// The suppressed block (every quasi-identifier the marker; in `mask` mode every sensitive
    /// value too).
    block: Class,
}

/// The released data grouped into the classes a reader sees.
#[derive(Debug)]
pub struct Released {
    config: VerifyConfig,
    labels: Vec<Interner>,
    values: Vec<Interner>,
    keys: Vec<Box<[u32]>>,
    classes: Vec<Class>,
    block: Class,
    rows: u64,
}

impl Released {
    /// Reads released data (the CSV rules of [`crate::data::CsvScanner::table`], with a header,
    /// read in blocks by [`TableBlocks`]) and groups its rows. Errors name the column missing
    /// from the header, or the 1-based data row and the value of a bad count.
    ///
    /// Every block is grouped on its own in parallel ([`TableBlocks::map_in_order`]), and the
    /// blocks' groupings are merged in order: ids, classes and each class's values come out in
    /// the order of their first appearance, as when the rows are grouped one after the other.
    pub fn read<R: Read>(
        config: VerifyConfig,
        input: R,
        delimiter: u8,
        cancel: &CancelFlag,
    ) -> Result<Released> {
        let mut blocks = TableBlocks::open(input, delimiter, SOURCE)?;
        let columns = Columns::locate(&config, blocks.columns())?;
        let mut total = Grouping::new(&columns);
        blocks.map_in_order(
            |block| {
                if cancel.is_cancelled() {
                    return Err(EngineError::Cancelled);
                }
                let mut part = Grouping::new(&columns);
                let mut key = vec![0u32; columns.qi.len()];
                let mut values = vec![0u32; columns.sensitive.len()];
                block.for_each(|row, fields| {
                    let records = released_records(&config, &columns, fields, row)?;
                    part.add(&config, &columns, fields, records, &mut key, &mut values);
                    Ok(())
                })?;
                Ok(part)
            },
            |part| {
                total.merge(part);
                Ok(())
            },
        )?;
        let Grouping {
            labels,
            values,
            keys,
            classes,
            block,
            ..
        } = total;
        Ok(Released {
            config,
            labels,
            values,
            keys,
            classes,
            block,
            rows: blocks.records(),
        })
    }

    /// Released records (suppressed block included).
    fn records(&self) -> u64 {
        self.block.records + self.classes.iter().map(|c| c.records).sum::<u64>()
    }
}

/// The records a released row stands for: 1, or its count. A bad count is an error naming
/// `row` (1-based).
fn released_records(
    config: &VerifyConfig,
    columns: &Columns,
    fields: &[&str],
    row: u64,
) -> Result<u64> {
    match columns.count {
        None => Ok(1),
        Some(c) => match parse_count(fields[c]) {
            Some(n) => Ok(u64::from(n)),
            None => Err(bad_count(config, fields[c], row)),
        },
    }
}

impl Grouping {
    fn new(columns: &Columns) -> Grouping {
        Grouping {
            labels: (0..columns.qi.len()).map(|_| Interner::default()).collect(),
            values: (0..columns.sensitive.len())
                .map(|_| Interner::default())
                .collect(),
            index: HashMap::default(),
            overflow: HashMap::default(),
            keys: Vec::new(),
            classes: Vec::new(),
            block: Class::new(columns.sensitive.len()),
        }
    }

    /// Adds one released row (its cells) of `records` records to its class or to the
    /// suppressed block.
    fn add(
        &mut self,
        config: &VerifyConfig,
        columns: &Columns,
        fields: &[&str],
        records: u64,
        key: &mut [u32],
        values: &mut [u32],
    ) {
        if records == 0 {
            return;
        }
        let cell = |c: usize| fields[c];
        let marker = config.marker.as_str();
        let masked = |cols: &[usize]| cols.iter().all(|&c| cell(c) == marker);
        let suppressed = !columns.qi.is_empty()
            && masked(&columns.qi)
            && match config.suppressed {
                SuppressedRecords::Mask => masked(&columns.sensitive),
                SuppressedRecords::KeepSensitive => true,
                SuppressedRecords::Remove => false,
            };
        for ((v, &c), interner) in values
            .iter_mut()
            .zip(&columns.sensitive)
            .zip(&mut self.values)
        {
            *v = interner.id(cell(c));
        }
        let class = if suppressed {
            &mut self.block
        } else {
            for ((k, &c), interner) in key.iter_mut().zip(&columns.qi).zip(&mut self.labels) {
                *k = interner.id(cell(c));
            }
            let id = self.class_of(key, values.len());
            &mut self.classes[id as usize]
        };
        class.add(records, values);
    }

    /// Adds the grouping of the rows that follow this one's: their texts, classes and values
    /// in their order of first appearance, after this grouping's.
    fn merge(&mut self, part: Grouping) {
        let ids = |total: &mut [Interner], part: &[Interner]| -> Vec<Vec<u32>> {
            (total.iter_mut().zip(part))
                .map(|(total, part)| part.texts.iter().map(|t| total.id(t)).collect())
                .collect()
        };
        let labels = ids(&mut self.labels, &part.labels);
        let values = ids(&mut self.values, &part.values);
        let mut key = vec![0u32; labels.len()];
        for (part_key, class) in part.keys.iter().zip(&part.classes) {
            for ((k, &id), labels) in key.iter_mut().zip(part_key.iter()).zip(&labels) {
                *k = labels[id as usize];
            }
            let id = self.class_of(&key, values.len());
            self.classes[id as usize].merge(class, &values);
        }
        self.block.merge(&part.block, &values);
    }

    /// The class of the tuple `key`, a new one if it is new.
    fn class_of(&mut self, key: &[u32], sensitive: usize) -> u32 {
        let hash = hash_codes(key);
        let found = match self.index.get(&hash) {
            Some(&id) if *self.keys[id as usize] == *key => return id,
            Some(_) => self.overflow.get(key).copied(),
            None => None,
        };
        if let Some(id) = found {
            return id;
        }
        let id = self.classes.len() as u32;
        match self.index.contains_key(&hash) {
            true => self.overflow.insert(Box::from(key), id),
            false => self.index.insert(hash, id),
        };
        self.keys.push(Box::from(key));
        self.classes.push(Class::new(sensitive));
        id
    }
}

/// A bad count of released data that is a frequency table.
fn bad_count(config: &VerifyConfig, value: &str, row: u64) -> EngineError {
    EngineError::config(
        "count_column",
        format!(
            "{SOURCE}: row {row} of column '{}' holds '{value}': expected a whole number of \
             records in decimal digits, 0 to {}",
            config.count_column.as_deref().unwrap_or_default(),
            u32::MAX
        ),
    )
}

impl Class {
    fn new(sensitive: usize) -> Class {
        Class {
            records: 0,
            values: vec![Vec::new(); sensitive],
        }
    }

    fn add(&mut self, records: u64, values: &[u32]) {
        self.records += records;
        for (hist, &v) in self.values.iter_mut().zip(values) {
            count(hist, v, records);
        }
    }

    /// Adds `other` (a class of later rows whose value ids `ids` maps to this one's, per
    /// sensitive column).
    fn merge(&mut self, other: &Class, ids: &[Vec<u32>]) {
        self.records += other.records;
        for ((hist, other), ids) in self.values.iter_mut().zip(&other.values).zip(ids) {
            for &(v, n) in other {
                count(hist, ids[v as usize], n);
            }
        }
    }
}

/// Adds `records` records of value `v` to the histogram `hist` (values in order of first
/// appearance).
fn count(hist: &mut Vec<(u32, u64)>, v: u32, records: u64) {
    match hist.iter_mut().find(|(id, _)| *id == v) {
        Some((_, n)) => *n += records,
        None => hist.push((v, records)),
    }
}

/// The verdict on released data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerifyReport {
    /// Whether every model holds.
    pub passed: bool,
    /// Data rows of the released data.
    pub released_rows: u64,
    /// Records of the released data (the sum of the counts of a frequency table), suppressed
    /// records shown as such included.
    pub released_records: u64,
    /// Records shown as suppressed (every quasi-identifier the marker; with `mask` every
    /// sensitive value too).
    pub suppressed_records: u64,
    /// With `remove` and the input read: the input's released records missing from the
    /// released data (the removed suppressed records).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed_records: Option<u64>,
    /// Published classes (the suppressed block not counted).
    pub classes: u64,
    /// One verdict per privacy model, in the job's order.
    pub models: Vec<ModelVerdict>,
    /// The class-size histogram of the published classes (non-empty buckets).
    pub class_sizes: Vec<SizeBucket>,
}

/// The verdict on one privacy model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelVerdict {
    /// The model in the text syntax.
    pub model: String,
    /// Whether it holds.
    pub passed: bool,
    /// Classes that violate it (the suppressed block included when it does).
    pub violating_classes: u64,
    /// Records in those classes.
    pub violating_records: u64,
    /// Sample-based models: the measured value (average risk, share of sample uniques,
    /// estimated share of population uniques); estimated k-map: k′.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<f64>,
    /// Why the model fails as a whole, when no class is to blame.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The first [`MAX_LISTED`] violating classes, smallest first.
    pub violations: Vec<Violation>,
}

/// A violating class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    /// Its records.
    pub size: u64,
    /// Whether it is the suppressed block (`keep_sensitive` shows its sensitive values).
    pub suppressed_block: bool,
    /// Its quasi-identifier values, in the job's order (only when asked for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// A bucket of the class-size histogram.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeBucket {
    /// Smallest class size of the bucket.
    pub min_size: u64,
    /// Largest class size of the bucket (`None`: unbounded).
    pub max_size: Option<u64>,
    /// Classes in the bucket.
    pub classes: u64,
    /// Records in those classes.
    pub records: u64,
}

/// The class-size histogram: sizes 1 to 10 one by one, then 11–100, 101–1,000, … up to
/// 1,000,000 and above (Google DLP's buckets); empty buckets left out.
pub fn size_histogram(sizes: impl IntoIterator<Item = u64>) -> Vec<SizeBucket> {
    let mut bounds: Vec<(u64, Option<u64>)> = (1..=10).map(|s| (s, Some(s))).collect();
    let mut low = 11;
    for high in [100, 1_000, 10_000, 100_000, 1_000_000] {
        bounds.push((low, Some(high)));
        low = high + 1;
    }
    bounds.push((low, None));
    let mut buckets: Vec<SizeBucket> = (bounds.iter())
        .map(|&(min_size, max_size)| SizeBucket {
            min_size,
            max_size,
            classes: 0,
            records: 0,
        })
        .collect();
    for size in sizes {
        let b = buckets
            .iter()
            .rposition(|b| b.min_size <= size)
            .unwrap_or(0);
        buckets[b].classes += 1;
        buckets[b].records += size;
    }
    buckets.retain(|b| b.classes > 0);
    buckets
}

mod models;

pub use models::verify;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histogram_has_dlps_buckets() {
        let h = size_histogram([1, 1, 2, 10, 11, 100, 101, 5_000, 2_000_000]);
        let got: Vec<(u64, Option<u64>, u64, u64)> = h
            .iter()
            .map(|b| (b.min_size, b.max_size, b.classes, b.records))
            .collect();
        assert_eq!(
            got,
            [
                (1, Some(1), 2, 2),
                (2, Some(2), 1, 2),
                (10, Some(10), 1, 10),
                (11, Some(100), 2, 111),
                (101, Some(1_000), 1, 101),
                (1_001, Some(10_000), 1, 5_000),
                (1_000_001, None, 1, 2_000_000),
            ]
        );
    }

    #[test]
    fn suppressed_rows_follow_the_mode() {
        let config = |suppressed| VerifyConfig {
            quasi_identifiers: vec!["q".into()],
            sensitive: vec!["s".into()],
            models: vec![PrivacyModel::KAnonymity { k: 2 }],
            suppressed,
            marker: "*".into(),
            count_column: None,
            show_values: false,
        };
        let text = "q,s\n*,*\n*,x\na,y\na,z\n";
        let read =
            |mode| Released::read(config(mode), text.as_bytes(), b',', &CancelFlag::new()).unwrap();
        // mask: only the fully masked row is suppressed; `*,x` is a published class of one.
        let mask = read(SuppressedRecords::Mask);
        assert_eq!((mask.block.records, mask.classes.len()), (1, 2));
        let keep = read(SuppressedRecords::KeepSensitive);
        assert_eq!((keep.block.records, keep.classes.len()), (2, 1));
        let remove = read(SuppressedRecords::Remove);
        assert_eq!((remove.block.records, remove.classes.len()), (0, 2));
        let report = verify(&mask, None).unwrap();
        assert!(!report.passed);
        assert_eq!(report.models[0].violating_classes, 1);
        // keep_sensitive: the block of two (values x and *) is checked as one more class.
        let report = verify(&keep, None).unwrap();
        assert!(report.passed, "{report:?}");
    }

    /// Released data of several blocks, grouped on pools of 1 and 2 threads, give what one
    /// pass over the rows gives (computed here with plain maps): the texts of every column and
    /// the classes in order of first appearance, each class's records and its sensitive values
    /// in order of first appearance with their records, and the suppressed block.
    #[test]
    fn grouping_in_parallel_is_grouping_row_by_row() {
        let mut text = String::from("s,q1,x,q2,n\n");
        let mut state = 17u64;
        for _ in 0..150_000 {
            let r = crate::hash::splitmix64(&mut state);
            let (q1, q2) = match r % 50 {
                0 => ("*".to_string(), "*".to_string()),
                _ => (
                    format!("a{}", r % 37),
                    format!("long-label-{}", (r >> 8) % 23),
                ),
            };
            let s = format!("v{}", (r >> 16) % 5);
            text += &format!("{s},{q1},{},{q2},{}\n", r >> 40, (r >> 20) % 4);
        }
        assert!(text.len() > 3 << 20, "several blocks");
        let config = VerifyConfig {
            quasi_identifiers: vec!["q1".into(), "q2".into()],
            sensitive: vec!["s".into()],
            models: vec![PrivacyModel::KAnonymity { k: 2 }],
            suppressed: SuppressedRecords::KeepSensitive,
            marker: "*".into(),
            count_column: Some("n".into()),
            show_values: false,
        };
        // One pass: texts, classes (keys as texts) and the block.
        type Hist = Vec<(String, u64)>;
        fn add(hist: &mut Hist, v: &str, n: u64) {
            match hist.iter_mut().find(|(x, _)| x == v) {
                Some((_, m)) => *m += n,
                None => hist.push((v.to_string(), n)),
            }
        }
        let mut labels: [Vec<String>; 2] = Default::default();
        let mut values: Vec<String> = Vec::new();
        let mut classes: Vec<(Vec<String>, u64, Hist)> = Vec::new();
        let mut block: (u64, Hist) = (0, Vec::new());
        for line in text.lines().skip(1) {
            let cells: Vec<&str> = line.split(',').collect();
            let n: u64 = cells[4].parse().unwrap();
            if n == 0 {
                continue;
            }
            if !values.iter().any(|v| v == cells[0]) {
                values.push(cells[0].to_string());
            }
            if cells[1] == "*" && cells[3] == "*" {
                block.0 += n;
                add(&mut block.1, cells[0], n);
                continue;
            }
            for (texts, cell) in labels.iter_mut().zip([cells[1], cells[3]]) {
                if !texts.iter().any(|t| t == cell) {
                    texts.push(cell.to_string());
                }
            }
            let key = vec![cells[1].to_string(), cells[3].to_string()];
            let at = match classes.iter().position(|c| c.0 == key) {
                Some(at) => at,
                None => {
                    classes.push((key, 0, Vec::new()));
                    classes.len() - 1
                }
            };
            classes[at].1 += n;
            add(&mut classes[at].2, cells[0], n);
        }
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let released = pool
                .install(|| {
                    Released::read(config.clone(), text.as_bytes(), b',', &CancelFlag::new())
                })
                .unwrap();
            assert_eq!(released.rows, 150_000);
            for (interner, texts) in released.labels.iter().zip(&labels) {
                assert_eq!(&interner.texts, texts);
            }
            assert_eq!(released.values[0].texts, values);
            let hist = |class: &Class| -> Hist {
                (class.values[0].iter())
                    .map(|&(v, n)| (released.values[0].texts[v as usize].clone(), n))
                    .collect()
            };
            let got: Vec<(Vec<String>, u64, Hist)> = (released.keys.iter())
                .zip(&released.classes)
                .map(|(key, class)| {
                    let texts = (key.iter().zip(&released.labels))
                        .map(|(&id, interner)| interner.texts[id as usize].clone())
                        .collect();
                    (texts, class.records, hist(class))
                })
                .collect();
            assert_eq!(got, classes, "{threads} threads");
            assert_eq!((released.block.records, hist(&released.block)), block);
        }
    }
}
