//! `deid_engine::verify` on real outputs: the CSV the engine writes for a search's result (every
//! suppression mode, several models, local generalization, a frequency table, a research
//! subset, population models) passes; tampered outputs fail naming the model and the number of
//! violating classes; unreadable released data are errors naming the column or the row.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use deid_engine::config::ResearchSubset;
use deid_engine::dataset::ArxDataset;
use deid_engine::local::{LocalConfig, LocalObserver, LocalStep, local_search};
use deid_engine::output::{OutputOptions, Recoding, SuppressedRecords, suppressed_block_holds};
use deid_engine::population::PopulationModel;
use deid_engine::verify::{Released, VerifyConfig, VerifyReport, verify};
use deid_engine::{
    Algorithm, CancelFlag, Checker, EngineError, Hierarchy, NoObserver, PrivacyModel, Problem,
    ProblemConfig, QuasiIdentifier, SearchConfig, SensitiveAttribute, Table, search,
};

/// adult with `sensitive` (and its hierarchy, for hierarchical t-closeness) and the first `qis`
/// of the other columns as quasi-identifiers.
fn adult(privacy: &[&str], limit: f64, qis: usize, population: Option<PopulationModel>) -> Problem {
    let ds = ArxDataset::load(Path::new("../../examples/adult"), "adult").unwrap();
    let (sensitive, others): (Vec<QuasiIdentifier>, Vec<QuasiIdentifier>) = ds
        .quasi_identifiers
        .into_iter()
        .partition(|q| q.column == "occupation");
    let config = ProblemConfig {
        quasi_identifiers: others.into_iter().take(qis).collect(),
        sensitive: vec![SensitiveAttribute {
            column: "occupation".into(),
            hierarchy: Some(sensitive[0].hierarchy.clone()),
        }],
        privacy: privacy
            .iter()
            .map(|m| PrivacyModel::parse(m).unwrap())
            .collect(),
        suppression_limit: limit,
        population,
        ..Default::default()
    };
    Problem::new(ds.table, config).unwrap()
}

/// The levels Flash finds.
fn best(p: &Problem) -> Vec<u8> {
    let config = SearchConfig {
        algorithm: Algorithm::Flash,
        time_limit: Duration::from_secs(600),
        seed: 1,
        ..Default::default()
    };
    let outcome = search(p, &config, &CancelFlag::new(), &NoObserver).unwrap();
    outcome.best.expect("a solution").levels
}

/// The CSV the engine writes (`,`-separated).
fn output<R: Recoding + ?Sized>(p: &Problem, r: &R, options: &OutputOptions) -> String {
    let mut buf = Vec::new();
    deid_engine::output::write_csv(p, r, &mut buf, b',', options).unwrap();
    String::from_utf8(buf).unwrap()
}

/// What to verify for `p`'s models written with `options`.
fn config(p: &Problem, options: &OutputOptions) -> VerifyConfig {
    VerifyConfig {
        quasi_identifiers: p
            .quasi_identifiers()
            .iter()
            .map(|q| q.column.clone())
            .collect(),
        sensitive: p
            .config()
            .sensitive
            .iter()
            .map(|s| s.column.clone())
            .collect(),
        models: p.config().privacy.clone(),
        suppressed: options.suppressed,
        marker: options.marker.clone(),
        count_column: p.config().count_column.clone(),
        show_values: false,
    }
}

fn check(config: VerifyConfig, csv: &str, p: &Problem) -> VerifyReport {
    let released = Released::read(config, csv.as_bytes(), b',', &CancelFlag::new()).unwrap();
    verify(&released, Some(p)).unwrap()
}

fn mode(suppressed: SuppressedRecords) -> OutputOptions {
    OutputOptions {
        suppressed,
        ..OutputOptions::default()
    }
}

/// Every suppression mode: mask and remove pass; keep_sensitive passes exactly when the
/// suppressed block satisfies the models (the engine's `suppressed_block_holds`).
fn passes_in_every_mode(p: &Problem) {
    let levels = best(p);
    let eval = Checker::new(p).evaluate(&levels);
    assert!(eval.result.anonymous);
    for suppressed in [
        SuppressedRecords::Mask,
        SuppressedRecords::Remove,
        SuppressedRecords::KeepSensitive,
    ] {
        let options = mode(suppressed);
        let report = check(config(p, &options), &output(p, &eval, &options), p);
        let what = format!("{:?} {suppressed:?}: {report:?}", p.config().privacy);
        let published: u64 = report.class_sizes.iter().map(|b| b.records).sum();
        assert_eq!(
            published + report.suppressed_records,
            report.released_records
        );
        match suppressed {
            SuppressedRecords::Remove => {
                assert!(report.passed, "{what}");
                assert_eq!(report.suppressed_records, 0, "{what}");
                assert_eq!(report.removed_records, Some(eval.result.suppressed as u64));
            }
            SuppressedRecords::Mask => {
                assert!(report.passed, "{what}");
                assert_eq!(report.suppressed_records, eval.result.suppressed as u64);
            }
            SuppressedRecords::KeepSensitive => {
                let holds = suppressed_block_holds(p, &eval, &options);
                assert_eq!(report.passed, holds, "{what}");
                if !holds {
                    assert!(
                        report
                            .models
                            .iter()
                            .any(|m| { m.violations.iter().any(|v| v.suppressed_block) })
                    );
                }
            }
        }
        assert_eq!(report.models.len(), p.config().privacy.len());
    }
}

#[test]
fn outputs_of_class_based_models_pass() {
    for privacy in [
        &[
            "k-anonymity(k=5)",
            "distinct-l-diversity(attribute=occupation,l=3)",
        ][..],
        &["entropy-l-diversity(attribute=occupation,l=2)"],
        &["recursive-l-diversity(attribute=occupation,c=3,l=2)"],
        &["t-closeness(attribute=occupation,t=0.3,distance=equal)"],
        &["t-closeness(attribute=occupation,t=0.3,distance=ordered)"],
        &[
            "k-anonymity(k=2)",
            "t-closeness(attribute=occupation,t=0.3,distance=hierarchical)",
        ],
        &["delta-disclosure(attribute=occupation,delta=2.5)"],
        &["basic-beta-likeness(attribute=occupation,beta=2)"],
        &["enhanced-beta-likeness(attribute=occupation,beta=2)"],
    ] {
        passes_in_every_mode(&adult(privacy, 0.05, 5, None));
    }
}

#[test]
fn outputs_of_risk_and_population_models_pass() {
    let usa = || Some(PopulationModel::Size(240_000_000));
    for (privacy, population) in [
        (&["average-risk(threshold=0.2)"][..], None),
        (
            &["average-risk(threshold=0.2,highest=0.5,records_at_risk=0.05)"],
            None,
        ),
        (&["sample-uniqueness(threshold=0.01)"], None),
        (&["population-uniqueness(threshold=0.01)"], usa()),
        (&["k-map(k=1000,alpha=0.01)"], usa()),
    ] {
        passes_in_every_mode(&adult(privacy, 0.05, 6, population));
    }
}

/// Tampering with a masked k-anonymous output: one suppressed row shown with its input values,
/// then one row moved from a class of exactly k records into another class.
#[test]
fn tampered_outputs_fail_naming_the_model_and_the_classes() {
    let p = adult(
        &[
            "k-anonymity(k=5)",
            "distinct-l-diversity(attribute=occupation,l=2)",
        ],
        0.05,
        5,
        None,
    );
    let eval = Checker::new(&p).evaluate(&best(&p));
    assert!(
        eval.result.suppressed > 0,
        "the test needs suppressed records"
    );
    let options = OutputOptions::default();
    let csv = output(&p, &eval, &options);
    let mut rows: Vec<Vec<String>> = csv.lines().map(split).collect();
    let header = rows[0].clone();
    let qi: Vec<usize> = (p.quasi_identifiers().iter())
        .map(|q| header.iter().position(|h| *h == q.column).unwrap())
        .collect();
    let original = rows.clone();

    // 1. Un-suppress one row: its input values (output rows follow the input rows).
    let r = (1..rows.len()).find(|&r| rows[r][qi[0]] == "*").unwrap();
    let table = p.table();
    for (c, cell) in rows[r].iter_mut().enumerate() {
        let col = table.column(table.column_index(&header[c]).unwrap());
        *cell = col.dict.value(col.codes.get(r - 1)).to_string();
    }
    let report = check(config(&p, &options), &join(&rows), &p);
    assert!(!report.passed);
    let k = &report.models[0];
    assert_eq!(k.model, "k-anonymity(k=5)");
    assert!(!k.passed);
    assert_eq!((k.violating_classes, k.violating_records), (1, 1), "{k:?}");
    assert_eq!(report.suppressed_records, eval.result.suppressed as u64 - 1);
    assert!(!report.models[1].passed);
    assert!(
        k.violations[0].values.is_none(),
        "no values unless asked for"
    );

    // 2. One row of a class of exactly 5 records takes the values of another class.
    let mut rows = original;
    let mut classes: HashMap<Vec<String>, Vec<usize>> = HashMap::new();
    for (r, row) in rows.iter().enumerate().skip(1) {
        let key: Vec<String> = qi.iter().map(|&c| row[c].clone()).collect();
        if key[0] != "*" {
            classes.entry(key).or_default().push(r);
        }
    }
    let (small, members) = classes.iter().find(|(_, m)| m.len() == 5).unwrap();
    let other = classes.keys().find(|k| *k != small).unwrap().clone();
    for (i, &c) in qi.iter().enumerate() {
        rows[members[0]][c] = other[i].clone();
    }
    let mut asked = config(&p, &options);
    asked.show_values = true;
    let report = check(asked, &join(&rows), &p);
    let k = &report.models[0];
    assert!(!k.passed && !report.passed);
    assert_eq!((k.violating_classes, k.violating_records), (1, 4), "{k:?}");
    assert_eq!(k.violations[0].values.as_ref(), Some(small));
}

/// Splits a CSV line of the test outputs (adult has no quoted cells).
fn split(line: &str) -> Vec<String> {
    line.split(',').map(String::from).collect()
}

fn join(rows: &[Vec<String>]) -> String {
    rows.iter().map(|r| r.join(",") + "\n").collect()
}

/// Local generalization's output (classes from several steps) passes.
#[test]
fn local_generalization_output_passes() {
    struct Quiet;
    impl LocalObserver for Quiet {
        fn step_done(&self, _: &LocalStep, _: usize) {}
    }
    let p = adult(
        &[
            "k-anonymity(k=5)",
            "distinct-l-diversity(attribute=occupation,l=2)",
        ],
        0.05,
        4,
        None,
    );
    let budget = SearchConfig {
        algorithm: Algorithm::Flash,
        check_limit: Some(100_000),
        time_limit: Duration::from_secs(600),
        seed: 1,
        ..Default::default()
    };
    let config_local = LocalConfig {
        iterations: 10,
        ..LocalConfig::default()
    };
    let local = local_search(&p, &config_local, &budget, &CancelFlag::new(), &Quiet).unwrap();
    assert!(local.has_solution());
    for suppressed in [SuppressedRecords::Mask, SuppressedRecords::Remove] {
        let options = mode(suppressed);
        let report = check(config(&p, &options), &output(&p, &local, &options), &p);
        assert!(report.passed, "{report:?}");
    }
}

/// Eight people (zip, age, in_study, n): records 1, 4 and 7 are in the study.
fn people() -> Table {
    const ZIPS: [&str; 8] = [
        "47677", "47602", "47678", "47905", "47909", "47906", "47673", "47607",
    ];
    const AGES: [&str; 8] = ["29", "22", "27", "43", "52", "47", "30", "36"];
    const N: [u32; 8] = [3, 1, 2, 5, 1, 1, 4, 2];
    let rows: Vec<Vec<String>> = (0..8)
        .map(|i| {
            let study = if matches!(i, 0 | 3 | 6) { "yes" } else { "no" };
            vec![
                ZIPS[i].into(),
                AGES[i].into(),
                study.into(),
                N[i].to_string(),
            ]
        })
        .collect();
    Table::from_rows(&["zip", "age", "in_study", "n"], &rows).unwrap()
}

fn people_problem(privacy: &str, subset: bool, counts: bool) -> Problem {
    let table = people();
    let column = |name: &str, generalize: &dyn Fn(&str) -> [String; 2]| {
        let c = table.column(table.column_index(name).unwrap());
        let rows = (c.dict.values())
            .map(|v| {
                let [a, b] = generalize(v);
                vec![v.to_string(), a, b]
            })
            .collect();
        Hierarchy::from_rows(rows, name).unwrap()
    };
    let zip = column("zip", &|z| [format!("{}**", &z[..3]), "*".into()]);
    let age = column("age", &|a| {
        let band = if a.parse::<u32>().unwrap() < 40 {
            "20-39"
        } else {
            "40-59"
        };
        [band.into(), "*".into()]
    });
    let config = ProblemConfig {
        quasi_identifiers: vec![
            QuasiIdentifier::new("zip", zip),
            QuasiIdentifier::new("age", age),
        ],
        privacy: privacy
            .split(';')
            .map(|m| PrivacyModel::parse(m).unwrap())
            .collect(),
        research_subset: subset.then(|| ResearchSubset::Column {
            column: "in_study".into(),
            value: None,
        }),
        count_column: counts.then(|| "n".into()),
        ..Default::default()
    };
    Problem::new(table, config).unwrap()
}

/// δ-presence and k-map with a research subset: the output passes; a released row moved to
/// the other class breaks δ (2 + 1 of 5 records released).
#[test]
fn research_subset_outputs_pass_and_tampering_fails() {
    for privacy in ["delta-presence(delta_min=0.3,delta_max=0.5)", "k-map(k=3)"] {
        let p = people_problem(privacy, true, false);
        let eval = Checker::new(&p).evaluate(&best(&p));
        let options = OutputOptions::default();
        let csv = output(&p, &eval, &options);
        assert_eq!(csv.lines().count(), 4, "{csv}");
        let report = check(config(&p, &options), &csv, &p);
        assert!(report.passed, "{privacy}: {report:?}");
        let tampered = csv.replace("479**,40-59", "476**,20-39");
        let report = check(config(&p, &options), &tampered, &p);
        let verdict = &report.models[0];
        if privacy.starts_with("delta") {
            assert!(!verdict.passed, "{report:?}");
            assert_eq!(verdict.violating_classes, 1);
            assert_eq!(verdict.violations[0].size, 3);
        }
    }
}

/// A frequency table's output (a frequency table) passes with its count column; read without
/// it (one record per row) the classes are too small.
#[test]
fn frequency_table_outputs_pass() {
    let p = people_problem("k-anonymity(k=6)", false, true);
    let eval = Checker::new(&p).evaluate(&best(&p));
    let options = OutputOptions::default();
    let csv = output(&p, &eval, &options);
    let report = check(config(&p, &options), &csv, &p);
    assert!(report.passed, "{report:?}");
    assert_eq!(report.released_records, 19);
    assert_eq!(report.released_rows, 8);
    let mut rows_only = config(&p, &options);
    rows_only.count_column = None;
    assert!(!check(rows_only, &csv, &p).passed);
}

#[test]
fn unreadable_released_data_name_the_column_or_the_row() {
    let p = people_problem("k-anonymity(k=6)", false, true);
    let config = config(&p, &OutputOptions::default());
    let read =
        |text: &str| Released::read(config.clone(), text.as_bytes(), b',', &CancelFlag::new());
    let e = read("zip,n\n476**,3\n").unwrap_err();
    assert!(
        matches!(&e, EngineError::UnknownColumn { name, .. } if name == "age"),
        "{e:?}"
    );
    let e = read("zip,age,n\n476**,20-39,3\n476**,20-39,x\n").unwrap_err();
    let (field, message) = e.config_error().unwrap();
    assert_eq!(field, "count_column");
    assert!(
        message.contains("row 2") && message.contains("'x'"),
        "{message}"
    );
    let e = read("zip,age,n\n476**,20-39\n").unwrap_err();
    assert!(matches!(e, EngineError::RaggedRow { row: 2, .. }), "{e:?}");
}
