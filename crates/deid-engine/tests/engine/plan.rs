//! The recoding plan (`docs/definitions.md` §7): applied to the data it was made on, it writes
//! byte for byte what the output writer writes — for random tables, every transformation,
//! local generalization, microaggregation, frequency tables (with a subset count column), every
//! suppression mode, markers that need quoting and neutralized formulas — after a round trip
//! through JSON. Rows the plan does not cover are suppressed and counted, or refused in strict
//! mode; a plan of another format or version, and an input with other columns, are refused.

use std::time::Duration;

use deid_engine::aggregate::{AggregateFunction, Microaggregation, MissingValues};
use deid_engine::local::{LocalConfig, LocalMethod, local_search};
use deid_engine::output::{OutputOptions, SuppressedRecords, write_csv};
use deid_engine::plan::{Applied, Applier, Plan, Stepped};
use deid_engine::{
    Algorithm, CancelFlag, Checker, CsvOptions, Hierarchy, PrivacyModel, Problem, ProblemConfig,
    QuasiIdentifier, SearchConfig, SensitiveAttribute, Table,
};
use proptest::prelude::*;

/// A random table: rows of (a, b, s, m, count, subset share in quarters).
#[derive(Debug, Clone)]
struct Case {
    rows: Vec<(u8, u8, u8, u8, u8, u8)>,
    k: u32,
    limit: f64,
    micro: Option<usize>,
    frequency: bool,
    subset: bool,
    mode: usize,
    marker: &'static str,
    neutralize: bool,
    levels: (u8, u8),
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((0u8..6, 0u8..3, 0u8..3, 1u8..6, 0u8..4, 0u8..5), 1..30),
        1u32..4,
        prop::sample::select(vec![0.0, 0.1, 0.5, 1.0]),
        prop::option::of(0..AggregateFunction::ALL.len()),
        (any::<bool>(), any::<bool>()),
        0..SuppressedRecords::ALL.len(),
        prop::sample::select(vec!["*", "-", "a;\"b\"", "[x]"]),
        any::<bool>(),
        (0u8..3, 0u8..2),
    )
        .prop_map(
            |(rows, k, limit, micro, (frequency, subset), mode, marker, neutralize, levels)| Case {
                rows,
                k,
                limit,
                micro,
                frequency,
                subset: frequency && subset,
                mode,
                marker,
                neutralize,
                levels,
            },
        )
}

/// The input CSV (`;`-separated; with a count column `n` and a subset count column `sub` for a
/// frequency table). Values include a formula-like `=a…` and one with the delimiter.
fn input_csv(c: &Case) -> String {
    let mut text = String::from(if c.frequency {
        "id;a;n;b;s;m;sub\n"
    } else {
        "id;a;b;s;m\n"
    });
    for (i, r) in c.rows.iter().enumerate() {
        let a = if r.0 == 5 {
            "\"=a;5\"".to_string()
        } else {
            format!("a{}", r.0)
        };
        let (b, s, m) = (
            format!("b{}", r.1),
            format!("-s{}", r.2),
            u32::from(r.3) * 10,
        );
        if c.frequency {
            let n = u32::from(r.4) + u32::from(i == 0);
            let sub = if c.subset { n * u32::from(r.5) / 4 } else { n };
            text += &format!("{i};{a};{n:03};{b};{s};{m};{sub}\n");
        } else {
            text += &format!("{i};{a};{b};{s};{m}\n");
        }
    }
    text
}

fn hierarchy(name: &str, leaves: &[String], group: usize) -> Hierarchy {
    let rows = (leaves.iter().enumerate())
        .map(|(i, v)| vec![v.clone(), format!("{name}{}", i / group), "*".into()])
        .collect();
    Hierarchy::from_rows(rows, name).unwrap()
}

/// The problem of case `c` on `text` (`Err`: e.g. fewer records than k).
fn try_problem(c: &Case, text: &str) -> deid_engine::Result<Problem> {
    let options = CsvOptions {
        delimiter: b';',
        has_header: true,
    };
    let table = Table::read_csv(text.as_bytes(), options, "input").unwrap();
    let a: Vec<String> = (0..5)
        .map(|v| format!("a{v}"))
        .chain(["=a;5".into()])
        .collect();
    let b: Vec<String> = (0..3).map(|v| format!("b{v}")).collect();
    let micro = c.micro.map(|f| Microaggregation {
        column: "m".into(),
        function: AggregateFunction::ALL[f],
        missing: MissingValues::Ignore,
        date_format: None,
    });
    let config = ProblemConfig {
        quasi_identifiers: vec![
            QuasiIdentifier::new("a", hierarchy("a", &a, 2)),
            QuasiIdentifier::new("b", hierarchy("b", &b, 3)),
        ],
        sensitive: vec![SensitiveAttribute {
            column: "s".into(),
            hierarchy: None,
        }],
        identifying: vec!["id".into()],
        microaggregated: micro.into_iter().collect(),
        privacy: vec![PrivacyModel::KAnonymity { k: c.k }],
        suppression_limit: c.limit,
        count_column: c.frequency.then(|| "n".into()),
        subset_count_column: c.subset.then(|| "sub".into()),
        ..Default::default()
    };
    Problem::new(table, config)
}

fn problem(c: &Case, text: &str) -> Problem {
    try_problem(c, text).unwrap()
}

fn options(c: &Case) -> OutputOptions {
    OutputOptions {
        suppressed: SuppressedRecords::ALL[c.mode],
        marker: c.marker.into(),
        neutralize_formulas: c.neutralize,
    }
}

/// The plan of `recoding` through JSON, applied to `text`: (output, what apply did).
fn apply(plan: &Plan, text: &str, strict: bool) -> deid_engine::Result<(String, Applied)> {
    let json = serde_json::to_string(plan).unwrap();
    let plan: Plan = serde_json::from_str(&json).unwrap();
    let applier = Applier::new(&plan)?;
    let mut out = Vec::new();
    let applied = applier.apply(text.as_bytes(), &mut out, "input", strict)?;
    Ok((String::from_utf8(out).unwrap(), applied))
}

/// Asserts that the plan of `recoding` reproduces the writer's bytes on `text`, and returns it.
fn reproduces<R: Stepped + ?Sized>(
    p: &Problem,
    recoding: &R,
    o: &OutputOptions,
    text: &str,
) -> Result<Plan, TestCaseError> {
    let mut written = Vec::new();
    let w = write_csv(p, recoding, &mut written, b';', o).unwrap();
    let plan = Plan::of(p, recoding, o, b';').unwrap();
    let (applied, a) = apply(&plan, text, true).unwrap();
    prop_assert_eq!(applied, String::from_utf8(written).unwrap());
    prop_assert_eq!((a.rows as usize, a.records as usize), (w.rows, w.records));
    prop_assert_eq!((a.removed as usize, a.uncovered_rows), (w.removed, 0));
    Ok(plan)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Every transformation of the lattice's corner and middle, and local generalization: the
    /// plan writes the writer's bytes.
    #[test]
    fn the_plan_writes_what_the_writer_writes(c in case()) {
        let text = input_csv(&c);
        let p = try_problem(&c, &text);
        prop_assume!(p.is_ok());
        let p = p.unwrap();
        let o = options(&c);
        let eval = Checker::new(&p).evaluate(&[c.levels.0, c.levels.1]);
        reproduces(&p, &eval, &o, &text)?;
        let search = SearchConfig {
            algorithm: Algorithm::Flash,
            time_limit: Duration::from_secs(600),
            ..Default::default()
        };
        for method in [LocalMethod::Steps, LocalMethod::Sweep] {
            let local = LocalConfig { iterations: 4, method, ..LocalConfig::default() };
            if let Ok(outcome) = local_search(&p, &local, &search, &CancelFlag::new(), &Quiet)
                && outcome.anonymous
            {
                let plan = reproduces(&p, &outcome, &o, &text)?;
                prop_assert_eq!(plan.steps.len(), outcome.refined.len() + outcome.steps.len());
            }
        }
    }
}

struct Quiet;

impl deid_engine::local::LocalObserver for Quiet {}

fn simple() -> (Case, String) {
    let c = Case {
        rows: (0..40).map(|i| (i % 5, i % 3, i % 3, 1, 1, 4)).collect(),
        k: 3,
        limit: 0.0,
        micro: None,
        frequency: false,
        subset: false,
        mode: 0,
        marker: "*",
        neutralize: false,
        levels: (0, 0),
    };
    let text = input_csv(&c);
    (c, text)
}

/// A value the data never had and a combination of values no class has are suppressed and
/// counted; in strict mode the first is an error naming the row and the column.
#[test]
fn rows_the_plan_does_not_cover_are_suppressed_and_counted() {
    let (c, text) = simple();
    let p = problem(&c, &text);
    let eval = Checker::new(&p).evaluate(&[1, 0]);
    let plan = Plan::of(&p, &eval, &options(&c), b';').unwrap();
    let new = "id;a;b;s;m\n1;a0;b0;-s0;10\n2;a9;b0;-s1;20\n3;a1;b2;-s2;30\n";
    let (out, applied) = apply(&plan, new, false).unwrap();
    assert_eq!(out, "a;b;s;m\na0;b0;-s0;10\n*;*;*;20\na0;b2;-s2;30\n");
    assert_eq!((applied.uncovered_rows, applied.uncovered_records), (1, 1));
    let err = apply(&plan, new, true).unwrap_err().to_string();
    assert!(err.contains("row 2") && err.contains("column 'a'"), "{err}");
    // A tuple of known values whose class the plan does not have (all classes of a level
    // that never occurred together).
    let mut narrow = plan.clone();
    narrow.classes.truncate(1);
    narrow.steps[0].publishes.retain(|&c| c == 0);
    let (_, applied) = apply(&narrow, &text, false).unwrap();
    assert!(applied.uncovered_rows > 0);
    let err = apply(&narrow, &text, true).unwrap_err().to_string();
    assert!(err.contains("no class of the plan"), "{err}");
}

/// Another format or version, a broken class reference and an input with other columns are
/// refused, naming the field or the column.
#[test]
fn plans_of_another_version_or_for_other_columns_are_refused() {
    let (c, text) = simple();
    let p = problem(&c, &text);
    let eval = Checker::new(&p).evaluate(&[0, 0]);
    let plan = Plan::of(&p, &eval, &options(&c), b';').unwrap();
    let mut other = plan.clone();
    other.version = 2;
    let err = apply(&other, &text, false).unwrap_err().to_string();
    assert!(
        err.contains("'version'") && err.contains("version 2"),
        "{err}"
    );
    let mut other = plan.clone();
    other.format = "arx".into();
    assert!(
        apply(&other, &text, false)
            .unwrap_err()
            .to_string()
            .contains("'format'")
    );
    let mut other = plan.clone();
    other.steps[0].publishes.push(9999);
    let err = apply(&other, &text, false).unwrap_err().to_string();
    assert!(
        err.contains("steps[0].publishes") && err.contains("9999"),
        "{err}"
    );
    let renamed = text.replacen("id;a;b", "id;x;b", 1);
    let err = apply(&plan, &renamed, false).unwrap_err().to_string();
    assert!(
        err.contains("column 2 is 'x'") && err.contains("expects 'a'"),
        "{err}"
    );
    let fewer = "id;a;b;s\n1;a0;b0;-s0\n";
    let err = apply(&plan, fewer, false).unwrap_err().to_string();
    assert!(err.contains("column 5 is nothing"), "{err}");
}

/// The plan's size follows the domains and the classes: the same data ten times (with ten
/// times the k, so that the same classes are suppressed) give the same plan.
#[test]
fn the_plan_does_not_grow_with_the_rows() {
    let (mut c, text) = simple();
    let p = problem(&c, &text);
    let eval = Checker::new(&p).evaluate(&[1, 0]);
    let plan = Plan::of(&p, &eval, &options(&c), b';').unwrap();
    assert!(!plan.suppressed.is_empty());
    c.rows = c.rows.repeat(10);
    c.k *= 10;
    let text = input_csv(&c);
    let p = problem(&c, &text);
    let eval = Checker::new(&p).evaluate(&[1, 0]);
    assert_eq!(Plan::of(&p, &eval, &options(&c), b';').unwrap(), plan);
}

/// A plan made on records, applied to a frequency table with `with_count_column`, writes the
/// table's rows with their counts; a count column of another name is refused.
#[test]
fn a_plan_of_records_applies_to_a_frequency_table() {
    let (c, text) = simple();
    let p = problem(&c, &text);
    let eval = Checker::new(&p).evaluate(&[1, 0]);
    let mut plan = Plan::of(&p, &eval, &options(&c), b';').unwrap();
    let header: Vec<String> = ["id", "a", "b", "s", "m", "n"].map(String::from).to_vec();
    plan.with_count_column(&header, "n").unwrap();
    let freq = "id;a;b;s;m;n\n1;a0;b0;-s0;10;007\n2;a1;b1;-s1;10;0\n";
    let (out, applied) = apply(&plan, freq, true).unwrap();
    assert_eq!(out, "a;b;s;m;n\na0;b0;-s0;10;7\n");
    assert_eq!((applied.rows, applied.records), (1, 7));
    let err = plan
        .with_count_column(&header, "m")
        .unwrap_err()
        .to_string();
    assert!(err.contains("count column is 'n'"), "{err}");
}

/// More rows than one chunk of the applier (formatted in parallel): the bytes are the writer's,
/// and strict mode names the row of the first uncovered value across chunks.
#[test]
fn rows_across_chunks_keep_their_order_and_numbers() {
    let (mut c, _) = simple();
    c.rows = (0..40_000u32)
        .map(|i| ((i % 5) as u8, (i % 3) as u8, (i % 7 % 3) as u8, 1, 1, 4))
        .collect();
    c.k = 5;
    c.mode = 1;
    let text = input_csv(&c);
    let p = problem(&c, &text);
    let eval = Checker::new(&p).evaluate(&[1, 0]);
    let o = options(&c);
    let mut written = Vec::new();
    write_csv(&p, &eval, &mut written, b';', &o).unwrap();
    let plan = Plan::of(&p, &eval, &o, b';').unwrap();
    let (out, applied) = apply(&plan, &text, true).unwrap();
    assert_eq!(out.as_bytes(), written.as_slice());
    assert_eq!(applied.rows_read, 40_000);
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines[35_000] = lines[35_000].replacen(";a", ";new", 1);
    let err = apply(&plan, &(lines.join("\n") + "\n"), true)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("row 35000 ") && err.contains("column 'a'"),
        "{err}"
    );
}
