//! δ-presence and k-map with the table as the population (a research subset is released):
//! a hand-made population whose verdicts are computed by hand, and searches on adult whose
//! output CSV is verified independently — the released classes recomputed from the output, the
//! population classes from the input file and the hierarchy files (read here, no engine code),
//! δ = count / pcount and pcount ≥ k checked by their definitions.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use deid_engine::config::ResearchSubset;
use deid_engine::dataset::ArxDataset;
use deid_engine::output::{OutputOptions, SuppressedRecords, write_csv};
use deid_engine::{
    Algorithm, CancelFlag, Checker, Hierarchy, NoObserver, PrivacyModel, Problem, ProblemConfig,
    QuasiIdentifier, SearchConfig, Table, search,
};

const ZIPS: [&str; 8] = [
    "47677", "47602", "47678", "47905", "47909", "47906", "47673", "47607",
];
const AGES: [&str; 8] = ["29", "22", "27", "43", "52", "47", "30", "36"];

/// Eight people (zip, age, in_study); records 1, 4 and 7 are released.
fn population_table() -> Table {
    let rows: Vec<Vec<String>> = (0..8)
        .map(|i| {
            let released = matches!(i, 0 | 3 | 6);
            vec![
                ZIPS[i].to_string(),
                AGES[i].to_string(),
                if released { "yes" } else { "no" }.to_string(),
            ]
        })
        .collect();
    Table::from_rows(&["zip", "age", "in_study"], &rows).unwrap()
}

/// The hand-made problem; `privacy` lists models separated by `;`.
fn hand_problem(
    privacy: &str,
    limit: f64,
    subset: Option<ResearchSubset>,
) -> deid_engine::Result<Problem> {
    let zip = Hierarchy::from_rows(
        ZIPS.iter()
            .map(|z| vec![z.to_string(), format!("{}**", &z[..3]), "*".into()])
            .collect(),
        "zip",
    )
    .unwrap();
    let age = Hierarchy::from_rows(
        AGES.iter()
            .map(|a| {
                let band = if a.parse::<u32>().unwrap() < 40 {
                    "20-39"
                } else {
                    "40-59"
                };
                vec![a.to_string(), band.into(), "*".into()]
            })
            .collect(),
        "age",
    )
    .unwrap();
    let config = ProblemConfig {
        quasi_identifiers: vec![
            QuasiIdentifier::new("zip", zip),
            QuasiIdentifier::new("age", age),
        ],
        privacy: privacy
            .split(';')
            .map(|m| PrivacyModel::parse(m).unwrap())
            .collect(),
        suppression_limit: limit,
        research_subset: subset,
        ..Default::default()
    };
    Problem::new(population_table(), config)
}

fn in_study() -> Option<ResearchSubset> {
    Some(ResearchSubset::Column {
        column: "in_study".into(),
        value: None,
    })
}

/// At (1, 1) the classes are 476**/20-39 (records 1, 2, 3, 7, 8: 2 released, δ = 0.4) and
/// 479**/40-59 (records 4, 5, 6: 1 released, δ = 1/3); at (0, 0) every record is its own class
/// (δ = 1 released, δ = 0 for the five others); at (2, 2) one class with δ = 3/8.
#[test]
fn delta_presence_by_hand() {
    let verdict = |privacy: &str, limit: f64, levels: &[u8]| {
        let p = hand_problem(privacy, limit, in_study()).unwrap();
        assert_eq!(p.rows(), 3);
        let r = Checker::new(&p).check(levels);
        (r.anonymous, r.suppressed, r.classes)
    };
    let dp = |min: f64, max: f64| format!("delta-presence(delta_min={min},delta_max={max})");
    assert_eq!(verdict(&dp(0.3, 0.5), 0.0, &[1, 1]), (true, 0, 2));
    // 1/3 < 0.35: the 479** class (one released record) is suppressed.
    assert_eq!(verdict(&dp(0.35, 0.5), 0.0, &[1, 1]), (false, 1, 2));
    assert_eq!(verdict(&dp(0.35, 0.5), 0.34, &[1, 1]), (true, 1, 2));
    // 0.4 > 0.39: the 476** class (two released records) is suppressed.
    assert_eq!(verdict(&dp(0.3, 0.39), 0.67, &[1, 1]), (true, 2, 2));
    assert_eq!(verdict(&dp(0.3, 0.4), 0.0, &[2, 2]), (true, 0, 1));
    assert_eq!(verdict(&dp(0.4, 0.5), 0.0, &[2, 2]), (false, 3, 1));
    // Level 0: the five unreleased records are classes with δ = 0 that no suppression can fix.
    assert!(!verdict(&dp(0.1, 1.0), 1.0, &[0, 0]).0);
    assert_eq!(verdict(&dp(0.0, 1.0), 0.0, &[0, 0]), (true, 0, 3));
    // The rejection holds with k-anonymity too (ARX lets k-anonymity hide it).
    let both = format!("{};k-anonymity(k=1)", dp(0.1, 1.0));
    let p = hand_problem(&both, 1.0, in_study()).unwrap();
    assert!(!Checker::new(&p).check(&[0, 0]).anonymous);
}

#[test]
fn k_map_with_the_population_table_by_hand() {
    let verdict = |k: u32, limit: f64, levels: &[u8]| {
        let p = hand_problem(&format!("k-map(k={k})"), limit, in_study()).unwrap();
        let r = Checker::new(&p).check(levels);
        (r.anonymous, r.suppressed)
    };
    // pcount 5 and 3 at (1, 1).
    assert_eq!(verdict(3, 0.0, &[1, 1]), (true, 0));
    assert_eq!(verdict(4, 0.0, &[1, 1]), (false, 1));
    assert_eq!(verdict(4, 0.34, &[1, 1]), (true, 1));
    assert_eq!(verdict(6, 1.0, &[1, 1]), (true, 3));
    // Every record alone at (0, 0): all three released records have pcount 1.
    assert_eq!(verdict(2, 0.67, &[0, 0]), (false, 3));
    assert_eq!(verdict(8, 0.0, &[2, 2]), (true, 0));
}

/// Flash finds (1, 1), the most specific anonymous transformation; the output holds the three
/// released records only, generalized.
#[test]
fn searches_release_the_subset_only() {
    let p = hand_problem(
        "delta-presence(delta_min=0.3,delta_max=0.5)",
        0.0,
        in_study(),
    )
    .unwrap();
    let config = SearchConfig {
        algorithm: Algorithm::Flash,
        time_limit: Duration::from_secs(10),
        ..Default::default()
    };
    let best = search(&p, &config, &CancelFlag::new(), &NoObserver)
        .unwrap()
        .best
        .expect("a solution");
    assert_eq!(best.levels, [1, 1]);
    let eval = Checker::new(&p).evaluate(&best.levels);
    let mut out = Vec::new();
    write_csv(&p, &eval, &mut out, b',', &OutputOptions::default()).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "zip,age,in_study\n476**,20-39,yes\n479**,40-59,yes\n476**,20-39,yes\n"
    );
}

#[test]
fn models_that_need_a_subset_say_so() {
    for privacy in ["delta-presence(delta_min=0,delta_max=0.5)", "k-map(k=3)"] {
        let e = hand_problem(privacy, 0.0, None).unwrap_err();
        let (field, message) = e.config_error().unwrap();
        assert_eq!(field, "research_subset", "{privacy}");
        assert!(message.contains("privacy[0]"), "{message}");
    }
    let e = hand_problem(
        "k-anonymity(k=2)",
        0.0,
        Some(ResearchSubset::Rows(vec![2, 9])),
    )
    .unwrap_err();
    assert_eq!(e.config_error().unwrap().0, "research_subset.rows[1]");
    let none = Some(ResearchSubset::Column {
        column: "zip".into(),
        value: Some("99999".into()),
    });
    let e = hand_problem("k-anonymity(k=2)", 0.0, none).unwrap_err();
    assert_eq!(e.config_error().unwrap().0, "research_subset");
    // k larger than the released records.
    let e = hand_problem("k-anonymity(k=4)", 0.0, in_study()).unwrap_err();
    assert!(
        matches!(e, deid_engine::EngineError::TooFewRecords { rows: 3, .. }),
        "{e:?}"
    );
}

// ---- adult: searches verified from the output CSV -------------------------------------------

/// Reads a `;`-separated file with a header.
fn read(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut rdr = csv::ReaderBuilder::new()
        .delimiter(b';')
        .has_headers(false)
        .from_path(path)
        .unwrap();
    let mut rows = rdr
        .records()
        .map(|r| r.unwrap().iter().map(String::from).collect::<Vec<_>>());
    let header = rows.next().unwrap();
    (header, rows.collect())
}

/// value → its labels at levels 0.. (from an ARX hierarchy file without header).
fn hierarchy_file(path: &Path) -> HashMap<String, Vec<String>> {
    let mut rdr = csv::ReaderBuilder::new()
        .delimiter(b';')
        .has_headers(false)
        .flexible(true)
        .from_path(path)
        .unwrap();
    rdr.records()
        .map(|r| {
            let r: Vec<String> = r.unwrap().iter().map(String::from).collect();
            (r[0].clone(), r)
        })
        .collect()
}

/// The released records: every third record, and every record of a male over 60.
fn adult_subset(rows: &[Vec<String>], header: &[String]) -> Vec<bool> {
    let age = header.iter().position(|h| h == "age").unwrap();
    let sex = header.iter().position(|h| h == "sex").unwrap();
    rows.iter()
        .enumerate()
        .map(|(i, r)| i % 3 == 0 || (r[sex] == "Male" && r[age].parse::<u32>().unwrap() > 60))
        .collect()
}

/// Checks an output of adult released from `subset` against δ-presence bounds and/or a k-map k.
fn verify_adult(
    output: &str,
    levels: &HashMap<String, usize>,
    subset: &[bool],
    delta: Option<(f64, f64)>,
    k_map: Option<usize>,
    limit: f64,
) {
    let dir = Path::new("../../examples/adult");
    let (header, input) = read(&dir.join("adult.csv"));
    let mut rdr = csv::ReaderBuilder::new()
        .delimiter(b';')
        .from_reader(output.as_bytes());
    assert_eq!(
        rdr.headers().unwrap().iter().collect::<Vec<_>>(),
        header.iter().map(String::as_str).collect::<Vec<_>>()
    );
    let out: Vec<Vec<String>> = rdr
        .records()
        .map(|r| r.unwrap().iter().map(String::from).collect())
        .collect();
    let released: Vec<&Vec<String>> = input
        .iter()
        .zip(subset)
        .filter(|(_, s)| **s)
        .map(|(r, _)| r)
        .collect();
    assert_eq!(out.len(), released.len(), "exactly the subset is written");
    let qis: Vec<(usize, usize, HashMap<String, Vec<String>>)> = levels
        .iter()
        .map(|(c, &l)| {
            let i = header.iter().position(|h| h == c).unwrap();
            let h = hierarchy_file(&dir.join(format!("adult_hierarchy_{c}.csv")));
            (i, l, h)
        })
        .collect();
    let generalize = |row: &Vec<String>| -> Vec<String> {
        qis.iter()
            .map(|(i, l, h)| h[&row[*i]][*l].clone())
            .collect()
    };
    // Released classes from the output; every published row must be its input row generalized.
    let mut counts: HashMap<Vec<String>, usize> = HashMap::new();
    let mut suppressed = 0usize;
    for (o, r) in out.iter().zip(&released) {
        let key: Vec<String> = qis.iter().map(|(i, _, _)| o[*i].clone()).collect();
        if key.iter().all(|v| v == "*") && generalize(r).iter().any(|v| v != "*") {
            suppressed += 1;
            continue;
        }
        assert_eq!(
            key,
            generalize(r),
            "published values are the generalized input"
        );
        *counts.entry(key).or_default() += 1;
    }
    assert!(suppressed as f64 <= (limit * released.len() as f64).floor());
    // Population classes from the whole input.
    let mut pcounts: HashMap<Vec<String>, usize> = HashMap::new();
    let mut in_subset: HashMap<Vec<String>, usize> = HashMap::new();
    for (r, &s) in input.iter().zip(subset) {
        let key = generalize(r);
        *pcounts.entry(key.clone()).or_default() += 1;
        *in_subset.entry(key).or_default() += usize::from(s);
    }
    for (key, &count) in &counts {
        let pcount = pcounts[key];
        if let Some((min, max)) = delta {
            let d = count as f64 / pcount as f64;
            assert!(min <= d && d <= max, "{key:?}: δ = {count}/{pcount}");
        }
        if let Some(k) = k_map {
            assert!(pcount >= k, "{key:?}: {pcount} records in the population");
        }
    }
    if let Some((min, _)) = delta {
        // Population classes without a released record have δ = 0.
        for (key, &released) in &in_subset {
            assert!(released > 0 || min == 0.0, "{key:?} has δ = 0 < {min}");
        }
    }
}

fn adult_problem(privacy: &[&str], limit: f64) -> (Problem, Vec<bool>) {
    let ds = ArxDataset::load(Path::new("../../examples/adult"), "adult").unwrap();
    let (header, rows) = read(Path::new("../../examples/adult/adult.csv"));
    let subset = adult_subset(&rows, &header);
    let numbers: Vec<u64> = (0..rows.len())
        .filter(|&i| subset[i])
        .map(|i| i as u64 + 1)
        .collect();
    let config = ProblemConfig {
        quasi_identifiers: ds
            .quasi_identifiers
            .into_iter()
            .filter(|q| {
                ["age", "sex", "race", "marital-status", "education"].contains(&q.column.as_str())
            })
            .collect(),
        privacy: privacy
            .iter()
            .map(|m| PrivacyModel::parse(m).unwrap())
            .collect(),
        suppression_limit: limit,
        research_subset: Some(ResearchSubset::Rows(numbers)),
        ..Default::default()
    };
    (Problem::new(ds.table, config).unwrap(), subset)
}

#[test]
fn every_algorithm_on_adult_is_verified_from_the_output() {
    type Case<'a> = (&'a [&'a str], Option<(f64, f64)>, Option<usize>, f64);
    let cases: [Case; 3] = [
        (
            &["delta-presence(delta_min=0,delta_max=0.6)"],
            Some((0.0, 0.6)),
            None,
            0.05,
        ),
        (&["k-map(k=10)"], None, Some(10), 0.02),
        (
            &["delta-presence(delta_min=0.05,delta_max=0.7)", "k-map(k=5)"],
            Some((0.05, 0.7)),
            Some(5),
            0.1,
        ),
    ];
    for (privacy, delta, k_map, limit) in cases {
        let (p, subset) = adult_problem(privacy, limit);
        assert_eq!(p.rows(), subset.iter().filter(|s| **s).count());
        for algorithm in Algorithm::ALL {
            let config = SearchConfig {
                algorithm,
                time_limit: Duration::from_secs(2),
                seed: 3,
                ..Default::default()
            };
            let outcome = search(&p, &config, &CancelFlag::new(), &NoObserver).unwrap();
            let best = outcome
                .best
                .unwrap_or_else(|| panic!("{algorithm}: no solution for {privacy:?}"));
            let eval = Checker::new(&p).evaluate(&best.levels);
            assert!(eval.result.anonymous, "{algorithm} {privacy:?}");
            for mode in [SuppressedRecords::Mask, SuppressedRecords::KeepSensitive] {
                let options = OutputOptions {
                    suppressed: mode,
                    ..Default::default()
                };
                let mut out = Vec::new();
                write_csv(&p, &eval, &mut out, b';', &options).unwrap();
                let levels: HashMap<String, usize> = p
                    .quasi_identifiers()
                    .iter()
                    .zip(&best.levels)
                    .map(|(q, &l)| (q.column.clone(), l as usize))
                    .collect();
                verify_adult(
                    &String::from_utf8(out).unwrap(),
                    &levels,
                    &subset,
                    delta,
                    k_map,
                    limit,
                );
            }
        }
    }
}

/// The verifier fails on a transformation that is not anonymous (too many records suppressed
/// at the bottom of the lattice).
#[test]
fn the_verifier_rejects_an_output_that_is_not_anonymous() {
    let (p, subset) = adult_problem(&["delta-presence(delta_min=0,delta_max=0.6)"], 0.05);
    let bottom = vec![0u8; p.quasi_identifiers().len()];
    let eval = Checker::new(&p).evaluate(&bottom);
    assert!(!eval.result.anonymous);
    let mut out = Vec::new();
    write_csv(&p, &eval, &mut out, b';', &OutputOptions::default()).unwrap();
    let out = String::from_utf8(out).unwrap();
    let levels: HashMap<String, usize> = p
        .quasi_identifiers()
        .iter()
        .map(|q| (q.column.clone(), 0))
        .collect();
    let verified = std::panic::catch_unwind(|| {
        verify_adult(&out, &levels, &subset, Some((0.0, 0.6)), None, 0.05)
    });
    assert!(verified.is_err());
}

/// The optimum under δ-presence with suppression is not monotone: Flash (which may not prune
/// there) and an exhaustive search agree.
#[test]
fn flash_is_optimal_with_delta_presence() {
    let (p, _) = adult_problem(&["delta-presence(delta_min=0.1,delta_max=0.5)"], 0.05);
    let run = |algorithm| {
        let config = SearchConfig {
            algorithm,
            time_limit: Duration::from_secs(60),
            ..Default::default()
        };
        search(&p, &config, &CancelFlag::new(), &NoObserver)
            .unwrap()
            .best
            .map(|b| (b.levels, b.score))
    };
    let flash = run(Algorithm::Flash).expect("a solution");
    let exhaustive = run(Algorithm::Exhaustive).expect("a solution");
    assert_eq!(flash.1, exhaustive.1);
}

/// Values that occur only outside the subset (frequency 0 among the released records) and
/// classes without released records leave every quality model and the risks finite.
#[test]
fn every_measure_is_finite_with_unreleased_values() {
    let p = hand_problem("delta-presence(delta_min=0,delta_max=1)", 0.5, in_study()).unwrap();
    let checker = Checker::new(&p);
    for levels in [[0u8, 0], [0, 1], [1, 0], [1, 1], [2, 2]] {
        let eval = checker.evaluate(&levels);
        for (model, q) in deid_engine::check::evaluate_all(&p, &eval) {
            assert!(
                q.score.is_finite() && q.utility.is_finite() && q.lower_bound.is_finite(),
                "{model:?} at {levels:?}: {q:?}"
            );
        }
        let risk = deid_engine::risk::RiskReport::output(&p, &eval, 0.2);
        assert_eq!(risk.classes, eval.result.classes);
        let json = format!("{risk:?}");
        assert!(!json.contains("NaN") && !json.contains("inf"), "{json}");
        let post = deid_engine::posthoc::output_quality(&p, &eval);
        let json = format!("{post:?}");
        assert!(!json.contains("NaN") && !json.contains("inf"), "{json}");
        assert_eq!(post.records, 3);
    }
    let input = deid_engine::risk::RiskReport::input(&p, 0.2);
    assert_eq!(input.classes, 3);
    let json = format!("{input:?}");
    assert!(!json.contains("NaN") && !json.contains("inf"), "{json}");
}
