//! The JSON form of hierarchy specifications (as accepted in job specs, stored per dataset
//! column and read by `--hierarchy COLUMN=builder.json`), golden tables for each builder kind
//! written out by hand, and invalid specifications whose messages must name the culprit.

use deid_engine::hierarchy::builder::{
    DateGranularity, DateSpec, GroupSizes, HierarchySpec, IntervalDef, IntervalSpec, MaskingSpec,
    Number, OrderLabels, OrderSpec, Side, SortOrder,
};
use deid_engine::{EngineError, Table};

fn spec(json: &str) -> HierarchySpec {
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

fn table(spec: &HierarchySpec, values: &[&str]) -> Vec<String> {
    let h = spec.build_values("c", values).unwrap();
    h.rows().iter().map(|r| r.join(";")).collect()
}

fn error(spec: &HierarchySpec, values: &[&str]) -> String {
    match spec.build_values("c", values) {
        Ok(h) => panic!("expected an error, got {:?}", h.rows()),
        Err(e @ EngineError::InvalidConfig { .. }) => e.to_string(),
        Err(e) => panic!("expected InvalidConfig, got {e:?}"),
    }
}

fn n(s: &str) -> Number {
    Number::parse(s).unwrap()
}

// --- JSON schema --------------------------------------------------------------------------

#[test]
fn json_examples_parse_to_the_expected_specs() {
    assert_eq!(
        spec(r#"{"type":"interval","width":10,"levels":[2,[2,3]]}"#),
        HierarchySpec::Interval(IntervalSpec {
            levels: vec![GroupSizes::Uniform(2), GroupSizes::Cycle(vec![2, 3])],
            ..IntervalSpec::regular(Number::from(10))
        })
    );
    assert_eq!(
        spec(
            r#"{"type":"interval","intervals":[{"from":0,"to":18,"label":"minor"},{"from":18,"to":65}],
                "bottom_coding":"0.5","top_coding":60,"min":0,"max":120,"missing":["?"]}"#
        ),
        HierarchySpec::Interval(IntervalSpec {
            bottom_coding: Some(n("0.5")),
            top_coding: Some(n("60")),
            min: Some(n("0")),
            max: Some(n("120")),
            missing: vec!["?".into()],
            ..IntervalSpec::explicit(vec![
                IntervalDef {
                    from: n("0"),
                    to: n("18"),
                    label: Some("minor".into())
                },
                IntervalDef {
                    from: n("18"),
                    to: n("65"),
                    label: None
                },
            ])
        })
    );
    assert_eq!(
        spec(r#"{"type":"order","values":["low","mid","high"],"levels":[2],"labels":"set"}"#),
        HierarchySpec::Order(OrderSpec {
            values: Some(vec!["low".into(), "mid".into(), "high".into()]),
            labels: OrderLabels::Set,
            ..OrderSpec::new(vec![GroupSizes::Uniform(2)])
        })
    );
    assert_eq!(
        spec(r#"{"type":"order","order":"lexicographic","levels":[3]}"#),
        HierarchySpec::Order(OrderSpec {
            order: SortOrder::Lexicographic,
            ..OrderSpec::new(vec![GroupSizes::Uniform(3)])
        })
    );
    assert_eq!(
        spec(r#"{"type":"masking","redact_from":"right"}"#),
        HierarchySpec::Masking(MaskingSpec::default())
    );
    assert_eq!(
        spec(
            r##"{"type":"masking","redact_from":"left","pad_side":"left","pad_char":"0","redaction_char":"#","alphabet_size":10,"domain_size":100000}"##
        ),
        HierarchySpec::Masking(MaskingSpec {
            redact_from: Side::Left,
            pad_side: Side::Left,
            pad_char: '0',
            redaction_char: '#',
            alphabet_size: Some(10),
            domain_size: Some(100000),
        })
    );
    assert_eq!(
        spec(r#"{"type":"date"}"#),
        HierarchySpec::Date(DateSpec::default())
    );
    assert_eq!(
        spec(
            r#"{"type":"date","format":"dd.MM.yyyy","levels":["week"],"missing":["", "unknown"]}"#
        ),
        HierarchySpec::Date(DateSpec {
            format: "dd.MM.yyyy".into(),
            levels: vec![DateGranularity::Week],
            missing: vec!["".into(), "unknown".into()],
        })
    );
    assert_eq!(
        spec(r#"{"type":"suppression"}"#),
        HierarchySpec::Suppression {}
    );
}

#[test]
fn specs_round_trip_through_json() {
    let examples = [
        r#"{"type":"interval","width":0.25,"start":-1,"levels":[2,[2,3]],"missing":["","?"]}"#,
        r#"{"type":"interval","intervals":[{"from":0,"to":18,"label":"minor"},{"from":18,"to":65}],"top_coding":60}"#,
        r#"{"type":"order","order":"numeric","levels":[2,2],"labels":"range"}"#,
        r#"{"type":"order","order":"auto","values":["a","b"],"levels":[1],"labels":"set"}"#,
        r#"{"type":"masking","redact_from":"left","pad_side":"right","pad_char":"0","redaction_char":"*"}"#,
        r#"{"type":"date","format":"yyyyMMdd","levels":["day","month","year","century"],"missing":[""]}"#,
        r#"{"type":"suppression"}"#,
    ];
    for json in examples {
        let parsed = spec(json);
        let text = serde_json::to_string(&parsed).unwrap();
        assert_eq!(spec(&text), parsed, "{json} → {text}");
        // Serialization is canonical: the same spec always gives the same text.
        assert_eq!(serde_json::to_string(&spec(&text)).unwrap(), text);
    }
    // Exactness: decimals survive as JSON numbers; long ones become strings.
    let s = HierarchySpec::Interval(IntervalSpec::regular(n("0.1")));
    assert_eq!(
        serde_json::to_string(&s).unwrap(),
        r#"{"type":"interval","width":0.1,"missing":[""]}"#
    );
    let long = HierarchySpec::Interval(IntervalSpec::regular(n("1234567890.1234567")));
    let text = serde_json::to_string(&long).unwrap();
    assert!(text.contains(r#""width":"1234567890.1234567""#), "{text}");
    assert_eq!(spec(&text), long);
}

#[test]
fn json_typos_and_bad_values_are_rejected() {
    for (json, needle) in [
        (r#"{"type":"intervals","width":10}"#, "unknown variant"),
        (r#"{"type":"interval","widht":10}"#, "unknown field"),
        (
            r#"{"type":"masking","redact_from":"middle"}"#,
            "unknown variant",
        ),
        (r#"{"type":"masking","pad_char":"ab"}"#, "invalid"),
        (
            r#"{"type":"interval","width":"ten"}"#,
            "'ten' is not a supported number",
        ),
        (
            r#"{"type":"date","levels":["fortnight"]}"#,
            "unknown variant",
        ),
        (r#"{"width":10}"#, "missing field `type`"),
        (
            r#"{"type":"suppression","levels":[2]}"#,
            "unknown field `levels`",
        ),
        (
            r#"{"type":"order","levels":[-1]}"#,
            "group size -1 is negative",
        ),
        (
            r#"{"type":"order","levels":[1.5]}"#,
            "group size 1.5 is not a whole number",
        ),
        (r#"{"type":"order","levels":["2"]}"#, "e.g. 2 or [2, 3]"),
    ] {
        let err = serde_json::from_str::<HierarchySpec>(json)
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{json}: {err}");
    }
}

#[test]
fn validate_checks_the_spec_without_data() {
    for (json, needle) in [
        (
            r#"{"type":"interval","intervals":[{"from":0,"to":20},{"from":10,"to":30}]}"#,
            "overlaps",
        ),
        (
            r#"{"type":"interval","width":5,"levels":[0]}"#,
            "group size 0",
        ),
        (r#"{"type":"order","values":["a","a"]}"#, "listed twice"),
        (r#"{"type":"masking","alphabet_size":0}"#, "alphabet_size 0"),
        (
            r#"{"type":"date","format":"dd.MM.yy"}"#,
            "unsupported pattern 'yy'",
        ),
        (
            r#"{"type":"date","levels":["week","month"]}"#,
            "cannot follow 'week'",
        ),
    ] {
        let err = spec(json).validate().unwrap_err().to_string();
        assert!(err.contains(needle), "{json}: {err}");
    }
    for json in [
        r#"{"type":"interval","width":5,"bottom_coding":10}"#,
        r#"{"type":"order","levels":[2]}"#,
        r#"{"type":"masking"}"#,
        r#"{"type":"date","format":"yyyyMMdd","levels":["day","week"]}"#,
        r#"{"type":"suppression"}"#,
    ] {
        spec(json).validate().unwrap();
    }
}

#[test]
fn errors_name_the_path_inside_the_specification() {
    let field = |result: Result<(), EngineError>| match result {
        Err(EngineError::InvalidConfig { field, .. }) => field,
        other => panic!("expected an invalid specification, got {other:?}"),
    };
    let build = |json: &str, values: &[&str]| spec(json).build_values("c", values).map(|_| ());
    let overlap = r#"{"type":"interval","intervals":[{"from":0,"to":20},{"from":10,"to":30}]}"#;
    assert_eq!(field(spec(overlap).validate()), "intervals[1]");
    assert_eq!(field(build(overlap, &["1"])), "intervals[1]");
    let format = r#"{"type":"date","format":"dd.MM.yy"}"#;
    assert_eq!(field(spec(format).validate()), "format");
    let sizes = r#"{"type":"interval","width":5,"levels":[2,[3,0]]}"#;
    assert_eq!(field(spec(sizes).validate()), "levels[1][1]");
    // A value that does not fit: the specification as a whole.
    assert_eq!(
        field(build(r#"{"type":"interval","width":5}"#, &["abc"])),
        ""
    );
    // The caller puts the specification's position in front.
    let e = spec(overlap)
        .validate()
        .unwrap_err()
        .within("hierarchies.c");
    assert!(
        e.to_string()
            .starts_with("invalid value for 'hierarchies.c.intervals[1]'"),
        "{e}"
    );
}

// --- golden tables ------------------------------------------------------------------------

#[test]
fn golden_interval_ages_with_coding() {
    let s =
        spec(r#"{"type":"interval","width":10,"bottom_coding":20,"top_coding":90,"levels":[2,2]}"#);
    assert_eq!(
        table(&s, &["95", "19", "20", "33", "47", "89", "90", ""]),
        vec![
            "19;<20;<20;<20;*",
            "20;[20, 30[;[20, 40[;[20, 60[;*",
            "33;[30, 40[;[20, 40[;[20, 60[;*",
            "47;[40, 50[;[40, 60[;[20, 60[;*",
            "89;[80, 90[;[80, 90[;[60, 90[;*",
            "90;>=90;>=90;>=90;*",
            "95;>=90;>=90;>=90;*",
            ";;;;*",
        ]
    );
    // Shares: covered range [19, 95] = 76; [20, 30[ → 10/76, [20, 40[ → 20/76, [20, 60[ → 40/76;
    // level 0: 1/8.
    let h = s
        .build_values("age", &["95", "19", "20", "33", "47", "89", "90", ""])
        .unwrap();
    let row = &h.shares().unwrap()[1];
    let expect = [1.0 / 8.0, 10.0 / 76.0, 20.0 / 76.0, 40.0 / 76.0, 1.0];
    for (a, b) in row.iter().zip(expect) {
        assert!((a - b).abs() < 1e-12, "{row:?}");
    }
}

#[test]
fn golden_explicit_intervals_with_labels() {
    let s = spec(
        r#"{"type":"interval","intervals":[{"from":65,"to":120,"label":"senior"},{"from":0,"to":18,"label":"minor"},{"from":18,"to":65}],"levels":[2]}"#,
    );
    assert_eq!(
        table(&s, &["70", "3", "18", "64"]),
        vec![
            "3;minor;[0, 65[;*",
            "18;[18, 65[;[0, 65[;*",
            "64;[18, 65[;[0, 65[;*",
            "70;senior;senior;*",
        ]
    );
}

#[test]
fn golden_order_lexicographic_and_cycle() {
    let s = spec(r#"{"type":"order","order":"lexicographic","levels":[[1,2],2]}"#);
    // a | b c | d | e  → level 2 pairs: (a, b-c) (d, e)
    assert_eq!(
        table(&s, &["e", "d", "c", "b", "a"]),
        vec![
            "a;a;[a, c];*",
            "b;[b, c];[a, c];*",
            "c;[b, c];[a, c];*",
            "d;d;[d, e];*",
            "e;e;[d, e];*",
        ]
    );
}

#[test]
fn golden_masking_test_dataset_zip_codes() {
    // The ZIP codes of tests/fixtures/test/test.csv, as ARX's redaction builder would mask them.
    let text = std::fs::read_to_string("tests/fixtures/test/test.csv").unwrap();
    let t = Table::read_csv(
        text.as_bytes(),
        deid_engine::CsvOptions {
            delimiter: b';',
            has_header: true,
        },
        "test.csv",
    )
    .unwrap();
    let zip = t.column(t.column_index("zipcode").unwrap());
    let h = spec(r#"{"type":"masking"}"#).build(zip).unwrap();
    let mut expected: Vec<String> = zip
        .dict
        .values()
        .map(|z| {
            (0..=5)
                .map(|j| {
                    if j == 0 {
                        z.to_string()
                    } else {
                        format!("{}{}", &z[..5 - j], "*".repeat(j))
                    }
                })
                .collect::<Vec<_>>()
                .join(";")
        })
        .collect();
    expected.sort();
    let got: Vec<String> = h.rows().iter().map(|r| r.join(";")).collect();
    assert_eq!(got, expected);
    assert!(got.contains(&"81667;8166*;816**;81***;8****;*****".to_string()));
    h.encode(zip).unwrap();
}

#[test]
fn golden_dates_us_format_to_decade() {
    let s = spec(r#"{"type":"date","format":"MM/dd/yyyy","levels":["quarter","year","decade"]}"#);
    assert_eq!(
        table(&s, &["12/31/1999", "01/01/2000", "07/04/2000"]),
        vec![
            "12/31/1999;1999-Q4;1999;1990-1999;*",
            "01/01/2000;2000-Q1;2000;2000-2009;*",
            "07/04/2000;2000-Q3;2000;2000-2009;*",
        ]
    );
}

#[test]
fn golden_suppression() {
    let s = spec(r#"{"type":"suppression"}"#);
    let h = s.build_values("sex", &["male", "female", "male"]).unwrap();
    let got: Vec<String> = h.rows().iter().map(|r| r.join(";")).collect();
    assert_eq!(got, vec!["female;*", "male;*"]);
    assert_eq!(h.shares().unwrap()[0], vec![0.5, 1.0]);
}

// --- invalid specifications -----------------------------------------------------------------

#[test]
fn invalid_intervals_name_the_culprit() {
    let cases = [
        (
            r#"{"type":"interval","intervals":[{"from":0,"to":20},{"from":10,"to":30}]}"#,
            vec!["intervals[1]", "[10, 30[", "overlaps", "[0, 20["],
        ),
        (
            r#"{"type":"interval","intervals":[{"from":30,"to":20}]}"#,
            vec!["intervals[0]", "[30, 20[", "empty"],
        ),
        (
            r#"{"type":"interval","intervals":[{"from":0,"to":20},{"from":25,"to":30}]}"#,
            vec!["gap", "from 20 to 25"],
        ),
        (
            r#"{"type":"interval","intervals":[{"from":0,"to":20}]}"#,
            vec!["value '150'", "outside", "[0, 20["],
        ),
        (
            r#"{"type":"interval","width":0}"#,
            vec!["width 0", "positive"],
        ),
        (
            r#"{"type":"interval","width":5,"intervals":[{"from":0,"to":20}]}"#,
            vec!["exactly one"],
        ),
        (r#"{"type":"interval"}"#, vec!["exactly one"]),
        (
            r#"{"type":"interval","width":5,"max":100}"#,
            vec!["value '150'", "maximum 100"],
        ),
        (
            r#"{"type":"interval","width":5,"levels":[[]]}"#,
            vec!["levels[0]", "empty"],
        ),
        (
            r#"{"type":"interval","width":5,"levels":[2,[3,0]]}"#,
            vec!["levels[1][1]", "group size 0"],
        ),
        (
            r#"{"type":"interval","width":5,"bottom_coding":50,"top_coding":10}"#,
            vec!["top_coding 10", "bottom_coding 50"],
        ),
        (
            r#"{"type":"interval","intervals":[{"from":0,"to":10,"label":"x"},{"from":10,"to":200,"label":"x"}]}"#,
            vec!["label 'x'"],
        ),
        (
            r#"{"type":"interval","intervals":[{"from":20,"to":200,"label":"<20"}],"bottom_coding":20}"#,
            vec!["label '<20'", "two different groups"],
        ),
    ];
    for (json, needles) in cases {
        let msg = error(&spec(json), &["3", "150"]);
        for needle in needles {
            assert!(msg.contains(needle), "{json}: {msg}");
        }
    }
    let msg = error(
        &spec(
            r#"{"type":"interval","width":5,"levels":[[2147483648,2147483648],1048576,2147483648]}"#,
        ),
        &["3"],
    );
    assert!(
        msg.contains("levels[2]") && msg.contains("too large"),
        "{msg}"
    );
    let msg = error(&spec(r#"{"type":"interval","width":5}"#), &["3", "abc"]);
    assert!(msg.contains("value 'abc' is not a number"), "{msg}");
    // The field is the path inside the specification; empty: the specification as a whole.
    assert!(msg.starts_with("invalid value for '':"), "{msg}");
}

#[test]
fn invalid_other_specs_name_the_culprit() {
    let cases: [(&str, &[&str], &[&str]); 9] = [
        (
            r#"{"type":"order","values":["a","b"],"levels":[1]}"#,
            &["a", "zz"],
            &["'zz'", "not in the explicit order"],
        ),
        (
            r#"{"type":"order","values":["a","a"]}"#,
            &["a"],
            &["'a' is listed twice"],
        ),
        (
            r#"{"type":"order","order":"numeric","levels":[2]}"#,
            &["1", "x"],
            &["value 'x' is not a number"],
        ),
        (
            r#"{"type":"order","levels":[0]}"#,
            &["a"],
            &["levels[0]", "group size 0"],
        ),
        (
            r#"{"type":"masking","domain_size":1}"#,
            &["1", "2"],
            &["domain_size 1", "2 distinct values"],
        ),
        (
            r#"{"type":"date","format":"dd.MM.yyyy"}"#,
            &["31.01.2020", "31.02.2020"],
            &["value '31.02.2020'", "dd.MM.yyyy"],
        ),
        (
            r#"{"type":"date","format":"yyyy-MM"}"#,
            &["2020-01"],
            &["yyyy-MM", "no dd"],
        ),
        (
            r#"{"type":"date","levels":["year","quarter"]}"#,
            &["2020-01-01"],
            &["levels[1]", "'quarter' cannot follow 'year'"],
        ),
        (r#"{"type":"suppression"}"#, &[], &["no values"]),
    ];
    for (json, values, needles) in cases {
        let msg = error(&spec(json), values);
        for needle in needles {
            assert!(msg.contains(needle), "{json}: {msg}");
        }
    }
}
