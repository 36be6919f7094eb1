//! Property tests of the hierarchy builders and the type detection: for random columns and
//! specifications the result covers every value, has rows of equal length, is monotone (passes
//! `Hierarchy::from_rows`), encodes against the column, has deterministic labels (independent
//! of the order of the input) and valid analytic shares (in [0, 1], non-decreasing along each
//! row, 1 at the top, one share per label).

use std::collections::HashMap;

use deid_engine::calendar::{civil_from_days, days_from_civil};
use deid_engine::hierarchy::builder::{
    DateGranularity, DateSpec, GroupSizes, HierarchySpec, IntervalDef, IntervalSpec, MaskingSpec,
    Number, OrderLabels, OrderSpec, Side, SortOrder,
};
use deid_engine::profile::detect;
use deid_engine::{Hierarchy, Table};
use proptest::prelude::*;

fn column_table(values: &[String]) -> Table {
    let rows: Vec<Vec<String>> = values.iter().map(|v| vec![v.clone()]).collect();
    Table::from_rows(&["c"], &rows).unwrap()
}

/// Checks every structural property of a built hierarchy; `height` if known in advance.
fn check(
    spec: &HierarchySpec,
    values: &[String],
    height: Option<usize>,
) -> Result<(), TestCaseError> {
    let table = column_table(values);
    let column = table.column(0);
    let h = spec
        .build(column)
        .map_err(|e| TestCaseError::fail(format!("{spec:?} on {values:?}: {e}")))?;
    let rows = h.rows();
    let width = rows[0].len();
    if let Some(expected) = height {
        prop_assert_eq!(width, expected);
    }
    prop_assert!(rows.iter().all(|r| r.len() == width));
    // Covers every value.
    for v in column.dict.values() {
        prop_assert!(rows.iter().any(|r| r[0] == v), "value {:?} not covered", v);
    }
    // Monotone (re-validated from scratch) and encodable.
    Hierarchy::from_rows(rows.to_vec(), "c").map_err(|e| TestCaseError::fail(e.to_string()))?;
    h.encode(column)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    // Top level is a single value.
    let top: std::collections::HashSet<&str> = rows.iter().map(|r| r[width - 1].as_str()).collect();
    prop_assert_eq!(top.len(), 1);
    // Shares.
    let shares = h.shares().expect("builders attach shares");
    let n = rows.len() as f64;
    let mut per_label: Vec<HashMap<&str, f64>> = vec![HashMap::new(); width];
    for (row, s) in rows.iter().zip(shares) {
        prop_assert_eq!(s.len(), width);
        prop_assert!(s.iter().all(|x| (0.0..=1.0).contains(x)), "{:?}", s);
        prop_assert!(s.windows(2).all(|w| w[0] <= w[1]), "{:?}", s);
        prop_assert_eq!(s[width - 1], 1.0);
        if !matches!(spec, HierarchySpec::Masking(m) if m.domain_size.is_some()) {
            prop_assert!((s[0] - 1.0 / n).abs() < 1e-12);
        }
        for (l, (label, &share)) in row.iter().zip(s).enumerate() {
            let prev = *per_label[l].entry(label.as_str()).or_insert(share);
            prop_assert!(
                prev == share,
                "label {} at level {} has shares {} and {}",
                label,
                l,
                prev,
                share
            );
        }
    }
    // Deterministic: the reversed input gives the same table.
    let reversed: Vec<String> = values.iter().rev().cloned().collect();
    let again = spec.build(column_table(&reversed).column(0)).unwrap();
    prop_assert_eq!(again.rows(), rows);
    prop_assert_eq!(again.shares(), h.shares());
    Ok(())
}

/// Every `[a, b[` label has share max(1/N, (b − a)/R), R = the span of all labels.
fn interval_shares_match_label_widths(
    spec: &HierarchySpec,
    values: &[String],
) -> Result<(), TestCaseError> {
    let h = spec.build_values("c", values).unwrap();
    let parse = |label: &str| -> Option<(f64, f64)> {
        let inner = label.strip_prefix('[')?.strip_suffix('[')?;
        let (a, b) = inner.split_once(", ")?;
        Some((a.parse().ok()?, b.parse().ok()?))
    };
    let bounds: Vec<(f64, f64)> = h
        .rows()
        .iter()
        .flat_map(|r| r[1..].iter().filter_map(|l| parse(l)))
        .collect();
    if bounds.is_empty() {
        return Ok(());
    }
    let lo = bounds.iter().map(|b| b.0).fold(f64::INFINITY, f64::min);
    let hi = bounds.iter().map(|b| b.1).fold(f64::NEG_INFINITY, f64::max);
    let n = h.rows().len() as f64;
    for (row, shares) in h.rows().iter().zip(h.shares().unwrap()) {
        for (label, &share) in row.iter().zip(shares).skip(1) {
            if let Some((a, b)) = parse(label) {
                let expected = ((b - a) / (hi - lo)).max(1.0 / n);
                prop_assert!(
                    (share - expected).abs() < 1e-9,
                    "{}: {} vs {}",
                    label,
                    share,
                    expected
                );
            }
        }
    }
    Ok(())
}

fn group_sizes() -> impl Strategy<Value = GroupSizes> {
    prop_oneof![
        (1u64..5).prop_map(GroupSizes::Uniform),
        prop::collection::vec(1u64..5, 1..4).prop_map(GroupSizes::Cycle),
    ]
}

/// A decimal with 0 to 3 fractional digits in [-10^4, 10^4].
fn decimal(scale: u32) -> impl Strategy<Value = String> {
    (-10_000i64 * 10i64.pow(scale)..10_000i64 * 10i64.pow(scale)).prop_map(move |u| {
        Number::parse(&format!("{}e-{scale}", u))
            .unwrap()
            .to_string()
    })
}

/// Numbers near the limits: up to 19 integer digits or 18 fractional digits.
fn extreme() -> impl Strategy<Value = String> {
    prop_oneof![
        "-?[1-9][0-9]{0,18}",
        "-?0\\.[0-9]{0,17}[1-9]",
        "-?[1-9][0-9]{0,9}\\.[0-9]{1,8}",
        Just("9999999999999999999".to_string()),
        Just("-9999999999999999999".to_string()),
        Just("0.000000000000000001".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn regular_intervals(
        scale in 0u32..3,
        values in prop::collection::vec(decimal(2), 1..40),
        width in 1i64..3000,
        start in -5000i64..5000,
        coding in (prop::option::of(-5000i64..0), prop::option::of(0i64..5000)),
        levels in prop::collection::vec(group_sizes(), 0..4),
        with_missing in any::<bool>(),
    ) {
        let num = |u: i64| Number::parse(&format!("{u}e-{scale}")).unwrap();
        let mut spec = IntervalSpec::regular(num(width));
        spec.start = Some(num(start));
        spec.bottom_coding = coding.0.map(num);
        spec.top_coding = coding.1.map(num);
        spec.levels = levels.clone();
        let mut values = values;
        if with_missing {
            values.push(String::new());
        }
        let spec = HierarchySpec::Interval(spec);
        check(&spec, &values, Some(levels.len() + 3))?;
        if coding == (None, None) {
            interval_shares_match_label_widths(&spec, &values)?;
        }
    }

    #[test]
    fn explicit_intervals(
        mut cuts in prop::collection::btree_set(-1000i64..1000, 2..8),
        picks in prop::collection::vec(0.0f64..1.0, 1..30),
        labelled in prop::collection::vec(any::<bool>(), 8),
        levels in prop::collection::vec(group_sizes(), 0..3),
        rotation in 0usize..8,
    ) {
        let cuts: Vec<i64> = std::mem::take(&mut cuts).into_iter().collect();
        let (lo, hi) = (cuts[0], cuts[cuts.len() - 1]);
        let mut intervals: Vec<IntervalDef> = cuts
            .windows(2)
            .enumerate()
            .map(|(i, w)| IntervalDef {
                from: Number::from(w[0]),
                to: Number::from(w[1]),
                label: labelled[i].then(|| format!("group {i}")),
            })
            .collect();
        // The builder accepts intervals in any order.
        let k = intervals.len();
        intervals.rotate_left(rotation % k);
        let values: Vec<String> = picks
            .iter()
            .map(|p| (lo + ((hi - lo) as f64 * p) as i64).min(hi - 1).to_string())
            .collect();
        let spec = IntervalSpec { levels: levels.clone(), ..IntervalSpec::explicit(intervals) };
        check(&HierarchySpec::Interval(spec), &values, Some(levels.len() + 3))?;
    }

    #[test]
    fn order_based(
        values in prop::collection::vec("[a-e]{0,3}|-?[0-9]{1,3}", 1..30),
        levels in prop::collection::vec(group_sizes(), 0..4),
        set in any::<bool>(),
        order in prop_oneof![Just(SortOrder::Auto), Just(SortOrder::Lexicographic)],
    ) {
        let spec = OrderSpec {
            order,
            labels: if set { OrderLabels::Set } else { OrderLabels::Range },
            ..OrderSpec::new(levels.clone())
        };
        check(&HierarchySpec::Order(spec), &values, Some(levels.len() + 2))?;
    }

    #[test]
    fn order_based_explicit(
        domain in prop::collection::btree_set("[a-z]{1,4}", 1..20),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 1..20),
        levels in prop::collection::vec(group_sizes(), 0..3),
    ) {
        let domain: Vec<String> = domain.into_iter().rev().collect();
        let values: Vec<String> = picks.iter().map(|i| domain[i.index(domain.len())].clone()).collect();
        let spec = OrderSpec { values: Some(domain.clone()), ..OrderSpec::new(levels.clone()) };
        let h = HierarchySpec::Order(spec.clone()).build_values("c", &values).unwrap();
        // One row per listed value, in the listed order.
        let leaves: Vec<&str> = h.rows().iter().map(|r| r[0].as_str()).collect();
        prop_assert_eq!(leaves, domain.iter().map(String::as_str).collect::<Vec<_>>());
        check(&HierarchySpec::Order(spec), &values, Some(levels.len() + 2))?;
    }

    #[test]
    fn masking(
        values in prop::collection::vec("[0-9]{0,6}|[a-zä]{1,4}", 1..30),
        left_redact in any::<bool>(),
        left_pad in any::<bool>(),
        pad_char in prop::sample::select(vec!['*', '0', ' ']),
        redaction_char in prop::sample::select(vec!['*', 'x', '#']),
        alphabet in prop::option::of(1u64..40),
        domain_extra in prop::option::of(0u64..1000),
    ) {
        let distinct = values.iter().collect::<std::collections::HashSet<_>>().len() as u64;
        let spec = MaskingSpec {
            redact_from: if left_redact { Side::Left } else { Side::Right },
            pad_side: if left_pad { Side::Left } else { Side::Right },
            pad_char,
            redaction_char,
            alphabet_size: alphabet,
            domain_size: domain_extra.map(|e| distinct + e),
        };
        let len = values.iter().map(|v| v.chars().count()).max().unwrap_or(0).max(1);
        check(&HierarchySpec::Masking(spec), &values, Some(len + 1))?;
    }

    #[test]
    fn dates(
        days in prop::collection::vec(
            days_from_civil(1, 1, 1)..days_from_civil(9999, 1, 1), 1..30),
        format in prop::sample::select(vec!["yyyy-MM-dd", "dd.MM.yyyy", "MM/dd/yyyy", "yyyyMMdd", "d.M.yyyy"]),
        chain in prop::sample::subsequence(vec![
            DateGranularity::Day, DateGranularity::Month, DateGranularity::Quarter,
            DateGranularity::Year, DateGranularity::Decade, DateGranularity::Century], 0..6),
        week in any::<bool>(),
        with_missing in any::<bool>(),
    ) {
        let mut values: Vec<String> = days
            .iter()
            .map(|&d| {
                let c = civil_from_days(d);
                match format {
                    "yyyy-MM-dd" => format!("{:04}-{:02}-{:02}", c.year, c.month, c.day),
                    "dd.MM.yyyy" => format!("{:02}.{:02}.{:04}", c.day, c.month, c.year),
                    "MM/dd/yyyy" => format!("{:02}/{:02}/{:04}", c.month, c.day, c.year),
                    "yyyyMMdd" => format!("{:04}{:02}{:02}", c.year, c.month, c.day),
                    _ => format!("{}.{}.{:04}", c.day, c.month, c.year),
                }
            })
            .collect();
        if with_missing {
            values.push(String::new());
        }
        let mut levels = chain;
        if week {
            // Week is only allowed last, directly after the day (or alone).
            levels.retain(|g| *g == DateGranularity::Day);
            levels.push(DateGranularity::Week);
        }
        let spec = DateSpec { format: format.to_string(), levels: levels.clone(), ..DateSpec::default() };
        check(&HierarchySpec::Date(spec), &values, Some(levels.len() + 2))?;
    }

    /// Extreme numbers and group sizes give a hierarchy or an InvalidConfig, never a panic
    /// (run without --release to have overflow checks).
    #[test]
    fn extreme_intervals_never_panic(
        values in prop::collection::vec(extreme(), 1..10),
        width in extreme(),
        start in prop::option::of(extreme()),
        coding in (prop::option::of(extreme()), prop::option::of(extreme())),
        levels in prop::collection::vec(
            prop_oneof![Just(1u64), Just(2), Just(1 << 31), 1u64..100].prop_map(GroupSizes::Uniform), 0..5),
    ) {
        let mut spec = IntervalSpec::regular(Number::parse(&width).unwrap());
        spec.start = start.map(|s| Number::parse(&s).unwrap());
        spec.bottom_coding = coding.0.map(|s| Number::parse(&s).unwrap());
        spec.top_coding = coding.1.map(|s| Number::parse(&s).unwrap());
        spec.levels = levels;
        match HierarchySpec::Interval(spec).build_values("c", &values) {
            Ok(_) | Err(deid_engine::EngineError::InvalidConfig { .. }) => {}
            Err(e) => prop_assert!(false, "unexpected error {e:?}"),
        }
    }

    #[test]
    fn suppression(values in prop::collection::vec(".{0,5}", 1..20)) {
        check(&HierarchySpec::Suppression {}, &values, Some(2))?;
    }

    /// Whatever the column, the suggested specification builds a valid hierarchy for it.
    #[test]
    fn detection_suggestions_always_build(
        values in prop_oneof![
            prop::collection::vec("[0-9]{1,3}", 1..40),
            prop::collection::vec("-?[0-9]{1,4}\\.[0-9]{1,3}", 1..40),
            prop::collection::vec("[0-9]{5}", 1..40),
            prop::collection::vec("0[0-9]{2}", 1..40),
            prop::collection::vec("(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])", 1..40),
            prop::collection::vec("(0[1-9]|1[0-9]|2[0-8])\\.(0[1-9]|1[0-2])\\.(19|20)[0-9]{2}", 1..40),
            prop::collection::vec("[a-z]{1,6}", 1..40),
            prop::collection::vec("[a-c]", 1..40),
            prop::collection::vec(".{0,4}", 1..40),
        ],
        markers in prop::collection::vec(prop::sample::select(vec!["", "?", "NA", "NULL"]), 0..3),
    ) {
        let mut values = values;
        values.extend(markers.iter().map(|m| m.to_string()));
        let table = column_table(&values);
        let profile = detect(table.column(0));
        prop_assert_eq!(profile.distinct_count, table.column(0).dict.len());
        let suggestion = profile.suggested_hierarchy.expect("detection always suggests");
        check(&suggestion, &values, None)?;
    }
}
