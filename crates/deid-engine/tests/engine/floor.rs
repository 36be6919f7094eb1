//! Data given at a floor (`data_level`, `docs/definitions.md` §1.2): a table whose column holds
//! the labels of level L of its hierarchy, generalized here by the test itself, gives what the
//! raw table gives with `min_level` L — the same lattice, optimum, quality scores (every model
//! that needs no original values), post-hoc granularity and intensity, output risks and output
//! CSV, also as a frequency table. Bad floors are refused naming `attributes.<col>.data_level`.

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use common::independent::Output;
use deid_engine::check::evaluate_all;
use deid_engine::dataset::ArxDataset;
use deid_engine::output::{OutputOptions, SuppressedRecords, write_csv};
use deid_engine::posthoc::output_quality;
use deid_engine::risk::RiskReport;
use deid_engine::{
    Algorithm, CancelFlag, Checker, EngineError, Hierarchy, NoObserver, PrivacyModel, Problem,
    ProblemConfig, QualityConfig, QualityModel, QuasiIdentifier, SearchConfig, Table, search,
};
use proptest::prelude::*;

/// Level-1 group of leaf `a{v}` (uneven groups, so that domain shares differ).
const GROUP: [u8; 12] = [0, 0, 1, 1, 1, 1, 2, 3, 3, 3, 3, 3];

/// The label of leaf value `v` of column `a` at `level` (0: `a{v}`, 1: `p{group}`, 2:
/// `q{group / 2}`, 3: `*`), written out independently of the engine.
fn a_label(v: u8, level: u8) -> String {
    match level {
        0 => format!("a{v}"),
        1 => format!("p{}", GROUP[v as usize]),
        2 => format!("q{}", GROUP[v as usize] / 2),
        _ => "*".into(),
    }
}

/// The label of `b{v}` at `level` (0: `b{v}`, 1: `c{v / 2}`, 2: `*`).
fn b_label(v: u8, level: u8) -> String {
    match level {
        0 => format!("b{v}"),
        1 => format!("c{}", v / 2),
        _ => "*".into(),
    }
}

fn hierarchies() -> (Hierarchy, Hierarchy) {
    // Leaves 0..12 of `a` (some absent from the data), listed in reverse so that a label's
    // first row is not its smallest leaf.
    let a = (0..12u8)
        .rev()
        .map(|v| (0..4).map(|l| a_label(v, l)).collect())
        .collect();
    let b = (0..4u8)
        .map(|v| (0..3).map(|l| b_label(v, l)).collect())
        .collect();
    (
        Hierarchy::from_rows(a, "a").unwrap(),
        Hierarchy::from_rows(b, "b").unwrap(),
    )
}

#[derive(Debug, Clone)]
struct Case {
    /// (a, b, s) of every record.
    rows: Vec<(u8, u8, u8)>,
    floor_a: u8,
    floor_b: u8,
    k: u32,
    limit: f64,
    /// Give the floor table as a frequency table (count column `n`).
    frequency: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((0u8..12, 0u8..4, 0u8..3), 1..40),
        0u8..3,
        0u8..2,
        2u32..5,
        prop::sample::select(vec![0.0, 0.1, 0.3]),
        any::<bool>(),
    )
        .prop_map(|(rows, floor_a, floor_b, k, limit, frequency)| Case {
            rows,
            floor_a,
            floor_b,
            k,
            limit,
            frequency,
        })
}

/// The raw table and the table at the floor (as records, or grouped with a count column).
fn tables(c: &Case) -> (Table, Table) {
    let raw: Vec<Vec<String>> = (c.rows.iter())
        .map(|&(a, b, s)| vec![a_label(a, 0), b_label(b, 0), format!("s{s}")])
        .collect();
    let floor: Vec<Vec<String>> = (c.rows.iter())
        .map(|&(a, b, s)| {
            vec![
                a_label(a, c.floor_a),
                b_label(b, c.floor_b),
                format!("s{s}"),
            ]
        })
        .collect();
    let raw = Table::from_rows(&["a", "b", "s"], &raw).unwrap();
    if !c.frequency {
        return (raw, Table::from_rows(&["a", "b", "s"], &floor).unwrap());
    }
    let mut counts: Vec<(Vec<String>, u32)> = Vec::new();
    for row in floor {
        match counts.iter_mut().find(|(r, _)| *r == row) {
            Some((_, n)) => *n += 1,
            None => counts.push((row, 1)),
        }
    }
    let grouped: Vec<Vec<String>> = (counts.into_iter())
        .map(|(mut row, n)| {
            row.insert(2, n.to_string());
            row
        })
        .collect();
    (
        raw,
        Table::from_rows(&["a", "b", "n", "s"], &grouped).unwrap(),
    )
}

fn config(c: &Case, floor: bool, model: QualityModel) -> ProblemConfig {
    let (ha, hb) = hierarchies();
    let mut a = QuasiIdentifier::new("a", ha);
    let mut b = QuasiIdentifier::new("b", hb);
    if floor {
        (a.data_level, b.data_level) = (c.floor_a, c.floor_b);
    } else {
        (a.min_level, b.min_level) = (Some(c.floor_a), Some(c.floor_b));
    }
    ProblemConfig {
        quasi_identifiers: vec![a, b],
        privacy: vec![PrivacyModel::KAnonymity { k: c.k }],
        suppression_limit: c.limit,
        quality: QualityConfig {
            model,
            ..Default::default()
        },
        count_column: (floor && c.frequency).then(|| "n".into()),
        ..Default::default()
    }
}

/// The output's records, sorted, with a frequency table's rows repeated as often as their
/// count column says (the column left out).
fn records(text: &str) -> Vec<Vec<String>> {
    let out = Output::parse(text, b';');
    let count = out.header.iter().position(|h| h == "n");
    let mut rows = Vec::new();
    for row in &out.rows {
        let n: usize = count.map_or(1, |c| row[c].parse().unwrap());
        let record: Vec<String> = (0..row.len())
            .filter(|&i| Some(i) != count)
            .map(|i| row[i].clone())
            .collect();
        rows.extend(std::iter::repeat_n(record, n));
    }
    rows.sort();
    rows
}

fn csv(p: &Problem, e: &deid_engine::Evaluation, mode: SuppressedRecords) -> String {
    let options = OutputOptions {
        suppressed: mode,
        ..OutputOptions::default()
    };
    let mut buf = Vec::new();
    write_csv(p, e, &mut buf, b';', &options).unwrap();
    String::from_utf8(buf).unwrap()
}

fn flash() -> SearchConfig {
    SearchConfig {
        algorithm: Algorithm::Flash,
        time_limit: Duration::from_secs(600),
        seed: 1,
        ..Default::default()
    }
}

/// The models compared: every one that needs no original values.
fn models() -> Vec<QualityModel> {
    (QualityModel::ALL.iter().copied())
        .filter(|m| !m.needs_original_values())
        .collect()
}

/// The numbers of a quality that do not depend on the data below the floor: the score, its
/// bound and per-attribute values (utility measures from the unchanged data, which differ).
fn numbers(q: &deid_engine::quality::Quality) -> (f64, f64, Vec<f64>) {
    (q.score, q.lower_bound, q.per_attribute.clone())
}

/// Asserts that the floor problem `f` and the raw problem `r` agree on one transformation.
fn same_evaluation(f: &Problem, r: &Problem, levels: &[u8]) -> Result<(), TestCaseError> {
    let (ef, er) = (
        Checker::new(f).evaluate(levels),
        Checker::new(r).evaluate(levels),
    );
    prop_assert_eq!(ef.result.levels.as_slice(), er.result.levels.as_slice());
    prop_assert_eq!(
        (ef.result.anonymous, ef.result.suppressed, ef.result.classes),
        (er.result.anonymous, er.result.suppressed, er.result.classes)
    );
    prop_assert_eq!(
        (ef.result.score, ef.result.lower_bound),
        (er.result.score, er.result.lower_bound)
    );
    let all_f = evaluate_all(f, &ef);
    let floor = f
        .config()
        .quasi_identifiers
        .iter()
        .any(|q| q.data_level > 0);
    let all_r: Vec<_> = (evaluate_all(r, &er).into_iter())
        .filter(|(m, _)| !floor || !m.needs_original_values())
        .collect();
    prop_assert_eq!(all_f.len(), all_r.len());
    for ((mf, qf), (mr, qr)) in all_f.iter().zip(&all_r) {
        prop_assert_eq!(mf, mr);
        prop_assert_eq!(numbers(qf), numbers(qr), "{}", mf.name());
        if matches!(mr, QualityModel::Precision | QualityModel::Height) {
            prop_assert_eq!(qf.utility, qr.utility, "utility of {}", mf.name());
        }
    }
    let (pf, pr) = (output_quality(f, &ef), output_quality(r, &er));
    // Post-hoc sums run over the base groups, fewer at the floor: equal up to rounding.
    for (a, b) in [
        (&pf.granularity, &pr.granularity),
        (&pf.generalization_intensity, &pr.generalization_intensity),
        (&pf.ambiguity, &pr.ambiguity),
    ] {
        let mut x = vec![a.value, a.loss, a.quality];
        let mut y = vec![b.value, b.loss, b.quality];
        x.extend(a.attributes.iter().flatten());
        y.extend(b.attributes.iter().flatten());
        prop_assert_eq!(x.len(), y.len());
        for (u, v) in x.iter().zip(&y) {
            prop_assert!(
                (u - v).abs() <= 1e-12 * u.abs().max(1.0),
                "{:?} / {:?}",
                a,
                b
            );
        }
    }
    prop_assert_eq!(
        RiskReport::output(f, &ef, 0.2),
        RiskReport::output(r, &er, 0.2)
    );
    for mode in SuppressedRecords::ALL {
        let (of, or) = (csv(f, &ef, mode), csv(r, &er, mode));
        if f.config().count_column.is_none() {
            prop_assert_eq!(&of, &or);
        }
        prop_assert_eq!(records(&of), records(&or));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]
    #[test]
    fn data_at_a_floor_give_what_the_raw_data_give_from_that_level(c in case()) {
        let (raw, floor) = tables(&c);
        for model in models() {
            let r = Problem::new(raw.clone(), config(&c, false, model));
            let f = Problem::new(floor.clone(), config(&c, true, model));
            let (r, f) = match (r, f) {
                (Ok(r), Ok(f)) => (r, f),
                (Err(_), Err(_)) => return Ok(()),
                (r, f) => {
                    return Err(TestCaseError::fail(format!(
                        "one problem failed: {:?} / {:?}", r.err(), f.err()
                    )))
                }
            };
            prop_assert_eq!(f.rows(), r.rows());
            prop_assert_eq!(f.lattice().min(), r.lattice().min());
            prop_assert_eq!(f.lattice().max(), r.lattice().max());
            let cancel = CancelFlag::new();
            let sf = search(&f, &flash(), &cancel, &NoObserver).unwrap();
            let sr = search(&r, &flash(), &cancel, &NoObserver).unwrap();
            let best = |o: &deid_engine::SearchOutcome| {
                o.best.as_ref().map(|b| (b.levels.to_vec(), b.score, b.suppressed))
            };
            prop_assert_eq!(best(&sf), best(&sr), "{}", model.name());
            prop_assert_eq!(sf.optimal_proven, sr.optimal_proven);
            let mut nodes = Vec::new();
            f.lattice().for_each(|t| nodes.push(t.to_vec()));
            for levels in &nodes {
                same_evaluation(&f, &r, levels)?;
            }
        }
    }
}

/// adult with `age` and `education` given at level 1 (generalized here from the hierarchy
/// tables), as records and as a frequency table: the same Flash optimum, scores and output as
/// the raw data with `min_level` 1 (Loss, Precision, Discernibility, AECS; 5 % suppression).
#[test]
fn adult_at_a_floor_reproduces_min_level_on_the_raw_data() {
    let ds = ArxDataset::load(Path::new("../../examples/adult"), "adult").unwrap();
    let floored = ["age", "education"];
    let t = &ds.table;
    let mut header: Vec<&str> = t.columns().iter().map(|c| c.name.as_str()).collect();
    let mut rows: Vec<Vec<String>> = Vec::with_capacity(t.rows());
    let maps: Vec<Option<HashMap<&str, &str>>> = (t.columns().iter())
        .map(|c| {
            let q = ds.quasi_identifiers.iter().find(|q| q.column == c.name)?;
            floored.contains(&c.name.as_str()).then(|| {
                (q.hierarchy.rows().iter())
                    .map(|r| (r[0].as_str(), r[1].as_str()))
                    .collect()
            })
        })
        .collect();
    for row in 0..t.rows() {
        rows.push(
            (t.columns().iter().zip(&maps))
                .map(|(c, m)| {
                    let v = c.dict.value(c.codes.get(row));
                    m.as_ref().map_or(v, |m| m[v]).to_string()
                })
                .collect(),
        );
    }
    let floor = Table::from_rows(&header, &rows).unwrap();
    let mut counts: HashMap<&[String], u32> = HashMap::new();
    let mut order = Vec::new();
    for row in &rows {
        let n = counts.entry(row.as_slice()).or_insert(0);
        if *n == 0 {
            order.push(row.as_slice());
        }
        *n += 1;
    }
    let grouped: Vec<Vec<String>> = (order.iter())
        .map(|r| {
            let mut g = r.to_vec();
            g.push(counts[r].to_string());
            g
        })
        .collect();
    header.push("n");
    let grouped = Table::from_rows(&header, &grouped).unwrap();
    assert!(grouped.rows() < t.rows());
    let config = |floor: bool, count: bool, model: QualityModel| {
        let mut qis = ds.quasi_identifiers.clone();
        for q in &mut qis {
            if floored.contains(&q.column.as_str()) {
                if floor {
                    q.data_level = 1;
                } else {
                    q.min_level = Some(1);
                }
            }
        }
        ProblemConfig {
            quasi_identifiers: qis,
            privacy: vec![PrivacyModel::KAnonymity { k: 5 }],
            suppression_limit: 0.05,
            quality: QualityConfig {
                model,
                ..Default::default()
            },
            count_column: count.then(|| "n".into()),
            ..Default::default()
        }
    };
    let cancel = CancelFlag::new();
    for model in [
        QualityModel::Loss,
        QualityModel::Precision,
        QualityModel::Discernibility,
        QualityModel::Aecs,
    ] {
        let r = Problem::new(ds.table.clone(), config(false, false, model)).unwrap();
        let sr = search(&r, &flash(), &cancel, &NoObserver).unwrap();
        let best = sr.best.expect("an anonymous transformation");
        let er = Checker::new(&r).evaluate(&best.levels);
        let raw_csv = csv(&r, &er, SuppressedRecords::Mask);
        for (table, count) in [(&floor, false), (&grouped, true)] {
            let f = Problem::new(table.clone(), config(true, count, model)).unwrap();
            let sf = search(&f, &flash(), &cancel, &NoObserver).unwrap();
            let bf = sf.best.expect("an anonymous transformation");
            assert_eq!(bf.levels, best.levels, "{}", model.name());
            assert_eq!((bf.score, bf.suppressed), (best.score, best.suppressed));
            let ef = Checker::new(&f).evaluate(&bf.levels);
            assert_eq!(ef.quality.score, er.quality.score);
            assert_eq!(ef.quality.per_attribute, er.quality.per_attribute);
            let floor_csv = csv(&f, &ef, SuppressedRecords::Mask);
            if count {
                assert_eq!(records(&floor_csv), records(&raw_csv));
            } else {
                assert_eq!(floor_csv, raw_csv);
            }
        }
    }
}

fn small(values: &[&str], data_level: u8) -> Result<Problem, EngineError> {
    let rows: Vec<Vec<String>> = values.iter().map(|v| vec![v.to_string()]).collect();
    let table = Table::from_rows(&["a"], &rows).unwrap();
    let (ha, _) = hierarchies();
    let mut q = QuasiIdentifier::new("a", ha);
    q.data_level = data_level;
    let config = ProblemConfig {
        quasi_identifiers: vec![q],
        privacy: vec![PrivacyModel::KAnonymity { k: 1 }],
        ..Default::default()
    };
    Problem::new(table, config)
}

fn field(e: EngineError) -> (String, String) {
    let (field, message) = e.config_error().expect("a configuration error");
    (field.to_string(), message)
}

#[test]
fn a_floor_above_the_hierarchy_is_refused() {
    let (f, message) = field(small(&["*"], 4).unwrap_err());
    assert_eq!(f, "attributes.a.data_level");
    assert!(message.contains("levels 0..=3, got 4"), "{message}");
    // The top level itself is a floor (one value).
    let p = small(&["*"], 3).unwrap();
    assert_eq!(
        (p.lattice().min(), p.lattice().max()),
        (&[3u8][..], &[3u8][..])
    );
}

#[test]
fn values_that_are_no_label_of_the_floor_are_listed() {
    // Leaves and labels of level 2 are not labels of level 1.
    let e = small(&["p0", "a3", "q1", "p2", "a3"], 1).unwrap_err();
    assert_eq!(
        e,
        EngineError::HierarchyMissingLabels {
            column: "a".into(),
            level: 1,
            missing: vec!["a3".into(), "q1".into()],
            total_missing: 2,
        }
    );
    assert_eq!(
        e.to_string(),
        "hierarchy of column 'a' has no label at level 1 (the data_level) for 2 value(s) of the \
         data, e.g. 'a3', 'q1'"
    );
}

#[test]
fn a_floor_above_max_level_and_entropy_models_are_refused() {
    let rows = vec![vec!["p1".to_string()]];
    let (ha, _) = hierarchies();
    let mut q = QuasiIdentifier::new("a", ha);
    q.data_level = 2;
    q.max_level = Some(1);
    let mut config = ProblemConfig {
        quasi_identifiers: vec![q],
        privacy: vec![PrivacyModel::KAnonymity { k: 1 }],
        ..Default::default()
    };
    let table = Table::from_rows(&["a"], &rows).unwrap();
    let (f, message) = field(Problem::new(table.clone(), config.clone()).unwrap_err());
    assert_eq!(f, "attributes.a.data_level");
    assert!(message.contains("above max_level 1"), "{message}");
    // min_level below the floor is lifted to it.
    config.quasi_identifiers[0].data_level = 1;
    config.quasi_identifiers[0].max_level = None;
    config.quasi_identifiers[0].min_level = Some(0);
    let p = Problem::new(table.clone(), config.clone()).unwrap();
    assert_eq!(p.lattice().min(), &[1u8][..]);
    for model in [
        QualityModel::Entropy,
        QualityModel::NormalizedEntropy,
        QualityModel::KlDivergence,
    ] {
        config.quality.model = model;
        let e = config.validate_models(1, None, false).unwrap_err();
        let (f, message) = field(e);
        assert_eq!(f, "attributes.a.data_level");
        assert!(message.contains(model.name()), "{message}");
        assert!(Problem::new(table.clone(), config.clone()).is_err());
    }
    // Without a floor the same models are accepted.
    config.quasi_identifiers[0].data_level = 0;
    let table = Table::from_rows(&["a"], &[vec!["a1".to_string()]]).unwrap();
    assert!(Problem::new(table, config).is_ok());
}
