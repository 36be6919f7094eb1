//! Shared helpers of the integration tests.
#![allow(dead_code)]

pub mod independent;

use std::path::Path;

use deid_engine::dataset::ArxDataset;
use deid_engine::privacy::PrivacyModel;
use deid_engine::{Checker, Evaluation, Problem, ProblemConfig};

/// adult from `examples/adult` with all nine quasi-identifiers.
pub fn adult(privacy: Vec<PrivacyModel>, suppression_limit: f64) -> Problem {
    let ds = ArxDataset::load(Path::new("../../examples/adult"), "adult").expect("adult loads");
    let config = ProblemConfig {
        quasi_identifiers: ds.quasi_identifiers,
        privacy,
        suppression_limit,
        ..Default::default()
    };
    Problem::new(ds.table, config).expect("valid problem")
}

/// adult with `sensitive` as the sensitive attribute and the other eight columns as
/// quasi-identifiers.
pub fn adult_with_sensitive(
    sensitive: &str,
    privacy: Vec<PrivacyModel>,
    suppression_limit: f64,
) -> Problem {
    let ds = ArxDataset::load(Path::new("../../examples/adult"), "adult").expect("adult loads");
    let config = ProblemConfig {
        quasi_identifiers: ds
            .quasi_identifiers
            .into_iter()
            .filter(|q| q.column != sensitive)
            .collect(),
        sensitive: vec![deid_engine::SensitiveAttribute {
            column: sensitive.into(),
            hierarchy: None,
        }],
        privacy,
        suppression_limit,
        ..Default::default()
    };
    Problem::new(ds.table, config).expect("valid problem")
}

/// The anonymized CSV of an evaluation, as text (`;`-separated), with the sensitive values of
/// suppressed records kept: the independent verifier takes the global distribution of each
/// sensitive attribute (t-closeness, δ-disclosure, β-likeness) from the output's column, which must
/// then hold every record's value, as the engine's does.
pub fn output_csv(problem: &Problem, eval: &Evaluation) -> String {
    let options = deid_engine::output::OutputOptions {
        suppressed: deid_engine::output::SuppressedRecords::KeepSensitive,
        ..Default::default()
    };
    output_csv_with(problem, eval, &options)
}

/// The anonymized CSV of an evaluation with the given output options.
pub fn output_csv_with(
    problem: &Problem,
    eval: &Evaluation,
    options: &deid_engine::output::OutputOptions,
) -> String {
    let mut buf = Vec::new();
    deid_engine::output::write_csv(problem, eval, &mut buf, b';', options).unwrap();
    String::from_utf8(buf).unwrap()
}

/// Evaluates `levels` and returns the output CSV.
pub fn anonymize(problem: &Problem, levels: &[u8]) -> (Evaluation, String) {
    let eval = Checker::new(problem).evaluate(levels);
    let csv = output_csv(problem, &eval);
    (eval, csv)
}

/// Names of the quasi-identifiers.
pub fn qi_names(problem: &Problem) -> Vec<String> {
    problem
        .quasi_identifiers()
        .iter()
        .map(|q| q.column.clone())
        .collect()
}
