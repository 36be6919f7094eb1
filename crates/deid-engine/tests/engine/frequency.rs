//! Frequency tables (`docs/definitions.md` §1.3): a table with a count column gives exactly
//! what its expansion (every row repeated as often as it counts) gives — every privacy model,
//! quality model, risk, post-hoc quality, search, local generalization and microaggregation —
//! and its output, expanded, is the expansion's output as a multiset of records. Random small
//! tables with counts including 0; adult grouped on all its columns.

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use common::independent::Output;
use deid_engine::aggregate::{AggregateFunction, Microaggregation, MissingValues};
use deid_engine::check::evaluate_all;
use deid_engine::config::ResearchSubset;
use deid_engine::dataset::ArxDataset;
use deid_engine::local::{LocalConfig, LocalMethod, LocalObserver, LocalStep, local_search};
use deid_engine::output::{OutputOptions, Recoding, SuppressedRecords, suppressed_block_holds};
use deid_engine::population::PopulationModel;
use deid_engine::posthoc::output_quality;
use deid_engine::risk::{RiskReport, quasi_identifier_risks};
use deid_engine::{
    Algorithm, CancelFlag, Checker, Hierarchy, NoObserver, PrivacyModel, Problem, ProblemConfig,
    QualityConfig, QualityModel, QuasiIdentifier, SearchConfig, SensitiveAttribute, Table, search,
};
use proptest::prelude::*;

/// One privacy model of every family (with k-anonymity beside it): its text, and whether it
/// needs a population model or a research subset.
const MODELS: [(&str, Needs); 16] = [
    ("k-anonymity(k=2)", Needs::Nothing),
    ("distinct-l-diversity(attribute=s,l=2)", Needs::Nothing),
    ("entropy-l-diversity(attribute=s,l=1.5)", Needs::Nothing),
    ("recursive-l-diversity(attribute=s,c=2,l=2)", Needs::Nothing),
    (
        "t-closeness(attribute=s,t=0.3,distance=equal)",
        Needs::Nothing,
    ),
    (
        "t-closeness(attribute=s,t=0.3,distance=ordered)",
        Needs::Nothing,
    ),
    (
        "t-closeness(attribute=s,t=0.25,distance=hierarchical)",
        Needs::Nothing,
    ),
    ("delta-disclosure(attribute=s,delta=1.2)", Needs::Nothing),
    ("basic-beta-likeness(attribute=s,beta=1)", Needs::Nothing),
    ("enhanced-beta-likeness(attribute=s,beta=1)", Needs::Nothing),
    ("average-risk(threshold=0.4)", Needs::Nothing),
    ("sample-uniqueness(threshold=0.2)", Needs::Nothing),
    (
        "population-uniqueness(threshold=0.2,model=pitman)",
        Needs::Population,
    ),
    ("k-map(k=3,alpha=0.1)", Needs::Population),
    ("delta-presence(delta_min=0,delta_max=0.8)", Needs::Subset),
    ("k-map(k=2)", Needs::Subset),
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Needs {
    Nothing,
    Population,
    Subset,
}

#[derive(Debug, Clone)]
struct Case {
    /// (a, b, s, m, count, released share in 0..=4 of the count).
    rows: Vec<(u8, u8, u8, u8, u8, u8)>,
    k: u32,
    model: usize,
    quality: usize,
    gs_factor: f64,
    limit: f64,
    /// Microaggregate `m` with this function (index into `AggregateFunction::ALL`).
    micro: Option<usize>,
    /// A research subset (required by the models that need one).
    subset: bool,
    mode: usize,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((0u8..5, 0u8..3, 0u8..3, 1u8..6, 0u8..5, 0u8..5), 1..14),
        1u32..4,
        0..MODELS.len(),
        0..QualityModel::ALL.len(),
        prop::sample::select(vec![0.0, 0.5, 1.0]),
        prop::sample::select(vec![0.0, 0.2, 1.0]),
        prop::option::of(0..AggregateFunction::ALL.len()),
        any::<bool>(),
        0..SuppressedRecords::ALL.len(),
    )
        .prop_map(
            |(rows, k, model, quality, gs_factor, limit, micro, subset, mode)| Case {
                rows,
                k,
                model,
                quality,
                gs_factor,
                limit,
                micro,
                subset: subset || MODELS[model].1 == Needs::Subset,
                mode,
            },
        )
}

/// The rows' counts and released counts.
fn counts(c: &Case) -> Vec<(u32, u32)> {
    (c.rows.iter())
        .map(|r| {
            let n = u32::from(r.4);
            let released = if c.subset { n * u32::from(r.5) / 4 } else { n };
            (n, released)
        })
        .collect()
}

fn values(r: &(u8, u8, u8, u8, u8, u8)) -> Vec<String> {
    vec![
        format!("a{}", r.0),
        format!("b{}", r.1),
        format!("s{}", r.2),
        (u32::from(r.3) * 10).to_string(),
    ]
}

/// The frequency table (columns a, b, n, s, m, sub) and its expansion (a, b, s, m, in).
fn tables(c: &Case) -> (Table, Table) {
    let mut freq = Vec::new();
    let mut expanded = Vec::new();
    for (r, (n, released)) in c.rows.iter().zip(counts(c)) {
        let v = values(r);
        freq.push(vec![
            v[0].clone(),
            v[1].clone(),
            n.to_string(),
            v[2].clone(),
            v[3].clone(),
            released.to_string(),
        ]);
        for i in 0..n {
            let mut row = v.clone();
            row.push(if i < released { "1" } else { "0" }.to_string());
            expanded.push(row);
        }
    }
    (
        Table::from_rows(&["a", "b", "n", "s", "m", "sub"], &freq).unwrap(),
        Table::from_rows(&["a", "b", "s", "m", "in"], &expanded).unwrap_or_else(|_| {
            // No record at all: an empty expansion (the problem refuses both).
            Table::from_rows(&["a", "b", "s", "m", "in"], &[]).unwrap()
        }),
    )
}

fn hierarchy(name: &str, leaves: impl Iterator<Item = String>, levels: &[u8]) -> Hierarchy {
    let rows = leaves
        .enumerate()
        .map(|(i, v)| {
            let mut row = vec![v];
            for &l in levels {
                row.push(format!("{name}{}", i as u8 / l));
            }
            row.push("*".into());
            row
        })
        .collect();
    Hierarchy::from_rows(rows, name).unwrap()
}

fn config(c: &Case, frequency: bool) -> ProblemConfig {
    let (model, needs) = MODELS[c.model];
    let mut privacy = vec![PrivacyModel::KAnonymity { k: c.k }];
    privacy.push(PrivacyModel::parse(model).unwrap());
    let micro = c.micro.map(|f| Microaggregation {
        column: "m".into(),
        function: AggregateFunction::ALL[f],
        missing: MissingValues::Ignore,
        date_format: None,
    });
    ProblemConfig {
        quasi_identifiers: vec![
            QuasiIdentifier::new("a", hierarchy("a", (0..5).map(|v| format!("a{v}")), &[2])),
            QuasiIdentifier::new("b", hierarchy("b", (0..3).map(|v| format!("b{v}")), &[])),
        ],
        sensitive: vec![SensitiveAttribute {
            column: "s".into(),
            hierarchy: Some(hierarchy("s", (0..3).map(|v| format!("s{v}")), &[2])),
        }],
        microaggregated: micro.into_iter().collect(),
        privacy,
        suppression_limit: c.limit,
        quality: QualityConfig {
            model: QualityModel::ALL[c.quality],
            gs_factor: c.gs_factor,
            aggregate: None,
        },
        population: (needs == Needs::Population).then_some(PopulationModel::SamplingFraction(0.2)),
        research_subset: match (c.subset, frequency) {
            (true, false) => Some(ResearchSubset::Column {
                column: "in".into(),
                value: None,
            }),
            _ => None,
        },
        count_column: frequency.then(|| "n".into()),
        subset_count_column: (frequency && c.subset).then(|| "sub".into()),
        ..Default::default()
    }
}

/// The output of `recoding` as a sorted list of records: a frequency table's rows repeated as
/// often as their count column says (that column left out), the expansion's `in` column left
/// out.
fn records<R: Recoding + ?Sized>(p: &Problem, r: &R, options: &OutputOptions) -> Vec<Vec<String>> {
    let mut buf = Vec::new();
    let written = deid_engine::output::write_csv(p, r, &mut buf, b';', options).unwrap();
    let out = Output::parse(&String::from_utf8(buf).unwrap(), b';');
    let count = out.header.iter().position(|h| h == "n");
    let keep: Vec<usize> = (0..out.header.len())
        .filter(|&i| Some(i) != count && out.header[i] != "in" && out.header[i] != "sub")
        .collect();
    let mut rows = Vec::new();
    for row in &out.rows {
        let n: usize = count.map_or(1, |c| row[c].parse().unwrap());
        assert!(n > 0, "an output row without records");
        for _ in 0..n {
            rows.push(keep.iter().map(|&i| row[i].clone()).collect());
        }
    }
    assert_eq!(written.records, rows.len());
    rows.sort();
    rows
}

/// Asserts that the frequency problem `f` and the expansion's `e` give the same numbers and
/// outputs for the recodings `rf` and `re`.
fn same_output<R: Recoding + ?Sized>(
    f: &Problem,
    rf: &R,
    e: &Problem,
    re: &R,
    options: &OutputOptions,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(output_quality(f, rf), output_quality(e, re));
    prop_assert_eq!(
        suppressed_block_holds(f, rf, options),
        suppressed_block_holds(e, re, options)
    );
    prop_assert_eq!(records(f, rf, options), records(e, re, options));
    Ok(())
}

#[derive(Default)]
struct Quiet;

impl LocalObserver for Quiet {
    fn step_done(&self, _: &LocalStep, _: usize) {}
}

fn flash() -> SearchConfig {
    SearchConfig {
        algorithm: Algorithm::Flash,
        time_limit: Duration::from_secs(600),
        seed: 1,
        ..Default::default()
    }
}

/// A search outcome's numbers without its timings.
fn outcome(o: &deid_engine::SearchOutcome) -> String {
    format!("{:?} {} {}", o.best, o.checks, o.optimal_proven)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn a_frequency_table_gives_what_its_expansion_gives(c in case()) {
        let (freq, expanded) = tables(&c);
        let f = Problem::new(freq, config(&c, true));
        let e = Problem::new(expanded, config(&c, false));
        let (f, e) = match (f, e) {
            (Ok(f), Ok(e)) => (f, e),
            (Err(_), Err(_)) => return Ok(()),
            (f, e) => {
                return Err(TestCaseError::fail(format!(
                    "one problem failed: {:?} / {:?}",
                    f.err(),
                    e.err()
                )))
            }
        };
        prop_assert_eq!(f.rows(), e.rows());
        prop_assert_eq!(f.max_suppressed(), e.max_suppressed());
        prop_assert_eq!(f.subset_records(), e.subset_records());
        prop_assert_eq!(RiskReport::input(&f, 0.2), RiskReport::input(&e, 0.2));
        prop_assert_eq!(quasi_identifier_risks(&f), quasi_identifier_risks(&e));
        let options = OutputOptions {
            suppressed: SuppressedRecords::ALL[c.mode],
            ..OutputOptions::default()
        };
        let (cf, ce) = (Checker::new(&f), Checker::new(&e));
        let mut nodes = Vec::new();
        f.lattice().for_each(|t| nodes.push(t.to_vec()));
        for levels in &nodes {
            prop_assert_eq!(cf.check(levels), ce.check(levels));
            let (vf, ve) = (cf.evaluate(levels), ce.evaluate(levels));
            prop_assert_eq!(&vf.result, &ve.result);
            prop_assert_eq!(evaluate_all(&f, &vf), evaluate_all(&e, &ve));
            prop_assert_eq!(RiskReport::output(&f, &vf, 0.2), RiskReport::output(&e, &ve, 0.2));
            same_output(&f, &vf, &e, &ve, &options)?;
        }
        let cancel = CancelFlag::new();
        let sf = search(&f, &flash(), &cancel, &NoObserver).unwrap();
        let se = search(&e, &flash(), &cancel, &NoObserver).unwrap();
        prop_assert_eq!(outcome(&sf), outcome(&se));
        if deid_engine::local::LocalConfig::validate_config(f.config()).is_ok() {
            let local = LocalConfig { iterations: 4, ..LocalConfig::default() };
            let lf = local_search(&f, &local, &flash(), &cancel, &Quiet);
            let le = local_search(&e, &local, &flash(), &cancel, &Quiet);
            match (lf, le) {
                (Ok(lf), Ok(le)) => {
                    let steps = |o: &deid_engine::local::LocalOutcome| -> Vec<(Vec<u8>, usize, usize)> {
                        o.steps.iter().map(|s| (s.levels.to_vec(), s.candidates, s.published)).collect()
                    };
                    prop_assert_eq!(steps(&lf), steps(&le));
                    prop_assert_eq!((lf.suppressed, lf.anonymous), (le.suppressed, le.anonymous));
                    same_output(&f, &lf, &e, &le, &options)?;
                }
                (Err(_), Err(_)) => {}
                (lf, le) => prop_assert!(false, "one local search failed: {:?} / {:?}", lf.err(), le.err()),
            }
        }
    }
}

/// adult grouped on all its columns into a frequency table (count column `n`).
fn adult_grouped() -> (ArxDataset, Table) {
    let ds = ArxDataset::load(Path::new("../../examples/adult"), "adult").unwrap();
    let t = &ds.table;
    let mut counts: HashMap<Vec<&str>, u32> = HashMap::new();
    let mut order: Vec<Vec<&str>> = Vec::new();
    for row in 0..t.rows() {
        let key: Vec<&str> = t
            .columns()
            .iter()
            .map(|c| c.dict.value(c.codes.get(row)))
            .collect();
        let n = counts.entry(key.clone()).or_insert(0);
        if *n == 0 {
            order.push(key);
        }
        *n += 1;
    }
    let mut header: Vec<&str> = t.columns().iter().map(|c| c.name.as_str()).collect();
    header.push("n");
    let rows: Vec<Vec<String>> = order
        .iter()
        .map(|key| {
            let mut row: Vec<String> = key.iter().map(|v| v.to_string()).collect();
            row.push(counts[key].to_string());
            row
        })
        .collect();
    let table = Table::from_rows(&header, &rows).unwrap();
    (ds, table)
}

fn adult_config(ds: &ArxDataset, privacy: &[&str], count: bool) -> ProblemConfig {
    ProblemConfig {
        quasi_identifiers: ds
            .quasi_identifiers
            .iter()
            .filter(|q| q.column != "occupation")
            .cloned()
            .collect(),
        sensitive: vec![SensitiveAttribute {
            column: "occupation".into(),
            hierarchy: None,
        }],
        privacy: privacy
            .iter()
            .map(|m| PrivacyModel::parse(m).unwrap())
            .collect(),
        suppression_limit: 0.02,
        count_column: count.then(|| "n".into()),
        ..Default::default()
    }
}

/// adult as a frequency table (far fewer rows than records) reproduces the CSV path: the same
/// optimum, numbers, risks and output records.
#[test]
fn adult_as_a_frequency_table_reproduces_the_csv_path() {
    let (ds, grouped) = adult_grouped();
    assert!(grouped.rows() < ds.table.rows());
    let privacy = [
        "k-anonymity(k=5)",
        "distinct-l-diversity(attribute=occupation,l=3)",
    ];
    let f = Problem::new(grouped, adult_config(&ds, &privacy, true)).unwrap();
    let config = adult_config(&ds, &privacy, false);
    let e = Problem::new(ds.table, config).unwrap();
    assert_eq!(f.rows(), e.rows());
    assert_eq!(f.table().rows(), f.frequencies().unwrap().rows());
    let cancel = CancelFlag::new();
    let sf = search(&f, &flash(), &cancel, &NoObserver).unwrap();
    let se = search(&e, &flash(), &cancel, &NoObserver).unwrap();
    assert_eq!(outcome(&sf), outcome(&se));
    let levels = &sf
        .best
        .as_ref()
        .expect("an anonymous transformation")
        .levels;
    let (vf, ve) = (
        Checker::new(&f).evaluate(levels),
        Checker::new(&e).evaluate(levels),
    );
    assert_eq!(vf.result, ve.result);
    assert_eq!(evaluate_all(&f, &vf), evaluate_all(&e, &ve));
    assert_eq!(
        RiskReport::output(&f, &vf, 0.2),
        RiskReport::output(&e, &ve, 0.2)
    );
    assert_eq!(RiskReport::input(&f, 0.2), RiskReport::input(&e, 0.2));
    assert_eq!(output_quality(&f, &vf), output_quality(&e, &ve));
    let options = OutputOptions::default();
    let out = records(&f, &vf, &options);
    assert_eq!(out, records(&e, &ve, &options));
    // Independently of the engine: the classes of the published records (read from the output
    // frequency table, weighted by its counts) have at least 5 records each.
    let mut buf = Vec::new();
    deid_engine::output::write_csv(&f, &vf, &mut buf, b';', &options).unwrap();
    let text = String::from_utf8(buf).unwrap();
    let output = Output::parse(&text, b';');
    let n = output.col("n");
    let qis: Vec<usize> = (f.quasi_identifiers().iter())
        .map(|q| output.col(&q.column))
        .collect();
    let mut classes: HashMap<Vec<&str>, u64> = HashMap::new();
    for row in &output.rows {
        let key: Vec<&str> = qis.iter().map(|&c| row[c].as_str()).collect();
        if key.iter().all(|v| *v == "*") {
            continue;
        }
        *classes.entry(key).or_default() += row[n].parse::<u64>().unwrap();
    }
    assert!(!classes.is_empty());
    assert!(classes.values().all(|&size| size >= 5), "a class below k");
    assert!(output.rows.len() < e.rows());
}

/// Microaggregation (every function) and local generalization on adult as a frequency table
/// give the expansion's output records.
#[test]
fn adult_microaggregation_and_local_generalization_match_the_expansion() {
    let (ds, grouped) = adult_grouped();
    for function in [AggregateFunction::ArithmeticMean, AggregateFunction::Median] {
        let config = |count: bool| {
            let mut c = adult_config(&ds, &["k-anonymity(k=5)"], count);
            c.quasi_identifiers.retain(|q| q.column != "age");
            c.microaggregated = vec![Microaggregation {
                column: "age".into(),
                function,
                missing: MissingValues::Ignore,
                date_format: None,
            }];
            c
        };
        let f = Problem::new(grouped.clone(), config(true)).unwrap();
        let e = Problem::new(ds.table.clone(), config(false)).unwrap();
        let cancel = CancelFlag::new();
        for method in [LocalMethod::Steps, LocalMethod::Sweep] {
            let local = LocalConfig {
                iterations: 10,
                method,
                ..LocalConfig::default()
            };
            let lf = local_search(&f, &local, &flash(), &cancel, &Quiet).unwrap();
            let le = local_search(&e, &local, &flash(), &cancel, &Quiet).unwrap();
            assert_eq!(lf.suppressed, le.suppressed);
            assert_eq!(lf.steps.len(), le.steps.len());
            let options = OutputOptions::default();
            assert_eq!(output_quality(&f, &lf), output_quality(&e, &le));
            assert_eq!(records(&f, &lf, &options), records(&e, &le, &options));
        }
    }
}
